/* mgi bench's output: one record per test as llama-bench prints it (markdown table, csv, json,
 * jsonl), with mgi's bandwidth columns. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_internal.h"
#include "cli/cli.h"

const char *const bench_split_names[] = {"none", "layer", "row"};

void bench_test_name(const bench_test *t, char *buf, size_t size) {
    int n;
    if (t->n_prompt && t->n_gen)
        n = snprintf(buf, size, "pp%lld+tg%lld", (long long)t->n_prompt, (long long)t->n_gen);
    else if (t->n_prompt) n = snprintf(buf, size, "pp%lld", (long long)t->n_prompt);
    else n = snprintf(buf, size, "tg%lld", (long long)t->n_gen);
    if (t->depth && n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, " @ d%lld", (long long)t->depth);
}

void bench_format_split(const bench_split *sp, char *buf, size_t size) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < sp->n && o < size; i++) {
        int w = snprintf(buf + o, size - o, "%s%.2f", i ? "/" : "", sp->share[i]);
        if (w < 0) break;
        o += (size_t)w;
    }
}

static void fmt_bytes(char *buf, size_t size, uint64_t b) {
    if (b >= (1ull << 30)) snprintf(buf, size, "%.2f GiB", b / 1073741824.0);
    else snprintf(buf, size, "%.2f MiB", b / 1048576.0);
}

static void fmt_params(char *buf, size_t size, uint64_t n) {
    if (n >= 1000000000ull) snprintf(buf, size, "%.2f B", n / 1e9);
    else snprintf(buf, size, "%.2f M", n / 1e6);
}

/* Markdown columns: llama-bench's, each shown when llama-bench would show it (a swept or
 * non-default value), then ours. Width < 0: left-aligned. */
enum { COL_MODEL, COL_SIZE, COL_PARAMS, COL_BACKEND, COL_NGL, COL_THREADS, COL_BATCH, COL_UBATCH, COL_FA,
       COL_SM, COL_MG, COL_TS, COL_LS, COL_TEST, COL_TPS, COL_MEDIAN, COL_GBPS, COL_ROOF, COL_COUNT };
_Static_assert((int)COL_COUNT == (int)BENCH_MD_COLS, "the header's column count");
static const struct { const char *name; int width; } md_cols[COL_COUNT] = {
    {"model", -30}, {"size", 10}, {"params", 10}, {"backend", -10}, {"ngl", 3}, {"threads", 7},
    {"n_batch", 7}, {"n_ubatch", 8}, {"fa", 2}, {"sm", 5}, {"mg", 2}, {"ts", 12}, {"layer_split", 12}, {"test", 15},
    {"t/s", 20}, {"median t/s", 12}, {"GB/s", 8}, {"% roofline", 10},
};

static bool list_differs(const bench_list *l, int64_t def) {
    return l->n > 1 || (l->n == 1 && l->v[0] != def);
}

void bench_md_columns(const bench_opts *o, const char *backend, bool *show) {
    engine_params ep = engine_default_params();
    for (int c = 0; c < COL_COUNT; c++) show[c] = true;
    show[COL_THREADS] = !strcmp(backend, "CPU") || list_differs(&o->threads, ep.n_threads);
    show[COL_BATCH] = list_differs(&o->batch, 2048);
    show[COL_UBATCH] = list_differs(&o->ubatch, 512);
    show[COL_FA] = list_differs(&o->fa, 0);
    show[COL_SM] = list_differs(&o->split_mode, SM_LAYER);
    show[COL_MG] = list_differs(&o->main_gpu, 0);
    show[COL_TS] = o->ts_given;
    show[COL_LS] = o->ls[0].n_layer_split > 0;
}

static void md_cell(const char *s, int width) {
    printf(" %*s |", width, s);
}

static void md_header(const bool *show) {
    printf("|");
    for (int c = 0; c < COL_COUNT; c++)
        if (show[c]) md_cell(md_cols[c].name, md_cols[c].width);
    printf("\n|");
    for (int c = 0; c < COL_COUNT; c++) {
        if (!show[c]) continue;
        int w = abs(md_cols[c].width);
        putchar(' ');
        for (int i = 0; i < w - (md_cols[c].width > 0); i++) putchar('-');
        if (md_cols[c].width > 0) putchar(':');
        printf(" |");
    }
    putchar('\n');
}

static void md_row(const bench_result *r, const bool *show) {
    const bench_test *t = r->test;
    char cell[COL_COUNT][256];
    snprintf(cell[COL_MODEL], sizeof cell[0], "%s", r->model->type);
    fmt_bytes(cell[COL_SIZE], sizeof cell[0], r->model->size);
    fmt_params(cell[COL_PARAMS], sizeof cell[0], r->model->n_params);
    snprintf(cell[COL_BACKEND], sizeof cell[0], "%s", r->backend);
    snprintf(cell[COL_NGL], sizeof cell[0], "%lld", (long long)t->ngl);
    snprintf(cell[COL_THREADS], sizeof cell[0], "%lld", (long long)t->threads);
    snprintf(cell[COL_BATCH], sizeof cell[0], "%lld", (long long)t->batch);
    snprintf(cell[COL_UBATCH], sizeof cell[0], "%lld", (long long)t->ubatch);
    snprintf(cell[COL_FA], sizeof cell[0], "%lld", (long long)t->fa);
    snprintf(cell[COL_SM], sizeof cell[0], "%s", bench_split_names[t->split_mode]);
    snprintf(cell[COL_MG], sizeof cell[0], "%lld", (long long)t->main_gpu);
    snprintf(cell[COL_TS], sizeof cell[0], "%s", r->ts);
    snprintf(cell[COL_LS], sizeof cell[0], "%s", r->ls);
    bench_test_name(t, cell[COL_TEST], sizeof cell[0]);
    snprintf(cell[COL_TPS], sizeof cell[0], "%.2f ± %.2f", r->avg_ts, r->stddev_ts);
    snprintf(cell[COL_MEDIAN], sizeof cell[0], "%.2f", r->median_ts);
    if (r->gbps >= 0) {
        snprintf(cell[COL_GBPS], sizeof cell[0], "%.2f", r->gbps);
        if (r->roofline_pct >= 0) snprintf(cell[COL_ROOF], sizeof cell[0], "%.1f%%", r->roofline_pct);
        else cell[COL_ROOF][0] = 0;
    } else {
        cell[COL_GBPS][0] = cell[COL_ROOF][0] = 0;
    }
    printf("|");
    for (int c = 0; c < COL_COUNT; c++) {
        if (!show[c]) continue;
        /* "±" is two bytes but one column: widen by one so the table stays aligned. */
        int w = md_cols[c].width + (c == COL_TPS);
        md_cell(cell[c], w);
    }
    putchar('\n');
}

/* One record's fields in order; csv and json share it. kind: 's' string, 'i' integer,
 * 'f' number, 'b' boolean, 'n' integer list, 'g' number list; null marks an absent value. */
typedef struct {
    const char *name;
    char kind;
    bool null;
    const char *s;
    int64_t i;
    double f;
    const double *list;
    int n;
} bench_field;

#define N_FIELDS 29  /* the fields record_fields writes */

static int record_fields(const bench_result *r, const char *commit, bench_field *f) {
    const bench_test *t = r->test;
    int k = 0;
#define S(nm, v) f[k++] = (bench_field){.name = nm, .kind = 's', .s = (v)}
#define I(nm, v) f[k++] = (bench_field){.name = nm, .kind = 'i', .i = (v)}
#define F(nm, v) f[k++] = (bench_field){.name = nm, .kind = 'f', .f = (v)}
    S("build_commit", commit);
    S("model_filename", r->model->path);
    S("model_type", r->model->type);
    I("model_size", (int64_t)r->model->size);
    I("model_n_params", (int64_t)r->model->n_params);
    S("backend", r->backend);
    I("n_batch", t->batch);
    I("n_ubatch", t->ubatch);
    I("n_threads", t->threads);
    I("n_gpu_layers", t->ngl);
    S("split_mode", bench_split_names[t->split_mode]);
    I("main_gpu", t->main_gpu);
    S("tensor_split", r->ts);
    S("layer_split", r->ls);
    f[k++] = (bench_field){.name = "flash_attn", .kind = 'b', .i = t->fa};
    I("n_prompt", t->n_prompt);
    I("n_gen", t->n_gen);
    I("n_depth", t->depth);
    S("test_time", r->test_time);
    I("avg_ns", (int64_t)llround(r->avg_ns));
    I("stddev_ns", (int64_t)llround(r->stddev_ns));
    F("avg_ts", r->avg_ts);
    F("stddev_ts", r->stddev_ts);
    F("median_ts", r->median_ts);
    f[k++] = (bench_field){.name = "samples_ns", .kind = 'n', .list = r->ns, .n = r->reps};
    f[k++] = (bench_field){.name = "samples_ts", .kind = 'g', .list = r->tps, .n = r->reps};
    F("gbps", r->gbps);
    f[k - 1].null = r->gbps < 0;
    F("roofline_pct", r->roofline_pct);
    f[k - 1].null = r->gbps < 0 || r->roofline_pct < 0;
    F("bw_ceiling_gbps", r->bw);
#undef S
#undef I
#undef F
    return k;
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void csv_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
}

static void print_value(const bench_field *f, bool json) {
    if (f->null) { if (json) printf("null"); return; }
    switch (f->kind) {
    case 's': if (json) json_string(f->s); else csv_string(f->s); break;
    case 'i': printf("%lld", (long long)f->i); break;
    case 'f': printf("%.6f", f->f); break;
    case 'b': printf("%s", json ? (f->i ? "true" : "false") : (f->i ? "1" : "0")); break;
    default:
        /* Lists: a json array, or one csv cell of space-separated values. */
        printf(json ? "[" : "\"");
        for (int i = 0; i < f->n; i++) {
            if (i) printf(json ? ", " : " ");
            if (f->kind == 'n') printf("%lld", (long long)llround(f->list[i]));
            else printf("%.6f", f->list[i]);
        }
        printf(json ? "]" : "\"");
    }
}

void bench_print_record(const bench_result *r, const char *commit, int format, bool first, bool *show_md) {
    bench_field f[N_FIELDS];
    int n = record_fields(r, commit, f);
    switch (format) {
    case OUT_MD:
        if (first) md_header(show_md);
        md_row(r, show_md);
        break;
    case OUT_CSV:
        if (first)
            for (int i = 0; i < n; i++) printf("%s%s", f[i].name, i + 1 < n ? "," : "\n");
        for (int i = 0; i < n; i++) {
            print_value(&f[i], false);
            putchar(i + 1 < n ? ',' : '\n');
        }
        break;
    case OUT_JSON:
    case OUT_JSONL: {
        bool pretty = format == OUT_JSON;
        printf(pretty ? (first ? "[\n  {\n" : ",\n  {\n") : "{");
        for (int i = 0; i < n; i++) {
            printf(pretty ? "    \"%s\": " : "\"%s\": ", f[i].name);
            print_value(&f[i], true);
            printf(i + 1 < n ? (pretty ? ",\n" : ", ") : "");
        }
        printf(pretty ? "\n  }" : "}\n");
        break;
    }
    }
    fflush(stdout);
}

