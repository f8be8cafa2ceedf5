/* Batch input lines: one request per line, plain text (the whole line is the prompt) or, when the
 * line starts with '{', a JSON object {"id", "prompt", "n_predict", "temperature", "seed",
 * "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty",
 * "repeat_last_n", "ignore_eos", "logit_bias", "max_tokens" (n_predict's alias), "n", "messages",
 * "chat_template_kwargs", "stop", "logprobs", "top_logprobs", "n_probs", and llama-server's
 * structured output: "grammar" (GBNF text), "json_schema" (a schema object), "response_format"
 * ({"type": "json_object"} with an optional "schema", {"type": "json_schema", "json_schema":
 * {"schema": ...}}, or "text")} whose absent
 * fields take the defaults given. Parsed with libcjson; every value is checked for type and
 * range, so a bad line becomes a request carrying an error, never a crash. */
#ifndef MGI_ENGINE_REQUEST_H
#define MGI_ENGINE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/grammar.h"
#include "engine/sampler.h"

/* REQUEST_MAX_N: choices per request ("n"), each a sequence of its own while they decode */
enum { REQUEST_MAX_STOP = 16, REQUEST_STOP_MAX_LEN = 256, REQUEST_MAX_N = 128 };

typedef struct {
    int32_t n_predict;  /* -1: until end of text or the context is full; else >= 1 */
    sampler_params sp;  /* repeat_last_n may be -1: the sequence's context */
    int64_t seed;       /* -1: random (chosen by the caller); else 0..2^53 */
    bool ignore_eos;
    /* Structured output: the grammar of every request without its own (--grammar, -j, ...),
     * shared and not owned; NULL: none. */
    const grammar *grammar;
} request_params;

typedef struct {
    char *id;           /* the id as JSON text ("7", "\"q-12\""); the line number when absent */
    char *prompt;       /* NUL-terminated; NULL when the line has an error */
    size_t prompt_len;
    request_params p;
    char *error;        /* why the line is bad, or NULL */
    char *warning;      /* unknown fields that were ignored, or NULL */
    sampler_bias *bias; /* "logit_bias" (p.sp.bias points here), or NULL: the defaults' list */
    bool blank;         /* a plain-text line of only white space: no request */
    /* Chat and stops (llama-server's fields): "messages" (an array of {"role", "content"}; then
     * prompt is NULL until the caller renders it), "chat_template_kwargs" (an object), "stop" (a
     * string or a list of them, each 1..REQUEST_STOP_MAX_LEN bytes). */
    struct cJSON *messages, *chat_kwargs;
    char *stop[REQUEST_MAX_STOP];
    int n_stop;
    /* "n" (or llama-server's "n_cmpl"): choices of the prompt, 1..REQUEST_MAX_N (default 1);
     * choice i samples with seed + i, as llama-server's children do. */
    int n_choices;
    /* An OpenAI Batch API line {"custom_id", "method": "POST", "url", "body"}: id is the
     * custom_id, the body's fields are read as above (max_completion_tokens = max_tokens), and the
     * result is written in OpenAI's format. */
    int openai;         /* REQUEST_OPENAI_*, 0 for a native line */
    /* "logprobs": true with "top_logprobs" N (0..20), or llama-server's "n_probs" N: the top N
     * alternatives per generated token; -1 off. */
    int n_logprobs;
    bool want_top;      /* "top_logprobs" was given (it takes effect with "logprobs": true) */
    /* Structured output: the line's own grammar ("grammar", "json_schema", "response_format"),
     * compiled; owned; NULL: p.grammar applies. */
    grammar *grammar;
} request;

enum { REQUEST_OPENAI_CHAT = 1, REQUEST_OPENAI_COMPLETION = 2 };

/* Parses line[0..len) (no newline; a trailing '\r' is dropped), line number line_no (from 1).
 * Returns 0 with *r filled (r->error set for a bad line), or -1 when out of memory. Release with
 * request_free. */
int request_parse(request *r, const char *line, size_t len, int64_t line_no, const request_params *defaults);
void request_free(request *r);

#endif
