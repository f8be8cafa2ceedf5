/* The CUDA backend of engine/batch.h over one or several devices, as an engine_plan says
 * (engine/plan.h). Each device ("part") has one memory block holding its weights (repacked for
 * kernels.h's matvec), its KV cache and all scratch, sized at creation, so a forward pass
 * allocates nothing. Weights travel through pinned staging buffers filled by reader threads from
 * the mapped file while earlier buffers are copied; the parts load at once, one thread each.
 *
 * Splits:
 *   layer: part i runs layers [l0, l1); the hidden state of each token goes to the next part by
 *     NCCL send/recv. A pass of many tokens is cut into micro-batches that flow through the parts
 *     one after the other, so all devices work at once (a pipeline); decode steps go through
 *     the parts in turn.
 *   row: every part runs every layer over its share of KV heads (with their query heads) and of
 *     FFN columns: Q/K/V and gate/up by rows, the attention output and down matrices by columns,
 *     so each part's wo and down products are partial sums that one NCCL all-reduce adds up
 *     (two per layer). Every part keeps the whole residual stream; the head runs on the main part.
 *   none / one device: one part.
 *
 * KV layout per part: per layer held, K and V f16 [n_cells][kv_dim] with kv_dim the part's KV
 * heads x head_dim (a cell's row contiguous), cell c = page * ENGINE_KV_PAGE + offset.
 *
 * A layer is nine launches: Q/K/V as one stacked matvec (when the three share a type), RoPE with
 * the K/V store, paged attention, the output matvec, residual add + FFN norm, gate/up stacked,
 * SwiGLU, down, residual add + the next layer's attention norm. Passes of up to FUSE_MAX_N tokens
 * on one device or a layer split take seven where the matvecs allow (MGI_FUSE, fuse_mode; the
 * plan per layer and token count: plan_fusions): each RMSNorm inside the matvec that reads it, the
 * residual adds as the wo and down matvecs' `y +=` (and with MGI_FUSE=1, six: SwiGLU while the
 * down matvec stages its input); after a fused layer x holds the whole residual and xn is only
 * scratch. The kernels of a decode step overlap their launch and first weight loads with the
 * previous kernel's tail (programmatic dependent launch, kernels/pdl.cuh).
 *
 * Per pass, everything that changes (token ids, positions, sequence indices, cells, the rows
 * that want logits, the page tables) goes to each part in one copy of one int32 buffer laid out
 * [token n][pos n][seq n][cell n][out n][pages n_seqs x max_pages], so for a given n the device
 * addresses are fixed and a decode step captured as graphs replays with new contents. A decode
 * step is captured per part and per segment (the stretch between two NCCL calls); the NCCL
 * calls themselves are issued between graph launches. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "engine/devices.h"
#include "engine/forward_cuda.h"
#include "kernels/check.h"
#include "kernels/kernels.h"
#include "kernels/paged.h"
#include "kernels/p2p.h"
#include "quant/quant.h"

enum {
    GRAPH_MAX_TOK = 64,  /* decode steps of up to this many sequences run from captured graphs */
    ATT_CHUNK = PAGED_ATT_TOKENS, /* tokens per attention launch (scratch is sized for this many) */
    PREFILL_MIN = 64,    /* a pass of at least this many consecutive tokens of one sequence takes the
                            tensor-core prompt attention (fewer: too few blocks to fill the GPU) */
    OUT_CHUNK = 64,      /* logits rows computed and copied back at once */
    N_SPLIT_MAX = 32,    /* attention splits per token (blocks per kv head; a decode step's graph
                            launches them all, most exiting at once at short contexts) */
    ATT_BLOCKS_PER_SM = 4, /* attention launches aim at this many blocks per SM (att_splits) */
    GEMM_PANEL_MIN_TOKENS = 512, /* prompt GEMMs of fewer tokens run v7 (gemm_panel_min_tokens): PERF-LOG
                            run 91, 8b pp256 12270 t/s with panels, 17730 with v7 */
    STAGE_SLOTS = 8,     /* pinned staging buffers per part for the upload */
    STAGE_BYTES = 16 << 20,
    N_READERS = 4,       /* threads per part copying the mapped file into staging buffers */
    PIPE_MIN = 64,       /* a layer-split pass of at least 2 x this many tokens is pipelined in
                            micro-batches of at least this many (fewer: the GEMMs get too thin) */
    NCCL_TIMEOUT_S = 120, /* a pass that has not finished by then is a dead peer: abort, never hang
                             (MGI_NCCL_TIMEOUT overrides it: nccl_timeout_s) */
    FUSE_MAX_N = 4,      /* passes of up to this many tokens take the fused layer (kernels.h's
                            cu_matvec_f32_norm etc.: v10's range) */
};

/* MGI_FUSE values (fuse_mode). */
enum { FUSE_OFF = 0, FUSE_ALL = 1, FUSE_NO_SWIGLU = 2 };
/* A layer's fusion plan for one token count (plan_fusions): which products take the fused
 * matvecs (QKV and gate/up: every matrix of the group), and whether the layer runs fused. */
enum { FZ_QKV = 1, FZ_WO = 2, FZ_GU = 4, FZ_DOWN = 8, FZ_LAYER = 16 };

/* A part of one matrix of the file: rows [r0, r1) and columns [c0, c1) (c0, c1 on block bounds). */
typedef struct {
    const llama_weight *w;
    int64_t r0, r1, c0, c1;
} wslice;

/* One matvec's weight on the device: one (part of a) matrix of the file, or several read by the
 * same input stacked by rows (Q, K, V; gate, up) so one launch does them all. */
typedef struct {
    void *w;            /* repacked for matvec, or GGUF layout when plain */
    uint32_t type;
    int64_t rows, k;    /* rows of all the stacked matrices, columns of the slice */
    int plain;          /* F32/F16 with k not a multiple of 32: paged_matvec_plain */
    wslice src[3];
    int n_src;
} dweight;

/* Matrices that read the same input: each run of consecutive parts whose types and row lengths
 * agree is one stacked matvec (Q4_K_M's q and k, with v in Q6_K, are two launches, not three).
 * The outputs of a pass (buffer of n_batch tokens, matrix after matrix) are part i of token t at
 * buf[off_i + t * stride_i] (group_view). */
typedef struct {
    dweight m[3];
    int n_m;            /* 1 when all are stacked */
    int n_parts;
    int64_t part_rows[3];
    int part_m[3];      /* the matrix holding part i */
    int64_t part_off[3]; /* its first row in that matrix */
} wgroup;

typedef struct {
    wgroup qkv, gu;
    dweight wo, down;
    float *attn_norm, *ffn_norm;
    uint8_t fz[FUSE_MAX_N + 1]; /* FZ_* by token count */
} dlayer;

typedef struct forward_cuda forward_cuda;

/* One device's share of the model. */
typedef struct {
    forward_cuda *f;
    int dev;
    char dev_name[256];
    cudaStream_t st;
    /* Layer split: the hidden state from the previous part arrives on st_rx, so the sender never
     * waits for this part's compute (the compute stream waits on ev_rx instead): the parts
     * pipeline micro-batches. */
    cudaStream_t st_rx;
    cudaEvent_t ev_rx;
    cudaEvent_t ev_local; /* the local transfers' (forward_cuda.local) marks on st */
    ncclComm_t comm;
    /* Split statistics (forward_cuda_gpu.stats): event pairs around segments and NCCL calls of
     * the current pass, and the sums so far. */
    cudaEvent_t *ev;
    char *ev_nccl;      /* [ev_cap / 2] the pair is an NCCL call */
    int n_ev, ev_cap;
    double busy_ms, nccl_ms;
    int32_t l0, l1;     /* layers held */
    int32_t qh0, qh1, kvh0, kvh1, ff0, ff1;  /* query heads, KV heads, FFN columns held */
    int32_t n_head, n_head_kv, n_ff;         /* counts of the above */
    int64_t kv_dim, nq;
    int embeds;         /* embeds the tokens of a pass that starts at layer 0 */
    int head;           /* computes the output head */
    uint8_t *block;     /* the one device allocation */
    void *tok_embd;     /* GGUF layout, for embed */
    dlayer *layers;     /* [l1 - l0] */
    dweight output;
    uint8_t head_fz[FUSE_MAX_N + 1]; /* by token count: the head's matvec takes the output norm */
    dweight **ws;       /* every matvec weight, in upload order */
    int n_w;
    float *output_norm;
    uint16_t *kv_k, *kv_v;  /* [l1 - l0][kv_cells][kv_dim] f16 */
    float *x, *xn;      /* residual stream, normed input (or a matvec's output before the add) */
    float *qkv, *q;     /* Q/K/V outputs (group_view), Q after RoPE */
    float *att, *gu, *ff, *logits;
    uint16_t *xh;       /* a matvec input in f16 for cu_gemm_f16 (prompt passes) */
    int xh_ready;       /* part_add wrote xn's tokens of the span as f16 into xh too (for the next group_mm) */
    int xn_parts;       /* > 1: the product meant for xn is that many split-K planes in gemm_scratch, which
                         * part_add adds up itself (cu_gemm_f16_split_parts) */
    void *att_scratch;
    size_t att_scratch_bytes;
    void *gemm_scratch; /* split-K partial sums of a GEMM over few tokens */
    size_t gemm_scratch_bytes;
    int n_sm;
    int32_t *d_meta;
    int32_t *d_ids;     /* [OUT_CHUNK][2] greedy picks of each logits row (forward_greedy: kernels.h's cu_argmax) */
    void *p2p_mem;      /* this device's p2p_rank (row split with peer access) */
    uint16_t *h_kv;     /* pinned [2][ATT_CHUNK][kv_dim] for kv_get / kv_set */
    size_t w_bytes, kv_bytes, scratch_bytes, free_before;
    /* decode-step graphs by [greedy][sequences], each an array of one graph per segment */
    cudaGraphExec_t *graphs[2][GRAPH_MAX_TOK + 1];
    char err[512];      /* setup's failure, when parts load in threads */
} part;

/* Shared progress of the parts' uploads. */
typedef struct {
    pthread_mutex_t mu;
    uint64_t done, total, reported;
    engine_progress_fn fn;
    void *ctx;
} progress_sum;

struct forward_cuda {
    const llama_model *m;
    engine_plan plan;
    int n_part, split;
    part p[ENGINE_MAX_DEVICES];
    int main;           /* index of the part computing the head */
    int32_t l0, l1;     /* layers of the whole backend */
    int32_t n_cells, n_batch, max_pos, max_pages, n_split;
    int32_t kv_cells;   /* cells per layer in the device cache: the n_cells callers use, then one trash
                           page that only ahead_cancel's placeholder step writes and reads */
    int32_t max_seqs;   /* page tables per pass: sequences of max_pos positions fitting n_cells */
    int32_t pf_pos0;    /* the pass is one sequence's positions pf_pos0.. (prompt attention); -1: not */
    int one_per_seq;    /* every sequence of the pass has one token: its earlier cells were written by
                           earlier passes, so decode attention may read them before its PDL wait */
    int32_t *h_meta;    /* pinned */
    float *h_logits;    /* pinned [OUT_CHUNK][n_vocab] */
    int32_t *h_ids;     /* pinned [OUT_CHUNK][2] */
    argmax_skip skip;   /* the ids argmax's second pick skips (the batch's, the same on every pass) */
    /* Decode steps through the host gate (kernels.h: cu_host_gate): a one-part decode graph begins
     * with it and takes its metadata from h_meta (pinned, mapped) when the host opens it, instead
     * of from a copy queued before the launch. With `ahead` (engine_decode_ahead) the one-token
     * step after each one-token step is launched at once, before its token is known: the launch
     * call overlaps the step before it, and the call that brings the token only writes the
     * metadata and opens the gate (armed: that launch is pending, forward_greedy's if
     * armed_greedy; step_ev[armed_ev] marks its end). Any other call cancels it first
     * (ahead_cancel). */
    kernels_gate *gate;     /* pinned, mapped */
    int gate_pass;          /* the pass being launched begins with the gate */
    int ahead_mode;         /* ahead_mode(), read once at create */
    int glu;                /* fused decode FFNs write SwiGLU from the gate/up matvec (ffn_half); MGI_GLU=0: apart */
    int beside;             /* a QKV group of two fused matvecs (attn_half): 3 one launch (cu_matvec_f32_norm_rope_pair),
                             * else the second beside the first, on the SMs the first leaves (2, MGI_BESIDE=2) or
                             * shaped for every SM (1); 0 after it */
    int direct_out;         /* gate steps write logits / ids into h_logits / h_ids (run_head); MGI_DIRECT_OUT=0: copies */
    int ahead, armed, armed_greedy, armed_ev;
    cudaEvent_t step_ev[2]; /* the end of the step waited for, and of the one launched ahead */
    int ev_next;
    float *h_keep;          /* [n_vocab]: the caller's last logits, kept while a cancelled step runs */
    int graph_seen[2][GRAPH_MAX_TOK + 1];
    int have_comms;
    /* Two parts on one physical device (devices.h's MGI_VIRTUAL_DEVICES, for tests): no NCCL, the
     * hidden state and the all-reduces pass by copies and adds on the device (local_send,
     * local_allreduce), ordered by events as NCCL's calls would order the streams. */
    int local;
    int broken;         /* an NCCL failure or timeout: the communicators are gone */
    int timeout_s;      /* nccl_timeout_s(), read once at create */
    int fault_stall;    /* fault_peer_stall(), read once at create */
    int fuse;           /* fuse_mode(), read once at create */
    int rope_fold;      /* rope_fold_mode(), read once at create */
    int att_early;      /* att_early_mode(), read once at create */
    int pipe_ub;        /* pipe_ub_mode(), read once at create */
    char trace_path[512];   /* MGI_TRACE's FILE ("" when off): two decode steps' block timeline */
    int trace_step;         /* MGI_TRACE's N: the first replay of a one-part decode graph it traces */
    void *trace_buf;        /* device, TRACE_BYTES, while tracing */
    /* Row split: the all-reduces of passes of up to p2p_max_tok tokens run kernels/p2p.h's
     * all-reduce over peer access instead of NCCL, and a decode step is one graph per device
     * (p2p_applies); only with MGI_P2P=1 (setup_p2p) and peer access between every pair. */
    int p2p, p2p_max_tok;
    p2p_group p2pg;
    volatile int *p2p_report; /* pinned, mapped: [n_part], the ranks' p2p_rank.report */
    int prof;           /* collecting split statistics */
    double prof_wall_ms;
};

#define DEV_TRY(call) CUDA_TRY(call, err, err_size)
#define NC_TRY(call) NCCL_TRY(call, err, err_size)

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
static wslice whole(const llama_weight *w) { return (wslice){w, 0, w->n_rows, 0, w->n_cols}; }

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
    p->output_norm = p->head ? take(a, (size_t)hp->n_embd * sizeof(float)) : NULL;
    for (int32_t l = 0; l < p->l1 - p->l0; l++) {
        p->layers[l].attn_norm = take(a, (size_t)hp->n_embd * sizeof(float));
        p->layers[l].ffn_norm = take(a, (size_t)hp->n_embd * sizeof(float));
    }
    for (int i = 0; i < p->n_w; i++) p->ws[i]->w = take(a, weight_dev_bytes(p->ws[i]));
}

static void layout_kv(part *p, arena *a) {
    size_t n = (size_t)(p->l1 - p->l0) * (size_t)p->f->kv_cells * (size_t)p->kv_dim;
    p->kv_k = take(a, n * sizeof(uint16_t));
    p->kv_v = take(a, n * sizeof(uint16_t));
}

/* Words of a pass's metadata at most: d_meta's and h_meta's size (fwd_pass's layout: token,
 * position, sequence, cell and output row per token, then a page table per sequence). */
static size_t meta_words(const forward_cuda *f) {
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
    /* cu_gemm_f16_split's bound for any shape's split-K planes (every variant, v7's too): SMs x
     * 128 KiB (kernels.h); the f16 panels of variants 4-7 (MGI_GEMM; 6 and 7 need what 4 does)
     * need more, so the buffer is sized for every variant. */
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
    p->d_meta = take(a, meta_words(f) * sizeof(int32_t));
}

/* --- weight upload: readers fill pinned slots from the mapped file, the part's thread copies ---- */

/* rows x width bytes read at src with a row pitch (a column slice), landing contiguous at dst. */
typedef struct {
    const uint8_t *src;
    size_t pitch, width;
    int64_t rows;
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
        if (c->repack) {
            const dweight *d = c->repack;
            DEV_TRY(cu_matvec_repack(d->w, u->tmp, d->type, d->rows, d->k, p->st));
        }
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
            const dweight *last = !d->plain && s == d->n_src - 1 ? d : NULL;
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

/* --- forward pass -------------------------------------------------------------------------------- */

/* y[n][rows] = W . x[n][k]: more than MM_MATVEC_N tokens go through the tensor-core GEMM (x
 * rounded to f16) where it handles the weight type, split along k when the tokens are too few
 * to fill the GPU (batched decode, pipeline micro-batches), else through matvecs of up to
 * MATVEC_MAX_N tokens. The matvec does its FMAs on the CUDA cores: at 14336x4096 Q4_0 it takes
 * ~17 us for one token, ~60 for 4 and ~98 for 8, while the split GEMM takes ~60 for any count up
 * to 64 (kernel lab, PERF-LOG runs 2 and 8). */
enum { MM_MATVEC_N = 4 };

static int mm_gemm(const dweight *w, int n) { return n > MM_MATVEC_N && !w->plain && cu_gemm_supported(w->type); }

/* xh_ready: xh already holds x in f16 (its producer wrote both), so no conversion is launched.
 * parts (the product is xn's, for part_add): a split GEMM leaves its planes in gemm_scratch and
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

/* mm into xn for the part_add that follows in the same segment (one device or a layer split: a
 * row split adds the parts' xn across devices first), which adds a split GEMM's planes itself. */
static int mm_xn(part *p, const dweight *w, const float *x, int xh_ready, int n, int t0, char *err, size_t err_size) {
    float *xn = p->xn + (int64_t)t0 * p->f->m->hp.n_embd;
    const int own = p->f->split != ENGINE_SPLIT_ROW;
    return mm_h(p, w, x, xh_ready, xn, n, own ? &p->xn_parts : NULL, err, err_size);
}

/* The group's products for tokens [t0, t0 + nt) of the pass; x's f16 copy is made once for all
 * of them (or not at all after part_add made it: xh_ready). */
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
    return f->fuse != FUSE_OFF && f->split != ENGINE_SPLIT_ROW && n <= FUSE_MAX_N;
}

/* The FZ_* plan of layer l for a pass of n tokens (0: the unfused layer). */
static int layer_fz(const part *p, int32_t l, int n) {
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
    for (int i = 0; i < g->n_m; i++) {
        const dweight *w = &g->m[i];
        float *y = matrix_out(g, buf, p->f->n_batch, i);
        DEV_TRY(cu_matvec_f32_norm(y + (int64_t)t0 * w->rows, w->w, w->type, x, nw, hp->rms_eps, w->rows, w->k, nt,
                                p->st));
    }
    return 0;
}

/* y += W . x for n tokens (y: the residual at token t0): fused into the matvec, or the product
 * into xn and an add. */
static int mm_acc(part *p, const dweight *w, const float *x, float *y, int t0, int n, int fused, int prefilled,
                  char *err, size_t err_size) {
    if (fused) {
        /* prefilled: X is decode attention's output; the matvec's blocks start while attention
         * runs, long enough for their whole first weight fill to land before the wait (kernels.h) */
        if (prefilled)
            DEV_TRY(cu_matvec_f32_acc_prefilled(y, w->w, w->type, x, w->rows, w->k, n, p->st));
        else
            DEV_TRY(cu_matvec_f32_acc(y, w->w, w->type, x, w->rows, w->k, n, p->st));
        return 0;
    }
    float *xn = p->xn + (int64_t)t0 * p->f->m->hp.n_embd;
    if (mm(p, w, x, xn, n, err, err_size)) return -1;
    DEV_TRY(cu_add(y, y, xn, (int64_t)n * w->rows, p->st));
    return 0;
}

/* Tokens [t0, t0 + nt) of an n-token pass whose metadata is in the part's d_meta. */
typedef struct {
    int n, t0, nt;
} span;

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
 * norm inside (or before it), and the output matvec added to x. */
static int attn_half(part *p, int32_t l, span s, int fz, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    const llama_hparams *hp = &f->m->hp;
    const dlayer *L = &p->layers[l - p->l0];
    int E = hp->n_embd, hd = hp->head_dim, t0 = s.t0, nt = s.nt;
    const int32_t *d_pos = p->d_meta + s.n, *d_seq = d_pos + s.n, *d_cell = d_seq + s.n;
    const int32_t *d_pages = d_cell + 2 * s.n;
    size_t kv_off = (size_t)(l - p->l0) * (size_t)f->kv_cells * (size_t)p->kv_dim;
    float scale = 1.0f / sqrtf((float)hd);
    float *pq, *pk, *pv;
    int64_t sq, sk, sv;
    float *x = p->x + (int64_t)t0 * E, *xn = p->xn + (int64_t)t0 * E;
    float *q = p->q + (int64_t)t0 * p->nq, *att = p->att + (int64_t)t0 * p->nq;
    if ((fz & FZ_QKV) && f->rope_fold) { /* Q, K, V straight to q and the caches */
        cudaError_t pe = cudaErrorNotSupported;
        if (L->qkv.n_m == 2 && f->beside == 3) { /* Q4_K_M's Q/K and Q6_K V: one launch for both */
            const dweight *w0 = &L->qkv.m[0], *w1 = &L->qkv.m[1];
            int64_t r[2][3];
            for (int i = 0; i < 2; i++) group_part_rows(&L->qkv, i, r[i]);
            pe = cu_matvec_f32_norm_rope_pair(w0->w, w0->type, w0->rows, r[0][0], r[0][1], w1->w, w1->type, w1->rows,
                                           r[1][0], r[1][1], x, L->attn_norm, hp->rms_eps, w0->k, nt, q,
                                           p->kv_k + kv_off, p->kv_v + kv_off, d_pos + t0, d_cell + t0, p->kv_dim, hd,
                                           hp->n_rot, hp->rope_base, p->st);
            if (pe != cudaSuccess && pe != cudaErrorNotSupported) DEV_TRY(pe);
        }
        for (int i = 0; pe != cudaSuccess && i < L->qkv.n_m; i++) {
            const dweight *w = &L->qkv.m[i];
            int64_t r[3];
            group_part_rows(&L->qkv, i, r);
            /* a second matrix (Q4_K_M's Q6_K V) runs beside the first (both read x only), on the
             * SMs the first one's grid leaves */
            if (i > 0 && f->beside) {
                const dweight *w0 = &L->qkv.m[0];
                const int front = f->beside >= 2 ? cu_matvec_fused_blocks(w0->type, w0->rows, w0->k, nt) : 0;
                DEV_TRY(cu_matvec_f32_norm_rope_beside(w->w, w->type, x, L->attn_norm, hp->rms_eps, w->rows, w->k, nt, q,
                                                    p->kv_k + kv_off, p->kv_v + kv_off, d_pos + t0, d_cell + t0, r[0],
                                                    r[1], p->kv_dim, hd, hp->n_rot, hp->rope_base, front, p->st));
            } else {
                DEV_TRY(cu_matvec_f32_norm_rope(w->w, w->type, x, L->attn_norm, hp->rms_eps, w->rows, w->k, nt, q,
                                             p->kv_k + kv_off, p->kv_v + kv_off, d_pos + t0, d_cell + t0, r[0], r[1],
                                             p->kv_dim, hd, hp->n_rot, hp->rope_base, p->st));
            }
        }
    } else {
        if (fz ? group_mm_norm(p, &L->qkv, x, L->attn_norm, p->qkv, t0, nt, fz & FZ_QKV, err, err_size)
               : group_mm(p, &L->qkv, xn, p->qkv, t0, nt, err, err_size))
            return -1;
        group_view(&L->qkv, p->qkv, f->n_batch, 0, &pq, &sq);
        group_view(&L->qkv, p->qkv, f->n_batch, 1, &pk, &sk);
        group_view(&L->qkv, p->qkv, f->n_batch, 2, &pv, &sv);
        DEV_TRY(paged_rope_store(q, p->kv_k + kv_off, p->kv_v + kv_off, pq + t0 * sq, sq, pk + t0 * sk, sk,
                                 pv + t0 * sv, sv, d_pos + t0, d_cell + t0, nt, p->n_head, p->n_head_kv, hd,
                                 hp->n_rot, hp->rope_base, p->st));
    }
    int h16 = 0; /* attention wrote wo's GEMM input in f16 too */
    if (f->pf_pos0 >= 0) {
        DEV_TRY(paged_attention_prefill(att, q, p->kv_k + kv_off, p->kv_v + kv_off, d_pages, f->pf_pos0 + t0, nt,
                                        p->n_head, p->n_head_kv, hd, scale, p->st));
    } else {
        /* an unfused pass whose wo runs on the GEMM: attention writes its f16 input too */
        h16 = !fz && mm_gemm(&L->wo, nt);
        for (int c = 0; c < nt; c += ATT_CHUNK) {
            int nc = nt - c < ATT_CHUNK ? nt - c : ATT_CHUNK;
            cudaError_t e = cudaErrorNotSupported;
            if (h16)
                e = paged_attention_f16(att + (size_t)c * p->nq, p->xh + (size_t)c * p->nq, q + (size_t)c * p->nq,
                                        p->kv_k + kv_off, p->kv_v + kv_off, d_pos + t0 + c, d_seq + t0 + c, d_pages,
                                        f->max_pages, p->att_scratch, nc, p->n_head, p->n_head_kv, hd,
                                        att_splits(f, p, nc), f->one_per_seq && f->att_early, scale, p->st);
            if (e == cudaErrorNotSupported) {
                h16 = 0; /* (the first chunk: every chunk takes the same kernel) */
                e = paged_attention(att + (size_t)c * p->nq, q + (size_t)c * p->nq, p->kv_k + kv_off,
                                    p->kv_v + kv_off, d_pos + t0 + c, d_seq + t0 + c, d_pages, f->max_pages,
                                    p->att_scratch, nc, p->n_head, p->n_head_kv, hd, att_splits(f, p, nc),
                                    f->one_per_seq && f->att_early, scale, p->st);
            }
            DEV_TRY(e);
        }
    }
    /* wo follows attention: prefilled */
    return fz ? mm_acc(p, &L->wo, att, x, t0, nt, fz & FZ_WO, 1, err, err_size)
              : mm_xn(p, &L->wo, att, h16, nt, t0, err, err_size);
}

/* FFN half of layer l: xn (normed) -> gate/up, SwiGLU, down into xn (a partial sum in row mode).
 * With fz: x -> gate/up with the FFN norm inside (or before it), and down added to x, SwiGLU
 * inside it (MGI_FUSE=1) or apart. */
static int ffn_half(part *p, int32_t l, span s, int fz, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    const dlayer *L = &p->layers[l - p->l0];
    int E = f->m->hp.n_embd, t0 = s.t0, nt = s.nt;
    float *pg, *pu;
    int64_t sg, su;
    float *x = p->x + (int64_t)t0 * E, *xn = p->xn + (int64_t)t0 * E;
    const dweight *dn = &L->down;
    const wgroup *gu = &L->gu;
    /* gate and up stacked in one matrix: the fused matvec writes silu(gate) * up itself (no SwiGLU
     * launch), where v11 takes it */
    if ((fz & FZ_GU) && (fz & FZ_DOWN) && f->fuse != FUSE_ALL && f->glu && gu->n_m == 1 && gu->n_parts == 2 &&
        gu->part_off[1] == gu->part_rows[0] && gu->part_rows[0] == gu->part_rows[1] && gu->part_rows[0] == p->n_ff) {
        float *ff = p->ff + (int64_t)t0 * p->n_ff;
        const dweight *w = &gu->m[0];
        cudaError_t e = cu_matvec_f32_norm_glu(ff, w->w, w->type, x, L->ffn_norm, f->m->hp.rms_eps, w->rows, w->k, nt, p->st);
        if (e == cudaSuccess) return mm_acc(p, dn, ff, x, t0, nt, 1, 0, err, err_size);
        if (e != cudaErrorNotSupported) DEV_TRY(e);
    }
    if (fz ? group_mm_norm(p, &L->gu, x, L->ffn_norm, p->gu, t0, nt, fz & FZ_GU, err, err_size)
           : group_mm(p, &L->gu, xn, p->gu, t0, nt, err, err_size))
        return -1;
    group_view(&L->gu, p->gu, f->n_batch, 0, &pg, &sg);
    group_view(&L->gu, p->gu, f->n_batch, 1, &pu, &su);
    /* Unfused, SwiGLU stays apart: folding it into v6's input staging (cu_matvec_f32_swiglu) measured
     * slower in the decode step (kernel lab, PERF-LOG run 8); v10's fused layer folds it unless
     * MGI_FUSE=2. */
    if ((fz & FZ_DOWN) && f->fuse == FUSE_ALL) {
        DEV_TRY(cu_matvec_f32_swiglu_acc(x, dn->w, dn->type, pg + t0 * sg, sg, pu + t0 * su, su, dn->rows, dn->k, nt,
                                      p->st));
        return 0;
    }
    float *ff = p->ff + (int64_t)t0 * p->n_ff;
    if (!fz && mm_gemm(dn, nt)) { /* down's GEMM input in f16 from SwiGLU itself */
        DEV_TRY(paged_swiglu_f16(ff, p->xh, pg + t0 * sg, sg, pu + t0 * su, su, nt, p->n_ff, p->st));
        return mm_xn(p, dn, ff, 1, nt, t0, err, err_size);
    }
    DEV_TRY(paged_swiglu(ff, pg + t0 * sg, sg, pu + t0 * su, su, nt, p->n_ff, p->st));
    return fz ? mm_acc(p, dn, ff, x, t0, nt, fz & FZ_DOWN, 0, err, err_size) : mm(p, dn, ff, xn, nt, err, err_size);
}

/* The start of the part's first layer: embed (when the pass starts at layer 0 and the part holds
 * the table) and, with norm (the first layer is not fused), the attention norm; x already holds
 * the hidden state otherwise. */
static int part_enter(part *p, span s, int norm, char *err, size_t err_size) {
    const llama_model *m = p->f->m;
    const llama_hparams *hp = &m->hp;
    int E = hp->n_embd;
    float *x = p->x + (int64_t)s.t0 * E, *xn = p->xn + (int64_t)s.t0 * E;
    p->xh_ready = 0; /* xh and gemm_scratch hold nothing of this pass yet (an aborted pass may have */
    p->xn_parts = 1; /* left either behind) */
    if (p->embeds)
        DEV_TRY(cu_embed(x, p->tok_embd, m->tok_embd.type, p->d_meta + s.t0, s.nt, m->tok_embd.n_rows, E, p->st));
    if (norm) DEV_TRY(cu_rmsnorm(xn, x, p->layers[0].attn_norm, s.nt, E, hp->rms_eps, p->st));
    return 0;
}

/* Residual add of xn into x, then the norm `w` of the next block into xn (w NULL: add only). */
static int part_add(part *p, span s, const float *w, char *err, size_t err_size) {
    const llama_hparams *hp = &p->f->m->hp;
    int E = hp->n_embd;
    float *x = p->x + (int64_t)s.t0 * E, *xn = p->xn + (int64_t)s.t0 * E;
    /* a pass the GEMMs take (more than MM_MATVEC_N tokens): the norm's output in f16 too, the next
     * group_mm's input (those groups' matrices are all of E columns) */
    const int parts = p->xn_parts > 1 ? p->xn_parts : 1;
    const float *d = parts > 1 ? (const float *)p->gemm_scratch : xn;
    p->xn_parts = 1;
    p->xh_ready = w && s.nt > MM_MATVEC_N;
    if (p->xh_ready || parts > 1) /* w NULL (the last layer): the planes' add alone */
        DEV_TRY(paged_add_rmsnorm_sum(x, xn, p->xh_ready ? p->xh : NULL, d, parts, (int64_t)s.nt * E, w, s.nt, E,
                                      hp->rms_eps, p->st));
    else if (w) DEV_TRY(paged_add_rmsnorm(x, xn, xn, w, s.nt, E, hp->rms_eps, p->st));
    else DEV_TRY(cu_add(x, x, xn, (int64_t)s.nt * E, p->st));
    return 0;
}

/* Logits rows r0..r0+nr of the pass (tokens listed at d_meta's out section) into h_logits, or
 * when greedy only each row's argmax into h_ids (the head part). identity: every token is an
 * output row, in order (a decode step), so a fused head reads x in place. */
static int run_head(part *p, int n, int r0, int nr, int greedy, int identity, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    const llama_hparams *hp = &f->m->hp;
    const int32_t *d_out = p->d_meta + 4 * n;
    const dweight *o = &p->output;
    /* A step through the gate writes its outputs straight into the pinned buffers (mapped; UVA:
     * their host addresses are their device addresses): no copy at the step's end, whose fixed
     * cost would come between this step and the next. */
    const int direct = f->gate_pass && f->direct_out;
    float *logits = p->logits;
    if (fuse_on(f, nr) && p->head_fz[nr]) { /* the output norm inside the head's matvec */
        const float *x = p->x;
        if (!identity || r0 != 0 || nr != n) {
            DEV_TRY(paged_gather_rows(p->xn, p->x, d_out + r0, nr, hp->n_embd, p->st));
            x = p->xn;
        }
        if (direct && !greedy) logits = f->h_logits;
        DEV_TRY(cu_matvec_f32_norm(logits, o->w, o->type, x, p->output_norm, hp->rms_eps, o->rows, o->k, nr, p->st));
    } else {
        DEV_TRY(paged_gather_rows(p->xn, p->x, d_out + r0, nr, hp->n_embd, p->st));
        DEV_TRY(cu_rmsnorm(p->xn, p->xn, p->output_norm, nr, hp->n_embd, hp->rms_eps, p->st));
        if (mm(p, o, p->xn, p->logits, nr, err, err_size)) return -1;
    }
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

/* Segments. Layer split (and one part): one segment per part, all its layers. Row split: 2 per
 * layer plus one, cut where an all-reduce of xn adds up the parts' partial sums:
 *   0: enter + attention half of the first layer; 2i+1: add + FFN norm, FFN half of layer i;
 *   2i+2: add + attention norm and half of layer i+1, or for the last layer the final add.
 * With head >= 0 (0 logits, 1 greedy) the head part's last segment ends with the head of an
 * identity decode step (every token one output row). */
static int n_segments(const forward_cuda *f) {
    return f->split == ENGINE_SPLIT_ROW ? 2 * (f->l1 - f->l0) + 1 : 1;
}

static int run_segment(part *p, int seg, span s, int head, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    int last = seg == n_segments(f) - 1;
    if (f->split != ENGINE_SPLIT_ROW) {
        /* An unfused layer starts from xn = its attention norm of x, which its predecessor's
         * last add computes unless that one is fused (it leaves x whole and xn as scratch). */
        if (part_enter(p, s, !layer_fz(p, p->l0, s.nt), err, err_size)) return -1;
        for (int32_t l = p->l0; l < p->l1; l++) {
            const int fz = layer_fz(p, l, s.nt);
            if (fz) {
                if (attn_half(p, l, s, fz, err, err_size) || ffn_half(p, l, s, fz, err, err_size)) return -1;
                continue;
            }
            if (l > p->l0 && layer_fz(p, l - 1, s.nt)) {
                p->xh_ready = 0; /* xn rewritten without its f16 copy */
                DEV_TRY(cu_rmsnorm(p->xn + (int64_t)s.t0 * f->m->hp.n_embd, p->x + (int64_t)s.t0 * f->m->hp.n_embd,
                                p->layers[l - p->l0].attn_norm, s.nt, f->m->hp.n_embd, f->m->hp.rms_eps, p->st));
            }
            const int norm_next = l + 1 < p->l1 && !layer_fz(p, l + 1, s.nt);
            if (attn_half(p, l, s, 0, err, err_size) ||
                part_add(p, s, p->layers[l - p->l0].ffn_norm, err, err_size) ||
                ffn_half(p, l, s, 0, err, err_size) ||
                part_add(p, s, norm_next ? p->layers[l + 1 - p->l0].attn_norm : NULL, err, err_size))
                return -1;
        }
    } else if (seg == 0) {
        if (part_enter(p, s, 1, err, err_size) || attn_half(p, f->l0, s, 0, err, err_size)) return -1;
    } else {
        int32_t l = f->l0 + (seg - 1) / 2;
        if (seg % 2) {
            if (part_add(p, s, p->layers[l - p->l0].ffn_norm, err, err_size) || ffn_half(p, l, s, 0, err, err_size))
                return -1;
        } else if (l + 1 < f->l1) {
            if (part_add(p, s, p->layers[l + 1 - p->l0].attn_norm, err, err_size) ||
                attn_half(p, l + 1, s, 0, err, err_size))
                return -1;
        } else if (part_add(p, s, NULL, err, err_size)) {
            return -1;
        }
    }
    if (last && head >= 0 && p->head) return run_head(p, s.n, 0, s.n, head, 1, err, err_size);
    return 0;
}

/* A pass of n tokens whose all-reduces run over peer access (see forward_cuda.p2p). */
static int p2p_applies(const forward_cuda *f, int n) { return f->p2p && n <= f->p2p_max_tok; }

/* Part i's share of an all-reduce of xn over peer access (MGI_FAULT=nccl-peer-stall: the last
 * part never joins, so its peers time out as with NCCL). */
static int p2p_xn(part *p, int i, int n, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    if (f->fault_stall && i == f->n_part - 1) return 0;
    DEV_TRY(p2p_allreduce(p->xn, (int64_t)n * f->m->hp.n_embd, &f->p2pg, i, f->timeout_s, p->st));
    return 0;
}

/* Row split over peer access: the whole step of part p, its segments joined by its shares of the
 * all-reduces (every part's kernels wait for the others on the devices, not on the host). */
static int run_step_p2p(part *p, span s, int head, char *err, size_t err_size) {
    const int n_seg = n_segments(p->f), i = (int)(p - p->f->p);
    for (int seg = 0; seg < n_seg; seg++) {
        if (run_segment(p, seg, s, head, err, err_size)) return -1;
        if (seg + 1 < n_seg && p2p_xn(p, i, s.n, err, err_size)) return -1;
    }
    return 0;
}

/* The host gate at the head of a decode step (forward_cuda.gate): d_meta from h_meta once the
 * host opens it (UVA: the pinned, mapped buffers' host addresses are their device addresses). */
static int gate_launch(part *p, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    DEV_TRY(cu_host_gate(p->d_meta, f->h_meta, f->gate, (int)meta_words(f), p->st));
    return 0;
}

/* The gate's step may go: its metadata (words of h_meta) is written. A store after stores (x86
 * keeps their order, the release keeps the compiler's), so the device sees the words first. */
static void gate_open(forward_cuda *f, int words) {
    f->gate->words = words;
    __atomic_store_n((int32_t *)&f->gate->go, 1, __ATOMIC_RELEASE);
}

/* The first, eager run of a row-split step over peer access (before its graphs are captured):
 * segment by segment across the parts, each segment followed by every part's share of its
 * all-reduce, the order in which the NCCL path issues them. Issuing one part's whole step before
 * the next part's, as the replays do, can deadlock eagerly: a part's stream stops at its share of
 * the first all-reduce until every peer's share has run, its later launches pile up in the stream's
 * queue, and once that is full (a 70b step is ~750 launches a part) the host blocks in a launch
 * before it has issued any peer's share, until the all-reduce's timeout (seen on 70b q4_k_m over 2
 * virtual devices). A graph launch is one queue entry, so the replays may go part by part. */
static int run_step_p2p_eager(forward_cuda *f, span s, int head, char *err, size_t err_size) {
    const int n_seg = n_segments(f);
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        DEV_TRY(cudaSetDevice(p->dev));
        if (f->gate_pass && gate_launch(p, err, err_size)) return -1;
    }
    for (int seg = 0; seg < n_seg; seg++)
        for (int i = 0; i < f->n_part; i++) {
            part *p = &f->p[i];
            DEV_TRY(cudaSetDevice(p->dev));
            if (run_segment(p, seg, s, head, err, err_size)) return -1;
            if (seg + 1 < n_seg && p2p_xn(p, i, s.n, err, err_size)) return -1;
        }
    return 0;
}

/* Whether every part holds its whole-step graph (seg -1 of segment_graph) for n tokens. */
static int p2p_step_captured(const forward_cuda *f, int n, int greedy) {
    for (int i = 0; i < f->n_part; i++)
        if (!f->p[i].graphs[greedy][n] || !f->p[i].graphs[greedy][n][0]) return 0;
    return 1;
}

/* A segment of a decode step from its graph: captured on the shape's second use (the first runs
 * eagerly, so lazy kernel setup happens outside capture). seg -1: run_step_p2p's whole step, in
 * slot 0, only captured or replayed here: its eager run is run_step_p2p_eager's, all parts at
 * once (run_pass). */
static int segment_graph(part *p, int seg, span s, int greedy, int capture, int launch, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    cudaGraphExec_t **gs = &p->graphs[greedy][s.n];
    if (!*gs && !(*gs = calloc((size_t)n_segments(f), sizeof **gs))) {
        snprintf(err, err_size, "out of memory for decode graphs");
        return -1;
    }
    cudaGraphExec_t *ge = &(*gs)[seg < 0 ? 0 : seg];
    if (!*ge) {
        if (!capture) {
            if (seg < 0) { /* one part's whole step ahead of its peers' can deadlock (run_step_p2p_eager) */
                snprintf(err, err_size, "CUDA backend: a peer-access step asked to run eagerly one part at a time");
                return -1;
            }
            if (f->gate_pass && gate_launch(p, err, err_size)) return -1;
            return run_segment(p, seg, s, greedy, err, err_size);
        }
        cudaGraph_t g = NULL;
        DEV_TRY(cudaStreamBeginCapture(p->st, cudaStreamCaptureModeThreadLocal));
        int bad = (f->gate_pass && gate_launch(p, err, err_size)) ||
                  (seg < 0 ? run_step_p2p(p, s, greedy, err, err_size) : run_segment(p, seg, s, greedy, err, err_size));
        cudaError_t ec = cudaStreamEndCapture(p->st, &g);
        if (bad) {
            if (g) cudaGraphDestroy(g);
            return -1;
        }
        DEV_TRY(ec);
        cudaError_t ei = cudaGraphInstantiate(ge, g, 0);
        cudaGraphDestroy(g);
        DEV_TRY(ei);
        DEV_TRY(cudaGraphUpload(*ge, p->st));
    }
    if (launch) DEV_TRY(cudaGraphLaunch(*ge, p->st));
    return 0;
}

/* With statistics on, an event on the part's stream: the start (even count) or end of a span. */
static void mark(part *p, int nccl) {
    if (!p->f->prof || p->n_ev >= p->ev_cap) return;
    if (!(p->n_ev & 1)) p->ev_nccl[p->n_ev / 2] = (char)nccl;
    cudaEventRecord(p->ev[p->n_ev++], p->st);
}

/* After a pass with statistics: adds each part's span times to its sums. */
static void tally(forward_cuda *f) {
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        cudaSetDevice(p->dev);
        for (int e = 0; e + 1 < p->n_ev; e += 2) {
            float ms = 0;
            if (cudaEventElapsedTime(&ms, p->ev[e], p->ev[e + 1]) != cudaSuccess) continue;
            if (p->ev_nccl[e / 2]) p->nccl_ms += ms;
            else p->busy_ms += ms;
        }
        p->n_ev = 0;
    }
}

/* Seconds a multi-device pass may go without finishing: NCCL_TIMEOUT_S, or MGI_NCCL_TIMEOUT
 * (1-3600) for users whose steps are legitimately slower and for the fault test. */
static int nccl_timeout_s(void) {
    const char *e = getenv("MGI_NCCL_TIMEOUT");
    long v = e ? strtol(e, NULL, 10) : 0;
    return v >= 1 && v <= 3600 ? (int)v : NCCL_TIMEOUT_S;
}

/* A host thread blocked inside NCCL cannot be timed out by polling: NCCL makes its connections
 * on a pair of devices' first call, inside ncclGroupEnd, and waits there for a peer that may never
 * come (seen on an H200 pair: accept() under the first all-reduce). So every NCCL call is
 * bracketed by nccl_enter / nccl_leave, and a watchdog thread (one per process, started with the
 * first multi-device backend) ends the process with the error line and exit 3 (the CLI's runtime
 * failure) when one has not returned within the timeout. Calls come from one thread at a time. */
static struct {
    int64_t since_ns;   /* 0: no NCCL call in progress */
    int timeout_s, dev;
    const char *what;
    char dev_name[128];
} g_nccl;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void nccl_enter(forward_cuda *f, int part_i, const char *what) {
    part *p = &f->p[part_i];
    g_nccl.timeout_s = f->timeout_s;
    g_nccl.dev = p->dev;
    g_nccl.what = what;
    snprintf(g_nccl.dev_name, sizeof g_nccl.dev_name, "%s", p->dev_name);
    __atomic_store_n(&g_nccl.since_ns, mono_ns(), __ATOMIC_RELEASE);
}

static void nccl_leave(void) { __atomic_store_n(&g_nccl.since_ns, 0, __ATOMIC_RELEASE); }

static void *nccl_watchdog(void *arg) {
    (void)arg;
    for (;;) {
        usleep(100000);
        int64_t t = __atomic_load_n(&g_nccl.since_ns, __ATOMIC_ACQUIRE);
        if (t && mono_ns() - t > (int64_t)g_nccl.timeout_s * 1000000000) {
            fprintf(stderr, "mgi: device %d (%s): NCCL %s made no progress for %d s (a peer device stopped "
                    "answering)\n", g_nccl.dev, g_nccl.dev_name, g_nccl.what, g_nccl.timeout_s);
            fflush(stderr);
            _exit(3);
        }
    }
    return NULL;
}

static pthread_once_t g_nccl_once = PTHREAD_ONCE_INIT;
static void nccl_watchdog_spawn(void) {
    pthread_t t;
    if (!pthread_create(&t, NULL, nccl_watchdog, NULL)) pthread_detach(t);
}
static void nccl_watchdog_start(void) { pthread_once(&g_nccl_once, nccl_watchdog_spawn); }

/* MGI_FAULT=nccl-peer-stall (tests/gpu/cli.sh): the last device never joins the all-reduces and
 * the first sends of the hidden state are never made, as if that peer had died, so the timeout
 * path of wait_all is exercised for real. */
static int fault_peer_stall(void) {
    const char *e = getenv("MGI_FAULT");
    return e && !strcmp(e, "nccl-peer-stall");
}

/* MGI_FUSE: 0 the unfused nine-launch layer everywhere, 1 the whole fused layer (SwiGLU too, while
 * the down matvec stages X), anything else (2, the default) the fused layer with SwiGLU as its own
 * kernel: on an H200 that was the fastest (PERF-LOG run 26: 8b q4_0 tg128 518 vs 510 with 1 and
 * 504 unfused). For A/B runs on the device. */
static int fuse_mode(void) {
    const char *e = getenv("MGI_FUSE");
    if (e && !strcmp(e, "0")) return FUSE_OFF;
    if (e && !strcmp(e, "1")) return FUSE_ALL;
    return FUSE_NO_SWIGLU;
}

/* A fused layer's QKV matvecs rotate Q and K and store K and V themselves (cu_matvec_f32_norm_rope),
 * one launch fewer per decode layer: the default (PERF-LOG run 38, tg128 on an H200: 8b q4_0
 * 611.5 -> 616.2, q4_k_m 563.5 -> 565.6); MGI_ROPE_FOLD=0 keeps the separate paged_rope_store. */
static int rope_fold_mode(void) {
    const char *e = getenv("MGI_ROPE_FOLD");
    return !(e && !strcmp(e, "0"));
}

/* Decode steps' attention copies its first K/V sub-tiles before its PDL wait (paged.h's
 * kv_ready, passes of one token per sequence): the default; MGI_ATT_EARLY=0 waits first, for A/B
 * runs. */
static int att_early_mode(void) {
    const char *e = getenv("MGI_ATT_EARLY");
    return !(e && !strcmp(e, "0"));
}

/* MGI_PIPE_UB=N, for A/B runs: the layer split's micro-batches of N tokens (whole PIPE_MIN tiles),
 * instead of run_pass's rule (0). */
static int pipe_ub_mode(void) {
    const char *e = getenv("MGI_PIPE_UB");
    int v = e ? atoi(e) : 0;
    return v >= PIPE_MIN ? v / PIPE_MIN * PIPE_MIN : 0;
}

/* MGI_AHEAD, for A/B runs: 0 one-part decode steps take their metadata by a copy queued before
 * the launch (no gate), 1 through the host gate but never launched ahead, anything else (2, the
 * default) the gate and engine_decode_ahead's launches (forward_cuda.gate). */
static int ahead_mode(void) {
    const char *e = getenv("MGI_AHEAD");
    return e && !strcmp(e, "0") ? 0 : e && !strcmp(e, "1") ? 1 : 2;
}

/* allreduce_xn on one physical device (forward_cuda.local): part 0 waits for every part, sums
 * their xn in part order, every other part waits for the sum and copies it, and part 0 goes on
 * once they have, so all parts hold the same bits, as after NCCL's all-reduce. */
static int local_allreduce(forward_cuda *f, size_t count, char *err, size_t err_size) {
    part *r = &f->p[0];
    DEV_TRY(cudaSetDevice(r->dev));
    for (int i = 1; i < f->n_part; i++) {
        DEV_TRY(cudaEventRecord(f->p[i].ev_local, f->p[i].st));
        DEV_TRY(cudaStreamWaitEvent(r->st, f->p[i].ev_local, 0));
    }
    for (int i = 1; i < f->n_part; i++) DEV_TRY(cu_add(r->xn, r->xn, f->p[i].xn, (int64_t)count, r->st));
    DEV_TRY(cudaEventRecord(r->ev_local, r->st));
    for (int i = 1; i < f->n_part; i++) {
        DEV_TRY(cudaStreamWaitEvent(f->p[i].st, r->ev_local, 0));
        DEV_TRY(cudaMemcpyAsync(f->p[i].xn, r->xn, count * sizeof(float), cudaMemcpyDeviceToDevice, f->p[i].st));
        DEV_TRY(cudaEventRecord(f->p[i].ev_local, f->p[i].st));
    }
    /* part 0 overwrites its xn in its next layer: not before every part has its copy */
    for (int i = 1; i < f->n_part; i++) DEV_TRY(cudaStreamWaitEvent(r->st, f->p[i].ev_local, 0));
    return 0;
}

/* Every part's xn summed over the parts, in place (row split). */
static int allreduce_xn(forward_cuda *f, int n, char *err, size_t err_size) {
    size_t count = (size_t)n * (size_t)f->m->hp.n_embd;
    for (int i = 0; i < f->n_part; i++) mark(&f->p[i], 1);
    if (f->local) {
        if (local_allreduce(f, count, err, err_size)) return -1;
        for (int i = 0; i < f->n_part; i++) mark(&f->p[i], 1);
        return 0;
    }
    if (p2p_applies(f, n)) {
        for (int i = 0; i < f->n_part; i++) {
            DEV_TRY(cudaSetDevice(f->p[i].dev));
            if (p2p_xn(&f->p[i], i, n, err, err_size)) return -1;
            mark(&f->p[i], 1);
        }
        return 0;
    }
    NC_TRY(ncclGroupStart());
    for (int i = 0; i < f->n_part - f->fault_stall; i++) {
        part *p = &f->p[i];
        ncclResult_t r = ncclAllReduce(p->xn, p->xn, count, ncclFloat, ncclSum, p->comm, p->st);
        if (r != ncclSuccess) {
            ncclGroupEnd();
            snprintf(err, err_size, "NCCL all-reduce on device %d (%s): %s", p->dev, p->dev_name,
                     ncclGetErrorString(r));
            return -1;
        }
    }
    nccl_enter(f, 0, "all-reduce");
    ncclResult_t ge = ncclGroupEnd();
    nccl_leave();
    if (ge != ncclSuccess) {
        snprintf(err, err_size, "NCCL all-reduce on %d devices: %s", f->n_part, ncclGetErrorString(ge));
        return -1;
    }
    for (int i = 0; i < f->n_part; i++) mark(&f->p[i], 1);
    return 0;
}

/* x rows of span s from part i - 1 to part i (layer split). */
static int send_x(forward_cuda *f, int i, span s, char *err, size_t err_size) {
    size_t E = (size_t)f->m->hp.n_embd, off = (size_t)s.t0 * E, count = (size_t)s.nt * E;
    part *a = &f->p[i - 1], *b = &f->p[i];
    mark(a, 1);
    if (f->local) {
        /* a copy on b's receiving stream once a has written x; a's stream waits for the copy
         * before it overwrites x, as an NCCL send holds it */
        DEV_TRY(cudaSetDevice(a->dev));
        DEV_TRY(cudaEventRecord(a->ev_local, a->st));
        DEV_TRY(cudaStreamWaitEvent(b->st_rx, a->ev_local, 0));
        DEV_TRY(cudaMemcpyAsync(b->x + off, a->x + off, count * sizeof(float), cudaMemcpyDeviceToDevice, b->st_rx));
        DEV_TRY(cudaEventRecord(b->ev_rx, b->st_rx));
        DEV_TRY(cudaStreamWaitEvent(a->st, b->ev_rx, 0));
        DEV_TRY(cudaStreamWaitEvent(b->st, b->ev_rx, 0));
        mark(a, 1);
        return 0;
    }
    NC_TRY(ncclGroupStart());
    ncclResult_t r1 = f->fault_stall ? ncclSuccess : ncclSend(a->x + off, count, ncclFloat, i, a->comm, a->st);
    ncclResult_t r2 = ncclRecv(b->x + off, count, ncclFloat, i - 1, b->comm, b->st_rx);
    nccl_enter(f, i, "receive");
    ncclResult_t r3 = ncclGroupEnd();
    nccl_leave();
    if (r1 != ncclSuccess || r2 != ncclSuccess || r3 != ncclSuccess) {
        ncclResult_t r = r1 != ncclSuccess ? r1 : r2 != ncclSuccess ? r2 : r3;
        snprintf(err, err_size, "NCCL send from device %d to device %d: %s", a->dev, b->dev, ncclGetErrorString(r));
        return -1;
    }
    mark(a, 1);
    DEV_TRY(cudaSetDevice(b->dev));
    DEV_TRY(cudaEventRecord(b->ev_rx, b->st_rx));
    DEV_TRY(cudaStreamWaitEvent(b->st, b->ev_rx, 0));
    return 0;
}

/* The layers of a pass on every part. head >= 0: an identity decode step whose head is part of
 * the last segment (and which replays from graphs when graphs is set: 1 replay/capture, 0 the
 * first eager run of the shape). */
static int run_pass(forward_cuda *f, int n, int head, int graphs, int capture, char *err, size_t err_size) {
    int n_seg = n_segments(f);
    span all = {n, 0, n};
    if (f->split == ENGINE_SPLIT_ROW && graphs && p2p_applies(f, n)) {
        /* one graph per device for the whole step (its all-reduces inside) */
        if (!capture && !p2p_step_captured(f, n, head)) {
            for (int i = 0; i < f->n_part; i++) mark(&f->p[i], 0);
            if (run_step_p2p_eager(f, all, head, err, err_size)) return -1;
            for (int i = 0; i < f->n_part; i++) mark(&f->p[i], 0);
            return 0;
        }
        /* Every part's graph is captured, instantiated and uploaded before any is launched: a
         * launched graph waits at its first all-reduce for every peer's, and on virtual devices
         * (one GPU) the setup of a peer's large graph behind it stalled until the timeout (a
         * 160-layer model, not a 140-layer one). On several GPUs this also starts the parts'
         * graphs closer together. */
        if (capture)
            for (int i = 0; i < f->n_part; i++) {
                DEV_TRY(cudaSetDevice(f->p[i].dev));
                if (segment_graph(&f->p[i], -1, all, head, 1, 0, err, err_size)) return -1;
            }
        for (int i = 0; i < f->n_part; i++) {
            part *p = &f->p[i];
            DEV_TRY(cudaSetDevice(p->dev));
            mark(p, 0);
            if (segment_graph(p, -1, all, head, capture, 1, err, err_size)) return -1;
            mark(p, 0);
        }
        return 0;
    }
    if (f->split == ENGINE_SPLIT_ROW) {
        for (int seg = 0; seg < n_seg; seg++) {
            for (int i = 0; i < f->n_part; i++) {
                part *p = &f->p[i];
                DEV_TRY(cudaSetDevice(p->dev));
                mark(p, 0);
                int rc = graphs ? segment_graph(p, seg, all, head, capture, 1, err, err_size)
                                : run_segment(p, seg, all, head, err, err_size);
                if (rc) return -1;
                mark(p, 0);
            }
            if (seg + 1 < n_seg && allreduce_xn(f, n, err, err_size)) return -1;
        }
        return 0;
    }
    /* Layer split: micro-batches through the parts in turn; a part starts the next micro-batch
     * while the next part works on this one (their streams only meet at the send). */
    int ub = n;
    if (f->n_part > 1 && !graphs && n >= 2 * PIPE_MIN) {
        /* With k micro-batches over P parts a pass takes (k + P - 1) micro-batch stage times, so
         * more micro-batches mean a smaller bubble until the GEMMs get thin. 4 per part, in whole
         * 64-token GEMM tiles (a 96-token GEMM costs as much as a 128-token one: kernel lab,
         * PERF-LOG run 8): one H200's rates at 64, 128 and 512 tokens (v7 below the panel
         * threshold; PERF-LOG run 91) predict two GPUs at 1.62x one for 70b q4_k_m pp512 (64-token
         * micro-batches; 1.44x with 128) and 1.20x for 8b (1.25x with 128). */
        ub = (n + 4 * f->n_part - 1) / (4 * f->n_part);
        ub = (ub + PIPE_MIN - 1) / PIPE_MIN * PIPE_MIN;
        if (f->pipe_ub) ub = f->pipe_ub < n ? f->pipe_ub : n;
    }
    for (int t0 = 0; t0 < n; t0 += ub) {
        span s = {n, t0, n - t0 < ub ? n - t0 : ub};
        for (int i = 0; i < f->n_part; i++) {
            part *p = &f->p[i];
            if (i > 0 && send_x(f, i, s, err, err_size)) return -1;
            DEV_TRY(cudaSetDevice(p->dev));
            mark(p, 0);
            int rc = graphs ? segment_graph(p, 0, s, head, capture, 1, err, err_size)
                            : run_segment(p, 0, s, head, err, err_size);
            if (rc) return -1;
            mark(p, 0);
        }
    }
    return 0;
}

/* After a failure: the communicators aborted (NCCL stops its kernels and threads), the backend
 * marked broken so it refuses further work and its teardown skips waiting on the devices. */
static void abort_comms(forward_cuda *f) {
    f->broken = 1;
    if (!f->have_comms) return;
    nccl_enter(f, f->n_part - 1, "abort");
    for (int i = 0; i < f->n_part; i++) ncclCommAbort(f->p[i].comm);
    nccl_leave();
    f->have_comms = 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for every part's stream. With several parts, polls so that an NCCL error reported
 * asynchronously, or a peer that never answers (NCCL_TIMEOUT_S), ends the wait with a message
 * instead of a hang; the communicators are then aborted and the backend refuses further work. */
static int wait_all(forward_cuda *f, char *err, size_t err_size) {
    if (f->n_part == 1) {
        DEV_TRY(cudaSetDevice(f->p[0].dev));
        DEV_TRY(cudaStreamSynchronize(f->p[0].st));
        return 0;
    }
    double t_end = now_s() + f->timeout_s;
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        DEV_TRY(cudaSetDevice(p->dev));
        for (unsigned spin = 0;; spin++) {
            cudaError_t q = cudaStreamQuery(p->st);
            if (q == cudaSuccess) break;
            if (q != cudaErrorNotReady) {
                snprintf(err, err_size, "device %d (%s): %s", p->dev, p->dev_name, cudaGetErrorString(q));
                abort_comms(f);
                return -1;
            }
            if (spin % 1024) continue;
            for (int j = 0; f->have_comms && j < f->n_part; j++) {
                ncclResult_t ae = ncclSuccess;
                if (ncclCommGetAsyncError(f->p[j].comm, &ae) != ncclSuccess || ae != ncclSuccess) {
                    snprintf(err, err_size, "NCCL failed on device %d (%s): %s", f->p[j].dev, f->p[j].dev_name,
                             ncclGetErrorString(ae));
                    abort_comms(f);
                    return -1;
                }
            }
            if (now_s() > t_end) {
                snprintf(err, err_size, "device %d (%s): no progress for %d s (a peer device stopped answering)",
                         p->dev, p->dev_name, f->timeout_s);
                abort_comms(f);
                return -1;
            }
        }
    }
    /* a peer-access all-reduce that gave up on its peers (its kernel ended; the sums are wrong) */
    for (int i = 0; f->p2p && i < f->n_part; i++)
        if (f->p2p_report[i]) {
            snprintf(err, err_size, "device %d (%s): no progress for %d s in an all-reduce (a peer device stopped "
                     "answering)", f->p[i].dev, f->p[i].dev_name, f->timeout_s);
            abort_comms(f);
            return -1;
        }
    return 0;
}

/* MGI_TRACE=FILE[:N]: replays N and N + 1 (default 20, 21) of the one-part decode graph of a token
 * count run with kernels_trace on, and their block records are written to FILE as text, one line
 * per block: kind tag block smid grid, then %globaltimer (ns) at marks 0-5, then clock64 at marks
 * 0-5 (kernels/trace.cuh says what each kind's marks are; 0 where a kernel has none). Two steps,
 * so that the time between them shows too. A lab diagnostic: the steps' results are as untraced. */
static void trace_mode(forward_cuda *f) {
    const char *e = getenv("MGI_TRACE");
    const char *c = e ? strrchr(e, ':') : NULL;
    const int has_n = c && c[1] >= '0' && c[1] <= '9';
    f->trace_step = has_n ? atoi(c + 1) : 20;
    size_t len = !e ? 0 : has_n ? (size_t)(c - e) : strlen(e);
    if (len >= sizeof f->trace_path) len = sizeof f->trace_path - 1;
    snprintf(f->trace_path, sizeof f->trace_path, "%.*s", (int)len, e ? e : "");
}

#define TRACE_BYTES ((size_t)64 << 20)
#define TRACE_STEPS 2

/* Before replay `seen` of a decode graph: the trace switched on at the first traced one. */
static int trace_begin(forward_cuda *f, int seen, char *err, size_t err_size) {
    part *p = &f->p[0];
    if (!f->trace_path[0] || f->n_part != 1 || seen != f->trace_step || f->trace_buf) return 0;
    DEV_TRY(cudaSetDevice(p->dev));
    DEV_TRY(cudaMalloc(&f->trace_buf, TRACE_BYTES));
    DEV_TRY(cudaMemsetAsync(f->trace_buf, 0, TRACE_BYTES, p->st));
    DEV_TRY(kernels_trace(f->trace_buf, TRACE_BYTES, p->st));
    return 0;
}

/* After replay `seen` (its work finished): at the last traced one, the records out to the file. */
static int trace_end(forward_cuda *f, int seen, int n, char *err, size_t err_size) {
    part *p = &f->p[0];
    if (!f->trace_buf || seen != f->trace_step + TRACE_STEPS - 1) return 0;
    DEV_TRY(kernels_trace(NULL, 0, p->st));
    const char *path = f->trace_path;
    kernels_trace_rec *h = malloc(TRACE_BYTES);
    FILE *o = NULL;
    int rc = -1;
    if (!h) snprintf(err, err_size, "MGI_TRACE: out of host memory");
    else if (cudaMemcpy(h, f->trace_buf, TRACE_BYTES, cudaMemcpyDeviceToHost) != cudaSuccess)
        snprintf(err, err_size, "MGI_TRACE: reading the records back failed");
    else if (!(o = fopen(path, "w")))
        snprintf(err, err_size, "MGI_TRACE: cannot write %s", path);
    else {
        for (size_t i = 0; i < TRACE_BYTES / sizeof *h; i++) {
            if (!h[i].kind) continue;
            fprintf(o, "%u %llx %u %u %u", h[i].kind, (unsigned long long)h[i].tag, h[i].block, h[i].smid, h[i].grid);
            const size_t marks = sizeof h[i].g / sizeof h[i].g[0];
            for (size_t j = 0; j < marks; j++) fprintf(o, " %llu", (unsigned long long)h[i].g[j]);
            for (size_t j = 0; j < marks; j++) fprintf(o, " %llu", (unsigned long long)h[i].c[j]);
            fputc('\n', o);
        }
        rc = fclose(o) ? -1 : 0;
        if (rc) snprintf(err, err_size, "MGI_TRACE: writing %s failed", path);
        else fprintf(stderr, "mgi: MGI_TRACE: the block timeline of %d %d-token decode steps in %s\n", TRACE_STEPS, n,
                     path);
    }
    free(h);
    cudaFree(f->trace_buf);
    f->trace_buf = NULL;
    f->trace_path[0] = 0; /* once */
    return rc;
}

/* A one-part decode step through the gate: the step launched ahead if there is one (it only
 * needed its metadata), else launched now, already open; then, with `ahead`, the next one-token
 * step launched behind it; then the wait for this step's end (its outputs are in the pinned
 * buffers: fwd_pass copies them as after any decode graph). */
static int gate_step(forward_cuda *f, int n, int greedy, int seen, int words, char *err, size_t err_size) {
    part *p = &f->p[0];
    int end;
    DEV_TRY(cudaSetDevice(p->dev));
    if (f->armed) {
        f->armed = 0;
        end = f->armed_ev;
        gate_open(f, words);
    } else {
        if (trace_begin(f, seen, err, err_size)) return -1;
        gate_open(f, words); /* before the launch: its gate passes at once */
        f->gate_pass = 1;
        int rc = run_pass(f, n, greedy, 1, seen > 0, err, err_size);
        f->gate_pass = 0;
        if (rc) {
            /* a gate that was launched took the opening; one that was not must not find it */
            cudaStreamSynchronize(p->st);
            f->gate->go = 0;
            return -1;
        }
        end = f->ev_next;
        f->ev_next ^= 1;
        DEV_TRY(cudaEventRecord(f->step_ev[end], p->st));
    }
    cudaGraphExec_t *g = p->graphs[greedy][1];
    if (f->ahead && n == 1 && g && g[0] && !f->trace_path[0]) {
        DEV_TRY(cudaGraphLaunch(g[0], p->st));
        f->armed = 1;
        f->armed_greedy = greedy;
        f->armed_ev = f->ev_next;
        f->ev_next ^= 1;
        DEV_TRY(cudaEventRecord(f->step_ev[f->armed_ev], p->st));
    }
    DEV_TRY(cudaEventSynchronize(f->step_ev[end]));
    return trace_end(f, seen, n, err, err_size);
}

/* Runs a step launched ahead and not wanted on a placeholder: token 0 at position 0 of sequence 0,
 * whose one page is the trash page past the callers' cells (kv_cells), so it writes and reads no
 * cell of theirs. Its outputs land in the pinned buffers, which may still hold the caller's last
 * results (out_buffer): those are put back. Before any other use of the part's stream, which
 * would otherwise queue behind a gate never opened. */
static int ahead_cancel(forward_cuda *f, char *err, size_t err_size) {
    if (!f->armed) return 0;
    const size_t row = (size_t)f->m->hp.n_vocab * sizeof(float);
    const int32_t id[2] = {f->h_ids[0], f->h_ids[1]};
    f->armed = 0;
    if (!f->armed_greedy) memcpy(f->h_keep, f->h_logits, row);
    int32_t *h = f->h_meta; /* one token: token, position, sequence, cell, output row, then the page table */
    h[0] = 0;
    h[1] = 0;
    h[2] = 0;
    h[3] = f->n_cells;
    h[4] = 0;
    h[5] = f->n_cells / ENGINE_KV_PAGE;
    gate_open(f, 6);
    DEV_TRY(cudaSetDevice(f->p[0].dev));
    DEV_TRY(cudaEventSynchronize(f->step_ev[f->armed_ev]));
    if (!f->armed_greedy) memcpy(f->h_logits, f->h_keep, row);
    else memcpy(f->h_ids, id, sizeof id);
    return 0;
}

/* forward (logits) or forward_greedy (ids set): the pass, then the output rows in chunks. */
static int fwd_pass(void *self, const engine_fwd_batch *b, float *logits, int32_t *ids, char *err,
                   size_t err_size) {
    forward_cuda *f = self;
    const llama_hparams *hp = &f->m->hp;
    int n = b->n_tokens, n_vocab = hp->n_vocab;
    if (f->broken) {
        snprintf(err, err_size, "CUDA backend: an earlier device failure ended the multi-GPU run");
        return -1;
    }
    if (n < 1 || n > f->n_batch || b->max_pos > f->max_pos || b->n_seqs < 1 || b->n_seqs > n ||
        b->n_seqs > f->max_seqs || b->n_out > n) {
        snprintf(err, err_size, "CUDA forward: %d tokens (at most %d) of %d sequences (at most %d) reaching "
                 "position %d (at most %d)", n, f->n_batch, b->n_seqs, f->max_seqs, b->max_pos, f->max_pos);
        return -1;
    }
    if ((f->l0 > 0) != (b->x_in != NULL) || (f->l1 < hp->n_layer) != (b->x_out != NULL)) {
        snprintf(err, err_size, "CUDA forward: layers %d..%d of %d need x_in %s and x_out %s", f->l0, f->l1 - 1,
                 hp->n_layer, f->l0 > 0 ? "set" : "NULL", f->l1 < hp->n_layer ? "set" : "NULL");
        return -1;
    }
    const int greedy = ids != NULL;
    if (b->n_skip < 0 || b->n_skip > ARGMAX_MAX_SKIP) {
        snprintf(err, err_size, "CUDA forward: %d ids to skip in greedy picks, at most %d", b->n_skip, ARGMAX_MAX_SKIP);
        return -1;
    }
    /* the same list on every pass, so the decode graphs' argmax (captured with it) stays right */
    f->skip.n = b->n_skip;
    for (int i = 0; i < b->n_skip; i++) f->skip.id[i] = b->skip[i];
    /* A step launched ahead (forward_cuda.gate) is this pass only if this is a one-token decode
     * step of sequence 0 wanting the same output (identity below); anything else first cancels it,
     * before h_meta is rewritten. */
    if (f->armed && !(n == 1 && b->n_seqs == 1 && b->seq[0] == 0 && b->n_out == 1 && b->out_row[0] == 0 && !b->x_in &&
                      !b->x_out && greedy == f->armed_greedy) &&
        ahead_cancel(f, err, err_size))
        return -1;
    int32_t *h = f->h_meta;
    /* one token per sequence (distinct sequence indices): a decode step, whose attention reads the
     * cells of earlier passes before its PDL wait (paged.h's kv_ready); identity passes replay from
     * graphs, captured with that flag, so they need it too */
    uint64_t seen_few[1] = {0}, *seen = n <= 64 ? seen_few : calloc(((size_t)n + 63) / 64, sizeof(uint64_t));
    f->one_per_seq = b->n_seqs == n && seen; /* without memory for the check: as if not */
    for (int i = 0; i < n && f->one_per_seq; i++) {
        int sq = b->seq[i];
        if (sq < 0 || sq >= n || (seen[sq / 64] >> (sq % 64) & 1)) f->one_per_seq = 0;
        else seen[sq / 64] |= 1ull << (sq % 64);
    }
    if (seen != seen_few) free(seen);
    int n_out = 0, identity = f->one_per_seq && b->n_out == n && !b->x_out;
    /* One sequence's run of positions (a prompt pass): the tensor-core attention; never in a
     * graph (identity passes have one token per sequence, below PREFILL_MIN). */
    f->pf_pos0 = b->n_seqs == 1 && n >= PREFILL_MIN &&
                 paged_attention_prefill_supported(f->p[0].n_head, f->p[0].n_head_kv, hp->head_dim) ? b->pos[0] : -1;
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
    int32_t *hp_pages = h + 5 * n, need = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        need = (b->seqs[s].n_pos + ENGINE_KV_PAGE - 1) / ENGINE_KV_PAGE;
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
    /* up to the last sequence's last page: the rest of its table is never read */
    size_t words = 5 * (size_t)n + (size_t)(b->n_seqs - 1) * (size_t)f->max_pages + (size_t)need;
    size_t xb = (size_t)n * (size_t)hp->n_embd * sizeof(float);
    /* a one-part decode step from its graph: the metadata through the gate, not a copy */
    const int gate = identity && n <= GRAPH_MAX_TOK && f->n_part == 1 && !b->x_in && f->ahead_mode;
    for (int i = 0; i < f->n_part && !gate; i++) {
        part *p = &f->p[i];
        DEV_TRY(cudaSetDevice(p->dev));
        DEV_TRY(cudaMemcpyAsync(p->d_meta, h, words * sizeof(int32_t), cudaMemcpyHostToDevice, p->st));
        /* The hidden state from an earlier stage (the CPU's layers) enters the first part, or
         * every part in row mode. */
        if (b->x_in && (i == 0 || f->split == ENGINE_SPLIT_ROW))
            DEV_TRY(cudaMemcpyAsync(p->x, b->x_in, xb, cudaMemcpyHostToDevice, p->st));
    }

    part *hpart = &f->p[f->main];
    if (identity && n <= GRAPH_MAX_TOK) {
        int seen = f->graph_seen[greedy][n]++;
        if (gate ? gate_step(f, n, greedy, seen, (int)words, err, err_size)
                 : trace_begin(f, seen, err, err_size) || run_pass(f, n, greedy, 1, seen > 0, err, err_size) ||
                       wait_all(f, err, err_size) || trace_end(f, seen, n, err, err_size))
            return -1;
        if (greedy) memcpy(ids, f->h_ids, (size_t)2 * n * sizeof(int32_t));
        else if (logits != f->h_logits) memcpy(logits, f->h_logits, (size_t)n * (size_t)n_vocab * sizeof(float));
        return 0;
    }
    if (run_pass(f, n, -1, 0, 0, err, err_size)) return -1;
    if (b->x_out) {
        part *last = f->split == ENGINE_SPLIT_ROW ? hpart : &f->p[f->n_part - 1];
        DEV_TRY(cudaSetDevice(last->dev));
        DEV_TRY(cudaMemcpyAsync(b->x_out, last->x, xb, cudaMemcpyDeviceToHost, last->st));
        return wait_all(f, err, err_size);
    }
    DEV_TRY(cudaSetDevice(hpart->dev));
    if (logits == f->h_logits && n_out > OUT_CHUNK) {
        snprintf(err, err_size, "CUDA forward: %d rows of logits into the backend's buffer of %d", n_out, OUT_CHUNK);
        return -1;
    }
    for (int r0 = 0; r0 < n_out; r0 += OUT_CHUNK) {
        int nr = n_out - r0 < OUT_CHUNK ? n_out - r0 : OUT_CHUNK;
        if (run_head(hpart, n, r0, nr, greedy, 0, err, err_size) || wait_all(f, err, err_size)) return -1;
        if (greedy) memcpy(ids + 2 * r0, f->h_ids, (size_t)2 * nr * sizeof(int32_t));
        else if (logits != f->h_logits)
            memcpy(logits + (size_t)r0 * n_vocab, f->h_logits, (size_t)nr * (size_t)n_vocab * sizeof(float));
    }
    if (!n_out) return wait_all(f, err, err_size);
    return 0;
}

static int fwd_out(void *self, const engine_fwd_batch *b, float *logits, int32_t *ids, char *err,
                   size_t err_size) {
    forward_cuda *f = self;
    double t0 = f->prof ? now_s() : 0;
    int rc = fwd_pass(self, b, logits, ids, err, err_size);
    if (f->prof) {
        if (!rc) f->prof_wall_ms += 1e3 * (now_s() - t0);
        tally(f);
    }
    return rc;
}

static int fwd(void *self, const engine_fwd_batch *b, float *logits, char *err, size_t err_size) {
    return fwd_out(self, b, logits, NULL, err, err_size);
}

static int fwd_greedy(void *self, const engine_fwd_batch *b, int32_t *ids, char *err, size_t err_size) {
    return fwd_out(self, b, NULL, ids, err, err_size);
}

/* --- KV cells --------------------------------------------------------------------------------- */

static int kv_bad(const forward_cuda *f, int32_t layer, int32_t cell, int32_t n, char *err, size_t err_size) {
    if (layer < f->l0 || layer >= f->l1 || cell < 0 || n < 0 || cell > f->n_cells - n) {
        snprintf(err, err_size, "CUDA KV: layer %d, cells %d..+%d outside layers %d..%d x %d cells", layer, cell, n,
                 f->l0, f->l1 - 1, f->n_cells);
        return 1;
    }
    return 0;
}

static int kv_copy(void *self, int32_t dst, int32_t src, int32_t n, char *err, size_t err_size) {
    forward_cuda *f = self;
    if (kv_bad(f, f->l0, dst, n, err, err_size) || kv_bad(f, f->l0, src, n, err, err_size) ||
        ahead_cancel(f, err, err_size))
        return -1;
    if (n == 0) return 0;
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        DEV_TRY(cudaSetDevice(p->dev));
        size_t row = (size_t)p->kv_dim * sizeof(uint16_t), pitch = (size_t)f->kv_cells * row;
        size_t height = (size_t)(p->l1 - p->l0);
        DEV_TRY(cudaMemcpy2DAsync(p->kv_k + (size_t)dst * p->kv_dim, pitch, p->kv_k + (size_t)src * p->kv_dim, pitch,
                                  (size_t)n * row, height, cudaMemcpyDeviceToDevice, p->st));
        DEV_TRY(cudaMemcpy2DAsync(p->kv_v + (size_t)dst * p->kv_dim, pitch, p->kv_v + (size_t)src * p->kv_dim, pitch,
                                  (size_t)n * row, height, cudaMemcpyDeviceToDevice, p->st));
    }
    return 0;
}

/* Moves the part's rows of the listed cells between layer `layer` of its cache and h_kv
 * ([2][c][kv_dim]: K then V), a block of up to ATT_CHUNK cells, one copy per run of consecutive
 * cells. */
static int kv_move(part *p, int32_t layer, const int32_t *cells, int32_t c, int to_host, char *err,
                   size_t err_size) {
    size_t row = (size_t)p->kv_dim, base = (size_t)(layer - p->l0) * (size_t)p->f->kv_cells * row;
    enum cudaMemcpyKind kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    for (int32_t i = 0; i < c;) {
        int32_t j = i + 1;
        while (j < c && cells[j] == cells[j - 1] + 1) j++;
        size_t bytes = (size_t)(j - i) * row * sizeof(uint16_t);
        uint16_t *hk = p->h_kv + (size_t)i * row, *hv = p->h_kv + ((size_t)ATT_CHUNK + i) * row;
        uint16_t *dk = p->kv_k + base + (size_t)cells[i] * row, *dv = p->kv_v + base + (size_t)cells[i] * row;
        DEV_TRY(cudaMemcpyAsync(to_host ? (void *)hk : dk, to_host ? (void *)dk : hk, bytes, kind, p->st));
        DEV_TRY(cudaMemcpyAsync(to_host ? (void *)hv : dv, to_host ? (void *)dv : hv, bytes, kind, p->st));
        i = j;
    }
    DEV_TRY(cudaStreamSynchronize(p->st));
    return 0;
}

/* Reads (k, v set) or writes (ck, cv set) whole rows of kv_dim values; each part holding the
 * layer moves its columns [kvh0 * head_dim, kvh1 * head_dim). */
static int kv_io(forward_cuda *f, int32_t layer, const int32_t *cells, int32_t n, float *k, float *v,
                 const float *ck, const float *cv, char *err, size_t err_size) {
    for (int32_t i = 0; i < n; i++)
        if (kv_bad(f, layer, cells[i], 1, err, err_size)) return -1;
    if (ahead_cancel(f, err, err_size)) return -1;
    size_t full = (size_t)f->m->hp.n_head_kv * (size_t)f->m->hp.head_dim;
    for (int pi = 0; pi < f->n_part; pi++) {
        part *p = &f->p[pi];
        if (layer < p->l0 || layer >= p->l1) continue;
        DEV_TRY(cudaSetDevice(p->dev));
        size_t row = (size_t)p->kv_dim, col = (size_t)p->kvh0 * (size_t)f->m->hp.head_dim;
        for (int32_t i0 = 0; i0 < n; i0 += ATT_CHUNK) {
            int32_t c = n - i0 < ATT_CHUNK ? n - i0 : ATT_CHUNK;
            uint16_t *hk = p->h_kv, *hv = p->h_kv + (size_t)ATT_CHUNK * row;
            if (ck) {
                for (int32_t t = 0; t < c; t++)
                    for (size_t e = 0; e < row; e++) {
                        hk[t * row + e] = quant_f32_to_f16(ck[(i0 + t) * full + col + e]);
                        hv[t * row + e] = quant_f32_to_f16(cv[(i0 + t) * full + col + e]);
                    }
                if (kv_move(p, layer, cells + i0, c, 0, err, err_size)) return -1;
            } else {
                if (kv_move(p, layer, cells + i0, c, 1, err, err_size)) return -1;
                for (int32_t t = 0; t < c; t++)
                    for (size_t e = 0; e < row; e++) {
                        k[(i0 + t) * full + col + e] = quant_f16_to_f32(hk[t * row + e]);
                        v[(i0 + t) * full + col + e] = quant_f16_to_f32(hv[t * row + e]);
                    }
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

/* Whether the fused matvecs take w for n tokens (kernels.h: cu_matvec_fused_supported). */
static int fused_ok(const dweight *w, int n) {
    return !w->plain && cu_matvec_fused_supported(w->type, w->rows, w->k, n);
}

/* The fusion plan of a part, on its device after load (the fused matvecs depend on its shared
 * memory): per layer and token count which products take a fused matvec, and whether the layer
 * runs fused. All fused, a layer is 3 launches fewer than unfused (with SwiGLU apart, 2 fewer);
 * each product that falls back costs one back (the norm or the add on its own; down with SwiGLU
 * folded two), so the layer runs fused while that leaves it no longer than the unfused one (as
 * long: no norm launch between it and fused neighbours). A model no fused matvec takes keeps the
 * unfused layers. */
static void plan_fusions(part *p) {
    forward_cuda *f = p->f;
    for (int n = 1; n <= FUSE_MAX_N; n++) {
        p->head_fz[n] = f->fuse != FUSE_OFF && p->head && fused_ok(&p->output, n);
        for (int32_t l = 0; l < p->l1 - p->l0; l++) {
            dlayer *L = &p->layers[l];
            int qkv = 1, gu = 1;
            for (int i = 0; i < L->qkv.n_m; i++) qkv &= fused_ok(&L->qkv.m[i], n);
            for (int i = 0; i < L->gu.n_m; i++) gu &= fused_ok(&L->gu.m[i], n);
            int wo = fused_ok(&L->wo, n), down = fused_ok(&L->down, n);
            int all = f->fuse == FUSE_ALL, extra = !qkv + !wo + !gu + (all ? 2 : 1) * !down;
            L->fz[n] = (uint8_t)((qkv ? FZ_QKV : 0) | (wo ? FZ_WO : 0) | (gu ? FZ_GU : 0) | (down ? FZ_DOWN : 0) |
                                 (f->fuse != FUSE_OFF && extra <= (all ? 3 : 2) ? FZ_LAYER : 0));
        }
    }
}

/* --- creation ------------------------------------------------------------------------------------ */

static void part_free(part *p) {
    if (!p->f) return;
    cudaSetDevice(p->dev);
    if (p->st) cudaStreamSynchronize(p->st);
    for (int g = 0; g < 2; g++)
        for (int i = 0; i <= GRAPH_MAX_TOK; i++) {
            if (!p->graphs[g][i]) continue;
            for (int s = 0; s < n_segments(p->f); s++)
                if (p->graphs[g][i][s]) cudaGraphExecDestroy(p->graphs[g][i][s]);
            free(p->graphs[g][i]);
        }
    cudaFree(p->block);
    cudaFree(p->p2p_mem);
    cudaFreeHost(p->h_kv);
    for (int e = 0; p->ev && e < p->ev_cap; e++)
        if (p->ev[e]) cudaEventDestroy(p->ev[e]);
    free(p->ev);
    free(p->ev_nccl);
    if (p->ev_rx) cudaEventDestroy(p->ev_rx);
    if (p->ev_local) cudaEventDestroy(p->ev_local);
    if (p->st_rx) cudaStreamDestroy(p->st_rx);
    if (p->st) cudaStreamDestroy(p->st);
    free(p->layers);
    free(p->ws);
}

static void cuda_free(void *self) {
    forward_cuda *f = self;
    if (!f) return;
    /* After a device or peer failure, work may never finish: the memory is left to the process's
     * end rather than waited for. */
    if (f->broken) {
        free(f);
        return;
    }
    char err[256];
    if (ahead_cancel(f, err, sizeof err)) fprintf(stderr, "mgi: CUDA backend teardown: %s\n", err);
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        if (p->f && p->st) {
            cudaSetDevice(p->dev);
            cudaStreamSynchronize(p->st);
        }
    }
    if (f->trace_buf) { /* a trace cut short by a failure */
        cudaSetDevice(f->p[0].dev);
        kernels_trace(NULL, 0, f->p[0].st);
        cudaStreamSynchronize(f->p[0].st);
        cudaFree(f->trace_buf);
    }
    if (f->have_comms)
        for (int i = 0; i < f->n_part; i++) ncclCommDestroy(f->p[i].comm);
    for (int i = 0; i < f->n_part; i++) part_free(&f->p[i]);
    cudaFreeHost(f->h_meta);
    cudaFreeHost((void *)f->gate);
    for (int i = 0; i < 2; i++)
        if (f->step_ev[i]) cudaEventDestroy(f->step_ev[i]);
    free(f->h_keep);
    cudaFreeHost((void *)f->p2p_report);
    cudaFreeHost(f->h_logits);
    cudaFreeHost(f->h_ids);
    free(f);
}

static double gib(size_t b) { return (double)b / (double)(1ull << 30); }

/* What part p holds, from the plan: its weights' slices. */
static int part_plan(part *p, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    const llama_model *m = f->m;
    const llama_hparams *hp = &m->hp;
    int64_t hd = hp->head_dim, E = hp->n_embd;
    if (p->head) {
        wslice out = whole(&m->output);
        if (weight_plan(&p->output, &out, 1, err, err_size)) return -1;
    }
    for (int32_t l = p->l0; l < p->l1; l++) {
        const llama_layer *S = &m->layers[l];
        dlayer *L = &p->layers[l - p->l0];
        wslice qkv[3] = {{&S->wq, p->qh0 * hd, p->qh1 * hd, 0, E}, {&S->wk, p->kvh0 * hd, p->kvh1 * hd, 0, E},
                         {&S->wv, p->kvh0 * hd, p->kvh1 * hd, 0, E}};
        wslice gu[2] = {{&S->w_gate, p->ff0, p->ff1, 0, E}, {&S->w_up, p->ff0, p->ff1, 0, E}};
        wslice wo = {&S->wo, 0, E, p->qh0 * hd, p->qh1 * hd}, down = {&S->w_down, 0, E, p->ff0, p->ff1};
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
                 "some on the CPU, or a smaller -c or -b", p->dev, p->dev_name, gib(total + tmp_bytes),
                 gib(p->w_bytes), gib(p->kv_bytes), gib(p->scratch_bytes), gib(free_b));
        return -1;
    }
    uint8_t *tmp = NULL;
    cudaError_t e1 = cudaMalloc((void **)&p->block, total), e2 = cudaMalloc((void **)&tmp, tmp_bytes ? tmp_bytes : 1);
    if (e1 != cudaSuccess || e2 != cudaSuccess) {
        cudaFree(tmp);
        snprintf(err, err_size, "device %d (%s): cudaMalloc of %.1f GiB failed (%s); try -ts, -ngl, or a smaller "
                 "-c or -b", p->dev, p->dev_name, gib(total + tmp_bytes),
                 cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
        return -1;
    }
    a = (arena){.base = p->block};
    layout_weights(p, &a);
    layout_kv(p, &a);
    layout_scratch(p, &a);
    DEV_TRY(cudaHostAlloc((void **)&p->h_kv, 2 * (size_t)ATT_CHUNK * (size_t)p->kv_dim * sizeof(uint16_t),
                          cudaHostAllocDefault));
    size_t nb = (size_t)hp->n_embd * sizeof(float);
    if (p->head) DEV_TRY(cudaMemcpy(p->output_norm, m->output_norm, nb, cudaMemcpyHostToDevice));
    for (int32_t l = p->l0; l < p->l1; l++) {
        DEV_TRY(cudaMemcpy(p->layers[l - p->l0].attn_norm, m->layers[l].attn_norm, nb, cudaMemcpyHostToDevice));
        DEV_TRY(cudaMemcpy(p->layers[l - p->l0].ffn_norm, m->layers[l].ffn_norm, nb, cudaMemcpyHostToDevice));
    }
    int rc = upload_weights(p, tmp, ps, err, err_size);
    cudaFree(tmp);
    if (rc) return -1;
    /* Cells never written read as zeros, not NaN, should a caller look at them. */
    size_t kv_each = (size_t)(p->l1 - p->l0) * (size_t)f->kv_cells * (size_t)p->kv_dim * sizeof(uint16_t);
    DEV_TRY(cudaMemsetAsync(p->kv_k, 0, kv_each, p->st));
    DEV_TRY(cudaMemsetAsync(p->kv_v, 0, kv_each, p->st));
    /* paged_attention's arrival counters live in its scratch and start at zero (paged.h). */
    DEV_TRY(cudaMemsetAsync(p->att_scratch, 0, p->att_scratch_bytes, p->st));
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
static int setup_parts(forward_cuda *f, engine_progress_fn progress, void *pctx, char *err, size_t err_size) {
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

/* The row split's all-reduce over peer access (forward_cuda.p2p), with MGI_P2P=1 and peer access
 * between every pair of devices; otherwise NCCL does every all-reduce. Opt-in until it has run on
 * two GPUs (it was written without a two-GPU machine: tests/gpu/test_p2p.c and
 * test_split with MGI_P2P=1 are its first checks). */
static int setup_p2p(forward_cuda *f, char *err, size_t err_size) {
    const char *e = getenv("MGI_P2P");
    if (!e || strcmp(e, "1")) return 0;
    int devs[ENGINE_MAX_DEVICES];
    for (int i = 0; i < f->n_part; i++) devs[i] = f->p[i].dev;
    if (f->n_part > P2P_MAX_RANKS || p2p_enable(devs, f->n_part) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        DEV_TRY(cudaSetDevice(p->dev));
        DEV_TRY(cudaMalloc(&p->p2p_mem, p2p_rank_bytes()));
        DEV_TRY(cudaMemset(p->p2p_mem, 0, p2p_rank_bytes()));
        p2p_rank_init(&f->p2pg.r[i], p->p2p_mem);
    }
    for (int i = 0; i < f->n_part; i++) {
        DEV_TRY(cudaSetDevice(f->p[i].dev));
        DEV_TRY(cudaDeviceSynchronize()); /* the zeroed counters in place before any call */
    }
    /* a rank that gave up waiting says so in host memory, read after every wait (wait_all) */
    DEV_TRY(cudaHostAlloc((void **)&f->p2p_report, sizeof(int) * (size_t)f->n_part,
                          cudaHostAllocPortable | cudaHostAllocMapped));
    for (int i = 0; i < f->n_part; i++) {
        f->p2p_report[i] = 0;
        f->p2pg.r[i].report = (int *)(f->p2p_report + i); /* the same address on the devices (UVA) */
    }
    f->p2pg.n_ranks = f->n_part;
    int max_tok = (int)(P2P_MAX_FLOATS / f->m->hp.n_embd);
    f->p2p_max_tok = max_tok < GRAPH_MAX_TOK ? max_tok : GRAPH_MAX_TOK;
    f->p2p = f->p2p_max_tok >= 1;
    return 0;
}

/* NCCL's communicators, set up in a thread while the weights load (it takes a few hundred ms). */
typedef struct {
    int n;
    const int *devs;
    ncclComm_t comms[ENGINE_MAX_DEVICES];
    ncclResult_t rc;
} nccl_job;

static void *nccl_main(void *arg) {
    nccl_job *j = arg;
    j->rc = ncclCommInitAll(j->comms, j->n, j->devs);
    return NULL;
}

static void *cuda_create(const llama_model *m, const engine_plan *plan, int32_t n_cells, int32_t n_batch,
                         int32_t max_pos, engine_progress_fn progress, void *pctx, char *err, size_t err_size) {
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
    const char *feature = model_non_llama_feature(m);  /* engine_load refuses these first */
    if (feature) {
        snprintf(err, err_size, "CUDA backend: architecture %s's %s is not implemented on the GPU yet; run it on "
                 "the CPU with -ngl 0", hp->arch, feature);
        return NULL;
    }
    if (plan->n_dev < 1 || plan->n_dev > ENGINE_MAX_DEVICES || plan->cpu_layers < 0 ||
        plan->cpu_layers >= hp->n_layer) {
        snprintf(err, err_size, "CUDA backend: a plan of %d devices from layer %d of %d", plan->n_dev,
                 plan->cpu_layers, hp->n_layer);
        return NULL;
    }
    forward_cuda *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    f->m = m;
    f->plan = *plan;
    f->n_part = plan->n_dev;
    f->split = plan->n_dev == 1 ? ENGINE_SPLIT_NONE : plan->split_mode;
    f->l0 = plan->cpu_layers;
    f->l1 = hp->n_layer;
    f->main = plan->head;
    f->n_cells = n_cells;
    f->kv_cells = n_cells + ENGINE_KV_PAGE;
    f->n_batch = n_batch < n_cells ? n_batch : n_cells;
    f->max_pos = max_pos;
    f->max_pages = (max_pos + ENGINE_KV_PAGE - 1) / ENGINE_KV_PAGE;
    f->n_split = f->max_pages < N_SPLIT_MAX ? f->max_pages : N_SPLIT_MAX;
    f->timeout_s = nccl_timeout_s();
    f->fault_stall = fault_peer_stall();
    f->fuse = fuse_mode();
    f->rope_fold = rope_fold_mode();
    f->att_early = att_early_mode();
    f->pipe_ub = pipe_ub_mode();
    f->ahead_mode = ahead_mode();
    {
        const char *e = getenv("MGI_DIRECT_OUT"); /* run_head's direct writes; 0 for A/B runs */
        f->direct_out = !(e && !strcmp(e, "0"));
        e = getenv("MGI_GLU"); /* ffn_half's SwiGLU in the gate/up matvec; 0 for A/B runs */
        f->glu = !(e && !strcmp(e, "0"));
        /* attn_half's two QKV matvecs in one launch (3), else the second beside the first on the SMs
         * the first leaves (2), beside shaped for the whole device (1), after it (0); MGI_BESIDE=0-2
         * for A/B runs */
        e = getenv("MGI_BESIDE");
        f->beside = e && e[0] >= '0' && e[0] <= '2' && !e[1] ? e[0] - '0' : 3;
    }
    trace_mode(f);
    /* The engine's pool holds at least one cell per position of each of its sequences, so no
     * pass has more sequences than n_cells / max_pos (nor more than tokens). */
    f->max_seqs = n_cells / max_pos < f->n_batch ? n_cells / max_pos : f->n_batch;
    if (f->max_seqs < 1) f->max_seqs = 1;
    int group = hp->n_head / hp->n_head_kv;
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        p->f = f;
        p->dev = engine_device_physical(plan->dev[i]);
        for (int j = 0; j < i; j++) f->local |= f->p[j].dev == p->dev;
        int row = f->split == ENGINE_SPLIT_ROW;
        p->l0 = row || f->n_part == 1 ? f->l0 : plan->layer0[i];
        p->l1 = row || f->n_part == 1 ? f->l1 : plan->layer1[i];
        p->kvh0 = row ? plan->kvh0[i] : 0;
        p->kvh1 = row ? plan->kvh1[i] : hp->n_head_kv;
        p->ff0 = row ? plan->ff0[i] : 0;
        p->ff1 = row ? plan->ff1[i] : hp->n_ff;
        if (p->l0 < f->l0 || p->l1 > f->l1 || p->l0 >= p->l1 || p->kvh0 < 0 || p->kvh1 > hp->n_head_kv ||
            p->kvh0 >= p->kvh1 || p->ff0 < 0 || p->ff1 > hp->n_ff || p->ff0 >= p->ff1) {
            snprintf(err, err_size, "CUDA backend: device %d: layers %d..%d, KV heads %d..%d, FFN %d..%d: not a "
                     "valid part of this model", p->dev, p->l0, p->l1, p->kvh0, p->kvh1, p->ff0, p->ff1);
            goto fail;
        }
        p->qh0 = p->kvh0 * group;
        p->qh1 = p->kvh1 * group;
        p->n_head = p->qh1 - p->qh0;
        p->n_head_kv = p->kvh1 - p->kvh0;
        p->n_ff = p->ff1 - p->ff0;
        p->nq = (int64_t)p->n_head * hp->head_dim;
        p->kv_dim = (int64_t)p->n_head_kv * hp->head_dim;
        p->embeds = f->l0 == 0 && (row || i == 0);
        p->head = i == f->main;
        p->layers = calloc((size_t)(p->l1 - p->l0), sizeof *p->layers);
        p->ws = calloc(1 + 7 * (size_t)(p->l1 - p->l0), sizeof *p->ws);
        if (!p->layers || !p->ws) {
            snprintf(err, err_size, "out of memory");
            goto fail;
        }
        if (part_plan(p, err, err_size)) goto fail;
    }
    if (f->split == ENGINE_SPLIT_LAYER && f->main != f->n_part - 1) {
        snprintf(err, err_size, "CUDA backend: layer split with the head on device %d, not the last", f->main);
        goto fail;
    }
    if (!cu_matvec_supported(m->tok_embd.type) || m->tok_embd.n_cols % 32 ||
        ((m->tok_embd.type == QUANT_Q4_K || m->tok_embd.type == QUANT_Q6_K) && m->tok_embd.n_cols % 256)) {
        snprintf(err, err_size, "%s: type %s is not supported by the CUDA embedding kernel; use -ngl 0",
                 m->tok_embd.name, quant_type_name(m->tok_embd.type));
        goto fail;
    }
    int phys[ENGINE_MAX_DEVICES];
    for (int i = 0; i < f->n_part; i++) phys[i] = f->p[i].dev;
    nccl_job nj = {.n = f->n_part, .devs = phys};
    if (f->local) f->fault_stall = 0; /* MGI_FAULT needs a peer that can be lost: a second GPU */
    /* virtual devices over several GPUs: the local copies and adds read the other GPUs' memory */
    cudaError_t pe = f->local ? p2p_enable(phys, f->n_part) : cudaSuccess;
    if (pe != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(err, err_size, "MGI_VIRTUAL_DEVICES: the parts' GPUs cannot reach each other's memory (%s); use "
                 "one GPU (CUDA_VISIBLE_DEVICES) or no virtual devices", cudaGetErrorString(pe));
        goto fail;
    }
    int use_nccl = f->n_part > 1 && !f->local;
    if (use_nccl) nccl_watchdog_start();
    pthread_t nth;
    int nccl_started = use_nccl && !pthread_create(&nth, NULL, nccl_main, &nj);
    if (use_nccl && !nccl_started) nccl_main(&nj);
    int setup_rc = setup_parts(f, progress, pctx, err, err_size);
    if (nccl_started) pthread_join(nth, NULL);
    if (use_nccl) {
        if (nj.rc == ncclSuccess) {
            for (int i = 0; i < f->n_part; i++) f->p[i].comm = nj.comms[i];
            f->have_comms = 1;
        } else if (!setup_rc) {
            snprintf(err, err_size, "NCCL: initialising %d devices failed: %s", f->n_part, ncclGetErrorString(nj.rc));
            goto fail;
        }
    }
    if (setup_rc) goto fail;
    for (int i = 0; i < f->n_part; i++) {
        cudaSetDevice(f->p[i].dev);
        plan_fusions(&f->p[i]);
    }
    if (f->split == ENGINE_SPLIT_ROW && setup_p2p(f, err, err_size)) goto fail;
    {
        part *hpart = &f->p[f->main];
        cudaSetDevice(hpart->dev);
        /* h_meta and the gate are mapped: decode steps' host gates read them (forward_cuda.gate) */
        if (cudaHostAlloc((void **)&f->h_meta, meta_words(f) * sizeof(int32_t), cudaHostAllocPortable | cudaHostAllocMapped) !=
                cudaSuccess ||
            cudaHostAlloc((void **)&f->gate, sizeof *f->gate, cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess ||
            cudaHostAlloc((void **)&f->h_logits, (size_t)OUT_CHUNK * (size_t)hp->n_vocab * sizeof(float),
                          cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess ||
            cudaHostAlloc((void **)&f->h_ids, (size_t)2 * OUT_CHUNK * sizeof(int32_t),
                          cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess) {
            snprintf(err, err_size, "cudaHostAlloc of the pass buffers failed");
            goto fail;
        }
        f->gate->go = 0;
        f->gate->words = 0;
        if (cudaEventCreateWithFlags(&f->step_ev[0], cudaEventDisableTiming) != cudaSuccess ||
            cudaEventCreateWithFlags(&f->step_ev[1], cudaEventDisableTiming) != cudaSuccess ||
            !(f->h_keep = malloc((size_t)hp->n_vocab * sizeof(float)))) {
            snprintf(err, err_size, "creating the decode steps' events and buffers failed");
            goto fail;
        }
    }
    return f;
fail:
    cuda_free(f);
    return NULL;
}

/* Split statistics: start resets and turns them on for a split (events around every segment and
 * NCCL call, a little host time per pass; one device collects nothing); otherwise they stop and out[i] gets device i's share of the
 * passes' wall time computing and inside NCCL calls. Returns the number of devices. */
static int cuda_stats(void *self, int start, engine_dev_share *out, int max) {
    forward_cuda *f = self;
    if (start && f->n_part == 1) return 1;  /* nothing to share out: no events, no cost */
    if (start) {
        for (int i = 0; i < f->n_part; i++) {
            part *p = &f->p[i];
            if (!p->ev) {
                int cap = 4 * n_segments(f) + 4 * (f->n_batch / PIPE_MIN + 2);
                cudaSetDevice(p->dev);
                p->ev = calloc((size_t)cap, sizeof *p->ev);
                p->ev_nccl = calloc((size_t)cap / 2 + 1, 1);
                if (!p->ev || !p->ev_nccl) return -1;
                for (p->ev_cap = 0; p->ev_cap < cap; p->ev_cap++)
                    if (cudaEventCreate(&p->ev[p->ev_cap]) != cudaSuccess) break;
                p->ev_cap &= ~1;
            }
            p->busy_ms = p->nccl_ms = 0;
            p->n_ev = 0;
        }
        f->prof_wall_ms = 0;
        f->prof = 1;
        return f->n_part;
    }
    f->prof = 0;
    double w = f->prof_wall_ms > 0 ? f->prof_wall_ms : 1;
    for (int i = 0; i < f->n_part && i < max; i++)
        out[i] = (engine_dev_share){f->p[i].dev, f->p[i].busy_ms / w, f->p[i].nccl_ms / w};
    return f->n_part;
}

/* One line per device: what it holds and its memory, for the load log. */
static int cuda_describe(void *self, char *buf, size_t size) {
    forward_cuda *f = self;
    size_t o = 0;
    for (int i = 0; i < f->n_part && o < size; i++) {
        part *p = &f->p[i];
        int w = snprintf(buf + o, size - o,
                         "CUDA%d (%s): layers %d-%d, KV heads %d-%d, FFN %d-%d%s: weights %.2f GiB, KV %.2f GiB, "
                         "scratch %.2f GiB, %.2f of %.2f GiB free before load\n",
                         p->dev, p->dev_name, p->l0, p->l1 - 1, p->kvh0, p->kvh1 - 1, p->ff0, p->ff1 - 1,
                         p->head ? ", output head" : "", gib(p->w_bytes), gib(p->kv_bytes), gib(p->scratch_bytes),
                         gib(p->free_before), gib(f->plan.total_bytes[i]));
        if (w < 0) break;
        o += (size_t)w;
    }
    return 0;
}

/* batch.h: ahead. One part only: the gate and the cancel's trash page are part 0's. */
static void cuda_ahead(void *self, int on) {
    forward_cuda *f = self;
    f->ahead = on && f->n_part == 1 && f->ahead_mode == 2;
}

/* The pinned logits buffer the head's rows are copied into (batch.h: out_buffer). */
static float *out_buffer(void *self, int32_t *rows) {
    forward_cuda *f = self;
    *rows = OUT_CHUNK;
    return f->h_logits;
}

static const engine_backend_ops cuda_ops = {
    .name = "CUDA", .kv_elem_bytes = sizeof(uint16_t), .forward = fwd, .forward_greedy = fwd_greedy,
    .out_buffer = out_buffer, .ahead = cuda_ahead, .kv_copy = kv_copy, .kv_get = kv_get, .kv_set = kv_set, .free = cuda_free,
};

const engine_gpu_backend forward_cuda_gpu = {
    .ops = &cuda_ops, .n_devices = engine_device_count, .query = engine_device_query, .create = cuda_create,
    .describe = cuda_describe, .stats = cuda_stats,
};
