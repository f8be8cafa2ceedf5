/* The prompt GEMM for weight types kept in GGUF layout that the repacked GEMMs (gemm.cuh,
 * gemm_panel.cuh, gemm_wg.cuh) do not read: Q4_1, Q5_0, Q5_1, Q2_K, Q3_K. Correct before fast:
 * a block takes 32 rows x 64 tokens; per 32 weights of k, 32 of its threads dequantise one
 * 32-weight unit of a row each (dequant.cuh's dq_unit, as matvec v1 and the embedding do) into
 * f16 in shared memory while the others stage X's f16 tile, then its 4 warps multiply them on
 * the tensor cores (wmma 16x16x16, f32 accumulators: two 16x16 tiles each). Y goes through
 * shared memory so that rows and tokens may end anywhere. Weights are rounded to f16 after
 * scaling, as in the other GEMMs (kernels.h: ~3e-4 per product). Up to MATVEC_MAX_N tokens,
 * where a tile would be mostly padding, the launcher runs matvec v1 on the f16 X instead
 * (exact in f32). Launched without PDL: it waits for the kernel before it to finish. From the
 * panel path's token counts (cu_gemm_f16_split) these types take it instead: gp_dequant_gguf
 * below, then the panel GEMM. */
#ifndef MGI_KERNELS_GEMM_GGUF_CUH
#define MGI_KERNELS_GEMM_GGUF_CUH

#include <mma.h>
#include "kernels/dequant.cuh"
#include "kernels/gemm_panel.cuh"

#define GG_ROWS 32
#define GG_TOKS 64
#define GG_LD 40  /* halves per staged row or token: 32 + 8 against bank conflicts (wmma: a multiple of 8) */
#define GG_CLD 36 /* floats per token of the staged output tile (wmma: a multiple of 4) */

static bool gemm_gguf_takes(uint32_t t) { return dq_gguf_rows(t); }

template <int T>
__global__ void __launch_bounds__(128) gemm_gguf(float *y, const uint8_t *w, const __half *x, int rows, int k, int n) {
    using namespace nvcuda;
    __shared__ __align__(32) __half ws[GG_ROWS * GG_LD];
    __shared__ __align__(32) __half xs[GG_TOKS * GG_LD];
    __shared__ __align__(32) float cs[GG_TOKS * GG_CLD];
    const int tid = threadIdx.x, warp = tid >> 5;
    const int r0 = blockIdx.x * GG_ROWS, t0 = blockIdx.y * GG_TOKS;
    const int wr = warp & 1, wt = (warp >> 1) * 2; /* the warp's row tile and first token tile */
    const int64_t rb = dq_row_bytes(T, k);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    for (int k0 = 0; k0 < k; k0 += 32) {
        if (tid < GG_ROWS) {
            float v[32];
            const int row = r0 + tid;
            if (row < rows) {
                dq_unit<T>(w + (int64_t)row * rb, k0 / 32, v);
            } else {
#pragma unroll
                for (int i = 0; i < 32; i++) v[i] = 0;
            }
            __half2 *d = (__half2 *)&ws[tid * GG_LD];
#pragma unroll
            for (int i = 0; i < 16; i++) d[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        } else {
            for (int i = tid - GG_ROWS; i < GG_TOKS * 4; i += 128 - GG_ROWS) {
                const int t = i >> 2, q = i & 3;
                uint4 v = make_uint4(0, 0, 0, 0);
                if (t0 + t < n) v = *(const uint4 *)(x + (int64_t)(t0 + t) * k + k0 + 8 * q);
                *(uint4 *)&xs[t * GG_LD + 8 * q] = v;
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 32; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
            wmma::load_matrix_sync(a, ws + 16 * wr * GG_LD + kk, GG_LD);
#pragma unroll
            for (int j = 0; j < 2; j++) { /* B = X^T: token t's k values are column t */
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
                wmma::load_matrix_sync(b, xs + 16 * (wt + j) * GG_LD + kk, GG_LD);
                wmma::mma_sync(acc[j], a, b, acc[j]);
            }
        }
        __syncthreads();
    }
    /* cs[t][r]: column-major tiles put a token's rows side by side, as Y holds them */
#pragma unroll
    for (int j = 0; j < 2; j++)
        wmma::store_matrix_sync(cs + 16 * (wt + j) * GG_CLD + 16 * wr, acc[j], GG_CLD, wmma::mem_col_major);
    __syncthreads();
    for (int i = tid; i < GG_TOKS * GG_ROWS; i += blockDim.x) {
        const int t = i / GG_ROWS, r = i % GG_ROWS;
        if (t0 + t < n && r0 + r < rows) y[(int64_t)(t0 + t) * rows + r0 + r] = cs[t * GG_CLD + r];
    }
}

/* The f16 panel (gemm_panel.cuh's layout: [128-row block][chunk][128 rows][64]) of rows [row0,
 * row0 + 128 nrb) x chunks [c0, c0 + pc) of a matrix in GGUF rows, for the panel GEMM (v4) from
 * panel_min_n tokens: each weight dequantised once per call (dq_unit, rounded to f16 after
 * scaling as every GEMM here rounds), where gemm_gguf dequantises each 32 x 32 tile once per
 * 64 tokens. A block is one (128 rows, 64 weights) panel block, a thread one 32-weight unit of
 * one row; rows past the matrix and weights past k are zeros. Weights are read before pdl_wait,
 * the panel written after it (the previous GEMM may still read the panel). */
template <int T>
__global__ void __launch_bounds__(256) gp_dequant_gguf(__half *panel, const uint8_t *w, int rows, int k, int row0,
                                                       int c0, int pc) {
    const int cl = blockIdx.x, rl = threadIdx.x >> 1, half = threadIdx.x & 1;
    const int64_t row = (int64_t)row0 + blockIdx.y * 128 + rl, u = 2 * (int64_t)(c0 + cl) + half;
    float wv[32];
    const bool live = row < rows && u * 32 < k;
    if (live) dq_unit<T>(w + row * dq_row_bytes(T, k), u, wv);
    pdl_wait();
    pdl_trigger();
    uint4 *dst = (uint4 *)(panel + ((int64_t)blockIdx.y * pc + cl) * GP_BLOCK + rl * 64 + half * 32);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        uint32_t h[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const __half2 v = live ? __floats2half2_rn(wv[8 * i + 2 * j], wv[8 * i + 2 * j + 1]) : __floats2half2_rn(0.0f, 0.0f);
            h[j] = *(const uint32_t *)&v;
        }
        dst[i] = make_uint4(h[0], h[1], h[2], h[3]);
    }
}

static cudaError_t gp_dequant_gguf_launch(__half *panel, const uint8_t *w, uint32_t t, int rows, int k, int row0,
                                          int nrb, int c0, int pc, cudaStream_t s) {
    const dim3 grid((unsigned)pc, (unsigned)nrb);
    switch (t) {
    case QUANT_Q4_1: return pdl_launch(gp_dequant_gguf<QUANT_Q4_1>, grid, dim3(256), 0, s, panel, w, rows, k, row0, c0, pc);
    case QUANT_Q5_0: return pdl_launch(gp_dequant_gguf<QUANT_Q5_0>, grid, dim3(256), 0, s, panel, w, rows, k, row0, c0, pc);
    case QUANT_Q5_1: return pdl_launch(gp_dequant_gguf<QUANT_Q5_1>, grid, dim3(256), 0, s, panel, w, rows, k, row0, c0, pc);
    case QUANT_Q2_K: return pdl_launch(gp_dequant_gguf<QUANT_Q2_K>, grid, dim3(256), 0, s, panel, w, rows, k, row0, c0, pc);
    default: return pdl_launch(gp_dequant_gguf<QUANT_Q3_K>, grid, dim3(256), 0, s, panel, w, rows, k, row0, c0, pc);
    }
}

/* Y[n][rows] = W . X for a gemm_gguf_takes type (W as cu_matvec_repack leaves it: GGUF rows),
 * X f16 [n][k] on a 16-byte boundary. */
static cudaError_t gemm_gguf_run(float *y, const void *w, uint32_t t, const uint16_t *x, int64_t rows, int64_t k,
                                 int64_t n, cudaStream_t s) {
    if (!gemm_gguf_takes(t) || cu_matvec_repacked_bytes(t, rows, k) == 0 || n <= 0 || n > INT32_MAX ||
        (uintptr_t)x % 16 || (n + GG_TOKS - 1) / GG_TOKS > 65535)
        return cudaErrorInvalidValue;
    if (n <= MATVEC_MAX_N) return cu_matvec_f16(y, w, t, x, rows, k, (int)n, s);
    const dim3 grid((unsigned)((rows + GG_ROWS - 1) / GG_ROWS), (unsigned)((n + GG_TOKS - 1) / GG_TOKS));
    const uint8_t *wb = (const uint8_t *)w;
    const __half *xh = (const __half *)x;
    const int r = (int)rows, kk = (int)k, nn = (int)n;
    switch (t) {
    case QUANT_Q4_1: gemm_gguf<QUANT_Q4_1><<<grid, 128, 0, s>>>(y, wb, xh, r, kk, nn); break;
    case QUANT_Q5_0: gemm_gguf<QUANT_Q5_0><<<grid, 128, 0, s>>>(y, wb, xh, r, kk, nn); break;
    case QUANT_Q5_1: gemm_gguf<QUANT_Q5_1><<<grid, 128, 0, s>>>(y, wb, xh, r, kk, nn); break;
    case QUANT_Q2_K: gemm_gguf<QUANT_Q2_K><<<grid, 128, 0, s>>>(y, wb, xh, r, kk, nn); break;
    default: gemm_gguf<QUANT_Q3_K><<<grid, 128, 0, s>>>(y, wb, xh, r, kk, nn); break;
    }
    return cudaGetLastError();
}

#endif
