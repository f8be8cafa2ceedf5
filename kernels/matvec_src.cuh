/* Where a decode matvec's X comes from: the source types every matvec kernel takes as a template
 * parameter, and the device functions that read (and for the fused sources normalise, rotate and
 * store) them. */
#ifndef MGI_KERNELS_MATVEC_SRC_CUH
#define MGI_KERNELS_MATVEC_SRC_CUH

#include <stdint.h>
#include <cuda_fp16.h>
#include "kernels/kernels.h"
#include "kernels/rope.cuh"
#include "kernels/act.cuh"

/* Where a kernel's X comes from (a template parameter of every variant): mv_x, a plain [n][k]
 * array in f32 or f16 (the kernel's XT / XH says which); mv_x_swiglu, silu(g) * u of two strided
 * f32 arrays, computed while X is staged (cu_matvec_f32_swiglu). X is written by the previous
 * kernel, so it is read with plain loads after pdl_wait() (pdl.cuh), never with __ldg, which the
 * compiler may treat as invariant and move.
 * The decode fusions (v10 and v11 only; v1 and v3 static_assert they get none) are flags of the
 * source: NORM, X is cu_rmsnorm(x) * g of a plain f32 [n][k] x (mv_x_norm: every block sums x^2
 * itself while staging x * g, and scales its outputs by 1 / rms); ACC, Y += W . X instead of
 * Y = W . X (mv_x_acc, mv_x_swiglu_acc: the residual add of the attention output and FFN down
 * products). */
struct mv_x {
    const void *p;
    static constexpr bool NORM = false, ACC = false, ROPE = false, GLU = false, POST = false, PEND = false;
};
struct mv_x_swiglu {
    const float *g, *u;
    int64_t sg, su;
    bool vec; /* vec: float4 loads */
    static constexpr bool NORM = false, ACC = false, ROPE = false, GLU = false, POST = false, PEND = false;
};
struct mv_x_acc : mv_x { static constexpr bool ACC = true; };
/* POST (v10 and v11 only): an ACC source whose product goes through Gemma's post norm before the
 * add, Y += post_norm(W . X) (paged_post_add_rmsnorm's arithmetic). The norm needs every row of
 * the product: each block puts its rows' sums in part [n][rows] (scratch), and the last block to
 * arrive at count (zero between launches; that block sets it back) norms and adds them all, so the
 * layer needs no post-norm launch. */
struct mv_x_acc_post : mv_x {
    const float *post; /* the post norm's weight [rows] */
    float eps;
    float *part;
    unsigned *count;
    static constexpr bool ACC = true, POST = true;
};
struct mv_x_swiglu_acc : mv_x_swiglu { static constexpr bool ACC = true; };
/* x [n][k] f32 (rows 16-byte aligned), g [k] the norm's weight, eps the norm's epsilon. */
struct mv_x_norm {
    const float *x, *g;
    float eps;
    static constexpr bool NORM = true, ACC = false, ROPE = false, GLU = false, POST = false, PEND = false;
};
/* GLU (v11 only): a NORM source whose matrix is an FFN's gate rows [0, F) stacked on its up rows
 * [F, 2F) (F a multiple of 16); the epilogue writes silu(gate_j) * up_j (paged_swiglu's formula)
 * to Y [n][F] instead of both rows, so the decode step needs no SwiGLU launch. Blocks take whole
 * pairs of tiles, gate tile j with up tile j (logical tile 2j is gate tile j, 2j + 1 up tile j),
 * so the block that sums one sums the other. */
struct mv_x_norm_glu : mv_x_norm { static constexpr bool GLU = true, GELU = false; };
/* The same with Gemma's gate: gelu_tanh(gate_j) * up_j (cu_geglu's formula) */
struct mv_x_norm_geglu : mv_x_norm_glu { static constexpr bool GELU = true; };
/* ROPE: a NORM source whose products are a layer's Q, K and V rows (in that order; this matrix's
 * first nq rows are Q, the next nk K, the rest V), which the epilogue does not write to Y but
 * hands on as paged_rope_store does (rope_pair, the same rotation): Q rotated into q_out
 * [n][nq], K rotated and V into the f16 caches at row cell[t] of kv_dim values; pos[t], cell[t] per
 * token. A rotated pair is rows 2j, 2j + 1 of one 16-row tile, so the block that sums one sums the
 * other, and a lane gets its partner's value by one shuffle. Saves the RoPE + K/V-store launch of
 * every decode layer. */
struct mv_x_norm_rope : mv_x_norm {
    float *q_out;
    uint16_t *kc, *vc;
    const int32_t *pos, *cell;
    int nq, nk, kv_dim, head_dim, n_rot;
    float theta;
    cu_rope_epi epi; /* zero: plain Llama's (no biases, theta's rotation, true order) */
    static constexpr bool ROPE = true;
};
/* PEND: a NORM source B whose x lacks a pending post-normed product (kernels.h's cu_post_pend;
 * part null: none), added as x is staged (mv10_stage works out its factor first); x_out (null:
 * none): the residual so read, written there by one block (mv10_block's block 0). Separate
 * instances, so the other sources' staging is as it was. */
template <typename B>
struct mv_pend_of : B {
    cu_post_pend pend;
    float *x_out;
    static constexpr bool PEND = true;
};
template <typename XS> __host__ __device__ constexpr bool mv_fused() { return XS::NORM || XS::ACC; }
/* What a source adds to v10's shared memory (mv10_shape's norm): 0, 1 NORM, 2 NORM with PEND. */
template <typename XS> __host__ __device__ constexpr int mv_norm_kind() { return XS::NORM ? 1 + XS::PEND : 0; }

/* Where a ROPE source's row `row` (value v, its pair partner's value pv) of token t goes. */
__device__ __forceinline__ void mv_rope_store(const mv_x_norm_rope &x, int64_t row, int t, float v, float pv) {
    const int64_t cell = x.cell[t];
    if (row >= x.nq + x.nk) { /* V */
        const int64_t e = row - x.nq - x.nk;
        if (x.epi.bv) v += x.epi.bv[e];
        x.vc[cell * x.kv_dim + e] = __half_as_ushort(__float2half_rn(v));
        return;
    }
    const bool is_k = row >= x.nq;
    const int64_t e = is_k ? row - x.nq : row, head0 = e - e % x.head_dim;
    const int o = (int)(e % x.head_dim);
    const bool odd = e & 1;
    /* this row's and its partner's true places in the head (NEOX-interleaved rows: cu_rope_epi) */
    int to = o, tp = o ^ 1;
    if (x.epi.neox_rows && o < x.n_rot) {
        const int j = o >> 1, half = x.n_rot >> 1;
        to = odd ? j + half : j;
        tp = odd ? j : j + half;
    }
    const float *b = is_k ? x.epi.bk : x.epi.bq;
    if (b) {
        v += b[head0 + to];
        pv += b[head0 + tp];
    }
    if (x.epi.k_raw) { /* unturned: paged_attention_qkn norms and turns them */
        if (is_k) x.epi.k_raw[(int64_t)t * x.kv_dim + head0 + to] = v;
        else x.q_out[(int64_t)t * x.nq + head0 + to] = v;
        return;
    }
    float x0 = odd ? pv : v, x1 = odd ? v : pv;
    if (!x.epi.angle) {
        rope_pair(x0, x1, x.pos[t], o & ~1, x.n_rot, x.theta);
    } else if (o < x.n_rot) {
        /* the angle in double, reduced to [0, 2 pi) there, its cos and sin in f32 (within an ulp
         * of recipe.cu's double ones; this kernel keeps no double-precision trigonometry) */
        const double th = (double)x.pos[t] * x.epi.angle[o >> 1];
        float sn, cs;
        sincosf((float)(th - 6.283185307179586 * floor(th * 0.15915494309189535)), &sn, &cs);
        const float cf = (float)(cs * x.epi.mscale), sf = (float)(sn * x.epi.mscale);
        const float y0 = x0 * cf - x1 * sf, y1 = x0 * sf + x1 * cf;
        x0 = y0;
        x1 = y1;
    }
    const float out = odd ? x1 : x0;
    if (is_k) x.kc[cell * x.kv_dim + head0 + to] = __half_as_ushort(__float2half_rn(out));
    else x.q_out[(int64_t)t * x.nq + head0 + to] = out;
}

__device__ __forceinline__ float4 mv_x_f32(const mv_x &s, int tok, int kk, int k) {
    return *(const float4 *)((const float *)s.p + (int64_t)tok * k + kk);
}

/* kernels.h's SwiGLU formula (paged_swiglu), so the fused path rounds the same way. */
__device__ __forceinline__ float mv_silu_mul(float a, float b) { return a / (1.0f + expf(-a)) * b; }

__device__ __forceinline__ float4 mv_x_f32(const mv_x_swiglu &s, int tok, int kk, int) {
    const float *g = s.g + tok * s.sg + kk, *u = s.u + tok * s.su + kk;
    float4 a, b;
    if (s.vec) {
        a = *(const float4 *)g;
        b = *(const float4 *)u;
    } else {
        a = make_float4(g[0], g[1], g[2], g[3]);
        b = make_float4(u[0], u[1], u[2], u[3]);
    }
    return make_float4(mv_silu_mul(a.x, b.x), mv_silu_mul(a.y, b.y), mv_silu_mul(a.z, b.z), mv_silu_mul(a.w, b.w));
}

/* Four f32 values of X at (tok, kk) for staging; for a NORM source x * g, with x^2 of the raw
 * values added to ss (the 1 / rms factor comes after the product: the int8 rounding per 32 values
 * is the same, up to f32 rounding, whether or not X is scaled first). */
/* A PEND NORM source's values at (tok, kk) from x, the pending product p, its post weight w and
 * the norm weight g already loaded: x + p * ps * w (paged_post_add_rmsnorm's a + v * ps * g), written to x_out
 * where wr, x^2 into ss, times g (mv_x_stage's NORM arithmetic). */
template <typename XS>
__device__ __forceinline__ float4 mv_x_pend_norm(const XS &s, float4 v, float4 p, float4 w, float4 g, float ps, int tok,
                                                 int kk, int k, float &ss, bool wr) {
    if (s.pend.part)
        v = make_float4(v.x + p.x * ps * w.x, v.y + p.y * ps * w.y, v.z + p.z * ps * w.z, v.w + p.w * ps * w.w);
    if (wr && s.x_out) *(float4 *)(s.x_out + (int64_t)tok * k + kk) = v;
    ss = fmaf(v.x, v.x, fmaf(v.y, v.y, fmaf(v.z, v.z, fmaf(v.w, v.w, ss))));
    return make_float4(v.x * g.x, v.y * g.y, v.z * g.z, v.w * g.w);
}

template <typename XS>
__device__ __forceinline__ float4 mv_x_stage(const XS &s, int tok, int kk, int k, float &ss, float ps = 0.0f,
                                             bool wr = false) {
    if constexpr (XS::NORM) {
        const float4 v = *(const float4 *)(s.x + (int64_t)tok * k + kk);
        if constexpr (XS::PEND) {
            const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
            const float4 p = s.pend.part ? *(const float4 *)(s.pend.part + (int64_t)tok * k + kk) : z;
            const float4 w = s.pend.part ? __ldg((const float4 *)(s.pend.post + kk)) : z;
            const float4 g = __ldg((const float4 *)(s.g + kk)); /* before the store: not held behind it */
            return mv_x_pend_norm(s, v, p, w, g, ps, tok, kk, k, ss, wr);
        }
        const float4 g = __ldg((const float4 *)(s.g + kk)); /* a weight: nothing in the step writes it */
        ss = fmaf(v.x, v.x, fmaf(v.y, v.y, fmaf(v.z, v.z, fmaf(v.w, v.w, ss))));
        return make_float4(v.x * g.x, v.y * g.y, v.z * g.z, v.w * g.w);
    } else {
        return mv_x_f32(s, tok, kk, k);
    }
}


/* The end of a persistent group kernel's group of NR rows (v13; the kernel lab's v12): thread
 * r * NT + c (< NR * NT) adds the warps' sums red[w][r][c] in warp order, and its RoPE partner's
 * (row r ^ 1: pairs 2j, 2j + 1 within the group), scales them by the NORM factor rinv[c], and
 * stores row row0 + r of token c (below rows) as the source says: the RoPE / K-V epilogue, Y +=, or
 * Y =. */
template <typename XS, int NR, int NT, int W>
__device__ __forceinline__ void mv_group_out(float *y, const XS &x, const float (&red)[W][NR][NT], int nw,
                                             const float *rinv, int row0, int rows) {
    if (threadIdx.x >= NR * NT) return;
    const int r = threadIdx.x / NT, c = threadIdx.x % NT, row = row0 + r;
    float v = 0.0f, pv = 0.0f; /* this row's sum and its pair partner's */
    for (int wp = 0; wp < nw; wp++) {
        v += red[wp][r][c];
        pv += red[wp][r ^ 1][c];
    }
    if constexpr (XS::NORM) {
        v *= rinv[c];
        pv *= rinv[c];
    }
    if (row < rows) {
        if constexpr (XS::ROPE) {
            mv_rope_store(x, row, c, v, pv);
        } else {
            float *yp = y + (int64_t)c * rows + row;
            if constexpr (XS::ACC) *yp += v; /* as kernels.h's cu_add: y + (W . X) */
            else *yp = v;
        }
    }
}

/* A NORM source's 1 / rms per token from the warps' sums of x^2 ssw[t][w] (added in warp order, as
 * v10 does; kernels/norm.cu's factor), by threads 0..NT - 1; the caller synchronises after. */
template <typename XS, int NT, int W>
__device__ __forceinline__ void mv_norm_factor(const XS &x, const float (&ssw)[NT][W], int nw, int k, float *rinv) {
    if (threadIdx.x < NT) {
        float t = 0.0f;
        for (int wp = 0; wp < nw; wp++) t += ssw[threadIdx.x][wp];
        rinv[threadIdx.x] = rsqrtf(t / (float)k + x.eps);
    }
}

#endif
