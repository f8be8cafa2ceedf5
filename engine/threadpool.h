/* A persistent pool of CPU threads for the fast CPU backend: threads are created once and woken
 * per job (a short spin, then a futex sleep), so a matrix product costs a wake-up of a few
 * microseconds instead of a pthread_create/join per product. The calling thread works too. */
#ifndef MGI_ENGINE_THREADPOOL_H
#define MGI_ENGINE_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct threadpool threadpool;

/* Work on items [begin, end) of a job, on thread `thread` (0 = the caller, 1..n-1 the pool's). */
typedef void (*threadpool_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* A pool of n_threads in all (the caller counts as one, so n_threads - 1 are started; 1..256).
 * 0, or -1 with a message (bad count, thread creation failure). */
int threadpool_create(int n_threads, threadpool **out, char *err, size_t err_size);
/* Stops and joins the threads; NULL is fine. No job may be running. */
void threadpool_destroy(threadpool *p);
int threadpool_size(const threadpool *p);

/* Runs fn over items [0, n): chunks of `grain` items (the last may be shorter) are claimed in
 * order by whichever thread is free, so every item is done exactly once; returns when all are
 * done. One job at a time: calls from two threads at once are not supported. Small jobs
 * (n <= grain) or a one-thread pool run on the caller alone, waking nobody. */
void threadpool_run(threadpool *p, int64_t n, int64_t grain, threadpool_fn fn, void *ctx);

#endif
