/* The CUDA backend's communication (cuda_internal.h): NCCL's communicators and the watchdog that
 * ends a process stuck inside NCCL, the row split's all-reduce of xn (NCCL, peer access, or copies
 * and adds on one device for virtual devices), the layer split's sends of x, the wait for every
 * part with its timeout, fault injection (MGI_FAULT) and the split statistics' events. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/cuda_internal.h"
#include "quant/quant.h"

/* A pass of n tokens whose all-reduces run over peer access (see forward_cuda.p2p). */
int fcu_p2p_applies(const forward_cuda *f, int n) { return f->p2p && n <= f->p2p_max_tok; }

/* Part i's share of an all-reduce of xn over peer access (MGI_FAULT=nccl-peer-stall: the last
 * part never joins, so its peers time out as with NCCL). */
int fcu_p2p_xn(part *p, int i, int n, char *err, size_t err_size) {
    forward_cuda *f = p->f;
    if (f->fault_stall && i == f->n_part - 1) return 0;
    DEV_TRY(p2p_allreduce(p->xn, (int64_t)n * f->m->hp.n_embd, &f->p2pg, i, f->timeout_s, p->st));
    return 0;
}

/* With statistics on, an event on the part's stream: the start (even count) or end of a span. */
void fcu_mark(part *p, int nccl) {
    if (!p->f->prof || p->n_ev >= p->ev_cap) return;
    if (!(p->n_ev & 1)) p->ev_nccl[p->n_ev / 2] = (char)nccl;
    cudaEventRecord(p->ev[p->n_ev++], p->st);
}

/* After a pass with statistics: adds each part's span times to its sums. */
void fcu_tally(forward_cuda *f) {
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        cudaSetDevice(p->dev);
        for (int e = 0; e + 1 < p->n_ev; e += 2) {
            float ms = 0;
            if (cudaEventElapsedTime(&ms, p->ev[e], p->ev[e + 1]) != cudaSuccess) continue;
            if (p->ev_nccl[e / 2]) p->nccl_ms += ms;
            else p->busy_ms += ms;
        }
        p->n_ev = 0;
    }
}

/* Seconds a multi-device pass may go without finishing: NCCL_TIMEOUT_S, or MGI_NCCL_TIMEOUT
 * (1-3600) for users whose steps are legitimately slower and for the fault test. */
int fcu_nccl_timeout_s(void) {
    const char *e = getenv("MGI_NCCL_TIMEOUT");
    long v = e ? strtol(e, NULL, 10) : 0;
    return v >= 1 && v <= 3600 ? (int)v : NCCL_TIMEOUT_S;
}

/* A host thread blocked inside NCCL cannot be timed out by polling: NCCL makes its connections
 * on a pair of devices' first call, inside ncclGroupEnd, and waits there for a peer that may never
 * come (seen on an H200 pair: accept() under the first all-reduce). So every NCCL call is
 * bracketed by nccl_enter / nccl_leave, and a watchdog thread (one per process, started with the
 * first multi-device backend) ends the process with the error line and exit 3 (the CLI's runtime
 * failure) when one has not returned within the timeout. Calls come from one thread at a time. */
static struct {
    int64_t since_ns;   /* 0: no NCCL call in progress */
    int timeout_s, dev;
    const char *what;
    char dev_name[128];
} g_nccl;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void nccl_enter(forward_cuda *f, int part_i, const char *what) {
    part *p = &f->p[part_i];
    g_nccl.timeout_s = f->timeout_s;
    g_nccl.dev = p->dev;
    g_nccl.what = what;
    snprintf(g_nccl.dev_name, sizeof g_nccl.dev_name, "%s", p->dev_name);
    __atomic_store_n(&g_nccl.since_ns, mono_ns(), __ATOMIC_RELEASE);
}

static void nccl_leave(void) { __atomic_store_n(&g_nccl.since_ns, 0, __ATOMIC_RELEASE); }

static void *nccl_watchdog(void *arg) {
    (void)arg;
    for (;;) {
        usleep(100000);
        int64_t t = __atomic_load_n(&g_nccl.since_ns, __ATOMIC_ACQUIRE);
        if (t && mono_ns() - t > (int64_t)g_nccl.timeout_s * 1000000000) {
            fprintf(stderr, "mgi: device %d (%s): NCCL %s made no progress for %d s (a peer device stopped "
                    "answering)\n", g_nccl.dev, g_nccl.dev_name, g_nccl.what, g_nccl.timeout_s);
            fflush(stderr);
            _exit(3);
        }
    }
    return NULL;
}

static pthread_once_t g_nccl_once = PTHREAD_ONCE_INIT;
static void nccl_watchdog_spawn(void) {
    pthread_t t;
    if (!pthread_create(&t, NULL, nccl_watchdog, NULL)) pthread_detach(t);
}
void fcu_nccl_watchdog_start(void) { pthread_once(&g_nccl_once, nccl_watchdog_spawn); }

/* MGI_FAULT=nccl-peer-stall (tests/gpu/cli.sh): the last device never joins the all-reduces and
 * the first sends of the hidden state are never made, as if that peer had died, so the timeout
 * path of fcu_wait_all is exercised for real. */
int fcu_fault_peer_stall(void) {
    const char *e = getenv("MGI_FAULT");
    return e && !strcmp(e, "nccl-peer-stall");
}

/* fcu_allreduce_xn on one physical device (forward_cuda.local): part 0 waits for every part, sums
 * their xn in part order, every other part waits for the sum and copies it, and part 0 goes on
 * once they have, so all parts hold the same bits, as after NCCL's all-reduce. */
static int local_allreduce(forward_cuda *f, size_t count, char *err, size_t err_size) {
    part *r = &f->p[0];
    DEV_TRY(cudaSetDevice(r->dev));
    for (int i = 1; i < f->n_part; i++) {
        DEV_TRY(cudaEventRecord(f->p[i].ev_local, f->p[i].st));
        DEV_TRY(cudaStreamWaitEvent(r->st, f->p[i].ev_local, 0));
    }
    for (int i = 1; i < f->n_part; i++) DEV_TRY(cu_add(r->xn, r->xn, f->p[i].xn, (int64_t)count, r->st));
    DEV_TRY(cudaEventRecord(r->ev_local, r->st));
    for (int i = 1; i < f->n_part; i++) {
        DEV_TRY(cudaStreamWaitEvent(f->p[i].st, r->ev_local, 0));
        DEV_TRY(cudaMemcpyAsync(f->p[i].xn, r->xn, count * sizeof(float), cudaMemcpyDeviceToDevice, f->p[i].st));
        DEV_TRY(cudaEventRecord(f->p[i].ev_local, f->p[i].st));
    }
    /* part 0 overwrites its xn in its next layer: not before every part has its copy */
    for (int i = 1; i < f->n_part; i++) DEV_TRY(cudaStreamWaitEvent(r->st, f->p[i].ev_local, 0));
    return 0;
}

/* Every part's xn summed over the parts, in place (row split). */
int fcu_allreduce_xn(forward_cuda *f, int n, char *err, size_t err_size) {
    size_t count = (size_t)n * (size_t)f->m->hp.n_embd;
    for (int i = 0; i < f->n_part; i++) fcu_mark(&f->p[i], 1);
    if (f->local) {
        if (local_allreduce(f, count, err, err_size)) return -1;
        for (int i = 0; i < f->n_part; i++) fcu_mark(&f->p[i], 1);
        return 0;
    }
    if (fcu_p2p_applies(f, n)) {
        for (int i = 0; i < f->n_part; i++) {
            DEV_TRY(cudaSetDevice(f->p[i].dev));
            if (fcu_p2p_xn(&f->p[i], i, n, err, err_size)) return -1;
            fcu_mark(&f->p[i], 1);
        }
        return 0;
    }
    NC_TRY(ncclGroupStart());
    for (int i = 0; i < f->n_part - f->fault_stall; i++) {
        part *p = &f->p[i];
        ncclResult_t r = ncclAllReduce(p->xn, p->xn, count, ncclFloat, ncclSum, p->comm, p->st);
        if (r != ncclSuccess) {
            ncclGroupEnd();
            snprintf(err, err_size, "NCCL all-reduce on device %d (%s): %s", p->dev, p->dev_name,
                     ncclGetErrorString(r));
            return -1;
        }
    }
    nccl_enter(f, 0, "all-reduce");
    ncclResult_t ge = ncclGroupEnd();
    nccl_leave();
    if (ge != ncclSuccess) {
        snprintf(err, err_size, "NCCL all-reduce on %d devices: %s", f->n_part, ncclGetErrorString(ge));
        return -1;
    }
    for (int i = 0; i < f->n_part; i++) fcu_mark(&f->p[i], 1);
    return 0;
}

/* x rows of span s from part i - 1 to part i (layer split). */
int fcu_send_x(forward_cuda *f, int i, span s, char *err, size_t err_size) {
    size_t E = (size_t)f->m->hp.n_embd, off = (size_t)s.t0 * E, count = (size_t)s.nt * E;
    part *a = &f->p[i - 1], *b = &f->p[i];
    fcu_mark(a, 1);
    if (f->local) {
        /* a copy on b's receiving stream once a has written x; a's stream waits for the copy
         * before it overwrites x, as an NCCL send holds it */
        DEV_TRY(cudaSetDevice(a->dev));
        DEV_TRY(cudaEventRecord(a->ev_local, a->st));
        DEV_TRY(cudaStreamWaitEvent(b->st_rx, a->ev_local, 0));
        DEV_TRY(cudaMemcpyAsync(b->x + off, a->x + off, count * sizeof(float), cudaMemcpyDeviceToDevice, b->st_rx));
        DEV_TRY(cudaEventRecord(b->ev_rx, b->st_rx));
        DEV_TRY(cudaStreamWaitEvent(a->st, b->ev_rx, 0));
        DEV_TRY(cudaStreamWaitEvent(b->st, b->ev_rx, 0));
        fcu_mark(a, 1);
        return 0;
    }
    NC_TRY(ncclGroupStart());
    ncclResult_t r1 = f->fault_stall ? ncclSuccess : ncclSend(a->x + off, count, ncclFloat, i, a->comm, a->st);
    ncclResult_t r2 = ncclRecv(b->x + off, count, ncclFloat, i - 1, b->comm, b->st_rx);
    nccl_enter(f, i, "receive");
    ncclResult_t r3 = ncclGroupEnd();
    nccl_leave();
    if (r1 != ncclSuccess || r2 != ncclSuccess || r3 != ncclSuccess) {
        ncclResult_t r = r1 != ncclSuccess ? r1 : r2 != ncclSuccess ? r2 : r3;
        snprintf(err, err_size, "NCCL send from device %d to device %d: %s", a->dev, b->dev, ncclGetErrorString(r));
        return -1;
    }
    fcu_mark(a, 1);
    DEV_TRY(cudaSetDevice(b->dev));
    DEV_TRY(cudaEventRecord(b->ev_rx, b->st_rx));
    DEV_TRY(cudaStreamWaitEvent(b->st, b->ev_rx, 0));
    return 0;
}

/* After a failure: the communicators aborted (NCCL stops its kernels and threads), the backend
 * marked broken so it refuses further work and its teardown skips waiting on the devices. */
void fcu_abort_comms(forward_cuda *f) {
    f->broken = 1;
    if (!f->have_comms) return;
    nccl_enter(f, f->n_part - 1, "abort");
    for (int i = 0; i < f->n_part; i++) ncclCommAbort(f->p[i].comm);
    nccl_leave();
    f->have_comms = 0;
}

double fcu_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for every part's stream. With several parts, polls so that an NCCL error reported
 * asynchronously, or a peer that never answers (NCCL_TIMEOUT_S), ends the wait with a message
 * instead of a hang; the communicators are then aborted and the backend refuses further work. */
int fcu_wait_all(forward_cuda *f, char *err, size_t err_size) {
    if (f->n_part == 1) {
        DEV_TRY(cudaSetDevice(f->p[0].dev));
        DEV_TRY(cudaStreamSynchronize(f->p[0].st));
        return 0;
    }
    double t_end = fcu_now_s() + f->timeout_s;
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        DEV_TRY(cudaSetDevice(p->dev));
        for (unsigned spin = 0;; spin++) {
            cudaError_t q = cudaStreamQuery(p->st);
            if (q == cudaSuccess) break;
            if (q != cudaErrorNotReady) {
                snprintf(err, err_size, "device %d (%s): %s", p->dev, p->dev_name, cudaGetErrorString(q));
                fcu_abort_comms(f);
                return -1;
            }
            if (spin % 1024) continue;
            for (int j = 0; f->have_comms && j < f->n_part; j++) {
                ncclResult_t ae = ncclSuccess;
                if (ncclCommGetAsyncError(f->p[j].comm, &ae) != ncclSuccess || ae != ncclSuccess) {
                    snprintf(err, err_size, "NCCL failed on device %d (%s): %s", f->p[j].dev, f->p[j].dev_name,
                             ncclGetErrorString(ae));
                    fcu_abort_comms(f);
                    return -1;
                }
            }
            if (fcu_now_s() > t_end) {
                snprintf(err, err_size, "device %d (%s): no progress for %d s (a peer device stopped answering)",
                         p->dev, p->dev_name, f->timeout_s);
                fcu_abort_comms(f);
                return -1;
            }
        }
    }
    /* a peer-access all-reduce that gave up on its peers (its kernel ended; the sums are wrong) */
    for (int i = 0; f->p2p && i < f->n_part; i++)
        if (f->p2p_report[i]) {
            snprintf(err, err_size, "device %d (%s): no progress for %d s in an all-reduce (a peer device stopped "
                     "answering)", f->p[i].dev, f->p[i].dev_name, f->timeout_s);
            fcu_abort_comms(f);
            return -1;
        }
    return 0;
}

/* The row split's all-reduce over peer access (forward_cuda.p2p), with MGI_P2P=1 and peer access
 * between every pair of devices; otherwise NCCL does every all-reduce. Opt-in until it has run on
 * two GPUs (it was written without a two-GPU machine: tests/gpu/test_p2p.c and
 * test_split with MGI_P2P=1 are its first checks). */
int fcu_setup_p2p(forward_cuda *f, char *err, size_t err_size) {
    const char *e = getenv("MGI_P2P");
    if (!e || strcmp(e, "1")) return 0;
    int devs[ENGINE_MAX_DEVICES];
    for (int i = 0; i < f->n_part; i++) devs[i] = f->p[i].dev;
    if (f->n_part > P2P_MAX_RANKS || p2p_enable(devs, f->n_part) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    for (int i = 0; i < f->n_part; i++) {
        part *p = &f->p[i];
        DEV_TRY(cudaSetDevice(p->dev));
        DEV_TRY(cudaMalloc(&p->p2p_mem, p2p_rank_bytes()));
        DEV_TRY(cudaMemset(p->p2p_mem, 0, p2p_rank_bytes()));
        p2p_rank_init(&f->p2pg.r[i], p->p2p_mem);
    }
    for (int i = 0; i < f->n_part; i++) {
        DEV_TRY(cudaSetDevice(f->p[i].dev));
        DEV_TRY(cudaDeviceSynchronize()); /* the zeroed counters in place before any call */
    }
    /* a rank that gave up waiting says so in host memory, read after every wait (fcu_wait_all) */
    DEV_TRY(cudaHostAlloc((void **)&f->p2p_report, sizeof(int) * (size_t)f->n_part,
                          cudaHostAllocPortable | cudaHostAllocMapped));
    for (int i = 0; i < f->n_part; i++) {
        f->p2p_report[i] = 0;
        f->p2pg.r[i].report = (int *)(f->p2p_report + i); /* the same address on the devices (UVA) */
    }
    f->p2pg.n_ranks = f->n_part;
    int max_tok = (int)(P2P_MAX_FLOATS / f->m->hp.n_embd);
    f->p2p_max_tok = max_tok < GRAPH_MAX_TOK ? max_tok : GRAPH_MAX_TOK;
    f->p2p = f->p2p_max_tok >= 1;
    return 0;
}

void *fcu_nccl_main(void *arg) {
    fcu_nccl_job *j = arg;
    j->rc = ncclCommInitAll(j->comms, j->n, j->devs);
    return NULL;
}
