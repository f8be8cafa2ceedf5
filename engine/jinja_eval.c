/* Jinja evaluator: walks the syntax tree over the render's variables, with jinja2's scoping
 * (a for loop and a macro call open a scope; if does not), Python's operators, jinja2's
 * Undefined (falsy, prints empty, an error when used as a number, called or looked into),
 * and the render's bounds (steps, nesting, memory, output). Also the two entry points. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jinja_internal.h"
#include "engine/unicode.h"

enum { EXEC_NORMAL, EXEC_BREAK, EXEC_CONTINUE };

jinja_limits jinja_limits_default(void) {
    return (jinja_limits){.max_steps = 10000000, .max_depth = 1000, .max_output = 16u << 20,
                          .max_memory = 512u << 20, .now = -1};
}

void jinja_steps(jinja_ctx *c, uint64_t n) {
    c->steps += n > c->lim.max_steps ? c->lim.max_steps : n;
    jinja_step(c);
}

void jinja_step(jinja_ctx *c) {
    if (++c->steps > c->lim.max_steps)
        jinja_error(c, "template ran more than %llu loop iterations and calls (the render's limit; a loop without end?)",
                    (unsigned long long)c->lim.max_steps);
}

static void enter(jinja_ctx *c, const jinja_node *n) {
    if (++c->depth > c->lim.max_depth)
        jinja_error(c, "template nests deeper than %d levels (the render's limit; a macro that calls itself?)",
                    c->lim.max_depth);
    c->arena->line = n->line, c->arena->col = n->col;
}

_Noreturn static void undef_fail(jinja_ctx *c, jinja_value u) { jinja_error(c, "%.*s", (int)u.s.n, u.s.p); }

/* --- scopes ------------------------------------------------------------------------------------- */

static jinja_scope *scope_new(jinja_ctx *c, jinja_scope *parent) {
    jinja_scope *s = jinja_alloc(c->arena, sizeof *s);
    s->parent = parent;
    return s;
}

static jinja_value lookup(jinja_ctx *c, jinja_scope *s, const char *name) {
    size_t n = strlen(name);
    for (; s; s = s->parent) {
        jinja_value *v = jinja_val_dict_find(&s->vars, name, n);
        if (v) return *v;
    }
    if (jinja_global_exists(name, n)) {
        jinja_value f = {.kind = JV_FUNC};
        f.fn = jinja_alloc(c->arena, sizeof *f.fn);
        f.fn->kind = JF_BUILTIN;
        f.fn->name = name;
        return f;
    }
    return jinja_val_undef(c, "'%s' is undefined", name);
}

static void assign(jinja_ctx *c, jinja_scope *s, const jinja_node *target, jinja_value v) {
    if (target->type == N_NAME) {
        jinja_val_dict_set(c, &s->vars, target->s, strlen(target->s), v);
        return;
    }
    if (target->type == N_TUPLE) {
        jinja_list *items = jinja_iterate(c, v);
        if (items->n != target->n_kids)
            jinja_error(c, "cannot unpack %zu values into %zu names", items->n, target->n_kids);
        for (size_t i = 0; i < items->n; i++) assign(c, s, target->kids[i], items->v[i]);
        return;
    }
    jinja_error(c, "cannot assign to this target");
}

/* --- lookups ------------------------------------------------------------------------------------- */

static jinja_value bound_method(jinja_ctx *c, jinja_value self, const char *name, size_t n) {
    jinja_value f = {.kind = JV_FUNC};
    f.fn = jinja_alloc(c->arena, sizeof *f.fn);
    f.fn->kind = JF_METHOD;
    f.fn->name = jinja_strndup(c->arena, name, n);
    f.fn->self = self;
    return f;
}

static const char *object_name(jinja_value v) {
    switch (v.kind) {
    case JV_DICT: return "dict object";
    case JV_STR: return "str object";
    case JV_LIST: return "list object";
    case JV_NONE: return "None";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_BOOL: return "bool object";
    case JV_NS: return "jinja2.utils.Namespace object";
    default: return "object";
    }
}

jinja_value jinja_getattr(jinja_ctx *c, jinja_value obj, const char *name, size_t n) {
    if (obj.kind == JV_UNDEF) undef_fail(c, obj);
    if (obj.kind == JV_DICT || obj.kind == JV_NS) {
        /* jinja2 tries the attribute first: d.items is the method, d.content the key */
        if (obj.kind == JV_DICT && jinja_method_exists(obj, name, n)) return bound_method(c, obj, name, n);
        jinja_value *v = jinja_val_dict_find(obj.d, name, n);
        if (v) return *v;
    } else if (jinja_method_exists(obj, name, n)) {
        return bound_method(c, obj, name, n);
    }
    return jinja_val_undef(c, "'%s' has no attribute '%.*s'", object_name(obj), (int)n, name);
}

/* Python's index rules: negative counts from the end; -1 when outside. */
static int64_t norm_index(int64_t i, size_t n) {
    if (i < 0) i += (int64_t)n;
    return i < 0 || i >= (int64_t)n ? -1 : i;
}

jinja_value jinja_getitem(jinja_ctx *c, jinja_value obj, jinja_value key) {
    if (obj.kind == JV_UNDEF) undef_fail(c, obj);
    if (key.kind == JV_BOOL) key = jinja_val_int(key.b);
    if (obj.kind == JV_DICT && key.kind != JV_LIST && key.kind != JV_DICT) {
        jinja_value *v = jinja_val_dict_find_key(obj.d, key);
        if (v) return *v;
        if (key.kind == JV_STR && jinja_method_exists(obj, key.s.p, key.s.n))
            return bound_method(c, obj, key.s.p, key.s.n);
    } else if (obj.kind == JV_LIST && key.kind == JV_INT && !obj.l->lazy) {
        int64_t i = norm_index(key.i, obj.l->n);
        if (i >= 0) return obj.l->v[i];
    } else if (obj.kind == JV_STR && key.kind == JV_INT) {
        int64_t i = norm_index(key.i, jinja_utf8_len(obj.s.p, obj.s.n));
        if (i >= 0) {
            size_t at = jinja_utf8_offset(obj.s.p, obj.s.n, (size_t)i);
            uint32_t cp;
            return jinja_val_str(obj.s.p + at, unicode_decode(obj.s.p + at, obj.s.n - at, &cp));
        }
    } else if (key.kind == JV_STR) {
        return jinja_getattr(c, obj, key.s.p, key.s.n);
    }
    if (obj.kind == JV_LIST && obj.l->lazy) return jinja_val_undef(c, "'generator' object is not subscriptable");
    if (key.kind == JV_INT && (obj.kind == JV_LIST || obj.kind == JV_STR))
        return jinja_val_undef(c, "%s has no element %lld", obj.kind == JV_LIST ? "list object" : "str object",
                               (long long)key.i);
    jinja_buf b = {0};
    jinja_val_str_append(c, &b, key, true);
    return jinja_val_undef(c, "'%s' has no attribute %s", object_name(obj), b.p ? b.p : "");
}

static int64_t slice_bound(jinja_ctx *c, jinja_value v, int64_t def) {
    if (v.kind == JV_NONE || v.kind == JV_UNDEF) return def;
    if (v.kind == JV_BOOL) return v.b;
    if (v.kind != JV_INT) jinja_error(c, "slice indices must be integers or None, not %s", jinja_val_type_name(v));
    return v.i;
}

static jinja_value slice(jinja_ctx *c, jinja_value obj, jinja_value vs, jinja_value ve, jinja_value vt) {
    if (obj.kind == JV_UNDEF) undef_fail(c, obj);
    int64_t step = slice_bound(c, vt, 1);
    if (step == 0) jinja_error(c, "slice step cannot be zero");
    bool is_str = obj.kind == JV_STR;
    if (!is_str && obj.kind != JV_LIST)  /* jinja2's getitem gives Undefined where Python raises */
        return jinja_val_undef(c, "'%s' object is not subscriptable", jinja_val_type_name(obj));
    size_t *offs = NULL;
    int64_t n;
    if (is_str) {  /* code point offsets, and the end */
        n = (int64_t)jinja_utf8_len(obj.s.p, obj.s.n);
        offs = jinja_alloc(c->arena, ((size_t)n + 1) * sizeof *offs);
        size_t at = 0;
        for (int64_t i = 0; i < n; i++) {
            offs[i] = at;
            uint32_t cp;
            at += unicode_decode(obj.s.p + at, obj.s.n - at, &cp);
        }
        offs[n] = obj.s.n;
    } else {
        n = (int64_t)obj.l->n;
    }
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
    int64_t start = slice_bound(c, vs, step > 0 ? 0 : n - 1), stop = slice_bound(c, ve, step > 0 ? n : -n - 1);
    if (vs.kind != JV_NONE && vs.kind != JV_UNDEF) {
        if (start < 0) start += n;
        start = start < lo ? lo : start > hi ? hi : start;
    }
    if (ve.kind != JV_NONE && ve.kind != JV_UNDEF) {
        if (stop < 0) stop += n;
        stop = stop < lo ? lo : stop > hi ? hi : stop;
    } else {
        stop = step > 0 ? n : -1;
    }
    if (is_str && step == 1) return jinja_val_str(obj.s.p + offs[start], start < stop ? offs[stop] - offs[start] : 0);
    jinja_buf b = {0};
    jinja_value out = is_str ? jinja_val_none() : jinja_val_list(c, 0);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (is_str) jinja_buf_add(c, &b, obj.s.p + offs[i], offs[i + 1] - offs[i]);
        else jinja_val_list_push(c, out.l, obj.l->v[i]);
    }
    return is_str ? jinja_buf_value(&b) : out;
}

jinja_list *jinja_iterate(jinja_ctx *c, jinja_value v) {
    jinja_value out = jinja_val_list(c, 0);
    switch (v.kind) {
    case JV_UNDEF: break;
    case JV_LIST: out.l->v = v.l->v, out.l->n = out.l->cap = v.l->n; break;
    case JV_DICT:
        for (size_t i = 0; i < v.d->n; i++) jinja_val_list_push(c, out.l, jinja_val_entry_key(&v.d->e[i]));
        break;
    case JV_STR:
        for (size_t i = 0; i < v.s.n;) {
            uint32_t cp;
            size_t k = unicode_decode(v.s.p + i, v.s.n - i, &cp);
            jinja_val_list_push(c, out.l, jinja_val_str(v.s.p + i, k));
            i += k;
        }
        break;
    default: jinja_error(c, "'%s' object is not iterable", jinja_val_type_name(v));
    }
    return out.l;
}

/* --- operators ----------------------------------------------------------------------------------- */

static bool contains(jinja_ctx *c, jinja_value hay, jinja_value needle) {
    switch (hay.kind) {
    case JV_UNDEF: return false;
    case JV_STR:
        if (needle.kind != JV_STR)
            jinja_error(c, "'in <string>' requires string as left operand, not %s", jinja_val_type_name(needle));
        return needle.s.n == 0 || memmem(hay.s.p, hay.s.n, needle.s.p, needle.s.n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < hay.l->n; i++) {
            jinja_step(c);  /* x in a long list, in a long loop, is long work too */
            if (jinja_val_equal(hay.l->v[i], needle)) return true;
        }
        return false;
    case JV_DICT:
        if (needle.kind == JV_LIST || needle.kind == JV_DICT)
            jinja_error(c, "unhashable type: '%s'", jinja_val_type_name(needle));
        return jinja_val_dict_find_key(hay.d, needle) != NULL;
    default: jinja_error(c, "argument of type '%s' is not iterable", jinja_val_type_name(hay));
    }
}

static bool compare(jinja_ctx *c, int op, jinja_value a, jinja_value b) {
    /* comparing lists or strings costs their length */
    if (a.kind == JV_LIST && b.kind == JV_LIST) jinja_steps(c, a.l->n < b.l->n ? a.l->n : b.l->n);
    if (a.kind == JV_DICT && b.kind == JV_DICT) jinja_steps(c, a.d->n);
    if (a.kind == JV_STR && b.kind == JV_STR) jinja_steps(c, (op == OP_IN || op == OP_NOTIN ? b.s.n : a.s.n) / 64);
    switch (op) {
    case OP_EQ: return jinja_val_equal(a, b);
    case OP_NE: return !jinja_val_equal(a, b);
    case OP_LT: return jinja_val_compare(c, a, b) < 0;
    case OP_LE: return jinja_val_compare(c, a, b) <= 0;
    case OP_GT: return jinja_val_compare(c, a, b) > 0;
    case OP_GE: return jinja_val_compare(c, a, b) >= 0;
    case OP_IN: return contains(c, b, a);
    default: return !contains(c, b, a);
    }
}

static const char *const op_text[] = {"+", "-", "*", "/", "//", "%", "**"};

_Noreturn static void op_fail(jinja_ctx *c, int op, jinja_value a, jinja_value b) {
    if (a.kind == JV_UNDEF) undef_fail(c, a);
    if (b.kind == JV_UNDEF) undef_fail(c, b);
    jinja_error(c, "unsupported operand type(s) for %s: '%s' and '%s'", op_text[op], jinja_val_type_name(a),
                jinja_val_type_name(b));
}

static jinja_value repeat(jinja_ctx *c, jinja_value seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq.kind == JV_STR) {
        if (times && seq.s.n > c->lim.max_output / (uint64_t)times)
            jinja_error(c, "string repeated past %zu bytes (the render's limit)", c->lim.max_output);
        jinja_buf b = {0};
        for (int64_t i = 0; i < times; i++) jinja_buf_add(c, &b, seq.s.p, seq.s.n);
        return b.p ? jinja_buf_value(&b) : jinja_val_str("", 0);
    }
    jinja_value out = jinja_val_list(c, 0);
    for (int64_t i = 0; i < times; i++) {
        jinja_step(c);
        for (size_t k = 0; k < seq.l->n; k++) jinja_val_list_push(c, out.l, seq.l->v[k]);
    }
    return out;
}

static jinja_value arith(jinja_ctx *c, int op, jinja_value a, jinja_value b) {
    if (a.kind == JV_BOOL) a = jinja_val_int(a.b);
    if (b.kind == JV_BOOL) b = jinja_val_int(b.b);
    if (a.kind == JV_INT && b.kind == JV_INT) {
        int64_t x = a.i, y = b.i, r;
        switch (op) {
        case OP_ADD: if (__builtin_add_overflow(x, y, &r)) goto overflow; return jinja_val_int(r);
        case OP_SUB: if (__builtin_sub_overflow(x, y, &r)) goto overflow; return jinja_val_int(r);
        case OP_MUL: if (__builtin_mul_overflow(x, y, &r)) goto overflow; return jinja_val_int(r);
        case OP_DIV: if (!y) goto zero; return jinja_val_float((double)x / (double)y);
        case OP_FLOORDIV:
        case OP_MOD: {
            if (!y) goto zero;
            if (x == INT64_MIN && y == -1) goto overflow;
            int64_t q = x / y, m = x % y;
            if (m && ((m < 0) != (y < 0))) q--, m += y;
            return jinja_val_int(op == OP_MOD ? m : q);
        }
        case OP_POW: {
            if (y < 0) return jinja_val_float(pow((double)x, (double)y));
            r = 1;
            for (int64_t i = 0; i < y; i++) {
                if (__builtin_mul_overflow(r, x, &r)) goto overflow;
                if (r == 0 || r == 1) break;
                if (r == -1) { r = (y % 2) ? -1 : 1; break; }
            }
            return jinja_val_int(r);
        }
        }
    }
    if (jinja_val_is_number(a) && jinja_val_is_number(b)) {
        double x = jinja_val_as_double(a), y = jinja_val_as_double(b);
        switch (op) {
        case OP_ADD: return jinja_val_float(x + y);
        case OP_SUB: return jinja_val_float(x - y);
        case OP_MUL: return jinja_val_float(x * y);
        case OP_DIV: if (y == 0) goto zero; return jinja_val_float(x / y);
        case OP_FLOORDIV: if (y == 0) goto zero; return jinja_val_float(floor(x / y));
        case OP_MOD: {
            if (y == 0) goto zero;
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            if (m == 0) m = copysign(0.0, y);  /* Python: a zero remainder takes the divisor's sign */
            return jinja_val_float(m);
        }
        case OP_POW: return jinja_val_float(pow(x, y));
        }
    }
    if (op == OP_ADD && a.kind == JV_STR && b.kind == JV_STR) {
        /* Markup + str and str + Markup escape the plain side (markupsafe), as
         * "'...'|safe + name" does in real templates */
        bool safe = a.safe || b.safe;
        if (safe && !a.safe) a = jinja_escape(c, a);
        if (safe && !b.safe) b = jinja_escape(c, b);
        jinja_buf s = {0};
        jinja_buf_add(c, &s, a.s.p, a.s.n);
        jinja_buf_add(c, &s, b.s.p, b.s.n);
        jinja_value r = jinja_buf_value(&s);
        r.safe = safe;
        return r;
    }
    if (op == OP_ADD && a.kind == JV_LIST && b.kind == JV_LIST) {
        jinja_value out = jinja_val_list(c, a.l->n + b.l->n);
        for (size_t i = 0; i < a.l->n; i++) jinja_val_list_push(c, out.l, a.l->v[i]);
        for (size_t i = 0; i < b.l->n; i++) jinja_val_list_push(c, out.l, b.l->v[i]);
        return out;
    }
    if (op == OP_MUL && (a.kind == JV_STR || a.kind == JV_LIST) && b.kind == JV_INT) return repeat(c, a, b.i);
    if (op == OP_MUL && (b.kind == JV_STR || b.kind == JV_LIST) && a.kind == JV_INT) return repeat(c, b, a.i);
    if (op == OP_MOD && a.kind == JV_STR) {
        jinja_args args = {.args = &b, .n_args = 1};
        if (b.kind == JV_LIST) args.args = b.l->v, args.n_args = b.l->n;
        return jinja_filter(c, "format", a, &args);
    }
    if (op == OP_ADD && a.kind == JV_STR && b.kind != JV_UNDEF)
        jinja_error(c, "can only concatenate str (not \"%s\") to str", jinja_val_type_name(b));
    op_fail(c, op, a, b);
overflow:
    jinja_error(c, "integer overflow in '%s' (mgi's integers are 64-bit)", op_text[op]);
zero:
    jinja_error(c, "division by zero");
}

/* --- calls --------------------------------------------------------------------------------------- */

static void exec_body(jinja_ctx *c, jinja_scope *s, const jinja_node *n, int *flow);

/* Renders body in scope s into a fresh buffer and returns the text. */
static jinja_value render_to_string(jinja_ctx *c, jinja_scope *s, const jinja_node *body) {
    jinja_buf b = {0}, *saved = c->out;
    c->out = &b;
    int flow = EXEC_NORMAL;
    exec_body(c, s, body, &flow);
    c->out = saved;
    return jinja_buf_value(&b);
}

static jinja_value call_macro(jinja_ctx *c, jinja_func *fn, jinja_value *args, size_t n_args,
                              const char **kw_names, jinja_value *kw_vals, size_t n_kw) {
    const jinja_node *m = fn->macro;
    jinja_step(c);  /* calls count: a macro calling itself twice grows without a loop */
    jinja_scope *s = scope_new(c, fn->closure);
    if (n_args > m->n_names)
        jinja_error(c, "macro '%s' takes not more than %zu argument(s), %zu given", fn->name, m->n_names, n_args);
    bool *given = jinja_alloc(c->arena, m->n_names + 1);
    for (size_t i = 0; i < n_args; i++) {
        jinja_val_dict_set(c, &s->vars, m->names[i], strlen(m->names[i]), args[i]);
        given[i] = true;
    }
    for (size_t k = 0; k < n_kw; k++) {
        if (!strcmp(kw_names[k], "caller")) {
            jinja_val_dict_set(c, &s->vars, "caller", 6, kw_vals[k]);
            continue;
        }
        size_t i;
        for (i = 0; i < m->n_names; i++)
            if (!strcmp(m->names[i], kw_names[k])) break;
        if (i == m->n_names) jinja_error(c, "macro '%s' takes no keyword argument '%s'", fn->name, kw_names[k]);
        if (given[i]) jinja_error(c, "macro '%s' got multiple values for argument '%s'", fn->name, kw_names[k]);
        jinja_val_dict_set(c, &s->vars, m->names[i], strlen(m->names[i]), kw_vals[k]);
        given[i] = true;
    }
    jinja_scope *outer = c->scope;
    c->scope = s;  /* a default may name the parameters before it */
    for (size_t i = 0; i < m->n_names; i++) {
        if (given[i]) continue;
        jinja_value v = m->kids[i] ? jinja_eval(c, m->kids[i]) : jinja_val_undef(c, "'%s' is undefined", m->names[i]);
        jinja_val_dict_set(c, &s->vars, m->names[i], strlen(m->names[i]), v);
    }
    c->scope = outer;
    return render_to_string(c, s, m->b);
}

jinja_value jinja_call(jinja_ctx *c, jinja_value fn, jinja_value *args, size_t n_args, const char **kw_names,
                       jinja_value *kw_vals, size_t n_kw) {
    if (fn.kind == JV_UNDEF) undef_fail(c, fn);
    if (fn.kind != JV_FUNC) jinja_error(c, "'%s' object is not callable", jinja_val_type_name(fn));
    jinja_args a = {args, n_args, kw_names, kw_vals, n_kw};
    switch (fn.fn->kind) {
    case JF_MACRO: return call_macro(c, fn.fn, args, n_args, kw_names, kw_vals, n_kw);
    case JF_BUILTIN: return jinja_global_call(c, fn.fn->name, &a);
    case JF_METHOD: return jinja_method_call(c, fn.fn->self, fn.fn->name, &a);
    case JF_CYCLE: {
        if (!n_args) jinja_error(c, "loop.cycle needs at least one value");
        jinja_value *i0 = jinja_val_dict_find(fn.fn->self.d, "index0", 6);
        return args[(size_t)(i0 ? i0->i : 0) % n_args];
    }
    }
    jinja_error(c, "not callable");
}

/* Evaluated positional and keyword arguments of a call, filter or test node. */
static jinja_args eval_args(jinja_ctx *c, const jinja_node *n, size_t extra) {
    jinja_args a = {0};
    a.args = jinja_alloc(c->arena, (n->n_kids + extra + 1) * sizeof *a.args);
    for (size_t i = 0; i < n->n_kids; i++) a.args[i] = jinja_eval(c, n->kids[i]);
    a.n_args = n->n_kids;
    a.kw_names = n->names;
    a.n_kw = n->n_kids2;
    a.kw_vals = jinja_alloc(c->arena, (n->n_kids2 + extra + 1) * sizeof *a.kw_vals);
    for (size_t i = 0; i < n->n_kids2; i++) a.kw_vals[i] = jinja_eval(c, n->kids2[i]);
    return a;
}

/* A filter chain whose innermost input is NULL, applied to v. */
static jinja_value apply_filters(jinja_ctx *c, const jinja_node *f, jinja_value v) {
    if (f->a) v = apply_filters(c, f->a, v);
    jinja_args a = eval_args(c, f, 0);
    c->arena->line = f->line, c->arena->col = f->col;
    return jinja_filter(c, f->s, v, &a);
}

/* --- expressions --------------------------------------------------------------------------------- */

jinja_value jinja_eval(jinja_ctx *c, const jinja_node *n) {
    enter(c, n);
    jinja_value r;
    switch (n->type) {
    case N_CONST: r = n->v; break;
    case N_NAME: r = lookup(c, c->scope, n->s); break;
    case N_LIST: case N_TUPLE:
        r = jinja_val_list(c, n->n_kids);
        r.l->tuple = n->type == N_TUPLE;
        for (size_t i = 0; i < n->n_kids; i++) jinja_val_list_push(c, r.l, jinja_eval(c, n->kids[i]));
        break;
    case N_DICT:
        r = jinja_val_dict(c);
        for (size_t i = 0; i < n->n_kids; i++) {
            jinja_value k = jinja_eval(c, n->kids[i]);
            jinja_val_dict_set_key(c, r.d, k, jinja_eval(c, n->kids2[i]));
        }
        break;
    case N_ATTR: {
        jinja_value o = jinja_eval(c, n->a);
        c->arena->line = n->line, c->arena->col = n->col;
        r = jinja_getattr(c, o, n->s, strlen(n->s));
        break;
    }
    case N_ITEM: {
        jinja_value o = jinja_eval(c, n->a), k = jinja_eval(c, n->b);
        c->arena->line = n->line, c->arena->col = n->col;
        r = jinja_getitem(c, o, k);
        break;
    }
    case N_SLICE: {
        jinja_value o = jinja_eval(c, n->a), p[3];
        for (int i = 0; i < 3; i++) p[i] = n->kids[i] ? jinja_eval(c, n->kids[i]) : jinja_val_none();
        c->arena->line = n->line, c->arena->col = n->col;
        r = slice(c, o, p[0], p[1], p[2]);
        break;
    }
    case N_CALL: {
        jinja_value fn = jinja_eval(c, n->a);
        jinja_args a = eval_args(c, n, 0);
        c->arena->line = n->line, c->arena->col = n->col;
        r = jinja_call(c, fn, a.args, a.n_args, a.kw_names, a.kw_vals, a.n_kw);
        break;
    }
    case N_FILTER: {
        jinja_value v = jinja_eval(c, n->a);
        jinja_args a = eval_args(c, n, 0);
        c->arena->line = n->line, c->arena->col = n->col;
        r = jinja_filter(c, n->s, v, &a);
        break;
    }
    case N_TEST: {
        jinja_value v = jinja_eval(c, n->a);
        jinja_args a = eval_args(c, n, 0);
        c->arena->line = n->line, c->arena->col = n->col;
        r = jinja_val_bool(jinja_test(c, n->s, v, &a) != n->negate);
        break;
    }
    case N_NEG: case N_POS: {
        jinja_value v = jinja_eval(c, n->a);
        if (v.kind == JV_BOOL) v = jinja_val_int(v.b);
        if (v.kind == JV_INT) r = n->type == N_NEG ? arith(c, OP_SUB, jinja_val_int(0), v) : v;
        else if (v.kind == JV_FLOAT) r = jinja_val_float(n->type == N_NEG ? -v.f : v.f);
        else if (v.kind == JV_UNDEF) undef_fail(c, v);
        else
            jinja_error(c, "bad operand type for unary %c: '%s'", n->type == N_NEG ? '-' : '+', jinja_val_type_name(v));
        break;
    }
    case N_NOT: r = jinja_val_bool(!jinja_val_truthy(jinja_eval(c, n->a))); break;
    case N_AND: r = jinja_eval(c, n->a); if (jinja_val_truthy(r)) r = jinja_eval(c, n->b); break;
    case N_OR: r = jinja_eval(c, n->a); if (!jinja_val_truthy(r)) r = jinja_eval(c, n->b); break;
    case N_BINOP: {
        jinja_value a = jinja_eval(c, n->a), b = jinja_eval(c, n->b);
        c->arena->line = n->line, c->arena->col = n->col;
        r = arith(c, n->op, a, b);
        break;
    }
    case N_COMPARE: {
        jinja_value left = jinja_eval(c, n->a);
        r = jinja_val_bool(true);
        for (size_t i = 0; i < n->n_kids; i++) {
            jinja_value right = jinja_eval(c, n->kids[i]);
            c->arena->line = n->line, c->arena->col = n->col;
            if (!compare(c, n->ops[i], left, right)) {
                r = jinja_val_bool(false);
                break;
            }
            left = right;
        }
        break;
    }
    case N_COND:
        if (jinja_val_truthy(jinja_eval(c, n->a))) r = jinja_eval(c, n->b);
        else if (n->c) r = jinja_eval(c, n->c);
        else r = jinja_val_undef(c, "the inline if-expression evaluated to false and no else section was defined");
        break;
    case N_CONCAT: {
        jinja_buf b = {0};
        for (size_t i = 0; i < n->n_kids; i++) jinja_val_str_append(c, &b, jinja_eval(c, n->kids[i]), false);
        r = jinja_buf_value(&b);
        break;
    }
    default: jinja_error(c, "statement where an expression was expected");
    }
    c->depth--;
    return r;
}

/* --- statements ---------------------------------------------------------------------------------- */

static void exec_for(jinja_ctx *c, jinja_scope *s, const jinja_node *n, int *flow) {
    jinja_list *all = jinja_iterate(c, jinja_eval(c, n->b));
    jinja_scope *ls = scope_new(c, s);
    jinja_list *items = all;
    if (n->c) {  /* "for x in y if cond": the condition sees the loop variable, not loop.* */
        items = jinja_val_list(c, 0).l;
        for (size_t i = 0; i < all->n; i++) {
            jinja_step(c);
            assign(c, ls, n->a, all->v[i]);
            c->scope = ls;
            bool keep = jinja_val_truthy(jinja_eval(c, n->c));
            c->scope = s;
            if (keep) jinja_val_list_push(c, items, all->v[i]);
        }
    }
    if (!items->n) {
        if (n->n_kids2) exec_body(c, s, n->kids2[0], flow);
        return;
    }
    jinja_value loop = jinja_val_dict(c), cycle = {.kind = JV_FUNC};
    cycle.fn = jinja_alloc(c->arena, sizeof *cycle.fn);
    cycle.fn->kind = JF_CYCLE;
    cycle.fn->name = "cycle";
    cycle.fn->self = loop;
    size_t len = items->n;
    bool completed = false;
    for (size_t i = 0; i < len; i++) {
        jinja_step(c);
        jinja_dict *d = loop.d;
        jinja_val_dict_set(c, d, "index0", 6, jinja_val_int((int64_t)i));
        jinja_val_dict_set(c, d, "index", 5, jinja_val_int((int64_t)i + 1));
        jinja_val_dict_set(c, d, "revindex", 8, jinja_val_int((int64_t)(len - i)));
        jinja_val_dict_set(c, d, "revindex0", 9, jinja_val_int((int64_t)(len - i - 1)));
        jinja_val_dict_set(c, d, "first", 5, jinja_val_bool(i == 0));
        jinja_val_dict_set(c, d, "last", 4, jinja_val_bool(i + 1 == len));
        jinja_val_dict_set(c, d, "length", 6, jinja_val_int((int64_t)len));
        jinja_val_dict_set(c, d, "depth", 5, jinja_val_int(1));
        jinja_val_dict_set(c, d, "depth0", 6, jinja_val_int(0));
        jinja_val_dict_set(c, d, "previtem", 8, i ? items->v[i - 1] : jinja_val_undef(c, "there is no previous item"));
        jinja_val_dict_set(c, d, "nextitem", 8,
                           i + 1 < len ? items->v[i + 1] : jinja_val_undef(c, "there is no next item"));
        jinja_val_dict_set(c, d, "cycle", 5, cycle);
        /* each iteration starts afresh: what the body set in the last one is gone (jinja2) */
        ls->vars.n = 0;
        jinja_val_dict_set(c, &ls->vars, "loop", 4, loop);
        assign(c, ls, n->a, items->v[i]);
        int f = EXEC_NORMAL;
        exec_body(c, ls, n->kids[0], &f);
        if (f == EXEC_BREAK) break;
        completed = completed || f == EXEC_NORMAL;
    }
    /* jinja2 runs else unless an iteration reached the end of its body: a loop left by break
     * or continue in every iteration runs it too */
    if (!completed && n->n_kids2) exec_body(c, s, n->kids2[0], flow);
    (void)flow;
}

static void exec_node(jinja_ctx *c, jinja_scope *s, const jinja_node *n, int *flow) {
    enter(c, n);
    jinja_scope *outer = c->scope;
    c->scope = s;
    switch (n->type) {
    case N_BODY: exec_body(c, s, n, flow); break;
    case N_TEXT: jinja_buf_add(c, c->out, n->s, n->sn); break;
    case N_OUTPUT: jinja_val_str_append(c, c->out, jinja_eval(c, n->a), false); break;
    case N_IF:
        if (jinja_val_truthy(jinja_eval(c, n->a))) exec_body(c, s, n->b, flow);
        else if (n->c) exec_node(c, s, n->c, flow);
        break;
    case N_FOR: exec_for(c, s, n, flow); break;
    case N_SET: {
        jinja_value v = jinja_eval(c, n->b);
        if (n->a->type == N_ATTR) {
            jinja_value ns = jinja_eval(c, n->a->a);
            c->arena->line = n->line, c->arena->col = n->col;
            if (ns.kind != JV_NS) jinja_error(c, "cannot assign attribute on non-namespace object");
            jinja_val_dict_set(c, ns.d, n->a->s, strlen(n->a->s), v);
        } else {
            assign(c, s, n->a, v);
        }
        break;
    }
    case N_SETBLOCK: {
        jinja_value v = render_to_string(c, s, n->b);
        if (n->filters) v = apply_filters(c, n->filters, v);
        assign(c, s, n->a, v);
        break;
    }
    case N_WITH: {
        jinja_value *v = jinja_alloc(c->arena, (n->n_kids + 1) * sizeof *v);
        for (size_t i = 0; i < n->n_kids; i++) v[i] = jinja_eval(c, n->kids[i]);
        jinja_scope *ws = scope_new(c, s);
        for (size_t i = 0; i < n->n_kids; i++) assign(c, ws, n->kids2[i], v[i]);
        exec_body(c, ws, n->b, flow);
        break;
    }
    case N_FILTERBLOCK:
        jinja_val_str_append(c, c->out, apply_filters(c, n->filters, render_to_string(c, s, n->b)), false);
        break;
    case N_MACRO: {
        jinja_value f = {.kind = JV_FUNC};
        f.fn = jinja_alloc(c->arena, sizeof *f.fn);
        f.fn->kind = JF_MACRO;
        f.fn->name = n->s;
        f.fn->macro = n;
        f.fn->closure = s;
        jinja_val_dict_set(c, &s->vars, n->s, strlen(n->s), f);
        break;
    }
    case N_CALLBLOCK: {
        jinja_value caller = {.kind = JV_FUNC};
        caller.fn = jinja_alloc(c->arena, sizeof *caller.fn);
        caller.fn->kind = JF_MACRO;
        caller.fn->name = "caller";
        caller.fn->macro = n;
        caller.fn->closure = s;
        const jinja_node *call = n->a;
        jinja_value fn = jinja_eval(c, call->a);
        jinja_args a = eval_args(c, call, 1);
        a.kw_names = jinja_alloc(c->arena, (a.n_kw + 1) * sizeof *a.kw_names);
        for (size_t i = 0; i < a.n_kw; i++) a.kw_names[i] = call->names[i];
        a.kw_names[a.n_kw] = "caller";
        a.kw_vals[a.n_kw++] = caller;
        c->arena->line = n->line, c->arena->col = n->col;
        jinja_val_str_append(c, c->out, jinja_call(c, fn, a.args, a.n_args, a.kw_names, a.kw_vals, a.n_kw), false);
        break;
    }
    case N_BREAK: *flow = EXEC_BREAK; break;
    case N_CONTINUE: *flow = EXEC_CONTINUE; break;
    default: jinja_val_str_append(c, c->out, jinja_eval(c, n), false); break;
    }
    c->scope = outer;
    c->depth--;
}

static void exec_body(jinja_ctx *c, jinja_scope *s, const jinja_node *n, int *flow) {
    if (n->type != N_BODY) return exec_node(c, s, n, flow);
    for (size_t i = 0; i < n->n_kids && *flow == EXEC_NORMAL; i++) exec_node(c, s, n->kids[i], flow);
}

/* --- entry points -------------------------------------------------------------------------------- */

jinja_template *jinja_parse(const char *src, size_t len, char *err, size_t err_size) {
    jinja_template *volatile t = calloc(1, sizeof *t);
    jmp_buf jb;
    if (!t) {
        snprintf(err, err_size, "out of memory for the template");
        return NULL;
    }
    t->arena.limit = jinja_limits_default().max_memory;
    t->arena.fail = &jb;
    t->arena.err = err;
    t->arena.err_size = err_size;
    if (setjmp(jb)) {
        jinja_arena_free(&t->arena);
        free(t);
        return NULL;
    }
    size_t n;
    jinja_token *toks = jinja_lex(&t->arena, src, len, &n);
    t->root = jinja_parse_tokens(&t->arena, toks, n);
    t->arena.fail = NULL;
    return t;
}

void jinja_free(jinja_template *t) {
    if (!t) return;
    jinja_arena_free(&t->arena);
    free(t);
}

char *jinja_render(const jinja_template *t, const void *vars, const jinja_limits *lim, size_t *len, char *err,
                   size_t err_size) {
    jmp_buf jb;
    jinja_arena *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, err_size, "out of memory for the render");
        return NULL;
    }
    jinja_ctx *c = NULL;
    a->fail = &jb;
    a->err = err;
    a->err_size = err_size;
    a->limit = (lim ? *lim : jinja_limits_default()).max_memory;
    if (setjmp(jb)) {
        jinja_arena_free(a);
        free(a);
        return NULL;
    }
    c = jinja_alloc(a, sizeof *c);
    c->arena = a;
    c->lim = lim ? *lim : jinja_limits_default();
    c->globals = scope_new(c, NULL);
    const cJSON *root = vars;
    if (root && !cJSON_IsObject(root)) jinja_error(c, "the template's variables must be a JSON object");
    for (const cJSON *e = root ? root->child : NULL; e; e = e->next) {
        const char *k = e->string ? e->string : "";
        jinja_val_dict_set(c, &c->globals->vars, jinja_strndup(a, k, strlen(k)), strlen(k), jinja_val_from_cjson(c, e));
    }
    jinja_buf out = {0};
    c->out = &out;
    int flow = EXEC_NORMAL;
    exec_body(c, c->globals, t->root, &flow);
    char *text = malloc(out.n + 1);
    if (!text) jinja_error(c, "out of memory for %zu bytes of output", out.n);
    if (out.n) memcpy(text, out.p, out.n);
    text[out.n] = 0;
    *len = out.n;
    jinja_arena_free(a);
    free(a);
    return text;
}
