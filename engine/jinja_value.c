/* Values of the Jinja engine: the arena they live in, constructors, Python's truth, equality,
 * ordering, str() / repr() and json.dumps() as transformers' tojson calls it, conversion from
 * cJSON, and the few Unicode string helpers (whitespace, case, strip) Python's str gives. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jinja_internal.h"
#include "engine/unicode.h"

/* --- arena ------------------------------------------------------------------------------------ */

struct jinja_block {
    jinja_block *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

#define JINJA_BLOCK 65536

void *jinja_alloc(jinja_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    jinja_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > JINJA_BLOCK / 4 ? n : JINJA_BLOCK;
        if (cap > a->limit || a->used > a->limit - cap)
            jinja_fail(a, a->line, a->col, "template uses more than %zu MiB of memory (the render's limit)",
                       a->limit >> 20);
        b = malloc(sizeof *b + cap);
        if (!b) jinja_fail(a, a->line, a->col, "out of memory (%zu bytes more)", cap);
        a->used += sizeof *b + cap;
        b->cap = cap;
        b->used = 0;
        if (cap == n && a->head) {  /* a big one goes behind the current block, which stays open */
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *jinja_strndup(jinja_arena *a, const char *s, size_t n) {
    char *p = jinja_alloc(a, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void jinja_arena_free(jinja_arena *a) {
    for (jinja_block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
    a->used = 0;
}

_Noreturn void jinja_fail(jinja_arena *a, int line, int col, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (a->err && a->err_size) {
        size_t k = line > 0 ? (size_t)snprintf(a->err, a->err_size, "%d:%d: ", line, col) : 0;
        if (k >= a->err_size) k = a->err_size - 1;
        /* one line whatever the message holds: control characters written as escapes */
        for (const char *p = msg; *p && k + 5 < a->err_size; p++) {
            unsigned char ch = (unsigned char)*p;
            if (ch == '\n') a->err[k++] = '\\', a->err[k++] = 'n';
            else if (ch < 32 || ch == 127) k += (size_t)snprintf(a->err + k, a->err_size - k, "\\x%02x", ch);
            else a->err[k++] = (char)ch;
        }
        a->err[k] = 0;
    }
    longjmp(*a->fail, 1);
}

_Noreturn void jinja_error(jinja_ctx *c, const char *fmt, ...) {
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jinja_fail(c->arena, c->arena->line, c->arena->col, "%s", msg);
}

/* --- buffers ---------------------------------------------------------------------------------- */

void jinja_buf_add(jinja_ctx *c, jinja_buf *b, const char *p, size_t n) {
    if (n > c->lim.max_output || b->n > c->lim.max_output - n)
        jinja_error(c, "rendered text longer than %zu bytes (the render's limit)", c->lim.max_output);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = jinja_alloc(c->arena, cap);
        if (b->n) memcpy(q, b->p, b->n);
        b->p = q, b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jinja_buf_addc(jinja_ctx *c, jinja_buf *b, char ch) { jinja_buf_add(c, b, &ch, 1); }

jinja_value jinja_buf_value(jinja_buf *b) { return jinja_val_str(b->p ? b->p : "", b->n); }

/* --- constructors ----------------------------------------------------------------------------- */

jinja_value jinja_val_undef(jinja_ctx *c, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    jinja_value v = {.kind = JV_UNDEF};
    v.s.p = jinja_strndup(c->arena, msg, (size_t)n);
    v.s.n = (size_t)n;
    return v;
}

jinja_value jinja_val_none(void) { return (jinja_value){.kind = JV_NONE}; }
jinja_value jinja_val_bool(bool b) { return (jinja_value){.kind = JV_BOOL, .b = b}; }
jinja_value jinja_val_int(int64_t i) { return (jinja_value){.kind = JV_INT, .i = i}; }
jinja_value jinja_val_float(double f) { return (jinja_value){.kind = JV_FLOAT, .f = f}; }
jinja_value jinja_val_str(const char *p, size_t n) {
    jinja_value v = {.kind = JV_STR};
    v.s.p = p, v.s.n = n;
    return v;
}
jinja_value jinja_val_cstr(const char *p) { return jinja_val_str(p, strlen(p)); }
jinja_value jinja_val_strdup(jinja_ctx *c, const char *p, size_t n) {
    return jinja_val_str(jinja_strndup(c->arena, p, n), n);
}

jinja_value jinja_val_list(jinja_ctx *c, size_t cap) {
    jinja_value v = {.kind = JV_LIST};
    v.l = jinja_alloc(c->arena, sizeof *v.l);
    if (cap) {
        if (cap > c->arena->limit / sizeof(jinja_value)) jinja_error(c, "list of %zu items is too large", cap);
        v.l->v = jinja_alloc(c->arena, cap * sizeof(jinja_value));
        v.l->cap = cap;
    }
    return v;
}

jinja_value jinja_val_dict(jinja_ctx *c) {
    jinja_value v = {.kind = JV_DICT};
    v.d = jinja_alloc(c->arena, sizeof *v.d);
    return v;
}

void jinja_val_list_push(jinja_ctx *c, jinja_list *l, jinja_value v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jinja_value *nv = jinja_alloc(c->arena, cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv, l->cap = cap;
    }
    l->v[l->n++] = v;
}

jinja_value *jinja_val_dict_find(const jinja_dict *d, const char *k, size_t kn) {
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].key.kind == JV_UNDEF && d->e[i].kn == kn && !memcmp(d->e[i].k, k, kn)) return &d->e[i].v;
    return NULL;
}

static jinja_entry *dict_append(jinja_ctx *c, jinja_dict *d, const char *k, size_t kn, jinja_value v);

jinja_value jinja_val_entry_key(const jinja_entry *e) {
    return e->key.kind == JV_UNDEF ? jinja_val_str(e->k, e->kn) : e->key;
}

jinja_value *jinja_val_dict_find_key(const jinja_dict *d, jinja_value key) {
    if (key.kind == JV_STR) return jinja_val_dict_find(d, key.s.p, key.s.n);
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].key.kind != JV_UNDEF && jinja_val_equal(d->e[i].key, key)) return &d->e[i].v;
    return NULL;
}

void jinja_val_dict_set_key(jinja_ctx *c, jinja_dict *d, jinja_value key, jinja_value v) {
    if (key.kind == JV_STR) return jinja_val_dict_set(c, d, key.s.p, key.s.n, v);
    if (key.kind == JV_LIST || key.kind == JV_DICT || key.kind == JV_NS || key.kind == JV_UNDEF)
        jinja_error(c, "unhashable type: '%s'", jinja_val_type_name(key));
    jinja_value *at = jinja_val_dict_find_key(d, key);
    if (at) {
        *at = v;
        return;
    }
    jinja_value text = jinja_val_to_str(c, key);
    dict_append(c, d, text.s.p, text.s.n, v)->key = key;
}

static jinja_entry *dict_append(jinja_ctx *c, jinja_dict *d, const char *k, size_t kn, jinja_value v) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jinja_entry *ne = jinja_alloc(c->arena, cap * sizeof *ne);
        if (d->n) memcpy(ne, d->e, d->n * sizeof *ne);
        d->e = ne, d->cap = cap;
    }
    d->e[d->n] = (jinja_entry){k, kn, v, {.kind = JV_UNDEF}};
    return &d->e[d->n++];
}

void jinja_val_dict_set(jinja_ctx *c, jinja_dict *d, const char *k, size_t kn, jinja_value v) {
    jinja_value *at = jinja_val_dict_find(d, k, kn);
    if (at) *at = v;
    else dict_append(c, d, k, kn, v);
}

/* --- Python semantics --------------------------------------------------------------------------- */

const char *jinja_val_type_name(jinja_value v) {
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_FUNC: return v.fn->kind == JF_MACRO ? "Macro" : "builtin_function_or_method";
    }
    return "object";
}

bool jinja_val_truthy(jinja_value v) {
    switch (v.kind) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.s.n != 0;
    case JV_LIST: return v.l->lazy || v.l->n != 0;
    case JV_DICT: return v.d->n != 0;
    case JV_NS: case JV_FUNC: return true;
    }
    return false;
}

bool jinja_val_is_number(jinja_value v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }

double jinja_val_as_double(jinja_value v) {
    return v.kind == JV_FLOAT ? v.f : v.kind == JV_INT ? (double)v.i : v.kind == JV_BOOL ? (double)v.b : 0;
}

bool jinja_val_equal(jinja_value a, jinja_value b) {
    if (jinja_val_is_number(a) && jinja_val_is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT)
            return (a.kind == JV_INT ? a.i : a.b) == (b.kind == JV_INT ? b.i : b.b);
        return jinja_val_as_double(a) == jinja_val_as_double(b);
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.s.n == b.s.n && !memcmp(a.s.p, b.s.p, a.s.n);
    case JV_LIST:
        if (a.l->n != b.l->n || a.l->tuple != b.l->tuple) return false;  /* (1, 2) != [1, 2] */
        for (size_t i = 0; i < a.l->n; i++)
            if (!jinja_val_equal(a.l->v[i], b.l->v[i])) return false;
        return true;
    case JV_DICT:
        if (a.d->n != b.d->n) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            jinja_value *o = jinja_val_dict_find_key(b.d, jinja_val_entry_key(&a.d->e[i]));
            if (!o || !jinja_val_equal(a.d->e[i].v, *o)) return false;
        }
        return true;
    case JV_NS: return a.d == b.d;
    case JV_FUNC: return a.fn == b.fn;
    default: return false;
    }
}

int jinja_val_compare(jinja_ctx *c, jinja_value a, jinja_value b) {
    if (jinja_val_is_number(a) && jinja_val_is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
            int64_t x = a.kind == JV_INT ? a.i : a.b, y = b.kind == JV_INT ? b.i : b.b;
            return x < y ? -1 : x > y;
        }
        double x = jinja_val_as_double(a), y = jinja_val_as_double(b);
        return x < y ? -1 : x > y;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {  /* UTF-8 byte order is code point order */
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        int r = n ? memcmp(a.s.p, b.s.p, n) : 0;
        if (r) return r < 0 ? -1 : 1;
        return a.s.n < b.s.n ? -1 : a.s.n > b.s.n;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST && a.l->tuple == b.l->tuple) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (jinja_val_equal(a.l->v[i], b.l->v[i])) continue;
            return jinja_val_compare(c, a.l->v[i], b.l->v[i]);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    if (a.kind == JV_UNDEF || b.kind == JV_UNDEF)
        jinja_error(c, "%.*s", (int)(a.kind == JV_UNDEF ? a : b).s.n, (a.kind == JV_UNDEF ? a : b).s.p);
    jinja_error(c, "'<' not supported between instances of '%s' and '%s'", jinja_val_type_name(a),
                jinja_val_type_name(b));
}

/* --- str(), repr(), json.dumps() ---------------------------------------------------------------- */

/* Python's repr(float): the shortest digits that read back the same, fixed notation for
 * exponents -4..15, else d.ddde+XX. */
static void float_append(jinja_ctx *c, jinja_buf *b, double f, bool json) {
    if (isnan(f)) return jinja_buf_add(c, b, json ? "NaN" : "nan", json ? 3 : 3);
    if (isinf(f)) {
        const char *s = json ? (f < 0 ? "-Infinity" : "Infinity") : (f < 0 ? "-inf" : "inf");
        return jinja_buf_add(c, b, s, strlen(s));
    }
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char out[64];
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out[k++] = '0', out[k++] = '.';
            for (int i = 0; i < -exp - 1; i++) out[k++] = '0';
            for (size_t i = 0; i < nd; i++) out[k++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++) out[k++] = (size_t)i < nd ? digits[i] : '0';
            out[k++] = '.';
            if ((size_t)exp + 1 < nd)
                for (size_t i = (size_t)exp + 1; i < nd; i++) out[k++] = digits[i];
            else
                out[k++] = '0';
        }
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (size_t i = 1; i < nd; i++) out[k++] = digits[i];
        }
        k += (size_t)snprintf(out + k, sizeof out - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    jinja_buf_add(c, b, out, k);
}

static void repr_str(jinja_ctx *c, jinja_buf *b, const char *p, size_t n) {
    bool has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jinja_buf_addc(c, b, q);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        char esc[8];
        if (ch == '\\' || ch == (unsigned char)q) jinja_buf_addc(c, b, '\\'), jinja_buf_addc(c, b, (char)ch);
        else if (ch == '\n') jinja_buf_add(c, b, "\\n", 2);
        else if (ch == '\r') jinja_buf_add(c, b, "\\r", 2);
        else if (ch == '\t') jinja_buf_add(c, b, "\\t", 2);
        else if (ch < 32 || ch == 127) jinja_buf_add(c, b, esc, (size_t)snprintf(esc, sizeof esc, "\\x%02x", ch));
        else jinja_buf_addc(c, b, (char)ch);
    }
    jinja_buf_addc(c, b, q);
}

void jinja_val_str_append(jinja_ctx *c, jinja_buf *b, jinja_value v, bool repr) {
    char num[32];
    switch (v.kind) {
    case JV_UNDEF: return repr ? jinja_buf_add(c, b, "Undefined", 9) : (void)0;
    case JV_NONE: return jinja_buf_add(c, b, "None", 4);
    case JV_BOOL: return v.b ? jinja_buf_add(c, b, "True", 4) : jinja_buf_add(c, b, "False", 5);
    case JV_INT: return jinja_buf_add(c, b, num, (size_t)snprintf(num, sizeof num, "%lld", (long long)v.i));
    case JV_FLOAT: return float_append(c, b, v.f, false);
    case JV_STR: return repr ? repr_str(c, b, v.s.p, v.s.n) : jinja_buf_add(c, b, v.s.p, v.s.n);
    case JV_LIST:
        if (v.l->lazy) return jinja_buf_add(c, b, "<generator object>", 18);
        jinja_buf_addc(c, b, v.l->tuple ? '(' : '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jinja_buf_add(c, b, ", ", 2);
            jinja_val_str_append(c, b, v.l->v[i], true);
        }
        if (v.l->tuple && v.l->n == 1) jinja_buf_addc(c, b, ',');
        return jinja_buf_addc(c, b, v.l->tuple ? ')' : ']');
    case JV_NS:
        jinja_buf_add(c, b, "<Namespace ", 11);
        /* fall through */
    case JV_DICT:
        jinja_buf_addc(c, b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) jinja_buf_add(c, b, ", ", 2);
            jinja_val_str_append(c, b, jinja_val_entry_key(&v.d->e[i]), true);
            jinja_buf_add(c, b, ": ", 2);
            jinja_val_str_append(c, b, v.d->e[i].v, true);
        }
        jinja_buf_addc(c, b, '}');
        if (v.kind == JV_NS) jinja_buf_addc(c, b, '>');
        return;
    case JV_FUNC:
        jinja_buf_add(c, b, "<function ", 10);
        jinja_buf_add(c, b, v.fn->name, strlen(v.fn->name));
        return jinja_buf_addc(c, b, '>');
    }
}

jinja_value jinja_val_to_str(jinja_ctx *c, jinja_value v) {
    if (v.kind == JV_STR) return v;
    if (v.kind == JV_UNDEF) return jinja_val_str("", 0);
    jinja_buf b = {0};
    jinja_val_str_append(c, &b, v, false);
    return jinja_buf_value(&b);
}

static void json_str(jinja_ctx *c, jinja_buf *b, const char *p, size_t n, bool ascii) {
    jinja_buf_addc(c, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        char esc[16];
        if (ascii && ch >= 0x80) {  /* \uXXXX, a surrogate pair above U+FFFF, as Python */
            jinja_buf_add(c, b, p + run, i - run);
            uint32_t cp;
            size_t k = unicode_decode(p + i, n - i, &cp);
            if (cp == UNICODE_INVALID) cp = 0xFFFD;
            if (cp > 0xFFFF) {
                cp -= 0x10000;
                jinja_buf_add(c, b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                                                           0xDC00 + (cp & 0x3FF)));
            } else {
                jinja_buf_add(c, b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", cp));
            }
            i += k - 1;
            run = i + 1;
            continue;
        }
        if (ch >= 32 && ch != '"' && ch != '\\') continue;
        jinja_buf_add(c, b, p + run, i - run);
        run = i + 1;
        switch (ch) {
        case '"': jinja_buf_add(c, b, "\\\"", 2); break;
        case '\\': jinja_buf_add(c, b, "\\\\", 2); break;
        case '\n': jinja_buf_add(c, b, "\\n", 2); break;
        case '\r': jinja_buf_add(c, b, "\\r", 2); break;
        case '\t': jinja_buf_add(c, b, "\\t", 2); break;
        case '\b': jinja_buf_add(c, b, "\\b", 2); break;
        case '\f': jinja_buf_add(c, b, "\\f", 2); break;
        default: jinja_buf_add(c, b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", ch));
        }
    }
    jinja_buf_add(c, b, p + run, n - run);
    jinja_buf_addc(c, b, '"');
}

static void json_newline(jinja_ctx *c, jinja_buf *b, const char *indent, int level) {
    jinja_buf_addc(c, b, '\n');
    for (int i = 0; i < level; i++) jinja_buf_add(c, b, indent, strlen(indent));
}

static int entry_cmp(const void *x, const void *y) {
    const jinja_entry *a = *(const jinja_entry *const *)x, *b = *(const jinja_entry *const *)y;
    size_t n = a->kn < b->kn ? a->kn : b->kn;
    int r = n ? memcmp(a->k, b->k, n) : 0;
    return r ? r : (a->kn > b->kn) - (a->kn < b->kn);
}

void jinja_val_json_append(jinja_ctx *c, jinja_buf *b, jinja_value v, const jinja_json_opts *o, int level) {
    const char *indent = o->indent;
    const char *item_sep = o->item_sep, *key_sep = o->key_sep;
    char num[32];
    if (level > c->lim.max_depth) jinja_error(c, "tojson: value nested deeper than %d levels", c->lim.max_depth);
    switch (v.kind) {
    case JV_NONE: return jinja_buf_add(c, b, "null", 4);
    case JV_BOOL: return v.b ? jinja_buf_add(c, b, "true", 4) : jinja_buf_add(c, b, "false", 5);
    case JV_INT: return jinja_buf_add(c, b, num, (size_t)snprintf(num, sizeof num, "%lld", (long long)v.i));
    case JV_FLOAT: return float_append(c, b, v.f, true);
    case JV_STR: return json_str(c, b, v.s.p, v.s.n, o->ascii);
    case JV_LIST:
        if (v.l->lazy) jinja_error(c, "tojson: Object of type generator is not JSON serializable (add |list)");
        if (!v.l->n) return jinja_buf_add(c, b, "[]", 2);
        jinja_buf_addc(c, b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jinja_buf_add(c, b, item_sep, strlen(item_sep));
            if (indent) json_newline(c, b, indent, level + 1);
            jinja_val_json_append(c, b, v.l->v[i], o, level + 1);
        }
        if (indent) json_newline(c, b, indent, level);
        return jinja_buf_addc(c, b, ']');
    case JV_DICT: {
        if (!v.d->n) return jinja_buf_add(c, b, "{}", 2);
        const jinja_entry **order = jinja_alloc(c->arena, v.d->n * sizeof *order);
        for (size_t i = 0; i < v.d->n; i++) order[i] = &v.d->e[i];
        if (o->sort_keys) qsort(order, v.d->n, sizeof *order, entry_cmp);
        jinja_buf_addc(c, b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) jinja_buf_add(c, b, item_sep, strlen(item_sep));
            if (indent) json_newline(c, b, indent, level + 1);
            json_str(c, b, order[i]->k, order[i]->kn, o->ascii);
            jinja_buf_add(c, b, key_sep, strlen(key_sep));
            jinja_val_json_append(c, b, order[i]->v, o, level + 1);
        }
        if (indent) json_newline(c, b, indent, level);
        return jinja_buf_addc(c, b, '}');
    }
    default:
        jinja_error(c, "tojson: Object of type %s is not JSON serializable", jinja_val_type_name(v));
    }
}

jinja_value jinja_val_from_cjson(jinja_ctx *c, const void *p) {
    const cJSON *j = p;
    if (!j || cJSON_IsNull(j)) return jinja_val_none();
    if (cJSON_IsBool(j)) return jinja_val_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        /* cJSON keeps no text: an integral value within int64 is an int unless the item carries
         * a valuestring, chat_json_parse's mark of a number written as a float (2.0, 1e3) */
        if (d == floor(d) && fabs(d) < 9.2e18 && !j->valuestring) return jinja_val_int((int64_t)d);
        return jinja_val_float(d);
    }
    if (cJSON_IsString(j)) return jinja_val_strdup(c, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j)) {
        jinja_value v = jinja_val_list(c, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *e = j->child; e; e = e->next) jinja_val_list_push(c, v.l, jinja_val_from_cjson(c, e));
        v.l->frozen = true;
        return v;
    }
    if (cJSON_IsObject(j)) {
        jinja_value v = jinja_val_dict(c);
        for (const cJSON *e = j->child; e; e = e->next) {
            const char *k = e->string ? e->string : "";
            jinja_val_dict_set(c, v.d, jinja_strndup(c->arena, k, strlen(k)), strlen(k), jinja_val_from_cjson(c, e));
        }
        v.d->frozen = true;
        return v;
    }
    return jinja_val_none();
}

/* --- Unicode string helpers ---------------------------------------------------------------------- */

bool jinja_is_space(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
           cp == 0x3000;
}

size_t jinja_utf8_len(const char *p, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        uint32_t cp;
        i += unicode_decode(p + i, n - i, &cp);
    }
    return k;
}

size_t jinja_utf8_offset(const char *p, size_t n, size_t index) {
    size_t i = 0;
    for (size_t k = 0; k < index && i < n; k++) {
        uint32_t cp;
        i += unicode_decode(p + i, n - i, &cp);
    }
    return i;
}

static uint32_t cp_lower(uint32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + 32;
    if (cp < 0xC0) return cp;
    if (cp <= 0xDE && cp != 0xD7) return cp + 32;
    if ((cp >= 0x100 && cp <= 0x12F) || (cp >= 0x132 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177))
        return cp | 1;
    if (((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) && (cp & 1)) return cp + 1;
    if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
    return cp;
}

static uint32_t cp_upper(uint32_t cp) {
    if (cp >= 'a' && cp <= 'z') return cp - 32;
    if (cp < 0xE0) return cp;
    if (cp <= 0xFE && cp != 0xF7) return cp - 32;
    if ((cp >= 0x100 && cp <= 0x12F) || (cp >= 0x132 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177))
        return cp & ~1u;
    if (((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) && !(cp & 1)) return cp - 1;
    if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 32;
    if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
    if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
    return cp;
}

jinja_value jinja_str_case(jinja_ctx *c, jinja_value s, char mode) {
    jinja_buf b = {0};
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s.s.n;) {
        uint32_t cp;
        size_t k = unicode_decode(s.s.p + i, s.s.n - i, &cp);
        uint32_t out = cp;
        if (cp == UNICODE_INVALID) {
            jinja_buf_add(c, &b, s.s.p + i, k);
            i += k;
            continue;
        }
        bool cased = cp_lower(cp) != cp || cp_upper(cp) != cp;
        switch (mode) {
        case 'l': out = cp_lower(cp); break;
        case 'u': out = cp_upper(cp); break;
        case 'c': out = first ? cp_upper(cp) : cp_lower(cp); break;
        case 't':
            out = cased ? (prev_cased ? cp_lower(cp) : cp_upper(cp)) : cp;
            prev_cased = cased;
            break;
        case 'T': {
            /* jinja2's title: a word starts after whitespace or one of -([{< */
            bool sep = jinja_is_space(cp) || (cp < 128 && strchr("-({[<", (int)cp));
            out = sep ? cp : (prev_cased ? cp_lower(cp) : cp_upper(cp));
            prev_cased = !sep;
            break;
        }
        }
        first = false;
        if (cp == 0xDF && mode == 'u') {  /* ß has no capital: SS, as Python */
            jinja_buf_add(c, &b, "SS", 2);
            i += k;
            continue;
        }
        char u[4];
        jinja_buf_add(c, &b, u, unicode_encode(out, u));
        i += k;
    }
    return jinja_buf_value(&b);
}

static bool in_chars(uint32_t cp, const char *chars, size_t n) {
    if (!chars) return jinja_is_space(cp);
    for (size_t i = 0; i < n;) {
        uint32_t x;
        i += unicode_decode(chars + i, n - i, &x);
        if (x == cp) return true;
    }
    return false;
}

jinja_value jinja_str_strip(jinja_value s, const char *chars, size_t nchars, char which) {
    const char *p = s.s.p;
    size_t start = 0, end = s.s.n;
    if (which != 'r')
        while (start < end) {
            uint32_t cp;
            size_t k = unicode_decode(p + start, end - start, &cp);
            if (!in_chars(cp, chars, nchars)) break;
            start += k;
        }
    if (which != 'l')
        while (end > start) {
            size_t st = end - 1;
            while (st > start && ((unsigned char)p[st] & 0xC0) == 0x80 && end - st < 4) st--;
            uint32_t cp;
            size_t k = unicode_decode(p + st, end - st, &cp);
            if (st + k != end || !in_chars(cp, chars, nchars)) break;
            end = st;
        }
    return jinja_val_str(p + start, end - start);
}
