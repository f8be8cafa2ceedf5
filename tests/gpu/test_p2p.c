/* kernels/p2p.h's all-reduce over peer access against the host's sum in rank order (bit for bit,
 * the same on every rank): several sizes up to P2P_MAX_FLOATS, calls back to back (the publish
 * buffers are double-buffered by call parity), a captured graph of several calls replayed, and a
 * rank whose peer never comes gives up after its timeout and says so. Needs 2 devices (or
 * MGI_VIRTUAL_DEVICES=2 and one): fewer is SKIP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include "tests/unit/test.h"
#include "tests/gpu/gen.h"
#include "engine/devices.h"
#include "kernels/p2p.h"

enum { MAXR = 4 };
static int R;
static int devs[MAXR];
static cudaStream_t st[MAXR];
static void *mem[MAXR];
static float *dx[MAXR];
static p2p_group grp;

static int cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 1;
    CHECK(0, what, "%s", cudaGetErrorString(e));
    return 0;
}

/* One call of count floats on every rank (x random, fresh), checked against the host sum. */
static int one_round(gen_rng *r, int64_t count, float *h[MAXR], float *ref, float *got) {
    for (int64_t i = 0; i < count; i++) ref[i] = 0.0f;
    for (int k = 0; k < R; k++) {
        for (int64_t i = 0; i < count; i++) h[k][i] = (float)gen_normal(r);
        for (int64_t i = 0; i < count; i++) ref[i] += h[k][i];
        cudaSetDevice(devs[k]);
        if (!cuda_ok(cudaMemcpy(dx[k], h[k], (size_t)count * sizeof(float), cudaMemcpyHostToDevice), "p2p upload"))
            return 0;
    }
    for (int k = 0; k < R; k++) {
        cudaSetDevice(devs[k]);
        if (!cuda_ok(p2p_allreduce(dx[k], count, &grp, k, 10, st[k]), "p2p_allreduce launch")) return 0;
    }
    int ok = 1;
    for (int k = 0; k < R; k++) {
        cudaSetDevice(devs[k]);
        if (!cuda_ok(cudaStreamSynchronize(st[k]), "p2p_allreduce")) return 0;
        cudaMemcpy(got, dx[k], (size_t)count * sizeof(float), cudaMemcpyDeviceToHost);
        if (memcmp(got, ref, (size_t)count * sizeof(float))) ok = 0;
    }
    return ok;
}

int main(void) {
    /* the engine's device list, so that MGI_VIRTUAL_DEVICES=N (engine/devices.h) puts the ranks on
     * the GPUs in turn and the ranks' protocol runs on one GPU too */
    char why[256];
    const int n = engine_device_count(why, sizeof why);
    if (n < 2) {
        SKIP("p2p all-reduce", n < 1 ? "no CUDA device" : "needs 2 CUDA devices (or MGI_VIRTUAL_DEVICES=2)");
        return 0;
    }
    R = n < MAXR ? n : MAXR;
    for (int k = 0; k < R; k++) devs[k] = engine_device_physical(k);
    cudaError_t e = p2p_enable(devs, R);
    if (e == cudaErrorPeerAccessUnsupported) {
        SKIP("p2p all-reduce", "no peer access between the devices");
        return 0;
    }
    if (!cuda_ok(e, "p2p_enable")) return test_done();
    grp.n_ranks = R;
    for (int k = 0; k < R; k++) {
        cudaSetDevice(devs[k]);
        if (!cuda_ok(cudaMalloc(&mem[k], p2p_rank_bytes()), "cudaMalloc") ||
            !cuda_ok(cudaMemset(mem[k], 0, p2p_rank_bytes()), "cudaMemset") ||
            !cuda_ok(cudaMalloc((void **)&dx[k], P2P_MAX_FLOATS * sizeof(float)), "cudaMalloc") ||
            !cuda_ok(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking), "stream"))
            return test_done();
        p2p_rank_init(&grp.r[k], mem[k]);
    }
    gen_rng r = {0x9292ull ^ (uint64_t)time(NULL)};
    float *h[MAXR], *ref = malloc(P2P_MAX_FLOATS * sizeof(float)), *got = malloc(P2P_MAX_FLOATS * sizeof(float));
    for (int k = 0; k < R; k++) h[k] = malloc(P2P_MAX_FLOATS * sizeof(float));
    char name[128];
    const int64_t counts[] = {1, 100, 2047, 2049, 4096, 8192, 4 * 8192, P2P_MAX_FLOATS - 3, P2P_MAX_FLOATS};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int ok = 1;
        for (int rep = 0; rep < 3 && ok; rep++) ok = one_round(&r, counts[c], h, ref, got);
        snprintf(name, sizeof name, "p2p all-reduce of %lld floats on %d devices, 3 calls", (long long)counts[c], R);
        CHECK(ok, name, "a rank's sum differs from the host's sum in rank order");
    }
    /* Calls back to back without the host in between: 7 on each stream, each adding the ranks' x;
     * after call j every rank holds R^j * (sum of the initial x) exactly while values stay small
     * integers. */
    {
        const int64_t count = 3000;
        for (int k = 0; k < R; k++) {
            for (int64_t i = 0; i < count; i++) h[k][i] = (float)(int)(gen_u64(&r) % 5) - 2.0f;
            cudaSetDevice(devs[k]);
            cudaMemcpy(dx[k], h[k], count * sizeof(float), cudaMemcpyHostToDevice);
        }
        int ok = 1;
        for (int j = 0; j < 7; j++)
            for (int k = 0; k < R; k++) {
                cudaSetDevice(devs[k]);
                ok &= cuda_ok(p2p_allreduce(dx[k], count, &grp, k, 10, st[k]), "p2p_allreduce launch");
            }
        double mult = 1;
        for (int j = 1; j < 7; j++) mult *= R;
        for (int k = 0; k < R && ok; k++) {
            cudaSetDevice(devs[k]);
            ok &= cuda_ok(cudaStreamSynchronize(st[k]), "p2p_allreduce");
            cudaMemcpy(got, dx[k], count * sizeof(float), cudaMemcpyDeviceToHost);
            for (int64_t i = 0; i < count && ok; i++) {
                double s = 0;
                for (int q = 0; q < R; q++) s += h[q][i];
                if ((double)got[i] != s * mult) ok = 0;
            }
        }
        snprintf(name, sizeof name, "p2p all-reduce: 7 calls back to back on %d devices", R);
        CHECK(ok, name, "wrong sums");
    }
    /* A graph of 5 calls per device, replayed 4 times. */
    {
        const int64_t count = 8192;
        cudaGraphExec_t ge[MAXR] = {0};
        int ok = 1;
        for (int k = 0; k < R && ok; k++) {
            for (int64_t i = 0; i < count; i++) h[k][i] = (float)(int)(gen_u64(&r) % 3) - 1.0f;
            cudaSetDevice(devs[k]);
            cudaMemcpy(dx[k], h[k], count * sizeof(float), cudaMemcpyHostToDevice);
            cudaGraph_t g;
            ok &= cuda_ok(cudaStreamBeginCapture(st[k], cudaStreamCaptureModeThreadLocal), "capture");
            for (int j = 0; j < 5; j++) p2p_allreduce(dx[k], count, &grp, k, 10, st[k]);
            ok &= cuda_ok(cudaStreamEndCapture(st[k], &g), "capture");
            ok &= ok && cuda_ok(cudaGraphInstantiate(&ge[k], g, 0), "instantiate");
            cudaGraphDestroy(g);
        }
        for (int rep = 0; rep < 4 && ok; rep++)
            for (int k = 0; k < R; k++) {
                cudaSetDevice(devs[k]);
                ok &= cuda_ok(cudaGraphLaunch(ge[k], st[k]), "graph launch");
            }
        /* 20 calls: R^20 overflows float's exact range for R > 2; compare to R^19 * sum with R = 2
         * exact, else to float math done the same way (sum of equal values in rank order) */
        for (int k = 0; k < R && ok; k++) {
            cudaSetDevice(devs[k]);
            ok &= cuda_ok(cudaStreamSynchronize(st[k]), "graph");
        }
        float *first = malloc(count * sizeof(float));
        for (int k = 0; k < R && ok; k++) {
            cudaSetDevice(devs[k]);
            cudaMemcpy(k ? got : first, dx[k], count * sizeof(float), cudaMemcpyDeviceToHost);
            if (k && memcmp(got, first, count * sizeof(float))) ok = 0;
        }
        for (int64_t i = 0; i < count && ok; i++) {
            float v = 0;
            for (int q = 0; q < R; q++) v += h[q][i];
            for (int j = 1; j < 20; j++) {
                float s = 0;
                for (int q = 0; q < R; q++) s += v;
                v = s;
            }
            if (v != first[i]) ok = 0;
        }
        free(first);
        for (int k = 0; k < R; k++) if (ge[k]) cudaGraphExecDestroy(ge[k]);
        snprintf(name, sizeof name, "p2p all-reduce: a graph of 5 calls replayed 4 times on %d devices", R);
        CHECK(ok, name, "wrong or differing sums");
    }
    /* A peer that never comes: rank 0 alone, 1 s timeout. */
    {
        cudaSetDevice(devs[0]);
        int flag = 0;
        cudaError_t le = p2p_allreduce(dx[0], 100, &grp, 0, 1, st[0]);
        cudaError_t se = le == cudaSuccess ? cudaStreamSynchronize(st[0]) : le;
        cudaMemcpy(&flag, grp.r[0].timed_out, sizeof flag, cudaMemcpyDeviceToHost);
        CHECK(se == cudaSuccess && flag == 1, "p2p all-reduce: a missing peer times out", "%s, timed_out %d",
              cudaGetErrorString(se), flag);
    }
    for (int k = 0; k < R; k++) {
        cudaSetDevice(devs[k]);
        cudaFree(mem[k]);
        cudaFree(dx[k]);
        cudaStreamDestroy(st[k]);
        free(h[k]);
    }
    free(ref);
    free(got);
    return test_done();
}
