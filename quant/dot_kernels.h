/* The per-path kernel tables behind quant/dot.h (quant/ internal). A dot kernel takes a weight
 * row of n elements and nt (1..QUANT_DOT_TOK) activation rows x_stride bytes apart and writes
 * out[t]; an activation kernel quantises one row. A NULL entry means "use the next lower path". */
#ifndef MGI_QUANT_DOT_KERNELS_H
#define MGI_QUANT_DOT_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "dot.h"

typedef void (*quant_dot_kern)(int64_t n, const void *w, const void *x, size_t x_stride, int nt, float *out);
typedef void (*quant_act_kern)(const float *x, void *xq, int64_t n);

/* Panel kernels by panel kind: sub-blocks of 32 with block_q8_a activations, of 32 with
 * Q8_K, of 16 with Q8_K. wide: codes may exceed 63 (Q8_0's 0..255). */
typedef enum { QUANT_PANEL_32_Q8 = 0, QUANT_PANEL_32_Q8K = 1, QUANT_PANEL_16_Q8K = 2, QUANT_PANEL_KINDS } quant_panel_kind;
typedef void (*quant_panel_kern)(int64_t n, const void *panel, int nr, const void *x, size_t x_stride,
                                 int64_t n_tok, float *out, size_t out_stride);
/* A staged-pair panel kernel (quant/dot.h: quant_panel_dot_pair_x). */
typedef void (*quant_panel_x_kern)(int64_t n, const void *panel, int nr, const void *px, int n_tok, float *out,
                                   size_t out_stride);

typedef struct {
    quant_dot_kern dot[QUANT_TYPE_COUNT];  /* by weight type id */
    quant_panel_kern panel[QUANT_PANEL_KINDS];
    quant_panel_kern panel_pair[QUANT_PANEL_KINDS]; /* quant_panel_dot_pair's; NULL: the panel kernel per row */
    quant_panel_x_kern panel_pair_x[QUANT_PANEL_KINDS]; /* quant_panel_dot_pair_x's; NULL: none */
    quant_panel_kern ilv[QUANT_TYPE_COUNT]; /* interleaved groups (quant/dot.h), by weight type */
    quant_panel_kern ilv_pair[QUANT_TYPE_COUNT]; /* the same for activation pairs */
    /* quant_panel_pack_ilv's unpacking (any weight type); NULL: the next lower path's */
    void (*pack_ilv)(uint32_t wtype, int64_t n, const void *group, void *panel);
    int panel_wide;                        /* the panel kernels take codes up to 255 */
    void (*axpy)(float *y, float a, const float *x, int64_t n);
    quant_act_kern act[QUANT_ACT_COUNT];   /* by activation format */
} quant_dot_table;

extern const quant_dot_table quant_dot_table_ref;
extern const quant_dot_table quant_dot_table_avx2;
extern const quant_dot_table quant_dot_table_avxvnni;
extern const quant_dot_table quant_dot_table_avx512;
extern const quant_dot_table quant_dot_table_avx512w;

/* Panel layout (quant/dot_panel.c): codes[n / 4][16][4] u8, then scale[n_sub][16] and
 * bias[n_sub][16] f32, n_sub = n / sub-block length; weight = scale * code + bias. */
static inline const float *quant_panel_scale(const void *panel, int64_t n) {
    return (const float *)((const uint8_t *)panel + (size_t)n * QUANT_PANEL_ROWS);
}
/* The activation side of sub-block s (length L) of an activation row: its codes, scale dx and
 * dx * sum(codes). */
static inline const int8_t *quant_panel_act(quant_panel_kind k, const void *x, int64_t s, int L, float *dx, float *xs) {
    if (k == QUANT_PANEL_32_Q8) {
        const block_q8_a *a = (const block_q8_a *)x + s;
        *dx = a->d, *xs = a->s;
        return a->qs;
    }
    const block_q8_K *a = (const block_q8_K *)x + (s * L) / QK_K;
    int off = (int)((s * L) % QK_K), sum = a->bsums[off / 16];
    if (L == 32) sum += a->bsums[off / 16 + 1];
    *dx = a->d, *xs = a->d * (float)sum;
    return a->qs + off;
}

/* A staged group (quant/dot.h: quant_panel_x_pack) of rows of n: codes [n / 4][8 rows] int32
 * (4 bytes of a row), then each row's scale per activation block ([n / 32][8] for Q8, [n / 256][8]
 * for Q8_K), then each pair's sub-block sums (hi's plus lo's, each d * sum of codes, as
 * quant_panel_act gives them): [n / 32][4] for Q8; for Q8_K [n / 16][4] then [n / 32][4]. */
static inline const float *quant_panel_x_dx(const void *px, int64_t n) {
    return (const float *)((const uint8_t *)px + (size_t)n * 8);
}
static inline const float *quant_panel_x_sums(quant_panel_kind k, const void *px, int64_t n) {
    const float *dx = quant_panel_x_dx(px, n);
    if (k == QUANT_PANEL_32_Q8) return dx + n / 32 * 8;
    const float *s16 = dx + n / QK_K * 8;
    return k == QUANT_PANEL_16_Q8K ? s16 : s16 + n / 16 * 4;
}

/* The portable panel kernels (dot_panel.c), one per kind, for dot_ref.c's table. */
void quant_panel_ref_32_q8(int64_t n, const void *p, int nr, const void *x, size_t xs, int64_t nt, float *o, size_t os);
void quant_panel_ref_32_q8k(int64_t n, const void *p, int nr, const void *x, size_t xs, int64_t nt, float *o, size_t os);
void quant_panel_ref_16_q8k(int64_t n, const void *p, int nr, const void *x, size_t xs, int64_t nt, float *o, size_t os);
/* quant_panel_pack_ilv's portable form (dot_panel.c), for the same table. */
void quant_panel_pack_ilv_ref(uint32_t wtype, int64_t n, const void *group, void *panel);

#endif
