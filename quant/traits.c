/* The traits table: every GGUF type id with its name, block geometry and CPU converters, and
 * the checks in front of them. The one place that dispatches on a type id. */
#include <stdio.h>
#include "quant.h"
#include "rows.h"

#define FULL(id, name, elems, bytes, t) [id] = { name, elems, bytes, quant_dequant_##t, quant_quant_##t }
#define KNOWN(id, name, elems, bytes) [id] = { name, elems, bytes, NULL, NULL }

/* Sizes follow ggml's block structs; the IQ, TQ, MXFP4 and integer types are listed so that
 * files holding them are described correctly and refused by name. */
static const quant_traits traits[QUANT_TYPE_COUNT] = {
    FULL(QUANT_F32, "F32", 1, 4, f32),
    FULL(QUANT_F16, "F16", 1, 2, f16),
    FULL(QUANT_Q4_0, "Q4_0", QK4_0, sizeof(block_q4_0), q4_0),
    FULL(QUANT_Q4_1, "Q4_1", QK4_1, sizeof(block_q4_1), q4_1),
    FULL(QUANT_Q5_0, "Q5_0", QK5_0, sizeof(block_q5_0), q5_0),
    FULL(QUANT_Q5_1, "Q5_1", QK5_1, sizeof(block_q5_1), q5_1),
    FULL(QUANT_Q8_0, "Q8_0", QK8_0, sizeof(block_q8_0), q8_0),
    KNOWN(QUANT_Q8_1, "Q8_1", QK8_1, sizeof(block_q8_1)),
    FULL(QUANT_Q2_K, "Q2_K", QK_K, sizeof(block_q2_K), q2_K),
    FULL(QUANT_Q3_K, "Q3_K", QK_K, sizeof(block_q3_K), q3_K),
    FULL(QUANT_Q4_K, "Q4_K", QK_K, sizeof(block_q4_K), q4_K),
    FULL(QUANT_Q5_K, "Q5_K", QK_K, sizeof(block_q5_K), q5_K),
    FULL(QUANT_Q6_K, "Q6_K", QK_K, sizeof(block_q6_K), q6_K),
    KNOWN(QUANT_Q8_K, "Q8_K", QK_K, sizeof(block_q8_K)),
    KNOWN(QUANT_IQ2_XXS, "IQ2_XXS", QK_K, 66),
    KNOWN(QUANT_IQ2_XS, "IQ2_XS", QK_K, 74),
    KNOWN(QUANT_IQ3_XXS, "IQ3_XXS", QK_K, 98),
    KNOWN(QUANT_IQ1_S, "IQ1_S", QK_K, 50),
    KNOWN(QUANT_IQ4_NL, "IQ4_NL", 32, 18),
    KNOWN(QUANT_IQ3_S, "IQ3_S", QK_K, 110),
    KNOWN(QUANT_IQ2_S, "IQ2_S", QK_K, 82),
    KNOWN(QUANT_IQ4_XS, "IQ4_XS", QK_K, 136),
    KNOWN(QUANT_I8, "I8", 1, 1),
    KNOWN(QUANT_I16, "I16", 1, 2),
    KNOWN(QUANT_I32, "I32", 1, 4),
    KNOWN(QUANT_I64, "I64", 1, 8),
    KNOWN(QUANT_F64, "F64", 1, 8),
    KNOWN(QUANT_IQ1_M, "IQ1_M", QK_K, 56),
    FULL(QUANT_BF16, "BF16", 1, 2, bf16),
    KNOWN(QUANT_TQ1_0, "TQ1_0", QK_K, 54),
    KNOWN(QUANT_TQ2_0, "TQ2_0", QK_K, 66),
    KNOWN(QUANT_MXFP4, "MXFP4", 32, 17),
};

/* Kept in table order; tests/unit/test_quant.c checks it against the table. */
static const char supported_list[] =
    "F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, BF16";

const quant_traits *quant_traits_of(uint32_t type) {
    if (type >= QUANT_TYPE_COUNT || traits[type].name == NULL) return NULL;
    return &traits[type];
}

const char *quant_type_name(uint32_t type) {
    const quant_traits *t = quant_traits_of(type);
    return t ? t->name : "unknown";
}

int quant_is_supported(uint32_t type) {
    const quant_traits *t = quant_traits_of(type);
    return t && t->dequant;
}

const char *quant_supported_list(void) { return supported_list; }

size_t quant_row_bytes(uint32_t type, int64_t n) {
    const quant_traits *t = quant_traits_of(type);
    if (!t || n < 0 || n % t->block_elems) return 0;
    uint64_t blocks = (uint64_t)(n / t->block_elems);
    if (blocks > SIZE_MAX / (uint64_t)t->block_bytes) return 0;
    return (size_t)(blocks * (uint64_t)t->block_bytes);
}

/* The traits of a type that can be converted in the given direction, or NULL with a message. */
static const quant_traits *checked(uint32_t type, int64_t n, int to_f32, char *err, size_t err_size) {
    const quant_traits *t = quant_traits_of(type);
    if (!t || (to_f32 ? t->dequant == NULL : t->quant == NULL)) {
        if (err_size)
            snprintf(err, err_size, "tensor type %s (id %u) is not supported for %s; supported: %s",
                     quant_type_name(type), type, to_f32 ? "dequantisation" : "quantisation",
                     supported_list);
        return NULL;
    }
    if (n < 0 || n % t->block_elems) {
        if (err_size)
            snprintf(err, err_size, "row of %lld elements is not a whole number of %s blocks (%d elements each)",
                     (long long)n, t->name, (int)t->block_elems);
        return NULL;
    }
    return t;
}

int quant_dequant_row(uint32_t type, const void *src, float *dst, int64_t n, char *err, size_t err_size) {
    const quant_traits *t = checked(type, n, 1, err, err_size);
    if (!t) return -1;
    t->dequant(src, dst, n);
    return 0;
}

int quant_quant_row(uint32_t type, const float *src, void *dst, int64_t n, char *err, size_t err_size) {
    const quant_traits *t = checked(type, n, 0, err, err_size);
    if (!t) return -1;
    t->quant(src, dst, n);
    return 0;
}
