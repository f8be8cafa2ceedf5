/* Programmatic dependent launch (PDL, sm_90) for the decode chain: every decode kernel is
 * launched with cudaLaunchKernelEx and the ProgrammaticStreamSerialization attribute, so it may
 * start while the kernel before it in the stream is still running; inside, pdl_wait() stands
 * before anything that depends on an earlier kernel.
 *
 * What the code relies on (PTX ISA, griddepcontrol; CUDA programming guide, PDL):
 *  - griddepcontrol.wait blocks the thread until every prerequisite grid has completed and all
 *    of its memory operations are performed and visible to this grid. Without a prerequisite
 *    (a plain launch, the first kernel after a copy or an event, PDL switched off) it returns at
 *    once, so the kernels stay correct outside graphs, in plain streams and after non-PDL work.
 *  - griddepcontrol.launch_dependents only lets the next grid be scheduled (once every CTA of
 *    this grid has issued it or exited); it says nothing about memory, and a kernel that never
 *    issues it triggers implicitly when it exits. Issuing it early is therefore always safe: the
 *    dependent still waits at its own pdl_wait() for this whole grid to finish.
 * Rules every kernel here follows, so that the chain is safe by construction:
 *  1. Before pdl_wait() a kernel reads only data no kernel of the decode step writes (weights;
 *     decode attention with kv_ready also the K/V cells of earlier passes: paged.h), and writes
 *     no global memory at all (no write-after-read race with the previous kernel). The one
 *     exception, cu_matvec_f32_norm_rope_beside (kernels.h), runs whole before its wait: it is
 *     launched only behind a matvec that has passed its own wait on the same input (so that
 *     input is complete) and that touches nothing it writes.
 *  2. Every thread of every PDL kernel executes pdl_wait() before it exits, even one with
 *     nothing to do (one exception: decode attention's blocks past the context, which read and
 *     write nothing, leave at once; split 0 of every kv head always waits). Then a grid's
 *     completion implies its predecessor's completion, so waiting for the previous grid is
 *     waiting for all earlier ones (kernel C may read what kernel A wrote two launches before).
 * Matvec weights are read before the wait: a matvec must not directly follow the kernel that
 * wrote its weights (cu_matvec_repack at load, which the engine follows by a synchronisation). */
#ifndef MGI_KERNELS_PDL_CUH
#define MGI_KERNELS_PDL_CUH

#include <utility>
#include <cuda_runtime.h>

__device__ __forceinline__ void pdl_wait() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

__device__ __forceinline__ void pdl_trigger() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

/* 1 unless kernels_use_pdl(0) (kernels.h) switched the attribute off (kernel-lab comparisons). */
int pdl_enabled();

/* kern<<<grid, block, smem, s>>>(args...) with the PDL attribute set to on; returns the launch
 * status. */
template <typename... P, typename... A>
static inline cudaError_t pdl_launch_as(int on, void (*kern)(P...), dim3 grid, dim3 block, size_t smem,
                                        cudaStream_t s, A &&...args) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    /* the legacy default stream keeps plain launches: PDL is for the engine's own streams */
    attr[0].val.programmaticStreamSerializationAllowed = on && s != 0 && s != cudaStreamLegacy;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kern, std::forward<A>(args)...);
}

/* The same with the attribute on (unless kernels_use_pdl(0)). */
template <typename... P, typename... A>
static inline cudaError_t pdl_launch(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                                     A &&...args) {
    return pdl_launch_as(pdl_enabled(), kern, grid, block, smem, s, std::forward<A>(args)...);
}

#endif
