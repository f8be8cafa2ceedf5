/* The engine: one loaded model ready to compute logits, whatever computes them. The CLI talks
 * only to this interface: load a file, decode batches of tokens from several sequences (each
 * with its own paged KV cache, prefixes shared between sequences by reference), read logits.
 * The CPU reference path or the CUDA backend (engine_params.gpu) computes, both behind
 * engine/batch.h's engine_backend_ops. */
#ifndef MGI_ENGINE_H
#define MGI_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/batch.h"
#include "engine/plan.h"
#include "engine/tokenizer.h"
#include "models/model.h"

/* One device's share of the wall time of the passes measured (engine_split_stats). */
typedef struct {
    int device;     /* CUDA ordinal */
    double busy;    /* computing (kernels of its layers or shards) */
    double nccl;    /* inside NCCL calls (all-reduce, or sending the hidden state on) */
} engine_dev_share;

/* Progress of a long load (weights to a GPU): done of total bytes. */
typedef void (*engine_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* A parallel loop a caller lends (engine_gpu_backend.offload_matmul: the CPU's threads idle while
 * the device works): fn over items [0, n) in pieces on its threads; returns when all are done. */
typedef struct engine_par {
    void *self;
    void (*run)(void *self, int64_t n, void (*fn)(void *arg, int64_t lo, int64_t hi, int tid), void *arg);
} engine_par;

/* What op offload prepares for (engine_gpu_backend.offload_new): the CPU's matrices w[0..n_w), in
 * the order a pass's products come (the offload copies the next one over beside each product),
 * the host buffers that products read and write (pinned while it lives, where the system lets
 * it: a copy from pinned memory runs several times faster), and the most tokens of one product
 * it copies at once. */
typedef struct {
    const llama_weight *const *w;
    int n_w;
    void *const *host;
    const size_t *host_bytes;
    int n_host;
    int32_t max_tok;
} engine_offload_spec;

/* A GPU backend (engine/forward_cuda.h). The program passes it in engine_params, so the engine
 * library itself links no CUDA runtime and the CPU-only tests need none. */
typedef struct {
    const engine_backend_ops *ops;
    /* Usable devices; 0 with the reason in why when there is none (not an error). */
    int (*n_devices)(char *why, size_t why_size);
    /* Device i's name and memory, for the planner; 0, or -1 with a message. */
    int (*query)(int i, engine_device_info *info, char *err, size_t err_size);
    /* The backend's state for layers [plan->cpu_layers, n_layer) on the plan's devices, with
     * n_cells KV cells, passes of up to n_batch tokens and sequences of up to max_pos positions
     * (weights uploaded); NULL with a message. */
    void *(*create)(const llama_model *m, const engine_plan *plan, int32_t n_cells, int32_t n_batch,
                    int32_t max_pos, engine_progress_fn progress, void *progress_ctx, char *err, size_t err_size);
    /* What each device holds and its memory, one line each, into buf (for the load log). */
    int (*describe)(void *self, char *buf, size_t size);
    /* Split statistics: start != 0 resets and starts them; 0 stops them and fills out[0..max)
     * with each device's shares. The number of devices, or -1. */
    int (*stats)(void *self, int start, engine_dev_share *out, int max);
    /* Op offload (llama.cpp's): products of many tokens with the CPU's layers' weights computed on
     * a device, each weight copied over for its product. offload_new prepares device dev for
     * spec's weights (engine_offload_spec) and says what it holds in desc; NULL with a message
     * when it cannot. offload_matmul: out[t][r] = dot(W row r, x[t]) for t < n_tok, as the CPU's
     * product, with the caller's threads (par, or NULL) copying the weight into pinned memory;
     * 0, 1 when it does not take this weight (the caller computes it), or -1 with a message.
     * offload_free before the weights and host buffers go. */
    void *(*offload_new)(int dev, const engine_offload_spec *spec, char *desc, size_t desc_size, char *err,
                         size_t err_size);
    int (*offload_matmul)(void *off, const llama_weight *w, const float *x, int64_t n_tok, float *out,
                          const engine_par *par, char *err, size_t err_size);
    void (*offload_free)(void *off);
} engine_gpu_backend;

typedef struct {
    int32_t n_ctx;         /* KV cells of all sequences together (-c); 0: the model's training
                              context times n_seq_max */
    int32_t n_batch;       /* tokens per forward pass of the backend (-b for run, -ub for batch) */
    int32_t n_seq_max;     /* sequences held at once (-np); each may hold n_ctx / n_seq_max
                              positions, at most the training context */
    int n_threads;         /* CPU threads (-t) */
    int n_threads_batch;   /* CPU threads for passes of more than one token (-tb); 0: n_threads */
    int cpu_exact;         /* 1: CPU layers take the exact f32 reference path (--cpu-exact); 0: the
                              fast one (8-bit activations, persistent threads) */
    int cpu_act_single;    /* fast path: 1 rounds each activation to one 8-bit value, as llama.cpp
                              and the GPU's decode matvecs do, instead of the default pair (value
                              and residual); the yardstick of the GPU decode tests. 0 or 1 */
    int no_op_offload;     /* 1: the CPU's layers compute prompts themselves (--no-op-offload); 0: with
                              -ngl partial on the fast path, their products of at least
                              ENGINE_OP_OFFLOAD_MIN_TOK tokens run on a GPU (engine_gpu_backend) */
    engine_split split;    /* -ngl, -sm, -dev, -ts, -mg (engine/plan.h); n_gpu_layers -1 (default):
                              every layer on the GPUs when `gpu` has a device; 0: the CPU */
    const engine_gpu_backend *gpu;  /* NULL: the CPU only */
    engine_progress_fn progress;    /* NULL: no progress reports */
    void *progress_ctx;
    int use_mmap;          /* 0: read the file into memory (--no-mmap) */
    int use_mlock;         /* lock the file's bytes in RAM (--mlock; engine_load_warning if it fails) */
} engine_params;

/* Products of at least this many tokens go to the GPU under op offload (llama.cpp's threshold: below
 * it, copying the weight over costs more than the CPU's product). */
#define ENGINE_OP_OFFLOAD_MIN_TOK 32

/* engine_load's failures, so the CLI can pick its exit status. */
enum {
    ENGINE_OK = 0,
    ENGINE_EBADINPUT = -1,  /* the file: missing, malformed, unsupported model */
    ENGINE_EPARAM = -2,     /* a parameter does not suit the model (e.g. -c past its training length) */
    ENGINE_ERUNTIME = -3,   /* out of memory, device failure */
    ENGINE_EFULL = -4       /* engine_decode: no free KV page for this batch; nothing changed */
};

typedef struct engine engine;

/* Defaults: the model's context, batch 2048, one sequence, min(online CPUs, 8) threads, every
 * layer on the GPU when one is passed and present (device 0), mmap. */
engine_params engine_default_params(void);

/* Opens and checks a model file and prepares it to run. ENGINE_OK with *out set, or a negative
 * ENGINE_E* code with a message naming the file, key, tensor or parameter. */
int engine_load(engine **out, const char *path, const engine_params *p, char *err, size_t err_size);
void engine_free(engine *e);

const tokenizer *engine_tokenizer(const engine *e);
const llama_hparams *engine_hparams(const engine *e);
int32_t engine_n_ctx(const engine *e);      /* positions one sequence may hold */
int32_t engine_n_seq_max(const engine *e);
int32_t engine_n_vocab(const engine *e);
/* What computes the logits, for logs: "CPU" or "CUDA". */
const char *engine_backend(const engine *e);
/* What engine_load could not do but went on without (--mlock refused by the limits), or NULL. */
const char *engine_load_warning(const engine *e);
/* What holds the model, one line per device (and the CPU's layers when -ngl is partial) with
 * weights, KV cache and memory, for the load log; on the CPU backend the memory its fast path
 * adds (weights repacked for decode), or "". */
void engine_describe(const engine *e, char *buf, size_t size);
/* Per-device time shares of the passes between a call with start != 0 and one with start == 0
 * (which fills out[0..max)); the number of devices, 0 on the CPU backend. With one device a
 * start collects nothing and needs no stop. */
int engine_split_stats(engine *e, int start, engine_dev_share *out, int max);
/* Bytes of one K or V value in the backend's cache (4 on the CPU, 2 for the f16 CUDA cache). */
int engine_kv_elem_bytes(const engine *e);

/* Evaluates tokens[0..n) at positions pos..pos+n-1 of sequence 0, replacing whatever the
 * cache held from pos on; positions before pos must have been evaluated. Writes n_vocab logits
 * for the last token, or for every token (n rows) when all_logits. 0, or -1 with a message. */
int engine_eval(engine *e, const int32_t *tokens, int32_t n, int32_t pos, float *logits,
                int all_logits, char *err, size_t err_size);
/* Where engine_eval and engine_decode can leave up to `rows` rows of logits without a copy: the
 * backend's own host buffer (CUDA: the pinned one the device copies into, as llama.cpp's
 * llama_get_logits), to pass as their logits argument; each call overwrites it. engine_decode
 * takes it only for a batch of one pass (at most the backend's n_batch tokens: ENGINE_EPARAM
 * otherwise); engine_eval, whose one row comes from its last pass, for any n. NULL when the
 * backend has none or it holds fewer rows (then pass your own). Valid until engine_free. */
float *engine_logits_buffer(engine *e, int32_t rows);
/* A hint for generation loops: on, each one-token engine_eval or engine_eval_greedy step lets
 * the backend launch the next one-token step at once, before its token is known (one-GPU CUDA:
 * the launch then overlaps the step, and the next call only hands the token over); off, no more
 * are launched, and one already launched still serves the next such call. A launched step that
 * the next call does not match (another length, sequence or output, a KV operation, engine_free)
 * is run on a placeholder first, which costs one step's time; so switch it off before the last
 * step of a loop. Results are the same either way. No effect on other backends. */
void engine_decode_ahead(engine *e, int on);

/* --- several sequences (llama.cpp's llama_batch and llama_memory_seq_* ideas) ---------------- */

/* One token of a batch. */
typedef struct {
    int32_t token;
    int32_t pos;          /* position in its sequence */
    int32_t seq;          /* 0 <= seq < n_seq_max */
    int32_t want_logits;  /* nonzero: a row of logits for this token */
    int32_t no_eog;       /* engine_decode_greedy only: this row's pick is never an end-of-
                             generation token (llama.cpp's --ignore-eos biases them to -inf) */
} engine_token;

/* Evaluates n tokens of any sequences in one forward pass (split into passes of n_batch tokens
 * when larger). Each sequence's tokens must continue it: its first token in the batch at
 * engine_seq_len(seq), the next at +1, and so on, within engine_n_ctx positions. Logits rows go
 * to logits[k * n_vocab] for the k-th token (in batch order) that wants them. A sequence's
 * logits do not depend on the other sequences in the batch. Returns 0; ENGINE_EPARAM with a
 * message for a malformed batch or ENGINE_EFULL when the cache lacks free pages (both change
 * nothing); ENGINE_ERUNTIME on a backend failure (then the sequences of the batch keep their
 * old lengths). */
int engine_decode(engine *e, const engine_token *t, int32_t n, float *logits, char *err, size_t err_size);

/* Greedy decoding (the sampler at temp <= 0 without penalties): as engine_eval and engine_decode,
 * but each token that wants logits gets the id of its largest logit instead (ties: the lowest
 * id; NaN never wins): *next for the last token of engine_eval_greedy, ids[k] for the k-th
 * token wanting logits in engine_decode_greedy. A backend with forward_greedy (CUDA) picks on
 * the device and copies back only the ids. */
int engine_eval_greedy(engine *e, const int32_t *tokens, int32_t n, int32_t pos, int32_t *next, char *err,
                       size_t err_size);
int engine_decode_greedy(engine *e, const engine_token *t, int32_t n, int32_t *ids, char *err, size_t err_size);
/* The index of the largest of n values, by the rule above (0 when all are NaN). */
int32_t engine_argmax(const float *v, int32_t n);
/* The same among the indices not in skip[0..n_skip) (0 when none is left). */
int32_t engine_argmax_skip(const float *v, int32_t n, const int32_t *skip, int32_t n_skip);
/* While on, engine_eval_greedy's picks are never end-of-generation tokens (its rows' no_eog). */
void engine_greedy_no_eog(engine *e, int on);

/* Positions sequence seq holds (0 when empty or out of range). */
int32_t engine_seq_len(const engine *e, int32_t seq);
/* Removes positions [p0, p1) of seq; p1 < 0 means to the end. Only a tail can be removed
 * (p1 < 0 or p1 >= the length): pages no sequence uses any more return to the pool. 0, or -1
 * with a message. */
int engine_seq_rm(engine *e, int32_t seq, int32_t p0, int32_t p1, char *err, size_t err_size);
/* Makes dst hold src's positions [0, p1) (p1 < 0: all of src) by sharing src's pages (no copy;
 * a shared, partly filled page is copied when either sequence next writes into it). dst's old
 * contents are dropped first. p0 must be 0 (positions are never moved). 0, or -1 with a message. */
int engine_seq_cp(engine *e, int32_t src, int32_t dst, int32_t p0, int32_t p1, char *err, size_t err_size);
/* Drops every sequence but seq. */
void engine_seq_keep(engine *e, int32_t seq);
/* Drops all of seq's positions. */
void engine_seq_free(engine *e, int32_t seq);
/* Free pages of the pool and its size, in pages of ENGINE_KV_PAGE cells. The pool holds
 * ceil(n_ctx / page) + n_seq_max pages, so sequences that each stay within engine_n_ctx never
 * exhaust it, however they share; ENGINE_EFULL guards the invariant. */
int32_t engine_kv_pages_free(const engine *e);
int32_t engine_kv_pages_total(const engine *e);

/* --- KV state of a sequence, for prompt caches ---------------------------------------------- */

/* A 64-bit FNV-1a hash identifying the model file: its size, every metadata key with its type
 * and (numeric, string) value, the tensor table (name, type, shape, offset) and the first 256
 * bytes of every tensor's data. */
uint64_t engine_model_hash(const engine *e);
/* Values per K (or V) row of one cell: n_head_kv * head_dim. */
int32_t engine_kv_dim(const engine *e);
/* Reads (get) or writes (set) K and V of positions [p0, p0+n) of seq in layer l, f32,
 * k and v each [n][engine_kv_dim]. 0, or -1 with a message. */
int engine_seq_kv_get(engine *e, int32_t seq, int32_t layer, int32_t p0, int32_t n, float *k, float *v,
                      char *err, size_t err_size);
int engine_seq_kv_set(engine *e, int32_t seq, int32_t layer, int32_t p0, int32_t n, const float *k,
                      const float *v, char *err, size_t err_size);
/* Grows an empty seq to n positions with fresh pages whose contents are undefined until
 * engine_seq_kv_set writes them. 0, ENGINE_EFULL or ENGINE_EPARAM with a message. */
int engine_seq_alloc(engine *e, int32_t seq, int32_t n, char *err, size_t err_size);

#endif
