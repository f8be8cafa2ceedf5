/* RMSNorm over rows of f32 (kernels.h: rmsnorm). One block per row; the row is read twice
 * (sum of squares, then scale), the second time mostly from L1. The first loop is unrolled so a
 * thread's loads are in flight together (rolled, each waited for the last: 16 us at 4096). */
#include "kernels/kernels.h"
#include "kernels/reduce.cuh"
#include "kernels/pdl.cuh"

__global__ void __launch_bounds__(256) rmsnorm_kernel(float *out, const float *in, const float *weight,
                                                      int dim, float eps) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const float *x = in + (int64_t)blockIdx.x * dim;
    float *o = out + (int64_t)blockIdx.x * dim;
    float ss = 0;
#pragma unroll 8
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss = fmaf(x[i], x[i], ss);
    float r = rsqrtf(block_sum(ss) / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = x[i] * r * weight[i];
}

extern "C" cudaError_t cu_rmsnorm(float *out, const float *in, const float *weight, int rows, int dim, float eps,
                               cudaStream_t stream) {
    if (rows <= 0 || dim <= 0) return cudaErrorInvalidValue;
    return pdl_launch(rmsnorm_kernel, dim3(rows), dim3(256), 0, stream, out, in, weight, dim, eps);
}
