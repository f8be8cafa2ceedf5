/* cpu_attn_head (engine/cpu_attn.h), where its AVX-512 form (cpu_avx512.c) does not take the
 * head: each score is one call of the f32 dot kernel, taken once
 * per head (the keys are scattered over cache pages), then the softmax in f32 with a double sum
 * (as the exact path), then one axpy per position into out. */
#include <math.h>
#include <string.h>
#include "engine/cpu_attn.h"

int cpu_attn_head_in_registers(quant_isa isa, int32_t head_dim) {
#if defined(__x86_64__)
    return isa >= QUANT_ISA_AVX512 && quant_isa_supported(isa) && head_dim % 16 == 0 && head_dim >= 16 &&
           head_dim <= 256;
#else
    (void)isa, (void)head_dim;
    return 0;
#endif
}

void cpu_attn_head(quant_isa isa, float *out, const float *q, const float *k, const float *v, size_t stride,
                   const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores) {
    if (cpu_attn_head_in_registers(isa, head_dim)) {
        cpu_attn_heads_avx512(1, out, q, k, v, stride, cells, n_pos, head_dim, scale, scores);
        return;
    }
    quant_dot_fn dot = quant_dot_kernel(isa, QUANT_F32);
    quant_axpy_fn axpy = quant_axpy_kernel(isa);
    float mx = -INFINITY;
    for (int32_t j = 0; j < n_pos; j++) {
        float s;
        /* the key is the "weight row" and q the one activation row */
        dot(head_dim, k + (size_t)cells[j] * stride, q, 0, 1, &s);
        scores[j] = s * scale;
        mx = scores[j] > mx ? scores[j] : mx;
    }
    double sum = 0;
    for (int32_t j = 0; j < n_pos; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    float inv = (float)(1.0 / sum);
    memset(out, 0, (size_t)head_dim * sizeof *out);
    for (int32_t j = 0; j < n_pos; j++) axpy(out, scores[j] * inv, v + (size_t)cells[j] * stride, head_dim);
}

void cpu_attn_heads(quant_isa isa, int g, float *out, const float *q, const float *k, const float *v, size_t stride,
                    const int32_t *cells, int32_t n_pos, int32_t head_dim, float scale, float *scores) {
    if (cpu_attn_head_in_registers(isa, head_dim)) {
        cpu_attn_heads_avx512(g, out, q, k, v, stride, cells, n_pos, head_dim, scale, scores);
        return;
    }
    for (int h = 0; h < g; h++) /* the portable form: one head at a time */
        cpu_attn_head(isa, out + (size_t)h * head_dim, q + (size_t)h * head_dim, k, v, stride, cells, n_pos,
                      head_dim, scale, scores);
}
