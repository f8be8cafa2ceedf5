/* Kernel lab: prefill / batched-decode GEMM (gemm.cuh, gemm_panel.cuh, gemm_wg.cuh) on repacked
 * weights, X f16. First table: the f16-panel path at n = 512 on the 8b shapes, v2 (the default)
 * against v5 (mma.sync), v4 (wgmma) and v6 (v4 without its proxy fence), through cu_gemm_f16_split
 * with full scratch, the dequantisation phase alone (cu_gemm_f16_dequant: GB/s of repacked bytes
 * read plus f16 written) and cuBLAS; MiB sets cfg.panel_limit (default 32). Second table (plain
 * "gemm" only): gemm v2, v1, v3 and v7 (wgmma on weights dequantised in registers) side by side
 * (gemm_lab.h's cu_gemm_cfg variant) through cu_gemm_f16_split_with with full scratch, the engine's path, and v3 in one
 * pass (cu_gemm_f16) where the split cuts K. "gemm v7": v2 against v7 at n = 16, 32, 64, 128 on the
 * 8b decode shapes (q/k/v and gate/up stacked); "gemm v7split": v7 with its slice model against
 * forced slice counts (cfg.force_slices), to tune the model (oldplanes: the model before bf0e875);
 * "gemm choice": variant 7's v7 against its panels per matrix, and its rule (gp_wanted); n=N,...
 * sets the token counts of v7split and choice. Each run is checked on ~64 sampled
 * rows against quant_dequant_row + f64 and timed (median of 10 after an L2 flush) as TFLOP/s =
 * 2 rows k n / time and as weight GB/s (repacked bytes / time, the bound at small n); at n >= 128
 * next to cuBLAS (GemmEx, f16 in, f32 out and compute) on the same weights dequantised to f16, the
 * yardstick. Usage: gemm [panel | v7 | v7split [oldplanes] | choice] [n=N,...] [type=T] [MiB] [nowgmma] (nowgmma: without v4, v6 and v7,
 * should they fault). */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>
#include "tests/gpu/gen.h"
#include "tests/kbench/lab.h"
#include "kernels/kernels.h"
#include "kernels/gemm_lab.h"

/* The configuration every launch here passes (gemm_lab.h; the engine's is CU_GEMM_PRODUCTION). */
static cu_gemm_cfg g_gcfg = {2, 0, 1, 0, 1, 0};

static int g_fail = 0;
static bool g_no_wgmma = false; /* "nowgmma": leave v4, v6 and v7 out */

/* One quantised matrix of fresh random weights for a table row: the repacked weights (dr) and
 * their f16 dequantisation (dw16, cuBLAS's input) on the device, and ~64 sampled rows (rs)
 * dequantised on the host (dq) for the f64 reference. */
struct lab_matrix {
    std::vector<int64_t> rs;
    std::vector<float> dq;
    void *dr = nullptr, *dw16 = nullptr;
    size_t rb = 0;
};

static void lab_matrix_make(lab_matrix &m, gen_rng *r, uint32_t t, int64_t rows, int64_t k) {
    char err[256];
    const size_t wb = quant_row_bytes(t, k) * rows;
    m.rb = cu_matvec_repacked_bytes(t, rows, k);
    std::vector<uint8_t> w(wb);
    gen_weights(r, t, rows, k, w.data());
    for (int64_t i = 0; i < rows; i += (rows / 64) | 1) m.rs.push_back(i);
    if (m.rs.back() != rows - 1) m.rs.push_back(rows - 1);
    m.dq.resize(m.rs.size() * k);
    for (size_t s = 0; s < m.rs.size(); s++)
        quant_dequant_row(t, w.data() + m.rs[s] * quant_row_bytes(t, k), m.dq.data() + s * k, k, err, sizeof err);
    std::vector<uint16_t> w16(rows * k);
    std::vector<float> row(k);
    for (int64_t i = 0; i < rows; i++) {
        quant_dequant_row(t, w.data() + i * quant_row_bytes(t, k), row.data(), k, err, sizeof err);
        for (int64_t j = 0; j < k; j++) w16[i * k + j] = quant_f32_to_f16(row[j]);
    }
    void *dw;
    CUDA_CHECK(cudaMalloc(&dw, wb));
    CUDA_CHECK(cudaMemcpy(dw, w.data(), wb, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&m.dr, m.rb));
    CUDA_CHECK(cu_matvec_repack(m.dr, dw, t, rows, k, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(dw));
    CUDA_CHECK(cudaMalloc(&m.dw16, w16.size() * 2));
    CUDA_CHECK(cudaMemcpy(m.dw16, w16.data(), w16.size() * 2, cudaMemcpyHostToDevice));
}

static void lab_matrix_free(lab_matrix &m) {
    CUDA_CHECK(cudaFree(m.dr));
    CUDA_CHECK(cudaFree(m.dw16));
}

/* The f64 products of the sampled rows with n tokens of x ([n][k] f16): ref[s * n + c]. */
static std::vector<double> lab_ref(const lab_matrix &m, const std::vector<uint16_t> &x, int n, int64_t k) {
    std::vector<double> ref(m.rs.size() * n);
    for (size_t s = 0; s < m.rs.size(); s++)
        for (int c = 0; c < n; c++) {
            double acc = 0;
            for (int64_t j = 0; j < k; j++) acc += (double)m.dq[s * k + j] * quant_f16_to_f32(x[(size_t)c * k + j]);
            ref[s * n + c] = acc;
        }
    return ref;
}

/* dy ([n][rows] f32 on the device) at the sampled rows against ref: the relative error. */
static double lab_check(const lab_matrix &m, const float *dy, const std::vector<double> &ref, int n, int64_t rows) {
    std::vector<float> y((size_t)n * rows), got(m.rs.size() * n);
    CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    for (size_t s = 0; s < m.rs.size(); s++)
        for (int c = 0; c < n; c++) got[s * n + c] = y[(size_t)c * rows + m.rs[s]];
    return gen_rel_err(got.data(), ref.data(), (int64_t)got.size());
}

/* Kernels of the small-n tables: cu_gemm_f16_split under variant 1, 2, 3 or 7 (split as the
 * launcher picks, or for 7 with forced > 0 that many slices: cfg.force_slices), v3 in one pass
 * (cu_gemm_f16), cuBLAS f16 (n >= 128 only). */
enum { M_V3_ONE_PASS = 30, M_CUBLAS = 0 };
struct lab_mode {
    int v, forced;
};

/* One matrix: for each n, sampled reference, then every mode timed and checked, TFLOP/s, weight
 * GB/s and the speed against v2 (the first mode, when it is v2). */
static void bench(lab &L, cublasHandle_t cb, gen_rng *r, uint32_t t, int64_t rows, int64_t k, const std::vector<int> &ns,
                  const std::vector<lab_mode> &modes) {
    const int nmax = *std::max_element(ns.begin(), ns.end());
    lab_matrix mat;
    lab_matrix_make(mat, r, t, rows, k);
    void *const dr = mat.dr, *const dw16 = mat.dw16;
    const size_t rb = mat.rb;
    std::vector<uint16_t> x((size_t)nmax * k);
    void *dx, *scr = nullptr;
    float *dy;
    CUDA_CHECK(cudaMalloc(&dx, x.size() * 2));
    CUDA_CHECK(cudaMalloc(&dy, (size_t)nmax * rows * 4));
    size_t sb = 0;
    for (const lab_mode &m : modes) {
        if (m.v == M_V3_ONE_PASS || m.v == M_CUBLAS) continue;
        g_gcfg.variant = m.v;
        g_gcfg.force_slices = m.forced;
        for (int n : ns) sb = std::max(sb, cu_gemm_scratch_bytes_with(&g_gcfg, rows, k, n));
    }
    g_gcfg.force_slices = 0;
    if (sb) CUDA_CHECK(cudaMalloc(&scr, sb));
    for (int n : ns) {
        for (auto &v : x) v = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
        CUDA_CHECK(cudaMemcpy(dx, x.data(), (size_t)n * k * 2, cudaMemcpyHostToDevice));
        const std::vector<double> ref = lab_ref(mat, x, n, k);
        const double flop = 2.0 * rows * k * n;
        const float one = 1, zero = 0;
        double v2_ms = 0;
        for (const lab_mode &m : modes) {
            if (m.v == M_CUBLAS && n < 128) continue;
            if (m.v == 7 && (g_no_wgmma || n >= 512)) continue; /* from 512 tokens variant 7 may take the panels */
            g_gcfg.variant = m.v == M_V3_ONE_PASS ? 3 : m.v == M_CUBLAS ? 2 : m.v;
            g_gcfg.force_slices = m.forced;
            int slices = 1;
            if (m.v != M_CUBLAS && m.v != M_V3_ONE_PASS) slices = cu_gemm_split_slices(&g_gcfg, t, rows, k, n, sb);
            if (m.v == M_V3_ONE_PASS && cu_gemm_scratch_bytes_with(&g_gcfg, rows, k, n) == 0) continue; /* the same as v3 */
            if (m.forced && slices != m.forced) continue; /* the shape or the scratch does not allow it */
            auto run = [&] {
                if (m.v == M_CUBLAS)
                    CUBLAS_CHECK(cublasGemmEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, n, (int)k, &one, dw16, CUDA_R_16F,
                                              (int)k, dx, CUDA_R_16F, (int)k, &zero, dy, CUDA_R_32F, (int)rows,
                                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                else if (m.v == M_V3_ONE_PASS) CUDA_CHECK(cu_gemm_f16_with(&g_gcfg, dy, dr, t, (const uint16_t *)dx, rows, k, n, 0));
                else CUDA_CHECK(cu_gemm_f16_split_with(&g_gcfg, dy, dr, t, (const uint16_t *)dx, rows, k, n, scr, sb, 0));
            };
            CUDA_CHECK(cudaMemset(dy, 0xff, (size_t)n * rows * 4));
            run();
            CUDA_CHECK(cudaDeviceSynchronize());
            const double rel = lab_check(mat, dy, ref, n, rows);
            const bool ok = rel < 2e-3;
            if (!ok && m.v != M_CUBLAS) g_fail++;
            const double ms = L.time_ms(run, 10);
            if (m.v == 2 && !m.forced) v2_ms = ms;
            char speed[32] = "", name[32];
            if (v2_ms > 0 && !(m.v == 2 && !m.forced)) snprintf(speed, sizeof speed, "%.2fx", v2_ms / ms);
            if (m.v == M_CUBLAS) snprintf(name, sizeof name, "cuBLAS f16");
            else if (m.v == M_V3_ONE_PASS) snprintf(name, sizeof name, "v3 1-pass");
            else snprintf(name, sizeof name, "gemm v%d%s", m.v, m.forced ? " forced" : "");
            printf("| %-4s | %5lldx%-5lld | %3d | %-13s | %2d | %8.1f | %6.0f | %6.1f | %5s | %.1e %s |\n",
                   quant_type_name(t), (long long)rows, (long long)k, n, name, slices, ms * 1e3,
                   rb / (ms * 1e-3) / 1e9, flop / (ms * 1e-3) / 1e12, speed, rel, ok ? "ok" : "FAIL");
            fflush(stdout);
        }
    }
    g_gcfg.force_slices = 0;
    g_gcfg.variant = 2;
    if (scr) CUDA_CHECK(cudaFree(scr));
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
    lab_matrix_free(mat);
}

/* One matrix of the panel table: sampled reference, then v2, v5, v4, the dequantisation alone and
 * cuBLAS at n tokens. */
static void bench_panel(lab &L, cublasHandle_t cb, gen_rng *r, uint32_t t, int64_t rows, int64_t k, int n) {
    lab_matrix mat;
    lab_matrix_make(mat, r, t, rows, k);
    void *const dr = mat.dr, *const dw16 = mat.dw16;
    const size_t rb = mat.rb;
    std::vector<uint16_t> x((size_t)n * k);
    for (auto &v : x) v = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
    void *dx, *scr = nullptr;
    float *dy;
    CUDA_CHECK(cudaMalloc(&dx, x.size() * 2));
    CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&dy, (size_t)n * rows * 4));
    size_t sb = 0;
    for (int v : {2, 4, 5, 6}) {
        cu_gemm_cfg c = g_gcfg;
        c.variant = v;
        sb = std::max(sb, cu_gemm_scratch_bytes_with(&c, rows, k, n));
    }
    CUDA_CHECK(cudaMalloc(&scr, sb));
    const std::vector<double> ref = lab_ref(mat, x, n, k);
    const double flop = 2.0 * rows * k * n;
    const float one = 1, zero = 0;
    double v2_ms = 0;
    /* m: variant v of cu_gemm_f16_split (v4 and v6 last: a wgmma fault ends the run), 0 the
     * dequantisation alone, -1 cuBLAS */
    static const int modes[] = {2, 5, 0, -1, 4, 6};
    for (int m : modes) {
        if (m >= 4 && m != 5 && g_no_wgmma) continue;
        const char *name = m == 2 ? "gemm v2" : m == 5 ? "gemm v5" : m == 4 ? "gemm v4" : m == 6 ? "gemm v6" :
                           m == 0 ? "dequant" : "cuBLAS f16";
        if (m > 0) g_gcfg.variant = m;
        auto run = [&] {
            if (m > 0) CUDA_CHECK(cu_gemm_f16_split_with(&g_gcfg, dy, dr, t, (const uint16_t *)dx, rows, k, n, scr, sb, 0));
            else if (m == 0) CUDA_CHECK(cu_gemm_f16_dequant(&g_gcfg, scr, sb, dr, t, rows, k, 0));
            else
                CUBLAS_CHECK(cublasGemmEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, n, (int)k, &one, dw16, CUDA_R_16F,
                                          (int)k, dx, CUDA_R_16F, (int)k, &zero, dy, CUDA_R_32F, (int)rows,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        };
        double rel = 0;
        bool ok = true;
        if (m != 0) {
            CUDA_CHECK(cudaMemset(dy, 0xff, (size_t)n * rows * 4));
            run();
            CUDA_CHECK(cudaDeviceSynchronize());
            rel = lab_check(mat, dy, ref, n, rows);
            ok = rel < 2e-3;
            if (!ok && m > 0) g_fail++;
        }
        const double ms = L.time_ms(run, 10);
        if (m == 2) v2_ms = ms;
        char speed[32] = "", perf[32];
        if (m != 2) snprintf(speed, sizeof speed, "%.2fx", v2_ms / ms);
        if (m == 0) /* repacked bytes read + f16 bytes written, per second */
            snprintf(perf, sizeof perf, "%.0f GB/s", (rb + 2.0 * rows * k) / (ms * 1e-3) / 1e9);
        else snprintf(perf, sizeof perf, "%.1f", flop / (ms * 1e-3) / 1e12);
        printf("| %-4s | %5lldx%-5lld | %3d | %-10s | %8.1f | %10s | %5s | %s |\n", quant_type_name(t), (long long)rows,
               (long long)k, n, name, ms * 1e3, perf, speed, m == 0 ? "-" : ok ? "ok" : "FAIL");
        fflush(stdout);
    }
    g_gcfg.variant = 2;
    CUDA_CHECK(cudaFree(scr));
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
    lab_matrix_free(mat);
}

/* Variant 7's choice at prompt token counts: v7 alone, the panel path alone, and the rule
 * (panel_rule 1 from 512 tokens, as production runs it), each timed and checked, with the
 * matrix's panel count; the rule's line says how far it is from the faster of the two. */
static void bench_choice(lab &L, gen_rng *r, uint32_t t, int64_t rows, int64_t k, const std::vector<int> &ns) {
    const int nmax = *std::max_element(ns.begin(), ns.end());
    lab_matrix mat;
    lab_matrix_make(mat, r, t, rows, k);
    std::vector<uint16_t> x((size_t)nmax * k);
    void *dx, *scr = nullptr;
    float *dy;
    CUDA_CHECK(cudaMalloc(&dx, x.size() * 2));
    CUDA_CHECK(cudaMalloc(&dy, (size_t)nmax * rows * 4));
    g_gcfg.variant = 7;
    size_t sb = 0;
    cu_gemm_cfg most = g_gcfg; /* the panel from 128 tokens: room for every configuration below */
    most.panel_min_n = 128;
    for (int n : ns) sb = std::max(sb, cu_gemm_scratch_bytes_with(&most, rows, k, n < 256 ? 256 : n));
    CUDA_CHECK(cudaMalloc(&scr, sb));
    for (int n : ns) {
        for (auto &v : x) v = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
        CUDA_CHECK(cudaMemcpy(dx, x.data(), (size_t)n * k * 2, cudaMemcpyHostToDevice));
        const std::vector<double> ref = lab_ref(mat, x, n, k);
        double ms[3];
        for (int c = 0; c < 3; c++) { /* v7, panel, rule */
            g_gcfg.panel_min_n = c == 0 ? 1 << 30 : c == 1 ? 128 : 512;
            g_gcfg.panel_rule = c == 2;
            auto run = [&] { CUDA_CHECK(cu_gemm_f16_split_with(&g_gcfg, dy, mat.dr, t, (const uint16_t *)dx, rows, k, n, scr, sb, 0)); };
            CUDA_CHECK(cudaMemset(dy, 0xff, (size_t)n * rows * 4));
            run();
            CUDA_CHECK(cudaDeviceSynchronize());
            const double rel = lab_check(mat, dy, ref, n, rows);
            if (!(rel < 2e-3)) g_fail++;
            ms[c] = L.time_ms(run, 10);
            static const char *const names[] = {"v7", "panel", "rule"};
            const double best = ms[0] < ms[1] ? ms[0] : ms[1];
            char vs[32] = "";
            if (c == 2) snprintf(vs, sizeof vs, "%+.1f%%", (ms[2] / best - 1) * 100);
            printf("| %-4s | %5lldx%-5lld | %4d | %-5s | %8.1f | %6.1f | %6s | %.1e %s |\n", quant_type_name(t),
                   (long long)rows, (long long)k, n, names[c], ms[c] * 1e3, 2.0 * rows * k * n / (ms[c] * 1e-3) / 1e12,
                   vs, rel, rel < 2e-3 ? "ok" : "FAIL");
            fflush(stdout);
        }
    }
    g_gcfg.panel_rule = 1;
    g_gcfg.panel_min_n = 512;
    g_gcfg.variant = 2;
    CUDA_CHECK(cudaFree(scr));
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
    lab_matrix_free(mat);
}

int main(int argc, char **argv) {
    if (!lab_has_device("gemm")) return 0;
    enum { ALL, PANEL, V7, V7SPLIT, CHOICE } what = ALL;
    std::vector<int> choice_ns = {256, 512, 1024}, split_ns = {16, 32, 64, 128};
    const char *only = nullptr; /* type=NAME: that weight type alone (v7, choice) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "panel")) what = PANEL;
        else if (!strcmp(argv[i], "v7")) what = V7;
        else if (!strcmp(argv[i], "v7split")) what = V7SPLIT;
        else if (!strcmp(argv[i], "choice")) what = CHOICE;
        else if (!strncmp(argv[i], "n=", 2)) { /* choice's token counts, e.g. n=1024,2048 */
            choice_ns.clear();
            for (const char *c = argv[i] + 2; *c;) {
                const int v = atoi(c);
                if (v > 0) choice_ns.push_back(v);
                c = strchr(c, ',');
                if (!c) break;
                c++;
            }
            if (choice_ns.empty()) choice_ns = {256, 512, 1024};
            split_ns = choice_ns;
        }
        else if (!strncmp(argv[i], "type=", 5)) only = argv[i] + 5;
        else if (!strcmp(argv[i], "oldplanes")) g_gcfg.plane_model = 0; /* v7split: the model before bf0e875 */
        else if (!strcmp(argv[i], "nowgmma")) g_no_wgmma = true;
        else if (atoi(argv[i]) > 0) g_gcfg.panel_limit = (size_t)atoi(argv[i]) << 20;
        else {
            fprintf(stderr, "usage: gemm [panel | v7 | v7split [oldplanes] | choice] [n=N,N...] [type=T] [MiB] [nowgmma]\n");
            return 1;
        }
    }
    lab L;
    cublasHandle_t cb;
    CUBLAS_CHECK(cublasCreate(&cb));
    gen_rng r = {0x777ull ^ (uint64_t)time(NULL)};
    g_gcfg.panel_min_n = 512; /* as production (CU_GEMM_PRODUCTION): variant 7 runs v7 below it */
    const char *const small_head =
        "| type | rows x k | n | kernel | slices | us | weight GB/s | TFLOP/s | vs v2 | rel err |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n";
    /* the 8b decode shapes: q/k/v stacked, wo, gate/up stacked, down */
    static const int64_t dec_shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
    if (what == ALL || what == PANEL) {
        printf("| type | rows x k | n | kernel | us | TFLOP/s | vs v2 | check |\n|---|---|---|---|---|---|---|---|\n");
        static const int64_t panel_shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {1024, 4096}};
        for (uint32_t t : {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q6_K, QUANT_Q8_0})
            for (const auto &s : panel_shapes) bench_panel(L, cb, &r, t, s[0], s[1], 512);
    }
    if (what == ALL) {
        printf("\n%s", small_head);
        static const int64_t shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}, {32000, 4096}};
        const std::vector<lab_mode> modes = {{2, 0}, {1, 0}, {3, 0}, {M_V3_ONE_PASS, 0}, {7, 0}, {M_CUBLAS, 0}};
        for (uint32_t t : {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q6_K})
            for (const auto &s : shapes) bench(L, cb, &r, t, s[0], s[1], {16, 32, 64, 128, 512}, modes);
    }
    if (what == V7) { /* v7 next to v2 at batched-decode token counts */
        printf("%s", small_head);
        for (uint32_t t : {QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q4_0, QUANT_Q8_0})
            if (!only || !strcmp(only, quant_type_name(t)))
                for (const auto &s : dec_shapes) bench(L, cb, &r, t, s[0], s[1], {16, 32, 64, 128}, {{2, 0}, {7, 0}});
    }
    if (what == V7SPLIT) { /* v7's slice model (first v7 row) against forced slice counts */
        printf("%s", small_head);
        std::vector<lab_mode> modes = {{2, 0}, {7, 0}};
        for (int s : {1, 2, 3, 4, 6, 8, 12, 16}) modes.push_back({7, s});
        /* the 8b q4_k_m's: Q/K stacked (Q4_K), V (Q6_K), wo, gate/up, down (either type) */
        static const int64_t km_shapes[][2] = {{5120, 4096}, {1024, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
        for (uint32_t t : {QUANT_Q4_K, QUANT_Q6_K})
            for (const auto &s : km_shapes) bench(L, cb, &r, t, s[0], s[1], split_ns, modes);
    }
    if (what == CHOICE) { /* v7 or panels at prompt sizes, on the 1b, 8b and 70b matrices as grouped */
        printf("| type | rows x k | n | path | us | TFLOP/s | rule vs best | rel err |\n|---|---|---|---|---|---|---|---|\n");
        static const int64_t shapes[][2] = {{2560, 2048}, {512, 2048}, {2048, 2048}, {16384, 2048}, {2048, 8192},
                                            {5120, 4096}, {1024, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336},
                                            {9216, 8192}, {1024, 8192}, {8192, 8192}, {57344, 8192}, {8192, 28672}};
        for (uint32_t t : {QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q4_0})
            if (!only || !strcmp(only, quant_type_name(t)))
                for (int i = 0; i < (t == QUANT_Q4_0 || t == QUANT_Q5_K ? 10 : 15); i++) /* the 1b's and 8b's */
                    bench_choice(L, &r, t, shapes[i][0], shapes[i][1], choice_ns);
    }
    CUBLAS_CHECK(cublasDestroy(cb));
    printf("%s kbench gemm: %d check failures\n", g_fail ? "FAIL" : "PASS", g_fail);
    return g_fail ? 1 : 0;
}
