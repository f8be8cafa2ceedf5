/* Kernel lab: the weight matvecs of one decode step of an 8b Llama (32 layers of q, k, v, o,
 * gate, up, down, then the output head), production launchers, captured once as a CUDA graph and
 * replayed. Weights are random blocks of the mix's types (mkmodel.py's recipes for q4_0 and
 * q4_k_m); only the matvecs run, so the figure is the ceiling the matvec kernels set for tg128:
 * t/s = 1 / step time, GB/s = weight bytes / step time. Usage: decode */
#include <cstdio>
#include <vector>
#include <algorithm>
#include "tests/gpu/gen.h"
#include "tests/kbench/lab.h"
#include "kernels/kernels.h"

struct mat { uint32_t type; int64_t rows, k; void *w; float *y; };

/* fused: q, k, v (where they share a type) and gate, up stacked into one matrix each, as the
 * engine can upload them (rows of GGUF matrices stack into one GGUF matrix) and repack once. */
static void run_mix(lab &L, gen_rng *r, const char *mix, bool fused) {
    const int layers = 32, dim = 4096, ff = 14336, kv = 1024, vocab = 32000;
    const bool km = mix[3] == 'k';
    auto more_bits = [&](int i) { return i < layers / 8 || i >= 7 * layers / 8 || (i - layers / 8) % 3 == 2; };
    std::vector<mat> ms;
    for (int i = 0; i < layers; i++) {
        uint32_t base = km ? QUANT_Q4_K : QUANT_Q4_0, hi = km && more_bits(i) ? QUANT_Q6_K : base;
        if (fused && hi == base) {
            ms.push_back({base, dim + 2 * kv, dim, 0, 0});
        } else if (fused) {
            ms.push_back({base, dim + kv, dim, 0, 0});
            ms.push_back({hi, kv, dim, 0, 0});
        } else {
            ms.push_back({base, dim, dim, 0, 0});
            ms.push_back({base, kv, dim, 0, 0});
            ms.push_back({hi, kv, dim, 0, 0});
        }
        ms.push_back({base, dim, dim, 0, 0});
        if (fused) {
            ms.push_back({base, 2 * ff, dim, 0, 0});
        } else {
            ms.push_back({base, ff, dim, 0, 0});
            ms.push_back({base, ff, dim, 0, 0});
        }
        ms.push_back({hi, dim, ff, 0, 0});
    }
    ms.push_back({QUANT_Q6_K, vocab, dim, 0, 0});
    /* one random GGUF source per (type, shape), repacked into every matrix of that kind */
    double bytes = 0;
    std::vector<std::pair<std::vector<int64_t>, void *>> srcs;
    for (auto &m : ms) {
        std::vector<int64_t> key = {m.type, m.rows, m.k};
        void *src = nullptr;
        for (auto &s : srcs) if (s.first == key) src = s.second;
        if (!src) {
            size_t wb = quant_row_bytes(m.type, m.k) * m.rows;
            std::vector<uint8_t> h(wb);
            gen_weights(r, m.type, m.rows, m.k, h.data());
            CUDA_CHECK(cudaMalloc(&src, wb));
            CUDA_CHECK(cudaMemcpy(src, h.data(), wb, cudaMemcpyHostToDevice));
            srcs.push_back({key, src});
        }
        size_t rb = matvec_repacked_bytes(m.type, m.rows, m.k);
        bytes += (double)rb;
        CUDA_CHECK(cudaMalloc(&m.w, rb));
        CUDA_CHECK(matvec_repack(m.w, src, m.type, m.rows, m.k, 0));
        CUDA_CHECK(cudaMalloc(&m.y, m.rows * sizeof(float)));
    }
    for (auto &s : srcs) CUDA_CHECK(cudaFree(s.second));
    std::vector<float> xh(ff);
    for (auto &v : xh) v = (float)gen_uniform(r, -1, 1);
    float *x;
    CUDA_CHECK(cudaMalloc(&x, ff * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(x, xh.data(), ff * sizeof(float), cudaMemcpyHostToDevice));
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (auto &m : ms) CUDA_CHECK(matvec_f32(m.y, m.w, m.type, x, m.rows, m.k, 1, st));
    CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<float> t;
    for (int rep = 0; rep < 21; rep++) {
        L.flush();
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaEventRecord(L.e0, st));
        CUDA_CHECK(cudaGraphLaunch(exec, st));
        CUDA_CHECK(cudaEventRecord(L.e1, st));
        CUDA_CHECK(cudaEventSynchronize(L.e1));
        float ms_;
        CUDA_CHECK(cudaEventElapsedTime(&ms_, L.e0, L.e1));
        if (rep) t.push_back(ms_);
    }
    std::sort(t.begin(), t.end());
    double ms_med = t[t.size() / 2], gbs = bytes / (ms_med * 1e-3) / 1e9;
    printf("| 8b %s%s | %zu | %.2f | %.3f | %.0f | %.0f | %.0f%% | %.0f |\n", mix, fused ? " fused" : "", ms.size(), bytes / 1e9, ms_med, 1e3 / ms_med,
           gbs, 100 * gbs / L.copy_gbs, L.copy_gbs * 1e9 / bytes);
    fflush(stdout);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(st));
    for (auto &m : ms) { CUDA_CHECK(cudaFree(m.w)); CUDA_CHECK(cudaFree(m.y)); }
    CUDA_CHECK(cudaFree(x));
}

int main() {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP kbench decode: no CUDA device\n");
        return 0;
    }
    lab L;
    L.measure_copy();
    printf("# copy bandwidth (4 GiB d2d, read+write, median of 10): %.0f GB/s\n", L.copy_gbs);
    printf("| model | matvecs | weight GB | step ms | t/s | GB/s | %% copy | roofline t/s |\n|---|---|---|---|---|---|---|---|\n");
    gen_rng r = {0x5151ull ^ (uint64_t)time(NULL)};
    for (bool fused : {false, true}) {
        run_mix(L, &r, "q4_0", fused);
        run_mix(L, &r, "q4_k_m", fused);
    }
    printf("PASS kbench decode\n");
    return 0;
}
