/* cpu_silu_mul (engine/cpu_act.h): the AVX-512 form where the path has it, else expf a value at
 * a time, as the exact path computes it. */
#include <math.h>
#include "engine/cpu_act.h"

void cpu_silu_mul(quant_isa isa, float *gate, const float *up, int64_t n) {
    if (isa >= QUANT_ISA_AVX512 && quant_isa_supported(isa)) {
        cpu_silu_mul_avx512(gate, up, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
