/* engine/plan on models described in memory (shapes of an 8B and a 70B Llama, no weights) and
 * fake devices: layer and row cuts cover everything once, -ts/-mg/-dev/-ngl do what llama.cpp's
 * flags do, --layer-split places exactly the layers it names, every bad flag is refused naming it, and a plan that does not fit suggests an -ngl
 * and a -c that do fit when planned again. No GPU needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan.h"
#include "quant/dot.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test.h"

#define GiB (1ull << 30)

static llama_weight weight(const char *name, uint32_t type, int64_t n_cols, int64_t n_rows) {
    llama_weight w = {.name = name, .type = type, .n_cols = n_cols, .n_rows = n_rows};
    w.row_bytes = quant_row_bytes(type, n_cols);
    return w;
}

/* A model of the given shape, every matrix of type `type` (output Q6_K), no data. */
static llama_model make_model(int32_t n_layer, int32_t n_embd, int32_t n_head, int32_t n_head_kv, int32_t n_ff,
                              uint32_t type) {
    llama_model m;
    memset(&m, 0, sizeof m);
    llama_hparams *hp = &m.hp;
    hp->n_vocab = 128256;
    hp->n_embd = n_embd;
    hp->n_layer = n_layer;
    hp->n_head = n_head;
    hp->n_head_kv = n_head_kv;
    hp->head_dim = n_embd / n_head;
    hp->n_ff = n_ff;
    hp->n_ctx_train = 131072;
    int64_t q = (int64_t)n_head * hp->head_dim, kv = (int64_t)n_head_kv * hp->head_dim;
    m.tok_embd = weight("token_embd.weight", type, n_embd, hp->n_vocab);
    m.output = weight("output.weight", QUANT_Q6_K, n_embd, hp->n_vocab);
    m.layers = calloc((size_t)n_layer, sizeof *m.layers);
    for (int32_t l = 0; l < n_layer; l++) {
        llama_layer *L = &m.layers[l];
        L->wq = weight("blk.N.attn_q.weight", type, n_embd, q);
        L->wk = weight("blk.N.attn_k.weight", type, n_embd, kv);
        L->wv = weight("blk.N.attn_v.weight", type, n_embd, kv);
        L->wo = weight("blk.N.attn_output.weight", type, q, n_embd);
        L->w_gate = weight("blk.N.ffn_gate.weight", type, n_embd, n_ff);
        L->w_up = weight("blk.N.ffn_up.weight", type, n_embd, n_ff);
        L->w_down = weight("blk.N.ffn_down.weight", type, n_ff, n_embd);
    }
    return m;
}

static engine_device_info devs[ENGINE_MAX_DEVICES];

static void fake_devices(uint64_t free_bytes) {
    for (int i = 0; i < ENGINE_MAX_DEVICES; i++) {
        memset(&devs[i], 0, sizeof devs[i]);
        devs[i].index = i;
        snprintf(devs[i].name, sizeof devs[i].name, "NVIDIA H200");
        devs[i].total_bytes = 143771ull << 20;
        devs[i].free_bytes = free_bytes;
    }
}

static engine_split split(int mode) {
    engine_split s;
    memset(&s, 0, sizeof s);
    s.split_mode = mode;
    s.n_gpu_layers = -1;
    return s;
}

static char err[512];

static int plan(engine_plan *p, const llama_model *m, const engine_split *s, int n_visible, int32_t n_cells) {
    err[0] = 0;
    return engine_plan_make(p, m, s, devs, n_visible, n_cells, 512, err, sizeof err);
}

static uint64_t layer_total(const llama_model *m, int32_t l) {
    const llama_layer *L = &m->layers[l];
    const llama_weight *w[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    uint64_t b = 2 * (uint64_t)m->hp.n_embd * 4;
    for (int i = 0; i < 7; i++) b += (uint64_t)w[i]->n_rows * w[i]->row_bytes;
    return b;
}

/* Layer ranges consecutive, non-empty, exactly [cpu_layers, n_layer). */
static int layers_cover(const engine_plan *p) {
    int32_t at = p->cpu_layers;
    for (int i = 0; i < p->n_dev; i++) {
        if (p->layer0[i] != at || p->layer1[i] <= p->layer0[i]) return 0;
        at = p->layer1[i];
    }
    return at == p->n_layer && p->head == p->n_dev - 1;
}

/* Row shards: whole KV heads (>= 1 each) and 256-column FFN blocks (>= 256 each) covering all. */
static int rows_cover(const engine_plan *p, const llama_model *m) {
    int32_t kv = 0, ff = 0;
    for (int i = 0; i < p->n_dev; i++) {
        if (p->kvh0[i] != kv || p->kvh1[i] < kv + 1 || p->ff0[i] != ff || p->ff1[i] < ff + 256 ||
            p->ff1[i] % 256 || p->layer0[i] != p->cpu_layers || p->layer1[i] != p->n_layer)
            return 0;
        kv = p->kvh1[i];
        ff = p->ff1[i];
    }
    return kv == m->hp.n_head_kv && ff == m->hp.n_ff;
}

static void test_layer(const llama_model *m8, const llama_model *m70) {
    engine_plan p;
    char name[96];
    fake_devices(140 * GiB);
    const int counts[] = {1, 2, 4, 8};
    for (int c = 0; c < 4; c++) {
        for (int which = 0; which < 2; which++) {
            const llama_model *m = which ? m70 : m8;
            engine_split s = split(ENGINE_SPLIT_LAYER);
            int rc = plan(&p, m, &s, counts[c], 8192);
            snprintf(name, sizeof name, "plan_layer_cover_%s_%ddev", which ? "70b" : "8b", counts[c]);
            CHECK(rc == 0 && p.n_dev == counts[c] && layers_cover(&p), name, "rc %d (%s) n_dev %d", rc, err, p.n_dev);
            uint64_t want = 0, got = 0;
            for (int32_t l = 0; l < m->hp.n_layer; l++) want += layer_total(m, l);
            want += (uint64_t)m->tok_embd.n_rows * m->tok_embd.row_bytes +
                    (uint64_t)m->output.n_rows * m->output.row_bytes + (uint64_t)m->hp.n_embd * 4;
            for (int i = 0; i < p.n_dev; i++) got += p.weight_bytes[i];
            snprintf(name, sizeof name, "plan_layer_bytes_%s_%ddev", which ? "70b" : "8b", counts[c]);
            CHECK(got == want, name, "weights %llu, want %llu", (unsigned long long)got, (unsigned long long)want);
        }
    }
    /* Equal free memory: 32 layers over 4 devices are 8 each. */
    engine_split s = split(ENGINE_SPLIT_LAYER);
    plan(&p, m8, &s, 4, 8192);
    CHECK(p.layer1[0] == 8 && p.layer1[1] == 16 && p.layer1[2] == 24, "plan_layer_even", "%d %d %d", p.layer1[0],
          p.layer1[1], p.layer1[2]);
    /* -ts 3,1: device 0 has 3/4 of the layers. */
    s.n_tensor_split = 2;
    s.tensor_split[0] = 3;
    s.tensor_split[1] = 1;
    int rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == 0 && p.n_dev == 2 && p.layer0[0] == 0 && p.layer1[0] == 24 && p.layer1[1] == 32, "plan_layer_ts_3_1",
          "rc %d, layers %d..%d", rc, p.layer0[0], p.layer1[0]);
    CHECK(p.kv_bytes[0] == 3 * p.kv_bytes[1], "plan_layer_ts_kv", "kv %llu vs %llu",
          (unsigned long long)p.kv_bytes[0], (unsigned long long)p.kv_bytes[1]);
    rc = plan(&p, m70, &s, 2, 8192);
    CHECK(rc == 0 && p.layer1[0] == 60, "plan_layer_ts_3_1_70b", "rc %d, layer1 %d", rc, p.layer1[0]);
    /* A zero share leaves a device out; a tiny one rounds to nothing and is dropped too. */
    s.n_tensor_split = 3;
    s.tensor_split[0] = 1;
    s.tensor_split[1] = 0;
    s.tensor_split[2] = 1;
    rc = plan(&p, m8, &s, 3, 8192);
    CHECK(rc == 0 && p.n_dev == 2 && p.dev[0] == 0 && p.dev[1] == 2 && layers_cover(&p), "plan_layer_ts_zero",
          "rc %d n_dev %d dev %d,%d", rc, p.n_dev, p.dev[0], p.dev[1]);
    s.tensor_split[1] = 0.001f;
    rc = plan(&p, m8, &s, 3, 8192);
    CHECK(rc == 0 && p.n_dev == 2 && layers_cover(&p), "plan_layer_tiny_share_dropped", "rc %d n_dev %d", rc, p.n_dev);
    /* Missing -ts values count as 0. */
    s.n_tensor_split = 1;
    rc = plan(&p, m8, &s, 3, 8192);
    CHECK(rc == 0 && p.n_dev == 1 && p.dev[0] == 0, "plan_layer_ts_missing_zero", "rc %d n_dev %d", rc, p.n_dev);
    /* Default shares follow free memory: 3:1 free gives 3/4 of the layers. */
    s = split(ENGINE_SPLIT_LAYER);
    devs[1].free_bytes = 140 * GiB / 3;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == 0 && p.layer1[0] == 24, "plan_layer_free_ratio", "rc %d layer1 %d", rc, p.layer1[0]);
    fake_devices(140 * GiB);
    /* -dev 3,1: those ordinals in that order. */
    s.n_devices = 2;
    s.devices[0] = 3;
    s.devices[1] = 1;
    rc = plan(&p, m8, &s, 4, 8192);
    CHECK(rc == 0 && p.n_dev == 2 && p.dev[0] == 3 && p.dev[1] == 1 && p.head == 1, "plan_layer_dev_list",
          "rc %d dev %d,%d", rc, p.dev[0], p.dev[1]);
    CHECK(p.weight_bytes[0] > p.weight_bytes[1] - (uint64_t)m8->output.n_rows * m8->output.row_bytes,
          "plan_layer_embd_first", "token_embd on the first device");
}

static void test_ngl_mg(const llama_model *m8) {
    engine_plan p;
    fake_devices(140 * GiB);
    engine_split s = split(ENGINE_SPLIT_LAYER);
    s.n_gpu_layers = 10;
    int rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == 0 && p.cpu_layers == 22 && p.layer0[0] == 22 && layers_cover(&p) && p.layer1[0] == 27,
          "plan_ngl_partial", "rc %d cpu %d, layer0 %d layer1 %d", rc, p.cpu_layers, p.layer0[0], p.layer1[0]);
    uint64_t want = (uint64_t)m8->tok_embd.n_rows * m8->tok_embd.row_bytes;
    for (int32_t l = 0; l < 22; l++) want += layer_total(m8, l);
    CHECK(p.cpu_weight_bytes == want && p.cpu_kv_bytes == 8192ull * 1024 * 2 * 4 * 22, "plan_ngl_cpu_bytes",
          "cpu weights %llu (want %llu), kv %llu", (unsigned long long)p.cpu_weight_bytes,
          (unsigned long long)want, (unsigned long long)p.cpu_kv_bytes);
    /* the fast path's repacked copy: none asked for above (cpu_fast 0); with it, where this CPU
     * repacks the type, the 22 layers' matrices again (Q4_K's groups 2.8% above its rows, each
     * form rounded up to 4 KiB) */
    CHECK(p.cpu_repack_bytes == 0, "plan_ngl_exact_no_repack", "%llu", (unsigned long long)p.cpu_repack_bytes);
    s.cpu_fast = 1;
    rc = plan(&p, m8, &s, 2, 8192);
    const uint64_t mats = want - (uint64_t)m8->tok_embd.n_rows * m8->tok_embd.row_bytes - 22ull * 2 * 4096 * 4;
    const int repacks = quant_ilv_usable(quant_isa_best(), QUANT_Q4_K);
    CHECK(rc == 0 && (repacks ? p.cpu_repack_bytes >= mats && p.cpu_repack_bytes <= mats / 100 * 103 + 22 * 7 * 4096ull
                              : p.cpu_repack_bytes == 0),
          "plan_ngl_fast_repack_bytes", "repacked %llu, the CPU layers' matrices %llu (repacked here: %d)",
          (unsigned long long)p.cpu_repack_bytes, (unsigned long long)mats, repacks);
    s.cpu_fast = 0;
    s.n_gpu_layers = 32;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == 0 && p.cpu_layers == 0 && p.cpu_weight_bytes == 0, "plan_ngl_all", "rc %d cpu %d", rc, p.cpu_layers);
    s.n_gpu_layers = 999;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == 0 && p.cpu_layers == 0, "plan_ngl_more_than_layers", "rc %d cpu %d", rc, p.cpu_layers);
    s.n_gpu_layers = 0;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == -1 && strstr(err, "-ngl 0"), "plan_ngl_zero_refused", "rc %d: %s", rc, err);

    /* -sm none: everything on the -mg device of the used list. */
    s = split(ENGINE_SPLIT_NONE);
    s.main_gpu = 1;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == 0 && p.n_dev == 1 && p.dev[0] == 1 && p.layer0[0] == 0 && p.layer1[0] == 32 && p.main == 0 &&
          p.head == 0, "plan_none_mg", "rc %d n_dev %d dev %d", rc, p.n_dev, p.dev[0]);
    s.n_devices = 2;
    s.devices[0] = 2;
    s.devices[1] = 3;
    rc = plan(&p, m8, &s, 4, 8192);
    CHECK(rc == 0 && p.n_dev == 1 && p.dev[0] == 3, "plan_none_mg_indexes_dev_list", "rc %d dev %d", rc, p.dev[0]);
}

static void test_row(const llama_model *m8, const llama_model *m70) {
    engine_plan p;
    char name[96];
    fake_devices(140 * GiB);
    const int counts[] = {1, 2, 4, 8};
    for (int c = 0; c < 4; c++) {
        for (int which = 0; which < 2; which++) {
            const llama_model *m = which ? m70 : m8;
            engine_split s = split(ENGINE_SPLIT_ROW);
            int rc = plan(&p, m, &s, counts[c], 8192);
            snprintf(name, sizeof name, "plan_row_cover_%s_%ddev", which ? "70b" : "8b", counts[c]);
            CHECK(rc == 0 && p.n_dev == counts[c] && rows_cover(&p, m) && p.head == 0 && p.main == 0, name,
                  "rc %d (%s) n_dev %d", rc, err, p.n_dev);
            /* Shards add up to the whole layers, token_embd on every device, output once. */
            uint64_t want = 0, got = 0, kv = 0;
            for (int32_t l = 0; l < m->hp.n_layer; l++) want += layer_total(m, l);
            want += (uint64_t)(counts[c] - 1) * 2 * m->hp.n_embd * 4 * (uint64_t)m->hp.n_layer;
            want += (uint64_t)counts[c] * m->tok_embd.n_rows * m->tok_embd.row_bytes +
                    (uint64_t)m->output.n_rows * m->output.row_bytes + (uint64_t)m->hp.n_embd * 4;
            for (int i = 0; i < p.n_dev; i++) { got += p.weight_bytes[i]; kv += p.kv_bytes[i]; }
            snprintf(name, sizeof name, "plan_row_bytes_%s_%ddev", which ? "70b" : "8b", counts[c]);
            CHECK(got == want && kv == 8192ull * m->hp.n_head_kv * m->hp.head_dim * 4 * m->hp.n_layer, name,
                  "weights %llu want %llu", (unsigned long long)got, (unsigned long long)want);
        }
    }
    /* Uneven -ts 3,1: 6 and 2 KV heads, FFN 84 and 28 blocks of the 70B's 112. */
    engine_split s = split(ENGINE_SPLIT_ROW);
    s.n_tensor_split = 2;
    s.tensor_split[0] = 3;
    s.tensor_split[1] = 1;
    int rc = plan(&p, m70, &s, 2, 8192);
    CHECK(rc == 0 && p.kvh1[0] == 6 && p.ff1[0] == 84 * 256 && rows_cover(&p, m70), "plan_row_ts_3_1",
          "rc %d kvh1 %d ff1 %d", rc, p.kvh1[0], p.ff1[0]);
    /* A share too small for a whole head still gets one. */
    s.tensor_split[0] = 100;
    rc = plan(&p, m70, &s, 2, 8192);
    CHECK(rc == 0 && p.weight_bytes[1] > (uint64_t)m70->tok_embd.n_rows * m70->tok_embd.row_bytes,
          "plan_row_embd_everywhere", "device 1 holds %llu", (unsigned long long)p.weight_bytes[1]);
    CHECK(rc == 0 && p.kvh1[0] == 7 && p.ff1[1] - p.ff0[1] >= 256 && rows_cover(&p, m70), "plan_row_min_one_head",
          "rc %d kvh1 %d", rc, p.kvh1[0]);
    /* -ngl partial in row mode: every device holds the last layers' shards, the CPU the
     * embedding lookup. */
    s = split(ENGINE_SPLIT_ROW);
    s.n_gpu_layers = 10;
    rc = plan(&p, m70, &s, 2, 8192);
    uint64_t shard = 0;
    for (int32_t l = 70; l < 80; l++) shard += layer_total(m70, l);
    CHECK(rc == 0 && p.cpu_layers == 70 && rows_cover(&p, m70) && p.weight_bytes[0] + p.weight_bytes[1] ==
          shard + 10ull * 2 * 8192 * 4 + (uint64_t)m70->output.n_rows * m70->output.row_bytes + 8192 * 4,
          "plan_row_ngl_partial", "rc %d cpu %d", rc, p.cpu_layers);
    /* -mg 1 in row mode: the head on device 1. */
    s = split(ENGINE_SPLIT_ROW);
    s.main_gpu = 1;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == 0 && p.main == 1 && p.head == 1 && p.weight_bytes[1] > p.weight_bytes[0], "plan_row_mg", "rc %d main %d",
          rc, p.main);
    s.n_tensor_split = 2;
    s.tensor_split[0] = 1;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == -1 && strstr(err, "-mg 1"), "plan_row_mg_zero_share", "rc %d: %s", rc, err);
}

static void test_errors(const llama_model *m8) {
    engine_plan p;
    fake_devices(140 * GiB);
    engine_split s = split(ENGINE_SPLIT_LAYER);
    s.n_tensor_split = 3;
    s.tensor_split[0] = s.tensor_split[1] = s.tensor_split[2] = 1;
    int rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == -1 && strstr(err, "-ts") && strstr(err, "3 values for 2 devices"), "plan_err_ts_too_many", "rc %d: %s",
          rc, err);
    s.n_tensor_split = 2;
    s.tensor_split[0] = s.tensor_split[1] = 0;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == -1 && strstr(err, "-ts") && strstr(err, "0"), "plan_err_ts_all_zero", "rc %d: %s", rc, err);
    s = split(ENGINE_SPLIT_LAYER);
    s.main_gpu = 2;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == -1 && !strcmp(err, "-mg 2: only 2 devices are used (0..1)"), "plan_err_mg_range", "rc %d: %s", rc, err);
    s.main_gpu = 1;
    s.n_devices = 1;
    s.devices[0] = 0;
    rc = plan(&p, m8, &s, 2, 8192);
    CHECK(rc == -1 && strstr(err, "-mg 1: only 1 device is used"), "plan_err_mg_dev_list", "rc %d: %s", rc, err);
    s = split(ENGINE_SPLIT_LAYER);
    s.n_devices = 2;
    s.devices[0] = 0;
    s.devices[1] = 4;
    rc = plan(&p, m8, &s, 4, 8192);
    CHECK(rc == -1 && strstr(err, "-dev 4") && strstr(err, "4 visible"), "plan_err_dev_range", "rc %d: %s", rc, err);
    s.devices[1] = 0;
    rc = plan(&p, m8, &s, 4, 8192);
    CHECK(rc == -1 && strstr(err, "twice"), "plan_err_dev_duplicate", "rc %d: %s", rc, err);
    s = split(ENGINE_SPLIT_LAYER);
    rc = plan(&p, m8, &s, 0, 8192);
    CHECK(rc == -1 && strstr(err, "-ngl 0"), "plan_err_no_device", "rc %d: %s", rc, err);

    /* Row splits that cannot be cut. */
    llama_model few = make_model(4, 4096, 32, 2, 14336, QUANT_Q4_K);
    s = split(ENGINE_SPLIT_ROW);
    rc = plan(&p, &few, &s, 4, 1024);
    CHECK(rc == -1 && strstr(err, "-sm row") && strstr(err, "2 KV heads"), "plan_err_row_few_heads", "rc %d: %s", rc,
          err);
    llama_model odd = make_model(4, 4096, 32, 8, 11008 + 128, QUANT_Q4_K);
    rc = plan(&p, &odd, &s, 2, 1024);
    CHECK(rc == -1 && strstr(err, "-sm row") && strstr(err, "n_ff 11136") && strstr(err, "256 columns"),
          "plan_err_row_ff", "rc %d: %s", rc, err);
    llama_model small_ff = make_model(4, 4096, 32, 8, 512, QUANT_Q4_K);
    rc = plan(&p, &small_ff, &s, 4, 1024);
    CHECK(rc == -1 && strstr(err, "-sm row") && strstr(err, "n_ff 512"), "plan_err_row_ff_blocks", "rc %d: %s", rc, err);
    /* head_dim 64, one query head per KV head: attn_output (Q4_K, blocks of 256) is cut in
     * groups of 4 KV heads, so 8 KV heads go to 2 devices at most, cut at head 4. */
    llama_model narrow = make_model(4, 512, 8, 8, 1024, QUANT_Q4_K);
    rc = plan(&p, &narrow, &s, 3, 1024);
    CHECK(rc == -1 && strstr(err, "-sm row") && strstr(err, "groups of 4 KV heads"), "plan_err_row_wo_block",
          "rc %d: %s", rc, err);
    s.n_tensor_split = 2;
    s.tensor_split[0] = 3;
    s.tensor_split[1] = 1;
    rc = plan(&p, &narrow, &s, 2, 1024);
    CHECK(rc == 0 && p.n_dev == 2 && p.kvh1[0] == 4 && p.kvh0[1] == 4, "plan_row_wo_block_rounds_heads",
          "rc %d: %s; cut at %d", rc, err, p.kvh1[0]);
    s = split(ENGINE_SPLIT_ROW);
    /* F32 weights (blocks of 1) and an n_ff that is no multiple of 256 (aidreams260K: 172): any cut. */
    llama_model tiny = make_model(4, 64, 4, 4, 172, QUANT_F32);
    rc = plan(&p, &tiny, &s, 2, 1024);
    CHECK(rc == 0 && p.n_dev == 2 && p.ff1[0] == 86 && p.ff1[1] == 172 && p.kvh1[0] == 2, "plan_row_f32_any_cut",
          "rc %d: %s; ff %d..%d", rc, err, p.ff0[1], p.ff1[1]);
    llama_model_free(&few);
    llama_model_free(&odd);
    llama_model_free(&small_ff);
    llama_model_free(&narrow);
    llama_model_free(&tiny);
}

static void test_fit(const llama_model *m8, const llama_model *m70) {
    engine_plan p, q;
    /* The 70B at Q4_K (~40 GiB) on one device with 30 GiB free: some layers fit. */
    fake_devices(30 * GiB);
    engine_split s = split(ENGINE_SPLIT_LAYER);
    int rc = plan(&p, m70, &s, 1, 8192);
    CHECK(rc == -2 && p.n_dev == 1 && p.fit_ngl > 0 && p.fit_ngl < 80 && strstr(err, "device 0 (NVIDIA H200)") &&
          strstr(err, "try -ts, -ngl or a smaller -c"), "plan_fit_70b_too_big", "rc %d fit_ngl %d: %s", rc, p.fit_ngl,
          err);
    char want[32];
    snprintf(want, sizeof want, "-ngl %d", p.fit_ngl);
    CHECK(strstr(err, want) != NULL, "plan_fit_message_ngl", "%s not in: %s", want, err);
    s.n_gpu_layers = p.fit_ngl;
    rc = plan(&q, m70, &s, 1, 8192);
    CHECK(rc == 0, "plan_fit_suggested_ngl_fits", "rc %d: %s", rc, err);
    s.n_gpu_layers = p.fit_ngl + 1;
    rc = plan(&q, m70, &s, 1, 8192);
    CHECK(rc == -2, "plan_fit_suggested_ngl_is_largest", "rc %d", rc);
    /* Two such devices hold it. */
    s = split(ENGINE_SPLIT_LAYER);
    rc = plan(&p, m70, &s, 2, 8192);
    CHECK(rc == 0, "plan_fit_70b_two_devices", "rc %d: %s", rc, err);

    /* The 8B with a 1M-cell cache (128 GiB of f16 KV) on 80 GiB free: a smaller -c fits. */
    fake_devices(80 * GiB);
    s = split(ENGINE_SPLIT_LAYER);
    rc = plan(&p, m8, &s, 1, 1 << 20);
    CHECK(rc == -2 && p.fit_cells > 0 && p.fit_cells % 64 == 0 && strstr(err, "-c "), "plan_fit_kv_too_big",
          "rc %d fit_cells %d: %s", rc, p.fit_cells, err);
    int32_t cells = p.fit_cells;
    rc = plan(&q, m8, &s, 1, cells);
    CHECK(rc == 0, "plan_fit_suggested_c_fits", "rc %d: %s", rc, err);
    rc = plan(&q, m8, &s, 1, cells + 64);
    CHECK(rc == -2, "plan_fit_suggested_c_is_largest", "rc %d", rc);
    /* Needed parts in the message add up to what the plan says. */
    rc = plan(&p, m8, &s, 1, 1 << 20);
    CHECK(p.kv_bytes[0] == (1ull << 20) * 1024 * 4 * 32 && strstr(err, "KV 128.00"), "plan_fit_message_parts", "%s",
          err);
    /* Free memory smaller than the weights alone: nothing fits but fewer layers. */
    fake_devices(1 * GiB);
    rc = plan(&p, m8, &s, 1, 8192);
    CHECK(rc == -2 && p.fit_cells == 0, "plan_fit_no_c", "rc %d fit_cells %d: %s", rc, p.fit_cells, err);
}

/* The table mgi info prints: one line per device with its part and the GiB columns. */
static void test_describe(const llama_model *m8, const llama_model *m70) {
    engine_plan p;
    char buf[4096];
    fake_devices(140 * GiB);
    engine_split s = split(ENGINE_SPLIT_LAYER);
    s.n_tensor_split = 2;
    s.tensor_split[0] = 3;
    s.tensor_split[1] = 1;
    plan(&p, m8, &s, 2, 8192);
    engine_plan_describe(&p, 8192, 512, buf, sizeof buf);
    CHECK(strstr(buf, "plan: -sm layer on 2 devices, layers 0-31 on the GPUs, 8192 KV cells, batch 512, output head on device 1\n") == buf &&
          strstr(buf, "\n  0      NVIDIA H200              layers 0-23 ") &&
          strstr(buf, "\n  1      NVIDIA H200              layers 24-31 ") && strstr(buf, "  140.00 "),
          "plan_describe_layer", "%s", buf);
    s = split(ENGINE_SPLIT_ROW);
    plan(&p, m70, &s, 4, 8192);
    engine_plan_describe(&p, 8192, 512, buf, sizeof buf);
    CHECK(strstr(buf, "KV heads 0-1, FFN 0-7167 ") && strstr(buf, "KV heads 6-7, FFN 21504-28671 ") &&
          strstr(buf, "output head on device 0"), "plan_describe_row", "%s", buf);
    s = split(ENGINE_SPLIT_LAYER);
    s.n_gpu_layers = 8;
    fake_devices(3 * GiB);
    int rc = plan(&p, m8, &s, 1, 8192);
    engine_plan_describe(&p, 8192, 512, buf, sizeof buf);
    CHECK(rc == 0 && strstr(buf, "\n  cpu ") && strstr(buf, "layers 0-23, embeddings"), "plan_describe_cpu", "%s",
          buf);
    fake_devices(1 * GiB);
    plan(&p, m8, &s, 1, 8192);
    engine_plan_describe(&p, 8192, 512, buf, sizeof buf);
    CHECK(strstr(buf, "does not fit") != NULL, "plan_describe_misfit", "%s", buf);
    engine_plan_describe(&p, 8192, 512, buf, 40);
    CHECK(strlen(buf) == 39, "plan_describe_truncates", "%zu", strlen(buf));
    CHECK(engine_plan_cells(8192, 1) == 8256 && engine_plan_cells(100, 2) == 256, "plan_cells", "%lld",
          (long long)engine_plan_cells(100, 2));
}

/* On real files: one device holds every tensor's GGUF bytes (the output twice when it is tied:
 * the backend keeps token_embd for the lookup and a copy in its matvec layout). */
static void test_real_files(void) {
    const char *files[] = {"models/aidreams260K-f32.gguf", "models/aidreams260K-mixq.gguf"};
    fake_devices(140 * GiB);
    for (int f = 0; f < 2; f++) {
        const char *path = test_shared(files[f]);
        char name[96], e[512];
        snprintf(name, sizeof name, "plan_real_bytes_%s", files[f] + 7);
        gguf_ctx *g = gguf_open(path, 1, e, sizeof e);
        if (!g) { SKIP(name, e); continue; }
        llama_model m;
        if (llama_model_load(&m, g, e, sizeof e)) {
            CHECK(0, name, "%s", e);
            gguf_close(g);
            continue;
        }
        uint64_t want = 0;
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) want += gguf_tensor_at(g, i)->size;
        if (m.tied_output) want += (uint64_t)m.output.n_rows * m.output.row_bytes;
        engine_plan p;
        engine_split s = split(ENGINE_SPLIT_LAYER);
        int rc = plan(&p, &m, &s, 1, 256);
        CHECK(rc == 0 && p.weight_bytes[0] == want, name, "rc %d: %llu bytes planned, file has %llu", rc,
              (unsigned long long)p.weight_bytes[0], (unsigned long long)want);
        llama_model_free(&m);
        gguf_close(g);
    }
}

static engine_split layer_split(int n, const int32_t *last) {
    engine_split s = split(ENGINE_SPLIT_LAYER);
    s.n_layer_split = n;
    for (int i = 0; i < n; i++) s.layer_split[i] = last[i];
    return s;
}

/* --layer-split: the last layer of each device, inclusive, in the model's indices; it overrides
 * -ts, and every list no plan can take is refused naming the flag, the list and the numbers. */
static void test_layer_split(const llama_model *m8) {
    engine_plan p;
    char buf[4096];
    fake_devices(140 * GiB);
    llama_model m = make_model(8, 4096, 32, 8, 14336, QUANT_Q4_K);
    /* The flag's own example: 0,3,7 on three devices. */
    engine_split s = layer_split(3, (const int32_t[]){0, 3, 7});
    int rc = plan(&p, &m, &s, 3, 8192);
    CHECK(rc == 0 && p.n_dev == 3 && layers_cover(&p) && p.layer1[0] == 1 && p.layer0[1] == 1 && p.layer1[1] == 4 &&
          p.layer0[2] == 4 && p.layer1[2] == 8 && p.dev[0] == 0 && p.dev[2] == 2, "plan_layer_split_0_3_7",
          "rc %d (%s): %d devices, %d-%d %d-%d %d-%d", rc, err, p.n_dev, p.layer0[0], p.layer1[0], p.layer0[1],
          p.layer1[1], p.layer0[2], p.layer1[2]);
    CHECK(p.kv_bytes[2] == 4 * p.kv_bytes[0] && p.kv_bytes[1] == 3 * p.kv_bytes[0], "plan_layer_split_kv",
          "kv %llu %llu %llu", (unsigned long long)p.kv_bytes[0], (unsigned long long)p.kv_bytes[1],
          (unsigned long long)p.kv_bytes[2]);
    engine_plan_describe(&p, 8192, 512, buf, sizeof buf);
    CHECK(strstr(buf, "layers 0-0 ") && strstr(buf, "layers 1-3 ") && strstr(buf, "layers 4-7 ") &&
          strstr(buf, "output head on device 2"), "plan_layer_split_describe", "%s", buf);
    /* It overrides -ts, whatever the shares say (a 0 share included). */
    s.n_tensor_split = 3;
    s.tensor_split[0] = 0;
    s.tensor_split[1] = 9;
    s.tensor_split[2] = 1;
    rc = plan(&p, &m, &s, 3, 8192);
    CHECK(rc == 0 && p.n_dev == 3 && p.layer1[0] == 1 && p.layer1[1] == 4, "plan_layer_split_overrides_ts",
          "rc %d (%s): %d devices, layer1 %d %d", rc, err, p.n_dev, p.layer1[0], p.layer1[1]);
    /* The -dev order: the list's first entry is the first -dev device. */
    s = layer_split(2, (const int32_t[]){5, 7});
    s.n_devices = 2;
    s.devices[0] = 3;
    s.devices[1] = 1;
    rc = plan(&p, &m, &s, 4, 8192);
    CHECK(rc == 0 && p.n_dev == 2 && p.dev[0] == 3 && p.dev[1] == 1 && p.layer1[0] == 6, "plan_layer_split_dev_order",
          "rc %d (%s) dev %d %d", rc, err, p.dev[0], p.dev[1]);
    /* Fewer entries than devices: the rest hold nothing and are left out, as -ts's missing shares. */
    s = layer_split(2, (const int32_t[]){3, 7});
    rc = plan(&p, &m, &s, 4, 8192);
    CHECK(rc == 0 && p.n_dev == 2 && p.layer1[0] == 4 && p.head == 1, "plan_layer_split_fewer", "rc %d (%s) n_dev %d",
          rc, err, p.n_dev);
    /* -ngl 3 on 8 layers: the CPU keeps 0-4 and the list still counts the model's layers. */
    s = layer_split(2, (const int32_t[]){5, 7});
    s.n_gpu_layers = 3;
    rc = plan(&p, &m, &s, 2, 8192);
    CHECK(rc == 0 && p.cpu_layers == 5 && p.layer0[0] == 5 && p.layer1[0] == 6 && p.layer0[1] == 6 &&
          p.layer1[1] == 8, "plan_layer_split_ngl", "rc %d (%s) cpu %d, %d-%d", rc, err, p.cpu_layers, p.layer0[0],
          p.layer1[0]);
    s = layer_split(2, (const int32_t[]){3, 7});
    s.n_gpu_layers = 3;
    rc = plan(&p, &m, &s, 2, 8192);
    CHECK(rc == -1 && !strcmp(err, "--layer-split 3,7: -ngl 3 leaves layers 0-4 to the CPU, so the first device's "
          "last layer (3) must be 5..7 (the list counts the model's layers)"), "plan_layer_split_err_ngl",
          "rc %d: %s", rc, err);
    /* The 32-layer shape: one device. */
    s = layer_split(1, (const int32_t[]){31});
    rc = plan(&p, m8, &s, 1, 8192);
    CHECK(rc == 0 && p.n_dev == 1 && p.layer0[0] == 0 && p.layer1[0] == 32, "plan_layer_split_one", "rc %d (%s)", rc,
          err);

    /* Refused, one line each naming the flag and the numbers. */
    struct {
        const char *name;
        int n, mode, n_visible;
        int32_t last[4];
        const char *want;
    } bad[] = {
        {"plan_layer_split_err_last", 3, ENGINE_SPLIT_LAYER, 3, {0, 3, 6},
         "--layer-split 0,3,6: the last value (6) must be the model's last layer, 7 (8 layers, 0..7)"},
        {"plan_layer_split_err_past_last", 2, ENGINE_SPLIT_LAYER, 2, {3, 8},
         "--layer-split 3,8: the last value (8) must be the model's last layer, 7 (8 layers, 0..7)"},
        {"plan_layer_split_err_equal", 3, ENGINE_SPLIT_LAYER, 3, {3, 3, 7},
         "--layer-split 3,3,7: value 2 (3) is not above the one before it; each device's last layer is above the "
         "previous device's, so that every device holds at least one layer"},
        {"plan_layer_split_err_decreasing", 3, ENGINE_SPLIT_LAYER, 3, {5, 2, 7},
         "--layer-split 5,2,7: value 2 (2) is not above the one before it"},
        {"plan_layer_split_err_negative", 2, ENGINE_SPLIT_LAYER, 2, {-1, 7},
         "--layer-split -1,7: value 1 (-1) is negative"},
        {"plan_layer_split_err_devices", 3, ENGINE_SPLIT_LAYER, 2, {0, 3, 7},
         "--layer-split 0,3,7: 3 devices named, but only 2 are used; give one last layer per device"},
        {"plan_layer_split_err_row", 2, ENGINE_SPLIT_ROW, 2, {3, 7},
         "--layer-split 3,7: only for -sm layer, and -sm row was given; drop one of the two flags"},
        {"plan_layer_split_err_none", 2, ENGINE_SPLIT_NONE, 2, {3, 7},
         "--layer-split 3,7: only for -sm layer, and -sm none was given; drop one of the two flags"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = layer_split(bad[i].n, bad[i].last);
        s.split_mode = bad[i].mode;
        rc = plan(&p, &m, &s, bad[i].n_visible, 8192);
        CHECK(rc == -1 && !strncmp(err, bad[i].want, strlen(bad[i].want)), bad[i].name, "rc %d: %s", rc, err);
    }
    /* The same checks without devices (the CPU paths use them so that a machine without a GPU
     * refuses the same lists). */
    s = layer_split(3, (const int32_t[]){0, 3, 6});
    CHECK(engine_split_check_layers(&s, 8, err, sizeof err) == -1 && strstr(err, "must be the model's last layer, 7"),
          "plan_layer_split_check_no_devices", "%s", err);
    s = layer_split(3, (const int32_t[]){0, 3, 7});
    CHECK(engine_split_check_layers(&s, 8, err, sizeof err) == 0, "plan_layer_split_check_ok", "%s", err);
    s.n_gpu_layers = 0;
    CHECK(engine_split_check_layers(&s, 8, err, sizeof err) == -1 && strstr(err, "-ngl 0"),
          "plan_layer_split_check_ngl0", "%s", err);
    s = split(ENGINE_SPLIT_ROW);
    CHECK(engine_split_check_layers(&s, 8, err, sizeof err) == 0, "plan_layer_split_check_empty", "%s", err);
    llama_model_free(&m);
}

static void test_names(void) {
    CHECK(engine_split_parse("none") == ENGINE_SPLIT_NONE && engine_split_parse("layer") == ENGINE_SPLIT_LAYER &&
          engine_split_parse("row") == ENGINE_SPLIT_ROW && engine_split_parse("rows") == -1 &&
          engine_split_parse("") == -1, "plan_split_parse", "parse");
    CHECK(!strcmp(engine_split_name(ENGINE_SPLIT_ROW), "row") && !strcmp(engine_split_name(7), "unknown"),
          "plan_split_name", "name");
}

int main(void) {
    llama_model m8 = make_model(32, 4096, 32, 8, 14336, QUANT_Q4_K);
    llama_model m70 = make_model(80, 8192, 64, 8, 28672, QUANT_Q4_K);
    test_names();
    test_layer(&m8, &m70);
    test_ngl_mg(&m8);
    test_row(&m8, &m70);
    test_errors(&m8);
    test_fit(&m8, &m70);
    test_describe(&m8, &m70);
    test_layer_split(&m8);
    test_real_files();
    llama_model_free(&m8);
    llama_model_free(&m70);
    return test_done();
}
