/* Panels for the prompt case (quant/dot.h): unpacking 16 weight rows of any quantised type into
 * unsigned codes with an f32 scale and bias per sub-block (weight = scale * code + bias, the
 * operation order of quant/dequant.c), interleaved 4 codes per row; the portable panel kernel;
 * and the dispatch to the SIMD ones. */
/* Unpacking is plain byte work that GCC vectorises at -O3 (not at the project's -O2): 3-4x faster
 * for Q4_0, Q4_K, Q8_0 (0.13-0.15 ns a weight on Zen 5), which moves the token count where
 * panels beat the row kernels from 20-36 down to 6-13. The Q5 types' bit gathers do not
 * vectorise (0.6-0.8 ns a weight). The SIMD paths unpack the interleaved groups with their own
 * 256-bit form (dot_simd_pack.h); this one serves the portable path and checks theirs. */
#pragma GCC optimize("O3")
#include <string.h>
#include "dot_kernels.h"
#include "quant.h"
#include "rows.h"

static const quant_dot_table *const panel_tables[QUANT_ISA_COUNT] = {
    &quant_dot_table_ref, &quant_dot_table_avx2, &quant_dot_table_avxvnni, &quant_dot_table_avx512,
    &quant_dot_table_avx512w,
};

/* Sub-block length of a type's panel (0: no panel) and its kind. */
static int panel_sub(uint32_t t) {
    switch (t) {
    case QUANT_Q4_0: case QUANT_Q4_1: case QUANT_Q5_0: case QUANT_Q5_1: case QUANT_Q8_0:
    case QUANT_Q4_K: case QUANT_Q5_K: return 32;
    case QUANT_Q2_K: case QUANT_Q3_K: case QUANT_Q6_K: return 16;
    default: return 0;
    }
}

static quant_panel_kind panel_kind(uint32_t t) {
    if (panel_sub(t) == 16) return QUANT_PANEL_16_Q8K;
    return t == QUANT_Q4_K || t == QUANT_Q5_K ? QUANT_PANEL_32_Q8K : QUANT_PANEL_32_Q8;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One row into codes[n], scale[n / L], bias[n / L]. */
static void panel_row(uint32_t t, int64_t n, const void *row, uint8_t *code, float *scale, float *bias) {
    switch (t) {
    case QUANT_Q4_0: case QUANT_Q4_1: case QUANT_Q5_0: case QUANT_Q5_1: {
        const uint8_t *b = row;
        size_t bs = quant_traits_of(t)->block_bytes;
        for (int64_t i = 0; i < n / 32; i++, b += bs, code += 32) {
            float d = quant_f16_to_f32((uint16_t)(b[0] | b[1] << 8));
            int has_m = t == QUANT_Q4_1 || t == QUANT_Q5_1, has_h = t == QUANT_Q5_0 || t == QUANT_Q5_1;
            const uint8_t *qh = b + 2 + 2 * has_m, *qs = qh + 4 * has_h;
            uint32_t h = has_h ? le32(qh) : 0;
            for (int j = 0; j < 16; j++) {
                code[j] = (uint8_t)((qs[j] & 15) | ((h >> j) & 1) << 4);
                code[j + 16] = (uint8_t)((qs[j] >> 4) | ((h >> (j + 16)) & 1) << 4);
            }
            scale[i] = d;
            bias[i] = has_m ? quant_f16_to_f32((uint16_t)(b[2] | b[3] << 8)) : (has_h ? -16.0f : -8.0f) * d;
        }
        break;
    }
    case QUANT_Q8_0: {
        const block_q8_0 *b = row;
        for (int64_t i = 0; i < n / 32; i++, code += 32) {
            float d = quant_f16_to_f32(b[i].d);
            for (int j = 0; j < 32; j++) code[j] = (uint8_t)(b[i].qs[j] + 128);
            scale[i] = d;
            bias[i] = -128.0f * d;
        }
        break;
    }
    case QUANT_Q2_K: {
        const block_q2_K *b = row;
        for (int64_t i = 0; i < n / QK_K; i++, code += QK_K, scale += 16, bias += 16) {
            float d = quant_f16_to_f32(b[i].d), dmin = quant_f16_to_f32(b[i].dmin);
            for (int s = 0; s < 16; s++) {
                scale[s] = d * (float)(b[i].scales[s] & 15);
                bias[s] = -(dmin * (float)(b[i].scales[s] >> 4));
            }
            for (int h = 0; h < 2; h++)
                for (int f = 0; f < 4; f++)
                    for (int l = 0; l < 32; l++)
                        code[128 * h + 32 * f + l] = (uint8_t)((b[i].qs[32 * h + l] >> (2 * f)) & 3);
        }
        break;
    }
    case QUANT_Q3_K: {
        const block_q3_K *b = row;
        for (int64_t i = 0; i < n / QK_K; i++, code += QK_K, scale += 16, bias += 16) {
            float d = quant_f16_to_f32(b[i].d);
            for (int s = 0; s < 16; s++) {
                scale[s] = d * (float)quant_k3_scale(b[i].scales, s);
                bias[s] = -4.0f * scale[s];
            }
            for (int h = 0; h < 2; h++)
                for (int f = 0; f < 4; f++)
                    for (int l = 0; l < 32; l++)
                        code[128 * h + 32 * f + l] = (uint8_t)(((b[i].qs[32 * h + l] >> (2 * f)) & 3) |
                                                               ((b[i].hmask[l] >> (4 * h + f)) & 1) << 2);
        }
        break;
    }
    case QUANT_Q4_K: case QUANT_Q5_K: {
        const uint8_t *b = row;
        size_t bs = quant_traits_of(t)->block_bytes;
        for (int64_t i = 0; i < n / QK_K; i++, b += bs, code += QK_K, scale += 8, bias += 8) {
            const block_q4_K *k = (const block_q4_K *)b;  /* Q5_K starts with the same fields */
            float d = quant_f16_to_f32(k->d), dmin = quant_f16_to_f32(k->dmin);
            const uint8_t *qh = t == QUANT_Q5_K ? ((const block_q5_K *)b)->qh : NULL;
            const uint8_t *qs = t == QUANT_Q5_K ? ((const block_q5_K *)b)->qs : k->qs;
            for (int s = 0; s < 8; s++) {
                uint8_t sc, m;
                quant_k4_scale_min(k->scales, s, &sc, &m);
                scale[s] = d * (float)sc;
                bias[s] = -(dmin * (float)m);
            }
            for (int g = 0; g < 4; g++)
                for (int l = 0; l < 32; l++) {
                    int h0 = qh ? (qh[l] >> (2 * g)) & 1 : 0, h1 = qh ? (qh[l] >> (2 * g + 1)) & 1 : 0;
                    code[64 * g + l] = (uint8_t)((qs[32 * g + l] & 15) | h0 << 4);
                    code[64 * g + 32 + l] = (uint8_t)((qs[32 * g + l] >> 4) | h1 << 4);
                }
        }
        break;
    }
    case QUANT_Q6_K: {
        const block_q6_K *b = row;
        for (int64_t i = 0; i < n / QK_K; i++, code += QK_K, scale += 16, bias += 16) {
            float d = quant_f16_to_f32(b[i].d);
            for (int s = 0; s < 16; s++) {
                scale[s] = d * (float)b[i].scales[s];
                bias[s] = -32.0f * scale[s];
            }
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
                uint8_t *c = code + 128 * h;
                for (int l = 0; l < 32; l++) {
                    c[l] = (uint8_t)((ql[l] & 15) | (qh[l] & 3) << 4);
                    c[l + 32] = (uint8_t)((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4);
                    c[l + 64] = (uint8_t)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
                    c[l + 96] = (uint8_t)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
                }
            }
        }
        break;
    }
    default: break;
    }
}

int quant_panel_usable(quant_isa isa, uint32_t wtype) {
    if (!panel_sub(wtype) || (unsigned)isa >= QUANT_ISA_COUNT || !quant_isa_supported(isa)) return 0;
    const quant_dot_table *tb = panel_tables[isa];
    return tb->panel[panel_kind(wtype)] && (wtype != QUANT_Q8_0 || tb->panel_wide);
}

size_t quant_panel_bytes(uint32_t wtype, int64_t n) {
    int L = panel_sub(wtype);
    return L ? (size_t)n * QUANT_PANEL_ROWS + 2 * (size_t)(n / L) * QUANT_PANEL_ROWS * sizeof(float) : 0;
}

void quant_panel_pack(uint32_t wtype, int64_t n, const void *w, size_t w_stride, int nr, void *panel) {
    int L = panel_sub(wtype);
    int64_t n_sub = n / L;
    uint8_t *codes = panel;
    float *scale = (float *)(codes + (size_t)n * QUANT_PANEL_ROWS), *bias = scale + n_sub * QUANT_PANEL_ROWS;
    /* per row: codes in a scratch row, then 4-byte groups scattered to the interleave */
    uint8_t tmp[4096];
    float rs[256], rb[256];
    for (int r = 0; r < QUANT_PANEL_ROWS; r++) {
        for (int64_t c0 = 0; c0 < n; c0 += 4096) {
            int64_t len = n - c0 < 4096 ? n - c0 : 4096;  /* a multiple of 256 or of 32 */
            if (r < nr) {
                panel_row(wtype, len, (const uint8_t *)w + (size_t)r * w_stride + quant_row_bytes(wtype, c0), tmp, rs, rb);
            } else {
                memset(tmp, 0, (size_t)len);
                memset(rs, 0, sizeof rs);
                memset(rb, 0, sizeof rb);
            }
            for (int64_t g = 0; g < len / 4; g++) memcpy(codes + (size_t)(c0 / 4 + g) * 4 * QUANT_PANEL_ROWS + 4 * r, tmp + 4 * g, 4);
            for (int64_t s = 0; s < len / L; s++) {
                scale[(c0 / L + s) * QUANT_PANEL_ROWS + r] = rs[s];
                bias[(c0 / L + s) * QUANT_PANEL_ROWS + r] = rb[s];
            }
        }
    }
}

static void panel_ref(quant_panel_kind k, int64_t n, const void *panel, int nr, const void *x, size_t xs,
                      int64_t n_tok, float *out, size_t os) {
    int L = k == QUANT_PANEL_16_Q8K ? 16 : 32;
    const uint8_t *codes = panel;
    const float *scale = quant_panel_scale(panel, n), *bias = scale + (n / L) * QUANT_PANEL_ROWS;
    for (int64_t t = 0; t < n_tok; t++) {
        const uint8_t *xr = (const uint8_t *)x + (size_t)t * xs;
        for (int r = 0; r < nr; r++) {
            float acc = 0.0f;
            for (int64_t s = 0; s < n / L; s++) {
                float dx, xsum;
                const int8_t *q = quant_panel_act(k, xr, s, L, &dx, &xsum);
                int isum = 0;
                for (int j = 0; j < L; j++) {
                    int64_t c = s * L + j;
                    isum += codes[(size_t)(c / 4) * 4 * QUANT_PANEL_ROWS + 4 * r + c % 4] * q[j];
                }
                acc += scale[s * QUANT_PANEL_ROWS + r] * dx * (float)isum + bias[s * QUANT_PANEL_ROWS + r] * xsum;
            }
            out[(size_t)t * os + (size_t)r] = acc;
        }
    }
}

#define PANEL_REF(kind, name)                                                                        \
    void name(int64_t n, const void *p, int nr, const void *x, size_t xs, int64_t nt, float *o, \
                     size_t os) {                                                                   \
        panel_ref(kind, n, p, nr, x, xs, nt, o, os);                                                \
    }
PANEL_REF(QUANT_PANEL_32_Q8, quant_panel_ref_32_q8)
PANEL_REF(QUANT_PANEL_32_Q8K, quant_panel_ref_32_q8k)
PANEL_REF(QUANT_PANEL_16_Q8K, quant_panel_ref_16_q8k)

/* The table whose panel kernels serve (isa, wtype): isa's, or the nearest lower path that has them. */
static const quant_dot_table *panel_table(quant_isa isa, uint32_t wtype) {
    int i = (unsigned)isa < QUANT_ISA_COUNT ? (int)isa : QUANT_ISA_COUNT - 1;
    while (i > 0 && !quant_panel_usable((quant_isa)i, wtype)) i--;
    return panel_tables[i];
}

void quant_panel_dot(quant_isa isa, uint32_t wtype, int64_t n, const void *panel, int nr, const void *xq,
                     size_t xq_stride, int64_t n_tok, float *out, size_t out_stride) {
    panel_table(isa, wtype)->panel[panel_kind(wtype)](n, panel, nr, xq, xq_stride, n_tok, out, out_stride);
}

void quant_panel_dot_pair(quant_isa isa, uint32_t wtype, int64_t n, const void *panel, int nr, const void *xq,
                          size_t xq_stride, int64_t n_tok, float *out, size_t out_stride) {
    const quant_dot_table *tb = panel_table(isa, wtype);
    quant_panel_kern k = tb->panel_pair[panel_kind(wtype)];
    if (k) {
        k(n, panel, nr, xq, xq_stride, n_tok, out, out_stride);
        return;
    }
    for (int64_t t = 0; t < n_tok; t++) {
        float two[2][QUANT_PANEL_ROWS];
        tb->panel[panel_kind(wtype)](n, panel, nr, (const uint8_t *)xq + (size_t)(2 * t) * xq_stride, xq_stride, 2,
                                     two[0], QUANT_PANEL_ROWS);
        for (int r = 0; r < nr; r++) out[(size_t)t * out_stride + (size_t)r] = two[0][r] + two[1][r];
    }
}

size_t quant_panel_x_bytes(uint32_t wtype, int64_t n) {
    if (!panel_sub(wtype) || n <= 0 || n % 32) return 0;
    if (quant_act_of(wtype) == QUANT_ACT_Q8) return (size_t)n * 8 + (size_t)(n / 32) * (8 + 4) * sizeof(float);
    if (n % QK_K) return 0;
    return (size_t)n * 8 + ((size_t)(n / QK_K) * 8 + (size_t)(n / 16) * 4 + (size_t)(n / 32) * 4) * sizeof(float);
}

int quant_panel_x_usable(quant_isa isa, uint32_t wtype) {
    return panel_sub(wtype) && panel_table(isa, wtype)->panel_pair_x[panel_kind(wtype)] != NULL;
}

void quant_panel_x_pack(uint32_t wtype, int64_t n, const void *xq, size_t xq_stride, int n_tok, void *px) {
    enum { R = 2 * QUANT_PANEL_XTOK };
    int q8 = quant_act_of(wtype) == QUANT_ACT_Q8;
    if (n_tok < QUANT_PANEL_XTOK) memset(px, 0, quant_panel_x_bytes(wtype, n));
    /* codes and scales by 32-value sub-block, as the pair kernels read them (quant_panel_act) */
    quant_panel_kind k32 = q8 ? QUANT_PANEL_32_Q8 : QUANT_PANEL_32_Q8K;
    int64_t per_d = q8 ? 32 : QK_K; /* values under one activation scale */
    int32_t *code = px;
    float *dx = (float *)quant_panel_x_dx(px, n);
    for (int64_t s = 0; s < n / 32; s++) {
        const int8_t *q[R];
        float d[R], xs;
        for (int r = 0; r < 2 * n_tok; r++)
            q[r] = quant_panel_act(k32, (const uint8_t *)xq + (size_t)r * xq_stride, s, 32, &d[r], &xs);
        /* the sub-block's 8 steps of the rows' 4 bytes: 256 contiguous bytes */
        for (int g = 0; g < 8; g++)
            for (int r = 0; r < 2 * n_tok; r++) memcpy(&code[(s * 8 + g) * R + r], q[r] + 4 * g, 4);
        if ((s * 32) % per_d == 0)
            for (int r = 0; r < 2 * n_tok; r++) dx[(s * 32 / per_d) * R + r] = d[r];
    }
    /* each pair's sub-block sums: hi's plus lo's, each as quant_panel_act gives it, in the pair
     * kernels' order; both sub-block lengths for Q8_K (its 16- and 32-weight types share it) */
    const quant_panel_kind kinds[2] = {k32, QUANT_PANEL_16_Q8K};
    for (int i = 0; i < (q8 ? 1 : 2); i++) {
        int L = kinds[i] == QUANT_PANEL_16_Q8K ? 16 : 32;
        float *sums = (float *)quant_panel_x_sums(kinds[i], px, n);
        for (int p = 0; p < n_tok; p++) {
            const uint8_t *hi = (const uint8_t *)xq + (size_t)(2 * p) * xq_stride, *lo = hi + xq_stride;
            for (int64_t s = 0; s < n / L; s++) {
                float d, xh, xl;
                quant_panel_act(kinds[i], hi, s, L, &d, &xh);
                quant_panel_act(kinds[i], lo, s, L, &d, &xl);
                sums[s * QUANT_PANEL_XTOK + p] = xh + xl;
            }
        }
    }
}

void quant_panel_dot_pair_x(quant_isa isa, uint32_t wtype, int64_t n, const void *panel, int nr, const void *px,
                            int n_tok, float *out, size_t out_stride) {
    panel_table(isa, wtype)->panel_pair_x[panel_kind(wtype)](n, panel, nr, px, n_tok, out, out_stride);
}

/* Panels from interleaved groups (dot_ilv.c's layouts): a group's 4-byte runs are already the
 * panel's [16 rows][4 codes] runs, one nibble each, so this is a split of nibbles (vectorised
 * at -O3) and the same scale and bias arithmetic as panel_row, giving the same panel bytes;
 * ~10x faster than unpacking the stored rows, which took 6-8% of a prompt's time. The SIMD paths
 * have their own form of it (dot_simd_pack.h), the same bytes. */
void quant_panel_pack_ilv_ref(uint32_t wtype, int64_t n, const void *group, void *panel) {
    enum { R = QUANT_PANEL_ROWS, RUN = 4 * QUANT_PANEL_ROWS };
    int L = panel_sub(wtype);
    uint8_t *codes = panel;
    float *scale = (float *)(codes + (size_t)n * R), *bias = scale + (n / L) * R;
    const uint8_t *g = group;
    /* the low and high nibbles of run src into panel runs lo and hi */
#define SPLIT(src, lo, hi)                                                         \
    for (int i = 0; i < RUN; i++) {                                                \
        codes[(size_t)(lo) * RUN + i] = (uint8_t)((src)[i] & 15);                  \
        codes[(size_t)(hi) * RUN + i] = (uint8_t)((src)[i] >> 4);                  \
    }
    switch (wtype) {
    case QUANT_Q4_0: case QUANT_Q4_1: case QUANT_Q5_0: case QUANT_Q5_1: {
        /* Q5: the fifth bits from the qh run before the codes (dot_ilv.c): byte k of a row, bits 2j
         * and 2j + 1 */
        int has_m = wtype == QUANT_Q4_1 || wtype == QUANT_Q5_1, five = wtype == QUANT_Q5_0 || wtype == QUANT_Q5_1;
        size_t dof = 256 + 64 * (size_t)five, bs = dof + 32 + 32 * (size_t)has_m;
        for (int64_t b = 0; b < n / 32; b++, g += bs) {
            for (int j = 0; j < 4; j++) {
                SPLIT(g + RUN * five + RUN * j, 8 * b + j, 8 * b + 4 + j)
                if (five)
                    for (int i = 0; i < RUN; i++) {
                        codes[(size_t)(8 * b + j) * RUN + i] |= (uint8_t)(((g[i] >> (2 * j)) & 1) << 4);
                        codes[(size_t)(8 * b + 4 + j) * RUN + i] |= (uint8_t)(((g[i] >> (2 * j + 1)) & 1) << 4);
                    }
            }
            for (int r = 0; r < R; r++) {
                uint16_t h;
                memcpy(&h, g + dof + 2 * r, 2);
                float d = quant_f16_to_f32(h);
                scale[b * R + r] = d;
                if (has_m) memcpy(&h, g + dof + 32 + 2 * r, 2);
                bias[b * R + r] = has_m ? quant_f16_to_f32(h) : (five ? -16.0f : -8.0f) * d;
            }
        }
        break;
    }
    case QUANT_Q8_0:
        for (int64_t b = 0; b < n / 32; b++, g += 544) {
            memcpy(codes + (size_t)b * 8 * RUN, g, 8 * RUN);
            for (int r = 0; r < R; r++) {
                uint16_t h;
                memcpy(&h, g + 512 + 2 * r, 2);
                float d = quant_f16_to_f32(h);
                scale[b * R + r] = d;
                bias[b * R + r] = -128.0f * d;
            }
        }
        break;
    case QUANT_Q4_K: case QUANT_Q5_K: {
        /* Q5_K: qh run m (before the codes) holds, at bits 2q and 2q + 1, the fifth bits of codes
         * run [q][m]'s nibbles */
        const int five = wtype == QUANT_Q5_K;
        const size_t so = 2048 + 512 * (size_t)five; /* the scales (dot_ilv.c) */
        for (int64_t b = 0; b < n / QK_K; b++, g += so + 320) {
            if (!five) {
                for (int q = 0; q < 4; q++)
                    for (int m = 0; m < 8; m++) {
                        size_t lo = (size_t)(64 * b + 16 * q + m), hi = lo + 8;
                        SPLIT(g + 512 * q + RUN * m, lo, hi)
                    }
            } else {
                /* each code and its fifth bit written once, a qh run read once for its four
                 * code runs (q unrolled: constant shifts); a pass of SPLIT and then one OR-ing
                 * the fifth bits in took a fifth of a Q5_K prompt */
                for (int m = 0; m < 8; m++) {
                    const uint8_t *restrict hb = g + RUN * m, *restrict src = g + 512 + RUN * m;
                    uint8_t *restrict c = codes + (size_t)(64 * b + m) * RUN;
                    for (int i = 0; i < RUN; i++) {
                        const uint8_t h = hb[i];
                        for (int q = 0; q < 4; q++) {
                            const uint8_t v = src[512 * q + i];
                            c[16 * q * RUN + i] = (uint8_t)((v & 15) | ((h >> (2 * q)) & 1) << 4);
                            c[(16 * q + 8) * RUN + i] = (uint8_t)((v >> 4) | ((h >> (2 * q + 1)) & 1) << 4);
                        }
                    }
                }
            }
            for (int r = 0; r < R; r++) {
                uint16_t h;
                memcpy(&h, g + so + 256 + 2 * r, 2);
                float d = quant_f16_to_f32(h);
                memcpy(&h, g + so + 288 + 2 * r, 2);
                float dmin = quant_f16_to_f32(h);
                for (int j = 0; j < 8; j++) {
                    scale[(b * 8 + j) * R + r] = d * (float)g[so + 16 * j + r];
                    bias[(b * 8 + j) * R + r] = -(dmin * (float)g[so + 128 + 16 * j + r]);
                }
            }
        }
        break;
    }
    case QUANT_Q2_K: case QUANT_Q3_K: {
        /* code run [h][m]'s bits 2f..2f + 1 (Q3_K: and hm run m's bit 4h + f above them) are
         * weights 128h + 32f + 4m + k: panel run 32h + 8f + m of the block */
        const int three = wtype == QUANT_Q3_K;
        const size_t qo = three ? 512 : 0, so = qo + 1024;
        for (int64_t b = 0; b < n / QK_K; b++, g += three ? 1824 : 1344) {
            /* a code run and its hm run read once for their four fields (f unrolled: constant
             * shifts), not once per field */
            for (int h = 0; h < 2; h++)
                for (int m = 0; m < 8; m++) {
                    const uint8_t *q = g + qo + RUN * (8 * h + m), *hm = g + RUN * m;
                    uint8_t *c = codes + (size_t)(64 * b + 32 * h + m) * RUN;
                    for (int i = 0; i < RUN; i++) {
                        const uint8_t v = q[i], hv = three ? (uint8_t)(hm[i] >> (4 * h)) : 0;
                        c[i] = (uint8_t)((v & 3) | (hv & 1) << 2);
                        c[8 * RUN + i] = (uint8_t)((v >> 2 & 3) | (hv >> 1 & 1) << 2);
                        c[16 * RUN + i] = (uint8_t)((v >> 4 & 3) | (hv >> 2 & 1) << 2);
                        c[24 * RUN + i] = (uint8_t)((v >> 6) | (hv >> 3 & 1) << 2);
                    }
                }
            for (int r = 0; r < R; r++) {
                uint16_t hv;
                memcpy(&hv, g + so + 256 + 2 * r, 2);
                float d = quant_f16_to_f32(hv), dmin = 0.0f;
                if (!three) memcpy(&hv, g + so + 288 + 2 * r, 2), dmin = quant_f16_to_f32(hv);
                for (int j = 0; j < 16; j++) {
                    const uint8_t sb = g[so + 16 * j + r];
                    float sc = three ? d * (float)(int8_t)sb : d * (float)(sb & 15);
                    scale[(b * 16 + j) * R + r] = sc;
                    bias[(b * 16 + j) * R + r] = three ? -4.0f * sc : -(dmin * (float)(sb >> 4));
                }
            }
        }
        break;
    }
    case QUANT_Q6_K:
        for (int64_t b = 0; b < n / QK_K; b++, g += 3360) {
            for (int h = 0; h < 2; h++)
                for (int a = 0; a < 2; a++)
                    for (int m = 0; m < 8; m++) {
                        const uint8_t *ql = g + RUN * (16 * h + 8 * a + m), *qh = g + 2048 + RUN * (8 * h + m);
                        size_t lo = (size_t)(64 * b + 32 * h + 8 * a + m), hi = lo + 16;
                        for (int i = 0; i < RUN; i++) {
                            codes[lo * RUN + i] = (uint8_t)((ql[i] & 15) | ((qh[i] >> (2 * a)) & 3) << 4);
                            codes[hi * RUN + i] = (uint8_t)((ql[i] >> 4) | ((qh[i] >> (2 * a + 4)) & 3) << 4);
                        }
                    }
            for (int r = 0; r < R; r++) {
                uint16_t h;
                memcpy(&h, g + 3328 + 2 * r, 2);
                float d = quant_f16_to_f32(h);
                for (int j = 0; j < 16; j++) {
                    float sc = d * (float)(int8_t)g[3072 + 16 * j + r];
                    scale[(b * 16 + j) * R + r] = sc;
                    bias[(b * 16 + j) * R + r] = -32.0f * sc;
                }
            }
        }
        break;
    default: break;
    }
#undef SPLIT
}

void quant_panel_pack_ilv(quant_isa isa, uint32_t wtype, int64_t n, const void *group, void *panel) {
    if ((unsigned)isa >= QUANT_ISA_COUNT) isa = QUANT_ISA_COUNT - 1;
    void (*k)(uint32_t, int64_t, const void *, void *) = NULL;
    for (int i = isa; i >= 0 && !k; i--)
        if (quant_isa_supported((quant_isa)i)) k = panel_tables[i]->pack_ilv;
    k(wtype, n, group, panel);
}
