/* The machinery under the CPU forward pass (engine/forward_cpu.c): how its matrix products are
 * computed and how its loops are spread over threads. One recipe reader runs on either path:
 *   exact: weight rows dequantised to f32 and dotted in f32, threads started per loop; the
 *          yardstick the fidelity tests compare with llama.cpp's goldens.
 *   fast:  weights multiplied in their stored blocks against paired 8-bit activations
 *          (engine/cpu_matmul.h) and every loop on a persistent pool (engine/threadpool.h).
 * Both give results that depend neither on the thread count nor on the batch. */
#ifndef MGI_ENGINE_FORWARD_CPU_EXEC_H
#define MGI_ENGINE_FORWARD_CPU_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "engine/cpu_matmul.h"
#include "engine/threadpool.h"
#include "models/model.h"

/* Work on items [lo, hi) of a loop, on thread tid (0 = the caller). */
typedef void (*forward_cpu_exec_fn)(void *ctx, int64_t lo, int64_t hi, int tid);

/* Products handed to another device (engine.h's op offload): those of at least min_tok tokens go
 * to matmul first, which returns 0 (done), 1 (declined: the CPU computes it) or -1 (an error).
 * The exec owns ctx from forward_cpu_exec_offload on (free at forward_cpu_exec_free). */
struct engine_par; /* engine.h: the exec's pool, lent to the device's copies */
typedef struct {
    void *ctx;
    int64_t min_tok;
    int (*matmul)(void *ctx, const llama_weight *w, const float *x, int64_t n_tok, float *out,
                  const struct engine_par *par, char *err, size_t err_size);
    void (*free)(void *ctx);
} forward_cpu_offload;

typedef struct {
    int n_threads;        /* the most threads; scratch is sized for them */
    int64_t max_cols;
    float *scratch;       /* exact path: per thread, dequantised weight rows */
    threadpool *pool;     /* fast path: NULL on the exact path */
    cpu_matmul_ctx mm;
    quant_isa isa;
    /* Fast path: weights repacked for decode (forward_cpu_exec_repack), in one anonymous mapping
     * of ilv_bytes (huge pages where the kernel gives them): ilv[i] is ilv_of[i]'s form. */
    const llama_weight **ilv_of;
    const void **ilv;
    int n_ilv, ilv_next;  /* ilv_next: where the lookup starts (products come in a fixed order) */
    void *ilv_mem;
    size_t ilv_bytes, ilv_map_bytes;
    forward_cpu_offload off; /* matmul NULL: none */
} forward_cpu_exec;

/* The exact path for n_threads threads and weight rows of up to max_cols. 0, or -1 with a
 * message (out of memory). */
int forward_cpu_exec_init(forward_cpu_exec *x, int n_threads, int64_t max_cols, char *err, size_t err_size);
void forward_cpu_exec_free(forward_cpu_exec *x);
/* Switches to the fast path: starts the pool. 0, or -1 with a message. */
int forward_cpu_exec_fast(forward_cpu_exec *x, char *err, size_t err_size);
/* Fast path: repacks the weights among w[0..n) that have an interleaved form on this CPU
 * (engine/cpu_matmul.h) into anonymous memory, which products of few tokens then read instead
 * of the file mapping: the memory adds x->ilv_bytes to the weights'. 0, or -1 with a message
 * (out of memory). */
int forward_cpu_exec_repack(forward_cpu_exec *x, const llama_weight *const *w, int n, char *err, size_t err_size);
/* The bytes forward_cpu_exec_repack gives w's repacked form on path isa (its place in the
 * mapping, whole 4 KiB units), 0 where the rows stay as stored: for plans (engine/plan.c), from
 * the type and shape alone (the rows need not be mapped). */
size_t forward_cpu_exec_repack_span(const llama_weight *w, quant_isa isa);
/* Fast path: products of at least o->min_tok tokens go to o first (forward_cpu_offload). */
void forward_cpu_exec_offload(forward_cpu_exec *x, const forward_cpu_offload *o);
static inline int forward_cpu_exec_is_fast(const forward_cpu_exec *x) { return x->pool != NULL; }

/* Runs fn over [0, n) on up to nt threads (exact path) or on the pool (fast path; the pool has
 * n_threads threads whatever nt says). */
void forward_cpu_exec_for(forward_cpu_exec *x, int nt, int64_t n, forward_cpu_exec_fn fn, void *ctx);

/* out[t][r] = dot(W row r, in[t]) for t < n_tok, on up to nt threads, or through the offload
 * (forward_cpu_offload) where one is set and takes it. A weight type the fast kernels lack takes
 * the exact product. 0, or -1 with a message. */
int forward_cpu_exec_matmul(forward_cpu_exec *x, int nt, const llama_weight *w, const float *in, int64_t n_tok,
                            float *out, char *err, size_t err_size);

/* out[k] = W_k in for k < n_w, weights of one input: on the fast path, where they share type and
 * width, as one product (cpu_matmul_multi: one activation quantisation, one pool job); else
 * one forward_cpu_exec_matmul each. Results as forward_cpu_exec_matmul's. 0, or -1 with a
 * message. */
int forward_cpu_exec_matmuls(forward_cpu_exec *x, int nt, const llama_weight *const *w, int n_w, const float *in,
                             int64_t n_tok, float *const *out, char *err, size_t err_size);
/* The f32 dot product of the exact path: eight partial sums in a fixed order. */
float forward_cpu_exec_dot(const float *a, const float *b, int64_t n);

#endif
