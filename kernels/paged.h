/* Kernels of the CUDA engine backend over engine/batch.h's paged KV cache (paged.cu): RoPE with
 * the K/V store into cells, causal split-KV attention of any batch of tokens through page
 * tables, the residual add fused with the next RMSNorm, SwiGLU over strided rows, f32 -> f16, row
 * gather, and a plain matvec for F32/F16 rows whose length is not a multiple of 32 (which kernels.h's matvec
 * does not take). Launchers follow kernels.h's conventions: device pointers, output first,
 * stream last, nothing allocated, the launch status returned. */
#ifndef MGI_KERNELS_PAGED_H
#define MGI_KERNELS_PAGED_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Cells of PAGED_PAGE consecutive positions (engine/batch.h's ENGINE_KV_PAGE). */
#define PAGED_PAGE 64

/* Causal attention of n_tok query tokens: token t (q, out f32 [n_tok][n_head][head_dim]) attends
 * to positions 0..pos[t] of its sequence seq[t], position p in cell
 * pages[seq[t] * page_stride + p / PAGED_PAGE] * PAGED_PAGE + p % PAGED_PAGE of the layer's
 * cache f16 [n_cells][kv_dim] (as paged_rope_store wrote it, kv_dim = n_kv_head * head_dim).
 * GQA: head h reads kv head h / (n_head / n_kv_head), at most 8 query heads per kv head;
 * head_dim <= 256. Each token's positions are split into n_split ranges of
 * ceil((pos+1) / n_split) positions (the tensor-core kernel: at least 256) rounded up to whole
 * pages (at least one), merged in split
 * order (the grid depends on n_tok and n_split only, so a captured graph replays at any
 * position); a token's result depends on nothing else in the batch. n_tok <= PAGED_ATT_TOKENS,
 * n_split <= 256. scratch holds paged_attention_scratch_bytes(n_tok, ...), and launches of fewer
 * tokens or splits may share it; it must be zero-filled once after it is allocated: its arrival
 * counters are left at zero by every launch that completes. kv_ready (V3): token t's cells at
 * positions below pos[t] were written before the previous kernel of the stream started (each
 * sequence has one token in the launch and no kernel of the PDL chain writes those cells), so
 * the kernel copies its first of them before it waits for that kernel (pdl.cuh); 0: after. */
#define PAGED_ATT_TOKENS 64
/* paged_attention runs the tensor-core kernel's V3 for head_dim 64, 128 and 256 (half the mma of its
 * first form, a merge of splits with its loads in flight), the tiled CUDA-core one for other
 * multiples of 8, the untiled one otherwise; V3 reads pos, seq and pages before its PDL wait, so
 * they must not be written by a kernel of the PDL chain (the engine copies them in before the
 * step). paged_attention_variant (kernel lab and tests): the same with variant 3 (paged_attention),
 * 2 (the tensor-core kernel's first form, head_dim 64 and 128) or 1 (the tiled one for every multiple
 * of 8). */
size_t paged_attention_scratch_bytes(int n_tok, int n_head, int head_dim, int n_split);
cudaError_t paged_attention(float *out, const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                            const int32_t *pos, const int32_t *seq, const int32_t *pages, int page_stride,
                            void *scratch, int n_tok, int n_head, int n_kv_head, int head_dim, int n_split,
                            int kv_ready, float scale, cudaStream_t stream);
cudaError_t paged_attention_variant(int variant, float *out, const float *q, const uint16_t *k_cache,
                                    const uint16_t *v_cache, const int32_t *pos, const int32_t *seq,
                                    const int32_t *pages, int page_stride, void *scratch, int n_tok, int n_head,
                                    int n_kv_head, int head_dim, int n_split, int kv_ready, float scale,
                                    cudaStream_t stream);
/* paged_attention for the general layer's recipes: a windowed layer (window > 0) lets token t see
 * positions max(0, pos[t] - window + 1)..pos[t] only, and softcap > 0 turns each scaled score s
 * into softcap * tanh(s / softcap) before the softmax (Gemma 2); 0 and 0: paged_attention. The
 * same kernels as paged_attention (their instances with the mask and the softcap compiled in);
 * pages wholly before the window are not read, and a token's splits divide its window. */
cudaError_t paged_attention_recipe(float *out, const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                                   const int32_t *pos, const int32_t *seq, const int32_t *pages, int page_stride,
                                   void *scratch, int n_tok, int n_head, int n_kv_head, int head_dim, int n_split,
                                   int kv_ready, float scale, int window, float softcap, cudaStream_t stream);
/* What paged_attention_qkn does to each token's new query and key before it attends: the per-head
 * RMSNorm of the recipes with Q/K norms (Qwen3: x / sqrt(mean(x^2) + eps) * w over head_dim, the
 * sum of squares in double) and then RoPE by a per-pair angle table (cos and sin of the angle
 * reduced in double, in f32, times mscale: kernels.h's cu_rope_epi arithmetic), as recipe.h's
 * cu_qkv_rope_store computes them. The decode step then needs no launch between its QKV matvec
 * (which hands Q and K on unturned: cu_rope_epi.k_raw) and attention. */
typedef struct {
    const float *k_raw;           /* [n_tok][n_kv_head * head_dim]: each token's key, unnormed, unturned */
    uint16_t *k_store;            /* the k_cache of the launch (writable): the turned key goes to cell[t] */
    const int32_t *cell;          /* [n_tok]: the token's cell */
    const float *q_norm, *k_norm; /* [head_dim] */
    float eps;
    const double *angle;          /* [n_rot / 2]: pair i at position p turns by p * angle[i] */
    double mscale;
    int n_rot;
    int neox;                     /* pairs (i, i + n_rot / 2) (then n_rot == head_dim); 0: (2i, 2i + 1) */
} paged_qk_norm;

/* Whether paged_attention_qkn takes this shape: head_dim 128 or 256 (64 without a window or a
 * softcap), at most 8 query heads per kv head, n_rot even and <= head_dim, and NEOX pairs only
 * over the whole head. */
int paged_attention_qkn_supported(int n_head, int n_kv_head, int head_dim, int n_rot, int neox, int window,
                                  float softcap);
/* paged_attention (V3, kv_ready) for a decode step of one token per sequence whose query q is
 * unnormed and unturned and whose key is in qn->k_raw, not yet in the cache: each block norms and
 * turns its query heads as it loads them; the block whose split holds the token's own position
 * turns its key, stores it (f16) at row cell[t] of k_cache and uses it for that position. V must
 * be in the cache already. Every other cell as paged_attention; window and softcap as
 * paged_attention_recipe's (0, 0: none). Not a supported shape (paged_attention_qkn_supported):
 * cudaErrorNotSupported, nothing launched. */
cudaError_t paged_attention_qkn(float *out, const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                                const int32_t *pos, const int32_t *seq, const int32_t *pages, int page_stride,
                                void *scratch, int n_tok, int n_head, int n_kv_head, int head_dim, int n_split,
                                float scale, int window, float softcap, const paged_qk_norm *qn, cudaStream_t stream);
/* The same, writing out also as f16 bits to out_h (paged_to_f16's rounding): the next GEMM's input
 * without a conversion launch. Only the default kernel (3, head_dim 64, 128 or 256); otherwise
 * cudaErrorNotSupported with nothing launched. */
cudaError_t paged_attention_f16(float *out, uint16_t *out_h, const float *q, const uint16_t *k_cache,
                                const uint16_t *v_cache, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                                int page_stride, void *scratch, int n_tok, int n_head, int n_kv_head, int head_dim,
                                int n_split, int kv_ready, float scale, cudaStream_t stream);

/* The same attention for n_tok consecutive tokens of one sequence at positions pos0..pos0+n_tok-1
 * (a prompt pass), on the tensor cores (prefill.cu): pages is that sequence's page table. Q and P
 * are rounded to f16 (f32 accumulation). For head_dim 64 or 128 and 1, 2, 4, 8 or 16 query heads
 * per kv head (paged_attention_prefill_supported); pos0 is a launch argument, so it is not for
 * graphs replayed at other positions. A rerun gives the same bits. */
int paged_attention_prefill_supported(int n_head, int n_kv_head, int head_dim);
cudaError_t paged_attention_prefill(float *out, const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                                    const int32_t *pages, int pos0, int n_tok, int n_head, int n_kv_head,
                                    int head_dim, float scale, cudaStream_t stream);
/* paged_attention_prefill runs v3 (wgmma; v2 where the device is not compute capability 9.0).
 * paged_attention_prefill_variant (kernel lab and tests): the same with variant 3 or 2 (mma.sync,
 * 128 rows a block, two warp groups splitting the keys, cp.async double buffering, ldmatrix); the
 * first kernel, v1, is the kernel lab's (tests/kbench/prefill_v1.cuh). */
cudaError_t paged_attention_prefill_variant(int variant, float *out, const float *q, const uint16_t *k_cache,
                                            const uint16_t *v_cache, const int32_t *pages, int pos0, int n_tok,
                                            int n_head, int n_kv_head, int head_dim, float scale, cudaStream_t stream);

/* paged_attention_prefill_variant for the general layer's recipes: window > 0 lets the token at
 * position p see keys max(0, p - window + 1)..p only (pages wholly before a block's window are not
 * read), softcap > 0 turns each scaled score s into softcap * tanh(s / softcap) before the softmax;
 * variant 3 is production's (v2 off compute capability 9.0), 2 for tests. */
cudaError_t paged_attention_prefill_recipe(int variant, float *out, const float *q, const uint16_t *k_cache,
                                           const uint16_t *v_cache, const int32_t *pages, int pos0, int n_tok,
                                           int n_head, int n_kv_head, int head_dim, float scale, int window,
                                           float softcap, cudaStream_t stream);

/* RoPE of one pass's Q and K and the K/V store, in one launch: for token t, q_out[t] (f32
 * [n_tok][n_head][head_dim], contiguous) = cu_rope(q + t * sq), and cu_rope(k + t * sk) and v + t * sv
 * go to row cell[t] of the layer's f16 cache (kv_dim = n_kv_head * head_dim). RoPE as kernels.h's
 * rope: adjacent pairs of the first n_rot values of each head turned by pos * theta^(-2i/n_rot).
 * The strides let Q, K and V come from one fused matvec output or from three. */
cudaError_t paged_rope_store(float *q_out, uint16_t *k_cache, uint16_t *v_cache, const float *q, int64_t sq,
                             const float *k, int64_t sk, const float *v, int64_t sv, const int32_t *pos,
                             const int32_t *cell, int n_tok, int n_head, int n_kv_head, int head_dim, int n_rot,
                             float theta, cudaStream_t stream);

/* x[r] += d[r]; out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, rows of dim f32: the residual
 * add and the next block's RMSNorm in one pass. out may equal d. */
cudaError_t paged_add_rmsnorm(float *x, float *out, const float *d, const float *weight, int rows, int dim,
                              float eps, cudaStream_t stream);
/* The same with d the sum of `parts` planes d + s * plane (s = 0, 1, ..., added in that order:
 * cu_gemm_f16_split_parts' planes, gemm_sum's bits), and with out_h non-null out also as f16 bits
 * there (paged_to_f16's rounding; 8-byte aligned when dim % 4 == 0): a GEMM's input without a
 * conversion launch. With parts > 1, plane >= rows * dim and out may be d but must not overlap the
 * later planes. weight NULL: only x += d (out and out_h untouched; out_h must be NULL). */
cudaError_t paged_add_rmsnorm_sum(float *x, float *out, uint16_t *out_h, const float *d, int parts, int64_t plane,
                                  const float *weight, int rows, int dim, float eps, cudaStream_t stream);
/* paged_add_rmsnorm_sum with Gemma's post norm (post: its weight, NULL: none) of the planes' sum
 * before the add: x += sum / sqrt(mean(sum^2) + eps) * post (the sum of squares in double, as the
 * CPU reference's), then out = the next norm as above. out must be given (it may be d): it holds
 * the sum in between, and keeps it when weight is NULL. One launch where a Gemma layer had two. */
cudaError_t paged_post_add_rmsnorm(float *x, float *out, uint16_t *out_h, const float *d, int parts, int64_t plane,
                                   const float *post, const float *weight, int rows, int dim, float eps,
                                   cudaStream_t stream);

/* out[t][i] = silu(g[t * sg + i]) * u[t * su + i] for i < n_ff (kernels.h's cu_swiglu over strided
 * rows, for a fused gate/up matvec output). */
cudaError_t paged_swiglu(float *out, const float *g, int64_t sg, const float *u, int64_t su, int n_tok, int n_ff,
                         cudaStream_t stream);
/* The same, writing out also as f16 bits to out_h (paged_to_f16's rounding). */
cudaError_t paged_swiglu_f16(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u, int64_t su,
                             int n_tok, int n_ff, cudaStream_t stream);

/* out[i] = in[i] rounded to f16 (bits), for kernels.h's cu_gemm_f16 input. */
cudaError_t paged_to_f16(uint16_t *out, const float *in, int64_t n, cudaStream_t stream);

/* out[i][:] = in[idx[i]][:], rows of dim floats. */
cudaError_t paged_gather_rows(float *out, const float *in, const int32_t *idx, int n, int dim,
                              cudaStream_t stream);

/* Y[n][rows] = W[rows][k] . X[n][k] for W in F32 or F16 (GGUF layout, any k), X f32; one warp
 * per row, every token; for the small matrices kernels.h's matvec cannot take. */
cudaError_t paged_matvec_plain(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows,
                               int64_t k, int n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
