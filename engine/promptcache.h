/* Prompt caches (mgi run --prompt-cache): the KV state of a sequence after its prompt, saved so
 * the next run with the same prompt prefix skips recomputing it. The file is never trusted:
 * header checksum, model hash, shapes, sizes, the zlib stream and a checksum of the payload are
 * all verified before anything reaches the KV cache.
 *
 * File layout (little-endian), a 64-byte header then the zlib (deflate) stream of the payload:
 *    0  magic "MGIPCACH"          8 bytes
 *    8  version = 1               u32
 *   12  header size = 64          u32
 *   16  model hash                u64  (engine_model_hash: FNV-1a over the GGUF file's size,
 *                                       metadata, tensor table and the first bytes of each tensor)
 *   24  n_layer                   u32
 *   28  kv_dim                    u32  (values per K or V row of one position)
 *   32  n_tokens                  u32
 *   36  value type = 0 (f32)      u32
 *   40  payload bytes             u64  (uncompressed)
 *   48  compressed bytes          u64  (the file is exactly 64 + this long)
 *   56  payload CRC-32            u32  (zlib's crc32 of the uncompressed payload)
 *   60  header CRC-32             u32  (of bytes 0..59)
 * Payload: token ids i32 [n_tokens]; then per layer K f32 [n_tokens][kv_dim] and V likewise. */
#ifndef MGI_ENGINE_PROMPTCACHE_H
#define MGI_ENGINE_PROMPTCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

#define PROMPTCACHE_HEADER 64

/* What a cache must match to be used. */
typedef struct {
    uint64_t model_hash;
    int32_t n_layer, kv_dim, n_vocab;
    int32_t max_tokens;  /* positions a sequence may hold */
} promptcache_model;

typedef struct {
    int32_t n_tokens;
    int32_t *tokens;  /* [n_tokens], each in [0, n_vocab) */
    float *kv;        /* [n_layer][2][n_tokens][kv_dim]: K then V of each layer */
} promptcache;

promptcache_model promptcache_model_of(const engine *e);

/* Checks and decodes a cache file's bytes; 0, or -1 with the reason (truncated, checksum,
 * other model, sizes...). Memory is bounded by m->max_tokens. */
int promptcache_parse(promptcache *pc, const uint8_t *data, size_t size, const promptcache_model *m, char *err,
                      size_t err_size);
/* Reads and parses a file; 0, 1 when it does not exist, or -1 with the reason. */
int promptcache_read(promptcache *pc, const char *path, const promptcache_model *m, char *err, size_t err_size);
void promptcache_free(promptcache *pc);

/* Fills layer l's K and V, each [n_tokens][kv_dim]. 0, or -1 with a message. */
typedef int (*promptcache_kv_fn)(void *user, int32_t layer, float *k, float *v, char *err, size_t err_size);
/* Writes a cache of tokens[0..n) to fd (from its start); 0, or -1 with a message. */
int promptcache_write_fd(int fd, const promptcache_model *m, const int32_t *tokens, int32_t n, promptcache_kv_fn fn,
                         void *user, char *err, size_t err_size);
/* Saves positions [0, n) of sequence seq with their tokens to path, through a temporary file in
 * the same folder renamed over path, so a failure (a full disk) leaves no partial file. */
int promptcache_save(const char *path, engine *e, int32_t seq, const int32_t *tokens, int32_t n, char *err,
                     size_t err_size);
/* Loads the first n positions of a parsed cache into the empty sequence seq. */
int promptcache_apply(engine *e, int32_t seq, const promptcache *pc, int32_t n, char *err, size_t err_size);

#endif
