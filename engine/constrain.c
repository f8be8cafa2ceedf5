/* Structured output wired to a model: grammar vocabularies from tokenizers, grammar states bound
 * to samplers. */
#include <stdio.h>
#include <stdlib.h>

#include "engine/constrain.h"

grammar_vocab *constrain_vocab_new(const tokenizer *t, int32_t n_vocab, char *err, size_t err_size) {
    int32_t n = n_vocab;
    const char **pieces = malloc((size_t)(n > 0 ? n : 1) * sizeof *pieces);
    size_t *lens = malloc((size_t)(n > 0 ? n : 1) * sizeof *lens);
    grammar_vocab *v = NULL;
    if (!pieces || !lens) {
        snprintf(err, err_size, "out of memory for the grammar's vocabulary (%d tokens)", (int)n);
    } else {
        for (int32_t i = 0; i < n; i++) pieces[i] = tokenizer_piece(t, i, &lens[i]);
        const int32_t *eog;
        int n_eog = tokenizer_eog_ids(t, &eog);
        v = grammar_vocab_new(pieces, lens, n, eog, n_eog, err, err_size);
    }
    free(pieces);
    free(lens);
    return v;
}

int constrain_attach(sampler *smp, const grammar *g, const grammar_vocab *v, const tokenizer *t, char *err,
                     size_t err_size) {
    const int32_t *eog;
    int n_eog = tokenizer_eog_ids(t, &eog); /* at most TOKENIZER_MAX_EOG <= SAMPLER_MAX_SKIP */
    if (sampler_set_grammar(smp, grammar_state_new(g), v, eog, n_eog)) {
        snprintf(err, err_size, "out of memory for a grammar state");
        return -1;
    }
    return 0;
}
