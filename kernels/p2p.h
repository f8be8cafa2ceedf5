/* All-reduce (sum) of small f32 buffers among the devices of one process over peer-to-peer
 * memory access (NVLink), for the row split's decode steps (p2p.cu). NCCL's all-reduce costs
 * ~10-20 us per call at these sizes (a few to a hundred KB) and is launched from the host between
 * graph segments; this one is an ordinary kernel, so a whole decode step can be one graph per
 * device. Every device (rank) holds a p2p_rank: a publish buffer of 2 x P2P_MAX_FLOATS floats
 * (double-buffered by call parity), arrival flags [P2P_MAX_BLOCKS][n_ranks] that its peers write,
 * and its own call counters [P2P_MAX_BLOCKS]; peers' buffers and flags are read and written
 * directly, so every pair must have peer access enabled (p2p_enable). Every rank must make the
 * same sequence of calls with the same counts (the counters stay in step), and the result is the
 * same on every rank, bit for bit (the ranks' values are added in rank order). */
#ifndef MGI_KERNELS_P2P_H
#define MGI_KERNELS_P2P_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define P2P_MAX_RANKS 8
#define P2P_MAX_BLOCKS 64
#define P2P_MAX_FLOATS (P2P_MAX_BLOCKS * 2048)

/* One rank's device memory (on its own device), in one allocation of p2p_rank_bytes(). */
typedef struct {
    float *pub;        /* [2][P2P_MAX_FLOATS] */
    uint32_t *flags;   /* [P2P_MAX_BLOCKS][P2P_MAX_RANKS]: flags[b][r] = rank r's last call of block b */
    uint32_t *count;   /* [P2P_MAX_BLOCKS]: this rank's calls per block */
    int *timed_out;    /* set when a call gave up waiting for a peer (device memory: every call
                          reads it first, so it must be near) */
    int *report;       /* NULL, or a host-mapped int also set then (the host reads it for free) */
} p2p_rank;

/* Every rank's memory, as each rank's kernels see it (device pointers, peers' through peer access). */
typedef struct {
    p2p_rank r[P2P_MAX_RANKS];
    int n_ranks;
} p2p_group;

size_t p2p_rank_bytes(void);
/* Carves mem (p2p_rank_bytes() bytes on the rank's device, zero-filled by the caller before use);
 * report NULL. */
void p2p_rank_init(p2p_rank *r, void *mem);

/* Peer access from device a to every other device of devs (cudaDeviceEnablePeerAccess; already
 * enabled is fine). Returns cudaErrorPeerAccessUnsupported when a pair has no peer access. */
cudaError_t p2p_enable(const int *devs, int n);

/* x[0..count) on rank `rank` = the sum over ranks of their x, in rank order. count <=
 * P2P_MAX_FLOATS. A rank waits for its peers at most timeout_s seconds, then sets its timed_out and
 * leaves x undefined (the host reports the stalled peer; see engine/forward_cuda.c's wait_all).
 * Launched without programmatic dependent launch: it starts after the previous kernel ends. */
cudaError_t p2p_allreduce(float *x, int64_t count, const p2p_group *g, int rank, int timeout_s, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
