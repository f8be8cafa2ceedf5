/* The CPU forward pass of a model, a backend of engine/batch.h: f32 activations and an f32 paged
 * KV cache, with weights either dequantised a row at a time (the exact reference, the default of
 * a new state) or multiplied as stored against paired 8-bit activations on a persistent thread
 * pool (fast, forward_cpu_fast; engine/forward_cpu_exec.h). Results depend
 * neither on the thread count nor on the batch: every output value is computed by one thread in
 * a fixed order from its own token and sequence. */
#ifndef MGI_ENGINE_FORWARD_CPU_H
#define MGI_ENGINE_FORWARD_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "engine/batch.h"
#include "engine/forward_cpu_exec.h"
#include "models/model.h"

typedef struct forward_cpu forward_cpu;

/* State for layers [layer0, layer1) of m (0, n_layer: the whole model), n_cells KV cells, passes
 * of up to n_batch tokens, sequences of up to max_pos positions, n_threads threads. The KV cache
 * holds only those layers; kv_get/kv_set take global layer indices and refuse others. When
 * layer0 > 0 a pass starts from the batch's x_in, when layer1 < n_layer it ends by writing x_out
 * (engine/batch.h). The model must outlive the state. NULL with a message on a bad range, bad
 * sizes or out of memory. */
forward_cpu *forward_cpu_new(const llama_model *m, int32_t layer0, int32_t layer1, int32_t n_cells,
                             int32_t n_batch, int32_t max_pos, int n_threads, char *err, size_t err_size);
void forward_cpu_free(forward_cpu *f);
/* Switches a new state to the fast path (before its first pass), its activations rounded to pairs
 * of 8-bit values (paired 1) or to one each (0: llama.cpp's rounding). 0, or -1 with a message. */
int forward_cpu_fast(forward_cpu *f, int paired, char *err, size_t err_size);
/* The matrices of the state's layers (and its head when it holds the last layer) in the order a
 * pass multiplies them, n_out of them, in a malloc'd array; NULL when out of memory. */
const llama_weight **forward_cpu_matrices(const forward_cpu *f, int *n_out);
/* The state's activation buffers (inputs and outputs of its products), at most cap of them, into
 * p[] and bytes[]; their number. */
int forward_cpu_buffers(const forward_cpu *f, void **p, size_t *bytes, int cap);
/* Fast path: hands products of many tokens to another device first (forward_cpu_exec.h's
 * forward_cpu_offload; the state owns o->ctx from here on). 0, or -1 on the exact path, where
 * nothing is set and the caller keeps o->ctx. Results then depend on the batch: a pass of at
 * least o->min_tok tokens takes the device's products. */
int forward_cpu_set_offload(forward_cpu *f, const forward_cpu_offload *o);
/* What to tell a user whose CPU's best path (quant_isa_best) is the portable one: the fast path's
 * products then run plain C, several times slower; NULL on AVX2 and above. */
const char *forward_cpu_isa_note(quant_isa best);
/* Bytes of anonymous memory holding weights repacked by forward_cpu_fast (0 on the exact path):
 * memory the fast path adds to the file's. */
size_t forward_cpu_repacked_bytes(const forward_cpu *f);
/* Threads for passes of one token and of more (llama.cpp's -t and -tb), each at most the
 * n_threads it was created with (a count out of 1..n_threads means n_threads). */
void forward_cpu_threads(forward_cpu *f, int n_threads, int n_threads_batch);

/* The backend operations; self is a forward_cpu. */
extern const engine_backend_ops forward_cpu_ops;

#endif
