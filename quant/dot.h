/* Dot products of weight rows in their stored blocks with activation rows quantised per block:
 * the inner loop of the fast CPU backend. Each weight type pairs with one activation format
 * (8-bit codes per 32 for the 32-weight types, Q8_K for the K types, plain f32 for the float
 * types); weight codes are used unsigned and the offsets or mins come back through the stored
 * activation sums, so every path does integer products of u8 x s8. Paths: portable C (every
 * machine, the tests' yardstick), AVX2+FMA+F16C, AVX-VNNI (256-bit VNNI without AVX-512, as on
 * Intel's hybrid cores) and AVX-512 VNNI, picked from cpuid at run time; a path without a kernel
 * for a type falls back to the next lower one. */
#ifndef MGI_QUANT_DOT_H
#define MGI_QUANT_DOT_H

#include <stddef.h>
#include <stdint.h>
#include "blocks.h"

/* Instruction-set paths, lowest first. QUANT_ISA_AVXVNNI needs AVX2 + AVX-VNNI, QUANT_ISA_AVX512
 * AVX2 + AVX-512 F/BW/VL and VNNI. QUANT_ISA_AVX512W is QUANT_ISA_AVX512 tuned for Intel
 * processors, taken on those only: 512-bit row kernels for the K types (Sapphire Rapids class);
 * QUANT_ISA_AVX512 keeps the 256-bit row kernels of Zen 5. Both take 8 tokens a panel pass, with
 * the activation pairs staged. */
typedef enum {
    QUANT_ISA_REF = 0, QUANT_ISA_AVX2 = 1, QUANT_ISA_AVXVNNI = 2, QUANT_ISA_AVX512 = 3, QUANT_ISA_AVX512W = 4,
    QUANT_ISA_COUNT
} quant_isa;

/* Activation formats. */
typedef enum { QUANT_ACT_F32 = 0, QUANT_ACT_Q8 = 1, QUANT_ACT_Q8_K = 2, QUANT_ACT_COUNT } quant_act;

/* QUANT_ACT_Q8: 32 activations x ~= d * qs[j], codes in -127..127, s = d * sum(qs). An f32
 * scale (ggml's Q8_0 stores f16) spares activations a rounding of 2^-11 per block; s carries
 * the offset of Q4_0/Q5_0 and the min of Q4_1/Q5_1 (ggml's Q8_1 idea).
 *   d f32 | s f32 | qs[32] int8 */
typedef struct { float d; float s; int8_t qs[32]; } block_q8_a;
QUANT_STATIC_ASSERT(sizeof(block_q8_a) == 40, "block_q8_a size");

/* Most tokens one kernel call serves: weights unpacked once are reused this many times. */
#define QUANT_DOT_TOK 4

/* The best path this CPU runs; whether it runs a given one; its name ("avx2"). */
quant_isa quant_isa_best(void);
int quant_isa_supported(quant_isa isa);
const char *quant_isa_name(quant_isa isa);

/* 0 when rows of n elements of this weight type have a dot product, else -1 with a message
 * (unsupported type, listing the supported ones; n not a whole number of blocks). The functions
 * below trust a checked (type, n). */
int quant_dot_check(uint32_t wtype, int64_t n, char *err, size_t err_size);

/* The activation format of a weight type, and the bytes of an activation row of n elements. */
quant_act quant_act_of(uint32_t wtype);
size_t quant_act_row_bytes(uint32_t wtype, int64_t n);

/* Quantises an f32 activation row into the weight type's activation format (xq holds
 * quant_act_row_bytes(wtype, n) bytes). Every path gives the same bytes. */
void quant_act_quant_row(quant_isa isa, uint32_t wtype, const float *x, void *xq, int64_t n);
/* The same row as two quantised rows, hi and lo (each quant_act_row_bytes), hi as
 * quant_act_quant_row writes it and lo the rounding residual x - hi quantised again, so that
 * dot(w, hi) + dot(w, lo) carries ~16 bits of each activation where hi alone carries 8: per-block
 * 8-bit activations alone move a real model's logits by a mean KLD of ~4e-3 (as llama.cpp's own
 * Q8 activations do), the pair by ~1e-7 (SmolLM2, gemma3). Float formats: lo is all zeros. */
void quant_act_quant_row_pair(quant_isa isa, uint32_t wtype, const float *x, void *hi, void *lo, int64_t n);
/* The values a quantised activation row stands for (d * q), for tests and error budgets. */
void quant_act_dequant_row(uint32_t wtype, const void *xq, float *x, int64_t n);

/* out[t * out_stride + r] = dot(weight row r, activation row t) for r < n_rows, t < n_tok:
 * weight row r at w + r * w_stride, activation row t at xq + t * xq_stride (both in bytes).
 * Tokens go QUANT_DOT_TOK at a time through each row so a row is unpacked once per group; the
 * caller picks a block of rows that stays in L1/L2. isa above quant_isa_best() is lowered. */
void quant_dot_rows(quant_isa isa, uint32_t wtype, int64_t n, const void *w, size_t w_stride, int64_t n_rows,
                    const void *xq, size_t xq_stride, int64_t n_tok, float *out, size_t out_stride);

/* ---- kernels for inner loops ---------------------------------------------------------------
 * quant_dot_rows looks its kernel up on every call; loops that call it per position (attention
 * over a paged cache) take the kernel once instead. */
typedef void (*quant_dot_fn)(int64_t n, const void *w, const void *x, size_t x_stride, int nt, float *out);
typedef void (*quant_axpy_fn)(float *y, float a, const float *x, int64_t n);

/* The kernel quant_dot_rows uses for (isa, wtype): out[t] = dot(w, x + t * x_stride) for
 * t < nt, 1 <= nt <= QUANT_DOT_TOK. wtype must pass quant_dot_check. */
quant_dot_fn quant_dot_kernel(quant_isa isa, uint32_t wtype);
/* y[i] += a * x[i] for i < n, on the given path. */
quant_axpy_fn quant_axpy_kernel(quant_isa isa);

/* ---- panels: the prompt case --------------------------------------------------------------
 * With many tokens, QUANT_PANEL_ROWS weight rows are unpacked once into a panel (u8 codes
 * interleaved in groups of 4 per row, so one 32-byte integer product covers 4 weights of each
 * of 8 rows against 4 broadcast activation bytes; an f32 scale and bias per row and sub-block)
 * and every token runs against it: the per-block float work is shared by the panel's rows
 * instead of done per row. Types with 32-weight blocks and the K types; not the float types,
 * and Q8_0 (codes up to 255, which maddubs would saturate) only on the VNNI paths. */
#define QUANT_PANEL_ROWS 16

/* 1 when (isa, wtype) has the panel kernel; the portable path has it for every quantised type. */
int quant_panel_usable(quant_isa isa, uint32_t wtype);
/* Bytes of a panel of rows of n elements. */
size_t quant_panel_bytes(uint32_t wtype, int64_t n);
/* Unpacks nr (1..QUANT_PANEL_ROWS) rows at w, w_stride bytes apart, into panel. */
void quant_panel_pack(uint32_t wtype, int64_t n, const void *w, size_t w_stride, int nr, void *panel);
/* out[t * out_stride + r] = dot(panel row r, activation row t) for r < nr, t < n_tok. */
void quant_panel_dot(quant_isa isa, uint32_t wtype, int64_t n, const void *panel, int nr, const void *xq,
                     size_t xq_stride, int64_t n_tok, float *out, size_t out_stride);
/* The panel of one interleaved group (quant_ilv_pack's, QUANT_ILV_ROWS == QUANT_PANEL_ROWS rows):
 * the same bytes as quant_panel_pack of the group's rows (rows past the group's last real row
 * may hold -0 for 0), without going back to the stored rows; the same bytes on every path. */
void quant_panel_pack_ilv(quant_isa isa, uint32_t wtype, int64_t n, const void *group, void *panel);
/* The same for n_tok tokens whose activations are pairs (quant_act_quant_row_pair): rows 2t (hi)
 * and 2t + 1 (lo), xq_stride bytes apart; out[t * out_stride + r] = the sum of both rows'
 * products, in one pass where the path has a pair kernel (the AVX-512 ones). */
void quant_panel_dot_pair(quant_isa isa, uint32_t wtype, int64_t n, const void *panel, int nr, const void *xq,
                          size_t xq_stride, int64_t n_tok, float *out, size_t out_stride);
/* Staged pairs: QUANT_PANEL_XTOK tokens' pairs (8 activation rows) interleaved 4 bytes a row, so
 * the panel kernel reaches every row's bytes of a step from one pointer at fixed offsets, with
 * the float terms each sub-block needs (the rows' scales, the pairs' summed sub-block sums)
 * worked out once a product instead of once a panel (dot_kernels.h: quant_panel_x_dx). Staged
 * once after quantising, read by every panel: the same products as quant_panel_dot_pair, bit for
 * bit, with 8 activation streams and per-panel scalar work gone from the prompt's inner loop. */
#define QUANT_PANEL_XTOK 4
/* Bytes of one staged group of rows of n elements (0: wtype has none). */
size_t quant_panel_x_bytes(uint32_t wtype, int64_t n);
/* 1 when (isa, wtype) has the staged pair kernel. */
int quant_panel_x_usable(quant_isa isa, uint32_t wtype);
/* Stages n_tok (1..QUANT_PANEL_XTOK) tokens' pairs (rows 2t and 2t + 1 at xq, xq_stride bytes
 * apart, as quant_panel_dot_pair takes them) into px; the group's other tokens are zero. */
void quant_panel_x_pack(uint32_t wtype, int64_t n, const void *xq, size_t xq_stride, int n_tok, void *px);
/* out[t * out_stride + r] for r < nr, t < n_tok (1..QUANT_PANEL_XTOK): quant_panel_dot_pair's
 * products of the staged group px. Only where quant_panel_x_usable. */
void quant_panel_dot_pair_x(quant_isa isa, uint32_t wtype, int64_t n, const void *panel, int nr, const void *px,
                            int n_tok, float *out, size_t out_stride);

/* ---- interleaved rows: the decode case ------------------------------------------------------
 * A token or a few read each weight once, from memory, so the weights keep their 4- or 6-bit
 * codes; a row kernel then spends most of its time on one row's per-block float work (scale,
 * convert, add), done again for every row. Interleaved, QUANT_ILV_ROWS rows share it: a group
 * of 16 rows stores each block's codes 4 weights of a row at a time, row after row (one 64-byte
 * load holds 4 codes of each of 16 rows in each nibble, so one 512-bit integer product adds 4
 * terms to each of 16 rows' lanes), then the 16 rows' scales side by side (one f32 step serves
 * 16 rows). Repacked once at load (engine/forward_cpu_exec.c), in the bytes of the stored rows
 * (Q4_K: 2.8% more, Q5_K 2.3%, their packed 6-bit scales and mins widened to bytes). Every
 * quantised type on the AVX-512 paths; on AVX2 and AVX-VNNI the same groups in two 256-bit halves
 * of 8 rows (Q8_0 there only with AVX-VNNI: its codes need a true dpbusd). */
#define QUANT_ILV_ROWS 16
QUANT_STATIC_ASSERT(QUANT_ILV_ROWS == QUANT_PANEL_ROWS, "a group is one panel's rows");

/* 1 when (isa, wtype) has the interleaved kernel. */
int quant_ilv_usable(quant_isa isa, uint32_t wtype);
/* Bytes of one group of QUANT_ILV_ROWS rows of n elements (0: no interleaved form). */
size_t quant_ilv_group_bytes(uint32_t wtype, int64_t n);
/* Repacks nr (1..QUANT_ILV_ROWS) rows at w, w_stride bytes apart, into one group; rows past nr
 * are zero (all-zero weights). */
void quant_ilv_pack(uint32_t wtype, int64_t n, const void *w, size_t w_stride, int nr, void *group);
/* out[t * out_stride + r] = dot(group row r, activation row t) for r < nr, t < n_tok. */
void quant_ilv_dot(quant_isa isa, uint32_t wtype, int64_t n, const void *group, int nr, const void *xq,
                   size_t xq_stride, int64_t n_tok, float *out, size_t out_stride);
/* The same for n_tok tokens whose activations are pairs (rows 2t and 2t + 1, as
 * quant_panel_dot_pair): out row t = the sum of both rows' products, in one pass. */
void quant_ilv_dot_pair(quant_isa isa, uint32_t wtype, int64_t n, const void *group, int nr, const void *xq,
                        size_t xq_stride, int64_t n_tok, float *out, size_t out_stride);

#endif
