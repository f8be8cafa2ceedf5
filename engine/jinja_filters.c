/* Jinja filters and tests, with jinja2's defaults and argument names (x|default('', true),
 * x|tojson(indent=2), xs|selectattr('role', 'equalto', 'user') ...); tojson is transformers'
 * (no HTML escaping, ensure_ascii off, indent / separators / sort_keys as json.dumps). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jinja_internal.h"
#include "engine/unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

jinja_value jinja_arg(jinja_ctx *c, const jinja_args *a, size_t i, const char *name, jinja_value def) {
    (void)c;
    if (i < a->n_args) return a->args[i];
    for (size_t k = 0; k < a->n_kw; k++)
        if (!strcmp(a->kw_names[k], name)) return a->kw_vals[k];
    return def;
}

void jinja_args_check(jinja_ctx *c, const jinja_args *a, const char *what, const char *const *names) {
    size_t n = 0;
    while (names[n]) n++;
    if (a->n_args > n) jinja_error(c, "%s takes at most %zu argument(s), %zu given", what, n, a->n_args);
    for (size_t k = 0; k < a->n_kw; k++) {
        size_t i;
        for (i = 0; i < n; i++)
            if (!strcmp(names[i], a->kw_names[k])) break;
        if (i == n) jinja_error(c, "%s got an unexpected keyword argument '%s'", what, a->kw_names[k]);
        if (i < a->n_args) jinja_error(c, "%s got multiple values for argument '%s'", what, a->kw_names[k]);
    }
}

static jinja_value need_str(jinja_ctx *c, jinja_value v, const char *what) {
    if (v.kind != JV_STR) jinja_error(c, "%s needs a string, not %s", what, jinja_val_type_name(v));
    return v;
}

static int64_t need_int(jinja_ctx *c, jinja_value v, const char *what) {
    if (v.kind == JV_BOOL) return v.b;
    if (v.kind != JV_INT) jinja_error(c, "%s needs an integer, not %s", what, jinja_val_type_name(v));
    return v.i;
}

static size_t length(jinja_ctx *c, jinja_value v) {
    switch (v.kind) {
    case JV_UNDEF: return 0;
    case JV_STR: return jinja_utf8_len(v.s.p, v.s.n);
    case JV_LIST:
        if (v.l->lazy) jinja_error(c, "object of type 'generator' has no len() (add |list before |length)");
        return v.l->n;
    case JV_DICT: return v.d->n;
    default: jinja_error(c, "object of type '%s' has no len()", jinja_val_type_name(v));
    }
}

/* An item's attribute by jinja2's dotted path ("a.b", "0"), as map/sort/selectattr take it. */
static jinja_value attr_path(jinja_ctx *c, jinja_value v, jinja_value path) {
    if (path.kind == JV_INT) return jinja_getitem(c, v, path);
    need_str(c, path, "attribute");
    const char *p = path.s.p, *end = p + path.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot) dot = end;
        size_t n = (size_t)(dot - p);
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++) digits = digits && p[i] >= '0' && p[i] <= '9';
        v = digits ? jinja_getitem(c, v, jinja_val_int(strtoll(p, NULL, 10)))
                   : jinja_getitem(c, v, jinja_val_str(p, n));
        p = dot + 1;
    }
    return v;
}

/* --- sorting (stable, like Python's) ----------------------------------------------------------- */

typedef struct { jinja_value key, item; } sort_pair;

static jinja_value sort_key(jinja_ctx *c, jinja_value v, bool case_sensitive) {
    return v.kind == JV_STR && !case_sensitive ? jinja_str_case(c, v, 'l') : v;
}

static void merge_sort(jinja_ctx *c, sort_pair *v, sort_pair *tmp, size_t n, bool reverse) {
    if (n < 2) return;
    size_t h = n / 2;
    merge_sort(c, v, tmp, h, reverse);
    merge_sort(c, v + h, tmp, n - h, reverse);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        jinja_step(c);
        int r = jinja_val_compare(c, v[j].key, v[i].key);
        if (reverse ? r > 0 : r < 0) tmp[k++] = v[j++];
        else tmp[k++] = v[i++];
    }
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static void sort_pairs(jinja_ctx *c, sort_pair *v, size_t n, bool reverse) {
    sort_pair *tmp = jinja_alloc(c->arena, (n + 1) * sizeof *tmp);
    merge_sort(c, v, tmp, n, reverse);
}

/* --- printf-style formatting ("%s" % x, x|format) ------------------------------------------------ */

static jinja_value percent_format(jinja_ctx *c, jinja_value fmt, jinja_value *args, size_t n) {
    jinja_buf b = {0};
    size_t used = 0;
    for (size_t i = 0; i < fmt.s.n; i++) {
        char ch = fmt.s.p[i];
        if (ch != '%') {
            jinja_buf_addc(c, &b, ch);
            continue;
        }
        char spec[32] = "%";
        size_t k = 1;
        i++;
        while (i < fmt.s.n && strchr("-+ #0123456789.", fmt.s.p[i]) && k < sizeof spec - 4) spec[k++] = fmt.s.p[i++];
        /* a width or precision is at most 1000: printf would pad gigabytes for a template */
        for (size_t q = 1, run = 0; q <= k; q++) {
            if (q < k && spec[q] >= '0' && spec[q] <= '9' && (spec[q] != '0' || run)) {
                run = run * 10 + (size_t)(spec[q] - '0');
                if (run > 1000) jinja_error(c, "format width or precision above 1000");
            } else {
                run = 0;
            }
        }
        if (i >= fmt.s.n) jinja_error(c, "incomplete format: '%%' at the end of the string");
        char conv = fmt.s.p[i];
        if (conv == '%') {
            jinja_buf_addc(c, &b, '%');
            continue;
        }
        if (used >= n) jinja_error(c, "not enough arguments for format string");
        jinja_value v = args[used++];
        char out[2600];  /* width and precision at most 1000 each; %f of 1e308 has 309 digits */
        int len;
        if (conv == 's' || conv == 'r') {
            jinja_buf s = {0};
            jinja_val_str_append(c, &s, v, conv == 'r');
            spec[k++] = 's', spec[k] = 0;
            if (k == 2) {
                jinja_buf_add(c, &b, s.p ? s.p : "", s.n);
                continue;
            }
            len = snprintf(out, sizeof out, spec, s.p ? s.p : "");
        } else if (strchr("dixXo", conv)) {
            if (!jinja_val_is_number(v))
                jinja_error(c, "%%%c format: a number is required, not %s", conv, jinja_val_type_name(v));
            long long x = v.kind == JV_FLOAT ? (long long)v.f : v.kind == JV_INT ? (long long)v.i : v.b;
            spec[k++] = 'l', spec[k++] = 'l', spec[k++] = conv == 'i' ? 'd' : conv, spec[k] = 0;
            len = snprintf(out, sizeof out, spec, x);
        } else if (strchr("feEgG", conv)) {
            if (!jinja_val_is_number(v))
                jinja_error(c, "%%%c format: a number is required, not %s", conv, jinja_val_type_name(v));
            spec[k++] = conv, spec[k] = 0;
            len = snprintf(out, sizeof out, spec, jinja_val_as_double(v));
        } else {
            jinja_error(c, "unsupported format character '%c'", conv);
        }
        if (len < 0) len = 0;
        jinja_buf_add(c, &b, out, (size_t)len < sizeof out ? (size_t)len : sizeof out - 1);
    }
    if (used < n) jinja_error(c, "not all arguments converted during string formatting");
    return b.p ? jinja_buf_value(&b) : jinja_val_str("", 0);
}

/* --- filters --------------------------------------------------------------------------------------- */

static jinja_value do_tojson(jinja_ctx *c, jinja_value v, const jinja_args *a) {
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    jinja_args_check(c, a, "tojson", names);
    jinja_value ind = jinja_arg(c, a, 1, "indent", jinja_val_none()),
                sep = jinja_arg(c, a, 2, "separators", jinja_val_none());
    /* an int is that many spaces (Python: a negative one is none), a string is used as it is */
    const char *indent = NULL;
    if (ind.kind == JV_STR) {
        indent = jinja_strndup(c->arena, ind.s.p, ind.s.n);
    } else if (ind.kind != JV_NONE) {
        int64_t n = need_int(c, ind, "tojson's indent");
        if (n > 64) jinja_error(c, "tojson's indent above 64");
        char *sp = jinja_alloc(c->arena, 65);
        memset(sp, ' ', n > 0 ? (size_t)n : 0);
        indent = sp;
    }
    const char *item_sep = indent ? "," : ", ", *key_sep = ": ";
    if (sep.kind == JV_LIST) {
        if (sep.l->n != 2 || sep.l->v[0].kind != JV_STR || sep.l->v[1].kind != JV_STR)
            jinja_error(c, "tojson's separators must be two strings");
        item_sep = jinja_strndup(c->arena, sep.l->v[0].s.p, sep.l->v[0].s.n);
        key_sep = jinja_strndup(c->arena, sep.l->v[1].s.p, sep.l->v[1].s.n);
    }
    jinja_json_opts o = {indent, item_sep, key_sep,
                         jinja_val_truthy(jinja_arg(c, a, 3, "sort_keys", jinja_val_bool(false))),
                         jinja_val_truthy(jinja_arg(c, a, 0, "ensure_ascii", jinja_val_bool(false)))};
    jinja_buf b = {0};
    jinja_val_json_append(c, &b, v, &o, 0);
    return jinja_buf_value(&b);
}

/* Python's str.splitlines(): the pieces between line boundaries, without them. */
static jinja_list *split_lines(jinja_ctx *c, jinja_value s) {
    jinja_list *out = jinja_val_list(c, 0).l;
    size_t start = 0, i = 0;
    while (i < s.s.n) {
        uint32_t cp;
        size_t k = unicode_decode(s.s.p + i, s.s.n - i, &cp);
        bool nl = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
                  cp == 0x2028 || cp == 0x2029;
        if (nl) {
            jinja_val_list_push(c, out, jinja_val_str(s.s.p + start, i - start));
            if (cp == '\r' && i + 1 < s.s.n && s.s.p[i + 1] == '\n') k++;
            start = i + k;
        }
        i += k;
    }
    if (start < s.s.n) jinja_val_list_push(c, out, jinja_val_str(s.s.p + start, s.s.n - start));
    return out;
}

static jinja_value do_indent(jinja_ctx *c, jinja_value v, const jinja_args *a) {
    static const char *const names[] = {"width", "first", "blank", NULL};
    jinja_args_check(c, a, "indent", names);
    jinja_value w = jinja_arg(c, a, 0, "width", jinja_val_int(4));
    jinja_buf ind = {0};
    if (w.kind == JV_STR) jinja_buf_add(c, &ind, w.s.p, w.s.n);
    else for (int64_t i = 0, n = need_int(c, w, "indent's width"); i < n && i < 256; i++) jinja_buf_addc(c, &ind, ' ');
    bool first = jinja_val_truthy(jinja_arg(c, a, 1, "first", jinja_val_bool(false)));
    bool blank = jinja_val_truthy(jinja_arg(c, a, 2, "blank", jinja_val_bool(false)));
    jinja_buf s = {0};
    jinja_val_str_append(c, &s, v, false);
    jinja_buf_addc(c, &s, '\n');  /* jinja2 adds it so that splitlines keeps a last empty line */
    jinja_list *lines = split_lines(c, jinja_buf_value(&s));
    jinja_buf b = {0};
    if (first) jinja_buf_add(c, &b, ind.p ? ind.p : "", ind.n);
    for (size_t i = 0; i < lines->n; i++) {
        jinja_value ln = lines->v[i];
        if (i) {
            jinja_buf_addc(c, &b, '\n');
            if (blank || ln.s.n) jinja_buf_add(c, &b, ind.p ? ind.p : "", ind.n);
        }
        jinja_buf_add(c, &b, ln.s.p, ln.s.n);
    }
    return b.p ? jinja_buf_value(&b) : jinja_val_str("", 0);
}

static jinja_value do_int(jinja_ctx *c, jinja_value v, const jinja_args *a) {
    jinja_value def = jinja_arg(c, a, 0, "default", jinja_val_int(0));
    if (v.kind == JV_UNDEF) jinja_error(c, "%.*s", (int)v.s.n, v.s.p);  /* int(Undefined) raises */
    int base = (int)need_int(c, jinja_arg(c, a, 1, "base", jinja_val_int(10)), "int's base");
    if (v.kind == JV_INT) return v;
    if (v.kind == JV_BOOL) return jinja_val_int(v.b);
    if (v.kind == JV_FLOAT) return isfinite(v.f) && fabs(v.f) < 9.2e18 ? jinja_val_int((int64_t)v.f) : def;
    if (v.kind == JV_STR) {
        char buf[128];
        jinja_value t = jinja_str_strip(v, NULL, 0, 'b');
        if (t.s.n == 0 || t.s.n >= sizeof buf) return def;
        size_t k = 0;
        for (size_t i = 0; i < t.s.n; i++)
            if (t.s.p[i] != '_') buf[k++] = t.s.p[i];
        buf[k] = 0;
        char *end;
        errno = 0;
        long long x = strtoll(buf, &end, base < 2 || base > 36 ? 10 : base);
        if (!*end && !errno) return jinja_val_int(x);
        double d = strtod(buf, &end);
        if (!*end && isfinite(d) && fabs(d) < 9.2e18) return jinja_val_int((int64_t)d);
    }
    return def;
}

static jinja_value do_float(jinja_ctx *c, jinja_value v, const jinja_args *a) {
    jinja_value def = jinja_arg(c, a, 0, "default", jinja_val_float(0));
    if (v.kind == JV_UNDEF) jinja_error(c, "%.*s", (int)v.s.n, v.s.p);  /* float(Undefined) raises */
    if (jinja_val_is_number(v)) return jinja_val_float(jinja_val_as_double(v));
    if (v.kind == JV_STR) {
        char buf[128];
        jinja_value t = jinja_str_strip(v, NULL, 0, 'b');
        if (t.s.n == 0 || t.s.n >= sizeof buf) return def;
        memcpy(buf, t.s.p, t.s.n);
        buf[t.s.n] = 0;
        char *end;
        double d = strtod(buf, &end);
        if (!*end) return jinja_val_float(d);
    }
    return def;
}

/* select / reject / selectattr / rejectattr: keep items whose test (or truth) is want. */
static jinja_value do_select(jinja_ctx *c, jinja_value v, const jinja_args *a, bool by_attr, bool want) {
    /* jinja2 iterates only a true value: none|selectattr(...) is empty */
    jinja_list *items = jinja_iterate(c, jinja_val_truthy(v) ? v : jinja_val_undef(c, "empty"));
    size_t first = by_attr ? 1 : 0;
    if (by_attr && a->n_args < 1) jinja_error(c, "selectattr/rejectattr need an attribute name");
    jinja_value out = jinja_val_list(c, 0);
    jinja_args rest = {a->args + (a->n_args > first + 1 ? first + 1 : a->n_args),
                       a->n_args > first + 1 ? a->n_args - first - 1 : 0, a->kw_names, a->kw_vals, a->n_kw};
    for (size_t i = 0; i < items->n; i++) {
        jinja_step(c);
        jinja_value x = by_attr ? attr_path(c, items->v[i], a->args[0]) : items->v[i];
        bool ok;
        if (a->n_args > first) {
            jinja_value t = need_str(c, a->args[first], "select's test name");
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)t.s.n, t.s.p);
            ok = jinja_test(c, name, x, &rest);
        } else {
            ok = jinja_val_truthy(x);
        }
        if (ok == want) jinja_val_list_push(c, out.l, items->v[i]);
    }
    return out;
}

static jinja_value do_map(jinja_ctx *c, jinja_value v, const jinja_args *a) {
    jinja_list *items = jinja_iterate(c, jinja_val_truthy(v) ? v : jinja_val_undef(c, "empty"));
    jinja_value out = jinja_val_list(c, items->n);
    jinja_value attr = jinja_arg(c, a, (size_t)-1, "attribute", jinja_val_undef(c, "no attribute"));
    for (size_t i = 0; i < items->n; i++) {
        jinja_step(c);
        jinja_value x = items->v[i];
        if (attr.kind != JV_UNDEF) {
            x = attr_path(c, x, attr);
            if (x.kind == JV_UNDEF) x = jinja_arg(c, a, (size_t)-1, "default", x);
        } else {
            if (a->n_args < 1) jinja_error(c, "map needs a filter name or attribute=");
            jinja_value f = need_str(c, a->args[0], "map's filter name");
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)f.s.n, f.s.p);
            jinja_args rest = {a->args + 1, a->n_args - 1, a->kw_names, a->kw_vals, a->n_kw};
            x = jinja_filter(c, name, x, &rest);
        }
        jinja_val_list_push(c, out.l, x);
    }
    return out;
}

static jinja_value do_sort(jinja_ctx *c, jinja_value v, const jinja_args *a, bool dictsort) {
    bool cs = jinja_val_truthy(jinja_arg(c, a, dictsort ? 0 : 1, "case_sensitive", jinja_val_bool(false)));
    bool reverse = jinja_val_truthy(jinja_arg(c, a, dictsort ? 2 : 0, "reverse", jinja_val_bool(false)));
    jinja_value attr = dictsort ? jinja_val_none() : jinja_arg(c, a, 2, "attribute", jinja_val_none());
    bool by_value = false;
    if (dictsort) {
        jinja_value by = jinja_arg(c, a, 1, "by", jinja_val_cstr("key"));
        by_value = by.kind == JV_STR && by.s.n == 5 && !memcmp(by.s.p, "value", 5);
        if (v.kind != JV_DICT) jinja_error(c, "dictsort needs a mapping, not %s", jinja_val_type_name(v));
    }
    jinja_list *items = jinja_iterate(c, v);
    sort_pair *p = jinja_alloc(c->arena, (items->n + 1) * sizeof *p);
    for (size_t i = 0; i < items->n; i++) {
        jinja_value item = items->v[i], key = item;
        if (dictsort) {
            jinja_value pair = jinja_val_list(c, 2);
            pair.l->tuple = true;
            jinja_val_list_push(c, pair.l, item);
            jinja_val_list_push(c, pair.l, v.d->e[i].v);
            key = pair.l->v[by_value ? 1 : 0];
            item = pair;
        } else if (attr.kind != JV_NONE) {
            key = attr_path(c, item, attr);
        }
        p[i] = (sort_pair){sort_key(c, key, cs), item};
    }
    sort_pairs(c, p, items->n, reverse);
    jinja_value out = jinja_val_list(c, items->n);
    for (size_t i = 0; i < items->n; i++) jinja_val_list_push(c, out.l, p[i].item);
    return out;
}

static jinja_value do_join(jinja_ctx *c, jinja_value v, const jinja_args *a) {
    jinja_value sep = jinja_arg(c, a, 0, "d", jinja_val_str("", 0)),
                attr = jinja_arg(c, a, 1, "attribute", jinja_val_none());
    jinja_list *items = jinja_iterate(c, v);
    jinja_buf b = {0};
    for (size_t i = 0; i < items->n; i++) {
        if (i) jinja_val_str_append(c, &b, sep, false);
        jinja_val_str_append(c, &b, attr.kind == JV_NONE ? items->v[i] : attr_path(c, items->v[i], attr), false);
    }
    return b.p ? jinja_buf_value(&b) : jinja_val_str("", 0);
}

static jinja_value do_minmax(jinja_ctx *c, jinja_value v, const jinja_args *a, bool max) {
    bool cs = jinja_val_truthy(jinja_arg(c, a, 0, "case_sensitive", jinja_val_bool(false)));
    jinja_value attr = jinja_arg(c, a, 1, "attribute", jinja_val_none());
    jinja_list *items = jinja_iterate(c, v);
    if (!items->n) return jinja_val_undef(c, "No aggregated item, sequence was empty.");
    size_t best = 0;
    jinja_value bk = sort_key(c, attr.kind == JV_NONE ? items->v[0] : attr_path(c, items->v[0], attr), cs);
    for (size_t i = 1; i < items->n; i++) {
        jinja_value k = sort_key(c, attr.kind == JV_NONE ? items->v[i] : attr_path(c, items->v[i], attr), cs);
        int r = jinja_val_compare(c, k, bk);
        if (max ? r > 0 : r < 0) best = i, bk = k;
    }
    return items->v[best];
}

static jinja_value do_unique(jinja_ctx *c, jinja_value v, const jinja_args *a) {
    bool cs = jinja_val_truthy(jinja_arg(c, a, 0, "case_sensitive", jinja_val_bool(false)));
    jinja_value attr = jinja_arg(c, a, 1, "attribute", jinja_val_none());
    jinja_list *items = jinja_iterate(c, v);
    jinja_value out = jinja_val_list(c, 0), seen = jinja_val_list(c, 0);
    for (size_t i = 0; i < items->n; i++) {
        jinja_value k = sort_key(c, attr.kind == JV_NONE ? items->v[i] : attr_path(c, items->v[i], attr), cs);
        bool dup = false;
        for (size_t j = 0; j < seen.l->n && !dup; j++) {
            jinja_step(c);
            dup = jinja_val_equal(seen.l->v[j], k);
        }
        if (dup) continue;
        jinja_val_list_push(c, seen.l, k);
        jinja_val_list_push(c, out.l, items->v[i]);
    }
    return out;
}

static jinja_value do_round(jinja_ctx *c, jinja_value v, const jinja_args *a) {
    int64_t prec = need_int(c, jinja_arg(c, a, 0, "precision", jinja_val_int(0)), "round's precision");
    jinja_value m = jinja_arg(c, a, 1, "method", jinja_val_cstr("common"));
    if (!jinja_val_is_number(v)) jinja_error(c, "round needs a number, not %s", jinja_val_type_name(v));
    if (prec < -300 || prec > 300) jinja_error(c, "round's precision out of range");
    if (v.kind != JV_FLOAT && (m.s.n == 6 && !memcmp(m.s.p, "common", 6)) && prec >= 0)
        return jinja_val_int(v.kind == JV_INT ? v.i : v.b);
    double x = jinja_val_as_double(v), p = pow(10, (double)prec), r;
    if (m.kind == JV_STR && m.s.n == 4 && !memcmp(m.s.p, "ceil", 4)) r = ceil(x * p) / p;
    else if (m.kind == JV_STR && m.s.n == 5 && !memcmp(m.s.p, "floor", 5)) r = floor(x * p) / p;
    else if (m.kind == JV_STR && m.s.n == 6 && !memcmp(m.s.p, "common", 6)) {
        /* Python's round() rounds the exact binary value, half to even: so does printf */
        if (prec >= 0 && isfinite(x)) {
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)(prec > 300 ? 300 : prec), x);
            r = strtod(buf, NULL);
        } else {
            double y = x * p, fl = floor(y), diff = y - fl;
            r = (diff > 0.5 ? fl + 1 : diff < 0.5 ? fl : (fmod(fl, 2) == 0 ? fl : fl + 1)) / p;
        }
    } else {
        jinja_error(c, "round's method must be common, ceil or floor");
    }
    return jinja_val_float(r);
}

static jinja_value do_batch(jinja_ctx *c, jinja_value v, const jinja_args *a) {
    int64_t n = need_int(c, jinja_arg(c, a, 0, "linecount", jinja_val_undef(c, "batch needs a size")), "batch's size");
    if (n <= 0) jinja_error(c, "batch's size must be positive");
    jinja_value fill = jinja_arg(c, a, 1, "fill_with", jinja_val_none());
    bool pad = a->n_args > 1 || a->n_kw > 0;
    jinja_list *items = jinja_iterate(c, v);
    jinja_value out = jinja_val_list(c, 0), cur = jinja_val_list(c, 0);
    for (size_t i = 0; i < items->n; i++) {
        jinja_val_list_push(c, cur.l, items->v[i]);
        if ((int64_t)cur.l->n == n) jinja_val_list_push(c, out.l, cur), cur = jinja_val_list(c, 0);
    }
    if (cur.l->n) {
        while (pad && (int64_t)cur.l->n < n) jinja_val_list_push(c, cur.l, fill);
        jinja_val_list_push(c, out.l, cur);
    }
    return out;
}

static jinja_value do_center(jinja_ctx *c, jinja_value s, int64_t width) {
    size_t len = jinja_utf8_len(s.s.p, s.s.n);
    if (width > 100000) jinja_error(c, "center's width above 100000");
    if ((int64_t)len >= width) return s;
    size_t total = (size_t)width - len, left = total / 2 + (total & (size_t)width & 1);
    jinja_buf b = {0};
    for (size_t i = 0; i < left; i++) jinja_buf_addc(c, &b, ' ');
    jinja_buf_add(c, &b, s.s.p, s.s.n);
    for (size_t i = 0; i < total - left; i++) jinja_buf_addc(c, &b, ' ');
    return jinja_buf_value(&b);
}

jinja_value jinja_escape(jinja_ctx *c, jinja_value s) {
    jinja_buf b = {0};
    for (size_t i = 0; i < s.s.n; i++) {
        switch (s.s.p[i]) {
        case '&': jinja_buf_add(c, &b, "&amp;", 5); break;
        case '<': jinja_buf_add(c, &b, "&lt;", 4); break;
        case '>': jinja_buf_add(c, &b, "&gt;", 4); break;
        case '"': jinja_buf_add(c, &b, "&#34;", 5); break;
        case '\'': jinja_buf_add(c, &b, "&#39;", 5); break;
        default: jinja_buf_addc(c, &b, s.s.p[i]);
        }
    }
    return b.p ? jinja_buf_value(&b) : jinja_val_str("", 0);
}

/* Python's \w+ with Unicode (letters, numbers, '_'), through PCRE2's Unicode properties. */
static jinja_value do_wordcount(jinja_ctx *c, jinja_value s) {
    (void)c;
    int64_t n = 0;
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR) "[\\p{L}\\p{N}_]+", PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    for (size_t at = 0; md && at < s.s.n;) {
        if (pcre2_match(re, (PCRE2_SPTR)s.s.p, s.s.n, at, 0, md, NULL) < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        n++;
        at = ov[1] > at ? ov[1] : at + 1;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return jinja_val_int(n);
}

/* jinja2's truncate: longer than length + leeway (5) is cut to length with end, at a word
 * boundary unless killwords. */
static jinja_value do_truncate(jinja_ctx *c, jinja_value s, const jinja_args *a) {
    int64_t length = need_int(c, jinja_arg(c, a, 0, "length", jinja_val_int(255)), "truncate's length");
    bool killwords = jinja_val_truthy(jinja_arg(c, a, 1, "killwords", jinja_val_bool(false)));
    jinja_value end = need_str(c, jinja_arg(c, a, 2, "end", jinja_val_cstr("...")), "truncate's end");
    jinja_value lw = jinja_arg(c, a, 3, "leeway", jinja_val_none());
    int64_t leeway = lw.kind == JV_NONE ? 5 : need_int(c, lw, "truncate's leeway");
    int64_t n = (int64_t)jinja_utf8_len(s.s.p, s.s.n), end_n = (int64_t)jinja_utf8_len(end.s.p, end.s.n);
    if (length < end_n || leeway < 0) jinja_error(c, "truncate: length below the end's or negative leeway");
    if (n <= length + leeway) return s;
    jinja_value head = jinja_val_str(s.s.p, jinja_utf8_offset(s.s.p, s.s.n, (size_t)(length - end_n)));
    if (!killwords) {
        const char *sp = NULL;
        for (size_t i = head.s.n; i-- > 0;)
            if (head.s.p[i] == ' ') { sp = head.s.p + i; break; }
        if (sp) head.s.n = (size_t)(sp - head.s.p);
    }
    jinja_buf b = {0};
    jinja_buf_add(c, &b, head.s.p, head.s.n);
    jinja_buf_add(c, &b, end.s.p, end.s.n);
    return jinja_buf_value(&b);
}

static jinja_value do_items(jinja_ctx *c, jinja_value v) {
    jinja_value out = jinja_val_list(c, 0);
    if (v.kind == JV_UNDEF) return out;
    if (v.kind != JV_DICT) jinja_error(c, "items needs a mapping, not %s", jinja_val_type_name(v));
    for (size_t i = 0; i < v.d->n; i++) {
        jinja_value pair = jinja_val_list(c, 2);
        pair.l->tuple = true;
        jinja_val_list_push(c, pair.l, jinja_val_entry_key(&v.d->e[i]));
        jinja_val_list_push(c, pair.l, v.d->e[i].v);
        jinja_val_list_push(c, out.l, pair);
    }
    return out;
}

static bool is(const char *a, const char *b) { return !strcmp(a, b); }

static jinja_value lazy(jinja_value v) {
    v.l->lazy = true;
    return v;
}

static const char *const filter_names[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "first", "float", "format", "indent", "int", "items", "join", "last", "length", "list", "lower", "map",
    "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr",
    "sort", "string", "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "wordcount", NULL};

static bool filter_exists(const char *name) {
    for (size_t i = 0; filter_names[i]; i++)
        if (is(filter_names[i], name)) return true;
    return false;
}

jinja_value jinja_filter(jinja_ctx *c, const char *f, jinja_value v, const jinja_args *a) {
    jinja_step(c);
    if (!filter_exists(f)) jinja_error(c, "no filter named '%s'", f);
    if (is(f, "default") || is(f, "d")) {
        jinja_value def = jinja_arg(c, a, 0, "default_value", jinja_val_str("", 0));
        bool boolean = jinja_val_truthy(jinja_arg(c, a, 1, "boolean", jinja_val_bool(false)));
        return v.kind == JV_UNDEF || (boolean && !jinja_val_truthy(v)) ? def : v;
    }
    if (is(f, "length") || is(f, "count")) return jinja_val_int((int64_t)length(c, v));
    if (is(f, "tojson")) return do_tojson(c, v, a);
    if (is(f, "safe")) {
        jinja_value s = jinja_val_to_str(c, v);
        s.safe = true;
        return s;
    }
    if (is(f, "string")) return jinja_val_to_str(c, v);
    if (is(f, "list")) {
        jinja_list *items = jinja_iterate(c, v);
        jinja_value out = jinja_val_list(c, items->n);
        for (size_t i = 0; i < items->n; i++) jinja_val_list_push(c, out.l, items->v[i]);
        return out;
    }
    if (is(f, "items")) return lazy(do_items(c, v));
    if (is(f, "join")) return do_join(c, v, a);
    if (is(f, "map")) return lazy(do_map(c, v, a));
    if (is(f, "select") || is(f, "reject")) return lazy(do_select(c, v, a, false, is(f, "select")));
    if (is(f, "selectattr") || is(f, "rejectattr")) return lazy(do_select(c, v, a, true, is(f, "selectattr")));
    if (is(f, "sort")) return do_sort(c, v, a, false);
    if (is(f, "dictsort")) return do_sort(c, v, a, true);
    if (is(f, "unique")) return lazy(do_unique(c, v, a));
    if (is(f, "min") || is(f, "max")) return do_minmax(c, v, a, is(f, "max"));
    if (is(f, "batch")) return lazy(do_batch(c, v, a));
    if (is(f, "int")) return do_int(c, v, a);
    if (is(f, "float")) return do_float(c, v, a);
    if (is(f, "round")) return do_round(c, v, a);
    if (is(f, "attr")) {
        /* Python's getattr only: a dict's keys are not its attributes */
        jinja_value n = need_str(c, jinja_arg(c, a, 0, "name", jinja_val_none()), "attr's name");
        if (v.kind == JV_DICT && !jinja_method_exists(v, n.s.p, n.s.n))
            return jinja_val_undef(c, "'dict object' has no attribute '%.*s'", (int)n.s.n, n.s.p);
        return jinja_getattr(c, v, n.s.p, n.s.n);
    }
    if (is(f, "first") || is(f, "last")) {
        if (is(f, "last") && v.kind == JV_LIST && v.l->lazy) jinja_error(c, "'generator' object is not reversible");
        jinja_list *items = jinja_iterate(c, v);
        if (!items->n) return jinja_val_undef(c, "No %s item, sequence was empty.", f);
        return items->v[is(f, "first") ? 0 : items->n - 1];
    }
    if (is(f, "reverse")) {
        if (v.kind == JV_STR) {
            jinja_list *chars = jinja_iterate(c, v);
            jinja_buf b = {0};
            for (size_t i = chars->n; i-- > 0;) jinja_buf_add(c, &b, chars->v[i].s.p, chars->v[i].s.n);
            return b.p ? jinja_buf_value(&b) : jinja_val_str("", 0);
        }
        jinja_list *items = jinja_iterate(c, v);
        jinja_value out = jinja_val_list(c, items->n);
        for (size_t i = items->n; i-- > 0;) jinja_val_list_push(c, out.l, items->v[i]);
        return lazy(out);
    }
    if (is(f, "sum")) {
        jinja_value attr = jinja_arg(c, a, 0, "attribute", jinja_val_none()),
                    acc = jinja_arg(c, a, 1, "start", jinja_val_int(0));
        jinja_list *items = jinja_iterate(c, v);
        for (size_t i = 0; i < items->n; i++) {
            jinja_value x = attr.kind == JV_NONE ? items->v[i] : attr_path(c, items->v[i], attr);
            if (!jinja_val_is_number(x) || !jinja_val_is_number(acc))
                jinja_error(c, "sum needs numbers, not %s", jinja_val_type_name(x));
            acc = (acc.kind == JV_FLOAT || x.kind == JV_FLOAT)
                      ? jinja_val_float(jinja_val_as_double(acc) + jinja_val_as_double(x))
                      : jinja_val_int((acc.kind == JV_INT ? acc.i : acc.b) + (x.kind == JV_INT ? x.i : x.b));
        }
        return acc;
    }
    if (is(f, "abs")) {
        if (v.kind == JV_INT) return jinja_val_int(v.i < 0 && v.i != INT64_MIN ? -v.i : v.i);
        if (v.kind == JV_BOOL) return jinja_val_int(v.b);
        if (v.kind == JV_FLOAT) return jinja_val_float(fabs(v.f));
        jinja_error(c, "bad operand type for abs(): '%s'", jinja_val_type_name(v));
    }
    if (is(f, "format")) {
        need_str(c, v, "format");
        if (a->n_kw) jinja_error(c, "format with keyword arguments is not supported");
        return percent_format(c, v, a->args, a->n_args);
    }
    /* the rest work on str(value) */
    jinja_value s = jinja_val_to_str(c, v);
    if (is(f, "trim")) {
        jinja_value chars = jinja_arg(c, a, 0, "chars", jinja_val_none());
        if (chars.kind == JV_STR) return jinja_str_strip(s, chars.s.p, chars.s.n, 'b');
        return jinja_str_strip(s, NULL, 0, 'b');
    }
    if (is(f, "upper")) return jinja_str_case(c, s, 'u');
    if (is(f, "lower")) return jinja_str_case(c, s, 'l');
    if (is(f, "capitalize")) return jinja_str_case(c, s, 'c');
    if (is(f, "title")) return jinja_str_case(c, s, 'T');
    if (is(f, "replace")) {
        jinja_args m = *a;
        return jinja_method_call(c, s, "replace", &m);
    }
    if (is(f, "indent")) {
        if (v.kind != JV_STR) jinja_error(c, "indent needs a string, not %s", jinja_val_type_name(v));
        return do_indent(c, v, a);
    }
    if (is(f, "center"))
        return do_center(c, s, need_int(c, jinja_arg(c, a, 0, "width", jinja_val_int(80)), "center's width"));
    if (is(f, "escape") || is(f, "e")) {
        if (s.safe) return s;
        jinja_value r = jinja_escape(c, s);
        r.safe = true;
        return r;
    }
    if (is(f, "wordcount")) return do_wordcount(c, s);
    if (is(f, "truncate")) {
        /* jinja2 measures the value itself: a short list comes back as it is, a number has no len() */
        if (v.kind != JV_STR && v.kind != JV_UNDEF) {
            size_t n = length(c, v);
            jinja_value lw = jinja_arg(c, a, 3, "leeway", jinja_val_none());
            int64_t max = need_int(c, jinja_arg(c, a, 0, "length", jinja_val_int(255)), "truncate's length") +
                          (lw.kind == JV_NONE ? 5 : need_int(c, lw, "truncate's leeway"));
            if ((int64_t)n <= max) return v;
            jinja_error(c, "truncate: cannot cut a %s", jinja_val_type_name(v));
        }
        return do_truncate(c, s, a);
    }
    jinja_error(c, "no filter named '%s'", f);
}

/* --- tests --------------------------------------------------------------------------------------- */

static const char *const test_names[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number", "string",
    "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "in", "eq", "equalto", "==", "ne",
    "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "divisibleby", "odd",
    "even", "lower", "upper", "filter", "test", NULL};

bool jinja_test_exists(const char *name) {
    for (size_t i = 0; test_names[i]; i++)
        if (is(test_names[i], name)) return true;
    return false;
}

bool jinja_test(jinja_ctx *c, const char *t, jinja_value v, const jinja_args *a) {
    jinja_step(c);
    if (!jinja_test_exists(t)) jinja_error(c, "no test named '%s'", t);
    jinja_value x = jinja_arg(c, a, 0, "value", jinja_val_none());
    if (is(t, "defined")) return v.kind != JV_UNDEF;
    if (is(t, "undefined")) return v.kind == JV_UNDEF;
    if (is(t, "none")) return v.kind == JV_NONE;
    if (is(t, "boolean")) return v.kind == JV_BOOL;
    if (is(t, "false")) return v.kind == JV_BOOL && !v.b;
    if (is(t, "true")) return v.kind == JV_BOOL && v.b;
    if (is(t, "integer")) return v.kind == JV_INT;
    if (is(t, "float")) return v.kind == JV_FLOAT;
    if (is(t, "number")) return jinja_val_is_number(v);
    if (is(t, "string")) return v.kind == JV_STR;
    if (is(t, "mapping")) return v.kind == JV_DICT;
    /* jinja2's Undefined iterates (as empty) and has __getitem__, so it passes both */
    if (is(t, "iterable")) return v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_STR || v.kind == JV_UNDEF;
    if (is(t, "sequence")) return v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_STR || v.kind == JV_UNDEF;
    if (is(t, "callable")) return v.kind == JV_FUNC || v.kind == JV_UNDEF;  /* Undefined has __call__ */
    if (is(t, "escaped")) return false;
    if (is(t, "filter") || is(t, "test")) {
        if (v.kind != JV_STR) return false;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)v.s.n, v.s.p);
        return is(t, "filter") ? filter_exists(name) : jinja_test_exists(name);
    }
    if (is(t, "lower") || is(t, "upper")) {  /* str(value).islower(), as jinja2 */
        v = jinja_val_to_str(c, v);
        jinja_value other = jinja_str_case(c, v, is(t, "lower") ? 'u' : 'l'), same = jinja_str_case(c, v, t[0]);
        return jinja_val_equal(same, v) && !jinja_val_equal(other, v);
    }
    if (is(t, "odd") || is(t, "even")) {  /* value % 2 == 1 / == 0: floats too */
        if (v.kind == JV_FLOAT) return fmod(fabs(v.f), 2) == (is(t, "odd") ? 1 : 0);
        int64_t i = need_int(c, v, t);
        return (i % 2 != 0) == is(t, "odd");
    }
    if (is(t, "divisibleby")) {
        int64_t d = need_int(c, x, "divisibleby"), i = need_int(c, v, "divisibleby");
        if (!d) jinja_error(c, "division by zero in divisibleby");
        return d == -1 || i % d == 0;
    }
    if (is(t, "sameas")) {
        if (v.kind != x.kind) return false;
        switch (v.kind) {
        case JV_NONE: case JV_UNDEF: return true;
        case JV_BOOL: return v.b == x.b;
        case JV_LIST: return v.l == x.l;
        case JV_DICT: case JV_NS: return v.d == x.d;
        default: return jinja_val_equal(v, x);
        }
    }
    /* the rest compare with an argument */
    if (a->n_args == 0 && a->n_kw == 0) jinja_error(c, "test '%s' needs an argument", t);
    if (is(t, "eq") || is(t, "equalto") || is(t, "==")) return jinja_val_equal(v, x);
    if (is(t, "ne") || is(t, "!=")) return !jinja_val_equal(v, x);
    if (is(t, "lt") || is(t, "lessthan") || is(t, "<")) return jinja_val_compare(c, v, x) < 0;
    if (is(t, "le") || is(t, "<=")) return jinja_val_compare(c, v, x) <= 0;
    if (is(t, "gt") || is(t, "greaterthan") || is(t, ">")) return jinja_val_compare(c, v, x) > 0;
    if (is(t, "ge") || is(t, ">=")) return jinja_val_compare(c, v, x) >= 0;
    if (is(t, "in")) {
        if (x.kind == JV_STR)
            return v.kind == JV_STR && (v.s.n == 0 || memmem(x.s.p, x.s.n, v.s.p, v.s.n));
        jinja_list *items = jinja_iterate(c, x);
        if (x.kind == JV_DICT) return v.kind != JV_LIST && v.kind != JV_DICT && jinja_val_dict_find_key(x.d, v);
        for (size_t i = 0; i < items->n; i++)
            if (jinja_val_equal(items->v[i], v)) return true;
        return false;
    }
    jinja_error(c, "no test named '%s'", t);
}
