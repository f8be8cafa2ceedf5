/* Block timelines of the decode kernels (kernels.h: kernels_trace), a diagnostic for the kernel
 * lab: where in a decode step the SMs wait (PERF-LOG run 59).
 *
 * Off by default: a traced kernel's thread 0 reads kt_buf once and, when it is null, does nothing
 * more. On, thread 0 of each block takes a record slot by an atomic counter at the kernel's entry
 * (kt_open) and notes %globaltimer (ns, one clock for the whole GPU) and clock64 (its SM's cycles)
 * at up to KT_MARKS points of the kernel (kt_mark); past the buffer's capacity records are
 * dropped, counted in kt_n all the same.
 *
 * Each translation unit that includes this file has its own kt_buf / kt_cap / kt_n (static
 * __device__: the kernels are built without relocatable device code), set by that unit's
 * kt_set through its extern "C" setter (matvec.cu, paged.cu, paged_attention.cu, embed.cu,
 * gate.cu); kernels_trace hands each unit its own part of the caller's buffer. */
#ifndef MGI_KERNELS_TRACE_CUH
#define MGI_KERNELS_TRACE_CUH

#include <stdint.h>
#include <cuda_runtime.h>
#include "kernels/kernels.h"

#define KT_MARKS 6
/* What a record's kind says (the points a kernel marks are listed beside it):
 *   matvec: 0 entry, 1 first weight copies issued, 2 past pdl_wait, 3 X staged, 4 main loop
 *           done (every warp), 5 end;
 *   attention: 0 entry, 1 early K/V copies issued, 2 past pdl_wait, 3 Q ready (the walk starts),
 *              4 walk done (every warp), 5 end;
 *   elementwise (SwiGLU), embedding: 0 entry, 2 past pdl_wait, 5 end;
 *   host gate: 0 entry, 2 the host's opening seen, 5 end (the metadata copied). */
enum { KT_MATVEC = 1, KT_ATTENTION = 2, KT_SWIGLU = 3, KT_EMBED = 4, KT_GATE = 5 };

typedef kernels_trace_rec kt_rec; /* kernels.h: what the host reads back */
static_assert(sizeof(((kt_rec *)0)->g) == KT_MARKS * sizeof(uint64_t), "kernels.h's record holds KT_MARKS marks");

static __device__ kt_rec *kt_buf;
static __device__ unsigned kt_cap, kt_n;

/* Thread 0 of a block opens the block's record (null when tracing is off, for the other threads,
 * or past the capacity); kt_mark notes a point straight into it, so that no timestamps are held in
 * registers across the kernel's loops (only the record's address). The host clears the buffer
 * first: points a kernel does not mark stay 0. */
__device__ __forceinline__ kt_rec *kt_open(uint32_t kind, const void *tag) {
    kt_rec *b = threadIdx.x == 0 ? kt_buf : nullptr;
    if (!b) return nullptr;
    const unsigned slot = atomicAdd(&kt_n, 1u);
    if (slot >= kt_cap) return nullptr;
    kt_rec *r = b + slot;
    r->tag = (uint64_t)(uintptr_t)tag;
    r->kind = kind;
    r->block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    r->smid = sm;
    r->grid = gridDim.x * gridDim.y * gridDim.z;
    return r;
}

__device__ __forceinline__ void kt_mark(kt_rec *r, int i) {
    if (!r) return;
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    r->g[i] = t;
    r->c[i] = clock64();
}

/* This unit's buffer (null: off) and capacity, its counter cleared; stream-ordered on s. */
static inline cudaError_t kt_set(kt_rec *buf, unsigned cap, cudaStream_t s) {
    const unsigned zero = 0;
    cudaError_t e = cudaMemcpyToSymbolAsync(kt_buf, &buf, sizeof buf, 0, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) e = cudaMemcpyToSymbolAsync(kt_cap, &cap, sizeof cap, 0, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) e = cudaMemcpyToSymbolAsync(kt_n, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, s);
    return e;
}

/* The per-unit setters kernels_trace calls (kernels/pdl.cu). */
extern "C" cudaError_t matvec_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s);
extern "C" cudaError_t paged_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s);
extern "C" cudaError_t paged_attention_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s);
extern "C" cudaError_t embed_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s);
extern "C" cudaError_t gate_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s);

#endif
