/* Decode matvec kernels, Y[n][rows] = W[rows][k] . X[n][k], as templates so the kernel lab can
 * time every variant; kernels.h's matvec_* pick the production one.
 *   v1  generic: weights in GGUF layout, dequantised to f32, f32 FMAs; every type. A block of
 *       8 warps takes 32 rows (4 per warp, lanes over 32-weight units), X staged in shared
 *       memory (padded against bank conflicts) in passes of mv1_pass(n) values.
 *   v2, v3  tensor cores: Q4_0 / Q4_K (and Q8_0, Q6_K: see their mv2_group) repacked (layout below); 4-bit codes become f16 exactly in
 *       registers (one LOP3 per pair), mma.m16n8k16 multiplies them with X in f16 (f32 X split
 *       exactly into hi + lo halves, two columns per token), scales applied in f32 per 32-weight
 *       group. One block = 16 rows x all of k; its 8 warps split k; X staged in shared memory.
 *       v3 keeps two 2 KB groups of weights in flight per warp (v2 one) and stages X with four
 *       loads in flight per thread, and unpacks 4-bit codes with one shift per word instead of
 *       three; v4 is v3 capped at 80 registers (3 blocks, 24 warps per SM
 *       instead of 2 and 16). v5 (n = 1) is v3 with the column count a template constant
 *       (B-fragment addresses become base + immediate) and one LOP3 per unpacked register
 *       (MODE 2; for Q4_K and Q6_K also the block scale applied once per super-block).
 *   v6, v7  (n = 1, production for one token) v5's arithmetic in a persistent grid, one block
 *       per SM walking a run of tiles with 2 (v6) or 3 (v7) groups of loads in flight per warp:
 *       see the v6 section. v8 (lab): v6 launched without programmatic dependent launch;
 *       v9 (lab): v6 with Q4_0 / Q4_K weights through a shared-memory ring (cp.async.bulk).
 *   v10 (production): int8 X and dp4a on the same layout, 1 to 4 tokens, with the decode
 *       fusions; v11 (matvec_use_variant(11)): v10 with the weights streamed through a
 *       per-warp shared-memory ring by cp.async (see the v10 and v11 sections).
 *   Every variant is launched with PDL (pdl.cuh): the first groups of weights are loaded
 *   before pdl_wait(), X staged and y written after it.
 *
 * v2 repacked layout, for R16 = ceil(rows / 16) tiles of 16 rows and C = ceil(k / 64) chunks of
 * 64 weights (rows and k padded with zero weights):
 *   quants [R16][C][32 lanes][16 bytes]: lane l = 4g + t holds, in 32-bit word s (k16 step s of
 *     the chunk, k0 = 64c + 16s), the mma A fragment: nibble j (bits 4j..4j+3) of the word is
 *     the code of row g + 8 (j & 1), column k0 + 2t + 8 ((j >> 1) & 1) + (j >> 2); so
 *     (word >> 4p) & 0x000F000F holds register p's two codes in the two halves.
 *   scales [R16][C][64 bytes]:
 *     Q4_0: [8 g][4] f16 d of (row g, block 2c), (g, 2c+1), (g + 8, 2c), (g + 8, 2c + 1).
 *     Q4_K: per 4 chunks (one super-block) [16 rows][16 bytes] = d, dmin, scales[12] as in GGUF.
 * Codes are stored without offset: Q4_0's q - 8 and Q4_K's d*sc*q - dmin*m are applied after
 * the product (Q4_K's min term with per-32 sums of X computed while staging X). */
#ifndef MGI_KERNELS_MATVEC_CUH
#define MGI_KERNELS_MATVEC_CUH

#include <stdint.h>
#include <type_traits>
#include <cuda_fp16.h>
#include "kernels/dequant.cuh"
#include "kernels/pdl.cuh"
#include "kernels/optin.cuh"
#include "kernels/rope.cuh"
#include "kernels/trace.cuh"

/* Where a kernel's X comes from (a template parameter of every variant): mv_x, a plain [n][k]
 * array in f32 or f16 (the kernel's XT / XH says which); mv_x_swiglu, silu(g) * u of two strided
 * f32 arrays, computed while X is staged (cu_matvec_f32_swiglu). X is written by the previous
 * kernel, so it is read with plain loads after pdl_wait() (pdl.cuh), never with __ldg, which the
 * compiler may treat as invariant and move.
 * The decode fusions (v10 only; the other variants static_assert they get none) are flags of the
 * source: NORM, X is cu_rmsnorm(x) * g of a plain f32 [n][k] x (mv_x_norm: every block sums x^2
 * itself while staging x * g, and scales its outputs by 1 / rms); ACC, Y += W . X instead of
 * Y = W . X (mv_x_acc, mv_x_swiglu_acc: the residual add of the attention output and FFN down
 * products). */
struct mv_x { const void *p; static constexpr bool NORM = false, ACC = false, ROPE = false, GLU = false; };
struct mv_x_swiglu {
    const float *g, *u;
    int64_t sg, su;
    bool vec; /* vec: float4 loads */
    static constexpr bool NORM = false, ACC = false, ROPE = false, GLU = false;
};
struct mv_x_acc : mv_x { static constexpr bool ACC = true; };
struct mv_x_swiglu_acc : mv_x_swiglu { static constexpr bool ACC = true; };
/* x [n][k] f32 (rows 16-byte aligned), g [k] the norm's weight, eps the norm's epsilon. */
struct mv_x_norm {
    const float *x, *g;
    float eps;
    static constexpr bool NORM = true, ACC = false, ROPE = false, GLU = false;
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
template <typename XS> __host__ __device__ constexpr bool mv_fused() { return XS::NORM || XS::ACC; }

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

/* ---------------------------------------------------------------- v1: generic, GGUF layout -- */
#define MV1_ROWS 32 /* rows per block: 8 warps x 4 rows, so X is staged once per 32 rows */
#define MV1_SMEM 36864

/* X values per pass: n * kp * 4.5 bytes (X padded by 4 floats per 32) fit MV1_SMEM. */
__host__ __device__ __forceinline__ int mv1_pass(int n) { return (8192 / n) & ~255; }

template <int T, typename XT, typename XS = mv_x>
__global__ void __launch_bounds__(256) matvec_v1(float *y, const uint8_t *w, XS x, int rows, int k, int n) {
    static_assert(!mv_fused<XS>(), "v1: no fused norm or accumulation (v10 only)");
    extern __shared__ __align__(16) float mv1_x[]; /* [n][kp / 32][36] */
    pdl_wait(); /* X and y belong to the previous kernels (no weights are read early here) */
    pdl_trigger();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, kp = mv1_pass(n);
    const int stride = kp / 32 * 36;
    float acc[4][8];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < 8; c++) acc[r][c] = 0;
    for (int p0 = 0; p0 < k; p0 += kp) {
        const int pk = min(kp, k - p0);
        __syncthreads();
        for (int i = threadIdx.x; i < n * pk / 4; i += blockDim.x) {
            int tok = i / (pk / 4), e = 4 * (i % (pk / 4));
            float4 v;
            if constexpr (sizeof(XT) == 4) {
                v = mv_x_f32(x, tok, p0 + e, k);
            } else {
                uint2 h = *(const uint2 *)((const XT *)x.p + (int64_t)tok * k + p0 + e);
                float2 a = __half22float2(*(__half2 *)&h.x), b = __half22float2(*(__half2 *)&h.y);
                v = make_float4(a.x, a.y, b.x, b.y);
            }
            *(float4 *)&mv1_x[tok * stride + e / 32 * 36 + e % 32] = v;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int row = blockIdx.x * MV1_ROWS + warp + 8 * r;
            if (row >= rows) break;
            const uint8_t *wr = w + (int64_t)row * dq_row_bytes(T, k);
            for (int u = lane; u < pk / 32; u += 32) {
                float wv[32];
                dq_unit<T>(wr, p0 / 32 + u, wv);
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    if (c >= n) break;
                    const float4 *xp = (const float4 *)&mv1_x[c * stride + u * 36];
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        float4 xv = xp[i];
                        acc[r][c] = fmaf(wv[4 * i], xv.x, acc[r][c]);
                        acc[r][c] = fmaf(wv[4 * i + 1], xv.y, acc[r][c]);
                        acc[r][c] = fmaf(wv[4 * i + 2], xv.z, acc[r][c]);
                        acc[r][c] = fmaf(wv[4 * i + 3], xv.w, acc[r][c]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int row = blockIdx.x * MV1_ROWS + warp + 8 * r;
#pragma unroll
        for (int c = 0; c < 8; c++) {
            if (c >= n) break;
            float s = acc[r][c];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0 && row < rows) y[(int64_t)c * rows + row] = s;
        }
    }
}

/* ---------------------------------------------------------------- v2: tensor cores ---------- */
#define MV2_WARPS 8

/* Weights per pass of X staging; keeps shared memory at kp * ncols * 2.125 <= 34816 bytes. */
__host__ __device__ __forceinline__ int mv2_pass(int ncols) {
    return ncols <= 1 ? 16384 : ncols <= 2 ? 8192 : ncols <= 4 ? 4096 : ncols <= 8 ? 2048 : 1024;
}
#define MV2_SMEM 34816

__host__ __device__ __forceinline__ int64_t mv2_chunks(int64_t k) { return (k + 63) / 64; }

__device__ __forceinline__ uint4 mv_ld_stream(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ void mv_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The A fragment of one k16 step from a word of 8 4-bit codes, minus an offset o (1024 + o is
 * offset2's half; everything exact in f16). MODE 0: a shift, a mask-or and a subtract per
 * register. MODE 1: one shift per word; the codes at bits 4..7 and 20..23 are taken in place as
 * 1024 + 16q and scaled by 1/16 in the same HFMA2. MODE 2: MODE 1 with each mask-or one LOP3
 * (both constants otherwise take an immediate slot each: two LOP3s). */
__device__ __forceinline__ uint32_t mv_lop3_and_or(uint32_t x, uint32_t mask, uint32_t bits) {
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(x), "r"(mask), "r"(bits)); /* (x & mask) | bits */
    return r;
}

template <int MODE>
__device__ __forceinline__ void mv_codes(uint32_t a[4], uint32_t word, uint32_t offset2) {
    if constexpr (MODE >= 1) {
        const uint32_t w8 = word >> 8;
        const __half2 sub = *(__half2 *)&offset2;
        /* (1024 + 16q) / 16 - (64 + offset) = q - offset, and 64 + offset = offset2 - 960 */
        const __half2 sixteenth = __floats2half2_rn(0.0625f, 0.0625f);
        const __half2 sub16 = __hsub2(sub, __floats2half2_rn(960.0f, 960.0f));
        uint32_t h0, h1, h2, h3;
        if constexpr (MODE == 2) {
            h0 = mv_lop3_and_or(word, 0x000F000Fu, 0x64006400u);
            h1 = mv_lop3_and_or(word, 0x00F000F0u, 0x64006400u);
            h2 = mv_lop3_and_or(w8, 0x000F000Fu, 0x64006400u);
            h3 = mv_lop3_and_or(w8, 0x00F000F0u, 0x64006400u);
        } else {
            h0 = (word & 0x000F000Fu) | 0x64006400u;
            h1 = (word & 0x00F000F0u) | 0x64006400u;
            h2 = (w8 & 0x000F000Fu) | 0x64006400u;
            h3 = (w8 & 0x00F000F0u) | 0x64006400u;
        }
        __half2 v0 = __hsub2(*(__half2 *)&h0, sub), v2 = __hsub2(*(__half2 *)&h2, sub);
        __half2 v1 = __hfma2(*(__half2 *)&h1, sixteenth, __hneg2(sub16));
        __half2 v3 = __hfma2(*(__half2 *)&h3, sixteenth, __hneg2(sub16));
        a[0] = *(uint32_t *)&v0; a[1] = *(uint32_t *)&v1; a[2] = *(uint32_t *)&v2; a[3] = *(uint32_t *)&v3;
    } else {
#pragma unroll
        for (int p = 0; p < 4; p++) {
            uint32_t h = ((word >> (4 * p)) & 0x000F000Fu) | 0x64006400u;
            __half2 v = __hsub2(*(__half2 *)&h, *(__half2 *)&offset2);
            a[p] = *(uint32_t *)&v;
        }
    }
}

__device__ __forceinline__ float mv_half_lo(uint32_t v) { return __half2float(__ushort_as_half((unsigned short)(v & 0xffff))); }
__device__ __forceinline__ float mv_half_hi(uint32_t v) { return __half2float(__ushort_as_half((unsigned short)(v >> 16))); }

/* Byte i (compile-time after unrolling) of a 16-byte record. */
__device__ __forceinline__ uint32_t mv_byte(uint4 r, int i) {
    uint32_t w = i < 4 ? r.x : i < 8 ? r.y : i < 12 ? r.z : r.w;
    return (w >> (8 * (i & 3))) & 255;
}

/* Byte i of v as a float: 2^23 + byte built by one PRMT, then one subtraction. */
__device__ __forceinline__ float mv_k4_byte(uint32_t v, int i) {
    return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7440u | (uint32_t)i)) - 8388608.0f;
}

/* Sub-block j's (d * sc, dmin * m) from a Q4_K record d, dmin, scales[12]. */
__device__ __forceinline__ float2 mv_k4_scale(uint4 r, int j) {
    uint32_t sc, m;
    if (j < 4) {
        sc = mv_byte(r, 4 + j) & 63;
        m = mv_byte(r, 8 + j) & 63;
    } else {
        sc = (mv_byte(r, 8 + j) & 15) | ((mv_byte(r, j) >> 6) << 4);
        m = (mv_byte(r, 8 + j) >> 4) | ((mv_byte(r, 4 + j) >> 6) << 4);
    }
    return make_float2(mv_half_lo(r.x) * (float)sc, mv_half_hi(r.x) * (float)m);
}

/* Stages weights [p0, p0 + pk) of X as B fragments: xb[step][col][t] = uint2 (k0 + 2t, +1) and
 * (k0 + 2t + 8, +9) in f16, and xs[sub][col] = f32 sum of the 32 X of sub-block sub (0 for lo
 * columns). Column col is token col (f16 X) or token col / 2, hi (even) or lo (odd) part.
 * Each thread takes 4 consecutive X (one 16- or 8-byte load, coalesced across the block);
 * the 8 threads of a 32-value sub-block add their sums with shuffles. */
template <bool XH, int U, typename XS>
__device__ __forceinline__ void mv2_stage(uint2 *xb, float *xs, const XS &xv, int k, int n,
                                          int ncols, int p0, int pk) {
    uint32_t *xw = (uint32_t *)xb;
    const int q4 = pk / 4, total = n * q4; /* q4 is a multiple of 16 */
    for (int base0 = 0; base0 < total; base0 += U * blockDim.x) {
      /* U loads in flight per thread before the first is used */
      float4 raw[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int f = base0 + u * blockDim.x + threadIdx.x;
        const int tok = f < total ? f / q4 : 0, kk = p0 + 4 * (f < total ? f % q4 : 0);
        raw[u] = make_float4(0, 0, 0, 0);
        if (f < total && kk < k) {
            if constexpr (XH) {
                uint2 r = *(const uint2 *)((const unsigned short *)xv.p + (int64_t)tok * k + kk);
                raw[u].x = __uint_as_float(r.x);
                raw[u].y = __uint_as_float(r.y);
            } else {
                raw[u] = mv_x_f32(xv, tok, kk, k);
            }
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int base = base0 + u * blockDim.x;
        if (base >= total) break;
        const int f = base + threadIdx.x;
        const bool in = f < total;
        const int tok = in ? f / q4 : 0, e4 = 4 * (in ? f % q4 : 0);
        float v[4];
        uint32_t h01 = 0, h23 = 0;
        if (XH) {
            h01 = __float_as_uint(raw[u].x);
            h23 = __float_as_uint(raw[u].y);
            float2 a = __half22float2(*(__half2 *)&h01), b = __half22float2(*(__half2 *)&h23);
            v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
        } else {
            v[0] = raw[u].x; v[1] = raw[u].y; v[2] = raw[u].z; v[3] = raw[u].w;
        }
        float sum = (v[0] + v[1]) + (v[2] + v[3]);
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        sum += __shfl_xor_sync(0xffffffffu, sum, 4);
        if (!in) continue;
        const int s = e4 / 16, e = e4 % 16, t = (e % 8) / 2, hiw = e >= 8, sub = e4 / 32;
        const int col = XH ? tok : 2 * tok;
        if (XH) {
            xw[((s * ncols + col) * 4 + t) * 2 + hiw] = h01;
            xw[((s * ncols + col) * 4 + t + 1) * 2 + hiw] = h23;
        } else {
            __half2 a = __floats2half2_rn(v[0], v[1]), b = __floats2half2_rn(v[2], v[3]);
            float2 af = __half22float2(a), bf = __half22float2(b);
            __half2 al = __floats2half2_rn(v[0] - af.x, v[1] - af.y), bl = __floats2half2_rn(v[2] - bf.x, v[3] - bf.y);
            xw[((s * ncols + col) * 4 + t) * 2 + hiw] = *(uint32_t *)&a;
            xw[((s * ncols + col) * 4 + t + 1) * 2 + hiw] = *(uint32_t *)&b;
            xw[((s * ncols + col + 1) * 4 + t) * 2 + hiw] = *(uint32_t *)&al;
            xw[((s * ncols + col + 1) * 4 + t + 1) * 2 + hiw] = *(uint32_t *)&bl;
        }
        if ((f & 7) == 0) {
            xs[sub * ncols + col] = sum;
            if (!XH) xs[sub * ncols + col + 1] = 0.0f;
        }
      }
    }
}

/* B fragment of local k16 step s for column group gr (zeros past the last column). */
template <int NG>
__device__ __forceinline__ void mv2_bfrag(uint2 b[NG], const uint2 *xb, int s, int ncols, int g, int t) {
#pragma unroll
    for (int gr = 0; gr < NG; gr++) {
        int col = 8 * gr + g;
        b[gr] = col < ncols ? xb[(s * ncols + col) * 4 + t] : make_uint2(0, 0);
    }
}

/* One warp's 4 chunks of weights in registers: loaded ahead, then multiplied. */
template <int T> struct mv2_group;

template <> struct mv2_group<QUANT_Q4_0> {
    static constexpr int GC = 4; /* chunks per group */
    uint4 q[4];
    uint2 sc[4];
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int cbase, int c,
                                         int pc, int lane, int g) {
        const uint4 *qt = (const uint4 *)w + tile * C * 32;
        const uint8_t *st = w + R16 * C * 512 + tile * C * 64;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (pc == 0 || c + i < pc) { /* pc 0: whole groups (v6) */
                q[i] = mv_ld_stream(qt + (int64_t)(cbase + c + i) * 32 + lane);
                sc[i] = __ldg((const uint2 *)(st + (int64_t)(cbase + c + i) * 64) + g);
            }
        }
    }
    template <int NG, int MODE>
    __device__ __forceinline__ void compute(float acc[NG][4], const uint2 *xb, const float *, int c, int pc,
                                            int ncols, int g, int t) const {
        const uint32_t off = 0x64086408u; /* 1032 = 1024 + 8 */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (pc != 0 && c + i >= pc) break;
            const uint32_t words[4] = {q[i].x, q[i].y, q[i].z, q[i].w};
#pragma unroll
            for (int blk = 0; blk < 2; blk++) {
                float d[NG][4];
#pragma unroll
                for (int gr = 0; gr < NG; gr++) d[gr][0] = d[gr][1] = d[gr][2] = d[gr][3] = 0;
#pragma unroll
                for (int s2 = 0; s2 < 2; s2++) {
                    uint32_t a[4];
                    mv_codes<MODE>(a, words[2 * blk + s2], off);
                    uint2 b[NG];
                    mv2_bfrag<NG>(b, xb, (c + i) * 4 + 2 * blk + s2, ncols, g, t);
#pragma unroll
                    for (int gr = 0; gr < NG; gr++) mv_mma(d[gr], a, b[gr].x, b[gr].y);
                }
                const float d0 = blk ? mv_half_hi(sc[i].x) : mv_half_lo(sc[i].x);
                const float d1 = blk ? mv_half_hi(sc[i].y) : mv_half_lo(sc[i].y);
#pragma unroll
                for (int gr = 0; gr < NG; gr++) {
                    acc[gr][0] = fmaf(d0, d[gr][0], acc[gr][0]);
                    acc[gr][1] = fmaf(d0, d[gr][1], acc[gr][1]);
                    acc[gr][2] = fmaf(d1, d[gr][2], acc[gr][2]);
                    acc[gr][3] = fmaf(d1, d[gr][3], acc[gr][3]);
                }
            }
        }
    }
};

/* For Q4_K a group is one super-block (4 chunks share a scale record per row). */
template <> struct mv2_group<QUANT_Q4_K> {
    static constexpr int GC = 4;
    uint4 q[4], r0, r1;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int cbase, int c,
                                         int, int lane, int g) {
        const uint4 *qt = (const uint4 *)w + tile * C * 32;
        const uint8_t *st = w + R16 * C * 512 + tile * C * 64;
        const int64_t cg = cbase + c;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = mv_ld_stream(qt + (cg + i) * 32 + lane);
        const uint4 *sr = (const uint4 *)(st + cg * 64);
        r0 = __ldg(sr + g);
        r1 = __ldg(sr + g + 8);
    }
    template <int NG, int MODE>
    __device__ __forceinline__ void compute(float acc[NG][4], const uint2 *xb, const float *xs, int c, int,
                                            int ncols, int g, int t) const {
        const uint32_t off = 0x64006400u;
        /* The 6-bit scales and mins of sub-blocks 0-3 (a) and 4-7 (b), one byte each. */
        const uint32_t sc0a = r0.y & 0x3f3f3f3fu, m0a = r0.z & 0x3f3f3f3fu;
        const uint32_t sc0b = (r0.w & 0x0f0f0f0fu) | ((r0.y >> 2) & 0x30303030u);
        const uint32_t m0b = ((r0.w >> 4) & 0x0f0f0f0fu) | ((r0.z >> 2) & 0x30303030u);
        const uint32_t sc1a = r1.y & 0x3f3f3f3fu, m1a = r1.z & 0x3f3f3f3fu;
        const uint32_t sc1b = (r1.w & 0x0f0f0f0fu) | ((r1.y >> 2) & 0x30303030u);
        const uint32_t m1b = ((r1.w >> 4) & 0x0f0f0f0fu) | ((r1.z >> 2) & 0x30303030u);
        /* MODE 2 (n = 1): the super-block's sums of sc * product and m * X, times d and dmin once */
        float ga[4] = {0.0f, 0.0f, 0.0f, 0.0f}, gm0 = 0.0f, gm1 = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const uint32_t words[4] = {q[j >> 1].x, q[j >> 1].y, q[j >> 1].z, q[j >> 1].w};
            float d[NG][4];
#pragma unroll
            for (int gr = 0; gr < NG; gr++) d[gr][0] = d[gr][1] = d[gr][2] = d[gr][3] = 0;
#pragma unroll
            for (int s2 = 0; s2 < 2; s2++) {
                uint32_t a[4];
                mv_codes<MODE>(a, words[2 * (j & 1) + s2], off);
                uint2 b[NG];
                mv2_bfrag<NG>(b, xb, c * 4 + 2 * j + s2, ncols, g, t);
#pragma unroll
                for (int gr = 0; gr < NG; gr++) mv_mma(d[gr], a, b[gr].x, b[gr].y);
            }
            const int sub = 2 * c + j;
            if constexpr (MODE == 2 && NG == 1) {
                /* n = 1: only column 0 carries the sum of X (f32 X: the lo column sums to 0) */
                const float s0 = mv_k4_byte(j < 4 ? sc0a : sc0b, j & 3), s1 = mv_k4_byte(j < 4 ? sc1a : sc1b, j & 3);
                const float m0 = mv_k4_byte(j < 4 ? m0a : m0b, j & 3), m1 = mv_k4_byte(j < 4 ? m1a : m1b, j & 3);
                const float x0 = xs[sub * ncols];
                ga[0] = fmaf(s0, d[0][0], ga[0]);
                ga[1] = fmaf(s0, d[0][1], ga[1]);
                ga[2] = fmaf(s1, d[0][2], ga[2]);
                ga[3] = fmaf(s1, d[0][3], ga[3]);
                gm0 = fmaf(m0, x0, gm0);
                gm1 = fmaf(m1, x0, gm1);
                continue;
            }
            const float2 s0 = mv_k4_scale(r0, j), s1 = mv_k4_scale(r1, j);
#pragma unroll
            for (int gr = 0; gr < NG; gr++) {
                const int col = 8 * gr + 2 * t;
                const float x0 = col < ncols ? xs[sub * ncols + col] : 0.0f;
                const float x1 = col + 1 < ncols ? xs[sub * ncols + col + 1] : 0.0f;
                acc[gr][0] += fmaf(s0.x, d[gr][0], -s0.y * x0);
                acc[gr][1] += fmaf(s0.x, d[gr][1], -s0.y * x1);
                acc[gr][2] += fmaf(s1.x, d[gr][2], -s1.y * x0);
                acc[gr][3] += fmaf(s1.x, d[gr][3], -s1.y * x1);
            }
        }
        if constexpr (MODE == 2 && NG == 1) {
            const float d0 = mv_half_lo(r0.x), d1 = mv_half_lo(r1.x);
            acc[0][0] = fmaf(d0, ga[0], fmaf(-mv_half_hi(r0.x), gm0, acc[0][0]));
            acc[0][1] = fmaf(d0, ga[1], acc[0][1]);
            acc[0][2] = fmaf(d1, ga[2], fmaf(-mv_half_hi(r1.x), gm1, acc[0][2]));
            acc[0][3] = fmaf(d1, ga[3], acc[0][3]);
        }
    }
};

/* Q8_0: codes stored +128 as bytes; a group is 2 chunks (2 KB per warp). */
template <> struct mv2_group<QUANT_Q8_0> {
    static constexpr int GC = 2;
    uint4 q[4];
    uint2 sc[2];
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int cbase, int c,
                                         int pc, int lane, int g) {
        const uint4 *qt = (const uint4 *)w + tile * C * 64;
        const uint8_t *st = w + R16 * C * 1024 + tile * C * 64;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            if (pc == 0 || c + i < pc) { /* pc 0: whole groups (v6) */
                q[2 * i] = mv_ld_stream(qt + (int64_t)(cbase + c + i) * 64 + 2 * lane);
                q[2 * i + 1] = mv_ld_stream(qt + (int64_t)(cbase + c + i) * 64 + 2 * lane + 1);
                sc[i] = __ldg((const uint2 *)(st + (int64_t)(cbase + c + i) * 64) + g);
            }
        }
    }
    template <int NG, int MODE>
    __device__ __forceinline__ void compute(float acc[NG][4], const uint2 *xb, const float *, int c, int pc,
                                            int ncols, int g, int t) const {
        const uint32_t off = 0x64806480u; /* 1152 = 1024 + 128 */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            if (pc != 0 && c + i >= pc) break;
            const uint32_t words[8] = {q[2 * i].x, q[2 * i].y, q[2 * i].z, q[2 * i].w,
                                       q[2 * i + 1].x, q[2 * i + 1].y, q[2 * i + 1].z, q[2 * i + 1].w};
#pragma unroll
            for (int blk = 0; blk < 2; blk++) {
                float d[NG][4];
#pragma unroll
                for (int gr = 0; gr < NG; gr++) d[gr][0] = d[gr][1] = d[gr][2] = d[gr][3] = 0;
#pragma unroll
                for (int s2 = 0; s2 < 2; s2++) {
                    const int s = 2 * blk + s2;
                    uint32_t a[4];
#pragma unroll
                    for (int p = 0; p < 4; p++) {
                        uint32_t h = __byte_perm(words[2 * s + (p >> 1)], 0x64646464u, (p & 1) ? 0x4342 : 0x4140);
                        __half2 v = __hsub2(*(__half2 *)&h, *(const __half2 *)&off);
                        a[p] = *(uint32_t *)&v;
                    }
                    uint2 b[NG];
                    mv2_bfrag<NG>(b, xb, (c + i) * 4 + s, ncols, g, t);
#pragma unroll
                    for (int gr = 0; gr < NG; gr++) mv_mma(d[gr], a, b[gr].x, b[gr].y);
                }
                const float d0 = blk ? mv_half_hi(sc[i].x) : mv_half_lo(sc[i].x);
                const float d1 = blk ? mv_half_hi(sc[i].y) : mv_half_lo(sc[i].y);
#pragma unroll
                for (int gr = 0; gr < NG; gr++) {
                    acc[gr][0] = fmaf(d0, d[gr][0], acc[gr][0]);
                    acc[gr][1] = fmaf(d0, d[gr][1], acc[gr][1]);
                    acc[gr][2] = fmaf(d1, d[gr][2], acc[gr][2]);
                    acc[gr][3] = fmaf(d1, d[gr][3], acc[gr][3]);
                }
            }
        }
    }
};

/* Q6_K: low nibbles as Q4, 2 high bits in a second stream, an int8 scale per 16 weights (one
 * k16 step) and d per super-block; a group is one super-block. */
template <> struct mv2_group<QUANT_Q6_K> {
    static constexpr int GC = 4;
    uint4 lo[4];
    uint2 hi[4];
    uint32_t sg[4], sg8[4], dd;
    __device__ __forceinline__ void load(const uint8_t *w, int64_t R16, int64_t C, int64_t tile, int cbase, int c,
                                         int, int lane, int g) {
        const int64_t cg = cbase + c;
        const uint4 *lt = (const uint4 *)w + tile * C * 32;
        const uint2 *ht = (const uint2 *)(w + R16 * C * 512) + tile * C * 32;
        const uint32_t *sct = (const uint32_t *)(w + R16 * C * 768) + tile * C * 16;
        const uint16_t *dt = (const uint16_t *)(w + R16 * C * 832) + tile * (C / 4) * 16;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo[i] = mv_ld_stream(lt + (cg + i) * 32 + lane);
            hi[i] = __ldg(ht + (cg + i) * 32 + lane);
            sg[i] = __ldg(sct + (cg + i) * 16 + g);
            sg8[i] = __ldg(sct + (cg + i) * 16 + g + 8);
        }
        dd = (uint32_t)__ldg(dt + (cg / 4) * 16 + g) | (uint32_t)__ldg(dt + (cg / 4) * 16 + g + 8) << 16;
    }
    template <int NG, int MODE>
    __device__ __forceinline__ void compute(float acc[NG][4], const uint2 *xb, const float *, int c, int,
                                            int ncols, int g, int t) const {
        const uint32_t off = 0x64206420u; /* 1056 = 1024 + 32 */
        const float dg = mv_half_lo(dd), dg8 = mv_half_hi(dd);
        float ga[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* MODE 2 (n = 1): sums of sc * product */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t lw[4] = {lo[i].x, lo[i].y, lo[i].z, lo[i].w}, hw[2] = {hi[i].x, hi[i].y};
#pragma unroll
            for (int s = 0; s < 4; s++) {
                uint32_t a[4];
                if constexpr (MODE == 2) {
                    /* As mv_codes MODE 2: registers 1 and 3 take their low nibble in place (1024 +
                     * 16q, scaled by 1/16), so the word is shifted once; the 2 high bits of
                     * register p sit at 8 (s & 1) + 2p of the high word and move next to it. */
                    const uint32_t l8 = lw[s] >> 8, h = hw[s >> 1], K = 0x64006400u;
                    const uint32_t h0 = (s & 1) ? h >> 4 : h << 4, h1 = (s & 1) ? h >> 2 : h << 6;
                    const uint32_t h2 = (s & 1) ? h >> 8 : h, h3 = (s & 1) ? h >> 6 : h << 2;
                    uint32_t c0 = mv_lop3_and_or(h0, 0x00300030u, mv_lop3_and_or(lw[s], 0x000F000Fu, K));
                    uint32_t c1 = mv_lop3_and_or(h1, 0x03000300u, mv_lop3_and_or(lw[s], 0x00F000F0u, K));
                    uint32_t c2 = mv_lop3_and_or(h2, 0x00300030u, mv_lop3_and_or(l8, 0x000F000Fu, K));
                    uint32_t c3 = mv_lop3_and_or(h3, 0x03000300u, mv_lop3_and_or(l8, 0x00F000F0u, K));
                    /* 1024 + q - 1056 = q - 32; (1024 + 16q) / 16 - 96 = q - 32 */
                    const __half2 sixteenth = __floats2half2_rn(0.0625f, 0.0625f), m96 = __floats2half2_rn(-96.0f, -96.0f);
                    __half2 v0 = __hsub2(*(__half2 *)&c0, *(const __half2 *)&off);
                    __half2 v2 = __hsub2(*(__half2 *)&c2, *(const __half2 *)&off);
                    __half2 v1 = __hfma2(*(__half2 *)&c1, sixteenth, m96);
                    __half2 v3 = __hfma2(*(__half2 *)&c3, sixteenth, m96);
                    a[0] = *(uint32_t *)&v0; a[1] = *(uint32_t *)&v1; a[2] = *(uint32_t *)&v2; a[3] = *(uint32_t *)&v3;
                } else {
#pragma unroll
                for (int p = 0; p < 4; p++) {
                    uint32_t h = ((lw[s] >> (4 * p)) & 0x000F000Fu) |
                                 (((hw[s >> 1] >> (8 * (s & 1) + 2 * p)) & 0x00030003u) << 4) | 0x64006400u;
                    __half2 v = __hsub2(*(__half2 *)&h, *(const __half2 *)&off);
                    a[p] = *(uint32_t *)&v;
                }
                }
                uint2 b[NG];
                mv2_bfrag<NG>(b, xb, (c + i) * 4 + s, ncols, g, t);
                float d[NG][4];
#pragma unroll
                for (int gr = 0; gr < NG; gr++) {
                    d[gr][0] = d[gr][1] = d[gr][2] = d[gr][3] = 0;
                    mv_mma(d[gr], a, b[gr].x, b[gr].y);
                }
                if constexpr (MODE == 2 && NG == 1) { /* d of the super-block applied once, below */
                    const float s0 = (float)(int8_t)(sg[i] >> (8 * s)), s1 = (float)(int8_t)(sg8[i] >> (8 * s));
                    ga[0] = fmaf(s0, d[0][0], ga[0]);
                    ga[1] = fmaf(s0, d[0][1], ga[1]);
                    ga[2] = fmaf(s1, d[0][2], ga[2]);
                    ga[3] = fmaf(s1, d[0][3], ga[3]);
                    continue;
                }
                const float s0 = dg * (float)(int8_t)(sg[i] >> (8 * s)), s1 = dg8 * (float)(int8_t)(sg8[i] >> (8 * s));
#pragma unroll
                for (int gr = 0; gr < NG; gr++) {
                    acc[gr][0] = fmaf(s0, d[gr][0], acc[gr][0]);
                    acc[gr][1] = fmaf(s0, d[gr][1], acc[gr][1]);
                    acc[gr][2] = fmaf(s1, d[gr][2], acc[gr][2]);
                    acc[gr][3] = fmaf(s1, d[gr][3], acc[gr][3]);
                }
            }
        }
        if constexpr (MODE == 2 && NG == 1) {
            acc[0][0] = fmaf(dg, ga[0], acc[0][0]);
            acc[0][1] = fmaf(dg, ga[1], acc[0][1]);
            acc[0][2] = fmaf(dg8, ga[2], acc[0][2]);
            acc[0][3] = fmaf(dg8, ga[3], acc[0][3]);
        }
    }
};

template <int T, bool XH, int NG, int V, int NC = 0, typename XS = mv_x>
__global__ void __launch_bounds__(256, V == 4 ? 3 : 2) matvec_v2(float *y, const uint8_t *w, XS xv,
                                                 int rows, int k, int n) {
    static_assert(T == QUANT_Q4_0 || T == QUANT_Q4_K || T == QUANT_Q8_0 || T == QUANT_Q6_K, "v2: Q4_0 Q4_K Q8_0 Q6_K");
    static_assert(!mv_fused<XS>(), "v2-v5: no fused norm or accumulation (v10 only)");
    constexpr int GC = mv2_group<T>::GC;
    extern __shared__ __align__(16) uint8_t mv2_smem[];
    const int ncols = NC ? NC : XH ? n : 2 * n; /* v5: a compile-time constant */
    const int kp = mv2_pass(ncols);
    constexpr int MODE = V == 2 ? 0 : V == 5 ? 2 : 1;
    uint2 *xb = (uint2 *)mv2_smem;
    float *xs = (float *)(mv2_smem + (size_t)kp * ncols * 2);
    const int64_t C = mv2_chunks(k), R16 = (rows + 15) / 16, tile = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float acc[NG][4];
#pragma unroll
    for (int gr = 0; gr < NG; gr++) acc[gr][0] = acc[gr][1] = acc[gr][2] = acc[gr][3] = 0;

    /* Each warp walks groups of 4 chunks (2 KB of quants). V = 2: the next group's loads are
     * issued before the current one is computed, and a pass's first group before X is staged.
     * V = 3: two groups in flight (buffers a and b, no register moves), both issued before X is
     * staged, and X staged with 4 loads in flight per thread. */
    for (int p0 = 0; p0 < C * 64; p0 += kp) {
        const int pk = min((int64_t)kp, C * 64 - p0), pc = pk / 64, cbase = p0 / 64;
        const int ng = (pc + GC - 1) / GC, g0 = warp * ng / MV2_WARPS, g1 = (warp + 1) * ng / MV2_WARPS;
        if constexpr (V == 2) {
            mv2_group<T> cur, nxt;
            if (g0 < g1) cur.load(w, R16, C, tile, cbase, GC * g0, pc, lane, g);
            pdl_wait(); /* weights above may overlap the previous kernel; X and y wait (pdl.cuh) */
            pdl_trigger();
            __syncthreads();
            mv2_stage<XH, 1>(xb, xs, xv, k, n, ncols, p0, pk);
            __syncthreads();
            for (int gi = g0; gi < g1; gi++) {
                if (gi + 1 < g1) nxt.load(w, R16, C, tile, cbase, GC * (gi + 1), pc, lane, g);
                cur.template compute<NG, 0>(acc, xb, xs, GC * gi, pc, ncols, g, t);
                cur = nxt;
            }
        } else {
            mv2_group<T> ga, gb;
            if (g0 < g1) ga.load(w, R16, C, tile, cbase, GC * g0, pc, lane, g);
            if (g0 + 1 < g1) gb.load(w, R16, C, tile, cbase, GC * (g0 + 1), pc, lane, g);
            pdl_wait(); /* weights above may overlap the previous kernel; X and y wait (pdl.cuh) */
            pdl_trigger();
            __syncthreads();
            mv2_stage<XH, 4>(xb, xs, xv, k, n, ncols, p0, pk);
            __syncthreads();
            for (int gi = g0; gi < g1; gi += 2) {
                ga.template compute<NG, MODE>(acc, xb, xs, GC * gi, pc, ncols, g, t);
                if (gi + 2 < g1) ga.load(w, R16, C, tile, cbase, GC * (gi + 2), pc, lane, g);
                if (gi + 1 < g1) {
                    gb.template compute<NG, MODE>(acc, xb, xs, GC * (gi + 1), pc, ncols, g, t);
                    if (gi + 3 < g1) gb.load(w, R16, C, tile, cbase, GC * (gi + 3), pc, lane, g);
                }
            }
        }
    }

    /* Sum the warps' partial products: red[warp][16 rows][8 NG columns]. */
    __syncthreads();
    float *red = (float *)mv2_smem;
    const int nc = 8 * NG;
#pragma unroll
    for (int gr = 0; gr < NG; gr++) {
        int col = 8 * gr + 2 * t;
        red[(warp * 16 + g) * nc + col] = acc[gr][0];
        red[(warp * 16 + g) * nc + col + 1] = acc[gr][1];
        red[(warp * 16 + g + 8) * nc + col] = acc[gr][2];
        red[(warp * 16 + g + 8) * nc + col + 1] = acc[gr][3];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * n; i += blockDim.x) {
        int r = i & 15, tok = i >> 4;
        int64_t row = tile * 16 + r;
        float s = 0;
        for (int wp = 0; wp < MV2_WARPS; wp++) {
            const float *p = red + (wp * 16 + r) * nc;
            s += XH ? p[tok] : p[2 * tok] + p[2 * tok + 1];
        }
        if (row < rows) y[tok * (int64_t)rows + row] = s;
    }
}

/* ---------------------------------------------------------------- v6: persistent, n = 1 ----- */
/* v6 = v5's arithmetic (n = 1, MODE 2) in a persistent grid: one block of MV6_WARPS warps per SM
 * takes a contiguous run of 16-row tiles, stages all of X once, and its warps split the block's
 * (tile, 2 KB group) units evenly, walking them with MV6_NB groups of loads in flight across
 * tile boundaries (no barrier between tiles, so no pipeline drain). Each warp leaves its partial
 * sum of each tile it touched in shared memory; the block adds them in warp order at the end
 * (deterministic: no atomics). */
#define MV6_WARPS 16
#define MV6_TILES 24 /* most tiles per block (partial sums in shared memory); more blocks past that */
#define MV9_SLOT 2304 /* v9: bytes of one group in its shared-memory slot */

/* Shared memory of v6: X as B fragments (32 bytes per k16 step and column), per-32 sums of X,
 * and the partial sums [tiles][warps][16 rows][ncols]. */
__host__ __device__ __forceinline__ size_t mv6_smem(int64_t k, int ncols, int64_t tiles, int ring_slots) {
    const int64_t C = mv2_chunks(k);
    return (size_t)(C * 128 * ncols + C * 8 * ncols + tiles * MV6_WARPS * 16 * ncols * 4) +
           (size_t)ring_slots * MV6_WARPS * (MV9_SLOT + 8);
}

/* v9 (RING): a Q4_0 / Q4_K group in shared memory, 2 KB of quants then 256 bytes of scales,
 * copied by the bulk-copy engine (cp.async.bulk, one lane issues it) and completed on an
 * mbarrier; bytes in flight then cost shared memory, not registers. */

__device__ __forceinline__ void mv9_issue(uint32_t dst, uint32_t bar, const uint8_t *q, const uint8_t *sc) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(MV9_SLOT) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 2048, [%2];"
                 ::"r"(dst), "l"(q), "r"(bar) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 256, [%2];"
                 ::"r"(dst + 2048), "l"(sc), "r"(bar) : "memory");
}

__device__ __forceinline__ void mv9_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

/* A group's registers from its slot, as mv2_group<T>::load leaves them. */
template <int T>
__device__ __forceinline__ void mv9_fill(mv2_group<T> &gr, const uint8_t *slot, int lane, int g) {
    const uint4 *q = (const uint4 *)slot;
#pragma unroll
    for (int i = 0; i < 4; i++) gr.q[i] = q[i * 32 + lane];
    if constexpr (T == QUANT_Q4_0) {
#pragma unroll
        for (int i = 0; i < 4; i++) gr.sc[i] = ((const uint2 *)(slot + 2048 + 64 * i))[g];
    } else {
        gr.r0 = ((const uint4 *)(slot + 2048))[g];
        gr.r1 = ((const uint4 *)(slot + 2048))[g + 8];
    }
}

template <int T, bool XH, int NB, bool RING = false, typename XS = mv_x>
__global__ void __launch_bounds__(MV6_WARPS * 32, 1) matvec_v6(float *y, const uint8_t *w, XS xv,
                                                               int rows, int k) {
    static_assert(!mv_fused<XS>(), "v6-v9: no fused norm or accumulation (v10 only)");
    constexpr int NC = XH ? 1 : 2, GC = mv2_group<T>::GC, W = MV6_WARPS;
    extern __shared__ __align__(16) uint8_t mv6_smem_buf[];
    const int64_t C = mv2_chunks(k), R16 = (rows + 15) / 16;
    const int64_t t0 = blockIdx.x * R16 / gridDim.x, t1 = (blockIdx.x + 1) * R16 / gridDim.x;
    const int nt = (int)(t1 - t0), ng = (int)((C + GC - 1) / GC), units = nt * ng;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int u0 = warp * units / W, u1 = (warp + 1) * units / W;
    static_assert(!RING || T == QUANT_Q4_0 || T == QUANT_Q4_K, "v9: Q4_0, Q4_K");
    /* RING: NB slots per warp, then their mbarriers, then X */
    uint8_t *ring = mv6_smem_buf + warp * NB * MV9_SLOT;
    uint64_t *bars = (uint64_t *)(mv6_smem_buf + W * NB * MV9_SLOT) + warp * NB;
    uint8_t *xbase = mv6_smem_buf + (RING ? W * NB * (MV9_SLOT + 8) : 0);
    uint2 *xb = (uint2 *)xbase;
    float *xs = (float *)(xbase + C * 128 * NC), *red = xs + C * 2 * NC;
    /* every group is whole (the launcher checks C % GC == 0): pc = 0 folds the groups' per-chunk
     * guards away, so the compiler can interleave their chunks */
    constexpr int pc = 0;

    /* the first NB groups of loads go out before X is staged */
    mv2_group<T> gq[RING ? 1 : NB];
    int lt = u0 / ng, lg = u0 % ng; /* load cursor: tile (in the block) and group */
    auto issue = [&](int j) { /* RING: lane 0 sends the next group to slot j */
        const int64_t tile = t0 + lt, c = (int64_t)GC * lg;
        mv9_issue((uint32_t)__cvta_generic_to_shared(ring + j * MV9_SLOT), (uint32_t)__cvta_generic_to_shared(bars + j),
                  w + (tile * C + c) * 512, w + R16 * C * 512 + (tile * C + c) * 64);
    };
    if constexpr (RING) {
        if (lane == 0) {
            for (int j = 0; j < NB; j++)
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"((uint32_t)__cvta_generic_to_shared(bars + j)) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncwarp();
        for (int j = 0; j < NB; j++) {
            if (lane == 0 && u0 + j < u1) issue(j);
            if (++lg == ng) { lg = 0; lt++; }
        }
    } else {
#pragma unroll
        for (int j = 0; j < NB; j++) {
            if (u0 + j < u1) gq[j].load(w, R16, C, t0 + lt, 0, GC * lg, pc, lane, g);
            if (++lg == ng) { lg = 0; lt++; }
        }
    }
    /* PDL: everything above (weights only) may overlap the previous kernel; X, the partial sums
     * and y wait for it to finish (pdl.cuh). The next kernel may be scheduled from here on: its
     * own wait covers this whole grid. */
    pdl_wait();
    pdl_trigger();
    for (int i = threadIdx.x; i < nt * W * 16 * NC; i += blockDim.x) red[i] = 0.0f;
    mv2_stage<XH, 4>(xb, xs, xv, k, 1, NC, 0, (int)(C * 64));
    __syncthreads();

    float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
    int ct = u0 / ng, cg = u0 % ng; /* compute cursor */
    auto flush = [&]() {
        if (t == 0) {
            float *p = red + ((ct * W + warp) * 16 + g) * NC;
            p[0] = acc[0][0];
            p[8 * NC] = acc[0][2];
            if (NC == 2) { p[1] = acc[0][1]; p[8 * NC + 1] = acc[0][3]; }
        }
        acc[0][0] = acc[0][1] = acc[0][2] = acc[0][3] = 0.0f;
    };
    if constexpr (RING) {
        int j = 0;
        uint32_t phase = 0;
        for (int u = u0; u < u1; u++) {
            mv9_wait((uint32_t)__cvta_generic_to_shared(bars + j), phase);
            mv9_fill<T>(gq[0], ring + j * MV9_SLOT, lane, g);
            __syncwarp();
            if (u + NB < u1) { /* the slot is read: refill it (the copy engine's writes follow the lanes' reads) */
                if (lane == 0) {
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    issue(j);
                }
                if (++lg == ng) { lg = 0; lt++; }
            }
            gq[0].template compute<1, 2>(acc, xb, xs, GC * cg, pc, NC, g, t);
            if (++cg == ng) { flush(); cg = 0; ct++; }
            if (++j == NB) { j = 0; phase ^= 1; }
        }
    }
    if constexpr (!RING) {
        for (int u = u0; u < u1; u += NB) {
#pragma unroll
            for (int j = 0; j < NB; j++) {
                if (u + j < u1) {
                    gq[j].template compute<1, 2>(acc, xb, xs, GC * cg, pc, NC, g, t);
                    if (u + j + NB < u1) {
                        gq[j].load(w, R16, C, t0 + lt, 0, GC * lg, pc, lane, g);
                        if (++lg == ng) { lg = 0; lt++; }
                    }
                    if (++cg == ng) { flush(); cg = 0; ct++; }
                }
            }
        }
    }
    if (u0 < u1 && cg != 0) flush();
    __syncthreads();
    for (int i = threadIdx.x; i < nt * 16; i += blockDim.x) {
        const int tl = i >> 4, r = i & 15;
        const int64_t row = (t0 + tl) * 16 + r;
        float s = 0.0f;
#pragma unroll 4
        for (int wp = 0; wp < W; wp++) {
            const float *p = red + ((tl * W + wp) * 16 + r) * NC;
            s += NC == 2 ? p[0] + p[1] : p[0];
        }
        if (row < rows) y[row] = s;
    }
}

/* Multiprocessor count and opt-in shared memory per block of the current device (cached). */
static inline bool mv6_device(int *sms, int *smem_max) {
    static int cache[64][2];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    if (cache[dev][0] == 0) {
        int a = 0, b = 0;
        if (cudaDeviceGetAttribute(&a, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            return false;
        cache[dev][1] = b;
        cache[dev][0] = a;
    }
    *sms = cache[dev][0];
    *smem_max = cache[dev][1];
    return true;
}

/* Lets v6 use all the shared memory a block may opt into, once per device (cu_matvec_repack calls it
 * at load, before any graph capture). */
template <int T, bool XH, int NB, bool RING = false, typename XS = mv_x>
static inline bool mv6_prepare() {
    return smem_optin<matvec_v6<T, XH, NB, RING, XS>>() == cudaSuccess;
}

/* Launches v6 with NB groups in flight per warp, with the PDL attribute when pdl; false (nothing
 * launched) where it does not apply: n > 1, k not a whole number of groups (Q4_0: 256, Q8_0:
 * 128), or X and the partial sums do not fit in shared memory. *e is the launch status. */
template <int T, bool XH, int NB, bool RING = false, typename XS = mv_x>
static inline bool matvec_v6_launch(float *y, const void *w, XS x, int rows, int k, int n, cudaStream_t s,
                                    int pdl, cudaError_t *e) {
    int sms, smem_max;
    if (n != 1 || mv2_chunks(k) % mv2_group<T>::GC != 0 || !mv6_device(&sms, &smem_max)) return false;
    const int64_t R16 = (rows + 15) / 16;
    int64_t grid = R16 < sms ? R16 : sms;
    if ((R16 + grid - 1) / grid > MV6_TILES) grid = (R16 + MV6_TILES - 1) / MV6_TILES;
    const size_t smem = mv6_smem(k, XH ? 1 : 2, (R16 + grid - 1) / grid, RING ? NB : 0);
    if (smem > (size_t)smem_max || (smem > 48 * 1024 && !mv6_prepare<T, XH, NB, RING, XS>())) return false;
    *e = pdl_launch_as(pdl, matvec_v6<T, XH, NB, RING, XS>, dim3((unsigned)grid), dim3(MV6_WARPS * 32), smem, s, y,
                       (const uint8_t *)w, x, rows, k);
    return true;
}

/* Launches variant V (2 to 9) on repacked weights, X from x (mv_x, or mv_x_swiglu for f32):
 * one block per 16 rows, or v6's persistent grid (V 6: 2 groups in flight per warp, V 7: 3,
 * V 8: v6 launched without programmatic dependent launch (the lab's reference for what PDL
 * wins), V 9: Q4_0 and Q4_K groups through a shared-memory ring of 4 slots per warp filled by
 * the copy engine). v5-v9 exist for n = 1 (the column count is a template constant); other n,
 * and v6 where it does not fit, run v3. Every launch but V 8's carries the PDL attribute
 * (pdl.cuh); returns the launch status. */
template <int T, bool XH, int V, typename XS = mv_x>
static inline cudaError_t matvec_v2_launch(float *y, const void *w, XS x, int rows, int k, int n, cudaStream_t s) {
    const unsigned grid = (unsigned)((rows + 15) / 16);
    const int ncols = XH ? n : 2 * n, pdl = pdl_enabled();
    const uint8_t *wb = (const uint8_t *)w;
    cudaError_t e = cudaSuccess;
    if constexpr (V == 6 || V == 7) {
        if (matvec_v6_launch<T, XH, V == 6 ? 2 : 3, false, XS>(y, w, x, rows, k, n, s, pdl, &e)) return e;
    }
    if constexpr (V == 8) {
        if (matvec_v6_launch<T, XH, 2, false, XS>(y, w, x, rows, k, n, s, 0, &e)) return e;
    }
    if constexpr (V == 9 && (T == QUANT_Q4_0 || T == QUANT_Q4_K)) {
        if (matvec_v6_launch<T, XH, 4, true, XS>(y, w, x, rows, k, n, s, pdl, &e)) return e;
    } else if constexpr (V == 9) { /* Q6_K, Q8_0: v6 */
        if (matvec_v6_launch<T, XH, 2, false, XS>(y, w, x, rows, k, n, s, pdl, &e)) return e;
    }
    if constexpr (V == 5) {
        if (n == 1)
            return pdl_launch(matvec_v2<T, XH, 1, 5, XH ? 1 : 2, XS>, dim3(grid), dim3(256), MV2_SMEM, s, y, wb, x, rows, k, n);
    }
    constexpr int VV = V >= 5 ? 3 : V;
    if (ncols <= 8) return pdl_launch(matvec_v2<T, XH, 1, VV, 0, XS>, dim3(grid), dim3(256), MV2_SMEM, s, y, wb, x, rows, k, n);
    return pdl_launch(matvec_v2<T, XH, 2, VV, 0, XS>, dim3(grid), dim3(256), MV2_SMEM, s, y, wb, x, rows, k, n);
}

/* ---------------------------------------------------------------- v2 repacking -------------- */
/* Code of weight (row, kk) of a GGUF matrix, unsigned (Q8_0: q + 128, Q6_K: 6 bits); 0 outside. */
template <int T>
__host__ __device__ __forceinline__ uint32_t mv2_code(const uint8_t *w, int rows, int k, int64_t row, int64_t kk) {
    if (row >= rows || kk >= k) return 0;
    const uint8_t *r = w + row * dq_row_bytes(T, k);
    if constexpr (T == QUANT_Q4_0) {
        int j = (int)(kk & 31);
        uint32_t b = r[(kk >> 5) * sizeof(block_q4_0) + 2 + (j & 15)];
        return j < 16 ? b & 15 : b >> 4;
    } else if constexpr (T == QUANT_Q4_K) {
        int64_t sb = kk >> 8;
        int rr = (int)(kk & 255);
        uint32_t b = r[sb * sizeof(block_q4_K) + 16 + 32 * (rr >> 6) + (rr & 31)];
        return (rr & 63) < 32 ? b & 15 : b >> 4;
    } else if constexpr (T == QUANT_Q8_0) {
        return (r[(kk >> 5) * sizeof(block_q8_0) + 2 + (kk & 31)] ^ 0x80u) & 255;
    } else {
        const uint8_t *b = r + (kk >> 8) * sizeof(block_q6_K);
        int rr = (int)(kk & 255), h = rr >> 7, jj = (rr & 127) >> 5, l = rr & 31;
        uint32_t ql = b[64 * h + 32 * (jj & 1) + l], qh = b[128 + 32 * h + l];
        return ((jj >> 1) ? ql >> 4 : ql & 15) | ((qh >> (2 * jj)) & 3) << 4;
    }
}

/* Row and column of code j (0..7, the nibble order of matvec.cuh's layout) of lane (g, t) at
 * step s of chunk c in tile. */
__host__ __device__ __forceinline__ void mv2_where(int64_t tile, int64_t c, int s, int g, int t, int j, int64_t *row, int64_t *kk) {
    *row = tile * 16 + g + 8 * (j & 1);
    *kk = 64 * c + 16 * s + 2 * t + 8 * ((j >> 1) & 1) + (j >> 2);
}

/* f16 bits of block blk's d in a row (Q4_0 / Q8_0), 0 outside the matrix. */
template <int T>
__host__ __device__ __forceinline__ uint32_t mv2_d(const uint8_t *w, int rows, int k, int64_t row, int64_t blk) {
    if (row >= rows || blk >= k / 32) return 0;
    const uint8_t *p = w + row * dq_row_bytes(T, k) + blk * (T == QUANT_Q4_0 ? sizeof(block_q4_0) : sizeof(block_q8_0));
    return p[0] | p[1] << 8;
}

/* Bytes of the repacked form (0: not a v2 type). */
__host__ __device__ __forceinline__ int64_t mv2_bytes(int T, int64_t rows, int64_t k) {
    const int64_t R16 = (rows + 15) / 16, C = mv2_chunks(k);
    switch (T) {
    case QUANT_Q4_0: case QUANT_Q4_K: return R16 * C * 576;
    case QUANT_Q8_0: return R16 * C * 1088;
    case QUANT_Q6_K: return R16 * C * 840;
    default: return 0;
    }
}

/* Word i of the repacked matrix, region by region (host-callable for checks of the layout). */
template <int T>
__host__ __device__ inline void mv2_repack_word(uint8_t *out, const uint8_t *w, int rows, int k, int64_t i) {
    const int64_t C = mv2_chunks(k), R16 = (rows + 15) / 16;
    if (i >= mv2_bytes(T, rows, k) / 4) return;
    uint32_t v = 0;
    int64_t row, kk;
    /* quants (Q4 nibbles, Q8 bytes, Q6 low nibbles) */
    const int64_t wpc = T == QUANT_Q8_0 ? 256 : 128; /* words per chunk-tile */
    if (i < R16 * C * wpc) {
        int64_t tile = i / (C * wpc), rem = i % (C * wpc), c = rem / wpc;
        int r = (int)(rem % wpc), per = (int)(wpc / 32), lane = r / per, wi = r % per, g = lane >> 2, t = lane & 3;
        if constexpr (T == QUANT_Q8_0) {
            int s = wi / 2, hf = wi % 2;
            for (int b = 0; b < 4; b++) {
                int p = 2 * hf + b / 2, e = b % 2;
                mv2_where(tile, c, s, g, t, p + 4 * e, &row, &kk);
                v |= mv2_code<T>(w, rows, k, row, kk) << (8 * b);
            }
        } else {
            for (int j = 0; j < 8; j++) {
                mv2_where(tile, c, wi, g, t, j, &row, &kk);
                v |= (mv2_code<T>(w, rows, k, row, kk) & 15) << (4 * j);
            }
        }
        ((uint32_t *)out)[i] = v;
        return;
    }
    i -= R16 * C * wpc;
    if constexpr (T == QUANT_Q6_K) {
        if (i < R16 * C * 64) { /* high 2 bits: word wd of a lane holds steps 2wd, 2wd + 1 */
            int64_t tile = i / (C * 64), rem = i % (C * 64), c = rem / 64;
            int lane = (int)(rem % 64) / 2, wd = (int)(rem % 2), g = lane >> 2, t = lane & 3;
            for (int s1 = 0; s1 < 2; s1++)
                for (int j = 0; j < 8; j++) {
                    mv2_where(tile, c, 2 * wd + s1, g, t, j, &row, &kk);
                    v |= (mv2_code<T>(w, rows, k, row, kk) >> 4) << (16 * (j >> 2) + 8 * s1 + 2 * (j & 3));
                }
            ((uint32_t *)out)[R16 * C * 128 + i] = v;
            return;
        }
        i -= R16 * C * 64;
        if (i < R16 * C * 16) { /* int8 scales of the chunk's 4 steps, [16 rows] */
            int64_t tile = i / (C * 16), rem = i % (C * 16), c = rem / 16;
            row = tile * 16 + rem % 16;
            if (row < rows) {
                const uint8_t *b = w + row * dq_row_bytes(T, k) + (c / 4) * sizeof(block_q6_K) + 192 + 4 * (c % 4);
                v = b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
            }
            ((uint32_t *)out)[R16 * C * 192 + i] = v;
            return;
        }
        i -= R16 * C * 16;
        { /* d per super-block, [16 rows] f16 */
            int64_t tile = i / ((C / 4) * 8), rem = i % ((C / 4) * 8), sb = rem / 8;
            for (int e = 0; e < 2; e++) {
                row = tile * 16 + 2 * (rem % 8) + e;
                if (row < rows) {
                    const uint8_t *b = w + row * dq_row_bytes(T, k) + sb * sizeof(block_q6_K) + 208;
                    v |= (uint32_t)(b[0] | b[1] << 8) << (16 * e);
                }
            }
            ((uint32_t *)out)[R16 * C * 208 + i] = v;
        }
    } else if constexpr (T == QUANT_Q4_K) {
        /* [16 rows][16 bytes] per super-block: i = sb * 64 + row_in_tile * 4 + word */
        int64_t tile = i / (C * 16), rem = i % (C * 16), sb = rem / 64;
        row = tile * 16 + (rem % 64) / 4;
        if (row < rows) {
            const uint8_t *p = w + row * dq_row_bytes(T, k) + sb * sizeof(block_q4_K) + 4 * (rem % 4);
            v = p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
        }
        ((uint32_t *)out)[R16 * C * wpc + i] = v;
    } else {
        /* Q4_0 / Q8_0: [8 g][2 words]: word (g, upper) = d of (row g + 8 upper, blocks 2c, 2c + 1) */
        int64_t tile = i / (C * 16), rem = i % (C * 16), c = rem / 16;
        int g = (int)(rem % 16) / 2, upper = (int)(rem % 2);
        row = tile * 16 + g + 8 * upper;
        v = mv2_d<T>(w, rows, k, row, 2 * c) | mv2_d<T>(w, rows, k, row, 2 * c + 1) << 16;
        ((uint32_t *)out)[R16 * C * wpc + i] = v;
    }
}

/* One thread per 32-bit word. */
template <int T>
__global__ void matvec_v2_repack(uint8_t *out, const uint8_t *w, int rows, int k) {
    mv2_repack_word<T>(out, w, rows, k, blockIdx.x * (int64_t)blockDim.x + threadIdx.x);
}

/* ---------------------------------------------------------------- v10: int8 X, dp4a ------- */
/* v10 (Q4_0, Q4_K, Q8_0, Q6_K; n = 1, and in production also n = 2 to 4, Q6_K 2) reads the v2 repacked layout with integer arithmetic: every
 * block quantises all of X to int8 while staging it (per 32 values d = max|x| / 127, q = round(x /
 * d), as GGUF's Q8_1), and a lane's record of a chunk (rows g and g + 8, 4 k16 steps) is
 * multiplied with no conversion of the codes to f16:
 *   - Q4: in word s, row g's codes are the low nibbles (w & 0x0F0F0F0F) and row g + 8's the high
 *     ones (w & 0xF0F0F0F0 = 16 q, taken in place as unsigned bytes: dp4a.u32.s32), in the byte
 *     order (2t, 2t + 8, 2t + 1, 2t + 9) of the step's columns; X is staged in that order, so
 *     one X word serves both rows and one 16-byte record of X serves the whole chunk;
 *   - two dp4a per (row, 32-weight block) give an exact int32 dot product of the lane's 8
 *     weights with X (Q4_0's offset 8 enters as the dp4a accumulator's start, -8 * sum of the 8
 *     X codes, staged per lane and block), then one I2F and the float scales;
 *   - Q8_0: a step's two words hold two codes of each row each: one PRMT per row and step puts a
 *     row's four in X's byte order; the codes' +128 enters as the accumulator's start, -128 S;
 *   - Q6_K: the low nibbles as Q4; the 2 high bits of each code come from the high stream next
 *     to their nibble with one mask and one multiply or shift-add per row and step (the bits of
 *     a row sit 4 or 8 places from their targets, and the junk the sum leaves falls on the low
 *     nibbles, which one LOP3 takes from the low word instead), so one dp4a per (row, step)
 *     gives the 6-bit codes' dot with the accumulator starting at -32 S of the step; the step's
 *     int8 scale multiplies it in integers (one IMAD), X's d per 32 and the super-block's d in
 *     f32.
 * The grid is v6's (persistent: one block per SM, X staged once per SM, warps splitting the
 * block's (tile, group) units, 2 groups of loads in flight per warp, partial sums per tile in
 * shared memory, added in warp order); mv10_opt lists the lab's other shapes of it. NT tokens
 * (a template constant) stage NT records of X and share each group's decoded codes: per token
 * only the dp4a and the float scaling repeat. Error of a
 * row: the int8 rounding of X, at most d / 2 per value, so |y - y_exact| <= sum_i |w_i| d_i / 2
 * <= sum |w_i| max|x of i's block| / 254 (tests/gpu/mvq.h). */

/* Compile-time options of v10, O = 0 the production one; the lab times each (v10, v10a, ...):
 *   NB   groups of loads in flight per warp (2 KB of quants each),
 *   W    warps per block, BPS blocks per SM (the persistent grid has BPS blocks per SM, and
 *        __launch_bounds__ caps registers at 64K / (32 W BPS): 128 for 16 warps, 80 for 24),
 *   EARLY  pdl_trigger right after pdl_wait (as v6) instead of after the main loop,
 *   RING   the weights through a per-warp shared-memory ring (v11, option MV11_OPT; NB unused).
 * a: 3 groups in flight; b: 2 blocks of 8 warps; c: 3 blocks of 8 warps (<= 80 registers);
 * d: the early trigger; e: a and b together. */
#define MV11_OPT 6
template <int O> struct mv10_opt {
    static constexpr int NB = O == 1 || O == 5 ? 3 : 2;
    static constexpr int W = O == 2 || O == 3 || O == 5 ? 8 : 16;
    static constexpr int BPS = O == 2 || O == 5 ? 2 : O == 3 ? 3 : 1;
    static constexpr bool EARLY = O == 4;
    static constexpr bool RING = O == MV11_OPT;
};
#define MV10_OPTS 7

/* Whether option O builds without spills for type T (ptxas -v): Q6_K's groups take 33 registers
 * each, too many for 3 in flight within 128 or 2 within 80; Q4_K spills at 80. The launcher
 * declines the others (the lab then skips them). */
template <int T, int O> __host__ __device__ constexpr bool mv10_fits() {
    return T == QUANT_Q6_K ? mv10_opt<O>::NB == 2 && mv10_opt<O>::W * mv10_opt<O>::BPS <= 16
                           : T != QUANT_Q4_K || mv10_opt<O>::W * mv10_opt<O>::BPS <= 16;
}

/* X record words per (chunk, t): the 4 X words of the chunk's steps, then Q4_0 and Q8_0: -8 S and
 * -128 S of blocks 2c, 2c + 1 (S: sum of the lane's 8 X codes of the block); Q6_K: -32 S of
 * each step (the lane's 4 codes of the step); Q4_K: nothing. */
template <int T> __host__ __device__ constexpr int mv10_rec() { return T == QUANT_Q4_K ? 4 : 8; }
/* Chunks per group (one unit of a warp's work, 2 KB of quants). */
template <int T> __host__ __device__ constexpr int mv10_gc() { return T == QUANT_Q8_0 ? 2 : 4; }

/* Shared memory, for nt tokens: X records [nt][C][4 t][rec words], d of X per 32 [nt][2C], (Q4_K)
 * sums of X per 32 [nt][2C], partial sums [tiles][warps][nt][16 rows]. */
template <int T>
__host__ __device__ __forceinline__ size_t mv10_smem(int64_t k, int64_t tiles, int warps, int nt) {
    const int64_t C = mv2_chunks(k);
    return (size_t)nt * (size_t)(C * 16 * mv10_rec<T>() + C * 8 * (T == QUANT_Q4_K ? 2 : 1) + tiles * warps * 16 * 4);
}

__device__ __forceinline__ int mv10_dp4a_us(uint32_t a, uint32_t b, int c) { /* unsigned a, signed b bytes */
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* Byte i of w sign-extended, one PRMT (a selector nibble 8 | i replicates byte i's sign). */
__device__ __forceinline__ int mv10_sbyte(uint32_t w, int i) {
    const uint32_t e = 8u | (uint32_t)i, sel = (uint32_t)i | e << 4 | e << 8 | e << 12;
    uint32_t r;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "r"(sel));
    return (int)r;
}

/* v11's ring slots a warp fills before its PDL wait (PERF-LOG runs 63-66). The trace found X
 * staged only once a block's whole first fill had landed: the staging loads queue behind the
 * copies issued before them (run 62: a bulk copy of X does not overtake them either), so with
 * the whole fill out before the wait no unit was computed while it streamed, and when it had
 * landed nothing was in flight. Filling PRE slots before the wait and the rest right behind X's
 * loads lets X arrive after PRE slots only: one slot where the warp's whole share fits the ring
 * (its units then land soon after X, while the first is computed), else two. Not for the wo
 * matvec, whose blocks start while decode attention runs, long enough for a whole fill to land
 * before the wait: the engine launches it as cu_matvec_f32_acc_prefilled (pre 0, all slots before). */
__host__ __device__ constexpr int mv11_pre(int units, int stages) {
    return units <= stages ? 1 : stages < 2 ? stages : 2;
}

/* Stages token tok of X (C chunks, zeros past k) as int8 records, xd (d per 32) and for Q4_K xs (sum of
 * the rounded X per 32, d * sum q: the min term then sees the X the products see, so the error of
 * a row is sum_i w_i (rounded x_i - x_i) with w_i's zero-mean weights, as mvq.h budgets). Each thread takes 4 consecutive values; the 8 threads of a 32-value block share max|x|
 * (and the sum) by shuffles. The offset words (-8 S ...) follow once the codes are in place.
 * A NORM source stages x * g and leaves each warp's sum of x^2 in ssw[warp]. hook runs once in
 * every thread right after the last round of X loads is issued, before any is used (v11 issues
 * the rest of its first ring fill there, behind X: mv11_pre). */
template <int T, bool XH, int U, typename XS, typename HK>
__device__ __forceinline__ void mv10_stage(uint32_t *xr, float *xd, float *xs, float *ssw, const XS &xv, int tok,
                                           int k, int C, HK hook) {
    static_assert(!(XH && mv_fused<XS>()), "v10: the fused sources are f32");
    constexpr int RW = mv10_rec<T>();
    uint8_t *xb = (uint8_t *)xr;
    float ss = 0.0f; /* NORM: this thread's sum of x^2 */
    const int total = C * 16; /* float4s; a multiple of 8, and blockDim.x is too: whole blocks per warp */
    for (int base = 0; base < total; base += U * blockDim.x) {
        float4 raw[U];
#pragma unroll
        for (int u = 0; u < U; u++) { /* U loads in flight before the first is used */
            const int f = base + u * blockDim.x + threadIdx.x, kk = 4 * f;
            raw[u] = make_float4(0, 0, 0, 0);
            if (f < total && kk < k) {
                if constexpr (XH) {
                    uint2 r = *(const uint2 *)((const unsigned short *)xv.p + (int64_t)tok * k + kk);
                    float2 a = __half22float2(*(__half2 *)&r.x), b = __half22float2(*(__half2 *)&r.y);
                    raw[u] = make_float4(a.x, a.y, b.x, b.y);
                } else {
                    raw[u] = mv_x_stage(xv, tok, kk, k, ss);
                }
            }
        }
        if (base + U * (int)blockDim.x >= total) hook(); /* X's last loads are out */
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (base + u * blockDim.x >= total) break; /* uniform over the block */
            const int f = base + u * blockDim.x + threadIdx.x;
            const float4 v = raw[u];
            float m = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
            const float inv = m > 0.0f ? 127.0f / m : 0.0f;
            const int q0 = __float2int_rn(v.x * inv), q1 = __float2int_rn(v.y * inv);
            const int q2 = __float2int_rn(v.z * inv), q3 = __float2int_rn(v.w * inv);
            int sum = 0;
            if constexpr (T == QUANT_Q4_K) {
                sum = (q0 + q1) + (q2 + q3);
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                sum += __shfl_xor_sync(0xffffffffu, sum, 4);
            }
            if (f >= total) continue;
            const int kk = 4 * f, c = kk >> 6, s = (kk >> 4) & 3, e4 = kk & 15, t = (e4 & 7) >> 1, h = (e4 >> 3) & 1;
            /* columns e4, e4 + 1 are lane t's bytes h, h + 2 of word s; e4 + 2, e4 + 3 lane t + 1's */
            uint8_t *p0 = xb + ((c * 4 + t) * RW + s) * 4 + h, *p1 = p0 + RW * 4;
            p0[0] = (uint8_t)q0;
            p0[2] = (uint8_t)q1;
            p1[0] = (uint8_t)q2;
            p1[2] = (uint8_t)q3;
            if ((f & 7) == 0) {
                const float d = m * (1.0f / 127.0f);
                xd[f >> 3] = d;
                if constexpr (T == QUANT_Q4_K) xs[f >> 3] = d * (float)sum;
            }
        }
    }
    if constexpr (XS::NORM) { /* every thread is here: the loops above are uniform over the block */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if ((threadIdx.x & 31) == 0) ssw[threadIdx.x >> 5] = ss;
    }
    if constexpr (T == QUANT_Q6_K) {
        __syncthreads();
        for (int i = threadIdx.x; i < C * 16; i += blockDim.x) { /* (chunk, t, step) */
            uint32_t *r = xr + (i >> 2) * RW;
            const int s = i & 3;
            r[4 + s] = (uint32_t)(-32 * __dp4a((int)r[s], 0x01010101, 0));
        }
    } else if constexpr (T != QUANT_Q4_K) {
        __syncthreads();
        for (int i = threadIdx.x; i < C * 8; i += blockDim.x) { /* (chunk, t, block) */
            uint32_t *r = xr + (i >> 1) * RW;
            const int blk = i & 1;
            const int S = __dp4a((int)r[2 * blk], 0x01010101, __dp4a((int)r[2 * blk + 1], 0x01010101, 0));
            r[4 + blk] = (uint32_t)(-8 * S);
            r[6 + blk] = (uint32_t)(-128 * S);
        }
    }
}

/* A lane's addresses at its warp's first unit (tile, group). In the v2 layout a block's units lie
 * at equal strides in order in every stream (quants 2048 bytes a unit for every type), so unit j
 * after the first is one multiply-add away: q quants (+ the lane's 16 or 32 bytes), s scales
 * (+ row g's), h Q6_K's high bits (+ the lane's 8 bytes), d Q6_K's d (+ row g's). The same
 * with A = uint32_t: shared-memory addresses in a v11 ring slot (mv11_slot). */
template <typename A> struct mv10_at { A q, s, h, d; };
using mv10_src = mv10_at<const uint8_t *>;

template <int T>
__device__ __forceinline__ mv10_src mv10_source(const uint8_t *w, int64_t R16, int64_t C, int64_t unit, int lane, int g) {
    mv10_src p;
    p.q = w + unit * 2048 + (T == QUANT_Q8_0 ? 32 : 16) * lane;
    p.h = p.d = nullptr;
    if constexpr (T == QUANT_Q8_0) {
        p.s = w + R16 * C * 1024 + unit * 128 + 8 * g;
    } else if constexpr (T == QUANT_Q6_K) {
        p.h = w + R16 * C * 512 + unit * 1024 + 8 * lane;
        p.s = w + R16 * C * 768 + unit * 256 + 4 * g;
        p.d = w + R16 * C * 832 + unit * 32 + 2 * g;
    } else {
        p.s = w + R16 * C * 512 + unit * 256 + (T == QUANT_Q4_0 ? 8 : 16) * g;
    }
    return p;
}

/* A group's loads: from global memory (v10: quants streamed past L1, the rest through the
 * read-only path) or, at a 32-bit shared address, from the warp's ring slot (v11). The shared
 * loads are volatile asm with a memory clobber, so they stay between the ring's wait and
 * __syncwarp (mv11) in program order. */
__device__ __forceinline__ uint4 mv10_ldq(const uint8_t *p) { return mv_ld_stream((const uint4 *)p); }
__device__ __forceinline__ uint4 mv10_ldq(uint32_t a) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a) : "memory");
    return v;
}
template <typename V> __device__ __forceinline__ V mv10_ld(const uint8_t *p) { return __ldg((const V *)p); }
template <typename V> __device__ __forceinline__ V mv10_ld(uint32_t a);
template <> __device__ __forceinline__ uint4 mv10_ld<uint4>(uint32_t a) { return mv10_ldq(a); }
template <> __device__ __forceinline__ uint2 mv10_ld<uint2>(uint32_t a) {
    uint2 v;
    asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a) : "memory");
    return v;
}
template <> __device__ __forceinline__ uint32_t mv10_ld<uint32_t>(uint32_t a) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
    return v;
}
template <> __device__ __forceinline__ uint16_t mv10_ld<uint16_t>(uint32_t a) {
    unsigned short v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a) : "memory");
    return v;
}

/* One warp's group in registers: load(p, j) fetches unit j after p's (from a v11 ring slot: p
 * its mv11_slot addresses and j 0); compute multiplies it with X into acc[0] (row g) and acc[1]
 * (row g + 8; Q4_0: 16 times too large, the flush scales it). xr: lane t's X record of the
 * group's first chunk; xd: d of X of its first block; xs (Q4_K): sums of the rounded X of the
 * super-block's sub-blocks. */
template <int T> struct mv10_group;

template <> struct mv10_group<QUANT_Q4_0> {
    uint4 q[4];
    uint2 sc[4]; /* d of (g, 2c), (g, 2c + 1) | (g + 8, 2c), (g + 8, 2c + 1) per chunk */
    template <typename A>
    __device__ __forceinline__ void load(const mv10_at<A> &p, int j) {
        const A qp = p.q + 2048 * j, sp = p.s + 256 * j;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = mv10_ldq(qp + 512 * i);
#pragma unroll
        for (int i = 0; i < 4; i++) sc[i] = mv10_ld<uint2>(sp + 64 * i);
    }
    template <int NT>
    __device__ __forceinline__ void compute(float (&acc)[NT][2], const uint32_t *xr, const float *xd, const float *, int,
                                            int xst, int dst) const {
        constexpr uint32_t LO = 0x0F0F0F0Fu, HI = 0xF0F0F0F0u;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 w = q[i];
            const uint32_t l0 = w.x & LO, l1 = w.y & LO, l2 = w.z & LO, l3 = w.w & LO;
            const uint32_t u0 = w.x & HI, u1 = w.y & HI, u2 = w.z & HI, u3 = w.w & HI;
#pragma unroll
            for (int c = 0; c < NT; c++) {
                const uint4 x = *(const uint4 *)(xr + c * xst + 32 * i);
                const uint4 o = *(const uint4 *)(xr + c * xst + 32 * i + 4);
                const float2 dx = *(const float2 *)(xd + c * dst + 2 * i);
                const int g0 = __dp4a((int)l1, (int)x.y, __dp4a((int)l0, (int)x.x, (int)o.x));
                const int g1 = __dp4a((int)l3, (int)x.w, __dp4a((int)l2, (int)x.z, (int)o.y));
                const int h0 = mv10_dp4a_us(u1, x.y, mv10_dp4a_us(u0, x.x, (int)o.z));
                const int h1 = mv10_dp4a_us(u3, x.w, mv10_dp4a_us(u2, x.z, (int)o.w));
                acc[c][0] = fmaf(mv_half_lo(sc[i].x) * dx.x, (float)g0, acc[c][0]);
                acc[c][0] = fmaf(mv_half_hi(sc[i].x) * dx.y, (float)g1, acc[c][0]);
                acc[c][1] = fmaf(mv_half_lo(sc[i].y) * dx.x, (float)h0, acc[c][1]);
                acc[c][1] = fmaf(mv_half_hi(sc[i].y) * dx.y, (float)h1, acc[c][1]);
            }
        }
    }
};

template <> struct mv10_group<QUANT_Q4_K> {
    uint4 q[4];
    uint4 r0, r1; /* the super-block's d, dmin, scales[12] of rows g and g + 8 */
    template <typename A>
    __device__ __forceinline__ void load(const mv10_at<A> &p, int j) {
        const A qp = p.q + 2048 * j, sp = p.s + 256 * j;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = mv10_ldq(qp + 512 * i);
        r0 = mv10_ld<uint4>(sp);
        r1 = mv10_ld<uint4>(sp + 128);
    }
    template <int NT>
    __device__ __forceinline__ void compute(float (&acc)[NT][2], const uint32_t *xr, const float *xd, const float *xs,
                                            int t, int xst, int dst) const {
        constexpr uint32_t LO = 0x0F0F0F0Fu, HI = 0xF0F0F0F0u;
        /* 6-bit scales and mins of sub-blocks 0-3 (a) and 4-7 (b), one byte each (as mv2_group) */
        const uint32_t sc0a = r0.y & 0x3f3f3f3fu, m0a = r0.z & 0x3f3f3f3fu;
        const uint32_t sc0b = (r0.w & 0x0f0f0f0fu) | ((r0.y >> 2) & 0x30303030u);
        const uint32_t m0b = ((r0.w >> 4) & 0x0f0f0f0fu) | ((r0.z >> 2) & 0x30303030u);
        const uint32_t sc1a = r1.y & 0x3f3f3f3fu, m1a = r1.z & 0x3f3f3f3fu;
        const uint32_t sc1b = (r1.w & 0x0f0f0f0fu) | ((r1.y >> 2) & 0x30303030u);
        const uint32_t m1b = ((r1.w >> 4) & 0x0f0f0f0fu) | ((r1.z >> 2) & 0x30303030u);
        /* the min term first (fewer registers live), sum_j m_j * (sum of X of sub-block j),
         * rounded X's sums: lane t takes sub-blocks t and t + 4 (the 4 lanes of a row add up in
         * the flush) */
        const float ms0a = (float)__byte_perm(m0a, 0, 0x4440 | t), ms0b = (float)__byte_perm(m0b, 0, 0x4440 | t);
        const float ms1a = (float)__byte_perm(m1a, 0, 0x4440 | t), ms1b = (float)__byte_perm(m1b, 0, 0x4440 | t);
        float ga[NT][2];
#pragma unroll
        for (int c = 0; c < NT; c++) {
            const float x0 = xs[c * dst + t], x1 = xs[c * dst + t + 4];
            acc[c][0] = fmaf(-mv_half_hi(r0.x), fmaf(ms0a, x0, ms0b * x1), acc[c][0]);
            acc[c][1] = fmaf(-mv_half_hi(r1.x), fmaf(ms1a, x0, ms1b * x1), acc[c][1]);
            ga[c][0] = ga[c][1] = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 w = q[i];
            const uint32_t l0 = w.x & LO, l1 = w.y & LO, l2 = w.z & LO, l3 = w.w & LO;
            const uint32_t u0 = w.x & HI, u1 = w.y & HI, u2 = w.z & HI, u3 = w.w & HI;
            /* sub-blocks 2i, 2i + 1 of the super-block: integer scale times the integer dot */
            const int j0 = 2 * i, j1 = 2 * i + 1;
            const uint32_t sa = j0 < 4 ? sc0a : sc0b, sb = j0 < 4 ? sc1a : sc1b;
            const int s00 = (int)((sa >> (8 * (j0 & 3))) & 255), s01 = (int)((sa >> (8 * (j1 & 3))) & 255);
            const int s10 = (int)((sb >> (8 * (j0 & 3))) & 255), s11 = (int)((sb >> (8 * (j1 & 3))) & 255);
#pragma unroll
            for (int c = 0; c < NT; c++) {
                const uint4 x = *(const uint4 *)(xr + c * xst + 16 * i);
                const float2 dx = *(const float2 *)(xd + c * dst + 2 * i);
                const int g0 = __dp4a((int)l1, (int)x.y, __dp4a((int)l0, (int)x.x, 0));
                const int g1 = __dp4a((int)l3, (int)x.w, __dp4a((int)l2, (int)x.z, 0));
                const int h0 = mv10_dp4a_us(u1, x.y, mv10_dp4a_us(u0, x.x, 0));
                const int h1 = mv10_dp4a_us(u3, x.w, mv10_dp4a_us(u2, x.z, 0));
                ga[c][0] = fmaf(dx.x, (float)(g0 * s00), ga[c][0]);
                ga[c][0] = fmaf(dx.y, (float)(g1 * s01), ga[c][0]);
                ga[c][1] = fmaf(dx.x, (float)(h0 * s10), ga[c][1]);
                ga[c][1] = fmaf(dx.y, (float)(h1 * s11), ga[c][1]);
            }
        }
#pragma unroll
        for (int c = 0; c < NT; c++) {
            acc[c][0] = fmaf(mv_half_lo(r0.x), ga[c][0], acc[c][0]);
            acc[c][1] = fmaf(mv_half_lo(r1.x) * 0.0625f, ga[c][1], acc[c][1]);
        }
    }
};

/* Q8_0: 2 chunks of 32 bytes per lane; word 2s + h of a chunk holds step s's codes (row g: bytes 0,
 * 1; row g + 8: 2, 3) of columns 2t, 2t + 1 (h 0) or 2t + 8, 2t + 9 (h 1). */
template <> struct mv10_group<QUANT_Q8_0> {
    uint4 q[4];
    uint2 sc[2]; /* as Q4_0's */
    template <typename A>
    __device__ __forceinline__ void load(const mv10_at<A> &p, int j) {
        const A qp = p.q + 2048 * j, sp = p.s + 128 * j;
        /* a lane's 32 bytes of a chunk: in global memory side by side; in a ring slot 512 bytes
         * apart (mv11_issue places them so, for loads free of bank conflicts) */
        constexpr int half = std::is_same<A, uint32_t>::value ? 512 : 16;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = mv10_ldq(qp + 1024 * (i >> 1) + half * (i & 1));
#pragma unroll
        for (int i = 0; i < 2; i++) sc[i] = mv10_ld<uint2>(sp + 64 * i);
    }
    template <int NT>
    __device__ __forceinline__ void compute(float (&acc)[NT][2], const uint32_t *xr, const float *xd, const float *, int,
                                            int xst, int dst) const {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const uint4 a = q[2 * i], b = q[2 * i + 1];
            /* row g: (w0.0, w1.0, w0.1, w1.1) = columns 2t, 2t + 8, 2t + 1, 2t + 9; row g + 8 bytes 2, 3 */
            const uint32_t r0 = __byte_perm(a.x, a.y, 0x5140), r1 = __byte_perm(a.z, a.w, 0x5140);
            const uint32_t r2 = __byte_perm(b.x, b.y, 0x5140), r3 = __byte_perm(b.z, b.w, 0x5140);
            const uint32_t e0 = __byte_perm(a.x, a.y, 0x7362), e1 = __byte_perm(a.z, a.w, 0x7362);
            const uint32_t e2 = __byte_perm(b.x, b.y, 0x7362), e3 = __byte_perm(b.z, b.w, 0x7362);
#pragma unroll
            for (int c = 0; c < NT; c++) {
                const uint4 x = *(const uint4 *)(xr + c * xst + 32 * i);
                const uint4 o = *(const uint4 *)(xr + c * xst + 32 * i + 4);
                const float2 dx = *(const float2 *)(xd + c * dst + 2 * i);
                const int g0 = mv10_dp4a_us(r1, x.y, mv10_dp4a_us(r0, x.x, (int)o.z));
                const int g1 = mv10_dp4a_us(r3, x.w, mv10_dp4a_us(r2, x.z, (int)o.w));
                const int h0 = mv10_dp4a_us(e1, x.y, mv10_dp4a_us(e0, x.x, (int)o.z));
                const int h1 = mv10_dp4a_us(e3, x.w, mv10_dp4a_us(e2, x.z, (int)o.w));
                acc[c][0] = fmaf(mv_half_lo(sc[i].x) * dx.x, (float)g0, acc[c][0]);
                acc[c][0] = fmaf(mv_half_hi(sc[i].x) * dx.y, (float)g1, acc[c][0]);
                acc[c][1] = fmaf(mv_half_lo(sc[i].y) * dx.x, (float)h0, acc[c][1]);
                acc[c][1] = fmaf(mv_half_hi(sc[i].y) * dx.y, (float)h1, acc[c][1]);
            }
        }
    }
};

/* Q6_K: one super-block; the high word of steps 2h, 2h + 1 holds, for step 2h + s1, row g's 2
 * high bits of byte b (column order as the low word) at 16 (b >> 1) + 8 s1 + 4 (b & 1), row
 * g + 8's 2 places up. */
template <> struct mv10_group<QUANT_Q6_K> {
    uint4 lo[4];
    uint2 hi[4];
    uint32_t sg[4], sg8[4], dd; /* int8 scales of the 4 steps of rows g, g + 8 per chunk; d of both rows (f16) */
    template <typename A>
    __device__ __forceinline__ void load(const mv10_at<A> &p, int j) {
        const A qp = p.q + 2048 * j, hp = p.h + 1024 * j, sp = p.s + 256 * j, dp = p.d + 32 * j;
#pragma unroll
        for (int i = 0; i < 4; i++) lo[i] = mv10_ldq(qp + 512 * i);
#pragma unroll
        for (int i = 0; i < 4; i++) hi[i] = mv10_ld<uint2>(hp + 256 * i);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            sg[i] = mv10_ld<uint32_t>(sp + 64 * i);
            sg8[i] = mv10_ld<uint32_t>(sp + 64 * i + 32);
        }
        dd = (uint32_t)mv10_ld<uint16_t>(dp) | (uint32_t)mv10_ld<uint16_t>(dp + 16) << 16;
    }
    template <int NT>
    __device__ __forceinline__ void compute(float (&acc)[NT][2], const uint32_t *xr, const float *xd, const float *, int,
                                            int xst, int dst) const {
        constexpr uint32_t LO = 0x0F0F0F0Fu;
        float ga[NT][2];
        int ig[NT][2];
#pragma unroll
        for (int c = 0; c < NT; c++) ga[c][0] = ga[c][1] = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t lw[4] = {lo[i].x, lo[i].y, lo[i].z, lo[i].w};
            uint4 xq[NT], oq[NT];
#pragma unroll
            for (int c = 0; c < NT; c++) {
                ig[c][0] = ig[c][1] = 0;
                xq[c] = *(const uint4 *)(xr + c * xst + 32 * i);
                oq[c] = *(const uint4 *)(xr + c * xst + 32 * i + 4);
            }
#pragma unroll
            for (int s = 0; s < 4; s++) {
                const uint32_t h = s < 2 ? hi[i].x : hi[i].y;
                /* the high bits to bits 4, 5 of every byte (targets 8 b + 4); sums of two copies,
                 * whose overlaps carry into bits 8-10 and 24-26, low-nibble places */
                uint32_t pg, p8;
                if (s & 1) {
                    const uint32_t tg = h & 0x33003300u; /* bits 8, 12, 24, 28: shifts 4, 0 */
                    pg = tg + (tg >> 4);
                    p8 = __umulhi(h & 0xCC00CC00u, 0x44000000u); /* bits 10, 14, 26, 30: (t >> 6) + (t >> 2) */
                } else {
                    pg = (h & 0x00330033u) * 0x110u; /* bits 0, 4, 16, 20: (t << 4) + (t << 8) */
                    p8 = (h & 0x00CC00CCu) * 0x44u;  /* bits 2, 6, 18, 22: (t << 2) + (t << 6) */
                }
                const uint32_t cg = (lw[s] & LO) | (pg & ~LO), c8 = ((lw[s] >> 4) & LO) | (p8 & ~LO);
                const int sc0 = mv10_sbyte(sg[i], s), sc1 = mv10_sbyte(sg8[i], s);
#pragma unroll
                for (int c = 0; c < NT; c++) {
                    const uint32_t x = s == 0 ? xq[c].x : s == 1 ? xq[c].y : s == 2 ? xq[c].z : xq[c].w;
                    const int o = (int)(s == 0 ? oq[c].x : s == 1 ? oq[c].y : s == 2 ? oq[c].z : oq[c].w);
                    ig[c][0] += sc0 * __dp4a((int)cg, (int)x, o);
                    ig[c][1] += sc1 * __dp4a((int)c8, (int)x, o);
                    if (s & 1) { /* a 32-value block of X done */
                        const float d = xd[c * dst + 2 * i + (s >> 1)];
                        ga[c][0] = fmaf(d, (float)ig[c][0], ga[c][0]);
                        ga[c][1] = fmaf(d, (float)ig[c][1], ga[c][1]);
                        ig[c][0] = ig[c][1] = 0;
                    }
                }
            }
        }
#pragma unroll
        for (int c = 0; c < NT; c++) {
            acc[c][0] = fmaf(mv_half_lo(dd), ga[c][0], acc[c][0]);
            acc[c][1] = fmaf(mv_half_hi(dd), ga[c][1], acc[c][1]);
        }
    }
};

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
    return T == QUANT_Q6_K ? 3360 : T == QUANT_Q8_0 ? 2176 : 2304;
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
        p.s = slot + 2048 + (T == QUANT_Q4_K ? 16 : 8) * g;
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
    }
}

/* v10's block bid of a grid of nblk blocks (matvec_v10: the launch's own; matvec_v10_dual: one of
 * its two parts). */
template <int T, bool XH, typename XS, int O, int NT>
__device__ __forceinline__ void mv10_block(float *y, const uint8_t *w, XS xv, int rows, int k, int stages, int early,
                                           int pre, int late, int bid, int nblk) {
    static_assert(T == QUANT_Q4_0 || T == QUANT_Q4_K || T == QUANT_Q8_0 || T == QUANT_Q6_K, "v10: Q4_0 Q4_K Q8_0 Q6_K");
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
    float *red = xs + (T == QUANT_Q4_K ? NT * dst : 0);
    /* NORM sources: per-warp sums of x^2 [NT][W], then 1 / rms per token [NT] (mv10_shape counts
     * them) */
    float *ssw = red + nt * W * NT * 16, *rinv = ssw + NT * W;

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
    /* early (matvec_pdl_early): the next kernel's blocks may take each SM as this one's block
     * leaves it, not only once every block is through its loop */
    if (P::EARLY || early || late) pdl_trigger();
    for (int i = threadIdx.x; i < nt * W * NT * 16; i += blockDim.x) red[i] = 0.0f;
#pragma unroll 1
    for (int c = 0; c < NT; c++) /* the fill's rest behind token 0's X loads, so they are not queued behind it */
        mv10_stage<T, XH, (P::W * P::BPS > 16 || NT > 2 ? 2 : 4)>(xr + c * xst, xd + c * dst, xs + c * dst, ssw + c * W,
                                                                  xv, c, k, (int)C, [&]() {
                                                                      if (c == 0) fill(PRE, S);
                                                                  });
    __syncthreads();
    kt_mark(tr, 3);

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
    if constexpr (XS::GLU) { /* silu(gate) * up of each pair of rows, the sums in warp order */
        const int np = nt / 2;
        const int64_t F = rows / 2;
        for (int i = threadIdx.x; i < np * NT * 16; i += blockDim.x) {
            const int pl = i / (NT * 16), c = (i >> 4) % NT, r = i & 15;
            float gs = 0.0f, us = 0.0f;
#pragma unroll 4
            for (int wp = 0; wp < W; wp++) {
                gs += red[((2 * pl * W + wp) * NT + c) * 16 + r];
                us += red[(((2 * pl + 1) * W + wp) * NT + c) * 16 + r];
            }
            const int64_t j = (t0 / 2 + pl) * 16 + r;
            if (j < F) y[(int64_t)c * F + j] = mv_silu_mul(gs * rinv[c], us * rinv[c]);
        }
        if (late) pdl_wait(); /* pdl.cuh's rule 2: this grid's end implies the one before it ended */
        kt_mark(tr, 5);
        return;
    }
    /* the rows' sums in warp order; every lane runs every round (the bound is the block's), so a
     * ROPE source's shuffle has all lanes */
    for (int i0 = 0; i0 < nt * NT * 16; i0 += blockDim.x) {
        const int i = i0 + threadIdx.x, tl = i / (NT * 16), c = (i >> 4) % NT, r = i & 15;
        const int64_t row = (t0 + tl) * 16 + r;
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
            float *yp = y + (int64_t)c * rows + row; /* one thread of one block owns it */
            if constexpr (XS::ACC) s += *yp; /* as kernels.h's cu_add: y + (W . X) */
            *yp = s;
        }
    }
    if (late) pdl_wait(); /* pdl.cuh's rule 2: this grid's end implies the one before it ended */
    kt_mark(tr, 5);
}

template <int T, bool XH, typename XS = mv_x, int O = 0, int NT = 1>
__global__ void __launch_bounds__(mv10_opt<O>::W * 32, mv10_opt<O>::BPS)
matvec_v10(float *y, const uint8_t *w, XS xv, int rows, int k, int stages, int early, int pre, int late) {
    mv10_block<T, XH, XS, O, NT>(y, w, xv, rows, k, stages, early, pre, late, (int)blockIdx.x, (int)gridDim.x);
}

/* Two matvecs of one X in one launch, each with its own type, source and ring depth: blocks
 * [0, g1) are the first's grid, the rest the second's (a layer's Q/K in one type and V in another:
 * both start at once, where a second launch would start a launch latency later and queue behind
 * the first's blocks). No Y: sources that write their own outputs (ROPE). */
template <int T1, int T2, typename XS, int O, int NT>
__global__ void __launch_bounds__(mv10_opt<O>::W * 32, mv10_opt<O>::BPS)
matvec_v10_dual(const uint8_t *w1, XS x1, int rows1, int stages1, int g1, const uint8_t *w2, XS x2, int rows2,
                int stages2, int k, int early, int pre) {
    static_assert(XS::ROPE, "matvec_v10_dual: sources that store their own outputs");
    if ((int)blockIdx.x < g1)
        mv10_block<T1, false, XS, O, NT>(nullptr, w1, x1, rows1, k, stages1, early, pre, 0, (int)blockIdx.x, g1);
    else
        mv10_block<T2, false, XS, O, NT>(nullptr, w2, x2, rows2, k, stages2, early, pre, 0, (int)blockIdx.x - g1,
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
static inline size_t mv10_shape(int64_t rows, int64_t k, int nt, bool norm, int sms, int smem_max, int cap,
                                int64_t *grid, int *stages, bool balance = false, bool pairs = false) {
    using P = mv10_opt<O>;
    /* what blocks share out: tiles, or with pairs (GLU) pairs of tiles */
    const int per = pairs ? 2 : 1;
    const int64_t R = (rows + 15) / 16 / per;
    int64_t g = R < (int64_t)sms * P::BPS ? R : (int64_t)sms * P::BPS;
    if (per * ((R + g - 1) / g) > MV6_TILES) g = (R + MV6_TILES / per - 1) / (MV6_TILES / per);
    /* balance: the fewest blocks with the same most tiles per block, so that the blocks' shares
     * are as even as the tiles allow (8b gate/up: 128 blocks of 14 tiles, not 132 of 13 or 14) */
    if (balance) g = (R + (R + g - 1) / g - 1) / ((R + g - 1) / g);
    *grid = g;
    *stages = 0;
    const size_t base = mv10_smem<T>(k, per * ((R + g - 1) / g), P::W, nt) + (norm ? (size_t)nt * (P::W + 1) * sizeof(float) : 0);
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
        smem = mv10_shape<T, O>(rows, k, NT, XS::NORM, sms_cap, smem_max, cap, &grid, &stages, balance != 0, XS::GLU);
    if (smem > (size_t)smem_max)
        smem = mv10_shape<T, O>(rows, k, NT, XS::NORM, sms, smem_max, cap, &grid, &stages, balance != 0, XS::GLU);
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
static inline bool mv10_takes(int64_t rows, int64_t k, int n, bool norm, int *sms, int *smem_max,
                              int cap = MV11_STAGES, int *stages = nullptr) {
    if constexpr ((T != QUANT_Q4_0 && T != QUANT_Q4_K && T != QUANT_Q8_0 && T != QUANT_Q6_K) || !mv10_fits<T, O>()) {
        return false;
    } else {
        int64_t grid;
        int st = 0;
        const bool ok = n >= 1 && n <= (mv10_multi_token<O>() ? mv10_max_n<T>() : 1) && rows >= 1 && k >= 1 &&
                        k % (64 * mv10_gc<T>()) == 0 && mv6_device(sms, smem_max) &&
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
    if constexpr ((T != QUANT_Q4_0 && T != QUANT_Q4_K && T != QUANT_Q8_0 && T != QUANT_Q6_K) || !mv10_fits<T, O>()) {
        return false;
    } else {
        if (!mv10_takes<T, O>(rows, k, n, XS::NORM, &sms, &smem_max, cap)) return false;
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
static inline size_t mv10_dual_shape(int rows1, int rows2, int k, int nt, bool norm, int sms, int smem_max, int cap,
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
static inline int mv10_dual_split(int rows1, int rows2, int k, int nt, bool norm, int sms, int smem_max, int cap,
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
static inline bool mv10_dual_launch_nt(const void *w1, XS x1, int rows1, const void *w2, XS x2, int rows2, int k,
                                       cudaStream_t s, int pdl, cudaError_t *e, int cap, int early, int pre,
                                       int balance, int second_sms) {
    using P = mv10_opt<O>;
    int sms, smem_max, st1, st2;
    int64_t g1, g2;
    if (!mv10_takes<T1, O>(rows1, k, NT, XS::NORM, &sms, &smem_max, cap) ||
        !mv10_takes<T2, O>(rows2, k, NT, XS::NORM, &sms, &smem_max, cap))
        return false;
    if (second_sms <= 0 || second_sms >= sms)
        second_sms = mv10_dual_split<T1, T2, O>(rows1, rows2, k, NT, XS::NORM, sms, smem_max, cap, balance);
    if (second_sms <= 0) return false;
    const size_t smem = mv10_dual_shape<T1, T2, O>(rows1, rows2, k, NT, XS::NORM, sms, smem_max, cap, balance,
                                                   second_sms, &g1, &st1, &g2, &st2);
    if (smem == SIZE_MAX || (smem > 48 * 1024 && smem_optin<matvec_v10_dual<T1, T2, XS, O, NT>>() != cudaSuccess))
        return false;
    *e = pdl_launch_as(pdl, matvec_v10_dual<T1, T2, XS, O, NT>, dim3((unsigned)(g1 + g2)), dim3(P::W * 32), smem, s,
                       (const uint8_t *)w1, x1, rows1, st1, (int)g1, (const uint8_t *)w2, x2, rows2, st2, k, early, pre);
    return true;
}

template <int T1, int T2, typename XS, int O>
static inline bool mv10_dual_launch(const void *w1, XS x1, int rows1, const void *w2, XS x2, int rows2, int k, int n,
                                    cudaStream_t s, int pdl, cudaError_t *e, int cap, int early, int pre, int balance,
                                    int second_sms = 0) {
    static_assert(mv10_opt<O>::RING, "matvec_v10_dual: v11's options");
    if (n == 1)
        return mv10_dual_launch_nt<T1, T2, XS, O, 1>(w1, x1, rows1, w2, x2, rows2, k, s, pdl, e, cap, early, pre,
                                                     balance, second_sms);
    if (n == 2)
        return mv10_dual_launch_nt<T1, T2, XS, O, 2>(w1, x1, rows1, w2, x2, rows2, k, s, pdl, e, cap, early, pre,
                                                     balance, second_sms);
    return false; /* Q6_K (mv10_max_n) and the cases measured: one or two tokens */
}

#endif
