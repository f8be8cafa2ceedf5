/* libFuzzer target: the prompt-cache loader on arbitrary bytes, three ways: the bytes as a file;
 * the bytes behind a header whose checksum and length are made right (so the fuzzer reaches the
 * zlib stream); and the bytes as the payload of a valid file written by the saver, which must
 * load back equal. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/promptcache.h"

static const promptcache_model model = {
    .model_hash = 0x0123456789abcdefULL, .n_layer = 2, .kv_dim = 4, .n_vocab = 300, .max_tokens = 16,
};

typedef struct {
    const uint8_t *kv;  /* [n_layer][2][n][kv_dim] floats, as bytes */
    int32_t n;
} src;

static int kv_fn(void *user, int32_t layer, float *k, float *v, char *err, size_t err_size) {
    (void)err;
    (void)err_size;
    const src *s = user;
    size_t row = (size_t)s->n * model.kv_dim * sizeof(float);
    memcpy(k, s->kv + (2 * (size_t)layer) * row, row);
    memcpy(v, s->kv + (2 * (size_t)layer + 1) * row, row);
    return 0;
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    promptcache pc;
    if (!promptcache_parse(&pc, data, size, &model, err, sizeof err)) promptcache_free(&pc);

    /* A header made consistent around the fuzzer's bytes (odd first byte: shapes of this model
     * and a payload size to match, so the zlib stream is what gets fuzzed). */
    if (size >= 48) {
        uint8_t *f = malloc(PROMPTCACHE_HEADER + size - 48);
        if (!f) return 0;
        memcpy(f, data, 48);
        memcpy(f, "MGIPCACH", 8);
        if (data[0] & 1) {
            uint32_t nt = data[1] % (model.max_tokens + 1);
            uint64_t pay = (uint64_t)nt * (4 + 2 * (uint64_t)model.n_layer * model.kv_dim * 4);
            put32(f + 8, 1);
            put32(f + 12, PROMPTCACHE_HEADER);
            for (int i = 0; i < 8; i++) f[16 + i] = (uint8_t)(model.model_hash >> (8 * i));
            put32(f + 24, (uint32_t)model.n_layer);
            put32(f + 28, (uint32_t)model.kv_dim);
            put32(f + 32, nt);
            put32(f + 36, 0);
            for (int i = 0; i < 8; i++) f[40 + i] = (uint8_t)(pay >> (8 * i));
        }
        memcpy(f + PROMPTCACHE_HEADER, data + 48, size - 48);
        uint64_t packed = size - 48;
        for (int i = 0; i < 8; i++) f[48 + i] = (uint8_t)(packed >> (8 * i));
        put32(f + 56, (uint32_t)crc32(0, data + 48, (uInt)(size - 48)));
        put32(f + 60, (uint32_t)crc32(0, f, 60));
        if (!promptcache_parse(&pc, f, PROMPTCACHE_HEADER + size - 48, &model, err, sizeof err)) promptcache_free(&pc);
        free(f);
    }

    /* The bytes as tokens and K/V of a valid file: it must load back exactly. */
    size_t per_tok = 4 + 2 * (size_t)model.n_layer * model.kv_dim * sizeof(float);
    int32_t n = (int32_t)(size / per_tok);
    if (n > model.max_tokens) n = model.max_tokens;
    if (n < 1) return 0;
    int32_t tokens[16];
    for (int32_t i = 0; i < n; i++) tokens[i] = (int32_t)(data[i] % model.n_vocab);
    src s = {data + 4 * (size_t)n, n};
    int fd = memfd_create("fuzz_prompt_cache", 0);
    if (fd < 0) return 0;
    if (promptcache_write_fd(fd, &model, tokens, n, kv_fn, &s, err, sizeof err)) abort();
    off_t len = lseek(fd, 0, SEEK_END);
    uint8_t *file = malloc((size_t)len);
    if (!file || pread(fd, file, (size_t)len, 0) != len) abort();
    close(fd);
    if (promptcache_parse(&pc, file, (size_t)len, &model, err, sizeof err)) abort();
    size_t kv_bytes = (size_t)n * (per_tok - 4);
    if (pc.n_tokens != n || memcmp(pc.tokens, tokens, (size_t)n * 4) || memcmp(pc.kv, s.kv, kv_bytes)) abort();
    promptcache_free(&pc);
    free(file);
    return 0;
}
