/* The prefill GEMM under another configuration than production's, for the kernel lab
 * (tests/kbench/gemm.cu) and the GPU tests: the variants and thresholds A/B runs chose among,
 * passed as an argument (no process-wide state). kernels.h's cu_gemm_* are these with
 * CU_GEMM_PRODUCTION. */
#ifndef MGI_KERNELS_GEMM_LAB_H
#define MGI_KERNELS_GEMM_LAB_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    /* The GEMM kernel: 1 (gemm.cuh's v1), 2 (v2), 3 (v3: weights through shared memory as well),
     * or with the f16-panel path (gemm_panel.cuh) in cu_gemm_f16_split from panel_min_n tokens
     * 4 (wgmma, compute capability 9.0 only; v2 elsewhere), 5 (mma.sync) or 6 (4 without its
     * per-chunk proxy fence: gemm_panel.cuh says why); 4 to 6 run v2 below that count, in
     * cu_gemm_f16 (no scratch) and where the scratch cannot hold a panel of 128 rows x 256
     * weights. 7 (production): 4 with gemm_wg.cuh's v7 wherever 4 would run v2; v2 off compute
     * capability 9.0. */
    int variant;
    /* Token counts below this (never below 128) run v2 (variant 7: v7) even under 4-7: a panel
     * is dequantised once per call, which fewer tokens do not repay. Production 512. */
    int panel_min_n;
    /* Variant 7 from panel_min_n tokens: 1 (production) the panel only where it measured faster
     * than v7 (gemm.cu's gp_wanted), 0 for every matrix. */
    int panel_rule;
    /* Variant 7 splits K into this many slices (as far as the shape and the scratch allow)
     * instead of its model's choice; 0: the model (production). */
    int force_slices;
    /* v7's model of its split-K planes: 1 (production) a quarter of the weights' streaming rate
     * for the compute-bound 128 x 128 tile of more than 64 tokens (gemm.cu's G7_TILE_COMPUTE),
     * 0 the streaming rate for every tile (the model before commit bf0e875). */
    int plane_model;
    /* Cap on the f16 panel of variants 4-7 in bytes (0: the default 32 MiB; never above it), to
     * time other panel sizes or force several row and k panels on small matrices. */
    size_t panel_limit;
} cu_gemm_cfg;

#define CU_GEMM_PRODUCTION {7, 512, 1, 0, 1, 0}

cu_gemm_cfg cu_gemm_production(void);
cudaError_t cu_gemm_f16_with(const cu_gemm_cfg *c, float *y, const void *w, uint32_t wtype, const uint16_t *x,
                             int64_t rows, int64_t k, int64_t n, cudaStream_t stream);
cudaError_t cu_gemm_f16_split_with(const cu_gemm_cfg *c, float *y, const void *w, uint32_t wtype, const uint16_t *x,
                                   int64_t rows, int64_t k, int n, void *scratch, size_t scratch_bytes,
                                   cudaStream_t stream);
cudaError_t cu_gemm_f16_split_parts_with(const cu_gemm_cfg *c, float *y, const void *w, uint32_t wtype,
                                         const uint16_t *x, int64_t rows, int64_t k, int n, void *scratch,
                                         size_t scratch_bytes, int *parts, cudaStream_t stream);
/* The scratch cu_gemm_f16_split_with needs under c: for variants 4 to 7 at n >= panel_min_n the
 * f16 panel (the whole matrix's f16 size up to the panel cap) plus 1 KiB, plus SMs x 128 KiB of
 * split-K room where the matrix is one panel; split-K planes alone never need more than SMs x
 * 128 KiB. */
size_t cu_gemm_scratch_bytes_with(const cu_gemm_cfg *c, int64_t rows, int64_t k, int n);
/* The number of K slices cu_gemm_f16_split_with would use for this call (1: no split; the panel
 * path's own split is not counted). */
int cu_gemm_split_slices(const cu_gemm_cfg *c, uint32_t wtype, int64_t rows, int64_t k, int n, size_t scratch_bytes);
/* Only the dequantisation launches the panel path would make for this matrix and scratch (panels
 * up to c's panel cap), no products. The last panel stays at the start of the scratch (rounded up to
 * 1024 bytes) as [P / 128][pc][128 rows][64] f16, P the panel's rows (a multiple of 128; rows past
 * the matrix are zeros) and pc its 64-weight chunks: for a matrix that is one panel, weight (r, j)
 * at ((r / 128) * C + j / 64) * 8192 + (r % 128) * 64 + j % 64, C = k / 64 rounded up.
 * cudaErrorInvalidValue when the scratch cannot hold a panel. */
cudaError_t cu_gemm_f16_dequant(const cu_gemm_cfg *c, void *scratch, size_t scratch_bytes, const void *w,
                                uint32_t wtype, int64_t rows, int64_t k, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
