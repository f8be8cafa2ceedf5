/* mgi bench: llama-bench's flags, tests and output (md, csv, json, jsonl) on mgi's engine, plus
 * for each generation test the bandwidth it achieved (bytes read per token / time per token) and
 * that as a percentage of the memory ceiling, measured at start or given with --bw. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_internal.h"
#include "cli/cli.h"
#include "engine/engine.h"
#include "engine/membw.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "quant/quant.h"

static const char bench_usage[] =
    "usage: mgi bench -m MODEL [flags]   (every numeric flag takes a comma list, or repeats, and\n"
    "       the tests run for every combination, as llama-bench does)\n"
    "  -m,   --model PATHS           GGUF models, comma-separated or repeated (required)\n"
    "  -p,   --n-prompt N            prompt tokens of a pp test; 0 = none (default 512)\n"
    "  -n,   --n-gen N               generated tokens of a tg test; 0 = none (default 128)\n"
    "  -pg   PP,TG                   a prompt then a generation, t/s over both (default none)\n"
    "  -d,   --n-depth N             tokens already in the KV cache before each test (default 0)\n"
    "  -b,   --batch-size N          prompt tokens handed to the engine per call (default 2048)\n"
    "  -ub,  --ubatch-size N         tokens per forward batch (default 512)\n"
    "  -ngl, --n-gpu-layers N        layers on the GPUs: 0 = CPU, N < layers = the last N (default 99)\n"
    "  -t,   --threads N             CPU threads (default min(CPUs, 8))\n"
    "  -sm,  --split-mode MODE       none: all on the main GPU; layer: layer ranges per device; row:\n"
    "                                every layer split by KV heads and FFN columns (default layer)\n"
    "  -mg,  --main-gpu N            index into the -dev list of the GPU of -sm none and of the\n"
    "                                output head of -sm row (default 0)\n"
    "  -ts,  --tensor-split A/B/...  device shares, e.g. 3/1; 0 = by free memory (default 0)\n"
    "        --layer-split A/B/...   -sm layer by hand: each device's last layer, e.g. 0/3/7 (the\n"
    "                                model's layer indices; ends at the last layer; overrides -ts)\n"
    "  -dev, --device LIST           CUDA devices for every test: 0/1 or CUDA0/CUDA1; none = the\n"
    "                                CPU (default: every visible device; not swept)\n"
    "  -fa,  --flash-attn 0|1        recorded; mgi's attention is one path (default 0)\n"
    "  -r,   --repetitions N         timed runs of each test (default 5)\n"
    "  -o,   --output FORMAT         md|csv|json|jsonl on stdout (default md)\n"
    "        --bw GBPS               memory ceiling for % roofline; default: measured at start\n"
    "                                (CPU: multi-threaded memcpy, bytes read + written)\n"
    "        --cpu-exact             CPU layers on the exact f32 reference path (default: the fast\n"
    "                                path, paired 8-bit activations)\n"
    "  -nopo, --no-op-offload <0|1>  1: with -ngl partial the CPU's layers compute prompts themselves\n"
    "                                (default 0: their products of 32+ tokens run on the GPU)\n"
    "        --no-warmup             skip the untimed warm-up run of each test\n"
    "        --progress              one line on stderr as each test starts\n"
    "  -v,   --verbose               engine parameters and the ceiling measurement on stderr\n"
    "  -h,   --help                  this text\n";

static int list_push(bench_list *l, int64_t v) {
    int64_t *nv = realloc(l->v, (size_t)(l->n + 1) * sizeof *nv);
    if (!nv) { cli_error("out of memory"); return -1; }
    l->v = nv;
    l->v[l->n++] = v;
    return 0;
}

/* The first appearance of a flag drops the default; later ones append, as in llama-bench. */
static void list_take(bench_list *l) {
    if (!l->given) l->n = 0;
    l->given = true;
}

/* Splits s at commas and calls fn on each item. -1 on an empty item (printed) or when fn fails. */
static int each_item(const char *flag, const char *s, int (*fn)(const char *flag, const char *item, void *u),
                     void *u) {
    for (;;) {
        const char *c = strchr(s, ',');
        size_t len = c ? (size_t)(c - s) : strlen(s);
        if (len == 0) { cli_error("%s: empty item in the list (values separated by commas)", flag); return -1; }
        char *item = strndup(s, len);
        if (!item) { cli_error("out of memory"); return -1; }
        int rc = fn(flag, item, u);
        free(item);
        if (rc) return -1;
        if (!c) return 0;
        s = c + 1;
    }
}

typedef struct {
    bench_list *l;
    int64_t lo, hi;
} int_item_ctx;

static int int_item(const char *flag, const char *item, void *u) {
    int_item_ctx *c = u;
    int64_t v;
    if (cli_parse_i64(flag, item, c->lo, c->hi, &v)) return -1;
    return list_push(c->l, v);
}

static int parse_ints(const char *flag, const char *s, bench_list *l, int64_t lo, int64_t hi) {
    list_take(l);
    int_item_ctx c = {l, lo, hi};
    return each_item(flag, s, int_item, &c);
}

static int enum_item(const char *flag, const char *item, void *u) {
    bench_list *l = u;
    for (int i = 0; i < 3; i++)
        if (!strcmp(item, bench_split_names[i])) return list_push(l, i);
    cli_error("%s: '%s' is not a split mode (none, layer, row)", flag, item);
    return -1;
}

static int model_item(const char *flag, const char *item, void *u) {
    (void)flag;
    bench_opts *o = u;
    char **nm = realloc(o->models, (size_t)(o->n_models + 1) * sizeof *nm);
    char *copy = strdup(item);
    if (!nm || !copy) { free(copy); if (nm) o->models = nm; cli_error("out of memory"); return -1; }
    o->models = nm;
    o->models[o->n_models++] = copy;
    return 0;
}

/* -ts entries: shares per GPU separated by '/', each a finite number >= 0. */
static int split_item(const char *flag, const char *item, void *u) {
    bench_opts *o = u;
    bench_split sp = {.n = 0};
    const char *s = item;
    for (;;) {
        const char *sl = strchr(s, '/');
        size_t len = sl ? (size_t)(sl - s) : strlen(s);
        char num[64];
        if (len == 0 || len >= sizeof num) {
            cli_error("%s: '%s' is not a list of shares like 3/1 (one number per GPU)", flag, item);
            return -1;
        }
        if (sp.n == BENCH_MAX_SPLIT) {
            cli_error("%s: '%s' has more than %d shares", flag, item, BENCH_MAX_SPLIT);
            return -1;
        }
        memcpy(num, s, len);
        num[len] = 0;
        if (cli_parse_f32(flag, num, 0.0f, 1e9f, &sp.share[sp.n])) return -1;
        sp.n++;
        if (!sl) break;
        s = sl + 1;
    }
    bench_split *nt = realloc(o->ts, (size_t)(o->n_ts + 1) * sizeof *nt);
    if (!nt) { cli_error("out of memory"); return -1; }
    o->ts = nt;
    o->ts[o->n_ts++] = sp;
    return 0;
}

/* --layer-split entries: each device's last layer separated by '/', as cli_parse_layer_split. */
static int layer_split_item(const char *flag, const char *item, void *u) {
    bench_opts *o = u;
    engine_split *nl = realloc(o->ls, (size_t)(o->n_ls + 1) * sizeof *nl);
    if (!nl) { cli_error("out of memory"); return -1; }
    o->ls = nl;
    memset(&o->ls[o->n_ls], 0, sizeof o->ls[0]);
    if (cli_parse_layer_split(flag, item, &o->ls[o->n_ls])) return -1;
    o->n_ls++;
    return 0;
}

/* --layer-split against the swept -sm, -ngl and the -dev list, before any model is loaded:
 * every test gets the lists, so each must suit every combination. 0, or -1 (printed). */
static int check_layer_split(const bench_opts *o) {
    for (int l = 0; l < o->n_ls && o->ls[l].n_layer_split; l++) {
        char list[ENGINE_MAX_DEVICES * 12];
        engine_split_layers_text(&o->ls[l], list, sizeof list);
        for (char *c = list; *c; c++)
            if (*c == ',') *c = '/';
        for (int b = 0; b < o->split_mode.n; b++)
            if (o->split_mode.v[b] != SM_LAYER) {
                cli_error("--layer-split %s with -sm %s: --layer-split is for -sm layer only; drop one of the two "
                          "flags", list, bench_split_names[o->split_mode.v[b]]);
                return -1;
            }
        for (int a = 0; a < o->ngl.n; a++)
            if (o->ngl.v[a] == 0 || (o->dev.n_devices == 0 && o->dev.n_gpu_layers == 0)) {
                cli_error("--layer-split %s with %s: no layer is on a device, so there is nothing to split; drop one "
                          "of the two flags", list, o->ngl.v[a] == 0 ? "-ngl 0" : "-dev none");
                return -1;
            }
        if (o->dev.n_devices && o->ls[l].n_layer_split > o->dev.n_devices) {
            cli_error("--layer-split %s with -dev: %d last layers for %d device%s; give one last layer per device",
                      list, o->ls[l].n_layer_split, o->dev.n_devices, o->dev.n_devices == 1 ? "" : "s");
            return -1;
        }
    }
    return 0;
}

/* Parses argv into o; 0, 1 for --help (printed), -1 on a usage error (printed). */
static int parse(int argc, char **argv, bench_opts *o) {
    engine_params ep = engine_default_params();
    o->dev.n_gpu_layers = -1;  /* -dev none sets 0 */
    struct { bench_list *l; int64_t v; } defaults[] = {
        {&o->n_prompt, 512}, {&o->n_gen, 128}, {&o->depth, 0}, {&o->batch, 2048}, {&o->ubatch, 512},
        {&o->ngl, 99}, {&o->threads, ep.n_threads}, {&o->split_mode, SM_LAYER}, {&o->main_gpu, 0}, {&o->fa, 0},
    };
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (list_push(defaults[i].l, defaults[i].v)) return -1;
    o->reps = 5;
    o->output = OUT_MD;
    o->warmup = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
#define VALUE() do { if (!(v = cli_value(argc, argv, &i))) return -1; } while (0)
#define INTS(list, lo, hi) do { VALUE(); if (parse_ints(a, v, list, lo, hi)) return -1; } while (0)
        if (cli_is_flag(a, "-h", "--help")) {
            fputs(bench_usage, stdout);
            return 1;
        } else if (cli_is_flag(a, "-m", "--model")) {
            VALUE();
            if (each_item(a, v, model_item, o)) return -1;
        } else if (cli_is_flag(a, "-p", "--n-prompt")) { INTS(&o->n_prompt, 0, 1 << 24);
        } else if (cli_is_flag(a, "-n", "--n-gen")) { INTS(&o->n_gen, 0, 1 << 24);
        } else if (cli_is_flag(a, "-pg", NULL)) {
            VALUE();
            bench_list pair = {0};
            int_item_ctx c = {&pair, 0, 1 << 24};
            int bad = each_item(a, v, int_item, &c);
            if (!bad && pair.n != 2) {
                cli_error("%s: '%s' is not a pair PROMPT,GEN (e.g. -pg 512,128)", a, v);
                bad = 1;
            }
            if (!bad) {
                list_take(&o->pg);
                bad = list_push(&o->pg, pair.v[0]) || list_push(&o->pg, pair.v[1]);
            }
            free(pair.v);
            if (bad) return -1;
        } else if (cli_is_flag(a, "-d", "--n-depth")) { INTS(&o->depth, 0, 1 << 24);
        } else if (cli_is_flag(a, "-b", "--batch-size")) { INTS(&o->batch, 1, 1 << 24);
        } else if (cli_is_flag(a, "-ub", "--ubatch-size")) { INTS(&o->ubatch, 1, 1 << 24);
        } else if (cli_is_flag(a, "-ngl", "--n-gpu-layers")) { INTS(&o->ngl, 0, 1 << 20);
        } else if (cli_is_flag(a, "-t", "--threads")) { INTS(&o->threads, 0, 256);
        } else if (cli_is_flag(a, "-mg", "--main-gpu")) { INTS(&o->main_gpu, 0, ENGINE_MAX_DEVICES - 1);
        } else if (cli_is_flag(a, "-dev", "--device")) {
            /* One device list for every test, as llama-bench's 0/1 or CUDA0/CUDA1 (or 0,1). */
            VALUE();
            char list[512];
            snprintf(list, sizeof list, "%s", v);
            for (char *c = list; *c; c++)
                if (*c == '/') *c = ',';
            if (cli_parse_devices(a, list, &o->dev)) return -1;
        } else if (cli_is_flag(a, "-fa", "--flash-attn")) { INTS(&o->fa, 0, 1);
        } else if (cli_is_flag(a, "-sm", "--split-mode")) {
            VALUE();
            list_take(&o->split_mode);
            if (each_item(a, v, enum_item, &o->split_mode)) return -1;
        } else if (cli_is_flag(a, "-ts", "--tensor-split")) {
            VALUE();
            o->ts_given = true;
            if (each_item(a, v, split_item, o)) return -1;
        } else if (cli_is_flag(a, "--layer-split", NULL)) {
            VALUE();
            if (each_item(a, v, layer_split_item, o)) return -1;
        } else if (cli_is_flag(a, "-r", "--repetitions")) {
            VALUE();
            if (cli_parse_int(a, v, 1, 1 << 20, &o->reps)) return -1;
        } else if (cli_is_flag(a, "-o", "--output")) {
            VALUE();
            static const char *const fmts[] = {"md", "csv", "json", "jsonl"};
            o->output = -1;
            for (int f = 0; f < 4; f++)
                if (!strcmp(v, fmts[f])) o->output = f;
            if (o->output < 0) { cli_error("%s: '%s' is not an output format (md, csv, json, jsonl)", a, v); return -1; }
        } else if (cli_is_flag(a, "--bw", NULL)) {
            VALUE();
            float bw;
            if (cli_parse_f32(a, v, 1e-6f, 1e9f, &bw)) return -1;
            o->bw = bw;
        } else if (cli_is_flag(a, "--no-warmup", NULL)) { o->warmup = false;
        } else if (cli_is_flag(a, "--progress", NULL)) { o->progress = true;
        } else if (cli_is_flag(a, "--cpu-exact", NULL)) { o->cpu_exact = true;
        } else if (cli_is_flag(a, "-nopo", "--no-op-offload")) {
            VALUE();
            if (cli_parse_int(a, v, 0, 1, &o->no_op_offload)) return -1;
        } else if (cli_is_flag(a, "-v", "--verbose")) { o->verbose = true;
        } else {
            cli_error("unknown flag '%s' (see mgi bench --help)", a);
            return -1;
        }
#undef INTS
#undef VALUE
    }
    if (!o->n_models) { cli_error("-m/--model is required (see mgi bench --help)"); return -1; }
    if (!o->ts_given) {
        o->ts = calloc(1, sizeof *o->ts);
        if (!o->ts) { cli_error("out of memory"); return -1; }
        o->ts[0].n = 1;  /* "0": no split given */
        o->n_ts = 1;
    }
    if (!o->n_ls) {
        if (!(o->ls = calloc(1, sizeof *o->ls))) { cli_error("out of memory"); return -1; }
        o->n_ls = 1;  /* one entry without a list: the -ts cut */
    }
    return check_layer_split(o);
}

/* llama.cpp's names for general.file_type (llama_ftype), as its model descriptions print them. */
static const char *ftype_name(uint32_t ft) {
    static const struct { uint32_t ft; const char *name; } names[] = {
        {0, "all F32"}, {1, "F16"}, {2, "Q4_0"}, {3, "Q4_1"}, {7, "Q8_0"}, {8, "Q5_0"}, {9, "Q5_1"},
        {10, "Q2_K - Medium"}, {11, "Q3_K - Small"}, {12, "Q3_K - Medium"}, {13, "Q3_K - Large"},
        {14, "Q4_K - Small"}, {15, "Q4_K - Medium"}, {16, "Q5_K - Small"}, {17, "Q5_K - Medium"},
        {18, "Q6_K"}, {21, "Q2_K - Small"}, {32, "BF16"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].ft == ft) return names[i].name;
    return NULL;
}

/* Reads what the tables need from the file header (cheap: the data stays mapped, unread).
 * 0, or EXIT_BADINPUT after a message. */
static int model_info(bench_model *m, const char *path) {
    char err[512];
    m->path = path;
    gguf_ctx *g = gguf_open(path, 1, err, sizeof err);
    if (!g) { cli_error("%s", err); return EXIT_BADINPUT; }
    if (llama_hparams_load(&m->hp, g, err, sizeof err)) {
        cli_error("%s", err);
        gguf_close(g);
        return EXIT_BADINPUT;
    }
    uint64_t embd_bytes = 0, embd_row = 0, type_count[64] = {0};
    bool tied = gguf_find_tensor(g, "output.weight") < 0;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        m->size += t->size;
        m->n_params += (uint64_t)t->n_elems;
        if (t->n_dims >= 2 && t->type < 64) type_count[t->type] += (uint64_t)t->n_elems;
        if (!strcmp(t->name, "token_embd.weight") && t->ne[1] > 0) {
            embd_bytes = t->size;
            embd_row = t->size / (uint64_t)t->ne[1];
        }
    }
    /* A tied output head reads the whole embedding table as its matrix every token. */
    m->weight_bytes = tied ? m->size : m->size - embd_bytes + embd_row;

    const char *arch = "?";
    gguf_get_str(g, "general.architecture", &arch);
    char size_label[32];
    double np = (double)m->n_params;
    if (np >= 1e9) snprintf(size_label, sizeof size_label, "%.0fB", np / 1e9);
    else if (np >= 1e6) snprintf(size_label, sizeof size_label, "%.0fM", np / 1e6);
    else snprintf(size_label, sizeof size_label, "%.0fK", np / 1e3);
    uint32_t ft;
    const char *ftn = gguf_get_u32(g, "general.file_type", &ft) == GGUF_OK ? ftype_name(ft) : NULL;
    char guessed[48];
    if (!ftn) {
        /* No (or an unknown) file type: name the type holding the most matrix weights. */
        int best = 0;
        for (int t = 1; t < 64; t++)
            if (type_count[t] > type_count[best]) best = t;
        snprintf(guessed, sizeof guessed, "%s%s (guessed)", best == 0 ? "all " : "", quant_type_name((uint32_t)best));
        ftn = guessed;
    }
    snprintf(m->type, sizeof m->type, "%s %s %s", arch, size_label, ftn);
    gguf_close(g);
    return 0;
}

/* KV cache bytes one position holds over all layers, keys and values, at the backend's element
 * size (f32 on the CPU, f16 on CUDA). */
static uint64_t kv_bytes_per_pos(const llama_hparams *hp, int elem_bytes) {
    return (uint64_t)hp->n_layer * 2u * (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim * (uint64_t)elem_bytes;
}

/* Every combination in llama-bench's order: model, ngl, sm, mg, ts, b, ub, fa, t, depth, then
 * the pp tests, the tg tests and the pg tests. */
static bench_test *make_tests(const bench_opts *o, int *n_out) {
    int cap = 64, n = 0;
    bench_test *ts = malloc((size_t)cap * sizeof *ts);
    if (!ts) return NULL;
    for (int m = 0; m < o->n_models; m++)
    for (int a = 0; a < o->ngl.n; a++)
    for (int b = 0; b < o->split_mode.n; b++)
    for (int c = 0; c < o->main_gpu.n; c++)
    for (int s = 0; s < o->n_ts; s++)
    for (int l = 0; l < o->n_ls; l++)
    for (int d = 0; d < o->batch.n; d++)
    for (int e = 0; e < o->ubatch.n; e++)
    for (int f = 0; f < o->fa.n; f++)
    for (int g = 0; g < o->threads.n; g++)
    for (int h = 0; h < o->depth.n; h++) {
        bench_test base = {m, o->ngl.v[a], o->split_mode.v[b], o->main_gpu.v[c], o->batch.v[d], o->ubatch.v[e],
                           o->fa.v[f], o->threads.v[g], o->depth.v[h], s, l, 0, 0};
        int n_kinds = o->n_prompt.n + o->n_gen.n + o->pg.n / 2;
        for (int k = 0; k < n_kinds; k++) {
            bench_test t = base;
            if (k < o->n_prompt.n) t.n_prompt = o->n_prompt.v[k];
            else if (k < o->n_prompt.n + o->n_gen.n) t.n_gen = o->n_gen.v[k - o->n_prompt.n];
            else {
                int p = k - o->n_prompt.n - o->n_gen.n;
                t.n_prompt = o->pg.v[2 * p];
                t.n_gen = o->pg.v[2 * p + 1];
            }
            if (!t.n_prompt && !t.n_gen) continue;
            if (n == cap) {
                if (cap > (1 << 24)) { free(ts); return NULL; }
                bench_test *nt = realloc(ts, (size_t)(cap *= 2) * sizeof *nt);
                if (!nt) { free(ts); return NULL; }
                ts = nt;
            }
            ts[n++] = t;
        }
    }
    *n_out = n;
    return ts;
}

/* Two tests share an engine when every parameter the engine (or, later, its placement) uses
 * is the same. */
static bool same_engine(const bench_test *a, const bench_test *b) {
    return a->model == b->model && a->ngl == b->ngl && a->split_mode == b->split_mode &&
           a->main_gpu == b->main_gpu && a->ts == b->ts && a->ls == b->ls && a->ubatch == b->ubatch && a->fa == b->fa &&
           a->threads == b->threads;
}

/* --- statistics, as llama-bench computes them ------------------------------------------------ */

static double mean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return n ? s / n : 0;
}

static double stdev(const double *v, int n) {
    if (n < 2) return 0;
    double m = mean(v, n), s = 0;
    for (int i = 0; i < n; i++) s += (v[i] - m) * (v[i] - m);
    return sqrt(s / (n - 1));
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n, double *scratch) {
    memcpy(scratch, v, (size_t)n * sizeof *v);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    return n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
}

/* --- running --------------------------------------------------------------------------------- */

typedef struct {
    engine *e;
    int32_t n_vocab;
    int32_t valid;    /* positions 0..valid-1 hold evaluated tokens */
    uint64_t rng;
    float *logits;    /* ours */
    float *out;       /* where evaluations leave their row of logits: the engine's buffer (no copy
                       * out of it, as llama-bench reads llama.cpp's) or logits */
    int32_t *tokens;  /* scratch of n_ctx random tokens */
} bench_run;

static int32_t random_token(bench_run *br) {
    br->rng ^= br->rng << 13;
    br->rng ^= br->rng >> 7;
    br->rng ^= br->rng << 17;
    return (int32_t)(br->rng % (uint64_t)br->n_vocab);
}

/* Evaluates n random tokens from pos in calls of up to batch tokens. */
static int eval_prompt(bench_run *br, int32_t pos, int64_t n, int64_t batch, char *err, size_t err_size) {
    for (int64_t i = 0; i < n; i++) br->tokens[i] = random_token(br);
    for (int64_t done = 0; done < n;) {
        int32_t b = (int32_t)(n - done < batch ? n - done : batch);
        if (engine_eval(br->e, br->tokens + done, b, pos + (int32_t)done, br->out, 0, err, err_size)) return -1;
        done += b;
    }
    br->valid = pos + (int32_t)n;  /* an evaluation replaces the cache from pos on */
    return 0;
}

/* Generates n tokens one call each from pos, feeding random tokens: the cost of a decode step
 * without a sampler. */
static int eval_gen(bench_run *br, int32_t pos, int64_t n, char *err, size_t err_size) {
    for (int64_t i = 0; i < n; i++) {
        int32_t tok = random_token(br);
        /* each step launches the next (engine_decode_ahead), up to the last, which launches none */
        engine_decode_ahead(br->e, i + 1 < n);
        if (engine_eval(br->e, &tok, 1, pos + (int32_t)i, br->out, 0, err, err_size)) {
            engine_decode_ahead(br->e, 0);
            return -1;
        }
    }
    br->valid = pos + (int32_t)n;  /* an evaluation replaces the cache from pos on */
    return 0;
}

/* One timed (or warm-up) run of a test: depth filled first, untimed; returns ns or -1. */
static double run_once(bench_run *br, const bench_test *t, bool warmup, char *err, size_t err_size) {
    int32_t d = (int32_t)t->depth;
    /* Only the positions before d must have been evaluated; whatever a previous run left
     * there is as good as a fresh fill. */
    if (br->valid < d && eval_prompt(br, br->valid, d - br->valid, t->batch, err, err_size)) return -1;
    if (warmup) {
        /* llama-bench's warm-up: one batch of the prompt, one generated token. */
        if (t->n_prompt && eval_prompt(br, d, t->n_prompt < t->batch ? t->n_prompt : t->batch, t->batch, err, err_size))
            return -1;
        if (t->n_gen && eval_gen(br, d, 1, err, err_size)) return -1;
        return 0;
    }
    double t0 = (cli_now_ms() * 1e6);
    if (t->n_prompt && eval_prompt(br, d, t->n_prompt, t->batch, err, err_size)) return -1;
    if (t->n_gen && eval_gen(br, d + (int32_t)t->n_prompt, t->n_gen, err, err_size)) return -1;
    return (cli_now_ms() * 1e6) - t0;
}

/* Memory ceilings, one per backend and device met (a sweep over -ngl can run on the CPU and on
 * a GPU, one over -mg on several GPUs). */
#define BENCH_MAX_BACKENDS 8
typedef struct {
    struct { char name[32]; int device; double gbps; } b[BENCH_MAX_BACKENDS];
    int n;
} bench_ceilings;

/* The memory ceiling of a backend: --bw, or a copy measured on it. 0 or EXIT_RUNTIME. */
static int measure_ceiling(const bench_opts *o, const char *backend, int device, double *bw) {
    if (o->bw > 0) {
        *bw = o->bw;
        return 0;
    }
    if (!strcmp(backend, "CUDA")) {
        membw_result r;
        char err[256];
        /* 2 GiB per buffer (less where the loaded model leaves less free): far beyond the L2
         * (50-60 MB on an H100/H200), as the 4 GiB copy of docs/PERF.md */
        if (membw_cuda_copy(device, (size_t)2 << 30, 9, &r, err, sizeof err)) {
            cli_error("%s (or give the ceiling with --bw GBPS)", err);
            return EXIT_RUNTIME;
        }
        fprintf(stderr, "bandwidth ceiling = %.2f GB/s (device %d copy of %zu MiB, read + written; median of %d, "
                "range %.2f-%.2f)\n", r.gbps, device, r.bytes >> 20, r.reps, r.gbps_min, r.gbps_max);
        *bw = r.gbps;
        return 0;
    }
    if (strchr(backend, '+')) {  /* partial offload: no single memory to measure; no roofline */
        *bw = 0;
        return 0;
    }
    if (strcmp(backend, "CPU")) {
        cli_error("no bandwidth measurement for backend %s: give the ceiling with --bw GBPS", backend);
        return EXIT_RUNTIME;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    membw_result r;
    char err[256];
    /* a read, not a copy: decode only reads its weights, and a copy's reads and writes together
     * ran 1.3-1.45x above what reads alone reach (2 cores of a Zen 4 host) */
    if (membw_cpu_read((size_t)512 << 20, n < 1 ? 1 : n > 1024 ? 1024 : (int)n, 7, &r, err, sizeof err)) {
        cli_error("%s (or give the ceiling with --bw GBPS)", err);
        return EXIT_RUNTIME;
    }
    fprintf(stderr, "bandwidth ceiling = %.2f GB/s (CPU read of %zu MiB on %d threads; median of %d, range "
            "%.2f-%.2f)\n", r.gbps, r.bytes >> 20, r.n_threads, r.reps, r.gbps_min, r.gbps_max);
    *bw = r.gbps;
    return 0;
}

/* The ceiling of a backend (on a device), measured the first time it is met. */
static int ceiling_for(const bench_opts *o, bench_ceilings *c, const char *backend, int device, double *bw) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->b[i].name, backend) && c->b[i].device == device) {
            *bw = c->b[i].gbps;
            return 0;
        }
    int rc = measure_ceiling(o, backend, device, bw);
    if (rc == 0 && c->n < BENCH_MAX_BACKENDS) {
        snprintf(c->b[c->n].name, sizeof c->b[c->n].name, "%s", backend);
        c->b[c->n].device = device;
        c->b[c->n++].gbps = *bw;
    }
    return rc;
}

/* Loads the engine for tests[i] with a context that fits every test sharing it. */
static int load_engine(const bench_opts *o, const bench_model *models, const bench_test *tests, int n_tests,
                       int i, bench_run *br) {
    const bench_test *t = &tests[i];
    int64_t need = 1;
    for (int j = i; j < n_tests && same_engine(&tests[j], t); j++) {
        int64_t nj = tests[j].depth + tests[j].n_prompt + tests[j].n_gen;
        if (nj > need) need = nj;
    }
    engine_params ep = engine_default_params();
    ep.n_ctx = (int32_t)need;
    ep.n_batch = (int32_t)t->ubatch;
    ep.n_threads = cli_threads_check("-t", (int)t->threads);
    ep.cpu_exact = o->cpu_exact;
    ep.no_op_offload = o->no_op_offload;
    ep.split.n_gpu_layers = (int32_t)t->ngl;
    ep.split.main_gpu = (int32_t)t->main_gpu;
    ep.split.split_mode = (int)t->split_mode;  /* SM_* are ENGINE_SPLIT_* */
    ep.split.n_devices = o->dev.n_devices;
    memcpy(ep.split.devices, o->dev.devices, sizeof ep.split.devices);
    if (o->dev.n_devices == 0 && o->dev.n_gpu_layers == 0) ep.split.n_gpu_layers = 0;  /* -dev none */
    /* llama-bench's -ts 0 (the default) means no split given: shares by free memory. */
    const bench_split *ts = &o->ts[t->ts];
    ep.split.n_tensor_split = 0;
    for (int k = 0; k < ts->n; k++)
        if (ts->share[k] > 0) ep.split.n_tensor_split = ts->n;
    for (int k = 0; k < ts->n && k < ENGINE_MAX_DEVICES; k++) ep.split.tensor_split[k] = ts->share[k];
    ep.split.n_layer_split = o->ls[t->ls].n_layer_split;
    memcpy(ep.split.layer_split, o->ls[t->ls].layer_split, sizeof ep.split.layer_split);
    cli_gpu_setup(&ep, 0);
    if (o->verbose)
        fprintf(stderr, "loading %s: context %d, batch %d, threads %d, ngl %d\n", models[t->model].path,
                ep.n_ctx, ep.n_batch, ep.n_threads, ep.split.n_gpu_layers);
    char err[512];
    double t0 = (cli_now_ms() * 1e6);
    int rc = engine_load(&br->e, models[t->model].path, &ep, err, sizeof err);
    if (rc) {
        cli_error("%s", err);
        return rc == ENGINE_EPARAM ? EXIT_USAGE : rc == ENGINE_EBADINPUT ? EXIT_BADINPUT : EXIT_RUNTIME;
    }
    fprintf(stderr, "load time = %10.2f ms (%s, backend %s)\n", ((cli_now_ms() * 1e6) - t0) / 1e6, models[t->model].path,
            engine_backend(br->e));
    br->n_vocab = engine_n_vocab(br->e);
    br->valid = 0;
    free(br->logits);
    free(br->tokens);
    br->logits = malloc((size_t)br->n_vocab * sizeof *br->logits);
    br->tokens = malloc((size_t)need * sizeof *br->tokens);
    if (!br->logits || !br->tokens) { cli_error("out of memory"); return EXIT_RUNTIME; }
    br->out = engine_logits_buffer(br->e, 1);
    if (!br->out) br->out = br->logits;
    return 0;
}

int cli_bench(int argc, char **argv) {
    bench_opts o = {0};
    bench_model *models = NULL;
    bench_test *tests = NULL;
    bench_run br = {.rng = 0x9e3779b97f4a7c15ull};
    double *samples = NULL;
    int n_tests = 0, rc = parse(argc, argv, &o);
    if (rc) { rc = rc > 0 ? 0 : EXIT_USAGE; goto out; }

    rc = EXIT_RUNTIME;
    if (!(models = calloc((size_t)o.n_models, sizeof *models)) || !(tests = make_tests(&o, &n_tests)) ||
        !(samples = malloc((size_t)o.reps * 3 * sizeof *samples))) {
        cli_error("out of memory");
        goto out;
    }
    rc = EXIT_USAGE;
    if (n_tests == 0) { cli_error("no tests: -p, -n and -pg are all 0"); goto out; }
    /* Every file is checked, and every test's context fits its model, before anything runs. */
    for (int m = 0; m < o.n_models; m++)
        if ((rc = model_info(&models[m], o.models[m]))) goto out;
    rc = EXIT_USAGE;
    for (int i = 0; i < n_tests; i++) {
        const bench_test *t = &tests[i];
        const bench_model *m = &models[t->model];
        if (t->depth + t->n_prompt + t->n_gen > m->hp.n_ctx_train) {
            char name[64];
            bench_test_name(t, name, sizeof name);
            cli_error("test %s needs %lld positions but %s holds %d (llama.context_length): lower -p/-n/-pg/-d",
                      name, (long long)(t->depth + t->n_prompt + t->n_gen), m->path, m->hp.n_ctx_train);
            goto out;
        }
    }

    bool show_md[BENCH_MD_COLS];
    bench_ceilings ceilings = {.n = 0};
    double bw = 0;
    const char *commit = cli_version();
    for (int i = 0; i < n_tests; i++) {
        const bench_test *t = &tests[i];
        if (i == 0 || !same_engine(t, &tests[i - 1])) {
            engine_free(br.e);
            br.e = NULL;
            if ((rc = load_engine(&o, models, tests, n_tests, i, &br))) goto out;
            if ((rc = ceiling_for(&o, &ceilings, engine_backend(br.e), (int)t->main_gpu, &bw))) goto out;
            if (i == 0) bench_md_columns(&o, engine_backend(br.e), show_md);
        }
        char name[64], err[512];
        bench_test_name(t, name, sizeof name);
        if (o.progress) fprintf(stderr, "bench %d/%d: %s %s\n", i + 1, n_tests, models[t->model].type, name);
        rc = EXIT_RUNTIME;
        if (o.warmup && run_once(&br, t, true, err, sizeof err) < 0) { cli_error("%s", err); goto out; }
        bench_result r = {.model = &models[t->model], .test = t, .backend = engine_backend(br.e),
                          .ns = samples, .tps = samples + o.reps, .reps = o.reps, .bw = bw};
        time_t now = time(NULL);
        strftime(r.test_time, sizeof r.test_time, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        bench_format_split(&o.ts[t->ts], r.ts, sizeof r.ts);
        engine_split_layers_text(&o.ls[t->ls], r.ls, sizeof r.ls);
        for (char *c = r.ls; *c; c++)
            if (*c == ',') *c = '/';  /* as the flag is written in bench, where commas sweep */
        /* A split run reports each device's share of the time computing and in NCCL. */
        int n_dev = engine_split_stats(br.e, 1, NULL, 0);
        /* A row split reads every device's share of the weights at once: its roofline is the
         * sum of the devices' bandwidths (a layer split reads them one device after another). */
        if (n_dev > 1 && t->split_mode == SM_ROW) r.bw = bw * n_dev;
        for (int k = 0; k < o.reps; k++) {
            double ns = run_once(&br, t, false, err, sizeof err);
            if (ns < 0) { cli_error("%s", err); goto out; }
            r.ns[k] = ns > 1 ? ns : 1;
            r.tps[k] = 1e9 * (double)(t->n_prompt + t->n_gen) / r.ns[k];
        }
        if (n_dev > 1) {
            engine_dev_share sh[ENGINE_MAX_DEVICES];
            int n = engine_split_stats(br.e, 0, sh, ENGINE_MAX_DEVICES);
            fprintf(stderr, "time share %s %s:", models[t->model].type, name);
            for (int d = 0; d < n && d < ENGINE_MAX_DEVICES; d++)
                fprintf(stderr, " CUDA%d busy %.1f%% NCCL %.1f%%;", sh[d].device, 100 * sh[d].busy, 100 * sh[d].nccl);
            fprintf(stderr, "\n");
        }
        r.avg_ns = mean(r.ns, o.reps);
        r.stddev_ns = stdev(r.ns, o.reps);
        r.avg_ts = mean(r.tps, o.reps);
        r.stddev_ts = stdev(r.tps, o.reps);
        r.median_ts = median(r.tps, o.reps, samples + 2 * o.reps);
        r.gbps = -1;
        if (t->n_gen && !t->n_prompt) {
            /* Each step reads the weights once and the cache up to its own position: on average
             * depth + (n_gen + 1) / 2 positions over the run. */
            const bench_model *m = r.model;
            double bytes = (double)m->weight_bytes +
                           (double)kv_bytes_per_pos(&m->hp, engine_kv_elem_bytes(br.e)) * ((double)t->depth + (double)(t->n_gen + 1) / 2);
            r.gbps = bytes * r.avg_ts / 1e9;
            r.roofline_pct = r.bw > 0 ? 100.0 * r.gbps / r.bw : -1;
        }
        bench_print_record(&r, commit, o.output, i == 0, show_md);
    }
    if (o.output == OUT_JSON) printf("\n]\n");
    if (o.output == OUT_MD) {
        printf("\nbuild: %s; bandwidth ceiling", commit);
        for (int b = 0; b < ceilings.n; b++)
            printf("%s %s %.2f GB/s", b ? "," : "", ceilings.b[b].name, ceilings.b[b].gbps);
        printf(" (%s)\n", o.bw > 0 ? "--bw" : "measured");
    }
    rc = 0;
out:
    engine_free(br.e);
    free(br.logits);
    free(br.tokens);
    free(samples);
    free(tests);
    free(models);
    for (int m = 0; m < o.n_models; m++) free(o.models[m]);
    free(o.models);
    bench_list *lists[] = {&o.n_prompt, &o.n_gen, &o.pg, &o.depth, &o.batch, &o.ubatch,
                           &o.ngl, &o.threads, &o.split_mode, &o.main_gpu, &o.fa};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) free(lists[i]->v);
    free(o.ts);
    free(o.ls);
    return rc;
}
