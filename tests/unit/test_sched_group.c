/* The scheduler's groups (OpenAI's "n", mgi run -np) on the tiny real model: the prompt is
 * evaluated once for the whole group, and each choice's tokens are exactly those of the same job
 * (same seed) run alone; greedy choices are identical; a group larger than the slots is refused;
 * a group queued behind a running job waits for its slots and still matches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "test.h"

enum { NP = 23, NG = 24 };

static engine *load(int32_t n_seq) {
    engine_params p = engine_default_params();
    p.cpu_exact = 1;
    p.n_ctx = 128 * n_seq;
    p.n_seq_max = n_seq;
    p.n_threads = 2;
    engine *e = NULL;
    char err[512];
    if (engine_load(&e, test_shared("models/aidreams260K-f32.gguf"), &p, err, sizeof err))
        printf("FAIL engine load: %s\n", err);
    return e;
}

static void job_init(sched_job *j, const int32_t *prompt, float temp, uint64_t seed, bool logprobs) {
    memset(j, 0, sizeof *j);
    j->prompt = prompt;
    j->n_prompt = NP;
    j->n_predict = NG;
    j->sp = sampler_default_params();
    j->sp.temp = temp;
    j->sp.seed = seed;
    j->ignore_eos = true;
    j->logprobs = logprobs;
}

static void job_free(sched_job *j) {
    free(j->out);
    free(j->lp);
    free(j->lp_top);
}

/* Runs until idle; the number of finished jobs, -1 on an engine failure. */
static int run_all(sched *s) {
    char err[512];
    int done = 0;
    for (;;) {
        while (sched_next_done(s)) done++;
        if (sched_idle(s)) return done;
        if (sched_step(s, err, sizeof err)) {
            printf("FAIL sched_step: %s\n", err);
            return -1;
        }
    }
}

/* The tokens of one job alone on a fresh single-slot scheduler. */
static int alone(const int32_t *prompt, float temp, uint64_t seed, int32_t *out) {
    engine *e = load(1);
    char err[512];
    sched_params sp = {.n_batch = 64, .cont_batching = true, .prefix_reuse = true};
    sched *s = e ? sched_new(e, &sp, err, sizeof err) : NULL;
    sched_job j;
    job_init(&j, prompt, temp, seed, false);
    int n = -1;
    if (s) {
        sched_submit(s, &j);
        if (run_all(s) == 1 && j.state == SCHED_LENGTH) {
            memcpy(out, j.out, (size_t)j.n_out * sizeof *out);
            n = j.n_out;
        }
    }
    job_free(&j);
    sched_free(s);
    engine_free(e);
    return n;
}

int main(void) {
    FILE *probe = fopen(test_shared("models/aidreams260K-f32.gguf"), "rb");
    if (!probe) {
        SKIP("sched group", "no aidreams260K-f32.gguf under $SHARED");
        return 0;
    }
    fclose(probe);
    int32_t prompt[NP], other[NP];
    srand(1234567u);
    for (int i = 0; i < NP; i++) {
        prompt[i] = 1 + rand() % 500;
        other[i] = 1 + rand() % 500;
    }
    uint64_t seed = 1000 + (uint64_t)(rand() % 100000);
    int32_t ref[3][NG], greedy_ref[NG];
    bool refs = true;
    for (int c = 0; c < 3; c++) refs &= alone(prompt, 0.9f, seed + (uint64_t)c, ref[c]) == NG;
    refs &= alone(prompt, 0.0f, 0, greedy_ref) == NG;
    if (!CHECK(refs, "sched group: reference runs alone", "a single job did not generate %d tokens", NG)) return 1;

    engine *e = load(4);
    if (!e) return 1;
    char err[512];
    sched_params sp = {.n_batch = 64, .cont_batching = true, .prefix_reuse = true};
    sched *s = sched_new(e, &sp, err, sizeof err);
    if (!s) return 1;

    /* three sampled choices */
    sched_job g[3];
    for (int c = 0; c < 3; c++) job_init(&g[c], prompt, 0.9f, seed + (uint64_t)c, c == 2);
    g[0].choice_next = &g[1];
    g[1].choice_next = &g[2];
    sched_submit(s, &g[0]);
    int done = run_all(s);
    sched_stats st = sched_get_stats(s);
    CHECK(done == 3, "sched group: every choice finishes", "%d of 3 finished", done);
    CHECK(st.n_prompt_eval == NP, "sched group: the prompt is evaluated once", "%lld prompt tokens evaluated, the "
          "prompt has %d", (long long)st.n_prompt_eval, NP);
    CHECK(st.n_prompt_reused == 2 * NP, "sched group: the other choices share it", "%lld reused, expected %d",
          (long long)st.n_prompt_reused, 2 * NP);
    for (int c = 0; c < 3; c++) {
        char name[96];
        snprintf(name, sizeof name, "sched group: choice %d equals its seed's run alone", c);
        CHECK(g[c].state == SCHED_LENGTH && g[c].n_out == NG && !memcmp(g[c].out, ref[c], sizeof ref[c]), name,
              "state %d, %d tokens, first %d vs %d", g[c].state, g[c].n_out, g[c].n_out ? g[c].out[0] : -1, ref[c][0]);
    }
    CHECK(memcmp(ref[0], ref[1], sizeof ref[0]) || memcmp(ref[1], ref[2], sizeof ref[0]),
          "sched group: sampled choices differ", "three seeds gave the same %d tokens", NG);
    CHECK(g[2].lp != NULL && g[2].lp[0] <= 0, "sched group: a choice's logprobs from its leader's row",
          "lp %p", (void *)g[2].lp);
    for (int c = 0; c < 3; c++) job_free(&g[c]);

    /* greedy choices, queued behind a running job on another prompt: the group waits for 3 free
     * slots (4 slots, one busy), then runs and matches the greedy run alone */
    sched_job busy, gg[3];
    job_init(&busy, other, 0.0f, 0, false);
    for (int c = 0; c < 3; c++) job_init(&gg[c], prompt, 0.0f, (uint64_t)c, false);
    sched_job extra;
    job_init(&extra, other, 0.0f, 0, false);
    gg[0].choice_next = &gg[1];
    gg[1].choice_next = &gg[2];
    sched_submit(s, &busy);
    sched_submit(s, &extra);
    sched_submit(s, &gg[0]);
    done = run_all(s);
    bool same = done == 5;
    for (int c = 0; c < 3; c++) same &= gg[c].n_out == NG && !memcmp(gg[c].out, greedy_ref, sizeof greedy_ref);
    CHECK(same, "sched group: greedy choices behind other jobs equal the greedy run alone", "%d finished; choice "
          "lengths %d %d %d", done, gg[0].n_out, gg[1].n_out, gg[2].n_out);
    CHECK(busy.n_out == NG && extra.n_out == NG && !memcmp(busy.out, extra.out, sizeof greedy_ref),
          "sched group: the other jobs run as usual", "%d and %d tokens", busy.n_out, extra.n_out);
    job_free(&busy);
    job_free(&extra);
    for (int c = 0; c < 3; c++) job_free(&gg[c]);

    /* more choices than slots */
    sched_job big[5];
    for (int c = 0; c < 5; c++) {
        job_init(&big[c], prompt, 0.0f, 0, false);
        big[c].choice_next = c < 4 ? &big[c + 1] : NULL;
    }
    sched_submit(s, &big[0]);
    done = run_all(s);
    bool refused = done == 5;
    for (int c = 0; c < 5; c++) refused &= big[c].state == SCHED_ERROR && strstr(big[c].err, "-np") != NULL;
    CHECK(refused, "sched group: 5 choices on 4 sequences are refused, naming -np", "%d finished: %s", done,
          big[0].err);
    for (int c = 0; c < 5; c++) job_free(&big[c]);
    sched_free(s);
    engine_free(e);
    return test_failures_ ? 1 : 0;
}
