/* GBNF text -> the compiled grammar (grammar_internal.h), following llama.cpp's parser: rules
 * `name ::= alternatives`, groups, string literals, character classes, `.`, `* + ? {m} {m,}
 * {m,n}` (rewritten into generated rules as llama.cpp does), comments; then the checks of
 * grammar_check.c. Input is never trusted: every read is bounded by len, and sizes are capped. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar_internal.h"

#define P_ALT 3                      /* separator between alternatives while parsing */
#define MAX_REPEAT 2000              /* llama.cpp's MAX_REPETITION_THRESHOLD */
#define MAX_ELEMS (1 << 21)          /* elements over all rules: bounds memory on any input */
#define MAX_RULES (1 << 18)
#define MAX_NESTING 200              /* parentheses inside one another */

typedef struct {
    grammar_elem *v;
    int32_t n, cap;
} pvec;

typedef struct {
    char *name;
    size_t name_len;
    pvec body;
    int defined;
    int32_t line, col;         /* definition */
    int32_t ref_line, ref_col; /* first use, for an undefined rule */
    int32_t owner;
} prule;

typedef struct {
    const char *s;
    size_t len, pos;
    prule *rules;
    int32_t n_rules, cap_rules;
    int32_t *hash; /* rule id + 1, 0 empty; only named (user) rules */
    uint32_t hash_mask;
    grammar_range *ranges;
    int32_t n_ranges, cap_ranges;
    grammar_charset *sets;
    int32_t n_sets, cap_sets;
    int32_t single[128]; /* charset id + 1 of each one-ASCII-character set */
    int64_t total_elems;
    int depth;
    size_t lc_at; /* line_col's resume point */
    int32_t lc_line, lc_col;
    int oom;
    char *err;
    size_t err_size;
    int failed;
} parser;

/* Line and column (in characters) of byte offset at; resumes from the last answer when at is
 * past it, so numbering every rule costs one pass over the text. */
static void line_col(parser *p, size_t at, int32_t *line, int32_t *col) {
    if (at < p->lc_at) { p->lc_at = 0; p->lc_line = 1; p->lc_col = 1; }
    int32_t l = p->lc_line, c = p->lc_col;
    for (size_t i = p->lc_at; i < at && i < p->len; i++) {
        unsigned char b = (unsigned char)p->s[i];
        if (b == '\n') { l++; c = 1; }
        else if ((b & 0xC0) != 0x80) c++;
    }
    p->lc_at = at < p->len ? at : p->len;
    p->lc_line = l;
    p->lc_col = c;
    *line = l;
    *col = c;
}

/* Records the first error only: "grammar line L, column C: what; hint". */
static int fail(parser *p, size_t at, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = 1;
    int32_t l, c;
    line_col(p, at, &l, &c);
    int k = snprintf(p->err, p->err_size, "grammar line %d, column %d: ", (int)l, (int)c);
    if (k < 0 || (size_t)k >= p->err_size) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + k, p->err_size - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

static int oom(parser *p) {
    p->oom = 1;
    return fail(p, p->pos, "out of memory");
}

static int peek(const parser *p, size_t k) { return p->pos + k < p->len ? (unsigned char)p->s[p->pos + k] : -1; }

static int push(parser *p, pvec *v, int32_t type, int32_t val) {
    if (++p->total_elems > MAX_ELEMS)
        return fail(p, p->pos, "grammar too large (over %d elements after expanding repetitions); hint: "
                    "use smaller repetition counts", MAX_ELEMS);
    if (v->n == v->cap) {
        int32_t cap = v->cap ? v->cap * 2 : 8;
        grammar_elem *nv = realloc(v->v, (size_t)cap * sizeof *nv);
        if (!nv) return oom(p);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = (grammar_elem){type, val};
    return 0;
}

static int is_word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

static void skip_space(parser *p, int newline_ok) {
    for (;;) {
        int c = peek(p, 0);
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->len && p->s[p->pos] != '\r' && p->s[p->pos] != '\n') p->pos++;
        } else {
            return;
        }
    }
}

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* A new rule; named ones go into the name table. Returns its id or -1. */
static int32_t rule_add(parser *p, const char *name, size_t n, int named) {
    if (p->n_rules >= MAX_RULES) return fail(p, p->pos, "grammar too large (over %d rules)", MAX_RULES);
    if (p->n_rules == p->cap_rules) {
        int32_t cap = p->cap_rules ? p->cap_rules * 2 : 32;
        prule *nr = realloc(p->rules, (size_t)cap * sizeof *nr);
        if (!nr) return oom(p);
        p->rules = nr;
        p->cap_rules = cap;
    }
    if (named && (uint32_t)p->n_rules * 2 >= p->hash_mask) {
        uint32_t size = (p->hash_mask + 1) * 2;
        int32_t *nh = calloc(size, sizeof *nh);
        if (!nh) return oom(p);
        for (uint32_t i = 0; i <= p->hash_mask; i++) {
            if (!p->hash[i]) continue;
            const prule *r = &p->rules[p->hash[i] - 1];
            uint32_t h = name_hash(r->name, r->name_len) & (size - 1);
            while (nh[h]) h = (h + 1) & (size - 1);
            nh[h] = p->hash[i];
        }
        free(p->hash);
        p->hash = nh;
        p->hash_mask = size - 1;
    }
    prule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(n + 1);
    if (!r->name) return oom(p);
    memcpy(r->name, name, n);
    r->name[n] = 0;
    r->name_len = n;
    r->owner = p->n_rules;
    if (named) {
        uint32_t h = name_hash(name, n) & p->hash_mask;
        while (p->hash[h]) h = (h + 1) & p->hash_mask;
        p->hash[h] = p->n_rules + 1;
    }
    return p->n_rules++;
}

static int32_t rule_find(const parser *p, const char *name, size_t n) {
    uint32_t h = name_hash(name, n) & p->hash_mask;
    while (p->hash[h]) {
        const prule *r = &p->rules[p->hash[h] - 1];
        if (r->name_len == n && memcmp(r->name, name, n) == 0) return p->hash[h] - 1;
        h = (h + 1) & p->hash_mask;
    }
    return -1;
}

/* A generated rule (group or repetition) named like llama.cpp's: owner_N. */
static int32_t rule_generate(parser *p, int32_t owner, size_t at) {
    char buf[64];
    const prule *o = &p->rules[owner];
    int k = snprintf(buf, sizeof buf, "%.40s_%d", o->name, (int)p->n_rules);
    int32_t id = rule_add(p, buf, (size_t)(k < (int)sizeof buf ? k : (int)sizeof buf - 1), 0);
    if (id < 0) return -1;
    p->rules[id].owner = p->rules[owner].owner;
    p->rules[id].defined = 1;
    line_col(p, at, &p->rules[id].line, &p->rules[id].col);
    return id;
}

static int hex_val(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class: an escape or one UTF-8 encoded code point. */
static int parse_char(parser *p, uint32_t *cp) {
    size_t at = p->pos;
    int c = peek(p, 0);
    if (c < 0) return fail(p, at, "unexpected end of input inside a literal or class");
    if (c == '\\') {
        int e = peek(p, 1), n = 0;
        switch (e) {
        case 'x': n = 2; break;
        case 'u': n = 4; break;
        case 'U': n = 8; break;
        case 't': *cp = '\t'; p->pos += 2; return 0;
        case 'r': *cp = '\r'; p->pos += 2; return 0;
        case 'n': *cp = '\n'; p->pos += 2; return 0;
        case '\\': case '"': case '[': case ']': case '-':
            *cp = (uint32_t)e;
            p->pos += 2;
            return 0;
        default:
            return fail(p, at, "unknown escape '\\%c'; hint: the escapes are \\n \\r \\t \\\\ \\\" \\[ \\] \\- "
                        "\\xNN \\uNNNN \\UNNNNNNNN", e < 0 ? '?' : e);
        }
        uint32_t v = 0;
        for (int i = 0; i < n; i++) {
            int h = hex_val(peek(p, 2 + (size_t)i));
            if (h < 0) return fail(p, at, "expecting %d hex digits after \\%c", n, e);
            v = v * 16 + (uint32_t)h;
        }
        if (v > 0x10FFFF) return fail(p, at, "code point U+%X is past U+10FFFF", v);
        *cp = v;
        p->pos += 2 + (size_t)n;
        return 0;
    }
    int extra = c < 0x80 ? 0 : (c >= 0xC2 && c <= 0xDF) ? 1 : (c >= 0xE0 && c <= 0xEF) ? 2 : (c >= 0xF0 && c <= 0xF4) ? 3 : -1;
    if (extra < 0) return fail(p, at, "invalid UTF-8 byte 0x%02X", c);
    uint32_t v = extra ? (uint32_t)c & (0x3Fu >> extra) : (uint32_t)c;
    for (int i = 1; i <= extra; i++) {
        int b = peek(p, (size_t)i);
        if (b < 0 || (b & 0xC0) != 0x80) return fail(p, at, "invalid UTF-8 sequence");
        v = (v << 6) | ((uint32_t)b & 0x3F);
    }
    *cp = v;
    p->pos += 1 + (size_t)extra;
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const grammar_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges r[0..n), complements it when negate, and adds it as a charset. */
static int32_t charset_add(parser *p, grammar_range *r, int32_t n, int negate) {
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    int32_t need = m + 1;
    if (p->n_ranges + need > p->cap_ranges) {
        int32_t cap = p->cap_ranges ? p->cap_ranges : 64;
        while (cap < p->n_ranges + need) cap *= 2;
        grammar_range *nr = realloc(p->ranges, (size_t)cap * sizeof *nr);
        if (!nr) return oom(p);
        p->ranges = nr;
        p->cap_ranges = cap;
    }
    if (p->n_sets == p->cap_sets) {
        int32_t cap = p->cap_sets ? p->cap_sets * 2 : 64;
        grammar_charset *ns = realloc(p->sets, (size_t)cap * sizeof *ns);
        if (!ns) return oom(p);
        p->sets = ns;
        p->cap_sets = cap;
    }
    grammar_charset cs = {.first = p->n_ranges};
    grammar_range *out = p->ranges + p->n_ranges;
    if (!negate) {
        memcpy(out, r, (size_t)m * sizeof *r);
        cs.n = m;
    } else {
        uint32_t next = 0;
        for (int32_t i = 0; i < m; i++) {
            if (r[i].lo > next) out[cs.n++] = (grammar_range){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= 0x10FFFF) out[cs.n++] = (grammar_range){next, 0x10FFFF};
    }
    for (int32_t i = 0; i < cs.n; i++)
        for (uint32_t c = out[i].lo; c <= out[i].hi && c < 128; c++) cs.ascii[c >> 6] |= 1ull << (c & 63);
    p->n_ranges += cs.n;
    p->sets[p->n_sets] = cs;
    return p->n_sets++;
}

static int32_t charset_single(parser *p, uint32_t cp) {
    if (cp < 128 && p->single[cp]) return p->single[cp] - 1;
    grammar_range r = {cp, cp};
    int32_t id = charset_add(p, &r, 1, 0);
    if (id >= 0 && cp < 128) p->single[cp] = id + 1;
    return id;
}

/* [...] or [^...]; p->pos at '['. */
static int32_t parse_class(parser *p) {
    size_t at = p->pos++;
    int negate = 0;
    if (peek(p, 0) == '^') { negate = 1; p->pos++; }
    grammar_range *r = NULL;
    int32_t n = 0, cap = 0, id = -1;
    while (peek(p, 0) != ']') {
        uint32_t lo, hi;
        if (parse_char(p, &lo)) goto done;
        hi = lo;
        if (peek(p, 0) == '-' && peek(p, 1) != ']' && peek(p, 1) >= 0) {
            size_t rat = p->pos++;
            if (parse_char(p, &hi)) goto done;
            if (hi < lo) { fail(p, rat, "empty range U+%04X-U+%04X in a character class; hint: write the lower end first", lo, hi); goto done; }
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            grammar_range *nr = realloc(r, (size_t)cap * sizeof *nr);
            if (!nr) { oom(p); goto done; }
            r = nr;
        }
        r[n++] = (grammar_range){lo, hi};
    }
    p->pos++;
    if (n == 0) { fail(p, at, "empty character class; hint: [] matches nothing, write the characters it allows"); goto done; }
    id = charset_add(p, r, n, negate);
    if (id >= 0 && p->sets[id].n == 0) { fail(p, at, "character class [^...] excludes every character"); id = -1; }
done:
    free(r);
    return id;
}

static int parse_alternates(parser *p, int32_t rule, int32_t owner, int nested);

static int parse_count(parser *p, uint64_t *v) {
    size_t at = p->pos;
    int c = peek(p, 0);
    if (c < '0' || c > '9') return fail(p, at, "expecting a number in {m,n}");
    uint64_t x = 0;
    while ((c = peek(p, 0)) >= '0' && c <= '9') {
        if (x > 1000000000ull) return fail(p, at, "repetition count too large (limit %d)", MAX_REPEAT);
        x = x * 10 + (uint64_t)(c - '0');
        p->pos++;
    }
    *v = x;
    return 0;
}

/* Rewrites the last symbol (rule->v[last..n)) as llama.cpp does:
 * S{m,n} -> S..S (m times) then S'(n-m), S'(k) ::= S S'(k-1) |, S'(1) ::= S |;
 * S{m,}  -> S..S (m times) then S', S' ::= S S' |. */
static int repeat(parser *p, pvec *rule, int32_t last, uint64_t min, uint64_t max, int no_max, int32_t owner, size_t at) {
    if (last < 0 || last >= rule->n) return fail(p, at, "nothing before the repetition operator to repeat");
    int32_t len = rule->n - last;
    grammar_elem *prev = malloc((size_t)len * sizeof *prev);
    if (!prev) return oom(p);
    memcpy(prev, rule->v + last, (size_t)len * sizeof *prev);
    int rc = 0;
    if (min == 0) rule->n = last;
    for (uint64_t i = 1; i < min && !rc; i++)
        for (int32_t k = 0; k < len && !rc; k++) rc = push(p, rule, prev[k].type, prev[k].val);
    uint64_t n_opt = no_max ? 1 : max - min;
    int32_t last_rec = -1;
    for (uint64_t i = 0; i < n_opt && !rc; i++) {
        int32_t id = rule_generate(p, owner, at);
        if (id < 0) { rc = -1; break; }
        pvec body = {0};
        for (int32_t k = 0; k < len && !rc; k++) rc = push(p, &body, prev[k].type, prev[k].val);
        if (!rc && (i > 0 || no_max)) rc = push(p, &body, GRAMMAR_REF, no_max ? id : last_rec);
        if (!rc) rc = push(p, &body, P_ALT, 0); /* ends "S S'", then the empty alternative */
        if (!rc) rc = push(p, &body, P_ALT, 0);
        p->rules[id].body = body;
        last_rec = id;
    }
    if (!rc && n_opt > 0) rc = push(p, rule, GRAMMAR_REF, last_rec);
    free(prev);
    return rc;
}

static int parse_sequence(parser *p, pvec *rule, int32_t owner, int nested) {
    int32_t last = -1; /* start of the last symbol, for a repetition */
    for (;;) {
        int c = peek(p, 0);
        size_t at = p->pos;
        if (c == '"') {
            p->pos++;
            last = rule->n;
            while (peek(p, 0) != '"') {
                uint32_t cp;
                if (parse_char(p, &cp)) return -1;
                int32_t cs = charset_single(p, cp);
                if (cs < 0 || push(p, rule, GRAMMAR_CHARS, cs)) return -1;
            }
            p->pos++;
            if (rule->n == last) last = -1; /* "" matches the empty string: nothing to repeat */
        } else if (c == '[') {
            last = rule->n;
            int32_t cs = parse_class(p);
            if (cs < 0 || push(p, rule, GRAMMAR_CHARS, cs)) return -1;
        } else if (c == '.') {
            p->pos++;
            last = rule->n;
            grammar_range r = {0, 0x10FFFF};
            int32_t cs = charset_add(p, &r, 1, 0);
            if (cs < 0 || push(p, rule, GRAMMAR_CHARS, cs)) return -1;
        } else if (c >= 0 && is_word(c)) {
            size_t start = p->pos;
            while (is_word(peek(p, 0))) p->pos++;
            int32_t id = rule_find(p, p->s + start, p->pos - start);
            if (id < 0) {
                id = rule_add(p, p->s + start, p->pos - start, 1);
                if (id < 0) return -1;
                line_col(p, start, &p->rules[id].ref_line, &p->rules[id].ref_col);
            }
            last = rule->n;
            if (push(p, rule, GRAMMAR_REF, id)) return -1;
        } else if (c == '(') {
            if (p->depth >= MAX_NESTING) return fail(p, at, "parentheses nested deeper than %d", MAX_NESTING);
            p->pos++;
            skip_space(p, 1);
            int32_t id = rule_generate(p, owner, at);
            if (id < 0) return -1;
            p->depth++;
            if (parse_alternates(p, id, owner, 1)) return -1;
            p->depth--;
            if (peek(p, 0) != ')') return fail(p, p->pos, "expecting ')' to close the group");
            p->pos++;
            last = rule->n;
            if (push(p, rule, GRAMMAR_REF, id)) return -1;
        } else if (c == '*' || c == '+' || c == '?') {
            p->pos++;
            if (repeat(p, rule, last, c == '+', c == '?', c != '?', owner, at)) return -1;
        } else if (c == '{') {
            p->pos++;
            skip_space(p, nested);
            uint64_t min, max = 0;
            int no_max = 0;
            if (parse_count(p, &min)) return -1;
            skip_space(p, nested);
            if (peek(p, 0) == '}') {
                max = min;
            } else if (peek(p, 0) == ',') {
                p->pos++;
                skip_space(p, nested);
                if (peek(p, 0) >= '0' && peek(p, 0) <= '9') {
                    if (parse_count(p, &max)) return -1;
                    skip_space(p, nested);
                } else {
                    no_max = 1;
                }
                if (peek(p, 0) != '}') return fail(p, p->pos, "expecting '}' to end the repetition");
            } else {
                return fail(p, p->pos, "expecting ',' or '}' in the repetition {m,n}");
            }
            p->pos++;
            if (min > MAX_REPEAT) return fail(p, at, "repetition minimum %llu is over the limit %d", (unsigned long long)min, MAX_REPEAT);
            if (!no_max && max > MAX_REPEAT) no_max = 1; /* as llama.cpp: a huge maximum is no maximum */
            if (!no_max && max < min) return fail(p, at, "repetition {%llu,%llu}: the maximum is below the minimum",
                                                   (unsigned long long)min, (unsigned long long)max);
            if (repeat(p, rule, last, min, max, no_max, owner, at)) return -1;
        } else if (c == '<' || c == '!') {
            return fail(p, at, "token references (<...>, !<...>) are not supported; hint: write the token's text as a string literal");
        } else {
            return 0;
        }
        skip_space(p, nested);
    }
}

static int parse_alternates(parser *p, int32_t rule, int32_t owner, int nested) {
    pvec body = {0};
    int rc = parse_sequence(p, &body, owner, nested);
    while (!rc && peek(p, 0) == '|') {
        rc = push(p, &body, P_ALT, 0);
        p->pos++;
        skip_space(p, 1);
        if (!rc) rc = parse_sequence(p, &body, owner, nested);
    }
    if (!rc) rc = push(p, &body, P_ALT, 0);
    free(p->rules[rule].body.v);
    p->rules[rule].body = body;
    return rc;
}

static int parse_rule(parser *p) {
    size_t start = p->pos;
    while (is_word(peek(p, 0))) p->pos++;
    if (p->pos == start) {
        int c = peek(p, 0);
        if (c == '|')
            return fail(p, start, "a line starting with '|'; hint: end the previous line with '|' or put the "
                        "alternatives inside ( )");
        return fail(p, start, "expecting a rule name (letters, digits, '-'), found '%c'", c >= 32 && c < 127 ? c : '?');
    }
    size_t n = p->pos - start;
    int32_t id = rule_find(p, p->s + start, n);
    if (id >= 0 && p->rules[id].defined)
        return fail(p, start, "rule '%s' is defined twice (first at line %d, column %d)", p->rules[id].name,
                    (int)p->rules[id].line, (int)p->rules[id].col);
    if (id < 0 && (id = rule_add(p, p->s + start, n, 1)) < 0) return -1;
    p->rules[id].defined = 1;
    line_col(p, start, &p->rules[id].line, &p->rules[id].col);
    skip_space(p, 0);
    if (!(peek(p, 0) == ':' && peek(p, 1) == ':' && peek(p, 2) == '='))
        return fail(p, p->pos, "expecting '::=' after the rule name '%s'", p->rules[id].name);
    p->pos += 3;
    skip_space(p, 1);
    if (parse_alternates(p, id, id, 0)) return -1;
    int c = peek(p, 0);
    if (c == '\r') p->pos += peek(p, 1) == '\n' ? 2 : 1;
    else if (c == '\n') p->pos++;
    else if (c >= 0)
        return fail(p, p->pos, "unexpected '%c' in rule '%s'; hint: a rule ends at the end of its line unless "
                    "inside ( ) or after '|'", c >= 32 && c < 127 ? c : '?', p->rules[id].name);
    skip_space(p, 1);
    return 0;
}

/* Lays the rules out as grammar_internal.h describes. */
static grammar *finish(parser *p) {
    grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    int64_t n_elems = 0, n_alts = 0;
    for (int32_t r = 0; r < p->n_rules; r++)
        for (int32_t i = 0; i < p->rules[r].body.n; i++) {
            n_elems++;
            n_alts += p->rules[r].body.v[i].type == P_ALT;
        }
    g->elems = malloc((size_t)(n_elems + 1) * sizeof *g->elems);
    g->alts = malloc((size_t)(n_alts + 1) * sizeof *g->alts);
    g->rules = calloc((size_t)p->n_rules + 1, sizeof *g->rules);
    if (!g->elems || !g->alts || !g->rules) { grammar_free(g); return NULL; }
    for (int32_t r = 0; r < p->n_rules; r++) {
        prule *pr = &p->rules[r];
        grammar_rule *gr = &g->rules[r];
        gr->name = pr->name;
        pr->name = NULL;
        gr->line = pr->line;
        gr->col = pr->col;
        gr->owner = pr->owner;
        gr->first_alt = g->n_alts_total;
        int start = 1;
        for (int32_t i = 0; i < pr->body.n; i++) {
            if (start) { g->alts[g->n_alts_total++] = g->n_elems; gr->n_alts++; start = 0; }
            grammar_elem e = pr->body.v[i];
            if (e.type == P_ALT) { e.type = GRAMMAR_END; start = 1; }
            g->elems[g->n_elems++] = e;
        }
    }
    g->n_rules = p->n_rules;
    g->ranges = p->ranges; g->n_ranges = p->n_ranges; p->ranges = NULL;
    g->sets = p->sets; g->n_sets = p->n_sets; p->sets = NULL;
    return g;
}

grammar *grammar_parse(const char *text, size_t len, char *err, size_t err_size) {
    parser p = {.s = text ? text : "", .len = text ? len : 0, .err = err, .err_size = err_size,
                .lc_line = 1, .lc_col = 1};
    grammar *g = NULL;
    if (err_size) err[0] = 0;
    p.hash_mask = 63;
    p.hash = calloc(64, sizeof *p.hash);
    if (!p.hash) { oom(&p); goto out; }
    skip_space(&p, 1);
    while (p.pos < p.len)
        if (parse_rule(&p)) goto out;
    for (int32_t r = 0; r < p.n_rules; r++)
        if (!p.rules[r].defined) {
            p.failed = 0;
            snprintf(err, err_size, "grammar line %d, column %d: undefined rule '%s'; hint: define it with '%s ::= ...'",
                     (int)p.rules[r].ref_line, (int)p.rules[r].ref_col, p.rules[r].name, p.rules[r].name);
            goto out;
        }
    int32_t root = rule_find(&p, "root", 4);
    if (root < 0) {
        snprintf(err, err_size, "grammar has no rule 'root'; hint: generation starts at 'root ::= ...'");
        goto out;
    }
    g = finish(&p);
    if (!g) { snprintf(err, err_size, "grammar: out of memory"); goto out; }
    g->root = root;
    if (grammar_check(g, err, err_size)) { grammar_free(g); g = NULL; }
out:
    for (int32_t r = 0; r < p.n_rules; r++) {
        free(p.rules[r].name);
        free(p.rules[r].body.v);
    }
    free(p.rules);
    free(p.hash);
    free(p.ranges);
    free(p.sets);
    return g;
}

void grammar_free(grammar *g) {
    if (!g) return;
    for (int32_t r = 0; r < g->n_rules; r++) free(g->rules[r].name);
    free(g->rules);
    free(g->elems);
    free(g->alts);
    free(g->sets);
    free(g->ranges);
    free(g);
}
