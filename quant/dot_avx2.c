/* The AVX2 path (with FMA and F16C): dot_simd.h's kernels with maddubs + madd as the u8 x s8
 * product. Compiled for those extensions only inside this file, so the binary still runs on any
 * x86-64; dot.c calls in only when cpuid reports them. */
#include "dot_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#pragma GCC target("avx2,fma,f16c")
/* clang ignores the GCC pragma: the same target for every function defined below, so the
 * path builds whatever the host (or -march) has */
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#endif

#define SIMD_DOT_U8S8(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1))
#define SIMD_MADD16_ACC(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define SIMD_DPBUSD_ACC(acc, u, s) _mm256_add_epi32((acc), SIMD_DOT_U8S8((u), (s)))
#define SIMD_PANEL_T 2
#define SIMD_ROW_512 0
#define SIMD_PANEL_WIDE 0
#define SIMD_TABLE quant_dot_table_avx2
#include "dot_simd.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
#else
const quant_dot_table quant_dot_table_avx2 = {0};
#endif
