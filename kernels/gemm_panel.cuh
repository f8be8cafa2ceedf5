/* Prefill GEMM through an f16 panel (gemm_lab.h's variants 4 to 7, n >= GP_MIN_N): the weights are
 * dequantised once per call, panel by panel, into f16 rows in scratch (gp_dequant), and a plain
 * f16 tensor-core GEMM multiplies each panel with X (v5: mma.sync; v4: wgmma, sm_90a), adding
 * into Y across the k panels in a fixed order. v2 (gemm.cuh) dequantises inside its main loop,
 * once per 128-token tile and per warp, and is issue-bound at 150-240 TFLOP/s; here every weight
 * is dequantised once and the product runs at the f16 GEMM's rate (cuBLAS f16: 600-740).
 *
 * Panel: rows [row0, row0 + Pr) x chunks [c0, c0 + pc) of the repacked matrix (matvec.cuh), Pr a
 * multiple of 128 (rows past R16 tiles are zeros), stored as [Pr / 128][pc][128 rows][64] f16:
 * one 16 KB block per (128 rows, 64 weights), row-major inside, so a ring stage's weights are one
 * contiguous 16 KB run. The launcher (gemm.cu) sizes panels to stay within GEMM_PANEL_BYTES
 * (near L2, so the GEMM reads the panel back from L2 rather than HBM).
 *
 * Both GEMMs compute D[token][row] = X[token][:] . W[row][:], tokens as the MMA's M (A operand,
 * from X [n][k]) and weight rows as its N (B operand, from the panel), both K-major; D's lane
 * pairs are then adjacent rows of Y [n][rows] (float2 stores). Block tile: 128 tokens x 128
 * (v5, v4) or 256 (v4) rows, k step 64 (one chunk = one stage). Shared-memory stage: X [128][64]
 * f16 then W [BN][64] f16, rows of 128 bytes, 16-byte piece p of row r stored at p ^ (r & 7):
 * that is the XOR swizzle that makes ldmatrix conflict-free (v5) and exactly the 128-byte
 * swizzle wgmma's descriptors describe (v4), given 1024-byte aligned stages. Tokens past n and
 * weights past k are zero-filled by cp.async (src-size 0); rows past `rows` are zeros in the
 * panel and never stored.
 * Split-K (blockIdx.z, when the tiles of one panel are too few for the SMs): slice z takes cps
 * chunks and writes plane z of scratch, gemm_sum (gemm.cuh) adds the planes in order. */
#ifndef MGI_KERNELS_GEMM_PANEL_CUH
#define MGI_KERNELS_GEMM_PANEL_CUH

#include "kernels/gemm.cuh"

#define GP_MIN_N 128     /* token counts from which variants 4 and 5 use the panel path */
#define GP_BM 128        /* tokens per block */
#define GP_XBYTES 16384  /* X bytes of a stage: 128 tokens x 64 f16 */
#define GP_BLOCK 8192    /* f16 of one panel block: 128 rows x 64 */
#define GP5_STAGES 3     /* v5: 3 x 32 KB, two blocks per SM */

/* ---------------------------------------------------------------- dequantisation ------------ */
/* One warp per 16-row tile and GP_DQ_CH chunks (their loads in flight together): gemm_w<T>
 * (gemm.cuh, v1/v2's own loads and scaling, so the f16 values are bit-identical to what v2
 * multiplies) yields the m16n8k16 A fragments of the chunk's 4 k16 steps; lane 4g + t holds, for
 * step s and register p, rows g + 8 (p & 1), columns 16 s + 2 t + 8 (p >> 1) and + 1 (PTX ISA
 * 9.7.14.5.8, matrix A of mma.m16n8k16). They go to a per-warp staging tile [16][72 halves]
 * (36 words a row: the 32 lanes of each store hit 32 distinct banks, 36 g + t + const), then
 * out as 16-byte pieces, a row's 8 pieces from 8 consecutive lanes: each warp writes its 2 KB
 * of the panel block contiguously. Weights are loaded before pdl_wait (never written by a
 * kernel), the panel is written after it (the previous GEMM may still read the panel). */
#define GP_DQ_CH 2

template <int T>
__global__ void __launch_bounds__(256) gp_dequant(__half *panel, const uint8_t *w, int R16, int C, int tb0, int c0,
                                                  int pc) {
    __shared__ __align__(16) uint32_t stage[8][16 * 36];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int lt = blockIdx.y * 8 + warp;      /* 16-row tile within the panel */
    const int cl0 = blockIdx.x * GP_DQ_CH;     /* first chunk within the panel */
    const int64_t tile = (int64_t)tb0 + lt;
    const bool live = tile < R16;              /* tiles past the matrix are written as zeros */
    gemm_w<T> wv[GP_DQ_CH];
#pragma unroll
    for (int u = 0; u < GP_DQ_CH; u++)
        if (live && cl0 + u < pc) wv[u].load(w, R16, C, tile, c0 + cl0 + u, lane, g);
    pdl_wait();
    pdl_trigger();
    uint32_t *s = stage[warp];
#pragma unroll
    for (int u = 0; u < GP_DQ_CH; u++) {
        const int c = cl0 + u;
        if (c >= pc) break;
#pragma unroll
        for (int st = 0; st < 4; st++) {
            uint32_t a[4] = {0, 0, 0, 0};
            if (live) wv[u].frag(a, st, (int64_t)c0 + c);
#pragma unroll
            for (int p = 0; p < 4; p++) s[(g + 8 * (p & 1)) * 36 + 8 * st + t + 4 * (p >> 1)] = a[p];
        }
        __syncwarp();
        /* this tile's 16 rows of block (lt / 8, c): 1024 f16 from row 16 (lt % 8) */
        __half *dst = panel + ((int64_t)(lt >> 3) * pc + c) * GP_BLOCK + (lt & 7) * 1024;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = lane + 32 * i, r = q >> 3, pp = q & 7;
            *(uint4 *)(dst + r * 64 + 8 * pp) = *(const uint4 *)&s[r * 36 + 4 * pp];
        }
        __syncwarp(); /* the staging tile is rewritten by the next chunk */
    }
}

/* ---------------------------------------------------------------- shared by v4 and v5 ------- */
/* A launch's view of one panel. Y [n][rows] (plane z at y + z * plane when split); X [n][k]. */
struct gp_args {
    float *y;
    const __half *panel, *x;
    int rows, k, n;
    int row0;       /* first weight row of the panel */
    int nrb;        /* 128-row blocks in the panel */
    int c0, pc;     /* the panel's chunks: [c0, c0 + pc) of k */
    int cps;        /* chunks per blockIdx.z slice */
    int accumulate; /* y += the product (k panels after the first) instead of y = */
    int vec;        /* rows even and y 8-byte aligned: float2 stores */
    int64_t plane;  /* floats between the slices' output planes */
};

__device__ __forceinline__ uint32_t gp_align1024(uint32_t a) { return (a + 1023u) & ~1023u; }

/* Copies chunk gc's X tile (128 tokens from tok0) to the stage at sx: thread tid takes 16-byte
 * pieces e = tid + 256 i, i < 4, i.e. token row tid / 8 + 32 i and piece tid % 8 (k 8p..8p+7),
 * stored at p ^ (row & 7). X is the previous kernel's output: cp.async reads it coherently,
 * after pdl_wait. */
__device__ __forceinline__ void gp_load_x(uint32_t sx, const gp_args &a, int tok0, int gc) {
    const int tid = threadIdx.x, cr = tid >> 3, cp = tid & 7;
    const uint32_t dst = sx + cr * 128 + ((cp ^ (cr & 7)) << 4);
    const int kk = 64 * gc + 8 * cp;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int tok = tok0 + cr + 32 * i;
        const bool ok = tok < a.n && kk < a.k;
        gemm2_cp16(dst + 4096 * i, ok ? a.x + (int64_t)tok * a.k + kk : a.x, ok);
    }
}

/* Copies panel chunk c of NB consecutive 128-row blocks from rb0 (those at or past nrb are
 * zero-filled) to the stage at sw: piece e = tid + 256 i of the [NB * 128][64] tile, row e / 8,
 * piece e % 8, source contiguous within each block. */
template <int NB>
__device__ __forceinline__ void gp_load_w(uint32_t sw, const gp_args &a, int rb0, int c) {
    const int tid = threadIdx.x, cr = tid >> 3, cp = tid & 7;
    const uint32_t dst = sw + cr * 128 + ((cp ^ (cr & 7)) << 4);
#pragma unroll
    for (int i = 0; i < 4 * NB; i++) {
        const int rb = rb0 + (i >> 2);
        const bool ok = rb < a.nrb;
        const __half *src = a.panel + ((int64_t)rb * a.pc + c) * GP_BLOCK + (tid + 256 * (i & 3)) * 8;
        gemm2_cp16(dst + 4096 * i, ok ? src : a.panel, ok);
    }
}

/* The accumulator pair (rows row, row + 1 of token tok) into Y: plain or added, float2 when the
 * launcher allows it, rows and tokens past the ends left out. */
__device__ __forceinline__ void gp_store2(const gp_args &a, float *y, int tok, int row, float v0, float v1) {
    if (tok >= a.n || row >= a.rows) return;
    float *p = y + (int64_t)tok * a.rows + row;
    if (a.vec) { /* rows even: row + 1 < rows too */
        float2 v = make_float2(v0, v1);
        if (a.accumulate) {
            const float2 o = *(const float2 *)p;
            v.x += o.x;
            v.y += o.y;
        }
        *(float2 *)p = v;
        return;
    }
    p[0] = a.accumulate ? p[0] + v0 : v0;
    if (row + 1 < a.rows) p[1] = a.accumulate ? p[1] + v1 : v1;
}

/* ---------------------------------------------------------------- v5: mma.sync --------------- */
/* 8 warps as 2 (tokens) x 4 (rows), warp tile 64 tokens x 32 rows = 4 x 4 m16n8k16 tiles, 64
 * f32 accumulators. Per k16 step a warp loads 4 A fragments (ldmatrix.x4 each: matrices (rows
 * 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) = registers a0a1, a2a3, a4a5, a6a7 of PTX
 * ISA 9.7.14.5.8) and 2 B pairs (ldmatrix.x4: n-tiles 2jj and 2jj + 1, k halves lo and hi: rows
 * of the 8x8 matrices are weight rows, so lane 4g + t receives row g's k pair 2t, 2t + 1 = b0b1
 * of the "col" B fragment), then 16 mma: 192 bytes of shared memory per mma. GP5_STAGES-stage
 * cp.async ring, one __syncthreads per chunk (as gemm_v2); two blocks per SM (<= 128 registers). */
__global__ void __launch_bounds__(256, 2) gemm_v5(gp_args a) {
    constexpr int S = GP5_STAGES, STAGE = GP_XBYTES + GP_BLOCK * 2;
    extern __shared__ uint8_t gp_smem[];
    const uint32_t sbase = gp_align1024((uint32_t)__cvta_generic_to_shared(gp_smem));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int wm = warp >> 2, wn = warp & 3, lm = lane >> 3, lr = lane & 7;
    const int tok0 = blockIdx.x * GP_BM, rb = blockIdx.y;
    const int cb = blockIdx.z * a.cps, ce = min(a.pc, cb + a.cps), nc = ce - cb;
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
    /* ldmatrix lane rows: A matrix lm = rows 8 (lm & 1), k half lm >> 1; B matrix lm = n-tile
     * offset lm >> 1, k half lm & 1; every 8-row group starts at a multiple of 8, so row & 7 = lr */
    const uint32_t a_row = (64 * wm + 8 * (lm & 1) + lr) * 128, b_row = GP_XBYTES + (32 * wn + 8 * (lm >> 1) + lr) * 128;
    const int ah = lm >> 1, bh = lm & 1;
    pdl_wait();
    pdl_trigger();
    auto load = [&](int i, int st) {
        const uint32_t sx = sbase + st * STAGE;
        gp_load_x(sx, a, tok0, a.c0 + cb + i);
        gp_load_w<1>(sx + GP_XBYTES, a, rb, cb + i);
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < nc) load(s, s);
        gemm2_cp_commit(); /* empty groups keep the wait count uniform */
    }
    int st = 0;
    for (int i = 0; i < nc; i++) {
        gemm2_cp_wait<S - 2>(); /* this thread's pieces of chunk i have landed */
        __syncthreads();        /* everyone's have, and stage i - 1 is free again */
        if (i + S - 1 < nc) load(i + S - 1, st == 0 ? S - 1 : st - 1);
        gemm2_cp_commit();
        const uint32_t sx = sbase + st * STAGE;
#pragma unroll
        for (int s = 0; s < 4; s++) {
            uint32_t af[4][4], bf[2][4];
            const uint32_t ao = sx + a_row + (((2 * s + ah) ^ lr) << 4), bo = sx + b_row + (((2 * s + bh) ^ lr) << 4);
#pragma unroll
            for (int mt = 0; mt < 4; mt++) gemm2_ldsm4(af[mt], ao + 2048 * mt); /* 16 rows x 128 B apart */
#pragma unroll
            for (int jj = 0; jj < 2; jj++) gemm2_ldsm4(bf[jj], bo + 2048 * jj);
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) mv_mma(acc[mt][nt], af[mt], bf[nt >> 1][2 * (nt & 1)], bf[nt >> 1][2 * (nt & 1) + 1]);
        }
        st = st == S - 1 ? 0 : st + 1;
    }
    gemm2_cp_wait<0>(); /* no copy may still target shared memory when the block exits */
    /* m16n8k16 C fragment: c0, c1 = (row g, columns 2t, 2t + 1), c2, c3 = row g + 8 (PTX ISA
     * 9.7.14.5.8): rows are tokens, columns weight rows */
    float *y = a.y + blockIdx.z * a.plane;
    const int row_b = a.row0 + rb * 128 + 32 * wn + 2 * t, tok_b = tok0 + 64 * wm + g;
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                gp_store2(a, y, tok_b + 16 * mt + 8 * h, row_b + 8 * nt, acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
}

/* ---------------------------------------------------------------- v4: wgmma (sm_90a) --------- */
/* Two warpgroups, each 64 tokens (warpgroup w: tokens 64w..64w+63) x BN rows, one
 * wgmma.mma_async.m64nBNk16.f32.f16.f16 per k16 step with both operands in shared memory (PTX
 * ISA 9.7.15.5), BN / 2 f32 accumulators per thread. Every thread also copies: a GP4 ring of S
 * stages filled by cp.async, S - 2 chunks ahead, one barrier per chunk.
 *
 * Shared-memory matrix descriptors (PTX ISA 9.7.15.5.1.2.2, "Matrix Descriptor Format"):
 *   bits 0-13  (start address & 0x3FFFF) >> 4
 *   bits 16-29 leading-dimension byte offset >> 4: unused for K-major layouts with a swizzle
 *              whose atom spans the whole K extent of the instruction (here 16 f16 = 32 bytes
 *              inside a 128-byte swizzle row); set to 1 as CUTLASS's make_gmma_desc does
 *   bits 32-45 stride-dimension byte offset >> 4: 1024 bytes between consecutive 8-row core
 *              matrix groups along M (A) or N (B): our rows are 128 bytes apart, 8 rows = 1024
 *   bits 49-51 base offset: 0, since every stage (the pattern start) is 1024-byte aligned
 *   bits 62-63 swizzle mode 1 = 128-byte swizzle
 * The 128-byte swizzle (PTX ISA 9.7.15.5.1.2, "Shared Memory Matrix Layout", K-major, atom 8 rows
 * x 128 bytes, 1024-byte aligned) permutes the 16-byte chunk index (address bits 4-6) by XOR
 * with the row within the atom (bits 7-9): exactly our p ^ (r & 7). K step kk (16 f16, 32 bytes)
 * of the 64-wide stage starts 32 kk bytes into the row; the hardware applies the XOR to the final
 * address, so advancing the start address by 32 kk (2 kk in the encoded field) selects k
 * columns 16kk..16kk+15 of every row (CUTLASS's DescriptorIterator does the same).
 * Ordering (PTX ISA 9.7.15.6, wgmma.fence / commit_group / wait_group, and the async proxy):
 *   cp.async writes shared memory through the generic proxy and wgmma reads it through the async
 *   proxy, so each thread's writes are made visible with fence.proxy.async after its
 *   cp.async.wait_group, before the barrier that publishes them to the other warps;
 *   wgmma.fence before the first wgmma of each chunk (accumulator registers were last touched by
 *   wgmma of the same shape or the zero fill); commit_group after the 4 wgmma; wait_group 1 lets
 *   chunk i's wgmma run while chunk i + 1 is set up, and guarantees chunk i - 1's reads are done.
 *   So at the barrier of chunk i every warpgroup has retired chunk i - 2, whose stage
 *   (i + S - 2) mod S is the one refilled right after that barrier.
 * Accumulator fragment (PTX ISA 9.7.15.5.1.1.1, wgmma .m64nNk16, accumulator D, f32): thread
 * 4g + t of warp w4 (0-3) in the warpgroup holds d[i] at row 16 w4 + g + 8 ((i >> 1) & 1), column
 * 8 (i >> 2) + 2 t + (i & 1): rows are tokens, columns weight rows.
 * FENCE = false is variant 6 (lab): v4 without the per-chunk fence.proxy.async, which ptxas
 * lowers to MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S; should that MEMBAR wait for the copies still in
 * flight for later stages it would cost the ring its depth. CUTLASS's cp.async GMMA mainloops
 * (sm90_mma_multistage_gmma_ss*) issue no such fence, but the PTX ISA asks for one, so v4 keeps it.
 * Guarded by __CUDA_ARCH_FEAT_SM90_ALL: only the sm_90a build has wgmma; the launcher runs v4
 * only on compute capability 9.0 and v5 elsewhere. */
template <int BN> __host__ __device__ constexpr int gp4_stages() { return BN == 128 ? 5 : 4; }
template <int BN> __host__ __device__ constexpr int gp4_stage_bytes() { return GP_XBYTES + BN * 128; }
template <int BN> __host__ __device__ constexpr int gp4_smem() { return gp4_stages<BN>() * gp4_stage_bytes<BN>() + 1024; }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GP4_DESC_BASE ((1ull << 62) | (64ull << 32) | (1ull << 16)) /* 128B swizzle, SBO 1024, LBO 16 (unused) */

__device__ __forceinline__ uint64_t gp4_desc(uint32_t saddr) {
    return GP4_DESC_BASE | (uint64_t)((saddr & 0x3FFFF) >> 4);
}
__device__ __forceinline__ void gp4_fence_proxy() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void gp4_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void gp4_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void gp4_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma
 * window (CUTLASS's warpgroup_fence_operand). */
template <int NA> __device__ __forceinline__ void gp4_fence_acc(float (&d)[NA]) {
#pragma unroll
    for (int i = 0; i < NA; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define GP4_F8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                  "+f"(d[i + 6]), "+f"(d[i + 7])
#define GP4_F64(i) GP4_F8(i), GP4_F8(i + 8), GP4_F8(i + 16), GP4_F8(i + 24), GP4_F8(i + 32), GP4_F8(i + 40), \
                   GP4_F8(i + 48), GP4_F8(i + 56)

/* D += A B for one k16 step: scale-d 1 (accumulate), no negation, no transposition (both K-major). */
__device__ __forceinline__ void gp4_mma(float (&d)[64], uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1, 0, 0;\n}\n"
                 : GP4_F64(0)
                 : "l"(da), "l"(db)
                 : "memory");
}
__device__ __forceinline__ void gp4_mma(float (&d)[128], uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
                 "%128, %129, p, 1, 1, 0, 0;\n}\n"
                 : GP4_F64(0), GP4_F64(64)
                 : "l"(da), "l"(db)
                 : "memory");
}
#endif

template <int BN, bool FENCE>
__global__ void __launch_bounds__(256, 1) gemm_v4(gp_args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int S = gp4_stages<BN>(), STAGE = gp4_stage_bytes<BN>(), NA = BN / 2;
    static_assert(S >= 3, "wait_group 1 needs two stages besides the one being filled");
    extern __shared__ uint8_t gp_smem[];
    const uint32_t sbase = gp_align1024((uint32_t)__cvta_generic_to_shared(gp_smem));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int wg = warp >> 2, w4 = warp & 3;
    const int tok0 = blockIdx.x * GP_BM, rb0 = blockIdx.y * (BN / 128);
    const int cb = blockIdx.z * a.cps, ce = min(a.pc, cb + a.cps), nc = ce - cb;
    float acc[NA];
#pragma unroll
    for (int i = 0; i < NA; i++) acc[i] = 0;
    pdl_wait();
    pdl_trigger();
    auto load = [&](int i, int st) {
        const uint32_t sx = sbase + st * STAGE;
        gp_load_x(sx, a, tok0, a.c0 + cb + i);
        gp_load_w<BN / 128>(sx + GP_XBYTES, a, rb0, cb + i);
    };
#pragma unroll
    for (int s = 0; s < S - 2; s++) {
        if (s < nc) load(s, s);
        gemm2_cp_commit();
    }
    int st = 0;
    for (int i = 0; i < nc; i++) {
        gemm2_cp_wait<S - 3>(); /* groups committed: S - 2 + i; chunk i's is the (i + 1)-th */
        if (FENCE) gp4_fence_proxy(); /* this thread's copies, visible to wgmma's async-proxy reads */
        __syncthreads();        /* everyone's; every warpgroup has retired chunk i - 2 */
        {
            const int sn = st + S - 2 < S ? st + S - 2 : st - 2; /* (i + S - 2) mod S */
            if (i + S - 2 < nc) load(i + S - 2, sn);
            gemm2_cp_commit();
        }
        const uint32_t sx = sbase + st * STAGE, sw = sx + GP_XBYTES;
        gp4_fence_acc(acc);
        gp4_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) gp4_mma(acc, gp4_desc(sx + wg * 8192 + 32 * kk), gp4_desc(sw + 32 * kk));
        gp4_commit();
        gp4_wait<1>();
        gp4_fence_acc(acc);
        st = st == S - 1 ? 0 : st + 1;
    }
    gp4_wait<0>();
    gp4_fence_acc(acc);
    gemm2_cp_wait<0>();
    float *y = a.y + blockIdx.z * a.plane;
    const int tok_b = tok0 + 64 * wg + 16 * w4 + g, row_b = a.row0 + rb0 * 128 + 2 * t;
#pragma unroll
    for (int i = 0; i < NA; i += 2) gp_store2(a, y, tok_b + 8 * ((i >> 1) & 1), row_b + 8 * (i >> 2), acc[i], acc[i + 1]);
#else
    __trap(); /* the launcher never runs v4 without sm_90a code */
#endif
}

#endif
