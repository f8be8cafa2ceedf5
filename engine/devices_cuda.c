/* Device discovery through the CUDA runtime: engine/devices.h. A machine without a driver or a
 * device answers a count of 0 with the reason, never an error. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <stdlib.h>

#include "engine/devices.h"
#include "engine/plan.h"

/* The runtime's own count; 0 with the reason when there is none. */
static int physical_count(char *why, size_t why_size) {
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

/* MGI_VIRTUAL_DEVICES=N (2..ENGINE_MAX_DEVICES), for tests and development: N devices shown,
 * device i being physical device i % (the runtime's count). The split code (plans, layer and row
 * splits, their transfers and all-reduces) then runs on a machine with one GPU; parts that share a
 * physical device pass data by copies on it instead of NCCL (forward_cuda.local). It gives neither
 * memory nor speed: each virtual device reports its share of the physical one's free memory. */
static int virtual_count(void) {
    const char *e = getenv("MGI_VIRTUAL_DEVICES");
    if (!e || !*e) return 0;
    char *end = NULL;
    long v = strtol(e, &end, 10);
    return *end || v < 2 || v > ENGINE_MAX_DEVICES ? 0 : (int)v;
}

int engine_device_count(char *why, size_t why_size) {
    int n = physical_count(why, why_size), v = virtual_count();
    return n > 0 && v ? v : n;
}

int engine_device_physical(int i) {
    char why[8];
    int n = physical_count(why, sizeof why);
    return n > 0 && virtual_count() ? i % n : i;
}

int engine_device_query(int i, engine_device_info *info, char *err, size_t err_size) {
    const int phys = engine_device_physical(i), v = virtual_count();
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, phys);
    if (e != cudaSuccess) {
        snprintf(err, err_size, "device %d: cudaGetDeviceProperties: %s", i, cudaGetErrorString(e));
        return -1;
    }
    memset(info, 0, sizeof *info);
    info->index = i;
    if (v)
        snprintf(info->name, sizeof info->name, "%.200s (virtual, on device %d)", p.name, phys);
    else
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
    if (cudaSetDevice(phys) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        if (v) { /* a virtual device: its share of the physical one's free memory */
            char why[8];
            int np = physical_count(why, sizeof why), shares = v / np + (phys < v % np);
            free_b /= (size_t)shares;
        }
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
    a = engine_device_physical(a);
    b = engine_device_physical(b);
    if (a == b) return 1;
    if (cudaDeviceCanAccessPeer(&ok, a, b) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return ok;
}

int engine_device_link_query(int a, int b, engine_device_link *link) {
    memset(link, 0, sizeof *link);
    a = engine_device_physical(a);
    b = engine_device_physical(b);
    if (a == b) { /* two virtual devices on one GPU: its own memory */
        link->access = 1;
        link->native_atomics = 1;
        return 0;
    }
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
