/* CPU dequantisation of rows of every supported type to f32: the reference that GPU kernels
 * and golden files are checked against. Operation order follows ggml (scale products first,
 * then the code) so results match llama.cpp's within rounding. */
#include <string.h>
#include "quant.h"
#include "rows.h"

void quant_dequant_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_dequant_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = quant_f16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
}

void quant_dequant_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = quant_bf16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
}

void quant_dequant_q4_0(const void *src, float *dst, int64_t n) {
    const block_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK4_0; i++, dst += QK4_0) {
        float d = quant_f16_to_f32(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[j] = d * (float)((b[i].qs[j] & 15) - 8);
            dst[j + QK4_0 / 2] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

void quant_dequant_q4_1(const void *src, float *dst, int64_t n) {
    const block_q4_1 *b = src;
    for (int64_t i = 0; i < n / QK4_1; i++, dst += QK4_1) {
        float d = quant_f16_to_f32(b[i].d), m = quant_f16_to_f32(b[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            dst[j] = d * (float)(b[i].qs[j] & 15) + m;
            dst[j + QK4_1 / 2] = d * (float)(b[i].qs[j] >> 4) + m;
        }
    }
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void quant_dequant_q5_0(const void *src, float *dst, int64_t n) {
    const block_q5_0 *b = src;
    for (int64_t i = 0; i < n / QK5_0; i++, dst += QK5_0) {
        float d = quant_f16_to_f32(b[i].d);
        uint32_t qh = le32(b[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = (b[i].qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            int q1 = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = d * (float)(q0 - 16);
            dst[j + QK5_0 / 2] = d * (float)(q1 - 16);
        }
    }
}

void quant_dequant_q5_1(const void *src, float *dst, int64_t n) {
    const block_q5_1 *b = src;
    for (int64_t i = 0; i < n / QK5_1; i++, dst += QK5_1) {
        float d = quant_f16_to_f32(b[i].d), m = quant_f16_to_f32(b[i].m);
        uint32_t qh = le32(b[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0 = (b[i].qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            int q1 = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = d * (float)q0 + m;
            dst[j + QK5_1 / 2] = d * (float)q1 + m;
        }
    }
}

void quant_dequant_q8_0(const void *src, float *dst, int64_t n) {
    const block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK8_0; i++, dst += QK8_0) {
        float d = quant_f16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++) dst[j] = d * (float)b[i].qs[j];
    }
}

/* Q2_K and Q3_K walk 128-weight halves: within a half, 2-bit field k of qs[l] (l < 32) holds
 * weight 32k + l, and sub-blocks of 16 follow in order. */
void quant_dequant_q2_K(const void *src, float *dst, int64_t n) {
    const block_q2_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(b[i].d), dmin = quant_f16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int k = 0; k < 2; k++, is++) {
                    uint8_t sc = b[i].scales[is];
                    float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++) *dst++ = dl * (float)((q[16 * k + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void quant_dequant_q3_K(const void *src, float *dst, int64_t n) {
    const block_q3_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(b[i].d);
        const uint8_t *q = b[i].qs, *hm = b[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int k = 0; k < 2; k++, is++) {
                    float dl = d * (float)quant_k3_scale(b[i].scales, is);
                    for (int l = 16 * k; l < 16 * k + 16; l++) {
                        int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
                        *dst++ = dl * (float)v;
                    }
                }
            }
        }
    }
}

void quant_dequant_q4_K(const void *src, float *dst, int64_t n) {
    const block_q4_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(b[i].d), dmin = quant_f16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int g = 0; g < 4; g++, q += 32) {
            uint8_t sc, m;
            quant_k4_scale_min(b[i].scales, 2 * g, &sc, &m);
            float d1 = d * (float)sc, m1 = dmin * (float)m;
            quant_k4_scale_min(b[i].scales, 2 * g + 1, &sc, &m);
            float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 15) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

void quant_dequant_q5_K(const void *src, float *dst, int64_t n) {
    const block_q5_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(b[i].d), dmin = quant_f16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs, *qh = b[i].qh;
        for (int g = 0; g < 4; g++, q += 32) {
            uint8_t sc, m;
            quant_k4_scale_min(b[i].scales, 2 * g, &sc, &m);
            float d1 = d * (float)sc, m1 = dmin * (float)m;
            quant_k4_scale_min(b[i].scales, 2 * g + 1, &sc, &m);
            float d2 = d * (float)sc, m2 = dmin * (float)m;
            uint8_t u1 = (uint8_t)(1 << (2 * g)), u2 = (uint8_t)(2 << (2 * g));
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)((q[l] & 15) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)((q[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

/* Q6_K, per 128-weight half: weight l (l < 32) takes ql[l] low nibble and qh[l] bits 0-1, weight
 * 32 + l ql[32 + l] low and qh[l] bits 2-3, 64 + l ql[l] high and bits 4-5, 96 + l ql[32 + l]
 * high and bits 6-7. */
void quant_dequant_q6_K(const void *src, float *dst, int64_t n) {
    const block_q6_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, dst += 128) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q2 = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                dst[l] = d * (float)sc[is] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}
