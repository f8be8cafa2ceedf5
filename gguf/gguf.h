/* GGUF files: a validated reader (mmap, or a read fallback) and a writer.
 * The reader never trusts the file: every count, length, dimension, type and offset is
 * checked against the file size and for overflow before use. Errors come back as NULL or a
 * negative code with a message (file, key or tensor, problem) in the caller's buffer. */
/* Beyond the format's own rules the reader refuses, each with a message:
 *  - versions other than 2 and 3, and big-endian files;
 *  - zero dimensions (ggml allows them; no model tensor is empty), n_dims outside 1..4;
 *  - tensor names of 64 bytes or more (ggml's GGML_MAX_NAME) or empty, empty keys, NUL bytes
 *    inside keys or tensor names, duplicate keys or tensor names;
 *  - bool values other than 0 and 1, arrays nested more than 8 deep, metadata that would take
 *    more than 1 GiB of memory;
 *  - general.alignment that is not a UINT32 nonzero power of two;
 *  - tensor data that is misaligned, overlaps another tensor's or runs past the end of the file.
 * A file without tensor data may end before the aligned start of its data section (llama.cpp
 * writes vocabulary-only files that way). Little-endian hosts only. */
#ifndef MGI_GGUF_H
#define MGI_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef enum {
    GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2, GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5, GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12, GGUF_TYPE_COUNT
} gguf_type;

/* Result codes of the typed getters. */
enum { GGUF_OK = 0, GGUF_ABSENT = 1, GGUF_WRONG_TYPE = -1 };

typedef struct gguf_value gguf_value;
struct gguf_value {
    gguf_type type;
    union {
        uint64_t u64;      /* UINT8/16/32/64 widened */
        int64_t i64;       /* INT8/16/32/64 widened */
        double f64;        /* FLOAT32/64 widened */
        bool b;
        struct { const char *ptr; uint64_t len; } str;   /* NUL-terminated copy; len excludes NUL */
        struct {
            gguf_type elem;            /* element type */
            uint64_t n;                /* element count */
            const uint8_t *raw;        /* numeric/bool elements: packed little-endian bytes, maybe unaligned */
            const gguf_value *items;   /* STRING and ARRAY elements: n values; NULL otherwise */
        } arr;
    } v;
};

typedef struct {
    const char *name;             /* NUL-terminated */
    uint32_t n_dims;              /* 1..GGUF_MAX_DIMS */
    int64_t ne[GGUF_MAX_DIMS];    /* ne[0] = row length (contiguous); unused dims are 1 */
    uint32_t type;                /* quant type id (quant/blocks.h) */
    uint64_t offset;              /* from the start of the data section */
    uint64_t size;                /* bytes */
    int64_t n_elems;
    const void *data;             /* points into the mapping (or the read buffer) */
} gguf_tensor;

typedef struct gguf_ctx gguf_ctx;

/* Opens and validates a file. use_mmap = 0 reads it into memory instead (--no-mmap). */
gguf_ctx *gguf_open(const char *path, int use_mmap, char *err, size_t err_size);
/* Parses a buffer the caller keeps alive (fuzzing, tests); name is used in messages. */
gguf_ctx *gguf_open_buffer(const void *data, size_t size, const char *name, char *err, size_t err_size);
void gguf_close(gguf_ctx *ctx);
/* The path of the open file whose memory map holds addr, or NULL: for a SIGBUS handler (the file
 * was truncated under the map). Async-signal-safe. */
const char *gguf_mapped_path(const void *addr);
/* Locks the file's bytes in RAM (mlock: the mapping is read in whole and never paged out;
 * --mlock), undone at gguf_close. 0, or -1 with the reason (often RLIMIT_MEMLOCK) in err. */
int gguf_mlock(gguf_ctx *ctx, char *err, size_t err_size);

const char *gguf_path(const gguf_ctx *ctx);
uint32_t gguf_version(const gguf_ctx *ctx);
uint32_t gguf_alignment(const gguf_ctx *ctx);
uint64_t gguf_file_size(const gguf_ctx *ctx);
uint64_t gguf_data_offset(const gguf_ctx *ctx);       /* file offset of the data section; may
                                                      * exceed the size when there are no tensors */

/* Metadata. */
int64_t gguf_n_kv(const gguf_ctx *ctx);
const char *gguf_key(const gguf_ctx *ctx, int64_t i);
const gguf_value *gguf_value_at(const gguf_ctx *ctx, int64_t i);
int64_t gguf_find_key(const gguf_ctx *ctx, const char *key);     /* -1 when absent */
const gguf_value *gguf_get(const gguf_ctx *ctx, const char *key);  /* NULL when absent */
const char *gguf_type_name(gguf_type t);

/* Typed getters: GGUF_OK, GGUF_ABSENT, or GGUF_WRONG_TYPE (a value of another type, or an
 * integer that does not fit). Integers convert between widths when the value fits; floats
 * accept FLOAT32 and FLOAT64. */
int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out);
int gguf_get_i32(const gguf_ctx *ctx, const char *key, int32_t *out);
int gguf_get_u64(const gguf_ctx *ctx, const char *key, uint64_t *out);
int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out);
int gguf_get_bool(const gguf_ctx *ctx, const char *key, bool *out);
int gguf_get_str(const gguf_ctx *ctx, const char *key, const char **out);
/* An array value of the given element type (any element type when elem == GGUF_TYPE_COUNT). */
int gguf_get_arr(const gguf_ctx *ctx, const char *key, gguf_type elem, const gguf_value **out);
/* Element i of a numeric array as f32 / i64 (caller checks i < n). */
float gguf_arr_f32(const gguf_value *arr, uint64_t i);
int64_t gguf_arr_i64(const gguf_value *arr, uint64_t i);

/* Tensors. */
int64_t gguf_n_tensors(const gguf_ctx *ctx);
const gguf_tensor *gguf_tensor_at(const gguf_ctx *ctx, int64_t i);
int64_t gguf_find_tensor(const gguf_ctx *ctx, const char *name);   /* -1 when absent */
const gguf_tensor *gguf_get_tensor(const gguf_ctx *ctx, const char *name); /* NULL when absent */

/* Writer: collects metadata and tensors, then writes the file in one go to a temporary name
 * and renames it, so a failed write leaves nothing behind. Keys and tensors keep their order. */
typedef struct gguf_writer gguf_writer;
/* Fills size bytes of a tensor's data at write time (for files larger than memory). */
typedef int (*gguf_fill_fn)(void *dst, size_t size, void *user);

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
void gguf_writer_set_version(gguf_writer *w, uint32_t version);    /* 3 by default; 2 allowed */
void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment); /* also writes general.alignment */
/* Setters copy their arguments. A key set twice is an error at write time (as in a file). */
void gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v);
void gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v);
void gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v);
void gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v);
void gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v);
void gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
void gguf_writer_set_f64(gguf_writer *w, const char *key, double v);
void gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
void gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* Numeric array: n elements of elem type, packed little-endian in data. */
void gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem, const void *data, uint64_t n);
void gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
/* Any value, nested arrays included (deep copy); e.g. to copy keys from another file. */
void gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v);
/* Tensor with data the writer copies (data != NULL) or that fill() produces at write time. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne, const void *data, gguf_fill_fn fill, void *user,
                           char *err, size_t err_size);
int gguf_writer_write(gguf_writer *w, const char *path, char *err, size_t err_size);

#endif
