/* Gemma's post norms left pending between fused decode kernels (kernels.h: cu_post_pend, the pend
 * and x_out arguments of the NORM matvecs, cu_post_pend_apply) against the path they replace, on
 * fresh random weights, residuals, inputs and norm weights: a decode layer's FFN half and the next
 * layer's QKV input, chained as the engine chains them (engine/cuda_layer.c: mm_acc's defer):
 *   reference: y += post_norm(W1 . x1) (cu_matvec_f32_acc_post: its last block norms and adds),
 *     norm_glu(y) (Gemma's GELU gate), y += post_norm(W3 . h), norm_glu(y), a Q-only norm_rope(y);
 *   pending: part = W1 . x1 alone (cu_matvec_f32_prefilled), norm_glu(ya + pending, writing the
 *     residual to yb), part = W3 . h, norm_glu(yb + pending, writing ya), the norm_rope of yb +
 *     pending, and cu_post_pend_apply of the first product on a copy of y.
 * Gate/up and Q outputs within 1e-4 of their rms, the residuals within 1e-5 (the sum of squares
 * grouped otherwise, in double; the rest the same arithmetic), nothing written past any output.
 * The consumer without the pending product is checked to differ by far more, so the check can
 * fail. Then the refusals: a pend of another width, x_out on x, SiLU's gate with a pend. Without
 * a CUDA device: SKIP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tests/unit/test.h"
#include "tests/gpu/dev.h"
#include "tests/gpu/gen.h"
#include "tests/gpu/devgen.h"
#include "kernels/check.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

static float *dev_copy(const float *d, int64_t n) {
    float *c = dev_poisoned(n);
    CUDA_CHECK(cudaMemcpy(c, d, sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice));
    return c;
}

/* The largest |a - b| over n values as a fraction of b's rms; -1 where a download failed or a
 * guard was written. */
static double rel_worst(const float *da, const float *db, int64_t n) {
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    int ok = dev_download(a, da, n) & dev_download(b, db, n);
    double ss = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)b[i] * b[i];
    const double rms = sqrt(ss / (double)n) + 1e-30;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]) / rms;
        if (!(d <= worst)) worst = d;
    }
    free(a);
    free(b);
    return ok ? worst : -1.0;
}

/* E: the residual's width (W1, W3: E rows), K1: W1's k, F: the FFN's (norm_glu: 2F x E, W3: k = F). */
static void test_chain(gen_rng *r, uint32_t t1, uint32_t tg, uint32_t t3, int64_t E, int64_t K1, int64_t F, int n) {
    char name[200];
    snprintf(name, sizeof name, "post pend: %s wo %lldx%lld, %s gate/up 2x%lldx%lld, %s down, n=%d", quant_type_name(t1),
             (long long)E, (long long)K1, quant_type_name(tg), (long long)F, (long long)E, quant_type_name(t3), n);
    const float eps = 1e-6f;
    const int64_t nq = 256, hd = 128; /* a Q-only norm_rope after down: two heads */
    void *w1 = dev_random_repacked(r, t1, E, K1), *wg = dev_random_repacked(r, tg, 2 * F, E);
    void *w3 = dev_random_repacked(r, t3, E, F), *wq = dev_random_repacked(r, QUANT_Q4_K, nq, E);
    float *y0 = dev_floats(r, n * E, -3, 3), *x1 = dev_floats(r, n * K1, -1, 1), *h = dev_floats(r, n * F, -1, 1);
    float *post1 = dev_floats(r, E, 0.2, 2.0), *post3 = dev_floats(r, E, 0.2, 2.0), *g = dev_floats(r, E, -1.5, 1.5);
    float *part_t = dev_alloc(sizeof(float) * (size_t)(n * E)), *part = dev_alloc(sizeof(float) * (size_t)(n * E));
    int32_t hpos[4] = {7, 300, 12, 4095};
    int32_t *dpos = dev_upload(hpos, sizeof hpos);
    unsigned *count = dev_alloc(sizeof(unsigned));
    CUDA_CHECK(cudaMemset(count, 0, sizeof(unsigned)));
    float *yr = dev_copy(y0, n * E), *yr1 = dev_poisoned(n * E), *ya = dev_copy(y0, n * E), *yb = dev_poisoned(n * E);
    float *yc = dev_copy(y0, n * E);
    float *fr1 = dev_poisoned(n * F), *fr2 = dev_poisoned(n * F), *fp1 = dev_poisoned(n * F), *fp2 = dev_poisoned(n * F);
    float *fno = dev_poisoned(n * F), *qr = dev_poisoned(n * nq), *qp = dev_poisoned(n * nq);
    /* reference: the last block norms and adds each product */
    cudaError_t e = cu_matvec_f32_acc_post(yr, w1, t1, x1, post1, eps, part_t, count, E, K1, n, 1, 0);
    if (e == cudaSuccess) e = cudaMemcpy(yr1, yr, sizeof(float) * (size_t)(n * E), cudaMemcpyDeviceToDevice);
    if (e == cudaSuccess) e = cu_matvec_f32_norm_glu(fr1, wg, tg, yr, g, eps, 2 * F, E, n, 1, NULL, NULL, 0);
    if (e == cudaSuccess) e = cu_matvec_f32_acc_post(yr, w3, t3, h, post3, eps, part_t, count, E, F, n, 0, 0);
    if (e == cudaSuccess) e = cu_matvec_f32_norm_glu(fr2, wg, tg, yr, g, eps, 2 * F, E, n, 1, NULL, NULL, 0);
    if (e == cudaSuccess)
        e = cu_matvec_f32_norm_rope(wq, QUANT_Q4_K, yr, g, eps, nq, E, n, qr, NULL, NULL, dpos, dpos, nq, 0, hd, (int)hd,
                                    (int)hd, 1e4f, NULL, NULL, NULL, 0);
    /* pending: the products alone, the residual alternating between ya and yb */
    const cu_post_pend p0 = {part, post1, eps, (int)E}, p1 = {part, post3, eps, (int)E};
    cudaError_t e2 = cu_matvec_f32_prefilled(part, w1, t1, x1, E, K1, n, 0);
    if (e2 == cudaSuccess) e2 = cu_post_pend_apply(yc, &p0, n, 0); /* the same product by its own launch */
    if (e2 == cudaSuccess) e2 = cu_matvec_f32_norm_glu(fno, wg, tg, ya, g, eps, 2 * F, E, n, 1, NULL, NULL, 0);
    if (e2 == cudaSuccess) e2 = cu_matvec_f32_norm_glu(fp1, wg, tg, ya, g, eps, 2 * F, E, n, 1, &p0, yb, 0);
    if (e2 == cudaSuccess) e2 = cu_matvec_f32(part, w3, t3, h, E, F, n, 0);
    if (e2 == cudaSuccess) e2 = cu_matvec_f32_norm_glu(fp2, wg, tg, yb, g, eps, 2 * F, E, n, 1, &p1, ya, 0);
    /* the pending product read by the QKV matvec */
    if (e2 == cudaSuccess)
        e2 = cu_matvec_f32_norm_rope(wq, QUANT_Q4_K, yb, g, eps, nq, E, n, qp, NULL, NULL, dpos, dpos, nq, 0, hd, (int)hd,
                                     (int)hd, 1e4f, NULL, &p1, NULL, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    const int ran = e == cudaSuccess && e2 == cudaSuccess;
    const double g1 = ran ? rel_worst(fp1, fr1, n * F) : -1, g2 = ran ? rel_worst(fp2, fr2, n * F) : -1;
    const double yw1 = ran ? rel_worst(yb, yr1, n * E) : -1, yw = ran ? rel_worst(ya, yr, n * E) : -1;
    const double aw = ran ? rel_worst(yc, yr1, n * E) : -1, qw = ran ? rel_worst(qp, qr, n * nq) : -1;
    const double miss = ran ? rel_worst(fno, fr1, n * F) : -1;
    CHECK(ran && g1 >= 0 && g1 <= 1e-4 && g2 >= 0 && g2 <= 1e-4 && yw1 >= 0 && yw1 <= 1e-5 && yw >= 0 && yw <= 1e-5 &&
              aw >= 0 && aw <= 1e-5 && qw >= 0 && qw <= 1e-4 && miss > 1e-2,
          name, "%s / %s; worst of the rms: gate/up after wo %.3g, after down %.3g, residual after wo %.3g, after down "
          "%.3g, applied %.3g, Q %.3g; without the pend %.3g (must differ)", cudaGetErrorString(e),
          cudaGetErrorString(e2), g1, g2, yw1, yw, aw, qw, miss);
    /* refusals: nothing launched */
    const cu_post_pend bad = {part, post1, eps, (int)E + 256};
    CHECK(cu_matvec_f32_norm_glu(fp1, wg, tg, ya, g, eps, 2 * F, E, n, 1, &bad, yb, 0) == cudaErrorInvalidValue,
          "post pend: a pend of another width refused", "launched");
    CHECK(cu_matvec_f32_norm_glu(fp1, wg, tg, ya, g, eps, 2 * F, E, n, 1, &p0, ya, 0) == cudaErrorInvalidValue,
          "post pend: x_out on x refused", "launched");
    CHECK(cu_matvec_f32_norm_glu(fp1, wg, tg, ya, g, eps, 2 * F, E, n, 0, &p0, yb, 0) == cudaErrorNotSupported,
          "post pend: SiLU's gate declines a pend (Gemma's post norms only)", "launched");
    void *bufs[] = {w1, wg, w3, wq, y0, x1, h, post1, post3, g, part_t, part, dpos, count, yr, yr1, ya, yb, yc,
                    fr1, fr2, fp1, fp2, fno, qr, qp};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CUDA_CHECK(cudaFree(bufs[i]));
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        SKIP("test_post_pend", "no CUDA device");
        return 0;
    }
    gen_rng r = {(uint64_t)time(NULL) * 2654435761u | 1};
    printf("# seed-time %lld\n", (long long)r.s);
    /* gemma3-12b's shapes (Q4_K_M: down in Q6_K or Q4_K), a small one in Q4_0 at 3 and 4 tokens */
    for (int n = 1; n <= 2; n++) {
        test_chain(&r, QUANT_Q4_K, QUANT_Q4_K, QUANT_Q6_K, 3840, 4096, 15360, n);
        test_chain(&r, QUANT_Q4_K, QUANT_Q4_K, QUANT_Q4_K, 3840, 4096, 15360, n);
    }
    for (int n = 3; n <= 4; n++) test_chain(&r, QUANT_Q4_0, QUANT_Q4_0, QUANT_Q4_0, 1024, 512, 2048, n);
    test_chain(&r, QUANT_Q5_K, QUANT_Q8_0, QUANT_Q5_K, 1024, 1024, 1024, 2);
    test_chain(&r, QUANT_Q4_K, QUANT_Q4_K, QUANT_Q6_K, 2560, 2048, 10240, 1); /* gemma-3-4b's widths */
    /* a residual wider than one round of X loads (3 tokens: 2 float4s a thread): the product read twice */
    test_chain(&r, QUANT_Q4_0, QUANT_Q4_0, QUANT_Q4_0, 5120, 512, 1024, 3);
    return test_done();
}
