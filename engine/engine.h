/* The engine: one loaded model ready to compute logits, whatever computes them. The CLI talks
 * only to this interface: load a file, evaluate tokens at positions, read logits. Today the CPU
 * reference path runs everything; a CUDA backend and multi-GPU splits slot in behind the same
 * calls (engine_params carries their flags). */
#ifndef MGI_ENGINE_H
#define MGI_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/tokenizer.h"
#include "models/llama.h"

typedef struct {
    int32_t n_ctx;         /* positions (-c); 0: the model's training context */
    int32_t n_batch;       /* tokens per forward batch (-b) */
    int n_threads;         /* CPU threads (-t) */
    int32_t n_gpu_layers;  /* -ngl: layers on GPUs (no GPU backend yet: the CPU runs all) */
    int use_mmap;          /* 0: read the file into memory (--no-mmap) */
} engine_params;

/* engine_load's failures, so the CLI can pick its exit status. */
enum {
    ENGINE_OK = 0,
    ENGINE_EBADINPUT = -1,  /* the file: missing, malformed, unsupported model */
    ENGINE_EPARAM = -2,     /* a parameter does not suit the model (e.g. -c past its training length) */
    ENGINE_ERUNTIME = -3    /* out of memory, device failure */
};

typedef struct engine engine;

/* Defaults: the model's context, batch 2048, min(online CPUs, 8) threads, no GPU layers, mmap. */
engine_params engine_default_params(void);

/* Opens and checks a model file and prepares it to run. ENGINE_OK with *out set, or a negative
 * ENGINE_E* code with a message naming the file, key, tensor or parameter. */
int engine_load(engine **out, const char *path, const engine_params *p, char *err, size_t err_size);
void engine_free(engine *e);

const tokenizer *engine_tokenizer(const engine *e);
const llama_hparams *engine_hparams(const engine *e);
int32_t engine_n_ctx(const engine *e);
int32_t engine_n_vocab(const engine *e);
/* What computes the logits, for logs: "CPU". */
const char *engine_backend(const engine *e);

/* Evaluates tokens[0..n) at positions pos..pos+n-1 of the one sequence, replacing whatever the
 * cache held from pos on; positions before pos must have been evaluated. Writes n_vocab logits
 * for the last token, or for every token (n rows) when all_logits. 0, or -1 with a message. */
int engine_eval(engine *e, const int32_t *tokens, int32_t n, int32_t pos, float *logits,
                int all_logits, char *err, size_t err_size);

#endif
