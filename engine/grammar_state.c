/* The matcher: llama.cpp's pushdown stacks, stored as interned nodes (position, parent) so that
 * a stack is one int, equal stacks are equal ints and stacks share their tails; a set of stacks
 * (the matcher's position) is interned too, and each (set, code point) transition is cached, so
 * the vocabulary walk of grammar_vocab.c mostly costs a hash lookup per trie node. Every stack
 * top is a character class; the stack -1 is the empty stack (the grammar may end here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar_internal.h"

typedef struct {
    int32_t set;
    uint32_t code;
    int32_t to;
} trans_entry;

struct grammar_state {
    const grammar *g;
    int32_t *npos, *npar; /* node id -> position of its top element, parent node (-1: bottom) */
    uint32_t *stamp;      /* node id -> the expansion round that last visited it */
    int32_t n_nodes, cap_nodes;
    int32_t *nhash; /* node id + 1; 0 empty */
    uint32_t nhash_mask;
    int32_t *pool; /* set contents: sorted node ids, -1 first when the set is complete */
    int64_t n_pool, cap_pool;
    int64_t *set_off;
    int32_t *set_len;
    int32_t n_sets, cap_sets; /* set 0: dead (no stack at all) */
    int32_t *shash;
    uint32_t shash_mask;
    trans_entry *trans;
    uint32_t trans_mask;
    int32_t n_trans;
    uint32_t round;
    /* the position: a set, and an unfinished UTF-8 sequence (value so far, bytes still due) */
    int32_t cur;
    uint32_t pvalue;
    int premain;
    int finished; /* an end-of-generation token was accepted */
    /* scratch of one expansion */
    int32_t *work;
    int64_t n_work, cap_work;
    int32_t *out;
    int32_t n_out, cap_out;
    int complete;
    int64_t budget;
    int32_t compact_at; /* node count that triggers the next compaction */
    int64_t work_total, work_limit; /* expansions since grammar_state_limit_work, and their cap */
    char error[256];
};

static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *np = realloc(*p, (size_t)c * elem);
    if (!np) return -1;
    *p = np;
    *cap = c;
    return 0;
}

static int set_error(grammar_state *s, const char *msg) {
    if (!s->error[0]) snprintf(s->error, sizeof s->error, "%s", msg);
    return -1;
}

static uint32_t mix(uint32_t a, uint32_t b) {
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static int nhash_rebuild(grammar_state *s, uint32_t size) {
    int32_t *h = calloc(size, sizeof *h);
    if (!h) return -1;
    for (int32_t id = 0; id < s->n_nodes; id++) {
        uint32_t k = mix((uint32_t)s->npos[id], (uint32_t)s->npar[id]) & (size - 1);
        while (h[k]) k = (k + 1) & (size - 1);
        h[k] = id + 1;
    }
    free(s->nhash);
    s->nhash = h;
    s->nhash_mask = size - 1;
    return 0;
}

/* The node (pos, parent), made once. -1 when out of memory. */
static int32_t node_intern(grammar_state *s, int32_t pos, int32_t parent) {
    uint32_t k = mix((uint32_t)pos, (uint32_t)parent) & s->nhash_mask;
    for (int32_t id; (id = s->nhash[k]); k = (k + 1) & s->nhash_mask)
        if (s->npos[id - 1] == pos && s->npar[id - 1] == parent) return id - 1;
    if (s->n_nodes == s->cap_nodes) {
        int64_t cap = s->cap_nodes, c2 = cap, c3 = cap;
        if (grow((void **)&s->npos, &cap, cap + 1, sizeof *s->npos) ||
            grow((void **)&s->npar, &c2, c2 + 1, sizeof *s->npar) ||
            grow((void **)&s->stamp, &c3, c3 + 1, sizeof *s->stamp))
            return set_error(s, "grammar: out of memory");
        memset(s->stamp + s->cap_nodes, 0, (size_t)(cap - s->cap_nodes) * sizeof *s->stamp);
        s->cap_nodes = (int32_t)cap;
    }
    int32_t id = s->n_nodes++;
    s->npos[id] = pos;
    s->npar[id] = parent;
    s->stamp[id] = 0;
    if ((uint32_t)s->n_nodes * 2 > s->nhash_mask) {
        if (nhash_rebuild(s, (s->nhash_mask + 1) * 2)) return set_error(s, "grammar: out of memory");
    } else {
        s->nhash[k] = id + 1;
    }
    return id;
}

static uint32_t set_hash(const int32_t *v, int32_t n) {
    uint32_t h = 0x12345u + (uint32_t)n;
    for (int32_t i = 0; i < n; i++) h = mix(h, (uint32_t)v[i]);
    return h;
}

static int shash_insert(grammar_state *s, int32_t *tab, uint32_t mask, int32_t id) {
    uint32_t k = set_hash(s->pool + s->set_off[id], s->set_len[id]) & mask;
    while (tab[k]) k = (k + 1) & mask;
    tab[k] = id + 1;
    return 0;
}

/* The set with contents v[0..n) (sorted), made once. -1 when out of memory. */
static int32_t set_intern(grammar_state *s, const int32_t *v, int32_t n) {
    if (n == 0) return 0;
    uint32_t k = set_hash(v, n) & s->shash_mask;
    for (int32_t id; (id = s->shash[k]); k = (k + 1) & s->shash_mask)
        if (s->set_len[id - 1] == n && memcmp(s->pool + s->set_off[id - 1], v, (size_t)n * sizeof *v) == 0)
            return id - 1;
    int64_t cs = s->cap_sets, cs2 = s->cap_sets;
    if (grow((void **)&s->pool, &s->cap_pool, s->n_pool + n, sizeof *s->pool) ||
        grow((void **)&s->set_off, &cs, s->n_sets + 1, sizeof *s->set_off) ||
        grow((void **)&s->set_len, &cs2, s->n_sets + 1, sizeof *s->set_len))
        return set_error(s, "grammar: out of memory");
    s->cap_sets = (int32_t)cs;
    int32_t id = s->n_sets++;
    memcpy(s->pool + s->n_pool, v, (size_t)n * sizeof *v);
    s->set_off[id] = s->n_pool;
    s->set_len[id] = n;
    s->n_pool += n;
    if ((uint32_t)s->n_sets * 2 > s->shash_mask) {
        uint32_t size = (s->shash_mask + 1) * 2;
        int32_t *t = calloc(size, sizeof *t);
        if (!t) return set_error(s, "grammar: out of memory");
        for (int32_t i = 1; i < s->n_sets; i++) shash_insert(s, t, size - 1, i);
        free(s->shash);
        s->shash = t;
        s->shash_mask = size - 1;
    } else {
        s->shash[k] = id + 1;
    }
    return id;
}

static int work_push(grammar_state *s, int32_t pos, int32_t parent) {
    if (grow((void **)&s->work, &s->cap_work, s->n_work + 2, sizeof *s->work))
        return set_error(s, "grammar: out of memory");
    s->work[s->n_work++] = pos;
    s->work[s->n_work++] = parent;
    return 0;
}

/* Expands the stack `id` until its top is a character class (into out), as llama.cpp's
 * advance_stack: a rule reference is replaced by each alternative, with the return position
 * pushed below unless the reference ends its alternative (a tail call, so right recursion keeps
 * the stack flat). Each node is visited once per round. */
static int visit(grammar_state *s, int32_t id) {
    if (s->stamp[id] == s->round) return 0;
    s->stamp[id] = s->round;
    const grammar *g = s->g;
    int32_t pos = s->npos[id];
    const grammar_elem *e = &g->elems[pos];
    if (e->type == GRAMMAR_CHARS) {
        int64_t cap = s->cap_out;
        if (grow((void **)&s->out, &cap, s->n_out + 1, sizeof *s->out)) return set_error(s, "grammar: out of memory");
        s->cap_out = (int32_t)cap;
        s->out[s->n_out++] = id;
        return 0;
    }
    int32_t ret = s->npar[id];
    if (g->elems[pos + 1].type != GRAMMAR_END && (ret = node_intern(s, pos + 1, ret)) < 0 && s->error[0]) return -1;
    const grammar_rule *r = &g->rules[e->val];
    for (int32_t a = 0; a < r->n_alts; a++)
        if (work_push(s, g->alts[r->first_alt + a], ret)) return -1;
    return 0;
}

static int expand(grammar_state *s) {
    while (s->n_work > 0) {
        if (++s->budget > GRAMMAR_MAX_WORK)
            return set_error(s, "grammar too ambiguous: one step expanded more than GRAMMAR_MAX_WORK stacks; "
                                "hint: remove alternatives that can match the same text");
        if (++s->work_total > s->work_limit)
            return set_error(s, "grammar too ambiguous: one mask expanded more than GRAMMAR_MAX_MASK_WORK "
                                "stacks; hint: remove alternatives that can match the same text");
        int32_t parent = s->work[--s->n_work];
        int32_t pos = s->work[--s->n_work];
        if (s->g->elems[pos].type == GRAMMAR_END) {
            if (parent < 0) s->complete = 1;
            else if (visit(s, parent)) return -1;
        } else {
            int32_t id = node_intern(s, pos, parent);
            if (id < 0 || visit(s, id)) return -1;
        }
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static void new_round(grammar_state *s) {
    s->n_work = 0;
    s->n_out = 0;
    s->complete = 0;
    s->budget = 0;
    if (++s->round == 0) {
        memset(s->stamp, 0, (size_t)s->cap_nodes * sizeof *s->stamp);
        s->round = 1;
    }
}

/* The set the expansion produced (out plus the complete marker). */
static int32_t finish_round(grammar_state *s) {
    int64_t cap = s->cap_out;
    if (grow((void **)&s->out, &cap, s->n_out + 1, sizeof *s->out)) return set_error(s, "grammar: out of memory");
    s->cap_out = (int32_t)cap;
    if (s->complete) s->out[s->n_out++] = -1;
    if (s->n_out < 16) {
        for (int32_t i = 1; i < s->n_out; i++)
            for (int32_t j = i; j > 0 && s->out[j - 1] > s->out[j]; j--) {
                int32_t t = s->out[j]; s->out[j] = s->out[j - 1]; s->out[j - 1] = t;
            }
    } else {
        qsort(s->out, (size_t)s->n_out, sizeof *s->out, cmp_i32);
    }
    return set_intern(s, s->out, s->n_out);
}

/* Does the class at pos admit a code point in [lo, hi]? */
static int charset_meets(const grammar *g, int32_t set, uint32_t lo, uint32_t hi) {
    const grammar_charset *cs = &g->sets[set];
    int32_t a = cs->first, b = cs->first + cs->n; /* first range with .hi >= lo */
    while (a < b) {
        int32_t mid = a + (b - a) / 2;
        if (g->ranges[mid].hi < lo) a = mid + 1;
        else b = mid;
    }
    return a < cs->first + cs->n && g->ranges[a].lo <= hi;
}

#define PARTIAL 0x80000000u

/* The set after one code point (code < PARTIAL), or after the start of a multi-byte character
 * (code = PARTIAL | bytes due << 24 | value so far): the same set when some stack's class admits
 * a completion, else 0. -1 on error. */
static int32_t step(grammar_state *s, int32_t set, uint32_t code) {
    if (set <= 0) return set;
    uint32_t k = mix((uint32_t)set, code) & s->trans_mask;
    for (; s->trans[k].set; k = (k + 1) & s->trans_mask)
        if (s->trans[k].set == set && s->trans[k].code == code) return s->trans[k].to;
    const int32_t *v = s->pool + s->set_off[set];
    int32_t n = s->set_len[set], to = 0;
    const grammar *g = s->g;
    if (code & PARTIAL) {
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        int rem = (int)(code >> 24) & 7, total = (int)(code >> 27) & 7;
        uint32_t lo = (code & 0xFFFFFF) << (6 * rem), hi = lo | ((1u << (6 * rem)) - 1);
        if (lo < min_cp[total]) lo = min_cp[total]; /* an overlong form never completes */
        if (hi > 0x10FFFF) hi = 0x10FFFF;
        for (int32_t i = 0; i < n && !to; i++)
            if (v[i] >= 0 && lo <= hi && charset_meets(g, g->elems[s->npos[v[i]]].val, lo, hi)) to = set;
    } else {
        new_round(s);
        for (int32_t i = 0; i < n; i++) {
            int32_t id = s->pool[s->set_off[set] + i]; /* re-read: the pool may move */
            if (id < 0 || !grammar_charset_has(g, g->elems[s->npos[id]].val, code)) continue;
            if (work_push(s, s->npos[id] + 1, s->npar[id]) || expand(s)) return -1;
        }
        if ((to = finish_round(s)) < 0) return -1;
    }
    if ((uint32_t)(s->n_trans + 1) * 2 > s->trans_mask) {
        uint32_t size = (s->trans_mask + 1) * 2;
        trans_entry *t = calloc(size, sizeof *t);
        if (!t) return set_error(s, "grammar: out of memory");
        for (uint32_t i = 0; i <= s->trans_mask; i++) {
            if (!s->trans[i].set) continue;
            uint32_t j = mix((uint32_t)s->trans[i].set, s->trans[i].code) & (size - 1);
            while (t[j].set) j = (j + 1) & (size - 1);
            t[j] = s->trans[i];
        }
        free(s->trans);
        s->trans = t;
        s->trans_mask = size - 1;
        k = mix((uint32_t)set, code) & s->trans_mask;
        while (s->trans[k].set) k = (k + 1) & s->trans_mask;
    }
    s->trans[k] = (trans_entry){set, code, to};
    s->n_trans++;
    return to;
}

/* rem holds the bytes still due (low 3 bits) and the sequence's length (bits 4-6), so the end
 * of a character can refuse overlong forms, surrogates and points past U+10FFFF, which no
 * grammar class should see. */
int32_t grammar_state_byte(grammar_state *s, int32_t set, uint32_t *val, int *rem, uint8_t b) {
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    int due = *rem & 7, total = *rem >> 4;
    if (due) {
        if ((b & 0xC0) != 0x80) return 0;
        *val = (*val << 6) | (b & 0x3Fu);
        *rem = --due ? (total << 4 | due) : 0;
        if (!due) {
            if (*val < min_cp[total] || *val > 0x10FFFF || (*val >= 0xD800 && *val <= 0xDFFF)) return 0;
            return step(s, set, *val);
        }
    } else if (b < 0x80) {
        return step(s, set, b);
    } else if (b >= 0xC2 && b <= 0xDF) {
        *val = b & 0x1Fu, due = 1, total = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        *val = b & 0x0Fu, due = 2, total = 3;
    } else if (b >= 0xF0 && b <= 0xF4) {
        *val = b & 0x07u, due = 3, total = 4;
    } else {
        return 0;
    }
    *rem = total << 4 | due;
    return step(s, set, PARTIAL | (uint32_t)total << 27 | (uint32_t)due << 24 | *val);
}

int grammar_state_set_complete(const grammar_state *s, int32_t set) {
    return set > 0 && s->set_len[set] > 0 && s->pool[s->set_off[set]] == -1;
}

void grammar_state_where(const grammar_state *s, int32_t *set, uint32_t *val, int *rem, int *finished) {
    *set = s->cur;
    *val = s->pvalue;
    *rem = s->premain;
    *finished = s->finished;
}

void grammar_state_move(grammar_state *s, int32_t set, uint32_t val, int rem, int finished) {
    s->cur = set;
    s->pvalue = val;
    s->premain = rem;
    s->finished = finished;
}

static grammar_state *state_alloc(const grammar *g) {
    grammar_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->g = g;
    s->nhash_mask = 255;
    s->shash_mask = 255;
    s->trans_mask = 1023;
    s->nhash = calloc(256, sizeof *s->nhash);
    s->shash = calloc(256, sizeof *s->shash);
    s->trans = calloc(1024, sizeof *s->trans);
    int64_t cs = 0, cs2 = 0;
    if (!s->nhash || !s->shash || !s->trans || grow((void **)&s->set_off, &cs, 64, sizeof *s->set_off) ||
        grow((void **)&s->set_len, &cs2, 64, sizeof *s->set_len)) {
        grammar_state_free(s);
        return NULL;
    }
    s->cap_sets = (int32_t)cs;
    s->n_sets = 1; /* set 0: dead */
    s->compact_at = 1 << 16;
    s->work_limit = INT64_MAX;
    s->set_off[0] = 0;
    s->set_len[0] = 0;
    s->round = 1;
    return s;
}

grammar_state *grammar_state_new(const grammar *g) {
    grammar_state *s = state_alloc(g);
    if (!s) return NULL;
    new_round(s);
    const grammar_rule *r = &g->rules[g->root];
    for (int32_t a = 0; a < r->n_alts; a++)
        if (work_push(s, g->alts[r->first_alt + a], -1)) break;
    if (s->error[0] || expand(s) || (s->cur = finish_round(s)) < 0) {
        if (s->error[0] && strstr(s->error, "ambiguous")) { s->cur = 0; return s; } /* reported later */
        grammar_state_free(s);
        return NULL;
    }
    return s;
}

/* Copies the stacks of src's current set into a fresh state: the copy for n choices, and the
 * compaction that drops the nodes, sets and cache entries a long generation leaves behind. */
static grammar_state *state_import(const grammar_state *src) {
    grammar_state *d = state_alloc(src->g);
    if (!d) return NULL;
    int32_t *map = malloc(((size_t)src->n_nodes + 1) * sizeof *map);
    int32_t *chain = NULL;
    int64_t cap_chain = 0;
    int32_t n = src->cur > 0 ? src->set_len[src->cur] : 0;
    int32_t *v = malloc(((size_t)n + 1) * sizeof *v);
    if (!map || !v) goto fail;
    for (int32_t i = 0; i < src->n_nodes; i++) map[i] = -2;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = src->pool[src->set_off[src->cur] + i];
        int64_t len = 0;
        while (id >= 0 && map[id] == -2) { /* walk down to a node already copied */
            if (grow((void **)&chain, &cap_chain, len + 1, sizeof *chain)) goto fail;
            chain[len++] = id;
            id = src->npar[id];
        }
        int32_t below = id < 0 ? -1 : map[id];
        while (len > 0) {
            int32_t o = chain[--len];
            if ((below = node_intern(d, src->npos[o], below)) < 0) goto fail;
            map[o] = below;
        }
        int32_t top = src->pool[src->set_off[src->cur] + i];
        v[i] = top < 0 ? -1 : map[top];
    }
    qsort(v, (size_t)n, sizeof *v, cmp_i32);
    if ((d->cur = set_intern(d, v, n)) < 0) goto fail;
    d->pvalue = src->pvalue;
    d->premain = src->premain;
    d->finished = src->finished;
    memcpy(d->error, src->error, sizeof d->error);
    d->work_limit = src->work_limit;
    free(map); free(v); free(chain);
    return d;
fail:
    free(map); free(v); free(chain);
    grammar_state_free(d);
    return NULL;
}

grammar_state *grammar_state_copy(const grammar_state *s) { return state_import(s); }

/* Keeps memory proportional to the live stacks: a long generation re-creates the state from its
 * current set once the tables pass these sizes (the transition cache restarts then). */
void grammar_state_compact(grammar_state *s) {
    if (s->n_nodes < s->compact_at && s->n_pool < (1 << 20) && s->n_trans < (1 << 18)) return;
    grammar_state *c = state_import(s);
    if (!c) return; /* keep the bigger tables: still correct */
    grammar_state tmp = *s;
    *s = *c;
    *c = tmp;
    grammar_state_free(c);
    /* deep stacks are all live: wait for the tables to double again, so the copying stays
     * linear in the text's length */
    if (s->compact_at < 2 * s->n_nodes) s->compact_at = 2 * s->n_nodes;
}

void grammar_state_free(grammar_state *s) {
    if (!s) return;
    free(s->npos); free(s->npar); free(s->stamp); free(s->nhash);
    free(s->pool); free(s->set_off); free(s->set_len); free(s->shash);
    free(s->trans); free(s->work); free(s->out);
    free(s);
}

int grammar_accept_bytes(grammar_state *s, const void *bytes, size_t n) {
    if (s->finished || s->cur <= 0) return -1;
    const uint8_t *b = bytes;
    int32_t set = s->cur;
    uint32_t val = s->pvalue;
    int rem = s->premain;
    for (size_t i = 0; i < n && set > 0; i++) set = grammar_state_byte(s, set, &val, &rem, b[i]);
    if (set <= 0) return -1;
    s->cur = set;
    s->pvalue = val;
    s->premain = rem;
    grammar_state_compact(s);
    return 0;
}

int grammar_is_complete(const grammar_state *s) {
    return !s->finished && (s->premain & 7) == 0 && grammar_state_set_complete(s, s->cur);
}

const char *grammar_state_error(const grammar_state *s) { return s->error; }

void grammar_state_limit_work(grammar_state *s, int64_t limit) {
    s->work_total = 0;
    s->work_limit = limit;
}
