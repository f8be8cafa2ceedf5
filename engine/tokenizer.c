/* The tokenizer's common part: loading the vocabulary from GGUF metadata (checked: counts,
 * array types, special ids in range), the special-token split of the input and the decoded
 * pieces. The merge algorithms live in tokenizer_spm.c and tokenizer_bpe.c, the pre-tokenizers
 * in tokenizer_pre.c, ids back to text in tokenizer_decode.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer_internal.h"
#include "engine/unicode.h"

static void tok_err(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void tok_err(char *err, size_t err_size, const char *fmt, ...) {
    if (!err || !err_size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

/* ---- string map ------------------------------------------------------------------------------ */

static uint64_t tok_hash(const char *key, size_t len, uint32_t split) {
    uint64_t h = 1469598103934665603ull ^ split;   /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)key[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static bool tok_strings_eq(const tok_strings *s, int32_t i, const char *key, size_t len, uint32_t split) {
    return s->len[i] == len && (!s->split || s->split[i] == split) && !memcmp(s->arena + s->off[i], key, len);
}

int tok_strings_build(tok_strings *s, char *err, size_t err_size) {
    size_t cap = 16;
    while (cap < (size_t)s->n * 2) cap *= 2;
    s->slot = malloc(cap * sizeof *s->slot);
    if (!s->slot) {
        tok_err(err, err_size, "out of memory for a table of %d strings", s->n);
        return -1;
    }
    memset(s->slot, 0xFF, cap * sizeof *s->slot);
    s->mask = cap - 1;
    for (int32_t i = 0; i < s->n; i++) {
        const char *key = s->arena + s->off[i];
        uint32_t split = s->split ? s->split[i] : 0;
        size_t j = tok_hash(key, s->len[i], split) & s->mask;
        while (s->slot[j] >= 0 && !tok_strings_eq(s, s->slot[j], key, s->len[i], split))
            j = (j + 1) & s->mask;
        if (s->slot[j] < 0 || !s->keep_first) s->slot[j] = i;
    }
    return 0;
}

int32_t tok_strings_find(const tok_strings *s, const char *key, size_t len, uint32_t split) {
    if (!s->slot) return -1;
    size_t j = tok_hash(key, len, split) & s->mask;
    for (; s->slot[j] >= 0; j = (j + 1) & s->mask)
        if (tok_strings_eq(s, s->slot[j], key, len, split)) return s->slot[j];
    return -1;
}

void tok_strings_free(tok_strings *s) {
    free(s->arena);
    free(s->off);
    free(s->len);
    free(s->split);
    free(s->slot);
    memset(s, 0, sizeof *s);
}

/* ---- vector and heap ------------------------------------------------------------------------- */

int tok_vec_push(tok_vec *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return -1;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return 0;
}

static bool tok_bigram_before(const tok_bigram *a, const tok_bigram *b) {
    return a->key > b->key || (a->key == b->key && a->left < b->left);
}

int tok_heap_push(tok_heap *h, tok_bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        tok_bigram *nb = realloc(h->b, cap * sizeof *nb);
        if (!nb) return -1;
        h->b = nb;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && tok_bigram_before(&b, &h->b[(i - 1) / 2])) {
        h->b[i] = h->b[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->b[i] = b;
    return 0;
}

tok_bigram tok_heap_pop(tok_heap *h) {
    tok_bigram top = h->b[0], last = h->b[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && tok_bigram_before(&h->b[c + 1], &h->b[c])) c++;
        if (!tok_bigram_before(&h->b[c], &last)) break;
        h->b[i] = h->b[c];
        i = c;
    }
    if (h->n) h->b[i] = last;
    return top;
}

/* ---- loading --------------------------------------------------------------------------------- */

/* Copies a GGUF string array into s (one arena). */
static int load_strings(tok_strings *s, const gguf_value *arr, bool with_split, const char *path,
                        const char *key, char *err, size_t err_size) {
    uint64_t n = arr->v.arr.n, total = 0;
    if (n > INT32_MAX / 2) {
        tok_err(err, err_size, "%s: %s: %llu entries is too many", path, key, (unsigned long long)n);
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) total += arr->v.arr.items[i].v.str.len;
    if (total >= UINT32_MAX) {
        tok_err(err, err_size, "%s: %s: %llu bytes of text is too much", path, key,
                (unsigned long long)total);
        return -1;
    }
    s->n = (int32_t)n;
    s->arena = malloc(total + 1);
    s->off = malloc((n + 1) * sizeof *s->off);
    s->len = malloc((n + 1) * sizeof *s->len);
    s->split = with_split ? calloc(n + 1, sizeof *s->split) : NULL;
    if (!s->arena || !s->off || !s->len || (with_split && !s->split)) {
        tok_err(err, err_size, "%s: %s: out of memory", path, key);
        return -1;
    }
    uint32_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_value *v = &arr->v.arr.items[i];
        memcpy(s->arena + pos, v->v.str.ptr, v->v.str.len);
        s->off[i] = pos;
        s->len[i] = (uint32_t)v->v.str.len;
        pos += (uint32_t)v->v.str.len;
    }
    return 0;
}

/* BPE merges are "left right": the key is left+right with split = length of left. llama.cpp
 * splits at the first space after the first byte. */
static int load_merges(tokenizer *t, const gguf_ctx *g, char *err, size_t err_size) {
    const char *key = "tokenizer.ggml.merges";
    const gguf_value *arr;
    int rc = gguf_get_arr(g, key, GGUF_TYPE_STRING, &arr);
    /* Kimi K2's files may have none: llama.cpp then merges nothing, and so does mgi */
    if (rc == GGUF_ABSENT && !strcmp(t->pre_name, "kimi-k2")) return 0;
    if (rc == GGUF_ABSENT) {
        tok_err(err, err_size, "%s: %s: missing (a gpt2 tokenizer needs its merges)", gguf_path(g), key);
        return -1;
    }
    if (rc != GGUF_OK) {
        tok_err(err, err_size, "%s: %s: expected an array of strings", gguf_path(g), key);
        return -1;
    }
    if (load_strings(&t->merges, arr, true, gguf_path(g), key, err, err_size)) return -1;
    tok_strings *m = &t->merges;
    for (int32_t i = 0; i < m->n; i++) {
        char *s = m->arena + m->off[i];
        char *sp = m->len[i] > 1 ? memchr(s + 1, ' ', m->len[i] - 1) : NULL;
        if (!sp) {
            tok_err(err, err_size, "%s: %s[%d]: '%.*s' is not two parts separated by a space",
                    gguf_path(g), key, i, (int)(m->len[i] < 40 ? m->len[i] : 40), s);
            return -1;
        }
        uint32_t left = (uint32_t)(sp - s);
        memmove(sp, sp + 1, m->len[i] - left - 1);  /* drop the space, in place */
        m->len[i]--;
        m->split[i] = left;
    }
    m->keep_first = true;
    return tok_strings_build(m, err, err_size);
}

/* A special token id from metadata: absent keeps *id; -1 (or its unsigned 32-bit form) means
 * none; anything else must be a valid id. */
static int load_id(const gguf_ctx *g, const char *key, int32_t n_vocab, int32_t *id, char *err,
                   size_t err_size) {
    const gguf_value *v = gguf_get(g, key);
    if (!v) return 0;
    int64_t x;
    switch (v->type) {
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        x = v->v.i64;
        break;
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        if (v->v.u64 == UINT32_MAX || v->v.u64 == UINT64_MAX) x = -1;
        else x = v->v.u64 > INT64_MAX ? INT64_MAX : (int64_t)v->v.u64;
        break;
    default:
        tok_err(err, err_size, "%s: %s: expected an integer token id, found %s", gguf_path(g), key,
                gguf_type_name(v->type));
        return -1;
    }
    if (x < -1 || x >= n_vocab) {
        tok_err(err, err_size, "%s: %s: token id %lld is out of range [0, %d)", gguf_path(g), key,
                (long long)x, n_vocab);
        return -1;
    }
    *id = (int32_t)x;
    return 0;
}

static int load_bool(const gguf_ctx *g, const char *key, bool *b, char *err, size_t err_size) {
    if (gguf_get_bool(g, key, b) == GGUF_WRONG_TYPE) {
        tok_err(err, err_size, "%s: %s: expected a bool", gguf_path(g), key);
        return -1;
    }
    return 0;
}

/* Per-token numeric arrays: absent leaves the defaults; otherwise one element per token. */
static const gguf_value *load_per_token(const gguf_ctx *g, const char *key, int32_t n_vocab, bool want_float,
                                        int *rc, char *err, size_t err_size) {
    const gguf_value *arr = NULL;
    *rc = 0;
    int r = gguf_get_arr(g, key, GGUF_TYPE_COUNT, &arr);
    if (r == GGUF_ABSENT) return NULL;
    gguf_type e = r == GGUF_OK ? arr->v.arr.elem : GGUF_TYPE_COUNT;
    bool is_int = e <= GGUF_TYPE_INT32 || e == GGUF_TYPE_UINT64 || e == GGUF_TYPE_INT64;
    bool is_float = e == GGUF_TYPE_FLOAT32 || e == GGUF_TYPE_FLOAT64;
    if (r != GGUF_OK || (want_float ? !is_float : !is_int)) {
        tok_err(err, err_size, "%s: %s: expected an array of %s", gguf_path(g), key,
                want_float ? "floats" : "integers");
        *rc = -1;
        return NULL;
    }
    if (arr->v.arr.n != (uint64_t)n_vocab) {
        tok_err(err, err_size, "%s: %s: %llu entries for %d tokens", gguf_path(g), key,
                (unsigned long long)arr->v.arr.n, n_vocab);
        *rc = -1;
        return NULL;
    }
    return arr;
}

static void add_eog(tokenizer *t, int32_t id) {
    if (id < 0 || t->n_eog == (int)(sizeof t->eog / sizeof t->eog[0])) return;
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return;
    t->eog[t->n_eog++] = id;
}

static void drop_eog(tokenizer *t, int32_t id) {
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) {
            t->eog[i] = t->eog[--t->n_eog];
            return;
        }
}

/* The bytes a token decodes to (see tokenizer_piece), appended at dst; returns the length. */
static size_t decode_token(const tokenizer *t, int32_t id, char *dst) {
    const char *s = t->vocab.arena + t->vocab.off[id];
    size_t n = t->vocab.len[id], o = 0;
    switch (t->type[id]) {
    case TOK_CONTROL:
    case TOK_UNUSED:
        return 0;
    case TOK_USER_DEFINED:
        memcpy(dst, s, n);
        return n;
    case TOK_UNKNOWN:
        if (t->kind == TOK_KIND_SPM) {
            memcpy(dst, "\xE2\x96\x85", 3);   /* llama.cpp shows an unknown token as U+2585 */
            return 3;
        }
        break;
    case TOK_BYTE:
        if (n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
            char hex[3] = {s[3], s[4], 0}, *end;
            long b = strtol(hex, &end, 16);
            if (*end == 0) {
                dst[0] = (char)b;
                return 1;
            }
        }
        break;
    }
    if (t->kind == TOK_KIND_SPM || t->raw_utf8) {
        for (size_t i = 0; i < n; i++) {
            if (i + 3 <= n && !memcmp(s + i, "\xE2\x96\x81", 3)) {
                dst[o++] = ' ';
                i += 2;
            } else {
                dst[o++] = s[i];
            }
        }
        return o;
    }
    for (size_t i = 0; i < n;) {   /* BPE: map the byte-level alphabet back to bytes */
        uint32_t cp;
        size_t k = unicode_decode(s + i, n - i, &cp);
        int b = cp == UNICODE_INVALID ? -1 : tok_bpe_char_byte(cp);
        if (b >= 0) dst[o++] = (char)b;
        else memcpy(dst + o, s + i, k), o += k;
        i += k;
    }
    return o;
}

static int build_pieces(tokenizer *t, char *err, size_t err_size) {
    size_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) total += t->vocab.len[i] + 3;
    t->piece = malloc(total + 1);
    t->piece_off = malloc((size_t)t->n_vocab * sizeof *t->piece_off);
    t->piece_len = malloc((size_t)t->n_vocab * sizeof *t->piece_len);
    if (!t->piece || !t->piece_off || !t->piece_len || total >= UINT32_MAX) {
        tok_err(err, err_size, "out of memory for the token pieces");
        return -1;
    }
    uint32_t pos = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        size_t n = decode_token(t, i, t->piece + pos);
        t->piece_off[i] = pos;
        t->piece_len[i] = (uint32_t)n;
        pos += (uint32_t)n;
        if (n > t->max_piece) t->max_piece = n;
    }
    return 0;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->vocab.len[x] != t->vocab.len[y]) return t->vocab.len[x] > t->vocab.len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int build_specials(tokenizer *t, char *err, size_t err_size) {
    t->special = malloc((size_t)t->n_vocab * sizeof *t->special);
    if (!t->special) {
        tok_err(err, err_size, "out of memory for the special tokens");
        return -1;
    }
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->type[i];
        if ((ty == TOK_CONTROL || ty == TOK_USER_DEFINED || ty == TOK_UNKNOWN) && t->vocab.len[i] > 0)
            t->special[t->n_special++] = i;
    }
    qsort_r(t->special, (size_t)t->n_special, sizeof *t->special, cmp_special, t);
    return 0;
}

/* tokenizer.ggml.model values llama.cpp knows that mgi does not run, named for the error. */
static const struct { const char *model, *what; } other_models[] = {
    {"bert", "WordPiece"}, {"t5", "Unigram"}, {"rwkv", "RWKV"}, {"plamo2", "PLaMo-2"},
    {"whitespace", "whitespace-split BPE"}, {"hybriddna", "DNA k-mer BPE"}, {"no_vocab", "no vocabulary"},
    {"none", "no vocabulary"},
};

static int load_kind(tokenizer *t, const gguf_ctx *g, char *err, size_t err_size) {
    const char *model = NULL, *pre = NULL;
    int rc = gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (rc == GGUF_ABSENT) {
        tok_err(err, err_size, "%s: tokenizer.ggml.model: missing (the file has no tokenizer)", gguf_path(g));
        return -1;
    }
    static const char runs[] = "mgi runs: llama (SentencePiece), gpt2 (byte-level BPE), gemma4 (BPE over UTF-8)";
    if (rc != GGUF_OK) {
        tok_err(err, err_size, "%s: tokenizer.ggml.model: expected a string; %s", gguf_path(g), runs);
        return -1;
    }
    if (strcmp(model, "llama") && strcmp(model, "gpt2") && strcmp(model, "gemma4")) {
        for (size_t i = 0; i < sizeof other_models / sizeof other_models[0]; i++) {
            if (!strcmp(model, other_models[i].model)) {
                tok_err(err, err_size, "%s: tokenizer.ggml.model: tokenizer model '%s' (%s) is not supported; %s",
                        gguf_path(g), model, other_models[i].what, runs);
                return -1;
            }
        }
        tok_err(err, err_size, "%s: tokenizer.ggml.model: unknown tokenizer model '%.40s'; %s", gguf_path(g),
                model, runs);
        return -1;
    }
    snprintf(t->model_name, sizeof t->model_name, "%s", model);
    t->kind = strcmp(model, "llama") ? TOK_KIND_BPE : TOK_KIND_SPM;
    snprintf(t->pre_name, sizeof t->pre_name, "default");
    rc = gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    if (rc == GGUF_WRONG_TYPE) {
        tok_err(err, err_size, "%s: tokenizer.ggml.pre: expected a string", gguf_path(g));
        return -1;
    }
    if (t->kind == TOK_KIND_SPM) return 0;
    /* gemma4's model implies its pre-tokenizer whatever the key says, as in llama.cpp; a
     * missing or empty key means llama.cpp's default row */
    if (!strcmp(model, "gemma4")) pre = "gemma4";
    else if (rc == GGUF_ABSENT || !*pre) pre = "default";
    t->pre_entry = tok_pre_find(pre);
    if (!t->pre_entry) {
        char list[600];
        tok_pre_list(list, sizeof list);
        tok_err(err, err_size, "%s: tokenizer.ggml.pre: pre-tokenizer '%.40s' is not supported; mgi runs "
                "llama.cpp's: %s", gguf_path(g), pre, list);
        return -1;
    }
    snprintf(t->pre_name, sizeof t->pre_name, "%s", t->pre_entry->name);
    return tok_pre_compile(t, err, err_size);
}

static int load_vocab(tokenizer *t, const gguf_ctx *g, char *err, size_t err_size) {
    const char *key = "tokenizer.ggml.tokens";
    const gguf_value *arr;
    int rc = gguf_get_arr(g, key, GGUF_TYPE_STRING, &arr);
    if (rc != GGUF_OK || arr->v.arr.n == 0) {
        tok_err(err, err_size, "%s: %s: %s", gguf_path(g), key,
                rc == GGUF_ABSENT ? "missing (the file has no vocabulary)" :
                rc == GGUF_OK ? "empty vocabulary" : "expected an array of strings");
        return -1;
    }
    if (load_strings(&t->vocab, arr, false, gguf_path(g), key, err, err_size)) return -1;
    t->n_vocab = t->vocab.n;
    if (tok_strings_build(&t->vocab, err, err_size)) return -1;

    t->score = calloc((size_t)t->n_vocab, sizeof *t->score);
    t->type = malloc((size_t)t->n_vocab);
    if (!t->score || !t->type) {
        tok_err(err, err_size, "%s: out of memory for %d tokens", gguf_path(g), t->n_vocab);
        return -1;
    }
    memset(t->type, TOK_NORMAL, (size_t)t->n_vocab);
    const gguf_value *sc = load_per_token(g, "tokenizer.ggml.scores", t->n_vocab, true, &rc, err, err_size);
    if (rc) return -1;
    const gguf_value *ty = load_per_token(g, "tokenizer.ggml.token_type", t->n_vocab, false, &rc, err,
                                          err_size);
    if (rc) return -1;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (sc) t->score[i] = gguf_arr_f32(sc, (uint64_t)i);
        if (ty) {
            int64_t v = gguf_arr_i64(ty, (uint64_t)i);
            t->type[i] = v >= TOK_NORMAL && v <= TOK_BYTE ? (uint8_t)v : TOK_NORMAL;
        }
    }
    return 0;
}

static int32_t find_text(const tokenizer *t, const char *text) {
    return tok_strings_find(&t->vocab, text, strlen(text), 0);
}

/* End of generation as llama.cpp decides it: EOS, EOT and EOM, the FIM pad, repository and file
 * separator tokens (from their keys, else by text), and every token whose text is on its list,
 * these last made control tokens whatever the file says (so they are matched as special text
 * and decode to nothing). Then its two exceptions: with <|return|> and <|call|> (or <|calls|>
 * and <|flush|>), <|end|> is no end but user-defined text; with <|tool_response>, </s> is a
 * normal token. */
static int load_eog(tokenizer *t, const gguf_ctx *g, int32_t eot, int32_t eom, char *err, size_t err_size) {
    static const char *const eog_text[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
        "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};
    static const char *const fim_key[3] = {"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id",
                                           "tokenizer.ggml.fim_sep_token_id"};
    static const char *const fim_text[3][6] = {
        {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL},
        {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL},
        {"<|file_sep|>", NULL}};
    for (int f = 0; f < 3; f++) {
        int32_t id = -1;
        if (load_id(g, fim_key[f], t->n_vocab, &id, err, err_size)) return -1;
        /* by text, the first of the list the vocabulary has (llama.cpp takes whichever its hash
         * map gives first, the same when only one is there) */
        for (int k = 0; id < 0 && fim_text[f][k]; k++)
            if ((id = find_text(t, fim_text[f][k])) >= 0) t->type[id] = TOK_CONTROL;
        add_eog(t, id);
    }
    for (size_t i = 0; i < sizeof eog_text / sizeof eog_text[0]; i++) {
        int32_t id = find_text(t, eog_text[i]);
        if (id < 0) continue;
        t->type[id] = TOK_CONTROL;
        add_eog(t, id);
    }
    add_eog(t, t->eos);
    add_eog(t, eot);
    add_eog(t, eom);
    /* gpt-oss: shown as text always */
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        int32_t id = find_text(t, shown[i]);
        if (id >= 0) t->type[id] = TOK_USER_DEFINED;
    }
    int32_t end = find_text(t, "<|end|>"), s_end = find_text(t, "</s>");
    bool ret = tokenizer_is_eog(t, find_text(t, "<|return|>")), call = tokenizer_is_eog(t, find_text(t, "<|call|>"));
    bool calls = tokenizer_is_eog(t, find_text(t, "<|calls|>")), flush = tokenizer_is_eog(t, find_text(t, "<|flush|>"));
    if (tokenizer_is_eog(t, end) && ((ret && call) || (calls && flush))) {
        drop_eog(t, end);
        t->type[end] = TOK_USER_DEFINED;
    }
    if (tokenizer_is_eog(t, s_end) && tokenizer_is_eog(t, find_text(t, "<|tool_response>"))) {
        drop_eog(t, s_end);
        t->type[s_end] = TOK_NORMAL;
    }
    return 0;
}

static int load_specials(tokenizer *t, const gguf_ctx *g, char *err, size_t err_size) {
    bool spm = t->kind == TOK_KIND_SPM, gemma4 = !strcmp(t->model_name, "gemma4");
    /* llama.cpp's defaults when the keys are absent */
    t->bos = spm ? 1 : gemma4 ? -1 : 11;
    t->eos = spm ? 2 : gemma4 ? -1 : 11;
    t->unk = spm ? 0 : -1;
    t->pad = -1;
    t->add_bos = spm;
    t->clean_spaces = false;
    if (!spm) tok_pre_settings(t->pre_entry, t);
    if (t->bos >= t->n_vocab) t->bos = -1;
    if (t->eos >= t->n_vocab) t->eos = -1;
    if (t->unk >= t->n_vocab) t->unk = -1;
    int32_t eot = -1, eom = -1;
    if (load_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err, err_size) ||
        load_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err, err_size) ||
        load_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err, err_size) ||
        load_id(g, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad, err, err_size) ||
        load_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &eot, err, err_size) ||
        load_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &eom, err, err_size))
        return -1;
    t->add_space_prefix = spm;
    if (load_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err, err_size) ||
        load_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err, err_size) ||
        load_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err, err_size))
        return -1;
    if (t->force_bos) t->add_bos = true;   /* llama.cpp overrides the key for gemma4 */
    if ((t->add_bos && t->bos < 0) || (t->add_eos && t->eos < 0)) {
        const char *what = t->add_bos && t->bos < 0 ? "bos" : "eos";
        tok_err(err, err_size, "%s: tokenizer.ggml.add_%s_token is true, but tokenizer.ggml.%s_token_id is not "
                "set (hint: set the id or turn add_%s_token off)", gguf_path(g), what, what, what);
        return -1;
    }
    if (load_eog(t, g, eot, eom, err, err_size)) return -1;
    for (int b = 0; b < 256; b++) {
        char hex[8], one = (char)b;
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = tok_strings_find(&t->vocab, hex, 6, 0);
        t->byte_token[b] = id >= 0 ? id : tok_strings_find(&t->vocab, &one, 1, 0);
    }
    return 0;
}

tokenizer *tokenizer_load(const gguf_ctx *g, char *err, size_t err_size) {
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        tok_err(err, err_size, "%s: out of memory for the tokenizer", gguf_path(g));
        return NULL;
    }
    if (load_kind(t, g, err, err_size) || load_vocab(t, g, err, err_size) ||
        (t->kind == TOK_KIND_BPE && load_merges(t, g, err, err_size)) ||
        load_specials(t, g, err, err_size) || build_pieces(t, err, err_size) ||
        build_specials(t, err, err_size)) {
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    tok_pre_free(t);
    tok_strings_free(&t->vocab);
    tok_strings_free(&t->merges);
    free(t->score);
    free(t->type);
    free(t->piece);
    free(t->piece_off);
    free(t->piece_len);
    free(t->special);
    free(t);
}

const char *tokenizer_kind(const tokenizer *t) { return t->model_name; }
const char *tokenizer_pre(const tokenizer *t) { return t->pre_name; }
int32_t tokenizer_n_vocab(const tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const tokenizer *t) { return t->eos; }
bool tokenizer_add_bos(const tokenizer *t) { return t->add_bos; }
bool tokenizer_add_eos(const tokenizer *t) { return t->add_eos; }
size_t tokenizer_max_piece(const tokenizer *t) { return t->max_piece; }

bool tokenizer_is_eog(const tokenizer *t, int32_t id) {
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

int tokenizer_eog_ids(const tokenizer *t, const int32_t **ids) {
    *ids = t->eog;
    return t->n_eog;
}

bool tokenizer_is_control(const tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && t->type[id] == TOK_CONTROL;
}

const char *tokenizer_text(const tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return "";
    }
    *len = t->vocab.len[id];
    return t->vocab.arena + t->vocab.off[id];
}

const char *tokenizer_piece(const tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return "";
    }
    *len = t->piece_len[id];
    return t->piece + t->piece_off[id];
}

/* ---- encoding -------------------------------------------------------------------------------- */

typedef struct {
    int32_t token;    /* -1: plain text [off, off+len) */
    size_t off, len;
} fragment;

typedef struct {
    fragment *f;
    size_t n, cap;
} frag_list;

static int frag_push(frag_list *l, int32_t token, size_t off, size_t len) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        fragment *nf = realloc(l->f, cap * sizeof *nf);
        if (!nf) return -1;
        l->f = nf;
        l->cap = cap;
    }
    l->f[l->n++] = (fragment){token, off, len};
    return 0;
}

/* Splits the text at special-token text, as llama.cpp does: each special token in turn, longest
 * first, cuts every plain fragment where it occurs. User-defined tokens are always matched;
 * control and unknown tokens only with parse_special. */
static int split_specials(const tokenizer *t, const char *text, size_t len, bool parse_special,
                          frag_list *out) {
    frag_list cur = {0}, next = {0};
    if (frag_push(&cur, -1, 0, len)) return -1;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (!parse_special && t->type[id] != TOK_USER_DEFINED) continue;
        const char *s = t->vocab.arena + t->vocab.off[id];
        size_t sl = t->vocab.len[id];
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            fragment f = cur.f[i];
            if (f.token < 0) {
                const char *p = text + f.off, *end = p + f.len, *hit;
                while ((hit = memmem(p, (size_t)(end - p), s, sl))) {
                    if ((hit > p && frag_push(&next, -1, (size_t)(p - text), (size_t)(hit - p))) ||
                        frag_push(&next, id, 0, 0))
                        goto oom;
                    p = hit + sl;
                }
                if (p < end && frag_push(&next, -1, (size_t)(p - text), (size_t)(end - p))) goto oom;
            } else if (frag_push(&next, f.token, 0, 0)) {
                goto oom;
            }
        }
        frag_list tmp = cur;
        cur = next;
        next = tmp;
    }
    free(next.f);
    *out = cur;
    return 0;
oom:
    free(cur.f);
    free(next.f);
    return -1;
}

/* SPM: a space before the text when it starts the input or follows a special token
 * (add_space_prefix), then every space becomes U+2581. */
static int spm_fragment(const tokenizer *t, const char *s, size_t n, bool prefix, tok_vec *out,
                        char *err, size_t err_size) {
    char *buf = malloc(3 * n + 3);
    if (!buf) {
        tok_err(err, err_size, "out of memory for %zu bytes of text", n);
        return -1;
    }
    size_t o = 0;
    if (prefix) memcpy(buf, "\xE2\x96\x81", 3), o = 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') memcpy(buf + o, "\xE2\x96\x81", 3), o += 3;
        else buf[o++] = s[i];
    }
    int rc = tok_spm_encode(t, buf, o, out, err, err_size);
    free(buf);
    return rc;
}

int64_t tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_bos,
                         bool parse_special, int32_t *out, int64_t cap, char *err, size_t err_size) {
    if (len > (size_t)INT32_MAX / 4) {
        tok_err(err, err_size, "text of %zu bytes is too long to tokenize (at most %d)", len, INT32_MAX / 4);
        return -1;
    }
    tok_vec ids = {0};
    frag_list frags = {0};
    int rc = 0;
    if (add_bos && t->bos >= 0) rc = tok_vec_push(&ids, t->bos);
    if (!rc && len > 0) rc = split_specials(t, text, len, parse_special, &frags);
    if (rc) tok_err(err, err_size, "out of memory while tokenizing %zu bytes", len);
    bool prev_special = true;
    for (size_t i = 0; !rc && i < frags.n; i++) {
        const fragment *f = &frags.f[i];
        if (f->token >= 0) {
            rc = tok_vec_push(&ids, f->token);
            if (rc) tok_err(err, err_size, "out of memory while tokenizing %zu bytes", len);
            prev_special = true;
        } else if (t->kind == TOK_KIND_SPM) {
            bool prefix = t->add_space_prefix && prev_special;
            rc = spm_fragment(t, text + f->off, f->len, prefix, &ids, err, err_size);
            prev_special = false;
        } else {
            rc = tok_bpe_encode(t, text + f->off, f->len, &ids, err, err_size);
        }
    }
    free(frags.f);
    if (rc) {
        free(ids.v);
        return -1;
    }
    int64_t copy = (int64_t)ids.n < cap ? (int64_t)ids.n : cap;
    if (out && copy > 0) memcpy(out, ids.v, (size_t)copy * sizeof *out);
    free(ids.v);
    return (int64_t)ids.n;
}
