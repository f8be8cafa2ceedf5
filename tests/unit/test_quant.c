/* Unit tests of quant/: the traits table, dequantisation against llama.cpp's golden floats,
 * quantise-then-dequantise error bounds on fresh random data, and exact f16/bf16 rounding. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "quant/quant.h"
#include "test.h"

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- traits ------------------------------------------------------------------------------- */

static void test_traits(void) {
    static const struct { uint32_t id; const char *name; int elems, bytes, supported; } want[] = {
        {0, "F32", 1, 4, 1}, {1, "F16", 1, 2, 1}, {30, "BF16", 1, 2, 1},
        {2, "Q4_0", 32, 18, 1}, {3, "Q4_1", 32, 20, 1}, {6, "Q5_0", 32, 22, 1},
        {7, "Q5_1", 32, 24, 1}, {8, "Q8_0", 32, 34, 1}, {9, "Q8_1", 32, 36, 0},
        {10, "Q2_K", 256, 84, 1}, {11, "Q3_K", 256, 110, 1}, {12, "Q4_K", 256, 144, 1},
        {13, "Q5_K", 256, 176, 1}, {14, "Q6_K", 256, 210, 1}, {15, "Q8_K", 256, 292, 0},
        {16, "IQ2_XXS", 256, 66, 0}, {17, "IQ2_XS", 256, 74, 0}, {18, "IQ3_XXS", 256, 98, 0},
        {19, "IQ1_S", 256, 50, 0}, {20, "IQ4_NL", 32, 18, 0}, {21, "IQ3_S", 256, 110, 0},
        {22, "IQ2_S", 256, 82, 0}, {23, "IQ4_XS", 256, 136, 0}, {24, "I8", 1, 1, 0},
        {25, "I16", 1, 2, 0}, {26, "I32", 1, 4, 0}, {27, "I64", 1, 8, 0}, {28, "F64", 1, 8, 0},
        {29, "IQ1_M", 256, 56, 0}, {34, "TQ1_0", 256, 54, 0}, {35, "TQ2_0", 256, 66, 0},
        {39, "MXFP4", 32, 17, 0},
    };
    int bad = 0, n_known = 0;
    char why[256] = "";
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const quant_traits *t = quant_traits_of(want[i].id);
        if (!t || strcmp(t->name, want[i].name) || t->block_elems != want[i].elems ||
            t->block_bytes != want[i].bytes || !!t->dequant != want[i].supported ||
            quant_is_supported(want[i].id) != want[i].supported ||
            strcmp(quant_type_name(want[i].id), want[i].name)) {
            if (!bad++) snprintf(why, sizeof why, "type %u (%s) has wrong traits", want[i].id, want[i].name);
        }
    }
    for (uint32_t id = 0; id < 64; id++) n_known += quant_traits_of(id) != NULL;
    CHECK(!bad, "quant traits: names and block sizes of every GGUF type", "%s (%d bad)", why, bad);
    CHECK(n_known == (int)(sizeof want / sizeof want[0]), "quant traits: retired and future ids are unknown",
          "%d ids known, want %d", n_known, (int)(sizeof want / sizeof want[0]));
    CHECK(!quant_traits_of(4) && !strcmp(quant_type_name(4), "unknown") && !quant_traits_of(1000) &&
              !quant_is_supported(4) && !quant_is_supported(UINT32_MAX),
          "quant traits: id 4 and out-of-range ids", "retired id 4 or id 1000 has traits");

    /* the supported list is exactly the table's supported names, in id order */
    char list[512] = "";
    for (uint32_t id = 0; id < QUANT_TYPE_COUNT; id++) {
        if (!quant_is_supported(id)) continue;
        if (*list) strcat(list, ", ");
        strcat(list, quant_type_name(id));
    }
    CHECK(!strcmp(list, quant_supported_list()), "quant supported list matches the table",
          "list \"%s\", table \"%s\"", quant_supported_list(), list);

    CHECK(quant_row_bytes(QUANT_Q4_K, 512) == 288 && quant_row_bytes(QUANT_F32, 3) == 12 &&
              quant_row_bytes(QUANT_Q4_0, 4096) == 128 * 18 && quant_row_bytes(QUANT_Q4_0, 0) == 0 &&
              quant_row_bytes(QUANT_IQ2_XXS, 256) == 66,
          "quant_row_bytes of whole blocks", "Q4_K 512 -> %zu", quant_row_bytes(QUANT_Q4_K, 512));
    CHECK(quant_row_bytes(QUANT_Q4_0, 33) == 0 && quant_row_bytes(QUANT_Q6_K, 128) == 0 &&
              quant_row_bytes(4, 32) == 0 && quant_row_bytes(77, 32) == 0 &&
              quant_row_bytes(QUANT_F32, -4) == 0 && quant_row_bytes(QUANT_F64, INT64_MAX) == 0,
          "quant_row_bytes is 0 for partial blocks, unknown types, overflow", "a non-zero size");
}

static void test_errors(void) {
    char err[512];
    float out[64];
    uint8_t blk[64] = {0};
    int rc = quant_dequant_row(QUANT_Q4_0, blk, out, 33, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "33") && strstr(err, "Q4_0") && strstr(err, "32"),
          "quant_dequant_row refuses a partial block", "rc %d, message \"%s\"", rc, err);
    rc = quant_dequant_row(QUANT_IQ2_XXS, blk, out, 256, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "IQ2_XXS") && strstr(err, quant_supported_list()),
          "quant_dequant_row refuses IQ2_XXS and lists the supported types", "rc %d, message \"%s\"", rc, err);
    rc = quant_dequant_row(4, blk, out, 32, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "unknown") && strstr(err, "id 4") && strstr(err, "Q4_K"),
          "quant_dequant_row refuses a retired id", "rc %d, message \"%s\"", rc, err);
    rc = quant_quant_row(QUANT_MXFP4, out, blk, 32, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "MXFP4") && strstr(err, "supported"),
          "quant_quant_row refuses a type without a quantiser", "rc %d, message \"%s\"", rc, err);
    rc = quant_quant_row(QUANT_Q8_0, out, blk, 31, NULL, 0);
    CHECK(rc == -1, "quant_quant_row with no message buffer", "rc %d", rc);
}

/* ---- golden dequantisation ----------------------------------------------------------------- */

static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return p;
}

/* Distance in units in the last place: floats mapped onto a line of integers (-0 == +0). */
static int64_t ulp_dist(float a, float b) {
    int64_t ia = fbits(a), ib = fbits(b);
    if (ia & 0x80000000) ia = -(ia & 0x7fffffff);
    if (ib & 0x80000000) ib = -(ib & 0x7fffffff);
    return ia > ib ? ia - ib : ib - ia;
}

static void test_golden(void) {
    for (uint32_t id = 0; id < QUANT_TYPE_COUNT; id++) {
        if (!quant_is_supported(id)) continue;
        const char *name = quant_type_name(id);
        char rel[128], tname[160];
        size_t nb, nf;
        snprintf(tname, sizeof tname, "quant golden dequant %s", name);
        snprintf(rel, sizeof rel, "golden/quant/%s.blocks", name);
        uint8_t *blocks = read_file(test_shared(rel), &nb);
        snprintf(rel, sizeof rel, "golden/quant/%s.f32", name);
        float *want = read_file(test_shared(rel), &nf);
        if (!blocks || !want) {
            SKIP(tname, "golden files not found under $SHARED/golden/quant");
            free(blocks);
            free(want);
            continue;
        }
        int64_t n = (int64_t)(nf / 4);
        char err[256];
        float *got = malloc(nf);
        if (quant_row_bytes(id, n) != nb) {
            CHECK(0, tname, "%zu bytes of blocks for %lld floats, want %zu", nb, (long long)n, quant_row_bytes(id, n));
        } else if (quant_dequant_row(id, blocks, got, n, err, sizeof err)) {
            CHECK(0, tname, "%s", err);
        } else {
            int exact = id == QUANT_F32 || id == QUANT_F16 || id == QUANT_BF16;
            int64_t worst = 0, at = 0;
            for (int64_t i = 0; i < n; i++) {
                int64_t d = exact ? (fbits(got[i]) != fbits(want[i])) : ulp_dist(got[i], want[i]);
                if (d > worst) {
                    worst = d;
                    at = i;
                }
            }
            CHECK(worst <= (exact ? 0 : 1), tname, "element %lld: got %.9g, want %.9g (%lld ulp)",
                  (long long)at, got[at], want[at], (long long)worst);
        }
        free(got);
        free(blocks);
        free(want);
    }
}

/* ---- quantise then dequantise --------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rng_next(void) {  /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unit(void) { return ((double)(rng_next() >> 11) + 0.5) * 0x1p-53; }
static float rng_normal(void) { return (float)(sqrt(-2.0 * log(rng_unit())) * cos(6.283185307179586 * rng_unit())); }

enum { ROWS = 32, COLS = 1024 };

/* Rows of random data: gaussian with a different scale per row (1e-4 .. 1e2), a few heavy
 * outliers, one all-zero row, one constant row, one all-negative row. */
static void fill_random(float *x) {
    for (int r = 0; r < ROWS; r++) {
        float scale = powf(10.0f, (float)(rng_unit() * 6.0 - 4.0));
        for (int c = 0; c < COLS; c++) {
            float v = scale * rng_normal();
            if (rng_next() % 97 == 0) v *= 8.0f;
            if (r == 1) v = 0.0f;
            if (r == 2) v = 0.37f;
            if (r == 3) v = -fabsf(v);
            x[r * COLS + c] = v;
        }
    }
}

/* The legacy formats' stated bounds, from the reference rounding (x the input, d the block
 * scale as computed in f32, d16 the stored f16 scale, q the code):
 *   Q8_0: d = amax/127, q = round(x/d) in [-127, 127]: |x - d q| <= d/2; storing d16 adds
 *         |q| |d - d16| <= 127 |d - d16|.
 *   Q4_0: d = m/-8, m the element of largest magnitude (so m lands on code 0 exactly); x/d lies
 *         in [-8, 8], q = min(15, trunc(x/d + 8.5)): |x - d (q - 8)| <= |d|/2, except x/d > 7.5,
 *         clamped to 7: there up to |d| (at x = -m). Plus 8 |d - d16|.
 *   Q5_0: the same with 16 and 15.5; plus 16 |d - d16|.
 *   Q4_1/Q5_1: d = (max - min)/(2^b - 1), codes from the min: |err| <= d/2, plus
 *         (2^b - 1) |d - d16| + |min - m16|.
 * Each bound gets a slop of 1e-5 of the block's largest magnitude for f32 rounding. */
static int legacy_bound(uint32_t type, const float *x, const float *y, int n, char *why, size_t wn) {
    int bits = type == QUANT_Q8_0 ? 8 : (type == QUANT_Q4_0 || type == QUANT_Q4_1) ? 4 : 5;
    for (int b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b, *yb = y + 32 * b;
        float amax = 0, m = 0, mn = xb[0], mx = xb[0];
        for (int j = 0; j < 32; j++) {
            if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); m = xb[j]; }
            mn = fminf(mn, xb[j]);
            mx = fmaxf(mx, xb[j]);
        }
        float slop = 1e-5f * amax;
        for (int j = 0; j < 32; j++) {
            float err = fabsf(xb[j] - yb[j]), bound;
            if (type == QUANT_Q8_0) {
                float d = amax / 127.0f, d16 = quant_f16_to_f32(quant_f32_to_f16(d));
                bound = d / 2 + 127 * fabsf(d - d16);
            } else if (type == QUANT_Q4_0 || type == QUANT_Q5_0) {
                float half = (float)(1 << (bits - 1)), d = m / -half;
                float d16 = quant_f16_to_f32(quant_f32_to_f16(d));
                float t = d != 0 ? xb[j] / d : 0;
                bound = (t > half - 0.5f ? fabsf(d) : fabsf(d) / 2) + half * fabsf(d - d16);
            } else {
                float top = (float)((1 << bits) - 1), d = (mx - mn) / top;
                float d16 = quant_f16_to_f32(quant_f32_to_f16(d)), m16 = quant_f16_to_f32(quant_f32_to_f16(mn));
                bound = d / 2 + top * fabsf(d - d16) + fabsf(mn - m16);
            }
            if (!(err <= bound + slop)) {
                snprintf(why, wn, "block %d element %d: x %.9g -> %.9g, error %.3g > bound %.3g", b, j,
                         xb[j], yb[j], err, bound + slop);
                return 0;
            }
        }
    }
    return 1;
}

/* The K formats: each sub-block stores a scale s and an offset o (from d, dmin and the 4/6-bit
 * sub-block scale and min); its representable values are s k + o for the format's codes k.
 * The reference recomputes every code against the stored s and o, so each weight must decode
 * to the representable value nearest to it (up to f32 rounding). Data-independent limits do not
 * exist for these formats (a sub-block scale can round to 0 relative to the block's largest),
 * so the size of the error is checked through the RMS figure. */
static void k_params(uint32_t type, const uint8_t *blk, int s, float *scale, float *off, int *kmin, int *kmax) {
    if (type == QUANT_Q2_K) {
        const block_q2_K *b = (const block_q2_K *)blk;
        *scale = quant_f16_to_f32(b->d) * (float)(b->scales[s] & 15);
        *off = -quant_f16_to_f32(b->dmin) * (float)(b->scales[s] >> 4);
        *kmin = 0, *kmax = 3;
    } else if (type == QUANT_Q3_K) {
        const block_q3_K *b = (const block_q3_K *)blk;
        int lo = s < 8 ? b->scales[s] & 15 : b->scales[s - 8] >> 4;
        int hi = (b->scales[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
        *scale = quant_f16_to_f32(b->d) * (float)((lo | hi << 4) - 32);
        *off = 0, *kmin = -4, *kmax = 3;
    } else if (type == QUANT_Q6_K) {
        const block_q6_K *b = (const block_q6_K *)blk;
        *scale = quant_f16_to_f32(b->d) * (float)b->scales[s];
        *off = 0, *kmin = -32, *kmax = 31;
    } else {  /* Q4_K, Q5_K: same header */
        const block_q4_K *b = (const block_q4_K *)blk;
        const uint8_t *q = b->scales;
        int sc = s < 4 ? q[s] & 63 : (q[s + 4] & 15) | (q[s - 4] >> 6) << 4;
        int mn = s < 4 ? q[s + 4] & 63 : (q[s + 4] >> 4) | (q[s] >> 6) << 4;
        *scale = quant_f16_to_f32(b->d) * (float)sc;
        *off = -quant_f16_to_f32(b->dmin) * (float)mn;
        *kmin = 0, *kmax = type == QUANT_Q4_K ? 15 : 31;
    }
}

static int k_nearest(uint32_t type, const float *x, const float *y, const uint8_t *q, int n, char *why, size_t wn) {
    const quant_traits *t = quant_traits_of(type);
    int sub = (type == QUANT_Q4_K || type == QUANT_Q5_K) ? 32 : 16;
    for (int i = 0; i < n; i++) {
        int b = i / QK_K, s = (i % QK_K) / sub, kmin, kmax;
        float scale, off;
        k_params(type, q + (size_t)b * t->block_bytes, s, &scale, &off, &kmin, &kmax);
        float best = INFINITY;
        for (int k = kmin; k <= kmax; k++) best = fminf(best, fabsf(x[i] - (scale * (float)k + off)));
        float err = fabsf(x[i] - y[i]);
        float slop = 1e-5f * (fabsf(x[i]) + fabsf(scale) * 32 + fabsf(off)) + 1e-30f;
        if (!(err <= best + slop)) {
            snprintf(why, wn, "element %d: x %.9g -> %.9g, error %.3g but the nearest value is %.3g away",
                     i, x[i], y[i], err, best);
            return 0;
        }
    }
    return 1;
}

static void test_roundtrip(uint64_t seed) {
    /* RMS error / RMS signal over the gaussian rows: generous ceilings, about 1.5x the figures
     * of the formats on gaussian data (the printed figures show the real values). */
    static const struct { uint32_t type; double max_rel_rms; } types[] = {
        {QUANT_F16, 4e-4}, {QUANT_BF16, 3e-3}, {QUANT_Q8_0, 0.013}, {QUANT_Q4_0, 0.2},
        {QUANT_Q4_1, 0.2}, {QUANT_Q5_0, 0.1}, {QUANT_Q5_1, 0.1}, {QUANT_Q2_K, 0.5},
        {QUANT_Q3_K, 0.3}, {QUANT_Q4_K, 0.15}, {QUANT_Q5_K, 0.075}, {QUANT_Q6_K, 0.04},
    };
    float *x = malloc(sizeof(float) * ROWS * COLS), *y = malloc(sizeof(float) * ROWS * COLS);
    uint8_t *q = malloc((size_t)ROWS * COLS * 4);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t type = types[ti].type;
        const char *name = quant_type_name(type);
        char tname[128], why[256] = "", err[256];
        rng_state = seed + ti;
        fill_random(x);
        int ok = 1;
        double e2 = 0, s2 = 0;
        size_t rb = quant_row_bytes(type, COLS);
        for (int r = 0; r < ROWS && ok; r++) {
            const float *xr = x + r * COLS;
            float *yr = y + r * COLS;
            uint8_t *qr = q + r * rb;
            if (quant_quant_row(type, xr, qr, COLS, err, sizeof err) ||
                quant_dequant_row(type, qr, yr, COLS, err, sizeof err)) {
                snprintf(why, sizeof why, "%s", err);
                ok = 0;
                break;
            }
            /* row-relative RMS so every scale of row counts the same */
            double re2 = 0, rs2 = 0;
            for (int c = 0; c < COLS; c++) {
                re2 += (double)(xr[c] - yr[c]) * (xr[c] - yr[c]);
                rs2 += (double)xr[c] * xr[c];
            }
            if (r != 1 && r != 2) {
                e2 += re2 / rs2;
                s2 += 1;
            }
            char rwhy[200];
            if (r == 1 && re2 != 0) {
                snprintf(why, sizeof why, "an all-zero row decodes with error %.3g", sqrt(re2));
                ok = 0;
            } else if (type == QUANT_F16 || type == QUANT_BF16) {
                for (int c = 0; c < COLS && ok; c++) {
                    uint16_t h = type == QUANT_F16 ? quant_f32_to_f16(xr[c]) : quant_f32_to_bf16(xr[c]);
                    if ((qr[2 * c] | qr[2 * c + 1] << 8) != h) {
                        snprintf(why, sizeof why, "row %d element %d: %.9g stored as 0x%04x, want 0x%04x", r, c,
                                 xr[c], qr[2 * c] | qr[2 * c + 1] << 8, h);
                        ok = 0;
                    }
                }
            } else if (type == QUANT_Q8_0 || type == QUANT_Q4_0 || type == QUANT_Q5_0 ||
                       type == QUANT_Q4_1 || type == QUANT_Q5_1) {
                if (!legacy_bound(type, xr, yr, COLS, rwhy, sizeof rwhy)) {
                    snprintf(why, sizeof why, "row %d %s", r, rwhy);
                    ok = 0;
                }
            } else if (!k_nearest(type, xr, yr, qr, COLS, rwhy, sizeof rwhy)) {
                snprintf(why, sizeof why, "row %d %s", r, rwhy);
                ok = 0;
            }
        }
        double rel = ok ? sqrt(e2 / s2) : 0;
        printf("  info: %s round trip: relative RMS error %.3e (ceiling %.1e)\n", name, rel, types[ti].max_rel_rms);
        snprintf(tname, sizeof tname, "quant round trip %s within the format's bound", name);
        CHECK(ok, tname, "%s (seed %llu)", why, (unsigned long long)seed);
        snprintf(tname, sizeof tname, "quant round trip %s RMS error", name);
        CHECK(ok && rel <= types[ti].max_rel_rms, tname, "relative RMS %.3e > %.1e (seed %llu)", rel,
              types[ti].max_rel_rms, (unsigned long long)seed);
    }
    free(x);
    free(y);
    free(q);
}

/* ---- f16 / bf16 ----------------------------------------------------------------------------- */

/* Value of a half by the textbook formula, independent of the bit tricks under test. */
static float half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
}

static void test_f16(void) {
    int bad = 0;
    char why[200] = "";
    for (uint32_t h = 0; h < 65536; h++) {
        float f = quant_f16_to_f32((uint16_t)h), want = half_value((uint16_t)h);
        int is_nan = ((h >> 10) & 31) == 31 && (h & 1023);
        int ok = is_nan ? (isnan(f) && (signbit(f) != 0) == ((h & 0x8000) != 0))
                        : fbits(f) == fbits(want) && quant_f32_to_f16(f) == h;
        if (is_nan) {  /* NaN goes back to a quiet NaN with the same sign */
            uint16_t r = quant_f32_to_f16(f);
            ok = ok && ((r >> 10) & 31) == 31 && (r & 0x200) && (r & 0x8000) == (h & 0x8000);
        }
        if (!ok && !bad++) snprintf(why, sizeof why, "half 0x%04x -> %.9g", h, f);
    }
    CHECK(!bad, "f16 -> f32 exact for all 65536 halves, and back", "%s (%d bad)", why, bad);

    /* Round to nearest even: between consecutive halves a < b (b may be +inf, whose rounding
     * boundary is 65520), the midpoint goes to the even code, anything either side of it to the
     * nearer one. Covers zero, subnormals, the subnormal/normal seam and overflow. */
    bad = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double a = half_value((uint16_t)h), b = h + 1 == 0x7c00 ? 65536.0 : half_value((uint16_t)(h + 1));
        float mid = (float)((a + b) / 2);
        for (int sgn = 0; sgn < 2; sgn++) {
            float s = sgn ? -1.0f : 1.0f;
            uint16_t sb = sgn ? 0x8000 : 0, even = (uint16_t)((h & 1) ? h + 1 : h);
            uint16_t got_mid = quant_f32_to_f16(s * mid);
            uint16_t got_lo = quant_f32_to_f16(s * nextafterf(mid, 0.0f));
            uint16_t got_hi = quant_f32_to_f16(s * nextafterf(mid, INFINITY));
            if ((got_mid != (sb | even) || got_lo != (sb | h) || got_hi != (sb | (h + 1))) && !bad++)
                snprintf(why, sizeof why, "around %.9g: got 0x%04x 0x%04x 0x%04x", s * mid, got_lo, got_mid, got_hi);
        }
    }
    CHECK(!bad, "f32 -> f16 rounds to nearest even (every midpoint, both sides)", "%s (%d bad)", why, bad);

    CHECK(quant_f32_to_f16(INFINITY) == 0x7c00 && quant_f32_to_f16(-INFINITY) == 0xfc00 &&
              quant_f32_to_f16(1e30f) == 0x7c00 && quant_f32_to_f16(-65520.0f) == 0xfc00 &&
              quant_f32_to_f16(65519.996f) == 0x7bff && quant_f32_to_f16(0x1p-126f) == 0 &&
              quant_f32_to_f16(-0x1p-149f) == 0x8000 && quant_f32_to_f16(-0.0f) == 0x8000 &&
              (quant_f32_to_f16(bitsf(0x7f800001)) & 0x7e00) == 0x7e00 &&
              quant_f32_to_f16(bitsf(0xffc00000)) == 0xfe00,
          "f32 -> f16 overflow, f32 subnormals, signed zero, signalling NaN", "a special value converted wrongly");

    bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = quant_bf16_to_f32((uint16_t)h);
        int is_nan = (h & 0x7fff) > 0x7f80;
        if (fbits(f) != h << 16 || (!is_nan && quant_f32_to_bf16(f) != h) ||
            (is_nan && (quant_f32_to_bf16(f) | 0x40) != (h | 0x40))) {
            if (!bad++) snprintf(why, sizeof why, "bf16 0x%04x", h);
        }
    }
    for (uint32_t h = 0; h < 0x7f80; h++) {  /* midpoints between consecutive bf16 values */
        for (int sgn = 0; sgn < 2; sgn++) {
            uint32_t sb = sgn ? 0x80000000u : 0, mid = sb | h << 16 | 0x8000;
            uint16_t even = (uint16_t)((h & 1) ? h + 1 : h), hs = (uint16_t)(sb >> 16);
            if ((quant_f32_to_bf16(bitsf(mid)) != (hs | even) || quant_f32_to_bf16(bitsf(mid - 1)) != (hs | h) ||
                 quant_f32_to_bf16(bitsf(mid + 1)) != (hs | (h + 1))) && !bad++)
                snprintf(why, sizeof why, "around bits 0x%08x", mid);
        }
    }
    CHECK(!bad && quant_f32_to_bf16(bitsf(0x7f800001)) == 0x7fc0 && quant_f32_to_bf16(INFINITY) == 0x7f80,
          "bf16 <-> f32 exact, round to nearest even, NaN stays NaN", "%s (%d bad)", why, bad);
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
    printf("  info: random seed %llu (rerun with QUANT_SEED=%llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    test_traits();
    test_errors();
    test_golden();
    test_roundtrip(seed);
    test_f16();
    return test_done();
}
