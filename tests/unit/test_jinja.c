/* Unit tests of the Jinja engine (engine/jinja.h): expressions, filters, tests, whitespace
 * control, loops, macros, namespaces, slicing and tojson against outputs jinja2 gives
 * (tests/golden/jinja_cases.inc, made by scripts/jinja_cases.py from its named cases and the
 * snippets of tests/golden/jinja_snippets.txt); errors with line:column; the
 * render's bounds; and the 290 renders of ../shared/golden/chat (58 real templates x 5
 * conversations, byte-exact against transformers' apply_chat_template), and the same templates
 * with harder conversations (tests/golden/chat_extra_cases.json: tools, tool calls, documents,
 * thinking, content parts) against checksums of transformers' renders (chat_extra.crc). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "engine/chat.h"
#include "engine/jinja.h"
#include "tests/unit/test.h"

typedef struct { const char *name, *tpl, *vars, *want; } jcase;
static const jcase cases[] = {
#include "tests/golden/jinja_cases.inc"
};

/* Renders tpl with vars (JSON text); the text, or NULL with err filled. */
static char *render(const char *tpl, const char *vars, const jinja_limits *lim, char *err, size_t err_size) {
    jinja_template *t = jinja_parse(tpl, strlen(tpl), err, err_size);
    if (!t) return NULL;
    cJSON *v = cJSON_Parse(vars ? vars : "{}");
    size_t len;
    char *out = jinja_render(t, v, lim, &len, err, err_size);
    if (out && strlen(out) != len) {
        free(out);
        out = NULL;
        snprintf(err, err_size, "length %zu but a NUL inside", len);
    }
    cJSON_Delete(v);
    jinja_free(t);
    return out;
}

static void test_cases(void) {
    setenv("SOURCE_DATE_EPOCH", "1768435200", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[1024], name[128];
        snprintf(name, sizeof name, "jinja %s", cases[i].name);
        char *out = render(cases[i].tpl, cases[i].vars, NULL, err, sizeof err);
        if (!cases[i].want)  /* jinja2 raises: so must we */
            CHECK(!out, name, "rendered '%s' where jinja2 raises", out);
        else
            CHECK(out && !strcmp(out, cases[i].want), name, "got '%s' (%s), want '%s'", out ? out : "NULL",
                  out ? "rendered" : err, cases[i].want);
        free(out);
    }
}

/* The template fails (at parse or render) with a message that contains want. */
static void expect_error(const char *name, const char *tpl, const char *vars, const jinja_limits *lim,
                         const char *want) {
    char err[1024] = "", label[160];
    snprintf(label, sizeof label, "jinja error: %s", name);
    char *out = render(tpl, vars, lim, err, sizeof err);
    CHECK(!out && strstr(err, want) && !strchr(err, '\n'), label, "got %s '%s', want an error containing '%s'",
          out ? "output" : "error", out ? out : err, want);
    free(out);
}

static void test_errors(void) {
    expect_error("unclosed if names the opening tag", "a\n{% if x %}b", NULL, NULL,
                 "2:12: syntax error: the tag at 2:4 is never closed (add {% endif %})");
    expect_error("unclosed expression", "ab {{ x ", NULL, NULL, "1:4: unclosed '{{'");
    expect_error("bad token", "{{ x $ y }}", NULL, NULL, "1:6: unexpected character '$'");
    expect_error("unknown tag", "\n  {% frobnicate %}", NULL, NULL,
                 "2:6: syntax error: unknown or misplaced tag 'frobnicate'");
    expect_error("stray endfor", "{% endfor %}", NULL, NULL, "1:4: syntax error: unknown or misplaced tag 'endfor'");
    expect_error("unterminated string", "{{ 'abc }}", NULL, NULL, "1:4: unterminated string literal");
    expect_error("break outside a loop", "{% break %}", NULL, NULL, "'break' outside a for loop");
    expect_error("unclosed comment", "{# never", NULL, NULL, "1:1: unclosed comment");
    expect_error("missing operand", "{{ 1 + }}", NULL, NULL, "1:8: syntax error: expected an expression, found '}}'");
    expect_error("unknown filter at its column", "\n{{ x | nosuch }}", NULL, NULL, "2:8: no filter named 'nosuch'");
    expect_error("unknown test", "{{ x is nosuch }}", NULL, NULL, "no test named 'nosuch'");
    expect_error("raise_exception", "{{ raise_exception('Only user and assistant roles') }}", NULL, NULL,
                 "1:19: template raised an exception: Only user and assistant roles");
    expect_error("attribute of undefined", "{{ nothing.role }}", NULL, NULL, "'nothing' is undefined");
    expect_error("missing key then attribute", "{{ m.a.b }}", "{\"m\": {}}", NULL,
                 "'dict object' has no attribute 'a'");
    expect_error("undefined in arithmetic", "{{ nothing + 1 }}", NULL, NULL, "'nothing' is undefined");
    expect_error("str plus int", "{{ 'a' + 1 }}", NULL, NULL, "can only concatenate str (not \"int\") to str");
    expect_error("division by zero", "{{ 1 // 0 }}", NULL, NULL, "division by zero");
    expect_error("iterating a number", "{% for x in 5 %}{% endfor %}", NULL, NULL, "'int' object is not iterable");
    expect_error("tojson of undefined", "{{ nothing | tojson }}", NULL, NULL, "not JSON serializable");
    expect_error("assigning into a non-namespace", "{% set d = {} %}{% set d.x = 1 %}", NULL, NULL,
                 "cannot assign attribute on non-namespace object");
    expect_error("the caller's list is read-only", "{{ xs.append(1) }}", "{\"xs\": []}", NULL, "unsafe");
    expect_error("message in one line", "{{ raise_exception('two\\nlines') }}", NULL, NULL, "two\\nlines");
    expect_error("variables not an object", "x", "[1]", NULL, "must be a JSON object");
}

static void test_limits(void) {
    jinja_limits lim = jinja_limits_default();
    lim.max_steps = 100000;
    expect_error("a loop that never ends is cut at the step limit",
                 "{% for i in range(1000000000) %}{% for j in range(1000000000) %}x{% endfor %}{% endfor %}", NULL,
                 &lim, "more than 100000 loop iterations and calls");
    expect_error("membership tests in a long list count toward the limit",
                 "{% set big = range(50000) | list %}{% for i in range(100) %}{{ -1 in big }}{% endfor %}", NULL, &lim,
                 "more than 100000 loop iterations and calls");
    expect_error("a macro that calls itself twice (exponential, no loop) is cut at the same limit",
                 "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}", NULL,
                 &lim, "more than 100000 loop iterations and calls");
    lim = jinja_limits_default();
    expect_error("a macro that calls itself forever", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL,
                 &lim, "nests deeper than 1000 levels");
    lim.max_output = 1000;
    expect_error("output bounded", "{% for i in range(2000) %}x{% endfor %}", NULL, &lim, "longer than 1000 bytes");
    lim = jinja_limits_default();
    lim.max_memory = 4 << 20;
    expect_error("memory bounded",
                 "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% "
                 "endfor %}",
                 NULL, &lim, "more than 4 MiB of memory");
    lim = jinja_limits_default();
    expect_error("a %-format width that would pad gigabytes", "{{ '%000000000750194557s' % 'x' }}", NULL, &lim,
                 "format width or precision above 1000");
    expect_error("string repeat bounded", "{{ 'x' * 1000000000000 }}", NULL, &lim, "past 16777216 bytes");
    /* nesting in the source is bounded by the parser, not by the C stack */
    size_t n = 100000;
    char *deep = malloc(2 * n + 16);
    memcpy(deep, "{{ ", 3);
    memset(deep + 3, '(', n);
    deep[3 + n] = '1';
    memset(deep + 4 + n, ')', n);
    strcpy(deep + 4 + 2 * n, " }}");
    expect_error("parentheses nested without end", deep, NULL, NULL, "nested more than 200 levels deep");
    char *ifs = malloc(n * 10 + 1);
    ifs[0] = 0;
    for (size_t i = 0; i < 5000; i++) strcat(ifs + (i ? (i - 1) * 10 : 0), "{% if 1 %}");
    expect_error("blocks nested without end", ifs, NULL, NULL, "nested more than 200 levels deep");
    free(ifs);
    free(deep);
    lim = jinja_limits_default();
    lim.now = 0;
    char err[256];
    char *out = render("{{ strftime_now('%Y-%m-%d') }}", NULL, &lim, err, sizeof err);
    CHECK(out && !strcmp(out, "1970-01-01"), "jinja strftime_now with a fixed clock", "got '%s'", out ? out : err);
    free(out);
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    if (b) b[len] = 0;
    *n = len;
    return b;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every template x every case of ../shared/golden/chat: byte-identical text, or an error where
 * transformers raised (.err). */
static void test_golden(void) {
    setenv("SOURCE_DATE_EPOCH", "1768435200", 1);
    size_t n;
    char *cases_text = slurp(test_shared("golden/chat/cases.json"), &n);
    cJSON *cs = cases_text ? cJSON_Parse(cases_text) : NULL;
    DIR *d = opendir(test_shared("golden/chat/templates"));
    if (!cs || !d) {
        CHECK(0, "jinja golden chat templates", "cannot read %s", test_shared("golden/chat"));
        free(cases_text);
        cJSON_Delete(cs);
        if (d) closedir(d);
        return;
    }
    char *names[256];
    size_t n_names = 0;
    for (struct dirent *e; (e = readdir(d)) && n_names < 256;) {
        size_t l = strlen(e->d_name);
        if (l > 6 && !strcmp(e->d_name + l - 6, ".jinja")) names[n_names++] = strndup(e->d_name, l - 6);
    }
    closedir(d);
    qsort(names, n_names, sizeof *names, cmp_names);
    int same = 0, refused = 0, total = 0, bad = 0;
    char first_bad[1400] = "";
    for (size_t i = 0; i < n_names; i++) {
        char path[256], err[1024];
        snprintf(path, sizeof path, "golden/chat/templates/%s.jinja", names[i]);
        size_t tn;
        char *src = slurp(test_shared(path), &tn);
        jinja_template *t = src ? jinja_parse(src, tn, err, sizeof err) : NULL;
        for (cJSON *c = cs->child; c; c = c->next) {
            total++;
            snprintf(path, sizeof path, "golden/chat/expected/%s.%s.txt", names[i], c->string);
            size_t wn = 0, on = 0;
            char *want = slurp(test_shared(path), &wn);
            char *out = t ? jinja_render(t, c, NULL, &on, err, sizeof err) : NULL;
            bool ok = want ? out && on == wn && !memcmp(out, want, wn) : !out;
            if (ok) want ? same++ : refused++;
            else if (!bad++)
                snprintf(first_bad, sizeof first_bad, "%s.%s: %s", names[i], c->string,
                         !t ? err : !out ? err : want ? "text differs" : "rendered where transformers raised");
            free(want);
            free(out);
        }
        jinja_free(t);
        free(src);
        free(names[i]);
    }
    CHECK(total == 290 && bad == 0,
          "jinja golden chat templates: 290 renders byte-identical or refused as transformers",
          "%d of %d differ (%d identical, %d refused); first: %s", bad, total, same, refused, first_bad);
    CHECK(refused == 5, "jinja golden chat templates: the 5 that raise in transformers are refused", "%d refused",
          refused);
    cJSON_Delete(cs);
    free(cases_text);
}

/* The templates with tests/golden/chat_extra_cases.json against tests/golden/chat_extra.crc
 * (scripts/chat_extra_golden.py): length and CRC-32 of each render, or "raises". */
static void test_golden_extra(void) {
    setenv("SOURCE_DATE_EPOCH", "1768435200", 1);
    size_t n;
    char *cases_text = slurp("tests/golden/chat_extra_cases.json", &n);
    size_t cases_len = n;
    char *crc = slurp("tests/golden/chat_extra.crc", &n);
    /* as Python's json reads it: 2.0 stays a float */
    cJSON *cs = cases_text ? chat_json_parse(cases_text, cases_len, NULL) : NULL;
    if (!cs || !crc) {
        CHECK(0, "jinja extra chat conversations", "cannot read tests/golden/chat_extra_cases.json or chat_extra.crc");
        free(cases_text);
        free(crc);
        cJSON_Delete(cs);
        return;
    }
    int total = 0, bad = 0, raised = 0;
    char first_bad[1400] = "", *save = NULL;
    for (char *line = strtok_r(crc, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char key[200], want[32] = "", want_crc[16] = "";
        if (sscanf(line, "%199s %31s %15s", key, want, want_crc) < 2) continue;
        char *dot = strrchr(key, '.');
        if (!dot) continue;
        *dot = 0;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(cs, dot + 1);
        char path[256], err[1024];
        snprintf(path, sizeof path, "golden/chat/templates/%s.jinja", key);
        size_t tn, on = 0;
        char *src = slurp(test_shared(path), &tn);
        jinja_template *t = src ? jinja_parse(src, tn, err, sizeof err) : NULL;
        char *out = t && c ? jinja_render(t, c, NULL, &on, err, sizeof err) : NULL;
        bool ok;
        total++;
        if (!strcmp(want, "raises")) {
            ok = !out;
            raised += ok;
        } else {
            char got[16];
            snprintf(got, sizeof got, "%08lx", out ? crc32(0, (const Bytef *)out, (uInt)on) : 0ul);
            ok = out && (size_t)strtoull(want, NULL, 10) == on && !strcmp(got, want_crc);
        }
        if (!ok && !bad++)
            snprintf(first_bad, sizeof first_bad, "%s.%s: %s", key, dot + 1,
                     !t || !c ? "cannot load" : out ? "text differs" : err);
        free(out);
        jinja_free(t);
        free(src);
    }
    CHECK(total == 638 && bad == 0,
          "jinja extra chat conversations (tools, documents, thinking, floats): 638 renders as transformers",
          "%d of %d differ; first: %s", bad, total, first_bad);
    CHECK(raised == 70, "jinja extra chat conversations: the 70 that raise in transformers are refused", "%d", raised);
    cJSON_Delete(cs);
    free(cases_text);
    free(crc);
}

int main(void) {
    test_cases();
    test_errors();
    test_limits();
    test_golden();
    test_golden_extra();
    return test_done();
}
