/* Unit tests of the BPE pre-tokenizers by name: each of the names llama.cpp accepts, on GPT-2's
 * vocabulary rebuilt in memory with that tokenizer.ggml.pre, gives llama.cpp's ids for the
 * strings of tests/golden/tokenize (pre.tsv, from make_pre.sh), and the rows that could go
 * quadratic stay linear on 100 KB runs. */
#include "tests/unit/tokenizer_util.h"

/* ---- every pre-tokenizer name against llama.cpp ------------------------------------------------ */

typedef struct {
    uint8_t *b;
    size_t n, cap;
} dbuf;

static void dput(dbuf *d, const void *p, size_t n) {
    if (d->n + n > d->cap) {
        d->cap = (d->n + n) * 2;
        d->b = realloc(d->b, d->cap);
    }
    memcpy(d->b + d->n, p, n);
    d->n += n;
}

static size_t elem_size(gguf_type t) {
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < GGUF_TYPE_COUNT ? sz[t] : 0;
}

static void dput_value(dbuf *d, const gguf_value *v) {
    uint64_t u;
    switch (v->type) {
    case GGUF_TYPE_STRING:
        dput(d, &v->v.str.len, 8), dput(d, v->v.str.ptr, v->v.str.len);
        break;
    case GGUF_TYPE_ARRAY:
        u = v->v.arr.n;
        dput(d, &(uint32_t){v->v.arr.elem}, 4), dput(d, &u, 8);
        if (v->v.arr.items)
            for (uint64_t i = 0; i < u; i++) dput_value(d, &v->v.arr.items[i]);
        else
            dput(d, v->v.arr.raw, u * elem_size(v->v.arr.elem));
        break;
    case GGUF_TYPE_BOOL:
        dput(d, &(uint8_t){v->v.b}, 1);
        break;
    case GGUF_TYPE_FLOAT32:
        dput(d, &(float){(float)v->v.f64}, 4);
        break;
    case GGUF_TYPE_FLOAT64:
        dput(d, &v->v.f64, 8);
        break;
    default:   /* integers, widened in the reader: the low bytes, little-endian */
        dput(d, &v->v.u64, elem_size(v->type));
        break;
    }
}

/* base's metadata with tokenizer.ggml.pre set to pre (left out when NULL), as a GGUF in memory
 * (caller frees d->b). */
static tokenizer *load_with_pre(const gguf_ctx *base, const char *pre, dbuf *d) {
    d->n = 0;
    uint64_t n_kv = 0;
    dput(d, "GGUF", 4), dput(d, &(uint32_t){3}, 4), dput(d, &(uint64_t){0}, 8), dput(d, &n_kv, 8);
    for (int64_t i = 0; i < gguf_n_kv(base); i++) {
        const char *k = gguf_key(base, i);
        if (!strcmp(k, "tokenizer.ggml.pre") || !strcmp(k, "general.alignment")) continue;
        const gguf_value *v = gguf_value_at(base, i);
        dput(d, &(uint64_t){strlen(k)}, 8), dput(d, k, strlen(k)), dput(d, &(uint32_t){v->type}, 4);
        dput_value(d, v);
        n_kv++;
    }
    static const char key[] = "tokenizer.ggml.pre";
    if (pre) {
        dput(d, &(uint64_t){sizeof key - 1}, 8), dput(d, key, sizeof key - 1);
        dput(d, &(uint32_t){GGUF_TYPE_STRING}, 4), dput(d, &(uint64_t){strlen(pre)}, 8), dput(d, pre, strlen(pre));
        n_kv++;
    }
    memcpy(d->b + 16, &n_kv, 8);
    gguf_ctx *g = gguf_open_buffer(d->b, d->n, pre ? pre : "no-pre.gguf", err, sizeof err);
    tokenizer *t = g ? tokenizer_load(g, err, sizeof err) : NULL;
    gguf_close(g);
    return t;
}

/* tests/golden/tokenize/pre.tsv: what llama.cpp's llama-tokenize gives for each case of
 * pre_cases.inp on GPT-2's vocabulary under every pre-tokenizer name (make_pre.sh), BOS as the
 * name's default: checks each name's regex row, ignore_merges and add_bos. */
static void test_pre_names(void) {
    const char *path = test_shared("vocab/ggml-vocab-gpt-2.gguf");
    size_t tl = 0, cl = 0;
    char *tsv = read_all("tests/golden/tokenize/pre.tsv", &tl), *tsv_copy = tsv ? malloc(tl + 1) : NULL;
    if (tsv_copy) memcpy(tsv_copy, tsv, tl + 1);
    char *inp = read_all("tests/golden/tokenize/pre_cases.inp", &cl);
    if (!CHECK(tsv && inp, "pre-tokenizer goldens readable", "tests/golden/tokenize/pre.tsv or pre_cases.inp"))
        goto out;
    if (access(path, R_OK) != 0) {
        SKIP("every pre-tokenizer name against llama.cpp", "GPT-2 vocabulary not present");
        goto out;
    }
    const char *cases[64];
    size_t lens[64], n_cases = 0;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    for (char *p = inp, *e; n_cases < 64 && (e = strstr(p, sep)); p = e + strlen(sep))
        cases[n_cases] = p, lens[n_cases++] = (size_t)(e - p);
    gguf_ctx *base = gguf_open(path, 1, err, sizeof err);
    dbuf d = {0};
    tokenizer *t = NULL;
    char cur[64] = "", *line = tsv;
    int names = 0, lines = 0, bad = 0;
    for (char *nl; base && *line; line = nl + 1) {
        if (!(nl = strchr(line, '\n'))) break;
        *nl = 0;
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        if (!tab2) continue;
        *tab1 = 0;
        size_t ci = strtoul(tab1 + 1, NULL, 10);
        if (strcmp(cur, line)) {
            tokenizer_free(t);
            snprintf(cur, sizeof cur, "%s", line);
            t = load_with_pre(base, cur, &d);
            names++;
            char name[128];
            snprintf(name, sizeof name, "pre-tokenizer '%s' loads", cur);
            CHECK(t != NULL, name, "%s", err);
        }
        if (!t || ci >= n_cases) continue;
        lines++;
        int64_t n;
        int32_t *ids = encode(t, cases[ci], lens[ci], tokenizer_add_bos(t), false, &n);
        char got[8192] = "[";
        for (int64_t i = 0, o = 1; i < n && o < 8000; i++)
            o += snprintf(got + o, sizeof got - (size_t)o, "%s%d", i ? ", " : "", ids[i]);
        strcat(got, "]");
        if (strcmp(got, tab2 + 1)) {
            bad++;
            printf("  %s case %zu: got %.300s want %.300s\n", cur, ci, got, tab2 + 1);
        }
        free(ids);
    }
    tokenizer_free(t);
    /* no tokenizer.ggml.pre at all: llama.cpp's default row, as the name "default" */
    t = base ? load_with_pre(base, NULL, &d) : NULL;
    if (CHECK(t && !strcmp(tokenizer_pre(t), "default"), "a BPE file without tokenizer.ggml.pre runs the default row",
              "%s", t ? tokenizer_pre(t) : err)) {
        int same = 0;
        for (size_t ci = 0; ci < n_cases; ci++) {
            int64_t n;
            int32_t *ids = encode(t, cases[ci], lens[ci], tokenizer_add_bos(t), false, &n);
            char want_key[32], got[8192] = "[";
            snprintf(want_key, sizeof want_key, "default\t%zu\t", ci);
            for (int64_t i = 0, o = 1; i < n && o < 8000; i++)
                o += snprintf(got + o, sizeof got - (size_t)o, "%s%d", i ? ", " : "", ids[i]);
            strcat(got, "]");
            /* the tsv's lines were cut at their tabs above: find the row in the original text
             * ("default" is the first name; no other ends with it) */
            const char *row = memmem(tsv_copy, tl, want_key, strlen(want_key));
            size_t k = strlen(want_key);
            same += row && !strncmp(row + k, got, strlen(got)) && row[k + strlen(got)] == '\n';
            free(ids);
        }
        CHECK(same == (int)n_cases, "a BPE file without tokenizer.ggml.pre gives llama.cpp's default-row ids",
              "%d of %zu cases match", same, n_cases);
    }
    tokenizer_free(t);
    free(d.b);
    gguf_close(base);
    CHECK(base && bad == 0 && names > 80 && lines == names * (int)n_cases,
          "every pre-tokenizer name gives llama.cpp's ids on GPT-2's vocabulary", "%d of %d cases differ (%d names)",
          bad, lines, names);
out:
    free(tsv);
    free(tsv_copy);
    free(inp);
}

/* Rows whose regexes could go quadratic on long runs (digits grouped from the right, \s+$,
 * nested repeats) on 100 KB of one character. */
static void test_speed_rows(void) {
    const char *path = test_shared("vocab/ggml-vocab-gpt-2.gguf");
    if (access(path, R_OK) != 0) {
        SKIP("pre-tokenizer rows on long runs", "GPT-2 vocabulary not present");
        return;
    }
    gguf_ctx *base = gguf_open(path, 1, err, sizeof err);
    static const char *const pres[] = {"superbpe", "tiny_aya", "afmoe", "deepseek-llm", "exaone-moe", "gpt-4o",
                                       "kimi-k2", "jais-2"};
    enum { N = 100 * 1024 };
    char *text = malloc(N);
    dbuf d = {0};
    for (size_t i = 0; base && i < sizeof pres / sizeof pres[0]; i++) {
        tokenizer *t = load_with_pre(base, pres[i], &d);
        static const char fill[] = "7 a\xC3";   /* digits, spaces, letters, é (C3 A9) */
        for (int k = 0; t && k < 4; k++) {
            for (size_t j = 0; j < N; j++) text[j] = k == 3 ? (j & 1 ? '\xA9' : '\xC3') : fill[k];
            text[N - 1] = 'x';
            double t0 = now();
            int64_t n;
            int32_t *ids = encode(t, text, N, false, false, &n);
            double dt = now() - t0;
            char name[200];
            snprintf(name, sizeof name, "pre-tokenizer %s: 100 KB of '%s' in under 1.5 s", pres[i],
                     k == 3 ? "é" : k == 1 ? " " : (char[]){fill[k], 0});
            CHECK(n > 0 && dt < 1.5, name, "%.3f s, %lld ids (%s)", dt, (long long)n, n < 0 ? err : "");
            free(ids);
        }
        tokenizer_free(t);
    }
    free(d.b);
    free(text);
    gguf_close(base);
}

int main(void) {
    test_pre_names();
    test_speed_rows();
    return test_done();
}
