/* The CUDA backend's device memory and weights (cuda_internal.h): what each part holds (the weight
 * plan, from the engine_plan's slices), one block per device laid out in two passes (sizes, then
 * pointers), and the upload: reader threads copy the mapped file into pinned staging slots while
 * the part's thread copies filled slots to the device and repacks finished weights. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/cuda_internal.h"
#include "quant/quant.h"

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

static size_t slice_row_bytes(const wslice *s) { return quant_row_bytes(s->w->type, s->c1 - s->c0); }
static size_t slice_bytes(const wslice *s) { return (size_t)(s->r1 - s->r0) * slice_row_bytes(s); }
static wslice whole(const llama_weight *w) { return (wslice){w, 0, w->n_rows, 0, w->n_cols, 0}; }

static size_t dweight_raw(const dweight *d) {
    size_t b = 0;
    for (int i = 0; i < d->n_src; i++) b += slice_bytes(&d->src[i]);
    return b;
}

/* How the slices src[0..n) (same type and row length) are kept on the device as one; 0, or -1
 * when no kernel takes them. */
static int weight_plan(dweight *d, const wslice *src, int n, char *err, size_t err_size) {
    const llama_weight *w0 = src[0].w;
    *d = (dweight){.type = w0->type, .k = src[0].c1 - src[0].c0, .n_src = n};
    const quant_traits *t = quant_traits_of(w0->type);
    for (int i = 0; i < n; i++) {
        d->src[i] = src[i];
        d->rows += src[i].r1 - src[i].r0;
        if (!t || src[i].c0 % t->block_elems || src[i].c1 % t->block_elems) {
            snprintf(err, err_size, "%s: columns %lld..%lld do not fall on %s block bounds; choose another -ts "
                     "or -sm layer", src[i].w->name, (long long)src[i].c0, (long long)src[i].c1,
                     quant_type_name(w0->type));
            return -1;
        }
    }
    if (cu_matvec_repacked_bytes(d->type, d->rows, d->k)) return 0;
    if (d->type == QUANT_F32 || d->type == QUANT_F16) {
        d->plain = 1;
        return 0;
    }
    snprintf(err, err_size, "%s: type %s with rows of %lld is not supported by the CUDA backend; use -ngl 0",
             w0->name, quant_type_name(d->type), (long long)d->k);
    return -1;
}

static int group_plan(wgroup *g, const wslice *src, int n, char *err, size_t err_size) {
    g->n_parts = n;
    g->n_m = 0;
    for (int i = 0; i < n;) {
        int j = i + 1; /* parts i..j-1 stack */
        while (j < n && src[j].w->type == src[i].w->type && src[j].c1 - src[j].c0 == src[i].c1 - src[i].c0) j++;
        int64_t off = 0;
        for (int q = i; q < j; q++) {
            g->part_rows[q] = src[q].r1 - src[q].r0;
            g->part_m[q] = g->n_m;
            g->part_off[q] = off;
            off += g->part_rows[q];
        }
        if (weight_plan(&g->m[g->n_m++], &src[i], j - i, err, err_size)) return -1;
        i = j;
    }
    return 0;
}

static size_t weight_dev_bytes(const dweight *d) {
    return d->plain ? dweight_raw(d) : cu_matvec_repacked_bytes(d->type, d->rows, d->k);
}

/* Every device weight of a part in upload order. */
static int all_weights(part *p, dweight **out) {
    int k = 0;
    if (p->head) out[k++] = &p->output;
    for (int32_t l = 0; l < p->l1 - p->l0; l++) {
        dlayer *L = &p->layers[l];
        for (int i = 0; i < L->qkv.n_m; i++) out[k++] = &L->qkv.m[i];
        out[k++] = &L->wo;
        for (int i = 0; i < L->gu.n_m; i++) out[k++] = &L->gu.m[i];
        out[k++] = &L->down;
    }
    return k;
}

static size_t raw_bytes(const llama_weight *w) { return (size_t)w->n_rows * w->row_bytes; }

static void layout_weights(part *p, arena *a) {
    const llama_model *m = p->f->m;
    const llama_hparams *hp = &m->hp;
    p->tok_embd = p->embeds ? take(a, raw_bytes(&m->tok_embd)) : NULL;
    for (int i = 0; i < p->n_vecs; i++) *p->vecs[i].dev = take(a, p->vecs[i].n * sizeof(float));
    p->rope_angle = p->f->h_angle ? take(a, (size_t)(hp->n_rot / 2) * sizeof(double)) : NULL;
    p->rope_angle_swa = p->f->h_angle_swa ? take(a, (size_t)(hp->n_rot / 2) * sizeof(double)) : NULL;
    for (int i = 0; i < p->n_w; i++) p->ws[i]->w = take(a, weight_dev_bytes(p->ws[i]));
}

/* Each layer's recipe structs (dlayer.rr, .re) over its laid-out vectors and the part's angle
 * table: windowed layers turn by rope_base_swa's where the model has one. */
static void layer_recipes(part *p) {
    const forward_cuda *f = p->f;
    const llama_hparams *hp = &f->m->hp;
    for (int32_t l = p->l0; l < p->l1; l++) {
        dlayer *L = &p->layers[l - p->l0];
        const int swa_rope = llama_layer_is_swa(hp, l) && p->rope_angle_swa;
        L->rr = (cu_qkv_recipe){L->bq, L->bk, L->bv, L->q_norm, L->k_norm, hp->rms_eps,
                                swa_rope ? p->rope_angle_swa : p->rope_angle,
                                swa_rope ? f->rope_mscale_swa : f->rope_mscale, hp->rope_kind == LLAMA_ROPE_NEOX,
                                f->neox_rows};
        L->re = (cu_rope_epi){L->bq, L->bk, L->bv, L->rr.angle, L->rr.mscale, f->neox_rows, NULL};
    }
}

static void layout_kv(part *p, arena *a) {
    size_t n = (size_t)(p->l1 - p->l0) * (size_t)p->f->kv_cells * (size_t)p->kv_dim;
    p->kv_k = take(a, n * sizeof(uint16_t));
    p->kv_v = take(a, n * sizeof(uint16_t));
}

/* Words of a pass's metadata at most: d_meta's and h_meta's size (fwd_pass's layout: token,
 * position, sequence, cell and output row per token, then a page table per sequence). */
size_t fcu_meta_words(const forward_cuda *f) {
    return 5 * (size_t)f->n_batch + (size_t)f->max_seqs * (size_t)f->max_pages;
}

static void layout_scratch(part *p, arena *a) {
    const forward_cuda *f = p->f;
    const llama_hparams *hp = &f->m->hp;
    size_t B = (size_t)f->n_batch, E = (size_t)hp->n_embd, F = (size_t)p->n_ff;
    size_t nq = (size_t)p->nq, nkv = (size_t)p->kv_dim;
    p->x = take(a, B * E * sizeof(float));
    p->xn = take(a, B * E * sizeof(float));
    p->qkv = take(a, B * (nq + 2 * nkv) * sizeof(float));
    p->q = take(a, B * nq * sizeof(float));
    p->att = take(a, B * nq * sizeof(float));
    p->gu = take(a, B * 2 * F * sizeof(float));
    p->ff = take(a, B * F * sizeof(float));
    size_t widest = E > F ? E : F;
    p->xh = take(a, B * (widest > nq ? widest : nq) * sizeof(uint16_t));
    p->logits = p->head ? take(a, (size_t)OUT_CHUNK * (size_t)hp->n_vocab * sizeof(float)) : NULL;
    p->d_ids = p->head ? take(a, (size_t)2 * OUT_CHUNK * sizeof(int32_t)) : NULL;
    int at = f->n_batch < ATT_CHUNK ? f->n_batch : ATT_CHUNK; /* tokens per attention launch */
    p->att_scratch_bytes = paged_attention_scratch_bytes(at, p->n_head, hp->head_dim, f->n_split);
    p->att_scratch = take(a, p->att_scratch_bytes);
    p->post_part = take(a, (size_t)FUSE_MAX_N * E * sizeof(float));
    p->post_count = take(a, sizeof(unsigned));
    p->x2 = take(a, (size_t)FUSE_MAX_N * E * sizeof(float));
    p->pend_part = take(a, (size_t)FUSE_MAX_N * E * sizeof(float));
    /* cu_gemm_f16_split's bound for any shape's split-K planes: SMs x 128 KiB (kernels.h); the f16
     * panels of the prompt GEMM (variant 7's need what 4's do) may need more. */
    p->gemm_scratch_bytes = (size_t)p->n_sm * (128u << 10);
    for (int i = 0; i < p->n_w; i++) {
        const dweight *w = p->ws[i];
        if (w->plain || !cu_gemm_supported(w->type)) continue;
        for (int v = 4; v <= 5; v++) {
            size_t b = cu_gemm_f16_scratch_bytes(w->rows, w->k, f->n_batch);
            if (b > p->gemm_scratch_bytes) p->gemm_scratch_bytes = b;
        }
    }
    p->gemm_scratch = take(a, p->gemm_scratch_bytes);
    p->d_meta = take(a, fcu_meta_words(f) * sizeof(int32_t));
}

/* --- weight upload: readers fill pinned slots from the mapped file, the part's thread copies ---- */

/* Shared progress of the parts' uploads. */
typedef struct {
    pthread_mutex_t mu;
    uint64_t done, total, reported;
    engine_progress_fn fn;
    void *ctx;
} progress_sum;


/* rows x width bytes read at src with a row pitch (a column slice), landing contiguous at dst. */
typedef struct {
    const uint8_t *src;
    size_t pitch, width;
    int64_t rows;
    uint8_t *dst;
    const dweight *repack;  /* set on a weight's last chunk: weight_landed (interleave, repack) */
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

static void reader_fail(uploader *u, const char *what) {
    pthread_mutex_lock(&u->mu);
    snprintf(u->err, sizeof u->err, "reader thread: %s on device %d", what, u->dev);
    u->stop = 1;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

static void *reader_main(void *arg) {
    uploader *u = arg;
    if (cudaSetDevice(u->dev) != cudaSuccess) {
        reader_fail(u, "cudaSetDevice failed");
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
            reader_fail(u, "cudaEventSynchronize failed");
            return NULL;
        }
        const up_chunk *c = &u->c[j];
        if (c->pitch == c->width) memcpy(u->slot[s], c->src, c->width * (size_t)c->rows);
        else
            for (int64_t r = 0; r < c->rows; r++) memcpy(u->slot[s] + r * c->width, c->src + r * c->pitch, c->width);
        pthread_mutex_lock(&u->mu);
        u->filled[s] = j;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
    }
}

static void progress_add(progress_sum *ps, uint64_t bytes) {
    if (!ps->fn) return;
    pthread_mutex_lock(&ps->mu);
    ps->done += bytes;
    if (ps->done - ps->reported >= ps->total / 50 || ps->done == ps->total) {
        ps->fn(ps->ctx, ps->done, ps->total);
        ps->reported = ps->done;
    }
    pthread_mutex_unlock(&ps->mu);
}

/* The NEOX interleave of a slice at base (its rows of rb bytes contiguous, whole heads of hd rows,
 * rot = n_rot): row 2j of a head takes the head's row j, row 2j + 1 its row j + rot/2; rows past
 * rot stay. Through the part's GEMM scratch (free while the weights load), a head at a time, on
 * its stream. */
static int interleave_heads(part *p, uint8_t *base, size_t rb, int64_t rows, int hd, int rot, char *err,
                            size_t err_size) {
    const size_t hb = (size_t)rot * rb, half = (size_t)rot / 2;
    if (hb > p->gemm_scratch_bytes) {
        snprintf(err, err_size, "device %d: %d rows of %zu bytes (a head's rotary rows) do not fit the %zu bytes of "
                 "scratch that reorder them", p->dev, rot, rb, p->gemm_scratch_bytes);
        return -1;
    }
    uint8_t *s = p->gemm_scratch;
    for (int64_t h = 0; h + hd <= rows; h += hd) {
        uint8_t *hp = base + (size_t)h * rb;
        DEV_TRY(cudaMemcpyAsync(s, hp, hb, cudaMemcpyDeviceToDevice, p->st));
        DEV_TRY(cudaMemcpy2DAsync(hp, 2 * rb, s, rb, rb, half, cudaMemcpyDeviceToDevice, p->st));
        DEV_TRY(cudaMemcpy2DAsync(hp + rb, 2 * rb, s + half * rb, rb, rb, half, cudaMemcpyDeviceToDevice, p->st));
    }
    return 0;
}

/* A weight whose last chunk is in: its NEOX slices interleaved where they landed (tmp, or its place
 * when plain), then the repack. */
static int weight_landed(part *p, const dweight *d, uint8_t *tmp, char *err, size_t err_size) {
    uint8_t *base = d->plain ? (uint8_t *)d->w : tmp;
    size_t off = 0;
    for (int s = 0; s < d->n_src; s++) {
        const wslice *sl = &d->src[s];
        if (sl->neox_hd && interleave_heads(p, base + off, slice_row_bytes(sl), sl->r1 - sl->r0, sl->neox_hd,
                                            p->f->m->hp.n_rot, err, err_size))
            return -1;
        off += slice_bytes(sl);
    }
    if (!d->plain) DEV_TRY(cu_matvec_repack(d->w, tmp, d->type, d->rows, d->k, p->st));
    return 0;
}

/* The part's thread: copies chunks in order as they are filled, repacks finished weights. */
static int upload_issue(part *p, uploader *u, progress_sum *ps, char *err, size_t err_size) {
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
        size_t bytes = c->width * (size_t)c->rows;
        DEV_TRY(cudaMemcpyAsync(c->dst, u->slot[s], bytes, cudaMemcpyHostToDevice, p->st));
        DEV_TRY(cudaEventRecord(u->ev[s], p->st));
        if (c->repack && weight_landed(p, c->repack, u->tmp, err, err_size)) return -1;
        pthread_mutex_lock(&u->mu);
        u->issued[s] = j;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
        progress_add(ps, bytes);
    }
    DEV_TRY(cudaStreamSynchronize(p->st));
    return 0;
}

/* Appends the chunks of one slice: straight to its place, or through tmp for a repack. */
static void add_chunks(up_chunk *c, int *n, const wslice *s, uint8_t *dst, const dweight *repack) {
    size_t width = slice_row_bytes(s), pitch = s->w->row_bytes;
    const uint8_t *src = s->w->data + (size_t)s->r0 * pitch + quant_row_bytes(s->w->type, s->c0);
    int64_t rows = s->r1 - s->r0;
    if (width == pitch) {  /* whole rows: one contiguous range, cut into slot-sized chunks */
        size_t bytes = width * (size_t)rows;
        for (size_t o = 0; o < bytes; o += STAGE_BYTES) {
            size_t b = bytes - o < STAGE_BYTES ? bytes - o : STAGE_BYTES;
            c[(*n)++] = (up_chunk){src + o, b, b, 1, dst + o, o + b == bytes ? repack : NULL};
        }
        return;
    }
    int64_t per = (int64_t)(STAGE_BYTES / width);
    if (per < 1) per = 1;
    for (int64_t r = 0; r < rows; r += per) {
        int64_t nr = rows - r < per ? rows - r : per;
        c[(*n)++] = (up_chunk){src + (size_t)r * pitch, pitch, width, nr, dst + (size_t)r * width,
                               r + nr == rows ? repack : NULL};
    }
}

static size_t n_chunks_of(const wslice *s) {
    size_t width = slice_row_bytes(s);
    if (width == s->w->row_bytes) return slice_bytes(s) / STAGE_BYTES + 1;
    size_t per = STAGE_BYTES / width ? STAGE_BYTES / width : 1;
    return (size_t)(s->r1 - s->r0) / per + 1;
}

static int upload_weights(part *p, uint8_t *tmp, progress_sum *ps, char *err, size_t err_size) {
    const llama_model *m = p->f->m;
    wslice emb = whole(&m->tok_embd);
    size_t n_chunks = p->embeds ? n_chunks_of(&emb) : 0;
    for (int i = 0; i < p->n_w; i++)
        for (int s = 0; s < p->ws[i]->n_src; s++) n_chunks += n_chunks_of(&p->ws[i]->src[s]);
    uploader u = {.dev = p->dev, .tmp = tmp};
    u.c = malloc((n_chunks + 1) * sizeof *u.c);
    if (!u.c) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    if (p->embeds) add_chunks(u.c, &u.n, &emb, p->tok_embd, NULL);
    for (int i = 0; i < p->n_w; i++) {
        const dweight *d = p->ws[i];
        /* Stacked matrices land one after the other. A repacked weight goes through tmp; its
         * repack and the next weight's copy into tmp are ordered on the one stream. */
        size_t off = 0;
        for (int s = 0; s < d->n_src; s++) {
            const dweight *last = s == d->n_src - 1 ? d : NULL; /* plain: for its NEOX slices only */
            add_chunks(u.c, &u.n, &d->src[s], (d->plain ? (uint8_t *)d->w : tmp) + off, last);
            off += slice_bytes(&d->src[s]);
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
            snprintf(err, err_size, "device %d: cudaHostAlloc of %d MiB staging failed", p->dev, STAGE_BYTES >> 20);
            goto done;
        }
    for (; n_ev < STAGE_SLOTS; n_ev++)
        if (cudaEventCreateWithFlags(&u.ev[n_ev], cudaEventDisableTiming) != cudaSuccess) {
            snprintf(err, err_size, "device %d: cudaEventCreate failed", p->dev);
            goto done;
        }
    for (; n_th < N_READERS; n_th++)
        if (pthread_create(&th[n_th], NULL, reader_main, &u)) break;
    if (n_th == 0) {
        snprintf(err, err_size, "cannot start a reader thread");
        goto done;
    }
    rc = upload_issue(p, &u, ps, err, err_size);
done:
    pthread_mutex_lock(&u.mu);
    u.stop = 1;
    pthread_cond_broadcast(&u.cv);
    pthread_mutex_unlock(&u.mu);
    for (int t = 0; t < n_th; t++) pthread_join(th[t], NULL);
    if (rc) cudaStreamSynchronize(p->st);  /* no copy may still read a slot about to be freed */
    for (int s = 0; s < n_ev; s++) cudaEventDestroy(u.ev[s]);
    for (int s = 0; s < n_slots; s++) cudaFreeHost(u.slot[s]);
    pthread_cond_destroy(&u.cv);
    pthread_mutex_destroy(&u.mu);
    free(u.c);
    return rc;
}


/* --- a part: its plan, its block and its upload, all parts at once --------------------------------- */

/* Appends a vector of n floats at src (NULL: the model has none, *dev stays NULL). */
static void vec_add(part *p, float **dev, const float *src, size_t n) {
    *dev = NULL;
    if (src) p->vecs[p->n_vecs++] = (dvec){dev, src, n};
}

/* What part p holds, from the plan: its weights' slices and its vectors'. */
int fcu_part_plan(part *p, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    const llama_model *m = f->m;
    const llama_hparams *hp = &m->hp;
    int64_t hd = hp->head_dim, E = hp->n_embd;
    p->vecs = calloc(2 + 10 * (size_t)(p->l1 - p->l0), sizeof *p->vecs);
    if (!p->vecs) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    if (p->head) {
        wslice out = whole(&m->output);
        if (weight_plan(&p->output, &out, 1, err, err_size)) return -1;
        vec_add(p, &p->output_norm, m->output_norm, (size_t)E);
        vec_add(p, &p->output_b, m->output_b, (size_t)hp->n_vocab);
    }
    for (int32_t l = p->l0; l < p->l1; l++) {
        const llama_layer *S = &m->layers[l];
        dlayer *L = &p->layers[l - p->l0];
        /* a row split's part adds the biases of its own heads; bo goes to the residual, which
         * every part keeps whole (fcu_attn_half) */
        vec_add(p, &L->attn_norm, S->attn_norm, (size_t)E);
        vec_add(p, &L->ffn_norm, S->ffn_norm, (size_t)E);
        vec_add(p, &L->bq, S->bq ? S->bq + p->qh0 * hd : NULL, (size_t)p->nq);
        vec_add(p, &L->bk, S->bk ? S->bk + p->kvh0 * hd : NULL, (size_t)p->kv_dim);
        vec_add(p, &L->bv, S->bv ? S->bv + p->kvh0 * hd : NULL, (size_t)p->kv_dim);
        vec_add(p, &L->bo, S->bo, (size_t)E);
        vec_add(p, &L->q_norm, S->q_norm, (size_t)hd);
        vec_add(p, &L->k_norm, S->k_norm, (size_t)hd);
        vec_add(p, &L->attn_post_norm, S->attn_post_norm, (size_t)E);
        vec_add(p, &L->ffn_post_norm, S->ffn_post_norm, (size_t)E);
        const int nx = p->f->neox_rows ? (int)hd : 0; /* Q and K heads NEOX-interleaved */
        wslice qkv[3] = {{&S->wq, p->qh0 * hd, p->qh1 * hd, 0, E, nx}, {&S->wk, p->kvh0 * hd, p->kvh1 * hd, 0, E, nx},
                         {&S->wv, p->kvh0 * hd, p->kvh1 * hd, 0, E, 0}};
        wslice gu[2] = {{&S->w_gate, p->ff0, p->ff1, 0, E, 0}, {&S->w_up, p->ff0, p->ff1, 0, E, 0}};
        wslice wo = {&S->wo, 0, E, p->qh0 * hd, p->qh1 * hd, 0}, down = {&S->w_down, 0, E, p->ff0, p->ff1, 0};
        if (group_plan(&L->qkv, qkv, 3, err, err_size) || weight_plan(&L->wo, &wo, 1, err, err_size) ||
            group_plan(&L->gu, gu, 2, err, err_size) || weight_plan(&L->down, &down, 1, err, err_size))
            return -1;
    }
    p->n_w = all_weights(p, p->ws);
    return 0;
}

static int part_setup(part *p, progress_sum *ps, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    const llama_model *m = f->m;
    const llama_hparams *hp = &m->hp;
    DEV_TRY(cudaSetDevice(p->dev));
    struct cudaDeviceProp prop;
    DEV_TRY(cudaGetDeviceProperties(&prop, p->dev));
    snprintf(p->dev_name, sizeof p->dev_name, "%s", prop.name);
    p->n_sm = prop.multiProcessorCount;
    DEV_TRY(cudaStreamCreateWithFlags(&p->st, cudaStreamNonBlocking));
    DEV_TRY(cudaStreamCreateWithFlags(&p->st_rx, cudaStreamNonBlocking));
    DEV_TRY(cudaEventCreateWithFlags(&p->ev_rx, cudaEventDisableTiming));
    DEV_TRY(cudaEventCreateWithFlags(&p->ev_local, cudaEventDisableTiming));
    size_t tmp_bytes = 0;
    for (int i = 0; i < p->n_w; i++)
        if (dweight_raw(p->ws[i]) > tmp_bytes) tmp_bytes = dweight_raw(p->ws[i]);
    /* Sizes first, then one check against free memory with a message that says what to change. */
    arena a = {0};
    layout_weights(p, &a);
    p->w_bytes = a.off;
    layout_kv(p, &a);
    p->kv_bytes = a.off - p->w_bytes;
    layout_scratch(p, &a);
    size_t total = a.off;
    p->scratch_bytes = total - p->w_bytes - p->kv_bytes + tmp_bytes;
    size_t free_b = 0, total_b = 0;
    DEV_TRY(cudaMemGetInfo(&free_b, &total_b));
    p->free_before = free_b;
    if (total + tmp_bytes + (64u << 20) > free_b) {
        snprintf(err, err_size, "device %d (%s): out of memory loading the model: need %.1f GiB (weights %.1f, "
                 "KV cache %.1f, scratch %.1f), %.1f GiB free; try -ts to move layers to other GPUs, -ngl to keep "
                 "some on the CPU, or a smaller -c or -b", p->dev, p->dev_name, fcu_gib(total + tmp_bytes),
                 fcu_gib(p->w_bytes), fcu_gib(p->kv_bytes), fcu_gib(p->scratch_bytes), fcu_gib(free_b));
        return -1;
    }
    uint8_t *tmp = NULL;
    cudaError_t e1 = cudaMalloc((void **)&p->block, total), e2 = cudaMalloc((void **)&tmp, tmp_bytes ? tmp_bytes : 1);
    if (e1 != cudaSuccess || e2 != cudaSuccess) {
        cudaFree(tmp);
        snprintf(err, err_size, "device %d (%s): cudaMalloc of %.1f GiB failed (%s); try -ts, -ngl, or a smaller "
                 "-c or -b", p->dev, p->dev_name, fcu_gib(total + tmp_bytes),
                 cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
        return -1;
    }
    a = (arena){.base = p->block};
    layout_weights(p, &a);
    layer_recipes(p);
    layout_kv(p, &a);
    layout_scratch(p, &a);
    DEV_TRY(cudaHostAlloc((void **)&p->h_kv, 2 * (size_t)ATT_CHUNK * (size_t)p->kv_dim * sizeof(uint16_t),
                          cudaHostAllocDefault));
    for (int i = 0; i < p->n_vecs; i++)
        DEV_TRY(cudaMemcpy(*p->vecs[i].dev, p->vecs[i].src, p->vecs[i].n * sizeof(float), cudaMemcpyHostToDevice));
    if (p->rope_angle)
        DEV_TRY(cudaMemcpy(p->rope_angle, f->h_angle, (size_t)(hp->n_rot / 2) * sizeof(double), cudaMemcpyHostToDevice));
    if (p->rope_angle_swa)
        DEV_TRY(cudaMemcpy(p->rope_angle_swa, f->h_angle_swa, (size_t)(hp->n_rot / 2) * sizeof(double),
                           cudaMemcpyHostToDevice));
    int rc = upload_weights(p, tmp, ps, err, err_size);
    cudaFree(tmp);
    if (rc) return -1;
    /* Cells never written read as zeros, not NaN, should a caller look at them. */
    size_t kv_each = (size_t)(p->l1 - p->l0) * (size_t)f->kv_cells * (size_t)p->kv_dim * sizeof(uint16_t);
    DEV_TRY(cudaMemsetAsync(p->kv_k, 0, kv_each, p->st));
    DEV_TRY(cudaMemsetAsync(p->kv_v, 0, kv_each, p->st));
    /* paged_attention's arrival counters live in its scratch and start at zero (paged.h). */
    DEV_TRY(cudaMemsetAsync(p->att_scratch, 0, p->att_scratch_bytes, p->st));
    DEV_TRY(cudaMemsetAsync(p->post_count, 0, sizeof(unsigned), p->st)); /* as is cu_matvec_f32_acc_post's */
    DEV_TRY(cudaStreamSynchronize(p->st));
    return 0;
}

typedef struct {
    part *p;
    progress_sum *ps;
    int rc;
} setup_job;

static void *setup_main(void *arg) {
    setup_job *j = arg;
    j->rc = part_setup(j->p, j->ps, j->p->err, sizeof j->p->err);
    return NULL;
}

/* Loads every part at once (one thread each, each with its own readers), so the devices are fed
 * together; the first failure is the message. */
int fcu_setup_parts(forward_cuda *f, engine_progress_fn progress, void *pctx, char *err, size_t err_size) {
    progress_sum ps = {.fn = progress, .ctx = pctx};
    pthread_mutex_init(&ps.mu, NULL);
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        if (p->embeds) ps.total += raw_bytes(&f->m->tok_embd);
        for (int w = 0; w < p->n_w; w++) ps.total += dweight_raw(p->ws[w]);
    }
    if (ps.total <= (1ull << 30)) ps.fn = NULL;
    setup_job jobs[ENGINE_MAX_DEVICES];
    pthread_t th[ENGINE_MAX_DEVICES];
    int started[ENGINE_MAX_DEVICES] = {0};
    for (int i = 0; i < f->n_part; i++) {
        jobs[i] = (setup_job){&f->p[i], &ps, 0};
        if (f->n_part > 1 && !pthread_create(&th[i], NULL, setup_main, &jobs[i])) started[i] = 1;
        else setup_main(&jobs[i]);
    }
    int rc = 0;
    for (int i = 0; i < f->n_part; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        if (jobs[i].rc && !rc) {
            snprintf(err, err_size, "%s", f->p[i].err);
            rc = -1;
        }
    }
    pthread_mutex_destroy(&ps.mu);
    return rc;
}
