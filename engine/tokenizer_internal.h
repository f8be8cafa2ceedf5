/* Shared inside the tokenizer (engine/tokenizer*.c only): the loaded vocabulary, a string hash
 * map, a growable id vector, the bigram priority queue that both merge algorithms use and the
 * BPE pre-tokenizer (a row of PCRE2 regexes). */
#ifndef MGI_TOKENIZER_INTERNAL_H
#define MGI_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "engine/tokenizer.h"

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER_DEFINED = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };
enum { TOK_KIND_SPM, TOK_KIND_BPE };

/* A pre-tokenizer name and its row: regexes (NULL-terminated) and settings (tokenizer_pre.c). */
typedef struct {
    const char *name;
    const char *const *rx;
    unsigned flags;
} tok_pre_entry;

#define TOK_MAX_RX 8
enum { DIGITS_WORD = 1, DIGITS_SPLIT = 2 };

/* A set of byte strings (each with a split point, 0 when unused) in one arena; the map finds
 * an entry's index from its bytes. Equal keys: the later entry wins, or with keep_first the
 * earlier one (llama.cpp's merge ranks: a repeated merge keeps its first, lowest rank). */
typedef struct {
    char *arena;
    uint32_t *off, *len, *split;   /* per entry; split is NULL for plain strings */
    int32_t n;
    int32_t *slot;                 /* open addressing: entry index or -1 */
    size_t mask;
    bool keep_first;
} tok_strings;

int tok_strings_build(tok_strings *s, char *err, size_t err_size);  /* fills slot/mask */
int32_t tok_strings_find(const tok_strings *s, const char *key, size_t len, uint32_t split);
void tok_strings_free(tok_strings *s);

struct tokenizer {
    int kind;
    char model_name[16];      /* tokenizer.ggml.model: llama, gpt2 or gemma4 */
    char pre_name[48];
    const tok_pre_entry *pre_entry;   /* BPE only */
    pcre2_code *rx[TOK_MAX_RX];       /* the row, compiled (NULL where rx_digits runs instead) */
    uint8_t rx_digits[TOK_MAX_RX];    /* DIGITS_*: a digit-grouping regex done in one pass */
    int n_rx;
    int32_t n_vocab;
    tok_strings vocab;        /* token texts; index = token id */
    float *score;             /* [n_vocab] */
    uint8_t *type;            /* [n_vocab] TOK_* */
    char *piece;              /* decoded bytes of every token, one arena */
    uint32_t *piece_off, *piece_len;
    size_t max_piece;
    tok_strings merges;       /* BPE: left+right bytes, split = left length; index = rank */
    bool ignore_merges;       /* BPE: a whole pre-token that is a token skips the merges (llama3) */
    bool raw_utf8;            /* BPE over UTF-8 with spaces as U+2581, bytes as <0xNN> (gemma4) */
    bool force_bos;           /* add_bos whatever tokenizer.ggml.add_bos_token says (gemma4) */
    bool clean_spaces;        /* detokenising drops the space before , . ? ! and some contractions */
    bool add_bos, add_eos, add_space_prefix;
    int32_t bos, eos, unk, pad;
    int32_t eog[TOKENIZER_MAX_EOG];
    int n_eog;
    int32_t byte_token[256];  /* SPM byte fallback: the <0xNN> token of each byte, -1 if none */
    int32_t *special;         /* tokens matched in the text, longest text first */
    int32_t n_special;
};

typedef struct {
    int32_t *v;
    size_t n, cap;
} tok_vec;

int tok_vec_push(tok_vec *v, int32_t id);   /* 0, or -1 when out of memory */

/* Max-heap of candidate merges: higher key first, then the leftmost. */
typedef struct {
    double key;
    int32_t left, right;
    uint32_t size;            /* bytes of the merged text, to detect stale entries */
} tok_bigram;

typedef struct {
    tok_bigram *b;
    size_t n, cap;
} tok_heap;

int tok_heap_push(tok_heap *h, tok_bigram b);  /* 0, or -1 when out of memory */
tok_bigram tok_heap_pop(tok_heap *h);          /* caller checks h->n > 0 */

/* One run of plain text (no special tokens inside) appended to out; 0 or -1 with a message. */
int tok_spm_encode(const tokenizer *t, const char *text, size_t len, tok_vec *out, char *err,
                   size_t err_size);
int tok_bpe_encode(const tokenizer *t, const char *text, size_t len, tok_vec *out, char *err,
                   size_t err_size);

/* Pieces of a text: byte offset and length. */
typedef struct {
    size_t off, len;
} tok_span;

typedef struct {
    tok_span *s;
    size_t n, cap;
} tok_spans;

/* The row of tokenizer.ggml.pre, NULL when llama.cpp has no such name. */
const tok_pre_entry *tok_pre_find(const char *name);
/* Names for an error line (one per row) written to out; returns the length it needs. */
size_t tok_pre_list(char *out, size_t cap);
size_t tok_pre_families(void);
/* Applies the entry's defaults (ignore_merges, add_bos, clean_spaces, raw UTF-8, BOS id). */
void tok_pre_settings(const tok_pre_entry *e, tokenizer *t);
/* Compiles t->pre_entry's regexes into t->rx; 0 or -1 with a message. */
int tok_pre_compile(tokenizer *t, char *err, size_t err_size);
void tok_pre_free(tokenizer *t);
/* Cuts valid UTF-8 text into pieces (*out, caller frees out->s); 0 or -1 with a message. */
int tok_pre_split(const tokenizer *t, const char *text, size_t len, tok_spans *out, char *err,
                  size_t err_size);

/* GPT-2's byte-level alphabet: byte -> UTF-8 of its printable stand-in (1 or 2 bytes), and the
 * inverse for decoding (-1 for code points outside the alphabet). */
size_t tok_bpe_byte_char(uint8_t byte, char out[2]);
int tok_bpe_char_byte(uint32_t cp);

#endif
