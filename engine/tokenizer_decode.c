/* Ids back to text: llama.cpp's detokeniser (leading BOS/EOS removal, the prefix space, control
 * tokens shown or not, clean_spaces) and the UTF-8-safe streaming writer. */
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer_internal.h"

/* ---- whole sequences ------------------------------------------------------------------------- */

/* llama.cpp's clean-up passes, in place, on n bytes; returns the new length. Each pass reads the
 * byte before the current one as it was, since a pass never writes ahead of what it reads. */
static size_t clean_spaces(char *text, size_t n) {
    /* " ?", " !", " .", " ," lose the space */
    size_t total1 = n, total = n ? 1 : 0;
    for (size_t i = 1; i < total1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--;
        text[total++] = x;
    }
    /* " ' " loses both spaces */
    size_t total2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    /* " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd", " 'll" keep it) */
    size_t total3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') total--;
            else if (i + 2 < total3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e')))
                total--;
        }
        text[total++] = x;
    }
    return total;
}

/* The piece llama.cpp's token_to_piece gives: control and unknown tokens as their text only
 * when asked (else nothing), unused tokens nothing, the rest as tokenizer_piece. */
static const char *decode_piece(const tokenizer *t, int32_t id, bool unparse_special, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return "";
    }
    uint8_t ty = t->type[id];
    if (ty == TOK_CONTROL || ty == TOK_UNKNOWN) {
        if (unparse_special) return tokenizer_text(t, id, len);
        *len = 0;
        return "";
    }
    return tokenizer_piece(t, id, len);
}

size_t tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, bool remove_special,
                        bool unparse_special, char *out, size_t cap) {
    bool remove_space = t->add_space_prefix;
    if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) {
        remove_space = false;
        ids++, n--;
    }
    if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->eos) n--;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t pl;
        const char *p = decode_piece(t, ids[i], unparse_special, &pl);
        if (i == 0 && remove_space && pl > 0 && p[0] == ' ') p++, pl--;
        if (total + pl <= cap) memcpy(out + total, p, pl);
        total += pl;
    }
    /* the passes only shorten the text, so they run where it fits and a short buffer reports
     * the length before them, enough for the second call */
    if (total <= cap && t->clean_spaces) total = clean_spaces(out, total);
    return total;
}

/* ---- streaming ------------------------------------------------------------------------------- */

/* How many trailing bytes of s[0..n) form the start of a UTF-8 sequence still missing bytes. */
static size_t incomplete_tail(const unsigned char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned c = s[n - k];
        if ((c & 0xC0) == 0x80) continue;           /* continuation: look further back */
        size_t need = c >= 0xF8 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

size_t tokenizer_stream_put(const tokenizer *t, tokenizer_stream *s, int32_t id, char *out, size_t cap) {
    size_t plen;
    const char *p = tokenizer_piece(t, id, &plen);
    size_t np = (size_t)s->n_pending, total = np + plen;
    /* the last 3 bytes of pending + piece decide what is held back */
    unsigned char tail[8];
    size_t nt = total < 3 ? total : 3;
    for (size_t i = 0; i < nt; i++) {
        size_t j = total - nt + i;
        tail[i] = (unsigned char)(j < np ? s->pending[j] : p[j - np]);
    }
    size_t hold = incomplete_tail(tail, nt), ready = total - hold;
    if (ready > cap) return ready;
    char keep[8];
    memcpy(keep, tail + nt - hold, hold);
    size_t from_pending = ready < np ? ready : np;
    if (from_pending) memcpy(out, s->pending, from_pending);
    if (ready > np) memcpy(out + np, p, ready - np);
    memcpy(s->pending, keep, hold);
    s->n_pending = (int)hold;
    return ready;
}

size_t tokenizer_stream_flush(tokenizer_stream *s, char *out, size_t cap) {
    size_t n = (size_t)s->n_pending;
    if (n > cap) return n;
    if (n) memcpy(out, s->pending, n);
    s->n_pending = 0;
    return n;
}
