/* The gemma2 and gemma3 architectures: the embedding scaled by sqrt(n_embd), RMSNorm before and
 * after both attention and FFN (the converter stores Gemma's norm weights with the +1 already
 * added, so they are used as they are), a GELU-gated FFN (tanh form, as the models were trained),
 * NEOX RoPE, tied output, and sliding-window layers: Gemma 2 alternates windowed and global layers
 * and softcaps attention scores and final logits; Gemma 3 has five windowed layers (RoPE base
 * 10000, never scaled) to each global one (the file's base and scaling) and per-head Q/K RMSNorm.
 * The window pattern and the windowed base are not in the files: llama.cpp fixes them per
 * architecture, and so does this file. */
#include <math.h>

#include "models/model_arch.h"

#define W MODEL_BIND_WEIGHT
#define V MODEL_BIND_VECTOR
#define OPT MODEL_T_OPTIONAL

#define GEMMA_COMMON                                                                          \
    MODEL_T("token_embd.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, tok_embd, 0),            \
    MODEL_T("output_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, output_norm, 0),          \
    MODEL_T("output.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, output, OPT),                \
    MODEL_L("blk.%d.attn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, attn_norm, 0),       \
    MODEL_L("blk.%d.attn_q.weight", MODEL_DIM_EMBD, MODEL_DIM_Q, W, wq, 0),                   \
    MODEL_L("blk.%d.attn_k.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wk, 0),                  \
    MODEL_L("blk.%d.attn_v.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wv, 0),                  \
    MODEL_L("blk.%d.attn_output.weight", MODEL_DIM_Q, MODEL_DIM_EMBD, W, wo, 0),              \
    MODEL_L("blk.%d.post_attention_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, attn_post_norm, 0), \
    MODEL_L("blk.%d.ffn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, ffn_norm, 0),         \
    MODEL_L("blk.%d.ffn_gate.weight", MODEL_DIM_EMBD, MODEL_DIM_FF, W, w_gate, 0),            \
    MODEL_L("blk.%d.ffn_up.weight", MODEL_DIM_EMBD, MODEL_DIM_FF, W, w_up, 0),                \
    MODEL_L("blk.%d.ffn_down.weight", MODEL_DIM_FF, MODEL_DIM_EMBD, W, w_down, 0),            \
    MODEL_L("blk.%d.post_ffw_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, ffn_post_norm, 0)

static const model_tensor gemma2_tensors[] = {GEMMA_COMMON};

static const model_tensor gemma3_tensors[] = {
    GEMMA_COMMON,
    MODEL_L("blk.%d.attn_q_norm.weight", MODEL_DIM_HEAD, MODEL_DIM_ONE, V, q_norm, 0),
    MODEL_L("blk.%d.attn_k_norm.weight", MODEL_DIM_HEAD, MODEL_DIM_ONE, V, k_norm, 0),
};

/* Queries are scaled by query_pre_attn_scalar^-1/2: the head size, except for the 27B models
 * (46 layers for Gemma 2, 62 for Gemma 3), whose scalar is n_embd / n_head (llama.cpp's rule). */
static float gemma_attn_scale(const llama_hparams *hp, int32_t layers_27b) {
    return hp->n_layer == layers_27b ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head)) : 1.0f / sqrtf((float)hp->head_dim);
}

static int gemma2_keys(llama_hparams *hp, const gguf_ctx *g, char *err, size_t err_size) {
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->attn_scale = gemma_attn_scale(hp, 46);
    hp->swa_pattern = 2;  /* even layers windowed, odd layers global */
    hp->n_swa = 4096;     /* Gemma 2's window when the file does not say */
    hp->attn_softcap = 50.0f;
    hp->final_softcap = 30.0f;
    return model_key_u32(g, hp->arch, "attention.sliding_window", 0, 0, INT32_MAX, &hp->n_swa, err, err_size) ||
           model_key_f32(g, hp->arch, "attn_logit_softcapping", 0, 0, 0, &hp->attn_softcap, err, err_size) ||
           model_key_f32(g, hp->arch, "final_logit_softcapping", 0, 0, 0, &hp->final_softcap, err, err_size)
               ? -1 : 0;
}

static int gemma3_keys(llama_hparams *hp, const gguf_ctx *g, char *err, size_t err_size) {
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->attn_scale = gemma_attn_scale(hp, 62);
    hp->swa_pattern = 6;  /* layers 5, 11, 17, ... global; the others windowed */
    hp->rope_base_swa = 10000.0f;
    return model_key_u32(g, hp->arch, "attention.sliding_window", 1, 0, INT32_MAX, &hp->n_swa, err, err_size);
}

const model_arch model_arch_gemma2 = {"gemma2", LLAMA_ROPE_NEOX, LLAMA_ACT_GELU_TANH, gemma2_tensors,
                                      MODEL_N(gemma2_tensors), gemma2_keys};
const model_arch model_arch_gemma3 = {"gemma3", LLAMA_ROPE_NEOX, LLAMA_ACT_GELU_TANH, gemma3_tensors,
                                      MODEL_N(gemma3_tensors), gemma3_keys};
