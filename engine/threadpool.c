/* The persistent thread pool (engine/threadpool.h). A job is published by bumping a generation
 * counter; idle workers spin on it for a short while (a forward pass launches products back to
 * back, microseconds apart) and then sleep on it with a futex. Items are claimed in chunks from
 * one atomic counter, which balances cores that the OS or other processes slow down. The caller
 * waits for the last worker the same way: spin, then futex. Sleepers are counted so that a
 * wake-up costs a system call only when someone actually sleeps. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine/threadpool.h"

/* Spin iterations before sleeping: each is a pause (tens of cycles), so a few thousand keep a
 * worker awake for tens of microseconds, the gap between products in a forward pass. */
#define THREADPOOL_SPIN 4096

struct threadpool {
    int n_threads;
    pthread_t *threads;
    /* the job, written by the caller before gen is bumped */
    threadpool_fn fn;
    void *ctx;
    int64_t n, grain;
    _Atomic int64_t next;          /* first unclaimed item */
    _Atomic uint32_t gen;          /* futex word: bumped once per job */
    _Atomic uint32_t pending;      /* futex word: workers still in the current job */
    _Atomic int sleepers;          /* workers asleep (or about to be) on gen */
    _Atomic int caller_waiting;    /* the caller is asleep (or about to be) on pending */
    _Atomic int stop;
};

typedef struct {
    threadpool *pool;
    int idx;
} threadpool_arg;

static void threadpool_futex_wait(_Atomic uint32_t *word, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void threadpool_futex_wake(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void threadpool_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claims and runs chunks until none are left. */
static void threadpool_work(threadpool *p, int thread) {
    for (;;) {
        int64_t b = atomic_fetch_add_explicit(&p->next, p->grain, memory_order_relaxed);
        if (b >= p->n) return;
        int64_t e = b + p->grain < p->n ? b + p->grain : p->n;
        p->fn(p->ctx, b, e, thread);
    }
}

static void *threadpool_main(void *arg) {
    threadpool_arg a = *(threadpool_arg *)arg;
    free(arg);
    threadpool *p = a.pool;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (++spins < THREADPOOL_SPIN) {
                threadpool_pause();
                continue;
            }
            /* Counted before the re-check: the caller bumps gen, then reads sleepers. */
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->gen) == seen) threadpool_futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleepers, 1);
            spins = 0;
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        threadpool_work(p, a.idx);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waiting))
            threadpool_futex_wake(&p->pending);
    }
}

/* Publishes a job (or the stop request) to every worker. */
static void threadpool_wake_all(threadpool *p) {
    atomic_store(&p->pending, (uint32_t)(p->n_threads - 1));
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) threadpool_futex_wake(&p->gen);
}

static void threadpool_wait_all(threadpool *p) {
    int spins = 0;
    uint32_t left;
    while ((left = atomic_load(&p->pending)) != 0) {
        if (++spins < THREADPOOL_SPIN) {
            threadpool_pause();
            continue;
        }
        atomic_store(&p->caller_waiting, 1);
        if ((left = atomic_load(&p->pending)) != 0) threadpool_futex_wait(&p->pending, left);
        atomic_store(&p->caller_waiting, 0);
        spins = 0;
    }
}

int threadpool_create(int n_threads, threadpool **out, char *err, size_t err_size) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 256) {
        snprintf(err, err_size, "thread pool: %d threads requested; use 1 to 256", n_threads);
        return -1;
    }
    threadpool *p = calloc(1, sizeof *p);
    if (!p || !(p->threads = calloc((size_t)n_threads, sizeof *p->threads))) {
        free(p);
        snprintf(err, err_size, "thread pool: out of memory");
        return -1;
    }
    p->n_threads = 1;
    for (int t = 1; t < n_threads; t++) {
        threadpool_arg *a = malloc(sizeof *a);
        int rc = a ? 0 : ENOMEM;
        if (a) {
            *a = (threadpool_arg){p, t};
            rc = pthread_create(&p->threads[t], NULL, threadpool_main, a);
            if (rc) free(a);
        }
        if (rc) {
            snprintf(err, err_size, "thread pool: starting thread %d of %d failed (error %d); try fewer threads (-t)",
                     t + 1, n_threads, rc);
            threadpool_destroy(p);
            return -1;
        }
        p->n_threads = t + 1;
    }
    *out = p;
    return 0;
}

void threadpool_destroy(threadpool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    threadpool_wake_all(p);
    for (int t = 1; t < p->n_threads; t++) pthread_join(p->threads[t], NULL);
    free(p->threads);
    free(p);
}

int threadpool_size(const threadpool *p) { return p->n_threads; }

void threadpool_run(threadpool *p, int64_t n, int64_t grain, threadpool_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (p->n_threads == 1 || n <= grain) {
        fn(ctx, 0, n, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    threadpool_wake_all(p);
    threadpool_work(p, 0);
    threadpool_wait_all(p);
}
