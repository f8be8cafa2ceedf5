/* The fast CPU path's AVX-512 kernels outside quant/'s products (one target preamble for both):
 *
 * cpu_attn_heads' register form (engine/cpu_attn.h) for heads of 16 to 256 values in whole
 * 512-bit registers, up to four query heads of one K/V head at a time (grouped-query attention):
 * each 16-value slice of a key or a value is loaded once for all of them, so a head's FMA chains
 * are interleaved with the others' (one head alone waited on the FMA latency in its value sum,
 * 4 chains for a 64-value head); scores four keys at a time, the softmax vectorised (softmax16),
 * and the weighted sum of the values in register accumulators written once at the end. Each head's
 * arithmetic is the same whatever heads share its call, and the same code serves every token,
 * prompt or decode, so results depend neither on the batch nor on the threads. Four heads of 64
 * values over 1024 positions: ~50 -> ~19 us on one Zen 5 core (one head at a time with a scalar
 * expf before).
 *
 * SwiGLU, gate[i] = silu(gate[i]) * up[i], sixteen values a step (engine/cpu_act.h). expf one
 * value at a time took ~12 us of a mini q4_k_m decode layer (2816 values). exp here: x = n ln2 +
 * r with n = round(x / ln2), r in [-ln2/2, ln2/2] (ln2 in two parts, so r is exact to ~1 ulp),
 * e^r by its degree-7 Taylor polynomial (truncation below 2^-27 on that range) in Horner form,
 * times 2^n by vscalefps (which gives inf and 0 past the float range, as expf); within ~2 ulp of
 * expf. */
#include "engine/cpu_act.h"
#include "engine/cpu_attn.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#pragma GCC optimize("O3")
#pragma GCC target("avx2,fma,avx512f")
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f"))), apply_to = function)
#endif

/* e^x sixteen values at a time (the preamble above says how); the softmax and SwiGLU below. */
static inline __m512 exp16(__m512 x) {
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);       /* ln2's high part: exact product */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);            /* and its low part */
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* ---- attention -------------------------------------------------------------------------------- */
/* Whether a head's keys and values (n positions of hd floats each) are more than the 1 MiB a
 * core's L2 holds, so that their rows come from L3 or memory: then the loops request the rows a
 * few positions ahead. One Zen 5 core, four heads: 64 values over 4096 positions 149 -> 103 us,
 * 128 values over 2048 positions 113 -> 93 us, over 4096 280 -> 198 us; where they fit, the
 * requests only cost (128 values over 1024 positions, 1 MiB, ~33 -> ~38 us). */
#define CACHE_FAR(n, hd) ((int64_t)(n) * (hd) > 131072)

/* The sums of four vectors' lanes, in one: halves, then quarters, then within each quarter (the
 * same pairing for every key, so a score does not depend on the keys beside it). One reduction
 * per key and head had been most of the scores' cost beside their FMAs. */
static inline __m128 sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xEE));
    const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xEE));
    __m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
    return _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), t));
}

/* Scores of G query heads (back to back, hd apart) against the same keys: per block of four keys,
 * each 16-value slice of the four keys is loaded once and serves every head (4 G independent FMA
 * chains), each head's chain in the order of its slices as one head alone. */
static inline __attribute__((always_inline)) void qk_heads(const int G, const float *q, int32_t hd, const float *k,
                                                           size_t stride, const int32_t *cells, int32_t n_pos,
                                                           float scale, float *scores) {
    const int NV = hd / 16;
    const int far = CACHE_FAR(n_pos, hd);
    int32_t j = 0;
    for (; j + 4 <= n_pos; j += 4) {
        const float *kp[4];
        for (int t = 0; t < 4; t++) kp[t] = k + (size_t)cells[j + t] * stride;
        if (far && j + 12 <= n_pos)
            for (int t = 8; t < 12; t++) {
                const char *pk = (const char *)(k + (size_t)cells[j + t] * stride);
                for (int b = 0; b < hd * 4; b += 64) __builtin_prefetch(pk + b, 0, 3);
            }
        __m512 a[4][4], kv[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) kv[t] = _mm512_loadu_ps(kp[t]);
#pragma GCC unroll 4
        for (int h = 0; h < G; h++) {
            const __m512 qc = _mm512_loadu_ps(q + (size_t)h * hd);
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++) a[h][t] = _mm512_mul_ps(qc, kv[t]);
        }
        for (int i = 1; i < NV; i++) {
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++) kv[t] = _mm512_loadu_ps(kp[t] + 16 * i);
#pragma GCC unroll 4
            for (int h = 0; h < G; h++) {
                const __m512 qc = _mm512_loadu_ps(q + (size_t)h * hd + 16 * i);
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) a[h][t] = _mm512_fmadd_ps(qc, kv[t], a[h][t]);
            }
        }
#pragma GCC unroll 4
        for (int h = 0; h < G; h++)
            _mm_storeu_ps(scores + (size_t)h * n_pos + j,
                          _mm_mul_ps(sum4(a[h][0], a[h][1], a[h][2], a[h][3]), _mm_set1_ps(scale)));
    }
    for (; j < n_pos; j++) { /* the same arithmetic one key at a time */
        const float *k0 = k + (size_t)cells[j] * stride;
#pragma GCC unroll 4
        for (int h = 0; h < G; h++) {
            const float *qh = q + (size_t)h * hd;
            __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(qh), _mm512_loadu_ps(k0));
            for (int i = 1; i < NV; i++) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * i), _mm512_loadu_ps(k0 + 16 * i), a0);
            scores[(size_t)h * n_pos + j] = _mm512_reduce_add_ps(a0) * scale;
        }
    }
}

/* Slices [c0, c0 + CV) of the G heads' outputs: each position's CV value slices loaded once for
 * every head (G CV independent FMA chains, where one head alone had CV chains waiting on the FMA
 * latency); each output value still sums its positions in order from zero. */
static inline __attribute__((always_inline)) void pv_heads(const int G, const int CV, float *out, int32_t hd,
                                                           const float *v, size_t stride, const int32_t *cells,
                                                           int32_t n_pos, const float *scores, const float *inv,
                                                           int c0) {
    const int far = CACHE_FAR(n_pos, hd);
    __m512 acc[4][8];
#pragma GCC unroll 4
    for (int h = 0; h < G; h++)
#pragma GCC unroll 8
        for (int c = 0; c < CV; c++) acc[h][c] = _mm512_setzero_ps();
    for (int32_t j = 0; j < n_pos; j++) {
        const float *vj = v + (size_t)cells[j] * stride + 16 * c0;
        if (far && j + 4 < n_pos) {
            const char *pv = (const char *)(v + (size_t)cells[j + 4] * stride + 16 * c0);
            for (int c = 0; c < CV; c++) __builtin_prefetch(pv + 64 * c, 0, 3);
        }
        __m512 vv[8];
#pragma GCC unroll 8
        for (int c = 0; c < CV; c++) vv[c] = _mm512_loadu_ps(vj + 16 * c);
#pragma GCC unroll 4
        for (int h = 0; h < G; h++) {
            const __m512 w = _mm512_set1_ps(scores[(size_t)h * n_pos + j] * inv[h]);
#pragma GCC unroll 8
            for (int c = 0; c < CV; c++) acc[h][c] = _mm512_fmadd_ps(w, vv[c], acc[h][c]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < G; h++)
#pragma GCC unroll 8
        for (int c = 0; c < CV; c++) _mm512_storeu_ps(out + (size_t)h * hd + 16 * (c0 + c), acc[h][c]);
}

/* s[j] = e^(s[j] - max) for j < n, sixteen at a time (the tail through a masked step), and 1 / their
 * sum in *inv: the sum in double, two vectors of eight lanes, added lane by lane at the end. A
 * scalar expf and a double sum one position after another had taken ~45% of a head's time. */
static inline void softmax16(float *s, int32_t n, float *inv) {
    __m512 mv = _mm512_set1_ps(-INFINITY);
    int32_t j = 0;
    for (; j + 16 <= n; j += 16) mv = _mm512_max_ps(mv, _mm512_loadu_ps(s + j));
    const __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
    if (j < n) mv = _mm512_mask_max_ps(mv, m, mv, _mm512_maskz_loadu_ps(m, s + j));
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (j = 0; j + 16 <= n; j += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), mx));
        _mm512_storeu_ps(s + j, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    if (j < n) {
        const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), mx)));
        _mm512_mask_storeu_ps(s + j, m, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    *inv = (float)(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)));
}

/* G heads (1, 2 or 4, known at compile time so the chains stay in registers): scores, then each
 * head's softmax (softmax16), then the weighted values. */
static inline __attribute__((always_inline)) void heads_g(const int G, float *out, const float *q, const float *k,
                                                          const float *v, size_t stride, const int32_t *cells,
                                                          int32_t n_pos, int32_t hd, float scale, float *scores) {
    qk_heads(G, q, hd, k, stride, cells, n_pos, scale, scores);
    float inv[4];
    for (int h = 0; h < G; h++) softmax16(scores + (size_t)h * n_pos, n_pos, &inv[h]);
    /* slices of 8 vectors for one head (8 chains), of 4 for 2 or 4 heads (8 or 16 chains) */
    const int NV = hd / 16;
    int c0 = 0;
    if (G == 1) {
        for (; c0 + 8 <= NV; c0 += 8) pv_heads(1, 8, out, hd, v, stride, cells, n_pos, scores, inv, c0);
        switch (NV - c0) {
        case 7: pv_heads(1, 7, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
        case 6: pv_heads(1, 6, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
        case 5: pv_heads(1, 5, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
        case 4: pv_heads(1, 4, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
        case 3: pv_heads(1, 3, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
        case 2: pv_heads(1, 2, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
        case 1: pv_heads(1, 1, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
        default: break;
        }
        return;
    }
    for (; c0 + 4 <= NV; c0 += 4) pv_heads(G, 4, out, hd, v, stride, cells, n_pos, scores, inv, c0);
    switch (NV - c0) {
    case 3: pv_heads(G, 3, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
    case 2: pv_heads(G, 2, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
    case 1: pv_heads(G, 1, out, hd, v, stride, cells, n_pos, scores, inv, c0); break;
    default: break;
    }
}

static void heads_1(float *out, const float *q, const float *k, const float *v, size_t stride, const int32_t *cells,
                    int32_t n_pos, int32_t hd, float scale, float *scores) {
    heads_g(1, out, q, k, v, stride, cells, n_pos, hd, scale, scores);
}
static void heads_2(float *out, const float *q, const float *k, const float *v, size_t stride, const int32_t *cells,
                    int32_t n_pos, int32_t hd, float scale, float *scores) {
    heads_g(2, out, q, k, v, stride, cells, n_pos, hd, scale, scores);
}
static void heads_4(float *out, const float *q, const float *k, const float *v, size_t stride, const int32_t *cells,
                    int32_t n_pos, int32_t hd, float scale, float *scores) {
    heads_g(4, out, q, k, v, stride, cells, n_pos, hd, scale, scores);
}

void cpu_attn_heads_avx512(int g, float *out, const float *q, const float *k, const float *v, size_t stride,
                           const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores) {
    while (g > 0) { /* cpu_attn_head_in_registers: a multiple of 16 up to 256 */
        const int n = g >= 4 ? 4 : g >= 2 ? 2 : 1;
        (n == 4 ? heads_4 : n == 2 ? heads_2 : heads_1)(out, q, k, v, stride, cells, n_pos, head_dim, scale, scores);
        out += (size_t)n * head_dim, q += (size_t)n * head_dim, g -= n;
    }
}

/* ---- SwiGLU ----------------------------------------------------------------------------------- */
void cpu_silu_mul_avx512(float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 g = _mm512_loadu_ps(gate + i);
        /* exp(-g) past ~88.7 is inf and g / inf = -0, as the scalar form gives; NaN stays NaN */
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
        const __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(gate + i, _mm512_mul_ps(s, _mm512_loadu_ps(up + i)));
    }
    if (i < n) { /* the tail through a masked step: the same arithmetic */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
        const __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, up + i)));
    }
}

#ifdef __clang__
#pragma clang attribute pop
#endif

#else
/* Off x86 no path is AVX-512 and nothing calls these; the portable arithmetic all the same. */
void cpu_attn_heads_avx512(int g, float *out, const float *q, const float *k, const float *v, size_t stride,
                           const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores) {
    cpu_attn_heads(QUANT_ISA_REF, g, out, q, k, v, stride, cells, n_pos, head_dim, scale, scores);
}
void cpu_silu_mul_avx512(float *gate, const float *up, int64_t n) { cpu_silu_mul(QUANT_ISA_REF, gate, up, n); }
#endif
