/* Structured output wired to a model: the grammar vocabulary built from a tokenizer's pieces and
 * end-of-generation ids, and a sequence's sampler bound to a grammar. The grammar library
 * (engine/grammar.h) knows no tokenizer and the sampler no tokenizer; this is where they meet. */
#ifndef MGI_ENGINE_CONSTRAIN_H
#define MGI_ENGINE_CONSTRAIN_H

#include <stddef.h>

#include "engine/grammar.h"
#include "engine/sampler.h"
#include "engine/tokenizer.h"

/* The vocabulary of tokenizer t for grammar masks: each token's bytes (tokenizer_piece; control
 * tokens have none and are never allowed) and its end-of-generation ids, over the model's n_vocab
 * logits (ids past the tokenizer's are never allowed). Built once per model
 * (a trie of every piece: ~50 ms at 262144 tokens) and shared by every sequence. NULL with a
 * message when out of memory. */
grammar_vocab *constrain_vocab_new(const tokenizer *t, int32_t n_vocab, char *err, size_t err_size);

/* Binds sampler smp to a fresh state of grammar g at the start of the text. 0, or -1 with a
 * message (out of memory). */
int constrain_attach(sampler *smp, const grammar *g, const grammar_vocab *v, const tokenizer *t, char *err,
                     size_t err_size);

#endif
