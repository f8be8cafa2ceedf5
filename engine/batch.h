/* The contract between the engine and a backend (CPU reference, CUDA): what one forward pass over
 * a batch of tokens from several sequences receives, and the few KV-cache operations the engine
 * asks of the backend. The engine owns the bookkeeping (which page belongs to which sequence,
 * refcounts, copy-on-write); a backend owns the KV memory and computes. */
#ifndef MGI_ENGINE_BATCH_H
#define MGI_ENGINE_BATCH_H

#include <stddef.h>
#include <stdint.h>

/* The KV cache is a pool of cells, one cell per (position of a sequence), in pages of
 * ENGINE_KV_PAGE consecutive cells. Cell c lives in page c / ENGINE_KV_PAGE. A backend stores,
 * for every layer l and cell c, one K row and one V row of n_head_kv * head_dim values (f32 on
 * the CPU; a GPU backend may store f16 and converts in kv_get/kv_set). */
#define ENGINE_KV_PAGE 64

/* One sequence as the forward pass sees it. Position p of the sequence is held in cell
 *     pages[p / ENGINE_KV_PAGE] * ENGINE_KV_PAGE + p % ENGINE_KV_PAGE.
 * A page may appear in the tables of several sequences (a shared prefix such as a system
 * prompt); the engine guarantees that no cell written in a pass belongs to a shared page. */
typedef struct {
    const int32_t *pages;  /* [n_pages] page ids, in position order */
    int32_t n_pages;       /* >= ceil(n_pos / ENGINE_KV_PAGE) */
    int32_t n_pos;         /* positions 0..n_pos-1 hold K/V once this pass has written its cells */
} engine_fwd_seq;

/* One forward pass. Tokens are in any order across sequences, but the tokens of one sequence
 * come in increasing, consecutive positions. For every layer, a backend must:
 *   1. compute K and V of every token and write them to cell[i] (all tokens of the pass);
 *   2. for token i, attend causally over positions 0..pos[i] of seqs[seq[i]], reading K/V
 *      through that sequence's page table, in position order, so each token sees only its own
 *      sequence (cells written in step 1 of this pass included).
 * Every per-token computation (matmuls, norms, RoPE at pos[i], attention) depends only on that
 * token and its own sequence's cells, so a sequence's logits do not depend on what else is in
 * the batch (the CPU path is bit-for-bit identical for any batch composition).
 * After the last layer, token i with out_row[i] >= 0 gets its n_vocab logits written to row
 * out_row[i] of the output [n_out][n_vocab]; rows are numbered in token order. n_out may be 0
 * (a prefill chunk that only fills the cache); logits is then NULL.
 * Example: sequence A (pages {3}) holds 10 positions and decodes one token, sequence B (pages
 * {0, 5}) prefills positions 60..65 with logits for 65 only:
 *   token = {a, b60, b61, b62, b63, b64, b65}   seq = {0, 1, 1, 1, 1, 1, 1}
 *   pos   = {10, 60, 61, 62, 63, 64, 65}        cell = {3*64+10, 60, 61, 62, 63, 5*64+0, 5*64+1}
 *   out_row = {0, -1, -1, -1, -1, -1, 1}        n_out = 2
 *   seqs = {{{3}, 1, 11}, {{0, 5}, 2, 66}}      max_pos = 66 */
typedef struct {
    int32_t n_tokens;
    const int32_t *token;    /* [n_tokens] token ids, 0 <= id < n_vocab (checked by the engine) */
    const int32_t *pos;      /* [n_tokens] position of the token in its sequence */
    const int32_t *seq;      /* [n_tokens] index into seqs[] (not the user's sequence id) */
    const int32_t *cell;     /* [n_tokens] KV cell this token writes (as the page table says) */
    const int32_t *out_row;  /* [n_tokens] row of the logits output, or -1: no logits */
    int32_t n_out;           /* rows of logits this pass writes */
    int32_t n_seqs;
    const engine_fwd_seq *seqs;  /* [n_seqs] the sequences that have tokens in this pass */
    int32_t max_pos;         /* the largest n_pos of seqs[] (for sizing score buffers) */
    /* forward_greedy's second pick skips these ids (the model's end-of-generation tokens, the
     * same list on every pass; at most TOKENIZER_MAX_EOG) */
    const int32_t *skip;
    int32_t n_skip;
    /* A backend holding only layers [l0, l1) of the model (a stage of a split, engine/plan.h):
     * when l0 > 0, x_in [n_tokens][n_embd] f32 in host memory is the hidden state entering
     * layer l0 (tokens are not embedded); when l1 < n_layer, the pass ends after layer l1 - 1
     * and writes that hidden state to x_out [n_tokens][n_embd] f32 in host memory, with no
     * logits (n_out rows are ignored; logits is NULL). NULL for a backend of every layer. */
    const float *x_in;
    float *x_out;
} engine_fwd_batch;

/* What a backend implements. `self` is the backend's own state. Every call returns 0, or -1
 * with a message in err (the engine turns it into ENGINE_ERUNTIME). n_tokens of a forward pass
 * never exceeds the ubatch size the backend was created with. */
typedef struct {
    const char *name;  /* "CPU", "CUDA", for logs */
    int kv_elem_bytes; /* bytes of one cached K or V value (4: f32, 2: f16), for bandwidth counts */
    /* One forward pass as above; logits: [b->n_out][n_vocab] f32 in host memory. */
    int (*forward)(void *self, const engine_fwd_batch *b, float *logits, char *err, size_t err_size);
    /* Optional (NULL: the engine takes the argmax of forward's logits): the same pass, but each
     * output row r gives only indices, so a device backend copies back ids instead of logits:
     * ids[2 r] the index of its largest logit (ties: the lowest index; NaN never wins) and
     * ids[2 r + 1] the same among the indices not in b->skip (0 when all are skipped). */
    int (*forward_greedy)(void *self, const engine_fwd_batch *b, int32_t *ids, char *err, size_t err_size);
    /* Optional (NULL: none): the host buffer of *rows rows of logits that forward fills on its own
     * way out (a device backend's pinned copy target, as llama.cpp's output buffer); forward
     * given this pointer as logits, for at most *rows rows, leaves them there instead of
     * copying them again. Valid until the backend is freed. */
    float *(*out_buffer)(void *self, int32_t *rows);
    /* Optional (NULL: ignored): engine_decode_ahead's hint. While on, after each one-token
     * decode pass (n_tokens 1, so n_seqs 1 and seq 0, one output row) the backend may
     * launch the next such step before it is asked for; any other call first cancels a step so
     * launched. Off launches no more (one already launched still serves a matching call). */
    void (*ahead)(void *self, int on);
    /* Copy-on-write: copies K and V of cells src..src+n-1 to dst..dst+n-1 in every layer. */
    int (*kv_copy)(void *self, int32_t dst, int32_t src, int32_t n, char *err, size_t err_size);
    /* Prompt caches: reads or writes the K and V rows of layer l for the n cells listed, as f32,
     * k and v each [n][n_head_kv * head_dim]. */
    int (*kv_get)(void *self, int32_t layer, const int32_t *cells, int32_t n, float *k, float *v,
                  char *err, size_t err_size);
    int (*kv_set)(void *self, int32_t layer, const int32_t *cells, int32_t n, const float *k,
                  const float *v, char *err, size_t err_size);
    void (*free)(void *self);
} engine_backend_ops;

#endif
