/* Kernel lab: decode attention over a contiguous f16 KV cache per sequence (k_cache / v_cache
 * [n_seq][n_kv_head][max_ctx][head_dim]), the engine's first decode attention, which the paged
 * kernels (kernels/paged.h) replaced; timed and checked against an f64 softmax by
 * tests/kbench/attention.cu. Split-KV (flash-decoding): block (split, kv head, sequence) runs an
 * online softmax over ATTN_SPLIT positions for all the query heads sharing that kv head (K and V
 * read once per group), its 4 warps taking interleaved positions; a combine pass merges the
 * splits. Splits past a sequence's length exit at once, so the grid depends only on max_ctx.
 * Variant 1 (lanes over head_dim, a warp reduction per position and head) handles any head_dim
 * <= 256; variant 2 (lanes over positions) needs head_dim % 8 == 0. */
#ifndef MGI_KBENCH_ATTENTION_LAB_CUH
#define MGI_KBENCH_ATTENTION_LAB_CUH

#include <math.h>
#include <stdint.h>
#include <cuda_fp16.h>
#include "kernels/kernels.h"
#include "kernels/reduce.cuh"

#define ATTN_SPLIT 128 /* positions a block */

#define ATTN_WARPS 4
#define ATTN_MAX_G 8 /* query heads per kv head */
#define ATTN_PU 4    /* positions in flight per warp */

static inline int attn_splits(int max_ctx) { return (max_ctx + ATTN_SPLIT - 1) / ATTN_SPLIT; }

/* EPL values of head_dim per lane, contiguous (lane * EPL + i). */
template <int EPL>
__device__ __forceinline__ void attn_load(float out[EPL], const uint16_t *row, int lane, int head_dim) {
    int e0 = lane * EPL;
    if (e0 + EPL <= head_dim) {
        if constexpr (EPL == 1) {
            out[0] = __half2float(__ushort_as_half(row[e0]));
        } else {
            uint32_t r[EPL / 2];
            if constexpr (EPL == 2) r[0] = *(const uint32_t *)(row + e0);
            if constexpr (EPL == 4) { uint2 t = *(const uint2 *)(row + e0); r[0] = t.x; r[1] = t.y; }
            if constexpr (EPL == 8) { uint4 t = *(const uint4 *)(row + e0); r[0] = t.x; r[1] = t.y; r[2] = t.z; r[3] = t.w; }
#pragma unroll
            for (int i = 0; i < EPL / 2; i++) {
                float2 f = __half22float2(*(const __half2 *)&r[i]);
                out[2 * i] = f.x;
                out[2 * i + 1] = f.y;
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < EPL; i++) out[i] = e0 + i < head_dim ? __half2float(__ushort_as_half(row[e0 + i])) : 0.0f;
    }
}

/* Partial results per (seq, head, split): m, l, then o[head_dim] (unnormalised). */
template <int EPL>
__global__ void __launch_bounds__(ATTN_WARPS * 32) attn_split_kernel(float *scratch, const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *len, int n_head, int n_kv_head, int head_dim,
        int max_ctx, float scale) {
    const int split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z, n_split = gridDim.x;
    const int G = n_head / n_kv_head, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int L = min(len[seq], max_ctx), p0 = split * ATTN_SPLIT, p1 = min(L, p0 + ATTN_SPLIT);
    const int64_t hd = head_dim;
    float *ms = scratch, *ls = scratch + (int64_t)gridDim.z * n_head * n_split;
    float *os = ls + (int64_t)gridDim.z * n_head * n_split;
    auto part = [&](int h) { return ((int64_t)seq * n_head + kvh * G + h) * n_split + split; };
    if (p0 >= p1) {
        if (threadIdx.x < G) { ms[part(threadIdx.x)] = -INFINITY; ls[part(threadIdx.x)] = 0; }
        return;
    }
    float qr[ATTN_MAX_G][EPL], m[ATTN_MAX_G], l[ATTN_MAX_G], o[ATTN_MAX_G][EPL];
#pragma unroll
    for (int h = 0; h < ATTN_MAX_G; h++) {
        m[h] = -INFINITY;
        l[h] = 0;
#pragma unroll
        for (int i = 0; i < EPL; i++) {
            int e = lane * EPL + i;
            qr[h][i] = (h < G && e < head_dim) ? q[((int64_t)seq * n_head + kvh * G + h) * hd + e] * scale : 0.0f;
            o[h][i] = 0;
        }
    }
    const uint16_t *kb = kc + ((int64_t)seq * n_kv_head + kvh) * max_ctx * hd;
    const uint16_t *vb = vc + ((int64_t)seq * n_kv_head + kvh) * max_ctx * hd;
    for (int p = p0 + warp; p < p1; p += ATTN_WARPS * ATTN_PU) {
        float kr[ATTN_PU][EPL], vr[ATTN_PU][EPL];
#pragma unroll
        for (int u = 0; u < ATTN_PU; u++) {
            int pp = p + u * ATTN_WARPS;
            if (pp < p1) {
                attn_load<EPL>(kr[u], kb + pp * hd, lane, head_dim);
                attn_load<EPL>(vr[u], vb + pp * hd, lane, head_dim);
            }
        }
#pragma unroll
        for (int u = 0; u < ATTN_PU; u++) {
            if (p + u * ATTN_WARPS >= p1) break;
#pragma unroll
            for (int h = 0; h < ATTN_MAX_G; h++) {
                if (h >= G) break;
                float s = 0;
#pragma unroll
                for (int i = 0; i < EPL; i++) s = fmaf(qr[h][i], kr[u][i], s);
                s = warp_sum(s);
                float mn = fmaxf(m[h], s), corr = __expf(m[h] - mn), pe = __expf(s - mn);
                l[h] = l[h] * corr + pe;
#pragma unroll
                for (int i = 0; i < EPL; i++) o[h][i] = fmaf(o[h][i], corr, pe * vr[u][i]);
                m[h] = mn;
            }
        }
    }
    /* Merge the warps: each writes (m, l, o) per head, then thread e folds them. */
    __shared__ float wm[ATTN_WARPS][ATTN_MAX_G], wl[ATTN_WARPS][ATTN_MAX_G];
    __shared__ float wo[ATTN_WARPS][ATTN_MAX_G][256];
#pragma unroll
    for (int h = 0; h < ATTN_MAX_G; h++) {
        if (h >= G) break;
        if (lane == 0) { wm[warp][h] = m[h]; wl[warp][h] = l[h]; }
#pragma unroll
        for (int i = 0; i < EPL; i++)
            if (lane * EPL + i < head_dim) wo[warp][h][lane * EPL + i] = o[h][i];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < G * head_dim; idx += blockDim.x) {
        int h = idx / head_dim, e = idx % head_dim;
        float M = -INFINITY;
        for (int w = 0; w < ATTN_WARPS; w++) M = fmaxf(M, wm[w][h]);
        float Ls = 0, Os = 0;
        for (int w = 0; w < ATTN_WARPS; w++) {
            if (wm[w][h] == -INFINITY) continue;
            float f = __expf(wm[w][h] - M);
            Ls += wl[w][h] * f;
            Os += wo[w][h][e] * f;
        }
        os[part(h) * hd + e] = Os;
        if (e == 0) { ms[part(h)] = M; ls[part(h)] = Ls; }
    }
}

static __global__ void attn_combine_kernel(float *out, const float *scratch, int n_head, int head_dim, int n_split) {
    const int h = blockIdx.x, seq = blockIdx.y;
    const int64_t base = ((int64_t)seq * n_head + h) * n_split;
    const float *ms = scratch, *ls = scratch + (int64_t)gridDim.y * n_head * n_split;
    const float *os = ls + (int64_t)gridDim.y * n_head * n_split;
    float M = -INFINITY;
    for (int s = 0; s < n_split; s++) M = fmaxf(M, ms[base + s]);
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
        float Ls = 0, Os = 0;
        for (int s = 0; s < n_split; s++) {
            float m = ms[base + s];
            if (m == -INFINITY) continue;
            float f = __expf(m - M);
            Ls += ls[base + s] * f;
            Os += os[(base + s) * head_dim + e] * f;
        }
        out[((int64_t)seq * n_head + h) * head_dim + e] = Os / Ls;
    }
}


/* v2: lanes take positions for the scores (no shuffle reductions), then dims for V. Each warp
 * takes tiles of 32 positions: lane j computes q.k of position j for every head of the group
 * from its own K row (16-byte loads), the tile's softmax weights are broadcast by shuffles
 * while lanes accumulate their head_dim / 32 values of V. head_dim % 8 == 0, <= 256. */
template <int EPL>
__global__ void __launch_bounds__(ATTN_WARPS * 32) attn_split_v2(float *scratch, const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *len, int n_head, int n_kv_head, int head_dim,
        int max_ctx, float scale) {
    const int split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z, n_split = gridDim.x;
    const int G = n_head / n_kv_head, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int L = min(len[seq], max_ctx), p0 = split * ATTN_SPLIT, p1 = min(L, p0 + ATTN_SPLIT);
    const int64_t hd = head_dim;
    float *ms = scratch, *ls = scratch + (int64_t)gridDim.z * n_head * n_split;
    float *os = ls + (int64_t)gridDim.z * n_head * n_split;
    auto part = [&](int h) { return ((int64_t)seq * n_head + kvh * G + h) * n_split + split; };
    if (p0 >= p1) {
        if (threadIdx.x < G) { ms[part(threadIdx.x)] = -INFINITY; ls[part(threadIdx.x)] = 0; }
        return;
    }
    __shared__ __align__(16) float qs[ATTN_MAX_G][256];
    __shared__ float wm[ATTN_WARPS][ATTN_MAX_G], wl[ATTN_WARPS][ATTN_MAX_G];
    __shared__ float wo[ATTN_WARPS][ATTN_MAX_G][256];
    for (int i = threadIdx.x; i < G * head_dim; i += blockDim.x)
        qs[i / head_dim][i % head_dim] = q[((int64_t)seq * n_head + kvh * G) * hd + i] * scale;
    __syncthreads();
    float m[ATTN_MAX_G], l[ATTN_MAX_G], o[ATTN_MAX_G][EPL];
#pragma unroll
    for (int h = 0; h < ATTN_MAX_G; h++) {
        m[h] = -INFINITY;
        l[h] = 0;
#pragma unroll
        for (int i = 0; i < EPL; i++) o[h][i] = 0;
    }
    const uint16_t *kb = kc + ((int64_t)seq * n_kv_head + kvh) * max_ctx * hd;
    const uint16_t *vb = vc + ((int64_t)seq * n_kv_head + kvh) * max_ctx * hd;
    const int e0 = lane * EPL;
    for (int t0 = p0 + 32 * warp; t0 < p1; t0 += 32 * ATTN_WARPS) {
        const int p = t0 + lane;
        const bool valid = p < p1;
        float s[ATTN_MAX_G];
#pragma unroll
        for (int h = 0; h < ATTN_MAX_G; h++) s[h] = 0;
        if (valid) {
            const uint4 *kr = (const uint4 *)(kb + (int64_t)p * hd);
#pragma unroll 4
            for (int c = 0; c < head_dim / 8; c++) {
                uint4 kv = __ldg(kr + c);
                const uint32_t w[4] = {kv.x, kv.y, kv.z, kv.w};
                float kf[8];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    float2 f = __half22float2(*(const __half2 *)&w[i]);
                    kf[2 * i] = f.x;
                    kf[2 * i + 1] = f.y;
                }
#pragma unroll
                for (int h = 0; h < ATTN_MAX_G; h++) {
                    if (h >= G) break;
                    const float4 qa = *(const float4 *)&qs[h][8 * c], qb = *(const float4 *)&qs[h][8 * c + 4];
                    s[h] = fmaf(qa.x, kf[0], s[h]); s[h] = fmaf(qa.y, kf[1], s[h]);
                    s[h] = fmaf(qa.z, kf[2], s[h]); s[h] = fmaf(qa.w, kf[3], s[h]);
                    s[h] = fmaf(qb.x, kf[4], s[h]); s[h] = fmaf(qb.y, kf[5], s[h]);
                    s[h] = fmaf(qb.z, kf[6], s[h]); s[h] = fmaf(qb.w, kf[7], s[h]);
                }
            }
        }
        float pw[ATTN_MAX_G];
#pragma unroll
        for (int h = 0; h < ATTN_MAX_G; h++) {
            if (h >= G) break;
            const float mt = warp_max(valid ? s[h] : -INFINITY);
            const float mn = fmaxf(m[h], mt), corr = __expf(m[h] - mn);
            pw[h] = valid ? __expf(s[h] - mn) : 0.0f;
            l[h] = l[h] * corr + warp_sum(pw[h]);
            m[h] = mn;
#pragma unroll
            for (int i = 0; i < EPL; i++) o[h][i] *= corr;
        }
        const int nj = min(32, p1 - t0);
#pragma unroll 4
        for (int j = 0; j < nj; j++) {
            float vf[EPL];
            attn_load<EPL>(vf, vb + (int64_t)(t0 + j) * hd, lane, head_dim);
#pragma unroll
            for (int h = 0; h < ATTN_MAX_G; h++) {
                if (h >= G) break;
                const float pj = __shfl_sync(0xffffffffu, pw[h], j);
#pragma unroll
                for (int i = 0; i < EPL; i++) o[h][i] = fmaf(pj, vf[i], o[h][i]);
            }
        }
    }
    (void)e0;
#pragma unroll
    for (int h = 0; h < ATTN_MAX_G; h++) {
        if (h >= G) break;
        if (lane == 0) { wm[warp][h] = m[h]; wl[warp][h] = l[h]; }
#pragma unroll
        for (int i = 0; i < EPL; i++)
            if (lane * EPL + i < head_dim) wo[warp][h][lane * EPL + i] = o[h][i];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < G * head_dim; idx += blockDim.x) {
        int h = idx / head_dim, e = idx % head_dim;
        float M = -INFINITY;
        for (int w = 0; w < ATTN_WARPS; w++) M = fmaxf(M, wm[w][h]);
        float Ls = 0, Os = 0;
        for (int w = 0; w < ATTN_WARPS; w++) {
            if (wm[w][h] == -INFINITY) continue;
            float f = __expf(wm[w][h] - M);
            Ls += wl[w][h] * f;
            Os += wo[w][h][e] * f;
        }
        os[part(h) * hd + e] = Os;
        if (e == 0) { ms[part(h)] = M; ls[part(h)] = Ls; }
    }
}

/* Launches variant V (1: lanes over head_dim with shuffle reductions per position; 2: lanes over
 * positions, head_dim % 8 == 0) and the combine pass. Arguments checked by the caller. */
template <int V>
static inline cudaError_t attn_launch(float *out, const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                                      const int32_t *len, void *scratch, int n_seq, int n_head, int n_kv_head,
                                      int head_dim, int max_ctx, float scale, cudaStream_t stream) {
    int n_split = attn_splits(max_ctx);
    dim3 grid((unsigned)n_split, (unsigned)n_kv_head, (unsigned)n_seq);
    float *sc = (float *)scratch;
    int epl = (head_dim + 31) / 32;
#define ATTN_GO(E) do { if (V == 1) attn_split_kernel<E><<<grid, ATTN_WARPS * 32, 0, stream>>>(sc, q, k_cache, v_cache, len, n_head, n_kv_head, head_dim, max_ctx, scale); \
                        else attn_split_v2<E><<<grid, ATTN_WARPS * 32, 0, stream>>>(sc, q, k_cache, v_cache, len, n_head, n_kv_head, head_dim, max_ctx, scale); } while (0)
    if (epl <= 1) ATTN_GO(1);
    else if (epl <= 2) ATTN_GO(2);
    else if (epl <= 4) ATTN_GO(4);
    else ATTN_GO(8);
#undef ATTN_GO
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    attn_combine_kernel<<<dim3((unsigned)n_head, (unsigned)n_seq), 128, 0, stream>>>(out, sc, n_head, head_dim, n_split);
    return cudaGetLastError();
}

static __global__ void kv_store_kernel(uint16_t *kc, uint16_t *vc, const float *k, const float *v, const int32_t *pos,
                                int n_seq, int n_kv_head, int head_dim, int max_ctx) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= (int64_t)n_seq * n_kv_head * head_dim) return;
    int e = (int)(i % head_dim);
    int64_t sh = i / head_dim; /* seq * n_kv_head + head */
    int p = pos[sh / n_kv_head];
    if (p < 0 || p >= max_ctx) return;
    int64_t at = (sh * max_ctx + p) * head_dim + e;
    kc[at] = __half_as_ushort(__float2half_rn(k[i]));
    vc[at] = __half_as_ushort(__float2half_rn(v[i]));
}

/* The new token's k, v (f32 [n_seq][n_kv_head][head_dim]) at position pos[s]. */
static inline cudaError_t lab_kv_store(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                                const int32_t *pos, int n_seq, int n_kv_head, int head_dim, int max_ctx,
                                cudaStream_t stream) {
    if (n_seq <= 0 || n_kv_head <= 0 || head_dim <= 0 || max_ctx <= 0) return cudaErrorInvalidValue;
    int64_t n = (int64_t)n_seq * n_kv_head * head_dim;
    kv_store_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(k_cache, v_cache, k, v, pos, n_seq,
                                                                      n_kv_head, head_dim, max_ctx);
    return cudaGetLastError();
}

static inline size_t lab_attention_scratch_bytes(int n_seq, int n_head, int head_dim, int max_ctx) {
    return (size_t)n_seq * n_head * attn_splits(max_ctx) * (size_t)(head_dim + 2) * sizeof(float);
}

/* One query token per sequence over positions [0, len[s]): variant 2 where head_dim % 8 == 0, else 1. */
static inline cudaError_t lab_attention_decode(float *out, const float *q, const uint16_t *k_cache,
                                        const uint16_t *v_cache, const int32_t *len, void *scratch, int n_seq,
                                        int n_head, int n_kv_head, int head_dim, int max_ctx, float scale,
                                        cudaStream_t stream) {
    if (n_seq <= 0 || n_head <= 0 || n_kv_head <= 0 || n_head % n_kv_head || n_head / n_kv_head > ATTN_MAX_G ||
        head_dim <= 0 || head_dim > 256 || max_ctx <= 0 || n_seq > 65535)
        return cudaErrorInvalidValue;
    if (head_dim % 8 == 0)
        return attn_launch<2>(out, q, k_cache, v_cache, len, scratch, n_seq, n_head, n_kv_head, head_dim, max_ctx, scale, stream);
    return attn_launch<1>(out, q, k_cache, v_cache, len, scratch, n_seq, n_head, n_kv_head, head_dim, max_ctx, scale, stream);
}

#endif
