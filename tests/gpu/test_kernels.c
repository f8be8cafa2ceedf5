/* Every kernels.h launcher against a CPU reference (quant_dequant_row + f64 arithmetic) on
 * fresh random data: every weight type, odd sizes, outputs poisoned first and guarded after.
 * Error budgets (||gpu - ref|| / ||ref||): matvec 1e-4 (f32 accumulation; f32 X is split
 * exactly into two f16 halves on the tensor-core path), gemm 2e-3 (weights and X in f16),
 * embed 1e-6 (exact), rmsnorm, swiglu,
 * add 1e-5, rope 5e-4 (f32 angles at positions up to 4000), attention 1e-4, paged prompt
 * attention 3e-3 (Q and P in f16; kernels v2 and v3, bit-identical on a rerun), the swiglu-fused matvec 1e-4 (as matvec), the PDL chain
 * (add_rmsnorm > matvec > swiglu matvec > add, shared scratch) 2e-4 of the residual; the split-K
 * gemm as gemm, bit-identical on a rerun and in a graph replay; the f16-panel GEMMs (variants 5
 * and 4) as gemm, v4 against v5 1e-4, their dequantised panel 2^-8 of each row's largest |w|;
 * gemm v7 (variant 7 below the panel threshold) as the split-K gemm.
 * Matvecs run as production runs them (cu_matvec_kernel: v11, v10, v13, v3 or v1 by type and
 * shape): v3 and v1 within 1e-4, v10, v11 and v13 (X rounded to int8 per 32 values) and the decode fusions
 * built on them (cu_matvec_f32_norm, _acc, _swiglu_acc) within tests/gpu/mvq.h's budget of that
 * rounding; cu_matvec_f32_norm_glu against cu_matvec_f32_norm then paged_swiglu or cu_geglu (1e-3 of the rms),
 * cu_matvec_f32_norm_pair against two cu_matvec_f32_norm (1e-4 of the rms), cu_matvec_f32_acc_post against
 * the matvec then paged_post_add_rmsnorm (1e-5 of the added term's rms); their PDL chain against the same chain unfused (1e-2 of the update of x) and in f64
 * (5e-2). v11's ring depth (cu_matvec_ring_stages) is in those checks' names, "no ring" where none
 * fits and v10 runs. The variants production does not run (matvec v2, v4-v9, v10's other
 * options, other ring depths; gemm v1, v3, v5, v6) are checked by the kernel lab
 * (tests/kbench/matvec.cu, gemm.cu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tests/unit/test.h"
#include "tests/gpu/dev.h"
#include "tests/gpu/gen.h"
#include "tests/gpu/mvq.h"
#include "kernels/check.h"
#include "kernels/kernels.h"
#include "kernels/paged.h"
#include "kernels/recipe.h"
#include "kernels/gemm_lab.h"

/* Quantised rows (host, bytes long) in matvec's repacked layout on the device, as the engine
 * holds them. */
static void *dev_repacked(const void *w, size_t bytes, uint32_t t, int64_t rows, int64_t k) {
    void *dw = dev_upload(w, bytes), *dr = dev_alloc(cu_matvec_repacked_bytes(t, rows, k));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dw));
    return dr;
}

/* The f64 reference of Y[n][rows] = W . X[n][k] (W in GGUF layout), or NULL with err. */
static double *matvec_ref(uint32_t t, const void *w, const float *x, int64_t rows, int64_t k, int n, char *err,
                          size_t es) {
    double *ref = malloc(sizeof(double) * (size_t)(n * rows));
    float *row = malloc(sizeof(float) * (size_t)k);
    for (int64_t i = 0; ref && row && i < rows; i++) {
        if (quant_dequant_row(t, (const uint8_t *)w + i * quant_row_bytes(t, k), row, k, err, es)) {
            free(ref);
            ref = NULL;
            break;
        }
        for (int c = 0; c < n; c++) {
            double s = 0;
            for (int64_t j = 0; j < k; j++) s += (double)row[j] * x[c * k + j];
            ref[c * rows + i] = s;
        }
    }
    if (!row && ref) {
        snprintf(err, es, "out of memory");
        free(ref);
        ref = NULL;
    }
    free(row);
    return ref;
}

static double *v10_ref(uint32_t t, const void *w, const float *x, int64_t rows, int64_t k, int n, mvq_budget **bud,
                       char *err, size_t err_size);

/* y against ref: within mvq.h's budget (bud) where the kernel rounds X to int8 (v10, v11), else
 * within 1e-4 (||y - ref|| / ||ref||). */
static void matvec_verdict(const char *name, cudaError_t e, int guard, const float *y, const double *ref,
                           const mvq_budget *bud, int64_t count) {
    const double rel = gen_rel_err(y, ref, count);
    if (bud) {
        char why[160] = "";
        int ok = e == cudaSuccess && guard && mvq_check(y, ref, bud, count, why, sizeof why);
        CHECK(ok, name, "%s, guard %s, %s (rel err %.3g)", cudaGetErrorString(e), guard ? "ok" : "overwritten", why,
              rel);
    } else {
        CHECK(e == cudaSuccess && guard && rel < 1e-4, name, "%s, guard %s, rel err %.3g (budget 1e-4)",
              cudaGetErrorString(e), guard ? "ok" : "overwritten", rel);
    }
}

static void test_matvec(gen_rng *r, uint32_t t, int64_t rows, int64_t k, int n, int xh) {
    char name[128], err[256];
    const int kern = cu_matvec_kernel(t, rows, k, n);
    snprintf(name, sizeof name, "matvec v%d %s %lldx%lld n=%d x=%s", kern, quant_type_name(t), (long long)rows,
             (long long)k, n, xh ? "f16" : "f32");
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    float *x = malloc(sizeof(float) * (size_t)(n * k));
    uint16_t *xh16 = malloc(sizeof(uint16_t) * (size_t)(n * k));
    for (int64_t i = 0; i < n * k; i++) {
        x[i] = (float)gen_uniform(r, -1, 1);
        xh16[i] = quant_f32_to_f16(x[i]);
        if (xh) x[i] = quant_f16_to_f32(xh16[i]);
    }
    mvq_budget *bud = NULL;
    double *ref = kern >= 10 ? v10_ref(t, w, x, rows, k, n, &bud, err, sizeof err) : matvec_ref(t, w, x, rows, k, n, err, sizeof err);
    if (!ref) {
        CHECK(0, name, "reference: %s", err);
        return;
    }
    size_t rb = cu_matvec_repacked_bytes(t, rows, k);
    void *dw = dev_upload(w, wb), *dr = dev_alloc(rb);
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    void *dx = xh ? dev_upload(xh16, sizeof(uint16_t) * (size_t)(n * k)) : dev_upload(x, sizeof(float) * (size_t)(n * k));
    float *dy = dev_poisoned(n * rows);
    cudaError_t e = xh ? cu_matvec_f16(dy, dr, t, dx, rows, k, n, 0) : cu_matvec_f32(dy, dr, t, dx, rows, k, n, 0);
    float *y = calloc((size_t)(n * rows), sizeof(float));
    int guard = e == cudaSuccess && dev_download(y, dy, n * rows);
    matvec_verdict(name, e, guard, y, ref, bud, n * rows);
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
    free(w); free(x); free(xh16); free(ref); free(bud); free(y);
}

/* nk values of X ([n][k]) for v10, in 32-value groups as it rounds them to int8 (one scale per
 * group): magnitude drawn per group (50, 1 or 1e-3), and in a quarter of the groups one outlier
 * of 30 that sets the scale for the rest. With gu, X is silu(g) * u with u those values and g in
 * (1.5, 2.5) (silu(g) in (1.7, 2)), gu laid out per token as k gates then k ups (stride 2k). */
static void v10_fill(gen_rng *r, int64_t nk, int64_t k, float *gu, float *x) {
    for (int64_t b = 0; b < nk; b += 32) {
        const int kind = (int)(gen_u64(r) % 4);
        const double mag = kind == 0 ? 50 : kind == 1 ? 1 : 1e-3;
        for (int64_t i = b; i < b + 32; i++) {
            const double v = kind == 3 && i == b + 7 ? 30 : gen_uniform(r, -mag, mag);
            if (!gu) {
                x[i] = (float)v;
                continue;
            }
            const int64_t gi = 2 * k * (i / k) + i % k;
            gu[gi] = (float)gen_uniform(r, 1.5, 2.5);
            gu[gi + k] = (float)v;
            x[i] = gu[gi] / (1.0f + expf(-gu[gi])) * gu[gi + k];
        }
    }
}

/* The f64 reference of W . X ([n][rows], as y) and each value's matvec v10 budget (mvq.h) in
 * *bud; NULL with err (and *bud NULL) on failure. */
static double *v10_ref(uint32_t t, const void *w, const float *x, int64_t rows, int64_t k, int n, mvq_budget **bud,
                       char *err, size_t err_size) {
    double *ref = matvec_ref(t, w, x, rows, k, n, err, err_size);
    *bud = malloc(sizeof(mvq_budget) * (size_t)(n * rows));
    float *row = malloc(sizeof(float) * (size_t)k);
    for (int64_t j = 0; ref && j < rows; j++) {
        if (quant_dequant_row(t, (const uint8_t *)w + j * quant_row_bytes(t, k), row, k, err, err_size)) {
            free(ref);
            ref = NULL;
        } else {
            for (int c = 0; c < n; c++) (*bud)[c * rows + j] = mvq_row_budget(row, x + c * k, k);
        }
    }
    free(row);
    if (!ref) {
        free(*bud);
        *bud = NULL;
    }
    return ref;
}

/* The part of a v10-family check's name that says what ran: " ring S" (v11 with a ring S stages
 * deep) or " no ring" (v10 runs, or where v10 does not apply, v3). */
static const char *ring_name(uint32_t t, int64_t rows, int64_t k, int n, int norm, char *buf, size_t size) {
    const int st = cu_matvec_ring_stages(t, rows, k, n, norm);
    if (st) snprintf(buf, size, " ring %d", st);
    else snprintf(buf, size, "%s", " no ring");
    return buf;
}

/* Matvec v11 (v10 where no ring fits) for n tokens, X through cu_matvec_f32 (xmode 0), cu_matvec_f16 (1)
 * or cu_matvec_f32_swiglu (2), X over a wide range per 32-value block (|x| up to ~50, ~1, ~1e-3, or a
 * single outlier in small values) so that the per-block scales matter; mvq.h's budget per row and
 * token. */
static void test_matvec_v10(gen_rng *r, uint32_t t, int64_t rows, int64_t k, int n, int xmode) {
    static const char *xname[3] = {"f32", "f16", "swiglu"};
    char name[160], err[256], ring[32];
    snprintf(name, sizeof name, "matvec v%d %s %lldx%lld n=%d x=%s%s", cu_matvec_kernel(t, rows, k, n),
             quant_type_name(t), (long long)rows, (long long)k, n, xname[xmode],
             ring_name(t, rows, k, n, 0, ring, sizeof ring));
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    const int64_t nk = n * k;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    /* gu: per token its k gates then its k ups (strides 2k) */
    float *x = malloc(sizeof(float) * (size_t)nk), *gu = malloc(sizeof(float) * (size_t)(2 * nk));
    uint16_t *xh16 = malloc(sizeof(uint16_t) * (size_t)nk);
    v10_fill(r, nk, k, xmode == 2 ? gu : NULL, x);
    for (int64_t i = 0; xmode != 2 && i < nk; i++) {
        xh16[i] = quant_f32_to_f16(x[i]);
        if (xmode == 1) x[i] = quant_f16_to_f32(xh16[i]);
    }
    mvq_budget *bud;
    double *ref = v10_ref(t, w, x, rows, k, n, &bud, err, sizeof err);
    if (!ref) {
        CHECK(0, name, "reference: %s", err);
        return;
    }
    void *dw = dev_upload(w, wb), *dr = dev_alloc(cu_matvec_repacked_bytes(t, rows, k));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    void *dx = xmode == 0 ? dev_upload(x, sizeof(float) * (size_t)nk)
             : xmode == 1 ? dev_upload(xh16, sizeof(uint16_t) * (size_t)nk)
                          : dev_upload(gu, sizeof(float) * (size_t)(2 * nk));
    float *dy = dev_poisoned(n * rows);
    cudaError_t e = xmode == 0 ? cu_matvec_f32(dy, dr, t, dx, rows, k, n, 0)
                  : xmode == 1 ? cu_matvec_f16(dy, dr, t, dx, rows, k, n, 0)
                               : cu_matvec_f32_swiglu(dy, dr, t, dx, 2 * k, (const float *)dx + k, 2 * k, rows, k, n, 0);
    float *y = calloc((size_t)(n * rows), sizeof(float));
    int guard = e == cudaSuccess && dev_download(y, dy, n * rows);
    char why[160] = "";
    int ok = e == cudaSuccess && guard && mvq_check(y, ref, bud, n * rows, why, sizeof why);
    CHECK(ok, name, "%s, guard %s, %s (rel err %.3g)", cudaGetErrorString(e), guard ? "ok" : "overwritten", why,
          gen_rel_err(y, ref, n * rows));
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
    free(w); free(x); free(gu); free(xh16); free(ref); free(bud); free(y);
}

/* cu_matvec_f32_swiglu: X = silu(g) * u from strided rows (as a stacked gate/up matvec leaves them),
 * against f32 SwiGLU then the f64 dot. misalign shifts g and u by one float (scalar loads). */
static void test_matvec_swiglu(gen_rng *r, uint32_t t, int64_t rows, int64_t k, int n, int misalign) {
    char name[128], err[256];
    const int kern = cu_matvec_kernel(t, rows, k, n);
    snprintf(name, sizeof name, "matvec swiglu v%d %s %lldx%lld n=%d%s", kern, quant_type_name(t), (long long)rows,
             (long long)k, n, misalign ? " unaligned" : "");
    const int64_t stride = 2 * k + 4 + (misalign ? 1 : 0); /* [n][gate k | up k | pad] */
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    float *gu = malloc(sizeof(float) * (size_t)(n * stride + 1)), *x = malloc(sizeof(float) * (size_t)(n * k));
    for (int64_t i = 0; i < n * stride + 1; i++) gu[i] = (float)(2 * gen_normal(r));
    const int64_t g0 = misalign ? 1 : 0, u0 = g0 + k;
    for (int c = 0; c < n; c++)
        for (int64_t j = 0; j < k; j++) {
            float a = gu[g0 + c * stride + j];
            x[c * k + j] = a / (1.0f + expf(-a)) * gu[u0 + c * stride + j];
        }
    mvq_budget *bud = NULL;
    double *ref = kern >= 10 ? v10_ref(t, w, x, rows, k, n, &bud, err, sizeof err) : matvec_ref(t, w, x, rows, k, n, err, sizeof err);
    if (!ref) {
        CHECK(0, name, "reference: %s", err);
        return;
    }
    void *dw = dev_upload(w, wb), *dr = dev_alloc(cu_matvec_repacked_bytes(t, rows, k));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    float *dgu = dev_upload(gu, sizeof(float) * (size_t)(n * stride + 1)), *dy = dev_poisoned(n * rows);
    cudaError_t e = cu_matvec_f32_swiglu(dy, dr, t, dgu + g0, stride, dgu + u0, stride, rows, k, n, 0);
    float *y = calloc((size_t)(n * rows), sizeof(float));
    int guard = e == cudaSuccess && dev_download(y, dy, n * rows);
    matvec_verdict(name, e, guard, y, ref, bud, n * rows);
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dgu)); CUDA_CHECK(cudaFree(dy));
    free(w); free(gu); free(x); free(ref); free(bud); free(y);
}

/* The decode fusions (v11, v10 where no ring fits): cu_matvec_f32_norm (mode 0: X = cu_rmsnorm(x) * g, the
 * reference X as the CPU path computes it: f64 sum of squares, f32 scale), cu_matvec_f32_acc (1),
 * cu_matvec_f32_swiglu_acc (2: X = silu(g) * u from gate/up rows of stride 2k) and
 * cu_matvec_f32_acc_prefilled (3: as 1, its whole ring filled before the PDL wait), 1-3 adding onto a
 * Y of random values; x per 32-value block over a wide range as in test_matvec_v10, norm
 * weights of both signs. mvq.h's budget per row and token, plus 1e-6 |y0| for the f32 add. */
static void test_matvec_fused(gen_rng *r, uint32_t t, int64_t rows, int64_t k, int n, int mode) {
    static const char *mname[4] = {"norm", "acc", "swiglu acc", "acc prefilled"};
    char name[160], err[256], ring[32];
    snprintf(name, sizeof name, "matvec fused %s %s %lldx%lld n=%d%s", mname[mode], quant_type_name(t),
             (long long)rows, (long long)k, n, ring_name(t, rows, k, n, mode == 0, ring, sizeof ring));
    const int64_t nk = n * k;
    const float eps = 1e-5f;
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    /* raw: what the kernel reads (x, or gu: per token k gates then k ups); x: the reference X */
    float *raw = malloc(sizeof(float) * (size_t)(2 * nk)), *x = malloc(sizeof(float) * (size_t)nk);
    float *g = malloc(sizeof(float) * (size_t)k), *y0 = malloc(sizeof(float) * (size_t)(n * rows));
    for (int64_t i = 0; i < k; i++) g[i] = (float)gen_uniform(r, -1.5, 1.5);
    v10_fill(r, nk, k, mode == 2 ? raw : NULL, x);
    if (mode != 2) memcpy(raw, x, sizeof(float) * (size_t)nk);
    if (mode == 0) /* engine/forward_cpu.c's rmsnorm */
        for (int c = 0; c < n; c++) {
            double ss = 0;
            for (int64_t i = 0; i < k; i++) ss += (double)raw[c * k + i] * raw[c * k + i];
            const float scale = (float)(1.0 / sqrt(ss / (double)k + eps));
            for (int64_t i = 0; i < k; i++) x[c * k + i] = raw[c * k + i] * scale * g[i];
        }
    for (int64_t i = 0; i < n * rows; i++) y0[i] = mode ? (float)gen_uniform(r, -4, 4) : 0.0f;
    mvq_budget *bud;
    double *ref = v10_ref(t, w, x, rows, k, n, &bud, err, sizeof err);
    for (int64_t i = 0; ref && i < n * rows; i++) { /* y += W . X: the old y adds in, with its f32 rounding */
        bud[i].worst += 1e-6 * fabs(y0[i]);
        ref[i] += y0[i];
    }
    if (!ref) {
        CHECK(0, name, "reference: %s", err);
        return;
    }
    void *dw = dev_upload(w, wb), *dr = dev_alloc(cu_matvec_repacked_bytes(t, rows, k));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    float *dx = dev_upload(raw, sizeof(float) * (size_t)(mode == 2 ? 2 * nk : nk));
    float *dg = dev_upload(g, sizeof(float) * (size_t)k), *dy = dev_poisoned(n * rows);
    if (mode) CUDA_CHECK(cudaMemcpy(dy, y0, sizeof(float) * (size_t)(n * rows), cudaMemcpyHostToDevice));
    const int sup = cu_matvec_fused_supported(t, rows, k, n);
    cudaError_t e = mode == 0 ? cu_matvec_f32_norm(dy, dr, t, dx, dg, eps, rows, k, n, 0)
                  : mode == 1 ? cu_matvec_f32_acc(dy, dr, t, dx, rows, k, n, 0)
                  : mode == 3 ? cu_matvec_f32_acc_prefilled(dy, dr, t, dx, rows, k, n, 0)
                              : cu_matvec_f32_swiglu_acc(dy, dr, t, dx, 2 * k, dx + k, 2 * k, rows, k, n, 0);
    float *y = calloc((size_t)(n * rows), sizeof(float));
    int guard = e == cudaSuccess && dev_download(y, dy, n * rows);
    char why[160] = "";
    int ok = sup && e == cudaSuccess && guard && mvq_check(y, ref, bud, n * rows, why, sizeof why);
    CHECK(ok, name, "%s%s, guard %s, %s (rel err %.3g)", sup ? "" : "not supported?! ", cudaGetErrorString(e),
          guard ? "ok" : "overwritten", why, gen_rel_err(y, ref, n * rows));
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dg));
    CUDA_CHECK(cudaFree(dy));
    free(w); free(raw); free(x); free(g); free(y0); free(ref); free(bud); free(y);
}

/* cu_matvec_f32_norm_glu against cu_matvec_f32_norm then paged_swiglu (gelu: cu_geglu), which it folds together, on a
 * stacked gate/up matrix of 2F rows: each of the n x F outputs within 1e-3 of the unfused vector's
 * rms (the products' sums are split among warps differently, so not bit for bit; a gate row
 * paired with the wrong up row, a tile read from the wrong place or a missed row is off by O(1)),
 * nothing written past n x F. Variant 10, and rows not a whole number of pairs of tiles, are
 * declined with nothing launched. */
static void test_matvec_glu(gen_rng *r, uint32_t t, int64_t F, int64_t k, int n, int gelu) {
    char name[160], ring[32];
    const int64_t rows = 2 * F, nk = n * k;
    const float eps = 1e-5f;
    snprintf(name, sizeof name, "matvec norm %s %s 2x%lldx%lld n=%d%s", gelu ? "geglu" : "glu", quant_type_name(t),
             (long long)F, (long long)k, n, ring_name(t, rows, k, n, 1, ring, sizeof ring));
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    float *x = malloc(sizeof(float) * (size_t)nk), *g = malloc(sizeof(float) * (size_t)k);
    v10_fill(r, nk, k, NULL, x);
    for (int64_t i = 0; i < k; i++) g[i] = (float)gen_uniform(r, -1.5, 1.5);
    void *dw = dev_upload(w, wb), *dr = dev_alloc(cu_matvec_repacked_bytes(t, rows, k));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    float *dx = dev_upload(x, sizeof(float) * (size_t)nk), *dg = dev_upload(g, sizeof(float) * (size_t)k);
    float *dgu = dev_alloc(sizeof(float) * (size_t)(n * rows)), *dwant = dev_poisoned(n * F), *dy = dev_poisoned(n * F);
    cudaError_t e0 = cu_matvec_f32_norm(dgu, dr, t, dx, dg, eps, rows, k, n, 0);
    if (e0 == cudaSuccess)
        e0 = gelu ? cu_geglu(dwant, NULL, dgu, rows, dgu + F, rows, n, (int)F, 0)
                  : paged_swiglu(dwant, dgu, rows, dgu + F, rows, n, (int)F, 0);
    cudaError_t e = cu_matvec_f32_norm_glu(dy, dr, t, dx, dg, eps, rows, k, n, gelu, NULL, NULL, 0);
    float *want = malloc(sizeof(float) * (size_t)(n * F)), *y = malloc(sizeof(float) * (size_t)(n * F));
    int gw = dev_download(want, dwant, n * F), gy = e == cudaSuccess && dev_download(y, dy, n * F);
    double ss = 0, worst = 0;
    for (int64_t i = 0; i < n * F; i++) ss += (double)want[i] * want[i];
    const double rms = sqrt(ss / (double)(n * F)) + 1e-30;
    int64_t at = -1;
    for (int64_t i = 0; gy && i < n * F; i++) {
        const double d = fabs((double)y[i] - want[i]) / rms;
        if (!(d <= worst)) {
            worst = d;
            at = i;
        }
    }
    CHECK(e0 == cudaSuccess && e == cudaSuccess && gw && gy && worst <= 1e-3, name,
          "%s / %s, guard %s, worst %.3g of the rms %.3g at %lld (%g vs %g)", cudaGetErrorString(e0),
          cudaGetErrorString(e), gy ? "ok" : "overwritten", worst, rms, (long long)at, at >= 0 ? y[at] : 0.0,
          at >= 0 ? want[at] : 0.0);
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dg));
    CUDA_CHECK(cudaFree(dgu)); CUDA_CHECK(cudaFree(dwant)); CUDA_CHECK(cudaFree(dy));
    free(w); free(x); free(g); free(want); free(y);
}

/* cu_matvec_f32_acc_post (Gemma's post norm in the accumulating matvec's last block) against the
 * production matvec then paged_post_add_rmsnorm's post norm and add: y within 1e-5 of the added
 * term's rms (the same sums; the sum of squares grouped otherwise, in double), launched twice on
 * two copies of y (the second needs the first to have set the arrival counter back: it must read
 * 0 after each), nothing written past y. */
static void test_matvec_acc_post(gen_rng *r, uint32_t t, int64_t rows, int64_t k, int n, int prefilled) {
    char name[160];
    const int64_t nk = n * k, ny = n * rows;
    const float eps = 1e-6f;
    snprintf(name, sizeof name, "matvec acc post %s %lldx%lld n=%d%s", quant_type_name(t), (long long)rows,
             (long long)k, n, prefilled ? " prefilled" : "");
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    float *x = malloc(sizeof(float) * (size_t)nk), *y0 = malloc(sizeof(float) * (size_t)ny);
    float *post = malloc(sizeof(float) * (size_t)rows);
    v10_fill(r, nk, k, NULL, x);
    for (int64_t i = 0; i < ny; i++) y0[i] = (float)gen_uniform(r, -3, 3);
    for (int64_t i = 0; i < rows; i++) post[i] = (float)gen_uniform(r, 0.2, 2.0);
    void *dw = dev_upload(w, wb), *dr = dev_alloc(cu_matvec_repacked_bytes(t, rows, k));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    float *dx = dev_upload(x, sizeof(float) * (size_t)nk), *dpost = dev_upload(post, sizeof(float) * (size_t)rows);
    float *dprod = dev_alloc(sizeof(float) * (size_t)ny), *dsum = dev_alloc(sizeof(float) * (size_t)ny);
    float *dwant = dev_poisoned(ny), *dy1 = dev_poisoned(ny), *dy2 = dev_poisoned(ny);
    float *dpart = dev_alloc(sizeof(float) * (size_t)ny);
    unsigned *dcount = dev_alloc(sizeof(unsigned)), c1 = 1, c2 = 1;
    CUDA_CHECK(cudaMemset(dcount, 0, sizeof(unsigned)));
    float *dys[3] = {dwant, dy1, dy2}; /* every residual starts from y0 */
    for (int i = 0; i < 3; i++) CUDA_CHECK(cudaMemcpy(dys[i], y0, sizeof(float) * (size_t)ny, cudaMemcpyHostToDevice));
    cudaError_t e0 = cu_matvec_f32(dprod, dr, t, dx, rows, k, n, 0);
    if (e0 == cudaSuccess)
        e0 = paged_post_add_rmsnorm(dwant, dsum, NULL, dprod, 1, 0, dpost, NULL, n, (int)rows, eps, 0);
    cudaError_t e = cu_matvec_f32_acc_post(dy1, dr, t, dx, dpost, eps, dpart, dcount, rows, k, n, prefilled, 0);
    if (e == cudaSuccess) {
        CUDA_CHECK(cudaMemcpy(&c1, dcount, sizeof(unsigned), cudaMemcpyDeviceToHost));
        e = cu_matvec_f32_acc_post(dy2, dr, t, dx, dpost, eps, dpart, dcount, rows, k, n, prefilled, 0);
    }
    if (e == cudaSuccess) CUDA_CHECK(cudaMemcpy(&c2, dcount, sizeof(unsigned), cudaMemcpyDeviceToHost));
    float *want = malloc(sizeof(float) * (size_t)ny), *y1 = malloc(sizeof(float) * (size_t)ny),
          *y2 = malloc(sizeof(float) * (size_t)ny);
    int ok = e0 == cudaSuccess && e == cudaSuccess && dev_download(want, dwant, ny) && dev_download(y1, dy1, ny) &&
             dev_download(y2, dy2, ny);
    double ss = 0, worst = 0;
    for (int64_t i = 0; ok && i < ny; i++) ss += ((double)want[i] - y0[i]) * ((double)want[i] - y0[i]);
    const double rms = sqrt(ss / (double)ny) + 1e-30;
    for (int64_t i = 0; ok && i < ny; i++) {
        const double d = fmax(fabs((double)y1[i] - want[i]), fabs((double)y2[i] - want[i])) / rms;
        if (!(d <= worst)) worst = d;
    }
    CHECK(ok && worst <= 1e-5 && rms > 0.1 && c1 == 0 && c2 == 0, name,
          "%s / %s, %s, worst %.3g of the added term's rms %.3g, counter after %u, %u", cudaGetErrorString(e0),
          cudaGetErrorString(e), ok ? "guards ok" : "failed or overwritten", worst, rms, c1, c2);
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dpost));
    CUDA_CHECK(cudaFree(dprod)); CUDA_CHECK(cudaFree(dsum)); CUDA_CHECK(cudaFree(dwant)); CUDA_CHECK(cudaFree(dy1));
    CUDA_CHECK(cudaFree(dy2)); CUDA_CHECK(cudaFree(dpart)); CUDA_CHECK(cudaFree(dcount));
    free(w); free(x); free(y0); free(post); free(want); free(y1); free(y2);
}

/* cu_matvec_f32_norm_pair (Q4_K or Q5_K rows1 and Q6_K rows2 of one x in one launch) against two
 * cu_matvec_f32_norm: each output within 1e-4 of its matrix's rms (the pair's grids group the
 * sums otherwise; a block on the wrong matrix or a missed tile is off by O(1)), nothing written
 * past either output. */
static void test_matvec_norm_pair(gen_rng *r, uint32_t t1, int64_t rows1, int64_t rows2, int64_t k, int n) {
    char name[160];
    const uint32_t t2 = QUANT_Q6_K;
    const int64_t nk = n * k, rows[2] = {rows1, rows2};
    const uint32_t types[2] = {t1, t2};
    const float eps = 1e-6f;
    snprintf(name, sizeof name, "matvec norm pair %s %lld + Q6_K %lld x %lld n=%d", quant_type_name(t1),
             (long long)rows1, (long long)rows2, (long long)k, n);
    float *x = malloc(sizeof(float) * (size_t)nk), *g = malloc(sizeof(float) * (size_t)k);
    v10_fill(r, nk, k, NULL, x);
    for (int64_t i = 0; i < k; i++) g[i] = (float)gen_uniform(r, -1.5, 1.5);
    float *dx = dev_upload(x, sizeof(float) * (size_t)nk), *dg = dev_upload(g, sizeof(float) * (size_t)k);
    void *dw[2], *dr[2];
    float *dwant[2], *dy[2];
    cudaError_t e0 = cudaSuccess;
    for (int m = 0; m < 2; m++) {
        size_t wb = quant_row_bytes(types[m], k) * (size_t)rows[m];
        void *w = malloc(wb);
        gen_weights(r, types[m], rows[m], k, w);
        dw[m] = dev_upload(w, wb);
        dr[m] = dev_alloc(cu_matvec_repacked_bytes(types[m], rows[m], k));
        CUDA_CHECK(cu_matvec_repack(dr[m], dw[m], types[m], rows[m], k, 0));
        dwant[m] = dev_poisoned(n * rows[m]);
        dy[m] = dev_poisoned(n * rows[m]);
        if (e0 == cudaSuccess) e0 = cu_matvec_f32_norm(dwant[m], dr[m], types[m], dx, dg, eps, rows[m], k, n, 0);
        free(w);
    }
    cudaError_t e = cu_matvec_f32_norm_pair(dy[0], dr[0], t1, rows1, dy[1], dr[1], t2, rows2, dx, dg, eps, k, n, 0);
    double worst = 0;
    int ok = e0 == cudaSuccess && e == cudaSuccess;
    for (int m = 0; m < 2 && ok; m++) {
        float *want = malloc(sizeof(float) * (size_t)(n * rows[m])), *y = malloc(sizeof(float) * (size_t)(n * rows[m]));
        ok = dev_download(want, dwant[m], n * rows[m]) && dev_download(y, dy[m], n * rows[m]);
        double ss = 0;
        for (int64_t i = 0; i < n * rows[m]; i++) ss += (double)want[i] * want[i];
        const double rms = sqrt(ss / (double)(n * rows[m])) + 1e-30;
        for (int64_t i = 0; ok && i < n * rows[m]; i++) {
            const double d = fabs((double)y[i] - want[i]) / rms;
            if (!(d <= worst)) worst = d;
        }
        free(want); free(y);
    }
    CHECK(ok && worst <= 1e-4, name, "%s / %s, guards %s, worst %.3g of the rms", cudaGetErrorString(e0),
          cudaGetErrorString(e), ok ? "ok" : "overwritten or failed", worst);
    for (int m = 0; m < 2; m++) {
        CUDA_CHECK(cudaFree(dw[m])); CUDA_CHECK(cudaFree(dr[m]));
        CUDA_CHECK(cudaFree(dwant[m])); CUDA_CHECK(cudaFree(dy[m]));
    }
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dg));
    free(x); free(g);
}

/* cu_matvec_f32_norm_rope (and for a second matrix cu_matvec_f32_norm_rope_beside, on a stream with PDL;
 * shaped 1: on the SMs the first one's grid leaves; 2: both in one launch, cu_matvec_f32_norm_rope_pair,
 * as the engine runs them) against cu_matvec_f32_norm then paged_rope_store, which they fold together:
 * Q and both caches bit for bit (the same sums, the same rotation formula; a shaped V within one
 * f16 step (or 1e-5 of the largest stored value, near zero), its sums grouped by other blocks; the
 * one launch: Q within 1e-5 of its largest value, K and V as a shaped V), including the cells
 * and values it must not touch (both sets of caches start from the same random bits). Q, K and V
 * in one matrix (tqk == tv: Q4_0 layers) or Q and K in one and V in another (Q4_K_M's Q6_K V);
 * n tokens at random positions up to 4000 in distinct random cells; n_rot below head_dim too. */
static void test_matvec_norm_rope(gen_rng *r, uint32_t tqk, uint32_t tv, int n_head, int n_kv,
                                  int hd, int n_rot, int64_t k, int n, int shaped) {
    const int64_t nq = (int64_t)n_head * hd, kvd = (int64_t)n_kv * hd, cells = 64;
    const float eps = 1e-5f, theta = 500000.0f;
    char name[200], ring[32];
    const int one = tqk == tv;
    snprintf(name, sizeof name, "matvec norm rope %s%s%s%s heads %d/%d hd %d rot %d k %lld n=%d%s",
             quant_type_name(tqk), one ? "" : " + ", one ? "" : quant_type_name(tv),
             one ? "" : shaped == 2 ? " (one launch)" : shaped ? " (beside, shaped)" : " (beside)", n_head, n_kv, hd, n_rot,
             (long long)k, n, ring_name(tqk, nq + kvd * (one ? 2 : 1), k, n, 1, ring, sizeof ring));
    /* matrices: [0] Q K (and V when one), [1] V */
    int64_t rows[2] = {nq + kvd * (one ? 2 : 1), one ? 0 : kvd};
    uint32_t types[2] = {tqk, tv};
    void *dr[2] = {NULL, NULL};
    for (int m = 0; m < 2; m++) {
        if (!rows[m]) continue;
        size_t wb = quant_row_bytes(types[m], k) * (size_t)rows[m];
        void *w = malloc(wb);
        gen_weights(r, types[m], rows[m], k, w);
        void *dw = dev_upload(w, wb);
        dr[m] = dev_alloc(cu_matvec_repacked_bytes(types[m], rows[m], k));
        CUDA_CHECK(cu_matvec_repack(dr[m], dw, types[m], rows[m], k, 0));
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaFree(dw));
        free(w);
    }
    float *x = malloc(sizeof(float) * (size_t)(n * k)), *g = malloc(sizeof(float) * (size_t)k);
    v10_fill(r, n * k, k, NULL, x);
    for (int64_t i = 0; i < k; i++) g[i] = (float)gen_uniform(r, -1.5, 1.5);
    int32_t meta[8];
    gen_pos_cells(r, meta, meta + 4, n, cells); /* meta: n positions, then from [4] n cells */
    const size_t cache_b = sizeof(uint16_t) * (size_t)(cells * kvd);
    uint16_t *cinit = malloc(2 * cache_b);
    for (int64_t i = 0; i < 2 * cells * kvd; i++) cinit[i] = (uint16_t)gen_uniform(r, 0, 65535); /* any bits */
    float *dx = dev_upload(x, sizeof(float) * (size_t)(n * k)), *dg = dev_upload(g, sizeof(float) * (size_t)k);
    int32_t *dmeta = dev_upload(meta, sizeof meta);
    uint16_t *kc[2], *vc[2];
    float *q[2];
    for (int v = 0; v < 2; v++) {
        kc[v] = dev_upload(cinit, cache_b);
        vc[v] = dev_upload(cinit + cells * kvd, cache_b);
        q[v] = dev_poisoned(n * nq);
    }
    float *y = dev_poisoned(n * (nq + 2 * kvd));
    const int sup = cu_matvec_fused_supported(tqk, rows[0], k, n) && (!rows[1] || cu_matvec_fused_supported(tv, rows[1], k, n));
    /* reference: the products into y (Q K V side by side per token), then RoPE and the store */
    cudaError_t e = cu_matvec_f32_norm(y, dr[0], tqk, dx, dg, eps, rows[0], k, n, 0);
    if (e == cudaSuccess && rows[1]) e = cu_matvec_f32_norm(y + (int64_t)n * rows[0], dr[1], tv, dx, dg, eps, rows[1], k, n, 0);
    const int64_t st0 = rows[0], stv = one ? rows[0] : kvd;
    const float *yv = one ? y + nq + kvd : y + (int64_t)n * rows[0];
    if (e == cudaSuccess)
        e = paged_rope_store(q[0], kc[0], vc[0], y, st0, y + nq, st0, yv, stv, dmeta, dmeta + 4, n, n_head, n_kv, hd,
                             n_rot, theta, 0);
    /* the fold, on a stream of its own (PDL: the V matrix's launch runs beside the first's, as the
     * engine launches it) */
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CUDA_CHECK(cudaDeviceSynchronize());
    /* shaped: the V grid takes the SMs the Q/K grid leaves, as the engine launches it; 2: both in
     * one launch */
    const int beside_blocks = shaped == 1 ? cu_matvec_fused_blocks(tqk, rows[0], k, n) : 0;
    cudaError_t e2;
    if (shaped == 2)
        e2 = cu_matvec_f32_norm_rope_pair(dr[0], tqk, rows[0], nq, kvd, dr[1], tv, rows[1], 0, 0, dx, dg, eps, k, n,
                                       q[1], kc[1], vc[1], dmeta, dmeta + 4, kvd, hd, n_rot, theta, NULL, NULL, NULL,
                                       st);
    else
        e2 = cu_matvec_f32_norm_rope(dr[0], tqk, dx, dg, eps, rows[0], k, n, q[1], kc[1], vc[1], dmeta,
                                  dmeta + 4, nq, kvd, kvd, hd, n_rot, theta, NULL, NULL, NULL, st);
    if (e2 == cudaSuccess && rows[1] && shaped != 2)
        e2 = cu_matvec_f32_norm_rope_beside(dr[1], tv, dx, dg, eps, rows[1], k, n, NULL, NULL, vc[1], dmeta, dmeta + 4,
                                         0, 0, kvd, hd, n_rot, theta, NULL, beside_blocks, NULL, NULL, st);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaDeviceSynchronize());
    float *hq[2];
    uint16_t *hc[2];
    int guard = 1;
    for (int v = 0; v < 2; v++) {
        hq[v] = calloc((size_t)(n * nq), sizeof(float));
        hc[v] = malloc(2 * cache_b);
        guard &= dev_download(hq[v], q[v], n * nq);
        CUDA_CHECK(cudaMemcpy(hc[v], kc[v], cache_b, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(hc[v] + cells * kvd, vc[v], cache_b, cudaMemcpyDeviceToHost));
    }
    /* shaped, the V grid's blocks hold other tiles than the reference's, and their warps' partial
     * sums are grouped otherwise: V within one f16 step of the reference (the rounding of the sum
     * can land on either side); everything else bit for bit */
    /* the one launch shapes Q/K's grid too (mv10_dual_split): Q within 1e-5 of its largest value
     * and K as V below */
    const int loose = shaped == 2;
    float qmax = 0;
    for (int64_t i = 0; i < n * nq; i++) qmax = fmaxf(qmax, fabsf(hq[0][i]));
    int64_t dq = 0, dcache = 0, changed = 0, vstep = 0;
    float bad_a = 0, bad_b = 0; /* a cache value that differs more, and its reference */
    float cmax = 0;
    for (int64_t i = 0; i < 2 * cells * kvd; i++)
        if (hc[0][i] != cinit[i]) cmax = fmaxf(cmax, fabsf(quant_f16_to_f32(hc[0][i]))); /* stored values only */
    for (int64_t i = 0; i < n * nq; i++)
        dq += loose ? !(fabsf(hq[0][i] - hq[1][i]) <= 1e-5f * qmax) : memcmp(&hq[0][i], &hq[1][i], sizeof(float)) != 0;
    for (int64_t i = 0; i < 2 * cells * kvd; i++) {
        /* one f16 step apart, or (a value near zero, whose sum's rounding error is the vector's, not
         * its own) within 1e-5 of the cache's largest value */
        const float fa = quant_f16_to_f32(hc[0][i]), fb = quant_f16_to_f32(hc[1][i]);
        const int in_v = i >= cells * kvd,
                  step = hc[0][i] != hc[1][i] && fabsf(fa - fb) <= fmaxf(fabsf(fa), fabsf(fb)) / 1024 + 1e-5f * cmax;
        if (((shaped && !one && in_v) || loose) && step) {
            vstep++;
        } else if (hc[0][i] != hc[1][i]) {
            dcache++;
            bad_a = fa;
            bad_b = fb;
        }
        changed += hc[0][i] != cinit[i];
    }
    /* the reference itself stored n tokens' K and V (a stored f16 equal to the random one is rare) */
    const int stored = changed > n * kvd;
    CHECK(sup && e == cudaSuccess && e2 == cudaSuccess && guard && dq == 0 && dcache == 0 && stored &&
              (shaped != 1 || beside_blocks > 0), name,
          "%s%s%s / %s, guard %s, %lld of %lld Q values and %lld cache values differ (%lld cache values by one "
          "f16 step; one more: %g vs %g), %lld cache values stored",
          sup ? "" : "not supported?! ", shaped == 1 && beside_blocks <= 0 ? "no grid for the front?! " : "",
          cudaGetErrorString(e), cudaGetErrorString(e2), guard ? "ok" : "overwritten",
          (long long)dq, (long long)(n * nq), (long long)dcache, (long long)vstep, (double)bad_b, (double)bad_a,
          (long long)changed);
    for (int v = 0; v < 2; v++) {
        CUDA_CHECK(cudaFree(kc[v])); CUDA_CHECK(cudaFree(vc[v])); CUDA_CHECK(cudaFree(q[v]));
        free(hq[v]); free(hc[v]);
    }
    for (int m = 0; m < 2; m++) if (dr[m]) CUDA_CHECK(cudaFree(dr[m]));
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dg)); CUDA_CHECK(cudaFree(dmeta)); CUDA_CHECK(cudaFree(y));
    free(x); free(g); free(cinit);
}

/* Cases the fused matvecs do not take: cu_matvec_fused_supported says 0, each entry returns
 * cudaErrorNotSupported and writes nothing (the engine then runs the unfused kernels); and the
 * production shapes it must take. */
static void test_matvec_fused_cover(void) {
    static const struct { uint32_t t; int64_t rows, k; int n, want; const char *why; } cases[] = {
        {QUANT_Q4_0, 4096, 4096, 4, 1, "8b wo, 4 tokens"},
        {QUANT_Q4_K, 28672, 4096, 1, 1, "8b gate/up stacked"},
        {QUANT_Q6_K, 4096, 14336, 2, 1, "8b down Q6_K, 2 tokens"},
        {QUANT_Q8_0, 6144, 4096, 3, 1, "Q8_0 QKV, 3 tokens"},
        {QUANT_Q6_K, 4096, 14336, 3, 0, "Q6_K over 2 tokens"},
        {QUANT_Q4_0, 4096, 4096, 5, 0, "5 tokens"},
        {QUANT_Q4_0, 64, 288, 1, 0, "k not a multiple of 256"},
        {QUANT_Q8_0, 64, 320, 1, 0, "Q8_0 k not a multiple of 128"},
        {QUANT_Q5_K, 5120, 3072, 1, 1, "Phi-4-mini QKV Q5_K"},
        {QUANT_Q5_K, 4096, 14336, 4, 1, "Q5_K down, 4 tokens"},
        {QUANT_Q5_K, 4096, 4096, 5, 0, "Q5_K 5 tokens"},
        {QUANT_Q5_0, 4096, 4096, 1, 1, "Q5_0 (v13)"},
        {QUANT_Q3_K, 4096, 14336, 4, 1, "Q3_K down, 4 tokens (v13)"},
        {QUANT_Q3_K, 4096, 4096, 5, 0, "Q3_K 5 tokens"},
        {QUANT_Q4_1, 64, 288, 1, 0, "Q4_1 k not a multiple of 256"},
        {QUANT_F16, 64, 256, 1, 0, "F16"},
    };
    float *dy = dev_poisoned(8), *dx = dev_alloc(sizeof(float) * 4 * 14336 * 2);
    void *dw = dev_alloc(64);
    {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char name[128];
            snprintf(name, sizeof name, "matvec fused coverage: %s %s", cases[i].why,
                     cases[i].want ? "taken" : "declined");
            int sup = cu_matvec_fused_supported(cases[i].t, cases[i].rows, cases[i].k, cases[i].n);
            if (cases[i].want) {
                CHECK(sup == 1, name, "cu_matvec_fused_supported %d", sup);
                continue;
            }
            cudaError_t e1 = cu_matvec_f32_norm(dy, dw, cases[i].t, dx, dx, 1e-5f, cases[i].rows, cases[i].k, cases[i].n, 0);
            cudaError_t e2 = cu_matvec_f32_acc(dy, dw, cases[i].t, dx, cases[i].rows, cases[i].k, cases[i].n, 0);
            cudaError_t e3 = cu_matvec_f32_swiglu_acc(dy, dw, cases[i].t, dx, cases[i].k, dx, cases[i].k, cases[i].rows,
                                                   cases[i].k, cases[i].n, 0);
            float y[8];
            int untouched = dev_download(y, dy, 0);
            CHECK(sup == 0 && e1 == cudaErrorNotSupported && e2 == cudaErrorNotSupported &&
                  e3 == cudaErrorNotSupported && untouched, name, "supported %d, %s / %s / %s, output %s", sup,
                  cudaGetErrorString(e1), cudaGetErrorString(e2), cudaGetErrorString(e3),
                  untouched ? "untouched" : "written");
        }
    }
    CUDA_CHECK(cudaFree(dy)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dw));
}

/* Where v11 runs its ring (cu_matvec_ring_stages >= 2): every 8b decode shape (QKV stacked, wo,
 * gate/up stacked, down, a 32000-token output head), 1 to 4 tokens (Q6_K 2), plain and with the
 * norm's shared memory; so its checks above test the ring, not a silent fallback to v10. With
 * 227 KB of shared memory per block (H100, H200), 4 tokens of Q4_0 at k = 18432 leave no room for
 * 2 stages beside X: declined there (v10 runs; test_matvec_v10 checks that case's result). */
static void test_matvec_ring_cover(void) {
    static const uint32_t types[] = {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q8_0, QUANT_Q6_K};
    static const int64_t shapes[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {32000, 4096}};
    char name[128];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++)
            for (int n = 1; n <= (types[i] == QUANT_Q6_K ? 2 : 4); n++)
                for (int norm = 0; norm < 2; norm++) {
                    const int st = cu_matvec_ring_stages(types[i], shapes[j][0], shapes[j][1], n, norm);
                    snprintf(name, sizeof name, "matvec v11 ring coverage: %s %lldx%lld n=%d%s", quant_type_name(types[i]),
                             (long long)shapes[j][0], (long long)shapes[j][1], n, norm ? " norm" : "");
                    CHECK(st >= 2, name, "ring of %d stages", st);
                }
    int dev = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (optin == 227 * 1024) {
        const int st = cu_matvec_ring_stages(QUANT_Q4_0, 37, 18432, 4, 0);
        CHECK(st == 0, "matvec v11 ring coverage: Q4_0 37x18432 n=4 declined", "ring of %d stages", st);
    }
    CHECK(cu_matvec_ring_stages(QUANT_Q5_0, 64, 256, 1, 0) == 0 && cu_matvec_ring_stages(QUANT_Q4_0, 64, 288, 1, 0) == 0 &&
          cu_matvec_ring_stages(QUANT_Q4_0, 4096, 4096, 5, 0) == 0 && cu_matvec_ring_stages(QUANT_Q6_K, 4096, 4096, 3, 0) == 0,
          "matvec v11 ring coverage: no ring outside v10's cases", "a ring");
}

/* One FFN block per round, as the decode step chains it: x += d and xn = cu_rmsnorm(x)
 * (paged_add_rmsnorm), gu = Wgu . xn (gate and up stacked), o = Wdown . (silu(g) * u)
 * (cu_matvec_f32_swiglu), x += o (add); ROUNDS rounds of 5..8 tokens (v3's exact X: 1 to 4 run v10
 * / v11, whose chain test_fused_chain checks) back to back in one stream
 * (programmatic dependent launch on), scratch (xn, gu, o) shared by every round, so a kernel
 * that read its input before the previous kernel finished, or wrote before the next-but-one
 * had read, gives a wrong x. Run eagerly, then captured as a graph and replayed on fresh data. */
#define CHAIN_ROUNDS 16
/* The end of a chain test's pass: pass 0 ran eagerly; pass 1 captured, so the capture is ended
 * and instantiated; passes 1 and 2 launch the graph (2: replayed on fresh data); then the wait. */
static cudaError_t chain_pass_end(int pass, cudaError_t e, cudaStream_t st, cudaGraph_t *graph,
                                  cudaGraphExec_t *exec) {
    if (pass == 1) {
        cudaError_t ec = cudaStreamEndCapture(st, graph);
        if (e == cudaSuccess) e = ec;
        if (e == cudaSuccess) e = cudaGraphInstantiate(exec, *graph, 0);
    }
    if (pass >= 1 && e == cudaSuccess) e = cudaGraphLaunch(*exec, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    return e;
}

static void chain_fill(gen_rng *r, float *x0, float *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) { x0[i] = (float)gen_normal(r); d[i] = (float)gen_normal(r); }
}

/* One token's FFN block in f64, in place on its residual x: xn = cu_rmsnorm(x) * nw, then
 * x += Wdown . (silu(Wgate . xn) * (Wup . xn)) (gate and up stacked in wgu); xn and h scratch. */
static void ffn_ref(double *x, const float *nw, const float *wgu, const float *wdn, int dim, int ff, double *xn,
                    double *h) {
    double ss = 0;
    for (int j = 0; j < dim; j++) ss += x[j] * x[j];
    double s = 1.0 / sqrt(ss / dim + 1e-5);
    for (int j = 0; j < dim; j++) xn[j] = x[j] * s * nw[j];
    for (int i = 0; i < ff; i++) {
        double g = 0, u = 0;
        for (int j = 0; j < dim; j++) {
            g += (double)wgu[(size_t)i * dim + j] * xn[j];
            u += (double)wgu[(size_t)(ff + i) * dim + j] * xn[j];
        }
        h[i] = g / (1.0 + exp(-g)) * u;
    }
    for (int i = 0; i < dim; i++) {
        double o = 0;
        for (int j = 0; j < ff; j++) o += (double)wdn[(size_t)i * ff + j] * h[j];
        x[i] += o;
    }
}

static void chain_ref(double *out, const float *x0, const float *d, const float *nw, const float *wgu,
                      const float *wdn, int n, int dim, int ff) {
    double *xn = malloc(sizeof(double) * dim), *h = malloc(sizeof(double) * ff);
    for (int c = 0; c < n; c++) {
        for (int j = 0; j < dim; j++) out[c * dim + j] = (double)x0[c * dim + j] + d[c * dim + j];
        ffn_ref(out + (size_t)c * dim, nw, wgu, wdn, dim, ff, xn, h);
    }
    free(xn); free(h);
}

static float *dequant_matrix(uint32_t t, const void *w, int64_t rows, int64_t k) {
    char err[256];
    float *m = malloc(sizeof(float) * (size_t)(rows * k));
    for (int64_t i = 0; i < rows; i++)
        quant_dequant_row(t, (const uint8_t *)w + i * quant_row_bytes(t, k), m + i * k, k, err, sizeof err);
    return m;
}

static void test_chain(gen_rng *r, uint32_t tgu, uint32_t tdn) {
    const int dim = 1024, ff = 2816, MAXN = 8;
    char name[128];
    snprintf(name, sizeof name, "PDL chain add_rmsnorm > matvec %s > swiglu matvec %s > add, %d rounds",
             quant_type_name(tgu), quant_type_name(tdn), CHAIN_ROUNDS);
    size_t bgu = quant_row_bytes(tgu, dim) * 2 * ff, bdn = quant_row_bytes(tdn, ff) * dim;
    void *wgu = malloc(bgu), *wdn = malloc(bdn);
    gen_weights(r, tgu, 2 * ff, dim, wgu);
    gen_weights(r, tdn, dim, ff, wdn);
    float *fgu = dequant_matrix(tgu, wgu, 2 * ff, dim), *fdn = dequant_matrix(tdn, wdn, dim, ff);
    float *nw = malloc(sizeof(float) * dim);
    for (int j = 0; j < dim; j++) nw[j] = (float)gen_uniform(r, 0.5, 1.5);
    void *dsrc = dev_upload(wgu, bgu), *dgu_w = dev_alloc(cu_matvec_repacked_bytes(tgu, 2 * ff, dim));
    CUDA_CHECK(cu_matvec_repack(dgu_w, dsrc, tgu, 2 * ff, dim, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dsrc));
    dsrc = dev_upload(wdn, bdn);
    void *ddn_w = dev_alloc(cu_matvec_repacked_bytes(tdn, dim, ff));
    CUDA_CHECK(cu_matvec_repack(ddn_w, dsrc, tdn, dim, ff, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dsrc));
    float *dnw = dev_upload(nw, sizeof(float) * dim);
    /* per round: its own x and d; shared scratch */
    const size_t per = (size_t)MAXN * dim;
    float *x0 = malloc(sizeof(float) * per * CHAIN_ROUNDS), *d = malloc(sizeof(float) * per * CHAIN_ROUNDS);
    float *got = malloc(sizeof(float) * per * CHAIN_ROUNDS);
    double *ref = malloc(sizeof(double) * per * CHAIN_ROUNDS);
    float *dx = dev_alloc(sizeof(float) * per * CHAIN_ROUNDS), *dd = dev_alloc(sizeof(float) * per * CHAIN_ROUNDS);
    float *dxn = dev_poisoned((int64_t)per), *dgu = dev_poisoned((int64_t)MAXN * 2 * ff), *dout = dev_poisoned((int64_t)per);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    for (int pass = 0; pass < 3; pass++) { /* eager, graph, graph replayed on new data */
        chain_fill(r, x0, d, (int64_t)per * CHAIN_ROUNDS);
        CUDA_CHECK(cudaMemcpy(dx, x0, sizeof(float) * per * CHAIN_ROUNDS, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dd, d, sizeof(float) * per * CHAIN_ROUNDS, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());  /* pageable copies may return before they land */
        cudaError_t e = cudaSuccess;
        if (pass == 1) CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        if (pass < 2) {
            for (int i = 0; i < CHAIN_ROUNDS && e == cudaSuccess; i++) {
                const int n = 5 + i % 4;
                float *xi = dx + per * i;
                e = paged_add_rmsnorm(xi, dxn, dd + per * i, dnw, n, dim, 1e-5f, st);
                if (e == cudaSuccess) e = cu_matvec_f32(dgu, dgu_w, tgu, dxn, 2 * ff, dim, n, st);
                if (e == cudaSuccess)
                    e = cu_matvec_f32_swiglu(dout, ddn_w, tdn, dgu, 2 * ff, dgu + ff, 2 * ff, dim, ff, n, st);
                if (e == cudaSuccess) e = cu_add(xi, xi, dout, (int64_t)n * dim, st);
            }
        }
        e = chain_pass_end(pass, e, st, &graph, &exec);
        CUDA_CHECK(cudaMemcpy(got, dx, sizeof(float) * per * CHAIN_ROUNDS, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int i = 0; i < CHAIN_ROUNDS; i++) {
            const int n = 5 + i % 4;
            chain_ref(ref + per * i, x0 + per * i, d + per * i, nw, fgu, fdn, n, dim, ff);
            double rel = gen_rel_err(got + per * i, ref + per * i, (int64_t)n * dim);
            if (!(rel <= worst)) worst = isnan(rel) ? INFINITY : rel;
        }
        char pname[192];
        snprintf(pname, sizeof pname, "%s, %s", name, pass == 0 ? "eager" : pass == 1 ? "graph" : "graph replayed");
        CHECK(e == cudaSuccess && worst < 2e-4, pname, "%s, worst rel err of x %.3g (budget 2e-4)",
              cudaGetErrorString(e), worst);
    }
    if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
    if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(dgu_w)); CUDA_CHECK(cudaFree(ddn_w)); CUDA_CHECK(cudaFree(dnw)); CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dd)); CUDA_CHECK(cudaFree(dxn)); CUDA_CHECK(cudaFree(dgu)); CUDA_CHECK(cudaFree(dout));
    free(wgu); free(wdn); free(fgu); free(fdn); free(nw); free(x0); free(d); free(got); free(ref);
}

/* The fused decode layer's FFN and residual as the engine chains them (or in its other form, with
 * SwiGLU apart), ROUNDS rounds of 1..MAXN tokens back to back in one stream with PDL on, each
 * round its own x and d, the gate/up and SwiGLU scratch shared: x += Wo . d (cu_matvec_f32_acc),
 * gu = Wgu . cu_rmsnorm(x) (cu_matvec_f32_norm), x += Wdown . silu(g) * u (cu_matvec_f32_swiglu_acc, or
 * paged_swiglu then cu_matvec_f32_acc). A kernel that read x or gu before the previous kernel
 * finished, or wrote before the one before had read, gives a wrong x. Eager, as a graph, and the
 * graph replayed on fresh data; each time the update of x (x - x0) against the same chain of
 * unfused kernels (cu_matvec_f32, add, rmsnorm, paged_swiglu; v10 as well, so only f32 rounding
 * differs, and the int8 codes it flips: 1e-2, the worst of 1500 tokens in a CPU emulation 1.7e-3)
 * and against the f64 chain (v10's int8 X over three products: 5e-2, emulated worst 1e-2; a stale
 * input is off by ~1). */
static void fused_chain_ref(double *out, const float *x0, const float *d, const float *nw, const float *wo,
                            const float *wgu, const float *wdn, int n, int dim, int ff) {
    double *xn = malloc(sizeof(double) * dim), *h = malloc(sizeof(double) * ff);
    for (int c = 0; c < n; c++) {
        double *x = out + (size_t)c * dim;
        for (int i = 0; i < dim; i++) {
            double o = 0;
            for (int j = 0; j < dim; j++) o += (double)wo[(size_t)i * dim + j] * d[c * dim + j];
            x[i] = x0[c * dim + i] + o;
        }
        ffn_ref(x, nw, wgu, wdn, dim, ff, xn, h);
    }
    free(xn); free(h);
}

/* ||(a - x0) - (b - x0)|| / ||b - x0|| over n values (b in f64 or, with bf, f32). */
static double update_err(const float *a, const double *b, const float *bf, const float *x0, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (a[i] != a[i]) return INFINITY;
        const double ub = (bf ? (double)bf[i] : b[i]) - x0[i], ua = (double)a[i] - x0[i];
        num += (ua - ub) * (ua - ub);
        den += ub * ub;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void test_fused_chain(gen_rng *r, uint32_t tw, uint32_t tdn, int swiglu_apart) {
    const int dim = 1024, ff = 2816, MAXN = tw == QUANT_Q6_K || tdn == QUANT_Q6_K ? 2 : 4;
    const float eps = 1e-5f;
    char name[160];
    snprintf(name, sizeof name, "PDL chain fused: acc %s > norm %s > %s %s, %d rounds",
             quant_type_name(tw), quant_type_name(tw), swiglu_apart ? "swiglu, acc" : "swiglu acc",
             quant_type_name(tdn), CHAIN_ROUNDS);
    size_t bo = quant_row_bytes(tw, dim) * dim, bgu = quant_row_bytes(tw, dim) * 2 * ff,
           bdn = quant_row_bytes(tdn, ff) * dim;
    void *wo = malloc(bo), *wgu = malloc(bgu), *wdn = malloc(bdn);
    gen_weights(r, tw, dim, dim, wo);
    gen_weights(r, tw, 2 * ff, dim, wgu);
    gen_weights(r, tdn, dim, ff, wdn);
    float *fo = dequant_matrix(tw, wo, dim, dim), *fgu = dequant_matrix(tw, wgu, 2 * ff, dim);
    float *fdn = dequant_matrix(tdn, wdn, dim, ff);
    float *nw = malloc(sizeof(float) * dim);
    for (int j = 0; j < dim; j++) nw[j] = (float)gen_uniform(r, 0.5, 1.5);
    void *dwo = dev_alloc(cu_matvec_repacked_bytes(tw, dim, dim)), *dgu_w = dev_alloc(cu_matvec_repacked_bytes(tw, 2 * ff, dim));
    void *ddn_w = dev_alloc(cu_matvec_repacked_bytes(tdn, dim, ff));
    void *dsrc = dev_upload(wo, bo);
    CUDA_CHECK(cu_matvec_repack(dwo, dsrc, tw, dim, dim, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dsrc));
    dsrc = dev_upload(wgu, bgu);
    CUDA_CHECK(cu_matvec_repack(dgu_w, dsrc, tw, 2 * ff, dim, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dsrc));
    dsrc = dev_upload(wdn, bdn);
    CUDA_CHECK(cu_matvec_repack(ddn_w, dsrc, tdn, dim, ff, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dsrc));
    float *dnw = dev_upload(nw, sizeof(float) * dim);
    const size_t per = (size_t)MAXN * dim, all = per * CHAIN_ROUNDS;
    float *x0 = malloc(sizeof(float) * all), *d = malloc(sizeof(float) * all), *got = malloc(sizeof(float) * all);
    float *unf = malloc(sizeof(float) * all);
    double *ref = malloc(sizeof(double) * all);
    /* dx: the fused chain's x; dxu: the unfused chain's */
    float *dx = dev_alloc(sizeof(float) * all), *dxu = dev_alloc(sizeof(float) * all), *dd = dev_alloc(sizeof(float) * all);
    float *dxn = dev_poisoned((int64_t)per), *dgu = dev_poisoned((int64_t)MAXN * 2 * ff);
    float *dff = dev_poisoned((int64_t)MAXN * ff), *dout = dev_poisoned((int64_t)per);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    for (int pass = 0; pass < 3; pass++) { /* eager, graph, graph replayed on new data */
        chain_fill(r, x0, d, (int64_t)all);
        CUDA_CHECK(cudaMemcpy(dx, x0, sizeof(float) * all, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dxu, x0, sizeof(float) * all, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dd, d, sizeof(float) * all, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
        cudaError_t e = cudaSuccess;
        /* the unfused chain, eagerly */
        for (int i = 0; i < CHAIN_ROUNDS && e == cudaSuccess; i++) {
            const int n = i % MAXN + 1;
            float *xi = dxu + per * i;
            e = cu_matvec_f32(dout, dwo, tw, dd + per * i, dim, dim, n, st);
            if (e == cudaSuccess) e = cu_add(xi, xi, dout, (int64_t)n * dim, st);
            if (e == cudaSuccess) e = cu_rmsnorm(dxn, xi, dnw, n, dim, eps, st);
            if (e == cudaSuccess) e = cu_matvec_f32(dgu, dgu_w, tw, dxn, 2 * ff, dim, n, st);
            if (e == cudaSuccess) e = paged_swiglu(dff, dgu, 2 * ff, dgu + ff, 2 * ff, n, ff, st);
            if (e == cudaSuccess) e = cu_matvec_f32(dout, ddn_w, tdn, dff, dim, ff, n, st);
            if (e == cudaSuccess) e = cu_add(xi, xi, dout, (int64_t)n * dim, st);
        }
        if (e == cudaSuccess) e = cudaStreamSynchronize(st);
        if (pass == 1 && e == cudaSuccess) e = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
        if (pass < 2) {
            for (int i = 0; i < CHAIN_ROUNDS && e == cudaSuccess; i++) {
                const int n = i % MAXN + 1;
                float *xi = dx + per * i;
                e = cu_matvec_f32_acc(xi, dwo, tw, dd + per * i, dim, dim, n, st);
                if (e == cudaSuccess) e = cu_matvec_f32_norm(dgu, dgu_w, tw, xi, dnw, eps, 2 * ff, dim, n, st);
                if (e == cudaSuccess && swiglu_apart) {
                    e = paged_swiglu(dff, dgu, 2 * ff, dgu + ff, 2 * ff, n, ff, st);
                    if (e == cudaSuccess) e = cu_matvec_f32_acc(xi, ddn_w, tdn, dff, dim, ff, n, st);
                } else if (e == cudaSuccess) {
                    e = cu_matvec_f32_swiglu_acc(xi, ddn_w, tdn, dgu, 2 * ff, dgu + ff, 2 * ff, dim, ff, n, st);
                }
            }
        }
        e = chain_pass_end(pass, e, st, &graph, &exec);
        CUDA_CHECK(cudaMemcpy(got, dx, sizeof(float) * all, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(unf, dxu, sizeof(float) * all, cudaMemcpyDeviceToHost));
        double worst_u = 0, worst_r = 0;
        for (int i = 0; i < CHAIN_ROUNDS; i++) {
            const int n = i % MAXN + 1;
            const size_t o = per * i;
            fused_chain_ref(ref + o, x0 + o, d + o, nw, fo, fgu, fdn, n, dim, ff);
            double eu = update_err(got + o, NULL, unf + o, x0 + o, (int64_t)n * dim);
            double er = update_err(got + o, ref + o, NULL, x0 + o, (int64_t)n * dim);
            if (!(eu <= worst_u)) worst_u = isnan(eu) ? INFINITY : eu;
            if (!(er <= worst_r)) worst_r = isnan(er) ? INFINITY : er;
        }
        char pname[224];
        snprintf(pname, sizeof pname, "%s, %s", name, pass == 0 ? "eager" : pass == 1 ? "graph" : "graph replayed");
        CHECK(e == cudaSuccess && worst_u < 1e-2 && worst_r < 5e-2, pname,
              "%s, worst rel err of the update against the unfused chain %.3g (budget 1e-2), against f64 %.3g "
              "(budget 5e-2)", cudaGetErrorString(e), worst_u, worst_r);
    }
    if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
    if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(st));
    void *dev[] = {dwo, dgu_w, ddn_w, dnw, dx, dxu, dd, dxn, dgu, dff, dout};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) CUDA_CHECK(cudaFree(dev[i]));
    free(wo); free(wgu); free(wdn); free(fo); free(fgu); free(fdn); free(nw); free(x0); free(d); free(got);
    free(unf); free(ref);
}

/* Prefill GEMM on the repacked weights, X in f16. Weights are rounded to f16 after scaling
 * (unit roundoff u = 2^-11), accumulation is f32, so each output may be off by about u times the
 * sum of |w x| of its row, whatever the cancellation in the sum itself: the budget is 2e-3 (~4u)
 * of that sum, element by element. A norm-relative budget fails by chance on short rows whose
 * dot products cancel (seen: 1x256). */
/* The GEMM configuration the gemm checks pass (gemm_lab.h; kernels.h's cu_gemm_* run
 * CU_GEMM_PRODUCTION): variant 2 unless a check sets another, the panel path from 128 tokens. */
static cu_gemm_cfg g_gcfg = {2, 0, 1, 0, 1, 0};
static int g_gemm_variant = 2; /* g_gcfg.variant, for the check names */

static void test_gemm(gen_rng *r, uint32_t t, int64_t rows, int64_t k, int64_t n) {
    char name[128], err[256];
    snprintf(name, sizeof name, "gemm v%d %s %lldx%lld n=%lld", g_gemm_variant, quant_type_name(t), (long long)rows,
             (long long)k, (long long)n);
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    uint16_t *xh = malloc(sizeof(uint16_t) * (size_t)(n * k));
    for (int64_t i = 0; i < n * k; i++) xh[i] = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
    double *ref = malloc(sizeof(double) * (size_t)(n * rows));
    double *mag = malloc(sizeof(double) * (size_t)(n * rows));
    float *row = malloc(sizeof(float) * (size_t)k);
    for (int64_t i = 0; i < rows; i++) {
        quant_dequant_row(t, (const uint8_t *)w + i * quant_row_bytes(t, k), row, k, err, sizeof err);
        for (int64_t c = 0; c < n; c++) {
            double acc = 0, abs_acc = 0;
            for (int64_t j = 0; j < k; j++) {
                double p = (double)row[j] * quant_f16_to_f32(xh[c * k + j]);
                acc += p;
                abs_acc += fabs(p);
            }
            ref[c * rows + i] = acc;
            mag[c * rows + i] = abs_acc;
        }
    }
    void *dw = dev_upload(w, wb), *dr = dev_alloc(cu_matvec_repacked_bytes(t, rows, k));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    void *dx = dev_upload(xh, sizeof(uint16_t) * (size_t)(n * k));
    float *dy = dev_poisoned(n * rows), *y = calloc((size_t)(n * rows), sizeof(float));
    cudaError_t e = cu_gemm_f16_with(&g_gcfg, dy, dr, t, dx, rows, k, n, 0);
    int guard = e == cudaSuccess && dev_download(y, dy, n * rows);
    double rel = 0;  /* worst |y - ref| / sum |w x| over the outputs; NaN never passes */
    for (int64_t i = 0; i < n * rows; i++) {
        double d = fabs((double)y[i] - ref[i]) / (mag[i] > 0 ? mag[i] : 1e-30);
        if (!(d <= rel)) rel = isnan(d) ? INFINITY : d;
    }
    CHECK(e == cudaSuccess && guard && rel < 2e-3, name, "%s, guard %s, max err %.3g of sum |w x| (budget 2e-3)",
          cudaGetErrorString(e), guard ? "ok" : "overwritten", rel);
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
    free(w); free(xh); free(ref); free(mag); free(row); free(y);
}

/* cu_gemm_f16_split on one matrix for each of the nn token counts ns (largest last), fresh X each,
 * with the full scratch, with room for 2 slices only and with none (the one-pass fallback). The
 * reference covers ~48 sampled rows (every residue mod 128 differs: stride odd) plus the last
 * one, budget as test_gemm; every output must be written (no NaN poison left), and a second run
 * with the full scratch must be bit-identical to the first. */
static const int gemm_split_ns[] = {9, 16, 33, 64, 96, 128, 200};
#define GEMM_SPLIT_NS gemm_split_ns, (int)(sizeof gemm_split_ns / sizeof gemm_split_ns[0])

static void test_gemm_split(gen_rng *r, uint32_t t, int64_t rows, int64_t k, const int *ns, int nn) {
    const int nmax = ns[nn - 1];
    char name[160], err[256];
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    void *dr = dev_repacked(w, wb, t, rows, k);
    int64_t stride = rows > 48 ? (rows / 48) | 1 : 1, ns_rows = 0, *rs = malloc(sizeof(int64_t) * (size_t)(rows / stride + 2));
    for (int64_t i = 0; i < rows; i += stride) rs[ns_rows++] = i;
    if (rs[ns_rows - 1] != rows - 1) rs[ns_rows++] = rows - 1;
    float *dq = malloc(sizeof(float) * (size_t)(ns_rows * k));
    for (int64_t s = 0; s < ns_rows; s++)
        quant_dequant_row(t, (const uint8_t *)w + rs[s] * quant_row_bytes(t, k), dq + s * k, k, err, sizeof err);
    size_t sb = 0;
    for (int i = 0; i < nn; i++) if (cu_gemm_scratch_bytes_with(&g_gcfg, rows, k, ns[i]) > sb) sb = cu_gemm_scratch_bytes_with(&g_gcfg, rows, k, ns[i]);
    void *scr = sb ? dev_alloc(sb) : NULL;
    uint16_t *xh = malloc(sizeof(uint16_t) * (size_t)(nmax * k));
    float *xf = malloc(sizeof(float) * (size_t)(nmax * k));
    double *ref = malloc(sizeof(double) * (size_t)(nmax * ns_rows)), *mag = malloc(sizeof(double) * (size_t)(nmax * ns_rows));
    float *y = malloc(sizeof(float) * (size_t)(nmax * rows)), *y1 = malloc(sizeof(float) * (size_t)(nmax * rows));
    void *dx = dev_alloc(sizeof(uint16_t) * (size_t)(nmax * k));
    float *dy = dev_poisoned(nmax * rows);
    for (int ni = 0; ni < nn; ni++) {
        const int n = ns[ni];
        const size_t full = cu_gemm_scratch_bytes_with(&g_gcfg, rows, k, n), plane = (size_t)n * (size_t)rows * sizeof(float);
        for (int64_t i = 0; i < n * k; i++) {
            xh[i] = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
            xf[i] = quant_f16_to_f32(xh[i]);
        }
        CUDA_CHECK(cudaMemcpy(dx, xh, sizeof(uint16_t) * (size_t)(n * k), cudaMemcpyHostToDevice));
        for (int64_t s = 0; s < ns_rows; s++)
            for (int c = 0; c < n; c++) {
                double acc = 0, abs_acc = 0;
                for (int64_t j = 0; j < k; j++) {
                    double p = (double)dq[s * k + j] * xf[c * k + j];
                    acc += p;
                    abs_acc += fabs(p);
                }
                ref[c * ns_rows + s] = acc;
                mag[c * ns_rows + s] = abs_acc;
            }
        for (int v = 0; v < 3; v++) { /* full scratch, 2 planes, none */
            const size_t bytes = v == 0 ? full : v == 1 ? 2 * plane : 0;
            if (v == 1 && full <= 2 * plane) continue; /* the same as v == 0 */
            snprintf(name, sizeof name, "gemm_split v%d %s %lldx%lld n=%d %s (%zu planes)", g_gemm_variant, quant_type_name(t),
                     (long long)rows, (long long)k, n, v == 0 ? "full scratch" : v == 1 ? "2-plane scratch" : "no scratch",
                     bytes / plane);
            CUDA_CHECK(cudaMemset(dy, 0xff, (size_t)(nmax * rows + GUARD) * sizeof(float)));
            cudaError_t e = cu_gemm_f16_split_with(&g_gcfg, dy, dr, t, dx, rows, k, n, bytes ? scr : NULL, bytes, 0);
            int guard = e == cudaSuccess && dev_download(y, dy, n * rows);
            int64_t unwritten = 0;
            for (int64_t i = 0; i < n * rows; i++) unwritten += y[i] != y[i];
            double rel = 0;
            for (int c = 0; c < n; c++)
                for (int64_t s = 0; s < ns_rows; s++) {
                    const int64_t o = c * ns_rows + s;
                    double d = fabs((double)y[c * rows + rs[s]] - ref[o]) / (mag[o] > 0 ? mag[o] : 1e-30);
                    if (!(d <= rel)) rel = isnan(d) ? INFINITY : d;
                }
            int same = 1, parts = 1, parts_same = 1;
            if (v == 0 && e == cudaSuccess) { /* determinism: run again, compare bits */
                memcpy(y1, y, sizeof(float) * (size_t)(n * rows));
                CUDA_CHECK(cudaMemset(dy, 0xff, (size_t)n * rows * sizeof(float)));
                e = cu_gemm_f16_split_with(&g_gcfg, dy, dr, t, dx, rows, k, n, scr, bytes, 0);
                guard = guard && e == cudaSuccess && dev_download(y, dy, n * rows);
                same = memcmp(y, y1, sizeof(float) * (size_t)(n * rows)) == 0;
            }
            if (v == 0 && e == cudaSuccess) {
                /* the planes left unsummed (cu_gemm_f16_split_parts), added here in slice order: the
                 * same bits as the split's own sum */
                CUDA_CHECK(cudaMemset(dy, 0xff, (size_t)n * rows * sizeof(float)));
                e = cu_gemm_f16_split_parts_with(&g_gcfg, dy, dr, t, dx, rows, k, n, scr, bytes, &parts, 0);
                CUDA_CHECK(cudaDeviceSynchronize());
                const int64_t tot = (int64_t)n * rows;
                float *pl = malloc(sizeof(float) * (size_t)(parts > 1 ? parts * tot : 1));
                if (e == cudaSuccess && parts > 1) {
                    CUDA_CHECK(cudaMemcpy(pl, scr, sizeof(float) * (size_t)(parts * tot), cudaMemcpyDeviceToHost));
                    for (int64_t i = 0; i < tot; i++) {
                        float acc = pl[i];
                        for (int q = 1; q < parts; q++) acc += pl[q * tot + i];
                        parts_same &= memcmp(&acc, &y1[i], sizeof acc) == 0;
                    }
                } else if (e == cudaSuccess) {
                    guard = guard && dev_download(y, dy, n * rows);
                    parts_same = memcmp(y, y1, sizeof(float) * (size_t)tot) == 0;
                }
                free(pl);
            }
            CHECK(e == cudaSuccess && guard && unwritten == 0 && same && parts_same && rel < 2e-3, name,
                  "%s, guard %s, %lld outputs unwritten, rerun %s, %d parts summed here %s, max err %.3g of sum "
                  "|w x| (budget 2e-3)",
                  cudaGetErrorString(e), guard ? "ok" : "overwritten", (long long)unwritten,
                  same ? "bit-identical" : "DIFFERS", parts, parts_same ? "bit-identical" : "DIFFER", rel);
        }
    }
    CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
    if (scr) CUDA_CHECK(cudaFree(scr));
    free(w); free(rs); free(dq); free(xh); free(xf); free(ref); free(mag); free(y); free(y1);
}

/* Two split GEMMs sharing one scratch in a CUDA graph on a PDL stream (X copied in from staging,
 * then A . xa and B . xb): each replay on fresh X must give exactly the bits of the same calls
 * made eagerly on the legacy stream (same slices, same order), which test_gemm_split checks
 * against the CPU. Shared scratch catches a second GEMM writing partials the first one's sum is
 * still reading. */
static void test_gemm_split_graph(gen_rng *r, uint32_t t, int n) {
    char name[64];
    snprintf(name, sizeof name, "gemm_split graph replay v%d %s n=%d", g_gemm_variant, quant_type_name(t), n);
    const int64_t ra = 4096, ka = 4096, rb = 1024, kb = 14336;
    size_t wa_b = quant_row_bytes(t, ka) * (size_t)ra, wb_b = quant_row_bytes(t, kb) * (size_t)rb;
    void *w = malloc(wa_b > wb_b ? wa_b : wb_b);  /* either matrix in GGUF layout */
    void *wa = dev_alloc(cu_matvec_repacked_bytes(t, ra, ka)), *wbr = dev_alloc(cu_matvec_repacked_bytes(t, rb, kb));
    gen_weights(r, t, ra, ka, w);
    void *dw = dev_upload(w, quant_row_bytes(t, ka) * (size_t)ra);
    CUDA_CHECK(cu_matvec_repack(wa, dw, t, ra, ka, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dw));
    gen_weights(r, t, rb, kb, w);
    dw = dev_upload(w, quant_row_bytes(t, kb) * (size_t)rb);
    CUDA_CHECK(cu_matvec_repack(wbr, dw, t, rb, kb, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dw));
    size_t sb = cu_gemm_scratch_bytes_with(&g_gcfg, ra, ka, n);
    if (cu_gemm_scratch_bytes_with(&g_gcfg, rb, kb, n) > sb) sb = cu_gemm_scratch_bytes_with(&g_gcfg, rb, kb, n);
    void *scr = dev_alloc(sb ? sb : 4);
    const size_t xab = sizeof(uint16_t) * (size_t)(n * ka), xbb = sizeof(uint16_t) * (size_t)(n * kb);
    uint16_t *xa = malloc(xab), *xb = malloc(xbb);
    void *sxa = dev_alloc(xab), *sxb = dev_alloc(xbb), *dxa = dev_alloc(xab), *dxb = dev_alloc(xbb);
    float *ya = dev_poisoned(n * ra), *yb = dev_poisoned(n * rb), *ea = dev_poisoned(n * ra), *eb = dev_poisoned(n * rb);
    float *ga = malloc(sizeof(float) * (size_t)(n * ra)), *gb = malloc(sizeof(float) * (size_t)(n * rb));
    float *ha = malloc(sizeof(float) * (size_t)(n * ra)), *hb = malloc(sizeof(float) * (size_t)(n * rb));
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e1 = cudaSuccess, e2 = cudaSuccess;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaMemcpyAsync(dxa, sxa, xab, cudaMemcpyDeviceToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(dxb, sxb, xbb, cudaMemcpyDeviceToDevice, st));
    e1 = cu_gemm_f16_split_with(&g_gcfg, ya, wa, t, dxa, ra, ka, n, scr, sb, st);
    e2 = cu_gemm_f16_split_with(&g_gcfg, yb, wbr, t, dxb, rb, kb, n, scr, sb, st);
    CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    cudaError_t e = e1 != cudaSuccess ? e1 : e2;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    int ok = e == cudaSuccess, guard = 1, replays = 0;
    int64_t n_diff = 0, n_nan = 0;
    for (int rep = 0; rep < 3 && ok; rep++, replays++) {
        for (int64_t i = 0; i < n * ka; i++) xa[i] = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
        for (int64_t i = 0; i < n * kb; i++) xb[i] = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
        CUDA_CHECK(cudaMemcpy(sxa, xa, xab, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(sxb, xb, xbb, cudaMemcpyHostToDevice));
        /* a copy from pageable memory may return before its DMA lands, and the graph's stream
         * does not wait for the legacy stream's work */
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaGraphLaunch(exec, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        CUDA_CHECK(cu_gemm_f16_split_with(&g_gcfg, ea, wa, t, sxa, ra, ka, n, scr, sb, 0));
        CUDA_CHECK(cu_gemm_f16_split_with(&g_gcfg, eb, wbr, t, sxb, rb, kb, n, scr, sb, 0));
        guard = guard && dev_download(ga, ya, n * ra) && dev_download(gb, yb, n * rb) &&
                dev_download(ha, ea, n * ra) && dev_download(hb, eb, n * rb);
        n_diff = n_nan = 0;
        for (int64_t i = 0; i < n * ra; i++) {
            n_diff += memcmp(&ga[i], &ha[i], sizeof(float)) != 0;
            n_nan += ga[i] != ga[i];
        }
        for (int64_t i = 0; i < n * rb; i++) {
            n_diff += memcmp(&gb[i], &hb[i], sizeof(float)) != 0;
            n_nan += gb[i] != gb[i];
        }
        ok = guard && n_diff == 0 && n_nan == 0;
    }
    CHECK(ok, name, "%s, guard %s, replay %d: %lld values differ from the eager calls, %lld NaN",
          cudaGetErrorString(e), guard ? "ok" : "overwritten", replays, (long long)n_diff, (long long)n_nan);
    if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
    if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(wa)); CUDA_CHECK(cudaFree(wbr)); CUDA_CHECK(cudaFree(scr)); CUDA_CHECK(cudaFree(sxa));
    CUDA_CHECK(cudaFree(sxb)); CUDA_CHECK(cudaFree(dxa)); CUDA_CHECK(cudaFree(dxb)); CUDA_CHECK(cudaFree(ya));
    CUDA_CHECK(cudaFree(yb)); CUDA_CHECK(cudaFree(ea)); CUDA_CHECK(cudaFree(eb));
    free(w); free(xa); free(xb); free(ga); free(gb); free(ha); free(hb);
}

/* The f16-panel GEMMs (cfg variants 5, 4 and 6, cu_gemm_f16_split_with with cu_gemm_scratch_bytes_with of
 * scratch under the panel limit `limit`: cfg.panel_limit) against the full f64 reference,
 * test_gemm's budget; a rerun must be bit-identical, and v4 and v6 must agree with v5 within 1e-4
 * of sum |w x| element by element (all multiply the same f16 values; only the order and rounding
 * of the f32 sums differ), which tells a wgmma fault from a panel or dequantisation fault. nv: the
 * first 1 (v5 only) or 3 variants. */
static void test_gemm_panel(gen_rng *r, uint32_t t, int64_t rows, int64_t k, int n, size_t limit, int nv) {
    char name[192], err[256];
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    uint16_t *xh = malloc(sizeof(uint16_t) * (size_t)n * (size_t)k);
    for (int64_t i = 0; i < (int64_t)n * k; i++) xh[i] = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
    double *ref = malloc(sizeof(double) * (size_t)n * (size_t)rows), *mag = malloc(sizeof(double) * (size_t)n * (size_t)rows);
    float *row = malloc(sizeof(float) * (size_t)k), *xf = malloc(sizeof(float) * (size_t)n * (size_t)k);
    for (int64_t i = 0; i < (int64_t)n * k; i++) xf[i] = quant_f16_to_f32(xh[i]);
    for (int64_t i = 0; i < rows; i++) {
        quant_dequant_row(t, (const uint8_t *)w + i * quant_row_bytes(t, k), row, k, err, sizeof err);
        for (int c = 0; c < n; c++) {
            double acc = 0, abs_acc = 0;
            for (int64_t j = 0; j < k; j++) {
                double p = (double)row[j] * xf[(int64_t)c * k + j];
                acc += p;
                abs_acc += fabs(p);
            }
            ref[(int64_t)c * rows + i] = acc;
            mag[(int64_t)c * rows + i] = abs_acc;
        }
    }
    void *dr = dev_repacked(w, wb, t, rows, k);
    void *dx = dev_upload(xh, sizeof(uint16_t) * (size_t)n * (size_t)k);
    const int64_t total = (int64_t)n * rows;
    float *dy = dev_poisoned(total);
    static const int vs[3] = {5, 4, 6};
    float *y[3] = {malloc(sizeof(float) * (size_t)total), malloc(sizeof(float) * (size_t)total),
                   malloc(sizeof(float) * (size_t)total)};
    float *y1 = malloc(sizeof(float) * (size_t)total);
    int ran[3] = {0, 0, 0};
    g_gcfg.panel_limit = limit;
    for (int vi = 0; vi < nv; vi++) {
        const int v = vs[vi];
        g_gcfg.variant = v;
        snprintf(name, sizeof name, "gemm panel v%d %s %lldx%lld n=%d, panel limit %zu KiB", v, quant_type_name(t),
                 (long long)rows, (long long)k, n, limit >> 10);
        const size_t sb = cu_gemm_scratch_bytes_with(&g_gcfg, rows, k, n);
        void *scr = dev_alloc(sb ? sb : 4);
        CUDA_CHECK(cudaMemset(dy, 0xff, (size_t)(total + GUARD) * sizeof(float)));
        cudaError_t e = cu_gemm_f16_split_with(&g_gcfg, dy, dr, t, dx, rows, k, n, scr, sb, 0);
        int guard = e == cudaSuccess && dev_download(y[vi], dy, total);
        double rel = 0;
        int64_t unwritten = 0;
        for (int64_t i = 0; i < total; i++) {
            unwritten += y[vi][i] != y[vi][i];
            double d = fabs((double)y[vi][i] - ref[i]) / (mag[i] > 0 ? mag[i] : 1e-30);
            if (!(d <= rel)) rel = isnan(d) ? INFINITY : d;
        }
        int same = 0;
        if (e == cudaSuccess) {
            CUDA_CHECK(cudaMemset(dy, 0xff, (size_t)total * sizeof(float)));
            e = cu_gemm_f16_split_with(&g_gcfg, dy, dr, t, dx, rows, k, n, scr, sb, 0);
            guard = guard && e == cudaSuccess && dev_download(y1, dy, total);
            same = memcmp(y1, y[vi], sizeof(float) * (size_t)total) == 0;
        }
        ran[vi] = e == cudaSuccess && guard;
        CHECK(e == cudaSuccess && guard && unwritten == 0 && same && rel < 2e-3, name,
              "%s, guard %s, %lld outputs unwritten, rerun %s, max err %.3g of sum |w x| (budget 2e-3)",
              cudaGetErrorString(e), guard ? "ok" : "overwritten", (long long)unwritten,
              same ? "bit-identical" : "DIFFERS", rel);
        CUDA_CHECK(cudaFree(scr));
    }
    for (int vi = 1; vi < nv; vi++) {
        snprintf(name, sizeof name, "gemm panel v%d == v5 %s %lldx%lld n=%d, panel limit %zu KiB", vs[vi],
                 quant_type_name(t), (long long)rows, (long long)k, n, limit >> 10);
        double worst = 0;
        int64_t at = 0;
        for (int64_t i = 0; i < total && ran[0] && ran[vi]; i++) {
            double d = fabs((double)y[0][i] - (double)y[vi][i]) / (mag[i] > 0 ? mag[i] : 1e-30);
            if (!(d <= worst)) {
                worst = isnan(d) ? INFINITY : d;
                at = i;
            }
        }
        CHECK(ran[0] && ran[vi] && worst < 1e-4, name, "worst |v%d - v5| %.3g of sum |w x| at token %lld row %lld "
              "(budget 1e-4)", vs[vi], worst, (long long)(at / rows), (long long)(at % rows));
    }
    g_gcfg.panel_limit = 0;
    g_gcfg.variant = 2;
    CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
    free(w); free(xh); free(ref); free(mag); free(row); free(xf); free(y[0]); free(y[1]); free(y[2]); free(y1);
}

/* cu_gemm_f16_dequant's f16 panel of a one-panel matrix against quant_dequant_row: the layout
 * (kernels.h), zero rows past the matrix, and each value within 2^-8 of its row's largest |w|
 * (one f16 rounding of the scaled code and of the scales; Q4_K's d sc q - dmin m can cancel, so
 * the bound is on the row, not the value). A wrong layout moves values by about that largest
 * |w|, so it fails here before any GEMM check does. */
static void test_gemm_dequant(gen_rng *r, uint32_t t, int64_t rows, int64_t k) {
    char name[128], err[256];
    snprintf(name, sizeof name, "gemm panel dequant %s %lldx%lld", quant_type_name(t), (long long)rows, (long long)k);
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    void *dr = dev_repacked(w, wb, t, rows, k);
    const int64_t C = (k + 63) / 64, R = (rows + 127) / 128 * 128;
    const size_t pbytes = (size_t)R * (size_t)C * 128, sb = pbytes + 1024;
    uint8_t *scr = dev_alloc(sb);
    CUDA_CHECK(cudaMemset(scr, 0xff, sb)); /* NaN halves wherever nothing is written */
    cudaError_t e = cu_gemm_f16_dequant(&g_gcfg, scr, sb, dr, t, rows, k, 0);
    uint16_t *panel = malloc(pbytes);
    const size_t off = (size_t)((((uintptr_t)scr + 1023) & ~(uintptr_t)1023) - (uintptr_t)scr);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(panel, scr + off, pbytes, cudaMemcpyDeviceToHost));
    float *row = malloc(sizeof(float) * (size_t)(C * 64));
    double worst = 0;
    int64_t bad_r = -1, bad_j = -1;
    for (int64_t i = 0; i < R; i++) {
        double rmax = 0;
        for (int64_t j = 0; j < C * 64; j++) row[j] = 0;
        if (i < rows) quant_dequant_row(t, (const uint8_t *)w + i * quant_row_bytes(t, k), row, k, err, sizeof err);
        for (int64_t j = 0; j < k; j++) if (fabs(row[j]) > rmax) rmax = fabs(row[j]);
        for (int64_t j = 0; j < C * 64; j++) {
            const float g = quant_f16_to_f32(panel[((i / 128) * C + j / 64) * 8192 + (i % 128) * 64 + j % 64]);
            double d = fabs((double)g - row[j]) / (rmax > 0 ? rmax : 1);
            if (!(d <= worst)) {
                worst = isnan(d) ? INFINITY : d;
                bad_r = i;
                bad_j = j;
            }
        }
    }
    CHECK(e == cudaSuccess && worst <= 0x1p-8, name, "%s, worst |panel - w| %.3g of the row's max |w| at row %lld "
          "column %lld (budget 2^-8)", cudaGetErrorString(e), worst, (long long)bad_r, (long long)bad_j);
    CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(scr));
    free(w); free(panel); free(row);
}

/* The f16-panel path (variants 5, 4 and 6, n >= 128), v5 first throughout so that a fault in the
 * wgmma variants (a sticky CUDA error) leaves v5's results standing: the dequantised panel, v5 on
 * the 8b shapes through test_gemm_split (its 2-plane scratch gives smaller panels, its empty one
 * v2) and a graph replay at n = 256, v5 against the full reference with one panel and with small
 * panel limits that force several row and k panels (partial last ones; 64 KiB: 128 rows x 256
 * weights), then the same with v4 and v6 compared with v5, then v4 and v6 on the 8b shapes and
 * on one that takes v4's 256-row blocks (on 132 SMs). */
static void test_gemm_panels(gen_rng *r) {
    static const uint32_t types[] = {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q8_0};
    static const int ns[] = {128, 129, 200, 512}, n600[] = {600};
    const int ntypes = (int)(sizeof types / sizeof types[0]);
    for (int i = 0; i < ntypes; i++) {
        const int64_t odd_k = types[i] == QUANT_Q4_0 || types[i] == QUANT_Q8_0 ? 2848 : 2816;
        test_gemm_dequant(r, types[i], 300, odd_k);
        test_gemm_dequant(r, types[i], 128, 256);
    }
    for (int pass = 0; pass < 2; pass++) {
        const int nv = pass == 0 ? 1 : 3;
        for (int i = 0; i < ntypes; i++) {
            const uint32_t t = types[i];
            const int64_t odd_k = t == QUANT_Q4_0 || t == QUANT_Q8_0 ? 2848 : 2816;
            if (pass == 0) {
                g_gemm_variant = 5;
                g_gcfg.variant = 5;
                test_gemm_split(r, t, 4096, 4096, ns, 4);
                test_gemm_split(r, t, 14336, 4096, ns, 4);
                test_gemm_split(r, t, 4096, 14336, ns, 4);
                test_gemm_split(r, t, 1024, 4096, ns, 4);
                test_gemm_split(r, t, 37, 2816, ns, 4);
                test_gemm_split_graph(r, t, 256);
            }
            test_gemm_panel(r, t, 37, 512, 128, 0, nv);
            test_gemm_panel(r, t, 1, 256, 130, 0, nv);
            test_gemm_panel(r, t, 300, odd_k, 129, 0, nv);
            test_gemm_panel(r, t, 130, 4096, 600, 0, nv);
            test_gemm_panel(r, t, 256, 1024, 256, 0, nv); /* split-K: 2 x 2 tiles */
            test_gemm_panel(r, t, 300, 2816, 129, 64 << 10, nv);
            test_gemm_panel(r, t, 1000, odd_k, 300, 256 << 10, nv);
            test_gemm_panel(r, t, 700, 14336, 140, 1 << 20, nv);
        }
    }
    for (int v = 4; v <= 6; v += 2) {
        g_gemm_variant = v;
        g_gcfg.variant = v;
        for (int i = 0; i < ntypes; i++) {
            test_gemm_split(r, types[i], 4096, 4096, ns, 4);
            test_gemm_split(r, types[i], 14336, 4096, ns, 4);
            test_gemm_split(r, types[i], 4096, 14336, ns, 4);
            test_gemm_split(r, types[i], 1024, 4096, ns, 4);
            /* one panel of 63 row blocks whose 5 x 32 tiles of 256 rows fill 132 SMs: v4's 256-row
             * blocks (m64n256k16), the last one half past the panel (zero-filled) */
            test_gemm_split(r, types[i], 8000, 512, n600, 1);
            test_gemm_split_graph(r, types[i], 256);
        }
    }
    g_gemm_variant = 2;
    g_gcfg.variant = 2;
}

/* v7 (gemm_wg.cuh: wgmma on weights dequantised in registers; cfg variant 7 runs it below
 * the panel threshold, raised here past every n so that each call takes it; v2 off compute
 * capability 9.0) against the CPU with test_gemm's budget, for every type: n = 1 and 5 (its
 * 8-token wgmma), 8, 17 (32), 64, 100 and 128 (two 64-token warpgroups per block), 200 (two
 * token tiles); rows not a multiple of 16, 64 or the block's 256 (1, 37, 300, 1000, 4097); k of 1
 * to 56 super-blocks, for the 32-weight types with a half last chunk and a last super-block of
 * fewer chunks (2848); through cu_gemm_f16 (one pass) and cu_gemm_f16_split (its slice model with full
 * scratch, with 2 planes and none, a bit-identical rerun), forced slice counts that leave a short
 * last slice, and a graph replay. Last in the suite: a fault in new wgmma code is sticky. */
static void test_gemm_v7(gen_rng *r) {
    static const uint32_t types[] = {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q8_0};
    static const int ns[] = {1, 5, 8, 17, 64, 100, 128}, nbig[] = {5, 16, 33, 64, 100, 128, 200};
    g_gemm_variant = 7;
    g_gcfg.variant = 7;
    g_gcfg.panel_min_n = 1 << 30;
    for (int i = 0; i < (int)(sizeof types / sizeof types[0]); i++) {
        const uint32_t t = types[i];
        const int64_t odd_k = t == QUANT_Q4_0 || t == QUANT_Q8_0 ? 2848 : 2816;
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) test_gemm(r, t, 37, 512, ns[j]);
        test_gemm(r, t, 1, 256, 5);
        test_gemm(r, t, 300, odd_k, 64);
        test_gemm(r, t, 1000, 256, 17);
        test_gemm(r, t, 130, 4096, 100);
        test_gemm(r, t, 200, 14336, 8);
        test_gemm(r, t, 4097, 256, 200);
        test_gemm_split(r, t, 4096, 4096, nbig, 7);
        test_gemm_split(r, t, 6144, 4096, ns, 7);
        test_gemm_split(r, t, 14336, 4096, ns, 7);
        test_gemm_split(r, t, 4096, 14336, ns, 7);
        test_gemm_split(r, t, 1000, odd_k, nbig, 7);
        test_gemm_split(r, t, 37, odd_k, ns, 7);
        /* small models' matrices (n_embd 256: one super-block of k; FFN 640: 32-weight types
         * with two chunks past the super-blocks), few tiles, so split */
        test_gemm_split(r, t, 256, 256, nbig, 7);
        test_gemm_split(r, t, 128, 256, nbig, 7);
        test_gemm_split(r, t, 2048, 256, nbig, 7);
        if (t == QUANT_Q4_0 || t == QUANT_Q8_0) test_gemm_split(r, t, 256, 640, nbig, 7);
        for (int s = 3; s <= 5; s += 2) { /* 14336 = 56 super-blocks: slices of 76 (3) or 48 (5) chunks */
            g_gcfg.force_slices = s;
            test_gemm_split(r, t, 300, 14336, ns, 7);
            test_gemm_split(r, t, 1000, odd_k, ns, 7);
        }
        g_gcfg.force_slices = 0;
        test_gemm_split_graph(r, t, 64);
        test_gemm_split_graph(r, t, 17);
    }
    g_gcfg.panel_min_n = 0;
    g_gemm_variant = 2;
    g_gcfg.variant = 2;
}

static void test_embed(gen_rng *r, uint32_t t) {
    char name[64], err[256];
    snprintf(name, sizeof name, "embed %s", quant_type_name(t));
    const int64_t n_rows = 37, dim = 512;
    const int32_t ids[5] = {0, 36, 5, 5, -1};
    size_t rbytes = quant_row_bytes(t, dim);
    void *tab = malloc(rbytes * n_rows);
    gen_weights(r, t, n_rows, dim, tab);
    double ref[5 * 512];
    float row[512];
    for (int i = 0; i < 4; i++) {
        quant_dequant_row(t, (const uint8_t *)tab + ids[i] * rbytes, row, dim, err, sizeof err);
        for (int j = 0; j < dim; j++) ref[i * dim + j] = row[j];
    }
    void *dt = dev_upload(tab, rbytes * n_rows), *di = dev_upload(ids, sizeof ids);
    float *dout = dev_poisoned(5 * dim), out[5 * 512] = {0};
    cudaError_t e = cu_embed(dout, dt, t, di, 5, n_rows, dim, 0);
    int guard = e == cudaSuccess && dev_download(out, dout, 5 * dim);
    double rel = gen_rel_err(out, ref, 4 * dim);
    int nan_ok = 1;
    for (int j = 0; j < dim; j++) if (out[4 * dim + j] == out[4 * dim + j]) nan_ok = 0;
    CHECK(e == cudaSuccess && guard && rel < 1e-6 && nan_ok, name, "%s, guard %s, rel err %.3g, bad id row %s",
          cudaGetErrorString(e), guard ? "ok" : "overwritten", rel, nan_ok ? "NaN" : "not NaN");
    CUDA_CHECK(cudaFree(dt)); CUDA_CHECK(cudaFree(di)); CUDA_CHECK(cudaFree(dout));
    free(tab);
}

static void test_rmsnorm(gen_rng *r) {
    const int rows = 3, dim = 4100;
    float *x = malloc(sizeof(float) * rows * dim), *wt = malloc(sizeof(float) * dim), *y = calloc((size_t)rows * dim, sizeof(float));
    double *ref = malloc(sizeof(double) * rows * dim);
    for (int i = 0; i < rows * dim; i++) x[i] = (float)(3 * gen_normal(r));
    for (int i = 0; i < dim; i++) wt[i] = (float)gen_uniform(r, 0.5, 1.5);
    for (int i = 0; i < rows; i++) {
        double ss = 0;
        for (int j = 0; j < dim; j++) ss += (double)x[i * dim + j] * x[i * dim + j];
        double s = 1.0 / sqrt(ss / dim + 1e-5);
        for (int j = 0; j < dim; j++) ref[i * dim + j] = x[i * dim + j] * s * wt[j];
    }
    float *dx = dev_upload(x, sizeof(float) * rows * dim), *dw = dev_upload(wt, sizeof(float) * dim);
    float *dy = dev_poisoned(rows * dim);
    cudaError_t e = cu_rmsnorm(dy, dx, dw, rows, dim, 1e-5f, 0);
    int guard = e == cudaSuccess && dev_download(y, dy, rows * dim);
    double rel = gen_rel_err(y, ref, rows * dim);
    CHECK(e == cudaSuccess && guard && rel < 1e-5, "rmsnorm 3x4100", "%s, guard %s, rel err %.3g",
          cudaGetErrorString(e), guard ? "ok" : "overwritten", rel);
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dy));
    free(x); free(wt); free(y); free(ref);
}

/* paged_add_rmsnorm_sum against f64 (x += the planes' sum, then the norm), its f16 copy against
 * the f32 output rounded on the host (paged_to_f16's rounding, bit for bit), one part with out = d
 * (the engine's plain form), the add alone (weight NULL); and paged_swiglu_f16's copy likewise.
 * dim 4096 takes the float4 path, 4102 the scalar one. */
static void test_add_rmsnorm_sum(gen_rng *r, int dim, int parts, int with_h, int norm) {
    const int rows = 5;
    const int64_t plane = (int64_t)rows * dim + (parts > 1 ? 8 : 0), tot = (int64_t)rows * dim;
    char name[128];
    snprintf(name, sizeof name, "add_rmsnorm_sum %dx%d, %d part%s%s%s", rows, dim, parts, parts > 1 ? "s" : "",
             with_h ? ", f16 copy" : "", norm ? "" : ", add only");
    float *x = malloc(sizeof(float) * tot), *d = malloc(sizeof(float) * (size_t)(parts * plane));
    float *wt = malloc(sizeof(float) * dim), *hx = malloc(sizeof(float) * tot), *ho = malloc(sizeof(float) * tot);
    uint16_t *hh = malloc(sizeof(uint16_t) * tot);
    for (int64_t i = 0; i < tot; i++) x[i] = (float)(2 * gen_normal(r));
    for (int64_t i = 0; i < parts * plane; i++) d[i] = (float)gen_normal(r);
    for (int i = 0; i < dim; i++) wt[i] = (float)gen_uniform(r, 0.5, 1.5);
    float *dx = dev_upload(x, sizeof(float) * tot), *dd = dev_upload(d, sizeof(float) * (size_t)(parts * plane));
    float *dw = dev_upload(wt, sizeof(float) * dim);
    /* one part: out = d itself, as part_add calls it; more: out apart from the planes */
    float *dout = parts == 1 ? dd : dev_poisoned(tot);
    uint16_t *dh = with_h ? dev_alloc(sizeof(uint16_t) * tot) : NULL;
    cudaError_t e = paged_add_rmsnorm_sum(dx, dout, dh, dd, parts, plane, norm ? dw : NULL, rows, dim, 1e-5f, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    int ok = e == cudaSuccess;
    if (ok) {
        CUDA_CHECK(cudaMemcpy(hx, dx, sizeof(float) * tot, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(ho, dout, sizeof(float) * tot, cudaMemcpyDeviceToHost));
        if (dh) CUDA_CHECK(cudaMemcpy(hh, dh, sizeof(uint16_t) * tot, cudaMemcpyDeviceToHost));
    }
    double ex = 0, eo = 0;
    int64_t hbad = 0, touched = 0;
    for (int i = 0; ok && i < rows; i++) {
        double ss = 0, xs[8192];
        for (int j = 0; j < dim; j++) {
            double a = x[i * dim + j];
            for (int q = 0; q < parts; q++) a += d[q * plane + (int64_t)i * dim + j];
            xs[j] = a;
            ss += a * a;
            ex = fmax(ex, fabs(hx[i * dim + j] - a) / (1 + fabs(a)));
        }
        const double sc = 1.0 / sqrt(ss / dim + 1e-5);
        for (int j = 0; j < dim; j++) {
            const int64_t o = (int64_t)i * dim + j;
            if (norm) eo = fmax(eo, fabs(ho[o] - xs[j] * sc * wt[j]) / (1 + fabs(xs[j] * sc * wt[j])));
            else if (parts == 1) touched += memcmp(&ho[o], &d[o], sizeof(float)) != 0; /* out (= d) untouched */
            else {
                uint32_t b;
                memcpy(&b, &ho[o], sizeof b);
                touched += b != 0xffffffffu; /* still dev_poisoned's bytes */
            }
            if (dh) hbad += hh[o] != quant_f32_to_f16(ho[o]);
        }
    }
    CHECK(ok && ex < 1e-5 && eo < 1e-5 && hbad == 0 && touched == 0, name,
          "%s, x err %.3g, out err %.3g (budget 1e-5), %lld f16 values not the f32 output rounded, %lld out values "
          "written by the add alone", cudaGetErrorString(e), ex, eo, (long long)hbad, (long long)touched);
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dd)); CUDA_CHECK(cudaFree(dw));
    if (parts > 1) CUDA_CHECK(cudaFree(dout));
    if (dh) CUDA_CHECK(cudaFree(dh));
    free(x); free(d); free(wt); free(hx); free(ho); free(hh);
}

static void test_swiglu_f16(gen_rng *r) {
    const int n = 3, ff = 2000;
    const int64_t sg = 2 * ff, tot = (int64_t)n * ff;
    float *gu = malloc(sizeof(float) * (size_t)(n * sg)), *o = malloc(sizeof(float) * tot);
    uint16_t *h = malloc(sizeof(uint16_t) * tot), *h2 = malloc(sizeof(uint16_t) * tot);
    for (int64_t i = 0; i < n * sg; i++) gu[i] = (float)(3 * gen_normal(r));
    float *dgu = dev_upload(gu, sizeof(float) * (size_t)(n * sg)), *dout = dev_poisoned(tot);
    uint16_t *dh = dev_alloc(sizeof(uint16_t) * tot), *dh2 = dev_alloc(sizeof(uint16_t) * tot);
    float *dref = dev_poisoned(tot);
    cudaError_t e = paged_swiglu_f16(dout, dh, dgu, sg, dgu + ff, sg, n, ff, 0);
    if (e == cudaSuccess) e = paged_swiglu(dref, dgu, sg, dgu + ff, sg, n, ff, 0);
    if (e == cudaSuccess) e = paged_to_f16(dh2, dref, tot, 0); /* the conversion it replaces */
    CUDA_CHECK(cudaDeviceSynchronize());
    int64_t bad = 0;
    if (e == cudaSuccess) {
        float *ref = malloc(sizeof(float) * tot);
        CUDA_CHECK(cudaMemcpy(o, dout, sizeof(float) * tot, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(ref, dref, sizeof(float) * tot, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(h, dh, sizeof(uint16_t) * tot, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(h2, dh2, sizeof(uint16_t) * tot, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < tot; i++) bad += memcmp(&o[i], &ref[i], sizeof(float)) != 0 || h[i] != h2[i];
        free(ref);
    }
    CHECK(e == cudaSuccess && bad == 0, "swiglu_f16 3x2000", "%s, %lld values differ from paged_swiglu then "
          "paged_to_f16", cudaGetErrorString(e), (long long)bad);
    CUDA_CHECK(cudaFree(dgu)); CUDA_CHECK(cudaFree(dout)); CUDA_CHECK(cudaFree(dh)); CUDA_CHECK(cudaFree(dh2));
    CUDA_CHECK(cudaFree(dref));
    free(gu); free(o); free(h); free(h2);
}

static void test_rope(gen_rng *r) {
    const int n_tok = 3, n_head = 5, hd = 128, rot = 96;
    const int32_t pos[3] = {0, 17, 4000};
    const float theta = 10000.0f;
    int n = n_tok * n_head * hd;
    float *x = malloc(sizeof(float) * n), *y = calloc((size_t)n, sizeof(float));
    double *ref = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) x[i] = (float)gen_normal(r);
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_head; h++)
            for (int p = 0; p < hd / 2; p++) {
                int b = (t * n_head + h) * hd + 2 * p;
                if (2 * p >= rot) { ref[b] = x[b]; ref[b + 1] = x[b + 1]; continue; }
                double a = (double)pos[t] * pow(theta, -(double)(2 * p) / rot);
                ref[b] = x[b] * cos(a) - x[b + 1] * sin(a);
                ref[b + 1] = x[b] * sin(a) + x[b + 1] * cos(a);
            }
    float *dx = dev_upload(x, sizeof(float) * n), *dy = dev_poisoned(n);
    int32_t *dp = dev_upload(pos, sizeof pos);
    cudaError_t e = cu_rope(dy, dx, dp, n_tok, n_head, hd, rot, theta, 0);
    int guard = e == cudaSuccess && dev_download(y, dy, n);
    double rel = gen_rel_err(y, ref, n);
    CHECK(e == cudaSuccess && guard && rel < 5e-4, "rope 3x5x128 rot 96", "%s, guard %s, rel err %.3g",
          cudaGetErrorString(e), guard ? "ok" : "overwritten", rel);
    e = cu_rope(dx, dx, dp, n_tok, n_head, hd, rot, theta, 0); /* in place */
    CUDA_CHECK(cudaMemcpy(y, dx, sizeof(float) * n, cudaMemcpyDeviceToHost));
    rel = gen_rel_err(y, ref, n);
    CHECK(e == cudaSuccess && rel < 5e-4, "rope in place", "%s, rel err %.3g", cudaGetErrorString(e), rel);
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy)); CUDA_CHECK(cudaFree(dp));
    free(x); free(y); free(ref);
}

static void test_elementwise(gen_rng *r) {
    const int64_t n = 1000003;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n), *y = calloc((size_t)n, sizeof(float));
    double *ref = malloc(sizeof(double) * n);
    for (int64_t i = 0; i < n; i++) { a[i] = (float)(4 * gen_normal(r)); b[i] = (float)gen_normal(r); }
    float *da = dev_upload(a, sizeof(float) * n), *db = dev_upload(b, sizeof(float) * n), *dy = dev_poisoned(n);
    for (int64_t i = 0; i < n; i++) ref[i] = a[i] / (1.0 + exp(-(double)a[i])) * b[i];
    cudaError_t e = cu_swiglu(dy, da, db, n, 0);
    int guard = e == cudaSuccess && dev_download(y, dy, n);
    double rel = gen_rel_err(y, ref, n);
    CHECK(e == cudaSuccess && guard && rel < 1e-5, "swiglu 1000003", "%s, guard %s, rel err %.3g",
          cudaGetErrorString(e), guard ? "ok" : "overwritten", rel);
    for (int64_t i = 0; i < n; i++) ref[i] = (double)a[i] + b[i];
    CUDA_CHECK(cudaMemset(dy, 0xff, sizeof(float) * (size_t)(n + GUARD)));
    e = cu_add(dy, da, db, n, 0);
    guard = e == cudaSuccess && dev_download(y, dy, n);
    rel = gen_rel_err(y, ref, n);
    CHECK(e == cudaSuccess && guard && rel < 1e-6, "add 1000003", "%s, guard %s, rel err %.3g",
          cudaGetErrorString(e), guard ? "ok" : "overwritten", rel);
    CUDA_CHECK(cudaFree(da)); CUDA_CHECK(cudaFree(db)); CUDA_CHECK(cudaFree(dy));
    free(a); free(b); free(y); free(ref);
}

/* The two picks per row: the argmax, and the argmax past the skipped ids (--ignore-eos), against
 * a host reference, on rows whose maximum is skipped, tied, NaN or everywhere. */
static void test_argmax(gen_rng *r) {
    enum { n_seq = 5, nv = 32000 };
    float *l = malloc(sizeof(float) * n_seq * nv);
    for (int i = 0; i < n_seq * nv; i++) l[i] = (float)gen_normal(r);
    l[0 * nv + 31999] = 100; /* last index */
    l[1 * nv + 700] = 50; l[1 * nv + 300] = 50; /* tie: the lower index wins */
    l[2 * nv + 5] = NAN; l[2 * nv + 12345] = 9; /* NaN never wins */
    l[3 * nv + 2] = 80; l[3 * nv + 31000] = 70; l[3 * nv + 17] = 70; /* skipped max; then a tie */
    for (int i = 0; i < nv; i++) l[4 * nv + i] = 1.0f; /* all equal: 0, and past the skips 1 */
    argmax_skip skip = {3, {2, 0, 31999}};
    int32_t want[2 * n_seq], got[2 * n_seq];
    for (int s = 0; s < n_seq; s++)
        for (int k = 0; k < 2; k++) {
            int32_t best = -1;
            for (int i = 0; i < nv; i++) {
                const float v = l[s * nv + i];
                int skipped = 0;
                for (int j = 0; j < skip.n; j++) skipped |= k && skip.id[j] == i;
                if (v == v && !skipped && (best < 0 || v > l[s * nv + best])) best = i;
            }
            want[2 * s + k] = best < 0 ? 0 : best;
            got[2 * s + k] = -1;
        }
    float *dl = dev_upload(l, sizeof(float) * n_seq * nv);
    int32_t *dout = dev_alloc(sizeof got);
    cudaError_t e = cu_argmax(dout, dl, n_seq, nv, skip, 0);
    CUDA_CHECK(cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost));
    CHECK(e == cudaSuccess && memcmp(got, want, sizeof got) == 0 && want[7] == 17 && want[9] == 1,
          "argmax 5x32000, and past 3 skipped ids", "%s, got %d %d / %d %d / %d %d / %d %d / %d %d", cudaGetErrorString(e),
          got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7], got[8], got[9]);
    argmax_skip bad = {ARGMAX_MAX_SKIP + 1, {0}};
    CHECK(cu_argmax(dout, dl, n_seq, nv, bad, 0) == cudaErrorInvalidValue, "argmax refuses more skips than it holds", "");
    (void)cudaGetLastError();
    CUDA_CHECK(cudaFree(dl)); CUDA_CHECK(cudaFree(dout));
    free(l);
}

/* f64 softmax attention of one query head qh over positions 0..L-1 of kv head kvh, position p in
 * cell pages[p / PAGED_PAGE] * PAGED_PAGE + p % PAGED_PAGE of an f16 cache [cells][kv_dim]; sc holds
 * L doubles of scratch. */
static void paged_attn_ref(double *out, const float *qh, const uint16_t *kc, const uint16_t *vc, const int32_t *pages,
                           int L, int kv_dim, int kvh, int hd, float scale, double *sc) {
    double m = -INFINITY, l = 0;
    for (int p = 0; p < L; p++) {
        size_t row = ((size_t)pages[p / PAGED_PAGE] * PAGED_PAGE + p % PAGED_PAGE) * kv_dim + (size_t)kvh * hd;
        double d = 0;
        for (int i = 0; i < hd; i++) d += (double)qh[i] * quant_f16_to_f32(kc[row + i]);
        sc[p] = d * scale;
        if (sc[p] > m) m = sc[p];
    }
    for (int p = 0; p < L; p++) { sc[p] = exp(sc[p] - m); l += sc[p]; }
    for (int i = 0; i < hd; i++) {
        double o = 0;
        for (int p = 0; p < L; p++) {
            size_t row = ((size_t)pages[p / PAGED_PAGE] * PAGED_PAGE + p % PAGED_PAGE) * kv_dim + (size_t)kvh * hd;
            o += sc[p] * quant_f16_to_f32(vc[row + i]);
        }
        out[i] = o / l;
    }
}

/* paged_attention_prefill: n_tok consecutive tokens from pos0 through a shuffled page table of an
 * f16 cache holding other cells too (the cells of the last page past the last position hold
 * NaN, as cells not yet written may), against f64 causal attention; the kernels in the bit mask
 * variants (bit v - 1: paged_attention_prefill_variant(v)), v2 and v3 run twice must give the same
 * bits. */
static void test_prefill_attention(gen_rng *r, unsigned variants, int n_head, int n_kv, int hd, int pos0,
                                   int n_tok) {
    const int n_pages = (pos0 + n_tok + PAGED_PAGE - 1) / PAGED_PAGE, n_cells = (n_pages + 2) * PAGED_PAGE;
    const int kv_dim = n_kv * hd, nq = n_tok * n_head * hd;
    /* page i of the sequence: a random permutation of pages 2.. (cells 0..127 are never read) */
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int i = 0; i < n_pages; i++) pages[i] = i + 2;
    for (int i = n_pages - 1; i > 0; i--) {
        int j = (int)(gen_u64(r) % (uint64_t)(i + 1)), tmp = pages[i];
        pages[i] = pages[j];
        pages[j] = tmp;
    }
    size_t cn = (size_t)n_cells * kv_dim;
    uint16_t *kc = malloc(cn * 2), *vc = malloc(cn * 2);
    for (size_t i = 0; i < cn; i++) { kc[i] = quant_f32_to_f16((float)gen_normal(r)); vc[i] = quant_f32_to_f16((float)gen_normal(r)); }
    const int last = pos0 + n_tok - 1;
    for (int p = last + 1; p < n_pages * PAGED_PAGE; p++)
        for (int i = 0; i < kv_dim; i++) {
            size_t at = ((size_t)pages[p / PAGED_PAGE] * PAGED_PAGE + p % PAGED_PAGE) * kv_dim + i;
            kc[at] = vc[at] = 0x7e00; /* f16 NaN */
        }
    float *q = malloc(sizeof(float) * (size_t)nq), *out = calloc((size_t)nq, sizeof(float));
    float *out2 = calloc((size_t)nq, sizeof(float));
    double *ref = malloc(sizeof(double) * (size_t)nq), *sc = malloc(sizeof(double) * (size_t)(pos0 + n_tok));
    for (int i = 0; i < nq; i++) q[i] = (float)gen_normal(r);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_head; h++)
            paged_attn_ref(ref + ((size_t)t * n_head + h) * hd, q + ((size_t)t * n_head + h) * hd, kc, vc, pages,
                           pos0 + t + 1, kv_dim, h / (n_head / n_kv), hd, scale, sc);
    uint16_t *dk = dev_upload(kc, cn * 2), *dv = dev_upload(vc, cn * 2);
    float *dq = dev_upload(q, sizeof(float) * (size_t)nq);
    int32_t *dp = dev_upload(pages, sizeof(int32_t) * (size_t)n_pages);
    for (int v = 1; v <= 3; v++) {
        if (!(variants >> (v - 1) & 1)) continue;
        char name[160];
        snprintf(name, sizeof name, "paged prompt attention v%d %d/%d heads, hd %d, positions %d..%d", v, n_head, n_kv,
                 hd, pos0, last);
        float *dout = dev_poisoned(nq), *dout2 = dev_poisoned(nq);
        cudaError_t e = paged_attention_prefill_variant(v, dout, dq, dk, dv, dp, pos0, n_tok, n_head, n_kv, hd, scale, 0);
        int guard = e == cudaSuccess && dev_download(out, dout, nq);
        double rel = gen_rel_err(out, ref, nq);
        int same = 1;
        if (v >= 2 && e == cudaSuccess) {
            e = paged_attention_prefill_variant(v, dout2, dq, dk, dv, dp, pos0, n_tok, n_head, n_kv, hd, scale, 0);
            guard = guard && e == cudaSuccess && dev_download(out2, dout2, nq);
            same = memcmp(out, out2, sizeof(float) * (size_t)nq) == 0;
        }
        CHECK(e == cudaSuccess && guard && rel < 3e-3 && same, name,
              "%s, guard %s, rel err %.3g (budget 3e-3), rerun %s", cudaGetErrorString(e),
              guard ? "ok" : "overwritten", rel, v >= 2 ? (same ? "identical" : "DIFFERENT") : "not checked");
        CUDA_CHECK(cudaFree(dout)); CUDA_CHECK(cudaFree(dout2));
    }
    CUDA_CHECK(cudaFree(dk)); CUDA_CHECK(cudaFree(dv)); CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dp));
    free(pages); free(kc); free(vc); free(q); free(out); free(out2); free(ref); free(sc);
}

/* paged_attention (decode, any batch of tokens): n_tok tokens of 3 sequences at the given
 * positions, each sequence with its own shuffled page table into one f16 cache that holds other
 * cells too, against f64 softmax attention, n_split splits. The scratch is sized for 64 tokens and
 * shared, as in the engine, by a launch of all tokens, one of the last token alone and the full
 * launch again: all must agree bit for bit (the merge order is fixed, and the arrival counters
 * must be where every launch size expects them, left at zero). */
static int g_att_v = 3; /* the paged_attention_variant the decode attention checks run */
static void test_paged_attention(gen_rng *r, int n_head, int n_kv, int hd, int n_split, int n_tok, const int32_t *pos) {
    char name[160];
    snprintf(name, sizeof name, "paged decode attention (variant %d) %d/%d heads, hd %d, %d splits, %d tokens (pos %d..)",
             g_att_v, n_head, n_kv, hd, n_split, n_tok, pos[0]);
    enum { SEQS = 3 };
    int max_pos = 0;
    for (int t = 0; t < n_tok; t++) if (pos[t] > max_pos) max_pos = pos[t];
    const int per_seq = max_pos / PAGED_PAGE + 1, n_pages = SEQS * per_seq + 2, n_cells = n_pages * PAGED_PAGE;
    const int kv_dim = n_kv * hd, nq = n_tok * n_head * hd;
    /* page tables: a random permutation of pages 2.. shared out among the sequences */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)(SEQS * per_seq)), *seq = malloc(sizeof(int32_t) * (size_t)n_tok);
    for (int i = 0; i < SEQS * per_seq; i++) perm[i] = i + 2;
    for (int i = SEQS * per_seq - 1; i > 0; i--) {
        int j = (int)(gen_u64(r) % (uint64_t)(i + 1)), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int t = 0; t < n_tok; t++) seq[t] = t % SEQS;
    size_t cn = (size_t)n_cells * kv_dim;
    uint16_t *kc = malloc(cn * 2), *vc = malloc(cn * 2);
    for (size_t i = 0; i < cn; i++) { kc[i] = quant_f32_to_f16((float)gen_normal(r)); vc[i] = quant_f32_to_f16((float)gen_normal(r)); }
    float *q = malloc(sizeof(float) * (size_t)nq), *out = calloc((size_t)nq, sizeof(float)), *out2 = calloc((size_t)nq, sizeof(float));
    double *ref = malloc(sizeof(double) * (size_t)nq), *sc = malloc(sizeof(double) * (size_t)(max_pos + 1));
    for (int i = 0; i < nq; i++) q[i] = (float)(1.5 * gen_normal(r));
    const float scale = 1.0f / sqrtf((float)hd);
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_head; h++)
            paged_attn_ref(ref + ((size_t)t * n_head + h) * hd, q + ((size_t)t * n_head + h) * hd, kc, vc,
                           perm + seq[t] * per_seq, pos[t] + 1, kv_dim, h / (n_head / n_kv), hd, scale, sc);
    size_t sb = paged_attention_scratch_bytes(n_tok > 64 ? n_tok : 64, n_head, hd, n_split);
    uint16_t *dk = dev_upload(kc, cn * 2), *dv = dev_upload(vc, cn * 2);
    float *dq = dev_upload(q, sizeof(float) * (size_t)nq), *dout = dev_poisoned(nq), *dout2 = dev_poisoned(nq);
    int32_t *dpos = dev_upload(pos, sizeof(int32_t) * (size_t)n_tok), *dseq = dev_upload(seq, sizeof(int32_t) * (size_t)n_tok);
    int32_t *dpt = dev_upload(perm, sizeof(int32_t) * (size_t)(SEQS * per_seq));
    void *scratch = dev_alloc(sb);
    CUDA_CHECK(cudaMemset(scratch, 0, sb));
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    /* kv_ready 0 first; every later launch 1 (the cells were uploaded before any launch, so V3 may
     * copy them before its PDL wait), and the last must give the first's bits */
    cudaError_t e = paged_attention_variant(g_att_v, dout, dq, dk, dv, dpos, dseq, dpt, per_seq, scratch, n_tok, n_head, n_kv, hd, n_split,
                                    0, scale, st);
    const int64_t last = (int64_t)(n_tok - 1) * n_head * hd; /* the last token's q and output */
    if (e == cudaSuccess)
        e = paged_attention_variant(g_att_v, dout2 + last, dq + last, dk, dv, dpos + n_tok - 1, dseq + n_tok - 1, dpt, per_seq, scratch, 1,
                            n_head, n_kv, hd, n_split, 1, scale, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    int same_one = e == cudaSuccess && dev_download(out2, dout2, nq); /* guard intact; compared below */
    float *one = malloc(sizeof(float) * (size_t)(n_head * hd));
    if (same_one) memcpy(one, out2 + last, sizeof(float) * (size_t)(n_head * hd));
    /* another split count over the same scratch: rounds differently, checked against the reference */
    const int alt_split = n_split > 1 ? n_split / 2 : 3;
    float *out3 = calloc((size_t)nq, sizeof(float));
    if (e == cudaSuccess)
        e = paged_attention_variant(g_att_v, dout2, dq, dk, dv, dpos, dseq, dpt, per_seq, scratch, n_tok, n_head, n_kv, hd, alt_split,
                            1, scale, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    int guard3 = e == cudaSuccess && dev_download(out3, dout2, nq);
    double rel3 = gen_rel_err(out3, ref, nq);
    free(out3);
    /* the last run also writes the f16 copy where the kernel offers it (paged_attention_f16): the
     * same f32 bits, and the copy their paged_to_f16 rounding */
    uint16_t *dh = dev_alloc(sizeof(uint16_t) * (size_t)nq), *hh = malloc(sizeof(uint16_t) * (size_t)nq);
    int with_h = 0;
    if (e == cudaSuccess) {
        /* V3's only (paged_attention_f16 runs production's kernel) */
        e = g_att_v != 3 ? cudaErrorNotSupported
                         : paged_attention_f16(dout2, dh, dq, dk, dv, dpos, dseq, dpt, per_seq, scratch, n_tok, n_head,
                                               n_kv, hd, n_split, 1, scale, st);
        with_h = e == cudaSuccess;
        if (e == cudaErrorNotSupported)
            e = paged_attention_variant(g_att_v, dout2, dq, dk, dv, dpos, dseq, dpt, per_seq, scratch, n_tok, n_head, n_kv, hd, n_split,
                                1, scale, st);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    int guard = e == cudaSuccess && dev_download(out, dout, nq) && dev_download(out2, dout2, nq);
    double rel = gen_rel_err(out, ref, nq);
    int same = same_one && memcmp(out, out2, sizeof(float) * (size_t)nq) == 0 &&
               memcmp(one, out + last, sizeof(float) * (size_t)(n_head * hd)) == 0;
    int64_t hbad = 0;
    if (with_h && guard) {
        CUDA_CHECK(cudaMemcpy(hh, dh, sizeof(uint16_t) * (size_t)nq, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < nq; i++) hbad += hh[i] != quant_f32_to_f16(out2[i]);
    }
    free(one);
    CHECK(e == cudaSuccess && guard && guard3 && rel < 1e-4 && rel3 < 1e-4 && same && hbad == 0, name,
          "%s, guard %s, rel err %.3g, with %d splits %.3g (budget 1e-4), runs of 1 and all tokens, kv_ready 0 and 1 %s, "
          "%s%lld f16 values not the output rounded",
          cudaGetErrorString(e), guard && guard3 ? "ok" : "overwritten", rel, alt_split, rel3,
          same ? "identical" : "DIFFERENT", with_h ? "" : "(no f16 copy from this kernel) ", (long long)hbad);
    printf("# %s: rel err %.3g, with %d splits %.3g\n", name, rel, alt_split, rel3); /* the kernels' precision */
    CUDA_CHECK(cudaFree(dh));
    free(hh);
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(dk)); CUDA_CHECK(cudaFree(dv)); CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dout));
    CUDA_CHECK(cudaFree(dout2)); CUDA_CHECK(cudaFree(dpos)); CUDA_CHECK(cudaFree(dseq)); CUDA_CHECK(cudaFree(dpt));
    CUDA_CHECK(cudaFree(scratch));
    free(perm); free(seq); free(kc); free(vc); free(q); free(out); free(out2); free(ref); free(sc);
}

/* Prompt attention shapes: head_dim 64 and 128, 1 to 16 query heads per kv head, token counts
 * that are not a multiple of a block's rows (v2, v3: 128 / G tokens) or of a 64-key tile, a
 * first position of 0, mid-page and deep (v2's two warp groups take alternate tiles). */
static const struct { int n_head, n_kv, hd, pos0, n_tok; } prefill_cases[] = {
    {8, 2, 128, 150, 77}, {32, 8, 128, 0, 64}, {16, 2, 64, 0, 130}, {4, 4, 64, 1000, 33},
    {4, 2, 128, 0, 1},      /* one token */
    {8, 4, 128, 3000, 1},   /* one token, deep */
    {8, 8, 128, 0, 17},     /* G = 1 */
    {8, 8, 64, 0, 200},     /* G = 1: v2's rows with no key in group 1's first tile */
    {4, 4, 128, 0, 333},
    {16, 1, 64, 3000, 17},  /* G = 16 */
    {16, 1, 128, 70, 100},
    {8, 2, 128, 3000, 100},
    {4, 2, 128, 3001, 333}, /* G = 2, deep, mid-page */
    {16, 2, 64, 0, 333},    /* G = 8 */
    {8, 1, 128, 64, 333},   /* G = 8, head_dim 128 */
    {32, 8, 128, 0, 512},   /* an 8b pass */
};

static void test_prefill_cases(gen_rng *r, unsigned variants) {
    for (size_t i = 0; i < sizeof prefill_cases / sizeof prefill_cases[0]; i++)
        test_prefill_attention(r, variants, prefill_cases[i].n_head, prefill_cases[i].n_kv, prefill_cases[i].hd,
                               prefill_cases[i].pos0, prefill_cases[i].n_tok);
}

/* MGI_KTEST=matvec,v10,fused,gemm,small,attention,panel,prefill3,v7 runs only those sections (a
 * short device slot checking one kernel family); unset or empty: all. */
static int want(const char *section) {
    const char *e = getenv("MGI_KTEST");
    if (!e || !*e) return 1;
    size_t n = strlen(section);
    for (const char *c = e; (c = strstr(c, section)); c += n)
        if ((c == e || c[-1] == ',') && (c[n] == ',' || c[n] == 0)) return 1;
    return 0;
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        SKIP("test_kernels", "no CUDA device");
        return 0;
    }
    gen_rng r = {(uint64_t)time(NULL) * 2654435761u | 1};
    printf("# seed-time %lld\n", (long long)r.s);
    const uint32_t types[] = {QUANT_F32,  QUANT_F16,  QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1, QUANT_Q8_0,
                              QUANT_Q2_K, QUANT_Q3_K, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    const int64_t shapes[][2] = {{1, 256}, {37, 512}, {131, 2816}, {1000, 4096}, {17, 14336}};
    /* every type through the production choice (cu_matvec_kernel): the v10 / v11 cases within
     * mvq.h's budget, v3 (f32 X split exactly into f16 halves: 5 to 8 tokens, k not a whole
     * number of v10 groups) and v1 within 1e-4 */
    for (size_t ti = 0; ti < sizeof types / sizeof types[0] && want("matvec"); ti++) {
        uint32_t t = types[ti];
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t be = quant_traits_of(t)->block_elems;
            if (shapes[si][1] % be) continue;
            test_matvec(&r, t, shapes[si][0], shapes[si][1], 1, 0);
        }
        test_matvec(&r, t, 37, 512, 1, 1);
        test_matvec(&r, t, 131, 2816 - 2816 % quant_traits_of(t)->block_elems, 3, 0);
        test_matvec(&r, t, 1000, 4096, 4, 1);
        test_matvec(&r, t, 45, 1024, 8, 0);
        test_matvec(&r, t, 45, 1024, 8, 1);
        test_matvec(&r, t, 20, 768, 5, 0);
        test_embed(&r, t);
        for (int n = 1; n <= MATVEC_MAX_N; n++) test_matvec_swiglu(&r, t, 45, 1024, n, n == 3);
        test_matvec_swiglu(&r, t, 1000, 4096, 1, 0);
        test_matvec_swiglu(&r, t, 131, 2816 - 2816 % quant_traits_of(t)->block_elems, 1, 1);
        test_matvec_swiglu(&r, t, 17, 14336, 2, 0);
    }
    const uint32_t v10_types[] = {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q8_0, QUANT_Q6_K};
    const int64_t v10_shapes[][2] = {{1, 256}, {37, 256}, {1000, 256}, {37, 4096}, {1000, 4096}, {4096, 4096},
                                     {37, 14336}, {1000, 14336}};
    /* v11 (v10 where no ring fits); v10 on the cases v11 takes, other ring depths, ring slots before
     * the PDL wait and grids: the kernel lab (tests/kbench/matvec.cu: matvec, matvec ring) */
    if (want("v10")) {
        test_matvec_v10(&r, QUANT_Q8_0, 37, 384, 1, 0); /* Q8_0's groups are 128 weights */
        test_matvec_v10(&r, QUANT_Q8_0, 1000, 2944, 1, 1);
        for (size_t i = 0; i < sizeof v10_types / sizeof v10_types[0]; i++) {
            const uint32_t t = v10_types[i];
            for (size_t si = 0; si < sizeof v10_shapes / sizeof v10_shapes[0]; si++)
                test_matvec_v10(&r, t, v10_shapes[si][0], v10_shapes[si][1], 1, 0);
            test_matvec_v10(&r, t, 1000, 4096, 1, 1);
            test_matvec_v10(&r, t, 37, 14336, 1, 1);
            test_matvec_v10(&r, t, 1000, 4096, 1, 2);
            test_matvec_v10(&r, t, 37, 2816, 1, 2);
            /* several tokens (Q6_K: 2; more run v3, whose budget is tighter) */
            for (int n = 2; n <= 4; n++) {
                test_matvec_v10(&r, t, 37, 512, n, n - 2);
                test_matvec_v10(&r, t, 1000, 4096, n, 0);
            }
            test_matvec_v10(&r, t, 300, 14336, 2, 2);
            /* many units per warp (v11: the ring wraps several times; 14336 rows: 6-7 units a
             * warp, 32000: 15-16), and the ring at its shallowest (4 tokens at k = 14336: 2 stages
             * for Q4_0 and Q8_0, 3 for Q6_K at 2 tokens) */
            test_matvec_v10(&r, t, 14336, 4096, 1, 0);
            test_matvec_v10(&r, t, 32000, 4096, 1, 0);
            test_matvec_v10(&r, t, 4096, 14336, t == QUANT_Q6_K ? 2 : 4, 0);
        }
        /* no ring fits beside 4 tokens of X at k = 18432: v11 runs v10 */
        test_matvec_v10(&r, QUANT_Q4_0, 37, 18432, 4, 0);
    }
    if (want("v10")) test_matvec_ring_cover();
    /* the decode fusions: every v10 type, n = 1 to its maximum, odd shapes (Q8_0's 128-weight
     * groups: 384), the production shapes of wo, down, QKV and gate/up */
    if (want("fused")) test_matvec_fused_cover();
    if (want("fused")) {
        for (size_t i = 0; i < sizeof v10_types / sizeof v10_types[0]; i++) {
            const uint32_t t = v10_types[i];
            const int maxn = t == QUANT_Q6_K ? 2 : 4;
            for (int mode = 0; mode < 3; mode++) {
                /* one partial tile, with several values: mvq_check's rms test of a single value
                 * fails ~2% of correct runs (CPU emulation) */
                test_matvec_fused(&r, t, 3, 256, maxn, mode);
                for (int n = 1; n <= maxn; n++) test_matvec_fused(&r, t, 37, 2816, n, mode);
                test_matvec_fused(&r, t, 1000, 4096, maxn, mode);
            }
            for (int n = 1; n <= maxn; n++) test_matvec_fused(&r, t, 4096, 4096, n, n % 3);
            test_matvec_fused(&r, t, 6144, 4096, 1, 0);    /* 8b QKV stacked */
            test_matvec_fused(&r, t, 4096, 14336, maxn, 2); /* 8b down */
            test_matvec_fused(&r, t, 131, 14336, 1, 1);
            test_matvec_fused(&r, t, 28672, 4096, maxn, 0); /* 8b gate/up stacked */
            test_matvec_fused(&r, t, 4096, 4096, 1, 3);     /* 8b wo, as the engine runs it */
            test_matvec_fused(&r, t, 1000, 2816, 2, 3);
        }
        test_matvec_fused(&r, QUANT_Q8_0, 37, 384, 3, 0);
        test_matvec_fused(&r, QUANT_Q8_0, 37, 384, 1, 2);
        /* v13's fusions (GGUF rows: norm, Y +=; not GLU, POST) */
        const uint32_t v13_types[] = {QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1, QUANT_Q2_K, QUANT_Q3_K};
        for (size_t i = 0; i < sizeof v13_types / sizeof v13_types[0]; i++) {
            const uint32_t t = v13_types[i];
            for (int mode = 0; mode < 4; mode++) {
                test_matvec_fused(&r, t, 3, 256, 4, mode);
                for (int n = 1; n <= 4; n++) test_matvec_fused(&r, t, 37, 2816, n, mode);
            }
            test_matvec_fused(&r, t, 6144, 4096, 1, 0);
            test_matvec_fused(&r, t, 4096, 14336, 2, 2);
            test_matvec_fused(&r, t, 4096, 4096, 3, 1);
        }
        /* Phi-4-mini's fused QKV and down in Q5_K */
        test_matvec_fused(&r, QUANT_Q5_K, 5120, 3072, 1, 0);
        test_matvec_fused(&r, QUANT_Q5_K, 3072, 8192, 3, 2);
        /* the RoPE + K/V-store fold: 8b's heads (32 / 8 x 128), 1b's (x 64), partial rotation */
        for (int n = 1; n <= 4; n++) test_matvec_norm_rope(&r, QUANT_Q4_0, QUANT_Q4_0, 32, 8, 128, 128, 4096, n, 0);
        /* Q4_K_M's layers with a Q6_K V: the 8b's (V shaped for the SMs Q/K leaves, and not), the 1b's */
        for (int sh = 0; sh <= 2; sh++) {
            test_matvec_norm_rope(&r, QUANT_Q4_K, QUANT_Q6_K, 32, 8, 128, 128, 4096, 1, sh);
            test_matvec_norm_rope(&r, QUANT_Q4_K, QUANT_Q6_K, 32, 8, 128, 128, 4096, 2, sh);
            test_matvec_norm_rope(&r, QUANT_Q4_K, QUANT_Q6_K, 32, 8, 64, 64, 2048, 1, sh);
        }
        test_matvec_norm_rope(&r, QUANT_Q8_0, QUANT_Q8_0, 32, 8, 64, 64, 2048, 3, 0);
        test_matvec_norm_rope(&r, QUANT_Q4_K, QUANT_Q4_K, 6, 2, 64, 32, 512, 4, 0);
        test_matvec_norm_rope(&r, QUANT_Q6_K, QUANT_Q6_K, 4, 4, 128, 96, 1024, 2, 0);
        /* Q5_K_M's layers with a Q6_K V: the 8b's, apart and in one launch */
        for (int sh = 0; sh <= 2; sh += 2)
            for (int n = 1; n <= 2; n++) test_matvec_norm_rope(&r, QUANT_Q5_K, QUANT_Q6_K, 32, 8, 128, 128, 4096, n, sh);
        /* v13's RoPE epilogue: 8b's heads in Q3_K (a Q3_K_M file's), 1b's in Q5_0, partial rotation in Q4_1 */
        for (int n = 1; n <= 4; n++) test_matvec_norm_rope(&r, QUANT_Q3_K, QUANT_Q3_K, 32, 8, 128, 128, 4096, n, 0);
        test_matvec_norm_rope(&r, QUANT_Q5_0, QUANT_Q5_0, 32, 8, 64, 64, 2048, 2, 0);
        test_matvec_norm_rope(&r, QUANT_Q4_1, QUANT_Q4_1, 4, 4, 128, 96, 1024, 3, 0);
        /* Phi-4-mini's fused Q5_K QKV (24 / 8 heads of 128, 96 dims rotated) */
        for (int n = 1; n <= 4; n++) test_matvec_norm_rope(&r, QUANT_Q5_K, QUANT_Q5_K, 24, 8, 128, 96, 3072, n, 0);
        /* SwiGLU in the gate/up matvec: 8b's and 1b's FFNs, every type, 1-4 tokens, few tiles */
        for (int n = 1; n <= 4; n++) test_matvec_glu(&r, QUANT_Q4_0, 14336, 4096, n, 0);
        test_matvec_glu(&r, QUANT_Q4_K, 14336, 4096, 1, 0);
        test_matvec_glu(&r, QUANT_Q4_K, 5632, 2048, 3, 0);
        test_matvec_glu(&r, QUANT_Q8_0, 5632, 2048, 2, 0);
        test_matvec_glu(&r, QUANT_Q6_K, 1408, 1024, 2, 0);
        test_matvec_glu(&r, QUANT_Q5_K, 8192, 3072, 2, 0); /* Q5_K_M's gate/up */
        test_matvec_glu(&r, QUANT_Q4_0, 48, 256, 1, 0);
        /* Gemma's GELU gate: gemma3-12b's gate/up, a small one */
        for (int n = 1; n <= 2; n++) test_matvec_glu(&r, QUANT_Q4_K, 15360, 3840, n, 1);
        test_matvec_glu(&r, QUANT_Q4_0, 640, 256, 3, 1);
        /* Q/K and V of the per-head-norm recipes in one launch: gemma3-12b's, qwen3-8b's, a small one */
        for (int n = 1; n <= 2; n++) test_matvec_norm_pair(&r, QUANT_Q4_K, 6144, 2048, 3840, n);
        test_matvec_norm_pair(&r, QUANT_Q4_K, 5120, 1024, 4096, 1);
        test_matvec_norm_pair(&r, QUANT_Q4_K, 384, 128, 256, 2);
        for (int n = 1; n <= 2; n++) test_matvec_norm_pair(&r, QUANT_Q5_K, 5120, 1024, 4096, n); /* Q5_K_M's */
        /* Gemma's post norms in wo's and down's last block: gemma3-12b's wo (Q4_K) and down (Q6_K
         * and Q4_K), a small Q4_0, Q8_0 and Q5_K one */
        for (int n = 1; n <= 4; n++) test_matvec_acc_post(&r, QUANT_Q4_K, 3840, 4096, n, n == 1);
        for (int n = 1; n <= 2; n++) test_matvec_acc_post(&r, QUANT_Q6_K, 3840, 15360, n, 0);
        test_matvec_acc_post(&r, QUANT_Q4_K, 3840, 15360, 1, 0);
        test_matvec_acc_post(&r, QUANT_Q4_0, 640, 1024, 3, 1);
        test_matvec_acc_post(&r, QUANT_Q8_0, 640, 2048, 2, 0);
        test_matvec_acc_post(&r, QUANT_Q5_K, 640, 3072, 2, 1);
        /* 3 tokens: declined */
        CHECK(cu_matvec_f32_norm_pair((float *)16, (void *)16, QUANT_Q4_K, 384, (float *)16, (void *)16, QUANT_Q6_K, 128,
                                      (const float *)16, (const float *)16, 1e-6f, 256, 3, 0) == cudaErrorNotSupported,
              "matvec norm pair: 3 tokens declined", "launched or failed otherwise");
        test_fused_chain(&r, QUANT_Q4_0, QUANT_Q4_0, 0);
        test_fused_chain(&r, QUANT_Q4_K, QUANT_Q6_K, 0);
        test_fused_chain(&r, QUANT_Q8_0, QUANT_Q4_0, 1);
    }
    if (want("fused")) {
        test_chain(&r, QUANT_Q4_0, QUANT_Q4_0);
        test_chain(&r, QUANT_Q4_K, QUANT_Q6_K);
    }
    /* every GEMM check for every kernel: v2 (the default), v3 and v1 (kernel lab); v2's and v3's
     * edges are their tiles, 128 or 256 rows x 128 or 64 tokens, switching at n = 64, v2's 3-stage
     * X ring, v3's 4-stage (X, weights) ring and its super-block slots (k of 1 to 56 super-blocks,
     * slices of several) */
    static const int gemm_variants[] = {2, 3, 1};
    const uint32_t gemm_types[] = {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q8_0};
    static const int edge_ns[] = {1, 17, 63, 65, 127, 129, 511}, split_edge_ns[] = {17, 63, 65, 129};
    for (int vi = 0; vi < 3 && want("gemm"); vi++) {
        const int v = gemm_variants[vi];
        g_gemm_variant = v;
        g_gcfg.variant = v;
        for (size_t i = 0; i < sizeof gemm_types / sizeof gemm_types[0]; i++) {
            uint32_t t = gemm_types[i];
            const int64_t odd_k = t == QUANT_Q4_0 || t == QUANT_Q8_0 ? 2848 : 2816; /* 32-weight types: a half chunk */
            test_gemm(&r, t, 37, 512, 100);
            test_gemm(&r, t, 300, 2816, 5);
            test_gemm(&r, t, 130, 4096, 64);
            test_gemm(&r, t, 1, 256, 1);
            for (size_t j = 0; j < sizeof edge_ns / sizeof edge_ns[0]; j++) test_gemm(&r, t, 37, 256, edge_ns[j]);
            test_gemm(&r, t, 200, odd_k, 129);
            test_gemm(&r, t, 200, 14336, 17);
            test_gemm(&r, t, 200, 14336, 65);
            test_gemm_split(&r, t, 4096, 4096, GEMM_SPLIT_NS);
            test_gemm_split(&r, t, 14336, 4096, GEMM_SPLIT_NS);
            test_gemm_split(&r, t, 4096, 14336, GEMM_SPLIT_NS);
            test_gemm_split(&r, t, 1024, 4096, GEMM_SPLIT_NS);
            /* odd: a partial last tile of rows, and for the 32-weight types a half last chunk */
            test_gemm_split(&r, t, 37, odd_k, GEMM_SPLIT_NS);
            test_gemm_split(&r, t, 200, 14336, split_edge_ns, (int)(sizeof split_edge_ns / sizeof split_edge_ns[0]));
            test_gemm_split(&r, t, 200, 256, split_edge_ns, (int)(sizeof split_edge_ns / sizeof split_edge_ns[0]));
            test_gemm_split_graph(&r, t, 64);
        }
    }
    g_gcfg.variant = 2;
    if (want("small")) {
        test_rmsnorm(&r);
        for (int dim = 4096; dim <= 4102; dim += 6)
            for (int parts = 1; parts <= 3; parts += 2) {
                test_add_rmsnorm_sum(&r, dim, parts, 1, 1);
                test_add_rmsnorm_sum(&r, dim, parts, 0, 1);
                test_add_rmsnorm_sum(&r, dim, parts, 0, 0);
            }
        test_swiglu_f16(&r);
        test_rope(&r);
        test_elementwise(&r);
        test_argmax(&r);
    }
    if (want("attention")) {
        const int32_t p1[1] = {1000}, p2[5] = {0, 63, 64, 200, 4095}, p3[4] = {5, 130, 129, 700}, p4[1] = {16383};
        const int32_t p7[1] = {9400}; /* 37 active 256-position splits: V3's merge past 32 and 8 */
        /* positions around the tensor-core kernel's 16-position sub-tiles and 4-warp rounds */
        const int32_t p5[8] = {14, 15, 16, 17, 47, 48, 79, 320};
        int32_t p6[64];
        for (int i = 0; i < 64; i++) p6[i] = (int32_t)(gen_u64(&r) % 3000);
        /* variant 3 (production): the tensor-core kernel's V3 for head_dim 64, 128 and 256; 2: its first
         * form (64 and 128); 1: the tiled one */
        for (int v = 3; v >= 1; v--) {
            g_att_v = v;
            test_paged_attention(&r, 32, 8, 128, 32, 1, p1);
            test_paged_attention(&r, 32, 8, 128, 32, 5, p2);
            test_paged_attention(&r, 32, 8, 128, 1, 4, p3);
            test_paged_attention(&r, 8, 1, 128, 7, 4, p3); /* 8 query heads per kv head */
            test_paged_attention(&r, 4, 4, 64, 32, 5, p2);
            test_paged_attention(&r, 64, 8, 64, 5, 8, p5); /* 8 per kv head, hd 64 */
            test_paged_attention(&r, 32, 16, 128, 3, 8, p5); /* 2 per kv head */
            test_paged_attention(&r, 32, 8, 128, 4, 64, p6); /* a 64-sequence batch step */
            test_paged_attention(&r, 16, 8, 256, 16, 4, p3); /* V3's 256 (v1, v2: 32-position tiles) */
            test_paged_attention(&r, 16, 8, 256, 3, 8, p5);  /* Gemma 3 12b's heads at V3's sub-tile edges */
            test_paged_attention(&r, 8, 1, 256, 256, 1, p7); /* hd 256, 8 heads a kv head, 37 splits */
            test_paged_attention(&r, 24, 4, 192, 5, 4, p3);  /* hd 192: the tiled kernel's 32-position tiles */
            test_paged_attention(&r, 6, 2, 40, 3, 4, p3);    /* head_dim not a power of two */
            test_paged_attention(&r, 4, 4, 16, 3, 4, p3);    /* aidreams260K's shape */
            test_paged_attention(&r, 6, 2, 36, 32, 4, p3);   /* head_dim % 8 != 0: the untiled kernel */
            test_paged_attention(&r, 8, 2, 128, 32, 1, p4);
            test_paged_attention(&r, 8, 2, 128, 256, 1, p4); /* the most splits: the merge's weights */
            test_paged_attention(&r, 64, 8, 64, 256, 1, p7); /* 8 heads a kv head, hd 64, 37 splits */
        }
        g_att_v = 3;
        test_prefill_cases(&r, 2); /* prompt attention v2 (v1: the kernel lab's, kbench prefill) */
    }
    if (want("panel")) test_gemm_panels(&r); /* late: a fault in the wgmma kernels cannot take other checks with it */
    if (want("prefill3")) test_prefill_cases(&r, 4); /* prompt attention v3 (wgmma) */
    if (want("v7")) test_gemm_v7(&r);        /* last: the newest wgmma kernel */
    return test_done();
}
