/* The recipe kernels (recipe.h): the general layer's Q/K/V epilogue and bias add. One block per
 * (head, token) for the epilogue: the head's values pass through shared memory, so its RMSNorm's
 * sum and RoPE's pairs (adjacent or half a rotation apart) are read from one place. */
#include <cuda_fp16.h>

#include "kernels/act.cuh"
#include "kernels/pdl.cuh"
#include "kernels/recipe.h"

enum { QR_THREADS = 128, QR_MAX_HD = 256 };

__device__ __forceinline__ uint16_t qr_f16(float v) { return __half_as_ushort(__float2half_rn(v)); }

/* blockIdx.x: query heads, then key heads, then value heads; blockIdx.y: the token. */
__global__ void __launch_bounds__(QR_THREADS) qkv_rope_store_kernel(
    float *q_out, uint16_t *kc, uint16_t *vc, const float *q, int64_t sq, const float *k, int64_t sk, const float *v,
    int64_t sv, const int32_t *pos, const int32_t *cell, cu_qkv_recipe r, int n_head, int n_kv_head, int head_dim,
    int n_rot) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    __shared__ float buf[QR_MAX_HD];
    __shared__ double part[QR_THREADS / 32];
    const int t = blockIdx.y, hh = blockIdx.x, kind = hh < n_head ? 0 : hh < n_head + n_kv_head ? 1 : 2;
    const int h = kind == 0 ? hh : kind == 1 ? hh - n_head : hh - n_head - n_kv_head;
    const float *src = kind == 0 ? q + t * sq : kind == 1 ? k + t * sk : v + t * sv;
    const float *bias = kind == 0 ? r.bq : kind == 1 ? r.bk : r.bv;
    const float *nw = kind == 0 ? r.q_norm : kind == 1 ? r.k_norm : NULL;
    src += (int64_t)h * head_dim;
    if (bias) bias += (int64_t)h * head_dim;
    const int64_t at = (int64_t)cell[t] * n_kv_head * head_dim + (int64_t)h * head_dim;
    if (kind == 2) { /* a value head: its bias, then the cache */
        for (int e = threadIdx.x; e < head_dim; e += QR_THREADS) vc[at + e] = qr_f16(src[e] + (bias ? bias[e] : 0.0f));
        return;
    }
    double ss = 0;
    const int half = n_rot / 2;
    for (int e = threadIdx.x; e < head_dim; e += QR_THREADS) {
        /* value e's row: NEOX-interleaved rows hold it at 2e or 2(e - half) + 1 */
        const int se = r.neox_rows && e < n_rot ? (e < half ? 2 * e : 2 * (e - half) + 1) : e;
        const float x = src[se] + (bias ? bias[e] : 0.0f);
        buf[e] = x;
        ss += (double)x * x;
    }
    if (nw) { /* the head's RMSNorm, its sum in double as the CPU reference's */
        for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = ss;
        __syncthreads();
        double sum = 0;
        for (int w = 0; w < QR_THREADS / 32; w++) sum += part[w];
        const float scale = (float)(1.0 / sqrt(sum / head_dim + r.eps));
        for (int e = threadIdx.x; e < head_dim; e += QR_THREADS) buf[e] = buf[e] * scale * nw[e];
    }
    __syncthreads();
    float *qo = q_out + ((int64_t)t * n_head + h) * head_dim;
    const int p = pos[t];
    for (int i = threadIdx.x; i < half; i += QR_THREADS) {
        const int i0 = r.neox ? i : 2 * i, i1 = r.neox ? i + half : 2 * i + 1;
        double s, c;
        sincos((double)p * r.angle[i], &s, &c);
        const float cf = (float)(c * r.mscale), sf = (float)(s * r.mscale);
        const float a = buf[i0], b = buf[i1];
        const float y0 = a * cf - b * sf, y1 = a * sf + b * cf;
        if (kind == 0) {
            qo[i0] = y0;
            qo[i1] = y1;
        } else {
            kc[at + i0] = qr_f16(y0);
            kc[at + i1] = qr_f16(y1);
        }
    }
    for (int e = n_rot + threadIdx.x; e < head_dim; e += QR_THREADS) { /* past the rotary part: as they are */
        if (kind == 0) qo[e] = buf[e];
        else kc[at + e] = qr_f16(buf[e]);
    }
}

extern "C" cudaError_t cu_qkv_rope_store(float *q_out, uint16_t *k_cache, uint16_t *v_cache, const float *q,
                                         int64_t sq, const float *k, int64_t sk, const float *v, int64_t sv,
                                         const int32_t *pos, const int32_t *cell, const cu_qkv_recipe *r, int n_tok,
                                         int n_head, int n_kv_head, int head_dim, int n_rot, cudaStream_t stream) {
    if (!r || n_tok <= 0 || n_tok > 65535 || n_head <= 0 || n_kv_head <= 0 || head_dim <= 0 ||
        head_dim > QR_MAX_HD || n_rot < 0 || n_rot % 2 || n_rot > head_dim || (n_rot && !r->angle))
        return cudaErrorInvalidValue;
    dim3 grid((unsigned)(n_head + 2 * n_kv_head), (unsigned)n_tok);
    return pdl_launch(qkv_rope_store_kernel, grid, dim3(QR_THREADS), 0, stream, q_out, k_cache, v_cache, q, sq, k, sk,
                      v, sv, pos, cell, *r, n_head, n_kv_head, head_dim, n_rot);
}

__global__ void bias_add_kernel(float *x, int64_t stride, const float *b, int n_rows, int64_t width) {
    pdl_trigger();
    pdl_wait();
    const int64_t n = (int64_t)n_rows * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / width, c = i % width;
        x[t * stride + c] += b[c];
    }
}

extern "C" cudaError_t cu_bias_add(float *x, int64_t stride, const float *b, int n_rows, int64_t width,
                                   cudaStream_t stream) {
    if (n_rows <= 0 || width <= 0 || stride < width || !b) return cudaErrorInvalidValue;
    const int64_t n = (int64_t)n_rows * width, g = (n + 255) / 256;
    return pdl_launch(bias_add_kernel, dim3((unsigned)(g > 65535 ? 65535 : g)), dim3(256), 0, stream, x, stride, b,
                      n_rows, width);
}

__global__ void scale_kernel(float *x, int64_t n, float s) {
    pdl_trigger();
    pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

__global__ void softcap_kernel(float *x, int64_t n, float cap) {
    pdl_trigger();
    pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = cap * tanhf(x[i] / cap);
}

static dim3 flat_grid(int64_t n) {
    const int64_t g = (n + 255) / 256;
    return dim3((unsigned)(g > 65535 ? 65535 : g));
}

extern "C" cudaError_t cu_scale(float *x, int64_t n, float s, cudaStream_t stream) {
    if (!x || n <= 0) return cudaErrorInvalidValue;
    return pdl_launch(scale_kernel, flat_grid(n), dim3(256), 0, stream, x, n, s);
}

extern "C" cudaError_t cu_softcap(float *x, int64_t n, float cap, cudaStream_t stream) {
    if (!x || n <= 0 || !(cap > 0.0f)) return cudaErrorInvalidValue;
    return pdl_launch(softcap_kernel, flat_grid(n), dim3(256), 0, stream, x, n, cap);
}

__global__ void geglu_kernel(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u, int64_t su,
                             int n_ff, int64_t n) {
    pdl_trigger();
    pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / n_ff, c = i % n_ff;
        const float y = act_gelu_tanh(g[t * sg + c]) * u[t * su + c];
        out[i] = y;
        if (out_h) out_h[i] = qr_f16(y);
    }
}

extern "C" cudaError_t cu_geglu(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u, int64_t su,
                                int n_tok, int n_ff, cudaStream_t stream) {
    if (!out || !g || !u || n_tok <= 0 || n_ff <= 0 || sg < n_ff || su < n_ff) return cudaErrorInvalidValue;
    const int64_t n = (int64_t)n_tok * n_ff;
    return pdl_launch(geglu_kernel, flat_grid(n), dim3(256), 0, stream, out, out_h, g, sg, u, su, n_ff, n);
}
