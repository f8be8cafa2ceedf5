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
/* The K types' blocks (1.3-3.3 KiB) as ilv_prefetch, and with SIMD_ILV_NEXT_L2 the next block's
 * lines into L2 beside them (past a group's last block they are the next group's, or nothing: a
 * prefetch never faults). On a Sapphire Rapids class Xeon, 2 threads (A/B, 3 rounds), 1b q4_k_m
 * decode 28.3-29.0 -> 32.2-32.9 t/s, mini q4_k_m (from L3) 174-208 -> 218-252; mini q6_k 135-140
 * -> 182-202 (variants run); the 32-weight types' blocks (288-544 bytes) gained nothing that way
 * (1b q4_0 32.9-33.7 -> 30.4-33.2), and on Zen 5 the next blocks' lines asked for instead of
 * the current ones ran slower (ilv_prefetch's note; this form, beside them, was not measured
 * there), so only the Intel path (dot_avx512w.c) sets it. */
AI void ilv_prefetch_k(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) {
        _mm_prefetch((const char *)p + o, _MM_HINT_T0);
        if (SIMD_ILV_NEXT_L2) _mm_prefetch((const char *)p + bytes + o, _MM_HINT_T1);
    }
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
        ilv_prefetch_k(p, bs);
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
        ilv_prefetch_k(p, bs);
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
        ilv_prefetch_k(p, 3360);
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

#define ILV_FN(body) ilv_##body
#define ILV_HAS_Q8_0 1
#else
/* ---- interleaved groups on the 256-bit paths (AVX2, AVX-VNNI) ------------------------------
 * The same layouts and arithmetic as the 512-bit kernels above, a group's 16 rows taken as two
 * halves of 8 (the first or second 32 bytes of each 64-byte run, 8 of the 16 scales): the whole
 * group for rows 0-7, then again for rows 8-15, whose lines the first pass left in cache. A half
 * at a time keeps the sums within the 16 registers these paths have. The u8 x s8 product is the
 * path's dpbusd, or on AVX2 maddubs (no code here exceeds 63, so its int16 pair sums stay below
 * 2 * 63 * 127) with the madd that widens it shared by several (ilv2_acc); Q8_0's codes (up to
 * 255) only where it is a true dpbusd. */
AI void ilv_prefetch(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}
#define PA(t) acc[pair ? (t) / 2 : (t)]
/* rows 8hh .. 8hh + 7 of the nt / (1 + pair) output rows */
#define ILV2_HALF_OUT(acc, hh)                                                   \
    for (int t = 0; t < nt / (1 + pair); t++) {                                  \
        float tmp[8];                                                            \
        _mm256_storeu_ps(tmp, (acc)[t]);                                         \
        for (int r = 8 * (hh); r < nr && r < 8 * (hh) + 8; r++) out[(size_t)t * os + r] = tmp[r - 8 * (hh)]; \
    }
AI __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
AI __m256i ilv2_load(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* 8 bytes at p (one per row of the half) as f32, times v */
AI __m256 ilv2_u8_ps(const uint8_t *p, __m256 v) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p))), v);
}
AI __m256 ilv2_s8_ps(const uint8_t *p, __m256 v) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p))), v);
}
AI __m256 ilv2_f16(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
/* bit b of each byte of h moved to bit `to`, the rest cleared (the Q3 / Q5 codes' high bits;
 * 16-bit shifts move no bit across a byte into bit `to`) */
AI __m256i ilv2_bit(__m256i h, int b, int to) {
    return _mm256_and_si256(b <= to ? _mm256_slli_epi16(h, to - b) : _mm256_srli_epi16(h, b - to),
                            _mm256_set1_epi8((char)(1 << to)));
}

/* A u8 x s8 sum: on AVX-VNNI dpbusd into int32; on AVX2 maddubs into int16 partials, widened
 * by one madd per flush instead of one per product (3 -> 2 instructions a product). A kernel
 * flushes before the partial can pass 32767: span products of codes up to c against |x| <= 127
 * add at most span * 2 * c * 127 (Q4 codes 8 steps, Q5 4, Q6 2, Q2 / Q3 4). */
typedef struct { __m256i s, a; } ilv2_acc;
AI void ilv2_zero(ilv2_acc *c) { c->s = c->a = _mm256_setzero_si256(); }
AI void ilv2_add(ilv2_acc *c, __m256i u, __m256i x) {
#if SIMD_PANEL_WIDE
    c->s = SIMD_DPBUSD_ACC(c->s, u, x);
#else
    c->a = _mm256_add_epi16(c->a, _mm256_maddubs_epi16(u, x));
#endif
}
AI __m256i ilv2_flush(ilv2_acc *c) {
#if !SIMD_PANEL_WIDE
    c->s = _mm256_add_epi32(c->s, _mm256_madd_epi16(c->a, _mm256_set1_epi16(1)));
    c->a = _mm256_setzero_si256();
#endif
    return c->s;
}

/* Q4_0, Q4_1, Q5_0, Q5_1 (as ilv_q4_body) */
AI void ilv2_q4_body(int pair, int five, int has_m, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt,
                     float *out, size_t os) {
    const __m256i m4 = _mm256_set1_epi8(15);
    const size_t dof = 256 + 64 * five, bs = dof + 32 + 32 * has_m;
    const float off = five ? -16.0f : -8.0f;
    for (int hh = 0; hh < 2; hh++) {
        __m256 acc[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        const uint8_t *p = g;
        for (int64_t i = 0; i < n / 32; i++, p += bs) {
            if (!hh) ilv_prefetch(p, bs);
            ilv2_acc s0[QUANT_DOT_TOK], s1[QUANT_DOT_TOK];
            for (int t = 0; t < nt; t++) ilv2_zero(&s0[t]), ilv2_zero(&s1[t]);
            const __m256i hb = five ? ilv2_load(p + 32 * hh) : _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                __m256i v = ilv2_load(p + 64 * five + 64 * j + 32 * hh);
                __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                if (five) {
                    lo = _mm256_or_si256(lo, ilv2_bit(hb, 2 * j, 4));
                    hi = _mm256_or_si256(hi, ilv2_bit(hb, 2 * j + 1, 4));
                }
                for (int t = 0; t < nt; t++) {
                    const int8_t *xq = ((const block_q8_a *)XROW(x, xs, t) + i)->qs;
                    ilv2_add(&s0[t], lo, bcast4(xq + 4 * j));
                    ilv2_add(&s1[t], hi, bcast4(xq + 16 + 4 * j));
                }
            }
            __m256 d = ilv2_f16(p + dof + 16 * hh), m = has_m ? ilv2_f16(p + dof + 32 + 16 * hh) : d;
            for (int t = 0; t < nt; t++) {
                const block_q8_a *a = (const block_q8_a *)XROW(x, xs, t) + i;
                __m256 f = _mm256_cvtepi32_ps(_mm256_add_epi32(ilv2_flush(&s0[t]), ilv2_flush(&s1[t])));
                if (has_m) {
                    PA(t) = _mm256_fmadd_ps(_mm256_mul_ps(f, _mm256_set1_ps(a->d)), d, PA(t));
                    PA(t) = _mm256_fmadd_ps(m, _mm256_set1_ps(a->s), PA(t));
                } else {
                    PA(t) = _mm256_fmadd_ps(_mm256_fmadd_ps(f, _mm256_set1_ps(a->d), _mm256_set1_ps(off * a->s)), d, PA(t));
                }
            }
        }
        ILV2_HALF_OUT(acc, hh)
    }
}

#if SIMD_PANEL_WIDE
/* Q8_0 (as ilv_q8_0_body) */
AI void ilv2_q8_0_body(int pair, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt, float *out,
                       size_t os) {
    for (int hh = 0; hh < 2; hh++) {
        __m256 acc[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        const uint8_t *p = g;
        for (int64_t i = 0; i < n / 32; i++, p += 544) {
            if (!hh) ilv_prefetch(p, 544);
            __m256i s0[QUANT_DOT_TOK], s1[QUANT_DOT_TOK];
            for (int t = 0; t < nt; t++) s0[t] = s1[t] = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                __m256i u0 = ilv2_load(p + 64 * j + 32 * hh), u1 = ilv2_load(p + 64 * (j + 4) + 32 * hh);
                for (int t = 0; t < nt; t++) {
                    const int8_t *xq = ((const block_q8_a *)XROW(x, xs, t) + i)->qs;
                    s0[t] = SIMD_DPBUSD_ACC(s0[t], u0, bcast4(xq + 4 * j));
                    s1[t] = SIMD_DPBUSD_ACC(s1[t], u1, bcast4(xq + 16 + 4 * j));
                }
            }
            __m256 d = ilv2_f16(p + 512 + 16 * hh);
            for (int t = 0; t < nt; t++) {
                const block_q8_a *a = (const block_q8_a *)XROW(x, xs, t) + i;
                __m256 f = _mm256_cvtepi32_ps(_mm256_add_epi32(s0[t], s1[t]));
                PA(t) = _mm256_fmadd_ps(_mm256_fmadd_ps(f, _mm256_set1_ps(a->d), _mm256_set1_ps(-128.0f * a->s)), d, PA(t));
            }
        }
        ILV2_HALF_OUT(acc, hh)
    }
}
#endif

/* Q4_K and Q5_K (as ilv_q45_K_body) */
AI void ilv2_q45_K_body(int pair, int five, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt,
                        float *out, size_t os) {
    const __m256i m4 = _mm256_set1_epi8(15);
    const size_t bs = 2368 + 512 * five, so = 2048 + 512 * five;
    for (int hh = 0; hh < 2; hh++) {
        __m256 acc[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        const uint8_t *p = g;
        for (int64_t i = 0; i < n / QK_K; i++, p += bs) {
            if (!hh) ilv_prefetch(p, bs);
            __m256 dv = ilv2_f16(p + so + 256 + 16 * hh), blk[QUANT_DOT_TOK];
            for (int t = 0; t < nt; t++) blk[t] = _mm256_setzero_ps();
            for (int q = 0; q < 4; q++) {
                ilv2_acc s0[QUANT_DOT_TOK], s1[QUANT_DOT_TOK];
                for (int t = 0; t < nt; t++) ilv2_zero(&s0[t]), ilv2_zero(&s1[t]);
                for (int m = 0; m < 8; m++) {
                    if (five && m == 4)
                        for (int t = 0; t < nt; t++) ilv2_flush(&s0[t]), ilv2_flush(&s1[t]);
                    __m256i v = ilv2_load(p + 512 * five + 512 * q + 64 * m + 32 * hh);
                    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    if (five) {
                        __m256i hb = ilv2_load(p + 64 * m + 32 * hh);
                        lo = _mm256_or_si256(lo, ilv2_bit(hb, 2 * q, 4));
                        hi = _mm256_or_si256(hi, ilv2_bit(hb, 2 * q + 1, 4));
                    }
                    for (int t = 0; t < nt; t++) {
                        const int8_t *xq = ((const block_q8_K *)XROW(x, xs, t) + i)->qs + 64 * q;
                        ilv2_add(&s0[t], lo, bcast4(xq + 4 * m));
                        ilv2_add(&s1[t], hi, bcast4(xq + 32 + 4 * m));
                    }
                }
                __m256 sc0 = ilv2_u8_ps(p + so + 16 * (2 * q) + 8 * hh, dv);
                __m256 sc1 = ilv2_u8_ps(p + so + 16 * (2 * q + 1) + 8 * hh, dv);
                for (int t = 0; t < nt; t++) {
                    blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ilv2_flush(&s0[t])), sc0, blk[t]);
                    blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ilv2_flush(&s1[t])), sc1, blk[t]);
                }
            }
            __m256 dmin = ilv2_f16(p + so + 288 + 16 * hh);
            for (int j = 0; j < 8; j++) {
                __m256 mn = ilv2_u8_ps(p + so + 128 + 16 * j + 8 * hh, dmin);
                for (int t = 0; t < nt; t++) {
                    const int16_t *bsum = ((const block_q8_K *)XROW(x, xs, t) + i)->bsums;
                    blk[t] = _mm256_fnmadd_ps(mn, _mm256_set1_ps((float)(bsum[2 * j] + bsum[2 * j + 1])), blk[t]);
                }
            }
            for (int t = 0; t < nt; t++)
                PA(t) = _mm256_fmadd_ps(blk[t], _mm256_set1_ps(((const block_q8_K *)XROW(x, xs, t) + i)->d), PA(t));
        }
        ILV2_HALF_OUT(acc, hh)
    }
}

/* Q2_K and Q3_K (as ilv_q23_K_body) */
AI void ilv2_q23_K_body(int pair, int three, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt,
                        float *out, size_t os) {
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi32(15);
    const size_t bs = three ? 1824 : 1344, qo = three ? 512 : 0, so = qo + 1024;
    for (int hh = 0; hh < 2; hh++) {
        __m256 acc[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        const uint8_t *p = g;
        for (int64_t i = 0; i < n / QK_K; i++, p += bs) {
            if (!hh) ilv_prefetch(p, bs);
            __m256 dv = ilv2_f16(p + so + 256 + 16 * hh);
            __m256 dmin = three ? dv : ilv2_f16(p + so + 288 + 16 * hh), blk[QUANT_DOT_TOK];
            for (int t = 0; t < nt; t++) blk[t] = _mm256_setzero_ps();
            for (int h = 0; h < 2; h++)
                for (int f = 0; f < 4; f++)
                    for (int mh = 0; mh < 2; mh++) {
                        ilv2_acc s0[QUANT_DOT_TOK];
                        for (int t = 0; t < nt; t++) ilv2_zero(&s0[t]);
                        for (int m = 4 * mh; m < 4 * mh + 4; m++) {
                            __m256i c = _mm256_and_si256(_mm256_srli_epi16(ilv2_load(p + qo + 64 * (8 * h + m) + 32 * hh), 2 * f), m3);
                            if (three) c = _mm256_or_si256(c, ilv2_bit(ilv2_load(p + 64 * m + 32 * hh), 4 * h + f, 2));
                            for (int t = 0; t < nt; t++) {
                                const int8_t *xq = ((const block_q8_K *)XROW(x, xs, t) + i)->qs + 128 * h + 32 * f + 4 * m;
                                ilv2_add(&s0[t], c, bcast4(xq));
                            }
                        }
                        for (int t = 0; t < nt; t++) ilv2_flush(&s0[t]);
                        const int j = 8 * h + 2 * f + mh;
                        if (three) {
                            __m256 sc = ilv2_s8_ps(p + so + 16 * j + 8 * hh, dv);
                            for (int t = 0; t < nt; t++) {
                                const int16_t *bsum = ((const block_q8_K *)XROW(x, xs, t) + i)->bsums;
                                __m256i c0 = _mm256_sub_epi32(s0[t].s, _mm256_set1_epi32(4 * bsum[j]));
                                blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c0), sc, blk[t]);
                            }
                        } else {
                            __m256i sm = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + so + 16 * j + 8 * hh)));
                            __m256 sc = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(sm, m15)), dv);
                            __m256 mn = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(sm, 4)), dmin);
                            for (int t = 0; t < nt; t++) {
                                const int16_t *bsum = ((const block_q8_K *)XROW(x, xs, t) + i)->bsums;
                                blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0[t].s), sc, blk[t]);
                                blk[t] = _mm256_fnmadd_ps(mn, _mm256_set1_ps((float)bsum[j]), blk[t]);
                            }
                        }
                    }
            for (int t = 0; t < nt; t++)
                PA(t) = _mm256_fmadd_ps(blk[t], _mm256_set1_ps(((const block_q8_K *)XROW(x, xs, t) + i)->d), PA(t));
        }
        ILV2_HALF_OUT(acc, hh)
    }
}

/* Q6_K (as ilv_q6_K_body) */
AI void ilv2_q6_K_body(int pair, int64_t n, const void *g, int nr, const void *x, size_t xs, int nt, float *out,
                       size_t os) {
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    for (int hh = 0; hh < 2; hh++) {
        __m256 acc[QUANT_DOT_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        const uint8_t *p = g;
        for (int64_t i = 0; i < n / QK_K; i++, p += 3360) {
            if (!hh) ilv_prefetch(p, 3360);
            __m256 dv = ilv2_f16(p + 3328 + 16 * hh), blk[QUANT_DOT_TOK];
            for (int t = 0; t < nt; t++) blk[t] = _mm256_setzero_ps();
            for (int h = 0; h < 2; h++)
                for (int a = 0; a < 2; a++)
                    for (int mh = 0; mh < 2; mh++) {
                        ilv2_acc s0[QUANT_DOT_TOK], s1[QUANT_DOT_TOK];
                        for (int t = 0; t < nt; t++) ilv2_zero(&s0[t]), ilv2_zero(&s1[t]);
                        for (int m = 4 * mh; m < 4 * mh + 4; m++) {
                            if (m == 4 * mh + 2)
                                for (int t = 0; t < nt; t++) ilv2_flush(&s0[t]), ilv2_flush(&s1[t]);
                            __m256i l = ilv2_load(p + 64 * (16 * h + 8 * a + m) + 32 * hh);
                            __m256i hb = ilv2_load(p + 2048 + 64 * (8 * h + m) + 32 * hh);
                            __m256i lo = _mm256_or_si256(_mm256_and_si256(l, m4),
                                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * a), m3), 4));
                            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4),
                                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * a + 4), m3), 4));
                            for (int t = 0; t < nt; t++) {
                                const int8_t *xq = ((const block_q8_K *)XROW(x, xs, t) + i)->qs + 128 * h + 32 * a + 4 * m;
                                ilv2_add(&s0[t], lo, bcast4(xq));
                                ilv2_add(&s1[t], hi, bcast4(xq + 64));
                            }
                        }
                        int j0 = 8 * h + 2 * a + mh, j1 = j0 + 4;
                        __m256 sc0 = ilv2_s8_ps(p + 3072 + 16 * j0 + 8 * hh, dv), sc1 = ilv2_s8_ps(p + 3072 + 16 * j1 + 8 * hh, dv);
                        for (int t = 0; t < nt; t++) {
                            const int16_t *bsum = ((const block_q8_K *)XROW(x, xs, t) + i)->bsums;
                            __m256i c0 = _mm256_sub_epi32(ilv2_flush(&s0[t]), _mm256_set1_epi32(32 * bsum[j0]));
                            __m256i c1 = _mm256_sub_epi32(ilv2_flush(&s1[t]), _mm256_set1_epi32(32 * bsum[j1]));
                            blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c0), sc0, blk[t]);
                            blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c1), sc1, blk[t]);
                        }
                    }
            for (int t = 0; t < nt; t++)
                PA(t) = _mm256_fmadd_ps(blk[t], _mm256_set1_ps(((const block_q8_K *)XROW(x, xs, t) + i)->d), PA(t));
        }
        ILV2_HALF_OUT(acc, hh)
    }
}

#define ILV_FN(body) ilv2_##body
#define ILV_HAS_Q8_0 SIMD_PANEL_WIDE
#endif

/* ---- the kernels of either width: n_tok activation rows, or (P) n_tok tokens of 2 rows each,
 * QUANT_DOT_TOK rows a pass ---------------------------------------------------------------- */
#define ILV_Q4_0(P, ...) ILV_FN(q4_body)(P, 0, 0, __VA_ARGS__)
#define ILV_Q4_1(P, ...) ILV_FN(q4_body)(P, 0, 1, __VA_ARGS__)
#define ILV_Q5_0(P, ...) ILV_FN(q4_body)(P, 1, 0, __VA_ARGS__)
#define ILV_Q5_1(P, ...) ILV_FN(q4_body)(P, 1, 1, __VA_ARGS__)
#define ILV_Q4_K(P, ...) ILV_FN(q45_K_body)(P, 0, __VA_ARGS__)
#define ILV_Q5_K(P, ...) ILV_FN(q45_K_body)(P, 1, __VA_ARGS__)
#define ILV_Q2_K(P, ...) ILV_FN(q23_K_body)(P, 0, __VA_ARGS__)
#define ILV_Q3_K(P, ...) ILV_FN(q23_K_body)(P, 1, __VA_ARGS__)
#define ILV_Q6_K(P, ...) ILV_FN(q6_K_body)(P, __VA_ARGS__)
#define ILV_Q8_0(P, ...) ILV_FN(q8_0_body)(P, __VA_ARGS__)
#define ILV_KERN(name, call, P)                                                                            \
    static void name(int64_t n, const void *g, int nr, const void *x, size_t xs, int64_t n_tok, float *o,  \
                     size_t os) {                                                                          \
        enum { TP = QUANT_DOT_TOK / (1 + P) };                                                             \
        for (int64_t t0 = 0; t0 < n_tok; t0 += TP) {                                                       \
            int64_t nt = n_tok - t0 < TP ? n_tok - t0 : TP;                                                \
            const void *xt = XROW(x, xs, (1 + P) * t0);                                                    \
            float *ot = o + (size_t)t0 * os;                                                               \
            switch (nt * (1 + P)) {                                                                        \
            case 1: call(P, n, g, nr, xt, xs, 1 + P, ot, os); break;                                       \
            case 2: call(P, n, g, nr, xt, xs, 2, ot, os); break;                                           \
            case 3: call(P, n, g, nr, xt, xs, 3 + P, ot, os); break;                                       \
            default: call(P, n, g, nr, xt, xs, 4, ot, os); break;                                         \
            }                                                                                              \
        }                                                                                                  \
    }
#define ILV_KERN2(type, call) ILV_KERN(ilv_##type, call, 0) ILV_KERN(ilv_pair_##type, call, 1)
ILV_KERN2(q4_0, ILV_Q4_0)
ILV_KERN2(q4_1, ILV_Q4_1)
ILV_KERN2(q5_0, ILV_Q5_0)
ILV_KERN2(q5_1, ILV_Q5_1)
ILV_KERN2(q4_K, ILV_Q4_K)
ILV_KERN2(q5_K, ILV_Q5_K)
ILV_KERN2(q2_K, ILV_Q2_K)
ILV_KERN2(q3_K, ILV_Q3_K)
ILV_KERN2(q6_K, ILV_Q6_K)
#if ILV_HAS_Q8_0
ILV_KERN2(q8_0, ILV_Q8_0)
#define ILV_TABLE_Q8_0 [QUANT_Q8_0] = ilv_q8_0,
#define ILV_PAIR_TABLE_Q8_0 [QUANT_Q8_0] = ilv_pair_q8_0,
#else
#define ILV_TABLE_Q8_0
#define ILV_PAIR_TABLE_Q8_0
#endif
#undef PA
#define ILV_TABLE                                                                                       \
    {ILV_TABLE_Q8_0[QUANT_Q4_0] = ilv_q4_0, [QUANT_Q4_1] = ilv_q4_1, [QUANT_Q4_K] = ilv_q4_K,            \
     [QUANT_Q6_K] = ilv_q6_K, [QUANT_Q5_0] = ilv_q5_0, [QUANT_Q5_1] = ilv_q5_1, [QUANT_Q5_K] = ilv_q5_K, \
     [QUANT_Q2_K] = ilv_q2_K, [QUANT_Q3_K] = ilv_q3_K}
#define ILV_PAIR_TABLE                                                                                   \
    {ILV_PAIR_TABLE_Q8_0[QUANT_Q4_0] = ilv_pair_q4_0, [QUANT_Q4_1] = ilv_pair_q4_1,                      \
     [QUANT_Q4_K] = ilv_pair_q4_K, [QUANT_Q6_K] = ilv_pair_q6_K, [QUANT_Q5_0] = ilv_pair_q5_0,        \
     [QUANT_Q5_1] = ilv_pair_q5_1, [QUANT_Q5_K] = ilv_pair_q5_K, [QUANT_Q2_K] = ilv_pair_q2_K,        \
     [QUANT_Q3_K] = ilv_pair_q3_K}
