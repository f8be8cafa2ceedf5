/* Private to gguf/: the reader's context, shared by the parser (reader.c) and the accessors
 * (access.c). Not for use outside the folder. */
#ifndef MGI_GGUF_INTERNAL_H
#define MGI_GGUF_INTERNAL_H

#include "gguf/gguf.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf/ assumes a little-endian host (GGUF files are little-endian)"
#endif

/* Limits on what a file may ask of us; anything beyond is an error, not an allocation. */
#define GGUF_MAX_ARRAY_DEPTH 8                 /* nested arrays: arr of arr of ... */
#define GGUF_MAX_META_BYTES (1ull << 30)       /* memory for keys, strings and array items */
#define GGUF_MAX_NAME 64                       /* ggml's GGML_MAX_NAME, NUL included */

/* Metadata memory: a list of bump-allocated chunks, freed together. */
typedef struct gguf_chunk gguf_chunk;
struct gguf_chunk {
    gguf_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

/* Open-addressing table of indices + 1 (0 = empty), keyed by a name. */
typedef struct {
    int64_t *slot;
    uint64_t mask;
} gguf_index;

struct gguf_ctx {
    char *path;
    const uint8_t *base;      /* the whole file */
    uint64_t size;
    void *map;                /* mmap'ed region, or NULL */
    void *owned;              /* read() buffer, or NULL */
    int locked;               /* gguf_mlock succeeded: munlock at close */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    const char **keys;
    gguf_value *values;
    int64_t n_tensors;
    gguf_tensor *tensors;
    gguf_index kv_index;
    gguf_index tensor_index;
    gguf_chunk *chunks;
    uint64_t meta_bytes;
};

uint64_t gguf_hash_(const char *s);
static inline const char *gguf_key_name_(const gguf_ctx *c, int64_t i) { return c->keys[i]; }
static inline const char *gguf_tensor_name_(const gguf_ctx *c, int64_t i) { return c->tensors[i].name; }

#endif
