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
 * on one device or a layer split take fewer where the matvecs allow (the plan per layer and token
 * count: fcu_plan_fusions): each RMSNorm inside the matvec that reads it, RoPE and the K/V store
 * inside the QKV matvec, SwiGLU inside the stacked gate/up matvec, the residual adds as the wo and
 * down matvecs' `y +=`; after a fused layer x holds the whole residual and xn is only scratch.
 * The kernels of a decode step overlap their launch and first weight loads with the previous
 * kernel's tail (programmatic dependent launch, kernels/pdl.cuh).
 *
 * A model whose layer recipe is not plain Llama (models/model.h) runs the general layer: unfused
 * at every token count, Q/K/V biases, per-head Q/K norms and RoPE of the recipe (either pair
 * layout, frequency factors, scaling) in one epilogue kernel (kernels/recipe.h), bo and the
 * output bias added by their own. Gemma's pieces: windowed layers (their own RoPE table of
 * rope_base_swa) and the attention softcap take paged_attention_recipe (decode kernels) and
 * paged_attention_prefill_recipe (prompt passes), post norms are applied to the product in fcu_part_add before its add
 * (fused decode layers: left pending for the next NORM matvec, engine/cuda_layer.c's mm_acc),
 * the GELU gate, the input scale after the embedding and the logit softcap after the head are
 * recipe.h kernels. What it cannot run (model_gpu_missing_feature) is refused at load in one line.
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

#include "engine/cuda_internal.h"
#include "engine/devices.h"
#include "quant/quant.h"

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
        fcu_ahead_cancel(f, err, err_size))
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
    if (fcu_ahead_cancel(f, err, err_size)) return -1;
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

/* --- creation ------------------------------------------------------------------------------------ */

static void part_free(part *p) {
    if (!p->f) return;
    cudaSetDevice(p->dev);
    if (p->st) cudaStreamSynchronize(p->st);
    for (int g = 0; g < 2; g++)
        for (int i = 0; i <= GRAPH_MAX_TOK; i++) {
            if (!p->graphs[g][i]) continue;
            for (int s = 0; s < fcu_n_segments(p->f); s++)
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
    free(p->vecs);
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
    if (fcu_ahead_cancel(f, err, sizeof err)) fprintf(stderr, "mgi: CUDA backend teardown: %s\n", err);
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
    free(f->h_angle);
    free(f->h_angle_swa);
    cudaFreeHost((void *)f->p2p_report);
    cudaFreeHost(f->h_logits);
    cudaFreeHost(f->h_ids);
    free(f);
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
    const char *feature = model_gpu_missing_feature(m);  /* engine_load refuses these first */
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
    f->general = model_non_llama_feature(m) != NULL;
    f->neox_rows = f->general && hp->rope_kind == LLAMA_ROPE_NEOX && hp->n_rot > 0;
    f->rope_fused = f->general && !model_has_qk_norm(m);
    if (f->general && fcu_rope_angles(f, err, err_size)) goto fail;
    f->timeout_s = fcu_nccl_timeout_s();
    f->fault_stall = fcu_fault_peer_stall();
    fcu_trace_mode(f);
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
        if (fcu_part_plan(p, err, err_size)) goto fail;
    }
    if (f->split == ENGINE_SPLIT_LAYER && f->main != f->n_part - 1) {
        snprintf(err, err_size, "CUDA backend: layer split with the head on device %d, not the last", f->main);
        goto fail;
    }
    const quant_traits *et = quant_traits_of(m->tok_embd.type); /* cu_embed: whole blocks of at least 32 */
    if (!cu_matvec_supported(m->tok_embd.type) || !et || m->tok_embd.n_cols % 32 ||
        m->tok_embd.n_cols % et->block_elems) {
        snprintf(err, err_size, "%s: type %s is not supported by the CUDA embedding kernel; use -ngl 0",
                 m->tok_embd.name, quant_type_name(m->tok_embd.type));
        goto fail;
    }
    int phys[ENGINE_MAX_DEVICES];
    for (int i = 0; i < f->n_part; i++) phys[i] = f->p[i].dev;
    fcu_nccl_job nj = {.n = f->n_part, .devs = phys};
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
    if (use_nccl) fcu_nccl_watchdog_start();
    pthread_t nth;
    int nccl_started = use_nccl && !pthread_create(&nth, NULL, fcu_nccl_main, &nj);
    if (use_nccl && !nccl_started) fcu_nccl_main(&nj);
    int setup_rc = fcu_setup_parts(f, progress, pctx, err, err_size);
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
        fcu_plan_fusions(&f->p[i]);
    }
    if (f->split == ENGINE_SPLIT_ROW && fcu_setup_p2p(f, err, err_size)) goto fail;
    {
        part *hpart = &f->p[f->main];
        cudaSetDevice(hpart->dev);
        /* h_meta and the gate are mapped: decode steps' host gates read them (forward_cuda.gate) */
        if (cudaHostAlloc((void **)&f->h_meta, fcu_meta_words(f) * sizeof(int32_t), cudaHostAllocPortable | cudaHostAllocMapped) !=
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
                int cap = 4 * fcu_n_segments(f) + 4 * (f->n_batch / PIPE_MIN + 2);
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
                         p->head ? ", output head" : "", fcu_gib(p->w_bytes), fcu_gib(p->kv_bytes), fcu_gib(p->scratch_bytes),
                         fcu_gib(p->free_before), fcu_gib(f->plan.total_bytes[i]));
        if (w < 0) break;
        o += (size_t)w;
    }
    return 0;
}

/* batch.h: ahead. One part only: the gate and the cancel's trash page are part 0's. */
static void cuda_ahead(void *self, int on) {
    forward_cuda *f = self;
    f->ahead = on && f->n_part == 1;
}

/* The pinned logits buffer the head's rows are copied into (batch.h: out_buffer). */
static float *out_buffer(void *self, int32_t *rows) {
    forward_cuda *f = self;
    *rows = OUT_CHUNK;
    return f->h_logits;
}

static const engine_backend_ops cuda_ops = {
    .name = "CUDA", .kv_elem_bytes = sizeof(uint16_t), .forward = fcu_forward, .forward_greedy = fcu_forward_greedy,
    .out_buffer = out_buffer, .ahead = cuda_ahead, .kv_copy = kv_copy, .kv_get = kv_get, .kv_set = kv_set, .free = cuda_free,
};

const engine_gpu_backend forward_cuda_gpu = {
    .ops = &cuda_ops, .n_devices = engine_device_count, .query = engine_device_query, .create = cuda_create,
    .describe = cuda_describe, .stats = cuda_stats, .offload_new = fcu_offload_new,
    .offload_matmul = fcu_offload_matmul, .offload_free = fcu_offload_free,
};
