/* GBNF grammars (llama.cpp's syntax: grammars/README.md) compiled once, then matched per sequence:
 * a state accepts bytes or tokens and fills a mask of the tokens that keep the text inside the
 * language. The grammar and the vocabulary are read-only after creation and may be shared by
 * every sequence and thread; a state belongs to one sequence (copy it for n choices).
 *
 * The sampler's use, per request:
 *     grammar *g = grammar_parse(text, len, err, sizeof err);       // or jsonschema_compile()
 *     grammar_vocab *v = grammar_vocab_new(pieces, lens, n_vocab, eog, n_eog, err, sizeof err);
 *     grammar_state *st = grammar_state_new(g);                     // one per sequence
 * and per step, before top-k and the rest of the chain (llama.cpp applies it first too):
 *     grammar_fill_mask(st, v, allowed);      // then logits[i] = -INFINITY where !allowed[i]
 *     ... pick id ...; grammar_accept_token(st, v, id);
 * or, cheaper when the constraint rarely bites: pick from the unmasked logits, keep the pick when
 * grammar_allows_token(st, v, id), else mask and pick again. The vocabulary object is built once
 * per model (pieces from tokenizer_piece, ids from tokenizer_eog_ids) and reused by every grammar. */
#ifndef MGI_ENGINE_GRAMMAR_H
#define MGI_ENGINE_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

typedef struct grammar grammar;
typedef struct grammar_state grammar_state;
typedef struct grammar_vocab grammar_vocab;

/* Compiles GBNF text (len bytes, NUL not required) whose start rule is "root". NULL with a
 * message giving line:column and a hint on a syntax error, an undefined rule, a rule that can
 * never finish matching, left recursion, or a grammar past the size limits. Not supported (an
 * error, as llama.cpp without a vocabulary): token references <...> and !<...>. */
grammar *grammar_parse(const char *text, size_t len, char *err, size_t err_size);
void grammar_free(grammar *g);

/* The token pieces as byte strings (pieces[i], lens[i] bytes; a control token has length 0 and
 * is never allowed) and the end-of-generation ids, which are allowed exactly when the grammar
 * can end. Builds a byte trie of the pieces once (shared work for tokens with a common prefix);
 * the strings are copied. NULL with a message on a bad id or out of memory. */
grammar_vocab *grammar_vocab_new(const char *const *pieces, const size_t *lens, int32_t n_vocab,
                                 const int32_t *eog, int n_eog, char *err, size_t err_size);
void grammar_vocab_free(grammar_vocab *v);
int32_t grammar_vocab_size(const grammar_vocab *v);

/* A state at the start of the text. NULL when out of memory. */
grammar_state *grammar_state_new(const grammar *g);
/* An independent copy (the n choices of one prompt); NULL when out of memory. */
grammar_state *grammar_state_copy(const grammar_state *s);
void grammar_state_free(grammar_state *s);

/* Feeds bytes: 0 when they keep the text inside the language (a multi-byte character may stop
 * half way and finish in the next call), -1 when they leave it (the state is then unchanged). */
int grammar_accept_bytes(grammar_state *s, const void *bytes, size_t n);
/* Feeds a sampled token: its piece, or for an end-of-generation id, 0 when the grammar may end
 * (the state then accepts nothing more). -1 when the token is not allowed (state unchanged). */
int grammar_accept_token(grammar_state *s, const grammar_vocab *v, int32_t id);
/* 1 when the text so far is a whole sentence of the grammar (end-of-generation allowed). */
int grammar_is_complete(const grammar_state *s);
/* 1 when the token may come next, 0 when not: one check, for a sampler that tries its pick
 * before masking everything. */
int grammar_allows_token(grammar_state *s, const grammar_vocab *v, int32_t id);
/* allowed[i] = 1 for every token that may come next, 0 for the rest (n_vocab bytes). Returns
 * how many are allowed, or -1 when the grammar became too ambiguous to follow (more than
 * GRAMMAR_MAX_WORK stack expansions in one character step or GRAMMAR_MAX_MASK_WORK in one mask;
 * the message is in grammar_state_error). Takes the state non-const: it caches transitions, so
 * the next call is cheaper. */
int64_t grammar_fill_mask(grammar_state *s, const grammar_vocab *v, uint8_t *allowed);
const char *grammar_state_error(const grammar_state *s);   /* "" when none */

#define GRAMMAR_MAX_WORK (1 << 20)
#define GRAMMAR_MAX_MASK_WORK (1 << 26)

#endif
