/* Op offload (engine.h's engine_gpu_backend.offload_*: the CPU's layers' products of many tokens
 * on a GPU, each weight copied over for its product) against f64 products of the CPU's
 * dequantisation, on weights quantised by the CPU quantiser from fresh random values and fresh
 * random X: every type the GPU's GEMM takes, in one chunk and in several (max_tok below n_tok),
 * rows stored with padding between them (row_bytes above the type's), the host buffers pinned (as
 * the engine asks) or pageable, the weight copied by a lent loop (engine_par) or by the caller, a
 * matrix larger than one staging buffer, relative error <= 2e-3
 * (the GEMM rounds weights and X to f16); a type it does not take (F32, Q5_0) declined with the
 * output untouched, as is a matrix larger than the ones it was prepared for; a set of matrices of
 * no type it takes refused with a message. The engine's use of it (a -ngl partial model's
 * prompt against one GPU) is tests/gpu/test_split.c's. Without a CUDA device: SKIP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/forward_cuda.h"
#include "tests/golden.h"
#include "tests/gpu/gen.h"

static const engine_gpu_backend *g = &forward_cuda_gpu;

/* A lent loop for the staged copies: items in three uneven pieces, last first (any order must do). */
static void par_run(void *self, int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *arg) {
    (void)self;
    const int64_t a = n / 3, b = 2 * n / 3;
    fn(arg, b, n, 0);
    fn(arg, a, b, 1);
    fn(arg, 0, a, 2);
}
static const engine_par g_par = {NULL, par_run};

/* rows x k weights of type t quantised row by row from normal values (a scale per row), each row
 * stored `pad` bytes after the previous one's end; the dequantised values into *deq. */
static llama_weight make_weight(gen_rng *r, uint32_t t, int64_t rows, int64_t k, size_t pad, float **deq) {
    const size_t rb = quant_row_bytes(t, k);
    llama_weight w = {.name = "test.weight", .type = t, .n_cols = k, .n_rows = rows, .row_bytes = rb + pad};
    uint8_t *data = malloc(w.row_bytes * (size_t)rows);
    float *src = malloc(sizeof(float) * (size_t)k);
    *deq = malloc(sizeof(float) * (size_t)(rows * k));
    char err[256];
    for (int64_t i = 0; i < rows; i++) {
        const double s = gen_uniform(r, 0.5, 2.0) / sqrt((double)k);
        for (int64_t j = 0; j < k; j++) src[j] = (float)(s * gen_normal(r));
        uint8_t *row = data + (size_t)i * w.row_bytes;
        if (quant_quant_row(t, src, row, k, err, sizeof err) || quant_dequant_row(t, row, *deq + i * k, k, err, sizeof err)) {
            fprintf(stderr, "# %s: %s\n", quant_type_name(t), err);
            exit(1);
        }
        memset(row + rb, 0xA5, pad); /* the gap: garbage the product must not read */
    }
    free(src);
    w.data = data;
    return w;
}

/* sqrt(sum (y - exact)^2 / sum exact^2) of out[t][r] against f64 products of the dequantised
 * weights; *finite 0 where a value is not; the largest |y - exact| in *worst (may be NULL). */
static double rel_error(const float *deq, const float *x, const float *y, int64_t rows, int64_t k, int64_t n_tok,
                        int *finite, double *worst) {
    double se = 0, sr = 0, wd = 0;
    *finite = 1;
    for (int64_t c = 0; c < n_tok; c++)
        for (int64_t i = 0; i < rows; i++) {
            double ref = 0;
            for (int64_t j = 0; j < k; j++) ref += (double)deq[i * k + j] * x[c * k + j];
            const double d = (double)y[c * rows + i] - ref;
            *finite &= isfinite(y[c * rows + i]);
            se += d * d;
            sr += ref * ref;
            if (fabs(d) > wd) wd = fabs(d);
        }
    if (worst) *worst = wd;
    return sqrt(se / sr);
}

/* Products in the spec's order (each copying the next weight beside it), then out of it: a
 * foreseen weight skipped, one asked twice in a row, one out of order, a pass again from the
 * start; each against f64, and the two slots said in the description. */
static void check_sequence(gen_rng *r) {
    enum { NW = 4, NT = 37 };
    const uint32_t types[NW] = {QUANT_Q4_K, QUANT_Q6_K, QUANT_Q4_0, QUANT_Q8_0};
    const int64_t rows[NW] = {256, 96, 320, 160}, k = 512;
    llama_weight w[NW];
    float *deq[NW];
    const llama_weight *ws[NW];
    for (int i = 0; i < NW; i++) w[i] = make_weight(r, types[i], rows[i], k, 0, &deq[i]), ws[i] = &w[i];
    float *x = malloc(sizeof(float) * NT * k), *y = malloc(sizeof(float) * NT * 320);
    char err[300] = "", desc[300] = "", name[200];
    const engine_offload_spec sp = {ws, NW, NULL, NULL, 0, NT};
    void *off = g->offload_new(0, &sp, desc, sizeof desc, err, sizeof err);
    if (!CHECK(off != NULL, "offload: prepared for a sequence of 4 matrices", "%s", err)) return;
    printf("# offload: %s\n", desc);
    CHECK(!strstr(desc, "no room"), "offload: two slots, the next weight copied beside a product", "%s", desc);
    static const int calls[] = {0, 1, 2, 3, 0, 2, 3, 3, 1, 0, 1, 2, 3};
    int bad = 0;
    double worst = 0;
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        const int i = calls[c];
        for (int64_t j = 0; j < NT * k; j++) x[j] = (float)gen_uniform(r, -1, 1); /* fresh X each product */
        for (int64_t j = 0; j < NT * rows[i]; j++) y[j] = NAN;
        int rc = g->offload_matmul(off, &w[i], x, NT, y, &g_par, err, sizeof err), finite = 0;
        const double rel = rc == 0 ? rel_error(deq[i], x, y, rows[i], k, NT, &finite, NULL) : INFINITY;
        if (rel > worst) worst = rel;
        if ((rc != 0 || !finite || !(rel <= 2e-3)) && !bad++)
            snprintf(name, sizeof name, "call %zu (matrix %d, %s): rc %d %s, relative error %.2e", c, i,
                     quant_type_name(types[i]), rc, err, rel);
    }
    char title[200];
    snprintf(title, sizeof title,
             "offload: 13 products in and out of the spec's order, each within 2e-3 of f64 (worst %.2e)", worst);
    CHECK(!bad, title, "%s", name);
    g->offload_free(off);
    for (int i = 0; i < NW; i++) free((void *)w[i].data), free(deq[i]);
    free(x);
    free(y);
}

static void check_product(gen_rng *r, uint32_t t, int64_t rows, int64_t k, int64_t n_tok, int32_t max_tok, size_t pad) {
    char name[200], err[300] = "", desc[200] = "";
    snprintf(name, sizeof name, "offload %s %lldx%lld, %lld tokens, max_tok %d, row padding %zu", quant_type_name(t),
             (long long)rows, (long long)k, (long long)n_tok, max_tok, pad);
    float *deq = NULL;
    llama_weight w = make_weight(r, t, rows, k, pad, &deq);
    float *x = malloc(sizeof(float) * (size_t)(n_tok * k)), *y = malloc(sizeof(float) * (size_t)(n_tok * rows));
    for (int64_t i = 0; i < n_tok * k; i++) x[i] = (float)gen_uniform(r, -1, 1);
    for (int64_t i = 0; i < n_tok * rows; i++) y[i] = NAN;
    const llama_weight *ws[] = {&w};
    void *host[] = {x, y};
    size_t host_bytes[] = {sizeof(float) * (size_t)(n_tok * k), sizeof(float) * (size_t)(n_tok * rows)};
    /* the padded cases pin X and Y (as the engine asks); the others copy pageable memory */
    const engine_offload_spec sp = {ws, 1, host, host_bytes, pad ? 2 : 0, max_tok};
    void *off = g->offload_new(0, &sp, desc, sizeof desc, err, sizeof err);
    if (CHECK(off != NULL, name, "offload_new: %s", err)) {
        if (pad) printf("# %s\n", desc);
        int rc = g->offload_matmul(off, &w, x, n_tok, y, pad || rows >= 16384 ? &g_par : NULL, err, sizeof err);
        if (CHECK(rc == 0, name, "offload_matmul returned %d: %s", rc, err)) {
            double worst = 0;
            int finite = 1;
            const double rel = rel_error(deq, x, y, rows, k, n_tok, &finite, &worst);
            snprintf(name + strlen(name), sizeof name - strlen(name), ": relative error %.2e <= 2e-3 (worst %.2e)",
                     rel, worst);
            CHECK(finite && rel <= 2e-3, name, "%s", finite ? "out of budget" : "a value not written or not finite");
        }
        g->offload_free(off);
    }
    free((void *)w.data);
    free(deq);
    free(x);
    free(y);
}

/* Matrices the device does not take come back declined (1), out untouched. */
static void check_declined(gen_rng *r) {
    char err[300] = "", desc[200] = "", name[160];
    float *deq = NULL, *deq2 = NULL;
    llama_weight q4 = make_weight(r, QUANT_Q4_0, 64, 256, 0, &deq);
    llama_weight big = make_weight(r, QUANT_Q4_0, 128, 256, 0, &deq2);
    const llama_weight *ws[] = {&q4};
    const engine_offload_spec sp = {ws, 1, NULL, NULL, 0, 64};
    void *off = g->offload_new(0, &sp, desc, sizeof desc, err, sizeof err);
    if (!CHECK(off != NULL, "offload: prepared for one Q4_0 matrix", "%s", err)) return;
    printf("# offload: %s\n", desc);
    enum { N = 40 };
    float x[N * 256], y[N * 128];
    for (int i = 0; i < N * 256; i++) x[i] = (float)gen_uniform(r, -1, 1);
    const uint32_t types[] = {QUANT_F32, QUANT_Q5_0};
    for (int i = 0; i < 2; i++) {
        float *d = NULL;
        llama_weight w = make_weight(r, types[i], 64, 256, 0, &d);
        for (int j = 0; j < N * 64; j++) y[j] = 7.0f;
        int rc = g->offload_matmul(off, &w, x, N, y, NULL, err, sizeof err);
        int same = 1;
        for (int j = 0; j < N * 64; j++) same &= y[j] == 7.0f;
        snprintf(name, sizeof name, "offload: %s declined (1), output untouched", quant_type_name(types[i]));
        CHECK(rc == 1 && same, name, "returned %d (%s), output %s", rc, err, same ? "untouched" : "written");
        free((void *)w.data);
        free(d);
    }
    for (int j = 0; j < N * 128; j++) y[j] = 7.0f;
    int rc = g->offload_matmul(off, &big, x, N, y, NULL, err, sizeof err);
    CHECK(rc == 1 && y[0] == 7.0f, "offload: a matrix larger than those prepared for declined", "returned %d", rc);
    g->offload_free(off);
    free((void *)q4.data);
    free((void *)big.data);
    free(deq);
    free(deq2);

    float *d = NULL;
    llama_weight f = make_weight(r, QUANT_F32, 64, 256, 0, &d);
    const llama_weight *fs[] = {&f};
    const engine_offload_spec fsp = {fs, 1, NULL, NULL, 0, 64};
    err[0] = 0;
    off = g->offload_new(0, &fsp, desc, sizeof desc, err, sizeof err);
    CHECK(off == NULL && err[0], "offload: matrices of no type the GEMM takes refused with a message", "%s",
          off ? "prepared" : "no message");
    if (off) g->offload_free(off);
    else printf("# %s\n", err);
    free((void *)f.data);
    free(d);
}

int main(void) {
    char why[256] = "";
    if (g->n_devices(why, sizeof why) == 0) {
        SKIP("gpu offload", "no CUDA device");
        return 0;
    }
    gen_rng r = {(uint64_t)time(NULL) * 2654435761u | 1}; /* fresh inputs every run; the seed printed */
    printf("# seed %llu\n", (unsigned long long)r.s);
    const uint32_t types[] = {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q6_K, QUANT_Q8_0, QUANT_Q5_K, QUANT_Q4_1, QUANT_Q3_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_product(&r, types[i], 320, 512, 40, 2048, 0);
        check_product(&r, types[i], 96, 768, 130, 48, 32); /* 3 chunks of at most 48 tokens, padded rows */
    }
    /* 37.7 MB: two pieces through the two staging buffers, copied by the lent loop */
    check_product(&r, QUANT_Q4_0, 16384, 4096, 33, 512, 0);
    check_declined(&r);
    check_sequence(&r);
    return test_done();
}
