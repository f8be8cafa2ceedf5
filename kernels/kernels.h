/* The plain-C interface to mgi's CUDA kernels. Each launcher takes device pointers, sizes and a
 * stream, output first and stream last; it allocates nothing, launches asynchronously and
 * returns the launch status (cudaSuccess, or cudaErrorInvalidValue for arguments it cannot
 * handle). Kernels know no model: shapes and strides are all in the arguments. */
#ifndef MGI_KERNELS_H
#define MGI_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every decode-step kernel (matvec, gemm, the small ops, embed, argmax, paged.h's decode kernels) is
 * launched with programmatic dependent launch (sm_90): it may start while the previous kernel
 * of the stream finishes, and waits for it on the device before touching its data
 * (kernels/pdl.cuh has the rules). Matvec weights are read before that wait, so a matvec must
 * not be the kernel right after the one that wrote its weights (cu_matvec_repack: synchronise
 * after loading). kernels_use_pdl(0) launches without the attribute (kernel lab comparisons;
 * process-wide, not for use while other threads launch). */
void kernels_use_pdl(int on);
/* Block timelines (kernels/trace.cuh: the decode matvecs, decode attention, SwiGLU): from the next
 * kernel on s, thread 0 of each block of those kernels writes a 128-byte record of when it reached
 * its marks into buf (device memory of bytes, cleared by the caller); NULL switches it off. A
 * diagnostic (engine: MGI_TRACE); not for use while other threads launch. */
cudaError_t kernels_trace(void *buf, size_t bytes, cudaStream_t s);
typedef struct {
    uint64_t tag;         /* what the launch works on: the weights' address, or the output's */
    uint32_t kind, block; /* kernels/trace.cuh's KT_* (0: an unused record), the linear block index */
    uint32_t smid, grid;  /* the SM it ran on, the launch's block count */
    uint64_t g[6];        /* %globaltimer (ns) at each of the kernel's marks, 0 where it has none */
    uint64_t c[6];        /* clock64 of its SM at each mark */
} kernels_trace_rec;


/* ---- decode matrix-vector products (matvec.cu) -----------------------------------------------
 * Y[n][rows] = W[rows][k] . X[n][k] for n = 1..MATVEC_MAX_N tokens, weights read once for all
 * n. W is a weight matrix of GGUF type wtype (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K), after a
 * one-time cu_matvec_repack into the layout the kernel reads; k is the row length (a multiple of the
 * type's block size). Accumulation is in f32. X in f32 is split exactly into two f16 halves for
 * the tensor-core paths, so |x| must stay below 65504; v10 and v11 (below) round X to int8 per
 * 32 values instead. */
#define MATVEC_MAX_N 8

/* 1 when matvec handles this weight type. */
int cu_matvec_supported(uint32_t wtype);
/* Bytes of the repacked form of a [rows, k] matrix; 0 when the type is unsupported or k is not
 * a multiple of its block size. */
size_t cu_matvec_repacked_bytes(uint32_t wtype, int64_t rows, int64_t k);
/* Repacks a matrix in GGUF layout (on the device) into out (cu_matvec_repacked_bytes). Once per
 * weight, at load; the source may be freed afterwards. */
cudaError_t cu_matvec_repack(void *out, const void *w, uint32_t wtype, int64_t rows, int64_t k,
                          cudaStream_t stream);
/* The kernel cu_matvec_f32 / cu_matvec_f16 / cu_matvec_f32_swiglu and the fusions run, by type and
 * shape (matvec.cuh): for 1 to 4 tokens (Q6_K: 2) of Q4_0, Q4_K, Q5_K, Q8_0, Q6_K with k a multiple of
 * 256 (Q8_0: 128), v11 (X rounded to int8 per 32 values as llama.cpp's GPU path does, dp4a;
 * relative error ~1e-3 instead of ~1e-7; the weights streamed through a shared-memory ring per
 * warp by cp.async), or v10 (the same through registers) where no ring of 2 stages fits; other
 * counts and shapes of those types v3 (tensor cores, f32 X exact). Same repacked layout for all.
 * Q4_1, Q5_0, Q5_1, Q2_K, Q3_K keep their GGUF rows: v13 for 1 to 4 tokens with k a multiple of
 * 256 (X rounded to int8 per 32 values, dp4a), else v1 (f32 X); F32, F16, BF16 v1. cu_matvec_ring_stages: the ring depth (stages of one unit per warp)
 * v11 runs a case with on the current device (norm: cu_matvec_f32_norm's, whose shared memory
 * is the largest); 0 when v10 runs it or it is no v10 case. */
int cu_matvec_ring_stages(uint32_t wtype, int64_t rows, int64_t k, int n, int norm);
/* The kernel cu_matvec_f32 / _f16 / _f32_swiglu runs for this case on the current device: 11,
 * 10, 13, 3 or 1 as above (10 and up round X to int8; v13 also needs 16-byte aligned weights, as
 * cudaMalloc gives, else v1); 0 where the arguments are not a case (cu_matvec_repacked_bytes 0, n outside
 * 1..MATVEC_MAX_N). Tests pick their error budget by it. */
int cu_matvec_kernel(uint32_t wtype, int64_t rows, int64_t k, int n);
/* X in f32 [n][k] or in f16 bits [n][k]; Y f32 [n][rows]. */
cudaError_t cu_matvec_f32(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows,
                       int64_t k, int n, cudaStream_t stream);
cudaError_t cu_matvec_f16(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows,
                       int64_t k, int n, cudaStream_t stream);
/* cu_matvec_f32 of X[t][i] = silu(g[t * sg + i]) * u[t * su + i] (i < k): SwiGLU computed while X is
 * staged (same f32 formula as paged_swiglu), so the FFN's down matvec needs no separate SwiGLU
 * launch and no X buffer. Any strides; aligned (g, u 16-byte aligned, sg, su multiples of 4)
 * rows are read as float4. Same types, n and results as cu_matvec_f32 of paged_swiglu's output. */
cudaError_t cu_matvec_f32_swiglu(float *y, const void *w, uint32_t wtype, const float *g, int64_t sg,
                              const float *u, int64_t su, int64_t rows, int64_t k, int n,
                              cudaStream_t stream);
/* A post-normed product left pending between fused decode kernels (Gemma's post-attention and
 * post-FFN norms): the residual is x + part * ps * post, per token ps = 1 / sqrt(mean(part^2) +
 * eps) (paged_post_add_rmsnorm's arithmetic, the sum of squares in double), n the residual's width.
 * part [tokens][n] is a plain product (cu_matvec_f32, cu_matvec_f32_prefilled), so no block of
 * its kernel waits to norm every row (cu_matvec_f32_acc_post's last block); the NORM matvec that
 * reads the residual next takes the pending product (pend of cu_matvec_f32_norm_rope, _beside,
 * _pair and of cu_matvec_f32_norm_glu with gelu), and cu_post_pend_apply adds it where nothing does. */
typedef struct {
    const float *part; /* [tokens][n] */
    const float *post; /* [n] the post norm's weight */
    float eps;
    int n;
} cu_post_pend;
/* x [n_tok][pend.n] += the pending product, in place (its own launch). */
cudaError_t cu_post_pend_apply(float *x, const cu_post_pend *pend, int n_tok, cudaStream_t stream);
/* Decode fusions, one launch each where the decode step had two or three (v11 and v10 only, so X
 * is rounded to int8 per 32 values as v10 rounds it; same budget):
 *   cu_matvec_f32_norm: Y = W . cu_rmsnorm(X) with rmsnorm as kernels.h's (X[t] / sqrt(mean(X[t]^2) +
 *     eps) * g, g [k]); every block sums X^2 itself while staging X * g and scales its outputs by
 *     1 / rms, so no normed copy of X is written. x and g 16-byte aligned.
 *   cu_matvec_f32_acc: Y += W . X (the residual add of kernels.h's cu_add, fused).
 *   cu_matvec_f32_swiglu_acc: Y += W . (silu(g) * u), cu_matvec_f32_swiglu's X (same strides).
 * Y must not overlap X (or g, u). cu_matvec_fused_supported says whether they take a case: wtype
 * Q4_0, Q4_K, Q5_K, Q8_0 or Q6_K (v11 / v10), Q4_1, Q5_0, Q5_1, Q2_K or Q3_K (v13, weights 16-byte
 * aligned), n 1 to 4 (Q6_K: 2), k a multiple of 256 (Q8_0: 128) and the shared memory fits the
 * current device; otherwise they launch nothing and return cudaErrorNotSupported (the caller runs
 * the unfused kernels). */
int cu_matvec_fused_supported(uint32_t wtype, int64_t rows, int64_t k, int n);
/* cu_matvec_f32_norm of a gate/up matrix, gate rows [0, F) stacked on up rows [F, 2F) (rows = 2F, F a
 * multiple of 16), whose epilogue writes Y [n][F] = silu(gate) * up (paged_swiglu's formula; gelu 1:
 * gelu_tanh(gate) * up, cu_geglu's) instead of both products: the decode FFN without its gate
 * launch. v11 only (a ring that fits: cu_matvec_ring_stages); otherwise cudaErrorNotSupported with
 * nothing launched. */
cudaError_t cu_matvec_f32_norm_glu(float *y, const void *w, uint32_t wtype, const float *x, const float *g, float eps,
                                int64_t rows, int64_t k, int n, int gelu, const cu_post_pend *pend, float *x_out,
                                cudaStream_t stream);
cudaError_t cu_matvec_f32_norm(float *y, const void *w, uint32_t wtype, const float *x, const float *g, float eps,
                            int64_t rows, int64_t k, int n, cudaStream_t stream);
cudaError_t cu_matvec_f32_acc(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows, int64_t k, int n,
                           cudaStream_t stream);
/* cu_matvec_f32_acc for an X whose kernel runs long after this one's blocks can start (decode
 * attention before wo): v11 copies its whole first ring fill before its PDL wait, which lands
 * while that kernel runs (otherwise one or two slots: matvec_dp4a.cuh's mv11_pre; PERF-LOG run 66). */
cudaError_t cu_matvec_f32_acc_prefilled(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows, int64_t k,
                                     int n, cudaStream_t stream);
/* cu_matvec_f32 (Y = W . X) the same way: a pending product made right after decode attention. Same
 * cases as the fused matvecs (cu_matvec_fused_supported); otherwise cudaErrorNotSupported. */
cudaError_t cu_matvec_f32_prefilled(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows, int64_t k,
                                 int n, cudaStream_t stream);
/* cu_matvec_f32_acc with Gemma's post norm of the product before the add: Y += W . X / rms(W . X)
 * * post, the rms over the rows of each token (paged_post_add_rmsnorm's arithmetic, sum of squares
 * in double), so the layer needs no post-norm launch. part: scratch of n * rows floats, count: an
 * unsigned that is 0 (device memory zeroed once: each launch leaves it 0). One launch at a time
 * per part/count. prefilled: as cu_matvec_f32_acc_prefilled. v11 or v10 (Q4_0, Q4_K, Q8_0, Q6_K as
 * cu_matvec_fused_supported), rows % 4 == 0, y, post and part 16-byte aligned; otherwise
 * cudaErrorNotSupported with nothing launched. */
cudaError_t cu_matvec_f32_acc_post(float *y, const void *w, uint32_t wtype, const float *x, const float *post, float eps,
                                float *part, unsigned *count, int64_t rows, int64_t k, int n, int prefilled,
                                cudaStream_t stream);
cudaError_t cu_matvec_f32_swiglu_acc(float *y, const void *w, uint32_t wtype, const float *g, int64_t sg,
                                  const float *u, int64_t su, int64_t rows, int64_t k, int n, cudaStream_t stream);
/* What the general layer (engine/cuda_layer.c) changes in cu_matvec_f32_norm_rope's epilogue, for
 * recipes without per-head norms: bq, bk, bv (NULL: none) added to the Q, K and V rows' sums
 * first (the part's heads, in their true order); angle: pair j of a token at position p turns by
 * p * angle[j], cos and sin in double times mscale rounded to f32 (recipe.h's cu_qkv_rope_store
 * arithmetic) instead of paged_rope_store's base; neox_rows: the matrix holds each Q and K head's
 * first n_rot rows NEOX-interleaved (row 2j its value j, row 2j + 1 its value j + n_rot / 2: the
 * pairs that NEOX RoPE turns together are adjacent rows, as NORM pairs are), and the values go to
 * their true places. k_raw (NULL: none): the recipes with per-head Q/K norms, whose heads
 * paged_attention_qkn (paged.h) norms and turns: Q and K are handed on unturned (biases added), Q
 * into q_out and K as f32 into k_raw [n][kv_dim] (true order both), V as always. */
typedef struct {
    const float *bq, *bk, *bv;
    const double *angle;
    double mscale;
    int neox_rows;
    float *k_raw;
} cu_rope_epi;

/* cu_matvec_f32_norm for a layer's Q, K and V rows with paged_rope_store (paged.h) in its epilogue,
 * so a decode layer needs no RoPE + K/V-store launch: the first nq rows of W are Q rows (heads of
 * head_dim, rotated into q_out [n][nq]), the next nk K rows (0 or kv_dim: rotated, stored as f16 at
 * k_cache + cell[t] * kv_dim), the rest V rows (0 or kv_dim: stored at v_cache + cell[t] * kv_dim);
 * pos[t] the token's position, n_rot and theta as paged_rope_store's (epi NULL; else epi's
 * biases and rotation: cu_rope_epi). Nothing is written to a Y.
 * Results equal to cu_matvec_f32_norm then paged_rope_store, bit for bit. Same cases as
 * cu_matvec_f32_norm (cu_matvec_fused_supported), plus nq a multiple of head_dim, head_dim and n_rot even,
 * n_rot <= head_dim; else cudaErrorInvalidValue or cudaErrorNotSupported, nothing launched.
 * pend, x_out (here, in _beside and _pair, and in cu_matvec_f32_norm_glu with gelu; NULL: none):
 * x lacks a pending product of width k (cu_post_pend), normed with it added; x_out (not x): the
 * residual so read, x + pend, written there [n][k] by one block, so that the next pending product
 * can be relative to it (pend NULL: a copy of x). v11 only (its ring fits beside X; the pair:
 * its two grids); otherwise cudaErrorNotSupported. */
cudaError_t cu_matvec_f32_norm_rope(const void *w, uint32_t wtype, const float *x, const float *g, float eps,
                                 int64_t rows, int64_t k, int n, float *q_out, uint16_t *k_cache,
                                 uint16_t *v_cache, const int32_t *pos, const int32_t *cell, int64_t nq, int64_t nk,
                                 int64_t kv_dim, int head_dim, int n_rot, float theta, const cu_rope_epi *epi,
                                 const cu_post_pend *pend, float *x_out, cudaStream_t stream);
/* The same, launched right behind another cu_matvec_f32_norm_rope of the same x (a layer whose V is
 * in another type than its Q and K: Q4_K_M's Q6_K V): it reads x at once instead of after its PDL
 * wait, and waits for that kernel only before it exits, so the two run side by side. Only where
 * x was complete before the kernel in front of it passed its own wait, and that kernel neither
 * reads nor writes what this one writes (pdl.cuh's rule 1 exception). front_blocks: that kernel's
 * grid (cu_matvec_fused_blocks), whose blocks hold one SM each; this grid is shaped for the SMs it
 * leaves, so that none of its blocks queues behind it (0: shaped for the whole device); its blocks
 * then group the sums otherwise than cu_matvec_f32_norm_rope's, so its outputs equal those within
 * rounding, not bit for bit. */
cudaError_t cu_matvec_f32_norm_rope_beside(const void *w, uint32_t wtype, const float *x, const float *g, float eps,
                                        int64_t rows, int64_t k, int n, float *q_out, uint16_t *k_cache,
                                        uint16_t *v_cache, const int32_t *pos, const int32_t *cell, int64_t nq,
                                        int64_t nk, int64_t kv_dim, int head_dim, int n_rot, float theta,
                                        const cu_rope_epi *epi, int front_blocks, const cu_post_pend *pend,
                                        float *x_out, cudaStream_t stream);
/* Two cu_matvec_f32_norm_rope of one x in one launch: matrix 1 (t1, rows1 rows of which nq1 Q, nk1 K,
 * the rest V) and matrix 2 (the same with nq2, nk2), each with its own type, the SMs shared
 * between their grids so that the largest block of either reads the fewest bytes (PERF-LOG run 86). A layer whose V is in another type than Q and K
 * (Q4_K_M: Q4_K, V Q6_K) then starts all three at once. Outputs equal cu_matvec_f32_norm_rope's
 * within rounding (the grids' blocks group the sums otherwise), not bit for bit. Only v11,
 * t1 Q4_K or Q5_K (Q5_K_M) with t2 Q6_K, n 1 or 2, and where both grids fit beside each other; otherwise
 * cudaErrorNotSupported with nothing launched (the caller launches the two apart). */
cudaError_t cu_matvec_f32_norm_rope_pair(const void *w1, uint32_t t1, int64_t rows1, int64_t nq1, int64_t nk1,
                                      const void *w2, uint32_t t2, int64_t rows2, int64_t nq2, int64_t nk2,
                                      const float *x, const float *g, float eps, int64_t k, int n, float *q_out,
                                      uint16_t *k_cache, uint16_t *v_cache, const int32_t *pos, const int32_t *cell,
                                      int64_t kv_dim, int head_dim, int n_rot, float theta, const cu_rope_epi *epi,
                                      const cu_post_pend *pend, float *x_out, cudaStream_t stream);
/* Two cu_matvec_f32_norm of one x in one launch, as cu_matvec_f32_norm_rope_pair shares the SMs:
 * Y1 [n][rows1] = W1 . norm(x), Y2 [n][rows2] = W2 . norm(x) (the recipes whose Q/K norms need
 * a whole head: Qwen3, Gemma 3, whose Q4_K_M V is Q6_K). Outputs equal cu_matvec_f32_norm's within
 * rounding. Only v11, t1 Q4_K or Q5_K with t2 Q6_K, n 1 or 2, where both grids fit beside each other;
 * otherwise cudaErrorNotSupported with nothing launched. */
cudaError_t cu_matvec_f32_norm_pair(float *y1, const void *w1, uint32_t t1, int64_t rows1, float *y2, const void *w2,
                                 uint32_t t2, int64_t rows2, const float *x, const float *g, float eps, int64_t k, int n,
                                 cudaStream_t stream);
/* The blocks of the grid cu_matvec_f32_norm_rope (or _norm) launches for this case; 0 where
 * cu_matvec_fused_supported says no. */
int cu_matvec_fused_blocks(uint32_t wtype, int64_t rows, int64_t k, int n);

/* ---- prefill matrix products (gemm.cu) --------------------------------------------------------
 * Y[n][rows] = W[rows][k] . X[n][k] for many tokens on the tensor cores, X in f16 bits, Y f32,
 * W as repacked by cu_matvec_repack (the same buffer serves decode). Weights are rounded to f16
 * after scaling (relative error ~3e-4 per product against the f32 CPU path). */
/* Q4_0, Q4_K, Q5_K, Q6_K, Q8_0 (repacked); Q4_1, Q5_0, Q5_1, Q2_K, Q3_K in GGUF layout (gemm_gguf.cuh:
 * a plain tensor-core kernel, no split-K, scratch unused; up to MATVEC_MAX_N tokens matvec v1) */
int cu_gemm_supported(uint32_t wtype);
cudaError_t cu_gemm_f16(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows, int64_t k,
                     int64_t n, cudaStream_t stream);
/* Split-K for small n (batched decode, prefill micro-batches), where cu_gemm_f16's blocks (128 rows
 * x 128 tokens, 256 x 64 for n <= 64; gemm.cuh) leave most SMs idle: the K loop is cut into S
 * slices of whole 256-weight groups (S sized for about 2 blocks per SM, at most 16), each slice
 * writes an f32 [n][rows] plane of scratch, and a second kernel adds the S planes in slice order:
 * the same inputs and scratch_bytes give bit-identical Y on every run (a different S, from a
 * smaller scratch, rounds differently). cu_gemm_f16_scratch_bytes is the scratch for the full split
 * on the current device, 0 when the shape needs none; it is not monotonic in rows or k, so size
 * the buffer as the largest value over the matrices it will serve (split-K planes never need
 * more than SMs x 128 KB, 17.3 MB on 132 SMs; from 512 tokens the f16 panel, up to 32 MiB, plus
 * 1 KiB, plus SMs x 128 KiB where the matrix is one panel). With less scratch the split uses the
 * slices that fit, with no room for 2 (or scratch NULL) it runs cu_gemm_f16. Both kernels launch with PDL (kernels_use_pdl), as does
 * cu_gemm_f16: weights are read before waiting on the previous kernel. */
size_t cu_gemm_f16_scratch_bytes(int64_t rows, int64_t k, int n);
cudaError_t cu_gemm_f16_split(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows, int64_t k,
                           int n, void *scratch, size_t scratch_bytes, cudaStream_t stream);
/* cu_gemm_f16_split without its adding launch: *parts = 1 when Y was written (no split, or a path that
 * adds its own), else the S >= 2 planes [S][n][rows] it left in scratch, which the caller adds in
 * slice order (0, 1, ..., S - 1, as gemm_sum does: the same bits as cu_gemm_f16_split's Y) inside the
 * kernel that reads Y (paged_add_rmsnorm_sum), one launch fewer. */
cudaError_t cu_gemm_f16_split_parts(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows, int64_t k,
                                 int n, void *scratch, size_t scratch_bytes, int *parts, cudaStream_t stream);
/* The kernels cu_gemm_f16 / cu_gemm_f16_split run (gemm.cu; "variant 7"): on compute capability
 * 9.0 v7 (gemm_wg.cuh: wgmma on weights dequantised in registers, split-K with its own model),
 * and from 512 tokens in cu_gemm_f16_split, where it measured faster (gemm.cu's gp_wanted), the
 * f16-panel path (gemm_panel.cuh: the weights dequantised once per call into f16 panels of up to
 * 32 MiB in the scratch, then a wgmma GEMM per panel); v2 (gemm.cuh) elsewhere. PERF-LOG run 26:
 * 8b q4_0 pp512 20160 t/s with panels, 14050 with v2; run 32: a 64-sequence 8b q4_k_m decode step
 * 5.08 ms with v7, 7.83 with panels and v2; run 91: 8b pp256 17730 with v7, 12270 with panels.
 * Less scratch than cu_gemm_f16_scratch_bytes gives smaller panels, the same results to rounding
 * (each panel's k range adds into Y in order: bit-identical reruns). The other variants and
 * thresholds: gemm_lab.h (kernel lab and tests). */

/* ---- small ops ------------------------------------------------------------------------------ */
/* out[r][:] = in[r][:] / sqrt(mean(in[r]^2) + eps) * weight[:], rows of dim f32 (norm.cu). */
cudaError_t cu_rmsnorm(float *out, const float *in, const float *weight, int rows, int dim, float eps,
                    cudaStream_t stream);
/* Rotary embedding, llama layout (adjacent pairs x[2i], x[2i+1] rotated by
 * pos * theta^(-2i/rot_dim)) over the first rot_dim values of each head; x [n_tok][n_head][head_dim]
 * f32; pos [n_tok] int32 on the device (rope.cu). out may equal in. */
cudaError_t cu_rope(float *out, const float *in, const int32_t *pos, int n_tok, int n_head,
                 int head_dim, int rot_dim, float theta, cudaStream_t stream);
/* out[i] = silu(gate[i]) * up[i] (elementwise.cu). */
cudaError_t cu_swiglu(float *out, const float *gate, const float *up, int64_t n, cudaStream_t stream);
/* out[i] = a[i] + b[i]; out may equal a or b (elementwise.cu). */
cudaError_t cu_add(float *out, const float *a, const float *b, int64_t n, cudaStream_t stream);
/* out[i] = in[i] rounded to f16 bits (round to nearest even; beyond 65504: inf), i < n. */
cudaError_t cu_f32_to_f16(uint16_t *out, const float *in, int64_t n, cudaStream_t stream);
/* out[t][:] = row ids[t] of table [n_rows][dim] in GGUF layout of type ttype, dequantised to f32
 * (embed.cu): the types matvec takes, dim a multiple of 32 and of the type's block. Ids outside
 * [0, n_rows) give a row of NaN, never a stray read. */
cudaError_t cu_embed(float *out, const void *table, uint32_t ttype, const int32_t *ids, int n_tok,
                  int64_t n_rows, int64_t dim, cudaStream_t stream);
/* The host gate (gate.cu): a decode step launched before the host has its inputs waits on the
 * device, one block spinning, until the host sets go; it then copies `words` int32 (at most
 * max_words) from src to dst and clears go. g and src are host memory mapped for the device
 * (cudaHostAllocMapped); the host writes src and words first, then go = 1, and sets go again only
 * after the step that cleared it has ended. The kernels after it may start (PDL) while it waits.
 * Every launch must be opened by the host, or the stream never gets past it. */
typedef struct {
    volatile int32_t go;    /* then words, in one aligned 8 bytes: the kernel reads both at once */
    volatile int32_t words;
} __attribute__((aligned(8))) kernels_gate;
cudaError_t cu_host_gate(int32_t *dst, const int32_t *src, kernels_gate *g, int max_words, cudaStream_t stream);
/* Greedy picks of n_seq rows of logits (sample.cu), two per row: out[2 s] = index of the largest
 * of logits[s][0..n_vocab), out[2 s + 1] = the same among the indices not in skip (the end-of-
 * generation ids that llama.cpp's --ignore-eos biases to -inf; 0 when every index is skipped);
 * the lowest index on ties, NaN never chosen. A row is read a second time only when its largest
 * is a skipped index. */
#define ARGMAX_MAX_SKIP 16
typedef struct {
    int32_t n;
    int32_t id[ARGMAX_MAX_SKIP];
} argmax_skip;
cudaError_t cu_argmax(int32_t *out, const float *logits, int n_seq, int n_vocab, argmax_skip skip, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
