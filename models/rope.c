/* RoPE's angles as llama.cpp sets them up (ggml's rope_yarn), for both backends: the CPU turns
 * each pair by pos * angle[i], the CUDA general layer reads the same table on the device. */
#include <math.h>

#include "models/model.h"

double llama_rope_angles(const llama_hparams *hp, double base, double freq_scale, const float *factors, double *angle) {
    const int half = hp->n_rot / 2, yarn = hp->rope_scaling == LLAMA_SCALING_YARN;
    double corr0 = 0, corr1 = 0, mscale = hp->rope_attn_factor;
    if (yarn) {
        /* YaRN's ramp between the correction dimensions of beta_fast and beta_slow, and its
         * magnitude factor net of the cancellation llama.cpp applies (1 + 0.1 ln s, over
         * 1 + 0.1 log_mul ln s when the file has yarn_log_multiplier) */
        double n = hp->n_rot, ctx = hp->n_ctx_orig, factor = 1.0 / hp->rope_freq_scale;
        double lo = floor(n * log(ctx / (hp->yarn_beta_fast * 2 * M_PI)) / (2 * log(base)));
        double hi = ceil(n * log(ctx / (hp->yarn_beta_slow * 2 * M_PI)) / (2 * log(base)));
        corr0 = fmax(0.0, lo);
        corr1 = fmin(n - 1, hi);
        double ctx_factor = 1.0; /* llama.cpp's yarn_attn_factor before its cancellation */
        if (factor > 1 && hp->yarn_log_mul != 0)
            ctx_factor = (0.1 * log(factor) + 1) / (0.1 * hp->yarn_log_mul * log(factor) + 1);
        else if (factor > 1)
            ctx_factor = 0.1 * log(factor) + 1;
        ctx_factor /= 1.0 + 0.1 * log(factor);
        mscale *= ctx_factor * (1.0 + 0.1 * log(1.0 / freq_scale));
    }
    for (int i = 0; i < half; i++) {
        double a = pow(base, -2.0 * i / (double)hp->n_rot);
        if (factors) a /= factors[i];
        double mix = freq_scale; /* theta = extrapolated angle * mix */
        if (yarn) {
            double y = (i - corr0) / fmax(0.001, corr1 - corr0), ramp = 1.0 - fmin(1.0, fmax(0.0, y));
            mix = freq_scale * (1.0 - ramp) + ramp;
        }
        angle[i] = a * mix;
    }
    return mscale;
}
