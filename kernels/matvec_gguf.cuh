/* The decode matvec v13: the weight types that keep their GGUF rows on the GPU (Q4_1, Q5_0, Q5_1,
 * Q2_K, Q3_K: the prompt GEMM of gemm_gguf.cuh reads the same buffer) for 1 to 4 tokens, X
 * rounded to int8 per 32 values as v10 / v11 round it, products by dp4a. Before it those types
 * ran v1 (each weight dequantised to f32 against f32 X: 8-17% of the roofline, PERF-LOG run 164).
 * The structure is the kernel lab's v12 (tests/kbench/matvec_k5.cuh, Q5_K only), made type-blind
 * in how the weights travel:
 *
 * A block takes a group of MV13_NR rows at a time, its warps the group's steps (a step: two units
 * of 256 weights of each row, one unit per half-warp), each warp through a ring of steps in
 * shared memory filled by cp.async (mv13_stages). A row's two units are contiguous in the GGUF row,
 * but their start is only as aligned as the type's block size allows (Q3_K's 110-byte super-blocks,
 * Q5_0's 22-byte blocks: 2 bytes), so the ring copies the 16-byte-aligned span around them
 * (cp.async of 16 bytes, the bytes past the matrix's end zero-filled) and the lanes find the
 * units at the span's offset; types whose blocks are not a multiple of 4 bytes read their words
 * as aligned words and funnel shifts (mv13_ld128).
 *
 * Lane l (0..15) of a half-warp takes weights 16 l .. 16 l + 15 of its unit, in natural order:
 * one scale sub-block of a K-quant (Q2_K, Q3_K: 16 weights), half of a 32-weight block (Q4_1,
 * Q5_0, Q5_1: its low or high nibbles). Per type (mv13_unit) the lane forms 16 codes as bytes and
 * two factors, so that its share of row . X is dx (A sum(code x) + B sum(x)) with X's int8 codes
 * x and their block's d dx: four dp4a for the codes, four for X's sum (once per token and step,
 * for every row; the offset or min meets the same rounded X).
 *
 * X is staged once per block (a persistent grid of up to 24 warps per SM) as int8 in natural order
 * and d per 32 values. The warps' sums meet in shared memory, added in warp order. The decode
 * fusions as v10's and v12's (matvec_src.cuh): a NORM source's x * g staged and the sums scaled by
 * 1 / rms (every block sums x^2 itself), ACC's Y +=, and ROPE's epilogue (a group of 4 rows holds
 * each rotated pair 2j, 2j + 1); not GLU or POST (v11 only: the layer runs the gate's activation
 * and Gemma's post norm apart for these types), and no early start beside another grid
 * (cu_matvec_f32_norm_rope_beside waits as for any previous kernel). Error: that of v10
 * (tests/gpu/mvq.h's budget). */
#ifndef MGI_KERNELS_MATVEC_GGUF_CUH
#define MGI_KERNELS_MATVEC_GGUF_CUH

#include <algorithm>
#include "kernels/matvec_layout.cuh"
#include "kernels/matvec_src.cuh"
#include "kernels/pdl.cuh"

#define MV13_WARPS 8
#define MV13_NR 4     /* rows of a step */
#define MV13_STATIC 2048 /* bytes of static shared memory a v13 kernel may have (red) */

/* The types v13 takes. */
__host__ __device__ constexpr bool mv13_type(int T) { return dq_gguf_rows((uint32_t)T); }
/* Bytes of 256 weights (a K-quant super-block, eight 32-weight blocks). */
__host__ __device__ constexpr int mv13_unit_bytes(int T) {
    return T == QUANT_Q4_1 ? 160 : T == QUANT_Q5_0 ? 176 : T == QUANT_Q5_1 ? 192 : T == QUANT_Q2_K ? 84 : 110;
}
/* Whether every block of a unit starts 4-byte aligned where the row does (not Q3_K's second
 * super-block of a step at 110, nor Q5_0's 22-byte blocks). */
__host__ __device__ constexpr bool mv13_a4(int T) { return T != QUANT_Q3_K && T != QUANT_Q5_0; }
/* A row's share of a ring slot: two units at an offset of up to 15 bytes, rounded up to 16 bytes,
 * and 16 more for mv13_ld32's second word past the end. */
__host__ __device__ constexpr int mv13_row_slot(int T) { return (2 * mv13_unit_bytes(T) + 15) / 16 * 16 + 32; }
__host__ __device__ constexpr int mv13_slot(int T) { return MV13_NR * mv13_row_slot(T); }
/* Ring slots per warp: all but one in flight while one is computed. A warp takes only a few steps
 * of a matrix (8b's 4096 x 4096 Q3_K: ~3 at 24 warps per SM), so slots issued before pdl_wait are
 * most of its bytes; the K-quants' small steps take 6 (3 blocks of 8 warps fit an SM's shared
 * memory for one token of k = 14336), the 32-weight-block types' larger ones 4. */
__host__ __device__ constexpr int mv13_stages(int T) { return T == QUANT_Q2_K || T == QUANT_Q3_K ? 6 : 4; }

/* Shared memory of X for nt tokens: int8 X [nt][k], d of X per 32 [nt][k / 32] (16-byte multiple
 * for k a multiple of 256). */
__host__ __device__ __forceinline__ size_t mv13_xsmem(int64_t k, int nt) { return (size_t)nt * (size_t)(k + k / 32 * 4); }

/* Shared memory is addressed as the kernel's array plus a 32-bit offset, so that the loads stay
 * LDS with 32-bit address arithmetic (a pointer cast to an integer would make them generic). */
/* The 32-bit word at byte o; A4: o is a multiple of 4, else two aligned words and a funnel shift. */
template <bool A4>
__device__ __forceinline__ uint32_t mv13_ld32(const uint8_t *s, uint32_t o) {
    if constexpr (A4) {
        return *(const uint32_t *)(s + o);
    } else {
        const uint32_t *q = (const uint32_t *)(s + (o & ~3u));
        return __funnelshift_r(q[0], q[1], 8 * (o & 3));
    }
}
/* The 4 words at byte o (16 bytes): without A4, 5 aligned words and 4 funnel shifts. */
template <bool A4>
__device__ __forceinline__ void mv13_ld128(const uint8_t *s, uint32_t o, uint32_t (&v)[4]) {
    if constexpr (A4) {
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = *(const uint32_t *)(s + o + 4 * j);
    } else {
        const uint32_t *q = (const uint32_t *)(s + (o & ~3u)), sh = 8 * (o & 3);
        uint32_t w[5];
#pragma unroll
        for (int j = 0; j < 5; j++) w[j] = q[j];
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = __funnelshift_r(w[j], w[j + 1], sh);
    }
}
__device__ __forceinline__ float mv13_f16(const uint8_t *s, uint32_t o) { return __half2float(*(const __half *)(s + o)); }

/* Four bits (bits 0..3 of v) spread to bit 4 of each byte: v * 0x00204081 places bit j at bit 8 j
 * among copies that do not overlap (bits 0-3, 7-10, 14-17, 21-24). */
__device__ __forceinline__ uint32_t mv13_bits4(uint32_t v) { return ((v & 15u) * 0x00204081u & 0x01010101u) << 4; }

/* Lane l's 16 codes of the unit at byte b of shared memory s (as bytes, 0..31), and A, B such
 * that its weights are A code + B. */
template <int T>
__device__ __forceinline__ void mv13_unit(const uint8_t *s, uint32_t b, int l, uint32_t (&c)[4], float &A, float &B) {
    constexpr bool A4 = mv13_a4(T);
    if constexpr (T == QUANT_Q2_K) { /* scales[16], qs[64], d, dmin; lane l = sub-block l */
        const int sh = 2 * ((l >> 1) & 3);
        mv13_ld128<A4>(s, b + 16 + 32 * (l >> 3) + 16 * (l & 1), c);
#pragma unroll
        for (int j = 0; j < 4; j++) c[j] = (c[j] >> sh) & 0x03030303u;
        const uint32_t sc = s[b + l];
        A = mv13_f16(s, b + 80) * (float)(sc & 15);
        B = -mv13_f16(s, b + 82) * (float)(sc >> 4);
    } else if constexpr (T == QUANT_Q3_K) { /* hmask[32], qs[64], scales[12], d; codes q + 4 */
        const int sh = 2 * ((l >> 1) & 3), hb = l >> 1;
        uint32_t h[4];
        mv13_ld128<A4>(s, b + 32 + 32 * (l >> 3) + 16 * (l & 1), c);
        mv13_ld128<A4>(s, b + 16 * (l & 1), h);
#pragma unroll
        for (int j = 0; j < 4; j++) c[j] = ((c[j] >> sh) & 0x03030303u) | (((h[j] >> hb) & 0x01010101u) << 2);
        const uint32_t lo = l < 8 ? s[b + 96 + l] & 15u : (uint32_t)s[b + 88 + l] >> 4;
        const uint32_t hi = ((uint32_t)s[b + 104 + (l & 3)] >> (2 * (l >> 2))) & 3u;
        A = mv13_f16(s, b + 108) * (float)((int)(lo | hi << 4) - 32);
        B = -4.0f * A;
    } else { /* Q4_1 d, m, qs[16]; Q5_0 d, qh, qs[16]; Q5_1 d, m, qh, qs[16]: lane l takes block
              * l / 2's low (l even) or high nibbles */
        constexpr int BB = mv13_unit_bytes(T) / 8, QS = T == QUANT_Q4_1 ? 4 : T == QUANT_Q5_0 ? 6 : 8;
        const uint32_t blk = b + BB * (l >> 1);
        const int hf = l & 1;
        uint32_t qh = 0;
        if constexpr (T != QUANT_Q4_1) qh = mv13_ld32<A4>(s, blk + QS - 4) >> (16 * hf);
        mv13_ld128<A4>(s, blk + QS, c);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            c[j] = (c[j] >> (4 * hf)) & 0x0F0F0F0Fu;
            if constexpr (T != QUANT_Q4_1) c[j] |= mv13_bits4(qh >> (4 * j));
        }
        A = mv13_f16(s, blk);
        B = T == QUANT_Q5_0 ? -16.0f * A : mv13_f16(s, blk + 2);
    }
}

/* Warps of a block for rows of S units: one per step of a group of rows, at most MV13_WARPS. */
__host__ __device__ __forceinline__ int mv13_warps(int64_t k) {
    const int64_t steps = (k / 256 + 1) / 2;
    return steps < MV13_WARPS ? (int)steps : MV13_WARPS;
}

__device__ __forceinline__ void mv13_cp16(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

template <int T, typename XT, typename XS, int NT>
__global__ void __launch_bounds__(32 * MV13_WARPS, 3) matvec_v13(float *y, const uint8_t *w, XS x, int rows, int k) {
    static_assert(mv13_type(T), "v13: Q4_1, Q5_0, Q5_1, Q2_K, Q3_K");
    static_assert(!XS::GLU && !XS::POST, "v13: no gate/up epilogue, no post norm (v11 only)");
    constexpr int UB = mv13_unit_bytes(T), RS = mv13_row_slot(T), SLOT = mv13_slot(T), STAGES = mv13_stages(T);
    extern __shared__ __align__(16) uint8_t mv13_s[];
    uint8_t *xq = mv13_s;                   /* [NT][k] int8 */
    float *xd = (float *)(mv13_s + NT * k); /* [NT][k / 32] */
    __shared__ float red[2][MV13_WARPS][MV13_NR][NT], ssw[NT][MV13_WARPS], rinv[NT];
    static_assert(sizeof(red) + sizeof(ssw) + sizeof(rinv) <= MV13_STATIC, "v13: MV13_STATIC too small");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = lane >> 4, l = lane & 15;
    const int nw = blockDim.x >> 5;
    const int S = k / 256, nst = (S + 1) / 2; /* units per row; steps per group of rows */
    const int64_t rb = (int64_t)S * UB, total = (int64_t)rows * rb;
    const int groups = (rows + MV13_NR - 1) / MV13_NR;
    /* the block takes groups blockIdx.x, + gridDim.x, ...; warp w steps w, w + nw, ... of each
     * (nw <= nst: every warp has a step in every group) */
    int ip = blockIdx.x, is = warp; /* the next step to issue */
    const uint32_t ring = (uint32_t)__cvta_generic_to_shared(mv13_s + mv13_xsmem(k, NT)) + warp * STAGES * SLOT;
    int slot_in = 0;
    /* every issue commits one group (empty past the work), so wait_group counts steps */
    auto issue = [&]() {
        const uint32_t sl = ring + slot_in * SLOT;
        const int u0 = 2 * is, nu = S - u0 < 2 ? S - u0 : 2;
#pragma unroll
        for (int r = 0; r < MV13_NR; r++) {
            const int row = ip * MV13_NR + r;
            if (ip < groups && row < rows) {
                const int64_t g0 = (int64_t)row * rb + (int64_t)u0 * UB, a0 = g0 & ~(int64_t)15;
                const int n16 = (int)((g0 + nu * UB - a0 + 15) >> 4);
                if (lane < n16) {
                    const int64_t src = a0 + 16 * lane, left = total - src;
                    mv13_cp16(sl + RS * r + 16 * lane, w + src, left < 16 ? (int)left : 16);
                }
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        slot_in = slot_in + 1 == STAGES ? 0 : slot_in + 1;
        is += nw;
        if (is >= nst) {
            is = warp;
            ip += gridDim.x;
        }
    };
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) issue();
    pdl_wait(); /* X belongs to the previous kernel */
    pdl_trigger();
    /* stage X token by token: 4 values a thread, the 8 threads of a 32-value block share max|x|;
     * four loads in flight before the first is used (a down product's X of 14336 is 14 rounds of
     * 256 threads, each an L2 round trip when issued one by one). k / 4 is a multiple of 64, so a
     * warp's 32 values are all in or all out. */
    const int k4 = k / 4;
    for (int tok = 0; tok < NT; tok++) {
        float ss = 0.0f; /* NORM: this thread's sum of x^2 */
        for (int base = 0; base < k4; base += 4 * (int)blockDim.x) {
            float4 raw[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int f = base + u * (int)blockDim.x + (int)threadIdx.x, kk = 4 * f;
                raw[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (f < k4) {
                    if constexpr (sizeof(XT) == 2) {
                        const uint2 hv = *(const uint2 *)((const XT *)x.p + (int64_t)tok * k + kk);
                        const float2 a = __half22float2(*(const __half2 *)&hv.x), b = __half22float2(*(const __half2 *)&hv.y);
                        raw[u] = make_float4(a.x, a.y, b.x, b.y);
                    } else {
                        raw[u] = mv_x_stage(x, tok, kk, k, ss);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int f = base + u * (int)blockDim.x + (int)threadIdx.x, kk = 4 * f;
                if (f - lane >= k4) break; /* uniform over the warp */
                const float4 v = raw[u];
                float m = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
                const float inv = m > 0.0f ? 127.0f / m : 0.0f;
                const uint32_t q = (uint32_t)(__float2int_rn(v.x * inv) & 255) | (uint32_t)(__float2int_rn(v.y * inv) & 255) << 8 |
                                   (uint32_t)(__float2int_rn(v.z * inv) & 255) << 16 | (uint32_t)__float2int_rn(v.w * inv) << 24;
                *(uint32_t *)(xq + (int64_t)tok * k + kk) = q;
                if ((kk & 31) == 0) xd[tok * (k / 32) + kk / 32] = m * (1.0f / 127.0f);
            }
        }
        if constexpr (XS::NORM) {
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
            if (lane == 0) ssw[tok][warp] = ss;
        }
    }
    __syncthreads();
    if constexpr (XS::NORM) {
        mv_norm_factor(x, ssw, nw, k, rinv);
        __syncthreads();
    }
    int buf = 0, slot_out = 0;
    for (int p = blockIdx.x; p < groups; p += gridDim.x, buf ^= 1) {
        float acc[MV13_NR][NT];
#pragma unroll
        for (int r = 0; r < MV13_NR; r++)
#pragma unroll
            for (int c = 0; c < NT; c++) acc[r][c] = 0.0f;
        for (int st = warp; st < nst; st += nw) {
            asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 2) : "memory");
            __syncwarp(); /* this step's bytes landed, every lane's copies */
            const uint32_t sl = (uint32_t)mv13_xsmem(k, NT) + (uint32_t)((warp * STAGES + slot_out) * SLOT);
            const int u = 2 * st + half;
            if (u < S) {
                /* the lane's 16 values of X per token, their sum and d */
                uint4 xv[NT];
                int xs[NT];
                float dx[NT];
#pragma unroll
                for (int c = 0; c < NT; c++) {
                    xv[c] = *(const uint4 *)(xq + c * k + 256 * u + 16 * l);
                    xs[c] = __dp4a((int)xv[c].w, 0x01010101,
                                   __dp4a((int)xv[c].z, 0x01010101,
                                          __dp4a((int)xv[c].y, 0x01010101, __dp4a((int)xv[c].x, 0x01010101, 0))));
                    dx[c] = xd[c * (k / 32) + 8 * u + (l >> 1)];
                }
#pragma unroll
                for (int r = 0; r < MV13_NR; r++) {
                    /* the span's offset: g0 = row * rb + 2 st UB (mod 16, so 32-bit arithmetic) */
                    const uint32_t g0 = (uint32_t)(p * MV13_NR + r) * (uint32_t)rb + (uint32_t)(2 * st * UB);
                    uint32_t cd[4];
                    float A, B;
                    mv13_unit<T>(mv13_s, sl + RS * r + (g0 & 15) + UB * half, l, cd, A, B);
#pragma unroll
                    for (int c = 0; c < NT; c++) {
                        const int pd = __dp4a((int)cd[3], (int)xv[c].w,
                                              __dp4a((int)cd[2], (int)xv[c].z,
                                                     __dp4a((int)cd[1], (int)xv[c].y, __dp4a((int)cd[0], (int)xv[c].x, 0))));
                        acc[r][c] = fmaf(dx[c], fmaf(A, (float)pd, B * (float)xs[c]), acc[r][c]);
                    }
                }
            }
            __syncwarp(); /* every lane has read the slot before it is refilled */
            issue();
            slot_out = slot_out + 1 == STAGES ? 0 : slot_out + 1;
        }
        /* the warp's sums, then the block's in warp order (red double-buffered: a group's readers
         * are done before any warp passes the next group's barrier) */
#pragma unroll
        for (int r = 0; r < MV13_NR; r++)
#pragma unroll
            for (int c = 0; c < NT; c++) {
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], o);
                if (lane == 0) red[buf][warp][r][c] = acc[r][c];
            }
        __syncthreads();
        mv_group_out<XS>(y, x, red[buf], nw, rinv, p * MV13_NR, rows);
    }
}

/* Shared memory of a block: X, then each warp's ring. */
template <int T>
static inline size_t mv13_block_smem(int64_t k, int nt) {
    return mv13_xsmem(k, nt) + (size_t)mv13_warps(k) * mv13_stages(T) * mv13_slot(T);
}

/* The grid: up to 24 warps per SM (3 blocks of 8: __launch_bounds__'s registers) where shared
 * memory holds them, no more blocks than groups of rows. */
template <int T>
static inline int mv13_grid(int64_t rows, int64_t k, int nt) {
    int sms, smem_max, smem_sm;
    if (!mv_device(&sms, &smem_max, &smem_sm)) return 0;
    const int64_t groups = (rows + MV13_NR - 1) / MV13_NR;
    const int64_t by_smem = (int64_t)smem_sm / (int64_t)(mv13_block_smem<T>(k, nt) + MV13_STATIC + 1024);
    const int64_t per = std::max<int64_t>(1, std::min<int64_t>(3 * MV13_WARPS / mv13_warps(k), by_smem));
    return (int)std::min<int64_t>(groups, (int64_t)sms * per);
}

/* Whether v13 takes a case: its types, 1 to 4 tokens, k a multiple of 256, X and the rings within
 * the device's shared memory per block (the weights' address is checked at launch). */
template <int T>
static inline bool mv13_takes_t(int64_t k, int n) {
    int sms, smem_max;
    return n >= 1 && n <= 4 && k % 256 == 0 && k <= INT32_MAX && mv_device(&sms, &smem_max) &&
           mv13_block_smem<T>(k, n) + MV13_STATIC <= (size_t)smem_max;
}
static inline bool mv13_takes(uint32_t t, int64_t k, int n) {
    switch (t) {
    case QUANT_Q4_1: return mv13_takes_t<QUANT_Q4_1>(k, n);
    case QUANT_Q5_0: return mv13_takes_t<QUANT_Q5_0>(k, n);
    case QUANT_Q5_1: return mv13_takes_t<QUANT_Q5_1>(k, n);
    case QUANT_Q2_K: return mv13_takes_t<QUANT_Q2_K>(k, n);
    case QUANT_Q3_K: return mv13_takes_t<QUANT_Q3_K>(k, n);
    default: return false;
    }
}

/* Raises the shared-memory limit of every production instantiation (at load, outside graph capture)
 * to what the device allows beside the kernel's static arrays (asking for more is an error, which
 * would also stay behind for the next cudaGetLastError). */
template <typename K>
static inline void mv13_prepare_k(K kern, int smem_max) {
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, kern) == cudaSuccess && (size_t)smem_max > a.sharedSizeBytes)
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max - (int)a.sharedSizeBytes);
}

template <int T, typename XT, typename XS>
static inline void mv13_prepare_x(int smem_max) {
    mv13_prepare_k(matvec_v13<T, XT, XS, 1>, smem_max);
    mv13_prepare_k(matvec_v13<T, XT, XS, 2>, smem_max);
    mv13_prepare_k(matvec_v13<T, XT, XS, 3>, smem_max);
    mv13_prepare_k(matvec_v13<T, XT, XS, 4>, smem_max);
}

template <int T>
static inline void mv13_prepare_t() {
    int sms, smem_max;
    if (!mv_device(&sms, &smem_max)) return;
    mv13_prepare_x<T, float, mv_x>(smem_max);
    mv13_prepare_x<T, __half, mv_x>(smem_max);
    mv13_prepare_x<T, float, mv_x_swiglu>(smem_max);
    mv13_prepare_x<T, float, mv_x_norm>(smem_max);
    mv13_prepare_x<T, float, mv_x_norm_rope>(smem_max);
    mv13_prepare_x<T, float, mv_x_acc>(smem_max);
    mv13_prepare_x<T, float, mv_x_swiglu_acc>(smem_max);
}

static inline void mv13_prepare(uint32_t t) {
    switch (t) {
    case QUANT_Q4_1: mv13_prepare_t<QUANT_Q4_1>(); break;
    case QUANT_Q5_0: mv13_prepare_t<QUANT_Q5_0>(); break;
    case QUANT_Q5_1: mv13_prepare_t<QUANT_Q5_1>(); break;
    case QUANT_Q2_K: mv13_prepare_t<QUANT_Q2_K>(); break;
    case QUANT_Q3_K: mv13_prepare_t<QUANT_Q3_K>(); break;
    default: break;
    }
}

template <int T, typename XT, typename XS, int NT>
static inline cudaError_t mv13_launch_n(float *y, const void *w, XS x, int rows, int k, cudaStream_t s) {
    const int grid = mv13_grid<T>(rows, k, NT);
    if (grid == 0) return cudaErrorUnknown;
    return pdl_launch(matvec_v13<T, XT, XS, NT>, dim3(grid), dim3(32 * mv13_warps(k)), mv13_block_smem<T>(k, NT), s,
                      y, (const uint8_t *)w, x, rows, k);
}

template <int T, typename XT, typename XS>
static inline cudaError_t mv13_launch_t(float *y, const void *w, XS x, int rows, int k, int n, cudaStream_t s) {
    switch (n) {
    case 1: return mv13_launch_n<T, XT, XS, 1>(y, w, x, rows, k, s);
    case 2: return mv13_launch_n<T, XT, XS, 2>(y, w, x, rows, k, s);
    case 3: return mv13_launch_n<T, XT, XS, 3>(y, w, x, rows, k, s);
    default: return mv13_launch_n<T, XT, XS, 4>(y, w, x, rows, k, s);
    }
}

/* v13 for weight type t where it takes the case (mv13_takes, the weights 16-byte aligned), with
 * *e its launch's result; false with nothing launched otherwise. */
template <typename XT, typename XS>
static inline bool matvec_v13_launch(float *y, const void *w, uint32_t t, XS x, int rows, int k, int n, cudaStream_t s,
                                     cudaError_t *e) {
    if ((uintptr_t)w % 16 != 0 || !mv13_takes(t, k, n)) return false;
    switch (t) {
    case QUANT_Q4_1: *e = mv13_launch_t<QUANT_Q4_1, XT, XS>(y, w, x, rows, k, n, s); return true;
    case QUANT_Q5_0: *e = mv13_launch_t<QUANT_Q5_0, XT, XS>(y, w, x, rows, k, n, s); return true;
    case QUANT_Q5_1: *e = mv13_launch_t<QUANT_Q5_1, XT, XS>(y, w, x, rows, k, n, s); return true;
    case QUANT_Q2_K: *e = mv13_launch_t<QUANT_Q2_K, XT, XS>(y, w, x, rows, k, n, s); return true;
    case QUANT_Q3_K: *e = mv13_launch_t<QUANT_Q3_K, XT, XS>(y, w, x, rows, k, n, s); return true;
    default: return false;
    }
}

#endif
