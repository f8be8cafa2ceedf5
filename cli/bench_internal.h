/* mgi bench's parts (cli/bench.c sweeps and runs the tests, cli/bench_out.c prints their
 * records): the sweep's options, the models and tests, and one result. Private to those two. */
#ifndef MGI_CLI_BENCH_INTERNAL_H
#define MGI_CLI_BENCH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "models/model.h"

/* One sweepable list of flag values: the default until the flag first appears, then every
 * value given, in order. */
typedef struct {
    int64_t *v;
    int n;
    bool given;
} bench_list;

#define BENCH_MAX_SPLIT ENGINE_MAX_DEVICES

typedef struct {
    float share[BENCH_MAX_SPLIT];
    int n;
} bench_split;

enum { SM_NONE, SM_LAYER, SM_ROW };
extern const char *const bench_split_names[];  /* by SM_*: "none", "layer", "row" */
enum { OUT_MD, OUT_CSV, OUT_JSON, OUT_JSONL };

typedef struct {
    char **models;
    int n_models;
    bench_list n_prompt, n_gen, pg, depth, batch, ubatch, ngl, threads, split_mode, main_gpu, fa;
    bench_split *ts;
    int n_ts;
    bool ts_given;
    engine_split *ls;  /* --layer-split values (n_layer_split 0: none given) */
    int n_ls;
    engine_split dev;  /* -dev: the devices (n_devices 0: all visible; n_gpu_layers 0: -dev none) */
    int reps, output;
    double bw;  /* 0: measure */
    bool warmup, progress, verbose, cpu_exact;
    int no_op_offload;  /* -nopo: engine_params.no_op_offload */
} bench_opts;

/* What the file says about a model: the output columns and the bytes a decode step reads. */
typedef struct {
    const char *path;
    char type[96];            /* "llama 7B Q4_0", as llama-bench's model_type */
    uint64_t size;            /* bytes of all tensors */
    uint64_t n_params;
    uint64_t weight_bytes;    /* read per generated token: all but the embedding table, one row of it */
    llama_hparams hp;
} bench_model;

/* One line of output: a test under one combination of parameters. */
typedef struct {
    int model;
    int64_t ngl, split_mode, main_gpu, batch, ubatch, fa, threads, depth;
    int ts, ls;
    int64_t n_prompt, n_gen;
} bench_test;

/* One record: a test's measurements under its parameters. */
typedef struct {
    const bench_model *model;
    const bench_test *test;
    const char *backend;
    char ts[256];               /* -ts as "3.00/1.00" */
    char ls[256];               /* --layer-split as "0/3/7"; empty when not given */
    char test_time[32];
    double *ns, *tps;  /* per repetition */
    int reps;
    double avg_ns, stddev_ns, avg_ts, stddev_ts, median_ts;
    double gbps, roofline_pct, bw;  /* gbps < 0: not a generation test */
} bench_result;

/* A test's name as llama-bench's "test" column: pp512, tg128, pp512+tg128, ... @ d4096. */
void bench_test_name(const bench_test *t, char *buf, size_t size);
/* -ts shares as "3.00/1.00". */
void bench_format_split(const bench_split *sp, char *buf, size_t size);
/* Which markdown columns to show (show[COL_COUNT] of bench_out.c): llama-bench's rule, a column
 * for each swept or non-default value. */
enum { BENCH_MD_COLS = 18 };
void bench_md_columns(const bench_opts *o, const char *backend, bool *show);
/* Prints one record in format OUT_* (first: the header or the opening bracket too). */
void bench_print_record(const bench_result *r, const char *commit, int format, bool first, bool *show_md);

#endif
