/* Device buffers for the GPU tests (plain C): uploads, and outputs poisoned before a launch and
 * guarded after it, so that a kernel which skips a value (a NaN stays) or writes past its end
 * (the guard changes) fails its check. CUDA errors exit through CUDA_CHECK. */
#ifndef MGI_TESTS_GPU_DEV_H
#define MGI_TESTS_GPU_DEV_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"

#define GUARD 64 /* extra floats after every output, poisoned and checked untouched */

static inline void *dev_alloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
}

static inline void *dev_upload(const void *h, size_t bytes) {
    void *p = dev_alloc(bytes);
    CUDA_CHECK(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice));
    return p;
}

/* Output buffer of n floats + GUARD, every byte 0xff (a NaN). */
static inline float *dev_poisoned(int64_t n) {
    float *p = dev_alloc((size_t)(n + GUARD) * sizeof(float));
    CUDA_CHECK(cudaMemset(p, 0xff, (size_t)(n + GUARD) * sizeof(float)));
    return p;
}

/* Downloads n floats; returns 0 if the guard after them was written. */
static inline int dev_download(float *h, const float *d, int64_t n) {
    float *tmp = malloc((size_t)(n + GUARD) * sizeof(float));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(tmp, d, (size_t)(n + GUARD) * sizeof(float), cudaMemcpyDeviceToHost));
    memcpy(h, tmp, (size_t)n * sizeof(float));
    int ok = 1;
    for (int i = 0; i < GUARD; i++) {
        uint32_t u;
        memcpy(&u, &tmp[n + i], 4);
        if (u != 0xffffffffu) ok = 0;
    }
    free(tmp);
    return ok;
}

#endif
