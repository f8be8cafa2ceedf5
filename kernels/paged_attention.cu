/* Decode attention of the CUDA engine backend over the paged KV cache (kernels/paged.h), split-KV
 * (flash-decoding) for every token of a batch, prompt tokens included: block (split, kv head,
 * token) runs an online softmax over its range of the token's positions for the
 * query heads sharing that kv head (K and V read once per group). For head_dim % 8 == 0 the range
 * is walked in tiles of whole pages copied into shared memory with cp.async (double-buffered, so
 * all of a tile's loads are in flight at once), and the last block of a (token, kv head) to finish
 * merges the splits; otherwise warps walk positions through the cache and a second pass merges.
 * A prompt pass of one sequence takes paged_attention_prefill (kernels/prefill.cu) instead. The
 * decode-step kernels are launched with programmatic dependent launch (kernels/pdl.cuh). The
 * tensor-core kernel is paged_mma.cuh's. */
#include <math.h>
#include <cuda_fp16.h>
#include "kernels/paged.h"
#include "kernels/paged_common.cuh"
#include "kernels/paged_mma.cuh"
#include "kernels/reduce.cuh"
#include "kernels/pdl.cuh"
#include "kernels/optin.cuh"
#include "kernels/trace.cuh"

#define PA_WARPS 4
#define PA_MIN_SPLIT 64

/* The first position a query at pos sees: pos - window + 1 on a windowed layer (window > 0; the
 * CPU reference's and llama.cpp's mask, p1 - p0 >= window hidden), 0 otherwise. */
__device__ __forceinline__ int pa_window_lo(int pos, int window) {
    return window > 0 && pos >= window ? pos - window + 1 : 0;
}

extern "C" size_t paged_attention_scratch_bytes(int n_tok, int n_head, int head_dim, int n_split) {
    return ((size_t)pt_counters(n_head) + (size_t)n_tok * n_head * n_split * (size_t)(head_dim + 2)) * sizeof(float);
}

/* EPL values of a head per lane, contiguous (lane * EPL + i); vector loads when aligned. */
template <int EPL>
__device__ __forceinline__ void pa_load(float out[EPL], const uint16_t *row, int lane, int head_dim, bool vec) {
    int e0 = lane * EPL;
    if (vec && e0 + EPL <= head_dim) {
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
        for (int i = 0; i < EPL; i++)
            out[i] = e0 + i < head_dim ? __half2float(__ushort_as_half(row[e0 + i])) : 0.0f;
    }
}

/* Partials per (token, head, split): m, l, then o[head_dim] (unnormalised), for head_dim % 8 != 0
 * (paged_attn_tile_kernel takes the rest): lanes split head_dim and every score is a warp
 * reduction. */
template <int EPL>
__global__ void __launch_bounds__(PA_WARPS * 32) paged_attn_split_kernel(float *scratch, const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *pos, const int32_t *seq, const int32_t *pages,
        int page_stride, int n_head, int n_kv_head, int head_dim, float scale, int window, float softcap) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z, n_split = gridDim.x, n_tok = gridDim.z;
    const int G = n_head / n_kv_head, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int lo = pa_window_lo(pos[t], window), L = pos[t] + 1 - lo; /* positions lo..pos[t] */
    const int chunk = max(PA_MIN_SPLIT, (L + n_split - 1) / n_split);
    const int p0 = lo + split * chunk, p1 = lo + min(L, split * chunk + chunk);
    const int64_t hd = head_dim, kv_dim = (int64_t)n_kv_head * head_dim;
    const bool vec = head_dim % EPL == 0;
    float *ms = scratch, *ls = scratch + (int64_t)n_tok * n_head * n_split;
    float *os = ls + (int64_t)n_tok * n_head * n_split;
    auto part = [&](int h) { return ((int64_t)t * n_head + kvh * G + h) * n_split + split; };
    if (p0 >= p1) {
        if (threadIdx.x < G) { ms[part(threadIdx.x)] = -INFINITY; ls[part(threadIdx.x)] = 0; }
        return;
    }
    const int32_t *pt = pages + (int64_t)seq[t] * page_stride;
    const uint16_t *kb = kc + kvh * hd, *vb = vc + kvh * hd;
    float m[PA_MAX_G], l[PA_MAX_G], o[PA_MAX_G][EPL];
#pragma unroll
    for (int h = 0; h < PA_MAX_G; h++) {
        m[h] = -INFINITY;
        l[h] = 0;
#pragma unroll
        for (int i = 0; i < EPL; i++) o[h][i] = 0;
    }
    float qr[PA_MAX_G][EPL];
#pragma unroll
    for (int h = 0; h < PA_MAX_G; h++)
#pragma unroll
        for (int i = 0; i < EPL; i++) {
            int e = lane * EPL + i;
            qr[h][i] = (h < G && e < head_dim) ? q[((int64_t)t * n_head + kvh * G + h) * hd + e] * scale : 0.0f;
        }
    for (int p = p0 + warp; p < p1; p += PA_WARPS * 2) {
        float kr[2][EPL], vr[2][EPL];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            int pp = p + u * PA_WARPS;
            if (pp < p1) {
                int64_t cell = (int64_t)pt[pp / PAGED_PAGE] * PAGED_PAGE + pp % PAGED_PAGE;
                pa_load<EPL>(kr[u], kb + cell * kv_dim, lane, head_dim, vec);
                pa_load<EPL>(vr[u], vb + cell * kv_dim, lane, head_dim, vec);
            }
        }
#pragma unroll
        for (int u = 0; u < 2; u++) {
            if (p + u * PA_WARPS >= p1) break;
#pragma unroll
            for (int h = 0; h < PA_MAX_G; h++) {
                if (h >= G) break;
                float s = 0;
#pragma unroll
                for (int i = 0; i < EPL; i++) s = fmaf(qr[h][i], kr[u][i], s);
                s = warp_sum(s);
                if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
                float mn = fmaxf(m[h], s), corr = __expf(m[h] - mn), pe = __expf(s - mn);
                l[h] = l[h] * corr + pe;
#pragma unroll
                for (int i = 0; i < EPL; i++) o[h][i] = fmaf(o[h][i], corr, pe * vr[u][i]);
                m[h] = mn;
            }
        }
    }
    /* Merge the warps: each writes (m, l, o) per head, then thread e folds them. */
    __shared__ float wm[PA_WARPS][PA_MAX_G], wl[PA_WARPS][PA_MAX_G];
    __shared__ float wo[PA_WARPS][PA_MAX_G][256];
#pragma unroll
    for (int h = 0; h < PA_MAX_G; h++) {
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
        for (int w = 0; w < PA_WARPS; w++) M = fmaxf(M, wm[w][h]);
        float Ls = 0, Os = 0;
        for (int w = 0; w < PA_WARPS; w++) {
            if (wm[w][h] == -INFINITY) continue;
            float f = __expf(wm[w][h] - M);
            Ls += wl[w][h] * f;
            Os += wo[w][h][e] * f;
        }
        os[part(h) * hd + e] = Os;
        if (e == 0) { ms[part(h)] = M; ls[part(h)] = Ls; }
    }
}

__global__ void paged_attn_combine_kernel(float *out, const float *scratch, int n_head, int head_dim,
                                          int n_split) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const int h = blockIdx.x, t = blockIdx.y, n_tok = gridDim.y;
    const int64_t base = ((int64_t)t * n_head + h) * n_split;
    const float *ms = scratch, *ls = scratch + (int64_t)n_tok * n_head * n_split;
    const float *os = ls + (int64_t)n_tok * n_head * n_split;
    float M = -INFINITY;
#pragma unroll 8
    for (int s = 0; s < n_split; s++) M = fmaxf(M, ms[base + s]);
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
        float Ls = 0, Os = 0;
#pragma unroll 8
        for (int s = 0; s < n_split; s++) {
            float m = ms[base + s];
            if (m == -INFINITY) continue;
            float f = __expf(m - M);
            Ls += ls[base + s] * f;
            Os += os[(base + s) * head_dim + e] * f;
        }
        out[((int64_t)t * n_head + h) * head_dim + e] = Os / Ls;
    }
}

/* ---- tiled split-KV decode attention (head_dim % 8 == 0) --------------------------------------
 * Block (split, kv head, token), PT_THREADS threads. The split's positions, a whole number of
 * pages, are walked in tiles of TP positions (TP divides PAGED_PAGE, so a tile is consecutive
 * cells of one page); each tile's K and V rows of this kv head are copied into shared memory with
 * cp.async, the next tile's copy in flight while this one is used (the old kernel waited on one
 * load after another and spent ~33 us per layer at position 1000). Per tile: scores (thread =
 * position x group of heads, K rows padded by 8 halves so the 16-byte reads of 8 consecutive rows
 * hit distinct banks), the online-softmax update (a warp per head), then P.V (thread = dimension,
 * every head). When one split holds the whole context it writes the output; otherwise the
 * partials go to scratch and the last block of the (token, kv head) to arrive, counted with an
 * atomic, merges the splits in split order (deterministic) and resets the count, so no second
 * launch is needed. */
#define PT_THREADS 128


/* Shared memory of the tiled kernel: K and V tiles [2][TP][head_dim + 8] halves each, Q [G][head_dim]
 * f32 (pre-scaled), scores / weights [TP][PA_MAX_G], and m, l, correction per head. */
static size_t pt_smem_bytes(int tp, int head_dim, int G) {
    return (size_t)4 * tp * (head_dim + 8) * sizeof(uint16_t) + ((size_t)G * head_dim + tp * PA_MAX_G + 3 * PA_MAX_G) * sizeof(float);
}

/* RC: the window and softcap of paged_attention_recipe compiled in (the plain instance without). */
template <int TP, bool RC>
__global__ void __launch_bounds__(PT_THREADS) paged_attn_tile_kernel(float *out, float *scratch, const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *pos, const int32_t *seq, const int32_t *pages,
        int page_stride, int n_head, int n_kv_head, int head_dim, float scale, int window, float softcap) {
    constexpr int NPG = PT_THREADS / TP;                      /* thread groups in the score phase */
    constexpr int HPT = (PA_MAX_G + NPG - 1) / NPG;           /* heads per thread there, at most */
    extern __shared__ __align__(16) unsigned char pt_smem[];
    __shared__ int is_last;
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z, n_split = gridDim.x;
    const int G = n_head / n_kv_head, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int hd = head_dim, RS = head_dim + 8, cpr = head_dim / 8;
    /* a window's first position lo: the walk starts at lo's tile (TP-aligned, so no tile crosses a
     * page and every tile holds a position in range) and masks what precedes lo in that tile */
    const int lo = RC ? pa_window_lo(pos[t], window) : 0, base = lo / TP * TP, L = pos[t] + 1 - base;
    const int chunk = ((L + n_split - 1) / n_split + PAGED_PAGE - 1) / PAGED_PAGE * PAGED_PAGE;
    const int p0 = base + split * chunk, p1 = base + min(L, split * chunk + chunk), n_act = (L + chunk - 1) / chunk;
    /* one split holds the whole context: it writes the output itself, the empty ones leave */
    if (n_act == 1 && split > 0) return;
    const int64_t kv_dim = (int64_t)n_kv_head * head_dim, parts = (int64_t)gridDim.z * n_head * n_split;
    int *count = (int *)scratch + (int64_t)t * n_head + kvh;
    float *ms = scratch + pt_counters(n_head), *ls = ms + parts, *os = ls + parts;
    /* head h of the group, split s: part0 + h * n_split + s */
    const int64_t part0 = ((int64_t)t * n_head + kvh * G) * n_split;
    uint16_t *kt = (uint16_t *)pt_smem, *vt = kt + 2 * TP * RS;
    float *qs = (float *)(vt + 2 * TP * RS), *sc = qs + G * hd, *sm = sc + TP * PA_MAX_G, *sl = sm + PA_MAX_G,
          *scorr = sl + PA_MAX_G;
    if (p0 < p1) {
        const int32_t *pt = pages + (int64_t)seq[t] * page_stride;
        auto issue = [&](int tile, int buf) {
            const int b = p0 + tile * TP, nrow = min(TP, p1 - b);
            const int64_t cell0 = (int64_t)pt[b / PAGED_PAGE] * PAGED_PAGE + b % PAGED_PAGE;
            for (int c = tid; c < nrow * cpr; c += PT_THREADS) {
                const int j = c / cpr, e = (c - j * cpr) * 8;
                const int64_t g = (cell0 + j) * kv_dim + (int64_t)kvh * hd + e;
                pt_cp16(kt + (buf * TP + j) * RS + e, kc + g);
                pt_cp16(vt + (buf * TP + j) * RS + e, vc + g);
            }
            pt_commit();
        };
        issue(0, 0);
        for (int i = tid; i < G * hd; i += PT_THREADS) qs[i] = q[((int64_t)t * n_head + kvh * G) * hd + i] * scale;
        if (tid < PA_MAX_G) { sm[tid] = -INFINITY; sl[tid] = 0; }
        float o[2][PA_MAX_G]; /* dimensions tid and tid + PT_THREADS, every head */
#pragma unroll
        for (int h = 0; h < PA_MAX_G; h++) o[0][h] = o[1][h] = 0;
        const int n_tiles = (p1 - p0 + TP - 1) / TP;
        for (int tile = 0; tile < n_tiles; tile++) {
            const int buf = tile & 1, nrow = min(TP, p1 - p0 - tile * TP);
            if (tile + 1 < n_tiles) {
                issue(tile + 1, buf ^ 1);
                pt_wait<1>();
            } else {
                pt_wait<0>();
            }
            __syncthreads(); /* tile landed for every thread (and Q, m, l on the first pass) */
            {
                const int j = tid % TP, hg = tid / TP;
                const uint16_t *kr = kt + (buf * TP + j) * RS;
                float acc[HPT];
#pragma unroll
                for (int u = 0; u < HPT; u++) acc[u] = 0;
#pragma unroll 4
                for (int e = 0; e < hd; e += 8) {
                    const uint4 k4 = *(const uint4 *)(kr + e);
                    const __half2 *k2 = (const __half2 *)&k4;
                    float kf[8];
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const float2 f = __half22float2(k2[i]);
                        kf[2 * i] = f.x;
                        kf[2 * i + 1] = f.y;
                    }
#pragma unroll
                    for (int u = 0; u < HPT; u++) {
                        const int h = hg + NPG * u;
                        if (h >= G) continue;
                        const float4 qa = *(const float4 *)(qs + h * hd + e), qb = *(const float4 *)(qs + h * hd + e + 4);
                        float a = acc[u];
                        a = fmaf(qa.x, kf[0], a); a = fmaf(qa.y, kf[1], a); a = fmaf(qa.z, kf[2], a);
                        a = fmaf(qa.w, kf[3], a); a = fmaf(qb.x, kf[4], a); a = fmaf(qb.y, kf[5], a);
                        a = fmaf(qb.z, kf[6], a); a = fmaf(qb.w, kf[7], a);
                        acc[u] = a;
                    }
                }
#pragma unroll
                for (int u = 0; u < HPT; u++) {
                    const int h = hg + NPG * u;
                    if (RC && softcap > 0.0f) acc[u] = softcap * tanhf(acc[u] / softcap);
                    const bool in = j < nrow && (!RC || p0 + tile * TP + j >= lo); /* RC: lo on */
                    if (h < G) sc[j * PA_MAX_G + h] = in ? acc[u] : -INFINITY;
                }
            }
            __syncthreads();
            for (int h = warp; h < G; h += PT_THREADS / 32) {
                float v[TP / 32], mx = -INFINITY;
#pragma unroll
                for (int u = 0; u < TP / 32; u++) {
                    v[u] = sc[(lane + 32 * u) * PA_MAX_G + h];
                    mx = fmaxf(mx, v[u]);
                }
                mx = warp_max(mx); /* finite: the tile's first position is in range */
                const float mo = sm[h], mn = fmaxf(mo, mx), corr = __expf(mo - mn);
                float sum = 0;
#pragma unroll
                for (int u = 0; u < TP / 32; u++) {
                    const float e = __expf(v[u] - mn);
                    sc[(lane + 32 * u) * PA_MAX_G + h] = e;
                    sum += e;
                }
                sum = warp_sum(sum);
                if (lane == 0) { sl[h] = sl[h] * corr + sum; sm[h] = mn; scorr[h] = corr; }
            }
            __syncthreads();
#pragma unroll
            for (int dd = 0; dd < 2; dd++) {
                const int d = tid + dd * PT_THREADS;
                if (d >= hd) break;
#pragma unroll
                for (int h = 0; h < PA_MAX_G; h++) if (h < G) o[dd][h] *= scorr[h];
                const uint16_t *vcol = vt + buf * TP * RS + d;
#pragma unroll 8
                for (int j = 0; j < nrow; j++) {
                    const float v = __half2float(__ushort_as_half(vcol[j * RS]));
                    const float4 pa = *(const float4 *)(sc + j * PA_MAX_G), pb = *(const float4 *)(sc + j * PA_MAX_G + 4);
                    const float pw[PA_MAX_G] = {pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w};
#pragma unroll
                    for (int h = 0; h < PA_MAX_G; h++) if (h < G) o[dd][h] = fmaf(pw[h], v, o[dd][h]);
                }
            }
            __syncthreads(); /* this tile's buffers and scores are free for the next copy */
        }
        if (n_act == 1) {
#pragma unroll
            for (int dd = 0; dd < 2; dd++) {
                const int d = tid + dd * PT_THREADS;
                if (d >= hd) break;
#pragma unroll
                for (int h = 0; h < PA_MAX_G; h++)
                    if (h < G) out[((int64_t)t * n_head + kvh * G + h) * hd + d] = o[dd][h] / sl[h];
            }
            return;
        }
#pragma unroll
        for (int dd = 0; dd < 2; dd++) {
            const int d = tid + dd * PT_THREADS;
            if (d >= hd) break;
#pragma unroll
            for (int h = 0; h < PA_MAX_G; h++) if (h < G) os[(part0 + h * n_split + split) * hd + d] = o[dd][h];
        }
        if (tid < G) { ms[part0 + tid * n_split + split] = sm[tid]; ls[part0 + tid * n_split + split] = sl[tid]; }
    } else if (tid < G) {
        ms[part0 + tid * n_split + split] = -INFINITY;
        ls[part0 + tid * n_split + split] = 0;
    }
    /* Arrival: the classic threadfence reduction. Each thread's partials are made visible before
     * the count moves; the last block sees every block's. */
    __threadfence();
    __syncthreads();
    if (tid == 0) is_last = atomicAdd(count, 1) == n_split - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    /* the weights go to the (now free) K tile area: 4 * TP * RS halves hold >= 8 * 256 floats */
    pt_merge_splits<false, PT_THREADS>(out + ((int64_t)t * n_head + kvh * G) * hd, ms + part0, ls + part0,
                                       os + part0 * hd, (float *)pt_smem, G, hd, n_split, n_act);
    if (tid == 0) *count = 0;
}

template <int TP>
static cudaError_t pt_launch(float *out, float *sc, const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                             const int32_t *pos, const int32_t *seq, const int32_t *pages, int page_stride,
                             dim3 grid, int n_head, int n_kv_head, int head_dim, float scale, int window,
                             float softcap, cudaStream_t stream) {
    const size_t smem = pt_smem_bytes(TP, head_dim, n_head / n_kv_head); /* above the 48 KB default */
    const bool rc = window > 0 || softcap > 0.0f;
    cudaError_t e = rc ? smem_optin<paged_attn_tile_kernel<TP, true>>() : smem_optin<paged_attn_tile_kernel<TP, false>>();
    if (e != cudaSuccess) return e;
    return pdl_launch(rc ? paged_attn_tile_kernel<TP, true> : paged_attn_tile_kernel<TP, false>, grid, dim3(PT_THREADS),
                      smem, stream, out, sc, q, k_cache, v_cache, pos, seq, pages, page_stride, n_head, n_kv_head,
                      head_dim, scale, window, softcap);
}

/* variant 3 (production): the tensor-core kernel's V3 where it applies (less fixed cost; PERF-LOG run
 * 34: 8b q4_k_m tg32 @ d16384 402.4 t/s, 361.1 with 2); 2: its first form; 1: the tiled CUDA-core
 * kernel (paged.h's paged_attention_variant, for the kernel lab and tests). */
static cudaError_t attention_run(int variant, float *out, uint16_t *out_h, const float *q, const uint16_t *k_cache,
                                 const uint16_t *v_cache, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                                 int page_stride, void *scratch, int n_tok, int n_head, int n_kv_head, int head_dim,
                                 int n_split, int kv_ready, float scale, int window, float softcap,
                                 cudaStream_t stream);

extern "C" cudaError_t paged_attention(float *out, const float *q, const uint16_t *k_cache,
                                       const uint16_t *v_cache, const int32_t *pos, const int32_t *seq,
                                       const int32_t *pages, int page_stride, void *scratch, int n_tok,
                                       int n_head, int n_kv_head, int head_dim, int n_split, int kv_ready,
                                       float scale, cudaStream_t stream) {
    return attention_run(3, out, nullptr, q, k_cache, v_cache, pos, seq, pages, page_stride, scratch, n_tok, n_head,
                         n_kv_head, head_dim, n_split, kv_ready, scale, 0, 0.0f, stream);
}

extern "C" cudaError_t paged_attention_f16(float *out, uint16_t *out_h, const float *q, const uint16_t *k_cache,
                                           const uint16_t *v_cache, const int32_t *pos, const int32_t *seq,
                                           const int32_t *pages, int page_stride, void *scratch, int n_tok,
                                           int n_head, int n_kv_head, int head_dim, int n_split, int kv_ready,
                                           float scale, cudaStream_t stream) {
    if (!out_h) return cudaErrorInvalidValue;
    /* the tensor-core kernel's V3 only; the caller converts out itself otherwise */
    if (head_dim != 64 && head_dim != 128 && head_dim != 256) return cudaErrorNotSupported;
    return attention_run(3, out, out_h, q, k_cache, v_cache, pos, seq, pages, page_stride, scratch, n_tok, n_head,
                         n_kv_head, head_dim, n_split, kv_ready, scale, 0, 0.0f, stream);
}

extern "C" cudaError_t paged_attention_recipe(float *out, const float *q, const uint16_t *k_cache,
                                              const uint16_t *v_cache, const int32_t *pos, const int32_t *seq,
                                              const int32_t *pages, int page_stride, void *scratch, int n_tok,
                                              int n_head, int n_kv_head, int head_dim, int n_split, int kv_ready,
                                              float scale, int window, float softcap, cudaStream_t stream) {
    if (window < 0 || !(softcap >= 0.0f)) return cudaErrorInvalidValue;
    return attention_run(3, out, nullptr, q, k_cache, v_cache, pos, seq, pages, page_stride, scratch, n_tok, n_head,
                         n_kv_head, head_dim, n_split, kv_ready, scale, window, softcap, stream);
}

extern "C" int paged_attention_qkn_supported(int n_head, int n_kv_head, int head_dim, int n_rot, int neox, int window,
                                             float softcap) {
    const int rc = window > 0 || softcap > 0.0f;
    return (head_dim == 128 || head_dim == 256 || (head_dim == 64 && !rc)) && n_head > 0 && n_kv_head > 0 &&
           n_head % n_kv_head == 0 && n_head / n_kv_head <= PA_MAX_G && n_rot >= 0 && n_rot % 2 == 0 &&
           n_rot <= head_dim && (!neox || n_rot == head_dim) && window >= 0 && softcap >= 0.0f;
}

extern "C" cudaError_t paged_attention_qkn(float *out, const float *q, const uint16_t *k_cache,
                                           const uint16_t *v_cache, const int32_t *pos, const int32_t *seq,
                                           const int32_t *pages, int page_stride, void *scratch, int n_tok,
                                           int n_head, int n_kv_head, int head_dim, int n_split, float scale,
                                           int window, float softcap, const paged_qk_norm *qn, cudaStream_t stream) {
    if (!qn || !paged_attention_qkn_supported(n_head, n_kv_head, head_dim, qn->n_rot, qn->neox, window, softcap))
        return cudaErrorNotSupported;
    if (!qn->k_raw || !qn->k_store || qn->k_store != k_cache || !qn->cell || !qn->q_norm || !qn->k_norm ||
        (qn->n_rot && !qn->angle) || n_tok <= 0 || n_tok > PAGED_ATT_TOKENS || n_split <= 0 || n_split > 256 ||
        page_stride <= 0)
        return cudaErrorInvalidValue;
    dim3 grid((unsigned)n_split, (unsigned)n_kv_head, (unsigned)n_tok);
    /* kv_ready: one token per sequence, its earlier cells written by earlier passes */
#define QN_LAUNCH(D, RC) pm_launch<D, true, RC, true>(out, nullptr, (float *)scratch, q, k_cache, v_cache, pos, seq, \
                                                      pages, page_stride, grid, n_head, n_kv_head, scale, 1, window, \
                                                      softcap, stream, qn)
    const bool rc = window > 0 || softcap > 0.0f;
    if (head_dim == 64) return QN_LAUNCH(64, false);
    if (head_dim == 128) return rc ? QN_LAUNCH(128, true) : QN_LAUNCH(128, false);
    return rc ? QN_LAUNCH(256, true) : QN_LAUNCH(256, false);
#undef QN_LAUNCH
}

extern "C" cudaError_t paged_attention_variant(int variant, float *out, const float *q, const uint16_t *k_cache,
                                               const uint16_t *v_cache, const int32_t *pos, const int32_t *seq,
                                               const int32_t *pages, int page_stride, void *scratch, int n_tok,
                                               int n_head, int n_kv_head, int head_dim, int n_split, int kv_ready,
                                               float scale, cudaStream_t stream) {
    if (variant < 1 || variant > 3) return cudaErrorInvalidValue;
    return attention_run(variant, out, nullptr, q, k_cache, v_cache, pos, seq, pages, page_stride, scratch, n_tok,
                         n_head, n_kv_head, head_dim, n_split, kv_ready, scale, 0, 0.0f, stream);
}

static cudaError_t attention_run(int variant, float *out, uint16_t *out_h, const float *q, const uint16_t *k_cache,
                                 const uint16_t *v_cache, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                                 int page_stride, void *scratch, int n_tok, int n_head, int n_kv_head, int head_dim,
                                 int n_split, int kv_ready, float scale, int window, float softcap,
                                 cudaStream_t stream) {
    if (n_tok <= 0 || n_tok > PAGED_ATT_TOKENS || n_head <= 0 || n_kv_head <= 0 || n_head % n_kv_head ||
        n_head / n_kv_head > PA_MAX_G || head_dim <= 0 || head_dim > 256 || n_split <= 0 || page_stride <= 0)
        return cudaErrorInvalidValue;
    dim3 grid((unsigned)n_split, (unsigned)n_kv_head, (unsigned)n_tok);
    float *sc = (float *)scratch;
    if (head_dim % 8 == 0) {
        if (n_split > 256) return cudaErrorInvalidValue; /* the merge's weights must fit the tile area */
        /* a window or a softcap: the tensor-core kernels' RC instances (V3's, or the first form's) */
        const bool rc = window > 0 || softcap > 0.0f;
#define PM_LAUNCH(D, V3, RC) pm_launch<D, V3, RC>(out, V3 ? out_h : nullptr, sc, q, k_cache, v_cache, pos, seq, pages, \
                                                  page_stride, grid, n_head, n_kv_head, scale, kv_ready, window, softcap, stream)
        if (variant == 3 && head_dim == 256) /* Gemma's heads: V3 only (the tiled kernel took ~12 us a layer) */
            return rc ? PM_LAUNCH(256, true, true) : PM_LAUNCH(256, true, false);
        if (variant >= 2 && (head_dim == 64 || head_dim == 128)) { /* n_head / n_kv_head <= 8: checked above */
            if (rc) {
                if (variant == 3) return head_dim == 64 ? PM_LAUNCH(64, true, true) : PM_LAUNCH(128, true, true);
                return head_dim == 64 ? PM_LAUNCH(64, false, true) : PM_LAUNCH(128, false, true);
            }
            if (variant == 3) return head_dim == 64 ? PM_LAUNCH(64, true, false) : PM_LAUNCH(128, true, false);
            return head_dim == 64 ? PM_LAUNCH(64, false, false) : PM_LAUNCH(128, false, false);
        }
#undef PM_LAUNCH
        /* 64-position tiles up to head_dim 128 (~76 KB of shared memory), 32 above */
        return head_dim <= 128 ? pt_launch<64>(out, sc, q, k_cache, v_cache, pos, seq, pages, page_stride, grid, n_head,
                                               n_kv_head, head_dim, scale, window, softcap, stream)
                               : pt_launch<32>(out, sc, q, k_cache, v_cache, pos, seq, pages, page_stride, grid, n_head,
                                               n_kv_head, head_dim, scale, window, softcap, stream);
    }
    int epl = (head_dim + 31) / 32;
    cudaError_t e;
    sc += pt_counters(n_head); /* the untiled kernels use no counters */
#define PA_LAUNCH(E) (e = pdl_launch(paged_attn_split_kernel<E>, grid, dim3(PA_WARPS * 32), 0, stream, sc, q, k_cache, \
                                     v_cache, pos, seq, pages, page_stride, n_head, n_kv_head, head_dim, scale, window, \
                                     softcap))
    if (epl <= 1) PA_LAUNCH(1);
    else if (epl <= 2) PA_LAUNCH(2);
    else if (epl <= 4) PA_LAUNCH(4);
    else PA_LAUNCH(8);
#undef PA_LAUNCH
    if (e != cudaSuccess) return e;
    return pdl_launch(paged_attn_combine_kernel, dim3((unsigned)n_head, (unsigned)n_tok), dim3(128), 0, stream, out,
                      (const float *)sc, n_head, head_dim, n_split);
}

extern "C" cudaError_t paged_attention_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s) { return kt_set(buf, cap, s); }
