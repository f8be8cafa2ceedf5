/* The decode matvec's production kernels, part 1: v10's pieces (int8 X and dp4a on the repacked
 * layout; the section below says how), which matvec_ring.cuh's kernel runs with its weights
 * through registers (v10) or through a shared-memory ring (v11). */
#ifndef MGI_KERNELS_MATVEC_DP4A_CUH
#define MGI_KERNELS_MATVEC_DP4A_CUH

#include "kernels/matvec_layout.cuh"
#include "kernels/matvec_src.cuh"
#include "kernels/pdl.cuh"
#include "kernels/optin.cuh"
#include "kernels/trace.cuh"

/* ---------------------------------------------------------------- v10: int8 X, dp4a ------- */
/* v10 (Q4_0, Q4_K, Q8_0, Q6_K; n = 1, and in production also n = 2 to 4, Q6_K 2) reads the v2 repacked layout with integer arithmetic: every
 * block quantises all of X to int8 while staging it (per 32 values d = max|x| / 127, q = round(x /
 * d), as GGUF's Q8_1), and a lane's record of a chunk (rows g and g + 8, 4 k16 steps) is
 * multiplied with no conversion of the codes to f16:
 *   - Q4: in word s, row g's codes are the low nibbles (w & 0x0F0F0F0F) and row g + 8's the high
 *     ones (w & 0xF0F0F0F0 = 16 q, taken in place as unsigned bytes: dp4a.u32.s32), in the byte
 *     order (2t, 2t + 8, 2t + 1, 2t + 9) of the step's columns; X is staged in that order, so
 *     one X word serves both rows and one 16-byte record of X serves the whole chunk;
 *   - two dp4a per (row, 32-weight block) give an exact int32 dot product of the lane's 8
 *     weights with X (Q4_0's offset 8 enters as the dp4a accumulator's start, -8 * sum of the 8
 *     X codes, staged per lane and block), then one I2F and the float scales;
 *   - Q8_0: a step's two words hold two codes of each row each: one PRMT per row and step puts a
 *     row's four in X's byte order; the codes' +128 enters as the accumulator's start, -128 S;
 *   - Q6_K: the low nibbles as Q4; the 2 high bits of each code come from the high stream next
 *     to their nibble with one mask and one multiply or shift-add per row and step (the bits of
 *     a row sit 4 or 8 places from their targets, and the junk the sum leaves falls on the low
 *     nibbles, which one LOP3 takes from the low word instead), so one dp4a per (row, step)
 *     gives the 6-bit codes' dot with the accumulator starting at -32 S of the step; the step's
 *     int8 scale multiplies it in integers (one IMAD), X's d per 32 and the super-block's d in
 *     f32.
 * The grid is the lab's v6's (tests/kbench/matvec_lab.cuh; persistent: one block per SM, X staged once per SM, warps splitting the
 * block's (tile, group) units, 2 groups of loads in flight per warp, partial sums per tile in
 * shared memory, added in warp order); mv10_opt lists the lab's other shapes of it. NT tokens
 * (a template constant) stage NT records of X and share each group's decoded codes: per token
 * only the dp4a and the float scaling repeat. Error of a
 * row: the int8 rounding of X, at most d / 2 per value, so |y - y_exact| <= sum_i |w_i| d_i / 2
 * <= sum |w_i| max|x of i's block| / 254 (tests/gpu/mvq.h). */

/* Compile-time options of v10, O = 0 the production one; the lab times each (v10, v10a, ...):
 *   NB   groups of loads in flight per warp (2 KB of quants each),
 *   W    warps per block, BPS blocks per SM (the persistent grid has BPS blocks per SM, and
 *        __launch_bounds__ caps registers at 64K / (32 W BPS): 128 for 16 warps, 80 for 24),
 *   EARLY  pdl_trigger right after pdl_wait (as v6) instead of after the main loop,
 *   RING   the weights through a per-warp shared-memory ring (v11, option MV11_OPT; NB unused).
 * a: 3 groups in flight; b: 2 blocks of 8 warps; c: 3 blocks of 8 warps (<= 80 registers);
 * d: the early trigger; e: a and b together. */
#define MV11_OPT 6
template <int O> struct mv10_opt {
    static constexpr int NB = O == 1 || O == 5 ? 3 : 2;
    static constexpr int W = O == 2 || O == 3 || O == 5 ? 8 : 16;
    static constexpr int BPS = O == 2 || O == 5 ? 2 : O == 3 ? 3 : 1;
    static constexpr bool EARLY = O == 4;
    static constexpr bool RING = O == MV11_OPT;
};
#define MV10_OPTS 7

/* The types v10 and v11 read, and those of them with a min term (Q4_K's and Q5_K's dmin * m,
 * taken with per-32 sums of the rounded X staged beside it). */
template <int T> __host__ __device__ constexpr bool mv10_type() {
    return T == QUANT_Q4_0 || T == QUANT_Q4_K || T == QUANT_Q5_K || T == QUANT_Q8_0 || T == QUANT_Q6_K;
}
template <int T> __host__ __device__ constexpr bool mv10_kmin() { return T == QUANT_Q4_K || T == QUANT_Q5_K; }

/* Whether option O builds without spills for type T (ptxas -v): Q6_K's groups take 33 registers
 * each, too many for 3 in flight within 128 or 2 within 80; Q4_K spills at 80 (Q5_K, whose groups
 * hold 4 registers more, is declined with it). The launcher declines the others (the lab then
 * skips them). Production's v10 (O = 0, 2 groups in flight) of Q5_K at 3 and 4 tokens spills 8-24
 * bytes a thread (CUDA 13.0), as Q4_0's does at 4: left so, since v10 runs only where v11's ring
 * does not fit beside X (long rows at several tokens: Q4_0 from k = 18432 at 4); v11, which holds
 * one group, does not spill. */
template <int T, int O> __host__ __device__ constexpr bool mv10_fits() {
    return T == QUANT_Q6_K ? mv10_opt<O>::NB == 2 && mv10_opt<O>::W * mv10_opt<O>::BPS <= 16
                           : !mv10_kmin<T>() || mv10_opt<O>::W * mv10_opt<O>::BPS <= 16;
}

/* X record words per (chunk, t): the 4 X words of the chunk's steps, then Q4_0 and Q8_0: -8 S and
 * -128 S of blocks 2c, 2c + 1 (S: sum of the lane's 8 X codes of the block); Q6_K: -32 S of
 * each step (the lane's 4 codes of the step); Q4_K: nothing. */
template <int T> __host__ __device__ constexpr int mv10_rec() { return mv10_kmin<T>() ? 4 : 8; }
/* Chunks per group (one unit of a warp's work, 2 KB of quants). */
template <int T> __host__ __device__ constexpr int mv10_gc() { return T == QUANT_Q8_0 ? 2 : 4; }

/* Shared memory, for nt tokens: X records [nt][C][4 t][rec words], d of X per 32 [nt][2C], (Q4_K)
 * sums of X per 32 [nt][2C], partial sums [tiles][warps][nt][16 rows]. */
template <int T>
__host__ __device__ __forceinline__ size_t mv10_smem(int64_t k, int64_t tiles, int warps, int nt) {
    const int64_t C = mv2_chunks(k);
    return (size_t)nt * (size_t)(C * 16 * mv10_rec<T>() + C * 8 * (mv10_kmin<T>() ? 2 : 1) + tiles * warps * 16 * 4);
}

__device__ __forceinline__ int mv10_dp4a_us(uint32_t a, uint32_t b, int c) { /* unsigned a, signed b bytes */
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* Byte i of w sign-extended, one PRMT (a selector nibble 8 | i replicates byte i's sign). */
__device__ __forceinline__ int mv10_sbyte(uint32_t w, int i) {
    const uint32_t e = 8u | (uint32_t)i, sel = (uint32_t)i | e << 4 | e << 8 | e << 12;
    uint32_t r;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "r"(sel));
    return (int)r;
}

/* v11's ring slots a warp fills before its PDL wait (PERF-LOG runs 63-66). The trace found X
 * staged only once a block's whole first fill had landed: the staging loads queue behind the
 * copies issued before them (run 62: a bulk copy of X does not overtake them either), so with
 * the whole fill out before the wait no unit was computed while it streamed, and when it had
 * landed nothing was in flight. Filling PRE slots before the wait and the rest right behind X's
 * loads lets X arrive after PRE slots only: one slot where the warp's whole share fits the ring
 * (its units then land soon after X, while the first is computed), else two. Not for the wo
 * matvec, whose blocks start while decode attention runs, long enough for a whole fill to land
 * before the wait: the engine launches it as cu_matvec_f32_acc_prefilled (pre 0, all slots before). */
__host__ __device__ constexpr int mv11_pre(int units, int stages) {
    return units <= stages ? 1 : stages < 2 ? stages : 2;
}

/* Stages token tok of X (C chunks, zeros past k) as int8 records, xd (d per 32) and for Q4_K xs (sum of
 * the rounded X per 32, d * sum q: the min term then sees the X the products see, so the error of
 * a row is sum_i w_i (rounded x_i - x_i) with w_i's zero-mean weights, as mvq.h budgets). Each thread takes 4 consecutive values; the 8 threads of a 32-value block share max|x|
 * (and the sum) by shuffles. The offset words (-8 S ...) follow once the codes are in place.
 * A NORM source stages x * g and leaves each warp's sum of x^2 in ssw[warp]. hook runs once in
 * every thread right after the last round of X loads is issued, before any is used (v11 issues
 * the rest of its first ring fill there, behind X: mv11_pre). */
template <int T, bool XH, int U, typename XS, typename HK>
__device__ __forceinline__ void mv10_stage(uint32_t *xr, float *xd, float *xs, float *ssw, const XS &xv, int tok,
                                           int k, int C, HK hook, double *pws = nullptr, bool wr = false) {
    static_assert(!(XH && mv_fused<XS>()), "v10: the fused sources are f32");
    constexpr int RW = mv10_rec<T>();
    uint8_t *xb = (uint8_t *)xr;
    float ss = 0.0f; /* NORM: this thread's sum of x^2 */
    const int total = C * 16; /* float4s; a multiple of 8, and blockDim.x is too: whole blocks per warp */
    /* PEND with a pending product: its factor ps, the same in every block (the threads' sums of
     * squares in double, the warps' (pws) in warp order), from a first pass over the product.
     * Held (X within UH float4s a thread, one round: gemma3-12b's 3840 at 512 threads): the
     * product, x, the post weight and the norm weight are loaded at once, kept in registers
     * through the factor, and the ring's rest (hook) goes out right behind them (PERF-LOG run 190:
     * gemma3-12b tg +1.3%). Otherwise the loop below loads all four again after the factor. */
    float ps = 0.0f;
    constexpr int UH = 2;
    float4 hp[UH], hx[UH], hw[UH], hg[UH];
    bool held = false;
    if constexpr (XS::PEND) {
        if (xv.pend.part) {
            double sq = 0.0;
            held = total <= UH * (int)blockDim.x;
            if (held) {
                const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
                for (int u = 0; u < UH; u++) {
                    const int f = u * blockDim.x + threadIdx.x, kk = 4 * f;
                    const bool in = f < total && kk < k;
                    hp[u] = in ? *(const float4 *)(xv.pend.part + (int64_t)tok * k + kk) : z;
                    hx[u] = in ? *(const float4 *)(xv.x + (int64_t)tok * k + kk) : z;
                    hw[u] = in ? __ldg((const float4 *)(xv.pend.post + kk)) : z;
                    hg[u] = in ? __ldg((const float4 *)(xv.g + kk)) : z;
                }
                hook();
#pragma unroll
                for (int u = 0; u < UH; u++)
                    sq += ((double)hp[u].x * hp[u].x + (double)hp[u].y * hp[u].y) +
                          ((double)hp[u].z * hp[u].z + (double)hp[u].w * hp[u].w);
            }
            for (int base = 0; !held && base < total; base += U * blockDim.x) {
                float4 p[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int f = base + u * blockDim.x + threadIdx.x;
                    p[u] = f < total && 4 * f < k ? *(const float4 *)(xv.pend.part + (int64_t)tok * k + 4 * f)
                                                  : make_float4(0.f, 0.f, 0.f, 0.f);
                }
#pragma unroll
                for (int u = 0; u < U; u++)
                    sq += ((double)p[u].x * p[u].x + (double)p[u].y * p[u].y) +
                          ((double)p[u].z * p[u].z + (double)p[u].w * p[u].w);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
            const int nw = (int)(blockDim.x >> 5);
            if ((threadIdx.x & 31) == 0) pws[threadIdx.x >> 5] = sq;
            __syncthreads();
            double t = 0.0;
            for (int w = 0; w < nw; w++) t += pws[w];
            ps = (float)(1.0 / sqrt(t / k + xv.pend.eps));
            __syncthreads(); /* pws is the next token's */
        }
    }
    for (int base = 0; base < total; base += U * blockDim.x) {
        float4 raw[U];
        if constexpr (XS::PEND) {
            if (held) { /* one round (base 0): what the first pass loaded (U >= UH; the indices
                         * below stay in range where u >= UH is unrolled but never taken) */
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int f = u * blockDim.x + threadIdx.x, kk = 4 * f;
                    raw[u] = make_float4(0, 0, 0, 0);
                    if (u < UH && f < total && kk < k)
                        raw[u] = mv_x_pend_norm(xv, hx[u < UH ? u : 0], hp[u < UH ? u : 0], hw[u < UH ? u : 0],
                                                hg[u < UH ? u : 0], ps, tok, kk, k, ss, wr);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U && !held; u++) { /* U loads in flight before the first is used */
            const int f = base + u * blockDim.x + threadIdx.x, kk = 4 * f;
            raw[u] = make_float4(0, 0, 0, 0);
            if (f < total && kk < k) {
                if constexpr (XH) {
                    uint2 r = *(const uint2 *)((const unsigned short *)xv.p + (int64_t)tok * k + kk);
                    float2 a = __half22float2(*(__half2 *)&r.x), b = __half22float2(*(__half2 *)&r.y);
                    raw[u] = make_float4(a.x, a.y, b.x, b.y);
                } else {
                    raw[u] = mv_x_stage(xv, tok, kk, k, ss, ps, wr);
                }
            }
        }
        if (!held && base + U * (int)blockDim.x >= total) hook(); /* X's last loads are out */
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (base + u * blockDim.x >= total) break; /* uniform over the block */
            const int f = base + u * blockDim.x + threadIdx.x;
            const float4 v = raw[u];
            float m = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
            const float inv = m > 0.0f ? 127.0f / m : 0.0f;
            const int q0 = __float2int_rn(v.x * inv), q1 = __float2int_rn(v.y * inv);
            const int q2 = __float2int_rn(v.z * inv), q3 = __float2int_rn(v.w * inv);
            int sum = 0;
            if constexpr (mv10_kmin<T>()) {
                sum = (q0 + q1) + (q2 + q3);
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                sum += __shfl_xor_sync(0xffffffffu, sum, 4);
            }
            if (f >= total) continue;
            const int kk = 4 * f, c = kk >> 6, s = (kk >> 4) & 3, e4 = kk & 15, t = (e4 & 7) >> 1, h = (e4 >> 3) & 1;
            /* columns e4, e4 + 1 are lane t's bytes h, h + 2 of word s; e4 + 2, e4 + 3 lane t + 1's */
            uint8_t *p0 = xb + ((c * 4 + t) * RW + s) * 4 + h, *p1 = p0 + RW * 4;
            p0[0] = (uint8_t)q0;
            p0[2] = (uint8_t)q1;
            p1[0] = (uint8_t)q2;
            p1[2] = (uint8_t)q3;
            if ((f & 7) == 0) {
                const float d = m * (1.0f / 127.0f);
                xd[f >> 3] = d;
                if constexpr (mv10_kmin<T>()) xs[f >> 3] = d * (float)sum;
            }
        }
    }
    if constexpr (XS::NORM) { /* every thread is here: the loops above are uniform over the block */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if ((threadIdx.x & 31) == 0) ssw[threadIdx.x >> 5] = ss;
    }
    if constexpr (T == QUANT_Q6_K) {
        __syncthreads();
        for (int i = threadIdx.x; i < C * 16; i += blockDim.x) { /* (chunk, t, step) */
            uint32_t *r = xr + (i >> 2) * RW;
            const int s = i & 3;
            r[4 + s] = (uint32_t)(-32 * __dp4a((int)r[s], 0x01010101, 0));
        }
    } else if constexpr (!mv10_kmin<T>()) {
        __syncthreads();
        for (int i = threadIdx.x; i < C * 8; i += blockDim.x) { /* (chunk, t, block) */
            uint32_t *r = xr + (i >> 1) * RW;
            const int blk = i & 1;
            const int S = __dp4a((int)r[2 * blk], 0x01010101, __dp4a((int)r[2 * blk + 1], 0x01010101, 0));
            r[4 + blk] = (uint32_t)(-8 * S);
            r[6 + blk] = (uint32_t)(-128 * S);
        }
    }
}

/* A lane's addresses at its warp's first unit (tile, group). In the v2 layout a block's units lie
 * at equal strides in order in every stream (quants 2048 bytes a unit for every type), so unit j
 * after the first is one multiply-add away: q quants (+ the lane's 16 or 32 bytes), s scales
 * (+ row g's), h Q6_K's high bits (+ the lane's 8 bytes), d Q6_K's d (+ row g's). The same
 * with A = uint32_t: shared-memory addresses in a v11 ring slot (mv11_slot). */
template <typename A> struct mv10_at { A q, s, h, d; };
using mv10_src = mv10_at<const uint8_t *>;

template <int T>
__device__ __forceinline__ mv10_src mv10_source(const uint8_t *w, int64_t R16, int64_t C, int64_t unit, int lane, int g) {
    mv10_src p;
    p.q = w + unit * 2048 + (T == QUANT_Q8_0 ? 32 : 16) * lane;
    p.h = p.d = nullptr;
    if constexpr (T == QUANT_Q8_0) {
        p.s = w + R16 * C * 1024 + unit * 128 + 8 * g;
    } else if constexpr (T == QUANT_Q6_K) {
        p.h = w + R16 * C * 512 + unit * 1024 + 8 * lane;
        p.s = w + R16 * C * 768 + unit * 256 + 4 * g;
        p.d = w + R16 * C * 832 + unit * 32 + 2 * g;
    } else if constexpr (T == QUANT_Q5_K) {
        p.s = w + R16 * C * 512 + unit * 256 + 16 * g;
        p.h = w + mv5_high(R16, C) + unit * 512 + 16 * lane;
    } else {
        p.s = w + R16 * C * 512 + unit * 256 + (T == QUANT_Q4_0 ? 8 : 16) * g;
    }
    return p;
}

/* A group's loads: from global memory (v10: quants streamed past L1, the rest through the
 * read-only path) or, at a 32-bit shared address, from the warp's ring slot (v11). The shared
 * loads are volatile asm with a memory clobber, so they stay between the ring's wait and
 * __syncwarp (mv11) in program order. */
__device__ __forceinline__ uint4 mv10_ldq(const uint8_t *p) { return mv_ld_stream((const uint4 *)p); }
__device__ __forceinline__ uint4 mv10_ldq(uint32_t a) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a) : "memory");
    return v;
}
template <typename V> __device__ __forceinline__ V mv10_ld(const uint8_t *p) { return __ldg((const V *)p); }
template <typename V> __device__ __forceinline__ V mv10_ld(uint32_t a);
template <> __device__ __forceinline__ uint4 mv10_ld<uint4>(uint32_t a) { return mv10_ldq(a); }
template <> __device__ __forceinline__ uint2 mv10_ld<uint2>(uint32_t a) {
    uint2 v;
    asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a) : "memory");
    return v;
}
template <> __device__ __forceinline__ uint32_t mv10_ld<uint32_t>(uint32_t a) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
    return v;
}
template <> __device__ __forceinline__ uint16_t mv10_ld<uint16_t>(uint32_t a) {
    unsigned short v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a) : "memory");
    return v;
}

/* One warp's group in registers: load(p, j) fetches unit j after p's (from a v11 ring slot: p
 * its mv11_slot addresses and j 0); compute multiplies it with X into acc[0] (row g) and acc[1]
 * (row g + 8; Q4_0: 16 times too large, the flush scales it). xr: lane t's X record of the
 * group's first chunk; xd: d of X of its first block; xs (Q4_K): sums of the rounded X of the
 * super-block's sub-blocks. */
template <int T> struct mv10_group;

template <> struct mv10_group<QUANT_Q4_0> {
    uint4 q[4];
    uint2 sc[4]; /* d of (g, 2c), (g, 2c + 1) | (g + 8, 2c), (g + 8, 2c + 1) per chunk */
    template <typename A>
    __device__ __forceinline__ void load(const mv10_at<A> &p, int j) {
        const A qp = p.q + 2048 * j, sp = p.s + 256 * j;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = mv10_ldq(qp + 512 * i);
#pragma unroll
        for (int i = 0; i < 4; i++) sc[i] = mv10_ld<uint2>(sp + 64 * i);
    }
    template <int NT>
    __device__ __forceinline__ void compute(float (&acc)[NT][2], const uint32_t *xr, const float *xd, const float *, int,
                                            int xst, int dst) const {
        constexpr uint32_t LO = 0x0F0F0F0Fu, HI = 0xF0F0F0F0u;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 w = q[i];
            const uint32_t l0 = w.x & LO, l1 = w.y & LO, l2 = w.z & LO, l3 = w.w & LO;
            const uint32_t u0 = w.x & HI, u1 = w.y & HI, u2 = w.z & HI, u3 = w.w & HI;
#pragma unroll
            for (int c = 0; c < NT; c++) {
                const uint4 x = *(const uint4 *)(xr + c * xst + 32 * i);
                const uint4 o = *(const uint4 *)(xr + c * xst + 32 * i + 4);
                const float2 dx = *(const float2 *)(xd + c * dst + 2 * i);
                const int g0 = __dp4a((int)l1, (int)x.y, __dp4a((int)l0, (int)x.x, (int)o.x));
                const int g1 = __dp4a((int)l3, (int)x.w, __dp4a((int)l2, (int)x.z, (int)o.y));
                const int h0 = mv10_dp4a_us(u1, x.y, mv10_dp4a_us(u0, x.x, (int)o.z));
                const int h1 = mv10_dp4a_us(u3, x.w, mv10_dp4a_us(u2, x.z, (int)o.w));
                acc[c][0] = fmaf(mv_half_lo(sc[i].x) * dx.x, (float)g0, acc[c][0]);
                acc[c][0] = fmaf(mv_half_hi(sc[i].x) * dx.y, (float)g1, acc[c][0]);
                acc[c][1] = fmaf(mv_half_lo(sc[i].y) * dx.x, (float)h0, acc[c][1]);
                acc[c][1] = fmaf(mv_half_hi(sc[i].y) * dx.y, (float)h1, acc[c][1]);
            }
        }
    }
};

/* Q4_K; Q5_K (Q5) with the lane's 4 words of fifth bits of the super-block (h: word i of chunk
 * i, matvec_layout.cuh's mv5_hbit), each step's bits moved to bit 4 of its row's code bytes by
 * a shift and a mask, so one dp4a per (row, step) as for Q4_K's row g; row g + 8 is then not
 * taken in place (its 5-bit codes would not fit a byte 16 x). */
template <bool Q5> struct mv10_group_k {
    uint4 q[4];
    uint4 r0, r1; /* the super-block's d, dmin, scales[12] of rows g and g + 8 */
    uint4 h;
    template <typename A>
    __device__ __forceinline__ void load(const mv10_at<A> &p, int j) {
        const A qp = p.q + 2048 * j, sp = p.s + 256 * j;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = mv10_ldq(qp + 512 * i);
        r0 = mv10_ld<uint4>(sp);
        r1 = mv10_ld<uint4>(sp + 128);
        if constexpr (Q5) h = mv10_ld<uint4>(p.h + 512 * j);
    }
    /* step s's fifth bits of row g (r 0) or g + 8 (r 1) at bit 4 of each byte */
    template <int S, int R> __device__ __forceinline__ static uint32_t fifth(uint32_t hw) {
        constexpr int b = 2 * S + R; /* mv5_hbit(S, 2 b' + R) - 8 b' */
        return (b <= 4 ? hw << (4 - b) : hw >> (b - 4)) & 0x10101010u;
    }
    template <int NT>
    __device__ __forceinline__ void compute(float (&acc)[NT][2], const uint32_t *xr, const float *xd, const float *xs,
                                            int t, int xst, int dst) const {
        constexpr uint32_t LO = 0x0F0F0F0Fu, HI = 0xF0F0F0F0u;
        /* 6-bit scales and mins of sub-blocks 0-3 (a) and 4-7 (b), one byte each (as mv2_group) */
        const uint32_t sc0a = r0.y & 0x3f3f3f3fu, m0a = r0.z & 0x3f3f3f3fu;
        const uint32_t sc0b = (r0.w & 0x0f0f0f0fu) | ((r0.y >> 2) & 0x30303030u);
        const uint32_t m0b = ((r0.w >> 4) & 0x0f0f0f0fu) | ((r0.z >> 2) & 0x30303030u);
        const uint32_t sc1a = r1.y & 0x3f3f3f3fu, m1a = r1.z & 0x3f3f3f3fu;
        const uint32_t sc1b = (r1.w & 0x0f0f0f0fu) | ((r1.y >> 2) & 0x30303030u);
        const uint32_t m1b = ((r1.w >> 4) & 0x0f0f0f0fu) | ((r1.z >> 2) & 0x30303030u);
        /* the min term first (fewer registers live), sum_j m_j * (sum of X of sub-block j),
         * rounded X's sums: lane t takes sub-blocks t and t + 4 (the 4 lanes of a row add up in
         * the flush) */
        const float ms0a = (float)__byte_perm(m0a, 0, 0x4440 | t), ms0b = (float)__byte_perm(m0b, 0, 0x4440 | t);
        const float ms1a = (float)__byte_perm(m1a, 0, 0x4440 | t), ms1b = (float)__byte_perm(m1b, 0, 0x4440 | t);
        float ga[NT][2];
#pragma unroll
        for (int c = 0; c < NT; c++) {
            const float x0 = xs[c * dst + t], x1 = xs[c * dst + t + 4];
            acc[c][0] = fmaf(-mv_half_hi(r0.x), fmaf(ms0a, x0, ms0b * x1), acc[c][0]);
            acc[c][1] = fmaf(-mv_half_hi(r1.x), fmaf(ms1a, x0, ms1b * x1), acc[c][1]);
            ga[c][0] = ga[c][1] = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 w = q[i];
            uint32_t l0 = w.x & LO, l1 = w.y & LO, l2 = w.z & LO, l3 = w.w & LO;
            uint32_t u0 = w.x & HI, u1 = w.y & HI, u2 = w.z & HI, u3 = w.w & HI;
            if constexpr (Q5) {
                const uint32_t hw = i == 0 ? h.x : i == 1 ? h.y : i == 2 ? h.z : h.w;
                l0 |= fifth<0, 0>(hw); l1 |= fifth<1, 0>(hw); l2 |= fifth<2, 0>(hw); l3 |= fifth<3, 0>(hw);
                u0 = ((w.x >> 4) & LO) | fifth<0, 1>(hw);
                u1 = ((w.y >> 4) & LO) | fifth<1, 1>(hw);
                u2 = ((w.z >> 4) & LO) | fifth<2, 1>(hw);
                u3 = ((w.w >> 4) & LO) | fifth<3, 1>(hw);
            }
            /* sub-blocks 2i, 2i + 1 of the super-block: integer scale times the integer dot */
            const int j0 = 2 * i, j1 = 2 * i + 1;
            const uint32_t sa = j0 < 4 ? sc0a : sc0b, sb = j0 < 4 ? sc1a : sc1b;
            const int s00 = (int)((sa >> (8 * (j0 & 3))) & 255), s01 = (int)((sa >> (8 * (j1 & 3))) & 255);
            const int s10 = (int)((sb >> (8 * (j0 & 3))) & 255), s11 = (int)((sb >> (8 * (j1 & 3))) & 255);
#pragma unroll
            for (int c = 0; c < NT; c++) {
                const uint4 x = *(const uint4 *)(xr + c * xst + 16 * i);
                const float2 dx = *(const float2 *)(xd + c * dst + 2 * i);
                const int g0 = __dp4a((int)l1, (int)x.y, __dp4a((int)l0, (int)x.x, 0));
                const int g1 = __dp4a((int)l3, (int)x.w, __dp4a((int)l2, (int)x.z, 0));
                const int h0 = mv10_dp4a_us(u1, x.y, mv10_dp4a_us(u0, x.x, 0));
                const int h1 = mv10_dp4a_us(u3, x.w, mv10_dp4a_us(u2, x.z, 0));
                ga[c][0] = fmaf(dx.x, (float)(g0 * s00), ga[c][0]);
                ga[c][0] = fmaf(dx.y, (float)(g1 * s01), ga[c][0]);
                ga[c][1] = fmaf(dx.x, (float)(h0 * s10), ga[c][1]);
                ga[c][1] = fmaf(dx.y, (float)(h1 * s11), ga[c][1]);
            }
        }
#pragma unroll
        for (int c = 0; c < NT; c++) {
            acc[c][0] = fmaf(mv_half_lo(r0.x), ga[c][0], acc[c][0]);
            acc[c][1] = fmaf(mv_half_lo(r1.x) * (Q5 ? 1.0f : 0.0625f), ga[c][1], acc[c][1]);
        }
    }
};
template <> struct mv10_group<QUANT_Q4_K> : mv10_group_k<false> {};
template <> struct mv10_group<QUANT_Q5_K> : mv10_group_k<true> {};

/* Q8_0: 2 chunks of 32 bytes per lane; word 2s + h of a chunk holds step s's codes (row g: bytes 0,
 * 1; row g + 8: 2, 3) of columns 2t, 2t + 1 (h 0) or 2t + 8, 2t + 9 (h 1). */
template <> struct mv10_group<QUANT_Q8_0> {
    uint4 q[4];
    uint2 sc[2]; /* as Q4_0's */
    template <typename A>
    __device__ __forceinline__ void load(const mv10_at<A> &p, int j) {
        const A qp = p.q + 2048 * j, sp = p.s + 128 * j;
        /* a lane's 32 bytes of a chunk: in global memory side by side; in a ring slot 512 bytes
         * apart (mv11_issue places them so, for loads free of bank conflicts) */
        constexpr int half = std::is_same<A, uint32_t>::value ? 512 : 16;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = mv10_ldq(qp + 1024 * (i >> 1) + half * (i & 1));
#pragma unroll
        for (int i = 0; i < 2; i++) sc[i] = mv10_ld<uint2>(sp + 64 * i);
    }
    template <int NT>
    __device__ __forceinline__ void compute(float (&acc)[NT][2], const uint32_t *xr, const float *xd, const float *, int,
                                            int xst, int dst) const {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const uint4 a = q[2 * i], b = q[2 * i + 1];
            /* row g: (w0.0, w1.0, w0.1, w1.1) = columns 2t, 2t + 8, 2t + 1, 2t + 9; row g + 8 bytes 2, 3 */
            const uint32_t r0 = __byte_perm(a.x, a.y, 0x5140), r1 = __byte_perm(a.z, a.w, 0x5140);
            const uint32_t r2 = __byte_perm(b.x, b.y, 0x5140), r3 = __byte_perm(b.z, b.w, 0x5140);
            const uint32_t e0 = __byte_perm(a.x, a.y, 0x7362), e1 = __byte_perm(a.z, a.w, 0x7362);
            const uint32_t e2 = __byte_perm(b.x, b.y, 0x7362), e3 = __byte_perm(b.z, b.w, 0x7362);
#pragma unroll
            for (int c = 0; c < NT; c++) {
                const uint4 x = *(const uint4 *)(xr + c * xst + 32 * i);
                const uint4 o = *(const uint4 *)(xr + c * xst + 32 * i + 4);
                const float2 dx = *(const float2 *)(xd + c * dst + 2 * i);
                const int g0 = mv10_dp4a_us(r1, x.y, mv10_dp4a_us(r0, x.x, (int)o.z));
                const int g1 = mv10_dp4a_us(r3, x.w, mv10_dp4a_us(r2, x.z, (int)o.w));
                const int h0 = mv10_dp4a_us(e1, x.y, mv10_dp4a_us(e0, x.x, (int)o.z));
                const int h1 = mv10_dp4a_us(e3, x.w, mv10_dp4a_us(e2, x.z, (int)o.w));
                acc[c][0] = fmaf(mv_half_lo(sc[i].x) * dx.x, (float)g0, acc[c][0]);
                acc[c][0] = fmaf(mv_half_hi(sc[i].x) * dx.y, (float)g1, acc[c][0]);
                acc[c][1] = fmaf(mv_half_lo(sc[i].y) * dx.x, (float)h0, acc[c][1]);
                acc[c][1] = fmaf(mv_half_hi(sc[i].y) * dx.y, (float)h1, acc[c][1]);
            }
        }
    }
};

/* Q6_K: one super-block; the high word of steps 2h, 2h + 1 holds, for step 2h + s1, row g's 2
 * high bits of byte b (column order as the low word) at 16 (b >> 1) + 8 s1 + 4 (b & 1), row
 * g + 8's 2 places up. */
template <> struct mv10_group<QUANT_Q6_K> {
    uint4 lo[4];
    uint2 hi[4];
    uint32_t sg[4], sg8[4], dd; /* int8 scales of the 4 steps of rows g, g + 8 per chunk; d of both rows (f16) */
    template <typename A>
    __device__ __forceinline__ void load(const mv10_at<A> &p, int j) {
        const A qp = p.q + 2048 * j, hp = p.h + 1024 * j, sp = p.s + 256 * j, dp = p.d + 32 * j;
#pragma unroll
        for (int i = 0; i < 4; i++) lo[i] = mv10_ldq(qp + 512 * i);
#pragma unroll
        for (int i = 0; i < 4; i++) hi[i] = mv10_ld<uint2>(hp + 256 * i);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            sg[i] = mv10_ld<uint32_t>(sp + 64 * i);
            sg8[i] = mv10_ld<uint32_t>(sp + 64 * i + 32);
        }
        dd = (uint32_t)mv10_ld<uint16_t>(dp) | (uint32_t)mv10_ld<uint16_t>(dp + 16) << 16;
    }
    template <int NT>
    __device__ __forceinline__ void compute(float (&acc)[NT][2], const uint32_t *xr, const float *xd, const float *, int,
                                            int xst, int dst) const {
        constexpr uint32_t LO = 0x0F0F0F0Fu;
        float ga[NT][2];
        int ig[NT][2];
#pragma unroll
        for (int c = 0; c < NT; c++) ga[c][0] = ga[c][1] = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t lw[4] = {lo[i].x, lo[i].y, lo[i].z, lo[i].w};
            uint4 xq[NT], oq[NT];
#pragma unroll
            for (int c = 0; c < NT; c++) {
                ig[c][0] = ig[c][1] = 0;
                xq[c] = *(const uint4 *)(xr + c * xst + 32 * i);
                oq[c] = *(const uint4 *)(xr + c * xst + 32 * i + 4);
            }
#pragma unroll
            for (int s = 0; s < 4; s++) {
                const uint32_t h = s < 2 ? hi[i].x : hi[i].y;
                /* the high bits to bits 4, 5 of every byte (targets 8 b + 4); sums of two copies,
                 * whose overlaps carry into bits 8-10 and 24-26, low-nibble places */
                uint32_t pg, p8;
                if (s & 1) {
                    const uint32_t tg = h & 0x33003300u; /* bits 8, 12, 24, 28: shifts 4, 0 */
                    pg = tg + (tg >> 4);
                    p8 = __umulhi(h & 0xCC00CC00u, 0x44000000u); /* bits 10, 14, 26, 30: (t >> 6) + (t >> 2) */
                } else {
                    pg = (h & 0x00330033u) * 0x110u; /* bits 0, 4, 16, 20: (t << 4) + (t << 8) */
                    p8 = (h & 0x00CC00CCu) * 0x44u;  /* bits 2, 6, 18, 22: (t << 2) + (t << 6) */
                }
                const uint32_t cg = (lw[s] & LO) | (pg & ~LO), c8 = ((lw[s] >> 4) & LO) | (p8 & ~LO);
                const int sc0 = mv10_sbyte(sg[i], s), sc1 = mv10_sbyte(sg8[i], s);
#pragma unroll
                for (int c = 0; c < NT; c++) {
                    const uint32_t x = s == 0 ? xq[c].x : s == 1 ? xq[c].y : s == 2 ? xq[c].z : xq[c].w;
                    const int o = (int)(s == 0 ? oq[c].x : s == 1 ? oq[c].y : s == 2 ? oq[c].z : oq[c].w);
                    ig[c][0] += sc0 * __dp4a((int)cg, (int)x, o);
                    ig[c][1] += sc1 * __dp4a((int)c8, (int)x, o);
                    if (s & 1) { /* a 32-value block of X done */
                        const float d = xd[c * dst + 2 * i + (s >> 1)];
                        ga[c][0] = fmaf(d, (float)ig[c][0], ga[c][0]);
                        ga[c][1] = fmaf(d, (float)ig[c][1], ga[c][1]);
                        ig[c][0] = ig[c][1] = 0;
                    }
                }
            }
        }
#pragma unroll
        for (int c = 0; c < NT; c++) {
            acc[c][0] = fmaf(mv_half_lo(dd), ga[c][0], acc[c][0]);
            acc[c][1] = fmaf(mv_half_hi(dd), ga[c][1], acc[c][1]);
        }
    }
};


#endif
