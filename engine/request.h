/* Batch input lines: one request per line, plain text (the whole line is the prompt) or, when the
 * line starts with '{', a JSON object {"id", "prompt", "n_predict", "temperature", "seed",
 * "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty",
 * "repeat_last_n", "ignore_eos", "logit_bias", and llama-server's structured output: "grammar" (GBNF
 * text), "json_schema" (a schema object), "response_format" ({"type": "json_object"} with an
 * optional "schema", {"type": "json_schema", "json_schema": {"schema": ...}}, or "text")} whose absent
 * fields take the defaults given. Parsed with libcjson; every value is checked for type and
 * range, so a bad line becomes a request carrying an error, never a crash. */
#ifndef MGI_ENGINE_REQUEST_H
#define MGI_ENGINE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/grammar.h"
#include "engine/sampler.h"

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
    /* Structured output: the line's own grammar ("grammar", "json_schema", "response_format"),
     * compiled; owned; NULL: p.grammar applies. */
    grammar *grammar;
} request;

/* Parses line[0..len) (no newline; a trailing '\r' is dropped), line number line_no (from 1).
 * Returns 0 with *r filled (r->error set for a bad line), or -1 when out of memory. Release with
 * request_free. */
int request_parse(request *r, const char *line, size_t len, int64_t line_no, const request_params *defaults);
void request_free(request *r);

#endif
