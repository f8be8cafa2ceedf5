/* Gate activations shared by the elementwise gate kernels and the matvec epilogues that fold a
 * gate in, so both paths round the same way. */
#ifndef MGI_KERNELS_ACT_CUH
#define MGI_KERNELS_ACT_CUH

/* GELU, tanh form (Gemma's gate: llama.cpp's and the CPU reference's formula); the polynomial
 * and tanh in double, so it stays within f32 rounding of the exact function. */
__device__ __forceinline__ float act_gelu_tanh(float x) {
    const double k = 0.7978845608028654; /* sqrt(2 / pi) */
    return (float)(0.5 * x * (1.0 + tanh(k * (x + 0.044715 * (double)x * x * x))));
}

#endif
