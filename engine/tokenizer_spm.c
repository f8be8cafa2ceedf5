/* SentencePiece-style merging as llama.cpp's llm_tokenizer_spm does it: start from UTF-8
 * characters, repeatedly merge the adjacent pair whose union is the best-scoring token
 * (leftmost on ties), and spell whatever is left that is no token with byte-fallback tokens.
 * A priority queue of candidate pairs keeps it O(n log n). */
#include <stdio.h>
#include <stdlib.h>

#include "engine/tokenizer_internal.h"
#include "engine/unicode.h"

typedef struct {
    int32_t prev, next;
    uint32_t off, n;    /* bytes of the text; n == 0 once merged into the left neighbour */
} spm_sym;

static int spm_try_pair(const tokenizer *t, const char *text, const spm_sym *sym, int32_t l, int32_t r,
                        tok_heap *h) {
    if (l < 0 || r < 0) return 0;
    uint32_t size = sym[l].n + sym[r].n;
    int32_t id = tok_strings_find(&t->vocab, text + sym[l].off, size, 0);
    if (id < 0) return 0;
    return tok_heap_push(h, (tok_bigram){t->score[id], l, r, size});
}

int tok_spm_encode(const tokenizer *t, const char *text, size_t len, tok_vec *out, char *err,
                   size_t err_size) {
    if (len == 0) return 0;
    spm_sym *sym = malloc(len * sizeof *sym);
    tok_heap h = {0};
    int rc = sym ? 0 : -1;
    int32_t n = 0;
    for (size_t off = 0; !rc && off < len; n++) {
        /* A malformed byte stands alone (llama.cpp would take as many bytes as the lead byte
         * announces, which can swallow part of a following U+2581 and lose the space). */
        uint32_t cp, cl = (uint32_t)unicode_decode(text + off, len - off, &cp);
        sym[n] = (spm_sym){n - 1, -1, (uint32_t)off, cl};
        if (n > 0) sym[n - 1].next = n;
        off += cl;
    }
    for (int32_t i = 1; !rc && i < n; i++) rc = spm_try_pair(t, text, sym, i - 1, i, &h);
    while (!rc && h.n > 0) {
        tok_bigram b = tok_heap_pop(&h);
        spm_sym *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;   /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        rc = spm_try_pair(t, text, sym, l->prev, b.left, &h);
        if (!rc) rc = spm_try_pair(t, text, sym, b.left, l->next, &h);
    }
    for (int32_t i = 0; !rc && n > 0 && i >= 0; i = sym[i].next) {
        int32_t id = tok_strings_find(&t->vocab, text + sym[i].off, sym[i].n, 0);
        if (id >= 0) {
            rc = tok_vec_push(out, id);
            continue;
        }
        for (uint32_t j = 0; !rc && j < sym[i].n; j++) {
            uint8_t byte = (uint8_t)text[sym[i].off + j];
            int32_t bt = t->byte_token[byte] >= 0 ? t->byte_token[byte] : t->unk;
            if (bt < 0) {
                snprintf(err, err_size, "byte 0x%02X has no byte-fallback token <0x%02X> and the vocabulary "
                         "has no unknown token", byte, byte);
                free(sym);
                free(h.b);
                return -1;
            }
            rc = tok_vec_push(out, bt);
        }
    }
    free(sym);
    free(h.b);
    if (rc) snprintf(err, err_size, "out of memory while tokenizing %zu bytes", len);
    return rc;
}
