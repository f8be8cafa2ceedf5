/* The fast CPU matrix product: out[t][r] = dot(weight row r, x[t]) with the weight in its stored
 * blocks and the activations quantised once per product into the format the weight type pairs
 * with (quant/dot.h), shared by the threads of a persistent pool (engine/threadpool.h). Decode
 * (a few tokens) splits rows across threads; a prompt splits panels of 16 rows (x blocks
 * of 256 tokens): each thread unpacks 16 rows once and runs every token against them. */
#ifndef MGI_ENGINE_CPU_MATMUL_H
#define MGI_ENGINE_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>
#include "engine/threadpool.h"
#include "quant/dot.h"

/* A weight matrix as stored: n_rows rows of n_cols elements of `type`, row r at
 * data + r * row_bytes. Described by raw fields so any loader's tensors fit. ilv, when not NULL:
 * the same rows repacked (cpu_matmul_repack) in groups of QUANT_ILV_ROWS, which products of
 * few tokens read instead of data. */
typedef struct {
    uint32_t type;
    int64_t n_cols, n_rows;  /* [n_rows][n_cols] */
    size_t row_bytes;        /* >= quant_row_bytes(type, n_cols) */
    const void *data;
    const void *ilv;         /* [ceil(n_rows / 16)] groups of quant_ilv_group_bytes, or NULL */
} cpu_weight;

/* Per-caller state: the pool (NULL: the caller alone), the instruction-set path, the
 * quantised-activation buffer and the threads' panel buffers, grown on demand and reused across
 * products. */
typedef struct {
    threadpool *pool;
    quant_isa isa;
    /* 1 (cpu_matmul_init's choice): each activation row goes in as a pair of 8-bit rows, the
     * row and its rounding residual (quant_act_quant_row_pair), the pair's products summed: twice
     * the integer work for ~16-bit activations, which keeps a real model's logits within a mean
     * KLD of ~1e-7 of the exact path's; 8-bit activations alone stay ~4e-3 away, as llama.cpp's
     * do. 0: one 8-bit row (for comparisons). */
    int act_pair;
    void *act;
    size_t act_cap;
    void *actx;         /* staged pairs for the panel kernels (quant/dot.h: quant_panel_x_pack) */
    size_t actx_cap;
    void *panels;       /* one panel per thread, panel_bytes apart */
    size_t panels_cap;
    float *pair_out;    /* act_pair: the products of both rows of each pair, summed into out */
    size_t pair_out_cap;
} cpu_matmul_ctx;

/* Prompts of at least this many tokens use the panel kernels (quant/dot.h) where the type has
 * them, Q5_0 and Q5_1 from CPU_MATMUL_PANEL_MIN_TOK_Q5: unpacking a panel costs 0.13-0.25 ns a
 * weight (Q5: 0.6-0.7), so panels win once enough tokens share it. Crossovers measured on one
 * Zen 5 core (thread CPU time, 1024 x 2048): Q8_0 ~6 tokens, Q4_0 ~8, Q4_K ~12, Q6_K ~13,
 * Q5_0 ~40. At 128 tokens panels run 1.7x (Q6_K) to 3.3x (Q4_0) the row kernels. */
#define CPU_MATMUL_PANEL_MIN_TOK 16
#define CPU_MATMUL_PANEL_MIN_TOK_Q5 48

/* Bytes of w's interleaved form on path isa (quant/dot.h), 0 where it has none; and the repacking
 * of groups [g0, g1) of it into dst (the whole form's buffer), so that threads may share it. */
size_t cpu_matmul_repack_bytes(const cpu_weight *w, quant_isa isa);
void cpu_matmul_repack(const cpu_weight *w, int64_t g0, int64_t g1, void *dst);

/* isa: quant_isa_best() for real work; lower paths for tests and comparisons. */
void cpu_matmul_init(cpu_matmul_ctx *c, threadpool *pool, quant_isa isa);
void cpu_matmul_free(cpu_matmul_ctx *c);

/* 0 when the weight can be multiplied (type with a dot product, whole blocks, sane sizes and
 * pointer), else -1 with a message naming the problem. Check once when weights are bound. */
int cpu_matmul_check(const cpu_weight *w, char *err, size_t err_size);

/* out[t * n_rows + r] = sum_c W[r][c] x[t * n_cols + c] for t < n_tok: x is [n_tok][n_cols] f32,
 * out [n_tok][n_rows] f32 (not overlapping x). 0, or -1 with a message (bad weight, out of
 * memory for the activation buffer). */
int cpu_matmul(cpu_matmul_ctx *c, const cpu_weight *w, const float *x, int64_t n_tok, float *out, char *err,
               size_t err_size);

/* Several products of one input (Q, K and V; gate and up) as one: the activations quantised once
 * and every weight's items in one pool job, so a decode step waits for the pool fewer times.
 * out[k] = W_k x as cpu_matmul gives it, bit for bit; the weights must share width and
 * activation format (quant_act_of: Q4_K beside Q6_K, Q4_0 beside Q8_0), else -1 with a message.
 * At most CPU_MATMUL_MAX_MULTI weights. */
#define CPU_MATMUL_MAX_MULTI 4
int cpu_matmul_multi(cpu_matmul_ctx *c, const cpu_weight *const *w, int n_w, const float *x, int64_t n_tok,
                     float *const *out, char *err, size_t err_size);

#endif
