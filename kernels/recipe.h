/* Kernels of the layer recipes beyond plain Llama (recipe.cu), for the CUDA backend's general
 * layer: Q/K/V biases, per-head RMSNorm of Q and K, RoPE in either pair layout with a per-pair
 * angle table (frequency factors, linear and YaRN scaling folded in by the caller), the K/V store
 * into the paged cache (paged.h's layout), a bias over strided rows, and Gemma's pieces: post norms,
 * the input scale, the logit softcap and the GELU gate. Launchers follow
 * kernels.h's conventions: device pointers, output first, stream last, nothing allocated, the
 * launch status returned; kernels know no model. Every kernel is launched with PDL and reads
 * nothing before its wait (pdl.cuh's rules), so it sits anywhere in a decode step's chain. */
#ifndef MGI_KERNELS_RECIPE_H
#define MGI_KERNELS_RECIPE_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What cu_qkv_rope_store applies to each head before it stores it; a NULL pointer skips its
 * step. */
typedef struct {
    const float *bq, *bk, *bv;  /* biases: [n_head][head_dim], [n_kv_head][head_dim] x2 */
    const float *q_norm;        /* [head_dim]: RMSNorm weight of every query head */
    const float *k_norm;        /* [head_dim]: of every key head */
    float eps;                  /* the norms' epsilon */
    const double *angle;        /* [n_rot / 2]: pair i of a token at position p turns by p * angle[i] */
    double mscale;              /* cos and sin times this (YaRN's magnitude, attn_factor); 1: none */
    int neox;                   /* pairs (i, i + n_rot/2) (GPT-NeoX layout); 0: (2i, 2i + 1) */
    int neox_rows;              /* q and k hold each head's first n_rot values NEOX-interleaved (value i at
                                 * 2i, value i + n_rot/2 at 2i + 1: kernels.h's cu_rope_epi), v as it is */
} cu_qkv_recipe;

/* For token t of n_tok: each query head of q + t * sq, key head of k + t * sk and value head of
 * v + t * sv gets its bias; query and key heads their RMSNorm (x / sqrt(mean(x^2) + eps) * w,
 * the mean over head_dim), then RoPE over their first n_rot values (angles in double, cos and sin
 * rounded to f32 after mscale, as the CPU reference computes them); the query heads go to
 * q_out[t] (f32 [n_tok][n_head][head_dim], contiguous), keys and values as f16 to row cell[t] of
 * the layer's caches (kv_dim = n_kv_head * head_dim). head_dim <= 256, even n_rot <= head_dim. */
cudaError_t cu_qkv_rope_store(float *q_out, uint16_t *k_cache, uint16_t *v_cache, const float *q, int64_t sq,
                              const float *k, int64_t sk, const float *v, int64_t sv, const int32_t *pos,
                              const int32_t *cell, const cu_qkv_recipe *r, int n_tok, int n_head, int n_kv_head,
                              int head_dim, int n_rot, cudaStream_t stream);

/* x[t * stride + i] += b[i] for t < n_rows, i < width. */
cudaError_t cu_bias_add(float *x, int64_t stride, const float *b, int n_rows, int64_t width, cudaStream_t stream);

/* x[i] *= s for i < n (the embedding scale of Gemma's input). */
cudaError_t cu_scale(float *x, int64_t n, float s, cudaStream_t stream);

/* x[i] = cap * tanh(x[i] / cap) for i < n, cap > 0 (Gemma 2's final logit softcap). */
cudaError_t cu_softcap(float *x, int64_t n, float cap, cudaStream_t stream);

/* out[t][i] = gelu_tanh(g[t * sg + i]) * u[t * su + i] for i < n_ff, gelu_tanh(x) =
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) in double as the CPU reference computes it,
 * rounded to f32 before the product; with out_h non-null out also as f16 bits there (paged.h's
 * paged_to_f16 rounding: the next GEMM's input). Gemma's gated FFN. */
cudaError_t cu_geglu(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u, int64_t su, int n_tok,
                     int n_ff, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
