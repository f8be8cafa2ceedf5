/* Writes the model-level malformed corpus: GGUF files the reader accepts but that are not a
 * runnable Llama (missing tensors, wrong shapes, mistyped or missing keys, bad vocabularies,
 * non-finite norms, unsupported types). Prints "PATH<TAB>substring the error must contain" per
 * file, and with --good also the valid base model every case is a variation of (expected "OK"). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

/* The base model: 2 layers, n_embd 32, 4 heads of 8 (2 KV heads), n_ff 256 (so that ffn_down
 * rows hold one 256-element block of a K or IQ type), 32 SentencePiece tokens. */
enum { EMBD = 32, LAYERS = 2, HEADS = 4, HEADS_KV = 2, HEAD_DIM = EMBD / HEADS, FF = 256, VOCAB = 32 };

/* One case: the base model with one thing changed. */
typedef struct {
    const char *name, *expect;
    const char *omit;                  /* a key or tensor the base leaves out */
    void (*keys)(gguf_writer *w);      /* keys written after the base's (replacing `omit`) */
    const char *tensor;                /* a tensor written with this shape and type instead */
    int64_t ne0, ne1;                  /* ne1 == 0: one dimension */
    uint32_t type;
    const char *norm;                  /* a norm vector with `bad` at index 3 */
    float bad;
    int no_tensors;                    /* a vocabulary-only file */
} bad_case;

static void k_block_count_str(gguf_writer *w) { gguf_writer_set_str(w, "llama.block_count", "four"); }
static void k_embd_f32(gguf_writer *w) { gguf_writer_set_f32(w, "llama.embedding_length", 32.0f); }
static void k_eps_str(gguf_writer *w) { gguf_writer_set_str(w, "llama.attention.layer_norm_rms_epsilon", "1e-5"); }
static void k_heads_5(gguf_writer *w) { gguf_writer_set_u32(w, "llama.attention.head_count", 5); }
static void k_heads_0(gguf_writer *w) { gguf_writer_set_u32(w, "llama.attention.head_count", 0); }
static void k_heads_kv_3(gguf_writer *w) { gguf_writer_set_u32(w, "llama.attention.head_count_kv", 3); }
static void k_layers_3(gguf_writer *w) { gguf_writer_set_u32(w, "llama.block_count", 3); }
static void k_layers_big(gguf_writer *w) { gguf_writer_set_u32(w, "llama.block_count", 1u << 30); }
static void k_embd_neg(gguf_writer *w) { gguf_writer_set_i32(w, "llama.embedding_length", -32); }
static void k_ctx_huge(gguf_writer *w) { gguf_writer_set_u64(w, "llama.context_length", 1ull << 40); }
static void k_rot_odd(gguf_writer *w) { gguf_writer_set_u32(w, "llama.rope.dimension_count", 7); }
static void k_eps_nan(gguf_writer *w) { gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", NAN); }
static void k_arch_qwen2(gguf_writer *w) { gguf_writer_set_str(w, "general.architecture", "qwen2"); }
static void k_arch_u32(gguf_writer *w) { gguf_writer_set_u32(w, "general.architecture", 1); }
static void k_bos_99999(gguf_writer *w) { gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 99999); }
static void k_eos_vocab(gguf_writer *w) { gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", VOCAB); }
static void k_unk_neg(gguf_writer *w) { gguf_writer_set_i32(w, "tokenizer.ggml.unknown_token_id", -7); }
static void k_bos_str(gguf_writer *w) { gguf_writer_set_str(w, "tokenizer.ggml.bos_token_id", "1"); }
static void k_model_bert(gguf_writer *w) { gguf_writer_set_str(w, "tokenizer.ggml.model", "bert"); }
static void k_gpt2_no_merges(gguf_writer *w) { gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"); }
static void k_gpt2_bad_merge(gguf_writer *w) {
    static const char *const merges[] = {"a b", "hi"};
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 2);
}
static void k_gpt2_merges_u32(gguf_writer *w) {
    uint32_t m[2] = {1, 2};
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_arr(w, "tokenizer.ggml.merges", GGUF_TYPE_UINT32, m, 2);
}
static void k_tokens_f32(gguf_writer *w) {
    float f[VOCAB] = {0};
    gguf_writer_set_arr(w, "tokenizer.ggml.tokens", GGUF_TYPE_FLOAT32, f, VOCAB);
}
static void k_tokens_empty(gguf_writer *w) { gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", NULL, 0); }
static void k_types_short(gguf_writer *w) {
    int32_t t[VOCAB - 1];
    for (int i = 0; i < VOCAB - 1; i++) t[i] = 1;
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, t, VOCAB - 1);
}
static void k_types_str(gguf_writer *w) {
    const char *s[VOCAB];
    for (int i = 0; i < VOCAB; i++) s[i] = "1";
    gguf_writer_set_arr_str(w, "tokenizer.ggml.token_type", s, VOCAB);
}
static void k_scores_long(gguf_writer *w) {
    float f[VOCAB + 1] = {0};
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, f, VOCAB + 1);
}
static void k_scores_int(gguf_writer *w) {
    int32_t v[VOCAB] = {0};
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_INT32, v, VOCAB);
}

static const bad_case cases[] = {
    /* missing tensors, one of each kind */
    {"missing-token-embd", "tensor token_embd.weight is missing", .omit = "token_embd.weight"},
    {"missing-attn-q", "tensor blk.1.attn_q.weight is missing", .omit = "blk.1.attn_q.weight"},
    {"missing-ffn-down", "tensor blk.0.ffn_down.weight is missing", .omit = "blk.0.ffn_down.weight"},
    {"missing-output-norm", "tensor output_norm.weight is missing", .omit = "output_norm.weight"},
    {"missing-attn-norm", "tensor blk.1.attn_norm.weight is missing", .omit = "blk.1.attn_norm.weight"},
    {"missing-layer-2", "tensor blk.2.attn_norm.weight is missing", .omit = "llama.block_count", .keys = k_layers_3},
    /* wrong shapes for the architecture */
    {"shape-attn-k", "tensor blk.0.attn_k.weight has shape [32, 32, 1, 1], expected [32, 16]",
     .tensor = "blk.0.attn_k.weight", .ne0 = EMBD, .ne1 = EMBD},
    {"shape-output", "tensor output.weight has shape [32, 31, 1, 1], expected [32, 32]",
     .tensor = "output.weight", .ne0 = EMBD, .ne1 = VOCAB - 1},
    {"shape-ffn-up-transposed", "tensor blk.1.ffn_up.weight has shape [256, 32, 1, 1], expected [32, 256]",
     .tensor = "blk.1.ffn_up.weight", .ne0 = FF, .ne1 = EMBD},
    {"shape-norm-2d", "tensor blk.0.ffn_norm.weight has shape [32, 2, 1, 1], expected [32]",
     .tensor = "blk.0.ffn_norm.weight", .ne0 = EMBD, .ne1 = 2},
    {"shape-output-norm-short", "tensor output_norm.weight has shape [16, 1, 1, 1], expected [32]",
     .tensor = "output_norm.weight", .ne0 = 16},
    {"vocab-larger-than-embd", "the vocabulary has 32 tokens but token_embd.weight only 31 rows",
     .tensor = "token_embd.weight", .ne0 = EMBD, .ne1 = VOCAB - 1, .omit = "output.weight"},
    /* metadata of the wrong type */
    {"block-count-string", "key llama.block_count has the wrong type", .omit = "llama.block_count",
     .keys = k_block_count_str},
    {"embd-float", "key llama.embedding_length has the wrong type", .omit = "llama.embedding_length",
     .keys = k_embd_f32},
    {"embd-negative", "key llama.embedding_length = -32 is out of range", .omit = "llama.embedding_length",
     .keys = k_embd_neg},
    {"eps-string", "key llama.attention.layer_norm_rms_epsilon has the wrong type",
     .omit = "llama.attention.layer_norm_rms_epsilon", .keys = k_eps_str},
    {"architecture-u32", "key general.architecture has the wrong type", .omit = "general.architecture",
     .keys = k_arch_u32},
    {"tokens-floats", "tokenizer.ggml.tokens: expected an array of strings", .omit = "tokenizer.ggml.tokens",
     .keys = k_tokens_f32},
    {"token-type-strings", "tokenizer.ggml.token_type: expected an array of integers",
     .omit = "tokenizer.ggml.token_type", .keys = k_types_str},
    {"scores-ints", "tokenizer.ggml.scores: expected an array of floats", .omit = "tokenizer.ggml.scores",
     .keys = k_scores_int},
    {"bos-string", "tokenizer.ggml.bos_token_id: expected an integer token id", .omit = "tokenizer.ggml.bos_token_id",
     .keys = k_bos_str},
    /* missing hyperparameters */
    {"missing-embd", "key llama.embedding_length is missing", .omit = "llama.embedding_length"},
    {"missing-block-count", "key llama.block_count is missing", .omit = "llama.block_count"},
    {"missing-head-count", "key llama.attention.head_count is missing", .omit = "llama.attention.head_count"},
    {"missing-ff", "key llama.feed_forward_length is missing", .omit = "llama.feed_forward_length"},
    {"missing-context", "key llama.context_length is missing", .omit = "llama.context_length"},
    {"missing-eps", "key llama.attention.layer_norm_rms_epsilon is missing",
     .omit = "llama.attention.layer_norm_rms_epsilon"},
    {"missing-architecture", "key general.architecture is missing", .omit = "general.architecture"},
    {"missing-tokens", "tokenizer.ggml.tokens: missing", .omit = "tokenizer.ggml.tokens"},
    {"missing-tokenizer-model", "tokenizer.ggml.model: missing", .omit = "tokenizer.ggml.model"},
    /* values out of range or inconsistent */
    {"heads-do-not-divide", "llama.attention.head_count = 5 does not divide llama.embedding_length = 32",
     .omit = "llama.attention.head_count", .keys = k_heads_5},
    {"heads-kv-do-not-divide", "llama.attention.head_count_kv = 3 does not divide llama.attention.head_count = 4",
     .omit = "llama.attention.head_count_kv", .keys = k_heads_kv_3},
    {"heads-zero", "key llama.attention.head_count = 0 is out of range", .omit = "llama.attention.head_count",
     .keys = k_heads_0},
    {"block-count-2e30", "key llama.block_count = 1073741824 is out of range", .omit = "llama.block_count",
     .keys = k_layers_big},
    {"context-2e40", "key llama.context_length = 1099511627776 is out of range", .omit = "llama.context_length",
     .keys = k_ctx_huge},
    {"rope-dim-odd", "llama.rope.dimension_count = 7 must be even", .omit = "llama.rope.dimension_count",
     .keys = k_rot_odd},
    {"eps-nan", "layer_norm_rms_epsilon = nan must be a positive finite number",
     .omit = "llama.attention.layer_norm_rms_epsilon", .keys = k_eps_nan},
    /* vocabularies */
    {"bos-99999", "tokenizer.ggml.bos_token_id: token id 99999 is out of range [0, 32)",
     .omit = "tokenizer.ggml.bos_token_id", .keys = k_bos_99999},
    {"eos-equals-vocab", "tokenizer.ggml.eos_token_id: token id 32 is out of range",
     .omit = "tokenizer.ggml.eos_token_id", .keys = k_eos_vocab},
    {"unk-negative", "tokenizer.ggml.unknown_token_id: token id -7 is out of range", .keys = k_unk_neg},
    {"token-type-short", "tokenizer.ggml.token_type: 31 entries for 32 tokens", .omit = "tokenizer.ggml.token_type",
     .keys = k_types_short},
    {"scores-long", "tokenizer.ggml.scores: 33 entries for 32 tokens", .omit = "tokenizer.ggml.scores",
     .keys = k_scores_long},
    {"tokens-empty", "tokenizer.ggml.tokens: empty vocabulary", .omit = "tokenizer.ggml.tokens",
     .keys = k_tokens_empty},
    {"tokenizer-bert", "tokenizer.ggml.model: tokenizer model 'bert' (WordPiece) is not supported",
     .omit = "tokenizer.ggml.model", .keys = k_model_bert},
    {"gpt2-without-merges", "tokenizer.ggml.merges: missing", .omit = "tokenizer.ggml.model",
     .keys = k_gpt2_no_merges},
    {"gpt2-merge-one-part", "tokenizer.ggml.merges[1]: 'hi' is not two parts", .omit = "tokenizer.ggml.model",
     .keys = k_gpt2_bad_merge},
    {"gpt2-merges-numbers", "tokenizer.ggml.merges: expected an array of strings", .omit = "tokenizer.ggml.model",
     .keys = k_gpt2_merges_u32},
    /* weights */
    {"nan-output-norm", "tensor output_norm.weight has a non-finite value (nan) at index 3",
     .norm = "output_norm.weight", .bad = NAN},
    {"inf-ffn-norm", "tensor blk.1.ffn_norm.weight has a non-finite value (inf) at index 3",
     .norm = "blk.1.ffn_norm.weight", .bad = INFINITY},
    {"neg-inf-attn-norm", "tensor blk.0.attn_norm.weight has a non-finite value (-inf) at index 3",
     .norm = "blk.0.attn_norm.weight", .bad = -INFINITY},
    {"iq2-xxs-weight", "tensor blk.0.ffn_down.weight has type IQ2_XXS, which mgi cannot read",
     .tensor = "blk.0.ffn_down.weight", .ne0 = FF, .ne1 = EMBD, .type = QUANT_IQ2_XXS},
    /* not a Llama model */
    {"arch-qwen2", "architecture 'qwen2' is not supported", .omit = "general.architecture", .keys = k_arch_qwen2},
    {"vocab-only", "it is a vocabulary-only file", .no_tensors = 1},
};

static const char *const base_tokens[VOCAB] = {
    "<unk>", "<s>", "</s>", "\xe2\x96\x81", "\xe2\x96\x81h", "\xe2\x96\x81hi", "a", "b", "c", "d", "e",
    "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x",
    "y", "z",
};

/* The writer rejects a key set twice, so the base skips the one a case replaces. */
static int keep(const bad_case *c, const char *name) { return !c || !c->omit || strcmp(c->omit, name); }

static void base_keys(gguf_writer *w, const bad_case *c) {
    static const struct { const char *key; uint32_t v; } u32s[] = {
        {"llama.embedding_length", EMBD}, {"llama.block_count", LAYERS},
        {"llama.attention.head_count", HEADS}, {"llama.attention.head_count_kv", HEADS_KV},
        {"llama.feed_forward_length", FF}, {"llama.context_length", 64},
        {"llama.rope.dimension_count", HEAD_DIM}, {"tokenizer.ggml.bos_token_id", 1},
        {"tokenizer.ggml.eos_token_id", 2},
    };
    if (keep(c, "general.architecture")) gguf_writer_set_str(w, "general.architecture", "llama");
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++)
        if (keep(c, u32s[i].key)) gguf_writer_set_u32(w, u32s[i].key, u32s[i].v);
    if (keep(c, "llama.attention.layer_norm_rms_epsilon"))
        gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (keep(c, "tokenizer.ggml.model")) gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (keep(c, "tokenizer.ggml.tokens")) gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", base_tokens, VOCAB);
    float scores[VOCAB];
    int32_t types[VOCAB];
    for (int i = 0; i < VOCAB; i++) {
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;   /* unknown, control, normal */
    }
    if (keep(c, "tokenizer.ggml.scores"))
        gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, VOCAB);
    if (keep(c, "tokenizer.ggml.token_type"))
        gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, VOCAB);
    if (c && c->keys) c->keys(w);
}

/* Adds one tensor (unless the case omits it or changes it): weights small pseudo-random f32,
 * norms 1 (with the case's bad value planted). */
static int add(gguf_writer *w, const bad_case *c, const char *name, int64_t ne0, int64_t ne1) {
    if (!keep(c, name)) return 0;
    uint32_t type = QUANT_F32;
    if (c && c->tensor && !strcmp(c->tensor, name)) {
        ne0 = c->ne0;
        ne1 = c->ne1;
        type = c->type;
    }
    int64_t rows = ne1 ? ne1 : 1, ne[2] = {ne0, ne1};
    size_t size = quant_row_bytes(type, ne0) * (size_t)rows;
    uint8_t *data = calloc(size, 1);
    if (!data) return -1;
    if (type == QUANT_F32) {
        float *f = (float *)data;
        uint32_t s = 2166136261u;
        for (const char *p = name; *p; p++) s = (s ^ (uint8_t)*p) * 16777619u;
        for (int64_t i = 0; i < ne0 * rows; i++) {
            s = s * 1664525u + 1013904223u;
            f[i] = ne1 ? ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.2f : 1.0f;
        }
        if (c && c->norm && !strcmp(c->norm, name)) f[3] = c->bad;
    }
    char err[512];
    int rc = gguf_writer_add_tensor(w, name, type, ne1 ? 2 : 1, ne, data, NULL, NULL, err, sizeof err);
    free(data);
    if (rc) fprintf(stderr, "gen_bad_models: %s\n", err);
    return rc;
}

static int write_model(const char *path, const bad_case *c) {
    gguf_writer *w = gguf_writer_new();
    base_keys(w, c);
    int rc = 0;
    if (!c || !c->no_tensors) {
        rc |= add(w, c, "token_embd.weight", EMBD, VOCAB);
        rc |= add(w, c, "output_norm.weight", EMBD, 0);
        rc |= add(w, c, "output.weight", EMBD, VOCAB);
        for (int l = 0; l < LAYERS; l++) {
            static const struct { const char *n; int64_t ne0, ne1; } per[] = {
                {"attn_norm", EMBD, 0}, {"attn_q", EMBD, HEADS * HEAD_DIM},
                {"attn_k", EMBD, HEADS_KV * HEAD_DIM}, {"attn_v", EMBD, HEADS_KV * HEAD_DIM},
                {"attn_output", HEADS * HEAD_DIM, EMBD}, {"ffn_norm", EMBD, 0},
                {"ffn_gate", EMBD, FF}, {"ffn_up", EMBD, FF}, {"ffn_down", FF, EMBD},
            };
            for (size_t i = 0; i < sizeof per / sizeof per[0]; i++) {
                char name[64];
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, per[i].n);
                rc |= add(w, c, name, per[i].ne0, per[i].ne1);
            }
        }
    }
    char err[512];
    if (!rc && gguf_writer_write(w, path, err, sizeof err)) {
        fprintf(stderr, "gen_bad_models: %s\n", err);
        rc = -1;
    }
    gguf_writer_free(w);
    return rc;
}

int main(int argc, char **argv) {
    int good = argc == 3 && !strcmp(argv[1], "--good");
    if (argc != 2 + good) {
        fprintf(stderr, "usage: gen_bad_models [--good] DIR\n"
                        "writes the model-level malformed corpus into DIR and prints PATH<TAB>EXPECTED "
                        "lines; --good adds the valid base model (EXPECTED \"OK\")\n");
        return 1;
    }
    const char *dir = argv[1 + good];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "gen_bad_models: cannot create %s: %s\n", dir, strerror(errno));
        return 2;
    }
    char path[4096];
    if (good) {
        snprintf(path, sizeof path, "%s/good-base.gguf", dir);
        if (write_model(path, NULL)) return 2;
        printf("%s\tOK\n", path);
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/model-%s.gguf", dir, cases[i].name);
        if (write_model(path, &cases[i])) return 2;
        printf("%s\t%s\n", path, cases[i].expect);
    }
    return 0;
}
