/* The CPU reference forward pass of a Llama model: f32 activations, weights dequantised a row
 * at a time, an f32 KV cache. Results do not depend on the thread count: every output value is
 * computed by one thread in a fixed order. */
#ifndef MGI_ENGINE_FORWARD_CPU_H
#define MGI_ENGINE_FORWARD_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "models/llama.h"

typedef struct forward_cpu forward_cpu;

/* State for up to n_ctx positions, evaluated n_batch tokens at a time with n_threads threads.
 * The model must outlive the state. NULL with a message on bad sizes or out of memory. */
forward_cpu *forward_cpu_new(const llama_model *m, int32_t n_ctx, int32_t n_batch, int n_threads,
                             char *err, size_t err_size);
void forward_cpu_free(forward_cpu *f);

/* Evaluates tokens[0..n) at positions pos..pos+n-1 (overwriting the cache from pos on; earlier
 * positions must have been evaluated). Writes n rows of n_vocab logits when all_logits, else the
 * last row only. 0, or -1 with a message (position past the context, token out of range). */
int forward_cpu_eval(forward_cpu *f, const int32_t *tokens, int32_t n, int32_t pos, float *logits,
                     int all_logits, char *err, size_t err_size);

#endif
