/* Kernel lab: how fast the decode matvec's access pattern can stream, with no arithmetic. The
 * buffer is laid out as matvec v10/v11's repacked Q4_0 weights (units of 2 KB of quants, 16 rows x
 * 256 columns, and their 256 bytes of scales in a second stream), and every kernel reads each
 * byte once and only XORs it into a word per thread, so the figure is what the pattern and the
 * copy mechanism allow, not the math:
 *   ring     v11's: one block per SM, 16 warps, the block's tiles contiguous, each warp a
 *            contiguous run of units through a 4-slot cp.async ring;
 *   ring-il  the same ring, the warps of a block taking its units in turn (warp w: w, w + 16, ...);
 *   ldg      v10's: the warp's contiguous units straight into registers, 4 in flight;
 *   ldg-il   ldg with the units taken in turn;
 *   sweep    the ring, units dealt round-robin over all warps of the grid (the whole GPU walks
 *            the matrix front to back together);
 *   bulk     the ring filled by the bulk-copy engine (lane 0: two cp.async.bulk per unit, one
 *            mbarrier per slot), and bulk-il with the units taken in turn;
 *   ldg2/3   ldg with 2 or 3 units in flight (v10 holds 2).
 * Each row: one shape, launches of 24 copies back to back (each its own buffer, so L2 holds
 * nothing), GB/s per launch against the measured copy bandwidth.
 * Then decode attention's pattern (paged_attn_mma_kernel V3 without its math): one token, 8 kv
 * heads of 128 dims, blocks (split, kv head) of 4 warps, each warp's 16-position sub-tiles of K and
 * V through a 3-slot cp.async ring, two blocks per SM; the cache cell-major as the engine keeps it
 * (a position's 8 heads side by side: a sub-tile is 16 runs of 256 bytes, 2 KB apart) or
 * head-major within a page (a page's 64 positions of one head together: a sub-tile is one 4 KB
 * run). Usage: stream. */
#include <cstdio>
#include <cstdint>
#include <vector>
#include "tests/kbench/lab.h"
#include "tests/kbench/matvec_lab.cuh" /* v11's ring copy, v10's streaming and shared loads, v9's bulk fill and mbarrier wait */

enum { W = 16, S = 4, SLOT = 2304, COPIES = 24 };
static_assert(SLOT == MV9_SLOT, "a unit as v9 fills it");

/* A lane's part of a unit in a ring slot (its 4 x 16 bytes of quants, its row's 8 bytes of scales),
 * XORed: what v11 loads before its arithmetic. */
__device__ __forceinline__ uint32_t read_slot(const uint8_t *slot, int lane) {
    uint32_t acc = 0;
#pragma unroll
    for (int m = 0; m < 4; m++) {
        const uint4 v = mv10_ldq((uint32_t)__cvta_generic_to_shared(slot + 512 * m + 16 * lane));
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    return acc ^ *(const volatile uint32_t *)(slot + 2048 + 8 * (lane >> 2));
}

/* unit j of warp (b, w) under assignment mode M: 0 contiguous per warp, 1 in turn within the
 * block, 2 round-robin over the grid. n: the warp's unit count. */
template <int M>
__device__ __forceinline__ void span(int64_t units, int64_t R16, int ng, int64_t *first, int64_t *step, int *n) {
    const int b = blockIdx.x, w = threadIdx.x >> 5, G = gridDim.x;
    if constexpr (M == 2) {
        const int64_t id = (int64_t)w * G + b, all = (int64_t)G * W;
        *first = id;
        *step = all;
        *n = id < units ? (int)((units - id + all - 1) / all) : 0;
    } else {
        const int64_t t0 = b * R16 / G, t1 = (b + 1) * R16 / G, bu0 = t0 * ng, bu = (t1 - t0) * ng;
        if constexpr (M == 0) {
            const int64_t u0 = w * bu / W, u1 = (w + 1) * bu / W;
            *first = bu0 + u0;
            *step = 1;
            *n = (int)(u1 - u0);
        } else {
            *first = bu0 + w;
            *step = W;
            *n = w < bu ? (int)((bu - w + W - 1) / W) : 0;
        }
    }
}

/* The ring: each lane copies its 16-byte pieces of a unit with cp.async (v11), or BULK: lane 0
 * copies the unit's quants and scales with two bulk copies completing on the slot's mbarrier. */
template <int M, bool BULK = false>
__global__ void __launch_bounds__(W * 32, 1) ring_kernel(uint32_t *sink, const uint8_t *wq, int64_t units, int64_t R16,
                                                         int ng) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t first, step;
    int n;
    span<M>(units, R16, ng, &first, &step, &n);
    const uint8_t *ws = wq + units * 2048;
    const uint32_t ring = (uint32_t)__cvta_generic_to_shared(smem) + warp * S * SLOT;
    const uint32_t bars = (uint32_t)__cvta_generic_to_shared(smem) + W * S * SLOT + warp * S * 8;
    if constexpr (BULK) {
        if (lane == 0)
            for (int j = 0; j < S; j++)
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bars + 8 * j) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        __syncwarp();
    }
    auto issue = [&](int j) {
        const int64_t u = first + j * step;
        const uint32_t slot = ring + (j % S) * SLOT, bar = bars + 8 * (j % S);
        if (BULK && j < n && lane == 0) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            mv9_issue(slot, bar, wq + u * 2048, ws + u * 256); /* v9's: expect_tx, then the two bulk copies */
        }
        if constexpr (!BULK) {
            if (j < n) {
#pragma unroll
                for (int m = 0; m < 4; m++) mv11_cp16(slot + 512 * m + 16 * lane, wq + u * 2048 + 512 * m + 16 * lane);
                if (lane < 16) mv11_cp16(slot + 2048 + 16 * lane, ws + u * 256 + 16 * lane);
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
        }
    };
    for (int j = 0; j < S; j++) issue(j);
    uint32_t acc = 0;
    for (int j = 0; j < n; j++) {
        if constexpr (BULK) {
            mv9_wait(bars + 8 * (j % S), (uint32_t)(j / S) & 1);
        } else {
            asm volatile("cp.async.wait_group 3;" ::: "memory");
            __syncwarp();
        }
        acc ^= read_slot(smem + warp * S * SLOT + (j % S) * SLOT, lane);
        __syncwarp();
        issue(j + S);
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

/* NF units in flight per warp, in registers */
template <int M, int NF = 4>
__global__ void __launch_bounds__(W * 32, 1) ldg_kernel(uint32_t *sink, const uint8_t *wq, int64_t units, int64_t R16,
                                                        int ng) {
    const int lane = threadIdx.x & 31;
    int64_t first, step;
    int n;
    span<M>(units, R16, ng, &first, &step, &n);
    const uint8_t *ws = wq + units * 2048;
    uint32_t acc = 0;
    for (int j = 0; j < n; j += NF) {
        uint4 q[NF][4];
        uint2 s[NF];
#pragma unroll
        for (int i = 0; i < NF; i++) {
            const int64_t u = first + (int64_t)(j + i < n ? j + i : j) * step;
#pragma unroll
            for (int m = 0; m < 4; m++) q[i][m] = mv_ld_stream((const uint4 *)(wq + u * 2048 + 512 * m + 16 * lane));
            s[i] = __ldg((const uint2 *)(ws + u * 256 + 8 * (lane >> 2)));
        }
#pragma unroll
        for (int i = 0; i < NF; i++) {
#pragma unroll
            for (int m = 0; m < 4; m++) acc ^= q[i][m].x ^ q[i][m].y ^ q[i][m].z ^ q[i][m].w;
            acc ^= s[i].x ^ s[i].y;
        }
    }
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

/* Attention's pattern: block (split, head); sub-tile i of warp w: positions p0 + (w + 4 i) * 16.. of
 * one K and one V array of n_pos positions x 8 heads x 128 halves; HM: head-major per 64-position
 * page. */
enum { AW = 4, AS = 3, ASUB = 16, AD = 128, AH = 8, ARS = AD + 8, ASLOT = 2 * ASUB * ARS };
template <bool HM>
__global__ void __launch_bounds__(AW * 32, 2) att_kernel(uint32_t *sink, const uint16_t *kc, const uint16_t *vc,
                                                         int n_pos) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int split = blockIdx.x, h = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int chunk = (n_pos + gridDim.x - 1) / gridDim.x, p0 = split * chunk, p1 = min(n_pos, p0 + chunk);
    const int n_sub = (p1 - p0 + ASUB - 1) / ASUB, mine = n_sub > warp ? (n_sub - warp + AW - 1) / AW : 0;
    uint16_t *ring = (uint16_t *)smem + warp * AS * ASLOT;
    auto issue = [&](int i) {
        if (i < mine) {
            const int b = p0 + (warp + i * AW) * ASUB;
            uint16_t *ks = ring + (i % AS) * ASLOT, *vs = ks + ASUB * ARS;
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const int j = lane / 16 + 2 * r, e = (lane % 16) * 8, p = b + j;
                const int64_t gi = HM ? ((int64_t)(p / 64) * AH * 64 + h * 64 + p % 64) * AD + e
                                      : ((int64_t)p * AH + h) * AD + e;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                             ::"r"((uint32_t)__cvta_generic_to_shared(ks + j * ARS + e)), "l"(kc + gi) : "memory");
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                             ::"r"((uint32_t)__cvta_generic_to_shared(vs + j * ARS + e)), "l"(vc + gi) : "memory");
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    for (int i = 0; i < AS - 1; i++) issue(i);
    uint32_t acc = 0;
    for (int i = 0; i < mine; i++) {
        issue(i + AS - 1);
        asm volatile("cp.async.wait_group 2;" ::: "memory");
        __syncwarp();
        const uint32_t *w = (const uint32_t *)(ring + (i % AS) * ASLOT);
        for (int c = lane; c < ASLOT / 2; c += 32 * 8) acc ^= w[c];
        __syncwarp();
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    sink[((blockIdx.y * gridDim.x) + blockIdx.x) * blockDim.x + threadIdx.x] = acc;
}

int main() {
    if (!lab_has_device("stream")) return 0;
    lab L;
    const int sms = L.announce(true);
    printf("| rows x k (Q4_0 layout) | MB | kernel | us per launch | GB/s | %% copy |\n|---|---|---|---|---|---|\n");
    const int smem = W * S * SLOT + W * S * 8;
    CUDA_CHECK(cudaFuncSetAttribute(ring_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(cudaFuncSetAttribute(ring_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(cudaFuncSetAttribute(ring_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(cudaFuncSetAttribute(ring_kernel<0, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(cudaFuncSetAttribute(ring_kernel<1, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    uint32_t *sink;
    CUDA_CHECK(cudaMalloc(&sink, (size_t)sms * W * 32 * sizeof(uint32_t) * 4));
    const int shapes[][2] = {{28672, 4096}, {4096, 14336}, {6144, 4096}, {4096, 4096}, {32000, 4096}};
    for (const auto &sh : shapes) {
        const int64_t R16 = sh[0] / 16, C = sh[1] / 64, ng = C / 4, units = R16 * ng;
        const size_t bytes = (size_t)units * (2048 + 256);
        std::vector<uint8_t *> bufs(COPIES);
        for (auto &b : bufs) {
            CUDA_CHECK(cudaMalloc(&b, bytes));
            CUDA_CHECK(cudaMemset(b, 0x3c, bytes));
        }
        const int grid = (int)(R16 < sms ? R16 : sms);
        for (int k = 0; k < 9; k++) {
            const char *name[] = {"ring", "ring-il", "sweep", "ldg", "ldg-il", "bulk", "bulk-il", "ldg2", "ldg3"};
            double ms = L.time_ms(
                [&] {
                    for (int c = 0; c < COPIES; c++) {
                        if (k == 0) ring_kernel<0><<<grid, W * 32, smem>>>(sink, bufs[c], units, R16, (int)ng);
                        if (k == 1) ring_kernel<1><<<grid, W * 32, smem>>>(sink, bufs[c], units, R16, (int)ng);
                        if (k == 2) ring_kernel<2><<<sms, W * 32, smem>>>(sink, bufs[c], units, R16, (int)ng);
                        if (k == 3) ldg_kernel<0><<<grid, W * 32>>>(sink, bufs[c], units, R16, (int)ng);
                        if (k == 4) ldg_kernel<1><<<grid, W * 32>>>(sink, bufs[c], units, R16, (int)ng);
                        if (k == 5) ring_kernel<0, true><<<grid, W * 32, smem>>>(sink, bufs[c], units, R16, (int)ng);
                        if (k == 6) ring_kernel<1, true><<<grid, W * 32, smem>>>(sink, bufs[c], units, R16, (int)ng);
                        if (k == 7) ldg_kernel<0, 2><<<grid, W * 32>>>(sink, bufs[c], units, R16, (int)ng);
                        if (k == 8) ldg_kernel<0, 3><<<grid, W * 32>>>(sink, bufs[c], units, R16, (int)ng);
                    }
                },
                5);
            const double us = ms * 1e3 / COPIES, gbs = bytes / (us * 1e3);
            printf("| %dx%d | %.1f | %s | %.2f | %.0f | %.1f |\n", sh[0], sh[1], bytes / 1e6, name[k], us, gbs,
                   100.0 * gbs / L.copy_gbs);
            fflush(stdout);
        }
        for (auto b : bufs) CUDA_CHECK(cudaFree(b));
    }
    printf("| positions x 8 heads (K and V) | MB | kernel | us per launch | GB/s | %% copy |\n|---|---|---|---|---|---|\n");
    const int asmem = AW * AS * ASLOT * 2;
    CUDA_CHECK(cudaFuncSetAttribute(att_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, asmem));
    CUDA_CHECK(cudaFuncSetAttribute(att_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, asmem));
    uint32_t *asink;
    CUDA_CHECK(cudaMalloc(&asink, (size_t)256 * AH * AW * 32 * sizeof(uint32_t)));
    for (int n_pos : {4096, 16384}) {
        const size_t bytes = (size_t)n_pos * AH * AD * 2;
        std::vector<uint16_t *> kb(COPIES), vb(COPIES);
        for (int c = 0; c < COPIES; c++) {
            CUDA_CHECK(cudaMalloc(&kb[c], bytes));
            CUDA_CHECK(cudaMalloc(&vb[c], bytes));
            CUDA_CHECK(cudaMemset(kb[c], 0x11, bytes));
            CUDA_CHECK(cudaMemset(vb[c], 0x22, bytes));
        }
        for (int splits : {16, 32}) {
            for (int hm = 0; hm < 2; hm++) {
                const dim3 grid(splits, AH);
                double ms = L.time_ms(
                    [&] {
                        for (int c = 0; c < COPIES; c++) {
                            if (hm) att_kernel<true><<<grid, AW * 32, asmem>>>(asink, kb[c], vb[c], n_pos);
                            else att_kernel<false><<<grid, AW * 32, asmem>>>(asink, kb[c], vb[c], n_pos);
                        }
                    },
                    5);
                const double us = ms * 1e3 / COPIES, gbs = 2.0 * bytes / (us * 1e3);
                printf("| %d, %d splits | %.1f | %s | %.2f | %.0f | %.1f |\n", n_pos, splits, 2.0 * bytes / 1e6,
                       hm ? "head-major" : "cell-major", us, gbs, 100.0 * gbs / L.copy_gbs);
                fflush(stdout);
            }
        }
        for (int c = 0; c < COPIES; c++) {
            CUDA_CHECK(cudaFree(kb[c]));
            CUDA_CHECK(cudaFree(vb[c]));
        }
    }
    CUDA_CHECK(cudaFree(asink));
    CUDA_CHECK(cudaFree(sink));
    printf("PASS kbench stream\n");
    return 0;
}
