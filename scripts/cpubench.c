/* cpubench: times the fast CPU backend's kernels on the matrices of real GGUF files, against the
 * machine's memory bandwidth (engine/membw.c):
 *   1. dot kernels alone, one thread, each path (portable, AVX2, AVX-512 VNNI), on layer 0's
 *      matrices and the output head: GB/s of weights at 1 token, GFLOP/s at many tokens;
 *   2. the full product (engine/cpu_matmul.c) on the pool, 1 and P tokens, and for scale the
 *      exact reference's algorithm (dequantise a block of rows to f32, f32 dots) at 1 token;
 *   3. every matrix of the model once (all layers and the head): the matrix-product time of a
 *      decode step and of a P-token prompt, hence tg / pp estimates (matrix products only:
 *      attention, norms and the rest are not counted), with the engine's activation pairs and
 *      with 8-bit activations alone (what the pairs cost).
 * Per-matrix figures at 1 token come from cache where a matrix fits in L3; the whole-model pass
 * streams from memory. Best of several runs: the machine may be shared. The one-thread kernel
 * figures use the thread's CPU time (free of time spent descheduled); the pool and whole-model
 * figures give wall time, and the whole-model pass also the process's CPU time, which on one
 * thread is the pure compute cost. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cpu_matmul.h"
#include "engine/membw.h"
#include "engine/threadpool.h"
#include "gguf/gguf.h"
#include "quant/dot.h"
#include "quant/quant.h"

static const char usage[] =
    "usage: cpubench [options] MODEL.gguf...\n"
    "  -t N        threads of the pool (default 2)\n"
    "  -p N        tokens of the prompt case (default 128)\n"
    "  -r N        runs per figure, the best is kept (default 3)\n"
    "  --no-model  skip the whole-model pass\n"
    "  --no-bw     skip the memory-bandwidth measurement\n";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread, or of the whole process: on a shared machine a run of a few
 * milliseconds is often descheduled, and wall time then measures the neighbours. */
static double cpu_now(clockid_t which) {
    struct timespec ts;
    clock_gettime(which, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *msg) {
    fprintf(stderr, "cpubench: %s\n", msg);
    exit(2);
}

typedef struct {
    threadpool *pool;
    int reps, n_prompt;
    float *x, *out;   /* [n_prompt][max cols], [n_prompt][max rows] */
    void *xq, *panel;
} bench;

static cpu_weight weight_of(const gguf_tensor *t) {
    return (cpu_weight){.type = t->type, .n_cols = t->ne[0], .n_rows = t->ne[1],
                        .row_bytes = quant_row_bytes(t->type, t->ne[0]), .data = t->data};
}

/* Seconds of one kernel-only pass over the matrix: n_tok tokens, one thread, path isa; with
 * panels, each 16 rows are unpacked (counted) and every token runs against them. */
static double time_dots(bench *b, const cpu_weight *w, quant_isa isa, int n_tok, int panels) {
    size_t xb = quant_act_row_bytes(w->type, w->n_cols);
    for (int t = 0; t < n_tok; t++)
        quant_act_quant_row(isa, w->type, b->x + (size_t)t * w->n_cols, (uint8_t *)b->xq + (size_t)t * xb, w->n_cols);
    double best = 1e30;
    for (int r = 0; r < b->reps; r++) {
        double t0 = cpu_now(CLOCK_THREAD_CPUTIME_ID);
        for (int64_t r0 = 0; panels && r0 < w->n_rows; r0 += QUANT_PANEL_ROWS) {
            int nr = w->n_rows - r0 < QUANT_PANEL_ROWS ? (int)(w->n_rows - r0) : QUANT_PANEL_ROWS;
            quant_panel_pack(w->type, w->n_cols, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes, nr,
                             b->panel);
            quant_panel_dot(isa, w->type, w->n_cols, b->panel, nr, b->xq, xb, n_tok, b->out + r0, (size_t)w->n_rows);
        }
        /* rows in blocks of 16, as cpu_matmul tiles them */
        for (int64_t r0 = 0; !panels && r0 < w->n_rows; r0 += 16) {
            int64_t nr = w->n_rows - r0 < 16 ? w->n_rows - r0 : 16;
            quant_dot_rows(isa, w->type, w->n_cols, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes,
                           nr, b->xq, xb, n_tok, b->out + r0, (size_t)w->n_rows);
        }
        double dt = cpu_now(CLOCK_THREAD_CPUTIME_ID) - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

static double time_matmul(bench *b, cpu_matmul_ctx *c, const cpu_weight *w, int n_tok) {
    char err[256];
    double best = 1e30;
    for (int r = 0; r < b->reps; r++) {
        double t0 = now();
        if (cpu_matmul(c, w, b->x, n_tok, b->out, err, sizeof err)) die(err);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

/* The exact reference's algorithm: 8 rows dequantised to f32, then f32 dots per token. */
typedef struct {
    const cpu_weight *w;
    const float *x;
    float *out, *rows;  /* rows: per thread, 8 * n_cols */
    int n_tok;
} exact_job;

static void exact_range(void *arg, int64_t b, int64_t e, int thread) {
    exact_job *j = arg;
    const cpu_weight *w = j->w;
    int64_t n = w->n_cols;
    float *rows = j->rows + (size_t)thread * 8 * (size_t)n;
    for (int64_t r0 = b * 8; r0 < e * 8 && r0 < w->n_rows; r0 += 8) {
        int64_t nr = w->n_rows - r0 < 8 ? w->n_rows - r0 : 8;
        for (int64_t r = 0; r < nr; r++)
            quant_dequant_row(w->type, (const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes, rows + r * n, n, NULL, 0);
        for (int t = 0; t < j->n_tok; t++)
            for (int64_t r = 0; r < nr; r++) {
                float s = 0;
                for (int64_t c = 0; c < n; c++) s += rows[r * n + c] * j->x[t * n + c];
                j->out[t * w->n_rows + r0 + r] = s;
            }
    }
}

static double time_exact(bench *b, const cpu_weight *w) {
    int nt = threadpool_size(b->pool);
    exact_job j = {.w = w, .x = b->x, .out = b->out, .n_tok = 1};
    j.rows = malloc((size_t)nt * 8 * (size_t)w->n_cols * sizeof(float));
    if (!j.rows) die("out of memory");
    double best = 1e30;
    for (int r = 0; r < b->reps; r++) {
        double t0 = now();
        threadpool_run(b->pool, (w->n_rows + 7) / 8, 1, exact_range, &j);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    free(j.rows);
    return best;
}

/* A matrix the forward pass multiplies by: a 2-D block weight, or the head (the token
 * embedding where the file has no output.weight: a tied head). */
static int is_matrix(gguf_ctx *g, const gguf_tensor *t) {
    if (t->n_dims != 2) return 0;
    if (!strncmp(t->name, "blk.", 4) || !strcmp(t->name, "output.weight")) return 1;
    return !strcmp(t->name, "token_embd.weight") && gguf_find_tensor(g, "output.weight") < 0;
}

static int is_head(gguf_ctx *g, const gguf_tensor *t) {
    return is_matrix(g, t) && strncmp(t->name, "blk.", 4);
}

static void bench_matrices(bench *b, gguf_ctx *g) {
    int n_tok = b->n_prompt;
    printf("\nper matrix (layer 0 and the head), one thread, kernels only: GB/s of weights at 1 token; GFLOP/s at %d\n"
           "tokens with the row kernel and with panels (unpacking included)\n",
           n_tok);
    printf("%-26s %-5s %12s %8s", "matrix", "type", "rows x cols", "MiB");
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++)
        if (quant_isa_supported((quant_isa)isa)) printf(" | %-6s GB/s rowGF panGF", quant_isa_name((quant_isa)isa));
    printf("\n");
    cpu_matmul_ctx c;
    cpu_matmul_init(&c, b->pool, quant_isa_best());
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (!is_matrix(g, t) || (strncmp(t->name, "blk.0.", 6) && !is_head(g, t))) continue;
        cpu_weight w = weight_of(t);
        char err[256];
        if (cpu_matmul_check(&w, err, sizeof err)) {
            printf("%-26s skipped: %s\n", t->name, err);
            continue;
        }
        double bytes = (double)w.row_bytes * (double)w.n_rows, flop1 = 2.0 * (double)w.n_rows * (double)w.n_cols;
        printf("%-26s %-5s %5lld x %5lld %8.2f", t->name, quant_type_name(w.type), (long long)w.n_rows,
               (long long)w.n_cols, bytes / 1048576.0);
        for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
            if (!quant_isa_supported((quant_isa)isa)) continue;
            /* the portable path is slow: its many-token figure uses 4 tokens */
            int nt = isa == QUANT_ISA_REF ? 4 : n_tok;
            double t1 = time_dots(b, &w, (quant_isa)isa, 1, 0), tn = time_dots(b, &w, (quant_isa)isa, nt, 0);
            printf(" | %11.1f %5.1f", bytes / t1 / 1e9, flop1 * nt / tn / 1e9);
            if (quant_panel_usable((quant_isa)isa, w.type))
                printf(" %5.1f", flop1 * nt / time_dots(b, &w, (quant_isa)isa, nt, 1) / 1e9);
            else
                printf(" %5s", "-");
        }
        printf("\n");
        double m1 = time_matmul(b, &c, &w, 1), mn = time_matmul(b, &c, &w, n_tok), ex = time_exact(b, &w);
        printf("%-26s   pool of %d: 1 token %.3f ms (%.1f GB/s), %d tokens %.2f ms (%.1f GFLOP/s); exact path 1 token %.3f ms (%.1f GB/s)\n",
               "", threadpool_size(b->pool), m1 * 1e3, bytes / m1 / 1e9, n_tok, mn * 1e3, flop1 * n_tok / mn / 1e9,
               ex * 1e3, bytes / ex / 1e9);
    }
    cpu_matmul_free(&c);
}

/* Every matrix once: the matrix-product time of a forward pass of n_tok tokens (best wall time;
 * *cpu the least process CPU time of the runs). */
static double model_pass(bench *b, cpu_matmul_ctx *c, gguf_ctx *g, int n_tok, double *bytes, double *cpu) {
    double best = 1e30;
    *cpu = 1e30;
    for (int r = 0; r < b->reps; r++) {
        double t0 = now(), c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
        *bytes = 0;
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
            const gguf_tensor *t = gguf_tensor_at(g, i);
            if (!is_matrix(g, t)) continue;
            cpu_weight w = weight_of(t);
            char err[256];
            if (cpu_matmul(c, &w, b->x, n_tok, b->out, err, sizeof err)) die(err);
            *bytes += (double)w.row_bytes * (double)w.n_rows;
        }
        double dt = now() - t0, dc = cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0;
        best = dt < best ? dt : best;
        *cpu = dc < *cpu ? dc : *cpu;
    }
    return best;
}

/* Both activation forms of cpu_matmul: the pairs of 8-bit rows the engine uses, and one 8-bit
 * row (half the integer work, ~4e-3 mean KLD from the exact path on real models). */
static void bench_model(bench *b, gguf_ctx *g, double bw) {
    for (int pair = 1; pair >= 0; pair--) {
        cpu_matmul_ctx c;
        cpu_matmul_init(&c, b->pool, quant_isa_best());
        c.act_pair = pair;
        double bytes, t1, tn, c1, cn;
        model_pass(b, &c, g, 1, &bytes, &c1);  /* page the file in */
        t1 = model_pass(b, &c, g, 1, &bytes, &c1);
        tn = model_pass(b, &c, g, b->n_prompt, &bytes, &cn);
        printf("\nwhole model, %s path, %d threads, %s: %.1f MiB of matrices\n", quant_isa_name(c.isa),
               threadpool_size(b->pool), pair ? "activation pairs (the engine's)" : "8-bit activations alone",
               bytes / 1048576.0);
        printf("  decode step: %.2f ms of matrix products = %.1f GB/s", t1 * 1e3, bytes / t1 / 1e9);
        if (bw > 0) printf(" (%.0f%% of the %.1f GB/s read bandwidth)", 100 * bytes / t1 / 1e9 / bw, bw);
        printf(" -> tg at most %.1f t/s\n", 1 / t1);
        printf("  prompt of %d: %.1f ms of matrix products -> pp at most %.1f t/s\n", b->n_prompt, tn * 1e3,
               b->n_prompt / tn);
        printf("  process CPU time of those runs: decode %.2f ms, prompt %.1f ms (all threads, spinning included)\n",
               c1 * 1e3, cn * 1e3);
        cpu_matmul_free(&c);
    }
}

int main(int argc, char **argv) {
    int n_threads = 2, n_prompt = 128, reps = 3, do_model = 1, do_bw = 1, first = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "-p") || !strcmp(a, "-r")) && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 4096) {
                fprintf(stderr, "cpubench: %s %s: want a number from 1 to 4096\n", a, argv[i]);
                return 1;
            }
            *(a[1] == 't' ? &n_threads : a[1] == 'p' ? &n_prompt : &reps) = (int)v;
        } else if (!strcmp(a, "--no-model")) {
            do_model = 0;
        } else if (!strcmp(a, "--no-bw")) {
            do_bw = 0;
        } else if (a[0] == '-') {
            fprintf(stderr, "cpubench: unknown option %s\n%s", a, usage);
            return 1;
        } else if (!first) {
            first = i;
        }
    }
    if (!first) {
        fputs(usage, stderr);
        return 1;
    }
    char err[512];
    bench b = {.reps = reps, .n_prompt = n_prompt};
    if (threadpool_create(n_threads, &b.pool, err, sizeof err)) die(err);
    printf("cpubench: %d threads, best path %s, best of %d runs\n", n_threads, quant_isa_name(quant_isa_best()), reps);
    double bw = 0;
    if (do_bw) {
        membw_result m, c;
        if (membw_cpu_read((size_t)256 << 20, n_threads, 5, &m, err, sizeof err)) die(err);
        if (membw_cpu_copy((size_t)256 << 20, n_threads, 5, &c, err, sizeof err)) die(err);
        bw = m.gbps_max;
        printf("memory: read of 256 MiB on %d threads: %.1f GB/s best, %.1f median; copy %.1f best (read + written "
               "bytes)\n", m.n_threads, m.gbps_max, m.gbps, c.gbps_max);
    }
    for (int i = first; i < argc; i++) {
        if (argv[i][0] == '-') {
            if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "-p") || !strcmp(argv[i], "-r")) i++;
            continue;
        }
        gguf_ctx *g = gguf_open(argv[i], 1, err, sizeof err);
        if (!g) die(err);
        int64_t max_cols = 0, max_rows = 0;
        size_t max_xq = 0, max_panel = 0;
        for (int64_t k = 0; k < gguf_n_tensors(g); k++) {
            const gguf_tensor *t = gguf_tensor_at(g, k);
            if (!is_matrix(g, t)) continue;
            max_cols = t->ne[0] > max_cols ? t->ne[0] : max_cols;
            max_rows = t->ne[1] > max_rows ? t->ne[1] : max_rows;
            size_t xq = quant_act_row_bytes(t->type, t->ne[0]), pb = quant_panel_bytes(t->type, t->ne[0]);
            max_xq = xq > max_xq ? xq : max_xq;
            max_panel = pb > max_panel ? pb : max_panel;
        }
        b.x = malloc((size_t)(n_prompt * max_cols) * sizeof(float));
        b.out = malloc((size_t)(n_prompt * max_rows) * sizeof(float));
        b.xq = malloc((size_t)n_prompt * max_xq + 64);
        b.panel = malloc(max_panel + 64);
        if (!b.x || !b.out || !b.xq || !b.panel) die("out of memory");
        for (int64_t k = 0; k < n_prompt * max_cols; k++) b.x[k] = sinf((float)k * 0.37f) + 0.1f * cosf((float)k);
        printf("\n== %s\n", argv[i]);
        bench_matrices(&b, g);
        if (do_model) bench_model(&b, g, bw);
        free(b.x), free(b.out), free(b.xq), free(b.panel);
        gguf_close(g);
    }
    threadpool_destroy(b.pool);
    return 0;
}
