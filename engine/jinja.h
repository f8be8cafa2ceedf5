/* mgi's own Jinja engine for chat templates: the subset of jinja2 that real templates use, with
 * the semantics of Hugging Face transformers' apply_chat_template (trim_blocks, lstrip_blocks,
 * loop controls, its tojson / raise_exception / strftime_now / namespace, jinja2's Undefined).
 * Sandboxed: a template reads only the variables it is given, touches no file, environment or
 * network, and every render is bounded in steps, nesting, memory and output.
 *
 * Where it differs from transformers, knowingly: list.append / pop / extend / insert work on
 * lists the template built (transformers' immutable sandbox raises SecurityError; llama.cpp
 * allows them; the caller's lists stay read-only); integers are 64-bit (overflow is an error);
 * upper / lower / title know ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; a generator
 * (x|map...) can be iterated more than once; a function prints as <function name>. Not there:
 * include / extends / import (transformers has no loader either), recursive loops, *args and
 * **kwargs in calls, macros' varargs / kwargs, loop.changed, cycler, joiner. */
#ifndef MGI_JINJA_H
#define MGI_JINJA_H

#include <stddef.h>
#include <stdint.h>

typedef struct jinja_template jinja_template;

typedef struct {
    /* loop iterations, macro calls and the items filters and methods go through: every way a
     * template's work can grow; the rest is bounded by the template's size */
    uint64_t max_steps;
    int max_depth;        /* nesting of evaluation, macro calls included */
    size_t max_output;    /* bytes of the rendered text, and of any string a template builds */
    size_t max_memory;    /* bytes one render may allocate */
    /* seconds since the epoch for strftime_now, in UTC; -1: SOURCE_DATE_EPOCH when set (the
     * reproducible-builds convention, UTC), else the current local time, as transformers */
    int64_t now;
} jinja_limits;

/* 10 M steps, depth 1000, 16 MiB of output, 512 MiB of memory, now = -1. */
jinja_limits jinja_limits_default(void);

/* Parses template text (not NUL-terminated). NULL on a syntax error with "LINE:COL: what"
 * in err. */
jinja_template *jinja_parse(const char *src, size_t len, char *err, size_t err_size);
void jinja_free(jinja_template *t);

/* Renders with the variables of vars (a cJSON object; NULL: none). Returns the text
 * (malloc'd, NUL-terminated, *len bytes), or NULL with "LINE:COL: what" in err: a template
 * that raises (raise_exception, an undefined value used as a number...), or a limit reached.
 * lim NULL: the defaults. */
char *jinja_render(const jinja_template *t, const void *vars, const jinja_limits *lim,
                   size_t *len, char *err, size_t err_size);

#endif
