/* The small kernels of the CUDA engine backend over the paged KV cache (kernels/paged.h): RoPE with
 * the K/V store into cells, the residual add fused with the next RMSNorm, SwiGLU over strided
 * rows, f32 -> f16, row gather and the plain matvec. Attention is paged_attention.cu's (decode)
 * and prefill.cu's (prompt). The decode-step kernels are launched with programmatic dependent
 * launch (kernels/pdl.cuh). */
#include <math.h>
#include <cuda_fp16.h>
#include "kernels/paged.h"
#include "kernels/paged_common.cuh"
#include "kernels/reduce.cuh"
#include "kernels/pdl.cuh"
#include "kernels/rope.cuh"
#include "kernels/trace.cuh"
#include "quant/blocks.h"

/* One thread per rotated pair of Q or K or value of V: blockIdx.y is the token, so one token's
 * work spreads over many blocks. */
__global__ void paged_rope_store_kernel(float *q_out, uint16_t *kc, uint16_t *vc, const float *q, int64_t sq,
                                        const float *k, int64_t sk, const float *v, int64_t sv, const int32_t *pos,
                                        const int32_t *cell, int n_head, int n_kv_head, int head_dim, int n_rot,
                                        float theta) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const int t = blockIdx.y, half = head_dim / 2, n_pairs = (n_head + n_kv_head) * half;
    const int64_t kv_dim = (int64_t)n_kv_head * head_dim, at = (int64_t)cell[t] * kv_dim;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_pairs) {
        if (i - n_pairs < kv_dim) vc[at + i - n_pairs] = __half_as_ushort(__float2half_rn(v[t * sv + i - n_pairs]));
        return;
    }
    const int h = i / half, j = i % half, is_k = h >= n_head;
    const int64_t e = (int64_t)(is_k ? h - n_head : h) * head_dim + 2 * j;
    const float *src = is_k ? k + t * sk : q + t * sq;
    float x0 = src[e], x1 = src[e + 1];
    rope_pair(x0, x1, pos[t], 2 * j, n_rot, theta);
    if (is_k) {
        kc[at + e] = __half_as_ushort(__float2half_rn(x0));
        kc[at + e + 1] = __half_as_ushort(__float2half_rn(x1));
    } else {
        float *qo = q_out + (int64_t)t * n_head * head_dim;
        qo[e] = x0;
        qo[e + 1] = x1;
    }
}

extern "C" cudaError_t paged_rope_store(float *q_out, uint16_t *k_cache, uint16_t *v_cache, const float *q,
                                        int64_t sq, const float *k, int64_t sk, const float *v, int64_t sv,
                                        const int32_t *pos, const int32_t *cell, int n_tok, int n_head,
                                        int n_kv_head, int head_dim, int n_rot, float theta, cudaStream_t stream) {
    if (n_tok <= 0 || n_tok > 65535 || n_head <= 0 || n_kv_head <= 0 || head_dim <= 0 || head_dim % 2 ||
        n_rot % 2 || n_rot > head_dim)
        return cudaErrorInvalidValue;
    int64_t items = (int64_t)(n_head + n_kv_head) * (head_dim / 2) + (int64_t)n_kv_head * head_dim;
    dim3 grid((unsigned)((items + 255) / 256), (unsigned)n_tok);
    return pdl_launch(paged_rope_store_kernel, grid, dim3(256), 0, stream, q_out, k_cache, v_cache, q, sq, k, sk, v, sv,
                      pos, cell, n_head, n_kv_head, head_dim, n_rot, theta);
}

/* One block per row, one float4 per thread where the row allows (dim % 4 == 0), so a decode
 * step's single row is read in one round trip rather than a chain of dependent loads. */
__global__ void __launch_bounds__(1024) paged_add_rmsnorm_kernel(float *x, float *out, uint16_t *out_h,
                                                                 const float *d, int parts, int64_t plane,
                                                                 const float *post, const float *weight, int dim,
                                                                 float eps) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    float *xr = x + (int64_t)blockIdx.x * dim, *o = out + (int64_t)blockIdx.x * dim;
    uint16_t *oh = out_h ? out_h + (int64_t)blockIdx.x * dim : nullptr;
    const float *dr = d + (int64_t)blockIdx.x * dim;
    const bool vec = dim % 4 == 0;
    const int step = vec ? 4 * blockDim.x : blockDim.x;
    float pscale = 0.0f;
    if (post) { /* the post norm's scale of the planes' sum, the sum kept in out (each thread its own) */
        double ssd = 0;
        for (int i = vec ? 4 * threadIdx.x : threadIdx.x; i < dim; i += step) {
            const int nv = vec ? 4 : 1;
            for (int e = 0; e < nv; e++) {
                float b = dr[i + e];
                for (int s = 1; s < parts; s++) b += dr[s * plane + i + e]; /* plane order, as gemm_sum */
                o[i + e] = b;
                ssd += (double)b * b;
            }
        }
        pscale = (float)(1.0 / sqrt(block_sum_d(ssd) / dim + eps));
        dr = o;
        parts = 1;
    }
    float ss = 0;
    for (int i = vec ? 4 * threadIdx.x : threadIdx.x; i < dim; i += step) {
        if (vec) {
            float4 a = *(const float4 *)(xr + i), b = *(const float4 *)(dr + i);
            for (int s = 1; s < parts; s++) { /* gemm_sum's order: plane 0, then 1, ... */
                const float4 c = *(const float4 *)(dr + s * plane + i);
                b.x += c.x; b.y += c.y; b.z += c.z; b.w += c.w;
            }
            if (post) {
                const float4 pw = *(const float4 *)(post + i);
                b = make_float4(b.x * pscale * pw.x, b.y * pscale * pw.y, b.z * pscale * pw.z, b.w * pscale * pw.w);
            }
            a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
            *(float4 *)(xr + i) = a;
            ss = fmaf(a.x, a.x, fmaf(a.y, a.y, fmaf(a.z, a.z, fmaf(a.w, a.w, ss))));
        } else {
            float b = dr[i];
            for (int s = 1; s < parts; s++) b += dr[s * plane + i];
            if (post) b = b * pscale * post[i];
            float a = xr[i] + b;
            xr[i] = a;
            ss = fmaf(a, a, ss);
        }
    }
    if (!weight) return; /* paged_add_rmsnorm_sum's add alone (uniform: every thread leaves here) */
    /* Each thread rereads only what it wrote, so out may alias d. */
    const float r = rsqrtf(block_sum(ss) / (float)dim + eps);
    for (int i = vec ? 4 * threadIdx.x : threadIdx.x; i < dim; i += step) {
        if (vec) {
            float4 a = *(const float4 *)(xr + i), w = *(const float4 *)(weight + i);
            const float4 v = make_float4(a.x * r * w.x, a.y * r * w.y, a.z * r * w.z, a.w * r * w.w);
            *(float4 *)(o + i) = v;
            if (oh)
                *(uint2 *)(oh + i) = make_uint2(pg_f16(v.x) | (uint32_t)pg_f16(v.y) << 16,
                                                pg_f16(v.z) | (uint32_t)pg_f16(v.w) << 16);
        } else {
            const float v = xr[i] * r * weight[i];
            o[i] = v;
            if (oh) oh[i] = pg_f16(v);
        }
    }
}

static cudaError_t add_rmsnorm_launch(float *x, float *out, uint16_t *out_h, const float *d, int parts,
                                      int64_t plane, const float *post, const float *weight, int rows, int dim,
                                      float eps, cudaStream_t stream) {
    if (rows <= 0 || dim <= 0) return cudaErrorInvalidValue;
    int per = dim % 4 == 0 ? dim / 4 : dim, threads = (per + 31) / 32 * 32;
    return pdl_launch(paged_add_rmsnorm_kernel, dim3(rows), dim3(threads < 1024 ? threads : 1024), 0, stream, x, out,
                      out_h, d, parts, plane, post, weight, dim, eps);
}

extern "C" cudaError_t paged_add_rmsnorm(float *x, float *out, const float *d, const float *weight, int rows,
                                         int dim, float eps, cudaStream_t stream) {
    if (!weight || !out) return cudaErrorInvalidValue;
    return add_rmsnorm_launch(x, out, nullptr, d, 1, 0, nullptr, weight, rows, dim, eps, stream);
}

extern "C" cudaError_t paged_add_rmsnorm_sum(float *x, float *out, uint16_t *out_h, const float *d, int parts,
                                             int64_t plane, const float *weight, int rows, int dim, float eps,
                                             cudaStream_t stream) {
    return paged_post_add_rmsnorm(x, out, out_h, d, parts, plane, nullptr, weight, rows, dim, eps, stream);
}

extern "C" cudaError_t paged_post_add_rmsnorm(float *x, float *out, uint16_t *out_h, const float *d, int parts,
                                              int64_t plane, const float *post, const float *weight, int rows, int dim,
                                              float eps, cudaStream_t stream) {
    /* each thread reads only its own elements of every plane before writing them to out, so out
     * may be plane 0 (d itself) but not overlap the later planes */
    const float *later = d + plane, *end = d + parts * plane;
    if (parts < 1 || (parts > 1 && (plane < (int64_t)rows * dim || (plane % 4 && dim % 4 == 0) ||
                                    (out && out < end && later < out + (int64_t)rows * dim))) ||
        (out_h && dim % 4 == 0 && (uintptr_t)out_h % 8) || ((weight || post) && !out) || (!weight && out_h))
        return cudaErrorInvalidValue;
    return add_rmsnorm_launch(x, out, out_h, d, parts, plane, post, weight, rows, dim, eps, stream);
}

__global__ void paged_swiglu_kernel(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u, int64_t su,
                                    int n_ff) {
    kt_rec *tr = kt_open(KT_SWIGLU, out); /* the block timeline (trace.cuh), null unless traced */
    kt_mark(tr, 0);
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    kt_mark(tr, 2);
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int t = blockIdx.y;
    if (i < n_ff) {
        float a = g[t * sg + i];
        const float v = a / (1.0f + expf(-a)) * u[t * su + i];
        out[(int64_t)t * n_ff + i] = v;
        if (out_h) out_h[(int64_t)t * n_ff + i] = pg_f16(v);
    }
    kt_mark(tr, 5);
}

extern "C" cudaError_t paged_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s) { return kt_set(buf, cap, s); }

static cudaError_t swiglu_launch(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u, int64_t su,
                                 int n_tok, int n_ff, cudaStream_t stream) {
    if (n_tok <= 0 || n_tok > 65535 || n_ff <= 0) return cudaErrorInvalidValue;
    return pdl_launch(paged_swiglu_kernel, dim3((unsigned)((n_ff + 255) / 256), (unsigned)n_tok), dim3(256), 0, stream,
                      out, out_h, g, sg, u, su, n_ff);
}

extern "C" cudaError_t paged_swiglu(float *out, const float *g, int64_t sg, const float *u, int64_t su, int n_tok,
                                    int n_ff, cudaStream_t stream) {
    return swiglu_launch(out, nullptr, g, sg, u, su, n_tok, n_ff, stream);
}

extern "C" cudaError_t paged_swiglu_f16(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u,
                                        int64_t su, int n_tok, int n_ff, cudaStream_t stream) {
    if (!out_h) return cudaErrorInvalidValue;
    return swiglu_launch(out, out_h, g, sg, u, su, n_tok, n_ff, stream);
}

__global__ void paged_to_f16_kernel(uint16_t *out, const float *in, int64_t n) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = pg_f16(in[i]);
}

extern "C" cudaError_t paged_to_f16(uint16_t *out, const float *in, int64_t n, cudaStream_t stream) {
    if (n <= 0) return cudaErrorInvalidValue;
    /* with the PDL attribute like its neighbours: a plain launch would hold the next kernel's
     * blocks back until this grid had ended (every GEMM of a batched step follows one) */
    return pdl_launch(paged_to_f16_kernel, dim3((unsigned)((n + 255) / 256)), dim3(256), 0, stream, out, in, n);
}

__global__ void paged_gather_kernel(float *out, const float *in, const int32_t *idx, int dim) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const float *src = in + (int64_t)idx[blockIdx.x] * dim;
    float *dst = out + (int64_t)blockIdx.x * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

extern "C" cudaError_t paged_gather_rows(float *out, const float *in, const int32_t *idx, int n, int dim,
                                         cudaStream_t stream) {
    if (n <= 0 || dim <= 0) return cudaErrorInvalidValue;
    return pdl_launch(paged_gather_kernel, dim3(n), dim3(256), 0, stream, out, in, idx, dim);
}

template <bool F16>
__global__ void paged_matvec_plain_kernel(float *y, const void *w, const float *x, int64_t rows, int64_t k,
                                          int n) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    int64_t r = blockIdx.x * 4 + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    for (int t = 0; t < n; t++) {
        const float *xt = x + (int64_t)t * k;
        float s = 0;
        for (int64_t i = lane; i < k; i += 32) {
            float wv = F16 ? __half2float(__ushort_as_half(((const uint16_t *)w)[r * k + i]))
                           : ((const float *)w)[r * k + i];
            s = fmaf(wv, xt[i], s);
        }
        s = warp_sum(s);
        if (lane == 0) y[(int64_t)t * rows + r] = s;
    }
}

extern "C" cudaError_t paged_matvec_plain(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows,
                                          int64_t k, int n, cudaStream_t stream) {
    if (rows <= 0 || k <= 0 || n <= 0 || (wtype != QUANT_F32 && wtype != QUANT_F16)) return cudaErrorInvalidValue;
    unsigned grid = (unsigned)((rows + 3) / 4);
    return pdl_launch(wtype == QUANT_F16 ? paged_matvec_plain_kernel<true> : paged_matvec_plain_kernel<false>,
                      dim3(grid), dim3(128), 0, stream, y, w, x, rows, k, n);
}
