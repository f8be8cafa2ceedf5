/* Tensor element types: the traits table (name, block size, bytes) and CPU conversion of rows
 * to and from f32. This is the one place that dispatches on a type id; everything else asks
 * here. Block layouts are in blocks.h (shared with CUDA). */
#ifndef MGI_QUANT_H
#define MGI_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include "blocks.h"

typedef void (*quant_dequant_fn)(const void *src, float *dst, int64_t n);
typedef void (*quant_quant_fn)(const float *src, void *dst, int64_t n);

typedef struct {
    const char *name;          /* "Q4_K", as llama.cpp prints it */
    int32_t block_elems;       /* weights per block (1 for plain floats) */
    int32_t block_bytes;       /* bytes per block */
    quant_dequant_fn dequant;  /* NULL: type known by name but not supported by mgi */
    quant_quant_fn quant;      /* NULL: no CPU quantiser */
} quant_traits;

/* Traits of a type id; NULL for an id no GGUF type has ever used. */
const quant_traits *quant_traits_of(uint32_t type);
/* Name of a type id ("Q4_K"), or "unknown" for an id with no traits. */
const char *quant_type_name(uint32_t type);
/* 1 when mgi can dequantise this type. */
int quant_is_supported(uint32_t type);
/* Comma-separated names of the supported types, for error messages. */
const char *quant_supported_list(void);
/* Bytes of a row of n elements; 0 when the type is unknown or n is not a whole number of
 * blocks (callers must check n % block_elems first for a clear message). */
size_t quant_row_bytes(uint32_t type, int64_t n);

/* Row conversion; n must be a multiple of the block size. Return 0, or -1 with a message in
 * err (unsupported type, n not a multiple of the block). */
int quant_dequant_row(uint32_t type, const void *src, float *dst, int64_t n, char *err, size_t err_size);
int quant_quant_row(uint32_t type, const float *src, void *dst, int64_t n, char *err, size_t err_size);

/* Half-precision helpers (exact conversions; f32 -> f16 and bf16 round to nearest even). */
float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);
float quant_bf16_to_f32(uint16_t h);
uint16_t quant_f32_to_bf16(float f);

#endif
