/* Kernel lab, prototype (not in the engine): matvec "v14" for one token of Q4_0, a repacked layout
 * in which a lane owns whole (row, 32-weight block) pairs, against production v11 on the same
 * weights.
 *
 * Why (PERF-LOG runs 46, 52): v11's arithmetic is ~220 instructions per warp and 2 KB unit, and
 * the kernel streams within a few points of what its copy pattern allows with no arithmetic at
 * all; a unit's instructions are what is left to cut. In v10/v11's layout a lane holds 8 codes of
 * each of 4 (row, block) pairs per chunk, so every pair is scaled four times over (I2F, the f16
 * scale, d_w * d_x, the FFMA, per lane) and the rows' sums are only complete after shuffles. Here
 * lane L of a warp owns rows 4 (L / 8) .. + 3 of the unit's 16 and block L % 8 of its 8: its 16
 * bytes of a pair are the GGUF block's qs as they are (byte j: code j low, code j + 16 high),
 * X's 32 codes of the block serve its 4 rows, and a pair costs 8 LOP + 8 dp4a + SHF + IADD + I2F +
 * the scale's conversion + FMUL + FFMA (~22 instructions for 32 weights; v10 ~35).
 *   Unit (tile t, group g) of 16 rows x 256 columns: quants at unit * 2048 + i * 512 + 16 L (row
 *   4 (L / 8) + i of the tile, block 8 g + L % 8), then after all units the f16 scales at
 *   unit * 256 + 8 L + 2 i: the same bytes per unit as v10's layout, so v11's ring carries it.
 *   X per 32-value block b: the codes in order (d = max|x| / 127), the offsets -8 S_lo and
 *   -128 S_hi (S: sums of the codes 0..15 and 16..31) as dp4a's starting values, d. The high
 *   nibbles are taken in place (w & 0xF0F0F0F0 = 16 c, dp4a.u32.s32), so hi = 16 (sum c x - 8
 *   S_hi) and hi >> 4 is exact.
 * Grid as v11: one block of 16 warps per SM, the block's tiles contiguous, each warp a contiguous
 * run of units through a 4-slot cp.async ring; a warp's sums per tile go to shared memory and the
 * rows are added in warp order; or (NB 2, 3) v10's way, each warp's next NB units straight into
 * registers. Usage: mv14 (checks every form on every shape against a CPU reference, then times
 * them and v11 in chains of launches without PDL). */
#include <cmath>
#include <cstring>
#include <ctime>
#include <cstdio>
#include <cstdint>
#include <vector>
#include "kernels/kernels.h"
#include "tests/gpu/gen.h" /* quant.h, with C linkage */
#include "tests/kbench/lab.h"
#include "kernels/matvec.cuh" /* the ring copy, stream and shared loads and dp4a of v10/v11 */

enum { W = 16, S = 4, SLOT = 2304, COPIES = 16 };

/* Shared memory: the rings [W][S][SLOT], X codes [k / 32][32], offsets int2 [k / 32], d [k / 32],
 * partial sums [tiles][W][16]. */
static size_t v14_smem(int64_t k, int64_t tiles) {
    const int64_t nb = k / 32;
    return (size_t)W * S * SLOT + (size_t)nb * (32 + 8 + 4) + (size_t)tiles * W * 16 * 4;
}

/* NB = 0: the units through the cp.async ring; NB = 2 or 3: straight into registers, NB units in
 * flight per warp (the stream lab's plain loads: 86% of copy on 28672x4096 with no arithmetic). */
template <int NB>
__global__ void __launch_bounds__(W * 32, 1) v14_kernel(float *y, const uint8_t *wq, const float *x, int rows, int k) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int64_t R16 = rows / 16, ng = k / 256, nb = k / 32;
    const int64_t t0 = blockIdx.x * R16 / gridDim.x, t1 = (blockIdx.x + 1) * R16 / gridDim.x;
    const int nt = (int)(t1 - t0), units = nt * (int)ng;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, q = lane >> 3, bb = lane & 7;
    const int u0 = warp * units / W, u1 = (warp + 1) * units / W;
    int8_t *xc = (int8_t *)(smem + W * S * SLOT);
    int2 *xo = (int2 *)(xc + nb * 32);
    float *xd = (float *)(xo + nb), *red = xd + nb;
    const uint8_t *ws = wq + R16 * ng * 2048;
    const uint32_t ring = (uint32_t)__cvta_generic_to_shared(smem) + warp * S * SLOT;
    const int64_t gu0 = t0 * ng + u0; /* the warp's first unit, grid-wide */
    auto issue = [&](int j) { /* the warp's j-th unit into slot j % S */
        if (u0 + j < u1) {
            const int64_t u = gu0 + j;
            const uint32_t slot = ring + (j % S) * SLOT;
#pragma unroll
            for (int m = 0; m < 4; m++) mv11_cp16(slot + 512 * m + 16 * lane, wq + u * 2048 + 512 * m + 16 * lane);
            if (lane < 16) mv11_cp16(slot + 2048 + 16 * lane, ws + u * 256 + 16 * lane);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    uint4 rq[NB > 0 ? NB : 1][4];
    uint2 rs[NB > 0 ? NB : 1];
    auto load = [&](int j, int slot) { /* the warp's j-th unit into register slot `slot` */
        if (u0 + j < u1) {
            const int64_t u = gu0 + j;
#pragma unroll
            for (int m = 0; m < 4; m++) rq[slot][m] = mv_ld_stream((const uint4 *)(wq + u * 2048 + 512 * m + 16 * lane));
            rs[slot] = __ldg((const uint2 *)(ws + u * 256 + 8 * lane));
        }
    };
    if constexpr (NB == 0) {
        for (int j = 0; j < S; j++) issue(j);
    } else {
#pragma unroll
        for (int j = 0; j < NB; j++) load(j, j);
    }
    /* X: a thread per 32-value block */
    for (int64_t b = threadIdx.x; b < nb; b += blockDim.x) {
        float v[32], m = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 f = *(const float4 *)(x + b * 32 + 4 * i);
            v[4 * i] = f.x; v[4 * i + 1] = f.y; v[4 * i + 2] = f.z; v[4 * i + 3] = f.w;
        }
#pragma unroll
        for (int i = 0; i < 32; i++) m = fmaxf(m, fabsf(v[i]));
        const float inv = m > 0.0f ? 127.0f / m : 0.0f;
        int slo = 0, shi = 0;
        uint32_t wds[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t wd = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int c = __float2int_rn(v[4 * i + j] * inv);
                (i < 4 ? slo : shi) += c;
                wd |= (uint32_t)(uint8_t)c << (8 * j);
            }
            wds[i] = wd;
        }
        *(uint4 *)(xc + b * 32) = make_uint4(wds[0], wds[1], wds[2], wds[3]);
        *(uint4 *)(xc + b * 32 + 16) = make_uint4(wds[4], wds[5], wds[6], wds[7]);
        xo[b] = make_int2(-8 * slo, -128 * shi);
        xd[b] = m * (1.0f / 127.0f);
    }
    for (int i = threadIdx.x; i < nt * W * 16; i += blockDim.x) red[i] = 0.0f;
    __syncthreads();
    const uint32_t xcs = (uint32_t)__cvta_generic_to_shared(xc), xos = (uint32_t)__cvta_generic_to_shared(xo);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int ct = u0 / (int)ng, cg = u0 % (int)ng; /* tile (in the block) and group of the unit */
    auto flush = [&]() { /* the 8 lanes of a quad add their blocks; lane bb 0 writes the quad's rows */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float a = acc[i];
            a += __shfl_xor_sync(0xffffffffu, a, 1);
            a += __shfl_xor_sync(0xffffffffu, a, 2);
            a += __shfl_xor_sync(0xffffffffu, a, 4);
            if (bb == 0) red[(ct * W + warp) * 16 + 4 * q + i] = a;
            acc[i] = 0.0f;
        }
    };
    auto compute = [&](const uint4 (&wv)[4], const uint2 sc) {
        const int64_t b = (int64_t)cg * 8 + bb; /* the lane's block of X */
        const uint4 xa = mv10_ldq(xcs + (uint32_t)b * 32), xb = mv10_ldq(xcs + (uint32_t)b * 32 + 16);
        const uint2 o = mv10_ld<uint2>(xos + (uint32_t)b * 8);
        const float dx = xd[b];
        const uint32_t scw[2] = {sc.x, sc.y};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 w = wv[i];
            constexpr uint32_t LO = 0x0F0F0F0Fu, HI = 0xF0F0F0F0u;
            int lo = __dp4a((int)(w.x & LO), (int)xa.x, (int)o.x);
            lo = __dp4a((int)(w.y & LO), (int)xa.y, lo);
            lo = __dp4a((int)(w.z & LO), (int)xa.z, lo);
            lo = __dp4a((int)(w.w & LO), (int)xa.w, lo);
            int hi = mv10_dp4a_us(w.x & HI, xb.x, (int)o.y);
            hi = mv10_dp4a_us(w.y & HI, xb.y, hi);
            hi = mv10_dp4a_us(w.z & HI, xb.z, hi);
            hi = mv10_dp4a_us(w.w & HI, xb.w, hi);
            const uint32_t h2 = scw[i >> 1];
            const float dw = __half2float(__ushort_as_half((unsigned short)(i & 1 ? h2 >> 16 : h2 & 0xFFFFu)));
            acc[i] = fmaf(dw * dx, (float)(lo + (hi >> 4)), acc[i]);
        }
        if (++cg == ng) { flush(); cg = 0; ct++; }
    };
    if constexpr (NB == 0) {
        for (int u = u0; u < u1; u++) {
            asm volatile("cp.async.wait_group 3;" ::: "memory");
            __syncwarp();
            const uint32_t slot = ring + ((u - u0) % S) * SLOT;
            uint4 wv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) wv[i] = mv10_ldq(slot + 512 * i + 16 * lane);
            const uint2 sc = mv10_ld<uint2>(slot + 2048 + 8 * lane);
            __syncwarp(); /* the slot is read: its refill may overwrite it */
            issue(u - u0 + S);
            compute(wv, sc);
        }
    } else {
        for (int u = u0; u < u1; u += NB) {
#pragma unroll
            for (int j = 0; j < NB; j++) {
                if (u + j < u1) {
                    compute(rq[j], rs[j]);
                    load(u + j + NB - u0, j);
                }
            }
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    if (u0 < u1 && cg != 0) flush();
    __syncthreads();
    for (int i = threadIdx.x; i < nt * 16; i += blockDim.x) {
        const int tl = i >> 4, r = i & 15;
        float s = 0.0f;
        for (int wp = 0; wp < W; wp++) s += red[(tl * W + wp) * 16 + r];
        y[(t0 + tl) * 16 + r] = s;
    }
}

/* GGUF Q4_0 rows -> v14's layout (host). */
static void repack_v14(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t k) {
    const int64_t R16 = rows / 16, ng = k / 256, nbr = k / 32, rb = nbr * 18; /* bytes per GGUF row */
    uint8_t *ds = dst + R16 * ng * 2048;
    for (int64_t t = 0; t < R16; t++)
        for (int64_t g = 0; g < ng; g++) {
            const int64_t u = t * ng + g;
            for (int L = 0; L < 32; L++)
                for (int i = 0; i < 4; i++) {
                    const int64_t row = t * 16 + 4 * (L >> 3) + i, blk = g * 8 + (L & 7);
                    const uint8_t *bp = src + row * rb + blk * 18;
                    memcpy(dst + u * 2048 + 512 * i + 16 * L, bp + 2, 16);
                    memcpy(ds + u * 256 + 8 * L + 2 * i, bp, 2);
                }
        }
}

int main() {
    if (!lab_has_device("mv14")) return 0;
    lab L;
    const int sms = L.announce(true);
    printf("| rows x k (Q4_0) | MB | v14 ring: max err / budget, us, %% copy | v14, 2 units in registers | v14, 3 | v11 |\n"
           "|---|---|---|---|---|---|\n");
    kernels_use_pdl(0); /* both without PDL: the chain's launches one after another */
    gen_rng r = {0x14u ^ (uint64_t)time(NULL)};
    const int64_t shapes[][2] = {{28672, 4096}, {4096, 14336}, {6144, 4096}, {4096, 4096}, {1024, 256}, {48, 512}};
    bool all_ok = true;
    for (const auto &sh : shapes) {
        const int64_t rows = sh[0], k = sh[1], R16 = rows / 16;
        const size_t gbytes = (size_t)rows * (k / 32) * 18, vbytes = (size_t)R16 * (k / 256) * 2304;
        std::vector<uint8_t> g(gbytes), v(vbytes);
        gen_weights(&r, QUANT_Q4_0, rows, k, g.data());
        repack_v14(g.data(), v.data(), rows, k);
        std::vector<float> x(k), y(rows), wrow(k);
        for (int64_t i = 0; i < k; i++) x[i] = (float)(gen_normal(&r) * (i % 97 == 5 ? 20.0 : 1.0)); /* some outliers */
        /* CPU reference in double and the budget of X's int8 rounding: sum |w| max|x of the block| / 254 */
        std::vector<double> ref(rows), bud(rows);
        char err[128];
        for (int64_t rr = 0; rr < rows; rr++) {
            quant_dequant_row(QUANT_Q4_0, g.data() + rr * (k / 32) * 18, wrow.data(), k, err, sizeof err);
            double s = 0, bd = 0;
            for (int64_t b = 0; b < k / 32; b++) {
                double mx = 0;
                for (int j = 0; j < 32; j++) mx = fmax(mx, fabs((double)x[b * 32 + j]));
                for (int j = 0; j < 32; j++) {
                    s += (double)wrow[b * 32 + j] * x[b * 32 + j];
                    bd += fabs((double)wrow[b * 32 + j]) * mx / 254.0;
                }
            }
            ref[rr] = s;
            bud[rr] = bd + 1e-6 * fabs(s) + 1e-30;
        }
        const int grid = (int)(R16 < sms ? R16 : sms);
        const size_t smem = v14_smem(k, (R16 + grid - 1) / grid);
        for (auto kf : {v14_kernel<0>, v14_kernel<2>, v14_kernel<3>})
            CUDA_CHECK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        float *dx, *dy;
        CUDA_CHECK(cudaMalloc(&dx, k * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&dy, rows * sizeof(float)));
        CUDA_CHECK(cudaMemcpy(dx, x.data(), k * sizeof(float), cudaMemcpyHostToDevice));
        const int copies = rows * k >= (int64_t)4096 * 4096 ? COPIES : 1;
        std::vector<uint8_t *> w14(copies), w11(copies);
        uint8_t *graw;
        CUDA_CHECK(cudaMalloc(&graw, gbytes));
        CUDA_CHECK(cudaMemcpy(graw, g.data(), gbytes, cudaMemcpyHostToDevice));
        const size_t rbytes = cu_matvec_repacked_bytes(QUANT_Q4_0, rows, k);
        for (int c = 0; c < copies; c++) {
            CUDA_CHECK(cudaMalloc(&w14[c], vbytes));
            CUDA_CHECK(cudaMemcpy(w14[c], v.data(), vbytes, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMalloc(&w11[c], rbytes));
            CUDA_CHECK(cu_matvec_repack(w11[c], graw, QUANT_Q4_0, rows, k, 0));
        }
        CUDA_CHECK(cudaDeviceSynchronize());
        void (*forms[3])(float *, const uint8_t *, const float *, int, int) = {v14_kernel<0>, v14_kernel<2>, v14_kernel<3>};
        char cell[3][64];
        for (int f = 0; f < 3; f++) {
            CUDA_CHECK(cudaMemset(dy, 0xff, rows * sizeof(float)));
            forms[f]<<<grid, W * 32, smem>>>(dy, w14[0], dx, (int)rows, (int)k);
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaMemcpy(y.data(), dy, rows * sizeof(float), cudaMemcpyDeviceToHost));
            double worst = 0;
            for (int64_t rr = 0; rr < rows; rr++) {
                const double e = std::isfinite(y[rr]) ? fabs(y[rr] - ref[rr]) / bud[rr] : 1e30;
                worst = fmax(worst, e);
            }
            const bool ok = worst <= 1.0;
            all_ok = all_ok && ok;
            double us = 0;
            if (copies > 1)
                us = L.time_ms([&] { for (int c = 0; c < copies; c++) forms[f]<<<grid, W * 32, smem>>>(dy, w14[c], dx, (int)rows, (int)k); }, 5) * 1e3 / copies;
            snprintf(cell[f], sizeof cell[f], "%s %.3f, %.2f us, %.1f%%", ok ? "ok" : "FAIL", worst, us,
                     us > 0 ? 1e2 / L.copy_gbs * vbytes / (us * 1e3) : 0.0);
        }
        double us11 = 0;
        if (copies > 1) {
            us11 = L.time_ms([&] { for (int c = 0; c < copies; c++) CUDA_CHECK(cu_matvec_f32(dy, w11[c], QUANT_Q4_0, dx, rows, k, 1, 0)); }, 5) * 1e3 / copies;
        }
        printf("| %lldx%lld | %.1f | %s | %s | %s | %.2f us, %.1f%% |\n", (long long)rows, (long long)k, vbytes / 1e6, cell[0],
               cell[1], cell[2], us11, us11 > 0 ? 1e2 / L.copy_gbs * vbytes / (us11 * 1e3) : 0.0);
        fflush(stdout);
        for (int c = 0; c < copies; c++) {
            CUDA_CHECK(cudaFree(w14[c]));
            CUDA_CHECK(cudaFree(w11[c]));
        }
        CUDA_CHECK(cudaFree(graw));
        CUDA_CHECK(cudaFree(dx));
        CUDA_CHECK(cudaFree(dy));
    }
    kernels_use_pdl(1);
    printf("%s kbench mv14\n", all_ok ? "PASS" : "FAIL");
    return all_ok ? 0 : 1;
}
