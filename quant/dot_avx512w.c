/* The AVX-512 VNNI path with 512-bit K row kernels (quant/dot.h's QUANT_ISA_AVX512W, taken on
 * Intel processors): dot_avx512.c's kernels, the Q4_K / Q5_K / Q6_K rows 64 weights a step in
 * 512 bits. Intel's server cores run two 512-bit integer products a cycle, so these do twice the
 * work of a 256-bit one per instruction; Zen 5 ran them slower, and keeps dot_avx512.c's. The
 * prompt's panels are dot_avx512.c's too (8 tokens a pass, so the staged pairs of
 * dot_simd_panelx.h): with 2 tokens a pass and no staging, prompts on a Sapphire Rapids class
 * Xeon ran 1.2-1.7x slower on every type (docs/PERF-LOG.md, 2026-12-05). Its K types' decode
 * kernels also ask L2 for the next block (dot_simd_ilv.h: ilv_prefetch_k). */
#include "dot_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
/* -O3: at -O2 GCC left the per-token loops of the row kernels rolled, their accumulators on the
 * stack (a load and store per block and token); fully unrolled they stay in registers: prompts
 * ran 20-30% and mini q4_k_m decode 12% faster on a Sapphire Rapids class VM. (Measured on this
 * path only; the other paths keep -O2.) */
/* Functions on 64-byte and loops on 32-byte boundaries: without, where a kernel's loops fell
 * depended on the code linked before it; adding the SIMD unpacking (dot_simd_pack.h, 3-5 KB a
 * path) to the objects linked before this one moved every kernel here (their starts by 16 bytes
 * modulo 64) and cost 1b q4_k_m decode 6-8% (30.5-31.0 -> 28.4-29.0 t/s, 3 rounds); aligned,
 * 30.6-31.3. */
#pragma GCC optimize("O3", "align-functions=64", "align-loops=32")
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
#define SIMD_K_512 1
#define SIMD_ILV_NEXT_L2 1
#define SIMD_PANEL_WIDE 1
#define SIMD_TABLE quant_dot_table_avx512w
#include "dot_simd.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
#else
const quant_dot_table quant_dot_table_avx512w = {0};
#endif
