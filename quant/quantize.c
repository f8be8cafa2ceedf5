/* CPU quantisation of f32 rows to every supported type, with llama.cpp's reference rounding
 * (ggml's *_ref quantisers): the legacy types pick the scale from the largest magnitude, the
 * K types search a few scales per sub-block for the least weighted error, then store sub-block
 * scales relative to the block's largest one. Q3_K uses the Q6_K-style symmetric search (the
 * same format, not bit-identical to ggml's Q3_K output). Used by tests and the model generator,
 * never on a hot path. */
#include <math.h>
#include <string.h>
#include "quant.h"
#include "rows.h"

/* Round to nearest, ties to even (ggml's nearest_int). */
static int nearest(float x) { return (int)lrintf(x); }
static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void quant_quant_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_quant_f16(const float *src, void *dst, int64_t n) {
    uint8_t *d = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = quant_f32_to_f16(src[i]);
        d[2 * i] = (uint8_t)h;
        d[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

void quant_quant_bf16(const float *src, void *dst, int64_t n) {
    uint8_t *d = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = quant_f32_to_bf16(src[i]);
        d[2 * i] = (uint8_t)h;
        d[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

/* The element of largest magnitude, with its sign. */
static float signed_amax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

/* Q4_0 / Q5_0: d = max / -(2^(bits-1)) so the largest magnitude lands exactly on code 0;
 * codes are truncations of x / d + half + 0.5, the top code clamped. */
void quant_quant_q4_0(const float *src, void *dst, int64_t n) {
    block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, src += QK4_0) {
        float d = signed_amax(src, QK4_0) / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = quant_f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            int q0 = (int)(int8_t)(src[j] * id + 8.5f), q1 = (int)(int8_t)(src[j + QK4_0 / 2] * id + 8.5f);
            b[i].qs[j] = (uint8_t)((q0 < 15 ? q0 : 15) | (q1 < 15 ? q1 : 15) << 4);
        }
    }
}

void quant_quant_q5_0(const float *src, void *dst, int64_t n) {
    block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / QK5_0; i++, src += QK5_0) {
        float d = signed_amax(src, QK5_0) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        b[i].d = quant_f32_to_f16(d);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = (int)(int8_t)(src[j] * id + 16.5f), q1 = (int)(int8_t)(src[j + QK5_0 / 2] * id + 16.5f);
            q0 = q0 < 31 ? q0 : 31;
            q1 = q1 < 31 ? q1 : 31;
            b[i].qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        for (int k = 0; k < 4; k++) b[i].qh[k] = (uint8_t)(qh >> (8 * k));
    }
}

/* Q4_1 / Q5_1: codes span [min, max] of the block. */
static void minmax(const float *x, int n, float *mn, float *mx) {
    *mn = *mx = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < *mn) *mn = x[j];
        if (x[j] > *mx) *mx = x[j];
    }
}

void quant_quant_q4_1(const float *src, void *dst, int64_t n) {
    block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / QK4_1; i++, src += QK4_1) {
        float mn, mx;
        minmax(src, QK4_1, &mn, &mx);
        float d = (mx - mn) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = quant_f32_to_f16(d);
        b[i].m = quant_f32_to_f16(mn);
        for (int j = 0; j < QK4_1 / 2; j++) {
            int q0 = (int)(int8_t)((src[j] - mn) * id + 0.5f), q1 = (int)(int8_t)((src[j + QK4_1 / 2] - mn) * id + 0.5f);
            b[i].qs[j] = (uint8_t)((q0 < 15 ? q0 : 15) | (q1 < 15 ? q1 : 15) << 4);
        }
    }
}

void quant_quant_q5_1(const float *src, void *dst, int64_t n) {
    block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / QK5_1; i++, src += QK5_1) {
        float mn, mx;
        minmax(src, QK5_1, &mn, &mx);
        float d = (mx - mn) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        b[i].d = quant_f32_to_f16(d);
        b[i].m = quant_f32_to_f16(mn);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0 = (int)(int8_t)((src[j] - mn) * id + 0.5f), q1 = (int)(int8_t)((src[j + QK5_1 / 2] - mn) * id + 0.5f);
            q0 = q0 < 31 ? q0 : 31;
            q1 = q1 < 31 ? q1 : 31;
            b[i].qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        for (int k = 0; k < 4; k++) b[i].qh[k] = (uint8_t)(qh >> (8 * k));
    }
}

/* Q8_0: d = amax / 127, codes round half away from zero. */
void quant_quant_q8_0(const float *src, void *dst, int64_t n) {
    block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, src += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(src[j]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = quant_f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++) b[i].qs[j] = (int8_t)roundf(src[j] * id);
    }
}

/* Affine fit x ~ scale * L - mn with L in [0, nmax], for the K types with a min: start from the
 * min/max grid, then try nstep + 1 slightly different grids and keep the weighted least-squares
 * scale and offset of the best one (ggml's make_qkx2_quants). Returns the scale; *mn >= 0. */
static float fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *mn,
                        float rmin, float rdelta, int nstep, int use_mad) {
    uint8_t Laux[32];
    float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *mn = -lo;
        return 0.0f;
    }
    float iscale = (float)nmax / (hi - lo), scale = 1.0f / iscale, best = 0.0f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        best += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)(l * l);
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D <= 0) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * Laux[i] + this_min - x[i];
            err += w[i] * (use_mad ? fabsf(diff) : diff * diff);
        }
        if (err < best) {
            memcpy(L, Laux, (size_t)n);
            best = err;
            scale = this_scale;
            lo = this_min;
        }
    }
    *mn = -lo;
    return scale;
}

/* Symmetric fit x ~ scale * (L - nmax) with L - nmax in [-nmax, nmax - 1], weights x^2: the
 * largest magnitude maps to -nmax, then 18 nearby grids are tried for the best weighted
 * least-squares scale (ggml's make_qx_quants, rmse_type 1). */
static float fit_symmetric(int n, int nmax, const float *x, uint8_t *L) {
    float max = signed_amax(x, n);
    if (fabsf(max) < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float scale = 0.0f, best = 0.0f;
    for (int is = 0; is <= 18; is++) {
        int step = is == 0 ? 0 : is <= 9 ? is - 10 : is - 9;  /* 0, then -9..-1, 1..9 */
        float iscale = -((float)nmax + 0.1f * (float)step) / max;
        float sum_lx = 0, sum_l2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sum_lx += w * x[i] * (float)l;
            sum_l2 += w * (float)(l * l);
        }
        if (is == 0 || (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2)) {
            for (int i = 0; i < n; i++) L[i] = (uint8_t)(nmax + clampi(nearest(iscale * x[i]), -nmax, nmax - 1));
            scale = sum_l2 > 0 ? sum_lx / sum_l2 : 0.0f;
            best = scale * sum_lx;
        }
    }
    return scale;
}

/* The K types with a min: fit each sub-block, quantise sub-block scales and mins to qbits
 * relative to the largest, then recompute every code against the stored values. Returns the
 * stored d and dmin through *d16, *dmin16 and the per-sub-block integer scales and mins. */
static void k_affine(const float *x, int sub, int nsub, int nmax, int qmax, float rmin, float rdelta,
                     int nstep, int use_mad, int av_weights, uint8_t *L, uint8_t *isc, uint8_t *imn,
                     uint16_t *d16, uint16_t *dmin16) {
    float scales[16], mins[16], w[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < nsub; j++) {
        const float *xs = x + sub * j;
        float av = 0;
        if (av_weights) {
            for (int l = 0; l < sub; l++) av += xs[l] * xs[l];
            av = sqrtf(av / (float)sub);
        }
        for (int l = 0; l < sub; l++) w[l] = av + fabsf(xs[l]);
        scales[j] = fit_affine(sub, nmax, xs, w, L + sub * j, &mins[j], rmin, rdelta, nstep, use_mad);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? (float)qmax / max_scale : 0.0f;
    float inv_min = max_min > 0 ? (float)qmax / max_min : 0.0f;
    for (int j = 0; j < nsub; j++) {
        isc[j] = (uint8_t)clampi(nearest(inv_scale * scales[j]), 0, qmax);
        imn[j] = (uint8_t)clampi(nearest(inv_min * mins[j]), 0, qmax);
    }
    *d16 = quant_f32_to_f16(max_scale / (float)qmax);
    *dmin16 = quant_f32_to_f16(max_min / (float)qmax);
    float d = quant_f16_to_f32(*d16), dmin = quant_f16_to_f32(*dmin16);
    for (int j = 0; j < nsub; j++) {
        float ds = d * (float)isc[j];
        if (ds == 0.0f) continue;  /* every code decodes to -dm: keep the fit's codes */
        float dm = dmin * (float)imn[j];
        for (int l = 0; l < sub; l++) L[sub * j + l] = (uint8_t)clampi(nearest((x[sub * j + l] + dm) / ds), 0, nmax);
    }
}

static void pack_k4_scales(uint8_t *s, const uint8_t *sc, const uint8_t *m) {
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = sc[j];
            s[j + 4] = m[j];
        } else {
            s[j + 4] = (uint8_t)((sc[j] & 15) | (m[j] & 15) << 4);
            s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            s[j] |= (uint8_t)((m[j] >> 4) << 6);
        }
    }
}

/* 2-bit codes of 256 weights: field k of byte 32h + l holds weight 128h + 32k + l. */
static void pack_2bit(uint8_t *qs, const uint8_t *L) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *p = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(p[0] | p[32] << 2 | p[64] << 4 | p[96] << 6);
        }
}

void quant_quant_q2_K(const float *src, void *dst, int64_t n) {
    block_q2_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        uint8_t L[QK_K], sc[16], m[16];
        k_affine(src, 16, 16, 3, 15, -0.5f, 0.1f, 15, 1, 0, L, sc, m, &b[i].d, &b[i].dmin);
        for (int j = 0; j < 16; j++) b[i].scales[j] = (uint8_t)(sc[j] | m[j] << 4);
        pack_2bit(b[i].qs, L);
    }
}

void quant_quant_q4_K(const float *src, void *dst, int64_t n) {
    block_q4_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        uint8_t L[QK_K], sc[8], m[8];
        k_affine(src, 32, 8, 15, 63, -1.0f, 0.1f, 20, 0, 1, L, sc, m, &b[i].d, &b[i].dmin);
        memset(b[i].scales, 0, sizeof b[i].scales);
        pack_k4_scales(b[i].scales, sc, m);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++) b[i].qs[32 * g + l] = (uint8_t)(L[64 * g + l] | L[64 * g + 32 + l] << 4);
    }
}

void quant_quant_q5_K(const float *src, void *dst, int64_t n) {
    block_q5_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        uint8_t L[QK_K], sc[8], m[8];
        k_affine(src, 32, 8, 31, 63, -0.5f, 0.1f, 15, 0, 1, L, sc, m, &b[i].d, &b[i].dmin);
        memset(b[i].scales, 0, sizeof b[i].scales);
        pack_k4_scales(b[i].scales, sc, m);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++) {
                int l1 = L[64 * g + l], l2 = L[64 * g + 32 + l];
                b[i].qh[l] |= (uint8_t)((l1 >> 4) << (2 * g) | (l2 >> 4) << (2 * g + 1));
                b[i].qs[32 * g + l] = (uint8_t)((l1 & 15) | (l2 & 15) << 4);
            }
    }
}

/* The symmetric K types: fit each sub-block of 16, store the sub-block scales as signed
 * integers relative to the largest (-qmax maps to the largest magnitude), recompute codes. */
static float k_symmetric(const float *x, int nmax, int qmax, uint8_t *L, int *isc) {
    float scales[16], max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        scales[j] = fit_symmetric(16, nmax, x + 16 * j, L + 16 * j);
        if (fabsf(scales[j]) > amax) {
            amax = fabsf(scales[j]);
            max_scale = scales[j];
        }
    }
    if (amax < 1e-15f) {
        memset(L, nmax, QK_K);
        for (int j = 0; j < 16; j++) isc[j] = 0;
        return 0.0f;
    }
    float iscale = -(float)qmax / max_scale;
    for (int j = 0; j < 16; j++) isc[j] = clampi(nearest(iscale * scales[j]), -qmax, qmax - 1);
    uint16_t d16 = quant_f32_to_f16(1.0f / iscale);
    float d = quant_f16_to_f32(d16);
    for (int j = 0; j < 16; j++) {
        float ds = d * (float)isc[j];
        if (ds == 0.0f) continue;
        for (int l = 0; l < 16; l++) L[16 * j + l] = (uint8_t)(nmax + clampi(nearest(x[16 * j + l] / ds), -nmax, nmax - 1));
    }
    return d;
}

void quant_quant_q3_K(const float *src, void *dst, int64_t n) {
    block_q3_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        uint8_t L[QK_K];
        int sc[16];
        b[i].d = quant_f32_to_f16(k_symmetric(src, 4, 32, L, sc));
        memset(b[i].scales, 0, sizeof b[i].scales);
        for (int j = 0; j < 16; j++) {
            int l = sc[j] + 32;
            if (j < 8) b[i].scales[j] = (uint8_t)(l & 15);
            else b[i].scales[j - 8] |= (uint8_t)((l & 15) << 4);
            b[i].scales[8 + (j & 3)] |= (uint8_t)((l >> 4) << (2 * (j >> 2)));
        }
        /* bit 2 of weight j's code goes to hmask[j % 32] bit j / 32 */
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int j = 0; j < QK_K; j++) {
            if (L[j] > 3) {
                b[i].hmask[j % 32] |= (uint8_t)(1 << (j / 32));
                L[j] -= 4;
            }
        }
        pack_2bit(b[i].qs, L);
    }
}

void quant_quant_q6_K(const float *src, void *dst, int64_t n) {
    block_q6_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        uint8_t L[QK_K];
        int sc[16];
        b[i].d = quant_f32_to_f16(k_symmetric(src, 32, 128, L, sc));
        for (int j = 0; j < 16; j++) b[i].scales[j] = (int8_t)sc[j];
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *p = L + 128 * h + l;
                b[i].ql[64 * h + l] = (uint8_t)((p[0] & 15) | (p[64] & 15) << 4);
                b[i].ql[64 * h + 32 + l] = (uint8_t)((p[32] & 15) | (p[96] & 15) << 4);
                b[i].qh[32 * h + l] = (uint8_t)(p[0] >> 4 | (p[32] >> 4) << 2 | (p[64] >> 4) << 4 | (p[96] >> 4) << 6);
            }
    }
}
