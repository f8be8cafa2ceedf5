/* The portable dot products and activation quantisers: plain C that every machine runs, written
 * for clarity (each block's codes are unpacked, then summed as exact integers per block or
 * sub-block, then scaled in f32). The SIMD paths are tested against these. */
#include <math.h>
#include <string.h>
#include "dot_kernels.h"
#include "quant.h"
#include "rows.h"

/* ---- activations ---------------------------------------------------------------------------- */

/* Codes round to nearest, ties to even (lrintf in the default rounding mode), the rounding the
 * SIMD converters use, so every path writes the same bytes. */
static void act_f32(const float *x, void *xq, int64_t n) { memcpy(xq, x, (size_t)n * sizeof(float)); }

static float absmax(const float *x, int n) {
    float m = 0.0f;
    for (int j = 0; j < n; j++) m = fmaxf(m, fabsf(x[j]));
    return m;
}

static void act_q8(const float *x, void *xq, int64_t n) {
    block_q8_a *b = xq;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = absmax(x, 32), id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int q = (int)lrintf(x[j] * id);
            b[i].qs[j] = (int8_t)q;
            sum += q;
        }
        b[i].d = amax / 127.0f;
        b[i].s = b[i].d * (float)sum;
    }
}

static void act_q8_K(const float *x, void *xq, int64_t n) {
    block_q8_K *b = xq;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float amax = absmax(x, QK_K), id = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < QK_K; j++) b[i].qs[j] = (int8_t)lrintf(x[j] * id);
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)s;
        }
        b[i].d = amax / 127.0f;
    }
}

/* ---- float weights: f32 activations --------------------------------------------------------- */

static float dot_f32(int64_t n, const void *w, const void *x) {
    const float *a = w, *b = x;
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

static float dot_f16(int64_t n, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) acc += quant_f16_to_f32(a[i]) * b[i];
    return acc;
}

static float dot_bf16(int64_t n, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) acc += quant_bf16_to_f32(a[i]) * b[i];
    return acc;
}

/* ---- 32-weight types: block_q8_a activations ------------------------------------------------ */

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Sum over a block of code(j) * x.qs[j], exactly. */
static int isum32(const int *code, const int8_t *q) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += code[j] * q[j];
    return s;
}

/* The 32 codes of a nibble block (low nibbles first), plus bit 4 from qh when given. */
static void nibbles(const uint8_t *qs, const uint8_t *qh, int *code) {
    uint32_t h = qh ? le32(qh) : 0;
    for (int j = 0; j < 16; j++) {
        code[j] = (qs[j] & 15) | (int)((h >> j) & 1) << 4;
        code[j + 16] = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
    }
}

/* Offset types (w = d * (code - off)): d * dx * sum(code q) - off * d * s. Min types
 * (w = d * code + m): d * dx * sum(code q) + m * s. */
static float dot_q4_0(int64_t n, const void *w, const void *x) {
    const block_q4_0 *b = w;
    const block_q8_a *a = x;
    float acc = 0.0f;
    int code[32];
    for (int64_t i = 0; i < n / 32; i++) {
        nibbles(b[i].qs, NULL, code);
        float d = quant_f16_to_f32(b[i].d);
        acc += d * a[i].d * (float)isum32(code, a[i].qs) - 8.0f * d * a[i].s;
    }
    return acc;
}

static float dot_q4_1(int64_t n, const void *w, const void *x) {
    const block_q4_1 *b = w;
    const block_q8_a *a = x;
    float acc = 0.0f;
    int code[32];
    for (int64_t i = 0; i < n / 32; i++) {
        nibbles(b[i].qs, NULL, code);
        float d = quant_f16_to_f32(b[i].d), m = quant_f16_to_f32(b[i].m);
        acc += d * a[i].d * (float)isum32(code, a[i].qs) + m * a[i].s;
    }
    return acc;
}

static float dot_q5_0(int64_t n, const void *w, const void *x) {
    const block_q5_0 *b = w;
    const block_q8_a *a = x;
    float acc = 0.0f;
    int code[32];
    for (int64_t i = 0; i < n / 32; i++) {
        nibbles(b[i].qs, b[i].qh, code);
        float d = quant_f16_to_f32(b[i].d);
        acc += d * a[i].d * (float)isum32(code, a[i].qs) - 16.0f * d * a[i].s;
    }
    return acc;
}

static float dot_q5_1(int64_t n, const void *w, const void *x) {
    const block_q5_1 *b = w;
    const block_q8_a *a = x;
    float acc = 0.0f;
    int code[32];
    for (int64_t i = 0; i < n / 32; i++) {
        nibbles(b[i].qs, b[i].qh, code);
        float d = quant_f16_to_f32(b[i].d), m = quant_f16_to_f32(b[i].m);
        acc += d * a[i].d * (float)isum32(code, a[i].qs) + m * a[i].s;
    }
    return acc;
}

static float dot_q8_0(int64_t n, const void *w, const void *x) {
    const block_q8_0 *b = w;
    const block_q8_a *a = x;
    float acc = 0.0f;
    int code[32];
    for (int64_t i = 0; i < n / 32; i++) {
        for (int j = 0; j < 32; j++) code[j] = b[i].qs[j];
        acc += quant_f16_to_f32(b[i].d) * a[i].d * (float)isum32(code, a[i].qs);
    }
    return acc;
}

/* ---- K types: block_q8_K activations -------------------------------------------------------- */

/* One K block unpacked: 256 codes, n_sub sub-blocks of 256 / n_sub with integer scales and
 * (Q2_K, Q4_K, Q5_K) mins; w = d * sc * code - dmin * m. */
typedef struct {
    int code[QK_K];
    int sc[16], m[16];
    int n_sub;
    float d, dmin;
} kblock;

/* d * dx * sum(sc * sum(code q)) - dmin * dx * sum(m * sum(q)), the sums exact integers. */
static float kblock_dot(const kblock *k, const block_q8_K *a) {
    int len = QK_K / k->n_sub, per = len / 16;
    int sumi = 0, summ = 0;
    for (int s = 0; s < k->n_sub; s++) {
        int is = 0, qsum = 0;
        for (int j = s * len; j < (s + 1) * len; j++) is += k->code[j] * a->qs[j];
        for (int g = s * per; g < (s + 1) * per; g++) qsum += a->bsums[g];
        sumi += k->sc[s] * is;
        summ += k->m[s] * qsum;
    }
    return k->d * a->d * (float)sumi - k->dmin * a->d * (float)summ;
}

static void unpack_q2_K(const block_q2_K *b, kblock *k) {
    k->n_sub = 16;
    k->d = quant_f16_to_f32(b->d);
    k->dmin = quant_f16_to_f32(b->dmin);
    for (int s = 0; s < 16; s++) k->sc[s] = b->scales[s] & 15, k->m[s] = b->scales[s] >> 4;
    for (int h = 0; h < 2; h++)
        for (int f = 0; f < 4; f++)
            for (int l = 0; l < 32; l++) k->code[128 * h + 32 * f + l] = (b->qs[32 * h + l] >> (2 * f)) & 3;
}

static void unpack_q3_K(const block_q3_K *b, kblock *k) {
    k->n_sub = 16;
    k->d = quant_f16_to_f32(b->d);
    k->dmin = 0.0f;
    for (int s = 0; s < 16; s++) k->sc[s] = quant_k3_scale(b->scales, s), k->m[s] = 0;
    for (int h = 0; h < 2; h++)
        for (int f = 0; f < 4; f++)
            for (int l = 0; l < 32; l++) {
                int low = (b->qs[32 * h + l] >> (2 * f)) & 3, high = (b->hmask[l] >> (4 * h + f)) & 1;
                k->code[128 * h + 32 * f + l] = low - (high ? 0 : 4);
            }
}

static void unpack_q45_K(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, kblock *k) {
    k->n_sub = 8;
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        quant_k4_scale_min(scales, s, &sc, &m);
        k->sc[s] = sc, k->m[s] = m;
    }
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            int hi0 = qh ? (qh[l] >> (2 * g)) & 1 : 0, hi1 = qh ? (qh[l] >> (2 * g + 1)) & 1 : 0;
            k->code[64 * g + l] = (qs[32 * g + l] & 15) | hi0 << 4;
            k->code[64 * g + 32 + l] = (qs[32 * g + l] >> 4) | hi1 << 4;
        }
}

static void unpack_q6_K(const block_q6_K *b, kblock *k) {
    k->n_sub = 16;
    k->d = quant_f16_to_f32(b->d);
    k->dmin = 0.0f;
    for (int s = 0; s < 16; s++) k->sc[s] = b->scales[s], k->m[s] = 0;
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        int *c = k->code + 128 * h;
        for (int l = 0; l < 32; l++) {
            c[l] = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
            c[l + 32] = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
            c[l + 64] = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            c[l + 96] = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
        }
    }
}

#define K_DOT(t, unpack_call)                                                  \
    static float dot_##t(int64_t n, const void *w, const void *x) {            \
        const block_##t *bb = w;                                               \
        const block_q8_K *a = x;                                               \
        kblock k;                                                              \
        float acc = 0.0f;                                                      \
        for (int64_t i = 0; i < n / QK_K; i++) {                               \
            const block_##t *b = &bb[i];                                       \
            unpack_call;                                                       \
            acc += kblock_dot(&k, &a[i]);                                      \
        }                                                                      \
        return acc;                                                            \
    }

K_DOT(q2_K, unpack_q2_K(b, &k))
K_DOT(q3_K, unpack_q3_K(b, &k))
K_DOT(q4_K, (unpack_q45_K(b->scales, b->qs, NULL, &k), k.d = quant_f16_to_f32(b->d),
             k.dmin = quant_f16_to_f32(b->dmin)))
K_DOT(q5_K, (unpack_q45_K(b->scales, b->qs, b->qh, &k), k.d = quant_f16_to_f32(b->d),
             k.dmin = quant_f16_to_f32(b->dmin)))
K_DOT(q6_K, unpack_q6_K(b, &k))

static void axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* ---- the table ------------------------------------------------------------------------------ */

#define KERN(t)                                                                                     \
    static void kern_##t(int64_t n, const void *w, const void *x, size_t xs, int nt, float *out) { \
        for (int i = 0; i < nt; i++) out[i] = dot_##t(n, w, (const uint8_t *)x + (size_t)i * xs);  \
    }
KERN(f32)
KERN(f16)
KERN(bf16)
KERN(q4_0)
KERN(q4_1)
KERN(q5_0)
KERN(q5_1)
KERN(q8_0)
KERN(q2_K)
KERN(q3_K)
KERN(q4_K)
KERN(q5_K)
KERN(q6_K)

const quant_dot_table quant_dot_table_ref = {
    .dot = {
        [QUANT_F32] = kern_f32, [QUANT_F16] = kern_f16, [QUANT_BF16] = kern_bf16,
        [QUANT_Q4_0] = kern_q4_0, [QUANT_Q4_1] = kern_q4_1, [QUANT_Q5_0] = kern_q5_0,
        [QUANT_Q5_1] = kern_q5_1, [QUANT_Q8_0] = kern_q8_0, [QUANT_Q2_K] = kern_q2_K,
        [QUANT_Q3_K] = kern_q3_K, [QUANT_Q4_K] = kern_q4_K, [QUANT_Q5_K] = kern_q5_K,
        [QUANT_Q6_K] = kern_q6_K,
    },
    .act = {[QUANT_ACT_F32] = act_f32, [QUANT_ACT_Q8] = act_q8, [QUANT_ACT_Q8_K] = act_q8_K},
    .panel = {quant_panel_ref_32_q8, quant_panel_ref_32_q8k, quant_panel_ref_16_q8k},
    .pack_ilv = quant_panel_pack_ilv_ref,
    .panel_wide = 1,
    .axpy = axpy,
};
