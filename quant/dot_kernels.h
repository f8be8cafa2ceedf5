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

typedef struct {
    quant_dot_kern dot[QUANT_TYPE_COUNT];  /* by weight type id */
    quant_act_kern act[QUANT_ACT_COUNT];   /* by activation format */
} quant_dot_table;

extern const quant_dot_table quant_dot_table_ref;
extern const quant_dot_table quant_dot_table_avx2;
extern const quant_dot_table quant_dot_table_avx512;

#endif
