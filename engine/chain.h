/* A backend that runs a model as consecutive stages, each a backend of engine/batch.h holding a
 * range of layers (partial offload, -ngl N: the first layers on the CPU, the last N on the
 * GPUs). The hidden state passes from stage to stage through host buffers; the last stage
 * computes the logits. */
#ifndef MGI_ENGINE_CHAIN_H
#define MGI_ENGINE_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/batch.h"
#include "models/model.h"

/* One stage: a backend's operations and state, computing layers [layer0, layer1). */
typedef struct {
    const engine_backend_ops *ops;
    void *self;
    int32_t layer0, layer1;
} chain_stage;

typedef struct chain chain;

/* A chain over stages[0..n) of model m, in order: stage 0 starts at layer 0, each next stage at
 * the layer where the previous one ends, the last ends at n_layer, none empty. Passes of up to
 * n_batch tokens (no more than any stage accepts). The chain owns the stages from this call on:
 * it frees them with their ops->free, also when it fails (NULL with a message: ranges that do
 * not chain, a missing operation, out of memory). */
chain *chain_new(const llama_model *m, const chain_stage *stages, int n, int32_t n_batch, char *err,
                 size_t err_size);

/* The chain's operations, with self = the chain: the name joins the stages' ("CPU+CUDA"),
 * kv_elem_bytes is the last stage's, forward_greedy is set when the last stage has one. The
 * struct lives in the chain (ops->free(chain) frees it too). */
const engine_backend_ops *chain_ops(const chain *c);

/* Frees the chain and its stages. */
void chain_free(chain *c);

#endif
