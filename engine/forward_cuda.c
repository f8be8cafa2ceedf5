/* The CUDA backend of engine/batch.h (engine/forward_cuda.h). One device memory block holds
 * every weight (repacked for kernels.h's matvec), the KV cache and all scratch, sized at
 * creation, so a forward pass allocates nothing. Weights travel through pinned staging buffers
 * filled by reader threads from the mapped file while earlier buffers are copied.
 *
 * KV layout: per layer, K and V f16 [n_cells][n_head_kv * head_dim] (a cell's row contiguous,
 * the CPU backend's layout in f16), cell c = page * ENGINE_KV_PAGE + offset.
 *
 * A layer is ten launches: Q/K/V as one stacked matvec (when the three share a type), RoPE with
 * the K/V store, paged attention (split and merge), the output matvec, residual add + FFN norm,
 * gate/up stacked, SwiGLU, down, residual add + the next layer's attention norm.
 *
 * Per pass, everything that changes (token ids, positions, sequence indices, cells, the rows
 * that want logits, the page tables) goes to the device in one copy of one int32 buffer laid out
 * [token n][pos n][seq n][cell n][out n][pages n_seqs x max_pages], so for a given n the device
 * addresses are fixed and a decode step captured as a graph replays with new contents. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "engine/devices.h"
#include "engine/forward_cuda.h"
#include "kernels/check.h"
#include "kernels/kernels.h"
#include "kernels/paged.h"
#include "quant/quant.h"

enum {
    GRAPH_MAX_TOK = 64,  /* decode steps of up to this many sequences run from a captured graph */
    ATT_CHUNK = 64,      /* tokens per attention launch (scratch is sized for this many) */
    PREFILL_MIN = 64,    /* a pass of at least this many consecutive tokens of one sequence takes the
                            tensor-core prompt attention (fewer: too few blocks to fill the GPU) */
    OUT_CHUNK = 64,      /* logits rows computed and copied back at once */
    N_SPLIT_MAX = 32,    /* attention splits per token (blocks per kv head; a decode step's graph
                            launches them all, most exiting at once at short contexts) */
    STAGE_SLOTS = 8,     /* pinned staging buffers for the upload */
    STAGE_BYTES = 16 << 20,
    N_READERS = 4,       /* threads copying the mapped file into staging buffers */
};

/* One matvec's weight on the device: one matrix of the file, or several read by the same input
 * stacked by rows (Q, K, V; gate, up) so one launch does them all. */
typedef struct {
    void *w;            /* repacked for matvec, or GGUF layout when plain */
    uint32_t type;
    int64_t rows, k;    /* rows of all the stacked matrices */
    int plain;          /* F32/F16 with k not a multiple of 32: paged_matvec_plain */
    const llama_weight *src[3];
    int n_src;
} dweight;

/* Matrices that read the same input: one stacked matvec when their types agree, else one each.
 * The outputs of a pass (buffer of n_batch tokens) are part i of token t at
 * buf[off_i + t * stride_i] (group_view). */
typedef struct {
    dweight m[3];
    int n_m;            /* 1 when stacked */
    int n_parts;
    int64_t part_rows[3];
} wgroup;

typedef struct {
    wgroup qkv, gu;
    dweight wo, down;
    float *attn_norm, *ffn_norm;
} dlayer;

typedef struct {
    const llama_model *m;
    int dev;
    char dev_name[256];
    cudaStream_t st;
    int32_t n_cells, n_batch, max_pos, max_pages, n_split;
    int32_t max_seqs;   /* page tables per pass: sequences of max_pos positions fitting n_cells */
    int32_t pf_pos0;    /* the pass is one sequence's positions pf_pos0.. (prompt attention); -1: not */
    int64_t kv_dim;
    uint8_t *block;     /* the one device allocation */
    void *tok_embd;     /* GGUF layout, for embed */
    dlayer *layers;
    dweight output;
    dweight **ws;       /* every matvec weight, in upload order */
    int n_w;
    float *output_norm;
    uint16_t *kv_k, *kv_v;  /* [n_layer][n_cells][kv_dim] f16 */
    float *x, *xn;      /* residual stream, normed input (or a matvec's output before the add) */
    float *qkv, *q;     /* Q/K/V outputs (group_view), Q after RoPE */
    float *att, *gu, *ff, *logits;
    uint16_t *xh;       /* a matvec input in f16 for gemm_f16 (prompt passes) */
    void *att_scratch;
    int32_t *d_meta, *h_meta;  /* h_meta pinned */
    float *h_logits;           /* pinned [OUT_CHUNK][n_vocab] */
    int32_t *d_ids, *h_ids;    /* [OUT_CHUNK] argmax of each logits row (forward_greedy); h_ids pinned */
    uint16_t *h_kv;            /* pinned [2][ATT_CHUNK][kv_dim] for kv_get / kv_set */
    /* decode steps by [greedy][sequences]: shapes run once eagerly before capture */
    int graph_seen[2][GRAPH_MAX_TOK + 1];
    cudaGraphExec_t graphs[2][GRAPH_MAX_TOK + 1];
} forward_cuda;

#define DEV_TRY(call) CUDA_TRY(call, err, err_size)

/* --- device memory layout: one pass sizes the block, a second assigns pointers ----------------- */

typedef struct {
    uint8_t *base;
    size_t off;
} arena;

static void *take(arena *a, size_t bytes) {
    size_t o = (a->off + 255) & ~(size_t)255;
    a->off = o + bytes;
    return a->base ? a->base + o : NULL;
}

static size_t raw_bytes(const llama_weight *w) { return (size_t)w->n_rows * w->row_bytes; }

static size_t dweight_raw(const dweight *d) {
    size_t b = 0;
    for (int i = 0; i < d->n_src; i++) b += raw_bytes(d->src[i]);
    return b;
}

/* How the matrices src[0..n) (same type and row length) are kept on the device as one; 0, or -1
 * when no kernel takes them. */
static int weight_plan(dweight *d, const llama_weight *const *src, int n, char *err, size_t err_size) {
    *d = (dweight){.type = src[0]->type, .k = src[0]->n_cols, .n_src = n};
    for (int i = 0; i < n; i++) {
        d->src[i] = src[i];
        d->rows += src[i]->n_rows;
    }
    if (matvec_repacked_bytes(d->type, d->rows, d->k)) return 0;
    if (d->type == QUANT_F32 || d->type == QUANT_F16) {
        d->plain = 1;
        return 0;
    }
    snprintf(err, err_size, "%s: type %s with rows of %lld is not supported by the CUDA backend; use -ngl 0",
             src[0]->name, quant_type_name(d->type), (long long)d->k);
    return -1;
}

static int group_plan(wgroup *g, const llama_weight *const *src, int n, char *err, size_t err_size) {
    g->n_parts = n;
    int same = 1;
    for (int i = 0; i < n; i++) {
        g->part_rows[i] = src[i]->n_rows;
        same &= src[i]->type == src[0]->type && src[i]->n_cols == src[0]->n_cols;
    }
    g->n_m = same ? 1 : n;
    if (same) return weight_plan(&g->m[0], src, n, err, err_size);
    for (int i = 0; i < n; i++)
        if (weight_plan(&g->m[i], &src[i], 1, err, err_size)) return -1;
    return 0;
}

/* Where part i of a group's output lives in buf (sized for n_batch tokens) and its token stride. */
static void group_view(const wgroup *g, float *buf, int32_t n_batch, int part, float **p, int64_t *stride) {
    int64_t off = 0;
    for (int j = 0; j < part; j++) off += g->n_m == 1 ? g->part_rows[j] : (int64_t)n_batch * g->part_rows[j];
    *p = buf + off;
    *stride = g->n_m == 1 ? g->m[0].rows : g->part_rows[part];
}

static size_t weight_dev_bytes(const dweight *d) {
    return d->plain ? dweight_raw(d) : matvec_repacked_bytes(d->type, d->rows, d->k);
}

/* Every device weight in upload order. */
static int all_weights(forward_cuda *f, dweight **out) {
    int k = 0;
    out[k++] = &f->output;
    for (int32_t l = 0; l < f->m->hp.n_layer; l++) {
        dlayer *L = &f->layers[l];
        for (int i = 0; i < L->qkv.n_m; i++) out[k++] = &L->qkv.m[i];
        out[k++] = &L->wo;
        for (int i = 0; i < L->gu.n_m; i++) out[k++] = &L->gu.m[i];
        out[k++] = &L->down;
    }
    return k;
}

static void layout_weights(forward_cuda *f, arena *a, dweight **ws, int n_w) {
    const llama_model *m = f->m;
    const llama_hparams *hp = &m->hp;
    f->tok_embd = take(a, raw_bytes(&m->tok_embd));
    f->output_norm = take(a, (size_t)hp->n_embd * sizeof(float));
    for (int32_t l = 0; l < hp->n_layer; l++) {
        f->layers[l].attn_norm = take(a, (size_t)hp->n_embd * sizeof(float));
        f->layers[l].ffn_norm = take(a, (size_t)hp->n_embd * sizeof(float));
    }
    for (int i = 0; i < n_w; i++) ws[i]->w = take(a, weight_dev_bytes(ws[i]));
}

static void layout_kv(forward_cuda *f, arena *a) {
    size_t n = (size_t)f->m->hp.n_layer * (size_t)f->n_cells * (size_t)f->kv_dim;
    f->kv_k = take(a, n * sizeof(uint16_t));
    f->kv_v = take(a, n * sizeof(uint16_t));
}

static void layout_scratch(forward_cuda *f, arena *a) {
    const llama_hparams *hp = &f->m->hp;
    size_t B = (size_t)f->n_batch, E = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
    size_t nq = (size_t)hp->n_head * (size_t)hp->head_dim, nkv = (size_t)f->kv_dim;
    f->x = take(a, B * E * sizeof(float));
    f->xn = take(a, B * E * sizeof(float));
    f->qkv = take(a, B * (nq + 2 * nkv) * sizeof(float));
    f->q = take(a, B * nq * sizeof(float));
    f->att = take(a, B * nq * sizeof(float));
    f->gu = take(a, B * 2 * F * sizeof(float));
    f->ff = take(a, B * F * sizeof(float));
    size_t widest = E > F ? E : F;
    f->xh = take(a, B * (widest > nq ? widest : nq) * sizeof(uint16_t));
    f->logits = take(a, (size_t)OUT_CHUNK * (size_t)hp->n_vocab * sizeof(float));
    f->d_ids = take(a, (size_t)OUT_CHUNK * sizeof(int32_t));
    int at = f->n_batch < ATT_CHUNK ? f->n_batch : ATT_CHUNK;
    f->att_scratch = take(a, paged_attention_scratch_bytes(at, hp->n_head, hp->head_dim, f->n_split));
    f->d_meta = take(a, (5 * B + (size_t)f->max_seqs * (size_t)f->max_pages) * sizeof(int32_t));
}

/* --- weight upload: readers fill pinned slots from the mapped file, the main thread copies ------ */

typedef struct {
    const uint8_t *src;
    size_t bytes;
    uint8_t *dst;
    const dweight *repack;  /* set on a weight's last chunk when it must be repacked from tmp */
} up_chunk;

typedef struct {
    up_chunk *c;
    int n;
    int dev;
    uint8_t *tmp;             /* a weight to repack, in GGUF layout */
    uint8_t *slot[STAGE_SLOTS];
    cudaEvent_t ev[STAGE_SLOTS];
    int filled[STAGE_SLOTS];  /* chunk index last filled in the slot */
    int issued[STAGE_SLOTS];  /* chunk index last copied out of the slot */
    int next;                 /* next chunk a reader takes */
    int stop;
    char err[256];            /* a reader's failure */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} uploader;

static void *reader_main(void *arg) {
    uploader *u = arg;
    if (cudaSetDevice(u->dev) != cudaSuccess) {
        pthread_mutex_lock(&u->mu);
        snprintf(u->err, sizeof u->err, "reader thread: cudaSetDevice(%d) failed", u->dev);
        u->stop = 1;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&u->mu);
        int j = u->next++, s = j % STAGE_SLOTS;
        while (!u->stop && j < u->n && u->issued[s] < j - STAGE_SLOTS) pthread_cond_wait(&u->cv, &u->mu);
        int stop = u->stop || j >= u->n;
        pthread_mutex_unlock(&u->mu);
        if (stop) return NULL;
        /* The slot's previous copy was issued; wait until the device has read it. */
        if (j >= STAGE_SLOTS && cudaEventSynchronize(u->ev[s]) != cudaSuccess) {
            pthread_mutex_lock(&u->mu);
            snprintf(u->err, sizeof u->err, "reader thread: cudaEventSynchronize failed on device %d", u->dev);
            u->stop = 1;
            pthread_cond_broadcast(&u->cv);
            pthread_mutex_unlock(&u->mu);
            return NULL;
        }
        memcpy(u->slot[s], u->c[j].src, u->c[j].bytes);
        pthread_mutex_lock(&u->mu);
        u->filled[s] = j;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
    }
}

/* The main thread's side: copies chunks in order as they are filled, repacks finished weights. */
static int upload_issue(forward_cuda *f, uploader *u, engine_progress_fn progress, void *pctx, uint64_t total,
                        char *err, size_t err_size) {
    uint64_t done = 0, reported = 0;
    for (int j = 0; j < u->n; j++) {
        int s = j % STAGE_SLOTS;
        pthread_mutex_lock(&u->mu);
        while (!u->stop && u->filled[s] != j) pthread_cond_wait(&u->cv, &u->mu);
        int stop = u->stop;
        pthread_mutex_unlock(&u->mu);
        if (stop) {
            snprintf(err, err_size, "%s", u->err);
            return -1;
        }
        const up_chunk *c = &u->c[j];
        DEV_TRY(cudaMemcpyAsync(c->dst, u->slot[s], c->bytes, cudaMemcpyHostToDevice, f->st));
        DEV_TRY(cudaEventRecord(u->ev[s], f->st));
        if (c->repack) {
            const dweight *d = c->repack;
            DEV_TRY(matvec_repack(d->w, u->tmp, d->type, d->rows, d->k, f->st));
        }
        pthread_mutex_lock(&u->mu);
        u->issued[s] = j;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
        done += c->bytes;
        if (progress && done - reported >= total / 50) {
            progress(pctx, done, total);
            reported = done;
        }
    }
    DEV_TRY(cudaStreamSynchronize(f->st));
    if (progress) progress(pctx, total, total);
    return 0;
}

/* Appends the chunks of one weight: straight to its place, or through tmp for a repack. */
static void add_chunks(up_chunk *c, int *n, const uint8_t *src, size_t bytes, uint8_t *dst, const dweight *repack) {
    for (size_t o = 0; o < bytes; o += STAGE_BYTES) {
        size_t b = bytes - o < STAGE_BYTES ? bytes - o : STAGE_BYTES;
        c[(*n)++] = (up_chunk){src + o, b, dst + o, o + b == bytes ? repack : NULL};
    }
}

static int upload_weights(forward_cuda *f, uint8_t *tmp, dweight **ws, int n_w, engine_progress_fn progress,
                          void *pctx, char *err, size_t err_size) {
    const llama_model *m = f->m;
    size_t n_chunks = raw_bytes(&m->tok_embd) / STAGE_BYTES + 1;
    uint64_t total = raw_bytes(&m->tok_embd);
    for (int i = 0; i < n_w; i++)
        for (int p = 0; p < ws[i]->n_src; p++) {
            n_chunks += raw_bytes(ws[i]->src[p]) / STAGE_BYTES + 1;
            total += raw_bytes(ws[i]->src[p]);
        }
    uploader u = {.dev = f->dev, .tmp = tmp};
    u.c = malloc(n_chunks * sizeof *u.c);
    if (!u.c) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    add_chunks(u.c, &u.n, m->tok_embd.data, raw_bytes(&m->tok_embd), f->tok_embd, NULL);
    for (int i = 0; i < n_w; i++) {
        const dweight *d = ws[i];
        /* Stacked matrices land one after the other. A repacked weight goes through tmp; its
         * repack and the next weight's copy into tmp are ordered on the one stream. */
        size_t off = 0;
        for (int p = 0; p < d->n_src; p++) {
            const llama_weight *w = d->src[p];
            const dweight *last = !d->plain && p == d->n_src - 1 ? d : NULL;
            add_chunks(u.c, &u.n, w->data, raw_bytes(w), (d->plain ? (uint8_t *)d->w : tmp) + off, last);
            off += raw_bytes(w);
        }
    }
    pthread_mutex_init(&u.mu, NULL);
    pthread_cond_init(&u.cv, NULL);
    for (int s = 0; s < STAGE_SLOTS; s++) {
        u.filled[s] = -1;
        u.issued[s] = s - STAGE_SLOTS;
    }
    int rc = -1, n_slots = 0, n_ev = 0, n_th = 0;
    pthread_t th[N_READERS];
    for (; n_slots < STAGE_SLOTS; n_slots++)
        if (cudaHostAlloc((void **)&u.slot[n_slots], STAGE_BYTES, cudaHostAllocDefault) != cudaSuccess) {
            snprintf(err, err_size, "device %d: cudaHostAlloc of %d MiB staging failed", f->dev, STAGE_BYTES >> 20);
            goto done;
        }
    for (; n_ev < STAGE_SLOTS; n_ev++)
        if (cudaEventCreateWithFlags(&u.ev[n_ev], cudaEventDisableTiming) != cudaSuccess) {
            snprintf(err, err_size, "device %d: cudaEventCreate failed", f->dev);
            goto done;
        }
    for (; n_th < N_READERS; n_th++)
        if (pthread_create(&th[n_th], NULL, reader_main, &u)) break;
    if (n_th == 0) {
        snprintf(err, err_size, "cannot start a reader thread");
        goto done;
    }
    rc = upload_issue(f, &u, total > (1ull << 30) ? progress : NULL, pctx, total, err, err_size);
done:
    pthread_mutex_lock(&u.mu);
    u.stop = 1;
    pthread_cond_broadcast(&u.cv);
    pthread_mutex_unlock(&u.mu);
    for (int t = 0; t < n_th; t++) pthread_join(th[t], NULL);
    if (rc) cudaStreamSynchronize(f->st);  /* no copy may still read a slot about to be freed */
    for (int s = 0; s < n_ev; s++) cudaEventDestroy(u.ev[s]);
    for (int s = 0; s < n_slots; s++) cudaFreeHost(u.slot[s]);
    pthread_cond_destroy(&u.cv);
    pthread_mutex_destroy(&u.mu);
    free(u.c);
    return rc;
}

/* --- forward pass -------------------------------------------------------------------------------- */

/* y[n][rows] = W . x[n][k]: more tokens than a matvec takes go through the tensor-core GEMM
 * (x rounded to f16) where it handles the weight type, else through matvecs of up to
 * MATVEC_MAX_N tokens. */
static int mm(forward_cuda *f, const dweight *w, const float *x, float *y, int n, char *err, size_t err_size) {
    if (n > MATVEC_MAX_N && !w->plain && gemm_supported(w->type)) {
        DEV_TRY(paged_to_f16(f->xh, x, (int64_t)n * w->k, f->st));
        DEV_TRY(gemm_f16(y, w->w, w->type, f->xh, w->rows, w->k, n, f->st));
        return 0;
    }
    for (int c = 0; c < n; c += MATVEC_MAX_N) {
        int nc = n - c < MATVEC_MAX_N ? n - c : MATVEC_MAX_N;
        const float *xc = x + (int64_t)c * w->k;
        float *yc = y + (int64_t)c * w->rows;
        if (w->plain) DEV_TRY(paged_matvec_plain(yc, w->w, w->type, xc, w->rows, w->k, nc, f->st));
        else DEV_TRY(matvec_f32(yc, w->w, w->type, xc, w->rows, w->k, nc, f->st));
    }
    return 0;
}

static int group_mm(forward_cuda *f, const wgroup *g, const float *x, float *buf, int n, char *err,
                    size_t err_size) {
    for (int i = 0; i < g->n_m; i++) {
        float *y;
        int64_t stride;
        group_view(g, buf, f->n_batch, i, &y, &stride);
        if (mm(f, &g->m[i], x, y, n, err, err_size)) return -1;
    }
    return 0;
}

/* Embedding and every layer for the n tokens whose metadata is in d_meta; x ends as the
 * residual stream after the last layer. Per layer: QKV matvec, RoPE + K/V store, attention,
 * output matvec, add + norm, gate/up matvec, SwiGLU, down matvec, add + the next layer's norm. */
static int run_layers(forward_cuda *f, int n, char *err, size_t err_size) {
    const llama_model *m = f->m;
    const llama_hparams *hp = &m->hp;
    const int32_t *d_tok = f->d_meta, *d_pos = d_tok + n, *d_seq = d_pos + n, *d_cell = d_seq + n;
    const int32_t *d_pages = d_cell + 2 * n;
    int E = hp->n_embd, F = hp->n_ff, hd = hp->head_dim, nq = hp->n_head * hd;
    float scale = 1.0f / sqrtf((float)hd);
    DEV_TRY(embed(f->x, f->tok_embd, m->tok_embd.type, d_tok, n, m->tok_embd.n_rows, E, f->st));
    DEV_TRY(rmsnorm(f->xn, f->x, f->layers[0].attn_norm, n, E, hp->rms_eps, f->st));
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const dlayer *L = &f->layers[l];
        size_t kv_off = (size_t)l * (size_t)f->n_cells * (size_t)f->kv_dim;
        float *pq, *pk, *pv, *pg, *pu;
        int64_t sq, sk, sv, sg, su;
        if (group_mm(f, &L->qkv, f->xn, f->qkv, n, err, err_size)) return -1;
        group_view(&L->qkv, f->qkv, f->n_batch, 0, &pq, &sq);
        group_view(&L->qkv, f->qkv, f->n_batch, 1, &pk, &sk);
        group_view(&L->qkv, f->qkv, f->n_batch, 2, &pv, &sv);
        DEV_TRY(paged_rope_store(f->q, f->kv_k + kv_off, f->kv_v + kv_off, pq, sq, pk, sk, pv, sv, d_pos, d_cell, n,
                                 hp->n_head, hp->n_head_kv, hd, hp->n_rot, hp->rope_base, f->st));
        if (f->pf_pos0 >= 0) {
            DEV_TRY(paged_attention_prefill(f->att, f->q, f->kv_k + kv_off, f->kv_v + kv_off, d_pages, f->pf_pos0, n,
                                            hp->n_head, hp->n_head_kv, hd, scale, f->st));
        } else {
            for (int t0 = 0; t0 < n; t0 += ATT_CHUNK) {
                int nt = n - t0 < ATT_CHUNK ? n - t0 : ATT_CHUNK;
                DEV_TRY(paged_attention(f->att + (size_t)t0 * nq, f->q + (size_t)t0 * nq, f->kv_k + kv_off,
                                        f->kv_v + kv_off, d_pos + t0, d_seq + t0, d_pages, f->max_pages,
                                        f->att_scratch, nt, hp->n_head, hp->n_head_kv, hd, f->n_split, scale, f->st));
            }
        }
        if (mm(f, &L->wo, f->att, f->xn, n, err, err_size)) return -1;
        DEV_TRY(paged_add_rmsnorm(f->x, f->xn, f->xn, L->ffn_norm, n, E, hp->rms_eps, f->st));
        if (group_mm(f, &L->gu, f->xn, f->gu, n, err, err_size)) return -1;
        group_view(&L->gu, f->gu, f->n_batch, 0, &pg, &sg);
        group_view(&L->gu, f->gu, f->n_batch, 1, &pu, &su);
        DEV_TRY(paged_swiglu(f->ff, pg, sg, pu, su, n, F, f->st));
        if (mm(f, &L->down, f->ff, f->xn, n, err, err_size)) return -1;
        if (l + 1 < hp->n_layer)
            DEV_TRY(paged_add_rmsnorm(f->x, f->xn, f->xn, f->layers[l + 1].attn_norm, n, E, hp->rms_eps, f->st));
        else
            DEV_TRY(add(f->x, f->x, f->xn, (int64_t)n * E, f->st));
    }
    return 0;
}

/* Logits rows r0..r0+nr of the pass (tokens listed at d_meta's out section) into h_logits, or
 * when greedy only each row's argmax into h_ids. */
static int run_head(forward_cuda *f, int n, int r0, int nr, int greedy, char *err, size_t err_size) {
    const llama_hparams *hp = &f->m->hp;
    const int32_t *d_out = f->d_meta + 4 * n;
    DEV_TRY(paged_gather_rows(f->xn, f->x, d_out + r0, nr, hp->n_embd, f->st));
    DEV_TRY(rmsnorm(f->xn, f->xn, f->output_norm, nr, hp->n_embd, hp->rms_eps, f->st));
    if (mm(f, &f->output, f->xn, f->logits, nr, err, err_size)) return -1;
    if (greedy) {
        DEV_TRY(argmax(f->d_ids, f->logits, nr, hp->n_vocab, f->st));
        DEV_TRY(cudaMemcpyAsync(f->h_ids, f->d_ids, (size_t)nr * sizeof(int32_t), cudaMemcpyDeviceToHost, f->st));
        return 0;
    }
    DEV_TRY(cudaMemcpyAsync(f->h_logits, f->logits, (size_t)nr * (size_t)hp->n_vocab * sizeof(float),
                            cudaMemcpyDeviceToHost, f->st));
    return 0;
}

/* The decode step of n sequences as a graph: captured on its second use (the first runs eagerly,
 * so lazy kernel setup happens outside capture). */
static int decode_graph(forward_cuda *f, int n, int greedy, int *ran, char *err, size_t err_size) {
    *ran = 0;
    cudaGraphExec_t *ge = &f->graphs[greedy][n];
    if (!*ge) {
        if (!f->graph_seen[greedy][n]++) return 0;
        cudaGraph_t g = NULL;
        DEV_TRY(cudaStreamBeginCapture(f->st, cudaStreamCaptureModeThreadLocal));
        int bad = run_layers(f, n, err, err_size) || run_head(f, n, 0, n, greedy, err, err_size);
        cudaError_t ec = cudaStreamEndCapture(f->st, &g);
        if (bad) {
            if (g) cudaGraphDestroy(g);
            return -1;
        }
        DEV_TRY(ec);
        cudaError_t ei = cudaGraphInstantiate(ge, g, 0);
        cudaGraphDestroy(g);
        DEV_TRY(ei);
    }
    DEV_TRY(cudaGraphLaunch(*ge, f->st));
    *ran = 1;
    return 0;
}

/* forward (logits) or forward_greedy (ids set): the pass, then the output rows in chunks. */
static int fwd_out(void *self, const engine_fwd_batch *b, float *logits, int32_t *ids, char *err,
                   size_t err_size) {
    forward_cuda *f = self;
    const llama_hparams *hp = &f->m->hp;
    int n = b->n_tokens, n_vocab = hp->n_vocab;
    if (n < 1 || n > f->n_batch || b->max_pos > f->max_pos || b->n_seqs < 1 || b->n_seqs > n ||
        b->n_seqs > f->max_seqs || b->n_out > n) {
        snprintf(err, err_size, "CUDA forward: %d tokens (at most %d) of %d sequences (at most %d) reaching "
                 "position %d (at most %d)", n, f->n_batch, b->n_seqs, f->max_seqs, b->max_pos, f->max_pos);
        return -1;
    }
    DEV_TRY(cudaSetDevice(f->dev));
    int32_t *h = f->h_meta;
    int n_out = 0, identity = b->n_out == n && b->n_seqs == n;
    /* One sequence's run of positions (a prompt pass): the tensor-core attention; never in a
     * graph (identity passes have one token per sequence, below PREFILL_MIN). */
    f->pf_pos0 = b->n_seqs == 1 && n >= PREFILL_MIN &&
                 paged_attention_prefill_supported(hp->n_head, hp->n_head_kv, hp->head_dim) ? b->pos[0] : -1;
    for (int i = 0; i < n; i++) {
        h[i] = b->token[i];
        h[n + i] = b->pos[i];
        if (b->pos[i] != b->pos[0] + i) f->pf_pos0 = -1;
        h[2 * n + i] = b->seq[i];
        h[3 * n + i] = b->cell[i];
        if (b->cell[i] < 0 || b->cell[i] >= f->n_cells || b->seq[i] < 0 || b->seq[i] >= b->n_seqs ||
            b->pos[i] < 0 || b->pos[i] >= b->seqs[b->seq[i]].n_pos) {
            snprintf(err, err_size, "CUDA forward: token %d: cell %d, sequence %d, position %d out of range", i,
                     b->cell[i], b->seq[i], b->pos[i]);
            return -1;
        }
        if (b->out_row[i] >= 0) {
            if (b->out_row[i] != n_out) identity = 0;
            h[4 * n + n_out++] = i;
        }
    }
    if (n_out != b->n_out) {
        snprintf(err, err_size, "CUDA forward: %d tokens want logits but n_out is %d", n_out, b->n_out);
        return -1;
    }
    int32_t *hp_pages = h + 5 * n;
    for (int s = 0; s < b->n_seqs; s++) {
        int32_t need = (b->seqs[s].n_pos + ENGINE_KV_PAGE - 1) / ENGINE_KV_PAGE;
        if (need > f->max_pages || need > b->seqs[s].n_pages) {
            snprintf(err, err_size, "CUDA forward: sequence %d needs %d pages (table %d, at most %d)", s, need,
                     b->seqs[s].n_pages, f->max_pages);
            return -1;
        }
        for (int32_t p = 0; p < need; p++) {
            int32_t pg = b->seqs[s].pages[p];
            if (pg < 0 || pg >= f->n_cells / ENGINE_KV_PAGE) {
                snprintf(err, err_size, "CUDA forward: sequence %d: page %d out of range", s, pg);
                return -1;
            }
            hp_pages[(size_t)s * f->max_pages + p] = pg;
        }
    }
    size_t words = 5 * (size_t)n + (size_t)b->n_seqs * (size_t)f->max_pages;
    DEV_TRY(cudaMemcpyAsync(f->d_meta, h, words * sizeof(int32_t), cudaMemcpyHostToDevice, f->st));

    int ran = 0;
    int greedy = ids != NULL;
    if (identity && n <= GRAPH_MAX_TOK && decode_graph(f, n, greedy, &ran, err, err_size)) return -1;
    if (ran) {
        DEV_TRY(cudaStreamSynchronize(f->st));
        if (greedy) memcpy(ids, f->h_ids, (size_t)n * sizeof(int32_t));
        else memcpy(logits, f->h_logits, (size_t)n * (size_t)n_vocab * sizeof(float));
        return 0;
    }
    if (run_layers(f, n, err, err_size)) return -1;
    for (int r0 = 0; r0 < n_out; r0 += OUT_CHUNK) {
        int nr = n_out - r0 < OUT_CHUNK ? n_out - r0 : OUT_CHUNK;
        if (run_head(f, n, r0, nr, greedy, err, err_size)) return -1;
        DEV_TRY(cudaStreamSynchronize(f->st));
        if (greedy) memcpy(ids + r0, f->h_ids, (size_t)nr * sizeof(int32_t));
        else memcpy(logits + (size_t)r0 * n_vocab, f->h_logits, (size_t)nr * (size_t)n_vocab * sizeof(float));
    }
    if (!n_out) DEV_TRY(cudaStreamSynchronize(f->st));
    return 0;
}

static int fwd(void *self, const engine_fwd_batch *b, float *logits, char *err, size_t err_size) {
    return fwd_out(self, b, logits, NULL, err, err_size);
}

static int fwd_greedy(void *self, const engine_fwd_batch *b, int32_t *ids, char *err, size_t err_size) {
    return fwd_out(self, b, NULL, ids, err, err_size);
}

/* --- KV cells --------------------------------------------------------------------------------- */

static int kv_bad(const forward_cuda *f, int32_t layer, int32_t cell, int32_t n, char *err, size_t err_size) {
    if (layer < 0 || layer >= f->m->hp.n_layer || cell < 0 || n < 0 || cell > f->n_cells - n) {
        snprintf(err, err_size, "CUDA KV: layer %d, cells %d..+%d outside %d layers x %d cells", layer, cell, n,
                 f->m->hp.n_layer, f->n_cells);
        return 1;
    }
    return 0;
}

static int kv_copy(void *self, int32_t dst, int32_t src, int32_t n, char *err, size_t err_size) {
    forward_cuda *f = self;
    if (kv_bad(f, 0, dst, n, err, err_size) || kv_bad(f, 0, src, n, err, err_size)) return -1;
    if (n == 0) return 0;
    DEV_TRY(cudaSetDevice(f->dev));
    size_t row = (size_t)f->kv_dim * sizeof(uint16_t), pitch = (size_t)f->n_cells * row;
    DEV_TRY(cudaMemcpy2DAsync(f->kv_k + (size_t)dst * f->kv_dim, pitch, f->kv_k + (size_t)src * f->kv_dim, pitch,
                              (size_t)n * row, (size_t)f->m->hp.n_layer, cudaMemcpyDeviceToDevice, f->st));
    DEV_TRY(cudaMemcpy2DAsync(f->kv_v + (size_t)dst * f->kv_dim, pitch, f->kv_v + (size_t)src * f->kv_dim, pitch,
                              (size_t)n * row, (size_t)f->m->hp.n_layer, cudaMemcpyDeviceToDevice, f->st));
    return 0;
}

/* Moves rows of the listed cells between layer `layer` of the cache and h_kv ([2][c][kv_dim]: K
 * then V), a block of up to ATT_CHUNK cells, one copy per run of consecutive cells. */
static int kv_move(forward_cuda *f, int32_t layer, const int32_t *cells, int32_t c, int to_host, char *err,
                   size_t err_size) {
    size_t row = (size_t)f->kv_dim, base = (size_t)layer * (size_t)f->n_cells * row;
    enum cudaMemcpyKind kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    for (int32_t i = 0; i < c;) {
        int32_t j = i + 1;
        while (j < c && cells[j] == cells[j - 1] + 1) j++;
        size_t bytes = (size_t)(j - i) * row * sizeof(uint16_t);
        uint16_t *hk = f->h_kv + (size_t)i * row, *hv = f->h_kv + ((size_t)ATT_CHUNK + i) * row;
        uint16_t *dk = f->kv_k + base + (size_t)cells[i] * row, *dv = f->kv_v + base + (size_t)cells[i] * row;
        DEV_TRY(cudaMemcpyAsync(to_host ? (void *)hk : dk, to_host ? (void *)dk : hk, bytes, kind, f->st));
        DEV_TRY(cudaMemcpyAsync(to_host ? (void *)hv : dv, to_host ? (void *)dv : hv, bytes, kind, f->st));
        i = j;
    }
    DEV_TRY(cudaStreamSynchronize(f->st));
    return 0;
}

static int kv_io(forward_cuda *f, int32_t layer, const int32_t *cells, int32_t n, float *k, float *v,
                 const float *ck, const float *cv, char *err, size_t err_size) {
    for (int32_t i = 0; i < n; i++)
        if (kv_bad(f, layer, cells[i], 1, err, err_size)) return -1;
    DEV_TRY(cudaSetDevice(f->dev));
    size_t row = (size_t)f->kv_dim;
    for (int32_t i0 = 0; i0 < n; i0 += ATT_CHUNK) {
        int32_t c = n - i0 < ATT_CHUNK ? n - i0 : ATT_CHUNK;
        uint16_t *hk = f->h_kv, *hv = f->h_kv + (size_t)ATT_CHUNK * row;
        if (ck) {
            for (size_t e = 0; e < (size_t)c * row; e++) {
                hk[e] = quant_f32_to_f16(ck[i0 * row + e]);
                hv[e] = quant_f32_to_f16(cv[i0 * row + e]);
            }
            if (kv_move(f, layer, cells + i0, c, 0, err, err_size)) return -1;
        } else {
            if (kv_move(f, layer, cells + i0, c, 1, err, err_size)) return -1;
            for (size_t e = 0; e < (size_t)c * row; e++) {
                k[i0 * row + e] = quant_f16_to_f32(hk[e]);
                v[i0 * row + e] = quant_f16_to_f32(hv[e]);
            }
        }
    }
    return 0;
}

static int kv_get(void *self, int32_t layer, const int32_t *cells, int32_t n, float *k, float *v, char *err,
                  size_t err_size) {
    return kv_io(self, layer, cells, n, k, v, NULL, NULL, err, err_size);
}

static int kv_set(void *self, int32_t layer, const int32_t *cells, int32_t n, const float *k, const float *v,
                  char *err, size_t err_size) {
    return kv_io(self, layer, cells, n, NULL, NULL, k, v, err, err_size);
}

/* --- creation ------------------------------------------------------------------------------------ */

static void cuda_free(void *self) {
    forward_cuda *f = self;
    if (!f) return;
    cudaSetDevice(f->dev);
    if (f->st) cudaStreamSynchronize(f->st);
    for (int g = 0; g < 2; g++)
        for (int i = 0; i <= GRAPH_MAX_TOK; i++)
            if (f->graphs[g][i]) cudaGraphExecDestroy(f->graphs[g][i]);
    cudaFree(f->block);
    cudaFreeHost(f->h_meta);
    cudaFreeHost(f->h_logits);
    cudaFreeHost(f->h_ids);
    cudaFreeHost(f->h_kv);
    if (f->st) cudaStreamDestroy(f->st);
    free(f->layers);
    free(f->ws);
    free(f);
}

static double gib(size_t b) { return (double)b / (double)(1ull << 30); }

static int setup(forward_cuda *f, engine_progress_fn progress, void *pctx, char *err, size_t err_size) {
    const llama_model *m = f->m;
    const llama_hparams *hp = &m->hp;
    DEV_TRY(cudaSetDevice(f->dev));
    struct cudaDeviceProp prop;
    DEV_TRY(cudaGetDeviceProperties(&prop, f->dev));
    snprintf(f->dev_name, sizeof f->dev_name, "%s", prop.name);
    DEV_TRY(cudaStreamCreateWithFlags(&f->st, cudaStreamNonBlocking));

    if (!matvec_supported(m->tok_embd.type) || m->tok_embd.n_cols % 32 ||
        ((m->tok_embd.type == QUANT_Q4_K || m->tok_embd.type == QUANT_Q6_K) && m->tok_embd.n_cols % 256)) {
        snprintf(err, err_size, "%s: type %s is not supported by the CUDA embedding kernel; use -ngl 0",
                 m->tok_embd.name, quant_type_name(m->tok_embd.type));
        return -1;
    }
    const llama_weight *out_w = &m->output;
    if (weight_plan(&f->output, &out_w, 1, err, err_size)) return -1;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const llama_layer *S = &m->layers[l];
        dlayer *L = &f->layers[l];
        const llama_weight *qkv[] = {&S->wq, &S->wk, &S->wv}, *gu[] = {&S->w_gate, &S->w_up};
        const llama_weight *wo = &S->wo, *down = &S->w_down;
        if (group_plan(&L->qkv, qkv, 3, err, err_size) || weight_plan(&L->wo, &wo, 1, err, err_size) ||
            group_plan(&L->gu, gu, 2, err, err_size) || weight_plan(&L->down, &down, 1, err, err_size))
            return -1;
    }
    f->n_w = all_weights(f, f->ws);
    size_t tmp_bytes = 0;
    for (int i = 0; i < f->n_w; i++)
        if (dweight_raw(f->ws[i]) > tmp_bytes) tmp_bytes = dweight_raw(f->ws[i]);
    /* Sizes first, then one check against free memory with a message that says what to change. */
    arena a = {0};
    layout_weights(f, &a, f->ws, f->n_w);
    size_t w_bytes = a.off;
    layout_kv(f, &a);
    size_t kv_bytes = a.off - w_bytes;
    layout_scratch(f, &a);
    size_t total = a.off, scratch = total - w_bytes - kv_bytes;
    size_t free_b = 0, total_b = 0;
    DEV_TRY(cudaMemGetInfo(&free_b, &total_b));
    if (total + tmp_bytes + (64u << 20) > free_b) {
        snprintf(err, err_size, "device %d (%s): out of memory loading the model: need %.1f GiB (weights %.1f, "
                 "KV cache %.1f, scratch %.1f), %.1f GiB free; try a smaller -c or -b, or -ngl 0 to run on the CPU",
                 f->dev, f->dev_name, gib(total + tmp_bytes), gib(w_bytes), gib(kv_bytes), gib(scratch + tmp_bytes),
                 gib(free_b));
        return -1;
    }
    uint8_t *tmp = NULL;
    cudaError_t e1 = cudaMalloc((void **)&f->block, total), e2 = cudaMalloc((void **)&tmp, tmp_bytes);
    if (e1 != cudaSuccess || e2 != cudaSuccess) {
        cudaFree(tmp);
        snprintf(err, err_size, "device %d (%s): cudaMalloc of %.1f GiB failed (%s); try a smaller -c or -b, or "
                 "-ngl 0", f->dev, f->dev_name, gib(total + tmp_bytes),
                 cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
        return -1;
    }
    a = (arena){.base = f->block};
    layout_weights(f, &a, f->ws, f->n_w);
    layout_kv(f, &a);
    layout_scratch(f, &a);
    size_t meta_words = 5 * (size_t)f->n_batch + (size_t)f->max_seqs * (size_t)f->max_pages;
    DEV_TRY(cudaHostAlloc((void **)&f->h_meta, meta_words * sizeof(int32_t), cudaHostAllocDefault));
    DEV_TRY(cudaHostAlloc((void **)&f->h_logits, (size_t)OUT_CHUNK * (size_t)hp->n_vocab * sizeof(float),
                          cudaHostAllocDefault));
    DEV_TRY(cudaHostAlloc((void **)&f->h_ids, (size_t)OUT_CHUNK * sizeof(int32_t), cudaHostAllocDefault));
    DEV_TRY(cudaHostAlloc((void **)&f->h_kv, 2 * (size_t)ATT_CHUNK * (size_t)f->kv_dim * sizeof(uint16_t),
                          cudaHostAllocDefault));

    size_t nb = (size_t)hp->n_embd * sizeof(float);
    DEV_TRY(cudaMemcpy(f->output_norm, m->output_norm, nb, cudaMemcpyHostToDevice));
    for (int32_t l = 0; l < hp->n_layer; l++) {
        DEV_TRY(cudaMemcpy(f->layers[l].attn_norm, m->layers[l].attn_norm, nb, cudaMemcpyHostToDevice));
        DEV_TRY(cudaMemcpy(f->layers[l].ffn_norm, m->layers[l].ffn_norm, nb, cudaMemcpyHostToDevice));
    }
    int rc = upload_weights(f, tmp, f->ws, f->n_w, progress, pctx, err, err_size);
    cudaFree(tmp);
    if (rc) return -1;
    /* Cells never written read as zeros, not NaN, should a caller look at them. */
    size_t kv_each = (size_t)hp->n_layer * (size_t)f->n_cells * (size_t)f->kv_dim * sizeof(uint16_t);
    DEV_TRY(cudaMemsetAsync(f->kv_k, 0, kv_each, f->st));
    DEV_TRY(cudaMemsetAsync(f->kv_v, 0, kv_each, f->st));
    DEV_TRY(cudaStreamSynchronize(f->st));
    return 0;
}

static void *cuda_create(const llama_model *m, int device, int32_t n_cells, int32_t n_batch, int32_t max_pos,
                         engine_progress_fn progress, void *pctx, char *err, size_t err_size) {
    const llama_hparams *hp = &m->hp;
    if (n_cells < ENGINE_KV_PAGE || n_cells % ENGINE_KV_PAGE || n_batch < 1 || max_pos < 1) {
        snprintf(err, err_size, "CUDA backend: bad sizes: %d KV cells, batch %d, %d positions", n_cells, n_batch,
                 max_pos);
        return NULL;
    }
    if (n_batch > 65535) {
        snprintf(err, err_size, "batch of %d tokens: the CUDA backend takes at most 65535 per pass; use a smaller "
                 "-b / -ub", n_batch);
        return NULL;
    }
    if (hp->n_head % hp->n_head_kv || hp->n_head / hp->n_head_kv > 8 || hp->head_dim > 256) {
        snprintf(err, err_size, "CUDA backend: %d heads over %d KV heads of %d values is not supported (at most "
                 "8 heads per KV head, head_dim <= 256); use -ngl 0", hp->n_head, hp->n_head_kv, hp->head_dim);
        return NULL;
    }
    forward_cuda *f = calloc(1, sizeof *f);
    if (f) {
        f->layers = calloc((size_t)hp->n_layer, sizeof *f->layers);
        f->ws = calloc(1 + 7 * (size_t)hp->n_layer, sizeof *f->ws);
    }
    if (!f || !f->layers || !f->ws) {
        if (f) {
            free(f->layers);
            free(f->ws);
        }
        free(f);
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    f->m = m;
    f->dev = device;
    f->n_cells = n_cells;
    f->n_batch = n_batch < n_cells ? n_batch : n_cells;
    f->max_pos = max_pos;
    f->max_pages = (max_pos + ENGINE_KV_PAGE - 1) / ENGINE_KV_PAGE;
    f->n_split = f->max_pages < N_SPLIT_MAX ? f->max_pages : N_SPLIT_MAX;
    /* The engine's pool holds at least one cell per position of each of its sequences, so no
     * pass has more sequences than n_cells / max_pos (nor more than tokens). */
    f->max_seqs = n_cells / max_pos < f->n_batch ? n_cells / max_pos : f->n_batch;
    if (f->max_seqs < 1) f->max_seqs = 1;
    f->kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    if (setup(f, progress, pctx, err, err_size)) {
        cuda_free(f);
        return NULL;
    }
    return f;
}

static const engine_backend_ops cuda_ops = {
    .name = "CUDA", .kv_elem_bytes = sizeof(uint16_t), .forward = fwd, .forward_greedy = fwd_greedy, .kv_copy = kv_copy, .kv_get = kv_get, .kv_set = kv_set, .free = cuda_free,
};

const engine_gpu_backend forward_cuda_gpu = {.ops = &cuda_ops, .n_devices = engine_device_count, .create = cuda_create};
