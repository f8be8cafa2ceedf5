/* The decode matvec's fallbacks, for what v10 / v11 (matvec_dp4a.cuh, matvec_ring.cuh) do not take:
 *   v1  generic: weights in GGUF layout, dequantised to f32, f32 FMAs; the types kept unrepacked
 *       (F32, F16, BF16, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K: dequant.cuh's dq_unit). A block of 8 warps takes 32 rows (4 per warp, lanes over 32-weight
 *       units), X staged in shared memory (padded against bank conflicts) in passes of
 *       mv1_pass(n) values.
 *   v3  tensor cores, on the repacked layout (matvec_layout.cuh): Q4_0, Q4_K, Q8_0, Q6_K where
 *       v10 does not apply (k not a whole number of v10 groups, more tokens than v10 takes, too
 *       little shared memory). 4-bit codes become f16 exactly in registers (one shift per word),
 *       mma.m16n8k16 multiplies them with X in f16 (f32 X split exactly into hi + lo halves, two
 *       columns per token), scales applied in f32 per 32-weight group. One block = 16 rows x all
 *       of k; its 8 warps split k, two 2 KB groups of weights in flight per warp; X staged in
 *       shared memory with four loads in flight per thread.
 * matvec_v2 is the template of v3 and of the lab's v2, v4 and v5 (tests/kbench/matvec_lab.cuh:
 * its V parameter); production instantiates V = 3 only. Both launch with PDL (pdl.cuh): v3 loads
 * its first groups of weights before pdl_wait(), X is staged and y written after it. */
#ifndef MGI_KERNELS_MATVEC_FALLBACK_CUH
#define MGI_KERNELS_MATVEC_FALLBACK_CUH

#include "kernels/matvec_layout.cuh"
#include "kernels/matvec_src.cuh"
#include "kernels/pdl.cuh"

/* ---------------------------------------------------------------- v1: generic, GGUF layout -- */
#define MV1_ROWS 32 /* rows per block: 8 warps x 4 rows, so X is staged once per 32 rows */
#define MV1_SMEM 36864

/* X values per pass: n * kp * 4.5 bytes (X padded by 4 floats per 32) fit MV1_SMEM. */
__host__ __device__ __forceinline__ int mv1_pass(int n) { return (8192 / n) & ~255; }

template <int T, typename XT, typename XS = mv_x>
__global__ void __launch_bounds__(256) matvec_v1(float *y, const uint8_t *w, XS x, int rows, int k, int n) {
    static_assert(!mv_fused<XS>(), "v1: no fused norm or accumulation (v10 and v11 only)");
    extern __shared__ __align__(16) float mv1_x[]; /* [n][kp / 32][36] */
    pdl_wait(); /* X and y belong to the previous kernels (no weights are read early here) */
    pdl_trigger();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, kp = mv1_pass(n);
    const int stride = kp / 32 * 36;
    float acc[4][8];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < 8; c++) acc[r][c] = 0;
    for (int p0 = 0; p0 < k; p0 += kp) {
        const int pk = min(kp, k - p0);
        __syncthreads();
        for (int i = threadIdx.x; i < n * pk / 4; i += blockDim.x) {
            int tok = i / (pk / 4), e = 4 * (i % (pk / 4));
            float4 v;
            if constexpr (sizeof(XT) == 4) {
                v = mv_x_f32(x, tok, p0 + e, k);
            } else {
                uint2 h = *(const uint2 *)((const XT *)x.p + (int64_t)tok * k + p0 + e);
                float2 a = __half22float2(*(__half2 *)&h.x), b = __half22float2(*(__half2 *)&h.y);
                v = make_float4(a.x, a.y, b.x, b.y);
            }
            *(float4 *)&mv1_x[tok * stride + e / 32 * 36 + e % 32] = v;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int row = blockIdx.x * MV1_ROWS + warp + 8 * r;
            if (row >= rows) break;
            const uint8_t *wr = w + (int64_t)row * dq_row_bytes(T, k);
            for (int u = lane; u < pk / 32; u += 32) {
                float wv[32];
                dq_unit<T>(wr, p0 / 32 + u, wv);
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    if (c >= n) break;
                    const float4 *xp = (const float4 *)&mv1_x[c * stride + u * 36];
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        float4 xv = xp[i];
                        acc[r][c] = fmaf(wv[4 * i], xv.x, acc[r][c]);
                        acc[r][c] = fmaf(wv[4 * i + 1], xv.y, acc[r][c]);
                        acc[r][c] = fmaf(wv[4 * i + 2], xv.z, acc[r][c]);
                        acc[r][c] = fmaf(wv[4 * i + 3], xv.w, acc[r][c]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int row = blockIdx.x * MV1_ROWS + warp + 8 * r;
#pragma unroll
        for (int c = 0; c < 8; c++) {
            if (c >= n) break;
            float s = acc[r][c];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0 && row < rows) y[(int64_t)c * rows + row] = s;
        }
    }
}


/* ---------------------------------------------------------------- v3: tensor cores ---------- */
/* Stages weights [p0, p0 + pk) of X as B fragments: xb[step][col][t] = uint2 (k0 + 2t, +1) and
 * (k0 + 2t + 8, +9) in f16, and xs[sub][col] = f32 sum of the 32 X of sub-block sub (0 for lo
 * columns). Column col is token col (f16 X) or token col / 2, hi (even) or lo (odd) part.
 * Each thread takes 4 consecutive X (one 16- or 8-byte load, coalesced across the block);
 * the 8 threads of a 32-value sub-block add their sums with shuffles. */
template <bool XH, int U, typename XS>
__device__ __forceinline__ void mv2_stage(uint2 *xb, float *xs, const XS &xv, int k, int n,
                                          int ncols, int p0, int pk) {
    uint32_t *xw = (uint32_t *)xb;
    const int q4 = pk / 4, total = n * q4; /* q4 is a multiple of 16 */
    for (int base0 = 0; base0 < total; base0 += U * blockDim.x) {
      /* U loads in flight per thread before the first is used */
      float4 raw[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int f = base0 + u * blockDim.x + threadIdx.x;
        const int tok = f < total ? f / q4 : 0, kk = p0 + 4 * (f < total ? f % q4 : 0);
        raw[u] = make_float4(0, 0, 0, 0);
        if (f < total && kk < k) {
            if constexpr (XH) {
                uint2 r = *(const uint2 *)((const unsigned short *)xv.p + (int64_t)tok * k + kk);
                raw[u].x = __uint_as_float(r.x);
                raw[u].y = __uint_as_float(r.y);
            } else {
                raw[u] = mv_x_f32(xv, tok, kk, k);
            }
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int base = base0 + u * blockDim.x;
        if (base >= total) break;
        const int f = base + threadIdx.x;
        const bool in = f < total;
        const int tok = in ? f / q4 : 0, e4 = 4 * (in ? f % q4 : 0);
        float v[4];
        uint32_t h01 = 0, h23 = 0;
        if (XH) {
            h01 = __float_as_uint(raw[u].x);
            h23 = __float_as_uint(raw[u].y);
            float2 a = __half22float2(*(__half2 *)&h01), b = __half22float2(*(__half2 *)&h23);
            v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
        } else {
            v[0] = raw[u].x; v[1] = raw[u].y; v[2] = raw[u].z; v[3] = raw[u].w;
        }
        float sum = (v[0] + v[1]) + (v[2] + v[3]);
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        sum += __shfl_xor_sync(0xffffffffu, sum, 4);
        if (!in) continue;
        const int s = e4 / 16, e = e4 % 16, t = (e % 8) / 2, hiw = e >= 8, sub = e4 / 32;
        const int col = XH ? tok : 2 * tok;
        if (XH) {
            xw[((s * ncols + col) * 4 + t) * 2 + hiw] = h01;
            xw[((s * ncols + col) * 4 + t + 1) * 2 + hiw] = h23;
        } else {
            __half2 a = __floats2half2_rn(v[0], v[1]), b = __floats2half2_rn(v[2], v[3]);
            float2 af = __half22float2(a), bf = __half22float2(b);
            __half2 al = __floats2half2_rn(v[0] - af.x, v[1] - af.y), bl = __floats2half2_rn(v[2] - bf.x, v[3] - bf.y);
            xw[((s * ncols + col) * 4 + t) * 2 + hiw] = *(uint32_t *)&a;
            xw[((s * ncols + col) * 4 + t + 1) * 2 + hiw] = *(uint32_t *)&b;
            xw[((s * ncols + col + 1) * 4 + t) * 2 + hiw] = *(uint32_t *)&al;
            xw[((s * ncols + col + 1) * 4 + t + 1) * 2 + hiw] = *(uint32_t *)&bl;
        }
        if ((f & 7) == 0) {
            xs[sub * ncols + col] = sum;
            if (!XH) xs[sub * ncols + col + 1] = 0.0f;
        }
      }
    }
}

/* B fragment of local k16 step s for column group gr (zeros past the last column). */
template <int NG>
__device__ __forceinline__ void mv2_bfrag(uint2 b[NG], const uint2 *xb, int s, int ncols, int g, int t) {
#pragma unroll
    for (int gr = 0; gr < NG; gr++) {
        int col = 8 * gr + g;
        b[gr] = col < ncols ? xb[(s * ncols + col) * 4 + t] : make_uint2(0, 0);
    }
}

/* One warp's 4 chunks of weights in registers: loaded ahead, then multiplied. */
template <int T> struct mv2_group;

template <> struct mv2_group<QUANT_Q4_0> {
    static constexpr int GC = 4; /* chunks per group */
    uint4 q[4];
    uint2 sc[4];
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int cbase, int c,
                                         int pc, int lane, int g) {
        const uint4 *qt = (const uint4 *)w + tile * C * 32;
        const uint8_t *st = w + R16 * C * 512 + tile * C * 64;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (pc == 0 || c + i < pc) { /* pc 0: whole groups (v6) */
                q[i] = mv_ld_stream(qt + (int64_t)(cbase + c + i) * 32 + lane);
                sc[i] = __ldg((const uint2 *)(st + (int64_t)(cbase + c + i) * 64) + g);
            }
        }
    }
    template <int NG, int MODE>
    __device__ __forceinline__ void compute(float acc[NG][4], const uint2 *xb, const float *, int c, int pc,
                                            int ncols, int g, int t) const {
        const uint32_t off = 0x64086408u; /* 1032 = 1024 + 8 */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (pc != 0 && c + i >= pc) break;
            const uint32_t words[4] = {q[i].x, q[i].y, q[i].z, q[i].w};
#pragma unroll
            for (int blk = 0; blk < 2; blk++) {
                float d[NG][4];
#pragma unroll
                for (int gr = 0; gr < NG; gr++) d[gr][0] = d[gr][1] = d[gr][2] = d[gr][3] = 0;
#pragma unroll
                for (int s2 = 0; s2 < 2; s2++) {
                    uint32_t a[4];
                    mv_codes<MODE>(a, words[2 * blk + s2], off);
                    uint2 b[NG];
                    mv2_bfrag<NG>(b, xb, (c + i) * 4 + 2 * blk + s2, ncols, g, t);
#pragma unroll
                    for (int gr = 0; gr < NG; gr++) mv_mma(d[gr], a, b[gr].x, b[gr].y);
                }
                const float d0 = blk ? mv_half_hi(sc[i].x) : mv_half_lo(sc[i].x);
                const float d1 = blk ? mv_half_hi(sc[i].y) : mv_half_lo(sc[i].y);
#pragma unroll
                for (int gr = 0; gr < NG; gr++) {
                    acc[gr][0] = fmaf(d0, d[gr][0], acc[gr][0]);
                    acc[gr][1] = fmaf(d0, d[gr][1], acc[gr][1]);
                    acc[gr][2] = fmaf(d1, d[gr][2], acc[gr][2]);
                    acc[gr][3] = fmaf(d1, d[gr][3], acc[gr][3]);
                }
            }
        }
    }
};

/* For Q4_K a group is one super-block (4 chunks share a scale record per row); Q5_K (Q5) the
 * same with the lane's 4 words of fifth bits (h), whose v3 instance of two column groups (f32 X
 * of 5 to 8 tokens) spills 16-52 bytes a thread (ptxas, CUDA 13.0): a fallback, left so. */
template <bool Q5> struct mv2_group_k {
    static constexpr int GC = 4;
    uint4 q[4], r0, r1, h;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int cbase, int c,
                                         int, int lane, int g) {
        const uint4 *qt = (const uint4 *)w + tile * C * 32;
        const uint8_t *st = w + R16 * C * 512 + tile * C * 64;
        const int64_t cg = cbase + c;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = mv_ld_stream(qt + (cg + i) * 32 + lane);
        const uint4 *sr = (const uint4 *)(st + cg * 64);
        r0 = __ldg(sr + g);
        r1 = __ldg(sr + g + 8);
        if constexpr (Q5) h = __ldg((const uint4 *)(w + mv5_high(R16, C)) + (tile * (C / 4) + cg / 4) * 32 + lane);
    }
    template <int NG, int MODE>
    __device__ __forceinline__ void compute(float acc[NG][4], const uint2 *xb, const float *xs, int c, int,
                                            int ncols, int g, int t) const {
        const uint32_t off = 0x64006400u;
        /* The 6-bit scales and mins of sub-blocks 0-3 (a) and 4-7 (b), one byte each. */
        const uint32_t sc0a = r0.y & 0x3f3f3f3fu, m0a = r0.z & 0x3f3f3f3fu;
        const uint32_t sc0b = (r0.w & 0x0f0f0f0fu) | ((r0.y >> 2) & 0x30303030u);
        const uint32_t m0b = ((r0.w >> 4) & 0x0f0f0f0fu) | ((r0.z >> 2) & 0x30303030u);
        const uint32_t sc1a = r1.y & 0x3f3f3f3fu, m1a = r1.z & 0x3f3f3f3fu;
        const uint32_t sc1b = (r1.w & 0x0f0f0f0fu) | ((r1.y >> 2) & 0x30303030u);
        const uint32_t m1b = ((r1.w >> 4) & 0x0f0f0f0fu) | ((r1.z >> 2) & 0x30303030u);
        /* MODE 2 (n = 1): the super-block's sums of sc * product and m * X, times d and dmin once */
        float ga[4] = {0.0f, 0.0f, 0.0f, 0.0f}, gm0 = 0.0f, gm1 = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const uint32_t words[4] = {q[j >> 1].x, q[j >> 1].y, q[j >> 1].z, q[j >> 1].w};
            float d[NG][4];
#pragma unroll
            for (int gr = 0; gr < NG; gr++) d[gr][0] = d[gr][1] = d[gr][2] = d[gr][3] = 0;
#pragma unroll
            for (int s2 = 0; s2 < 2; s2++) {
                uint32_t a[4];
                if constexpr (Q5) {
                    const uint32_t hw = (j >> 1) == 0 ? h.x : (j >> 1) == 1 ? h.y : (j >> 1) == 2 ? h.z : h.w;
                    mv5_codes(a, words[2 * (j & 1) + s2], hw, 2 * (j & 1) + s2);
                } else {
                    mv_codes<MODE>(a, words[2 * (j & 1) + s2], off);
                }
                uint2 b[NG];
                mv2_bfrag<NG>(b, xb, c * 4 + 2 * j + s2, ncols, g, t);
#pragma unroll
                for (int gr = 0; gr < NG; gr++) mv_mma(d[gr], a, b[gr].x, b[gr].y);
            }
            const int sub = 2 * c + j;
            if constexpr (MODE == 2 && NG == 1) {
                /* n = 1: only column 0 carries the sum of X (f32 X: the lo column sums to 0) */
                const float s0 = mv_k4_byte(j < 4 ? sc0a : sc0b, j & 3), s1 = mv_k4_byte(j < 4 ? sc1a : sc1b, j & 3);
                const float m0 = mv_k4_byte(j < 4 ? m0a : m0b, j & 3), m1 = mv_k4_byte(j < 4 ? m1a : m1b, j & 3);
                const float x0 = xs[sub * ncols];
                ga[0] = fmaf(s0, d[0][0], ga[0]);
                ga[1] = fmaf(s0, d[0][1], ga[1]);
                ga[2] = fmaf(s1, d[0][2], ga[2]);
                ga[3] = fmaf(s1, d[0][3], ga[3]);
                gm0 = fmaf(m0, x0, gm0);
                gm1 = fmaf(m1, x0, gm1);
                continue;
            }
            const float2 s0 = mv_k4_scale(r0, j), s1 = mv_k4_scale(r1, j);
#pragma unroll
            for (int gr = 0; gr < NG; gr++) {
                const int col = 8 * gr + 2 * t;
                const float x0 = col < ncols ? xs[sub * ncols + col] : 0.0f;
                const float x1 = col + 1 < ncols ? xs[sub * ncols + col + 1] : 0.0f;
                acc[gr][0] += fmaf(s0.x, d[gr][0], -s0.y * x0);
                acc[gr][1] += fmaf(s0.x, d[gr][1], -s0.y * x1);
                acc[gr][2] += fmaf(s1.x, d[gr][2], -s1.y * x0);
                acc[gr][3] += fmaf(s1.x, d[gr][3], -s1.y * x1);
            }
        }
        if constexpr (MODE == 2 && NG == 1) {
            const float d0 = mv_half_lo(r0.x), d1 = mv_half_lo(r1.x);
            acc[0][0] = fmaf(d0, ga[0], fmaf(-mv_half_hi(r0.x), gm0, acc[0][0]));
            acc[0][1] = fmaf(d0, ga[1], acc[0][1]);
            acc[0][2] = fmaf(d1, ga[2], fmaf(-mv_half_hi(r1.x), gm1, acc[0][2]));
            acc[0][3] = fmaf(d1, ga[3], acc[0][3]);
        }
    }
};

template <> struct mv2_group<QUANT_Q4_K> : mv2_group_k<false> {};
template <> struct mv2_group<QUANT_Q5_K> : mv2_group_k<true> {};

/* Q8_0: codes stored +128 as bytes; a group is 2 chunks (2 KB per warp). */
template <> struct mv2_group<QUANT_Q8_0> {
    static constexpr int GC = 2;
    uint4 q[4];
    uint2 sc[2];
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int cbase, int c,
                                         int pc, int lane, int g) {
        const uint4 *qt = (const uint4 *)w + tile * C * 64;
        const uint8_t *st = w + R16 * C * 1024 + tile * C * 64;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            if (pc == 0 || c + i < pc) { /* pc 0: whole groups (v6) */
                q[2 * i] = mv_ld_stream(qt + (int64_t)(cbase + c + i) * 64 + 2 * lane);
                q[2 * i + 1] = mv_ld_stream(qt + (int64_t)(cbase + c + i) * 64 + 2 * lane + 1);
                sc[i] = __ldg((const uint2 *)(st + (int64_t)(cbase + c + i) * 64) + g);
            }
        }
    }
    template <int NG, int MODE>
    __device__ __forceinline__ void compute(float acc[NG][4], const uint2 *xb, const float *, int c, int pc,
                                            int ncols, int g, int t) const {
        const uint32_t off = 0x64806480u; /* 1152 = 1024 + 128 */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            if (pc != 0 && c + i >= pc) break;
            const uint32_t words[8] = {q[2 * i].x, q[2 * i].y, q[2 * i].z, q[2 * i].w,
                                       q[2 * i + 1].x, q[2 * i + 1].y, q[2 * i + 1].z, q[2 * i + 1].w};
#pragma unroll
            for (int blk = 0; blk < 2; blk++) {
                float d[NG][4];
#pragma unroll
                for (int gr = 0; gr < NG; gr++) d[gr][0] = d[gr][1] = d[gr][2] = d[gr][3] = 0;
#pragma unroll
                for (int s2 = 0; s2 < 2; s2++) {
                    const int s = 2 * blk + s2;
                    uint32_t a[4];
#pragma unroll
                    for (int p = 0; p < 4; p++) {
                        uint32_t h = __byte_perm(words[2 * s + (p >> 1)], 0x64646464u, (p & 1) ? 0x4342 : 0x4140);
                        __half2 v = __hsub2(*(__half2 *)&h, *(const __half2 *)&off);
                        a[p] = *(uint32_t *)&v;
                    }
                    uint2 b[NG];
                    mv2_bfrag<NG>(b, xb, (c + i) * 4 + s, ncols, g, t);
#pragma unroll
                    for (int gr = 0; gr < NG; gr++) mv_mma(d[gr], a, b[gr].x, b[gr].y);
                }
                const float d0 = blk ? mv_half_hi(sc[i].x) : mv_half_lo(sc[i].x);
                const float d1 = blk ? mv_half_hi(sc[i].y) : mv_half_lo(sc[i].y);
#pragma unroll
                for (int gr = 0; gr < NG; gr++) {
                    acc[gr][0] = fmaf(d0, d[gr][0], acc[gr][0]);
                    acc[gr][1] = fmaf(d0, d[gr][1], acc[gr][1]);
                    acc[gr][2] = fmaf(d1, d[gr][2], acc[gr][2]);
                    acc[gr][3] = fmaf(d1, d[gr][3], acc[gr][3]);
                }
            }
        }
    }
};

/* Q6_K: low nibbles as Q4, 2 high bits in a second stream, an int8 scale per 16 weights (one
 * k16 step) and d per super-block; a group is one super-block. */
template <> struct mv2_group<QUANT_Q6_K> {
    static constexpr int GC = 4;
    uint4 lo[4];
    uint2 hi[4];
    uint32_t sg[4], sg8[4], dd;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int cbase, int c,
                                         int, int lane, int g) {
        const int64_t cg = cbase + c;
        const uint4 *lt = (const uint4 *)w + tile * C * 32;
        const uint2 *ht = (const uint2 *)(w + R16 * C * 512) + tile * C * 32;
        const uint32_t *sct = (const uint32_t *)(w + R16 * C * 768) + tile * C * 16;
        const uint16_t *dt = (const uint16_t *)(w + R16 * C * 832) + tile * (C / 4) * 16;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo[i] = mv_ld_stream(lt + (cg + i) * 32 + lane);
            hi[i] = __ldg(ht + (cg + i) * 32 + lane);
            sg[i] = __ldg(sct + (cg + i) * 16 + g);
            sg8[i] = __ldg(sct + (cg + i) * 16 + g + 8);
        }
        dd = (uint32_t)__ldg(dt + (cg / 4) * 16 + g) | (uint32_t)__ldg(dt + (cg / 4) * 16 + g + 8) << 16;
    }
    template <int NG, int MODE>
    __device__ __forceinline__ void compute(float acc[NG][4], const uint2 *xb, const float *, int c, int,
                                            int ncols, int g, int t) const {
        const uint32_t off = 0x64206420u; /* 1056 = 1024 + 32 */
        const float dg = mv_half_lo(dd), dg8 = mv_half_hi(dd);
        float ga[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* MODE 2 (n = 1): sums of sc * product */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t lw[4] = {lo[i].x, lo[i].y, lo[i].z, lo[i].w}, hw[2] = {hi[i].x, hi[i].y};
#pragma unroll
            for (int s = 0; s < 4; s++) {
                uint32_t a[4];
                if constexpr (MODE == 2) {
                    /* As mv_codes MODE 2: registers 1 and 3 take their low nibble in place (1024 +
                     * 16q, scaled by 1/16), so the word is shifted once; the 2 high bits of
                     * register p sit at 8 (s & 1) + 2p of the high word and move next to it. */
                    const uint32_t l8 = lw[s] >> 8, h = hw[s >> 1], K = 0x64006400u;
                    const uint32_t h0 = (s & 1) ? h >> 4 : h << 4, h1 = (s & 1) ? h >> 2 : h << 6;
                    const uint32_t h2 = (s & 1) ? h >> 8 : h, h3 = (s & 1) ? h >> 6 : h << 2;
                    uint32_t c0 = mv_lop3_and_or(h0, 0x00300030u, mv_lop3_and_or(lw[s], 0x000F000Fu, K));
                    uint32_t c1 = mv_lop3_and_or(h1, 0x03000300u, mv_lop3_and_or(lw[s], 0x00F000F0u, K));
                    uint32_t c2 = mv_lop3_and_or(h2, 0x00300030u, mv_lop3_and_or(l8, 0x000F000Fu, K));
                    uint32_t c3 = mv_lop3_and_or(h3, 0x03000300u, mv_lop3_and_or(l8, 0x00F000F0u, K));
                    /* 1024 + q - 1056 = q - 32; (1024 + 16q) / 16 - 96 = q - 32 */
                    const __half2 sixteenth = __floats2half2_rn(0.0625f, 0.0625f), m96 = __floats2half2_rn(-96.0f, -96.0f);
                    __half2 v0 = __hsub2(*(__half2 *)&c0, *(const __half2 *)&off);
                    __half2 v2 = __hsub2(*(__half2 *)&c2, *(const __half2 *)&off);
                    __half2 v1 = __hfma2(*(__half2 *)&c1, sixteenth, m96);
                    __half2 v3 = __hfma2(*(__half2 *)&c3, sixteenth, m96);
                    a[0] = *(uint32_t *)&v0; a[1] = *(uint32_t *)&v1; a[2] = *(uint32_t *)&v2; a[3] = *(uint32_t *)&v3;
                } else {
#pragma unroll
                for (int p = 0; p < 4; p++) {
                    uint32_t h = ((lw[s] >> (4 * p)) & 0x000F000Fu) |
                                 (((hw[s >> 1] >> (8 * (s & 1) + 2 * p)) & 0x00030003u) << 4) | 0x64006400u;
                    __half2 v = __hsub2(*(__half2 *)&h, *(const __half2 *)&off);
                    a[p] = *(uint32_t *)&v;
                }
                }
                uint2 b[NG];
                mv2_bfrag<NG>(b, xb, (c + i) * 4 + s, ncols, g, t);
                float d[NG][4];
#pragma unroll
                for (int gr = 0; gr < NG; gr++) {
                    d[gr][0] = d[gr][1] = d[gr][2] = d[gr][3] = 0;
                    mv_mma(d[gr], a, b[gr].x, b[gr].y);
                }
                if constexpr (MODE == 2 && NG == 1) { /* d of the super-block applied once, below */
                    const float s0 = (float)(int8_t)(sg[i] >> (8 * s)), s1 = (float)(int8_t)(sg8[i] >> (8 * s));
                    ga[0] = fmaf(s0, d[0][0], ga[0]);
                    ga[1] = fmaf(s0, d[0][1], ga[1]);
                    ga[2] = fmaf(s1, d[0][2], ga[2]);
                    ga[3] = fmaf(s1, d[0][3], ga[3]);
                    continue;
                }
                const float s0 = dg * (float)(int8_t)(sg[i] >> (8 * s)), s1 = dg8 * (float)(int8_t)(sg8[i] >> (8 * s));
#pragma unroll
                for (int gr = 0; gr < NG; gr++) {
                    acc[gr][0] = fmaf(s0, d[gr][0], acc[gr][0]);
                    acc[gr][1] = fmaf(s0, d[gr][1], acc[gr][1]);
                    acc[gr][2] = fmaf(s1, d[gr][2], acc[gr][2]);
                    acc[gr][3] = fmaf(s1, d[gr][3], acc[gr][3]);
                }
            }
        }
        if constexpr (MODE == 2 && NG == 1) {
            acc[0][0] = fmaf(dg, ga[0], acc[0][0]);
            acc[0][1] = fmaf(dg, ga[1], acc[0][1]);
            acc[0][2] = fmaf(dg8, ga[2], acc[0][2]);
            acc[0][3] = fmaf(dg8, ga[3], acc[0][3]);
        }
    }
};

template <int T, bool XH, int NG, int V, int NC = 0, typename XS = mv_x>
__global__ void __launch_bounds__(256, V == 4 ? 3 : 2) matvec_v2(float *y, const uint8_t *w, XS xv,
                                                 int rows, int k, int n) {
    static_assert(T == QUANT_Q4_0 || T == QUANT_Q4_K || T == QUANT_Q5_K || T == QUANT_Q8_0 || T == QUANT_Q6_K,
                  "v2: Q4_0 Q4_K Q5_K Q8_0 Q6_K");
    static_assert(!mv_fused<XS>(), "v2-v5: no fused norm or accumulation (v10 and v11 only)");
    constexpr int GC = mv2_group<T>::GC;
    extern __shared__ __align__(16) uint8_t mv2_smem[];
    const int ncols = NC ? NC : XH ? n : 2 * n; /* v5: a compile-time constant */
    const int kp = mv2_pass(ncols);
    constexpr int MODE = V == 2 ? 0 : V == 5 ? 2 : 1;
    uint2 *xb = (uint2 *)mv2_smem;
    float *xs = (float *)(mv2_smem + (size_t)kp * ncols * 2);
    const int64_t C = mv2_chunks(k), R16 = (rows + 15) / 16, tile = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float acc[NG][4];
#pragma unroll
    for (int gr = 0; gr < NG; gr++) acc[gr][0] = acc[gr][1] = acc[gr][2] = acc[gr][3] = 0;

    /* Each warp walks groups of 4 chunks (2 KB of quants). V = 2: the next group's loads are
     * issued before the current one is computed, and a pass's first group before X is staged.
     * V = 3: two groups in flight (buffers a and b, no register moves), both issued before X is
     * staged, and X staged with 4 loads in flight per thread. */
    for (int p0 = 0; p0 < C * 64; p0 += kp) {
        const int pk = min((int64_t)kp, C * 64 - p0), pc = pk / 64, cbase = p0 / 64;
        const int ng = (pc + GC - 1) / GC, g0 = warp * ng / MV2_WARPS, g1 = (warp + 1) * ng / MV2_WARPS;
        if constexpr (V == 2) {
            mv2_group<T> cur, nxt;
            if (g0 < g1) cur.load(w, R16, C, tile, cbase, GC * g0, pc, lane, g);
            pdl_wait(); /* weights above may overlap the previous kernel; X and y wait (pdl.cuh) */
            pdl_trigger();
            __syncthreads();
            mv2_stage<XH, 1>(xb, xs, xv, k, n, ncols, p0, pk);
            __syncthreads();
            for (int gi = g0; gi < g1; gi++) {
                if (gi + 1 < g1) nxt.load(w, R16, C, tile, cbase, GC * (gi + 1), pc, lane, g);
                cur.template compute<NG, 0>(acc, xb, xs, GC * gi, pc, ncols, g, t);
                cur = nxt;
            }
        } else {
            mv2_group<T> ga, gb;
            if (g0 < g1) ga.load(w, R16, C, tile, cbase, GC * g0, pc, lane, g);
            if (g0 + 1 < g1) gb.load(w, R16, C, tile, cbase, GC * (g0 + 1), pc, lane, g);
            pdl_wait(); /* weights above may overlap the previous kernel; X and y wait (pdl.cuh) */
            pdl_trigger();
            __syncthreads();
            mv2_stage<XH, 4>(xb, xs, xv, k, n, ncols, p0, pk);
            __syncthreads();
            for (int gi = g0; gi < g1; gi += 2) {
                ga.template compute<NG, MODE>(acc, xb, xs, GC * gi, pc, ncols, g, t);
                if (gi + 2 < g1) ga.load(w, R16, C, tile, cbase, GC * (gi + 2), pc, lane, g);
                if (gi + 1 < g1) {
                    gb.template compute<NG, MODE>(acc, xb, xs, GC * (gi + 1), pc, ncols, g, t);
                    if (gi + 3 < g1) gb.load(w, R16, C, tile, cbase, GC * (gi + 3), pc, lane, g);
                }
            }
        }
    }

    /* Sum the warps' partial products: red[warp][16 rows][8 NG columns]. */
    __syncthreads();
    float *red = (float *)mv2_smem;
    const int nc = 8 * NG;
#pragma unroll
    for (int gr = 0; gr < NG; gr++) {
        int col = 8 * gr + 2 * t;
        red[(warp * 16 + g) * nc + col] = acc[gr][0];
        red[(warp * 16 + g) * nc + col + 1] = acc[gr][1];
        red[(warp * 16 + g + 8) * nc + col] = acc[gr][2];
        red[(warp * 16 + g + 8) * nc + col + 1] = acc[gr][3];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * n; i += blockDim.x) {
        int r = i & 15, tok = i >> 4;
        int64_t row = tile * 16 + r;
        float s = 0;
        for (int wp = 0; wp < MV2_WARPS; wp++) {
            const float *p = red + (wp * 16 + r) * nc;
            s += XH ? p[tok] : p[2 * tok] + p[2 * tok + 1];
        }
        if (row < rows) y[tok * (int64_t)rows + row] = s;
    }
}


/* Launches v3 on repacked weights, X from x (mv_x, or mv_x_swiglu for f32): one block per 16
 * rows, 1 or 2 groups of 8 columns (f32 X takes two per token). With the PDL attribute unless
 * kernels_use_pdl(0); returns the launch status. */
template <int T, bool XH, typename XS = mv_x>
static inline cudaError_t matvec_v3_launch(float *y, const void *w, XS x, int rows, int k, int n, cudaStream_t s) {
    const unsigned grid = (unsigned)((rows + 15) / 16);
    const int ncols = XH ? n : 2 * n;
    const uint8_t *wb = (const uint8_t *)w;
    if (ncols <= 8) return pdl_launch(matvec_v2<T, XH, 1, 3, 0, XS>, dim3(grid), dim3(256), MV2_SMEM, s, y, wb, x, rows, k, n);
    return pdl_launch(matvec_v2<T, XH, 2, 3, 0, XS>, dim3(grid), dim3(256), MV2_SMEM, s, y, wb, x, rows, k, n);
}

#endif
