/* The whole forward pass on the CUDA backend: the llama.cpp golden runs on aidreams260K (f32 and
 * mixq, the CPU path's budgets, tests/golden.h); GPU against CPU logits, teacher-forced, on
 * synthetic models written by mkmodel (mean KLD <= 5e-4; prompts pass through the GEMM, decode
 * steps through matvecs); the same tokens after an 8-token prompt in decode passes of 1 to 4
 * tokens (the fused layers where the matvecs take them) against the same CPU logits; the same prompt twice gives the same tokens; sequences decoded
 * together (graph replays included) match the same sequences run alone (the same budget); KV
 * cells read back and written into another sequence, and copy-on-write after a shared prefix,
 * give the same logits; decode steps launched ahead (engine_decode_ahead), used or cancelled,
 * give the logits of steps launched when asked; -ngl 0 is the CPU; a KV cache larger than the device is one
 * clear error. Without a CUDA device: SKIP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/forward_cuda.h"
#include "tests/golden.h"
#include "tests/gpu/models.h"

static engine_params gpu_params(void) {
    engine_params ep = engine_default_params();
    ep.gpu = &forward_cuda_gpu;
    ep.n_threads = 16;
    ep.cpu_exact = 1; /* any CPU layers on the exact reference path, which the GPU is held to */
    return ep;
}

static const char *make_model(const char *shape, const char *quant) { return gpu_make_model(shape, quant, 4096); }

/* A KV cache larger than the device: one message naming the device, the sizes and the flags. */
static void test_oom(void) {
    const char *model = gpu_make_model("mini", "q4_0", 1 << 24);
    if (!model) return;
    char err[512] = "";
    engine_params ep = gpu_params();
    ep.split.split_mode = ENGINE_SPLIT_NONE;  /* one device, however many there are */
    engine *e = NULL;
    int rc = engine_load(&e, model, &ep, err, sizeof err);
    CHECK((rc == ENGINE_EPARAM || rc == ENGINE_ERUNTIME) && strstr(err, "device 0") && strstr(err, "out of memory") && strstr(err, "GiB free") &&
          strstr(err, "-c"), "gpu out of memory at load: device, sizes and flags named", "rc %d: %s", rc, err);
    if (rc) printf("# %s\n", err);
    engine_free(e);
    unlink(model);
}

/* Mean KLD and top-1 matches of rows [r0, n) of got against ref. */
static double mean_kld(const float *ref, const float *got, int r0, int n, int32_t n_vocab, int *top1) {
    double kld = 0;
    *top1 = 0;
    for (int r = r0; r < n; r++) {
        const float *a = ref + (size_t)r * n_vocab, *b = got + (size_t)r * n_vocab;
        kld += kl_div(a, b, n_vocab);
        *top1 += argmax(a, n_vocab) == argmax(b, n_vocab);
    }
    return kld / (n - r0);
}

/* The tokens after a P-token prompt (the GEMM path) in decode passes of 1, 2, 3, 4, 1, ... tokens
 * of one sequence, logits of every token: the fused layers (and their fallbacks: Q6_K over 2
 * tokens). One-token passes replay a captured graph from the second on. Returns the logits
 * [n][n_vocab] (rows < P from the prompt pass) or NULL with err. */
static float *eval_decode(const char *model, const int32_t *tokens, int n, int P, char *err, size_t es) {
    engine_params ep = gpu_params();
    engine *e = NULL;
    float *out = NULL;
    if (engine_load(&e, model, &ep, err, es)) return NULL;
    int32_t V = engine_n_vocab(e);
    out = malloc((size_t)n * (size_t)V * sizeof *out);
    int ok = out && !engine_eval(e, tokens, P, 0, out, 1, err, es);
    for (int pos = P, k = 1; ok && pos < n; pos += k, k = k % 4 + 1) {
        int c = n - pos < k ? n - pos : k;
        ok = !engine_eval(e, tokens + pos, c, pos, out + (size_t)pos * V, 1, err, es);
    }
    engine_free(e);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

static void test_vs_cpu(const char *shape, const char *quant) {
    const char *model = make_model(shape, quant);
    if (!model) return;
    char name[256], err[512];
    enum { N = 64 };
    int32_t tokens[N];
    gpu_random_tokens(tokens, N, 0x9e3779b97f4a7c15ULL);
    engine_params cpu = engine_default_params();
    cpu.n_threads = 16;
    cpu.cpu_exact = 1; /* the exact f32 reference, not the fast path's 8-bit activations */
    float *ref = golden_eval_all(model, cpu, tokens, N, err, sizeof err);
    snprintf(name, sizeof name, "gpu vs cpu %s %s: CPU eval", shape, quant);
    if (!CHECK(ref != NULL, name, "%s", err)) goto out;
    float *got = golden_eval_all(model, gpu_params(), tokens, N, err, sizeof err);
    snprintf(name, sizeof name, "gpu vs cpu %s %s: GPU eval", shape, quant);
    if (CHECK(got != NULL, name, "%s", err)) {
        int32_t n_vocab = 32000;
        double kld = 0, max_d = 0;
        int top1 = 0;
        for (int r = 0; r < N; r++) {
            const float *a = ref + (size_t)r * n_vocab, *b = got + (size_t)r * n_vocab;
            kld += kl_div(a, b, n_vocab);
            top1 += argmax(a, n_vocab) == argmax(b, n_vocab);
            for (int32_t i = 0; i < n_vocab; i++) {
                double d = fabs((double)a[i] - b[i]);
                if (!(d <= max_d)) max_d = d;
            }
        }
        kld /= N;
        snprintf(name, sizeof name, "gpu vs cpu %s %s: %d tokens teacher-forced (mean KLD %.3g <= 5e-4, max "
                 "|dlogit| %.3g, top-1 %d/%d)", shape, quant, N, kld, max_d, top1, N);
        CHECK(kld <= 5e-4, name, "out of budget");
    }
    free(got);
    enum { P = 8 };
    float *dec = eval_decode(model, tokens, N, P, err, sizeof err);
    snprintf(name, sizeof name, "gpu vs cpu %s %s: decode passes of 1-4 tokens", shape, quant);
    if (CHECK(dec != NULL, name, "%s", err)) {
        int top1 = 0;
        double kld = mean_kld(ref, dec, P, N, 32000, &top1);
        CHECK(kld <= 5e-4, name, "mean KLD %.3g over 5e-4 (top-1 %d/%d)", kld, top1, N - P);
        printf("# %s: mean KLD %.3g, top-1 %d/%d\n", name, kld, top1, N - P);
    }
    free(dec);
out:
    free(ref);
    unlink(model);
}

/* Greedy tokens of one sequence: prompt then n steps; 0 or -1 with err. */
static int greedy(engine *e, const int32_t *prompt, int n_prompt, int n, int32_t *out, float *logits, char *err,
                  size_t es) {
    if (engine_eval(e, prompt, n_prompt, 0, logits, 0, err, es)) return -1;
    for (int i = 0; i < n; i++) {
        out[i] = argmax(logits, engine_n_vocab(e));
        if (engine_eval(e, &out[i], 1, n_prompt + i, logits, 0, err, es)) return -1;
    }
    return 0;
}

/* The same on the device: engine_eval_greedy, only ids come back. */
static int greedy_dev(engine *e, const int32_t *prompt, int n_prompt, int n, int32_t *out, char *err, size_t es) {
    int32_t next = 0;
    if (engine_eval_greedy(e, prompt, n_prompt, 0, &next, err, es)) return -1;
    for (int i = 0; i < n; i++) {
        out[i] = next;
        if (engine_eval_greedy(e, &out[i], 1, n_prompt + i, &next, err, es)) return -1;
    }
    return 0;
}

static void test_repeat(const char *model) {
    char err[512];
    int32_t prompt[5] = {1, 450, 4996, 17354, 1701}, a[24], b[24], c[24];
    engine_params ep = gpu_params();
    engine *e = NULL;
    if (!CHECK(engine_load(&e, model, &ep, err, sizeof err) == ENGINE_OK, "gpu repeat: load", "%s", err)) return;
    float *logits = malloc((size_t)engine_n_vocab(e) * sizeof *logits);
    int ok = !greedy(e, prompt, 5, 24, a, logits, err, sizeof err) && !greedy(e, prompt, 5, 24, b, logits, err, sizeof err);
    CHECK(ok && !memcmp(a, b, sizeof a), "gpu repeat: same prompt twice, same 24 greedy tokens", "%s",
          ok ? "tokens differ" : err);
    ok = !greedy_dev(e, prompt, 5, 24, c, err, sizeof err);
    CHECK(ok && !memcmp(a, c, sizeof a), "gpu greedy on the device: the same 24 tokens as the host argmax", "%s",
          ok ? "tokens differ" : err);
    free(logits);
    engine_free(e);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

/* NS sequences of different prompt lengths decoded together (prompts in one pass, then steps of
 * one token each, replayed from a graph) against each run alone, teacher-forced on the alone
 * run's greedy tokens. */
static void test_batch(const char *model) {
    enum { NS = 4, STEPS = 12, MAXP = 40 };
    char err[512];
    int n_prompt[NS] = {7, 33, 1, 20};
    int32_t prompts[NS][MAXP], gen[NS][STEPS];
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < n_prompt[s]; i++) prompts[s][i] = i == 0 ? 1 : 100 + 37 * s + 11 * i;
    engine_params ep = gpu_params();
    engine *e = NULL;
    if (!CHECK(engine_load(&e, model, &ep, err, sizeof err) == ENGINE_OK, "gpu batch: load single", "%s", err))
        return;
    int32_t V = engine_n_vocab(e);
    float *alone = malloc((size_t)NS * (STEPS + 1) * V * sizeof(float));
    float *together = malloc((size_t)NS * (STEPS + 1) * V * sizeof(float));
    int ok = 1;
    for (int s = 0; ok && s < NS; s++) {
        float *row = alone + (size_t)s * (STEPS + 1) * V;
        ok = !engine_eval(e, prompts[s], n_prompt[s], 0, row, 0, err, sizeof err);
        for (int i = 0; ok && i < STEPS; i++) {
            gen[s][i] = argmax(row + (size_t)i * V, V);
            ok = !engine_eval(e, &gen[s][i], 1, n_prompt[s] + i, row + (size_t)(i + 1) * V, 0, err, sizeof err);
        }
    }
    engine_free(e);
    e = NULL;
    if (!CHECK(ok, "gpu batch: single runs", "%s", err)) goto out;
    ep.n_seq_max = NS;
    if (!CHECK(engine_load(&e, model, &ep, err, sizeof err) == ENGINE_OK, "gpu batch: load batched", "%s", err))
        goto out;
    /* All prompts in one pass, logits for each prompt's last token. */
    engine_token t[NS * MAXP];
    int n = 0;
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < n_prompt[s]; i++) t[n++] = (engine_token){prompts[s][i], i, s, i == n_prompt[s] - 1, 0};
    float *step = malloc((size_t)NS * V * sizeof(float));
    ok = !engine_decode(e, t, n, step, err, sizeof err);
    for (int s = 0; ok && s < NS; s++)
        memcpy(together + (size_t)s * (STEPS + 1) * V, step + (size_t)s * V, (size_t)V * sizeof(float));
    for (int i = 0; ok && i < STEPS; i++) {
        for (int s = 0; s < NS; s++) t[s] = (engine_token){gen[s][i], n_prompt[s] + i, s, 1, 0};
        ok = !engine_decode(e, t, NS, step, err, sizeof err);
        for (int s = 0; ok && s < NS; s++)
            memcpy(together + ((size_t)s * (STEPS + 1) + i + 1) * V, step + (size_t)s * V, (size_t)V * sizeof(float));
    }
    free(step);
    if (CHECK(ok, "gpu batch: batched run", "%s", err)) {
        /* Prompts of more than 8 tokens take the f16 GEMM, fewer the f32 matvec: the same sequence
         * passes through either path depending on its company, so the budget is the one for
         * GPU against CPU. */
        int rows = NS * (STEPS + 1), same = 0;
        double d = max_abs_diff(alone, together, (size_t)rows * V), kld = 0;
        for (int r = 0; r < rows; r++) {
            kld += kl_div(alone + (size_t)r * V, together + (size_t)r * V, V);
            same += argmax(alone + (size_t)r * V, V) == argmax(together + (size_t)r * V, V);
        }
        kld /= rows;
        char name[200];
        snprintf(name, sizeof name, "gpu batch: %d sequences together = alone (mean KLD %.3g <= 5e-4, max |dlogit| "
                 "%.3g, top-1 %d/%d)", NS, kld, d, same, rows);
        CHECK(kld <= 5e-4 && same >= rows * 95 / 100, name, "differ");
    }

    /* KV read back from sequence 0 and written into sequence 1, then both take the same token. */
    engine_seq_free(e, 1);
    int32_t len = engine_seq_len(e, 0), kvd = engine_kv_dim(e);
    float *k = malloc((size_t)len * kvd * sizeof(float)), *v = malloc((size_t)len * kvd * sizeof(float));
    ok = !engine_seq_alloc(e, 1, len, err, sizeof err);
    for (int32_t l = 0; ok && l < engine_hparams(e)->n_layer; l++)
        ok = !engine_seq_kv_get(e, 0, l, 0, len, k, v, err, sizeof err) &&
             !engine_seq_kv_set(e, 1, l, 0, len, k, v, err, sizeof err);
    float *two = malloc(2 * (size_t)V * sizeof(float));
    engine_token tt[2] = {{42, len, 0, 1, 0}, {42, len, 1, 1, 0}};
    ok = ok && !engine_decode(e, tt, 2, two, err, sizeof err);
    if (CHECK(ok, "gpu kv get/set", "%s", err))
        CHECK(max_abs_diff(two, two + V, (size_t)V) <= 1e-4, "gpu kv get/set: copied sequence gives the same logits",
              "max |dlogit| %.3g", max_abs_diff(two, two + V, (size_t)V));
    /* A shared prefix with a partly filled page: the next write copies it (kv_copy). */
    engine_seq_free(e, 2);
    ok = !engine_seq_cp(e, 0, 2, 0, -1, err, sizeof err);
    tt[0] = (engine_token){77, len + 1, 0, 1, 0};
    tt[1] = (engine_token){77, len + 1, 2, 1, 0};
    ok = ok && !engine_decode(e, tt, 2, two, err, sizeof err);
    if (CHECK(ok, "gpu kv copy-on-write", "%s", err))
        CHECK(max_abs_diff(two, two + V, (size_t)V) <= 1e-4, "gpu kv copy-on-write: shared prefix gives the same logits",
              "max |dlogit| %.3g", max_abs_diff(two, two + V, (size_t)V));
    free(two);
    free(k);
    free(v);
out:
    engine_free(e);
    free(alone);
    free(together);
}

/* -ngl 0 runs on the CPU even with a device (partial offload is tests/gpu/test_split.c's). */
/* One fixed sequence of calls with engine_decode_ahead set to `ahead`: one-token steps (logits into
 * the backend's buffer where it has one), each kind of call that must cancel a step launched
 * ahead (a KV read, a two-token pass, the greedy kind and back, a new prompt at position 0),
 * ahead switched off (the launched step still serves the next call) and on again; every row of
 * logits into rows and every greedy id into ids. Returns the rows written, or -1 with err; a
 * KV read that changed the caller's last logits is an error too. The engine is left with a step
 * launched, for engine_free to cancel. */
static int ahead_script(engine *e, int ahead, float *rows, int32_t *ids, char *err, size_t es) {
    const int32_t prompt[5] = {1, 450, 4996, 17354, 1701}, nv = engine_n_vocab(e);
    float *buf = engine_logits_buffer(e, 1), *own = malloc(2 * (size_t)nv * sizeof(float));
    float *keep = malloc((size_t)nv * sizeof(float)), *kv = malloc(2 * (size_t)engine_kv_dim(e) * sizeof(float));
    float *lg = buf ? buf : own;
    int r = 0, g = 0, t = 0, rc = -1;
    int32_t pos = 0;
    /* tokens from a fixed scramble, not the argmax: a step that read the wrong token or position
     * cannot fall back into the right text */
#define TOK() ((int32_t)((t++ * 7919 + 13) % nv))
#define STEP()                                                                                     \
    do {                                                                                           \
        int32_t tk = TOK();                                                                        \
        if (engine_eval(e, &tk, 1, pos++, lg, 0, err, es)) goto out;                               \
        memcpy(rows + (size_t)r++ * nv, lg, (size_t)nv * sizeof(float));                           \
    } while (0)
    if (!own || !keep || !kv) {
        snprintf(err, es, "out of memory");
        goto out;
    }
    engine_decode_ahead(e, ahead);
    for (int pass = 0; pass < 2; pass++) {
        if (engine_eval(e, prompt, 5, 0, lg, 0, err, es)) goto out;
        memcpy(rows + (size_t)r++ * nv, lg, (size_t)nv * sizeof(float));
        pos = 5;
        for (int i = 0; i < 10; i++) STEP();
        if (pass == 1) break; /* the new prompt cancelled the launched step; engine_free the next */
        memcpy(keep, lg, (size_t)nv * sizeof(float));
        if (engine_seq_kv_get(e, 0, 0, 0, 1, kv, kv + engine_kv_dim(e), err, es)) goto out;
        if (memcmp(keep, lg, (size_t)nv * sizeof(float))) {
            snprintf(err, es, "a KV read after a step changed that step's logits");
            goto out;
        }
        for (int i = 0; i < 2; i++) STEP();
        int32_t two[2] = {TOK(), TOK()};
        if (engine_eval(e, two, 2, pos, own, 1, err, es)) goto out;
        memcpy(rows + (size_t)r * nv, own, 2 * (size_t)nv * sizeof(float));
        r += 2;
        pos += 2;
        for (int i = 0; i < 3; i++) STEP();
        for (int i = 0; i < 3; i++) {
            int32_t tk = TOK();
            if (engine_eval_greedy(e, &tk, 1, pos++, &ids[g++], err, es)) goto out;
        }
        for (int i = 0; i < 2; i++) STEP();
        engine_decode_ahead(e, 0);
        for (int i = 0; i < 2; i++) STEP();
        engine_decode_ahead(e, ahead);
        for (int i = 0; i < 2; i++) STEP();
    }
#undef STEP
#undef TOK
    rc = r;
out:
    free(own);
    free(keep);
    free(kv);
    return rc;
}

/* Decode steps launched ahead (engine_decode_ahead) give the logits and ids of the same calls
 * with none launched, on a second engine: ahead_script's calls, which also cancel launched steps
 * in every way there is. */
static void test_ahead(const char *model) {
    char err[512];
    engine_params ep = gpu_params();
    engine *ref = NULL, *e = NULL;
    if (!CHECK(engine_load(&ref, model, &ep, err, sizeof err) == ENGINE_OK, "gpu ahead: load (reference)", "%s",
               err))
        return;
    if (!CHECK(engine_load(&e, model, &ep, err, sizeof err) == ENGINE_OK, "gpu ahead: load", "%s", err)) {
        engine_free(ref);
        return;
    }
    const size_t nv = (size_t)engine_n_vocab(e), cap = 64;
    float *want = malloc(cap * nv * sizeof(float)), *got = malloc(cap * nv * sizeof(float));
    int32_t wid[8] = {0}, gid[8] = {0};
    char err2[512] = "";
    int nw = want && got ? ahead_script(ref, 0, want, wid, err, sizeof err) : -1;
    int ng = want && got ? ahead_script(e, 1, got, gid, err2, sizeof err2) : -1;
    double d = nw > 0 && ng == nw ? max_abs_diff(want, got, (size_t)nw * nv) : INFINITY;
    CHECK(nw > 0 && ng == nw && d <= 1e-4 && !memcmp(wid, gid, sizeof wid),
          "gpu ahead: steps launched ahead (and cancelled) give the logits and ids of steps launched when asked",
          "rows %d/%d, max |diff| %g, ids %s; %s %s", nw, ng, d, memcmp(wid, gid, sizeof wid) ? "differ" : "same", err,
          err2);
    free(want);
    free(got);
    engine_free(e); /* with a step launched: cancelled, not waited for forever */
    engine_free(ref);
}

static void test_cpu_only(const char *model) {
    char err[512];
    engine_params ep = gpu_params();
    engine *e = NULL;
    ep.split.n_gpu_layers = 0;
    int rc = engine_load(&e, model, &ep, err, sizeof err);
    CHECK(rc == ENGINE_OK && !strcmp(engine_backend(e), "CPU"), "gpu -ngl 0: the CPU backend", "rc %d: %s", rc, err);
    engine_free(e);
}

int main(void) {
    char why[256] = "";
    if (forward_cuda_gpu.n_devices(why, sizeof why) == 0) {
        SKIP("gpu forward", "no CUDA device");
        return 0;
    }
    engine_params ep = gpu_params();
    golden_run_all(&ep, "gpu golden", "CUDA");
    const char *tiny = test_shared("models/aidreams260K-mixq.gguf");
    test_cpu_only(tiny);
    test_oom();
    const char *mini = make_model("mini", "q4_0");
    if (mini) {
        test_repeat(mini);
        test_ahead(mini);
        test_batch(mini);
        unlink(mini);
    }
    test_vs_cpu("mini", "q4_0");
    test_vs_cpu("mini", "q4_k_m");
    test_vs_cpu("1b", "q4_0");
    test_vs_cpu("1b", "q4_k_m");
    return test_done();
}
