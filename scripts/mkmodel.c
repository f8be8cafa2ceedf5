/* mkmodel: writes Llama-shaped GGUF files with random weights of real tensor types, for tests,
 * `make demo` and benchmarks (the C counterpart of ../shared/tools/mkmodel.py; same shapes, mixes
 * and value statistics). Tensors are produced while the writer streams the file. */
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

static const char usage[] =
    "usage: mkmodel --shape S --quant Q -o OUT.gguf [options]\n"
    "  --shape S           demo | tiny | mini | 1b | 8b | 70b (docs/PERF.md in ../shared)\n"
    "  --quant Q           q4_0 | q4_k_m | mixq, or one type for every matrix: f32 f16 bf16 q4_1\n"
    "                      q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k\n"
    "  -o FILE             output GGUF file\n"
    "  --vocab FILE        copy the tokenizer.* keys from this GGUF (default: a synthetic\n"
    "                      SentencePiece-style vocabulary with byte fallback)\n"
    "  --n-vocab N         size of the synthetic vocabulary (default 1024 for demo, else 32000)\n"
    "  --layers N          number of layers (default: the shape's)\n"
    "  --ctx N             llama.context_length (default 256 for demo, else 8192)\n"
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

/* ---- shapes and mixes ----------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int n_embd, n_layer, n_head, n_head_kv, n_ff, ctx, n_vocab;
} shape;

static const shape shapes[] = {
    {"demo", 128, 2, 4, 2, 384, 256, 1024},
    {"tiny", 256, 2, 4, 2, 512, 8192, 32000},
    {"mini", 1024, 12, 16, 4, 2816, 8192, 32000},
    {"1b", 2048, 16, 32, 8, 8192, 8192, 32000},
    {"8b", 4096, 32, 32, 8, 14336, 8192, 32000},
    {"70b", 8192, 80, 64, 8, 28672, 8192, 32000},
};

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
    case MIX_Q4_K_M: return is_out || big ? QUANT_Q6_K : QUANT_Q4_K;
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
 * norm weights 1 + 0.01 N(0, 1) in F32. Small models (up to DIRECT_MAX parameters) quantise
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
    uint8_t *bytes;      /* quantised pool rows */
    int64_t n_units;
    size_t unit_bytes;
} pool;

typedef struct {
    uint64_t seed;
    int direct;
    pool pools[16];
    int n_pools;
} generator;

typedef struct {
    generator *g;
    char name[96];
    uint32_t type;
    int64_t ne[2];
    int is_norm;
    int index;
} tensor_spec;

/* Elements of a pool unit: whole blocks, doubled while the row allows, up to 256 elements
 * (so plain-float rows are not assembled value by value). */
static int64_t unit_elems(uint32_t type, int64_t ne0) {
    int64_t u = quant_traits_of(type)->block_elems;
    while (u * 2 <= 256 && ne0 % (u * 2) == 0) u *= 2;
    return u;
}

static const pool *pool_get(generator *g, uint32_t type, int64_t ne0) {
    for (int i = 0; i < g->n_pools; i++)
        if (g->pools[i].type == type && g->pools[i].ne0 == ne0) return &g->pools[i];
    if (g->n_pools == (int)(sizeof g->pools / sizeof g->pools[0])) die("internal: too many value pools");
    pool *p = &g->pools[g->n_pools++];
    int64_t rows = POOL_ELEMS / ne0 > 0 ? POOL_ELEMS / ne0 : 1;
    size_t rb = quant_row_bytes(type, ne0);
    float *x = xmalloc((size_t)ne0 * sizeof(float));
    rng r = rng_for(g->seed, (0x9001ull << 40) | ((uint64_t)type << 32) | (uint64_t)ne0);
    char err[256];
    p->type = type;
    p->ne0 = ne0;
    p->bytes = xmalloc(rb * (size_t)rows);
    for (int64_t i = 0; i < rows; i++) {
        rng_normal(&r, x, ne0, 1.0f / sqrtf((float)ne0));
        if (quant_quant_row(type, x, p->bytes + rb * (size_t)i, ne0, err, sizeof err)) die("%s", err);
    }
    free(x);
    int64_t ue = unit_elems(type, ne0);
    p->unit_bytes = quant_row_bytes(type, ue);
    p->n_units = rows * (ne0 / ue);
    return p;
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
    if (t->is_norm || t->g->direct) {
        float *x = xmalloc((size_t)ne0 * sizeof(float));
        char err[256];
        for (int64_t i = 0; i < rows; i++, out += rb) {
            if (t->is_norm) {
                rng_normal(&r, x, ne0, 0.01f);
                for (int64_t j = 0; j < ne0; j++) x[j] += 1.0f;
            } else {
                rng_normal(&r, x, ne0, 1.0f / sqrtf((float)ne0));
            }
            if (quant_quant_row(t->type, x, out, ne0, err, sizeof err)) {
                free(x);
                return -1;
            }
        }
        free(x);
        return 0;
    }
    const pool *p = pool_get(t->g, t->type, ne0);
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

static int64_t synth_vocab(gguf_writer *w, int64_t n_vocab) {
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
    for (int64_t i = 0; i < v.n; i++) free(v.tok[i]);
    free(v.tok);
    free(v.score);
    free(v.type);
    return n_vocab;
}

/* ---- main ----------------------------------------------------------------------------------- */

static long long parse_int(const char *flag, const char *s, long long lo, long long hi) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) die("%s %s: want an integer in %lld..%lld", flag, s, lo, hi);
    return v;
}

int main(int argc, char **argv) {
    const char *shape_name = NULL, *quant = NULL, *out = NULL, *vocab_path = NULL;
    long long layers = 0, ctx = 0, n_vocab_opt = 0;
    uint64_t seed = 1234;
    override ov[64];
    int n_ov = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (i + 1 >= argc) die("%s: missing value (or unknown flag); see mkmodel --help", a);
        const char *val = argv[++i];
        if (!strcmp(a, "--shape")) shape_name = val;
        else if (!strcmp(a, "--quant")) quant = val;
        else if (!strcmp(a, "-o")) out = val;
        else if (!strcmp(a, "--vocab")) vocab_path = val;
        else if (!strcmp(a, "--n-vocab")) n_vocab_opt = parse_int(a, val, 300, 1 << 20);
        else if (!strcmp(a, "--layers")) layers = parse_int(a, val, 1, 1024);
        else if (!strcmp(a, "--ctx")) ctx = parse_int(a, val, 1, 1 << 24);
        else if (!strcmp(a, "--seed")) seed = (uint64_t)parse_int(a, val, 0, LLONG_MAX);
        else if (!strcmp(a, "--tensor-type")) {
            const char *eq = strchr(val, '=');
            if (!eq || eq == val) die("--tensor-type %s: want PATTERN=TYPE, e.g. attn_v=q6_k", val);
            int64_t t = type_by_name(eq + 1);
            if (t < 0) die("--tensor-type %s: unknown type '%s'; supported: %s", val, eq + 1, quant_supported_list());
            if (n_ov == (int)(sizeof ov / sizeof ov[0])) die("--tensor-type: at most 64 overrides");
            ov[n_ov++] = (override){val, (size_t)(eq - val), (uint32_t)t, 0};
        } else die("unknown flag %s; see mkmodel --help", a);
    }
    if (!shape_name || !quant || !out) die("--shape, --quant and -o are required; see mkmodel --help");
    const shape *sh = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shapes[i].name, shape_name)) sh = &shapes[i];
    if (!sh) die("--shape %s: unknown shape; use demo, tiny, mini, 1b, 8b or 70b", shape_name);
    if (n_vocab_opt && vocab_path) die("--n-vocab sizes the synthetic vocabulary; it cannot be used with --vocab");
    mix m = parse_mix(quant);
    int E = sh->n_embd, L = layers ? (int)layers : sh->n_layer, H = sh->n_head, HKV = sh->n_head_kv, FF = sh->n_ff;
    int hd = E / H;

    gguf_writer *w = gguf_writer_new();
    if (!w) die("out of memory");
    char name[96];
    snprintf(name, sizeof name, "random-%s-%s", sh->name, m.label);
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_str(w, "general.name", name);
    gguf_writer_set_u32(w, "general.file_type", m.file_type);
    gguf_writer_set_u32(w, "general.quantization_version", 2);
    int64_t V = vocab_path ? copy_vocab(w, vocab_path) : synth_vocab(w, n_vocab_opt ? n_vocab_opt : sh->n_vocab);
    gguf_writer_set_u32(w, "llama.context_length", (uint32_t)(ctx ? ctx : sh->ctx));
    gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)E);
    gguf_writer_set_u32(w, "llama.block_count", (uint32_t)L);
    gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)FF);
    gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)H);
    gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)HKV);
    gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)hd);
    gguf_writer_set_f32(w, "llama.rope.freq_base", 500000.0f);
    gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_writer_set_u32(w, "llama.vocab_size", (uint32_t)V);
    gguf_writer_set_alignment(w, GGUF_DEFAULT_ALIGNMENT);  /* writes general.alignment */

    /* tensors in llama.cpp's order; ne[0] is the fan-in (row length). dims: 'E' [E, E],
     * 'K' [E, n_head_kv * head_dim], 'F' [E, FF], 'D' [FF, E], 0 a norm [E]. */
    static const struct { const char *role; int dims; int norm; } per_layer[] = {
        {"attn_norm", 0, 1}, {"attn_q", 'E', 0}, {"attn_k", 'K', 0}, {"attn_v", 'K', 0},
        {"attn_output", 'E', 0}, {"ffn_norm", 0, 1}, {"ffn_gate", 'F', 0}, {"ffn_up", 'F', 0},
        {"ffn_down", 'D', 0},
    };
    int n_t = 3 + 9 * L;
    tensor_spec *ts = xmalloc(sizeof(tensor_spec) * (size_t)n_t);
    generator g = {.seed = seed};
    int64_t n_params = 0;
    int k = 0;
    for (int i = -1; i <= L; i++) {
        int n_here = i == -1 ? 1 : i == L ? 2 : 9;
        for (int j = 0; j < n_here; j++, k++) {
            tensor_spec *t = &ts[k];
            const char *role;
            *t = (tensor_spec){.g = &g, .index = k};
            if (i == -1) {
                role = "token_embd", t->ne[0] = E, t->ne[1] = V;
            } else if (i == L) {
                role = j == 0 ? "output_norm" : "output";
                t->ne[0] = E, t->ne[1] = j == 0 ? 1 : V, t->is_norm = j == 0;
            } else {
                role = per_layer[j].role;
                t->is_norm = per_layer[j].norm;
                t->ne[0] = per_layer[j].dims == 'D' ? FF : E;
                t->ne[1] = per_layer[j].dims == 'E' ? E : per_layer[j].dims == 'K' ? (int64_t)HKV * hd
                         : per_layer[j].dims == 'F' ? FF : per_layer[j].dims == 'D' ? E : 1;
            }
            if (i >= 0 && i < L) snprintf(t->name, sizeof t->name, "blk.%d.%s.weight", i, role);
            else snprintf(t->name, sizeof t->name, "%s.weight", role);
            t->type = t->is_norm ? QUANT_F32 : fit_type(mix_type(&m, role, i < L ? i : -1, L), t->ne[0]);
            int explicit_type = 0;
            for (int o = 0; o < n_ov; o++) {
                if (pattern_matches(ov[o].pattern, ov[o].len, t->name)) {
                    t->type = ov[o].type;
                    ov[o].used = explicit_type = 1;
                }
            }
            if (explicit_type && t->ne[0] % quant_traits_of(t->type)->block_elems)
                die("--tensor-type: %s has rows of %lld, not a whole number of %s blocks (%d)", t->name,
                    (long long)t->ne[0], quant_type_name(t->type), (int)quant_traits_of(t->type)->block_elems);
            n_params += t->ne[0] * t->ne[1];
        }
    }
    for (int o = 0; o < n_ov; o++)
        if (!ov[o].used) die("--tensor-type %s: no tensor has that name", ov[o].pattern);
    g.direct = n_params <= DIRECT_MAX;
    char err[512];
    for (int i = 0; i < n_t; i++) {
        int n_dims = ts[i].ne[1] == 1 ? 1 : 2;
        if (gguf_writer_add_tensor(w, ts[i].name, ts[i].type, (uint32_t)n_dims, ts[i].ne, NULL, fill_tensor,
                                   &ts[i], err, sizeof err))
            die("%s", err);
    }
    if (gguf_writer_write(w, out, err, sizeof err)) die("%s", err);
    gguf_writer_free(w);
    for (int i = 0; i < g.n_pools; i++) free(g.pools[i].bytes);
    free(ts);
    printf("wrote %s: %d tensors, %.3g M parameters, vocab %lld, %s values\n", out, n_t, (double)n_params / 1e6,
           (long long)V, g.direct ? "quantised" : "pooled");
    return 0;
}
