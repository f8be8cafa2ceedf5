/* Prefill GEMM launchers (kernels.h: gemm_f16, gemm_f16_split) and the split-K heuristic;
 * kernels in gemm.cuh. */
#include "kernels/kernels.h"
#include "kernels/gemm.cuh"

/* The split aims at GEMM_SPLIT_WAVES blocks per SM (two resident blocks of 256 threads each fit
 * an SM, v1, v2 and v3 alike, so this fills it about twice over); slices are whole super-blocks of 4 chunks (256
 * weights: a Q4_K / Q6_K scale group), at most GEMM_SPLIT_MAX of them, since each slice adds an
 * [n][rows] f32 plane written and read back. */
#define GEMM_SPLIT_WAVES 2
#define GEMM_SPLIT_MAX 16

extern "C" int gemm_supported(uint32_t wtype) {
    return wtype == QUANT_Q4_0 || wtype == QUANT_Q4_K || wtype == QUANT_Q6_K || wtype == QUANT_Q8_0;
}

/* gemm_use_variant: 1, 2 (default) or 3, read by every launch. */
static int g_variant = 2;

extern "C" void gemm_use_variant(int v) { g_variant = v == 1 || v == 3 ? v : 2; }

/* The block tile (rows x tokens) a launch uses: v1 128 x 64; v2 and v3 (gemm.cuh) 128 x 128 for
 * n > 64, 256 x 64 for n <= 64 (every weight dequantised once per block and once per call). */
struct gemm_shape {
    int variant, wr, brows, btoks;
};

static gemm_shape gemm_shape_for(int64_t n) {
    if (g_variant == 1) return {1, 0, GEMM_ROWS, GEMM_TOKS};
    const int wr = n > 64 ? 4 : 8;
    return {g_variant, wr, gemm2_rows(wr), gemm2_toks(wr)};
}

static int gemm_args_ok(uint32_t wtype, int64_t rows, int64_t k, int64_t n) {
    return gemm_supported(wtype) && matvec_repacked_bytes(wtype, rows, k) != 0 && n > 0 && n <= INT32_MAX &&
           k % 8 == 0 && (n + GEMM_TOKS - 1) / GEMM_TOKS <= 65535;
}

/* Slices of the K loop for this shape on the current device (1: no split) and the chunks each
 * slice takes (*cps); with max_slices the count is cut to fit a smaller scratch buffer. Every
 * slice holds at least one chunk, and the planes never pass SMs x 128 KB (kernels.h's bound). */
static int gemm_slices(const gemm_shape &sh, int64_t rows, int64_t k, int64_t n, int max_slices, int *cps) {
    const int64_t C = mv2_chunks(k), groups = (C + 3) / 4;
    const int64_t tiles = ((rows + sh.brows - 1) / sh.brows) * ((n + sh.btoks - 1) / sh.btoks);
    *cps = (int)C;
    int sms = 0, smem_max = 0;
    if (!mv6_device(&sms, &smem_max) || sms <= 0) { /* cached per device: safe inside a capture */
        cudaGetLastError(); /* no device: no split, and no error left behind for the caller */
        return 1;
    }
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
    case QUANT_Q6_K: return gemm_launch_t<QUANT_Q6_K>(sh, grid, y, w, x, rows, k, n, cps, stream);
    default: return gemm_launch_t<QUANT_Q8_0>(sh, grid, y, w, x, rows, k, n, cps, stream);
    }
}

extern "C" cudaError_t gemm_f16(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows, int64_t k,
                                int64_t n, cudaStream_t stream) {
    if (!gemm_args_ok(wtype, rows, k, n)) return cudaErrorInvalidValue;
    return gemm_launch(gemm_shape_for(n), y, (const uint8_t *)w, wtype, (const __half *)x, (int)rows, (int)k, (int)n, 1,
                       (int)mv2_chunks(k), stream);
}

extern "C" size_t gemm_f16_scratch_bytes(int64_t rows, int64_t k, int n) {
    if (rows <= 0 || k <= 0 || n <= 0 || rows > INT32_MAX || k > INT32_MAX) return 0;
    int cps;
    const int s = gemm_slices(gemm_shape_for(n), rows, k, n, GEMM_SPLIT_MAX, &cps);
    return s > 1 ? (size_t)s * (size_t)n * (size_t)rows * sizeof(float) : 0;
}

extern "C" cudaError_t gemm_f16_split(float *y, const void *w, uint32_t wtype, const uint16_t *x, int64_t rows,
                                      int64_t k, int n, void *scratch, size_t scratch_bytes, cudaStream_t stream) {
    if (!gemm_args_ok(wtype, rows, k, n)) return cudaErrorInvalidValue;
    const size_t plane = (size_t)n * (size_t)rows * sizeof(float);
    const size_t fit = scratch ? scratch_bytes / plane : 0;
    int cps;
    const gemm_shape sh = gemm_shape_for(n);
    const int s = gemm_slices(sh, rows, k, n, fit < GEMM_SPLIT_MAX ? (int)fit : GEMM_SPLIT_MAX, &cps);
    const uint8_t *wb = (const uint8_t *)w;
    const __half *xh = (const __half *)x;
    if (s == 1) return gemm_launch(sh, y, wb, wtype, xh, (int)rows, (int)k, n, 1, cps, stream);
    float *part = (float *)scratch;
    cudaError_t e = gemm_launch(sh, part, wb, wtype, xh, (int)rows, (int)k, n, s, cps, stream);
    if (e != cudaSuccess) return e;
    const int64_t total = (int64_t)n * rows;
    int64_t blocks = (total + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    return pdl_launch(gemm_sum, dim3((unsigned)blocks), dim3(256), 0, stream, y, (const float *)part, s, total);
}
