/* Writing GBNF text for the JSON Schema converter: a growing buffer, literals and class
 * bounds with the escapes grammar_parse reads, and integer ranges as digit patterns (the
 * decomposition of [a, b] into same-length runs, each split on its first differing digit). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jsonschema_internal.h"

void jsonschema_buf_add(jsonschema_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) { b->oom = 1; return; }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void jsonschema_buf_puts(jsonschema_buf *b, const char *s) { jsonschema_buf_add(b, s, strlen(s)); }

void jsonschema_buf_printf(jsonschema_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < sizeof tmp) { jsonschema_buf_add(b, tmp, (size_t)k); return; }
    char *big = malloc((size_t)k + 1);
    if (!big) { b->oom = 1; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    jsonschema_buf_add(b, big, (size_t)k);
    free(big);
}

char *jsonschema_buf_take(jsonschema_buf *b) {
    char *s = b->oom ? NULL : b->s;
    if (b->oom) free(b->s);
    if (s == NULL && !b->oom) s = calloc(1, 1);
    b->s = NULL;
    b->n = b->cap = 0;
    b->oom = 0;
    return s;
}

void jsonschema_buf_literal(jsonschema_buf *b, const char *s, size_t n) {
    jsonschema_buf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') jsonschema_buf_add(b, "\\\"", 2);
        else if (c == '\\') jsonschema_buf_add(b, "\\\\", 2);
        else if (c == '\n') jsonschema_buf_add(b, "\\n", 2);
        else if (c == '\r') jsonschema_buf_add(b, "\\r", 2);
        else if (c == '\t') jsonschema_buf_add(b, "\\t", 2);
        else if (c < 0x20 || c == 0x7F) jsonschema_buf_printf(b, "\\x%02X", c);
        else jsonschema_buf_add(b, (const char *)&c, 1);
    }
    jsonschema_buf_add(b, "\"", 1);
}

void jsonschema_buf_class_char(jsonschema_buf *b, uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) {
        char c = (char)cp;
        jsonschema_buf_add(b, &c, 1);
    } else if (cp < 0x80) {
        jsonschema_buf_printf(b, "\\x%02X", cp);
    } else if (cp <= 0xFFFF) {
        jsonschema_buf_printf(b, "\\u%04X", cp);
    } else {
        jsonschema_buf_printf(b, "\\U%08X", cp);
    }
}

/* ---- integer ranges ------------------------------------------------------------------------ */

static int all_char(const char *s, int n, char c) {
    for (int i = 0; i < n; i++)
        if (s[i] != c) return 0;
    return 1;
}

static void digits_class(jsonschema_buf *o, char lo, char hi) {
    if (lo == hi) jsonschema_buf_printf(o, "[%c]", lo);
    else jsonschema_buf_printf(o, "[%c-%c]", lo, hi);
}

static void any_digits(jsonschema_buf *o, int n) {
    if (n == 1) jsonschema_buf_puts(o, " [0-9]");
    else if (n > 1) jsonschema_buf_printf(o, " [0-9]{%d}", n);
}

/* Numbers of exactly L digits from a to b (a <= b as strings of length L), leading zeros allowed
 * past the first call's first digit. Emits a sequence (possibly empty when L is 0). */
static void same_len(jsonschema_buf *o, const char *a, const char *b, int L) {
    int i = 0;
    while (i < L && a[i] == b[i]) i++;
    if (i > 0) jsonschema_buf_literal(o, a, (size_t)i);
    if (i == L) return;
    if (i > 0) jsonschema_buf_puts(o, " ");
    int rest = L - i - 1;
    const char *at = a + i + 1, *bt = b + i + 1;
    char a0 = a[i], b0 = b[i];
    if (all_char(at, rest, '0') && all_char(bt, rest, '9')) {
        digits_class(o, a0, b0);
        any_digits(o, rest);
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    jsonschema_buf_puts(o, "(");
    int first = 1;
    char mid_lo = a0, mid_hi = b0;
    if (!all_char(at, rest, '0')) {
        jsonschema_buf_printf(o, "[%c] (", a0);
        same_len(o, at, nines, rest);
        jsonschema_buf_puts(o, ")");
        first = 0;
        mid_lo = (char)(a0 + 1);
    }
    int upper = !all_char(bt, rest, '9');
    if (upper) mid_hi = (char)(b0 - 1);
    if (mid_lo <= mid_hi) {
        if (!first) jsonschema_buf_puts(o, " | ");
        digits_class(o, mid_lo, mid_hi);
        any_digits(o, rest);
        first = 0;
    }
    if (upper) {
        if (!first) jsonschema_buf_puts(o, " | ");
        jsonschema_buf_printf(o, "[%c] (", b0);
        same_len(o, zeros, bt, rest);
        jsonschema_buf_puts(o, ")");
    }
    jsonschema_buf_puts(o, ")");
}

static int n_digits(uint64_t v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

static uint64_t pow10_minus1(int n) { /* 10^n - 1, n <= 19 */
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v * 10 + 9;
    return v;
}

/* Non-negative integers in [a, b]: one same-length run per digit count. */
static void range_nonneg(jsonschema_buf *o, uint64_t a, uint64_t b) {
    int la = n_digits(a), lb = n_digits(b);
    jsonschema_buf_puts(o, "(");
    for (int L = la; L <= lb; L++) {
        uint64_t lo = L == la ? a : pow10_minus1(L - 1) + 1;
        uint64_t hi = L == lb ? b : pow10_minus1(L);
        char sa[24], sb[24];
        snprintf(sa, sizeof sa, "%llu", (unsigned long long)lo);
        snprintf(sb, sizeof sb, "%llu", (unsigned long long)hi);
        if (L > la) jsonschema_buf_puts(o, " | ");
        jsonschema_buf_puts(o, "(");
        same_len(o, sa, sb, L);
        jsonschema_buf_puts(o, ")");
    }
    jsonschema_buf_puts(o, ")");
}

/* Non-negative integers >= a: the rest of a's digit count, then any longer number. */
static void at_least(jsonschema_buf *o, uint64_t a) {
    int L = n_digits(a);
    jsonschema_buf_puts(o, "(");
    if (L >= 20) { /* a is past 10^19: every longer number is past uint64 anyway */
        range_nonneg(o, a, UINT64_MAX);
        jsonschema_buf_puts(o, " | [1-9] [0-9]{20,})");
        return;
    }
    range_nonneg(o, a, pow10_minus1(L));
    jsonschema_buf_printf(o, " | [1-9] [0-9]{%d,})", L);
}

static uint64_t magnitude(int64_t v) { return v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v; }

void jsonschema_int_range(jsonschema_buf *o, int has_min, int64_t min, int has_max, int64_t max) {
    if (has_min && has_max) {
        if (max < 0) {
            jsonschema_buf_puts(o, "\"-\" ");
            range_nonneg(o, magnitude(max), magnitude(min));
        } else if (min >= 0) {
            range_nonneg(o, (uint64_t)min, (uint64_t)max);
        } else {
            jsonschema_buf_puts(o, "\"-\" ");
            range_nonneg(o, 1, magnitude(min));
            jsonschema_buf_puts(o, " | ");
            range_nonneg(o, 0, (uint64_t)max);
        }
    } else if (has_min) {
        if (min >= 0) {
            at_least(o, (uint64_t)min);
        } else {
            jsonschema_buf_puts(o, "\"-\" ");
            range_nonneg(o, 1, magnitude(min));
            jsonschema_buf_puts(o, " | [0] | [1-9] [0-9]*");
        }
    } else if (has_max) {
        if (max >= 0) {
            jsonschema_buf_puts(o, "\"-\" [1-9] [0-9]* | ");
            range_nonneg(o, 0, (uint64_t)max);
        } else {
            jsonschema_buf_puts(o, "\"-\" ");
            at_least(o, magnitude(max));
        }
    } else {
        jsonschema_buf_puts(o, "\"-\"? ([0] | [1-9] [0-9]*)");
    }
}
