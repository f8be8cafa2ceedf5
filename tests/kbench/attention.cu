/* Kernel lab: split-KV decode attention over a contiguous KV cache (attention_lab.cuh, variants 1
 * and 2). First the store of a new token and attention over odd lengths, every sequence, against
 * an f64 CPU softmax over the same f16 cache (budget 1e-4, outputs poisoned first); then each
 * variant checked the same way on sequence 0 and timed on kv-cache reads at several context lengths: GB/s = (K + V bytes
 * read + q + out) / time, against the measured copy bandwidth. Usage: attention */
#include <cmath>
#include <cstdio>
#include <vector>
#include "tests/gpu/gen.h"
#include "tests/kbench/lab.h"
#include "kernels/kernels.h"
#include "tests/kbench/attention_lab.cuh"

struct cfg { int n_seq, n_head, n_kv, hd, len; };

static int g_fail = 0;

static void bench(lab &L, gen_rng *r, cfg c) {
    const int max_ctx = c.len;
    size_t cn = (size_t)c.n_seq * c.n_kv * max_ctx * c.hd, nq = (size_t)c.n_seq * c.n_head * c.hd;
    std::vector<uint16_t> kc(cn), vc(cn);
    for (size_t i = 0; i < cn; i++) { kc[i] = quant_f32_to_f16((float)gen_uniform(r, -2, 2)); vc[i] = quant_f32_to_f16((float)gen_uniform(r, -1, 1)); }
    std::vector<float> q(nq), out(nq);
    for (auto &v : q) v = (float)gen_uniform(r, -1, 1);
    std::vector<int32_t> len(c.n_seq, c.len);
    uint16_t *dk, *dv;
    float *dq, *dout;
    int32_t *dlen;
    void *scratch;
    CUDA_CHECK(cudaMalloc(&dk, cn * 2)); CUDA_CHECK(cudaMalloc(&dv, cn * 2));
    CUDA_CHECK(cudaMalloc(&dq, nq * 4)); CUDA_CHECK(cudaMalloc(&dout, nq * 4));
    CUDA_CHECK(cudaMalloc(&dlen, 4 * c.n_seq));
    CUDA_CHECK(cudaMalloc(&scratch, lab_attention_scratch_bytes(c.n_seq, c.n_head, c.hd, max_ctx)));
    CUDA_CHECK(cudaMemcpy(dk, kc.data(), cn * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dv, vc.data(), cn * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dq, q.data(), nq * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dlen, len.data(), 4 * c.n_seq, cudaMemcpyHostToDevice));
    const float scale = 1.0f / sqrtf((float)c.hd);
    int variant = 1;
    auto run = [&] {
        if (variant == 1) CUDA_CHECK((attn_launch<1>(dout, dq, dk, dv, dlen, scratch, c.n_seq, c.n_head, c.n_kv, c.hd, max_ctx, scale, 0)));
        else CUDA_CHECK((attn_launch<2>(dout, dq, dk, dv, dlen, scratch, c.n_seq, c.n_head, c.n_kv, c.hd, max_ctx, scale, 0)));
    };
    /* reference for sequence 0 */
    std::vector<double> ref(c.n_head * c.hd), sc(c.len);
    for (int h = 0; h < c.n_head; h++) {
        int kvh = h / (c.n_head / c.n_kv);
        const uint16_t *kb = kc.data() + (size_t)kvh * max_ctx * c.hd, *vb = vc.data() + (size_t)kvh * max_ctx * c.hd;
        double m = -INFINITY, l = 0;
        for (int p = 0; p < c.len; p++) {
            double d = 0;
            for (int i = 0; i < c.hd; i++) d += (double)q[h * c.hd + i] * quant_f16_to_f32(kb[(size_t)p * c.hd + i]);
            sc[p] = d * scale;
            m = std::max(m, sc[p]);
        }
        for (int p = 0; p < c.len; p++) { sc[p] = exp(sc[p] - m); l += sc[p]; }
        for (int i = 0; i < c.hd; i++) {
            double o = 0;
            for (int p = 0; p < c.len; p++) o += sc[p] * quant_f16_to_f32(vb[(size_t)p * c.hd + i]);
            ref[h * c.hd + i] = o / l;
        }
    }
    for (variant = 1; variant <= 2; variant++) {
        CUDA_CHECK(cudaMemset(dout, 0xff, nq * 4));
        run();
        CUDA_CHECK(cudaMemcpy(out.data(), dout, nq * 4, cudaMemcpyDeviceToHost));
        double rel = gen_rel_err(out.data(), ref.data(), c.n_head * c.hd);
        bool ok = rel < 1e-4;
        if (!ok) g_fail++;
        double ms = L.time_ms(run, 20);
        double bytes = 2.0 * cn * 2 + 2.0 * nq * 4;
        double gbs = bytes / (ms * 1e-3) / 1e9;
        printf("| v%d | %d | %d/%d | %d | %6d | %8.2f | %6.0f | %4.0f%% | %.1e %s |\n", variant, c.n_seq, c.n_head, c.n_kv,
               c.hd, c.len, ms * 1e3, gbs, 100 * gbs / L.copy_gbs, rel, ok ? "ok" : "FAIL");
        fflush(stdout);
    }
    CUDA_CHECK(cudaFree(dk)); CUDA_CHECK(cudaFree(dv)); CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dout));
    CUDA_CHECK(cudaFree(dlen)); CUDA_CHECK(cudaFree(scratch));
}

/* lab_kv_store of the new token, then lab_attention_decode over [0, len) against f64 softmax
 * over the f16 cache. */
static void check_store_attention(gen_rng *r, int n_seq, int n_head, int n_kv, int hd, int max_ctx, const int32_t *len) {
    const size_t cn = (size_t)n_seq * n_kv * max_ctx * hd;
    std::vector<uint16_t> kc(cn), vc(cn);
    for (size_t i = 0; i < cn; i++) {
        kc[i] = quant_f32_to_f16((float)gen_normal(r));
        vc[i] = quant_f32_to_f16((float)gen_normal(r));
    }
    const int nq = n_seq * n_head * hd, nk = n_seq * n_kv * hd;
    std::vector<float> q(nq), kn(nk), vn(nk), out(nq);
    std::vector<double> ref(nq), sc(max_ctx);
    for (auto &v : q) v = (float)gen_normal(r);
    for (int i = 0; i < nk; i++) {
        kn[i] = (float)gen_normal(r);
        vn[i] = (float)gen_normal(r);
    }
    std::vector<int32_t> pos(n_seq), lens(len, len + n_seq);
    for (int s = 0; s < n_seq; s++) pos[s] = len[s] - 1;
    uint16_t *dk, *dv;
    float *dq, *dkn, *dvn, *dout;
    int32_t *dpos, *dlen;
    void *scratch;
    CUDA_CHECK(cudaMalloc(&dk, cn * 2)); CUDA_CHECK(cudaMalloc(&dv, cn * 2));
    CUDA_CHECK(cudaMalloc(&dq, nq * 4)); CUDA_CHECK(cudaMalloc(&dout, nq * 4));
    CUDA_CHECK(cudaMalloc(&dkn, nk * 4)); CUDA_CHECK(cudaMalloc(&dvn, nk * 4));
    CUDA_CHECK(cudaMalloc(&dpos, 4 * n_seq)); CUDA_CHECK(cudaMalloc(&dlen, 4 * n_seq));
    CUDA_CHECK(cudaMalloc(&scratch, lab_attention_scratch_bytes(n_seq, n_head, hd, max_ctx)));
    CUDA_CHECK(cudaMemcpy(dk, kc.data(), cn * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dv, vc.data(), cn * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dq, q.data(), nq * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dkn, kn.data(), nk * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dvn, vn.data(), nk * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dpos, pos.data(), 4 * n_seq, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dlen, lens.data(), 4 * n_seq, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(dout, 0xff, nq * 4)); /* NaN: an output never written fails */
    cudaError_t e = lab_kv_store(dk, dv, dkn, dvn, dpos, n_seq, n_kv, hd, max_ctx, 0);
    for (int s = 0; s < n_seq; s++) /* the same store on the host copy */
        for (int h = 0; h < n_kv; h++)
            for (int d = 0; d < hd; d++) {
                const size_t at = (((size_t)s * n_kv + h) * max_ctx + pos[s]) * hd + d;
                kc[at] = quant_f32_to_f16(kn[(s * n_kv + h) * hd + d]);
                vc[at] = quant_f32_to_f16(vn[(s * n_kv + h) * hd + d]);
            }
    const float scale = 1.0f / sqrtf((float)hd);
    for (int s = 0; s < n_seq; s++)
        for (int h = 0; h < n_head; h++) {
            const int kvh = h / (n_head / n_kv);
            const uint16_t *kb = kc.data() + ((size_t)s * n_kv + kvh) * max_ctx * hd;
            const uint16_t *vb = vc.data() + ((size_t)s * n_kv + kvh) * max_ctx * hd;
            const float *qh = q.data() + (s * n_head + h) * hd;
            double m = -INFINITY, l = 0;
            for (int p = 0; p < len[s]; p++) {
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)qh[i] * quant_f16_to_f32(kb[(size_t)p * hd + i]);
                sc[p] = d * scale;
                m = std::max(m, sc[p]);
            }
            for (int p = 0; p < len[s]; p++) {
                sc[p] = exp(sc[p] - m);
                l += sc[p];
            }
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int p = 0; p < len[s]; p++) o += sc[p] * quant_f16_to_f32(vb[(size_t)p * hd + i]);
                ref[(s * n_head + h) * hd + i] = o / l;
            }
        }
    if (e == cudaSuccess)
        e = lab_attention_decode(dout, dq, dk, dv, dlen, scratch, n_seq, n_head, n_kv, hd, max_ctx, scale, 0);
    if (e == cudaSuccess) e = cudaMemcpy(out.data(), dout, nq * 4, cudaMemcpyDeviceToHost);
    const double rel = e == cudaSuccess ? gen_rel_err(out.data(), ref.data(), nq) : INFINITY;
    const bool ok = e == cudaSuccess && rel < 1e-4;
    if (!ok) g_fail++;
    printf("%s kbench attention store + decode %d seq, %d/%d heads, hd %d, ctx %d: %s, rel err %.3g (budget 1e-4)\n",
           ok ? "PASS" : "FAIL", n_seq, n_head, n_kv, hd, max_ctx, cudaGetErrorString(e), rel);
    for (void *p : {(void *)dk, (void *)dv, (void *)dq, (void *)dout, (void *)dkn, (void *)dvn, (void *)dpos,
                    (void *)dlen, scratch})
        CUDA_CHECK(cudaFree(p));
}

int main() {
    if (!lab_has_device("attention")) return 0;
    lab L;
    L.announce();
    gen_rng r = {0xA5A5A5A55A5A5A5Aull ^ (uint64_t)time(NULL)};
    {
        const int32_t l1[2] = {1, 777}, l2[3] = {300, 1024, 45}, l3[1] = {5}, l4[2] = {299, 2};
        check_store_attention(&r, 2, 8, 2, 128, 1000, l1);
        check_store_attention(&r, 3, 32, 4, 64, 1024, l2);
        check_store_attention(&r, 1, 8, 8, 8, 16, l3);
        check_store_attention(&r, 2, 4, 2, 36, 300, l4); /* head_dim % 8 != 0: variant 1 */
    }
    printf("| var | seqs | heads | hd | len | us | GB/s | %%copy | rel err |\n|---|---|---|---|---|---|---|---|---|\n");
    const cfg cs[] = {{1, 32, 8, 128, 1024}, {1, 32, 8, 128, 4096}, {1, 32, 8, 128, 16384},
                      {8, 32, 8, 128, 4096}, {1, 32, 8, 64, 4096}, {1, 64, 8, 128, 8192}};
    for (cfg c : cs) bench(L, &r, c);
    printf("%s kbench attention: %d check failures\n", g_fail ? "FAIL" : "PASS", g_fail);
    return g_fail ? 1 : 0;
}
