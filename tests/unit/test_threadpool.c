/* Unit tests of engine/threadpool.h: a stress run (many jobs of odd sizes and grains on pools of
 * 1..8 threads) checking every item is done exactly once and by a valid thread; jobs back to
 * back and after the workers have gone to sleep; argument checks; and the wake-up cost. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "engine/threadpool.h"
#include "test.h"

typedef struct {
    _Atomic int *count;  /* per item: times done */
    int64_t n;
    int n_threads;
    _Atomic int bad_range, bad_thread;
    _Atomic int used[8];
} job;

static void job_fn(void *ctx, int64_t b, int64_t e, int thread) {
    job *j = ctx;
    if (b < 0 || e > j->n || b >= e) atomic_fetch_add(&j->bad_range, 1);
    if (thread < 0 || thread >= j->n_threads) atomic_fetch_add(&j->bad_thread, 1);
    else atomic_store(&j->used[thread], 1);
    for (int64_t i = b; i < e && i >= 0 && i < j->n; i++) atomic_fetch_add(&j->count[i], 1);
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_stress(void) {
    char err[256];
    for (int nt = 1; nt <= 8; nt++) {
        threadpool *p;
        int rc = threadpool_create(nt, &p, err, sizeof err);
        if (!CHECK(rc == 0 && threadpool_size(p) == nt, "threadpool_create", "%d threads: %s", nt, err)) continue;
        int bad = 0, multi = 0;
        char why[256] = "";
        for (int it = 0; it < 400; it++) {
            int64_t n = it % 50 == 0 ? 0 : (int64_t)(next_rand() % 3000) + 1;
            int64_t grain = (int64_t)(next_rand() % 70);  /* 0 means 1 */
            job j = {.n = n, .n_threads = nt};
            j.count = calloc((size_t)(n ? n : 1), sizeof *j.count);
            threadpool_run(p, n, grain, job_fn, &j);
            int64_t wrong = -1;
            for (int64_t i = 0; i < n; i++)
                if (atomic_load(&j.count[i]) != 1) wrong = i;
            int used = 0;
            for (int t = 0; t < nt; t++) used += atomic_load(&j.used[t]);
            multi += used > 1;
            if (wrong >= 0 || atomic_load(&j.bad_range) || atomic_load(&j.bad_thread)) {
                if (!bad++)
                    snprintf(why, sizeof why, "job %d (n %lld, grain %lld): item %lld done %d times, %d bad ranges, %d bad threads",
                             it, (long long)n, (long long)grain, (long long)wrong,
                             wrong >= 0 ? atomic_load(&j.count[wrong]) : 1, atomic_load(&j.bad_range),
                             atomic_load(&j.bad_thread));
            }
            free(j.count);
            /* now and then let the workers fall asleep, so the futex path runs too */
            if (it % 97 == 0) usleep(3000);
        }
        char name[96];
        snprintf(name, sizeof name, "threadpool %d threads: 400 jobs, every item done exactly once", nt);
        CHECK(!bad, name, "%s (%d bad jobs)", why, bad);
        if (nt > 1) printf("  info: %d threads: %d of 400 jobs ran on more than one thread\n", nt, multi);
        threadpool_destroy(p);
    }
    threadpool *p;
    CHECK(threadpool_create(0, &p, err, sizeof err) == -1 && p == NULL && strstr(err, "0 threads"),
          "threadpool_create refuses 0 threads", "\"%s\"", err);
    CHECK(threadpool_create(100000, &p, err, sizeof err) == -1 && strstr(err, "1 to 256"),
          "threadpool_create refuses 100000 threads", "\"%s\"", err);
    threadpool_destroy(NULL);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wake-up cost: the caller publishes a 2-item job and times how long the worker takes to start
 * its item (each item busy-waits 200 us, so the caller cannot take both before the worker shows
 * up unless the worker is more than 200 us late). Back to back (the worker still spinning) and
 * after 2 ms idle (the worker asleep on the futex). Printed, not checked: the machine is shared. */
typedef struct {
    double t0, start[2];
} wake_job;

static void wake_fn(void *ctx, int64_t b, int64_t e, int thread) {
    wake_job *j = ctx;
    (void)b, (void)e;
    if (thread < 2) j->start[thread] = now();
    double until = now() + 200e-6;
    while (now() < until) {}
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_wake_cost(void) {
    char err[256];
    threadpool *p;
    if (threadpool_create(2, &p, err, sizeof err)) return;
    enum { RUNS = 40 };
    double hot[RUNS], cold[RUNS];
    int n_hot = 0, n_cold = 0;
    for (int r = 0; r < 2 * RUNS; r++) {
        int is_cold = r % 2;
        if (is_cold) usleep(2000);
        wake_job j = {.start = {-1, -1}};
        j.t0 = now();
        threadpool_run(p, 2, 1, wake_fn, &j);
        if (j.start[1] < 0) continue;  /* the worker came too late and the caller did both */
        if (is_cold) cold[n_cold++] = j.start[1] - j.t0;
        else hot[n_hot++] = j.start[1] - j.t0;
    }
    qsort(hot, (size_t)n_hot, sizeof hot[0], cmp_double);
    qsort(cold, (size_t)n_cold, sizeof cold[0], cmp_double);
    if (n_hot && n_cold)
        printf("  info: worker start after publishing a job: %.1f us best / %.1f us median while spinning, "
               "%.1f / %.1f us from the futex (%d and %d of %d runs used the worker)\n",
               hot[0] * 1e6, hot[n_hot / 2] * 1e6, cold[0] * 1e6, cold[n_cold / 2] * 1e6, n_hot, n_cold, RUNS);
    threadpool_destroy(p);
}

int main(void) {
    test_stress();
    test_wake_cost();
    return test_done();
}
