/* Unit tests of gguf/: the real files in ../shared read with known facts (cross-checked with
 * llama.cpp's gguf-py), and writer/reader round trips of every value and tensor type. */
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

int main(void) {
    test_aidreams("models/aidreams260K-f32.gguf", QUANT_F32, 13664);
    test_aidreams("models/aidreams260K-mixq.gguf", QUANT_Q8_0, 13728);
    test_vocab();
    return test_done();
}
