/* The CUDA backend's passes (cuda_internal.h): a pass is segments (the stretches between NCCL
 * calls) on every part; decode steps replay captured graphs, a one-part step behind the host gate
 * and, with launch-ahead, launched before its token is known; the pass driver pipelines a layer
 * split's micro-batches; the MGI_TRACE block timeline; the backend's forward entry points. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/cuda_internal.h"
#include "quant/quant.h"

/* Segments. Layer split (and one part): one segment per part, all its layers. Row split: 2 per
 * layer plus one, cut where an all-reduce of xn adds up the parts' partial sums:
 *   0: enter + attention half of the first layer; 2i+1: add + FFN norm, FFN half of layer i;
 *   2i+2: add + attention norm and half of layer i+1, or for the last layer the final add.
 * With head >= 0 (0 logits, 1 greedy) the head part's last segment ends with the head of an
 * identity decode step (every token one output row). */
int fcu_n_segments(const forward_cuda *f) {
    return f->split == ENGINE_SPLIT_ROW ? 2 * (f->l1 - f->l0) + 1 : 1;
}

static int run_segment(part *p, int seg, span s, int head, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    int last = seg == fcu_n_segments(f) - 1;
    if (f->split != ENGINE_SPLIT_ROW) {
        /* An unfused layer starts from xn = its attention norm of x, which its predecessor's
         * last add computes unless that one is fused (it leaves x whole and xn as scratch). */
        if (fcu_part_enter(p, s, !fcu_layer_fz(p, p->l0, s.nt), err, err_size)) return -1;
        for (int32_t l = p->l0; l < p->l1; l++) {
            const int fz = fcu_layer_fz(p, l, s.nt);
            if (fz) {
                if (fcu_attn_half(p, l, s, fz, err, err_size) || fcu_ffn_half(p, l, s, fz, err, err_size)) return -1;
                continue;
            }
            if (l > p->l0 && fcu_layer_fz(p, l - 1, s.nt)) {
                if (fcu_res_home(p, s, err, err_size)) return -1;
                p->xh_ready = 0; /* xn rewritten without its f16 copy */
                DEV_TRY(cu_rmsnorm(p->xn + (int64_t)s.t0 * f->m->hp.n_embd, p->x + (int64_t)s.t0 * f->m->hp.n_embd,
                                p->layers[l - p->l0].attn_norm, s.nt, f->m->hp.n_embd, f->m->hp.rms_eps, p->st));
            }
            const int norm_next = l + 1 < p->l1 && !fcu_layer_fz(p, l + 1, s.nt);
            const dlayer *L = &p->layers[l - p->l0];
            if (fcu_attn_half(p, l, s, 0, err, err_size) ||
                fcu_part_add(p, s, L->attn_post_norm, L->ffn_norm, err, err_size) ||
                fcu_ffn_half(p, l, s, 0, err, err_size) ||
                fcu_part_add(p, s, L->ffn_post_norm, norm_next ? p->layers[l + 1 - p->l0].attn_norm : NULL, err,
                             err_size))
                return -1;
        }
        if (fcu_res_home(p, s, err, err_size)) return -1; /* after fused layers: x, whole */
    } else if (seg == 0) {
        if (fcu_part_enter(p, s, 1, err, err_size) || fcu_attn_half(p, f->l0, s, 0, err, err_size)) return -1;
    } else {
        int32_t l = f->l0 + (seg - 1) / 2;
        if (seg % 2) {
            if (fcu_part_add(p, s, p->layers[l - p->l0].attn_post_norm, p->layers[l - p->l0].ffn_norm, err, err_size) ||
                fcu_ffn_half(p, l, s, 0, err, err_size))
                return -1;
        } else if (l + 1 < f->l1) {
            if (fcu_part_add(p, s, p->layers[l - p->l0].ffn_post_norm, p->layers[l + 1 - p->l0].attn_norm, err,
                             err_size) ||
                fcu_attn_half(p, l + 1, s, 0, err, err_size))
                return -1;
        } else if (fcu_part_add(p, s, p->layers[l - p->l0].ffn_post_norm, NULL, err, err_size)) {
            return -1;
        }
    }
    if (last && head >= 0 && p->head) return fcu_run_head(p, s.n, 0, s.n, head, 1, err, err_size);
    return 0;
}

/* Row split over peer access: the whole step of part p, its segments joined by its shares of the
 * all-reduces (every part's kernels wait for the others on the devices, not on the host). */
static int run_step_p2p(part *p, span s, int head, char *err, size_t err_size) {
    const int n_seg = fcu_n_segments(p->f), i = (int)(p - p->f->p);
    for (int seg = 0; seg < n_seg; seg++) {
        if (run_segment(p, seg, s, head, err, err_size)) return -1;
        if (seg + 1 < n_seg && fcu_p2p_xn(p, i, s.n, err, err_size)) return -1;
    }
    return 0;
}

/* The host gate at the head of a decode step (forward_cuda.gate): d_meta from h_meta once the
 * host opens it (UVA: the pinned, mapped buffers' host addresses are their device addresses). */
static int gate_launch(part *p, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    DEV_TRY(cu_host_gate(p->d_meta, f->h_meta, f->gate, (int)fcu_meta_words(f), p->st));
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
    const int n_seg = fcu_n_segments(f);
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
            if (seg + 1 < n_seg && fcu_p2p_xn(p, i, s.n, err, err_size)) return -1;
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
    if (!*gs && !(*gs = calloc((size_t)fcu_n_segments(f), sizeof **gs))) {
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

/* The layers of a pass on every part. head >= 0: an identity decode step whose head is part of
 * the last segment (and which replays from graphs when graphs is set: 1 replay/capture, 0 the
 * first eager run of the shape). */
static int run_pass(forward_cuda *f, int n, int head, int graphs, int capture, char *err, size_t err_size) {
    int n_seg = fcu_n_segments(f);
    span all = {n, 0, n};
    if (f->split == ENGINE_SPLIT_ROW && graphs && fcu_p2p_applies(f, n)) {
        /* one graph per device for the whole step (its all-reduces inside) */
        if (!capture && !p2p_step_captured(f, n, head)) {
            for (int i = 0; i < f->n_part; i++) fcu_mark(&f->p[i], 0);
            if (run_step_p2p_eager(f, all, head, err, err_size)) return -1;
            for (int i = 0; i < f->n_part; i++) fcu_mark(&f->p[i], 0);
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
            fcu_mark(p, 0);
            if (segment_graph(p, -1, all, head, capture, 1, err, err_size)) return -1;
            fcu_mark(p, 0);
        }
        return 0;
    }
    if (f->split == ENGINE_SPLIT_ROW) {
        for (int seg = 0; seg < n_seg; seg++) {
            for (int i = 0; i < f->n_part; i++) {
                part *p = &f->p[i];
                DEV_TRY(cudaSetDevice(p->dev));
                fcu_mark(p, 0);
                int rc = graphs ? segment_graph(p, seg, all, head, capture, 1, err, err_size)
                                : run_segment(p, seg, all, head, err, err_size);
                if (rc) return -1;
                fcu_mark(p, 0);
            }
            if (seg + 1 < n_seg && fcu_allreduce_xn(f, n, err, err_size)) return -1;
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
    }
    for (int t0 = 0; t0 < n; t0 += ub) {
        span s = {n, t0, n - t0 < ub ? n - t0 : ub};
        for (int i = 0; i < f->n_part; i++) {
            part *p = &f->p[i];
            if (i > 0 && fcu_send_x(f, i, s, err, err_size)) return -1;
            DEV_TRY(cudaSetDevice(p->dev));
            fcu_mark(p, 0);
            int rc = graphs ? segment_graph(p, 0, s, head, capture, 1, err, err_size)
                            : run_segment(p, 0, s, head, err, err_size);
            if (rc) return -1;
            fcu_mark(p, 0);
        }
    }
    return 0;
}

/* MGI_TRACE=FILE[:N]: replays N and N + 1 (default 20, 21) of the one-part decode graph of a token
 * count run with kernels_trace on, and their block records are written to FILE as text, one line
 * per block: kind tag block smid grid, then %globaltimer (ns) at marks 0-5, then clock64 at marks
 * 0-5 (kernels/trace.cuh says what each kind's marks are; 0 where a kernel has none). Two steps,
 * so that the time between them shows too. A lab diagnostic: the steps' results are as untraced. */
void fcu_trace_mode(forward_cuda *f) {
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
int fcu_ahead_cancel(forward_cuda *f, char *err, size_t err_size) {
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
        fcu_ahead_cancel(f, err, err_size))
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
    const int gate = identity && n <= GRAPH_MAX_TOK && f->n_part == 1 && !b->x_in;
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
                       fcu_wait_all(f, err, err_size) || trace_end(f, seen, n, err, err_size))
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
        return fcu_wait_all(f, err, err_size);
    }
    DEV_TRY(cudaSetDevice(hpart->dev));
    if (logits == f->h_logits && n_out > OUT_CHUNK) {
        snprintf(err, err_size, "CUDA forward: %d rows of logits into the backend's buffer of %d", n_out, OUT_CHUNK);
        return -1;
    }
    for (int r0 = 0; r0 < n_out; r0 += OUT_CHUNK) {
        int nr = n_out - r0 < OUT_CHUNK ? n_out - r0 : OUT_CHUNK;
        if (fcu_run_head(hpart, n, r0, nr, greedy, 0, err, err_size) || fcu_wait_all(f, err, err_size)) return -1;
        if (greedy) memcpy(ids + 2 * r0, f->h_ids, (size_t)2 * nr * sizeof(int32_t));
        else if (logits != f->h_logits)
            memcpy(logits + (size_t)r0 * n_vocab, f->h_logits, (size_t)nr * (size_t)n_vocab * sizeof(float));
    }
    if (!n_out) return fcu_wait_all(f, err, err_size);
    return 0;
}

static int fwd_out(void *self, const engine_fwd_batch *b, float *logits, int32_t *ids, char *err,
                   size_t err_size) {
    forward_cuda *f = self;
    double t0 = f->prof ? fcu_now_s() : 0;
    int rc = fwd_pass(self, b, logits, ids, err, err_size);
    if (f->prof) {
        if (!rc) f->prof_wall_ms += 1e3 * (fcu_now_s() - t0);
        fcu_tally(f);
    }
    return rc;
}

int fcu_forward(void *self, const engine_fwd_batch *b, float *logits, char *err, size_t err_size) {
    return fwd_out(self, b, logits, NULL, err, err_size);
}

int fcu_forward_greedy(void *self, const engine_fwd_batch *b, int32_t *ids, char *err, size_t err_size) {
    return fwd_out(self, b, NULL, ids, err, err_size);
}
