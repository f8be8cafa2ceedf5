/* Prompt attention (kernels/paged.h: paged_attention_prefill) on the tensor cores: n_tok
 * consecutive tokens of one sequence against its paged f16 K/V cache, flash-attention style.
 * Rows are (token, query head of the kv head's group) pairs, row = token * G + h, so the G query
 * heads of a kv head share every K/V tile a block reads. S = Q K^T and O += P V run with f16
 * operands (Q and P rounded) and f32 accumulation; the softmax is online per row. Two kernels,
 * chosen by paged_attention_prefill_variant (production: v3; the first, v1, is the kernel lab's:
 * tests/kbench/prefill_v1.cuh, ~60 TFLOP/s on an H200 at depth 16384):
 *   v2: mma.sync, 128 rows a block in two warp groups that split the key tiles between them,
 *       cp.async double buffering, ldmatrix fragments, exp2 softmax; ~290 TFLOP/s at 16384.
 *   v3 (production; sm_90a, v2 elsewhere): wgmma, 128 rows a block in two warpgroups sharing a
 *       4-stage cp.async ring, P V of one tile overlapping the softmax of the next; ~430 TFLOP/s
 *       at 16384 (PERF-LOG run 31). */
#include <math.h>
#include <cuda_fp16.h>
#include "kernels/paged.h"
#include "kernels/optin.cuh"
#include "kernels/prefill.cuh"

/* ---- v2 -------------------------------------------------------------------------------------
 * Block = FA_ROWS (128) rows of one kv head, FA_WG (2) warp groups of 4 warps. Each warp owns 32
 * rows (two m16 tiles), so every K or V fragment read from shared memory feeds two mma; group w
 * walks the key tiles i = w, w + 2, ... (a split of the keys inside the block: a 512-token pass
 * of an 8b model is only 128 blocks, ~1 per SM, and the second group doubles the warps that
 * hide each other's latency), and the two partial softmax states are merged through shared
 * memory at the end. A key tile is one page (FA_KT = PAGED_PAGE positions); each group copies its
 * tiles with cp.async into a ring of two stages, the next tile's copy in flight while this one is
 * used, one named barrier per tile. Q, scaled by scale * log2(e) (the softmax runs on exp2), sits
 * in shared memory as f16 and is read with ldmatrix each tile (32 rows of O and S leave no
 * registers for it); K fragments come from ldmatrix.x4, V fragments from ldmatrix.x4.trans (V is
 * [position][dim], the P V product wants pairs along positions); rows are padded by 8 halves so
 * the 8 row addresses of each 8x8 matrix fall in distinct banks. Tiles wholly past a warp's rows
 * are skipped, only tiles that cross the diagonal are masked, and P V stops at the last 16-key
 * block holding a key for the warp. O is rescaled only when some row maximum of the warp moved
 * (multiplying by exactly 1 is skipped: same bits). The order of every sum is fixed and there
 * are no atomics, so a rerun is bit-identical.
 * Cost per 64-key tile and warp: 256 mma, 80 ldmatrix.x4 (160 B of shared memory per mma, where
 * 16 rows a warp would read 256), 64 exp2. Shared memory (head_dim 128): Q 34 KB + 2 groups x 2
 * stages x (K + V) 34 KB = 170 KB, one block per SM, up to 255 registers a thread. */
#define FA_WG 2                                     /* warp groups a block */
#define FA_WG_THREADS 128                           /* threads a group (named barriers count them) */
#define FA_WARP_ROWS 32                             /* rows a warp */
#define FA_ROWS (FA_WG_THREADS / 32 * FA_WARP_ROWS) /* rows a block */
#define FA_KT PAGED_PAGE                            /* keys a tile: tile i is page i of the table */
#define FA_THREADS (FA_WG * FA_WG_THREADS)
static_assert(FA_KT == 64, "v2 and v3 are written for 64-key tiles (v3: wgmma n64, four k16 blocks of P)");

/* Shared-memory layout in halves: Q [FA_ROWS][DS], then per group a ring of two stages of K
 * [FA_KT][DS] and V [FA_KT][DS]. After the key loop the rings hold the merge exchange: XCH floats
 * per thread of group 1, [value][thread] so that both sides access consecutive words. */
template <int D> struct fa_layout {
    static constexpr int DS = D + 8;
    static constexpr int TILE = FA_KT * DS;
    static constexpr int STAGE = 2 * TILE;
    static constexpr int RING = 2 * STAGE;
    static constexpr int Q = FA_ROWS * DS;
    static constexpr size_t BYTES = (size_t)(Q + FA_WG * RING) * sizeof(__half);
    static constexpr int NO = 2 * (D / 8) * 4;      /* O accumulators a thread */
    static constexpr int XCH = NO + 8;              /* and m, l of its four rows */
    static_assert((size_t)XCH * FA_WG_THREADS * sizeof(float) <= (size_t)FA_WG * RING * sizeof(__half),
                  "the merge exchange must fit in the rings");
};

__device__ __forceinline__ uint32_t fa_saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, asynchronous; in == false writes 16 zero bytes and reads nothing. */
__device__ __forceinline__ void fa_cp16(uint32_t dst, const void *src, bool in) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(in ? 16 : 0) : "memory");
}
__device__ __forceinline__ void fa_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void fa_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

/* Barrier of one warp group (ids 1 and 2; 0 is __syncthreads). */
__device__ __forceinline__ void fa_group_sync(int id) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(FA_WG_THREADS) : "memory");
}

/* Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and lane l receives
 * row l/4, columns 2(l%4), +1 of each (with .trans: column l/4, rows 2(l%4), +1). */
__device__ __forceinline__ void fa_ldsm(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void fa_ldsm_t(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

/* pf_mma without volatile: a pure function of its registers, so the compiler may interleave the
 * products with the fragment loads as it likes. */
__device__ __forceinline__ void fa_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* 2^x (MUFU); 2^-inf = +0. */
__device__ __forceinline__ float fa_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <int D, bool RC>
__global__ void __launch_bounds__(FA_THREADS, 1) paged_attn_prefill2_kernel(float *out, const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *pages, int pos0, int n_tok, int n_head,
        int n_kv_head, float qscale, int window, float cap2) {
    using lay = fa_layout<D>;
    constexpr int DS = lay::DS, NT = FA_KT / 8; /* n8 tiles of keys a tile */
    extern __shared__ __align__(16) unsigned char fa_smem[];
    __half *qs = (__half *)fa_smem;
    const int tid = threadIdx.x, wg = tid / FA_WG_THREADS, wt = tid % FA_WG_THREADS;
    const int warp = wt >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int kvh = blockIdx.y, G = n_head / n_kv_head, rows = n_tok * G;
    /* the last rows see the most keys: their blocks start first, so the short ones fill the tail */
    const int row0 = (int)(gridDim.x - 1 - blockIdx.x) * FA_ROWS;
    const int kv_end = pos0 + (min(rows, row0 + FA_ROWS) - 1) / G + 1; /* keys the block reads: [0, kv_end) */
    /* RC, a windowed layer: no row of the block sees a key before its first row's window, so the
     * tiles wholly before it are skipped; tile i of the loop is page tile0 + i */
    const int tile0 = RC && window > 0 ? max(0, pos0 + row0 / G - window + 1) / FA_KT : 0;
    const int n_tiles = (kv_end + FA_KT - 1) / FA_KT - tile0;
    const int my_tiles = (n_tiles - wg + 1) / 2; /* tiles wg, wg + 2, ... below n_tiles */
    const int64_t kv_dim = (int64_t)n_kv_head * D;

    /* Copy of tile i (page i of the table) into stage st of this group's ring: thread wt copies
     * 16-byte chunk ce of rows cr, cr + RPI, ... of K and V. Positions from kv_end on are zeros
     * (their cells may hold anything not yet written, and 0 * NaN would reach O). */
    constexpr int CPR = D / 8, RPI = FA_WG_THREADS / CPR;
    const int cr = wt / CPR, ce = (wt % CPR) * 8;
    const char *kg = (const char *)(kc + (int64_t)kvh * D + (int64_t)cr * kv_dim + ce);
    const char *vg = (const char *)(vc + (int64_t)kvh * D + (int64_t)cr * kv_dim + ce);
    const int64_t page_bytes = (int64_t)PAGED_PAGE * kv_dim * 2, row_bytes = (int64_t)RPI * kv_dim * 2;
    const uint32_t ring = fa_saddr(qs + lay::Q + wg * lay::RING);
    const uint32_t sdst = ring + (uint32_t)(cr * DS + ce) * 2;
    auto issue = [&](int i, int st) {
        const int64_t at = pages[tile0 + i] * page_bytes;
        const int left = kv_end - (tile0 + i) * FA_KT - cr; /* rows u * RPI below this are in range */
        const uint32_t dk = sdst + (uint32_t)st * lay::STAGE * 2, dv = dk + lay::TILE * 2;
#pragma unroll
        for (int u = 0; u < FA_KT / RPI; u++) {
            const bool in = u * RPI < left;
            fa_cp16(dk + u * RPI * DS * 2, kg + at + u * row_bytes, in);
            fa_cp16(dv + u * RPI * DS * 2, vg + at + u * row_bytes, in);
        }
        fa_commit();
    };
    if (my_tiles > 0) issue(wg, 0);

    /* Q of the block's rows, scaled, f16 (zeros past the last row), while the first tiles load */
    for (int c = tid; c < FA_ROWS * (D / 2); c += FA_THREADS) {
        const int r = c / (D / 2), e = (c % (D / 2)) * 2, row = row0 + r;
        float2 v = make_float2(0.0f, 0.0f);
        if (row < rows) v = *(const float2 *)(q + ((int64_t)(row / G) * n_head + kvh * G + row % G) * D + e);
        *(uint32_t *)(qs + r * DS + e) = pf_pack(v.x * qscale, v.y * qscale);
    }
    __syncthreads();

    /* The thread's rows: wrow + 16 mi + g + 8 h (mi: m16 tile, h: upper or lower half), each
     * seeing keys 0..lim; rows past the last are computed as the last row and never stored. */
    const int wrow = row0 + warp * FA_WARP_ROWS;
    const int lim_lo = pos0 + min(wrow, rows - 1) / G;                               /* every row sees 0..lim_lo */
    const int lim_hi = wrow < rows ? pos0 + min(wrow + FA_WARP_ROWS - 1, rows - 1) / G : -1; /* no row sees more */
    /* per-lane ldmatrix addresses (bytes): Q rows of the m16 tile, column block lane / 16 (A
     * fragment: matrices rows 0-7 / 8-15 x columns 0-7 / 8-15); K rows = keys of two n8 tiles,
     * column block (lane / 8) % 2 (B fragments of n8 tiles 2nn and 2nn + 1); V rows = 16 keys,
     * column block lane / 16 (transposed: B fragments of dimension tiles 2dn and 2dn + 1) */
    const uint32_t q_a = fa_saddr(qs + (warp * FA_WARP_ROWS + (lane & 15)) * DS + (lane >> 4) * 8);
    const uint32_t k_off = (uint32_t)((((lane >> 4) << 3) + (lane & 7)) * DS + ((lane >> 3) & 1) * 8) * 2;
    const uint32_t v_off = (uint32_t)((lane & 15) * DS + (lane >> 4) * 8) * 2;

    float o[2][D / 8][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int n = 0; n < D / 8; n++) o[mi][n][0] = o[mi][n][1] = o[mi][n][2] = o[mi][n][3] = 0.0f;
    float m[2][2], l[2][2];
#pragma unroll
    for (int mi = 0; mi < 2; mi++) m[mi][0] = m[mi][1] = -INFINITY, l[mi][0] = l[mi][1] = 0.0f;

    for (int j = 0; j < my_tiles; j++) {
        const int i = wg + 2 * j, st = j & 1, p0 = (tile0 + i) * FA_KT;
        fa_wait_all();
        /* tile j landed for the whole group, and every warp of it is done with stage st ^ 1 */
        fa_group_sync(1 + wg);
        if (j + 1 < my_tiles) issue(i + 2, st ^ 1);
        if (p0 > lim_hi) continue; /* every key of the tile is past every row of the warp */
        const uint32_t k_a = ring + (uint32_t)st * lay::STAGE * 2 + k_off;
        const uint32_t v_a = ring + (uint32_t)(st * lay::STAGE + lay::TILE) * 2 + v_off;

        /* S = Q K^T (log2 units) */
        float s[2][NT][4];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int n = 0; n < NT; n++) s[mi][n][0] = s[mi][n][1] = s[mi][n][2] = s[mi][n][3] = 0.0f;
#pragma unroll
        for (int kd = 0; kd < D / 16; kd++) {
            uint32_t a0[4], a1[4];
            fa_ldsm(a0, q_a + kd * 16 * 2);
            fa_ldsm(a1, q_a + (16 * DS + kd * 16) * 2);
#pragma unroll
            for (int nn = 0; nn < NT / 2; nn++) {
                uint32_t b[4];
                fa_ldsm(b, k_a + (nn * 16 * DS + kd * 16) * 2);
                fa_mma(s[0][2 * nn], a0, b[0], b[1]);
                fa_mma(s[0][2 * nn + 1], a0, b[2], b[3]);
                fa_mma(s[1][2 * nn], a1, b[0], b[1]);
                fa_mma(s[1][2 * nn + 1], a1, b[2], b[3]);
            }
        }
        if constexpr (RC) { /* the softcap (log2 units: cap2 = cap log2(e)), then the window's mask */
            if (cap2 > 0.0f)
#pragma unroll
                for (int mi = 0; mi < 2; mi++)
#pragma unroll
                    for (int n = 0; n < NT; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++) s[mi][n][e] = cap2 * tanhf(s[mi][n][e] / cap2);
            if (window > 0)
#pragma unroll
                for (int mi = 0; mi < 2; mi++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        /* the row's first key, relative to the thread's first column 2t of the tile */
                        const int lo = pos0 + min(wrow + 16 * mi + 8 * h + g, rows - 1) / G - window + 1 - p0 - 2 * t;
#pragma unroll
                        for (int n = 0; n < NT; n++) {
                            if (8 * n < lo) s[mi][n][2 * h] = -INFINITY;
                            if (8 * n + 1 < lo) s[mi][n][2 * h + 1] = -INFINITY;
                        }
                    }
        }
        /* causal mask, only where the tile crosses the diagonal of the warp's rows */
        if (p0 + FA_KT - 1 > lim_lo) {
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    /* keys past lim, relative to the thread's first column 2t of the tile */
                    const int lim = pos0 + min(wrow + 16 * mi + 8 * h + g, rows - 1) / G - p0 - 2 * t;
#pragma unroll
                    for (int n = 0; n < NT; n++) {
                        if (8 * n > lim) s[mi][n][2 * h] = -INFINITY;
                        if (8 * n + 1 > lim) s[mi][n][2 * h + 1] = -INFINITY;
                    }
                }
        }
        /* online softmax: each row's maximum over its quad of lanes */
        float corr[2][2];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float mx = m[mi][h];
#pragma unroll
                for (int n = 0; n < NT; n++) mx = fmaxf(mx, fmaxf(s[mi][n][2 * h], s[mi][n][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float sub = mx == -INFINITY ? 0.0f : mx; /* a row with no key yet keeps zeros */
                corr[mi][h] = mx == m[mi][h] ? 1.0f : fa_exp2(m[mi][h] - sub);
                m[mi][h] = mx;
                float rs = 0.0f;
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    s[mi][n][2 * h] = fa_exp2(s[mi][n][2 * h] - sub);
                    s[mi][n][2 * h + 1] = fa_exp2(s[mi][n][2 * h + 1] - sub);
                    rs += s[mi][n][2 * h] + s[mi][n][2 * h + 1];
                }
                l[mi][h] = l[mi][h] * corr[mi][h] + rs;
            }
        if (!__all_sync(0xffffffffu, corr[0][0] == 1.0f && corr[0][1] == 1.0f && corr[1][0] == 1.0f &&
                                         corr[1][1] == 1.0f)) {
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int n = 0; n < D / 8; n++) {
                    o[mi][n][0] *= corr[mi][0];
                    o[mi][n][1] *= corr[mi][0];
                    o[mi][n][2] *= corr[mi][1];
                    o[mi][n][3] *= corr[mi][1];
                }
        }
        /* O += P V, P as f16 A fragments straight from the S accumulators */
#pragma unroll
        for (int kk = 0; kk < FA_KT / 16; kk++) {
            if (p0 + 16 * kk > lim_hi) break; /* P is zero from here on for every row of the warp */
            uint32_t pa[2][4];
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                pa[mi][0] = pf_pack(s[mi][2 * kk][0], s[mi][2 * kk][1]);
                pa[mi][1] = pf_pack(s[mi][2 * kk][2], s[mi][2 * kk][3]);
                pa[mi][2] = pf_pack(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
                pa[mi][3] = pf_pack(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dn = 0; dn < D / 16; dn++) {
                uint32_t b[4];
                fa_ldsm_t(b, v_a + (kk * 16 * DS + dn * 16) * 2);
                fa_mma(o[0][2 * dn], pa[0], b[0], b[1]);
                fa_mma(o[0][2 * dn + 1], pa[0], b[2], b[3]);
                fa_mma(o[1][2 * dn], pa[1], b[0], b[1]);
                fa_mma(o[1][2 * dn + 1], pa[1], b[2], b[3]);
            }
        }
    }

    /* Merge: group 1 leaves its O, m and l (row sums over the quad) in the rings, group 0 folds
     * them into its own and writes the rows. */
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            l[mi][h] += __shfl_xor_sync(0xffffffffu, l[mi][h], 1);
            l[mi][h] += __shfl_xor_sync(0xffffffffu, l[mi][h], 2);
        }
    __syncthreads(); /* both groups are done with their rings (no copy is left in flight) */
    float *xch = (float *)(qs + lay::Q) + wt;
    if (wg == 1) {
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int n = 0; n < D / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) xch[((mi * (D / 8) + n) * 4 + e) * FA_WG_THREADS] = o[mi][n][e];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                xch[(lay::NO + 4 * mi + 2 * h) * FA_WG_THREADS] = m[mi][h];
                xch[(lay::NO + 4 * mi + 2 * h + 1) * FA_WG_THREADS] = l[mi][h];
            }
    }
    __syncthreads();
    if (wg == 1) return;
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = wrow + 16 * mi + 8 * h + g;
            const float m1 = xch[(lay::NO + 4 * mi + 2 * h) * FA_WG_THREADS];
            const float l1 = xch[(lay::NO + 4 * mi + 2 * h + 1) * FA_WG_THREADS];
            const float mx = fmaxf(m[mi][h], m1);
            const float f0 = m[mi][h] == -INFINITY ? 0.0f : fa_exp2(m[mi][h] - mx);
            const float f1 = m1 == -INFINITY ? 0.0f : fa_exp2(m1 - mx);
            const float den = l[mi][h] * f0 + l1 * f1, inv = den > 0.0f ? 1.0f / den : 0.0f;
            if (r >= rows) continue;
            float *dst = out + ((int64_t)(r / G) * n_head + kvh * G + r % G) * D + 2 * t;
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                const float x0 = xch[((mi * (D / 8) + n) * 4 + 2 * h) * FA_WG_THREADS];
                const float x1 = xch[((mi * (D / 8) + n) * 4 + 2 * h + 1) * FA_WG_THREADS];
                *(float2 *)(dst + 8 * n) = make_float2((o[mi][n][2 * h] * f0 + x0 * f1) * inv,
                                                      (o[mi][n][2 * h + 1] * f0 + x1 * f1) * inv);
            }
        }
}

template <int D, bool RC>
static cudaError_t pf2_launch(float *out, const float *q, const uint16_t *kc, const uint16_t *vc,
                              const int32_t *pages, int pos0, int n_tok, int n_head, int n_kv_head, float scale,
                              int window, float softcap, cudaStream_t stream) {
    cudaError_t e = smem_optin<paged_attn_prefill2_kernel<D, RC>>(); /* above the 48 KB default */
    if (e != cudaSuccess) return e;
    const int rows = n_tok * (n_head / n_kv_head);
    dim3 grid((unsigned)((rows + FA_ROWS - 1) / FA_ROWS), (unsigned)n_kv_head);
    paged_attn_prefill2_kernel<D, RC><<<grid, FA_THREADS, fa_layout<D>::BYTES, stream>>>(
        out, q, kc, vc, pages, pos0, n_tok, n_head, n_kv_head, scale * 1.4426950408889634f, window,
        softcap * 1.4426950408889634f);
    return cudaGetLastError();
}

/* ---- v3 (experimental, sm_90a) ---------------------------------------------------------------
 * The same attention with wgmma (FlashAttention-3 style, without its producer warps): block =
 * F3_ROWS (128) rows of one kv head, two warpgroups of 64 rows that share every K/V tile. Per
 * tile and warpgroup, S = Q K^T is one wgmma.m64n64k16 per 16 dimensions (Q and K from shared
 * memory), O += P V one wgmma.m64n{D}k16 per 16 keys (P from registers: the S accumulators of a
 * warp's 16 rows, rounded to f16, are exactly the A fragment it needs; V from shared memory,
 * transposed). Pipelined inside each warpgroup: P V of tile j and Q K^T of tile j + 1 are issued
 * together, so the softmax of tile j + 1 (exp2, on the CUDA cores) runs while the tensor cores do
 * P V of tile j; O is rescaled after that product retires. K and V tiles go through a ring of
 * F3_STAGES stages filled by cp.async, two tiles ahead, one barrier per tile (as gemm_v4).
 *
 * Shared memory: every matrix is kept in 64-dimension panels of 128-byte rows with the 128-byte
 * swizzle (16-byte piece p of row r at p ^ (r & 7), panels 1024-byte aligned): Q [D / 64][128
 * rows], K and V [D / 64][64 keys] per stage. Descriptors (PTX ISA 9.7.15.5.1.2.2; gemm_panel.cuh
 * has the field layout): Q and K are K-major (the reduction runs along the row): SBO 1024 (8-row
 * groups), LBO unused; a k16 step is 32 bytes further along the row, in panel kk / 4. V is read
 * MN-major (the reduction runs over keys, down the rows; CUTLASS's canonical SW128 MN-major
 * layout ((8,8,m),(8,k)):((1,8,LBO),(64,SBO)) in f16 units): SBO 1024 (8-key groups), LBO 8192
 * (the next 64-dimension panel); a k16 step is 16 rows = 2048 bytes further.
 * Fragments (PTX ISA 9.7.15.5.1.1): accumulator d[i] of thread 4g + t of warp w4 in the
 * warpgroup is row 16 w4 + g + 8 ((i >> 1) & 1), column 8 (i >> 2) + 2 t + (i & 1), the same
 * places as m16n8k16's C fragments of n8 tile i >> 2, so the softmax is v2's; the A fragment in
 * registers is m16n8k16's A layout for the warp's 16 rows.
 * Ordering: cp.async writes (generic proxy) are published to wgmma (async proxy) by each thread's
 * fence.proxy.async after its cp.async.wait_group, before the barrier; registers read or written
 * by a wgmma in flight (P, O, S) are pinned with empty volatile asm after the wgmma.wait_group
 * that retires it, so the compiler neither reuses nor touches them early. A stage is refilled
 * right after the barrier of tile j, with tile j + 3 into tile j - 1's stage: every warpgroup
 * retired that tile's P V before reaching the barrier. */
#define F3_ROWS 128
#define F3_THREADS 256
#define F3_STAGES 4

template <int D> struct f3_layout {
    static constexpr int PANELS = D / 64;            /* 64-dimension column panels */
    static constexpr int QP = F3_ROWS * 128;         /* bytes of a Q panel */
    static constexpr int KVP = FA_KT * 128;          /* bytes of a K or V panel */
    static constexpr int Q = PANELS * QP;
    static constexpr int STAGE = 2 * PANELS * KVP;   /* K panels, then V panels */
    static constexpr size_t BYTES = (size_t)Q + F3_STAGES * STAGE + 1024; /* + the 1024-byte alignment */
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Matrix descriptor: start address, LBO, SBO 1024, 128-byte swizzle, base offset 0. */
__device__ __forceinline__ uint64_t f3_desc(uint32_t saddr, uint32_t lbo) {
    return (1ull << 62) | (64ull << 32) | ((uint64_t)(lbo >> 4) << 16) | (uint64_t)((saddr & 0x3FFFF) >> 4);
}
__device__ __forceinline__ void f3_fence_proxy() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void f3_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void f3_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void f3_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void f3_cp_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void f3_pin(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void f3_pin(uint32_t (&p)[4][4]) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) asm volatile("" : "+r"(p[i][j])::"memory");
}

#define F3_F8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                 "+f"(d[i + 6]), "+f"(d[i + 7])
#define F3_F32(i) F3_F8(i), F3_F8(i + 8), F3_F8(i + 16), F3_F8(i + 24)

/* S (+)= Q K^T for one k16 step, m64n64k16, A and B from shared memory (K-major, 128-byte
 * swizzle); ACC 0 overwrites S (scale-d false), 1 accumulates. */
template <int ACC>
__device__ __forceinline__ void f3_mma_qk(float (&d)[32], uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : F3_F32(0)
                 : "l"(da), "l"(db), "n"(ACC)
                 : "memory");
}

/* O += P V for one k16 step (16 keys), m64n64k16: P from registers (each warp's 16 rows as
 * the m16n8k16 A fragment), V from shared memory, MN-major (imm-trans-b 1). */
__device__ __forceinline__ void f3_mma_pv(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : F3_F32(0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db)
                 : "memory");
}

/* O += P V for one k16 step (16 keys), m64n128k16: P from registers (each warp's 16 rows as
 * the m16n8k16 A fragment), V from shared memory, MN-major (imm-trans-b 1). */
__device__ __forceinline__ void f3_mma_pv(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : F3_F32(0), F3_F32(32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db)
                 : "memory");
}
#endif

template <int D, bool RC>
__global__ void __launch_bounds__(F3_THREADS, 1) paged_attn_prefill3_kernel(float *out, const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *pages, int pos0, int n_tok, int n_head,
        int n_kv_head, float qscale, int window, float cap2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using lay = f3_layout<D>;
    constexpr int NO = D / 2, KS = D / 16; /* O accumulators a thread; k16 steps of Q K^T */
    extern __shared__ uint8_t f3_smem[];
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(f3_smem), sq = (raw + 1023u) & ~1023u;
    uint8_t *q_smem = f3_smem + (sq - raw);
    const uint32_t sring = sq + lay::Q;
    const int tid = threadIdx.x, wg = tid >> 7, w4 = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int kvh = blockIdx.y, G = n_head / n_kv_head, rows = n_tok * G;
    const int row0 = (int)(gridDim.x - 1 - blockIdx.x) * F3_ROWS; /* the longest rows first, as v2 */
    const int kv_end = pos0 + (min(rows, row0 + F3_ROWS) - 1) / G + 1;
    /* RC, a windowed layer: the tiles wholly before the block's first row's window are skipped
     * (v2's); tile i of the loop is page tile0 + i */
    const int tile0 = RC && window > 0 ? max(0, pos0 + row0 / G - window + 1) / FA_KT : 0;
    const int n_tiles = (kv_end + FA_KT - 1) / FA_KT - tile0;
    const int64_t kv_dim = (int64_t)n_kv_head * D;

    /* Copy of tile i (page i) into stage i % F3_STAGES, or an empty group past the last tile (the
     * wait counts stay uniform): thread tid copies 16-byte piece cc of rows cr + u * RPI of K and
     * V (RPI a multiple of 8, so every row it writes has the swizzle of row cr); positions from
     * kv_end on are zeros, as in v2. */
    constexpr int CPR = D / 8, RPI = F3_THREADS / CPR;
    const int cr = tid / CPR, cc = tid % CPR;
    const char *kg = (const char *)(kc + (int64_t)kvh * D + (int64_t)cr * kv_dim + cc * 8);
    const char *vg = (const char *)(vc + (int64_t)kvh * D + (int64_t)cr * kv_dim + cc * 8);
    const int64_t page_bytes = (int64_t)PAGED_PAGE * kv_dim * 2, row_bytes = (int64_t)RPI * kv_dim * 2;
    const uint32_t doff = (uint32_t)((cc >> 3) * lay::KVP + cr * 128 + (((cc & 7) ^ (cr & 7)) << 4));
    auto issue = [&](int i) {
        if (i < n_tiles) {
            const int64_t at = pages[tile0 + i] * page_bytes;
            const int left = kv_end - (tile0 + i) * FA_KT - cr;
            const uint32_t dk = sring + (uint32_t)(i % F3_STAGES) * lay::STAGE + doff, dv = dk + lay::PANELS * lay::KVP;
#pragma unroll
            for (int u = 0; u < FA_KT / RPI; u++) {
                const bool in = u * RPI < left;
                fa_cp16(dk + u * RPI * 128, kg + at + u * row_bytes, in);
                fa_cp16(dv + u * RPI * 128, vg + at + u * row_bytes, in);
            }
        }
        fa_commit();
    };
    issue(0);
    issue(1);
    issue(2);

    /* Q of the block's rows, scaled, f16, swizzled: (row r, dimension e) in panel e / 64, row r,
     * piece ((e % 64) / 8) ^ (r & 7) */
    for (int c = tid; c < F3_ROWS * (D / 2); c += F3_THREADS) {
        const int r = c / (D / 2), e = (c % (D / 2)) * 2, row = row0 + r;
        float2 v = make_float2(0.0f, 0.0f);
        if (row < rows) v = *(const float2 *)(q + ((int64_t)(row / G) * n_head + kvh * G + row % G) * D + e);
        const int off = (e >> 6) * lay::QP + r * 128 + ((((e & 63) >> 3) ^ (r & 7)) << 4) + (e & 7) * 2;
        *(uint32_t *)(q_smem + off) = pf_pack(v.x * qscale, v.y * qscale);
    }

    /* The thread's rows: wrow + 16 w4 + g + 8 h; keys up to lim (rows past the last: as the last). */
    const int wrow = row0 + 64 * wg;
    const int lim_lo = pos0 + min(wrow, rows - 1) / G; /* every row of the warpgroup sees 0..lim_lo */
    const uint32_t qa = sq + wg * 64 * 128;            /* the warpgroup's 64 rows of each Q panel */
    float o[NO], s[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < NO; i++) o[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; i++) s[i] = 0.0f;
    auto qk = [&](int i) { /* S = Q K_i^T, issued */
        const uint32_t kb = sring + (uint32_t)(i % F3_STAGES) * lay::STAGE;
        f3_mma_qk<0>(s, f3_desc(qa, 16), f3_desc(kb, 16));
#pragma unroll
        for (int kk = 1; kk < KS; kk++)
            f3_mma_qk<1>(s, f3_desc(qa + (kk >> 2) * lay::QP + 32 * (kk & 3), 16),
                         f3_desc(kb + (kk >> 2) * lay::KVP + 32 * (kk & 3), 16));
    };
    auto pv = [&](int i, const uint32_t (&p)[4][4]) { /* O += P V_i, issued */
        const uint32_t vb = sring + (uint32_t)(i % F3_STAGES) * lay::STAGE + lay::PANELS * lay::KVP;
#pragma unroll
        for (int kk = 0; kk < FA_KT / 16; kk++) f3_mma_pv(o, p[kk], f3_desc(vb + kk * 16 * 128, lay::KVP));
    };
    /* Softmax of tile i: P into p, and corr, the factor O must take for each of the two rows. S
     * is only read: ptxas serialises every wgmma of a pipeline stage in which other instructions
     * write a wgmma accumulator, and P V is still in flight here. */
    auto softmax = [&](int i, uint32_t (&p)[4][4], float corr[2]) {
        const int p0 = (tile0 + i) * FA_KT;
        float x[32];
#pragma unroll
        for (int k = 0; k < 32; k++) x[k] = s[k];
        if constexpr (RC) { /* v2's softcap and window mask */
            if (cap2 > 0.0f)
#pragma unroll
                for (int k = 0; k < 32; k++) x[k] = cap2 * tanhf(x[k] / cap2);
            if (window > 0)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int lo = pos0 + min(wrow + 16 * w4 + 8 * h + g, rows - 1) / G - window + 1 - p0 - 2 * t;
#pragma unroll
                    for (int n = 0; n < FA_KT / 8; n++) {
                        if (8 * n < lo) x[4 * n + 2 * h] = -INFINITY;
                        if (8 * n + 1 < lo) x[4 * n + 2 * h + 1] = -INFINITY;
                    }
                }
        }
        if (p0 + FA_KT - 1 > lim_lo) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int lim = pos0 + min(wrow + 16 * w4 + 8 * h + g, rows - 1) / G - p0 - 2 * t;
#pragma unroll
                for (int n = 0; n < FA_KT / 8; n++) {
                    if (8 * n > lim) x[4 * n + 2 * h] = -INFINITY;
                    if (8 * n + 1 > lim) x[4 * n + 2 * h + 1] = -INFINITY;
                }
            }
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float mx = m[h];
#pragma unroll
            for (int n = 0; n < FA_KT / 8; n++) mx = fmaxf(mx, fmaxf(x[4 * n + 2 * h], x[4 * n + 2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float sub = mx == -INFINITY ? 0.0f : mx;
            corr[h] = mx == m[h] ? 1.0f : fa_exp2(m[h] - sub);
            m[h] = mx;
            float rs = 0.0f;
#pragma unroll
            for (int n = 0; n < FA_KT / 8; n++) {
                x[4 * n + 2 * h] = fa_exp2(x[4 * n + 2 * h] - sub);
                x[4 * n + 2 * h + 1] = fa_exp2(x[4 * n + 2 * h + 1] - sub);
                rs += x[4 * n + 2 * h] + x[4 * n + 2 * h + 1];
            }
            l[h] = l[h] * corr[h] + rs;
        }
#pragma unroll
        for (int kk = 0; kk < FA_KT / 16; kk++)
#pragma unroll
            for (int r = 0; r < 4; r++) p[kk][r] = pf_pack(x[8 * kk + 2 * r], x[8 * kk + 2 * r + 1]);
    };
    /* Tile j: P V of tile j (P in pc) and Q K^T of tile j + 1 issued together, then the softmax of
     * tile j + 1 into pn while P V runs, then O rescaled once P V has retired. */
    auto step = [&](int j, uint32_t (&pc)[4][4], uint32_t (&pn)[4][4]) {
        const bool more = j + 1 < n_tiles;
        f3_cp_wait<1>(); /* this thread's copies of tile j + 1 */
        f3_fence_proxy();
        __syncthreads(); /* everyone's; every warpgroup has retired tile j - 1's P V */
        issue(j + 3);    /* into tile j - 1's stage */
        f3_pin(o);
        f3_pin(pc);
        f3_pin(s);
        /* after the last tile S of the last tile again, unused: a branch around the wgmma would
         * cost a warpgroup.arrive that ptxas adds at the join */
        f3_wgmma_fence();
        qk(more ? j + 1 : j);
        f3_commit();
        pv(j, pc);
        f3_commit();
        f3_wait<1>(); /* S of tile j + 1 is done, P V of tile j may still run */
        f3_pin(s);
        float corr[2] = {1.0f, 1.0f};
        if (more) softmax(j + 1, pn, corr);
        f3_wait<0>();
        f3_pin(o);
        f3_pin(pc);
        if (!__all_sync(0xffffffffu, corr[0] == 1.0f && corr[1] == 1.0f)) {
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                o[4 * n] *= corr[0];
                o[4 * n + 1] *= corr[0];
                o[4 * n + 2] *= corr[1];
                o[4 * n + 3] *= corr[1];
            }
        }
    };

    /* tile 0: S and its softmax (O is zero, nothing to rescale); then the tiles two at a time, so
     * that the two P buffers swap roles without copies */
    uint32_t pa[4][4], pb[4][4];
    f3_cp_wait<2>();
    f3_fence_proxy(); /* this thread's tile-0 copies and Q stores, visible to wgmma */
    __syncthreads();
    {
        f3_wgmma_fence();
        qk(0);
        f3_commit();
        f3_wait<0>();
        f3_pin(s);
        float corr[2];
        softmax(0, pa, corr);
    }
    for (int j = 0; j < n_tiles; j += 2) {
        step(j, pa, pb);
        if (j + 1 < n_tiles) step(j + 1, pb, pa);
    }
    f3_cp_wait<0>(); /* only empty groups can be left; none may target shared memory at exit */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const int r = wrow + 16 * w4 + 8 * h + g;
        if (r >= rows) continue;
        const float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
        float *dst = out + ((int64_t)(r / G) * n_head + kvh * G + r % G) * D + 2 * t;
#pragma unroll
        for (int n = 0; n < D / 8; n++) *(float2 *)(dst + 8 * n) = make_float2(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
    }
#else
    __trap(); /* the launcher runs v3 only where the sm_90a code is */
#endif
}

/* wgmma runs on compute capability 9.0 only (optin.cuh's wgmma_device); elsewhere v3 falls back
 * to v2. */
template <int D, bool RC>
static cudaError_t pf3_launch(float *out, const float *q, const uint16_t *kc, const uint16_t *vc,
                              const int32_t *pages, int pos0, int n_tok, int n_head, int n_kv_head, float scale,
                              int window, float softcap, cudaStream_t stream) {
    if (!wgmma_device())
        return pf2_launch<D, RC>(out, q, kc, vc, pages, pos0, n_tok, n_head, n_kv_head, scale, window, softcap, stream);
    cudaError_t e = smem_optin<paged_attn_prefill3_kernel<D, RC>>();
    if (e != cudaSuccess) return e;
    const int rows = n_tok * (n_head / n_kv_head);
    dim3 grid((unsigned)((rows + F3_ROWS - 1) / F3_ROWS), (unsigned)n_kv_head);
    paged_attn_prefill3_kernel<D, RC><<<grid, F3_THREADS, f3_layout<D>::BYTES, stream>>>(
        out, q, kc, vc, pages, pos0, n_tok, n_head, n_kv_head, scale * 1.4426950408889634f, window,
        softcap * 1.4426950408889634f);
    return cudaGetLastError();
}

extern "C" int paged_attention_prefill_supported(int n_head, int n_kv_head, int head_dim) {
    if (n_head <= 0 || n_kv_head <= 0 || n_head % n_kv_head) return 0;
    const int G = n_head / n_kv_head;
    return (head_dim == 64 || head_dim == 128) && 16 % G == 0;
}

static int prefill_args_ok(int variant, int pos0, int n_tok, int n_head, int n_kv_head, int head_dim) {
    return variant >= 2 && variant <= 3 && paged_attention_prefill_supported(n_head, n_kv_head, head_dim) &&
           n_tok > 0 && pos0 >= 0 && n_kv_head <= 65535 &&
           (int64_t)n_tok * (n_head / n_kv_head) <= INT32_MAX - FA_ROWS && (int64_t)pos0 + n_tok <= INT32_MAX - FA_KT;
}

extern "C" cudaError_t paged_attention_prefill_variant(int variant, float *out, const float *q,
                                                       const uint16_t *k_cache, const uint16_t *v_cache,
                                                       const int32_t *pages, int pos0, int n_tok, int n_head,
                                                       int n_kv_head, int head_dim, float scale, cudaStream_t stream) {
    if (!prefill_args_ok(variant, pos0, n_tok, n_head, n_kv_head, head_dim)) return cudaErrorInvalidValue;
    auto launch = variant == 3 ? (head_dim == 128 ? pf3_launch<128, false> : pf3_launch<64, false>)
                               : (head_dim == 128 ? pf2_launch<128, false> : pf2_launch<64, false>);
    return launch(out, q, k_cache, v_cache, pages, pos0, n_tok, n_head, n_kv_head, scale, 0, 0.0f, stream);
}

/* The kernels' RC instances: the window's mask and the softcap compiled in only there, so the
 * plain layers' kernels stay as they were. */
extern "C" cudaError_t paged_attention_prefill_recipe(int variant, float *out, const float *q,
                                                      const uint16_t *k_cache, const uint16_t *v_cache,
                                                      const int32_t *pages, int pos0, int n_tok, int n_head,
                                                      int n_kv_head, int head_dim, float scale, int window,
                                                      float softcap, cudaStream_t stream) {
    if (!prefill_args_ok(variant, pos0, n_tok, n_head, n_kv_head, head_dim) || window < 0 || !(softcap >= 0.0f))
        return cudaErrorInvalidValue;
    auto launch = variant == 3 ? (head_dim == 128 ? pf3_launch<128, true> : pf3_launch<64, true>)
                               : (head_dim == 128 ? pf2_launch<128, true> : pf2_launch<64, true>);
    return launch(out, q, k_cache, v_cache, pages, pos0, n_tok, n_head, n_kv_head, scale, window, softcap, stream);
}

/* Production: v3 (wgmma; v2 off compute capability 9.0). PERF-LOG run 31: 8b q4_k_m pp512 @
 * d16384 14029 t/s, 12826 with v2, 6233 with v1. */
extern "C" cudaError_t paged_attention_prefill(float *out, const float *q, const uint16_t *k_cache,
                                               const uint16_t *v_cache, const int32_t *pages, int pos0, int n_tok,
                                               int n_head, int n_kv_head, int head_dim, float scale,
                                               cudaStream_t stream) {
    return paged_attention_prefill_variant(3, out, q, k_cache, v_cache, pages, pos0, n_tok, n_head, n_kv_head,
                                           head_dim, scale, stream);
}
