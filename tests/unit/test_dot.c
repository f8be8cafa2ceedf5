/* Unit tests of quant/dot.h: activation quantisation and the dot products of every weight type
 * on every path this CPU runs (portable, AVX2, AVX-512 VNNI), on fresh random data of several
 * sizes, against f64 sums over the dequantised weights.
 *
 * Error budget. The kernels compute dot(w, xq) where xq is x quantised per block: x_j = d_b q_j
 * + e_j with |e_j| <= d_b / 2 (round to nearest; d_b = amax_b / 127 for the block b holding j).
 * So against the exact activations
 *     |dot - sum w_j x_j| <= sum_j |w_j| d_b(j) / 2 + r,
 * and against the dequantised activations the only error is r, the f32 rounding: integer sums
 * are exact within a block, each block's term is scaled and added in f32 (a few roundings of
 * 2^-24 each, on terms whose magnitudes add up to at most sum |w_j x_j| plus the min / offset
 * parts), so r <= (n_blocks + 16) * 2^-23 * (sum_j |w_j xq_j| + sum_j |o_j xq_j|), o_j the
 * offset or min part of weight j, bounded here by the block's largest |w|. The float types
 * see f32 activations: the first budget is r alone, with n_blocks = n. SIMD paths differ from
 * the portable one only in summation order: within 2 r. Activation bytes are equal on every
 * path. The panel kernels (16 rows unpacked, for prompts) face the same budgets, and sum in f32
 * scale * dx * isum + bias * dx * sum(q) per sub-block, so they too are within 2 r of the
 * portable row kernel. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "quant/dot.h"
#include "quant/quant.h"
#include "test.h"

static uint64_t rng_state;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unit(void) { return ((double)(rng_next() >> 11) + 0.5) * 0x1p-53; }
static float rng_normal(void) { return (float)(sqrt(-2.0 * log(rng_unit())) * cos(6.283185307179586 * rng_unit())); }

/* Gaussian values with a random overall scale and a few outliers. */
static void fill_normal(float *x, int64_t n) {
    float scale = powf(10.0f, (float)(rng_unit() * 4.0 - 2.0));
    for (int64_t i = 0; i < n; i++) {
        x[i] = scale * rng_normal();
        if (rng_next() % 61 == 0) x[i] *= 10.0f;
    }
}

static const uint32_t types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1,
                                 QUANT_Q8_0, QUANT_Q2_K, QUANT_Q3_K, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
#define N_TYPES (sizeof types / sizeof types[0])

/* Offsets of the f16 scale fields of each quantised block, so random block bytes can be given
 * finite scales (-1: none). */
static void scale_fields(uint32_t t, int f[2]) {
    f[0] = f[1] = -1;
    switch (t) {
    case QUANT_Q4_0: case QUANT_Q5_0: case QUANT_Q8_0: f[0] = 0; break;
    case QUANT_Q4_1: case QUANT_Q5_1: case QUANT_Q4_K: case QUANT_Q5_K: f[0] = 0, f[1] = 2; break;
    case QUANT_Q2_K: f[0] = 80, f[1] = 82; break;
    case QUANT_Q3_K: f[0] = 108; break;
    case QUANT_Q6_K: f[0] = 208; break;
    default: break;
    }
}

/* n_rows weight rows of type t: from the reference quantiser (real blocks) or, when raw,
 * random block bytes with random finite scales (every code, scale and bit pattern). */
static void make_weights(uint32_t t, int64_t n, int n_rows, int raw, uint8_t *w, size_t row_bytes) {
    const quant_traits *tr = quant_traits_of(t);
    float *tmp = malloc((size_t)n * sizeof *tmp);
    int f[2];
    scale_fields(t, f);
    for (int r = 0; r < n_rows; r++) {
        uint8_t *row = w + (size_t)r * row_bytes;
        if (raw && tr->block_elems > 1) {
            for (size_t i = 0; i < row_bytes; i++) row[i] = (uint8_t)rng_next();
            for (size_t b = 0; b < row_bytes / (size_t)tr->block_bytes; b++)
                for (int k = 0; k < 2; k++) {
                    if (f[k] < 0) continue;
                    uint16_t h = quant_f32_to_f16((float)(rng_unit() * 0.02));
                    memcpy(row + b * (size_t)tr->block_bytes + (size_t)f[k], &h, 2);
                }
        } else {
            fill_normal(tmp, n);
            quant_quant_row(t, tmp, row, n, NULL, 0);
        }
    }
    free(tmp);
}

/* Block size of the activation format of t, for the per-block budget. */
static int act_block(uint32_t t) {
    quant_act a = quant_act_of(t);
    return a == QUANT_ACT_Q8 ? 32 : a == QUANT_ACT_Q8_K ? QK_K : 1;
}

typedef struct {
    int bad;
    double worst;  /* largest error / budget seen */
    char why[300];
} verdict;

static void fail(verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(verdict *v, const char *fmt, ...) {
    if (!v->bad++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->why, sizeof v->why, fmt, ap);
        va_end(ap);
    }
}

static void note(verdict *v, double err, double budget) {
    if (budget > 0 && err / budget > v->worst) v->worst = err / budget;
}

/* The quantised types have panels (quant/dot.h). */
static int be_panel(uint32_t t) { return quant_traits_of(t)->block_elems > 1; }

enum { ROWS = 19, TOKS = 7, N_OUT = 3 * QUANT_ISA_COUNT };

/* Output o of a case: a path's row kernel (o < QUANT_ISA_COUNT), its panel kernel or its
 * interleaved-group kernel. */
static const char *out_name(int o) {
    static char buf[N_OUT][32];
    snprintf(buf[o], sizeof buf[o], "%s%s", quant_isa_name((quant_isa)(o % QUANT_ISA_COUNT)),
             o >= 2 * QUANT_ISA_COUNT ? " interleaved" : o >= QUANT_ISA_COUNT ? " panel" : "");
    return buf[o];
}

/* One (type, n, raw) case on every path: checks of the module comment. */
static void run_case(uint32_t t, int64_t n, int raw, verdict *vq, verdict *vx, verdict *vs) {
    size_t rb = quant_row_bytes(t, n), xb = quant_act_row_bytes(t, n);
    uint8_t *w = malloc(rb * ROWS);
    float *x = malloc((size_t)n * TOKS * sizeof *x), *wd = malloc((size_t)n * ROWS * sizeof *wd);
    float *xd = malloc((size_t)n * sizeof *xd);
    uint8_t *xq[QUANT_ISA_COUNT];
    static float out[N_OUT][TOKS * ROWS];
    static float pair_out[QUANT_ISA_COUNT][TOKS / 2 * ROWS], ilv_pair_out[QUANT_ISA_COUNT][TOKS / 2 * ROWS];
    static double tol_of[TOKS * ROWS];
    int have[N_OUT] = {0}, have_x = 0;
    void *panel = malloc(quant_panel_bytes(t, n) + 1);
    void *group = malloc(quant_ilv_group_bytes(t, n) + 1);
    make_weights(t, n, ROWS, raw, w, rb);
    for (int r = 0; r < ROWS; r++) quant_dequant_row(t, w + (size_t)r * rb, wd + (size_t)r * n, n, NULL, 0);
    for (int k = 0; k < TOKS; k++) fill_normal(x + (size_t)k * n, n);
    int ab = act_block(t);
    int64_t nb = n / ab;
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        xq[isa] = malloc(xb * TOKS);
        if (!quant_isa_supported((quant_isa)isa)) continue;
        for (int k = 0; k < TOKS; k++)
            quant_act_quant_row((quant_isa)isa, t, x + (size_t)k * n, xq[isa] + (size_t)k * xb, n);
        if (isa > 0 && memcmp(xq[isa], xq[0], xb * TOKS))
            fail(vs, "%s n=%lld: activation bytes on %s differ from the portable path", quant_type_name(t),
                 (long long)n, quant_isa_name((quant_isa)isa));
        quant_dot_rows((quant_isa)isa, t, n, w, rb, ROWS, xq[isa], xb, TOKS, out[isa], ROWS);
        have[isa] = 1;
        if (!quant_panel_usable((quant_isa)isa, t)) continue;
        for (int r0 = 0; r0 < ROWS; r0 += QUANT_PANEL_ROWS) {
            int nr = ROWS - r0 < QUANT_PANEL_ROWS ? ROWS - r0 : QUANT_PANEL_ROWS;
            quant_panel_pack(t, n, w + (size_t)r0 * rb, rb, nr, panel);
            quant_panel_dot((quant_isa)isa, t, n, panel, nr, xq[isa], xb, TOKS, out[QUANT_ISA_COUNT + isa] + r0, ROWS);
            if (quant_ilv_group_bytes(t, n) && quant_ilv_usable((quant_isa)isa, t)) {
                /* the panel from the interleaved group gives the same products, bit for bit */
                static float again[TOKS * ROWS];
                void *p2 = malloc(quant_panel_bytes(t, n));
                quant_ilv_pack(t, n, w + (size_t)r0 * rb, rb, nr, group);
                quant_panel_pack_ilv((quant_isa)isa, t, n, group, p2);
                /* this path's unpacking gives the portable one's bytes (SIMD: dot_simd_pack.h) */
                void *p3 = malloc(quant_panel_bytes(t, n));
                quant_panel_pack_ilv(QUANT_ISA_REF, t, n, group, p3);
                if (memcmp(p2, p3, quant_panel_bytes(t, n)))
                    fail(vs, "%s n=%lld %s: the interleaved group's panel differs from the portable unpacking",
                         quant_type_name(t), (long long)n, quant_isa_name((quant_isa)isa));
                free(p3);
                quant_panel_dot((quant_isa)isa, t, n, p2, nr, xq[isa], xb, TOKS, again, ROWS);
                for (int k = 0; k < TOKS; k++)
                    if (memcmp(again + k * ROWS, out[QUANT_ISA_COUNT + isa] + k * ROWS + r0, (size_t)nr * sizeof(float)))
                        fail(vs, "%s n=%lld %s: the panel of the interleaved group gives other products (token %d)",
                             quant_type_name(t), (long long)n, quant_isa_name((quant_isa)isa), k);
                free(p2);
            }
            /* rows 2p and 2p + 1 taken as token p's pair */
            quant_panel_dot_pair((quant_isa)isa, t, n, panel, nr, xq[isa], xb, TOKS / 2, pair_out[isa] + r0, ROWS);
            if (quant_panel_x_usable((quant_isa)isa, t)) {
                /* the staged pairs (a group short of tokens: zero-filled) give the pair kernel's
                 * products, bit for bit */
                enum { NP = TOKS / 2 };
                QUANT_STATIC_ASSERT(NP < QUANT_PANEL_XTOK, "a short group");
                static float xo[NP * QUANT_PANEL_ROWS];
                void *px = malloc(quant_panel_x_bytes(t, n));
                quant_panel_x_pack(t, n, xq[isa], xb, NP, px);
                quant_panel_dot_pair_x((quant_isa)isa, t, n, panel, nr, px, NP, xo, QUANT_PANEL_ROWS);
                for (int p = 0; p < NP; p++)
                    if (memcmp(xo + p * QUANT_PANEL_ROWS, pair_out[isa] + p * ROWS + r0, (size_t)nr * sizeof(float)))
                        fail(vs, "%s n=%lld %s: staged pairs give other products than the pair kernel (token %d)",
                             quant_type_name(t), (long long)n, quant_isa_name((quant_isa)isa), p);
                free(px);
                have_x = 1;
            }
        }
        have[QUANT_ISA_COUNT + isa] = 1;
        if (!quant_ilv_usable((quant_isa)isa, t)) continue;
        for (int r0 = 0; r0 < ROWS; r0 += QUANT_ILV_ROWS) {
            int nr = ROWS - r0 < QUANT_ILV_ROWS ? ROWS - r0 : QUANT_ILV_ROWS;
            quant_ilv_pack(t, n, w + (size_t)r0 * rb, rb, nr, group);
            quant_ilv_dot((quant_isa)isa, t, n, group, nr, xq[isa], xb, TOKS, out[2 * QUANT_ISA_COUNT + isa] + r0, ROWS);
            quant_ilv_dot_pair((quant_isa)isa, t, n, group, nr, xq[isa], xb, TOKS / 2, ilv_pair_out[isa] + r0, ROWS);
        }
        have[2 * QUANT_ISA_COUNT + isa] = 1;
    }
    if (be_panel(t) && !have[QUANT_ISA_COUNT])
        fail(vs, "%s: the portable path has no panel kernel", quant_type_name(t));
    int want_ilv = t == QUANT_Q4_0 || t == QUANT_Q4_1 || t == QUANT_Q5_0 || t == QUANT_Q5_1 || t == QUANT_Q8_0 ||
                   t == QUANT_Q2_K || t == QUANT_Q3_K || t == QUANT_Q4_K || t == QUANT_Q5_K || t == QUANT_Q6_K;
    if (want_ilv && quant_isa_supported(QUANT_ISA_AVX512) && !have[2 * QUANT_ISA_COUNT + QUANT_ISA_AVX512])
        fail(vs, "%s: the AVX-512 path has no interleaved kernel", quant_type_name(t));
    if (be_panel(t) && quant_isa_supported(QUANT_ISA_AVX512) && !have_x)
        fail(vs, "%s: the AVX-512 path has no staged pair kernel", quant_type_name(t));
    /* prompts run the staged pairs on whichever AVX-512 path this processor takes (AVX512W's
     * two-token panels without them ran 1.2-1.7x slower) */
    if (be_panel(t) && quant_isa_best() >= QUANT_ISA_AVX512 && !quant_panel_x_usable(quant_isa_best(), t))
        fail(vs, "%s: the %s path (this processor's) has no staged pair kernel", quant_type_name(t),
             quant_isa_name(quant_isa_best()));
    for (int k = 0; k < TOKS; k++) {
        quant_act_dequant_row(t, xq[0] + (size_t)k * xb, xd, n);
        const float *xk = x + (size_t)k * n;
        for (int r = 0; r < ROWS; r++) {
            const float *wr = wd + (size_t)r * n;
            double exact = 0, exq = 0, absq = 0, budget_act = 0;
            for (int64_t b = 0; b < nb; b++) {
                double amax = 0, wmax = 0;
                for (int64_t j = b * ab; j < (b + 1) * ab; j++) {
                    amax = fmax(amax, fabs(xk[j]));
                    wmax = fmax(wmax, fabs(wr[j]));
                }
                double d = ab > 1 ? amax / 127.0 : 0.0;
                for (int64_t j = b * ab; j < (b + 1) * ab; j++) {
                    exact += (double)wr[j] * xk[j];
                    exq += (double)wr[j] * xd[j];
                    absq += (fabs(wr[j]) + (ab > 1 ? wmax : 0)) * fabs(xd[j]);
                    budget_act += fabs(wr[j]) * d / 2;
                }
            }
            double r_tol = (double)(nb + 16) * 0x1p-23 * absq + 1e-35;
            tol_of[k * ROWS + r] = r_tol;
            for (int isa = 0; isa < N_OUT; isa++) {
                if (!have[isa]) continue;
                double got = out[isa][k * ROWS + r];
                const char *in = out_name(isa);
                if (!(fabs(got - exq) <= r_tol))
                    fail(vq, "%s n=%lld %s row %d tok %d: %.9g vs %.9g on the quantised activations (tol %.3g)",
                         quant_type_name(t), (long long)n, in, r, k, got, exq, r_tol);
                note(vq, fabs(got - exq), r_tol);
                if (!(fabs(got - exact) <= budget_act + r_tol))
                    fail(vx, "%s n=%lld %s row %d tok %d: %.9g vs exact %.9g (budget %.3g)", quant_type_name(t),
                         (long long)n, in, r, k, got, exact, budget_act + r_tol);
                note(vx, fabs(got - exact), budget_act + r_tol);
                double ref = out[0][k * ROWS + r];
                if (isa > 0 && !(fabs(got - ref) <= 2 * r_tol))
                    fail(vs, "%s n=%lld %s row %d tok %d: %.9g vs portable %.9g (tol %.3g)", quant_type_name(t),
                         (long long)n, in, r, k, got, ref, 2 * r_tol);
                if (isa > 0) note(vs, fabs(got - ref), 2 * r_tol);
            }
        }
    }
    /* a pair's panel product: the sum of its two rows' panel products, within both budgets */
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        if (!have[QUANT_ISA_COUNT + isa]) continue;
        for (int p = 0; p < TOKS / 2; p++)
            for (int r = 0; r < ROWS; r++) {
                double want = (double)out[QUANT_ISA_COUNT + isa][2 * p * ROWS + r] +
                              out[QUANT_ISA_COUNT + isa][(2 * p + 1) * ROWS + r];
                double tol = 2 * (tol_of[2 * p * ROWS + r] + tol_of[(2 * p + 1) * ROWS + r]);
                double got = pair_out[isa][p * ROWS + r];
                if (!(fabs(got - want) <= tol))
                    fail(vs, "%s n=%lld %s pair panel row %d token %d: %.9g vs the rows' sum %.9g (tol %.3g)",
                         quant_type_name(t), (long long)n, quant_isa_name((quant_isa)isa), r, p, got, want, tol);
                note(vs, fabs(got - want), tol);
                if (!have[2 * QUANT_ISA_COUNT + isa]) continue;
                want = (double)out[2 * QUANT_ISA_COUNT + isa][2 * p * ROWS + r] +
                       out[2 * QUANT_ISA_COUNT + isa][(2 * p + 1) * ROWS + r];
                got = ilv_pair_out[isa][p * ROWS + r];
                if (!(fabs(got - want) <= tol))
                    fail(vs, "%s n=%lld %s pair interleaved row %d token %d: %.9g vs the rows' sum %.9g (tol %.3g)",
                         quant_type_name(t), (long long)n, quant_isa_name((quant_isa)isa), r, p, got, want, tol);
                note(vs, fabs(got - want), tol);
            }
    }
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) free(xq[isa]);
    free(panel);
    free(group);
    free(w);
    free(x);
    free(wd);
    free(xd);
}

static void test_types(void) {
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        uint32_t t = types[ti];
        int be = quant_traits_of(t)->block_elems;
        static const int64_t float_n[] = {1, 7, 33, 1000, 2048};
        static const int64_t b32_n[] = {32, 96, 1024, 2080};
        static const int64_t k_n[] = {256, 768, 2048, 2816};
        const int64_t *ns = be == 1 ? float_n : be == 32 ? b32_n : k_n;
        int nn = be == 1 ? 5 : 4;
        verdict vq = {0}, vx = {0}, vs = {0};
        for (int i = 0; i < nn; i++)
            for (int raw = 0; raw < (be > 1 ? 2 : 1); raw++) run_case(t, ns[i], raw, &vq, &vx, &vs);
        char name[128];
        snprintf(name, sizeof name, "dot %s: every path equals the f64 dot of the quantised activations", quant_type_name(t));
        CHECK(!vq.bad, name, "%s (%d bad)", vq.why, vq.bad);
        snprintf(name, sizeof name, "dot %s: within the activation-quantisation budget of the exact dot", quant_type_name(t));
        CHECK(!vx.bad, name, "%s (%d bad)", vx.why, vx.bad);
        snprintf(name, sizeof name, "dot %s: SIMD paths%s match the portable one", quant_type_name(t),
                 be_panel(t) ? " and every panel and interleaved kernel (rows and pairs)" : "");
        CHECK(!vs.bad, name, "%s (%d bad)", vs.why, vs.bad);
        printf("  info: %s worst error / budget: %.3f quantised, %.3f exact, %.3f SIMD vs portable\n",
               quant_type_name(t), vq.worst, vx.worst, vs.worst);
    }
}

static void test_check(void) {
    char err[512];
    int rc = quant_dot_check(QUANT_IQ2_XXS, 256, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "IQ2_XXS") && strstr(err, quant_supported_list()),
          "quant_dot_check refuses IQ2_XXS and lists the supported types", "rc %d, \"%s\"", rc, err);
    rc = quant_dot_check(QUANT_Q4_K, 300, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "300") && strstr(err, "Q4_K"), "quant_dot_check refuses a partial block",
          "rc %d, \"%s\"", rc, err);
    CHECK(quant_dot_check(QUANT_Q8_0, 64, err, sizeof err) == 0 && quant_dot_check(QUANT_F32, 3, err, sizeof err) == 0 &&
              quant_dot_check(QUANT_Q6_K, 0, err, sizeof err) == -1 && quant_dot_check(4, 32, err, sizeof err) == -1,
          "quant_dot_check accepts whole blocks of supported types only", "wrong answer");
    CHECK(quant_act_row_bytes(QUANT_Q4_0, 64) == 80 && quant_act_row_bytes(QUANT_Q4_K, 512) == 584 &&
              quant_act_row_bytes(QUANT_F16, 5) == 20 && quant_act_row_bytes(QUANT_Q4_K, 100) == 0,
          "quant_act_row_bytes", "Q4_0 64 -> %zu", quant_act_row_bytes(QUANT_Q4_0, 64));
    printf("  info: best path here: %s\n", quant_isa_name(quant_isa_best()));
    for (int isa = 1; isa < QUANT_ISA_COUNT; isa++)
        if (!quant_isa_supported((quant_isa)isa))
            SKIP(quant_isa_name((quant_isa)isa), "this CPU lacks the path; its kernels were not run");
}

/* Activation codes: zero rows give d = 0 and codes 0; the block's largest magnitude maps to
 * +-127; sums of 16 and d * sum(q) match the codes. */
static void test_act(void) {
    float x[512];
    int bad = 0;
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        if (!quant_isa_supported((quant_isa)isa)) continue;
        block_q8_K k[2];
        block_q8_a a[16];
        memset(x, 0, sizeof x);
        for (int i = 256; i < 512; i++) x[i] = (float)(i - 400) * 0.5f;
        quant_act_quant_row((quant_isa)isa, QUANT_Q4_K, x, k, 512);
        quant_act_quant_row((quant_isa)isa, QUANT_Q4_0, x, a, 512);
        if (k[0].d != 0 || k[1].d != 72.0f / 127.0f || k[1].qs[255] != 98 || k[1].qs[0] != -127) bad++;
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += k[1].qs[16 * g + j];
            if (s != k[1].bsums[g] || k[0].bsums[g]) bad++;
        }
        for (int b = 0; b < 16; b++) {
            int s = 0, mx = 0;
            for (int j = 0; j < 32; j++) s += a[b].qs[j], mx = abs(a[b].qs[j]) > mx ? abs(a[b].qs[j]) : mx;
            if (a[b].s != a[b].d * (float)s || (b >= 8 && mx != 127) || (b < 8 && (mx || a[b].d != 0))) bad++;
        }
    }
    CHECK(!bad, "activation quantisation: zero blocks, the extreme code, sums", "%d bad", bad);
}

/* The activation pair (quant_act_quant_row_pair): hi is the plain 8-bit row, and hi + lo stands
 * for x within half a 127 * 254th of each block's largest magnitude (lo rounds x - hi to the nearest
 * of its codes, whose step is at most hi's over 254), on every path, for both 8-bit formats; the
 * float formats copy x and leave lo zero. */
static void test_act_pair(void) {
    static const uint32_t wt[] = {QUANT_Q4_1, QUANT_Q6_K, QUANT_F16};
    float x[512], hi_v[512], lo_v[512];
    uint8_t hi[2048], lo[2048], plain[2048];
    int bad = 0;
    double worst = 0;
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        if (!quant_isa_supported((quant_isa)isa)) continue;
        for (size_t ti = 0; ti < sizeof wt / sizeof wt[0]; ti++) {
            uint32_t t = wt[ti];
            int blk = quant_act_of(t) == QUANT_ACT_Q8 ? 32 : quant_act_of(t) == QUANT_ACT_Q8_K ? QK_K : 1;
            for (int rep = 0; rep < 20; rep++) {
                fill_normal(x, 512);
                size_t nb = quant_act_row_bytes(t, 512);
                quant_act_quant_row_pair((quant_isa)isa, t, x, hi, lo, 512);
                quant_act_quant_row(QUANT_ISA_REF, t, x, plain, 512);
                if (memcmp(hi, plain, nb)) bad++;
                quant_act_dequant_row(t, hi, hi_v, 512);
                quant_act_dequant_row(t, lo, lo_v, 512);
                for (int b = 0; b < 512; b += blk) {
                    double amax = 0;
                    for (int j = b; j < b + blk; j++) amax = fmax(amax, fabs(x[j]));
                    double budget = blk == 1 ? 0 : amax / (2 * 127.0 * 254.0) * (1 + 1e-3) + amax * 0x1p-22;
                    for (int j = b; j < b + blk; j++) {
                        double e = fabs((double)hi_v[j] + lo_v[j] - x[j]);
                        if (!(e <= budget)) bad++;
                        if (budget > 0) worst = fmax(worst, e / budget);
                        if (blk == 1 && lo_v[j] != 0) bad++;
                    }
                }
            }
        }
    }
    CHECK(!bad, "activation pairs: hi is the 8-bit row, hi + lo within amax / (2 * 127 * 254) of x", "%d bad", bad);
    printf("  info: activation pair worst error / budget %.3f\n", worst);
}

/* Every code at its largest (all block bytes 0xFF, scales 1) against activations all at +-127:
 * the sums the SIMD paths keep in 16 bits before widening them (AVX2's maddubs partials, a
 * kernel's flush span) are at their extremes; every path's row and interleaved kernels must
 * still give the portable path's products. */
static void test_extreme(void) {
    enum { NX = 512, RX = QUANT_ILV_ROWS };
    char name[96], why[200] = "";
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = types[ti];
        const quant_traits *tr = quant_traits_of(t);
        if (tr->block_elems == 1) continue;
        const size_t rb = quant_row_bytes(t, NX), xb = quant_act_row_bytes(t, NX);
        uint8_t *w = malloc(RX * rb), *xq = malloc(2 * xb), *g = malloc(quant_ilv_group_bytes(t, NX) + 1);
        float x[NX], ref[2][RX], got[RX];
        int f[2], bad = 0;
        scale_fields(t, f);
        memset(w, 0xFF, RX * rb);
        for (size_t b = 0; b < RX * rb / (size_t)tr->block_bytes; b++)
            for (int k = 0; k < 2; k++)
                if (f[k] >= 0) memcpy(w + b * (size_t)tr->block_bytes + (size_t)f[k], &(uint16_t){0x3C00}, 2);
        for (int sign = -1; sign <= 1; sign += 2) {
            for (int i = 0; i < NX; i++) x[i] = (float)sign;
            quant_act_quant_row_pair(QUANT_ISA_REF, t, x, xq, xq + xb, NX);
            for (int k = 0; k < 2; k++) quant_dot_rows(QUANT_ISA_REF, t, NX, w, rb, RX, xq + k * xb, xb, 1, ref[k], 1);
            for (int isa = 1; isa < QUANT_ISA_COUNT; isa++) {
                if (!quant_isa_supported((quant_isa)isa)) continue;
                for (int il = 0; il < 2; il++) {
                    if (il && !quant_ilv_usable((quant_isa)isa, t)) continue;
                    if (il) {
                        quant_ilv_pack(t, NX, w, rb, RX, g);
                        quant_ilv_dot_pair((quant_isa)isa, t, NX, g, RX, xq, xb, 1, got, RX);
                    } else {
                        float lo[RX];
                        quant_dot_rows((quant_isa)isa, t, NX, w, rb, RX, xq, xb, 1, got, 1);
                        quant_dot_rows((quant_isa)isa, t, NX, w, rb, RX, xq + xb, xb, 1, lo, 1);
                        for (int r = 0; r < RX; r++) got[r] += lo[r];
                    }
                    for (int r = 0; r < RX; r++) {
                        const double want = (double)ref[0][r] + ref[1][r];
                        if (fabs(got[r] - want) > 1e-4 * fabs(want) + 1e-3) {
                            if (!bad++)
                                snprintf(why, sizeof why, "%s %s %s x=%+d row %d: %.9g vs %.9g", quant_type_name(t),
                                         quant_isa_name((quant_isa)isa), il ? "interleaved" : "rows", sign, r,
                                         got[r], want);
                        }
                    }
                }
            }
        }
        snprintf(name, sizeof name, "dot %s: largest codes against +-127 activations, every path", quant_type_name(t));
        CHECK(!bad, name, "%s (%d bad)", why, bad);
        free(w), free(xq), free(g);
    }
}

int main(void) {
    uint64_t seed = 0;
    const char *env = getenv("QUANT_SEED");
    if (env && *env) {
        seed = strtoull(env, NULL, 10);
    } else {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&seed, sizeof seed, 1, f) != 1) seed = (uint64_t)time(NULL);
        if (f) fclose(f);
    }
    rng_state = seed;
    printf("  info: random seed %llu (rerun with QUANT_SEED=%llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    test_check();
    test_act();
    test_act_pair();
    test_types();
    test_extreme();
    return test_done();
}
