/* Helpers the tokenizer's unit tests share (test_tokenizer.c, test_tokenizer_pre.c): loading a
 * shared vocabulary, encoding and decoding with fresh buffers, reading a file, a clock. */
#ifndef MGI_TEST_TOKENIZER_UTIL_H
#define MGI_TEST_TOKENIZER_UTIL_H

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

static inline loaded load(const char *rel) {
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

static inline void unload(loaded *l) {
    tokenizer_free(l->t);
    gguf_close(l->g);
}

/* ids of text (no text parsing of special tokens unless asked); caller frees; *n = count. */
static inline int32_t *encode(const tokenizer *t, const char *text, size_t len, bool bos, bool special, int64_t *n) {
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
static inline char *decode(const tokenizer *t, const int32_t *ids, int64_t n, size_t *len) {
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

static inline char *read_all(const char *path, size_t *len) {
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

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
