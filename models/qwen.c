/* The qwen2 architecture (Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen): Llama's layer with Q/K/V
 * biases and NEOX RoPE; and qwen3 (dense Qwen3): no biases, a per-head RMSNorm of Q and K before
 * RoPE, a head size from key_length. Both usually tie the output head to the embedding. */
#include "models/model_arch.h"

#define W MODEL_BIND_WEIGHT
#define V MODEL_BIND_VECTOR
#define OPT MODEL_T_OPTIONAL

static const model_tensor qwen2_tensors[] = {
    MODEL_T("token_embd.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, tok_embd, 0),
    MODEL_T("output_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, output_norm, 0),
    MODEL_T("output.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, output, OPT),
    MODEL_L("blk.%d.attn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, attn_norm, 0),
    MODEL_L("blk.%d.attn_q.weight", MODEL_DIM_EMBD, MODEL_DIM_Q, W, wq, 0),
    MODEL_L("blk.%d.attn_k.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wk, 0),
    MODEL_L("blk.%d.attn_v.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wv, 0),
    MODEL_L("blk.%d.attn_q.bias", MODEL_DIM_Q, MODEL_DIM_ONE, V, bq, 0),
    MODEL_L("blk.%d.attn_k.bias", MODEL_DIM_KV, MODEL_DIM_ONE, V, bk, 0),
    MODEL_L("blk.%d.attn_v.bias", MODEL_DIM_KV, MODEL_DIM_ONE, V, bv, 0),
    MODEL_L("blk.%d.attn_output.weight", MODEL_DIM_Q, MODEL_DIM_EMBD, W, wo, 0),
    MODEL_L("blk.%d.ffn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, ffn_norm, 0),
    MODEL_L("blk.%d.ffn_gate.weight", MODEL_DIM_EMBD, MODEL_DIM_FF, W, w_gate, 0),
    MODEL_L("blk.%d.ffn_up.weight", MODEL_DIM_EMBD, MODEL_DIM_FF, W, w_up, 0),
    MODEL_L("blk.%d.ffn_down.weight", MODEL_DIM_FF, MODEL_DIM_EMBD, W, w_down, 0),
};

static const model_tensor qwen3_tensors[] = {
    MODEL_T("token_embd.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, tok_embd, 0),
    MODEL_T("output_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, output_norm, 0),
    MODEL_T("output.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, output, OPT),
    MODEL_L("blk.%d.attn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, attn_norm, 0),
    MODEL_L("blk.%d.attn_q.weight", MODEL_DIM_EMBD, MODEL_DIM_Q, W, wq, 0),
    MODEL_L("blk.%d.attn_k.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wk, 0),
    MODEL_L("blk.%d.attn_v.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wv, 0),
    MODEL_L("blk.%d.attn_q_norm.weight", MODEL_DIM_HEAD, MODEL_DIM_ONE, V, q_norm, 0),
    MODEL_L("blk.%d.attn_k_norm.weight", MODEL_DIM_HEAD, MODEL_DIM_ONE, V, k_norm, 0),
    MODEL_L("blk.%d.attn_output.weight", MODEL_DIM_Q, MODEL_DIM_EMBD, W, wo, 0),
    MODEL_L("blk.%d.ffn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, ffn_norm, 0),
    MODEL_L("blk.%d.ffn_gate.weight", MODEL_DIM_EMBD, MODEL_DIM_FF, W, w_gate, 0),
    MODEL_L("blk.%d.ffn_up.weight", MODEL_DIM_EMBD, MODEL_DIM_FF, W, w_up, 0),
    MODEL_L("blk.%d.ffn_down.weight", MODEL_DIM_FF, MODEL_DIM_EMBD, W, w_down, 0),
};

const model_arch model_arch_qwen2 = {"qwen2", LLAMA_ROPE_NEOX, LLAMA_ACT_SILU, qwen2_tensors, MODEL_N(qwen2_tensors), NULL};
const model_arch model_arch_qwen3 = {"qwen3", LLAMA_ROPE_NEOX, LLAMA_ACT_SILU, qwen3_tensors, MODEL_N(qwen3_tensors), NULL};
