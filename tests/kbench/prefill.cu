/* Kernel lab: prompt attention (kernels/prefill.cu, paged_attention_prefill), its variants side
 * by side, for one pass of n_tok tokens of one sequence at several depths (pos0). Per launch (one
 * layer): us, TFLOP/s counting 4 * n_head * head_dim * n_tok * the mean keys a row sees
 * (pos0 + (n_tok + 1) / 2, causal), the same time x 32 layers, and each kernel's error against an
 * f64 CPU reference on sampled tokens (first, middle, last; every head), budget 3e-3 as in
 * test_kernels; every variant after the first also against the first over every row. Each timed
 * launch follows an L2 flush: at depth 16384 one layer's K/V (64 MB for 8 kv heads of 128) is
 * more than the L2 anyway. Usage: prefill [variant ...] (default: 1 2 3; v3 is production's, v2
 * its fallback off compute capability 9.0, v1 the lab's: prefill_v1.cuh). */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "tests/gpu/gen.h"
#include "tests/kbench/lab.h"
#include "kernels/paged.h"
#include "tests/kbench/prefill_v1.cuh"

struct cfg { const char *what; int n_head, n_kv, hd, n_tok, pos0; };

static int g_fail = 0;

/* f64 attention of query head h of token t (position pos0 + t) over positions 0..pos0 + t. */
static void ref_row(double *o, const cfg &c, const std::vector<float> &q, const std::vector<uint16_t> &kc,
                    const std::vector<uint16_t> &vc, const std::vector<int32_t> &pages, int t, int h, float scale) {
    const int L = c.pos0 + t + 1, kv_dim = c.n_kv * c.hd, kvh = h / (c.n_head / c.n_kv);
    const float *qh = q.data() + ((size_t)t * c.n_head + h) * c.hd;
    std::vector<double> s(L);
    double m = -INFINITY, l = 0;
    auto row = [&](int p) {
        return ((size_t)pages[p / PAGED_PAGE] * PAGED_PAGE + p % PAGED_PAGE) * kv_dim + (size_t)kvh * c.hd;
    };
    for (int p = 0; p < L; p++) {
        double d = 0;
        for (int i = 0; i < c.hd; i++) d += (double)qh[i] * quant_f16_to_f32(kc[row(p) + i]);
        s[p] = d * scale;
        m = std::max(m, s[p]);
    }
    for (int p = 0; p < L; p++) { s[p] = exp(s[p] - m); l += s[p]; }
    for (int i = 0; i < c.hd; i++) o[i] = 0;
    for (int p = 0; p < L; p++)
        for (int i = 0; i < c.hd; i++) o[i] += s[p] * quant_f16_to_f32(vc[row(p) + i]);
    for (int i = 0; i < c.hd; i++) o[i] /= l;
}

static void bench(lab &L, gen_rng *r, const cfg &c, const std::vector<int> &vars) {
    const int n_pages = (c.pos0 + c.n_tok + PAGED_PAGE - 1) / PAGED_PAGE, n_cells = n_pages * PAGED_PAGE;
    const int kv_dim = c.n_kv * c.hd;
    const size_t cn = (size_t)n_cells * kv_dim, nq = (size_t)c.n_tok * c.n_head * c.hd;
    std::vector<uint16_t> kc(cn), vc(cn);
    for (size_t i = 0; i < cn; i++) {
        kc[i] = quant_f32_to_f16((float)gen_uniform(r, -2, 2));
        vc[i] = quant_f32_to_f16((float)gen_uniform(r, -1, 1));
    }
    std::vector<int32_t> pages(n_pages);
    for (int i = 0; i < n_pages; i++) pages[i] = i; /* a fresh engine's sequence: pages in order */
    std::vector<float> q(nq), out(nq), out1(nq);
    for (auto &v : q) v = (float)gen_uniform(r, -1, 1);
    const float scale = 1.0f / sqrtf((float)c.hd);
    /* the reference for the sampled tokens */
    const int toks[3] = {0, c.n_tok / 2, c.n_tok - 1};
    std::vector<double> ref(3 * (size_t)c.n_head * c.hd);
    for (int k = 0; k < 3; k++)
        for (int h = 0; h < c.n_head; h++)
            ref_row(ref.data() + ((size_t)k * c.n_head + h) * c.hd, c, q, kc, vc, pages, toks[k], h, scale);
    uint16_t *dk, *dv;
    float *dq, *dout;
    int32_t *dp;
    CUDA_CHECK(cudaMalloc(&dk, cn * 2));
    CUDA_CHECK(cudaMalloc(&dv, cn * 2));
    CUDA_CHECK(cudaMalloc(&dq, nq * 4));
    CUDA_CHECK(cudaMalloc(&dout, nq * 4));
    CUDA_CHECK(cudaMalloc(&dp, n_pages * sizeof(int32_t)));
    CUDA_CHECK(cudaMemcpy(dk, kc.data(), cn * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dv, vc.data(), cn * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dq, q.data(), nq * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dp, pages.data(), n_pages * sizeof(int32_t), cudaMemcpyHostToDevice));
    int v = 0; /* the variant run() launches */
    auto run = [&] {
        if (v == 1) /* the lab's own */
            CUDA_CHECK(c.hd == 128 ? pf1_launch<128>(dout, dq, dk, dv, dp, c.pos0, c.n_tok, c.n_head, c.n_kv, scale, 0)
                                   : pf1_launch<64>(dout, dq, dk, dv, dp, c.pos0, c.n_tok, c.n_head, c.n_kv, scale, 0));
        else
            CUDA_CHECK(paged_attention_prefill_variant(v, dout, dq, dk, dv, dp, c.pos0, c.n_tok, c.n_head, c.n_kv,
                                                       c.hd, scale, 0));
    };
    const double keys = c.pos0 + (c.n_tok + 1) / 2.0, flop = 4.0 * c.n_head * c.hd * c.n_tok * keys;
    for (size_t vi = 0; vi < vars.size(); vi++) {
        v = vars[vi];
        CUDA_CHECK(cudaMemset(dout, 0xff, nq * 4));
        run();
        CUDA_CHECK(cudaMemcpy(out.data(), dout, nq * 4, cudaMemcpyDeviceToHost));
        std::vector<float> got(ref.size());
        for (int k = 0; k < 3; k++)
            std::copy(out.begin() + (size_t)toks[k] * c.n_head * c.hd, out.begin() + (size_t)(toks[k] + 1) * c.n_head * c.hd,
                      got.begin() + (size_t)k * c.n_head * c.hd);
        const double rel = gen_rel_err(got.data(), ref.data(), (int64_t)ref.size());
        bool ok = rel < 3e-3;
        char vs1[48] = "";
        if (vi == 0) {
            out1 = out;
        } else {
            std::vector<double> o1(out1.begin(), out1.end());
            const double d = gen_rel_err(out.data(), o1.data(), (int64_t)nq);
            ok = ok && d < 3e-3;
            snprintf(vs1, sizeof vs1, ", v%d %.1e", vars[0], d);
        }
        if (!ok) g_fail++;
        const double ms = L.time_ms(run, 10);
        printf("| v%d | %s | %d/%d | %d | %d | %d | %.0f | %.1f | %.0f | %.2f | %.1e%s %s |\n", v, c.what, c.n_head,
               c.n_kv, c.hd, c.n_tok, c.pos0, keys, ms * 1e3, flop / (ms * 1e-3) / 1e12, ms * 32, rel, vs1,
               ok ? "ok" : "FAIL");
        fflush(stdout);
    }
    for (void *p : {(void *)dk, (void *)dv, (void *)dq, (void *)dout, (void *)dp}) CUDA_CHECK(cudaFree(p));
}

int main(int argc, char **argv) {
    if (!lab_has_device("prefill")) return 0;
    std::vector<int> vars;
    for (int i = 1; i < argc; i++) {
        const int v = atoi(argv[i]);
        if (v < 1 || v > 3) {
            fprintf(stderr, "kbench prefill: variant %s: not 1, 2 or 3\n", argv[i]);
            return 2;
        }
        vars.push_back(v);
    }
    if (vars.empty()) vars = {1, 2, 3};
    lab L;
    printf("# prompt attention, one launch = one layer; TFLOP/s of the causal work\n");
    printf("| var | model | heads | hd | tokens | pos0 | keys/row | us | TFLOP/s | ms x 32 layers | rel err |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    gen_rng r = {0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL)};
    const cfg cs[] = {{"8b", 32, 8, 128, 512, 0},     {"8b", 32, 8, 128, 512, 4096}, {"8b", 32, 8, 128, 512, 16384},
                      {"8b", 32, 8, 128, 256, 16384}, {"70b", 64, 8, 128, 512, 16384}, {"1b", 32, 8, 64, 512, 16384}};
    for (const cfg &c : cs) bench(L, &r, c, vars);
    printf("%s kbench prefill: %d check failures\n", g_fail ? "FAIL" : "PASS", g_fail);
    return g_fail ? 1 : 0;
}
