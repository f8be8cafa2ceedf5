/* Tests of the synthetic model generator (build/scripts/mkmodel): small models of every mix and
 * supported type are written to a temporary folder and read back with gguf_open: keys, tensor
 * names, shapes and types (against the mix rules restated here), value statistics, the
 * synthetic and copied vocabularies, overrides, determinism and error exits. */
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
    char path[128];
    snprintf(path, sizeof path, "%s/err.txt", dir);
    unlink(path);
    rmdir(dir);
    return test_done();
}
