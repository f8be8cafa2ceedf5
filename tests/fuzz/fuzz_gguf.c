/* libFuzzer target: gguf_open_buffer on arbitrary bytes, then every accessor over whatever
 * opened (all keys and values, nested arrays, typed getters, every tensor's data bytes). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"

static volatile uint64_t sink;

static void touch_value(const gguf_value *v, int depth) {
    sink += (uint64_t)v->type + (uint64_t)depth;
    if (v->type == GGUF_TYPE_STRING) {
        sink += strlen(v->v.str.ptr) <= v->v.str.len;
        if (v->v.str.len) sink += (uint8_t)v->v.str.ptr[v->v.str.len - 1];
    } else if (v->type == GGUF_TYPE_ARRAY) {
        if (v->v.arr.items) {
            for (uint64_t i = 0; i < v->v.arr.n; i++) touch_value(&v->v.arr.items[i], depth + 1);
        } else {
            for (uint64_t i = 0; i < v->v.arr.n; i++) {
                float f = gguf_arr_f32(v, i);
                uint32_t bits;
                memcpy(&bits, &f, 4);
                sink += (uint64_t)gguf_arr_i64(v, i) + bits;
            }
        }
    } else {
        sink += v->v.u64;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    gguf_ctx *g = gguf_open_buffer(data, size, "fuzz", err, sizeof err);
    if (!g) {
        sink += strlen(err);
        return 0;
    }
    sink += gguf_version(g) + gguf_alignment(g) + gguf_file_size(g) + gguf_data_offset(g);
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *key = gguf_key(g, i);
        const gguf_value *v = gguf_value_at(g, i);
        touch_value(v, 0);
        sink += (uint64_t)gguf_find_key(g, key) == (uint64_t)i;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        float f;
        bool b;
        const char *s;
        const gguf_value *a;
        sink += (uint64_t)(gguf_get_u32(g, key, &u32) + gguf_get_i32(g, key, &i32) +
                           gguf_get_u64(g, key, &u64) + gguf_get_f32(g, key, &f) +
                           gguf_get_bool(g, key, &b) + gguf_get_str(g, key, &s) +
                           gguf_get_arr(g, key, GGUF_TYPE_COUNT, &a));
        sink += strlen(gguf_type_name(v->type));
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        sink += (uint64_t)gguf_find_tensor(g, t->name) == (uint64_t)i;
        const uint8_t *p = t->data;
        uint64_t sum = 0;
        for (uint64_t k = 0; k < t->size; k++) sum += p[k];
        sink += sum + (uint64_t)t->n_elems + t->offset;
    }
    gguf_close(g);
    return 0;
}
