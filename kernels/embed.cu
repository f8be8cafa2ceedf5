/* Embedding lookup (kernels.h: embed): one block per token dequantises its table row, kept in
 * GGUF layout, 32 weights per thread per step. */
#include <math.h>
#include "kernels/kernels.h"
#include "kernels/dequant.cuh"
#include "kernels/pdl.cuh"
#include "kernels/trace.cuh"

template <int T>
__global__ void embed_kernel(float *out, const uint8_t *table, const int32_t *ids, int64_t n_rows, int64_t dim) {
    kt_rec *tr = kt_open(KT_EMBED, out); /* the block timeline (trace.cuh), null unless traced */
    kt_mark(tr, 0);
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    kt_mark(tr, 2);
    int32_t id = ids[blockIdx.x];
    float *o = out + blockIdx.x * dim;
    if (id < 0 || id >= n_rows) {
        for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = nanf("");
    } else {
        const uint8_t *row = table + (int64_t)id * dq_row_bytes(T, dim);
        for (int64_t u = threadIdx.x; u < dim / 32; u += blockDim.x) {
            float w[32];
            dq_unit<T>(row, u, w);
#pragma unroll
            for (int i = 0; i < 32; i++) o[32 * u + i] = w[i];
        }
    }
    kt_mark(tr, 5);
}

extern "C" cudaError_t embed_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s) { return kt_set(buf, cap, s); }

extern "C" cudaError_t cu_embed(float *out, const void *table, uint32_t ttype, const int32_t *ids, int n_tok,
                             int64_t n_rows, int64_t dim, cudaStream_t stream) {
    int64_t be = dq_block_elems(ttype);
    if (n_tok <= 0 || dim <= 0 || be == 0 || dim % be || dq_row_bytes(ttype, dim) == 0) return cudaErrorInvalidValue;
    const uint8_t *t = (const uint8_t *)table;
    switch (ttype) {
    case QUANT_F32: return pdl_launch(embed_kernel<QUANT_F32>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_F16: return pdl_launch(embed_kernel<QUANT_F16>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q4_0: return pdl_launch(embed_kernel<QUANT_Q4_0>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q5_0: return pdl_launch(embed_kernel<QUANT_Q5_0>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q8_0: return pdl_launch(embed_kernel<QUANT_Q8_0>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q4_K: return pdl_launch(embed_kernel<QUANT_Q4_K>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q6_K: return pdl_launch(embed_kernel<QUANT_Q6_K>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_BF16: return pdl_launch(embed_kernel<QUANT_BF16>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q4_1: return pdl_launch(embed_kernel<QUANT_Q4_1>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q5_1: return pdl_launch(embed_kernel<QUANT_Q5_1>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q2_K: return pdl_launch(embed_kernel<QUANT_Q2_K>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q3_K: return pdl_launch(embed_kernel<QUANT_Q3_K>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    case QUANT_Q5_K: return pdl_launch(embed_kernel<QUANT_Q5_K>, dim3(n_tok), dim3(128), 0, stream, out, t, ids, n_rows, dim);
    default: return cudaErrorInvalidValue;
    }
}
