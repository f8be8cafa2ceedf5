/* Elementwise ops (kernels.h: swiglu, add, f32 to f16), grid-stride over n, launched with PDL. */
#include <cuda_fp16.h>
#include "kernels/kernels.h"
#include "kernels/pdl.cuh"

__global__ void swiglu_kernel(float *out, const float *gate, const float *up, int64_t n) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void add_kernel(float *out, const float *a, const float *b, int64_t n) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

__global__ void f32_to_f16_kernel(uint16_t *out, const float *in, int64_t n) {
    pdl_trigger();
    pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = __half_as_ushort(__float2half_rn(in[i]));
}

static unsigned ew_grid(int64_t n) {
    int64_t g = (n + 255) / 256;
    return (unsigned)(g > 65535 ? 65535 : g);
}

extern "C" cudaError_t cu_swiglu(float *out, const float *gate, const float *up, int64_t n, cudaStream_t stream) {
    if (n <= 0) return cudaErrorInvalidValue;
    return pdl_launch(swiglu_kernel, dim3(ew_grid(n)), dim3(256), 0, stream, out, gate, up, n);
}

extern "C" cudaError_t cu_add(float *out, const float *a, const float *b, int64_t n, cudaStream_t stream) {
    if (n <= 0) return cudaErrorInvalidValue;
    return pdl_launch(add_kernel, dim3(ew_grid(n)), dim3(256), 0, stream, out, a, b, n);
}

extern "C" cudaError_t cu_f32_to_f16(uint16_t *out, const float *in, int64_t n, cudaStream_t stream) {
    if (n <= 0) return cudaErrorInvalidValue;
    return pdl_launch(f32_to_f16_kernel, dim3(ew_grid(n)), dim3(256), 0, stream, out, in, n);
}
