/* engine/chain over CPU stages of a layer range each, against one CPU backend of every layer, on
 * the tiny real models (f32 and mixed quants): a prompt pass, decode steps of several sequences
 * with shared and copied pages, greedy ids and the KV operations give bit-for-bit the same
 * results; bad stages, ranges and layers are refused with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/chain.h"
#include "engine/engine.h"
#include "engine/forward_cpu.h"
#include "gguf/gguf.h"
#include "test.h"

enum { PAGE = ENGINE_KV_PAGE, N_PAGES = 8, CELLS = N_PAGES * PAGE, NB = 128, MAX_POS = 128, MAX_SEQ = 4 };

static uint32_t rng_state = 12345;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* A sequence as the test keeps it: its page table and how many positions it holds. */
typedef struct {
    int32_t pages[4];
    int32_t n_pages, len;
} tseq;

static int32_t cell_of(const tseq *s, int32_t p) { return s->pages[p / PAGE] * PAGE + p % PAGE; }

/* One pass: count[i] new tokens of sequence i (random ids), grouped by sequence; logits for the
 * last token of each sequence, or for every token when all. */
typedef struct {
    int32_t tok[NB], pos[NB], seq[NB], cell[NB], out[NB];
    engine_fwd_seq fs[MAX_SEQ];
    engine_fwd_batch b;
} tbatch;

static void build(tbatch *t, const tseq *s, int ns, const int32_t *count, int32_t n_vocab, int all) {
    int32_t n = 0, rows = 0, n_fs = 0, max_pos = 0;
    for (int i = 0; i < ns; i++) {
        if (!count[i]) continue;
        for (int32_t j = 0; j < count[i]; j++, n++) {
            t->tok[n] = (int32_t)(rng() % (uint32_t)n_vocab);
            t->pos[n] = s[i].len + j;
            t->seq[n] = n_fs;
            t->cell[n] = cell_of(&s[i], t->pos[n]);
            t->out[n] = all || j == count[i] - 1 ? rows++ : -1;
        }
        t->fs[n_fs++] = (engine_fwd_seq){s[i].pages, s[i].n_pages, s[i].len + count[i]};
        if (s[i].len + count[i] > max_pos) max_pos = s[i].len + count[i];
    }
    t->b = (engine_fwd_batch){.n_tokens = n, .token = t->tok, .pos = t->pos, .seq = t->seq, .cell = t->cell,
                              .out_row = t->out, .n_out = rows, .n_seqs = n_fs, .seqs = t->fs, .max_pos = max_pos};
}

static void advance(tseq *s, int ns, const int32_t *count) {
    for (int i = 0; i < ns; i++) s[i].len += count[i];
}

/* A stage that also answers forward_greedy (as a GPU stage does), to test the chain's use of it. */
static int greedy_cpu(void *self, const engine_fwd_batch *b, int32_t *ids, char *err, size_t err_size);
static engine_backend_ops greedy_cpu_ops;
static int32_t greedy_vocab;

static int greedy_cpu(void *self, const engine_fwd_batch *b, int32_t *ids, char *err, size_t err_size) {
    float *l = malloc((size_t)(b->n_out ? b->n_out : 1) * (size_t)greedy_vocab * sizeof *l);
    if (!l) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    int rc = forward_cpu_ops.forward(self, b, l, err, err_size);
    for (int32_t r = 0; r < b->n_out && !rc; r++) ids[r] = engine_argmax(l + (size_t)r * greedy_vocab, greedy_vocab);
    free(l);
    return rc;
}

/* A chain of CPU stages cut before the layers in cuts[0..n_cuts), the stages on 1 and 3 threads
 * in turn (results must not depend on it); the last stage greedy_cpu_ops when greedy. */
static chain *make_chain(const llama_model *m, const int32_t *cuts, int n_cuts, int greedy, char *err,
                         size_t err_size) {
    chain_stage st[8];
    int n = n_cuts + 1;
    for (int i = 0; i < n; i++) {
        int32_t l0 = i ? cuts[i - 1] : 0, l1 = i < n_cuts ? cuts[i] : m->hp.n_layer;
        st[i] = (chain_stage){i == n - 1 && greedy ? &greedy_cpu_ops : &forward_cpu_ops,
                              forward_cpu_new(m, l0, l1, CELLS, NB, MAX_POS, i % 2 ? 3 : 1, err, err_size), l0, l1};
    }
    return chain_new(m, st, n, NB, err, err_size);
}

/* Every layer's K and V of the given cells, read through ops, into k and v
 * ([n_layer][n][kv_dim] each); 0 or -1. */
static int kv_all(const engine_backend_ops *o, void *self, int32_t n_layer, int32_t kv_dim, const int32_t *cells,
                  int32_t n, float *k, float *v, char *err, size_t err_size) {
    for (int32_t l = 0; l < n_layer; l++)
        if (o->kv_get(self, l, cells, n, k + (size_t)l * n * kv_dim, v + (size_t)l * n * kv_dim, err, err_size))
            return -1;
    return 0;
}

/* The same batch through the reference (r) and the chain (c); logits compared bit for bit, or with
 * greedy the chain's ids against the argmax of the reference's logits. */
static int same_pass(void *r, chain *c, tbatch *t, int32_t V, int greedy, const char *name, char *err,
                     size_t err_size) {
    const engine_backend_ops *co = chain_ops(c);
    size_t rows = (size_t)(t->b.n_out ? t->b.n_out : 1);
    float *lr = malloc(rows * V * sizeof *lr), *lc = malloc(rows * V * sizeof *lc);
    int32_t ids[NB];
    int rc = forward_cpu_ops.forward(r, &t->b, lr, err, err_size);
    if (!rc) rc = greedy ? co->forward_greedy(c, &t->b, ids, err, err_size) : co->forward(c, &t->b, lc, err, err_size);
    int same = !rc;
    for (int32_t i = 0; same && i < t->b.n_out; i++)
        same = greedy ? ids[i] == engine_argmax(lr + (size_t)i * V, V)
                      : !memcmp(lr + (size_t)i * V, lc + (size_t)i * V, (size_t)V * sizeof *lc);
    CHECK(same, name, "%s", rc ? err : "results differ");
    free(lr);
    free(lc);
    return rc;
}

static void test_model(const char *file, const char *label, const int32_t *cuts, int n_cuts, int greedy) {
    char err[512], name[1024];
    const char *path = test_shared(file);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        snprintf(name, sizeof name, "chain %s", label);
        SKIP(name, "model file not under $SHARED");
        return;
    }
    fclose(probe);
    gguf_ctx *g = gguf_open(path, 1, err, sizeof err);
    llama_model m;
    snprintf(name, sizeof name, "chain model loads (%s)", file);
    if (!CHECK(g && llama_model_load(&m, g, err, sizeof err) == 0, name, "%s", err)) {
        gguf_close(g);
        return;
    }
    int32_t L = m.hp.n_layer, V = m.hp.n_vocab, D = m.hp.n_head_kv * m.hp.head_dim;
    greedy_vocab = V;
    char tag[128];
    snprintf(tag, sizeof tag, "%s, cut at %d%s%s", label, cuts[0], n_cuts > 1 ? " and later" : "",
             greedy ? ", device-style greedy" : "");
    forward_cpu *r = forward_cpu_new(&m, 0, L, CELLS, NB, MAX_POS, 2, err, sizeof err);
    chain *c = r ? make_chain(&m, cuts, n_cuts, greedy, err, sizeof err) : NULL;
    snprintf(name, sizeof name, "chain builds (%s)", tag);
    if (!CHECK(r && c, name, "%s", err)) {
        forward_cpu_free(r);
        llama_model_free(&m);
        gguf_close(g);
        return;
    }
    const engine_backend_ops *co = chain_ops(c);
    snprintf(name, sizeof name, "chain ops: name, KV element size, forward_greedy as the last stage (%s)", tag);
    CHECK(!strncmp(co->name, "CPU+CPU", 7) && co->kv_elem_bytes == 4 && !co->forward_greedy == !greedy, name,
          "name %s, %d bytes, greedy %d", co->name, co->kv_elem_bytes, co->forward_greedy != NULL);

    /* Sequence 0: a prompt of 70 tokens (pages 0 and 1), every row of logits. */
    tseq s[MAX_SEQ] = {{{0, 1}, 2, 0}, {{0, 2}, 2, 0}, {{3}, 1, 0}, {{0, 4}, 2, 0}};
    tbatch t;
    int32_t prompt[MAX_SEQ] = {70, 0, 0, 0};
    build(&t, s, MAX_SEQ, prompt, V, 1);
    snprintf(name, sizeof name, "chain prompt pass of 70 tokens: logits bit for bit (%s)", tag);
    int ok = !same_pass(r, c, &t, V, 0, name, err, sizeof err);
    advance(s, MAX_SEQ, prompt);

    /* Sequence 1 shares page 0 (positions 0..63) and prefills 64..66 in its own page 2; sequence 2
     * starts a 5-token prompt; sequence 3 shares all 70 positions: page 0 by reference, the
     * partly filled page 1 copied to page 4 (copy-on-write, through every stage). */
    s[1].len = 64;
    s[3].len = 70;
    int32_t src = 1 * PAGE, dst = 4 * PAGE, n_copy = 70 - PAGE;
    int rc = ok ? forward_cpu_ops.kv_copy(r, dst, src, n_copy, err, sizeof err) : -1;
    if (!rc) rc = co->kv_copy(c, dst, src, n_copy, err, sizeof err);
    float *k1 = malloc((size_t)L * CELLS * D * sizeof(float)), *v1 = malloc((size_t)L * CELLS * D * sizeof(float));
    float *k2 = malloc((size_t)L * CELLS * D * sizeof(float)), *v2 = malloc((size_t)L * CELLS * D * sizeof(float));
    int32_t cells[CELLS];
    for (int32_t i = 0; i < n_copy; i++) cells[i] = src + i;
    if (!rc) rc = kv_all(co, c, L, D, cells, n_copy, k1, v1, err, sizeof err);
    for (int32_t i = 0; i < n_copy; i++) cells[i] = dst + i;
    if (!rc) rc = kv_all(co, c, L, D, cells, n_copy, k2, v2, err, sizeof err);
    size_t bytes = (size_t)L * n_copy * D * sizeof(float);
    snprintf(name, sizeof name, "chain kv_copy copies every stage's layers (%s)", tag);
    ok = CHECK(!rc && !memcmp(k1, k2, bytes) && !memcmp(v1, v2, bytes), name, "%s", rc ? err : "copy differs");

    int32_t step1[MAX_SEQ] = {0, 3, 5, 0};
    build(&t, s, MAX_SEQ, step1, V, 0);
    snprintf(name, sizeof name, "chain prefill of two sequences, one on a shared page (%s)", tag);
    ok = ok && !same_pass(r, c, &t, V, 0, name, err, sizeof err);
    advance(s, MAX_SEQ, step1);

    /* Decode steps: one token for each of the four sequences (lengths 70, 67, 5, 70). */
    for (int step = 0; ok && step < 3; step++) {
        int32_t one[MAX_SEQ] = {1, 1, 1, 1};
        build(&t, s, MAX_SEQ, one, V, 0);
        snprintf(name, sizeof name, "chain decode step %d of 4 sequences: %s (%s)", step,
                 greedy ? "greedy ids" : "logits bit for bit", tag);
        ok = !same_pass(r, c, &t, V, greedy, name, err, sizeof err);
        advance(s, MAX_SEQ, one);
    }

    /* Every used cell of every layer reads the same through the chain as from the reference. */
    int32_t n_cells = 0;
    for (int i = 0; i < MAX_SEQ; i++)
        for (int32_t p = i == 1 || i == 3 ? PAGE : 0; p < s[i].len; p++) cells[n_cells++] = cell_of(&s[i], p);
    rc = kv_all(&forward_cpu_ops, r, L, D, cells, n_cells, k1, v1, err, sizeof err);
    if (!rc) rc = kv_all(co, c, L, D, cells, n_cells, k2, v2, err, sizeof err);
    bytes = (size_t)L * n_cells * D * sizeof(float);
    snprintf(name, sizeof name, "chain kv_get of every layer equals the single backend's (%s)", tag);
    CHECK(ok && !rc && !memcmp(k1, k2, bytes) && !memcmp(v1, v2, bytes), name, "%s",
          rc ? err : ok ? "K/V differ" : "earlier pass failed");

    /* kv_set: new K/V for sequence 2's positions in every layer of both, read back, then a step. */
    n_cells = s[2].len;
    for (int32_t p = 0; p < n_cells; p++) cells[p] = cell_of(&s[2], p);
    for (size_t i = 0; i < (size_t)L * n_cells * D; i++) {
        k1[i] = (float)(int32_t)(rng() % 2001u - 1000) / 1000.0f;
        v1[i] = (float)(int32_t)(rng() % 2001u - 1000) / 1000.0f;
    }
    rc = 0;
    for (int32_t l = 0; l < L && !rc; l++) {
        size_t o = (size_t)l * n_cells * D;
        rc = forward_cpu_ops.kv_set(r, l, cells, n_cells, k1 + o, v1 + o, err, sizeof err);
        if (!rc) rc = co->kv_set(c, l, cells, n_cells, k1 + o, v1 + o, err, sizeof err);
    }
    if (!rc) rc = kv_all(co, c, L, D, cells, n_cells, k2, v2, err, sizeof err);
    bytes = (size_t)L * n_cells * D * sizeof(float);
    snprintf(name, sizeof name, "chain kv_set writes every layer's stage (%s)", tag);
    ok = CHECK(!rc && !memcmp(k1, k2, bytes) && !memcmp(v1, v2, bytes), name, "%s", rc ? err : "read back differs");
    int32_t last[MAX_SEQ] = {0, 0, 1, 0};
    build(&t, s, MAX_SEQ, last, V, 0);
    snprintf(name, sizeof name, "chain forward after kv_set: logits bit for bit (%s)", tag);
    if (ok) same_pass(r, c, &t, V, 0, name, err, sizeof err);

    /* Layers outside the model are refused by the chain with a message. */
    for (int i = 0; i < 2; i++) {
        int32_t bad = i ? L : -1;
        err[0] = 0;
        rc = co->kv_get(c, bad, cells, 1, k1, v1, err, sizeof err);
        snprintf(name, sizeof name, "chain kv_get of layer %d refused (%s)", bad, err);
        CHECK(rc == -1 && strstr(err, "layer"), name, "rc %d", rc);
    }
    free(k1);
    free(v1);
    free(k2);
    free(v2);
    co->free(c);
    forward_cpu_free(r);
    llama_model_free(&m);
    gguf_close(g);
}

/* A stage used alone: missing hidden-state buffers, layers outside its range, bad ranges; a
 * chain whose stages do not cover the model in order (it frees them: ASan sees leaks). */
static void test_refusals(void) {
    char err[512], name[1024];
    const char *path = test_shared("models/aidreams260K-f32.gguf");
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        SKIP("chain refusals", "model file not under $SHARED");
        return;
    }
    fclose(probe);
    gguf_ctx *g = gguf_open(path, 1, err, sizeof err);
    llama_model m;
    if (!CHECK(g && llama_model_load(&m, g, err, sizeof err) == 0, "chain refusals: model loads", "%s", err)) {
        gguf_close(g);
        return;
    }
    int32_t L = m.hp.n_layer, E = m.hp.n_embd, D = m.hp.n_head_kv * m.hp.head_dim;
    forward_cpu *head = forward_cpu_new(&m, 0, 1, CELLS, NB, MAX_POS, 1, err, sizeof err);
    forward_cpu *tail = forward_cpu_new(&m, 1, L, CELLS, NB, MAX_POS, 1, err, sizeof err);
    if (!CHECK(head && tail, "chain stages build", "%s", err)) return;
    tseq s = {{0}, 1, 0};
    int32_t count = 3;
    tbatch t;
    build(&t, &s, 1, &count, m.hp.n_vocab, 0);
    float *x = malloc((size_t)NB * E * sizeof *x), *logits = malloc((size_t)m.hp.n_vocab * sizeof *logits);
    int rc = forward_cpu_ops.forward(head, &t.b, NULL, err, sizeof err);
    snprintf(name, sizeof name, "CPU stage of layers 0..0 refuses a NULL x_out (%s)", err);
    CHECK(rc == -1 && strstr(err, "x_out"), name, "rc %d", rc);
    rc = forward_cpu_ops.forward(tail, &t.b, logits, err, sizeof err);
    snprintf(name, sizeof name, "CPU stage of layers 1.. refuses a NULL x_in (%s)", err);
    CHECK(rc == -1 && strstr(err, "x_in"), name, "rc %d", rc);
    t.b.x_out = x;
    t.b.x_in = x;
    rc = forward_cpu_ops.forward(head, &t.b, NULL, err, sizeof err) ||
         forward_cpu_ops.forward(tail, &t.b, logits, err, sizeof err);
    CHECK(!rc, "CPU stages run with x_in and x_out", "%s", err);

    float k[64 * 4], v[64 * 4];
    int32_t cell = 0;
    rc = D <= 256 ? forward_cpu_ops.kv_get(head, 1, &cell, 1, k, v, err, sizeof err) : -1;
    snprintf(name, sizeof name, "CPU stage kv_get of a layer outside its range refused (%s)", err);
    CHECK(rc == -1 && strstr(err, "layer 1"), name, "rc %d", rc);
    rc = forward_cpu_ops.kv_set(tail, 0, &cell, 1, k, v, err, sizeof err);
    snprintf(name, sizeof name, "CPU stage kv_set of a layer outside its range refused (%s)", err);
    CHECK(rc == -1 && strstr(err, "layer 0"), name, "rc %d", rc);

    int32_t bad[3][2] = {{-1, 1}, {2, 2}, {0, L + 1}};
    for (int i = 0; i < 3; i++) {
        err[0] = 0;
        forward_cpu *f = forward_cpu_new(&m, bad[i][0], bad[i][1], CELLS, NB, MAX_POS, 1, err, sizeof err);
        snprintf(name, sizeof name, "forward_cpu_new refuses layers [%d, %d) (%s)", bad[i][0], bad[i][1], err);
        CHECK(!f && strstr(err, "layers"), name, "built");
        forward_cpu_free(f);
    }

    /* A gap: stages [0, 1) and [2, L). */
    forward_cpu *late = forward_cpu_new(&m, 2, L, CELLS, NB, MAX_POS, 1, err, sizeof err);
    chain_stage st[2] = {{&forward_cpu_ops, head, 0, 1}, {&forward_cpu_ops, late, 2, L}};
    chain *c = late ? chain_new(&m, st, 2, NB, err, sizeof err) : NULL;
    snprintf(name, sizeof name, "chain_new refuses stages with a gap (%s)", err);
    CHECK(!c && strstr(err, "stage 1"), name, "built");
    /* Not covering the last layer. */
    head = forward_cpu_new(&m, 0, 1, CELLS, NB, MAX_POS, 1, err, sizeof err);
    st[0] = (chain_stage){&forward_cpu_ops, head, 0, 1};
    c = head ? chain_new(&m, st, 1, NB, err, sizeof err) : NULL;
    snprintf(name, sizeof name, "chain_new refuses stages that stop before the last layer (%s)", err);
    CHECK(!c && strstr(err, "stage 0"), name, "built");
    forward_cpu_free(tail);
    free(x);
    free(logits);
    llama_model_free(&m);
    gguf_close(g);
}

int main(void) {
    greedy_cpu_ops = forward_cpu_ops;
    greedy_cpu_ops.forward_greedy = greedy_cpu;
    int32_t two[1] = {2}, first[1] = {1}, three[2] = {1, 3};
    test_model("models/aidreams260K-f32.gguf", "f32", two, 1, 0);
    test_model("models/aidreams260K-f32.gguf", "f32", three, 2, 1);
    test_model("models/aidreams260K-mixq.gguf", "mixq", first, 1, 1);
    test_model("models/aidreams260K-mixq.gguf", "mixq", three, 2, 0);
    test_refusals();
    return test_done();
}
