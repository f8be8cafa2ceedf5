/* Unit tests of gguf/: the real files in ../shared read with known facts (cross-checked with
 * llama.cpp's gguf-py), and writer/reader round trips of every value and tensor type. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "tests/unit/test.h"

static char err[1024];

/* --- the shared files --------------------------------------------------------------------------- */

static void check_u32(const gguf_ctx *g, const char *key, uint32_t want) {
    uint32_t v = 0;
    int rc = gguf_get_u32(g, key, &v);
    char name[160];
    snprintf(name, sizeof name, "shared %s = %u", key, want);
    CHECK(rc == GGUF_OK && v == want, name, "rc %d value %u", rc, v);
}

static void check_arr_n(const gguf_ctx *g, const char *key, gguf_type elem, uint64_t want) {
    const gguf_value *a = NULL;
    int rc = gguf_get_arr(g, key, elem, &a);
    char name[160];
    snprintf(name, sizeof name, "shared %s has %llu elements", key, (unsigned long long)want);
    CHECK(rc == GGUF_OK && a->v.arr.n == want, name, "rc %d n %llu", rc,
          a ? (unsigned long long)a->v.arr.n : 0ull);
}

static gguf_ctx *open_shared(const char *rel, int use_mmap) {
    const char *path = test_shared(rel);
    if (access(path, R_OK) != 0) {
        char name[160];
        snprintf(name, sizeof name, "shared %s", rel);
        SKIP(name, "file not present");
        return NULL;
    }
    gguf_ctx *g = gguf_open(path, use_mmap, err, sizeof err);
    char name[160];
    snprintf(name, sizeof name, "open %s (%s)", rel, use_mmap ? "mmap" : "read");
    CHECK(g != NULL, name, "%s", err);
    return g;
}

static void test_aidreams(const char *rel, uint32_t out_type, uint64_t data_offset) {
    for (int m = 0; m < 2; m++) {
        gguf_ctx *g = open_shared(rel, m);
        if (!g) return;
        CHECK(gguf_version(g) == 3 && gguf_alignment(g) == 32, "aidreams version 3, alignment 32",
              "v%u a%u", gguf_version(g), gguf_alignment(g));
        CHECK(gguf_data_offset(g) == data_offset, "aidreams data offset", "%llu",
              (unsigned long long)gguf_data_offset(g));
        check_u32(g, "llama.embedding_length", 64);
        check_u32(g, "llama.block_count", 4);
        check_u32(g, "llama.attention.head_count", 4);
        check_u32(g, "llama.feed_forward_length", 172);
        check_u32(g, "tokenizer.ggml.padding_token_id", 4294967295u);
        check_arr_n(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, 512);
        check_arr_n(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, 512);
        int32_t i32;
        CHECK(gguf_get_i32(g, "tokenizer.ggml.padding_token_id", &i32) == GGUF_WRONG_TYPE,
              "u32 0xffffffff does not fit i32", "converted to %d", i32);
        const char *s = NULL;
        CHECK(gguf_get_str(g, "general.architecture", &s) == GGUF_OK && strcmp(s, "llama") == 0,
              "aidreams architecture llama", "%s", s ? s : "(null)");
        float eps = 0;
        CHECK(gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps) == GGUF_OK &&
              fabsf(eps - 1e-5f) < 1e-9f, "aidreams rms epsilon", "%g", eps);
        const gguf_value *tok = gguf_get(g, "tokenizer.ggml.tokens");
        CHECK(tok && strcmp(tok->v.arr.items[0].v.str.ptr, "<unk>") == 0 &&
              strcmp(tok->v.arr.items[1].v.str.ptr, "<s>") == 0, "aidreams tokens 0 and 1",
              "unexpected strings");
        const gguf_value *tt = gguf_get(g, "tokenizer.ggml.token_type");
        CHECK(tt && gguf_arr_i64(tt, 0) == 2 && gguf_arr_i64(tt, 1) == 3, "aidreams token types",
              "%lld %lld", tt ? (long long)gguf_arr_i64(tt, 0) : -1ll,
              tt ? (long long)gguf_arr_i64(tt, 1) : -1ll);
        CHECK(gguf_n_tensors(g) == 39, "aidreams has 39 tensors", "%lld", (long long)gguf_n_tensors(g));
        const gguf_tensor *t = gguf_get_tensor(g, "output.weight");
        CHECK(t && t->type == out_type && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 &&
              t->n_elems == 64 * 512 && t->size == quant_row_bytes(out_type, 64) * 512,
              "aidreams output.weight shape and size", "type %u", t ? t->type : 0);
        t = gguf_get_tensor(g, "blk.3.ffn_down.weight");
        CHECK(t && t->ne[0] == 172 && t->ne[1] == 64 && t->ne[2] == 1 && t->ne[3] == 1,
              "aidreams blk.3.ffn_down.weight shape", "missing or wrong");
        t = gguf_get_tensor(g, "output_norm.weight");
        float w0 = 0;
        if (t) memcpy(&w0, t->data, 4);
        CHECK(t && t->type == QUANT_F32 && isfinite(w0) && w0 != 0.0f,
              "aidreams output_norm.weight readable", "%g", w0);
        CHECK(gguf_get_tensor(g, "nope") == NULL && gguf_find_key(g, "nope") == -1,
              "absent names", "found");
        gguf_close(g);
    }
}

static void test_vocab(void) {
    gguf_ctx *g = open_shared("vocab/ggml-vocab-llama-spm.gguf", 1);
    if (g) {
        check_arr_n(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, 32000);
        check_arr_n(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, 32000);
        check_u32(g, "llama.vocab_size", 32000);
        bool b = false;
        CHECK(gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) == GGUF_OK && b,
              "llama-spm add_bos_token true", "%d", b);
        CHECK(gguf_n_tensors(g) == 0, "llama-spm has no tensors", "%lld", (long long)gguf_n_tensors(g));
        const gguf_value *tok = gguf_get(g, "tokenizer.ggml.tokens");
        CHECK(tok && strcmp(tok->v.arr.items[3].v.str.ptr, "<0x00>") == 0, "llama-spm token 3",
              "%s", tok ? tok->v.arr.items[3].v.str.ptr : "");
        gguf_close(g);
    }
    g = open_shared("vocab/ggml-vocab-gpt-2.gguf", 0);
    if (g) {
        check_arr_n(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, 50257);
        check_arr_n(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, 50000);
        check_u32(g, "tokenizer.ggml.bos_token_id", 50256);
        const char *pre = NULL;
        CHECK(gguf_get_str(g, "tokenizer.ggml.pre", &pre) == GGUF_OK && strcmp(pre, "gpt-2") == 0,
              "gpt-2 pre-tokenizer", "%s", pre ? pre : "(null)");
        const gguf_value *m = gguf_get(g, "tokenizer.ggml.merges");
        CHECK(m && strcmp(m->v.arr.items[0].v.str.ptr, "\xc4\xa0 t") == 0, "gpt-2 first merge",
              "'%s'", m ? m->v.arr.items[0].v.str.ptr : "");
        gguf_close(g);
    }
}

/* --- round trips -------------------------------------------------------------------------------- */

static char tmpdir[] = "/tmp/mgi-test-gguf-XXXXXX";

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static int values_equal(const gguf_value *a, const gguf_value *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case GGUF_TYPE_STRING:
        return a->v.str.len == b->v.str.len && memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len) == 0 &&
               a->v.str.ptr[a->v.str.len] == '\0';
    case GGUF_TYPE_ARRAY:
        if (a->v.arr.elem != b->v.arr.elem || a->v.arr.n != b->v.arr.n) return 0;
        if (a->v.arr.elem == GGUF_TYPE_STRING || a->v.arr.elem == GGUF_TYPE_ARRAY) {
            for (uint64_t i = 0; i < a->v.arr.n; i++)
                if (!values_equal(&a->v.arr.items[i], &b->v.arr.items[i])) return 0;
            return 1;
        }
        for (uint64_t i = 0; i < a->v.arr.n; i++)
            if (gguf_arr_i64(a, i) != gguf_arr_i64(b, i) ||
                memcmp(&(float){gguf_arr_f32(a, i)}, &(float){gguf_arr_f32(b, i)}, 4) != 0)
                return 0;
        return 1;
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64: return memcmp(&a->v.f64, &b->v.f64, 8) == 0;
    case GGUF_TYPE_BOOL: return a->v.b == b->v.b;
    default: return a->v.u64 == b->v.u64;
    }
}

static int fill_pattern(void *dst, size_t size, void *user) {
    uint8_t seed = (uint8_t)(uintptr_t)user;
    for (size_t i = 0; i < size; i++) ((uint8_t *)dst)[i] = (uint8_t)(seed + i * 7);
    return 0;
}

static int fill_fails(void *dst, size_t size, void *user) {
    (void)dst, (void)size, (void)user;
    return 5;
}

/* Nested array of the given depth: [[[... [1, 2] ...]]] */
static gguf_value *nested(int depth, gguf_value *store, const int32_t *leaf) {
    gguf_value *v = &store[depth];
    if (depth == 0) {
        *v = (gguf_value){.type = GGUF_TYPE_ARRAY, .v.arr = {GGUF_TYPE_INT32, 2, (const uint8_t *)leaf, NULL}};
    } else {
        *v = (gguf_value){.type = GGUF_TYPE_ARRAY,
                          .v.arr = {GGUF_TYPE_ARRAY, 1, NULL, nested(depth - 1, store, leaf)}};
    }
    return v;
}

static void build_everything(gguf_writer *w) {
    gguf_writer_set_u8(w, "t.u8", 255);
    gguf_writer_set_i8(w, "t.i8", -128);
    gguf_writer_set_u16(w, "t.u16", 65535);
    gguf_writer_set_i16(w, "t.i16", -32768);
    gguf_writer_set_u32(w, "t.u32", 4294967295u);
    gguf_writer_set_i32(w, "t.i32", INT32_MIN);
    gguf_writer_set_u64(w, "t.u64", UINT64_MAX);
    gguf_writer_set_i64(w, "t.i64", INT64_MIN);
    gguf_writer_set_f32(w, "t.f32", 1.5f);
    gguf_writer_set_f64(w, "t.f64", 3.141592653589793);
    gguf_writer_set_bool(w, "t.true", true);
    gguf_writer_set_bool(w, "t.false", false);
    gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo");
    gguf_writer_set_str(w, "t.empty", "");
    gguf_writer_set_i8(w, "t.small", 7);
    static const uint8_t u8s[] = {0, 1, 255};
    static const int8_t i8s[] = {-1, 0, 127};
    static const uint16_t u16s[] = {1, 2, 65535};
    static const int16_t i16s[] = {-300, 0, 300};
    static const uint32_t u32s[] = {0, 70000, 4294967295u};
    static const int32_t i32s[] = {-70000, 0, 70000};
    static const float f32s[] = {-0.5f, 0.0f, 1e30f};
    static const bool bools[] = {true, false, true};
    static const uint64_t u64s[] = {0, 1ull << 40, UINT64_MAX};
    static const int64_t i64s[] = {INT64_MIN, -1, INT64_MAX};
    static const double f64s[] = {-1e300, 0.25, 1e-300};
    gguf_writer_set_arr(w, "a.u8", GGUF_TYPE_UINT8, u8s, 3);
    gguf_writer_set_arr(w, "a.i8", GGUF_TYPE_INT8, i8s, 3);
    gguf_writer_set_arr(w, "a.u16", GGUF_TYPE_UINT16, u16s, 3);
    gguf_writer_set_arr(w, "a.i16", GGUF_TYPE_INT16, i16s, 3);
    gguf_writer_set_arr(w, "a.u32", GGUF_TYPE_UINT32, u32s, 3);
    gguf_writer_set_arr(w, "a.i32", GGUF_TYPE_INT32, i32s, 3);
    gguf_writer_set_arr(w, "a.f32", GGUF_TYPE_FLOAT32, f32s, 3);
    gguf_writer_set_arr(w, "a.bool", GGUF_TYPE_BOOL, bools, 3);
    gguf_writer_set_arr(w, "a.u64", GGUF_TYPE_UINT64, u64s, 3);
    gguf_writer_set_arr(w, "a.i64", GGUF_TYPE_INT64, i64s, 3);
    gguf_writer_set_arr(w, "a.f64", GGUF_TYPE_FLOAT64, f64s, 3);
    gguf_writer_set_arr(w, "a.empty", GGUF_TYPE_FLOAT32, NULL, 0);
    static const char *const strs[] = {"one", "", "three \xe2\x82\xac"};
    gguf_writer_set_arr_str(w, "a.str", strs, 3);
    gguf_writer_set_arr_str(w, "a.str_empty", NULL, 0);
    gguf_value store[8];
    static const int32_t leaf[2] = {1, 2};
    gguf_writer_set_value(w, "a.nested7", nested(6, store, leaf));
    gguf_value strarr = {.type = GGUF_TYPE_STRING, .v.str = {"x", 1}};
    gguf_value inner[2] = {
        {.type = GGUF_TYPE_ARRAY, .v.arr = {GGUF_TYPE_STRING, 1, NULL, &strarr}},
        {.type = GGUF_TYPE_ARRAY, .v.arr = {GGUF_TYPE_STRING, 0, NULL, NULL}},
    };
    gguf_value outer = {.type = GGUF_TYPE_ARRAY, .v.arr = {GGUF_TYPE_ARRAY, 2, NULL, inner}};
    gguf_writer_set_value(w, "a.arr_of_str_arrs", &outer);
}

static void check_everything(const gguf_ctx *g, const char *tag) {
    char name[200];
#define NAME(s) (snprintf(name, sizeof name, "%s: %s", tag, s), name)
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0;
    float f = 0;
    bool b = false;
    const char *s = NULL;
    CHECK(gguf_get_u32(g, "t.u8", &u32) == GGUF_OK && u32 == 255, NAME("u8 as u32"), "%u", u32);
    CHECK(gguf_get_i32(g, "t.i8", &i32) == GGUF_OK && i32 == -128, NAME("i8 as i32"), "%d", i32);
    CHECK(gguf_get_u32(g, "t.i8", &u32) == GGUF_WRONG_TYPE, NAME("negative i8 is no u32"), "ok");
    CHECK(gguf_get_u32(g, "t.u16", &u32) == GGUF_OK && u32 == 65535, NAME("u16"), "%u", u32);
    CHECK(gguf_get_i32(g, "t.i16", &i32) == GGUF_OK && i32 == -32768, NAME("i16"), "%d", i32);
    CHECK(gguf_get_u32(g, "t.u32", &u32) == GGUF_OK && u32 == 4294967295u, NAME("u32"), "%u", u32);
    CHECK(gguf_get_i32(g, "t.i32", &i32) == GGUF_OK && i32 == INT32_MIN, NAME("i32"), "%d", i32);
    CHECK(gguf_get_u64(g, "t.u64", &u64) == GGUF_OK && u64 == UINT64_MAX, NAME("u64"), "%llu",
          (unsigned long long)u64);
    CHECK(gguf_get_u32(g, "t.u64", &u32) == GGUF_WRONG_TYPE, NAME("u64 max is no u32"), "ok");
    CHECK(gguf_get_i32(g, "t.u32", &i32) == GGUF_WRONG_TYPE, NAME("u32 max is no i32"), "ok");
    CHECK(gguf_get_u64(g, "t.i64", &u64) == GGUF_WRONG_TYPE, NAME("i64 min is no u64"), "ok");
    CHECK(gguf_get(g, "t.i64")->v.i64 == INT64_MIN, NAME("i64"), "wrong");
    CHECK(gguf_get_u64(g, "t.small", &u64) == GGUF_OK && u64 == 7, NAME("i8 7 as u64"), "%llu",
          (unsigned long long)u64);
    CHECK(gguf_get_f32(g, "t.f32", &f) == GGUF_OK && f == 1.5f, NAME("f32"), "%g", f);
    CHECK(gguf_get_f32(g, "t.f64", &f) == GGUF_OK && f == (float)3.141592653589793, NAME("f64 as f32"),
          "%g", f);
    CHECK(gguf_get(g, "t.f64")->v.f64 == 3.141592653589793, NAME("f64 exact"), "wrong");
    CHECK(gguf_get_f32(g, "t.u32", &f) == GGUF_WRONG_TYPE, NAME("int is no float"), "ok");
    CHECK(gguf_get_bool(g, "t.true", &b) == GGUF_OK && b, NAME("bool true"), "%d", b);
    CHECK(gguf_get_bool(g, "t.false", &b) == GGUF_OK && !b, NAME("bool false"), "%d", b);
    CHECK(gguf_get_bool(g, "t.u8", &b) == GGUF_WRONG_TYPE, NAME("u8 is no bool"), "ok");
    CHECK(gguf_get_str(g, "t.str", &s) == GGUF_OK && strcmp(s, "h\xc3\xa9llo") == 0, NAME("string"),
          "%s", s);
    CHECK(gguf_get_str(g, "t.empty", &s) == GGUF_OK && s[0] == '\0' &&
          gguf_get(g, "t.empty")->v.str.len == 0, NAME("empty string"), "'%s'", s);
    CHECK(gguf_get_str(g, "t.u8", &s) == GGUF_WRONG_TYPE, NAME("u8 is no string"), "ok");
    CHECK(gguf_get_u32(g, "absent", &u32) == GGUF_ABSENT && gguf_get(g, "absent") == NULL,
          NAME("absent key"), "found");
    const gguf_value *a = NULL;
    CHECK(gguf_get_arr(g, "a.u8", GGUF_TYPE_UINT8, &a) == GGUF_OK && a->v.arr.n == 3 &&
          gguf_arr_i64(a, 2) == 255 && gguf_arr_f32(a, 1) == 1.0f, NAME("u8 array"), "wrong");
    CHECK(gguf_get_arr(g, "a.u8", GGUF_TYPE_INT8, &a) == GGUF_WRONG_TYPE, NAME("u8 array is no i8 array"), "ok");
    CHECK(gguf_get_arr(g, "a.i8", GGUF_TYPE_COUNT, &a) == GGUF_OK && gguf_arr_i64(a, 0) == -1,
          NAME("i8 array"), "wrong");
    CHECK(gguf_get_arr(g, "a.u16", GGUF_TYPE_UINT16, &a) == GGUF_OK && gguf_arr_i64(a, 2) == 65535,
          NAME("u16 array"), "wrong");
    CHECK(gguf_get_arr(g, "a.i16", GGUF_TYPE_INT16, &a) == GGUF_OK && gguf_arr_i64(a, 0) == -300,
          NAME("i16 array"), "wrong");
    CHECK(gguf_get_arr(g, "a.u32", GGUF_TYPE_UINT32, &a) == GGUF_OK && gguf_arr_i64(a, 2) == 4294967295ll,
          NAME("u32 array"), "wrong");
    CHECK(gguf_get_arr(g, "a.i32", GGUF_TYPE_INT32, &a) == GGUF_OK && gguf_arr_i64(a, 0) == -70000,
          NAME("i32 array"), "wrong");
    CHECK(gguf_get_arr(g, "a.f32", GGUF_TYPE_FLOAT32, &a) == GGUF_OK && gguf_arr_f32(a, 0) == -0.5f &&
          gguf_arr_f32(a, 2) == 1e30f && gguf_arr_i64(a, 0) == 0, NAME("f32 array"), "wrong");
    CHECK(gguf_get_arr(g, "a.bool", GGUF_TYPE_BOOL, &a) == GGUF_OK && gguf_arr_i64(a, 0) == 1 &&
          gguf_arr_i64(a, 1) == 0, NAME("bool array"), "wrong");
    CHECK(gguf_get_arr(g, "a.u64", GGUF_TYPE_UINT64, &a) == GGUF_OK && gguf_arr_i64(a, 1) == (1ll << 40) &&
          gguf_arr_i64(a, 2) == INT64_MAX, NAME("u64 array (saturating i64)"), "wrong");
    CHECK(gguf_get_arr(g, "a.i64", GGUF_TYPE_INT64, &a) == GGUF_OK && gguf_arr_i64(a, 0) == INT64_MIN,
          NAME("i64 array"), "wrong");
    CHECK(gguf_get_arr(g, "a.f64", GGUF_TYPE_FLOAT64, &a) == GGUF_OK && gguf_arr_f32(a, 1) == 0.25f &&
          gguf_arr_f32(a, 0) == -INFINITY, NAME("f64 array"), "wrong");
    CHECK(gguf_get_arr(g, "a.empty", GGUF_TYPE_FLOAT32, &a) == GGUF_OK && a->v.arr.n == 0,
          NAME("empty array"), "wrong");
    CHECK(gguf_get_arr(g, "a.str", GGUF_TYPE_STRING, &a) == GGUF_OK && a->v.arr.n == 3 &&
          strcmp(a->v.arr.items[0].v.str.ptr, "one") == 0 && a->v.arr.items[1].v.str.len == 0 &&
          strcmp(a->v.arr.items[2].v.str.ptr, "three \xe2\x82\xac") == 0, NAME("string array"), "wrong");
    CHECK(gguf_get_arr(g, "a.str_empty", GGUF_TYPE_STRING, &a) == GGUF_OK && a->v.arr.n == 0,
          NAME("empty string array"), "wrong");
    int depth = 0;
    const gguf_value *v = gguf_get(g, "a.nested7");
    while (v && v->type == GGUF_TYPE_ARRAY && v->v.arr.elem == GGUF_TYPE_ARRAY && v->v.arr.n == 1) {
        v = &v->v.arr.items[0];
        depth++;
    }
    CHECK(depth == 6 && v->v.arr.elem == GGUF_TYPE_INT32 && gguf_arr_i64(v, 1) == 2,
          NAME("arrays nested 7 deep"), "depth %d", depth);
    v = gguf_get(g, "a.arr_of_str_arrs");
    CHECK(v && v->v.arr.n == 2 && v->v.arr.items[0].v.arr.n == 1 &&
          strcmp(v->v.arr.items[0].v.arr.items[0].v.str.ptr, "x") == 0 &&
          v->v.arr.items[1].v.arr.n == 0 && v->v.arr.items[1].v.arr.elem == GGUF_TYPE_STRING,
          NAME("array of string arrays"), "wrong");
#undef NAME
}

/* Cross-check with llama.cpp's own reader (gguf-py), when python3 has it: the file the writer
 * made must read there with the same keys, tensor types, sizes and bytes. */
static const char py_script[] =
    "import sys\n"
    "try:\n"
    "    import gguf\n"
    "except Exception:\n"
    "    print('NOGGUF'); sys.exit(0)\n"
    "r = gguf.GGUFReader(sys.argv[1])\n"
    "print('A', r.alignment, len(r.tensors), r.data_offset)\n"
    "for t in r.tensors:\n"
    "    b = t.data.tobytes()\n"
    "    print('T', t.name, int(t.tensor_type), len(b), sum(b) % 4294967296)\n"
    "for k, f in r.fields.items():\n"
    "    if not k.startswith('GGUF.'):\n"
    "        print('K', k, int(f.types[0]))\n";

static void test_gguf_py(const char *path) {
    const char *script = tmp_path("check.py");
    FILE *f = fopen(script, "w");
    if (!f) return;
    fputs(py_script, f);
    fclose(f);
    char cmd[1200], line[512];
    snprintf(cmd, sizeof cmd, "python3 %s %s 2>&1", script, path);
    FILE *p = popen(cmd, "r");
    if (!p) {
        unlink(script);
        SKIP("gguf-py cross-check", "cannot run python3");
        return;
    }
    gguf_ctx *g = gguf_open(path, 1, err, sizeof err);
    int bad = 0, n_t = 0, n_k = 0, skipped = 0;
    char why[600] = "";
    while (g && fgets(line, sizeof line, p)) {
        char name[256];
        unsigned long long a, b, c;
        unsigned type;
        if (strncmp(line, "NOGGUF", 6) == 0) {
            skipped = 1;
        } else if (sscanf(line, "A %llu %llu %llu", &a, &b, &c) == 3) {
            if (a != gguf_alignment(g) || (int64_t)b != gguf_n_tensors(g) || c != gguf_data_offset(g))
                bad++, snprintf(why, sizeof why, "%s", line);
        } else if (sscanf(line, "T %255s %u %llu %llu", name, &type, &a, &b) == 4) {
            const gguf_tensor *t = gguf_get_tensor(g, name);
            uint32_t sum = 0;
            for (uint64_t i = 0; t && i < t->size; i++) sum += ((const uint8_t *)t->data)[i];
            /* gguf-py sizes Q8_1 blocks at 40 bytes (float d and s, an old layout); ggml's
             * block_q8_1 holds two halves, 36 bytes, as mgi does. Only the type is compared. */
            int q8_1 = t && t->type == QUANT_Q8_1;
            if (!t || t->type != type || (!q8_1 && (t->size != a || sum != b)))
                bad++, snprintf(why, sizeof why, "%s", line);
            n_t++;
        } else if (sscanf(line, "K %255s %u", name, &type) == 2) {
            const gguf_value *v = gguf_get(g, name);
            if (!v || v->type != (gguf_type)type) bad++, snprintf(why, sizeof why, "%s", line);
            n_k++;
        } else {
            bad++;
            snprintf(why, sizeof why, "gguf-py: %s", line);
        }
    }
    int rc = pclose(p);
    unlink(script);
    if (skipped || (rc != 0 && n_t == 0 && n_k == 0 && strstr(why, "python3"))) {
        SKIP("gguf-py cross-check", "python3 with the gguf module not available");
    } else {
        CHECK(g && bad == 0 && n_t == gguf_n_tensors(g) && n_k == gguf_n_kv(g),
              "gguf-py reads the writer's file identically", "%d mismatches (%s), %d of %lld tensors, "
              "%d of %lld keys", bad, why, n_t, g ? (long long)gguf_n_tensors(g) : 0ll, n_k,
              g ? (long long)gguf_n_kv(g) : 0ll);
    }
    gguf_close(g);
}

/* Writes every value type and one tensor of every type, reads it back three ways. */
static void test_round_trip(uint32_t version, uint32_t alignment) {
    char tag[64];
    snprintf(tag, sizeof tag, "v%u align %u", version, alignment);
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_version(w, version);
    if (alignment != GGUF_DEFAULT_ALIGNMENT) gguf_writer_set_alignment(w, alignment);
    build_everything(w);
    uint8_t *bufs[QUANT_TYPE_COUNT] = {0};
    int n_types = 0;
    for (uint32_t type = 0; type < QUANT_TYPE_COUNT; type++) {
        const quant_traits *q = quant_traits_of(type);
        if (!q) continue;
        int64_t ne[3] = {q->block_elems * 2, 3, 2};
        char name[64];
        snprintf(name, sizeof name, "tensor.%s", q->name);
        size_t size = quant_row_bytes(type, ne[0]) * 6;
        int rc;
        if (type % 2) {
            rc = gguf_writer_add_tensor(w, name, type, 3, ne, NULL, fill_pattern,
                                        (void *)(uintptr_t)type, err, sizeof err);
        } else {
            bufs[type] = malloc(size);
            fill_pattern(bufs[type], size, (void *)(uintptr_t)type);
            rc = gguf_writer_add_tensor(w, name, type, 3, ne, bufs[type], NULL, NULL, err, sizeof err);
        }
        if (rc) CHECK(0, "add tensor", "%s", err);
        n_types++;
    }
    char fname[64];
    snprintf(fname, sizeof fname, "rt-v%u-a%u.gguf", version, alignment);
    const char *path = tmp_path(fname);
    int rc = gguf_writer_write(w, path, err, sizeof err);
    char name[200];
    snprintf(name, sizeof name, "%s: write", tag);
    CHECK(rc == 0, name, "%s", err);
    gguf_writer_free(w);
    for (int mode = 0; mode < 3; mode++) {
        gguf_ctx *g = NULL;
        void *file = NULL;
        if (mode < 2) {
            g = gguf_open(path, mode, err, sizeof err);
        } else {
            FILE *f = fopen(path, "rb");
            fseek(f, 0, SEEK_END);
            long n = ftell(f);
            rewind(f);
            file = malloc((size_t)n);
            if (fread(file, 1, (size_t)n, f) != (size_t)n) n = 0;
            fclose(f);
            g = gguf_open_buffer(file, (size_t)n, "buffer", err, sizeof err);
        }
        snprintf(tag, sizeof tag, "v%u align %u %s", version, alignment,
                 mode == 0 ? "read" : mode == 1 ? "mmap" : "buffer");
        snprintf(name, sizeof name, "%s: open", tag);
        if (!CHECK(g != NULL, name, "%s", err)) {
            free(file);
            continue;
        }
        snprintf(name, sizeof name, "%s: header", tag);
        CHECK(gguf_version(g) == version && gguf_alignment(g) == alignment &&
              gguf_data_offset(g) % alignment == 0 && gguf_n_tensors(g) == n_types, name,
              "version %u alignment %u data %llu tensors %lld", gguf_version(g), gguf_alignment(g),
              (unsigned long long)gguf_data_offset(g), (long long)gguf_n_tensors(g));
        check_everything(g, tag);
        int bad = 0;
        int64_t k = 0;
        for (uint32_t type = 0; type < QUANT_TYPE_COUNT; type++) {
            const quant_traits *q = quant_traits_of(type);
            if (!q) continue;
            const gguf_tensor *t = gguf_tensor_at(g, k);
            snprintf(name, sizeof name, "tensor.%s", q->name);
            size_t size = quant_row_bytes(type, q->block_elems * 2) * 6;
            uint8_t *want = malloc(size);
            fill_pattern(want, size, (void *)(uintptr_t)type);
            if (!t || strcmp(t->name, name) != 0 || t->type != type || t->n_dims != 3 ||
                t->ne[0] != q->block_elems * 2 || t->ne[1] != 3 || t->ne[2] != 2 || t->ne[3] != 1 ||
                t->size != size || t->offset % alignment != 0 || memcmp(t->data, want, size) != 0 ||
                gguf_find_tensor(g, name) != k)
                bad++;
            free(want);
            k++;
        }
        snprintf(name, sizeof name, "%s: every tensor type (%d) round-trips", tag, n_types);
        CHECK(bad == 0, name, "%d tensors differ", bad);
        gguf_close(g);
        free(file);
    }
    for (int i = 0; i < QUANT_TYPE_COUNT; i++) free(bufs[i]);
    if (version == 3 && alignment == 64) test_gguf_py(path);
    unlink(path);
}

/* Copies a real file key by key and tensor by tensor; the copy must read back identical. */
static void test_copy(const char *rel) {
    const char *src_path = test_shared(rel);
    if (access(src_path, R_OK) != 0) {
        SKIP("copy of a real file", "file not present");
        return;
    }
    gguf_ctx *a = gguf_open(src_path, 1, err, sizeof err);
    if (!CHECK(a != NULL, "copy: open source", "%s", err)) return;
    gguf_writer *w = gguf_writer_new();
    for (int64_t i = 0; i < gguf_n_kv(a); i++) gguf_writer_set_value(w, gguf_key(a, i), gguf_value_at(a, i));
    for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
        const gguf_tensor *t = gguf_tensor_at(a, i);
        if (gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL, err,
                                   sizeof err))
            CHECK(0, "copy: add tensor", "%s", err);
    }
    const char *path = tmp_path("copy.gguf");
    CHECK(gguf_writer_write(w, path, err, sizeof err) == 0, "copy: write", "%s", err);
    gguf_writer_free(w);
    gguf_ctx *b = gguf_open(path, 1, err, sizeof err);
    if (CHECK(b != NULL, "copy: reopen", "%s", err)) {
        int bad = gguf_n_kv(a) != gguf_n_kv(b) || gguf_n_tensors(a) != gguf_n_tensors(b) ||
                  gguf_data_offset(a) != gguf_data_offset(b);
        for (int64_t i = 0; !bad && i < gguf_n_kv(a); i++)
            bad = strcmp(gguf_key(a, i), gguf_key(b, i)) != 0 ||
                  !values_equal(gguf_value_at(a, i), gguf_value_at(b, i));
        for (int64_t i = 0; !bad && i < gguf_n_tensors(a); i++) {
            const gguf_tensor *x = gguf_tensor_at(a, i), *y = gguf_tensor_at(b, i);
            bad = strcmp(x->name, y->name) != 0 || x->offset != y->offset || x->size != y->size ||
                  memcmp(x->data, y->data, x->size) != 0;
        }
        CHECK(!bad, "copy of aidreams260K-mixq reads back identical", "differs");
        gguf_close(b);
    }
    gguf_close(a);
    unlink(path);
}

static int dir_entries(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static void test_writer_errors(void) {
    const char *path = tmp_path("bad.gguf");
    int64_t ne[2] = {32, 2};
    static uint8_t data[4096];
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_u32(w, "k", 1);
    gguf_writer_set_str(w, "k", "again");
    CHECK(gguf_writer_write(w, path, err, sizeof err) != 0 && strstr(err, "'k' set twice"),
          "writer: duplicate key refused", "%s", err);
    gguf_writer_free(w);
    w = gguf_writer_new();
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_Q4_0, 2, ne, data, NULL, NULL, err, sizeof err) == 0,
          "writer: add tensor", "%s", err);
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_Q4_0, 2, ne, data, NULL, NULL, err, sizeof err) != 0 &&
          strstr(err, "added twice"), "writer: duplicate tensor refused", "%s", err);
    int64_t odd[1] = {33};
    CHECK(gguf_writer_add_tensor(w, "u", QUANT_Q4_0, 1, odd, data, NULL, NULL, err, sizeof err) != 0 &&
          strstr(err, "multiple"), "writer: ne[0] not a multiple of the block refused", "%s", err);
    CHECK(gguf_writer_add_tensor(w, "v", 4, 1, ne, data, NULL, NULL, err, sizeof err) != 0 &&
          strstr(err, "unknown type id 4"), "writer: retired type id refused", "%s", err);
    char long_name[80];
    memset(long_name, 'x', 64);
    long_name[64] = '\0';
    CHECK(gguf_writer_add_tensor(w, long_name, QUANT_F32, 1, ne, data, NULL, NULL, err, sizeof err) != 0,
          "writer: 64-byte tensor name refused", "accepted");
    CHECK(gguf_writer_add_tensor(w, "f", QUANT_F32, 2, ne, NULL, fill_fails, NULL, err, sizeof err) == 0,
          "writer: add fill tensor", "%s", err);
    CHECK(gguf_writer_write(w, path, err, sizeof err) != 0 && strstr(err, "tensor 'f': fill callback failed"),
          "writer: failing fill reported", "%s", err);
    CHECK(access(path, F_OK) != 0 && dir_entries() == 0, "writer: failed write leaves nothing behind",
          "%d files left", dir_entries());
    gguf_writer_free(w);
    w = gguf_writer_new();
    gguf_writer_set_version(w, 1);
    CHECK(gguf_writer_write(w, path, err, sizeof err) != 0 && strstr(err, "version 1"),
          "writer: version 1 refused", "%s", err);
    gguf_writer_free(w);
    w = gguf_writer_new();
    CHECK(gguf_writer_write(w, tmp_path("no/such/dir/x.gguf"), err, sizeof err) != 0 &&
          strstr(err, "no/such/dir/x.gguf"), "writer: unwritable path named", "%s", err);
    gguf_writer_free(w);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp", "cannot create %s", tmpdir);
        return test_done();
    }
    test_aidreams("models/aidreams260K-f32.gguf", QUANT_F32, 13664);
    test_aidreams("models/aidreams260K-mixq.gguf", QUANT_Q8_0, 13728);
    test_vocab();
    test_round_trip(3, 32);
    test_round_trip(2, 32);
    test_round_trip(3, 64);
    test_round_trip(2, 1);
    test_round_trip(3, 4096);
    test_copy("models/aidreams260K-mixq.gguf");
    test_writer_errors();
    rmdir(tmpdir);
    return test_done();
}
