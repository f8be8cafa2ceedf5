/* Device-side dequantisation of GGUF blocks in their file layout (quant/blocks.h): 32
 * consecutive weights of a row at a time. Used where weights stay in GGUF layout (embedding
 * rows, the generic matvec); must agree exactly with quant_dequant_row on the CPU. */
#ifndef MGI_KERNELS_DEQUANT_CUH
#define MGI_KERNELS_DEQUANT_CUH

#include <stdint.h>
#include <cuda_fp16.h>
#include "quant/blocks.h"

__device__ __forceinline__ float dq_half(uint16_t h) {
    return __half2float(__ushort_as_half(h));
}

/* Loads a little-endian u16 from a 2-byte-aligned address (every GGUF block is 2-aligned). */
__device__ __forceinline__ uint32_t dq_u16(const uint8_t *p) {
    return __ldg((const uint16_t *)p);
}

/* The 6-bit scale and min of sub-block j of a Q4_K / Q5_K block. */
__device__ __forceinline__ void dq_k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Bytes of a row of k weights of type t; 0 for an unsupported type. */
__host__ __device__ __forceinline__ int64_t dq_row_bytes(uint32_t t, int64_t k) {
    switch (t) {
    case QUANT_F32: return k * 4;
    case QUANT_F16: case QUANT_BF16: return k * 2;
    case QUANT_Q4_0: return k / QK4_0 * (int64_t)sizeof(block_q4_0);
    case QUANT_Q4_1: return k / QK4_1 * (int64_t)sizeof(block_q4_1);
    case QUANT_Q5_0: return k / QK5_0 * (int64_t)sizeof(block_q5_0);
    case QUANT_Q5_1: return k / QK5_1 * (int64_t)sizeof(block_q5_1);
    case QUANT_Q8_0: return k / QK8_0 * (int64_t)sizeof(block_q8_0);
    case QUANT_Q2_K: return k / QK_K * (int64_t)sizeof(block_q2_K);
    case QUANT_Q3_K: return k / QK_K * (int64_t)sizeof(block_q3_K);
    case QUANT_Q4_K: return k / QK_K * (int64_t)sizeof(block_q4_K);
    case QUANT_Q5_K: return k / QK_K * (int64_t)sizeof(block_q5_K);
    case QUANT_Q6_K: return k / QK_K * (int64_t)sizeof(block_q6_K);
    default: return 0;
    }
}

/* The quantised types the GPU keeps in their GGUF rows (not repacked at load): the GGUF-layout GEMM
 * (gemm_gguf.cuh) and the decode matvec v13 (matvec_gguf.cuh) read them so. */
__host__ __device__ constexpr bool dq_gguf_rows(uint32_t t) {
    return t == QUANT_Q4_1 || t == QUANT_Q5_0 || t == QUANT_Q5_1 || t == QUANT_Q2_K || t == QUANT_Q3_K;
}

/* Weights a row of type t must be a multiple of for dq_unit (its block, at least 32); 0 for a
 * type dq_unit does not take. */
__host__ __device__ __forceinline__ int64_t dq_block_elems(uint32_t t) {
    switch (t) {
    case QUANT_F32: case QUANT_F16: case QUANT_BF16: return 32;
    case QUANT_Q4_0: case QUANT_Q4_1: case QUANT_Q5_0: case QUANT_Q5_1: case QUANT_Q8_0: return 32;
    case QUANT_Q2_K: case QUANT_Q3_K: case QUANT_Q4_K: case QUANT_Q5_K: case QUANT_Q6_K: return QK_K;
    default: return 0;
    }
}

/* Sub-block i's 6-bit Q3_K scale less its offset of 32 (quant/rows.h: quant_k3_scale). */
__device__ __forceinline__ int dq_k3_scale(const uint8_t *s, int i) {
    int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
    int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* The 12 scale bytes at p (2-aligned) into s. */
__device__ __forceinline__ void dq_scales12(const uint8_t *p, uint8_t s[12]) {
#pragma unroll
    for (int i = 0; i < 12; i += 2) {
        uint32_t v = dq_u16(p + i);
        s[i] = (uint8_t)v; s[i + 1] = (uint8_t)(v >> 8);
    }
}

/* Weights 32u .. 32u+31 of a row (GGUF bytes at row) into w[0..31]. T is a quant_type. */
template <int T>
__device__ __forceinline__ void dq_unit(const uint8_t *row, int64_t u, float w[32]) {
    if constexpr (T == QUANT_F32) {
        const float4 *p = (const float4 *)(row + u * 128);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float4 v = __ldg(p + i);
            w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
        }
    } else if constexpr (T == QUANT_F16) {
        const uint4 *p = (const uint4 *)(row + u * 64);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint4 v = __ldg(p + i);
            uint32_t r[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float2 f = __half22float2(*(const __half2 *)&r[j]);
                w[8 * i + 2 * j] = f.x; w[8 * i + 2 * j + 1] = f.y;
            }
        }
    } else if constexpr (T == QUANT_BF16) {
        const uint4 *p = (const uint4 *)(row + u * 64); /* bf16 is the high half of an f32 */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint4 v = __ldg(p + i);
            uint32_t r[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                w[8 * i + 2 * j] = __uint_as_float(r[j] << 16);
                w[8 * i + 2 * j + 1] = __uint_as_float(r[j] & 0xffff0000u);
            }
        }
    } else if constexpr (T == QUANT_Q4_0) {
        const uint8_t *b = row + u * sizeof(block_q4_0);
        float d = dq_half(dq_u16(b));
#pragma unroll
        for (int j = 0; j < 16; j += 2) {
            uint32_t q = dq_u16(b + 2 + j);
            w[j] = d * (float)((int)(q & 15) - 8);
            w[j + 16] = d * (float)((int)((q >> 4) & 15) - 8);
            w[j + 1] = d * (float)((int)((q >> 8) & 15) - 8);
            w[j + 17] = d * (float)((int)((q >> 12) & 15) - 8);
        }
    } else if constexpr (T == QUANT_Q4_1) {
        const uint8_t *b = row + u * sizeof(block_q4_1);
        float d = dq_half(dq_u16(b)), m = dq_half(dq_u16(b + 2));
#pragma unroll
        for (int j = 0; j < 16; j += 2) {
            uint32_t q = dq_u16(b + 4 + j);
            w[j] = d * (float)(q & 15) + m;
            w[j + 16] = d * (float)((q >> 4) & 15) + m;
            w[j + 1] = d * (float)((q >> 8) & 15) + m;
            w[j + 17] = d * (float)((q >> 12) & 15) + m;
        }
    } else if constexpr (T == QUANT_Q5_1) {
        const uint8_t *b = row + u * sizeof(block_q5_1);
        float d = dq_half(dq_u16(b)), m = dq_half(dq_u16(b + 2));
        uint32_t qh = dq_u16(b + 4) | dq_u16(b + 6) << 16;
#pragma unroll
        for (int j = 0; j < 16; j += 2) {
            uint32_t q = dq_u16(b + 8 + j);
            w[j] = d * (float)((q & 15) | ((qh >> j) & 1) << 4) + m;
            w[j + 16] = d * (float)(((q >> 4) & 15) | ((qh >> (j + 16)) & 1) << 4) + m;
            w[j + 1] = d * (float)(((q >> 8) & 15) | ((qh >> (j + 1)) & 1) << 4) + m;
            w[j + 17] = d * (float)(((q >> 12) & 15) | ((qh >> (j + 17)) & 1) << 4) + m;
        }
    } else if constexpr (T == QUANT_Q5_0) {
        const uint8_t *b = row + u * sizeof(block_q5_0);
        float d = dq_half(dq_u16(b));
        uint32_t qh = dq_u16(b + 2) | dq_u16(b + 4) << 16;
#pragma unroll
        for (int j = 0; j < 16; j += 2) {
            uint32_t q = dq_u16(b + 6 + j);
            w[j] = d * (float)((int)((q & 15) | ((qh >> j) & 1) << 4) - 16);
            w[j + 16] = d * (float)((int)(((q >> 4) & 15) | ((qh >> (j + 16)) & 1) << 4) - 16);
            w[j + 1] = d * (float)((int)(((q >> 8) & 15) | ((qh >> (j + 1)) & 1) << 4) - 16);
            w[j + 17] = d * (float)((int)(((q >> 12) & 15) | ((qh >> (j + 17)) & 1) << 4) - 16);
        }
    } else if constexpr (T == QUANT_Q8_0) {
        const uint8_t *b = row + u * sizeof(block_q8_0);
        float d = dq_half(dq_u16(b));
#pragma unroll
        for (int j = 0; j < 32; j += 2) {
            uint32_t q = dq_u16(b + 2 + j);
            w[j] = d * (float)(int8_t)(q & 255);
            w[j + 1] = d * (float)(int8_t)(q >> 8);
        }
    } else if constexpr (T == QUANT_Q4_K) {
        const uint8_t *b = row + (u >> 3) * sizeof(block_q4_K);
        int j = (int)(u & 7), sc, m;
        uint8_t s[12];
        dq_scales12(b + 4, s);
        dq_k4_scale_min(s, j, &sc, &m);
        float d = dq_half(dq_u16(b)) * (float)sc, mn = dq_half(dq_u16(b + 2)) * (float)m;
        const uint8_t *q = b + 16 + 32 * (j >> 1);
        int shift = 4 * (j & 1);
#pragma unroll
        for (int l = 0; l < 32; l += 2) {
            uint32_t v = dq_u16(q + l);
            w[l] = d * (float)((v >> shift) & 15) - mn;
            w[l + 1] = d * (float)((v >> (8 + shift)) & 15) - mn;
        }
    } else if constexpr (T == QUANT_Q5_K) {
        /* Q4_K's nibbles plus bit j of qh[l] (sub-block j = 2g or 2g + 1) as the fifth bit */
        const uint8_t *b = row + (u >> 3) * sizeof(block_q5_K);
        int j = (int)(u & 7), sc, m;
        uint8_t s[12];
        dq_scales12(b + 4, s);
        dq_k4_scale_min(s, j, &sc, &m);
        float d = dq_half(dq_u16(b)) * (float)sc, mn = dq_half(dq_u16(b + 2)) * (float)m;
        const uint8_t *qh = b + 16, *q = b + 48 + 32 * (j >> 1);
        int shift = 4 * (j & 1);
#pragma unroll
        for (int l = 0; l < 32; l += 2) {
            uint32_t v = dq_u16(q + l), h = dq_u16(qh + l);
            w[l] = d * (float)(((v >> shift) & 15) | ((h >> j) & 1) << 4) - mn;
            w[l + 1] = d * (float)(((v >> (8 + shift)) & 15) | ((h >> (8 + j)) & 1) << 4) - mn;
        }
    } else if constexpr (T == QUANT_Q2_K) {
        /* Unit j of a block: half h = j / 4, 2-bit field j & 3 of qs[32h + l]; sub-blocks 2j
         * (l < 16) and 2j + 1 */
        const uint8_t *b = row + (u >> 3) * sizeof(block_q2_K);
        int j = (int)(u & 7), shift = 2 * (j & 3);
        const uint8_t *q = b + 16 + 32 * (j >> 2);
        float d = dq_half(dq_u16(b + 80)), dmin = dq_half(dq_u16(b + 82));
        uint32_t sv = dq_u16(b + 2 * j);
        float d0 = d * (float)(sv & 15), m0 = dmin * (float)((sv >> 4) & 15);
        float d1 = d * (float)((sv >> 8) & 15), m1 = dmin * (float)((sv >> 12) & 15);
#pragma unroll
        for (int l = 0; l < 32; l += 2) {
            uint32_t v = dq_u16(q + l);
            float dl = l < 16 ? d0 : d1, ml = l < 16 ? m0 : m1;
            w[l] = dl * (float)((v >> shift) & 3) - ml;
            w[l + 1] = dl * (float)((v >> (8 + shift)) & 3) - ml;
        }
    } else if constexpr (T == QUANT_Q3_K) {
        /* Q2_K's placement of the low 2 bits; the high bit of weight l of unit j is bit j of
         * hmask[l] (clear: -4); scales 2j (l < 16) and 2j + 1 */
        const uint8_t *b = row + (u >> 3) * sizeof(block_q3_K);
        int j = (int)(u & 7), shift = 2 * (j & 3);
        const uint8_t *q = b + 32 + 32 * (j >> 2);
        uint8_t s[12];
        dq_scales12(b + 96, s);
        float d = dq_half(dq_u16(b + 108));
        float d0 = d * (float)dq_k3_scale(s, 2 * j), d1 = d * (float)dq_k3_scale(s, 2 * j + 1);
#pragma unroll
        for (int l = 0; l < 32; l += 2) {
            uint32_t v = dq_u16(q + l), h = dq_u16(b + l);
            float dl = l < 16 ? d0 : d1;
            w[l] = dl * (float)((int)((v >> shift) & 3) - ((h >> j) & 1 ? 0 : 4));
            w[l + 1] = dl * (float)((int)((v >> (8 + shift)) & 3) - ((h >> (8 + j)) & 1 ? 0 : 4));
        }
    } else if constexpr (T == QUANT_Q6_K) {
        /* Unit j of a block: half h = j / 4; low 4 bits from ql[64h + 32(j&1) + l] (high nibble
         * when j&2), high 2 bits from qh[32h + l] at bits 2(j&3); scales 8h + 2(j&3) + l/16. */
        const uint8_t *b = row + (u >> 3) * sizeof(block_q6_K);
        int j = (int)(u & 7), h = j >> 2, jj = j & 3;
        const uint8_t *ql = b + 64 * h + 32 * (jj & 1), *qh = b + 128 + 32 * h;
        float d = dq_half(dq_u16(b + 208));
        uint32_t sv = dq_u16(b + 192 + 8 * h + 2 * jj);
        float d0 = d * (float)(int8_t)(sv & 255), d1 = d * (float)(int8_t)(sv >> 8);
        int lshift = 4 * (jj >> 1), hshift = 2 * jj;
#pragma unroll
        for (int l = 0; l < 32; l += 2) {
            uint32_t lo = dq_u16(ql + l), hi = dq_u16(qh + l);
            int q0 = (int)(((lo >> lshift) & 15) | ((hi >> hshift) & 3) << 4) - 32;
            int q1 = (int)(((lo >> (8 + lshift)) & 15) | ((hi >> (8 + hshift)) & 3) << 4) - 32;
            float dl = l < 16 ? d0 : d1;
            w[l] = dl * (float)q0;
            w[l + 1] = dl * (float)q1;
        }
    }
}

#endif
