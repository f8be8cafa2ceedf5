/* BPE (tokenizer.ggml.model "gpt2", or "gemma4"): the pre-tokenizer (tokenizer_pre.c) cuts the
 * text into words; byte-level vocabularies spell each word's bytes in GPT-2's printable byte
 * alphabet, SentencePiece-style ones (gemma4) keep its UTF-8 with spaces as U+2581; adjacent
 * symbols then merge by merge rank (lowest first). */
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

/* Appends the tokens of one word to out: its raw bytes (byte-level) or UTF-8 (raw_utf8). */
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
    size_t wl = 0, ns = 0;
    for (size_t i = 0; i < nb; ns++) {
        size_t k, adv;
        if (t->raw_utf8) {
            /* one symbol per character; a malformed byte stands alone */
            uint32_t cp;
            k = adv = unicode_decode(bytes + i, nb - i, &cp);
            memcpy(w->word + wl, bytes + i, k);
        } else {
            k = tok_bpe_byte_char((uint8_t)bytes[i], w->word + wl);
            adv = 1;
        }
        w->sym[ns] = (bpe_sym){(int32_t)ns - 1, -1, (uint32_t)wl, (uint32_t)k};
        if (ns > 0) w->sym[ns - 1].next = (int32_t)ns;
        wl += k;
        i += adv;
    }
    /* A whole word that is a token: with ignore_merges any word (llama3), for gemma4 a run of
     * newlines (llama.cpp takes those whole, whatever the merges say). */
    bool whole = t->ignore_merges;
    if (t->raw_utf8) {
        whole = true;
        for (size_t i = 0; i < nb && whole; i++) whole = bytes[i] == '\n';
    }
    if (whole) {
        int32_t id = tok_strings_find(&t->vocab, w->word, wl, 0);
        if (id >= 0) return tok_vec_push(out, id);
    }
    int rc = 0;
    w->heap.n = 0;
    for (size_t i = 1; !rc && i < ns; i++) rc = bpe_try_pair(t, w, (int32_t)i - 1, (int32_t)i);
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
    for (int32_t i = 0; !rc && ns > 0 && i >= 0; i = w->sym[i].next) {
        const bpe_sym *s = &w->sym[i];
        int32_t id = tok_strings_find(&t->vocab, w->word + s->off, s->n, 0);
        if (id >= 0) {
            rc = tok_vec_push(out, id);
            continue;
        }
        /* Not a token. raw_utf8: each byte's <0xNN> token, as llama.cpp does. Byte-level (a
         * vocabulary without the full byte alphabet): llama.cpp tries each byte of the spelling
         * alone. What is still unknown becomes the unknown token if there is one. */
        for (uint32_t j = 0; !rc && j < s->n; j++) {
            uint8_t c = (uint8_t)w->word[s->off + j];
            id = t->raw_utf8 ? t->byte_token[c] : tok_strings_find(&t->vocab, w->word + s->off + j, 1, 0);
            if (id < 0) id = t->unk;
            if (id >= 0) rc = tok_vec_push(out, id);
        }
    }
    return rc;
}

/* A copy of text with each byte that starts no well-formed UTF-8 sequence replaced by U+FFFD
 * (what llama.cpp splits on), and for each of its bytes the offset in text it came from (the
 * regexes need valid UTF-8; the merges still see the bytes as they were). NULL, with *valid set,
 * when the text is well-formed already. */
static char *utf8_sanitize(const char *text, size_t len, size_t **map, size_t *out_len, bool *valid) {
    size_t n_bad = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += unicode_decode(text + i, len - i, &cp);
        n_bad += cp == UNICODE_INVALID;
    }
    *valid = n_bad == 0;
    *map = NULL;
    if (*valid) return NULL;
    size_t n = len + 2 * n_bad;
    char *s = malloc(n);
    size_t *m = malloc((n + 1) * sizeof *m);
    if (!s || !m) {
        free(s);
        free(m);
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = unicode_decode(text + i, len - i, &cp);
        if (cp == UNICODE_INVALID) memcpy(s + o, "\xEF\xBF\xBD", 3), k = 1;
        else memcpy(s + o, text + i, k);
        for (size_t j = 0; j < (cp == UNICODE_INVALID ? 3 : k); j++) m[o + j] = i;
        o += cp == UNICODE_INVALID ? 3 : k;
        i += k;
    }
    m[o] = len;
    *map = m;
    *out_len = o;
    return s;
}

int tok_bpe_encode(const tokenizer *t, const char *text, size_t len, tok_vec *out, char *err,
                   size_t err_size) {
    if (len == 0) return 0;
    char *escaped = NULL, *clean = NULL;
    size_t *map = NULL, clean_len = 0;
    tok_spans words = {0};
    bpe_work w = {0};
    int rc = 0;
    if (t->raw_utf8) {
        /* SentencePiece-style: every space is U+2581 before anything else */
        escaped = malloc(3 * len);
        if (!escaped) goto oom;
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
            if (text[i] == ' ') memcpy(escaped + o, "\xE2\x96\x81", 3), o += 3;
            else escaped[o++] = text[i];
        }
        text = escaped;
        len = o;
    }
    bool valid;
    clean = utf8_sanitize(text, len, &map, &clean_len, &valid);
    if (!valid && !clean) goto oom;
    rc = tok_pre_split(t, valid ? text : clean, valid ? len : clean_len, &words, err, err_size);
    for (size_t i = 0; !rc && i < words.n; i++) {
        size_t a = words.s[i].off, b = a + words.s[i].len;
        if (map) a = map[a], b = map[b];
        if (b > a && bpe_word(t, &w, text + a, b - a, out)) goto oom;
    }
    goto done;
oom:
    rc = -1;
    snprintf(err, err_size, "out of memory while tokenizing %zu bytes", len);
done:
    free(escaped);
    free(clean);
    free(map);
    free(words.s);
    free(w.sym);
    free(w.heap.b);
    free(w.word);
    return rc;
}
