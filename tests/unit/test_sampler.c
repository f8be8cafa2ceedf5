/* The sampler: each filter of the chain on hand-made distributions, greedy and top-k 1, seeded
 * reproducibility, draw frequencies against the softmax, and grammar-constrained picks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/grammar.h"
#include "engine/sampler.h"
#include "test.h"

/* Candidates with ids 0..n-1 and the log of the given probabilities. */
static size_t cands(sampler_cand *c, const double *p, size_t n) {
    for (size_t i = 0; i < n; i++) c[i] = (sampler_cand){(int32_t)i, (float)log(p[i])};
    return n;
}

static int ids_are(const sampler_cand *c, size_t n, const int32_t *want, size_t n_want) {
    if (n != n_want) return 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].id != want[i]) return 0;
    return 1;
}

static void test_filters(void) {
    sampler_cand c[8];
    const double p4[4] = {0.15, 0.5, 0.05, 0.3};

    size_t n = sampler_top_k(c, cands(c, p4, 4), 2);
    CHECK(ids_are(c, n, (int32_t[]){1, 3}, 2), "sampler top-k 2 keeps the two most likely, sorted", "n=%zu", n);
    n = sampler_top_k(c, cands(c, p4, 4), 0);
    CHECK(n == 4 && c[0].id == 0, "sampler top-k 0 is off", "n=%zu", n);
    n = sampler_top_k(c, cands(c, p4, 4), 10);
    CHECK(n == 4, "sampler top-k larger than the list keeps all", "n=%zu", n);

    n = sampler_top_p(c, cands(c, p4, 4), 0.7f);
    CHECK(ids_are(c, n, (int32_t[]){1, 3}, 2), "sampler top-p 0.7 keeps 0.5+0.3", "n=%zu", n);
    n = sampler_top_p(c, cands(c, p4, 4), 0.85f);
    CHECK(ids_are(c, n, (int32_t[]){1, 3, 0}, 3), "sampler top-p 0.85 keeps three", "n=%zu", n);
    n = sampler_top_p(c, cands(c, p4, 4), 0.1f);
    CHECK(ids_are(c, n, (int32_t[]){1}, 1), "sampler top-p 0.1 keeps the top token", "n=%zu", n);
    n = sampler_top_p(c, cands(c, p4, 4), 1.0f);
    CHECK(n == 4, "sampler top-p 1 is off", "n=%zu", n);

    n = sampler_min_p(c, cands(c, p4, 4), 0.2f);  /* floor 0.1: drops 0.05 */
    CHECK(ids_are(c, n, (int32_t[]){0, 1, 3}, 3), "sampler min-p 0.2 drops p < 0.1, order kept", "n=%zu", n);
    n = sampler_min_p(c, cands(c, p4, 4), 0.7f);  /* floor 0.35 */
    CHECK(ids_are(c, n, (int32_t[]){1}, 1), "sampler min-p 0.7 keeps the top token", "n=%zu", n);
    n = sampler_min_p(c, cands(c, p4, 4), 0.0f);
    CHECK(n == 4, "sampler min-p 0 is off", "n=%zu", n);

    c[0] = (sampler_cand){0, 2.0f};
    c[1] = (sampler_cand){1, 4.0f};
    n = sampler_temperature(c, 2, 2.0f);
    CHECK(n == 2 && c[0].logit == 1.0f && c[1].logit == 2.0f, "sampler temperature 2 halves the logits",
          "%g %g", c[0].logit, c[1].logit);
    n = sampler_temperature(c, 2, 0.0f);
    CHECK(n == 1 && c[0].id == 1, "sampler temperature 0 keeps the argmax", "n=%zu id=%d", n, c[0].id);

    c[0] = (sampler_cand){0, 2.0f};
    c[1] = (sampler_cand){1, -2.0f};
    c[2] = (sampler_cand){2, 1.0f};
    const int32_t last[3] = {0, 1, 0};
    sampler_penalize(c, 3, last, 3, (sampler_penalties){2.0f, 0.0f, 0.0f});
    CHECK(c[0].logit == 1.0f && c[1].logit == -4.0f && c[2].logit == 1.0f,
          "sampler repeat penalty divides positive, multiplies negative, once per token",
          "%g %g %g", c[0].logit, c[1].logit, c[2].logit);
    /* llama.cpp: after the repeat penalty, minus count x frequency + presence (token 0 twice) */
    c[0] = (sampler_cand){0, 2.0f};
    c[1] = (sampler_cand){1, -2.0f};
    c[2] = (sampler_cand){2, 1.0f};
    sampler_penalize(c, 3, last, 3, (sampler_penalties){2.0f, 0.25f, 0.5f});
    CHECK(c[0].logit == 0.0f && c[1].logit == -4.75f && c[2].logit == 1.0f,
          "sampler frequency and presence penalties: minus count x 0.25 + 0.5 after the repeat penalty",
          "%g %g %g", c[0].logit, c[1].logit, c[2].logit);
    c[0] = (sampler_cand){0, 2.0f};
    c[1] = (sampler_cand){1, -2.0f};
    c[2] = (sampler_cand){2, 1.0f};
    sampler_penalize(c, 3, last, 3, (sampler_penalties){1.0f, 1.0f, 0.0f});
    CHECK(c[0].logit == 0.0f && c[1].logit == -3.0f && c[2].logit == 1.0f,
          "sampler frequency penalty alone (repeat 1) lowers by the count",
          "%g %g %g", c[0].logit, c[1].logit, c[2].logit);

    const double p2[2] = {0.25, 0.75};
    cands(c, p2, 2);
    CHECK(sampler_pick(c, 2, 0.2) == 0 && sampler_pick(c, 2, 0.3) == 1 && sampler_pick(c, 2, 0.999) == 1,
          "sampler pick follows the cumulative softmax", "");
}

static void random_logits(sampler_rng *r, float *v, int n) {
    for (int i = 0; i < n; i++) v[i] = (float)(sampler_rng_uniform(r) * 8.0 - 4.0);
}

static int32_t argmax(const float *v, int n) {
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static void test_chain(void) {
    enum { V = 300 };
    char err[256];
    float logits[V];
    sampler_rng r;
    sampler_rng_seed(&r, 7);

    sampler_params p = sampler_default_params();
    p.temp = 1.5f;  /* a flat enough distribution that seeds matter */
    p.seed = 1234;
    sampler *a = sampler_new(&p, V, err, sizeof err), *b = sampler_new(&p, V, err, sizeof err);
    p.seed = 4321;
    sampler *c = sampler_new(&p, V, err, sizeof err);
    int same = 1, differs = 0;
    for (int i = 0; i < 200; i++) {
        random_logits(&r, logits, V);
        int32_t x = sampler_sample(a, logits), y = sampler_sample(b, logits), z = sampler_sample(c, logits);
        same &= x == y;
        differs |= x != z;
        sampler_accept(a, x);
        sampler_accept(b, y);
        sampler_accept(c, z);
    }
    CHECK(same, "sampler same seed, same tokens", "sequences differ");
    CHECK(differs, "sampler other seed, other tokens", "200 draws identical");
    sampler_free(a);
    sampler_free(b);
    sampler_free(c);

    p = sampler_default_params();
    p.top_k = 1;
    p.temp = 5.0f;
    sampler *k1 = sampler_new(&p, V, err, sizeof err);
    p.temp = 0.0f;
    p.top_k = 40;
    sampler *greedy = sampler_new(&p, V, err, sizeof err);
    int ok_k1 = 1, ok_greedy = 1;
    for (int i = 0; i < 100; i++) {
        random_logits(&r, logits, V);
        ok_k1 &= sampler_sample(k1, logits) == argmax(logits, V);
        ok_greedy &= sampler_sample(greedy, logits) == argmax(logits, V);
    }
    CHECK(ok_k1, "sampler top-k 1 equals greedy", "a draw was not the argmax");
    CHECK(ok_greedy, "sampler temp 0 is greedy", "a draw was not the argmax");
    sampler_free(k1);
    sampler_free(greedy);

    /* The penalty applies before greedy: a repeated token loses its place. */
    p = sampler_default_params();
    p.temp = 0;
    p.repeat_penalty = 4.0f;
    p.repeat_last_n = 2;
    sampler *pen = sampler_new(&p, 3, err, sizeof err);
    float l3[3] = {3.0f, 2.0f, 1.0f};
    sampler_accept(pen, 0);
    int32_t t1 = sampler_sample(pen, l3);
    sampler_accept(pen, 1);
    sampler_accept(pen, 1);  /* token 0 leaves the 2-token window */
    int32_t t2 = sampler_sample(pen, l3);
    CHECK(t1 == 1 && t2 == 0, "sampler repeat penalty over the last n tokens", "got %d then %d", t1, t2);
    sampler_free(pen);

    /* A presence or frequency penalty alone also makes greedy picks look at the history. */
    p = sampler_default_params();
    p.temp = 0;
    p.presence_penalty = 1.5f;
    pen = sampler_new(&p, 3, err, sizeof err);
    int not_greedy = !sampler_is_greedy(pen);
    sampler_accept(pen, 0);
    t1 = sampler_sample(pen, l3); /* 3 - 1.5 < 2 */
    sampler_free(pen);
    p.presence_penalty = 0;
    p.freq_penalty = 0.75f;
    pen = sampler_new(&p, 3, err, sizeof err);
    not_greedy &= !sampler_is_greedy(pen);
    sampler_accept(pen, 0);
    t2 = sampler_sample(pen, l3); /* 3 - 0.75 > 2 */
    sampler_accept(pen, 0);
    int32_t t3 = sampler_sample(pen, l3); /* 3 - 1.5 < 2 */
    sampler_free(pen);
    CHECK(not_greedy && t1 == 1 && t2 == 0 && t3 == 1,
          "sampler presence penalty once per token, frequency penalty per occurrence (temp 0)",
          "greedy flag %d, got %d, %d, %d", !not_greedy, t1, t2, t3);

    /* Skipped ids (--ignore-eos) are never picked: greedy takes the next best, draws never land on them. */
    p = sampler_default_params();
    p.temp = 0;
    pen = sampler_new(&p, 3, err, sizeof err);
    const int32_t skip0[1] = {0};
    int sk_ok = sampler_skip(pen, skip0, 1) == 0 && sampler_is_greedy(pen) && sampler_sample(pen, l3) == 1;
    int32_t many[SAMPLER_MAX_SKIP + 1] = {0};
    sk_ok &= sampler_skip(pen, many, SAMPLER_MAX_SKIP + 1) == -1;
    sampler_free(pen);
    p = sampler_default_params();
    p.temp = 1.0f;
    p.seed = 5;
    pen = sampler_new(&p, 3, err, sizeof err);
    sampler_skip(pen, skip0, 1);
    int drawn0 = 0;
    for (int i = 0; i < 2000; i++) drawn0 += sampler_sample(pen, l3) == 0;
    sampler_free(pen);
    CHECK(sk_ok && drawn0 == 0, "sampler skipped ids are never picked (greedy and 2000 draws)", "ok %d, drawn %d times",
          sk_ok, drawn0);

    /* A logit bias comes first: +2 makes token 2 the greedy pick, -inf keeps token 0 out of every
     * draw; either makes the sampler non-greedy; an id outside the vocabulary is refused. */
    p = sampler_default_params();
    p.temp = 0;
    const sampler_bias up2[1] = {{2, 2.5f}}, no0[2] = {{0, -INFINITY}, {1, 0.5f}};
    p.bias = up2;
    p.n_bias = 1;
    pen = sampler_new(&p, 3, err, sizeof err);
    int b_ok = pen && !sampler_is_greedy(pen) && sampler_sample(pen, l3) == 2; /* 1 + 2.5 > 3 */
    sampler_free(pen);
    p.temp = 1.0f;
    p.seed = 9;
    p.bias = no0;
    p.n_bias = 2;
    pen = sampler_new(&p, 3, err, sizeof err);
    drawn0 = 0;
    for (int i = 0; pen && i < 2000; i++) drawn0 += sampler_sample(pen, l3) == 0;
    sampler_free(pen);
    const sampler_bias far[1] = {{3, 1.0f}};
    p.bias = far;
    p.n_bias = 1;
    sampler *far_s = sampler_new(&p, 3, err, sizeof err);
    CHECK(b_ok && drawn0 == 0 && !far_s && strstr(err, "token 3"), "sampler logit bias: +2.5 turns the greedy pick, -inf never drawn, id 3 of 3 refused",
          "ok %d, drawn %d, err '%s'", b_ok, drawn0, err);
    sampler_free(far_s);

    /* Frequencies of plain softmax draws. */
    p = sampler_default_params();
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.temp = 1.0f;
    p.seed = 99;
    sampler *s = sampler_new(&p, 3, err, sizeof err);
    float lp[3] = {(float)log(0.5), (float)log(0.3), (float)log(0.2)};
    int count[3] = {0};
    enum { N = 20000 };
    for (int i = 0; i < N; i++) count[sampler_sample(s, lp)]++;
    double f0 = (double)count[0] / N, f1 = (double)count[1] / N, f2 = (double)count[2] / N;
    CHECK(fabs(f0 - 0.5) < 0.02 && fabs(f1 - 0.3) < 0.02 && fabs(f2 - 0.2) < 0.02,
          "sampler draw frequencies follow the softmax", "%.3f %.3f %.3f", f0, f1, f2);
    sampler_free(s);

    p = sampler_default_params();
    p.repeat_penalty = 0;
    sampler *bad = sampler_new(&p, 3, err, sizeof err);
    CHECK(!bad && strstr(err, "penalty"), "sampler refuses a zero repeat penalty", "%s", bad ? "accepted" : err);
    sampler_free(bad);
}

/* The reference order of sampler.h: logit descending, ties by id. */
static int ref_cmp(const void *a, const void *b) {
    const sampler_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* top-k's heap selection and penalize's lookup against the plain definitions, on vocabulary-sized
 * random lists with many tied logits (a fresh seed each run: the time), fresh and shuffled. */
static void test_large(void) {
    enum { N = 32000 };
    static sampler_cand c[N], ref[N], shuf[N];
    sampler_rng r;
    sampler_rng_seed(&r, (uint64_t)time(NULL));
    int ok_k = 1, ok_p = 1;
    for (int round = 0; round < 8; round++) {
        const int ks[] = {1, 2, 40, 40, 100, 1000, N - 1, 7};
        for (int i = 0; i < N; i++) /* a coarse grid of values: ties are common */
            c[i] = (sampler_cand){i, (float)((int)(sampler_rng_uniform(&r) * 300) - 150) * 0.125f};
        memcpy(ref, c, sizeof c);
        qsort(ref, N, sizeof *ref, ref_cmp);
        memcpy(shuf, c, sizeof c);
        size_t n = sampler_top_k(shuf, N, ks[round]);
        ok_k &= n == (size_t)ks[round] && !memcmp(shuf, ref, n * sizeof *ref);
        /* penalties: a history with repeats, on the fresh list and on a reversed copy */
        int32_t last[64];
        for (int j = 0; j < 64; j++) last[j] = (int32_t)(sampler_rng_uniform(&r) * (j < 32 ? N : 40));
        const float fq = (float)(sampler_rng_uniform(&r) * 0.5), pr = (float)(sampler_rng_uniform(&r) * 0.5);
        float want[N];
        for (int i = 0; i < N; i++) {
            int count = 0;
            for (int j = 0; j < 64; j++) count += last[j] == i;
            want[i] = !count ? c[i].logit : c[i].logit <= 0 ? c[i].logit * 1.3f : c[i].logit / 1.3f;
            if (count) want[i] -= (float)count * fq + pr;
        }
        for (int i = 0; i < N; i++) shuf[i] = c[N - 1 - i];
        sampler_penalize(c, N, last, 64, (sampler_penalties){1.3f, fq, pr});
        sampler_penalize(shuf, N, last, 64, (sampler_penalties){1.3f, fq, pr});
        for (int i = 0; i < N; i++) ok_p &= c[i].logit == want[i] && shuf[N - 1 - i].logit == want[i];
    }
    CHECK(ok_k, "sampler top-k on 32000 random candidates equals a full sort's first k", "differs");
    CHECK(ok_p, "sampler penalties (repeat, frequency, presence) on 32000 candidates, fresh and reordered, once per id",
          "differs");
}

/* A toy vocabulary: single characters, two multi-character pieces, a control token (no bytes)
 * and an end token. */
enum { GV_N = 9, GV_EOG = 8 };
static const char *const gv_pieces[GV_N] = {"a", "b", "{", "}", "ab", "\"", "x", "", ""};

static grammar_vocab *toy_vocab(void) {
    size_t lens[GV_N];
    for (int i = 0; i < GV_N; i++) lens[i] = strlen(gv_pieces[i]);
    char err[256];
    const int32_t eog = GV_EOG;
    return grammar_vocab_new(gv_pieces, lens, GV_N, &eog, 1, err, sizeof err);
}

static sampler *grammar_sampler(const char *gbnf, float temp, uint64_t seed, grammar **g, const grammar_vocab *v) {
    char err[256];
    sampler_params p = sampler_default_params();
    p.temp = temp;
    p.seed = seed;
    sampler *s = sampler_new(&p, GV_N, err, sizeof err);
    *g = grammar_parse(gbnf, strlen(gbnf), err, sizeof err);
    const int32_t eog = GV_EOG;
    if (!s || !*g || sampler_set_grammar(s, grammar_state_new(*g), v, &eog, 1)) {
        sampler_free(s);
        return NULL;
    }
    return s;
}

/* Generates up to max picks into text (the pieces joined); the picks' count, -1 on an error pick.
 * *done: sampler_grammar_done after the last pick; *eog: the last pick was the end token. */
static int grammar_gen(sampler *s, const float *logits, char *text, int max, int *done, int *eog) {
    int n = 0;
    *text = 0;
    *done = *eog = 0;
    for (; n < max && !*done && !*eog; n++) {
        int32_t id = sampler_sample(s, logits);
        if (id < 0) return -1;
        sampler_accept(s, id);
        *eog = id == GV_EOG;
        strcat(text, gv_pieces[id]);
        *done = sampler_grammar_done(s);
    }
    return n;
}

static void test_grammar(void) {
    grammar_vocab *v = toy_vocab();
    CHECK(v != NULL, "sampler grammar: toy vocabulary", "NULL");
    if (!v) return;
    grammar *g;
    char text[256];
    int done = 0, eog = 0;
    /* The model wants "x" (not in the language) above all: greedy picks only what "ab" allows,
     * and stops once "ab" is whole (only the end token may follow) without picking it. */
    float lg[GV_N] = {0, 0, 0, 0, 0, 0, 9, 0, 0};
    lg[0] = 2; /* "a" before "ab" */
    sampler *s = grammar_sampler("root ::= \"ab\"", 0, 1, &g, v);
    CHECK(s && !sampler_is_greedy(s), "sampler grammar: a constrained sampler never takes the backend's greedy path",
          "is_greedy");
    int n = s ? grammar_gen(s, lg, text, 10, &done, &eog) : -1;
    CHECK(n == 2 && !strcmp(text, "ab") && done && !eog,
          "sampler grammar: greedy picks the best allowed token, ends when only the end token may follow",
          "n=%d text='%s' done=%d eog=%d", n, text, done, eog);
    sampler_free(s);
    grammar_free(g);

    /* Sampled at temperature 1 with 200 seeds over a language of nested braces with a's: every
     * text is in it (checked by a state fed the bytes) and ends complete. */
    const char *nest = "root ::= \"{\" root* \"}\" | \"a\"";
    float flat[GV_N] = {0.5f, 0, 0.3f, 0.4f, 0.2f, 0, 1, 0, 0};
    int ok = 1, stops = 0;
    for (uint64_t seed = 0; seed < 200 && ok; seed++) {
        s = grammar_sampler(nest, 1.0f, seed, &g, v);
        n = s ? grammar_gen(s, flat, text, 60, &done, &eog) : -1;
        if (n < 0) { ok = 0; break; }
        grammar_state *chk = grammar_state_new(g);
        ok = chk && grammar_accept_bytes(chk, text, strlen(text)) == 0;
        if (done || eog) {
            stops++;
            ok &= grammar_is_complete(chk);
        }
        grammar_state_free(chk);
        sampler_free(s);
        grammar_free(g);
    }
    CHECK(ok && stops > 100, "sampler grammar: 200 seeded draws at temperature 1 stay in the language; the stopped "
          "ones are whole sentences", "ok=%d stops=%d", ok, stops);

    /* A grammar that accepts any text changes no greedy pick: the same ids as without one. */
    float walk[GV_N];
    sampler_rng r;
    sampler_rng_seed(&r, 7);
    int same = 1;
    sampler_params p = sampler_default_params();
    p.temp = 0;
    char err[256];
    sampler *plain = sampler_new(&p, GV_N, err, sizeof err);
    s = grammar_sampler("root ::= [^\\x00]*", 0, 1, &g, v);
    for (int step = 0; step < 50 && s && plain; step++) {
        random_logits(&r, walk, GV_N);
        walk[7] = -1e9f; /* the control token: never allowed by a grammar (it has no bytes) */
        int32_t a = sampler_sample(plain, walk), b = sampler_sample(s, walk);
        same &= a == b;
        if (a == GV_EOG) break;
    }
    CHECK(s && plain && same, "sampler grammar: an accept-anything grammar gives the greedy picks of no grammar",
          "differs");
    sampler_free(s);
    sampler_free(plain);
    grammar_free(g);

    /* Only the end token may come next but it is skipped (--ignore-eos): an error, not a pick. */
    s = grammar_sampler("root ::= \"a\" \"b\"?", 0, 1, &g, v);
    const int32_t eog_id = GV_EOG;
    if (s) sampler_skip(s, &eog_id, 1);
    float only_a[GV_N] = {5, -9, 0, 0, 0, 0, 0, 0, 0};
    int32_t first = s ? sampler_sample(s, only_a) : -2;
    int32_t second = s ? sampler_sample(s, (float[GV_N]){0, -99, 0, 0, 0, 0, 9, 0, 9}) : -2;
    CHECK(first == 0 && second == 1, "sampler grammar: a mask leaves only allowed ids even at a low logit",
          "first=%d second=%d", first, second);
    CHECK(s && sampler_grammar_done(s), "sampler grammar: done after the last byte the grammar can take", "not done");
    int32_t third = s ? sampler_sample(s, only_a) : 0;
    CHECK(third == -1 && s && *sampler_error(s), "sampler grammar: a pick after the end is an error with a message",
          "third=%d", third);
    sampler_free(s);
    grammar_free(g);
    grammar_vocab_free(v);
}

int main(void) {
    test_filters();
    test_chain();
    test_large();
    test_grammar();
    return test_done();
}
