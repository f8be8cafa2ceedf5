/* Writes the malformed-GGUF corpus (tests/malformed/cases.h) into a directory and prints one
 * line per file: "PATH<TAB>substring the reader's error must contain". With --seeds it also
 * writes valid files made by the writer, as a starting corpus for the fuzzer. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "tests/malformed/cases.h"

static int write_file(const char *dir, const char *name, const mbuf *b, const char *expect) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (b->n && fwrite(b->p, 1, b->n, f) != b->n) || fclose(f) != 0) {
        fprintf(stderr, "gen_malformed: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (expect) printf("%s\t%s\n", path, expect);
    return 0;
}

/* Valid files covering every value type and a few tensor types. */
static int write_seeds(const char *dir) {
    char path[4096], err[512];
    static const int32_t ints[] = {1, -2, 3};
    static const char *const strs[] = {"<unk>", "", "\xe2\x96\x81the"};
    static uint8_t data[4096];
    for (int v = 2; v <= 3; v++) {
        gguf_writer *w = gguf_writer_new();
        gguf_writer_set_version(w, (uint32_t)v);
        if (v == 2) gguf_writer_set_alignment(w, 64);
        gguf_writer_set_str(w, "general.architecture", "llama");
        gguf_writer_set_u8(w, "s.u8", 1);
        gguf_writer_set_i8(w, "s.i8", -1);
        gguf_writer_set_u16(w, "s.u16", 2);
        gguf_writer_set_i16(w, "s.i16", -2);
        gguf_writer_set_u32(w, "llama.block_count", 2);
        gguf_writer_set_i32(w, "s.i32", -3);
        gguf_writer_set_u64(w, "s.u64", 4);
        gguf_writer_set_i64(w, "s.i64", -4);
        gguf_writer_set_f32(w, "s.f32", 0.5f);
        gguf_writer_set_f64(w, "s.f64", 0.25);
        gguf_writer_set_bool(w, "s.bool", true);
        gguf_writer_set_arr(w, "a.i32", GGUF_TYPE_INT32, ints, 3);
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, 3);
        gguf_value inner = {.type = GGUF_TYPE_ARRAY, .v.arr = {GGUF_TYPE_INT32, 3, (const uint8_t *)ints, NULL}};
        gguf_value outer = {.type = GGUF_TYPE_ARRAY, .v.arr = {GGUF_TYPE_ARRAY, 1, NULL, &inner}};
        gguf_writer_set_value(w, "a.nested", &outer);
        const uint32_t types[] = {QUANT_F32, QUANT_F16, QUANT_Q4_0, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q6_K};
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            const quant_traits *q = quant_traits_of(types[i]);
            int64_t ne[2] = {q->block_elems, 2};
            char name[32];
            snprintf(name, sizeof name, "blk.%zu.weight", i);
            if (gguf_writer_add_tensor(w, name, types[i], 2, ne, data, NULL, NULL, err, sizeof err)) {
                fprintf(stderr, "gen_malformed: %s\n", err);
                return -1;
            }
        }
        snprintf(path, sizeof path, "%s/seed-v%d.gguf", dir, v);
        int rc = gguf_writer_write(w, path, err, sizeof err);
        gguf_writer_free(w);
        if (rc) {
            fprintf(stderr, "gen_malformed: %s\n", err);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    int seeds = argc == 3 && strcmp(argv[1], "--seeds") == 0;
    if (argc != 2 + seeds) {
        fprintf(stderr, "usage: gen_malformed [--seeds] DIR\n"
                        "writes the malformed-GGUF corpus into DIR and prints PATH<TAB>EXPECTED "
                        "lines; --seeds adds valid files for the fuzzer\n");
        return 1;
    }
    const char *dir = argv[1 + seeds];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "gen_malformed: cannot create %s: %s\n", dir, strerror(errno));
        return 2;
    }
    for (size_t i = 0; i < N_MALFORMED_CASES; i++) {
        mbuf b = {0};
        malformed_cases[i].build(&b);
        int rc = write_file(dir, malformed_cases[i].name, &b, malformed_cases[i].expect);
        free(b.p);
        if (rc) return 2;
    }
    mbuf base = {0};
    mcut cuts[MAX_CUTS];
    size_t n = mb_base(&base, cuts);
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "truncated-at-%zu", cuts[i].at);
        mbuf cut = {base.p, cuts[i].at, cuts[i].at};
        if (write_file(dir, name, &cut, cuts[i].expect)) return 2;
    }
    if (seeds && (write_file(dir, "seed-base", &base, NULL) || write_seeds(dir))) return 2;
    free(base.p);
    return 0;
}
