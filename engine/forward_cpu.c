/* The CPU reference forward pass of Llama: embedding, then per layer RMSNorm -> Q/K/V -> RoPE
 * (adjacent pairs) -> causal GQA attention over the KV cache -> output projection -> residual,
 * RMSNorm -> SwiGLU FFN -> residual; then the final norm and the output head. Matrix products
 * dequantise weight rows into per-thread scratch and dot them with every token
 * of the batch, a block of rows at a time, so memory stays small for large models and the
 * arithmetic is plain f32. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/forward_cpu.h"
#include "engine/kvcache.h"

struct forward_cpu {
    const llama_model *m;
    int32_t n_ctx, n_batch;
    int n_threads;
    kvcache kv;
    /* Activations of one batch, [n_batch][width] each. */
    float *x;      /* residual stream [n_embd] */
    float *xn;     /* normed input [n_embd] */
    float *q;      /* [n_head * head_dim] */
    float *k;      /* [n_head_kv * head_dim] */
    float *v;      /* [n_head_kv * head_dim] */
    float *att;    /* attention output [n_head * head_dim] */
    float *gate;   /* [n_ff] */
    float *up;     /* [n_ff] */
    float *scratch;       /* per thread: dequantised weight rows, [n_threads][MATMUL_ROWS][max_cols] */
    int64_t max_cols;
    float *scores;        /* per thread: attention scores, [n_threads][n_ctx] */
};

/* --- threads: [0, n) split into one contiguous range per thread -------------------------------- */

typedef void (*par_fn)(void *ctx, int64_t lo, int64_t hi, int tid);

typedef struct {
    par_fn fn;
    void *ctx;
    int64_t lo, hi;
    int tid;
} par_job;

static void *par_main(void *arg) {
    par_job *j = arg;
    j->fn(j->ctx, j->lo, j->hi, j->tid);
    return NULL;
}

/* Runs fn over [0, n) on up to n_threads threads (thread 0 is the caller). A thread that cannot
 * be started has its range run by the caller, so the result is the same either way. */
static void parallel_for(int n_threads, int64_t n, par_fn fn, void *ctx) {
    enum { MAX_THREADS = 256 };
    int nt = n_threads < 1 ? 1 : n_threads > MAX_THREADS ? MAX_THREADS : n_threads;
    if (nt > n) nt = (int)(n > 0 ? n : 1);
    par_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 0; t < nt; t++) {
        jobs[t] = (par_job){fn, ctx, n * t / nt, n * (t + 1) / nt, t};
        if (t > 0) started[t] = pthread_create(&th[t], NULL, par_main, &jobs[t]) == 0;
    }
    fn(ctx, jobs[0].lo, jobs[0].hi, 0);
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else fn(ctx, jobs[t].lo, jobs[t].hi, t);
    }
}

/* --- matrix product: out[t][r] = dot(W row r, x[t]) ------------------------------------------- */

static float dot_f32(const float *a, const float *b, int64_t n) {
    /* Eight partial sums in a fixed order: vectorisable, and the same result on any thread. */
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    for (; i < n; i++) s[i & 7] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

enum { MATMUL_ROWS = 16 };  /* weight rows dequantised together */

typedef struct {
    forward_cpu *f;
    const llama_weight *w;
    const float *x;      /* [n_tok][w->n_cols] */
    int64_t n_tok;
    float *out;          /* [n_tok][w->n_rows] */
    int failed;          /* set by any thread whose dequantisation failed */
    char err[256];
    pthread_mutex_t lock;
} matmul_ctx;

static void matmul_range(void *arg, int64_t lo, int64_t hi, int tid) {
    matmul_ctx *c = arg;
    const llama_weight *w = c->w;
    int64_t n = w->n_cols;
    float *rows = c->f->scratch + (size_t)tid * MATMUL_ROWS * (size_t)c->f->max_cols;
    /* A block of rows is dequantised once, then each token's activations are read once per
     * block instead of once per row. */
    for (int64_t r0 = lo; r0 < hi; r0 += MATMUL_ROWS) {
        int64_t nr = hi - r0 < MATMUL_ROWS ? hi - r0 : MATMUL_ROWS;
        for (int64_t r = 0; r < nr; r++) {
            char err[256];
            if (llama_weight_row(w, r0 + r, rows + r * n, err, sizeof err)) {
                pthread_mutex_lock(&c->lock);
                if (!c->failed) snprintf(c->err, sizeof c->err, "%s", err);
                c->failed = 1;
                pthread_mutex_unlock(&c->lock);
                return;
            }
        }
        for (int64_t t = 0; t < c->n_tok; t++) {
            const float *x = c->x + t * n;
            float *out = c->out + t * w->n_rows + r0;
            for (int64_t r = 0; r < nr; r++) out[r] = dot_f32(rows + r * n, x, n);
        }
    }
}

static int matmul(forward_cpu *f, const llama_weight *w, const float *x, int64_t n_tok, float *out,
                  char *err, size_t err_size) {
    matmul_ctx c = {.f = f, .w = w, .x = x, .n_tok = n_tok, .out = out};
    pthread_mutex_init(&c.lock, NULL);
    parallel_for(f->n_threads, w->n_rows, matmul_range, &c);
    pthread_mutex_destroy(&c.lock);
    if (c.failed) snprintf(err, err_size, "%s", c.err);
    return c.failed ? -1 : 0;
}

/* --- the other ops ------------------------------------------------------------------------------ */

static void rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

/* Llama's RoPE on one token: pairs (2i, 2i+1) of the first n_rot values of each head turn by
 * pos * base^(-2i/n_rot). */
static void rope(float *v, int32_t n_heads, int32_t head_dim, int32_t n_rot, int32_t pos, float base) {
    for (int32_t i = 0; i < n_rot / 2; i++) {
        double theta = (double)pos * pow((double)base, -2.0 * i / (double)n_rot);
        float c = (float)cos(theta), s = (float)sin(theta);
        for (int32_t h = 0; h < n_heads; h++) {
            float *p = v + (size_t)h * head_dim + 2 * i;
            float a = p[0], b = p[1];
            p[0] = a * c - b * s;
            p[1] = a * s + b * c;
        }
    }
}

typedef struct {
    forward_cpu *f;
    int32_t layer, pos0;
} attn_ctx;

/* One (token, head) pair per item: softmax(q K^T / sqrt(d)) V over positions 0..pos. */
static void attn_range(void *arg, int64_t lo, int64_t hi, int tid) {
    attn_ctx *c = arg;
    forward_cpu *f = c->f;
    const llama_hparams *hp = &f->m->hp;
    int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    int64_t n_q = (int64_t)hp->n_head * hd;
    float *sc = f->scores + (size_t)tid * (size_t)f->n_ctx;
    float scale = 1.0f / sqrtf((float)hd);
    for (int64_t item = lo; item < hi; item++) {
        int64_t t = item / hp->n_head;
        int32_t h = (int32_t)(item % hp->n_head), kvh = h / group;
        int32_t pos = c->pos0 + (int32_t)t;
        const float *q = f->q + t * n_q + (int64_t)h * hd;
        float mx = -INFINITY;
        for (int32_t j = 0; j <= pos; j++) {
            sc[j] = dot_f32(q, kvcache_k(&f->kv, c->layer, j) + (size_t)kvh * hd, hd) * scale;
            if (sc[j] > mx) mx = sc[j];
        }
        double sum = 0;
        for (int32_t j = 0; j <= pos; j++) {
            sc[j] = expf(sc[j] - mx);
            sum += sc[j];
        }
        float inv = (float)(1.0 / sum);
        float *o = f->att + t * n_q + (int64_t)h * hd;
        memset(o, 0, (size_t)hd * sizeof *o);
        for (int32_t j = 0; j <= pos; j++) {
            const float *vj = kvcache_v(&f->kv, c->layer, j) + (size_t)kvh * hd;
            float wj = sc[j] * inv;
            for (int32_t d = 0; d < hd; d++) o[d] += wj * vj[d];
        }
    }
}

/* --- one batch ---------------------------------------------------------------------------------- */

enum head_rows { HEAD_NONE, HEAD_LAST, HEAD_ALL };  /* which rows of a batch get logits */

static int eval_batch(forward_cpu *f, const int32_t *tokens, int32_t n, int32_t pos0, float *logits,
                      enum head_rows rows, char *err, size_t err_size) {
    const llama_model *m = f->m;
    const llama_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, F = hp->n_ff, hd = hp->head_dim;
    int64_t n_q = hp->n_head * hd, n_kv = hp->n_head_kv * hd;

    for (int32_t t = 0; t < n; t++)
        if (llama_weight_row(&m->tok_embd, tokens[t], f->x + t * E, err, err_size)) return -1;

    for (int32_t l = 0; l < hp->n_layer; l++) {
        const llama_layer *L = &m->layers[l];
        for (int32_t t = 0; t < n; t++) rmsnorm(f->xn + t * E, f->x + t * E, L->attn_norm, E, hp->rms_eps);
        if (matmul(f, &L->wq, f->xn, n, f->q, err, err_size) ||
            matmul(f, &L->wk, f->xn, n, f->k, err, err_size) ||
            matmul(f, &L->wv, f->xn, n, f->v, err, err_size))
            return -1;
        for (int32_t t = 0; t < n; t++) {
            rope(f->q + t * n_q, hp->n_head, hp->head_dim, hp->n_rot, pos0 + t, hp->rope_base);
            rope(f->k + t * n_kv, hp->n_head_kv, hp->head_dim, hp->n_rot, pos0 + t, hp->rope_base);
            memcpy(kvcache_k(&f->kv, l, pos0 + t), f->k + t * n_kv, (size_t)n_kv * sizeof(float));
            memcpy(kvcache_v(&f->kv, l, pos0 + t), f->v + t * n_kv, (size_t)n_kv * sizeof(float));
        }
        attn_ctx ac = {f, l, pos0};
        parallel_for(f->n_threads, (int64_t)n * hp->n_head, attn_range, &ac);
        if (matmul(f, &L->wo, f->att, n, f->xn, err, err_size)) return -1;
        for (int64_t i = 0; i < n * E; i++) f->x[i] += f->xn[i];

        for (int32_t t = 0; t < n; t++) rmsnorm(f->xn + t * E, f->x + t * E, L->ffn_norm, E, hp->rms_eps);
        if (matmul(f, &L->w_gate, f->xn, n, f->gate, err, err_size) ||
            matmul(f, &L->w_up, f->xn, n, f->up, err, err_size))
            return -1;
        for (int64_t i = 0; i < n * F; i++) {
            float g = f->gate[i];
            f->gate[i] = g / (1.0f + expf(-g)) * f->up[i];
        }
        if (matmul(f, &L->w_down, f->gate, n, f->xn, err, err_size)) return -1;
        for (int64_t i = 0; i < n * E; i++) f->x[i] += f->xn[i];
    }

    /* The output head only for the rows the caller wants. */
    if (rows == HEAD_NONE) return 0;
    int32_t first = rows == HEAD_ALL ? 0 : n - 1;
    for (int32_t t = first; t < n; t++) rmsnorm(f->xn + t * E, f->x + t * E, m->output_norm, E, hp->rms_eps);
    return matmul(f, &m->output, f->xn + (int64_t)first * E, n - first, logits, err, err_size);
}

int forward_cpu_eval(forward_cpu *f, const int32_t *tokens, int32_t n, int32_t pos, float *logits,
                     int all_logits, char *err, size_t err_size) {
    int32_t n_vocab = f->m->hp.n_vocab;
    if (n < 1 || pos < 0 || pos > f->n_ctx - n) {
        snprintf(err, err_size, "%d tokens at position %d do not fit the context of %d (-c)", n, pos, f->n_ctx);
        return -1;
    }
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            snprintf(err, err_size, "token id %d is outside the model's vocabulary of %d", tokens[i], n_vocab);
            return -1;
        }
    for (int32_t done = 0; done < n;) {
        int32_t b = n - done < f->n_batch ? n - done : f->n_batch;
        /* Without all_logits, earlier batches only fill the cache. */
        enum head_rows rows = all_logits ? HEAD_ALL : done + b == n ? HEAD_LAST : HEAD_NONE;
        float *out = all_logits ? logits + (size_t)done * n_vocab : logits;
        if (eval_batch(f, tokens + done, b, pos + done, out, rows, err, err_size))
            return -1;
        done += b;
    }
    return 0;
}

forward_cpu *forward_cpu_new(const llama_model *m, int32_t n_ctx, int32_t n_batch, int n_threads,
                             char *err, size_t err_size) {
    const llama_hparams *hp = &m->hp;
    if (n_ctx < 1 || n_batch < 1 || n_threads < 1) {
        snprintf(err, err_size, "bad sizes: context %d, batch %d, threads %d", n_ctx, n_batch, n_threads);
        return NULL;
    }
    if (n_batch > n_ctx) n_batch = n_ctx;
    forward_cpu *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    f->m = m;
    f->n_ctx = n_ctx;
    f->n_batch = n_batch;
    f->n_threads = n_threads;
    int64_t E = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim;
    int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    f->max_cols = E > F ? E : F;
    if (n_q > f->max_cols) f->max_cols = n_q;
    size_t B = (size_t)n_batch;
    f->x = malloc(B * E * sizeof(float));
    f->xn = malloc(B * E * sizeof(float));
    f->q = malloc(B * n_q * sizeof(float));
    f->k = malloc(B * n_kv * sizeof(float));
    f->v = malloc(B * n_kv * sizeof(float));
    f->att = malloc(B * n_q * sizeof(float));
    f->gate = malloc(B * F * sizeof(float));
    f->up = malloc(B * F * sizeof(float));
    f->scratch = malloc((size_t)n_threads * MATMUL_ROWS * f->max_cols * sizeof(float));
    f->scores = malloc((size_t)n_threads * n_ctx * sizeof(float));
    if (!f->x || !f->xn || !f->q || !f->k || !f->v || !f->att || !f->gate || !f->up || !f->scratch ||
        !f->scores) {
        snprintf(err, err_size, "out of memory for activations of a batch of %d; use a smaller -b", n_batch);
        forward_cpu_free(f);
        return NULL;
    }
    if (kvcache_init(&f->kv, hp->n_layer, n_ctx, (int32_t)n_kv, err, err_size)) {
        forward_cpu_free(f);
        return NULL;
    }
    return f;
}

void forward_cpu_free(forward_cpu *f) {
    if (!f) return;
    kvcache_free(&f->kv);
    free(f->x);
    free(f->xn);
    free(f->q);
    free(f->k);
    free(f->v);
    free(f->att);
    free(f->gate);
    free(f->up);
    free(f->scratch);
    free(f->scores);
    free(f);
}
