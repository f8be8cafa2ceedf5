/* The fast CPU matrix product (engine/cpu_matmul.h): quantise the activations once (on the pool
 * when there are many tokens), then hand out items. Few tokens: tiles of ROW_BLOCK rows x
 * TOK_BLOCK tokens through quant_dot_rows (each unpacked weight block reused across
 * QUANT_DOT_TOK tokens in registers). Many tokens: an item is a group of 16-row panels x PANEL_TOK
 * tokens; the thread unpacks the rows into its panel buffer once and runs the tokens against it
 * (quant_panel_dot). Every output element is computed the same way whatever the thread count, so
 * results do not depend on -t. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu_matmul.h"
#include "quant/quant.h"

/* 16 rows of a 4096-wide Q4_K matrix are 36 KiB: L1-sized; 32 tokens of Q8_K activations of
 * that width are 146 KiB: L2-sized. */
#define ROW_BLOCK 16
#define TOK_BLOCK 32
/* rows of a decode item (see cpu_matmul): 256 rows of a 1024-wide Q4_K matrix are 144 KiB */
#define DECODE_ROW_BLOCK 256
/* 256 tokens of 4096-wide activations are ~1.1 MiB: about one core's L2. */
#define PANEL_TOK 256

void cpu_matmul_init(cpu_matmul_ctx *c, threadpool *pool, quant_isa isa) {
    *c = (cpu_matmul_ctx){.pool = pool, .isa = isa, .act_pair = 1};
}

void cpu_matmul_free(cpu_matmul_ctx *c) {
    free(c->act);
    free(c->actx);
    free(c->panels);
    free(c->pair_out);
    c->act = c->actx = c->panels = NULL;
    c->actx_cap = 0;
    c->pair_out = NULL;
    c->act_cap = c->panels_cap = c->pair_out_cap = 0;
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
    float *final_out;    /* pair: [tokens][n_rows], each pair's two rows of out summed */
    int64_t n_tok, n_tb, row_block;  /* n_tok: activation rows (2 a token when paired) */
    int pair;
    size_t xq_bytes;     /* bytes of one quantised activation row */
    size_t px_bytes;     /* panels with pairs: one staged group in c->actx (0: the pair rows as they are) */
    size_t panel_bytes;  /* one panel; each thread has `group` of them in c->panels */
    int group;           /* panels per item */
    size_t thread_panels; /* bytes between threads' panel buffers (the most any weight of the product needs) */
} matmul_job;

static void matmul_quant_rows(void *arg, int64_t b, int64_t e, int thread) {
    (void)thread;
    matmul_job *j = arg;
    uint8_t *act = j->c->act;
    for (int64_t t = b; t < e; t++) {
        const float *x = j->x + t * j->w->n_cols;
        if (j->pair)
            quant_act_quant_row_pair(j->c->isa, j->w->type, x, act + (size_t)(2 * t) * j->xq_bytes,
                                     act + (size_t)(2 * t + 1) * j->xq_bytes, j->w->n_cols);
        else
            quant_act_quant_row(j->c->isa, j->w->type, x, act + (size_t)t * j->xq_bytes, j->w->n_cols);
    }
}

/* Stages tokens [4b, 4e) in groups of QUANT_PANEL_XTOK (quant_panel_x_pack): item i is group i. */
static void matmul_stage_x(void *arg, int64_t b, int64_t e, int thread) {
    (void)thread;
    matmul_job *j = arg;
    int64_t n_in = j->n_tok / 2;
    for (int64_t g = b; g < e; g++) {
        int64_t t = g * QUANT_PANEL_XTOK;
        int nt = n_in - t < QUANT_PANEL_XTOK ? (int)(n_in - t) : QUANT_PANEL_XTOK;
        quant_panel_x_pack(j->w->type, j->w->n_cols, (const uint8_t *)j->c->act + (size_t)(2 * t) * j->xq_bytes,
                           j->xq_bytes, nt, (uint8_t *)j->c->actx + (size_t)g * j->px_bytes);
    }
}

/* pair: the final rows of activation rows [t0, t0 + nt) (whole pairs: t0 and nt are even, every
 * token block being even) and weight rows [r0, r0 + nr), hi + lo, summed by the item that
 * computed them while they are in cache rather than in one serial pass afterwards. */
static void matmul_pair_sum(const matmul_job *j, int64_t t0, int64_t nt, int64_t r0, int64_t nr) {
    if (!j->pair) return;
    size_t R = (size_t)j->w->n_rows;
    for (int64_t t = t0; t < t0 + nt; t += 2) {
        const float *hi = j->out + (size_t)t * R + (size_t)r0, *lo = hi + R;
        float *o = j->final_out + (size_t)(t / 2) * R + (size_t)r0;
        for (int64_t r = 0; r < nr; r++) o[r] = hi[r] + lo[r];
    }
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
        matmul_pair_sum(j, t0, nt, r0, nr);
    }
}

/* Interleaved groups (decode with a repacked weight): as matmul_tiles, row blocks being whole
 * groups of QUANT_ILV_ROWS. */
static void matmul_ilv(void *arg, int64_t b, int64_t e, int thread) {
    (void)thread;
    matmul_job *j = arg;
    const cpu_weight *w = j->w;
    size_t gb = quant_ilv_group_bytes(w->type, w->n_cols);
    for (int64_t i = b; i < e; i++) {
        int64_t rb = i / j->n_tb, tb = i % j->n_tb;
        int64_t r0 = rb * j->row_block, t0 = tb * TOK_BLOCK;
        int64_t nr = w->n_rows - r0 < j->row_block ? w->n_rows - r0 : j->row_block;
        int64_t nt = j->n_tok - t0 < TOK_BLOCK ? j->n_tok - t0 : TOK_BLOCK;
        /* pairs: each token's two rows summed by the kernel into the final output */
        for (int64_t r = r0; r < r0 + nr; r += QUANT_ILV_ROWS) {
            int gr = r0 + nr - r < QUANT_ILV_ROWS ? (int)(r0 + nr - r) : QUANT_ILV_ROWS;
            const uint8_t *g = (const uint8_t *)w->ilv + (size_t)(r / QUANT_ILV_ROWS) * gb;
            const uint8_t *xt = (const uint8_t *)j->c->act + (size_t)t0 * j->xq_bytes;
            if (j->pair)
                quant_ilv_dot_pair(j->c->isa, w->type, w->n_cols, g, gr, xt, j->xq_bytes, nt / 2,
                                   j->final_out + (size_t)(t0 / 2) * (size_t)w->n_rows + (size_t)r, (size_t)w->n_rows);
            else
                quant_ilv_dot(j->c->isa, w->type, w->n_cols, g, gr, xt, j->xq_bytes, nt,
                              j->out + (size_t)t0 * (size_t)w->n_rows + (size_t)r, (size_t)w->n_rows);
        }
    }
}

/* Panels: an item is a group of `group` panels x PANEL_TOK tokens. The group is unpacked once,
 * then tokens go 8 at a time through every panel of it, so each token's outputs are written as
 * whole cache lines (2 panels = 32 rows = 128 bytes): rows of the output lie n_rows * 4 bytes
 * apart, often a multiple of 4 KiB, where smaller pieces would keep evicting each other's
 * half-written lines from the same cache set. */
QUANT_STATIC_ASSERT(2 * QUANT_PANEL_XTOK == 8, "a staged group is one of matmul_panels' 8-row passes");
static void matmul_panels(void *arg, int64_t b, int64_t e, int thread) {
    matmul_job *j = arg;
    const cpu_weight *w = j->w;
    uint8_t *buf = (uint8_t *)j->c->panels + (size_t)thread * j->thread_panels;
    int64_t packed = -1;  /* the group now in the buffer */
    int64_t rows_per = (int64_t)j->group * QUANT_PANEL_ROWS;
    for (int64_t i = b; i < e; i++) {
        int64_t gi = i / j->n_tb, tb = i % j->n_tb;
        int64_t r0 = gi * rows_per, t0 = tb * PANEL_TOK;
        int64_t nt = j->n_tok - t0 < PANEL_TOK ? j->n_tok - t0 : PANEL_TOK;
        int np = 0;
        for (int64_t r = r0; r < w->n_rows && r < r0 + rows_per; r += QUANT_PANEL_ROWS, np++) {
            if (packed == gi) continue;
            int nr = w->n_rows - r < QUANT_PANEL_ROWS ? (int)(w->n_rows - r) : QUANT_PANEL_ROWS;
            if (w->ilv)  /* the repacked group: a split of nibbles */
                quant_panel_pack_ilv(j->c->isa, w->type, w->n_cols,
                                     (const uint8_t *)w->ilv +
                                         (size_t)(r / QUANT_ILV_ROWS) * quant_ilv_group_bytes(w->type, w->n_cols),
                                     buf + (size_t)np * j->panel_bytes);
            else
                quant_panel_pack(w->type, w->n_cols, (const uint8_t *)w->data + (size_t)r * w->row_bytes,
                                 w->row_bytes, nr, buf + (size_t)np * j->panel_bytes);
        }
        packed = gi;
        /* pairs: each token's two rows summed by the kernel into the final output */
        for (int64_t t = t0; t < t0 + nt; t += 8) {
            int64_t n8 = t0 + nt - t < 8 ? t0 + nt - t : 8;
            for (int k = 0; k < np; k++) {
                int64_t r = r0 + (int64_t)k * QUANT_PANEL_ROWS;
                int nr = w->n_rows - r < QUANT_PANEL_ROWS ? (int)(w->n_rows - r) : QUANT_PANEL_ROWS;
                const uint8_t *xt = (const uint8_t *)j->c->act + (size_t)t * j->xq_bytes;
                if (j->px_bytes) /* a pass of 8 rows from a multiple of 8: one staged group */
                    quant_panel_dot_pair_x(j->c->isa, w->type, w->n_cols, buf + (size_t)k * j->panel_bytes, nr,
                                           (const uint8_t *)j->c->actx +
                                               (size_t)(t / (2 * QUANT_PANEL_XTOK)) * j->px_bytes,
                                           (int)(n8 / 2),
                                           j->final_out + (size_t)(t / 2) * (size_t)w->n_rows + (size_t)r,
                                           (size_t)w->n_rows);
                else if (j->pair)
                    quant_panel_dot_pair(j->c->isa, w->type, w->n_cols, buf + (size_t)k * j->panel_bytes, nr, xt,
                                         j->xq_bytes, n8 / 2,
                                         j->final_out + (size_t)(t / 2) * (size_t)w->n_rows + (size_t)r,
                                         (size_t)w->n_rows);
                else
                    quant_panel_dot(j->c->isa, w->type, w->n_cols, buf + (size_t)k * j->panel_bytes, nr, xt,
                                    j->xq_bytes, n8, j->out + (size_t)t * (size_t)w->n_rows + (size_t)r,
                                    (size_t)w->n_rows);
            }
        }
    }
}

size_t cpu_matmul_repack_bytes(const cpu_weight *w, quant_isa isa) {
    if (!quant_ilv_usable(isa, w->type)) return 0;
    size_t gb = quant_ilv_group_bytes(w->type, w->n_cols);
    size_t ng = (size_t)((w->n_rows + QUANT_ILV_ROWS - 1) / QUANT_ILV_ROWS);
    return gb && ng <= SIZE_MAX / gb ? gb * ng : 0;
}

void cpu_matmul_repack(const cpu_weight *w, int64_t g0, int64_t g1, void *dst) {
    size_t gb = quant_ilv_group_bytes(w->type, w->n_cols);
    for (int64_t g = g0; g < g1; g++) {
        int64_t r = g * QUANT_ILV_ROWS;
        int nr = w->n_rows - r < QUANT_ILV_ROWS ? (int)(w->n_rows - r) : QUANT_ILV_ROWS;
        quant_ilv_pack(w->type, w->n_cols, (const uint8_t *)w->data + (size_t)r * w->row_bytes, w->row_bytes, nr,
                       (uint8_t *)dst + (size_t)g * gb);
    }
}

/* Grows *buf to need bytes; 0, or -1 with a message. */
static int matmul_grow(void **buf, size_t *cap, size_t need, const char *what, char *err, size_t err_size) {
    if (need <= *cap) return 0;
    void *p = realloc(*buf, need);
    if (!p) {
        snprintf(err, err_size, "cpu matmul: out of memory for %zu bytes of %s", need, what);
        return -1;
    }
    *buf = p;
    *cap = need;
    return 0;
}

/* One weight's part of a product: its job, kernel and item count, the activations already
 * quantised (same format for every weight of a multi-product). out_tmp: the pair products'
 * scratch of this weight. */
static void matmul_setup(cpu_matmul_ctx *c, const cpu_weight *w, int64_t job_rows, const float *x, int64_t n_tok,
                         int pair, float *out, float *out_tmp, matmul_job *j, threadpool_fn *fn, int64_t *n_items) {
    size_t xq_bytes = quant_act_row_bytes(w->type, w->n_cols);
    int n_threads = c->pool ? threadpool_size(c->pool) : 1;
    int q5 = w->type == QUANT_Q5_0 || w->type == QUANT_Q5_1;
    int use_panels = n_tok >= (q5 ? CPU_MATMUL_PANEL_MIN_TOK_Q5 : CPU_MATMUL_PANEL_MIN_TOK) &&
                     quant_panel_usable(c->isa, w->type);
    size_t panel_bytes = use_panels ? (quant_panel_bytes(w->type, w->n_cols) + 63) & ~(size_t)63 : 0;
    /* 2 panels an item, 1 where that would leave threads without several items */
    int64_t n_panels = (w->n_rows + QUANT_PANEL_ROWS - 1) / QUANT_PANEL_ROWS;
    int group = 2;
    while (group > 1 && n_panels / group < 4 * n_threads) group /= 2;
    /* Decode has one row block per item: shrink blocks until every thread gets several, so one
     * slow core does not hold up the product. Where the tokens take one pass over the rows
     * (n_tok <= QUANT_DOT_TOK: each weight is read once, from memory) blocks start at
     * DECODE_ROW_BLOCK: each item is one contiguous stream the kernels' prefetch and the
     * hardware's run along, where 16-row items (9 KiB of a 1024-wide Q4_K matrix), claimed
     * alternately by the threads, restarted both at every claim. Zen 5, 2 threads, mini q4_k_m
     * tg: ~95-115 -> ~150-190 t/s. The count is of the whole job's rows (job_rows: every weight
     * of a multi-product), so K and V beside Q keep long blocks rather than 8 short ones each. */
    int one_pass = n_tok <= QUANT_DOT_TOK;
    /* Interleaved: every token through each group while it is in cache; row blocks of whole
     * groups. */
    int ilv = !use_panels && w->ilv && quant_ilv_usable(c->isa, w->type);
    int64_t row_block = one_pass || ilv ? DECODE_ROW_BLOCK : ROW_BLOCK;
    int64_t min_block = ilv ? QUANT_ILV_ROWS : 1;
    while (row_block > min_block && n_tok <= TOK_BLOCK &&
           job_rows / row_block < (one_pass || ilv ? 4 : 8) * n_threads)
        row_block /= 2;
    *j = (matmul_job){
        .c = c, .w = w, .x = x, .out = pair ? out_tmp : out, .final_out = out, .n_tok = n_tok,
        .n_tb = (n_tok + TOK_BLOCK - 1) / TOK_BLOCK, .row_block = row_block, .xq_bytes = xq_bytes,
        .panel_bytes = panel_bytes, .group = group, .pair = pair,
    };
    *fn = ilv ? matmul_ilv : matmul_tiles;
    *n_items = (w->n_rows + row_block - 1) / row_block * j->n_tb;
    if (use_panels) {
        *fn = matmul_panels;
        /* staged pairs: a group per 2 * QUANT_PANEL_XTOK activation rows, whole cache lines apart */
        if (pair && quant_panel_x_usable(c->isa, w->type))
            j->px_bytes = (quant_panel_x_bytes(w->type, w->n_cols) + 63) & ~(size_t)63;
        j->n_tb = (n_tok + PANEL_TOK - 1) / PANEL_TOK;
        *n_items = (n_panels + group - 1) / group * j->n_tb;
    }
}

/* The items of several weights' products as one pool job: item i belongs to the first weight
 * k with i < start[k + 1]. */
typedef struct {
    matmul_job job[CPU_MATMUL_MAX_MULTI];
    threadpool_fn fn[CPU_MATMUL_MAX_MULTI];
    int64_t start[CPU_MATMUL_MAX_MULTI + 1];
    int n;
} multi_job;

static void matmul_multi_items(void *arg, int64_t b, int64_t e, int thread) {
    multi_job *m = arg;
    for (int k = 0; k < m->n && b < e; k++) {
        int64_t lo = m->start[k], hi = m->start[k + 1];
        if (b >= hi) continue;
        int64_t ee = e < hi ? e : hi;
        m->fn[k](&m->job[k], b - lo, ee - lo, thread);
        b = ee;
    }
}

int cpu_matmul_multi(cpu_matmul_ctx *c, const cpu_weight *const *w, int n_w, const float *x, int64_t n_tok,
                     float *const *out, char *err, size_t err_size) {
    if (n_w < 1 || n_w > CPU_MATMUL_MAX_MULTI) {
        snprintf(err, err_size, "cpu matmul: %d weights in one product (1..%d)", n_w, CPU_MATMUL_MAX_MULTI);
        return -1;
    }
    uint64_t rows = 0;
    for (int k = 0; k < n_w; k++) {
        if (cpu_matmul_check(w[k], err, err_size)) return -1;
        if (k && (quant_act_of(w[k]->type) != quant_act_of(w[0]->type) || w[k]->n_cols != w[0]->n_cols)) {
            snprintf(err, err_size,
                     "cpu matmul: weights of one product differ in activation format or width (%s x %lld, %s x %lld)",
                     quant_type_name(w[0]->type), (long long)w[0]->n_cols, quant_type_name(w[k]->type),
                     (long long)w[k]->n_cols);
            return -1;
        }
        rows += (uint64_t)w[k]->n_rows;
    }
    if (n_tok <= 0) return 0;
    size_t xq_bytes = quant_act_row_bytes(w[0]->type, w[0]->n_cols);
    int pair = c->act_pair && quant_act_of(w[0]->type) != QUANT_ACT_F32;
    int64_t n_in = n_tok;  /* tokens */
    n_tok *= 1 + pair;     /* activation rows from here on */
    if ((uint64_t)n_tok > SIZE_MAX / xq_bytes / sizeof(float) || (uint64_t)n_tok > SIZE_MAX / rows / sizeof(float)) {
        snprintf(err, err_size, "cpu matmul: %lld tokens of %zu bytes overflow", (long long)n_in, xq_bytes);
        return -1;
    }
    if (matmul_grow(&c->act, &c->act_cap, (size_t)n_tok * xq_bytes, "quantised activations", err, err_size))
        return -1;
    if (pair) {
        void *p = c->pair_out;
        if (matmul_grow(&p, &c->pair_out_cap, (size_t)n_tok * (size_t)rows * sizeof(float), "paired products", err,
                        err_size))
            return -1;
        c->pair_out = p;
    }
    multi_job m;
    m.n = n_w;
    m.start[0] = 0;
    size_t panels_need = 0, tmp_off = 0;
    for (int k = 0; k < n_w; k++) {
        int64_t n_items;
        matmul_setup(c, w[k], (int64_t)rows, x, n_tok, pair, out[k], pair ? c->pair_out + tmp_off : NULL, &m.job[k], &m.fn[k],
                     &n_items);
        tmp_off += (size_t)n_tok * (size_t)w[k]->n_rows;
        m.start[k + 1] = m.start[k] + n_items;
        size_t pn = m.job[k].panel_bytes * (size_t)m.job[k].group;
        if (pn > panels_need) panels_need = pn;
    }
    /* one stride for every weight: threads' buffers must not overlap whichever weights they run */
    for (int k = 0; k < n_w; k++) m.job[k].thread_panels = panels_need;
    int n_threads = c->pool ? threadpool_size(c->pool) : 1;
    if (panels_need && matmul_grow(&c->panels, &c->panels_cap, panels_need * (size_t)n_threads, "panels", err, err_size))
        return -1;
    if (c->pool && n_in >= 2 * n_threads)
        threadpool_run(c->pool, n_in, 1, matmul_quant_rows, &m.job[0]);
    else
        matmul_quant_rows(&m.job[0], 0, n_in, 0);
    /* the staged pairs, once for every weight that reads them (same activation format and
     * width: the same bytes); a weight whose type has no staged kernel reads the rows */
    size_t px = 0;
    int px_job = -1;
    for (int k = 0; k < n_w; k++)
        if (m.job[k].px_bytes) px = m.job[k].px_bytes, px_job = k;
    if (px_job >= 0) {
        int64_t n_groups = (n_in + QUANT_PANEL_XTOK - 1) / QUANT_PANEL_XTOK;
        if (matmul_grow(&c->actx, &c->actx_cap, (size_t)n_groups * px, "staged activations", err, err_size))
            return -1;
        if (c->pool && n_groups >= 2 * n_threads)
            threadpool_run(c->pool, n_groups, 1, matmul_stage_x, &m.job[px_job]);
        else
            matmul_stage_x(&m.job[px_job], 0, n_groups, 0);
    }
    if (c->pool)
        threadpool_run(c->pool, m.start[n_w], 1, matmul_multi_items, &m);
    else
        matmul_multi_items(&m, 0, m.start[n_w], 0);
    return 0;
}

int cpu_matmul(cpu_matmul_ctx *c, const cpu_weight *w, const float *x, int64_t n_tok, float *out, char *err,
               size_t err_size) {
    return cpu_matmul_multi(c, &w, 1, x, n_tok, &out, err, err_size);
}
