/* The decode matvec's production kernels, part 2: v11's ring, the kernel v10 and v11 share
 * (matvec_v10; one block per SM, the decode fusions in its prologue and epilogue), its two-matrix
 * form and their launchers. */
#ifndef MGI_KERNELS_MATVEC_RING_CUH
#define MGI_KERNELS_MATVEC_RING_CUH

#include "kernels/matvec_dp4a.cuh"

/* ---------------------------------------------------------------- v11: v10 through a ring ---- */
/* v11 = v10 (option MV11_OPT: same grid, X staging, group arithmetic, fused prologue and
 * epilogue) with each warp's units streamed through a ring of S slots in shared memory. v10 holds
 * its bytes in flight in registers (at most 2 groups per warp, 16 x 2 x 2304 = 74 KB per SM, one
 * fewer between a group's use and its reload), and ncu found its warps (v6's, same scheme) waiting
 * on global loads; v11's lanes copy the warp's next units with cp.async.cg (16 bytes a lane, L2
 * only, no registers held), so S units per warp are in flight while one is computed: 16 x S x
 * 2304 bytes per SM for Q4 (S = 4: 147 KB, about half of an SM's share of a 14336x4096 Q4_0
 * matrix, issued before X is staged). A unit is read out of its slot (LDS.128, as the global
 * loads were) just before its arithmetic, and the slot is refilled with the unit S ahead. Per
 * unit that costs ~35 more instructions than v10's loads (SASS, Q4_0, one token: ~220 against
 * ~185), which should not matter: by the same count v10 issues on about a fifth of its cycles
 * (14336x4096 at 55% of copy: 109 units per SM in ~14 us on 4 schedulers; an estimate, not ncu).
 *   Slot of a unit: its bytes of each stream of the v2 layout back to back, quants (2048) then
 *   Q4: scales 256; Q8_0: scales 128; Q6_K: high bits 1024, scales 256, d 32. Every stream's unit
 *   is a whole number of 16-byte pieces at a 16-byte aligned offset, so lane l copies pieces l,
 *   l + 32, ... of each; Q8_0's quants are placed so that a lane's two 16-byte records of a chunk
 *   land 512 bytes apart (mv10_group<Q8_0>::load), which makes the reads conflict-free.
 *   Order per unit: cp.async.wait_group S - 1 (this lane's copies of the unit are done), a
 *   __syncwarp (the other lanes' too: scales are read by lanes that did not copy them), the
 *   loads into registers, a __syncwarp (every lane has read the slot), the refill of that slot
 *   and its commit (an empty group past the warp's last unit, so the count stays S - 1), then the
 *   arithmetic. The ring sits before X in shared memory; S is chosen at launch from what the rest
 *   leaves (mv11_stages, at most the cap, 2 or more, else v10 runs). */
#define MV11_STAGES 4     /* the production cap on the ring depth */
#define MV11_STAGES_MAX 6 /* mv11_wait's largest count + 1 */

template <int T> __host__ __device__ constexpr int mv11_slot_bytes() {
    return T == QUANT_Q6_K ? 3360 : T == QUANT_Q8_0 ? 2176 : T == QUANT_Q5_K ? 2816 : 2304;
}

/* The lane's view of the slot at shared address slot as mv10_group::load reads it (mv10_source's
 * offsets within a unit). */
template <int T>
__device__ __forceinline__ mv10_at<uint32_t> mv11_slot(uint32_t slot, int lane, int g) {
    mv10_at<uint32_t> p;
    p.q = slot + 16 * lane;
    p.h = p.d = 0;
    if constexpr (T == QUANT_Q6_K) {
        p.h = slot + 2048 + 8 * lane;
        p.s = slot + 3072 + 4 * g;
        p.d = slot + 3328 + 2 * g;
    } else {
        p.s = slot + 2048 + (mv10_kmin<T>() ? 16 : 8) * g;
        if constexpr (T == QUANT_Q5_K) p.h = slot + 2304 + 16 * lane;
    }
    return p;
}

/* The lane's copy sources in every stream for the next unit to copy (its piece `lane` of each),
 * moved on a unit by mv11_next, and its quants' place in a slot (qd bytes past the slot). */
struct mv11_cp { const uint8_t *q, *s, *h, *d; uint32_t qd; };
template <int T> __host__ __device__ constexpr int mv11_scale_bytes() { return T == QUANT_Q8_0 ? 128 : 256; }

template <int T>
__device__ __forceinline__ mv11_cp mv11_copier(const uint8_t *w, int64_t R16, int64_t C, int64_t unit, int lane) {
    mv11_cp c;
    const int64_t RC = R16 * C;
    c.q = w + unit * 2048 + 16 * lane;
    c.h = c.d = nullptr;
    /* Q8_0: piece p of a chunk (lane l holds pieces 2l, 2l + 1) to 32 (p & 1) + (p >> 1) */
    c.qd = T == QUANT_Q8_0 ? 512 * (lane & 1) + 16 * (lane >> 1) : 16 * lane;
    if constexpr (T == QUANT_Q6_K) {
        c.h = w + RC * 512 + unit * 1024 + 16 * lane;
        c.s = w + RC * 768 + unit * 256 + 16 * lane;
        c.d = w + RC * 832 + unit * 32 + 16 * lane;
    } else {
        c.s = w + RC * (T == QUANT_Q8_0 ? 1024 : 512) + unit * mv11_scale_bytes<T>() + 16 * lane;
        if constexpr (T == QUANT_Q5_K) c.h = w + mv5_high(R16, C) + unit * 512 + 16 * lane;
    }
    return c;
}

template <int T>
__device__ __forceinline__ void mv11_next(mv11_cp &c) {
    c.q += 2048;
    c.s += mv11_scale_bytes<T>();
    if constexpr (T == QUANT_Q6_K) {
        c.h += 1024;
        c.d += 32;
    }
    if constexpr (T == QUANT_Q5_K) c.h += 512;
}

__device__ __forceinline__ void mv11_cp16(uint32_t dst, const uint8_t *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void mv11_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

/* cp.async.wait_group n for a run-time n (the instruction takes an immediate): every group of this
 * thread but the n most recent is complete. n is 1 to MV11_STAGES_MAX - 1 (uniform over the warp);
 * one predicated wait per count (SASS: the compares hoisted out of the loop, uniform branches
 * around the DEPBARs, ~6 instructions; a switch became a jump table through the constant bank). */
__device__ __forceinline__ void mv11_wait(int n) {
    static_assert(MV11_STAGES_MAX == 6, "one wait per count");
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "setp.eq.s32 p, %0, 1;\n\t@p cp.async.wait_group 1;\n\t"
                 "setp.eq.s32 p, %0, 2;\n\t@p cp.async.wait_group 2;\n\t"
                 "setp.eq.s32 p, %0, 3;\n\t@p cp.async.wait_group 3;\n\t"
                 "setp.eq.s32 p, %0, 4;\n\t@p cp.async.wait_group 4;\n\t"
                 "setp.eq.s32 p, %0, 5;\n\t@p cp.async.wait_group 5;\n\t}" ::"r"(n) : "memory");
}

/* This lane's share of the copies of c's unit into a slot (not committed): wq = the slot + c.qd,
 * wl = the slot + 16 lane (the other streams' pieces sit in the slot's order). */
template <int T>
__device__ __forceinline__ void mv11_issue(uint32_t wq, uint32_t wl, const mv11_cp &c, int lane) {
#pragma unroll
    for (int m = 0; m < 4; m++) /* quants: 128 pieces */
        mv11_cp16(wq + (T == QUANT_Q8_0 ? 1024 * (m >> 1) + 256 * (m & 1) : 512 * m), c.q + 512 * m);
    if constexpr (T == QUANT_Q6_K) {
        mv11_cp16(wl + 2048, c.h); /* high bits: 64 pieces */
        mv11_cp16(wl + 2560, c.h + 512);
        if (lane < 16) mv11_cp16(wl + 3072, c.s); /* scales: 16 */
        if (lane < 2) mv11_cp16(wl + 3328, c.d);  /* d: 2 */
    } else {
        if (lane < mv11_scale_bytes<T>() / 16) mv11_cp16(wl + 2048, c.s);
        if constexpr (T == QUANT_Q5_K) mv11_cp16(wl + 2304, c.h); /* fifth bits: 32 pieces */
    }
}

/* POST's tail (mv_x_acc_post), after every thread of the block stored its rows' sums in part:
 * the arrival (V3 attention's pattern: barrier, fence, atomic; partials visible before the count
 * moves), and in the last block to arrive, per token, the products' sum of squares in double in a
 * fixed order (the warps' sums in warp order) and y += part / rms * post, paged_post_add_rmsnorm's
 * arithmetic. Every thread keeps MV_POST_V float4 loads in flight per pass: the first form, one
 * dependent L2 round trip per 512 rows, took ~9 us for 3840 rows (a separate launch ~5). rows % 4
 * == 0 and 16-byte aligned rows (cu_matvec_f32_acc_post checks). smem: the block's dynamic shared
 * memory, free by now. True in the last block. */
#define MV_POST_V 2
template <int NT>
__device__ __forceinline__ bool mv_post_tail(float *y, const mv_x_acc_post &xv, int rows, int nblk, uint8_t *smem) {
    int *last = (int *)smem;
    double *rd = (double *)(smem + 16);
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        const bool l = atomicAdd(xv.count, 1u) == (unsigned)nblk - 1;
        if (l) __threadfence();
        *last = l;
    }
    __syncthreads();
    if (!*last) return false;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5), nv = rows >> 2;
    const int step = MV_POST_V * (int)blockDim.x;
    const float4 *g4 = (const float4 *)xv.post;
    for (int c = 0; c < NT; c++) {
        const float4 *p4 = (const float4 *)(xv.part + (int64_t)c * rows); /* written by other SMs: __ldcg */
        float4 *y4 = (float4 *)(y + (int64_t)c * rows);
        double ssd = 0;
        for (int b = 0; b < nv; b += step) {
            float4 v[MV_POST_V];
#pragma unroll
            for (int j = 0; j < MV_POST_V; j++) {
                const int i = b + j * (int)blockDim.x + (int)threadIdx.x;
                v[j] = i < nv ? __ldcg(p4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
            for (int j = 0; j < MV_POST_V; j++)
                ssd += ((double)v[j].x * v[j].x + (double)v[j].y * v[j].y) +
                       ((double)v[j].z * v[j].z + (double)v[j].w * v[j].w);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ssd += __shfl_xor_sync(0xffffffffu, ssd, o);
        if (lane == 0) rd[warp] = ssd;
        __syncthreads();
        double ss = 0;
        for (int w = 0; w < nw; w++) ss += rd[w];
        const float ps = (float)(1.0 / sqrt(ss / rows + xv.eps));
        for (int b = 0; b < nv; b += step) {
            float4 v[MV_POST_V], g[MV_POST_V], a[MV_POST_V];
#pragma unroll
            for (int j = 0; j < MV_POST_V; j++) {
                const int i = b + j * (int)blockDim.x + (int)threadIdx.x;
                if (i < nv) {
                    v[j] = __ldcg(p4 + i);
                    g[j] = __ldg(g4 + i);
                    a[j] = y4[i];
                }
            }
#pragma unroll
            for (int j = 0; j < MV_POST_V; j++) {
                const int i = b + j * (int)blockDim.x + (int)threadIdx.x;
                if (i < nv)
                    y4[i] = make_float4(a[j].x + v[j].x * ps * g[j].x, a[j].y + v[j].y * ps * g[j].y,
                                        a[j].z + v[j].z * ps * g[j].z, a[j].w + v[j].w * ps * g[j].w);
            }
        }
        __syncthreads(); /* rd is the next token's */
    }
    if (threadIdx.x == 0) *xv.count = 0;
    return true;
}

/* v10's block bid of a grid of nblk blocks (matvec_v10: the launch's own; matvec_v10_dual: one of
 * its two parts). */
template <int T, bool XH, typename XS, int O, int NT>
__device__ __forceinline__ void mv10_block(float *y, const uint8_t *w, XS xv, int rows, int k, int stages, int early,
                                           int pre, int late, int bid, int nblk) {
    static_assert(mv10_type<T>(), "v10: Q4_0 Q4_K Q5_K Q8_0 Q6_K");
    using P = mv10_opt<O>;
    constexpr int GC = mv10_gc<T>(), W = P::W, NB = P::NB, RW = mv10_rec<T>(), SLOT = mv11_slot_bytes<T>();
    /* RING (v11): the warps' rings of `stages` slots [W][stages][SLOT], then what v10 has */
    extern __shared__ __align__(16) uint8_t mv10_smem_buf[];
    kt_rec *tr = kt_open(KT_MATVEC, w); /* the block timeline (trace.cuh), null unless traced */
    kt_mark(tr, 0);
    static_assert(!XS::GLU || P::RING, "GLU: v11's ring copier only");
    const int S = P::RING ? stages : 0;
    const int64_t C = mv2_chunks(k), R16 = (rows + 15) / 16;
    /* GLU: whole pairs of tiles per block (R16 even: mv_x_norm_glu) */
    const int64_t t0 = XS::GLU ? 2 * ((int64_t)bid * (R16 / 2) / nblk) : (int64_t)bid * R16 / nblk;
    const int64_t t1 = XS::GLU ? 2 * ((int64_t)(bid + 1) * (R16 / 2) / nblk) : (int64_t)(bid + 1) * R16 / nblk;
    const int nt = (int)(t1 - t0), ng = (int)(C / GC), units = nt * ng;
    /* the matrix's unit of the block's unit u: GLU's logical tile 2j is gate tile j, 2j + 1 up tile j */
    auto gunit = [&](int u) -> int64_t {
        const int64_t lt = t0 + u / ng;
        return (XS::GLU ? ((lt & 1) ? R16 / 2 + (lt >> 1) : lt >> 1) : lt) * ng + u % ng;
    };
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int u0 = warp * units / W, u1 = (warp + 1) * units / W;
    const int xst = (int)C * 4 * RW, dst = 2 * (int)C; /* per token: record words, d (and sums) */
    uint32_t *xr = (uint32_t *)(mv10_smem_buf + W * S * SLOT);
    float *xd = (float *)(xr + NT * xst), *xs = xd + NT * dst;
    float *red = xs + (mv10_kmin<T>() ? NT * dst : 0);
    /* NORM sources: per-warp sums of x^2 [NT][W], then 1 / rms per token [NT] (mv10_shape counts
     * them) */
    float *ssw = red + nt * W * NT * 16, *rinv = ssw + NT * W;
    /* PEND sources: the warps' sums of squares of the pending product [W] (doubles, 8-aligned) */
    double *pws = (double *)(((uintptr_t)(rinv + NT) + 7) & ~(uintptr_t)7);

    /* the first NB groups of loads (RING: the first S units' copies) go out before X is staged
     * (weights only: pdl.cuh) */
    mv10_group<T> gq[P::RING ? 1 : NB];
    const mv10_src src = mv10_source<T>(w, R16, C, t0 * ng + u0, lane, g);
    mv11_cp cp = mv11_copier<T>(w, R16, C, gunit(u0), lane); /* the next unit to copy */
    int cu = u0; /* its unit in the block */
    auto next_cp = [&]() { /* GLU: a new tile's units are elsewhere in the matrix */
        mv11_next<T>(cp);
        if constexpr (XS::GLU) {
            if (++cu % ng == 0 && cu < u1) cp = mv11_copier<T>(w, R16, C, gunit(cu), lane);
        }
    };
    const uint32_t ring_s = (uint32_t)__cvta_generic_to_shared(mv10_smem_buf) + warp * S * SLOT; /* this warp's */
    /* v11: slots [0, PRE) are filled before the wait, [PRE, S) right behind X's loads (mv11_pre) */
    const int PRE = !P::RING ? 0 : pre > 0 ? (pre < S ? pre : S) : pre < 0 && NT == 1 ? mv11_pre(u1 - u0, S) : S;
    auto fill = [&](int j0, int j1) {
        for (int j = j0; j < j1; j++) {
            if (u0 + j < u1) {
                mv11_issue<T>(ring_s + j * SLOT + cp.qd, ring_s + j * SLOT + 16 * lane, cp, lane);
                next_cp();
            }
            mv11_commit(); /* one group per slot, empty past the warp's last unit */
        }
    };
    if constexpr (P::RING) {
        fill(0, PRE);
    } else {
#pragma unroll
        for (int j = 0; j < NB; j++)
            if (u0 + j < u1) gq[j].load(src, j);
    }
    kt_mark(tr, 1);
    /* late (cu_matvec_f32_norm_rope_beside): X was complete before this kernel was launched, and
     * the kernel before it touches nothing this one reads or writes; the wait moves to the end */
    if (!late) pdl_wait();
    kt_mark(tr, 2);
    /* early (production; matvec.cu's MV_EARLY): the next kernel's blocks may take each SM as this one's block
     * leaves it, not only once every block is through its loop */
    if (P::EARLY || early || late) pdl_trigger();
    for (int i = threadIdx.x; i < nt * W * NT * 16; i += blockDim.x) red[i] = 0.0f;
#pragma unroll 1
    for (int c = 0; c < NT; c++) /* the fill's rest behind token 0's X loads, so they are not queued behind it */
        mv10_stage<T, XH, (P::W * P::BPS > 16 || NT > 2 ? 2 : 4)>(xr + c * xst, xd + c * dst, xs + c * dst, ssw + c * W,
                                                                  xv, c, k, (int)C, [&]() {
                                                                      if (c == 0) fill(PRE, S);
                                                                  }, pws, bid == 0);
    __syncthreads();
    kt_mark(tr, 3);
    /* ACC: the residual of the epilogue's first round loaded now, beside the main loop, not after
     * it: a block's tail delays the next launch's block on this SM (PERF-LOG runs 155-159) */
    /* the epilogue's item i: tile tl of the block's (GLU: pair of tiles), token c, row r of the
     * tile; returns the matrix row (one mapping for the early load and the epilogue) */
    auto item = [&](int i, int &tl, int &c, int &r) -> int64_t {
        tl = i / (NT * 16), c = (i >> 4) % NT, r = i & 15;
        return (t0 + tl) * 16 + r;
    };
    float ypre = 0.0f;
    if constexpr (XS::ACC && !XS::POST) {
        int tl, c, r;
        const int64_t row = item(threadIdx.x, tl, c, r);
        if (threadIdx.x < nt * NT * 16 && row < rows) ypre = y[(int64_t)c * rows + row];
    }

    float acc[NT][2];
#pragma unroll
    for (int c = 0; c < NT; c++) acc[c][0] = acc[c][1] = 0.0f;
    int ct = u0 / ng, cg = u0 % ng; /* compute cursor: tile (in the block) and group */
    const uint32_t *xr0 = xr + t * RW;
    auto flush = [&]() { /* the 4 lanes of a row add up their parts; Q4_0's row g + 8 is 16 x */
#pragma unroll
        for (int c = 0; c < NT; c++) {
            float a0 = acc[c][0], a1 = acc[c][1];
            a0 += __shfl_xor_sync(0xffffffffu, a0, 1);
            a0 += __shfl_xor_sync(0xffffffffu, a0, 2);
            a1 += __shfl_xor_sync(0xffffffffu, a1, 1);
            a1 += __shfl_xor_sync(0xffffffffu, a1, 2);
            if (t == 0) {
                float *p = red + ((ct * W + warp) * NT + c) * 16 + g;
                p[0] = a0;
                p[8] = T == QUANT_Q4_0 ? a1 * 0.0625f : a1;
            }
            acc[c][0] = acc[c][1] = 0.0f;
        }
    };
    if constexpr (P::RING) {
        /* unit u's slot: this lane's read addresses in it (rd), where its copies go (wq, wl);
         * carried from unit to unit (the compiler would otherwise rebuild them every unit) */
        mv10_at<uint32_t> rd = mv11_slot<T>(ring_s, lane, g);
        uint32_t wq = ring_s + cp.qd, wl = ring_s + 16 * lane;
        int left = S; /* slots until the ring wraps */
        for (int u = u0; u < u1; u++) {
            mv11_wait(S - 1); /* groups u0..u of this lane done, S - 1 later ones may be pending */
            __syncwarp();     /* ... and every lane's (a unit's scales are copied by other lanes) */
            gq[0].load(rd, 0);
            __syncwarp(); /* the slot is read: its refill may overwrite it */
            if (u + S < u1) {
                mv11_issue<T>(wq, wl, cp, lane);
                next_cp();
            }
            mv11_commit();
            gq[0].template compute<NT>(acc, xr0 + cg * GC * 4 * RW, xd + 2 * GC * cg, xs + 2 * GC * cg, t, xst, dst);
            if (++cg == ng) { flush(); cg = 0; ct++; }
            const uint32_t step = --left ? SLOT : SLOT - S * SLOT; /* the next slot, or back to the first */
            if (!left) left = S;
            rd.q += step; rd.s += step; rd.h += step; rd.d += step;
            wq += step; wl += step;
        }
        asm volatile("cp.async.wait_all;" ::: "memory"); /* only empty groups remain; none outlives the block */
    } else {
        for (int u = u0; u < u1; u += NB) {
#pragma unroll
            for (int j = 0; j < NB; j++) {
                if (u + j < u1) {
                    gq[j].template compute<NT>(acc, xr0 + cg * GC * 4 * RW, xd + 2 * GC * cg, xs + 2 * GC * cg, t, xst, dst);
                    if (u + j + NB < u1) gq[j].load(src, u + j + NB - u0);
                    if (++cg == ng) { flush(); cg = 0; ct++; }
                }
            }
        }
    }
    if (u0 < u1 && cg != 0) flush();
    if (!(P::EARLY || early || late)) pdl_trigger();
    if constexpr (XS::NORM) { /* kernels/norm.cu's factor, the warps' sums added in warp order */
        if (threadIdx.x < NT) {
            float ss = 0.0f;
            for (int wp = 0; wp < W; wp++) ss += ssw[threadIdx.x * W + wp];
            rinv[threadIdx.x] = rsqrtf(ss / (float)k + xv.eps);
        }
    }
    __syncthreads();
    kt_mark(tr, 4);
    if constexpr (XS::GLU) { /* silu or gelu(gate) * up of each pair of rows, the sums in warp order */
        const int np = nt / 2;
        const int64_t F = rows / 2;
        for (int i = threadIdx.x; i < np * NT * 16; i += blockDim.x) {
            int pl, c, r;
            item(i, pl, c, r);
            float gs = 0.0f, us = 0.0f;
#pragma unroll 4
            for (int wp = 0; wp < W; wp++) {
                gs += red[((2 * pl * W + wp) * NT + c) * 16 + r];
                us += red[(((2 * pl + 1) * W + wp) * NT + c) * 16 + r];
            }
            const int64_t j = (t0 / 2 + pl) * 16 + r;
            if (j < F) {
                if constexpr (XS::GELU) y[(int64_t)c * F + j] = act_gelu_tanh(gs * rinv[c]) * (us * rinv[c]);
                else y[(int64_t)c * F + j] = mv_silu_mul(gs * rinv[c], us * rinv[c]);
            }
        }
    } else { /* one branch per instance: the GLU ones compile no unreachable row loop */
        /* the rows' sums in warp order; every lane runs every round (the bound is the block's), so a
         * ROPE source's shuffle has all lanes */
        for (int i0 = 0; i0 < nt * NT * 16; i0 += blockDim.x) {
            const int i = i0 + threadIdx.x;
            int tl, c, r;
            const int64_t row = item(i, tl, c, r);
            const bool live = i < nt * NT * 16;
            float s = 0.0f;
            if (live) {
    #pragma unroll 4
                for (int wp = 0; wp < W; wp++) s += red[((tl * W + wp) * NT + c) * 16 + r];
                if constexpr (XS::NORM) s *= rinv[c];
            }
            if constexpr (XS::ROPE) {
                const float ps = __shfl_xor_sync(0xffffffffu, s, 1); /* row ^ 1: same tile and token */
                if (live && row < rows) mv_rope_store(xv, row, c, s, ps);
            } else if (live && row < rows) {
                if constexpr (XS::POST) {
                    xv.part[(int64_t)c * rows + row] = s; /* normed and added by the last block */
                } else {
                    float *yp = y + (int64_t)c * rows + row; /* one thread of one block owns it */
                    if constexpr (XS::ACC) s += i0 == 0 ? ypre : *yp; /* as kernels.h's cu_add: y + (W . X) */
                    *yp = s;
                }
            }
        }
    }
    if (late) pdl_wait(); /* pdl.cuh's rule 2: this grid's end implies the one before it ended */
    kt_mark(tr, 5);
    if constexpr (XS::POST)
        if (mv_post_tail<NT>(y, xv, rows, nblk, mv10_smem_buf)) kt_mark(tr, 5); /* the last block's end */
}

template <int T, bool XH, typename XS = mv_x, int O = 0, int NT = 1>
__global__ void __launch_bounds__(mv10_opt<O>::W * 32, mv10_opt<O>::BPS)
matvec_v10(float *y, const uint8_t *w, XS xv, int rows, int k, int stages, int early, int pre, int late) {
    mv10_block<T, XH, XS, O, NT>(y, w, xv, rows, k, stages, early, pre, late, (int)blockIdx.x, (int)gridDim.x);
}

/* Two matvecs of one X in one launch, each with its own type, source and ring depth: blocks
 * [0, g1) are the first's grid, the rest the second's (a layer's Q/K in one type and V in another:
 * both start at once, where a second launch would start a launch latency later and queue behind
 * the first's blocks). Sources that write their own outputs (ROPE: y1, y2 null) or NORM sources
 * into y1 and y2. */
template <int T1, int T2, typename XS, int O, int NT>
__global__ void __launch_bounds__(mv10_opt<O>::W * 32, mv10_opt<O>::BPS)
matvec_v10_dual(float *y1, const uint8_t *w1, XS x1, int rows1, int stages1, int g1, float *y2, const uint8_t *w2,
                XS x2, int rows2, int stages2, int k, int early, int pre) {
    static_assert(XS::ROPE || (XS::NORM && !XS::ACC && !XS::GLU), "matvec_v10_dual: ROPE or plain NORM sources");
    if ((int)blockIdx.x < g1)
        mv10_block<T1, false, XS, O, NT>(y1, w1, x1, rows1, k, stages1, early, pre, 0, (int)blockIdx.x, g1);
    else
        mv10_block<T2, false, XS, O, NT>(y2, w2, x2, rows2, k, stages2, early, pre, 0, (int)blockIdx.x - g1,
                                         (int)gridDim.x - g1);
}

/* Lets v10 use all the shared memory a block may opt into (cu_matvec_repack calls it at load). */
template <int T, bool XH, typename XS = mv_x, int O = 0, int NT = 1>
static inline bool mv10_prepare() {
    return smem_optin<matvec_v10<T, XH, XS, O, NT>>() == cudaSuccess;
}

/* mv10_prepare of every token count production runs (1 to MV10_MAX_N) of v10 (O = 0) or v11
 * (MV11_OPT); the lab's other options run one token. */
#define MV10_MAX_N 4
/* Q6_K stops at 2 tokens: 3 spill (its groups take 33 registers each; ptxas -v). */
template <int T> __host__ __device__ constexpr int mv10_max_n() { return T == QUANT_Q6_K ? 2 : MV10_MAX_N; }
template <int O> __host__ __device__ constexpr bool mv10_multi_token() { return O == 0 || mv10_opt<O>::RING; }
template <int T, bool XH, typename XS = mv_x, int O = 0>
static inline void mv10_prepare_all() {
    mv10_prepare<T, XH, XS, O, 1>();
    mv10_prepare<T, XH, XS, O, 2>();
    if constexpr (mv10_max_n<T>() >= 4) {
        mv10_prepare<T, XH, XS, O, 3>();
        mv10_prepare<T, XH, XS, O, 4>();
    }
}

/* v11's ring depth beside base bytes of everything else: the most stages of W slots that fit in
 * smem_max, at most cap (and MV11_STAGES_MAX); 0 when fewer than 2 fit (v10 runs instead). */
template <int T, int O>
static inline int mv11_stages(size_t base, int smem_max, int cap) {
    const size_t stage = (size_t)mv10_opt<O>::W * mv11_slot_bytes<T>();
    if (!mv10_opt<O>::RING || smem_max <= 0 || base >= (size_t)smem_max) return 0;
    size_t st = ((size_t)smem_max - base) / stage;
    const size_t top = (size_t)(cap < MV11_STAGES_MAX ? cap : MV11_STAGES_MAX);
    if (st > top) st = top;
    return st >= 2 ? (int)st : 0;
}

/* v10's persistent grid (*grid) for rows on sms SMs, and the dynamic shared memory of its blocks
 * for nt tokens (with norm, a NORM source's sums of x^2 and 1 / rms per token too); for v11 also
 * its ring, *stages deep (mv11_stages with smem_max and cap; SIZE_MAX when no ring fits; 0
 * stages for the other options). */
template <int T, int O>
static inline size_t mv10_shape(int64_t rows, int64_t k, int nt, int norm, int sms, int smem_max, int cap,
                                int64_t *grid, int *stages, bool balance = false, bool pairs = false) {
    using P = mv10_opt<O>;
    /* what blocks share out: tiles, or with pairs (GLU) pairs of tiles */
    const int per = pairs ? 2 : 1;
    const int64_t R = (rows + 15) / 16 / per;
    int64_t g = R < (int64_t)sms * P::BPS ? R : (int64_t)sms * P::BPS;
    if (per * ((R + g - 1) / g) > MV_TILES) g = (R + MV_TILES / per - 1) / (MV_TILES / per);
    /* balance: the fewest blocks with the same most tiles per block, so that the blocks' shares
     * are as even as the tiles allow (8b gate/up: 128 blocks of 14 tiles, not 132 of 13 or 14) */
    if (balance) g = (R + (R + g - 1) / g - 1) / ((R + g - 1) / g);
    *grid = g;
    *stages = 0;
    /* norm (mv_norm_kind): ssw and rinv; 2, a PEND source: its warps' doubles too (mv10_block) */
    const size_t base = mv10_smem<T>(k, per * ((R + g - 1) / g), P::W, nt) +
                        (norm ? (size_t)nt * (P::W + 1) * sizeof(float) : 0) +
                        (norm == 2 ? (size_t)(P::W + 1) * sizeof(double) : 0);
    if constexpr (!P::RING) {
        return base;
    } else {
        *stages = mv11_stages<T, O>(base, smem_max, cap);
        return *stages ? base + (size_t)*stages * P::W * mv11_slot_bytes<T>() : SIZE_MAX;
    }
}

template <int T, bool XH, typename XS, int O, int NT>
static inline bool mv10_launch_nt(float *y, const void *w, XS x, int rows, int k, cudaStream_t s, int pdl,
                                  cudaError_t *e, int sms, int smem_max, int cap, int early, int pre, int balance,
                                  int late, int sms_cap) {
    using P = mv10_opt<O>;
    int64_t grid = 0;
    int stages = 0;
    size_t smem = SIZE_MAX;
    /* sms_cap: the blocks share out that many SMs (a launch beside another's grid), where they fit */
    if (sms_cap > 0 && sms_cap < sms)
        smem = mv10_shape<T, O>(rows, k, NT, mv_norm_kind<XS>(), sms_cap, smem_max, cap, &grid, &stages, balance != 0, XS::GLU);
    if (smem > (size_t)smem_max)
        smem = mv10_shape<T, O>(rows, k, NT, mv_norm_kind<XS>(), sms, smem_max, cap, &grid, &stages, balance != 0, XS::GLU);
    if (smem > (size_t)smem_max || (smem > 48 * 1024 && !mv10_prepare<T, XH, XS, O, NT>())) return false;
    *e = pdl_launch_as(pdl, matvec_v10<T, XH, XS, O, NT>, dim3((unsigned)grid), dim3(P::W * 32), smem, s, y,
                       (const uint8_t *)w, x, rows, k, stages, early, pre, late);
    return true;
}

/* Whether v10 (option O) takes type T, n tokens and rows x k on the current device with a source
 * of NORM norm (sms, smem_max: the device's; v11: *stages, if asked, its ring depth under cap);
 * matvec_v10_launch launches exactly these (unless the shared-memory opt-in itself fails). Not:
 * another type, n over mv10_max_n (over 1 for the lab's options other than v11), k not a whole
 * number of groups (Q8_0: 128, the others 256), or shared memory too small (v11: for a ring of
 * 2 stages or more beside the rest). */
template <int T, int O = 0>
static inline bool mv10_takes(int64_t rows, int64_t k, int n, int norm, int *sms, int *smem_max,
                              int cap = MV11_STAGES, int *stages = nullptr) {
    if constexpr (!mv10_type<T>() || !mv10_fits<T, O>()) {
        return false;
    } else {
        int64_t grid;
        int st = 0;
        const bool ok = n >= 1 && n <= (mv10_multi_token<O>() ? mv10_max_n<T>() : 1) && rows >= 1 && k >= 1 &&
                        k % (64 * mv10_gc<T>()) == 0 && mv_device(sms, smem_max) &&
                        mv10_shape<T, O>(rows, k, n, norm, *sms, *smem_max, cap, &grid, &st) <= (size_t)*smem_max;
        if (stages) *stages = ok ? st : 0;
        return ok;
    }
}

/* Launches v10 (option O; v11: a ring at most cap stages deep) with the PDL attribute when pdl;
 * false (nothing launched) where it does not apply (mv10_takes). *e is the launch status. early:
 * the PDL trigger right after the wait (as option EARLY) instead of after the main loop; pre: v11's
 * ring slots filled before the wait (0: all of them, -1: mv11_pre's choice for one token, all for
 * more, N > 0: N). sms_cap > 0: the grid is shaped for that many SMs instead of the device's (a
 * launch beside another grid takes the SMs that one leaves), unless its shared memory does not fit. */
template <int T, bool XH, typename XS = mv_x, int O = 0>
static inline bool matvec_v10_launch(float *y, const void *w, XS x, int rows, int k, int n, cudaStream_t s, int pdl,
                                     cudaError_t *e, int cap = MV11_STAGES, int early = 0, int pre = 0,
                                     int balance = 0, int late = 0, int sms_cap = 0) {
    int sms, smem_max;
    if constexpr (!mv10_type<T>() || !mv10_fits<T, O>()) {
        return false;
    } else {
        if (!mv10_takes<T, O>(rows, k, n, mv_norm_kind<XS>(), &sms, &smem_max, cap)) return false;
        if constexpr (mv10_multi_token<O>()) {
            if (n == 2) return mv10_launch_nt<T, XH, XS, O, 2>(y, w, x, rows, k, s, pdl, e, sms, smem_max, cap, early, pre, balance, late, sms_cap);
            if constexpr (mv10_max_n<T>() >= 4) {
                if (n == 3) return mv10_launch_nt<T, XH, XS, O, 3>(y, w, x, rows, k, s, pdl, e, sms, smem_max, cap, early, pre, balance, late, sms_cap);
                if (n == 4) return mv10_launch_nt<T, XH, XS, O, 4>(y, w, x, rows, k, s, pdl, e, sms, smem_max, cap, early, pre, balance, late, sms_cap);
            }
        }
        return mv10_launch_nt<T, XH, XS, O, 1>(y, w, x, rows, k, s, pdl, e, sms, smem_max, cap, early, pre, balance, late, sms_cap);
    }
}

/* matvec_v10_dual's grids when the second matrix gets s2 of the sms SMs: the first's shaped for
 * the rest, the second's for what that grid leaves (at least an eighth of the SMs); the larger of
 * the two blocks' shared memory, SIZE_MAX where either does not fit. */
template <int T1, int T2, int O>
static inline size_t mv10_dual_shape(int rows1, int rows2, int k, int nt, int norm, int sms, int smem_max, int cap,
                                     int balance, int s2, int64_t *g1, int *st1, int64_t *g2, int *st2) {
    const size_t sm1 = mv10_shape<T1, O>(rows1, k, nt, norm, sms - s2, smem_max, cap, g1, st1, balance != 0);
    if (sm1 > (size_t)smem_max || sms - *g1 < sms / 8) return SIZE_MAX;
    const size_t sm2 = mv10_shape<T2, O>(rows2, k, nt, norm, sms - (int)*g1, smem_max, cap, g2, st2, balance != 0);
    const size_t sm = sm1 > sm2 ? sm1 : sm2;
    return sm > (size_t)smem_max ? SIZE_MAX : sm;
}

/* How matvec_v10_dual's two grids share the SMs: of the splits that give the second matrix an
 * eighth to a half of them (mv10_dual_shape), the one whose largest block reads the fewest bytes,
 * so that neither grid's blocks end long after the other's (8b Q4_K_M: Q/K 80 blocks of 4 tiles
 * and V 32 of 2, not 107 of 3 and 22 of 3, whose V blocks ended 2.5 us after Q/K's: +0.9% tg128,
 * PERF-LOG run 86). The SMs for the second matrix, or 0 where no split fits. */
template <int T1, int T2, int O>
static inline int mv10_dual_split(int rows1, int rows2, int k, int nt, int norm, int sms, int smem_max, int cap,
                                  int balance) {
    const int64_t R1 = (rows1 + 15) / 16, R2 = (rows2 + 15) / 16;
    const double tb1 = (double)mv2_bytes(T1, 16, k), tb2 = (double)mv2_bytes(T2, 16, k);
    double best = -1;
    int pick = 0;
    for (int s2 = sms / 8; s2 <= sms / 2; s2++) {
        int64_t g1, g2;
        int st1, st2;
        if (mv10_dual_shape<T1, T2, O>(rows1, rows2, k, nt, norm, sms, smem_max, cap, balance, s2, &g1, &st1, &g2,
                                       &st2) == SIZE_MAX)
            continue;
        const double c1 = (double)((R1 + g1 - 1) / g1) * tb1, c2 = (double)((R2 + g2 - 1) / g2) * tb2;
        const double cost = c1 > c2 ? c1 : c2;
        if (best < 0 || cost < best) {
            best = cost;
            pick = s2;
        }
    }
    return pick;
}

/* matvec_v10_dual for NT tokens: the SMs shared as mv10_dual_split says, or with second_sms > 0
 * the second matrix's grid shaped for that many and the first's for the rest; false (nothing
 * launched) where either does not fit. */
template <int T1, int T2, typename XS, int O, int NT>
static inline bool mv10_dual_launch_nt(float *y1, const void *w1, XS x1, int rows1, float *y2, const void *w2, XS x2,
                                       int rows2, int k, cudaStream_t s, int pdl, cudaError_t *e, int cap, int early,
                                       int pre, int balance, int second_sms) {
    using P = mv10_opt<O>;
    int sms, smem_max, st1, st2;
    int64_t g1, g2;
    if (!mv10_takes<T1, O>(rows1, k, NT, mv_norm_kind<XS>(), &sms, &smem_max, cap) ||
        !mv10_takes<T2, O>(rows2, k, NT, mv_norm_kind<XS>(), &sms, &smem_max, cap))
        return false;
    if (second_sms <= 0 || second_sms >= sms)
        second_sms = mv10_dual_split<T1, T2, O>(rows1, rows2, k, NT, mv_norm_kind<XS>(), sms, smem_max, cap, balance);
    if (second_sms <= 0) return false;
    const size_t smem = mv10_dual_shape<T1, T2, O>(rows1, rows2, k, NT, mv_norm_kind<XS>(), sms, smem_max, cap, balance,
                                                   second_sms, &g1, &st1, &g2, &st2);
    if (smem == SIZE_MAX || (smem > 48 * 1024 && smem_optin<matvec_v10_dual<T1, T2, XS, O, NT>>() != cudaSuccess))
        return false;
    *e = pdl_launch_as(pdl, matvec_v10_dual<T1, T2, XS, O, NT>, dim3((unsigned)(g1 + g2)), dim3(P::W * 32), smem, s,
                       y1, (const uint8_t *)w1, x1, rows1, st1, (int)g1, y2, (const uint8_t *)w2, x2, rows2, st2, k,
                       early, pre);
    return true;
}

template <int T1, int T2, typename XS, int O>
static inline bool mv10_dual_launch(float *y1, const void *w1, XS x1, int rows1, float *y2, const void *w2, XS x2,
                                    int rows2, int k, int n, cudaStream_t s, int pdl, cudaError_t *e, int cap,
                                    int early, int pre, int balance, int second_sms = 0) {
    static_assert(mv10_opt<O>::RING, "matvec_v10_dual: v11's options");
    if (n == 1)
        return mv10_dual_launch_nt<T1, T2, XS, O, 1>(y1, w1, x1, rows1, y2, w2, x2, rows2, k, s, pdl, e, cap, early,
                                                     pre, balance, second_sms);
    if (n == 2)
        return mv10_dual_launch_nt<T1, T2, XS, O, 2>(y1, w1, x1, rows1, y2, w2, x2, rows2, k, s, pdl, e, cap, early,
                                                     pre, balance, second_sms);
    return false; /* Q6_K (mv10_max_n) and the cases measured: one or two tokens */
}


#endif
