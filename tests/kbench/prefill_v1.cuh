/* Kernel lab: prompt attention v1 (paged.h's paged_attention_prefill, the first tensor-core
 * kernel; v2 and v3 replaced it: PERF-LOG run 31, 8b q4_k_m pp512 @ d16384 6233 t/s against v3's
 * 14029), timed and checked against the CPU reference by tests/kbench/prefill.cu. */
#ifndef MGI_KBENCH_PREFILL_V1_CUH
#define MGI_KBENCH_PREFILL_V1_CUH

#include <math.h>
#include "kernels/paged.h"
#include "kernels/prefill.cuh"

/* ---- v1 -------------------------------------------------------------------------------------
 * A block of PF_WARPS warps takes 16 rows per warp and walks the keys in tiles of PF_KT
 * positions: K and V tiles go to shared memory once for all the block's rows (rows padded by 8
 * halves: conflict-free fragment loads); each quad of lanes shares its two rows' maxima, and the
 * row sums are reduced once at the end. */
#define PF_WARPS 4
#define PF_KT 64

template <int D>
__global__ void __launch_bounds__(PF_WARPS * 32) paged_attn_prefill_kernel(float *out, const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *pages, int pos0, int n_tok, int n_head,
        int n_kv_head, float scale) {
    constexpr int DS = D + 8;
    __shared__ __align__(16) __half ks[PF_KT * DS];
    __shared__ __align__(16) __half vs[PF_KT * DS];
    const int kvh = blockIdx.y, G = n_head / n_kv_head, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int rows = n_tok * G, row0 = blockIdx.x * PF_WARPS * 16 + warp * 16;
    const int ra = row0 + g, rb = ra + 8;
    const int lim_a = pos0 + ra / G, lim_b = pos0 + rb / G;  /* last key each row may see */
    const int last_row = min(rows, (int)(blockIdx.x + 1) * PF_WARPS * 16) - 1;
    const int kv_end = pos0 + last_row / G + 1;              /* keys the block reads: [0, kv_end) */
    const int warp_lim = pos0 + min(row0 + 15, rows - 1) / G;
    const int64_t kv_dim = (int64_t)n_kv_head * D;
    /* Q of the warp's rows as A fragments, scaled, in f16 (zeros past the last row) */
    uint32_t qf[D / 16][4];
    auto qpair = [&](int row, int d) -> uint32_t {
        if (row >= rows) return 0u;
        const float2 v = *(const float2 *)(q + ((int64_t)(row / G) * n_head + kvh * G + row % G) * D + d);
        return pf_pack(v.x * scale, v.y * scale);
    };
#pragma unroll
    for (int s = 0; s < D / 16; s++) {
        qf[s][0] = qpair(ra, 16 * s + 2 * t);
        qf[s][1] = qpair(rb, 16 * s + 2 * t);
        qf[s][2] = qpair(ra, 16 * s + 2 * t + 8);
        qf[s][3] = qpair(rb, 16 * s + 2 * t + 8);
    }
    float o[D / 8][4];
#pragma unroll
    for (int j = 0; j < D / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
    for (int p0 = 0; p0 < kv_end; p0 += PF_KT) {
        __syncthreads();
        for (int i = threadIdx.x; i < PF_KT * D / 8; i += blockDim.x) {
            const int r = i / (D / 8), c = i % (D / 8), p = p0 + r;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (p < kv_end) {
                const int64_t cell = (int64_t)pages[p / PAGED_PAGE] * PAGED_PAGE + p % PAGED_PAGE;
                kv = __ldg((const uint4 *)(kc + cell * kv_dim + (int64_t)kvh * D) + c);
                vv = __ldg((const uint4 *)(vc + cell * kv_dim + (int64_t)kvh * D) + c);
            }
            *(uint4 *)&ks[r * DS + 8 * c] = kv;
            *(uint4 *)&vs[r * DS + 8 * c] = vv;
        }
        __syncthreads();
        if (row0 >= rows || p0 > warp_lim) continue; /* nothing of this tile for the warp's rows */
        float s[PF_KT / 8][4];
#pragma unroll
        for (int n = 0; n < PF_KT / 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
            for (int k = 0; k < D / 16; k++) {
                const __half *kr = ks + (8 * n + g) * DS + 16 * k + 2 * t;
                pf_mma(s[n], qf[k], *(const uint32_t *)kr, *(const uint32_t *)(kr + 8));
            }
        }
        float mx_a = m_a, mx_b = m_b;
#pragma unroll
        for (int n = 0; n < PF_KT / 8; n++) {
            const int p = p0 + 8 * n + 2 * t;
            if (p > lim_a) s[n][0] = -INFINITY;
            if (p + 1 > lim_a) s[n][1] = -INFINITY;
            if (p > lim_b) s[n][2] = -INFINITY;
            if (p + 1 > lim_b) s[n][3] = -INFINITY;
            mx_a = fmaxf(mx_a, fmaxf(s[n][0], s[n][1]));
            mx_b = fmaxf(mx_b, fmaxf(s[n][2], s[n][3]));
        }
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
        /* a row with no key yet keeps everything at zero (no -inf - -inf) */
        const float sa = mx_a == -INFINITY ? 0.0f : mx_a, sb = mx_b == -INFINITY ? 0.0f : mx_b;
        const float ca = __expf(m_a - sa), cb = __expf(m_b - sb);
        m_a = mx_a;
        m_b = mx_b;
        float rs_a = 0.0f, rs_b = 0.0f;
#pragma unroll
        for (int n = 0; n < PF_KT / 8; n++) {
            s[n][0] = __expf(s[n][0] - sa);
            s[n][1] = __expf(s[n][1] - sa);
            s[n][2] = __expf(s[n][2] - sb);
            s[n][3] = __expf(s[n][3] - sb);
            rs_a += s[n][0] + s[n][1];
            rs_b += s[n][2] + s[n][3];
        }
        l_a = l_a * ca + rs_a;
        l_b = l_b * cb + rs_b;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            o[j][0] *= ca;
            o[j][1] *= ca;
            o[j][2] *= cb;
            o[j][3] *= cb;
        }
#pragma unroll
        for (int kk = 0; kk < PF_KT / 16; kk++) {
            const uint32_t a[4] = {pf_pack(s[2 * kk][0], s[2 * kk][1]), pf_pack(s[2 * kk][2], s[2 * kk][3]),
                                   pf_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pf_pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            const unsigned short *vr = (const unsigned short *)vs + (16 * kk + 2 * t) * DS + g;
#pragma unroll
            for (int j = 0; j < D / 8; j++) {
                const uint32_t b0 = (uint32_t)vr[8 * j] | (uint32_t)vr[8 * j + DS] << 16;
                const uint32_t b1 = (uint32_t)vr[8 * j + 8 * DS] | (uint32_t)vr[8 * j + 9 * DS] << 16;
                pf_mma(o[j], a, b0, b1);
            }
        }
    }
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
    const float ia = l_a > 0.0f ? 1.0f / l_a : 0.0f, ib = l_b > 0.0f ? 1.0f / l_b : 0.0f;
    float *oa = out + ((int64_t)(ra / G) * n_head + kvh * G + ra % G) * D + 2 * t;
    float *ob = out + ((int64_t)(rb / G) * n_head + kvh * G + rb % G) * D + 2 * t;
#pragma unroll
    for (int j = 0; j < D / 8; j++) {
        if (ra < rows) *(float2 *)(oa + 8 * j) = make_float2(o[j][0] * ia, o[j][1] * ia);
        if (rb < rows) *(float2 *)(ob + 8 * j) = make_float2(o[j][2] * ib, o[j][3] * ib);
    }
}

template <int D>
static cudaError_t pf1_launch(float *out, const float *q, const uint16_t *kc, const uint16_t *vc,
                              const int32_t *pages, int pos0, int n_tok, int n_head, int n_kv_head, float scale,
                              cudaStream_t stream) {
    const int rows = n_tok * (n_head / n_kv_head);
    dim3 grid((unsigned)((rows + PF_WARPS * 16 - 1) / (PF_WARPS * 16)), (unsigned)n_kv_head);
    paged_attn_prefill_kernel<D><<<grid, PF_WARPS * 32, 0, stream>>>(out, q, kc, vc, pages, pos0, n_tok, n_head,
                                                                      n_kv_head, scale);
    return cudaGetLastError();
}

#endif
