/* UTF-8 decoding and the few Unicode classes the BPE pre-tokenizers test (\p{L}, \p{N}, \s),
 * looked up in a generated range table (engine/unicode_tables.c). */
#ifndef MGI_UNICODE_H
#define MGI_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum { UNICODE_OTHER = 0, UNICODE_LETTER = 1, UNICODE_NUMBER = 2, UNICODE_SPACE = 3 };

/* Stands for a byte that does not start a well-formed UTF-8 sequence. */
#define UNICODE_INVALID 0xFFFFFFFFu

typedef struct { uint32_t first, last, cls; } unicode_range;
extern const unicode_range unicode_ranges[];   /* sorted, disjoint */
extern const size_t unicode_n_ranges;

/* Decodes one code point from s[0..len) (len >= 1) and returns the bytes it takes: 1 with
 * *cp = UNICODE_INVALID for a byte that starts no well-formed sequence (stray continuation,
 * truncated, overlong, surrogate, beyond U+10FFFF). */
size_t unicode_decode(const char *s, size_t len, uint32_t *cp);
/* UNICODE_LETTER / NUMBER / SPACE / OTHER; UNICODE_INVALID is OTHER. */
int unicode_class(uint32_t cp);
/* Writes cp (<= 0x10FFFF) as UTF-8 into out and returns its length (1..4). */
size_t unicode_encode(uint32_t cp, char out[4]);

#endif
