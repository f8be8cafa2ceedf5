/* Jinja parser: tokens -> syntax tree, following jinja2's grammar and operator precedence
 * (conditional < or < and < not < comparisons < + - < ~ < * / // % < ** < unary - + , with
 * filters, tests, attributes, subscripts and calls binding tightest). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/jinja_internal.h"

#define PARSE_MAX_DEPTH 200   /* nesting of expressions and blocks; deeper is an error */

typedef struct {
    jinja_arena *a;
    const jinja_token *t;
    size_t n, i;
    int depth;
    int loops;     /* enclosing for loops (inside the current macro): break/continue need one */
} parser;

static const jinja_token *peek(const parser *P) { return &P->t[P->i]; }
static const jinja_token *peek2(const parser *P) { return &P->t[P->i + 1 < P->n ? P->i + 1 : P->i]; }
static const jinja_token *next(parser *P) {
    const jinja_token *t = &P->t[P->i];
    if (P->i + 1 < P->n) P->i++;
    return t;
}

static bool tok_op(const jinja_token *t, const char *op) { return t->type == T_OP && !strcmp(t->s, op); }
static bool tok_name(const jinja_token *t, const char *name) {
    return t->type == T_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static const char *tok_desc(const jinja_token *t) {
    switch (t->type) {
    case T_TEXT: return "text";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "'%}'";
    case T_NAME: return "a name";
    case T_STRING: return "a string";
    case T_INT: case T_FLOAT: return "a number";
    case T_OP: return t->s;
    case T_EOF: return "the end of the template";
    }
    return "?";
}

__attribute__((format(printf, 3, 4)))
_Noreturn static void fail_at(const parser *P, const jinja_token *t, const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jinja_fail(P->a, t->line, t->col, "syntax error: %s", msg);
}

static void expect_op(parser *P, const char *op) {
    if (!tok_op(peek(P), op)) {
        char msg[96];
        snprintf(msg, sizeof msg, "expected '%s', found %s", op, tok_desc(peek(P)));
        fail_at(P, peek(P), "%s", msg);
    }
    next(P);
}

static void expect_type(parser *P, jinja_tok_type type, const char *what) {
    if (peek(P)->type != type) {
        char msg[128];
        snprintf(msg, sizeof msg, "expected %s, found %s", what, tok_desc(peek(P)));
        fail_at(P, peek(P), "%s", msg);
    }
    next(P);
}

static const char *name_of(parser *P, const jinja_token *t) { return jinja_strndup(P->a, t->s, t->n); }

static jinja_node *node(parser *P, jinja_node_type type, const jinja_token *at) {
    jinja_node *n = jinja_alloc(P->a, sizeof *n);
    n->type = type;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* Growable node lists while parsing. */
typedef struct { jinja_node **v; size_t n, cap; } nodes;
static void nodes_push(parser *P, nodes *l, jinja_node *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jinja_node **v = jinja_alloc(P->a, cap * sizeof *v);
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = x;
}

static void enter(parser *P) {
    if (++P->depth > PARSE_MAX_DEPTH) fail_at(P, peek(P), "%s", "nested more than 200 levels deep");
}

static jinja_node *parse_expr(parser *P);
static jinja_node *parse_or(parser *P);
static jinja_node *parse_unary(parser *P, bool with_filter);
static jinja_node *parse_primary(parser *P);
static jinja_node *parse_postfix(parser *P, jinja_node *n);

/* (args, name=kw, ...) after the opening '(' has been seen; fills n's kids / names / kids2. */
static void parse_call_args(parser *P, jinja_node *n) {
    expect_op(P, "(");
    nodes args = {0}, kws = {0};
    nodes names = {0};
    while (!tok_op(peek(P), ")")) {
        if (args.n + kws.n) expect_op(P, ",");
        if (tok_op(peek(P), ")")) break;
        if (tok_op(peek(P), "*") || tok_op(peek(P), "**"))
            fail_at(P, peek(P), "%s", "*args and **kwargs in calls are not supported");
        if (peek(P)->type == T_NAME && tok_op(peek2(P), "=")) {
            const jinja_token *nm = next(P);
            next(P);
            nodes_push(P, &names, (jinja_node *)name_of(P, nm));
            nodes_push(P, &kws, parse_expr(P));
        } else {
            if (kws.n) fail_at(P, peek(P), "%s", "a positional argument after a keyword argument");
            nodes_push(P, &args, parse_expr(P));
        }
    }
    next(P);
    n->kids = args.v, n->n_kids = args.n;
    n->kids2 = kws.v, n->n_kids2 = kws.n;
    n->names = (const char **)names.v, n->n_names = names.n;
}

static jinja_node *parse_filter(parser *P, jinja_node *input) {
    const jinja_token *at = peek(P);
    expect_type(P, T_NAME, "a filter name");
    jinja_node *f = node(P, N_FILTER, at);
    f->a = input;
    f->s = name_of(P, at);
    while (tok_op(peek(P), ".")) {  /* dotted filter names */
        next(P);
        const jinja_token *more = peek(P);
        expect_type(P, T_NAME, "a filter name");
        size_t l0 = strlen(f->s);
        char *s = jinja_alloc(P->a, l0 + more->n + 2);
        memcpy(s, f->s, l0);
        s[l0] = '.';
        memcpy(s + l0 + 1, more->s, more->n);
        f->s = s;
    }
    if (tok_op(peek(P), "(")) parse_call_args(P, f);
    return f;
}

static jinja_node *parse_filter_expr(parser *P, jinja_node *n) {
    for (;;) {
        const jinja_token *t = peek(P);
        if (tok_op(t, "|")) {
            next(P);
            n = parse_filter(P, n);
        } else if (tok_name(t, "is")) {
            next(P);
            jinja_node *test = node(P, N_TEST, t);
            test->a = n;
            if (tok_name(peek(P), "not")) next(P), test->negate = true;
            const jinja_token *nm = peek(P);
            expect_type(P, T_NAME, "a test name after 'is'");
            test->s = name_of(P, nm);
            const jinja_token *u = peek(P);
            if (tok_op(u, "(")) {
                parse_call_args(P, test);
            } else if ((u->type == T_NAME || u->type == T_STRING || u->type == T_INT || u->type == T_FLOAT ||
                        tok_op(u, "[") || tok_op(u, "{")) &&
                       !tok_name(u, "else") && !tok_name(u, "or") && !tok_name(u, "and") && !tok_name(u, "is") &&
                       !tok_name(u, "if") && !tok_name(u, "in") && !tok_name(u, "not")) {
                test->kids = jinja_alloc(P->a, sizeof *test->kids);
                test->kids[0] = parse_postfix(P, parse_primary(P));
                test->n_kids = 1;
            }
            n = test;
        } else if (tok_op(t, "(")) {
            jinja_node *call = node(P, N_CALL, t);
            call->a = n;
            parse_call_args(P, call);
            n = call;
        } else {
            return n;
        }
    }
}

static jinja_node *parse_postfix(parser *P, jinja_node *n) {
    for (;;) {
        const jinja_token *t = peek(P);
        if (tok_op(t, ".")) {
            next(P);
            const jinja_token *nm = next(P);
            if (nm->type == T_NAME) {
                jinja_node *at = node(P, N_ATTR, t);
                at->a = n;
                at->s = name_of(P, nm);
                n = at;
            } else if (nm->type == T_INT) {
                jinja_node *it = node(P, N_ITEM, t), *k = node(P, N_CONST, nm);
                k->v = jinja_val_int(nm->i);
                it->a = n, it->b = k;
                n = it;
            } else {
                fail_at(P, nm, "expected an attribute name after '.', found %s", tok_desc(nm));
            }
        } else if (tok_op(t, "[")) {
            next(P);
            jinja_node *parts[3] = {0};
            int k = 0;
            bool slice = false;
            for (;;) {
                if (!tok_op(peek(P), ":") && !tok_op(peek(P), "]")) parts[k] = parse_expr(P);
                if (tok_op(peek(P), ":") && k < 2) {
                    next(P);
                    k++;
                    slice = true;
                    continue;
                }
                break;
            }
            expect_op(P, "]");
            if (slice) {
                jinja_node *s = node(P, N_SLICE, t);
                s->a = n;
                s->kids = jinja_alloc(P->a, 3 * sizeof *s->kids);
                memcpy(s->kids, parts, sizeof parts);
                s->n_kids = 3;
                n = s;
            } else {
                if (!parts[0]) fail_at(P, t, "%s", "empty subscript []");
                jinja_node *it = node(P, N_ITEM, t);
                it->a = n, it->b = parts[0];
                n = it;
            }
        } else if (tok_op(t, "(")) {
            jinja_node *call = node(P, N_CALL, t);
            call->a = n;
            parse_call_args(P, call);
            n = call;
        } else {
            return n;
        }
    }
}

static jinja_node *make_const(parser *P, const jinja_token *at, jinja_value v) {
    jinja_node *n = node(P, N_CONST, at);
    n->v = v;
    return n;
}

static jinja_node *parse_primary(parser *P) {
    const jinja_token *t = peek(P);
    enter(P);
    jinja_node *n;
    if (t->type == T_NAME) {
        next(P);
        if (tok_name(t, "true") || tok_name(t, "True")) n = make_const(P, t, jinja_val_bool(true));
        else if (tok_name(t, "false") || tok_name(t, "False")) n = make_const(P, t, jinja_val_bool(false));
        else if (tok_name(t, "none") || tok_name(t, "None")) n = make_const(P, t, jinja_val_none());
        else {
            n = node(P, N_NAME, t);
            n->s = name_of(P, t);
        }
    } else if (t->type == T_STRING) {
        /* adjacent literals are one string, as in Python */
        size_t total = 0, j = P->i;
        while (P->t[j].type == T_STRING) total += P->t[j++].n;
        char *s = jinja_alloc(P->a, total + 1);
        size_t k = 0;
        while (peek(P)->type == T_STRING) {
            const jinja_token *u = next(P);
            memcpy(s + k, u->s, u->n);
            k += u->n;
        }
        n = make_const(P, t, jinja_val_str(s, total));
    } else if (t->type == T_INT) {
        next(P);
        n = make_const(P, t, jinja_val_int(t->i));
    } else if (t->type == T_FLOAT) {
        next(P);
        n = make_const(P, t, jinja_val_float(t->f));
    } else if (tok_op(t, "(")) {
        next(P);
        if (tok_op(peek(P), ")")) {
            next(P);
            n = node(P, N_TUPLE, t);
        } else {
            n = parse_expr(P);
            if (tok_op(peek(P), ",")) {
                nodes items = {0};
                nodes_push(P, &items, n);
                while (tok_op(peek(P), ",")) {
                    next(P);
                    if (tok_op(peek(P), ")")) break;
                    nodes_push(P, &items, parse_expr(P));
                }
                n = node(P, N_TUPLE, t);
                n->kids = items.v, n->n_kids = items.n;
            }
            expect_op(P, ")");
        }
    } else if (tok_op(t, "[")) {
        next(P);
        nodes items = {0};
        while (!tok_op(peek(P), "]")) {
            if (items.n) expect_op(P, ",");
            if (tok_op(peek(P), "]")) break;
            nodes_push(P, &items, parse_expr(P));
        }
        next(P);
        n = node(P, N_LIST, t);
        n->kids = items.v, n->n_kids = items.n;
    } else if (tok_op(t, "{")) {
        next(P);
        nodes keys = {0}, vals = {0};
        while (!tok_op(peek(P), "}")) {
            if (keys.n) expect_op(P, ",");
            if (tok_op(peek(P), "}")) break;
            nodes_push(P, &keys, parse_expr(P));
            expect_op(P, ":");
            nodes_push(P, &vals, parse_expr(P));
        }
        next(P);
        n = node(P, N_DICT, t);
        n->kids = keys.v, n->n_kids = keys.n;
        n->kids2 = vals.v, n->n_kids2 = vals.n;
    } else {
        fail_at(P, t, "expected an expression, found %s", tok_desc(t));
    }
    P->depth--;
    return n;
}

static jinja_node *parse_unary(parser *P, bool with_filter) {
    const jinja_token *t = peek(P);
    jinja_node *n;
    enter(P);
    if (tok_op(t, "-") || tok_op(t, "+")) {
        next(P);
        n = node(P, t->s[0] == '-' ? N_NEG : N_POS, t);
        n->a = parse_unary(P, false);
    } else {
        n = parse_postfix(P, parse_primary(P));
    }
    if (with_filter) n = parse_filter_expr(P, n);
    P->depth--;
    return n;
}

static jinja_node *binop(parser *P, const jinja_token *at, int op, jinja_node *l, jinja_node *r) {
    jinja_node *n = node(P, N_BINOP, at);
    n->op = op, n->a = l, n->b = r;
    return n;
}

static jinja_node *parse_pow(parser *P) {
    jinja_node *n = parse_unary(P, true);
    while (tok_op(peek(P), "**")) {
        const jinja_token *t = next(P);
        n = binop(P, t, OP_POW, n, parse_unary(P, true));
    }
    return n;
}

static jinja_node *parse_math2(parser *P) {
    jinja_node *n = parse_pow(P);
    for (;;) {
        const jinja_token *t = peek(P);
        int op = tok_op(t, "*") ? OP_MUL : tok_op(t, "/") ? OP_DIV : tok_op(t, "//") ? OP_FLOORDIV
               : tok_op(t, "%") ? OP_MOD : -1;
        if (op < 0) return n;
        next(P);
        n = binop(P, t, op, n, parse_pow(P));
    }
}

static jinja_node *parse_concat(parser *P) {
    jinja_node *n = parse_math2(P);
    if (!tok_op(peek(P), "~")) return n;
    nodes parts = {0};
    nodes_push(P, &parts, n);
    const jinja_token *at = peek(P);
    while (tok_op(peek(P), "~")) {
        next(P);
        nodes_push(P, &parts, parse_math2(P));
    }
    jinja_node *c = node(P, N_CONCAT, at);
    c->kids = parts.v, c->n_kids = parts.n;
    return c;
}

static jinja_node *parse_math1(parser *P) {
    jinja_node *n = parse_concat(P);
    for (;;) {
        const jinja_token *t = peek(P);
        int op = tok_op(t, "+") ? OP_ADD : tok_op(t, "-") ? OP_SUB : -1;
        if (op < 0) return n;
        next(P);
        n = binop(P, t, op, n, parse_concat(P));
    }
}

static jinja_node *parse_compare(parser *P) {
    const jinja_token *at = peek(P);
    jinja_node *first = parse_math1(P);
    nodes operands = {0};
    int ops[64];
    size_t n_ops = 0;
    for (;;) {
        const jinja_token *t = peek(P);
        int op = tok_op(t, "==") ? OP_EQ : tok_op(t, "!=") ? OP_NE : tok_op(t, "<") ? OP_LT
               : tok_op(t, "<=") ? OP_LE : tok_op(t, ">") ? OP_GT : tok_op(t, ">=") ? OP_GE
               : tok_name(t, "in") ? OP_IN : (tok_name(t, "not") && tok_name(peek2(P), "in")) ? OP_NOTIN : -1;
        if (op < 0) break;
        if (n_ops == 64) fail_at(P, t, "%s", "more than 64 chained comparisons");
        next(P);
        if (op == OP_NOTIN) next(P);
        ops[n_ops++] = op;
        nodes_push(P, &operands, parse_math1(P));
    }
    if (!n_ops) return first;
    jinja_node *n = node(P, N_COMPARE, at);
    n->a = first;
    n->kids = operands.v, n->n_kids = operands.n;
    n->ops = jinja_alloc(P->a, n_ops * sizeof *n->ops);
    memcpy(n->ops, ops, n_ops * sizeof *ops);
    return n;
}

static jinja_node *parse_not(parser *P) {
    const jinja_token *t = peek(P);
    if (tok_name(t, "not")) {
        next(P);
        enter(P);
        jinja_node *n = node(P, N_NOT, t);
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static jinja_node *parse_and(parser *P) {
    jinja_node *n = parse_not(P);
    while (tok_name(peek(P), "and")) {
        const jinja_token *t = next(P);
        jinja_node *x = node(P, N_AND, t);
        x->a = n, x->b = parse_not(P);
        n = x;
    }
    return n;
}

static jinja_node *parse_or(parser *P) {
    jinja_node *n = parse_and(P);
    while (tok_name(peek(P), "or")) {
        const jinja_token *t = next(P);
        jinja_node *x = node(P, N_OR, t);
        x->a = n, x->b = parse_and(P);
        n = x;
    }
    return n;
}

static jinja_node *parse_expr(parser *P) {
    enter(P);
    jinja_node *n = parse_or(P);
    while (tok_name(peek(P), "if")) {
        const jinja_token *t = next(P);
        jinja_node *c = node(P, N_COND, t);
        c->b = n;
        c->a = parse_or(P);
        if (tok_name(peek(P), "else")) {
            next(P);
            c->c = parse_expr(P);
        }
        n = c;
    }
    P->depth--;
    return n;
}

/* An expression, or several separated by commas (a tuple), as after {{ or "set x =". */
static jinja_node *parse_tuple(parser *P, bool condexpr) {
    const jinja_token *at = peek(P);
    jinja_node *first = condexpr ? parse_expr(P) : parse_or(P);
    if (!tok_op(peek(P), ",")) return first;
    nodes items = {0};
    nodes_push(P, &items, first);
    while (tok_op(peek(P), ",")) {
        next(P);
        if (peek(P)->type == T_BLOCK_END || peek(P)->type == T_VAR_END || tok_name(peek(P), "if")) break;
        nodes_push(P, &items, condexpr ? parse_expr(P) : parse_or(P));
    }
    jinja_node *n = node(P, N_TUPLE, at);
    n->kids = items.v, n->n_kids = items.n;
    return n;
}

/* "x", "a, b", "(a, b)", or with allow_attr "ns.x". */
static jinja_node *parse_target(parser *P, bool allow_attr) {
    const jinja_token *at = peek(P);
    bool paren = tok_op(at, "(");
    if (paren) next(P);
    nodes names = {0};
    for (;;) {
        const jinja_token *t = peek(P);
        expect_type(P, T_NAME, "a variable name");
        jinja_node *n = node(P, N_NAME, t);
        n->s = name_of(P, t);
        if (allow_attr && !paren && !names.n && tok_op(peek(P), ".")) {
            next(P);
            const jinja_token *attr = peek(P);
            expect_type(P, T_NAME, "an attribute name");
            jinja_node *a = node(P, N_ATTR, attr);
            a->a = n;
            a->s = name_of(P, attr);
            return a;
        }
        nodes_push(P, &names, n);
        if (!tok_op(peek(P), ",")) break;
        next(P);
    }
    if (paren) expect_op(P, ")");
    if (names.n == 1 && !paren) return names.v[0];
    jinja_node *tup = node(P, N_TUPLE, at);
    tup->kids = names.v, tup->n_kids = names.n;
    return tup;
}

static jinja_node *parse_body(parser *P, const char *const *ends, const jinja_token *opener);

/* The keyword of the closing tag parse_body stopped at, consumed with its '{%'. */
static const jinja_token *end_keyword(parser *P) {
    next(P);
    return next(P);
}

static void block_end(parser *P) { expect_type(P, T_BLOCK_END, "'%}'"); }

static jinja_node *parse_if(parser *P, const jinja_token *kw) {
    jinja_node *n = node(P, N_IF, kw);
    n->a = parse_tuple(P, true);
    block_end(P);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    n->b = parse_body(P, ends, kw);
    const jinja_token *e = end_keyword(P);
    if (tok_name(e, "elif")) {
        enter(P);
        n->c = parse_if(P, e);
        P->depth--;
    } else if (tok_name(e, "else")) {
        block_end(P);
        static const char *const endif[] = {"endif", NULL};
        n->c = parse_body(P, endif, kw);
        end_keyword(P);
        block_end(P);
    } else {
        block_end(P);
    }
    return n;
}

static jinja_node *parse_for(parser *P, const jinja_token *kw) {
    jinja_node *n = node(P, N_FOR, kw);
    n->a = parse_target(P, false);
    if (!tok_name(peek(P), "in")) fail_at(P, peek(P), "expected 'in' in the for tag, found %s", tok_desc(peek(P)));
    next(P);
    n->b = parse_tuple(P, false);
    if (tok_name(peek(P), "if")) {
        next(P);
        n->c = parse_expr(P);
    }
    if (tok_name(peek(P), "recursive")) fail_at(P, peek(P), "%s", "recursive loops are not supported");
    block_end(P);
    static const char *const ends[] = {"else", "endfor", NULL};
    P->loops++;
    jinja_node *body = parse_body(P, ends, kw);
    P->loops--;
    n->kids = jinja_alloc(P->a, sizeof *n->kids);
    n->kids[0] = body;
    n->n_kids = 1;
    if (tok_name(end_keyword(P), "else")) {
        block_end(P);
        static const char *const endfor[] = {"endfor", NULL};
        jinja_node *els = parse_body(P, endfor, kw);
        n->kids2 = jinja_alloc(P->a, sizeof *n->kids2);
        n->kids2[0] = els;
        n->n_kids2 = 1;
        end_keyword(P);
    }
    block_end(P);
    return n;
}

/* Filters of a filter block or block set: "name(args) | name2" (the chain's innermost input is
 * NULL: the rendered body). */
static jinja_node *parse_filter_chain(parser *P) {
    jinja_node *f = parse_filter(P, NULL);
    while (tok_op(peek(P), "|")) {
        next(P);
        f = parse_filter(P, f);
    }
    return f;
}

static jinja_node *parse_set(parser *P, const jinja_token *kw) {
    jinja_node *target = parse_target(P, true);
    if (tok_op(peek(P), "=")) {
        next(P);
        jinja_node *n = node(P, N_SET, kw);
        n->a = target;
        n->b = parse_tuple(P, true);
        block_end(P);
        return n;
    }
    if (target->type != N_NAME) fail_at(P, kw, "%s", "a block set assigns one plain name");
    jinja_node *n = node(P, N_SETBLOCK, kw);
    n->a = target;
    if (tok_op(peek(P), "|")) {
        next(P);
        n->filters = parse_filter_chain(P);
    }
    block_end(P);
    static const char *const ends[] = {"endset", NULL};
    n->b = parse_body(P, ends, kw);
    end_keyword(P);
    block_end(P);
    return n;
}

/* "(a, b=1)" of a macro or call block: names in names, defaults (or NULL) in kids. */
static void parse_params(parser *P, jinja_node *n) {
    expect_op(P, "(");
    nodes names = {0}, defs = {0};
    while (!tok_op(peek(P), ")")) {
        if (names.n) expect_op(P, ",");
        if (tok_op(peek(P), ")")) break;
        const jinja_token *t = peek(P);
        expect_type(P, T_NAME, "a parameter name");
        nodes_push(P, &names, (jinja_node *)name_of(P, t));
        jinja_node *def = NULL;
        if (tok_op(peek(P), "=")) {
            next(P);
            def = parse_expr(P);
        } else if (defs.n && defs.v[defs.n - 1]) {
            fail_at(P, t, "%s", "a parameter without a default after one with a default");
        }
        nodes_push(P, &defs, def);
    }
    next(P);
    n->names = (const char **)names.v, n->n_names = names.n;
    n->kids = defs.v, n->n_kids = defs.n;
}

static jinja_node *parse_macro(parser *P, const jinja_token *kw, bool call_block) {
    jinja_node *n = node(P, call_block ? N_CALLBLOCK : N_MACRO, kw);
    if (call_block) {
        if (tok_op(peek(P), "(")) parse_params(P, n);
        n->a = parse_expr(P);
        if (n->a->type != N_CALL) fail_at(P, kw, "%s", "{% call %} needs a macro call, as in {% call m() %}");
    } else {
        const jinja_token *nm = peek(P);
        expect_type(P, T_NAME, "a macro name");
        n->s = name_of(P, nm);
        parse_params(P, n);
    }
    block_end(P);
    static const char *const endm[] = {"endmacro", NULL}, *const endc[] = {"endcall", NULL};
    int loops = P->loops;
    P->loops = 0;
    n->b = parse_body(P, call_block ? endc : endm, kw);
    P->loops = loops;
    end_keyword(P);
    block_end(P);
    return n;
}

static jinja_node *parse_statement(parser *P) {
    const jinja_token *kw = peek(P);
    if (kw->type != T_NAME) fail_at(P, kw, "expected a tag name after '{%%', found %s", tok_desc(kw));
    next(P);
    if (tok_name(kw, "if")) return parse_if(P, kw);
    if (tok_name(kw, "for")) return parse_for(P, kw);
    if (tok_name(kw, "set")) return parse_set(P, kw);
    if (tok_name(kw, "macro")) return parse_macro(P, kw, false);
    if (tok_name(kw, "call")) return parse_macro(P, kw, true);
    if (tok_name(kw, "filter")) {
        jinja_node *n = node(P, N_FILTERBLOCK, kw);
        n->filters = parse_filter_chain(P);
        block_end(P);
        static const char *const ends[] = {"endfilter", NULL};
        n->b = parse_body(P, ends, kw);
        end_keyword(P);
        block_end(P);
        return n;
    }
    if (tok_name(kw, "with")) {
        /* {% with a = 1, b = x %}: a scope of its own; the values are read outside it */
        jinja_node *n = node(P, N_WITH, kw);
        nodes names = {0}, vals = {0};
        while (peek(P)->type != T_BLOCK_END) {
            if (names.n) expect_op(P, ",");
            const jinja_token *t = peek(P);
            expect_type(P, T_NAME, "a variable name");
            jinja_node *target = node(P, N_NAME, t);
            target->s = name_of(P, t);
            nodes_push(P, &names, target);
            expect_op(P, "=");
            nodes_push(P, &vals, parse_expr(P));
        }
        block_end(P);
        static const char *const ends[] = {"endwith", NULL};
        n->b = parse_body(P, ends, kw);
        end_keyword(P);
        block_end(P);
        n->kids = vals.v, n->n_kids = vals.n;
        n->kids2 = names.v, n->n_kids2 = names.n;
        return n;
    }
    if (tok_name(kw, "generation")) {
        /* transformers marks assistant text with it; it renders its body */
        block_end(P);
        static const char *const ends[] = {"endgeneration", NULL};
        jinja_node *body = parse_body(P, ends, kw);
        end_keyword(P);
        block_end(P);
        return body;
    }
    if (tok_name(kw, "break") || tok_name(kw, "continue")) {
        if (!P->loops) fail_at(P, kw, "'%s' outside a for loop", tok_name(kw, "break") ? "break" : "continue");
        block_end(P);
        return node(P, tok_name(kw, "break") ? N_BREAK : N_CONTINUE, kw);
    }
    fail_at(P, kw, "unknown or misplaced tag '%s'", name_of(P, kw));
}

static jinja_node *parse_body(parser *P, const char *const *ends, const jinja_token *opener) {
    enter(P);
    jinja_node *body = node(P, N_BODY, peek(P));
    nodes items = {0};
    for (;;) {
        const jinja_token *t = peek(P);
        if (t->type == T_EOF) {
            if (!ends) break;
            const char *end = ends[0];
            for (size_t k = 0; ends[k]; k++)
                if (!strncmp(ends[k], "end", 3)) end = ends[k];
            char msg[160];
            snprintf(msg, sizeof msg, "the tag at %d:%d is never closed (add {%% %s %%})", opener->line,
                     opener->col, end);
            fail_at(P, t, "%s", msg);
        }
        if (t->type == T_TEXT) {
            next(P);
            jinja_node *x = node(P, N_TEXT, t);
            x->s = t->s, x->sn = t->n;
            nodes_push(P, &items, x);
        } else if (t->type == T_VAR_BEGIN) {
            next(P);
            jinja_node *x = node(P, N_OUTPUT, t);
            x->a = parse_tuple(P, true);
            expect_type(P, T_VAR_END, "'}}'");
            nodes_push(P, &items, x);
        } else if (t->type == T_BLOCK_BEGIN) {
            const jinja_token *kw = peek2(P);
            bool is_end = false;
            for (size_t k = 0; ends && ends[k]; k++)
                if (tok_name(kw, ends[k])) is_end = true;
            if (is_end) break;
            next(P);
            nodes_push(P, &items, parse_statement(P));
        } else {
            fail_at(P, t, "unexpected %s", tok_desc(t));
        }
    }
    body->kids = items.v, body->n_kids = items.n;
    P->depth--;
    return body;
}

jinja_node *jinja_parse_tokens(jinja_arena *a, const jinja_token *toks, size_t n) {
    parser P = {.a = a, .t = toks, .n = n};
    return parse_body(&P, NULL, toks);
}
