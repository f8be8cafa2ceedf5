/* Decode attention over an f16 KV cache (kernels.h: cu_kv_store, cu_attention_decode). Split-KV
 * (flash-decoding): block (split, kv head, sequence) runs an online softmax over ATTN_SPLIT
 * positions for all the query heads sharing that kv head (K and V read once per group), its 4
 * warps taking interleaved positions; a combine pass merges the splits. Splits past a
 * sequence's length exit at once, so the grid depends only on max_ctx (graph-friendly).
 * Kernels: attention.cuh. */
#include "kernels/attention.cuh"

__global__ void kv_store_kernel(uint16_t *kc, uint16_t *vc, const float *k, const float *v, const int32_t *pos,
                                int n_seq, int n_kv_head, int head_dim, int max_ctx) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= (int64_t)n_seq * n_kv_head * head_dim) return;
    int e = (int)(i % head_dim);
    int64_t sh = i / head_dim; /* seq * n_kv_head + head */
    int p = pos[sh / n_kv_head];
    if (p < 0 || p >= max_ctx) return;
    int64_t at = (sh * max_ctx + p) * head_dim + e;
    kc[at] = __half_as_ushort(__float2half_rn(k[i]));
    vc[at] = __half_as_ushort(__float2half_rn(v[i]));
}

extern "C" cudaError_t cu_kv_store(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                                const int32_t *pos, int n_seq, int n_kv_head, int head_dim, int max_ctx,
                                cudaStream_t stream) {
    if (n_seq <= 0 || n_kv_head <= 0 || head_dim <= 0 || max_ctx <= 0) return cudaErrorInvalidValue;
    int64_t n = (int64_t)n_seq * n_kv_head * head_dim;
    kv_store_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(k_cache, v_cache, k, v, pos, n_seq,
                                                                      n_kv_head, head_dim, max_ctx);
    return cudaGetLastError();
}

extern "C" size_t cu_attention_scratch_bytes(int n_seq, int n_head, int head_dim, int max_ctx) {
    return (size_t)n_seq * n_head * attn_splits(max_ctx) * (size_t)(head_dim + 2) * sizeof(float);
}

extern "C" cudaError_t cu_attention_decode(float *out, const float *q, const uint16_t *k_cache,
                                        const uint16_t *v_cache, const int32_t *len, void *scratch, int n_seq,
                                        int n_head, int n_kv_head, int head_dim, int max_ctx, float scale,
                                        cudaStream_t stream) {
    if (n_seq <= 0 || n_head <= 0 || n_kv_head <= 0 || n_head % n_kv_head || n_head / n_kv_head > ATTN_MAX_G ||
        head_dim <= 0 || head_dim > 256 || max_ctx <= 0 || n_seq > 65535)
        return cudaErrorInvalidValue;
    if (head_dim % 8 == 0)
        return attn_launch<2>(out, q, k_cache, v_cache, len, scratch, n_seq, n_head, n_kv_head, head_dim, max_ctx, scale, stream);
    return attn_launch<1>(out, q, k_cache, v_cache, len, scratch, n_seq, n_head, n_kv_head, head_dim, max_ctx, scale, stream);
}
