/* Memory-bandwidth ceilings for the roofline that mgi bench reports: how fast the memory holding
 * the weights can be streamed, measured as a large copy (bytes read plus bytes written) or, on
 * the host, a read: host memory (membw.c) or a CUDA device's (membw_cuda.c), into the same result. */
#ifndef MGI_ENGINE_MEMBW_H
#define MGI_ENGINE_MEMBW_H

#include <stddef.h>

typedef struct {
    double gbps;         /* median over the timed runs: (read + written) bytes / s / 1e9; a read's bytes read */
    double gbps_min;     /* slowest and fastest run, for the spread */
    double gbps_max;
    size_t bytes;        /* bytes copied (each of the two buffers holds this many) or read per run */
    int n_threads;       /* threads that shared each copy (1 for a device copy) */
    int reps;            /* timed copies */
} membw_result;

/* Copies a bytes-sized host buffer into another reps times, split across n_threads threads (each
 * thread first touches its own slice, so pages sit near the thread that streams them), after one
 * untimed copy. Choose bytes well beyond the last-level cache. 0, or -1 with a message (bad
 * arguments, out of memory, thread creation failure). */
int membw_cpu_copy(size_t bytes, int n_threads, int reps, membw_result *out, char *err, size_t err_size);

/* The same as a read-only stream: each thread sums its slice of one buffer; gbps counts the
 * bytes read. The CPU's roofline for decode, which only reads weights: on a 2-core Zen 4 host a
 * copy's read + written bytes came to 46-52 GB/s where reads alone reach 35.5-36. */
int membw_cpu_read(size_t bytes, int n_threads, int reps, membw_result *out, char *err, size_t err_size);

/* The same for CUDA device `device` (engine/membw_cuda.c, in the GPU library): a bytes-sized
 * device-to-device copy reps times after one untimed copy, each timed with events. Where two such
 * buffers do not fit beside what the device holds, smaller ones (out->bytes says; at least
 * 64 MiB). 0, or -1 with a message (no device, too little free memory). */
int membw_cuda_copy(int device, size_t bytes, int reps, membw_result *out, char *err, size_t err_size);

#endif
