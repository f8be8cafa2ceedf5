/* Kernel-lab helpers shared by tests/kbench/ programs: the copy-bandwidth ceiling, an L2 flush, and
 * event timing (median of reps, each after a flush). */
#ifndef MGI_KBENCH_LAB_H
#define MGI_KBENCH_LAB_H

#include <algorithm>
#include <cstdio>
#include <vector>
#include "kernels/check.h"

/* Whether a CUDA device is there; if not, the program's one SKIP line (its exit stays 0). */
static inline bool lab_has_device(const char *name) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) return true;
    printf("SKIP kbench %s: no CUDA device\n", name);
    return false;
}

struct lab {
    void *flush_buf = nullptr;
    size_t flush_bytes = 256u << 20;
    cudaEvent_t e0, e1;
    double copy_gbs = 0;

    lab() {
        CUDA_CHECK(cudaMalloc(&flush_buf, flush_bytes));
        CUDA_CHECK(cudaEventCreate(&e0));
        CUDA_CHECK(cudaEventCreate(&e1));
    }
    void flush() { CUDA_CHECK(cudaMemsetAsync(flush_buf, 0x5a, flush_bytes, 0)); }

    /* Median milliseconds of reps runs of fn, each after an L2 flush. */
    template <typename F> double time_ms(F fn, int reps) {
        std::vector<float> t;
        fn(); /* warm-up: module load, first-touch */
        CUDA_CHECK(cudaDeviceSynchronize());
        for (int r = 0; r < reps; r++) {
            flush();
            CUDA_CHECK(cudaEventRecord(e0, 0));
            fn();
            CUDA_CHECK(cudaEventRecord(e1, 0));
            CUDA_CHECK(cudaEventSynchronize(e1));
            float ms;
            CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            t.push_back(ms);
        }
        CUDA_CHECK(cudaGetLastError());
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    }

    /* Device-to-device copy of 4 GiB, bytes read + written, median of 10. */
    double measure_copy() {
        size_t bytes = (size_t)4 << 30;
        void *a, *b;
        CUDA_CHECK(cudaMalloc(&a, bytes));
        CUDA_CHECK(cudaMalloc(&b, bytes));
        CUDA_CHECK(cudaMemset(a, 1, bytes));
        double ms = time_ms([&] { CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0)); }, 10);
        CUDA_CHECK(cudaFree(a));
        CUDA_CHECK(cudaFree(b));
        copy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
        return copy_gbs;
    }

    /* measure_copy, then its header line (with the SM count when with_sms; returns that count). */
    int announce(bool with_sms = false) {
        measure_copy();
        int sms = 0;
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        if (with_sms)
            printf("# copy bandwidth (4 GiB d2d, read+write, median of 10): %.0f GB/s; %d SMs\n", copy_gbs, sms);
        else
            printf("# copy bandwidth (4 GiB d2d, read+write, median of 10): %.0f GB/s\n", copy_gbs);
        return sms;
    }
};

#endif
