/* The AVX-512 VNNI path for CPUs other than Intel's (Zen 4/5): dot_simd.h's kernels with
 * vpdpbusd (u8 x s8 summed into int32 in one instruction, where AVX2 needs maddubs + madd) and
 * vpdpwssd for the scaled K sub-blocks; the K types' row kernels on 256-bit registers
 * (AVX512VL, EVEX-encoded), the 32-weight types' two blocks a step in 512 bits, the prompt's
 * panels 16 rows a 512-bit register, 8 tokens a pass. */
#include "dot_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
/* -O3, as dot_avx512w.c: at -O2 the row kernels' per-token loops stayed rolled, their
 * accumulators on the stack. Zen 5, 2 threads, mini q4_k_m decode (two activation rows a token,
 * paired): 107 -> 122-128 t/s. */
#pragma GCC optimize("O3")
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
/* clang ignores the GCC pragma: the same target for every function defined below, so the
 * path builds whatever the host (or -march) has */
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#endif

#define SIMD_DOT_U8S8(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (s))
#define SIMD_MADD16_ACC(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
#define SIMD_DPBUSD_ACC(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define SIMD_PANEL_T 8
#define SIMD_ROW_512 1
#define SIMD_PANEL_512 1
#define SIMD_PANEL_WIDE 1
#define SIMD_TABLE quant_dot_table_avx512
#include "dot_simd.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
#else
const quant_dot_table quant_dot_table_avx512 = {0};
#endif
