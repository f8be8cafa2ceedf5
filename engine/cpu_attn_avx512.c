/* cpu_attn_head's AVX-512 form (engine/cpu_attn.h) for heads of 16 to 256 values in whole
 * 512-bit registers: q held in registers, four keys' scores at a time (four independent FMA
 * chains, one reduction each), the softmax as the portable form, and the weighted sum of the
 * values in register accumulators written once at the end. The portable form calls a dot
 * kernel per score and an axpy per position, whose loads and stores of the output per position
 * and call per position took ~25% of a 512-token prompt on the fast path (mini q4_k_m, 2
 * threads); here ~half as long. The same code serves every token, prompt or decode, so results
 * still depend neither on the batch nor on the threads. */
#include "engine/cpu_attn.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#pragma GCC optimize("O3")
#pragma GCC target("avx2,fma,avx512f")
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f"))), apply_to = function)
#endif

/* NV registers a head (head_dim 16 NV), known at compile time so q and the accumulators stay
 * in registers. */
static inline __attribute__((always_inline)) void head_nv(const int NV, float *out, const float *q, const float *k,
                                                          const float *v, size_t stride, const int32_t *cells,
                                                          int32_t n_pos, float scale, float *scores) {
    __m512 qv[16];
    for (int i = 0; i < NV; i++) qv[i] = _mm512_loadu_ps(q + 16 * i);
    float mx = -INFINITY;
    int32_t j = 0;
    for (; j + 4 <= n_pos; j += 4) {
        const float *k0 = k + (size_t)cells[j] * stride, *k1 = k + (size_t)cells[j + 1] * stride;
        const float *k2 = k + (size_t)cells[j + 2] * stride, *k3 = k + (size_t)cells[j + 3] * stride;
        __m512 a0 = _mm512_mul_ps(qv[0], _mm512_loadu_ps(k0)), a1 = _mm512_mul_ps(qv[0], _mm512_loadu_ps(k1));
        __m512 a2 = _mm512_mul_ps(qv[0], _mm512_loadu_ps(k2)), a3 = _mm512_mul_ps(qv[0], _mm512_loadu_ps(k3));
        for (int i = 1; i < NV; i++) {
            a0 = _mm512_fmadd_ps(qv[i], _mm512_loadu_ps(k0 + 16 * i), a0);
            a1 = _mm512_fmadd_ps(qv[i], _mm512_loadu_ps(k1 + 16 * i), a1);
            a2 = _mm512_fmadd_ps(qv[i], _mm512_loadu_ps(k2 + 16 * i), a2);
            a3 = _mm512_fmadd_ps(qv[i], _mm512_loadu_ps(k3 + 16 * i), a3);
        }
        scores[j] = _mm512_reduce_add_ps(a0) * scale;
        scores[j + 1] = _mm512_reduce_add_ps(a1) * scale;
        scores[j + 2] = _mm512_reduce_add_ps(a2) * scale;
        scores[j + 3] = _mm512_reduce_add_ps(a3) * scale;
    }
    for (; j < n_pos; j++) { /* the same arithmetic one key at a time */
        const float *k0 = k + (size_t)cells[j] * stride;
        __m512 a0 = _mm512_mul_ps(qv[0], _mm512_loadu_ps(k0));
        for (int i = 1; i < NV; i++) a0 = _mm512_fmadd_ps(qv[i], _mm512_loadu_ps(k0 + 16 * i), a0);
        scores[j] = _mm512_reduce_add_ps(a0) * scale;
    }
    for (j = 0; j < n_pos; j++) mx = scores[j] > mx ? scores[j] : mx;
    double sum = 0;
    for (j = 0; j < n_pos; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    const float inv = (float)(1.0 / sum);
    __m512 acc[16];
    for (int i = 0; i < NV; i++) acc[i] = _mm512_setzero_ps();
    for (j = 0; j < n_pos; j++) {
        const float *vj = v + (size_t)cells[j] * stride;
        const __m512 w = _mm512_set1_ps(scores[j] * inv);
        for (int i = 0; i < NV; i++) acc[i] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vj + 16 * i), acc[i]);
    }
    for (int i = 0; i < NV; i++) _mm512_storeu_ps(out + 16 * i, acc[i]);
}

int cpu_attn_head_avx512(float *out, const float *q, const float *k, const float *v, size_t stride,
                         const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores) {
    switch (head_dim) { /* the head sizes of the architectures mgi runs, unrolled */
    case 64: head_nv(4, out, q, k, v, stride, cells, n_pos, scale, scores); return 1;
    case 80: head_nv(5, out, q, k, v, stride, cells, n_pos, scale, scores); return 1;
    case 96: head_nv(6, out, q, k, v, stride, cells, n_pos, scale, scores); return 1;
    case 128: head_nv(8, out, q, k, v, stride, cells, n_pos, scale, scores); return 1;
    case 256: head_nv(16, out, q, k, v, stride, cells, n_pos, scale, scores); return 1;
    default: return 0;
    }
}

#ifdef __clang__
#pragma clang attribute pop
#endif

#else
int cpu_attn_head_avx512(float *out, const float *q, const float *k, const float *v, size_t stride,
                         const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores) {
    (void)out, (void)q, (void)k, (void)v, (void)stride, (void)cells, (void)n_pos, (void)head_dim, (void)scale,
        (void)scores;
    return 0;
}
#endif
