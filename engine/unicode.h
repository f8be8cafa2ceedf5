/* UTF-8 decoding and encoding for the tokenizer. Unicode classes are PCRE2's (the pre-tokenizer
 * regexes, engine/tokenizer_pre.c); mgi keeps no Unicode tables of its own. */
#ifndef MGI_UNICODE_H
#define MGI_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Stands for a byte that does not start a well-formed UTF-8 sequence. */
#define UNICODE_INVALID 0xFFFFFFFFu

/* Decodes one code point from s[0..len) (len >= 1) and returns the bytes it takes: 1 with
 * *cp = UNICODE_INVALID for a byte that starts no well-formed sequence (stray continuation,
 * truncated, overlong, surrogate, beyond U+10FFFF). */
size_t unicode_decode(const char *s, size_t len, uint32_t *cp);
/* Writes cp (<= 0x10FFFF) as UTF-8 into out and returns its length (1..4). */
size_t unicode_encode(uint32_t cp, char out[4]);

#endif
