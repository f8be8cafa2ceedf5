/* Python methods the templates call on values (str.strip, str.split, str.format, dict.get,
 * dict.items, list.append on lists the template built...) and the globals jinja2 and
 * transformers give (range, namespace, dict, raise_exception, strftime_now). Lists and dicts
 * that came from the caller's variables are read-only, as in transformers' immutable sandbox. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/jinja_internal.h"
#include "engine/unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* Python's str.isalpha / isalnum: the Unicode general categories L and N, through PCRE2's
 * property tables (compiled once; a failed compile matches nothing). */
static pcre2_code *rx_letter, *rx_number;

static pcre2_code *compile_property(const char *pat) {
    int ec;
    PCRE2_SIZE eo;
    return pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                         &ec, &eo, NULL);
}

static bool has_property(const pcre2_code *re, const char *u, size_t n) {
    if (!re) return false;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    bool ok = md && pcre2_match(re, (PCRE2_SPTR)u, n, 0, PCRE2_ANCHORED, md, NULL) >= 0;
    pcre2_match_data_free(md);
    return ok;
}

static const char *const str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "lower", "upper",
    "title", "capitalize", "format", "join", "count", "find", "rfind", "index", "rindex", "isdigit",
    "isalpha", "isalnum", "isspace", "islower", "isupper", "splitlines", "casefold", "removeprefix",
    "removesuffix", "center", "ljust", "rjust", "zfill", "partition", "rpartition", NULL};
static const char *const list_methods[] = {"append", "pop", "index", "count", "extend", "insert", NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", NULL};

static bool in_names(const char *const *names, const char *name, size_t n) {
    for (size_t i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], name, n)) return true;
    return false;
}

bool jinja_method_exists(jinja_value obj, const char *name, size_t n) {
    if (obj.kind == JV_STR) return in_names(str_methods, name, n);
    if (obj.kind == JV_LIST) return in_names(list_methods, name, n);
    if (obj.kind == JV_DICT) return in_names(dict_methods, name, n);
    return false;
}

static jinja_value str_arg(jinja_ctx *c, const jinja_args *a, size_t i, const char *name, const char *method) {
    jinja_value v = jinja_arg(c, a, i, name, jinja_val_undef(c, "str.%s() needs an argument", method));
    if (v.kind == JV_UNDEF) jinja_error(c, "str.%s() needs an argument", method);
    if (v.kind != JV_STR) jinja_error(c, "str.%s() argument must be str, not %s", method, jinja_val_type_name(v));
    return v;
}

static int64_t int_arg(jinja_ctx *c, const jinja_args *a, size_t i, const char *name, int64_t def) {
    jinja_value v = jinja_arg(c, a, i, name, jinja_val_int(def));
    if (v.kind == JV_NONE) return def;
    if (v.kind == JV_BOOL) return v.b;
    if (v.kind != JV_INT) jinja_error(c, "'%s' must be an integer, not %s", name, jinja_val_type_name(v));
    return v.i;
}

static const char *find(const char *h, size_t hn, const char *n, size_t nn, bool last) {
    if (nn > hn) return NULL;
    if (!last) return nn ? memmem(h, hn, n, nn) : h;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (!memcmp(h + i, n, nn)) return h + i;
    return NULL;
}

/* str.split / str.rsplit: by a separator, or (sep None) by runs of whitespace. */
static jinja_value split(jinja_ctx *c, jinja_value s, jinja_value sep, int64_t maxsplit, bool from_right) {
    jinja_value out = jinja_val_list(c, 0);
    jinja_list *parts = out.l;
    if (sep.kind == JV_STR) {
        if (!sep.s.n) jinja_error(c, "empty separator");
        const char *p = s.s.p;
        size_t n = s.s.n;
        jinja_value tmp = jinja_val_list(c, 0);
        for (int64_t k = 0; maxsplit < 0 || k < maxsplit; k++) {
            jinja_step(c);
            const char *at = find(p, n, sep.s.p, sep.s.n, from_right);
            if (!at) break;
            if (from_right) {
                jinja_val_list_push(c, tmp.l, jinja_val_str(at + sep.s.n, (size_t)(p + n - at) - sep.s.n));
                n = (size_t)(at - p);
            } else {
                jinja_val_list_push(c, parts, jinja_val_str(p, (size_t)(at - p)));
                n -= (size_t)(at - p) + sep.s.n;
                p = at + sep.s.n;
            }
        }
        jinja_val_list_push(c, from_right ? tmp.l : parts, jinja_val_str(p, n));
        if (from_right)
            for (size_t i = tmp.l->n; i-- > 0;) jinja_val_list_push(c, parts, tmp.l->v[i]);
        return out;
    }
    if (sep.kind != JV_NONE)
        jinja_error(c, "str.split() separator must be str or None, not %s", jinja_val_type_name(sep));
    /* whitespace: words of non-space code points; the rest of the string after maxsplit */
    size_t i = 0, n = s.s.n;
    const char *p = s.s.p;
    if (from_right) {
        jinja_value t = jinja_str_strip(s, NULL, 0, 'r');
        jinja_value tmp = jinja_val_list(c, 0);
        size_t end = t.s.n;
        int64_t k = 0;
        while (end > 0) {
            jinja_step(c);
            if (maxsplit >= 0 && k == maxsplit) {
                jinja_val_list_push(c, tmp.l, jinja_str_strip(jinja_val_str(p, end), NULL, 0, 'r'));
                end = 0;
                break;
            }
            size_t st = end;
            while (st > 0) {
                size_t b = st - 1;
                while (b > 0 && ((unsigned char)p[b] & 0xC0) == 0x80) b--;
                uint32_t cp;
                unicode_decode(p + b, st - b, &cp);
                if (jinja_is_space(cp)) break;
                st = b;
            }
            jinja_val_list_push(c, tmp.l, jinja_val_str(p + st, end - st));
            k++;
            end = jinja_str_strip(jinja_val_str(p, st), NULL, 0, 'r').s.n;
        }
        for (size_t j = tmp.l->n; j-- > 0;) jinja_val_list_push(c, parts, tmp.l->v[j]);
        return out;
    }
    int64_t k = 0;
    for (;;) {
        jinja_step(c);
        jinja_value rest = jinja_str_strip(jinja_val_str(p + i, n - i), NULL, 0, 'l');
        i = (size_t)(rest.s.p - p);
        if (i >= n) break;
        if (maxsplit >= 0 && k == maxsplit) {
            jinja_val_list_push(c, parts, jinja_val_str(p + i, n - i));
            break;
        }
        size_t st = i;
        while (i < n) {
            uint32_t cp;
            size_t len = unicode_decode(p + i, n - i, &cp);
            if (jinja_is_space(cp)) break;
            i += len;
        }
        jinja_val_list_push(c, parts, jinja_val_str(p + st, i - st));
        k++;
    }
    return out;
}

static bool affix(jinja_ctx *c, jinja_value s, jinja_value x, bool end) {
    if (x.kind == JV_LIST) {
        for (size_t i = 0; i < x.l->n; i++)
            if (affix(c, s, x.l->v[i], end)) return true;
        return false;
    }
    if (x.kind != JV_STR)
        jinja_error(c, "startswith/endswith take a str or a tuple of str, not %s", jinja_val_type_name(x));
    if (x.s.n > s.s.n) return false;
    return !memcmp(s.s.p + (end ? s.s.n - x.s.n : 0), x.s.p, x.s.n);
}

/* Python's str.format: {} {0} {name} with .attr / [key], !r / !s, and [[fill]align][0][width]
 * [.precision][type] specs. */
static jinja_value format(jinja_ctx *c, jinja_value fmt, const jinja_args *a) {
    jinja_buf b = {0};
    size_t auto_i = 0;
    const char *p = fmt.s.p, *end = p + fmt.s.n;
    while (p < end) {
        if (*p == '}' && p + 1 < end && p[1] == '}') { jinja_buf_addc(c, &b, '}'); p += 2; continue; }
        if (*p != '{') { jinja_buf_addc(c, &b, *p++); continue; }
        if (p + 1 < end && p[1] == '{') { jinja_buf_addc(c, &b, '{'); p += 2; continue; }
        const char *close = memchr(p, '}', (size_t)(end - p));
        if (!close) jinja_error(c, "str.format: single '{' encountered in format string");
        const char *f = p + 1, *fe = f;
        while (fe < close && *fe != '.' && *fe != '[' && *fe != '!' && *fe != ':') fe++;
        jinja_value v;
        if (fe == f) {
            if (auto_i >= a->n_args) jinja_error(c, "str.format: replacement index %zu out of range", auto_i);
            v = a->args[auto_i++];
        } else if (*f >= '0' && *f <= '9') {
            size_t i = (size_t)strtoul(f, NULL, 10);
            if (i >= a->n_args) jinja_error(c, "str.format: replacement index %zu out of range", i);
            v = a->args[i];
        } else {
            size_t k;
            for (k = 0; k < a->n_kw; k++)
                if (strlen(a->kw_names[k]) == (size_t)(fe - f) && !memcmp(a->kw_names[k], f, (size_t)(fe - f))) break;
            if (k == a->n_kw) jinja_error(c, "str.format: no argument named '%.*s'", (int)(fe - f), f);
            v = a->kw_vals[k];
        }
        while (fe < close && (*fe == '.' || *fe == '[')) {
            const char *q = fe + 1, *qe = q;
            while (qe < close && *qe != '.' && *qe != '[' && *qe != ']' && *qe != '!' && *qe != ':') qe++;
            bool digits = qe > q && *q >= '0' && *q <= '9';
            if (*fe == '.') v = jinja_getattr(c, v, q, (size_t)(qe - q));
            else
                v = jinja_getitem(c, v,
                                  digits ? jinja_val_int(strtoll(q, NULL, 10)) : jinja_val_str(q, (size_t)(qe - q)));
            fe = *qe == ']' ? qe + 1 : qe;
        }
        bool repr = false;
        if (fe < close && *fe == '!') repr = fe + 1 < close && fe[1] == 'r', fe += 2;
        char fill = ' ', align = 0, type = 0;
        int width = 0, prec = -1;
        if (fe < close && *fe == ':') {
            const char *s = fe + 1;
            if (close - s >= 2 && strchr("<>^=", s[1])) fill = s[0], align = s[1], s += 2;
            else if (s < close && strchr("<>^=", *s)) align = *s++;
            if (s < close && *s == '0') fill = '0', align = align ? align : '=', s++;
            while (s < close && *s >= '0' && *s <= '9' && width < 10000) width = width * 10 + (*s++ - '0');
            if (s < close && *s == '.') {
                prec = 0;
                for (s++; s < close && *s >= '0' && *s <= '9' && prec < 100; s++) prec = prec * 10 + (*s - '0');
            }
            if (s < close) type = *s;
        }
        jinja_buf piece = {0};
        char num[400];
        if (type && strchr("xXob", type) && (v.kind == JV_INT || v.kind == JV_BOOL)) {
            unsigned long long x = (unsigned long long)(v.kind == JV_INT ? v.i : v.b);
            bool neg = v.kind == JV_INT && v.i < 0;
            if (neg) x = 0 - x;
            char digits[72];
            int k = 0;
            unsigned base = type == 'o' ? 8 : type == 'b' ? 2 : 16;
            do digits[k++] = "0123456789abcdef0123456789ABCDEF"[(x % base) + (type == 'X' ? 16 : 0)];
            while ((x /= base) && k < 70);
            if (neg) jinja_buf_addc(c, &piece, '-');
            while (k > 0) jinja_buf_addc(c, &piece, digits[--k]);
        } else if (type && strchr("fFeEgG%", type) && jinja_val_is_number(v)) {
            double d = jinja_val_as_double(v) * (type == '%' ? 100 : 1);
            char spec[16];
            snprintf(spec, sizeof spec, "%%.%d%c", prec < 0 ? 6 : prec, type == '%' ? 'f' : type);
            int n = snprintf(num, sizeof num, spec, d);
            jinja_buf_add(c, &piece, num, (size_t)n < sizeof num ? (size_t)n : sizeof num - 1);
            if (type == '%') jinja_buf_addc(c, &piece, '%');
        } else {
            jinja_val_str_append(c, &piece, v, repr);
            if (prec >= 0 && v.kind == JV_STR && piece.n > jinja_utf8_offset(piece.p, piece.n, (size_t)prec))
                piece.n = jinja_utf8_offset(piece.p, piece.n, (size_t)prec);
        }
        size_t len = piece.p ? jinja_utf8_len(piece.p, piece.n) : 0;
        if (!align) align = jinja_val_is_number(v) ? '>' : '<';
        size_t pad = (size_t)width > len ? (size_t)width - len : 0;
        size_t left = align == '>' || align == '=' ? pad : align == '^' ? pad / 2 : 0;
        for (size_t i = 0; i < left; i++) jinja_buf_addc(c, &b, fill);
        if (piece.p) jinja_buf_add(c, &b, piece.p, piece.n);
        for (size_t i = left; i < pad; i++) jinja_buf_addc(c, &b, fill);
        p = close + 1;
    }
    return b.p ? jinja_buf_value(&b) : jinja_val_str("", 0);
}

static jinja_value str_method(jinja_ctx *c, jinja_value s, const char *m, const jinja_args *a) {
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        jinja_value chars = jinja_arg(c, a, 0, "chars", jinja_val_none());
        char which = m[0] == 's' ? 'b' : m[0];
        if (chars.kind == JV_STR) return jinja_str_strip(s, chars.s.p, chars.s.n, which);
        return jinja_str_strip(s, NULL, 0, which);
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit"))
        return split(c, s, jinja_arg(c, a, 0, "sep", jinja_val_none()), int_arg(c, a, 1, "maxsplit", -1), m[0] == 'r');
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith"))
        return jinja_val_bool(affix(c, s, jinja_arg(c, a, 0, "prefix", jinja_val_none()), m[0] == 'e'));
    if (!strcmp(m, "replace")) {
        jinja_value old = str_arg(c, a, 0, "old", m), new = str_arg(c, a, 1, "new", m);
        int64_t count = int_arg(c, a, 2, "count", -1);
        jinja_buf b = {0};
        const char *p = s.s.p, *end = p + s.s.n;
        for (int64_t k = 0; count < 0 || k < count; k++) {
            jinja_step(c);
            if (!old.s.n) {  /* Python inserts new between every character */
                jinja_buf_add(c, &b, new.s.p, new.s.n);
                if (p >= end) break;
                uint32_t cp;
                size_t len = unicode_decode(p, (size_t)(end - p), &cp);
                jinja_buf_add(c, &b, p, len);
                p += len;
                continue;
            }
            const char *at = find(p, (size_t)(end - p), old.s.p, old.s.n, false);
            if (!at) break;
            jinja_buf_add(c, &b, p, (size_t)(at - p));
            jinja_buf_add(c, &b, new.s.p, new.s.n);
            p = at + old.s.n;
        }
        jinja_buf_add(c, &b, p, (size_t)(end - p));
        return jinja_buf_value(&b);
    }
    if (!strcmp(m, "lower") || !strcmp(m, "casefold")) return jinja_str_case(c, s, 'l');
    if (!strcmp(m, "upper")) return jinja_str_case(c, s, 'u');
    if (!strcmp(m, "title")) return jinja_str_case(c, s, 't');
    if (!strcmp(m, "capitalize")) return jinja_str_case(c, s, 'c');
    if (!strcmp(m, "format")) return format(c, s, a);
    if (!strcmp(m, "join")) {
        jinja_list *items = jinja_iterate(c, jinja_arg(c, a, 0, "iterable", jinja_val_none()));
        jinja_buf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            if (items->v[i].kind != JV_STR)
                jinja_error(c, "sequence item %zu: expected str instance, %s found", i,
                            jinja_val_type_name(items->v[i]));
            if (i) jinja_buf_add(c, &b, s.s.p, s.s.n);
            jinja_buf_add(c, &b, items->v[i].s.p, items->v[i].s.n);
        }
        return b.p ? jinja_buf_value(&b) : jinja_val_str("", 0);
    }
    if (!strcmp(m, "count")) {
        jinja_value sub = str_arg(c, a, 0, "x", m);
        if (!sub.s.n) return jinja_val_int((int64_t)jinja_utf8_len(s.s.p, s.s.n) + 1);
        int64_t n = 0;
        for (const char *p = s.s.p, *at; (at = find(p, s.s.n - (size_t)(p - s.s.p), sub.s.p, sub.s.n, false));
             p = at + sub.s.n)
            n++;
        return jinja_val_int(n);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex")) {
        jinja_value sub = str_arg(c, a, 0, "sub", m);
        const char *at = find(s.s.p, s.s.n, sub.s.p, sub.s.n, m[0] == 'r');
        if (!at && m[m[0] == 'r'] == 'i') jinja_error(c, "substring not found");
        return jinja_val_int(at ? (int64_t)jinja_utf8_len(s.s.p, (size_t)(at - s.s.p)) : -1);
    }
    if (!strncmp(m, "is", 2)) {
        if (!s.s.n) return jinja_val_bool(false);
        if (!rx_letter) rx_letter = compile_property("\\p{L}"), rx_number = compile_property("\\p{N}");
        bool any_cased = false, ok = true;
        for (size_t i = 0; i < s.s.n && ok;) {
            uint32_t cp;
            i += unicode_decode(s.s.p + i, s.s.n - i, &cp);
            char u[4];
            size_t ul = unicode_encode(cp, u);
            jinja_value ch = jinja_val_str(u, ul);
            bool lower = !jinja_val_equal(jinja_str_case(c, ch, 'u'), ch),
                 upper = !jinja_val_equal(jinja_str_case(c, ch, 'l'), ch);
            any_cased = any_cased || lower || upper;
            if (!strcmp(m, "isdigit")) ok = cp >= '0' && cp <= '9';
            else if (!strcmp(m, "isalpha")) ok = has_property(rx_letter, u, ul);
            else if (!strcmp(m, "isalnum")) ok = has_property(rx_letter, u, ul) || has_property(rx_number, u, ul);
            else if (!strcmp(m, "isspace")) ok = jinja_is_space(cp);
            else if (!strcmp(m, "islower")) ok = !upper;
            else ok = !lower;
        }
        if (!strcmp(m, "islower") || !strcmp(m, "isupper")) ok = ok && any_cased;
        return jinja_val_bool(ok);
    }
    if (!strcmp(m, "splitlines")) {
        jinja_value out = jinja_val_list(c, 0);
        size_t st = 0;
        for (size_t i = 0; i < s.s.n; i++)
            if (s.s.p[i] == '\n' || s.s.p[i] == '\r') {
                jinja_val_list_push(c, out.l, jinja_val_str(s.s.p + st, i - st));
                if (s.s.p[i] == '\r' && i + 1 < s.s.n && s.s.p[i + 1] == '\n') i++;
                st = i + 1;
            }
        if (st < s.s.n) jinja_val_list_push(c, out.l, jinja_val_str(s.s.p + st, s.s.n - st));
        return out;
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        jinja_value x = str_arg(c, a, 0, "x", m);
        if (!affix(c, s, x, m[6] == 's')) return s;
        return m[6] == 's' ? jinja_val_str(s.s.p, s.s.n - x.s.n) : jinja_val_str(s.s.p + x.s.n, s.s.n - x.s.n);
    }
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
        jinja_value sep = str_arg(c, a, 0, "sep", m);
        if (!sep.s.n) jinja_error(c, "empty separator");
        const char *at = find(s.s.p, s.s.n, sep.s.p, sep.s.n, m[0] == 'r');
        jinja_value out = jinja_val_list(c, 3);
        out.l->tuple = true;
        if (!at) {
            jinja_value e = jinja_val_str("", 0);
            jinja_val_list_push(c, out.l, m[0] == 'r' ? e : s);
            jinja_val_list_push(c, out.l, e);
            jinja_val_list_push(c, out.l, m[0] == 'r' ? s : e);
            return out;
        }
        jinja_val_list_push(c, out.l, jinja_val_str(s.s.p, (size_t)(at - s.s.p)));
        jinja_val_list_push(c, out.l, sep);
        jinja_val_list_push(c, out.l, jinja_val_str(at + sep.s.n, s.s.n - (size_t)(at - s.s.p) - sep.s.n));
        return out;
    }
    /* center, ljust, rjust, zfill */
    int64_t width = int_arg(c, a, 0, "width", 0);
    if (width > 100000) jinja_error(c, "str.%s width above 100000", m);
    jinja_value fillv = jinja_arg(c, a, 1, "fillchar", jinja_val_cstr(" "));
    char fill = fillv.kind == JV_STR && fillv.s.n == 1 ? fillv.s.p[0] : ' ';
    if (!strcmp(m, "zfill")) fill = '0';
    size_t len = jinja_utf8_len(s.s.p, s.s.n), pad = (int64_t)len < width ? (size_t)width - len : 0;
    size_t left = !strcmp(m, "ljust") ? 0 : !strcmp(m, "center") ? pad / 2 + (pad & (size_t)width & 1) : pad;
    jinja_buf b = {0};
    size_t sign = !strcmp(m, "zfill") && s.s.n && (s.s.p[0] == '-' || s.s.p[0] == '+');
    jinja_buf_add(c, &b, s.s.p, sign);
    for (size_t i = 0; i < left; i++) jinja_buf_addc(c, &b, fill);
    jinja_buf_add(c, &b, s.s.p + sign, s.s.n - sign);
    for (size_t i = left; i < pad; i++) jinja_buf_addc(c, &b, fill);
    return b.p ? jinja_buf_value(&b) : jinja_val_str("", 0);
}

jinja_value jinja_method_call(jinja_ctx *c, jinja_value self, const char *m, const jinja_args *a) {
    jinja_step(c);
    if (self.kind == JV_STR) return str_method(c, self, m, a);
    if (self.kind == JV_DICT) {
        if (!strcmp(m, "get")) {
            jinja_value k = jinja_arg(c, a, 0, "key", jinja_val_none());
            jinja_value *v = k.kind != JV_LIST && k.kind != JV_DICT ? jinja_val_dict_find_key(self.d, k) : NULL;
            return v ? *v : jinja_arg(c, a, 1, "default", jinja_val_none());
        }
        jinja_value out = jinja_val_list(c, self.d->n);
        for (size_t i = 0; i < self.d->n; i++) {
            jinja_value k = jinja_val_entry_key(&self.d->e[i]);
            if (!strcmp(m, "keys")) {
                jinja_val_list_push(c, out.l, k);
            } else if (!strcmp(m, "values")) {
                jinja_val_list_push(c, out.l, self.d->e[i].v);
            } else {
                jinja_value pair = jinja_val_list(c, 2);
                pair.l->tuple = true;
                jinja_val_list_push(c, pair.l, k);
                jinja_val_list_push(c, pair.l, self.d->e[i].v);
                jinja_val_list_push(c, out.l, pair);
            }
        }
        return out;
    }
    if (self.kind == JV_LIST) {
        jinja_list *l = self.l;
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            jinja_value x = jinja_arg(c, a, 0, "x", jinja_val_none());
            int64_t n = 0;
            for (size_t i = 0; i < l->n; i++)
                if (jinja_val_equal(l->v[i], x)) {
                    if (m[0] == 'i') return jinja_val_int((int64_t)i);
                    n++;
                }
            if (m[0] == 'i') jinja_error(c, "list.index(x): x not in list");
            return jinja_val_int(n);
        }
        if (l->frozen)
            jinja_error(c, "access to attribute '%s' of 'list' object is unsafe (the list is the caller's)", m);
        if (!strcmp(m, "append")) {
            jinja_val_list_push(c, l, jinja_arg(c, a, 0, "object", jinja_val_none()));
            return jinja_val_none();
        }
        if (!strcmp(m, "extend")) {
            jinja_list *items = jinja_iterate(c, jinja_arg(c, a, 0, "iterable", jinja_val_none()));
            for (size_t i = 0, n = items->n; i < n; i++) jinja_val_list_push(c, l, items->v[i]);
            return jinja_val_none();
        }
        if (!strcmp(m, "insert")) {
            int64_t i = int_arg(c, a, 0, "index", 0), n = (int64_t)l->n;
            if (i < 0) i = i + n < 0 ? 0 : i + n;
            if (i > n) i = n;
            jinja_val_list_push(c, l, jinja_val_none());
            memmove(l->v + i + 1, l->v + i, (size_t)(n - i) * sizeof *l->v);
            l->v[i] = jinja_arg(c, a, 1, "object", jinja_val_none());
            return jinja_val_none();
        }
        int64_t i = int_arg(c, a, 0, "index", -1), n = (int64_t)l->n;
        if (!n) jinja_error(c, "pop from empty list");
        if (i < 0) i += n;
        if (i < 0 || i >= n) jinja_error(c, "pop index out of range");
        jinja_value v = l->v[i];
        memmove(l->v + i, l->v + i + 1, (size_t)(n - i - 1) * sizeof *l->v);
        l->n--;
        return v;
    }
    jinja_error(c, "'%s' object has no method '%s'", jinja_val_type_name(self), m);
}

/* --- globals -------------------------------------------------------------------------------------- */

static const char *const globals[] = {"range", "namespace", "dict", "raise_exception", "strftime_now", NULL};

bool jinja_global_exists(const char *name, size_t n) { return in_names(globals, name, n); }

static jinja_value strftime_now(jinja_ctx *c, jinja_value fmt) {
    if (fmt.kind != JV_STR) jinja_error(c, "strftime_now needs a format string, not %s", jinja_val_type_name(fmt));
    if (fmt.s.n > 256) jinja_error(c, "strftime_now's format longer than 256 bytes");
    int64_t now = c->lim.now;
    const char *sde = now < 0 ? getenv("SOURCE_DATE_EPOCH") : NULL;
    struct tm tm;
    time_t t;
    if (now >= 0 || (sde && *sde)) {
        t = now >= 0 ? (time_t)now : (time_t)strtoll(sde, NULL, 10);
        gmtime_r(&t, &tm);
    } else {
        t = time(NULL);
        localtime_r(&t, &tm);
    }
    char f[260], out[1024];
    memcpy(f, fmt.s.p, fmt.s.n);
    f[fmt.s.n] = 0;
    size_t n = strftime(out, sizeof out, f, &tm);
    return jinja_val_strdup(c, out, n);
}

jinja_value jinja_global_call(jinja_ctx *c, const char *name, const jinja_args *a) {
    if (!strcmp(name, "range")) {
        if (a->n_kw || a->n_args < 1 || a->n_args > 3) jinja_error(c, "range takes 1 to 3 integer arguments");
        int64_t v[3] = {0, 0, 1};
        for (size_t i = 0; i < a->n_args; i++) {
            jinja_value x = a->args[i];
            if (x.kind == JV_BOOL) x = jinja_val_int(x.b);
            if (x.kind != JV_INT) jinja_error(c, "range() needs integers, not %s", jinja_val_type_name(x));
            v[a->n_args == 1 ? 1 : i] = x.i;
        }
        if (!v[2]) jinja_error(c, "range() arg 3 must not be zero");
        jinja_value out = jinja_val_list(c, 0);
        for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
            jinja_step(c);
            jinja_val_list_push(c, out.l, jinja_val_int(i));
            if ((v[2] > 0 && i > INT64_MAX - v[2]) || (v[2] < 0 && i < INT64_MIN - v[2])) break;
        }
        return out;
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jinja_value d = jinja_val_dict(c);
        for (size_t i = 0; i < a->n_args; i++) {
            if (a->args[i].kind != JV_DICT) jinja_error(c, "%s() takes keyword arguments or a mapping", name);
            for (size_t k = 0; k < a->args[i].d->n; k++)
                jinja_val_dict_set_key(c, d.d, jinja_val_entry_key(&a->args[i].d->e[k]), a->args[i].d->e[k].v);
        }
        for (size_t k = 0; k < a->n_kw; k++)
            jinja_val_dict_set(c, d.d, a->kw_names[k], strlen(a->kw_names[k]), a->kw_vals[k]);
        if (name[0] == 'n') d.kind = JV_NS;
        return d;
    }
    if (!strcmp(name, "raise_exception")) {
        jinja_value msg = jinja_val_to_str(c, jinja_arg(c, a, 0, "message", jinja_val_cstr("(no message)")));
        jinja_error(c, "template raised an exception: %.*s", (int)msg.s.n, msg.s.p);
    }
    if (!strcmp(name, "strftime_now")) return strftime_now(c, jinja_arg(c, a, 0, "format", jinja_val_none()));
    jinja_error(c, "'%s' is undefined", name);
}
