/* The AVX-VNNI path: dot_simd.h's kernels with the VEX-encoded vpdpbusd / vpdpwssd, for CPUs
 * that have 256-bit VNNI but no AVX-512 (Intel's hybrid cores since Alder Lake, AMD's Zen 5
 * client parts); the panel kernel runs two 256-bit halves of 16 rows. */
#include "dot_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#pragma GCC target("avx2,fma,f16c,avxvnni")
/* clang ignores the GCC pragma: the same target for every function defined below, so the
 * path builds whatever the host (or -march) has */
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#endif

#define SIMD_DOT_U8S8(u, s) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), (u), (s))
#define SIMD_MADD16_ACC(acc, a, b) _mm256_dpwssd_avx_epi32((acc), (a), (b))
#define SIMD_DPBUSD_ACC(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#define SIMD_PANEL_T 2
#define SIMD_ROW_512 0
#define SIMD_PANEL_WIDE 1
#define SIMD_TABLE quant_dot_table_avxvnni
#include "dot_simd.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
#else
const quant_dot_table quant_dot_table_avxvnni = {0};
#endif
