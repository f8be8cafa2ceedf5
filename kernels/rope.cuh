/* RoPE's rotation of one pair, llama's adjacent-pair layout: (x0, x1) are elements j2 and j2 + 1
 * of a head at position pos, rotated by pos * theta^(-j2 / n_rot) (powf in f32, like the CPU
 * path); pairs at or past n_rot stay as they are. One definition for every kernel that rotates
 * (rope, paged_rope_store, the QKV matvec's epilogue in matvec.cuh), so that they agree bit for
 * bit. */
#ifndef MGI_KERNELS_ROPE_CUH
#define MGI_KERNELS_ROPE_CUH

__device__ __forceinline__ void rope_pair(float &x0, float &x1, int pos, int j2, int n_rot, float theta) {
    if (j2 >= n_rot) return;
    float s, c;
    sincosf((float)pos * powf(theta, -(float)j2 / (float)n_rot), &s, &c);
    const float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
    x0 = y0;
    x1 = y1;
}

#endif
