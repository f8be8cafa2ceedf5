/* Token sampling with llama.cpp's default chain and semantics: penalties over the last n tokens
 * (repeat, frequency, presence) -> top-k -> top-p -> min-p -> temperature -> a draw from the softmax with a seeded
 * PRNG (xoshiro256**), so the same seed gives the same tokens. temp <= 0 is greedy. */
#ifndef MGI_ENGINE_SAMPLER_H
#define MGI_ENGINE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/grammar.h"

/* A logit bias (llama.cpp's -l ID+BIAS): added to the token's logit before every other step;
 * -inf keeps it from being picked at all. */
typedef struct {
    int32_t id;
    float bias;
} sampler_bias;

typedef struct {
    float temp;            /* <= 0: greedy (argmax after the penalty) */
    int32_t top_k;         /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off; > 0 */
    float freq_penalty;    /* 0: off; minus this times a token's count in the history */
    float presence_penalty; /* 0: off; minus this once for a token in the history */
    int32_t repeat_last_n; /* tokens of history the penalties look at; 0: off */
    const sampler_bias *bias; /* [n_bias], copied by sampler_new (ids within the vocabulary) */
    int32_t n_bias;
    uint64_t seed;
} sampler_params;

/* llama.cpp's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, penalties 1.0 (repeat) and 0
 * (frequency, presence) over 64 tokens, seed 0. */
sampler_params sampler_default_params(void);

typedef struct sampler sampler;

/* NULL with a message on a bad parameter (penalty <= 0, top-p/min-p outside [0, 1], negative
 * history, a biased id outside the vocabulary or a NaN bias) or out of memory. */
sampler *sampler_new(const sampler_params *p, int32_t n_vocab, char *err, size_t err_size);
void sampler_free(sampler *s);
/* Ids this sampler never picks (at most SAMPLER_MAX_SKIP; more is an error, -1): llama.cpp's
 * logit bias of -inf, the first step of its chain, which --ignore-eos gives the end-of-generation
 * tokens. sampler_is_greedy does not count them: a caller that lets the backend pick asks it to
 * skip the same ids (engine_token.no_eog). */
#define SAMPLER_MAX_SKIP 16
int sampler_skip(sampler *s, const int32_t *ids, int n);
/* Records a token in the penalty history (prompt tokens too, as llama.cpp does). */
void sampler_accept(sampler *s, int32_t id);
/* Picks the next token from n_vocab logits (not modified). */
int32_t sampler_sample(sampler *s, const float *logits);
/* Nonzero when every pick is the argmax of the logits past the skipped ids (temp <= 0, no
 * penalty, no logit bias, no grammar), so a
 * caller may let the backend pick (engine_eval_greedy) instead of fetching logits. */
int sampler_is_greedy(const sampler *s);

/* Structured output (GBNF, or JSON Schema compiled to it). From this call on the sampler owns
 * state st (freed by sampler_free, also when this fails) over vocabulary v (shared, read-only,
 * outliving the sampler); eog[0..n_eog) are the end-of-generation ids. Each sampler_sample then
 * picks only tokens the grammar allows and feeds its pick to st: it draws from the whole chain
 * first and keeps the pick when the grammar allows it (one trie walk of one token), and only
 * otherwise masks every disallowed token to -inf and draws again (llama.cpp's order: the mask
 * costs a walk of the vocabulary's trie, and most picks of a model that follows the format pass).
 * With a grammar, sampler_sample returns -1 when no token may come (sampler_error says why).
 * 0, or -1 when out of memory. */
int sampler_set_grammar(sampler *s, grammar_state *st, const grammar_vocab *v, const int32_t *eog, int n_eog);
/* After a pick: 1 when the text is a whole sentence of the grammar and nothing but an
 * end-of-generation token may follow, so the caller ends the text now (finish reason stop)
 * instead of spending a forward pass on the forced end token. */
int sampler_grammar_done(const sampler *s);
/* Why sampler_sample returned -1; "" otherwise. */
const char *sampler_error(const sampler *s);

/* The chain's steps on a candidate list, exposed for tests. Each returns the new count; the
 * list stays in the order the step leaves it (top-k and top-p sort by logit, descending, ties
 * by id). */
typedef struct {
    int32_t id;
    float logit;
} sampler_cand;

/* The penalties of llama.cpp's penalties sampler: a candidate whose id occurs count > 0 times in
 * last[0..n_last) has its logit divided by repeat (multiplied when <= 0), then lowered by
 * count x freq + presence. */
typedef struct {
    float repeat, freq, presence;
} sampler_penalties;
void sampler_penalize(sampler_cand *c, size_t n, const int32_t *last, size_t n_last, sampler_penalties pen);
size_t sampler_top_k(sampler_cand *c, size_t n, int32_t k);
size_t sampler_top_p(sampler_cand *c, size_t n, float p);
size_t sampler_min_p(sampler_cand *c, size_t n, float p);
size_t sampler_temperature(sampler_cand *c, size_t n, float temp);
/* Index of the candidate a uniform u in [0, 1) selects from the softmax of the logits. */
size_t sampler_pick(const sampler_cand *c, size_t n, double u);

/* Log-probabilities (OpenAI's logprobs, llama-server's n_probs): the log-softmax of the model's
 * logits, before any of the chain's filters, computed in double. *chosen gets token id's; top
 * gets the n_top largest (by logit, ties by the lower id), at most SAMPLER_MAX_TOP_LOGPROBS.
 * Returns how many top entries were written (min(n_top, n_vocab)). */
#define SAMPLER_MAX_TOP_LOGPROBS 20
typedef struct {
    int32_t id;
    double logprob;
} sampler_logprob;
int sampler_logprobs(const float *logits, int32_t n_vocab, int32_t id, int n_top, double *chosen, sampler_logprob *top);

/* The PRNG: a state seeded from one number, and uniform doubles in [0, 1). */
typedef struct { uint64_t s[4]; } sampler_rng;
void sampler_rng_seed(sampler_rng *r, uint64_t seed);
uint64_t sampler_rng_next(sampler_rng *r);
double sampler_rng_uniform(sampler_rng *r);

#endif
