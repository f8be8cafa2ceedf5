/* Block layouts of every GGUF tensor type mgi reads, shared by C (quant/, engine/) and CUDA
 * (kernels/). These structs are the bytes of the file: never reorder or pad a field.
 * f16 fields are stored as raw IEEE half bits (uint16_t) so that C and CUDA agree without
 * either compiler's half type. */
#ifndef MGI_QUANT_BLOCKS_H
#define MGI_QUANT_BLOCKS_H

#include <stdint.h>

#ifdef __cplusplus
#define QUANT_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define QUANT_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

/* GGUF / ggml type ids, as written in a tensor info. Gaps are ids ggml retired. */
enum quant_type {
    QUANT_F32 = 0, QUANT_F16 = 1, QUANT_Q4_0 = 2, QUANT_Q4_1 = 3,
    QUANT_Q5_0 = 6, QUANT_Q5_1 = 7, QUANT_Q8_0 = 8, QUANT_Q8_1 = 9,
    QUANT_Q2_K = 10, QUANT_Q3_K = 11, QUANT_Q4_K = 12, QUANT_Q5_K = 13, QUANT_Q6_K = 14,
    QUANT_Q8_K = 15,
    QUANT_IQ2_XXS = 16, QUANT_IQ2_XS = 17, QUANT_IQ3_XXS = 18, QUANT_IQ1_S = 19,
    QUANT_IQ4_NL = 20, QUANT_IQ3_S = 21, QUANT_IQ2_S = 22, QUANT_IQ4_XS = 23,
    QUANT_I8 = 24, QUANT_I16 = 25, QUANT_I32 = 26, QUANT_I64 = 27, QUANT_F64 = 28,
    QUANT_IQ1_M = 29, QUANT_BF16 = 30, QUANT_TQ1_0 = 34, QUANT_TQ2_0 = 35, QUANT_MXFP4 = 39,
    QUANT_TYPE_COUNT = 40 /* one past the largest id */
};

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* Q4_0: 32 weights, w = d * (q - 8), q a 4-bit code.
 *   d      f16
 *   qs[16] byte j: low nibble = q[j], high nibble = q[j + 16] */
typedef struct { uint16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
QUANT_STATIC_ASSERT(sizeof(block_q4_0) == 18, "block_q4_0 size");

/* Q4_1: w = d * q + m, nibbles as Q4_0. */
typedef struct { uint16_t d; uint16_t m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
QUANT_STATIC_ASSERT(sizeof(block_q4_1) == 20, "block_q4_1 size");

/* Q5_0: w = d * (q - 16), q 5-bit: low 4 bits as Q4_0's nibbles, bit 4 of q[j] is bit j of qh
 * (little-endian u32). */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
QUANT_STATIC_ASSERT(sizeof(block_q5_0) == 22, "block_q5_0 size");

/* Q5_1: w = d * q + m, 5-bit q as Q5_0. */
typedef struct { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
QUANT_STATIC_ASSERT(sizeof(block_q5_1) == 24, "block_q5_1 size");

/* Q8_0: w = d * q, q int8. */
typedef struct { uint16_t d; int8_t qs[QK8_0]; } block_q8_0;
QUANT_STATIC_ASSERT(sizeof(block_q8_0) == 34, "block_q8_0 size");

/* Q8_1: w = d * q; s = d * sum(q) (used for activations by ggml). */
typedef struct { uint16_t d; uint16_t s; int8_t qs[QK8_1]; } block_q8_1;
QUANT_STATIC_ASSERT(sizeof(block_q8_1) == 36, "block_q8_1 size");

/* Q2_K: 256 weights in 16 sub-blocks of 16. scales[i]: low nibble = 4-bit scale, high nibble =
 * 4-bit min of sub-block i. w = d * sc * q - dmin * m, q 2-bit. qs: for half h (128 weights)
 * and l < 32, bits 2k..2k+1 of qs[32h + l] hold weight 128h + 32k + l. */
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d; uint16_t dmin; } block_q2_K;
QUANT_STATIC_ASSERT(sizeof(block_q2_K) == 84, "block_q2_K size");

/* Q3_K: 16 sub-blocks of 16; q 3-bit = 2 low bits in qs (placed as Q2_K's), high bit of
 * weight j in hmask[j % 32] bit j / 32 (set means +0, clear means -4, so q in -4..3);
 * 16 6-bit scales (offset 32) packed in 12 bytes: scale i has low 4 bits in the low nibble of
 * scales[i] (i < 8) or the high nibble of scales[i - 8], high 2 bits at bit 2 * (i / 4) of
 * scales[8 + i % 4]. w = d * (sc - 32) * q. */
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; } block_q3_K;
QUANT_STATIC_ASSERT(sizeof(block_q3_K) == 110, "block_q3_K size");

/* Q4_K: 8 sub-blocks of 32; 6-bit scale and min per sub-block packed in scales[12]:
 *   j < 4: sc = scales[j] & 63,                         m = scales[j + 4] & 63
 *   j >= 4: sc = (scales[j+4] & 15) | ((scales[j-4] >> 6) << 4),
 *           m  = (scales[j+4] >> 4) | ((scales[j] >> 6) << 4)
 * qs: 64-weight groups of 32 bytes, low nibbles = sub-block 2g, high nibbles = sub-block 2g+1.
 * w = d * sc * q - dmin * m. */
typedef struct { uint16_t d; uint16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K;
QUANT_STATIC_ASSERT(sizeof(block_q4_K) == 144, "block_q4_K size");

/* Q5_K: Q4_K plus a fifth bit per weight in qh (bit 2g / 2g+1 of qh[l] for group g). */
typedef struct { uint16_t d; uint16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
QUANT_STATIC_ASSERT(sizeof(block_q5_K) == 176, "block_q5_K size");

/* Q6_K: 16 sub-blocks of 16, int8 scales; q 6-bit = 4 low bits in ql, 2 high bits in qh;
 * w = d * sc * (q - 32). Per half h (128 weights), l < 32: weight l = ql[64h + l] low nibble
 * + qh[32h + l] bits 0-1; 32 + l = ql[64h + 32 + l] low + bits 2-3; 64 + l = ql[64h + l] high +
 * bits 4-5; 96 + l = ql[64h + 32 + l] high + bits 6-7. */
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; } block_q6_K;
QUANT_STATIC_ASSERT(sizeof(block_q6_K) == 210, "block_q6_K size");

/* Q8_K: activations for K-quant dot products (f32 scale, sums of 16). */
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_K;
QUANT_STATIC_ASSERT(sizeof(block_q8_K) == 292, "block_q8_K size");

#endif
