/* Unit tests of engine/cpu_matmul.h: products of every weight type with odd row counts and token
 * counts (decode and prompt tilings) on no pool and pools of 1..3 threads and every path this
 * CPU runs, with activation pairs (the default) and 8-bit rows alone, against f64 sums over the
 * dequantised weights and the quantised activations (the budget is f32 rounding, derived in
 * test_dot.c), each weight also repacked into interleaved groups where the path has them (the
 * decode form), bit-identical whatever the thread count (each
 * output element is one kernel's work, so the split must not change it); and the checks on a
 * weight's description. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "engine/cpu_matmul.h"
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

static const uint32_t types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1,
                                 QUANT_Q8_0, QUANT_Q2_K, QUANT_Q3_K, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};

/* One weight of type t, [n_rows][n_cols], rows padded by 8 bytes (row_bytes > the minimum). */
static void case_type(uint32_t t, threadpool *pools[4], char *why, size_t wn, int *bad, int *bad_det) {
    int be = quant_traits_of(t)->block_elems;
    int64_t n_cols = be == 1 ? 136 : be == 32 ? 352 : 512, n_rows = 37;
    static const int64_t toks[] = {1, 3, 13, 33, 70};  /* row kernels to 15 (Q5: 47), panels from 16 */
    size_t rb = quant_row_bytes(t, n_cols) + 8, xb = quant_act_row_bytes(t, n_cols);
    uint8_t *w = calloc((size_t)n_rows, rb);
    float *wd = malloc((size_t)(n_rows * n_cols) * sizeof *wd), *tmp = malloc((size_t)n_cols * sizeof *tmp);
    float *x = malloc((size_t)(70 * n_cols) * sizeof *x), *xd = malloc((size_t)n_cols * sizeof *xd);
    float *out = malloc((size_t)(70 * n_rows) * sizeof *out), *first = malloc((size_t)(70 * n_rows) * sizeof *first);
    void *xq = malloc(xb), *xq_lo = malloc(xb);
    float *xd_lo = malloc((size_t)n_cols * sizeof *xd_lo);
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t c = 0; c < n_cols; c++) tmp[c] = rng_normal() * 0.05f;
        quant_quant_row(t, tmp, w + (size_t)r * rb, n_cols, NULL, 0);
        quant_dequant_row(t, w + (size_t)r * rb, wd + r * n_cols, n_cols, NULL, 0);
    }
    for (int64_t i = 0; i < 70 * n_cols; i++) x[i] = rng_normal() * (1 + (i % 7));
    cpu_weight W = {.type = t, .n_cols = n_cols, .n_rows = n_rows, .row_bytes = rb, .data = w};
    char err[256];
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        if (!quant_isa_supported((quant_isa)isa)) continue;
        /* the weight as stored, then (where the path has it) repacked into interleaved groups */
        W.ilv = NULL;
        size_t ilv_bytes = cpu_matmul_repack_bytes(&W, (quant_isa)isa);
        void *ilv = ilv_bytes ? malloc(ilv_bytes) : NULL;
        if (ilv) cpu_matmul_repack(&W, 0, (n_rows + QUANT_ILV_ROWS - 1) / QUANT_ILV_ROWS, ilv);
        for (int il = 0; il < 1 + (ilv != NULL); il++)
        for (int pair = 1; pair >= 0; pair--)
        for (int ti = 0; ti < 5; ti++) {
            int64_t nt = toks[ti];
            W.ilv = il ? ilv : NULL;
            for (int pi = 0; pi < 4; pi++) {
                cpu_matmul_ctx c;
                cpu_matmul_init(&c, pools[pi], (quant_isa)isa);
                c.act_pair = pair;
                for (int64_t i = 0; i < nt * n_rows; i++) out[i] = NAN;
                int rc = cpu_matmul(&c, &W, x, nt, out, err, sizeof err);
                cpu_matmul_free(&c);
                if (rc) {
                    if (!(*bad)++) snprintf(why, wn, "%s: %s", quant_type_name(t), err);
                    continue;
                }
                if (pi == 0) memcpy(first, out, (size_t)(nt * n_rows) * sizeof *out);
                else if (memcmp(first, out, (size_t)(nt * n_rows) * sizeof *out))
                    (*bad_det)++;
                if (pi) continue;
                for (int64_t k = 0; k < nt; k++) {
                    /* paired activations (cpu_matmul_init's default): the products of hi and lo */
                    quant_act_quant_row_pair(QUANT_ISA_REF, t, x + k * n_cols, xq, xq_lo, n_cols);
                    if (!pair) quant_act_quant_row(QUANT_ISA_REF, t, x + k * n_cols, xq, n_cols);
                    quant_act_dequant_row(t, xq, xd, n_cols);
                    quant_act_dequant_row(t, xq_lo, xd_lo, n_cols);
                    if (!pair) memset(xd_lo, 0, (size_t)n_cols * sizeof *xd_lo);
                    for (int64_t r = 0; r < n_rows; r++) {
                        double want = 0, mag = 0, wmax = 0;
                        for (int64_t c2 = 0; c2 < n_cols; c2++) wmax = fmax(wmax, fabs(wd[r * n_cols + c2]));
                        for (int64_t c2 = 0; c2 < n_cols; c2++) {
                            want += (double)wd[r * n_cols + c2] * xd[c2] + (double)wd[r * n_cols + c2] * xd_lo[c2];
                            mag += (fabs(wd[r * n_cols + c2]) + (be > 1 ? wmax : 0)) * (fabs(xd[c2]) + fabs(xd_lo[c2]));
                        }
                        int64_t nb = (1 + pair) * (be == 1 ? n_cols : n_cols / (be == 32 ? 32 : QK_K));
                        double tol = (double)(nb + 16) * 0x1p-23 * mag;
                        double got = out[k * n_rows + r];
                        if (!(fabs(got - want) <= tol) && !(*bad)++)
                            snprintf(why, wn, "%s %s%s %s %lld tokens: out[%lld][%lld] = %.9g, want %.9g (tol %.3g)",
                                     quant_type_name(t), quant_isa_name((quant_isa)isa), il ? " interleaved" : "",
                                     pair ? "paired" : "8-bit", (long long)nt, (long long)k,
                                     (long long)r, got, want, tol);
                    }
                }
            }
        }
        free(ilv);
    }
    free(w), free(wd), free(tmp), free(x), free(xd), free(out), free(first), free(xq), free(xq_lo), free(xd_lo);
}

static void test_products(void) {
    char err[256];
    threadpool *pools[4] = {NULL};
    for (int i = 1; i < 4; i++)
        if (threadpool_create(i, &pools[i], err, sizeof err)) {
            CHECK(0, "threadpool_create for the product tests", "%s", err);
            return;
        }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        char why[300] = "", name[128];
        int bad = 0, bad_det = 0;
        case_type(types[ti], pools, why, sizeof why, &bad, &bad_det);
        snprintf(name, sizeof name,
                 "cpu_matmul %s: 1, 3, 13, 33, 70 tokens x 37 rows, paired and 8-bit activations, stored and repacked, equal the f64 product",
                 quant_type_name(types[ti]));
        CHECK(!bad, name, "%s (%d bad)", why, bad);
        snprintf(name, sizeof name, "cpu_matmul %s: bit-identical on no pool and 1, 2, 3 threads",
                 quant_type_name(types[ti]));
        CHECK(!bad_det, name, "%d products differ from the one-thread result", bad_det);
    }
    for (int i = 1; i < 4; i++) threadpool_destroy(pools[i]);
}

static void test_checks(void) {
    char err[256];
    uint8_t buf[1024] = {0};
    cpu_weight w = {.type = QUANT_Q4_0, .n_cols = 64, .n_rows = 2, .row_bytes = 30, .data = buf};
    CHECK(cpu_matmul_check(&w, err, sizeof err) == -1 && strstr(err, "30 bytes") && strstr(err, "36 needed"),
          "cpu_matmul_check refuses rows shorter than their blocks", "\"%s\"", err);
    w.row_bytes = 36, w.data = NULL;
    CHECK(cpu_matmul_check(&w, err, sizeof err) == -1 && strstr(err, "no data"), "cpu_matmul_check refuses no data",
          "\"%s\"", err);
    w.data = buf, w.type = QUANT_IQ4_XS, w.n_cols = 256;
    CHECK(cpu_matmul_check(&w, err, sizeof err) == -1 && strstr(err, "IQ4_XS"), "cpu_matmul_check refuses IQ4_XS",
          "\"%s\"", err);
    w.type = QUANT_Q4_K, w.n_cols = 200, w.row_bytes = 200;
    CHECK(cpu_matmul_check(&w, err, sizeof err) == -1 && strstr(err, "200"), "cpu_matmul_check refuses a partial K block",
          "\"%s\"", err);
    w.type = QUANT_Q8_0, w.n_cols = 64, w.row_bytes = 68, w.n_rows = 0;
    CHECK(cpu_matmul_check(&w, err, sizeof err) == -1 && strstr(err, "0 rows"), "cpu_matmul_check refuses 0 rows",
          "\"%s\"", err);
}

/* cpu_matmul_multi: three weights of one input (Q, K, V shapes: 256, 16, 21 rows) as one product
 * give each weight's cpu_matmul result bit for bit, stored and repacked, decode and prompt
 * tilings, on the pool, of one type or of types that share an activation format (a Q4_K_M
 * file's Q4_K Q and K beside its Q6_K V); weights of different activation formats are refused. */
static void test_multi(void) {
    char err[256];
    threadpool *pool = NULL;
    if (threadpool_create(2, &pool, err, sizeof err)) {
        CHECK(0, "threadpool_create for the multi-product test", "%s", err);
        return;
    }
    static const uint32_t mt[][3] = {{QUANT_Q4_0, QUANT_Q4_0, QUANT_Q4_0}, {QUANT_Q4_K, QUANT_Q4_K, QUANT_Q4_K},
                                     {QUANT_Q6_K, QUANT_Q6_K, QUANT_Q6_K}, {QUANT_Q5_0, QUANT_Q5_0, QUANT_Q5_0},
                                     {QUANT_Q4_K, QUANT_Q4_K, QUANT_Q6_K}, {QUANT_Q8_0, QUANT_Q4_0, QUANT_Q4_1},
                                     {QUANT_Q5_K, QUANT_Q5_K, QUANT_Q6_K}, {QUANT_Q5_1, QUANT_Q5_0, QUANT_Q5_1},
                                     {QUANT_Q3_K, QUANT_Q3_K, QUANT_Q5_K}, {QUANT_Q2_K, QUANT_Q3_K, QUANT_Q2_K}};
    /* Q's 256 rows take 2 panels an item, K's and V's 1: their panel buffers differ in size */
    static const int64_t rows[3] = {256, 16, 21}, toks[] = {1, 2, 20, 70};
    int bad = 0;
    char why[256] = "";
    for (size_t ti = 0; ti < sizeof mt / sizeof mt[0]; ti++) {
        uint32_t t = mt[ti][0];
        int64_t n_cols = quant_traits_of(t)->block_elems == 32 ? 352 : 512;
        uint8_t *w[3];
        void *ilv[3];
        cpu_weight W[3];
        const cpu_weight *pw[3];
        float *tmp = malloc((size_t)n_cols * sizeof *tmp), *x = malloc((size_t)(70 * n_cols) * sizeof *x);
        for (int k = 0; k < 3; k++) {
            size_t rb = quant_row_bytes(mt[ti][k], n_cols);
            w[k] = malloc(rb * (size_t)rows[k]);
            for (int64_t r = 0; r < rows[k]; r++) {
                for (int64_t c2 = 0; c2 < n_cols; c2++) tmp[c2] = rng_normal() * 0.05f;
                quant_quant_row(mt[ti][k], tmp, w[k] + (size_t)r * rb, n_cols, NULL, 0);
            }
            W[k] = (cpu_weight){.type = mt[ti][k], .n_cols = n_cols, .n_rows = rows[k], .row_bytes = rb, .data = w[k]};
            size_t ib = cpu_matmul_repack_bytes(&W[k], quant_isa_best());
            ilv[k] = ib ? malloc(ib) : NULL;
            if (ilv[k]) cpu_matmul_repack(&W[k], 0, (rows[k] + QUANT_ILV_ROWS - 1) / QUANT_ILV_ROWS, ilv[k]);
            pw[k] = &W[k];
        }
        for (int64_t i = 0; i < 70 * n_cols; i++) x[i] = rng_normal();
        for (int il = 0; il < 2; il++)
            for (size_t ki = 0; ki < sizeof toks / sizeof toks[0]; ki++) {
                int64_t nt = toks[ki];
                float *one[3], *all[3];
                cpu_matmul_ctx c;
                cpu_matmul_init(&c, pool, quant_isa_best());
                for (int k = 0; k < 3; k++) {
                    W[k].ilv = il ? ilv[k] : NULL;
                    one[k] = malloc((size_t)(nt * rows[k]) * sizeof(float));
                    all[k] = malloc((size_t)(nt * rows[k]) * sizeof(float));
                    if (cpu_matmul(&c, &W[k], x, nt, one[k], err, sizeof err) && !bad++)
                        snprintf(why, sizeof why, "%s", err);
                }
                if (cpu_matmul_multi(&c, pw, 3, x, nt, all, err, sizeof err) && !bad++) snprintf(why, sizeof why, "%s", err);
                for (int k = 0; k < 3; k++) {
                    if (memcmp(one[k], all[k], (size_t)(nt * rows[k]) * sizeof(float)) && !bad++)
                        snprintf(why, sizeof why, "%s..%s%s %lld tokens: weight %d differs from its own product",
                                 quant_type_name(t), quant_type_name(mt[ti][2]), il ? " repacked" : "", (long long)nt, k);
                    free(one[k]);
                    free(all[k]);
                }
                cpu_matmul_free(&c);
            }
        for (int k = 0; k < 3; k++) free(w[k]), free(ilv[k]);
        free(tmp);
        free(x);
    }
    CHECK(!bad, "cpu_matmul_multi: Q, K, V shapes in one product equal their own products bit for bit", "%s (%d bad)",
          why, bad);
    /* mixed types are refused with a message */
    uint8_t a[18 * 2] = {0}, b2[144] = {0};
    cpu_weight A = {.type = QUANT_Q4_0, .n_cols = 32, .n_rows = 2, .row_bytes = 18, .data = a};
    cpu_weight B = {.type = QUANT_Q4_K, .n_cols = 256, .n_rows = 1, .row_bytes = 144, .data = b2};
    const cpu_weight *ab[] = {&A, &B};
    float xin[256] = {0}, o1[2], o2[1];
    float *outs[] = {o1, o2};
    cpu_matmul_ctx c;
    cpu_matmul_init(&c, pool, quant_isa_best());
    err[0] = 0;
    int rc = cpu_matmul_multi(&c, ab, 2, xin, 1, outs, err, sizeof err);
    cpu_matmul_free(&c);
    CHECK(rc == -1 && strstr(err, "differ"), "cpu_matmul_multi: weights of different activation formats refused", "rc %d, '%s'", rc,
          err);
    threadpool_destroy(pool);
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
    test_checks();
    test_products();
    test_multi();
    return test_done();
}
