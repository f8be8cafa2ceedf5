/* Op offload (engine.h's engine_gpu_backend.offload_*; llama.cpp's name): with -ngl partial, a
 * prompt's products with the CPU's layers' weights run on a GPU. A 70b layer's products for 128
 * tokens are ~220 GFLOP, seconds for a CPU, while its ~0.5 GB of weights cross PCIe in tens of
 * milliseconds; so each weight is copied over for its product (as stored, then repacked as at
 * load, cu_matvec_repack), X goes over in f32 and is rounded to f16 there, the GEMM of the
 * GPU's own prompt path runs (cu_gemm_f16), and Y comes back. Up to `chunk` tokens at a time,
 * so the device buffers stay small: the largest weight twice (as stored, repacked) plus X and
 * Y of one chunk. The copies are what it costs. The CPU's activation buffers are pinned
 * (cudaHostRegister) while it lives, so X and Y move at the link's speed. The weights come from
 * the file's mapping: copied from there as pageable memory they crossed at ~6 GB/s on an H200's
 * host (a 70b pass of 27 CPU layers: 13 GB, ~2.2 s), and pinning that read-only mapping
 * (cudaHostRegisterReadOnly) stalled for minutes there (and its page rounding would cover
 * neighbouring heap memory with --no-mmap). So each weight goes through two pinned staging
 * buffers: the CPU's threads, idle meanwhile (engine_par), copy the next piece into one while
 * the link carries the other. One stream of its own, synchronised per product; the CPU stage
 * calls from its own thread, so every call selects the device first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda_internal.h"
#include "quant/quant.h"

#define OFFLOAD_CHUNK 512      /* tokens per GEMM (the GPU prompt path's largest useful batch) */
#define OFFLOAD_STAGE (32 << 20) /* bytes of each pinned staging buffer */
#define OFFLOAD_PIECE (1 << 20)  /* bytes one thread copies at a time */

typedef struct {
    int dev;
    cudaStream_t st;
    uint8_t *raw, *rep;    /* a weight as stored; repacked */
    float *x32, *y;        /* [chunk][max_cols], [chunk][max_rows] */
    uint16_t *x16;         /* [chunk][max_cols] */
    size_t raw_cap, rep_cap;
    int64_t max_cols, max_rows, chunk;
    uint8_t *stage[2];     /* pinned staging for the weights (cudaHostAlloc) */
    cudaEvent_t ev[2];     /* the copy out of stage[i] is done */
    void **pinned;         /* host buffers registered, to unregister */
    int n_pinned;
    size_t pinned_h;       /* their bytes */
} cuda_offload;

/* Whether the GEMM takes w (type, whole blocks, sizes), and its bytes as stored and repacked. */
static int offload_takes(const llama_weight *w, size_t *raw, size_t *rep) {
    if (!w->data || !cu_gemm_supported(w->type) || w->n_rows <= 0 || w->n_cols <= 0) return 0;
    size_t rb = quant_row_bytes(w->type, w->n_cols);
    *rep = cu_matvec_repacked_bytes(w->type, w->n_rows, w->n_cols);
    if (!rb || !*rep || w->row_bytes < rb) return 0;
    *raw = rb * (size_t)w->n_rows;
    return 1;
}

/* Pins n bytes at a; the bytes pinned, 0 where refused (those copies stay pageable). */
static size_t pin(cuda_offload *o, void *a, size_t n) {
    if (!n || cudaHostRegister(a, n, cudaHostRegisterPortable) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    o->pinned[o->n_pinned++] = a;
    return n;
}

void fcu_offload_free(void *self) {
    cuda_offload *o = self;
    if (!o) return;
    cudaSetDevice(o->dev);
    if (o->st) cudaStreamDestroy(o->st);
    cudaFree(o->raw);
    cudaFree(o->rep);
    cudaFree(o->x32);
    cudaFree(o->x16);
    cudaFree(o->y);
    for (int i = 0; i < 2; i++) {
        if (o->ev[i]) cudaEventDestroy(o->ev[i]);
        cudaFreeHost(o->stage[i]);
    }
    for (int i = 0; i < o->n_pinned; i++) cudaHostUnregister(o->pinned[i]);
    cudaGetLastError();
    free(o->pinned);
    free(o);
}

void *fcu_offload_new(int dev, const engine_offload_spec *sp, char *desc, size_t desc_size, char *err,
                      size_t err_size) {
    const llama_weight *const *w = sp->w;
    const int n_w = sp->n_w;
    const int32_t max_tok = sp->max_tok;
    cuda_offload *o = calloc(1, sizeof *o);
    if (!o) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    o->dev = dev;
    int taken = 0;
    for (int i = 0; i < n_w; i++) {
        size_t raw, rep;
        if (!offload_takes(w[i], &raw, &rep)) continue;
        taken++;
        if (raw > o->raw_cap) o->raw_cap = raw;
        if (rep > o->rep_cap) o->rep_cap = rep;
        if (w[i]->n_cols > o->max_cols) o->max_cols = w[i]->n_cols;
        if (w[i]->n_rows > o->max_rows) o->max_rows = w[i]->n_rows;
    }
    if (!taken) {
        snprintf(err, err_size, "no matrix of the CPU's layers has a type the GPU's GEMM takes");
        free(o);
        return NULL;
    }
    o->chunk = max_tok < 1 ? 1 : max_tok < OFFLOAD_CHUNK ? max_tok : OFFLOAD_CHUNK;
    size_t xb = (size_t)o->chunk * (size_t)o->max_cols, yb = (size_t)o->chunk * (size_t)o->max_rows * sizeof(float);
    size_t total = o->raw_cap + o->rep_cap + xb * (sizeof(float) + sizeof(uint16_t)) + yb;
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&o->st, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->raw, o->raw_cap);
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->rep, o->rep_cap);
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->x32, xb * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->x16, xb * sizeof(uint16_t));
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->y, yb);
    for (int i = 0; i < 2 && e == cudaSuccess; i++) {
        e = cudaHostAlloc((void **)&o->stage[i], OFFLOAD_STAGE, cudaHostAllocPortable);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&o->ev[i], cudaEventDisableTiming);
    }
    if (e != cudaSuccess) {
        snprintf(err, err_size, "device %d: %.0f MiB of buffers: %s", dev, (double)total / (1 << 20),
                 cudaGetErrorString(e));
        cudaGetLastError();
        fcu_offload_free(o);
        return NULL;
    }
    if ((o->pinned = malloc((size_t)(sp->n_host + 1) * sizeof *o->pinned)))
        for (int i = 0; i < sp->n_host; i++) o->pinned_h += pin(o, sp->host[i], sp->host_bytes[i]);
    snprintf(desc, desc_size, "products of %d+ tokens on device %d (%d of %d matrices; %.0f MiB of device buffers, "
             "%.0f MiB of host buffers pinned)", ENGINE_OP_OFFLOAD_MIN_TOK, dev, taken, n_w, (double)total / (1 << 20),
             (double)(o->pinned_h + 2 * OFFLOAD_STAGE) / (1 << 20));
    return o;
}

/* Rows [r0, r0 + nr) of a weight into a staging buffer, back to back: pieces of the bytes (rows
 * stored back to back) or rows (padded ones), over the lent threads. */
typedef struct {
    uint8_t *dst;
    const uint8_t *src;
    size_t rb, stride, bytes;
    int64_t r0;
} stage_job;

static void stage_copy(void *arg, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const stage_job *j = arg;
    if (j->stride == j->rb) {
        const size_t a = (size_t)lo * OFFLOAD_PIECE, b = (size_t)hi * OFFLOAD_PIECE;
        memcpy(j->dst + a, j->src + (size_t)j->r0 * j->rb + a, (b < j->bytes ? b : j->bytes) - a);
    } else {
        for (int64_t r = lo; r < hi; r++) memcpy(j->dst + (size_t)r * j->rb, j->src + (size_t)(j->r0 + r) * j->stride, j->rb);
    }
}

/* The weight's rows (rb bytes each) to o->raw through the staging buffers. */
static cudaError_t upload(cuda_offload *o, const llama_weight *w, size_t rb, const engine_par *par) {
    const int64_t per = (int64_t)(OFFLOAD_STAGE / rb);
    if (per < 1) /* a row past the staging buffer: the runtime's own pageable copy */
        return cudaMemcpy2DAsync(o->raw, rb, w->data, w->row_bytes, rb, (size_t)w->n_rows, cudaMemcpyHostToDevice,
                                 o->st);
    cudaError_t e = cudaSuccess;
    int s = 0;
    for (int64_t r0 = 0; r0 < w->n_rows && e == cudaSuccess; r0 += per, s ^= 1) {
        const int64_t nr = w->n_rows - r0 < per ? w->n_rows - r0 : per;
        stage_job j = {o->stage[s], w->data, rb, w->row_bytes, (size_t)nr * rb, r0};
        e = cudaEventSynchronize(o->ev[s]); /* the link is done with this buffer's last piece */
        if (e != cudaSuccess) break;
        const int64_t items = rb == w->row_bytes ? (int64_t)((j.bytes + OFFLOAD_PIECE - 1) / OFFLOAD_PIECE) : nr;
        if (par) par->run(par->self, items, stage_copy, &j);
        else stage_copy(&j, 0, items, 0);
        e = cudaMemcpyAsync(o->raw + (size_t)r0 * rb, o->stage[s], j.bytes, cudaMemcpyHostToDevice, o->st);
        if (e == cudaSuccess) e = cudaEventRecord(o->ev[s], o->st);
    }
    return e;
}

int fcu_offload_matmul(void *self, const llama_weight *w, const float *x, int64_t n_tok, float *out,
                       const engine_par *par, char *err, size_t err_size) {
    cuda_offload *o = self;
    size_t raw, rep;
    if (!offload_takes(w, &raw, &rep) || raw > o->raw_cap || rep > o->rep_cap || w->n_cols > o->max_cols ||
        w->n_rows > o->max_rows)
        return 1;
    const int64_t rows = w->n_rows, k = w->n_cols;
    const size_t rb = raw / (size_t)rows;
    cudaError_t e = cudaSetDevice(o->dev);
    if (e == cudaSuccess) e = upload(o, w, rb, par);
    if (e == cudaSuccess) e = cu_matvec_repack(o->rep, o->raw, w->type, rows, k, o->st);
    for (int64_t t0 = 0; t0 < n_tok && e == cudaSuccess; t0 += o->chunk) {
        const int64_t nt = n_tok - t0 < o->chunk ? n_tok - t0 : o->chunk;
        e = cudaMemcpyAsync(o->x32, x + t0 * k, (size_t)(nt * k) * sizeof(float), cudaMemcpyHostToDevice, o->st);
        if (e == cudaSuccess) e = cu_f32_to_f16(o->x16, o->x32, nt * k, o->st);
        if (e == cudaSuccess) e = cu_gemm_f16(o->y, o->rep, w->type, o->x16, rows, k, nt, o->st);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(out + t0 * rows, o->y, (size_t)(nt * rows) * sizeof(float), cudaMemcpyDeviceToHost,
                                o->st);
    }
    cudaError_t s = cudaStreamSynchronize(o->st);
    if (e == cudaSuccess) e = s;
    if (e != cudaSuccess) {
        snprintf(err, err_size, "op offload of %s (%lld tokens) on device %d: %s; --no-op-offload computes it on the CPU",
                 w->name ? w->name : "a matrix", (long long)n_tok, o->dev, cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    return 0;
}
