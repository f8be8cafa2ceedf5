/* Exact conversions between f32 and the two 16-bit float formats GGUF stores (IEEE half and
 * bfloat16). f32 -> 16 bits rounds to nearest, ties to even, like the hardware does, so CPU and
 * GPU agree bit for bit; NaN stays NaN (quiet), overflow becomes inf. */
#include <string.h>
#include "quant.h"

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float quant_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {  /* zero or subnormal: mant * 2^-24, exact in f32 */
        float v = (float)mant * 0x1p-24f;
        return bits_f32(f32_bits(v) | sign);
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t quant_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00 | (uint16_t)((ax >> 13) & 0x3ff);  /* NaN, quiet */
    if (ax >= 0x477ff000u) return sign | 0x7c00;  /* >= 65520 (half-way above 65504): inf */
    uint32_t e = ax >> 23;
    if (e < 113) {  /* below 2^-14: a half subnormal (units of 2^-24) or zero */
        if (e < 102) return sign;  /* below 2^-25: rounds to zero (2^-25 itself is a tie to 0) */
        uint32_t mant = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;  /* value = mant * 2^(e - 150) = (mant >> shift) * 2^-24 */
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;  /* may carry into the smallest normal */
        return sign | (uint16_t)q;
    }
    uint32_t h = ((e - 112) << 10) | ((ax >> 13) & 0x3ff);
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;  /* a carry moves into the exponent */
    return sign | (uint16_t)h;
}

float quant_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t quant_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);  /* NaN, quiet */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);  /* overflow correctly gives inf */
}
