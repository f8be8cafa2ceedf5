/* The 256-bit SIMD dot kernels and activation quantisers, written once and compiled per path:
 * dot_avx2.c and dot_avx512.c set the target, define the two integer primitives below and the
 * table's name, then include this file (quant/ internal).
 *   SIMD_DOT_U8S8(u, s)        32 u8 x 32 s8 -> 8 int32 sums of 4 products
 *   SIMD_MADD16_ACC(acc, a, b) acc + 8 int32 sums of 2 int16 products
 *   SIMD_DPBUSD_ACC(acc, u, s) acc + SIMD_DOT_U8S8(u, s)
 *   SIMD_PANEL_T               tokens per panel pass (4 ymm registers per token)
 *   SIMD_PANEL_WIDE            1 when SIMD_DPBUSD_ACC takes u8 codes up to 255 (no int16 step)
 *   SIMD_ROW_512               1: the 32-weight row kernels take two blocks a step in 512 bits
 *   SIMD_PANEL_512             1: the panel kernels hold a panel's 16 rows in one 512-bit register
 *   SIMD_K_512                 1: the Q4_K, Q5_K and Q6_K row kernels take 64 weights a step in 512 bits
 *   SIMD_ILV_NEXT_L2           1: the K types' interleaved kernels also ask L2 for the next block
 *   SIMD_TABLE                 the quant_dot_table to define
 * Every kernel takes up to QUANT_DOT_TOK activation rows: a weight block is loaded and unpacked
 * once and multiplied into each token's accumulators (the prompt case). The token count is a
 * constant in each specialisation (always_inline + switch) so the accumulators stay in
 * registers. Weight codes are unsigned (0..63) and activation codes signed, the operand order
 * maddubs and dpbusd take; maddubs sums pairs in int16 with saturation, which codes up to 63
 * times |127| never reach (2 * 63 * 127 = 16002). */
#include <immintrin.h>
#include <string.h>
#include "dot_kernels.h"
#include "rows.h"

#ifndef SIMD_ILV_NEXT_L2
#define SIMD_ILV_NEXT_L2 0
#endif
#ifndef SIMD_K_512
#define SIMD_K_512 0
#endif

#define AI static inline __attribute__((always_inline))

AI float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AI int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

AI float f16(uint16_t h) { return _cvtsh_ss(h); }

/* Weight bytes this far ahead of the block being read are prefetched: decode streams each
 * weight from memory once, and the caller's rows are contiguous, so the prefetch runs on into
 * the next row. Without it a one-token product spent half its kernel time waiting on the weight
 * loads (perf, 2-core Xeon VM): mini q4_k_m decode went from ~86 to ~115 t/s with it (1024 to
 * 4096 bytes ahead all alike). */
#define PF_AHEAD 2048

/* Prefetches the bytes of a block at p, PF_AHEAD ahead, a cache line at a time. */
AI void prefetch_ahead(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + PF_AHEAD + o, _MM_HINT_T0);
}

/* Activation row t of a kernel call. */
#define XROW(x, xs, t) ((const uint8_t *)(x) + (size_t)(t) * (xs))

/* Byte j = 0xff where bit j of bits is set (Q5 fifth bits): byte j gets byte j / 8 of bits,
 * ORed with every bit but j % 8 set. */
AI __m256i bits_to_bytes(uint32_t bits) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i keep = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    return _mm256_cmpeq_epi8(_mm256_or_si256(v, keep), _mm256_set1_epi64x(-1));
}

/* The two scales of a 32-byte run covering two 16-weight sub-blocks, one per 128-bit lane. */
AI __m256i scale_pair(int lo, int hi) {
    return _mm256_set_m128i(_mm_set1_epi16((short)hi), _mm_set1_epi16((short)lo));
}

/* ---- activations ---------------------------------------------------------------------------- */

/* 32 floats -> 32 codes of x * id rounded to nearest even (cvtps, as lrintf in dot_ref.c);
 * returns the sum of the codes. */
AI int quant32(const float *x, float id, int8_t *q) {
    const __m256 vid = _mm256_set1_ps(id);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), vid));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vid));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), vid));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), vid));
    int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
    /* packs interleave the 128-bit lanes; the permute puts the 4-byte groups back in order */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, p);
    return sum;
}

AI __m256 absmax8(__m256 m, const float *x) {
    return _mm256_max_ps(m, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x)));
}

AI float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static void act_q8(const float *x, void *xq, int64_t n) {
    block_q8_a *b = xq;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < 32; j += 8) m = absmax8(m, x + j);
        float amax = hmax_ps(m), id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = quant32(x, id, b[i].qs);
        b[i].d = amax / 127.0f;
        b[i].s = b[i].d * (float)sum;
    }
}

static void act_q8_K(const float *x, void *xq, int64_t n) {
    block_q8_K *b = xq;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) m = absmax8(m, x + j);
        float amax = hmax_ps(m), id = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int g = 0; g < QK_K / 32; g++) quant32(x + 32 * g, id, b[i].qs + 32 * g);
        for (int g = 0; g < QK_K / 16; g++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(b[i].qs + 16 * g));
            __m256i w = _mm256_cvtepi8_epi16(v);
            b[i].bsums[g] = (int16_t)hsum_epi32(_mm256_madd_epi16(w, _mm256_set1_epi16(1)));
        }
        b[i].d = amax / 127.0f;
    }
}

/* ---- float weights: f32 activations --------------------------------------------------------- */

/* kind 0: f32, 1: f16, 2: bf16. Eight weights at element i, as f32. */
AI __m256 load_w8(int kind, const void *w, int64_t i) {
    if (kind == 0) return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (kind == 1) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

AI float load_w1(int kind, const void *w, int64_t i) {
    if (kind == 0) return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    if (kind == 1) return f16(h);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Two accumulators per token hide the FMA latency. */
AI void float_body(int kind, int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) {
    __m256 a0[QUANT_DOT_TOK], a1[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 w0 = load_w8(kind, w, i), w1 = load_w8(kind, w, i + 8);
        for (int t = 0; t < nt; t++) {
            const float *xr = (const float *)XROW(x, xs, t) + i;
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr), a0[t]);
            a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + 8), a1[t]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        __m256 w0 = load_w8(kind, w, i);
        for (int t = 0; t < nt; t++)
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps((const float *)XROW(x, xs, t) + i), a0[t]);
    }
    for (int t = 0; t < nt; t++) {
        float s = hsum_ps(_mm256_add_ps(a0[t], a1[t]));
        for (int64_t j = i; j < n; j++) s += load_w1(kind, w, j) * ((const float *)XROW(x, xs, t))[j];
        out[t] = s;
    }
}

static void axpy(float *y, float a, const float *x, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* ---- 32-weight types: block_q8_a activations ------------------------------------------------ */

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

/* Per block: unsigned codes q (byte j = weight j), the weight scale d and the coefficient c of
 * the activation sum s (the offset, -8d / -16d, or the min m). Q8_0 codes are signed: their
 * magnitudes go in q and their signs onto the activations (sign_epi8), so the product is the
 * same u8 x s8 one. */
static const size_t b32_bsize[] = {sizeof(block_q4_0), sizeof(block_q4_1), sizeof(block_q5_0), sizeof(block_q5_1),
                                   sizeof(block_q8_0)};

/* One block's unsigned codes q, scale *d and sum coefficient *c; for Q8_0 also the signed
 * weights (*wsgn) whose signs go onto the activations. */
AI __m256i b32_block(int kind, const uint8_t *wb, float *d, float *c, __m256i *wsgn) {
    if (kind == K_Q8_0) {
        const block_q8_0 *b = (const block_q8_0 *)wb;
        *wsgn = _mm256_loadu_si256((const __m256i *)b->qs);
        *d = f16(b->d);
        *c = 0.0f;
        return _mm256_sign_epi8(*wsgn, *wsgn);
    }
    const uint8_t *qs;
    uint32_t qh = 0;
    switch (kind) {
    case K_Q4_0: { const block_q4_0 *b = (const block_q4_0 *)wb; qs = b->qs; *d = f16(b->d); *c = -8.0f * *d; break; }
    case K_Q4_1: { const block_q4_1 *b = (const block_q4_1 *)wb; qs = b->qs; *d = f16(b->d); *c = f16(b->m); break; }
    case K_Q5_0: { const block_q5_0 *b = (const block_q5_0 *)wb; qs = b->qs; *d = f16(b->d); *c = -16.0f * *d; memcpy(&qh, b->qh, 4); break; }
    default: { const block_q5_1 *b = (const block_q5_1 *)wb; qs = b->qs; *d = f16(b->d); *c = f16(b->m); memcpy(&qh, b->qh, 4); break; }
    }
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(15));
    if (kind == K_Q5_0 || kind == K_Q5_1) q = _mm256_or_si256(q, _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(16)));
    return q;
}

AI void b32_body(int kind, int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) {
    __m256 acc[QUANT_DOT_TOK];
    float corr[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps(), corr[t] = 0.0f;
    const uint8_t *wb = w;
    for (int64_t i = 0; i < n / 32; i++, wb += b32_bsize[kind]) {
        prefetch_ahead(wb, b32_bsize[kind]);
        __m256i wsgn = _mm256_setzero_si256();
        float d, c;
        __m256i q = b32_block(kind, wb, &d, &c, &wsgn);
        for (int t = 0; t < nt; t++) {
            const block_q8_a *a = (const block_q8_a *)XROW(x, xs, t) + i;
            __m256i xv = _mm256_loadu_si256((const __m256i *)a->qs);
            if (kind == K_Q8_0) xv = _mm256_sign_epi8(xv, wsgn);
            __m256i p = SIMD_DOT_U8S8(q, xv);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * a->d), acc[t]);
            if (kind != K_Q8_0) corr[t] += c * a->s;
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]) + corr[t];
}

#if SIMD_ROW_512
/* Two blocks a step in one 512-bit product, the float work (convert, scale, FMA) done once for
 * both: 2-4 tokens (batched decode, short prompts) run 1.3x faster than with b32_body; one token
 * runs the same (~17 GB/s a Zen 5 core, bound elsewhere). An odd last block goes through
 * b32_body. */
AI void b32_body2(int kind, int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) {
    const size_t bs = b32_bsize[kind];
    __m512 acc[QUANT_DOT_TOK];
    float corr[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps(), corr[t] = 0.0f;
    const uint8_t *wb = w;
    int64_t nb = n / 32, i = 0;
    for (; i + 2 <= nb; i += 2, wb += 2 * bs) {
        prefetch_ahead(wb, 2 * bs);
        float d0, c0, d1, c1;
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
        __m256i q0 = b32_block(kind, wb, &d0, &c0, &s0), q1 = b32_block(kind, wb + bs, &d1, &c1, &s1);
        __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        __mmask64 neg = 0;
        if (kind == K_Q8_0) neg = _mm512_movepi8_mask(_mm512_inserti64x4(_mm512_castsi256_si512(s0), s1, 1));
        for (int t = 0; t < nt; t++) {
            const block_q8_a *a = (const block_q8_a *)XROW(x, xs, t) + i;
            __m512i xv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a[0].qs)),
                                            _mm256_loadu_si256((const __m256i *)a[1].qs), 1);
            if (kind == K_Q8_0) xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
            __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xv);
            __m512d s = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(d0 * a[0].d))),
                                           _mm256_castps_pd(_mm256_set1_ps(d1 * a[1].d)), 1);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_castpd_ps(s), acc[t]);
            if (kind != K_Q8_0) corr[t] += c0 * a[0].s + c1 * a[1].s;
        }
    }
    for (int t = 0; t < nt; t++) out[t] = _mm512_reduce_add_ps(acc[t]) + corr[t];
    if (i < nb) {
        float tail[QUANT_DOT_TOK];
        b32_body(kind, 32, wb, XROW(x, 0, 0) + (size_t)i * sizeof(block_q8_a), xs, nt, tail);
        for (int t = 0; t < nt; t++) out[t] += tail[t];
    }
}
#define B32_BODY b32_body2
#else
#define B32_BODY b32_body
#endif

/* ---- K types: block_q8_K activations -------------------------------------------------------- */

/* Each K kernel sums sc * (u8 code x s8 activation) in int32 lanes per block (sumi), then adds
 * d * dx * sumi to a float accumulator; the mins and code offsets come from the activation's
 * sums of 16 (bsums), as an exact integer per block (corr). */
#define K_LOOP_BEGIN(btype, bsize)                                                 \
    const uint8_t *wbytes = w;                                                     \
    __m256 acc[QUANT_DOT_TOK];                                                     \
    float corr[QUANT_DOT_TOK];                                                     \
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps(), corr[t] = 0.0f;     \
    for (int64_t i = 0; i < n / QK_K; i++) {                                       \
        const btype *b = (const btype *)(wbytes + (size_t)i * (bsize));            \
        prefetch_ahead(b, (bsize));                                                \
        __m256i sumi[QUANT_DOT_TOK];                                               \
        for (int t = 0; t < nt; t++) sumi[t] = _mm256_setzero_si256();

#define K_LOOP_END(dw, bias_expr)                                                  \
        for (int t = 0; t < nt; t++) {                                             \
            const block_q8_K *a = (const block_q8_K *)XROW(x, xs, t) + i;          \
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_set1_ps((dw) * a->d), acc[t]); \
            corr[t] += a->d * (bias_expr);                                         \
        }                                                                          \
    }                                                                              \
    for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]) + corr[t];

#define XQ(t, off) _mm256_loadu_si256((const __m256i *)(((const block_q8_K *)XROW(x, xs, t) + i)->qs + (off)))
#define BSUMS(t) (((const block_q8_K *)XROW(x, xs, t) + i)->bsums)

/* sum over 16 sub-blocks of coef[s] * bsums[s]; coefficients in a register (built from bytes
 * with vector ops: a vector load of scalars just stored would stall on store forwarding) */
AI int bsum_dot16(const int16_t *bs, __m256i coef) {
    return hsum_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bs), coef));
}

/* sum over 8 sub-blocks of 32 of m[s] * (bsums[2s] + bsums[2s + 1]), m as 8 int16 */
AI int bsum_dot8(const int16_t *bs, __m128i m) {
    __m256i v = _mm256_loadu_si256((const __m256i *)bs);
    __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    __m128i p = _mm_madd_epi16(pairs, m);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4e));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xb1));
    return _mm_cvtsi128_si32(p);
}

AI void q2_K_body(int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) {
    const __m256i m3 = _mm256_set1_epi8(3);
    K_LOOP_BEGIN(block_q2_K, sizeof(block_q2_K))
    __m128i sc8 = _mm_loadu_si128((const __m128i *)b->scales);
    __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(15)));
    for (int h = 0; h < 2; h++) {
        __m256i qv = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        for (int f = 0; f < 4; f++, qv = _mm256_srli_epi16(qv, 2)) {
            int s = 8 * h + 2 * f;
            __m256i q = _mm256_and_si256(qv, m3);
            __m256i sc = scale_pair(b->scales[s] & 15, b->scales[s + 1] & 15);
            for (int t = 0; t < nt; t++)
                sumi[t] = SIMD_MADD16_ACC(sumi[t], _mm256_maddubs_epi16(q, XQ(t, 128 * h + 32 * f)), sc);
        }
    }
    float dw = f16(b->d), dmin = f16(b->dmin);
    K_LOOP_END(dw, -dmin * (float)bsum_dot16(BSUMS(t), mins))
}

AI void q3_K_body(int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) {
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    K_LOOP_BEGIN(block_q3_K, sizeof(block_q3_K))
    int sc[16];
    for (int s = 0; s < 16; s++) sc[s] = quant_k3_scale(b->scales, s);
    __m256i scales = _mm256_setr_epi16((short)sc[0], (short)sc[1], (short)sc[2], (short)sc[3], (short)sc[4],
                                       (short)sc[5], (short)sc[6], (short)sc[7], (short)sc[8], (short)sc[9],
                                       (short)sc[10], (short)sc[11], (short)sc[12], (short)sc[13], (short)sc[14],
                                       (short)sc[15]);
    __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
    for (int h = 0; h < 2; h++) {
        __m256i qv = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        for (int f = 0; f < 4; f++, qv = _mm256_srli_epi16(qv, 2), hm = _mm256_srli_epi16(hm, 1)) {
            int s = 8 * h + 2 * f;
            /* code + 4 in 0..7: the high bit set means +4 */
            __m256i q = _mm256_or_si256(_mm256_and_si256(qv, m3), _mm256_slli_epi16(_mm256_and_si256(hm, one), 2));
            __m256i scv = scale_pair(sc[s], sc[s + 1]);
            for (int t = 0; t < nt; t++)
                sumi[t] = SIMD_MADD16_ACC(sumi[t], _mm256_maddubs_epi16(q, XQ(t, 128 * h + 32 * f)), scv);
        }
    }
    float dw = f16(b->d);
    K_LOOP_END(dw, -4.0f * dw * (float)bsum_dot16(BSUMS(t), scales))
}

/* A Q4_K / Q5_K block's 8 scales and 8 mins (6 bits each, packed in 12 bytes: layout in blocks.h)
 * by 32-bit masks and shifts: the scales as bytes of *scs, the mins widened to 16 bits. */
AI void qk_scales_mins(const uint8_t *scales, uint64_t *scs, __m128i *mins) {
    uint32_t u[4];
    memcpy(u, scales, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    uint32_t m_lo = u[1] & 0x3f3f3f3fu;
    u[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    u[2] = m_lo;
    u[0] &= 0x3f3f3f3fu;
    *scs = (uint64_t)u[0] | (uint64_t)u[1] << 32;
    *mins = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)u[3], (int)u[2]));
}

/* Q4_K (hbits 0) and Q5_K (hbits 1): 8 sub-blocks of 32, one scale per 32-byte run. */
AI void q45_K_body(int hbits, int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) {
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    K_LOOP_BEGIN(block_q4_K, hbits ? sizeof(block_q5_K) : sizeof(block_q4_K))
    const block_q5_K *b5 = (const block_q5_K *)b;
    const uint8_t *qs = hbits ? b5->qs : b->qs;
    uint64_t scs;
    __m128i mins;
    qk_scales_mins(b->scales, &scs, &mins);
    __m256i hv = hbits ? _mm256_loadu_si256((const __m256i *)b5->qh) : _mm256_setzero_si256();
    for (int g = 0; g < 4; g++) {
        __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * g));
        __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        if (hbits) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hv, one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 1), one), 4));
            hv = _mm256_srli_epi16(hv, 2);
        }
        __m256i slo = _mm256_set1_epi16((short)((scs >> (16 * g)) & 0xff));
        __m256i shi = _mm256_set1_epi16((short)((scs >> (16 * g + 8)) & 0xff));
        for (int t = 0; t < nt; t++) {
            sumi[t] = SIMD_MADD16_ACC(sumi[t], _mm256_maddubs_epi16(lo, XQ(t, 64 * g)), slo);
            sumi[t] = SIMD_MADD16_ACC(sumi[t], _mm256_maddubs_epi16(hi, XQ(t, 64 * g + 32)), shi);
        }
    }
    float dw = f16(b->d), dmin = f16(b->dmin);
    K_LOOP_END(dw, -dmin * (float)bsum_dot8(BSUMS(t), mins))
}

/* The body reads d, dmin and scales of both through block_q4_K: Q5_K starts with the same. */
QUANT_STATIC_ASSERT(__builtin_offsetof(block_q4_K, scales) == __builtin_offsetof(block_q5_K, scales),
                    "Q4_K and Q5_K share their header");

AI void q6_K_body(int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) {
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    K_LOOP_BEGIN(block_q6_K, sizeof(block_q6_K))
    const int8_t *sc = b->scales;
    __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    for (int h = 0; h < 2; h++) {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        __m256i hv = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        __m256i q[4];
        q[0] = _mm256_and_si256(l0, m4);
        q[1] = _mm256_and_si256(l1, m4);
        q[2] = _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4);
        q[3] = _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4);
        for (int k = 0; k < 4; k++, hv = _mm256_srli_epi16(hv, 2)) {
            q[k] = _mm256_or_si256(q[k], _mm256_slli_epi16(_mm256_and_si256(hv, m3), 4));
            __m256i scv = scale_pair(sc[8 * h + 2 * k], sc[8 * h + 2 * k + 1]);
            for (int t = 0; t < nt; t++)
                sumi[t] = SIMD_MADD16_ACC(sumi[t], _mm256_maddubs_epi16(q[k], XQ(t, 128 * h + 32 * k)), scv);
        }
    }
    float dw = f16(b->d);
    K_LOOP_END(dw, -32.0f * dw * (float)bsum_dot16(BSUMS(t), scales))
}

#if SIMD_K_512
/* Q4_K/Q5_K and Q6_K a 64-weight step in one 512-bit register: a step's two 32-code runs
 * (unpacked side by side, a scale per 256-bit half or per 128-bit quarter) meet 64 contiguous
 * activation bytes, so each token costs one load, one maddubs and one dpwssd per 64 weights
 * instead of two of each. Decode sends every token as two activation rows (the pair), so the
 * per-token work is most of a row's: decode ran 7% faster on mini q4_k_m (from L3) and 3% on
 * 1b q4_k_m (from memory) on a Sapphire Rapids class VM, 2 threads. */
AI __m512i halves16(int lo, int hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)lo)), _mm256_set1_epi16((short)hi), 1);
}

AI void q45_K_body512(int hbits, int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) {
    const __m512i m4 = _mm512_set1_epi8(15), one = _mm512_set1_epi8(1);
    const __m512i sh4 = halves16(0, 4), sh1 = halves16(0, 1);
    const size_t bsize = hbits ? sizeof(block_q5_K) : sizeof(block_q4_K);
    __m512 acc[QUANT_DOT_TOK];
    float corr[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps(), corr[t] = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const block_q4_K *b = (const block_q4_K *)((const uint8_t *)w + (size_t)i * bsize);
        const block_q5_K *b5 = (const block_q5_K *)b;
        prefetch_ahead(b, bsize);
        const uint8_t *qs = hbits ? b5->qs : b->qs;
        uint64_t scs;
        __m128i mins;
        qk_scales_mins(b->scales, &scs, &mins);
        /* fifth bits: the low half reads bit 2g of each byte, the high half bit 2g + 1 */
        __m512i hv = _mm512_setzero_si512();
        if (hbits) hv = _mm512_srlv_epi16(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b5->qh)), sh1);
        __m512i sumi[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) sumi[t] = _mm512_setzero_si512();
        for (int g = 0; g < 4; g++) {
            __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * g)));
            __m512i q = _mm512_and_si512(_mm512_srlv_epi16(raw, sh4), m4);
            if (hbits) {
                q = _mm512_or_si512(q, _mm512_slli_epi16(_mm512_and_si512(hv, one), 4));
                hv = _mm512_srli_epi16(hv, 2);
            }
            __m512i sc = halves16((int)((scs >> (16 * g)) & 0xff), (int)((scs >> (16 * g + 8)) & 0xff));
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = ((const block_q8_K *)XROW(x, xs, t) + i)->qs + 64 * g;
                sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(q, _mm512_loadu_si512((const void *)xq)), sc);
            }
        }
        float dw = f16(b->d), dmin = f16(b->dmin);
        for (int t = 0; t < nt; t++) {
            const block_q8_K *a = (const block_q8_K *)XROW(x, xs, t) + i;
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[t]), _mm512_set1_ps(dw * a->d), acc[t]);
            corr[t] += a->d * (-dmin * (float)bsum_dot8(a->bsums, mins));
        }
    }
    for (int t = 0; t < nt; t++) out[t] = _mm512_reduce_add_ps(acc[t]);
    for (int t = 0; t < nt; t++) out[t] += corr[t];
}

AI void q6_K_body512(int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) {
    const __m512i m4 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3), sh2 = halves16(0, 2);
    /* 128-bit quarter k of a step's scale vector takes scale k of its 4 (16 weights each) */
    const __m512i idx = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002,
                                         0x0002000200020002, 0x0001000100010001, 0x0001000100010001, 0, 0);
    __m512 acc[QUANT_DOT_TOK];
    float corr[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps(), corr[t] = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const block_q6_K *b = (const block_q6_K *)w + i;
        prefetch_ahead(b, sizeof(block_q6_K));
        __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        __m512i sc16 = _mm512_castsi256_si512(scales);
        __m512i sumi[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) sumi[t] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            /* [codes 0..31 | 32..63] of this half from the low nibbles, [64..95 | 96..127] from the high */
            __m512i l = _mm512_loadu_si512((const void *)(b->ql + 64 * h));
            __m512i hv = _mm512_srlv_epi16(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h))), sh2);
            __m512i qa = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(hv, m3), 4));
            __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hv, 4), m3), 4));
            __m512i sca = _mm512_permutexvar_epi16(_mm512_add_epi16(idx, _mm512_set1_epi16((short)(8 * h))), sc16);
            __m512i scb = _mm512_permutexvar_epi16(_mm512_add_epi16(idx, _mm512_set1_epi16((short)(8 * h + 4))), sc16);
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = ((const block_q8_K *)XROW(x, xs, t) + i)->qs + 128 * h;
                sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(qa, _mm512_loadu_si512((const void *)xq)), sca);
                sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(qb, _mm512_loadu_si512((const void *)(xq + 64))), scb);
            }
        }
        float dw = f16(b->d);
        for (int t = 0; t < nt; t++) {
            const block_q8_K *a = (const block_q8_K *)XROW(x, xs, t) + i;
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[t]), _mm512_set1_ps(dw * a->d), acc[t]);
            corr[t] += a->d * (-32.0f * dw * (float)bsum_dot16(a->bsums, scales));
        }
    }
    for (int t = 0; t < nt; t++) out[t] = _mm512_reduce_add_ps(acc[t]);
    for (int t = 0; t < nt; t++) out[t] += corr[t];
}
#define Q45_K_BODY q45_K_body512
#define Q6_K_BODY q6_K_body512
#else
#define Q45_K_BODY q45_K_body
#define Q6_K_BODY q6_K_body
#endif

/* ---- panels (the prompt case) --------------------------------------------------------------
 * Per sub-block: each 64-byte run of codes holds 4 codes of each of 16 rows, taken as two
 * 256-bit halves; each token's 4 activation bytes are broadcast against them, so one integer
 * product adds 4 terms to each of 8 rows' lanes. After the sub-block, one scale-and-bias step in
 * f32 serves all 16 rows. SIMD_PANEL_T tokens share each code load. (The 512-bit version below,
 * 16 rows a register, and 8 tokens a pass: with the loops unrolled, as fast on Zen 5 as the
 * 256-bit one at 4 tokens for the 32-weight sub-blocks, 10% faster for the 16-weight ones.) */
#define PANEL_MAX_T 8
/* The token and group loops fully unrolled, whatever the file's -O level: rolled (GCC at -O2
 * with more than 2 tokens), the integer sums lived on the stack, a load and store around every
 * product, and 4 tokens a pass ran 30% slower than 2; unrolled, 4 or 8 tokens a pass keep enough
 * independent sums in flight to cover vpdpbusd's latency (Zen 5, one core: Q4_K panels 80 ->
 * 150-157 GMAC/s, about the integer product's peak there). */
#define UNROLL _Pragma("GCC unroll 16")
QUANT_STATIC_ASSERT(QUANT_PANEL_ROWS == 16, "the panel kernels are written for 16 rows");

AI void panel_body(quant_panel_kind k, int64_t n, const void *panel, int nr, const void *x, size_t xs, int nt,
                   float *out, size_t os) {
    const int L = k == QUANT_PANEL_16_Q8K ? 16 : 32;
    const uint8_t *codes = panel;
    const float *scale = quant_panel_scale(panel, n), *bias = scale + (n / L) * 16;
    __m256 acc[2][PANEL_MAX_T];
    UNROLL for (int t = 0; t < nt; t++) acc[0][t] = acc[1][t] = _mm256_setzero_ps();
    for (int64_t s = 0; s < n / L; s++) {
        __m256i isum[2][PANEL_MAX_T];
        const int8_t *xq[PANEL_MAX_T];
        float dx[PANEL_MAX_T], xsum[PANEL_MAX_T];
        UNROLL for (int t = 0; t < nt; t++) {
            isum[0][t] = isum[1][t] = _mm256_setzero_si256();
            xq[t] = quant_panel_act(k, XROW(x, xs, t), s, L, &dx[t], &xsum[t]);
        }
        const uint8_t *cs = codes + (size_t)s * (size_t)L * 16;
        UNROLL for (int g = 0; g < L / 4; g++) {
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(cs + 64 * g));
            __m256i w1 = _mm256_loadu_si256((const __m256i *)(cs + 64 * g + 32));
            UNROLL for (int t = 0; t < nt; t++) {
                int32_t xi;
                memcpy(&xi, xq[t] + 4 * g, 4);
                __m256i xb = _mm256_set1_epi32(xi);
                isum[0][t] = SIMD_DPBUSD_ACC(isum[0][t], w0, xb);
                isum[1][t] = SIMD_DPBUSD_ACC(isum[1][t], w1, xb);
            }
        }
        UNROLL for (int h = 0; h < 2; h++) {
            __m256 sc = _mm256_loadu_ps(scale + 16 * s + 8 * h), bi = _mm256_loadu_ps(bias + 16 * s + 8 * h);
            UNROLL for (int t = 0; t < nt; t++) {
                acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h][t]), _mm256_mul_ps(sc, _mm256_set1_ps(dx[t])),
                                            acc[h][t]);
                acc[h][t] = _mm256_fmadd_ps(bi, _mm256_set1_ps(xsum[t]), acc[h][t]);
            }
        }
    }
    UNROLL for (int t = 0; t < nt; t++) {
        float tmp[16];
        _mm256_storeu_ps(tmp, acc[0][t]);
        _mm256_storeu_ps(tmp + 8, acc[1][t]);
        memcpy(out + (size_t)t * os, tmp, (size_t)nr * sizeof(float));
    }
}

#if SIMD_PANEL_512
/* The same with all 16 rows in one 512-bit register: one integer product per token and 4 codes
 * instead of two, and one scale-and-bias step. pair: the nt activation rows are nt / 2 tokens'
 * pairs (hi, lo; quant_act_quant_row_pair), each pair summed into one accumulator and written
 * as one output row: one bias step and one store a token instead of two, and no pass afterwards
 * adding the two rows' products. */
AI void panel_body512_p(int pair, quant_panel_kind k, int64_t n, const void *panel, int nr, const void *x, size_t xs,
                        int nt, float *out, size_t os) {
    const int L = k == QUANT_PANEL_16_Q8K ? 16 : 32;
    const uint8_t *codes = panel;
    const float *scale = quant_panel_scale(panel, n), *bias = scale + (n / L) * 16;
    __m512 acc[PANEL_MAX_T], blk[PANEL_MAX_T];
    UNROLL for (int t = 0; t < nt; t++) acc[t] = blk[t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < n / L; s++) {
        __m512i isum[PANEL_MAX_T];
        const int8_t *xq[PANEL_MAX_T];
        float dx[PANEL_MAX_T], xsum[PANEL_MAX_T];
        UNROLL for (int t = 0; t < nt; t++) {
            isum[t] = _mm512_setzero_si512();
            xq[t] = quant_panel_act(k, XROW(x, xs, t), s, L, &dx[t], &xsum[t]);
        }
        const uint8_t *cs = codes + (size_t)s * (size_t)L * 16;
        UNROLL for (int g = 0; g < L / 4; g++) {
            __m512i w = _mm512_loadu_si512((const void *)(cs + 64 * g));
            UNROLL for (int t = 0; t < nt; t++) {
                int32_t xi;
                memcpy(&xi, xq[t] + 4 * g, 4);
                isum[t] = _mm512_dpbusd_epi32(isum[t], w, _mm512_set1_epi32(xi));
            }
        }
        __m512 sc = _mm512_loadu_ps(scale + 16 * s), bi = _mm512_loadu_ps(bias + 16 * s);
        /* a pair's two rows go to accumulator t / 2 (pair) or each to its own */
#define PA(t) acc[pair ? (t) / 2 : (t)]
        if (k == QUANT_PANEL_32_Q8) {
            UNROLL for (int t = 0; t < nt; t++)
                PA(t) = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(sc, _mm512_set1_ps(dx[t])), PA(t));
            UNROLL for (int t = 0; t < nt; t += 1 + pair)
                PA(t) = _mm512_fmadd_ps(bi, _mm512_set1_ps(pair ? xsum[t] + xsum[t + 1] : xsum[t]), PA(t));
            continue;
        }
        /* Q8_K activations: dx is one per 256, so the scaled sums of a super-block gather in
         * blk and take dx once at its end (a multiply less per sub-block and token). */
        UNROLL for (int t = 0; t < nt; t++) blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), sc, blk[t]);
        UNROLL for (int t = 0; t < nt; t += 1 + pair)
            PA(t) = _mm512_fmadd_ps(bi, _mm512_set1_ps(pair ? xsum[t] + xsum[t + 1] : xsum[t]), PA(t));
        if ((s + 1) % (QK_K / L) == 0)
            UNROLL for (int t = 0; t < nt; t++) {
                PA(t) = _mm512_fmadd_ps(blk[t], _mm512_set1_ps(dx[t]), PA(t));
                blk[t] = _mm512_setzero_ps();
            }
#undef PA
    }
    for (int t = 0; t < nt / (1 + pair); t++) { /* once a panel: no unroll (GCC -O1 rejects the hint here) */
        float tmp[16];
        _mm512_storeu_ps(tmp, acc[t]);
        memcpy(out + (size_t)t * os, tmp, (size_t)nr * sizeof(float));
    }
}
#define panel_body512(...) panel_body512_p(0, __VA_ARGS__)
#define PANEL_BODY panel_body512
#else
#define PANEL_BODY panel_body
#endif

#define PANEL_KERN(kind, name)                                                                         \
    static void name(int64_t n, const void *p, int nr, const void *x, size_t xs, int64_t n_tok, float *o, \
                     size_t os) {                                                                      \
        for (int64_t t0 = 0; t0 < n_tok; t0 += SIMD_PANEL_T) {                                         \
            int64_t nt = n_tok - t0 < SIMD_PANEL_T ? n_tok - t0 : SIMD_PANEL_T;                        \
            const void *xt = XROW(x, xs, t0);                                                          \
            float *ot = o + (size_t)t0 * os;                                                           \
            switch (nt) {                                                                              \
            case 1: PANEL_BODY(kind, n, p, nr, xt, xs, 1, ot, os); break;                              \
            case 2: PANEL_BODY(kind, n, p, nr, xt, xs, 2, ot, os); break;                              \
            case 3: PANEL_BODY(kind, n, p, nr, xt, xs, 3, ot, os); break;                              \
            case 4: PANEL_BODY(kind, n, p, nr, xt, xs, 4, ot, os); break;                              \
            case 5: PANEL_BODY(kind, n, p, nr, xt, xs, 5 < SIMD_PANEL_T ? 5 : SIMD_PANEL_T, ot, os); break; \
            case 6: PANEL_BODY(kind, n, p, nr, xt, xs, 6 < SIMD_PANEL_T ? 6 : SIMD_PANEL_T, ot, os); break; \
            case 7: PANEL_BODY(kind, n, p, nr, xt, xs, 7 < SIMD_PANEL_T ? 7 : SIMD_PANEL_T, ot, os); break; \
            default: PANEL_BODY(kind, n, p, nr, xt, xs, SIMD_PANEL_T, ot, os); break;                  \
            }                                                                                          \
        }                                                                                              \
    }
PANEL_KERN(QUANT_PANEL_32_Q8, panel_32_q8)
PANEL_KERN(QUANT_PANEL_32_Q8K, panel_32_q8k)
PANEL_KERN(QUANT_PANEL_16_Q8K, panel_16_q8k)

#if SIMD_PANEL_512
/* Pairs (quant/dot.h: quant_panel_dot_pair): n_tok tokens, 2 * n_tok activation rows. */
#define PANEL_PAIR_KERN(kind, name)                                                                    \
    static void name(int64_t n, const void *p, int nr, const void *x, size_t xs, int64_t n_tok, float *o, \
                     size_t os) {                                                                      \
        enum { TP = SIMD_PANEL_T / 2 > 0 ? SIMD_PANEL_T / 2 : 1 };                                     \
        for (int64_t t0 = 0; t0 < n_tok; t0 += TP) {                                                   \
            int64_t nt = n_tok - t0 < TP ? n_tok - t0 : TP;                                            \
            const void *xt = XROW(x, xs, 2 * t0);                                                      \
            float *ot = o + (size_t)t0 * os;                                                           \
            switch (nt) {                                                                              \
            case 1: panel_body512_p(1, kind, n, p, nr, xt, xs, 2, ot, os); break;                      \
            case 2: panel_body512_p(1, kind, n, p, nr, xt, xs, 2 * (2 < TP ? 2 : TP), ot, os); break;  \
            case 3: panel_body512_p(1, kind, n, p, nr, xt, xs, 2 * (3 < TP ? 3 : TP), ot, os); break;  \
            default: panel_body512_p(1, kind, n, p, nr, xt, xs, 2 * TP, ot, os); break;                \
            }                                                                                          \
        }                                                                                              \
    }
PANEL_PAIR_KERN(QUANT_PANEL_32_Q8, panel_pair_32_q8)
PANEL_PAIR_KERN(QUANT_PANEL_32_Q8K, panel_pair_32_q8k)
PANEL_PAIR_KERN(QUANT_PANEL_16_Q8K, panel_pair_16_q8k)
#define PANEL_PAIR_TABLE {panel_pair_32_q8, panel_pair_32_q8k, panel_pair_16_q8k}
#else
#define PANEL_PAIR_TABLE {0}
#endif

#define MGI_QUANT_DOT_SIMD_H_BODY
#include "dot_simd_ilv.h"
#if SIMD_PANEL_512 && SIMD_PANEL_T >= 8
#include "dot_simd_panelx.h"
#else
#define PANEL_X_TABLE {0}
#endif
#include "dot_simd_pack.h"
#undef MGI_QUANT_DOT_SIMD_H_BODY

/* ---- specialisations and the table ---------------------------------------------------------- */

#define SPECIALISE(name, call)                                                                       \
    static void kern_##name(int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) { \
        switch (nt) {                                                                                \
        case 1: call(n, w, x, xs, 1, out); break;                                                    \
        case 2: call(n, w, x, xs, 2, out); break;                                                    \
        case 3: call(n, w, x, xs, 3, out); break;                                                    \
        default: call(n, w, x, xs, 4, out); break;                                                   \
        }                                                                                            \
    }

#define F32_CALL(...) float_body(0, __VA_ARGS__)
#define F16_CALL(...) float_body(1, __VA_ARGS__)
#define BF16_CALL(...) float_body(2, __VA_ARGS__)
#define Q4_0_CALL(...) B32_BODY(K_Q4_0, __VA_ARGS__)
#define Q4_1_CALL(...) B32_BODY(K_Q4_1, __VA_ARGS__)
#define Q5_0_CALL(...) B32_BODY(K_Q5_0, __VA_ARGS__)
#define Q5_1_CALL(...) B32_BODY(K_Q5_1, __VA_ARGS__)
#define Q8_0_CALL(...) B32_BODY(K_Q8_0, __VA_ARGS__)
#define Q4_K_CALL(...) Q45_K_BODY(0, __VA_ARGS__)
#define Q5_K_CALL(...) Q45_K_BODY(1, __VA_ARGS__)

SPECIALISE(f32, F32_CALL)
SPECIALISE(f16, F16_CALL)
SPECIALISE(bf16, BF16_CALL)
SPECIALISE(q4_0, Q4_0_CALL)
SPECIALISE(q4_1, Q4_1_CALL)
SPECIALISE(q5_0, Q5_0_CALL)
SPECIALISE(q5_1, Q5_1_CALL)
SPECIALISE(q8_0, Q8_0_CALL)
SPECIALISE(q2_K, q2_K_body)
SPECIALISE(q3_K, q3_K_body)
SPECIALISE(q4_K, Q4_K_CALL)
SPECIALISE(q5_K, Q5_K_CALL)
SPECIALISE(q6_K, Q6_K_BODY)

const quant_dot_table SIMD_TABLE = {
    .dot = {
        [QUANT_F32] = kern_f32, [QUANT_F16] = kern_f16, [QUANT_BF16] = kern_bf16,
        [QUANT_Q4_0] = kern_q4_0, [QUANT_Q4_1] = kern_q4_1, [QUANT_Q5_0] = kern_q5_0,
        [QUANT_Q5_1] = kern_q5_1, [QUANT_Q8_0] = kern_q8_0, [QUANT_Q2_K] = kern_q2_K,
        [QUANT_Q3_K] = kern_q3_K, [QUANT_Q4_K] = kern_q4_K, [QUANT_Q5_K] = kern_q5_K,
        [QUANT_Q6_K] = kern_q6_K,
    },
    .act = {[QUANT_ACT_Q8] = act_q8, [QUANT_ACT_Q8_K] = act_q8_K},
    .panel = {panel_32_q8, panel_32_q8k, panel_16_q8k},
    .ilv = ILV_TABLE,
    .ilv_pair = ILV_PAIR_TABLE,
    .panel_pair = PANEL_PAIR_TABLE,
    .panel_pair_x = PANEL_X_TABLE,
    .pack_ilv = pack_ilv,
    .panel_wide = SIMD_PANEL_WIDE,
    .axpy = axpy,
};
