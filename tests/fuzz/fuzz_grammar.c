/* libFuzzer target: GBNF text and JSON Schema on arbitrary bytes. The first byte picks the
 * reading (even: GBNF, odd: schema); the rest is the input, split at the first NUL into the
 * grammar and a text to feed. Every grammar that compiles is then driven: the text fed in byte
 * and token steps over a small vocabulary, masks compared with per-token checks, copies made.
 * No crash, no hang (the matcher's GRAMMAR_MAX_WORK bound), bounded memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar.h"
#include "engine/jsonschema.h"

static const char *PIECES[] = {"{", "}", "\"", "a", "1", " ", "\n", ",", ":", "[", "]", "ab", "\"a\":", "\xc3",
                               "\xa9", "\xc3\xa9", "true", "-", ".", "x", "\\", "", "0", "(", ")", "+", "*", "\xe2\x82"};
#define N_PIECES (int32_t)(sizeof PIECES / sizeof PIECES[0])

static void drive(const grammar *g, const uint8_t *text, size_t n) {
    static grammar_vocab *v;
    if (!v) {
        size_t lens[N_PIECES];
        for (int32_t i = 0; i < N_PIECES; i++) lens[i] = strlen(PIECES[i]);
        int32_t eog = 21;
        char err[256];
        v = grammar_vocab_new(PIECES, lens, N_PIECES, &eog, 1, err, sizeof err);
        if (!v) abort();
    }
    grammar_state *s = grammar_state_new(g);
    if (!s) return;
    uint8_t mask[N_PIECES];
    for (size_t i = 0; i < n && i < 256; i++) {
        int64_t allowed = grammar_fill_mask(s, v, mask);
        if (allowed < 0) break; /* too ambiguous: reported, not a crash */
        int64_t count = 0;
        for (int32_t t = 0; t < N_PIECES; t++) {
            if (mask[t] != grammar_allows_token(s, v, t)) abort();
            count += mask[t];
        }
        if (count != allowed) abort();
        if (mask[21] != grammar_is_complete(s)) abort();
        if (text[i] & 0x80) { /* a token step: the byte picks the token */
            int32_t id = text[i] % N_PIECES;
            int rc = grammar_accept_token(s, v, id);
            if ((rc == 0) != (mask[id] == 1)) abort();
        } else {
            grammar_state *c = grammar_state_copy(s);
            if (!c) break;
            int a = grammar_accept_bytes(s, text + i, 1), b = grammar_accept_bytes(c, text + i, 1);
            if (a != b || grammar_is_complete(s) != grammar_is_complete(c)) abort();
            grammar_state_free(c);
        }
    }
    grammar_state_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192) return 0;
    const uint8_t *body = data + 1;
    size_t n = size - 1;
    const uint8_t *nul = memchr(body, 0, n);
    size_t glen = nul ? (size_t)(nul - body) : n;
    const uint8_t *text = nul ? nul + 1 : body + n;
    size_t tlen = nul ? n - glen - 1 : 0;
    char err[512];
    grammar *g;
    if (data[0] & 1) g = jsonschema_compile((const char *)body, glen, err, sizeof err);
    else g = grammar_parse((const char *)body, glen, err, sizeof err);
    if (!g) {
        if (!err[0] || !memchr(err, 0, sizeof err)) abort(); /* a failure always says why */
        return 0;
    }
    drive(g, text, tlen);
    grammar_free(g);
    return 0;
}
