/* models/ (the llama architecture) on small files written with the gguf writer: a good model
 * loads (tied output too) and evaluates the same on any thread count; each malformed variant is
 * refused with a message naming the tensor or key at fault. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/forward_cpu.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "quant/quant.h"
#include "test.h"

enum { EMBD = 8, HEADS = 2, HEADS_KV = 1, FF = 16, VOCAB = 12, CTX = 16 };

/* What to break in the written model. */
typedef struct {
    const char *arch;        /* general.architecture */
    uint32_t n_head, n_head_kv;
    const char *omit;        /* tensor left out */
    const char *reshape;     /* tensor written one row short */
    const char *nan_in;      /* tensor with a NaN */
    const char *omit_key;    /* key left out */
    const char *as_i32;      /* tensor written as I32, a type mgi does not compute with */
    int no_tensors;          /* vocabulary-only */
    int tied;                /* no output.weight */
} variant;

static char dir[64];

static float lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void add(gguf_writer *w, const variant *v, const char *name, int64_t ne0, int64_t ne1, uint32_t *seed,
                int is_norm) {
    if (v->no_tensors || (v->omit && !strcmp(v->omit, name))) return;
    if (v->reshape && !strcmp(v->reshape, name)) ne1 > 1 ? ne1-- : ne0--;
    int64_t n = ne0 * ne1;
    float *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = is_norm ? 1.0f + 0.1f * lcg(seed) : lcg(seed);
    if (v->nan_in && !strcmp(v->nan_in, name)) d[n / 2] = NAN;
    int64_t ne[2] = {ne0, ne1};
    char err[256];
    uint32_t type = v->as_i32 && !strcmp(v->as_i32, name) ? QUANT_I32 : QUANT_F32;
    if (gguf_writer_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, d, NULL, NULL, err, sizeof err))
        printf("FAIL writer: %s\n", err);
    free(d);
}

static const char *write_model(const char *file, const variant *v) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", v->arch ? v->arch : "llama");
#define KEY(k, val) if (!v->omit_key || strcmp(v->omit_key, k)) gguf_writer_set_u32(w, k, val)
    KEY("llama.embedding_length", EMBD);
    KEY("llama.block_count", 1);
    KEY("llama.attention.head_count", v->n_head ? v->n_head : HEADS);
    KEY("llama.attention.head_count_kv", v->n_head_kv ? v->n_head_kv : HEADS_KV);
    KEY("llama.feed_forward_length", FF);
    KEY("llama.context_length", CTX);
#undef KEY
    gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    uint32_t seed = 1;
    int64_t hd = EMBD / HEADS;
    add(w, v, "token_embd.weight", EMBD, VOCAB, &seed, 0);
    add(w, v, "output_norm.weight", EMBD, 1, &seed, 1);
    if (!v->tied) add(w, v, "output.weight", EMBD, VOCAB, &seed, 0);
    add(w, v, "blk.0.attn_norm.weight", EMBD, 1, &seed, 1);
    add(w, v, "blk.0.attn_q.weight", EMBD, EMBD, &seed, 0);
    add(w, v, "blk.0.attn_k.weight", EMBD, HEADS_KV * hd, &seed, 0);
    add(w, v, "blk.0.attn_v.weight", EMBD, HEADS_KV * hd, &seed, 0);
    add(w, v, "blk.0.attn_output.weight", EMBD, EMBD, &seed, 0);
    add(w, v, "blk.0.ffn_norm.weight", EMBD, 1, &seed, 1);
    add(w, v, "blk.0.ffn_gate.weight", EMBD, FF, &seed, 0);
    add(w, v, "blk.0.ffn_up.weight", EMBD, FF, &seed, 0);
    add(w, v, "blk.0.ffn_down.weight", FF, EMBD, &seed, 0);
    char err[256];
    if (gguf_writer_write(w, path, err, sizeof err)) printf("FAIL writer: %s\n", err);
    gguf_writer_free(w);
    return path;
}

/* Tokens [0, n) at positions pos.. of one sequence through the backend contract (one page, cell =
 * position), in passes of nb tokens; logits of every token when all, else of the last. */
static int eval_seq(forward_cpu *f, int32_t nb, const int32_t *toks, int32_t n, int32_t pos, float *logits,
                    int all, char *err, size_t err_size) {
    int32_t page = 0, p[CTX + 1], seq[CTX + 1], out[CTX + 1];
    for (int32_t done = 0; done < n;) {
        int32_t k = n - done < nb ? n - done : nb, rows = 0;
        for (int32_t i = 0; i < k; i++) {
            p[i] = pos + done + i;
            seq[i] = 0;
            out[i] = all || done + i == n - 1 ? rows++ : -1;
        }
        engine_fwd_seq s = {&page, 1, p[k - 1] + 1};
        engine_fwd_batch b = {.n_tokens = k, .token = toks + done, .pos = p, .seq = seq, .cell = p,
                              .out_row = out, .n_out = rows, .n_seqs = 1, .seqs = &s, .max_pos = s.n_pos};
        if (forward_cpu_ops.forward(f, &b, all ? logits + done * VOCAB : logits, err, err_size)) return -1;
        done += k;
    }
    return 0;
}

/* Loads a variant; returns 0 on success, else -1 with the message in err. */
static int load(const char *file, const variant *v, llama_model *m, gguf_ctx **g, char *err, size_t n) {
    *g = gguf_open(write_model(file, v), 1, err, n);
    if (!*g) return -2;
    int rc = llama_model_load(m, *g, err, n);
    if (rc) {
        gguf_close(*g);
        *g = NULL;
    }
    return rc;
}

static void expect_refused(const char *name, const char *file, variant v, const char *needle) {
    llama_model m;
    gguf_ctx *g;
    char err[512] = "";
    int rc = load(file, &v, &m, &g, err, sizeof err);
    char test[1024];
    snprintf(test, sizeof test, "llama refuses %s (%s)", name, err);
    CHECK(rc == -1 && strstr(err, needle), test, "rc %d, message lacks '%s'", rc, needle);
    if (!rc) {
        llama_model_free(&m);
        gguf_close(g);
    }
}

static void test_good(void) {
    llama_model m;
    gguf_ctx *g;
    char err[512];
    variant v = {0};
    int ok = CHECK(load("good.gguf", &v, &m, &g, err, sizeof err) == 0, "llama loads a good model", "%s", err);
    if (!ok) return;
    CHECK(m.hp.n_vocab == VOCAB && m.hp.n_embd == EMBD && m.hp.n_head_kv == HEADS_KV && m.hp.head_dim == EMBD / HEADS &&
              m.hp.n_rot == EMBD / HEADS && m.hp.rope_base == 10000.0f && !m.tied_output,
          "llama hparams and defaults", "vocab %d embd %d kv %d rot %d base %g", m.hp.n_vocab, m.hp.n_embd,
          m.hp.n_head_kv, m.hp.n_rot, m.hp.rope_base);

    /* Same logits on 1 and 3 threads, with the prompt in batches of 3 or at once. */
    int32_t toks[10] = {1, 5, 7, 2, 11, 0, 3, 3, 9, 4};
    float a[10 * VOCAB], b[10 * VOCAB];
    forward_cpu *f1 = forward_cpu_new(&m, 0, 1, CTX, 3, CTX, 1, err, sizeof err);
    forward_cpu *f3 = forward_cpu_new(&m, 0, 1, CTX, 16, CTX, 3, err, sizeof err);
    int rc = f1 && f3 ? eval_seq(f1, 3, toks, 10, 0, a, 1, err, sizeof err) |
                            eval_seq(f3, 16, toks, 10, 0, b, 1, err, sizeof err)
                      : -1;
    int finite = 1;
    for (int i = 0; i < 10 * VOCAB; i++) finite &= isfinite(a[i]) != 0;
    CHECK(rc == 0 && finite && !memcmp(a, b, sizeof a), "llama forward identical across threads and batch sizes",
          "rc %d finite %d: %s", rc, finite, rc ? err : "logits differ");
    /* Decoding token by token gives the same last row as the batch. */
    float c[VOCAB];
    rc = 0;
    for (int i = 0; i < 10 && !rc; i++) rc = eval_seq(f1, 3, toks + i, 1, i, c, 0, err, sizeof err);
    double md = 0;
    for (int i = 0; i < VOCAB; i++) md = fmax(md, fabs(c[i] - a[9 * VOCAB + i]));
    CHECK(rc == 0 && md < 1e-5, "llama incremental decode matches the batch", "max diff %g", md);
    rc = eval_seq(f1, 3, toks, 1, CTX, c, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "position"), "llama forward refuses a position past its sequences' length", "%s",
          err);
    forward_cpu_free(f1);
    forward_cpu_free(f3);
    llama_model_free(&m);
    gguf_close(g);

    v.tied = 1;
    ok = CHECK(load("tied.gguf", &v, &m, &g, err, sizeof err) == 0 && m.tied_output &&
                   m.output.data == m.tok_embd.data,
               "llama without output.weight uses token_embd.weight", "%s", err);
    if (ok) {
        llama_model_free(&m);
        gguf_close(g);
    }
}

/* KV sizing: the product, its overflow, and the refusal with the numbers and a -c hint. */
static void test_kv_limits(void) {
    llama_hparams hp = {.n_layer = 32, .n_head_kv = 8, .head_dim = 128};
    uint64_t per_pos = 2ull * 32 * 8 * 128 * 4;
    CHECK(llama_kv_bytes(&hp, 4096, 4) == per_pos * 4096, "llama_kv_bytes: 2 x layers x positions x kv_dim x 4",
          "%llu", (unsigned long long)llama_kv_bytes(&hp, 4096, 4));
    CHECK(llama_kv_bytes(&hp, -1, 4) == UINT64_MAX, "llama_kv_bytes: negative positions", "not UINT64_MAX");
    llama_hparams huge = {.n_layer = 4096, .n_head_kv = 1 << 20, .head_dim = 1 << 20};
    CHECK(llama_kv_bytes(&huge, 1 << 24, 4) == UINT64_MAX, "llama_kv_bytes: overflow is UINT64_MAX",
          "%llu", (unsigned long long)llama_kv_bytes(&huge, 1 << 24, 4));
    char err[512] = "";
    CHECK(llama_kv_check(&hp, 4096, 4, per_pos * 4096, err, sizeof err) == 0, "llama_kv_check: exactly fits", "%s", err);
    int rc = llama_kv_check(&hp, 4096, 4, per_pos * 1000 + 5, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "needs 1073741824 bytes") && strstr(err, "-c 1000 or less"),
          "llama_kv_check: refused with bytes needed and a -c hint", "rc %d: %s", rc, err);
    rc = llama_kv_check(&huge, 1 << 24, 4, 1ull << 30, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "overflows"), "llama_kv_check: overflow refused", "rc %d: %s", rc, err);
    /* The machine's memory: a context of 2^24 positions of a 2^20-wide KV can never fit. */
    llama_hparams wide = {.n_layer = 64, .n_head_kv = 64, .head_dim = 128};
    rc = llama_kv_check(&wide, 1 << 24, 4, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "of memory; use -c"), "llama_kv_check: physical memory", "rc %d: %s", rc, err);
    CHECK(llama_kv_check(&hp, 16, 4, 0, err, sizeof err) == 0, "llama_kv_check: a small cache fits", "%s", err);
}

int main(void) {
    test_kv_limits();
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/mgi-llama-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        CHECK(0, "llama model tests", "cannot make a temporary directory");
        return test_done();
    }
    test_good();
    expect_refused("a missing tensor", "missing.gguf", (variant){.omit = "blk.0.ffn_up.weight"},
                   "blk.0.ffn_up.weight");
    expect_refused("a wrong-shaped tensor", "shape.gguf", (variant){.reshape = "blk.0.attn_k.weight"},
                   "blk.0.attn_k.weight");
    expect_refused("a wrong-shaped norm", "shape_norm.gguf", (variant){.reshape = "output_norm.weight"},
                   "output_norm.weight");
    expect_refused("a NaN norm weight", "nan.gguf", (variant){.nan_in = "blk.0.ffn_norm.weight"},
                   "blk.0.ffn_norm.weight");
    expect_refused("an unsupported tensor type", "type.gguf", (variant){.as_i32 = "blk.0.attn_v.weight"},
                   "blk.0.attn_v.weight has type I32");
    expect_refused("another architecture", "arch.gguf", (variant){.arch = "falcon"}, "'falcon' is not supported (mgi runs llama, qwen2, qwen3, phi3, gemma2, gemma3)");
    expect_refused("a head count not dividing n_embd", "heads.gguf", (variant){.n_head = 3, .n_head_kv = 1},
                   "llama.attention.head_count = 3");
    expect_refused("n_head_kv not dividing n_head", "kvheads.gguf", (variant){.n_head = 4, .n_head_kv = 3},
                   "llama.attention.head_count_kv");
    expect_refused("a missing key", "nokey.gguf", (variant){.omit_key = "llama.feed_forward_length"},
                   "llama.feed_forward_length");
    expect_refused("a vocabulary-only file", "vocab.gguf", (variant){.no_tensors = 1}, "vocabulary-only");
    const char *files[] = {"good", "tied", "missing", "shape", "shape_norm", "nan", "arch", "heads",
                           "kvheads", "nokey", "vocab", "type"};
    char path[128];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.gguf", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return test_done();
}
