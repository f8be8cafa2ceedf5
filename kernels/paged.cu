/* Kernels of the CUDA engine backend over the paged KV cache (kernels/paged.h). Attention is
 * split-KV (flash-decoding) for every token of a batch, prompt tokens included: block
 * (split, kv head, token) runs an online softmax over its range of the token's positions for the
 * query heads sharing that kv head (K and V read once per group). For head_dim % 8 == 0 the range
 * is walked in tiles of whole pages copied into shared memory with cp.async (double-buffered, so
 * all of a tile's loads are in flight at once), and the last block of a (token, kv head) to finish
 * merges the splits; otherwise warps walk positions through the cache and a second pass merges.
 * A prompt pass of one sequence takes paged_attention_prefill (kernels/prefill.cu) instead. The
 * decode-step kernels are launched with programmatic dependent launch (kernels/pdl.cuh). */
#include <math.h>
#include <cuda_fp16.h>
#include "kernels/paged.h"
#include "kernels/reduce.cuh"
#include "kernels/pdl.cuh"
#include "kernels/rope.cuh"
#include "kernels/optin.cuh"
#include "kernels/trace.cuh"
#include "quant/blocks.h"

/* f32 to f16 bits, rounded to nearest: paged_to_f16's rounding, which every kernel that writes a
 * GEMM's f16 input beside its f32 output (the *_f16 entries) must give bit for bit. */
__device__ __forceinline__ uint16_t pg_f16(float v) { return __half_as_ushort(__float2half_rn(v)); }

#define PA_WARPS 4
#define PA_MAX_G 8    /* query heads per kv head */
#define PA_MIN_SPLIT 64

/* Scratch: PAGED_ATT_TOKENS x n_head arrival counters for the tiled kernel's merge (token t, kv
 * head h at t * n_head + h: the same place whatever the launch's token and split counts, so
 * launches of different shapes can share one scratch and the counters of tokens a launch does not
 * use stay zero), then the partials (m, l, o per token, head and split). */
static __host__ __device__ int64_t pt_counters(int n_head) { return (int64_t)PAGED_ATT_TOKENS * n_head; }

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
        int page_stride, int n_head, int n_kv_head, int head_dim, float scale) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z, n_split = gridDim.x, n_tok = gridDim.z;
    const int G = n_head / n_kv_head, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int L = pos[t] + 1;
    const int chunk = max(PA_MIN_SPLIT, (L + n_split - 1) / n_split);
    const int p0 = split * chunk, p1 = min(L, p0 + chunk);
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

/* The last block of a (token, kv head) to arrive merges its splits: m, l and o point at head 0
 * split 0 of its partials (head h, split s at h * n_split + s; o rows of hd), out at head 0 of its
 * output. Splits past the context hold nothing; weights w[h][s] = e^(m_s - M) / sum_s l_s
 * e^(m_s - M) (base 2 when EXP2: the tensor-core kernel's m is in log2 units) go to wgt ([G][n_act]
 * floats of shared memory), then each output sums its splits in order (deterministic). */
template <bool EXP2, int THREADS>
__device__ __forceinline__ void pt_merge_splits(float *out, const float *m, const float *l, const float *o,
                                                float *wgt, int G, int hd, int n_split, int n_act) {
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    for (int h = warp; h < G; h += THREADS / 32) {
        float mx = -INFINITY;
        for (int s0 = lane; s0 < n_act; s0 += 32) mx = fmaxf(mx, __ldcg(m + h * n_split + s0));
        mx = warp_max(mx);
        float den = 0;
        for (int s0 = lane; s0 < n_act; s0 += 32) {
            const float x = __ldcg(m + h * n_split + s0) - mx, f = EXP2 ? exp2f(x) : __expf(x);
            wgt[h * n_act + s0] = f;
            den += f * __ldcg(l + h * n_split + s0);
        }
        den = warp_sum(den);
        __syncwarp();
        for (int s0 = lane; s0 < n_act; s0 += 32) wgt[h * n_act + s0] /= den;
    }
    __syncthreads();
    for (int idx = tid; idx < G * hd; idx += THREADS) {
        const int h = idx / hd, d = idx - h * hd;
        const float *src = o + (int64_t)h * n_split * hd + d;
        float acc = 0;
#pragma unroll 4
        for (int s0 = 0; s0 < n_act; s0++) acc = fmaf(wgt[h * n_act + s0], __ldcg(src + (int64_t)s0 * hd), acc);
        out[(int64_t)h * hd + d] = acc;
    }
}


__device__ __forceinline__ void pt_cp16(void *smem, const void *g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(smem)), "l"(g)
                 : "memory");
}
__device__ __forceinline__ void pt_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void pt_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

/* Shared memory of the tiled kernel: K and V tiles [2][TP][head_dim + 8] halves each, Q [G][head_dim]
 * f32 (pre-scaled), scores / weights [TP][PA_MAX_G], and m, l, correction per head. */
static size_t pt_smem_bytes(int tp, int head_dim, int G) {
    return (size_t)4 * tp * (head_dim + 8) * sizeof(uint16_t) + ((size_t)G * head_dim + tp * PA_MAX_G + 3 * PA_MAX_G) * sizeof(float);
}

template <int TP>
__global__ void __launch_bounds__(PT_THREADS) paged_attn_tile_kernel(float *out, float *scratch, const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *pos, const int32_t *seq, const int32_t *pages,
        int page_stride, int n_head, int n_kv_head, int head_dim, float scale) {
    constexpr int NPG = PT_THREADS / TP;                      /* thread groups in the score phase */
    constexpr int HPT = (PA_MAX_G + NPG - 1) / NPG;           /* heads per thread there, at most */
    extern __shared__ __align__(16) unsigned char pt_smem[];
    __shared__ int is_last;
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z, n_split = gridDim.x;
    const int G = n_head / n_kv_head, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int hd = head_dim, RS = head_dim + 8, cpr = head_dim / 8;
    const int L = pos[t] + 1;
    const int chunk = ((L + n_split - 1) / n_split + PAGED_PAGE - 1) / PAGED_PAGE * PAGED_PAGE;
    const int p0 = split * chunk, p1 = min(L, p0 + chunk), n_act = (L + chunk - 1) / chunk;
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
                    if (h < G) sc[j * PA_MAX_G + h] = j < nrow ? acc[u] : -INFINITY;
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
                             dim3 grid, int n_head, int n_kv_head, int head_dim, float scale, cudaStream_t stream) {
    const size_t smem = pt_smem_bytes(TP, head_dim, n_head / n_kv_head); /* above the 48 KB default */
    cudaError_t e = smem_optin<paged_attn_tile_kernel<TP>>();
    if (e != cudaSuccess) return e;
    return pdl_launch(paged_attn_tile_kernel<TP>, grid, dim3(PT_THREADS), smem, stream, out, sc, q, k_cache, v_cache,
                      pos, seq, pages, page_stride, n_head, n_kv_head, head_dim, scale);
}

/* ---- split-KV decode attention on the tensor cores (head_dim 64 or 128, <= 8 heads per kv head) ---
 * The tiled kernel above does its dot products on the CUDA cores in three barrier-separated phases
 * per 64-position tile: ~8 us per layer even with one tile, ~75 us at 16k positions (~900 GB/s of
 * K/V), while the bytes alone would take ~20 us. Here each warp is on its own: block (split, kv
 * head, token) of PM_WARPS warps walks its split in 16-position sub-tiles, warp w taking sub-tiles
 * w, w + PM_WARPS, ..., each sub-tile's K and V rows copied by the warp itself (cp.async) into its
 * own ring of PM_STAGES slots, so a warp waits only on its own copies and only __syncwarp orders
 * them. Per sub-tile: S = Q K^T and O += P V as mma.m16n8k16 (f32 accumulation) with the group's
 * query heads as rows 0..G-1 of the A operand (rows 8..15 zero); K fragments by ldmatrix, V by
 * ldmatrix.trans. Q and P enter as an f16 pair hi + lo (two mma each), so scores and weights keep
 * ~f32 precision like the CUDA-core kernels and the CPU reference (the tensor cores have ~30x the
 * throughput this needs). Softmax in base 2 (Q pre-scaled by log2 e). The warps' partial
 * (m, l, O) are merged in shared memory; then, as in the tiled kernel, one split writes the output,
 * or the last block of the (token, kv head) to arrive merges the splits in split order.
 * V3 (production; paged_attention_variant 3) is the same walk with less fixed cost per launch:
 *  - Q and P go in as hi in A rows 0..7 and lo in rows 8..15 (rows the group never fills), so
 *    one mma does what two did (16 + 16 per sub-tile, not 32 + 32) and hi and lo land in separate
 *    accumulator rows, added at the end; S in two chains per 8 positions (4 deep, not 16).
 *  - pos, seq and the split's first 32 page-table entries (one per lane: round i of the warps
 *    is page p0 / PAGED_PAGE + i) are read before pdl_wait: the engine writes them by a copy
 *    before the step, no kernel does (pdl.cuh rule 1), so the pos -> pages -> K/V chain of
 *    dependent loads starts while the previous kernel finishes.
 *  - the split merge: one thread arrives (barrier, fence, atomic: cooperative groups' grid-sync
 *    pattern) and only active splits count; the last block gives each warp a head, lane s loads
 *    split s's m and l at once, and every lane keeps 8 splits' O loads (4 dims each) in flight,
 *    the next 8 issued before the current 8 are summed. The old merge's O loop had 4 loads in
 *    flight per thread and 4 outputs per thread one after another: 32 dependent L2 round trips
 *    at 32 splits. Same summation order (split 0 first, one fmaf per split) as V2. */
#define PM_WARPS 4
#define PM_SUB 16
#ifndef PM_STAGES /* the lab builds other depths (-DPM_STAGES=...) */
#define PM_STAGES 3
#endif
/* Splits hold at least this many positions: merging splits costs ~2.5 us (the partials' fence,
 * the arrival atomic, the last block's reads), more than a 4-warp block needs for 256 positions
 * (H200, kbench decode attention: 127 positions 4.8 us in one split, 7.3 in two; 1000 positions
 * 9.9 us in 256-position splits, 11.1 in 64-position ones). */
#define PM_MIN_CHUNK 256
static_assert(PM_WARPS * PM_SUB == PAGED_PAGE, "V3: round i of the warps' sub-tiles is page i of the split");
#define PM_MB 8 /* V3 merge: splits whose O loads a lane keeps in flight */

static size_t pm_smem_bytes(int head_dim) {
    const size_t ring = (size_t)PM_WARPS * PM_STAGES * 2 * PM_SUB * (head_dim + 8) * sizeof(uint16_t);
    const size_t merge = ((size_t)PM_WARPS * PA_MAX_G * (head_dim + 2)) * sizeof(float);
    const size_t weights = (size_t)PA_MAX_G * 256 * sizeof(float); /* the split merge's, n_split <= 256 */
    return ring > merge ? (ring > weights ? ring : weights) : (merge > weights ? merge : weights);
}

__device__ __forceinline__ uint32_t pm_pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&h;
}

/* x as hi + lo f16 pairs: hi = f16(x), lo = f16(x - hi) */
__device__ __forceinline__ void pm_split(float a, float b, uint32_t &hi, uint32_t &lo) {
    const __half2 h = __floats2half2_rn(a, b);
    const float2 hf = __half22float2(h);
    hi = *(const uint32_t *)&h;
    lo = pm_pack(a - hf.x, b - hf.y);
}

/* D[16x8] += A[16x16] B[16x8], the full A (V3: rows 8..15 hold the lo halves) */
__device__ __forceinline__ void pm_mma4(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* D[16x8] += A[16x16] B[16x8] with A's rows 8..15 zero (a1 = a3 = 0) */
__device__ __forceinline__ void pm_mma(float d[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void pm_ldsm4(uint32_t r[4], const void *smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"((unsigned)__cvta_generic_to_shared(smem)));
}

__device__ __forceinline__ void pm_ldsm4t(uint32_t r[4], const void *smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"((unsigned)__cvta_generic_to_shared(smem)));
}

/* 16 bytes, or zeros when !valid (cp.async's src-size 0: nothing is read from g) */
__device__ __forceinline__ void pm_cp16(void *smem, const void *g, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((unsigned)__cvta_generic_to_shared(smem)),
                 "l"(g), "r"(valid ? 16 : 0)
                 : "memory");
}

/* V3's split merge, in the last block: warp w merges heads w, w + PM_WARPS, ... of the group
 * (m, l, o: head h, split s at h * n_split + s; o rows of D). Lane s holds split s's m and l (the
 * next 32 splits in a loop), the weights go to the warp's wgt[n_act] (n_act <= 256), and lane
 * owns dims lane + 32e: its O loads are coalesced, 8 splits of them in flight. */
template <int D>
__device__ __forceinline__ void pm_merge_v3(float *out, uint16_t *out_h, const float *m, const float *l, const float *o,
                                            float *wgt, int G, int n_split, int n_act, int warp, int lane) {
    constexpr int DPL = D / 32;
    for (int h = warp; h < G; h += PM_WARPS) {
        const float *src = o + (int64_t)h * n_split * D + lane;
        float cur[PM_MB][DPL];
#pragma unroll
        for (int k = 0; k < PM_MB; k++)
#pragma unroll
            for (int e = 0; e < DPL; e++) cur[k][e] = k < n_act ? __ldcg(src + (int64_t)k * D + 32 * e) : 0.f;
        const float m0 = lane < n_act ? __ldcg(m + h * n_split + lane) : -INFINITY;
        const float l0 = lane < n_act ? __ldcg(l + h * n_split + lane) : 0.f;
        float mx = m0;
        for (int s = lane + 32; s < n_act; s += 32) mx = fmaxf(mx, __ldcg(m + h * n_split + s));
        mx = warp_max(mx); /* finite: split 0 holds position 0 */
        float f = exp2f(m0 - mx), den = f * l0;
        if (lane < n_act) wgt[lane] = f;
        for (int s = lane + 32; s < n_act; s += 32) {
            f = exp2f(__ldcg(m + h * n_split + s) - mx);
            wgt[s] = f;
            den += f * __ldcg(l + h * n_split + s);
        }
        den = warp_sum(den);
        __syncwarp();
        for (int s = lane; s < n_act; s += 32) wgt[s] /= den;
        __syncwarp();
        float acc[DPL];
#pragma unroll
        for (int e = 0; e < DPL; e++) acc[e] = 0.f;
        for (int s0 = 0; s0 < n_act; s0 += PM_MB) {
            float nxt[PM_MB][DPL]; /* the next PM_MB splits' loads go out before these are summed */
#pragma unroll
            for (int k = 0; k < PM_MB; k++)
#pragma unroll
                for (int e = 0; e < DPL; e++)
                    nxt[k][e] = s0 + PM_MB + k < n_act ? __ldcg(src + (int64_t)(s0 + PM_MB + k) * D + 32 * e) : 0.f;
#pragma unroll
            for (int k = 0; k < PM_MB; k++)
                if (s0 + k < n_act) {
                    const float w = wgt[s0 + k];
#pragma unroll
                    for (int e = 0; e < DPL; e++) acc[e] = fmaf(w, cur[k][e], acc[e]);
                }
#pragma unroll
            for (int k = 0; k < PM_MB; k++)
#pragma unroll
                for (int e = 0; e < DPL; e++) cur[k][e] = nxt[k][e];
        }
#pragma unroll
        for (int e = 0; e < DPL; e++) {
            out[h * D + lane + 32 * e] = acc[e];
            if (out_h) out_h[h * D + lane + 32 * e] = pg_f16(acc[e]);
        }
        __syncwarp(); /* wgt is read by every lane before the next head overwrites it */
    }
}

template <int D, bool V3>
__global__ void __launch_bounds__(PM_WARPS * 32, 2) paged_attn_mma_kernel(float *out, uint16_t *out_h, float *scratch,
        const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *pos, const int32_t *seq, const int32_t *pages,
        int page_stride, int n_head, int n_kv_head, float scale_log2, int kv_ready) {
    constexpr int RS = D + 8;                 /* halves per K/V row in shared memory (16 bytes of pad) */
    constexpr int SLOT = 2 * PM_SUB * RS;     /* halves per ring slot: K rows, then V rows */
    constexpr int CPR = D / 8;                /* 16-byte chunks per row */
    extern __shared__ __align__(16) unsigned char pm_smem[];
    __shared__ int is_last;
    kt_rec *tr = kt_open(KT_ATTENTION, out); /* the block timeline (trace.cuh), null unless traced */
    kt_mark(tr, 0);
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    if constexpr (!V3) pdl_wait();
    const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z, n_split = gridDim.x;
    const int G = n_head / n_kv_head, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int L = pos[t] + 1;
    const int chunk = (max(PM_MIN_CHUNK, (L + n_split - 1) / n_split) + PAGED_PAGE - 1) / PAGED_PAGE * PAGED_PAGE;
    const int p0 = split * chunk, p1 = min(L, p0 + chunk), n_act = (L + chunk - 1) / chunk;
    const int32_t *pt = pages + (int64_t)seq[t] * page_stride;
    int lane_page = 0; /* V3: the page of round `lane` of this split (chunk is whole pages) */
    if constexpr (V3) { /* pdl_wait below, after the first copies (kv_ready) */
        if (p0 + lane * PAGED_PAGE < p1) lane_page = pt[p0 / PAGED_PAGE + lane];
        if (p0 >= p1) return; /* past the context (V3 counts only active splits; nothing written) */
    }
    if (n_act == 1 && split > 0) return; /* one split holds the whole context: it writes the output */
    const int64_t kv_dim = (int64_t)n_kv_head * D, parts = (int64_t)gridDim.z * n_head * n_split;
    int *count = (int *)scratch + (int64_t)t * n_head + kvh;
    float *ms = scratch + pt_counters(n_head), *ls = ms + parts, *os = ls + parts;
    const int64_t part0 = ((int64_t)t * n_head + kvh * G) * n_split; /* head h, split s: part0 + h * n_split + s */
    float *wm = (float *)pm_smem, *wl = wm + PM_WARPS * PA_MAX_G, *wo = wl + PM_WARPS * PA_MAX_G;
    if (p0 < p1) {
        uint16_t *ring = (uint16_t *)pm_smem + (size_t)warp * PM_STAGES * SLOT;
        const int n_sub = (p1 - p0 + PM_SUB - 1) / PM_SUB;
        const int mine = n_sub > warp ? (n_sub - warp + PM_WARPS - 1) / PM_WARPS : 0;
        /* sub-tile i (the warp's i-th) into slot i % PM_STAGES; a sub-tile lies in one page. Lane
         * l copies 16-byte piece l % CPR of rows l / CPR, + RPI, + 2 RPI, ... of K and of V: its
         * sources one row stride apart and its slot offsets compile-time constants, so a piece
         * costs one add besides its copy (V3; the first form rebuilt a 64-bit address per piece:
         * ~15 integer instructions each, ncu run 48). */
        constexpr int RPI = 32 / CPR; /* rows a warp copies per round */
        const int jl = lane / CPR, el = (lane % CPR) * 8;
        const int64_t lane_off = (int64_t)jl * kv_dim + (int64_t)kvh * D + el, rpi_stride = RPI * kv_dim;
        auto issue = [&](int i) {
            if (i < mine) {
                const int b = p0 + (warp + i * PM_WARPS) * PM_SUB;
                int page;
                if constexpr (V3) /* i is warp-uniform: every lane is here */
                    page = i < 32 ? __shfl_sync(0xffffffffu, lane_page, i) : pt[p0 / PAGED_PAGE + i];
                else
                    page = pt[b / PAGED_PAGE];
                const int64_t cell0 = (int64_t)page * PAGED_PAGE + b % PAGED_PAGE;
                uint16_t *ks = ring + (i % PM_STAGES) * SLOT + jl * RS + el, *vs = ks + PM_SUB * RS;
                if constexpr (V3) {
                    const int nv = p1 - b; /* rows in the context (>= 1) */
                    const int64_t o0 = cell0 * kv_dim + lane_off, row0 = o0 - (int64_t)jl * kv_dim;
                    int64_t o = o0;
#pragma unroll
                    for (int r = 0; r < PM_SUB / RPI; r++, o += rpi_stride) {
                        const bool ok = jl + r * RPI < nv; /* past the context: zeros, from row 0's address */
                        const int64_t src = ok ? o : row0;
                        pm_cp16(ks + r * RPI * RS, kc + src, ok);
                        pm_cp16(vs + r * RPI * RS, vc + src, ok);
                    }
                } else {
#pragma unroll
                    for (int r = 0; r < PM_SUB / RPI; r++) {
                        const int j = jl + r * RPI;
                        const bool ok = b + j < p1; /* past the context: zeros (the cells may hold anything) */
                        const int64_t gi = (cell0 + (ok ? j : 0)) * kv_dim + (int64_t)kvh * D + el;
                        pm_cp16(ks + r * RPI * RS, kc + gi, ok);
                        pm_cp16(vs + r * RPI * RS, vc + gi, ok);
                    }
                }
            }
            pt_commit(); /* empty groups keep the count uniform */
        };
        /* V3 with kv_ready: the first sub-tiles that hold only positions before the token's own
         * (written by earlier passes) are copied before pdl_wait, beside the previous kernel's
         * tail; the rest after it */
        int pre = 0;
        if constexpr (V3) {
            if (kv_ready)
                for (; pre < PM_STAGES - 1 && pre < mine && p0 + (warp + pre * PM_WARPS + 1) * PM_SUB <= L - 1; pre++)
                    issue(pre);
            kt_mark(tr, 1);
            pdl_wait();
            kt_mark(tr, 2);
        }
        for (int i = pre; i < PM_STAGES - 1; i++) issue(i);
        /* Q row g (head g of the group; rows >= G zero) as A fragments, hi and lo */
        uint32_t qh[D / 16][2], ql[D / 16][2];
        {
            const float *qr = q + ((int64_t)t * n_head + kvh * G + g) * D;
            float2 qa[D / 16], qb[D / 16]; /* every load in flight before the first conversion */
#pragma unroll
            for (int s = 0; s < D / 16; s++) {
                qa[s] = qb[s] = make_float2(0.f, 0.f);
                if (g < G) {
                    qa[s] = *(const float2 *)(qr + 16 * s + 2 * tq);
                    qb[s] = *(const float2 *)(qr + 16 * s + 2 * tq + 8);
                }
            }
#pragma unroll
            for (int s = 0; s < D / 16; s++) {
                pm_split(qa[s].x * scale_log2, qa[s].y * scale_log2, qh[s][0], ql[s][0]);
                pm_split(qb[s].x * scale_log2, qb[s].y * scale_log2, qh[s][1], ql[s][1]);
            }
        }
        float o[D / 8][4];
#pragma unroll
        for (int j = 0; j < D / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
        float m = -INFINITY, l = 0.f;
        for (int i = 0; i < mine; i++) {
            issue(i + PM_STAGES - 1);
            pt_wait<PM_STAGES - 1>();
            __syncwarp(); /* every lane's copies of sub-tile i landed */
            const uint16_t *ks = ring + (i % PM_STAGES) * SLOT, *vs = ks + PM_SUB * RS;
            const int b = p0 + (warp + i * PM_WARPS) * PM_SUB;
            float s[2][4];
            if constexpr (V3) {
                float s2[2][4]; /* dims 32kk + 16..31: a second chain */
#pragma unroll
                for (int n = 0; n < 2; n++) {
                    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
                    s2[n][0] = s2[n][1] = s2[n][2] = s2[n][3] = 0.f;
#pragma unroll
                    for (int kk = 0; kk < D / 32; kk++) {
                        uint32_t kb[4]; /* dims 32kk + 0/8/16/24 of positions 8n..8n+7 */
                        pm_ldsm4(kb, ks + (8 * n + (lane & 7)) * RS + 32 * kk + 8 * (lane >> 3));
                        pm_mma4(s[n], qh[2 * kk][0], ql[2 * kk][0], qh[2 * kk][1], ql[2 * kk][1], kb[0], kb[1]);
                        pm_mma4(s2[n], qh[2 * kk + 1][0], ql[2 * kk + 1][0], qh[2 * kk + 1][1], ql[2 * kk + 1][1],
                                kb[2], kb[3]);
                    }
                    /* row g: the hi products (c0, c1), row g + 8: the lo ones (c2, c3) */
                    s[n][0] = (s[n][0] + s[n][2]) + (s2[n][0] + s2[n][2]);
                    s[n][1] = (s[n][1] + s[n][3]) + (s2[n][1] + s2[n][3]);
                }
            } else {
#pragma unroll
                for (int n = 0; n < 2; n++) {
                    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
                    for (int kk = 0; kk < D / 32; kk++) {
                        uint32_t kb[4]; /* dims 32kk + 0/8/16/24 of positions 8n..8n+7 */
                        pm_ldsm4(kb, ks + (8 * n + (lane & 7)) * RS + 32 * kk + 8 * (lane >> 3));
                        pm_mma(s[n], qh[2 * kk][0], qh[2 * kk][1], kb[0], kb[1]);
                        pm_mma(s[n], ql[2 * kk][0], ql[2 * kk][1], kb[0], kb[1]);
                        pm_mma(s[n], qh[2 * kk + 1][0], qh[2 * kk + 1][1], kb[2], kb[3]);
                        pm_mma(s[n], ql[2 * kk + 1][0], ql[2 * kk + 1][1], kb[2], kb[3]);
                    }
                }
            }
            /* row g's scores: positions 8n + 2tq (+1) of the sub-tile */
            float mx = m;
#pragma unroll
            for (int n = 0; n < 2; n++) {
                const int p = b + 8 * n + 2 * tq;
                if (p >= p1) s[n][0] = -INFINITY;
                if (p + 1 >= p1) s[n][1] = -INFINITY;
                mx = fmaxf(mx, fmaxf(s[n][0], s[n][1]));
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2)); /* finite: position b is in range */
            const float corr = exp2f(m - mx);
            m = mx;
            float pw[2][2];
#pragma unroll
            for (int n = 0; n < 2; n++) {
                pw[n][0] = exp2f(s[n][0] - mx);
                pw[n][1] = exp2f(s[n][1] - mx);
            }
            l = l * corr + (pw[0][0] + pw[0][1]) + (pw[1][0] + pw[1][1]);
            uint32_t ph0, pl0, ph1, pl1; /* P row g: positions 2tq.. (a0) and 8 + 2tq.. (a2) */
            pm_split(pw[0][0], pw[0][1], ph0, pl0);
            pm_split(pw[1][0], pw[1][1], ph1, pl1);
            /* V3: O is rescaled only when some row's max moved (at long contexts rarely after the
             * first tiles; a factor of exactly 1 would leave it as it is): 64 multiplies a lane */
            if (!V3 || __any_sync(0xffffffffu, corr != 1.0f)) {
#pragma unroll
                for (int j = 0; j < D / 8; j++) {
                    o[j][0] *= corr;
                    o[j][1] *= corr;
                    if constexpr (V3) {
                        o[j][2] *= corr;
                        o[j][3] *= corr;
                    }
                }
            }
#pragma unroll
            for (int j2 = 0; j2 < D / 16; j2++) {
                uint32_t vb[4]; /* dims 16j2 (positions 0-7, 8-15), then 16j2 + 8 */
                pm_ldsm4t(vb, vs + ((lane & 7) + 8 * ((lane >> 3) & 1)) * RS + 16 * j2 + 8 * (lane >> 4));
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    float *oj = o[2 * j2 + h];
                    if constexpr (V3) { /* rows g + 8 accumulate the lo halves' products */
                        pm_mma4(oj, ph0, pl0, ph1, pl1, vb[2 * h], vb[2 * h + 1]);
                    } else {
                        pm_mma(oj, ph0, ph1, vb[2 * h], vb[2 * h + 1]);
                        pm_mma(oj, pl0, pl1, vb[2 * h], vb[2 * h + 1]);
                    }
                }
            }
            __syncwarp(); /* slot i % PM_STAGES is read by every lane before the next issue refills it */
        }
        pt_wait<0>();
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        __syncthreads(); /* every warp is done with the ring: it becomes the merge area */
        kt_mark(tr, 4);
        if (g < G) {
            if (tq == 0) { wm[warp * PA_MAX_G + g] = m; wl[warp * PA_MAX_G + g] = l; }
            float *w = wo + (warp * PA_MAX_G + g) * D + 2 * tq;
#pragma unroll
            for (int j = 0; j < D / 8; j++)
                *(float2 *)(w + 8 * j) = V3 ? make_float2(o[j][0] + o[j][2], o[j][1] + o[j][3])
                                            : make_float2(o[j][0], o[j][1]);
        }
        __syncthreads();
        /* a warp with no sub-tile left m = -inf, l = 0, O = 0: weight exp2(-inf) = 0 */
        for (int idx = tid; idx < G * D; idx += PM_WARPS * 32) {
            const int h = idx / D, d = idx - h * D;
            float M = -INFINITY;
#pragma unroll
            for (int w = 0; w < PM_WARPS; w++) M = fmaxf(M, wm[w * PA_MAX_G + h]);
            float Ls = 0.f, Os = 0.f;
#pragma unroll
            for (int w = 0; w < PM_WARPS; w++) {
                const float f = exp2f(wm[w * PA_MAX_G + h] - M);
                Ls = fmaf(wl[w * PA_MAX_G + h], f, Ls);
                Os = fmaf(wo[(w * PA_MAX_G + h) * D + d], f, Os);
            }
            if (n_act == 1) {
                const int64_t oi = ((int64_t)t * n_head + kvh * G + h) * D + d;
                out[oi] = Os / Ls;
                if (out_h) out_h[oi] = pg_f16(Os / Ls);
            } else {
                os[(part0 + h * n_split + split) * D + d] = Os;
                if (d == 0) { ms[part0 + h * n_split + split] = M; ls[part0 + h * n_split + split] = Ls; }
            }
        }
        kt_mark(tr, 5);
        if (n_act == 1) return;
    } else if (tid < G) { /* V2 only: V3's empty splits left at the start */
        ms[part0 + tid * n_split + split] = -INFINITY;
        ls[part0 + tid * n_split + split] = 0;
    }
    if constexpr (V3) {
        /* the barrier orders every thread's partials before thread 0's fence, which makes them
         * visible before the count moves (cooperative groups' grid sync does the same) */
        __syncthreads();
        if (tid == 0) {
            __threadfence();
            const bool last = atomicAdd(count, 1) == n_act - 1;
            if (last) __threadfence();
            is_last = last;
        }
        __syncthreads();
        if (!is_last) return;
        pm_merge_v3<D>(out + ((int64_t)t * n_head + kvh * G) * D, out_h ? out_h + ((int64_t)t * n_head + kvh * G) * D : nullptr,
                       ms + part0, ls + part0, os + part0 * D,
                       (float *)pm_smem + warp * 256, G, n_split, n_act, warp, lane);
        if (tid == 0) *count = 0;
        kt_mark(tr, 5); /* the merging block's end */
        return;
    }
    /* Arrival, as in the tiled kernel: partials visible before the count moves. */
    __threadfence();
    __syncthreads();
    if (tid == 0) is_last = atomicAdd(count, 1) == n_split - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    pt_merge_splits<true, PM_WARPS * 32>(out + ((int64_t)t * n_head + kvh * G) * D, ms + part0, ls + part0,
                                         os + part0 * D, (float *)pm_smem, G, D, n_split, n_act);
    if (tid == 0) *count = 0;
}

template <int D, bool V3>
static cudaError_t pm_launch(float *out, uint16_t *out_h, float *sc, const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                             const int32_t *pos, const int32_t *seq, const int32_t *pages, int page_stride,
                             dim3 grid, int n_head, int n_kv_head, float scale, int kv_ready, cudaStream_t stream) {
    cudaError_t e = smem_optin<paged_attn_mma_kernel<D, V3>>();
    if (e != cudaSuccess) return e;
    return pdl_launch(paged_attn_mma_kernel<D, V3>, grid, dim3(PM_WARPS * 32), pm_smem_bytes(D), stream, out, out_h, sc, q,
                      k_cache, v_cache, pos, seq, pages, page_stride, n_head, n_kv_head, scale * 1.4426950408889634f,
                      kv_ready);
}

/* variant 3 (production): the tensor-core kernel's V3 where it applies (less fixed cost; PERF-LOG run
 * 34: 8b q4_k_m tg32 @ d16384 402.4 t/s, 361.1 with 2); 2: its first form; 1: the tiled CUDA-core
 * kernel (paged.h's paged_attention_variant, for the kernel lab and tests). */
static cudaError_t attention_run(int variant, float *out, uint16_t *out_h, const float *q, const uint16_t *k_cache,
                                 const uint16_t *v_cache, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                                 int page_stride, void *scratch, int n_tok, int n_head, int n_kv_head, int head_dim,
                                 int n_split, int kv_ready, float scale, cudaStream_t stream);

extern "C" cudaError_t paged_attention(float *out, const float *q, const uint16_t *k_cache,
                                       const uint16_t *v_cache, const int32_t *pos, const int32_t *seq,
                                       const int32_t *pages, int page_stride, void *scratch, int n_tok,
                                       int n_head, int n_kv_head, int head_dim, int n_split, int kv_ready,
                                       float scale, cudaStream_t stream) {
    return attention_run(3, out, nullptr, q, k_cache, v_cache, pos, seq, pages, page_stride, scratch, n_tok, n_head,
                         n_kv_head, head_dim, n_split, kv_ready, scale, stream);
}

extern "C" cudaError_t paged_attention_f16(float *out, uint16_t *out_h, const float *q, const uint16_t *k_cache,
                                           const uint16_t *v_cache, const int32_t *pos, const int32_t *seq,
                                           const int32_t *pages, int page_stride, void *scratch, int n_tok,
                                           int n_head, int n_kv_head, int head_dim, int n_split, int kv_ready,
                                           float scale, cudaStream_t stream) {
    if (!out_h) return cudaErrorInvalidValue;
    /* the tensor-core kernel's V3 only; the caller converts out itself otherwise */
    if (head_dim != 64 && head_dim != 128) return cudaErrorNotSupported;
    return attention_run(3, out, out_h, q, k_cache, v_cache, pos, seq, pages, page_stride, scratch, n_tok, n_head,
                         n_kv_head, head_dim, n_split, kv_ready, scale, stream);
}

extern "C" cudaError_t paged_attention_variant(int variant, float *out, const float *q, const uint16_t *k_cache,
                                               const uint16_t *v_cache, const int32_t *pos, const int32_t *seq,
                                               const int32_t *pages, int page_stride, void *scratch, int n_tok,
                                               int n_head, int n_kv_head, int head_dim, int n_split, int kv_ready,
                                               float scale, cudaStream_t stream) {
    if (variant < 1 || variant > 3) return cudaErrorInvalidValue;
    return attention_run(variant, out, nullptr, q, k_cache, v_cache, pos, seq, pages, page_stride, scratch, n_tok,
                         n_head, n_kv_head, head_dim, n_split, kv_ready, scale, stream);
}

static cudaError_t attention_run(int variant, float *out, uint16_t *out_h, const float *q, const uint16_t *k_cache,
                                 const uint16_t *v_cache, const int32_t *pos, const int32_t *seq, const int32_t *pages,
                                 int page_stride, void *scratch, int n_tok, int n_head, int n_kv_head, int head_dim,
                                 int n_split, int kv_ready, float scale, cudaStream_t stream) {
    if (n_tok <= 0 || n_tok > PAGED_ATT_TOKENS || n_head <= 0 || n_kv_head <= 0 || n_head % n_kv_head ||
        n_head / n_kv_head > PA_MAX_G || head_dim <= 0 || head_dim > 256 || n_split <= 0 || page_stride <= 0)
        return cudaErrorInvalidValue;
    dim3 grid((unsigned)n_split, (unsigned)n_kv_head, (unsigned)n_tok);
    float *sc = (float *)scratch;
    if (head_dim % 8 == 0) {
        if (n_split > 256) return cudaErrorInvalidValue; /* the merge's weights must fit the tile area */
        if (variant >= 2 && (head_dim == 64 || head_dim == 128)) { /* n_head / n_kv_head <= 8: checked above */
#define PM_LAUNCH(D, V3) pm_launch<D, V3>(out, V3 ? out_h : nullptr, sc, q, k_cache, v_cache, pos, seq, pages, page_stride, grid, n_head, \
                                          n_kv_head, scale, kv_ready, stream)
            if (variant == 3) return head_dim == 64 ? PM_LAUNCH(64, true) : PM_LAUNCH(128, true);
            return head_dim == 64 ? PM_LAUNCH(64, false) : PM_LAUNCH(128, false);
#undef PM_LAUNCH
        }
        /* 64-position tiles up to head_dim 128 (~76 KB of shared memory), 32 above */
        return head_dim <= 128 ? pt_launch<64>(out, sc, q, k_cache, v_cache, pos, seq, pages, page_stride, grid, n_head,
                                               n_kv_head, head_dim, scale, stream)
                               : pt_launch<32>(out, sc, q, k_cache, v_cache, pos, seq, pages, page_stride, grid, n_head,
                                               n_kv_head, head_dim, scale, stream);
    }
    int epl = (head_dim + 31) / 32;
    cudaError_t e;
    sc += pt_counters(n_head); /* the untiled kernels use no counters */
#define PA_LAUNCH(E) (e = pdl_launch(paged_attn_split_kernel<E>, grid, dim3(PA_WARPS * 32), 0, stream, sc, q, k_cache, \
                                     v_cache, pos, seq, pages, page_stride, n_head, n_kv_head, head_dim, scale))
    if (epl <= 1) PA_LAUNCH(1);
    else if (epl <= 2) PA_LAUNCH(2);
    else if (epl <= 4) PA_LAUNCH(4);
    else PA_LAUNCH(8);
#undef PA_LAUNCH
    if (e != cudaSuccess) return e;
    return pdl_launch(paged_attn_combine_kernel, dim3((unsigned)n_head, (unsigned)n_tok), dim3(128), 0, stream, out,
                      (const float *)sc, n_head, head_dim, n_split);
}

/* One thread per rotated pair of Q or K or value of V: blockIdx.y is the token, so one token's
 * work spreads over many blocks. */
__global__ void paged_rope_store_kernel(float *q_out, uint16_t *kc, uint16_t *vc, const float *q, int64_t sq,
                                        const float *k, int64_t sk, const float *v, int64_t sv, const int32_t *pos,
                                        const int32_t *cell, int n_head, int n_kv_head, int head_dim, int n_rot,
                                        float theta) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const int t = blockIdx.y, half = head_dim / 2, n_pairs = (n_head + n_kv_head) * half;
    const int64_t kv_dim = (int64_t)n_kv_head * head_dim, at = (int64_t)cell[t] * kv_dim;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_pairs) {
        if (i - n_pairs < kv_dim) vc[at + i - n_pairs] = __half_as_ushort(__float2half_rn(v[t * sv + i - n_pairs]));
        return;
    }
    const int h = i / half, j = i % half, is_k = h >= n_head;
    const int64_t e = (int64_t)(is_k ? h - n_head : h) * head_dim + 2 * j;
    const float *src = is_k ? k + t * sk : q + t * sq;
    float x0 = src[e], x1 = src[e + 1];
    rope_pair(x0, x1, pos[t], 2 * j, n_rot, theta);
    if (is_k) {
        kc[at + e] = __half_as_ushort(__float2half_rn(x0));
        kc[at + e + 1] = __half_as_ushort(__float2half_rn(x1));
    } else {
        float *qo = q_out + (int64_t)t * n_head * head_dim;
        qo[e] = x0;
        qo[e + 1] = x1;
    }
}

extern "C" cudaError_t paged_rope_store(float *q_out, uint16_t *k_cache, uint16_t *v_cache, const float *q,
                                        int64_t sq, const float *k, int64_t sk, const float *v, int64_t sv,
                                        const int32_t *pos, const int32_t *cell, int n_tok, int n_head,
                                        int n_kv_head, int head_dim, int n_rot, float theta, cudaStream_t stream) {
    if (n_tok <= 0 || n_tok > 65535 || n_head <= 0 || n_kv_head <= 0 || head_dim <= 0 || head_dim % 2 ||
        n_rot % 2 || n_rot > head_dim)
        return cudaErrorInvalidValue;
    int64_t items = (int64_t)(n_head + n_kv_head) * (head_dim / 2) + (int64_t)n_kv_head * head_dim;
    dim3 grid((unsigned)((items + 255) / 256), (unsigned)n_tok);
    return pdl_launch(paged_rope_store_kernel, grid, dim3(256), 0, stream, q_out, k_cache, v_cache, q, sq, k, sk, v, sv,
                      pos, cell, n_head, n_kv_head, head_dim, n_rot, theta);
}

/* One block per row, one float4 per thread where the row allows (dim % 4 == 0), so a decode
 * step's single row is read in one round trip rather than a chain of dependent loads. */
__global__ void __launch_bounds__(1024) paged_add_rmsnorm_kernel(float *x, float *out, uint16_t *out_h,
                                                                 const float *d, int parts, int64_t plane,
                                                                 const float *weight, int dim, float eps) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    float *xr = x + (int64_t)blockIdx.x * dim, *o = out + (int64_t)blockIdx.x * dim;
    uint16_t *oh = out_h ? out_h + (int64_t)blockIdx.x * dim : nullptr;
    const float *dr = d + (int64_t)blockIdx.x * dim;
    const bool vec = dim % 4 == 0;
    const int step = vec ? 4 * blockDim.x : blockDim.x;
    float ss = 0;
    for (int i = vec ? 4 * threadIdx.x : threadIdx.x; i < dim; i += step) {
        if (vec) {
            float4 a = *(const float4 *)(xr + i), b = *(const float4 *)(dr + i);
            for (int s = 1; s < parts; s++) { /* gemm_sum's order: plane 0, then 1, ... */
                const float4 c = *(const float4 *)(dr + s * plane + i);
                b.x += c.x; b.y += c.y; b.z += c.z; b.w += c.w;
            }
            a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
            *(float4 *)(xr + i) = a;
            ss = fmaf(a.x, a.x, fmaf(a.y, a.y, fmaf(a.z, a.z, fmaf(a.w, a.w, ss))));
        } else {
            float b = dr[i];
            for (int s = 1; s < parts; s++) b += dr[s * plane + i];
            float a = xr[i] + b;
            xr[i] = a;
            ss = fmaf(a, a, ss);
        }
    }
    if (!weight) return; /* paged_add_rmsnorm_sum's add alone (uniform: every thread leaves here) */
    /* Each thread rereads only what it wrote, so out may alias d. */
    const float r = rsqrtf(block_sum(ss) / (float)dim + eps);
    for (int i = vec ? 4 * threadIdx.x : threadIdx.x; i < dim; i += step) {
        if (vec) {
            float4 a = *(const float4 *)(xr + i), w = *(const float4 *)(weight + i);
            const float4 v = make_float4(a.x * r * w.x, a.y * r * w.y, a.z * r * w.z, a.w * r * w.w);
            *(float4 *)(o + i) = v;
            if (oh)
                *(uint2 *)(oh + i) = make_uint2(pg_f16(v.x) | (uint32_t)pg_f16(v.y) << 16,
                                                pg_f16(v.z) | (uint32_t)pg_f16(v.w) << 16);
        } else {
            const float v = xr[i] * r * weight[i];
            o[i] = v;
            if (oh) oh[i] = pg_f16(v);
        }
    }
}

static cudaError_t add_rmsnorm_launch(float *x, float *out, uint16_t *out_h, const float *d, int parts,
                                      int64_t plane, const float *weight, int rows, int dim, float eps,
                                      cudaStream_t stream) {
    if (rows <= 0 || dim <= 0) return cudaErrorInvalidValue;
    int per = dim % 4 == 0 ? dim / 4 : dim, threads = (per + 31) / 32 * 32;
    return pdl_launch(paged_add_rmsnorm_kernel, dim3(rows), dim3(threads < 1024 ? threads : 1024), 0, stream, x, out,
                      out_h, d, parts, plane, weight, dim, eps);
}

extern "C" cudaError_t paged_add_rmsnorm(float *x, float *out, const float *d, const float *weight, int rows,
                                         int dim, float eps, cudaStream_t stream) {
    if (!weight || !out) return cudaErrorInvalidValue;
    return add_rmsnorm_launch(x, out, nullptr, d, 1, 0, weight, rows, dim, eps, stream);
}

extern "C" cudaError_t paged_add_rmsnorm_sum(float *x, float *out, uint16_t *out_h, const float *d, int parts,
                                             int64_t plane, const float *weight, int rows, int dim, float eps,
                                             cudaStream_t stream) {
    /* each thread reads only its own elements of every plane before writing them to out, so out
     * may be plane 0 (d itself) but not overlap the later planes */
    const float *later = d + plane, *end = d + parts * plane;
    if (parts < 1 || (parts > 1 && (plane < (int64_t)rows * dim || (plane % 4 && dim % 4 == 0) ||
                                    (out && out < end && later < out + (int64_t)rows * dim))) ||
        (out_h && dim % 4 == 0 && (uintptr_t)out_h % 8) || (weight && !out) || (!weight && out_h))
        return cudaErrorInvalidValue;
    return add_rmsnorm_launch(x, out, out_h, d, parts, plane, weight, rows, dim, eps, stream);
}

__global__ void paged_swiglu_kernel(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u, int64_t su,
                                    int n_ff) {
    kt_rec *tr = kt_open(KT_SWIGLU, out); /* the block timeline (trace.cuh), null unless traced */
    kt_mark(tr, 0);
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    kt_mark(tr, 2);
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int t = blockIdx.y;
    if (i < n_ff) {
        float a = g[t * sg + i];
        const float v = a / (1.0f + expf(-a)) * u[t * su + i];
        out[(int64_t)t * n_ff + i] = v;
        if (out_h) out_h[(int64_t)t * n_ff + i] = pg_f16(v);
    }
    kt_mark(tr, 5);
}

extern "C" cudaError_t paged_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s) { return kt_set(buf, cap, s); }

static cudaError_t swiglu_launch(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u, int64_t su,
                                 int n_tok, int n_ff, cudaStream_t stream) {
    if (n_tok <= 0 || n_tok > 65535 || n_ff <= 0) return cudaErrorInvalidValue;
    return pdl_launch(paged_swiglu_kernel, dim3((unsigned)((n_ff + 255) / 256), (unsigned)n_tok), dim3(256), 0, stream,
                      out, out_h, g, sg, u, su, n_ff);
}

extern "C" cudaError_t paged_swiglu(float *out, const float *g, int64_t sg, const float *u, int64_t su, int n_tok,
                                    int n_ff, cudaStream_t stream) {
    return swiglu_launch(out, nullptr, g, sg, u, su, n_tok, n_ff, stream);
}

extern "C" cudaError_t paged_swiglu_f16(float *out, uint16_t *out_h, const float *g, int64_t sg, const float *u,
                                        int64_t su, int n_tok, int n_ff, cudaStream_t stream) {
    if (!out_h) return cudaErrorInvalidValue;
    return swiglu_launch(out, out_h, g, sg, u, su, n_tok, n_ff, stream);
}

__global__ void paged_to_f16_kernel(uint16_t *out, const float *in, int64_t n) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = pg_f16(in[i]);
}

extern "C" cudaError_t paged_to_f16(uint16_t *out, const float *in, int64_t n, cudaStream_t stream) {
    if (n <= 0) return cudaErrorInvalidValue;
    /* with the PDL attribute like its neighbours: a plain launch would hold the next kernel's
     * blocks back until this grid had ended (every GEMM of a batched step follows one) */
    return pdl_launch(paged_to_f16_kernel, dim3((unsigned)((n + 255) / 256)), dim3(256), 0, stream, out, in, n);
}

__global__ void paged_gather_kernel(float *out, const float *in, const int32_t *idx, int dim) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    const float *src = in + (int64_t)idx[blockIdx.x] * dim;
    float *dst = out + (int64_t)blockIdx.x * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

extern "C" cudaError_t paged_gather_rows(float *out, const float *in, const int32_t *idx, int n, int dim,
                                         cudaStream_t stream) {
    if (n <= 0 || dim <= 0) return cudaErrorInvalidValue;
    return pdl_launch(paged_gather_kernel, dim3(n), dim3(256), 0, stream, out, in, idx, dim);
}

template <bool F16>
__global__ void paged_matvec_plain_kernel(float *y, const void *w, const float *x, int64_t rows, int64_t k,
                                          int n) {
    pdl_trigger(); /* PDL (pdl.cuh): the next kernel may start; this one waits for the last */
    pdl_wait();
    int64_t r = blockIdx.x * 4 + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    for (int t = 0; t < n; t++) {
        const float *xt = x + (int64_t)t * k;
        float s = 0;
        for (int64_t i = lane; i < k; i += 32) {
            float wv = F16 ? __half2float(__ushort_as_half(((const uint16_t *)w)[r * k + i]))
                           : ((const float *)w)[r * k + i];
            s = fmaf(wv, xt[i], s);
        }
        s = warp_sum(s);
        if (lane == 0) y[(int64_t)t * rows + r] = s;
    }
}

extern "C" cudaError_t paged_matvec_plain(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows,
                                          int64_t k, int n, cudaStream_t stream) {
    if (rows <= 0 || k <= 0 || n <= 0 || (wtype != QUANT_F32 && wtype != QUANT_F16)) return cudaErrorInvalidValue;
    unsigned grid = (unsigned)((rows + 3) / 4);
    return pdl_launch(wtype == QUANT_F16 ? paged_matvec_plain_kernel<true> : paged_matvec_plain_kernel<false>,
                      dim3(grid), dim3(128), 0, stream, y, w, x, rows, k, n);
}
