/* Prefill GEMM launcher (kernels.h: gemm_f16); kernels in gemm.cuh. */
#include "kernels/kernels.h"
#include "kernels/gemm.cuh"

extern "C" int gemm_supported(uint32_t wtype) {
    return wtype == QUANT_Q4_0 || wtype == QUANT_Q4_K || wtype == QUANT_Q6_K || wtype == QUANT_Q8_0;
}

extern "C" cudaError_t gemm_f16(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows, int64_t k,
                                int64_t n, cudaStream_t stream) {
    if (!gemm_supported(wtype) || matvec_repacked_bytes(wtype, rows, k) == 0 || n <= 0 || n > INT32_MAX ||
        k % 8 != 0)
        return cudaErrorInvalidValue;
    dim3 grid((unsigned)((rows + GEMM_ROWS - 1) / GEMM_ROWS), (unsigned)((n + GEMM_TOKS - 1) / GEMM_TOKS));
    if (grid.y > 65535) return cudaErrorInvalidValue;
    const uint8_t *wb = (const uint8_t *)w;
    const __half *xh = (const __half *)x;
    switch (wtype) {
    case QUANT_Q4_0: gemm_v1<QUANT_Q4_0><<<grid, 256, 0, stream>>>(y, wb, xh, (int)rows, (int)k, (int)n); break;
    case QUANT_Q4_K: gemm_v1<QUANT_Q4_K><<<grid, 256, 0, stream>>>(y, wb, xh, (int)rows, (int)k, (int)n); break;
    case QUANT_Q6_K: gemm_v1<QUANT_Q6_K><<<grid, 256, 0, stream>>>(y, wb, xh, (int)rows, (int)k, (int)n); break;
    default: gemm_v1<QUANT_Q8_0><<<grid, 256, 0, stream>>>(y, wb, xh, (int)rows, (int)k, (int)n); break;
    }
    return cudaGetLastError();
}
