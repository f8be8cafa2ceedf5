/* The engine behind mgi's subcommands: opens the GGUF file, binds the model, loads the tokenizer
 * and runs the forward pass on the backend that holds the weights (the CPU reference for now). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/forward_cpu.h"
#include "gguf/gguf.h"

struct engine {
    gguf_ctx *g;
    llama_model model;
    tokenizer *tok;
    forward_cpu *cpu;
    int32_t n_ctx;
};

engine_params engine_default_params(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    engine_params p = {
        .n_ctx = 0,
        .n_batch = 2048,
        .n_threads = n < 1 ? 1 : n > 8 ? 8 : (int)n,
        .n_gpu_layers = 0,
        .use_mmap = 1,
    };
    return p;
}

int engine_load(engine **out, const char *path, const engine_params *p, char *err, size_t err_size) {
    *out = NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, err_size, "out of memory");
        return ENGINE_ERUNTIME;
    }
    int rc = ENGINE_EBADINPUT;
    if (!(e->g = gguf_open(path, p->use_mmap, err, err_size))) goto fail;
    if (llama_model_load(&e->model, e->g, err, err_size)) goto fail;
    if (!(e->tok = tokenizer_load(e->g, err, err_size))) goto fail;
    const llama_hparams *hp = &e->model.hp;
    if (tokenizer_n_vocab(e->tok) > hp->n_vocab) {
        snprintf(err, err_size, "%s: the vocabulary has %d tokens but token_embd.weight only %d rows",
                 path, tokenizer_n_vocab(e->tok), hp->n_vocab);
        goto fail;
    }
    rc = ENGINE_EPARAM;
    e->n_ctx = p->n_ctx ? p->n_ctx : hp->n_ctx_train;
    if (e->n_ctx < 1 || e->n_ctx > hp->n_ctx_train) {
        snprintf(err, err_size, "-c %d: the model was trained for a context of %d (llama.context_length); "
                 "use -c 1..%d", e->n_ctx, hp->n_ctx_train, hp->n_ctx_train);
        goto fail;
    }
    if (p->n_batch < 1 || p->n_threads < 1) {
        snprintf(err, err_size, "batch size (%d) and threads (%d) must be at least 1", p->n_batch, p->n_threads);
        goto fail;
    }
    rc = ENGINE_ERUNTIME;
    if (!(e->cpu = forward_cpu_new(&e->model, e->n_ctx, p->n_batch, p->n_threads, err, err_size))) goto fail;
    *out = e;
    return ENGINE_OK;
fail:
    engine_free(e);
    return rc;
}

void engine_free(engine *e) {
    if (!e) return;
    forward_cpu_free(e->cpu);
    tokenizer_free(e->tok);
    llama_model_free(&e->model);
    gguf_close(e->g);
    free(e);
}

const tokenizer *engine_tokenizer(const engine *e) { return e->tok; }
const llama_hparams *engine_hparams(const engine *e) { return &e->model.hp; }
int32_t engine_n_ctx(const engine *e) { return e->n_ctx; }
int32_t engine_n_vocab(const engine *e) { return e->model.hp.n_vocab; }
const char *engine_backend(const engine *e) {
    (void)e;
    return "CPU";
}

int engine_eval(engine *e, const int32_t *tokens, int32_t n, int32_t pos, float *logits,
                int all_logits, char *err, size_t err_size) {
    return forward_cpu_eval(e->cpu, tokens, n, pos, logits, all_logits, err, err_size);
}
