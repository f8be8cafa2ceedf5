/* The general layer's Gemma kernels against f64 CPU computations on fresh random data, outputs
 * poisoned first and guarded after:
 *   paged_attention_recipe (kernels/paged.h): a sliding window (token at pos sees
 *     max(0, pos - window + 1)..pos, the CPU reference's boundary) and a score softcap
 *     (cap * tanh(s / cap) of the scaled score), alone and together, through shuffled page tables
 *     of 3 sequences, for head sizes 64, 128 and 256 (the tensor-core kernel V3), 192 (the tiled
 *     kernel's 32-position tiles: the window's first tile may start mid-page) and 36 (the untiled kernel), windows
 *     below, across and above a page, one and several splits; 1e-4 (attention's budget in
 *     test_kernels.c). Window 0 with softcap 0 must give paged_attention's numbers (1e-4).
 *   paged_attention_prefill_recipe, v2 and v3: the same window and softcap over prompt passes of
 *     one sequence (shuffled pages), within 3e-3 (Q and P in f16); without either, the bits of
 *     paged_attention_prefill_variant.
 *   cu_geglu (recipe.h): gelu_tanh(g) * u over strided rows, and its f16 copy the output rounded;
 *     1e-6.
 *   paged_post_add_rmsnorm: the planes' sum post-normed, added, then the next norm (or the add
 *   only), 1 and 3 planes, in place; 1e-5.
 *   cu_softcap and cu_scale: 1e-6.
 * Without a CUDA device: SKIP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tests/unit/test.h"
#include "tests/gpu/dev.h"
#include "tests/gpu/gen.h"
#include "kernels/check.h"
#include "kernels/paged.h"
#include "kernels/recipe.h"
#include "quant/quant.h"

/* f64 attention of query head qh at position pos over the positions its window lets it see
 * (forward_cpu.c's attn_range: j0 = pos - window + 1 when windowed and pos >= window), scores
 * scaled then softcapped; kv head kvh of an f16 cache [cells][kv_dim] through pages. */
static void attn_ref(double *out, const float *qh, const uint16_t *kc, const uint16_t *vc, const int32_t *pages,
                     int pos, int window, float cap, int kv_dim, int kvh, int hd, float scale, double *sc) {
    const int j0 = window > 0 && pos >= window ? pos - window + 1 : 0;
    double m = -INFINITY, l = 0;
    for (int p = j0; p <= pos; p++) {
        size_t row = ((size_t)pages[p / PAGED_PAGE] * PAGED_PAGE + p % PAGED_PAGE) * kv_dim + (size_t)kvh * hd;
        double d = 0;
        for (int i = 0; i < hd; i++) d += (double)qh[i] * quant_f16_to_f32(kc[row + i]);
        d *= scale;
        if (cap > 0) d = cap * tanh(d / cap);
        sc[p] = d;
        if (d > m) m = d;
    }
    for (int p = j0; p <= pos; p++) { sc[p] = exp(sc[p] - m); l += sc[p]; }
    for (int i = 0; i < hd; i++) {
        double o = 0;
        for (int p = j0; p <= pos; p++) {
            size_t row = ((size_t)pages[p / PAGED_PAGE] * PAGED_PAGE + p % PAGED_PAGE) * kv_dim + (size_t)kvh * hd;
            o += sc[p] * quant_f16_to_f32(vc[row + i]);
        }
        out[i] = o / l;
    }
}

/* Pages first..first + n - 1 in a random order (Fisher-Yates): page tables whose pages are neither
 * in order nor next to each other, so a kernel that assumes either reads wrong rows. */
static int32_t *shuffled_pages(gen_rng *r, int n, int first) {
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) perm[i] = i + first;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(gen_u64(r) % (uint64_t)(i + 1)), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    return perm;
}

/* K and V caches of cn f16 values each, standard normal, drawn K then V per value. */
static void random_caches(gen_rng *r, size_t cn, uint16_t **kc, uint16_t **vc) {
    *kc = malloc(cn * 2);
    *vc = malloc(cn * 2);
    for (size_t i = 0; i < cn; i++) {
        (*kc)[i] = quant_f32_to_f16((float)gen_normal(r));
        (*vc)[i] = quant_f32_to_f16((float)gen_normal(r));
    }
}

/* n_tok tokens at positions pos (token t in sequence t % 3) against attn_ref; window 0 and cap 0
 * also against paged_attention. */
static void test_attention(gen_rng *r, int n_head, int n_kv, int hd, int n_split, int window, float cap, int n_tok,
                           const int32_t *pos) {
    char name[200];
    snprintf(name, sizeof name, "attention recipe %d/%d heads, hd %d, %d splits, window %d, softcap %g, %d tokens "
             "(pos %d..)", n_head, n_kv, hd, n_split, window, cap, n_tok, pos[0]);
    enum { SEQS = 3 };
    int max_pos = 0;
    for (int t = 0; t < n_tok; t++) if (pos[t] > max_pos) max_pos = pos[t];
    const int per_seq = max_pos / PAGED_PAGE + 1, n_pages = SEQS * per_seq + 2, n_cells = n_pages * PAGED_PAGE;
    const int kv_dim = n_kv * hd, nq = n_tok * n_head * hd;
    int32_t *perm = shuffled_pages(r, SEQS * per_seq, 2), *seq = malloc(sizeof(int32_t) * (size_t)n_tok);
    for (int t = 0; t < n_tok; t++) seq[t] = t % SEQS;
    size_t cn = (size_t)n_cells * kv_dim;
    uint16_t *kc, *vc;
    random_caches(r, cn, &kc, &vc);
    float *q = malloc(sizeof(float) * (size_t)nq), *out = calloc((size_t)nq, sizeof(float));
    double *ref = malloc(sizeof(double) * (size_t)nq), *sc = malloc(sizeof(double) * (size_t)(max_pos + 1));
    /* large enough scores that a softcap of 3 bends them */
    for (int i = 0; i < nq; i++) q[i] = (float)(3.0 * gen_normal(r));
    const float scale = 1.0f / sqrtf((float)hd);
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_head; h++)
            attn_ref(ref + ((size_t)t * n_head + h) * hd, q + ((size_t)t * n_head + h) * hd, kc, vc,
                     perm + seq[t] * per_seq, pos[t], window, cap, kv_dim, h / (n_head / n_kv), hd, scale, sc);
    size_t sb = paged_attention_scratch_bytes(n_tok, n_head, hd, n_split);
    uint16_t *dk = dev_upload(kc, cn * 2), *dv = dev_upload(vc, cn * 2);
    float *dq = dev_upload(q, sizeof(float) * (size_t)nq), *dout = dev_poisoned(nq);
    int32_t *dpos = dev_upload(pos, sizeof(int32_t) * (size_t)n_tok);
    int32_t *dseq = dev_upload(seq, sizeof(int32_t) * (size_t)n_tok);
    int32_t *dpt = dev_upload(perm, sizeof(int32_t) * (size_t)(SEQS * per_seq));
    void *scratch = dev_alloc(sb);
    CUDA_CHECK(cudaMemset(scratch, 0, sb));
    cudaError_t e = paged_attention_recipe(dout, dq, dk, dv, dpos, dseq, dpt, per_seq, scratch, n_tok, n_head, n_kv, hd,
                                           n_split, 0, scale, window, cap, 0);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    int guard = e == cudaSuccess && dev_download(out, dout, nq);
    double rel = gen_rel_err(out, ref, nq), rel_plain = 0;
    if (e == cudaSuccess && window == 0 && cap == 0) { /* the plain kernel's numbers */
        float *plain = calloc((size_t)nq, sizeof(float));
        e = paged_attention(dout, dq, dk, dv, dpos, dseq, dpt, per_seq, scratch, n_tok, n_head, n_kv, hd, n_split, 0,
                            scale, 0);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        guard &= e == cudaSuccess && dev_download(plain, dout, nq);
        rel_plain = gen_rel_err(plain, ref, nq);
        free(plain);
    }
    CHECK(e == cudaSuccess && guard && rel < 1e-4 && rel_plain < 1e-4, name,
          "%s, guard %s, rel err %.3g (paged_attention %.3g), budget 1e-4", cudaGetErrorString(e),
          guard ? "ok" : "overwritten", rel, rel_plain);
    CUDA_CHECK(cudaFree(dk)); CUDA_CHECK(cudaFree(dv)); CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dout));
    CUDA_CHECK(cudaFree(dpos)); CUDA_CHECK(cudaFree(dseq)); CUDA_CHECK(cudaFree(dpt)); CUDA_CHECK(cudaFree(scratch));
    free(perm); free(seq); free(kc); free(vc); free(q); free(out); free(ref); free(sc);
}

/* paged_attention_prefill_recipe (variant v): n_tok consecutive tokens of one sequence from pos0
 * through a shuffled page table, against attn_ref (3e-3: Q and P in f16, test_kernels.c's prompt
 * attention budget); window 0 and softcap 0 also equal paged_attention_prefill_variant's bits. */
static void test_prefill(gen_rng *r, int v, int n_head, int n_kv, int hd, int window, float cap, int pos0, int n_tok) {
    char name[200];
    snprintf(name, sizeof name, "prefill attention recipe v%d %d/%d heads, hd %d, window %d, softcap %g, %d tokens "
             "from %d", v, n_head, n_kv, hd, window, cap, n_tok, pos0);
    const int last = pos0 + n_tok - 1, n_pages = last / PAGED_PAGE + 1 + 3, n_cells = n_pages * PAGED_PAGE;
    const int kv_dim = n_kv * hd, nq = n_tok * n_head * hd, per_seq = last / PAGED_PAGE + 1;
    int32_t *perm = shuffled_pages(r, n_pages, 0);
    size_t cn = (size_t)n_cells * kv_dim;
    uint16_t *kc, *vc;
    random_caches(r, cn, &kc, &vc);
    float *q = malloc(sizeof(float) * (size_t)nq), *out = calloc((size_t)nq, sizeof(float));
    float *plain = calloc((size_t)nq, sizeof(float));
    double *ref = malloc(sizeof(double) * (size_t)nq), *sc = malloc(sizeof(double) * (size_t)(last + 1));
    for (int i = 0; i < nq; i++) q[i] = (float)(3.0 * gen_normal(r));
    const float scale = 1.0f / sqrtf((float)hd);
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_head; h++)
            attn_ref(ref + ((size_t)t * n_head + h) * hd, q + ((size_t)t * n_head + h) * hd, kc, vc, perm, pos0 + t,
                     window, cap, kv_dim, h / (n_head / n_kv), hd, scale, sc);
    uint16_t *dk = dev_upload(kc, cn * 2), *dv = dev_upload(vc, cn * 2);
    float *dq = dev_upload(q, sizeof(float) * (size_t)nq), *dout = dev_poisoned(nq);
    int32_t *dpt = dev_upload(perm, sizeof(int32_t) * (size_t)per_seq);
    cudaError_t e = paged_attention_prefill_recipe(v, dout, dq, dk, dv, dpt, pos0, n_tok, n_head, n_kv, hd, scale,
                                                   window, cap, 0);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    int guard = e == cudaSuccess && dev_download(out, dout, nq), same = 1;
    if (e == cudaSuccess && window == 0 && cap == 0) {
        e = paged_attention_prefill_variant(v, dout, dq, dk, dv, dpt, pos0, n_tok, n_head, n_kv, hd, scale, 0);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        guard &= e == cudaSuccess && dev_download(plain, dout, nq);
        same = memcmp(plain, out, sizeof(float) * (size_t)nq) == 0;
    }
    double rel = gen_rel_err(out, ref, nq);
    CHECK(e == cudaSuccess && guard && rel < 3e-3 && same, name,
          "%s, guard %s, rel err %.3g (budget 3e-3)%s", cudaGetErrorString(e), guard ? "ok" : "overwritten", rel,
          same ? "" : ", bits differ from paged_attention_prefill_variant's");
    CUDA_CHECK(cudaFree(dk)); CUDA_CHECK(cudaFree(dv)); CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dout));
    CUDA_CHECK(cudaFree(dpt));
    free(perm); free(kc); free(vc); free(q); free(out); free(plain); free(ref); free(sc);
}

static double gelu_tanh_ref(float x) {
    const double k = 0.7978845608028654;
    return (float)(0.5 * x * (1.0 + tanh(k * (x + 0.044715 * (double)x * x * x))));
}

static void test_geglu(gen_rng *r, int n_tok, int n_ff, int with_h) {
    char name[160];
    snprintf(name, sizeof name, "cu_geglu %d tokens x %d%s", n_tok, n_ff, with_h ? ", f16 copy" : "");
    const int64_t sg = 2 * (int64_t)n_ff + 3, n = (int64_t)n_tok * n_ff; /* gate and up in one strided row */
    float *gu = malloc(sizeof(float) * (size_t)(n_tok * sg)), *out = malloc(sizeof(float) * (size_t)n);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n_tok * sg; i++) gu[i] = (float)(2.0 * gen_normal(r));
    for (int t = 0; t < n_tok; t++)
        for (int i = 0; i < n_ff; i++)
            ref[(int64_t)t * n_ff + i] = (float)gelu_tanh_ref(gu[t * sg + i]) * gu[t * sg + n_ff + i];
    float *dgu = dev_upload(gu, sizeof(float) * (size_t)(n_tok * sg)), *dout = dev_poisoned(n);
    uint16_t *dh = with_h ? dev_alloc(sizeof(uint16_t) * (size_t)n) : NULL, *hh = malloc(sizeof(uint16_t) * (size_t)n);
    cudaError_t e = cu_geglu(dout, dh, dgu, sg, dgu + n_ff, sg, n_tok, n_ff, 0);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    int guard = e == cudaSuccess && dev_download(out, dout, n);
    int64_t hbad = 0;
    if (with_h && guard) {
        CUDA_CHECK(cudaMemcpy(hh, dh, sizeof(uint16_t) * (size_t)n, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < n; i++) hbad += hh[i] != quant_f32_to_f16(out[i]);
    }
    double rel = gen_rel_err(out, ref, n);
    CHECK(e == cudaSuccess && guard && rel < 1e-6 && hbad == 0, name,
          "%s, guard %s, rel err %.3g (budget 1e-6), %lld f16 values not the output rounded", cudaGetErrorString(e),
          guard ? "ok" : "overwritten", rel, (long long)hbad);
    CUDA_CHECK(cudaFree(dgu)); CUDA_CHECK(cudaFree(dout));
    if (dh) CUDA_CHECK(cudaFree(dh));
    free(gu); free(out); free(ref); free(hh);
}

/* paged_post_add_rmsnorm (Gemma's post norm, the residual add and the next norm in one launch):
 * x += rmsnorm(sum of the planes) * post, then out = rmsnorm(x) * w (w NULL: the add only), against
 * f64 with the planes added in f32 in order as the kernel adds them; out over plane 0 (in place),
 * the guard after x intact. 1e-5 of each. */
static void test_post_add(gen_rng *r, int rows, int dim, int parts, int with_w) {
    char name[160];
    snprintf(name, sizeof name, "paged_post_add_rmsnorm %d rows x %d, %d plane%s%s", rows, dim, parts,
             parts > 1 ? "s" : "", with_w ? ", then the next norm" : ", add only");
    const int64_t plane = (int64_t)rows * dim + 32, n = (int64_t)rows * dim;
    float *d = malloc(sizeof(float) * (size_t)(parts * plane)), *w = malloc(sizeof(float) * (size_t)dim);
    float *pw = malloc(sizeof(float) * (size_t)dim), *x = malloc(sizeof(float) * (size_t)n);
    float *xo = calloc((size_t)n, sizeof(float)), *out = calloc((size_t)n, sizeof(float));
    double *xr = malloc(sizeof(double) * (size_t)n), *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < parts * plane; i++) d[i] = (float)gen_normal(r);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(3.0 * gen_normal(r));
    for (int i = 0; i < dim; i++) {
        w[i] = (float)gen_uniform(r, 0.5, 2.0);
        pw[i] = (float)gen_uniform(r, -2.0, 2.0);
    }
    for (int row = 0; row < rows; row++) {
        const int64_t o = (int64_t)row * dim;
        double ss = 0, sx = 0;
        for (int i = 0; i < dim; i++) {
            float v = d[o + i];
            for (int s = 1; s < parts; s++) v += d[s * plane + o + i];
            ref[o + i] = v;
            ss += (double)v * v;
        }
        const double sc = 1.0 / sqrt(ss / dim + 1e-6);
        for (int i = 0; i < dim; i++) {
            xr[o + i] = x[o + i] + ref[o + i] * sc * pw[i];
            sx += xr[o + i] * xr[o + i];
        }
        const double sn = 1.0 / sqrt(sx / dim + 1e-6);
        for (int i = 0; i < dim; i++) ref[o + i] = xr[o + i] * sn * w[i];
    }
    float *dd = dev_alloc(sizeof(float) * (size_t)(parts * plane)), *dx = dev_poisoned(n);
    CUDA_CHECK(cudaMemcpy(dd, d, sizeof(float) * (size_t)(parts * plane), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dx, x, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice));
    float *dw = dev_upload(w, sizeof(float) * (size_t)dim), *dp = dev_upload(pw, sizeof(float) * (size_t)dim);
    cudaError_t e = paged_post_add_rmsnorm(dx, dd, NULL, dd, parts, plane, dp, with_w ? dw : NULL, rows, dim, 1e-6f, 0);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    int guard = e == cudaSuccess && dev_download(xo, dx, n);
    if (e == cudaSuccess) CUDA_CHECK(cudaMemcpy(out, dd, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost));
    const double rx = gen_rel_err(xo, xr, n), ro = with_w ? gen_rel_err(out, ref, n) : 0;
    CHECK(e == cudaSuccess && guard && rx < 1e-5 && ro < 1e-5, name,
          "%s, guard %s, x rel err %.3g, out rel err %.3g (budget 1e-5)", cudaGetErrorString(e),
          guard ? "ok" : "overwritten", rx, ro);
    CUDA_CHECK(cudaFree(dd)); CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dp));
    free(d); free(w); free(pw); free(x); free(xo); free(out); free(xr); free(ref);
}

static void test_softcap_scale(gen_rng *r, int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)n), *out = malloc(sizeof(float) * (size_t)n);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(20.0 * gen_normal(r));
    float *dx = dev_poisoned(n);
    CUDA_CHECK(cudaMemcpy(dx, x, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice));
    cudaError_t e = cu_softcap(dx, n, 10.0f, 0);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    int guard = e == cudaSuccess && dev_download(out, dx, n);
    for (int64_t i = 0; i < n; i++) ref[i] = 10.0 * tanh(x[i] / 10.0);
    double rel = gen_rel_err(out, ref, n);
    CHECK(e == cudaSuccess && guard && rel < 1e-6, "cu_softcap 10", "%s, guard %s, rel err %.3g (budget 1e-6)",
          cudaGetErrorString(e), guard ? "ok" : "overwritten", rel);
    CUDA_CHECK(cudaMemcpy(dx, x, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice));
    e = cu_scale(dx, n, 25.298221f, 0);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    guard = e == cudaSuccess && dev_download(out, dx, n);
    for (int64_t i = 0; i < n; i++) ref[i] = x[i] * 25.298221f;
    rel = gen_rel_err(out, ref, n);
    CHECK(e == cudaSuccess && guard && rel < 1e-6, "cu_scale (Gemma's sqrt(640))",
          "%s, guard %s, rel err %.3g (budget 1e-6)", cudaGetErrorString(e), guard ? "ok" : "overwritten", rel);
    CUDA_CHECK(cudaFree(dx));
    free(x); free(out); free(ref);
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        SKIP("test_attention_recipe", "no CUDA device");
        return 0;
    }
    gen_rng r = {(uint64_t)time(NULL) * 2654435761u | 1};
    printf("# seed-time %lld\n", (long long)r.s);
    /* positions: early (inside the first window), at the window's edge, mid-page and deep */
    const int32_t pos[] = {0, 5, 15, 16, 17, 63, 64, 100, 129, 200, 511, 700, 1000, 1500, 2047, 2100};
    const int n_pos = (int)(sizeof pos / sizeof pos[0]);
    static const struct { int n_head, n_kv, hd; } heads[] = {{8, 4, 128}, {4, 1, 256}, {8, 2, 64}, {4, 2, 192}, {4, 2, 36}};
    static const struct { int window; float cap; } recipes[] = {
        {0, 0}, {16, 0}, {0, 3}, {16, 3}, {4096, 50}, {100, 0}, {512, 0}, {1, 0}, {64, 0}, {65, 3},
    };
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++)
        for (size_t c = 0; c < sizeof recipes / sizeof recipes[0]; c++)
            for (int ns = 1; ns <= 16; ns *= 4)
                test_attention(&r, heads[h].n_head, heads[h].n_kv, heads[h].hd, ns, recipes[c].window, recipes[c].cap,
                               n_pos, pos);
    /* one token alone (a decode step's shape) */
    const int32_t one[] = {777};
    test_attention(&r, 8, 4, 256, 4, 512, 50, 1, one);
    test_attention(&r, 8, 4, 256, 1, 16, 0, 1, one);
    /* a whole launch of tokens (PAGED_ATT_TOKENS), head 256: a prompt pass's shape where the
     * tensor-core prefill kernels do not apply */
    int32_t run[PAGED_ATT_TOKENS];
    for (int i = 0; i < PAGED_ATT_TOKENS; i++) run[i] = 100 + i;
    for (int ns = 1; ns <= 16; ns *= 4) {
        test_attention(&r, 4, 1, 256, ns, 0, 0, PAGED_ATT_TOKENS, run);
        test_attention(&r, 4, 1, 256, ns, 512, 0, PAGED_ATT_TOKENS, run);
        test_attention(&r, 8, 4, 128, ns, 0, 0, PAGED_ATT_TOKENS, run);
    }
    /* prompt attention: windows inside one tile, across tiles and blocks, past the whole context */
    static const struct { int n_head, n_kv, hd, pos0, n_tok; } pf[] = {
        {8, 2, 128, 0, 200}, {8, 4, 128, 150, 77}, {16, 2, 64, 0, 130}, {4, 4, 64, 1000, 33}, {8, 8, 128, 3000, 1},
        {4, 1, 128, 0, 520},
    };
    static const struct { int window; float cap; } pr[] = {{0, 0}, {16, 0}, {0, 3}, {16, 3}, {100, 50}, {64, 0},
                                                           {1, 0}, {513, 0}, {8192, 3}};
    for (int v = 2; v <= 3; v++)
        for (size_t i = 0; i < sizeof pf / sizeof pf[0]; i++)
            for (size_t c = 0; c < sizeof pr / sizeof pr[0]; c++)
                test_prefill(&r, v, pf[i].n_head, pf[i].n_kv, pf[i].hd, pr[c].window, pr[c].cap, pf[i].pos0,
                             pf[i].n_tok);
    test_geglu(&r, 1, 640, 0);
    test_geglu(&r, 7, 2049, 1);
    test_post_add(&r, 1, 640, 1, 1);
    test_post_add(&r, 1, 3840, 1, 0);
    test_post_add(&r, 9, 1152, 1, 1);
    test_post_add(&r, 9, 1152, 3, 1);
    test_post_add(&r, 5, 642, 3, 1); /* dim % 4 != 0: the scalar path */
    test_softcap_scale(&r, 262144 + 7);
    return test_done();
}
