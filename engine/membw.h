/* Memory-bandwidth ceilings for the roofline that mgi bench reports: how fast the memory holding
 * the weights can be streamed, measured as a large copy (bytes read plus bytes written). This
 * file measures host memory; a GPU backend measures its device-to-device copy beside it and fills
 * the same result. */
#ifndef MGI_ENGINE_MEMBW_H
#define MGI_ENGINE_MEMBW_H

#include <stddef.h>

typedef struct {
    double gbps;         /* median over the timed copies: (read + written) bytes / s / 1e9 */
    double gbps_min;     /* slowest and fastest copy, for the spread */
    double gbps_max;
    size_t bytes;        /* bytes copied per run (each of the two buffers holds this many) */
    int n_threads;       /* threads that shared each copy (1 for a device copy) */
    int reps;            /* timed copies */
} membw_result;

/* Copies a bytes-sized host buffer into another reps times, split across n_threads threads (each
 * thread first touches its own slice, so pages sit near the thread that streams them), after one
 * untimed copy. Choose bytes well beyond the last-level cache. 0, or -1 with a message (bad
 * arguments, out of memory, thread creation failure). */
int membw_cpu_copy(size_t bytes, int n_threads, int reps, membw_result *out, char *err, size_t err_size);

#endif
