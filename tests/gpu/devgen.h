/* Fresh random data on the device for the GPU tests (plain C): uniform floats, and a weight matrix
 * of gen.h's blocks in matvec's repacked layout, as the engine holds it. */
#ifndef MGI_TESTS_GPU_DEVGEN_H
#define MGI_TESTS_GPU_DEVGEN_H

#include "tests/gpu/dev.h"
#include "tests/gpu/gen.h"
#include "kernels/kernels.h"

static inline float *dev_floats(gen_rng *r, int64_t n, double lo, double hi) {
    float *h = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) h[i] = (float)gen_uniform(r, lo, hi);
    float *d = dev_upload(h, sizeof(float) * (size_t)(n > 0 ? n : 1));
    free(h);
    return d;
}

static inline void *dev_random_repacked(gen_rng *r, uint32_t t, int64_t rows, int64_t k) {
    size_t wb = quant_row_bytes(t, k) * (size_t)rows;
    void *w = malloc(wb);
    gen_weights(r, t, rows, k, w);
    void *dw = dev_upload(w, wb), *dr = dev_alloc(cu_matvec_repacked_bytes(t, rows, k));
    CUDA_CHECK(cu_matvec_repack(dr, dw, t, rows, k, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dw));
    free(w);
    return dr;
}

#endif
