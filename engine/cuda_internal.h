/* The CUDA backend's private header: the structs of engine/forward_cuda.c and its cuda_*.c files
 * and the functions they share (prefix fcu_). forward_cuda.c says how the backend works; each file
 * holds one job:
 *   cuda_weights.c  device memory layout of a part, weight plan and upload (reader threads)
 *   cuda_layer.c    the layer: products, attention half, FFN half, residual adds, head, fusion plan
 *   cuda_step.c     a pass: segments, decode graphs, the host gate and launch-ahead, the pass driver
 *   cuda_comm.c     NCCL, the watchdog, peer-access and local all-reduces, sends, waits, statistics
 *   cuda_offload.c  op offload: products of the CPU's layers (-ngl partial) on a device
 *   forward_cuda.c  create/free, KV cells in and out, statistics and description, the vtable */
#ifndef MGI_ENGINE_CUDA_INTERNAL_H
#define MGI_ENGINE_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "engine/forward_cuda.h"
#include "kernels/check.h"
#include "kernels/kernels.h"
#include "kernels/p2p.h"
#include "kernels/paged.h"
#include "kernels/recipe.h"

enum {
    GRAPH_MAX_TOK = 64,  /* decode steps of up to this many sequences run from captured graphs */
    ATT_CHUNK = PAGED_ATT_TOKENS, /* tokens per attention launch (scratch is sized for this many) */
    PREFILL_MIN = 64,    /* a pass of at least this many consecutive tokens of one sequence takes the
                            tensor-core prompt attention (fewer: too few blocks to fill the GPU) */
    OUT_CHUNK = 64,      /* logits rows computed and copied back at once */
    N_SPLIT_MAX = 32,    /* attention splits per token (blocks per kv head; a decode step's graph
                            launches them all, most exiting at once at short contexts) */
    ATT_BLOCKS_PER_SM = 4, /* attention launches aim at this many blocks per SM (att_splits) */
    STAGE_SLOTS = 8,     /* pinned staging buffers per part for the upload */
    STAGE_BYTES = 16 << 20,
    N_READERS = 4,       /* threads per part copying the mapped file into staging buffers */
    PIPE_MIN = 64,       /* a layer-split pass of at least 2 x this many tokens is pipelined in
                            micro-batches of at least this many (fewer: the GEMMs get too thin) */
    NCCL_TIMEOUT_S = 120, /* a pass that has not finished by then is a dead peer: abort, never hang
                             (MGI_NCCL_TIMEOUT overrides it: fcu_nccl_timeout_s) */
    FUSE_MAX_N = 4,      /* passes of up to this many tokens take the fused layer (kernels.h's
                            cu_matvec_f32_norm etc.: v10's range) */
};

/* A layer's fusion plan for one token count (fcu_plan_fusions): which products take the fused
 * matvecs (QKV and gate/up: every matrix of the group), and whether the layer runs fused. FZ_QKV
 * is plain Llama's QKV with the norm, RoPE and K/V store inside the matvec; a general layer's
 * QKV takes FZ_QKVN instead: the norm inside the matvec, recipe.h's epilogue kernel after it
 * (folding that into the matvec's epilogue measured slower: PERF-LOG). */
enum { FZ_QKV = 1, FZ_WO = 2, FZ_GU = 4, FZ_DOWN = 8, FZ_LAYER = 16, FZ_QKVN = 32 };

/* A part of one matrix of the file: rows [r0, r1) and columns [c0, c1) (c0, c1 on block bounds). */
typedef struct {
    const llama_weight *w;
    int64_t r0, r1, c0, c1;
    int neox_hd;        /* > 0: Q or K rows of a NEOX model, uploaded NEOX-interleaved within heads of
                           this many rows (forward_cuda.neox_rows) */
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

/* A small f32 vector of the model on a part's device (a norm, a bias; for a row split the slice of
 * the heads the part holds): the layout sets *dev, the setup copies n floats from src. */
typedef struct {
    float **dev;
    const float *src;
    size_t n;
} dvec;

typedef struct {
    wgroup qkv, gu;
    dweight wo, down;
    float *attn_norm, *ffn_norm;  /* [n_embd] */
    /* The recipe's vectors, NULL where the model has none: bq [nq] and bk, bv [kv_dim] for the part's
     * heads, bo [n_embd], q_norm and k_norm [head_dim]. */
    float *bq, *bk, *bv, *bo, *q_norm, *k_norm;
    /* Gemma's norms of the attention and FFN outputs before their residual adds [n_embd], or NULL */
    float *attn_post_norm, *ffn_post_norm;
    /* The general layer's Q/K/V epilogue (recipe.h) and its fused QKV's (kernels.h) over the
     * pointers above and the part's angle table of the layer's kind (windowed or global): built
     * once the part is laid out (cuda_weights.c: layer_recipes); plain Llama's go unused. */
    cu_qkv_recipe rr;
    cu_rope_epi re;
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
    float *output_b;    /* [n_vocab] or NULL */
    double *rope_angle; /* [n_rot / 2] the general layer's RoPE angles (fcu_rope_angles); NULL for plain Llama */
    double *rope_angle_swa; /* [n_rot / 2] those of windowed layers (rope_base_swa); NULL without a window */
    dvec *vecs;         /* every dvec of the part (fcu_part_plan) */
    int n_vecs;
    uint16_t *kv_k, *kv_v;  /* [l1 - l0][kv_cells][kv_dim] f16 */
    float *x, *xn;      /* residual stream, normed input (or a matvec's output before the add) */
    float *qkv, *q;     /* Q/K/V outputs (group_view), Q after RoPE */
    float *att, *gu, *ff, *logits;
    uint16_t *xh;       /* a matvec input in f16 for cu_gemm_f16 (prompt passes) */
    int xh_ready;       /* fcu_part_add wrote xn's tokens of the span as f16 into xh too (for the next group_mm) */
    int xn_parts;       /* > 1: the product meant for xn is that many split-K planes in gemm_scratch, which
                         * fcu_part_add adds up itself (cu_gemm_f16_split_parts) */
    void *att_scratch;
    size_t att_scratch_bytes;
    float *post_part;      /* [FUSE_MAX_N][n_embd]: a post-normed product's rows (cu_matvec_f32_acc_post) */
    unsigned *post_count;  /* its arrival counter, zeroed at setup */
    /* Gemma's post-normed products pending between fused decode kernels (kernels.h's cu_post_pend):
     * x2 [FUSE_MAX_N][n_embd] a second residual, which the fused NORM matvecs write as they read
     * (x + the pending product), so that the residual alternates between x and x2 and each
     * product can be left pending in pend_part [FUSE_MAX_N][n_embd]. While a pass's launches are
     * issued: xc the residual's buffer (x or x2; x at each layer's end and outside fused layers),
     * pend what it lacks (part NULL: nothing). */
    float *x2, *pend_part, *xc;
    cu_post_pend pend;
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

struct forward_cuda {
    const llama_model *m;
    /* The model's recipe is not plain Llama (models/model.h: model_non_llama_feature): every layer
     * is the unfused one at every token count, recipe.h's cu_qkv_rope_store its Q/K/V epilogue
     * (biases, per-head norms, RoPE of either layout and any scaling), bo added to the residual. */
    int general;
    /* A general model with NEOX RoPE: each Q and K head's first n_rot rows are uploaded interleaved
     * (row 2j its value j, 2j + 1 its value j + n_rot/2), so that the pairs RoPE turns together are
     * adjacent rows as in Llama's layout and the fused QKV epilogue can turn them (kernels.h:
     * cu_rope_epi); recipe.h's kernel reads them so too (neox_rows). */
    int neox_rows;
    /* A general model without per-head Q/K norms: its decode layers' QKV takes the fused epilogue
     * with biases and the angle table (FZ_QKV with cu_rope_epi) instead of FZ_QKVN. */
    int rope_fused;
    double *h_angle;    /* [n_rot / 2] the general layer's RoPE angles per position (host) */
    double rope_mscale; /* their cos and sin times this */
    double *h_angle_swa;    /* the same for windowed layers (llama_layer_is_swa), NULL without a window */
    double rope_mscale_swa;
    engine_plan plan;
    int n_part, split;
    part p[ENGINE_MAX_DEVICES];
    int main;           /* index of the part computing the head */
    int32_t l0, l1;     /* layers of the whole backend */
    int32_t n_cells, n_batch, max_pos, max_pages, n_split;
    int32_t kv_cells;   /* cells per layer in the device cache: the n_cells callers use, then one trash
                           page that only fcu_ahead_cancel's placeholder step writes and reads */
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
     * (fcu_ahead_cancel). */
    kernels_gate *gate;     /* pinned, mapped */
    int gate_pass;          /* the pass being launched begins with the gate */
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
    int timeout_s;      /* fcu_nccl_timeout_s(), read once at create */
    int fault_stall;    /* fcu_fault_peer_stall(), read once at create */
    char trace_path[512];   /* MGI_TRACE's FILE ("" when off): two decode steps' block timeline */
    int trace_step;         /* MGI_TRACE's N: the first replay of a one-part decode graph it traces */
    void *trace_buf;        /* device, TRACE_BYTES, while tracing */
    /* Row split: the all-reduces of passes of up to p2p_max_tok tokens run kernels/p2p.h's
     * all-reduce over peer access instead of NCCL, and a decode step is one graph per device
     * (fcu_p2p_applies); only with MGI_P2P=1 (fcu_setup_p2p) and peer access between every pair. */
    int p2p, p2p_max_tok;
    p2p_group p2pg;
    volatile int *p2p_report; /* pinned, mapped: [n_part], the ranks' p2p_rank.report */
    int prof;           /* collecting split statistics */
    double prof_wall_ms;
};

#define DEV_TRY(call) CUDA_TRY(call, err, err_size)
#define NC_TRY(call) NCCL_TRY(call, err, err_size)

/* Tokens [t0, t0 + nt) of an n-token pass whose metadata is in the part's d_meta. */
typedef struct {
    int n, t0, nt;
} span;

/* NCCL's communicators, set up in a thread while the weights load (it takes a few hundred ms). */
typedef struct {
    int n;
    const int *devs;
    ncclComm_t comms[ENGINE_MAX_DEVICES];
    ncclResult_t rc;
} fcu_nccl_job;

static inline double fcu_gib(size_t b) { return (double)b / (double)(1ull << 30); }

/* cuda_weights.c */
size_t fcu_meta_words(const forward_cuda *f);
int fcu_part_plan(part *p, char *err, size_t err_size);
int fcu_setup_parts(forward_cuda *f, engine_progress_fn progress, void *pctx, char *err, size_t err_size);

/* cuda_layer.c */
int fcu_rope_angles(forward_cuda *f, char *err, size_t err_size);
int fcu_layer_fz(const part *p, int32_t l, int n);
int fcu_part_enter(part *p, span s, int norm, char *err, size_t err_size);
int fcu_attn_half(part *p, int32_t l, span s, int fz, char *err, size_t err_size);
int fcu_part_add(part *p, span s, const float *post, const float *w, char *err, size_t err_size);
int fcu_ffn_half(part *p, int32_t l, span s, int fz, char *err, size_t err_size);
int fcu_res_home(part *p, span s, char *err, size_t err_size);
int fcu_ffn_glu(const part *p, int32_t l, int fz);
int fcu_run_head(part *p, int n, int r0, int nr, int greedy, int identity, char *err, size_t err_size);
void fcu_plan_fusions(part *p);

/* cuda_step.c */
int fcu_n_segments(const forward_cuda *f);
void fcu_trace_mode(forward_cuda *f);
int fcu_ahead_cancel(forward_cuda *f, char *err, size_t err_size);
int fcu_forward(void *self, const engine_fwd_batch *b, float *logits, char *err, size_t err_size);
int fcu_forward_greedy(void *self, const engine_fwd_batch *b, int32_t *ids, char *err, size_t err_size);

/* cuda_comm.c */
int fcu_nccl_timeout_s(void);
int fcu_fault_peer_stall(void);
void fcu_nccl_watchdog_start(void);
void *fcu_nccl_main(void *arg); /* a thread: ncclCommInitAll of an fcu_nccl_job */
int fcu_setup_p2p(forward_cuda *f, char *err, size_t err_size);
int fcu_p2p_applies(const forward_cuda *f, int n);
int fcu_p2p_xn(part *p, int i, int n, char *err, size_t err_size);
int fcu_allreduce_xn(forward_cuda *f, int n, char *err, size_t err_size);
int fcu_send_x(forward_cuda *f, int i, span s, char *err, size_t err_size);
int fcu_wait_all(forward_cuda *f, char *err, size_t err_size);
void fcu_abort_comms(forward_cuda *f);
void fcu_mark(part *p, int nccl);
void fcu_tally(forward_cuda *f);
double fcu_now_s(void);

/* cuda_offload.c: op offload (engine_gpu_backend.offload_*). */
void *fcu_offload_new(int dev, const engine_offload_spec *spec, char *desc, size_t desc_size, char *err,
                      size_t err_size);
int fcu_offload_matmul(void *self, const llama_weight *w, const float *x, int64_t n_tok, float *out,
                       const engine_par *par, char *err, size_t err_size);
void fcu_offload_free(void *self);

#endif
