/* The architecture registry and the loader every family shares: general.architecture picks the
 * family file's declaration (models/model_arch.h), the common ARCH.* keys are read and checked
 * against each other, then the family's tensor table is bound, each tensor checked for presence,
 * shape and a type mgi can dequantise before anything runs. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/model_arch.h"
#include "quant/quant.h"

/* Limits that keep every size product far from overflow; real models are well inside them. */
#define MODEL_MAX_EMBD (1 << 20)
#define MODEL_MAX_LAYER 4096
#define MODEL_MAX_FF (1 << 22)
#define MODEL_MAX_CTX (1 << 24)

static const model_arch *const registry[] = {
    &model_arch_llama, &model_arch_qwen2, &model_arch_qwen3, &model_arch_phi3, &model_arch_gemma2, &model_arch_gemma3,
};
enum { N_ARCH = sizeof registry / sizeof registry[0] };

const char *model_arch_list(void) {
    static char list[128];
    if (!list[0])
        for (int i = 0; i < N_ARCH; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", registry[i]->name);
    return list;
}

int model_fail(char *err, size_t err_size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && err_size) vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
    return -1;
}

int model_key_u32(const gguf_ctx *g, const char *arch, const char *suffix, int required, uint32_t lo, uint32_t hi,
                  int32_t *out, char *err, size_t err_size) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    int rc = gguf_get_u32(g, key, &v);
    if (rc == GGUF_ABSENT) {
        if (!required) return 0;
        return model_fail(err, err_size, "%s: key %s is missing (needed for the %s architecture)", gguf_path(g), key,
                          arch);
    }
    if (rc != GGUF_OK) {
        /* An integer of another width that does not fit is a range problem, not a type one. */
        const gguf_value *x = gguf_get(g, key);
        if (x->type == GGUF_TYPE_INT8 || x->type == GGUF_TYPE_INT16 || x->type == GGUF_TYPE_INT32 ||
            x->type == GGUF_TYPE_INT64)
            return model_fail(err, err_size, "%s: key %s = %lld is out of range [%u, %u]", gguf_path(g), key,
                              (long long)x->v.i64, lo, hi);
        if (x->type == GGUF_TYPE_UINT64)
            return model_fail(err, err_size, "%s: key %s = %llu is out of range [%u, %u]", gguf_path(g), key,
                              (unsigned long long)x->v.u64, lo, hi);
        return model_fail(err, err_size, "%s: key %s has the wrong type %s (expected an unsigned integer)",
                          gguf_path(g), key, gguf_type_name(x->type));
    }
    if (v < lo || v > hi)
        return model_fail(err, err_size, "%s: key %s = %u is out of range [%u, %u]", gguf_path(g), key, v, lo, hi);
    *out = (int32_t)v;
    return 0;
}

int model_key_f32(const gguf_ctx *g, const char *arch, const char *suffix, int required, float lo, int strict,
                  float *out, char *err, size_t err_size) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    float v;
    int rc = gguf_get_f32(g, key, &v);
    if (rc == GGUF_ABSENT) {
        if (!required) return 0;
        return model_fail(err, err_size, "%s: key %s is missing (needed for the %s architecture)", gguf_path(g), key,
                          arch);
    }
    if (rc != GGUF_OK)
        return model_fail(err, err_size, "%s: key %s has the wrong type (expected a float)", gguf_path(g), key);
    if (!isfinite(v) || v < lo || (strict && v == lo)) {
        if (lo == 0)
            return model_fail(err, err_size, "%s: key %s = %g must be a %s finite number", gguf_path(g), key, v,
                              strict ? "positive" : "non-negative");
        return model_fail(err, err_size, "%s: key %s = %g must be a finite number %s %g", gguf_path(g), key, v,
                          strict ? ">" : ">=", lo);
    }
    *out = v;
    return 0;
}

static const model_arch *find_arch(const gguf_ctx *g, char *err, size_t err_size) {
    if (gguf_n_tensors(g) == 0) {
        model_fail(err, err_size,
                   "%s has no tensors: it is a vocabulary-only file; give a model file with weights "
                   "(mgi tokenize works on vocabulary files)", gguf_path(g));
        return NULL;
    }
    const char *arch;
    int rc = gguf_get_str(g, "general.architecture", &arch);
    if (rc == GGUF_ABSENT) {
        model_fail(err, err_size, "%s: key general.architecture is missing; is this a model file?", gguf_path(g));
        return NULL;
    }
    if (rc != GGUF_OK) {
        model_fail(err, err_size, "%s: key general.architecture has the wrong type (expected a string)",
                   gguf_path(g));
        return NULL;
    }
    for (int i = 0; i < N_ARCH; i++)
        if (!strcmp(arch, registry[i]->name)) return registry[i];
    model_fail(err, err_size, "%s: architecture '%.64s' is not supported (mgi runs %s)", gguf_path(g), arch,
               model_arch_list());
    return NULL;
}

/* ARCH.rope.scaling.*: the type, its factor and YaRN's keys, as llama.cpp reads them (no type
 * key with a factor means linear). */
static int load_scaling(llama_hparams *hp, const gguf_ctx *g, char *err, size_t err_size) {
    const char *a = hp->arch;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    const char *type = "linear";
    int rc = gguf_get_str(g, key, &type);
    if (rc == GGUF_WRONG_TYPE)
        return model_fail(err, err_size, "%s: key %s has the wrong type (expected a string)", gguf_path(g), key);
    if (!strcmp(type, "none")) hp->rope_scaling = LLAMA_SCALING_NONE;
    else if (!strcmp(type, "linear")) hp->rope_scaling = LLAMA_SCALING_LINEAR;
    else if (!strcmp(type, "yarn")) hp->rope_scaling = LLAMA_SCALING_YARN;
    else
        return model_fail(err, err_size, "%s: key %s = '%.32s' is not a RoPE scaling mgi runs (none, linear, yarn)",
                          gguf_path(g), key, type);
    float factor = 0;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", a);
    if (gguf_get(g, key)) {
        if (model_key_f32(g, a, "rope.scaling.factor", 0, 0, 0, &factor, err, err_size)) return -1;
    } else if (model_key_f32(g, a, "rope.scale_linear", 0, 0, 0, &factor, err, err_size)) {
        return -1;
    }
    hp->rope_freq_scale = factor == 0 || hp->rope_scaling == LLAMA_SCALING_NONE ? 1.0f : 1.0f / factor;
    hp->n_ctx_orig = hp->n_ctx_train;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->rope_attn_factor = 1.0f;
    return model_key_u32(g, a, "rope.scaling.original_context_length", 0, 1, MODEL_MAX_CTX, &hp->n_ctx_orig, err,
                         err_size) ||
           model_key_f32(g, a, "rope.scaling.yarn_beta_fast", 0, 0, 0, &hp->yarn_beta_fast, err, err_size) ||
           model_key_f32(g, a, "rope.scaling.yarn_beta_slow", 0, 0, 0, &hp->yarn_beta_slow, err, err_size) ||
           model_key_f32(g, a, "rope.scaling.yarn_log_multiplier", 0, 0, 0, &hp->yarn_log_mul, err, err_size) ||
           model_key_f32(g, a, "rope.scaling.attn_factor", 0, 0, 1, &hp->rope_attn_factor, err, err_size)
               ? -1 : 0;
}

int llama_hparams_load(llama_hparams *hp, const gguf_ctx *g, char *err, size_t err_size) {
    memset(hp, 0, sizeof *hp);
    const model_arch *A = find_arch(g, err, err_size);
    if (!A) return -1;
    const char *a = hp->arch = A->name;
    if (model_key_u32(g, a, "embedding_length", 1, 1, MODEL_MAX_EMBD, &hp->n_embd, err, err_size) ||
        model_key_u32(g, a, "block_count", 1, 1, MODEL_MAX_LAYER, &hp->n_layer, err, err_size) ||
        model_key_u32(g, a, "attention.head_count", 1, 1, MODEL_MAX_EMBD, &hp->n_head, err, err_size) ||
        model_key_u32(g, a, "feed_forward_length", 1, 1, MODEL_MAX_FF, &hp->n_ff, err, err_size) ||
        model_key_u32(g, a, "context_length", 1, 1, MODEL_MAX_CTX, &hp->n_ctx_train, err, err_size))
        return -1;
    /* The head size: key_length when the file gives it (Mistral Nemo: 128 with n_embd 5120 and 32
     * heads), else n_embd / n_head, which must then divide evenly. */
    int32_t kl = 0, vl = 0;
    if (model_key_u32(g, a, "attention.key_length", 0, 1, 65536, &kl, err, err_size) ||
        model_key_u32(g, a, "attention.value_length", 0, 1, 65536, &vl, err, err_size))
        return -1;
    if (!kl && hp->n_embd % hp->n_head)
        return model_fail(err, err_size, "%s: %s.attention.head_count = %d does not divide %s.embedding_length = %d "
                          "(and there is no %s.attention.key_length)", gguf_path(g), a, hp->n_head, a, hp->n_embd, a);
    hp->n_head_kv = hp->n_head;
    if (model_key_u32(g, a, "attention.head_count_kv", 0, 1, MODEL_MAX_EMBD, &hp->n_head_kv, err, err_size))
        return -1;
    if (hp->n_head % hp->n_head_kv)
        return model_fail(err, err_size, "%s: %s.attention.head_count_kv = %d does not divide %s.attention.head_count = %d",
                          gguf_path(g), a, hp->n_head_kv, a, hp->n_head);
    hp->head_dim = kl ? kl : hp->n_embd / hp->n_head;
    if (vl && vl != hp->head_dim)
        return model_fail(err, err_size, "%s: %s.attention.value_length = %d differs from the key head size %d; mgi "
                          "runs equal key and value head sizes only", gguf_path(g), a, vl, hp->head_dim);
    if ((int64_t)hp->n_head * hp->head_dim > MODEL_MAX_EMBD * 4)
        return model_fail(err, err_size, "%s: %d heads of %d values are too wide", gguf_path(g), hp->n_head,
                          hp->head_dim);
    hp->n_rot = hp->head_dim;
    if (model_key_u32(g, a, "rope.dimension_count", 0, 2, MODEL_MAX_EMBD, &hp->n_rot, err, err_size)) return -1;
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return model_fail(err, err_size, "%s: %s.rope.dimension_count = %d must be even and at most the head size %d",
                          gguf_path(g), a, hp->n_rot, hp->head_dim);
    hp->rope_base = 10000.0f;
    hp->rms_eps = 1e-5f;
    if (model_key_f32(g, a, "rope.freq_base", 0, 0, 1, &hp->rope_base, err, err_size) ||
        model_key_f32(g, a, "attention.layer_norm_rms_epsilon", 1, 0, 1, &hp->rms_eps, err, err_size) ||
        load_scaling(hp, g, err, err_size))
        return -1;
    hp->rope_kind = A->rope_kind;
    hp->act = A->act;
    hp->embd_scale = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->rope_base_swa = hp->rope_base;
    if (A->load_keys && A->load_keys(hp, g, err, err_size)) return -1;
    if (hp->swa_pattern && hp->n_swa < 1)
        return model_fail(err, err_size, "%s: %s.attention.sliding_window = %d must be at least 1", gguf_path(g), a,
                          hp->n_swa);
    return 0;
}

int llama_layer_is_swa(const llama_hparams *hp, int32_t l) {
    return hp->swa_pattern > 0 && hp->n_swa > 0 && l % hp->swa_pattern < hp->swa_pattern - 1;
}

/* --- tensors ------------------------------------------------------------------------------------- */

static int64_t dim_of(const llama_hparams *hp, model_dim d) {
    int64_t q = (int64_t)hp->n_head * hp->head_dim, kv = (int64_t)hp->n_head_kv * hp->head_dim;
    switch (d) {
    case MODEL_DIM_ONE: return 0;
    case MODEL_DIM_EMBD: return hp->n_embd;
    case MODEL_DIM_Q: return q;
    case MODEL_DIM_KV: return kv;
    case MODEL_DIM_QKV: return q + 2 * kv;
    case MODEL_DIM_FF: return hp->n_ff;
    case MODEL_DIM_FF2: return 2 * (int64_t)hp->n_ff;
    case MODEL_DIM_VOCAB: return hp->n_vocab;
    case MODEL_DIM_HEAD: return hp->head_dim;
    case MODEL_DIM_ROT2: return hp->n_rot / 2;
    }
    return -1;
}

/* Checks a tensor's shape [ne0, ne1] (ne1 == 0: a 1-D vector of ne0) and type. */
static int check_tensor(const gguf_ctx *g, const gguf_tensor *t, int64_t ne0, int64_t ne1, char *err, size_t err_size) {
    int64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1) {
        if (ne1)
            return model_fail(err, err_size, "%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                              gguf_path(g), t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                              (long long)t->ne[3], (long long)ne0, (long long)ne1);
        return model_fail(err, err_size, "%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld]",
                          gguf_path(g), t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], (long long)ne0);
    }
    if (!quant_is_supported(t->type))
        return model_fail(err, err_size, "%s: tensor %s has type %s, which mgi cannot read (supported: %s)",
                          gguf_path(g), t->name, quant_type_name(t->type), quant_supported_list());
    const quant_traits *tr = quant_traits_of(t->type);
    size_t row_bytes = quant_row_bytes(t->type, ne0);
    if (!tr || ne0 % tr->block_elems || row_bytes == 0 || !t->data ||
        (uint64_t)row_bytes * (uint64_t)want1 > t->size)
        return model_fail(err, err_size, "%s: tensor %s: %lld elements per row do not fit type %s's blocks or its data",
                          gguf_path(g), t->name, (long long)ne0, quant_type_name(t->type));
    return 0;
}

/* Rows [r0, r0 + n) of t as a weight. */
static void bind_rows(llama_weight *w, const gguf_tensor *t, int64_t n_cols, int64_t r0, int64_t n) {
    w->name = t->name;
    w->type = t->type;
    w->n_cols = n_cols;
    w->n_rows = n;
    w->row_bytes = quant_row_bytes(t->type, n_cols);
    w->data = (const uint8_t *)t->data + (size_t)r0 * w->row_bytes;
}

/* A vector as f32, refused when any value is NaN or infinite (it would poison every activation
 * after it, far from the cause). */
static float *load_vector(const gguf_ctx *g, const gguf_tensor *t, int64_t n, char *err, size_t err_size) {
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        model_fail(err, err_size, "out of memory loading tensor %s", t->name);
        return NULL;
    }
    char qerr[256];
    if (quant_dequant_row(t->type, t->data, v, n, qerr, sizeof qerr)) {
        model_fail(err, err_size, "%s: tensor %s: %s", gguf_path(g), t->name, qerr);
        free(v);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            model_fail(err, err_size, "%s: tensor %s has a non-finite value (%g) at index %lld; the file is damaged",
                       gguf_path(g), t->name, v[i], (long long)i);
            free(v);
            return NULL;
        }
    return v;
}

static int bind_one(llama_model *m, llama_layer *L, const model_tensor *s, const char *name, const gguf_ctx *g,
                    char *err, size_t err_size) {
    const llama_hparams *hp = &m->hp;
    char *base = L ? (char *)L : (char *)m;
    /* A separate part whose slot a fused tensor already filled. */
    if (s->bind == MODEL_BIND_WEIGHT && ((llama_weight *)(base + s->offset))->data) return 0;
    if (s->bind == MODEL_BIND_VECTOR && *(float **)(base + s->offset)) return 0;
    const gguf_tensor *t = gguf_get_tensor(g, name);
    if (!t) {
        if (s->flags & MODEL_T_OPTIONAL) return 0;
        return model_fail(err, err_size, "%s: tensor %s is missing (needed for the %s architecture)", gguf_path(g),
                          name, hp->arch);
    }
    int64_t ne0 = dim_of(hp, s->ne0), ne1 = dim_of(hp, s->ne1);
    if (check_tensor(g, t, ne0, ne1, err, err_size)) return -1;
    int64_t q = dim_of(hp, MODEL_DIM_Q), kv = dim_of(hp, MODEL_DIM_KV);
    switch (s->bind) {
    case MODEL_BIND_WEIGHT: bind_rows((llama_weight *)(base + s->offset), t, ne0, 0, ne1); break;
    case MODEL_BIND_VECTOR: {
        float *v = load_vector(g, t, ne0, err, err_size);
        if (!v) return -1;
        *(float **)(base + s->offset) = v;
        break;
    }
    case MODEL_BIND_QKV:
        bind_rows(&L->wq, t, ne0, 0, q);
        bind_rows(&L->wk, t, ne0, q, kv);
        bind_rows(&L->wv, t, ne0, q + kv, kv);
        m->hp.fused_qkv = 1;
        break;
    case MODEL_BIND_GATE_UP:
        bind_rows(&L->w_gate, t, ne0, 0, hp->n_ff);
        bind_rows(&L->w_up, t, ne0, hp->n_ff, hp->n_ff);
        m->hp.fused_gate_up = 1;
        break;
    }
    return 0;
}

/* Every layer has its attention and FFN matrices, separate or fused. */
static int check_layer(const llama_model *m, int32_t l, const gguf_ctx *g, char *err, size_t err_size) {
    const llama_layer *L = &m->layers[l];
    const struct { const llama_weight *w; const char *name, *fused; } need[] = {
        {&L->wq, "attn_q", "attn_qkv"}, {&L->wk, "attn_k", "attn_qkv"}, {&L->wv, "attn_v", "attn_qkv"},
        {&L->wo, "attn_output", NULL},  {&L->w_gate, "ffn_gate", "ffn_up (fused, 2 x n_ff rows)"},
        {&L->w_up, "ffn_up", NULL},     {&L->w_down, "ffn_down", NULL},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!need[i].w->data)
            return model_fail(err, err_size, "%s: tensor blk.%d.%s.weight is missing (needed for the %s architecture%s%s)",
                              gguf_path(g), l, need[i].name, m->hp.arch, need[i].fused ? "; or its fused form blk.N." : "",
                              need[i].fused ? need[i].fused : "");
    return 0;
}

static const model_arch *arch_of(const char *name) {
    for (int i = 0; i < N_ARCH; i++)
        if (name && !strcmp(name, registry[i]->name)) return registry[i];
    return NULL;
}

int llama_model_load(llama_model *m, const gguf_ctx *g, char *err, size_t err_size) {
    memset(m, 0, sizeof *m);
    llama_hparams *hp = &m->hp;
    if (llama_hparams_load(hp, g, err, err_size)) return -1;
    const model_arch *A = arch_of(hp->arch);
    const gguf_tensor *emb = gguf_get_tensor(g, "token_embd.weight");
    if (!emb)
        return model_fail(err, err_size, "%s: tensor token_embd.weight is missing (needed for the %s architecture)",
                          gguf_path(g), hp->arch);
    if (emb->ne[1] < 1 || emb->ne[1] > INT32_MAX)
        return model_fail(err, err_size, "%s: tensor token_embd.weight has %lld rows, expected 1..%d (the vocabulary)",
                          gguf_path(g), (long long)emb->ne[1], INT32_MAX);
    hp->n_vocab = (int32_t)emb->ne[1];
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) {
        model_fail(err, err_size, "out of memory for %d layers", hp->n_layer);
        goto bad;
    }
    for (int i = 0; i < A->n_tensors; i++) {
        const model_tensor *s = &A->tensors[i];
        char name[96];
        if (!(s->flags & MODEL_T_LAYER)) {
            if (bind_one(m, NULL, s, s->name, g, err, err_size)) goto bad;
            continue;
        }
        for (int32_t l = 0; l < hp->n_layer; l++) {
            snprintf(name, sizeof name, s->name, l);
            if (bind_one(m, &m->layers[l], s, name, g, err, err_size)) goto bad;
        }
    }
    for (int32_t l = 0; l < hp->n_layer; l++)
        if (check_layer(m, l, g, err, err_size)) goto bad;
    if (!m->output.data) {
        m->output = m->tok_embd;
        m->tied_output = 1;
    }
    return 0;
bad:
    llama_model_free(m);
    return -1;
}

void llama_model_free(llama_model *m) {
    if (!m) return;
    free(m->output_norm);
    free(m->output_b);
    free(m->rope_freqs);
    free(m->rope_long);
    free(m->rope_short);
    if (m->layers)
        for (int l = 0; l < m->hp.n_layer; l++) {
            llama_layer *L = &m->layers[l];
            float *v[] = {L->attn_norm, L->bq, L->bk, L->bv, L->bo, L->q_norm, L->k_norm, L->attn_post_norm,
                          L->ffn_norm, L->ffn_post_norm};
            for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) free(v[i]);
        }
    free(m->layers);
    memset(m, 0, sizeof *m);
}

const float *model_rope_factors(const llama_model *m, int32_t n_ctx_seq) {
    if (m->rope_freqs) return m->rope_freqs;
    /* llama.cpp compares its per-sequence context, which it rounds up to a multiple of 256. */
    int64_t padded = ((int64_t)n_ctx_seq + 255) / 256 * 256;
    if (m->rope_long && padded > m->hp.n_ctx_orig) return m->rope_long;
    return m->rope_short;
}

const char *model_non_llama_feature(const llama_model *m) {
    const llama_hparams *hp = &m->hp;
    /* The most telling feature first: it names what a GPU port would have to add. */
    if (hp->swa_pattern) return "sliding-window attention";
    if (hp->attn_softcap > 0 || hp->final_softcap > 0) return "softcapping";
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const llama_layer *L = &m->layers[l];
        if (L->q_norm || L->k_norm) return "per-head Q/K RMSNorm";
        if (L->attn_post_norm || L->ffn_post_norm) return "post-attention / post-FFN norms";
        if (L->bq || L->bk || L->bv || L->bo) return "attention biases";
    }
    if (hp->fused_qkv || hp->fused_gate_up) return "fused QKV or gate/up tensors";
    if (m->rope_long || m->rope_short) return "LongRoPE factors";
    if (m->rope_freqs) return "RoPE frequency factors (rope_freqs.weight)";
    if (hp->rope_freq_scale != 1.0f || hp->rope_scaling == LLAMA_SCALING_YARN || hp->rope_attn_factor != 1.0f)
        return "RoPE scaling (rope.scaling.*)";
    if (hp->head_dim * hp->n_head != hp->n_embd) return "head size (attention.key_length) other than n_embd / n_head";
    if (hp->rope_kind != LLAMA_ROPE_NORM) return "NEOX RoPE (pairs i and i + n_rot/2)";
    if (hp->act != LLAMA_ACT_SILU) return "GELU-gated FFN";
    if (hp->embd_scale != 1.0f) return "input scaling";
    if (fabsf(hp->attn_scale * sqrtf((float)hp->head_dim) - 1.0f) > 1e-6f) return "attention scale";
    if (m->output_b) return "output bias";
    return NULL;
}

int model_has_qk_norm(const llama_model *m) {
    for (int32_t l = 0; l < m->hp.n_layer; l++)
        if (m->layers[l].q_norm || m->layers[l].k_norm) return 1;
    return 0;
}

const char *model_gpu_missing_feature(const llama_model *m) {
    /* The CUDA backend's general layer (engine/cuda_layer.c) runs every recipe the CPU reference
     * does: biases, per-head Q/K norms, NEOX RoPE, rope_freqs, LongRoPE, linear and YaRN scaling,
     * any head size and attention scale, fused QKV and gate/up tensors, and Gemma's sliding
     * windows (with their own RoPE base), attention and logit softcaps, post norms, GELU gate and
     * input scale. Not the one combination no architecture has: it adds bo to the residual
     * itself (a row split's parts hold partial products), so bo cannot go under a post norm. */
    for (int32_t l = 0; l < m->hp.n_layer; l++)
        if (m->layers[l].bo && m->layers[l].attn_post_norm) return "attention output bias under a post-attention norm";
    return NULL;
}

int llama_weight_row(const llama_weight *w, int64_t r, float *dst, char *err, size_t err_size) {
    if (r < 0 || r >= w->n_rows)
        return model_fail(err, err_size, "row %lld of tensor %s is out of range (%lld rows)", (long long)r, w->name,
                          (long long)w->n_rows);
    return quant_dequant_row(w->type, w->data + (size_t)r * w->row_bytes, dst, w->n_cols, err, err_size);
}

uint64_t llama_kv_bytes(const llama_hparams *hp, int64_t n_pos, uint32_t elem_bytes) {
    if (n_pos < 0 || hp->n_layer < 0 || hp->n_head_kv < 0 || hp->head_dim < 0) return UINT64_MAX;
    /* Each factor is below 2^32, so every step is checked against the next multiplication. */
    const uint64_t f[] = {2, (uint64_t)hp->n_layer, (uint64_t)hp->n_head_kv, (uint64_t)hp->head_dim, elem_bytes};
    uint64_t b = (uint64_t)n_pos;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i] && b > UINT64_MAX / f[i]) return UINT64_MAX;
        b *= f[i];
    }
    return b;
}

int llama_kv_check(const llama_hparams *hp, int64_t n_pos, uint32_t elem_bytes, uint64_t mem_bytes, char *err,
                   size_t err_size) {
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
        return model_fail(err, err_size, "KV cache for %lld positions overflows 64 bits (%d layers x %d KV heads x %d); "
                          "use a smaller -c (at most %llu fit in %llu bytes of memory)", (long long)n_pos,
                          hp->n_layer, hp->n_head_kv, hp->head_dim, (unsigned long long)fit,
                          (unsigned long long)mem_bytes);
    return model_fail(err, err_size, "KV cache for %lld positions needs %llu bytes (%.1f GiB) but the machine has "
                      "%llu bytes (%.1f GiB) of memory; use -c %llu or less", (long long)n_pos,
                      (unsigned long long)need, need / 1073741824.0, (unsigned long long)mem_bytes,
                      mem_bytes / 1073741824.0, (unsigned long long)fit);
}
