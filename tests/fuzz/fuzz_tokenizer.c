/* libFuzzer target: arbitrary bytes -> ids -> text on shared vocabularies ($SHARED, default
 * ../shared): SPM, GPT-2, Qwen3.5, DeepSeek LLM and gemma4. The first byte picks the vocabulary
 * and the flags; without special-token parsing the pieces must give the input back exactly (SPM:
 * after the one space the prefix rule adds; SPM and gemma4: with "▁" read as a space, which they
 * cannot tell apart), and the streaming writer must give the same bytes as the pieces.
 * With bit 3 of the first byte set, the input describes a vocabulary instead (odd tokens,
 * merges, types, ids), written as a GGUF in memory, loaded, and used on the rest of the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer.h"
#include "engine/unicode.h"
#include "gguf/gguf.h"

/* index 0 is the one SentencePiece vocabulary, the last the one gemma4 (spaces as U+2581) */
static const char *const vocabs[] = {"llama-spm", "gpt-2", "qwen35", "deepseek-llm", "gemma-4"};
enum { N_VOCABS = sizeof vocabs / sizeof vocabs[0] };
static tokenizer *toks[N_VOCABS];
/* Whether each byte alone decodes back to itself. DeepSeek's vocabulary gives the bytes that
 * never occur in UTF-8 (0xC0, 0xF5...) user-defined tokens whose text is their stand-in ("ÿ"),
 * so there only well-formed text must come back exactly. */
static bool bytes_round_trip[N_VOCABS];

static bool utf8_valid(const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += unicode_decode(s + i, len - i, &cp);
        if (cp == UNICODE_INVALID) return false;
    }
    return true;
}

static tokenizer *load(const char *rel) {
    char path[1024], err[1024];
    const char *root = getenv("SHARED");
    snprintf(path, sizeof path, "%s/%s", root && *root ? root : "../shared", rel);
    gguf_ctx *g = gguf_open(path, 1, err, sizeof err);
    tokenizer *t = g ? tokenizer_load(g, err, sizeof err) : NULL;
    gguf_close(g);
    if (!t) {
        fprintf(stderr, "fuzz_tokenizer: %s (set SHARED to the shared directory)\n", err);
        exit(1);
    }
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    for (int i = 0; i < N_VOCABS; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocabs[i]);
        toks[i] = load(rel);
        bytes_round_trip[i] = true;
        for (int b = 0; b < 256 && bytes_round_trip[i]; b++) {
            char c = (char)b, err[256];
            int32_t ids[8];
            int64_t n = tokenizer_encode(toks[i], &c, 1, false, false, ids, 8, err, sizeof err);
            size_t total = 0, pl = 0;
            const char *p = "";
            for (int64_t k = 0; k < n && k < 8; k++) p = tokenizer_piece(toks[i], ids[k], &pl), total += pl;
            /* one piece of one byte (SPM: after the prefix space, its own piece) */
            bool spm = i == 0;
            bytes_round_trip[i] = n >= 1 && total == (spm ? 2u : 1u) && (unsigned char)p[pl - 1] == b;
        }
        if (getenv("FUZZ_TOKENIZER_VERBOSE"))
            fprintf(stderr, "fuzz_tokenizer: %s: every byte alone round trips: %d\n", vocabs[i], bytes_round_trip[i]);
    }
    return 0;
}

/* Encodes, checks the ids are in range, and that streaming gives the bytes of the pieces;
 * returns the ids (caller frees) and their count. */
static int32_t *encode_checked(const tokenizer *t, const char *text, size_t len, bool add_bos,
                               bool parse_special,
                               int64_t *count, char **decoded, size_t *decoded_len) {
    char err[256];
    int32_t small[4];
    int64_t n = tokenizer_encode(t, text, len, add_bos, parse_special, small, 4, err, sizeof err);
    if (n < 0) abort();
    int32_t *ids = malloc((size_t)(n + 1) * sizeof *ids);
    if (tokenizer_encode(t, text, len, add_bos, parse_special, ids, n, err, sizeof err) != n) abort();
    if (n > 0 && memcmp(ids, small, (size_t)(n < 4 ? n : 4) * sizeof *ids)) abort();

    size_t cap = tokenizer_max_piece(t) + 3, total = 0, streamed = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tokenizer_n_vocab(t)) abort();
        size_t pl;
        tokenizer_piece(t, ids[i], &pl);
        total += pl;
    }
    char *dec = malloc(total + 1), *str = malloc(total + cap), *o = dec;
    tokenizer_stream s = {0};
    for (int64_t i = 0; i < n; i++) {
        size_t pl;
        const char *p = tokenizer_piece(t, ids[i], &pl);
        memcpy(o, p, pl);
        o += pl;
        size_t w = tokenizer_stream_put(t, &s, ids[i], str + streamed, cap);
        if (w > cap) abort();
        streamed += w;
    }
    streamed += tokenizer_stream_flush(&s, str + streamed, cap);
    if (streamed != total || memcmp(str, dec, total)) abort();
    free(str);
    *count = n;
    *decoded = dec;
    *decoded_len = total;
    return ids;
}

/* ---- made-up vocabularies ------------------------------------------------------------------- */

typedef struct {
    uint8_t *b;
    size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->b = realloc(b->b, b->cap);
    }
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s, size_t n) { put_u64(b, n), put(b, s, n); }
static void put_key(buf *b, const char *k, uint32_t type) { put_str(b, k, strlen(k)), put_u32(b, type); }
static void put_arr(buf *b, const char *k, uint32_t elem, uint64_t n) {
    put_key(b, k, GGUF_TYPE_ARRAY), put_u32(b, elem), put_u64(b, n);
}

/* data: flags byte, then tokens separated by 0x00 up to a 0xFF byte, then the text. */
static void fuzz_vocab(const uint8_t *data, size_t size) {
    if (size < 2) return;
    uint8_t flags = data[1];
    const uint8_t *end = memchr(data + 2, 0xFF, size - 2);
    const char *text = end ? (const char *)end + 1 : "";
    size_t len = end ? size - (size_t)(end + 1 - data) : 0;
    if (!end) end = data + size;
    const char *tok[512];
    size_t tl[512], n = 0;
    for (const uint8_t *p = data + 2; p <= end && n < 512;) {
        const uint8_t *z = memchr(p, 0, (size_t)(end - p));
        if (!z) z = end;
        tok[n] = (const char *)p, tl[n] = (size_t)(z - p), n++;
        p = z + 1;
    }
    /* one name of each regex row of tokenizer_pre.c; "gemma4" is the model of that name */
    static const char *const pres[] = {
        "default", "gpt-2", "smollm", "falcon", "llama3", "jais-2", "qwen2", "qwen35", "bailingmoe",
        "seed-coder", "ufakzeka", "laguna", "minicpm5", "exaone-moe", "gpt-4o", "tekken",
        "granite-embed-multi-97m", "tiny_aya", "youtu", "kimi-k2", "deepseek-llm", "deepseek-coder",
        "deepseek-v3", "spark2_5", "afmoe", "bloom", "viking", "chameleon", "superbpe", "gemma4"};
    const char *pre = pres[(n + (n ? tl[0] : 0)) % (sizeof pres / sizeof pres[0])];
    bool spm = !(flags & 1), gemma4 = !spm && !strcmp(pre, "gemma4");
    const char *model = spm ? "llama" : gemma4 ? "gemma4" : "gpt2";
    buf b = {0};
    put(&b, "GGUF", 4), put_u32(&b, 3), put_u64(&b, 0), put_u64(&b, spm ? 5 : 7);
    put_key(&b, "tokenizer.ggml.model", GGUF_TYPE_STRING), put_str(&b, model, strlen(model));
    put_arr(&b, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, n);
    for (size_t i = 0; i < n; i++) put_str(&b, tok[i], tl[i]);
    put_arr(&b, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, n);
    for (size_t i = 0; i < n; i++) {
        float sc = -(float)((i * 7 + tl[i]) % 13);
        put(&b, &sc, 4);
    }
    put_arr(&b, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, n);
    for (size_t i = 0; i < n; i++) put_u32(&b, tl[i] ? (uint8_t)tok[i][tl[i] - 1] % 8 : 1);
    put_key(&b, "tokenizer.ggml.bos_token_id", GGUF_TYPE_UINT32), put_u32(&b, flags >> 4);
    if (!spm) {
        put_key(&b, "tokenizer.ggml.pre", GGUF_TYPE_STRING);
        put_str(&b, pre, strlen(pre));
        put_arr(&b, "tokenizer.ggml.merges", GGUF_TYPE_STRING, n ? n - 1 : 0);
        for (size_t i = 0; i + 1 < n; i++) {
            char m[1024];
            size_t a = tl[i] < 500 ? tl[i] : 500, c = tl[i + 1] < 500 ? tl[i + 1] : 500;
            memcpy(m, tok[i], a), m[a] = ' ', memcpy(m + a + 1, tok[i + 1], c);
            put_str(&b, m, a + 1 + c);
        }
    }
    char err[256];
    gguf_ctx *g = gguf_open_buffer(b.b, b.n, "fuzz.gguf", err, sizeof err);
    tokenizer *t = g ? tokenizer_load(g, err, sizeof err) : NULL;
    gguf_close(g);
    if (t) {
        int64_t count;
        char *dec;
        size_t dl;
        free(encode_checked(t, text, len, flags & 4, flags & 8, &count, &dec, &dl));
        free(dec);
        tokenizer_free(t);
    }
    free(b.b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] & 8) {
        fuzz_vocab(data, size);
        return 0;
    }
    int v = (data[0] & 1) | (((data[0] >> 4) % ((N_VOCABS + 1) / 2)) << 1);
    const tokenizer *t = toks[v < N_VOCABS ? v : N_VOCABS - 1];
    bool spm = t == toks[0], raw = t == toks[N_VOCABS - 1];
    bool parse_special = data[0] & 2, add_bos = data[0] & 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int64_t n;
    char *dec;
    size_t total;
    int32_t *ids = encode_checked(t, text, len, add_bos, parse_special, &n, &dec, &total);
    if (!parse_special && (bytes_round_trip[v < N_VOCABS ? v : N_VOCABS - 1] || utf8_valid(text, len))) {
        char *want = malloc(len + 2);
        size_t wl = 0;
        if (spm && len > 0) want[wl++] = ' ';
        for (size_t i = 0; i < len; i++) {
            if ((spm || raw) && i + 3 <= len && !memcmp(text + i, "\xE2\x96\x81", 3)) {
                want[wl++] = ' ';
                i += 2;
            } else {
                want[wl++] = text[i];
            }
        }
        /* gemma4's user-defined tokens come back as their text, "▁" and all */
        if (raw) {
            size_t o = 0;
            for (size_t i = 0; i < total; i++) {
                if (i + 3 <= total && !memcmp(dec + i, "\xE2\x96\x81", 3)) dec[o++] = ' ', i += 2;
                else dec[o++] = dec[i];
            }
            total = o;
        }
        if (total != wl || memcmp(dec, want, wl)) abort();
        free(want);
    }
    free(ids);
    free(dec);
    return 0;
}
