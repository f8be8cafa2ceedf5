/* The fast CPU matrix product (engine/cpu_matmul.h): quantise the activations once (on the pool
 * when there are many tokens), then hand out tiles of ROW_BLOCK rows x TOK_BLOCK tokens. Tiles
 * of one row block are consecutive items, so a thread that claims a run of them keeps those
 * weight rows in L1/L2 while it walks the tokens; quant_dot_rows then reuses each unpacked
 * weight block across QUANT_DOT_TOK tokens in registers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu_matmul.h"
#include "quant/quant.h"

/* 16 rows of a 4096-wide Q4_K matrix are 36 KiB: L1-sized; 32 tokens of Q8_K activations of
 * that width are 146 KiB: L2-sized. */
#define ROW_BLOCK 16
#define TOK_BLOCK 32

void cpu_matmul_init(cpu_matmul_ctx *c, threadpool *pool, quant_isa isa) {
    *c = (cpu_matmul_ctx){.pool = pool, .isa = isa};
}

void cpu_matmul_free(cpu_matmul_ctx *c) {
    free(c->act);
    c->act = NULL;
    c->act_cap = 0;
}

int cpu_matmul_check(const cpu_weight *w, char *err, size_t err_size) {
    if (quant_dot_check(w->type, w->n_cols, err, err_size)) return -1;
    size_t need = quant_row_bytes(w->type, w->n_cols);
    if (w->n_rows <= 0 || !w->data || need == 0 || w->row_bytes < need) {
        snprintf(err, err_size, "cpu matmul: bad %s weight (%lld rows of %lld, %zu bytes a row, %zu needed%s)",
                 quant_type_name(w->type), (long long)w->n_rows, (long long)w->n_cols, w->row_bytes, need,
                 w->data ? "" : ", no data");
        return -1;
    }
    return 0;
}

typedef struct {
    const cpu_matmul_ctx *c;
    const cpu_weight *w;
    const float *x;
    float *out;
    int64_t n_tok, n_tb, row_block;
    size_t xq_bytes;  /* bytes of one quantised activation row */
} matmul_job;

static void matmul_quant_rows(void *arg, int64_t b, int64_t e, int thread) {
    (void)thread;
    matmul_job *j = arg;
    for (int64_t t = b; t < e; t++)
        quant_act_quant_row(j->c->isa, j->w->type, j->x + t * j->w->n_cols,
                            (uint8_t *)j->c->act + (size_t)t * j->xq_bytes, j->w->n_cols);
}

static void matmul_tiles(void *arg, int64_t b, int64_t e, int thread) {
    (void)thread;
    matmul_job *j = arg;
    const cpu_weight *w = j->w;
    for (int64_t i = b; i < e; i++) {
        int64_t rb = i / j->n_tb, tb = i % j->n_tb;
        int64_t r0 = rb * j->row_block, t0 = tb * TOK_BLOCK;
        int64_t nr = w->n_rows - r0 < j->row_block ? w->n_rows - r0 : j->row_block;
        int64_t nt = j->n_tok - t0 < TOK_BLOCK ? j->n_tok - t0 : TOK_BLOCK;
        quant_dot_rows(j->c->isa, w->type, w->n_cols, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes,
                       w->row_bytes, nr, (const uint8_t *)j->c->act + (size_t)t0 * j->xq_bytes, j->xq_bytes, nt,
                       j->out + (size_t)t0 * (size_t)w->n_rows + (size_t)r0, (size_t)w->n_rows);
    }
}

int cpu_matmul(cpu_matmul_ctx *c, const cpu_weight *w, const float *x, int64_t n_tok, float *out, char *err,
               size_t err_size) {
    if (cpu_matmul_check(w, err, err_size)) return -1;
    if (n_tok <= 0) return 0;
    size_t xq_bytes = quant_act_row_bytes(w->type, w->n_cols);
    if ((uint64_t)n_tok > SIZE_MAX / xq_bytes) {
        snprintf(err, err_size, "cpu matmul: %lld tokens of %zu bytes overflow", (long long)n_tok, xq_bytes);
        return -1;
    }
    size_t need = (size_t)n_tok * xq_bytes;
    if (need > c->act_cap) {
        void *p = realloc(c->act, need);
        if (!p) {
            snprintf(err, err_size, "cpu matmul: out of memory for %zu bytes of quantised activations", need);
            return -1;
        }
        c->act = p;
        c->act_cap = need;
    }
    int n_threads = c->pool ? threadpool_size(c->pool) : 1;
    /* Decode has one row block per item: shrink blocks until every thread gets several, so one
     * slow core does not hold up the product. */
    int64_t row_block = ROW_BLOCK;
    while (row_block > 1 && n_tok <= TOK_BLOCK && w->n_rows / row_block < 8 * n_threads) row_block /= 2;
    matmul_job j = {
        .c = c, .w = w, .x = x, .out = out, .n_tok = n_tok,
        .n_tb = (n_tok + TOK_BLOCK - 1) / TOK_BLOCK, .row_block = row_block, .xq_bytes = xq_bytes,
    };
    if (c->pool && n_tok >= 2 * n_threads)
        threadpool_run(c->pool, n_tok, 1, matmul_quant_rows, &j);
    else
        matmul_quant_rows(&j, 0, n_tok, 0);
    int64_t n_items = (w->n_rows + row_block - 1) / row_block * j.n_tb;
    if (c->pool)
        threadpool_run(c->pool, n_items, 1, matmul_tiles, &j);
    else
        matmul_tiles(&j, 0, n_items, 0);
    return 0;
}
