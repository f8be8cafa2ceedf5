/* The general layer's fused QKV for recipes without per-head norms (kernels.h: cu_rope_epi in
 * cu_matvec_f32_norm_rope, _beside and _pair: biases, an angle table, NEOX-interleaved Q/K rows)
 * against what it folds together, cu_matvec_f32_norm then recipe.h's cu_qkv_rope_store reading
 * the same interleaved rows (neox_rows), on fresh random weights, inputs, biases, angle tables,
 * positions and cells: Q within 1e-5 of its largest value, every cache value within one f16 step
 * of the reference's (a shaped V grid groups its sums otherwise), cells it must not touch
 * untouched (both sets of caches start from the same random bits), and a second launch equal to
 * the first bit for bit. Recipes: Qwen2's (NEOX, Q/K/V biases), Llama 3.1's (NORM pairs, a
 * frequency-factor angle table), Phi-3's (NEOX over 96 of 128 values, mscale), Gemma 2's (NEOX,
 * head 256), head 64 with biases; matrices Q4_0 (Q, K, V in one), Q4_K with a Q6_K V (beside,
 * and in one launch), Q8_0, Q6_K, Q5_K (v12 on GGUF rows); 1 to 4 tokens (Q6_K: 2). That the interleaved rows are the
 * model's NEOX pairs is the engine's upload (engine/cuda_weights.c), checked against the CPU by
 * test_recipe. Without a CUDA device: SKIP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tests/unit/test.h"
#include "tests/gpu/dev.h"
#include "tests/gpu/gen.h"
#include "kernels/check.h"
#include "kernels/kernels.h"
#include "kernels/paged.h"
#include "kernels/recipe.h"
#include "quant/quant.h"

static float *dev_floats(gen_rng *r, int64_t n, double lo, double hi) {
    float *h = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) h[i] = (float)gen_uniform(r, lo, hi);
    float *d = dev_upload(h, sizeof(float) * (size_t)(n > 0 ? n : 1));
    free(h);
    return d;
}

static void *repacked(gen_rng *r, uint32_t t, int64_t rows, int64_t k) {
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    void *dw = dev_upload(w, wb), *dr = NULL;
    CUDA_CHECK(cudaMalloc(&dr, cu_matvec_repacked_bytes(t, rows, k)));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dw));
    free(w);
    return dr;
}

typedef struct {
    const char *name;
    int neox, bias, n_head, n_kv, hd, n_rot;
    double base, mscale;
    int factors; /* the angles divided by random factors in [1, 8] (rope_freqs) */
} recipe_case;

/* shaped: 0 one matrix (tqk == tv) or V launched beside Q/K's grid; 2 both in one launch (_pair). */
static void test_fused(gen_rng *r, const recipe_case *rc, uint32_t tqk, uint32_t tv, int64_t k, int n, int shaped) {
    const int hd = rc->hd, n_rot = rc->n_rot;
    const int64_t nq = (int64_t)rc->n_head * hd, kvd = (int64_t)rc->n_kv * hd, cells = 64;
    const float eps = 1e-6f;
    const int one = tqk == tv;
    char name[256];
    snprintf(name, sizeof name, "fused rope epilogue %s %s%s%s k %lld n=%d%s", rc->name, quant_type_name(tqk), one ? "" : " + ",
             one ? "" : quant_type_name(tv), (long long)k, n, one ? "" : shaped == 2 ? " (one launch)" : " (beside)");
    int64_t rows[2] = {nq + kvd * (one ? 2 : 1), one ? 0 : kvd};
    uint32_t types[2] = {tqk, tv};
    void *dr[2] = {NULL, NULL};
    for (int m = 0; m < 2; m++)
        if (rows[m]) dr[m] = repacked(r, types[m], rows[m], k);
    float *dx = dev_floats(r, (int64_t)n * k, -2, 2), *dg = dev_floats(r, k, -1.5, 1.5);
    cu_qkv_recipe rec = {0};
    rec.eps = eps;
    rec.neox = rc->neox;
    rec.mscale = rc->mscale;
    if (rc->bias) {
        rec.bq = dev_floats(r, nq, -1, 1);
        rec.bk = dev_floats(r, kvd, -1, 1);
        rec.bv = dev_floats(r, kvd, -1, 1);
    }
    rec.neox_rows = rc->neox;
    double *angle = malloc(sizeof(double) * (size_t)(n_rot / 2 + 1));
    for (int i = 0; i < n_rot / 2; i++) {
        angle[i] = pow(rc->base, -2.0 * i / n_rot);
        if (rc->factors) angle[i] /= gen_uniform(r, 1, 8);
    }
    rec.angle = dev_upload(angle, sizeof(double) * (size_t)(n_rot / 2 + 1));
    int32_t meta[8];
    gen_pos_cells(r, meta, meta + 4, n, cells); /* meta: n positions, then from [4] n cells */
    int32_t *dmeta = dev_upload(meta, sizeof meta);
    const size_t cache_b = sizeof(uint16_t) * (size_t)(cells * kvd);
    uint16_t *cinit = malloc(2 * cache_b);
    for (int64_t i = 0; i < 2 * cells * kvd; i++) cinit[i] = (uint16_t)gen_uniform(r, 0, 65535); /* any bits */
    uint16_t *kc[3], *vc[3];
    float *q[3];
    for (int v = 0; v < 3; v++) { /* 0: reference, 1: fused, 2: fused again */
        kc[v] = dev_upload(cinit, cache_b);
        vc[v] = dev_upload(cinit + cells * kvd, cache_b);
        CUDA_CHECK(cudaMalloc((void **)&q[v], sizeof(float) * (size_t)(n * nq)));
        CUDA_CHECK(cudaMemset(q[v], 0xff, sizeof(float) * (size_t)(n * nq)));
    }
    float *y = NULL;
    const size_t yb = sizeof(float) * (size_t)(n * (nq + 2 * kvd));
    CUDA_CHECK(cudaMalloc((void **)&y, yb));
    /* reference: the products, then the recipe kernel */
    cudaError_t e = cu_matvec_f32_norm(y, dr[0], tqk, dx, dg, eps, rows[0], k, n, 0);
    if (e == cudaSuccess && rows[1]) e = cu_matvec_f32_norm(y + (int64_t)n * rows[0], dr[1], tv, dx, dg, eps, rows[1], k, n, 0);
    const int64_t st0 = rows[0], stv = one ? rows[0] : kvd;
    const float *yv = one ? y + nq + kvd : y + (int64_t)n * rows[0];
    if (e == cudaSuccess)
        e = cu_qkv_rope_store(q[0], kc[0], vc[0], y, st0, y + nq, st0, yv, stv, dmeta, dmeta + 4, &rec, n, rc->n_head,
                              rc->n_kv, hd, n_rot, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    /* the fold, twice, on a stream of its own (PDL, as the engine launches it) */
    const cu_rope_epi epi = {rec.bq, rec.bk, rec.bv, rec.angle, rec.mscale, rec.neox_rows};
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaError_t e2 = cudaSuccess;
    const float theta = 1e4f; /* unused: the angle table turns */
    for (int v = 1; v <= 2 && e2 == cudaSuccess; v++) {
        if (shaped == 2)
            e2 = cu_matvec_f32_norm_rope_pair(dr[0], tqk, rows[0], nq, kvd, dr[1], tv, rows[1], 0, 0, dx, dg, eps, k, n,
                                              q[v], kc[v], vc[v], dmeta, dmeta + 4, kvd, hd, n_rot, theta, &epi, st);
        else
            e2 = cu_matvec_f32_norm_rope(dr[0], tqk, dx, dg, eps, rows[0], k, n, q[v], kc[v], vc[v], dmeta, dmeta + 4,
                                         nq, kvd, kvd, hd, n_rot, theta, &epi, st);
        if (e2 == cudaSuccess && rows[1] && shaped != 2)
            e2 = cu_matvec_f32_norm_rope_beside(dr[1], tv, dx, dg, eps, rows[1], k, n, NULL, NULL, vc[v], dmeta,
                                                dmeta + 4, 0, 0, kvd, hd, n_rot, theta, &epi,
                                                cu_matvec_fused_blocks(tqk, rows[0], k, n), st);
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaDeviceSynchronize());
    float *hq[3];
    uint16_t *hc[3];
    for (int v = 0; v < 3; v++) {
        hq[v] = malloc(sizeof(float) * (size_t)(n * nq));
        hc[v] = malloc(2 * cache_b);
        CUDA_CHECK(cudaMemcpy(hq[v], q[v], sizeof(float) * (size_t)(n * nq), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(hc[v], kc[v], cache_b, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(hc[v] + cells * kvd, vc[v], cache_b, cudaMemcpyDeviceToHost));
    }
    float qmax = 0;
    for (int64_t i = 0; i < n * nq; i++) qmax = fmaxf(qmax, fabsf(hq[0][i]));
    int64_t dq = 0, dcache = 0, changed = 0, again = 0, worst_at = -1;
    float worst = 0;
    for (int64_t i = 0; i < n * nq; i++) {
        const float d = fabsf(hq[0][i] - hq[1][i]);
        if (!(d <= 1e-5f * qmax)) {
            dq++;
            if (!(d <= worst)) { worst = d; worst_at = i; }
        }
    }
    for (int64_t i = 0; i < 2 * cells * kvd; i++) {
        changed += hc[0][i] != cinit[i];
        if (hc[0][i] != hc[1][i]) {
            const float a = quant_f16_to_f32(hc[0][i]), b = quant_f16_to_f32(hc[1][i]);
            /* one f16 step: the two differ in the last bit of the mantissa (same sign) */
            const int step = abs((int)(hc[0][i] & 0x7fff) - (int)(hc[1][i] & 0x7fff)) <= 1 &&
                             (hc[0][i] & 0x8000) == (hc[1][i] & 0x8000);
            dcache += !(step || fabsf(a - b) <= 1e-6f);
        }
    }
    again = memcmp(hq[1], hq[2], sizeof(float) * (size_t)(n * nq)) != 0 || memcmp(hc[1], hc[2], 2 * cache_b) != 0;
    const int64_t want_changed = (int64_t)n * 2 * kvd; /* every stored value, give or take an unchanged bit pattern */
    CHECK(e == cudaSuccess && e2 == cudaSuccess && dq == 0 && dcache == 0 && !again && changed > want_changed / 2,
          name, "%s / %s: %lld Q values off (worst %.3g of max %.3g at %lld), %lld cache values off, second launch %s, "
          "%lld cache values changed of %lld", cudaGetErrorString(e), cudaGetErrorString(e2), (long long)dq, worst,
          qmax, (long long)worst_at, (long long)dcache, again ? "differs" : "equal", (long long)changed,
          (long long)want_changed);
    for (int v = 0; v < 3; v++) {
        CUDA_CHECK(cudaFree(kc[v])); CUDA_CHECK(cudaFree(vc[v])); CUDA_CHECK(cudaFree(q[v]));
        free(hq[v]); free(hc[v]);
    }
    for (int m = 0; m < 2; m++)
        if (dr[m]) CUDA_CHECK(cudaFree(dr[m]));
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dg)); CUDA_CHECK(cudaFree(dmeta)); CUDA_CHECK(cudaFree(y));
    CUDA_CHECK(cudaFree((void *)rec.angle));
    if (rec.bq) { CUDA_CHECK(cudaFree((void *)rec.bq)); CUDA_CHECK(cudaFree((void *)rec.bk)); CUDA_CHECK(cudaFree((void *)rec.bv)); }
    free(angle); free(cinit);
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        SKIP("test_fused_recipe", "no CUDA device");
        return 0;
    }
    gen_rng r = {(uint64_t)time(NULL) * 2654435761u | 1};
    printf("# seed-time %lld\n", (long long)r.s);
    static const recipe_case cases[] = {
        {"qwen2 (neox, biases)", 1, 1, 8, 2, 128, 128, 1e6, 1.0, 0},
        {"llama3.1 (norm pairs, factors)", 0, 0, 8, 2, 128, 128, 5e5, 1.0, 1},
        {"phi3 (neox 96 of 128, mscale)", 1, 0, 8, 8, 128, 96, 1e4, 1.19, 1},
        {"gemma2 (neox, head 256)", 1, 0, 4, 2, 256, 256, 1e4, 1.0, 0},
        {"head 64, norm pairs, biases", 0, 1, 16, 4, 64, 64, 1e4, 1.0, 0},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < nc; c++)
        for (int n = 1; n <= 4; n++) {
            test_fused(&r, &cases[c], QUANT_Q4_0, QUANT_Q4_0, 1024, n, 0);
            if (n <= 2) { /* Q6_K's fused matvecs take 1 or 2 tokens */
                test_fused(&r, &cases[c], QUANT_Q4_K, QUANT_Q6_K, 1024, n, 0);
                test_fused(&r, &cases[c], QUANT_Q4_K, QUANT_Q6_K, 1024, n, 2);
                test_fused(&r, &cases[c], QUANT_Q6_K, QUANT_Q6_K, 2048, n, 0);
            }
            test_fused(&r, &cases[c], QUANT_Q8_0, QUANT_Q8_0, 4096, n, 0);
            test_fused(&r, &cases[c], QUANT_Q5_K, QUANT_Q5_K, 3072, n, 0); /* v12: Phi-3/4's fused QKV */
        }
    return test_done();
}
