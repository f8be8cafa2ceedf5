/* A model's recipe as text for people (mgi info): what the forward pass will run, so a user sees
 * the RoPE, windows, softcaps, biases and norms of a file before running it. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "models/model.h"

typedef struct {
    char *buf;
    size_t size, len;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    if (t->len >= t->size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n < t->size - t->len ? (size_t)n : t->size - t->len - 1;
}

void model_describe(const llama_model *m, char *buf, size_t size) {
    const llama_hparams *hp = &m->hp;
    text t = {buf, size, 0};
    if (size) buf[0] = 0;
    put(&t, "recipe:         %s: RMSNorm before attention and FFN%s, %s-gated FFN%s\n", hp->arch,
        m->layers[0].attn_post_norm ? " and after each" : "", hp->act == LLAMA_ACT_GELU_TANH ? "GELU (tanh)" : "SiLU",
        hp->fused_gate_up ? " (fused gate/up)" : "");
    if (hp->embd_scale != 1.0f) put(&t, "input scale     x %g (sqrt(n_embd))\n", hp->embd_scale);
    put(&t, "head size       %d (%s)%s\n", hp->head_dim,
        hp->head_dim * hp->n_head == hp->n_embd ? "n_embd / n_head" : "attention.key_length",
        hp->fused_qkv ? ", fused attn_qkv" : "");
    put(&t, "rope            %s, %d of %d values, base %g", hp->rope_kind == LLAMA_ROPE_NEOX ? "NEOX (i, i + n_rot/2)" :
        "adjacent pairs", hp->n_rot, hp->head_dim, hp->rope_base);
    if (hp->swa_pattern && hp->rope_base_swa != hp->rope_base) put(&t, " (windowed layers: %g)", hp->rope_base_swa);
    if (hp->rope_scaling == LLAMA_SCALING_YARN)
        put(&t, ", yarn x%g from %d positions (beta %g/%g)", 1.0 / hp->rope_freq_scale, hp->n_ctx_orig,
            hp->yarn_beta_fast, hp->yarn_beta_slow);
    else if (hp->rope_freq_scale != 1.0f)
        put(&t, ", linear scaling x%g", 1.0 / hp->rope_freq_scale);
    else
        put(&t, ", no scaling");
    if (hp->rope_attn_factor != 1.0f) put(&t, ", attn_factor %g", hp->rope_attn_factor);
    if (m->rope_freqs) put(&t, ", rope_freqs.weight (%d factors)", hp->n_rot / 2);
    if (m->rope_long)
        put(&t, ", LongRoPE (short factors up to %d positions per sequence, long past it)", hp->n_ctx_orig);
    put(&t, "\n");
    put(&t, "attention       scale %.6g", hp->attn_scale);
    if (hp->attn_softcap > 0) put(&t, ", softcap %g", hp->attn_softcap);
    if (hp->swa_pattern) {
        int32_t n_swa = 0;
        for (int32_t l = 0; l < hp->n_layer; l++) n_swa += llama_layer_is_swa(hp, l);
        put(&t, ", window %d on %d of %d layers (global:", hp->n_swa, n_swa, hp->n_layer);
        int shown = 0;
        for (int32_t l = 0; l < hp->n_layer; l++)
            if (!llama_layer_is_swa(hp, l) && shown++ < 12) put(&t, " %d", l);
        put(&t, "%s)", shown > 12 ? " ..." : shown ? "" : " none");
    } else {
        put(&t, ", full causal");
    }
    put(&t, "\n");
    const llama_layer *L = &m->layers[0];
    put(&t, "biases          %s%s%s%s\n", L->bq || L->bk || L->bv ? "Q/K/V " : "", L->bo ? "attention-output " : "",
        m->output_b ? "output " : "", L->bq || L->bk || L->bv || L->bo || m->output_b ? "" : "none");
    put(&t, "q/k norm        %s\n", L->q_norm ? "per-head RMSNorm before RoPE" : "none");
    put(&t, "output          %s\n", m->tied_output ? "tied to token_embd.weight" : "output.weight");
    if (hp->final_softcap > 0) put(&t, "logit softcap   %g\n", hp->final_softcap);
    const char *f = model_gpu_missing_feature(m);
    if (f) put(&t, "gpu             CPU only (-ngl 0): the CUDA backend does not run its %s\n", f);
    else if (model_non_llama_feature(m)) put(&t, "gpu             CPU or CUDA (the general layer)\n");
    else put(&t, "gpu             the plain Llama layer: CPU or CUDA\n");
}
