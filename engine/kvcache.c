/* The CPU path's f32 KV cache: allocation with the size checked for overflow. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kvcache.h"

int kvcache_init(kvcache *kv, int32_t n_layer, int32_t n_ctx, int32_t kv_dim, char *err, size_t err_size) {
    memset(kv, 0, sizeof *kv);
    if (n_layer < 1 || n_ctx < 1 || kv_dim < 1) {
        snprintf(err, err_size, "KV cache: bad size (%d layers, %d positions, %d values)", n_layer, n_ctx, kv_dim);
        return -1;
    }
    size_t n = (size_t)n_layer * (size_t)n_ctx;
    if (n > SIZE_MAX / sizeof(float) / (size_t)kv_dim) {
        snprintf(err, err_size, "KV cache: %d layers x %d positions x %d values overflows", n_layer, n_ctx, kv_dim);
        return -1;
    }
    n *= (size_t)kv_dim;
    kv->k = calloc(n, sizeof(float));
    kv->v = calloc(n, sizeof(float));
    if (!kv->k || !kv->v) {
        snprintf(err, err_size, "KV cache: out of memory for %zu MiB; use a smaller -c",
                 2 * n * sizeof(float) >> 20);
        kvcache_free(kv);
        return -1;
    }
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->kv_dim = kv_dim;
    return 0;
}

void kvcache_free(kvcache *kv) {
    free(kv->k);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}
