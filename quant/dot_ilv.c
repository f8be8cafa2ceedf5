/* Interleaved row groups for the decode case (quant/dot.h): repacking QUANT_ILV_ROWS stored rows
 * into one group, and the dispatch to the SIMD kernels (dot_simd.h). Layouts, per block of a
 * group (r: row 0..15, k: byte 0..3 of a 4-byte run; each group's blocks follow each other):
 *   Q4_0  qs[4][16][4] u8: run j of row r = the row's qs[4j..4j+3] (low nibbles: weights 4j+k,
 *         high: 16+4j+k) | d[16] f16                                                 288 bytes
 *   Q4_1  as Q4_0 | d[16] f16 | m[16] f16                                                320 bytes
 *   Q5_0  qh[16][4]: byte k of row r's run holds, at bits 2j and 2j + 1, the fifth bits of weights
 *         4j+k and 16+4j+k (j = 0..3: the qs run and nibble they go with) | qs as Q4_0 (the codes'
 *         low 4 bits) | d[16] f16                                                     352 bytes
 *   Q5_1  as Q5_0 | m[16] f16                                                        384 bytes
 *   Q8_0  qs[8][16][4] u8: run j of row r = the row's qs[4j..4j+3] + 128 (unsigned, as dpbusd
 *         takes them; the offset meets the activation sums) | d[16] f16                544 bytes
 *   Q4_K  qs[4][8][16][4]: [g][m] = the row's qs[32g+4m..+3] (low nibbles: sub-block 2g, high:
 *         2g+1, weights 4m+k of it) | sc[8][16] u8 | mn[8][16] u8 | d[16] f16 | dmin[16] f16
 *                                                                                     2368 bytes
 *   Q5_K  qh[8][16][4]: [m] = the row's qh[4m..+3] (bits 2g and 2g+1: the fifth bits of qs run
 *         [g][m]'s low and high nibbles) | qs, sc, mn, d, dmin as Q4_K                  2880 bytes
 * The Q5 types' qh runs (and Q3_K's hm runs) come first: the kernels need them from the block's
 * first step, and a block is requested in address order (with them after the codes, a Q5_K
 * decode ran ~1.5x slower).
 *   Q2_K  qs[2][8][16][4]: [h][m] = the row's qs[32h+4m..+3] (bits 2f..2f+1: weight 128h+32f+4m+k)
 *         | scales[16][16] u8 as stored (scale | min << 4) | d[16] f16 | dmin[16] f16   1344 bytes
 *   Q3_K  hm[8][16][4]: [m] = the row's hmask[4m..+3] (bit 4h+f: the third bit of weight
 *         128h+32f+4m+k) | qs as Q2_K | sc[16][16] s8 (the 6-bit scale - 32) | d[16] f16
 *                                                                                     1824 bytes
 *   Q6_K  ql[2][2][8][16][4]: [h][a][m] = ql[64h+32a+4m..+3] (low nibbles: weights
 *         128h+32a+4m+k, high: +64) | qh[2][8][16][4]: [h][m] = qh[32h+4m..+3] (bits 2a..2a+1
 *         for the low nibble of ql run [h][a][m], 2a+4.. for its high) | sc[16][16] s8 |
 *         d[16] f16                                                                   3360 bytes */
#include <string.h>
#include "dot_kernels.h"
#include "quant.h"
#include "rows.h"

static const quant_dot_table *const ilv_tables[QUANT_ISA_COUNT] = {
    &quant_dot_table_ref, &quant_dot_table_avx2, &quant_dot_table_avxvnni, &quant_dot_table_avx512,
    &quant_dot_table_avx512w,
};

enum { R = QUANT_ILV_ROWS };

/* Bytes of one block of a group; 0 for types without an interleaved form. */
static size_t ilv_block_bytes(uint32_t t) {
    switch (t) {
    case QUANT_Q4_0: return 16 * R + 2 * R;
    case QUANT_Q4_1: return 16 * R + 4 * R;
    case QUANT_Q5_0: return 16 * R + 4 * R + 2 * R;
    case QUANT_Q5_1: return 16 * R + 4 * R + 4 * R;
    case QUANT_Q8_0: return 32 * R + 2 * R;
    case QUANT_Q4_K: return 128 * R + 16 * R + 4 * R;
    case QUANT_Q5_K: return 128 * R + 32 * R + 16 * R + 4 * R;
    case QUANT_Q2_K: return 64 * R + 16 * R + 4 * R;
    case QUANT_Q3_K: return 32 * R + 64 * R + 16 * R + 2 * R;
    case QUANT_Q6_K: return 128 * R + 64 * R + 16 * R + 2 * R;
    default: return 0;
    }
}

int quant_ilv_usable(quant_isa isa, uint32_t wtype) {
    if ((unsigned)isa >= QUANT_ISA_COUNT || wtype >= QUANT_TYPE_COUNT || !quant_isa_supported(isa)) return 0;
    return ilv_block_bytes(wtype) && ilv_tables[isa]->ilv[wtype] != NULL;
}

size_t quant_ilv_group_bytes(uint32_t wtype, int64_t n) {
    const quant_traits *tr = quant_traits_of(wtype);
    if (!tr || n <= 0 || n % tr->block_elems) return 0;
    return (size_t)(n / tr->block_elems) * ilv_block_bytes(wtype);
}

/* The 4 bytes at src into run (row r) of a [..][16][4] array at dst. */
static void put4(uint8_t *dst, int r, const uint8_t *src) { memcpy(dst + 4 * r, src, 4); }

void quant_ilv_pack(uint32_t wtype, int64_t n, const void *w, size_t w_stride, int nr, void *group) {
    size_t bb = ilv_block_bytes(wtype);
    int64_t nb = n / quant_traits_of(wtype)->block_elems;
    uint8_t *g = group;
    memset(g, 0, (size_t)nb * bb);
    for (int r = 0; r < nr; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * w_stride;
        for (int64_t i = 0; i < nb; i++) {
            uint8_t *o = g + (size_t)i * bb;
            switch (wtype) {
            case QUANT_Q4_0: case QUANT_Q4_1: {
                int has_m = wtype == QUANT_Q4_1;
                const uint8_t *b = row + (size_t)i * (has_m ? sizeof(block_q4_1) : sizeof(block_q4_0));
                const uint8_t *qs = b + 2 + 2 * has_m;
                for (int j = 0; j < 4; j++) put4(o + 64 * j, r, qs + 4 * j);
                memcpy(o + 256 + 2 * r, b, 2);
                if (has_m) memcpy(o + 288 + 2 * r, b + 2, 2);
                break;
            }
            case QUANT_Q5_0: case QUANT_Q5_1: {
                int has_m = wtype == QUANT_Q5_1;
                const uint8_t *b = row + (size_t)i * (has_m ? sizeof(block_q5_1) : sizeof(block_q5_0));
                const uint8_t *qh = b + 2 + 2 * has_m, *qs = qh + 4;
                uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
                for (int k = 0; k < 4; k++) {
                    uint8_t v = 0;
                    for (int j = 0; j < 4; j++)
                        v |= (uint8_t)(((h >> (4 * j + k)) & 1) << (2 * j) | ((h >> (16 + 4 * j + k)) & 1) << (2 * j + 1));
                    o[4 * r + k] = v;
                }
                for (int j = 0; j < 4; j++) put4(o + 64 + 64 * j, r, qs + 4 * j);
                memcpy(o + 320 + 2 * r, b, 2);
                if (has_m) memcpy(o + 352 + 2 * r, b + 2, 2);
                break;
            }
            case QUANT_Q8_0: {
                const block_q8_0 *b = (const block_q8_0 *)row + i;
                for (int j = 0; j < 8; j++)
                    for (int k = 0; k < 4; k++) o[64 * j + 4 * r + k] = (uint8_t)(b->qs[4 * j + k] + 128);
                memcpy(o + 512 + 2 * r, &b->d, 2);
                break;
            }
            case QUANT_Q4_K: case QUANT_Q5_K: {
                /* Q5_K's first fields are Q4_K's; its qh runs go before the codes */
                const int five = wtype == QUANT_Q5_K;
                const block_q4_K *b = (const block_q4_K *)(row + (size_t)i * (five ? sizeof(block_q5_K) : sizeof(block_q4_K)));
                const uint8_t *qs = five ? ((const block_q5_K *)b)->qs : b->qs;
                uint8_t *sc = o + 2048 + 512 * five;
                for (int q = 0; q < 4; q++)
                    for (int m = 0; m < 8; m++) put4(o + 512 * five + 512 * q + 64 * m, r, qs + 32 * q + 4 * m);
                if (five)
                    for (int m = 0; m < 8; m++) put4(o + 64 * m, r, ((const block_q5_K *)b)->qh + 4 * m);
                for (int j = 0; j < 8; j++)
                    quant_k4_scale_min(b->scales, j, sc + 16 * j + r, sc + 128 + 16 * j + r);
                memcpy(sc + 256 + 2 * r, &b->d, 2);
                memcpy(sc + 288 + 2 * r, &b->dmin, 2);
                break;
            }
            case QUANT_Q2_K: {
                const block_q2_K *b = (const block_q2_K *)row + i;
                for (int h = 0; h < 2; h++)
                    for (int m = 0; m < 8; m++) put4(o + 64 * (8 * h + m), r, b->qs + 32 * h + 4 * m);
                for (int j = 0; j < 16; j++) o[1024 + 16 * j + r] = b->scales[j];
                memcpy(o + 1280 + 2 * r, &b->d, 2);
                memcpy(o + 1312 + 2 * r, &b->dmin, 2);
                break;
            }
            case QUANT_Q3_K: {
                const block_q3_K *b = (const block_q3_K *)row + i;
                for (int m = 0; m < 8; m++) put4(o + 64 * m, r, b->hmask + 4 * m);
                for (int h = 0; h < 2; h++)
                    for (int m = 0; m < 8; m++) put4(o + 512 + 64 * (8 * h + m), r, b->qs + 32 * h + 4 * m);
                for (int j = 0; j < 16; j++) o[1536 + 16 * j + r] = (uint8_t)(int8_t)quant_k3_scale(b->scales, j);
                memcpy(o + 1792 + 2 * r, &b->d, 2);
                break;
            }
            default: {  /* Q6_K */
                const block_q6_K *b = (const block_q6_K *)row + i;
                for (int h = 0; h < 2; h++)
                    for (int m = 0; m < 8; m++) {
                        for (int a = 0; a < 2; a++) put4(o + 64 * (16 * h + 8 * a + m), r, b->ql + 64 * h + 32 * a + 4 * m);
                        put4(o + 2048 + 64 * (8 * h + m), r, b->qh + 32 * h + 4 * m);
                    }
                for (int j = 0; j < 16; j++) o[3072 + 16 * j + r] = (uint8_t)b->scales[j];
                memcpy(o + 3328 + 2 * r, &b->d, 2);
                break;
            }
            }
        }
    }
}

void quant_ilv_dot(quant_isa isa, uint32_t wtype, int64_t n, const void *group, int nr, const void *xq,
                   size_t xq_stride, int64_t n_tok, float *out, size_t out_stride) {
    ilv_tables[isa]->ilv[wtype](n, group, nr, xq, xq_stride, n_tok, out, out_stride);
}

void quant_ilv_dot_pair(quant_isa isa, uint32_t wtype, int64_t n, const void *group, int nr, const void *xq,
                        size_t xq_stride, int64_t n_tok, float *out, size_t out_stride) {
    ilv_tables[isa]->ilv_pair[wtype](n, group, nr, xq, xq_stride, n_tok, out, out_stride);
}
