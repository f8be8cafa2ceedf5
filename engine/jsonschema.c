/* JSON Schema -> GBNF (see jsonschema.h for the subset). A recursive visit turns each schema into
 * a GBNF expression, adding named rules as it goes; primitive rules (string, number, value...)
 * are added only when used; $ref targets get a rule named before their body is built, so a
 * recursive reference is just that name. Errors name the keyword and its JSON pointer. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jsonschema.h"
#include "engine/jsonschema_internal.h"

#define MAX_DEPTH 64
#define MAX_COUNT 2000 /* grammar_parse's repetition limit */

typedef struct {
    char *name, *body; /* body NULL: named, not built yet (a $ref in progress) */
} js_rule;

typedef struct {
    char *ref, *name;
} js_ref;

typedef struct {
    const cJSON *root;
    js_rule *rules;
    int n_rules, cap_rules;
    js_ref *refs;
    int n_refs, cap_refs;
    int depth;
    char *err;
    size_t err_size;
    int failed;
} conv;

static const struct {
    const char *name, *body, *deps[4];
} PRIMS[] = {
    {"space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", {0}},
    {"boolean", "(\"true\" | \"false\") space", {"space"}},
    {"null", "\"null\" space", {"space"}},
    {"decimal-part", "[0-9]{1,16}", {0}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {0}},
    {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
     {"integral-part", "decimal-part", "space"}},
    {"integer", "(\"-\"? integral-part) space", {"integral-part", "space"}},
    {"value", "object | array | string | number | boolean | null", {"object", "array", "string", "number"}},
    {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
     {"string", "value", "space"}},
    {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", {"value", "space"}},
    /* \u escapes below D800 or from E000: a lone surrogate is not valid JSON for strict parsers */
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))", {0}},
    {"string", "\"\\\"\" char* \"\\\"\" space", {"char", "space"}},
    {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\" space", {"space"}},
    /* real dates only: days per month, 29 February in leap years, no year 0000 */
    {"date", "date-year \"-\" date-month-day | date-leap-year \"-02-29\"", {"date-year", "date-month-day", "date-leap-year"}},
    {"date-year", "[0-9]{3} [1-9] | [0-9]{2} [1-9] \"0\" | [0-9] [1-9] \"00\" | [1-9] \"000\"", {0}},
    {"date-month-day", "(\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | (\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])", {0}},
    {"date-leap-year", "[0-9]{2} (\"0\" [48] | [2468] [048] | [13579] [26]) | (\"0\" [48] | [2468] [048] | [13579] [26]) \"00\"", {0}},
    {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", {0}},
    {"date-time", "date \"T\" time", {"date", "time"}},
    {"date-string", "\"\\\"\" date \"\\\"\" space", {"date", "space"}},
    {"time-string", "\"\\\"\" time \"\\\"\" space", {"time", "space"}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\" space", {"date-time", "space"}},
};
#define N_PRIMS (int)(sizeof PRIMS / sizeof PRIMS[0])

/* Assertions a context-free grammar cannot express (or that this converter does not). */
static const char *UNSUPPORTED[] = {
    "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "uniqueItems", "contains", "minContains", "maxContains",
    "multipleOf", "unevaluatedItems", "unevaluatedProperties", "$dynamicRef", "$recursiveRef",
};

static char *fail(conv *c, const char *ptr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static char *fail(conv *c, const char *ptr, const char *fmt, ...) {
    if (c->failed) return NULL;
    c->failed = 1;
    int k = snprintf(c->err, c->err_size, "json schema #%s: ", ptr);
    if (k < 0 || (size_t)k >= c->err_size) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + k, c->err_size - (size_t)k, fmt, ap);
    va_end(ap);
    return NULL;
}

static char *dup_str(conv *c, const char *s) {
    char *d = strdup(s);
    if (!d) fail(c, "", "out of memory");
    return d;
}

/* parent + "/" + key with ~ and / escaped (RFC 6901); malloc'd. */
static char *ptr_join(conv *c, const char *parent, const char *key) {
    js_buf b = {0};
    js_buf_puts(&b, parent);
    js_buf_puts(&b, "/");
    for (const char *p = key; *p; p++) {
        if (*p == '~') js_buf_puts(&b, "~0");
        else if (*p == '/') js_buf_puts(&b, "~1");
        else js_buf_add(&b, p, 1);
    }
    char *s = js_buf_take(&b);
    if (!s) fail(c, parent, "out of memory");
    return s;
}

static char *ptr_index(conv *c, const char *parent, const char *key, int i) {
    char k[64];
    snprintf(k, sizeof k, "%s/%d", key, i);
    js_buf b = {0};
    js_buf_puts(&b, parent);
    js_buf_puts(&b, "/");
    js_buf_puts(&b, k);
    char *s = js_buf_take(&b);
    if (!s) fail(c, parent, "out of memory");
    return s;
}

static int rule_find(const conv *c, const char *name) {
    for (int i = 0; i < c->n_rules; i++)
        if (strcmp(c->rules[i].name, name) == 0) return i;
    return -1;
}

static int is_reserved(const char *name) {
    if (strcmp(name, "root") == 0) return 1;
    for (int i = 0; i < N_PRIMS; i++)
        if (strcmp(PRIMS[i].name, name) == 0) return 1;
    return 0;
}

/* Adds a rule; body NULL reserves the name. Returns the index or -1. */
static int rule_add(conv *c, const char *name, char *body) {
    if (c->n_rules == c->cap_rules) {
        int cap = c->cap_rules ? c->cap_rules * 2 : 32;
        js_rule *nr = realloc(c->rules, (size_t)cap * sizeof *nr);
        if (!nr) { free(body); fail(c, "", "out of memory"); return -1; }
        c->rules = nr;
        c->cap_rules = cap;
    }
    char *n = strdup(name);
    if (!n) { free(body); fail(c, "", "out of memory"); return -1; }
    c->rules[c->n_rules] = (js_rule){n, body};
    return c->n_rules++;
}

/* A rule name from base: letters, digits and '-', not a primitive's, not taken. malloc'd. */
static char *unique_name(conv *c, const char *base) {
    js_buf b = {0};
    for (const char *p = base; *p && b.n < 80; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
        if (ok) js_buf_add(&b, &ch, 1);
        else if (b.n && b.s[b.n - 1] != '-') js_buf_add(&b, "-", 1);
    }
    if (!b.n) js_buf_puts(&b, "r");
    size_t keep = b.n;
    for (int i = 0; !b.oom && (is_reserved(b.s) || rule_find(c, b.s) >= 0); i++) {
        b.n = keep;
        js_buf_printf(&b, "%d", i);
    }
    char *s = js_buf_take(&b);
    if (!s) fail(c, "", "out of memory");
    return s;
}

static void need(conv *c, const char *name) {
    if (rule_find(c, name) >= 0) return;
    for (int i = 0; i < N_PRIMS; i++) {
        if (strcmp(PRIMS[i].name, name) != 0) continue;
        char *body = strdup(PRIMS[i].body);
        if (!body) { fail(c, "", "out of memory"); return; }
        if (rule_add(c, name, body) < 0) return;
        for (int d = 0; d < 4 && PRIMS[i].deps[d]; d++) need(c, PRIMS[i].deps[d]);
        if (strcmp(name, "value") == 0) { need(c, "boolean"); need(c, "null"); }
        return;
    }
}

static int is_ident(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-')) return 0;
    return 1;
}

/* Names body: a bare rule name is returned as it is, anything else becomes rule `name`. Takes
 * body; returns a malloc'd rule name. */
static char *name_body(conv *c, const char *name, char *body) {
    if (!body) return NULL;
    if (is_ident(body)) return body;
    char *n = unique_name(c, name);
    if (!n || rule_add(c, n, body) < 0) { free(n); return NULL; }
    return n;
}

static char *visit(conv *c, const cJSON *s, const char *name, const char *ptr);

/* The GBNF literal of a JSON value as written compactly. */
static int add_json_literal(conv *c, js_buf *b, const cJSON *v, const char *ptr) {
    char *text = cJSON_PrintUnformatted(v);
    if (!text) { fail(c, ptr, "out of memory"); return -1; }
    js_buf_literal(b, text, strlen(text));
    free(text);
    return 0;
}

static char *take(conv *c, js_buf *b, const char *ptr) {
    char *s = js_buf_take(b);
    if (!s) fail(c, ptr, "out of memory");
    return s;
}

/* item{min,max} with GBNF operators (max < 0: no maximum). */
static void repeat(js_buf *b, const char *item, long min, long max) {
    if (max == 0) { js_buf_puts(b, "\"\""); return; }
    if (min == 0 && max == 1) js_buf_printf(b, "%s?", item);
    else if (min == 1 && max < 0) js_buf_printf(b, "%s+", item);
    else if (min == 0 && max < 0) js_buf_printf(b, "%s*", item);
    else if (max < 0) js_buf_printf(b, "%s{%ld,}", item, min);
    else js_buf_printf(b, "%s{%ld,%ld}", item, min, max);
}

/* A count keyword (minItems, maxLength...): -1 when absent, -2 (with an error) when bad. */
static long count_kw(conv *c, const cJSON *s, const char *kw, const char *ptr) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!v) return -1;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
        fail(c, ptr, "'%s' must be a non-negative integer", kw);
        return -2;
    }
    if (v->valuedouble > MAX_COUNT) {
        fail(c, ptr, "'%s' of %.0f is above %d, the most a grammar repetition can count; hint: lower it", kw,
             v->valuedouble, MAX_COUNT);
        return -2;
    }
    return (long)v->valuedouble;
}

/* ---- strings --------------------------------------------------------------------------------- */

static char *visit_string(conv *c, const cJSON *s, const char *ptr) {
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    long min = count_kw(c, s, "minLength", ptr), max = count_kw(c, s, "maxLength", ptr);
    if (min == -2 || max == -2) return NULL;
    js_buf b = {0};
    if (pat) {
        if (!cJSON_IsString(pat)) return fail(c, ptr, "'pattern' must be a string");
        if (min >= 0 || max >= 0)
            return fail(c, ptr, "'pattern' together with 'minLength'/'maxLength' cannot be expressed; hint: put the "
                        "length into the pattern ({m,n})");
        char why[256];
        js_buf e = {0};
        if (jsonschema_regex(&e, pat->valuestring, strlen(pat->valuestring), why, sizeof why)) {
            free(e.s);
            return fail(c, ptr, "'pattern' %s", why);
        }
        need(c, "space");
        js_buf_puts(&b, "\"\\\"\" ");
        js_buf_add(&b, e.s ? e.s : "", e.n);
        js_buf_puts(&b, " \"\\\"\" space");
        free(e.s);
        return take(c, &b, ptr);
    }
    if (cJSON_IsString(fmt)) {
        const char *f = fmt->valuestring;
        const char *rule = strcmp(f, "date") == 0 ? "date-string" : strcmp(f, "time") == 0 ? "time-string"
                         : strcmp(f, "date-time") == 0 ? "date-time-string" : strcmp(f, "uuid") == 0 ? "uuid" : NULL;
        if (rule) { /* other formats are annotations: a plain string */
            need(c, rule);
            return dup_str(c, rule);
        }
    }
    if (min < 0 && max < 0) {
        need(c, "string");
        return dup_str(c, "string");
    }
    if (max >= 0 && min > max) return fail(c, ptr, "'minLength' %ld is above 'maxLength' %ld", min, max);
    need(c, "char");
    need(c, "space");
    js_buf_puts(&b, "\"\\\"\" ");
    repeat(&b, "char", min < 0 ? 0 : min, max);
    js_buf_puts(&b, " \"\\\"\" space");
    return take(c, &b, ptr);
}

/* ---- numbers --------------------------------------------------------------------------------- */

static int bound(conv *c, const cJSON *s, const char *kw, const char *ptr, double *v) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!x || cJSON_IsBool(x)) return 0;
    if (!cJSON_IsNumber(x)) { fail(c, ptr, "'%s' must be a number", kw); return -1; }
    *v = x->valuedouble;
    return 1;
}

static char *visit_integer(conv *c, const cJSON *s, const char *ptr) {
    double mn = 0, mx = 0, emn = 0, emx = 0;
    int hmn = bound(c, s, "minimum", ptr, &mn), hmx = bound(c, s, "maximum", ptr, &mx);
    int hemn = bound(c, s, "exclusiveMinimum", ptr, &emn), hemx = bound(c, s, "exclusiveMaximum", ptr, &emx);
    if (hmn < 0 || hmx < 0 || hemn < 0 || hemx < 0) return NULL;
    /* draft 4: exclusiveMinimum/Maximum are booleans that modify minimum/maximum */
    int old_emn = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum"));
    int old_emx = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum"));
    int has_lo = 0, has_hi = 0;
    double lo = 0, hi = 0;
    if (hmn) has_lo = 1, lo = old_emn ? floor(mn) + 1 : ceil(mn);
    if (hemn) { double l = floor(emn) + 1; if (!has_lo || l > lo) lo = l; has_lo = 1; }
    if (hmx) has_hi = 1, hi = old_emx ? ceil(mx) - 1 : floor(mx);
    if (hemx) { double h = ceil(emx) - 1; if (!has_hi || h < hi) hi = h; has_hi = 1; }
    if ((has_lo && fabs(lo) > 9e18) || (has_hi && fabs(hi) > 9e18))
        return fail(c, ptr, "an integer bound past 64 bits cannot be expressed");
    if (has_lo && has_hi && lo > hi) return fail(c, ptr, "the integer bounds [%.0f, %.0f] admit no integer", lo, hi);
    if (!has_lo && !has_hi) {
        need(c, "integer");
        return dup_str(c, "integer");
    }
    need(c, "space");
    js_buf b = {0};
    js_buf_puts(&b, "(");
    jsonschema_int_range(&b, has_lo, (int64_t)lo, has_hi, (int64_t)hi);
    js_buf_puts(&b, ") space");
    return take(c, &b, ptr);
}

/* ---- objects --------------------------------------------------------------------------------- */

typedef struct {
    const char *key;
    const cJSON *schema;
    char *ptr;
    int required;
} prop;

/* The contents of a JSON string that is none of keys[0..n) (sorted), after a shared prefix of
 * depth bytes, as a rule (one per trie node, so the grammar nests no deeper for long keys):
 * each next character of a key continues down that key's branch, any other character (or an
 * escape) leaves every key behind, and the string may end here unless a key ends here.
 * Returns the rule name (malloc'd) or NULL. */
static char *not_keys(conv *c, const char **keys, int n, size_t depth, const char *name, const char *ptr) {
    int ends = 0, alts = 0;
    js_buf b = {0}, other = {0};
    js_buf_puts(&other, "[^\"\\\\\\x7F\\x00-\\x1F");
    for (int i = 0; i < n;) {
        if (strlen(keys[i]) == depth) { ends = 1; i++; continue; }
        const unsigned char *p = (const unsigned char *)keys[i] + depth;
        size_t cl = p[0] < 0x80 ? 1 : p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : 2;
        int j = i;
        while (j < n && strlen(keys[j]) >= depth + cl && memcmp(keys[j] + depth, p, cl) == 0) j++;
        if (j == i) { i++; continue; } /* a truncated character: no branch */
        uint32_t cp = cl == 1 ? p[0] : p[0] & (0x3Fu >> (cl - 1));
        for (size_t k = 1; k < cl; k++) cp = cp << 6 | (p[k] & 0x3Fu);
        js_buf_class_char(&other, cp);
        char *sub = not_keys(c, keys + i, j - i, depth + cl, name, ptr);
        if (!sub) { free(b.s); free(other.s); return NULL; }
        if (alts++) js_buf_puts(&b, " | ");
        js_buf_literal(&b, (const char *)p, cl);
        js_buf_printf(&b, " %s", sub);
        free(sub);
        i = j;
    }
    js_buf_puts(&other, "] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))) char*");
    if (alts++) js_buf_puts(&b, " | ");
    js_buf_puts(&b, "(");
    js_buf_add(&b, other.s ? other.s : "", other.n);
    free(other.s);
    if (!ends) js_buf_puts(&b, " | \"\"");
    return name_body(c, name, take(c, &b, ptr));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static char *build_object(conv *c, prop *props, int n, const cJSON *addl, const char *name, const char *ptr) {
    char **kv = calloc((size_t)n + 1, sizeof *kv); /* [n] is the additional-properties pair */
    char **rest = calloc((size_t)n + 2, sizeof *rest);
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    js_buf b = {0};
    char *result = NULL;
    if (!kv || !rest || !order) { fail(c, ptr, "out of memory"); goto out; }
    for (int i = 0; i < n; i++) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s-%s", name, props[i].key);
        char *v = visit(c, props[i].schema, sub, props[i].ptr);
        if (!v) goto out;
        js_buf kb = {0};
        cJSON *ks = cJSON_CreateString(props[i].key);
        if (!ks || add_json_literal(c, &kb, ks, props[i].ptr)) { cJSON_Delete(ks); free(v); free(kb.s); goto out; }
        cJSON_Delete(ks);
        js_buf_printf(&kb, " space \":\" space %s", v);
        free(v);
        snprintf(sub, sizeof sub, "%s-%s-kv", name, props[i].key);
        if (!(kv[i] = name_body(c, sub, take(c, &kb, ptr)))) goto out;
    }
    int n_opt = 0, n_req = 0;
    for (int i = 0; i < n; i++) if (props[i].required) order[n_req++] = i;
    for (int i = 0; i < n; i++) if (!props[i].required) order[n_req + n_opt++] = i;
    if (addl && !cJSON_IsFalse(addl)) {
        char *v;
        char sub[200];
        snprintf(sub, sizeof sub, "%s-additional", name);
        if (cJSON_IsTrue(addl)) { need(c, "value"); v = dup_str(c, "value"); }
        else v = visit(c, addl, sub, ptr);
        if (!v) goto out;
        const char **keys = malloc(((size_t)n + 1) * sizeof *keys);
        if (!keys) { free(v); fail(c, ptr, "out of memory"); goto out; }
        for (int i = 0; i < n; i++) keys[i] = props[i].key;
        qsort(keys, (size_t)n, sizeof *keys, cmp_str);
        need(c, "char");
        need(c, "space");
        int too_long = 0;
        for (int i = 0; i < n; i++) too_long |= strlen(keys[i]) > 256;
        snprintf(sub, sizeof sub, "%s-additional-k", name);
        char *nk = too_long ? fail(c, ptr, "a property name longer than 256 bytes beside additionalProperties")
                            : not_keys(c, keys, n, 0, sub, ptr);
        free(keys);
        if (!nk) { free(v); goto out; }
        js_buf kb = {0};
        js_buf_printf(&kb, "\"\\\"\" %s \"\\\"\" space \":\" space %s", nk, v);
        free(nk);
        free(v);
        snprintf(sub, sizeof sub, "%s-additional-kv", name);
        if (!(kv[n] = name_body(c, sub, take(c, &kb, ptr)))) goto out;
        order[n_req + n_opt++] = n;
    }
    /* rest[k]: the optional pairs from order[n_req + k] on, each preceded by a comma, any subset
     * in order (the additional pair, last, may repeat). */
    for (int k = n_opt - 1; k >= 1; k--) {
        int i = order[n_req + k];
        js_buf rb = {0};
        js_buf_printf(&rb, "( \",\" space %s )%s", kv[i], i == n ? "*" : "?");
        if (rest[k + 1]) js_buf_printf(&rb, " %s", rest[k + 1]);
        char sub[200];
        snprintf(sub, sizeof sub, "%s-%s-rest", name, i == n ? "additional" : props[i].key);
        if (!(rest[k] = name_body(c, sub, take(c, &rb, ptr)))) goto out;
    }
    need(c, "space");
    js_buf_puts(&b, "\"{\" space");
    for (int k = 0; k < n_req; k++) js_buf_printf(&b, "%s %s", k ? " \",\" space" : "", kv[order[k]]);
    if (n_opt) {
        js_buf_puts(&b, n_req ? " ( \",\" space ( " : " ( ");
        for (int k = 0; k < n_opt; k++) {
            int i = order[n_req + k];
            js_buf_printf(&b, "%s%s%s", k ? " | " : "", kv[i], i == n ? " ( \",\" space " : "");
            if (i == n) js_buf_printf(&b, "%s )*", kv[i]);
            if (rest[k + 1]) js_buf_printf(&b, " %s", rest[k + 1]);
        }
        js_buf_puts(&b, n_req ? " ) )?" : " )?");
    }
    js_buf_puts(&b, " \"}\" space");
    result = take(c, &b, ptr);
out:
    for (int i = 0; kv && i <= n; i++) free(kv[i]);
    for (int i = 0; rest && i <= n + 1; i++) free(rest[i]);
    free(kv); free(rest); free(order);
    if (!result) free(b.s);
    return result;
}

/* Collects the properties of s (and, for allOf, of each part) into *props. */
static int collect_props(conv *c, const cJSON *s, const char *ptr, prop **props, int *n, int *cap, const cJSON **addl) {
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *ad = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (ad) *addl = ad;
    if (ps && !cJSON_IsObject(ps)) { fail(c, ptr, "'properties' must be an object"); return -1; }
    if (req && !cJSON_IsArray(req)) { fail(c, ptr, "'required' must be an array of strings"); return -1; }
    char *pp = ptr_join(c, ptr, "properties");
    if (!pp) return -1;
    for (const cJSON *p = ps ? ps->child : NULL; p; p = p->next) {
        int i = 0;
        while (i < *n && strcmp((*props)[i].key, p->string) != 0) i++;
        if (i == *n) {
            if (*n == *cap) {
                int nc = *cap ? *cap * 2 : 8;
                prop *np = realloc(*props, (size_t)nc * sizeof *np);
                if (!np) { free(pp); fail(c, ptr, "out of memory"); return -1; }
                *props = np;
                *cap = nc;
            }
            (*props)[(*n)++] = (prop){p->string, p, NULL, 0};
        }
        free((*props)[i].ptr);
        (*props)[i].schema = p;
        if (!((*props)[i].ptr = ptr_join(c, pp, p->string))) { free(pp); return -1; }
    }
    free(pp);
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) { fail(c, ptr, "'required' must be an array of strings"); return -1; }
        int i = 0;
        while (i < *n && strcmp((*props)[i].key, r->valuestring) != 0) i++;
        if (i == *n) { /* required but not described: any value */
            if (*n == *cap) {
                int nc = *cap ? *cap * 2 : 8;
                prop *np = realloc(*props, (size_t)nc * sizeof *np);
                if (!np) { fail(c, ptr, "out of memory"); return -1; }
                *props = np;
                *cap = nc;
            }
            static const cJSON any = {.type = cJSON_True};
            (*props)[(*n)++] = (prop){r->valuestring, &any, ptr_join(c, ptr, "required"), 0};
        }
        (*props)[i].required = 1;
    }
    return 0;
}

static const cJSON *resolve(conv *c, const char *ref, const char *ptr);

static char *visit_object(conv *c, const cJSON *s, const char *name, const char *ptr) {
    prop *props = NULL;
    int n = 0, cap = 0;
    const cJSON *addl = NULL;
    char *res = NULL;
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (all) {
        int i = 0;
        for (const cJSON *part = all->child; part; part = part->next, i++) {
            char *pp = ptr_index(c, ptr, "allOf", i);
            if (!pp) goto out;
            const cJSON *target = part;
            const cJSON *ref = cJSON_GetObjectItemCaseSensitive(part, "$ref");
            if (cJSON_IsString(ref) && !(target = resolve(c, ref->valuestring, pp))) { free(pp); goto out; }
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(target, "type");
            if (!cJSON_IsObject(target) || (t && !(cJSON_IsString(t) && strcmp(t->valuestring, "object") == 0)) ||
                cJSON_GetObjectItemCaseSensitive(target, "anyOf") || cJSON_GetObjectItemCaseSensitive(target, "oneOf") ||
                cJSON_GetObjectItemCaseSensitive(target, "allOf")) {
                fail(c, pp, "'allOf' can only combine object schemas (properties, required); hint: merge the parts by hand");
                free(pp);
                goto out;
            }
            int rc = collect_props(c, target, pp, &props, &n, &cap, &addl);
            free(pp);
            if (rc) goto out;
        }
    }
    if (collect_props(c, s, ptr, &props, &n, &cap, &addl)) goto out;
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl)) {
        fail(c, ptr, "'additionalProperties' must be a boolean or a schema");
        goto out;
    }
    res = build_object(c, props, n, addl, name, ptr);
out:
    for (int i = 0; i < n; i++) free(props[i].ptr);
    free(props);
    return res;
}

/* ---- arrays ---------------------------------------------------------------------------------- */

static char *visit_array(conv *c, const cJSON *s, const char *name, const char *ptr) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const char *pk = prefix ? "prefixItems" : "items";
    if (!prefix && cJSON_IsArray(items)) prefix = items, items = NULL; /* draft 4-7 tuples */
    long min = count_kw(c, s, "minItems", ptr), max = count_kw(c, s, "maxItems", ptr);
    if (min == -2 || max == -2) return NULL;
    if (max >= 0 && min > max) return fail(c, ptr, "'minItems' %ld is above 'maxItems' %ld", min, max);
    need(c, "space");
    js_buf b = {0};
    js_buf_puts(&b, "\"[\" space");
    if (prefix) {
        if (!cJSON_IsArray(prefix)) return fail(c, ptr, "'%s' must be an array of schemas", pk);
        int n = cJSON_GetArraySize(prefix), i = 0;
        if ((min >= 0 && n < min) || (max >= 0 && n > max))
            return fail(c, ptr, "'%s' of %d items against minItems/maxItems: only tuples of exactly their length are supported", pk, n);
        for (const cJSON *it = prefix->child; it; it = it->next, i++) {
            char sub[200];
            snprintf(sub, sizeof sub, "%s-tuple-%d", name, i);
            char *pp = ptr_index(c, ptr, pk, i);
            char *v = pp ? visit(c, it, sub, pp) : NULL;
            free(pp);
            if (!v) { free(b.s); return NULL; }
            js_buf_printf(&b, "%s %s", i ? " \",\" space" : "", v);
            free(v);
        }
    } else {
        char *v;
        if (items && !cJSON_IsFalse(items)) {
            char sub[200];
            snprintf(sub, sizeof sub, "%s-item", name);
            char *pp = ptr_join(c, ptr, "items");
            v = pp ? visit(c, items, sub, pp) : NULL;
            free(pp);
        } else if (cJSON_IsFalse(items)) {
            if (min > 0) return fail(c, ptr, "'items': false with minItems %ld admits no array", min);
            max = 0;
            v = dup_str(c, "value");
        } else {
            need(c, "value");
            v = dup_str(c, "value");
        }
        if (!v) { free(b.s); return NULL; }
        if (max != 0) {
            /* item ("," item){min-1,max-1}, optional as a whole when min is 0 */
            js_buf rep = {0}, more = {0};
            js_buf_printf(&more, "( \",\" space %s )", v);
            js_buf_printf(&rep, "%s ", v);
            repeat(&rep, more.s ? more.s : "", min <= 0 ? 0 : min - 1, max < 0 ? -1 : max - 1);
            if (min <= 0) js_buf_printf(&b, " ( %s )?", rep.s ? rep.s : "");
            else js_buf_printf(&b, " %s", rep.s ? rep.s : "");
            free(rep.s);
            free(more.s);
        }
        free(v);
    }
    js_buf_puts(&b, " \"]\" space");
    return take(c, &b, ptr);
}

/* ---- references ------------------------------------------------------------------------------ */

static const cJSON *resolve(conv *c, const char *ref, const char *ptr) {
    if (ref[0] != '#') {
        fail(c, ptr, "'$ref' \"%s\": only references inside the schema (#/...) are supported", ref);
        return NULL;
    }
    const cJSON *at = c->root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char seg[256];
        size_t k = 0;
        for (; *p && *p != '/' && k + 1 < sizeof seg; p++) {
            if (*p == '~' && p[1] == '1') seg[k++] = '/', p++;
            else if (*p == '~' && p[1] == '0') seg[k++] = '~', p++;
            else seg[k++] = *p;
        }
        seg[k] = 0;
        if (cJSON_IsArray(at)) {
            char *end;
            long i = strtol(seg, &end, 10);
            at = *end || i < 0 ? NULL : cJSON_GetArrayItem(at, (int)i);
        } else {
            at = cJSON_GetObjectItemCaseSensitive(at, seg);
        }
        if (!at) break;
    }
    if (!at || *p) {
        fail(c, ptr, "'$ref' \"%s\" points at nothing in the schema", ref);
        return NULL;
    }
    return at;
}

static char *visit_ref(conv *c, const char *ref, const char *ptr) {
    for (int i = 0; i < c->n_refs; i++)
        if (strcmp(c->refs[i].ref, ref) == 0) return dup_str(c, c->refs[i].name);
    const cJSON *target = resolve(c, ref, ptr);
    if (!target) return NULL;
    const char *last = strrchr(ref, '/');
    char *name = unique_name(c, last ? last + 1 : "ref");
    if (!name) return NULL;
    int idx = rule_add(c, name, NULL);
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        js_ref *nr = realloc(c->refs, (size_t)cap * sizeof *nr);
        if (!nr) { free(name); return fail(c, ptr, "out of memory"); }
        c->refs = nr;
        c->cap_refs = cap;
    }
    char *rcopy = strdup(ref);
    if (idx < 0 || !rcopy) { free(rcopy); free(name); return fail(c, ptr, "out of memory"); }
    c->refs[c->n_refs++] = (js_ref){rcopy, name};
    char *body = visit(c, target, name, ref + 1);
    if (!body) return NULL;
    c->rules[idx].body = body;
    return dup_str(c, name);
}

/* ---- the visit ------------------------------------------------------------------------------- */

static char *visit_type(conv *c, const cJSON *s, const char *t, const char *name, const char *ptr) {
    if (strcmp(t, "object") == 0) return visit_object(c, s, name, ptr);
    if (strcmp(t, "array") == 0) return visit_array(c, s, name, ptr);
    if (strcmp(t, "string") == 0) return visit_string(c, s, ptr);
    if (strcmp(t, "integer") == 0) return visit_integer(c, s, ptr);
    if (strcmp(t, "number") == 0) {
        static const char *kws[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
        for (int i = 0; i < 4; i++)
            if (cJSON_GetObjectItemCaseSensitive(s, kws[i]))
                return fail(c, ptr, "'%s' on a number cannot be expressed as a grammar (only integer bounds); hint: "
                            "use \"type\": \"integer\" or drop the bound", kws[i]);
        need(c, "number");
        return dup_str(c, "number");
    }
    if (strcmp(t, "boolean") == 0 || strcmp(t, "null") == 0) {
        need(c, t);
        return dup_str(c, t);
    }
    return fail(c, ptr, "unknown type \"%s\"; hint: object, array, string, number, integer, boolean or null", t);
}

static char *union_of(conv *c, const cJSON *arr, const char *kw, const char *name, const char *ptr) {
    if (!cJSON_IsArray(arr) || !arr->child) return fail(c, ptr, "'%s' must be a non-empty array of schemas", kw);
    js_buf b = {0};
    int i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s-%d", name, i);
        char *pp = ptr_index(c, ptr, kw, i);
        char *v = pp ? visit(c, it, sub, pp) : NULL;
        free(pp);
        if (!v) { free(b.s); return NULL; }
        js_buf_printf(&b, "%s%s", i ? " | " : "", v);
        free(v);
    }
    return take(c, &b, ptr);
}

/* Keywords that constrain a value beside $ref, anyOf or oneOf, which the converter would
 * otherwise drop (the grammar would then allow texts that break them). */
static const char *CONSTRAINTS[] = {"properties", "required", "additionalProperties", "items", "prefixItems",
                                    "minItems", "maxItems", "pattern", "format", "minLength", "maxLength",
                                    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "const", "enum"};

static char *check_siblings(conv *c, const cJSON *s, const char *kw, const char *ptr) {
    for (size_t i = 0; i < sizeof CONSTRAINTS / sizeof CONSTRAINTS[0]; i++)
        if (cJSON_GetObjectItemCaseSensitive(s, CONSTRAINTS[i]))
            return fail(c, ptr, "'%s' beside '%s' is not supported; hint: move '%s' into the referenced schema or "
                        "into each alternative", CONSTRAINTS[i], kw, CONSTRAINTS[i]);
    return (char *)"";
}

static char *visit_body(conv *c, const cJSON *s, const char *name, const char *ptr) {
    if (cJSON_IsTrue(s)) { need(c, "value"); return dup_str(c, "value"); }
    if (cJSON_IsFalse(s)) return fail(c, ptr, "the schema false admits no value");
    if (!cJSON_IsObject(s)) return fail(c, ptr, "a schema must be an object or true/false");
    for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, UNSUPPORTED[i]);
        if (k && !cJSON_IsFalse(k))
            return fail(c, ptr, "keyword '%s' cannot be expressed as a grammar; hint: remove it (the output will then "
                        "not be checked against it)", UNSUPPORTED[i]);
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) {
        if (!cJSON_IsString(ref)) return fail(c, ptr, "'$ref' must be a string");
        if (!check_siblings(c, s, "$ref", ptr)) return NULL;
        return visit_ref(c, ref->valuestring, ptr);
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (cst) {
        js_buf b = {0};
        need(c, "space");
        if (add_json_literal(c, &b, cst, ptr)) { free(b.s); return NULL; }
        js_buf_puts(&b, " space");
        return take(c, &b, ptr);
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en) {
        if (!cJSON_IsArray(en) || !en->child) return fail(c, ptr, "'enum' must be a non-empty array");
        js_buf b = {0};
        need(c, "space");
        js_buf_puts(&b, "(");
        for (const cJSON *v = en->child; v; v = v->next) {
            if (v != en->child) js_buf_puts(&b, " | ");
            if (add_json_literal(c, &b, v, ptr)) { free(b.s); return NULL; }
        }
        js_buf_puts(&b, ") space");
        return take(c, &b, ptr);
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (any) return check_siblings(c, s, "anyOf", ptr) ? union_of(c, any, "anyOf", name, ptr) : NULL;
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    if (one) return check_siblings(c, s, "oneOf", ptr) ? union_of(c, one, "oneOf", name, ptr) : NULL;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsArray(type)) {
        if (!type->child) return fail(c, ptr, "'type' must not be an empty list");
        js_buf b = {0};
        for (const cJSON *t = type->child; t; t = t->next) {
            if (!cJSON_IsString(t)) { free(b.s); return fail(c, ptr, "'type' must hold strings"); }
            char sub[200];
            snprintf(sub, sizeof sub, "%s-%s", name, t->valuestring);
            char *v = name_body(c, sub, visit_type(c, s, t->valuestring, sub, ptr));
            if (!v) { free(b.s); return NULL; }
            js_buf_printf(&b, "%s%s", t != type->child ? " | " : "", v);
            free(v);
        }
        return take(c, &b, ptr);
    }
    if (type && !cJSON_IsString(type)) return fail(c, ptr, "'type' must be a string or a list of strings");
    if (type) return visit_type(c, s, type->valuestring, name, ptr);
    /* no type: what the keywords imply, else any value */
    if (cJSON_GetObjectItemCaseSensitive(s, "properties") || cJSON_GetObjectItemCaseSensitive(s, "required") ||
        cJSON_GetObjectItemCaseSensitive(s, "additionalProperties") || cJSON_GetObjectItemCaseSensitive(s, "allOf"))
        return visit_object(c, s, name, ptr);
    if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems"))
        return visit_array(c, s, name, ptr);
    if (cJSON_GetObjectItemCaseSensitive(s, "pattern") || cJSON_GetObjectItemCaseSensitive(s, "format") ||
        cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength"))
        return visit_string(c, s, ptr);
    need(c, "value");
    return dup_str(c, "value");
}

/* The schema as a rule name (or a primitive's name). */
static char *visit(conv *c, const cJSON *s, const char *name, const char *ptr) {
    if (c->failed) return NULL;
    if (c->depth >= MAX_DEPTH) return fail(c, ptr, "schema nested deeper than %d levels", MAX_DEPTH);
    c->depth++;
    char *r = name_body(c, name, visit_body(c, s, name, ptr));
    c->depth--;
    return r;
}

char *jsonschema_to_gbnf(const char *json, size_t len, char *err, size_t err_size) {
    conv c = {.err = err, .err_size = err_size};
    if (err_size) err[0] = 0;
    const char *at = NULL; /* where parsing stopped: cJSON_GetErrorPtr is a global */
    cJSON *doc = cJSON_ParseWithLengthOpts(json, len, &at, 0);
    if (!doc) {
        size_t off = at && at >= json && at <= json + len ? (size_t)(at - json) : 0;
        snprintf(err, err_size, "json schema: not valid JSON (near byte %zu)", off);
        return NULL;
    }
    c.root = doc;
    char *out = NULL;
    js_buf b = {0};
    /* "#" is the root rule, so a schema may refer to itself */
    c.refs = malloc(sizeof *c.refs);
    char *rref = strdup("#"), *rname = strdup("root");
    if (!c.refs || !rref || !rname || rule_add(&c, "root", NULL) < 0) {
        free(rref); free(rname);
        fail(&c, "", "out of memory");
        goto done;
    }
    c.refs[0] = (js_ref){rref, rname};
    c.n_refs = c.cap_refs = 1;
    char *body = visit(&c, doc, "root", "");
    if (!body) goto done;
    c.rules[0].body = body;
    for (int i = 0; i < c.n_rules; i++) js_buf_printf(&b, "%s ::= %s\n", c.rules[i].name, c.rules[i].body ? c.rules[i].body : "\"\"");
    out = js_buf_take(&b);
    if (!out) snprintf(err, err_size, "json schema: out of memory");
done:
    free(b.s);
    for (int i = 0; i < c.n_rules; i++) free(c.rules[i].name), free(c.rules[i].body);
    for (int i = 0; i < c.n_refs; i++) free(c.refs[i].ref), free(c.refs[i].name);
    free(c.rules);
    free(c.refs);
    cJSON_Delete(doc);
    return out;
}

grammar *jsonschema_compile(const char *json, size_t len, char *err, size_t err_size) {
    char *text = jsonschema_to_gbnf(json, len, err, err_size);
    if (!text) return NULL;
    grammar *g = grammar_parse(text, strlen(text), err, err_size);
    free(text);
    return g;
}
