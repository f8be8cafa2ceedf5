/* engine_decode over several sequences on the tiny real model: each sequence's logits are
 * bit-for-bit those of running it alone, whatever else is in the batch; shared prefixes
 * (engine_seq_cp) and copy-on-write of a partly filled page; malformed batches and positions
 * past a sequence's share of -c are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "test.h"

enum { N = 100 };

static engine *load(int32_t n_ctx, int32_t n_seq, int32_t n_batch) {
    engine_params p = engine_default_params();
    p.cpu_exact = 1;  /* the exact f32 path: batches are compared bit for bit with single passes */
    p.n_ctx = n_ctx;
    p.n_seq_max = n_seq;
    p.n_batch = n_batch;
    p.n_threads = 2;
    engine *e = NULL;
    char err[512];
    if (engine_load(&e, test_shared("models/aidreams260K-f32.gguf"), &p, err, sizeof err))
        printf("FAIL engine load: %s\n", err);
    return e;
}

/* Logits of every position of toks[0..n) run alone on a fresh single-sequence engine. */
static float *alone(const int32_t *toks, int32_t n, int32_t n_vocab) {
    engine *e = load(0, 1, 7);
    float *l = malloc((size_t)n * n_vocab * sizeof *l);
    char err[512];
    if (!e || !l || engine_eval(e, toks, n, 0, l, 1, err, sizeof err)) {
        free(l);
        l = NULL;
    }
    engine_free(e);
    return l;
}

int main(void) {
    FILE *probe = fopen(test_shared("models/aidreams260K-f32.gguf"), "rb");
    if (!probe) {
        SKIP("engine batch", "no aidreams260K-f32.gguf under $SHARED");
        return 0;
    }
    fclose(probe);
    engine *e = load(4 * 128, 4, 512);
    if (!e) return 1;
    int32_t V = engine_n_vocab(e);
    char err[512];
    /* Three token streams: a and b share their first 70 tokens (a page and a bit). */
    int32_t a[N], b[N], c[N];
    for (int i = 0; i < N; i++) {
        a[i] = 1 + (i * 37 + 11) % (V - 1);
        b[i] = i < 70 ? a[i] : 1 + (i * 53 + 5) % (V - 1);
        c[i] = 1 + (i * 29 + 3) % (V - 1);
    }
    float *la = alone(a, N, V), *lb = alone(b, N, V), *lc = alone(c, N, V);
    if (!CHECK(la && lb && lc, "engine reference runs", "single-sequence evaluation failed")) return 1;

    /* a in chunks interleaved with c token by token, in one batch per step. */
    float *out = malloc((size_t)N * 3 * V * sizeof *out);
    engine_token t[64];
    int ok = 1, same = 1;
    for (int32_t pa = 0, pc = 0; ok && (pa < N || pc < N);) {
        int n = 0;
        for (int k = 0; k < 9 && pa < N; k++, pa++) t[n++] = (engine_token){a[pa], pa, 2, 1, 0};
        if (pc < N) { t[n++] = (engine_token){c[pc], pc, 0, 1, 0}; pc++; }
        ok = engine_decode(e, t, n, out, err, sizeof err) == 0;
        for (int i = 0; ok && i < n; i++) {
            const float *want = (t[i].seq == 2 ? la : lc) + (size_t)t[i].pos * V;
            same &= !memcmp(out + (size_t)i * V, want, (size_t)V * sizeof *out);
        }
    }
    CHECK(ok && same, "engine two sequences in one batch give their lone logits bit for bit", "%s",
          ok ? "logits differ" : err);

    /* b shares a's first 70 positions (page 2 of a is partly shared), then both continue. */
    ok = engine_seq_cp(e, 2, 1, 0, 70, err, sizeof err) == 0 && engine_seq_len(e, 1) == 70;
    ok = ok && engine_seq_rm(e, 2, 70, -1, err, sizeof err) == 0 && engine_seq_len(e, 2) == 70;
    int32_t free_before = engine_kv_pages_free(e);
    same = 1;
    for (int32_t p = 70; ok && p < N; p++) {
        t[0] = (engine_token){b[p], p, 1, 1, 0};
        t[1] = (engine_token){a[p], p, 2, 1, 0};
        ok = engine_decode(e, t, 2, out, err, sizeof err) == 0;
        same &= ok && !memcmp(out, lb + (size_t)p * V, (size_t)V * sizeof *out) &&
                !memcmp(out + V, la + (size_t)p * V, (size_t)V * sizeof *out);
    }
    CHECK(ok && same, "engine shared prefix with copy-on-write keeps both sequences exact", "%s",
          ok ? "logits differ" : err);
    CHECK(free_before - engine_kv_pages_free(e) == 1, "engine copy-on-write takes one page for the shared one",
          "%d pages taken", free_before - engine_kv_pages_free(e));
    CHECK(engine_seq_rm(e, 1, 10, 20, err, sizeof err) == -1, "engine seq_rm refuses a hole", "accepted");
    t[0] = (engine_token){a[0], 5, 3, 0, 0};
    CHECK(engine_decode(e, t, 1, out, err, sizeof err) == ENGINE_EPARAM, "engine refuses a gap in positions",
          "accepted");
    t[0] = (engine_token){V, 0, 3, 0, 0};
    CHECK(engine_decode(e, t, 1, out, err, sizeof err) == ENGINE_EPARAM && strstr(err, "vocabulary"),
          "engine refuses a token outside the vocabulary", "%s", err);
    t[0] = (engine_token){1, 0, 4, 0, 0};
    CHECK(engine_decode(e, t, 1, out, err, sizeof err) == ENGINE_EPARAM, "engine refuses a sequence past -np",
          "accepted");
    engine_seq_keep(e, 3);
    CHECK(engine_kv_pages_free(e) == engine_kv_pages_total(e), "engine seq_keep of an empty sequence frees all",
          "%d of %d free", engine_kv_pages_free(e), engine_kv_pages_total(e));
    engine_free(e);

    /* A cache of 2 sequences x 64 positions: both sharers of a partly filled page write into it. */
    e = load(128, 2, 512);
    engine_token big[140];
    for (int i = 0; i < 60; i++) big[i] = (engine_token){a[i], i, 0, 0, 0};
    for (int i = 0; i < 60; i++) big[60 + i] = (engine_token){c[i], i, 1, 0, 0};
    ok = e && engine_decode(e, big, 120, NULL, err, sizeof err) == 0;
    engine_seq_cp(e, 0, 1, 0, 60, err, sizeof err);
    int32_t fr = e ? engine_kv_pages_free(e) : 0;
    for (int i = 0; i < 4; i++) big[i] = (engine_token){a[60 + i], 60 + i, 0, i == 3, 0};
    for (int i = 0; i < 4; i++) big[4 + i] = (engine_token){c[i], 60 + i, 1, 0, 0};
    int rc = e ? engine_decode(e, big, 8, out, err, sizeof err) : -1;
    CHECK(rc == 0 && engine_kv_pages_free(e) == fr - 1, "engine copy-on-write when both sharers write", "rc %d: %s",
          rc, err);
    engine_free(e);
    e = load(128, 2, 512);
    for (int i = 0; i < 64; i++) big[i] = (engine_token){a[i], i, 0, 0, 0};
    for (int i = 0; i < 64; i++) big[64 + i] = (engine_token){c[i], i, 1, 0, 0};
    ok = e && engine_decode(e, big, 128, NULL, err, sizeof err) == 0;
    rc = e ? engine_decode(e, big, 1, out, err, sizeof err) : -1;  /* seq 0 is full: position 64 > -c/-np */
    CHECK(ok && rc == ENGINE_EPARAM, "engine refuses a position past the per-sequence context", "rc %d: %s", rc, err);
    engine_free(e);

    /* Greedy picks: engine_eval_greedy after each prefix of a is the argmax of a's logits, and
     * engine_decode_greedy of two sequences gives each its own argmax. */
    e = load(4 * 128, 4, 512);
    ok = e != NULL;
    int32_t next = -1;
    for (int i = 0; ok && i < 8; i++) {
        ok = !engine_eval_greedy(e, &a[i], 1, i, &next, err, sizeof err) &&
             next == engine_argmax(la + (size_t)i * V, V);
    }
    engine_token two[2] = {{a[8], 8, 0, 1, 0}, {c[0], 0, 1, 1, 0}};
    int32_t ids[2] = {-1, -1};
    ok = ok && !engine_decode_greedy(e, two, 2, ids, err, sizeof err) && ids[0] == engine_argmax(la + (size_t)8 * V, V) &&
         ids[1] == engine_argmax(lc, V);
    CHECK(ok, "engine greedy picks are the argmax of the logits", "%s", err);
    const float tie[5] = {1.0f, 3.0f, NAN, 3.0f, -2.0f}, nan1[2] = {NAN, -1.0f};
    CHECK(engine_argmax(tie, 5) == 1 && engine_argmax(nan1, 2) == 1, "engine_argmax: ties to the lowest id, NaN never wins",
          "%d %d", engine_argmax(tie, 5), engine_argmax(nan1, 2));
    const int32_t sk1[1] = {1}, sk2[2] = {1, 3}, sk_all[5] = {0, 1, 2, 3, 4};
    CHECK(engine_argmax_skip(tie, 5, sk1, 1) == 3 && engine_argmax_skip(tie, 5, sk2, 2) == 0 &&
              engine_argmax_skip(tie, 5, sk_all, 5) == 0 && engine_argmax_skip(tie, 5, NULL, 0) == 1,
          "engine_argmax_skip: the largest past the skipped ids (0 when none is left)", "%d %d %d",
          engine_argmax_skip(tie, 5, sk1, 1), engine_argmax_skip(tie, 5, sk2, 2), engine_argmax_skip(tie, 5, sk_all, 5));
    engine_free(e);
    free(out);
    free(la);
    free(lb);
    free(lc);
    return test_done();
}
