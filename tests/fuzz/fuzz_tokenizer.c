/* libFuzzer target: arbitrary bytes -> ids -> text on the shared SPM and GPT-2 vocabularies
 * ($SHARED, default ../shared). The first byte picks the vocabulary and the flags; without
 * special-token parsing the pieces must give the input back exactly (SPM: after the one space
 * the prefix rule adds, and with "▁" in the input read as a space, which SentencePiece cannot
 * tell apart), and the streaming writer must give the same bytes as the pieces. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer.h"
#include "gguf/gguf.h"

static tokenizer *toks[2];

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
    toks[0] = load("vocab/ggml-vocab-llama-spm.gguf");
    toks[1] = load("vocab/ggml-vocab-gpt-2.gguf");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const tokenizer *t = toks[data[0] & 1];
    bool spm = !(data[0] & 1), parse_special = data[0] & 2, add_bos = data[0] & 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
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

    if (!parse_special) {
        char *want = malloc(len + 2);
        size_t wl = 0;
        if (spm && len > 0) want[wl++] = ' ';
        for (size_t i = 0; i < len; i++) {
            if (spm && i + 3 <= len && !memcmp(text + i, "\xE2\x96\x81", 3)) {
                want[wl++] = ' ';
                i += 2;
            } else {
                want[wl++] = text[i];
            }
        }
        if (total != wl || memcmp(dec, want, wl)) abort();
        free(want);
    }
    free(ids);
    free(dec);
    free(str);
    return 0;
}
