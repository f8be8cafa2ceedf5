/* The prompt panel of one interleaved group (quant/dot.h: quant_panel_pack_ilv) in 256-bit SIMD,
 * included by dot_simd.h into each path (quant/ internal). The same bytes as dot_panel.c's
 * portable form, which the compiler could not vectorise beyond 16-byte steps (its bit gathers
 * byte by byte) and whose scales went through a function call per f16: 10-13% of a Q4_K_M,
 * Q5_K or Q3_K prompt's time on an AVX-512 host (perf, mini shapes, pp128).
 *
 * A group's 4-byte runs are already the panel's runs (64 bytes: 4 codes of each of 16 rows), so
 * each panel run is a few whole-register operations on one or two source runs: a nibble or bit
 * field moved to the low bits, a fifth or sixth bit moved to bit 4 or 5. The moves are 16-bit
 * shifts masked to the target bits; every shift here is at most 6 bits, so the bits kept in each
 * byte come from that byte (the masks drop what crossed from its neighbour). Scales and biases
 * are the portable form's float operations, 8 rows a step: d * code as one rounded multiply, a
 * bias -(dmin * m) as the product's sign flipped (so -0 stays -0), f16 by F16C. */

#define PK_RUN 64 /* bytes of a panel run: QUANT_PANEL_ROWS rows x 4 codes */
QUANT_STATIC_ASSERT(PK_RUN == 4 * QUANT_PANEL_ROWS, "a panel run is 4 codes of each row");

/* v shifted by s bits within each 16-bit lane: left for s > 0, right for s < 0. */
AI __m256i pk_sh(__m256i v, int s) {
    return s >= 0 ? _mm256_sll_epi16(v, _mm_cvtsi32_si128(s)) : _mm256_srl_epi16(v, _mm_cvtsi32_si128(-s));
}

/* Bit b of each byte of h moved to bit t (masked: only that bit). */
AI __m256i pk_bit(__m256i h, int b, int t) {
    return _mm256_and_si256(pk_sh(h, t - b), _mm256_set1_epi8((char)(1 << t)));
}

AI __m256i pk_ld(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
AI void pk_st(uint8_t *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }

/* 16 f16 values at p as two vectors of 8 floats. */
AI void pk_f16x16(const uint8_t *p, __m256 *a, __m256 *b) {
    *a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    *b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
}
/* 16 bytes, unsigned (sgn 0) or signed, as two vectors of 8 floats. */
AI void pk_b16(__m128i v, int sgn, __m256 *a, __m256 *b) {
    const __m128i w = _mm_unpackhi_epi64(v, v);
    *a = _mm256_cvtepi32_ps(sgn ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v));
    *b = _mm256_cvtepi32_ps(sgn ? _mm256_cvtepi8_epi32(w) : _mm256_cvtepu8_epi32(w));
}
AI void pk_u8x16(const uint8_t *p, int sgn, __m256 *a, __m256 *b) {
    pk_b16(_mm_loadu_si128((const __m128i *)p), sgn, a, b);
}
AI __m256 pk_neg(__m256 v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }
AI void pk_st2(float *p, __m256 a, __m256 b) {
    _mm256_storeu_ps(p, a);
    _mm256_storeu_ps(p + 8, b);
}

static void pack_ilv(uint32_t wtype, int64_t n, const void *group, void *panel) {
    enum { R = QUANT_PANEL_ROWS };
    const int L = wtype == QUANT_Q2_K || wtype == QUANT_Q3_K || wtype == QUANT_Q6_K ? 16 : 32;
    uint8_t *codes = panel;
    float *scale = (float *)(codes + (size_t)n * R), *bias = scale + (n / L) * R;
    const uint8_t *g = group;
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3), m0x30 = _mm256_set1_epi8(0x30);
    __m256 d0, d1, e0, e1, s0, s1;
    switch (wtype) {
    case QUANT_Q4_0: case QUANT_Q4_1: case QUANT_Q5_0: case QUANT_Q5_1: {
        /* run j's low nibbles are panel run 8b + j, its high ones 8b + 4 + j; Q5: their fifth
         * bits are bits 2j and 2j + 1 of the qh run before the codes */
        const int has_m = wtype == QUANT_Q4_1 || wtype == QUANT_Q5_1, five = wtype == QUANT_Q5_0 || wtype == QUANT_Q5_1;
        const size_t dof = 256 + 64 * (size_t)five, bs = dof + 32 + 32 * (size_t)has_m;
        for (int64_t b = 0; b < n / 32; b++, g += bs) {
            uint8_t *c = codes + (size_t)b * 8 * PK_RUN;
            for (int half = 0; half < PK_RUN; half += 32) {
                const __m256i h = five ? pk_ld(g + half) : _mm256_setzero_si256();
                for (int j = 0; j < 4; j++) {
                    const __m256i v = pk_ld(g + PK_RUN * five + PK_RUN * j + half);
                    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    if (five) {
                        lo = _mm256_or_si256(lo, pk_bit(h, 2 * j, 4));
                        hi = _mm256_or_si256(hi, pk_bit(h, 2 * j + 1, 4));
                    }
                    pk_st(c + PK_RUN * j + half, lo);
                    pk_st(c + PK_RUN * (4 + j) + half, hi);
                }
            }
            pk_f16x16(g + dof, &d0, &d1);
            pk_st2(scale + b * R, d0, d1);
            if (has_m) {
                pk_f16x16(g + dof + 32, &e0, &e1);
            } else {
                const __m256 k = _mm256_set1_ps(five ? -16.0f : -8.0f);
                e0 = _mm256_mul_ps(k, d0), e1 = _mm256_mul_ps(k, d1);
            }
            pk_st2(bias + b * R, e0, e1);
        }
        break;
    }
    case QUANT_Q8_0:
        for (int64_t b = 0; b < n / 32; b++, g += 544) {
            memcpy(codes + (size_t)b * 8 * PK_RUN, g, 8 * PK_RUN);
            pk_f16x16(g + 512, &d0, &d1);
            pk_st2(scale + b * R, d0, d1);
            const __m256 k = _mm256_set1_ps(-128.0f);
            pk_st2(bias + b * R, _mm256_mul_ps(k, d0), _mm256_mul_ps(k, d1));
        }
        break;
    case QUANT_Q4_K: case QUANT_Q5_K: {
        /* code run [q][m]'s low nibbles are panel run 16q + m of the block, its high ones 16q + 8 + m;
         * Q5_K: their fifth bits are bits 2q and 2q + 1 of qh run m (before the codes) */
        const int five = wtype == QUANT_Q5_K;
        const size_t so = 2048 + 512 * (size_t)five;
        for (int64_t b = 0; b < n / QK_K; b++, g += so + 320) {
            const uint8_t *src = g + 512 * (size_t)five;
            for (int m = 0; m < 8; m++)
                for (int half = 0; half < PK_RUN; half += 32) {
                    const __m256i h = five ? pk_ld(g + PK_RUN * m + half) : _mm256_setzero_si256();
                    for (int q = 0; q < 4; q++) {
                        const __m256i v = pk_ld(src + 512 * q + PK_RUN * m + half);
                        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                        if (five) {
                            lo = _mm256_or_si256(lo, pk_bit(h, 2 * q, 4));
                            hi = _mm256_or_si256(hi, pk_bit(h, 2 * q + 1, 4));
                        }
                        uint8_t *c = codes + (size_t)(64 * b + 16 * q + m) * PK_RUN + half;
                        pk_st(c, lo);
                        pk_st(c + 8 * PK_RUN, hi);
                    }
                }
            pk_f16x16(g + so + 256, &d0, &d1);
            pk_f16x16(g + so + 288, &e0, &e1);
            for (int j = 0; j < 8; j++) {
                pk_u8x16(g + so + 16 * j, 0, &s0, &s1);
                pk_st2(scale + (b * 8 + j) * R, _mm256_mul_ps(d0, s0), _mm256_mul_ps(d1, s1));
                pk_u8x16(g + so + 128 + 16 * j, 0, &s0, &s1);
                pk_st2(bias + (b * 8 + j) * R, pk_neg(_mm256_mul_ps(e0, s0)), pk_neg(_mm256_mul_ps(e1, s1)));
            }
        }
        break;
    }
    case QUANT_Q2_K: case QUANT_Q3_K: {
        /* code run [h][m]'s bits 2f..2f + 1 (Q3_K: and hm run m's bit 4h + f above them) are
         * panel run 32h + 8f + m of the block */
        const int three = wtype == QUANT_Q3_K;
        const size_t qo = three ? 512 : 0, so = qo + 1024;
        for (int64_t b = 0; b < n / QK_K; b++, g += three ? 1824 : 1344) {
            for (int hh = 0; hh < 2; hh++)
                for (int m = 0; m < 8; m++)
                    for (int half = 0; half < PK_RUN; half += 32) {
                        const __m256i v = pk_ld(g + qo + PK_RUN * (8 * hh + m) + half);
                        const __m256i hv = three ? pk_ld(g + PK_RUN * m + half) : _mm256_setzero_si256();
                        uint8_t *c = codes + (size_t)(64 * b + 32 * hh + m) * PK_RUN + half;
                        for (int f = 0; f < 4; f++) {
                            __m256i x = _mm256_and_si256(pk_sh(v, -2 * f), m2);
                            if (three) x = _mm256_or_si256(x, pk_bit(hv, 4 * hh + f, 2));
                            pk_st(c + 8 * f * PK_RUN, x);
                        }
                    }
            pk_f16x16(g + so + 256, &d0, &d1);
            if (!three) pk_f16x16(g + so + 288, &e0, &e1);
            for (int j = 0; j < 16; j++) {
                const uint8_t *sb = g + so + 16 * j;
                float *sc = scale + (b * 16 + j) * R, *bi = bias + (b * 16 + j) * R;
                if (three) {
                    pk_u8x16(sb, 1, &s0, &s1);
                    s0 = _mm256_mul_ps(d0, s0), s1 = _mm256_mul_ps(d1, s1);
                    pk_st2(sc, s0, s1);
                    const __m256 k = _mm256_set1_ps(-4.0f);
                    pk_st2(bi, _mm256_mul_ps(k, s0), _mm256_mul_ps(k, s1));
                } else {
                    /* low nibble: the scale's code, high: the min's */
                    const __m128i v = _mm_loadu_si128((const __m128i *)sb), k15 = _mm_set1_epi8(15);
                    pk_b16(_mm_and_si128(v, k15), 0, &s0, &s1);
                    pk_st2(sc, _mm256_mul_ps(d0, s0), _mm256_mul_ps(d1, s1));
                    pk_b16(_mm_and_si128(_mm_srli_epi16(v, 4), k15), 0, &s0, &s1);
                    pk_st2(bi, pk_neg(_mm256_mul_ps(e0, s0)), pk_neg(_mm256_mul_ps(e1, s1)));
                }
            }
        }
        break;
    }
    case QUANT_Q6_K:
        /* ql run [h][a][m]'s low nibbles are panel run 32h + 8a + m, its high ones 16 runs on;
         * their two high bits are qh run [h][m]'s bits 2a..2a + 1 and 2a + 4..2a + 5 */
        for (int64_t b = 0; b < n / QK_K; b++, g += 3360) {
            for (int hh = 0; hh < 2; hh++)
                for (int a = 0; a < 2; a++)
                    for (int m = 0; m < 8; m++)
                        for (int half = 0; half < PK_RUN; half += 32) {
                            const __m256i ql = pk_ld(g + PK_RUN * (16 * hh + 8 * a + m) + half);
                            const __m256i qh = pk_ld(g + 2048 + PK_RUN * (8 * hh + m) + half);
                            const __m256i lo = _mm256_or_si256(_mm256_and_si256(ql, m4),
                                                               _mm256_and_si256(pk_sh(qh, 4 - 2 * a), m0x30));
                            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), m4),
                                                               _mm256_and_si256(pk_sh(qh, -2 * a), m0x30));
                            uint8_t *c = codes + (size_t)(64 * b + 32 * hh + 8 * a + m) * PK_RUN + half;
                            pk_st(c, lo);
                            pk_st(c + 16 * PK_RUN, hi);
                        }
            pk_f16x16(g + 3328, &d0, &d1);
            const __m256 k = _mm256_set1_ps(-32.0f);
            for (int j = 0; j < 16; j++) {
                pk_u8x16(g + 3072 + 16 * j, 1, &s0, &s1);
                s0 = _mm256_mul_ps(d0, s0), s1 = _mm256_mul_ps(d1, s1);
                pk_st2(scale + (b * 16 + j) * R, s0, s1);
                pk_st2(bias + (b * 16 + j) * R, _mm256_mul_ps(k, s0), _mm256_mul_ps(k, s1));
            }
        }
        break;
    default: break;
    }
}
