/* The llama architecture (Llama 1-3.3, Mistral, SmolLM, and the files converted as llama): RMSNorm,
 * NORM RoPE (adjacent pairs) with Llama 3.1's rope_freqs.weight dividing each pair's frequency,
 * optional attention and output biases, a SwiGLU FFN, an untied or tied output head. */
#include "models/model_arch.h"

#define W MODEL_BIND_WEIGHT
#define V MODEL_BIND_VECTOR
#define OPT MODEL_T_OPTIONAL

static const model_tensor llama_tensors[] = {
    MODEL_T("token_embd.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, tok_embd, 0),
    MODEL_T("output_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, output_norm, 0),
    MODEL_T("output.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, output, OPT),
    MODEL_T("output.bias", MODEL_DIM_VOCAB, MODEL_DIM_ONE, V, output_b, OPT),
    MODEL_T("rope_freqs.weight", MODEL_DIM_ROT2, MODEL_DIM_ONE, V, rope_freqs, OPT),
    MODEL_L("blk.%d.attn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, attn_norm, 0),
    MODEL_L("blk.%d.attn_q.weight", MODEL_DIM_EMBD, MODEL_DIM_Q, W, wq, 0),
    MODEL_L("blk.%d.attn_k.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wk, 0),
    MODEL_L("blk.%d.attn_v.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wv, 0),
    MODEL_L("blk.%d.attn_output.weight", MODEL_DIM_Q, MODEL_DIM_EMBD, W, wo, 0),
    MODEL_L("blk.%d.attn_q.bias", MODEL_DIM_Q, MODEL_DIM_ONE, V, bq, OPT),
    MODEL_L("blk.%d.attn_k.bias", MODEL_DIM_KV, MODEL_DIM_ONE, V, bk, OPT),
    MODEL_L("blk.%d.attn_v.bias", MODEL_DIM_KV, MODEL_DIM_ONE, V, bv, OPT),
    MODEL_L("blk.%d.attn_output.bias", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, bo, OPT),
    MODEL_L("blk.%d.ffn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, ffn_norm, 0),
    MODEL_L("blk.%d.ffn_gate.weight", MODEL_DIM_EMBD, MODEL_DIM_FF, W, w_gate, 0),
    MODEL_L("blk.%d.ffn_up.weight", MODEL_DIM_EMBD, MODEL_DIM_FF, W, w_up, 0),
    MODEL_L("blk.%d.ffn_down.weight", MODEL_DIM_FF, MODEL_DIM_EMBD, W, w_down, 0),
};

const model_arch model_arch_llama = {"llama", LLAMA_ROPE_NORM, LLAMA_ACT_SILU, llama_tensors, MODEL_N(llama_tensors), NULL};
