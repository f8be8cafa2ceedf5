/* GGUF reader: maps (or reads) a file and validates all of it before handing out a view:
 * header, every metadata value, the tensor table and the data layout. Nothing the file says
 * is trusted: each count is checked against the bytes left before anything is allocated. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/internal.h"
#include "quant/quant.h"

/* Smallest encodings, used to bound counts by the bytes left: a key-value pair is a key length
 * (8), one key byte, a type (4) and a one-byte value; a tensor info is a name length (8), one
 * name byte, n_dims (4), one dimension (8), a type (4) and an offset (8). */
#define MIN_KV_BYTES 14u
#define MIN_TENSOR_INFO_BYTES 33u

typedef struct {
    gguf_ctx *ctx;
    const uint8_t *buf;
    uint64_t size, pos;
    const char *name;
    char *err;
    size_t err_size;
    char where[192];          /* what is being read, for messages: "key 'general.name'" */
} reader;

static int fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(reader *r, const char *fmt, ...) {
    if (r->err && r->err_size) {
        int n = snprintf(r->err, r->err_size, "%s: ", r->name);
        if (n >= 0 && (size_t)n < r->err_size) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->err + n, r->err_size - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static const size_t scalar_size[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = 1, [GGUF_TYPE_INT8] = 1, [GGUF_TYPE_UINT16] = 2, [GGUF_TYPE_INT16] = 2,
    [GGUF_TYPE_UINT32] = 4, [GGUF_TYPE_INT32] = 4, [GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1,
    [GGUF_TYPE_UINT64] = 8, [GGUF_TYPE_INT64] = 8, [GGUF_TYPE_FLOAT64] = 8,
};

/* --- metadata memory ------------------------------------------------------------------------ */

static void *meta_alloc(reader *r, uint64_t bytes) {
    gguf_ctx *c = r->ctx;
    bytes = (bytes + 15) & ~(uint64_t)15;
    if (bytes > GGUF_MAX_META_BYTES - c->meta_bytes) {
        fail(r, "%s: metadata needs more than %llu MiB of memory; the file is corrupt or "
             "too large for mgi", r->where, GGUF_MAX_META_BYTES >> 20);
        return NULL;
    }
    gguf_chunk *ch = c->chunks;
    if (!ch || ch->cap - ch->used < bytes) {
        size_t cap = bytes > (1u << 20) ? bytes : (1u << 20);
        ch = malloc(sizeof *ch + cap);
        if (!ch) {
            fail(r, "%s: out of memory (%llu bytes)", r->where, (unsigned long long)bytes);
            return NULL;
        }
        ch->used = 0;
        ch->cap = cap;
        /* A big request gets a chunk of its own behind the current one, which keeps its room. */
        if (c->chunks && bytes > (1u << 20)) {
            ch->next = c->chunks->next;
            c->chunks->next = ch;
        } else {
            ch->next = c->chunks;
            c->chunks = ch;
        }
    }
    void *p = ch->mem + ch->used;
    ch->used += bytes;
    c->meta_bytes += bytes;
    return p;
}

/* --- primitive reads -------------------------------------------------------------------------- */

static int need(reader *r, uint64_t n, const char *what) {
    if (n > r->size - r->pos)
        return fail(r, "truncated file: %s%s%s needs %llu bytes at offset %llu, but the file ends "
                    "at %llu", r->where, *r->where ? ": " : "", what, (unsigned long long)n,
                    (unsigned long long)r->pos, (unsigned long long)r->size);
    return 0;
}

static int rd_u32(reader *r, uint32_t *v, const char *what) {
    if (need(r, 4, what)) return -1;
    memcpy(v, r->buf + r->pos, 4);
    r->pos += 4;
    return 0;
}

static int rd_u64(reader *r, uint64_t *v, const char *what) {
    if (need(r, 8, what)) return -1;
    memcpy(v, r->buf + r->pos, 8);
    r->pos += 8;
    return 0;
}

/* A GGUF string: u64 length, bytes. Returns a pointer into the file and the length. */
static int rd_str_raw(reader *r, const uint8_t **p, uint64_t *len, const char *what) {
    if (rd_u64(r, len, what)) return -1;
    if (*len > r->size - r->pos)
        return fail(r, "truncated file: %s%s%s has length %llu at offset %llu, past the end of "
                    "the file (size %llu)", r->where, *r->where ? ": " : "", what,
                    (unsigned long long)*len, (unsigned long long)(r->pos - 8),
                    (unsigned long long)r->size);
    *p = r->buf + r->pos;
    r->pos += *len;
    return 0;
}

static char *copy_str(reader *r, const uint8_t *p, uint64_t len) {
    char *s = meta_alloc(r, len + 1);
    if (!s) return NULL;
    memcpy(s, p, len);
    s[len] = '\0';
    return s;
}

/* --- values ------------------------------------------------------------------------------------ */

static int read_value(reader *r, gguf_type t, gguf_value *out, int depth, uint64_t elem);

/* A top-level scalar value (array elements of scalar types stay packed in the file). */
static int read_scalar(reader *r, gguf_type t, gguf_value *out) {
    uint8_t b[8];
    size_t n = scalar_size[t];
    if (need(r, n, "value")) return -1;
    memcpy(b, r->buf + r->pos, n);
    r->pos += n;
    out->type = t;
    switch (t) {
    case GGUF_TYPE_UINT8: out->v.u64 = b[0]; break;
    case GGUF_TYPE_INT8: out->v.i64 = (int8_t)b[0]; break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, b, 2); out->v.u64 = x; break; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, b, 2); out->v.i64 = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, b, 4); out->v.u64 = x; break; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, b, 4); out->v.i64 = x; break; }
    case GGUF_TYPE_UINT64: { uint64_t x; memcpy(&x, b, 8); out->v.u64 = x; break; }
    case GGUF_TYPE_INT64: { int64_t x; memcpy(&x, b, 8); out->v.i64 = x; break; }
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, b, 4); out->v.f64 = x; break; }
    case GGUF_TYPE_FLOAT64: { double x; memcpy(&x, b, 8); out->v.f64 = x; break; }
    case GGUF_TYPE_BOOL:
        if (b[0] > 1) return fail(r, "%s: bool value %u is neither 0 nor 1", r->where, b[0]);
        out->v.b = b[0];
        break;
    default: break;
    }
    return 0;
}

static int read_array(reader *r, gguf_value *out, int depth) {
    uint32_t et;
    uint64_t n;
    if (rd_u32(r, &et, "array element type") || rd_u64(r, &n, "array length")) return -1;
    if (et >= GGUF_TYPE_COUNT)
        return fail(r, "%s: array element type %u is not a GGUF value type (0..%d)", r->where, et,
                    GGUF_TYPE_COUNT - 1);
    if (et == GGUF_TYPE_ARRAY && depth + 1 >= GGUF_MAX_ARRAY_DEPTH)
        return fail(r, "%s: arrays nested deeper than %d levels", r->where, GGUF_MAX_ARRAY_DEPTH);
    /* Every element takes at least this many bytes of the file. */
    uint64_t min = et == GGUF_TYPE_STRING ? 8 : et == GGUF_TYPE_ARRAY ? 12 : scalar_size[et];
    uint64_t left = r->size - r->pos;
    if (n > left / min)
        return fail(r, "%s: array of %llu %s elements needs at least %llu bytes per element, "
                    "but only %llu bytes are left in the file (truncated or corrupt)", r->where,
                    (unsigned long long)n, gguf_type_name((gguf_type)et),
                    (unsigned long long)min, (unsigned long long)left);
    out->type = GGUF_TYPE_ARRAY;
    out->v.arr.elem = (gguf_type)et;
    out->v.arr.n = n;
    out->v.arr.raw = NULL;
    out->v.arr.items = NULL;
    if (et != GGUF_TYPE_STRING && et != GGUF_TYPE_ARRAY) {
        out->v.arr.raw = r->buf + r->pos;
        if (et == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (r->buf[r->pos + i] > 1)
                    return fail(r, "%s: element %llu: bool value %u is neither 0 nor 1", r->where,
                                (unsigned long long)i, r->buf[r->pos + i]);
        r->pos += n * min;
        return 0;
    }
    if (n == 0) return 0;
    gguf_value *items = meta_alloc(r, n * sizeof *items);   /* n <= size / 8: no overflow */
    if (!items) return -1;
    for (uint64_t i = 0; i < n; i++)
        if (read_value(r, (gguf_type)et, &items[i], depth + 1, i)) return -1;
    out->v.arr.items = items;
    return 0;
}

static int read_value(reader *r, gguf_type t, gguf_value *out, int depth, uint64_t elem) {
    if (t == GGUF_TYPE_STRING) {
        const uint8_t *p;
        uint64_t len;
        char what[48] = "string";
        if (elem != UINT64_MAX) snprintf(what, sizeof what, "string element %llu", (unsigned long long)elem);
        if (rd_str_raw(r, &p, &len, what)) return -1;
        out->type = t;
        out->v.str.len = len;
        out->v.str.ptr = copy_str(r, p, len);
        return out->v.str.ptr ? 0 : -1;
    }
    if (t == GGUF_TYPE_ARRAY) return read_array(r, out, depth);
    return read_scalar(r, t, out);
}

/* --- name indices ----------------------------------------------------------------------------- */

uint64_t gguf_hash_(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Inserts name as entry i; returns the index of an earlier entry with the same name, or -1. */
static int64_t index_insert(gguf_index *ix, const char *name, int64_t i,
                            const char *(*name_of)(const gguf_ctx *, int64_t), const gguf_ctx *c) {
    for (uint64_t h = gguf_hash_(name) & ix->mask;; h = (h + 1) & ix->mask) {
        if (ix->slot[h] == 0) {
            ix->slot[h] = i + 1;
            return -1;
        }
        if (strcmp(name_of(c, ix->slot[h] - 1), name) == 0) return ix->slot[h] - 1;
    }
}

static int index_init(reader *r, gguf_index *ix, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap *= 2;
    ix->slot = meta_alloc(r, cap * sizeof *ix->slot);
    if (!ix->slot) return -1;
    memset(ix->slot, 0, cap * sizeof *ix->slot);
    ix->mask = cap - 1;
    return 0;
}


/* --- header and metadata ------------------------------------------------------------------------- */

static int read_header(reader *r, uint64_t *n_tensors, uint64_t *n_kv) {
    gguf_ctx *c = r->ctx;
    if (r->size == 0) return fail(r, "the file is empty (0 bytes), not a GGUF file");
    if (r->size < 4)
        return fail(r, "not a GGUF file: it is only %llu bytes long", (unsigned long long)r->size);
    if (memcmp(r->buf, "GGUF", 4) != 0) {
        const uint8_t *b = r->buf;
        return fail(r, "not a GGUF file: it starts with bytes %02x %02x %02x %02x, not \"GGUF\"",
                    b[0], b[1], b[2], b[3]);
    }
    r->pos = 4;
    snprintf(r->where, sizeof r->where, "header");
    if (rd_u32(r, &c->version, "version")) return -1;
    if (c->version == 1)
        return fail(r, "GGUF version 1 is not supported (mgi reads versions 2 and 3); convert "
                    "the file again with a current llama.cpp");
    if (c->version == 0x02000000u || c->version == 0x03000000u)
        return fail(r, "big-endian GGUF file (version bytes %08x); mgi reads little-endian files",
                    c->version);
    if (c->version != 2 && c->version != 3)
        return fail(r, "unknown GGUF version %u (mgi reads versions 2 and 3)", c->version);
    if (rd_u64(r, n_tensors, "tensor count") || rd_u64(r, n_kv, "metadata key count")) return -1;
    uint64_t left = r->size - r->pos;
    if (*n_kv > left / MIN_KV_BYTES)
        return fail(r, "header: metadata key count %llu is impossible: %llu key-value pairs need at "
                    "least %u bytes each but only %llu bytes follow the header (truncated or corrupt file)",
                    (unsigned long long)*n_kv,
                    (unsigned long long)*n_kv, MIN_KV_BYTES, (unsigned long long)left);
    if (*n_tensors > left / MIN_TENSOR_INFO_BYTES ||
        *n_kv * MIN_KV_BYTES + *n_tensors * MIN_TENSOR_INFO_BYTES > left)
        return fail(r, "header: tensor count %llu is impossible: %llu tensor infos need at least %u "
                    "bytes each and only %llu bytes follow the header (truncated or corrupt file)",
                    (unsigned long long)*n_tensors,
                    (unsigned long long)*n_tensors, MIN_TENSOR_INFO_BYTES, (unsigned long long)left);
    return 0;
}

static int read_metadata(reader *r, uint64_t n_kv) {
    gguf_ctx *c = r->ctx;
    snprintf(r->where, sizeof r->where, "metadata");
    c->keys = meta_alloc(r, n_kv * sizeof *c->keys + 1);
    c->values = meta_alloc(r, n_kv * sizeof *c->values + 1);
    if (!c->keys || !c->values || index_init(r, &c->kv_index, (int64_t)n_kv)) return -1;
    for (uint64_t i = 0; i < n_kv; i++) {
        const uint8_t *p;
        uint64_t len;
        uint32_t t;
        snprintf(r->where, sizeof r->where, "metadata key %llu", (unsigned long long)i);
        if (rd_str_raw(r, &p, &len, "key")) return -1;
        if (len == 0) return fail(r, "metadata key %llu has an empty name", (unsigned long long)i);
        if (memchr(p, 0, len))
            return fail(r, "metadata key %llu contains a NUL byte", (unsigned long long)i);
        char *key = copy_str(r, p, len);
        if (!key) return -1;
        c->keys[i] = key;
        c->n_kv = (int64_t)i + 1;
        snprintf(r->where, sizeof r->where, "key '%.150s'", key);
        if (index_insert(&c->kv_index, key, (int64_t)i, gguf_key_name_, c) >= 0)
            return fail(r, "duplicate metadata key '%.150s' (key %llu)", key, (unsigned long long)i);
        if (rd_u32(r, &t, "value type")) return -1;
        if (t >= GGUF_TYPE_COUNT)
            return fail(r, "key '%.150s': value type %u is not a GGUF value type (0..%d)", key, t,
                        GGUF_TYPE_COUNT - 1);
        if (read_value(r, (gguf_type)t, &c->values[i], 0, UINT64_MAX)) return -1;
    }
    return 0;
}

static int check_alignment(reader *r) {
    gguf_ctx *c = r->ctx;
    c->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = gguf_find_key(c, "general.alignment");
    if (i < 0) return 0;
    const gguf_value *v = &c->values[i];
    if (v->type != GGUF_TYPE_UINT32)
        return fail(r, "key 'general.alignment' has type %s; it must be UINT32",
                    gguf_type_name(v->type));
    if (v->v.u64 == 0 || (v->v.u64 & (v->v.u64 - 1)))
        return fail(r, "key 'general.alignment' is %llu; it must be a nonzero power of two",
                    (unsigned long long)v->v.u64);
    c->alignment = (uint32_t)v->v.u64;
    return 0;
}

/* --- tensors ------------------------------------------------------------------------------------- */

static int read_tensor_info(reader *r, uint64_t i, gguf_tensor *t) {
    const uint8_t *p;
    uint64_t len;
    snprintf(r->where, sizeof r->where, "tensor info %llu", (unsigned long long)i);
    if (rd_str_raw(r, &p, &len, "name")) return -1;
    if (len == 0) return fail(r, "tensor %llu has an empty name", (unsigned long long)i);
    if (len >= GGUF_MAX_NAME)
        return fail(r, "tensor %llu: name '%.*s...' is %llu bytes long; the limit is %d (as in "
                    "ggml)", (unsigned long long)i, 40, (const char *)p, (unsigned long long)len,
                    GGUF_MAX_NAME - 1);
    if (memchr(p, 0, len)) return fail(r, "tensor %llu: name contains a NUL byte", (unsigned long long)i);
    if (!(t->name = copy_str(r, p, len))) return -1;
    snprintf(r->where, sizeof r->where, "tensor '%s'", t->name);
    if (rd_u32(r, &t->n_dims, "dimension count")) return -1;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return fail(r, "tensor '%s': n_dims is %u; it must be 1..%d", t->name, t->n_dims, GGUF_MAX_DIMS);
    int64_t n = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && rd_u64(r, &ne, "dimension")) return -1;
        /* Zero-sized dimensions are refused: no model tensor is empty, and a 0 would hide
         * behind every later size check. */
        if (ne == 0 || ne > INT64_MAX)
            return fail(r, "tensor '%s': dimension %u is %llu; it must be 1..2^63-1", t->name, d,
                        (unsigned long long)ne);
        if ((int64_t)ne > INT64_MAX / n)
            return fail(r, "tensor '%s': element count overflows 64 bits (dimension %u is %llu)",
                        t->name, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        n *= (int64_t)ne;
    }
    t->n_elems = n;
    if (rd_u32(r, &t->type, "type")) return -1;
    const quant_traits *q = quant_traits_of(t->type);
    if (!q) return fail(r, "tensor '%s': unknown type id %u (a ggml type that is retired or newer "
                           "than mgi)", t->name, t->type);
    if (t->ne[0] % q->block_elems)
        return fail(r, "tensor '%s': row length ne[0] = %lld is not a multiple of the %s block "
                    "size %d", t->name, (long long)t->ne[0], q->name, q->block_elems);
    uint64_t blocks = (uint64_t)(n / q->block_elems);
    if (blocks > UINT64_MAX / (uint64_t)q->block_bytes)
        return fail(r, "tensor '%s': byte size overflows 64 bits", t->name);
    t->size = blocks * (uint64_t)q->block_bytes;
    return rd_u64(r, &t->offset, "data offset");
}

static int cmp_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int read_tensors(reader *r, uint64_t n) {
    gguf_ctx *c = r->ctx;
    snprintf(r->where, sizeof r->where, "tensor infos");
    c->tensors = meta_alloc(r, n * sizeof *c->tensors + 1);
    if (!c->tensors || index_init(r, &c->tensor_index, (int64_t)n)) return -1;
    for (uint64_t i = 0; i < n; i++) {
        gguf_tensor *t = &c->tensors[i];
        memset(t, 0, sizeof *t);
        if (read_tensor_info(r, i, t)) return -1;
        c->n_tensors = (int64_t)i + 1;
        int64_t prev = index_insert(&c->tensor_index, t->name, (int64_t)i, gguf_tensor_name_, c);
        if (prev >= 0)
            return fail(r, "duplicate tensor name '%s' (tensors %lld and %llu)", t->name,
                        (long long)prev, (unsigned long long)i);
    }
    /* The data section starts at the next multiple of the alignment. A file with no tensor
     * data may end before that point (llama.cpp writes vocabulary-only files that way). */
    uint64_t a = c->alignment;
    if (r->pos > UINT64_MAX - a) return fail(r, "data section offset overflows");
    c->data_offset = (r->pos + a - 1) / a * a;
    uint64_t room = c->data_offset <= r->size ? r->size - c->data_offset : 0;
    for (uint64_t i = 0; i < n; i++) {
        gguf_tensor *t = &c->tensors[i];
        if (t->offset % a)
            return fail(r, "tensor '%s': data offset %llu is not a multiple of the alignment %u",
                        t->name, (unsigned long long)t->offset, c->alignment);
        if (t->offset > room || t->size > room - t->offset) {
            uint64_t s = c->data_offset + t->offset;
            if (t->offset > UINT64_MAX - c->data_offset || t->size > UINT64_MAX - s)
                return fail(r, "tensor '%s': data offset %llu (%llu bytes) runs past the end of "
                            "the file (size %llu)", t->name, (unsigned long long)t->offset,
                            (unsigned long long)t->size, (unsigned long long)r->size);
            return fail(r, "tensor '%s': data [%llu, %llu) runs past the end of the file (size "
                        "%llu)", t->name, (unsigned long long)s, (unsigned long long)(s + t->size),
                        (unsigned long long)r->size);
        }
        t->data = r->buf + c->data_offset + t->offset;
    }
    if (n < 2) return 0;
    /* Overlaps: sort views by offset and compare neighbours. */
    const gguf_tensor **order = malloc(n * sizeof *order);
    if (!order) return fail(r, "out of memory sorting %llu tensors", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) order[i] = &c->tensors[i];
    qsort(order, n, sizeof *order, cmp_offset);
    int rc = 0;
    for (uint64_t i = 1; i < n && !rc; i++) {
        const gguf_tensor *x = order[i - 1], *y = order[i];
        if (x->offset + x->size > y->offset)
            rc = fail(r, "tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap (offsets in the "
                      "data section)", x->name, (unsigned long long)x->offset,
                      (unsigned long long)(x->offset + x->size), y->name,
                      (unsigned long long)y->offset, (unsigned long long)(y->offset + y->size));
    }
    free(order);
    return rc;
}

/* --- open / close -------------------------------------------------------------------------------- */

static gguf_ctx *parse(gguf_ctx *c, const char *name, char *err, size_t err_size) {
    reader r = {.ctx = c, .buf = c->base, .size = c->size, .name = name, .err = err,
                .err_size = err_size};
    uint64_t n_tensors, n_kv;
    if (read_header(&r, &n_tensors, &n_kv) || read_metadata(&r, n_kv) || check_alignment(&r) ||
        read_tensors(&r, n_tensors)) {
        gguf_close(c);
        return NULL;
    }
    return c;
}

static gguf_ctx *new_ctx(const char *name, char *err, size_t err_size) {
    gguf_ctx *c = calloc(1, sizeof *c);
    size_t n = strlen(name);
    if (c) c->path = malloc(n + 1);
    if (!c || !c->path) {
        free(c);
        snprintf(err, err_size, "%s: out of memory", name);
        return NULL;
    }
    memcpy(c->path, name, n + 1);
    return c;
}

gguf_ctx *gguf_open_buffer(const void *data, size_t size, const char *name, char *err, size_t err_size) {
    if (!name) name = "(buffer)";
    gguf_ctx *c = new_ctx(name, err, err_size);
    if (!c) return NULL;
    c->base = size ? data : (const uint8_t *)"";
    c->size = size;
    return parse(c, c->path, err, err_size);
}

static int read_all(int fd, void *buf, uint64_t size) {
    uint64_t done = 0;
    while (done < size) {
        size_t chunk = size - done > (1u << 30) ? (1u << 30) : (size_t)(size - done);
        ssize_t k = read(fd, (char *)buf + done, chunk);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? -1 : (errno = EIO, -1);
        done += (uint64_t)k;
    }
    return 0;
}

/* The files mapped now, for a SIGBUS handler (gguf_mapped_path): a file truncated under its
 * mapping faults on the next read of a page past its new end. A fixed table of plain words, read
 * from a signal handler, so no locks and no allocation. */
enum { GGUF_MAX_MAPS = 64 };
static struct {
    const uint8_t *volatile base;
    volatile uint64_t size;
    const char *volatile path;
} mapped[GGUF_MAX_MAPS];

static void map_register(const gguf_ctx *c) {
    for (int i = 0; i < GGUF_MAX_MAPS; i++) {
        const uint8_t *none = NULL;
        if (__atomic_compare_exchange_n(&mapped[i].base, &none, (const uint8_t *)c->map, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            mapped[i].size = c->size;
            mapped[i].path = c->path;
            return;
        }
    }
}

static void map_unregister(const gguf_ctx *c) {
    for (int i = 0; i < GGUF_MAX_MAPS; i++)
        if (mapped[i].base == (const uint8_t *)c->map) {
            mapped[i].path = NULL;
            mapped[i].size = 0;
            __atomic_store_n(&mapped[i].base, NULL, __ATOMIC_SEQ_CST);
        }
}

const char *gguf_mapped_path(const void *addr) {
    const uint8_t *a = addr;
    for (int i = 0; i < GGUF_MAX_MAPS; i++) {
        const uint8_t *b = mapped[i].base;
        const char *p = mapped[i].path;
        if (b && p && a >= b && (uint64_t)(a - b) < mapped[i].size) return p;
    }
    return NULL;
}

gguf_ctx *gguf_open(const char *path, int use_mmap, char *err, size_t err_size) {
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(err, err_size, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
        snprintf(err, err_size, "%s: %s, not a GGUF file", path,
                 S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        snprintf(err, err_size, "%s: the file is empty (0 bytes), not a GGUF file", path);
        close(fd);
        return NULL;
    }
    gguf_ctx *c = new_ctx(path, err, err_size);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->size = (uint64_t)st.st_size;
    if (use_mmap) {
        void *m = mmap(NULL, (size_t)c->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, err_size, "%s: cannot map %llu bytes: %s (try --no-mmap)", path,
                     (unsigned long long)c->size, strerror(errno));
            close(fd);
            gguf_close(c);
            return NULL;
        }
        c->map = m;
        c->base = m;
        map_register(c);
    } else {
        void *b = c->size <= SIZE_MAX ? malloc((size_t)c->size) : NULL;
        if (!b) {
            snprintf(err, err_size, "%s: cannot allocate %llu bytes to read the file (try "
                     "without --no-mmap)", path, (unsigned long long)c->size);
            close(fd);
            gguf_close(c);
            return NULL;
        }
        c->owned = b;
        c->base = b;
        if (read_all(fd, b, c->size)) {
            snprintf(err, err_size, "%s: read failed: %s", path, strerror(errno));
            close(fd);
            gguf_close(c);
            return NULL;
        }
    }
    close(fd);
    return parse(c, c->path, err, err_size);
}

int gguf_mlock(gguf_ctx *c, char *err, size_t err_size) {
    if (c->locked) return 0;
    if (!c->map && !c->owned) {
        snprintf(err, err_size, "%s: a buffer of the caller's, not locked", c->path);
        return -1;
    }
    if (mlock(c->base, (size_t)c->size) != 0) {
        snprintf(err, err_size, "%s: cannot lock its %llu MiB in RAM: %s (raise the limit: ulimit -l)", c->path,
                 (unsigned long long)(c->size >> 20), strerror(errno));
        return -1;
    }
    c->locked = 1;
    return 0;
}

void gguf_close(gguf_ctx *c) {
    if (!c) return;
    if (c->locked) munlock(c->base, (size_t)c->size);
    if (c->map) {
        map_unregister(c);
        munmap(c->map, (size_t)c->size);
    }
    free(c->owned);
    for (gguf_chunk *ch = c->chunks, *next; ch; ch = next) {
        next = ch->next;
        free(ch);
    }
    free(c->path);
    free(c);
}
