/* The decode matvec's weight layout and the pieces the GEMMs share with it (gemm.cuh, gemm_wg.cuh,
 * gemm_panel.cuh read the same repacked buffer): mma and code-unpacking helpers, the repack
 * kernel, and the device query of the persistent grids.
 *
 * v2 repacked layout, for R16 = ceil(rows / 16) tiles of 16 rows and C = ceil(k / 64) chunks of
 * 64 weights (rows and k padded with zero weights):
 *   quants [R16][C][32 lanes][16 bytes]: lane l = 4g + t holds, in 32-bit word s (k16 step s of
 *     the chunk, k0 = 64c + 16s), the mma A fragment: nibble j (bits 4j..4j+3) of the word is
 *     the code of row g + 8 (j & 1), column k0 + 2t + 8 ((j >> 1) & 1) + (j >> 2); so
 *     (word >> 4p) & 0x000F000F holds register p's two codes in the two halves.
 *   scales [R16][C][64 bytes]:
 *     Q4_0: [8 g][4] f16 d of (row g, block 2c), (g, 2c+1), (g + 8, 2c), (g + 8, 2c + 1).
 *     Q4_K and Q5_K: per 4 chunks (one super-block) [16 rows][16 bytes] = d, dmin, scales[12] as
 *     in GGUF; Q5_K's fifth bits follow (mv5_hbit).
 * Codes are stored without offset: Q4_0's q - 8 and Q4_K's (Q5_K's) d*sc*q - dmin*m are applied
 * after the product (the min term with per-32 sums of X computed while staging X). Q8_0 and Q6_K:
 * see matvec_fallback.cuh's mv2_group. */
#ifndef MGI_KERNELS_MATVEC_LAYOUT_CUH
#define MGI_KERNELS_MATVEC_LAYOUT_CUH

#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include "kernels/dequant.cuh"

/* ---------------------------------------------------------------- tensor-core helpers -------- */
#define MV2_WARPS 8 /* warps of a v3 block */

/* Weights per pass of X staging; keeps shared memory at kp * ncols * 2.125 <= 34816 bytes. */
__host__ __device__ __forceinline__ int mv2_pass(int ncols) {
    return ncols <= 1 ? 16384 : ncols <= 2 ? 8192 : ncols <= 4 ? 4096 : ncols <= 8 ? 2048 : 1024;
}
#define MV2_SMEM 34816

__host__ __device__ __forceinline__ int64_t mv2_chunks(int64_t k) { return (k + 63) / 64; }

__device__ __forceinline__ uint4 mv_ld_stream(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ void mv_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The A fragment of one k16 step from a word of 8 4-bit codes, minus an offset o (1024 + o is
 * offset2's half; everything exact in f16). MODE 0: a shift, a mask-or and a subtract per
 * register. MODE 1: one shift per word; the codes at bits 4..7 and 20..23 are taken in place as
 * 1024 + 16q and scaled by 1/16 in the same HFMA2. MODE 2: MODE 1 with each mask-or one LOP3
 * (both constants otherwise take an immediate slot each: two LOP3s). */
__device__ __forceinline__ uint32_t mv_lop3_and_or(uint32_t x, uint32_t mask, uint32_t bits) {
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(x), "r"(mask), "r"(bits)); /* (x & mask) | bits */
    return r;
}

template <int MODE>
__device__ __forceinline__ void mv_codes(uint32_t a[4], uint32_t word, uint32_t offset2) {
    if constexpr (MODE >= 1) {
        const uint32_t w8 = word >> 8;
        const __half2 sub = *(__half2 *)&offset2;
        /* (1024 + 16q) / 16 - (64 + offset) = q - offset, and 64 + offset = offset2 - 960 */
        const __half2 sixteenth = __floats2half2_rn(0.0625f, 0.0625f);
        const __half2 sub16 = __hsub2(sub, __floats2half2_rn(960.0f, 960.0f));
        uint32_t h0, h1, h2, h3;
        if constexpr (MODE == 2) {
            h0 = mv_lop3_and_or(word, 0x000F000Fu, 0x64006400u);
            h1 = mv_lop3_and_or(word, 0x00F000F0u, 0x64006400u);
            h2 = mv_lop3_and_or(w8, 0x000F000Fu, 0x64006400u);
            h3 = mv_lop3_and_or(w8, 0x00F000F0u, 0x64006400u);
        } else {
            h0 = (word & 0x000F000Fu) | 0x64006400u;
            h1 = (word & 0x00F000F0u) | 0x64006400u;
            h2 = (w8 & 0x000F000Fu) | 0x64006400u;
            h3 = (w8 & 0x00F000F0u) | 0x64006400u;
        }
        __half2 v0 = __hsub2(*(__half2 *)&h0, sub), v2 = __hsub2(*(__half2 *)&h2, sub);
        __half2 v1 = __hfma2(*(__half2 *)&h1, sixteenth, __hneg2(sub16));
        __half2 v3 = __hfma2(*(__half2 *)&h3, sixteenth, __hneg2(sub16));
        a[0] = *(uint32_t *)&v0; a[1] = *(uint32_t *)&v1; a[2] = *(uint32_t *)&v2; a[3] = *(uint32_t *)&v3;
    } else {
#pragma unroll
        for (int p = 0; p < 4; p++) {
            uint32_t h = ((word >> (4 * p)) & 0x000F000Fu) | 0x64006400u;
            __half2 v = __hsub2(*(__half2 *)&h, *(__half2 *)&offset2);
            a[p] = *(uint32_t *)&v;
        }
    }
}

/* Q5_K: Q4_K's two regions (the low nibbles, the super-blocks' 16-byte records) and then the
 * fifth bits, [R16][C / 4 super-blocks][32 lanes][4 words]: word c % 4 of a lane holds its chunk
 * c's 32 fifth bits, that of nibble j of step s's word at bit mv5_hbit(s, j) = 8 (j >> 1) + 2 s +
 * (j & 1): byte b of the word holds, per step and row, the bits of byte b of the nibble word (one
 * shift and mask per step and row puts them at bit 4 of every byte for dp4a), and a register p of
 * the mma fragment finds its two codes' bits 16 apart (one shift and mask for both halves). A
 * lane's 4 words of a super-block are one 16-byte load. */
__host__ __device__ __forceinline__ int mv5_hbit(int s, int j) { return 8 * (j >> 1) + 2 * s + (j & 1); }

/* Where the fifth bits of a repacked Q5_K matrix start (after R16 x C x 576 bytes of nibbles and
 * records); a unit of 512 bytes per (tile, super-block) there, 16 per lane. */
__host__ __device__ __forceinline__ int64_t mv5_high(int64_t R16, int64_t C) { return R16 * C * 576; }
/* lane's word of fifth bits of chunk c of a tile */
__device__ __forceinline__ uint32_t mv5_hword(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int64_t c, int lane) {
    return __ldg((const uint32_t *)(w + mv5_high(R16, C)) + ((tile * (C / 4) + c / 4) * 32 + lane) * 4 + (c & 3));
}

/* The A fragment of step s of a Q5_K chunk minus 1024 (the codes q, exact in f16): register p's
 * two codes from the nibble word (as mv_codes) and their fifth bits from the chunk's high word hw
 * (mv5_hbit: 16 apart, as the halves). */
__device__ __forceinline__ void mv5_codes(uint32_t a[4], uint32_t word, uint32_t hw, int s) {
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const uint32_t h = ((word >> (4 * p)) & 0x000F000Fu) | (((hw >> mv5_hbit(s, p)) & 0x00010001u) << 4) | 0x64006400u;
        const __half2 v = __hsub2(*(const __half2 *)&h, __floats2half2_rn(1024.0f, 1024.0f));
        a[p] = *(const uint32_t *)&v;
    }
}

__device__ __forceinline__ float mv_half_lo(uint32_t v) { return __half2float(__ushort_as_half((unsigned short)(v & 0xffff))); }
__device__ __forceinline__ float mv_half_hi(uint32_t v) { return __half2float(__ushort_as_half((unsigned short)(v >> 16))); }

/* Byte i (compile-time after unrolling) of a 16-byte record. */
__device__ __forceinline__ uint32_t mv_byte(uint4 r, int i) {
    uint32_t w = i < 4 ? r.x : i < 8 ? r.y : i < 12 ? r.z : r.w;
    return (w >> (8 * (i & 3))) & 255;
}

/* Byte i of v as a float: 2^23 + byte built by one PRMT, then one subtraction. */
__device__ __forceinline__ float mv_k4_byte(uint32_t v, int i) {
    return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7440u | (uint32_t)i)) - 8388608.0f;
}

/* Sub-block j's (d * sc, dmin * m) from a Q4_K record d, dmin, scales[12]. */
__device__ __forceinline__ float2 mv_k4_scale(uint4 r, int j) {
    uint32_t sc, m;
    if (j < 4) {
        sc = mv_byte(r, 4 + j) & 63;
        m = mv_byte(r, 8 + j) & 63;
    } else {
        sc = (mv_byte(r, 8 + j) & 15) | ((mv_byte(r, j) >> 6) << 4);
        m = (mv_byte(r, 8 + j) >> 4) | ((mv_byte(r, 4 + j) >> 6) << 4);
    }
    return make_float2(mv_half_lo(r.x) * (float)sc, mv_half_hi(r.x) * (float)m);
}


/* Most 16-row tiles one block of a persistent grid (v10, v11) takes: its partial sums live in
 * shared memory; more blocks past that. */
#define MV_TILES 24

/* Multiprocessor count and opt-in shared memory per block of the current device (cached). */
static inline bool mv_device(int *sms, int *smem_max, int *smem_sm = nullptr) {
    static int cache[64][3];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    if (cache[dev][0] == 0) {
        int a = 0, b = 0, c = 0;
        if (cudaDeviceGetAttribute(&a, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&c, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess)
            return false;
        cache[dev][1] = b;
        cache[dev][2] = c;
        cache[dev][0] = a;
    }
    *sms = cache[dev][0];
    *smem_max = cache[dev][1];
    if (smem_sm) *smem_sm = cache[dev][2];
    return true;
}

/* ---------------------------------------------------------------- repacking ------------------ */
/* Code of weight (row, kk) of a GGUF matrix, unsigned (Q8_0: q + 128, Q6_K: 6 bits); 0 outside. */
template <int T>
__host__ __device__ __forceinline__ uint32_t mv2_code(const uint8_t *w, int rows, int k, int64_t row, int64_t kk) {
    if (row >= rows || kk >= k) return 0;
    const uint8_t *r = w + row * dq_row_bytes(T, k);
    if constexpr (T == QUANT_Q4_0) {
        int j = (int)(kk & 31);
        uint32_t b = r[(kk >> 5) * sizeof(block_q4_0) + 2 + (j & 15)];
        return j < 16 ? b & 15 : b >> 4;
    } else if constexpr (T == QUANT_Q4_K) {
        int64_t sb = kk >> 8;
        int rr = (int)(kk & 255);
        uint32_t b = r[sb * sizeof(block_q4_K) + 16 + 32 * (rr >> 6) + (rr & 31)];
        return (rr & 63) < 32 ? b & 15 : b >> 4;
    } else if constexpr (T == QUANT_Q5_K) { /* Q4_K's nibble, bit j (sub-block) of qh[l] the fifth */
        const uint8_t *b = r + (kk >> 8) * sizeof(block_q5_K);
        int rr = (int)(kk & 255), j = rr >> 5, l = rr & 31;
        uint32_t q = b[48 + 32 * (j >> 1) + l];
        return ((j & 1) ? q >> 4 : q & 15) | ((b[16 + l] >> j) & 1) << 4;
    } else if constexpr (T == QUANT_Q8_0) {
        return (r[(kk >> 5) * sizeof(block_q8_0) + 2 + (kk & 31)] ^ 0x80u) & 255;
    } else {
        const uint8_t *b = r + (kk >> 8) * sizeof(block_q6_K);
        int rr = (int)(kk & 255), h = rr >> 7, jj = (rr & 127) >> 5, l = rr & 31;
        uint32_t ql = b[64 * h + 32 * (jj & 1) + l], qh = b[128 + 32 * h + l];
        return ((jj >> 1) ? ql >> 4 : ql & 15) | ((qh >> (2 * jj)) & 3) << 4;
    }
}

/* Row and column of code j (0..7, the nibble order of matvec.cuh's layout) of lane (g, t) at
 * step s of chunk c in tile. */
__host__ __device__ __forceinline__ void mv2_where(int64_t tile, int64_t c, int s, int g, int t, int j, int64_t *row, int64_t *kk) {
    *row = tile * 16 + g + 8 * (j & 1);
    *kk = 64 * c + 16 * s + 2 * t + 8 * ((j >> 1) & 1) + (j >> 2);
}

/* f16 bits of block blk's d in a row (Q4_0 / Q8_0), 0 outside the matrix. */
template <int T>
__host__ __device__ __forceinline__ uint32_t mv2_d(const uint8_t *w, int rows, int k, int64_t row, int64_t blk) {
    if (row >= rows || blk >= k / 32) return 0;
    const uint8_t *p = w + row * dq_row_bytes(T, k) + blk * (T == QUANT_Q4_0 ? sizeof(block_q4_0) : sizeof(block_q8_0));
    return p[0] | p[1] << 8;
}

/* Bytes of the repacked form (0: not a v2 type). */
__host__ __device__ __forceinline__ int64_t mv2_bytes(int T, int64_t rows, int64_t k) {
    const int64_t R16 = (rows + 15) / 16, C = mv2_chunks(k);
    switch (T) {
    case QUANT_Q4_0: case QUANT_Q4_K: return R16 * C * 576;
    case QUANT_Q5_K: return R16 * C * 704;
    case QUANT_Q8_0: return R16 * C * 1088;
    case QUANT_Q6_K: return R16 * C * 840;
    default: return 0;
    }
}

/* Word i of the repacked matrix, region by region (host-callable for checks of the layout). */
template <int T>
__host__ __device__ inline void mv2_repack_word(uint8_t *out, const uint8_t *w, int rows, int k, int64_t i) {
    const int64_t C = mv2_chunks(k), R16 = (rows + 15) / 16;
    if (i >= mv2_bytes(T, rows, k) / 4) return;
    uint32_t v = 0;
    int64_t row, kk;
    /* quants (Q4 nibbles, Q8 bytes, Q6 low nibbles) */
    const int64_t wpc = T == QUANT_Q8_0 ? 256 : 128; /* words per chunk-tile */
    if (i < R16 * C * wpc) {
        int64_t tile = i / (C * wpc), rem = i % (C * wpc), c = rem / wpc;
        int r = (int)(rem % wpc), per = (int)(wpc / 32), lane = r / per, wi = r % per, g = lane >> 2, t = lane & 3;
        if constexpr (T == QUANT_Q8_0) {
            int s = wi / 2, hf = wi % 2;
            for (int b = 0; b < 4; b++) {
                int p = 2 * hf + b / 2, e = b % 2;
                mv2_where(tile, c, s, g, t, p + 4 * e, &row, &kk);
                v |= mv2_code<T>(w, rows, k, row, kk) << (8 * b);
            }
        } else {
            for (int j = 0; j < 8; j++) {
                mv2_where(tile, c, wi, g, t, j, &row, &kk);
                v |= (mv2_code<T>(w, rows, k, row, kk) & 15) << (4 * j);
            }
        }
        ((uint32_t *)out)[i] = v;
        return;
    }
    i -= R16 * C * wpc;
    if constexpr (T == QUANT_Q6_K) {
        if (i < R16 * C * 64) { /* high 2 bits: word wd of a lane holds steps 2wd, 2wd + 1 */
            int64_t tile = i / (C * 64), rem = i % (C * 64), c = rem / 64;
            int lane = (int)(rem % 64) / 2, wd = (int)(rem % 2), g = lane >> 2, t = lane & 3;
            for (int s1 = 0; s1 < 2; s1++)
                for (int j = 0; j < 8; j++) {
                    mv2_where(tile, c, 2 * wd + s1, g, t, j, &row, &kk);
                    v |= (mv2_code<T>(w, rows, k, row, kk) >> 4) << (16 * (j >> 2) + 8 * s1 + 2 * (j & 3));
                }
            ((uint32_t *)out)[R16 * C * 128 + i] = v;
            return;
        }
        i -= R16 * C * 64;
        if (i < R16 * C * 16) { /* int8 scales of the chunk's 4 steps, [16 rows] */
            int64_t tile = i / (C * 16), rem = i % (C * 16), c = rem / 16;
            row = tile * 16 + rem % 16;
            if (row < rows) {
                const uint8_t *b = w + row * dq_row_bytes(T, k) + (c / 4) * sizeof(block_q6_K) + 192 + 4 * (c % 4);
                v = b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
            }
            ((uint32_t *)out)[R16 * C * 192 + i] = v;
            return;
        }
        i -= R16 * C * 16;
        { /* d per super-block, [16 rows] f16 */
            int64_t tile = i / ((C / 4) * 8), rem = i % ((C / 4) * 8), sb = rem / 8;
            for (int e = 0; e < 2; e++) {
                row = tile * 16 + 2 * (rem % 8) + e;
                if (row < rows) {
                    const uint8_t *b = w + row * dq_row_bytes(T, k) + sb * sizeof(block_q6_K) + 208;
                    v |= (uint32_t)(b[0] | b[1] << 8) << (16 * e);
                }
            }
            ((uint32_t *)out)[R16 * C * 208 + i] = v;
        }
    } else if constexpr (T == QUANT_Q4_K || T == QUANT_Q5_K) {
        if (T == QUANT_Q5_K && i >= R16 * C * 16) { /* the fifth bits: mv5_hword */
            i -= R16 * C * 16;
            const int64_t tile = i / (C * 32), rem = i % (C * 32), sb = rem / 128;
            const int lane = (int)(rem % 128) / 4, c = (int)(4 * sb + rem % 4), g = lane >> 2, t = lane & 3;
            for (int s = 0; s < 4; s++)
                for (int j = 0; j < 8; j++) {
                    mv2_where(tile, c, s, g, t, j, &row, &kk);
                    v |= (mv2_code<T>(w, rows, k, row, kk) >> 4) << mv5_hbit(s, j);
                }
            ((uint32_t *)(out + mv5_high(R16, C)))[i] = v;
            return;
        }
        /* [16 rows][16 bytes] per super-block: i = sb * 64 + row_in_tile * 4 + word */
        int64_t tile = i / (C * 16), rem = i % (C * 16), sb = rem / 64;
        row = tile * 16 + (rem % 64) / 4;
        if (row < rows) {
            const uint8_t *p = w + row * dq_row_bytes(T, k) + sb * (T == QUANT_Q5_K ? sizeof(block_q5_K) : sizeof(block_q4_K)) + 4 * (rem % 4);
            v = p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
        }
        ((uint32_t *)out)[R16 * C * wpc + i] = v;
    } else {
        /* Q4_0 / Q8_0: [8 g][2 words]: word (g, upper) = d of (row g + 8 upper, blocks 2c, 2c + 1) */
        int64_t tile = i / (C * 16), rem = i % (C * 16), c = rem / 16;
        int g = (int)(rem % 16) / 2, upper = (int)(rem % 2);
        row = tile * 16 + g + 8 * upper;
        v = mv2_d<T>(w, rows, k, row, 2 * c) | mv2_d<T>(w, rows, k, row, 2 * c + 1) << 16;
        ((uint32_t *)out)[R16 * C * wpc + i] = v;
    }
}

/* One thread per 32-bit word. */
template <int T>
__global__ void matvec_v2_repack(uint8_t *out, const uint8_t *w, int rows, int k) {
    mv2_repack_word<T>(out, w, rows, k, blockIdx.x * (int64_t)blockDim.x + threadIdx.x);
}


#endif
