/* The batch scheduler: requests (token prompts with their own sampling settings) run in the
 * engine's parallel sequences ("slots"), and every step is ONE engine_decode holding the next
 * token of each generating slot and prefill chunks of new ones, up to n_batch tokens. A slot
 * that finishes takes the next queued request at once (continuous batching). A new request
 * starts from the longest prefix of its prompt that any slot's cache holds (a system prompt
 * evaluated once, or an earlier request's prompt), shared by page reference, not recomputed.
 * Each request samples with its own sampler and seed, and the engine's logits do not depend on
 * the batch, so a request's tokens equal those of running it alone (mgi run). Several choices of
 * one prompt (sched_job.choice_next) take their slots together and share one evaluation of it. */
#ifndef MGI_ENGINE_SCHEDULER_H
#define MGI_ENGINE_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/grammar.h"
#include "engine/sampler.h"

typedef enum { SCHED_QUEUED, SCHED_RUNNING, SCHED_STOP, SCHED_LENGTH, SCHED_ERROR } sched_state;

/* One request. The caller fills the inputs and keeps the job alive until it is finished. */
typedef struct sched_job sched_job;
struct sched_job {
    const int32_t *prompt;  /* [n_prompt] token ids, BOS (and any system prompt) included */
    int32_t n_prompt;       /* >= 1 */
    int32_t n_predict;      /* -1: until end of text or the context is full */
    sampler_params sp;      /* repeat_last_n < 0: the sequence's context */
    bool ignore_eos;
    void *user;
    /* Structured output: picks only what grammar allows (NULL: none), over vocabulary gvocab
     * (constrain_vocab_new); both shared, read-only, alive until the job is finished. The job
     * ends (STOP) once the grammar is complete and nothing but an end token may follow. */
    const grammar *grammar;
    const grammar_vocab *gvocab;
    /* Results, written by the scheduler. */
    sched_state state;      /* STOP: end of text; LENGTH: n_predict or context full */
    int32_t *out;           /* generated ids (the end-of-text token not included); free() it */
    int32_t n_out;
    int32_t n_reused;       /* prompt tokens taken from a cached prefix */
    char err[256];          /* when ERROR */
    double t_start, t_prompt, t_end;  /* ms (CLOCK_MONOTONIC): taken by a slot, prompt done, end */
    sched_job *next;        /* the scheduler's queue link (so queuing never allocates) */
    /* Stop strings (llama-server's "stop"): called after each kept token, nonzero ends the job as
     * STOP with that token kept (the caller cuts the text before the stop string). NULL: none. */
    int (*stop_fn)(const sched_job *j, void *ctx);
    /* Log-probabilities (sampler_logprobs, of the logits before the sampler's filters):
     * when logprobs, lp[k] is the k-th generated token's and lp_top[k * n_logprobs ...] its
     * n_logprobs top alternatives (n_logprobs <= SAMPLER_MAX_TOP_LOGPROBS). Such a job never lets
     * the backend pick, since the logits must come back. free() lp and lp_top. */
    bool logprobs;
    int32_t n_logprobs;
    double *lp;
    sampler_logprob *lp_top;
    /* Choices of one prompt (OpenAI's "n", llama-batched's -np): a submitted job whose
     * choice_next is not NULL leads a group, the jobs linked through choice_next, each with the
     * leader's prompt and its own sampling (seed, stops, grammar, logprobs, n_predict). Only the
     * leader is submitted. The group starts once as many slots as it has jobs are free (a group
     * larger than the slots finishes at once as ERROR); the prompt is evaluated once, in the
     * leader's slot; then every other job shares those KV pages (engine_seq_cp, no copy) and
     * draws its first token from the same logits, and all decode together, one token each per
     * step. Each job of the group finishes on its own (sched_next_done returns each). */
    sched_job *choice_next;
};

typedef struct {
    int32_t n_batch;       /* tokens per step (-b) */
    bool cont_batching;    /* false: new requests start only when every slot is free */
    bool prefix_reuse;     /* share the longest cached prefix (false: only the system prompt) */
    const int32_t *system; /* system prompt tokens evaluated once into every slot, or NULL */
    int32_t n_system;
} sched_params;

typedef struct {
    int64_t n_prompt_eval;    /* prompt tokens computed (the system prompt's once) */
    int64_t n_prompt_reused;  /* prompt tokens shared from a cached prefix (or a group's leader) */
    int64_t n_gen;            /* tokens generated */
    int64_t n_steps;          /* forward passes */
    /* Steps that only decoded (no prompt tokens), the generation speed of a batch as llama.cpp's
     * batched-bench reports it apart from prompt processing: steps, tokens, milliseconds. */
    int64_t n_decode_steps, n_decode_tokens;
    double decode_ms;
    /* Steps that only evaluated prompt tokens (no sequence was generating), batched-bench's
     * prompt processing speed: steps, tokens, milliseconds. */
    int64_t n_prompt_steps, n_prompt_step_tokens;
    double prompt_ms;
} sched_stats;

typedef struct sched sched;

/* A scheduler over e's sequences (engine_n_seq_max slots); evaluates the system prompt. NULL
 * with a message on a bad parameter, a system prompt that leaves no room, or out of memory. */
sched *sched_new(engine *e, const sched_params *p, char *err, size_t err_size);
void sched_free(sched *s);

/* Queues a job (FIFO). A prompt that does not fit a sequence finishes at once as ERROR. */
void sched_submit(sched *s, sched_job *job);
/* True when nothing is queued or running. */
bool sched_idle(const sched *s);
/* Runs one step (one forward pass). 0, or -1 with a message on an engine failure (every running
 * job is then finished as ERROR). */
int sched_step(sched *s, char *err, size_t err_size);
/* The next finished job (in the order they finished), or NULL. */
sched_job *sched_next_done(sched *s);
sched_stats sched_get_stats(const sched *s);

#endif
