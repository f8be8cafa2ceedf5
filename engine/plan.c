/* The planner of engine/plan.h: checks the split flags against the model and the devices, cuts
 * layers (-sm layer) or KV heads and FFN columns (-sm row) by the -ts ratios, and adds up what
 * each device must hold against its free memory, with the -ngl or -c that would fit. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/batch.h"
#include "engine/forward_cpu_exec.h"
#include "engine/plan.h"
#include "quant/dot.h"
#include "quant/quant.h"

/* FFN columns move between devices in whole 256-column blocks when n_ff allows, so that every
 * K-quant block of ffn_down (256 weights along a row) stays on one device. */
#define PLAN_FF_BLOCK 256

/* Mirrors of engine/forward_cuda.c's chunk sizes (tokens per attention launch, logits rows per
 * copy, attention splits per token), used only for the scratch estimate. */
#define PLAN_ATT_CHUNK 64
#define PLAN_OUT_CHUNK 64
#define PLAN_N_SPLIT 32

static const char *const split_names[] = {"none", "layer", "row"};

const char *engine_split_name(int mode) {
    return mode >= 0 && mode <= ENGINE_SPLIT_ROW ? split_names[mode] : "unknown";
}

int engine_split_parse(const char *s) {
    for (int i = 0; i <= ENGINE_SPLIT_ROW; i++)
        if (!strcmp(s, split_names[i])) return i;
    return -1;
}

void engine_split_layers_text(const engine_split *req, char *buf, size_t size) {
    size_t at = 0;
    if (!size) return;
    buf[0] = 0;
    for (int i = 0; i < req->n_layer_split && i < ENGINE_MAX_DEVICES && at < size; i++) {
        int n = snprintf(buf + at, size - at, "%s%d", i ? "," : "", req->layer_split[i]);
        if (n < 0) break;
        at += (size_t)n;
    }
}

int engine_split_check_layers(const engine_split *req, int32_t n_layer, char *err, size_t err_size) {
    int n = req->n_layer_split;
    if (n == 0) return 0;
    char list[ENGINE_MAX_DEVICES * 12];
    engine_split_layers_text(req, list, sizeof list);
    if (n < 0 || n > ENGINE_MAX_DEVICES) {
        snprintf(err, err_size, "--layer-split: %d values, at most %d (one per device)", n, ENGINE_MAX_DEVICES);
        return -1;
    }
    if (req->split_mode != ENGINE_SPLIT_LAYER) {
        snprintf(err, err_size, "--layer-split %s: only for -sm layer, and -sm %s was given; drop one of the two flags",
                 list, engine_split_name(req->split_mode));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (req->layer_split[i] < 0 || (i && req->layer_split[i] <= req->layer_split[i - 1])) {
            snprintf(err, err_size, "--layer-split %s: value %d (%d) %s; each device's last layer is above the "
                     "previous device's, so that every device holds at least one layer", list, i + 1,
                     req->layer_split[i], req->layer_split[i] < 0 ? "is negative" : "is not above the one before it");
            return -1;
        }
    }
    int32_t last = req->layer_split[n - 1];
    if (last != n_layer - 1) {
        snprintf(err, err_size, "--layer-split %s: the last value (%d) must be the model's last layer, %d (%d layers, "
                 "0..%d)", list, last, n_layer - 1, n_layer, n_layer - 1);
        return -1;
    }
    int32_t ngl = req->n_gpu_layers, cpu = ngl < 0 || ngl >= n_layer ? 0 : n_layer - ngl;
    if (ngl == 0) {
        snprintf(err, err_size, "--layer-split %s: -ngl 0 puts every layer on the CPU, so no device holds any; drop one "
                 "of the two flags", list);
        return -1;
    }
    if (req->layer_split[0] < cpu) {
        snprintf(err, err_size, "--layer-split %s: -ngl %d leaves layers 0-%d to the CPU, so the first device's last "
                 "layer (%d) must be %d..%d (the list counts the model's layers)", list, ngl, cpu - 1,
                 req->layer_split[0], cpu, n_layer - 1);
        return -1;
    }
    return 0;
}

static double gib(uint64_t b) { return (double)b / (double)(1ull << 30); }

static uint64_t weight_bytes(const llama_weight *w) { return (uint64_t)w->n_rows * (uint64_t)w->row_bytes; }

/* Bytes of n_rows rows of w. */
static uint64_t rows_bytes(const llama_weight *w, int64_t n_rows) { return (uint64_t)n_rows * (uint64_t)w->row_bytes; }

/* Bytes of n_cols columns of every row of w (the columns are whole blocks: checked before). */
static uint64_t cols_bytes(const llama_weight *w, int64_t n_cols) {
    if (n_cols == w->n_cols) return weight_bytes(w);
    size_t rb = quant_row_bytes(w->type, n_cols);
    if (!rb) rb = (size_t)((double)w->row_bytes * (double)n_cols / (double)w->n_cols);
    return (uint64_t)w->n_rows * rb;
}

/* The part of a layer a device holds: KV heads [kv0, kv1) and FFN columns [f0, f1). */
typedef struct {
    uint64_t bytes, largest;
} part_bytes;

static void add_part(part_bytes *p, uint64_t b) {
    p->bytes += b;
    if (b > p->largest) p->largest = b;
}

static part_bytes layer_bytes(const llama_model *m, int32_t l, int32_t n_kvh, int32_t n_ffc) {
    const llama_hparams *hp = &m->hp;
    const llama_layer *L = &m->layers[l];
    int64_t group = hp->n_head / hp->n_head_kv, hd = hp->head_dim;
    part_bytes p = {2 * (uint64_t)hp->n_embd * sizeof(float), 0};  /* the two norms, f32 */
    /* The recipe's other f32 vectors, where the file has them (post-norms, Q/K norms, biases). */
    const struct { const float *v; int64_t n; } vec[] = {
        {L->attn_post_norm, hp->n_embd}, {L->ffn_post_norm, hp->n_embd}, {L->q_norm, hd}, {L->k_norm, hd},
        {L->bq, (int64_t)hp->n_head * hd}, {L->bk, (int64_t)hp->n_head_kv * hd},
        {L->bv, (int64_t)hp->n_head_kv * hd}, {L->bo, hp->n_embd},
    };
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++)
        if (vec[i].v) p.bytes += (uint64_t)vec[i].n * sizeof(float);
    add_part(&p, rows_bytes(&L->wq, n_kvh * group * hd));
    add_part(&p, rows_bytes(&L->wk, n_kvh * hd));
    add_part(&p, rows_bytes(&L->wv, n_kvh * hd));
    add_part(&p, cols_bytes(&L->wo, n_kvh * group * hd));
    add_part(&p, rows_bytes(&L->w_gate, n_ffc));
    add_part(&p, rows_bytes(&L->w_up, n_ffc));
    add_part(&p, cols_bytes(&L->w_down, n_ffc));
    return p;
}

static int64_t lcm64(int64_t a, int64_t b) {
    int64_t x = a, y = b;
    while (y) {
        int64_t t = x % y;
        x = y;
        y = t;
    }
    return a / x * b;
}

/* Boundaries of n items (in units) over k shares: b[0] = 0, b[k] = n, b[i] the rounded
 * cumulative share, kept so that every part has at least min_each units. */
static void cut(const double *share, int k, int64_t n, int64_t min_each, int64_t *b) {
    double total = 0, cum = 0;
    for (int i = 0; i < k; i++) total += share[i];
    b[0] = 0;
    for (int i = 1; i < k; i++) {
        cum += share[i - 1];
        int64_t v = (int64_t)llround((double)n * cum / total);
        int64_t lo = b[i - 1] + min_each, hi = n - (int64_t)(k - i) * min_each;
        b[i] = v < lo ? lo : v > hi ? hi : v;
    }
    b[k] = n;
}

/* The scratch a device needs for passes of n_batch tokens, after engine/forward_cuda.c's
 * layout_scratch, with this device's query heads nq, KV width nkv and FFN columns ff. An
 * estimate: the backend computes its exact layout and checks it against free memory at load. */
static uint64_t scratch_estimate(const llama_hparams *hp, int32_t n_batch, int32_t n_cells, int64_t nq, int64_t nkv,
                                 int64_t ff, int64_t n_head, int head) {
    uint64_t B = (uint64_t)n_batch, E = (uint64_t)hp->n_embd, F = (uint64_t)ff;
    uint64_t s = 2 * B * E * 4 + B * ((uint64_t)nq + 2 * (uint64_t)nkv) * 4 + 2 * B * (uint64_t)nq * 4;
    s += 3 * B * F * 4;
    uint64_t widest = E > F ? E : F;
    if ((uint64_t)nq > widest) widest = (uint64_t)nq;
    s += B * widest * 2;
    if (head) s += (uint64_t)PLAN_OUT_CHUNK * (uint64_t)hp->n_vocab * 4 + PLAN_OUT_CHUNK * 4;  /* logits */
    uint64_t at = B < PLAN_ATT_CHUNK ? B : PLAN_ATT_CHUNK;
    s += at * (uint64_t)n_head * PLAN_N_SPLIT * ((uint64_t)hp->head_dim + 2) * 4;
    s += (5 * B + (uint64_t)n_cells / ENGINE_KV_PAGE + 1) * 4;
    return s;
}

/* The plan without the memory check: 0, or -1 with a message naming the flag. */
static int build(engine_plan *p, const llama_model *m, const engine_split *req, const engine_device_info *devs,
                 int n_visible, int32_t n_cells, int32_t n_batch, char *err, size_t err_size) {
    const llama_hparams *hp = &m->hp;
    memset(p, 0, sizeof *p);
    if (req->split_mode < ENGINE_SPLIT_NONE || req->split_mode > ENGINE_SPLIT_ROW) {
        snprintf(err, err_size, "-sm %d: unknown split mode (none, layer or row)", req->split_mode);
        return -1;
    }
    if (n_visible < 1) {
        snprintf(err, err_size, "no CUDA device to plan for; use -ngl 0 to run on the CPU");
        return -1;
    }
    if (n_cells < 1 || n_batch < 1 || hp->n_layer < 1 || hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv) {
        snprintf(err, err_size, "plan: bad sizes (%d KV cells, batch %d, %d layers, %d/%d heads)", n_cells, n_batch,
                 hp->n_layer, hp->n_head, hp->n_head_kv);
        return -1;
    }
    int32_t ngl = req->n_gpu_layers;
    if (ngl == 0 || ngl < -1) {
        snprintf(err, err_size, "-ngl %d: no layer on the GPUs, nothing to plan (0 runs on the CPU)", ngl);
        return -1;
    }
    if (engine_split_check_layers(req, hp->n_layer, err, err_size)) return -1;
    p->split_mode = req->split_mode;
    p->n_layer = hp->n_layer;
    p->cpu_layers = ngl == -1 || ngl >= hp->n_layer ? 0 : hp->n_layer - ngl;

    /* The used devices: the -dev list, or every visible one (at most ENGINE_MAX_DEVICES). */
    int used[ENGINE_MAX_DEVICES], n_used;
    if (req->n_devices < 0 || req->n_devices > ENGINE_MAX_DEVICES) {
        snprintf(err, err_size, "-dev: %d devices given, at most %d", req->n_devices, ENGINE_MAX_DEVICES);
        return -1;
    }
    if (req->n_devices) {
        n_used = req->n_devices;
        for (int i = 0; i < n_used; i++) {
            used[i] = req->devices[i];
            if (used[i] < 0 || used[i] >= n_visible) {
                snprintf(err, err_size, "-dev %d: no such device (%d visible, 0..%d; see mgi devices)", used[i],
                         n_visible, n_visible - 1);
                return -1;
            }
            for (int j = 0; j < i; j++)
                if (used[j] == used[i]) {
                    snprintf(err, err_size, "-dev: device %d is listed twice", used[i]);
                    return -1;
                }
        }
    } else {
        n_used = n_visible < ENGINE_MAX_DEVICES ? n_visible : ENGINE_MAX_DEVICES;
        for (int i = 0; i < n_used; i++) used[i] = i;
    }
    if (req->main_gpu < 0 || req->main_gpu >= n_used) {
        snprintf(err, err_size, "-mg %d: only %d device%s used (0..%d)", req->main_gpu, n_used,
                 n_used == 1 ? " is" : "s are", n_used - 1);
        return -1;
    }

    /* Ratios: -ts (missing values 0) or each device's free memory. */
    double share[ENGINE_MAX_DEVICES] = {0}, total = 0;
    if (req->n_tensor_split > n_used || req->n_tensor_split < 0) {
        snprintf(err, err_size, "-ts: %d values for %d device%s used", req->n_tensor_split, n_used,
                 n_used == 1 ? "" : "s");
        return -1;
    }
    for (int i = 0; i < n_used; i++) {
        if (req->n_tensor_split) {
            share[i] = i < req->n_tensor_split ? req->tensor_split[i] : 0;
            if (!(share[i] >= 0) || !isfinite(share[i])) {
                snprintf(err, err_size, "-ts: value %d (%g) must be a number >= 0", i + 1, share[i]);
                return -1;
            }
        } else {
            share[i] = (double)devs[used[i]].free_bytes;
        }
        total += share[i];
    }
    if (!(total > 0)) {
        if (req->n_tensor_split) {
            snprintf(err, err_size, "-ts: every share is 0; give at least one device a share above 0");
            return -1;
        }
        for (int i = 0; i < n_used; i++) share[i] = 1;  /* no free memory reported: equal shares */
    }

    /* The devices with a share, in -dev order (--layer-split: the first ones, each with its count
     * of layers as its share, so that the cut below lands exactly on the list). */
    int k = 0, main_used = req->main_gpu, cand[ENGINE_MAX_DEVICES];
    double cshare[ENGINE_MAX_DEVICES] = {0};
    if (req->n_layer_split) {
        if (req->n_layer_split > n_used) {
            char list[ENGINE_MAX_DEVICES * 12];
            engine_split_layers_text(req, list, sizeof list);
            snprintf(err, err_size, "--layer-split %s: %d devices named, but only %d %s used; give one last layer per "
                     "device", list, req->n_layer_split, n_used, n_used == 1 ? "is" : "are");
            return -1;
        }
        for (int i = 0; i < req->n_layer_split; i++) {
            cand[k] = used[i];
            cshare[k++] = req->layer_split[i] - (i ? req->layer_split[i - 1] : p->cpu_layers - 1);
        }
    } else if (req->split_mode == ENGINE_SPLIT_NONE) {
        cand[k] = used[main_used];
        cshare[k++] = 1;
    } else {
        for (int i = 0; i < n_used; i++)
            if (share[i] > 0) { cand[k] = used[i]; cshare[k++] = share[i]; }
    }
    int32_t n_gpu = hp->n_layer - p->cpu_layers;
    if (req->split_mode == ENGINE_SPLIT_ROW) {
        int64_t n_kv = hp->n_head_kv, group = hp->n_head / hp->n_head_kv;
        /* Cut units: KV heads in groups whose attn_output columns (group x head_dim each) fill
         * whole blocks of every layer's attn_output type; FFN columns in 256s (every K-quant
         * block of ffn_down whole) when n_ff allows, else in whole blocks of ffn_down's types. */
        int64_t kvu = 1, ffu = 1;
        for (int32_t l = p->cpu_layers; l < hp->n_layer; l++) {
            const quant_traits *to = quant_traits_of(m->layers[l].wo.type);
            const quant_traits *td = quant_traits_of(m->layers[l].w_down.type);
            int64_t bo = to ? to->block_elems : 1, bd = td ? td->block_elems : 1;
            int64_t g = 1;
            while ((g * group * hp->head_dim) % bo) g++;
            kvu = lcm64(kvu, g);
            ffu = lcm64(ffu, bd);
        }
        if (hp->n_ff % PLAN_FF_BLOCK == 0) ffu = lcm64(ffu, PLAN_FF_BLOCK);
        int64_t n_kvu = n_kv / kvu, n_blk = hp->n_ff / ffu;
        if (n_kvu < k || n_blk < k || hp->n_ff % ffu) {
            snprintf(err, err_size, "-sm row: %d devices need at least %d groups of %lld KV heads and %d FFN blocks "
                     "of %lld columns; the model has %d KV heads and n_ff %d; use -sm layer or fewer devices", k, k,
                     (long long)kvu, k, (long long)ffu, hp->n_head_kv, hp->n_ff);
            return -1;
        }
        int main_idx = -1;
        for (int i = 0; i < k; i++)
            if (cand[i] == used[main_used]) main_idx = i;
        if (main_idx < 0) {
            snprintf(err, err_size, "-sm row: the main device (-mg %d, device %d) has -ts share 0 but holds the "
                     "embeddings and the output head; give it a share or pick another -mg", main_used,
                     used[main_used]);
            return -1;
        }
        int64_t kb[ENGINE_MAX_DEVICES + 1], fb[ENGINE_MAX_DEVICES + 1];
        cut(cshare, k, n_kvu, 1, kb);
        cut(cshare, k, n_blk, 1, fb);
        for (int i = 0; i < k; i++) {
            kb[i] *= kvu;
            fb[i] *= ffu;
        }
        kb[k] = n_kv;
        fb[k] = hp->n_ff;
        for (int i = 0; i < k; i++) {
            p->dev[i] = cand[i];
            p->layer0[i] = p->cpu_layers;
            p->layer1[i] = hp->n_layer;
            p->kvh0[i] = (int32_t)kb[i];
            p->kvh1[i] = (int32_t)kb[i + 1];
            p->ff0[i] = (int32_t)fb[i];
            p->ff1[i] = (int32_t)fb[i + 1];
        }
        /* attn_output's columns follow the heads: each cut must fall on a block of its type. */
        for (int32_t l = p->cpu_layers; l < hp->n_layer; l++) {
            const llama_weight *wo = &m->layers[l].wo, *wd = &m->layers[l].w_down;
            const quant_traits *to = quant_traits_of(wo->type), *td = quant_traits_of(wd->type);
            int32_t bo = to ? to->block_elems : 1, bd = td ? td->block_elems : 1;
            for (int i = 1; i < k; i++) {
                int64_t col = kb[i] * group * hp->head_dim;
                if (col % bo) {
                    snprintf(err, err_size, "-sm row: %s (%s, blocks of %d) would be cut at column %lld (KV head "
                             "%lld), inside a block; use other -ts ratios or -sm layer", wo->name,
                             quant_type_name(wo->type), bo, (long long)col, (long long)kb[i]);
                    return -1;
                }
                if (fb[i] % bd) {
                    snprintf(err, err_size, "-sm row: %s (%s, blocks of %d) cannot be cut at column %lld; use -sm layer",
                             wd->name, quant_type_name(wd->type), bd, (long long)fb[i]);
                    return -1;
                }
            }
        }
        p->n_dev = k;
        p->main = p->head = main_idx;
    } else {
        /* layer and none: consecutive ranges, devices left empty by rounding dropped. */
        int64_t b[ENGINE_MAX_DEVICES + 1];
        cut(cshare, k, n_gpu, 0, b);
        int n = 0;
        for (int i = 0; i < k; i++) {
            if (b[i + 1] == b[i]) continue;
            p->dev[n] = cand[i];
            p->layer0[n] = p->cpu_layers + (int32_t)b[i];
            p->layer1[n] = p->cpu_layers + (int32_t)b[i + 1];
            p->kvh0[n] = 0;
            p->kvh1[n] = hp->n_head_kv;
            p->ff0[n] = 0;
            p->ff1[n] = hp->n_ff;
            n++;
        }
        p->n_dev = n;
        /* The output head runs where the last layer is; in layer mode -mg picks nothing else
         * (as in llama.cpp), so main is the head device too. */
        p->main = p->head = n - 1;
    }

    /* Bytes per device. */
    for (int i = 0; i < p->n_dev; i++) {
        const engine_device_info *d = &devs[p->dev[i]];
        snprintf(p->name[i], sizeof p->name[i], "%.63s", d->name);
        p->free_bytes[i] = d->free_bytes;
        p->total_bytes[i] = d->total_bytes;
        int32_t n_kvh = p->kvh1[i] - p->kvh0[i], n_ffc = p->ff1[i] - p->ff0[i];
        uint64_t w = 0, largest = 0;
        for (int32_t l = p->layer0[i]; l < p->layer1[i]; l++) {
            part_bytes lb = layer_bytes(m, l, n_kvh, n_ffc);
            w += lb.bytes;
            if (lb.largest > largest) largest = lb.largest;
        }
        /* The embedding lookup runs on the CPU when it has layers; else on every device of a row
         * split (each starts the layer from its own copy) or on the first of a layer split. */
        int holds_embd = p->cpu_layers == 0 && (p->split_mode == ENGINE_SPLIT_ROW || i == 0);
        if (holds_embd) w += weight_bytes(&m->tok_embd);
        if (i == p->head) {
            /* A tied output counts twice: the backend keeps token_embd for the lookup and the
             * output copy in its matvec layout. */
            w += weight_bytes(&m->output) + (uint64_t)hp->n_embd * sizeof(float);
            if (weight_bytes(&m->output) > largest) largest = weight_bytes(&m->output);
        }
        int64_t kv_w = (int64_t)n_kvh * hp->head_dim, group = hp->n_head / hp->n_head_kv;
        p->weight_bytes[i] = w;
        p->kv_bytes[i] = (uint64_t)n_cells * (uint64_t)kv_w * 2 * 2 * (uint64_t)(p->layer1[i] - p->layer0[i]);
        /* The prompt GEMM's scratch (forward_cuda.c's layout_scratch): an f16 weight panel of
         * up to 32 MiB plus split-K room of 128 KiB per SM. */
        int n_sm = d->n_sm > 0 ? d->n_sm : 132;
        uint64_t gemm = (32ull << 20) + 1024 + (uint64_t)n_sm * (128u << 10);
        p->scratch_bytes[i] = scratch_estimate(hp, n_batch, n_cells, n_kvh * group * hp->head_dim, kv_w, n_ffc,
                                               n_kvh * group, i == p->head) +
                              gemm + largest + (64ull << 20);
    }
    /* The CPU's part: its layers, the embedding lookup, an f32 cache for its layers. */
    if (p->cpu_layers > 0) {
        p->cpu_weight_bytes = weight_bytes(&m->tok_embd);
        for (int32_t l = 0; l < p->cpu_layers; l++) p->cpu_weight_bytes += layer_bytes(m, l, hp->n_head_kv, hp->n_ff).bytes;
        p->cpu_kv_bytes = (uint64_t)n_cells * (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim * 2 * 4 *
                          (uint64_t)p->cpu_layers;
        const quant_isa isa = quant_isa_best();
        for (int32_t l = 0; req->cpu_fast && l < p->cpu_layers; l++) {
            const llama_layer *L = &m->layers[l];
            const llama_weight *lw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
            for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++) p->cpu_repack_bytes += forward_cpu_exec_repack_span(lw[i], isa);
        }
    }
    return 0;
}

/* Index of the first device whose part exceeds its free memory, or -1 when all fit. */
static int first_misfit(const engine_plan *p) {
    for (int i = 0; i < p->n_dev; i++)
        if (p->weight_bytes[i] + p->kv_bytes[i] + p->scratch_bytes[i] > p->free_bytes[i]) return i;
    return -1;
}

int engine_plan_make(engine_plan *out, const llama_model *m, const engine_split *req,
                     const engine_device_info *devs, int n_visible, int32_t n_cells, int32_t n_batch,
                     char *err, size_t err_size) {
    if (build(out, m, req, devs, n_visible, n_cells, n_batch, err, err_size)) return -1;
    int bad = first_misfit(out);
    if (bad < 0) return 0;

    /* What would fit: the most GPU layers with this split, and the most KV cells (whole pages). */
    engine_plan alt;
    engine_split r = *req;
    char ignore[8];
    int32_t ngl_fit = 0, n_gpu = out->n_layer - out->cpu_layers;
    for (int32_t n = n_gpu - 1; n >= 1 && !ngl_fit; n--) {
        r.n_gpu_layers = n;
        if (!build(&alt, m, &r, devs, n_visible, n_cells, n_batch, ignore, sizeof ignore) && first_misfit(&alt) < 0)
            ngl_fit = n;
    }
    int32_t lo = 0, hi = n_cells / ENGINE_KV_PAGE;  /* pages: lo fits (or 0), hi does not */
    while (hi - lo > 1) {
        int32_t mid = lo + (hi - lo) / 2;
        if (!build(&alt, m, req, devs, n_visible, mid * ENGINE_KV_PAGE, n_batch, ignore, sizeof ignore) &&
            first_misfit(&alt) < 0)
            lo = mid;
        else
            hi = mid;
    }
    out->fit_ngl = ngl_fit;
    out->fit_cells = lo * ENGINE_KV_PAGE;
    /* The engine allocates a page per sequence beyond -c, so the -c to suggest is a page less. */
    int32_t c_fit = out->fit_cells > ENGINE_KV_PAGE ? out->fit_cells - ENGINE_KV_PAGE : 0;
    char fit[160] = "";
    if (ngl_fit && c_fit)
        snprintf(fit, sizeof fit, "-ngl %d fits, or -c %d", ngl_fit, c_fit);
    else if (ngl_fit)
        snprintf(fit, sizeof fit, "-ngl %d fits", ngl_fit);
    else if (c_fit)
        snprintf(fit, sizeof fit, "-c %d fits", c_fit);
    else
        snprintf(fit, sizeof fit, "no -ngl or -c fits with this split (-ngl 0 runs on the CPU)");
    int i = bad;
    snprintf(err, err_size, "device %d (%s): out of memory: needs %.2f GiB (weights %.2f, KV %.2f, scratch %.2f), %.2f GiB free; "
             "%s; try -ts, -ngl or a smaller -c", out->dev[i], out->name[i],
             gib(out->weight_bytes[i] + out->kv_bytes[i] + out->scratch_bytes[i]), gib(out->weight_bytes[i]),
             gib(out->kv_bytes[i]), gib(out->scratch_bytes[i]), gib(out->free_bytes[i]), fit);
    return -2;
}

int64_t engine_plan_cells(int64_t n_ctx, int32_t n_seq) {
    return ((n_ctx + ENGINE_KV_PAGE - 1) / ENGINE_KV_PAGE + n_seq) * ENGINE_KV_PAGE;
}

/* Appends to buf at *at, keeping the text NUL-terminated when it is cut. */
static void put(char *buf, size_t size, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t size, size_t *at, const char *fmt, ...) {
    if (*at >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, size - *at, fmt, ap);
    va_end(ap);
    if (n > 0) *at += (size_t)n < size - *at ? (size_t)n : size - *at;
}

void engine_plan_describe(const engine_plan *p, int32_t n_cells, int32_t n_batch, char *buf, size_t size) {
    size_t at = 0;
    if (!size) return;
    buf[0] = 0;
    put(buf, size, &at, "plan: -sm %s on %d device%s, layers %d-%d on the GPUs, %d KV cells, batch %d, output head "
        "on device %d\n", engine_split_name(p->split_mode), p->n_dev, p->n_dev == 1 ? "" : "s", p->cpu_layers,
        p->n_layer - 1, n_cells, n_batch, p->dev[p->head]);
    put(buf, size, &at, "  %-6s %-24s %-28s %8s %8s %8s %8s %10s\n", "device", "name", "holds", "weights", "KV",
        "scratch", "free", "free after");
    for (int i = 0; i < p->n_dev; i++) {
        char holds[64];
        if (p->split_mode == ENGINE_SPLIT_ROW)
            snprintf(holds, sizeof holds, "KV heads %d-%d, FFN %d-%d", p->kvh0[i], p->kvh1[i] - 1, p->ff0[i],
                     p->ff1[i] - 1);
        else
            snprintf(holds, sizeof holds, "layers %d-%d", p->layer0[i], p->layer1[i] - 1);
        uint64_t need = p->weight_bytes[i] + p->kv_bytes[i] + p->scratch_bytes[i];
        double after = gib(p->free_bytes[i]) - gib(need);
        put(buf, size, &at, "  %-6d %-24.24s %-28s %8.2f %8.2f %8.2f %8.2f %10.2f%s\n", p->dev[i], p->name[i], holds,
            gib(p->weight_bytes[i]), gib(p->kv_bytes[i]), gib(p->scratch_bytes[i]), gib(p->free_bytes[i]), after,
            after < 0 ? "  does not fit" : "");
    }
    if (p->cpu_layers > 0) {
        char holds[64];
        snprintf(holds, sizeof holds, "layers 0-%d, embeddings", p->cpu_layers - 1);
        char repack[64] = "";
        if (p->cpu_repack_bytes)
            snprintf(repack, sizeof repack, "; +%.2f GiB of weights repacked", gib(p->cpu_repack_bytes));
        put(buf, size, &at, "  %-6s %-24s %-28s %8.2f %8.2f   (KV in f32%s)\n", "cpu", "", holds,
            gib(p->cpu_weight_bytes), gib(p->cpu_kv_bytes), repack);
    }
}
