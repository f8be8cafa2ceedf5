/* Tokenizers read from GGUF metadata (tokenizer.ggml.*): SentencePiece-style ("llama": scores,
 * byte fallback <0xNN>, the leading-space rule) and BPE ("gpt2": byte-level, merges, with the
 * pre-tokenizer chosen by tokenizer.ggml.pre among every name llama.cpp accepts; "gemma4": BPE
 * over UTF-8). Also works on vocabulary-only files. */
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

/* tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (byte-level BPE) or "gemma4" (BPE over
 * UTF-8 with spaces as U+2581) */
const char *tokenizer_kind(const tokenizer *t);
const char *tokenizer_pre(const tokenizer *t);    /* pre-tokenizer name ("default", "llama-bpe", ...) */
int32_t tokenizer_n_vocab(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t);        /* -1 when the vocabulary has none */
int32_t tokenizer_eos(const tokenizer *t);
bool tokenizer_add_bos(const tokenizer *t);       /* tokenizer.ggml.add_bos_token, default per kind */
/* tokenizer.ggml.add_eos_token (default false): llama.cpp appends EOS wherever it adds BOS;
 * tokenizer_encode never does, callers that mirror llama.cpp append tokenizer_eos() themselves. */
bool tokenizer_add_eos(const tokenizer *t);
bool tokenizer_is_eog(const tokenizer *t, int32_t id);  /* end of generation (EOS, EOT, ...) */
/* All end-of-generation ids (at most TOKENIZER_MAX_EOG): their count, the list in *ids. */
#define TOKENIZER_MAX_EOG 16
int tokenizer_eog_ids(const tokenizer *t, const int32_t **ids);

/* Text -> ids. Writes at most cap ids and returns how many the text needs (call again with a
 * larger buffer when the result exceeds cap), or -1 with a message on failure.
 * parse_special: control-token text such as "<s>" becomes that token instead of plain text
 * (user-defined tokens are matched either way, as in llama.cpp; longest text first). Malformed
 * UTF-8 never fails: SPM gives the bytes byte-fallback tokens; BPE splits words as llama.cpp does
 * (a malformed byte counts as U+FFFD) but merges the bytes as they are (llama.cpp would merge
 * U+FFFD), so decoding gives the input back, except where a vocabulary gives the never-valid
 * bytes user-defined tokens that decode as their text (DeepSeek's "ÿ" for 0xFF...). */
int64_t tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_bos,
                         bool parse_special, int32_t *out, int64_t cap, char *err, size_t err_size);

/* The bytes a token stands for (byte-fallback tokens give their byte, "▁" becomes a space,
 * BPE byte symbols are mapped back, an SPM unknown token gives "▅" as in llama.cpp); control
 * and unused tokens give "". An id outside the vocabulary gives "". Not NUL-terminated. */
const char *tokenizer_piece(const tokenizer *t, int32_t id, size_t *len);
/* The token's text as stored in the vocabulary (e.g. "<s>", "▁Hello"), for showing control
 * tokens; "" for an id outside the vocabulary. Not NUL-terminated. */
const char *tokenizer_text(const tokenizer *t, int32_t id, size_t *len);
bool tokenizer_is_control(const tokenizer *t, int32_t id);
size_t tokenizer_max_piece(const tokenizer *t);   /* longest piece, in bytes */

/* Ids -> text as llama.cpp's llama_detokenize: the pieces concatenated; remove_special drops a
 * leading BOS and a trailing EOS where the vocabulary adds them; unparse_special shows control
 * and unknown tokens as their text (else they give nothing); the space SentencePiece's prefix
 * rule put in front of the first piece is dropped (kept after a removed BOS, as llama.cpp
 * keeps it); vocabularies with clean_spaces (GPT-2,
 * Llama 3, ... but not Qwen2, SmolLM, ...) drop the space before ? ! . , and in " ' ", " 's",
 * " 'm", " 're", " 've". Returns the text's length; when that exceeds cap, out holds no usable
 * text and the caller calls again with a larger buffer. */
size_t tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, bool remove_special,
                        bool unparse_special, char *out, size_t cap);

/* Streaming detokenisation: holds back an incomplete UTF-8 sequence at the end until it is
 * complete, so a write never splits a character; malformed bytes pass through as they are.
 * put() returns how many bytes are ready and writes them to out when they fit in cap; when
 * they do not, it writes nothing, leaves the stream unchanged and the caller retries with a
 * larger buffer (cap >= tokenizer_max_piece(t) + 3 always fits). flush() returns what is left
 * (an unfinished sequence, as it is) with the same cap rule. Zero-initialise the stream. */
typedef struct { char pending[8]; int n_pending; } tokenizer_stream;
size_t tokenizer_stream_put(const tokenizer *t, tokenizer_stream *s, int32_t id, char *out, size_t cap);
size_t tokenizer_stream_flush(tokenizer_stream *s, char *out, size_t cap);

#endif
