/* The fast CPU path's AVX-512 kernels outside quant/'s products (one target preamble for both):
 *
 * cpu_attn_head's register form (engine/cpu_attn.h) for heads of 16 to 256 values in whole
 * 512-bit registers: q held in registers, four keys' scores at a time (four independent FMA
 * chains, one reduction each), the softmax as the portable form, and the weighted sum of the
 * values in register accumulators written once at the end. The portable form calls a dot
 * kernel per score and an axpy per position, whose loads and stores of the output per position
 * and call per position took ~25% of a 512-token prompt on the fast path (mini q4_k_m, 2
 * threads). The same code serves every token, prompt or decode, so results still depend neither
 * on the batch nor on the threads.
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

/* ---- attention -------------------------------------------------------------------------------- */
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

#define HEAD_CASE(nv) \
    case nv: head_nv(nv, out, q, k, v, stride, cells, n_pos, scale, scores); return

void cpu_attn_head_avx512(float *out, const float *q, const float *k, const float *v, size_t stride,
                          const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores) {
    switch (head_dim / 16) { /* cpu_attn_head_in_registers: a multiple of 16 up to 256 */
    HEAD_CASE(1); HEAD_CASE(2); HEAD_CASE(3); HEAD_CASE(4); HEAD_CASE(5); HEAD_CASE(6); HEAD_CASE(7);
    HEAD_CASE(8); HEAD_CASE(9); HEAD_CASE(10); HEAD_CASE(11); HEAD_CASE(12); HEAD_CASE(13); HEAD_CASE(14);
    HEAD_CASE(15); HEAD_CASE(16);
    default: return;
    }
}

/* ---- SwiGLU ----------------------------------------------------------------------------------- */
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
void cpu_attn_head_avx512(float *out, const float *q, const float *k, const float *v, size_t stride,
                          const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores) {
    cpu_attn_head(QUANT_ISA_REF, out, q, k, v, stride, cells, n_pos, head_dim, scale, scores);
}
void cpu_silu_mul_avx512(float *gate, const float *up, int64_t n) { cpu_silu_mul(QUANT_ISA_REF, gate, up, n); }
#endif
