/* The chain backend: a forward pass runs every stage in order on the same batch, stage i leaving
 * the hidden state of its last layer in a host buffer that stage i + 1 starts from; KV
 * operations go to the stage that holds the layer (kv_copy to all). */
#include <stdio.h>
#include <stdlib.h>

#include "engine/chain.h"

struct chain {
    engine_backend_ops ops;  /* this chain's operations (name and kv_elem_bytes vary per chain) */
    char name[128];
    int n;
    chain_stage *stages;     /* [n] */
    int32_t n_batch, n_layer;
    /* Hidden states between stages, [n_batch][n_embd] f32 each: stage i writes hidden[i % 2] and
     * stage i + 1 reads it, so no stage reads and writes the same buffer. One when n == 2. */
    float *hidden[2];
};

/* Prefixes a stage's error with which stage it was. */
static void stage_err(const chain *c, int i, const char *msg, char *err, size_t err_size) {
    const chain_stage *s = &c->stages[i];
    snprintf(err, err_size, "stage %d of %d (%s, layers %d..%d): %s", i, c->n, s->ops->name, s->layer0,
             s->layer1 - 1, msg);
}

/* Every stage on batch b; the last one writes logits, or with ids set, its forward_greedy ids. */
static int run(chain *c, const engine_fwd_batch *b, float *logits, int32_t *ids, char *err, size_t err_size) {
    if (b->n_tokens > c->n_batch) {
        snprintf(err, err_size, "chain forward: %d tokens, at most %d", b->n_tokens, c->n_batch);
        return -1;
    }
    for (int i = 0; i < c->n; i++) {
        const chain_stage *s = &c->stages[i];
        int last = i == c->n - 1;
        engine_fwd_batch sb = *b;
        sb.x_in = i == 0 ? b->x_in : c->hidden[(i - 1) % 2];
        sb.x_out = last ? b->x_out : c->hidden[i % 2];
        char msg[512];
        int rc = !last ? s->ops->forward(s->self, &sb, NULL, msg, sizeof msg)
                 : ids ? s->ops->forward_greedy(s->self, &sb, ids, msg, sizeof msg)
                       : s->ops->forward(s->self, &sb, logits, msg, sizeof msg);
        if (rc) {
            stage_err(c, i, msg, err, err_size);
            return -1;
        }
    }
    return 0;
}

static int fwd(void *self, const engine_fwd_batch *b, float *logits, char *err, size_t err_size) {
    return run(self, b, logits, NULL, err, err_size);
}

/* Only in the ops of a chain whose last stage has forward_greedy (so a GPU last stage picks the
 * ids on the device); otherwise the engine takes the argmax of fwd's logits. */
static int fwd_greedy(void *self, const engine_fwd_batch *b, int32_t *ids, char *err, size_t err_size) {
    return run(self, b, NULL, ids, err, err_size);
}

static int kv_copy(void *self, int32_t dst, int32_t src, int32_t n, char *err, size_t err_size) {
    chain *c = self;
    for (int i = 0; i < c->n; i++) {
        char msg[512];
        if (c->stages[i].ops->kv_copy(c->stages[i].self, dst, src, n, msg, sizeof msg)) {
            stage_err(c, i, msg, err, err_size);
            return -1;
        }
    }
    return 0;
}

/* The stage holding layer l, or -1 with a message. */
static int stage_of(const chain *c, int32_t l, char *err, size_t err_size) {
    for (int i = 0; i < c->n; i++)
        if (l >= c->stages[i].layer0 && l < c->stages[i].layer1) return i;
    snprintf(err, err_size, "chain KV: layer %d outside the model's layers 0..%d", l, c->n_layer - 1);
    return -1;
}

static int kv_get(void *self, int32_t layer, const int32_t *cells, int32_t n, float *k, float *v, char *err,
                  size_t err_size) {
    chain *c = self;
    int i = stage_of(c, layer, err, err_size);
    char msg[512];
    if (i < 0) return -1;
    if (c->stages[i].ops->kv_get(c->stages[i].self, layer, cells, n, k, v, msg, sizeof msg)) {
        stage_err(c, i, msg, err, err_size);
        return -1;
    }
    return 0;
}

static int kv_set(void *self, int32_t layer, const int32_t *cells, int32_t n, const float *k, const float *v,
                  char *err, size_t err_size) {
    chain *c = self;
    int i = stage_of(c, layer, err, err_size);
    char msg[512];
    if (i < 0) return -1;
    if (c->stages[i].ops->kv_set(c->stages[i].self, layer, cells, n, k, v, msg, sizeof msg)) {
        stage_err(c, i, msg, err, err_size);
        return -1;
    }
    return 0;
}

static void ops_free(void *self) { chain_free(self); }

static void free_stages(const chain_stage *stages, int n) {
    for (int i = 0; i < n; i++)
        if (stages[i].ops && stages[i].ops->free && stages[i].self) stages[i].ops->free(stages[i].self);
}

chain *chain_new(const llama_model *m, const chain_stage *stages, int n, int32_t n_batch, char *err,
                 size_t err_size) {
    int32_t n_layer = m->hp.n_layer;
    if (n < 1 || n_batch < 1) {
        snprintf(err, err_size, "chain: %d stages, batch %d (at least 1 each)", n, n_batch);
        free_stages(stages, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        const chain_stage *s = &stages[i];
        int32_t want0 = i ? stages[i - 1].layer1 : 0;
        if (s->layer0 != want0 || s->layer1 <= s->layer0 || s->layer1 > n_layer ||
            (i == n - 1 && s->layer1 != n_layer)) {
            snprintf(err, err_size, "chain: stage %d holds layers %d..%d; stages must cover 0..%d in order, "
                     "this one starting at %d, none empty", i, s->layer0, s->layer1 - 1, n_layer - 1, want0);
            free_stages(stages, n);
            return NULL;
        }
        const engine_backend_ops *o = s->ops;
        if (!o || !s->self || !o->forward || !o->kv_copy || !o->kv_get || !o->kv_set || !o->free) {
            snprintf(err, err_size, "chain: stage %d has no state or lacks an operation", i);
            free_stages(stages, n);
            return NULL;
        }
    }
    chain *c = calloc(1, sizeof *c);
    size_t row = (size_t)m->hp.n_embd * sizeof(float);
    if (c) c->stages = malloc((size_t)n * sizeof *c->stages);
    int n_hidden = n - 1 < 2 ? n - 1 : 2;
    int oom = !c || !c->stages || (size_t)n_batch > SIZE_MAX / row;
    for (int i = 0; i < n_hidden && !oom; i++) oom = !(c->hidden[i] = malloc((size_t)n_batch * row));
    if (oom) {
        snprintf(err, err_size, "chain: out of memory for %d stages' hidden states of %d tokens; use a smaller -b",
                 n, n_batch);
        free_stages(stages, n);
        if (c) {
            free(c->stages);
            free(c->hidden[0]);
            free(c);
        }
        return NULL;
    }
    for (int i = 0; i < n; i++) c->stages[i] = stages[i];
    c->n = n;
    c->n_batch = n_batch;
    c->n_layer = n_layer;
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof c->name; i++) {
        int w = snprintf(c->name + len, sizeof c->name - len, "%s%s", i ? "+" : "", stages[i].ops->name);
        len += w > 0 ? (size_t)w : 0;
    }
    const engine_backend_ops *last = stages[n - 1].ops;
    c->ops = (engine_backend_ops){
        .name = c->name,
        /* The last stage's (the GPU's in CPU+CUDA): it only feeds engine_kv_elem_bytes' bandwidth
         * counts, which then take that size for every layer, an estimate for a mixed chain. */
        .kv_elem_bytes = last->kv_elem_bytes,
        .forward = fwd,
        .forward_greedy = last->forward_greedy ? fwd_greedy : NULL,
        .kv_copy = kv_copy,
        .kv_get = kv_get,
        .kv_set = kv_set,
        .free = ops_free,
    };
    return c;
}

const engine_backend_ops *chain_ops(const chain *c) { return &c->ops; }

void chain_free(chain *c) {
    if (!c) return;
    free_stages(c->stages, c->n);
    free(c->stages);
    free(c->hidden[0]);
    free(c->hidden[1]);
    free(c);
}
