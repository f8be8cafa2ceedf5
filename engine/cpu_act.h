/* The fast CPU path's gated activation, gate[i] = silu(gate[i]) * up[i], vectorised where the
 * CPU has AVX-512 (engine/cpu_avx512.c: exp within ~2 ulp of expf); elsewhere the exact
 * path's scalar loop. Each value's arithmetic is the same wherever it sits in the array, so
 * results depend neither on how the work is split nor on the batch. */
#ifndef MGI_ENGINE_CPU_ACT_H
#define MGI_ENGINE_CPU_ACT_H

#include <stdint.h>
#include "quant/dot.h"

void cpu_silu_mul(quant_isa isa, float *gate, const float *up, int64_t n);
/* The AVX-512 form; only where quant_isa_supported(QUANT_ISA_AVX512) (x86). */
void cpu_silu_mul_avx512(float *gate, const float *up, int64_t n);

#endif
