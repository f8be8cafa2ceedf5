/* The tensor-core split-KV decode attention kernel of paged_attention (paged.h; V3 production)
 * and its launcher, included by paged_attention.cu. */
#ifndef MGI_KERNELS_PAGED_MMA_CUH
#define MGI_KERNELS_PAGED_MMA_CUH

#include "kernels/paged_common.cuh"
#include "kernels/pdl.cuh"
#include "kernels/optin.cuh"
#include "kernels/trace.cuh"

/* ---- split-KV decode attention on the tensor cores (head_dim 64, 128 or 256 (V3 only: 254
 * registers a thread, no spill, its ring 99 KB), <= 8 heads per kv head) ---
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
 *  - pos, seq, (QN) the token's cell and the split's first 32 page-table entries (one per lane:
 *    round i of the warps is page p0 / PAGED_PAGE + i) are read before pdl_wait: the engine writes them by a copy
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

/* QN (paged_attention_qkn; V3): the token's query and key come unnormed and
 * unturned. Before its PDL wait the block puts the cos and sin of its token's pairs and both norm
 * weights in shared memory (tables and weights: no kernel writes them); each lane norms and turns
 * the query values it loads (a head's values lie in the 4 lanes of a row; a NEOX pair's two values
 * in one lane, D / 2 apart, an adjacent pair in one float2). The key of the token's own position
 * is needed by one warp of one block (its split holds the position; no other block reads that
 * cell): that warp loads it after the wait beside its query loads (lane l holds dims l + 32 e),
 * norms (f32 sums, as the query's) and turns it, stores it to the cache for later steps and writes
 * it over the cell's row in its ring slot once the slot's copy (of whatever the cell held) has
 * landed. recipe.cu's unfolded norm (prompt passes) keeps f64 sums: the two differ by ~1e-7 of a
 * value, under the cache's f16 rounding. */
template <int D>
__device__ __forceinline__ void pm_qkn_key(uint16_t kh[D / 32], const paged_qk_norm &qk, float v[D / 32],
                                           const float *cs, const float *sn, const float *kw, int lane) {
    float ss = 0; /* f32 sums, as the query's below */
#pragma unroll
    for (int e = 0; e < D / 32; e++) ss = fmaf(v[e], v[e], ss);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float sc = rsqrtf(ss / D + qk.eps);
#pragma unroll
    for (int e = 0; e < D / 32; e++) v[e] = v[e] * sc * kw[lane + 32 * e];
    if (qk.neox) { /* n_rot == D: dims d and d + D / 2 are e and e + D / 64 of this lane */
#pragma unroll
        for (int e = 0; e < D / 64; e++) {
            const int i = lane + 32 * e;
            const float a = v[e], b = v[e + D / 64];
            v[e] = a * cs[i] - b * sn[i];
            v[e + D / 64] = a * sn[i] + b * cs[i];
        }
    } else { /* pairs (2i, 2i + 1): the partner is lane ^ 1's value */
#pragma unroll
        for (int e = 0; e < D / 32; e++) {
            const float pv = __shfl_xor_sync(0xffffffffu, v[e], 1);
            const int d = lane + 32 * e, i = d >> 1;
            if (d < qk.n_rot) v[e] = (lane & 1) ? pv * sn[i] + v[e] * cs[i] : v[e] * cs[i] - pv * sn[i];
        }
    }
#pragma unroll
    for (int e = 0; e < D / 32; e++) kh[e] = pg_f16(v[e]);
}

/* RC (paged_attention_recipe): a window (window > 0: positions before lo = pos - window + 1
 * masked, the walk from lo's page on, so the page rounds of V3 stay whole pages) and a score
 * softcap (cap2 = softcap log2(e), in the base-2 units of the scores); the plain instances
 * compile without either. */
template <int D, bool V3, bool RC, bool QN = false>
__global__ void __launch_bounds__(PM_WARPS * 32, 2) paged_attn_mma_kernel(float *out, uint16_t *out_h, float *scratch,
        const float *q,
        const uint16_t *kc, const uint16_t *vc, const int32_t *pos, const int32_t *seq, const int32_t *pages,
        int page_stride, int n_head, int n_kv_head, float scale_log2, int kv_ready, int window, float cap2,
        paged_qk_norm qk) {
    static_assert(!QN || V3, "QN: V3 only");
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
    const int P = pos[t], lo = RC && window > 0 && P >= window ? P - window + 1 : 0;
    const int own_cell = QN ? qk.cell[t] : 0; /* QN: the key's cache row (the engine's copy, as pos) */
    const int base = lo / PAGED_PAGE * PAGED_PAGE, L = P + 1 - base; /* positions base..P walked */
    const int chunk = (max(PM_MIN_CHUNK, (L + n_split - 1) / n_split) + PAGED_PAGE - 1) / PAGED_PAGE * PAGED_PAGE;
    const int p0 = base + split * chunk, p1 = base + min(L, split * chunk + chunk), n_act = (L + chunk - 1) / chunk;
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
        /* QN: the token's cos and sin per pair, the Q and K norm weights */
        __shared__ float qn_cs[QN ? D / 2 : 1], qn_sn[QN ? D / 2 : 1], qn_w[QN ? 2 * D : 1];
        if constexpr (QN) {
            for (int i = tid; i < qk.n_rot / 2; i += PM_WARPS * 32) {
                const double th = (double)P * qk.angle[i];
                float s, c;
                sincosf((float)(th - 6.283185307179586 * floor(th * 0.15915494309189535)), &s, &c);
                qn_cs[i] = (float)(c * qk.mscale);
                qn_sn[i] = (float)(s * qk.mscale);
            }
            for (int i = tid; i < D; i += PM_WARPS * 32) {
                qn_w[i] = qk.q_norm[i];
                qn_w[D + i] = qk.k_norm[i];
            }
            __syncthreads();
        }
        if constexpr (V3) {
            if (kv_ready)
                for (; pre < PM_STAGES - 1 && pre < mine && p0 + (warp + pre * PM_WARPS + 1) * PM_SUB <= P; pre++)
                    issue(pre);
            kt_mark(tr, 1);
            pdl_wait();
            kt_mark(tr, 2);
        }
        /* The copies first (the longest chain), then the loads of Q and (QN) of the token's raw key,
         * all in flight before any of them is used: the key's norm waited on its own load before
         * the Q loads went out (two round trips in a row for the warp that owns position P). */
        for (int i = pre; i < PM_STAGES - 1; i++) issue(i);
        /* QN: the warp whose sub-tile holds position P (in this split only) turns and stores its key */
        int own = -1;
        uint16_t kh[QN ? D / 32 : 1];
        float kraw[QN ? D / 32 : 1];
        if constexpr (QN) {
            const int st = (P - p0) / PM_SUB;
            if (P >= p0 && P < p1 && st % PM_WARPS == warp) {
                own = st / PM_WARPS;
                const float *kr = qk.k_raw + (int64_t)t * kv_dim + (int64_t)kvh * D + lane;
#pragma unroll
                for (int e = 0; e < D / 32; e++) kraw[e] = kr[32 * e];
            }
        }
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
            if constexpr (QN) {
                if (own >= 0) { /* warp-uniform */
                    pm_qkn_key<D>(kh, qk, kraw, qn_cs, qn_sn, qn_w + D, lane);
                    uint16_t *kg = qk.k_store + (int64_t)own_cell * kv_dim + (int64_t)kvh * D + lane;
#pragma unroll
                    for (int e = 0; e < D / 32; e++) kg[32 * e] = kh[e];
                }
            }
            if constexpr (QN) { /* row g's head: its norm over the 4 lanes of the row, then RoPE */
                /* the sum of squares in f32 (as llama.cpp's rms_norm): in f64, with a conversion
                 * per value and f64 shuffles, this part took ~0.45 us more a layer on the critical
                 * path (PERF-LOG run 190: Qwen3-8B tg128 -1%) */
                float ss = 0;
#pragma unroll
                for (int s = 0; s < D / 16; s++)
                    ss += (qa[s].x * qa[s].x + qa[s].y * qa[s].y) + (qb[s].x * qb[s].x + qb[s].y * qb[s].y);
                ss += __shfl_xor_sync(0xffffffffu, ss, 1);
                ss += __shfl_xor_sync(0xffffffffu, ss, 2);
                const float sc = rsqrtf(ss / D + qk.eps);
#pragma unroll
                for (int s = 0; s < D / 16; s++) { /* dims 16 s + 2 tq (+1), + 8 (+9) */
                    const int d = 16 * s + 2 * tq;
                    qa[s].x = qa[s].x * sc * qn_w[d];
                    qa[s].y = qa[s].y * sc * qn_w[d + 1];
                    qb[s].x = qb[s].x * sc * qn_w[d + 8];
                    qb[s].y = qb[s].y * sc * qn_w[d + 9];
                }
                auto turn = [&](float &a, float &b, int i) {
                    const float x0 = a, x1 = b;
                    a = x0 * qn_cs[i] - x1 * qn_sn[i];
                    b = x0 * qn_sn[i] + x1 * qn_cs[i];
                };
                if (qk.neox) { /* n_rot == D: slot s pairs with slot s + D / 32 */
#pragma unroll
                    for (int s = 0; s < D / 32; s++) {
                        const int d = 16 * s + 2 * tq;
                        turn(qa[s].x, qa[s + D / 32].x, d);
                        turn(qa[s].y, qa[s + D / 32].y, d + 1);
                        turn(qb[s].x, qb[s + D / 32].x, d + 8);
                        turn(qb[s].y, qb[s + D / 32].y, d + 9);
                    }
                } else {
#pragma unroll
                    for (int s = 0; s < D / 16; s++) {
                        const int d = 16 * s + 2 * tq;
                        if (d < qk.n_rot) turn(qa[s].x, qa[s].y, d >> 1);
                        if (d + 8 < qk.n_rot) turn(qb[s].x, qb[s].y, (d + 8) >> 1);
                    }
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
        kt_mark(tr, 3);
        for (int i = 0; i < mine; i++) {
            issue(i + PM_STAGES - 1);
            pt_wait<PM_STAGES - 1>();
            __syncwarp(); /* every lane's copies of sub-tile i landed */
            const uint16_t *ks = ring + (i % PM_STAGES) * SLOT, *vs = ks + PM_SUB * RS;
            const int b = p0 + (warp + i * PM_WARPS) * PM_SUB;
            if constexpr (QN) {
                if (i == own) { /* the token's own row: its turned key over what the copy brought */
                    uint16_t *kr = ring + (i % PM_STAGES) * SLOT + (P - b) * RS + lane;
#pragma unroll
                    for (int e = 0; e < D / 32; e++) kr[32 * e] = kh[e];
                    __syncwarp();
                }
            }
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
                if constexpr (RC) {
                    if (cap2 > 0.0f) {
                        s[n][0] = cap2 * tanhf(s[n][0] / cap2);
                        s[n][1] = cap2 * tanhf(s[n][1] / cap2);
                    }
                    if (p < lo) s[n][0] = -INFINITY;
                    if (p + 1 < lo) s[n][1] = -INFINITY;
                }
                if (p >= p1) s[n][0] = -INFINITY;
                if (p + 1 >= p1) s[n][1] = -INFINITY;
                mx = fmaxf(mx, fmaxf(s[n][0], s[n][1]));
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2)); /* finite: position b is in range */
            /* RC: a sub-tile wholly before the window, with none in range before it, leaves mx at
             * -inf: its weights 0 and m, l, O as they were (zero) */
            const float sub = RC && mx == -INFINITY ? 0.0f : mx;
            const float corr = exp2f(m - sub);
            m = mx;
            float pw[2][2];
#pragma unroll
            for (int n = 0; n < 2; n++) {
                pw[n][0] = exp2f(s[n][0] - sub);
                pw[n][1] = exp2f(s[n][1] - sub);
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

template <int D, bool V3, bool RC, bool QN = false>
static cudaError_t pm_launch(float *out, uint16_t *out_h, float *sc, const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                             const int32_t *pos, const int32_t *seq, const int32_t *pages, int page_stride,
                             dim3 grid, int n_head, int n_kv_head, float scale, int kv_ready, int window, float softcap,
                             cudaStream_t stream, const paged_qk_norm *qk = nullptr) {
    cudaError_t e = smem_optin<paged_attn_mma_kernel<D, V3, RC, QN>>();
    if (e != cudaSuccess) return e;
    return pdl_launch(paged_attn_mma_kernel<D, V3, RC, QN>, grid, dim3(PM_WARPS * 32), pm_smem_bytes(D), stream, out,
                      out_h, sc, q, k_cache, v_cache, pos, seq, pages, page_stride, n_head, n_kv_head,
                      scale * 1.4426950408889634f, kv_ready, window, softcap * 1.4426950408889634f,
                      qk ? *qk : paged_qk_norm{});
}

#endif
