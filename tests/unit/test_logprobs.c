/* sampler_logprobs: the log-softmax of logits in double against a long-double reference computed
 * the plain way (log of exp over the sum of exps), the top alternatives in order (ties by id),
 * and logits large enough that a naive f32 softmax would overflow. */
#include <math.h>
#include <stdlib.h>

#include "engine/sampler.h"
#include "test.h"

static long double ref_logprob(const float *l, int n, int id, float shift) {
    long double sum = 0;
    for (int i = 0; i < n; i++) sum += expl((long double)l[i] - shift);
    return ((long double)l[id] - shift) - logl(sum);
}

int main(void) {
    enum { N = 4096 };
    float *l = malloc(N * sizeof *l);
    sampler_rng rng;
    sampler_rng_seed(&rng, 7);
    for (int i = 0; i < N; i++) l[i] = (float)(sampler_rng_uniform(&rng) * 20.0 - 10.0);
    sampler_logprob top[SAMPLER_MAX_TOP_LOGPROBS];
    double chosen;
    int id = 123;
    int n = sampler_logprobs(l, N, id, 5, &chosen, top);
    double err = fabs(chosen - (double)ref_logprob(l, N, id, 0));
    for (int k = 0; k < n; k++) err = fmax(err, fabs(top[k].logprob - (double)ref_logprob(l, N, top[k].id, 0)));
    CHECK(n == 5 && err < 1e-12, "logprobs match a long-double log-softmax", "n %d max error %g", n, err);
    /* the top list: the 5 largest logits, descending */
    int ok = 1;
    for (int k = 0; k < n; k++) {
        int above = 0;
        for (int i = 0; i < N; i++) above += l[i] > l[top[k].id];
        ok &= above == k && (k == 0 || top[k].logprob <= top[k - 1].logprob);
    }
    CHECK(ok, "logprobs top alternatives are the largest logits in order", "top0 id %d", top[0].id);
    /* probabilities sum to one */
    double total = 0;
    for (int i = 0; i < N; i++) {
        double lp;
        sampler_logprobs(l, N, i, 0, &lp, top);
        total += exp(lp);
    }
    CHECK(fabs(total - 1) < 1e-9, "logprobs exponentiate to a distribution", "sum %.15f", total);
    /* huge logits: exp(1000) overflows a float or double computed naively */
    for (int i = 0; i < N; i++) l[i] += 1000.0f;
    n = sampler_logprobs(l, N, id, 3, &chosen, top);
    err = fabs(chosen - (double)ref_logprob(l, N, id, 1000.0f));
    CHECK(isfinite(chosen) && err < 1e-9, "logprobs stay finite for logits near 1000", "error %g", err);
    /* ties: the lower id first; n_top capped by the vocabulary and by the maximum */
    float t[4] = {1, 3, 3, 2};
    n = sampler_logprobs(t, 4, 1, 10, &chosen, top);
    CHECK(n == 4 && top[0].id == 1 && top[1].id == 2 && top[2].id == 3 && top[3].id == 0 &&
              fabs(top[0].logprob - top[1].logprob) == 0 && chosen == top[0].logprob,
          "logprobs ties by lower id, n_top capped by the vocabulary", "n %d ids %d %d %d %d", n, top[0].id,
          top[1].id, top[2].id, top[3].id);
    n = sampler_logprobs(l, N, 0, 50, NULL, top);
    CHECK(n == SAMPLER_MAX_TOP_LOGPROBS, "logprobs n_top capped at SAMPLER_MAX_TOP_LOGPROBS", "n %d", n);
    free(l);
    return test_done();
}
