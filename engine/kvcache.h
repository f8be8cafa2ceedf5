/* The attention key/value cache of the CPU path: f32, one K and one V matrix per layer,
 * [n_ctx][kv_dim] each, position-major so a new token's row is one contiguous write. */
#ifndef MGI_ENGINE_KVCACHE_H
#define MGI_ENGINE_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int32_t n_layer;
    int32_t n_ctx;     /* positions held */
    int32_t kv_dim;    /* n_head_kv * head_dim */
    float *k;          /* [n_layer][n_ctx][kv_dim] */
    float *v;          /* [n_layer][n_ctx][kv_dim] */
} kvcache;

/* Allocates a zeroed cache; 0, or -1 with a message (size overflow, out of memory). */
int kvcache_init(kvcache *kv, int32_t n_layer, int32_t n_ctx, int32_t kv_dim, char *err, size_t err_size);
void kvcache_free(kvcache *kv);

/* Rows of layer l at position pos (caller keeps 0 <= pos < n_ctx). */
static inline float *kvcache_k(const kvcache *kv, int32_t l, int32_t pos) {
    return kv->k + ((size_t)l * (size_t)kv->n_ctx + (size_t)pos) * (size_t)kv->kv_dim;
}
static inline float *kvcache_v(const kvcache *kv, int32_t l, int32_t pos) {
    return kv->v + ((size_t)l * (size_t)kv->n_ctx + (size_t)pos) * (size_t)kv->kv_dim;
}

#endif
