/* mkmodel_arch.h: what mkmodel writes for each architecture (included by scripts/mkmodel.c only).
 * The keys and tensors follow llama.cpp's converter (convert_hf_to_gguf.py and the conversion/ modules)
 * and the shapes its loader (src/models/ARCH.cpp) asks for, so that llama.cpp loads every file;
 * the shapes are the Llama benchmark shapes of ../shared/docs/PERF.md, real models' shapes for
 * benchmarks, and small shapes of each architecture for tests. */
#ifndef MKMODEL_ARCH_H
#define MKMODEL_ARCH_H

#include <math.h>
#include <stddef.h>
#include <string.h>

/* What an architecture's layers hold beyond Llama's (llama.cpp's load_arch_tensors). */
enum {
    ARCH_VOCAB_KEY = 1 << 0,   /* ARCH.vocab_size (llama's converter writes it) */
    ARCH_QKV_BIAS = 1 << 1,    /* attn_q/k/v.bias (qwen2) */
    ARCH_QK_NORM = 1 << 2,     /* attn_q_norm, attn_k_norm over one head (qwen3, gemma3) */
    ARCH_POST_NORMS = 1 << 3,  /* post_attention_norm, post_ffw_norm (gemma2, gemma3) */
    ARCH_FUSED_QKV = 1 << 4,   /* attn_qkv [n_embd, q + k + v] (phi3) */
    ARCH_FUSED_UP = 1 << 5,    /* ffn_up [n_embd, 2 n_ff] = gate then up, no ffn_gate (phi3) */
    ARCH_HEAD_KEYS = 1 << 6,   /* key_length and value_length always written (gemma) */
    ARCH_TIED = 1 << 7,        /* never an output.weight: the head is token_embd (gemma) */
    ARCH_ROPE_DIM_KEY = 1 << 8, /* ARCH.rope.dimension_count (llama's and phi3's converters) */
    ARCH_NO_SPACE = 1 << 9,    /* tokenizer.ggml.add_space_prefix false (gemma's converter) */
};

typedef struct {
    const char *name;   /* general.architecture and the prefix of its keys */
    unsigned layout;    /* ARCH_* */
    const char *small;  /* its small test shape */
} arch_desc;

static const arch_desc arch_table[] = {
    {"llama", ARCH_VOCAB_KEY | ARCH_ROPE_DIM_KEY, "llama-s"},
    {"qwen2", ARCH_QKV_BIAS, "qwen2-s"},
    {"qwen3", ARCH_QK_NORM, "qwen3-s"},
    {"phi3", ARCH_FUSED_QKV | ARCH_FUSED_UP | ARCH_ROPE_DIM_KEY, "phi-s"},
    {"gemma2", ARCH_POST_NORMS | ARCH_HEAD_KEYS | ARCH_TIED | ARCH_NO_SPACE, "gemma2-s"},
    {"gemma3", ARCH_POST_NORMS | ARCH_QK_NORM | ARCH_HEAD_KEYS | ARCH_TIED | ARCH_NO_SPACE, "gemma3-s"},
};

static const arch_desc *arch_find(const char *name) {
    for (size_t i = 0; i < sizeof arch_table / sizeof arch_table[0]; i++)
        if (!strcmp(arch_table[i].name, name)) return &arch_table[i];
    return NULL;
}

typedef enum { ROPE_PLAIN, ROPE_LINEAR, ROPE_YARN } rope_scaling;

/* A shape: hyperparameters as the converter writes them. Zero means "not written" for the
 * optional keys, and head_dim 0 means n_embd / n_head without a key_length key. */
typedef struct {
    const char *name;
    const char *arch;       /* NULL: a Llama benchmark shape of docs/PERF.md, written as always */
    int n_embd, n_layer, n_head, n_head_kv, n_ff, ctx, n_vocab;
    int head_dim;           /* ARCH.attention.key_length = value_length */
    int n_rot;              /* ARCH.rope.dimension_count when not the whole head (phi3's partial rotary) */
    float rope_base, rms_eps;
    int swa;                /* ARCH.attention.sliding_window */
    float attn_softcap, final_softcap;
    int tied;               /* no output.weight */
    rope_scaling scaling;   /* ARCH.rope.scaling.type / factor (/ original_context_length for yarn) */
    float scale_factor;
    int rope_freqs;         /* Llama 3.1's rope_freqs.weight (factor 8, low/high 1/4, original ctx 8192) */
    int longrope_orig;      /* phi3 LongRoPE: original context; rope_factors_short/long.weight */
} shape;

static const shape shape_table[] = {
    /* Llama benchmark shapes (docs/PERF.md), unchanged: */
    {"demo", NULL, 128, 2, 4, 2, 384, 256, 1024, .rope_base = 500000, .rms_eps = 1e-5f},
    {"tiny", NULL, 256, 2, 4, 2, 512, 8192, 32000, .rope_base = 500000, .rms_eps = 1e-5f},
    {"mini", NULL, 1024, 12, 16, 4, 2816, 8192, 32000, .rope_base = 500000, .rms_eps = 1e-5f},
    {"1b", NULL, 2048, 16, 32, 8, 8192, 8192, 32000, .rope_base = 500000, .rms_eps = 1e-5f},
    {"8b", NULL, 4096, 32, 32, 8, 14336, 8192, 32000, .rope_base = 500000, .rms_eps = 1e-5f},
    {"70b", NULL, 8192, 80, 64, 8, 28672, 8192, 32000, .rope_base = 500000, .rms_eps = 1e-5f},

    /* Real models, from their config.json as published:
     * meta-llama/Llama-3.1-8B: hidden 4096, 32 layers, 32 heads / 8 kv, intermediate 14336,
     * vocab 128256, max_position_embeddings 131072, rope_theta 500000, rms_norm_eps 1e-5,
     * rope_scaling llama3 (factor 8, low 1, high 4, original 8192), untied. */
    {"llama3.1-8b", "llama", 4096, 32, 32, 8, 14336, 131072, 128256, .rope_base = 500000, .rms_eps = 1e-5f,
     .rope_freqs = 1},
    /* Qwen/Qwen2.5-7B: hidden 3584, 28 layers, 28 heads / 4 kv, intermediate 18944, vocab 152064,
     * max_position_embeddings 131072, rope_theta 1e6, rms_norm_eps 1e-6, q/k/v biases,
     * tie_word_embeddings false. */
    {"qwen2.5-7b", "qwen2", 3584, 28, 28, 4, 18944, 131072, 152064, .rope_base = 1e6f, .rms_eps = 1e-6f},
    /* Qwen/Qwen3-8B: hidden 4096, 36 layers, 32 heads / 8 kv, head_dim 128, intermediate 12288,
     * vocab 151936, max_position_embeddings 40960, rope_theta 1e6, rms_norm_eps 1e-6, untied. */
    {"qwen3-8b", "qwen3", 4096, 36, 32, 8, 12288, 40960, 151936, .head_dim = 128, .rope_base = 1e6f,
     .rms_eps = 1e-6f},
    /* google/gemma-3-12b-it (text_config): hidden 3840, 48 layers, 16 heads / 8 kv, head_dim 256,
     * intermediate 15360, vocab 262208 of which the converter keeps the tokenizer's 262144,
     * max_position_embeddings 131072, rope_theta 1e6 (local 10000), rope_scaling linear 8,
     * sliding_window 1024, rms_norm_eps 1e-6, tied. */
    {"gemma3-12b", "gemma3", 3840, 48, 16, 8, 15360, 131072, 262144, .head_dim = 256, .rope_base = 1e6f,
     .rms_eps = 1e-6f, .swa = 1024, .tied = 1, .scaling = ROPE_LINEAR, .scale_factor = 8},
    /* microsoft/Phi-4-mini-instruct: hidden 3072, 32 layers, 24 heads / 8 kv, intermediate 8192,
     * vocab 200064, max_position_embeddings 131072, original 4096, partial_rotary_factor 0.75
     * (96 of 128 dims), rope_theta 10000, rms_norm_eps 1e-5, sliding_window 262144, LongRoPE,
     * tied. */
    {"phi4-mini", "phi3", 3072, 32, 24, 8, 8192, 131072, 200064, .n_rot = 96, .rope_base = 10000,
     .rms_eps = 1e-5f, .swa = 262144, .tied = 1, .longrope_orig = 4096},

    /* Small shapes for tests (a few MB, seconds on two cores), each with its family's traits:
     * heads larger than n_embd / n_head where the family has them (Qwen3, Gemma), windows and
     * softcaps small enough to change the result of a 128-token context. */
    {"llama-s", "llama", 256, 4, 4, 2, 640, 8192, 2048, .rope_base = 500000, .rms_eps = 1e-5f},
    {"qwen2-s", "qwen2", 256, 4, 4, 2, 640, 32768, 2048, .rope_base = 1e6f, .rms_eps = 1e-6f},
    {"qwen3-s", "qwen3", 256, 4, 4, 2, 640, 40960, 2048, .head_dim = 128, .rope_base = 1e6f, .rms_eps = 1e-6f,
     .tied = 1},
    /* not "phi3-s": general.name is random-SHAPE-QUANT, and llama.cpp's vocabulary loader looks
     * for Phi-3's <|endoftext|> token in any model whose name holds "phi3" */
    {"phi-s", "phi3", 256, 4, 4, 2, 640, 131072, 2048, .n_rot = 48, .rope_base = 10000, .rms_eps = 1e-5f,
     .swa = 262144, .tied = 1, .longrope_orig = 4096},
    /* Gemma 2's real softcaps are 50 (scores) and 30 (logits); on random weights 3 and 10 change
     * llama.cpp's perplexity by 1% and 31% (50 and 30 would not change it measurably). */
    {"gemma2-s", "gemma2", 256, 4, 4, 2, 640, 8192, 2048, .head_dim = 128, .rope_base = 10000,
     .rms_eps = 1e-6f, .swa = 16, .attn_softcap = 3, .final_softcap = 10, .tied = 1},
    /* six layers: gemma3's layers are local but every sixth (index 5), the global one */
    {"gemma3-s", "gemma3", 256, 6, 4, 2, 640, 32768, 2048, .head_dim = 128, .rope_base = 1e6f,
     .rms_eps = 1e-6f, .swa = 16, .tied = 1, .scaling = ROPE_LINEAR, .scale_factor = 8},
};

static const shape *shape_find(const char *name) {
    for (size_t i = 0; i < sizeof shape_table / sizeof shape_table[0]; i++)
        if (!strcmp(shape_table[i].name, name)) return &shape_table[i];
    return NULL;
}

/* Llama 3.1's rope_freqs (n = rotary dims / 2): Meta's llama3 scaling as the converter computes
 * it: 1 for wavelengths under original_ctx / high, factor over original_ctx / low, a smooth
 * blend between. Computed in double and rounded once to f32. */
static void arch_llama3_factors(float *out, int n, double base, double factor, double low, double high,
                                double orig_ctx) {
    double low_wavelen = orig_ctx / low, high_wavelen = orig_ctx / high;
    for (int i = 0; i < n; i++) {
        double freq = 1.0 / pow(base, (double)(2 * i) / (double)(2 * n));
        double wavelen = 2 * M_PI / freq;
        double f;
        if (wavelen < high_wavelen) f = 1;
        else if (wavelen > low_wavelen) f = factor;
        else {
            double smooth = (orig_ctx / wavelen - low) / (high - low);
            f = 1 / ((1 - smooth) / factor + smooth);
        }
        out[i] = (float)f;
    }
}

/* Phi-3/4 LongRoPE factors (n = rotary dims / 2). Microsoft's come from a search and are
 * published per model; these follow their profile: short factors rise from 1 to ~3 over the
 * dimensions, long ones from 1 to ~48 (Phi-4-mini's range), both smooth (i^2 ramps). */
static void arch_longrope_factors(float *s, float *l, int n) {
    for (int i = 0; i < n; i++) {
        double t = n > 1 ? (double)i / (n - 1) : 0;
        s[i] = (float)(1 + 2 * t * t);
        l[i] = (float)(1 + 47 * t * t);
    }
}

#endif
