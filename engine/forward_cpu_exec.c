/* The CPU forward pass's two paths (engine/forward_cpu_exec.h): the exact product dequantises a
 * block of weight rows into per-thread scratch and dots every token with them in f32; the fast
 * one hands the weight as stored to cpu_matmul. Loops go to threads started per call on the exact
 * path (as the reference always did) and to the persistent pool on the fast one. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/forward_cpu_exec.h"
#include "engine/engine.h"

enum { MATMUL_ROWS = 16 };  /* weight rows dequantised together */

int forward_cpu_exec_init(forward_cpu_exec *x, int n_threads, int64_t max_cols, char *err, size_t err_size) {
    *x = (forward_cpu_exec){.n_threads = n_threads, .max_cols = max_cols, .isa = QUANT_ISA_REF};
    x->scratch = malloc((size_t)n_threads * MATMUL_ROWS * (size_t)max_cols * sizeof(float));
    if (!x->scratch) {
        snprintf(err, err_size, "out of memory for %d threads' weight rows; use a smaller -t", n_threads);
        return -1;
    }
    return 0;
}

int forward_cpu_exec_fast(forward_cpu_exec *x, char *err, size_t err_size) {
    if (x->pool) return 0;
    if (threadpool_create(x->n_threads, &x->pool, err, err_size)) return -1;
    x->isa = quant_isa_best();
    cpu_matmul_init(&x->mm, x->pool, x->isa);
    return 0;
}

void forward_cpu_exec_offload(forward_cpu_exec *x, const forward_cpu_offload *o) {
    if (x->off.free) x->off.free(x->off.ctx);
    x->off = *o;
}

void forward_cpu_exec_free(forward_cpu_exec *x) {
    if (x->off.free) x->off.free(x->off.ctx);
    if (x->ilv_mem) munmap(x->ilv_mem, x->ilv_map_bytes);
    free(x->ilv_of);
    free(x->ilv);
    if (x->pool) cpu_matmul_free(&x->mm);
    threadpool_destroy(x->pool);
    free(x->scratch);
    *x = (forward_cpu_exec){0};
}

/* --- repacked weights --------------------------------------------------------------------------- */

static cpu_weight cpu_weight_of(const llama_weight *w) {
    return (cpu_weight){w->type, w->n_cols, w->n_rows, w->row_bytes, w->data, NULL};
}

typedef struct {
    const cpu_weight *w;
    void *dst;
} repack_job;

static void repack_range(void *arg, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const repack_job *j = arg;
    cpu_matmul_repack(j->w, lo, hi, j->dst);
}

/* Each form starts on a 4 KiB boundary; the mapping on a 2 MiB one, so that it may take huge
 * pages (decode streams it: ~30% more bandwidth from huge pages than from 4 KiB ones here). */
#define ILV_ALIGN 4096
#define ILV_HUGE (2u << 20)

/* The bytes w's repacked form takes in the mapping (whole ILV_ALIGN units), 0 where the fast
 * path does not repack it. */
static size_t span_of(const cpu_weight *cw, quant_isa isa) {
    size_t b = cpu_matmul_repack_bytes(cw, isa);
    return (b + ILV_ALIGN - 1) & ~(size_t)(ILV_ALIGN - 1);
}

static size_t ilv_span(const cpu_weight *cw, quant_isa isa) {
    char why[256];
    return cpu_matmul_check(cw, why, sizeof why) ? 0 : span_of(cw, isa);
}

size_t forward_cpu_exec_repack_span(const llama_weight *w, quant_isa isa) {
    cpu_weight cw = cpu_weight_of(w);
    return span_of(&cw, isa);
}

int forward_cpu_exec_repack(forward_cpu_exec *x, const llama_weight *const *w, int n, char *err, size_t err_size) {
    if (!x->pool || x->ilv_mem || n <= 0) return 0;
    size_t total = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        cpu_weight cw = cpu_weight_of(w[i]);
        size_t b = ilv_span(&cw, x->isa);
        total += b;
        k += b != 0;
    }
    if (!k) return 0;
    x->ilv_of = calloc((size_t)k, sizeof *x->ilv_of);
    x->ilv = calloc((size_t)k, sizeof *x->ilv);
    size_t map = total + ILV_HUGE;
    void *mem = x->ilv_of && x->ilv ? mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                    : MAP_FAILED;
    if (mem == MAP_FAILED) {
        free(x->ilv_of);
        free(x->ilv);
        x->ilv_of = NULL;
        x->ilv = NULL;
        snprintf(err, err_size, "out of memory for %zu MiB of weights repacked for the fast CPU path", total >> 20);
        return -1;
    }
    x->ilv_mem = mem;
    x->ilv_map_bytes = map;
    x->ilv_bytes = total;
    uint8_t *base = (uint8_t *)(((uintptr_t)mem + ILV_HUGE - 1) & ~(uintptr_t)(ILV_HUGE - 1));
#ifdef MADV_HUGEPAGE
    madvise(base, total, MADV_HUGEPAGE);  /* a hint: without it the form is the same, a little slower */
#endif
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cpu_weight cw = cpu_weight_of(w[i]);
        size_t b = ilv_span(&cw, x->isa);
        if (!b) continue;
        repack_job j = {&cw, base + off};
        int64_t groups = (cw.n_rows + QUANT_ILV_ROWS - 1) / QUANT_ILV_ROWS;
        threadpool_run(x->pool, groups, 16, repack_range, &j);
        x->ilv_of[x->n_ilv] = w[i];
        x->ilv[x->n_ilv++] = base + off;
        off += b;
    }
    return 0;
}

/* w's repacked form, or NULL. */
static const void *ilv_find(forward_cpu_exec *x, const llama_weight *w) {
    for (int k = 0; k < x->n_ilv; k++) {
        int i = (x->ilv_next + k) % x->n_ilv;
        if (x->ilv_of[i] == w) {
            x->ilv_next = (i + 1) % x->n_ilv;
            return x->ilv[i];
        }
    }
    return NULL;
}

/* --- loops -------------------------------------------------------------------------------------- */

typedef struct {
    forward_cpu_exec_fn fn;
    void *ctx;
    int64_t lo, hi;
    int tid;
} par_job;

static void *par_main(void *arg) {
    par_job *j = arg;
    j->fn(j->ctx, j->lo, j->hi, j->tid);
    return NULL;
}

/* [0, n) in one contiguous range per thread (thread 0 is the caller). A thread that cannot be
 * started has its range run by the caller, so the result is the same either way. */
static void parallel_for(int n_threads, int64_t n, forward_cpu_exec_fn fn, void *ctx) {
    enum { MAX_THREADS = 256 };
    int nt = n_threads < 1 ? 1 : n_threads > MAX_THREADS ? MAX_THREADS : n_threads;
    if (nt > n) nt = (int)(n > 0 ? n : 1);
    par_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 0; t < nt; t++) {
        jobs[t] = (par_job){fn, ctx, n * t / nt, n * (t + 1) / nt, t};
        if (t > 0) started[t] = pthread_create(&th[t], NULL, par_main, &jobs[t]) == 0;
    }
    fn(ctx, jobs[0].lo, jobs[0].hi, 0);
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else fn(ctx, jobs[t].lo, jobs[t].hi, t);
    }
}

void forward_cpu_exec_for(forward_cpu_exec *x, int nt, int64_t n, forward_cpu_exec_fn fn, void *ctx) {
    if (!x->pool) {
        parallel_for(nt, n, fn, ctx);
        return;
    }
    /* Items vary in cost (attention over longer or shorter histories): a few chunks per thread
     * let a free thread take the next one. */
    int64_t grain = n / (4 * (int64_t)x->n_threads);
    threadpool_run(x->pool, n, grain < 1 ? 1 : grain, fn, ctx);
}

/* --- matrix products ---------------------------------------------------------------------------- */

/* engine_par's loop on the exec's threads (the offload's weight copies). */
static void par_run(void *self, int64_t n, void (*fn)(void *arg, int64_t lo, int64_t hi, int tid), void *arg) {
    forward_cpu_exec *x = self;
    forward_cpu_exec_for(x, x->n_threads, n, fn, arg);
}

float forward_cpu_exec_dot(const float *a, const float *b, int64_t n) {
    /* Eight partial sums in a fixed order: vectorisable, and the same result on any thread. */
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    for (; i < n; i++) s[i & 7] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

typedef struct {
    forward_cpu_exec *x;
    const llama_weight *w;
    const float *in;     /* [n_tok][w->n_cols] */
    int64_t n_tok;
    float *out;          /* [n_tok][w->n_rows] */
    int failed;          /* set by any thread whose dequantisation failed */
    char err[256];
    pthread_mutex_t lock;
} matmul_ctx;

static void matmul_range(void *arg, int64_t lo, int64_t hi, int tid) {
    matmul_ctx *c = arg;
    const llama_weight *w = c->w;
    int64_t n = w->n_cols;
    float *rows = c->x->scratch + (size_t)tid * MATMUL_ROWS * (size_t)c->x->max_cols;
    /* A block of rows is dequantised once, then each token's activations are read once per
     * block instead of once per row. */
    for (int64_t r0 = lo; r0 < hi; r0 += MATMUL_ROWS) {
        int64_t nr = hi - r0 < MATMUL_ROWS ? hi - r0 : MATMUL_ROWS;
        for (int64_t r = 0; r < nr; r++) {
            char err[256];
            if (llama_weight_row(w, r0 + r, rows + r * n, err, sizeof err)) {
                pthread_mutex_lock(&c->lock);
                if (!c->failed) snprintf(c->err, sizeof c->err, "%s", err);
                c->failed = 1;
                pthread_mutex_unlock(&c->lock);
                return;
            }
        }
        for (int64_t t = 0; t < c->n_tok; t++) {
            const float *in = c->in + t * n;
            float *out = c->out + t * w->n_rows + r0;
            for (int64_t r = 0; r < nr; r++) out[r] = forward_cpu_exec_dot(rows + r * n, in, n);
        }
    }
}

int forward_cpu_exec_matmul(forward_cpu_exec *x, int nt, const llama_weight *w, const float *in, int64_t n_tok,
                            float *out, char *err, size_t err_size) {
    if (x->off.matmul && n_tok >= x->off.min_tok) {
        const engine_par par = {x, par_run};
        int r = x->off.matmul(x->off.ctx, w, in, n_tok, out, &par, err, err_size);
        if (r <= 0) return r;
    }
    if (x->pool) {
        cpu_weight cw = cpu_weight_of(w);
        cw.ilv = ilv_find(x, w);
        char why[256];
        if (!cpu_matmul_check(&cw, why, sizeof why)) return cpu_matmul(&x->mm, &cw, in, n_tok, out, err, err_size);
    }
    matmul_ctx c = {.x = x, .w = w, .in = in, .n_tok = n_tok, .out = out};
    pthread_mutex_init(&c.lock, NULL);
    forward_cpu_exec_for(x, nt, w->n_rows, matmul_range, &c);
    pthread_mutex_destroy(&c.lock);
    if (c.failed) snprintf(err, err_size, "%s", c.err);
    return c.failed ? -1 : 0;
}

int forward_cpu_exec_matmuls(forward_cpu_exec *x, int nt, const llama_weight *const *w, int n_w, const float *in,
                             int64_t n_tok, float *const *out, char *err, size_t err_size) {
    /* one product where the fast path takes all of them alike, else one at a time (also each
     * offloaded weight: a device product per matrix) */
    int one = x->pool != NULL && n_w <= CPU_MATMUL_MAX_MULTI && !(x->off.matmul && n_tok >= x->off.min_tok);
    cpu_weight cw[CPU_MATMUL_MAX_MULTI];
    const cpu_weight *pw[CPU_MATMUL_MAX_MULTI];
    for (int k = 0; k < n_w && one; k++) {
        char why[256];
        cw[k] = cpu_weight_of(w[k]);
        cw[k].ilv = ilv_find(x, w[k]);
        pw[k] = &cw[k];
        one = !cpu_matmul_check(&cw[k], why, sizeof why) && quant_act_of(w[k]->type) == quant_act_of(w[0]->type) &&
              w[k]->n_cols == w[0]->n_cols;
    }
    if (one) return cpu_matmul_multi(&x->mm, pw, n_w, in, n_tok, out, err, err_size);
    for (int k = 0; k < n_w; k++)
        if (forward_cpu_exec_matmul(x, nt, w[k], in, n_tok, out[k], err, err_size)) return -1;
    return 0;
}
