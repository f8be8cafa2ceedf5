/* Random test data shared by the GPU tests and the kernel lab (C and C++): a small seeded
 * generator and weight matrices whose blocks look like a quantiser's output, as in
 * ../shared/tools/mkmodel.py (zero-mean weights of std ~1/sqrt(k); int8 fields never -128;
 * Q4_K sub-blocks with min = scale and dmin = 7.5 d), never zeros. */
#ifndef MGI_TESTS_GEN_H
#define MGI_TESTS_GEN_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __cplusplus
extern "C" { /* quant.h is a C header without its own guard */
#include "quant/quant.h"
}
#else
#include "quant/quant.h"
#endif

typedef struct { uint64_t s; } gen_rng;

static inline uint64_t gen_u64(gen_rng *r) {
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}
/* Uniform in [0, 1). */
static inline double gen_unit(gen_rng *r) { return (double)(gen_u64(r) >> 11) * 0x1p-53; }
static inline double gen_uniform(gen_rng *r, double a, double b) { return a + (b - a) * gen_unit(r); }
static inline double gen_normal(gen_rng *r) {
    double u = gen_unit(r) + 1e-300, v = gen_unit(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static inline void gen_put_f16(uint8_t *p, float v) {
    uint16_t h = quant_f32_to_f16(v);
    p[0] = (uint8_t)h; p[1] = (uint8_t)(h >> 8);
}

/* rows x k weights of type t in GGUF layout into out (quant_row_bytes(t, k) * rows bytes). */
static inline void gen_weights(gen_rng *r, uint32_t t, int64_t rows, int64_t k, void *out) {
    double sigma = 1.0 / sqrt((double)k);
    uint8_t *o = (uint8_t *)out;
    int64_t n = rows * k;
    /* plain floats: uniform with std sigma (fast enough for the lab's 131M-weight matrices) */
    double a = sigma * 1.7320508;
    if (t == QUANT_F32) {
        for (int64_t i = 0; i < n; i++) ((float *)out)[i] = (float)gen_uniform(r, -a, a);
        return;
    }
    if (t == QUANT_F16) {
        for (int64_t i = 0; i < n; i++) gen_put_f16(o + 2 * i, (float)gen_uniform(r, -a, a));
        return;
    }
    const quant_traits *tr = quant_traits_of(t);
    int64_t nb = n / tr->block_elems, bs = tr->block_bytes;
    for (int64_t i = 0; i < nb * bs; i++) o[i] = (uint8_t)gen_u64(r);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = o + b * bs;
        double jit = gen_uniform(r, 0.8, 1.2);
        if (t == QUANT_Q4_0) {
            gen_put_f16(p, (float)(sigma / 4.64 * jit));
        } else if (t == QUANT_Q5_0) {
            gen_put_f16(p, (float)(sigma / 9.23 * jit));
        } else if (t == QUANT_Q8_0) {
            for (int i = 2; i < 34; i++) if (p[i] == 0x80) p[i] = 0x81;
            gen_put_f16(p, (float)(sigma / 73.3 * jit));
        } else if (t == QUANT_Q4_K || t == QUANT_Q5_K) {
            /* every sub-block's min equal to its scale, dmin the codes' mean times d: zero-mean
             * weights (Q4_K codes 0..15, Q5_K 0..31: half the d for twice the range) */
            const int q5 = t == QUANT_Q5_K;
            uint8_t v[8], *sc = p + 4;
            for (int i = 0; i < 8; i++) v[i] = (uint8_t)(1 + gen_u64(r) % 63);
            for (int i = 0; i < 4; i++) {
                sc[i] = (uint8_t)((v[i] & 63) | ((v[4 + i] >> 4) << 6));
                sc[4 + i] = sc[i];
                sc[8 + i] = (uint8_t)((v[4 + i] & 15) | ((v[4 + i] & 15) << 4));
            }
            float d = (float)(sigma / (q5 ? 336.0 : 168.0) * jit);
            gen_put_f16(p, d);
            gen_put_f16(p + 2, quant_f16_to_f32(quant_f32_to_f16(d)) * (q5 ? 15.5f : 7.5f));
        } else if (t == QUANT_Q6_K) {
            for (int i = 192; i < 208; i++) if (p[i] == 0x80) p[i] = 0x81;
            gen_put_f16(p + 208, (float)(sigma / 1367.0 * jit));
        } else if (t == QUANT_Q4_1 || t == QUANT_Q5_1) { /* d, m: the codes' mean (7.5, 15.5) at zero */
            const int q5 = t == QUANT_Q5_1;
            const float d = (float)(sigma / (q5 ? 9.23 : 4.64) * jit);
            gen_put_f16(p, d);
            gen_put_f16(p + 2, -quant_f16_to_f32(quant_f32_to_f16(d)) * (q5 ? 15.5f : 7.5f));
        } else if (t == QUANT_Q2_K) { /* scales[16] (4-bit scale and min), qs[64], d, dmin */
            const float d = (float)(sigma / 11.25 * jit);
            gen_put_f16(p + 80, d);
            gen_put_f16(p + 82, d * 1.5f); /* codes' mean 1.5 times the scales' mean as the mins' */
        } else if (t == QUANT_Q3_K) { /* hmask, qs, 6-bit scales (centred at 32): zero-mean */
            gen_put_f16(p + 108, (float)(sigma / 37.0 * jit));
        }
    }
}

/* n tokens' RoPE metadata as paged_rope_store takes it: positions in [0, 4000) (f32 angles lose
 * digits there) and distinct cells in [0, cells), so that no two tokens write one cache row. */
static inline void gen_pos_cells(gen_rng *r, int32_t *pos, int32_t *cell, int n, int64_t cells) {
    for (int t = 0; t < n; t++) {
        pos[t] = (int32_t)gen_uniform(r, 0, 4000);
        int c, dup;
        do {
            c = (int)gen_uniform(r, 0, (double)cells);
            dup = c >= cells;
            for (int u = 0; u < t; u++) dup |= cell[u] == c;
        } while (dup);
        cell[t] = c;
    }
}

/* ||a - b|| / ||b|| over n values (b the reference); NaN anywhere gives +inf. */
static inline double gen_rel_err(const float *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (a[i] != a[i]) return INFINITY;
        double d = (double)a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif
