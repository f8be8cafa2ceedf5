/* Dispatch for quant/dot.h: which activation format each weight type pairs with, which path
 * the CPU runs (cpuid, once per call: __builtin_cpu_supports reads a table filled at start-up),
 * and the kernel of a (path, type), falling back to lower paths where a path has none. */
#include <stdio.h>
#include <string.h>
#include "dot_kernels.h"
#include "quant.h"

static const quant_dot_table *const tables[QUANT_ISA_COUNT] = {
    &quant_dot_table_ref, &quant_dot_table_avx2, &quant_dot_table_avxvnni, &quant_dot_table_avx512,
    &quant_dot_table_avx512w,
};

static const char *const isa_names[QUANT_ISA_COUNT] = {"ref", "avx2", "avxvnni", "avx512", "avx512w"};

/* clang-14's __builtin_cpu_supports knows neither "f16c" nor "avxvnni" (the fuzz build, compiled
 * with clang and -march=native, takes them from the target's macros instead). */
#ifdef __clang__
#ifdef __F16C__
#define CPU_F16C 1
#else
#define CPU_F16C 0
#endif
#ifdef __AVXVNNI__
#define CPU_AVXVNNI 1
#else
#define CPU_AVXVNNI 0
#endif
#else
#define CPU_F16C __builtin_cpu_supports("f16c")
#define CPU_AVXVNNI __builtin_cpu_supports("avxvnni")
#endif

int quant_isa_supported(quant_isa isa) {
    switch (isa) {
    case QUANT_ISA_REF: return 1;
#if defined(__x86_64__) || defined(__i386__)
    case QUANT_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CPU_F16C;
    case QUANT_ISA_AVXVNNI:
        return quant_isa_supported(QUANT_ISA_AVX2) && CPU_AVXVNNI;
    case QUANT_ISA_AVX512:
        return quant_isa_supported(QUANT_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512vnni");
    case QUANT_ISA_AVX512W:
        return quant_isa_supported(QUANT_ISA_AVX512) && __builtin_cpu_is("intel");
#endif
    default: return 0;
    }
}

quant_isa quant_isa_best(void) {
    for (int i = QUANT_ISA_COUNT - 1; i > 0; i--)
        if (quant_isa_supported((quant_isa)i)) return (quant_isa)i;
    return QUANT_ISA_REF;
}

const char *quant_isa_name(quant_isa isa) {
    return (unsigned)isa < QUANT_ISA_COUNT ? isa_names[isa] : "unknown";
}

/* The activation format of each weight type that has a dot product; -1 for the others. */
static int act_format(uint32_t wtype) {
    switch (wtype) {
    case QUANT_F32: case QUANT_F16: case QUANT_BF16: return QUANT_ACT_F32;
    case QUANT_Q4_0: case QUANT_Q4_1: case QUANT_Q5_0: case QUANT_Q5_1: case QUANT_Q8_0: return QUANT_ACT_Q8;
    case QUANT_Q2_K: case QUANT_Q3_K: case QUANT_Q4_K: case QUANT_Q5_K: case QUANT_Q6_K: return QUANT_ACT_Q8_K;
    default: return -1;
    }
}

int quant_dot_check(uint32_t wtype, int64_t n, char *err, size_t err_size) {
    const quant_traits *t = quant_traits_of(wtype);
    if (!t || act_format(wtype) < 0 || !quant_dot_table_ref.dot[wtype]) {
        if (err_size)
            snprintf(err, err_size, "no CPU dot product for tensor type %s (id %u); supported: %s",
                     quant_type_name(wtype), wtype, quant_supported_list());
        return -1;
    }
    if (n <= 0 || n % t->block_elems) {
        if (err_size)
            snprintf(err, err_size, "row of %lld elements is not a whole, non-empty number of %s blocks (%d elements each)",
                     (long long)n, t->name, (int)t->block_elems);
        return -1;
    }
    return 0;
}

quant_act quant_act_of(uint32_t wtype) {
    int a = act_format(wtype);
    return a < 0 ? QUANT_ACT_F32 : (quant_act)a;
}

size_t quant_act_row_bytes(uint32_t wtype, int64_t n) {
    if (n < 0) return 0;
    switch (act_format(wtype)) {
    case QUANT_ACT_F32: return (size_t)n * sizeof(float);
    case QUANT_ACT_Q8: return n % 32 ? 0 : (size_t)(n / 32) * sizeof(block_q8_a);
    case QUANT_ACT_Q8_K: return n % QK_K ? 0 : (size_t)(n / QK_K) * sizeof(block_q8_K);
    default: return 0;
    }
}

static quant_isa clamp_isa(quant_isa isa) {
    if ((unsigned)isa >= QUANT_ISA_COUNT) isa = QUANT_ISA_COUNT - 1;
    while (isa > QUANT_ISA_REF && !quant_isa_supported(isa)) isa--;
    return isa;
}

static quant_act_kern act_kernel(quant_isa isa, quant_act a) {
    quant_act_kern k = NULL;
    for (int i = clamp_isa(isa); i >= 0 && !k; i--) k = tables[i]->act[a];
    return k;
}

void quant_act_quant_row(quant_isa isa, uint32_t wtype, const float *x, void *xq, int64_t n) {
    act_kernel(isa, quant_act_of(wtype))(x, xq, n);
}

void quant_act_quant_row_pair(quant_isa isa, uint32_t wtype, const float *x, void *hi, void *lo, int64_t n) {
    quant_act a = quant_act_of(wtype);
    if (a == QUANT_ACT_F32) {
        memcpy(hi, x, (size_t)n * sizeof(float));
        memset(lo, 0, (size_t)n * sizeof(float));
        return;
    }
    /* block by block, so the residual needs only one block of scratch */
    enum { BLK = QK_K };
    quant_act_kern k = act_kernel(isa, a);
    int64_t blk = a == QUANT_ACT_Q8 ? 32 : QK_K;
    size_t bb = quant_act_row_bytes(wtype, blk);
    float r[BLK];
    for (int64_t i = 0; i < n; i += blk) {
        uint8_t *h = (uint8_t *)hi + (size_t)(i / blk) * bb, *l = (uint8_t *)lo + (size_t)(i / blk) * bb;
        k(x + i, h, blk);
        /* x - d * q, the operations of quant_act_dequant_row without its per-element block
         * arithmetic (it ran ~4x slower and took 3% of a small model's decode) */
        float d = a == QUANT_ACT_Q8 ? ((const block_q8_a *)h)->d : ((const block_q8_K *)h)->d;
        const int8_t *q = a == QUANT_ACT_Q8 ? ((const block_q8_a *)h)->qs : ((const block_q8_K *)h)->qs;
        for (int64_t j = 0; j < blk; j++) r[j] = x[i + j] - d * (float)q[j];
        k(r, l, blk);
    }
}

void quant_act_dequant_row(uint32_t wtype, const void *xq, float *x, int64_t n) {
    switch (quant_act_of(wtype)) {
    case QUANT_ACT_Q8: {
        const block_q8_a *b = xq;
        for (int64_t i = 0; i < n; i++) x[i] = b[i / 32].d * (float)b[i / 32].qs[i % 32];
        break;
    }
    case QUANT_ACT_Q8_K: {
        const block_q8_K *b = xq;
        for (int64_t i = 0; i < n; i++) x[i] = b[i / QK_K].d * (float)b[i / QK_K].qs[i % QK_K];
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++) x[i] = ((const float *)xq)[i];
    }
}

quant_dot_fn quant_dot_kernel(quant_isa isa, uint32_t wtype) {
    quant_dot_kern k = NULL;
    for (int i = clamp_isa(isa); i >= 0 && !k; i--) k = tables[i]->dot[wtype];
    return k;
}

quant_axpy_fn quant_axpy_kernel(quant_isa isa) {
    quant_axpy_fn k = NULL;
    for (int i = clamp_isa(isa); i >= 0 && !k; i--) k = tables[i]->axpy;
    return k;
}

void quant_dot_rows(quant_isa isa, uint32_t wtype, int64_t n, const void *w, size_t w_stride, int64_t n_rows,
                    const void *xq, size_t xq_stride, int64_t n_tok, float *out, size_t out_stride) {
    quant_dot_kern k = quant_dot_kernel(isa, wtype);
    const uint8_t *wb = w, *xb = xq;
    float tmp[QUANT_DOT_TOK];
    for (int64_t t0 = 0; t0 < n_tok; t0 += QUANT_DOT_TOK) {
        int nt = n_tok - t0 < QUANT_DOT_TOK ? (int)(n_tok - t0) : QUANT_DOT_TOK;
        for (int64_t r = 0; r < n_rows; r++) {
            k(n, wb + (size_t)r * w_stride, xb + (size_t)t0 * xq_stride, xq_stride, nt, tmp);
            for (int t = 0; t < nt; t++) out[(size_t)(t0 + t) * out_stride + (size_t)r] = tmp[t];
        }
    }
}
