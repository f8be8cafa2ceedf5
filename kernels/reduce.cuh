/* Warp and block reductions shared by the small kernels. */
#ifndef MGI_KERNELS_REDUCE_CUH
#define MGI_KERNELS_REDUCE_CUH

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over a block of at most 1024 threads; every thread gets the result. Uses 33 floats of
 * shared memory and two barriers. */
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float part[33];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < nw ? part[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) part[32] = s;
    }
    __syncthreads();
    return part[32];
}

/* block_sum in double (the CPU reference's sums of squares), 33 doubles of shared memory. */
__device__ __forceinline__ double block_sum_d(double v) {
    __shared__ double part_d[33];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) part_d[warp] = v;
    __syncthreads();
    if (warp == 0) {
        double s = lane < nw ? part_d[lane] : 0.0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) part_d[32] = s;
    }
    __syncthreads();
    return part_d[32];
}

#endif
