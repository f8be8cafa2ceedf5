/* The mma.sync helpers of the prompt attention kernels (kernels/prefill.cu's v2, the kernel lab's
 * v1: tests/kbench/prefill_v1.cuh). */
#ifndef MGI_KERNELS_PREFILL_CUH
#define MGI_KERNELS_PREFILL_CUH

#include <stdint.h>
#include <cuda_fp16.h>

__device__ __forceinline__ uint32_t pf_pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&h;
}

__device__ __forceinline__ void pf_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif
