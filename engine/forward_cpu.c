/* The CPU reference forward pass of every recipe models/ declares, over a batch of tokens from
 * several sequences (the engine/batch.h contract), of every layer or of a range of them (a stage
 * of a split model, the hidden state coming in and going out through x_in / x_out): embedding
 * (scaled when the recipe says), then per layer RMSNorm -> Q/K/V (+ biases) -> per-head Q/K
 * RMSNorm -> RoPE (adjacent or NEOX pairs; base, frequency factors, linear or YaRN scaling of the
 * layer) -> K/V into the paged cache -> causal GQA attention over each token's own sequence
 * through its page table (scaled, softcapped, limited to the window on windowed layers) -> output
 * projection (+ bias) -> post-norm -> residual, RMSNorm -> gated FFN (SiLU or GELU) -> post-norm ->
 * residual; then the final norm, the output head (+ bias) and the logit softcap. Matrix products
 * and the threads that run the loops are the exact or the fast path's (forward_cpu_exec.h); RoPE
 * angles, norms and activations are computed exactly on both (double where it matters), where
 * llama.cpp approximates (its GELU reads an f16 table of the tanh form). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu_act.h"
#include "engine/cpu_attn.h"
#include "engine/forward_cpu.h"
#include "engine/forward_cpu_exec.h"

/* RoPE of one kind of layer (models/model.h: llama_rope_angles): pair i of a token at pos turns
 * by pos * angle[i], cos and sin scaled by mscale. */
typedef struct {
    double *angle;  /* [n_rot / 2] */
    double mscale;
} rope_cfg;

struct forward_cpu {
    const llama_model *m;
    int32_t layer0, layer1;  /* the layers this state computes and caches, [layer0, layer1) */
    int32_t n_cells, n_batch, max_pos;
    int n_threads;        /* the most threads (scratch is sized for them) */
    int threads_1, threads_batch; /* a pass of one token, of more (forward_cpu_threads) */
    int nt;               /* this pass's */
    int64_t kv_dim;
    float *kv_k;   /* [layer1 - layer0][n_cells][kv_dim]: a cell's row is one contiguous write */
    float *kv_v;   /* [layer1 - layer0][n_cells][kv_dim] */
    /* Activations of one batch, [n_batch][width] each. */
    float *x;      /* residual stream [n_embd] */
    float *xn;     /* normed input [n_embd] */
    float *q;      /* [n_head * head_dim] */
    float *k;      /* [n_head_kv * head_dim] */
    float *v;      /* [n_head_kv * head_dim] */
    float *att;    /* attention output [n_head * head_dim] */
    float *gate;   /* [n_ff] */
    float *up;     /* [n_ff] */
    forward_cpu_exec exec; /* the matrix products and the threads */
    float *scores;        /* per thread: attention scores, [n_threads][CPU_ATTN_GROUP][max_pos] */
    int32_t *cells;       /* per thread: a head's cells in position order, [n_threads][max_pos] */
    rope_cfg rope_global, rope_swa; /* the RoPE of global and of windowed layers */
};

/* K and V rows of global layer l (layer0 <= l < layer1) and a cell. */
static float *cell_k(const forward_cpu *f, int32_t l, int32_t cell) {
    return f->kv_k + ((size_t)(l - f->layer0) * (size_t)f->n_cells + (size_t)cell) * (size_t)f->kv_dim;
}
static float *cell_v(const forward_cpu *f, int32_t l, int32_t cell) {
    return f->kv_v + ((size_t)(l - f->layer0) * (size_t)f->n_cells + (size_t)cell) * (size_t)f->kv_dim;
}

/* The matrix product and the loops' threads: the exact or the fast path (forward_cpu_exec.h). */
static int matmul(forward_cpu *f, const llama_weight *w, const float *x, int64_t n_tok, float *out,
                  char *err, size_t err_size) {
    return forward_cpu_exec_matmul(&f->exec, f->nt, w, x, n_tok, out, err, err_size);
}

/* --- the other ops ------------------------------------------------------------------------------ */

static void rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

/* RoPE on one token's query and key heads: the first n_rot values of each head, in adjacent
 * pairs (2i, 2i+1) or NEOX pairs (i, i + n_rot/2); each angle's cos and sin computed once for
 * both. */
static void rope(float *q, int32_t n_q_heads, float *k, int32_t n_k_heads, int32_t head_dim, int32_t n_rot,
                 llama_rope_kind kind, int32_t pos, const rope_cfg *rc) {
    for (int32_t i = 0; i < n_rot / 2; i++) {
        double theta = (double)pos * rc->angle[i];
        float c = (float)(cos(theta) * rc->mscale), s = (float)(sin(theta) * rc->mscale);
        int32_t i0 = kind == LLAMA_ROPE_NEOX ? i : 2 * i, i1 = kind == LLAMA_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
        for (int32_t h = 0; h < n_q_heads + n_k_heads; h++) {
            float *p = h < n_q_heads ? q + (size_t)h * head_dim : k + (size_t)(h - n_q_heads) * head_dim;
            float a = p[i0], b = p[i1];
            p[i0] = a * c - b * s;
            p[i1] = a * s + b * c;
        }
    }
}

static float gelu_tanh(float x) {
    const double k = 0.7978845608028654;  /* sqrt(2 / pi) */
    return (float)(0.5 * x * (1.0 + tanh(k * (x + 0.044715 * (double)x * x * x))));
}

static void add_bias(float *x, const float *b, int64_t width) {
    if (b)
        for (int64_t i = 0; i < width; i++) x[i] += b[i];
}

typedef struct {
    forward_cpu *f;
    const engine_fwd_batch *b;
    int32_t layer;
    int fast;     /* the fast path's grouped heads (attn_items); else one (token, head) an item */
    int32_t gs;   /* fast: query heads an item takes (of one K/V head's group) */
    int32_t subs; /* fast: items per (token, K/V head), ceil(group / gs) */
} attn_ctx;

/* The fast path's items: each takes gs query heads of one K/V head for one token, so those heads
 * share the loads of K and V (cpu_attn_heads); groups are split in smaller pieces only when the
 * pass has too few (token, K/V head) pairs to keep every thread busy (decode on many threads).
 * Each head's result is the same however its group is cut. */
static int64_t attn_items(attn_ctx *c, int32_t n_tok, int nt) {
    const llama_hparams *hp = &c->f->m->hp;
    /* the exact path, and softcapped scores (Gemma 2), keep the scalar loop of attn_range */
    c->fast = forward_cpu_exec_is_fast(&c->f->exec) && !(hp->attn_softcap > 0);
    if (!c->fast) return (int64_t)n_tok * hp->n_head;
    const int32_t group = hp->n_head / hp->n_head_kv;
    int32_t gs = group < CPU_ATTN_GROUP ? group : CPU_ATTN_GROUP;
    while (gs > 1 && (int64_t)n_tok * hp->n_head_kv * ((group + gs - 1) / gs) < 2 * (int64_t)nt) gs /= 2;
    c->gs = gs;
    c->subs = (group + gs - 1) / gs;
    return (int64_t)n_tok * hp->n_head_kv * c->subs;
}

/* One (token, head) pair per item, or on the fast path one (token, K/V head, piece of its group):
 * softmax(q K^T / sqrt(d)) V over positions 0..pos of the token's sequence, in position order. */
static void attn_range(void *arg, int64_t lo, int64_t hi, int tid) {
    attn_ctx *c = arg;
    forward_cpu *f = c->f;
    const llama_hparams *hp = &f->m->hp;
    int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    int64_t n_q = (int64_t)hp->n_head * hd;
    float *sc = f->scores + (size_t)tid * (size_t)f->max_pos * CPU_ATTN_GROUP;
    float scale = hp->attn_scale, cap = hp->attn_softcap;
    int swa = llama_layer_is_swa(hp, c->layer);
    const int fast = c->fast;
    for (int64_t item = lo; item < hi; item++) {
        int64_t t;
        int32_t h, g = 1;
        if (fast) { /* attn_items */
            const int64_t per_tok = (int64_t)hp->n_head_kv * c->subs;
            const int32_t kvh = (int32_t)(item % per_tok / c->subs), sub = (int32_t)(item % c->subs);
            t = c->b->n_tokens - 1 - item / per_tok; /* later tokens (longer histories) claimed first */
            h = kvh * group + sub * c->gs;
            g = group - sub * c->gs < c->gs ? group - sub * c->gs : c->gs;
        } else {
            t = item / hp->n_head;
            h = (int32_t)(item % hp->n_head);
        }
        int32_t kvh = h / group;
        int32_t pos = c->b->pos[t];
        const int32_t *pages = c->b->seqs[c->b->seq[t]].pages;
        const float *q = f->q + t * n_q + (int64_t)h * hd;
        /* A windowed layer sees positions pos - n_swa + 1 .. pos (llama.cpp masks p1 - p0 >= n_swa). */
        int32_t j0 = swa && pos >= hp->n_swa ? pos - hp->n_swa + 1 : 0;
        if (fast) {
            /* The fast path's vectorised heads (no softcap there: Gemma 2 keeps the loop below). */
            /* For the portable head, each position's key and value slices are requested as its
             * cell is looked up: the cache rows come from memory (a step's weights stream
             * through the caches between one layer's attention and the next step's), and its
             * dot and axpy calls would wait for them one by one (mini q4_k_m, tg32 at depth 512
             * on 2 threads: ~440 -> ~330 us a layer). The AVX-512 head keeps four keys' loads in
             * flight itself, and there the up-front requests lost (old/new alternated 6 rounds:
             * pp512 and tg32 at depth 1024 both slower with them). */
            int32_t *cells = f->cells + (size_t)tid * (size_t)f->max_pos;
            const char *k0 = (const char *)(cell_k(f, c->layer, 0) + (size_t)kvh * hd);
            const char *v0 = (const char *)(cell_v(f, c->layer, 0) + (size_t)kvh * hd);
            const int ask = !cpu_attn_head_in_registers(f->exec.isa, hd);
            for (int32_t j = j0; j <= pos; j++) {
                int32_t cell = pages[j / ENGINE_KV_PAGE] * ENGINE_KV_PAGE + j % ENGINE_KV_PAGE;
                cells[j - j0] = cell;
                size_t off = (size_t)cell * (size_t)f->kv_dim * sizeof(float);
                for (int64_t b = 0; ask && b < hd * (int64_t)sizeof(float); b += 64) {
                    __builtin_prefetch(k0 + off + b, 0, 3);
                    __builtin_prefetch(v0 + off + b, 0, 3);
                }
            }
            cpu_attn_heads(f->exec.isa, g, f->att + t * n_q + (int64_t)h * hd, q,
                           cell_k(f, c->layer, 0) + (size_t)kvh * hd, cell_v(f, c->layer, 0) + (size_t)kvh * hd,
                           (size_t)f->kv_dim, cells, pos - j0 + 1, hd, scale, sc);
            continue;
        }
        float mx = -INFINITY;
        for (int32_t j = j0; j <= pos; j++) {
            int32_t cell = pages[j / ENGINE_KV_PAGE] * ENGINE_KV_PAGE + j % ENGINE_KV_PAGE;
            sc[j] = forward_cpu_exec_dot(q, cell_k(f, c->layer, cell) + (size_t)kvh * hd, hd) * scale;
            if (cap > 0) sc[j] = cap * tanhf(sc[j] / cap);
            if (sc[j] > mx) mx = sc[j];
        }
        double sum = 0;
        for (int32_t j = j0; j <= pos; j++) {
            sc[j] = expf(sc[j] - mx);
            sum += sc[j];
        }
        float inv = (float)(1.0 / sum);
        float *o = f->att + t * n_q + (int64_t)h * hd;
        memset(o, 0, (size_t)hd * sizeof *o);
        for (int32_t j = j0; j <= pos; j++) {
            int32_t cell = pages[j / ENGINE_KV_PAGE] * ENGINE_KV_PAGE + j % ENGINE_KV_PAGE;
            const float *vj = cell_v(f, c->layer, cell) + (size_t)kvh * hd;
            float wj = sc[j] * inv;
            for (int32_t d = 0; d < hd; d++) o[d] += wj * vj[d];
        }
    }
}

/* The gated activation of tokens [lo, hi), gate[i] = act(gate[i]) * up[i]: the same per-element
 * code on any thread, so results do not depend on -t. On the pool: a prompt's n_ff x tokens
 * exp() calls took ~9% of a 128-token prompt on one core while the other waited. (A decode
 * token's row split into 256-element items was no faster: ~13 us against ~12 on the caller
 * alone, mini q4_k_m on 2 threads, the items' claims bouncing between the cores.) */
typedef struct {
    forward_cpu *f;
    int64_t F;
} gate_ctx;

static void gate_range(void *arg, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const gate_ctx *c = arg;
    float *gate = c->f->gate, *up = c->f->up;
    if (c->f->m->hp.act == LLAMA_ACT_GELU_TANH)
        for (int64_t i = lo * c->F; i < hi * c->F; i++) gate[i] = gelu_tanh(gate[i]) * up[i];
    else if (forward_cpu_exec_is_fast(&c->f->exec))
        cpu_silu_mul(c->f->exec.isa, gate + lo * c->F, up + lo * c->F, (hi - lo) * c->F);
    else
        for (int64_t i = lo * c->F; i < hi * c->F; i++) {
            float g = gate[i];
            gate[i] = g / (1.0f + expf(-g)) * up[i];
        }
}

/* The layer's per-token steps between its products, each on one token's rows alone (so a pass's
 * tokens are split over the threads with no change to any result). On one thread a 512-token
 * prompt's norms, adds and RoPE of a 70b layer took ~33 ms, as long as its products on a GPU
 * (op offload) and 16 threads' attention together. */
typedef enum {
    TOK_NORM_IN,   /* xn = attention norm of x */
    TOK_QKV,       /* Q/K/V biases, per-head Q/K norms, RoPE, K and V into the token's cell */
    TOK_ATTN_OUT,  /* output bias, post-attention norm, x += xn, xn = FFN norm of x */
    TOK_FFN_OUT    /* post-FFN norm, x += xn */
} tok_step;

typedef struct {
    forward_cpu *f;
    const engine_fwd_batch *b;
    int32_t l;
    tok_step step;
} tok_ctx;

static void tok_range(void *arg, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const tok_ctx *c = arg;
    forward_cpu *f = c->f;
    const llama_hparams *hp = &f->m->hp;
    const llama_layer *L = &f->m->layers[c->l];
    const int64_t E = hp->n_embd, hd = hp->head_dim, n_q = hp->n_head * hd, n_kv = hp->n_head_kv * hd;
    for (int64_t t = lo; t < hi; t++) {
        float *x = f->x + t * E, *xn = f->xn + t * E;
        switch (c->step) {
        case TOK_NORM_IN: rmsnorm(xn, x, L->attn_norm, E, hp->rms_eps); break;
        case TOK_QKV: {
            float *q = f->q + t * n_q, *k = f->k + t * n_kv, *v = f->v + t * n_kv;
            add_bias(q, L->bq, n_q);
            add_bias(k, L->bk, n_kv);
            add_bias(v, L->bv, n_kv);
            if (L->q_norm)
                for (int32_t h = 0; h < hp->n_head; h++) rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, hp->rms_eps);
            if (L->k_norm)
                for (int32_t h = 0; h < hp->n_head_kv; h++) rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, hp->rms_eps);
            const rope_cfg *rc = llama_layer_is_swa(hp, c->l) ? &f->rope_swa : &f->rope_global;
            rope(q, hp->n_head, k, hp->n_head_kv, hp->head_dim, hp->n_rot, hp->rope_kind, c->b->pos[t], rc);
            memcpy(cell_k(f, c->l, c->b->cell[t]), k, (size_t)n_kv * sizeof(float));
            memcpy(cell_v(f, c->l, c->b->cell[t]), v, (size_t)n_kv * sizeof(float));
            break;
        }
        case TOK_ATTN_OUT:
            add_bias(xn, L->bo, E);
            if (L->attn_post_norm) rmsnorm(xn, xn, L->attn_post_norm, E, hp->rms_eps);
            for (int64_t i = 0; i < E; i++) x[i] += xn[i];
            rmsnorm(xn, x, L->ffn_norm, E, hp->rms_eps);
            break;
        case TOK_FFN_OUT:
            if (L->ffn_post_norm) rmsnorm(xn, xn, L->ffn_post_norm, E, hp->rms_eps);
            for (int64_t i = 0; i < E; i++) x[i] += xn[i];
            break;
        }
    }
}

/* A step over the pass's tokens: on the pool when there are several (the exact path, whose
 * loops would start threads per call, and a decode step's single token run it here). */
static void tok_run(forward_cpu *f, const engine_fwd_batch *b, int32_t l, tok_step step) {
    tok_ctx c = {f, b, l, step};
    if (b->n_tokens >= 4 && forward_cpu_exec_is_fast(&f->exec))
        forward_cpu_exec_for(&f->exec, f->nt, b->n_tokens, tok_range, &c);
    else
        tok_range(&c, 0, b->n_tokens, 0);
}

/* --- one forward pass ---------------------------------------------------------------------------- */

static int fwd(void *self, const engine_fwd_batch *b, float *logits, char *err, size_t err_size) {
    forward_cpu *f = self;
    const llama_model *m = f->m;
    const llama_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, F = hp->n_ff;
    int32_t n = b->n_tokens;
    if (n < 1 || n > f->n_batch || b->max_pos > f->max_pos) {
        snprintf(err, err_size, "CPU forward: %d tokens (at most %d) reaching position %d (at most %d)", n,
                 f->n_batch, b->max_pos, f->max_pos);
        return -1;
    }
    int first = f->layer0 == 0, last = f->layer1 == hp->n_layer;
    if ((!first && !b->x_in) || (!last && !b->x_out)) {
        int no_in = !first && !b->x_in;
        snprintf(err, err_size, "CPU forward of layers %d..%d of %d: no buffer for the %s hidden state (x_%s is NULL)",
                 f->layer0, f->layer1 - 1, hp->n_layer, no_in ? "incoming" : "outgoing", no_in ? "in" : "out");
        return -1;
    }

    f->nt = n > 1 ? f->threads_batch : f->threads_1; /* -t for decode steps, -tb for more tokens */
    /* A later stage starts from the hidden state the previous one left: the same values the
     * residual stream would hold here in a single pass, so the result is bit-for-bit the same. */
    if (!first) memcpy(f->x, b->x_in, (size_t)n * (size_t)E * sizeof(float));
    else
        for (int32_t t = 0; t < n; t++) {
            if (llama_weight_row(&m->tok_embd, b->token[t], f->x + t * E, err, err_size)) return -1;
            if (hp->embd_scale != 1.0f)
                for (int64_t i = 0; i < E; i++) f->x[t * E + i] *= hp->embd_scale;
        }

    for (int32_t l = f->layer0; l < f->layer1; l++) {
        const llama_layer *L = &m->layers[l];
        tok_run(f, b, l, TOK_NORM_IN);
        const llama_weight *qkv[] = {&L->wq, &L->wk, &L->wv};
        float *qkv_out[] = {f->q, f->k, f->v};
        if (forward_cpu_exec_matmuls(&f->exec, f->nt, qkv, 3, f->xn, n, qkv_out, err, err_size)) return -1;
        tok_run(f, b, l, TOK_QKV);
        attn_ctx ac = {f, b, l, 0, 1, 1};
        forward_cpu_exec_for(&f->exec, f->nt, attn_items(&ac, n, f->nt), attn_range, &ac);
        if (matmul(f, &L->wo, f->att, n, f->xn, err, err_size)) return -1;
        tok_run(f, b, l, TOK_ATTN_OUT);
        const llama_weight *gu[] = {&L->w_gate, &L->w_up};
        float *gu_out[] = {f->gate, f->up};
        if (forward_cpu_exec_matmuls(&f->exec, f->nt, gu, 2, f->xn, n, gu_out, err, err_size)) return -1;
        gate_ctx gc = {f, F};
        forward_cpu_exec_for(&f->exec, f->nt, n, gate_range, &gc);
        if (matmul(f, &L->w_down, f->gate, n, f->xn, err, err_size)) return -1;
        tok_run(f, b, l, TOK_FFN_OUT);
    }
    if (!last) {
        memcpy(b->x_out, f->x, (size_t)n * (size_t)E * sizeof(float));
        return 0;
    }

    /* The output head only for the rows that want logits, gathered in token order (out_row
     * numbers them so). */
    int32_t k = 0;
    for (int32_t t = 0; t < n; t++)
        if (b->out_row[t] >= 0)
            rmsnorm(f->xn + (int64_t)k++ * E, f->x + t * E, m->output_norm, E, hp->rms_eps);
    if (k != b->n_out) {
        snprintf(err, err_size, "CPU forward: %d tokens want logits but n_out is %d", k, b->n_out);
        return -1;
    }
    if (!k) return 0;
    if (matmul(f, &m->output, f->xn, k, logits, err, err_size)) return -1;
    for (int32_t t = 0; t < k; t++) add_bias(logits + (int64_t)t * hp->n_vocab, m->output_b, hp->n_vocab);
    if (hp->final_softcap > 0) {
        float cap = hp->final_softcap;
        for (int64_t i = 0; i < (int64_t)k * hp->n_vocab; i++) logits[i] = cap * tanhf(logits[i] / cap);
    }
    return 0;
}

/* --- KV cells --------------------------------------------------------------------------------- */

/* Layers are global indices; a state answers only for the layers it holds. */
static int kv_bad(const forward_cpu *f, int32_t layer, int32_t cell, int32_t n, char *err, size_t err_size) {
    if (layer < f->layer0 || layer >= f->layer1 || cell < 0 || n < 0 || cell > f->n_cells - n) {
        snprintf(err, err_size, "CPU KV: layer %d, cells %d..+%d outside layers %d..%d x %d cells", layer, cell, n,
                 f->layer0, f->layer1 - 1, f->n_cells);
        return 1;
    }
    return 0;
}

static int kv_copy(void *self, int32_t dst, int32_t src, int32_t n, char *err, size_t err_size) {
    forward_cpu *f = self;
    if (kv_bad(f, f->layer0, dst, n, err, err_size) || kv_bad(f, f->layer0, src, n, err, err_size)) return -1;
    size_t bytes = (size_t)n * (size_t)f->kv_dim * sizeof(float);
    for (int32_t l = f->layer0; l < f->layer1; l++) {
        memmove(cell_k(f, l, dst), cell_k(f, l, src), bytes);
        memmove(cell_v(f, l, dst), cell_v(f, l, src), bytes);
    }
    return 0;
}

static int kv_get(void *self, int32_t layer, const int32_t *cells, int32_t n, float *k, float *v, char *err,
                  size_t err_size) {
    forward_cpu *f = self;
    size_t row = (size_t)f->kv_dim;
    for (int32_t i = 0; i < n; i++) {
        if (kv_bad(f, layer, cells[i], 1, err, err_size)) return -1;
        memcpy(k + i * row, cell_k(f, layer, cells[i]), row * sizeof(float));
        memcpy(v + i * row, cell_v(f, layer, cells[i]), row * sizeof(float));
    }
    return 0;
}

static int kv_set(void *self, int32_t layer, const int32_t *cells, int32_t n, const float *k, const float *v,
                  char *err, size_t err_size) {
    forward_cpu *f = self;
    size_t row = (size_t)f->kv_dim;
    for (int32_t i = 0; i < n; i++) {
        if (kv_bad(f, layer, cells[i], 1, err, err_size)) return -1;
        memcpy(cell_k(f, layer, cells[i]), k + i * row, row * sizeof(float));
        memcpy(cell_v(f, layer, cells[i]), v + i * row, row * sizeof(float));
    }
    return 0;
}

static void ops_free(void *self) { forward_cpu_free(self); }

const engine_backend_ops forward_cpu_ops = {
    .name = "CPU", .kv_elem_bytes = sizeof(float), .forward = fwd, .kv_copy = kv_copy, .kv_get = kv_get, .kv_set = kv_set, .free = ops_free,
};

const llama_weight **forward_cpu_matrices(const forward_cpu *f, int *n_out) {
    int n = 0, cap = 7 * (f->layer1 - f->layer0) + 1;
    const llama_weight **w = malloc((size_t)cap * sizeof *w);
    if (!w) return NULL;
    for (int32_t l = f->layer0; l < f->layer1; l++) {
        const llama_layer *L = &f->m->layers[l];
        const llama_weight *lw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++)
            if (lw[i]->data) w[n++] = lw[i];
    }
    if (f->layer1 == f->m->hp.n_layer) w[n++] = &f->m->output;
    *n_out = n;
    return w;
}

int forward_cpu_fast(forward_cpu *f, int paired, char *err, size_t err_size) {
    if (forward_cpu_exec_fast(&f->exec, err, err_size)) return -1;
    f->exec.mm.act_pair = paired;
    int n;
    const llama_weight **w = forward_cpu_matrices(f, &n);
    if (!w) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    int rc = forward_cpu_exec_repack(&f->exec, w, n, err, err_size);
    free(w);
    return rc;
}

int forward_cpu_buffers(const forward_cpu *f, void **p, size_t *bytes, int cap) {
    const llama_hparams *hp = &f->m->hp;
    const size_t B = (size_t)f->n_batch * sizeof(float), E = (size_t)hp->n_embd;
    const size_t nq = (size_t)hp->n_head * (size_t)hp->head_dim, F = (size_t)hp->n_ff;
    void *const ptr[] = {f->x, f->xn, f->q, f->k, f->v, f->att, f->gate, f->up};
    const size_t n[] = {E, E, nq, (size_t)f->kv_dim, (size_t)f->kv_dim, nq, F, F};
    int k = 0;
    for (int i = 0; i < 8 && k < cap; i++, k++) {
        p[k] = ptr[i];
        bytes[k] = B * n[i];
    }
    return k;
}

const char *forward_cpu_isa_note(quant_isa best) {
    return best < QUANT_ISA_AVX2 ? "this CPU has no AVX2: the fast CPU path runs its portable C kernels, several times "
                                   "slower than on an AVX2 or AVX-512 machine"
                                 : NULL;
}

int forward_cpu_set_offload(forward_cpu *f, const forward_cpu_offload *o) {
    if (!forward_cpu_exec_is_fast(&f->exec)) return -1;
    forward_cpu_exec_offload(&f->exec, o);
    return 0;
}

size_t forward_cpu_repacked_bytes(const forward_cpu *f) { return f->exec.ilv_bytes; }

void forward_cpu_threads(forward_cpu *f, int n_threads, int n_threads_batch) {
    f->threads_1 = n_threads < 1 || n_threads > f->n_threads ? f->n_threads : n_threads;
    f->threads_batch = n_threads_batch < 1 || n_threads_batch > f->n_threads ? f->n_threads : n_threads_batch;
}

forward_cpu *forward_cpu_new(const llama_model *m, int32_t layer0, int32_t layer1, int32_t n_cells,
                             int32_t n_batch, int32_t max_pos, int n_threads, char *err, size_t err_size) {
    const llama_hparams *hp = &m->hp;
    if (layer0 < 0 || layer1 <= layer0 || layer1 > hp->n_layer) {
        snprintf(err, err_size, "CPU backend: layers %d..%d are not a non-empty range of the model's %d", layer0,
                 layer1 - 1, hp->n_layer);
        return NULL;
    }
    if (n_cells < 1 || n_batch < 1 || max_pos < 1 || n_threads < 1) {
        snprintf(err, err_size, "bad sizes: %d KV cells, batch %d, %d positions, threads %d", n_cells, n_batch,
                 max_pos, n_threads);
        return NULL;
    }
    if (n_batch > n_cells) n_batch = n_cells;
    forward_cpu *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    f->m = m;
    f->layer0 = layer0;
    f->layer1 = layer1;
    f->n_cells = n_cells;
    f->max_pos = max_pos;
    f->n_batch = n_batch;
    f->n_threads = f->threads_1 = f->threads_batch = f->nt = n_threads;
    /* LongRoPE's factors depend on the context a sequence may reach, which is max_pos. */
    const float *factors = model_rope_factors(m, max_pos);
    const size_t half = (size_t)(hp->n_rot / 2 > 0 ? hp->n_rot / 2 : 1);
    f->rope_global.angle = malloc(half * sizeof(double));
    f->rope_swa.angle = malloc(half * sizeof(double));
    if (!f->rope_global.angle || !f->rope_swa.angle) {
        snprintf(err, err_size, "out of memory");
        forward_cpu_free(f);
        return NULL;
    }
    f->rope_global.mscale = llama_rope_angles(hp, hp->rope_base, hp->rope_freq_scale, factors, f->rope_global.angle);
    f->rope_swa.mscale = llama_rope_angles(hp, hp->rope_base_swa, 1.0, factors, f->rope_swa.angle);
    int64_t E = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim;
    int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    int64_t max_cols = E > F ? E : F;
    if (n_q > max_cols) max_cols = n_q;
    if (forward_cpu_exec_init(&f->exec, n_threads, max_cols, err, err_size)) {
        forward_cpu_free(f);
        return NULL;
    }
    size_t B = (size_t)n_batch;
    f->x = malloc(B * E * sizeof(float));
    f->xn = malloc(B * E * sizeof(float));
    f->q = malloc(B * n_q * sizeof(float));
    f->k = malloc(B * n_kv * sizeof(float));
    f->v = malloc(B * n_kv * sizeof(float));
    f->att = malloc(B * n_q * sizeof(float));
    f->gate = malloc(B * F * sizeof(float));
    f->up = malloc(B * F * sizeof(float));
    f->scores = malloc((size_t)n_threads * max_pos * CPU_ATTN_GROUP * sizeof(float));
    f->cells = malloc((size_t)n_threads * max_pos * sizeof(int32_t));
    if (!f->x || !f->xn || !f->q || !f->k || !f->v || !f->att || !f->gate || !f->up || !f->scores || !f->cells) {
        snprintf(err, err_size, "out of memory for activations of a batch of %d; use a smaller -b", n_batch);
        forward_cpu_free(f);
        return NULL;
    }
    f->kv_dim = n_kv;
    size_t cells = (size_t)(layer1 - layer0) * (size_t)n_cells;
    if (cells > SIZE_MAX / sizeof(float) / (size_t)n_kv) {
        snprintf(err, err_size, "KV cache: %d layers x %d cells x %lld values overflows", layer1 - layer0, n_cells,
                 (long long)n_kv);
        forward_cpu_free(f);
        return NULL;
    }
    f->kv_k = calloc(cells * (size_t)n_kv, sizeof(float));
    f->kv_v = calloc(cells * (size_t)n_kv, sizeof(float));
    if (!f->kv_k || !f->kv_v) {
        snprintf(err, err_size, "KV cache: out of memory for %zu MiB; use a smaller -c",
                 2 * cells * (size_t)n_kv * sizeof(float) >> 20);
        forward_cpu_free(f);
        return NULL;
    }
    return f;
}

void forward_cpu_free(forward_cpu *f) {
    if (!f) return;
    forward_cpu_exec_free(&f->exec); /* first: an offload unpins the buffers below */
    free(f->kv_k);
    free(f->kv_v);
    free(f->x);
    free(f->xn);
    free(f->q);
    free(f->k);
    free(f->v);
    free(f->att);
    free(f->gate);
    free(f->up);
    free(f->scores);
    free(f->cells);
    free(f->rope_global.angle);
    free(f->rope_swa.angle);
    free(f);
}
