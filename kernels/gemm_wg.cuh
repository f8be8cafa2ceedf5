/* Batched-decode GEMM on wgmma (variant 7, production, compute capability 9.0): Y[n][rows] =
 * W[rows][k] . X[n][k] for the small token counts of batched decode steps and short prompt
 * passes, W quantised in matvec.cuh's repacked layout, X in f16. v2 / v3 (gemm.cuh) are
 * issue-bound there (a warp dequantises, loads B fragments and issues 8-16 mma.sync per A
 * fragment in one dependent chain: 140-190 TFLOP/s at n = 64); v4's f16 panel (gemm_panel.cuh)
 * costs more to write and read back than a product over so few tokens.
 *
 * The weights are wgmma's A operand straight from registers (the "RS" form, as CUTLASS's mixed-
 * input GEMMs do): wgmma's register fragment of A gives warp w4 of the warpgroup rows 16 w4 ..
 * 16 w4 + 15 in exactly the m16n8k16 A layout (PTX ISA 9.7.15.5.1.1; CUTLASS ALayout_64x16:
 * lane 4g + t, register p holds row g + 8 (p & 1), k pair 2t + 8 (p >> 1)), which is what the
 * repacked layout stores per lane. So a warp dequantises its 16-row tile in registers exactly as
 * v2 and v3 do (gemm3_w<T>, gemm_w<T>::frag: the same f16 values, bit for bit), and one
 * wgmma.mma_async.m64nNk16 per k16 step multiplies the warpgroup's 64 rows by N tokens of X,
 * which wgmma reads from shared memory (B, K-major, 128-byte swizzle: v4's descriptor). The
 * tensor cores run the products asynchronously while the warps dequantise the next chunk. The
 * dequantised tile never goes through shared memory: writing and reading it there would add 4
 * bytes of shared-memory traffic per weight and token tile, and at n = 64 that would exceed the
 * SM's 128 bytes per clock next to the X reads of wgmma (2 KB per m64n64k16).
 *
 * Block: 16 warps = 4 warpgroups, one 16-row tile per warp (warp w: tile w % WR, tokens from
 * NW (w / WR)), so a warpgroup is 64 consecutive rows; shapes
 *   WR = 16, WC = 1: 256 rows x NW tokens, NW = 8, 16, 32 or 64 (n <= 64: every weight
 *                    dequantised once per call, X staged once per 256 rows);
 *   WR = 8,  WC = 2: 128 rows x 128 tokens, two warpgroups per 64-token half (n > 64).
 * Accumulators: NW / 2 f32 per thread (m64nNk16: d[4j + e] at row g + 8 (e >> 1), token
 * 8j + 2t + (e & 1): gemm_store's layout).
 *
 * Pipeline: a G7_STAGES ring of stages [X: TOKS rows of 64 f16, 128 bytes, piece p of row r at
 * p ^ (r & 7)][W: the NT = WR tiles' chunk laid out as v3's (gemm3_w<T>; g7_plan copies it)],
 * each stage a multiple of 1024 bytes from a 1024-aligned base (the swizzle's pattern start), filled by
 * cp.async from all threads, one commit group per chunk, S - 2 chunks ahead; super-block
 * records (Q4_K's d, dmin, scales, Q6_K's d) in G7_NSB slots beside the ring, slot b % NSB for
 * super-block b, copied with the stage of chunk 4b. Per chunk i:
 *   cp.async.wait_group S - 3 (this thread's copies of chunk i landed), fence.proxy.async (they
 *   are generic-proxy writes that wgmma reads through the async proxy), __syncthreads (all
 *   threads' copies; every warpgroup has executed wait_group 1 after committing chunk i - 1, so
 *   chunk i - 2's wgmma have retired), then the copies of chunk i + S - 2 into chunk i - 2's
 *   stage; each warp reads its tile's words (LDS; Q4_K's scales decoded once per super-block:
 *   g7_k4_decode), dequantises the chunk's 4 A fragments (16 registers; mv_codes MODE 2, the same
 *   values as v2's MODE 1), wgmma.fence, 4 wgmma, commit_group, wait_group 1 (chunk i - 1 retired, so its
 *   A registers may be rewritten by chunk i + 1; ptxas keeps a register an in-flight wgmma
 *   reads alive until the wait that retires it, and serialises the wgmma with a warning where it
 *   cannot).
 * Super-block slots: the copy for super-block b is issued at chunk 4b - (S - 2), after the
 * barrier that follows every read of chunk 4b - S + 1; the slot's last reader (super-block
 * b - NSB) is chunk 4 (b - NSB) + 3, hence S <= 4 NSB - 2. Slices (blockIdx.z, cps chunks each)
 * start on super-blocks, so every block's first chunk brings its record.
 * Every warp runs the same instructions (no branch on the warp index: ptxas serialises wgmma
 * issued under a branch it cannot prove uniform): a warpgroup whose tokens lie past n (WC = 2, a
 * last token tile of at most 64) multiplies zeros (X rows past n are zero-filled), a tile past
 * the last row whatever its stage holds, into rows that are never stored (a row of D depends
 * only on its own row of A).
 * Issue (SASS per warp and chunk, ptxas of CUDA 13.0): Q4_0 ~140 instructions, Q4_K ~160, Q8_0
 * ~150, Q6_K ~210, i.e. 16 x that / 4 schedulers = 560-840 issue cycles per chunk of 256 rows per
 * SM, against ~550 (Q4) to ~1040 (Q8_0) cycles to stream the chunk's weights at 4 TB/s over 132
 * SMs and 512 for its wgmma at n = 64: about balanced, Q4_K and Q6_K slightly issue-bound.
 * Split-K (blockIdx.z) as v2: slice z writes plane z of the scratch, gemm_sum adds the planes in
 * order, so Y is the same on every run. PDL: the first stages' weights are copied before
 * pdl_wait, X after it. Guarded by __CUDA_ARCH_FEAT_SM90_ALL (the sm_90a build); the launcher
 * runs v7 on compute capability 9.0 only and v2 elsewhere. */
#ifndef MGI_KERNELS_GEMM_WG_CUH
#define MGI_KERNELS_GEMM_WG_CUH

#include <type_traits>
#include "kernels/gemm_panel.cuh"

#define G7_STAGES 8 /* ring stages: 6 chunks of weights in flight (~55 KB of Q4_K at 256 rows) */
#define G7_NSB 4    /* super-block record slots: G7_STAGES <= 4 G7_NSB - 2 (a power of two) */
#define G7_THREADS 512

/* Bytes of one stage (X then the weights, rounded up to 1024) and of the dynamic shared memory
 * (the ring, the record slots, and 1024 for aligning the base). */
template <int T, int WR, int WC, int NW> __host__ __device__ constexpr int g7_stage() {
    return (NW * WC * 128 + WR * gemm3_w<T>::CB + 1023) / 1024 * 1024;
}
/* Q4_K: each warp's decoded scales of its tile's current super-block (g7_k4_decode). */
#define G7_K4_DEC 512
template <int T, int WR, int WC, int NW> __host__ __device__ constexpr int g7_smem() {
    return G7_STAGES * g7_stage<T, WR, WC, NW>() + G7_NSB * WR * gemm3_w<T>::SBB +
           (T == QUANT_Q4_K ? (G7_THREADS / 32) * G7_K4_DEC : 0) + 1024;
}

/* Q4_K's scales, decoded once per super-block. v2 and v3 decode a chunk's (d sc, dmin m) pairs
 * from the super-block record in every lane for every chunk (8 values per lane, the same ones
 * as the 3 other lanes of its row group: about 45 instructions per warp and chunk, a quarter of
 * v7's loop). Here the warp decodes its tile's 16 records once per super-block (4 chunks): lane
 * l takes row r = l / 2 and byte pair jp = 2 (l % 2) + q, q = 0, 1 of the 12 scale bytes, which
 * give sub-blocks jp and jp + 4 (GGUF's packing: sc = a & 63, m = b & 63 for j < 4, sc =
 * (c & 15) | (a >> 6) << 4, m = (c >> 4) | (b >> 6) << 4 for j >= 4, with a, b, c the scale
 * bytes jp, jp + 4, jp + 8), and writes f16 d sc and -(dmin m), each rounded from its f32 product
 * exactly as gemm_wp<Q4_K>::records rounds it, into the warp's 512-byte area laid out as
 * [chunk cc][g][m0, m1, o0, o1], each word the f16 pair (row g, row g + 8) of sub-block
 * 2 cc + h: gemm_wp<Q4_K>'s m[h], o[h], which a lane then reads with one LDS.128 per chunk. */
__device__ __forceinline__ void g7_k4_decode(const uint8_t *rec, uint8_t *dec, int lane) {
    const int r = lane >> 1, sel = lane & 1;
    const uint4 R = *(const uint4 *)(rec + 16 * r);
    const float d = mv_half_lo(R.x), dmin = mv_half_hi(R.x);
    __half *out = (__half *)(dec + (sel * 8 + (r & 7)) * 16) + (r >> 3); /* chunk sel, row group r % 8 */
#pragma unroll
    for (int q = 0; q < 2; q++) {
        const int sh = 16 * sel + 8 * q; /* byte jp of the words holding scale bytes 0-3, 4-7, 8-11 */
        const uint32_t a = (R.y >> sh) & 255, b = (R.z >> sh) & 255, c = (R.w >> sh) & 255;
        const uint32_t sc_lo = a & 63, m_lo = b & 63, sc_hi = (c & 15) | (a >> 6) << 4, m_hi = (c >> 4) | (b >> 6) << 4;
        out[2 * q] = __float2half_rn(d * (float)sc_lo);              /* sub-block jp: chunk sel, m[q] */
        out[2 * (2 + q)] = __float2half_rn(-(dmin * (float)m_lo));   /* o[q] */
        out[128 + 2 * q] = __float2half_rn(d * (float)sc_hi);        /* sub-block jp + 4: chunk sel + 2 */
        out[128 + 2 * (2 + q)] = __float2half_rn(-(dmin * (float)m_hi));
    }
}

/* The weight copies, planned once per thread. v3's gemm3_w<T>::load works out every piece's
 * addresses again for each chunk (about 60 instructions per warp and chunk, a quarter of v7's
 * loop as first written); here each thread keeps its pieces' addresses. A part of a chunk (or of
 * a super-block's records) holds PPT 16-byte pieces per tile; piece e = tid + G7_THREADS i is
 * tile lt = e / PPT, piece p = e % PPT, read from src + step (step = c or b times the part's
 * stride), src = w + base + (tb + lt) tstride + 16 p, and written at lt 16 PPT + 16 p past the
 * part's place in the stage (SWAP: Q8_0's halves, as gemm3_copy). These are gemm3_w<T>::load's
 * and load_sb's places exactly (gemm3_w<T>::read reads them there). */
/* cp.async of 16 bytes (src-size `bytes`: 0 zero-fills) issued under a predicate, not a branch. */
__device__ __forceinline__ void g7_cp16(uint32_t dst, const void *src, uint32_t bytes, bool issue) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n"
                 "@p cp.async.cg.shared.global [%0], [%1], 16, %2;\n}\n" ::"r"(dst), "l"(src), "r"(bytes), "r"((int)issue)
                 : "memory");
}

template <int NT, int PPT, bool SWAP = false> struct g7_part {
    static constexpr int N = (NT * PPT + G7_THREADS - 1) / G7_THREADS;
    const uint8_t *src[N]; /* null: no piece (past the pieces, or a tile past the matrix) */
    __device__ __forceinline__ void init(const uint8_t *w, int64_t base, int64_t tstride, int64_t tb, int live) {
#pragma unroll
        for (int i = 0; i < N; i++) {
            const int e = (int)threadIdx.x + G7_THREADS * i, lt = e / PPT, p = e % PPT;
            const bool ok = (NT * PPT % G7_THREADS == 0 || e < NT * PPT) && lt < live;
            src[i] = ok ? w + base + (tb + lt) * tstride + 16 * p : nullptr;
        }
    }
    /* the piece's place past the part's (a function of the thread: recomputed, not kept) */
    __device__ __forceinline__ static uint32_t dst(int i) {
        const int e = (int)threadIdx.x + G7_THREADS * i, lt = e / PPT, p = e % PPT;
        return lt * 16 * PPT + (SWAP ? (p & 1) * 8 * PPT + 16 * (p >> 1) : 16 * p);
    }
    __device__ __forceinline__ void copy(uint32_t sdst, uint32_t step) const {
#pragma unroll
        for (int i = 0; i < N; i++) g7_cp16(sdst + dst(i), src[i] + step, 16, src[i] != nullptr);
    }
};

/* Per type: the parts of a chunk (copy, into a stage's weight region) and of a super-block
 * (copy_sb, into its record slot), after gemm3_w<T>::load and load_sb. */
template <int T, int NT> struct g7_plan;

template <int NT> struct g7_plan<QUANT_Q4_0, NT> {
    g7_part<NT, 32> q;
    g7_part<NT, 4> sc;
    __device__ __forceinline__ void init(const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int live) {
        q.init(w, 0, C * 512, tb, live);
        sc.init(w, R16 * C * 512, C * 64, tb, live);
    }
    __device__ __forceinline__ void copy(uint32_t sw, int c) const {
        q.copy(sw, 512u * c);
        sc.copy(sw + NT * 512, 64u * c);
    }
    __device__ __forceinline__ void copy_sb(uint32_t, int) const {}
};

template <int NT> struct g7_plan<QUANT_Q4_K, NT> {
    g7_part<NT, 32> q;
    g7_part<NT, 16> rec;
    __device__ __forceinline__ void init(const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int live) {
        q.init(w, 0, C * 512, tb, live);
        rec.init(w, R16 * C * 512, C * 64, tb, live);
    }
    __device__ __forceinline__ void copy(uint32_t sw, int c) const { q.copy(sw, 512u * c); }
    __device__ __forceinline__ void copy_sb(uint32_t slot, int b) const { rec.copy(slot, 256u * b); }
};

template <int NT> struct g7_plan<QUANT_Q5_K, NT> : g7_plan<QUANT_Q4_K, NT> { /* gemm3_w<Q5_K>'s places */
    g7_part<NT, 32> hi;
    __device__ __forceinline__ void init(const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int live) {
        g7_plan<QUANT_Q4_K, NT>::init(w, R16, C, tb, live);
        hi.init(w, mv5_high(R16, C), (C / 4) * 512, tb, live);
    }
    __device__ __forceinline__ void copy_sb(uint32_t slot, int b) const {
        g7_plan<QUANT_Q4_K, NT>::copy_sb(slot, b);
        hi.copy(slot + NT * 256, 512u * b);
    }
};

template <int NT> struct g7_plan<QUANT_Q8_0, NT> {
    g7_part<NT, 64, true> q;
    g7_part<NT, 4> sc;
    __device__ __forceinline__ void init(const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int live) {
        q.init(w, 0, C * 1024, tb, live);
        sc.init(w, R16 * C * 1024, C * 64, tb, live);
    }
    __device__ __forceinline__ void copy(uint32_t sw, int c) const {
        q.copy(sw, 1024u * c);
        sc.copy(sw + NT * 1024, 64u * c);
    }
    __device__ __forceinline__ void copy_sb(uint32_t, int) const {}
};

template <int NT> struct g7_plan<QUANT_Q6_K, NT> {
    g7_part<NT, 32> lo;
    g7_part<NT, 16> hi;
    g7_part<NT, 4> sc;
    g7_part<NT, 2> d;
    __device__ __forceinline__ void init(const uint8_t *w, int64_t R16, int64_t C, int64_t tb, int live) {
        lo.init(w, 0, C * 512, tb, live);
        hi.init(w, R16 * C * 512, C * 256, tb, live);
        sc.init(w, R16 * C * 768, C * 64, tb, live);
        d.init(w, R16 * C * 832, (C / 4) * 32, tb, live);
    }
    __device__ __forceinline__ void copy(uint32_t sw, int c) const {
        lo.copy(sw, 512u * c);
        hi.copy(sw + NT * 512, 256u * c);
        sc.copy(sw + NT * 768, 64u * c);
    }
    __device__ __forceinline__ void copy_sb(uint32_t slot, int b) const { d.copy(slot, 32u * b); }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define G7_D(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define G7_A "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db)

/* d += A B for one k16 step, A (64 x 16, f16) from the warpgroup's registers a, B (16 x N
 * tokens, K-major) from shared memory through descriptor db: scale-d 1, A and B not negated, B
 * not transposed. One specialisation per token count N. */
template <int N> __device__ __forceinline__ void g7_mma(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t db);

template <> __device__ __forceinline__ void g7_mma<8>(float (&d)[1][4], const uint32_t (&a)[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
                 : G7_D(0)
                 : G7_A
                 : "memory");
}
template <> __device__ __forceinline__ void g7_mma<16>(float (&d)[2][4], const uint32_t (&a)[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
                 : G7_D(0), G7_D(1)
                 : G7_A
                 : "memory");
}
template <> __device__ __forceinline__ void g7_mma<32>(float (&d)[4][4], const uint32_t (&a)[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
                 "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
                 : G7_D(0), G7_D(1), G7_D(2), G7_D(3)
                 : G7_A
                 : "memory");
}
template <> __device__ __forceinline__ void g7_mma<64>(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : G7_D(0), G7_D(1), G7_D(2), G7_D(3), G7_D(4), G7_D(5), G7_D(6), G7_D(7)
                 : G7_A
                 : "memory");
}
#undef G7_D
#undef G7_A

/* gp4_fence_acc for the [NJ][4] accumulators. */
template <int NJ> __device__ __forceinline__ void g7_fence_acc(float (&d)[NJ][4]) {
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+f"(d[j][e])::"memory");
}
/* The same for a chunk's A fragments: they are complete before wgmma.fence. Without it the
 * compiler may sink the dequantisation of step s next to its wgmma, after the fence, and ptxas
 * then serialises every wgmma (its advisory C7513). */
__device__ __forceinline__ void g7_fence_a(uint32_t (&a)[4][4]) {
#pragma unroll
    for (int s = 0; s < 4; s++)
#pragma unroll
        for (int p = 0; p < 4; p++) asm volatile("" : "+r"(a[s][p])::"memory");
}
#endif

template <int T, int WR, int WC, int NW>
__global__ void __launch_bounds__(G7_THREADS, 1) gemm_v7(float *y, const uint8_t *w, const __half *x, int rows, int k,
                                                         int n, int cps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using W = gemm3_w<T>;
    constexpr int NTH = 32 * WR * WC, NT = WR, TOKS = NW * WC, S = G7_STAGES;
    constexpr int XB = TOKS * 128, STAGE = g7_stage<T, WR, WC, NW>(), XPIECES = (TOKS * 8 + NTH - 1) / NTH;
    static_assert(NTH == G7_THREADS && WR % 4 == 0, "16 warps, warpgroups of 4 warps along rows");
    static_assert(S >= 3 && S <= 4 * G7_NSB - 2 && (G7_NSB & (G7_NSB - 1)) == 0,
                  "the super-block slots need S <= 4 NSB - 2 (see above), NSB a power of two");
    static_assert(NW == 8 || NW == 16 || NW == 32 || NW == 64, "wgmma wrappers exist for these N");
    extern __shared__ uint8_t g7s[];
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(g7s), sm0 = gp_align1024(raw), sbs = sm0 + S * STAGE;
    uint8_t *const gs = g7s + (sm0 - raw); /* the aligned base as a generic pointer, for LDS */
    const int C = (int)mv2_chunks(k), R16 = (rows + 15) / 16, c0 = (int)blockIdx.z * cps;
    const int c1 = c0 + cps < C ? c0 + cps : C;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t tb = (int64_t)blockIdx.y * NT;
    const int lt = warp % WR, live = R16 - tb < NT ? (int)(R16 - tb) : NT;
    const int tok0 = blockIdx.x * TOKS, wt = NW * (warp / WR);
    float acc[1][NW / 8][4];
#pragma unroll
    for (int j = 0; j < NW / 8; j++) acc[0][j][0] = acc[0][j][1] = acc[0][j][2] = acc[0][j][3] = 0;
    /* X of chunk c into stage st (after pdl_wait only: X is the previous kernel's output): piece
     * e = tid + NTH i is token row r = e / 8, k piece p = e % 8 (= tid % 8), stored at p ^ (r & 7);
     * every row of the tile is written, zeros for tokens past n and weights past k (valid for the
     * chunks c < xcend) */
    const __half *xsrc[XPIECES];
    int xcend[XPIECES];
    const int xp = threadIdx.x & 7;
#pragma unroll
    for (int i = 0; i < XPIECES; i++) {
        const int e = threadIdx.x + NTH * i, r = e >> 3, tok = tok0 + r;
        xsrc[i] = x + (int64_t)(tok < n ? tok : 0) * k + 8 * xp;
        xcend[i] = tok < n && k > 8 * xp ? (k - 8 * xp + 63) / 64 : 0;
    }
    auto load_x = [&](int c, int st) {
#pragma unroll
        for (int i = 0; i < XPIECES; i++) {
            const int e = threadIdx.x + NTH * i, r = e >> 3;
            const bool ok = c < xcend[i]; /* else zeros, and no byte read (from x: in bounds all the same) */
            g7_cp16(sm0 + st * STAGE + r * 128 + ((xp ^ (r & 7)) << 4), ok ? xsrc[i] + 64 * c : x, ok ? 16 : 0,
                    TOKS * 8 % NTH == 0 || e < TOKS * 8);
        }
    };
    g7_plan<T, NT> plan;
    plan.init(w, R16, C, tb, live);
    /* chunk c's weights into stage st, and with it super-block c / 4's records when c is its
     * first chunk (sb: c % 4 == 0, a constant in the loop below: slices start on super-blocks) */
    auto load_w = [&](int c, int st, bool sb) {
        plan.copy(sm0 + st * STAGE + XB, c);
        if (W::SBB > 0 && sb) plan.copy_sb(sbs + ((c >> 2) & (G7_NSB - 1)) * NT * W::SBB, c >> 2);
    };
#pragma unroll
    for (int s = 0; s < S - 2; s++) if (c0 + s < c1) load_w(c0 + s, s, s % 4 == 0);
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int s = 0; s < S - 2; s++) {
        if (c0 + s < c1) load_x(c0 + s, s);
        gemm2_cp_commit(); /* group 0 also holds the weights of stages 1..S-3: harmless */
    }
    int st = 0;
    /* chunk c, at place CC in its super-block (Q4_K's scale index: a constant). DRAIN: every
     * wgmma retired before this chunk's A registers are written (the tail loop below) */
    auto chunk = [&](int c, auto cc_const, auto drain_const) {
        constexpr int CC = decltype(cc_const)::value;
        constexpr bool DRAIN = decltype(drain_const)::value;
        gemm2_cp_wait<S - 3>(); /* groups committed: S - 2 + (c - c0); chunk c's is the (c - c0 + 1)-th */
        gp4_fence_proxy();      /* this thread's copies, visible to wgmma's async-proxy reads */
        __syncthreads();        /* everyone's; every warpgroup has retired chunk c - 2 */
        {
            const int cn = c + S - 2, sn = st + S - 2 < S ? st + S - 2 : st - 2; /* chunk c - 2's stage */
            if (cn < c1) {
                load_w(cn, sn, (CC + S - 2) % 4 == 0);
                load_x(cn, sn);
            }
            gemm2_cp_commit();
        }
        if constexpr (DRAIN) { /* the previous chunk's wgmma may still read the registers a reuses */
            gp4_wait<0>();
            g7_fence_acc(acc[0]);
        }
        const uint8_t *sw = gs + st * STAGE + XB, *sb = gs + S * STAGE + ((c >> 2) & (G7_NSB - 1)) * NT * W::SBB;
        uint32_t a[4][4];
        if constexpr (T == QUANT_Q4_K) { /* scales from the warp's decoded area (g7_k4_decode) */
            uint8_t *dec = gs + S * STAGE + G7_NSB * NT * W::SBB + warp * G7_K4_DEC;
            if constexpr (CC == 0) { /* a new super-block; the barrier above follows every read of the last one */
                g7_k4_decode(sb + lt * 256, dec, lane);
                __syncwarp();
            }
            gemm_wp<QUANT_Q4_K> f;
            f.q = *(const uint4 *)(sw + lt * 512 + 16 * lane);
            const uint4 mo = *(const uint4 *)(dec + (CC * 8 + g) * 16);
            f.m[0] = mo.x;
            f.m[1] = mo.y;
            f.o[0] = mo.z;
            f.o[1] = mo.w;
#pragma unroll
            for (int s = 0; s < 4; s++) f.template frag<2>(a[s], s, 0);
        } else {
            W f;
            f.template read<NT>(sw, sb, lt, lane, g, CC);
#pragma unroll
            for (int s = 0; s < 4; s++) f.template frag<2>(a[s], s);
        }
        g7_fence_a(a);
        /* B: X rows wt.. of the stage, a multiple of 1024 bytes in (wt is 0 or 64); step s starts
         * 32 s bytes in, 2 s in the descriptor's address field (below 2^14: no carry) */
        const uint64_t db = gp4_desc(sm0 + st * STAGE + wt * 128);
        g7_fence_acc(acc[0]);
        gp4_wgmma_fence();
#pragma unroll
        for (int s = 0; s < 4; s++) g7_mma<NW>(acc[0], a[s], db + 2 * s);
        gp4_commit();
        gp4_wait<1>();
        g7_fence_acc(acc[0]);
        st = st == S - 1 ? 0 : st + 1;
    };
    /* whole super-blocks, then (32-weight types, k not a multiple of 256) the last chunks one by
     * one; no exit from the middle of the unrolled body, where ptxas would serialise every wgmma
     * (it cannot follow a wgmma group in flight across several exits). The tail loop is rolled:
     * each pass writes the same A registers while the last pass's wgmma (left in flight by
     * wait_group 1) may still read them, so its chunks drain the wgmma first. Without that, k of
     * 640 (two tail chunks) gave wrong and varying sums from 33 tokens on (tests/gpu/test_kernels:
     * gemm_split v7 256x640), the small models' FFN down. */
    const std::false_type keep;
    int cb = c0;
    for (; cb + 4 <= c1; cb += 4) {
        chunk(cb, std::integral_constant<int, 0>(), keep);
        chunk(cb + 1, std::integral_constant<int, 1>(), keep);
        chunk(cb + 2, std::integral_constant<int, 2>(), keep);
        chunk(cb + 3, std::integral_constant<int, 3>(), keep);
    }
    if constexpr (W::SBB == 0) /* Q4_K and Q6_K slices are whole super-blocks */
        for (; cb < c1; cb++) chunk(cb, std::integral_constant<int, 0>(), std::true_type());
    gp4_wait<0>();
    g7_fence_acc(acc[0]);
    gemm2_cp_wait<0>(); /* no copy may still target shared memory when the block exits */
    y += (int64_t)blockIdx.z * n * rows;
    gemm_store(y, acc, tb + lt, tok0 + wt, g, t, rows, n);
#else
    __trap(); /* the launcher never runs v7 without sm_90a code */
#endif
}

#endif
