/* Kernel lab: the decode matvec variants that no production path takes, on the production
 * layout and X sources (kernels/matvec.cuh), timed and checked against the CPU reference by
 * tests/kbench/matvec.cu:
 *   v2, v4, v5  matvec_v2 (kernels/matvec_fallback.cuh) with V = 2 (one group of loads in flight
 *       per warp), 4 (v3 capped at 80 registers: 3 blocks, 24 warps per SM) or 5 (n = 1: the
 *       column count a template constant, one LOP3 per unpacked register: MODE 2).
 *   v6, v7  v5's arithmetic in a persistent grid, one block per SM walking a run of tiles with 2
 *       (v6) or 3 (v7) groups of loads in flight per warp (v6 was production for one token
 *       before v10); v8: v6 launched without programmatic dependent launch; v9: v6 with Q4_0 /
 *       Q4_K weights through a shared-memory ring (cp.async.bulk).
 * matvec_v2_launch runs any of them (2 to 9; v3 for the counts the others do not take). */
#ifndef MGI_KBENCH_MATVEC_LAB_CUH
#define MGI_KBENCH_MATVEC_LAB_CUH

#include "kernels/matvec.cuh"

/* ---------------------------------------------------------------- v6: persistent, n = 1 ----- */
/* v6 = v5's arithmetic (n = 1, MODE 2) in a persistent grid: one block of MV6_WARPS warps per SM
 * takes a contiguous run of 16-row tiles, stages all of X once, and its warps split the block's
 * (tile, 2 KB group) units evenly, walking them with MV6_NB groups of loads in flight across
 * tile boundaries (no barrier between tiles, so no pipeline drain). Each warp leaves its partial
 * sum of each tile it touched in shared memory; the block adds them in warp order at the end
 * (deterministic: no atomics). */
#define MV6_WARPS 16
#define MV9_SLOT 2304 /* v9: bytes of one group in its shared-memory slot */

/* Shared memory of v6: X as B fragments (32 bytes per k16 step and column), per-32 sums of X,
 * and the partial sums [tiles][warps][16 rows][ncols]. */
__host__ __device__ __forceinline__ size_t mv6_smem(int64_t k, int ncols, int64_t tiles, int ring_slots) {
    const int64_t C = mv2_chunks(k);
    return (size_t)(C * 128 * ncols + C * 8 * ncols + tiles * MV6_WARPS * 16 * ncols * 4) +
           (size_t)ring_slots * MV6_WARPS * (MV9_SLOT + 8);
}

/* v9 (RING): a Q4_0 / Q4_K group in shared memory, 2 KB of quants then 256 bytes of scales,
 * copied by the bulk-copy engine (cp.async.bulk, one lane issues it) and completed on an
 * mbarrier; bytes in flight then cost shared memory, not registers. */

__device__ __forceinline__ void mv9_issue(uint32_t dst, uint32_t bar, const uint8_t *q, const uint8_t *sc) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(MV9_SLOT) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 2048, [%2];"
                 ::"r"(dst), "l"(q), "r"(bar) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 256, [%2];"
                 ::"r"(dst + 2048), "l"(sc), "r"(bar) : "memory");
}

__device__ __forceinline__ void mv9_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

/* A group's registers from its slot, as mv2_group<T>::load leaves them. */
template <int T>
__device__ __forceinline__ void mv9_fill(mv2_group<T> &gr, const uint8_t *slot, int lane, int g) {
    const uint4 *q = (const uint4 *)slot;
#pragma unroll
    for (int i = 0; i < 4; i++) gr.q[i] = q[i * 32 + lane];
    if constexpr (T == QUANT_Q4_0) {
#pragma unroll
        for (int i = 0; i < 4; i++) gr.sc[i] = ((const uint2 *)(slot + 2048 + 64 * i))[g];
    } else {
        gr.r0 = ((const uint4 *)(slot + 2048))[g];
        gr.r1 = ((const uint4 *)(slot + 2048))[g + 8];
    }
}

template <int T, bool XH, int NB, bool RING = false, typename XS = mv_x>
__global__ void __launch_bounds__(MV6_WARPS * 32, 1) matvec_v6(float *y, const uint8_t *w, XS xv,
                                                               int rows, int k) {
    static_assert(!mv_fused<XS>(), "v6-v9: no fused norm or accumulation (v10 only)");
    constexpr int NC = XH ? 1 : 2, GC = mv2_group<T>::GC, W = MV6_WARPS;
    extern __shared__ __align__(16) uint8_t mv6_smem_buf[];
    const int64_t C = mv2_chunks(k), R16 = (rows + 15) / 16;
    const int64_t t0 = blockIdx.x * R16 / gridDim.x, t1 = (blockIdx.x + 1) * R16 / gridDim.x;
    const int nt = (int)(t1 - t0), ng = (int)((C + GC - 1) / GC), units = nt * ng;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int u0 = warp * units / W, u1 = (warp + 1) * units / W;
    static_assert(!RING || T == QUANT_Q4_0 || T == QUANT_Q4_K, "v9: Q4_0, Q4_K");
    /* RING: NB slots per warp, then their mbarriers, then X */
    uint8_t *ring = mv6_smem_buf + warp * NB * MV9_SLOT;
    uint64_t *bars = (uint64_t *)(mv6_smem_buf + W * NB * MV9_SLOT) + warp * NB;
    uint8_t *xbase = mv6_smem_buf + (RING ? W * NB * (MV9_SLOT + 8) : 0);
    uint2 *xb = (uint2 *)xbase;
    float *xs = (float *)(xbase + C * 128 * NC), *red = xs + C * 2 * NC;
    /* every group is whole (the launcher checks C % GC == 0): pc = 0 folds the groups' per-chunk
     * guards away, so the compiler can interleave their chunks */
    constexpr int pc = 0;

    /* the first NB groups of loads go out before X is staged */
    mv2_group<T> gq[RING ? 1 : NB];
    int lt = u0 / ng, lg = u0 % ng; /* load cursor: tile (in the block) and group */
    auto issue = [&](int j) { /* RING: lane 0 sends the next group to slot j */
        const int64_t tile = t0 + lt, c = (int64_t)GC * lg;
        mv9_issue((uint32_t)__cvta_generic_to_shared(ring + j * MV9_SLOT), (uint32_t)__cvta_generic_to_shared(bars + j),
                  w + (tile * C + c) * 512, w + R16 * C * 512 + (tile * C + c) * 64);
    };
    if constexpr (RING) {
        if (lane == 0) {
            for (int j = 0; j < NB; j++)
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"((uint32_t)__cvta_generic_to_shared(bars + j)) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncwarp();
        for (int j = 0; j < NB; j++) {
            if (lane == 0 && u0 + j < u1) issue(j);
            if (++lg == ng) { lg = 0; lt++; }
        }
    } else {
#pragma unroll
        for (int j = 0; j < NB; j++) {
            if (u0 + j < u1) gq[j].load(w, R16, C, t0 + lt, 0, GC * lg, pc, lane, g);
            if (++lg == ng) { lg = 0; lt++; }
        }
    }
    /* PDL: everything above (weights only) may overlap the previous kernel; X, the partial sums
     * and y wait for it to finish (pdl.cuh). The next kernel may be scheduled from here on: its
     * own wait covers this whole grid. */
    pdl_wait();
    pdl_trigger();
    for (int i = threadIdx.x; i < nt * W * 16 * NC; i += blockDim.x) red[i] = 0.0f;
    mv2_stage<XH, 4>(xb, xs, xv, k, 1, NC, 0, (int)(C * 64));
    __syncthreads();

    float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
    int ct = u0 / ng, cg = u0 % ng; /* compute cursor */
    auto flush = [&]() {
        if (t == 0) {
            float *p = red + ((ct * W + warp) * 16 + g) * NC;
            p[0] = acc[0][0];
            p[8 * NC] = acc[0][2];
            if (NC == 2) { p[1] = acc[0][1]; p[8 * NC + 1] = acc[0][3]; }
        }
        acc[0][0] = acc[0][1] = acc[0][2] = acc[0][3] = 0.0f;
    };
    if constexpr (RING) {
        int j = 0;
        uint32_t phase = 0;
        for (int u = u0; u < u1; u++) {
            mv9_wait((uint32_t)__cvta_generic_to_shared(bars + j), phase);
            mv9_fill<T>(gq[0], ring + j * MV9_SLOT, lane, g);
            __syncwarp();
            if (u + NB < u1) { /* the slot is read: refill it (the copy engine's writes follow the lanes' reads) */
                if (lane == 0) {
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    issue(j);
                }
                if (++lg == ng) { lg = 0; lt++; }
            }
            gq[0].template compute<1, 2>(acc, xb, xs, GC * cg, pc, NC, g, t);
            if (++cg == ng) { flush(); cg = 0; ct++; }
            if (++j == NB) { j = 0; phase ^= 1; }
        }
    }
    if constexpr (!RING) {
        for (int u = u0; u < u1; u += NB) {
#pragma unroll
            for (int j = 0; j < NB; j++) {
                if (u + j < u1) {
                    gq[j].template compute<1, 2>(acc, xb, xs, GC * cg, pc, NC, g, t);
                    if (u + j + NB < u1) {
                        gq[j].load(w, R16, C, t0 + lt, 0, GC * lg, pc, lane, g);
                        if (++lg == ng) { lg = 0; lt++; }
                    }
                    if (++cg == ng) { flush(); cg = 0; ct++; }
                }
            }
        }
    }
    if (u0 < u1 && cg != 0) flush();
    __syncthreads();
    for (int i = threadIdx.x; i < nt * 16; i += blockDim.x) {
        const int tl = i >> 4, r = i & 15;
        const int64_t row = (t0 + tl) * 16 + r;
        float s = 0.0f;
#pragma unroll 4
        for (int wp = 0; wp < W; wp++) {
            const float *p = red + ((tl * W + wp) * 16 + r) * NC;
            s += NC == 2 ? p[0] + p[1] : p[0];
        }
        if (row < rows) y[row] = s;
    }
}


/* Lets v6 use all the shared memory a block may opt into, once per device (cu_matvec_repack calls it
 * at load, before any graph capture). */
template <int T, bool XH, int NB, bool RING = false, typename XS = mv_x>
static inline bool mv6_prepare() {
    return smem_optin<matvec_v6<T, XH, NB, RING, XS>>() == cudaSuccess;
}

/* Launches v6 with NB groups in flight per warp, with the PDL attribute when pdl; false (nothing
 * launched) where it does not apply: n > 1, k not a whole number of groups (Q4_0: 256, Q8_0:
 * 128), or X and the partial sums do not fit in shared memory. *e is the launch status. */
template <int T, bool XH, int NB, bool RING = false, typename XS = mv_x>
static inline bool matvec_v6_launch(float *y, const void *w, XS x, int rows, int k, int n, cudaStream_t s,
                                    int pdl, cudaError_t *e) {
    int sms, smem_max;
    if (n != 1 || mv2_chunks(k) % mv2_group<T>::GC != 0 || !mv_device(&sms, &smem_max)) return false;
    const int64_t R16 = (rows + 15) / 16;
    int64_t grid = R16 < sms ? R16 : sms;
    if ((R16 + grid - 1) / grid > MV_TILES) grid = (R16 + MV_TILES - 1) / MV_TILES;
    const size_t smem = mv6_smem(k, XH ? 1 : 2, (R16 + grid - 1) / grid, RING ? NB : 0);
    if (smem > (size_t)smem_max || (smem > 48 * 1024 && !mv6_prepare<T, XH, NB, RING, XS>())) return false;
    *e = pdl_launch_as(pdl, matvec_v6<T, XH, NB, RING, XS>, dim3((unsigned)grid), dim3(MV6_WARPS * 32), smem, s, y,
                       (const uint8_t *)w, x, rows, k);
    return true;
}

/* Launches variant V (2 to 9) on repacked weights, X from x (mv_x, or mv_x_swiglu for f32):
 * one block per 16 rows, or v6's persistent grid (V 6: 2 groups in flight per warp, V 7: 3,
 * V 8: v6 launched without programmatic dependent launch (the lab's reference for what PDL
 * wins), V 9: Q4_0 and Q4_K groups through a shared-memory ring of 4 slots per warp filled by
 * the copy engine). v5-v9 exist for n = 1 (the column count is a template constant); other n,
 * and v6 where it does not fit, run v3. Every launch but V 8's carries the PDL attribute
 * (pdl.cuh); returns the launch status. */
template <int T, bool XH, int V, typename XS = mv_x>
static inline cudaError_t matvec_v2_launch(float *y, const void *w, XS x, int rows, int k, int n, cudaStream_t s) {
    const unsigned grid = (unsigned)((rows + 15) / 16);
    const int ncols = XH ? n : 2 * n, pdl = pdl_enabled();
    const uint8_t *wb = (const uint8_t *)w;
    cudaError_t e = cudaSuccess;
    if constexpr (V == 6 || V == 7) {
        if (matvec_v6_launch<T, XH, V == 6 ? 2 : 3, false, XS>(y, w, x, rows, k, n, s, pdl, &e)) return e;
    }
    if constexpr (V == 8) {
        if (matvec_v6_launch<T, XH, 2, false, XS>(y, w, x, rows, k, n, s, 0, &e)) return e;
    }
    if constexpr (V == 9 && (T == QUANT_Q4_0 || T == QUANT_Q4_K)) {
        if (matvec_v6_launch<T, XH, 4, true, XS>(y, w, x, rows, k, n, s, pdl, &e)) return e;
    } else if constexpr (V == 9) { /* Q6_K, Q8_0: v6 */
        if (matvec_v6_launch<T, XH, 2, false, XS>(y, w, x, rows, k, n, s, pdl, &e)) return e;
    }
    if constexpr (V == 5) {
        if (n == 1)
            return pdl_launch(matvec_v2<T, XH, 1, 5, XH ? 1 : 2, XS>, dim3(grid), dim3(256), MV2_SMEM, s, y, wb, x, rows, k, n);
    }
    constexpr int VV = V >= 5 ? 3 : V;
    if (ncols <= 8) return pdl_launch(matvec_v2<T, XH, 1, VV, 0, XS>, dim3(grid), dim3(256), MV2_SMEM, s, y, wb, x, rows, k, n);
    return pdl_launch(matvec_v2<T, XH, 2, VV, 0, XS>, dim3(grid), dim3(256), MV2_SMEM, s, y, wb, x, rows, k, n);
}


#endif
