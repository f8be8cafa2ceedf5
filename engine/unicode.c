/* UTF-8 decoding (strict: each malformed byte stands alone) and encoding. */
#include "engine/unicode.h"

size_t unicode_decode(const char *s, size_t len, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    size_t n;
    uint32_t v, min;
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) { n = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; v = c & 0x07; min = 0x10000; }
    else { *cp = UNICODE_INVALID; return 1; }
    if (len < n) { *cp = UNICODE_INVALID; return 1; }
    for (size_t i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80) { *cp = UNICODE_INVALID; return 1; }
        v = (v << 6) | (u[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = UNICODE_INVALID; return 1; }
    *cp = v;
    return n;
}

size_t unicode_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
