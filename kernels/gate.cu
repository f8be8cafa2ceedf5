/* The host gate (kernels.h: cu_host_gate): a decode step's first kernel, which holds the step on the
 * device until the host has written its inputs. It lets the engine launch a step's graph before
 * the token it will read is known (the launch call, 8-16 us of host time, then overlaps the step
 * before it), and takes the place of the per-step metadata copy. */
#include "kernels/kernels.h"
#include "kernels/pdl.cuh"
#include "kernels/trace.cuh"

/* Loads and stores of host memory at system scope, past the caches: the host writes these words
 * while the kernel runs. */
__device__ __forceinline__ uint64_t gate_ld_acquire(const volatile kernels_gate *p) {
    uint64_t v; /* go and words in one read: one round trip to host memory, not two */
    asm volatile("ld.acquire.sys.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ int32_t gate_ld(const volatile int32_t *p) {
    int32_t v;
    asm volatile("ld.relaxed.sys.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void gate_st(volatile int32_t *p, int32_t v) {
    asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__global__ void __launch_bounds__(256) host_gate_kernel(int32_t *dst, const int32_t *src, kernels_gate *g,
                                                        int max_words) {
    __shared__ int words;
    kt_rec *tr = kt_open(KT_GATE, g); /* the block timeline (trace.cuh), null unless traced */
    kt_mark(tr, 0);
    pdl_wait(); /* nothing before it in a step; pdl.cuh's rule 2 */
    /* The embedding and the first matvec may take their SMs now and copy their first weights
     * (weights only before their waits: pdl.cuh), so they are ready when the host opens. */
    pdl_trigger();
    if (threadIdx.x == 0) {
        uint64_t v;
        while (!(int32_t)(v = gate_ld_acquire(g))) { /* go is the low word (little-endian) */
        }
        const int32_t w = (int32_t)(v >> 32);
        kt_mark(tr, 2);
        gate_st(&g->go, 0); /* closed for the next step: the host opens again only after this one ends */
        words = w < 0 ? 0 : w > max_words ? max_words : w;
    }
    __syncthreads(); /* the words are read only after go was seen set (the host wrote them first) */
    for (int i = threadIdx.x; i < words; i += blockDim.x) dst[i] = gate_ld(src + i);
    __syncthreads();
    kt_mark(tr, 5);
}

extern "C" cudaError_t gate_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s) { return kt_set(buf, cap, s); }

extern "C" cudaError_t cu_host_gate(int32_t *dst, const int32_t *src, kernels_gate *g, int max_words,
                                 cudaStream_t stream) {
    if (!dst || !src || !g || max_words < 0) return cudaErrorInvalidValue;
    return pdl_launch(host_gate_kernel, dim3(1), dim3(256), 0, stream, dst, src, g, max_words);
}
