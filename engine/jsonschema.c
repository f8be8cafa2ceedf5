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

char *jsonschema_fail(jsonschema_conv *c, const char *ptr, const char *fmt, ...) {
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

char *jsonschema_dup(jsonschema_conv *c, const char *s) {
    char *d = strdup(s);
    if (!d) jsonschema_fail(c, "", "out of memory");
    return d;
}

/* parent + "/" + key with ~ and / escaped (RFC 6901); malloc'd. */
char *jsonschema_ptr_join(jsonschema_conv *c, const char *parent, const char *key) {
    jsonschema_buf b = {0};
    jsonschema_buf_puts(&b, parent);
    jsonschema_buf_puts(&b, "/");
    for (const char *p = key; *p; p++) {
        if (*p == '~') jsonschema_buf_puts(&b, "~0");
        else if (*p == '/') jsonschema_buf_puts(&b, "~1");
        else jsonschema_buf_add(&b, p, 1);
    }
    char *s = jsonschema_buf_take(&b);
    if (!s) jsonschema_fail(c, parent, "out of memory");
    return s;
}

char *jsonschema_ptr_index(jsonschema_conv *c, const char *parent, const char *key, int i) {
    char k[64];
    snprintf(k, sizeof k, "%s/%d", key, i);
    jsonschema_buf b = {0};
    jsonschema_buf_puts(&b, parent);
    jsonschema_buf_puts(&b, "/");
    jsonschema_buf_puts(&b, k);
    char *s = jsonschema_buf_take(&b);
    if (!s) jsonschema_fail(c, parent, "out of memory");
    return s;
}

static int rule_find(const jsonschema_conv *c, const char *name) {
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
static int rule_add(jsonschema_conv *c, const char *name, char *body) {
    if (c->n_rules == c->cap_rules) {
        int cap = c->cap_rules ? c->cap_rules * 2 : 32;
        jsonschema_rule *nr = realloc(c->rules, (size_t)cap * sizeof *nr);
        if (!nr) { free(body); jsonschema_fail(c, "", "out of memory"); return -1; }
        c->rules = nr;
        c->cap_rules = cap;
    }
    char *n = strdup(name);
    if (!n) { free(body); jsonschema_fail(c, "", "out of memory"); return -1; }
    c->rules[c->n_rules] = (jsonschema_rule){n, body};
    return c->n_rules++;
}

/* A rule name from base: letters, digits and '-', not a primitive's, not taken. malloc'd. */
static char *unique_name(jsonschema_conv *c, const char *base) {
    jsonschema_buf b = {0};
    for (const char *p = base; *p && b.n < 80; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
        if (ok) jsonschema_buf_add(&b, &ch, 1);
        else if (b.n && b.s[b.n - 1] != '-') jsonschema_buf_add(&b, "-", 1);
    }
    if (!b.n) jsonschema_buf_puts(&b, "r");
    size_t keep = b.n;
    for (int i = 0; !b.oom && (is_reserved(b.s) || rule_find(c, b.s) >= 0); i++) {
        b.n = keep;
        jsonschema_buf_printf(&b, "%d", i);
    }
    char *s = jsonschema_buf_take(&b);
    if (!s) jsonschema_fail(c, "", "out of memory");
    return s;
}

void jsonschema_need(jsonschema_conv *c, const char *name) {
    if (rule_find(c, name) >= 0) return;
    for (int i = 0; i < N_PRIMS; i++) {
        if (strcmp(PRIMS[i].name, name) != 0) continue;
        char *body = strdup(PRIMS[i].body);
        if (!body) { jsonschema_fail(c, "", "out of memory"); return; }
        if (rule_add(c, name, body) < 0) return;
        for (int d = 0; d < 4 && PRIMS[i].deps[d]; d++) jsonschema_need(c, PRIMS[i].deps[d]);
        if (strcmp(name, "value") == 0) { jsonschema_need(c, "boolean"); jsonschema_need(c, "null"); }
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
char *jsonschema_name_body(jsonschema_conv *c, const char *name, char *body) {
    if (!body) return NULL;
    if (is_ident(body)) return body;
    char *n = unique_name(c, name);
    if (!n || rule_add(c, n, body) < 0) { free(n); return NULL; }
    return n;
}


/* The GBNF literal of a JSON value as written compactly. */
int jsonschema_json_literal(jsonschema_conv *c, jsonschema_buf *b, const cJSON *v, const char *ptr) {
    char *text = cJSON_PrintUnformatted(v);
    if (!text) { jsonschema_fail(c, ptr, "out of memory"); return -1; }
    jsonschema_buf_literal(b, text, strlen(text));
    free(text);
    return 0;
}

char *jsonschema_take(jsonschema_conv *c, jsonschema_buf *b, const char *ptr) {
    char *s = jsonschema_buf_take(b);
    if (!s) jsonschema_fail(c, ptr, "out of memory");
    return s;
}

/* item{min,max} with GBNF operators (max < 0: no maximum). */
void jsonschema_repeat(jsonschema_buf *b, const char *item, long min, long max) {
    if (max == 0) { jsonschema_buf_puts(b, "\"\""); return; }
    if (min == 0 && max == 1) jsonschema_buf_printf(b, "%s?", item);
    else if (min == 1 && max < 0) jsonschema_buf_printf(b, "%s+", item);
    else if (min == 0 && max < 0) jsonschema_buf_printf(b, "%s*", item);
    else if (max < 0) jsonschema_buf_printf(b, "%s{%ld,}", item, min);
    else jsonschema_buf_printf(b, "%s{%ld,%ld}", item, min, max);
}

/* A count keyword (minItems, maxLength...): -1 when absent, -2 (with an error) when bad. */
long jsonschema_count_kw(jsonschema_conv *c, const cJSON *s, const char *kw, const char *ptr) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!v) return -1;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
        jsonschema_fail(c, ptr, "'%s' must be a non-negative integer", kw);
        return -2;
    }
    if (v->valuedouble > MAX_COUNT) {
        jsonschema_fail(c, ptr, "'%s' of %.0f is above %d, the most a grammar repetition can count; hint: lower it", kw,
             v->valuedouble, MAX_COUNT);
        return -2;
    }
    return (long)v->valuedouble;
}

/* ---- strings --------------------------------------------------------------------------------- */

static char *visit_string(jsonschema_conv *c, const cJSON *s, const char *ptr) {
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    long min = jsonschema_count_kw(c, s, "minLength", ptr), max = jsonschema_count_kw(c, s, "maxLength", ptr);
    if (min == -2 || max == -2) return NULL;
    jsonschema_buf b = {0};
    if (pat) {
        if (!cJSON_IsString(pat)) return jsonschema_fail(c, ptr, "'pattern' must be a string");
        if (min >= 0 || max >= 0)
            return jsonschema_fail(c, ptr, "'pattern' together with 'minLength'/'maxLength' cannot be expressed; hint: put the "
                        "length into the pattern ({m,n})");
        char why[256];
        jsonschema_buf e = {0};
        if (jsonschema_regex(&e, pat->valuestring, strlen(pat->valuestring), why, sizeof why)) {
            free(e.s);
            return jsonschema_fail(c, ptr, "'pattern' %s", why);
        }
        jsonschema_need(c, "space");
        jsonschema_buf_puts(&b, "\"\\\"\" ");
        jsonschema_buf_add(&b, e.s ? e.s : "", e.n);
        jsonschema_buf_puts(&b, " \"\\\"\" space");
        free(e.s);
        return jsonschema_take(c, &b, ptr);
    }
    if (cJSON_IsString(fmt)) {
        const char *f = fmt->valuestring;
        const char *rule = strcmp(f, "date") == 0 ? "date-string" : strcmp(f, "time") == 0 ? "time-string"
                         : strcmp(f, "date-time") == 0 ? "date-time-string" : strcmp(f, "uuid") == 0 ? "uuid" : NULL;
        if (rule) { /* other formats are annotations: a plain string */
            jsonschema_need(c, rule);
            return jsonschema_dup(c, rule);
        }
    }
    if (min < 0 && max < 0) {
        jsonschema_need(c, "string");
        return jsonschema_dup(c, "string");
    }
    if (max >= 0 && min > max) return jsonschema_fail(c, ptr, "'minLength' %ld is above 'maxLength' %ld", min, max);
    jsonschema_need(c, "char");
    jsonschema_need(c, "space");
    jsonschema_buf_puts(&b, "\"\\\"\" ");
    jsonschema_repeat(&b, "char", min < 0 ? 0 : min, max);
    jsonschema_buf_puts(&b, " \"\\\"\" space");
    return jsonschema_take(c, &b, ptr);
}

/* ---- numbers --------------------------------------------------------------------------------- */

static int bound(jsonschema_conv *c, const cJSON *s, const char *kw, const char *ptr, double *v) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!x || cJSON_IsBool(x)) return 0;
    if (!cJSON_IsNumber(x)) { jsonschema_fail(c, ptr, "'%s' must be a number", kw); return -1; }
    *v = x->valuedouble;
    return 1;
}

static char *visit_integer(jsonschema_conv *c, const cJSON *s, const char *ptr) {
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
        return jsonschema_fail(c, ptr, "an integer bound past 64 bits cannot be expressed");
    if (has_lo && has_hi && lo > hi) return jsonschema_fail(c, ptr, "the integer bounds [%.0f, %.0f] admit no integer", lo, hi);
    if (!has_lo && !has_hi) {
        jsonschema_need(c, "integer");
        return jsonschema_dup(c, "integer");
    }
    jsonschema_need(c, "space");
    jsonschema_buf b = {0};
    jsonschema_buf_puts(&b, "(");
    jsonschema_int_range(&b, has_lo, (int64_t)lo, has_hi, (int64_t)hi);
    jsonschema_buf_puts(&b, ") space");
    return jsonschema_take(c, &b, ptr);
}

/* ---- references ------------------------------------------------------------------------------ */

const cJSON *jsonschema_resolve(jsonschema_conv *c, const char *ref, const char *ptr) {
    if (ref[0] != '#') {
        jsonschema_fail(c, ptr, "'$ref' \"%s\": only references inside the schema (#/...) are supported", ref);
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
        jsonschema_fail(c, ptr, "'$ref' \"%s\" points at nothing in the schema", ref);
        return NULL;
    }
    return at;
}

static char *visit_ref(jsonschema_conv *c, const char *ref, const char *ptr) {
    for (int i = 0; i < c->n_refs; i++)
        if (strcmp(c->refs[i].ref, ref) == 0) return jsonschema_dup(c, c->refs[i].name);
    const cJSON *target = jsonschema_resolve(c, ref, ptr);
    if (!target) return NULL;
    const char *last = strrchr(ref, '/');
    char *name = unique_name(c, last ? last + 1 : "ref");
    if (!name) return NULL;
    int idx = rule_add(c, name, NULL);
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        jsonschema_ref *nr = realloc(c->refs, (size_t)cap * sizeof *nr);
        if (!nr) { free(name); return jsonschema_fail(c, ptr, "out of memory"); }
        c->refs = nr;
        c->cap_refs = cap;
    }
    char *rcopy = strdup(ref);
    if (idx < 0 || !rcopy) { free(rcopy); free(name); return jsonschema_fail(c, ptr, "out of memory"); }
    c->refs[c->n_refs++] = (jsonschema_ref){rcopy, name};
    char *body = jsonschema_visit(c, target, name, ref + 1);
    if (!body) return NULL;
    c->rules[idx].body = body;
    return jsonschema_dup(c, name);
}

/* ---- the visit ------------------------------------------------------------------------------- */

static char *visit_type(jsonschema_conv *c, const cJSON *s, const char *t, const char *name, const char *ptr) {
    if (strcmp(t, "object") == 0) return jsonschema_visit_object(c, s, name, ptr);
    if (strcmp(t, "array") == 0) return jsonschema_visit_array(c, s, name, ptr);
    if (strcmp(t, "string") == 0) return visit_string(c, s, ptr);
    if (strcmp(t, "integer") == 0) return visit_integer(c, s, ptr);
    if (strcmp(t, "number") == 0) {
        static const char *kws[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
        for (int i = 0; i < 4; i++)
            if (cJSON_GetObjectItemCaseSensitive(s, kws[i]))
                return jsonschema_fail(c, ptr, "'%s' on a number cannot be expressed as a grammar (only integer bounds); hint: "
                            "use \"type\": \"integer\" or drop the bound", kws[i]);
        jsonschema_need(c, "number");
        return jsonschema_dup(c, "number");
    }
    if (strcmp(t, "boolean") == 0 || strcmp(t, "null") == 0) {
        jsonschema_need(c, t);
        return jsonschema_dup(c, t);
    }
    return jsonschema_fail(c, ptr, "unknown type \"%s\"; hint: object, array, string, number, integer, boolean or null", t);
}

static char *union_of(jsonschema_conv *c, const cJSON *arr, const char *kw, const char *name, const char *ptr) {
    if (!cJSON_IsArray(arr) || !arr->child) return jsonschema_fail(c, ptr, "'%s' must be a non-empty array of schemas", kw);
    jsonschema_buf b = {0};
    int i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s-%d", name, i);
        char *pp = jsonschema_ptr_index(c, ptr, kw, i);
        char *v = pp ? jsonschema_visit(c, it, sub, pp) : NULL;
        free(pp);
        if (!v) { free(b.s); return NULL; }
        jsonschema_buf_printf(&b, "%s%s", i ? " | " : "", v);
        free(v);
    }
    return jsonschema_take(c, &b, ptr);
}

/* Keywords that constrain a value beside $ref, anyOf or oneOf, which the converter would
 * otherwise drop (the grammar would then allow texts that break them). */
static const char *CONSTRAINTS[] = {"properties", "required", "additionalProperties", "items", "prefixItems",
                                    "minItems", "maxItems", "pattern", "format", "minLength", "maxLength",
                                    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "const", "enum"};

static char *check_siblings(jsonschema_conv *c, const cJSON *s, const char *kw, const char *ptr) {
    for (size_t i = 0; i < sizeof CONSTRAINTS / sizeof CONSTRAINTS[0]; i++)
        if (cJSON_GetObjectItemCaseSensitive(s, CONSTRAINTS[i]))
            return jsonschema_fail(c, ptr, "'%s' beside '%s' is not supported; hint: move '%s' into the referenced schema or "
                        "into each alternative", CONSTRAINTS[i], kw, CONSTRAINTS[i]);
    return (char *)"";
}

static char *visit_body(jsonschema_conv *c, const cJSON *s, const char *name, const char *ptr) {
    if (cJSON_IsTrue(s)) { jsonschema_need(c, "value"); return jsonschema_dup(c, "value"); }
    if (cJSON_IsFalse(s)) return jsonschema_fail(c, ptr, "the schema false admits no value");
    if (!cJSON_IsObject(s)) return jsonschema_fail(c, ptr, "a schema must be an object or true/false");
    for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, UNSUPPORTED[i]);
        if (k && !cJSON_IsFalse(k))
            return jsonschema_fail(c, ptr, "keyword '%s' cannot be expressed as a grammar; hint: remove it (the output will then "
                        "not be checked against it)", UNSUPPORTED[i]);
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) {
        if (!cJSON_IsString(ref)) return jsonschema_fail(c, ptr, "'$ref' must be a string");
        if (!check_siblings(c, s, "$ref", ptr)) return NULL;
        return visit_ref(c, ref->valuestring, ptr);
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (cst) {
        jsonschema_buf b = {0};
        jsonschema_need(c, "space");
        if (jsonschema_json_literal(c, &b, cst, ptr)) { free(b.s); return NULL; }
        jsonschema_buf_puts(&b, " space");
        return jsonschema_take(c, &b, ptr);
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en) {
        if (!cJSON_IsArray(en) || !en->child) return jsonschema_fail(c, ptr, "'enum' must be a non-empty array");
        jsonschema_buf b = {0};
        jsonschema_need(c, "space");
        jsonschema_buf_puts(&b, "(");
        for (const cJSON *v = en->child; v; v = v->next) {
            if (v != en->child) jsonschema_buf_puts(&b, " | ");
            if (jsonschema_json_literal(c, &b, v, ptr)) { free(b.s); return NULL; }
        }
        jsonschema_buf_puts(&b, ") space");
        return jsonschema_take(c, &b, ptr);
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (any) return check_siblings(c, s, "anyOf", ptr) ? union_of(c, any, "anyOf", name, ptr) : NULL;
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    if (one) return check_siblings(c, s, "oneOf", ptr) ? union_of(c, one, "oneOf", name, ptr) : NULL;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsArray(type)) {
        if (!type->child) return jsonschema_fail(c, ptr, "'type' must not be an empty list");
        jsonschema_buf b = {0};
        for (const cJSON *t = type->child; t; t = t->next) {
            if (!cJSON_IsString(t)) { free(b.s); return jsonschema_fail(c, ptr, "'type' must hold strings"); }
            char sub[200];
            snprintf(sub, sizeof sub, "%s-%s", name, t->valuestring);
            char *v = jsonschema_name_body(c, sub, visit_type(c, s, t->valuestring, sub, ptr));
            if (!v) { free(b.s); return NULL; }
            jsonschema_buf_printf(&b, "%s%s", t != type->child ? " | " : "", v);
            free(v);
        }
        return jsonschema_take(c, &b, ptr);
    }
    if (type && !cJSON_IsString(type)) return jsonschema_fail(c, ptr, "'type' must be a string or a list of strings");
    if (type) return visit_type(c, s, type->valuestring, name, ptr);
    /* no type: what the keywords imply, else any value */
    if (cJSON_GetObjectItemCaseSensitive(s, "properties") || cJSON_GetObjectItemCaseSensitive(s, "required") ||
        cJSON_GetObjectItemCaseSensitive(s, "additionalProperties") || cJSON_GetObjectItemCaseSensitive(s, "allOf"))
        return jsonschema_visit_object(c, s, name, ptr);
    if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems"))
        return jsonschema_visit_array(c, s, name, ptr);
    if (cJSON_GetObjectItemCaseSensitive(s, "pattern") || cJSON_GetObjectItemCaseSensitive(s, "format") ||
        cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength"))
        return visit_string(c, s, ptr);
    jsonschema_need(c, "value");
    return jsonschema_dup(c, "value");
}

/* The schema as a rule name (or a primitive's name). */
char *jsonschema_visit(jsonschema_conv *c, const cJSON *s, const char *name, const char *ptr) {
    if (c->failed) return NULL;
    if (c->depth >= MAX_DEPTH) return jsonschema_fail(c, ptr, "schema nested deeper than %d levels", MAX_DEPTH);
    c->depth++;
    char *r = jsonschema_name_body(c, name, visit_body(c, s, name, ptr));
    c->depth--;
    return r;
}

char *jsonschema_to_gbnf(const char *json, size_t len, char *err, size_t err_size) {
    jsonschema_conv c = {.err = err, .err_size = err_size};
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
    jsonschema_buf b = {0};
    /* "#" is the root rule, so a schema may refer to itself */
    c.refs = malloc(sizeof *c.refs);
    char *rref = strdup("#"), *rname = strdup("root");
    if (!c.refs || !rref || !rname || rule_add(&c, "root", NULL) < 0) {
        free(rref); free(rname);
        jsonschema_fail(&c, "", "out of memory");
        goto done;
    }
    c.refs[0] = (jsonschema_ref){rref, rname};
    c.n_refs = c.cap_refs = 1;
    char *body = jsonschema_visit(&c, doc, "root", "");
    if (!body) goto done;
    c.rules[0].body = body;
    for (int i = 0; i < c.n_rules; i++) jsonschema_buf_printf(&b, "%s ::= %s\n", c.rules[i].name, c.rules[i].body ? c.rules[i].body : "\"\"");
    out = jsonschema_buf_take(&b);
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
