/* The layer recipes beyond plain Llama on the CUDA backend (its general layer), against the CPU
 * reference (the exact path) on synthetic models written by mkmodel: Llama with rope_freqs, with
 * a head size other than n_embd / n_head, with linear and with YaRN scaling; Qwen2 (biases, NEOX),
 * Qwen3 (per-head Q/K norms, head 128, tied head), Phi-3 (fused QKV and gate/up, partial NEOX
 * rotary, LongRoPE's long and short factors), Gemma 2 (windowed layers, score and logit softcaps,
 * post norms, GELU gate, input scale) and Gemma 3 (its windowed layers' own RoPE base beside
 * linear scaling of the global ones, Q/K norms): the small shapes' window of 16 positions is well
 * inside every context checked, so the windowed kernels mask and skip there: 64 tokens teacher-forced (the prompt GEMMs), the
 * same tokens after an 8-token prompt in decode passes of 1 to 4 tokens (the matvecs, graphs), and
 * 4 sequences decoded together (the scheduler's batched passes), each within mean KLD 5e-4 of the
 * CPU's logits; on f32 files of each family's small shape also the same greedy tokens. q4_k_m and
 * q4_0 on the mini shape (n_embd 1024): the decode matvecs round activations to 8 bits, as
 * llama.cpp does, which on these random NEOX models moves the logits by more than 5e-4 on the CPU
 * too (Qwen3 q4_0: the CPU's fast path with one 8-bit value per activation, cpu_act_single, vs
 * exact 3.8e-3, Llama 2.6e-4; its default pairs stay far inside 5e-4), so the decode checks'
 * budget is the larger of 5e-4 and that single-rounding path's own distance from the exact one:
 * the GPU no further from the exact logits than 8-bit activations on the CPU. Without a CUDA
 * device: SKIP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/forward_cuda.h"
#include "tests/golden.h"
#include "tests/gpu/models.h"

enum { N = 64, P = 8 };
static int32_t g_vocab; /* the model's under test */

/* gpu 1: one GPU; 0: the CPU's exact path; -1: the CPU's fast path with activations rounded to
 * one 8-bit value each (cpu_act_single), as the GPU's decode matvecs and llama.cpp round them. */
static engine_params params(int gpu, int n_ctx) {
    engine_params ep = engine_default_params();
    ep.n_threads = 16;
    ep.cpu_exact = gpu >= 0; /* the exact f32 reference, not the fast path's 8-bit activations */
    ep.cpu_act_single = gpu < 0;
    ep.n_ctx = n_ctx;
    if (gpu == 1) {
        ep.gpu = &forward_cuda_gpu;
        ep.split.split_mode = ENGINE_SPLIT_NONE;
    } else {
        ep.split.n_gpu_layers = 0;
    }
    return ep;
}

/* BOS then n - 1 ids in [3, g_vocab) from a 64-bit LCG seeded with seed. */
static void random_tokens(int32_t *t, int n, uint64_t seed) {
    t[0] = 1;
    for (int i = 1; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        t[i] = 3 + (int32_t)((seed >> 33) % (g_vocab - 3));
    }
}

static double mean_kld(const float *ref, const float *got, int r0, int n, int *top1) {
    double kld = 0;
    *top1 = 0;
    for (int r = r0; r < n; r++) {
        const float *a = ref + (size_t)r * g_vocab, *b = got + (size_t)r * g_vocab;
        kld += kl_div(a, b, g_vocab);
        *top1 += argmax(a, g_vocab) == argmax(b, g_vocab);
    }
    return kld / (n - r0);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

/* Loads model on the GPU and checks it runs there (not refused, not on the CPU). */
static engine *load_gpu(const char *model, int n_ctx, const char *what, char *err, size_t es) {
    engine_params ep = params(1, n_ctx);
    engine *e = NULL;
    if (engine_load(&e, model, &ep, err, es)) return NULL;
    if (strcmp(engine_backend(e), "CUDA") || engine_n_vocab(e) != g_vocab) {
        snprintf(err, es, "%s ran on %s, not CUDA, or has %d tokens, not %d", what, engine_backend(e),
                 engine_n_vocab(e), g_vocab);
        engine_free(e);
        return NULL;
    }
    return e;
}

/* The tokens after a P-token prompt in decode passes of 1, 2, 3, 4, 1, ... tokens of one
 * sequence, logits of every token; NULL with err. */
static float *eval_decode(const char *model, int n_ctx, const int32_t *tokens, char *err, size_t es) {
    engine *e = load_gpu(model, n_ctx, "decode passes", err, es);
    if (!e) return NULL;
    float *out = malloc((size_t)N * g_vocab * sizeof *out);
    int ok = out && !engine_eval(e, tokens, P, 0, out, 1, err, es);
    for (int pos = P, k = 1; ok && pos < N; k = k % 4 + 1) {
        int len = N - pos < k ? N - pos : k;
        ok = !engine_eval(e, tokens + pos, len, pos, out + (size_t)pos * g_vocab, 1, err, es);
        pos += len;
    }
    engine_free(e);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

/* 4 sequences of 5, 17, 29 and 50 prompt tokens, then 8 steps of all 4 in one batch: each step's
 * logits [8][4][g_vocab]; NULL with err. */
static float *batch_decode(const char *model, engine_params ep, const int32_t *toks, char *err, size_t es) {
    enum { S = 4, STEPS = 8 };
    ep.n_seq_max = S;
    engine *e = NULL;
    if (engine_load(&e, model, &ep, err, es)) return NULL;
    float *out = malloc((size_t)S * STEPS * g_vocab * sizeof *out);
    engine_token t[64];
    int rc = out ? 0 : -1;
    for (int s = 0; !rc && s < S; s++) {
        int len = s == 3 ? 50 : 5 + 12 * s;
        for (int i = 0; i < len; i++) t[i] = (engine_token){toks[(s * 7 + i) % N], i, s, 0, 0};
        rc = engine_decode(e, t, len, NULL, err, es);
    }
    for (int step = 0; !rc && step < STEPS; step++) {
        for (int s = 0; s < S; s++) t[s] = (engine_token){toks[(step * 5 + s) % N], engine_seq_len(e, s), s, 1, 0};
        rc = engine_decode(e, t, S, out + (size_t)step * S * g_vocab, err, es);
    }
    engine_free(e);
    if (rc) {
        free(out);
        return NULL;
    }
    return out;
}

/* n greedy tokens after the prompt; 0 or -1 with err. */
static int greedy(const char *model, engine_params ep, const int32_t *prompt, int n, int32_t *out, char *err,
                  size_t es) {
    engine *e = NULL;
    if (engine_load(&e, model, &ep, err, es)) return -1;
    int32_t next = 0;
    int rc = engine_eval_greedy(e, prompt, P, 0, &next, err, es);
    for (int i = 0; !rc && i < n; i++) {
        out[i] = next;
        rc = engine_eval_greedy(e, &out[i], 1, P + i, &next, err, es);
    }
    engine_free(e);
    return rc;
}

typedef struct {
    const char *label, *args; /* mkmodel's arguments */
    int n_ctx;                /* positions per sequence (one sequence): Phi-3's LongRoPE factors depend on it */
    int32_t n_vocab;
} recipe_case;

static const recipe_case cases[] = {
    {"llama-rope-freqs", "--shape llama-s --rope-freqs --quant f32", 4096, 2048},
    {"llama-head128", "--shape llama-s --head-dim 128 --quant f32", 4096, 2048},
    {"llama-linear", "--shape llama-s --rope-scaling linear:4 --quant f32", 4096, 2048},
    {"llama-yarn", "--shape llama-s --rope-scaling yarn:4 --quant f32", 4096, 2048},
    {"qwen2", "--shape qwen2-s --quant f32", 4096, 2048},
    {"qwen3", "--shape qwen3-s --quant f32", 4096, 2048},
    {"phi3-long", "--shape phi-s --quant f32", 8192, 2048},  /* past the original 4096: the long factors */
    {"phi3-short", "--shape phi-s --quant f32", 2048, 2048}, /* the short ones */
    {"mini-llama-rope-freqs-q4_k_m", "--shape mini --rope-freqs --quant q4_k_m --ctx 4096", 4096, 32000},
    {"mini-llama-rope-freqs-q4_0", "--shape mini --rope-freqs --quant q4_0 --ctx 4096", 4096, 32000},
    {"mini-llama-yarn-q4_k_m", "--shape mini --rope-scaling yarn:4 --quant q4_k_m --ctx 4096", 4096, 32000},
    {"mini-qwen2-q4_k_m", "--shape mini --arch qwen2 --quant q4_k_m --ctx 4096", 4096, 32000},
    {"mini-qwen2-q4_0", "--shape mini --arch qwen2 --quant q4_0 --ctx 4096", 4096, 32000},
    {"mini-qwen3-q4_k_m", "--shape mini --arch qwen3 --quant q4_k_m --ctx 4096", 4096, 32000},
    {"mini-qwen3-q4_0", "--shape mini --arch qwen3 --quant q4_0 --ctx 4096", 4096, 32000},
    /* q4_k_m's fused attn_qkv in Q5_K, as llama.cpp writes it (matvec v11, the GEMMs, on its repacked rows) */
    {"mini-phi3-q4_k_m", "--shape mini --arch phi3 --quant q4_k_m --ctx 4096", 4096, 32000},
    {"mini-phi3-q4_0", "--shape mini --arch phi3 --quant q4_0 --ctx 4096", 4096, 32000},
    {"gemma2", "--shape gemma2-s --quant f32", 4096, 2048},
    {"gemma3", "--shape gemma3-s --quant f32", 4096, 2048},
    /* quantised small shapes: FFN down of k 640 (ten chunks: the prompt GEMM's tail loop, Q4_0 and
     * Q8_0) and gemma-3-270m's head of 256 */
    {"llama-q4_0", "--shape llama-s --quant q4_0", 4096, 2048},
    {"gemma3-head256-q4_k_m", "--shape gemma3-s --head-dim 256 --quant q4_k_m", 4096, 2048},
    /* the mini shape keeps the family's window (4096 and 1024): these check the quantised
     * products with post norms, GELU, softcaps and the input scale */
    {"mini-gemma2-q4_k_m", "--shape mini --arch gemma2 --quant q4_k_m --ctx 4096", 4096, 32000},
    {"mini-gemma2-q4_0", "--shape mini --arch gemma2 --quant q4_0 --ctx 4096", 4096, 32000},
    {"mini-gemma3-q4_k_m", "--shape mini --arch gemma3 --quant q4_k_m --ctx 4096", 4096, 32000},
    {"mini-gemma3-q4_0", "--shape mini --arch gemma3 --quant q4_0 --ctx 4096", 4096, 32000},
};

static void test_case(const recipe_case *c) {
    char name[320], err[512] = "";
    const char *label = c->label, *model = gpu_make_model_args(label, c->args);
    if (!model) return;
    g_vocab = c->n_vocab;
    int32_t tokens[N];
    random_tokens(tokens, N, 0x9e3779b97f4a7c15ULL);
    float *ref = golden_eval_all(model, params(0, c->n_ctx), tokens, N, err, sizeof err);
    snprintf(name, sizeof name, "recipe %s: CPU reference", label);
    if (!CHECK(ref != NULL, name, "%s", err)) goto out;
    const int f32 = strstr(c->args, "--quant f32") != NULL;
    double budget = 5e-4; /* the decode checks' (see the top) */
    if (!f32) {
        float *fast = golden_eval_all(model, params(-1, c->n_ctx), tokens, N, err, sizeof err);
        snprintf(name, sizeof name, "recipe %s: CPU fast path", label);
        if (!CHECK(fast != NULL, name, "%s", err)) goto out;
        int top1 = 0;
        double k = mean_kld(ref, fast, P, N, &top1);
        free(fast);
        if (k > budget) budget = k;
        printf("# recipe %s: CPU fast path vs exact mean KLD %.3g: decode budget %.3g\n", label, k, budget);
    }

    /* the prompt pass: GEMMs, prompt attention */
    engine *e = load_gpu(model, c->n_ctx, "teacher-forced", err, sizeof err);
    float *got = e ? malloc((size_t)N * g_vocab * sizeof *got) : NULL;
    if (got && engine_eval(e, tokens, N, 0, got, 1, err, sizeof err)) {
        free(got);
        got = NULL;
    }
    engine_free(e);
    snprintf(name, sizeof name, "recipe %s: GPU teacher-forced", label);
    if (!got) {
        CHECK(0, name, "%s", err);
    } else {
        int top1 = 0;
        double kld = mean_kld(ref, got, 0, N, &top1), d = max_abs_diff(ref, got, (size_t)N * g_vocab);
        snprintf(name, sizeof name, "recipe %s: %d tokens teacher-forced, GPU vs CPU mean KLD %.3g <= 5e-4 (max "
                 "|dlogit| %.3g, top-1 %d/%d)", label, N, kld, d, top1, N);
        CHECK(kld <= 5e-4, name, "out of budget");
    }
    free(got);

    /* decode passes of 1-4 tokens: matvecs, decode attention, graphs from the second of a shape */
    float *dec = eval_decode(model, c->n_ctx, tokens, err, sizeof err);
    snprintf(name, sizeof name, "recipe %s: decode passes of 1-4 tokens", label);
    if (!dec) {
        CHECK(0, name, "%s", err);
    } else {
        int top1 = 0;
        double kld = mean_kld(ref, dec, P, N, &top1);
        snprintf(name, sizeof name, "recipe %s: decode passes of 1-4 tokens, GPU vs CPU mean KLD %.3g <= %.3g "
                 "(top-1 %d/%d)", label, kld, budget, top1, N - P);
        CHECK(kld <= budget, name, "out of budget");
    }
    free(dec);

    /* several sequences in one pass: the batch scheduler's decode steps */
    engine_params gp = params(1, 4 * c->n_ctx), cp = params(0, 4 * c->n_ctx);
    float *bg = batch_decode(model, gp, tokens, err, sizeof err);
    float *bc = bg ? batch_decode(model, cp, tokens, err, sizeof err) : NULL;
    snprintf(name, sizeof name, "recipe %s: 4 sequences decoded together", label);
    if (!bg || !bc) {
        CHECK(0, name, "%s", err);
    } else {
        int top1 = 0;
        double kld = mean_kld(bc, bg, 0, 4 * 8, &top1);
        snprintf(name, sizeof name, "recipe %s: 4 sequences x 8 steps decoded together, GPU vs CPU mean KLD %.3g "
                 "<= %.3g (top-1 %d/32)", label, kld, budget, top1);
        CHECK(kld <= budget, name, "out of budget");
    }
    free(bg);
    free(bc);

    if (f32) { /* the same greedy tokens */
        enum { G = 24 };
        int32_t a[G], b[G];
        int rc = greedy(model, params(0, c->n_ctx), tokens, G, a, err, sizeof err);
        if (!rc) rc = greedy(model, params(1, c->n_ctx), tokens, G, b, err, sizeof err);
        snprintf(name, sizeof name, "recipe %s: %d greedy tokens on the GPU equal the CPU's", label, G);
        if (rc) {
            CHECK(0, name, "%s", err);
        } else {
            int same = 0;
            while (same < G && a[same] == b[same]) same++;
            CHECK(same == G, name, "first difference at token %d (cpu %d, gpu %d)", same, a[same % G], b[same % G]);
        }
    }
out:
    free(ref);
    unlink(model);
}

int main(void) {
    char why[256] = "";
    if (forward_cuda_gpu.n_devices(why, sizeof why) == 0) {
        SKIP("gpu recipes", "no CUDA device");
        return 0;
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) test_case(&cases[c]);
    return test_done();
}
