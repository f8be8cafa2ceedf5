/* Shared inside the Jinja engine (engine/jinja_*.c): the arena every value and node lives in,
 * the value model (Python's types as the templates see them), the syntax tree, and the render
 * context. Errors leave a message and longjmp to the entry point (jinja_parse / jinja_render),
 * which frees the whole arena: no partial cleanup paths anywhere else. */
#ifndef MGI_JINJA_INTERNAL_H
#define MGI_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/jinja.h"

/* --- arena and failure ----------------------------------------------------------------------- */

typedef struct jinja_block jinja_block;

typedef struct {
    jinja_block *head;
    size_t used, limit;     /* bytes handed out (and block overhead) / the most allowed */
    jmp_buf *fail;          /* where jinja_fail jumps */
    char *err;
    size_t err_size;
    int line, col;          /* of the node being evaluated: where a failure below it is reported */
} jinja_arena;

void *jinja_alloc(jinja_arena *a, size_t n);   /* zeroed; fails (longjmp) past the limit */
char *jinja_strndup(jinja_arena *a, const char *s, size_t n);
void jinja_arena_free(jinja_arena *a);
/* Leaves "LINE:COL: message" (control characters escaped, so it stays one line) and jumps. */
_Noreturn void jinja_fail(jinja_arena *a, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* --- values ------------------------------------------------------------------------------------ */

typedef enum {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS, JV_FUNC
} jinja_kind;

typedef struct jinja_list jinja_list;
typedef struct jinja_dict jinja_dict;
typedef struct jinja_func jinja_func;

/* Passed by value. Strings are immutable slices of the arena; lists, dicts and namespaces are
 * shared by reference, as in Python. An undefined value keeps, in s, what it stands for
 * ("'x' is undefined") for the error raised when it is used. */
typedef struct {
    jinja_kind kind;
    bool safe;            /* JV_STR: a markupsafe Markup (from |safe, |escape): "+" escapes the other side */
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s;
        jinja_list *l;
        jinja_dict *d;
        jinja_func *fn;
    };
} jinja_value;

/* tuple: made as a Python tuple (a literal, dict.items() pairs): prints as (a, b).
 * lazy: a generator in jinja2 (what map, select, reject, selectattr, rejectattr, items, batch,
 * unique and reverse return): always true, no len(), not JSON serializable, not subscriptable;
 * |list makes a list of it. */
struct jinja_list { jinja_value *v; size_t n, cap; bool frozen, tuple, lazy; };
/* k/kn: the key's text. key: JV_UNDEF for a string key (the usual case), else the key itself
 * (an int or other scalar, as dict literals in templates may use). */
typedef struct { const char *k; size_t kn; jinja_value v; jinja_value key; } jinja_entry;
struct jinja_dict { jinja_entry *e; size_t n, cap; bool frozen; };

typedef struct jinja_node jinja_node;
typedef struct jinja_scope jinja_scope;

typedef enum { JF_MACRO, JF_BUILTIN, JF_METHOD, JF_CYCLE } jinja_func_kind;
struct jinja_func {
    jinja_func_kind kind;
    const char *name;
    const jinja_node *macro;     /* JF_MACRO */
    jinja_scope *closure;        /* JF_MACRO: where it was defined */
    jinja_value self;            /* JF_METHOD: the object; JF_CYCLE: the loop dict */
};

/* --- syntax tree ------------------------------------------------------------------------------- */

typedef enum {
    /* expressions */
    N_CONST, N_NAME, N_LIST, N_TUPLE, N_DICT, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST,
    N_NEG, N_POS, N_NOT, N_AND, N_OR, N_BINOP, N_COMPARE, N_COND, N_CONCAT,
    /* statements */
    N_BODY, N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK,
    N_WITH,
    N_BREAK, N_CONTINUE
} jinja_node_type;

/* Binary and comparison operators (N_BINOP's and N_COMPARE's op). */
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

/* One node type for everything, fields used per type:
 *   a, b, c   operands (ATTR/ITEM/FILTER/TEST: a object; SLICE: a obj, kids[0..2] start/stop/step;
 *             COND: a test, b yes, c no; FOR: a target, b iterable, c condition; SET: a target,
 *             b value; CALLBLOCK: a the call; WITH: b body)
 *   kids      list items, call/filter/test positional args, statement bodies, compare operands,
 *             macro parameter defaults (NULL where none)
 *   kids2     DICT values, keyword argument values, else bodies, WITH targets
 *   names     keyword argument names, macro parameter names, tuple targets
 *   s         name (NAME, ATTR, FILTER, TEST, MACRO), text (TEXT)
 *   ops       COMPARE operators, one per operand after the first */
struct jinja_node {
    jinja_node_type type;
    int line, col;
    int op;
    bool negate;          /* TEST: "is not" */
    jinja_node *a, *b, *c;
    jinja_node **kids, **kids2;
    size_t n_kids, n_kids2;
    const char **names;
    size_t n_names;
    const char *s;
    size_t sn;
    int *ops;
    jinja_value v;        /* CONST */
    jinja_node *filters;  /* SETBLOCK / FILTERBLOCK: chain of N_FILTER whose innermost a is NULL */
};

struct jinja_template {
    jinja_arena arena;
    jinja_node *root;
};

/* --- lexer ------------------------------------------------------------------------------------- */

typedef enum { T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING,
               T_INT, T_FLOAT, T_OP, T_EOF } jinja_tok_type;

typedef struct {
    jinja_tok_type type;
    int line, col;
    const char *s;   /* TEXT, NAME, STRING (unescaped), OP; in the arena */
    size_t n;
    int64_t i;
    double f;
} jinja_token;

/* Tokens of the whole source with jinja2's whitespace rules applied to the text between tags
 * (trim_blocks, lstrip_blocks, "-" markers, one trailing newline dropped); raw blocks become
 * text. *n_out tokens, the last one T_EOF. */
jinja_token *jinja_lex(jinja_arena *a, const char *src, size_t len, size_t *n_out);

/* --- parser ------------------------------------------------------------------------------------ */

jinja_node *jinja_parse_tokens(jinja_arena *a, const jinja_token *toks, size_t n);

/* --- render context ---------------------------------------------------------------------------- */

struct jinja_scope {
    jinja_scope *parent;
    jinja_dict vars;
};

typedef struct {
    char *p;
    size_t n, cap;
} jinja_buf;

typedef struct {
    jinja_arena *arena;
    jinja_limits lim;
    jinja_scope *globals;
    jinja_buf *out;       /* where text goes now (a macro or set block renders into its own) */
    jinja_scope *scope;   /* where names are looked up now */
    uint64_t steps;
    int depth;
} jinja_ctx;

_Noreturn void jinja_error(jinja_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --- values (jinja_value.c) -------------------------------------------------------------------- */

jinja_value jinja_val_undef(jinja_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
jinja_value jinja_val_none(void);
jinja_value jinja_val_bool(bool b);
jinja_value jinja_val_int(int64_t i);
jinja_value jinja_val_float(double f);
jinja_value jinja_val_str(const char *p, size_t n);   /* p must live in the arena (or be static) */
jinja_value jinja_val_cstr(const char *p);
jinja_value jinja_val_strdup(jinja_ctx *c, const char *p, size_t n);
jinja_value jinja_val_list(jinja_ctx *c, size_t cap);
jinja_value jinja_val_dict(jinja_ctx *c);
void jinja_val_list_push(jinja_ctx *c, jinja_list *l, jinja_value v);
void jinja_val_dict_set(jinja_ctx *c, jinja_dict *d, const char *k, size_t kn, jinja_value v);
jinja_value *jinja_val_dict_find(const jinja_dict *d, const char *k, size_t kn);   /* NULL when absent */
/* Any key value (a str, an int...), for dict literals, subscripts, `in` and comparisons. */
jinja_value *jinja_val_dict_find_key(const jinja_dict *d, jinja_value key);
void jinja_val_dict_set_key(jinja_ctx *c, jinja_dict *d, jinja_value key, jinja_value v);
jinja_value jinja_val_entry_key(const jinja_entry *e);

const char *jinja_val_type_name(jinja_value v);    /* Python's: 'str', 'dict', 'NoneType' ... */
bool jinja_val_truthy(jinja_value v);
bool jinja_val_equal(jinja_value a, jinja_value b);
/* -1, 0, 1; strings by code point, numbers by value; other pairs are an error. */
int jinja_val_compare(jinja_ctx *c, jinja_value a, jinja_value b);
bool jinja_val_is_number(jinja_value v);   /* int, float or bool, as Python's numbers.Number */
double jinja_val_as_double(jinja_value v);

/* str(v) and repr(v) as Python writes them (None, True, 1.0, ['a'], {'k': 1}). */
void jinja_val_str_append(jinja_ctx *c, jinja_buf *b, jinja_value v, bool repr);
jinja_value jinja_val_to_str(jinja_ctx *c, jinja_value v);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys), as transformers' tojson calls it
 * (ensure_ascii false by default there). indent: the text of one level (NULL: all on one line). */
typedef struct {
    const char *indent;
    const char *item_sep, *key_sep;
    bool sort_keys, ascii;
} jinja_json_opts;
void jinja_val_json_append(jinja_ctx *c, jinja_buf *b, jinja_value v, const jinja_json_opts *o, int level);
jinja_value jinja_val_from_cjson(jinja_ctx *c, const void *cjson);   /* frozen lists and dicts */

void jinja_buf_add(jinja_ctx *c, jinja_buf *b, const char *p, size_t n);
void jinja_buf_addc(jinja_ctx *c, jinja_buf *b, char ch);
jinja_value jinja_buf_value(jinja_buf *b);

/* Python's str.isspace for one code point, and UTF-8 code point counting / indexing. */
bool jinja_is_space(uint32_t cp);
size_t jinja_utf8_len(const char *p, size_t n);
size_t jinja_utf8_offset(const char *p, size_t n, size_t index);  /* byte offset of code point */
/* Python's str.lower / str.upper / str.title / str.capitalize (mode 'l', 'u', 't', 'c') and
 * jinja2's title filter ('T': words split at whitespace and -([{<): ASCII, Latin-1, Latin
 * Extended-A, Greek and Cyrillic letters; other scripts stay as they are. */
jinja_value jinja_str_case(jinja_ctx *c, jinja_value s, char mode);
/* Python's str.strip / lstrip / rstrip (which: 'b', 'l', 'r'); chars NULL: whitespace. */
jinja_value jinja_str_strip(jinja_value s, const char *chars, size_t nchars, char which);

/* --- evaluator (jinja_eval.c) ------------------------------------------------------------------ */

jinja_value jinja_eval(jinja_ctx *c, const jinja_node *n);
/* Calls a callable value with evaluated arguments. */
jinja_value jinja_call(jinja_ctx *c, jinja_value fn, jinja_value *args, size_t n_args,
                       const char **kw_names, jinja_value *kw_vals, size_t n_kw);
jinja_value jinja_getattr(jinja_ctx *c, jinja_value obj, const char *name, size_t n);
jinja_value jinja_getitem(jinja_ctx *c, jinja_value obj, jinja_value key);
/* The items of an iterable (list, dict keys, string characters, undefined: none). */
jinja_list *jinja_iterate(jinja_ctx *c, jinja_value v);
void jinja_step(jinja_ctx *c);    /* counts one step against max_steps */
void jinja_steps(jinja_ctx *c, uint64_t n);  /* counts n + 1 */

/* --- filters, tests, methods, globals (jinja_filters.c, jinja_methods.c) ------------------------- */

/* Argument binding for builtins: positional then keyword, by parameter name. */
typedef struct {
    jinja_value *args;
    size_t n_args;
    const char **kw_names;
    jinja_value *kw_vals;
    size_t n_kw;
} jinja_args;

/* Parameter i (named name) of a builtin, or def when not given. */
jinja_value jinja_arg(jinja_ctx *c, const jinja_args *a, size_t i, const char *name, jinja_value def);
void jinja_args_check(jinja_ctx *c, const jinja_args *a, const char *what, const char *const *names);

jinja_value jinja_filter(jinja_ctx *c, const char *name, jinja_value v, const jinja_args *a);
/* markupsafe's escape: & < > " ' as entities. */
jinja_value jinja_escape(jinja_ctx *c, jinja_value s);
bool jinja_test(jinja_ctx *c, const char *name, jinja_value v, const jinja_args *a);
bool jinja_test_exists(const char *name);
/* Whether obj has the method (x.strip, d.items, l.append), and calling it. */
bool jinja_method_exists(jinja_value obj, const char *name, size_t n);
jinja_value jinja_method_call(jinja_ctx *c, jinja_value self, const char *name, const jinja_args *a);
/* The globals: range, namespace, dict, raise_exception, strftime_now. */
bool jinja_global_exists(const char *name, size_t n);
jinja_value jinja_global_call(jinja_ctx *c, const char *name, const jinja_args *a);

#endif
