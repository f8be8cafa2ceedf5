/* The PDL switch of kernels/pdl.cuh (kernels.h: kernels_use_pdl) and the block-timeline switch of
 * kernels/trace.cuh (kernels.h: kernels_trace). */
#include "kernels/kernels.h"
#include "kernels/pdl.cuh"
#include "kernels/trace.cuh"

static int pdl_on = 1;

int pdl_enabled() { return pdl_on; }

extern "C" void kernels_use_pdl(int on) { pdl_on = on != 0; }

/* Each traced unit gets its own part of the buffer (its records carry their kind). */
extern "C" cudaError_t kernels_trace(void *buf, size_t bytes, cudaStream_t s) {
    cudaError_t (*set[])(kt_rec *, unsigned, cudaStream_t) = {matvec_trace_set, paged_trace_set, paged_attention_trace_set,
                                                          embed_trace_set, gate_trace_set};
    const int n = (int)(sizeof set / sizeof set[0]);
    const size_t part = buf ? bytes / n / sizeof(kt_rec) : 0;
    const unsigned cap = part > 0xffffffffu ? 0xffffffffu : (unsigned)part;
    for (int i = 0; i < n; i++) {
        kt_rec *b = buf && cap ? (kt_rec *)buf + (size_t)i * cap : nullptr;
        cudaError_t e = set[i](b, b ? cap : 0, s);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
