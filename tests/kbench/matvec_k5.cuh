/* Kernel lab: the decode matvec v12, Q5_K weights in their GGUF rows against X rounded to int8
 * per 32 values, products by dp4a, for 1 to 4 tokens. Production ran it for Q5_K (llama.cpp's
 * Q4_K_M gives Phi-3 / Phi-4 a fused QKV in Q5_K; Q5_K_M gives most matrices Q5_K) until Q5_K
 * joined the repacked layout that v11 reads (kernels/matvec_layout.cuh: mv5_hbit); `kbench matvec
 * Q5_K` times the two side by side. Its rows stay in GGUF layout.
 *
 * Super-block (176 bytes): d, dmin (f16), scales[12] (6-bit scale and min of 8 sub-blocks of 32),
 * qh[32], qs[128]. Chunk i (0..3) is qs[32 i .. 32 i + 32): low nibbles sub-block 2 i, high
 * nibbles sub-block 2 i + 1, their fifth bits qh[l] bits 2 i and 2 i + 1; w = d sc q - dmin m.
 *
 * A block takes a group of MV12_NR rows at a time (so a RoPE pair 2j, 2j + 1 is one block's), its
 * warps the group's steps of two super-blocks (one per half-warp), each warp through a ring of
 * MV12_STAGES steps in shared memory filled by cp.async, so that a warp has two steps (~2.8 KB)
 * in flight while it computes a third, ~60 KB per SM at 24 warps: warps that held their next
 * step in registers, one in flight each, streamed ~0.8 TB/s (PERF-LOG run 120: 12-15 us for
 * Phi-4-mini's 10.8 MB QKV). Lane l of a half-warp takes chunk l / 4, bytes 8 (l % 4) .. + 8 of
 * it (8 weights of each of the chunk's two sub-blocks): one 16-byte header load (d, dmin,
 * scales: the same address for the 16 lanes), 8 bytes of qh, 8 of qs per row and super-block.
 * The lane forms the 5-bit codes as bytes (nibble | fifth bit << 4) and one dp4a per 4 weights
 * multiplies them with X's int8 codes; a second dp4a sums X's codes for the min term (so the min
 * meets the same rounded X). A warp's steps run on across the block's groups; the first ones are
 * issued before pdl_wait (weights only: pdl.cuh rule 1); the warps' sums meet in shared memory,
 * added in warp order.
 *
 * X is staged once per block (a persistent grid of up to 24 warps per SM) as int8 in shared
 * memory, laid out per 256 values as [half h][chunk i][32] (natural index 64 i + 32 h + m at
 * 128 h + 32 i + m), so the 16 lanes of a half-warp read 128 consecutive bytes, and d per 32.
 * The decode fusions as v10's (matvec_src.cuh): a NORM source's x * g staged and the sums scaled
 * by 1 / rms (every block sums x^2 itself), ACC's Y +=, and ROPE's epilogue (a block's group of rows
 * holds each rotated pair: rows 2j, 2j + 1); not GLU (v11 only). No early start beside another grid
 * (cu_matvec_f32_norm_rope_beside): v12 waits for it as for any previous kernel.
 * Error: that of v10 (matvec_dp4a.cuh; tests/gpu/mvq.h's budget). */
#ifndef MGI_KBENCH_MATVEC_K5_CUH
#define MGI_KBENCH_MATVEC_K5_CUH

#include <algorithm>
#include "kernels/matvec_layout.cuh"
#include "kernels/matvec_src.cuh"
#include "kernels/pdl.cuh"

#define MV12_WARPS 8
#define MV12_NR 4 /* rows of a step (RoPE partners 2j, 2j + 1 in one) */

/* Shared memory of X for nt tokens: int8 X [nt][k], d of X per 32 [nt][k / 32] (16-byte multiple). */
__host__ __device__ __forceinline__ size_t mv12_smem(int64_t k, int nt) { return (size_t)nt * (size_t)(k + k / 32 * 4); }

/* One row's data of one super-block, as a lane uses it. */
struct mv12_ld {
    uint4 hd;    /* d, dmin, scales[12] */
    uint2 qh, qs;
};

/* A warp's ring slot (a step: MV12_NR rows x 2 super-blocks): [row][half] headers (16 bytes), then
 * [row][lane] 8 bytes of qh, then [row][lane] 8 bytes of qs. */
#define MV12_STAGES 3
#define MV12_STATIC 2048 /* bytes of static shared memory a v12 kernel may have (ssw, rinv, red) */
#define MV12_SLOT (MV12_NR * (32 + 32 * 8 + 32 * 8))

__device__ __forceinline__ void mv12_cp(uint32_t dst, const void *src, int bytes16) {
    if (bytes16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void mv12_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void mv12_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(MV12_STAGES - 2) : "memory"); }

/* Four f32 values of X at (tok, kk): f16 X in memory, or what the source gives (mv_x, SwiGLU; a
 * NORM source's x * g, with x^2 added to ss). */
template <typename XT, typename XS>
__device__ __forceinline__ float4 mv12_x(const XS &x, int tok, int kk, int k, float &ss) {
    if constexpr (sizeof(XT) == 2) {
        const uint2 h = *(const uint2 *)((const XT *)x.p + (int64_t)tok * k + kk);
        const float2 a = __half22float2(*(const __half2 *)&h.x), b = __half22float2(*(const __half2 *)&h.y);
        return make_float4(a.x, a.y, b.x, b.y);
    } else {
        return mv_x_stage(x, tok, kk, k, ss);
    }
}

/* acc[c] += the lane's share of row . X for token c, from one super-block's loads l; xq: the
 * tokens' int8 X of this super-block's [h][i][32] layout (+ the lane's 8 bytes), xd: d of X of
 * its sub-blocks. */
template <int NT>
__device__ __forceinline__ void mv12_dot(float (&acc)[NT], const mv12_ld &l, const uint8_t *xq, const float *xd, int i,
                                         int k) {
    constexpr uint32_t LO = 0x0F0F0F0Fu, B0 = 0x01010101u;
    const float d = mv_half_lo(l.hd.x), dmin = mv_half_hi(l.hd.x);
    /* 6-bit scales and mins of sub-blocks 0-3 (a) and 4-7 (b), one byte each */
    const uint32_t sca = l.hd.y & 0x3f3f3f3fu, ma = l.hd.z & 0x3f3f3f3fu;
    const uint32_t scb = (l.hd.w & 0x0f0f0f0fu) | ((l.hd.y >> 2) & 0x30303030u);
    const uint32_t mb = ((l.hd.w >> 4) & 0x0f0f0f0fu) | ((l.hd.z >> 2) & 0x30303030u);
    const int sh = 16 * (i & 1); /* sub-blocks 2i, 2i + 1: bytes 2 (i & 1), + 1 of word a or b */
    const uint32_t scw = (i < 2 ? sca : scb) >> sh, mw = (i < 2 ? ma : mb) >> sh;
    const float ds0 = d * (float)(scw & 63), ds1 = d * (float)((scw >> 8) & 63);
    const float dm0 = dmin * (float)(mw & 63), dm1 = dmin * (float)((mw >> 8) & 63);
    /* 5-bit codes: the nibble and its qh bit moved to bit 4 of each byte */
    const int c0 = (int)((l.qs.x & LO) | (((l.qh.x >> (2 * i)) & B0) << 4));
    const int c1 = (int)((l.qs.y & LO) | (((l.qh.y >> (2 * i)) & B0) << 4));
    const int e0 = (int)(((l.qs.x >> 4) & LO) | (((l.qh.x >> (2 * i + 1)) & B0) << 4));
    const int e1 = (int)(((l.qs.y >> 4) & LO) | (((l.qh.y >> (2 * i + 1)) & B0) << 4));
#pragma unroll
    for (int c = 0; c < NT; c++) {
        const uint2 x = *(const uint2 *)(xq + (int64_t)c * k), z = *(const uint2 *)(xq + (int64_t)c * k + 128);
        const float2 dx = *(const float2 *)(xd + c * (k / 32));
        const int p0 = __dp4a(c1, (int)x.y, __dp4a(c0, (int)x.x, 0));
        const int s0 = __dp4a((int)B0, (int)x.y, __dp4a((int)B0, (int)x.x, 0));
        const int p1 = __dp4a(e1, (int)z.y, __dp4a(e0, (int)z.x, 0));
        const int s1 = __dp4a((int)B0, (int)z.y, __dp4a((int)B0, (int)z.x, 0));
        acc[c] = fmaf(dx.x, fmaf(ds0, (float)p0, -dm0 * (float)s0), acc[c]);
        acc[c] = fmaf(dx.y, fmaf(ds1, (float)p1, -dm1 * (float)s1), acc[c]);
    }
}

/* Warps of a block for rows of S super-blocks: one per step of a group of rows (a step is 2
 * super-blocks), at most MV12_WARPS. */
__host__ __device__ __forceinline__ int mv12_warps(int64_t k) {
    const int64_t steps = (k / 256 + 1) / 2;
    return steps < MV12_WARPS ? (int)steps : MV12_WARPS;
}

template <typename XT, typename XS, int NT>
__global__ void __launch_bounds__(32 * MV12_WARPS, 3) matvec_v12(float *y, const uint8_t *w, XS x, int rows, int k) {
    static_assert(!XS::GLU, "v12: no gate/up epilogue (v11 only)");
    static_assert(!XS::POST, "v12: no post norm (v10 and v11 only)");
    extern __shared__ __align__(16) uint8_t mv12_s[];
    uint8_t *xq = mv12_s;                      /* [NT][k] int8, [h][i][32] per 256 */
    float *xd = (float *)(mv12_s + NT * k);    /* [NT][k / 32] */
    __shared__ float ssw[NT][MV12_WARPS], rinv[NT], red[2][MV12_WARPS][MV12_NR][NT];
    static_assert(sizeof(ssw) + sizeof(rinv) + sizeof(red) <= MV12_STATIC, "v12: MV12_STATIC too small");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = lane >> 4, l = lane & 15;
    const int i = l >> 2, j0 = 8 * (l & 3), nw = blockDim.x >> 5;
    const int S = k / 256, nst = (S + 1) / 2; /* super-blocks per row; steps per group of rows */
    const int64_t rb = (int64_t)S * 176;
    const int groups = (rows + MV12_NR - 1) / MV12_NR;
    /* the block takes groups blockIdx.x, + gridDim.x, ...; warp w steps w, w + nw, ... of each
     * (nw <= nst: every warp has a step in every group) */
    int ip = blockIdx.x, is = warp; /* the next step to issue */
    /* the warp's ring (after X): step n in slot n % MV12_STAGES; every issue commits one group
     * (empty past the work), so wait_group counts steps */
    const uint32_t ring = (uint32_t)__cvta_generic_to_shared(mv12_s + mv12_smem(k, NT)) + warp * MV12_STAGES * MV12_SLOT;
    int slot_in = 0;
    auto issue = [&]() {
        const int sb = 2 * is + half;
        const uint32_t sl = ring + slot_in * MV12_SLOT;
#pragma unroll
        for (int r = 0; r < MV12_NR; r++) {
            const int row = ip * MV12_NR + r;
            if (ip < groups && row < rows && sb < S) {
                const uint8_t *p = w + (int64_t)row * rb + (int64_t)sb * 176;
                if (l == 0) mv12_cp(sl + 32 * r + 16 * half, p, 1);
                mv12_cp(sl + MV12_NR * 32 + 256 * r + 8 * lane, p + 16 + j0, 0);
                mv12_cp(sl + MV12_NR * 288 + 256 * r + 8 * lane, p + 48 + 32 * i + j0, 0);
            }
        }
        mv12_commit();
        slot_in = slot_in + 1 == MV12_STAGES ? 0 : slot_in + 1;
        is += nw;
        if (is >= nst) {
            is = warp;
            ip += gridDim.x;
        }
    };
#pragma unroll
    for (int st = 0; st < MV12_STAGES - 1; st++) issue();
    pdl_wait(); /* X belongs to the previous kernel */
    pdl_trigger();
    /* stage X token by token: 4 values a thread, the 8 threads of a 32-value block share max|x|
     * (k / 4 is a multiple of 64: whole warps take part in every round) */
    for (int tok = 0; tok < NT; tok++) {
        float ss = 0.0f; /* NORM: this thread's sum of x^2 */
        for (int f = threadIdx.x; f < k / 4; f += blockDim.x) {
            const int kk = 4 * f;
            const float4 v = mv12_x<XT>(x, tok, kk, k, ss);
            float m = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
            const float inv = m > 0.0f ? 127.0f / m : 0.0f;
            const uint32_t q = (uint32_t)(__float2int_rn(v.x * inv) & 255) | (uint32_t)(__float2int_rn(v.y * inv) & 255) << 8 |
                               (uint32_t)(__float2int_rn(v.z * inv) & 255) << 16 | (uint32_t)__float2int_rn(v.w * inv) << 24;
            const int e = kk & 255, ci = e >> 6, h = (e >> 5) & 1, mm = e & 31;
            *(uint32_t *)(xq + (int64_t)tok * k + (kk & ~255) + 128 * h + 32 * ci + mm) = q;
            if ((kk & 31) == 0) xd[tok * (k / 32) + kk / 32] = m * (1.0f / 127.0f);
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
        float acc[MV12_NR][NT];
#pragma unroll
        for (int r = 0; r < MV12_NR; r++)
#pragma unroll
            for (int c = 0; c < NT; c++) acc[r][c] = 0.0f;
        for (int st = warp; st < nst; st += nw) {
            mv12_wait(); /* this step's group landed (MV12_STAGES - 2 younger ones may be out) */
            __syncwarp();
            const uint8_t *sl = mv12_s + mv12_smem(k, NT) + (warp * MV12_STAGES + slot_out) * MV12_SLOT;
            mv12_ld cur[MV12_NR];
#pragma unroll
            for (int r = 0; r < MV12_NR; r++) {
                cur[r].hd = *(const uint4 *)(sl + 32 * r + 16 * half);
                cur[r].qh = *(const uint2 *)(sl + MV12_NR * 32 + 256 * r + 8 * lane);
                cur[r].qs = *(const uint2 *)(sl + MV12_NR * 288 + 256 * r + 8 * lane);
            }
            __syncwarp(); /* every lane has read the slot before it is refilled */
            issue();
            slot_out = slot_out + 1 == MV12_STAGES ? 0 : slot_out + 1;
            const int sb = 2 * st + half;
            if (sb < S) {
                const uint8_t *xs = xq + 256 * sb + 32 * i + j0;
                const float *xds = xd + 8 * sb + 2 * i;
#pragma unroll
                for (int r = 0; r < MV12_NR; r++) mv12_dot<NT>(acc[r], cur[r], xs, xds, i, k);
            }
        }
        /* the warp's sums, then the block's in warp order (red double-buffered: a group's readers
         * are done before any warp passes the next group's barrier) */
#pragma unroll
        for (int r = 0; r < MV12_NR; r++)
#pragma unroll
            for (int c = 0; c < NT; c++) {
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], o);
                if (lane == 0) red[buf][warp][r][c] = acc[r][c];
            }
        __syncthreads();
        mv_group_out<XS>(y, x, red[buf], nw, rinv, p * MV12_NR, rows);
    }
}

/* Shared memory of a block: X (mv12_smem), then each warp's ring. */
static inline size_t mv12_block_smem(int64_t k, int nt) {
    return mv12_smem(k, nt) + (size_t)mv12_warps((int)k) * MV12_STAGES * MV12_SLOT;
}

/* The grid: up to 24 warps per SM (3 blocks of 8: __launch_bounds__'s registers) where shared
 * memory holds them, no more blocks than groups of rows. */
static inline int mv12_grid(int64_t rows, int64_t k, int nt) {
    int sms, smem_max, smem_sm;
    if (!mv_device(&sms, &smem_max, &smem_sm)) return 0;
    const int64_t groups = (rows + MV12_NR - 1) / MV12_NR;
    const int64_t by_smem = (int64_t)smem_sm / (int64_t)(mv12_block_smem(k, nt) + 1024);
    const int64_t per = std::max<int64_t>(1, std::min<int64_t>(3 * MV12_WARPS / mv12_warps((int)k), by_smem));
    return (int)std::min<int64_t>(groups, (int64_t)sms * per);
}

template <typename XT, typename XS, int NT>
static inline cudaError_t matvec_v12_launch_t(float *y, const void *w, XS x, int rows, int k, cudaStream_t s) {
    const int grid = mv12_grid(rows, k, NT);
    if (grid == 0) return cudaErrorUnknown;
    return pdl_launch(matvec_v12<XT, XS, NT>, dim3(grid), dim3(32 * mv12_warps(k)), mv12_block_smem(k, NT), s, y,
                      (const uint8_t *)w, x, rows, k);
}

/* Whether v12 takes a case: Q5_K, 1 to 4 tokens, X within the device's shared memory per block
 * (the same with every source: the fused ones add only static arrays of NT floats). */
static inline bool mv12_takes(uint32_t t, int64_t k, int n) {
    int sms, smem_max;
    return t == QUANT_Q5_K && n >= 1 && n <= 4 && k % 256 == 0 && mv_device(&sms, &smem_max) &&
           mv12_block_smem(k, n) + MV12_STATIC <= (size_t)smem_max;
}

/* Raises the shared-memory limit of every production instantiation (at load, outside graph capture)
 * to what the device allows beside the kernel's static arrays (asking for more is an error, which
 * would also stay behind for the next cudaGetLastError). */
template <typename K>
static inline void mv12_prepare_k(K kern, int smem_max) {
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, kern) == cudaSuccess && (size_t)smem_max > a.sharedSizeBytes)
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max - (int)a.sharedSizeBytes);
}

template <typename XT, typename XS>
static inline void mv12_prepare_t() {
    int sms, smem_max;
    if (!mv_device(&sms, &smem_max)) return;
    mv12_prepare_k(matvec_v12<XT, XS, 1>, smem_max);
    mv12_prepare_k(matvec_v12<XT, XS, 2>, smem_max);
    mv12_prepare_k(matvec_v12<XT, XS, 3>, smem_max);
    mv12_prepare_k(matvec_v12<XT, XS, 4>, smem_max);
}

static inline void mv12_prepare_all() {
    mv12_prepare_t<float, mv_x>();
    mv12_prepare_t<__half, mv_x>();
    mv12_prepare_t<float, mv_x_swiglu>();
    mv12_prepare_t<float, mv_x_norm>();
    mv12_prepare_t<float, mv_x_norm_rope>();
    mv12_prepare_t<float, mv_x_acc>();
    mv12_prepare_t<float, mv_x_swiglu_acc>();
}

template <typename XT, typename XS>
static inline cudaError_t matvec_v12_launch(float *y, const void *w, XS x, int rows, int k, int n, cudaStream_t s) {
    switch (n) {
    case 1: return matvec_v12_launch_t<XT, XS, 1>(y, w, x, rows, k, s);
    case 2: return matvec_v12_launch_t<XT, XS, 2>(y, w, x, rows, k, s);
    case 3: return matvec_v12_launch_t<XT, XS, 3>(y, w, x, rows, k, s);
    default: return matvec_v12_launch_t<XT, XS, 4>(y, w, x, rows, k, s);
    }
}

#endif
