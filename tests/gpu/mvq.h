/* The error budget of matvec v10 (X rounded to int8 per 32 values, kernels/matvec.cuh), shared by
 * the GPU tests and the kernel lab (C and C++): per row a worst case and an expected spread of the
 * rounding, so that a result must be both within the worst case on every row and as close as the
 * rounding explains on average (a wrong layout or scale passes neither). */
#ifndef MGI_TESTS_MVQ_H
#define MGI_TESTS_MVQ_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

/* The budget of one row w (dequantised) against X:
 *   worst = sum_i |w_i| d_i / 2, d_i = max|x| of i's 32-value block / 127 (the rounding of x_i
 *           to d_i q_i is at most d_i / 2), plus 1e-5 sum_i |w_i x_i| for the f32 arithmetic;
 *   var   = sum_i w_i^2 d_i^2 / 12, the variance of the rounding error (uniform in +-d_i / 2). */
typedef struct { double worst, var; } mvq_budget;

static inline mvq_budget mvq_row_budget(const float *w, const float *x, int64_t k) {
    mvq_budget b = {0, 0};
    double absdot = 0;
    for (int64_t i0 = 0; i0 < k; i0 += 32) {
        double m = 0;
        for (int64_t i = i0; i < i0 + 32 && i < k; i++) m = fmax(m, fabs((double)x[i]));
        const double d = m / 127;
        for (int64_t i = i0; i < i0 + 32 && i < k; i++) {
            b.worst += fabs((double)w[i]) * d / 2;
            b.var += (double)w[i] * w[i] * d * d / 12;
            absdot += fabs((double)w[i] * x[i]);
        }
    }
    b.worst = b.worst * 1.001 + 1e-5 * absdot + 1e-30;
    return b;
}

/* 1 when every got[j] is within b[j].worst of ref[j] and, over 16 values or more, the sum of
 * squared errors is at most 4 times the expected one (an rms twice the rounding's); else 0 with
 * the reason in why. Fewer values cannot judge an rms: with one, a correct kernel exceeds 4 times
 * its variance ~5% of the time (chi-square, 1 degree); with 16, ~1e-7. */
static inline int mvq_check(const float *got, const double *ref, const mvq_budget *b, int64_t n, char *why,
                            size_t why_size) {
    double se = 0, sv = 0;
    for (int64_t j = 0; j < n; j++) {
        const double e = (double)got[j] - ref[j];
        if (!(fabs(e) <= b[j].worst)) {
            snprintf(why, why_size, "row %lld: error %.3g over the worst case %.3g", (long long)j, e, b[j].worst);
            return 0;
        }
        se += e * e;
        sv += b[j].var;
    }
    if (n >= 16 && se > 4 * sv + 1e-30) {
        snprintf(why, why_size, "rms error %.3g over twice the rounding's %.3g", sqrt(se / n), sqrt(sv / n));
        return 0;
    }
    snprintf(why, why_size, "rms error %.3g, rounding's %.3g", sqrt(se / (n ? n : 1)), sqrt(sv / (n ? n : 1)));
    return 1;
}

/* X as v10 rounds it (d = max / 127 in f32, q = round(x * 127 / max)), for emulations. */
static inline void mvq_round_x(float *out, const float *x, int64_t k) {
    for (int64_t i0 = 0; i0 < k; i0 += 32) {
        float m = 0;
        for (int64_t i = i0; i < i0 + 32 && i < k; i++) m = fmaxf(m, fabsf(x[i]));
        const float inv = m > 0 ? 127.0f / m : 0.0f, d = m * (1.0f / 127.0f);
        for (int64_t i = i0; i < i0 + 32 && i < k; i++) out[i] = d * (float)(int)rintf(x[i] * inv);
    }
}

#endif
