/* Prefill GEMM, Y[n][rows] = W[rows][k] . X[n][k] with X in f16, on the tensor cores
 * (mma.m16n8k16, f32 accumulation), reading the weights in matvec's repacked layout
 * (matvec.cuh) so one repack serves decode and prefill. The layout already holds each lane's A
 * fragment, so weights go from global memory to registers, are dequantised there to f16 with
 * their scales applied (d * (q - 8) for Q4_0, d*sc*q - dmin*m for Q4_K, (d*sc) * (q - 32) for
 * Q6_K, d * q for Q8_0: one f16 rounding per weight, far below the quantisation step), and feed
 * 4 (v1) or 8 (v2) mma each; X goes through shared memory.
 *   v1  block = 128 rows x 64 tokens, 8 warps of 32 rows x 32 tokens (2 x 4 mma tiles), X in
 *       64-weight chunks of [64 tokens][72] halves (padded: conflict-free B loads), the next
 *       chunk's X and weights loaded into registers while the current one is multiplied.
 *   v2  (production off compute capability 9.0) warps of 32 rows x 64
 *       tokens (2 x 8 mma tiles) in blocks of 128 rows x 128 tokens (n > 64) or 256 rows x 64
 *       tokens (n <= 64), X in a 3-stage cp.async ring read with ldmatrix: see the v2 section.
 *   v3  (lab: gemm_lab.h's variant 3) v2's warps and blocks with the weights through shared memory
 *       too: a GEMM3_STAGES ring of (X chunk, weight chunk) stages filled by cp.async, so three
 *       chunks of weights are in flight per block instead of one in registers: see the v3 section.
 *   v4, v5, v6  (v4's wgmma panels production from 512 tokens on compute capability 9.0 where
 *       they measured faster than v7; v5, v6 lab: gemm_lab.h) the weights dequantised once per
 *       call into f16 panels by this file's gemm_w, then a plain f16 GEMM per panel (v4: wgmma):
 *       see gemm_panel.cuh.
 *   split-K (small n, where rows/128 x n/64 blocks leave most SMs idle): blockIdx.z takes a
 *       slice of cps chunks and writes its partial tile to its own [n][rows] plane; gemm_sum adds
 *       the planes in slice order, so the result is the same on every run.
 * PDL (pdl.cuh): the first chunk's weights (v3: first stages') are loaded before pdl_wait, X and
 * the output after. */
#ifndef MGI_KERNELS_GEMM_CUH
#define MGI_KERNELS_GEMM_CUH

#include "kernels/matvec_layout.cuh"
#include "kernels/matvec_src.cuh"
#include "kernels/pdl.cuh"

#define GEMM_ROWS 128
#define GEMM_TOKS 64
#define GEMM_XS 72 /* halves per token row of the X chunk in shared memory */

/* Chunk c of 16 rows' weights for one lane: quants and the scale words it needs. */
template <int T> struct gemm_w;

template <> struct gemm_w<QUANT_Q4_0> {
    uint4 q;
    uint2 sc;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int64_t c, int lane, int g) {
        q = mv_ld_stream((const uint4 *)w + (tile * C + c) * 32 + lane);
        sc = __ldg((const uint2 *)(w + R16 * C * 512 + (tile * C + c) * 64) + g);
    }
    /* A fragment of step s with the scales applied. */
    template <int MODE = 1> __device__ __forceinline__ void frag(uint32_t a[4], int s, int64_t) const {
        const uint32_t words[4] = {q.x, q.y, q.z, q.w};
        mv_codes<MODE>(a, words[s], 0x64086408u);
        const uint32_t dg = s < 2 ? sc.x & 0xffff : sc.x >> 16, dg8 = s < 2 ? sc.y & 0xffff : sc.y >> 16;
        const __half2 d0 = __half2half2(__ushort_as_half((unsigned short)dg));
        const __half2 d1 = __half2half2(__ushort_as_half((unsigned short)dg8));
#pragma unroll
        for (int p = 0; p < 4; p++) {
            __half2 v = __hmul2(*(__half2 *)&a[p], (p & 1) ? d1 : d0);
            a[p] = *(uint32_t *)&v;
        }
    }
};

template <> struct gemm_w<QUANT_Q4_K> {
    uint4 q, r0, r1;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int64_t c, int lane, int g) {
        q = mv_ld_stream((const uint4 *)w + (tile * C + c) * 32 + lane);
        const uint4 *sr = (const uint4 *)(w + R16 * C * 512 + (tile * C + (c & ~3)) * 64);
        r0 = __ldg(sr + g);
        r1 = __ldg(sr + g + 8);
    }
    __device__ __forceinline__ void frag(uint32_t a[4], int s, int64_t c) const {
        const uint32_t words[4] = {q.x, q.y, q.z, q.w};
        mv_codes<1>(a, words[s], 0x64006400u);
        scale(a, s, c);
    }
    /* a = d*sc * a - dmin*m, the codes a of step s of chunk c (Q5_K's too) */
    __device__ __forceinline__ void scale(uint32_t a[4], int s, int64_t c) const {
        const int j = 2 * (int)(c & 3) + (s >> 1);
        float2 s0, s1;
        switch (j) { /* compile-time byte offsets in mv_k4_scale */
#define GEMM_J(J) case J: s0 = mv_k4_scale(r0, J); s1 = mv_k4_scale(r1, J); break;
        GEMM_J(0) GEMM_J(1) GEMM_J(2) GEMM_J(3) GEMM_J(4) GEMM_J(5) GEMM_J(6) default: s0 = mv_k4_scale(r0, 7); s1 = mv_k4_scale(r1, 7);
#undef GEMM_J
        }
        const __half2 m0 = __float2half2_rn(s0.x), n0 = __float2half2_rn(-s0.y);
        const __half2 m1 = __float2half2_rn(s1.x), n1 = __float2half2_rn(-s1.y);
#pragma unroll
        for (int p = 0; p < 4; p++) {
            __half2 v = __hfma2(*(__half2 *)&a[p], (p & 1) ? m1 : m0, (p & 1) ? n1 : n0);
            a[p] = *(uint32_t *)&v;
        }
    }
};

/* Q5_K: Q4_K's nibbles and records, the fifth bits from the lane's word of the chunk. */
template <> struct gemm_w<QUANT_Q5_K> {
    gemm_w<QUANT_Q4_K> k4;
    uint32_t hw;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int64_t c, int lane, int g) {
        k4.load(w, R16, C, tile, c, lane, g);
        hw = mv5_hword(w, R16, C, tile, c, lane);
    }
    __device__ __forceinline__ void frag(uint32_t a[4], int s, int64_t c) const {
        const uint32_t words[4] = {k4.q.x, k4.q.y, k4.q.z, k4.q.w};
        mv5_codes(a, words[s], hw, s);
        k4.scale(a, s, c);
    }
};

/* Q8_0: codes stored +128 as bytes (two 16-byte words per lane), d per 32 weights = 2 steps. */
template <> struct gemm_w<QUANT_Q8_0> {
    uint4 q0, q1;
    uint2 sc;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int64_t c, int lane, int g) {
        const uint4 *qt = (const uint4 *)w + (tile * C + c) * 64;
        q0 = mv_ld_stream(qt + 2 * lane);
        q1 = mv_ld_stream(qt + 2 * lane + 1);
        sc = __ldg((const uint2 *)(w + R16 * C * 1024 + (tile * C + c) * 64) + g);
    }
    __device__ __forceinline__ void frag(uint32_t a[4], int s, int64_t) const {
        const uint32_t words[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        const uint32_t off = 0x64806480u; /* 1152 = 1024 + 128 */
        const uint32_t dg = s < 2 ? sc.x & 0xffff : sc.x >> 16, dg8 = s < 2 ? sc.y & 0xffff : sc.y >> 16;
        const __half2 d0 = __half2half2(__ushort_as_half((unsigned short)dg));
        const __half2 d1 = __half2half2(__ushort_as_half((unsigned short)dg8));
#pragma unroll
        for (int p = 0; p < 4; p++) {
            uint32_t h = __byte_perm(words[2 * s + (p >> 1)], 0x64646464u, (p & 1) ? 0x4342 : 0x4140);
            __half2 v = __hmul2(__hsub2(*(__half2 *)&h, *(const __half2 *)&off), (p & 1) ? d1 : d0);
            a[p] = *(uint32_t *)&v;
        }
    }
};

/* Q6_K: low nibbles as Q4, the 2 high bits in a second stream, an int8 scale per step and d per
 * super-block (4 chunks); d * scale is rounded to f16 once and applied to q - 32. */
template <> struct gemm_w<QUANT_Q6_K> {
    uint4 lo;
    uint2 hi;
    uint32_t sg, sg8, dd;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int64_t c, int lane, int g) {
        lo = mv_ld_stream((const uint4 *)w + (tile * C + c) * 32 + lane);
        hi = __ldg((const uint2 *)(w + R16 * C * 512) + (tile * C + c) * 32 + lane);
        const uint32_t *sct = (const uint32_t *)(w + R16 * C * 768) + (tile * C + c) * 16;
        sg = __ldg(sct + g);
        sg8 = __ldg(sct + g + 8);
        const uint16_t *dt = (const uint16_t *)(w + R16 * C * 832) + tile * (C / 4) * 16 + (c / 4) * 16;
        dd = (uint32_t)__ldg(dt + g) | (uint32_t)__ldg(dt + g + 8) << 16;
    }
    /* MODE 2 (v7; s a constant): the same values with fewer instructions, as mv_codes' MODE 2.
     * Register p's low nibbles sit at bits 4p of the word, its high bits at 8 (s & 1) + 2p of hw
     * (and 16 up). Even p: nibble at bits 0-3 (word or word >> 8), high bits moved to 4-5, giving
     * f16 1024 + q; odd p: nibble in place at bits 4-7, high bits moved to 8-9, giving 1024 + 16 q,
     * scaled by 1/16 in the HFMA2 that subtracts the offset (both exact: q - 32 in f16), each
     * register assembled by two LOP3s (mv_lop3_and_or). */
    template <int MODE = 1> __device__ __forceinline__ void frag(uint32_t a[4], int s, int64_t) const {
        const uint32_t lw[4] = {lo.x, lo.y, lo.z, lo.w}, hw = (s >> 1) ? hi.y : hi.x;
        const uint32_t off = 0x64206420u; /* 1056 = 1024 + 32 */
        const __half2 d0 = __float2half2_rn(mv_half_lo(dd) * (float)(int8_t)(sg >> (8 * s)));
        const __half2 d1 = __float2half2_rn(mv_half_hi(dd) * (float)(int8_t)(sg8 >> (8 * s)));
        if constexpr (MODE == 2) {
            const uint32_t w0 = lw[s], w8 = lw[s] >> 8;
            const __half2 sixteenth = __floats2half2_rn(0.0625f, 0.0625f), m96 = __floats2half2_rn(-96.0f, -96.0f);
#pragma unroll
            for (int p = 0; p < 4; p++) {
                const int hs = 8 * (s & 1) + 2 * p, to = (p & 1) ? 8 : 4; /* high bits: from, to */
                const uint32_t hb = hs >= to ? hw >> (hs - to) : hw << (to - hs);
                const uint32_t low = mv_lop3_and_or(p < 2 ? w0 : w8, (p & 1) ? 0x00F000F0u : 0x000F000Fu, 0x64006400u);
                const uint32_t h = mv_lop3_and_or(hb, (p & 1) ? 0x03000300u : 0x00300030u, low);
                const __half2 q = (p & 1) ? __hfma2(*(const __half2 *)&h, sixteenth, m96)
                                          : __hsub2(*(const __half2 *)&h, *(const __half2 *)&off);
                __half2 v = __hmul2(q, (p & 1) ? d1 : d0);
                a[p] = *(uint32_t *)&v;
            }
        } else {
#pragma unroll
            for (int p = 0; p < 4; p++) {
                uint32_t h = ((lw[s] >> (4 * p)) & 0x000F000Fu) | (((hw >> (8 * (s & 1) + 2 * p)) & 0x00030003u) << 4) |
                             0x64006400u;
                __half2 v = __hmul2(__hsub2(*(__half2 *)&h, *(const __half2 *)&off), (p & 1) ? d1 : d0);
                a[p] = *(uint32_t *)&v;
            }
        }
    }
};

/* A warp's accumulators for NI (v1-v3: 2) row tiles x NJ 8-token tiles (the m16n8k16 C layout,
 * also wgmma's per warp: lane 4g + t holds rows g, g + 8 and tokens 2t, 2t + 1) into Y [n][rows]
 * from row tile tile0 and token tok0; rows and tokens past the ends are left out. */
template <int NI, int NJ>
__device__ __forceinline__ void gemm_store(float *y, const float (&acc)[NI][NJ][4], int64_t tile0, int tok0, int g,
                                           int t, int rows, int n) {
#pragma unroll
    for (int i = 0; i < NI; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int64_t row = (tile0 + i) * 16 + g + 8 * (e >> 1);
                const int tok = tok0 + 8 * j + 2 * t + (e & 1);
                if (row < rows && tok < n) y[(int64_t)tok * rows + row] = acc[i][j][e];
            }
}

template <int T>
__global__ void __launch_bounds__(256) gemm_v1(float *y, const uint8_t *w, const __half *x, int rows, int k, int n, int cps) {
    __shared__ __align__(16) __half xs[GEMM_TOKS * GEMM_XS];
    /* this block's chunks [c0, c1) and output plane; the launcher keeps every slice non-empty */
    const int64_t C = mv2_chunks(k), R16 = (rows + 15) / 16, c0 = (int64_t)blockIdx.z * cps;
    const int64_t c1 = c0 + cps < C ? c0 + cps : C;
    y += (int64_t)blockIdx.z * n * rows;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t tile0 = (int64_t)blockIdx.x * (GEMM_ROWS / 16) + 2 * (warp & 3);
    const int tok0 = blockIdx.y * GEMM_TOKS, wt = 32 * (warp >> 2);
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
    /* X staging: thread -> (token, 16 halves) of the chunk, two 16-byte pieces. X may be written
     * by the previous kernel: plain loads after pdl_wait, never __ldg (matvec.cuh: mv_x). */
    const int st_tok = threadIdx.x >> 2, st_k = 16 * (threadIdx.x & 3);
    auto load_x = [&](int64_t c, uint4 v[2]) {
        const int tok = tok0 + st_tok;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t kk = 64 * c + st_k + 8 * h;
            v[h] = make_uint4(0, 0, 0, 0);
            if (tok < n && kk < k) v[h] = *(const uint4 *)(x + (int64_t)tok * k + kk);
        }
    };
    gemm_w<T> wc[2], wn[2];
    uint4 xc[2], xn[2];
#pragma unroll
    for (int i = 0; i < 2; i++) if (tile0 + i < R16) wc[i].load(w, R16, C, tile0 + i, c0, lane, g);
    pdl_wait();
    pdl_trigger();
    load_x(c0, xc);
    for (int64_t c = c0; c < c1; c++) {
        __syncthreads();
        *(uint4 *)&xs[st_tok * GEMM_XS + st_k] = xc[0];
        *(uint4 *)&xs[st_tok * GEMM_XS + st_k + 8] = xc[1];
        __syncthreads();
        if (c + 1 < c1) {
            load_x(c + 1, xn);
#pragma unroll
            for (int i = 0; i < 2; i++) if (tile0 + i < R16) wn[i].load(w, R16, C, tile0 + i, c + 1, lane, g);
        }
#pragma unroll
        for (int s = 0; s < 4; s++) {
            uint32_t b[4][2];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const __half *xr = xs + (wt + 8 * j + g) * GEMM_XS + 16 * s + 2 * t;
                b[j][0] = *(const uint32_t *)xr;
                b[j][1] = *(const uint32_t *)(xr + 8);
            }
#pragma unroll
            for (int i = 0; i < 2; i++) {
                uint32_t a[4];
                wc[i].frag(a, s, c);
#pragma unroll
                for (int j = 0; j < 4; j++) mv_mma(acc[i][j], a, b[j][0], b[j][1]);
            }
        }
#pragma unroll
        for (int i = 0; i < 2; i++) wc[i] = wn[i];
        xc[0] = xn[0];
        xc[1] = xn[1];
    }
    gemm_store(y, acc, tile0, tok0 + wt, g, t, rows, n);
}

/* ---------------------------------------------------------------- v2 ------------------------ */
/* Warp tile 32 rows (2 tiles) x 64 tokens (8 n-tiles): each dequantised A fragment feeds 8 mma,
 * and each B fragment read from shared memory feeds 2. The row count per warp is what sets the
 * shared-memory traffic per mma: a warp reads all 64 tokens x 64 weights of X (8 KB) per chunk
 * for 2 x 8 x 4 = 64 mma, i.e. 128 B per mma, the SM's shared-memory bandwidth per clock against
 * about one m16n8k16 per clock: balanced. 16 rows per warp (the narrower choice) would double
 * the X reads per mma and make ldmatrix, not the tensor cores, the limit; 64 rows would need 128
 * accumulator registers. Two block shapes of 8 such warps (WR warps along rows):
 *   WR = 4: 4 x 2 warps, block 128 rows x 128 tokens (n > 64): each weight is dequantised once
 *           per 64 tokens (v1: per 32, by each of the two warps over its rows), X staged once
 *           per 128 rows x 128 tokens.
 *   WR = 8: 8 x 1 warps, block 256 rows x 64 tokens (n <= 64, batched decode): every weight is
 *           dequantised exactly once per call; split-K gives the SMs enough blocks.
 * n-tiles beyond n are skipped (warp-uniform), so n = 16 runs 2 of the 8 n-tiles' mma.
 * X: cp.async (16 bytes, .cg: L2 only) into a GEMM2_STAGES ring of chunks, [toks][64] halves per
 * stage with 16-byte piece p of token r at p ^ (r & 7) (XOR swizzle: the 8 rows of an ldmatrix
 * 8x8 matrix hit 8 distinct 16-byte bank groups), one __syncthreads per chunk; B fragments by
 * ldmatrix.x4 (no .trans: rows of the 8x8 matrices are tokens, lane l gets token l/4's k pair
 * 2(l%4), exactly the m16n8k16 "col" B fragment). Weights: global -> registers as in v1, one
 * chunk ahead (two would not fit the 128 registers of 2 blocks per SM next to 64 accumulators). */
#define GEMM2_STAGES 3

/* A chunk's weights for v2: gemm2_ld<T> as loaded (in flight while the chunk before is
 * multiplied), gemm_wp<T> as held while multiplying, made from it when the chunk starts. Both
 * are gemm_w<T> except for Q4_K, whose 32 bytes of super-block scales per lane (rows g and g + 8,
 * 16 bytes each) are loaded as one 32-bit word per lane (word t of each row: the 4 lanes of a
 * row group hold them together) and gathered with shuffles when the chunk starts, keeping only
 * the chunk's two (d sc, dmin m) pairs per row, rounded to f16 exactly as gemm_w<QUANT_Q4_K>::frag
 * does. That is 6 + 8 registers a tile instead of 12 + 12, what keeps 2 tiles, the next chunk's
 * loads and 64 accumulators within 128 registers (2 blocks per SM) without spilling. */
template <int T> struct gemm2_ld {
    gemm_w<T> w;
    __device__ __forceinline__ void load(const uint8_t *wp, int64_t R16, int64_t C, int64_t tile, int64_t c, int lane, int g) {
        w.load(wp, R16, C, tile, c, lane, g);
    }
};

template <int T> struct gemm_wp {
    gemm_w<T> w;
    __device__ __forceinline__ void set(const gemm2_ld<T> &l, int64_t) { w = l.w; }
    __device__ __forceinline__ void frag(uint32_t a[4], int s, int64_t c) const { w.frag(a, s, c); }
};

template <> struct gemm2_ld<QUANT_Q4_K> {
    uint4 q;
    uint32_t s0, s1; /* word lane % 4 of the scales of rows g and g + 8 */
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int64_t c, int lane, int g) {
        q = mv_ld_stream((const uint4 *)w + (tile * C + c) * 32 + lane);
        const uint32_t *sr = (const uint32_t *)(w + R16 * C * 512 + (tile * C + (c & ~3)) * 64);
        s0 = __ldg(sr + 4 * g + (lane & 3));
        s1 = __ldg(sr + 4 * (g + 8) + (lane & 3));
    }
};

template <> struct gemm_wp<QUANT_Q4_K> {
    uint4 q;
    uint32_t m[2], o[2]; /* half k of the chunk jh: f16 (d sc, -dmin m) of rows g (lo) and g + 8 (hi) */
    __device__ __forceinline__ void set(const gemm2_ld<QUANT_Q4_K> &l, int64_t c) {
        q = l.q;
        const int src = threadIdx.x & 28; /* lane of word 0 in this row group */
        uint4 r0, r1;
        r0.x = __shfl_sync(0xffffffffu, l.s0, src);
        r0.y = __shfl_sync(0xffffffffu, l.s0, src + 1);
        r0.z = __shfl_sync(0xffffffffu, l.s0, src + 2);
        r0.w = __shfl_sync(0xffffffffu, l.s0, src + 3);
        r1.x = __shfl_sync(0xffffffffu, l.s1, src);
        r1.y = __shfl_sync(0xffffffffu, l.s1, src + 1);
        r1.z = __shfl_sync(0xffffffffu, l.s1, src + 2);
        r1.w = __shfl_sync(0xffffffffu, l.s1, src + 3);
        records(r0, r1, (int)(c & 3));
    }
    /* From the super-block records of rows g (r0) and g + 8 (r1): chunk cc's (0..3) two halves. */
    __device__ __forceinline__ void records(uint4 r0, uint4 r1, int cc) {
        float2 s0[2], s1[2];
        switch (cc) { /* compile-time byte offsets in mv_k4_scale (v3: cc is a constant already) */
#define GEMM2_J(C) case C: s0[0] = mv_k4_scale(r0, 2 * C); s1[0] = mv_k4_scale(r1, 2 * C); \
                   s0[1] = mv_k4_scale(r0, 2 * C + 1); s1[1] = mv_k4_scale(r1, 2 * C + 1); break;
        GEMM2_J(0) GEMM2_J(1) GEMM2_J(2) default: GEMM2_J(3)
#undef GEMM2_J
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const __half2 mh = __floats2half2_rn(s0[h].x, s1[h].x), oh = __floats2half2_rn(-s0[h].y, -s1[h].y);
            m[h] = *(const uint32_t *)&mh;
            o[h] = *(const uint32_t *)&oh;
        }
    }
    template <int MODE = 1> __device__ __forceinline__ void frag(uint32_t a[4], int s, int64_t) const {
        const uint32_t words[4] = {q.x, q.y, q.z, q.w};
        mv_codes<MODE>(a, words[s], 0x64006400u);
        scale(a, s);
    }
    /* a = d*sc * a - dmin*m for the codes a of step s (Q5_K's too) */
    __device__ __forceinline__ void scale(uint32_t a[4], int s) const {
        const uint32_t mw = m[s >> 1], ow = o[s >> 1];
        const uint32_t m0 = __byte_perm(mw, 0, 0x1010), m1 = __byte_perm(mw, 0, 0x3232);
        const uint32_t o0 = __byte_perm(ow, 0, 0x1010), o1 = __byte_perm(ow, 0, 0x3232);
#pragma unroll
        for (int p = 0; p < 4; p++) {
            __half2 v = __hfma2(*(__half2 *)&a[p], *(const __half2 *)((p & 1) ? &m1 : &m0),
                                *(const __half2 *)((p & 1) ? &o1 : &o0));
            a[p] = *(uint32_t *)&v;
        }
    }
};

/* Q5_K: Q4_K's, and the lane's word of fifth bits of the chunk. */
template <> struct gemm2_ld<QUANT_Q5_K> {
    gemm2_ld<QUANT_Q4_K> k4;
    uint32_t hw;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int64_t c, int lane, int g) {
        k4.load(w, R16, C, tile, c, lane, g);
        hw = mv5_hword(w, R16, C, tile, c, lane);
    }
};

template <> struct gemm_wp<QUANT_Q5_K> {
    gemm_wp<QUANT_Q4_K> k4;
    uint32_t hw;
    __device__ __forceinline__ void set(const gemm2_ld<QUANT_Q5_K> &l, int64_t c) {
        k4.set(l.k4, c);
        hw = l.hw;
    }
    __device__ __forceinline__ void frag(uint32_t a[4], int s, int64_t) const {
        const uint32_t words[4] = {k4.q.x, k4.q.y, k4.q.z, k4.q.w};
        mv5_codes(a, words[s], hw, s);
        k4.scale(a, s);
    }
};

__host__ __device__ constexpr int gemm2_rows(int wr) { return 32 * wr; }
__host__ __device__ constexpr int gemm2_toks(int wr) { return 64 * (8 / wr); }

__device__ __forceinline__ void gemm2_cp16(uint32_t dst, const void *src, bool valid) {
    /* src-size 0 fills the 16 bytes with zeros (tokens past n, weights past k) */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void gemm2_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void gemm2_cp_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void gemm2_ldsm4(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

template <int T, int WR>
__global__ void __launch_bounds__(256, 2) gemm_v2(float *y, const uint8_t *w, const __half *x, int rows, int k, int n, int cps) {
    constexpr int TOKS = gemm2_toks(WR), STAGE = TOKS * 64; /* halves per stage */
    constexpr int PIECES = TOKS * 8 / 256;                  /* 16-byte X pieces per thread per chunk */
    __shared__ __align__(128) __half xs[GEMM2_STAGES * STAGE];
    const int C = (int)mv2_chunks(k), R16 = (rows + 15) / 16, c0 = (int)blockIdx.z * cps;
    const int c1 = c0 + cps < C ? c0 + cps : C;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t tile0 = (int64_t)blockIdx.x * (gemm2_rows(WR) / 16) + 2 * (warp % WR);
    const int tok0 = blockIdx.y * TOKS, wt = 64 * (warp / WR);
    const int nt = min(8, (n - tok0 - wt + 7) / 8); /* this warp's n-tiles holding tokens < n */
    float acc[2][8][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
    const uint32_t xs0 = (uint32_t)__cvta_generic_to_shared(xs);
    /* X of chunk c into stage st: thread -> pieces (token, p) = (e / 8, e % 8), e = tid + 256 i.
     * X may be written by the previous kernel: read after pdl_wait only (cp.async is a plain,
     * coherent load). */
    auto load_x = [&](int c, int st) {
#pragma unroll
        for (int i = 0; i < PIECES; i++) {
            const int e = threadIdx.x + 256 * i, r = e >> 3, p = e & 7, tok = tok0 + r;
            const int64_t kk = 64 * c + 8 * p;
            const bool ok = tok < n && kk < k;
            gemm2_cp16(xs0 + 2 * (st * STAGE + r * 64 + 8 * (p ^ (r & 7))), ok ? x + (int64_t)tok * k + kk : x, ok);
        }
    };
    /* ldmatrix.x4 lane address: matrix m = lane / 8 is n-tile 2jj + m / 2, k half m % 2 of step s;
     * its row lane % 8 is token wt + 8 (2jj + m / 2) + lane % 8 (so token & 7 = lane & 7). */
    const int lm = lane >> 3, lr = lane & 7;
    const uint32_t lbase = xs0 + 2 * ((wt + 8 * (lm >> 1) + lr) * 64);
    gemm2_ld<T> wn[2];
    gemm_wp<T> wc[2];
#pragma unroll
    for (int i = 0; i < 2; i++) if (tile0 + i < R16) wn[i].load(w, R16, C, tile0 + i, c0, lane, g);
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int s = 0; s < GEMM2_STAGES - 1; s++) {
        if (c0 + s < c1) load_x(c0 + s, s);
        gemm2_cp_commit(); /* empty groups keep the wait count uniform */
    }
    int st = 0;
    for (int c = c0; c < c1; c++) {
        gemm2_cp_wait<GEMM2_STAGES - 2>(); /* this thread's pieces of chunk c have landed */
        __syncthreads();                  /* everyone's have, and stage c - 1 is free again */
#pragma unroll
        for (int i = 0; i < 2; i++) wc[i].set(wn[i], c);
        {
            const int cn = c + GEMM2_STAGES - 1;
            if (cn < c1) load_x(cn, st == 0 ? GEMM2_STAGES - 1 : st - 1);
            gemm2_cp_commit();
        }
        if (c + 1 < c1) {
#pragma unroll
            for (int i = 0; i < 2; i++) if (tile0 + i < R16) wn[i].load(w, R16, C, tile0 + i, c + 1, lane, g);
        }
        const uint32_t sb = lbase + 2 * st * STAGE;
#pragma unroll
        for (int s = 0; s < 4; s++) {
            uint32_t a[2][4];
#pragma unroll
            for (int i = 0; i < 2; i++) wc[i].frag(a[i], s, c);
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                if (2 * jj >= nt) break;
                uint32_t b[4]; /* n-tiles 2jj, 2jj + 1: {lo, hi, lo, hi} k halves of step s */
                gemm2_ldsm4(b, sb + 2 * (16 * jj * 64 + 8 * ((2 * s + (lm & 1)) ^ lr)));
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    mv_mma(acc[i][2 * jj], a[i], b[0], b[1]);
                    if (2 * jj + 1 < nt) mv_mma(acc[i][2 * jj + 1], a[i], b[2], b[3]);
                }
            }
        }
        st = st == GEMM2_STAGES - 1 ? 0 : st + 1;
    }
    gemm2_cp_wait<0>(); /* no copy may still target shared memory when the block exits */
    y += (int64_t)blockIdx.z * n * rows;
    gemm_store(y, acc, tile0, tok0 + wt, g, t, rows, n);
}

/* ---------------------------------------------------------------- v3 ------------------------ */
/* v2's warps and blocks (gemm_v3<T, WR, WC>: WR x WC warps of 32 rows x 64 tokens, the launcher
 * uses v2's two shapes, WR = 8 x WC = 1 and 4 x 2) with the weights through shared memory as well:
 * each of the GEMM3_STAGES ring stages holds one chunk's X ([TOKS][64] halves, v2's swizzle) and
 * the same chunk's weights for the block's NT = 2 WR tiles, filled by cp.async from all threads
 * (in the repacked layout a tile's chunk is a contiguous run of 16-byte pieces: 512 bytes of
 * quants, copied 1:1), one commit group per chunk, one __syncthreads per chunk as in v2. Every
 * warp reads its two tiles' A-fragment words with one LDS.128 per tile (lane l: bytes 16l..16l+15
 * of the run: conflict-free) plus its scales, and dequantises in registers as v2 does. So the
 * weights of GEMM3_STAGES - 1 chunks are in flight per block (e.g. 3 x 9 KB for Q4 at 256 rows)
 * instead of one chunk in registers, and the registers that held them are free.
 * Super-block data (Q4_K's 16-byte d, dmin, scales records, Q6_K's d; per 4 chunks) goes to a
 * 2-slot area beside the ring, slot b & 1 for super-block b, copied with the stage of chunk 4b
 * (slices start on super-blocks, so every block's first chunk brings its record): the copy for
 * b is issued at iteration 4b - (S - 1), after the barrier that ends iteration 4b - S, and the
 * last reader of that slot (super-block b - 2) is iteration 4b - 5, hence S <= 5.
 * PDL: the weights of the first S - 1 chunks are issued before pdl_wait, X after it. */
#define GEMM3_STAGES 4

/* Copies one region of the NT tiles' records of a chunk (or super-block): PPT 16-byte pieces per
 * tile from src (the first tile's record; tiles tstride bytes apart) into dst [NT][16 PPT], piece
 * p at 16 p, or with SWAP at (p & 1) 8 PPT + 16 (p >> 1) (Q8_0: a lane's two 16-byte words, one
 * in each half, so each half is read conflict-free); tiles from `live` on (past R16) are skipped. */
template <int NT, int NTH, int PPT, bool SWAP = false>
__device__ __forceinline__ void gemm3_copy(uint32_t dst, const uint8_t *src, int64_t tstride, int live) {
    constexpr int TOTAL = NT * PPT;
#pragma unroll
    for (int i = 0; i < (TOTAL + NTH - 1) / NTH; i++) {
        const int e = (int)threadIdx.x + NTH * i, lt = e / PPT, p = e % PPT;
        if ((TOTAL % NTH == 0 || e < TOTAL) && lt < live) {
            const int off = SWAP ? (p & 1) * 8 * PPT + 16 * (p >> 1) : 16 * p;
            gemm2_cp16(dst + lt * 16 * PPT + off, src + lt * tstride + 16 * p, true);
        }
    }
}

/* Per type: CB bytes per tile per chunk in a stage, SBB per tile per super-block (0: none), the
 * copies (load: chunk c of tiles tb.., load_sb: super-block b), and one tile's registers for a
 * chunk (read from the stage sw and the super-block slot sb; frag as gemm_w / gemm_wp). */
template <int T> struct gemm3_w;

template <> struct gemm3_w<QUANT_Q4_0> {
    static constexpr int CB = 576, SBB = 0; /* [NT][512] quants, [NT][64] scales */
    gemm_w<QUANT_Q4_0> f;
    template <int NT, int NTH>
    __device__ static void load(uint32_t dst, const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int c, int live) {
        gemm3_copy<NT, NTH, 32>(dst, w + (tb * C + c) * 512, C * 512, live);
        gemm3_copy<NT, NTH, 4>(dst + NT * 512, w + R16 * C * 512 + (tb * C + c) * 64, C * 64, live);
    }
    template <int NT, int NTH> __device__ static void load_sb(uint32_t, const uint8_t *, int64_t, int64_t, int64_t, int, int) {}
    template <int NT> __device__ void read(const uint8_t *sw, const uint8_t *, int lt, int lane, int g, int) {
        f.q = *(const uint4 *)(sw + lt * 512 + 16 * lane);
        f.sc = *(const uint2 *)(sw + NT * 512 + lt * 64 + 8 * g);
    }
    template <int MODE = 1> __device__ __forceinline__ void frag(uint32_t a[4], int s) const {
        f.template frag<MODE>(a, s, 0);
    }
};

template <> struct gemm3_w<QUANT_Q4_K> {
    static constexpr int CB = 512, SBB = 256; /* [NT][512] quants; slot: [NT][16 rows][16] records */
    gemm_wp<QUANT_Q4_K> f;
    template <int NT, int NTH>
    __device__ static void load(uint32_t dst, const uint8_t *w, int64_t, int64_t C, int64_t tb, int c, int live) {
        gemm3_copy<NT, NTH, 32>(dst, w + (tb * C + c) * 512, C * 512, live);
    }
    template <int NT, int NTH>
    __device__ static void load_sb(uint32_t dst, const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int b, int live) {
        gemm3_copy<NT, NTH, 16>(dst, w + R16 * C * 512 + tb * C * 64 + (int64_t)b * 256, C * 64, live);
    }
    template <int NT> __device__ void read(const uint8_t *sw, const uint8_t *sb, int lt, int lane, int g, int cc) {
        f.q = *(const uint4 *)(sw + lt * 512 + 16 * lane);
        f.records(*(const uint4 *)(sb + lt * 256 + 16 * g), *(const uint4 *)(sb + lt * 256 + 128 + 16 * g), cc);
    }
    template <int MODE = 1> __device__ __forceinline__ void frag(uint32_t a[4], int s) const {
        f.template frag<MODE>(a, s, 0);
    }
};

template <> struct gemm3_w<QUANT_Q8_0> {
    static constexpr int CB = 1088, SBB = 0; /* [NT][2 halves][32 lanes][16] quants, [NT][64] scales */
    gemm_w<QUANT_Q8_0> f;
    template <int NT, int NTH>
    __device__ static void load(uint32_t dst, const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int c, int live) {
        gemm3_copy<NT, NTH, 64, true>(dst, w + (tb * C + c) * 1024, C * 1024, live);
        gemm3_copy<NT, NTH, 4>(dst + NT * 1024, w + R16 * C * 1024 + (tb * C + c) * 64, C * 64, live);
    }
    template <int NT, int NTH> __device__ static void load_sb(uint32_t, const uint8_t *, int64_t, int64_t, int64_t, int, int) {}
    template <int NT> __device__ void read(const uint8_t *sw, const uint8_t *, int lt, int lane, int g, int) {
        f.q0 = *(const uint4 *)(sw + lt * 1024 + 16 * lane);
        f.q1 = *(const uint4 *)(sw + lt * 1024 + 512 + 16 * lane);
        f.sc = *(const uint2 *)(sw + NT * 1024 + lt * 64 + 8 * g);
    }
    template <int = 1> __device__ __forceinline__ void frag(uint32_t a[4], int s) const { f.frag(a, s, 0); }
};

template <> struct gemm3_w<QUANT_Q6_K> {
    static constexpr int CB = 832, SBB = 32; /* [NT][512] low, [NT][256] high, [NT][64] int8 scales; slot: [NT][16] d */
    gemm_w<QUANT_Q6_K> f;
    template <int NT, int NTH>
    __device__ static void load(uint32_t dst, const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int c, int live) {
        gemm3_copy<NT, NTH, 32>(dst, w + (tb * C + c) * 512, C * 512, live);
        gemm3_copy<NT, NTH, 16>(dst + NT * 512, w + R16 * C * 512 + (tb * C + c) * 256, C * 256, live);
        gemm3_copy<NT, NTH, 4>(dst + NT * 768, w + R16 * C * 768 + (tb * C + c) * 64, C * 64, live);
    }
    template <int NT, int NTH>
    __device__ static void load_sb(uint32_t dst, const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int b, int live) {
        gemm3_copy<NT, NTH, 2>(dst, w + R16 * C * 832 + (tb * (C / 4) + b) * 32, (C / 4) * 32, live);
    }
    template <int NT> __device__ void read(const uint8_t *sw, const uint8_t *sb, int lt, int lane, int g, int) {
        f.lo = *(const uint4 *)(sw + lt * 512 + 16 * lane);
        f.hi = *(const uint2 *)(sw + NT * 512 + lt * 256 + 8 * lane);
        f.sg = *(const uint32_t *)(sw + NT * 768 + lt * 64 + 4 * g);
        f.sg8 = *(const uint32_t *)(sw + NT * 768 + lt * 64 + 32 + 4 * g);
        f.dd = (uint32_t)*(const uint16_t *)(sb + lt * 32 + 2 * g) | (uint32_t)*(const uint16_t *)(sb + lt * 32 + 16 + 2 * g) << 16;
    }
    template <int MODE = 1> __device__ __forceinline__ void frag(uint32_t a[4], int s) const {
        f.template frag<MODE>(a, s, 0);
    }
};

/* Q5_K: Q4_K's stage; the super-block slot holds the records [NT][256] and then the fifth bits
 * [NT][512] (a lane's 4 words of the super-block together, as the matrix keeps them). */
template <> struct gemm3_w<QUANT_Q5_K> {
    static constexpr int CB = 512, SBB = 768;
    using K4 = gemm3_w<QUANT_Q4_K>;
    gemm_wp<QUANT_Q5_K> f;
    template <int NT, int NTH>
    __device__ static void load(uint32_t dst, const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int c, int live) {
        K4::load<NT, NTH>(dst, w, R16, C, tb, c, live);
    }
    template <int NT, int NTH>
    __device__ static void load_sb(uint32_t dst, const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int b, int live) {
        K4::load_sb<NT, NTH>(dst, w, R16, C, tb, b, live);
        gemm3_copy<NT, NTH, 32>(dst + NT * 256, w + mv5_high(R16, C) + (tb * (C / 4) + b) * 512, (C / 4) * 512, live);
    }
    template <int NT> __device__ void read(const uint8_t *sw, const uint8_t *sb, int lt, int lane, int g, int cc) {
        K4 k4;
        k4.read<NT>(sw, sb, lt, lane, g, cc);
        f.k4 = k4.f;
        f.hw = *(const uint32_t *)(sb + NT * 256 + lt * 512 + 16 * lane + 4 * cc);
    }
    template <int = 1> __device__ __forceinline__ void frag(uint32_t a[4], int s) const { f.frag(a, s, 0); }
};

/* Bytes of one ring stage and of the whole dynamic shared memory of gemm_v3<T, WR, WC>. */
template <int T, int WR, int WC> __host__ __device__ constexpr int gemm3_stage() {
    return 64 * WC * 128 + 2 * WR * gemm3_w<T>::CB;
}
template <int T, int WR, int WC> __host__ __device__ constexpr int gemm3_smem() {
    return GEMM3_STAGES * gemm3_stage<T, WR, WC>() + 2 * 2 * WR * gemm3_w<T>::SBB;
}

template <int T, int WR, int WC>
__global__ void __launch_bounds__(32 * WR * WC, 2) gemm_v3(float *y, const uint8_t *w, const __half *x, int rows, int k, int n, int cps) {
    using W = gemm3_w<T>;
    constexpr int NTH = 32 * WR * WC, NT = 2 * WR, TOKS = 64 * WC, S = GEMM3_STAGES;
    constexpr int XB = TOKS * 128, STAGE = gemm3_stage<T, WR, WC>(), XPIECES = TOKS * 8 / NTH;
    static_assert(S >= 2 && S <= 5, "the super-block slots need S <= 5 (see above)");
    static_assert(TOKS * 8 % NTH == 0, "X pieces per thread");
    extern __shared__ __align__(128) uint8_t g3s[];
    const int C = (int)mv2_chunks(k), R16 = (rows + 15) / 16, c0 = (int)blockIdx.z * cps;
    const int c1 = c0 + cps < C ? c0 + cps : C;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t tb = (int64_t)blockIdx.x * NT;
    const int lt0 = 2 * (warp % WR), live = R16 - tb < NT ? (int)(R16 - tb) : NT;
    const int tok0 = blockIdx.y * TOKS, wt = 64 * (warp / WR);
    const int nt = min(8, (n - tok0 - wt + 7) / 8); /* this warp's n-tiles holding tokens < n */
    const int xrows = min(TOKS, (n - tok0 + 7) & ~7); /* X rows any warp multiplies */
    float acc[2][8][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
    const uint32_t sm0 = (uint32_t)__cvta_generic_to_shared(g3s), sbs = sm0 + S * STAGE;
    /* X of chunk c into stage st as v2 (after pdl_wait only); rows past xrows are not copied */
    auto load_x = [&](int c, int st) {
#pragma unroll
        for (int i = 0; i < XPIECES; i++) {
            const int e = threadIdx.x + NTH * i, r = e >> 3, p = e & 7, tok = tok0 + r;
            const int64_t kk = 64 * c + 8 * p;
            const bool ok = tok < n && kk < k;
            if (r < xrows) gemm2_cp16(sm0 + st * STAGE + 2 * (r * 64 + 8 * (p ^ (r & 7))), ok ? x + (int64_t)tok * k + kk : x, ok);
        }
    };
    auto load_w = [&](int c, int st) {
        W::template load<NT, NTH>(sm0 + st * STAGE + XB, w, R16, C, tb, c, live);
        if (W::SBB > 0 && (c & 3) == 0)
            W::template load_sb<NT, NTH>(sbs + ((c >> 2) & 1) * NT * W::SBB, w, R16, C, tb, c >> 2, live);
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++) if (c0 + s < c1) load_w(c0 + s, s);
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (c0 + s < c1) load_x(c0 + s, s);
        gemm2_cp_commit(); /* group 0 also holds the weights of stages 1..S-2: harmless */
    }
    const int lm = lane >> 3, lr = lane & 7;
    const uint32_t lbase = sm0 + 2 * ((wt + 8 * (lm >> 1) + lr) * 64);
    const bool busy = lt0 < live && nt > 0; /* warp-uniform: anything of this warp's to compute */
    int st = 0;
    /* super-blocks of 4 chunks, unrolled so that a chunk's place in its super-block (Q4_K's
     * scale index) is a constant; the last one may be partial (32-weight types) */
    constexpr int UNROLL = T == QUANT_Q4_K ? 4 : 1;
    for (int cb = c0; cb < c1; cb += 4) {
#pragma unroll UNROLL
        for (int cc = 0; cc < 4; cc++) {
            const int c = cb + cc;
            if (c >= c1) break;
            gemm2_cp_wait<S - 2>(); /* this thread's pieces of chunk c have landed */
            __syncthreads();       /* everyone's have, and stage c - 1 is free again */
            {
                const int cn = c + S - 1, sn = st == 0 ? S - 1 : st - 1;
                if (cn < c1) {
                    load_w(cn, sn);
                    load_x(cn, sn);
                }
                gemm2_cp_commit();
            }
            if (busy) {
                const uint8_t *sw = g3s + st * STAGE + XB, *sb = g3s + S * STAGE + ((c >> 2) & 1) * NT * W::SBB;
                W f[2];
#pragma unroll
                for (int i = 0; i < 2; i++) f[i].template read<NT>(sw, sb, lt0 + i, lane, g, cc);
                const uint32_t xb = lbase + st * STAGE;
#pragma unroll
                for (int s = 0; s < 4; s++) {
                    uint32_t a[2][4];
#pragma unroll
                    for (int i = 0; i < 2; i++) f[i].frag(a[i], s);
#pragma unroll
                    for (int jj = 0; jj < 4; jj++) {
                        if (2 * jj >= nt) break;
                        uint32_t b[4]; /* n-tiles 2jj, 2jj + 1: {lo, hi, lo, hi} k halves of step s */
                        gemm2_ldsm4(b, xb + 2 * (16 * jj * 64 + 8 * ((2 * s + (lm & 1)) ^ lr)));
#pragma unroll
                        for (int i = 0; i < 2; i++) {
                            mv_mma(acc[i][2 * jj], a[i], b[0], b[1]);
                            if (2 * jj + 1 < nt) mv_mma(acc[i][2 * jj + 1], a[i], b[2], b[3]);
                        }
                    }
                }
            }
            st = st == S - 1 ? 0 : st + 1;
        }
    }
    gemm2_cp_wait<0>(); /* no copy may still target shared memory when the block exits */
    y += (int64_t)blockIdx.z * n * rows;
    const int64_t tile0 = tb + lt0;
    gemm_store(y, acc, tile0, tok0 + wt, g, t, rows, n);
}

/* y[i] = sum over s = 0..S-1 of part[s][i], i < total, always in that order. */
__global__ void __launch_bounds__(256) gemm_sum(float *y, const float *part, int slices, int64_t total) {
    pdl_wait();
    pdl_trigger();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        float acc = part[i];
        for (int s = 1; s < slices; s++) acc += part[(int64_t)s * total + i];
        y[i] = acc;
    }
}

#endif
