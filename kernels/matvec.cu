/* Launchers of the decode matvec (kernels.h): repacking at load, then per weight type and shape
 * v11 (int8 X and dp4a, the weights through a shared-memory ring; 1 to 4 tokens (Q6_K: 2) of
 * Q4_0, Q4_K, Q5_K, Q8_0, Q6_K), v10 where no ring fits, v3 (tensor cores) where neither applies,
 * v13 (int8 X and dp4a on GGUF rows through a ring: 1 to 4 tokens of Q4_1, Q5_0, Q5_1, Q2_K,
 * Q3_K), v1 for the rest (F32, F16, BF16, more tokens: GGUF rows, f32 X); all with programmatic
 * dependent launch, X plain or SwiGLU'd while staged; and the decode fusions (RMSNorm of X, Y +=,
 * RoPE and the K/V store), v10 / v11 only. The kernels are matvec.cuh's; the kernel lab times the
 * variants that lost (v12, Q5_K on its GGUF rows, among them). */
#include "kernels/kernels.h"
#include "kernels/matvec.cuh"

extern "C" cudaError_t matvec_trace_set(kt_rec *buf, unsigned cap, cudaStream_t s) { return kt_set(buf, cap, s); }

/* The production choices of v10 / v11 (matvec.cuh), each the winner of an A/B run the kernel lab
 * can still repeat by passing other values to matvec_v10_launch:
 *   MV11_STAGES (4) the ring's deepest (each case takes as many stages as fit beside X);
 *   early: the PDL trigger right after the wait, so that the next kernel's blocks may start on
 *     each SM as soon as this kernel's block there leaves (PERF-LOG run 59: +3-4% tg128);
 *   balanced grid: the fewest blocks that keep the most tiles of 16 rows per block, so that the
 *     shares are as even as the tiles allow (8b gate/up: 128 blocks of 14 tiles, not 132 of 13
 *     or 14; run 69: +1.2% tg128 on 8b q4_0 and q4_k_m);
 *   ring slots before the PDL wait: the launch's own (mv11_pre's one or two for one token, all
 *     for more; all for cu_matvec_f32_acc_prefilled: run 66);
 *   the pair's SM split: mv10_dual_split's (run 86). */
enum { MV_EARLY = 1, MV_BALANCE = 1 };

/* The tensor-core variants read the repacked layout of matvec.cuh; other types keep their GGUF
 * rows for v1. */
static int matvec_uses_v2(uint32_t t) {
    return t == QUANT_Q4_0 || t == QUANT_Q4_K || t == QUANT_Q5_K || t == QUANT_Q8_0 || t == QUANT_Q6_K;
}

/* v1 works in units of 32 weights (dequant.cuh: dq_unit), K-quants in whole super-blocks. */
static int64_t matvec_block_elems(uint32_t t) { return dq_block_elems(t); }

/* Every production v10 and v11 instantiation: f32 X, f16 X, SwiGLU X and the fused sources (v3
 * and v1 stay within the default 48 KB of shared memory). */
template <int T>
static void mv_prepare_all() {
    mv10_prepare_all<T, false>();
    mv10_prepare_all<T, true>();
    mv10_prepare_all<T, false, mv_x_swiglu>();
    mv10_prepare_all<T, false, mv_x_norm>();
    mv10_prepare_all<T, false, mv_x_norm_rope>();
    mv10_prepare_all<T, false, mv_x_acc>();
    mv10_prepare_all<T, false, mv_x_swiglu_acc>();
    mv10_prepare_all<T, false, mv_x_acc_post>();
    mv10_prepare_all<T, false, mv_x, MV11_OPT>();
    mv10_prepare_all<T, true, mv_x, MV11_OPT>();
    mv10_prepare_all<T, false, mv_x_swiglu, MV11_OPT>();
    mv10_prepare_all<T, false, mv_x_norm, MV11_OPT>();
    mv10_prepare_all<T, false, mv_x_norm_rope, MV11_OPT>();
    mv10_prepare_all<T, false, mv_x_norm_glu, MV11_OPT>();
    mv10_prepare_all<T, false, mv_x_norm_geglu, MV11_OPT>();
    mv10_prepare_all<T, false, mv_pend_of<mv_x_norm_geglu>, MV11_OPT>();
    mv10_prepare_all<T, false, mv_pend_of<mv_x_norm_rope>, MV11_OPT>();
    mv10_prepare_all<T, false, mv_x_acc, MV11_OPT>();
    mv10_prepare_all<T, false, mv_x_swiglu_acc, MV11_OPT>();
    mv10_prepare_all<T, false, mv_x_acc_post, MV11_OPT>();
}

/* v10 (O = 0) or v11 (MV11_OPT) for weight type t; false with nothing launched where it does not
 * apply (another type, n, k or shared memory: mv10_takes). fill: v11's ring slots before its PDL
 * wait (-1: mv11_pre's choice, 0: all). */
template <bool XH, typename XS, int O>
static bool matvec_v10_any(float *y, const void *w, uint32_t t, XS x, int r, int k, int n, cudaStream_t s,
                           cudaError_t *e, int fill, int late = 0, int sms_cap = 0) {
    const int pdl = pdl_enabled(), cap = MV11_STAGES, ea = MV_EARLY, bal = MV_BALANCE;
    switch (t) {
    case QUANT_Q4_0: return matvec_v10_launch<QUANT_Q4_0, XH, XS, O>(y, w, x, r, k, n, s, pdl, e, cap, ea, fill, bal, late, sms_cap);
    case QUANT_Q4_K: return matvec_v10_launch<QUANT_Q4_K, XH, XS, O>(y, w, x, r, k, n, s, pdl, e, cap, ea, fill, bal, late, sms_cap);
    case QUANT_Q5_K: return matvec_v10_launch<QUANT_Q5_K, XH, XS, O>(y, w, x, r, k, n, s, pdl, e, cap, ea, fill, bal, late, sms_cap);
    case QUANT_Q8_0: return matvec_v10_launch<QUANT_Q8_0, XH, XS, O>(y, w, x, r, k, n, s, pdl, e, cap, ea, fill, bal, late, sms_cap);
    case QUANT_Q6_K: return matvec_v10_launch<QUANT_Q6_K, XH, XS, O>(y, w, x, r, k, n, s, pdl, e, cap, ea, fill, bal, late, sms_cap);
    default: return false;
    }
}

/* v11, or v10 where no ring fits; false where neither applies. */
template <bool XH, typename XS>
static bool matvec_v10_family(float *y, const void *w, uint32_t t, XS x, int r, int k, int n, cudaStream_t s,
                              cudaError_t *e, int fill = -1, int late = 0, int sms_cap = 0) {
    return matvec_v10_any<XH, XS, MV11_OPT>(y, w, t, x, r, k, n, s, e, fill, late, sms_cap) ||
           matvec_v10_any<XH, XS, 0>(y, w, t, x, r, k, n, s, e, fill, late, sms_cap);
}

extern "C" int cu_matvec_ring_stages(uint32_t wtype, int64_t rows, int64_t k, int n, int norm) {
    int sms, smem_max, st = 0;
    const int cap = MV11_STAGES;
    const bool nm = norm != 0;
    if (cu_matvec_repacked_bytes(wtype, rows, k) == 0) return 0;
    switch (wtype) {
    case QUANT_Q4_0: mv10_takes<QUANT_Q4_0, MV11_OPT>(rows, k, n, nm, &sms, &smem_max, cap, &st); break;
    case QUANT_Q4_K: mv10_takes<QUANT_Q4_K, MV11_OPT>(rows, k, n, nm, &sms, &smem_max, cap, &st); break;
    case QUANT_Q5_K: mv10_takes<QUANT_Q5_K, MV11_OPT>(rows, k, n, nm, &sms, &smem_max, cap, &st); break;
    case QUANT_Q8_0: mv10_takes<QUANT_Q8_0, MV11_OPT>(rows, k, n, nm, &sms, &smem_max, cap, &st); break;
    case QUANT_Q6_K: mv10_takes<QUANT_Q6_K, MV11_OPT>(rows, k, n, nm, &sms, &smem_max, cap, &st); break;
    default: break;
    }
    return st;
}

template <int T>
static int mv_kernel_of(int64_t rows, int64_t k, int n) {
    int sms, smem_max;
    if (mv10_takes<T, MV11_OPT>(rows, k, n, false, &sms, &smem_max)) return 11;
    if (mv10_takes<T, 0>(rows, k, n, false, &sms, &smem_max)) return 10;
    return 3;
}

extern "C" int cu_matvec_kernel(uint32_t wtype, int64_t rows, int64_t k, int n) {
    if (cu_matvec_repacked_bytes(wtype, rows, k) == 0 || n < 1 || n > MATVEC_MAX_N) return 0;
    switch (wtype) {
    case QUANT_Q4_0: return mv_kernel_of<QUANT_Q4_0>(rows, k, n);
    case QUANT_Q4_K: return mv_kernel_of<QUANT_Q4_K>(rows, k, n);
    case QUANT_Q8_0: return mv_kernel_of<QUANT_Q8_0>(rows, k, n);
    case QUANT_Q6_K: return mv_kernel_of<QUANT_Q6_K>(rows, k, n);
    case QUANT_Q5_K: return mv_kernel_of<QUANT_Q5_K>(rows, k, n);
    default: return mv13_takes(wtype, k, n) ? 13 : 1;
    }
}

extern "C" int cu_matvec_supported(uint32_t wtype) { return matvec_block_elems(wtype) != 0; }

extern "C" size_t cu_matvec_repacked_bytes(uint32_t wtype, int64_t rows, int64_t k) {
    int64_t be = matvec_block_elems(wtype);
    if (be == 0 || rows <= 0 || k <= 0 || k % be != 0 || k > INT32_MAX || rows > INT32_MAX) return 0;
    if (matvec_uses_v2(wtype)) return (size_t)mv2_bytes((int)wtype, rows, k);
    return (size_t)rows * (size_t)dq_row_bytes(wtype, k);
}

extern "C" cudaError_t cu_matvec_repack(void *out, const void *w, uint32_t wtype, int64_t rows, int64_t k,
                                     cudaStream_t stream) {
    size_t bytes = cu_matvec_repacked_bytes(wtype, rows, k);
    if (bytes == 0) return cudaErrorInvalidValue;
    if (!matvec_uses_v2(wtype)) { /* GGUF rows; v13's shared-memory limit raised here, outside any graph capture */
        mv13_prepare(wtype);
        return cudaMemcpyAsync(out, w, bytes, cudaMemcpyDeviceToDevice, stream);
    }
    int64_t words = (int64_t)(bytes / 4);
    unsigned grid = (unsigned)((words + 255) / 256);
    uint8_t *o = (uint8_t *)out;
    const uint8_t *src = (const uint8_t *)w;
    switch (wtype) { /* v10's and v11's shared-memory limit is raised here, outside any graph capture */
    case QUANT_Q4_0: mv_prepare_all<QUANT_Q4_0>(); break;
    case QUANT_Q4_K: mv_prepare_all<QUANT_Q4_K>(); break;
    case QUANT_Q5_K: mv_prepare_all<QUANT_Q5_K>(); break;
    case QUANT_Q8_0: mv_prepare_all<QUANT_Q8_0>(); break;
    default: mv_prepare_all<QUANT_Q6_K>(); break;
    }
    switch (wtype) {
    case QUANT_Q4_0: matvec_v2_repack<QUANT_Q4_0><<<grid, 256, 0, stream>>>(o, src, (int)rows, (int)k); break;
    case QUANT_Q4_K: matvec_v2_repack<QUANT_Q4_K><<<grid, 256, 0, stream>>>(o, src, (int)rows, (int)k); break;
    case QUANT_Q5_K: matvec_v2_repack<QUANT_Q5_K><<<grid, 256, 0, stream>>>(o, src, (int)rows, (int)k); break;
    case QUANT_Q8_0: matvec_v2_repack<QUANT_Q8_0><<<grid, 256, 0, stream>>>(o, src, (int)rows, (int)k); break;
    default: matvec_v2_repack<QUANT_Q6_K><<<grid, 256, 0, stream>>>(o, src, (int)rows, (int)k); break;
    }
    return cudaGetLastError();
}


/* XT: the type of X in memory (float also for SwiGLU X, which is f32). */
template <typename XT, typename XS>
static cudaError_t matvec_any(float *y, const void *w, uint32_t t, XS x, int64_t rows, int64_t k, int n,
                              cudaStream_t s) {
    constexpr bool XH = sizeof(XT) == 2;
    if (cu_matvec_repacked_bytes(t, rows, k) == 0 || n < 1 || n > MATVEC_MAX_N) return cudaErrorInvalidValue;
    const uint8_t *wb = (const uint8_t *)w;
    dim3 grid1((unsigned)((rows + MV1_ROWS - 1) / MV1_ROWS));
    int r = (int)rows, kk = (int)k;
    cudaError_t e = cudaSuccess;
    if (matvec_v10_family<XH, XS>(y, w, t, x, r, kk, n, s, &e)) return e;
    if (matvec_v13_launch<XT, XS>(y, w, t, x, r, kk, n, s, &e)) return e;
    switch (t) {
    case QUANT_Q4_0: return matvec_v3_launch<QUANT_Q4_0, XH, XS>(y, w, x, r, kk, n, s);
    case QUANT_Q4_K: return matvec_v3_launch<QUANT_Q4_K, XH, XS>(y, w, x, r, kk, n, s);
    case QUANT_Q5_K: return matvec_v3_launch<QUANT_Q5_K, XH, XS>(y, w, x, r, kk, n, s);
    case QUANT_Q8_0: return matvec_v3_launch<QUANT_Q8_0, XH, XS>(y, w, x, r, kk, n, s);
    case QUANT_Q6_K: return matvec_v3_launch<QUANT_Q6_K, XH, XS>(y, w, x, r, kk, n, s);
    case QUANT_F32: return pdl_launch(matvec_v1<QUANT_F32, XT, XS>, grid1, dim3(256), MV1_SMEM, s, y, wb, x, r, kk, n);
    case QUANT_F16: return pdl_launch(matvec_v1<QUANT_F16, XT, XS>, grid1, dim3(256), MV1_SMEM, s, y, wb, x, r, kk, n);
    case QUANT_Q5_0: return pdl_launch(matvec_v1<QUANT_Q5_0, XT, XS>, grid1, dim3(256), MV1_SMEM, s, y, wb, x, r, kk, n);
    case QUANT_BF16: return pdl_launch(matvec_v1<QUANT_BF16, XT, XS>, grid1, dim3(256), MV1_SMEM, s, y, wb, x, r, kk, n);
    case QUANT_Q4_1: return pdl_launch(matvec_v1<QUANT_Q4_1, XT, XS>, grid1, dim3(256), MV1_SMEM, s, y, wb, x, r, kk, n);
    case QUANT_Q5_1: return pdl_launch(matvec_v1<QUANT_Q5_1, XT, XS>, grid1, dim3(256), MV1_SMEM, s, y, wb, x, r, kk, n);
    case QUANT_Q2_K: return pdl_launch(matvec_v1<QUANT_Q2_K, XT, XS>, grid1, dim3(256), MV1_SMEM, s, y, wb, x, r, kk, n);
    case QUANT_Q3_K: return pdl_launch(matvec_v1<QUANT_Q3_K, XT, XS>, grid1, dim3(256), MV1_SMEM, s, y, wb, x, r, kk, n);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t cu_matvec_f32(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows,
                                  int64_t k, int n, cudaStream_t stream) {
    return matvec_any<float>(y, w, wtype, mv_x{x}, rows, k, n, stream);
}

extern "C" cudaError_t cu_matvec_f16(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows,
                                  int64_t k, int n, cudaStream_t stream) {
    return matvec_any<__half>(y, w, wtype, mv_x{x}, rows, k, n, stream);
}

extern "C" cudaError_t cu_matvec_f32_swiglu(float *y, const void *w, uint32_t wtype, const float *g, int64_t sg,
                                         const float *u, int64_t su, int64_t rows, int64_t k, int n,
                                         cudaStream_t stream) {
    if (!g || !u) return cudaErrorInvalidValue;
    const bool vec = (uintptr_t)g % 16 == 0 && (uintptr_t)u % 16 == 0 && sg % 4 == 0 && su % 4 == 0;
    return matvec_any<float>(y, w, wtype, mv_x_swiglu{g, u, sg, su, vec}, rows, k, n, stream);
}

/* ---- decode fusions: v10 and v11 ----------------------------------------------------------- */

extern "C" int cu_matvec_fused_supported(uint32_t wtype, int64_t rows, int64_t k, int n) {
    int sms, smem_max;
    if (cu_matvec_repacked_bytes(wtype, rows, k) == 0) return 0;
    /* the NORM source's shared memory is the largest of the three: it covers the others; v10's
     * (v11 runs v10 where no ring fits) */
    switch (wtype) {
    case QUANT_Q4_0: return mv10_takes<QUANT_Q4_0>(rows, k, n, true, &sms, &smem_max);
    case QUANT_Q4_K: return mv10_takes<QUANT_Q4_K>(rows, k, n, true, &sms, &smem_max);
    case QUANT_Q5_K: return mv10_takes<QUANT_Q5_K>(rows, k, n, true, &sms, &smem_max);
    case QUANT_Q8_0: return mv10_takes<QUANT_Q8_0>(rows, k, n, true, &sms, &smem_max);
    case QUANT_Q6_K: return mv10_takes<QUANT_Q6_K>(rows, k, n, true, &sms, &smem_max);
    default: return mv13_takes(wtype, k, n); /* v13 (GGUF rows): norm, Y +=, RoPE; not GLU, POST */
    }
}

/* v11 (v10 where no ring fits) with a fused source, or cudaErrorNotSupported with nothing launched. */
template <typename XS>
static cudaError_t matvec_fused(float *y, const void *w, uint32_t t, XS x, int64_t rows, int64_t k, int n,
                                cudaStream_t s, int fill = -1, int late = 0, int sms_cap = 0) {
    if (!cu_matvec_fused_supported(t, rows, k, n)) return cudaErrorNotSupported;
    cudaError_t e = cudaErrorNotSupported;
    if (!matvec_v10_family<false, XS>(y, w, t, x, (int)rows, (int)k, n, s, &e, fill, late, sms_cap))
        matvec_v13_launch<float, XS>(y, w, t, x, (int)rows, (int)k, n, s, &e);
    return e;
}

extern "C" cudaError_t cu_matvec_f32_norm(float *y, const void *w, uint32_t wtype, const float *x, const float *g,
                                       float eps, int64_t rows, int64_t k, int n, cudaStream_t stream) {
    if (!x || !g || (uintptr_t)x % 16 || (uintptr_t)g % 16) return cudaErrorInvalidValue;
    return matvec_fused(y, w, wtype, mv_x_norm{x, g, eps}, rows, k, n, stream);
}

/* kernels.h's rules for pend and x_out of a NORM matvec reading x [n][k]. */
static bool pend_ok(const cu_post_pend *p, const float *x_out, const float *x, int64_t k) {
    if (p && (!p->part || !p->post || (uintptr_t)p->part % 16 || (uintptr_t)p->post % 16 || p->n != k ||
              p->part == x || (const float *)p->part == x_out))
        return false;
    return !x_out || ((uintptr_t)x_out % 16 == 0 && x_out != x);
}

/* The PEND form of a NORM source. */
template <typename B>
static mv_pend_of<B> pend_source(const B &b, const cu_post_pend *p, float *x_out) {
    mv_pend_of<B> s{b};
    if (p) s.pend = *p;
    s.x_out = x_out;
    return s;
}

extern "C" cudaError_t cu_matvec_f32_norm_glu(float *y, const void *w, uint32_t wtype, const float *x, const float *g,
                                           float eps, int64_t rows, int64_t k, int n, int gelu,
                                           const cu_post_pend *pend, float *x_out, cudaStream_t stream) {
    if (!x || !g || (uintptr_t)x % 16 || (uintptr_t)g % 16 || rows % 32 || (gelu != 0 && gelu != 1) ||
        !pend_ok(pend, x_out, x, k))
        return cudaErrorInvalidValue;
    /* v11 only (its copier follows the pairs of tiles); nothing else is tried */
    if (!cu_matvec_fused_supported(wtype, rows, k, n)) return cudaErrorNotSupported;
    cudaError_t e = cudaErrorNotSupported;
    if (pend || x_out) { /* Gemma's gate only: the post norms are Gemma's */
        if (gelu)
            matvec_v10_any<false, mv_pend_of<mv_x_norm_geglu>, MV11_OPT>(
                y, w, wtype, pend_source(mv_x_norm_geglu{{{x, g, eps}}}, pend, x_out), (int)rows, (int)k, n, stream, &e,
                -1);
        return e;
    }
    if (gelu)
        matvec_v10_any<false, mv_x_norm_geglu, MV11_OPT>(y, w, wtype, mv_x_norm_geglu{{{x, g, eps}}}, (int)rows,
                                                         (int)k, n, stream, &e, -1);
    else
        matvec_v10_any<false, mv_x_norm_glu, MV11_OPT>(y, w, wtype, mv_x_norm_glu{{x, g, eps}}, (int)rows, (int)k, n,
                                                       stream, &e, -1);
    return e;
}

/* The grid matvec_fused's launch of a NORM source would have for this case (v11's where its ring
 * fits, else v10's); 0 where neither takes it. */
template <int T>
static int fused_grid(int64_t rows, int64_t k, int n) {
    int sms, smem_max, st;
    int64_t grid;
    const int cap = MV11_STAGES, bal = MV_BALANCE;
    if (mv10_takes<T, MV11_OPT>(rows, k, n, true, &sms, &smem_max, cap) &&
        mv10_shape<T, MV11_OPT>(rows, k, n, true, sms, smem_max, cap, &grid, &st, bal) <= (size_t)smem_max)
        return (int)grid;
    if (mv10_takes<T, 0>(rows, k, n, true, &sms, &smem_max, cap)) {
        mv10_shape<T, 0>(rows, k, n, true, sms, smem_max, cap, &grid, &st, bal);
        return (int)grid;
    }
    return 0;
}

extern "C" int cu_matvec_fused_blocks(uint32_t wtype, int64_t rows, int64_t k, int n) {
    if (!cu_matvec_fused_supported(wtype, rows, k, n)) return 0;
    switch (wtype) {
    case QUANT_Q4_0: return fused_grid<QUANT_Q4_0>(rows, k, n);
    case QUANT_Q4_K: return fused_grid<QUANT_Q4_K>(rows, k, n);
    case QUANT_Q5_K: return fused_grid<QUANT_Q5_K>(rows, k, n);
    case QUANT_Q8_0: return fused_grid<QUANT_Q8_0>(rows, k, n);
    case QUANT_Q6_K: return fused_grid<QUANT_Q6_K>(rows, k, n);
    default: return 0;
    }
}

/* The pairs of types the two-matrix launches take (v11 only): those real files have, Q/K in Q4_K
 * (Q4_K_M) or Q5_K (Q5_K_M) with a Q6_K V. */
static bool pair_types(uint32_t t1, uint32_t t2) {
    return (t1 == QUANT_Q4_K || t1 == QUANT_Q5_K) && t2 == QUANT_Q6_K;
}

/* matvec_v10_dual of a pair_types pair (V Q6_K) with production's choices. */
template <typename XS>
static cudaError_t dual_pair(uint32_t t1, float *y1, const void *w1, const XS &x1, int64_t rows1, float *y2,
                             const void *w2, const XS &x2, int64_t rows2, int64_t k, int n, cudaStream_t s) {
    cudaError_t e = cudaErrorNotSupported;
    if (t1 == QUANT_Q4_K)
        mv10_dual_launch<QUANT_Q4_K, QUANT_Q6_K, XS, MV11_OPT>(y1, w1, x1, (int)rows1, y2, w2, x2, (int)rows2, (int)k, n,
                                                               s, pdl_enabled(), &e, MV11_STAGES, MV_EARLY, -1, MV_BALANCE);
    else
        mv10_dual_launch<QUANT_Q5_K, QUANT_Q6_K, XS, MV11_OPT>(y1, w1, x1, (int)rows1, y2, w2, x2, (int)rows2, (int)k, n,
                                                               s, pdl_enabled(), &e, MV11_STAGES, MV_EARLY, -1, MV_BALANCE);
    return e;
}

/* norm_rope's source for a matrix of rows rows (nq Q rows, nk K rows, the rest V), or false where
 * the arguments are not one kernels.h allows. */
static bool rope_source(mv_x_norm_rope *src, const float *x, const float *g, float eps, int64_t rows, float *q_out,
                        uint16_t *k_cache, uint16_t *v_cache, const int32_t *pos, const int32_t *cell, int64_t nq,
                        int64_t nk, int64_t kv_dim, int head_dim, int n_rot, float theta, const cu_rope_epi *epi,
                        const cu_post_pend *pend, const float *x_out, int64_t k) {
    const int64_t nv = rows - nq - nk;
    if (!x || !g || (uintptr_t)x % 16 || (uintptr_t)g % 16 || !pos || !cell || head_dim <= 0 || head_dim % 2 ||
        n_rot < 0 || n_rot % 2 || n_rot > head_dim || nq < 0 || nq % head_dim || (nq && !q_out) ||
        (nk != 0 && nk != kv_dim) || (nk && !k_cache) || (nv != 0 && nv != kv_dim) || (nv && !v_cache) ||
        kv_dim <= 0 || kv_dim % head_dim || rows % 2 || nq > INT32_MAX || kv_dim > INT32_MAX ||
        (epi && n_rot && epi->angle == nullptr && epi->neox_rows) || !pend_ok(pend, x_out, x, k))
        return false;
    *src = mv_x_norm_rope{{x, g, eps}, q_out, k_cache, v_cache, pos, cell, (int)nq, (int)nk, (int)kv_dim,
                          head_dim, n_rot, theta, epi ? *epi : cu_rope_epi{}};
    return true;
}

static cudaError_t norm_rope(int late, int sms_cap, const void *w, uint32_t wtype, const float *x, const float *g, float eps,
                                            int64_t rows, int64_t k, int n, float *q_out, uint16_t *k_cache,
                                            uint16_t *v_cache, const int32_t *pos, const int32_t *cell, int64_t nq,
                                            int64_t nk, int64_t kv_dim, int head_dim, int n_rot, float theta,
                                            const cu_rope_epi *epi, const cu_post_pend *pend, float *x_out,
                                            cudaStream_t stream) {
    mv_x_norm_rope src;
    if (!rope_source(&src, x, g, eps, rows, q_out, k_cache, v_cache, pos, cell, nq, nk, kv_dim, head_dim, n_rot, theta,
                     epi, pend, x_out, k))
        return cudaErrorInvalidValue;
    if (pend || x_out) { /* v11 only */
        if (!cu_matvec_fused_supported(wtype, rows, k, n)) return cudaErrorNotSupported;
        cudaError_t e = cudaErrorNotSupported;
        matvec_v10_any<false, mv_pend_of<mv_x_norm_rope>, MV11_OPT>((float *)nullptr, w, wtype,
                                                                     pend_source(src, pend, x_out), (int)rows, (int)k,
                                                                     n, stream, &e, -1, late, sms_cap);
        return e;
    }
    return matvec_fused((float *)nullptr, w, wtype, src, rows, k, n, stream, -1, late, sms_cap);
}

extern "C" cudaError_t cu_matvec_f32_norm_rope_pair(const void *w1, uint32_t t1, int64_t rows1, int64_t nq1, int64_t nk1,
                                                 const void *w2, uint32_t t2, int64_t rows2, int64_t nq2, int64_t nk2,
                                                 const float *x, const float *g, float eps, int64_t k, int n,
                                                 float *q_out, uint16_t *k_cache, uint16_t *v_cache,
                                                 const int32_t *pos, const int32_t *cell, int64_t kv_dim,
                                                 int head_dim, int n_rot, float theta, const cu_rope_epi *epi,
                                                 const cu_post_pend *pend, float *x_out, cudaStream_t stream) {
    mv_x_norm_rope s1, s2;
    if (!rope_source(&s1, x, g, eps, rows1, q_out, k_cache, v_cache, pos, cell, nq1, nk1, kv_dim, head_dim, n_rot,
                     theta, epi, pend, x_out, k) ||
        !rope_source(&s2, x, g, eps, rows2, q_out, k_cache, v_cache, pos, cell, nq2, nk2, kv_dim, head_dim, n_rot,
                     theta, epi, pend, x_out, k))
        return cudaErrorInvalidValue;
    if (!pair_types(t1, t2) || !cu_matvec_fused_supported(t1, rows1, k, n) || !cu_matvec_fused_supported(t2, rows2, k, n))
        return cudaErrorNotSupported;
    if (pend || x_out) /* both grids' block 0 write x_out: the same values */
        return dual_pair(t1, (float *)nullptr, w1, pend_source(s1, pend, x_out), rows1, (float *)nullptr, w2,
                         pend_source(s2, pend, x_out), rows2, k, n, stream);
    return dual_pair(t1, (float *)nullptr, w1, s1, rows1, (float *)nullptr, w2, s2, rows2, k, n, stream);
}

extern "C" cudaError_t cu_matvec_f32_norm_pair(float *y1, const void *w1, uint32_t t1, int64_t rows1, float *y2,
                                            const void *w2, uint32_t t2, int64_t rows2, const float *x, const float *g,
                                            float eps, int64_t k, int n, cudaStream_t stream) {
    if (!y1 || !y2 || !x || !g || (uintptr_t)x % 16 || (uintptr_t)g % 16) return cudaErrorInvalidValue;
    if (!pair_types(t1, t2) || !cu_matvec_fused_supported(t1, rows1, k, n) || !cu_matvec_fused_supported(t2, rows2, k, n))
        return cudaErrorNotSupported;
    const mv_x_norm s{x, g, eps};
    return dual_pair(t1, y1, w1, s, rows1, y2, w2, s, rows2, k, n, stream);
}

extern "C" cudaError_t cu_matvec_f32_norm_rope(const void *w, uint32_t wtype, const float *x, const float *g, float eps,
                                            int64_t rows, int64_t k, int n, float *q_out, uint16_t *k_cache,
                                            uint16_t *v_cache, const int32_t *pos, const int32_t *cell, int64_t nq,
                                            int64_t nk, int64_t kv_dim, int head_dim, int n_rot, float theta,
                                            const cu_rope_epi *epi, const cu_post_pend *pend, float *x_out,
                                            cudaStream_t stream) {
    return norm_rope(0, 0, w, wtype, x, g, eps, rows, k, n, q_out, k_cache, v_cache, pos, cell, nq, nk, kv_dim, head_dim,
                     n_rot, theta, epi, pend, x_out, stream);
}

extern "C" cudaError_t cu_matvec_f32_norm_rope_beside(const void *w, uint32_t wtype, const float *x, const float *g,
                                                   float eps, int64_t rows, int64_t k, int n, float *q_out,
                                                   uint16_t *k_cache, uint16_t *v_cache, const int32_t *pos,
                                                   const int32_t *cell, int64_t nq, int64_t nk, int64_t kv_dim,
                                                   int head_dim, int n_rot, float theta, const cu_rope_epi *epi,
                                                   int front_blocks, const cu_post_pend *pend, float *x_out,
                                                   cudaStream_t stream) {
    /* the SMs the grid in front leaves (its blocks hold one SM each): this grid's blocks all start
     * at once instead of queueing behind that kernel's; not under an eighth of the device (a grid
     * that narrow would end last) */
    int sms, smem_max, cap = 0;
    if (front_blocks > 0 && mv_device(&sms, &smem_max) && sms - front_blocks >= sms / 8) cap = sms - front_blocks;
    return norm_rope(1, cap, w, wtype, x, g, eps, rows, k, n, q_out, k_cache, v_cache, pos, cell, nq, nk, kv_dim, head_dim,
                     n_rot, theta, epi, pend, x_out, stream);
}

extern "C" cudaError_t cu_matvec_f32_acc(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows,
                                      int64_t k, int n, cudaStream_t stream) {
    if (!x) return cudaErrorInvalidValue;
    return matvec_fused(y, w, wtype, mv_x_acc{{x}}, rows, k, n, stream);
}

extern "C" cudaError_t cu_matvec_f32_acc_post(float *y, const void *w, uint32_t wtype, const float *x, const float *post,
                                           float eps, float *part, unsigned *count, int64_t rows, int64_t k, int n,
                                           int prefilled, cudaStream_t stream) {
    if (!x || !post || !part || !count) return cudaErrorInvalidValue;
    /* v11, or v10 where no ring fits (the tail reads float4s) */
    if (rows % 4 || (uintptr_t)y % 16 || (uintptr_t)post % 16 || (uintptr_t)part % 16 ||
        !cu_matvec_fused_supported(wtype, rows, k, n))
        return cudaErrorNotSupported;
    cudaError_t e = cudaErrorNotSupported;
    matvec_v10_family<false>(y, w, wtype, mv_x_acc_post{{x}, post, eps, part, count}, (int)rows, (int)k, n, stream, &e,
                             prefilled ? 0 : -1);
    return e;
}

extern "C" cudaError_t cu_matvec_f32_acc_prefilled(float *y, const void *w, uint32_t wtype, const float *x,
                                                int64_t rows, int64_t k, int n, cudaStream_t stream) {
    if (!x) return cudaErrorInvalidValue;
    return matvec_fused(y, w, wtype, mv_x_acc{{x}}, rows, k, n, stream, 0);
}

extern "C" cudaError_t cu_matvec_f32_prefilled(float *y, const void *w, uint32_t wtype, const float *x, int64_t rows,
                                            int64_t k, int n, cudaStream_t stream) {
    if (!x) return cudaErrorInvalidValue;
    return matvec_fused(y, w, wtype, mv_x{x}, rows, k, n, stream, 0);
}

/* cu_post_pend_apply: block t on token t, the factor as mv10_stage works it out (the threads' sums
 * of squares in double, the warps' in warp order), then x += part * ps * post. */
#define PEND_APPLY_THREADS 256
__global__ void __launch_bounds__(PEND_APPLY_THREADS) post_pend_apply_kernel(float *x, cu_post_pend p) {
    __shared__ double ws[PEND_APPLY_THREADS / 32];
    pdl_wait();
    pdl_trigger();
    const int64_t t = blockIdx.x;
    const float *pt = p.part + t * p.n;
    float *xt = x + t * p.n;
    double sq = 0.0;
    for (int i = threadIdx.x; i < p.n; i += blockDim.x) sq += (double)pt[i] * pt[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = sq;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < PEND_APPLY_THREADS / 32; w++) s += ws[w];
    const float ps = (float)(1.0 / sqrt(s / p.n + p.eps));
    for (int i = threadIdx.x; i < p.n; i += blockDim.x) xt[i] = xt[i] + pt[i] * ps * __ldg(p.post + i);
}

extern "C" cudaError_t cu_post_pend_apply(float *x, const cu_post_pend *pend, int n_tok, cudaStream_t stream) {
    if (!x || !pend || !pend->part || !pend->post || pend->n < 1 || n_tok < 1 || (const float *)pend->part == x)
        return cudaErrorInvalidValue;
    return pdl_launch_as(pdl_enabled(), post_pend_apply_kernel, dim3((unsigned)n_tok), dim3(PEND_APPLY_THREADS), 0,
                         stream, x, *pend);
}

extern "C" cudaError_t cu_matvec_f32_swiglu_acc(float *y, const void *w, uint32_t wtype, const float *g, int64_t sg,
                                             const float *u, int64_t su, int64_t rows, int64_t k, int n,
                                             cudaStream_t stream) {
    if (!g || !u) return cudaErrorInvalidValue;
    const bool vec = (uintptr_t)g % 16 == 0 && (uintptr_t)u % 16 == 0 && sg % 4 == 0 && su % 4 == 0;
    return matvec_fused(y, w, wtype, mv_x_swiglu_acc{{g, u, sg, su, vec}}, rows, k, n, stream);
}
