/* The recipe each architecture's file declares, as the loader fills it (on the valid base model of
 * each architecture that tests/malformed/gen_bad_models --good writes), and the GPU refusal: with
 * a GPU backend that reports a device, engine_load refuses every recipe but plain Llama before it
 * creates anything (exit 2 at the CLI, one line naming the feature and -ngl 0), still hands a
 * plain Llama file to the GPU backend, and runs the other recipes on the CPU with -ngl 0. And the
 * engine's paths agree for every recipe (a head size other than n_embd / n_head too): a prompt
 * in one pass, one token per pass, and restored from another engine's KV rows (the prompt
 * cache's path) give the same logits, windowed layers included (the window, 4, is shorter than
 * the sequence). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "test.h"

static char dir[64];

static int load(const char *arch, llama_model *m, gguf_ctx **g) {
    char path[256], err[512] = "", name[128];
    snprintf(path, sizeof path, "%s/good-%s.gguf", dir, arch);
    *g = gguf_open(path, 1, err, sizeof err);
    int rc = *g ? llama_model_load(m, *g, err, sizeof err) : -1;
    snprintf(name, sizeof name, "recipe %s: the base model loads", arch);
    CHECK(rc == 0, name, "%s", err);
    if (rc && *g) {
        gguf_close(*g);
        *g = NULL;
    }
    return rc;
}

static void test_recipes(void) {
    llama_model m;
    gguf_ctx *g;
    if (!load("llama", &m, &g)) {
        CHECK(m.hp.rope_kind == LLAMA_ROPE_NORM && m.hp.act == LLAMA_ACT_SILU && m.rope_freqs && !m.layers[0].bq &&
                  !m.tied_output && m.hp.swa_pattern == 0 && fabsf(m.hp.attn_scale - 1 / sqrtf(8)) < 1e-7f,
              "recipe llama: NORM RoPE, SiLU, rope_freqs bound, no biases, scale 1/sqrt(head)", "kind %d act %d",
              m.hp.rope_kind, m.hp.act);
        CHECK(strstr(model_non_llama_feature(&m), "rope_freqs") != NULL,
              "recipe llama with rope_freqs is not the plain layer", "%s", model_non_llama_feature(&m));
        llama_model_free(&m);
        gguf_close(g);
    }
    if (!load("qwen2", &m, &g)) {
        CHECK(m.hp.rope_kind == LLAMA_ROPE_NEOX && m.layers[1].bq && m.layers[1].bk && m.layers[1].bv &&
                  !m.layers[1].bo, "recipe qwen2: NEOX, Q/K/V biases", "kind %d", m.hp.rope_kind);
        CHECK(!strcmp(model_non_llama_feature(&m), "attention biases"), "recipe qwen2 feature", "%s",
              model_non_llama_feature(&m));
        llama_model_free(&m);
        gguf_close(g);
    }
    if (!load("qwen3", &m, &g)) {
        CHECK(m.hp.rope_kind == LLAMA_ROPE_NEOX && m.layers[0].q_norm && m.layers[0].k_norm && !m.layers[0].bq,
              "recipe qwen3: NEOX, per-head Q/K norms, no biases", "");
        llama_model_free(&m);
        gguf_close(g);
    }
    if (!load("phi3", &m, &g)) {
        const llama_layer *L = &m.layers[1];
        /* Fused rows: Q, K, V one after another in attn_qkv; the gate rows before the up rows. */
        CHECK(m.hp.fused_qkv && m.hp.fused_gate_up && L->wq.n_rows == 32 && L->wk.n_rows == 16 && L->wv.n_rows == 16 &&
                  L->wk.data == L->wq.data + 32 * L->wq.row_bytes && L->wv.data == L->wk.data + 16 * L->wk.row_bytes &&
                  L->w_gate.n_rows == 256 && L->w_up.data == L->w_gate.data + 256 * L->w_gate.row_bytes,
              "recipe phi3: fused attn_qkv and gate/up bound as runs of rows", "");
        /* LongRoPE: long factors when the context per sequence, rounded up to 256 as llama.cpp
         * rounds it, exceeds original_context_length (64 here: always); short ones otherwise. */
        int orig64 = model_rope_factors(&m, 1) == m.rope_long;
        m.hp.n_ctx_orig = 512;
        CHECK(orig64 && model_rope_factors(&m, 512) == m.rope_short && model_rope_factors(&m, 300) == m.rope_short &&
                  model_rope_factors(&m, 513) == m.rope_long,
              "recipe phi3: LongRoPE short factors up to n_ctx_orig (context rounded up to 256), long ones past it", "");
        llama_model_free(&m);
        gguf_close(g);
    }
    if (!load("gemma2", &m, &g)) {
        CHECK(m.hp.act == LLAMA_ACT_GELU_TANH && m.hp.attn_softcap == 50.0f && m.hp.final_softcap == 30.0f &&
                  m.hp.swa_pattern == 2 && llama_layer_is_swa(&m.hp, 0) && !llama_layer_is_swa(&m.hp, 1) &&
                  fabsf(m.hp.embd_scale - sqrtf(32)) < 1e-6f && m.tied_output == 0 && m.layers[0].attn_post_norm,
              "recipe gemma2: GELU, softcaps 50/30, even layers windowed, input x sqrt(n_embd), post-norms", "");
        llama_model_free(&m);
        gguf_close(g);
    }
    if (!load("gemma3", &m, &g)) {
        llama_hparams hp = m.hp;
        int pattern_ok = 1;
        for (int l = 0; l < 12; l++) pattern_ok &= llama_layer_is_swa(&hp, l) == (l % 6 != 5);
        CHECK(pattern_ok && hp.n_swa == 4 && hp.rope_base_swa == 10000.0f && m.layers[0].q_norm &&
                  m.layers[0].ffn_post_norm && hp.attn_softcap == 0,
              "recipe gemma3: five windowed layers to one global, windowed RoPE base 10000, Q/K norms", "");
        CHECK(!strcmp(model_non_llama_feature(&m), "sliding-window attention"), "recipe gemma3 feature", "%s",
              model_non_llama_feature(&m));
        llama_model_free(&m);
        gguf_close(g);
    }
    /* A plain Llama file (the shared tiny model) is the plain layer. */
    char err[512] = "";
    g = gguf_open(test_shared("models/aidreams260K-f32.gguf"), 1, err, sizeof err);
    if (g && !llama_model_load(&m, g, err, sizeof err)) {
        CHECK(model_non_llama_feature(&m) == NULL, "recipe: a plain Llama file has no other feature", "%s",
              model_non_llama_feature(&m));
        llama_model_free(&m);
    } else {
        CHECK(0, "recipe: the plain Llama model loads", "%s", err);
    }
    gguf_close(g);
}

/* --- a GPU backend that reports one device and records whether the engine asked it to create ---- */

static int created;
static int fake_n_devices(char *why, size_t n) {
    (void)why;
    (void)n;
    return 1;
}
static int fake_query(int i, engine_device_info *info, char *err, size_t n) {
    (void)i;
    (void)err;
    (void)n;
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "fake");
    info->total_bytes = info->free_bytes = 64ull << 30;
    return 0;
}
static void *fake_create(const llama_model *m, const engine_plan *plan, int32_t n_cells, int32_t n_batch,
                         int32_t max_pos, engine_progress_fn progress, void *pctx, char *err, size_t n) {
    (void)m, (void)plan, (void)n_cells, (void)n_batch, (void)max_pos, (void)progress, (void)pctx;
    created = 1;
    snprintf(err, n, "fake GPU backend: create reached");
    return NULL;
}

/* engine_load on base model `arch` (or a path) with the fake GPU and -ngl gpu_layers. */
static int load_engine(const char *file, int gpu_layers, char *err, size_t n) {
    static const engine_backend_ops fake_ops = {.name = "fake"};
    engine_gpu_backend fake = {.ops = &fake_ops, .n_devices = fake_n_devices, .query = fake_query,
                               .create = fake_create};
    engine_params ep = engine_default_params();
    ep.cpu_exact = 1;  /* the exact f32 path: compared with llama.cpp's numbers or bit for bit */
    ep.n_ctx = 64;
    ep.n_threads = 1;
    ep.gpu = &fake;
    ep.split.n_gpu_layers = gpu_layers;
    engine *e = NULL;
    created = 0;
    int rc = engine_load(&e, file, &ep, err, n);
    engine_free(e);
    return rc;
}

static void test_gpu_refusal(void) {
    /* feature NULL: the CUDA backend's general layer runs the recipe (engine/cuda_layer.c) */
    static const struct { const char *arch, *feature; } cases[] = {
        {"llama", NULL}, {"qwen2", NULL}, {"qwen3", NULL}, {"phi3", NULL}, {"gemma2", NULL}, {"gemma3", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256], err[512] = "", name[1024], want[256];
        snprintf(path, sizeof path, "%s/good-%s.gguf", dir, cases[i].arch);
        int rc = load_engine(path, -1, err, sizeof err);
        if (!cases[i].feature) {
            snprintf(name, sizeof name, "gpu refusal %s: none, the file goes to the GPU backend", cases[i].arch);
            CHECK(rc != ENGINE_OK && created && strstr(err, "fake GPU backend: create reached"), name,
                  "rc %d, created %d: %s", rc, created, err);
        } else {
            snprintf(want, sizeof want, "CUDA backend: architecture %s's %s", cases[i].arch, cases[i].feature);
            snprintf(name, sizeof name, "gpu refusal %s: bad input before the GPU backend is created (%s)",
                     cases[i].arch, err);
            CHECK(rc == ENGINE_EBADINPUT && !created && strstr(err, want) &&
                      strstr(err, "run it on the CPU with -ngl 0"),
                  name, "rc %d, created %d, message lacks '%s'", rc, created, want);
        }
        rc = load_engine(path, 0, err, sizeof err);
        snprintf(name, sizeof name, "gpu refusal %s: -ngl 0 runs it on the CPU", cases[i].arch);
        CHECK(rc == ENGINE_OK && !created, name, "rc %d: %s", rc, err);
    }
    char err[512] = "";
    int rc = load_engine(test_shared("models/aidreams260K-f32.gguf"), -1, err, sizeof err);
    CHECK(rc != ENGINE_OK && created && strstr(err, "fake GPU backend: create reached"),
          "gpu refusal: a plain Llama file still goes to the GPU backend", "rc %d, created %d: %s", rc, created, err);
}

static engine *open_engine(const char *path, int32_t n_batch, char *err, size_t n) {
    engine_params ep = engine_default_params();
    ep.cpu_exact = 1;  /* the exact f32 path: compared with llama.cpp's numbers or bit for bit */
    ep.n_ctx = 64;
    ep.n_batch = n_batch;
    ep.n_threads = 2;
    engine *e = NULL;
    return engine_load(&e, path, &ep, err, n) == ENGINE_OK ? e : NULL;
}

static float max_diff(const float *a, const float *b, size_t n) {
    float d = 0;
    for (size_t i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

static void test_paths(const char *base) {
    enum { N = 14 };
    const int32_t toks[N + 1] = {1, 7, 19, 4, 30, 22, 9, 13, 5, 28, 17, 11, 26, 8, 15};
    char path[256], err[512] = "", name[256];
    snprintf(path, sizeof path, "%s/good-%s.gguf", dir, base);
    engine *a = open_engine(path, 64, err, sizeof err), *b = open_engine(path, 1, err, sizeof err);
    engine *c = open_engine(path, 64, err, sizeof err);
    snprintf(name, sizeof name, "paths %s: three engines load", base);
    if (!CHECK(a && b && c, name, "%s", err)) goto out;
    int32_t nv = engine_n_vocab(a), kvd = engine_kv_dim(a), nl = engine_hparams(a)->n_layer;
    float *la = malloc(sizeof(float) * nv * (N + 1)), *lb = malloc(sizeof(float) * nv * (N + 1));
    float *k = malloc(sizeof(float) * kvd * N), *v = malloc(sizeof(float) * kvd * N);
    int ok = la && lb && k && v && !engine_eval(a, toks, N, 0, la, 1, err, sizeof err) &&
             !engine_eval(b, toks, N, 0, lb, 1, err, sizeof err);
    snprintf(name, sizeof name, "paths %s: one pass of %d tokens equals one token per pass", base, N);
    CHECK(ok && max_diff(la, lb, (size_t)nv * N) == 0, name, "%s max diff %g", ok ? "" : err,
          ok ? max_diff(la, lb, (size_t)nv * N) : -1);
    /* Another engine gets the KV rows of every layer, then both evaluate the next token. */
    ok = ok && !engine_seq_alloc(c, 0, N, err, sizeof err);
    for (int32_t l = 0; ok && l < nl; l++)
        ok = !engine_seq_kv_get(a, 0, l, 0, N, k, v, err, sizeof err) &&
             !engine_seq_kv_set(c, 0, l, 0, N, k, v, err, sizeof err);
    ok = ok && !engine_eval(a, toks + N, 1, N, la, 0, err, sizeof err) &&
         !engine_eval(c, toks + N, 1, N, lb, 0, err, sizeof err);
    snprintf(name, sizeof name, "paths %s: KV rows restored in another engine give the same next logits", base);
    CHECK(ok && max_diff(la, lb, (size_t)nv) == 0, name, "%s", ok ? "differ" : err);
    free(la);
    free(lb);
    free(k);
    free(v);
out:
    engine_free(a);
    engine_free(b);
    engine_free(c);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/mgi-recipe-XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK(0, "recipe: temporary directory", "mkdtemp failed");
        return 1;
    }
    const char *build = getenv("BUILD");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/tests/malformed/gen_bad_models --good %s >/dev/null", build && *build ? build : "build",
             dir);
    if (!CHECK(system(cmd) == 0, "recipe: gen_bad_models --good writes the base models", "%s failed", cmd)) return 1;
    test_recipes();
    test_gpu_refusal();
    const char *bases[] = {"llama", "llama-hd16", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) test_paths(bases[i]);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", dir);
    return test_failures_ ? 1 : 0;
}
