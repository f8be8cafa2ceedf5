/* A decoder-only transformer of one of the architectures mgi runs (llama, qwen2, qwen3, phi3,
 * gemma2, gemma3): its hyperparameters, its layer recipe (which norms, biases, RoPE, activation,
 * windows, softcaps: data that the forward passes read, so nothing outside models/ asks which
 * architecture a file is), and its weight tensors bound by name with shape and type checks.
 * Weights stay where the gguf reader put them (mmap or read buffer); only the small vectors
 * (norms, biases, RoPE factors) are converted to f32 here and checked for NaN/Inf. The types keep
 * the llama_ prefix of the family every architecture here derives from. */
#ifndef MGI_MODELS_MODEL_H
#define MGI_MODELS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

/* Which values RoPE turns together: NORM pairs (2i, 2i+1) (Llama), NEOX pairs (i, i + n_rot/2)
 * (GPT-NeoX, Qwen, Phi-3, Gemma). */
typedef enum { LLAMA_ROPE_NORM = 0, LLAMA_ROPE_NEOX = 1 } llama_rope_kind;
/* The FFN gate's activation: SiLU (SwiGLU), or GELU in its tanh form (Gemma's gelu_pytorch_tanh). */
typedef enum { LLAMA_ACT_SILU = 0, LLAMA_ACT_GELU_TANH = 1 } llama_act;
/* ARCH.rope.scaling.type: none, linear (positions divided by the factor), yarn. */
typedef enum { LLAMA_SCALING_NONE = 0, LLAMA_SCALING_LINEAR = 1, LLAMA_SCALING_YARN = 2 } llama_rope_scaling;

typedef struct {
    const char *arch;     /* general.architecture (static string of the registry) */
    int32_t n_vocab;      /* rows of token_embd.weight */
    int32_t n_embd;       /* ARCH.embedding_length */
    int32_t n_layer;      /* ARCH.block_count */
    int32_t n_head;       /* ARCH.attention.head_count */
    int32_t n_head_kv;    /* ARCH.attention.head_count_kv (GQA), default n_head */
    int32_t head_dim;     /* ARCH.attention.key_length (= value_length), default n_embd / n_head */
    int32_t n_ff;         /* ARCH.feed_forward_length */
    int32_t n_rot;        /* ARCH.rope.dimension_count, default head_dim */
    int32_t n_ctx_train;  /* ARCH.context_length */
    float rope_base;      /* ARCH.rope.freq_base, default 10000 */
    float rms_eps;        /* ARCH.attention.layer_norm_rms_epsilon */

    /* The layer recipe: the family's choices, then the keys that tune them. */
    llama_rope_kind rope_kind;
    llama_act act;
    float embd_scale;     /* the embedding row times this (Gemma: sqrt(n_embd)); 1 otherwise */
    float attn_scale;     /* scores q.k times this: 1/sqrt(head_dim) unless the family says */
    float attn_softcap;   /* scores become cap * tanh(s / cap); 0: none (Gemma 2) */
    float final_softcap;  /* logits likewise; 0: none (Gemma 2) */
    int32_t n_swa;        /* sliding window: a windowed layer sees the last n_swa positions; 0: none */
    int32_t swa_pattern;  /* layers l with l % swa_pattern < swa_pattern - 1 are windowed; 0: none */
    float rope_base_swa;  /* RoPE base of the windowed layers (Gemma 3: 10000; else rope_base) */
    int fused_qkv;        /* the file holds attn_qkv (Q, K, V rows in one tensor) */
    int fused_gate_up;    /* the file holds ffn_up with the gate rows first, and no ffn_gate */

    /* RoPE frequency scaling (global layers; windowed ones are never scaled). */
    llama_rope_scaling rope_scaling;
    float rope_freq_scale;  /* 1 / ARCH.rope.scaling.factor (linear, yarn); 1 otherwise */
    int32_t n_ctx_orig;     /* ARCH.rope.scaling.original_context_length, default n_ctx_train */
    float yarn_beta_fast;   /* ARCH.rope.scaling.yarn_beta_fast, default 32 */
    float yarn_beta_slow;   /* ARCH.rope.scaling.yarn_beta_slow, default 1 */
    float yarn_log_mul;     /* ARCH.rope.scaling.yarn_log_multiplier, default 0 */
    float rope_attn_factor; /* ARCH.rope.scaling.attn_factor, default 1: scales cos and sin */
} llama_hparams;

/* A 2-D weight: n_rows rows of n_cols elements of a quant type, rows contiguous. A fused tensor
 * (attn_qkv, phi3's ffn_up) is bound as several weights, each a run of its rows. */
typedef struct {
    const char *name;     /* the tensor's name in the file */
    uint32_t type;        /* quant type id */
    int64_t n_cols;       /* ne[0]: input features */
    int64_t n_rows;       /* ne[1]: output features */
    size_t row_bytes;
    const uint8_t *data;
} llama_weight;

/* Vectors are NULL when the file does not have them (the recipe step is then skipped). */
typedef struct {
    float *attn_norm;     /* [n_embd] */
    llama_weight wq;      /* [n_embd] -> [n_head * head_dim] */
    llama_weight wk;      /* [n_embd] -> [n_head_kv * head_dim] */
    llama_weight wv;      /* [n_embd] -> [n_head_kv * head_dim] */
    llama_weight wo;      /* [n_head * head_dim] -> [n_embd] */
    float *bq, *bk, *bv;  /* [n_head * head_dim], [n_head_kv * head_dim] x2: Q/K/V biases */
    float *bo;            /* [n_embd]: attention output bias */
    float *q_norm;        /* [head_dim]: RMSNorm of each query head before RoPE (Qwen 3, Gemma 3) */
    float *k_norm;        /* [head_dim]: of each key head */
    float *attn_post_norm; /* [n_embd]: RMSNorm of the attention output before the residual */
    float *ffn_norm;      /* [n_embd] */
    llama_weight w_gate;  /* [n_embd] -> [n_ff] */
    llama_weight w_up;    /* [n_embd] -> [n_ff] */
    llama_weight w_down;  /* [n_ff] -> [n_embd] */
    float *ffn_post_norm; /* [n_embd]: RMSNorm of the FFN output before the residual */
} llama_layer;

typedef struct {
    llama_hparams hp;
    llama_weight tok_embd;  /* [n_embd] x n_vocab rows */
    float *output_norm;     /* [n_embd] */
    llama_weight output;    /* [n_embd] -> [n_vocab]; token_embd when the file has no output.weight */
    float *output_b;        /* [n_vocab] output.bias, or NULL */
    int tied_output;        /* 1 when output is token_embd */
    float *rope_freqs;      /* [n_rot / 2] rope_freqs.weight (Llama 3.1+): divides each pair's
                             * frequency; NULL when absent */
    float *rope_long;       /* [n_rot / 2] LongRoPE factors for contexts past n_ctx_orig (Phi-3) */
    float *rope_short;      /* [n_rot / 2] for contexts up to n_ctx_orig */
    llama_layer *layers;    /* [n_layer] */
} llama_model;

/* Reads hyperparameters and binds every tensor of a file of an architecture mgi runs. The model
 * points into g's data: keep g open while the model is used. 0, or -1 with a message naming the
 * key or tensor (missing, wrong shape, unsupported type, non-finite vector, an architecture mgi
 * does not run, vocabulary-only file). */
int llama_model_load(llama_model *m, const gguf_ctx *g, char *err, size_t err_size);
void llama_model_free(llama_model *m);

/* Reads hyperparameters only (also the checks between them); 0 or -1 with a message. */
int llama_hparams_load(llama_hparams *hp, const gguf_ctx *g, char *err, size_t err_size);

/* The architectures mgi runs, as one comma-separated line ("llama, qwen2, ..."). */
const char *model_arch_list(void);

/* 1 when layer l attends through a sliding window of hp->n_swa positions. */
int llama_layer_is_swa(const llama_hparams *hp, int32_t l);

/* The first part of m's recipe that is not plain Llama (attention biases, a sliding window, ...),
 * as a phrase for messages, or NULL when m runs the plain Llama layer (the CUDA backend's fused
 * decode layers take only that one). */
const char *model_non_llama_feature(const llama_model *m);

/* 1 when some layer of m norms each query or key head before RoPE (Qwen3's and Gemma 3's
 * per-head RMSNorm): a norm over a whole head, so RoPE cannot ride in an epilogue that sees a
 * head's rows in pieces (the CUDA backend's fused QKV: forward_cuda.rope_fused). */
int model_has_qk_norm(const llama_model *m);

/* The first part of m's recipe that the CUDA backend does not run, as a phrase for messages, or
 * NULL when it runs m (every recipe of the supported architectures, Gemma 2 and 3 included; only
 * an attention output bias under a post-attention norm, which none has, is refused). */
const char *model_gpu_missing_feature(const llama_model *m);

/* The RoPE factors a context of n_ctx_seq positions per sequence uses, n_rot / 2 values or NULL:
 * rope_freqs when the file has them, else LongRoPE's long factors when n_ctx_seq, rounded up to a
 * multiple of 256 as llama.cpp rounds its context, exceeds n_ctx_orig, and its short ones
 * otherwise (llama.cpp's choice, so both run the same factors for the same -c and -np). */
const float *model_rope_factors(const llama_model *m, int32_t n_ctx_seq);

/* RoPE of the layers with this base and frequency scale (global layers: rope_base and
 * rope_freq_scale; windowed ones: rope_base_swa and 1), after ggml's rope_yarn: fills angle
 * (n_rot / 2 values) with each pair's angle per position, base^(-2i/n_rot) / factors[i] (factors
 * may be NULL) times freq_scale, YaRN's ramp blending it back towards the unscaled angle below the
 * correction dimensions; returns the factor cos and sin are multiplied by (attn_factor, YaRN's
 * magnitude). A token at pos turns pair i by pos * angle[i]. */
double llama_rope_angles(const llama_hparams *hp, double base, double freq_scale, const float *factors, double *angle);

/* m's recipe as lines "label   value\n" for people (mgi info): RoPE kind, base and scaling, head
 * size, windows and which layers are global, softcaps, biases, Q/K norms, tied head, GPU support.
 * Truncated to size (always NUL-terminated). */
void model_describe(const llama_model *m, char *buf, size_t size);

/* Bytes of a K and a V cache holding n_pos positions of every layer at elem_bytes per value
 * (4 for f32): 2 * n_layer * n_pos * n_head_kv * head_dim * elem_bytes; UINT64_MAX when the
 * product overflows or n_pos < 0. */
uint64_t llama_kv_bytes(const llama_hparams *hp, int64_t n_pos, uint32_t elem_bytes);

/* Refuses a KV cache that cannot fit, before anything is allocated (a cache larger than memory
 * would be overcommitted and end in an OOM kill mid-run): 0 when llama_kv_bytes is at most
 * mem_bytes (0: the machine's physical memory), else -1 with a message giving the bytes
 * needed, the memory, and the largest -c that fits. */
int llama_kv_check(const llama_hparams *hp, int64_t n_pos, uint32_t elem_bytes, uint64_t mem_bytes,
                   char *err, size_t err_size);

/* Dequantises row r of w into dst (w->n_cols floats); 0 or -1 with a message. */
int llama_weight_row(const llama_weight *w, int64_t r, float *dst, char *err, size_t err_size);

#endif
