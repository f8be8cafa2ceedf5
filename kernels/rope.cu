/* Rotary position embedding, llama's adjacent-pair layout (kernels.h: rope). One thread per
 * pair; the angle is computed in f32 from pos * theta^(-2i/rot_dim) (powf, like the CPU path). */
#include "kernels/kernels.h"
#include "kernels/rope.cuh"

__global__ void rope_kernel(float *out, const float *in, const int32_t *pos, int n_tok, int n_head,
                            int head_dim, int rot_dim, float theta) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int half = head_dim / 2;
    int64_t total = (int64_t)n_tok * n_head * half;
    if (i >= total) return;
    int p = (int)(i % half);
    int64_t th = i / half; /* token * n_head + head */
    int tok = (int)(th / n_head);
    int64_t base = th * head_dim + 2 * p;
    float x0 = in[base], x1 = in[base + 1];
    rope_pair(x0, x1, pos[tok], 2 * p, rot_dim, theta);
    out[base] = x0;
    out[base + 1] = x1;
}

extern "C" cudaError_t cu_rope(float *out, const float *in, const int32_t *pos, int n_tok, int n_head,
                            int head_dim, int rot_dim, float theta, cudaStream_t stream) {
    if (n_tok <= 0 || n_head <= 0 || head_dim <= 0 || head_dim % 2 || rot_dim % 2 || rot_dim > head_dim)
        return cudaErrorInvalidValue;
    int64_t total = (int64_t)n_tok * n_head * (head_dim / 2);
    rope_kernel<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(out, in, pos, n_tok, n_head, head_dim,
                                                                      rot_dim, theta);
    return cudaGetLastError();
}
