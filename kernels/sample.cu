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

/* The block's best (value, index) over the row, skipping the ids in skip when skipping. */
__device__ __forceinline__ int am_row(const float *l, int n_vocab, const argmax_skip &skip, bool skipping, float *s_v,
                                      int *s_i) {
    float bv = __int_as_float(0x7fc00000);
    int bi = 0;
#pragma unroll 8 /* loads in flight together, not one round trip each */
    for (int i = threadIdx.x; i < n_vocab; i += blockDim.x) {
        const float v = l[i];
        if (am_better(v, i, bv, bi)) {
            bool skipped = false;
            for (int k = 0; skipping && k < skip.n; k++) skipped |= skip.id[k] == i;
            if (!skipped) { bv = v; bi = i; }
        }
    }
    am_warp(bv, bi);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* s_v, s_i free again (a previous call's readers are done) */
    if (lane == 0) { s_v[warp] = bv; s_i[warp] = bi; }
    __syncthreads();
    const int nw = blockDim.x >> 5;
    bv = lane < nw ? s_v[lane] : __int_as_float(0x7fc00000);
    bi = lane < nw ? s_i[lane] : 0;
    am_warp(bv, bi); /* every warp reduces the same 32 pairs: all threads know the result */
    return bi;
}

/* Two picks per row: the argmax, and the argmax past the skipped ids, which is the same unless
 * the argmax itself is skipped; only then (an end-of-text token that --ignore-eos refuses is
 * the best: rare) does the block read the row a second time. */
__global__ void __launch_bounds__(1024) argmax_kernel(int32_t *out, const float *logits, int n_vocab, argmax_skip skip) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    __shared__ float s_v[32];
    __shared__ int s_i[32];
    const float *l = logits + (int64_t)blockIdx.x * n_vocab;
    const int best = am_row(l, n_vocab, skip, false, s_v, s_i);
    bool skipped = false;
    for (int k = 0; k < skip.n; k++) skipped |= skip.id[k] == best;
    const int next = skipped ? am_row(l, n_vocab, skip, true, s_v, s_i) : best; /* uniform in the block */
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = best;
        out[2 * blockIdx.x + 1] = next;
    }
}

extern "C" cudaError_t cu_argmax(int32_t *out, const float *logits, int n_seq, int n_vocab, argmax_skip skip,
                              cudaStream_t stream) {
    if (n_seq <= 0 || n_vocab <= 0 || skip.n < 0 || skip.n > ARGMAX_MAX_SKIP) return cudaErrorInvalidValue;
    return pdl_launch(argmax_kernel, dim3(n_seq), dim3(1024), 0, stream, out, logits, n_vocab, skip);
}
