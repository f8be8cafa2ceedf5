/* The local CUDA devices as the CUDA runtime sees them (CUDA_VISIBLE_DEVICES respected):
 * count, name, compute capability, memory, peer access. Plain C; implemented in
 * engine/devices_cuda.c. */
#ifndef MGI_DEVICES_H
#define MGI_DEVICES_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int index;
    char name[256];
    int cc_major, cc_minor;
    uint64_t total_bytes, free_bytes;
    int n_sm;
    char pci_bus_id[32];
} engine_device_info;

/* Number of usable devices; 0 when there is none, with the runtime's reason in why (no driver,
 * no device...): that is not an error for callers that can run on the CPU. */
int engine_device_count(char *why, size_t why_size);
/* The runtime's ordinal behind device i: i itself, unless MGI_VIRTUAL_DEVICES shows one GPU as
 * several (devices_cuda.c), for tests of the split code on a one-GPU machine. */
int engine_device_physical(int i);
/* Fills info for device i; 0, or -1 with a message. */
int engine_device_query(int i, engine_device_info *info, char *err, size_t err_size);
/* 1 when device a can read and write device b's memory directly (P2P over NVLink or PCIe). */
int engine_device_can_peer(int a, int b);

/* How device a reaches device b, as the runtime reports it (cudaDeviceGetP2PAttribute). */
typedef struct {
    int access;          /* 1: peer access supported */
    int rank;            /* relative performance of the link, 0 fastest (meaningful with access) */
    int native_atomics;  /* 1: atomics over the link (NVLink has them; PCIe peers usually do not) */
} engine_device_link;
/* Fills link for a -> b (a != b); 0, or -1 when the runtime cannot say (link zeroed). */
int engine_device_link_query(int a, int b, engine_device_link *link);

#endif
