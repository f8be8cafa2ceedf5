/* The Llama architecture: hyperparameters from llama.* keys and tensor binding by name, each
 * tensor checked for presence, shape and a type mgi can dequantise before anything runs. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/llama.h"
#include "quant/quant.h"

/* Limits that keep every size product far from overflow; real models are well inside them. */
#define LLAMA_MAX_EMBD (1 << 20)
#define LLAMA_MAX_LAYER 4096
#define LLAMA_MAX_FF (1 << 22)
#define LLAMA_MAX_CTX (1 << 24)

static int fail(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t err_size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && err_size) vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
    return -1;
}

/* A required or optional u32 key within [lo, hi]. Absent and optional: *out keeps its default. */
static int get_u32(const gguf_ctx *g, const char *key, int required, uint32_t lo, uint32_t hi,
                   int32_t *out, char *err, size_t err_size) {
    uint32_t v;
    int rc = gguf_get_u32(g, key, &v);
    if (rc == GGUF_ABSENT) {
        if (!required) return 0;
        return fail(err, err_size, "%s: key %s is missing (needed for the llama architecture)",
                    gguf_path(g), key);
    }
    if (rc != GGUF_OK) {
        /* An integer of another width that does not fit is a range problem, not a type one. */
        const gguf_value *x = gguf_get(g, key);
        if (x->type == GGUF_TYPE_INT8 || x->type == GGUF_TYPE_INT16 || x->type == GGUF_TYPE_INT32 ||
            x->type == GGUF_TYPE_INT64)
            return fail(err, err_size, "%s: key %s = %lld is out of range [%u, %u]", gguf_path(g), key,
                        (long long)x->v.i64, lo, hi);
        if (x->type == GGUF_TYPE_UINT64)
            return fail(err, err_size, "%s: key %s = %llu is out of range [%u, %u]", gguf_path(g), key,
                        (unsigned long long)x->v.u64, lo, hi);
        return fail(err, err_size, "%s: key %s has the wrong type %s (expected an unsigned integer)",
                    gguf_path(g), key, gguf_type_name(x->type));
    }
    if (v < lo || v > hi)
        return fail(err, err_size, "%s: key %s = %u is out of range [%u, %u]", gguf_path(g), key,
                    v, lo, hi);
    *out = (int32_t)v;
    return 0;
}

static int get_f32(const gguf_ctx *g, const char *key, int required, float *out, char *err,
                   size_t err_size) {
    float v;
    int rc = gguf_get_f32(g, key, &v);
    if (rc == GGUF_ABSENT) {
        if (!required) return 0;
        return fail(err, err_size, "%s: key %s is missing (needed for the llama architecture)",
                    gguf_path(g), key);
    }
    if (rc != GGUF_OK)
        return fail(err, err_size, "%s: key %s has the wrong type (expected a float)", gguf_path(g), key);
    if (!isfinite(v) || v <= 0)
        return fail(err, err_size, "%s: key %s = %g must be a positive finite number", gguf_path(g),
                    key, v);
    *out = v;
    return 0;
}

static int check_arch(const gguf_ctx *g, char *err, size_t err_size) {
    if (gguf_n_tensors(g) == 0)
        return fail(err, err_size,
                    "%s has no tensors: it is a vocabulary-only file; give a model file with weights "
                    "(mgi tokenize works on vocabulary files)", gguf_path(g));
    const char *arch;
    int rc = gguf_get_str(g, "general.architecture", &arch);
    if (rc == GGUF_ABSENT)
        return fail(err, err_size, "%s: key general.architecture is missing; is this a model file?",
                    gguf_path(g));
    if (rc != GGUF_OK)
        return fail(err, err_size, "%s: key general.architecture has the wrong type (expected a string)",
                    gguf_path(g));
    if (strcmp(arch, "llama"))
        return fail(err, err_size, "%s: architecture '%.64s' is not supported (mgi runs 'llama')",
                    gguf_path(g), arch);
    return 0;
}

int llama_hparams_load(llama_hparams *hp, const gguf_ctx *g, char *err, size_t err_size) {
    memset(hp, 0, sizeof *hp);
    if (check_arch(g, err, err_size)) return -1;
    if (get_u32(g, "llama.embedding_length", 1, 1, LLAMA_MAX_EMBD, &hp->n_embd, err, err_size) ||
        get_u32(g, "llama.block_count", 1, 1, LLAMA_MAX_LAYER, &hp->n_layer, err, err_size) ||
        get_u32(g, "llama.attention.head_count", 1, 1, LLAMA_MAX_EMBD, &hp->n_head, err, err_size) ||
        get_u32(g, "llama.feed_forward_length", 1, 1, LLAMA_MAX_FF, &hp->n_ff, err, err_size) ||
        get_u32(g, "llama.context_length", 1, 1, LLAMA_MAX_CTX, &hp->n_ctx_train, err, err_size))
        return -1;
    hp->n_head_kv = hp->n_head;
    if (get_u32(g, "llama.attention.head_count_kv", 0, 1, LLAMA_MAX_EMBD, &hp->n_head_kv, err, err_size))
        return -1;
    if (hp->n_embd % hp->n_head)
        return fail(err, err_size,
                    "%s: llama.attention.head_count = %d does not divide llama.embedding_length = %d",
                    gguf_path(g), hp->n_head, hp->n_embd);
    if (hp->n_head % hp->n_head_kv)
        return fail(err, err_size,
                    "%s: llama.attention.head_count_kv = %d does not divide llama.attention.head_count = %d",
                    gguf_path(g), hp->n_head_kv, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    hp->n_rot = hp->head_dim;
    if (get_u32(g, "llama.rope.dimension_count", 0, 2, LLAMA_MAX_EMBD, &hp->n_rot, err, err_size))
        return -1;
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return fail(err, err_size,
                    "%s: llama.rope.dimension_count = %d must be even and at most the head size %d",
                    gguf_path(g), hp->n_rot, hp->head_dim);
    hp->rope_base = 10000.0f;
    if (get_f32(g, "llama.rope.freq_base", 0, &hp->rope_base, err, err_size)) return -1;
    hp->rms_eps = 1e-5f;
    if (get_f32(g, "llama.attention.layer_norm_rms_epsilon", 1, &hp->rms_eps, err, err_size)) return -1;
    return 0;
}

/* Finds a tensor and checks its shape [ne0, ne1] (ne1 == 0: a 1-D vector of ne0). */
static const gguf_tensor *find_checked(const gguf_ctx *g, const char *name, int64_t ne0, int64_t ne1,
                                       char *err, size_t err_size) {
    const gguf_tensor *t = gguf_get_tensor(g, name);
    if (!t) {
        fail(err, err_size, "%s: tensor %s is missing (needed for the llama architecture)",
             gguf_path(g), name);
        return NULL;
    }
    int64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1) {
        if (ne1)
            fail(err, err_size, "%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                 gguf_path(g), name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                 (long long)t->ne[3], (long long)ne0, (long long)ne1);
        else
            fail(err, err_size, "%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld]",
                 gguf_path(g), name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                 (long long)t->ne[3], (long long)ne0);
        return NULL;
    }
    if (!quant_is_supported(t->type)) {
        fail(err, err_size, "%s: tensor %s has type %s, which mgi cannot read (supported: %s)",
             gguf_path(g), name, quant_type_name(t->type), quant_supported_list());
        return NULL;
    }
    const quant_traits *tr = quant_traits_of(t->type);
    size_t row_bytes = quant_row_bytes(t->type, ne0);
    if (!tr || ne0 % tr->block_elems || row_bytes == 0 || !t->data ||
        (uint64_t)row_bytes * (uint64_t)want1 > t->size) {
        fail(err, err_size, "%s: tensor %s: %lld elements per row do not fit type %s's blocks or its data",
             gguf_path(g), name, (long long)ne0, quant_type_name(t->type));
        return NULL;
    }
    return t;
}

static int bind_weight(llama_weight *w, const gguf_ctx *g, const char *name, int64_t n_cols,
                       int64_t n_rows, char *err, size_t err_size) {
    const gguf_tensor *t = find_checked(g, name, n_cols, n_rows, err, err_size);
    if (!t) return -1;
    w->name = t->name;
    w->type = t->type;
    w->n_cols = n_cols;
    w->n_rows = n_rows;
    w->row_bytes = quant_row_bytes(t->type, n_cols);
    w->data = t->data;
    return 0;
}

/* A norm vector as f32, refused when any value is NaN or infinite (it would poison every
 * activation after it, far from the cause). */
static float *load_norm(const gguf_ctx *g, const char *name, int64_t n, char *err, size_t err_size) {
    const gguf_tensor *t = find_checked(g, name, n, 0, err, err_size);
    if (!t) return NULL;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        fail(err, err_size, "out of memory loading tensor %s", name);
        return NULL;
    }
    char qerr[256];
    if (quant_dequant_row(t->type, t->data, v, n, qerr, sizeof qerr)) {
        fail(err, err_size, "%s: tensor %s: %s", gguf_path(g), name, qerr);
        free(v);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            fail(err, err_size, "%s: tensor %s has a non-finite value (%g) at index %lld; the file is damaged",
                 gguf_path(g), name, v[i], (long long)i);
            free(v);
            return NULL;
        }
    return v;
}

int llama_model_load(llama_model *m, const gguf_ctx *g, char *err, size_t err_size) {
    memset(m, 0, sizeof *m);
    llama_hparams *hp = &m->hp;
    if (llama_hparams_load(hp, g, err, err_size)) return -1;

    const gguf_tensor *emb = gguf_get_tensor(g, "token_embd.weight");
    if (!emb)
        return fail(err, err_size, "%s: tensor token_embd.weight is missing (needed for the llama architecture)",
                    gguf_path(g));
    if (emb->ne[1] < 1 || emb->ne[1] > INT32_MAX)
        return fail(err, err_size, "%s: tensor token_embd.weight has %lld rows, expected 1..%d (the vocabulary)",
                    gguf_path(g), (long long)emb->ne[1], INT32_MAX);
    hp->n_vocab = (int32_t)emb->ne[1];
    int64_t n_embd = hp->n_embd, hd = hp->head_dim;
    int64_t n_q = hp->n_head * hd, n_kv = hp->n_head_kv * hd;
    if (bind_weight(&m->tok_embd, g, "token_embd.weight", n_embd, hp->n_vocab, err, err_size)) goto bad;
    if (!(m->output_norm = load_norm(g, "output_norm.weight", n_embd, err, err_size))) goto bad;
    if (gguf_get_tensor(g, "output.weight")) {
        if (bind_weight(&m->output, g, "output.weight", n_embd, hp->n_vocab, err, err_size)) goto bad;
    } else {
        m->output = m->tok_embd;
        m->tied_output = 1;
    }
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) {
        fail(err, err_size, "out of memory for %d layers", hp->n_layer);
        goto bad;
    }
    for (int l = 0; l < hp->n_layer; l++) {
        llama_layer *L = &m->layers[l];
        char name[64];
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s, l), name)
        if (!(L->attn_norm = load_norm(g, NAME("attn_norm.weight"), n_embd, err, err_size)) ||
            bind_weight(&L->wq, g, NAME("attn_q.weight"), n_embd, n_q, err, err_size) ||
            bind_weight(&L->wk, g, NAME("attn_k.weight"), n_embd, n_kv, err, err_size) ||
            bind_weight(&L->wv, g, NAME("attn_v.weight"), n_embd, n_kv, err, err_size) ||
            bind_weight(&L->wo, g, NAME("attn_output.weight"), n_q, n_embd, err, err_size) ||
            !(L->ffn_norm = load_norm(g, NAME("ffn_norm.weight"), n_embd, err, err_size)) ||
            bind_weight(&L->w_gate, g, NAME("ffn_gate.weight"), n_embd, hp->n_ff, err, err_size) ||
            bind_weight(&L->w_up, g, NAME("ffn_up.weight"), n_embd, hp->n_ff, err, err_size) ||
            bind_weight(&L->w_down, g, NAME("ffn_down.weight"), hp->n_ff, n_embd, err, err_size))
            goto bad;
#undef NAME
    }
    return 0;
bad:
    llama_model_free(m);
    return -1;
}

void llama_model_free(llama_model *m) {
    if (!m) return;
    free(m->output_norm);
    if (m->layers)
        for (int l = 0; l < m->hp.n_layer; l++) {
            free(m->layers[l].attn_norm);
            free(m->layers[l].ffn_norm);
        }
    free(m->layers);
    memset(m, 0, sizeof *m);
}

int llama_weight_row(const llama_weight *w, int64_t r, float *dst, char *err, size_t err_size) {
    if (r < 0 || r >= w->n_rows)
        return fail(err, err_size, "row %lld of tensor %s is out of range (%lld rows)", (long long)r,
                    w->name, (long long)w->n_rows);
    return quant_dequant_row(w->type, w->data + (size_t)r * w->row_bytes, dst, w->n_cols, err, err_size);
}

uint64_t llama_kv_bytes(const llama_hparams *hp, int64_t n_pos, uint32_t elem_bytes) {
    if (n_pos < 0 || hp->n_layer < 0 || hp->n_head_kv < 0 || hp->head_dim < 0) return UINT64_MAX;
    /* Each factor is below 2^32, so every step is checked against the next multiplication. */
    const uint64_t f[] = {2, (uint64_t)hp->n_layer, (uint64_t)hp->n_head_kv, (uint64_t)hp->head_dim,
                          elem_bytes};
    uint64_t b = (uint64_t)n_pos;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i] && b > UINT64_MAX / f[i]) return UINT64_MAX;
        b *= f[i];
    }
    return b;
}

int llama_kv_check(const llama_hparams *hp, int64_t n_pos, uint32_t elem_bytes, uint64_t mem_bytes,
                   char *err, size_t err_size) {
    if (!mem_bytes) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages <= 0 || page <= 0) return 0;   /* unknown: let the allocation decide */
        mem_bytes = (uint64_t)pages * (uint64_t)page;
    }
    uint64_t need = llama_kv_bytes(hp, n_pos, elem_bytes);
    if (need <= mem_bytes) return 0;
    uint64_t per_pos = llama_kv_bytes(hp, 1, elem_bytes);
    uint64_t fit = per_pos && per_pos != UINT64_MAX ? mem_bytes / per_pos : 0;
    if (need == UINT64_MAX)
        return fail(err, err_size, "KV cache for %lld positions overflows 64 bits (%d layers x %d KV heads x %d); "
                    "use a smaller -c (at most %llu fit in %llu bytes of memory)", (long long)n_pos,
                    hp->n_layer, hp->n_head_kv, hp->head_dim, (unsigned long long)fit,
                    (unsigned long long)mem_bytes);
    return fail(err, err_size, "KV cache for %lld positions needs %llu bytes (%.1f GiB) but the machine has "
                "%llu bytes (%.1f GiB) of memory; use -c %llu or less", (long long)n_pos,
                (unsigned long long)need, need / 1073741824.0, (unsigned long long)mem_bytes,
                mem_bytes / 1073741824.0, (unsigned long long)fit);
}
