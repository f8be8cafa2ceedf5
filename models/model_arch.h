/* What one architecture family file declares, for models/model.c's loader: the tensors with their
 * shapes (required or optional, where each binds in llama_model / llama_layer) and the recipe
 * (RoPE kind, activation, and a hook for the family's own keys: windows, softcaps, scales).
 * Internal to models/. */
#ifndef MGI_MODELS_MODEL_ARCH_H
#define MGI_MODELS_MODEL_ARCH_H

#include <stddef.h>

#include "models/model.h"

/* A tensor dimension, in terms of the hyperparameters. */
typedef enum {
    MODEL_DIM_ONE = 0,  /* the second dimension of a vector */
    MODEL_DIM_EMBD,     /* n_embd */
    MODEL_DIM_Q,        /* n_head * head_dim */
    MODEL_DIM_KV,       /* n_head_kv * head_dim */
    MODEL_DIM_QKV,      /* Q + 2 KV: fused attn_qkv */
    MODEL_DIM_FF,       /* n_ff */
    MODEL_DIM_FF2,      /* 2 n_ff: fused gate and up */
    MODEL_DIM_VOCAB,    /* n_vocab */
    MODEL_DIM_HEAD,     /* head_dim */
    MODEL_DIM_ROT2,     /* n_rot / 2: one RoPE factor per pair */
} model_dim;

/* How a tensor binds. */
typedef enum {
    MODEL_BIND_WEIGHT,   /* a llama_weight at offset */
    MODEL_BIND_VECTOR,   /* a float * at offset, dequantised and checked finite */
    MODEL_BIND_QKV,      /* fused: wq, wk, wv of the layer as runs of its rows */
    MODEL_BIND_GATE_UP,  /* fused: w_gate (first n_ff rows) and w_up of the layer */
} model_bind;

enum {
    MODEL_T_OPTIONAL = 1,  /* absent is fine: the recipe step is skipped */
    MODEL_T_LAYER = 2,     /* per layer: name has one %d, offset is into llama_layer */
};

typedef struct {
    const char *name;      /* "output_norm.weight", or "blk.%d.attn_q.weight" with MODEL_T_LAYER */
    model_dim ne0, ne1;    /* ne1 MODEL_DIM_ONE: a vector of ne0 */
    model_bind bind;
    size_t offset;         /* of the slot in llama_model or llama_layer (unused for fused binds) */
    int flags;
} model_tensor;

typedef struct {
    const char *name;                /* general.architecture */
    llama_rope_kind rope_kind;
    llama_act act;
    const model_tensor *tensors;     /* bound in order; a fused tensor before its separate parts,
                                      * which are then skipped (their slots are bound) */
    int n_tensors;
    /* The family's own keys and fixed choices, after the common keys are read (hp->arch is set);
     * NULL when it has none. 0 or -1 with a message naming the key. */
    int (*load_keys)(llama_hparams *hp, const gguf_ctx *g, char *err, size_t err_size);
} model_arch;

/* Table rows: a model-level tensor bound at llama_model's field, a per-layer one at llama_layer's. */
#define MODEL_T(name, d0, d1, bind, field, flags) {name, d0, d1, bind, offsetof(llama_model, field), flags}
#define MODEL_L(name, d0, d1, bind, field, flags) \
    {name, d0, d1, bind, offsetof(llama_layer, field), MODEL_T_LAYER | (flags)}
#define MODEL_N(table) ((int)(sizeof table / sizeof table[0]))

/* Helpers for the family files (models/model.c). */
int model_fail(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A u32 key ARCH.suffix within [lo, hi]; absent and optional: *out keeps its default. */
int model_key_u32(const gguf_ctx *g, const char *arch, const char *suffix, int required, uint32_t lo,
                  uint32_t hi, int32_t *out, char *err, size_t err_size);
/* A float key ARCH.suffix that must be finite and >= lo (and > lo when strict). */
int model_key_f32(const gguf_ctx *g, const char *arch, const char *suffix, int required, float lo, int strict,
                  float *out, char *err, size_t err_size);

/* The families (models/llama.c, models/qwen.c, models/phi3.c, models/gemma.c). */
extern const model_arch model_arch_llama, model_arch_qwen2, model_arch_qwen3, model_arch_phi3,
    model_arch_gemma2, model_arch_gemma3;

#endif
