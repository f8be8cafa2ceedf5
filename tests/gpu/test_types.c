/* The weight types the CUDA backend reads beside Llama's usual ones (issue 26: Q4_1, Q5_0, Q5_1, Q2_K,
 * Q3_K, BF16 in GGUF layout: matvec v13 (int8 X) for 1 to 4 tokens, v1 otherwise and for BF16; Q5_K
 * repacked, as Q4_K), against the CPU's dequantisation (quant_dequant_row) and
 * f64 dot products, on weights drawn at random and quantised by the CPU quantiser (so the blocks
 * are what a converter writes) and fresh random X:
 *   cu_matvec_f32 for 1 to 8 tokens on three shapes, cu_matvec_f16 for 3: relative error 1e-4
 *   where the kernel dequantises to f32 and accumulates in f32 (v1: X is not rounded), mvq.h's
 *   budget where it rounds X to int8 per 32 values (v11: Q5_K, v13: the GGUF-row types, 1 to 4 tokens);
 *   6 to 520 tokens as the engine's products take them (cuda_layer.c's mm_h): the GEMM where
 *   cu_gemm_supported says so (cu_gemm_f16_split_parts, its planes added; from 512 tokens the panel path;
 *   cu_gemm_f16 too), 2e-3 for its f16 weights and X; else matvecs of MATVEC_MAX_N tokens, 1e-4;
 *   cu_embed: exact (1e-6), an out-of-range id a row of NaN, the guard after the output intact;
 *   whole models: a mini-shape Llama (4 layers) written by mkmodel with that type for every
 *   matrix, token_embd and output included, on the GPU against the CPU's exact path: 64 tokens
 *   teacher-forced and the same tokens after an 8-token prompt in decode passes of 1 to 4 tokens,
 *   mean KLD <= 5e-4 each (decode: or the CPU's own distance with 8-bit activations, where the
 *   file's other matrices take the int8 matvecs); a Phi-3 model of Q4_K_M with its fused QKV in Q5_K, as llama.cpp's
 *   Q4_K_M files are; a Qwen3 model in Q5_K (ffn_down Q5_1) with its head tied to token_embd.
 * A type the backend refuses fails its checks with the load's one-line message. Without a CUDA
 * device: SKIP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/forward_cuda.h"
#include "kernels/check.h"
#include "kernels/kernels.h"
#include "tests/golden.h"
#include "tests/gpu/dev.h"
#include "tests/gpu/gen.h"
#include "tests/gpu/models.h"
#include "tests/gpu/mvq.h"

static const uint32_t g_types[] = {QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1, QUANT_Q5_K, QUANT_Q2_K, QUANT_Q3_K, QUANT_BF16};

/* rows x k weights of type t: normal with std 1 / sqrt(k), a scale per row drawn in (0.5, 2)
 * so rows differ, quantised row by row by the CPU; the GGUF bytes into *w and the dequantised
 * values (what the GPU must compute with) into *deq. 0, or -1 with err. */
static int make_weights(gen_rng *r, uint32_t t, int64_t rows, int64_t k, uint8_t **w, float **deq, char *err,
                        size_t es) {
    const size_t rb = quant_row_bytes(t, k);
    float *src = malloc(sizeof(float) * (size_t)k);
    *w = malloc(rb * (size_t)rows);
    *deq = malloc(sizeof(float) * (size_t)(rows * k));
    int rc = src && *w && *deq ? 0 : -1;
    if (rc) snprintf(err, es, "out of memory");
    for (int64_t i = 0; !rc && i < rows; i++) {
        const double s = gen_uniform(r, 0.5, 2.0) / sqrt((double)k);
        for (int64_t j = 0; j < k; j++) src[j] = (float)(s * gen_normal(r));
        rc = quant_quant_row(t, src, *w + i * rb, k, err, es) ||
             quant_dequant_row(t, *w + i * rb, *deq + i * k, k, err, es);
    }
    free(src);
    return rc ? -1 : 0;
}

/* ref[c][i] = f64 dot of row i of deq with X row c. */
static double *dot_ref(const float *deq, const float *x, int64_t rows, int64_t k, int n) {
    double *ref = malloc(sizeof(double) * (size_t)(n * rows));
    for (int c = 0; ref && c < n; c++)
        for (int64_t i = 0; i < rows; i++) {
            double s = 0;
            for (int64_t j = 0; j < k; j++) s += (double)deq[i * k + j] * x[c * k + j];
            ref[c * rows + i] = s;
        }
    return ref;
}

/* The device copy of rows x k GGUF weights as the engine keeps them (cu_matvec_repack), or NULL
 * where the backend does not take the type and shape. */
static void *dev_weights(const uint8_t *w, uint32_t t, int64_t rows, int64_t k) {
    const size_t rb = cu_matvec_repacked_bytes(t, rows, k);
    if (!rb) return NULL;
    void *dw = dev_upload(w, quant_row_bytes(t, k) * (size_t)rows), *dr = NULL;
    CUDA_CHECK(cudaMalloc(&dr, rb));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dw));
    return dr;
}

/* Y = W . X for n tokens by the production path: mode 0 cu_matvec_f32, 1 cu_matvec_f16 (X in
 * f16 bits), 2 the engine's product for n tokens (cu_gemm_f16_split_parts where the GEMM takes
 * the type, its split-K planes added here, else matvecs of MATVEC_MAX_N tokens), 3 cu_gemm_f16. */
static cudaError_t product(float *dy, const void *dw, uint32_t t, const float *dx, const uint16_t *dxh, int64_t rows,
                           int64_t k, int n, int mode) {
    if (mode == 0) return cu_matvec_f32(dy, dw, t, dx, rows, k, n, 0);
    if (mode == 1) return cu_matvec_f16(dy, dw, t, dxh, rows, k, n, 0);
    if (mode == 3) return cu_gemm_f16(dy, dw, t, dxh, rows, k, n, 0);
    if (cu_gemm_supported(t)) { /* as cuda_layer.c's mm_h calls it: the planes of a split-K left unsummed */
        int parts = 0;
        void *scratch = NULL;
        const size_t sb = cu_gemm_f16_scratch_bytes(rows, k, n);
        if (sb) CUDA_CHECK(cudaMalloc(&scratch, sb));
        cudaError_t e = cu_gemm_f16_split_parts(dy, dw, t, dxh, rows, k, n, scratch, sb, &parts, 0);
        if (e == cudaSuccess && parts > 1) { /* the planes in scratch, added in slice order as the engine does */
            const size_t ny = (size_t)n * (size_t)rows;
            float *pl = malloc(sizeof(float) * ny * (size_t)parts), *sum = calloc(ny, sizeof(float));
            CUDA_CHECK(cudaMemcpy(pl, scratch, sizeof(float) * ny * (size_t)parts, cudaMemcpyDeviceToHost));
            for (int s = 0; s < parts; s++)
                for (size_t i = 0; i < ny; i++) sum[i] += pl[(size_t)s * ny + i];
            CUDA_CHECK(cudaMemcpy(dy, sum, sizeof(float) * ny, cudaMemcpyHostToDevice));
            free(pl);
            free(sum);
        }
        if (scratch) CUDA_CHECK(cudaFree(scratch));
        return e;
    }
    for (int c = 0; c < n; c += MATVEC_MAX_N) {
        const int nc = n - c < MATVEC_MAX_N ? n - c : MATVEC_MAX_N;
        cudaError_t e = cu_matvec_f32(dy + (int64_t)c * rows, dw, t, dx + (int64_t)c * k, rows, k, nc, 0);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

static void test_product(gen_rng *r, uint32_t t, int64_t rows, int64_t k, int n, int mode) {
    static const char *modes[] = {"matvec x=f32", "matvec x=f16", "prompt product", "cu_gemm_f16"};
    char name[160], err[256] = "";
    const int gemm = mode >= 2 && cu_gemm_supported(t);
    if (mode == 3 && !gemm) return;
    snprintf(name, sizeof name, "%s %s %lldx%lld n=%d (%s)", modes[mode], quant_type_name(t), (long long)rows,
             (long long)k, n, mode >= 2 ? (gemm ? "gemm" : "matvecs") : "production kernel");
    uint8_t *w = NULL;
    float *deq = NULL;
    float *x = malloc(sizeof(float) * (size_t)(n * k)), *y = calloc((size_t)(n * rows), sizeof(float));
    uint16_t *xh = malloc(sizeof(uint16_t) * (size_t)(n * k));
    double *ref = NULL;
    if (make_weights(r, t, rows, k, &w, &deq, err, sizeof err)) {
        CHECK(0, name, "weights: %s", err);
        goto out;
    }
    for (int64_t i = 0; i < n * k; i++) {
        x[i] = (float)gen_uniform(r, -1, 1);
        xh[i] = quant_f32_to_f16(x[i]);
        if (mode >= 1) x[i] = quant_f16_to_f32(xh[i]); /* the same X for the f16 kernels and the f32 ones */
    }
    ref = dot_ref(deq, x, rows, k, n);
    void *dw = dev_weights(w, t, rows, k);
    if (!CHECK(dw != NULL && ref != NULL, name, "the backend does not take %s rows of %lld", quant_type_name(t),
               (long long)k))
        goto out;
    float *dx = dev_upload(x, sizeof(float) * (size_t)(n * k));
    uint16_t *dxh = dev_upload(xh, sizeof(uint16_t) * (size_t)(n * k));
    float *dy = dev_poisoned(n * rows);
    cudaError_t e = product(dy, dw, t, dx, dxh, rows, k, n, mode);
    const int guard = e == cudaSuccess && dev_download(y, dy, n * rows);
    const double rel = gen_rel_err(y, ref, n * rows), budget = gemm ? 2e-3 : 1e-4;
    const int kern = mode <= 1 ? cu_matvec_kernel(t, rows, k, n) : 0;
    if (kern >= 10) { /* X rounded to int8 per 32 values (v11 for Q5_K): mvq.h's budget per row */
        mvq_budget *bud = malloc(sizeof(mvq_budget) * (size_t)(n * rows));
        char why[160] = "";
        for (int c = 0; bud && c < n; c++)
            for (int64_t i = 0; i < rows; i++) bud[c * rows + i] = mvq_row_budget(deq + i * k, x + c * k, k);
        const int ok = bud && e == cudaSuccess && guard && mvq_check(y, ref, bud, n * rows, why, sizeof why);
        CHECK(ok, name, "v%d: %s, guard %s, %s (rel err %.3g)", kern, cudaGetErrorString(e),
              guard ? "ok" : "overwritten", why, rel);
        free(bud);
    } else {
        CHECK(e == cudaSuccess && guard && rel < budget, name, "%s, guard %s, rel err %.3g (budget %.0e)",
              cudaGetErrorString(e), guard ? "ok" : "overwritten", rel, budget);
    }
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dxh)); CUDA_CHECK(cudaFree(dy));
out:
    free(w); free(deq); free(x); free(xh); free(y); free(ref);
}

static void test_embed(gen_rng *r, uint32_t t) {
    char name[64], err[256] = "";
    snprintf(name, sizeof name, "embed %s", quant_type_name(t));
    enum { ROWS = 37, DIM = 768, NT = 6 };
    const int32_t ids[NT] = {0, 36, 5, 5, 17, ROWS};
    uint8_t *tab = NULL;
    float *deq = NULL, *out = calloc((size_t)NT * DIM, sizeof(float));
    double *ref = malloc(sizeof(double) * (NT - 1) * DIM);
    if (make_weights(r, t, ROWS, DIM, &tab, &deq, err, sizeof err) || !out || !ref) {
        CHECK(0, name, "weights: %s", err);
        goto out;
    }
    for (int i = 0; i < NT - 1; i++)
        for (int j = 0; j < DIM; j++) ref[i * DIM + j] = deq[ids[i] * DIM + j];
    void *dt = dev_upload(tab, quant_row_bytes(t, DIM) * ROWS), *di = dev_upload(ids, sizeof ids);
    float *dout = dev_poisoned(NT * DIM);
    cudaError_t e = cu_embed(dout, dt, t, di, NT, ROWS, DIM, 0);
    const int guard = e == cudaSuccess && dev_download(out, dout, NT * DIM);
    const double rel = gen_rel_err(out, ref, (NT - 1) * DIM);
    int nan_ok = 1;
    for (int j = 0; j < DIM; j++) if (out[(NT - 1) * DIM + j] == out[(NT - 1) * DIM + j]) nan_ok = 0;
    CHECK(e == cudaSuccess && guard && rel < 1e-6 && nan_ok, name, "%s, guard %s, rel err %.3g, bad id row %s",
          cudaGetErrorString(e), guard ? "ok" : "overwritten", rel, nan_ok ? "NaN" : "not NaN");
    CUDA_CHECK(cudaFree(dt)); CUDA_CHECK(cudaFree(di)); CUDA_CHECK(cudaFree(dout));
out:
    free(tab); free(deq); free(out); free(ref);
}

/* ---- whole models ----------------------------------------------------------------------------- */

enum { N = 64, P = 8 };

/* gpu 1: one GPU; 0: the CPU's exact path, which the GPU is held to; -1: the CPU's fast path with
 * activations rounded to one 8-bit value each (cpu_act_single), as the GPU's int8 decode matvecs
 * round them. */
static engine_params params(int gpu) {
    engine_params ep = engine_default_params();
    ep.n_threads = 16;
    ep.n_ctx = 512;
    ep.cpu_exact = gpu >= 0;
    ep.cpu_act_single = gpu < 0;
    if (gpu == 1) ep.gpu = &forward_cuda_gpu;
    else ep.split.n_gpu_layers = 0;
    return ep;
}

/* Mean KLD of rows [r0, N) of got against ref, and their top-1 matches. */
static double mean_kld(const float *ref, const float *got, int r0, int32_t V, int *top1) {
    double kld = 0;
    *top1 = 0;
    for (int row = r0; row < N; row++) {
        const float *a = ref + (size_t)row * V, *b = got + (size_t)row * V;
        kld += kl_div(a, b, V);
        *top1 += argmax(a, V) == argmax(b, V);
    }
    return kld / (N - r0);
}

/* The tokens after a P-token prompt in decode passes of 1, 2, 3, 4, 1, ... tokens on the GPU,
 * the logits of every token into out; 0, or -1 with err. */
static int eval_decode(const char *model, const int32_t *tokens, float *out, int32_t V, char *err, size_t es) {
    engine *e = NULL;
    engine_params ep = params(1);
    if (engine_load(&e, model, &ep, err, es)) return -1;
    int ok = !engine_eval(e, tokens, P, 0, out, 1, err, es);
    for (int pos = P, k = 1; ok && pos < N; pos += k, k = k % 4 + 1) {
        const int c = N - pos < k ? N - pos : k;
        ok = !engine_eval(e, tokens + pos, c, pos, out + (size_t)pos * V, 1, err, es);
    }
    engine_free(e);
    return ok ? 0 : -1;
}

static void test_model(const char *label, const char *args) {
    const char *model = gpu_make_model_args(label, args);
    if (!model) return;
    char name[256], err[512] = "";
    int32_t tokens[N];
    float *ref = NULL, *got = NULL, *dec = NULL;
    engine *e = NULL;
    engine_params ep = params(0);
    snprintf(name, sizeof name, "model %s: vocabulary", label);
    if (!CHECK(!engine_load(&e, model, &ep, err, sizeof err), name, "%s", err)) goto out;
    const int32_t V = engine_n_vocab(e);
    engine_free(e);
    gpu_random_tokens(tokens, N, 0x9e3779b97f4a7c15ULL);
    for (int i = 1; i < N; i++) tokens[i] = 3 + (tokens[i] - 3) % (V - 3); /* ids of this vocabulary */
    ref = golden_eval_all(model, params(0), tokens, N, err, sizeof err);
    snprintf(name, sizeof name, "model %s: CPU eval", label);
    if (!CHECK(ref != NULL, name, "%s", err)) goto out;
    got = golden_eval_all(model, params(1), tokens, N, err, sizeof err);
    snprintf(name, sizeof name, "model %s: GPU load and eval", label);
    if (CHECK(got != NULL, name, "%s", err)) {
        int top1 = 0;
        const double kld = mean_kld(ref, got, 0, V, &top1);
        snprintf(name, sizeof name, "model %s: %d tokens teacher-forced vs CPU exact (mean KLD %.3g <= 5e-4, top-1 "
                 "%d/%d)", label, N, kld, top1, N);
        CHECK(kld <= 5e-4, name, "out of budget");
    }
    /* Decode: the int8 matvecs (v11, v13) round activations to 8 bits as llama.cpp does (BF16's
     * v1 keeps f32); so the budget is the larger of 5e-4 and the CPU's own distance from
     * the exact path with activations rounded so (test_recipe's rule). */
    double budget = 5e-4;
    float *fast = golden_eval_all(model, params(-1), tokens, N, err, sizeof err);
    snprintf(name, sizeof name, "model %s: CPU fast path (8-bit activations)", label);
    if (!CHECK(fast != NULL, name, "%s", err)) goto out;
    int ftop1 = 0;
    const double fk = mean_kld(ref, fast, P, V, &ftop1);
    free(fast);
    if (fk > budget) budget = fk;
    dec = malloc((size_t)N * (size_t)V * sizeof *dec);
    snprintf(name, sizeof name, "model %s: decode passes of 1-4 tokens", label);
    if (CHECK(dec && !eval_decode(model, tokens, dec, V, err, sizeof err), name, "%s", err)) {
        int top1 = 0;
        const double kld = mean_kld(ref, dec, P, V, &top1);
        CHECK(kld <= budget, name, "mean KLD %.3g over %.3g (top-1 %d/%d)", kld, budget, top1, N - P);
        printf("# %s: mean KLD %.3g (budget %.3g: CPU 8-bit activations %.3g), top-1 %d/%d\n", name, kld, budget,
               fk, top1, N - P);
    }
out:
    free(ref); free(got); free(dec);
    unlink(model);
}

int main(void) {
    char why[256] = "";
    if (forward_cuda_gpu.n_devices(why, sizeof why) == 0) {
        SKIP("test_types", "no CUDA device");
        return 0;
    }
    gen_rng r = {(uint64_t)time(NULL) * 2654435761u | 1};
    printf("# seed-time %lld\n", (long long)r.s);
    const int64_t shapes[][2] = {{37, 512}, {131, 2816}, {1000, 4096}};
    for (size_t ti = 0; ti < sizeof g_types / sizeof g_types[0]; ti++) {
        const uint32_t t = g_types[ti];
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int n = 1; n <= MATVEC_MAX_N; n++)
                if (si == 1 || n == 1 || n == 4) test_product(&r, t, shapes[si][0], shapes[si][1], n, 0);
        test_product(&r, t, 131, 2816, 3, 1);
        test_product(&r, t, 300, 1024, 64, 2);
        test_product(&r, t, 131, 2816, 37, 2);
        test_product(&r, t, 1000, 4096, 200, 2);
        test_product(&r, t, 131, 2816, 6, 2);
        test_product(&r, t, 300, 1024, 512, 2); /* the panel path: panels dequantised from GGUF rows */
        test_product(&r, t, 131, 2816, 520, 2);
        test_product(&r, t, 300, 1024, 100, 3);
        test_embed(&r, t);
    }
    static const char *quants[] = {"q4_1", "q5_0", "q5_k", "q5_1", "q2_k", "q3_k", "bf16"};
    for (size_t i = 0; i < sizeof quants / sizeof quants[0]; i++) {
        char label[64], args[256];
        snprintf(label, sizeof label, "mini-%s", quants[i]);
        snprintf(args, sizeof args, "--shape mini --layers 4 --ctx 4096 --quant %s", quants[i]);
        test_model(label, args);
    }
    test_model("phi-s-q4_k_m-qkv-q5_k", "--shape phi-s --quant q4_k_m --tensor-type attn_qkv=q5_k");
    test_model("qwen3-s-q5_k-tied", "--shape qwen3-s --quant q5_k");
    return test_done();
}
