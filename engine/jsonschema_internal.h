/* What the JSON Schema converter's files share: the conversion's state and helpers
 * (jsonschema.c), objects and arrays (jsonschema_compound.c), a growing text buffer, GBNF
 * literals and integer ranges (jsonschema_gbnf.c) and regular expressions (jsonschema_regex.c). */
#ifndef MGI_ENGINE_JSONSCHEMA_INTERNAL_H
#define MGI_ENGINE_JSONSCHEMA_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} jsonschema_buf;

void jsonschema_buf_add(jsonschema_buf *b, const char *s, size_t n);
void jsonschema_buf_puts(jsonschema_buf *b, const char *s);
void jsonschema_buf_printf(jsonschema_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Takes the text out (NUL-terminated, or NULL after a failed allocation) and resets b. */
char *jsonschema_buf_take(jsonschema_buf *b);
/* A GBNF string literal matching exactly the bytes s[0..n). */
void jsonschema_buf_literal(jsonschema_buf *b, const char *s, size_t n);
/* One code point as a GBNF class bound (\xNN, \uNNNN or \UNNNNNNNN, or the letter or digit). */
void jsonschema_buf_class_char(jsonschema_buf *b, uint32_t cp);

/* A GBNF expression (no trailing space rule) for the JSON integers x with min <= x (when
 * has_min) and x <= max (when has_max), written without leading zeros. */
void jsonschema_int_range(jsonschema_buf *out, int has_min, int64_t min, int has_max, int64_t max);

/* A GBNF expression for the contents of a JSON string (between the quotes, JSON-escaped as a
 * model would write them) that match the ECMAScript regular expression pattern. 0, or -1 with
 * why filled (the construct and its offset). */
int jsonschema_regex(jsonschema_buf *out, const char *pattern, size_t len, char *why, size_t why_size);

typedef struct {
    char *name, *body; /* body NULL: named, not built yet (a $ref in progress) */
} jsonschema_rule;

typedef struct {
    char *ref, *name;
} jsonschema_ref;

/* One conversion: the rules so far (root first), the $ref targets already named, the first
 * error. */
typedef struct {
    const cJSON *root;
    jsonschema_rule *rules;
    int n_rules, cap_rules;
    jsonschema_ref *refs;
    int n_refs, cap_refs;
    int depth;
    char *err;
    size_t err_size;
    int failed;
} jsonschema_conv;

/* Records the first error, "json schema #PTR: ...", and returns NULL. */
char *jsonschema_fail(jsonschema_conv *c, const char *ptr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
char *jsonschema_dup(jsonschema_conv *c, const char *s);
/* JSON pointers: parent/key (RFC 6901 escapes) and parent/key/i; malloc'd. */
char *jsonschema_ptr_join(jsonschema_conv *c, const char *parent, const char *key);
char *jsonschema_ptr_index(jsonschema_conv *c, const char *parent, const char *key, int i);
/* Adds a primitive rule (string, number, value, space...) and those it uses, once. */
void jsonschema_need(jsonschema_conv *c, const char *name);
/* A rule name for body (taken): body itself when it is one name, else a new rule. */
char *jsonschema_name_body(jsonschema_conv *c, const char *name, char *body);
/* The schema as a rule name (malloc'd), or NULL after an error. */
char *jsonschema_visit(jsonschema_conv *c, const cJSON *s, const char *name, const char *ptr);
char *jsonschema_visit_object(jsonschema_conv *c, const cJSON *s, const char *name, const char *ptr);
char *jsonschema_visit_array(jsonschema_conv *c, const cJSON *s, const char *name, const char *ptr);
/* The target of a "#/..." reference, or NULL with an error. */
const cJSON *jsonschema_resolve(jsonschema_conv *c, const char *ref, const char *ptr);
/* The GBNF literal of a JSON value written compactly; 0 or -1. */
int jsonschema_json_literal(jsonschema_conv *c, jsonschema_buf *b, const cJSON *v, const char *ptr);
char *jsonschema_take(jsonschema_conv *c, jsonschema_buf *b, const char *ptr);
/* item{min,max} with GBNF operators (max < 0: no maximum; max 0: the empty string). */
void jsonschema_repeat(jsonschema_buf *b, const char *item, long min, long max);
/* A count keyword (minItems, maxLength...): -1 when absent, -2 (after an error) when bad. */
long jsonschema_count_kw(jsonschema_conv *c, const cJSON *s, const char *kw, const char *ptr);

#endif
