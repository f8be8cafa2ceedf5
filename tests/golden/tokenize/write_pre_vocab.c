/* Copies a GGUF vocabulary with tokenizer.ggml.pre set to another name, so that llama.cpp and
 * mgi can run every pre-tokenizer on one real vocabulary (make_pre.sh). Built against mgi's
 * gguf/ by make_pre.sh; usage: write_pre_vocab SRC.gguf PRE OUT.gguf */
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: write_pre_vocab SRC.gguf PRE OUT.gguf\n");
        return 1;
    }
    char err[1024];
    gguf_ctx *g = gguf_open(argv[1], 1, err, sizeof err);
    if (!g) {
        fprintf(stderr, "write_pre_vocab: %s\n", err);
        return 2;
    }
    gguf_writer *w = gguf_writer_new();
    for (int64_t i = 0; i < gguf_n_kv(g); i++)
        if (strcmp(gguf_key(g, i), "tokenizer.ggml.pre") && strcmp(gguf_key(g, i), "general.alignment"))
            gguf_writer_set_value(w, gguf_key(g, i), gguf_value_at(g, i));
    gguf_writer_set_str(w, "tokenizer.ggml.pre", argv[2]);
    int rc = gguf_writer_write(w, argv[3], err, sizeof err);
    if (rc) fprintf(stderr, "write_pre_vocab: %s\n", err);
    gguf_writer_free(w);
    gguf_close(g);
    return rc ? 3 : 0;
}
