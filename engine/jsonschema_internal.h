/* What the JSON Schema converter's files share: a growing text buffer, GBNF literals, integer
 * ranges (jsonschema_gbnf.c) and regular expressions (jsonschema_regex.c) turned into GBNF. */
#ifndef MGI_ENGINE_JSONSCHEMA_INTERNAL_H
#define MGI_ENGINE_JSONSCHEMA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} js_buf;

void js_buf_add(js_buf *b, const char *s, size_t n);
void js_buf_puts(js_buf *b, const char *s);
void js_buf_printf(js_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Takes the text out (NUL-terminated, or NULL after a failed allocation) and resets b. */
char *js_buf_take(js_buf *b);
/* A GBNF string literal matching exactly the bytes s[0..n). */
void js_buf_literal(js_buf *b, const char *s, size_t n);
/* One code point as a GBNF class bound (\xNN, \uNNNN or \UNNNNNNNN, or the letter or digit). */
void js_buf_class_char(js_buf *b, uint32_t cp);

/* A GBNF expression (no trailing space rule) for the JSON integers x with min <= x (when
 * has_min) and x <= max (when has_max), written without leading zeros. */
void jsonschema_int_range(js_buf *out, int has_min, int64_t min, int has_max, int64_t max);

/* A GBNF expression for the contents of a JSON string (between the quotes, JSON-escaped as a
 * model would write them) that match the ECMAScript regular expression pattern. 0, or -1 with
 * why filled (the construct and its offset). */
int jsonschema_regex(js_buf *out, const char *pattern, size_t len, char *why, size_t why_size);

#endif
