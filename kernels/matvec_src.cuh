/* Where a decode matvec's X comes from: the source types every matvec kernel takes as a template
 * parameter, and the device functions that read (and for the fused sources normalise, rotate and
 * store) them. */
#ifndef MGI_KERNELS_MATVEC_SRC_CUH
#define MGI_KERNELS_MATVEC_SRC_CUH

#include <stdint.h>
#include <cuda_fp16.h>
#include "kernels/recipe.h"
#include "kernels/rope.cuh"

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
    static constexpr bool NORM = false, ACC = false, ROPE = false, GLU = false, RECIPE = false;
};
struct mv_x_swiglu {
    const float *g, *u;
    int64_t sg, su;
    bool vec; /* vec: float4 loads */
    static constexpr bool NORM = false, ACC = false, ROPE = false, GLU = false, RECIPE = false;
};
struct mv_x_acc : mv_x { static constexpr bool ACC = true; };
struct mv_x_swiglu_acc : mv_x_swiglu { static constexpr bool ACC = true; };
/* x [n][k] f32 (rows 16-byte aligned), g [k] the norm's weight, eps the norm's epsilon. */
struct mv_x_norm {
    const float *x, *g;
    float eps;
    static constexpr bool NORM = true, ACC = false, ROPE = false, GLU = false, RECIPE = false;
};
/* GLU (v11 only): a NORM source whose matrix is an FFN's gate rows [0, F) stacked on its up rows
 * [F, 2F) (F a multiple of 16); the epilogue writes silu(gate_j) * up_j (paged_swiglu's formula)
 * to Y [n][F] instead of both rows, so the decode step needs no SwiGLU launch. Blocks take whole
 * pairs of tiles, gate tile j with up tile j (logical tile 2j is gate tile j, 2j + 1 up tile j),
 * so the block that sums one sums the other. */
struct mv_x_norm_glu : mv_x_norm { static constexpr bool GLU = true; };
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
    static constexpr bool ROPE = true;
};
/* RECIPE: a ROPE source for the general layer (engine/cuda_layer.c), whose Q/K epilogue is
 * recipe.h's cu_qkv_rope_store (biases, per-head RMSNorm, RoPE of either pair layout from an angle
 * table; the same arithmetic). A head's rows span blocks, and its norm and NEOX pairs need all of
 * them, so each block writes its Q/K rows' sums to raw [n][rows] and adds the rows it wrote to
 * the (token, head)'s count; the block whose add completes a head (the counts start and end at
 * 0: that block zeroes it) runs the head's recipe from raw with one warp (mv_recipe_finish). V
 * rows get their bias and go straight to the cache. Saves the recipe kernel's launch of every
 * decode layer of such models. */
struct mv_x_norm_recipe : mv_x_norm_rope {
    cu_qkv_recipe r;   /* the part's vectors: biases of its heads, norms, angle table */
    float *raw;        /* [n][rows] this matrix's Q/K sums before the recipe */
    unsigned *count;   /* [n][n_heads]: query heads, then key heads */
    int n_head, n_heads;
    static constexpr bool RECIPE = true;
};
template <typename XS> __host__ __device__ constexpr bool mv_fused() { return XS::NORM || XS::ACC; }

__device__ __forceinline__ void mv_recipe_put(const mv_x_norm_recipe &x, int64_t row, int t, float v, int rows) {
    if (row >= x.nq + x.nk) { /* V: its bias, then the cache */
        const int64_t e = row - x.nq - x.nk;
        x.vc[(int64_t)x.cell[t] * x.kv_dim + e] = __half_as_ushort(__float2half_rn(v + (x.r.bv ? x.r.bv[e] : 0.0f)));
        return;
    }
    x.raw[(int64_t)t * rows + row] = v;
}

/* Head h of the matrix's Q/K rows (query heads first) of token t, from raw: recipe.cu's
 * arithmetic (bias, the head's RMSNorm with its sum in double, RoPE from the angle table), one
 * warp; raw is read through L2 (other blocks wrote it). */
__device__ __forceinline__ void mv_recipe_head(const mv_x_norm_recipe &x, int rows, int t, int h, int lane) {
    const int hd = x.head_dim, qh = x.nq / hd;
    const bool is_k = h >= qh;
    const int hh = is_k ? h - qh : h;
    const float *src = x.raw + (int64_t)t * rows + (int64_t)h * hd;
    const float *bias = is_k ? x.r.bk : x.r.bq;
    if (bias) bias += (int64_t)hh * hd;
    const float *nw = is_k ? x.r.k_norm : x.r.q_norm;
    float scale = 1.0f;
    if (nw) {
        double ss = 0;
        for (int e = lane; e < hd; e += 32) {
            const float v = __ldcg(src + e) + (bias ? bias[e] : 0.0f);
            ss += (double)v * v;
        }
        for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        scale = (float)(1.0 / sqrt(ss / hd + x.r.eps));
    }
    auto val = [&](int e) {
        const float v = __ldcg(src + e) + (bias ? bias[e] : 0.0f);
        return nw ? v * scale * nw[e] : v;
    };
    const int half = x.n_rot / 2, p = x.pos[t];
    const int64_t at = (int64_t)x.cell[t] * x.kv_dim + (int64_t)hh * hd;
    for (int e = lane; e < hd; e += 32) {
        float out;
        if (e < x.n_rot) {
            const int i = x.r.neox ? (e < half ? e : e - half) : e >> 1;
            const int e0 = x.r.neox ? i : 2 * i, e1 = x.r.neox ? i + half : 2 * i + 1;
            double sn, cs;
            sincos((double)p * x.r.angle[i], &sn, &cs);
            const float cf = (float)(cs * x.r.mscale), sf = (float)(sn * x.r.mscale);
            const float a = val(e0), b = val(e1);
            out = e == e0 ? a * cf - b * sf : a * sf + b * cf;
        } else {
            out = val(e);
        }
        if (is_k) x.kc[at + e] = __half_as_ushort(__float2half_rn(out));
        else x.q_out[(int64_t)t * x.nq + (int64_t)h * hd + e] = out;
    }
}

/* After a block's rows [r0, r1) of NT tokens are out (mv_recipe_put): its counts, and the heads
 * it completed. flag: shared scratch of at least (r1 - r0 + 2 * head_dim) / head_dim * NT ints,
 * free for reuse (every thread is past its reads of it). Every thread of the block calls it. */
template <int NT>
__device__ __forceinline__ void mv_recipe_finish(const mv_x_norm_recipe &x, int rows, int64_t r0, int64_t r1, int *flag) {
    const int hd = x.head_dim;
    const int64_t qk = x.nq + x.nk, b = r1 < qk ? (r1 < rows ? r1 : rows) : (qk < rows ? qk : rows);
    const int h0 = (int)(r0 / hd), nh = r0 < b ? (int)((b - 1) / hd) - h0 + 1 : 0, n_pairs = nh * NT;
    __threadfence(); /* this thread's raw values, device-wide, before any count that covers them */
    __syncthreads();
    for (int i = threadIdx.x; i < n_pairs; i += blockDim.x) {
        const int t = i / nh, h = h0 + i % nh;
        const int64_t hs = r0 > (int64_t)h * hd ? r0 : (int64_t)h * hd, he = b < (int64_t)(h + 1) * hd ? b : (int64_t)(h + 1) * hd;
        const int gi = h < x.nq / hd ? h : x.n_head + h - (int)(x.nq / hd);
        unsigned *cp = x.count + (int64_t)t * x.n_heads + gi;
        const unsigned add = (unsigned)(he - hs);
        const bool done = atomicAdd(cp, add) + add == (unsigned)hd;
        if (done) atomicExch(cp, 0u); /* every block's rows are in: the next launch starts from 0 */
        flag[i] = done;
    }
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int i = warp; i < n_pairs; i += nw) {
        if (!flag[i]) continue;
        __threadfence(); /* the other blocks' raw values, seen after their counts */
        mv_recipe_head(x, rows, i / nh, h0 + i % nh, lane);
    }
}

/* Where a ROPE source's row `row` (value v, its pair partner's value pv) of token t goes. */
__device__ __forceinline__ void mv_rope_store(const mv_x_norm_rope &x, int64_t row, int t, float v, float pv) {
    const int64_t cell = x.cell[t];
    if (row >= x.nq + x.nk) { /* V */
        x.vc[cell * x.kv_dim + (row - x.nq - x.nk)] = __half_as_ushort(__float2half_rn(v));
        return;
    }
    const bool is_k = row >= x.nq;
    const int64_t e = is_k ? row - x.nq : row;
    const bool odd = e & 1;
    float x0 = odd ? pv : v, x1 = odd ? v : pv;
    rope_pair(x0, x1, x.pos[t], (int)(e % x.head_dim) & ~1, x.n_rot, x.theta);
    const float out = odd ? x1 : x0;
    if (is_k) x.kc[cell * x.kv_dim + e] = __half_as_ushort(__float2half_rn(out));
    else x.q_out[(int64_t)t * x.nq + e] = out;
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
template <typename XS>
__device__ __forceinline__ float4 mv_x_stage(const XS &s, int tok, int kk, int k, float &ss) {
    if constexpr (XS::NORM) {
        const float4 v = *(const float4 *)(s.x + (int64_t)tok * k + kk);
        const float4 g = __ldg((const float4 *)(s.g + kk)); /* a weight: nothing in the step writes it */
        ss = fmaf(v.x, v.x, fmaf(v.y, v.y, fmaf(v.z, v.z, fmaf(v.w, v.w, ss))));
        return make_float4(v.x * g.x, v.y * g.y, v.z * g.z, v.w * g.w);
    } else {
        return mv_x_f32(s, tok, kk, k);
    }
}


#endif
