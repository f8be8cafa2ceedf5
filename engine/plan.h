/* Where each part of a model lives before anything is loaded: which layers run on the CPU, which
 * CUDA devices hold which layers (--split-mode layer) or which heads and FFN columns of every
 * layer (--split-mode row), and the bytes each device needs against what it has free. Plain C
 * (no CUDA): the devices come in as engine_device_info, so the planner is tested without a GPU
 * and `mgi info` prints the plan without loading. */
#ifndef MGI_ENGINE_PLAN_H
#define MGI_ENGINE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/devices.h"
#include "models/model.h"

#define ENGINE_MAX_DEVICES 16

enum {
    ENGINE_SPLIT_NONE = 0,   /* everything on the main GPU */
    ENGINE_SPLIT_LAYER = 1,  /* contiguous layer ranges per device, hidden state passed along (default) */
    ENGINE_SPLIT_ROW = 2,    /* every layer split by KV heads and FFN columns, all-reduce twice a layer */
};

/* What the user asked for (the flags), as engine_params carries it. */
typedef struct {
    int split_mode;                           /* ENGINE_SPLIT_* (-sm) */
    int n_devices;                            /* -dev list length; 0: every visible device */
    int devices[ENGINE_MAX_DEVICES];          /* CUDA ordinals (-dev 0,1) */
    int n_tensor_split;                       /* -ts length; 0: proportional to free memory */
    float tensor_split[ENGINE_MAX_DEVICES];   /* -ts ratios, one per used device */
    int main_gpu;                             /* -mg: index into the used devices */
    int32_t n_gpu_layers;                     /* -ngl: -1 all; 0 the CPU; else the last N layers */
    int n_layer_split;                        /* --layer-split length; 0: layers cut by the -ts shares */
    int32_t layer_split[ENGINE_MAX_DEVICES];  /* --layer-split: the model's index of the last layer of
                                               * used device i, inclusive, increasing (layer mode) */
    int cpu_fast;                             /* the CPU's layers take the fast path (not --cpu-exact):
                                               * the plan counts its repacked copy of their matrices */
} engine_split;

/* A plan. Device i (0 <= i < n_dev) is CUDA ordinal dev[i].
 * layer mode: device i holds layers [layer0[i], layer1[i]), consecutive devices consecutive
 *   ranges covering [cpu_layers, n_layer), each non-empty; the output head on the last device.
 * row mode: every device holds layers [cpu_layers, n_layer), restricted to KV heads
 *   [kvh0[i], kvh1[i]) (with their n_head / n_head_kv query heads each) and FFN columns
 *   [ff0[i], ff1[i]); ranges consecutive, covering all heads and columns, each non-empty; the
 *   FFN boundaries are multiples of 256 so every quantised block stays whole; token_embd on
 *   every device (each looks the hidden state up itself), output head and sampling on device
 *   `main` (-mg; it must have a -ts share above 0). The attn_output cuts (KV head boundary x
 *   n_head / n_head_kv x head_dim) fall on whole blocks of its type, or the plan is refused.
 * none: n_dev == 1, the main GPU holds everything (layer0 = cpu_layers, layer1 = n_layer).
 * Layers [0, cpu_layers) and, when cpu_layers > 0, the embedding lookup run on the CPU; else
 * token_embd is on the first device (layer, none) or on every device (row).
 * Devices with a -ts share of 0, and (layer) devices whose rounded share is no layer, are left
 * out of dev[]. With --layer-split the list decides instead of -ts: used device i holds the layers
 * after entry i-1 (after the CPU's layers for i = 0) up to entry i; used devices past the list's
 * length hold nothing and are left out. */
typedef struct {
    int split_mode;
    int n_dev;
    int dev[ENGINE_MAX_DEVICES];
    int main;                      /* index into dev[]: the -mg device (row, none); layer: the head */
    int head;                      /* index into dev[] of the device computing the output head */
    int32_t n_layer, cpu_layers;
    int32_t layer0[ENGINE_MAX_DEVICES], layer1[ENGINE_MAX_DEVICES];
    int32_t kvh0[ENGINE_MAX_DEVICES], kvh1[ENGINE_MAX_DEVICES];
    int32_t ff0[ENGINE_MAX_DEVICES], ff1[ENGINE_MAX_DEVICES];
    /* Per device: bytes of weights (GGUF sizes of the parts it holds), KV cache (f16), scratch
     * estimate, and the free/total memory the device reported. */
    uint64_t weight_bytes[ENGINE_MAX_DEVICES], kv_bytes[ENGINE_MAX_DEVICES];
    uint64_t scratch_bytes[ENGINE_MAX_DEVICES];
    uint64_t free_bytes[ENGINE_MAX_DEVICES], total_bytes[ENGINE_MAX_DEVICES];
    char name[ENGINE_MAX_DEVICES][64];
    /* The CPU's part (cpu_layers > 0): weights (mapped from the file), f32 KV bytes, and the fast
     * path's repacked copy of its layers' matrices (anonymous memory beside the mapping; 0 with
     * --cpu-exact or where this CPU's kernels keep the rows). */
    uint64_t cpu_weight_bytes, cpu_kv_bytes, cpu_repack_bytes;
    /* Set when the plan does not fit (-2): the most GPU layers (-ngl) that fit with this split and
     * the most KV cells (whole pages) that fit with this -ngl; 0 when none does. */
    int32_t fit_ngl, fit_cells;
} engine_plan;

/* Plans model m for n_cells KV cells (what the backends will allocate, whole pages) and passes of
 * n_batch tokens on the n_visible devices described by devs[] (devs[k].index == k). Returns
 *   0: the plan fits every device's free memory (the scratch is an estimate: the backend checks
 *      its exact layout at load);
 *  -1: the flags do not suit the model or the devices (-ts with more values than devices or all
 *      zeros, -mg out of range, a -dev ordinal not visible or listed twice, -ngl 0, -sm row with
 *      heads or FFN columns that cannot be cut as asked, a --layer-split that
 *      engine_split_check_layers refuses or that names more devices than are used); err names the
 *      flag and the numbers; the plan's content is undefined;
 *  -2: the plan is complete but a device's part exceeds its free memory; err is one line: the
 *      device, needed (weights, KV, scratch) against free GiB, and the -ngl and/or -c that would
 *      fit (also in fit_ngl, fit_cells). */
int engine_plan_make(engine_plan *out, const llama_model *m, const engine_split *req,
                     const engine_device_info *devs, int n_visible, int32_t n_cells, int32_t n_batch,
                     char *err, size_t err_size);

/* --layer-split against a model of n_layer layers, devices aside: 0 when the list is empty or
 * fits, else -1 with err naming the flag, the list and the numbers: a split mode other than
 * layer, values not increasing, a last value other than n_layer - 1, or a first value inside the
 * layers that -ngl leaves to the CPU (its indices are the model's, so with -ngl N the first device
 * starts at layer n_layer - N). The planner calls it; so do the CPU paths, so that a list no plan
 * can take is refused on a machine without GPUs too. */
int engine_split_check_layers(const engine_split *req, int32_t n_layer, char *err, size_t err_size);

/* The --layer-split list as the user would write it ("0,3,7"), for messages. */
void engine_split_layers_text(const engine_split *req, char *buf, size_t size);

/* KV cells the engine allocates for a context of n_ctx cells shared by n_seq sequences: whole
 * pages, plus one page per sequence so that no sharing of the pages runs out. */
int64_t engine_plan_cells(int64_t n_ctx, int32_t n_seq);

/* The plan as a table for people (mgi info), lines ending in '\n': a title line, one line per
 * device (index, name, layers or KV heads and FFN columns, weight/KV/scratch/free/free-after GiB),
 * the CPU's part when it has layers. Truncated to size (always NUL-terminated). */
void engine_plan_describe(const engine_plan *p, int32_t n_cells, int32_t n_batch, char *buf, size_t size);

/* The name of a split mode ("none", "layer", "row") and back (-1: unknown). */
const char *engine_split_name(int mode);
int engine_split_parse(const char *s);

#endif
