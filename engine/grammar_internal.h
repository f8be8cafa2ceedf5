/* The compiled form shared by the parser (grammar_parse.c, grammar_check.c) and the matcher
 * (grammar_state.c, grammar_vocab.c): every alternative of every rule is a run of elements ended
 * by GRAMMAR_END in one array, so a position in that array is a place in the grammar. */
#ifndef MGI_ENGINE_GRAMMAR_INTERNAL_H
#define MGI_ENGINE_GRAMMAR_INTERNAL_H

#include <stdint.h>

#include "engine/grammar.h"

enum { GRAMMAR_END = 0, GRAMMAR_REF = 1, GRAMMAR_CHARS = 2 };

typedef struct {
    int32_t type; /* GRAMMAR_END / REF / CHARS */
    int32_t val;  /* REF: rule id; CHARS: charset id */
} grammar_elem;

/* A character class as sorted, disjoint, non-adjacent code point ranges (negation is folded in
 * at compile time), with a bitmap for the ASCII fast path. */
typedef struct {
    uint32_t lo, hi;
} grammar_range;

typedef struct {
    int32_t first, n; /* into grammar.ranges */
    uint64_t ascii[2];
} grammar_charset;

typedef struct {
    char *name;
    int32_t first_alt, n_alts; /* into grammar.alts: start positions in elems */
    int32_t line, col;         /* where it is defined (generated rules: the construct) */
    int32_t owner;             /* the user rule a generated rule comes from; itself otherwise */
} grammar_rule;

struct grammar {
    grammar_elem *elems;
    int32_t n_elems;
    grammar_charset *sets;
    int32_t n_sets;
    grammar_range *ranges;
    int32_t n_ranges;
    grammar_rule *rules;
    int32_t n_rules;
    int32_t *alts;
    int32_t n_alts_total;
    int32_t root;
};

static inline int grammar_charset_has(const grammar *g, int32_t set, uint32_t cp) {
    const grammar_charset *cs = &g->sets[set];
    if (cp < 128) return (int)((cs->ascii[cp >> 6] >> (cp & 63)) & 1);
    int32_t lo = cs->first, hi = cs->first + cs->n - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (cp < g->ranges[mid].lo) hi = mid - 1;
        else if (cp > g->ranges[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}

/* Nullable, productive and left-recursion checks (grammar_check.c): 0, or -1 with a message. */
int grammar_check(const grammar *g, char *err, size_t err_size);

/* The matcher's internals that the vocabulary walk (grammar_vocab.c) drives: a position is a set
 * id (0: dead, no way on; -1: an error, see grammar_state_error) and an unfinished UTF-8
 * sequence (val, rem bytes still due). grammar_state_byte returns the set after one byte and
 * updates val and rem. */
int32_t grammar_state_byte(grammar_state *s, int32_t set, uint32_t *val, int *rem, uint8_t b);
int grammar_state_set_complete(const grammar_state *s, int32_t set);
void grammar_state_where(const grammar_state *s, int32_t *set, uint32_t *val, int *rem, int *finished);
void grammar_state_move(grammar_state *s, int32_t set, uint32_t val, int rem, int finished);
void grammar_state_compact(grammar_state *s);
/* Caps the expansions from now on (INT64_MAX: no cap), so one vocabulary walk stays bounded. */
void grammar_state_limit_work(grammar_state *s, int64_t limit);

#endif
