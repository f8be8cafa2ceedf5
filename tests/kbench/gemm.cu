/* Kernel lab: prefill GEMM (gemm.cuh) on repacked Q4_0 / Q4_K weights, X f16, n = 512 tokens.
 * Checked on sampled rows against quant_dequant_row + f64; timed (median of 10 after an L2
 * flush) as TFLOP/s = 2 rows k n / time, next to cuBLAS (GemmEx, f16 in, f32 out and compute) on
 * the same weights dequantised to f16, the yardstick. Then a small-n table (batched decode,
 * prefill micro-batches) on the 8b shapes: one-pass gemm_f16 against gemm_f16_split, with the
 * weight stream in GB/s (repacked bytes / time) next to TFLOP/s. Usage: gemm */
#include <cstdio>
#include <vector>
#include "tests/gpu/gen.h"
#include "tests/kbench/lab.h"
#include "kernels/kernels.h"

static int g_fail = 0;

static void bench(lab &L, cublasHandle_t cb, gen_rng *r, uint32_t t, int64_t rows, int64_t k, int64_t n) {
    char err[256];
    size_t wb = quant_row_bytes(t, k) * rows;
    std::vector<uint8_t> w(wb);
    gen_weights(r, t, rows, k, w.data());
    std::vector<uint16_t> x(n * k), w16(rows * k);
    for (auto &v : x) v = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
    std::vector<float> row(k);
    std::vector<int64_t> rs;
    for (int64_t i = 0; i < rows; i += rows / 64) rs.push_back(i);
    std::vector<double> ref(rs.size() * n);
    for (int64_t i = 0; i < rows; i++) {
        quant_dequant_row(t, w.data() + i * quant_row_bytes(t, k), row.data(), k, err, sizeof err);
        for (int64_t j = 0; j < k; j++) w16[i * k + j] = quant_f32_to_f16(row[j]);
    }
    for (size_t s = 0; s < rs.size(); s++) {
        quant_dequant_row(t, w.data() + rs[s] * quant_row_bytes(t, k), row.data(), k, err, sizeof err);
        for (int64_t c = 0; c < n; c++) {
            double acc = 0;
            for (int64_t j = 0; j < k; j++) acc += (double)row[j] * quant_f16_to_f32(x[c * k + j]);
            ref[s * n + c] = acc;
        }
    }
    void *dw, *dr, *dx, *dw16;
    float *dy;
    CUDA_CHECK(cudaMalloc(&dw, wb));
    CUDA_CHECK(cudaMemcpy(dw, w.data(), wb, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&dr, matvec_repacked_bytes(t, rows, k)));
    CUDA_CHECK(matvec_repack(dr, dw, t, rows, k, 0));
    CUDA_CHECK(cudaMalloc(&dx, x.size() * 2));
    CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&dw16, w16.size() * 2));
    CUDA_CHECK(cudaMemcpy(dw16, w16.data(), w16.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&dy, n * rows * 4));
    auto ours = [&] { CUDA_CHECK(gemm_f16(dy, dr, t, (const uint16_t *)dx, rows, k, n, 0)); };
    const float one = 1, zero = 0;
    auto theirs = [&] {
        CUBLAS_CHECK(cublasGemmEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)n, (int)k, &one, dw16, CUDA_R_16F, (int)k,
                                  dx, CUDA_R_16F, (int)k, &zero, dy, CUDA_R_32F, (int)rows, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    };
    double flop = 2.0 * rows * k * n;
    for (int v = 0; v < 2; v++) {
        CUDA_CHECK(cudaMemset(dy, 0xff, n * rows * 4));
        if (v == 0) ours(); else theirs();
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> y(n * rows), got(rs.size() * n);
        CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
        for (size_t s = 0; s < rs.size(); s++)
            for (int64_t c = 0; c < n; c++) got[s * n + c] = y[c * rows + rs[s]];
        double rel = gen_rel_err(got.data(), ref.data(), (int64_t)got.size());
        bool ok = rel < 2e-3;
        if (!ok && v == 0) g_fail++;
        double ms = v == 0 ? L.time_ms(ours, 10) : L.time_ms(theirs, 10);
        printf("| %-4s | %5lldx%-5lld | %lld | %-9s | %8.1f | %6.1f | %.1e %s |\n", quant_type_name(t), (long long)rows,
               (long long)k, (long long)n, v == 0 ? "gemm v1" : "cuBLAS f16", ms * 1e3, flop / (ms * 1e-3) / 1e12, rel,
               ok ? "ok" : "FAIL");
        fflush(stdout);
    }
    CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dw16));
    CUDA_CHECK(cudaFree(dy));
}

/* One-pass vs split-K at small n (the weights read once per call: GB/s = repacked bytes / time). */
static void bench_small(lab &L, gen_rng *r, uint32_t t, int64_t rows, int64_t k) {
    char err[256];
    size_t wb = quant_row_bytes(t, k) * rows, rb = matvec_repacked_bytes(t, rows, k);
    std::vector<uint8_t> w(wb);
    gen_weights(r, t, rows, k, w.data());
    const int64_t nmax = 128;
    std::vector<uint16_t> x(nmax * k);
    for (auto &v : x) v = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
    std::vector<int64_t> rs;
    for (int64_t i = 0; i < rows; i += rows / 32 + 1) rs.push_back(i);
    std::vector<float> dq(rs.size() * k);
    for (size_t s = 0; s < rs.size(); s++)
        quant_dequant_row(t, w.data() + rs[s] * quant_row_bytes(t, k), dq.data() + s * k, k, err, sizeof err);
    void *dw, *dr, *dx, *scr = nullptr;
    float *dy;
    CUDA_CHECK(cudaMalloc(&dw, wb));
    CUDA_CHECK(cudaMemcpy(dw, w.data(), wb, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&dr, rb));
    CUDA_CHECK(matvec_repack(dr, dw, t, rows, k, 0));
    CUDA_CHECK(cudaFree(dw));
    CUDA_CHECK(cudaMalloc(&dx, x.size() * 2));
    CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&dy, nmax * rows * 4));
    size_t sb = 0;
    for (int n : {16, 32, 64, 96, 128}) sb = std::max(sb, gemm_f16_scratch_bytes(rows, k, n));
    if (sb) CUDA_CHECK(cudaMalloc(&scr, sb));
    for (int n : {16, 32, 64, 96, 128}) {
        std::vector<double> ref(rs.size() * n);
        for (size_t s = 0; s < rs.size(); s++)
            for (int c = 0; c < n; c++) {
                double acc = 0;
                for (int64_t j = 0; j < k; j++) acc += (double)dq[s * k + j] * quant_f16_to_f32(x[c * k + j]);
                ref[s * n + c] = acc;
            }
        const size_t need = gemm_f16_scratch_bytes(rows, k, n);
        const int slices = (int)(need / ((size_t)n * rows * 4));
        auto one = [&] { CUDA_CHECK(gemm_f16(dy, dr, t, (const uint16_t *)dx, rows, k, n, 0)); };
        auto split = [&] { CUDA_CHECK(gemm_f16_split(dy, dr, t, (const uint16_t *)dx, rows, k, n, scr, sb, 0)); };
        for (int v = 0; v < 2; v++) {
            CUDA_CHECK(cudaMemset(dy, 0xff, n * rows * 4));
            if (v == 0) one(); else split();
            CUDA_CHECK(cudaDeviceSynchronize());
            std::vector<float> y(n * rows), got(rs.size() * n);
            CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
            for (size_t s = 0; s < rs.size(); s++)
                for (int c = 0; c < n; c++) got[s * n + c] = y[c * rows + rs[s]];
            double rel = gen_rel_err(got.data(), ref.data(), (int64_t)got.size());
            bool ok = rel < 2e-3;
            if (!ok) g_fail++;
            double ms = v == 0 ? L.time_ms(one, 10) : L.time_ms(split, 10);
            printf("| %-4s | %5lldx%-5lld | %3d | %-9s | %2d | %8.1f | %6.0f | %6.1f | %.1e %s |\n", quant_type_name(t),
                   (long long)rows, (long long)k, n, v == 0 ? "one-pass" : "split-K", v == 0 ? 1 : std::max(slices, 1),
                   ms * 1e3, rb / (ms * 1e-3) / 1e9, 2.0 * rows * k * n / (ms * 1e-3) / 1e12, rel, ok ? "ok" : "FAIL");
            fflush(stdout);
        }
    }
    if (scr) CUDA_CHECK(cudaFree(scr));
    CUDA_CHECK(cudaFree(dr)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy));
}

int main() {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP kbench gemm: no CUDA device\n");
        return 0;
    }
    lab L;
    cublasHandle_t cb;
    CUBLAS_CHECK(cublasCreate(&cb));
    printf("| type | rows x k | n | kernel | us | TFLOP/s | rel err |\n|---|---|---|---|---|---|---|\n");
    gen_rng r = {0x777ull ^ (uint64_t)time(NULL)};
    for (uint32_t t : {QUANT_Q4_0, QUANT_Q4_K}) {
        bench(L, cb, &r, t, 4096, 4096, 512);
        bench(L, cb, &r, t, 14336, 4096, 512);
        bench(L, cb, &r, t, 4096, 14336, 512);
    }
    printf("\n| type | rows x k | n | kernel | slices | us | weight GB/s | TFLOP/s | rel err |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    bench_small(L, &r, QUANT_Q4_K, 4096, 4096);
    bench_small(L, &r, QUANT_Q4_K, 6144, 4096);
    bench_small(L, &r, QUANT_Q4_K, 28672, 4096);
    bench_small(L, &r, QUANT_Q4_K, 4096, 14336);
    bench_small(L, &r, QUANT_Q6_K, 4096, 14336);
    CUBLAS_CHECK(cublasDestroy(cb));
    printf("%s kbench gemm: %d check failures\n", g_fail ? "FAIL" : "PASS", g_fail);
    return g_fail ? 1 : 0;
}
