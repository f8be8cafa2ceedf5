/* Kernel lab: one decode step of an 8b Llama (32 layers, then the output head), production
 * launchers, captured once as a CUDA graph and replayed. Weights are random blocks of the mix's
 * types (mkmodel.py's recipes for q4_0 and q4_k_m), production matvecs (v11 where its ring fits,
 * v10 elsewhere; the per-matrix A/B of the variants is tests/kbench/matvec.cu's). Two tables:
 *  - matvecs only (q, k, v, o, gate, up, down, output; plain or stacked as the engine stacks
 *    them): the ceiling the matvec kernels set for tg128;
 *  - the whole step as the engine's run_layers chains it (stacked matvecs, RoPE + K/V store,
 *    paged attention at position 1000 (one launch: the tiled kernel merges its splits itself),
 *    add + RMSNorm, SwiGLU, the head's RMSNorm, output matvec and argmax), without programmatic
 *    dependent launch, with it, with it and SwiGLU folded into the down matvec
 *    (cu_matvec_f32_swiglu), and with each kernel family left out: what PDL, the fusion and each
 *    family cost; then the engine's fused layer (RMSNorm inside the QKV, gate/up and head
 *    matvecs, the residual adds as the wo and down matvecs' y +=, SwiGLU inside down; 6 launches
 *    a layer instead of 9) and with SwiGLU apart (7).
 * t/s = 1 / step time, GB/s = weight bytes / step time. Usage: decode, or decode attention (the
 * attention kernel alone at several positions and split counts; decode attention POS [SPLITS]: one token at POS, only V3 without
 * and with kv_ready, at every split count or one, for ncu). */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include "tests/gpu/gen.h"
#include "tests/kbench/lab.h"
#include "kernels/kernels.h"
#include "kernels/paged.h"

struct mat { uint32_t type; int64_t rows, k; void *w; float *y; };

/* One layer's matrices: qk (q and k stacked, or q, k and v when v shares their type), v (its
 * own matrix when its type differs, else rows 0), o, gu (gate and up stacked), down. With
 * stacked false every matrix is its own (q, k, v, o, gate, up, down). */
struct layer { std::vector<mat> m; };

enum { LAYERS = 32, DIM = 4096, FF = 14336, KV = 1024, VOCAB = 32000, HEADS = 32, KV_HEADS = 8, HD = 128 };
enum { POS = 1000, N_SPLIT = 32, CELLS = 1024 };

static std::vector<layer> build(const char *mix, bool stacked) {
    const bool km = mix[3] == 'k';
    auto more_bits = [&](int i) { return i < LAYERS / 8 || i >= 7 * LAYERS / 8 || (i - LAYERS / 8) % 3 == 2; };
    std::vector<layer> ls(LAYERS + 1);
    for (int i = 0; i < LAYERS; i++) {
        uint32_t base = km ? QUANT_Q4_K : QUANT_Q4_0, hi = km && more_bits(i) ? QUANT_Q6_K : base;
        auto &m = ls[i].m;
        if (stacked && hi == base) {
            m.push_back({base, DIM + 2 * KV, DIM, 0, 0});
        } else if (stacked) {
            m.push_back({base, DIM + KV, DIM, 0, 0});
            m.push_back({hi, KV, DIM, 0, 0});
        } else {
            m.push_back({base, DIM, DIM, 0, 0});
            m.push_back({base, KV, DIM, 0, 0});
            m.push_back({hi, KV, DIM, 0, 0});
        }
        m.push_back({base, DIM, DIM, 0, 0});
        if (stacked) {
            m.push_back({base, 2 * FF, DIM, 0, 0});
        } else {
            m.push_back({base, FF, DIM, 0, 0});
            m.push_back({base, FF, DIM, 0, 0});
        }
        m.push_back({hi, DIM, FF, 0, 0});
    }
    ls[LAYERS].m.push_back({QUANT_Q6_K, VOCAB, DIM, 0, 0});
    return ls;
}

/* Random GGUF source per (type, shape), repacked into every matrix of that kind; returns bytes. */
static double upload(gen_rng *r, std::vector<layer> &ls) {
    double bytes = 0;
    std::vector<std::pair<std::vector<int64_t>, void *>> srcs;
    for (auto &l : ls)
        for (auto &m : l.m) {
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
            size_t rb = cu_matvec_repacked_bytes(m.type, m.rows, m.k);
            bytes += (double)rb;
            CUDA_CHECK(cudaMalloc(&m.w, rb));
            CUDA_CHECK(cu_matvec_repack(m.w, src, m.type, m.rows, m.k, 0));
            CUDA_CHECK(cudaMalloc(&m.y, m.rows * sizeof(float)));
        }
    CUDA_CHECK(cudaDeviceSynchronize()); /* matvecs read weights before their PDL wait */
    for (auto &s : srcs) CUDA_CHECK(cudaFree(s.second));
    return bytes;
}

static void release(std::vector<layer> &ls) {
    for (auto &l : ls)
        for (auto &m : l.m) { CUDA_CHECK(cudaFree(m.w)); CUDA_CHECK(cudaFree(m.y)); }
}

/* Median of 20 replays (each after an L2 flush) of the graph captured from record(st). */
template <typename F> static double time_graph(lab &L, F record) {
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    record(st);
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
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(st));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static void row(lab &L, const char *what, int launches, double bytes, double ms) {
    double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("| %s | %d | %.2f | %.3f | %.0f | %.0f | %.0f%% | %.0f |\n", what, launches, bytes / 1e9, ms, 1e3 / ms, gbs,
           100 * gbs / L.copy_gbs, L.copy_gbs * 1e9 / bytes);
    fflush(stdout);
}

static void run_matvecs(lab &L, gen_rng *r, const char *mix, bool stacked) {
    std::vector<layer> ls = build(mix, stacked);
    double bytes = upload(r, ls);
    float *x;
    CUDA_CHECK(cudaMalloc(&x, FF * sizeof(float)));
    std::vector<float> xh(FF);
    for (auto &v : xh) v = (float)gen_uniform(r, -1, 1);
    CUDA_CHECK(cudaMemcpy(x, xh.data(), FF * sizeof(float), cudaMemcpyHostToDevice));
    int launches = 0;
    for (auto &l : ls) launches += (int)l.m.size();
    double ms = time_graph(L, [&](cudaStream_t st) {
        for (auto &l : ls)
            for (auto &m : l.m) CUDA_CHECK(cu_matvec_f32(m.y, m.w, m.type, x, m.rows, m.k, 1, st));
    });
    char what[64];
    snprintf(what, sizeof what, "8b %s%s", mix, stacked ? ", stacked" : "");
    row(L, what, launches, bytes, ms);
    release(ls);
    CUDA_CHECK(cudaFree(x));
}

/* The whole step, stacked matrices, one token at position POS; fused: the fused layers too. */
static void run_step(lab &L, gen_rng *r, const char *mix, bool fused) {
    std::vector<layer> ls = build(mix, true);
    double bytes = upload(r, ls);
    const size_t kv_layer = (size_t)CELLS * KV;
    float *x, *xn, *q, *att, *ff, *normw, *logits;
    uint16_t *kc, *vc;
    int32_t *meta, *ids;
    void *scratch;
    CUDA_CHECK(cudaMalloc(&x, DIM * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&xn, DIM * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&q, DIM * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&att, DIM * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ff, FF * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&normw, DIM * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&logits, VOCAB * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&kc, kv_layer * LAYERS * sizeof(uint16_t)));
    CUDA_CHECK(cudaMalloc(&vc, kv_layer * LAYERS * sizeof(uint16_t)));
    CUDA_CHECK(cudaMemset(kc, 0, kv_layer * LAYERS * sizeof(uint16_t)));
    CUDA_CHECK(cudaMemset(vc, 0, kv_layer * LAYERS * sizeof(uint16_t)));
    CUDA_CHECK(cudaMalloc(&ids, 2 * sizeof(int32_t)));
    CUDA_CHECK(cudaMalloc(&scratch, paged_attention_scratch_bytes(1, HEADS, HD, N_SPLIT)));
    CUDA_CHECK(cudaMemset(scratch, 0, paged_attention_scratch_bytes(1, HEADS, HD, N_SPLIT)));
    /* meta: pos, seq, cell, then the page table (pages 0..CELLS/PAGED_PAGE-1 in order) */
    const int n_pages = CELLS / PAGED_PAGE;
    std::vector<int32_t> hm = {POS, 0, POS};
    for (int p = 0; p < n_pages; p++) hm.push_back(p);
    CUDA_CHECK(cudaMalloc(&meta, hm.size() * sizeof(int32_t)));
    CUDA_CHECK(cudaMemcpy(meta, hm.data(), hm.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    std::vector<float> h(DIM);
    for (auto &v : h) v = (float)gen_uniform(r, -1, 1);
    CUDA_CHECK(cudaMemcpy(x, h.data(), DIM * sizeof(float), cudaMemcpyHostToDevice));
    for (auto &v : h) v = (float)gen_uniform(r, 0.5, 1.5);
    CUDA_CHECK(cudaMemcpy(normw, h.data(), DIM * sizeof(float), cudaMemcpyHostToDevice));
    const float scale = 1.0f / sqrtf((float)HD);
    int launches = 0;
    /* skip: kernel families left out (SK_*), so that step-time differences price each family in
     * the PDL chain (the results are wrong then; only the time is used) */
    enum { SK_ROPE = 1, SK_ATTN = 2, SK_NORM = 4, SK_SWIGLU = 8 };
    /* the engine's fused layer (engine/forward_cuda.c; apart: SwiGLU apart, its other form) */
    auto record_fused = [&](cudaStream_t st, bool swiglu_apart) {
        launches = 0;
        auto go = [&](cudaError_t e) { CUDA_CHECK(e); launches++; };
        for (int l = 0; l < LAYERS; l++) {
            const std::vector<mat> &m = ls[l].m;
            const bool sep_v = m.size() == 5;
            const mat &qk = m[0], &o = m[sep_v ? 2 : 1], &gu = m[sep_v ? 3 : 2], &dn = m[sep_v ? 4 : 3];
            for (size_t i = 0; i < (sep_v ? 2u : 1u); i++)
                go(cu_matvec_f32_norm(m[i].y, m[i].w, m[i].type, x, normw, 1e-5f, m[i].rows, m[i].k, 1, st));
            const float *pv = sep_v ? m[1].y : qk.y + DIM + KV;
            go(paged_rope_store(q, kc + kv_layer * l, vc + kv_layer * l, qk.y, qk.rows, qk.y + DIM, qk.rows, pv, KV,
                                meta, meta + 2, 1, HEADS, KV_HEADS, HD, HD, 500000.0f, st));
            go(paged_attention(att, q, kc + kv_layer * l, vc + kv_layer * l, meta, meta + 1, meta + 3, n_pages, scratch,
                               1, HEADS, KV_HEADS, HD, N_SPLIT, 1, scale, st));
            go(cu_matvec_f32_acc(x, o.w, o.type, att, o.rows, o.k, 1, st));
            go(cu_matvec_f32_norm(gu.y, gu.w, gu.type, x, normw, 1e-5f, gu.rows, gu.k, 1, st));
            if (swiglu_apart) {
                go(paged_swiglu(ff, gu.y, 2 * FF, gu.y + FF, 2 * FF, 1, FF, st));
                go(cu_matvec_f32_acc(x, dn.w, dn.type, ff, dn.rows, dn.k, 1, st));
            } else {
                go(cu_matvec_f32_swiglu_acc(x, dn.w, dn.type, gu.y, 2 * FF, gu.y + FF, 2 * FF, dn.rows, dn.k, 1, st));
            }
        }
        const mat &out = ls[LAYERS].m[0];
        go(cu_matvec_f32_norm(logits, out.w, out.type, x, normw, 1e-5f, out.rows, out.k, 1, st));
        go(cu_argmax(ids, logits, 1, VOCAB, argmax_skip{}, st));
    };
    auto record = [&](cudaStream_t st, bool fuse, int skip) {
        launches = 0;
        auto go = [&](cudaError_t e) { CUDA_CHECK(e); launches++; };
        go(cu_rmsnorm(xn, x, normw, 1, DIM, 1e-5f, st));
        for (int l = 0; l < LAYERS; l++) {
            const std::vector<mat> &m = ls[l].m;
            const bool sep_v = m.size() == 5;
            const mat &qk = m[0], &o = m[sep_v ? 2 : 1], &gu = m[sep_v ? 3 : 2], &dn = m[sep_v ? 4 : 3];
            for (size_t i = 0; i < (sep_v ? 2u : 1u); i++)
                go(cu_matvec_f32(m[i].y, m[i].w, m[i].type, xn, m[i].rows, m[i].k, 1, st));
            const float *pv = sep_v ? m[1].y : qk.y + DIM + KV;
            if (!(skip & SK_ROPE)) go(paged_rope_store(q, kc + kv_layer * l, vc + kv_layer * l, qk.y, qk.rows, qk.y + DIM, qk.rows, pv, KV,
                                meta, meta + 2, 1, HEADS, KV_HEADS, HD, HD, 500000.0f, st));
            if (!(skip & SK_ATTN)) go(paged_attention(att, q, kc + kv_layer * l, vc + kv_layer * l, meta, meta + 1, meta + 3, n_pages, scratch,
                               1, HEADS, KV_HEADS, HD, N_SPLIT, 1, scale, st));
            go(cu_matvec_f32(o.y, o.w, o.type, att, o.rows, o.k, 1, st));
            if (!(skip & SK_NORM)) go(paged_add_rmsnorm(x, xn, o.y, normw, 1, DIM, 1e-5f, st));
            go(cu_matvec_f32(gu.y, gu.w, gu.type, xn, gu.rows, gu.k, 1, st));
            if (fuse) {
                go(cu_matvec_f32_swiglu(dn.y, dn.w, dn.type, gu.y, 2 * FF, gu.y + FF, 2 * FF, dn.rows, dn.k, 1, st));
            } else {
                if (!(skip & SK_SWIGLU)) go(paged_swiglu(ff, gu.y, 2 * FF, gu.y + FF, 2 * FF, 1, FF, st));
                go(cu_matvec_f32(dn.y, dn.w, dn.type, ff, dn.rows, dn.k, 1, st));
            }
            if (!(skip & SK_NORM)) go(paged_add_rmsnorm(x, xn, dn.y, normw, 1, DIM, 1e-5f, st));
        }
        const mat &out = ls[LAYERS].m[0];
        go(cu_rmsnorm(xn, x, normw, 1, DIM, 1e-5f, st));
        go(cu_matvec_f32(logits, out.w, out.type, xn, out.rows, out.k, 1, st));
        go(cu_argmax(ids, logits, 1, VOCAB, argmax_skip{}, st));
    };
    struct { const char *what; bool pdl, fuse; int skip; } modes[] = {
        {"no PDL", false, false, 0}, {"PDL", true, false, 0}, {"PDL + SwiGLU in down matvec", true, true, 0},
        {"PDL, without RoPE/store", true, false, SK_ROPE}, {"PDL, without attention", true, false, SK_ATTN},
        {"PDL, without add+norm", true, false, SK_NORM}, {"PDL, without SwiGLU", true, false, SK_SWIGLU},
        {"PDL, matvecs + head only", true, false, SK_ROPE | SK_ATTN | SK_NORM | SK_SWIGLU}};
    for (auto &md : modes) {
        kernels_use_pdl(md.pdl);
        double ms = time_graph(L, [&](cudaStream_t st) { record(st, md.fuse, md.skip); });
        char what[96];
        snprintf(what, sizeof what, "8b %s step, %s", mix, md.what);
        row(L, what, launches, bytes, ms);
    }
    kernels_use_pdl(1);
    for (int apart = 0; fused && apart < 2; apart++) {
        double ms = time_graph(L, [&](cudaStream_t st) { record_fused(st, apart); });
        char what[96];
        snprintf(what, sizeof what, "8b %s step, PDL, fused layer%s", mix, apart ? " (SwiGLU apart)" : "");
        row(L, what, launches, bytes, ms);
    }
    release(ls);
    for (void *p : {(void *)x, (void *)xn, (void *)q, (void *)att, (void *)ff, (void *)normw, (void *)logits,
                    (void *)kc, (void *)vc, (void *)meta, (void *)ids, scratch})
        CUDA_CHECK(cudaFree(p));
}

/* Attention alone: a graph of LAYERS paged_attention launches (each layer its own K/V), per
 * launch in us and the K/V bytes it reads per us, for one token at several positions and for
 * SEQS sequences of one token each (a batched decode step), at several split counts, for both
 * kernels (paged_attention_variant). */
static void run_attention(lab &L, int only_pos, int only_split) {
    enum { ACELLS = 16384, SEQS = 64, SEQ_POS = 200 };
    const size_t kv_layer = (size_t)ACELLS * KV;
    uint16_t *kc, *vc;
    float *q, *att;
    CUDA_CHECK(cudaMalloc(&kc, kv_layer * LAYERS * sizeof(uint16_t)));
    CUDA_CHECK(cudaMalloc(&vc, kv_layer * LAYERS * sizeof(uint16_t)));
    CUDA_CHECK(cudaMemset(kc, 0x11, kv_layer * LAYERS * sizeof(uint16_t))); /* finite f16 values */
    CUDA_CHECK(cudaMemset(vc, 0x22, kv_layer * LAYERS * sizeof(uint16_t)));
    CUDA_CHECK(cudaMalloc(&q, (size_t)SEQS * DIM * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&att, (size_t)SEQS * DIM * sizeof(float)));
    CUDA_CHECK(cudaMemset(q, 0, (size_t)SEQS * DIM * sizeof(float)));
    const int n_pages = ACELLS / PAGED_PAGE, per_seq = n_pages / SEQS;
    printf("# attention alone, %d launches (one per layer), 32/8 heads, hd %d\n", LAYERS, HD);
    printf("| kernel | tokens | position | splits | us per launch | K/V GB/s |\n|---|---|---|---|---|---|\n");
    const std::pair<int, int> cases[] = {{1, 63}, {1, 127}, {1, 255}, {1, 511}, {1, 1000}, {1, 2047}, {1, 4095}, {1, 16383}, {SEQS, SEQ_POS}};
    for (const auto &c : cases) {
        const int ns = c.first, p = c.second;
        if (only_pos >= 0 && (ns != 1 || p != only_pos)) continue;
        /* meta: pos[ns], seq[ns], then the page table: one sequence over all pages, or SEQS of per_seq */
        std::vector<int32_t> hm;
        for (int t = 0; t < ns; t++) hm.push_back(p);
        for (int t = 0; t < ns; t++) hm.push_back(t);
        for (int i = 0; i < n_pages; i++) hm.push_back(i);
        int32_t *dm;
        CUDA_CHECK(cudaMalloc(&dm, hm.size() * sizeof(int32_t)));
        CUDA_CHECK(cudaMemcpy(dm, hm.data(), hm.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
        const int stride = ns > 1 ? per_seq : n_pages;
        /* paged_attention_variant: 1 the tiled CUDA-core kernel, 2 the tensor-core one, 3 its V3,
         * then V3 with kv_ready (its first copies before the PDL wait, as in the engine's decode
         * steps; one token: the lab's cells are all written before the graph) */
        struct form { int v; bool ready; const char *name; };
        for (const form fm : {form{1, false, "tiled"}, form{2, false, "mma"}, form{3, false, "mma3"},
                              form{3, true, "mma3 ready"}})
        for (int split : {1, 4, 16, 32, 64, 128}) {
            if (fm.ready && ns != 1) continue;
            if (only_pos >= 0 && (fm.v < 3 || (only_split > 0 && split != only_split))) continue;
            size_t sb = paged_attention_scratch_bytes(ns, HEADS, HD, split);
            void *scratch;
            CUDA_CHECK(cudaMalloc(&scratch, sb));
            CUDA_CHECK(cudaMemset(scratch, 0, sb));
            double ms = time_graph(L, [&](cudaStream_t st) {
                for (int l = 0; l < LAYERS; l++)
                    CUDA_CHECK(paged_attention_variant(fm.v, att, q, kc + kv_layer * l, vc + kv_layer * l, dm, dm + ns,
                                                       dm + 2 * ns, stride, scratch, ns, HEADS, KV_HEADS, HD, split,
                                                       fm.ready, 0.088f, st));
            });
            const double us = ms * 1e3 / LAYERS, bytes = 2.0 * ns * (p + 1) * KV * sizeof(uint16_t);
            printf("| %s | %d | %d | %d | %.2f | %.0f |\n", fm.name, ns, p, split, us,
                   bytes / (us * 1e3));
            fflush(stdout);
            CUDA_CHECK(cudaFree(scratch));
        }
        CUDA_CHECK(cudaFree(dm));
    }
    for (void *x : {(void *)kc, (void *)vc, (void *)q, (void *)att}) CUDA_CHECK(cudaFree(x));
}

int main(int argc, char **argv) {
    if (!lab_has_device("decode")) return 0;
    lab L;
    L.announce();
    if (argc > 1 && strcmp(argv[1], "attention") == 0) {
        /* decode attention POS [SPLITS]: only V3 (kv_ready 0 and 1) for one token at POS (a case of the table) */
        run_attention(L, argc > 2 ? atoi(argv[2]) : -1, argc > 3 ? atoi(argv[3]) : 0);
        printf("PASS kbench decode attention\n");
        return 0;
    }
    gen_rng r = {0x5151ull ^ (uint64_t)time(NULL)};
    printf("# matvecs only (PDL on)\n");
    printf("| model | matvecs | weight GB | step ms | t/s | GB/s | %% copy | roofline t/s |\n|---|---|---|---|---|---|---|---|\n");
    for (bool stacked : {false, true}) {
        run_matvecs(L, &r, "q4_0", stacked);
        run_matvecs(L, &r, "q4_k_m", stacked);
    }
    printf("# whole decode step at position %d (stacked matrices, %d attention splits)\n", POS, N_SPLIT);
    printf("| step | launches | weight GB | step ms | t/s | GB/s | %% copy | roofline t/s |\n|---|---|---|---|---|---|---|---|\n");
    run_step(L, &r, "q4_0", true); /* the plain chains, then the fused layers */
    run_step(L, &r, "q4_k_m", true);
    printf("PASS kbench decode\n");
    return 0;
}
