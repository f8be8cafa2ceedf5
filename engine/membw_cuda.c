/* Device memory bandwidth as a device-to-device copy: the CUDA backend's roofline ceiling for
 * mgi bench (engine/membw.h). Timed with events on one stream, each copy on its own, so the
 * median and spread mean the same as the host figure's. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "engine/membw.h"
#include "kernels/check.h"

static int membw_cuda_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    void *src, *dst;
    cudaStream_t st;
    cudaEvent_t ev[2];
} membw_cuda_res;

/* Allocates into r (freed by the caller whatever happens) and fills gbps[reps]; *bytes shrinks
 * to what fits beside what the device already holds (a loaded model). */
static int membw_cuda_run(membw_cuda_res *r, int device, size_t *bytes_io, int reps, double *gbps, char *err,
                          size_t err_size) {
    CUDA_TRY(cudaSetDevice(device), err, err_size);
    size_t free_b = 0, total_b = 0, bytes = *bytes_io;
    CUDA_TRY(cudaMemGetInfo(&free_b, &total_b), err, err_size);
    const size_t reserve = (size_t)256 << 20, least = (size_t)64 << 20;
    size_t fit = free_b > reserve ? ((free_b - reserve) / 2) & ~(((size_t)1 << 20) - 1) : 0;
    if (fit < least) {
        snprintf(err, err_size, "device %d copy bandwidth: %zu MiB free, too little for two %zu MiB buffers", device,
                 free_b >> 20, least >> 20);
        return -1;
    }
    if (bytes > fit) bytes = fit;
    *bytes_io = bytes;
    CUDA_TRY(cudaMalloc(&r->src, bytes), err, err_size);
    CUDA_TRY(cudaMalloc(&r->dst, bytes), err, err_size);
    CUDA_TRY(cudaStreamCreate(&r->st), err, err_size);
    CUDA_TRY(cudaEventCreate(&r->ev[0]), err, err_size);
    CUDA_TRY(cudaEventCreate(&r->ev[1]), err, err_size);
    CUDA_TRY(cudaMemsetAsync(r->src, 0x5a, bytes, r->st), err, err_size);
    CUDA_TRY(cudaMemcpyAsync(r->dst, r->src, bytes, cudaMemcpyDeviceToDevice, r->st), err, err_size); /* untimed */
    for (int i = 0; i < reps; i++) {
        float ms = 0;
        CUDA_TRY(cudaEventRecord(r->ev[0], r->st), err, err_size);
        CUDA_TRY(cudaMemcpyAsync(r->dst, r->src, bytes, cudaMemcpyDeviceToDevice, r->st), err, err_size);
        CUDA_TRY(cudaEventRecord(r->ev[1], r->st), err, err_size);
        CUDA_TRY(cudaEventSynchronize(r->ev[1]), err, err_size);
        CUDA_TRY(cudaEventElapsedTime(&ms, r->ev[0], r->ev[1]), err, err_size);
        gbps[i] = 2.0 * (double)bytes / (ms > 0 ? (double)ms * 1e-3 : 1e-9) / 1e9;
    }
    return 0;
}

int membw_cuda_copy(int device, size_t bytes, int reps, membw_result *out, char *err, size_t err_size) {
    if (bytes == 0 || reps < 1 || reps > 1000) {
        snprintf(err, err_size, "device copy bandwidth: bad arguments (%zu bytes, %d repetitions)", bytes, reps);
        return -1;
    }
    double *gbps = malloc(sizeof *gbps * (size_t)reps);
    if (!gbps) {
        snprintf(err, err_size, "device copy bandwidth: out of host memory");
        return -1;
    }
    membw_cuda_res r = {0};
    int rc = membw_cuda_run(&r, device, &bytes, reps, gbps, err, err_size);
    if (r.ev[0]) cudaEventDestroy(r.ev[0]);
    if (r.ev[1]) cudaEventDestroy(r.ev[1]);
    if (r.st) cudaStreamDestroy(r.st);
    cudaFree(r.src);
    cudaFree(r.dst);
    if (rc == 0) {
        qsort(gbps, (size_t)reps, sizeof *gbps, membw_cuda_cmp);
        *out = (membw_result){
            .gbps = reps % 2 ? gbps[reps / 2] : 0.5 * (gbps[reps / 2 - 1] + gbps[reps / 2]),
            .gbps_min = gbps[0],
            .gbps_max = gbps[reps - 1],
            .bytes = bytes,
            .n_threads = 1,
            .reps = reps,
        };
    }
    free(gbps);
    return rc;
}
