/* A JSON Schema `pattern` (an ECMAScript regular expression) -> a GBNF expression for the
 * contents of a JSON string. Supported: literals and escapes, classes with ranges and negation,
 * \d \w \s and their negations, '.', groups (capturing, (?:...), (?<name>...)), alternation,
 * * + ? {m} {m,} {m,n} (lazy forms too), and ^ $ at the ends (a side without its anchor gets
 * any characters). Refused with the offset: backreferences, lookaround, \b, \p{...}. Characters
 * that JSON must escape are written as their escapes, so the text stays a valid JSON string. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jsonschema_internal.h"

#define MAX_COUNT 2000 /* grammar_parse's repetition limit */
#define MAX_DEPTH 64

typedef struct {
    uint32_t lo, hi;
} range;

typedef struct {
    const char *s;
    size_t len, pos;
    int depth;
    char *why;
    size_t why_size;
    int failed;
} rx;

static int fail(rx *r, const char *what) {
    if (!r->failed) snprintf(r->why, r->why_size, "%s at offset %zu of the pattern", what, r->pos);
    r->failed = 1;
    return -1;
}

static int peek(const rx *r) { return r->pos < r->len ? (unsigned char)r->s[r->pos] : -1; }

/* One UTF-8 code point of the pattern. */
static int next_cp(rx *r, uint32_t *cp) {
    int c = peek(r);
    if (c < 0) return fail(r, "unexpected end");
    int extra = c < 0x80 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
    if (extra < 0 || r->pos + (size_t)extra >= r->len + (extra ? 0 : 1)) return fail(r, "invalid UTF-8");
    uint32_t v = extra ? (uint32_t)c & (0x3Fu >> extra) : (uint32_t)c;
    for (int i = 1; i <= extra; i++) {
        if (r->pos + (size_t)i >= r->len) return fail(r, "invalid UTF-8");
        unsigned char b = (unsigned char)r->s[r->pos + (size_t)i];
        if ((b & 0xC0) != 0x80) return fail(r, "invalid UTF-8");
        v = v << 6 | (b & 0x3Fu);
    }
    r->pos += 1 + (size_t)extra;
    *cp = v;
    return 0;
}

typedef struct {
    range *v;
    int n, cap;
} rset;

static int rset_add(rset *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        range *nv = realloc(s->v, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = (range){lo, hi};
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void rset_normalize(rset *s) {
    qsort(s->v, (size_t)s->n, sizeof *s->v, cmp_range);
    int m = 0;
    for (int i = 0; i < s->n; i++) {
        if (m && s->v[i].lo <= s->v[m - 1].hi + 1) {
            if (s->v[i].hi > s->v[m - 1].hi) s->v[m - 1].hi = s->v[i].hi;
        } else {
            s->v[m++] = s->v[i];
        }
    }
    s->n = m;
}

static int rset_negate(rset *s) {
    rset_normalize(s);
    rset out = {0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->v[i].lo > next && rset_add(&out, next, s->v[i].lo - 1)) return -1;
        next = s->v[i].hi + 1;
    }
    if (next <= 0x10FFFF && rset_add(&out, next, 0x10FFFF)) return -1;
    free(s->v);
    *s = out;
    return 0;
}

static int rset_has(const rset *s, uint32_t c) {
    for (int i = 0; i < s->n; i++)
        if (s->v[i].lo <= c && c <= s->v[i].hi) return 1;
    return 0;
}

/* Adds the class of \d \w \s (negated for the capitals) to s. */
static int add_shorthand(rset *s, int e) {
    rset t = {0};
    int rc = 0;
    switch (e | 0x20) {
    case 'd': rc = rset_add(&t, '0', '9'); break;
    case 'w': rc = rset_add(&t, '0', '9') || rset_add(&t, 'A', 'Z') || rset_add(&t, 'a', 'z') || rset_add(&t, '_', '_'); break;
    case 's': rc = rset_add(&t, ' ', ' ') || rset_add(&t, '\t', '\r') || rset_add(&t, 0xA0, 0xA0) ||
                   rset_add(&t, 0x2028, 0x2029) || rset_add(&t, 0xFEFF, 0xFEFF); break;
    }
    if (!rc && e >= 'A' && e <= 'Z') rc = rset_negate(&t);
    for (int i = 0; !rc && i < t.n; i++) rc = rset_add(s, t.v[i].lo, t.v[i].hi);
    free(t.v);
    return rc;
}

/* After a backslash: a shorthand class (into s, returns 1) or one code point (*cp, returns 0). */
static int parse_escape(rx *r, rset *s, uint32_t *cp) {
    int e = peek(r);
    if (e < 0) return fail(r, "a pattern ending in '\\'");
    r->pos++;
    if (strchr("dDwWsS", e)) return add_shorthand(s, e) ? fail(r, "out of memory") : 1;
    if (e >= '1' && e <= '9') return fail(r, "a backreference cannot be expressed as a grammar");
    if (e == 'b' || e == 'B') return fail(r, "a word boundary (\\b, \\B) cannot be expressed as a grammar");
    if (e == 'p' || e == 'P') return fail(r, "Unicode property classes (\\p{...}) are not supported");
    if (e == 'k') return fail(r, "a named backreference cannot be expressed as a grammar");
    const char *ctl = "n\nt\tr\rf\fv\v0";
    const char *m = strchr("ntrfv", e);
    if (m) { *cp = (uint32_t)ctl[(m - "ntrfv") * 2 + 1]; return 0; }
    if (e == '0') { *cp = 0; return 0; }
    if (e == 'x' || e == 'u') {
        int n = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int i = 0; i < n; i++) {
            int h = peek(r);
            int d = h >= '0' && h <= '9' ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
            if (d < 0) return fail(r, "expecting hex digits after \\x or \\u");
            v = v * 16 + (uint32_t)d;
            r->pos++;
        }
        *cp = v;
        return 0;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return fail(r, "unknown escape");
    r->pos--;
    return next_cp(r, cp); /* an escaped punctuation or other character stands for itself */
}

/* The JSON-string form of a set of characters: those allowed raw as a class, and the ones JSON
 * must escape (quote, backslash, controls) as their escape sequences. */
static int emit_set(rx *r, jsonschema_buf *o, rset *s) {
    rset_normalize(s);
    /* characters never written raw in a JSON string: controls, quote, backslash, surrogates */
    static const range holes[] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}};
    rset raw = {0};
    for (int i = 0; i < s->n; i++) {
        uint32_t cur = s->v[i].lo, hi = s->v[i].hi;
        for (size_t h = 0; h < sizeof holes / sizeof holes[0] && cur <= hi; h++) {
            if (holes[h].hi < cur) continue;
            if (holes[h].lo > hi) break;
            if (holes[h].lo > cur && rset_add(&raw, cur, holes[h].lo - 1)) goto oom;
            cur = holes[h].hi + 1;
        }
        if (cur <= hi && rset_add(&raw, cur, hi)) goto oom;
    }
    int alts = 0;
    jsonschema_buf_puts(o, "(");
    if (raw.n) {
        jsonschema_buf_puts(o, "[");
        for (int i = 0; i < raw.n; i++) {
            jsonschema_buf_class_char(o, raw.v[i].lo);
            if (raw.v[i].hi != raw.v[i].lo) {
                jsonschema_buf_puts(o, "-");
                jsonschema_buf_class_char(o, raw.v[i].hi);
            }
        }
        jsonschema_buf_puts(o, "]");
        alts++;
    }
    static const struct { uint32_t c; const char *esc; } escs[] = {
        {'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\t', "\\t"}, {'\r', "\\r"}, {'\f', "\\f"}, {'\b', "\\b"}};
    for (size_t k = 0; k < sizeof escs / sizeof escs[0]; k++) {
        if (!rset_has(s, escs[k].c)) continue;
        if (alts++) jsonschema_buf_puts(o, " | ");
        jsonschema_buf_literal(o, escs[k].esc, strlen(escs[k].esc));
    }
    jsonschema_buf_puts(o, ")");
    free(raw.v);
    if (!alts) return fail(r, "a class with no character a JSON string can hold");
    return 0;
oom:
    free(raw.v);
    return fail(r, "out of memory");
}

/* [...] with p->pos after '['. */
static int parse_class(rx *r, jsonschema_buf *o) {
    rset s = {0};
    int negate = 0, first = 1;
    if (peek(r) == '^') negate = 1, r->pos++;
    for (;;) {
        int c = peek(r);
        if (c < 0) { free(s.v); return fail(r, "unterminated character class"); }
        if (c == ']' && !first) { r->pos++; break; }
        first = 0;
        uint32_t lo;
        if (c == '\\') {
            r->pos++;
            int k = parse_escape(r, &s, &lo);
            if (k < 0) { free(s.v); return -1; }
            if (k == 1) continue;
        } else if (next_cp(r, &lo)) {
            free(s.v);
            return -1;
        }
        uint32_t hi = lo;
        if (peek(r) == '-' && r->pos + 1 < r->len && r->s[r->pos + 1] != ']') {
            r->pos++;
            if (peek(r) == '\\') {
                r->pos++;
                int k = parse_escape(r, &s, &hi);
                if (k != 0) { free(s.v); return k < 0 ? -1 : fail(r, "a class shorthand as a range end"); }
            } else if (next_cp(r, &hi)) {
                free(s.v);
                return -1;
            }
            if (hi < lo) { free(s.v); return fail(r, "a range whose end is below its start"); }
        }
        if (rset_add(&s, lo, hi)) { free(s.v); return fail(r, "out of memory"); }
    }
    if (negate && rset_negate(&s)) { free(s.v); return fail(r, "out of memory"); }
    int rc = emit_set(r, o, &s);
    free(s.v);
    return rc;
}

static int parse_alt(rx *r, jsonschema_buf *o);

static int parse_count(rx *r, uint64_t *v) {
    int c = peek(r);
    if (c < '0' || c > '9') return fail(r, "expecting a number in {m,n}");
    *v = 0;
    while ((c = peek(r)) >= '0' && c <= '9') {
        *v = *v * 10 + (uint64_t)(c - '0');
        if (*v > MAX_COUNT) return fail(r, "a repetition count above 2000");
        r->pos++;
    }
    return 0;
}

/* One atom into o, as a parenthesised GBNF expression; 1 when the pattern's sequence ends. */
static int parse_atom(rx *r, jsonschema_buf *o) {
    int c = peek(r);
    if (c < 0 || c == '|' || c == ')') return 1;
    if (c == '(') {
        r->pos++;
        if (peek(r) == '?') {
            r->pos++;
            int k = peek(r);
            if (k == ':') {
                r->pos++;
            } else if (k == '<' && r->pos + 1 < r->len && r->s[r->pos + 1] != '=' && r->s[r->pos + 1] != '!') {
                while (peek(r) >= 0 && peek(r) != '>') r->pos++;
                if (peek(r) != '>') return fail(r, "unterminated group name");
                r->pos++;
            } else {
                return fail(r, "lookahead and lookbehind cannot be expressed as a grammar");
            }
        }
        if (++r->depth > MAX_DEPTH) return fail(r, "groups nested too deeply");
        jsonschema_buf_puts(o, "(");
        if (parse_alt(r, o)) return -1;
        jsonschema_buf_puts(o, ")");
        r->depth--;
        if (peek(r) != ')') return fail(r, "expecting ')'");
        r->pos++;
        return 0;
    }
    if (c == '[') {
        r->pos++;
        return parse_class(r, o);
    }
    if (c == '.') {
        r->pos++;
        rset s = {0};
        int rc = rset_add(&s, '\n', '\n') || rset_add(&s, '\r', '\r') || rset_add(&s, 0x2028, 0x2029) || rset_negate(&s);
        rc = rc ? fail(r, "out of memory") : emit_set(r, o, &s);
        free(s.v);
        return rc;
    }
    if (c == '^' || c == '$') return fail(r, "'^' or '$' inside the pattern (only at its ends)");
    if (c == '*' || c == '+' || c == '?' || c == '{') return fail(r, "a repetition with nothing before it");
    uint32_t cp;
    rset s = {0};
    if (c == '\\') {
        r->pos++;
        int k = parse_escape(r, &s, &cp);
        if (k < 0) { free(s.v); return -1; }
        if (k == 1) { int rc = emit_set(r, o, &s); free(s.v); return rc; }
    } else if (next_cp(r, &cp)) {
        return -1;
    }
    if (rset_add(&s, cp, cp)) return fail(r, "out of memory");
    int rc = emit_set(r, o, &s);
    free(s.v);
    return rc;
}

static int parse_seq(rx *r, jsonschema_buf *o) {
    int any = 0;
    for (;;) {
        jsonschema_buf atom = {0};
        int k = parse_atom(r, &atom);
        if (k) { free(atom.s); return k < 0 ? -1 : (any ? 0 : (jsonschema_buf_puts(o, "\"\""), 0)); }
        if (any) jsonschema_buf_puts(o, " ");
        any = 1;
        jsonschema_buf_add(o, atom.s, atom.n);
        free(atom.s);
        int q = peek(r);
        if (q == '*' || q == '+' || q == '?') {
            r->pos++;
            jsonschema_buf_add(o, (const char *)&(char){(char)q}, 1);
        } else if (q == '{') {
            size_t at = r->pos++;
            uint64_t m, n = 0;
            int open = 0;
            if (peek(r) < '0' || peek(r) > '9') { /* a literal '{', as ECMAScript reads it */
                r->pos = at;
                return fail(r, "'{' that does not start a repetition (escape it as \\{)");
            }
            if (parse_count(r, &m)) return -1;
            if (peek(r) == ',') {
                r->pos++;
                if (peek(r) == '}') open = 1;
                else if (parse_count(r, &n)) return -1;
            } else {
                n = m;
            }
            if (peek(r) != '}') return fail(r, "expecting '}'");
            r->pos++;
            if (!open && n < m) return fail(r, "a repetition {m,n} with n below m");
            if (open) jsonschema_buf_printf(o, "{%llu,}", (unsigned long long)m);
            else jsonschema_buf_printf(o, "{%llu,%llu}", (unsigned long long)m, (unsigned long long)n);
        } else {
            continue;
        }
        if (peek(r) == '?') r->pos++; /* lazy: the same language */
        q = peek(r);
        if (q == '*' || q == '+' || q == '{') return fail(r, "a repetition of a repetition (possessive or nested quantifier)");
    }
}

static int parse_alt(rx *r, jsonschema_buf *o) {
    if (parse_seq(r, o)) return -1;
    while (peek(r) == '|') {
        r->pos++;
        jsonschema_buf_puts(o, " | ");
        if (parse_seq(r, o)) return -1;
    }
    return 0;
}

/* Any JSON string content, for an unanchored side. */
static const char *ANY = "([^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt])*";

int jsonschema_regex(jsonschema_buf *out, const char *pattern, size_t len, char *why, size_t why_size) {
    rx r = {.s = pattern, .len = len, .why = why, .why_size = why_size};
    int start = len > 0 && pattern[0] == '^';
    int end = len > (size_t)start && pattern[len - 1] == '$' && (len < 2 || pattern[len - 2] != '\\');
    r.pos = (size_t)start;
    r.len = len - (size_t)end;
    jsonschema_buf body = {0};
    int rc = parse_alt(&r, &body);
    if (!rc && r.pos < r.len) rc = fail(&r, "unbalanced ')'");
    if (!rc && body.oom) rc = fail(&r, "out of memory");
    if (!rc) {
        if (!start) jsonschema_buf_printf(out, "%s ", ANY);
        jsonschema_buf_puts(out, "(");
        jsonschema_buf_add(out, body.s ? body.s : "\"\"", body.s ? body.n : 2);
        jsonschema_buf_puts(out, ")");
        if (!end) jsonschema_buf_printf(out, " %s", ANY);
    }
    free(body.s);
    return rc;
}
