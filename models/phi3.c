/* The phi3 architecture (Phi-3, Phi-3.5, Phi-4 mini): fused attn_qkv (or separate Q/K/V), a fused
 * ffn_up holding the gate rows then the up rows (SwiGLU), NEOX RoPE with LongRoPE's short and long
 * factors (the long ones past rope.scaling.original_context_length, as llama.cpp chooses) and
 * rope.scaling.attn_factor scaling cos and sin. The sliding_window key is ignored, as llama.cpp
 * does (the converted files do not describe which layers use it). */
#include "models/model_arch.h"

#define W MODEL_BIND_WEIGHT
#define V MODEL_BIND_VECTOR
#define OPT MODEL_T_OPTIONAL

static const model_tensor phi3_tensors[] = {
    MODEL_T("token_embd.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, tok_embd, 0),
    MODEL_T("output_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, output_norm, 0),
    MODEL_T("output.weight", MODEL_DIM_EMBD, MODEL_DIM_VOCAB, W, output, OPT),
    MODEL_T("output.bias", MODEL_DIM_VOCAB, MODEL_DIM_ONE, V, output_b, OPT),
    MODEL_T("rope_factors_long.weight", MODEL_DIM_ROT2, MODEL_DIM_ONE, V, rope_long, OPT),
    MODEL_T("rope_factors_short.weight", MODEL_DIM_ROT2, MODEL_DIM_ONE, V, rope_short, OPT),
    MODEL_L("blk.%d.attn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, attn_norm, 0),
    MODEL_L("blk.%d.attn_qkv.weight", MODEL_DIM_EMBD, MODEL_DIM_QKV, MODEL_BIND_QKV, wq, OPT),
    MODEL_L("blk.%d.attn_q.weight", MODEL_DIM_EMBD, MODEL_DIM_Q, W, wq, OPT),
    MODEL_L("blk.%d.attn_k.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wk, OPT),
    MODEL_L("blk.%d.attn_v.weight", MODEL_DIM_EMBD, MODEL_DIM_KV, W, wv, OPT),
    MODEL_L("blk.%d.attn_output.weight", MODEL_DIM_Q, MODEL_DIM_EMBD, W, wo, 0),
    MODEL_L("blk.%d.attn_output.bias", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, bo, OPT),
    MODEL_L("blk.%d.ffn_norm.weight", MODEL_DIM_EMBD, MODEL_DIM_ONE, V, ffn_norm, 0),
    MODEL_L("blk.%d.ffn_up.weight", MODEL_DIM_EMBD, MODEL_DIM_FF2, MODEL_BIND_GATE_UP, w_up, 0),
    MODEL_L("blk.%d.ffn_down.weight", MODEL_DIM_FF, MODEL_DIM_EMBD, W, w_down, 0),
};

/* Long and short factors come as a pair: one alone would leave the other context range unscaled. */
static int phi3_keys(llama_hparams *hp, const gguf_ctx *g, char *err, size_t err_size) {
    int lng = gguf_get_tensor(g, "rope_factors_long.weight") != NULL;
    int sht = gguf_get_tensor(g, "rope_factors_short.weight") != NULL;
    if (lng != sht)
        return model_fail(err, err_size, "%s: tensor rope_factors_%s.weight is missing (the file has rope_factors_%s.weight; "
                          "LongRoPE needs both)", gguf_path(g), lng ? "short" : "long", lng ? "long" : "short");
    (void)hp;
    return 0;
}

const model_arch model_arch_phi3 = {"phi3", LLAMA_ROPE_NEOX, LLAMA_ACT_SILU, phi3_tensors, MODEL_N(phi3_tensors), phi3_keys};
