/* Unit tests of the tokenizer: llama.cpp's own tokenizer cases on all the shared vocabularies,
 * text -> ids -> text round trips, the tiny model's golden prompts, special tokens, the
 * streaming writer and the detokeniser, end-of-generation ids, metadata errors and the time
 * taken on long inputs. Every pre-tokenizer name: test_tokenizer_pre.c. */
#include "tests/unit/tokenizer_util.h"

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
    size_t inp_len = 0, out_len = 0;
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
    /* Kimi K2 may come without merges (llama.cpp allows it): bytes stay bytes */
    static const char *const abc[] = {"a", "b", "c", "ab", "bc"};
    start(g);
    kv_str(g, "tokenizer.ggml.model", "gpt2");
    kv_str(g, "tokenizer.ggml.pre", "kimi-k2");
    kv_tokens(g, "tokenizer.ggml.tokens", 5, abc);
    t = load_buf(g);
    if (CHECK(t != NULL, "kimi-k2 without merges loads", "%s", err)) {
        static const int32_t ids[] = {0, 1, 2};
        check_ids(t, "kimi-k2 without merges keeps the bytes", "abc", false, false, ids, 3);
    }
    tokenizer_free(t);
    /* a repeated merge keeps its first rank, as llama.cpp's map of ranks does: "b c" (rank 0)
     * goes before "a b" (rank 1), not after it (rank 2) */
    start(g);
    kv_str(g, "tokenizer.ggml.model", "gpt2");
    kv_str(g, "tokenizer.ggml.pre", "gpt-2");
    kv_tokens(g, "tokenizer.ggml.tokens", 5, abc);
    kv_tokens(g, "tokenizer.ggml.merges", 3, (const char *const[]){"b c", "a b", "b c"});
    t = load_buf(g);
    if (CHECK(t != NULL, "vocabulary with a repeated merge loads", "%s", err)) {
        static const int32_t ids[] = {0, 4};
        check_ids(t, "a repeated merge keeps its first rank", "abc", false, false, ids, 2);
    }
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
    test_decode();
    test_refused();
    test_eog();
    test_speed();
    return test_done();
}
