/* dot_simd.h's interleaved-group kernels (the decode case on weights repacked at load; layouts
 * in dot_ilv.c), split out of it for size: included by dot_simd.h only, after its panels (it uses
 * their macros), so every ISA path that builds dot_simd.h builds these under its own flags. */
#ifndef MGI_QUANT_DOT_SIMD_H_BODY
#error "dot_simd_ilv.h is part of dot_simd.h"
#endif

#if SIMD_PANEL_512
/* ---- interleaved groups (the decode case; layouts in dot_ilv.c) -----------------------------
 * Each 64-byte load holds 4 codes of each of 16 rows in each nibble: one vpdpbusd per nibble
 * and activation row, against the row's 4 activation bytes broadcast, adds 4 terms to each of
 * 16 rows' int32 lanes; the block's float work (convert, scale, bias) then serves 16 rows at
 * once where the row kernels did it per row. Activation rows nt <= QUANT_DOT_TOK. */
/* The whole block's lines requested at its start, ahead of the dependent integer chains that
 * would otherwise issue them one by one. Ahead of the block instead (one to three blocks, 2 KiB
 * as the row kernels do) was slower: one Zen 5 core streaming 75 MB, Q4_0 / Q4_K / Q6_K 28 / 24 /
 * 23 GB/s this way, 21 / 15 / 13 three blocks ahead, 30 / 19 / 7 with no software prefetch. */
AI void ilv_prefetch(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}
/* pair: the nt activation rows are nt / 2 tokens' pairs, each pair summed in one accumulator
 * (PA) and written as one output row. */
#define PA(t) acc[pair ? (t) / 2 : (t)]
#define ILV_GROUP_OUT(acc)                                                       \
    for (int t = 0; t < nt / (1 + pair); t++) {                                  \
        float tmp[16];                                                           \
        _mm512_storeu_ps(tmp, (acc)[t]);                                         \
        memcpy(out + (size_t)t * os, tmp, (size_t)nr * sizeof(float));           \
    }

AI __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* c + 16 in the bytes where h has bit b set: a code's fifth bit (the Q5 types). A test into a
 * mask and a masked add, with no shift whose count depends on the loop (a variable shift and the
 * branch choosing its direction made Q5_K's kernel 1.6x Q4_K's time a weight from L2). */
AI __m512i ilv_fifth(__m512i c, __m512i h, int b) {
    return _mm512_mask_add_epi8(c, _mm512_test_epi8_mask(h, _mm512_set1_epi8((char)(1 << b))), c, _mm512_set1_epi8(16));
}

/* Q4_0 (has_m 0: weight = d * (q - 8)), Q4_1 (weight = d * q + m) and, with five, Q5_0 (d * (q -
 * 16)) and Q5_1 (d * q + m), their fifth bits from the group's qh run. */
AI void ilv_q4_body(int pair, int five, int has_m, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt,
                    float *out, size_t os) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const size_t dof = 256 + 64 * five, bs = dof + 32 + 32 * has_m;
    __m512 acc[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *p = g;
    for (int64_t i = 0; i < n / 32; i++, p += bs) {
        ilv_prefetch(p, bs);
        __m512i s0[QUANT_DOT_TOK], s1[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) s0[t] = s1[t] = _mm512_setzero_si512();
        const __m512i hb = five ? _mm512_loadu_si512((const void *)p) : _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            __m512i v = _mm512_loadu_si512((const void *)(p + 64 * five + 64 * j));
            __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            if (five) {
                lo = ilv_fifth(lo, hb, 2 * j);
                hi = ilv_fifth(hi, hb, 2 * j + 1);
            }
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = ((const block_q8_a *)XROW(x, xs, t) + i)->qs;
                s0[t] = _mm512_dpbusd_epi32(s0[t], lo, bcast4(xq + 4 * j));
                s1[t] = _mm512_dpbusd_epi32(s1[t], hi, bcast4(xq + 16 + 4 * j));
            }
        }
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + dof)));
        __m512 m = has_m ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + dof + 32))) : d;
        const float off = five ? -16.0f : -8.0f;
        for (int t = 0; t < nt; t++) {
            const block_q8_a *a = (const block_q8_a *)XROW(x, xs, t) + i;
            __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(s0[t], s1[t]));
            if (has_m) {
                PA(t) = _mm512_fmadd_ps(_mm512_mul_ps(f, _mm512_set1_ps(a->d)), d, PA(t));
                PA(t) = _mm512_fmadd_ps(m, _mm512_set1_ps(a->s), PA(t));
            } else {
                PA(t) = _mm512_fmadd_ps(_mm512_fmadd_ps(f, _mm512_set1_ps(a->d), _mm512_set1_ps(off * a->s)), d, PA(t));
            }
        }
    }
    ILV_GROUP_OUT(acc)
}

/* Q8_0: weight = d * (u - 128), u the stored code + 128. */
AI void ilv_q8_0_body(int pair, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt, float *out,
                      size_t os) {
    __m512 acc[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *p = g;
    for (int64_t i = 0; i < n / 32; i++, p += 544) {
        ilv_prefetch(p, 544);
        __m512i s0[QUANT_DOT_TOK], s1[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) s0[t] = s1[t] = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            __m512i u0 = _mm512_loadu_si512((const void *)(p + 64 * j));
            __m512i u1 = _mm512_loadu_si512((const void *)(p + 64 * (j + 4)));
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = ((const block_q8_a *)XROW(x, xs, t) + i)->qs;
                s0[t] = _mm512_dpbusd_epi32(s0[t], u0, bcast4(xq + 4 * j));
                s1[t] = _mm512_dpbusd_epi32(s1[t], u1, bcast4(xq + 16 + 4 * j));
            }
        }
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 512)));
        for (int t = 0; t < nt; t++) {
            const block_q8_a *a = (const block_q8_a *)XROW(x, xs, t) + i;
            __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(s0[t], s1[t]));
            PA(t) = _mm512_fmadd_ps(_mm512_fmadd_ps(f, _mm512_set1_ps(a->d), _mm512_set1_ps(-128.0f * a->s)), d, PA(t));
        }
    }
    ILV_GROUP_OUT(acc)
}

/* 16 bytes at p (one per row) as f32, times v. */
AI __m512 ilv_u8_ps(const uint8_t *p, __m512 v) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p))), v);
}
AI __m512 ilv_s8_ps(const uint8_t *p, __m512 v) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))), v);
}

/* Q4_K: weight = d * sc * q - dmin * mn per sub-block of 32; the mins meet the activation sums.
 * five: Q5_K, the codes' fifth bits from the group's qh runs. */
AI void ilv_q45_K_body(int pair, int five, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt, float *out, size_t os) {
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512 acc[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const size_t bs = 2368 + 512 * five, so = 2048 + 512 * five; /* the block; its scales */
    const uint8_t *p = g;
    for (int64_t i = 0; i < n / QK_K; i++, p += bs) {
        ilv_prefetch(p, bs);
        __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + so + 256)));
        __m512 blk[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) blk[t] = _mm512_setzero_ps();
        for (int q = 0; q < 4; q++) {
            __m512i s0[QUANT_DOT_TOK], s1[QUANT_DOT_TOK];
            for (int t = 0; t < nt; t++) s0[t] = s1[t] = _mm512_setzero_si512();
            for (int m = 0; m < 8; m++) {
                __m512i v = _mm512_loadu_si512((const void *)(p + 512 * five + 512 * q + 64 * m));
                __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                if (five) {
                    __m512i hb = _mm512_loadu_si512((const void *)(p + 64 * m));
                    lo = ilv_fifth(lo, hb, 2 * q);
                    hi = ilv_fifth(hi, hb, 2 * q + 1);
                }
                for (int t = 0; t < nt; t++) {
                    const int8_t *xq = ((const block_q8_K *)XROW(x, xs, t) + i)->qs + 64 * q;
                    s0[t] = _mm512_dpbusd_epi32(s0[t], lo, bcast4(xq + 4 * m));
                    s1[t] = _mm512_dpbusd_epi32(s1[t], hi, bcast4(xq + 32 + 4 * m));
                }
            }
            __m512 sc0 = ilv_u8_ps(p + so + 16 * (2 * q), dv), sc1 = ilv_u8_ps(p + so + 16 * (2 * q + 1), dv);
            for (int t = 0; t < nt; t++) {
                blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0[t]), sc0, blk[t]);
                blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1[t]), sc1, blk[t]);
            }
        }
        __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + so + 288)));
        for (int j = 0; j < 8; j++) {
            __m512 mn = ilv_u8_ps(p + so + 128 + 16 * j, dmin);
            for (int t = 0; t < nt; t++) {
                const int16_t *bs = ((const block_q8_K *)XROW(x, xs, t) + i)->bsums;
                blk[t] = _mm512_fnmadd_ps(mn, _mm512_set1_ps((float)(bs[2 * j] + bs[2 * j + 1])), blk[t]);
            }
        }
        for (int t = 0; t < nt; t++)
            PA(t) = _mm512_fmadd_ps(blk[t], _mm512_set1_ps(((const block_q8_K *)XROW(x, xs, t) + i)->d), PA(t));
    }
    ILV_GROUP_OUT(acc)
}

/* Q2_K (three 0: weight = d * sc * q - dmin * mn, q 2-bit, scale and min 4-bit) and Q3_K (three
 * 1: weight = d * sc * (q - 4), q the 2 bits and the hmask bit above them, sc signed), per
 * sub-block of 16; the mins and the offset meet the activation sums. Code run [h][m]'s bits 2f..
 * 2f + 1 are weights 128h + 32f + 4m + k: sub-block 8h + 2f for m < 4, the next for the rest. */
AI void ilv_q23_K_body(int pair, int three, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt,
                       float *out, size_t os) {
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4), m15 = _mm512_set1_epi32(15);
    const size_t bs = three ? 1824 : 1344, qo = three ? 512 : 0, so = qo + 1024; /* block, codes, scales */
    __m512 acc[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *p = g;
    for (int64_t i = 0; i < n / QK_K; i++, p += bs) {
        ilv_prefetch(p, bs);
        __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + so + 256)));
        __m512 dmin = three ? dv : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + so + 288)));
        __m512 blk[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) blk[t] = _mm512_setzero_ps();
        /* each code run (and hm run) loaded once: its four 2-bit fields feed four sums, one per
         * f, each a sub-block's (the fields' shifts constants once the f loop is unrolled) */
        for (int h = 0; h < 2; h++)
            for (int mh = 0; mh < 2; mh++) {
                __m512i s0[4][QUANT_DOT_TOK];
                UNROLL for (int f = 0; f < 4; f++) for (int t = 0; t < nt; t++) s0[f][t] = _mm512_setzero_si512();
                for (int m = 4 * mh; m < 4 * mh + 4; m++) {
                    const __m512i v = _mm512_loadu_si512((const void *)(p + qo + 64 * (8 * h + m)));
                    const __m512i hb = three ? _mm512_loadu_si512((const void *)(p + 64 * m)) : v;
                    UNROLL for (int f = 0; f < 4; f++) {
                        __m512i c = _mm512_and_si512(_mm512_srli_epi16(v, 2 * f), m3);
                        if (three)
                            c = _mm512_mask_add_epi8(c, _mm512_test_epi8_mask(hb, _mm512_set1_epi8((char)(1 << (4 * h + f)))), c, four);
                        for (int t = 0; t < nt; t++) {
                            const int8_t *xq = ((const block_q8_K *)XROW(x, xs, t) + i)->qs + 128 * h + 32 * f + 4 * m;
                            s0[f][t] = _mm512_dpbusd_epi32(s0[f][t], c, bcast4(xq));
                        }
                    }
                }
                UNROLL for (int f = 0; f < 4; f++) {
                    const int j = 8 * h + 2 * f + mh;
                    if (three) {
                        __m512 sc = ilv_s8_ps(p + so + 16 * j, dv);
                        for (int t = 0; t < nt; t++) {
                            const int16_t *bsum = ((const block_q8_K *)XROW(x, xs, t) + i)->bsums;
                            __m512i c0 = _mm512_sub_epi32(s0[f][t], _mm512_set1_epi32(4 * bsum[j]));
                            blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c0), sc, blk[t]);
                        }
                    } else {
                        __m512i sm = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + so + 16 * j)));
                        __m512 sc = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(sm, m15)), dv);
                        __m512 mn = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(sm, 4)), dmin);
                        for (int t = 0; t < nt; t++) {
                            const int16_t *bsum = ((const block_q8_K *)XROW(x, xs, t) + i)->bsums;
                            blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0[f][t]), sc, blk[t]);
                            blk[t] = _mm512_fnmadd_ps(mn, _mm512_set1_ps((float)bsum[j]), blk[t]);
                        }
                    }
                }
            }
        for (int t = 0; t < nt; t++)
            PA(t) = _mm512_fmadd_ps(blk[t], _mm512_set1_ps(((const block_q8_K *)XROW(x, xs, t) + i)->d), PA(t));
    }
    ILV_GROUP_OUT(acc)
}

/* Q6_K: weight = d * sc * (q - 32) per sub-block of 16; the offset meets the activation sums. */
AI void ilv_q6_K_body(int pair, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt, float *out, size_t os) {
    const __m512i m4 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3);
    __m512 acc[QUANT_DOT_TOK];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *p = g;
    for (int64_t i = 0; i < n / QK_K; i++, p += 3360) {
        ilv_prefetch(p, 3360);
        __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 3328)));
        __m512 blk[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) blk[t] = _mm512_setzero_ps();
        for (int h = 0; h < 2; h++)
            for (int a = 0; a < 2; a++)
                for (int mh = 0; mh < 2; mh++) {
                    __m512i s0[QUANT_DOT_TOK], s1[QUANT_DOT_TOK];
                    for (int t = 0; t < nt; t++) s0[t] = s1[t] = _mm512_setzero_si512();
                    for (int m = 4 * mh; m < 4 * mh + 4; m++) {
                        __m512i l = _mm512_loadu_si512((const void *)(p + 64 * (16 * h + 8 * a + m)));
                        __m512i hb = _mm512_loadu_si512((const void *)(p + 2048 + 64 * (8 * h + m)));
                        __m512i lo = _mm512_or_si512(_mm512_and_si512(l, m4),
                                                     _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 2 * a), m3), 4));
                        __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                                     _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 2 * a + 4), m3), 4));
                        for (int t = 0; t < nt; t++) {
                            const int8_t *xq = ((const block_q8_K *)XROW(x, xs, t) + i)->qs + 128 * h + 32 * a + 4 * m;
                            s0[t] = _mm512_dpbusd_epi32(s0[t], lo, bcast4(xq));
                            s1[t] = _mm512_dpbusd_epi32(s1[t], hi, bcast4(xq + 64));
                        }
                    }
                    int j0 = 8 * h + 2 * a + mh, j1 = j0 + 4;
                    __m512 sc0 = ilv_s8_ps(p + 3072 + 16 * j0, dv), sc1 = ilv_s8_ps(p + 3072 + 16 * j1, dv);
                    for (int t = 0; t < nt; t++) {
                        const int16_t *bs = ((const block_q8_K *)XROW(x, xs, t) + i)->bsums;
                        __m512i c0 = _mm512_sub_epi32(s0[t], _mm512_set1_epi32(32 * bs[j0]));
                        __m512i c1 = _mm512_sub_epi32(s1[t], _mm512_set1_epi32(32 * bs[j1]));
                        blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c0), sc0, blk[t]);
                        blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c1), sc1, blk[t]);
                    }
                }
        for (int t = 0; t < nt; t++)
            PA(t) = _mm512_fmadd_ps(blk[t], _mm512_set1_ps(((const block_q8_K *)XROW(x, xs, t) + i)->d), PA(t));
    }
    ILV_GROUP_OUT(acc)
}

#define ILV_Q4_0(...) ilv_q4_body(PAIR, 0, 0, __VA_ARGS__)
#define ILV_Q4_1(...) ilv_q4_body(PAIR, 0, 1, __VA_ARGS__)
#define ILV_Q5_0(...) ilv_q4_body(PAIR, 1, 0, __VA_ARGS__)
#define ILV_Q5_1(...) ilv_q4_body(PAIR, 1, 1, __VA_ARGS__)
#define ILV_Q4_K(...) ilv_q45_K_body(PAIR, 0, __VA_ARGS__)
#define ILV_Q5_K(...) ilv_q45_K_body(PAIR, 1, __VA_ARGS__)
#define ILV_Q8_0(...) ilv_q8_0_body(PAIR, __VA_ARGS__)
#define ILV_Q6_K(...) ilv_q6_K_body(PAIR, __VA_ARGS__)
#define ILV_Q2_K(...) ilv_q23_K_body(PAIR, 0, __VA_ARGS__)
#define ILV_Q3_K(...) ilv_q23_K_body(PAIR, 1, __VA_ARGS__)
/* n_tok activation rows, or (PAIR) n_tok tokens of 2 rows each, QUANT_DOT_TOK rows a pass */
#define ILV_KERN(name, call)                                                                               \
    static void name(int64_t n, const void *g, int nr, const void *x, size_t xs, int64_t n_tok, float *o,  \
                     size_t os) {                                                                          \
        enum { TP = QUANT_DOT_TOK / (1 + PAIR) };                                                          \
        for (int64_t t0 = 0; t0 < n_tok; t0 += TP) {                                                       \
            int64_t nt = n_tok - t0 < TP ? n_tok - t0 : TP;                                                \
            const void *xt = XROW(x, xs, (1 + PAIR) * t0);                                                 \
            float *ot = o + (size_t)t0 * os;                                                               \
            switch (nt * (1 + PAIR)) {                                                                     \
            case 1: call(n, g, nr, xt, xs, 1 + PAIR, ot, os); break;                                       \
            case 2: call(n, g, nr, xt, xs, 2, ot, os); break;                                              \
            case 3: call(n, g, nr, xt, xs, 3 + PAIR, ot, os); break;                                       \
            default: call(n, g, nr, xt, xs, 4, ot, os); break;                                             \
            }                                                                                              \
        }                                                                                                  \
    }
#define PAIR 0
ILV_KERN(ilv_q4_0, ILV_Q4_0)
ILV_KERN(ilv_q4_1, ILV_Q4_1)
ILV_KERN(ilv_q4_K, ILV_Q4_K)
ILV_KERN(ilv_q5_0, ILV_Q5_0)
ILV_KERN(ilv_q5_1, ILV_Q5_1)
ILV_KERN(ilv_q5_K, ILV_Q5_K)
ILV_KERN(ilv_q2_K, ILV_Q2_K)
ILV_KERN(ilv_q3_K, ILV_Q3_K)
ILV_KERN(ilv_q8_0, ILV_Q8_0)
ILV_KERN(ilv_q6_K, ILV_Q6_K)
#undef PAIR
#define PAIR 1
ILV_KERN(ilv_pair_q4_0, ILV_Q4_0)
ILV_KERN(ilv_pair_q4_1, ILV_Q4_1)
ILV_KERN(ilv_pair_q4_K, ILV_Q4_K)
ILV_KERN(ilv_pair_q5_0, ILV_Q5_0)
ILV_KERN(ilv_pair_q5_1, ILV_Q5_1)
ILV_KERN(ilv_pair_q5_K, ILV_Q5_K)
ILV_KERN(ilv_pair_q2_K, ILV_Q2_K)
ILV_KERN(ilv_pair_q3_K, ILV_Q3_K)
ILV_KERN(ilv_pair_q8_0, ILV_Q8_0)
ILV_KERN(ilv_pair_q6_K, ILV_Q6_K)
#undef PAIR
#undef PA
#define ILV_TABLE                                                                                       \
    {[QUANT_Q4_0] = ilv_q4_0, [QUANT_Q4_1] = ilv_q4_1, [QUANT_Q8_0] = ilv_q8_0, [QUANT_Q4_K] = ilv_q4_K, \
     [QUANT_Q6_K] = ilv_q6_K, [QUANT_Q5_0] = ilv_q5_0, [QUANT_Q5_1] = ilv_q5_1, [QUANT_Q5_K] = ilv_q5_K, \
     [QUANT_Q2_K] = ilv_q2_K, [QUANT_Q3_K] = ilv_q3_K}
#define ILV_PAIR_TABLE                                                                                   \
    {[QUANT_Q4_0] = ilv_pair_q4_0, [QUANT_Q4_1] = ilv_pair_q4_1, [QUANT_Q8_0] = ilv_pair_q8_0,          \
     [QUANT_Q4_K] = ilv_pair_q4_K, [QUANT_Q6_K] = ilv_pair_q6_K, [QUANT_Q5_0] = ilv_pair_q5_0,        \
     [QUANT_Q5_1] = ilv_pair_q5_1, [QUANT_Q5_K] = ilv_pair_q5_K, [QUANT_Q2_K] = ilv_pair_q2_K,        \
     [QUANT_Q3_K] = ilv_pair_q3_K}
#else
#define ILV_TABLE {0}
#define ILV_PAIR_TABLE {0}
#endif
