/* Per-type row converters behind the traits table (quant/ internal; callers use quant.h).
 * Each takes n elements, n a multiple of the type's block size (traits.c checks). */
#ifndef MGI_QUANT_ROWS_H
#define MGI_QUANT_ROWS_H

#include <stdint.h>

#define QUANT_ROW_FNS(t) \
    void quant_dequant_##t(const void *src, float *dst, int64_t n); \
    void quant_quant_##t(const float *src, void *dst, int64_t n);

QUANT_ROW_FNS(f32)
QUANT_ROW_FNS(f16)
QUANT_ROW_FNS(bf16)
QUANT_ROW_FNS(q4_0)
QUANT_ROW_FNS(q4_1)
QUANT_ROW_FNS(q5_0)
QUANT_ROW_FNS(q5_1)
QUANT_ROW_FNS(q8_0)
QUANT_ROW_FNS(q2_K)
QUANT_ROW_FNS(q3_K)
QUANT_ROW_FNS(q4_K)
QUANT_ROW_FNS(q5_K)
QUANT_ROW_FNS(q6_K)

#undef QUANT_ROW_FNS

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (layout in blocks.h). */
static inline void quant_k4_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* The signed scale (-32..31) of sub-block i of a Q3_K block: 4 low bits from scales[0..7]
 * (low nibbles for i < 8, high nibbles for i >= 8), 2 high bits from scales[8 + i % 4] at bit
 * 2 * (i / 4); the stored 6-bit value carries an offset of 32. */
static inline int quant_k3_scale(const uint8_t *s, int i) {
    int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
    int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

#endif
