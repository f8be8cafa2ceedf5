/* The type-traits table: name, block size and block bytes of every GGUF tensor type id.
 * Conversion functions are filled in by the quant module; a NULL dequant means the type is
 * known (its size can be computed) but mgi cannot convert it. */
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

/* Ids ggml retired (4, 5, 31-33, 36-38) have no entry: no current file may use them. */
static const quant_traits traits[QUANT_TYPE_COUNT] = {
    [QUANT_F32] = {"F32", 1, 4, NULL, NULL},
    [QUANT_F16] = {"F16", 1, 2, NULL, NULL},
    [QUANT_Q4_0] = {"Q4_0", 32, 18, NULL, NULL},
    [QUANT_Q4_1] = {"Q4_1", 32, 20, NULL, NULL},
    [QUANT_Q5_0] = {"Q5_0", 32, 22, NULL, NULL},
    [QUANT_Q5_1] = {"Q5_1", 32, 24, NULL, NULL},
    [QUANT_Q8_0] = {"Q8_0", 32, 34, NULL, NULL},
    [QUANT_Q8_1] = {"Q8_1", 32, 36, NULL, NULL},
    [QUANT_Q2_K] = {"Q2_K", 256, 84, NULL, NULL},
    [QUANT_Q3_K] = {"Q3_K", 256, 110, NULL, NULL},
    [QUANT_Q4_K] = {"Q4_K", 256, 144, NULL, NULL},
    [QUANT_Q5_K] = {"Q5_K", 256, 176, NULL, NULL},
    [QUANT_Q6_K] = {"Q6_K", 256, 210, NULL, NULL},
    [QUANT_Q8_K] = {"Q8_K", 256, 292, NULL, NULL},
    [QUANT_IQ2_XXS] = {"IQ2_XXS", 256, 66, NULL, NULL},
    [QUANT_IQ2_XS] = {"IQ2_XS", 256, 74, NULL, NULL},
    [QUANT_IQ3_XXS] = {"IQ3_XXS", 256, 98, NULL, NULL},
    [QUANT_IQ1_S] = {"IQ1_S", 256, 50, NULL, NULL},
    [QUANT_IQ4_NL] = {"IQ4_NL", 32, 18, NULL, NULL},
    [QUANT_IQ3_S] = {"IQ3_S", 256, 110, NULL, NULL},
    [QUANT_IQ2_S] = {"IQ2_S", 256, 82, NULL, NULL},
    [QUANT_IQ4_XS] = {"IQ4_XS", 256, 136, NULL, NULL},
    [QUANT_I8] = {"I8", 1, 1, NULL, NULL},
    [QUANT_I16] = {"I16", 1, 2, NULL, NULL},
    [QUANT_I32] = {"I32", 1, 4, NULL, NULL},
    [QUANT_I64] = {"I64", 1, 8, NULL, NULL},
    [QUANT_F64] = {"F64", 1, 8, NULL, NULL},
    [QUANT_IQ1_M] = {"IQ1_M", 256, 56, NULL, NULL},
    [QUANT_BF16] = {"BF16", 1, 2, NULL, NULL},
    [QUANT_TQ1_0] = {"TQ1_0", 256, 54, NULL, NULL},
    [QUANT_TQ2_0] = {"TQ2_0", 256, 66, NULL, NULL},
    [QUANT_MXFP4] = {"MXFP4", 32, 17, NULL, NULL},
};

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

const char *quant_supported_list(void) {
    static char list[512];
    if (list[0] == '\0') {
        size_t len = 0;
        for (uint32_t i = 0; i < QUANT_TYPE_COUNT; i++) {
            if (!quant_is_supported(i)) continue;
            size_t n = strlen(traits[i].name);
            if (len + n + 3 > sizeof list) break;
            if (len) { memcpy(list + len, ", ", 2); len += 2; }
            memcpy(list + len, traits[i].name, n);
            len += n;
        }
        list[len] = '\0';
    }
    return list;
}

size_t quant_row_bytes(uint32_t type, int64_t n) {
    const quant_traits *t = quant_traits_of(type);
    if (!t || n < 0 || n % t->block_elems) return 0;
    uint64_t blocks = (uint64_t)(n / t->block_elems);
    if (blocks > SIZE_MAX / (uint64_t)t->block_bytes) return 0;
    return (size_t)(blocks * (uint64_t)t->block_bytes);
}
