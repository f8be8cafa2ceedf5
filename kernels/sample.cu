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

__global__ void __launch_bounds__(1024) argmax_kernel(int32_t *out, const float *logits, int n_vocab) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const float *l = logits + (int64_t)blockIdx.x * n_vocab;
    float bv = __int_as_float(0x7fc00000);
    int bi = 0;
#pragma unroll 8 /* loads in flight together, not one round trip each */
    for (int i = threadIdx.x; i < n_vocab; i += blockDim.x) {
        const float v = l[i];
        if (am_better(v, i, bv, bi)) { bv = v; bi = i; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float v = __shfl_xor_sync(0xffffffffu, bv, o);
        int i = __shfl_xor_sync(0xffffffffu, bi, o);
        if (am_better(v, i, bv, bi)) { bv = v; bi = i; }
    }
    __shared__ float sv[32];
    __shared__ int si[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        bv = lane < nw ? sv[lane] : __int_as_float(0x7fc00000);
        bi = lane < nw ? si[lane] : 0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float v = __shfl_xor_sync(0xffffffffu, bv, o);
            int i = __shfl_xor_sync(0xffffffffu, bi, o);
            if (am_better(v, i, bv, bi)) { bv = v; bi = i; }
        }
        if (lane == 0) out[blockIdx.x] = bi;
    }
}

extern "C" cudaError_t argmax(int32_t *out, const float *logits, int n_seq, int n_vocab, cudaStream_t stream) {
    if (n_seq <= 0 || n_vocab <= 0) return cudaErrorInvalidValue;
    return pdl_launch(argmax_kernel, dim3(n_seq), dim3(1024), 0, stream, out, logits, n_vocab);
}
