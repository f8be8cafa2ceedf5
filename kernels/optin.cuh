/* Per-device launch set-up. Shared-memory opt-in: a kernel whose blocks use more than 48 KB of dynamic shared memory must be
 * allowed to, per kernel and device. smem_optin<K>() grants kernel K the device's whole opt-in
 * limit (less its static shared memory) once per device (later calls only check a flag), so
 * launchers can call it on every launch; it is not a stream operation, so it is also fine during
 * a graph capture. */
#ifndef MGI_KERNELS_OPTIN_CUH
#define MGI_KERNELS_OPTIN_CUH

#include <cuda_runtime.h>

template <auto K>
static inline cudaError_t smem_optin() {
    static bool done[64]; /* per device; each device is set up by one thread at a time */
    int dev = 0, max = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (dev >= 0 && dev < 64 && done[dev]) return cudaSuccess;
    e = cudaDeviceGetAttribute(&max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    /* the limit covers static and dynamic shared memory together: asking for the whole of it
     * for a kernel with static __shared__ arrays is an invalid argument */
    cudaFuncAttributes fa;
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, K);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, max - (int)fa.sharedSizeBytes);
    if (e == cudaSuccess && dev >= 0 && dev < 64) done[dev] = true;
    return e;
}

/* Whether the current device runs the sm_90a code (wgmma): compute capability 9.0 exactly; the
 * build's other targets have no wgmma, so callers fall back to an mma.sync kernel elsewhere.
 * Cached per device (each translation unit keeps its own cache). */
static inline bool wgmma_device() {
    static int cache[64]; /* 0 unknown, 1 yes, 2 no */
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    if (!cache[dev]) {
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
            return false;
        cache[dev] = major == 9 && minor == 0 ? 1 : 2;
    }
    return cache[dev] == 1;
}

#endif
