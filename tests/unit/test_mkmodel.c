/* Tests of the synthetic model generator (build/scripts/mkmodel): small models of every mix and
 * supported type are written to a temporary folder and read back with gguf_open: keys, tensor
 * names, shapes and types (against the mix rules restated here), value statistics, the
 * synthetic and copied vocabularies, overrides, determinism and error exits; then every
 * architecture's file against llama.cpp's names and shapes restated here (src/models/ARCH.cpp),
 * the rope factors' values, and the real models' shapes (one layer, a small vocabulary). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test.h"

static char tool[1024], dir[64];

/* Runs mkmodel with args (already shell-quoted where needed); stderr goes to dir/err.txt. */
static int mk(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>'%s/err.txt'", tool, args, dir);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void read_err(char *buf, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/err.txt", dir);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = 0;
    if (f) fclose(f);
}

static uint32_t u32_key(const gguf_ctx *g, const char *key) {
    uint32_t v = UINT32_MAX;
    return gguf_get_u32(g, key, &v) == GGUF_OK ? v : UINT32_MAX;
}

/* The tensor types each mix must give on shape tiny with 2 layers, where llama.cpp's
 * "more bits" rule picks layer 1 only (i >= 7 * 2 / 8). */
static uint32_t want_type(const char *mix, const char *role, int layer) {
    int big = layer == 1 && (!strcmp(role, "attn_v") || !strcmp(role, "ffn_down"));
    int out = !strcmp(role, "output");
    if (strstr(role, "norm")) return QUANT_F32;
    if (!strcmp(mix, "q4_0")) return out ? QUANT_Q6_K : QUANT_Q4_0;
    if (!strcmp(mix, "q4_k_m")) return out || big ? QUANT_Q6_K : QUANT_Q4_K;
    if (!strcmp(mix, "mixq")) {
        if (!strcmp(role, "ffn_down")) return QUANT_F16;
        return out || (big && !strcmp(role, "attn_v")) ? QUANT_Q8_0 : QUANT_Q5_0;
    }
    for (uint32_t t = 0; t < QUANT_TYPE_COUNT; t++)
        if (quant_is_supported(t) && !strcasecmp(quant_type_name(t), mix)) return t;
    return UINT32_MAX;
}

/* Mean and standard deviation of a tensor's first rows (up to 64K values). */
static int tensor_stats(const gguf_tensor *t, double *mean, double *sd) {
    int64_t ne0 = t->ne[0], rows = t->n_elems / ne0;
    if (rows * ne0 > 65536) rows = 65536 / ne0 > 0 ? 65536 / ne0 : 1;
    size_t rb = quant_row_bytes(t->type, ne0);
    float *x = malloc(sizeof(float) * (size_t)(rows * ne0));
    char err[256];
    double s = 0, s2 = 0;
    int ok = 1;
    for (int64_t r = 0; r < rows && ok; r++)
        ok = quant_dequant_row(t->type, (const uint8_t *)t->data + rb * (size_t)r, x + r * ne0, ne0, err, sizeof err) == 0;
    for (int64_t i = 0; ok && i < rows * ne0; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    free(x);
    double n = (double)(rows * ne0);
    *mean = s / n;
    *sd = sqrt(s2 / n - *mean * *mean);
    return ok;
}

static void check_mix(const char *mix) {
    static const char *roles[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                  "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    char args[512], path[128], tname[128], err[512], why[256] = "";
    snprintf(path, sizeof path, "%s/%s.gguf", dir, mix);
    snprintf(args, sizeof args, "--shape tiny --layers 2 --n-vocab 512 --quant %s -o '%s'", mix, path);
    snprintf(tname, sizeof tname, "mkmodel tiny %s: writes and reopens", mix);
    int rc = mk(args);
    gguf_ctx *g = rc == 0 ? gguf_open(path, 1, err, sizeof err) : NULL;
    if (rc != 0) read_err(err, sizeof err);
    if (!CHECK(g != NULL, tname, "exit %d: %s", rc, err)) return;

    const char *s = NULL;
    const gguf_value *tokens = NULL;
    int keys_ok = gguf_get_str(g, "general.architecture", &s) == GGUF_OK && !strcmp(s, "llama") &&
                  u32_key(g, "llama.block_count") == 2 && u32_key(g, "llama.embedding_length") == 256 &&
                  u32_key(g, "llama.feed_forward_length") == 512 && u32_key(g, "llama.attention.head_count") == 4 &&
                  u32_key(g, "llama.attention.head_count_kv") == 2 && u32_key(g, "llama.rope.dimension_count") == 64 &&
                  u32_key(g, "llama.context_length") == 8192 && u32_key(g, "llama.vocab_size") == 512 &&
                  u32_key(g, "general.alignment") == 32 && gguf_get_str(g, "general.name", &s) == GGUF_OK &&
                  gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens) == GGUF_OK &&
                  tokens->v.arr.n == 512 && u32_key(g, "general.file_type") != UINT32_MAX;
    float f = 0;
    keys_ok = keys_ok && gguf_get_f32(g, "llama.rope.freq_base", &f) == GGUF_OK && f > 0 &&
              gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f) == GGUF_OK && f > 0;
    snprintf(tname, sizeof tname, "mkmodel tiny %s: hyperparameter keys", mix);
    CHECK(keys_ok, tname, "a llama.* or general.* key is missing or wrong");

    int bad = 0, n_t = (int)gguf_n_tensors(g);
    for (int i = -1; i <= 2; i++) {
        int n_here = i == -1 ? 1 : i == 2 ? 2 : 9;
        for (int j = 0; j < n_here; j++) {
            char name[64];
            const char *role = i == -1 ? "token_embd" : i == 2 ? (j ? "output" : "output_norm") : roles[j];
            if (i >= 0 && i < 2) snprintf(name, sizeof name, "blk.%d.%s.weight", i, role);
            else snprintf(name, sizeof name, "%s.weight", role);
            const gguf_tensor *t = gguf_get_tensor(g, name);
            int64_t ne0 = !strcmp(role, "ffn_down") ? 512 : 256;
            int64_t ne1 = strstr(role, "norm") ? 1 : !strcmp(role, "token_embd") || !strcmp(role, "output") ? 512
                        : !strcmp(role, "attn_k") || !strcmp(role, "attn_v") ? 128
                        : !strcmp(role, "ffn_gate") || !strcmp(role, "ffn_up") ? 512 : 256;
            uint32_t want = want_type(mix, role, i);
            if (!t || t->ne[0] != ne0 || t->ne[1] != ne1 || t->type != want) {
                if (!bad++)
                    snprintf(why, sizeof why, "%s: %s, want [%lld, %lld] %s", name,
                             t ? quant_type_name(t->type) : "missing", (long long)ne0, (long long)ne1,
                             quant_type_name(want));
            }
        }
    }
    snprintf(tname, sizeof tname, "mkmodel tiny %s: tensor names, shapes and types", mix);
    CHECK(!bad && n_t == 21, tname, "%s (%d tensors)", bad ? why : "wrong tensor count", n_t);

    /* weights: mean ~0, std 1/sqrt(fan-in); norms ~1 +- 0.01 */
    static const char *probe[] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.1.attn_v.weight",
                                  "blk.1.ffn_down.weight", "output.weight", "blk.0.attn_norm.weight"};
    bad = 0;
    for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++) {
        const gguf_tensor *t = gguf_get_tensor(g, probe[k]);
        double mean = 0, sd = 0, sigma = t ? 1.0 / sqrt((double)t->ne[0]) : 0;
        int norm = strstr(probe[k], "norm") != NULL;
        int ok = t && tensor_stats(t, &mean, &sd) &&
                 (norm ? fabs(mean - 1) < 0.003 && sd > 0.008 && sd < 0.012
                       : fabs(mean) < 0.05 * sigma && sd > 0.9 * sigma && sd < 1.1 * sigma);
        if (!ok && !bad++)
            snprintf(why, sizeof why, "%s: mean %.4g, std %.4g (want %s)", probe[k], mean, sd,
                     norm ? "1, 0.01" : "0, 1/sqrt(fan-in)");
    }
    snprintf(tname, sizeof tname, "mkmodel tiny %s: value statistics", mix);
    CHECK(!bad, tname, "%s", why);
    gguf_close(g);
    unlink(path);
}

static void check_synthetic_vocab(void) {
    char args[512], path[128], err[512];
    snprintf(path, sizeof path, "%s/demo.gguf", dir);
    snprintf(args, sizeof args, "--shape demo --quant q4_0 -o '%s'", path);
    int rc = mk(args);
    gguf_ctx *g = rc == 0 ? gguf_open(path, 1, err, sizeof err) : NULL;
    if (!CHECK(g != NULL, "mkmodel demo q4_0: writes and reopens", "exit %d", rc)) return;
    const gguf_value *tok = NULL, *types = NULL, *scores = NULL;
    const char *model = NULL;
    bool add_bos = false;
    int ok = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok) == GGUF_OK &&
             gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types) == GGUF_OK &&
             gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores) == GGUF_OK &&
             gguf_get_str(g, "tokenizer.ggml.model", &model) == GGUF_OK && !strcmp(model, "llama") &&
             gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos) == GGUF_OK && add_bos &&
             u32_key(g, "tokenizer.ggml.bos_token_id") == 1 && u32_key(g, "tokenizer.ggml.eos_token_id") == 2 &&
             u32_key(g, "tokenizer.ggml.unknown_token_id") == 0 && tok->v.arr.n == 1024 &&
             types->v.arr.n == 1024 && scores->v.arr.n == 1024 && u32_key(g, "llama.vocab_size") == 1024 &&
             u32_key(g, "llama.embedding_length") == 128 && u32_key(g, "llama.context_length") == 256 &&
             u32_key(g, "llama.feed_forward_length") == 384;
    char why[200] = "a tokenizer or demo key is missing or wrong";
    if (ok) {
        ok = !strcmp(tok->v.arr.items[0].v.str.ptr, "<unk>") && !strcmp(tok->v.arr.items[1].v.str.ptr, "<s>") &&
             !strcmp(tok->v.arr.items[2].v.str.ptr, "</s>") && gguf_arr_i64(types, 0) == 2 &&
             gguf_arr_i64(types, 1) == 3 && gguf_arr_i64(types, 2) == 3;
        for (int b = 0; ok && b < 256; b++) {
            char want[8];
            snprintf(want, sizeof want, "<0x%02X>", b);
            ok = !strcmp(tok->v.arr.items[3 + b].v.str.ptr, want) && gguf_arr_i64(types, 3 + (uint64_t)b) == 6;
            if (!ok) snprintf(why, sizeof why, "byte token %d is '%s'", b, tok->v.arr.items[3 + b].v.str.ptr);
        }
        for (uint64_t i = 259; ok && i < tok->v.arr.n; i++) {
            ok = gguf_arr_i64(types, i) == 1 && tok->v.arr.items[i].v.str.len > 0 &&
                 (i == 259 || gguf_arr_f32(scores, i) < gguf_arr_f32(scores, i - 1));
            if (!ok) snprintf(why, sizeof why, "piece %llu has a wrong type or score", (unsigned long long)i);
            for (uint64_t j = 0; ok && j < i; j++)
                if (!strcmp(tok->v.arr.items[i].v.str.ptr, tok->v.arr.items[j].v.str.ptr)) {
                    snprintf(why, sizeof why, "token %llu '%s' repeats token %llu", (unsigned long long)i,
                             tok->v.arr.items[i].v.str.ptr, (unsigned long long)j);
                    ok = 0;
                }
        }
        /* the words of the demo prompt are whole pieces */
        static const char *words[] = {"\xe2\x96\x81Once", "\xe2\x96\x81upon", "\xe2\x96\x81time"};
        for (size_t w = 0; ok && w < 3; w++) {
            int found = 0;
            for (uint64_t i = 0; i < tok->v.arr.n; i++) found |= !strcmp(tok->v.arr.items[i].v.str.ptr, words[w]);
            if (!found) snprintf(why, sizeof why, "no piece %s", words[w]);
            ok = found;
        }
    }
    CHECK(ok, "mkmodel synthetic vocabulary: specials, 256 byte tokens, unique scored pieces", "%s", why);
    const gguf_tensor *t = gguf_get_tensor(g, "blk.0.ffn_down.weight");
    CHECK(t && t->type == QUANT_Q4_0 && t->ne[0] == 384 && gguf_get_tensor(g, "output.weight")->type == QUANT_Q8_0,
          "mkmodel demo q4_0: Q4_0 matrices, output falls back from Q6_K to Q8_0 (rows of 128)",
          "ffn_down %s, output %s", t ? quant_type_name(t->type) : "missing",
          quant_type_name(gguf_get_tensor(g, "output.weight")->type));
    gguf_close(g);

    /* same seed, same bytes; another seed, other bytes */
    char path2[128];
    snprintf(path2, sizeof path2, "%s/demo2.gguf", dir);
    snprintf(args, sizeof args, "--shape demo --quant q4_0 -o '%s'", path2);
    int same = mk(args) == 0;
    snprintf(args, sizeof args, "cmp -s '%s' '%s'", path, path2);
    same = same && system(args) == 0;
    snprintf(args, sizeof args, "--shape demo --quant q4_0 --seed 7 -o '%s'", path2);
    int differ = mk(args) == 0;
    snprintf(args, sizeof args, "cmp -s '%s' '%s'", path, path2);
    differ = differ && system(args) != 0;
    CHECK(same && differ, "mkmodel is deterministic for a seed", "same seed identical: %d, other seed differs: %d", same, differ);
    unlink(path);
    unlink(path2);
}

static void check_fallback_and_overrides(void) {
    char args[512], path[128], err[512];
    snprintf(path, sizeof path, "%s/fb.gguf", dir);
    snprintf(args, sizeof args, "--shape demo --quant q4_k_m -o '%s'", path);
    int rc = mk(args);
    gguf_ctx *g = rc == 0 ? gguf_open(path, 1, err, sizeof err) : NULL;
    int ok = g && gguf_get_tensor(g, "blk.0.attn_q.weight")->type == QUANT_Q5_0 &&
             gguf_get_tensor(g, "blk.1.attn_v.weight")->type == QUANT_Q8_0 &&
             gguf_get_tensor(g, "blk.0.ffn_down.weight")->type == QUANT_Q5_0 &&
             gguf_get_tensor(g, "output.weight")->type == QUANT_Q8_0;
    CHECK(ok, "mkmodel demo q4_k_m: K types fall back to Q5_0 / Q8_0 on rows of 128 and 384", "exit %d", rc);
    if (g) gguf_close(g);

    snprintf(args, sizeof args,
             "--shape tiny --layers 2 --n-vocab 512 --quant q4_0 --tensor-type attn_v=q5_k "
             "--tensor-type blk.1.ffn_up=bf16 --tensor-type output=q2_k --tensor-type blk.0.ffn_norm.weight=f16 -o '%s'",
             path);
    rc = mk(args);
    g = rc == 0 ? gguf_open(path, 1, err, sizeof err) : NULL;
    ok = g && gguf_get_tensor(g, "blk.0.attn_v.weight")->type == QUANT_Q5_K &&
         gguf_get_tensor(g, "blk.1.attn_v.weight")->type == QUANT_Q5_K &&
         gguf_get_tensor(g, "blk.1.ffn_up.weight")->type == QUANT_BF16 &&
         gguf_get_tensor(g, "blk.0.ffn_up.weight")->type == QUANT_Q4_0 &&
         gguf_get_tensor(g, "output.weight")->type == QUANT_Q2_K &&
         gguf_get_tensor(g, "blk.0.attn_output.weight")->type == QUANT_Q4_0 &&
         gguf_get_tensor(g, "blk.0.ffn_norm.weight")->type == QUANT_F16 &&
         gguf_get_tensor(g, "blk.1.ffn_norm.weight")->type == QUANT_F32;
    CHECK(ok, "mkmodel --tensor-type overrides by role, by layer and by full name", "exit %d", rc);
    if (g) gguf_close(g);
    unlink(path);
}

static void check_copied_vocab(void) {
    const char *vocab = test_shared("vocab/ggml-vocab-llama-spm.gguf");
    if (access(vocab, R_OK)) {
        SKIP("mkmodel --vocab copies the tokenizer keys", "no ggml-vocab-llama-spm.gguf under $SHARED/vocab");
        return;
    }
    char args[1400], path[128], err[512];
    snprintf(path, sizeof path, "%s/spm.gguf", dir);
    snprintf(args, sizeof args, "--shape tiny --layers 1 --quant q8_0 --vocab '%s' -o '%s'", vocab, path);
    int rc = mk(args);
    gguf_ctx *g = rc == 0 ? gguf_open(path, 1, err, sizeof err) : NULL;
    gguf_ctx *v = gguf_open(vocab, 1, err, sizeof err);
    int ok = g && v, n_tok_keys = 0;
    char why[256] = "";
    for (int64_t i = 0; ok && i < gguf_n_kv(v); i++) {
        const char *key = gguf_key(v, i);
        if (strncmp(key, "tokenizer.", 10)) continue;
        n_tok_keys++;
        const gguf_value *a = gguf_value_at(v, i), *b = gguf_get(g, key);
        ok = b && a->type == b->type &&
             (a->type != GGUF_TYPE_ARRAY || (a->v.arr.n == b->v.arr.n && a->v.arr.elem == b->v.arr.elem));
        if (ok && a->type == GGUF_TYPE_ARRAY && a->v.arr.elem == GGUF_TYPE_STRING)
            for (uint64_t k = 0; ok && k < a->v.arr.n; k++) ok = !strcmp(a->v.arr.items[k].v.str.ptr, b->v.arr.items[k].v.str.ptr);
        if (!ok) snprintf(why, sizeof why, "key %s differs", key);
    }
    ok = ok && n_tok_keys > 3 && u32_key(g, "llama.vocab_size") == 32000 &&
         gguf_get_tensor(g, "output.weight")->ne[1] == 32000 && gguf_get_tensor(g, "token_embd.weight")->type == QUANT_Q8_0;
    CHECK(ok, "mkmodel --vocab copies every tokenizer key", "exit %d %s", rc, why);
    if (g) gguf_close(g);
    if (v) gguf_close(v);
    unlink(path);
}

static void check_errors(void) {
    static const struct { const char *args, *name, *needle; } cases[] = {
        {"--shape tiny --quant q9_9 -o x.gguf", "mkmodel rejects an unknown --quant", "--quant q9_9"},
        {"--shape huge --quant q4_0 -o x.gguf", "mkmodel rejects an unknown --shape", "--shape huge"},
        {"--shape tiny --quant q4_0", "mkmodel requires -o", "-o"},
        {"--shape demo --quant q4_0 --tensor-type attn_q=q4_k -o x.gguf",
         "mkmodel rejects an override whose blocks do not fit the rows", "attn_q"},
        {"--shape demo --quant q4_0 --tensor-type nosuch=q8_0 -o x.gguf", "mkmodel rejects an override naming no tensor", "nosuch"},
        {"--shape demo --quant q4_0 --layers 0 -o x.gguf", "mkmodel rejects --layers 0", "--layers"},
        {"--shape demo --quant q4_0 --vocab /nonexistent.gguf -o x.gguf", "mkmodel reports an unreadable --vocab", "nonexistent"},
        {"--shape demo --quant q4_0 --bogus 1 -o x.gguf", "mkmodel rejects an unknown flag", "--bogus"},
        {"--arch falcon --quant f16 -o x.gguf", "mkmodel rejects an unknown --arch", "--arch falcon"},
        {"--shape qwen3-8b --arch llama --quant f16 -o x.gguf", "mkmodel rejects a shape of another architecture", "qwen3"},
        {"--arch qwen2 --rope-freqs --quant f16 -o x.gguf", "mkmodel rejects --rope-freqs outside llama", "--rope-freqs"},
        {"--arch phi3 --head-dim 128 --quant f16 -o x.gguf", "mkmodel rejects --head-dim on fused QKV", "--head-dim"},
        {"--arch llama --rope-scaling ntk:2 --quant f16 -o x.gguf", "mkmodel rejects an unknown --rope-scaling", "ntk"},
        {"--arch llama --rope-scaling yarn:0.5 --quant f16 -o x.gguf", "mkmodel rejects a rope factor <= 1", "yarn:0.5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[600], msg[1024];
        snprintf(args, sizeof args, "%s", cases[i].args);
        char *o = strstr(args, "x.gguf");  /* keep outputs inside the temporary folder */
        if (o) snprintf(o, sizeof args - (size_t)(o - args), "'%s/x.gguf'", dir);
        int rc = mk(args);
        read_err(msg, sizeof msg);
        char *nl = strchr(msg, '\n');
        int one_line = nl && nl[1] == 0 && !strncmp(msg, "mkmodel: ", 9);
        char x[128];
        snprintf(x, sizeof x, "%s/x.gguf", dir);
        CHECK(rc == 2 && one_line && strstr(msg, cases[i].needle) && access(x, F_OK) != 0, cases[i].name,
              "exit %d, stderr \"%s\"", rc, msg);
    }
}

/* ---- architectures ---------------------------------------------------------------------------- */

/* Opens DIR/NAME.gguf written by mkmodel ARGS; NULL (with a FAIL) when either fails. */
static gguf_ctx *mk_open(const char *args, const char *name, char *path, size_t path_size) {
    char cmd[1024], err[512], tname[160];
    snprintf(path, path_size, "%s/%s.gguf", dir, name);
    snprintf(cmd, sizeof cmd, "%s -o '%s'", args, path);
    int rc = mk(cmd);
    gguf_ctx *g = rc == 0 ? gguf_open(path, 1, err, sizeof err) : NULL;
    if (rc != 0) read_err(err, sizeof err);
    snprintf(tname, sizeof tname, "mkmodel %s: writes and reopens", args);
    CHECK(g != NULL, tname, "exit %d: %s", rc, err);
    return g;
}

static int has_shape(const gguf_ctx *g, const char *name, int64_t ne0, int64_t ne1, char *why, size_t n) {
    const gguf_tensor *t = gguf_get_tensor(g, name);
    int ok = t && t->ne[0] == ne0 && (ne1 ? t->n_dims == 2 && t->ne[1] == ne1 : t->n_dims == 1);
    if (!ok && !*why)
        snprintf(why, n, "%s: %s [%lld, %lld], want [%lld, %lld]", name, t ? "" : "missing", t ? (long long)t->ne[0] : 0,
                 t && t->n_dims > 1 ? (long long)t->ne[1] : 0, (long long)ne0, (long long)ne1);
    return ok;
}

/* The small shape of each architecture, with the tensors llama.cpp's loader asks for. */
static void check_arch(const char *arch, int head_dim, int tied, int n_layer) {
    char args[256], path[128], tname[160], why[256] = "", key[128];
    snprintf(args, sizeof args, "--arch %s --quant f16", arch);
    gguf_ctx *g = mk_open(args, arch, path, sizeof path);
    if (!g) return;
    const int E = 256, H = 4, HKV = 2, FF = 640, V = 2048;
    int hd = head_dim, q = H * hd, kv = HKV * hd;
    int qwen2 = !strcmp(arch, "qwen2"), qk_norm = !strcmp(arch, "qwen3") || !strcmp(arch, "gemma3");
    int gemma = !strncmp(arch, "gemma", 5), phi = !strcmp(arch, "phi3");
    const char *s = NULL;
    int ok = gguf_get_str(g, "general.architecture", &s) == GGUF_OK && !strcmp(s, arch);
#define U32(k) (snprintf(key, sizeof key, "%s." k, arch), u32_key(g, key))
    ok = ok && U32("embedding_length") == (uint32_t)E && U32("block_count") == (uint32_t)n_layer &&
         U32("feed_forward_length") == (uint32_t)FF && U32("attention.head_count") == (uint32_t)H &&
         U32("attention.head_count_kv") == (uint32_t)HKV && U32("context_length") != UINT32_MAX;
    /* key_length where the family's config names head_dim; rope.dimension_count where its
     * converter writes it (llama, phi3); vocab_size for llama only */
    int want_kl = gemma || !strcmp(arch, "qwen3");
    ok = ok && (want_kl ? U32("attention.key_length") == (uint32_t)hd && U32("attention.value_length") == (uint32_t)hd
                        : U32("attention.key_length") == UINT32_MAX);
    ok = ok && (phi ? U32("rope.dimension_count") == 48
                    : !strcmp(arch, "llama") ? U32("rope.dimension_count") == (uint32_t)hd
                                             : U32("rope.dimension_count") == UINT32_MAX);
    ok = ok && (!strcmp(arch, "llama") ? U32("vocab_size") == (uint32_t)V : U32("vocab_size") == UINT32_MAX);
    ok = ok && (gemma ? U32("attention.sliding_window") == 16 : 1);
    float f = 0;
    snprintf(key, sizeof key, "%s.attn_logit_softcapping", arch);
    int has_cap = gguf_get_f32(g, key, &f) == GGUF_OK;
    ok = ok && has_cap == !strcmp(arch, "gemma2");
    bool space = true;
    ok = ok && (gemma ? gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &space) == GGUF_OK && !space
                      : gguf_get(g, "tokenizer.ggml.add_space_prefix") == NULL);
#undef U32
    snprintf(tname, sizeof tname, "mkmodel --arch %s: hyperparameter keys as llama.cpp's converter writes them", arch);
    CHECK(ok, tname, "a key is missing, extra or wrong");

    int n_per = 9, expect = 0;
    ok = has_shape(g, "token_embd.weight", E, V, why, sizeof why) && has_shape(g, "output_norm.weight", E, 0, why, sizeof why);
    ok = ok && (tied ? gguf_get_tensor(g, "output.weight") == NULL : has_shape(g, "output.weight", E, V, why, sizeof why));
    for (int i = 0; i < n_layer && ok; i++) {
        char n[96];
#define T(role, a, b) (snprintf(n, sizeof n, "blk.%d.%s", i, role), has_shape(g, n, a, b, why, sizeof why))
        ok = T("attn_norm.weight", E, 0) && T("attn_output.weight", q, E) && T("ffn_norm.weight", E, 0) &&
             T("ffn_down.weight", FF, E);
        if (phi) {
            ok = ok && T("attn_qkv.weight", E, q + 2 * kv) && T("ffn_up.weight", E, 2 * FF);
            n_per = 6;
        } else {
            ok = ok && T("attn_q.weight", E, q) && T("attn_k.weight", E, kv) && T("attn_v.weight", E, kv) &&
                 T("ffn_gate.weight", E, FF) && T("ffn_up.weight", E, FF);
        }
        if (qwen2) ok = ok && T("attn_q.bias", q, 0) && T("attn_k.bias", kv, 0) && T("attn_v.bias", kv, 0);
        if (qk_norm) ok = ok && T("attn_q_norm.weight", hd, 0) && T("attn_k_norm.weight", hd, 0);
        if (gemma) ok = ok && T("post_attention_norm.weight", E, 0) && T("post_ffw_norm.weight", E, 0);
#undef T
    }
    n_per += qwen2 * 3 + qk_norm * 2 + gemma * 2;
    expect = 2 + !tied + n_layer * n_per + (phi ? 2 : 0);
    ok = ok && (!phi || (has_shape(g, "rope_factors_long.weight", 24, 0, why, sizeof why) &&
                         has_shape(g, "rope_factors_short.weight", 24, 0, why, sizeof why)));
    snprintf(tname, sizeof tname, "mkmodel --arch %s: tensors named and shaped as llama.cpp loads them", arch);
    CHECK(ok && gguf_n_tensors(g) == expect, tname, "%s (%lld tensors, want %d)", *why ? why : "count",
          (long long)gguf_n_tensors(g), expect);

    /* values: F16 matrices with std 1/sqrt(fan-in), F32 norms 1 + N(0, 1/8), biases N(0, 1/2) */
    char nq[64], nn[64], nb[64];
    snprintf(nq, sizeof nq, "blk.0.%s.weight", phi ? "attn_qkv" : "attn_q");
    snprintf(nn, sizeof nn, "blk.0.%s.weight", qk_norm ? "attn_k_norm" : "ffn_norm");
    snprintf(nb, sizeof nb, "blk.1.attn_v.bias");
    const gguf_tensor *tq = gguf_get_tensor(g, nq), *tn = gguf_get_tensor(g, nn), *tb = gguf_get_tensor(g, nb);
    double mq = 0, sq = 0, mn = 0, sn = 0, mb = 0, sb = 0;
    ok = tq && tn && tq->type == QUANT_F16 && tn->type == QUANT_F32 && tensor_stats(tq, &mq, &sq) && tensor_stats(tn, &mn, &sn) &&
         fabs(mq) < 0.05 / 16 && sq > 0.9 / 16 && sq < 1.1 / 16 && fabs(mn - 1) < 0.03 && sn > 0.1 && sn < 0.15;
    if (qwen2) ok = ok && tb && tb->type == QUANT_F32 && tensor_stats(tb, &mb, &sb) && fabs(mb) < 0.15 && sb > 0.35 && sb < 0.65;
    if (gemma) {  /* post norms centred on 8, as large as trained Gemma's */
        const gguf_tensor *tp = gguf_get_tensor(g, "blk.1.post_ffw_norm.weight");
        double mp = 0, sp = 0;
        ok = ok && tp && tensor_stats(tp, &mp, &sp) && fabs(mp - 8) < 0.25 && sp > 0.8 && sp < 1.2;
    }
    snprintf(tname, sizeof tname, "mkmodel --arch %s: value statistics (matrices, norms%s)", arch, qwen2 ? ", biases" : "");
    CHECK(ok, tname, "%s mean %.3g std %.3g; %s mean %.3g std %.3g; bias mean %.3g std %.3g", nq, mq, sq, nn, mn, sn, mb, sb);
    gguf_close(g);
    unlink(path);
}

/* Llama 3.1's factors, restated from Meta's apply_scaling (factor 8, low 1, high 4, original
 * context 8192) for rope.freq_base 500000 and 64-dim heads, and the files' determinism. */
static void check_rope_factors(void) {
    char path[128], why[256] = "";
    gguf_ctx *g = mk_open("--arch llama --rope-freqs --quant f32", "rf", path, sizeof path);
    if (!g) return;
    const gguf_tensor *t = gguf_get_tensor(g, "rope_freqs.weight");
    int ok = t && t->type == QUANT_F32 && t->n_dims == 1 && t->ne[0] == 32 && gguf_n_tensors(g) == 40;
    int n_one = 0, n_eight = 0;
    for (int i = 0; ok && i < 32; i++) {
        float got = ((const float *)t->data)[i];
        double freq = pow(500000.0, -(2.0 * i) / 64), wavelen = 2 * M_PI / freq, want;
        if (wavelen < 8192 / 4.0) want = 1;
        else if (wavelen > 8192 / 1.0) want = 8;
        else {
            double smooth = (8192 / wavelen - 1) / (4 - 1);
            want = 1 / ((1 - smooth) / 8 + smooth);
        }
        n_one += want == 1;
        n_eight += want == 8;
        if (fabs(got - want) > 1e-6 * want) {
            snprintf(why, sizeof why, "factor %d is %.7g, want %.7g", i, got, want);
            ok = 0;
        }
    }
    /* the profile is the real one: some dimensions kept, some scaled by 8, a blend between */
    CHECK(ok && n_one > 0 && n_eight > 0 && n_one + n_eight < 32,
          "mkmodel --rope-freqs: rope_freqs.weight holds Llama 3.1's factors", "%s (%d ones, %d eights)",
          *why ? why : "wrong tensor", n_one, n_eight);
    gguf_close(g);

    /* head_dim 128 over n_embd / n_head = 64; yarn scaling keys */
    g = mk_open("--arch llama --head-dim 128 --rope-scaling yarn:4 --quant f32", "hd", path, sizeof path);
    if (!g) return;
    const char *type = NULL;
    float factor = 0;
    ok = u32_key(g, "llama.attention.key_length") == 128 && u32_key(g, "llama.attention.value_length") == 128 &&
         u32_key(g, "llama.rope.dimension_count") == 128 && gguf_get_tensor(g, "blk.0.attn_q.weight")->ne[1] == 512 &&
         gguf_get_tensor(g, "blk.0.attn_k.weight")->ne[1] == 256 && gguf_get_tensor(g, "blk.0.attn_output.weight")->ne[0] == 512 &&
         gguf_get_str(g, "llama.rope.scaling.type", &type) == GGUF_OK && !strcmp(type, "yarn") &&
         gguf_get_f32(g, "llama.rope.scaling.factor", &factor) == GGUF_OK && factor == 4 &&
         u32_key(g, "llama.rope.scaling.original_context_length") == 8192 / 4;
    CHECK(ok, "mkmodel --head-dim 128 --rope-scaling yarn:4: key_length 128, Q [256, 512], yarn keys",
          "a key or a shape is wrong");
    gguf_close(g);

    /* phi3's LongRoPE: factors rising from 1, the attention factor sqrt(1 + ln(32) / ln(4096)) */
    g = mk_open("--arch phi3 --quant f32", "phi", path, sizeof path);
    if (!g) return;
    const gguf_tensor *s = gguf_get_tensor(g, "rope_factors_short.weight"), *l = gguf_get_tensor(g, "rope_factors_long.weight");
    float af = 0;
    ok = s && l && gguf_get_f32(g, "phi3.rope.scaling.attn_factor", &af) == GGUF_OK &&
         fabsf(af - (float)sqrt(1 + log(32.0) / log(4096.0))) < 1e-6f &&
         u32_key(g, "phi3.rope.scaling.original_context_length") == 4096;
    for (int i = 0; ok && i < 24; i++) {
        float fs = ((const float *)s->data)[i], fl = ((const float *)l->data)[i];
        ok = fs >= 1 && fl >= fs && (i == 0 || (fs >= ((const float *)s->data)[i - 1] && fl > ((const float *)l->data)[i - 1]));
    }
    CHECK(ok, "mkmodel --arch phi3: LongRoPE factors and attention factor", "attn_factor %g or a factor is wrong", af);
    gguf_close(g);

    /* determinism of the portable values: same seed, same bytes */
    char p2[128], cmd[512];
    gguf_ctx *g2 = mk_open("--arch gemma3 --quant q4_0", "g3a", path, sizeof path);
    gguf_ctx *g3 = mk_open("--arch gemma3 --quant q4_0", "g3b", p2, sizeof p2);
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", path, p2);
    CHECK(g2 && g3 && system(cmd) == 0, "mkmodel --arch gemma3 is deterministic for a seed", "two runs differ");
    if (g2) gguf_close(g2);
    if (g3) gguf_close(g3);
    unlink(path);
    unlink(p2);
    snprintf(path, sizeof path, "%s/rf.gguf", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/hd.gguf", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/phi.gguf", dir);
    unlink(path);
}

/* The real models' shapes, one layer and a small vocabulary so the files stay small. */
static void check_real_shapes(void) {
    static const struct {
        const char *shape, *arch, *probe;
        int64_t ne0, ne1;
        uint32_t n_embd, n_ff, ctx;
    } cases[] = {
        {"llama3.1-8b", "llama", "blk.0.attn_k.weight", 4096, 1024, 4096, 14336, 131072},
        {"qwen2.5-7b", "qwen2", "blk.0.attn_k.bias", 512, 0, 3584, 18944, 131072},
        {"qwen3-8b", "qwen3", "blk.0.attn_q.weight", 4096, 4096, 4096, 12288, 40960},
        {"gemma3-12b", "gemma3", "blk.0.attn_q.weight", 3840, 4096, 3840, 15360, 131072},
        {"phi4-mini", "phi3", "blk.0.attn_qkv.weight", 3072, 5120, 3072, 8192, 131072},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256], path[128], why[256] = "", key[128];
        snprintf(args, sizeof args, "--shape %s --layers 1 --n-vocab 512 --quant q8_0", cases[i].shape);
        gguf_ctx *g = mk_open(args, cases[i].shape, path, sizeof path);
        if (!g) continue;
        const char *a = NULL;
        int ok = gguf_get_str(g, "general.architecture", &a) == GGUF_OK && !strcmp(a, cases[i].arch) &&
                 has_shape(g, cases[i].probe, cases[i].ne0, cases[i].ne1, why, sizeof why);
        snprintf(key, sizeof key, "%s.embedding_length", cases[i].arch);
        ok = ok && u32_key(g, key) == cases[i].n_embd;
        snprintf(key, sizeof key, "%s.feed_forward_length", cases[i].arch);
        ok = ok && u32_key(g, key) == cases[i].n_ff;
        snprintf(key, sizeof key, "%s.context_length", cases[i].arch);
        ok = ok && u32_key(g, key) == cases[i].ctx;
        if (!strcmp(cases[i].shape, "llama3.1-8b")) ok = ok && has_shape(g, "rope_freqs.weight", 64, 0, why, sizeof why);
        if (!strcmp(cases[i].shape, "phi4-mini")) ok = ok && has_shape(g, "rope_factors_long.weight", 48, 0, why, sizeof why);
        char tname[160];
        snprintf(tname, sizeof tname, "mkmodel --shape %s: the real model's hyperparameters", cases[i].shape);
        CHECK(ok, tname, "%s", *why ? why : "a key is wrong");
        gguf_close(g);
        unlink(path);
    }
}

int main(void) {
    const char *build = getenv("BUILD");
    snprintf(tool, sizeof tool, "%s/scripts/mkmodel", build && *build ? build : "build");
    if (access(tool, X_OK)) {
        SKIP("mkmodel", "build/scripts/mkmodel is not built (make all)");
        return 0;
    }
    snprintf(dir, sizeof dir, "/tmp/mgi-mkmodel-XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK(0, "mkmodel temporary folder", "mkdtemp failed");
        return test_done();
    }
    static const char *mixes[] = {"q4_0", "q4_k_m", "mixq", "q4_k", "q6_k", "q8_0", "f16", "f32", "bf16",
                                  "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q5_k"};
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) check_mix(mixes[i]);
    check_synthetic_vocab();
    check_fallback_and_overrides();
    check_copied_vocab();
    check_errors();
    check_arch("llama", 64, 0, 4);
    check_arch("qwen2", 64, 0, 4);
    check_arch("qwen3", 128, 1, 4);
    check_arch("phi3", 64, 1, 4);
    check_arch("gemma2", 128, 1, 4);
    check_arch("gemma3", 128, 1, 6);
    check_rope_factors();
    check_real_shapes();
    char path[128];
    snprintf(path, sizeof path, "%s/err.txt", dir);
    unlink(path);
    rmdir(dir);
    return test_done();
}
