/* Prefill GEMM launchers (kernels.h: cu_gemm_f16, cu_gemm_f16_split; gemm_lab.h: the same under
 * another cu_gemm_cfg) and the split-K heuristics; kernels in gemm.cuh (v1-v3), gemm_panel.cuh
 * (the f16-panel path of variants 4 to 6) and gemm_wg.cuh (v7: wgmma on weights dequantised in
 * registers, for small n). Production runs CU_GEMM_PRODUCTION: variant 7 (v7, and from 512 tokens
 * the wgmma panel path where it measured faster; v2 off compute capability 9.0). The types kept in
 * GGUF layout (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K) take gemm_gguf.cuh's kernel, and from the panel
 * path's token counts (cu_gemm_f16_split) its panels, dequantised from the GGUF rows. */
#include "kernels/kernels.h"
#include "kernels/gemm_lab.h"
#include "kernels/gemm.cuh"
#include "kernels/gemm_panel.cuh"
#include "kernels/gemm_wg.cuh"
#include "kernels/gemm_gguf.cuh"
#include "kernels/optin.cuh"

/* The split aims at GEMM_SPLIT_WAVES blocks per SM (two resident blocks of 256 threads each fit
 * an SM, v1, v2 and v3 alike, so this fills it about twice over); slices are whole super-blocks of 4 chunks (256
 * weights: a Q4_K / Q6_K scale group), at most GEMM_SPLIT_MAX of them, since each slice adds an
 * [n][rows] f32 plane written and read back. */
#define GEMM_SPLIT_WAVES 2
#define GEMM_SPLIT_MAX 16

/* The types the repacked GEMMs read (v1, v2, v7, panels; v3 of the lab), gemm_gguf.cuh's kernel takes others in
 * GGUF layout, in front of them (cu_gemm_f16, cu_gemm_f16_split, _parts). */
static bool gemm_repacked(uint32_t wtype) {
    return wtype == QUANT_Q4_0 || wtype == QUANT_Q4_K || wtype == QUANT_Q5_K || wtype == QUANT_Q6_K || wtype == QUANT_Q8_0;
}

extern "C" int cu_gemm_supported(uint32_t wtype) { return gemm_repacked(wtype) || gemm_gguf_takes(wtype); }

static const cu_gemm_cfg g_production = CU_GEMM_PRODUCTION;

extern "C" cu_gemm_cfg cu_gemm_production(void) { return g_production; }

/* Variants of the f16-panel path (from cfg.panel_min_n tokens on): 4 (wgmma), 5 (mma.sync), 6 (4
 * without the proxy fence), 7 (4's panels; v7 below the threshold). */
static bool gp_variant(int v) { return v >= 4 && v <= 7; }

/* v7 (gemm_wg.cuh) in one pass, or false where it does not run (not compute capability 9.0): the
 * cu_gemm_f16 path of variant 7. Defined with the rest of v7 below. */
static bool g7_one_pass(float *y, const uint8_t *w, uint32_t wtype, const __half *x, int rows, int k, int n,
                        cudaStream_t stream, cudaError_t *e);

/* The block tile (rows x tokens) a launch uses: v1 128 x 64; v2 and v3 (gemm.cuh) 128 x 128 for
 * n > 64, 256 x 64 for n <= 64 (every weight dequantised once per block and once per call). */
struct gemm_shape {
    int variant, wr, brows, btoks;
};

/* Variants 4 and 5 run v2 where the panel path does not apply (n < GP_MIN_N, no scratch). */
static gemm_shape gemm_shape_of(int variant, int64_t n) {
    if (variant == 1) return {1, 0, GEMM_ROWS, GEMM_TOKS};
    const int wr = n > 64 ? 4 : 8;
    return {variant == 3 ? 3 : 2, wr, gemm2_rows(wr), gemm2_toks(wr)};
}

static gemm_shape gemm_shape_for(const cu_gemm_cfg *c, int64_t n) { return gemm_shape_of(c->variant, n); }

static int gemm_args_ok(uint32_t wtype, int64_t rows, int64_t k, int64_t n) {
    return gemm_repacked(wtype) && cu_matvec_repacked_bytes(wtype, rows, k) != 0 && n > 0 && n <= INT32_MAX &&
           k % 8 == 0 && (n + GEMM_TOKS - 1) / GEMM_TOKS <= 65535;
}

/* The current device's SMs for the split-K models and the panel GEMM (mv_device: cached per
 * device, so safe inside a capture), or 0 with no device, leaving no error behind for the caller. */
static int split_sms() {
    int sms = 0, smem_max = 0;
    if (mv_device(&sms, &smem_max) && sms > 0) return sms;
    cudaGetLastError();
    return 0;
}

/* Slices of the K loop for this shape on the current device (1: no split) and the chunks each
 * slice takes (*cps); with max_slices the count is cut to fit a smaller scratch buffer. Every
 * slice holds at least one chunk, and the planes never pass SMs x 128 KB (kernels.h's bound). */
static int gemm_slices(const gemm_shape &sh, int64_t rows, int64_t k, int64_t n, int max_slices, int *cps) {
    const int64_t C = mv2_chunks(k), groups = (C + 3) / 4;
    const int64_t tiles = ((rows + sh.brows - 1) / sh.brows) * ((n + sh.btoks - 1) / sh.btoks);
    *cps = (int)C;
    const int sms = split_sms();
    if (!sms) return 1; /* no device: no split */
    const int64_t target = (int64_t)GEMM_SPLIT_WAVES * sms;
    if (tiles >= target) return 1;
    int64_t s = (target + tiles - 1) / tiles;
    const int64_t bound = (int64_t)sms * (128 << 10) / (n * rows * (int64_t)sizeof(float));
    if (s > GEMM_SPLIT_MAX) s = GEMM_SPLIT_MAX;
    if (s > bound) s = bound;
    if (s > max_slices) s = max_slices;
    if (s > groups) s = groups;
    if (s < 2) return 1;
    const int64_t per = (groups + s - 1) / s; /* super-blocks per slice */
    *cps = (int)(4 * per);
    return (int)((C + *cps - 1) / *cps);
}

/* y = the sum of the slices' planes in part, in slice order (gemm_sum). */
static cudaError_t gemm_sum_launch(float *y, const float *part, int slices, int64_t total, cudaStream_t s) {
    int64_t blocks = (total + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    return pdl_launch(gemm_sum, dim3((unsigned)blocks), dim3(256), 0, s, y, part, slices, total);
}

/* v3's dynamic shared memory (gemm3_smem: 64-100 KB, two blocks per SM) needs the opt-in above
 * 48 KB, once per kernel and device; not a stream operation, so also fine during a capture. The
 * carveout asks for all of L1 as shared memory: the kernel reads nothing through L1 (cp.async.cg
 * goes to L2), and two blocks need ~2 x 100 KB. */
template <int T, int WR, int WC>
static cudaError_t gemm3_launch(dim3 grid, float *y, const uint8_t *w, const __half *x, int rows, int k, int n, int cps,
                                cudaStream_t stream) {
    static bool ready[64];
    constexpr int smem = gemm3_smem<T, WR, WC>();
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (dev < 0 || dev >= 64 || !ready[dev]) {
        e = cudaFuncSetAttribute(gemm_v3<T, WR, WC>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(gemm_v3<T, WR, WC>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     (int)cudaSharedmemCarveoutMaxShared);
        if (e != cudaSuccess) return e;
        if (dev >= 0 && dev < 64) ready[dev] = true;
    }
    return pdl_launch(gemm_v3<T, WR, WC>, grid, dim3(32 * WR * WC), smem, stream, y, w, x, rows, k, n, cps);
}

template <int T>
static cudaError_t gemm_launch_t(const gemm_shape &sh, dim3 grid, float *y, const uint8_t *w, const __half *x, int rows,
                                 int k, int n, int cps, cudaStream_t stream) {
    if (sh.variant == 1) return pdl_launch(gemm_v1<T>, grid, dim3(256), 0, stream, y, w, x, rows, k, n, cps);
    if (sh.variant == 3) {
        if (sh.wr == 4) return gemm3_launch<T, 4, 2>(grid, y, w, x, rows, k, n, cps, stream);
        return gemm3_launch<T, 8, 1>(grid, y, w, x, rows, k, n, cps, stream);
    }
    if (sh.wr == 4) return pdl_launch(gemm_v2<T, 4>, grid, dim3(256), 0, stream, y, w, x, rows, k, n, cps);
    return pdl_launch(gemm_v2<T, 8>, grid, dim3(256), 0, stream, y, w, x, rows, k, n, cps);
}

static cudaError_t gemm_launch(const gemm_shape &sh, float *y, const uint8_t *w, uint32_t wtype, const __half *x,
                               int rows, int k, int n, int slices, int cps, cudaStream_t stream) {
    const dim3 grid((unsigned)((rows + sh.brows - 1) / sh.brows), (unsigned)((n + sh.btoks - 1) / sh.btoks),
                    (unsigned)slices);
    switch (wtype) {
    case QUANT_Q4_0: return gemm_launch_t<QUANT_Q4_0>(sh, grid, y, w, x, rows, k, n, cps, stream);
    case QUANT_Q4_K: return gemm_launch_t<QUANT_Q4_K>(sh, grid, y, w, x, rows, k, n, cps, stream);
    case QUANT_Q5_K: return gemm_launch_t<QUANT_Q5_K>(sh, grid, y, w, x, rows, k, n, cps, stream);
    case QUANT_Q6_K: return gemm_launch_t<QUANT_Q6_K>(sh, grid, y, w, x, rows, k, n, cps, stream);
    default: return gemm_launch_t<QUANT_Q8_0>(sh, grid, y, w, x, rows, k, n, cps, stream);
    }
}

extern "C" cudaError_t cu_gemm_f16_with(const cu_gemm_cfg *c, float *y, const void *w, uint32_t wtype,
                                        const uint16_t *x, int64_t rows, int64_t k, int64_t n, cudaStream_t stream) {
    if (c && gemm_gguf_takes(wtype)) return gemm_gguf_run(y, w, wtype, x, rows, k, n, stream);
    if (!c || !gemm_args_ok(wtype, rows, k, n)) return cudaErrorInvalidValue;
    cudaError_t e;
    if (c->variant == 7 &&
        g7_one_pass(y, (const uint8_t *)w, wtype, (const __half *)x, (int)rows, (int)k, (int)n, stream, &e))
        return e;
    return gemm_launch(gemm_shape_for(c, n), y, (const uint8_t *)w, wtype, (const __half *)x, (int)rows, (int)k, (int)n,
                       1, (int)mv2_chunks(k), stream);
}

extern "C" cudaError_t cu_gemm_f16(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows, int64_t k,
                                int64_t n, cudaStream_t stream) {
    return cu_gemm_f16_with(&g_production, y, w, wtype, x, rows, k, n, stream);
}

/* ---------------------------------------------------------------- f16-panel path (4, 5) ----- */
/* Panels of at most GEMM_PANEL_BYTES of f16 (cfg.panel_limit may lower it): about half of the
 * H200's L2, so a panel written by gp_dequant is still there when the GEMM reads it. */
#define GEMM_PANEL_BYTES ((size_t)32 << 20)
#define GEMM_PANEL_MIN ((size_t)128 * 256 * 2) /* 128 rows x 256 weights */

static size_t gp_limit(const cu_gemm_cfg *c) {
    return c->panel_limit && c->panel_limit < GEMM_PANEL_BYTES ? c->panel_limit : GEMM_PANEL_BYTES;
}

/* Token counts from which variants 4-7 take the panel path (at least GP_MIN_N): below it v2 runs
 * (variant 7: v7). */
static int gp_min_n(const cu_gemm_cfg *c) { return c->panel_min_n > GP_MIN_N ? c->panel_min_n : GP_MIN_N; }

/* How a [rows, k] matrix is cut into panels of at most `limit` bytes: prows rows (a multiple of
 * 128) by pcs chunks (a multiple of 4, i.e. whole 256-weight super-blocks, or all C); nrp x nkp
 * panels. The whole matrix when it fits; otherwise panels of up to 4096 weights of k and as many
 * rows as fit, so that one panel's GEMM still has enough 128-row tiles for the SMs and few k
 * panels add into Y (each is a read and a write of the Y tile). False below GEMM_PANEL_MIN. */
struct gp_geom {
    int64_t prows;
    int pcs, nrp, nkp;
    size_t bytes;
};

static bool gp_geometry(int64_t rows, int64_t k, size_t limit, gp_geom *g) {
    const int64_t C = mv2_chunks(k), rfull = (rows + 127) / 128 * 128;
    if (limit < GEMM_PANEL_MIN) return false;
    int64_t pr, pcs;
    if ((uint64_t)rfull * (uint64_t)C * 128 <= limit) { /* 128 bytes per row and chunk */
        pr = rfull;
        pcs = C;
    } else {
        const int64_t k0 = C < 64 ? C : 64;
        pr = (int64_t)(limit / (size_t)(k0 * 128)) / 128 * 128;
        if (pr > rfull) pr = rfull;
        if (pr < 128) pr = 128;
        pcs = (int64_t)(limit / (size_t)(pr * 128)) / 4 * 4;
        if (pcs > C) pcs = C;
        if (pcs < 4) pcs = C < 4 ? C : 4; /* fits: pr <= limit / (k0 * 128) with k0 >= min(C, 4) */
    }
    g->prows = pr;
    g->pcs = (int)pcs;
    g->nrp = (int)((rfull + pr - 1) / pr);
    g->nkp = (int)((C + pcs - 1) / pcs);
    g->bytes = (size_t)pr * (size_t)pcs * 128;
    return true;
}


/* Dynamic shared memory above 48 KB and the max-shared carveout (two v5 blocks need 2 x 97 KB),
 * once per kernel and device; not a stream operation, so fine during a capture. */
template <auto K>
static cudaError_t gp_prepare(int smem) {
    static bool ready[64];
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (dev >= 0 && dev < 64 && ready[dev]) return cudaSuccess;
    e = cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(K, cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared);
    if (e == cudaSuccess && dev >= 0 && dev < 64) ready[dev] = true;
    return e;
}

static cudaError_t gp_dequant_launch(__half *panel, const uint8_t *w, uint32_t wtype, int rows, int k, int row0,
                                     int nrb, int c0, int pc, cudaStream_t s) {
    const int R16 = (rows + 15) / 16, C = (int)mv2_chunks(k), tb0 = row0 / 16;
    const dim3 grid((unsigned)((pc + GP_DQ_CH - 1) / GP_DQ_CH), (unsigned)nrb);
    if (gemm_gguf_takes(wtype)) return gp_dequant_gguf_launch(panel, w, wtype, rows, k, row0, nrb, c0, pc, s);
    switch (wtype) {
    case QUANT_Q4_0: return pdl_launch(gp_dequant<QUANT_Q4_0>, grid, dim3(256), 0, s, panel, w, R16, C, tb0, c0, pc);
    case QUANT_Q4_K: return pdl_launch(gp_dequant<QUANT_Q4_K>, grid, dim3(256), 0, s, panel, w, R16, C, tb0, c0, pc);
    case QUANT_Q5_K: return pdl_launch(gp_dequant<QUANT_Q5_K>, grid, dim3(256), 0, s, panel, w, R16, C, tb0, c0, pc);
    case QUANT_Q6_K: return pdl_launch(gp_dequant<QUANT_Q6_K>, grid, dim3(256), 0, s, panel, w, R16, C, tb0, c0, pc);
    default: return pdl_launch(gp_dequant<QUANT_Q8_0>, grid, dim3(256), 0, s, panel, w, R16, C, tb0, c0, pc);
    }
}

template <bool FENCE>
static cudaError_t gp4_launch(int bn, dim3 grid, const gp_args &a, cudaStream_t s) {
    cudaError_t e;
    if (bn == 256) {
        if ((e = gp_prepare<gemm_v4<256, FENCE>>(gp4_smem<256>())) != cudaSuccess) return e;
        return pdl_launch(gemm_v4<256, FENCE>, grid, dim3(256), gp4_smem<256>(), s, a);
    }
    if ((e = gp_prepare<gemm_v4<128, FENCE>>(gp4_smem<128>())) != cudaSuccess) return e;
    return pdl_launch(gemm_v4<128, FENCE>, grid, dim3(256), gp4_smem<128>(), s, a);
}

/* The GEMM kernel of one panel: v5, or v4 (v6: no proxy fence) with 128 or 256 rows per block (bn). */
static cudaError_t gp_gemm_launch(int variant, int bn, const gp_args &a, int slices, cudaStream_t s) {
    const dim3 grid((unsigned)((a.n + GP_BM - 1) / GP_BM), (unsigned)((a.nrb * 128 + bn - 1) / bn), (unsigned)slices);
    cudaError_t e;
    if (variant == 5) {
        constexpr int smem = GP5_STAGES * (GP_XBYTES + GP_BLOCK * 2) + 1024;
        if ((e = gp_prepare<gemm_v5>(smem)) != cudaSuccess) return e;
        return pdl_launch(gemm_v5, grid, dim3(256), smem, s, a);
    }
    if (variant == 6) return gp4_launch<false>(bn, grid, a, s);
    return gp4_launch<true>(bn, grid, a, s);
}

/* Y = W . X through f16 panels in scratch (variant 4 or 5), or with products false only the
 * dequantisation of every panel (the last one left at the start of the aligned scratch). *ran
 * is false, and nothing is launched, when the scratch cannot hold the smallest panel (the
 * caller then runs v2). Panels run row panel by row panel, k panels in order within each: the
 * first k panel writes its rows of Y, the others add to them, so Y is the same on every run.
 * A matrix that is one panel may also split k across blockIdx.z into planes after the panel
 * (when its tiles fill less than half the SMs), summed in order by gemm_sum. */
static cudaError_t gp_run(int variant, size_t limit, float *y, const uint8_t *w, uint32_t wtype, const __half *x, int rows,
                          int k, int n, void *scratch, size_t bytes, cudaStream_t s, bool products, bool *ran) {
    *ran = false;
    const uintptr_t p0 = (uintptr_t)scratch, p1 = (p0 + 1023) & ~(uintptr_t)1023;
    if (!scratch || bytes < p1 - p0) return cudaSuccess;
    const size_t avail = bytes - (p1 - p0);
    gp_geom gm;
    if (!gp_geometry(rows, k, avail < limit ? avail : limit, &gm)) return cudaSuccess;
    const int sms = split_sms();
    if (!sms) return cudaSuccess;
    /* v4 and v6 need wgmma (compute capability 9.0 only); elsewhere *ran stays false and the
     * caller runs v2 */
    if (variant != 5 && !wgmma_device()) return cudaSuccess;
    __half *panel = (__half *)p1;
    const int C = (int)mv2_chunks(k), rfull = (rows + 127) / 128 * 128, ttiles = (n + GP_BM - 1) / GP_BM;
    /* v4: 256 rows per block when that still gives a block per SM, else 128 */
    const int bn = variant != 5 && (int64_t)ttiles * ((gm.prows + 255) / 256) >= sms ? 256 : 128;
    int slices = 1, cps = gm.pcs;
    float *out = y;
    if (products && gm.nrp == 1 && gm.nkp == 1) {
        const int64_t tiles = (int64_t)ttiles * ((rfull + bn - 1) / bn);
        const size_t plane = (size_t)n * (size_t)rows * sizeof(float), room = avail - gm.bytes;
        int64_t sl = 2 * tiles <= sms ? sms / tiles : 1; /* at most one block per SM in all */
        if (sl > GEMM_SPLIT_MAX) sl = GEMM_SPLIT_MAX;
        if ((size_t)sl > room / plane) sl = (int64_t)(room / plane);
        if (sl > C / 4) sl = C / 4; /* slices of at least 4 chunks */
        if (sl >= 2) {
            cps = (C + (int)sl - 1) / (int)sl;
            slices = (C + cps - 1) / cps;
            out = (float *)(p1 + gm.bytes);
        }
    }
    *ran = true;
    cudaError_t e = cudaSuccess;
    for (int rp = 0; rp < gm.nrp && e == cudaSuccess; rp++) {
        const int row0 = (int)(rp * gm.prows);
        const int nrb = (int)((rfull - row0 < gm.prows ? rfull - row0 : gm.prows) / 128);
        for (int kp = 0; kp < gm.nkp && e == cudaSuccess; kp++) {
            const int c0 = kp * gm.pcs, pc = C - c0 < gm.pcs ? C - c0 : gm.pcs;
            e = gp_dequant_launch(panel, w, wtype, rows, k, row0, nrb, c0, pc, s);
            if (e != cudaSuccess || !products) continue;
            gp_args a;
            a.y = out;
            a.panel = panel;
            a.x = x;
            a.rows = rows;
            a.k = k;
            a.n = n;
            a.row0 = row0;
            a.nrb = nrb;
            a.c0 = c0;
            a.pc = pc;
            a.cps = slices > 1 ? cps : pc;
            a.accumulate = kp > 0;
            a.vec = rows % 2 == 0 && ((uintptr_t)out & 7) == 0;
            a.plane = (int64_t)n * rows;
            e = gp_gemm_launch(variant, bn, a, slices, s);
        }
    }
    if (e == cudaSuccess && slices > 1) e = gemm_sum_launch(y, out, slices, (int64_t)n * rows, s);
    return e;
}

/* ---------------------------------------------------------------- v7: wgmma, small n -------- */
/* v7's block for n tokens (gemm_wg.cuh): WR warps along rows x WC along tokens, NW tokens per
 * warpgroup, brows x btoks per block. */
struct g7_shape {
    int wr, wc, nw, brows, btoks;
};

static g7_shape g7_shape_for(int64_t n) {
    if (n > 64) return {8, 2, 64, 128, 128};
    const int nw = n <= 8 ? 8 : n <= 16 ? 16 : n <= 32 ? 32 : 64;
    return {16, 1, nw, 256, nw};
}

/* v7's split-K. A v7 block fills an SM (512 threads, 60-200 KB of shared memory), so blocks run
 * in waves of SMs, and every block pays a start-up (launch, the ring's first loads: about G7_FILL
 * chunk times) before it streams. Of the slice counts S allowed as in gemm_slices (whole
 * super-blocks per slice, at most GEMM_SPLIT_MAX and max_slices, planes within SMs x 128 KB),
 * the one with the least
 *   waves x (chunks per slice + G7_FILL) + (2 S + 1) planes' traffic + 1 (gemm_sum's launch)
 * in chunk times, counting traffic at the rate all SMs stream weights (SMs x one block's chunk
 * of weights per chunk time). A model, to be checked against forced splits on the GPU
 * (cfg.force_slices; kbench gemm v7split). */
#define G7_FILL 4

/* The planes' traffic in chunk times assumes a chunk time is the weights' memory time, true of the
 * small-n shapes; the 128 x 128 tile of n > 64 is bound by its dequantisation and MMAs instead:
 * 4096 x 4096 Q4_K at 256 tokens ran 68 chunk times in 49.6 us, 0.73 us each, about 4 times the
 * 0.17 us its weights take to stream (PERF-LOG run 93), so its planes cost a quarter as many chunk
 * times. cfg.plane_model 0 restores the one rate for every shape, for A/B runs. */
#define G7_TILE_COMPUTE 4

static int g7_slices(const cu_gemm_cfg *c, const g7_shape &sh, uint32_t wtype, int64_t rows, int64_t k, int64_t n, int max_slices, int *cps) {
    const int64_t C = mv2_chunks(k), groups = (C + 3) / 4;
    const int64_t tiles = ((rows + sh.brows - 1) / sh.brows) * ((n + sh.btoks - 1) / sh.btoks);
    *cps = (int)C;
    const int sms = split_sms();
    if (!sms) return 1; /* no device: no split */
    int64_t smax = (int64_t)sms * (128 << 10) / (n * rows * (int64_t)sizeof(float));
    if (smax > GEMM_SPLIT_MAX) smax = GEMM_SPLIT_MAX;
    if (smax > max_slices) smax = max_slices;
    if (smax > groups) smax = groups;
    if (smax < 2) return 1;
    const double chunk = (double)(sh.brows / 16) * (double)mv2_bytes((int)wtype, 16, 64);
    const double plane = (double)n * (double)rows * sizeof(float);
    const double plane_div = c->plane_model && sh.btoks == 128 ? G7_TILE_COMPUTE : 1;
    int64_t best_cs = C, lo = 1, hi = smax;
    if (c->force_slices > 0) lo = hi = c->force_slices < smax ? c->force_slices : smax;
    double best = -1;
    for (int64_t s = lo; s <= hi; s++) {
        const int64_t cs = 4 * ((groups + s - 1) / s), sl = (C + cs - 1) / cs; /* chunks per slice, slices */
        const int64_t waves = (tiles * sl + sms - 1) / sms;
        double cost = (double)waves * (double)((cs < C ? cs : C) + G7_FILL);
        if (sl > 1) cost += (double)(2 * sl + 1) * plane / ((double)sms * chunk) / plane_div + 1;
        if (best < 0 || cost < best) {
            best = cost;
            best_cs = cs;
        }
    }
    if (best_cs >= C) return 1;
    *cps = (int)best_cs;
    return (int)((C + best_cs - 1) / best_cs);
}

template <int T, int WR, int WC, int NW>
static cudaError_t g7_launch_k(dim3 grid, float *y, const uint8_t *w, const __half *x, int rows, int k, int n, int cps,
                               cudaStream_t s) {
    constexpr int smem = g7_smem<T, WR, WC, NW>();
    static_assert(smem <= 227 * 1024, "v7's ring must fit compute capability 9.0's opt-in shared memory");
    cudaError_t e = gp_prepare<gemm_v7<T, WR, WC, NW>>(smem);
    if (e != cudaSuccess) return e;
    return pdl_launch(gemm_v7<T, WR, WC, NW>, grid, dim3(G7_THREADS), smem, s, y, w, x, rows, k, n, cps);
}

template <int T>
static cudaError_t g7_launch_t(const g7_shape &sh, dim3 grid, float *y, const uint8_t *w, const __half *x, int rows,
                               int k, int n, int cps, cudaStream_t s) {
    if (sh.wc == 2) return g7_launch_k<T, 8, 2, 64>(grid, y, w, x, rows, k, n, cps, s);
    switch (sh.nw) {
    case 8: return g7_launch_k<T, 16, 1, 8>(grid, y, w, x, rows, k, n, cps, s);
    case 16: return g7_launch_k<T, 16, 1, 16>(grid, y, w, x, rows, k, n, cps, s);
    case 32: return g7_launch_k<T, 16, 1, 32>(grid, y, w, x, rows, k, n, cps, s);
    default: return g7_launch_k<T, 16, 1, 64>(grid, y, w, x, rows, k, n, cps, s);
    }
}

/* Token tiles along x (the blocks of one row block run side by side, so a second token tile
 * finds the weights in L2), row blocks along y, slices along z. */
static cudaError_t g7_launch(const g7_shape &sh, float *y, const uint8_t *w, uint32_t wtype, const __half *x, int rows,
                             int k, int n, int slices, int cps, cudaStream_t s) {
    const dim3 grid((unsigned)((n + sh.btoks - 1) / sh.btoks), (unsigned)((rows + sh.brows - 1) / sh.brows),
                    (unsigned)slices);
    switch (wtype) {
    case QUANT_Q4_0: return g7_launch_t<QUANT_Q4_0>(sh, grid, y, w, x, rows, k, n, cps, s);
    case QUANT_Q4_K: return g7_launch_t<QUANT_Q4_K>(sh, grid, y, w, x, rows, k, n, cps, s);
    case QUANT_Q5_K: return g7_launch_t<QUANT_Q5_K>(sh, grid, y, w, x, rows, k, n, cps, s);
    case QUANT_Q6_K: return g7_launch_t<QUANT_Q6_K>(sh, grid, y, w, x, rows, k, n, cps, s);
    default: return g7_launch_t<QUANT_Q8_0>(sh, grid, y, w, x, rows, k, n, cps, s);
    }
}

/* v7 runs on compute capability 9.0 (wgmma, the sm_90a cubin), with at most 65535 row blocks
 * and chunk offsets within 32 bits (the copy plan's steps: c times at most 1088 bytes). */
static bool g7_applies(uint32_t, int64_t rows, int64_t k) {
    return (rows + 127) / 128 <= 65535 && mv2_chunks(k) < (1 << 20) && wgmma_device();
}

static bool g7_one_pass(float *y, const uint8_t *w, uint32_t wtype, const __half *x, int rows, int k, int n,
                        cudaStream_t stream, cudaError_t *e) {
    if (!g7_applies(wtype, rows, k)) return false;
    *e = g7_launch(g7_shape_for(n), y, w, wtype, x, rows, k, n, 1, (int)mv2_chunks(k), stream);
    return true;
}

extern "C" size_t cu_gemm_scratch_bytes_with(const cu_gemm_cfg *c, int64_t rows, int64_t k, int n) {
    if (!c || rows <= 0 || k <= 0 || n <= 0 || rows > INT32_MAX || k > INT32_MAX) return 0;
    const int variant = c->variant;
    int cps;
    int s = gemm_slices(gemm_shape_of(variant, n), rows, k, n, GEMM_SPLIT_MAX, &cps);
    if (variant == 7) /* v7's split below the panel threshold (the types' splits differ), or v2's off sm_90 */
        for (uint32_t t : {QUANT_Q4_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q8_0}) {
            const int s7 = g7_slices(c, g7_shape_for(n), t, rows, k, n, GEMM_SPLIT_MAX, &cps);
            if (s7 > s) s = s7;
        }
    size_t need = s > 1 ? (size_t)s * (size_t)n * (size_t)rows * sizeof(float) : 0;
    gp_geom gm;
    if (gp_variant(variant) && n >= gp_min_n(c) && gp_geometry(rows, k, gp_limit(c), &gm)) {
        /* alignment, the panel, and room for split-K planes (a one-panel matrix, few tiles; no
         * device: no split) */
        size_t p = 1024 + gm.bytes;
        if (gm.nrp == 1 && gm.nkp == 1) p += (size_t)split_sms() * (128u << 10);
        if (p > need) need = p;
    }
    return need;
}

extern "C" size_t cu_gemm_f16_scratch_bytes(int64_t rows, int64_t k, int n) {
    return cu_gemm_scratch_bytes_with(&g_production, rows, k, n);
}

extern "C" cudaError_t cu_gemm_f16_dequant(const cu_gemm_cfg *c, void *scratch, size_t scratch_bytes, const void *w,
                                           uint32_t wtype, int64_t rows, int64_t k, cudaStream_t stream) {
    if (!c || !gemm_args_ok(wtype, rows, k, 1)) return cudaErrorInvalidValue;
    bool ran = false;
    cudaError_t e = gp_run(5, gp_limit(c), NULL, (const uint8_t *)w, wtype, NULL, (int)rows, (int)k, 1, scratch,
                           scratch_bytes, stream, false, &ran);
    return e != cudaSuccess ? e : ran ? cudaSuccess : cudaErrorInvalidValue;
}

extern "C" int cu_gemm_split_slices(const cu_gemm_cfg *c, uint32_t wtype, int64_t rows, int64_t k, int n,
                                    size_t scratch_bytes) {
    if (!c || !gemm_args_ok(wtype, rows, k, n)) return 1;
    const size_t fit = scratch_bytes / ((size_t)n * (size_t)rows * sizeof(float));
    const int max_slices = fit < GEMM_SPLIT_MAX ? (int)fit : GEMM_SPLIT_MAX;
    int cps;
    if (c->variant == 7 && g7_applies(wtype, rows, k))
        return g7_slices(c, g7_shape_for(n), wtype, rows, k, n, max_slices, &cps);
    return gemm_slices(gemm_shape_for(c, n), rows, k, n, max_slices, &cps);
}

/* Whether variant 7 takes the panel path for a call (from cfg.panel_min_n tokens). The panel path
 * pays, per call, a dequantising pass and its k panels (at most 4096 weights of k each) adding into
 * Y one after another, a cost that grows with k and that more tokens repay; v7 dequantises in
 * registers for every 128-token tile, dearer for Q6_K than for Q4_K and cheap for Q4_0 and Q8_0.
 * The kernel lab (kbench gemm choice on an H200, PERF-LOG runs 93 and 96: 45 shapes of the 1b, 8b and
 * 70b at 256 to 2048 tokens) put the break-even k near proportional to the tokens: the panel wins
 * where k <= base x n / 512, base 8192 for Q6_K, 4096 for Q4_K, 1024 for the others (measured
 * on Q4_0; Q8_0 taken with it); Q5_K 16384 (run 150, 10 of those shapes at 256 to 1024 tokens:
 * v7 decodes its records per chunk and a second stream of bits, and the panel won every 8b shape
 * from 512 tokens, 4096 x 14336 at 512 tokens 201 us against 229). At 512
 * tokens: Q4_K 5120 x 4096 86 us against v7's 96, Q4_K 8192 x 28672 798 against 621, Q6_K 9216 x
 * 8192 296 against 329, Q4_0 4096 x 14336 198 against 139; at 2048 tokens Q4_K 8192 x 28672 2316
 * against 2468. Under cfg.panel_rule 0, and for variants 4-6 (their checks and A/B runs), every
 * call from cfg.panel_min_n tokens takes it. */
static bool gp_wanted(const cu_gemm_cfg *c, uint32_t wtype, int64_t k, int n) {
    if (!gp_variant(c->variant) || n < gp_min_n(c)) return false;
    if (c->variant != 7 || !c->panel_rule) return true;
    const int64_t base = wtype == QUANT_Q5_K ? 16384 : wtype == QUANT_Q6_K ? 8192 : wtype == QUANT_Q4_K ? 4096 : 1024;
    return k * 512 <= base * (int64_t)n;
}

/* cu_gemm_f16_split; with parts non-null the planes of a split are left unsummed in scratch and
 * *parts says how many (1: y written). */
static cudaError_t split_run(const cu_gemm_cfg *c, float *y, const void *w, uint32_t wtype, const uint16_t *x,
                             int64_t rows, int64_t k, int n, void *scratch, size_t scratch_bytes, int *parts,
                             cudaStream_t stream) {
    if (parts) *parts = 1;
    if (c && gemm_gguf_takes(wtype)) {
        /* the panel path (each weight dequantised once, the wgmma GEMM) from its token counts and
         * where the scratch holds a panel; else gemm_gguf's own kernel, with no split (k is whole
         * blocks of the type, 32 weights or more) */
        if (gp_variant(c->variant) && n >= gp_min_n(c)) {
            bool ran = false;
            cudaError_t e = gp_run(c->variant, gp_limit(c), y, (const uint8_t *)w, wtype, (const __half *)x, (int)rows,
                                   (int)k, n, scratch, scratch_bytes, stream, true, &ran);
            if (e != cudaSuccess || ran) return e;
        }
        return gemm_gguf_run(y, w, wtype, x, rows, k, n, stream);
    }
    if (!c || !gemm_args_ok(wtype, rows, k, n)) return cudaErrorInvalidValue;
    const uint8_t *wb = (const uint8_t *)w;
    const __half *xh = (const __half *)x;
    if (gp_wanted(c, wtype, k, n)) {
        bool ran = false;
        cudaError_t e = gp_run(c->variant, gp_limit(c), y, wb, wtype, xh, (int)rows, (int)k, n, scratch, scratch_bytes,
                               stream, true, &ran);
        if (e != cudaSuccess || ran) return e;
    }
    const size_t plane = (size_t)n * (size_t)rows * sizeof(float);
    const size_t fit = scratch ? scratch_bytes / plane : 0;
    const int max_slices = fit < GEMM_SPLIT_MAX ? (int)fit : GEMM_SPLIT_MAX;
    float *part = (float *)scratch;
    int cps;
    cudaError_t e;
    if (c->variant == 7 && g7_applies(wtype, rows, k)) {
        const g7_shape sh = g7_shape_for(n);
        const int s = g7_slices(c, sh, wtype, rows, k, n, max_slices, &cps);
        if (s == 1) return g7_launch(sh, y, wb, wtype, xh, (int)rows, (int)k, n, 1, cps, stream);
        if ((e = g7_launch(sh, part, wb, wtype, xh, (int)rows, (int)k, n, s, cps, stream)) != cudaSuccess) return e;
        if (parts) {
            *parts = s;
            return cudaSuccess;
        }
        return gemm_sum_launch(y, part, s, (int64_t)n * rows, stream);
    }
    const gemm_shape sh = gemm_shape_for(c, n);
    const int s = gemm_slices(sh, rows, k, n, max_slices, &cps);
    if (s == 1) return gemm_launch(sh, y, wb, wtype, xh, (int)rows, (int)k, n, 1, cps, stream);
    if ((e = gemm_launch(sh, part, wb, wtype, xh, (int)rows, (int)k, n, s, cps, stream)) != cudaSuccess) return e;
    if (parts) {
        *parts = s;
        return cudaSuccess;
    }
    return gemm_sum_launch(y, part, s, (int64_t)n * rows, stream);
}

extern "C" cudaError_t cu_gemm_f16_split_with(const cu_gemm_cfg *c, float *y, const void *w, uint32_t wtype,
                                              const uint16_t *x, int64_t rows, int64_t k, int n, void *scratch,
                                              size_t scratch_bytes, cudaStream_t stream) {
    return split_run(c, y, w, wtype, x, rows, k, n, scratch, scratch_bytes, NULL, stream);
}

extern "C" cudaError_t cu_gemm_f16_split(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows,
                                      int64_t k, int n, void *scratch, size_t scratch_bytes, cudaStream_t stream) {
    return split_run(&g_production, y, w, wtype, x, rows, k, n, scratch, scratch_bytes, NULL, stream);
}

extern "C" cudaError_t cu_gemm_f16_split_parts(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows,
                                            int64_t k, int n, void *scratch, size_t scratch_bytes, int *parts,
                                            cudaStream_t stream) {
    if (!parts) return cudaErrorInvalidValue;
    return split_run(&g_production, y, w, wtype, x, rows, k, n, scratch, scratch_bytes, parts, stream);
}

extern "C" cudaError_t cu_gemm_f16_split_parts_with(const cu_gemm_cfg *c, float *y, const void *w, uint32_t wtype,
                                                    const uint16_t *x, int64_t rows, int64_t k, int n, void *scratch,
                                                    size_t scratch_bytes, int *parts, cudaStream_t stream) {
    if (!parts) return cudaErrorInvalidValue;
    return split_run(c, y, w, wtype, x, rows, k, n, scratch, scratch_bytes, parts, stream);
}
