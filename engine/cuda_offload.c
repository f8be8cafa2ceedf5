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
 * the link carries the other. Products come in the order of the spec's list (a layer's Q, K, V,
 * output, gate, up, down), so while the GPU computes one product (X over, the GEMM, Y back) the
 * threads already copy the next weight into a second slot on a second stream, and that product
 * finds it there; a product that was not foreseen (another order, a slot too few) is copied when
 * it comes. The compute stream is synchronised per product; the CPU stage calls from its own
 * thread, so every call selects the device first. */
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
    cudaStream_t st;       /* products */
    cudaStream_t up;       /* the next weight's copy and repack, beside a product */
    uint8_t *raw[2], *rep[2]; /* two slots: a weight as stored; repacked (slot 1 may be missing) */
    const llama_weight *held[2]; /* the weight slot i holds or is receiving; NULL */
    cudaEvent_t ready[2];  /* slot i's weight repacked */
    int n_slots;
    int fresh;             /* the slot the last copy beside a product went to; -1 */
    const llama_weight **order; /* the spec's list: the order products come in */
    int n_order;
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
    if (o->up) cudaStreamSynchronize(o->up);
    if (o->st) cudaStreamDestroy(o->st);
    if (o->up) cudaStreamDestroy(o->up);
    for (int i = 0; i < 2; i++) {
        cudaFree(o->raw[i]);
        cudaFree(o->rep[i]);
        if (o->ready[i]) cudaEventDestroy(o->ready[i]);
    }
    free(o->order);
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
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&o->up, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->raw[0], o->raw_cap);
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->rep[0], o->rep_cap);
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->x32, xb * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->x16, xb * sizeof(uint16_t));
    if (e == cudaSuccess) e = cudaMalloc((void **)&o->y, yb);
    for (int i = 0; i < 2 && e == cudaSuccess; i++) {
        e = cudaHostAlloc((void **)&o->stage[i], OFFLOAD_STAGE, cudaHostAllocPortable);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&o->ev[i], cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&o->ready[i], cudaEventDisableTiming);
    }
    if (e == cudaSuccess && !(o->order = malloc((size_t)n_w * sizeof *o->order))) e = cudaErrorMemoryAllocation;
    if (e != cudaSuccess) {
        snprintf(err, err_size, "device %d: %.0f MiB of buffers: %s", dev, (double)total / (1 << 20),
                 cudaGetErrorString(e));
        cudaGetLastError();
        fcu_offload_free(o);
        return NULL;
    }
    memcpy(o->order, w, (size_t)n_w * sizeof *o->order);
    o->n_order = n_w;
    o->n_slots = 1;
    o->fresh = -1;
    /* The second slot lets the next weight's copy run beside a product; without the room for it
     * every weight is copied when its product comes. */
    if (cudaMalloc((void **)&o->raw[1], o->raw_cap) == cudaSuccess &&
        cudaMalloc((void **)&o->rep[1], o->rep_cap) == cudaSuccess) {
        o->n_slots = 2;
        total += o->raw_cap + o->rep_cap;
    } else { /* half a slot is no use: give its memory back */
        cudaFree(o->raw[1]);
        o->raw[1] = NULL;
    }
    cudaGetLastError();
    if ((o->pinned = malloc((size_t)(sp->n_host + 1) * sizeof *o->pinned)))
        for (int i = 0; i < sp->n_host; i++) o->pinned_h += pin(o, sp->host[i], sp->host_bytes[i]);
    snprintf(desc, desc_size, "products of %d+ tokens on device %d (%d of %d matrices; %.0f MiB of device buffers%s, "
             "%.0f MiB of host buffers pinned)", ENGINE_OP_OFFLOAD_MIN_TOK, dev, taken, n_w, (double)total / (1 << 20),
             o->n_slots == 2 ? "" : ", no room to copy the next weight beside a product",
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

/* The weight's rows (rb bytes each) to dst through the staging buffers, on stream st. */
static cudaError_t upload(cuda_offload *o, uint8_t *dst, cudaStream_t st, const llama_weight *w, size_t rb,
                          const engine_par *par) {
    const int64_t per = (int64_t)(OFFLOAD_STAGE / rb);
    if (per < 1) /* a row past the staging buffer: the runtime's own pageable copy */
        return cudaMemcpy2DAsync(dst, rb, w->data, w->row_bytes, rb, (size_t)w->n_rows, cudaMemcpyHostToDevice, st);
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
        e = cudaMemcpyAsync(dst + (size_t)r0 * rb, o->stage[s], j.bytes, cudaMemcpyHostToDevice, st);
        if (e == cudaSuccess) e = cudaEventRecord(o->ev[s], st);
    }
    return e;
}

/* w copied and repacked into slot s on stream st, the slot marked ready when done. */
static cudaError_t fill_slot(cuda_offload *o, int s, cudaStream_t st, const llama_weight *w, size_t raw,
                             const engine_par *par) {
    o->held[s] = NULL;
    /* a copy into this slot still under way on the other stream finishes first (an event never
     * recorded counts as done) */
    cudaError_t e = cudaStreamWaitEvent(st, o->ready[s], 0);
    if (e == cudaSuccess) e = upload(o, o->raw[s], st, w, raw / (size_t)w->n_rows, par);
    if (e == cudaSuccess) e = cu_matvec_repack(o->rep[s], o->raw[s], w->type, w->n_rows, w->n_cols, st);
    if (e == cudaSuccess) e = cudaEventRecord(o->ready[s], st);
    if (e == cudaSuccess) o->held[s] = w;
    return e;
}

/* Whether slot capacity and the GEMM take w; its bytes as stored in *raw. */
static int fits(const cuda_offload *o, const llama_weight *w, size_t *raw) {
    size_t rep;
    return offload_takes(w, raw, &rep) && *raw <= o->raw_cap && rep <= o->rep_cap && w->n_cols <= o->max_cols &&
           w->n_rows <= o->max_rows;
}

/* The weight after w in the products' order; NULL at the end or for a weight not in it. */
static const llama_weight *next_of(const cuda_offload *o, const llama_weight *w) {
    for (int i = 0; i + 1 < o->n_order; i++)
        if (o->order[i] == w) return o->order[i + 1];
    return NULL;
}

int fcu_offload_matmul(void *self, const llama_weight *w, const float *x, int64_t n_tok, float *out,
                       const engine_par *par, char *err, size_t err_size) {
    cuda_offload *o = self;
    size_t raw;
    if (!fits(o, w, &raw)) return 1;
    const int64_t rows = w->n_rows, k = w->n_cols;
    cudaError_t e = cudaSetDevice(o->dev);
    /* w's slot: copied beside the product before, or now (into a slot no copy is filling) */
    int s = o->held[0] == w ? 0 : o->n_slots == 2 && o->held[1] == w ? 1 : -1;
    if (s < 0) {
        s = o->n_slots == 2 && o->fresh == 0 ? 1 : 0;
        if (e == cudaSuccess) e = fill_slot(o, s, o->st, w, raw, par);
    }
    o->fresh = -1;
    if (e == cudaSuccess) e = cudaStreamWaitEvent(o->st, o->ready[s], 0);
    for (int64_t t0 = 0; t0 < n_tok && e == cudaSuccess; t0 += o->chunk) {
        const int64_t nt = n_tok - t0 < o->chunk ? n_tok - t0 : o->chunk;
        e = cudaMemcpyAsync(o->x32, x + t0 * k, (size_t)(nt * k) * sizeof(float), cudaMemcpyHostToDevice, o->st);
        if (e == cudaSuccess) e = cu_f32_to_f16(o->x16, o->x32, nt * k, o->st);
        if (e == cudaSuccess) e = cu_gemm_f16(o->y, o->rep[s], w->type, o->x16, rows, k, nt, o->st);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(out + t0 * rows, o->y, (size_t)(nt * rows) * sizeof(float), cudaMemcpyDeviceToHost,
                                o->st);
    }
    /* the next weight into the other slot while the GPU runs this product */
    const llama_weight *nx = o->n_slots == 2 ? next_of(o, w) : NULL;
    size_t nraw;
    if (e == cudaSuccess && nx && nx != w && fits(o, nx, &nraw) && o->held[s ^ 1] != nx)
        if ((e = fill_slot(o, s ^ 1, o->up, nx, nraw, par)) == cudaSuccess) o->fresh = s ^ 1;
    cudaError_t sy = cudaStreamSynchronize(o->st);
    if (e == cudaSuccess) e = sy;
    if (e != cudaSuccess) {
        o->held[0] = o->held[1] = NULL; /* whatever was under way is not to be trusted */
        cudaStreamSynchronize(o->up);
        snprintf(err, err_size, "op offload of %s (%lld tokens) on device %d: %s; --no-op-offload computes it on the CPU",
                 w->name ? w->name : "a matrix", (long long)n_tok, o->dev, cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    return 0;
}
