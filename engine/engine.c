/* The engine behind mgi's subcommands: opens the GGUF file, binds the model, loads the tokenizer,
 * keeps the paged KV bookkeeping of every sequence and runs forward passes over batches of
 * tokens on the backend that holds the weights (the CPU reference, or the GPU backend the caller
 * passes in engine_params). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/chain.h"
#include "engine/forward_cpu.h"
#include "engine/kvcache.h"
#include "engine/rendezvous.h"
#include "gguf/gguf.h"

struct engine {
    gguf_ctx *g;
    llama_model model;
    tokenizer *tok;
    const engine_backend_ops *ops;
    void *be;              /* the backend's state */
    int32_t n_ctx_seq;     /* positions one sequence may hold */
    int32_t n_batch;       /* tokens per backend pass */
    kvcache kv;
    uint64_t hash;
    engine_plan plan;            /* the GPU plan, when e->gpu is set */
    const engine_gpu_backend *gpu;
    void *gpu_be;                /* the GPU backend's state (inside the chain when -ngl is partial) */
    /* Scratch of engine_decode: one backend pass ([n_batch] each) and per sequence. */
    int32_t *b_token, *b_pos, *b_seq, *b_cell, *b_out;
    engine_token *eval_toks;  /* [n_batch] engine_eval's batches */
    int32_t *b_ids;           /* [2 n_batch] forward_greedy's pairs of picks */
    int eval_no_eog;          /* engine_greedy_no_eog */
    engine_fwd_seq *b_seqs;  /* [n_seq] */
    int32_t *seq_next;       /* [n_seq] length after the batch, -1: not in it */
    int32_t *seq_old;        /* [n_seq] length before the batch */
    int32_t *seq_idx;        /* [n_seq] index in b_seqs of the current pass, -1: none */
    char warning[512];       /* engine_load_warning ("" when none) */
    char offload_desc[160];  /* what op offload holds, for engine_describe ("" when off) */
};

engine_params engine_default_params(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    engine_params p = {
        .n_ctx = 0,
        .n_batch = 2048,
        .n_seq_max = 1,
        .n_threads = n < 1 ? 1 : n > 8 ? 8 : (int)n,
        .split = {.split_mode = ENGINE_SPLIT_LAYER, .n_gpu_layers = -1},
        .use_mmap = 1,
    };
    return p;
}

/* --- model identity ------------------------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return fnv(h, b, 8);
}

static uint64_t hash_value(uint64_t h, const gguf_value *v) {
    h = fnv_u64(h, (uint64_t)v->type);
    switch (v->type) {
    case GGUF_TYPE_STRING: return fnv(fnv_u64(h, v->v.str.len), v->v.str.ptr, (size_t)v->v.str.len);
    case GGUF_TYPE_ARRAY:
        h = fnv_u64(fnv_u64(h, (uint64_t)v->v.arr.elem), v->v.arr.n);
        if (v->v.arr.items) {
            for (uint64_t i = 0; i < v->v.arr.n; i++) h = hash_value(h, &v->v.arr.items[i]);
            return h;
        }
        return h;  /* numeric arrays: element type and count (values are covered by the data hash) */
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64: return fnv(h, &v->v.f64, sizeof v->v.f64);
    case GGUF_TYPE_BOOL: return fnv_u64(h, v->v.b);
    default: return fnv_u64(h, v->v.u64);
    }
}

static uint64_t model_hash(const gguf_ctx *g) {
    uint64_t h = fnv_u64(0xcbf29ce484222325ULL, gguf_file_size(g));
    h = fnv_u64(h, gguf_data_offset(g));
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *k = gguf_key(g, i);
        h = hash_value(fnv(h, k, strlen(k) + 1), gguf_value_at(g, i));
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        h = fnv(h, t->name, strlen(t->name) + 1);
        h = fnv_u64(fnv_u64(h, t->type), t->offset);
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) h = fnv_u64(h, (uint64_t)t->ne[d]);
        h = fnv(h, t->data, t->size < 256 ? (size_t)t->size : 256);
    }
    return h;
}

/* --- load ---------------------------------------------------------------------------------------- */

/* A device's name and free memory: its free memory needs a context on it, a few hundred ms
 * each, so the devices are asked at once, and only those the flags can use (-dev, or the main
 * GPU of -sm none); the others keep a zero entry the planner never reads. */
typedef struct {
    const engine_gpu_backend *gpu;
    int i, rc;
    engine_device_info *info;
    char err[256];
} query_job;

static void *query_main(void *arg) {
    query_job *j = arg;
    j->rc = j->gpu->query(j->i, j->info, j->err, sizeof j->err);
    return NULL;
}

static int query_devices(const engine_params *p, int n_dev, engine_device_info *devs, char *err, size_t err_size) {
    const engine_split *sp = &p->split;
    query_job jobs[ENGINE_MAX_DEVICES];
    pthread_t th[ENGINE_MAX_DEVICES];
    int started[ENGINE_MAX_DEVICES] = {0}, wanted[ENGINE_MAX_DEVICES] = {0};
    for (int k = 0; k < sp->n_devices && k < ENGINE_MAX_DEVICES; k++)
        if (sp->devices[k] >= 0 && sp->devices[k] < n_dev) wanted[sp->devices[k]] = 1;
    if (!sp->n_devices && sp->split_mode == ENGINE_SPLIT_NONE && sp->main_gpu >= 0 && sp->main_gpu < n_dev)
        wanted[sp->main_gpu] = 1;
    int any = 0;
    for (int i = 0; i < n_dev; i++) any |= wanted[i];
    for (int i = 0; i < n_dev; i++) {
        memset(&devs[i], 0, sizeof devs[i]);
        devs[i].index = i;
        jobs[i] = (query_job){.gpu = p->gpu, .i = i, .info = &devs[i]};
        if (any && !wanted[i]) continue;
        if (!pthread_create(&th[i], NULL, query_main, &jobs[i])) started[i] = 1;
        else query_main(&jobs[i]);
    }
    int rc = 0;
    for (int i = 0; i < n_dev; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        if (jobs[i].rc && !rc) {
            snprintf(err, err_size, "%s", jobs[i].err);
            rc = -1;
        }
    }
    return rc;
}

/* The GPU part of engine_load: the plan from the flags and the devices, then the CUDA backend for
 * the plan's layers, chained after a CPU stage for the first layers when -ngl leaves some there.
 * 0, or -1 with *rc and the message set. */
/* The CPU backend's most threads: -t's, or -tb's when larger (forward_cpu_threads picks per pass). */
static int cpu_threads(const engine_params *p) {
    return p->n_threads_batch > p->n_threads ? p->n_threads_batch : p->n_threads;
}

static void add_warning(engine *e, const char *msg) {
    size_t o = strlen(e->warning);
    snprintf(e->warning + o, sizeof e->warning - o, "%s%s", o ? "; " : "", msg);
}

/* Op offload for the CPU stage of a partial offload (engine_params.no_op_offload): the device after
 * the CPU's layers (layer split: the first; otherwise the main one) takes its prompts' products.
 * A device that cannot is a warning, not a failure: the CPU then computes them. */
static void setup_offload(engine *e, const engine_params *p, forward_cpu *cpu) {
    const engine_gpu_backend *g = p->gpu;
    if (p->cpu_exact || p->no_op_offload || !g->offload_new || !g->offload_matmul || !g->offload_free) return;
    int dev = e->plan.dev[e->plan.split_mode == ENGINE_SPLIT_LAYER ? 0 : e->plan.main];
    int n;
    const llama_weight **w = forward_cpu_matrices(cpu, &n);
    void *host[16];
    size_t host_bytes[16];
    engine_offload_spec spec = {w, n, host, host_bytes, forward_cpu_buffers(cpu, host, host_bytes, 16), e->n_batch};
    char why[256] = "out of memory", msg[400];
    void *off = w ? g->offload_new(dev, &spec, e->offload_desc, sizeof e->offload_desc, why, sizeof why) : NULL;
    free(w);
    forward_cpu_offload o = {off, ENGINE_OP_OFFLOAD_MIN_TOK, g->offload_matmul, g->offload_free};
    if (off && !forward_cpu_set_offload(cpu, &o)) return;
    if (off) g->offload_free(off);
    e->offload_desc[0] = 0;
    snprintf(msg, sizeof msg, "op offload off (%s): the CPU's layers compute their prompts on the CPU; "
                              "--no-op-offload silences this", why);
    add_warning(e, msg);
}

/* The fast CPU path on a CPU without AVX2: said once at load. */
static void note_cpu_isa(engine *e, const engine_params *p) {
    const char *note = p->cpu_exact ? NULL : forward_cpu_isa_note(quant_isa_best());
    if (note) add_warning(e, note);
}

static int load_gpu(engine *e, const engine_params *p, int n_dev, int32_t n_cells, int *rc, char *err,
                    size_t err_size) {
    const llama_hparams *hp = &e->model.hp;
    engine_device_info devs[ENGINE_MAX_DEVICES];
    if (n_dev > ENGINE_MAX_DEVICES) n_dev = ENGINE_MAX_DEVICES;
    *rc = ENGINE_ERUNTIME;
    if (query_devices(p, n_dev, devs, err, err_size)) return -1;
    engine_split req = p->split;
    req.cpu_fast = !p->cpu_exact;
    int pr = engine_plan_make(&e->plan, &e->model, &req, devs, n_dev, n_cells, e->n_batch, err, err_size);
    if (pr) {
        *rc = ENGINE_EPARAM;  /* bad flags, or a plan that does not fit: the flags can fix both */
        return -1;
    }
    /* One process per GPU (engine/rendezvous.h) is not wired into the CUDA backend yet: a job
     * launched that way is refused rather than run N times over the same GPUs. */
    rendezvous_config rz;
    int rzr = rendezvous_from_env(&rz, err, err_size);
    if (rzr < 0 || (rzr > 0 && rz.world > 1)) {
        if (rzr > 0)
            snprintf(err, err_size, "MGI_WORLD=%d: one process per GPU (MGI_RANK/MGI_WORLD/MGI_ADDR or mpirun) is not "
                     "supported by the CUDA backend yet; run one mgi over all the GPUs (-dev) without those variables",
                     rz.world);
        *rc = ENGINE_EPARAM;
        return -1;
    }
    e->gpu = p->gpu;
    void *gpu = p->gpu->create(&e->model, &e->plan, n_cells, e->n_batch, e->n_ctx_seq, p->progress,
                               p->progress_ctx, err, err_size);
    if (!gpu) return -1;
    e->gpu_be = gpu;
    if (e->plan.cpu_layers == 0) {
        e->ops = p->gpu->ops;
        e->be = gpu;
        return 0;
    }
    /* -ngl below the layer count: layers [0, cpu_layers) on the CPU, the rest on the GPUs. */
    int32_t k = e->plan.cpu_layers;
    llama_hparams cpu_hp = *hp;
    cpu_hp.n_layer = k;  /* host f32 KV only for the CPU's layers */
    chain_stage st[2] = {{&forward_cpu_ops, NULL, 0, k}, {p->gpu->ops, gpu, k, hp->n_layer}};
    if (llama_kv_check(&cpu_hp, n_cells, sizeof(float), 0, err, err_size) ||
        !(st[0].self = forward_cpu_new(&e->model, 0, k, n_cells, e->n_batch, e->n_ctx_seq, cpu_threads(p), err,
                                       err_size))) {
        p->gpu->ops->free(gpu);
        e->gpu_be = NULL;
        return -1;
    }
    if (!p->cpu_exact && forward_cpu_fast(st[0].self, !p->cpu_act_single, err, err_size)) {
        forward_cpu_free(st[0].self);
        p->gpu->ops->free(gpu);
        e->gpu_be = NULL;
        return -1;
    }
    forward_cpu_threads(st[0].self, p->n_threads, p->n_threads_batch);
    note_cpu_isa(e, p);
    setup_offload(e, p, st[0].self);
    chain *c = chain_new(&e->model, st, 2, e->n_batch, err, err_size);  /* frees both stages on failure */
    if (!c) {
        e->gpu_be = NULL;
        return -1;
    }
    e->ops = chain_ops(c);
    e->be = c;
    return 0;
}

int engine_load(engine **out, const char *path, const engine_params *p, char *err, size_t err_size) {
    *out = NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, err_size, "out of memory");
        return ENGINE_ERUNTIME;
    }
    int rc = ENGINE_EBADINPUT;
    if (!(e->g = gguf_open(path, p->use_mmap, err, err_size))) goto fail;
    /* as llama.cpp: a lock that the limits refuse is a warning, and the run goes on */
    if (p->use_mlock) gguf_mlock(e->g, e->warning, sizeof e->warning);
    if (llama_model_load(&e->model, e->g, err, err_size)) goto fail;
    if (!(e->tok = tokenizer_load(e->g, err, err_size))) goto fail;
    const llama_hparams *hp = &e->model.hp;
    if (tokenizer_n_vocab(e->tok) > hp->n_vocab) {
        snprintf(err, err_size, "%s: the vocabulary has %d tokens but token_embd.weight only %d rows",
                 path, tokenizer_n_vocab(e->tok), hp->n_vocab);
        goto fail;
    }
    e->hash = model_hash(e->g);
    rc = ENGINE_EPARAM;
    int32_t n_seq = p->n_seq_max;
    if (n_seq < 1) {
        snprintf(err, err_size, "-np %d: at least one sequence is needed", n_seq);
        goto fail;
    }
    int64_t limit = (int64_t)hp->n_ctx_train * n_seq;
    int64_t n_ctx = p->n_ctx ? p->n_ctx : limit;
    if (n_ctx < 1 || n_ctx > limit || n_ctx > (1 << 30)) {
        if (n_seq == 1)
            snprintf(err, err_size, "-c %lld: the model was trained for a context of %d (%s.context_length); "
                     "use -c 1..%d", (long long)n_ctx, hp->n_ctx_train, hp->arch, hp->n_ctx_train);
        else
            snprintf(err, err_size, "-c %lld: %d sequences of the model's %d positions (%s.context_length) need "
                     "at most -c %lld", (long long)n_ctx, n_seq, hp->n_ctx_train, hp->arch, (long long)limit);
        goto fail;
    }
    if (n_seq > n_ctx) {
        snprintf(err, err_size, "-np %d: a context of %lld cells (-c) holds at most %lld sequences", n_seq,
                 (long long)n_ctx, (long long)n_ctx);
        goto fail;
    }
    e->n_ctx_seq = (int32_t)(n_ctx / n_seq);
    if (p->cpu_act_single != 0 && p->cpu_act_single != 1) {
        snprintf(err, err_size, "engine parameter cpu_act_single is %d; it must be 0 or 1", p->cpu_act_single);
        goto fail;
    }
    if (p->n_batch < 1 || p->n_threads < 1 || p->n_threads_batch < 0) {
        snprintf(err, err_size, "batch size (%d) and threads (%d, batch %d) must be at least 1", p->n_batch,
                 p->n_threads, p->n_threads_batch);
        goto fail;
    }
    /* Each sequence holds at most ceil(n_ctx_seq / page) pages, so n_ctx / page plus one page per
     * sequence never runs out, however the sequences share (engine_plan_cells, which `mgi info`
     * plans with too). */
    int64_t n_cells64 = engine_plan_cells(n_ctx, n_seq), n_pages = n_cells64 / ENGINE_KV_PAGE;
    e->n_batch = p->n_batch < n_ctx ? p->n_batch : (int32_t)n_ctx;
    rc = ENGINE_ERUNTIME;
    if (kvcache_init(&e->kv, (int32_t)n_pages, n_seq, e->n_ctx_seq, err, err_size)) goto fail;
    size_t B = (size_t)e->n_batch, S = (size_t)n_seq;
    e->b_token = malloc(B * sizeof(int32_t));
    e->b_pos = malloc(B * sizeof(int32_t));
    e->b_seq = malloc(B * sizeof(int32_t));
    e->b_cell = malloc(B * sizeof(int32_t));
    e->b_out = malloc(B * sizeof(int32_t));
    e->b_seqs = malloc(S * sizeof *e->b_seqs);
    e->eval_toks = malloc(B * sizeof *e->eval_toks);
    e->b_ids = malloc(2 * B * sizeof(int32_t));
    e->seq_next = malloc(S * sizeof(int32_t));
    e->seq_old = malloc(S * sizeof(int32_t));
    e->seq_idx = malloc(S * sizeof(int32_t));
    if (!e->b_token || !e->b_pos || !e->b_seq || !e->b_cell || !e->b_out || !e->b_seqs || !e->eval_toks || !e->b_ids ||
        !e->seq_next || !e->seq_old || !e->seq_idx) {
        snprintf(err, err_size, "out of memory for a batch of %d tokens", e->n_batch);
        goto fail;
    }
    /* The GPU backend when one is passed, has a device and -ngl allows it; else the CPU. */
    char why[256] = "";
    int n_dev = p->gpu && p->split.n_gpu_layers != 0 ? p->gpu->n_devices(why, sizeof why) : 0;
    int32_t n_cells = (int32_t)n_cells64;
    if (n_dev > 0) {
        /* A recipe the CUDA backend does not run would run wrong there. */
        const char *feature = model_gpu_missing_feature(&e->model);
        if (feature) {
            snprintf(err, err_size, "CUDA backend: architecture %s's %s is not implemented on the GPU yet; run it on "
                     "the CPU with -ngl 0", hp->arch, feature);
            rc = ENGINE_EBADINPUT;
            goto fail;
        }
        if (load_gpu(e, p, n_dev, n_cells, &rc, err, err_size)) goto fail;
    } else {
        /* The CPU runs every layer, but a --layer-split that no plan could take is still refused,
         * as the planner would on a machine with GPUs. */
        if (engine_split_check_layers(&p->split, hp->n_layer, err, err_size)) {
            rc = ENGINE_EPARAM;
            goto fail;
        }
        e->ops = &forward_cpu_ops;
        /* The f32 cache lives in host memory: refuse, with the -c that fits, before allocating. */
        if (llama_kv_check(hp, n_cells, sizeof(float), 0, err, err_size)) goto fail;
        if (!(e->be = forward_cpu_new(&e->model, 0, hp->n_layer, n_cells, e->n_batch, e->n_ctx_seq, cpu_threads(p),
                                      err, err_size)))
            goto fail;
        if (!p->cpu_exact && forward_cpu_fast(e->be, !p->cpu_act_single, err, err_size)) goto fail;
        note_cpu_isa(e, p);
        forward_cpu_threads(e->be, p->n_threads, p->n_threads_batch);
    }
    *out = e;
    return ENGINE_OK;
fail:
    engine_free(e);
    return rc;
}

void engine_free(engine *e) {
    if (!e) return;
    if (e->be) e->ops->free(e->be);
    kvcache_free(&e->kv);
    free(e->b_token);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_cell);
    free(e->b_out);
    free(e->b_seqs);
    free(e->eval_toks);
    free(e->b_ids);
    free(e->seq_next);
    free(e->seq_old);
    free(e->seq_idx);
    tokenizer_free(e->tok);
    llama_model_free(&e->model);
    gguf_close(e->g);
    free(e);
}

const tokenizer *engine_tokenizer(const engine *e) { return e->tok; }
const llama_hparams *engine_hparams(const engine *e) { return &e->model.hp; }
int32_t engine_n_ctx(const engine *e) { return e->n_ctx_seq; }
int32_t engine_n_seq_max(const engine *e) { return e->kv.n_seq; }
int32_t engine_n_vocab(const engine *e) { return e->model.hp.n_vocab; }
const char *engine_load_warning(const engine *e) { return e->warning[0] ? e->warning : NULL; }

const char *engine_backend(const engine *e) { return e->ops->name; }

int engine_split_stats(engine *e, int start, engine_dev_share *out, int max) {
    if (!e->gpu || !e->gpu->stats) return 0;
    return e->gpu->stats(e->gpu_be, start, out, max);
}

void engine_describe(const engine *e, char *buf, size_t size) {
    if (size) buf[0] = 0;
    if (size && e->ops == &forward_cpu_ops && e->be) {
        size_t b = forward_cpu_repacked_bytes(e->be);
        if (b)
            snprintf(buf, size, "CPU: %.2f MiB of weights repacked for the fast path (anonymous memory, beside the "
                                "file's mapping)\n", (double)b / (1 << 20));
        return;
    }
    if (!e->gpu || !e->gpu->describe || !size) return;
    size_t o = 0;
    if (e->plan.cpu_layers > 0) {
        int w = snprintf(buf, size, "CPU: layers 0-%d%s%s\n", e->plan.cpu_layers - 1,
                         e->offload_desc[0] ? "; op offload: " : "", e->offload_desc);
        o = w > 0 && (size_t)w < size ? (size_t)w : 0;
    }
    e->gpu->describe(e->gpu_be, buf + o, size - o);
}
int engine_kv_elem_bytes(const engine *e) { return e->ops->kv_elem_bytes; }
uint64_t engine_model_hash(const engine *e) { return e->hash; }
int32_t engine_kv_dim(const engine *e) { return e->model.hp.n_head_kv * e->model.hp.head_dim; }
int32_t engine_kv_pages_free(const engine *e) { return e->kv.n_free; }
int32_t engine_kv_pages_total(const engine *e) { return e->kv.n_pages; }

/* --- decoding ------------------------------------------------------------------------------------ */

int32_t engine_argmax(const float *v, int32_t n) { return engine_argmax_skip(v, n, NULL, 0); }

int32_t engine_argmax_skip(const float *v, int32_t n, const int32_t *skip, int32_t n_skip) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++) {
        if (v[i] != v[i] || (best >= 0 && !(v[i] > v[best]))) continue;
        int skipped = 0;
        for (int32_t k = 0; k < n_skip && !skipped; k++) skipped = skip[k] == i;
        if (!skipped) best = i;
    }
    return best < 0 ? 0 : best;
}

void engine_greedy_no_eog(engine *e, int on) { e->eval_no_eog = on != 0; }

/* One backend pass over tokens [i0, i1) of a checked batch whose pages are reserved; output rows
 * go to logits, or with ids set, their greedy picks to ids (past the end-of-generation tokens
 * for the tokens marked no_eog). */
static int decode_pass(engine *e, const engine_token *t, int32_t i0, int32_t i1, float *logits, int32_t *ids,
                       int32_t *n_out, char *err, size_t err_size) {
    int32_t n_seqs = 0, max_pos = 0, rows = 0;
    for (int32_t i = i0; i < i1; i++) {
        int32_t s = t[i].seq;
        if (e->seq_idx[s] < 0) {
            e->seq_idx[s] = n_seqs;
            e->b_seqs[n_seqs++] = (engine_fwd_seq){e->kv.seqs[s].pages, e->kv.seqs[s].n_pages, 0};
        }
        engine_fwd_seq *fs = &e->b_seqs[e->seq_idx[s]];
        if (t[i].pos + 1 > fs->n_pos) fs->n_pos = t[i].pos + 1;
        if (fs->n_pos > max_pos) max_pos = fs->n_pos;
        int32_t k = i - i0;
        e->b_token[k] = t[i].token;
        e->b_pos[k] = t[i].pos;
        e->b_seq[k] = e->seq_idx[s];
        e->b_cell[k] = kvcache_cell(&e->kv, s, t[i].pos);
        e->b_out[k] = t[i].want_logits ? rows++ : -1;
    }
    for (int32_t i = i0; i < i1; i++) e->seq_idx[t[i].seq] = -1;
    const int32_t *eog;
    int32_t n_eog = tokenizer_eog_ids(e->tok, &eog);
    engine_fwd_batch b = {
        .n_tokens = i1 - i0, .token = e->b_token, .pos = e->b_pos, .seq = e->b_seq, .cell = e->b_cell,
        .out_row = e->b_out, .n_out = rows, .n_seqs = n_seqs, .seqs = e->b_seqs, .max_pos = max_pos,
        .skip = eog, .n_skip = n_eog,
    };
    size_t n_vocab = (size_t)e->model.hp.n_vocab;
    int32_t first = *n_out;
    *n_out += rows;
    if (!ids) return e->ops->forward(e->be, &b, rows ? logits + (size_t)first * n_vocab : NULL, err, err_size);
    int rc;
    if (e->ops->forward_greedy) {
        rc = e->ops->forward_greedy(e->be, &b, rows ? e->b_ids : NULL, err, err_size);
        for (int32_t i = i0; i < i1 && !rc; i++) {
            int32_t r = e->b_out[i - i0];
            if (r >= 0) ids[first + r] = e->b_ids[2 * r + (t[i].no_eog != 0)];
        }
        return rc;
    }
    float *tmp = rows ? malloc((size_t)rows * n_vocab * sizeof(float)) : NULL;
    if (rows && !tmp) {
        snprintf(err, err_size, "out of memory for %d rows of logits", rows);
        return -1;
    }
    rc = e->ops->forward(e->be, &b, tmp, err, err_size);
    for (int32_t i = i0; i < i1 && !rc; i++) {
        int32_t r = e->b_out[i - i0];
        if (r >= 0)
            ids[first + r] = engine_argmax_skip(tmp + (size_t)r * n_vocab, (int32_t)n_vocab, eog,
                                                t[i].no_eog ? n_eog : 0);
    }
    free(tmp);
    return rc;
}

static int decode(engine *e, const engine_token *t, int32_t n, float *logits, int32_t *ids, char *err,
                  size_t err_size) {
    int32_t n_seq = e->kv.n_seq, n_vocab = e->model.hp.n_vocab;
    if (n < 1 || !t) {
        snprintf(err, err_size, "decode: empty batch");
        return ENGINE_EPARAM;
    }
    int32_t have = 0;
    if (logits && n > e->n_batch && e->ops->out_buffer && logits == e->ops->out_buffer(e->be, &have)) {
        /* each pass would copy its rows over the last one's in that buffer */
        snprintf(err, err_size, "decode: the backend's logits buffer takes one pass (%d tokens, at most %d)", n,
                 e->n_batch);
        return ENGINE_EPARAM;
    }
    for (int32_t s = 0; s < n_seq; s++) e->seq_next[s] = e->seq_idx[s] = -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t s = t[i].seq;
        if (s < 0 || s >= n_seq) {
            snprintf(err, err_size, "decode: sequence %d outside 0..%d (-np)", s, n_seq - 1);
            return ENGINE_EPARAM;
        }
        if (t[i].token < 0 || t[i].token >= n_vocab) {
            snprintf(err, err_size, "token id %d is outside the model's vocabulary of %d", t[i].token, n_vocab);
            return ENGINE_EPARAM;
        }
        int32_t want = e->seq_next[s] < 0 ? e->kv.seqs[s].len : e->seq_next[s];
        if (t[i].pos != want) {
            snprintf(err, err_size, "decode: sequence %d continues at position %d, not %d", s, want, t[i].pos);
            return ENGINE_EPARAM;
        }
        if (t[i].pos >= e->n_ctx_seq) {
            snprintf(err, err_size, "position %d of sequence %d does not fit its context of %d (-c)", t[i].pos, s,
                     e->n_ctx_seq);
            return ENGINE_EPARAM;
        }
        if (t[i].want_logits && !logits && !ids) {
            snprintf(err, err_size, "decode: logits wanted but no output buffer");
            return ENGINE_EPARAM;
        }
        e->seq_next[s] = t[i].pos + 1;
    }
    int64_t need = 0;
    for (int32_t s = 0; s < n_seq; s++)
        if (e->seq_next[s] >= 0) need += kvcache_pages_needed(&e->kv, s, e->seq_next[s]);
    if (need > e->kv.n_free) {
        snprintf(err, err_size, "KV cache full: the batch needs %lld more pages of %d cells, %d are free "
                 "(raise -c)", (long long)need, ENGINE_KV_PAGE, e->kv.n_free);
        return ENGINE_EFULL;
    }
    for (int32_t s = 0; s < n_seq; s++) e->seq_old[s] = e->kv.seqs[s].len;
    int failed = 0;
    for (int32_t s = 0; s < n_seq && !failed; s++) {
        if (e->seq_next[s] < 0) continue;
        int32_t dst, src, nc;
        if (kvcache_unshare_last(&e->kv, s, &dst, &src, &nc) &&
            e->ops->kv_copy(e->be, dst * ENGINE_KV_PAGE, src * ENGINE_KV_PAGE, nc, err, err_size)) {
            kvcache_reshare_last(&e->kv, s, src);
            failed = 1;
            break;
        }
        kvcache_reserve(&e->kv, s, e->seq_next[s]);
    }
    int32_t n_out = 0;
    for (int32_t i0 = 0; i0 < n && !failed; i0 += e->n_batch) {
        int32_t i1 = n - i0 < e->n_batch ? n : i0 + e->n_batch;
        failed = decode_pass(e, t, i0, i1, logits, ids, &n_out, err, err_size) != 0;
    }
    if (failed) {
        /* Cells past the old lengths may hold partial results: drop them, keep the rest. */
        for (int32_t s = 0; s < n_seq; s++)
            if (e->seq_next[s] >= 0) kvcache_truncate(&e->kv, s, e->seq_old[s]);
        return ENGINE_ERUNTIME;
    }
    for (int32_t s = 0; s < n_seq; s++)
        if (e->seq_next[s] >= 0) e->kv.seqs[s].len = e->seq_next[s];
    return ENGINE_OK;
}

int engine_decode(engine *e, const engine_token *t, int32_t n, float *logits, char *err, size_t err_size) {
    return decode(e, t, n, logits, NULL, err, err_size);
}

int engine_decode_greedy(engine *e, const engine_token *t, int32_t n, int32_t *ids, char *err, size_t err_size) {
    return decode(e, t, n, NULL, ids, err, err_size);
}

/* engine_eval, or with next set, engine_eval_greedy. */
static int eval(engine *e, const int32_t *tokens, int32_t n, int32_t pos, float *logits, int all_logits,
                int32_t *next, char *err, size_t err_size) {
    if (n < 1 || pos < 0 || pos > e->n_ctx_seq - n) {
        snprintf(err, err_size, "%d tokens at position %d do not fit the context of %d (-c)", n, pos, e->n_ctx_seq);
        return -1;
    }
    if (pos > e->kv.seqs[0].len) {
        snprintf(err, err_size, "evaluation at position %d, but only %d positions are held", pos, e->kv.seqs[0].len);
        return -1;
    }
    kvcache_truncate(&e->kv, 0, pos);
    int32_t n_vocab = e->model.hp.n_vocab;
    for (int32_t done = 0; done < n;) {
        int32_t k = n - done < e->n_batch ? n - done : e->n_batch;
        for (int32_t i = 0; i < k; i++)
            e->eval_toks[i] = (engine_token){tokens[done + i], pos + done + i, 0, all_logits || done + i == n - 1,
                                             e->eval_no_eog};
        float *out = all_logits ? logits + (size_t)done * n_vocab : logits;
        if (decode(e, e->eval_toks, k, next ? NULL : out, next, err, err_size)) return -1;
        done += k;
    }
    return 0;
}

float *engine_logits_buffer(engine *e, int32_t rows) {
    int32_t have = 0;
    float *b = e->ops->out_buffer ? e->ops->out_buffer(e->be, &have) : NULL;
    return b && rows >= 1 && rows <= have ? b : NULL;
}

void engine_decode_ahead(engine *e, int on) {
    if (e->ops->ahead) e->ops->ahead(e->be, on);
}

int engine_eval(engine *e, const int32_t *tokens, int32_t n, int32_t pos, float *logits,
                int all_logits, char *err, size_t err_size) {
    return eval(e, tokens, n, pos, logits, all_logits, NULL, err, err_size);
}

int engine_eval_greedy(engine *e, const int32_t *tokens, int32_t n, int32_t pos, int32_t *next, char *err,
                       size_t err_size) {
    return eval(e, tokens, n, pos, NULL, 0, next, err, err_size);
}

/* --- sequences ----------------------------------------------------------------------------------- */

static int seq_bad(const engine *e, int32_t seq, char *err, size_t err_size) {
    if (seq >= 0 && seq < e->kv.n_seq) return 0;
    snprintf(err, err_size, "sequence %d outside 0..%d (-np)", seq, e->kv.n_seq - 1);
    return 1;
}

int32_t engine_seq_len(const engine *e, int32_t seq) {
    return seq >= 0 && seq < e->kv.n_seq ? e->kv.seqs[seq].len : 0;
}

int engine_seq_rm(engine *e, int32_t seq, int32_t p0, int32_t p1, char *err, size_t err_size) {
    if (seq_bad(e, seq, err, err_size)) return -1;
    int32_t len = e->kv.seqs[seq].len;
    if (p0 < 0 || (p1 >= 0 && p1 < len)) {
        snprintf(err, err_size, "sequence %d: only a tail can be removed ([%d, %d) of %d positions)", seq, p0, p1,
                 len);
        return -1;
    }
    if (p0 < len) kvcache_truncate(&e->kv, seq, p0);
    return 0;
}

int engine_seq_cp(engine *e, int32_t src, int32_t dst, int32_t p0, int32_t p1, char *err, size_t err_size) {
    if (seq_bad(e, src, err, err_size) || seq_bad(e, dst, err, err_size)) return -1;
    int32_t len = e->kv.seqs[src].len;
    if (p0 != 0) {
        snprintf(err, err_size, "sequence copy from position %d: copies start at 0", p0);
        return -1;
    }
    kvcache_share(&e->kv, src, dst, p1 < 0 || p1 > len ? len : p1);
    return 0;
}

void engine_seq_keep(engine *e, int32_t seq) {
    for (int32_t s = 0; s < e->kv.n_seq; s++)
        if (s != seq) kvcache_truncate(&e->kv, s, 0);
}

void engine_seq_free(engine *e, int32_t seq) {
    if (seq >= 0 && seq < e->kv.n_seq) kvcache_truncate(&e->kv, seq, 0);
}

/* --- KV state ------------------------------------------------------------------------------------ */

static int kv_io(engine *e, int32_t seq, int32_t layer, int32_t p0, int32_t n, float *k, float *v,
                 const float *ck, const float *cv, char *err, size_t err_size) {
    if (seq_bad(e, seq, err, err_size)) return -1;
    if (layer < 0 || layer >= e->model.hp.n_layer || p0 < 0 || n < 0 || p0 > e->kv.seqs[seq].len - n) {
        snprintf(err, err_size, "sequence %d: layer %d, positions [%d, %d) outside its %d positions", seq, layer,
                 p0, p0 + n, e->kv.seqs[seq].len);
        return -1;
    }
    int32_t cells[64];
    size_t row = (size_t)engine_kv_dim(e);
    for (int32_t done = 0; done < n;) {
        int32_t c = n - done < 64 ? n - done : 64;
        for (int32_t i = 0; i < c; i++) cells[i] = kvcache_cell(&e->kv, seq, p0 + done + i);
        int rc = ck ? e->ops->kv_set(e->be, layer, cells, c, ck + done * row, cv + done * row, err, err_size)
                    : e->ops->kv_get(e->be, layer, cells, c, k + done * row, v + done * row, err, err_size);
        if (rc) return -1;
        done += c;
    }
    return 0;
}

int engine_seq_kv_get(engine *e, int32_t seq, int32_t layer, int32_t p0, int32_t n, float *k, float *v,
                      char *err, size_t err_size) {
    return kv_io(e, seq, layer, p0, n, k, v, NULL, NULL, err, err_size);
}

int engine_seq_kv_set(engine *e, int32_t seq, int32_t layer, int32_t p0, int32_t n, const float *k,
                      const float *v, char *err, size_t err_size) {
    return kv_io(e, seq, layer, p0, n, NULL, NULL, k, v, err, err_size);
}

int engine_seq_alloc(engine *e, int32_t seq, int32_t n, char *err, size_t err_size) {
    if (seq_bad(e, seq, err, err_size)) return ENGINE_EPARAM;
    if (e->kv.seqs[seq].len || n < 0 || n > e->n_ctx_seq) {
        snprintf(err, err_size, "sequence %d: cannot allocate %d positions (holds %d, context %d)", seq, n,
                 e->kv.seqs[seq].len, e->n_ctx_seq);
        return ENGINE_EPARAM;
    }
    if (kvcache_pages_needed(&e->kv, seq, n) > e->kv.n_free) {
        snprintf(err, err_size, "KV cache full: %d positions need more than the %d free pages", n, e->kv.n_free);
        return ENGINE_EFULL;
    }
    kvcache_reserve(&e->kv, seq, n);
    e->kv.seqs[seq].len = n;
    return ENGINE_OK;
}
