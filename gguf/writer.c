/* GGUF writer: collects metadata and tensors in order, then writes the whole file to a
 * temporary name next to the target and renames it, so a failed write leaves nothing behind.
 * Setters cannot fail visibly; their first error is kept and reported by gguf_writer_write. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/internal.h"
#include "quant/quant.h"

typedef struct {
    char *key;
    gguf_value v;             /* deep copy owned by the writer */
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t size;
    void *copy;               /* data copied at add time, or NULL when fill is used */
    gguf_fill_fn fill;
    void *user;
} wtensor;

struct gguf_writer {
    uint32_t version;
    uint32_t alignment;
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    char first_err[256];      /* first setter error, reported at write time */
};

static const size_t scalar_size[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = 1, [GGUF_TYPE_INT8] = 1, [GGUF_TYPE_UINT16] = 2, [GGUF_TYPE_INT16] = 2,
    [GGUF_TYPE_UINT32] = 4, [GGUF_TYPE_INT32] = 4, [GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1,
    [GGUF_TYPE_UINT64] = 8, [GGUF_TYPE_INT64] = 8, [GGUF_TYPE_FLOAT64] = 8,
};

static void note(gguf_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(gguf_writer *w, const char *fmt, ...) {
    if (w->first_err[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->first_err, sizeof w->first_err, fmt, ap);
    va_end(ap);
}

static char *dup_str(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* --- values -------------------------------------------------------------------------------------- */

static void value_free(gguf_value *v) {
    if (v->type == GGUF_TYPE_STRING) {
        free((char *)v->v.str.ptr);
    } else if (v->type == GGUF_TYPE_ARRAY) {
        if (v->v.arr.items)
            for (uint64_t i = 0; i < v->v.arr.n; i++) value_free((gguf_value *)&v->v.arr.items[i]);
        free((void *)v->v.arr.items);
        free((void *)v->v.arr.raw);
    }
}

/* Deep copy of src into dst; -1 on a bad value or out of memory (dst then owns nothing). */
static int value_copy(gguf_value *dst, const gguf_value *src, int depth) {
    memset(dst, 0, sizeof *dst);
    if ((unsigned)src->type >= GGUF_TYPE_COUNT || depth >= GGUF_MAX_ARRAY_DEPTH) return -1;
    dst->type = src->type;
    if (src->type == GGUF_TYPE_STRING) {
        if (!src->v.str.ptr && src->v.str.len) return -1;
        char *s = dup_str(src->v.str.ptr ? src->v.str.ptr : "", src->v.str.len);
        if (!s) return -1;
        dst->v.str.ptr = s;
        dst->v.str.len = src->v.str.len;
        return 0;
    }
    if (src->type != GGUF_TYPE_ARRAY) {
        dst->v = src->v;
        return 0;
    }
    gguf_type et = src->v.arr.elem;
    uint64_t n = src->v.arr.n;
    if ((unsigned)et >= GGUF_TYPE_COUNT) return -1;
    dst->v.arr.elem = et;
    if (n == 0) return 0;
    if (et == GGUF_TYPE_STRING || et == GGUF_TYPE_ARRAY) {
        if (!src->v.arr.items || n > SIZE_MAX / sizeof(gguf_value)) return -1;
        gguf_value *items = calloc((size_t)n, sizeof *items);
        if (!items) return -1;
        dst->v.arr.items = items;
        for (uint64_t i = 0; i < n; i++) {
            if (value_copy(&items[i], &src->v.arr.items[i], depth + 1) ||
                items[i].type != et) {
                dst->v.arr.n = i + 1;
                value_free(dst);
                return -1;
            }
        }
    } else {
        if (!src->v.arr.raw || n > SIZE_MAX / scalar_size[et]) return -1;
        void *raw = malloc((size_t)n * scalar_size[et]);
        if (!raw) return -1;
        memcpy(raw, src->v.arr.raw, (size_t)n * scalar_size[et]);
        dst->v.arr.raw = raw;
    }
    dst->v.arr.n = n;
    return 0;
}

static void add_kv(gguf_writer *w, const char *key, const gguf_value *v) {
    if (!key || !*key) {
        note(w, "a metadata key is %s", key ? "empty" : "NULL");
        return;
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) {
            note(w, "key '%s': out of memory", key);
            return;
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    wkv *e = &w->kv[w->n_kv];
    e->key = dup_str(key, strlen(key));
    if (!e->key || value_copy(&e->v, v, 0)) {
        free(e->key);
        note(w, "key '%s': out of memory or malformed value", key);
        return;
    }
    w->n_kv++;
}

void gguf_writer_set_u8(gguf_writer *w, const char *k, uint8_t v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_UINT8, .v.u64 = v});
}
void gguf_writer_set_i8(gguf_writer *w, const char *k, int8_t v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_INT8, .v.i64 = v});
}
void gguf_writer_set_u16(gguf_writer *w, const char *k, uint16_t v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_UINT16, .v.u64 = v});
}
void gguf_writer_set_i16(gguf_writer *w, const char *k, int16_t v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_INT16, .v.i64 = v});
}
void gguf_writer_set_u32(gguf_writer *w, const char *k, uint32_t v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_UINT32, .v.u64 = v});
}
void gguf_writer_set_i32(gguf_writer *w, const char *k, int32_t v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_INT32, .v.i64 = v});
}
void gguf_writer_set_u64(gguf_writer *w, const char *k, uint64_t v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_UINT64, .v.u64 = v});
}
void gguf_writer_set_i64(gguf_writer *w, const char *k, int64_t v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_INT64, .v.i64 = v});
}
void gguf_writer_set_f32(gguf_writer *w, const char *k, float v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_FLOAT32, .v.f64 = v});
}
void gguf_writer_set_f64(gguf_writer *w, const char *k, double v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_FLOAT64, .v.f64 = v});
}
void gguf_writer_set_bool(gguf_writer *w, const char *k, bool v) {
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_BOOL, .v.b = v});
}
void gguf_writer_set_str(gguf_writer *w, const char *k, const char *v) {
    if (!v) {
        note(w, "key '%s': NULL string", k ? k : "(null)");
        return;
    }
    add_kv(w, k, &(gguf_value){.type = GGUF_TYPE_STRING, .v.str = {v, strlen(v)}});
}

void gguf_writer_set_arr(gguf_writer *w, const char *k, gguf_type elem, const void *data, uint64_t n) {
    if ((unsigned)elem >= GGUF_TYPE_COUNT || elem == GGUF_TYPE_STRING || elem == GGUF_TYPE_ARRAY) {
        note(w, "key '%s': %s is not a numeric array element type", k ? k : "(null)",
             gguf_type_name(elem));
        return;
    }
    gguf_value v = {.type = GGUF_TYPE_ARRAY, .v.arr = {elem, n, data, NULL}};
    add_kv(w, k, &v);
}

void gguf_writer_set_arr_str(gguf_writer *w, const char *k, const char *const *s, uint64_t n) {
    gguf_value *items = n ? calloc((size_t)n, sizeof *items) : NULL;
    if (n && (!items || !s)) {
        free(items);
        note(w, "key '%s': out of memory or NULL strings", k ? k : "(null)");
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        items[i].type = GGUF_TYPE_STRING;
        items[i].v.str.ptr = s[i] ? s[i] : "";
        items[i].v.str.len = strlen(items[i].v.str.ptr);
    }
    gguf_value v = {.type = GGUF_TYPE_ARRAY, .v.arr = {GGUF_TYPE_STRING, n, NULL, items}};
    add_kv(w, k, &v);
    free(items);
}

void gguf_writer_set_value(gguf_writer *w, const char *k, const gguf_value *v) {
    if (!v) {
        note(w, "key '%s': NULL value", k ? k : "(null)");
        return;
    }
    add_kv(w, k, v);
}

/* --- writer object ----------------------------------------------------------------------------- */

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->version = 3;
        w->alignment = GGUF_DEFAULT_ALIGNMENT;
    }
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        value_free(&w->kv[i].v);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].copy);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

void gguf_writer_set_version(gguf_writer *w, uint32_t version) {
    if (version != 2 && version != 3) note(w, "GGUF version %u cannot be written (2 or 3)", version);
    else w->version = version;
}

void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1))) {
        note(w, "alignment %u is not a nonzero power of two", alignment);
        return;
    }
    w->alignment = alignment;
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, "general.alignment") == 0) {
            value_free(&w->kv[i].v);
            w->kv[i].v = (gguf_value){.type = GGUF_TYPE_UINT32, .v.u64 = alignment};
            return;
        }
    gguf_writer_set_u32(w, "general.alignment", alignment);
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne, const void *data, gguf_fill_fn fill, void *user,
                           char *err, size_t err_size) {
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= GGUF_MAX_NAME) {
        snprintf(err, err_size, "tensor name '%s' must be 1..%d bytes long", name ? name : "",
                 GGUF_MAX_NAME - 1);
        return -1;
    }
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS || !ne) {
        snprintf(err, err_size, "tensor '%s': n_dims %u must be 1..%d", name, n_dims, GGUF_MAX_DIMS);
        return -1;
    }
    const quant_traits *q = quant_traits_of(type);
    if (!q) {
        snprintf(err, err_size, "tensor '%s': unknown type id %u", name, type);
        return -1;
    }
    wtensor t = {.type = type, .n_dims = n_dims, .fill = fill, .user = user,
                 .ne = {1, 1, 1, 1}};
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 1 || ne[d] > INT64_MAX / n) {
            snprintf(err, err_size, "tensor '%s': dimension %u = %lld is zero, negative or "
                     "overflows the element count", name, d, (long long)ne[d]);
            return -1;
        }
        t.ne[d] = ne[d];
        n *= ne[d];
    }
    if (t.ne[0] % q->block_elems) {
        snprintf(err, err_size, "tensor '%s': ne[0] = %lld is not a multiple of the %s block "
                 "size %d", name, (long long)t.ne[0], q->name, q->block_elems);
        return -1;
    }
    uint64_t blocks = (uint64_t)(n / q->block_elems);
    if (blocks > SIZE_MAX / (uint64_t)q->block_bytes) {
        snprintf(err, err_size, "tensor '%s': byte size overflows", name);
        return -1;
    }
    t.size = blocks * (uint64_t)q->block_bytes;
    if (!data == !fill) {
        snprintf(err, err_size, "tensor '%s': give exactly one of data and fill", name);
        return -1;
    }
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) {
            snprintf(err, err_size, "tensor '%s' added twice", name);
            return -1;
        }
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt) goto oom;
        w->t = nt;
        w->cap_t = cap;
    }
    t.name = dup_str(name, len);
    if (!t.name) goto oom;
    if (data) {
        t.copy = malloc(t.size ? (size_t)t.size : 1);
        if (!t.copy) {
            free(t.name);
            goto oom;
        }
        memcpy(t.copy, data, (size_t)t.size);
    }
    w->t[w->n_t++] = t;
    return 0;
oom:
    snprintf(err, err_size, "tensor '%s': out of memory", name);
    return -1;
}

/* --- serialisation ----------------------------------------------------------------------------- */

static void put(FILE *f, const void *p, size_t n) { fwrite(p, 1, n, f); }
static void put_u32(FILE *f, uint32_t v) { put(f, &v, 4); }
static void put_u64(FILE *f, uint64_t v) { put(f, &v, 8); }
static void put_str(FILE *f, const char *s, uint64_t len) {
    put_u64(f, len);
    put(f, s, (size_t)len);
}

static void put_zeros(FILE *f, uint64_t n) {
    static const uint8_t zero[256];
    while (n) {
        size_t k = n > sizeof zero ? sizeof zero : (size_t)n;
        put(f, zero, k);
        n -= k;
    }
}

static void put_scalar(FILE *f, const gguf_value *v) {
    uint8_t b[8];
    switch (v->type) {
    case GGUF_TYPE_UINT8: b[0] = (uint8_t)v->v.u64; break;
    case GGUF_TYPE_INT8: b[0] = (uint8_t)(int8_t)v->v.i64; break;
    case GGUF_TYPE_BOOL: b[0] = v->v.b ? 1 : 0; break;
    case GGUF_TYPE_UINT16: { uint16_t x = (uint16_t)v->v.u64; memcpy(b, &x, 2); break; }
    case GGUF_TYPE_INT16: { int16_t x = (int16_t)v->v.i64; memcpy(b, &x, 2); break; }
    case GGUF_TYPE_UINT32: { uint32_t x = (uint32_t)v->v.u64; memcpy(b, &x, 4); break; }
    case GGUF_TYPE_INT32: { int32_t x = (int32_t)v->v.i64; memcpy(b, &x, 4); break; }
    case GGUF_TYPE_UINT64: memcpy(b, &v->v.u64, 8); break;
    case GGUF_TYPE_INT64: memcpy(b, &v->v.i64, 8); break;
    case GGUF_TYPE_FLOAT32: { float x = (float)v->v.f64; memcpy(b, &x, 4); break; }
    case GGUF_TYPE_FLOAT64: memcpy(b, &v->v.f64, 8); break;
    default: return;
    }
    put(f, b, scalar_size[v->type]);
}

/* The value's bytes without its type tag (arrays carry their element type inside). */
static void put_value(FILE *f, const gguf_value *v) {
    if (v->type == GGUF_TYPE_STRING) {
        put_str(f, v->v.str.ptr, v->v.str.len);
    } else if (v->type == GGUF_TYPE_ARRAY) {
        put_u32(f, v->v.arr.elem);
        put_u64(f, v->v.arr.n);
        if (v->v.arr.items) {
            for (uint64_t i = 0; i < v->v.arr.n; i++) {
                if (v->v.arr.elem == GGUF_TYPE_ARRAY) {
                    put_value(f, &v->v.arr.items[i]);
                } else {
                    put_str(f, v->v.arr.items[i].v.str.ptr, v->v.arr.items[i].v.str.len);
                }
            }
        } else if (v->v.arr.n) {
            put(f, v->v.arr.raw, (size_t)(v->v.arr.n * scalar_size[v->v.arr.elem]));
        }
    } else {
        put_scalar(f, v);
    }
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Checks made once everything is known: duplicate keys, the alignment key. */
static int check_writer(gguf_writer *w, uint32_t *alignment, char *err, size_t err_size) {
    if (w->first_err[0]) {
        snprintf(err, err_size, "%s", w->first_err);
        return -1;
    }
    *alignment = w->alignment;
    for (size_t i = 0; i < w->n_kv; i++) {
        for (size_t j = 0; j < i; j++)
            if (strcmp(w->kv[i].key, w->kv[j].key) == 0) {
                snprintf(err, err_size, "metadata key '%s' set twice", w->kv[i].key);
                return -1;
            }
        if (strcmp(w->kv[i].key, "general.alignment") == 0) {
            const gguf_value *v = &w->kv[i].v;
            if (v->type != GGUF_TYPE_UINT32 || v->v.u64 == 0 || (v->v.u64 & (v->v.u64 - 1))) {
                snprintf(err, err_size, "general.alignment must be a UINT32 power of two");
                return -1;
            }
            *alignment = (uint32_t)v->v.u64;
        }
    }
    return 0;
}

static int write_body(gguf_writer *w, FILE *f, uint32_t alignment, char *err, size_t err_size) {
    put(f, "GGUF", 4);
    put_u32(f, w->version);
    put_u64(f, w->n_t);
    put_u64(f, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(f, w->kv[i].key, strlen(w->kv[i].key));
        put_u32(f, w->kv[i].v.type);
        put_value(f, &w->kv[i].v);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(f, t->name, strlen(t->name));
        put_u32(f, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(f, (uint64_t)t->ne[d]);
        put_u32(f, t->type);
        put_u64(f, off);
        off = align_up(off + t->size, alignment);
    }
    long pos = ftell(f);
    if (pos < 0) {
        snprintf(err, err_size, "cannot tell the file position: %s", strerror(errno));
        return -1;
    }
    put_zeros(f, align_up((uint64_t)pos, alignment) - (uint64_t)pos);
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if (t->copy) {
            put(f, t->copy, (size_t)t->size);
        } else {
            void *buf = malloc(t->size ? (size_t)t->size : 1);
            if (!buf) {
                snprintf(err, err_size, "tensor '%s': out of memory for %llu bytes", t->name,
                         (unsigned long long)t->size);
                return -1;
            }
            int rc = t->fill(buf, (size_t)t->size, t->user);
            if (rc == 0) put(f, buf, (size_t)t->size);
            free(buf);
            if (rc != 0) {
                snprintf(err, err_size, "tensor '%s': fill callback failed (%d)", t->name, rc);
                return -1;
            }
        }
        put_zeros(f, align_up(t->size, alignment) - t->size);
        if (ferror(f)) break;
    }
    return 0;
}

int gguf_writer_write(gguf_writer *w, const char *path, char *err, size_t err_size) {
    uint32_t alignment;
    if (check_writer(w, &alignment, err, err_size)) return -1;
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) {
        snprintf(err, err_size, "%s: out of memory", path);
        return -1;
    }
    snprintf(tmp, n + 16, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, err_size, "%s: cannot create a temporary file next to it: %s", path,
                 strerror(errno));
        free(tmp);
        return -1;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        snprintf(err, err_size, "%s: %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    char why[512] = "";
    int rc = write_body(w, f, alignment, why, sizeof why);
    if (rc == 0 && ferror(f)) {
        snprintf(why, sizeof why, "write failed: %s", strerror(errno));
        rc = -1;
    }
    if (fchmod(fd, 0644) != 0 && rc == 0) {
        snprintf(why, sizeof why, "chmod failed: %s", strerror(errno));
        rc = -1;
    }
    if (fclose(f) != 0 && rc == 0) {
        snprintf(why, sizeof why, "write failed: %s", strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        snprintf(why, sizeof why, "cannot rename %s into place: %s", tmp, strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        unlink(tmp);
        snprintf(err, err_size, "%s: %s", path, why);
    }
    free(tmp);
    return rc;
}
