/* Tokenizers read from GGUF metadata (tokenizer.ggml.*): SentencePiece-style ("llama": scores,
 * byte fallback <0xNN>, the leading-space rule) and byte-level BPE ("gpt2": merges, with the
 * pre-tokenizer chosen by tokenizer.ggml.pre). Also works on vocabulary-only files. */
#ifndef MGI_TOKENIZER_H
#define MGI_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct tokenizer tokenizer;

/* Builds the tokenizer; NULL with a message naming the file and key on bad metadata
 * (missing tokens, out-of-range special ids, unknown model kind...). The tokenizer copies what
 * it keeps: the gguf_ctx may be closed afterwards. */
tokenizer *tokenizer_load(const gguf_ctx *g, char *err, size_t err_size);
void tokenizer_free(tokenizer *t);

const char *tokenizer_kind(const tokenizer *t);   /* "llama" (SPM) or "gpt2" (BPE) */
const char *tokenizer_pre(const tokenizer *t);    /* pre-tokenizer name ("default", "llama3", ...) */
int32_t tokenizer_n_vocab(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t);        /* -1 when the vocabulary has none */
int32_t tokenizer_eos(const tokenizer *t);
bool tokenizer_add_bos(const tokenizer *t);       /* tokenizer.ggml.add_bos_token, default per kind */
bool tokenizer_is_eog(const tokenizer *t, int32_t id);  /* end of generation (EOS, EOT, ...) */

/* Text -> ids. Writes at most cap ids and returns how many the text needs (call again with a
 * larger buffer when the result exceeds cap), or -1 with a message on failure.
 * parse_special: control-token text such as "<s>" becomes that token instead of plain text. */
int64_t tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_bos,
                         bool parse_special, int32_t *out, int64_t cap, char *err, size_t err_size);

/* The bytes a token stands for (byte-fallback tokens give their byte, "▁" becomes a space,
 * BPE byte symbols are mapped back); control tokens give "". */
const char *tokenizer_piece(const tokenizer *t, int32_t id, size_t *len);

/* Streaming detokenisation: holds back an incomplete UTF-8 sequence until it is complete, so a
 * write never splits a character. put() returns the bytes ready in out (at most cap; 16 always
 * suffices for one token's carry-over plus a 4-byte char... callers pass >= 256); flush()
 * returns what is left (invalid bytes as they are). */
typedef struct { char pending[8]; int n_pending; } tokenizer_stream;
size_t tokenizer_stream_put(const tokenizer *t, tokenizer_stream *s, int32_t id, char *out, size_t cap);
size_t tokenizer_stream_flush(tokenizer_stream *s, char *out, size_t cap);

#endif
