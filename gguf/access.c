/* Read-only accessors of an opened GGUF file: file facts, metadata lookups with typed getters,
 * and the tensor table. Everything here works on what reader.c has already validated. */
#include <math.h>
#include <string.h>

#include "gguf/internal.h"

const char *gguf_path(const gguf_ctx *c) { return c->path; }
uint32_t gguf_version(const gguf_ctx *c) { return c->version; }
uint32_t gguf_alignment(const gguf_ctx *c) { return c->alignment; }
uint64_t gguf_file_size(const gguf_ctx *c) { return c->size; }
uint64_t gguf_data_offset(const gguf_ctx *c) { return c->data_offset; }

const char *gguf_type_name(gguf_type t) {
    static const char *const names[GGUF_TYPE_COUNT] = {
        "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING",
        "ARRAY", "UINT64", "INT64", "FLOAT64",
    };
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "unknown";
}

/* --- lookups ------------------------------------------------------------------------------------ */

static int64_t index_find(const gguf_index *ix, const char *name, int64_t n,
                          const char *(*name_of)(const gguf_ctx *, int64_t), const gguf_ctx *c) {
    if (!ix->slot || !name) return -1;
    for (uint64_t h = gguf_hash_(name) & ix->mask;; h = (h + 1) & ix->mask) {
        int64_t s = ix->slot[h];
        if (s == 0) return -1;
        if (s <= n && strcmp(name_of(c, s - 1), name) == 0) return s - 1;
    }
}


int64_t gguf_n_kv(const gguf_ctx *c) { return c->n_kv; }

const char *gguf_key(const gguf_ctx *c, int64_t i) {
    return i >= 0 && i < c->n_kv ? c->keys[i] : NULL;
}

const gguf_value *gguf_value_at(const gguf_ctx *c, int64_t i) {
    return i >= 0 && i < c->n_kv ? &c->values[i] : NULL;
}

int64_t gguf_find_key(const gguf_ctx *c, const char *key) {
    return index_find(&c->kv_index, key, c->n_kv, gguf_key_name_, c);
}

const gguf_value *gguf_get(const gguf_ctx *c, const char *key) {
    return gguf_value_at(c, gguf_find_key(c, key));
}

int64_t gguf_n_tensors(const gguf_ctx *c) { return c->n_tensors; }

const gguf_tensor *gguf_tensor_at(const gguf_ctx *c, int64_t i) {
    return i >= 0 && i < c->n_tensors ? &c->tensors[i] : NULL;
}

int64_t gguf_find_tensor(const gguf_ctx *c, const char *name) {
    return index_find(&c->tensor_index, name, c->n_tensors, gguf_tensor_name_, c);
}

const gguf_tensor *gguf_get_tensor(const gguf_ctx *c, const char *name) {
    return gguf_tensor_at(c, gguf_find_tensor(c, name));
}

/* --- typed getters ------------------------------------------------------------------------------ */

static int is_unsigned(gguf_type t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}

static int is_signed(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

/* An integer value seen both ways: *neg for negative values, *u its value when not negative,
 * *s its value saturated to int64. Returns GGUF_ABSENT, GGUF_WRONG_TYPE or GGUF_OK. */
static int get_int(const gguf_ctx *c, const char *key, int *neg, uint64_t *u, int64_t *s) {
    const gguf_value *v = gguf_get(c, key);
    if (!v) return GGUF_ABSENT;
    if (is_unsigned(v->type)) {
        *neg = 0;
        *u = v->v.u64;
        *s = v->v.u64 > INT64_MAX ? INT64_MAX : (int64_t)v->v.u64;
        return GGUF_OK;
    }
    if (is_signed(v->type)) {
        *neg = v->v.i64 < 0;
        *s = v->v.i64;
        *u = *neg ? 0 : (uint64_t)v->v.i64;
        return GGUF_OK;
    }
    return GGUF_WRONG_TYPE;
}

int gguf_get_u32(const gguf_ctx *c, const char *key, uint32_t *out) {
    int neg;
    uint64_t u;
    int64_t s;
    int rc = get_int(c, key, &neg, &u, &s);
    if (rc != GGUF_OK) return rc;
    if (neg || u > UINT32_MAX) return GGUF_WRONG_TYPE;
    *out = (uint32_t)u;
    return GGUF_OK;
}

int gguf_get_i32(const gguf_ctx *c, const char *key, int32_t *out) {
    int neg;
    uint64_t u;
    int64_t s;
    int rc = get_int(c, key, &neg, &u, &s);
    if (rc != GGUF_OK) return rc;
    if ((!neg && u > INT32_MAX) || s < INT32_MIN) return GGUF_WRONG_TYPE;
    *out = (int32_t)s;
    return GGUF_OK;
}

int gguf_get_u64(const gguf_ctx *c, const char *key, uint64_t *out) {
    int neg;
    uint64_t u;
    int64_t s;
    int rc = get_int(c, key, &neg, &u, &s);
    if (rc != GGUF_OK) return rc;
    if (neg) return GGUF_WRONG_TYPE;
    *out = u;
    return GGUF_OK;
}

int gguf_get_f32(const gguf_ctx *c, const char *key, float *out) {
    const gguf_value *v = gguf_get(c, key);
    if (!v) return GGUF_ABSENT;
    if (v->type != GGUF_TYPE_FLOAT32 && v->type != GGUF_TYPE_FLOAT64) return GGUF_WRONG_TYPE;
    *out = (float)v->v.f64;
    return GGUF_OK;
}

int gguf_get_bool(const gguf_ctx *c, const char *key, bool *out) {
    const gguf_value *v = gguf_get(c, key);
    if (!v) return GGUF_ABSENT;
    if (v->type != GGUF_TYPE_BOOL) return GGUF_WRONG_TYPE;
    *out = v->v.b;
    return GGUF_OK;
}

int gguf_get_str(const gguf_ctx *c, const char *key, const char **out) {
    const gguf_value *v = gguf_get(c, key);
    if (!v) return GGUF_ABSENT;
    if (v->type != GGUF_TYPE_STRING) return GGUF_WRONG_TYPE;
    *out = v->v.str.ptr;
    return GGUF_OK;
}

int gguf_get_arr(const gguf_ctx *c, const char *key, gguf_type elem, const gguf_value **out) {
    const gguf_value *v = gguf_get(c, key);
    if (!v) return GGUF_ABSENT;
    if (v->type != GGUF_TYPE_ARRAY || (elem != GGUF_TYPE_COUNT && v->v.arr.elem != elem))
        return GGUF_WRONG_TYPE;
    *out = v;
    return GGUF_OK;
}

/* --- numeric array elements --------------------------------------------------------------------- */

/* Element i of a numeric array, widened like a scalar value; 0 for string or array elements. */
static gguf_value arr_elem(const gguf_value *a, uint64_t i) {
    gguf_value v = {.type = a->v.arr.elem};
    const uint8_t *p = a->v.arr.raw;
    if (!p) {
        v.type = GGUF_TYPE_UINT64;
        return v;
    }
    switch (a->v.arr.elem) {
    case GGUF_TYPE_UINT8: v.v.u64 = p[i]; break;
    case GGUF_TYPE_INT8: v.v.i64 = (int8_t)p[i]; break;
    case GGUF_TYPE_BOOL: v.type = GGUF_TYPE_UINT8; v.v.u64 = p[i]; break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, p + 2 * i, 2); v.v.u64 = x; break; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, p + 2 * i, 2); v.v.i64 = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, p + 4 * i, 4); v.v.u64 = x; break; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, p + 4 * i, 4); v.v.i64 = x; break; }
    case GGUF_TYPE_UINT64: { uint64_t x; memcpy(&x, p + 8 * i, 8); v.v.u64 = x; break; }
    case GGUF_TYPE_INT64: { int64_t x; memcpy(&x, p + 8 * i, 8); v.v.i64 = x; break; }
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, p + 4 * i, 4); v.v.f64 = x; break; }
    case GGUF_TYPE_FLOAT64: { double x; memcpy(&x, p + 8 * i, 8); v.v.f64 = x; break; }
    default: v.type = GGUF_TYPE_UINT64; v.v.u64 = 0; break;
    }
    return v;
}

float gguf_arr_f32(const gguf_value *a, uint64_t i) {
    gguf_value v = arr_elem(a, i);
    if (is_unsigned(v.type)) return (float)v.v.u64;
    if (is_signed(v.type)) return (float)v.v.i64;
    return (float)v.v.f64;
}

/* Floats truncate toward zero and saturate; NaN gives 0. */
int64_t gguf_arr_i64(const gguf_value *a, uint64_t i) {
    gguf_value v = arr_elem(a, i);
    if (is_unsigned(v.type)) return v.v.u64 > INT64_MAX ? INT64_MAX : (int64_t)v.v.u64;
    if (is_signed(v.type)) return v.v.i64;
    if (isnan(v.v.f64)) return 0;
    if (v.v.f64 >= 9223372036854775807.0) return INT64_MAX;
    if (v.v.f64 <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v.v.f64;
}
