/* mkmodel: writes GGUF files with random weights of real tensor types, for tests, `make demo` and
 * benchmarks: the Llama shapes of ../shared/tools/mkmodel.py (same shapes, mixes and value
 * statistics), and files of the other architectures as llama.cpp's converter writes them
 * (mkmodel_arch.h). Tensors are produced while the writer streams the file. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "scripts/mkmodel_arch.h"

static const char usage[] =
    "usage: mkmodel --shape S --quant Q -o OUT.gguf [options]\n"
    "       mkmodel --arch A --quant Q -o OUT.gguf [options]   (A's small test shape)\n"
    "  --shape S           Llama benchmark shapes (docs/PERF.md in ../shared): demo | tiny | mini |\n"
    "                      1b | 8b | 70b; real models' shapes: llama3.1-8b | qwen2.5-7b | qwen3-8b |\n"
    "                      gemma3-12b | phi4-mini; small test shapes: llama-s | qwen2-s | qwen3-s |\n"
    "                      phi-s | gemma2-s | gemma3-s\n"
    "  --arch A            llama | qwen2 | qwen3 | phi3 | gemma2 | gemma3: the keys, tensors and\n"
    "                      tokenizer settings llama.cpp's converter writes for A (default: the\n"
    "                      shape's; llama for the benchmark shapes, which keep their bytes without it)\n"
    "  --quant Q           q4_0 | q4_k_m | mixq, or one type for every matrix: f32 f16 bf16 q4_1\n"
    "                      q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k\n"
    "  -o FILE             output GGUF file\n"
    "  --vocab FILE        copy the tokenizer.* keys from this GGUF (default: a synthetic\n"
    "                      SentencePiece-style vocabulary with byte fallback)\n"
    "  --n-vocab N         size of the synthetic vocabulary (default: the shape's)\n"
    "  --layers N          number of layers (default: the shape's)\n"
    "  --ctx N             ARCH.context_length (default: the shape's)\n"
    "  --head-dim N        attention.key_length = value_length = N (and the rotary size), e.g.\n"
    "                      128 where n_embd / n_head is 64 (default: the shape's)\n"
    "  --rope-freqs        llama: Llama 3.1's rope_freqs.weight (factor 8, low/high frequency\n"
    "                      factors 1 and 4, original context 8192) (default off)\n"
    "  --rope-scaling T:F  rope.scaling.type linear or yarn with factor F, e.g. yarn:4 (yarn's\n"
    "                      original context: the context / F) (default: the shape's)\n"
    "  --seed N            random seed (default 1234)\n"
    "  --tensor-type P=T   tensor type T for tensors named P: a full name (blk.3.attn_v.weight),\n"
    "                      or a name without blk.N. and .weight (attn_v, output); repeatable\n";

/* ---- errors: one line on stderr, exit 2 ------------------------------------------------------ */

static void die(const char *fmt, ...) {
    va_list ap;
    fputs("mkmodel: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory (%zu bytes)", n);
    return p;
}

/* ---- random numbers ----------------------------------------------------------------------- */

typedef struct { uint64_t s; } rng;

static uint64_t rng_u64(rng *r) {  /* splitmix64: tiny state, good enough for weights */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static rng rng_for(uint64_t seed, uint64_t stream) {
    rng r = {seed * 0x2545f4914f6cdd1dull + stream};
    rng_u64(&r);
    return r;
}

/* n normal samples with standard deviation sigma (Box-Muller, two per draw). */
static void rng_normal(rng *r, float *x, int64_t n, float sigma) {
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = ((double)(rng_u64(r) >> 11) + 0.5) * 0x1p-53, u2 = (double)(rng_u64(r) >> 11) * 0x1p-53;
        double rad = sqrt(-2.0 * log(u1)) * sigma;
        x[i] = (float)(rad * cos(6.283185307179586 * u2));
        if (i + 1 < n) x[i + 1] = (float)(rad * sin(6.283185307179586 * u2));
    }
}

/* One normal sample in units of sigma, from arithmetic alone: the sum of twelve 32-bit uniforms
 * less their mean (Irwin-Hall, within 6 sigma). Exact in double (|sum| < 2^36) and free of libm,
 * so files of the architectures (whose golden outputs are committed) have the same bytes on every
 * machine; Box-Muller's log and cos may differ in the last bit between C libraries. */
static double rng_unit_portable(rng *r) {
    int64_t sum = 0;
    for (int k = 0; k < 6; k++) {
        uint64_t u = rng_u64(r);
        sum += (int64_t)(u >> 32) + (int64_t)(u & 0xffffffffu);
    }
    return (double)(sum - (6ll << 32)) * 0x1p-32;
}

/* n samples with standard deviation sigma, the portable way or Box-Muller (the Llama benchmark
 * files, whose bytes stay as they always were). */
static void rng_fill(rng *r, int portable, float *x, int64_t n, float sigma) {
    if (!portable) {
        rng_normal(r, x, n, sigma);
        return;
    }
    for (int64_t i = 0; i < n; i++) x[i] = (float)(rng_unit_portable(r) * (double)sigma);
}

/* ---- mixes ----------------------------------------------------------------------------- */

/* A mix: the matrices' base type and llama.cpp's file_type; the named mixes add rules. */
typedef enum { MIX_PURE, MIX_Q4_0, MIX_Q4_K_M, MIX_MIXQ } mix_kind;

typedef struct {
    mix_kind kind;
    uint32_t base;
    uint32_t file_type;  /* llama_ftype: what llama.cpp would call a file of this mix */
    char label[16];
} mix;

static const struct { uint32_t type; uint32_t ftype; } pure_ftypes[] = {
    {QUANT_F32, 0}, {QUANT_F16, 1}, {QUANT_Q4_0, 2}, {QUANT_Q4_1, 3}, {QUANT_Q8_0, 7},
    {QUANT_Q5_0, 8}, {QUANT_Q5_1, 9}, {QUANT_Q2_K, 10}, {QUANT_Q3_K, 11}, {QUANT_Q4_K, 14},
    {QUANT_Q5_K, 16}, {QUANT_Q6_K, 18}, {QUANT_BF16, 32},
};

/* A supported type by its name, any case ("q4_k", "BF16"); -1 when there is none. */
static int64_t type_by_name(const char *s) {
    for (uint32_t t = 0; t < QUANT_TYPE_COUNT; t++)
        if (quant_is_supported(t) && !strcasecmp(quant_type_name(t), s)) return t;
    return -1;
}

static mix parse_mix(const char *s) {
    mix m = {0};
    snprintf(m.label, sizeof m.label, "%s", s);
    if (!strcasecmp(s, "q4_0")) {
        m.kind = MIX_Q4_0, m.base = QUANT_Q4_0, m.file_type = 2;
    } else if (!strcasecmp(s, "q4_k_m")) {
        m.kind = MIX_Q4_K_M, m.base = QUANT_Q4_K, m.file_type = 15;
    } else if (!strcasecmp(s, "mixq")) {
        m.kind = MIX_MIXQ, m.base = QUANT_Q5_0, m.file_type = 15;
    } else {
        int64_t t = type_by_name(s);
        if (t < 0) die("--quant %s: unknown mix; use q4_0, q4_k_m, mixq or one of %s", s, quant_supported_list());
        m.kind = MIX_PURE, m.base = (uint32_t)t;
        for (size_t i = 0; i < sizeof pure_ftypes / sizeof pure_ftypes[0]; i++)
            if (pure_ftypes[i].type == t) m.file_type = pure_ftypes[i].ftype;
    }
    return m;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and every third between
 * get more bits for attn_v and ffn_down in its _M mixes. */
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The mix's type for a matrix (role: attn_q, ffn_down, output, token_embd, ...; layer -1 for
 * token_embd and output). mixq mirrors llama.cpp's Q4_K_M on shapes that cannot hold K blocks
 * (aidreams260K-mixq.gguf): Q5_0 with Q8_0 for attn_v on more-bits layers and the output head,
 * ffn_down in F16. */
static uint32_t mix_type(const mix *m, const char *role, int layer, int n_layer) {
    int is_out = !strcmp(role, "output");
    int big = layer >= 0 && (!strcmp(role, "attn_v") || !strcmp(role, "ffn_down")) && more_bits(layer, n_layer);
    switch (m->kind) {
    case MIX_Q4_0: return is_out ? QUANT_Q6_K : QUANT_Q4_0;
    case MIX_Q4_K_M:
        if (!strcmp(role, "attn_qkv")) return QUANT_Q5_K;  /* llama.cpp's Q4_K_M rule for fused QKV */
        return is_out || big ? QUANT_Q6_K : QUANT_Q4_K;
    case MIX_MIXQ:
        if (!strcmp(role, "ffn_down")) return QUANT_F16;
        return is_out || (big && !strcmp(role, "attn_v")) ? QUANT_Q8_0 : QUANT_Q5_0;
    case MIX_PURE: break;
    }
    return m->base;
}

/* llama.cpp's fallback when a row is not a whole number of the chosen type's blocks (K types
 * need rows of 256): the nearest legacy type with 32-weight blocks, else F16. */
static uint32_t fit_type(uint32_t t, int64_t ne0) {
    if (ne0 % quant_traits_of(t)->block_elems == 0) return t;
    switch (t) {
    case QUANT_Q2_K: case QUANT_Q3_K: t = QUANT_Q4_0; break;
    case QUANT_Q4_K: t = QUANT_Q5_0; break;
    case QUANT_Q5_K: t = QUANT_Q5_1; break;
    case QUANT_Q6_K: t = QUANT_Q8_0; break;
    default: break;
    }
    return ne0 % quant_traits_of(t)->block_elems == 0 ? t : QUANT_F16;
}

/* ---- --tensor-type overrides ---------------------------------------------------------------- */

typedef struct { const char *pattern; size_t len; uint32_t type; int used; } override;

/* A pattern names a tensor in full, or without its "blk.N." prefix, with or without ".weight". */
static int pattern_matches(const char *p, size_t plen, const char *name) {
    const char *names[2] = {name, NULL};
    if (!strncmp(name, "blk.", 4)) {
        const char *dot = strchr(name + 4, '.');
        if (dot) names[1] = dot + 1;
    }
    for (int k = 0; k < 2 && names[k]; k++) {
        const char *n = names[k];
        if (!strncmp(n, p, plen) && (n[plen] == 0 || !strcmp(n + plen, ".weight"))) return 1;
    }
    return 0;
}

/* ---- tensor values -------------------------------------------------------------------------- */

/* Values (as docs/PERF.md asks): matrices zero-mean with std 1/sqrt(fan-in), fan-in = ne[0];
 * norms near 1 and biases in F32 (row_values). Small models (up to DIRECT_MAX parameters) quantise
 * every random row with the reference quantisers, so each block is exactly what llama.cpp's
 * quantiser would make of that row. Larger ones would take minutes that way, so they quantise
 * a pool of random rows once per (type, fan-in) and assemble every row from units (a block, or
 * up to 256 floats) picked at random from the pool: the same statistics and genuine quantiser
 * output, written as fast as the disk takes it. */
#define DIRECT_MAX (64ll << 20)
#define POOL_ELEMS (1 << 20)

typedef struct {
    uint32_t type;
    int64_t ne0;
    float scale;         /* of the rows' standard deviation, as tensor_spec's */
    uint8_t *bytes;      /* quantised pool rows */
    int64_t n_units;
    size_t unit_bytes;
} pool;

typedef struct {
    uint64_t seed;
    int direct;
    int portable;        /* rng_fill's portable samples (every file but the Llama benchmark ones) */
    pool pools[16];
    int n_pools;
} generator;

/* What a tensor holds: a weight matrix, a norm's weights (near 1), a bias, or given values. */
typedef enum { T_MATRIX, T_NORM, T_BIAS, T_DATA } tensor_kind;

typedef struct {
    generator *g;
    char name[96];
    uint32_t type;
    int64_t ne[2];
    tensor_kind kind;
    const float *data;   /* T_DATA: ne[0] values */
    float scale;         /* T_MATRIX: standard deviation x sqrt(fan-in); T_NORM: the centre (a power of 2) */
    int index;
} tensor_spec;

/* Elements of a pool unit: whole blocks, doubled while the row allows, up to 256 elements
 * (so plain-float rows are not assembled value by value). */
static int64_t unit_elems(uint32_t type, int64_t ne0) {
    int64_t u = quant_traits_of(type)->block_elems;
    while (u * 2 <= 256 && ne0 % (u * 2) == 0) u *= 2;
    return u;
}

static const pool *pool_get(generator *g, uint32_t type, int64_t ne0, float scale) {
    for (int i = 0; i < g->n_pools; i++)
        if (g->pools[i].type == type && g->pools[i].ne0 == ne0 && g->pools[i].scale == scale) return &g->pools[i];
    if (g->n_pools == (int)(sizeof g->pools / sizeof g->pools[0])) die("internal: too many value pools");
    pool *p = &g->pools[g->n_pools++];
    int64_t rows = POOL_ELEMS / ne0 > 0 ? POOL_ELEMS / ne0 : 1;
    size_t rb = quant_row_bytes(type, ne0);
    float *x = xmalloc((size_t)ne0 * sizeof(float));
    rng r = rng_for(g->seed, (0x9001ull << 40) | ((uint64_t)type << 32) | (uint64_t)ne0);
    char err[256];
    p->type = type;
    p->ne0 = ne0;
    p->scale = scale;
    p->bytes = xmalloc(rb * (size_t)rows);
    for (int64_t i = 0; i < rows; i++) {
        rng_fill(&r, g->portable, x, ne0, scale / sqrtf((float)ne0));
        if (quant_quant_row(type, x, p->bytes + rb * (size_t)i, ne0, err, sizeof err)) die("%s", err);
    }
    free(x);
    int64_t ue = unit_elems(type, ne0);
    p->unit_bytes = quant_row_bytes(type, ue);
    p->n_units = rows * (ne0 / ue);
    return p;
}

/* One row of a tensor's values as floats. Norms: 1 + 0.01 N(0, 1) in the Llama benchmark files;
 * scale x (1 + N(0, 1)/8) elsewhere, wide enough that an engine that drops a norm's weights is caught (the
 * product with 1/8 and the sum are exact in double, so the bytes are the same everywhere). Gemma's
 * converter stores 1 + w for its (1 + w) norms, so its files hold weights near 1 too. Biases:
 * N(0, 1/2), on the scale of the q/k/v outputs they shift. */
static void row_values(const tensor_spec *t, rng *r, float *x) {
    int64_t ne0 = t->ne[0];
    const generator *g = t->g;
    switch (t->kind) {
    case T_DATA: memcpy(x, t->data, sizeof(float) * (size_t)ne0); break;
    case T_NORM:
        if (!g->portable) {
            rng_normal(r, x, ne0, 0.01f);
            for (int64_t j = 0; j < ne0; j++) x[j] += 1.0f;
        } else {
            for (int64_t j = 0; j < ne0; j++) x[j] = (float)((1.0 + rng_unit_portable(r) * 0.125) * t->scale);
        }
        break;
    case T_BIAS: rng_fill(r, g->portable, x, ne0, 0.5f); break;
    case T_MATRIX: rng_fill(r, g->portable, x, ne0, t->scale / sqrtf((float)ne0)); break;
    }
}

/* gguf_fill_fn: the whole tensor's bytes, row by row (the writer asks for a tensor in one call;
 * its random stream starts from the seed and the tensor's index, so files are reproducible). */
static int fill_tensor(void *dst, size_t size, void *user) {
    tensor_spec *t = user;
    int64_t ne0 = t->ne[0];
    size_t rb = quant_row_bytes(t->type, ne0);
    if (rb == 0 || size % rb) return -1;
    rng r = rng_for(t->g->seed, (uint64_t)t->index + 1);
    uint8_t *out = dst;
    int64_t rows = (int64_t)(size / rb);
    if (t->kind != T_MATRIX || t->g->direct) {
        float *x = xmalloc((size_t)ne0 * sizeof(float));
        char err[256];
        for (int64_t i = 0; i < rows; i++, out += rb) {
            row_values(t, &r, x);
            if (quant_quant_row(t->type, x, out, ne0, err, sizeof err)) {
                free(x);
                return -1;
            }
        }
        free(x);
        return 0;
    }
    const pool *p = pool_get(t->g, t->type, ne0, t->scale);
    for (size_t off = 0; off < size; off += p->unit_bytes) {
        uint64_t k = rng_u64(&r) % (uint64_t)p->n_units;
        memcpy(out + off, p->bytes + k * p->unit_bytes, p->unit_bytes);
    }
    return 0;
}

/* ---- tokenizer ------------------------------------------------------------------------------ */

static int64_t copy_vocab(gguf_writer *w, const char *path) {
    char err[512];
    gguf_ctx *v = gguf_open(path, 1, err, sizeof err);
    if (!v) die("--vocab: %s", err);
    const gguf_value *tokens;
    if (gguf_get_arr(v, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens) != GGUF_OK || tokens->v.arr.n == 0)
        die("--vocab %s: no tokenizer.ggml.tokens string array; give a vocabulary GGUF", path);
    int64_t n_vocab = (int64_t)tokens->v.arr.n;
    if (n_vocab > INT32_MAX) die("--vocab %s: %lld tokens is too many", path, (long long)n_vocab);
    for (int64_t i = 0; i < gguf_n_kv(v); i++)
        if (!strncmp(gguf_key(v, i), "tokenizer.", 10)) gguf_writer_set_value(w, gguf_key(v, i), gguf_value_at(v, i));
    gguf_close(v);  /* the writer deep-copied the values */
    return n_vocab;
}

/* A SentencePiece-style ("llama") vocabulary that needs nothing from outside: <unk>, <s>, </s>,
 * the 256 byte-fallback tokens <0x00>..<0xFF>, then pieces with descending scores: every
 * printable ASCII character alone and after "▁" (the SentencePiece space), common English words
 * with every prefix (so the merge-by-score tokenizer can build them), and consonant-vowel
 * syllable strings, with and without "▁", to fill the requested size. */
#define SP "\xe2\x96\x81"

typedef struct {
    char **tok;
    float *score;
    int32_t *type;
    int64_t n, cap;
} vocab;

static int vocab_has(const vocab *v, int64_t from, int64_t to, const char *s) {
    for (int64_t i = from; i < to; i++)
        if (!strcmp(v->tok[i], s)) return 1;
    return 0;
}

static void vocab_add(vocab *v, const char *s, int32_t type) {
    if (v->n == v->cap) return;
    size_t n = strlen(s) + 1;
    v->tok[v->n] = memcpy(xmalloc(n), s, n);
    v->type[v->n] = type;
    v->score[v->n] = type == 1 ? -(float)v->n : 0.0f;
    v->n++;
}

static int64_t synth_vocab(gguf_writer *w, int64_t n_vocab, int space_prefix) {
    static const char *const words[] = {
        "the", "and", "a", "to", "was", "he", "she", "it", "they", "of", "in", "on", "with", "her",
        "his", "Once", "upon", "time", "there", "little", "girl", "boy", "named", "Lily", "Tom",
        "day", "big", "happy", "saw", "played", "said", "very", "you", "I", "is", "had", "not",
        "for", "that", "one", "wanted", "go", "park", "friends", "tree", "dog", "cat", "sun",
        "ball", "sad", "help", "home", "fun", "toy", "ran", "looked", "good", "new", "so", "but",
        "what", "we", "be", "at", "all", "like", "could", "do", "up", "out", "can", "see", "The",
        "She", "He", "They", "It", "One", "asked", "mom", "dad", "small", "bird", "water",
    };
    static const char cons[] = "bcdfghjklmnprstvwyz", vows[] = "aeiou";
    vocab v = {.cap = n_vocab};
    v.tok = xmalloc(sizeof(char *) * (size_t)n_vocab);
    v.score = xmalloc(sizeof(float) * (size_t)n_vocab);
    v.type = xmalloc(sizeof(int32_t) * (size_t)n_vocab);
    char buf[64];
    vocab_add(&v, "<unk>", 2);
    vocab_add(&v, "<s>", 3);
    vocab_add(&v, "</s>", 3);
    for (int b = 0; b < 256; b++) {
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        vocab_add(&v, buf, 6);
    }
    int64_t first = v.n;
    vocab_add(&v, SP, 1);
    for (int c = 33; c < 127; c++) {
        snprintf(buf, sizeof buf, "%c", c);
        vocab_add(&v, buf, 1);
        snprintf(buf, sizeof buf, SP "%c", c);
        vocab_add(&v, buf, 1);
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        for (size_t len = 2; len <= strlen(words[i]); len++) {
            snprintf(buf, sizeof buf, SP "%.*s", (int)len, words[i]);
            if (!vocab_has(&v, first, v.n, buf)) vocab_add(&v, buf, 1);
        }
    }
    int64_t n_word = v.n;
    /* syllable strings of 1, 2, 3 syllables: distinct by construction (each syllable is one
     * consonant and one vowel), so only the word pieces need checking against */
    int ns = (int)(strlen(cons) * strlen(vows));
    for (int len = 1; len <= 3 && v.n < n_vocab; len++) {
        int64_t count = len == 1 ? ns : len == 2 ? (int64_t)ns * ns : (int64_t)ns * ns * ns;
        for (int64_t k = 0; k < count && v.n < n_vocab; k++) {
            char s[8];
            int64_t r = k;
            for (int j = 0; j < len; j++, r /= ns) {
                s[2 * j] = cons[(r % ns) / 5];
                s[2 * j + 1] = vows[(r % ns) % 5];
            }
            s[2 * len] = 0;
            for (int sp = 0; sp < 2; sp++) {
                snprintf(buf, sizeof buf, "%s%s", sp ? SP : "", s);
                if (!vocab_has(&v, first, n_word, buf)) vocab_add(&v, buf, 1);
            }
        }
    }
    if (v.n < n_vocab) die("--n-vocab %lld: the synthetic vocabulary has only %lld pieces", (long long)n_vocab, (long long)v.n);
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, (uint64_t)v.n);
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v.score, (uint64_t)v.n);
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v.type, (uint64_t)v.n);
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
    if (!space_prefix) gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
    for (int64_t i = 0; i < v.n; i++) free(v.tok[i]);
    free(v.tok);
    free(v.score);
    free(v.type);
    return n_vocab;
}

/* ---- tensor layout -------------------------------------------------------------------------- */

typedef struct {
    tensor_spec *t;
    int n, cap;
    generator *g;
    const mix *m;
    int n_layer, tied;
    float head_scale;    /* the output head's tensor_spec.scale: 4, or 2 for Gemma's tied head that
                          * also feeds the input (x sqrt(n_embd)) */
    override *ov;
    int n_ov;
    int64_t n_params;
} layout;

/* Appends a tensor: blk.LAYER.ROLE.SUFFIX (ROLE.SUFFIX for layer -1), its type from the mix
 * (norms, biases and given values in F32, as the converter keeps them) and the overrides. */
static void layout_add(layout *L, const char *role, const char *suffix, int layer, tensor_kind kind, int64_t ne0,
                       int64_t ne1, const float *data) {
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 64;
        tensor_spec *t = realloc(L->t, sizeof(tensor_spec) * (size_t)L->cap);
        if (!t) die("out of memory");
        L->t = t;
    }
    tensor_spec *t = &L->t[L->n];
    *t = (tensor_spec){.g = L->g, .index = L->n, .kind = kind, .data = data, .ne = {ne0, ne1}, .scale = 1};
    if (layer >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s.%s", layer, role, suffix);
    else snprintf(t->name, sizeof t->name, "%s.%s", role, suffix);
    if (kind == T_MATRIX) {
        /* llama.cpp's quantiser gives a tied token_embd the output head's type */
        const char *as = L->tied && !strcmp(role, "token_embd") ? "output" : role;
        t->type = fit_type(mix_type(L->m, as, layer, L->n_layer), ne0);
        /* The architectures' files have an output head wider than 1/sqrt(n_embd) (main's
         * head_scale): peaked logits, as a trained model's are, so greedy picks are rarely
         * near-ties between engines (the Llama benchmark files keep theirs). */
        if (!strcmp(as, "output")) t->scale = L->head_scale;
    } else {
        t->type = QUANT_F32;
    }
    int explicit_type = 0;
    for (int o = 0; o < L->n_ov; o++) {
        if (pattern_matches(L->ov[o].pattern, L->ov[o].len, t->name)) {
            t->type = L->ov[o].type;
            L->ov[o].used = explicit_type = 1;
        }
    }
    if (explicit_type && ne0 % quant_traits_of(t->type)->block_elems)
        die("--tensor-type: %s has rows of %lld, not a whole number of %s blocks (%d)", t->name, (long long)ne0,
            quant_type_name(t->type), (int)quant_traits_of(t->type)->block_elems);
    L->n_params += ne0 * ne1;
    L->n++;
}

/* Gemma's post-attention and post-FFN norms are 8 x (1 + N(0, 1)/8), as large as trained Gemma
 * checkpoints' (gemma-3-270m's hold 0.6 to 10 on average, up to 100): the layers' outputs then
 * outweigh the input embedding in the residual stream. With norms near 1, the tied head (scaled
 * by sqrt(n_embd) at the input) makes every greedy continuation repeat the last token. */
#define GEMMA_POST_NORM 8

/* One layer in llama.cpp's names and shapes for the architecture; ne[0] is the fan-in.
 * q = n_head * head_dim, kv = n_head_kv * head_dim. */
static void layout_layer(layout *L, unsigned arch, int i, int64_t E, int64_t q, int64_t kv, int64_t hd, int64_t FF) {
    layout_add(L, "attn_norm", "weight", i, T_NORM, E, 1, NULL);
    if (arch & ARCH_FUSED_QKV) {
        layout_add(L, "attn_qkv", "weight", i, T_MATRIX, E, q + 2 * kv, NULL);
    } else {
        static const char *const qkv[3] = {"attn_q", "attn_k", "attn_v"};
        for (int k = 0; k < 3; k++) {
            layout_add(L, qkv[k], "weight", i, T_MATRIX, E, k ? kv : q, NULL);
            if (arch & ARCH_QKV_BIAS) layout_add(L, qkv[k], "bias", i, T_BIAS, k ? kv : q, 1, NULL);
        }
    }
    if (arch & ARCH_QK_NORM) {
        layout_add(L, "attn_q_norm", "weight", i, T_NORM, hd, 1, NULL);
        layout_add(L, "attn_k_norm", "weight", i, T_NORM, hd, 1, NULL);
    }
    layout_add(L, "attn_output", "weight", i, T_MATRIX, q, E, NULL);
    if (arch & ARCH_POST_NORMS) {
        layout_add(L, "post_attention_norm", "weight", i, T_NORM, E, 1, NULL);
        L->t[L->n - 1].scale = GEMMA_POST_NORM;
    }
    layout_add(L, "ffn_norm", "weight", i, T_NORM, E, 1, NULL);
    if (arch & ARCH_FUSED_UP) {
        layout_add(L, "ffn_up", "weight", i, T_MATRIX, E, 2 * FF, NULL);
    } else {
        layout_add(L, "ffn_gate", "weight", i, T_MATRIX, E, FF, NULL);
        layout_add(L, "ffn_up", "weight", i, T_MATRIX, E, FF, NULL);
    }
    layout_add(L, "ffn_down", "weight", i, T_MATRIX, FF, E, NULL);
    if (arch & ARCH_POST_NORMS) {
        layout_add(L, "post_ffw_norm", "weight", i, T_NORM, E, 1, NULL);
        L->t[L->n - 1].scale = GEMMA_POST_NORM;
    }
}

/* ---- main ----------------------------------------------------------------------------------- */

static long long parse_int(const char *flag, const char *s, long long lo, long long hi) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) die("%s %s: want an integer in %lld..%lld", flag, s, lo, hi);
    return v;
}

/* --rope-scaling linear:F | yarn:F */
static void parse_scaling(const char *s, shape *sh) {
    const char *colon = strchr(s, ':');
    char *end;
    double f = colon ? strtod(colon + 1, &end) : 0;
    if (!colon || end == colon + 1 || *end || !(f > 1 && f <= 1024))
        die("--rope-scaling %s: want linear:F or yarn:F with a factor F in (1, 1024], e.g. linear:4", s);
    if (!strncmp(s, "linear:", 7)) sh->scaling = ROPE_LINEAR;
    else if (!strncmp(s, "yarn:", 5)) sh->scaling = ROPE_YARN;
    else die("--rope-scaling %s: unknown type; use linear or yarn", s);
    sh->scale_factor = (float)f;
}

int main(int argc, char **argv) {
    const char *shape_name = NULL, *arch_name = NULL, *quant = NULL, *out = NULL, *vocab_path = NULL;
    const char *scaling = NULL;
    long long layers = 0, ctx = 0, n_vocab_opt = 0, head_dim = 0;
    int rope_freqs = 0;
    uint64_t seed = 1234;
    override ov[64];
    int n_ov = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--rope-freqs")) {
            rope_freqs = 1;
            continue;
        }
        if (i + 1 >= argc) die("%s: missing value (or unknown flag); see mkmodel --help", a);
        const char *val = argv[++i];
        if (!strcmp(a, "--shape")) shape_name = val;
        else if (!strcmp(a, "--arch")) arch_name = val;
        else if (!strcmp(a, "--quant")) quant = val;
        else if (!strcmp(a, "-o")) out = val;
        else if (!strcmp(a, "--vocab")) vocab_path = val;
        else if (!strcmp(a, "--n-vocab")) n_vocab_opt = parse_int(a, val, 300, 1 << 20);
        else if (!strcmp(a, "--layers")) layers = parse_int(a, val, 1, 1024);
        else if (!strcmp(a, "--ctx")) ctx = parse_int(a, val, 1, 1 << 24);
        else if (!strcmp(a, "--seed")) seed = (uint64_t)parse_int(a, val, 0, LLONG_MAX);
        else if (!strcmp(a, "--head-dim")) head_dim = parse_int(a, val, 2, 1024);
        else if (!strcmp(a, "--rope-scaling")) scaling = val;
        else if (!strcmp(a, "--tensor-type")) {
            const char *eq = strchr(val, '=');
            if (!eq || eq == val) die("--tensor-type %s: want PATTERN=TYPE, e.g. attn_v=q6_k", val);
            int64_t t = type_by_name(eq + 1);
            if (t < 0) die("--tensor-type %s: unknown type '%s'; supported: %s", val, eq + 1, quant_supported_list());
            if (n_ov == (int)(sizeof ov / sizeof ov[0])) die("--tensor-type: at most 64 overrides");
            ov[n_ov++] = (override){val, (size_t)(eq - val), (uint32_t)t, 0};
        } else die("unknown flag %s; see mkmodel --help", a);
    }
    const arch_desc *ar = NULL;
    if (arch_name && !(ar = arch_find(arch_name)))
        die("--arch %s: unknown architecture; use llama, qwen2, qwen3, phi3, gemma2 or gemma3", arch_name);
    if (!shape_name && ar) shape_name = ar->small;
    if (!shape_name || !quant || !out) die("--shape (or --arch), --quant and -o are required; see mkmodel --help");
    const shape *found = shape_find(shape_name);
    if (!found) die("--shape %s: unknown shape; see mkmodel --help for the list", shape_name);
    shape sh = *found;
    if (ar && sh.arch && strcmp(sh.arch, ar->name))
        die("--shape %s is a %s shape; it cannot be written as --arch %s", shape_name, sh.arch, ar->name);
    if (!ar) ar = arch_find(sh.arch ? sh.arch : "llama");
    if (n_vocab_opt && vocab_path) die("--n-vocab sizes the synthetic vocabulary; it cannot be used with --vocab");
    if (layers) sh.n_layer = (int)layers;
    if (ctx) sh.ctx = (int)ctx;
    if (head_dim) {
        if (head_dim % 2 || (ar->layout & ARCH_FUSED_QKV))
            die("--head-dim %lld: want an even size, and an architecture with separate Q/K/V (not phi3)", head_dim);
        sh.head_dim = (int)head_dim;
    }
    if (rope_freqs && strcmp(ar->name, "llama"))
        die("--rope-freqs: rope_freqs.weight is Llama 3.1's; --arch %s has no such tensor", ar->name);
    if (rope_freqs) sh.rope_freqs = 1;
    if (scaling) {
        if (sh.longrope_orig) die("--rope-scaling %s: phi3 scales its rope with LongRoPE factors", scaling);
        parse_scaling(scaling, &sh);
    }
    mix m = parse_mix(quant);
    int64_t E = sh.n_embd, H = sh.n_head, HKV = sh.n_head_kv, FF = sh.n_ff;
    int L = sh.n_layer;
    int64_t hd = sh.head_dim ? sh.head_dim : E / H, n_rot = sh.n_rot ? sh.n_rot : hd;
    if (H % HKV || n_rot > hd || n_rot % 2 || ((ar->layout & ARCH_FUSED_QKV) && H * hd != E))
        die("--shape %s: inconsistent heads (%lld / %lld kv, head %lld, rotary %lld)", shape_name, (long long)H,
            (long long)HKV, (long long)hd, (long long)n_rot);
    int tied = sh.tied || (ar->layout & ARCH_TIED);

    gguf_writer *w = gguf_writer_new();
    if (!w) die("out of memory");
    char name[96], key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, ar->name), key)
    snprintf(name, sizeof name, "random-%s-%s", sh.name, m.label);
    gguf_writer_set_str(w, "general.architecture", ar->name);
    gguf_writer_set_str(w, "general.name", name);
    gguf_writer_set_u32(w, "general.file_type", m.file_type);
    gguf_writer_set_u32(w, "general.quantization_version", 2);
    int64_t V = vocab_path ? copy_vocab(w, vocab_path)
                           : synth_vocab(w, n_vocab_opt ? n_vocab_opt : sh.n_vocab, !(ar->layout & ARCH_NO_SPACE));
    gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)sh.ctx);
    gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)E);
    gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)L);
    gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)FF);
    gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)H);
    gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)HKV);
    if (ar->layout & ARCH_ROPE_DIM_KEY) gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)n_rot);
    gguf_writer_set_f32(w, KEY("rope.freq_base"), sh.rope_base);
    gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), sh.rms_eps);
    if (ar->layout & ARCH_VOCAB_KEY) gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)V);
    if (sh.head_dim || (ar->layout & ARCH_HEAD_KEYS)) {
        gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)hd);
        gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)hd);
    }
    if (sh.swa) gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)sh.swa);
    if (sh.attn_softcap > 0) gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), sh.attn_softcap);
    if (sh.final_softcap > 0) gguf_writer_set_f32(w, KEY("final_logit_softcapping"), sh.final_softcap);
    if (sh.scaling != ROPE_PLAIN) {
        gguf_writer_set_str(w, KEY("rope.scaling.type"), sh.scaling == ROPE_LINEAR ? "linear" : "yarn");
        gguf_writer_set_f32(w, KEY("rope.scaling.factor"), sh.scale_factor);
        /* yarn: the context is the original one stretched by the factor, as in real configs */
        if (sh.scaling == ROPE_YARN)
            gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)(sh.ctx / sh.scale_factor));
    }
    if (sh.longrope_orig) {
        /* Phi3MiniModel: the original context, and the attention factor of LongRoPE (su) */
        double s = (double)sh.ctx / sh.longrope_orig;
        gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)sh.longrope_orig);
        gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"),
                            s > 1 ? (float)sqrt(1 + log(s) / log((double)sh.longrope_orig)) : 1.0f);
    }
#undef KEY
    gguf_writer_set_alignment(w, GGUF_DEFAULT_ALIGNMENT);  /* writes general.alignment */

    /* tensors in llama.cpp's order: token_embd, the rope factors, the layers, output_norm, output */
    generator g = {.seed = seed, .portable = sh.arch != NULL || arch_name != NULL};
    layout lay = {.g = &g, .m = &m, .n_layer = L, .tied = tied, .ov = ov, .n_ov = n_ov, .head_scale = 1};
    if (g.portable) lay.head_scale = ar->layout & ARCH_POST_NORMS ? 2 : 4;
    float *factors = xmalloc(sizeof(float) * (size_t)n_rot);  /* two halves: long/short, or rope_freqs */
    layout_add(&lay, "token_embd", "weight", -1, T_MATRIX, E, V, NULL);
    if (sh.rope_freqs) {
        arch_llama3_factors(factors, (int)(n_rot / 2), sh.rope_base, 8, 1, 4, 8192);
        layout_add(&lay, "rope_freqs", "weight", -1, T_DATA, n_rot / 2, 1, factors);
    }
    if (sh.longrope_orig) {
        arch_longrope_factors(factors, factors + n_rot / 2, (int)(n_rot / 2));
        layout_add(&lay, "rope_factors_long", "weight", -1, T_DATA, n_rot / 2, 1, factors + n_rot / 2);
        layout_add(&lay, "rope_factors_short", "weight", -1, T_DATA, n_rot / 2, 1, factors);
    }
    for (int i = 0; i < L; i++) layout_layer(&lay, ar->layout, i, E, H * hd, HKV * hd, hd, FF);
    layout_add(&lay, "output_norm", "weight", -1, T_NORM, E, 1, NULL);
    if (!tied) layout_add(&lay, "output", "weight", -1, T_MATRIX, E, V, NULL);
    for (int o = 0; o < n_ov; o++)
        if (!ov[o].used) die("--tensor-type %s: no tensor has that name", ov[o].pattern);
    g.direct = lay.n_params <= DIRECT_MAX;
    char err[512];
    for (int i = 0; i < lay.n; i++) {
        tensor_spec *t = &lay.t[i];
        if (gguf_writer_add_tensor(w, t->name, t->type, t->ne[1] == 1 ? 1 : 2, t->ne, NULL, fill_tensor, t, err,
                                   sizeof err))
            die("%s", err);
    }
    if (gguf_writer_write(w, out, err, sizeof err)) die("%s", err);
    gguf_writer_free(w);
    for (int i = 0; i < g.n_pools; i++) free(g.pools[i].bytes);
    free(lay.t);
    free(factors);
    printf("wrote %s: %s, %d tensors, %.3g M parameters, vocab %lld, %s values\n", out, ar->name, lay.n,
           (double)lay.n_params / 1e6, (long long)V, g.direct ? "quantised" : "pooled");
    return 0;
}
