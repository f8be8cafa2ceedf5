/* What paged_attention.cu's split-KV kernels and paged_mma.cuh's tensor-core kernel share (and
 * paged.cu's f16 rounding): the scratch layout's counters, the merge of splits, the cp.async
 * helpers. */
#ifndef MGI_KERNELS_PAGED_COMMON_CUH
#define MGI_KERNELS_PAGED_COMMON_CUH

#include <math.h>
#include <stdint.h>
#include <cuda_fp16.h>
#include "kernels/paged.h"
#include "kernels/reduce.cuh"

/* f32 to f16 bits, rounded to nearest: paged_to_f16's rounding, which every kernel that writes a
 * GEMM's f16 input beside its f32 output (the *_f16 entries) must give bit for bit. */
__device__ __forceinline__ uint16_t pg_f16(float v) { return __half_as_ushort(__float2half_rn(v)); }

#define PA_MAX_G 8 /* query heads per kv head */

/* Scratch: PAGED_ATT_TOKENS x n_head arrival counters for the tiled kernel's merge (token t, kv
 * head h at t * n_head + h: the same place whatever the launch's token and split counts, so
 * launches of different shapes can share one scratch and the counters of tokens a launch does not
 * use stay zero), then the partials (m, l, o per token, head and split). */
static inline __host__ __device__ int64_t pt_counters(int n_head) { return (int64_t)PAGED_ATT_TOKENS * n_head; }

/* The last block of a (token, kv head) to arrive merges its splits: m, l and o point at head 0
 * split 0 of its partials (head h, split s at h * n_split + s; o rows of hd), out at head 0 of its
 * output. Splits past the context hold nothing; weights w[h][s] = e^(m_s - M) / sum_s l_s
 * e^(m_s - M) (base 2 when EXP2: the tensor-core kernel's m is in log2 units) go to wgt ([G][n_act]
 * floats of shared memory), then each output sums its splits in order (deterministic). */
template <bool EXP2, int THREADS>
__device__ __forceinline__ void pt_merge_splits(float *out, const float *m, const float *l, const float *o,
                                                float *wgt, int G, int hd, int n_split, int n_act) {
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    for (int h = warp; h < G; h += THREADS / 32) {
        float mx = -INFINITY;
        for (int s0 = lane; s0 < n_act; s0 += 32) mx = fmaxf(mx, __ldcg(m + h * n_split + s0));
        mx = warp_max(mx);
        float den = 0;
        for (int s0 = lane; s0 < n_act; s0 += 32) {
            const float x = __ldcg(m + h * n_split + s0) - mx, f = EXP2 ? exp2f(x) : __expf(x);
            wgt[h * n_act + s0] = f;
            den += f * __ldcg(l + h * n_split + s0);
        }
        den = warp_sum(den);
        __syncwarp();
        for (int s0 = lane; s0 < n_act; s0 += 32) wgt[h * n_act + s0] /= den;
    }
    __syncthreads();
    for (int idx = tid; idx < G * hd; idx += THREADS) {
        const int h = idx / hd, d = idx - h * hd;
        const float *src = o + (int64_t)h * n_split * hd + d;
        float acc = 0;
#pragma unroll 4
        for (int s0 = 0; s0 < n_act; s0++) acc = fmaf(wgt[h * n_act + s0], __ldcg(src + (int64_t)s0 * hd), acc);
        out[(int64_t)h * hd + d] = acc;
    }
}


__device__ __forceinline__ void pt_cp16(void *smem, const void *g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(smem)), "l"(g)
                 : "memory");
}
__device__ __forceinline__ void pt_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void pt_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

#endif
