/* One-shot all-reduce over peer access (kernels/p2p.h). Block b of every rank owns the same slice
 * of x, so blocks synchronise only with their counterparts on the other ranks, never with each
 * other: block b copies its slice of x into this rank's publish buffer (half c & 1 of it, c the
 * block's call count), makes the writes visible system-wide, stores c into flags[b][rank] of every
 * peer, waits until every peer has stored c into its own flags[b][peer], then adds the ranks'
 * slices in rank order into x. Double buffering by parity is enough: a rank can only start call
 * c + 2 (which rewrites half c & 1) after every peer stored c + 1, i.e. after every peer finished
 * reading call c. */
#include <cuda_runtime.h>
#include "kernels/p2p.h"

#define P2P_THREADS 512

static __device__ __forceinline__ void st_release_sys(uint32_t *p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
static __device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ uint64_t global_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void __launch_bounds__(P2P_THREADS) p2p_allreduce_kernel(float *x, int64_t count, p2p_group g, int rank,
                                                                    uint64_t timeout_ns) {
    const int b = blockIdx.x, tid = threadIdx.x, R = g.n_ranks;
    const p2p_rank &me = g.r[rank];
    const int64_t slice = (count + gridDim.x - 1) / gridDim.x, i0 = b * slice;
    const int64_t i1 = i0 + slice < count ? i0 + slice : count;
    /* after a timeout the group is broken: later calls return at once rather than wait again
     * (the host reports the stall; the process then ends) */
    if (*(volatile int *)me.timed_out) return;
    const uint32_t c = me.count[b] + 1; /* this call's number for block b (local memory) */
    const int64_t half = (int64_t)(c & 1) * P2P_MAX_FLOATS;
    for (int64_t i = i0 + tid; i < i1; i += P2P_THREADS) me.pub[half + i] = x[i];
    __syncthreads(); /* the block's copies done (and observed by thread 0 for the fence below) */
    if (tid == 0) {
        __threadfence_system();
        for (int r = 0; r < R; r++)
            if (r != rank) st_release_sys(g.r[r].flags + b * P2P_MAX_RANKS + rank, c);
    }
    if (tid < R && tid != rank) {
        const uint32_t *f = me.flags + b * P2P_MAX_RANKS + tid;
        const uint64_t t0 = global_ns();
        /* signed difference: counters wrap after 2^32 calls */
        while ((int32_t)(ld_acquire_sys(f) - c) < 0) {
            if (global_ns() - t0 > timeout_ns) {
                *(volatile int *)me.timed_out = 1;
                if (me.report) *(volatile int *)me.report = 1; /* plain stores: host memory over PCIe */
                __threadfence_system();
                break;
            }
        }
    }
    __syncthreads(); /* every peer's slice published (acquired by the waiting threads) */
    for (int64_t i = i0 + tid; i < i1; i += P2P_THREADS) {
        float s = 0.0f;
        for (int r = 0; r < R; r++) s += r == rank ? me.pub[half + i] : g.r[r].pub[half + i];
        x[i] = s;
    }
    if (tid == 0) me.count[b] = c;
}

extern "C" size_t p2p_rank_bytes(void) {
    return (size_t)2 * P2P_MAX_FLOATS * sizeof(float) + (size_t)P2P_MAX_BLOCKS * P2P_MAX_RANKS * sizeof(uint32_t) +
           (size_t)P2P_MAX_BLOCKS * sizeof(uint32_t) + 256;
}

extern "C" void p2p_rank_init(p2p_rank *r, void *mem) {
    unsigned char *p = (unsigned char *)mem;
    r->pub = (float *)p;
    p += (size_t)2 * P2P_MAX_FLOATS * sizeof(float);
    r->flags = (uint32_t *)p;
    p += (size_t)P2P_MAX_BLOCKS * P2P_MAX_RANKS * sizeof(uint32_t);
    r->count = (uint32_t *)p;
    p += (size_t)P2P_MAX_BLOCKS * sizeof(uint32_t);
    r->timed_out = (int *)p;
    r->report = NULL;
}

extern "C" cudaError_t p2p_enable(const int *devs, int n) {
    int cur = 0;
    cudaError_t e = cudaGetDevice(&cur);
    if (e != cudaSuccess) return e;
    for (int a = 0; a < n && e == cudaSuccess; a++)
        for (int b = 0; b < n && e == cudaSuccess; b++) {
            if (a == b || devs[a] == devs[b]) continue;
            int ok = 0;
            if ((e = cudaDeviceCanAccessPeer(&ok, devs[a], devs[b])) != cudaSuccess) break;
            if (!ok) { e = cudaErrorPeerAccessUnsupported; break; }
            if ((e = cudaSetDevice(devs[a])) != cudaSuccess) break;
            e = cudaDeviceEnablePeerAccess(devs[b], 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled) {
                (void)cudaGetLastError(); /* NCCL may have enabled it: fine, and not a sticky error */
                e = cudaSuccess;
            }
        }
    cudaError_t e2 = cudaSetDevice(cur);
    return e != cudaSuccess ? e : e2;
}

extern "C" cudaError_t p2p_allreduce(float *x, int64_t count, const p2p_group *g, int rank, int timeout_s,
                                     cudaStream_t stream) {
    if (count <= 0 || count > P2P_MAX_FLOATS || !g || g->n_ranks < 1 || g->n_ranks > P2P_MAX_RANKS || rank < 0 ||
        rank >= g->n_ranks || timeout_s < 1)
        return cudaErrorInvalidValue;
    /* ~2048 floats per block: a 4096-wide state is 2 blocks, 4 tokens of 8192 16 */
    int blocks = (int)((count + 2047) / 2048);
    if (blocks > P2P_MAX_BLOCKS) blocks = P2P_MAX_BLOCKS;
    p2p_allreduce_kernel<<<blocks, P2P_THREADS, 0, stream>>>(x, count, *g, rank, (uint64_t)timeout_s * 1000000000ull);
    return cudaGetLastError();
}
