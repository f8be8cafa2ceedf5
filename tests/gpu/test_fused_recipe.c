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
 * and in one launch), Q8_0, Q6_K, Q5_K; 1 to 4 tokens (Q6_K: 2). That the interleaved rows are the
 * model's NEOX pairs is the engine's upload (engine/cuda_weights.c), checked against the CPU by
 * test_recipe. Then the Q/K-norm recipes' decode fold (test_qkn: the same epilogue handing Q and K
 * on unturned, paged_attention_qkn norming and turning them) against the unfolded path. Without a
 * CUDA device: SKIP. */
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
#include "kernels/paged.h"
#include "kernels/recipe.h"
#include "quant/quant.h"

typedef struct {
    const char *name;
    int neox, bias, n_head, n_kv, hd, n_rot;
    double base, mscale;
    int factors; /* the angles divided by random factors in [1, 8] (rope_freqs) */
} recipe_case;

/* What both checks build: the QKV weights (one matrix, or Q/K in tqk and V in tv), x and the
 * attention norm's weight, and the recipe (biases, NEOX-interleaved rows, an angle table, with
 * qk_norm the per-head norm weights) on the device. */
typedef struct {
    int64_t nq, kvd, rows[2];
    uint32_t types[2];
    void *dr[2];
    float *dx, *dg;
    cu_qkv_recipe rec;
    double *angle;
} qkv_case;

static void qkv_setup(gen_rng *r, const recipe_case *rc, uint32_t tqk, uint32_t tv, int64_t k, int n, int qk_norm,
                      qkv_case *c) {
    const int hd = rc->hd, n_rot = rc->n_rot, one = tqk == tv;
    memset(c, 0, sizeof *c);
    c->nq = (int64_t)rc->n_head * hd;
    c->kvd = (int64_t)rc->n_kv * hd;
    c->rows[0] = c->nq + c->kvd * (one ? 2 : 1);
    c->rows[1] = one ? 0 : c->kvd;
    c->types[0] = tqk;
    c->types[1] = tv;
    for (int m = 0; m < 2; m++)
        if (c->rows[m]) c->dr[m] = dev_random_repacked(r, c->types[m], c->rows[m], k);
    c->dx = dev_floats(r, (int64_t)n * k, -2, 2);
    c->dg = dev_floats(r, k, -1.5, 1.5);
    c->rec.eps = 1e-6f;
    c->rec.neox = c->rec.neox_rows = rc->neox;
    c->rec.mscale = rc->mscale;
    if (rc->bias) {
        c->rec.bq = dev_floats(r, c->nq, -1, 1);
        c->rec.bk = dev_floats(r, c->kvd, -1, 1);
        c->rec.bv = dev_floats(r, c->kvd, -1, 1);
    }
    if (qk_norm) {
        c->rec.q_norm = dev_floats(r, hd, 0.5, 1.5);
        c->rec.k_norm = dev_floats(r, hd, 0.5, 1.5);
    }
    c->angle = malloc(sizeof(double) * (size_t)(n_rot / 2 + 1));
    for (int i = 0; i < n_rot / 2; i++) {
        c->angle[i] = pow(rc->base, -2.0 * i / n_rot);
        if (rc->factors) c->angle[i] /= gen_uniform(r, 1, 8);
    }
    c->rec.angle = dev_upload(c->angle, sizeof(double) * (size_t)(n_rot / 2 + 1));
}

static void qkv_free(qkv_case *c) {
    for (int m = 0; m < 2; m++)
        if (c->dr[m]) CUDA_CHECK(cudaFree(c->dr[m]));
    const void *dev[] = {c->dx, c->dg, c->rec.angle, c->rec.bq, c->rec.bk, c->rec.bv, c->rec.q_norm, c->rec.k_norm};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) CUDA_CHECK(cudaFree((void *)dev[i]));
    free(c->angle);
}

/* shaped: 0 one matrix (tqk == tv) or V launched beside Q/K's grid; 2 both in one launch (_pair). */
static void test_fused(gen_rng *r, const recipe_case *rc, uint32_t tqk, uint32_t tv, int64_t k, int n, int shaped) {
    const int hd = rc->hd, n_rot = rc->n_rot;
    const int64_t nq = (int64_t)rc->n_head * hd, kvd = (int64_t)rc->n_kv * hd, cells = 64;
    const float eps = 1e-6f;
    const int one = tqk == tv;
    char name[256];
    snprintf(name, sizeof name, "fused rope epilogue %s %s%s%s k %lld n=%d%s", rc->name, quant_type_name(tqk), one ? "" : " + ",
             one ? "" : quant_type_name(tv), (long long)k, n, one ? "" : shaped == 2 ? " (one launch)" : " (beside)");
    qkv_case qc;
    qkv_setup(r, rc, tqk, tv, k, n, 0, &qc);
    const int64_t *rows = qc.rows;
    void *const *dr = qc.dr;
    const float *dx = qc.dx, *dg = qc.dg;
    const cu_qkv_recipe rec = qc.rec;
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
    const cu_rope_epi epi = {rec.bq, rec.bk, rec.bv, rec.angle, rec.mscale, rec.neox_rows, NULL};
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaError_t e2 = cudaSuccess;
    const float theta = 1e4f; /* unused: the angle table turns */
    for (int v = 1; v <= 2 && e2 == cudaSuccess; v++) {
        if (shaped == 2)
            e2 = cu_matvec_f32_norm_rope_pair(dr[0], tqk, rows[0], nq, kvd, dr[1], tv, rows[1], 0, 0, dx, dg, eps, k, n,
                                              q[v], kc[v], vc[v], dmeta, dmeta + 4, kvd, hd, n_rot, theta, &epi, NULL,
                                              NULL, st);
        else
            e2 = cu_matvec_f32_norm_rope(dr[0], tqk, dx, dg, eps, rows[0], k, n, q[v], kc[v], vc[v], dmeta, dmeta + 4,
                                         nq, kvd, kvd, hd, n_rot, theta, &epi, NULL, NULL, st);
        if (e2 == cudaSuccess && rows[1] && shaped != 2)
            e2 = cu_matvec_f32_norm_rope_beside(dr[1], tv, dx, dg, eps, rows[1], k, n, NULL, NULL, vc[v], dmeta,
                                                dmeta + 4, 0, 0, kvd, hd, n_rot, theta, &epi,
                                                cu_matvec_fused_blocks(tqk, rows[0], k, n), NULL, NULL, st);
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
    CUDA_CHECK(cudaFree(dmeta)); CUDA_CHECK(cudaFree(y));
    qkv_free(&qc);
    free(cinit);
}

/* The Q/K-norm recipes' decode fold (Qwen3): the fused QKV with cu_rope_epi.k_raw (Q and K handed
 * on unturned) and paged_attention_qkn (norms and RoPE on load, the token's key stored by the
 * block that reads its position) against the unfolded path, cu_matvec_f32_norm, recipe.h's
 * cu_qkv_rope_store and paged_attention, on one token per sequence at random positions (up to 5
 * splits) through shuffled page tables: outputs within 1e-4 of their largest value, every cache
 * value within one f16 step of the reference's (or 1e-6 near zero), and a second launch equal bit
 * for bit. */
static void test_qkn(gen_rng *r, const recipe_case *rc, uint32_t tqk, uint32_t tv, int64_t k, int n, int window,
                     float softcap) {
    const int hd = rc->hd, n_rot = rc->n_rot, n_split = 4;
    const int64_t nq = (int64_t)rc->n_head * hd, kvd = (int64_t)rc->n_kv * hd;
    const float eps = 1e-6f, scale = 1.0f / sqrtf((float)hd);
    const int one = tqk == tv;
    char name[256];
    snprintf(name, sizeof name, "qk-norm fold %s %s%s%s k %lld n=%d window %d softcap %g", rc->name,
             quant_type_name(tqk), one ? "" : " + ", one ? "" : quant_type_name(tv), (long long)k, n, window, softcap);
    qkv_case qc;
    qkv_setup(r, rc, tqk, tv, k, n, 1, &qc);
    const int64_t *rows = qc.rows;
    void *const *dr = qc.dr;
    const float *dx = qc.dx, *dg = qc.dg;
    const cu_qkv_recipe rec = qc.rec;
    /* token t is sequence t's, at a random position; the page tables a shuffle of every page */
    int32_t pos[4], seq[4], cell[4];
    int max_pos = 0;
    for (int t = 0; t < n; t++) {
        pos[t] = (int32_t)gen_uniform(r, 0, 1200);
        seq[t] = t;
        if (pos[t] > max_pos) max_pos = pos[t];
    }
    const int per_seq = max_pos / PAGED_PAGE + 1, n_pages = n * per_seq + 1;
    const int64_t cells = (int64_t)n_pages * PAGED_PAGE;
    int32_t *pt = malloc(sizeof(int32_t) * (size_t)(n * per_seq));
    for (int i = 0; i < n * per_seq; i++) pt[i] = i + 1;
    for (int i = n * per_seq - 1; i > 0; i--) {
        int j = (int)(gen_u64(r) % (uint64_t)(i + 1)), tmp = pt[i];
        pt[i] = pt[j];
        pt[j] = tmp;
    }
    for (int t = 0; t < n; t++) cell[t] = pt[t * per_seq + pos[t] / PAGED_PAGE] * PAGED_PAGE + pos[t] % PAGED_PAGE;
    int32_t *dpos = dev_upload(pos, sizeof pos), *dseq = dev_upload(seq, sizeof seq), *dcell = dev_upload(cell, sizeof cell);
    int32_t *dpt = dev_upload(pt, sizeof(int32_t) * (size_t)(n * per_seq));
    const size_t cache_b = sizeof(uint16_t) * (size_t)(cells * kvd);
    uint16_t *cinit = malloc(2 * cache_b);
    for (int64_t i = 0; i < 2 * cells * kvd; i++) cinit[i] = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
    uint16_t *kc[3], *vc[3];
    float *q[3], *out[3];
    const size_t qb = sizeof(float) * (size_t)(n * nq);
    for (int v = 0; v < 3; v++) { /* 0: reference, 1: the fold, 2: the fold again */
        kc[v] = dev_upload(cinit, cache_b);
        vc[v] = dev_upload(cinit + cells * kvd, cache_b);
        CUDA_CHECK(cudaMalloc((void **)&q[v], qb));
        CUDA_CHECK(cudaMalloc((void **)&out[v], qb));
        CUDA_CHECK(cudaMemset(out[v], 0xff, qb));
    }
    const size_t sb = paged_attention_scratch_bytes(n, rc->n_head, hd, n_split);
    void *scratch = dev_alloc(sb);
    CUDA_CHECK(cudaMemset(scratch, 0, sb));
    float *y = NULL, *kraw = NULL;
    CUDA_CHECK(cudaMalloc((void **)&y, sizeof(float) * (size_t)(n * (nq + 2 * kvd))));
    CUDA_CHECK(cudaMalloc((void **)&kraw, sizeof(float) * (size_t)(n * kvd)));
    cudaError_t e = cu_matvec_f32_norm(y, dr[0], tqk, dx, dg, eps, rows[0], k, n, 0);
    if (e == cudaSuccess && rows[1]) e = cu_matvec_f32_norm(y + (int64_t)n * rows[0], dr[1], tv, dx, dg, eps, rows[1], k, n, 0);
    const int64_t st0 = rows[0], stv = one ? rows[0] : kvd;
    const float *yv = one ? y + nq + kvd : y + (int64_t)n * rows[0];
    if (e == cudaSuccess)
        e = cu_qkv_rope_store(q[0], kc[0], vc[0], y, st0, y + nq, st0, yv, stv, dpos, dcell, &rec, n, rc->n_head,
                              rc->n_kv, hd, n_rot, 0);
    if (e == cudaSuccess)
        e = paged_attention_recipe(out[0], q[0], kc[0], vc[0], dpos, dseq, dpt, per_seq, scratch, n, rc->n_head,
                                   rc->n_kv, hd, n_split, 1, scale, window, softcap, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    cu_rope_epi epi = {rec.bq, rec.bk, rec.bv, rec.angle, rec.mscale, rec.neox_rows, kraw};
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaError_t e2 = cudaSuccess;
    for (int v = 1; v <= 2 && e2 == cudaSuccess; v++) {
        const paged_qk_norm qn = {kraw, kc[v], dcell, rec.q_norm, rec.k_norm, eps, rec.angle, rec.mscale, n_rot, rc->neox};
        e2 = cu_matvec_f32_norm_rope(dr[0], tqk, dx, dg, eps, rows[0], k, n, q[v], kc[v], vc[v], dpos, dcell, nq, kvd,
                                     kvd, hd, n_rot, 1e4f, &epi, NULL, NULL, st);
        if (e2 == cudaSuccess && rows[1])
            e2 = cu_matvec_f32_norm_rope(dr[1], tv, dx, dg, eps, rows[1], k, n, NULL, NULL, vc[v], dpos, dcell, 0, 0,
                                         kvd, hd, n_rot, 1e4f, &epi, NULL, NULL, st);
        if (e2 == cudaSuccess)
            e2 = paged_attention_qkn(out[v], q[v], kc[v], vc[v], dpos, dseq, dpt, per_seq, scratch, n, rc->n_head,
                                     rc->n_kv, hd, n_split, scale, window, softcap, &qn, st);
        if (e2 == cudaSuccess) e2 = cudaStreamSynchronize(st);
    }
    CUDA_CHECK(cudaStreamDestroy(st));
    float *ho[3];
    uint16_t *hc[3];
    for (int v = 0; v < 3; v++) {
        ho[v] = malloc(qb);
        hc[v] = malloc(2 * cache_b);
        CUDA_CHECK(cudaMemcpy(ho[v], out[v], qb, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(hc[v], kc[v], cache_b, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(hc[v] + cells * kvd, vc[v], cache_b, cudaMemcpyDeviceToHost));
    }
    float omax = 0, worst = 0;
    int64_t doff = 0, dcache = 0, changed = 0;
    for (int64_t i = 0; i < n * nq; i++) omax = fmaxf(omax, fabsf(ho[0][i]));
    for (int64_t i = 0; i < n * nq; i++) {
        const float d = fabsf(ho[0][i] - ho[1][i]);
        if (!(d <= 1e-4f * omax)) doff++;
        if (!(d <= worst)) worst = d;
    }
    for (int64_t i = 0; i < 2 * cells * kvd; i++) {
        changed += hc[0][i] != cinit[i];
        if (hc[0][i] != hc[1][i]) { /* one f16 step, or near zero (cos and sin within an f32 ulp) */
            const float a = quant_f16_to_f32(hc[0][i]), b = quant_f16_to_f32(hc[1][i]);
            const int step = abs((int)(hc[0][i] & 0x7fff) - (int)(hc[1][i] & 0x7fff)) <= 1 &&
                             (hc[0][i] & 0x8000) == (hc[1][i] & 0x8000);
            dcache += !(step || fabsf(a - b) <= 1e-6f);
        }
    }
    const int again = memcmp(ho[1], ho[2], qb) != 0 || memcmp(hc[1], hc[2], 2 * cache_b) != 0;
    /* a shape the fold does not take: refused, nothing launched */
    const paged_qk_norm bad = {kraw, kc[1], dcell, rec.q_norm, rec.k_norm, eps, rec.angle, rec.mscale, n_rot, rc->neox};
    const cudaError_t e3 = paged_attention_qkn(out[1], q[1], kc[1], vc[1], dpos, dseq, dpt, per_seq, scratch, n,
                                               rc->n_head, rc->n_kv, 96, n_split, scale, 0, 0.0f, &bad, 0);
    CHECK(e == cudaSuccess && e2 == cudaSuccess && e3 == cudaErrorNotSupported && doff == 0 && dcache == 0 && !again &&
              changed > (int64_t)n * kvd,
          name, "%s / %s / head 96 %s: %lld outputs off (worst %.3g of max %.3g), %lld cache values off, second "
          "launch %s, %lld cache values changed", cudaGetErrorString(e), cudaGetErrorString(e2),
          cudaGetErrorString(e3), (long long)doff, worst, omax, (long long)dcache, again ? "differs" : "equal",
          (long long)changed);
    for (int v = 0; v < 3; v++) {
        CUDA_CHECK(cudaFree(kc[v])); CUDA_CHECK(cudaFree(vc[v])); CUDA_CHECK(cudaFree(q[v])); CUDA_CHECK(cudaFree(out[v]));
        free(ho[v]); free(hc[v]);
    }
    CUDA_CHECK(cudaFree(y)); CUDA_CHECK(cudaFree(kraw)); CUDA_CHECK(cudaFree(dpos)); CUDA_CHECK(cudaFree(dseq));
    CUDA_CHECK(cudaFree(dcell)); CUDA_CHECK(cudaFree(dpt)); CUDA_CHECK(cudaFree(scratch));
    qkv_free(&qc);
    free(cinit); free(pt);
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
            test_fused(&r, &cases[c], QUANT_Q5_K, QUANT_Q5_K, 3072, n, 0); /* Phi-3/4's fused QKV */
        }
    static const recipe_case qkn_cases[] = {
        {"qwen3 (neox)", 1, 0, 8, 2, 128, 128, 1e6, 1.0, 0},
        {"head 128, 8 per kv head, norm pairs, biases, mscale", 0, 1, 16, 2, 128, 128, 1e4, 1.19, 0},
        {"head 64, norm pairs over 32 of 64", 0, 0, 8, 4, 64, 32, 1e4, 1.0, 0},
        {"head 64 (neox)", 1, 1, 4, 4, 64, 64, 1e4, 1.0, 0},
        {"gemma3 (neox, head 256)", 1, 0, 8, 4, 256, 256, 1e6, 1.0, 0},
    };
    for (int c = 0; c < (int)(sizeof qkn_cases / sizeof qkn_cases[0]); c++)
        for (int n = 1; n <= 4; n++) {
            const int hd = qkn_cases[c].hd;
            test_qkn(&r, &qkn_cases[c], QUANT_Q4_0, QUANT_Q4_0, 1024, n, 0, 0.0f);
            if (n <= 2) test_qkn(&r, &qkn_cases[c], QUANT_Q4_K, QUANT_Q6_K, 1024, n, 0, 0.0f);
            test_qkn(&r, &qkn_cases[c], QUANT_Q5_K, QUANT_Q5_K, 1024, n, 0, 0.0f);
            /* Gemma's windowed layers (and a softcap, Gemma 2's) on the recipe instances */
            if (hd >= 128) {
                test_qkn(&r, &qkn_cases[c], QUANT_Q4_0, QUANT_Q4_0, 1024, n, 300, 0.0f);
                test_qkn(&r, &qkn_cases[c], QUANT_Q4_0, QUANT_Q4_0, 1024, n, 0, 30.0f);
            }
        }
    return test_done();
}
