/* The decode matvec v12: Q5_K weights in their GGUF rows against X rounded to int8 per 32 values,
 * products by dp4a, for 1 to 4 tokens. Q5_K is what llama.cpp's Q4_K_M gives a fused QKV matrix
 * (Phi-3 / Phi-4) and what Q5_K_M gives most matrices; v1 (matvec_fallback.cuh) dequantised each
 * 32-weight unit to f32 and ran ~8x under the weights' copy time (PERF-LOG run 118: Phi-4-mini's
 * QKV matvec ~33 us of a 61 us layer). The rows stay in GGUF layout, so the prompt GEMM
 * (gemm_gguf.cuh) and v1 (5 to 8 tokens) read the same buffer.
 *
 * Super-block (176 bytes): d, dmin (f16), scales[12] (6-bit scale and min of 8 sub-blocks of 32),
 * qh[32], qs[128]. Chunk i (0..3) is qs[32 i .. 32 i + 32): low nibbles sub-block 2 i, high
 * nibbles sub-block 2 i + 1, their fifth bits qh[l] bits 2 i and 2 i + 1; w = d sc q - dmin m.
 *
 * A warp takes NR rows at a time, its half-warps alternate super-blocks, and lane l of a half
 * takes chunk l / 4, bytes 8 (l % 4) .. + 8 of it (8 weights of each of the chunk's two
 * sub-blocks): one 16-byte header load (d, dmin, scales: the same address for the 16 lanes), 8
 * bytes of qh, 8 of qs per row and super-block. The lane forms the 5-bit codes as bytes
 * (nibble | fifth bit << 4) and one dp4a per 4 weights multiplies them with X's int8 codes; a
 * second dp4a sums X's codes for the min term (so the min meets the same rounded X). The next
 * super-blocks' loads are issued before the current ones are used (two sets in registers), and
 * the first before pdl_wait (weights only: pdl.cuh rule 1).
 *
 * X is staged once per block (a persistent grid of at most two blocks per SM) as int8 in shared
 * memory, laid out per 256 values as [half h][chunk i][32] (natural index 64 i + 32 h + m at
 * 128 h + 32 i + m), so the 16 lanes of a half-warp read 128 consecutive bytes, and d per 32.
 * The decode fusions as v10's (matvec_src.cuh): a NORM source's x * g staged and the sums scaled
 * by 1 / rms (every block sums x^2 itself), ACC's Y +=, and ROPE's epilogue (a quad of rows holds
 * each rotated pair: rows 2j, 2j + 1); not GLU (v11 only). No early start beside another grid
 * (cu_matvec_f32_norm_rope_beside): v12 waits for it as for any previous kernel.
 * Error: that of v10 (matvec_dp4a.cuh; tests/gpu/mvq.h's budget). */
#ifndef MGI_KERNELS_MATVEC_K5_CUH
#define MGI_KERNELS_MATVEC_K5_CUH

#include <algorithm>
#include "kernels/matvec_layout.cuh"
#include "kernels/matvec_src.cuh"
#include "kernels/pdl.cuh"

#define MV12_WARPS 8
#define MV12_NR 4 /* rows per warp at a time */

/* Shared memory of nt tokens: int8 X [nt][k], d of X per 32 [nt][k / 32]. */
__host__ __device__ __forceinline__ size_t mv12_smem(int64_t k, int nt) { return (size_t)nt * (size_t)(k + k / 32 * 4); }

/* One row's loads of one super-block (zeros past the matrix: d = 0 makes them add nothing). */
struct mv12_ld {
    uint4 hd;    /* d, dmin, scales[12] */
    uint2 qh, qs;
};

__device__ __forceinline__ void mv12_load(mv12_ld &l, const uint8_t *sb, int i, int j0, bool ok) {
    if (ok) {
        l.hd = __ldg((const uint4 *)sb);
        l.qh = __ldg((const uint2 *)(sb + 16 + j0));
        l.qs = __ldg((const uint2 *)(sb + 48 + 32 * i + j0));
    } else {
        l.hd = make_uint4(0, 0, 0, 0);
        l.qh = l.qs = make_uint2(0, 0);
    }
}

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

template <typename XT, typename XS, int NT>
__global__ void __launch_bounds__(32 * MV12_WARPS, 2) matvec_v12(float *y, const uint8_t *w, XS x, int rows, int k) {
    static_assert(!XS::GLU, "v12: no gate/up epilogue (v11 only)");
    extern __shared__ __align__(16) uint8_t mv12_s[];
    uint8_t *xq = mv12_s;                      /* [NT][k] int8, [h][i][32] per 256 */
    float *xd = (float *)(mv12_s + NT * k);    /* [NT][k / 32] */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = lane >> 4, l = lane & 15;
    const int i = l >> 2, j0 = 8 * (l & 3);
    const int S = k / 256, nsb = (S + 1) / 2; /* super-blocks per row, steps of a half-warp per row */
    const int64_t rb = (int64_t)S * 176;
    const int quads = (rows + MV12_NR - 1) / MV12_NR, qstride = gridDim.x * MV12_WARPS;
    /* the warp's work: row quads q = q0, q0 + qstride, ..., each in nsb steps */
    const int q0 = blockIdx.x * MV12_WARPS + warp;
    const int steps = q0 < quads ? ((quads - 1 - q0) / qstride + 1) * nsb : 0;
    mv12_ld cur[MV12_NR], nxt[MV12_NR];
    auto issue = [&](mv12_ld (&b)[MV12_NR], int it) {
        const int q = q0 + (it / nsb) * qstride, sb = 2 * (it % nsb) + half;
#pragma unroll
        for (int r = 0; r < MV12_NR; r++) {
            const int row = q * MV12_NR + r;
            const bool ok = it < steps && row < rows && sb < S;
            mv12_load(b[r], w + (int64_t)row * rb + (int64_t)sb * 176, i, j0, ok);
        }
    };
    issue(nxt, 0);
    pdl_wait(); /* X belongs to the previous kernel */
    pdl_trigger();
    /* stage X token by token: 4 values a thread, the 8 threads of a 32-value block share max|x|
     * (k / 4 is a multiple of 64: whole warps take part in every round) */
    __shared__ float ssw[NT][MV12_WARPS], rinv[NT];
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
    if constexpr (XS::NORM) { /* kernels/norm.cu's factor, the warps' sums added in warp order (as v10) */
        if (threadIdx.x < NT) {
            float ss = 0.0f;
            for (int wp = 0; wp < MV12_WARPS; wp++) ss += ssw[threadIdx.x][wp];
            rinv[threadIdx.x] = rsqrtf(ss / (float)k + x.eps);
        }
        __syncthreads();
    }
    float acc[MV12_NR][NT];
#pragma unroll
    for (int r = 0; r < MV12_NR; r++)
#pragma unroll
        for (int c = 0; c < NT; c++) acc[r][c] = 0.0f;
    for (int it = 0; it < steps; it++) {
#pragma unroll
        for (int r = 0; r < MV12_NR; r++) cur[r] = nxt[r];
        issue(nxt, it + 1);
        const int sb = 2 * (it % nsb) + half;
        if (sb < S) {
            const uint8_t *xs = xq + 256 * sb + 32 * i + j0;
            const float *xds = xd + 8 * sb + 2 * i;
#pragma unroll
            for (int r = 0; r < MV12_NR; r++) mv12_dot<NT>(acc[r], cur[r], xs, xds, i, k);
        }
        if (it % nsb == nsb - 1) { /* the quad's rows are done: sums over the warp (every lane gets them) */
            const int q = q0 + (it / nsb) * qstride;
#pragma unroll
            for (int r = 0; r < MV12_NR; r++)
#pragma unroll
                for (int c = 0; c < NT; c++) {
#pragma unroll
                    for (int o = 16; o > 0; o >>= 1) acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], o);
                    if constexpr (XS::NORM) acc[r][c] *= rinv[c];
                }
            /* lane r NT + c writes row r of token c (a ROPE source: with its pair partner r ^ 1,
             * which the quad holds too) */
#pragma unroll
            for (int r = 0; r < MV12_NR; r++)
#pragma unroll
                for (int c = 0; c < NT; c++) {
                    const int row = q * MV12_NR + r;
                    if (lane != r * NT + c || row >= rows) continue;
                    if constexpr (XS::ROPE) {
                        mv_rope_store(x, row, c, acc[r][c], acc[r ^ 1][c]);
                    } else {
                        float *yp = y + (int64_t)c * rows + row;
                        if constexpr (XS::ACC) *yp += acc[r][c]; /* as kernels.h's cu_add: y + (W . X) */
                        else *yp = acc[r][c];
                    }
                }
#pragma unroll
            for (int r = 0; r < MV12_NR; r++)
#pragma unroll
                for (int c = 0; c < NT; c++) acc[r][c] = 0.0f;
        }
    }
}

/* The grid: at most two blocks per SM, enough warps for every quad of rows once. */
static inline int mv12_grid(int64_t rows) {
    int sms, smem_max;
    if (!mv_device(&sms, &smem_max)) return 0;
    const int64_t quads = (rows + MV12_NR - 1) / MV12_NR;
    return (int)std::min<int64_t>((quads + MV12_WARPS - 1) / MV12_WARPS, 2 * sms);
}

template <typename XT, typename XS, int NT>
static inline cudaError_t matvec_v12_launch_t(float *y, const void *w, XS x, int rows, int k, cudaStream_t s) {
    const int grid = mv12_grid(rows);
    if (grid == 0) return cudaErrorUnknown;
    return pdl_launch(matvec_v12<XT, XS, NT>, dim3(grid), dim3(32 * MV12_WARPS), mv12_smem(k, NT), s, y,
                      (const uint8_t *)w, x, rows, k);
}

/* Whether v12 takes a case: Q5_K, 1 to 4 tokens, X within the device's shared memory per block
 * (the same with every source: the fused ones add only static arrays of NT floats). */
static inline bool mv12_takes(uint32_t t, int64_t k, int n) {
    int sms, smem_max;
    return t == QUANT_Q5_K && n >= 1 && n <= 4 && k % 256 == 0 && mv_device(&sms, &smem_max) &&
           mv12_smem(k, n) <= (size_t)smem_max;
}

/* Raises the shared-memory limit of every production instantiation (at load, outside graph capture). */
template <typename XT, typename XS>
static inline void mv12_prepare_t() {
    int sms, smem_max;
    if (!mv_device(&sms, &smem_max)) return;
    cudaFuncSetAttribute(matvec_v12<XT, XS, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max);
    cudaFuncSetAttribute(matvec_v12<XT, XS, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max);
    cudaFuncSetAttribute(matvec_v12<XT, XS, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max);
    cudaFuncSetAttribute(matvec_v12<XT, XS, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max);
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
