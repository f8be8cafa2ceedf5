/* Host memory bandwidth as a multi-threaded memcpy: the CPU backend's roofline ceiling for
 * mgi bench. One thread alone cannot saturate a server's memory channels, so the copy is split
 * across threads that start together behind a barrier; the time is the slowest thread's. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/membw.h"

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t go_cond;
    int go;                        /* set once every thread that could start has started */
    pthread_barrier_t start, done;
    uint8_t *src, *dst;            /* dst NULL: a read-only stream of src */
    size_t bytes;
    int n_threads, runs;           /* n_threads: the threads that did start */
    _Atomic uint64_t sink;         /* the read sums, so the reads are not optimised away */
} membw_job;

typedef struct {
    membw_job *job;
    int idx;
} membw_worker;

static double membw_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Slice idx of the buffers, page-aligned so no two threads share a page. */
static void membw_slice(const membw_job *j, int idx, size_t *off, size_t *len) {
    size_t per = (j->bytes / (size_t)j->n_threads + 4095) & ~(size_t)4095;
    size_t a = per * (size_t)idx, b = a + per;
    if (a > j->bytes) a = j->bytes;
    if (b > j->bytes) b = j->bytes;
    *off = a;
    *len = b - a;
}

/* Sums len bytes as 64-bit words: eight independent sums keep enough loads in flight for one
 * core to pull what the memory gives it (the same rate as 512-bit loads here: 2 threads of a
 * Zen 4 host ~36 GB/s either way). */
static uint64_t membw_read(const uint8_t *p, size_t len) {
    const uint64_t *q = (const uint64_t *)p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t n = len / 64 * 8;
    for (size_t i = 0; i < n; i += 8) {
        a0 += q[i], a1 += q[i + 1], a2 += q[i + 2], a3 += q[i + 3];
        a4 += q[i + 4], a5 += q[i + 5], a6 += q[i + 6], a7 += q[i + 7];
    }
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

/* One run of a slice: a copy, or a read. */
static void membw_run(membw_job *j, size_t off, size_t len) {
    if (j->dst)
        memcpy(j->dst + off, j->src + off, len);
    else
        atomic_fetch_add_explicit(&j->sink, membw_read(j->src + off, len), memory_order_relaxed);
}

/* Each worker waits until the thread count is final, touches its slices, then copies (or reads)
 * once per run between the two barriers. */
static void *membw_work(void *arg) {
    membw_worker *w = arg;
    membw_job *j = w->job;
    pthread_mutex_lock(&j->lock);
    while (!j->go) pthread_cond_wait(&j->go_cond, &j->lock);
    pthread_mutex_unlock(&j->lock);
    size_t off, len;
    membw_slice(j, w->idx, &off, &len);
    memset(j->src + off, 0x5a, len);
    if (j->dst) memset(j->dst + off, 0, len);
    for (int r = 0; r < j->runs; r++) {
        pthread_barrier_wait(&j->start);
        membw_run(j, off, len);
        pthread_barrier_wait(&j->done);
    }
    return NULL;
}

static int membw_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* copy 1: membw_cpu_copy, 0: membw_cpu_read. */
static int membw_cpu(int copy, size_t bytes, int n_threads, int reps, membw_result *out, char *err,
                     size_t err_size) {
    if (bytes < 4096 || n_threads < 1 || n_threads > 1024 || reps < 1 || reps > 1000) {
        snprintf(err, err_size, "memory bandwidth: bad arguments (%zu bytes, %d threads, %d runs)", bytes,
                 n_threads, reps);
        return -1;
    }
    membw_job j = {.bytes = bytes, .n_threads = n_threads, .runs = reps + 1};
    double *gbps = malloc((size_t)reps * sizeof *gbps);
    membw_worker *w = malloc((size_t)n_threads * sizeof *w);
    pthread_t *th = malloc((size_t)n_threads * sizeof *th);
    /* 2 MiB alignment lets the kernel back the buffers with huge pages, sparing TLB misses. */
    if (!gbps || !w || !th || posix_memalign((void **)&j.src, 1 << 21, bytes) ||
        (copy && posix_memalign((void **)&j.dst, 1 << 21, bytes))) {
        snprintf(err, err_size, "memory bandwidth: out of memory for %s %zu MiB buffer%s", copy ? "two" : "a",
                 bytes >> 20, copy ? "s" : "");
        free(j.src);
        free(gbps);
        free(w);
        free(th);
        return -1;
    }
    /* A thread that fails to start only shrinks the team: the barriers are sized afterwards. */
    pthread_mutex_init(&j.lock, NULL);
    pthread_cond_init(&j.go_cond, NULL);
    int started = 1;
    for (int t = 1; t < n_threads; t++) {
        w[started] = (membw_worker){&j, started};
        if (pthread_create(&th[started], NULL, membw_work, &w[started]) == 0) started++;
    }
    j.n_threads = started;
    pthread_barrier_init(&j.start, NULL, (unsigned)started);
    pthread_barrier_init(&j.done, NULL, (unsigned)started);
    pthread_mutex_lock(&j.lock);
    j.go = 1;
    pthread_cond_broadcast(&j.go_cond);
    pthread_mutex_unlock(&j.lock);

    /* The calling thread is worker 0 and the clock: its start barrier releases everyone at once,
     * and its done barrier returns only when the slowest slice is copied. */
    size_t off, len;
    membw_slice(&j, 0, &off, &len);
    memset(j.src + off, 0x5a, len);
    if (copy) memset(j.dst + off, 0, len);
    for (int r = 0; r < j.runs; r++) {
        pthread_barrier_wait(&j.start);
        double t0 = membw_now();
        membw_run(&j, off, len);
        pthread_barrier_wait(&j.done);
        double dt = membw_now() - t0;
        if (r > 0) gbps[r - 1] = (copy ? 2.0 : 1.0) * (double)bytes / (dt > 0 ? dt : 1e-9) / 1e9;
    }
    for (int t = 1; t < started; t++) pthread_join(th[t], NULL);
    qsort(gbps, (size_t)reps, sizeof *gbps, membw_cmp);
    *out = (membw_result){
        .gbps = reps % 2 ? gbps[reps / 2] : 0.5 * (gbps[reps / 2 - 1] + gbps[reps / 2]),
        .gbps_min = gbps[0],
        .gbps_max = gbps[reps - 1],
        .bytes = bytes,
        .n_threads = started,
        .reps = reps,
    };
    pthread_barrier_destroy(&j.start);
    pthread_barrier_destroy(&j.done);
    pthread_cond_destroy(&j.go_cond);
    pthread_mutex_destroy(&j.lock);
    free(j.src);
    free(j.dst);
    free(gbps);
    free(w);
    free(th);
    return 0;
}

int membw_cpu_copy(size_t bytes, int n_threads, int reps, membw_result *out, char *err, size_t err_size) {
    return membw_cpu(1, bytes, n_threads, reps, out, err, err_size);
}

int membw_cpu_read(size_t bytes, int n_threads, int reps, membw_result *out, char *err, size_t err_size) {
    return membw_cpu(0, bytes, n_threads, reps, out, err, err_size);
}
