/* The persistent thread pool (engine/threadpool.h). A job is published by bumping a generation
 * counter; idle workers spin on it for a short while (a forward pass launches products back to
 * back, microseconds apart) and then sleep on it with a futex. Items are claimed in chunks from
 * one atomic word, which balances cores that the OS or other processes slow down, and the caller
 * waits for items done, not for workers: on a shared machine a worker that is not scheduled in
 * time simply claims nothing, and the caller does its share instead of waiting for it.
 *
 * The claim word holds the job's tag (high 32 bits) and its next item (low 32). A worker reads
 * the word, then the job in slot tag % 2, then claims with a compare-and-swap on the same word:
 * success proves the job was still open, and a slot is rewritten only two jobs later, so what it
 * read was that job. Sleepers are counted so that a wake-up costs a system call only when
 * someone sleeps. */
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

typedef struct {
    _Atomic(threadpool_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n, grain;
} threadpool_job;

struct threadpool {
    int n_threads;
    pthread_t *threads;
    threadpool_job jobs[2];        /* job with tag k in jobs[k % 2] */
    uint32_t tag;                  /* the caller's last job tag */
    _Atomic uint64_t claim;        /* tag << 32 | next unclaimed item */
    _Atomic uint32_t done;         /* futex word: items of the current job finished */
    _Atomic uint32_t gen;          /* futex word: bumped once per job */
    _Atomic int sleepers;          /* workers asleep (or about to be) on gen */
    _Atomic int caller_waiting;    /* the caller is asleep (or about to be) on done */
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

/* Claims and runs chunks of whatever job is open until none are left. */
static void threadpool_work(threadpool *p, int thread) {
    for (;;) {
        uint64_t v = atomic_load_explicit(&p->claim, memory_order_acquire);
        const threadpool_job *j = &p->jobs[(v >> 32) & 1];
        int64_t n = atomic_load_explicit(&j->n, memory_order_relaxed);
        int64_t grain = atomic_load_explicit(&j->grain, memory_order_relaxed);
        threadpool_fn fn = atomic_load_explicit(&j->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&j->ctx, memory_order_relaxed);
        int64_t b = (int64_t)(v & 0xffffffffu);
        if (b >= n) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &v, v + (uint64_t)grain, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        int64_t e = b + grain < n ? b + grain : n;
        fn(ctx, b, e, thread);
        uint32_t total = atomic_fetch_add(&p->done, (uint32_t)(e - b)) + (uint32_t)(e - b);
        if (total == (uint32_t)n && atomic_load(&p->caller_waiting)) threadpool_futex_wake(&p->done);
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
    }
}

static void threadpool_wake_all(threadpool *p) {
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) threadpool_futex_wake(&p->gen);
}

static void threadpool_wait_done(threadpool *p, uint32_t n) {
    int spins = 0;
    uint32_t d;
    while ((d = atomic_load(&p->done)) != n) {
        if (++spins < THREADPOOL_SPIN) {
            threadpool_pause();
            continue;
        }
        atomic_store(&p->caller_waiting, 1);
        if ((d = atomic_load(&p->done)) != n) threadpool_futex_wait(&p->done, d);
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
    if (p->n_threads == 1 || n <= grain || n > INT32_MAX) {
        fn(ctx, 0, n, 0);
        return;
    }
    if (grain > (1 << 30)) grain = 1 << 30;  /* item + grain stays below 2^32 */
    threadpool_job *j = &p->jobs[++p->tag & 1];
    atomic_store_explicit(&j->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&j->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&j->n, n, memory_order_relaxed);
    atomic_store_explicit(&j->grain, grain, memory_order_relaxed);
    atomic_store(&p->done, 0);
    atomic_store_explicit(&p->claim, (uint64_t)p->tag << 32, memory_order_release);
    threadpool_wake_all(p);
    threadpool_work(p, 0);
    threadpool_wait_done(p, (uint32_t)n);
}
