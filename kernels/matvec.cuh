/* Decode matvec kernels, Y[n][rows] = W[rows][k] . X[n][k], as templates so the kernel lab can
 * time them with other arguments; kernels.h's cu_matvec_* (matvec.cu) pick among them by weight
 * type and shape:
 *   v11 (matvec_ring.cuh; the winner, PERF-LOG run 31: 8b q4_0 tg128 608.8 t/s, 566.4 with v10)
 *       Q4_0, Q4_K, Q5_K, Q8_0, Q6_K for 1 to 4 tokens (Q6_K: 2): X rounded to int8 per 32 values
 *       while staged, dp4a on the repacked weights, which each warp streams through a ring of
 *       shared-memory slots by cp.async; with the decode fusions (RMSNorm of X, Y +=, RoPE and
 *       the K/V store, SwiGLU) in its prologue and epilogue.
 *   v10 (matvec_dp4a.cuh, matvec_ring.cuh) the same with the weights through registers, where
 *       no ring of 2 stages fits beside X in shared memory.
 *   v3  (matvec_fallback.cuh) tensor cores with f32 X exact, for those types where v10 does not
 *       apply (k not a whole number of v10's groups, more tokens);
 *   v13 (matvec_gguf.cuh) Q4_1, Q5_0, Q5_1, Q2_K, Q3_K for 1 to 4 tokens: X rounded to int8
 *       per 32 values, dp4a on the GGUF rows (which the prompt GEMM reads too) through a ring.
 *   v1  (matvec_fallback.cuh) F32, F16, BF16, and the GGUF-row types where v13 does not apply,
 *       GGUF rows dequantised to f32 (dequant.cuh), f32 X.
 * matvec_layout.cuh holds the repacked layout that v3, v10, v11 and the GEMMs read, matvec_src.cuh
 * the X sources. Every kernel is launched with PDL (pdl.cuh): the first weights are loaded before
 * pdl_wait(), X staged and y written after it. The variants that lost (v2, v4-v9, v10's other
 * compile-time options, v12: Q5_K on its GGUF rows) live in the kernel lab (tests/kbench/matvec_lab.cuh,
 * tests/kbench/matvec_k5.cuh, tests/kbench/matvec.cu). */
#ifndef MGI_KERNELS_MATVEC_CUH
#define MGI_KERNELS_MATVEC_CUH

#include "kernels/matvec_layout.cuh"
#include "kernels/matvec_src.cuh"
#include "kernels/matvec_fallback.cuh"
#include "kernels/matvec_ring.cuh"
#include "kernels/matvec_gguf.cuh"

#endif
