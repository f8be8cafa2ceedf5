/* Byte-level BPE (tokenizer.ggml.model = "gpt2"): the pre-tokenizer cuts the text into words
 * (GPT-2's or Llama 3's regex, hand-coded as llama.cpp does), each word's bytes are spelt in
 * GPT-2's printable byte alphabet, and adjacent symbols merge by merge rank (lowest first). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer_internal.h"
#include "engine/unicode.h"

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
 * get U+0100.. in byte order. */
static bool bpe_byte_is_self(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

/* The stand-ins of the other bytes, in order: 0x00-0x20 -> U+0100-U+0120, 0x7F-0xA0 ->
 * U+0121-U+0142, 0xAD -> U+0143. */
static uint32_t bpe_byte_cp(unsigned b) {
    if (bpe_byte_is_self(b)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x121 + (b - 0x7F);
    return 0x143;
}

size_t tok_bpe_byte_char(uint8_t byte, char out[2]) {
    char tmp[4];
    size_t n = unicode_encode(bpe_byte_cp(byte), tmp);
    memcpy(out, tmp, n);
    return n;
}

int tok_bpe_char_byte(uint32_t cp) {
    if (cp < 0x100) return bpe_byte_is_self(cp) ? (int)cp : -1;
    if (cp <= 0x120) return (int)(cp - 0x100);
    if (cp <= 0x142) return (int)(0x7F + (cp - 0x121));
    return cp == 0x143 ? 0xAD : -1;
}

/* ---- pre-tokenizers -------------------------------------------------------------------------- */

enum { F_OTHER = 1, F_LETTER = 2, F_NUMBER = 4, F_SPACE = 8 };

typedef struct {
    const uint32_t *cp;     /* code points (UNICODE_INVALID for a malformed byte) */
    const uint8_t *fl;      /* F_* of each */
    size_t n;
} bpe_chars;

/* Past the end: no class at all, so no rule matches there (llama.cpp's OUT_OF_RANGE). */
static unsigned FL(const bpe_chars *c, size_t i) { return i < c->n ? c->fl[i] : 0; }
static uint32_t CP(const bpe_chars *c, size_t i) { return i < c->n ? c->cp[i] : UNICODE_INVALID; }
static uint32_t lower(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

/* 's|'t|'re|'ve|'m|'ll|'d, case-insensitive when ci: the end of the match, or 0. */
static size_t contraction(const bpe_chars *c, size_t pos, bool ci) {
    if (CP(c, pos) != '\'' || pos + 1 >= c->n) return 0;
    uint32_t a = CP(c, pos + 1), b = CP(c, pos + 2);
    if (ci) a = lower(a), b = lower(b);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    if (pos + 2 < c->n && ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')))
        return pos + 3;
    return 0;
}

/* The trailing whitespace rules \s+(?!\S)|\s+ shared by both: a run of whitespace followed by
 * more text leaves its last character to start the next word. */
static size_t space_run(const bpe_chars *c, size_t pos) {
    size_t k = 0;
    while (FL(c, pos + k) & F_SPACE) k++;
    if (k > 1 && pos + k < c->n) return pos + k - 1;
    return pos + (k > 0 ? k : 1);
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t word_gpt2(const bpe_chars *c, size_t pos) {
    size_t e = contraction(c, pos, false);
    if (e) return e;
    unsigned f = CP(c, pos) == ' ' ? FL(c, pos + 1) : FL(c, pos);
    if (f & (F_LETTER | F_NUMBER | F_OTHER)) {
        e = pos + (CP(c, pos) == ' ');
        while (FL(c, e) & f) e++;
        return e;
    }
    return space_run(c, pos);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t word_llama3(const bpe_chars *c, size_t pos) {
    size_t e = contraction(c, pos, true);
    if (e) return e;
    uint32_t cp = CP(c, pos);
    unsigned f = FL(c, pos);
    if (cp != '\r' && cp != '\n' && !(f & F_NUMBER) && ((f & F_LETTER) || (FL(c, pos + 1) & F_LETTER))) {
        e = pos + 1;
        while (FL(c, e) & F_LETTER) e++;
        return e;
    }
    if (f & F_NUMBER) {
        e = pos;
        while (e - pos < 3 && (FL(c, e) & F_NUMBER)) e++;
        return e;
    }
    unsigned f2 = cp == ' ' ? FL(c, pos + 1) : f;
    if (f2 & F_OTHER) {
        e = pos + (cp == ' ');
        while (FL(c, e) & F_OTHER) e++;
        while (CP(c, e) == '\r' || CP(c, e) == '\n') e++;
        return e;
    }
    size_t last_nl = 0;
    for (size_t k = pos; FL(c, k) & F_SPACE; k++)
        if (CP(c, k) == '\r' || CP(c, k) == '\n') last_nl = k + 1;
    if (last_nl) return last_nl;
    return space_run(c, pos);
}

/* ---- merging --------------------------------------------------------------------------------- */

typedef struct {
    int32_t prev, next;
    uint32_t off, n;    /* bytes of the spelt word; n == 0 once merged into the left neighbour */
} bpe_sym;

typedef struct {
    bpe_sym *sym;
    size_t cap;
    tok_heap heap;
    char *word;         /* the word in the byte alphabet */
    size_t word_cap;
} bpe_work;

static int bpe_try_pair(const tokenizer *t, bpe_work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return 0;
    const bpe_sym *s = w->sym;
    uint32_t size = s[l].n + s[r].n;
    int32_t rank = tok_strings_find(&t->merges, w->word + s[l].off, size, s[l].n);
    if (rank < 0) return 0;
    return tok_heap_push(&w->heap, (tok_bigram){-(double)rank, l, r, size});
}

/* Appends the tokens of one word (raw bytes) to out. */
static int bpe_word(const tokenizer *t, bpe_work *w, const char *bytes, size_t nb, tok_vec *out) {
    if (nb * 2 > w->word_cap) {
        free(w->word);
        w->word_cap = nb * 2;
        w->word = malloc(w->word_cap);
        if (!w->word) return -1;
    }
    if (nb > w->cap) {
        free(w->sym);
        w->cap = nb;
        w->sym = malloc(nb * sizeof *w->sym);
        if (!w->sym) return -1;
    }
    size_t wl = 0;
    for (size_t i = 0; i < nb; i++) {
        size_t k = tok_bpe_byte_char((uint8_t)bytes[i], w->word + wl);
        w->sym[i] = (bpe_sym){(int32_t)i - 1, i + 1 < nb ? (int32_t)i + 1 : -1, (uint32_t)wl, (uint32_t)k};
        wl += k;
    }
    if (t->ignore_merges) {
        int32_t id = tok_strings_find(&t->vocab, w->word, wl, 0);
        if (id >= 0) return tok_vec_push(out, id);
    }
    int rc = 0;
    w->heap.n = 0;
    for (size_t i = 1; !rc && i < nb; i++) rc = bpe_try_pair(t, w, (int32_t)i - 1, (int32_t)i);
    while (!rc && w->heap.n > 0) {
        tok_bigram b = tok_heap_pop(&w->heap);
        bpe_sym *l = &w->sym[b.left], *r = &w->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;   /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = b.left;
        rc = bpe_try_pair(t, w, l->prev, b.left);
        if (!rc) rc = bpe_try_pair(t, w, b.left, l->next);
    }
    for (int32_t i = 0; !rc && nb > 0 && i >= 0; i = w->sym[i].next) {
        const bpe_sym *s = &w->sym[i];
        int32_t id = tok_strings_find(&t->vocab, w->word + s->off, s->n, 0);
        if (id >= 0) {
            rc = tok_vec_push(out, id);
            continue;
        }
        /* Not a token (a vocabulary without the full byte alphabet): llama.cpp tries each byte
         * of the spelling alone; what is still unknown becomes the unknown token if any. */
        for (uint32_t j = 0; !rc && j < s->n; j++) {
            id = tok_strings_find(&t->vocab, w->word + s->off + j, 1, 0);
            if (id < 0) id = t->unk;
            if (id >= 0) rc = tok_vec_push(out, id);
        }
    }
    return rc;
}

int tok_bpe_encode(const tokenizer *t, const char *text, size_t len, tok_vec *out, char *err,
                   size_t err_size) {
    if (len == 0) return 0;
    uint32_t *cp = malloc(len * sizeof *cp);
    uint8_t *fl = malloc(len);
    size_t *at = malloc((len + 1) * sizeof *at);   /* byte offset of each code point */
    bpe_work w = {0};
    int rc = cp && fl && at ? 0 : -1;
    size_t n = 0;
    for (size_t off = 0; !rc && off < len; n++) {
        at[n] = off;
        off += unicode_decode(text + off, len - off, &cp[n]);
        static const uint8_t flag[4] = {F_OTHER, F_LETTER, F_NUMBER, F_SPACE};
        fl[n] = flag[unicode_class(cp[n])];
    }
    if (!rc) at[n] = len;
    bpe_chars c = {cp, fl, n};
    for (size_t pos = 0; !rc && pos < n;) {
        size_t end = t->pre == TOK_PRE_LLAMA3 ? word_llama3(&c, pos) : word_gpt2(&c, pos);
        rc = bpe_word(t, &w, text + at[pos], at[end] - at[pos], out);
        pos = end;
    }
    free(cp);
    free(fl);
    free(at);
    free(w.sym);
    free(w.heap.b);
    free(w.word);
    if (rc) snprintf(err, err_size, "out of memory while tokenizing %zu bytes", len);
    return rc;
}
