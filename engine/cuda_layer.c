/* The CUDA backend's layer (cuda_internal.h): the products (matvec or GEMM, one group of stacked
 * matrices at a time), the attention half (QKV, RoPE with the K/V store, paged attention with the
 * layer's window and softcap, wo), the FFN half (gate/up, SwiGLU or GELU, down), the residual adds
 * with a post norm and the next norm, the output head (and its softcap), and the plan of which
 * decode layers take the fused matvecs. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/cuda_internal.h"
#include "quant/quant.h"

/* y[n][rows] = W . x[n][k]: more than MM_MATVEC_N tokens go through the tensor-core GEMM (x
 * rounded to f16) where it handles the weight type, split along k when the tokens are too few
 * to fill the GPU (batched decode, pipeline micro-batches), else through matvecs of up to
 * MATVEC_MAX_N tokens. The matvec does its FMAs on the CUDA cores: at 14336x4096 Q4_0 it takes
 * ~17 us for one token, ~60 for 4 and ~98 for 8, while the split GEMM takes ~60 for any count up
 * to 64 (kernel lab, PERF-LOG runs 2 and 8). */
enum { MM_MATVEC_N = 4 };

/* Where matrix mi of a group writes its outputs in buf (sized for n_batch tokens): each matrix's
 * take n_batch x its rows, after the matrices before it; its token stride is its rows. */
static float *matrix_out(const wgroup *g, float *buf, int32_t n_batch, int mi) {
    for (int j = 0; j < mi; j++) buf += (int64_t)n_batch * g->m[j].rows;
    return buf;
}

/* Where part i of a group's output lives in buf and its token stride. */
static void group_view(const wgroup *g, float *buf, int32_t n_batch, int part_i, float **p, int64_t *stride) {
    const int mi = g->part_m[part_i];
    *p = matrix_out(g, buf, n_batch, mi) + g->part_off[part_i];
    *stride = g->m[mi].rows;
}

static int mm_gemm(const dweight *w, int n) { return n > MM_MATVEC_N && !w->plain && cu_gemm_supported(w->type); }

/* xh_ready: xh already holds x in f16 (its producer wrote both), so no conversion is launched.
 * parts (the product is xn's, for fcu_part_add): a split GEMM leaves its planes in gemm_scratch and
 * *parts says how many (1: y written). */
static int mm_h(part *p, const dweight *w, const float *x, int xh_ready, float *y, int n, int *parts, char *err,
                size_t err_size) {
    if (parts) *parts = 1;
    if (mm_gemm(w, n)) {
        if (!xh_ready) DEV_TRY(paged_to_f16(p->xh, x, (int64_t)n * w->k, p->st));
        if (parts)
            DEV_TRY(cu_gemm_f16_split_parts(y, w->w, w->type, p->xh, w->rows, w->k, n, p->gemm_scratch,
                                         p->gemm_scratch_bytes, parts, p->st));
        else
            DEV_TRY(cu_gemm_f16_split(y, w->w, w->type, p->xh, w->rows, w->k, n, p->gemm_scratch,
                                   p->gemm_scratch_bytes, p->st));
        return 0;
    }
    for (int c = 0; c < n; c += MATVEC_MAX_N) {
        int nc = n - c < MATVEC_MAX_N ? n - c : MATVEC_MAX_N;
        const float *xc = x + (int64_t)c * w->k;
        float *yc = y + (int64_t)c * w->rows;
        if (w->plain) DEV_TRY(paged_matvec_plain(yc, w->w, w->type, xc, w->rows, w->k, nc, p->st));
        else DEV_TRY(cu_matvec_f32(yc, w->w, w->type, xc, w->rows, w->k, nc, p->st));
    }
    return 0;
}

static int mm(part *p, const dweight *w, const float *x, float *y, int n, char *err, size_t err_size) {
    return mm_h(p, w, x, 0, y, n, NULL, err, err_size);
}

/* mm into xn for the fcu_part_add that follows in the same segment (one device or a layer split: a
 * row split adds the parts' xn across devices first), which adds a split GEMM's planes itself. */
static int mm_xn(part *p, const dweight *w, const float *x, int xh_ready, int n, int t0, char *err, size_t err_size) {
    float *xn = p->xn + (int64_t)t0 * p->f->m->hp.n_embd;
    const int own = p->f->split != ENGINE_SPLIT_ROW;
    return mm_h(p, w, x, xh_ready, xn, n, own ? &p->xn_parts : NULL, err, err_size);
}

/* The group's products for tokens [t0, t0 + nt) of the pass; x's f16 copy is made once for all
 * of them (or not at all after fcu_part_add made it: xh_ready). */
static int group_mm(part *p, const wgroup *g, const float *x, float *buf, int t0, int nt, char *err,
                    size_t err_size) {
    int ready = p->xh_ready;
    p->xh_ready = 0;
    for (int i = 0; i < g->n_m; i++) {
        float *y = matrix_out(g, buf, p->f->n_batch, i);
        if (mm_h(p, &g->m[i], x, ready, y + (int64_t)t0 * g->m[i].rows, nt, NULL, err, err_size)) return -1;
        ready |= mm_gemm(&g->m[i], nt);
    }
    return 0;
}

/* Whether a pass of n tokens may take fused layers: one device or a layer split (a row split's
 * wo and down products are partial sums, added by the all-reduce before the norm), at most
 * FUSE_MAX_N tokens. */
static int fuse_on(const forward_cuda *f, int n) {
    return f->split != ENGINE_SPLIT_ROW && n <= FUSE_MAX_N;
}

/* The FZ_* plan of layer l for a pass of n tokens (0: the unfused layer). */
int fcu_layer_fz(const part *p, int32_t l, int n) {
    return fuse_on(p->f, n) && (p->layers[l - p->l0].fz[n] & FZ_LAYER) ? p->layers[l - p->l0].fz[n] : 0;
}

/* The group's products of cu_rmsnorm(x) * nw for tokens [t0, t0 + nt) (x at token t0): the norm
 * inside each matvec when all of them take it (fused), else one rmsnorm into xn and the plain
 * products. */
static int group_mm_norm(part *p, const wgroup *g, const float *x, const float *nw, float *buf, int t0, int nt,
                         int fused, char *err, size_t err_size) {
    const llama_hparams *hp = &p->f->m->hp;
    int E = hp->n_embd;
    if (!fused) {
        float *xn = p->xn + (int64_t)t0 * E;
        p->xh_ready = 0; /* xn is rewritten here, without its f16 copy */
        DEV_TRY(cu_rmsnorm(xn, x, nw, nt, E, hp->rms_eps, p->st));
        return group_mm(p, g, xn, buf, t0, nt, err, err_size);
    }
    if (g->n_m == 2) { /* Q/K and V in two types (Q4_K_M): both matrices in one launch where it takes them */
        const dweight *w0 = &g->m[0], *w1 = &g->m[1];
        float *y0 = matrix_out(g, buf, p->f->n_batch, 0), *y1 = matrix_out(g, buf, p->f->n_batch, 1);
        cudaError_t e = cu_matvec_f32_norm_pair(y0 + (int64_t)t0 * w0->rows, w0->w, w0->type, w0->rows,
                                                y1 + (int64_t)t0 * w1->rows, w1->w, w1->type, w1->rows, x, nw,
                                                hp->rms_eps, w0->k, nt, p->st);
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotSupported) DEV_TRY(e);
    }
    for (int i = 0; i < g->n_m; i++) {
        const dweight *w = &g->m[i];
        float *y = matrix_out(g, buf, p->f->n_batch, i);
        DEV_TRY(cu_matvec_f32_norm(y + (int64_t)t0 * w->rows, w->w, w->type, x, nw, hp->rms_eps, w->rows, w->k, nt,
                                p->st));
    }
    return 0;
}

/* The residual at token t0 (p->xc: x or x2) and the other buffer there. */
static float *res(const part *p, int t0) { return p->xc + (int64_t)t0 * p->f->m->hp.n_embd; }
static float *res_other(const part *p, int t0) {
    return (p->xc == p->x ? p->x2 : p->x) + (int64_t)t0 * p->f->m->hp.n_embd;
}

/* The pending post-normed product (p->pend) added into the residual at tokens [t0, t0 + nt) by its
 * own launch, where the next reader takes none. */
static int pend_flush(part *p, int t0, int nt, char *err, size_t err_size) {
    if (!p->pend.part) return 0;
    DEV_TRY(cu_post_pend_apply(res(p, t0), &p->pend, nt, p->st));
    p->pend.part = NULL;
    return 0;
}

/* The residual whole and in x again (pend_flush, and x2 copied back where the fused layers left
 * it there), for whatever reads x next outside the fused layers. */
int fcu_res_home(part *p, span s, char *err, size_t err_size) {
    if (pend_flush(p, s.t0, s.nt, err, err_size)) return -1;
    if (p->xc != p->x) {
        const int64_t E = p->f->m->hp.n_embd;
        DEV_TRY(cudaMemcpyAsync(p->x + s.t0 * E, p->xc + s.t0 * E, (size_t)s.nt * (size_t)E * sizeof(float),
                                cudaMemcpyDeviceToDevice, p->st));
        p->xc = p->x;
    }
    return 0;
}

/* y += W . x for n tokens (y: the residual at token t0): fused into the matvec, or the product
 * into xn and an add. post (a post norm, NULL: none) norms the product before the add: fused, in
 * the matvec's last block where it takes it (cu_matvec_f32_acc_post), else in the add's launch;
 * with defer (the next kernel to read y takes it: kernels.h's cu_post_pend), the product alone into
 * p->pend_part, left pending in p->pend, so that no block waits for every row. */
static int mm_acc(part *p, const dweight *w, const float *x, float *y, int t0, int n, int fused, int prefilled,
                  const float *post, int defer, char *err, size_t err_size) {
    if (pend_flush(p, t0, n, err, err_size)) return -1; /* (pend_part is taken again below) */
    if (fused && post && defer) {
        cudaError_t e = prefilled ? cu_matvec_f32_prefilled(p->pend_part, w->w, w->type, x, w->rows, w->k, n, p->st)
                                  : cu_matvec_f32(p->pend_part, w->w, w->type, x, w->rows, w->k, n, p->st);
        if (e == cudaSuccess) {
            p->pend = (cu_post_pend){p->pend_part, post, p->f->m->hp.rms_eps, (int)w->rows};
            return 0;
        }
        if (e != cudaErrorNotSupported) DEV_TRY(e);
    }
    if (fused && post) {
        cudaError_t e = cu_matvec_f32_acc_post(y, w->w, w->type, x, post, p->f->m->hp.rms_eps, p->post_part,
                                               p->post_count, w->rows, w->k, n, prefilled, p->st);
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotSupported) DEV_TRY(e);
        fused = 0; /* not taken (rows not a multiple of 4, unaligned, a case no fused matvec takes): the
                    * product, then the post norm and the add in one launch */
    }
    if (fused) {
        /* prefilled: X is decode attention's output; the matvec's blocks start while attention
         * runs, long enough for their whole first weight fill to land before the wait (kernels.h) */
        if (prefilled)
            DEV_TRY(cu_matvec_f32_acc_prefilled(y, w->w, w->type, x, w->rows, w->k, n, p->st));
        else
            DEV_TRY(cu_matvec_f32_acc(y, w->w, w->type, x, w->rows, w->k, n, p->st));
        return 0;
    }
    const llama_hparams *hp = &p->f->m->hp;
    float *xn = p->xn + (int64_t)t0 * hp->n_embd;
    if (mm(p, w, x, xn, n, err, err_size)) return -1;
    if (post) /* the post norm and the add in one launch */
        DEV_TRY(paged_post_add_rmsnorm(y, xn, NULL, xn, 1, 0, post, NULL, n, (int)w->rows, hp->rms_eps, p->st));
    else
        DEV_TRY(cu_add(y, y, xn, (int64_t)n * w->rows, p->st));
    return 0;
}

/* Splits per token of an n_tok-token attention launch: one token takes up to f->n_split (its
 * context is cut into that many ranges), a batch of tokens fewer, so that the launch still has
 * about ATT_BLOCKS_PER_SM blocks per SM but each block walks several tiles and fewer partials
 * are merged (kernel lab, decode attention: 64 tokens at position 200 take 61 us with 4 splits,
 * 110 with 32). It depends on n_tok only, so a captured decode graph stays valid. */
static int att_splits(const forward_cuda *f, const part *p, int n_tok) {
    int pairs = n_tok * p->n_head_kv, want = (ATT_BLOCKS_PER_SM * p->n_sm + pairs - 1) / pairs;
    return want < 1 ? 1 : want > f->n_split ? f->n_split : want;
}

/* The rows of Q, K and V (r[0..2]) that matrix i of a QKV group holds (0 for a part held by
 * another matrix). */
static void group_part_rows(const wgroup *g, int i, int64_t r[3]) {
    for (int j = 0; j < 3; j++) r[j] = g->part_m[j] == i ? g->part_rows[j] : 0;
}

/* Attention half of layer l: xn (normed) -> QKV, RoPE + K/V store, attention, output matvec
 * into xn (a partial sum in row mode). With fz (a fused layer's plan): x -> QKV with the attention
 * norm inside (or before it), and the output matvec added to x. The general layer (f->general)
 * is unfused, its Q/K/V epilogue recipe.h's (biases, per-head norms, RoPE of the recipe), and bo
 * goes straight into x: every part of a row split keeps x whole and adds it once there, while the
 * product in xn is a partial sum. */
int fcu_attn_half(part *p, int32_t l, span s, int fz, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    const llama_hparams *hp = &f->m->hp;
    const dlayer *L = &p->layers[l - p->l0];
    int E = hp->n_embd, hd = hp->head_dim, t0 = s.t0, nt = s.nt;
    const int32_t *d_pos = p->d_meta + s.n, *d_seq = d_pos + s.n, *d_cell = d_seq + s.n;
    const int32_t *d_pages = d_cell + 2 * s.n;
    size_t kv_off = (size_t)(l - p->l0) * (size_t)f->kv_cells * (size_t)p->kv_dim;
    float scale = hp->attn_scale; /* 1 / sqrt(head_dim) unless the recipe says */
    float *pq, *pk, *pv;
    int64_t sq, sk, sv;
    float *x = res(p, t0), *xn = p->xn + (int64_t)t0 * E;
    float *q = p->q + (int64_t)t0 * p->nq, *att = p->att + (int64_t)t0 * p->nq;
    /* Gemma's post norms (post): the QKV matvecs read the residual with the product pending from
     * the layer before added and write it to the other buffer (xo), where wo's product is then left
     * pending for the FFN half (fcu_ffn_half) */
    const int post = fz && L->attn_post_norm && L->ffn_post_norm;
    const cu_post_pend *pd = p->pend.part ? &p->pend : NULL;
    float *xo = post ? res_other(p, t0) : NULL;
    /* the layer's window (0: none) and score softcap (0: none): paged_attention_recipe's */
    const int swa = llama_layer_is_swa(hp, l), window = swa ? hp->n_swa : 0;
    const float softcap = hp->attn_softcap > 0 ? hp->attn_softcap : 0.0f;
    const int recipe = window > 0 || softcap > 0;
    /* a general layer's fused QKV: its biases and angle table in the epilogue (plain Llama: NULL) */
    const cu_rope_epi *epi = f->general ? &L->re : NULL;
    /* Per-head Q/K norms (FZ_QKVN) in a decode step of one token per sequence: the fused QKV hands
     * Q and K on unturned (K into p->qkv, free in a fused layer) and attention norms and turns
     * them (paged_attention_qkn), so no kernel runs between the two */
    const int qkn = (fz & FZ_QKVN) && f->one_per_seq && f->pf_pos0 < 0 && nt <= ATT_CHUNK && L->rr.q_norm &&
                    L->rr.k_norm &&
                    paged_attention_qkn_supported(p->n_head, p->n_head_kv, hd, hp->n_rot, L->rr.neox, window, softcap);
    cu_rope_epi raw;
    if (qkn) {
        raw = L->re;
        raw.k_raw = p->qkv;
        epi = &raw;
    }
    if (((fz & FZ_QKV) || qkn) && pd && !xo && pend_flush(p, t0, nt, err, err_size)) return -1;
    if ((fz & FZ_QKV) || qkn) { /* Q, K, V straight to q and the caches (qkn: K to p->qkv) */
        cudaError_t pe = cudaErrorNotSupported;
        if (L->qkv.n_m == 2) { /* Q4_K_M's Q/K and Q6_K V: one launch for both */
            const dweight *w0 = &L->qkv.m[0], *w1 = &L->qkv.m[1];
            int64_t r[2][3];
            for (int i = 0; i < 2; i++) group_part_rows(&L->qkv, i, r[i]);
            pe = cu_matvec_f32_norm_rope_pair(w0->w, w0->type, w0->rows, r[0][0], r[0][1], w1->w, w1->type, w1->rows,
                                           r[1][0], r[1][1], x, L->attn_norm, hp->rms_eps, w0->k, nt, q,
                                           p->kv_k + kv_off, p->kv_v + kv_off, d_pos + t0, d_cell + t0, p->kv_dim, hd,
                                           hp->n_rot, hp->rope_base, epi, xo ? pd : NULL, xo, p->st);
            if (pe != cudaSuccess && pe != cudaErrorNotSupported) DEV_TRY(pe);
        }
        for (int i = 0; pe != cudaSuccess && i < L->qkv.n_m; i++) {
            const dweight *w = &L->qkv.m[i];
            int64_t r[3];
            group_part_rows(&L->qkv, i, r);
            /* a second matrix (Q4_K_M's Q6_K V) runs beside the first (both read x only), on the
             * SMs the first one's grid leaves */
            if (i > 0) {
                const dweight *w0 = &L->qkv.m[0];
                const int front = cu_matvec_fused_blocks(w0->type, w0->rows, w0->k, nt);
                cudaError_t e = cu_matvec_f32_norm_rope_beside(
                    w->w, w->type, x, L->attn_norm, hp->rms_eps, w->rows, w->k, nt, q, p->kv_k + kv_off,
                    p->kv_v + kv_off, d_pos + t0, d_cell + t0, r[0], r[1], p->kv_dim, hd, hp->n_rot, hp->rope_base, epi,
                    front, xo ? pd : NULL, xo, p->st);
                if (e == cudaErrorNotSupported && xo) /* after the first: the residual it wrote, whole */
                    e = cu_matvec_f32_norm_rope(w->w, w->type, xo, L->attn_norm, hp->rms_eps, w->rows, w->k, nt, q,
                                                p->kv_k + kv_off, p->kv_v + kv_off, d_pos + t0, d_cell + t0, r[0], r[1],
                                                p->kv_dim, hd, hp->n_rot, hp->rope_base, epi, NULL, NULL, p->st);
                DEV_TRY(e);
            } else {
                cudaError_t e = cu_matvec_f32_norm_rope(
                    w->w, w->type, x, L->attn_norm, hp->rms_eps, w->rows, w->k, nt, q, p->kv_k + kv_off,
                    p->kv_v + kv_off, d_pos + t0, d_cell + t0, r[0], r[1], p->kv_dim, hd, hp->n_rot, hp->rope_base, epi,
                    xo ? pd : NULL, xo, p->st);
                if (e == cudaErrorNotSupported && xo) { /* no v11: the pending product by its own launch */
                    if (pend_flush(p, t0, nt, err, err_size)) return -1;
                    pd = NULL;
                    xo = NULL;
                    e = cu_matvec_f32_norm_rope(w->w, w->type, x, L->attn_norm, hp->rms_eps, w->rows, w->k, nt, q,
                                                p->kv_k + kv_off, p->kv_v + kv_off, d_pos + t0, d_cell + t0, r[0], r[1],
                                                p->kv_dim, hd, hp->n_rot, hp->rope_base, epi, NULL, NULL, p->st);
                }
                DEV_TRY(e);
            }
        }
        if (xo) { /* the residual is now xo's buffer, whole */
            p->xc = p->xc == p->x ? p->x2 : p->x;
            p->pend.part = NULL;
        }
    } else {
        if (pend_flush(p, t0, nt, err, err_size)) return -1;
        if (fz ? group_mm_norm(p, &L->qkv, x, L->attn_norm, p->qkv, t0, nt, fz & FZ_QKVN, err, err_size)
               : group_mm(p, &L->qkv, xn, p->qkv, t0, nt, err, err_size))
            return -1;
        group_view(&L->qkv, p->qkv, f->n_batch, 0, &pq, &sq);
        group_view(&L->qkv, p->qkv, f->n_batch, 1, &pk, &sk);
        group_view(&L->qkv, p->qkv, f->n_batch, 2, &pv, &sv);
        if (f->general) {
            DEV_TRY(cu_qkv_rope_store(q, p->kv_k + kv_off, p->kv_v + kv_off, pq + t0 * sq, sq, pk + t0 * sk, sk,
                                      pv + t0 * sv, sv, d_pos + t0, d_cell + t0, &L->rr, nt, p->n_head, p->n_head_kv, hd,
                                      hp->n_rot, p->st));
        } else {
            DEV_TRY(paged_rope_store(q, p->kv_k + kv_off, p->kv_v + kv_off, pq + t0 * sq, sq, pk + t0 * sk, sk,
                                     pv + t0 * sv, sv, d_pos + t0, d_cell + t0, nt, p->n_head, p->n_head_kv, hd,
                                     hp->n_rot, hp->rope_base, p->st));
        }
    }
    int h16 = 0; /* attention wrote wo's GEMM input in f16 too */
    if (f->pf_pos0 >= 0) {
        if (recipe)
            DEV_TRY(paged_attention_prefill_recipe(3, att, q, p->kv_k + kv_off, p->kv_v + kv_off, d_pages,
                                                   f->pf_pos0 + t0, nt, p->n_head, p->n_head_kv, hd, scale, window,
                                                   softcap, p->st));
        else
            DEV_TRY(paged_attention_prefill(att, q, p->kv_k + kv_off, p->kv_v + kv_off, d_pages, f->pf_pos0 + t0,
                                            nt, p->n_head, p->n_head_kv, hd, scale, p->st));
    } else if (qkn) {
        const paged_qk_norm qn = {p->qkv, p->kv_k + kv_off, d_cell + t0, L->rr.q_norm, L->rr.k_norm, L->rr.eps,
                                  L->rr.angle, L->rr.mscale, hp->n_rot, L->rr.neox};
        DEV_TRY(paged_attention_qkn(att, q, p->kv_k + kv_off, p->kv_v + kv_off, d_pos + t0, d_seq + t0, d_pages,
                                    f->max_pages, p->att_scratch, nt, p->n_head, p->n_head_kv, hd,
                                    att_splits(f, p, nt), scale, window, softcap, &qn, p->st));
    } else {
        /* an unfused pass whose wo runs on the GEMM: attention writes its f16 input too */
        h16 = !fz && !recipe && mm_gemm(&L->wo, nt);
        for (int c = 0; c < nt; c += ATT_CHUNK) {
            int nc = nt - c < ATT_CHUNK ? nt - c : ATT_CHUNK;
            cudaError_t e = cudaErrorNotSupported;
            if (h16)
                e = paged_attention_f16(att + (size_t)c * p->nq, p->xh + (size_t)c * p->nq, q + (size_t)c * p->nq,
                                        p->kv_k + kv_off, p->kv_v + kv_off, d_pos + t0 + c, d_seq + t0 + c, d_pages,
                                        f->max_pages, p->att_scratch, nc, p->n_head, p->n_head_kv, hd,
                                        att_splits(f, p, nc), f->one_per_seq, scale, p->st);
            if (e == cudaErrorNotSupported) {
                h16 = 0; /* (the first chunk: every chunk takes the same kernel) */
                if (recipe)
                    e = paged_attention_recipe(att + (size_t)c * p->nq, q + (size_t)c * p->nq, p->kv_k + kv_off,
                                               p->kv_v + kv_off, d_pos + t0 + c, d_seq + t0 + c, d_pages,
                                               f->max_pages, p->att_scratch, nc, p->n_head, p->n_head_kv, hd,
                                               att_splits(f, p, nc), f->one_per_seq, scale, window, softcap, p->st);
                else
                    e = paged_attention(att + (size_t)c * p->nq, q + (size_t)c * p->nq, p->kv_k + kv_off,
                                        p->kv_v + kv_off, d_pos + t0 + c, d_seq + t0 + c, d_pages, f->max_pages,
                                        p->att_scratch, nc, p->n_head, p->n_head_kv, hd, att_splits(f, p, nc),
                                        f->one_per_seq, scale, p->st);
            }
            DEV_TRY(e);
        }
    }
    x = res(p, t0);
    if (L->bo) DEV_TRY(cu_bias_add(x, E, L->bo, nt, E, p->st));
    /* wo follows attention: prefilled; its post-normed product pending where Gemma's fused gate/up
     * takes it (fcu_ffn_half) */
    const int defer = post && hp->act == LLAMA_ACT_GELU_TANH && fcu_ffn_glu(p, l, fz);
    return fz ? mm_acc(p, &L->wo, att, x, t0, nt, fz & FZ_WO, 1, L->attn_post_norm, defer, err, err_size)
              : mm_xn(p, &L->wo, att, h16, nt, t0, err, err_size);
}

/* FFN half of layer l: xn (normed) -> gate/up, SwiGLU, down into xn (a partial sum in row mode).
 * With fz: x -> gate/up with the FFN norm inside (or before it), SwiGLU inside it where gate and
 * up are one stacked matrix, and down added to x. */
int fcu_ffn_half(part *p, int32_t l, span s, int fz, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    const dlayer *L = &p->layers[l - p->l0];
    int E = f->m->hp.n_embd, t0 = s.t0, nt = s.nt;
    float *pg, *pu;
    int64_t sg, su;
    float *x = res(p, t0), *xn = p->xn + (int64_t)t0 * E;
    const dweight *dn = &L->down;
    const wgroup *gu = &L->gu;
    const int gelu = f->m->hp.act == LLAMA_ACT_GELU_TANH; /* Gemma's gate */
    /* Gemma's post norms: down's product pending where the next layer, fused in this part, reads the
     * residual next (fcu_attn_half) */
    const int post = fz && L->attn_post_norm && L->ffn_post_norm;
    const int defer = post && l + 1 < p->l1 && fcu_layer_fz(p, l + 1, nt);
    /* gate and up stacked in one matrix: the fused matvec writes silu or gelu(gate) * up itself (no
     * gate launch), where v11 takes it; down then adds to x, through the post norm where the
     * recipe has one. Gemma's reads the residual with wo's pending product added, and writes it to
     * the other buffer (xo), as the QKV matvecs did */
    if (fcu_ffn_glu(p, l, fz)) {
        float *ff = p->ff + (int64_t)t0 * p->n_ff;
        const dweight *w = &gu->m[0];
        float *xo = post && gelu ? res_other(p, t0) : NULL;
        if (!xo && pend_flush(p, t0, nt, err, err_size)) return -1;
        cudaError_t e = cu_matvec_f32_norm_glu(ff, w->w, w->type, x, L->ffn_norm, f->m->hp.rms_eps, w->rows, w->k, nt,
                                               gelu, p->pend.part ? &p->pend : NULL, xo, p->st);
        if (e == cudaSuccess) {
            if (xo) {
                p->xc = p->xc == p->x ? p->x2 : p->x;
                p->pend.part = NULL;
            }
            return mm_acc(p, dn, ff, res(p, t0), t0, nt, fz & FZ_DOWN, 0, L->ffn_post_norm, defer, err, err_size);
        }
        if (e != cudaErrorNotSupported) DEV_TRY(e);
    }
    if (pend_flush(p, t0, nt, err, err_size)) return -1;
    if (fz ? group_mm_norm(p, &L->gu, x, L->ffn_norm, p->gu, t0, nt, fz & FZ_GU, err, err_size)
           : group_mm(p, &L->gu, xn, p->gu, t0, nt, err, err_size))
        return -1;
    group_view(&L->gu, p->gu, f->n_batch, 0, &pg, &sg);
    group_view(&L->gu, p->gu, f->n_batch, 1, &pu, &su);
    /* SwiGLU apart otherwise: folding it into the down matvec's input staging measured slower, unfused
     * (PERF-LOG run 8) and fused (run 26: 8b q4_0 tg128 510 vs 518 apart) */
    float *ff = p->ff + (int64_t)t0 * p->n_ff;
    if (!fz && mm_gemm(dn, nt)) { /* down's GEMM input in f16 from SwiGLU itself */
        if (gelu) DEV_TRY(cu_geglu(ff, p->xh, pg + t0 * sg, sg, pu + t0 * su, su, nt, p->n_ff, p->st));
        else DEV_TRY(paged_swiglu_f16(ff, p->xh, pg + t0 * sg, sg, pu + t0 * su, su, nt, p->n_ff, p->st));
        return mm_xn(p, dn, ff, 1, nt, t0, err, err_size);
    }
    if (gelu) DEV_TRY(cu_geglu(ff, NULL, pg + t0 * sg, sg, pu + t0 * su, su, nt, p->n_ff, p->st));
    else DEV_TRY(paged_swiglu(ff, pg + t0 * sg, sg, pu + t0 * su, su, nt, p->n_ff, p->st));
    return fz ? mm_acc(p, dn, ff, x, t0, nt, fz & FZ_DOWN, 0, L->ffn_post_norm, defer, err, err_size)
              : mm(p, dn, ff, xn, nt, err, err_size);
}

/* Whether layer l's FFN half (plan fz) starts with the fused gate/up-and-gate matvec
 * (cu_matvec_f32_norm_glu): gate and up stacked in one matrix, an activation it has. */
int fcu_ffn_glu(const part *p, int32_t l, int fz) {
    const llama_hparams *hp = &p->f->m->hp;
    const wgroup *gu = &p->layers[l - p->l0].gu;
    return (fz & FZ_GU) && (hp->act == LLAMA_ACT_SILU || hp->act == LLAMA_ACT_GELU_TANH) && gu->n_m == 1 &&
           gu->n_parts == 2 && gu->part_off[1] == gu->part_rows[0] && gu->part_rows[0] == gu->part_rows[1] &&
           gu->part_rows[0] == p->n_ff;
}

/* The start of the part's first layer: embed (when the pass starts at layer 0 and the part holds
 * the table) and, with norm (the first layer is not fused), the attention norm; x already holds
 * the hidden state otherwise. */
int fcu_part_enter(part *p, span s, int norm, char *err, size_t err_size) {
    const llama_model *m = p->f->m;
    const llama_hparams *hp = &m->hp;
    int E = hp->n_embd;
    float *x = p->x + (int64_t)s.t0 * E, *xn = p->xn + (int64_t)s.t0 * E;
    p->xh_ready = 0; /* xh and gemm_scratch hold nothing of this pass yet (an aborted pass may have */
    p->xn_parts = 1; /* left either behind) */
    p->xc = p->x;    /* nor a residual elsewhere or pending */
    p->pend.part = NULL;
    if (p->embeds) {
        DEV_TRY(cu_embed(x, p->tok_embd, m->tok_embd.type, p->d_meta + s.t0, s.nt, m->tok_embd.n_rows, E, p->st));
        if (hp->embd_scale != 1.0f) DEV_TRY(cu_scale(x, (int64_t)s.nt * E, hp->embd_scale, p->st)); /* Gemma */
    }
    if (norm) DEV_TRY(cu_rmsnorm(xn, x, p->layers[0].attn_norm, s.nt, E, hp->rms_eps, p->st));
    return 0;
}

/* Residual add of xn into x, then the norm `w` of the next block into xn (w NULL: add only). post
 * (Gemma's post-attention or post-FFN norm, NULL: none) norms the product in xn first: after a row
 * split's all-reduce, so the whole sum is normed. */
int fcu_part_add(part *p, span s, const float *post, const float *w, char *err, size_t err_size) {
    const llama_hparams *hp = &p->f->m->hp;
    int E = hp->n_embd;
    float *x = p->x + (int64_t)s.t0 * E, *xn = p->xn + (int64_t)s.t0 * E;
    /* a pass the GEMMs take (more than MM_MATVEC_N tokens): the norm's output in f16 too, the next
     * group_mm's input (those groups' matrices are all of E columns) */
    int parts = p->xn_parts > 1 ? p->xn_parts : 1;
    const float *d = parts > 1 ? (const float *)p->gemm_scratch : xn;
    p->xn_parts = 1;
    p->xh_ready = w && s.nt > MM_MATVEC_N;
    if (post) /* the planes' sum normed, added, and the next norm: one launch */
        DEV_TRY(paged_post_add_rmsnorm(x, xn, p->xh_ready ? p->xh : NULL, d, parts, (int64_t)s.nt * E, post, w, s.nt,
                                       E, hp->rms_eps, p->st));
    else if (p->xh_ready || parts > 1) /* w NULL (the last layer): the planes' add alone */
        DEV_TRY(paged_add_rmsnorm_sum(x, xn, p->xh_ready ? p->xh : NULL, d, parts, (int64_t)s.nt * E, w, s.nt, E,
                                      hp->rms_eps, p->st));
    else if (w) DEV_TRY(paged_add_rmsnorm(x, xn, xn, w, s.nt, E, hp->rms_eps, p->st));
    else DEV_TRY(cu_add(x, x, xn, (int64_t)s.nt * E, p->st));
    return 0;
}

/* Logits rows r0..r0+nr of the pass (tokens listed at d_meta's out section) into h_logits, or
 * when greedy only each row's argmax into h_ids (the head part). identity: every token is an
 * output row, in order (a decode step), so a fused head reads x in place. */
int fcu_run_head(part *p, int n, int r0, int nr, int greedy, int identity, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    const llama_hparams *hp = &f->m->hp;
    const int32_t *d_out = p->d_meta + 4 * n;
    const dweight *o = &p->output;
    /* A step through the gate writes its outputs straight into the pinned buffers (mapped; UVA:
     * their host addresses are their device addresses): no copy at the step's end, whose fixed
     * cost would come between this step and the next. */
    const int direct = f->gate_pass;
    float *logits = p->logits;
    if (fuse_on(f, nr) && p->head_fz[nr]) { /* the output norm inside the head's matvec */
        const float *x = p->x;
        if (!identity || r0 != 0 || nr != n) {
            DEV_TRY(paged_gather_rows(p->xn, p->x, d_out + r0, nr, hp->n_embd, p->st));
            x = p->xn;
        }
        if (direct && !greedy && !(hp->final_softcap > 0)) logits = f->h_logits;
        DEV_TRY(cu_matvec_f32_norm(logits, o->w, o->type, x, p->output_norm, hp->rms_eps, o->rows, o->k, nr, p->st));
    } else {
        DEV_TRY(paged_gather_rows(p->xn, p->x, d_out + r0, nr, hp->n_embd, p->st));
        DEV_TRY(cu_rmsnorm(p->xn, p->xn, p->output_norm, nr, hp->n_embd, hp->rms_eps, p->st));
        if (mm(p, o, p->xn, p->logits, nr, err, err_size)) return -1;
        if (p->output_b) DEV_TRY(cu_bias_add(p->logits, hp->n_vocab, p->output_b, nr, hp->n_vocab, p->st));
    }
    /* Gemma 2's final softcap, before the argmax or the copy (logits is p->logits then) */
    if (hp->final_softcap > 0) DEV_TRY(cu_softcap(p->logits, (int64_t)nr * hp->n_vocab, hp->final_softcap, p->st));
    if (greedy) {
        DEV_TRY(cu_argmax(direct ? f->h_ids : p->d_ids, p->logits, nr, hp->n_vocab, f->skip, p->st));
        if (!direct)
            DEV_TRY(cudaMemcpyAsync(f->h_ids, p->d_ids, (size_t)2 * nr * sizeof(int32_t), cudaMemcpyDeviceToHost, p->st));
        return 0;
    }
    if (logits != f->h_logits)
        DEV_TRY(cudaMemcpyAsync(f->h_logits, p->logits, (size_t)nr * (size_t)hp->n_vocab * sizeof(float),
                                cudaMemcpyDeviceToHost, p->st));
    return 0;
}

/* Whether the fused matvecs take w for n tokens (kernels.h: cu_matvec_fused_supported). */
static int fused_ok(const dweight *w, int n) {
    return !w->plain && cu_matvec_fused_supported(w->type, w->rows, w->k, n);
}

/* The fusion plan of a part, on its device after load (the fused matvecs depend on its shared
 * memory): per layer and token count which products take a fused matvec, and whether the layer
 * runs fused. All fused, a layer is at least 2 launches fewer than unfused (its norms and adds);
 * each product that falls back costs one back (the norm or the add on its own), so the layer runs
 * fused while that leaves it no longer than the unfused one (as long: no norm launch between it and
 * fused neighbours). A model no fused matvec takes keeps the unfused layers. A general layer's
 * QKV matvec takes its biases and RoPE from an angle table in its epilogue (FZ_QKV with
 * cu_rope_epi; NEOX pairs are adjacent rows: forward_cuda.neox_rows), or where the model has
 * per-head Q/K norms, which need a whole head, only the norm (FZ_QKVN: recipe.h's epilogue kernel
 * after it; in a decode step of one token per sequence the epilogue hands Q and K on unturned and
 * attention norms and turns them: paged_attention_qkn); its wo and down add into x as Llama's do
 * (bo goes into x beside them; Gemma's post norms: each product left pending for the NORM matvec
 * that reads the residual next, or in the matvec's last block: mm_acc), its gate/up take the
 * norm and, stacked, the gate's activation (SiLU or Gemma's GELU). The head fuses its norm unless
 * the model has an output bias. */
void fcu_plan_fusions(part *p) {
    for (int n = 1; n <= FUSE_MAX_N; n++) {
        p->head_fz[n] = p->head && !p->output_b && fused_ok(&p->output, n);
        for (int32_t l = 0; l < p->l1 - p->l0; l++) {
            dlayer *L = &p->layers[l];
            int qkv = 1, gu = 1;
            for (int i = 0; i < L->qkv.n_m; i++) qkv &= fused_ok(&L->qkv.m[i], n);
            for (int i = 0; i < L->gu.n_m; i++) gu &= fused_ok(&L->gu.m[i], n);
            int wo = fused_ok(&L->wo, n), down = fused_ok(&L->down, n);
            int extra = !qkv + !wo + !gu + !down;
            const int qkv_flag = p->f->general && !p->f->rope_fused ? FZ_QKVN : FZ_QKV;
            L->fz[n] = (uint8_t)((qkv ? qkv_flag : 0) | (wo ? FZ_WO : 0) | (gu ? FZ_GU : 0) | (down ? FZ_DOWN : 0) |
                                 (extra <= 2 ? FZ_LAYER : 0));
        }
    }
}

/* The general layer's RoPE (forward_cuda.general) as the CPU reference sets it up
 * (models/model.h: llama_rope_angles) for the global layers (rope_base, rope_freq_scale) into
 * f->h_angle and f->rope_mscale and, for a model with windowed layers, the CPU's rope_swa
 * (rope_base_swa, no frequency scale; the factors and YaRN's ramp as there) into f->h_angle_swa
 * and f->rope_mscale_swa. The factors are model_rope_factors' for the backend's positions per
 * sequence, as the CPU's. */
int fcu_rope_angles(forward_cuda *f, char *err, size_t err_size) {
    const llama_model *m = f->m;
    const llama_hparams *hp = &m->hp;
    const size_t half = (size_t)(hp->n_rot / 2 > 0 ? hp->n_rot / 2 : 1);
    const float *factors = model_rope_factors(m, f->max_pos);
    int swa = 0;
    for (int32_t l = 0; l < hp->n_layer; l++) swa |= llama_layer_is_swa(hp, l);
    f->h_angle = malloc(half * sizeof(double));
    if (swa) f->h_angle_swa = malloc(half * sizeof(double));
    if (!f->h_angle || (swa && !f->h_angle_swa)) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    f->rope_mscale = llama_rope_angles(hp, hp->rope_base, hp->rope_freq_scale, factors, f->h_angle);
    if (swa) f->rope_mscale_swa = llama_rope_angles(hp, hp->rope_base_swa, 1.0, factors, f->h_angle_swa);
    return 0;
}
