/* Unit tests of the JSON Schema converter (engine/jsonschema.h): for each of ~55 schemas,
 * documents known valid must be accepted and known invalid rejected by the compiled grammar,
 * and random texts generated from the grammar must be accepted by the matcher, parse with cJSON
 * and pass a small validator of the schema keywords used here; plus the errors for what a
 * grammar cannot express. MGI_JSONSCHEMA_DUMP=file writes the generated texts as JSON lines
 * (schema, text) for a cross-check with Python's jsonschema. */
#include <cjson/cJSON.h>
#include <locale.h>
#include <math.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/grammar_internal.h"
#include "engine/jsonschema.h"
#include "engine/tokenizer.h"
#include "gguf/gguf.h"
#include "tests/unit/test.h"

static char err[1024];

/* ---- a validator for the keywords the schemas below use ------------------------------------- */

static int validate(const cJSON *root, const cJSON *s, const cJSON *v, int depth);

static const cJSON *resolve(const cJSON *root, const char *ref) {
    const cJSON *at = root;
    const char *p = ref + 1;
    while (at && *p == '/') {
        char seg[128];
        size_t k = 0;
        for (p++; *p && *p != '/' && k < sizeof seg - 1; p++) seg[k++] = *p;
        seg[k] = 0;
        at = cJSON_GetObjectItemCaseSensitive(at, seg);
    }
    return at;
}

static size_t utf8_len(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* POSIX ERE after rewriting the ECMAScript shorthands the schemas use. */
static int pattern_ok(const char *pat, const char *s) {
    char ere[512];
    size_t o = 0;
    int in_class = 0;
    for (const char *p = pat; *p && o < sizeof ere - 16; p++) {
        if (p[0] == '[' && !in_class) in_class = 1;
        else if (p[0] == ']' && in_class) in_class = 0;
        if (p[0] == '\\' && p[1] == 'd') { o += (size_t)snprintf(ere + o, 16, in_class ? "0-9" : "[0-9]"); p++; }
        else if (p[0] == '\\' && p[1] == 'w') { o += (size_t)snprintf(ere + o, 16, in_class ? "A-Za-z0-9_" : "[A-Za-z0-9_]"); p++; }
        else if (p[0] == '(' && p[1] == '?' && p[2] == ':') { ere[o++] = '('; p += 2; }
        else if ((p[0] == '+' || p[0] == '*' || p[0] == '?' || p[0] == '}') && p[1] == '?') { ere[o++] = p[0]; p++; }
        else ere[o++] = *p;
    }
    ere[o] = 0;
    regex_t re;
    if (regcomp(&re, ere, REG_EXTENDED | REG_NOSUB)) return 0;
    int ok = regexec(&re, s, 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
}

static int digits(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static int date_ok(const char *s) {
    if (strlen(s) < 10 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2)) return 0;
    int y = atoi(s), m = atoi(s + 5), d = atoi(s + 8);
    static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return y >= 1 && m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1] && !(m == 2 && d == 29 && !leap);
}

static int time_ok(const char *s) {
    if (!digits(s, 2) || s[2] != ':' || !digits(s + 3, 2) || s[5] != ':' || !digits(s + 6, 2)) return 0;
    if (atoi(s) > 23 || atoi(s + 3) > 59 || atoi(s + 6) > 59) return 0;
    s += 8;
    if (*s == '.') { s++; while (*s >= '0' && *s <= '9') s++; }
    if (*s == 'Z') return s[1] == 0;
    return (*s == '+' || *s == '-') && digits(s + 1, 2) && s[3] == ':' && digits(s + 4, 2) && s[6] == 0;
}

static int format_ok(const char *f, const char *s) {
    if (strcmp(f, "date") == 0) return strlen(s) == 10 && date_ok(s);
    if (strcmp(f, "time") == 0) return time_ok(s);
    if (strcmp(f, "date-time") == 0) return strlen(s) > 11 && date_ok(s) && s[10] == 'T' && time_ok(s + 11);
    if (strcmp(f, "uuid") == 0) {
        if (strlen(s) != 36) return 0;
        for (int i = 0; i < 36; i++) {
            int dash = i == 8 || i == 13 || i == 18 || i == 23;
            if (dash ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i])) return 0;
        }
    }
    return 1;
}

static int type_ok(const char *t, const cJSON *v) {
    if (strcmp(t, "object") == 0) return cJSON_IsObject(v);
    if (strcmp(t, "array") == 0) return cJSON_IsArray(v);
    if (strcmp(t, "string") == 0) return cJSON_IsString(v);
    if (strcmp(t, "number") == 0) return cJSON_IsNumber(v);
    if (strcmp(t, "integer") == 0) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (strcmp(t, "boolean") == 0) return cJSON_IsBool(v);
    if (strcmp(t, "null") == 0) return cJSON_IsNull(v);
    return 0;
}

static double num(const cJSON *s, const char *k, int *has) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, k);
    *has = cJSON_IsNumber(x);
    return *has ? x->valuedouble : 0;
}

static int validate(const cJSON *root, const cJSON *s, const cJSON *v, int depth) {
    if (depth > 200) return 0;
    if (cJSON_IsBool(s)) return cJSON_IsTrue(s);
    const cJSON *k;
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "$ref"))) {
        const cJSON *t = resolve(root, k->valuestring);
        return t && validate(root, t, v, depth + 1);
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "const")) && !cJSON_Compare(k, v, 1)) return 0;
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        int any = 0;
        for (const cJSON *e = k->child; e; e = e->next) any |= cJSON_Compare(e, v, 1);
        if (!any) return 0;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "anyOf"))) {
        int any = 0;
        for (const cJSON *e = k->child; e; e = e->next) any |= validate(root, e, v, depth + 1);
        if (!any) return 0;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "oneOf"))) {
        int n = 0;
        for (const cJSON *e = k->child; e; e = e->next) n += validate(root, e, v, depth + 1);
        if (n != 1) return 0;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "allOf")))
        for (const cJSON *e = k->child; e; e = e->next)
            if (!validate(root, e, v, depth + 1)) return 0;
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "type"))) {
        int any = 0;
        if (cJSON_IsString(k)) any = type_ok(k->valuestring, v);
        for (const cJSON *e = cJSON_IsArray(k) ? k->child : NULL; e; e = e->next) any |= type_ok(e->valuestring, v);
        if (!any) return 0;
    }
    if (cJSON_IsObject(v)) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
        for (const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "required") ? cJSON_GetObjectItemCaseSensitive(s, "required")->child : NULL; r; r = r->next)
            if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring)) return 0;
        for (const cJSON *m = v->child; m; m = m->next) { /* every member, repeated keys too */
            const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, m->string) : NULL;
            if (ps) { if (!validate(root, ps, m, depth + 1)) return 0; }
            else if (addl && !validate(root, addl, m, depth + 1)) return 0;
        }
    }
    if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v), has;
        double mn = num(s, "minItems", &has);
        if (has && n < mn) return 0;
        double mx = num(s, "maxItems", &has);
        if (has && n > mx) return 0;
        const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        if (cJSON_IsArray(items)) prefix = items, items = NULL;
        int i = 0;
        for (const cJSON *e = v->child; e; e = e->next, i++) {
            const cJSON *ps = prefix ? cJSON_GetArrayItem(prefix, i) : NULL;
            if (ps) { if (!validate(root, ps, e, depth + 1)) return 0; }
            else if (items && !validate(root, items, e, depth + 1)) return 0;
        }
    }
    if (cJSON_IsString(v)) {
        int has;
        size_t n = utf8_len(v->valuestring);
        double mn = num(s, "minLength", &has);
        if (has && n < mn) return 0;
        double mx = num(s, "maxLength", &has);
        if (has && n > mx) return 0;
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "pattern")) && !pattern_ok(k->valuestring, v->valuestring)) return 0;
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "format")) && !format_ok(k->valuestring, v->valuestring)) return 0;
    }
    if (cJSON_IsNumber(v)) {
        int has, ex = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum"));
        double x = v->valuedouble, b = num(s, "minimum", &has);
        if (has && (ex ? x <= b : x < b)) return 0;
        ex = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum"));
        b = num(s, "maximum", &has);
        if (has && (ex ? x >= b : x > b)) return 0;
        b = num(s, "exclusiveMinimum", &has);
        if (has && x <= b) return 0;
        b = num(s, "exclusiveMaximum", &has);
        if (has && x >= b) return 0;
    }
    return 1;
}

/* ---- random texts from a grammar ------------------------------------------------------------ */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

typedef struct {
    const grammar *g;
    int64_t *cost; /* per rule: the fewest characters it can produce */
    char *out;
    size_t n, cap;
} gen;

static int64_t alt_cost(const gen *G, int32_t pos) {
    int64_t c = 0;
    for (; G->g->elems[pos].type != GRAMMAR_END; pos++)
        c += G->g->elems[pos].type == GRAMMAR_CHARS ? 1 : G->cost[G->g->elems[pos].val];
    return c;
}

static void gen_costs(gen *G) {
    const grammar *g = G->g;
    G->cost = malloc((size_t)g->n_rules * sizeof *G->cost);
    for (int32_t r = 0; r < g->n_rules; r++) G->cost[r] = INT32_MAX;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t r = 0; r < g->n_rules; r++)
            for (int32_t a = 0; a < g->rules[r].n_alts; a++) {
                int64_t c = alt_cost(G, g->alts[g->rules[r].first_alt + a]);
                if (c < G->cost[r]) G->cost[r] = c, changed = 1;
            }
    }
}

static void put(gen *G, uint32_t cp) {
    if (G->n + 5 > G->cap) G->out = realloc(G->out, G->cap = G->cap * 2 + 64);
    char *o = G->out + G->n;
    if (cp < 0x80) o[0] = (char)cp, G->n += 1;
    else if (cp < 0x800) o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), G->n += 2;
    else if (cp < 0x10000) o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F)), G->n += 3;
    else o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F)), o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F)), G->n += 4;
}

static void gen_chars(gen *G, int32_t set) {
    const grammar_charset *cs = &G->g->sets[set];
    int32_t i = cs->first + (int32_t)(rnd() % (uint32_t)cs->n);
    if (G->g->ranges[cs->first].lo < 128 && rnd() % 4) i = cs->first; /* mostly ASCII */
    grammar_range r = G->g->ranges[i];
    uint32_t hi = r.hi < 128 || rnd() % 2 ? r.hi : (r.hi - r.lo > 2000 ? r.lo + 2000 : r.hi);
    uint32_t cp = r.lo + rnd() % (hi - r.lo + 1);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = r.lo >= 0xD800 ? 0xE000 : r.lo; /* the matcher refuses surrogates */
    put(G, cp);
}

static void gen_rule(gen *G, int32_t r, int depth) {
    const grammar *g = G->g;
    const grammar_rule *gr = &g->rules[r];
    int32_t pick = (int32_t)(rnd() % (uint32_t)gr->n_alts);
    if (depth > 10 || G->n > 600) { /* wind down: the cheapest alternative */
        int64_t best = INT64_MAX;
        for (int32_t a = 0; a < gr->n_alts; a++) {
            int64_t c = alt_cost(G, g->alts[gr->first_alt + a]);
            if (c < best) best = c, pick = a;
        }
    }
    for (int32_t pos = g->alts[gr->first_alt + pick]; g->elems[pos].type != GRAMMAR_END; pos++) {
        if (g->elems[pos].type == GRAMMAR_CHARS) gen_chars(G, g->elems[pos].val);
        else gen_rule(G, g->elems[pos].val, depth + 1);
    }
}

/* ---- the schemas ---------------------------------------------------------------------------- */

typedef struct {
    const char *schema;
    const char *yes[6];
    const char *no[6];
} schema_case;

static const schema_case CASES[] = {
    {"{\"type\":\"string\"}", {"\"abc\"", "\"\"", "\"a\\\"b\\u00e9\"", "\"\xc3\xa9\""}, {"abc", "1", "\"a", "\"a\"b\""}},
    {"{\"type\":\"integer\"}", {"0", "-12", "123"}, {"1.5", "01", "\"1\"", "1e3"}},
    {"{\"type\":\"number\"}", {"1.5", "-0.25e10", "3", "2E-3"}, {"1.", "+1", ".5", "--1"}},
    {"{\"type\":\"boolean\"}", {"true", "false"}, {"True", "1", "null"}},
    {"{\"type\":\"null\"}", {"null"}, {"nil", "0"}},
    {"{}", {"1", "{\"a\":[null, true, \"x\"]}", "\"x\"", "[]"}, {"{", "[1,]", "nul"}},
    {"true", {"{\"k\": {\"k\": {}}}", "-3.5"}, {"'a'"}},
    {"{\"type\":[\"string\",\"null\"]}", {"\"a\"", "null"}, {"1", "[]"}},
    {"{\"type\":[\"integer\",\"array\"],\"items\":{\"type\":\"integer\"}}", {"5", "[1, 2]"}, {"[\"a\"]", "1.5"}},
    {"{\"enum\":[\"red\",\"green\",1,null]}", {"\"red\"", "1", "null"}, {"\"blue\"", "2", "\"Red\""}},
    {"{\"const\":{\"a\":[1,2]}}", {"{\"a\":[1,2]}"}, {"{\"a\":[1]}", "{}"}},
    {"{\"enum\":[\"\xc3\xa9\",\"a\\\"b\",\"line\\nbreak\"]}", {"\"\xc3\xa9\"", "\"a\\\"b\"", "\"line\\nbreak\""}, {"\"a\"b\"", "\"e\""}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\",\"b\"]}",
     {"{\"a\":1,\"b\":\"x\"}", "{ \"a\" : 1 , \"b\" : \"x\" }", "{\n  \"a\": 1,\n  \"b\": \"x\"\n}"},
     {"{\"a\":1}", "{\"a\":\"1\",\"b\":\"x\"}", "{}", "{\"a\":1,\"b\":2}"}},
    {"{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"integer\"}}}",
     {"{}", "{\"a\":1}", "{\"b\":2}", "{\"a\":1,\"c\":3}", "{\"a\":1,\"b\":2,\"c\":3}"},
     {"{\"d\":1}", "{\"a\":1,\"a\":2}", "{\"a\":\"x\"}", "{,}"}},
    {"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"name\":{\"type\":\"string\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"id\"]}",
     {"{\"id\":1}", "{\"id\":1,\"tags\":[]}", "{\"id\":1,\"name\":\"n\",\"tags\":[\"t\"]}"},
     {"{\"name\":\"n\"}", "{\"id\":1,\"tags\":[1]}", "{\"id\":1,}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"additionalProperties\":false}",
     {"{}", "{\"a\":true}"}, {"{\"b\":true}", "{\"a\":1}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}",
     {"{\"a\":1,\"x\":[1]}", "{\"zz\":null}", "{}", "{\"ab\":1,\"\":2}"}, {"{\"a\":\"s\"}", "{\"a\":1,\"a\":\"x\"}", "{\"x\":1,\"a\":\"q\"}"}},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", {"{\"x\":1,\"y\":2}", "{}"}, {"{\"x\":\"a\"}", "{\"x\":1.5}"}},
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"nam\":{\"type\":\"integer\"}},\"required\":[\"name\"],\"additionalProperties\":{\"type\":\"boolean\"}}",
     {"{\"name\":\"x\",\"na\":true}", "{\"name\":\"x\",\"nam\":3,\"names\":false}"}, {"{\"name\":\"x\",\"name\":true}", "{\"name\":\"x\",\"nam\":true}"}},
    {"{\"type\":\"object\",\"additionalProperties\":false}", {"{}", "{ }"}, {"{\"a\":1}"}},
    {"{\"type\":\"object\",\"required\":[\"id\"]}", {"{\"id\":1}", "{\"id\":{\"x\":[]}}"}, {"{}", "{\"di\":1}"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", {"[]", "[1,2,3]", "[ 1 , 2 ]"}, {"[1,\"a\"]", "[1,]", "[,1]"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,\"maxItems\":3}",
     {"[true,false]", "[true,true,true]"}, {"[true]", "[true,true,true,true]", "[]"}},
    {"{\"type\":\"array\",\"minItems\":1}", {"[1]", "[\"a\",{}]"}, {"[]"}},
    {"{\"type\":\"array\",\"maxItems\":0}", {"[]"}, {"[1]"}},
    {"{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", {"[\"a\",1]"}, {"[1,\"a\"]", "[\"a\",1,2]"}},
    {"{\"type\":\"array\",\"items\":[{\"type\":\"null\"},{\"enum\":[\"x\",\"y\"]}]}", {"[null,\"y\"]"}, {"[null,\"z\"]"}},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\",\"minimum\":5}]}", {"\"x\"", "7", "5"}, {"3", "true", "4"}},
    {"{\"oneOf\":[{\"type\":\"boolean\"},{\"type\":\"null\"}]}", {"true", "null"}, {"1", "\"true\""}},
    {"{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]},{\"properties\":{\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"]}]}",
     {"{\"a\":\"x\",\"b\":1}"}, {"{\"a\":\"x\"}", "{\"b\":1}", "{\"a\":1,\"b\":1}"}},
    {"{\"$defs\":{\"base\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"]}},\"allOf\":[{\"$ref\":\"#/$defs/base\"},{\"properties\":{\"x\":{\"type\":\"null\"}}}]}",
     {"{\"id\":3}", "{\"id\":3,\"x\":null}"}, {"{\"x\":null}", "{\"id\":\"3\"}"}},
    {"{\"$defs\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"y\":{\"type\":\"number\"}},\"required\":[\"x\",\"y\"]}},\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/pt\"}}",
     {"[{\"x\":1,\"y\":2}]", "[]", "[{\"x\":1.5,\"y\":-2},{\"x\":0,\"y\":0}]"}, {"[{\"x\":1}]", "[{\"y\":1,\"x\":2,\"z\":3}]"}},
    {"{\"definitions\":{\"color\":{\"enum\":[\"r\",\"g\"]}},\"type\":\"object\",\"properties\":{\"fg\":{\"$ref\":\"#/definitions/color\"},\"bg\":{\"$ref\":\"#/definitions/color\"}},\"required\":[\"fg\",\"bg\"]}",
     {"{\"fg\":\"r\",\"bg\":\"g\"}"}, {"{\"fg\":\"r\",\"bg\":\"b\"}"}},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}",
     {"{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]}]}", "{\"v\":1}"}, {"{\"kids\":[]}", "{\"v\":1,\"kids\":[{\"v\":\"x\"}]}"}},
    {"{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#\"},\"n\":{\"type\":\"integer\"}}}",
     {"{}", "{\"next\":{\"next\":{}}}", "{\"next\":{\"n\":1},\"n\":2}"}, {"{\"next\":1}"}},
    {"{\"$defs\":{\"a\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/b\"}},\"b\":{\"anyOf\":[{\"type\":\"integer\"},{\"$ref\":\"#/$defs/a\"}]}},\"$ref\":\"#/$defs/a\"}",
     {"[1,[2,[3]],[]]", "[]"}, {"[\"x\"]", "1"}},
    {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-[0-9]{3}$\"}", {"\"AB-123\""}, {"\"AB-12\"", "\"ab-123\"", "\"AB-1234\""}},
    {"{\"type\":\"string\",\"pattern\":\"^(foo|bar)+baz?$\"}", {"\"foobarba\"", "\"foobaz\"", "\"barba\""}, {"\"baz\"", "\"fooba z\""}},
    {"{\"type\":\"string\",\"pattern\":\"^\\\\d+\\\\.\\\\w*$\"}", {"\"12.ab_\"", "\"1.\""}, {"\"x.1\"", "\"12\""}},
    {"{\"type\":\"string\",\"pattern\":\"abc\"}", {"\"xxabcyy\"", "\"abc\""}, {"\"ab\"", "\"acb\""}},
    {"{\"type\":\"string\",\"pattern\":\"^a\\\"b$\"}", {"\"a\\\"b\""}, {"\"ab\"", "\"a\"b\""}},
    {"{\"type\":\"string\",\"pattern\":\"^[^0-9]+$\"}", {"\"abc\"", "\"\xc3\xa9\"", "\"a\\\\b\""}, {"\"a1\"", "\"\""}},
    {"{\"type\":\"string\",\"pattern\":\"^a+?b{1,2}c?$\"}", {"\"ab\"", "\"aabbc\""}, {"\"abbb\"", "\"b\""}},
    {"{\"type\":\"string\",\"pattern\":\"^a.c$\"}", {"\"abc\"", "\"a\\\"c\"", "\"a\xc3\xa9" "c\""}, {"\"ac\"", "\"abbc\""}},
    {"{\"type\":\"string\",\"pattern\":\"^(?:[a-z]+-)*[a-z]+$\"}", {"\"a-bc-d\"", "\"x\""}, {"\"-a\"", "\"a-\""}},
    {"{\"type\":\"string\",\"pattern\":\"^[\\\\w.+-]+@[a-z]+\\\\.(com|org)$\"}", {"\"a.b+c@site.org\""}, {"\"a@site.net\"", "\"@x.com\""}},
    {"{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-29\"", "\"1999-12-31\"", "\"2000-02-29\"", "\"2023-04-30\""}, {"\"2024-13-01\"", "\"24-01-01\"", "\"2024-1-01\"", "\"2023-02-29\"", "\"1900-02-29\"", "\"2023-04-31\""}},
    {"{\"type\":\"string\",\"format\":\"time\"}", {"\"12:34:56Z\"", "\"23:59:59.123+02:00\""}, {"\"24:00:00Z\"", "\"12:34:56\""}},
    {"{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2024-01-01T00:00:00Z\""}, {"\"2024-01-01 00:00:00Z\"", "\"2024-01-01\""}},
    {"{\"type\":\"string\",\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567e89b12d3a456426614174000\"", "\"g23e4567-e89b-12d3-a456-426614174000\""}},
    {"{\"type\":\"string\",\"format\":\"email\"}", {"\"anything\""}, {"1"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}", {"\"ab\"", "\"abcd\"", "\"\xc3\xa9\xc3\xa9\"", "\"\\n\\t\""}, {"\"a\"", "\"abcde\"", "\"\""}},
    {"{\"type\":\"string\",\"minLength\":3}", {"\"abc\"", "\"abcdefgh\""}, {"\"ab\""}},
    {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":5}", {"-5", "0", "5", "-1"}, {"-6", "6", "10", "-10"}},
    {"{\"type\":\"integer\",\"minimum\":10}", {"10", "99", "100", "123456"}, {"9", "-1", "0"}},
    {"{\"type\":\"integer\",\"maximum\":-3}", {"-3", "-100", "-29"}, {"-2", "0", "3"}},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":100}", {"1", "99", "50"}, {"0", "100", "-1"}},
    {"{\"type\":\"integer\",\"minimum\":100,\"maximum\":12345}", {"100", "999", "1000", "12345", "9999"}, {"99", "12346", "20000", "13000"}},
    {"{\"type\":\"integer\",\"minimum\":-1000}", {"-1000", "-5", "0", "77777"}, {"-1001", "-2000"}},
    {"{\"type\":\"integer\",\"maximum\":250}", {"-99999", "250", "0", "249"}, {"251", "1000", "260"}},
    {"{\"type\":\"integer\",\"minimum\":-250,\"maximum\":-17}", {"-17", "-250", "-99"}, {"-16", "-251", "0"}},
    {"{\"type\":\"integer\",\"minimum\":5,\"exclusiveMinimum\":true}", {"6", "100"}, {"5", "4"}},
    {"{\"type\":\"integer\",\"minimum\":1.5,\"maximum\":3.5}", {"2", "3"}, {"1", "4"}},
    {"{\"type\":\"object\",\"properties\":{\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"sku\":{\"type\":\"string\",\"pattern\":\"^[A-Z0-9]{4,8}$\"},\"qty\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":99}},\"required\":[\"sku\",\"qty\"]},\"minItems\":1},\"status\":{\"enum\":[\"open\",\"closed\"]}},\"required\":[\"items\",\"status\"]}",
     {"{\"items\":[{\"sku\":\"AB12\",\"qty\":3}],\"status\":\"open\"}"},
     {"{\"items\":[],\"status\":\"open\"}", "{\"items\":[{\"sku\":\"ab12\",\"qty\":3}],\"status\":\"open\"}", "{\"items\":[{\"sku\":\"AB12\",\"qty\":100}],\"status\":\"open\"}"}},
    {"{\"title\":\"Person\",\"description\":\"x\",\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\",\"properties\":{\"first\":{\"type\":\"string\",\"description\":\"d\"},\"age\":{\"type\":\"integer\",\"minimum\":0,\"default\":3}},\"required\":[\"first\",\"age\"]}",
     {"{\"first\":\"Ann\",\"age\":30}"}, {"{\"first\":\"Ann\",\"age\":-1}"}},
    {"{\"type\":\"object\",\"properties\":{\"when\":{\"type\":\"string\",\"format\":\"date-time\"},\"id\":{\"type\":\"string\",\"format\":\"uuid\"},\"score\":{\"type\":\"number\"},\"ok\":{\"type\":\"boolean\"},\"note\":{\"type\":[\"string\",\"null\"],\"maxLength\":5}},\"required\":[\"when\",\"id\",\"score\",\"ok\",\"note\"]}",
     {"{\"when\":\"2020-05-06T07:08:09Z\",\"id\":\"123e4567-e89b-12d3-a456-426614174000\",\"score\":1.5,\"ok\":true,\"note\":null}"},
     {"{\"when\":\"2020-05-06\",\"id\":\"123e4567-e89b-12d3-a456-426614174000\",\"score\":1.5,\"ok\":true,\"note\":null}"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},\"minItems\":3,\"maxItems\":3},\"minItems\":3,\"maxItems\":3}",
     {"[[1,2,3],[4,5,6],[7,8,9]]"}, {"[[1,2,3],[4,5,6]]", "[[1,2,3],[4,5,6],[7,8,10]]"}},
};

static const struct {
    const char *schema, *want1, *want2;
} ERRORS[] = {
    {"{\"not\":{}}", "json schema #:", "keyword 'not'"},
    {"{\"properties\":{\"a\":{\"multipleOf\":2}}}", "#/properties/a:", "'multipleOf'"},
    {"{\"type\":\"number\",\"minimum\":0}", "#:", "'minimum' on a number"},
    {"{\"$ref\":\"#/$defs/missing\"}", "#:", "points at nothing"},
    {"{\"$ref\":\"http://example.com/s.json\"}", "#:", "only references inside"},
    {"{\"type\":\"string\",\"pattern\":\"^(?=a)b$\"}", "#:", "lookahead"},
    {"{\"items\":{\"type\":\"string\",\"pattern\":\"^(a)\\\\1$\"}}", "#/items:", "backreference"},
    {"{\"type\":\"array\",\"maxItems\":5000}", "#:", "'maxItems' of 5000"},
    {"{\"type\":\"frob\"}", "#:", "unknown type \"frob\""},
    {"{\"type\":", "not valid JSON", "near byte"},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"uniqueItems\":true}]}", "#/anyOf/1:", "'uniqueItems'"},
    {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":1}", "#:", "admit no integer"},
    {"false", "#:", "admits no value"},
    {"{\"allOf\":[{\"type\":\"string\"},{\"minLength\":1}]}", "#/allOf/0:", "'allOf' can only combine object"},
    {"{\"properties\":{\"a/b\":{\"if\":{}}}}", "#/properties/a~1b:", "'if'"},
    {"{\"$defs\":{\"x\":{\"type\":\"string\",\"pattern\":\"^\\\\p{L}$\"}},\"$ref\":\"#/$defs/x\"}", "#/$defs/x:", "\\p{...}"},
    {"{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}", "#:", "'minLength' 5 is above"},
    {"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"maxLength\":3}", "#:", "'pattern' together with"},
    {"{\"type\":\"array\",\"minItems\":-1}", "#:", "non-negative integer"},
    {"{\"prefixItems\":\"integer\"}", "#:", "'prefixItems' must be an array"},
    {"{\"prefixItems\":[{},{}],\"maxItems\":1}", "#:", "only tuples of exactly their length"},
    {"{\"items\":false,\"minItems\":1}", "#:", "admits no array"},
    {"{\"type\":\"object\",\"required\":\"a\"}", "#:", "'required' must be an array"},
    {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"anyOf\":[{\"required\":[\"a\"]}]}", "#:", "'properties' beside 'anyOf'"},
    {"{\"$defs\":{\"x\":{}},\"items\":{\"$ref\":\"#/$defs/x\",\"minLength\":2}}", "#/items:", "'minLength' beside '$ref'"},
};

static int accepts(const grammar *g, const char *s, size_t n) {
    grammar_state *st = grammar_state_new(g);
    int ok = st && grammar_accept_bytes(st, s, n) == 0 && grammar_is_complete(st);
    grammar_state_free(st);
    return ok;
}

/* A schema's grammar over a real vocabulary: on a random walk, each mask equals the per-token
 * check, every token taken keeps the text a prefix the grammar accepts, and a walk that ends
 * (end-of-generation allowed and taken) leaves JSON that validates. Prints the time per step. */
static void test_real_vocab(void) {
    const char *path = test_shared("vocab/ggml-vocab-gpt-2.gguf");
    if (access(path, R_OK) != 0) {
        SKIP("schema masks on gpt-2's vocabulary", "file not present");
        return;
    }
    gguf_ctx *gg = gguf_open(path, 1, err, sizeof err);
    tokenizer *t = gg ? tokenizer_load(gg, err, sizeof err) : NULL;
    if (!CHECK(t != NULL, "gpt-2 vocabulary loads", "%s", err)) { gguf_close(gg); return; }
    int32_t n = tokenizer_n_vocab(t);
    const char **pieces = malloc((size_t)n * sizeof *pieces);
    size_t *lens = malloc((size_t)n * sizeof *lens);
    for (int32_t i = 0; i < n; i++) pieces[i] = tokenizer_piece(t, i, &lens[i]);
    const int32_t *eog;
    int n_eog = tokenizer_eog_ids(t, &eog);
    grammar_vocab *v = grammar_vocab_new(pieces, lens, n, eog, n_eog, err, sizeof err);
    const schema_case *sc = &CASES[0]; /* the order: items with sku patterns and bounded qty, an enum */
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        if (strstr(CASES[i].schema, "\"sku\"")) sc = &CASES[i];
    grammar *g = v ? jsonschema_compile(sc->schema, strlen(sc->schema), err, sizeof err) : NULL;
    cJSON *schema = cJSON_Parse(sc->schema);
    uint8_t *mask = malloc((size_t)n);
    int walks = 0, finished = 0, mismatches = 0, steps_total = 0;
    double ms_total = 0;
    for (int w = 0; g && w < 6 && !mismatches; w++) {
        grammar_state *s = grammar_state_new(g);
        char text[4096];
        size_t tl = 0;
        for (int step = 0; step < 80; step++) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int64_t allowed = grammar_fill_mask(s, v, mask);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            ms_total += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
            steps_total++;
            for (int32_t i = 0; i < n && !mismatches; i++)
                if (mask[i] != grammar_allows_token(s, v, i)) {
                    mismatches++;
                    printf("# token %d \"%.*s\" differs after \"%.*s\"\n", (int)i, (int)lens[i], pieces[i], (int)tl, text);
                }
            if (allowed <= 0 || mismatches) break;
            /* past 30 steps, prefer closing (end, '}', ']', '"'), so walks finish */
            int32_t id = -1;
            if (step > 30 && grammar_is_complete(s)) id = eog[0];
            for (int c = 0; step > 30 && id < 0 && c < 3; c++)
                for (int32_t k = 0; k < n && id < 0; k++)
                    if (mask[k] && lens[k] == 1 && pieces[k][0] == "}]\""[c]) id = k;
            for (int tries = 0; id < 0 && tries < 64; tries++) {
                int32_t k = (int32_t)(rnd() % (uint32_t)n);
                if (mask[k]) id = k;
            }
            if (id < 0) for (id = 0; !mask[id]; id++) {}
            if (tokenizer_is_eog(t, id)) {
                cJSON *doc = cJSON_ParseWithLength(text, tl);
                if (!CHECK(doc && validate(schema, schema, doc, 0), "a finished schema walk validates", "%.*s", (int)tl, text))
                    mismatches++;
                cJSON_Delete(doc);
                finished++;
                break;
            }
            if (grammar_accept_token(s, v, id) != 0) { mismatches++; break; }
            if (tl + lens[id] < sizeof text) memcpy(text + tl, pieces[id], lens[id]), tl += lens[id];
        }
        grammar_state_free(s);
        walks++;
    }
    char label[200];
    snprintf(label, sizeof label, "schema masks on gpt-2's vocabulary equal per-token checks (%d walks, %d finished)", walks, finished);
    CHECK(g && !mismatches, label, "%s", g ? "a mask differed" : err);
    printf("# schema grammar on gpt-2 (%d tokens): %.2f ms per mask over %d steps\n", (int)n, ms_total / (steps_total ? steps_total : 1), steps_total);
    free(mask);
    cJSON_Delete(schema);
    grammar_free(g);
    grammar_vocab_free(v);
    free(pieces);
    free(lens);
    tokenizer_free(t);
    gguf_close(gg);
}

/* Integer bounds against arithmetic: for random bounds (both, one side, negative, across digit
 * counts), every probe near the bounds, at powers of ten and at random is accepted exactly when
 * it lies within them. */
static void test_int_bounds(void) {
    int bad = 0, probes = 0;
    for (int t = 0; t < 120 && !bad; t++) {
        int64_t scale = 1;
        for (int k = (int)(rnd() % 7); k > 0; k--) scale *= 10;
        int64_t a = (int64_t)(rnd() % (uint32_t)(2 * scale + 1)) - scale;
        int64_t b = a + (int64_t)(rnd() % (uint32_t)(scale + 1));
        int mode = t % 3; /* 0 both, 1 minimum only, 2 maximum only */
        char schema[200];
        if (mode == 0) snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", (long long)a, (long long)b);
        else if (mode == 1) snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"minimum\":%lld}", (long long)a);
        else snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"maximum\":%lld}", (long long)b);
        grammar *g = jsonschema_compile(schema, strlen(schema), err, sizeof err);
        if (!g) { CHECK(0, "integer bounds compile", "%s: %s", schema, err); return; }
        int64_t probe[64];
        int n = 0;
        for (int d = -3; d <= 3; d++) probe[n++] = a + d, probe[n++] = b + d;
        for (int64_t p = 1; p <= 100000000; p *= 10) probe[n++] = p, probe[n++] = p - 1, probe[n++] = -p, probe[n++] = -p + 1;
        while (n < 64) probe[n++] = (int64_t)(rnd() % (uint32_t)(4 * scale + 1)) - 2 * scale;
        for (int i = 0; i < n && !bad; i++) {
            int64_t x = probe[i];
            int want = (mode == 2 || x >= a) && (mode == 1 || x <= b);
            char text[32];
            snprintf(text, sizeof text, "%lld", (long long)x);
            grammar_state *st = grammar_state_new(g);
            int got = grammar_accept_bytes(st, text, strlen(text)) == 0 && grammar_is_complete(st);
            grammar_state_free(st);
            probes++;
            if (got != want) {
                CHECK(0, "integer bounds", "%s: %s %s", schema, text, got ? "accepted" : "rejected");
                bad = 1;
            }
        }
        grammar_free(g);
    }
    char label[100];
    snprintf(label, sizeof label, "integer bounds: 120 random bound sets, %d probes", probes);
    if (!bad) CHECK(1, label, "");
}

int main(void) {
    test_int_bounds();
    setlocale(LC_ALL, "C.UTF-8"); /* the validator's POSIX regexes count characters, not bytes */
    const char *dump_path = getenv("MGI_JSONSCHEMA_DUMP");
    FILE *dump = dump_path ? fopen(dump_path, "w") : NULL;
    int n_cases = (int)(sizeof CASES / sizeof CASES[0]), generated = 0;
    for (int i = 0; i < n_cases; i++) {
        const schema_case *sc = &CASES[i];
        char label[300];
        snprintf(label, sizeof label, "schema %d compiles", i);
        grammar *g = jsonschema_compile(sc->schema, strlen(sc->schema), err, sizeof err);
        if (!CHECK(g != NULL, label, "%s (schema %s)", err, sc->schema)) continue;
        cJSON *schema = cJSON_Parse(sc->schema);
        for (int k = 0; k < 6 && sc->yes[k]; k++) {
            snprintf(label, sizeof label, "schema %d accepts valid %d", i, k);
            cJSON *doc = cJSON_Parse(sc->yes[k]);
            int valid = doc && validate(schema, schema, doc, 0);
            cJSON_Delete(doc);
            CHECK(valid && accepts(g, sc->yes[k], strlen(sc->yes[k])), label, "%s %s (validator says %d)",
                  sc->yes[k], valid ? "rejected" : "is not valid", valid);
        }
        for (int k = 0; k < 6 && sc->no[k]; k++) {
            snprintf(label, sizeof label, "schema %d rejects invalid %d", i, k);
            CHECK(!accepts(g, sc->no[k], strlen(sc->no[k])), label, "%s accepted", sc->no[k]);
        }
        gen G = {.g = g};
        gen_costs(&G);
        int bad = 0;
        for (int t = 0; t < 40 && !bad; t++) {
            G.n = 0;
            gen_rule(&G, g->root, 0);
            put(&G, 0);
            G.n--;
            cJSON *doc = cJSON_ParseWithLength(G.out, G.n);
            int ok_match = accepts(g, G.out, G.n), ok_json = doc != NULL, ok_valid = doc && validate(schema, schema, doc, 0);
            cJSON_Delete(doc);
            if (!ok_match || !ok_json || !ok_valid) {
                snprintf(label, sizeof label, "schema %d random text %d", i, t);
                CHECK(0, label, "\"%s\": matcher %d, JSON %d, valid %d", G.out, ok_match, ok_json, ok_valid);
                bad = 1;
            }
            if (dump) {
                cJSON *line = cJSON_CreateObject();
                cJSON_AddItemToObject(line, "schema", cJSON_Duplicate(schema, 1));
                cJSON_AddStringToObject(line, "text", G.out);
                char *s = cJSON_PrintUnformatted(line);
                fprintf(dump, "%s\n", s);
                free(s);
                cJSON_Delete(line);
            }
            generated++;
        }
        snprintf(label, sizeof label, "schema %d: 40 random texts match, parse and validate", i);
        if (!bad) CHECK(1, label, "");
        free(G.out);
        free(G.cost);
        cJSON_Delete(schema);
        grammar_free(g);
    }
    printf("# %d schemas, %d random texts\n", n_cases, generated);
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++) {
        char label[200];
        snprintf(label, sizeof label, "schema error %zu: %s", i, ERRORS[i].want2);
        char *text = jsonschema_to_gbnf(ERRORS[i].schema, strlen(ERRORS[i].schema), err, sizeof err);
        CHECK(!text && strstr(err, ERRORS[i].want1) && strstr(err, ERRORS[i].want2), label, "got %s", text ? text : err);
        free(text);
    }
    if (dump) fclose(dump);
    test_real_vocab();
    return test_done();
}
