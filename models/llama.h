/* The Llama architecture: hyperparameters from the llama.* GGUF keys and the weight tensors bound
 * by name with shape and type checks. Weights stay where the gguf reader put them (mmap or read
 * buffer); only the small norm vectors are converted to f32 here (and checked for NaN/Inf). */
#ifndef MGI_MODELS_LLAMA_H
#define MGI_MODELS_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct {
    int32_t n_vocab;      /* rows of token_embd.weight */
    int32_t n_embd;       /* llama.embedding_length */
    int32_t n_layer;      /* llama.block_count */
    int32_t n_head;       /* llama.attention.head_count */
    int32_t n_head_kv;    /* llama.attention.head_count_kv (GQA), default n_head */
    int32_t head_dim;     /* n_embd / n_head */
    int32_t n_ff;         /* llama.feed_forward_length */
    int32_t n_rot;        /* llama.rope.dimension_count, default head_dim */
    int32_t n_ctx_train;  /* llama.context_length */
    float rope_base;      /* llama.rope.freq_base, default 10000 */
    float rms_eps;        /* llama.attention.layer_norm_rms_epsilon */
} llama_hparams;

/* A 2-D weight: n_rows rows of n_cols elements of a quant type, rows contiguous. */
typedef struct {
    const char *name;     /* the tensor's name in the file */
    uint32_t type;        /* quant type id */
    int64_t n_cols;       /* ne[0]: input features */
    int64_t n_rows;       /* ne[1]: output features */
    size_t row_bytes;
    const uint8_t *data;
} llama_weight;

typedef struct {
    float *attn_norm;     /* [n_embd] */
    llama_weight wq;      /* [n_embd] -> [n_head * head_dim] */
    llama_weight wk;      /* [n_embd] -> [n_head_kv * head_dim] */
    llama_weight wv;      /* [n_embd] -> [n_head_kv * head_dim] */
    llama_weight wo;      /* [n_head * head_dim] -> [n_embd] */
    float *ffn_norm;      /* [n_embd] */
    llama_weight w_gate;  /* [n_embd] -> [n_ff] */
    llama_weight w_up;    /* [n_embd] -> [n_ff] */
    llama_weight w_down;  /* [n_ff] -> [n_embd] */
} llama_layer;

typedef struct {
    llama_hparams hp;
    llama_weight tok_embd;  /* [n_embd] x n_vocab rows */
    float *output_norm;     /* [n_embd] */
    llama_weight output;    /* [n_embd] -> [n_vocab]; token_embd when the file has no output.weight */
    int tied_output;        /* 1 when output is token_embd */
    llama_layer *layers;    /* [n_layer] */
} llama_model;

/* Reads hyperparameters and binds every tensor of a llama-architecture file. The model points
 * into g's data: keep g open while the model is used. 0, or -1 with a message naming the key or
 * tensor (missing, wrong shape, unsupported type, non-finite norm weight, other architecture,
 * vocabulary-only file). */
int llama_model_load(llama_model *m, const gguf_ctx *g, char *err, size_t err_size);
void llama_model_free(llama_model *m);

/* Reads hyperparameters only (also the checks between them); 0 or -1 with a message. */
int llama_hparams_load(llama_hparams *hp, const gguf_ctx *g, char *err, size_t err_size);

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
