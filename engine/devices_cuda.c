/* Device discovery through the CUDA runtime: engine/devices.h. A machine without a driver or a
 * device answers a count of 0 with the reason, never an error. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "engine/devices.h"

int engine_device_count(char *why, size_t why_size) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, why_size, "%s", cudaGetErrorString(e));
        cudaGetLastError(); /* clear the sticky error so later calls start clean */
        return 0;
    }
    if (n == 0) snprintf(why, why_size, "the CUDA runtime reports no device");
    return n;
}

int engine_device_query(int i, engine_device_info *info, char *err, size_t err_size) {
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) {
        snprintf(err, err_size, "device %d: cudaGetDeviceProperties: %s", i, cudaGetErrorString(e));
        return -1;
    }
    memset(info, 0, sizeof *info);
    info->index = i;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->n_sm = p.multiProcessorCount;
    info->total_bytes = p.totalGlobalMem;
    cudaDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, i);
    /* Free memory needs a context on that device; the one cudaMemGetInfo creates is reused by
     * every later call on the device, so nothing is wasted. */
    int prev = 0;
    cudaGetDevice(&prev);
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        info->free_bytes = free_b;
    } else {
        snprintf(err, err_size, "device %d (%s): cudaMemGetInfo: %s", i, p.name,
                 cudaGetErrorString(cudaGetLastError()));
        cudaSetDevice(prev);
        return -1;
    }
    cudaSetDevice(prev);
    return 0;
}

int engine_device_can_peer(int a, int b) {
    int ok = 0;
    if (a == b) return 1;
    if (cudaDeviceCanAccessPeer(&ok, a, b) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return ok;
}

int engine_device_link_query(int a, int b, engine_device_link *link) {
    memset(link, 0, sizeof *link);
    int v = 0;
    if (cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, a, b) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    link->access = v != 0;
    if (cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrPerformanceRank, a, b) == cudaSuccess) link->rank = v;
    if (cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrNativeAtomicSupported, a, b) == cudaSuccess)
        link->native_atomics = v != 0;
    cudaGetLastError();
    return 0;
}
