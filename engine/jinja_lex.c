/* Jinja lexer: template text -> tokens, with jinja2's whitespace rules as transformers sets
 * them (trim_blocks: the newline after a block or comment tag goes; lstrip_blocks: spaces and
 * tabs before a block or comment tag at the start of a line go; "-" inside a tag strips all
 * whitespace on that side, "+" keeps it; one trailing newline of the source is dropped). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jinja_internal.h"
#include "engine/unicode.h"

typedef struct {
    jinja_arena *a;
    const char *src;
    size_t len, pos;
    jinja_token *t;
    size_t n, cap;
    int depth;            /* open ( [ { inside a tag: "}}" closes the tag only at 0 */
    size_t at_pos;        /* line and column of at_pos, so positions are found incrementally */
    int at_line, at_col;
} lexer;

/* Line and column (1-based, columns in characters) of a byte position. */
static void lex_where(lexer *L, size_t pos, int *line, int *col) {
    if (pos < L->at_pos || L->at_line == 0) L->at_pos = 0, L->at_line = 1, L->at_col = 1;
    for (size_t i = L->at_pos; i < pos && i < L->len; i++) {
        if (L->src[i] == '\n') L->at_line++, L->at_col = 1;
        else if (((unsigned char)L->src[i] & 0xC0) != 0x80) L->at_col++;
    }
    L->at_pos = pos;
    *line = L->at_line, *col = L->at_col;
}

_Noreturn static void lex_fail(lexer *L, size_t pos, const char *what) {
    int line, col;
    lex_where(L, pos, &line, &col);
    jinja_fail(L->a, line, col, "%s", what);
}

static jinja_token *lex_push(lexer *L, jinja_tok_type type, size_t pos) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jinja_token *t = jinja_alloc(L->a, cap * sizeof *t);
        if (L->n) memcpy(t, L->t, L->n * sizeof *t);
        L->t = t, L->cap = cap;
    }
    jinja_token *t = &L->t[L->n++];
    memset(t, 0, sizeof *t);
    t->type = type;
    lex_where(L, pos, &t->line, &t->col);
    return t;
}

static bool is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }
static bool is_ident(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || (ch >= '0' && ch <= '9');
}

/* Length of the whitespace (Python's str.isspace) at s[0..n), from the front or the back. */
static size_t ws_front(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = unicode_decode(s + i, n - i, &cp);
        if (!jinja_is_space(cp)) break;
        i += k;
    }
    return i;
}

static size_t ws_back(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t st = end - 1;
        while (st > 0 && ((unsigned char)s[st] & 0xC0) == 0x80 && end - st < 4) st--;
        uint32_t cp;
        size_t k = unicode_decode(s + st, end - st, &cp);
        if (st + k != end || !jinja_is_space(cp)) break;
        end = st;
    }
    return n - end;
}

static void lex_text(lexer *L, size_t start, size_t end) {
    if (end <= start) return;
    jinja_token *t = lex_push(L, T_TEXT, start);
    t->s = L->src + start;
    t->n = end - start;
}

/* The body of a string literal, with Python's escapes (jinja2 decodes them as unicode-escape). */
static void lex_string(lexer *L) {
    size_t start = L->pos;
    char q = L->src[L->pos++];
    jinja_buf b = {0};
    jinja_ctx c = {.arena = L->a, .lim = {.max_output = (size_t)-1}};
    for (;;) {
        if (L->pos >= L->len) lex_fail(L, start, "unterminated string literal (add the closing quote)");
        char ch = L->src[L->pos++];
        if (ch == q) break;
        if (ch != '\\') {
            jinja_buf_addc(&c, &b, ch);
            continue;
        }
        if (L->pos >= L->len) lex_fail(L, start, "unterminated string literal (add the closing quote)");
        char e = L->src[L->pos++];
        const char *simple = strchr("\\'\"abfnrtv\n", e);
        if (simple && e) {
            static const char out[] = "\\'\"\a\b\f\n\r\t\v";
            if (e != '\n') jinja_buf_addc(&c, &b, out[simple - "\\'\"abfnrtv\n"]);
        } else if (e >= '0' && e <= '7') {
            unsigned v = (unsigned)(e - '0');
            for (int k = 0; k < 2 && L->pos < L->len && L->src[L->pos] >= '0' && L->src[L->pos] <= '7'; k++)
                v = v * 8 + (unsigned)(L->src[L->pos++] - '0');
            char u[4];
            jinja_buf_add(&c, &b, u, unicode_encode(v, u));
        } else if (e == 'x' || e == 'u' || e == 'U') {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                char h = L->pos < L->len ? L->src[L->pos] : 0;
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) lex_fail(L, L->pos, "truncated \\x, \\u or \\U escape in a string literal");
                v = v * 16 + (uint32_t)d;
                L->pos++;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
                lex_fail(L, L->pos, "escape names no Unicode character (above U+10FFFF or a surrogate)");
            char u[4];
            jinja_buf_add(&c, &b, u, unicode_encode(v, u));
        } else {
            /* Python keeps an unknown escape as it is, backslash included */
            jinja_buf_addc(&c, &b, '\\');
            jinja_buf_addc(&c, &b, e);
        }
    }
    jinja_token *t = lex_push(L, T_STRING, start);
    t->s = b.p ? b.p : "";
    t->n = b.n;
}

static void lex_number(lexer *L, bool after_dot) {
    size_t start = L->pos, i = L->pos;
    bool is_float = false;
    while (i < L->len && ((L->src[i] >= '0' && L->src[i] <= '9') || L->src[i] == '_')) i++;
    if (!after_dot) {
        if (i + 1 < L->len && L->src[i] == '.' && L->src[i + 1] >= '0' && L->src[i + 1] <= '9') {
            is_float = true;
            i++;
            while (i < L->len && ((L->src[i] >= '0' && L->src[i] <= '9') || L->src[i] == '_')) i++;
        }
        if (i < L->len && (L->src[i] == 'e' || L->src[i] == 'E')) {
            size_t j = i + 1;
            if (j < L->len && (L->src[j] == '+' || L->src[j] == '-')) j++;
            if (j < L->len && L->src[j] >= '0' && L->src[j] <= '9') {
                is_float = true;
                i = j;
                while (i < L->len && L->src[i] >= '0' && L->src[i] <= '9') i++;
            }
        }
    }
    char buf[64];
    size_t k = 0;
    for (size_t j = start; j < i; j++)
        if (L->src[j] != '_') {
            if (k + 1 >= sizeof buf) lex_fail(L, start, "number literal too long");
            buf[k++] = L->src[j];
        }
    buf[k] = 0;
    jinja_token *t = lex_push(L, is_float ? T_FLOAT : T_INT, start);
    if (is_float) {
        t->f = strtod(buf, NULL);
    } else {
        errno = 0;
        unsigned long long v = strtoull(buf, NULL, 10);
        if (errno || v > INT64_MAX) lex_fail(L, start, "integer literal too large (mgi's integers are 64-bit)");
        t->i = (int64_t)v;
    }
    L->pos = i;
}

static const char *const ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                  "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};

/* The inside of {{ }} or {% %} from L->pos up to and past its end marker. */
static void lex_tag(lexer *L, bool block, size_t open_pos) {
    L->depth = 0;
    for (;;) {
        while (L->pos < L->len && is_ws(L->src[L->pos])) L->pos++;
        if (L->pos >= L->len)
            lex_fail(L, open_pos, block ? "unclosed '{%' tag (add '%}')" : "unclosed '{{' (add '}}')");
        const char *s = L->src + L->pos;
        size_t left = L->len - L->pos;
        char close = block ? '%' : '}';
        if (L->depth == 0) {
            char sign = (s[0] == '-' || s[0] == '+') ? s[0] : 0;
            size_t at = sign ? 1 : 0;
            if (left >= at + 2 && s[at] == close && s[at + 1] == '}' && (sign != '+' || block)) {
                lex_push(L, block ? T_BLOCK_END : T_VAR_END, L->pos);
                L->pos += at + 2;
                if (sign == '-') L->pos += ws_front(L->src + L->pos, L->len - L->pos);
                else if (block && sign != '+' && L->pos < L->len && L->src[L->pos] == '\n') L->pos++;
                return;
            }
        }
        char ch = s[0];
        if (ch == '\'' || ch == '"') {
            lex_string(L);
        } else if (ch >= '0' && ch <= '9') {
            bool after_dot = L->n > 0 && L->t[L->n - 1].type == T_OP && L->t[L->n - 1].s[0] == '.';
            lex_number(L, after_dot);
        } else if (is_ident(ch)) {
            size_t i = L->pos;
            while (i < L->len && is_ident(L->src[i])) i++;
            jinja_token *t = lex_push(L, T_NAME, L->pos);
            t->s = L->src + L->pos;
            t->n = i - L->pos;
            L->pos = i;
        } else {
            size_t k;
            for (k = 0; k < sizeof ops / sizeof ops[0]; k++) {
                size_t on = strlen(ops[k]);
                if (left >= on && !memcmp(s, ops[k], on)) break;
            }
            if (k == sizeof ops / sizeof ops[0]) {
                char what[80];
                snprintf(what, sizeof what, "unexpected character '%c' in a tag", ch >= 32 && ch < 127 ? ch : '?');
                lex_fail(L, L->pos, what);
            }
            if (ch == '(' || ch == '[' || ch == '{') L->depth++;
            if ((ch == ')' || ch == ']' || ch == '}') && L->depth > 0) L->depth--;
            jinja_token *t = lex_push(L, T_OP, L->pos);
            t->s = ops[k];
            t->n = strlen(ops[k]);
            L->pos += t->n;
        }
    }
}

/* At "{%": "{% raw %}" (with optional -/+ markers)? Sets *end past its "%}" and *strip_after. */
static bool lex_is_keyword_tag(lexer *L, size_t pos, const char *word, size_t *end, char *sign_before,
                               char *sign_after) {
    const char *s = L->src;
    size_t i = pos + 2;
    *sign_before = 0;
    if (i < L->len && (s[i] == '-' || s[i] == '+')) *sign_before = s[i++];
    while (i < L->len && is_ws(s[i])) i++;
    size_t wn = strlen(word);
    if (L->len - i < wn || memcmp(s + i, word, wn) || (i + wn < L->len && is_ident(s[i + wn]))) return false;
    i += wn;
    while (i < L->len && is_ws(s[i])) i++;
    *sign_after = 0;
    if (i < L->len && (s[i] == '-' || s[i] == '+')) *sign_after = s[i++];
    if (L->len - i < 2 || s[i] != '%' || s[i + 1] != '}') return false;
    *end = i + 2;
    return true;
}

jinja_token *jinja_lex(jinja_arena *a, const char *src, size_t len, size_t *n_out) {
    /* newlines normalised to \n and one trailing newline dropped, as jinja2's lexer does */
    char *norm = jinja_alloc(a, len + 1);
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[m++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            norm[m++] = src[i];
        }
    }
    if (m > 0 && norm[m - 1] == '\n') m--;
    lexer L = {.a = a, .src = norm, .len = m};
    while (L.pos < L.len) {
        size_t tag = L.pos;
        while (tag + 1 < L.len && !(L.src[tag] == '{' && strchr("{%#", L.src[tag + 1]))) tag++;
        if (tag + 1 >= L.len) {
            lex_text(&L, L.pos, L.len);
            break;
        }
        char kind = L.src[tag + 1];
        char sign = tag + 2 < L.len && (L.src[tag + 2] == '-' || L.src[tag + 2] == '+') ? L.src[tag + 2] : 0;
        size_t text_end = tag;
        if (sign == '-') {
            text_end -= ws_back(L.src + L.pos, tag - L.pos);
        } else if (sign != '+' && kind != '{') {
            size_t l_pos = tag;
            while (l_pos > L.pos && L.src[l_pos - 1] != '\n') l_pos--;
            bool line_start = l_pos > L.pos || L.pos == 0 || L.src[L.pos - 1] == '\n';
            if (line_start && ws_front(L.src + l_pos, tag - l_pos) == tag - l_pos) text_end = l_pos;
        }
        lex_text(&L, L.pos, text_end);
        size_t raw_end;
        char sb, sa;
        if (kind == '#') {
            const char *close = NULL;
            for (size_t i = tag + 2; i + 1 < L.len; i++)
                if (L.src[i] == '#' && L.src[i + 1] == '}') { close = L.src + i; break; }
            if (!close) lex_fail(&L, tag, "unclosed comment (add '#}')");
            size_t after = (size_t)(close - L.src) + 2;
            char csign = close > L.src + tag + 2 ? close[-1] : 0;
            if (csign == '-') after += ws_front(L.src + after, L.len - after);
            else if (csign != '+' && after < L.len && L.src[after] == '\n') after++;
            L.pos = after;
        } else if (kind == '%' && lex_is_keyword_tag(&L, tag, "raw", &raw_end, &sb, &sa)) {
            size_t i = raw_end, body_start = raw_end;
            if (sa == '-') body_start = i = raw_end + ws_front(L.src + raw_end, L.len - raw_end);
            size_t end_at = 0, after = 0;
            for (; i + 1 < L.len; i++)
                if (L.src[i] == '{' && L.src[i + 1] == '%' && lex_is_keyword_tag(&L, i, "endraw", &after, &sb, &sa)) {
                    end_at = i;
                    break;
                }
            if (!after) lex_fail(&L, tag, "unclosed raw block (add '{% endraw %}')");
            size_t body_end = end_at;
            if (sb == '-') body_end -= ws_back(L.src + body_start, end_at - body_start);
            lex_text(&L, body_start, body_end);
            if (sa == '-') after += ws_front(L.src + after, L.len - after);
            else if (sa != '+' && after < L.len && L.src[after] == '\n') after++;
            L.pos = after;
        } else {
            lex_push(&L, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, tag);
            L.pos = tag + 2 + (sign ? 1 : 0);
            lex_tag(&L, kind == '%', tag);
        }
    }
    lex_push(&L, T_EOF, L.len);
    *n_out = L.n;
    return L.t;
}
