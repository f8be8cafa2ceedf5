/* Kernel lab: decode matvec. CPU reference (quant_dequant_row + f64 dot) on sampled rows of
 * fresh random matrices, then each variant (matvec.cuh: v1 generic, v2-v9 tensor cores, v10 int8
 * X and dp4a, v10a, v10b, ... its compile-time options, mv10_opt, and v11:S, v10 with the weights
 * through a shared-memory ring S stages deep, for every depth that fits; v12, Q5_K on its GGUF rows) timed two ways: one
 * launch after an L2 flush ("1x"), and a chain of launches over enough copies of the matrix to
 * exceed L2 ("chain", as in a decode step). GB/s = (weights + x + y bytes) / time, against the
 * measured copy bandwidth. v1-v9 must be within 1e-4 (||err|| / ||ref||); v10 and v11, which
 * round X to int8, within mvq.h's budget (every row within the worst case of the rounding, rms
 * within twice its expected one), a check the lab first tries on CPU emulations. Usage:
 *   matvec [filter]       every variant at the default shapes (filter: a substring of the type name)
 *   matvec ring [filter]  v10 against v11 at every ring depth, Q4_0 Q4_K Q5_K Q6_K Q8_0, the 8b and
 *                         its output head's shapes, 1 to 4 tokens (Q6_K 2) at 14336x4096
 *   matvec profile TYPE ROWS K VARIANT  one checked launch of one variant (6, v10b, v11 (the
 *                         production depth), v11:5, ...) for ncu. */
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>
#include "tests/gpu/gen.h"
#include "tests/gpu/mvq.h"
#include "tests/kbench/lab.h"
#include "kernels/kernels.h"
#include "tests/kbench/matvec_lab.cuh"
#include "tests/kbench/matvec_k5.cuh"

struct shape { int64_t rows, k; };

static int g_fail = 0;
static int g_profile = 0; /* profile mode: the one variant to run */
static bool g_ring = false; /* ring mode: v10 and v11 only */

/* Lab variant numbers: 1-9 v1-v9; 10 + o v10's option o (v10, v10a, ...; o = MV11_OPT is v11);
 * V11_BASE + c v11 with a ring of at most c stages (c = 2 to MV11_STAGES_MAX). */
#define V11_BASE 20
#define V12_LAB (V11_BASE + MV11_STAGES_MAX + 1) /* v12 (matvec_k5.cuh): Q5_K on its GGUF rows */
#define N_VARIANTS (V12_LAB + 1)
static bool is_v10(int v) { return v >= 10 && v < 10 + MV10_OPTS && v != 10 + MV11_OPT; }
static bool is_v11(int v) { return v >= V11_BASE + 2 && v < V12_LAB; }

template <int T, typename XT>
static void launch_v1(float *y, const void *w, const XT *x, int rows, int k, int n) {
    matvec_v1<T, XT><<<(rows + MV1_ROWS - 1) / MV1_ROWS, 256, MV1_SMEM>>>(y, (const uint8_t *)w, mv_x{x}, rows, k, n);
}

/* v10 with option O (mv10_opt; v11: a ring of at most cap stages); false where it does not apply. */
template <int T, int O>
static bool launch_v10(float *y, const void *w, const void *x, bool xh, int rows, int k, int n, int cap) {
    cudaError_t e = cudaSuccess;
    return xh ? matvec_v10_launch<T, true, mv_x, O>(y, w, mv_x{x}, rows, k, n, 0, pdl_enabled(), &e, cap)
              : matvec_v10_launch<T, false, mv_x, O>(y, w, mv_x{x}, rows, k, n, 0, pdl_enabled(), &e, cap);
}

template <int T>
static bool run_v10(int o, float *y, const void *w, const void *x, bool xh, int rows, int k, int n, int cap) {
    static_assert(MV10_OPTS == 7 && MV11_OPT == 6, "one case per option");
    switch (o) {
    case 0: return launch_v10<T, 0>(y, w, x, xh, rows, k, n, cap);
    case 1: return launch_v10<T, 1>(y, w, x, xh, rows, k, n, cap);
    case 2: return launch_v10<T, 2>(y, w, x, xh, rows, k, n, cap);
    case 3: return launch_v10<T, 3>(y, w, x, xh, rows, k, n, cap);
    case 4: return launch_v10<T, 4>(y, w, x, xh, rows, k, n, cap);
    case 5: return launch_v10<T, 5>(y, w, x, xh, rows, k, n, cap);
    case 6: return launch_v10<T, 6>(y, w, x, xh, rows, k, n, cap);
    default: return false;
    }
}

/* The ring depth v11 takes for type t, rows x k and n tokens under cap (0: it declines). */
static int v11_stages(uint32_t t, int64_t rows, int64_t k, int n, int cap) {
    int sms, smem_max, st = 0;
    switch (t) {
    case QUANT_Q4_0: mv10_takes<QUANT_Q4_0, MV11_OPT>(rows, k, n, false, &sms, &smem_max, cap, &st); break;
    case QUANT_Q4_K: mv10_takes<QUANT_Q4_K, MV11_OPT>(rows, k, n, false, &sms, &smem_max, cap, &st); break;
    case QUANT_Q5_K: mv10_takes<QUANT_Q5_K, MV11_OPT>(rows, k, n, false, &sms, &smem_max, cap, &st); break;
    case QUANT_Q8_0: mv10_takes<QUANT_Q8_0, MV11_OPT>(rows, k, n, false, &sms, &smem_max, cap, &st); break;
    case QUANT_Q6_K: mv10_takes<QUANT_Q6_K, MV11_OPT>(rows, k, n, false, &sms, &smem_max, cap, &st); break;
    default: break;
    }
    return st;
}

/* The lab's name of variant v: v1..v9, v10 with option v - 10 (v10, v10a, v10b, ...), v11:S with
 * S the ring depth it runs (stages, from v11_stages). */
static const char *variant_name(int v, int stages, char *buf, size_t size) {
    if (is_v11(v)) snprintf(buf, size, "v11:%d", stages);
    else if (v == V12_LAB) snprintf(buf, size, "v12");
    else if (v <= 10) snprintf(buf, size, "v%d", v);
    else snprintf(buf, size, "v10%c", 'a' + (v - 11));
    return buf;
}

/* variants 1 and 12 on GGUF layout, the others on the repacked layout; false if not applicable */
static bool run_variant(int v, uint32_t t, float *y, const void *w, const void *x, bool xh, int rows, int k, int n) {
    if (v == V12_LAB) {
        if (!mv12_takes(t, k, n)) return false;
        static bool ready = false; /* once, not between the timed launches */
        if (!ready) mv12_prepare_all();
        ready = true;
        if (xh) matvec_v12_launch<__half, mv_x>(y, w, mv_x{x}, rows, k, n, 0);
        else matvec_v12_launch<float, mv_x>(y, w, mv_x{x}, rows, k, n, 0);
        return true;
    }
    if (v == 1) {
#define V1(TT) case TT: if (xh) launch_v1<TT, __half>(y, w, (const __half *)x, rows, k, n); \
                        else launch_v1<TT, float>(y, w, (const float *)x, rows, k, n); return true;
        switch (t) { V1(QUANT_F32) V1(QUANT_F16) V1(QUANT_Q4_0) V1(QUANT_Q5_0) V1(QUANT_Q8_0) V1(QUANT_Q4_K) V1(QUANT_Q5_K) V1(QUANT_Q6_K) }
#undef V1
        return false;
    }
#define V23(TT, V) case TT: if (xh) matvec_v2_launch<TT, true, V>(y, w, mv_x{x}, rows, k, n, 0); \
                           else matvec_v2_launch<TT, false, V>(y, w, mv_x{x}, rows, k, n, 0); return true;
    if (v == 2) switch (t) { V23(QUANT_Q4_0, 2) V23(QUANT_Q4_K, 2) V23(QUANT_Q8_0, 2) V23(QUANT_Q6_K, 2) }
    if (v == 3) switch (t) { V23(QUANT_Q4_0, 3) V23(QUANT_Q4_K, 3) V23(QUANT_Q5_K, 3) V23(QUANT_Q8_0, 3) V23(QUANT_Q6_K, 3) }
    if (v == 4) switch (t) { V23(QUANT_Q4_0, 4) V23(QUANT_Q4_K, 4) V23(QUANT_Q8_0, 4) V23(QUANT_Q6_K, 4) }
    if (v == 5 && n == 1) switch (t) { V23(QUANT_Q4_0, 5) V23(QUANT_Q4_K, 5) V23(QUANT_Q8_0, 5) V23(QUANT_Q6_K, 5) }
    if (v == 6 && n == 1) switch (t) { V23(QUANT_Q4_0, 6) V23(QUANT_Q4_K, 6) V23(QUANT_Q8_0, 6) V23(QUANT_Q6_K, 6) }
    if (v == 7 && n == 1) switch (t) { V23(QUANT_Q4_0, 7) V23(QUANT_Q4_K, 7) V23(QUANT_Q8_0, 7) V23(QUANT_Q6_K, 7) }
    if (v == 8 && n == 1) switch (t) { V23(QUANT_Q4_0, 8) V23(QUANT_Q4_K, 8) V23(QUANT_Q8_0, 8) V23(QUANT_Q6_K, 8) }
    if (v == 9 && n == 1) switch (t) { V23(QUANT_Q4_0, 9) V23(QUANT_Q4_K, 9) }
#undef V23
    if (is_v10(v) || is_v11(v)) {
        const int o = is_v11(v) ? MV11_OPT : v - 10, cap = is_v11(v) ? v - V11_BASE : MV11_STAGES;
        switch (t) {
        case QUANT_Q4_0: return run_v10<QUANT_Q4_0>(o, y, w, x, xh, rows, k, n, cap);
        case QUANT_Q4_K: return run_v10<QUANT_Q4_K>(o, y, w, x, xh, rows, k, n, cap);
        case QUANT_Q5_K: return run_v10<QUANT_Q5_K>(o, y, w, x, xh, rows, k, n, cap);
        case QUANT_Q8_0: return run_v10<QUANT_Q8_0>(o, y, w, x, xh, rows, k, n, cap);
        case QUANT_Q6_K: return run_v10<QUANT_Q6_K>(o, y, w, x, xh, rows, k, n, cap);
        }
    }
    return false;
}

/* The v10 check on CPU emulations of a 300 x 4096 Q4_0 product: X rounded as v10 does must pass;
 * X with columns 2t and 2t + 1 swapped (a staging-order bug) or each block's scale taken from the
 * next block must fail. Returns the number of wrong verdicts. */
static int selftest_v10(gen_rng *r) {
    const int64_t rows = 300, k = 4096;
    std::vector<uint8_t> w(quant_row_bytes(QUANT_Q4_0, k) * rows);
    gen_weights(r, QUANT_Q4_0, rows, k, w.data());
    std::vector<float> x(k), xq(k), xs(k), xn(k), row(k), got[3];
    for (int64_t i = 0; i < k; i++) x[i] = (float)gen_uniform(r, -1, 1) * (i % 96 < 32 ? 40.0f : i % 96 < 64 ? 1e-3f : 1.0f);
    mvq_round_x(xq.data(), x.data(), k);
    for (int64_t i = 0; i < k; i++) {
        xs[i] = xq[i ^ 1];
        const int64_t b = i / 32, nb = (b + 1) % (k / 32);
        float m = 0, mn = 0;
        for (int j = 0; j < 32; j++) { m = fmaxf(m, fabsf(x[32 * b + j])); mn = fmaxf(mn, fabsf(x[32 * nb + j])); }
        xn[i] = m > 0 ? xq[i] / m * mn : 0.0f;
    }
    std::vector<double> ref(rows);
    std::vector<mvq_budget> bud(rows);
    for (int c = 0; c < 3; c++) got[c].resize(rows);
    char err[256];
    for (int64_t j = 0; j < rows; j++) {
        if (quant_dequant_row(QUANT_Q4_0, w.data() + j * quant_row_bytes(QUANT_Q4_0, k), row.data(), k, err, sizeof err))
            return 1;
        double a = 0, b0 = 0, b1 = 0, b2 = 0;
        for (int64_t i = 0; i < k; i++) {
            a += (double)row[i] * x[i];
            b0 += (double)row[i] * xq[i];
            b1 += (double)row[i] * xs[i];
            b2 += (double)row[i] * xn[i];
        }
        ref[j] = a;
        got[0][j] = (float)b0; got[1][j] = (float)b1; got[2][j] = (float)b2;
        bud[j] = mvq_row_budget(row.data(), x.data(), k);
    }
    const char *what[3] = {"v10's rounding", "columns swapped", "scales of the next block"};
    int wrong = 0;
    for (int c = 0; c < 3; c++) {
        const int ok = mvq_check(got[c].data(), ref.data(), bud.data(), rows, err, sizeof err);
        const bool right = ok == (c == 0);
        wrong += !right;
        printf("%s kbench matvec v10 check on emulated %s: %s (%s)\n", right ? "PASS" : "FAIL", what[c],
               ok ? "accepted" : "rejected", err);
    }
    return wrong;
}

static void bench(lab &L, gen_rng *r, uint32_t t, shape s, int n, bool xh) {
    char err[256];
    const int64_t rows = s.rows, k = s.k;
    size_t wb = quant_row_bytes(t, k) * rows, rb = cu_matvec_repacked_bytes(t, rows, k);
    std::vector<uint8_t> w(wb);
    gen_weights(r, t, rows, k, w.data());
    std::vector<float> x(n * k);
    std::vector<uint16_t> xh16(n * k);
    for (int64_t i = 0; i < n * k; i++) {
        x[i] = (float)gen_uniform(r, -1, 1);
        xh16[i] = quant_f32_to_f16(x[i]);
        if (xh) x[i] = quant_f16_to_f32(xh16[i]);
    }
    /* reference on up to 257 rows spread over the matrix, the last included */
    std::vector<int64_t> rs;
    for (int64_t i = 0; i < rows; i += rows > 257 ? rows / 256 : 1) rs.push_back(i);
    if (rs.back() != rows - 1) rs.push_back(rows - 1);
    std::vector<double> ref(rs.size() * n);
    std::vector<mvq_budget> bud(rs.size() * n); /* v10's budget per row and token */
    std::vector<float> row(k);
    for (size_t j = 0; j < rs.size(); j++) {
        if (quant_dequant_row(t, w.data() + rs[j] * quant_row_bytes(t, k), row.data(), k, err, sizeof err)) {
            printf("FAIL reference %s: %s\n", quant_type_name(t), err);
            exit(1);
        }
        for (int c = 0; c < n; c++) {
            double acc = 0;
            for (int64_t i = 0; i < k; i++) acc += (double)row[i] * x[c * k + i];
            ref[j * n + c] = acc;
            bud[j * n + c] = mvq_row_budget(row.data(), x.data() + c * k, k);
        }
    }
    /* enough copies to exceed L2 several times (>= 256 MB), at most 64 */
    size_t copies = std::max<size_t>(1, std::min<size_t>(64, ((size_t)256 << 20) / std::max(wb, rb) + 1));
    void *dw_raw, *dx;
    CUDA_CHECK(cudaMalloc(&dw_raw, wb));
    CUDA_CHECK(cudaMemcpy(dw_raw, w.data(), wb, cudaMemcpyHostToDevice));
    std::vector<void *> raw(copies), rep(copies);
    for (size_t c = 0; c < copies; c++) {
        CUDA_CHECK(cudaMalloc(&raw[c], wb));
        CUDA_CHECK(cudaMemcpy(raw[c], dw_raw, wb, cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaMalloc(&rep[c], rb));
        CUDA_CHECK(cu_matvec_repack(rep[c], dw_raw, t, rows, k, 0));
    }
    size_t xbytes = (size_t)n * k * (xh ? 2 : 4);
    CUDA_CHECK(cudaMalloc(&dx, xbytes));
    CUDA_CHECK(cudaMemcpy(dx, xh ? (void *)xh16.data() : (void *)x.data(), xbytes, cudaMemcpyHostToDevice));
    float *dy;
    CUDA_CHECK(cudaMalloc(&dy, sizeof(float) * n * rows));
    std::vector<float> y(n * rows);
    int last_stages = -1; /* v11: a cap that gives the depth of the one before is skipped */
    for (int v = 1; v < N_VARIANTS; v++) {
        if (g_profile && v != g_profile) continue;
        if (!g_profile && g_ring && v != 10 && !is_v11(v)) continue;
        if (!is_v10(v) && !is_v11(v) && v >= 10 && v != V12_LAB) continue;
        const int stages = is_v11(v) ? v11_stages(t, rows, k, n, v - V11_BASE) : 0;
        if (is_v11(v) && !g_profile && (stages == 0 || stages == last_stages)) continue;
        if (is_v11(v)) last_stages = stages;
        char vname[16];
        variant_name(v, stages, vname, sizeof vname);
        const std::vector<void *> &wv = v == 1 || v == V12_LAB ? raw : rep;
        CUDA_CHECK(cudaMemset(dy, 0xff, sizeof(float) * n * rows));
        if (!run_variant(v, t, dy, wv[0], dx, xh, (int)rows, (int)k, n)) continue;
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(y.data(), dy, sizeof(float) * n * rows, cudaMemcpyDeviceToHost));
        std::vector<float> got(rs.size() * n);
        for (size_t j = 0; j < rs.size(); j++)
            for (int c = 0; c < n; c++) got[j * n + c] = y[c * rows + rs[j]];
        double rel = gen_rel_err(got.data(), ref.data(), (int64_t)got.size());
        char why[160] = "";
        bool ok = v >= 10 ? mvq_check(got.data(), ref.data(), bud.data(), (int64_t)got.size(), why, sizeof why)
                          : rel < 1e-4;
        if (!ok) g_fail++;
        if (!ok && v >= 10) printf("FAIL %s %s %lldx%lld: %s\n", vname, quant_type_name(t), (long long)rows, (long long)k, why);
        if (g_profile) { /* the second launch of the variant, after an L2 flush, is the one to profile */
            L.flush();
            run_variant(v, t, dy, wv[0], dx, xh, (int)rows, (int)k, n);
            CUDA_CHECK(cudaDeviceSynchronize());
            printf("profiled %s %s %lldx%lld: rel err %.1e\n", vname, quant_type_name(t), (long long)rows, (long long)k, rel);
            continue;
        }
        double ms1 = L.time_ms([&] { run_variant(v, t, dy, wv[0], dx, xh, (int)rows, (int)k, n); }, 20);
        double msc = L.time_ms([&] {
            for (size_t c = 0; c < copies; c++) run_variant(v, t, dy, wv[c], dx, xh, (int)rows, (int)k, n);
        }, 10) / copies;
        double bytes = (double)(v == 1 ? wb : rb) + xbytes + 4.0 * n * rows;
        double g1 = bytes / (ms1 * 1e-3) / 1e9, gc = bytes / (msc * 1e-3) / 1e9;
        printf("| %-4s | %6lldx%-5lld | %s | %d | %s | %8.2f | %6.0f | %4.0f%% | %8.2f | %6.0f | %4.0f%% | %.1e %s |\n",
               quant_type_name(t), (long long)rows, (long long)k, vname, n, xh ? "f16" : "f32", ms1 * 1e3, g1,
               100 * g1 / L.copy_gbs, msc * 1e3, gc, 100 * gc / L.copy_gbs, rel, ok ? "ok" : "FAIL");
        fflush(stdout);
    }
    for (size_t c = 0; c < copies; c++) { CUDA_CHECK(cudaFree(raw[c])); CUDA_CHECK(cudaFree(rep[c])); }
    CUDA_CHECK(cudaFree(dw_raw)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : "";
    gen_rng r0 = {7};
    if (selftest_v10(&r0)) return 1;
    if (argc == 6 && strcmp(argv[1], "profile") == 0) { /* profile TYPE ROWS K VARIANT: one launch for ncu */
        const char *vs = argv[5] + (argv[5][0] == 'v'); /* 6, v6, 10, v10b, v11, v11:5, ... */
        const int num = atoi(vs);
        const char *sfx = vs + strspn(vs, "0123456789");
        g_profile = num;
        if (num == 10 && *sfx >= 'a' && *sfx < 'a' + MV10_OPTS - 2) g_profile = 11 + (*sfx - 'a');
        if (num == 11) g_profile = V11_BASE + (*sfx == ':' ? atoi(sfx + 1) : MV11_STAGES);
        if (g_profile < 1 || (!is_v10(g_profile) && !is_v11(g_profile) && g_profile >= 10)) {
            fprintf(stderr, "matvec profile: unknown variant %s\n", argv[5]);
            return 2;
        }
        gen_rng r = {42};
        for (uint32_t t = 0; t < QUANT_TYPE_COUNT; t++)
            if (quant_traits_of(t) && strcmp(quant_type_name(t), argv[2]) == 0) {
                lab L;
                bench(L, &r, t, {atoll(argv[3]), atoll(argv[4])}, 1, false);
            }
        return g_fail ? 1 : 0;
    }
    if (!lab_has_device("matvec")) return 0;
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    lab L;
    L.measure_copy();
    printf("# %s, %d SMs, L2 %d MB; copy bandwidth (4 GiB d2d, read+write, median of 10): %.0f GB/s\n", p.name,
           p.multiProcessorCount, p.l2CacheSize >> 20, L.copy_gbs);
    printf("| type | rows x k | var | n | x | 1x us | GB/s | %%copy | chain us | GB/s | %%copy | rel err |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    gen_rng r = {0x9E3779B97F4A7C15ull ^ (uint64_t)time(NULL)};
    if (argc > 1 && strcmp(argv[1], "ring") == 0) { /* v10 against v11 at each ring depth */
        g_ring = true;
        filter = argc > 2 ? argv[2] : "";
        const uint32_t rtypes[] = {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q8_0};
        const shape rshapes[] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {28672, 4096}, {32000, 4096},
                                 {128256, 4096}};
        for (uint32_t t : rtypes) {
            if (!strstr(quant_type_name(t), filter)) continue;
            for (shape s : rshapes) bench(L, &r, t, s, 1, false);
            for (int n = 2; n <= (t == QUANT_Q6_K ? 2 : 4); n++) bench(L, &r, t, {14336, 4096}, n, false);
        }
        printf("%s kbench matvec ring: %d check failures\n", g_fail ? "FAIL" : "PASS", g_fail);
        return g_fail ? 1 : 0;
    }
    const uint32_t types[] = {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q8_0, QUANT_Q5_0, QUANT_F16, QUANT_F32};
    const shape shapes[] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {32000, 4096}, {1, 256}, {37, 512}};
    for (uint32_t t : types) {
        if (!strstr(quant_type_name(t), filter)) continue;
        for (shape s : shapes) bench(L, &r, t, s, 1, false);
        if (t == QUANT_Q4_0 || t == QUANT_Q4_K || t == QUANT_Q5_K || t == QUANT_Q6_K || t == QUANT_Q8_0) /* v10 for a few tokens */
            for (int n = 2; n <= 3; n++) bench(L, &r, t, {14336, 4096}, n, false);
        if (t == QUANT_Q5_K) { /* Phi-4-mini's fused QKV; 4 tokens (v11 and v12 take up to 4) */
            bench(L, &r, t, {5120, 3072}, 1, false);
            bench(L, &r, t, {14336, 4096}, 4, false);
        }
        if (t == QUANT_Q4_0 || t == QUANT_Q4_K) {
            bench(L, &r, t, {28672, 4096}, 1, false);
            bench(L, &r, t, {14336, 4096}, 1, true);
            bench(L, &r, t, {14336, 4096}, 4, true);
            bench(L, &r, t, {14336, 4096}, 8, true);
            bench(L, &r, t, {14336, 4096}, 8, false);
        }
    }
    printf("%s kbench matvec: %d check failures\n", g_fail ? "FAIL" : "PASS", g_fail);
    return g_fail ? 1 : 0;
}
