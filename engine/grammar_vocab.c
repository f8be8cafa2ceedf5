/* The vocabulary side of the matcher: the token pieces in a byte trie laid out in preorder
 * (node i's subtree is i..end[i]), built once; a mask walks it from the state's position, one
 * byte per trie node, skipping a whole subtree as soon as its prefix leaves the language. So
 * tokens sharing a prefix share its work, and the transition cache makes a revisited
 * (set, character) pair one lookup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar_internal.h"

struct grammar_vocab {
    int32_t n_vocab;
    char *blob;        /* every piece, back to back */
    int64_t *off;      /* [n_vocab + 1] piece i is blob[off[i] .. off[i+1]) */
    uint8_t *is_eog;   /* [n_vocab] */
    int32_t n_nodes;
    uint8_t *byte;     /* [n_nodes] the edge byte into node i */
    uint16_t *depth;   /* [n_nodes] 1 for the root's children */
    int32_t *end;      /* [n_nodes] first node after i's subtree */
    int32_t *tok_first, *tok_n; /* [n_nodes] tokens whose piece ends at node i, in order[] */
    int32_t *order;    /* token ids sorted by piece */
    int32_t n_order;
    int max_depth;
};

#define MAX_PIECE 65535 /* depth is 16-bit: longer pieces are never allowed */

static int cmp_piece(const void *a, const void *b, void *ctx) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const grammar_vocab *v = ctx;
    int64_t lx = v->off[x + 1] - v->off[x], ly = v->off[y + 1] - v->off[y];
    int c = memcmp(v->blob + v->off[x], v->blob + v->off[y], (size_t)(lx < ly ? lx : ly));
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

void grammar_vocab_free(grammar_vocab *v) {
    if (!v) return;
    free(v->blob); free(v->off); free(v->is_eog);
    free(v->byte); free(v->depth); free(v->end); free(v->tok_first); free(v->tok_n); free(v->order);
    free(v);
}

int32_t grammar_vocab_size(const grammar_vocab *v) { return v->n_vocab; }

grammar_vocab *grammar_vocab_new(const char *const *pieces, const size_t *lens, int32_t n_vocab,
                                 const int32_t *eog, int n_eog, char *err, size_t err_size) {
    if (n_vocab <= 0 || !pieces || !lens || n_eog < 0 || (n_eog > 0 && !eog)) {
        snprintf(err, err_size, "grammar vocabulary: %d tokens, %d end-of-generation ids; hint: pass every "
                 "token's piece and the end-of-generation list", (int)n_vocab, n_eog);
        return NULL;
    }
    grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) goto oom;
    v->n_vocab = n_vocab;
    v->off = malloc(((size_t)n_vocab + 1) * sizeof *v->off);
    v->is_eog = calloc((size_t)n_vocab, 1);
    v->order = malloc((size_t)n_vocab * sizeof *v->order);
    if (!v->off || !v->is_eog || !v->order) goto oom;
    for (int i = 0; i < n_eog; i++) {
        if (eog[i] < 0 || eog[i] >= n_vocab) {
            snprintf(err, err_size, "grammar vocabulary: end-of-generation id %d is outside the vocabulary of %d",
                     (int)eog[i], (int)n_vocab);
            grammar_vocab_free(v);
            return NULL;
        }
        v->is_eog[eog[i]] = 1;
    }
    int64_t total = 0, n_nodes_max = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        v->off[i] = total;
        size_t l = pieces[i] ? lens[i] : 0;
        total += (int64_t)l;
        if (!v->is_eog[i] && l > 0 && l <= MAX_PIECE) n_nodes_max += (int64_t)l;
    }
    v->off[n_vocab] = total;
    v->blob = malloc((size_t)total + 1);
    if (!v->blob) goto oom;
    for (int32_t i = 0; i < n_vocab; i++)
        if (pieces[i] && lens[i]) memcpy(v->blob + v->off[i], pieces[i], lens[i]);
    for (int32_t i = 0; i < n_vocab; i++) {
        int64_t l = v->off[i + 1] - v->off[i];
        if (!v->is_eog[i] && l > 0 && l <= MAX_PIECE) v->order[v->n_order++] = i;
    }
    qsort_r(v->order, (size_t)v->n_order, sizeof *v->order, cmp_piece, v);
    size_t nn = (size_t)n_nodes_max + 1;
    v->byte = malloc(nn);
    v->depth = malloc(nn * sizeof *v->depth);
    v->end = malloc(nn * sizeof *v->end);
    v->tok_first = malloc(nn * sizeof *v->tok_first);
    v->tok_n = calloc(nn, sizeof *v->tok_n);
    int32_t *path = malloc((MAX_PIECE + 1) * sizeof *path); /* node at each depth of the last piece */
    if (!v->byte || !v->depth || !v->end || !v->tok_first || !v->tok_n || !path) { free(path); goto oom; }
    int64_t prev_len = 0;
    const char *prev = NULL;
    for (int32_t k = 0; k < v->n_order; k++) {
        int32_t id = v->order[k];
        const char *p = v->blob + v->off[id];
        int64_t len = v->off[id + 1] - v->off[id], lcp = 0;
        while (prev && lcp < len && lcp < prev_len && p[lcp] == prev[lcp]) lcp++;
        for (int64_t d = prev_len; d > lcp; d--) v->end[path[d - 1]] = v->n_nodes; /* close deeper nodes */
        for (int64_t d = lcp; d < len; d++) {
            int32_t i = v->n_nodes++;
            v->byte[i] = (uint8_t)p[d];
            v->depth[i] = (uint16_t)(d + 1);
            v->tok_first[i] = k;
            path[d] = i;
        }
        int32_t at = path[len - 1];
        if (v->tok_n[at] == 0) v->tok_first[at] = k;
        v->tok_n[at]++;
        prev = p;
        prev_len = len;
        if (len > v->max_depth) v->max_depth = (int)len;
    }
    for (int64_t d = prev_len; d > 0; d--) v->end[path[d - 1]] = v->n_nodes;
    free(path);
    return v;
oom:
    snprintf(err, err_size, "grammar vocabulary: out of memory for %d tokens", (int)n_vocab);
    grammar_vocab_free(v);
    return NULL;
}

int64_t grammar_fill_mask(grammar_state *s, const grammar_vocab *v, uint8_t *allowed) {
    memset(allowed, 0, (size_t)v->n_vocab);
    int32_t cur;
    uint32_t val0;
    int rem0, finished;
    grammar_state_where(s, &cur, &val0, &rem0, &finished);
    if (finished || cur <= 0) return cur < 0 || grammar_state_error(s)[0] ? -1 : 0;
    int64_t count = 0;
    if (grammar_is_complete(s))
        for (int32_t i = 0; i < v->n_vocab; i++)
            if (v->is_eog[i]) allowed[i] = 1, count++;
    int32_t *set = malloc(((size_t)v->max_depth + 1) * sizeof *set);
    uint32_t *val = malloc(((size_t)v->max_depth + 1) * sizeof *val);
    int *rem = malloc(((size_t)v->max_depth + 1) * sizeof *rem);
    if (!set || !val || !rem) {
        free(set); free(val); free(rem);
        return -1;
    }
    set[0] = cur, val[0] = val0, rem[0] = rem0;
    grammar_state_limit_work(s, GRAMMAR_MAX_MASK_WORK);
    for (int32_t i = 0; i < v->n_nodes;) {
        int d = v->depth[i];
        uint32_t pv = val[d - 1];
        int pr = rem[d - 1];
        int32_t to = grammar_state_byte(s, set[d - 1], &pv, &pr, v->byte[i]);
        if (to <= 0) {
            if (to < 0) { count = -1; break; }
            i = v->end[i];
            continue;
        }
        set[d] = to, val[d] = pv, rem[d] = pr;
        for (int32_t k = 0; k < v->tok_n[i]; k++) allowed[v->order[v->tok_first[i] + k]] = 1;
        count += v->tok_n[i];
        i++;
    }
    grammar_state_limit_work(s, INT64_MAX);
    free(set); free(val); free(rem);
    return count;
}

int grammar_allows_token(grammar_state *s, const grammar_vocab *v, int32_t id) {
    if (id < 0 || id >= v->n_vocab) return 0;
    if (v->is_eog[id]) return grammar_is_complete(s);
    int64_t len = v->off[id + 1] - v->off[id];
    int32_t set;
    uint32_t val;
    int rem, finished;
    grammar_state_where(s, &set, &val, &rem, &finished);
    if (finished || len == 0 || len > MAX_PIECE) return 0;
    const uint8_t *p = (const uint8_t *)v->blob + v->off[id];
    for (int64_t i = 0; i < len && set > 0; i++) set = grammar_state_byte(s, set, &val, &rem, p[i]);
    return set > 0;
}

int grammar_accept_token(grammar_state *s, const grammar_vocab *v, int32_t id) {
    if (id < 0 || id >= v->n_vocab) return -1;
    int32_t set;
    uint32_t val;
    int rem, finished;
    grammar_state_where(s, &set, &val, &rem, &finished);
    if (v->is_eog[id]) {
        if (!grammar_is_complete(s)) return -1;
        grammar_state_move(s, set, val, rem, 1);
        return 0;
    }
    int64_t len = v->off[id + 1] - v->off[id];
    if (len == 0 || len > MAX_PIECE) return -1;
    return grammar_accept_bytes(s, v->blob + v->off[id], (size_t)len);
}
