/* Unit tests of the tokenizer: llama.cpp's own tokenizer cases on the shared SPM and GPT-2
 * vocabularies, text -> ids -> text round trips, the tiny model's golden prompts, special
 * tokens, the streaming writer, metadata errors and the time taken on long inputs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/tokenizer.h"
#include "gguf/gguf.h"
#include "tests/unit/test.h"

static char err[1024];

typedef struct {
    gguf_ctx *g;
    tokenizer *t;
} loaded;

static loaded load(const char *rel) {
    loaded l = {0};
    const char *path = test_shared(rel);
    char name[200];
    snprintf(name, sizeof name, "tokenizer loads %s", rel);
    if (access(path, R_OK) != 0) {
        SKIP(name, "file not present");
        return l;
    }
    l.g = gguf_open(path, 1, err, sizeof err);
    if (l.g) l.t = tokenizer_load(l.g, err, sizeof err);
    CHECK(l.t != NULL, name, "%s", err);
    return l;
}

static void unload(loaded *l) {
    tokenizer_free(l->t);
    gguf_close(l->g);
}

/* ids of text (no text parsing of special tokens unless asked); caller frees; *n = count. */
static int32_t *encode(const tokenizer *t, const char *text, size_t len, bool bos, bool special, int64_t *n) {
    int64_t need = tokenizer_encode(t, text, len, bos, special, NULL, 0, err, sizeof err);
    if (need < 0) {
        *n = -1;
        return NULL;
    }
    int32_t *ids = malloc((size_t)(need + 1) * sizeof *ids);
    *n = tokenizer_encode(t, text, len, bos, special, ids, need, err, sizeof err);
    return ids;
}

/* Concatenated pieces; caller frees; *len = bytes. */
static char *decode(const tokenizer *t, const int32_t *ids, int64_t n, size_t *len) {
    size_t cap = 64, o = 0;
    char *s = malloc(cap);
    for (int64_t i = 0; i < n; i++) {
        size_t pl;
        const char *p = tokenizer_piece(t, ids[i], &pl);
        while (o + pl + 1 > cap) s = realloc(s, cap *= 2);
        memcpy(s + o, p, pl);
        o += pl;
    }
    *len = o;
    return s;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    *len = fread(b, 1, (size_t)sz, f);
    b[*len] = 0;
    fclose(f);
    return b;
}

/* llama.cpp's test-tokenizer-0 files: the cases in .inp are separated by "\n__ggml_vocab_test__\n"
 * (text after the last separator is one more case); .out has one line of space-separated ids per
 * case. Checks the ids, and that the pieces of the ids give the text back (SPM: minus the one
 * space the prefix rule put in front). */
static void test_vocab_cases(const char *rel) {
    loaded l = load(rel);
    if (!l.t) return;
    bool spm = !strcmp(tokenizer_kind(l.t), "llama");
    char inp_path[600], out_path[600], name[200];
    snprintf(inp_path, sizeof inp_path, "%s.inp", test_shared(rel));
    snprintf(out_path, sizeof out_path, "%s.out", test_shared(rel));
    size_t inp_len, out_len;
    char *inp = read_all(inp_path, &inp_len), *out = read_all(out_path, &out_len);
    snprintf(name, sizeof name, "%s test cases readable", rel);
    if (!CHECK(inp && out, name, "cannot read %s or %s", inp_path, out_path)) goto done;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int cases = 0, bad_ids = 0, bad_trip = 0, want_cases = 0;
    for (size_t i = 0; i < out_len; i++) want_cases += out[i] == '\n';
    char *p = inp, *o = out;
    for (char *e; *p; p = *e ? e + strlen(sep) : e, cases++) {
        e = strstr(p, sep);
        if (!e) e = p + strlen(p);
        size_t len = (size_t)(e - p);
        char *line_end = strchr(o, '\n');
        if (!line_end) line_end = o + strlen(o);
        int64_t want[1024], nw = 0;
        for (char *q = o; q < line_end && nw < 1024;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            want[nw++] = v;
            q = end;
        }
        o = *line_end ? line_end + 1 : line_end;
        int64_t n;
        int32_t *ids = encode(l.t, p, len, false, false, &n);
        bool same = n == nw;
        for (int64_t i = 0; same && i < n; i++) same = ids[i] == want[i];
        if (!same) {
            bad_ids++;
            printf("  case %d '%.*s': got", cases, (int)len, p);
            for (int64_t i = 0; i < n; i++) printf(" %d", ids[i]);
            printf(" want");
            for (int64_t i = 0; i < nw; i++) printf(" %lld", (long long)want[i]);
            printf("\n");
        }
        size_t dl;
        char *d = decode(l.t, ids, n, &dl), *dp = d;
        if (spm && dl > 0 && d[0] == ' ') dp++, dl--;
        if (dl != len || memcmp(dp, p, len)) {
            bad_trip++;
            printf("  case %d '%.*s' decodes to '%.*s'\n", cases, (int)len, p, (int)dl, dp);
        }
        free(d);
        free(ids);
    }
    snprintf(name, sizeof name, "%s: ids of all %d cases match llama.cpp", rel, cases);
    CHECK(bad_ids == 0 && cases == want_cases && cases > 40, name, "%d of %d cases differ (%d lines of ids)",
          bad_ids, cases, want_cases);
    snprintf(name, sizeof name, "%s: text -> ids -> pieces round trip of all cases", rel);
    CHECK(bad_trip == 0, name, "%d cases differ", bad_trip);
done:
    free(inp);
    free(out);
    unload(&l);
}

static void check_ids(const tokenizer *t, const char *name, const char *text, bool bos, bool special,
                      const int32_t *want, int64_t nw) {
    int64_t n;
    int32_t *ids = encode(t, text, strlen(text), bos, special, &n);
    bool same = n == nw;
    for (int64_t i = 0; same && i < n; i++) same = ids[i] == want[i];
    char got[512] = "";
    for (int64_t i = 0, o = 0; i < n && o < 480; i++)
        o += snprintf(got + o, sizeof got - (size_t)o, " %d", ids[i]);
    CHECK(same, name, "got%s (n = %lld)", got, (long long)n);
    free(ids);
}

/* The prompts of ../shared/golden/llama/f32-*.json (llama.cpp's tokens, with BOS). */
static void test_golden(void) {
    loaded l = load("models/aidreams260K-f32.gguf");
    if (!l.t) return;
    static const int32_t once[] = {1, 429, 491, 433, 295, 429, 444, 445, 265, 262, 263, 342, 430};
    static const int32_t garden[] = {1, 368, 430, 316, 278, 441, 267, 275, 266,
                                     403, 440, 265, 281, 269, 435, 447, 431};
    static const int32_t empty[] = {1};
    CHECK(tokenizer_add_bos(l.t) && tokenizer_bos(l.t) == 1 && tokenizer_eos(l.t) == 2 &&
          !strcmp(tokenizer_kind(l.t), "llama") && tokenizer_n_vocab(l.t) == 512,
          "aidreams vocabulary facts", "add_bos %d bos %d eos %d kind %s n %d", tokenizer_add_bos(l.t),
          tokenizer_bos(l.t), tokenizer_eos(l.t), tokenizer_kind(l.t), tokenizer_n_vocab(l.t));
    check_ids(l.t, "aidreams 'Once upon a time' (golden)", "Once upon a time", true, true, once, 13);
    check_ids(l.t, "aidreams 'The garden of silicon dreams' (golden)", "The garden of silicon dreams",
              true, true, garden, 17);
    check_ids(l.t, "aidreams '' with BOS is [1] (golden)", "", true, true, empty, 1);
    check_ids(l.t, "aidreams '' without BOS is []", "", false, true, NULL, 0);
    CHECK(tokenizer_is_eog(l.t, 2) && !tokenizer_is_eog(l.t, 1), "aidreams EOS ends generation",
          "eog(2) %d eog(1) %d", tokenizer_is_eog(l.t, 2), tokenizer_is_eog(l.t, 1));
    unload(&l);
}

static void test_special(void) {
    loaded l = load("vocab/ggml-vocab-llama-spm.gguf");
    if (l.t) {
        /* <s> ▁Hello </s>: the text after a special token gets the prefix space */
        static const int32_t parsed[] = {1, 15043, 2};
        check_ids(l.t, "SPM '<s>Hello</s>' with parse_special", "<s>Hello</s>", false, true, parsed, 3);
        int64_t n;
        int32_t *ids = encode(l.t, "<s>Hello", 8, false, false, &n);
        CHECK(n > 2 && ids[0] != 1, "SPM '<s>' is plain text without parse_special", "n %lld first %d",
              (long long)n, n > 0 ? ids[0] : -1);
        free(ids);
        size_t len, tlen;
        const char *txt = tokenizer_text(l.t, 1, &tlen);
        const char *p = tokenizer_piece(l.t, 1, &len);
        CHECK(len == 0 && tlen == 3 && !memcmp(txt, "<s>", 3) && tokenizer_is_control(l.t, 1),
              "SPM BOS piece is empty, text '<s>'", "piece length %zu, text '%.*s'", len, (int)tlen, txt);
        p = tokenizer_piece(l.t, 15043, &len);
        CHECK(len == 6 && !memcmp(p, " Hello", 6), "SPM piece of ▁Hello is ' Hello'", "'%.*s'", (int)len,
              p);
        p = tokenizer_piece(l.t, 3 + 0xE2, &len);
        CHECK(len == 1 && (uint8_t)p[0] == 0xE2, "SPM piece of <0xE2> is the byte", "length %zu", len);
        p = tokenizer_piece(l.t, 1 << 30, &len);
        CHECK(len == 0, "piece of an id outside the vocabulary is empty", "length %zu", len);
        unload(&l);
    }
    l = load("vocab/ggml-vocab-gpt-2.gguf");
    if (l.t) {
        static const int32_t eot[] = {15496, 50256, 15496};
        check_ids(l.t, "GPT-2 'Hello<|endoftext|>Hello' with parse_special", "Hello<|endoftext|>Hello", false,
                  true, eot, 3);
        CHECK(!strcmp(tokenizer_kind(l.t), "gpt2") && !strcmp(tokenizer_pre(l.t), "gpt-2") &&
              tokenizer_is_eog(l.t, 50256) && !tokenizer_add_bos(l.t) && !tokenizer_add_eos(l.t),
              "GPT-2 vocabulary facts", "kind %s pre %s", tokenizer_kind(l.t), tokenizer_pre(l.t));
        unload(&l);
    }
}

/* Malformed UTF-8 and arbitrary bytes tokenize and decode back exactly. */
static void test_bytes(void) {
    static const char *rels[] = {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf"};
    for (int v = 0; v < 2; v++) {
        loaded l = load(rels[v]);
        if (!l.t) continue;
        char buf[4096];
        uint32_t x = 12345;
        for (size_t i = 0; i < sizeof buf; i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = (char)(x >> 16);
        }
        const char *cases[] = {"\xff\xfe", "a\xc3", "\xe2\x82", "\xc0\x80 \xed\xa0\x80", "\xf4\x90\x80\x80!",
                               "x\x80y"};
        int bad = 0;
        for (int c = 0; c <= 6; c++) {
            const char *s = c < 6 ? cases[c] : buf;
            size_t len = c < 6 ? strlen(s) : sizeof buf;
            int64_t n;
            int32_t *ids = encode(l.t, s, len, false, false, &n);
            size_t dl;
            char *d = n >= 0 ? decode(l.t, ids, n, &dl) : NULL, *dp = d;
            if (d && v == 0 && dl > 0 && d[0] == ' ') dp++, dl--;
            if (!d || dl != len || memcmp(dp, s, len)) bad++;
            free(d);
            free(ids);
        }
        char name[200];
        snprintf(name, sizeof name, "%s: malformed UTF-8 and random bytes round trip", rels[v]);
        CHECK(bad == 0, name, "%d of 7 inputs differ", bad);
        unload(&l);
    }
}

static void test_stream(void) {
    loaded l = load("vocab/ggml-vocab-llama-spm.gguf");
    if (!l.t) return;
    /* "€" is E2 82 AC; the byte tokens <0xNN> are ids 3 + NN in this vocabulary */
    tokenizer_stream s = {0};
    char out[256];
    size_t a = tokenizer_stream_put(l.t, &s, 3 + 0xE2, out, sizeof out);
    size_t b = tokenizer_stream_put(l.t, &s, 3 + 0x82, out, sizeof out);
    size_t c = tokenizer_stream_put(l.t, &s, 3 + 0xAC, out, sizeof out);
    CHECK(a == 0 && b == 0 && c == 3 && !memcmp(out, "\xE2\x82\xAC", 3),
          "stream holds a character until complete", "wrote %zu, %zu, %zu", a, b, c);
    a = tokenizer_stream_put(l.t, &s, 3 + 0xF0, out, sizeof out);
    b = tokenizer_stream_put(l.t, &s, 3 + 0x9F, out, sizeof out);
    c = tokenizer_stream_put(l.t, &s, 15043, out, sizeof out);   /* " Hello" breaks the sequence */
    CHECK(a == 0 && b == 0 && c == 8 && !memcmp(out, "\xF0\x9F Hello", 8),
          "stream passes a broken sequence through", "wrote %zu, %zu, %zu", a, b, c);
    a = tokenizer_stream_put(l.t, &s, 3 + 0xC3, out, sizeof out);
    b = tokenizer_stream_flush(&s, out, sizeof out);
    CHECK(a == 0 && b == 1 && (uint8_t)out[0] == 0xC3 && tokenizer_stream_flush(&s, out, sizeof out) == 0,
          "stream flush gives the unfinished bytes", "put %zu flush %zu", a, b);
    a = tokenizer_stream_put(l.t, &s, 15043, out, 2);
    b = tokenizer_stream_put(l.t, &s, 15043, out, sizeof out);
    CHECK(a == 6 && b == 6 && !memcmp(out, " Hello", 6), "stream asks for a larger buffer, losing nothing",
          "small %zu then %zu", a, b);
    unload(&l);
}

/* ---- metadata errors, on GGUF files built in memory -------------------------------------------- */

typedef struct {
    uint8_t b[16384];
    size_t n;
    uint64_t n_kv;
} gbuf;

static void put(gbuf *g, const void *p, size_t n) { memcpy(g->b + g->n, p, n), g->n += n; }
static void put_u32(gbuf *g, uint32_t v) { put(g, &v, 4); }
static void put_u64(gbuf *g, uint64_t v) { put(g, &v, 8); }
static void put_str(gbuf *g, const char *s) { put_u64(g, strlen(s)), put(g, s, strlen(s)); }
static void kv_str(gbuf *g, const char *k, const char *v) {
    put_str(g, k), put_u32(g, GGUF_TYPE_STRING), put_str(g, v), g->n_kv++;
}
static void kv_u32(gbuf *g, const char *k, uint32_t v) {
    put_str(g, k), put_u32(g, GGUF_TYPE_UINT32), put_u32(g, v), g->n_kv++;
}
static void kv_bool(gbuf *g, const char *k, bool v) {
    uint8_t b = v;
    put_str(g, k), put_u32(g, GGUF_TYPE_BOOL), put(g, &b, 1), g->n_kv++;
}
static void kv_tokens(gbuf *g, const char *k, int n, const char *const *v) {
    put_str(g, k), put_u32(g, GGUF_TYPE_ARRAY), put_u32(g, GGUF_TYPE_STRING), put_u64(g, (uint64_t)n);
    for (int i = 0; i < n; i++) put_str(g, v[i]);
    g->n_kv++;
}

/* Header + kvs: the kv count is patched in at offset 16. */
static tokenizer *load_buf(gbuf *g) {
    memcpy(g->b + 16, &g->n_kv, 8);
    gguf_ctx *c = gguf_open_buffer(g->b, g->n, "test.gguf", err, sizeof err);
    if (!c) return NULL;
    tokenizer *t = tokenizer_load(c, err, sizeof err);
    gguf_close(c);
    return t;
}

static void start(gbuf *g) {
    g->n = 0, g->n_kv = 0;
    put(g, "GGUF", 4), put_u32(g, 3), put_u64(g, 0), put_u64(g, 0);
}

static void test_errors(void) {
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a", "a"};
    gbuf *g = calloc(1, sizeof *g);
    start(g);
    kv_str(g, "tokenizer.ggml.model", "llama");
    kv_tokens(g, "tokenizer.ggml.tokens", 5, toks);
    kv_bool(g, "tokenizer.ggml.add_eos_token", true);
    tokenizer *t = load_buf(g);
    CHECK(t && tokenizer_bos(t) == 1 && tokenizer_eos(t) == 2 && tokenizer_add_bos(t) && tokenizer_add_eos(t),
          "minimal SPM vocabulary loads, default ids, add_eos_token read", "%s", err);
    if (t) {
        int64_t n;
        int32_t *ids = encode(t, "a", 1, false, false, &n);
        CHECK(n == 1 && ids[0] == 3, "minimal SPM vocabulary encodes 'a' as ▁a", "n %lld", (long long)n);
        free(ids);
        tokenizer_free(t);
    }
    start(g);
    kv_str(g, "tokenizer.ggml.model", "llama");
    kv_tokens(g, "tokenizer.ggml.tokens", 5, toks);
    kv_u32(g, "tokenizer.ggml.bos_token_id", 5);
    t = load_buf(g);
    CHECK(!t && strstr(err, "tokenizer.ggml.bos_token_id") && strstr(err, "test.gguf"),
          "out-of-range BOS id is an error naming the key", "%s", t ? "loaded" : err);
    tokenizer_free(t);
    start(g);
    kv_str(g, "tokenizer.ggml.model", "llama");
    kv_tokens(g, "tokenizer.ggml.tokens", 5, toks);
    kv_u32(g, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
    t = load_buf(g);
    CHECK(t != NULL, "padding id 0xFFFFFFFF means none", "%s", err);
    tokenizer_free(t);
    start(g);
    kv_str(g, "tokenizer.ggml.model", "llama");
    kv_tokens(g, "tokenizer.ggml.tokens", 5, toks);
    kv_str(g, "tokenizer.ggml.eos_token_id", "2");
    t = load_buf(g);
    CHECK(!t && strstr(err, "tokenizer.ggml.eos_token_id"), "a string EOS id is an error naming the key", "%s",
          t ? "loaded" : err);
    tokenizer_free(t);
    start(g);
    kv_str(g, "tokenizer.ggml.model", "bert");
    kv_tokens(g, "tokenizer.ggml.tokens", 5, toks);
    t = load_buf(g);
    CHECK(!t && strstr(err, "tokenizer.ggml.model") && strstr(err, "'bert' (WordPiece)"),
          "unsupported tokenizer model is an error naming it", "%s", t ? "loaded" : err);
    tokenizer_free(t);
    start(g);
    kv_str(g, "tokenizer.ggml.model", "llama");
    t = load_buf(g);
    CHECK(!t && strstr(err, "tokenizer.ggml.tokens"), "missing tokens is an error", "%s", t ? "loaded" : err);
    tokenizer_free(t);
    start(g);
    kv_str(g, "tokenizer.ggml.model", "gpt2");
    kv_tokens(g, "tokenizer.ggml.tokens", 5, toks);
    t = load_buf(g);
    CHECK(!t && strstr(err, "tokenizer.ggml.merges"), "gpt2 without merges is an error", "%s",
          t ? "loaded" : err);
    tokenizer_free(t);
    start(g);
    kv_str(g, "tokenizer.ggml.model", "gpt2");
    kv_str(g, "tokenizer.ggml.pre", "qwen9");
    kv_tokens(g, "tokenizer.ggml.tokens", 5, toks);
    kv_tokens(g, "tokenizer.ggml.merges", 1, (const char *const[]){"a a"});
    t = load_buf(g);
    CHECK(!t && strstr(err, "tokenizer.ggml.pre") && strstr(err, "'qwen9' is not supported") &&
          strstr(err, "starcoder") && strstr(err, "llama3"), "unknown pre-tokenizer is an error naming it and listing "
          "those mgi runs", "%s", t ? "loaded" : err);
    tokenizer_free(t);
    free(g);
}

/* The Llama 3 and GPT-2 pre-tokenizers on a made-up byte-level vocabulary: the 256 byte
 * symbols (id = byte) plus whole words; with no merges, a word that is no token comes out as
 * its bytes, so the ids show where the pre-tokenizer cut. */
static void test_pre(void) {
    static const char *const words[] = {"Hello", "\xC4\xA0world", "123", "'S", "\xC4\x8A\xC4\x8A",
                                        "\xC4\xA0!!\xC4\x8A", ".hello"};   /* ids 256.. */
    enum { NW = sizeof words / sizeof words[0] };
    const char *toks[256 + NW];
    char bytes[256][3];
    for (int b = 0; b < 256; b++) {
        /* GPT-2's byte alphabet: printable Latin-1 stands for itself, the rest from U+0100 */
        int self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        unsigned cp = self ? (unsigned)b : b <= 0x20 ? 0x100u + (unsigned)b
                    : b <= 0xA0 ? 0x121u + (unsigned)(b - 0x7F) : 0x143u;
        memset(bytes[b], 0, 3);
        if (cp < 0x80) {
            bytes[b][0] = (char)cp;
        } else {
            bytes[b][0] = (char)(0xC0 | (cp >> 6));
            bytes[b][1] = (char)(0x80 | (cp & 0x3F));
        }
        toks[b] = bytes[b];
    }
    for (int i = 0; i < NW; i++) toks[256 + i] = words[i];
    for (int pre = 0; pre < 2; pre++) {
        gbuf *g = calloc(1, sizeof *g);
        start(g);
        kv_str(g, "tokenizer.ggml.model", "gpt2");
        kv_str(g, "tokenizer.ggml.pre", pre ? "llama-bpe" : "gpt-2");
        kv_tokens(g, "tokenizer.ggml.tokens", 256 + NW, toks);
        kv_tokens(g, "tokenizer.ggml.merges", 1, (const char *const[]){"q q"});
        tokenizer *t = load_buf(g);
        free(g);
        if (!CHECK(t != NULL, pre ? "made-up llama3 vocabulary loads" : "made-up gpt2 vocabulary loads", "%s",
                   err))
            continue;
        if (pre) {
            static const int32_t a[] = {256, 257, ' ', 258, '4', 259};
            check_ids(t, "llama3 pre: 'Hello world 1234'S'", "Hello world 1234'S", false, false, a, 6);
            static const int32_t b[] = {'a', 260, 'b'};
            check_ids(t, "llama3 pre: 'a\\n\\nb' keeps the newlines together", "a\n\nb", false, false, b, 3);
            static const int32_t c[] = {'x', ' ', 261};
            check_ids(t, "llama3 pre: 'x  !!\\n'", "x  !!\n", false, false, c, 3);
            static const int32_t d[] = {262};
            check_ids(t, "llama3 pre: '.hello' is one word", ".hello", false, false, d, 1);
            static const int32_t e[] = {258, '1', '2'};
            check_ids(t, "llama3 pre: digits in threes", "12312", false, false, e, 3);
        } else {
            /* no whole-word shortcut: every word is its bytes; 'S is not a contraction here */
            static const int32_t a[] = {'x', ' ', 'y', '\'', 'S'};
            check_ids(t, "gpt2 pre on a made-up vocabulary spells bytes", "x y'S", false, false, a, 5);
        }
        tokenizer_free(t);
    }
}

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

/* base's metadata with tokenizer.ggml.pre set to pre, as a GGUF in memory (caller frees d->b). */
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
    dput(d, &(uint64_t){sizeof key - 1}, 8), dput(d, key, sizeof key - 1), dput(d, &(uint32_t){GGUF_TYPE_STRING}, 4);
    dput(d, &(uint64_t){strlen(pre)}, 8), dput(d, pre, strlen(pre));
    n_kv++;
    memcpy(d->b + 16, &n_kv, 8);
    gguf_ctx *g = gguf_open_buffer(d->b, d->n, pre, err, sizeof err);
    tokenizer *t = g ? tokenizer_load(g, err, sizeof err) : NULL;
    gguf_close(g);
    return t;
}

/* tests/golden/tokenize/pre.tsv: what llama.cpp's llama-tokenize gives for each case of
 * pre_cases.inp on GPT-2's vocabulary under every pre-tokenizer name (make_pre.sh), BOS as the
 * name's default: checks each name's regex row, ignore_merges and add_bos. */
static void test_pre_names(void) {
    const char *path = test_shared("vocab/ggml-vocab-gpt-2.gguf");
    size_t tl, cl;
    char *tsv = read_all("tests/golden/tokenize/pre.tsv", &tl);
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
    free(d.b);
    gguf_close(base);
    CHECK(base && bad == 0 && names > 80 && lines == names * (int)n_cases,
          "every pre-tokenizer name gives llama.cpp's ids on GPT-2's vocabulary", "%d of %d cases differ (%d names)",
          bad, lines, names);
out:
    free(tsv);
    free(inp);
}

/* ---- detokenising as llama.cpp's llama_detokenize ------------------------------------------------ */

static void check_decode(const tokenizer *t, const char *name, const int32_t *ids, size_t n, bool remove_special,
                         bool unparse_special, const char *want) {
    char small[4], out[512];
    size_t need = tokenizer_decode(t, ids, n, remove_special, unparse_special, small, sizeof small);
    size_t got = tokenizer_decode(t, ids, n, remove_special, unparse_special, out, sizeof out);
    CHECK(got == strlen(want) && need >= got && !memcmp(out, want, got), name, "got '%.*s' (%zu, first call %zu)",
          (int)(got < sizeof out ? got : sizeof out), out, got, need);
}

static void test_decode(void) {
    static const char spaced[] = "Hello , world ! It 's a test . I ' m here . I 'll go ?";
    loaded l = load("vocab/ggml-vocab-gpt-2.gguf");
    if (l.t) {
        int64_t n;
        int32_t *ids = encode(l.t, spaced, strlen(spaced), false, false, &n);
        /* pass 1: " ," " !" " ." " ?"; pass 2: " ' "; pass 3: " 's" (" 'll" keeps its space) */
        check_decode(l.t, "GPT-2 detokenising cleans spaces as llama.cpp (clean_spaces)", ids, (size_t)n, true,
                     false, "Hello, world! It's a test. I'm here. I 'll go?");
        free(ids);
        static const int32_t eot[] = {15496, 50256};
        check_decode(l.t, "GPT-2 control token hidden", eot, 2, false, false, "Hello");
        check_decode(l.t, "GPT-2 control token shown with unparse_special", eot, 2, false, true,
                     "Hello<|endoftext|>");
        unload(&l);
    }
    l = load("vocab/ggml-vocab-qwen2.gguf");
    if (l.t) {
        int64_t n;
        int32_t *ids = encode(l.t, spaced, strlen(spaced), false, false, &n);
        check_decode(l.t, "Qwen2 detokenising keeps every space (no clean_spaces)", ids, (size_t)n, true, false,
                     spaced);
        free(ids);
        unload(&l);
    }
    l = load("vocab/ggml-vocab-llama-spm.gguf");
    if (l.t) {
        static const int32_t bos_hello[] = {1, 15043, 3186}, hello[] = {15043, 3186};
        check_decode(l.t, "SPM detokenising drops the prefix space", hello, 2, true, false, "Hello world");
        /* llama.cpp keeps the space when it removed a BOS in front */
        check_decode(l.t, "SPM detokenising after a removed BOS keeps the space", bos_hello, 3, true, false,
                     " Hello world");
        check_decode(l.t, "SPM detokenising shows <s> with unparse_special", bos_hello, 3, false, true,
                     "<s> Hello world");
        unload(&l);
    }
    l = load("vocab/ggml-vocab-gemma-4.gguf");
    if (l.t) {
        static const char text[] = "Hello  world,\n\tgemma 4 ! ";
        int64_t n;
        int32_t *ids = encode(l.t, text, strlen(text), false, false, &n);
        /* gemma4 keeps llama.cpp's BPE default clean_spaces: " !" loses its space */
        check_decode(l.t, "gemma4 detokenising gives the text back, spaces cleaned", ids, (size_t)n, true, false,
                     "Hello  world,\n\tgemma 4! ");
        free(ids);
        CHECK(!strcmp(tokenizer_kind(l.t), "gemma4") && !strcmp(tokenizer_pre(l.t), "gemma4") &&
              tokenizer_add_bos(l.t) && tokenizer_bos(l.t) == 2, "gemma4 vocabulary facts", "kind %s pre %s bos %d",
              tokenizer_kind(l.t), tokenizer_pre(l.t), tokenizer_bos(l.t));
        unload(&l);
    }
}

/* End-of-generation sets as llama.cpp prints them when it loads these files ("EOG token = ..."):
 * EOS, the FIM pad/repository tokens, every token on its list of texts, and its exception that
 * drops </s> where <|tool_response> is there (gemma-4). */
static void test_eog(void) {
    static const struct { const char *rel; int32_t eog[4]; } want[] = {
        {"vocab/ggml-vocab-qwen35.gguf", {128247, 151643, 151645, -1}},
        {"vocab/ggml-vocab-gemma-4.gguf", {1, 50, 106, -1}},
        {"vocab/ggml-vocab-command-r.gguf", {0, 255001, -1, -1}},
        {"vocab/ggml-vocab-phi-3.gguf", {2, 32000, 32007, -1}},
        {"vocab/ggml-vocab-refact.gguf", {0, 4, 18, -1}},
        {"vocab/ggml-vocab-llama-bpe.gguf", {128001, 128009, -1, -1}},
    };
    for (size_t v = 0; v < sizeof want / sizeof want[0]; v++) {
        loaded l = load(want[v].rel);
        if (!l.t) continue;
        const int32_t *ids;
        int n = tokenizer_eog_ids(l.t, &ids), n_want = 0;
        bool same = true;
        for (int i = 0; i < 4 && want[v].eog[i] >= 0; i++, n_want++) same &= tokenizer_is_eog(l.t, want[v].eog[i]);
        char name[200], got[256] = "";
        for (int i = 0, o = 0; i < n && o < 200; i++) o += snprintf(got + o, sizeof got - (size_t)o, " %d", ids[i]);
        snprintf(name, sizeof name, "%s: end-of-generation ids as llama.cpp's", want[v].rel);
        CHECK(same && n == n_want, name, "got%s", got);
        unload(&l);
    }
    loaded l = load("vocab/ggml-vocab-gemma-4.gguf");
    if (l.t) {
        int32_t s_end = -1;
        for (int32_t i = 0; i < tokenizer_n_vocab(l.t) && s_end < 0; i++) {
            size_t len;
            const char *txt = tokenizer_text(l.t, i, &len);
            if (len == 4 && !memcmp(txt, "</s>", 4)) s_end = i;
        }
        CHECK(s_end >= 0 && !tokenizer_is_eog(l.t, s_end) && !tokenizer_is_control(l.t, s_end),
              "gemma-4: </s> is a normal token beside <|tool_response>", "id %d", s_end);
        unload(&l);
    }
}

/* WordPiece is refused by name, with what mgi runs. */
static void test_refused(void) {
    const char *path = test_shared("vocab/ggml-vocab-bert-bge.gguf");
    if (access(path, R_OK) != 0) {
        SKIP("bert-bge refused by name", "file not present");
        return;
    }
    gguf_ctx *g = gguf_open(path, 1, err, sizeof err);
    tokenizer *t = g ? tokenizer_load(g, err, sizeof err) : NULL;
    CHECK(g && !t && strstr(err, "tokenizer model 'bert' (WordPiece) is not supported") &&
          strstr(err, "mgi runs: llama (SentencePiece), gpt2 (byte-level BPE)") && strstr(err, "bert-bge.gguf"),
          "bert-bge (WordPiece) refused by name", "%s", t ? "loaded" : err);
    tokenizer_free(t);
    gguf_close(g);
}

/* ---- time on long inputs ----------------------------------------------------------------------- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_speed(void) {
    static const char *rels[] = {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                                 "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-qwen35.gguf",
                                 "vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-falcon.gguf",
                                 "vocab/ggml-vocab-gemma-4.gguf"};
    enum { N = 100 * 1024 };
    char *text = malloc(N);
    for (size_t v = 0; v < sizeof rels / sizeof rels[0]; v++) {
        loaded l = load(rels[v]);
        if (!l.t) continue;
        static const char *kinds[] = {"prose", "one letter", "spaces", "digits", "random bytes"};
        for (int k = 0; k < 5; k++) {
            static const char prose[] = "Once upon a time, in a garden of silicon dreams, 3.14 tokens\n\td! ";
            uint32_t x = 99;
            for (size_t i = 0; i < N; i++) {
                x = x * 1103515245u + 12345u;
                text[i] = k == 0 ? prose[i % (sizeof prose - 1)] : k == 1 ? 'a' : k == 2 ? ' '
                        : k == 3 ? '7' : (char)(x >> 16);
            }
            double t0 = now();
            int64_t n;
            int32_t *ids = encode(l.t, text, N, true, true, &n);
            double dt = now() - t0;
            char name[200];
            /* 0.5 s for the two original vocabularies; the others merge long runs of spaces and
             * letters into long tokens (50-70 ms each on an idle machine), so 1.5 s still
             * catches anything quadratic on a busy one */
            double limit = v < 2 ? 0.5 : 1.5;
            snprintf(name, sizeof name, "%s: 100 KB of %s in under %.1f s", rels[v], kinds[k], limit);
            printf("  %.1f ms, %lld ids\n", dt * 1e3, (long long)n);
            CHECK(n > 0 && dt < limit, name, "%.3f s, %lld ids", dt, (long long)n);
            free(ids);
        }
        unload(&l);
    }
    free(text);
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
    static const char *const suites[] = {
        "llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder",
        "falcon", "mpt", "starcoder", "refact", "command-r", "gemma-4"};
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", suites[i]);
        test_vocab_cases(rel);
    }
    test_golden();
    test_special();
    test_bytes();
    test_stream();
    test_errors();
    test_pre();
    test_pre_names();
    test_decode();
    test_refused();
    test_eog();
    test_speed();
    test_speed_rows();
    return test_done();
}
