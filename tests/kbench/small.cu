/* Kernel lab: the small decode ops (rmsnorm, rope, swiglu, add, embed, argmax, and
 * attention_lab.cuh's kv_store) at 8b-decode sizes. Each is checked against an f64 CPU reference on fresh random data, then timed
 * (median of 50 after an L2 flush); GB/s = bytes read + written / time. At these sizes the
 * figure is launch- and latency-bound: the microseconds are what fusing or a CUDA graph saves. */
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>
#include "tests/gpu/gen.h"
#include "tests/kbench/lab.h"
#include "kernels/kernels.h"
#include "tests/kbench/attention_lab.cuh" /* lab_kv_store */

static int g_fail = 0;

template <typename T> static T *up(const std::vector<T> &h) {
    T *d;
    CUDA_CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
    CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
template <typename T> static std::vector<T> down(const T *d, size_t n) {
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

static void row(lab &L, const char *name, const char *size, double rel, double budget, double bytes,
                const std::function<void()> &fn) {
    bool ok = rel < budget;
    if (!ok) g_fail++;
    double ms = L.time_ms(fn, 50);
    double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("| %-8s | %-22s | %7.2f | %6.0f | %4.1f%% | %.1e %s |\n", name, size, ms * 1e3, gbs, 100 * gbs / L.copy_gbs,
           rel, ok ? "ok" : "FAIL");
    fflush(stdout);
}

int main() {
    if (!lab_has_device("small")) return 0;
    lab L;
    L.announce();
    printf("| op | size | us | GB/s | %%copy | rel err |\n|---|---|---|---|---|---|\n");
    gen_rng r = {0x1234567ull ^ (uint64_t)time(NULL)};
    const int dim = 4096, ff = 14336, nv = 32000, hd = 128, nh = 32;
    for (int rows : {1, 8}) {
        std::vector<float> x(rows * dim), w(dim);
        for (auto &v : x) v = (float)(2 * gen_normal(&r));
        for (auto &v : w) v = (float)gen_uniform(&r, 0.5, 1.5);
        std::vector<double> ref(rows * dim);
        for (int i = 0; i < rows; i++) {
            double ss = 0;
            for (int j = 0; j < dim; j++) ss += (double)x[i * dim + j] * x[i * dim + j];
            for (int j = 0; j < dim; j++) ref[i * dim + j] = x[i * dim + j] / sqrt(ss / dim + 1e-5) * w[j];
        }
        float *dx = up(x), *dw = up(w), *dy;
        CUDA_CHECK(cudaMalloc(&dy, x.size() * 4));
        auto fn = [&] { CUDA_CHECK(cu_rmsnorm(dy, dx, dw, rows, dim, 1e-5f, 0)); };
        fn();
        auto y = down(dy, x.size());
        char sz[64];
        snprintf(sz, sizeof sz, "%dx%d", rows, dim);
        row(L, "rmsnorm", sz, gen_rel_err(y.data(), ref.data(), (int64_t)y.size()), 1e-5, 2.0 * x.size() * 4 + dim * 4, fn);
        CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dy));
    }
    {
        std::vector<float> x(nh * hd);
        for (auto &v : x) v = (float)gen_normal(&r);
        std::vector<int32_t> pos = {777};
        std::vector<double> ref(x.size());
        for (int h = 0; h < nh; h++)
            for (int p = 0; p < hd / 2; p++) {
                double a = 777.0 * pow(500000.0, -(double)(2 * p) / hd);
                double x0 = x[h * hd + 2 * p], x1 = x[h * hd + 2 * p + 1];
                ref[h * hd + 2 * p] = x0 * cos(a) - x1 * sin(a);
                ref[h * hd + 2 * p + 1] = x0 * sin(a) + x1 * cos(a);
            }
        float *dx = up(x), *dy;
        int32_t *dp = up(pos);
        CUDA_CHECK(cudaMalloc(&dy, x.size() * 4));
        auto fn = [&] { CUDA_CHECK(cu_rope(dy, dx, dp, 1, nh, hd, hd, 500000.0f, 0)); };
        fn();
        auto y = down(dy, x.size());
        row(L, "rope", "1x32x128", gen_rel_err(y.data(), ref.data(), (int64_t)y.size()), 5e-4, 2.0 * x.size() * 4, fn);
        CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dy)); CUDA_CHECK(cudaFree(dp));
    }
    {
        std::vector<float> a(ff), b(ff);
        for (auto &v : a) v = (float)(3 * gen_normal(&r));
        for (auto &v : b) v = (float)gen_normal(&r);
        std::vector<double> ref(ff), ref2(ff);
        for (int i = 0; i < ff; i++) { ref[i] = a[i] / (1 + exp(-(double)a[i])) * b[i]; ref2[i] = (double)a[i] + b[i]; }
        float *da = up(a), *db = up(b), *dy;
        CUDA_CHECK(cudaMalloc(&dy, ff * 4));
        auto fn = [&] { CUDA_CHECK(cu_swiglu(dy, da, db, ff, 0)); };
        fn();
        auto y = down(dy, ff);
        row(L, "swiglu", "14336", gen_rel_err(y.data(), ref.data(), ff), 1e-5, 3.0 * ff * 4, fn);
        auto fn2 = [&] { CUDA_CHECK(cu_add(dy, da, db, ff, 0)); };
        fn2();
        y = down(dy, ff);
        row(L, "add", "14336", gen_rel_err(y.data(), ref2.data(), ff), 1e-6, 3.0 * ff * 4, fn2);
        CUDA_CHECK(cudaFree(da)); CUDA_CHECK(cudaFree(db)); CUDA_CHECK(cudaFree(dy));
    }
    for (uint32_t t : {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q6_K, QUANT_F16}) {
        const int n_rows = 1000;
        size_t rb = quant_row_bytes(t, dim);
        std::vector<uint8_t> tab(rb * n_rows);
        gen_weights(&r, t, n_rows, dim, tab.data());
        std::vector<int32_t> ids = {123};
        std::vector<float> rowf(dim);
        char err[256];
        quant_dequant_row(t, tab.data() + 123 * rb, rowf.data(), dim, err, sizeof err);
        std::vector<double> ref(rowf.begin(), rowf.end());
        uint8_t *dt = up(tab);
        int32_t *di = up(ids);
        float *dy;
        CUDA_CHECK(cudaMalloc(&dy, dim * 4));
        auto fn = [&] { CUDA_CHECK(cu_embed(dy, dt, t, di, 1, n_rows, dim, 0)); };
        fn();
        auto y = down(dy, dim);
        char nm[32];
        snprintf(nm, sizeof nm, "embed %s", quant_type_name(t));
        row(L, nm, "1 row of 4096", gen_rel_err(y.data(), ref.data(), dim), 1e-6, (double)rb + dim * 4, fn);
        CUDA_CHECK(cudaFree(dt)); CUDA_CHECK(cudaFree(di)); CUDA_CHECK(cudaFree(dy));
    }
    {
        std::vector<float> l(nv);
        for (auto &v : l) v = (float)gen_normal(&r);
        l[31007] = 50;
        float *dl = up(l);
        int32_t *dout;
        CUDA_CHECK(cudaMalloc(&dout, 8));
        argmax_skip skip = {1, {2}};
        auto fn = [&] { CUDA_CHECK(cu_argmax(dout, dl, 1, nv, skip, 0)); };
        fn();
        auto got = down(dout, 2);
        row(L, "argmax", "1x32000", got[0] == 31007 && got[1] == 31007 ? 0.0 : 1.0, 0.5, nv * 4.0, fn);
        CUDA_CHECK(cudaFree(dl)); CUDA_CHECK(cudaFree(dout));
    }
    {
        const int nkv = 8, ctx = 4096;
        std::vector<float> k(nkv * hd), v(nkv * hd);
        for (auto &e : k) e = (float)gen_normal(&r);
        for (auto &e : v) e = (float)gen_normal(&r);
        std::vector<int32_t> pos = {1234};
        float *dk = up(k), *dv = up(v);
        int32_t *dp = up(pos);
        uint16_t *kc, *vc;
        CUDA_CHECK(cudaMalloc(&kc, (size_t)nkv * ctx * hd * 2));
        CUDA_CHECK(cudaMalloc(&vc, (size_t)nkv * ctx * hd * 2));
        auto fn = [&] { CUDA_CHECK(lab_kv_store(kc, vc, dk, dv, dp, 1, nkv, hd, ctx, 0)); };
        fn();
        double num = 0, den = 0;
        for (int h = 0; h < nkv; h++) {
            auto got = down(kc + ((size_t)h * ctx + 1234) * hd, hd);
            for (int e = 0; e < hd; e++) {
                double d = quant_f16_to_f32(got[e]) - k[h * hd + e];
                num += d * d;
                den += (double)k[h * hd + e] * k[h * hd + e];
            }
        }
        row(L, "cu_kv_store", "8x128 at 1234", sqrt(num / den), 1e-3, 2.0 * k.size() * 6, fn);
        CUDA_CHECK(cudaFree(dk)); CUDA_CHECK(cudaFree(dv)); CUDA_CHECK(cudaFree(dp));
        CUDA_CHECK(cudaFree(kc)); CUDA_CHECK(cudaFree(vc));
    }
    printf("%s kbench small: %d check failures\n", g_fail ? "FAIL" : "PASS", g_fail);
    return g_fail ? 1 : 0;
}
