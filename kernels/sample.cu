/* Greedy sampling on the device (kernels.h: argmax): one block per sequence, so only token ids
 * travel back to the host. Ties go to the lowest index; NaN never wins. */
#include "kernels/kernels.h"
#include "kernels/pdl.cuh"

/* (value, index) order: larger value first, then lower index; NaN below everything. */
__device__ __forceinline__ bool am_better(float v, int i, float bv, int bi) {
    if (v != v) return false;
    if (bv != bv) return true;
    return v > bv || (v == bv && i < bi);
}

/* One (value, index) pair through a warp's shuffles. */
__device__ __forceinline__ void am_warp(float &bv, int &bi) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float v = __shfl_xor_sync(0xffffffffu, bv, o);
        int i = __shfl_xor_sync(0xffffffffu, bi, o);
        if (am_better(v, i, bv, bi)) { bv = v; bi = i; }
    }
}

/* Two reductions in one pass over the row: every index, and every index not in skip (a short
 * list, checked only for an index that would win the second). */
__global__ void __launch_bounds__(1024) argmax_kernel(int32_t *out, const float *logits, int n_vocab, argmax_skip skip) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const float *l = logits + (int64_t)blockIdx.x * n_vocab;
    float bv = __int_as_float(0x7fc00000), sv = bv;
    int bi = 0, si = 0;
#pragma unroll 8 /* loads in flight together, not one round trip each */
    for (int i = threadIdx.x; i < n_vocab; i += blockDim.x) {
        const float v = l[i];
        if (am_better(v, i, bv, bi)) { bv = v; bi = i; }
        if (am_better(v, i, sv, si)) {
            bool skipped = false;
            for (int k = 0; k < skip.n; k++) skipped |= skip.id[k] == i;
            if (!skipped) { sv = v; si = i; }
        }
    }
    am_warp(bv, bi);
    am_warp(sv, si);
    __shared__ float s_bv[32], s_sv[32];
    __shared__ int s_bi[32], s_si[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { s_bv[warp] = bv; s_bi[warp] = bi; s_sv[warp] = sv; s_si[warp] = si; }
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        bv = lane < nw ? s_bv[lane] : __int_as_float(0x7fc00000);
        bi = lane < nw ? s_bi[lane] : 0;
        sv = lane < nw ? s_sv[lane] : __int_as_float(0x7fc00000);
        si = lane < nw ? s_si[lane] : 0;
        am_warp(bv, bi);
        am_warp(sv, si);
        if (lane == 0) {
            out[2 * blockIdx.x] = bi;
            out[2 * blockIdx.x + 1] = si;
        }
    }
}

extern "C" cudaError_t argmax(int32_t *out, const float *logits, int n_seq, int n_vocab, argmax_skip skip,
                              cudaStream_t stream) {
    if (n_seq <= 0 || n_vocab <= 0 || skip.n < 0 || skip.n > ARGMAX_MAX_SKIP) return cudaErrorInvalidValue;
    return pdl_launch(argmax_kernel, dim3(n_seq), dim3(1024), 0, stream, out, logits, n_vocab, skip);
}
