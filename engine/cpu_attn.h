/* Attention of one query head over an f32 KV cache for the fast CPU backend, vectorised through
 * quant/dot.h's kernels: scores q.k_j * scale, a softmax, and the weighted sum of the v_j. The
 * cache may be paged: position j lives in cell cells[j]. Which positions a token sees (causal
 * mask, sliding window, the sequence's pages) is the caller's choice of cells. */
#ifndef MGI_ENGINE_CPU_ATTN_H
#define MGI_ENGINE_CPU_ATTN_H

#include <stddef.h>
#include <stdint.h>
#include "quant/dot.h"

/* out[d] = sum_j softmax_j(scale * dot(q, K_j)) V_j[d] for d < head_dim, over j < n_pos (>= 1):
 * K_j = k + cells[j] * stride and V_j = v + cells[j] * stride (floats; k and v already point at
 * this head's slice of cell 0). scores: n_pos floats of scratch. */
void cpu_attn_head(quant_isa isa, float *out, const float *q, const float *k, const float *v, size_t stride,
                   const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores);
/* The heads one call of cpu_attn_heads takes at most. */
#define CPU_ATTN_GROUP 4
/* cpu_attn_head for g query heads (1 <= g <= CPU_ATTN_GROUP) that share K and V (grouped-query
 * attention): q and out hold the g heads back to back, head_dim values apart; scores is
 * g * n_pos floats of scratch. Each head's output is bit for bit what cpu_attn_head gives it
 * alone (the grouping shares the loads of K and V, not the arithmetic), so how a caller groups
 * heads changes no result. */
void cpu_attn_heads(quant_isa isa, int g, float *out, const float *q, const float *k, const float *v, size_t stride,
                    const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores);
/* 1 when cpu_attn_head(s) take their AVX-512 register form (engine/cpu_avx512.c) for heads of
 * head_dim values on path isa: an AVX-512 path and a multiple of 16 values up to 256. */
int cpu_attn_head_in_registers(quant_isa isa, int32_t head_dim);
/* That form; only where cpu_attn_head_in_registers says so. */
void cpu_attn_heads_avx512(int g, float *out, const float *q, const float *k, const float *v, size_t stride,
                           const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores);

#endif
