/* Checks on a compiled grammar that the matcher relies on: every rule can finish (is
 * productive), and no rule can reach itself without consuming a character (left recursion,
 * which would make the stack expansion loop forever). Nullable rules are found first, since a
 * reference after a nullable prefix is still in leftmost position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar_internal.h"

/* Fixed point over the rules: flag[r] = 1 when some alternative is all "ok" elements, where a
 * CHARS element is ok when chars_ok and a REF is ok when its rule is flagged. */
static void fixed_point(const grammar *g, uint8_t *flag, int chars_ok) {
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t r = 0; r < g->n_rules; r++) {
            if (flag[r]) continue;
            const grammar_rule *gr = &g->rules[r];
            for (int32_t a = 0; a < gr->n_alts && !flag[r]; a++) {
                int32_t pos = g->alts[gr->first_alt + a];
                int ok = 1;
                for (; g->elems[pos].type != GRAMMAR_END; pos++) {
                    const grammar_elem *e = &g->elems[pos];
                    if (e->type == GRAMMAR_CHARS ? !chars_ok : !flag[e->val]) { ok = 0; break; }
                }
                if (ok) flag[r] = 1, changed = 1;
            }
        }
    }
}

static const char *owner_name(const grammar *g, int32_t r) { return g->rules[g->rules[r].owner].name; }

/* Iterative depth-first search for a cycle in the leftmost-reference graph. */
static int find_left_recursion(const grammar *g, const uint8_t *nullable, char *err, size_t err_size) {
    int32_t n = g->n_rules;
    uint8_t *color = calloc((size_t)n, 1); /* 0 new, 1 on the path, 2 done */
    int32_t *path = malloc((size_t)n * sizeof *path);
    int32_t *alt = malloc((size_t)n * sizeof *alt);   /* per path entry: next alternative */
    int32_t *at = malloc((size_t)n * sizeof *at);     /* per path entry: next position in it */
    int rc = -1;
    if (!color || !path || !alt || !at) {
        snprintf(err, err_size, "grammar: out of memory");
        goto out;
    }
    for (int32_t start = 0; start < n; start++) {
        if (color[start]) continue;
        int32_t depth = 0;
        path[0] = start; alt[0] = 0; at[0] = -1;
        color[start] = 1;
        while (depth >= 0) {
            int32_t r = path[depth];
            const grammar_rule *gr = &g->rules[r];
            int32_t next = -1;
            while (next < 0 && alt[depth] < gr->n_alts) {
                int32_t pos = at[depth] < 0 ? g->alts[gr->first_alt + alt[depth]] : at[depth];
                const grammar_elem *e = &g->elems[pos];
                if (e->type == GRAMMAR_REF) {
                    next = e->val;
                    at[depth] = nullable[e->val] ? pos + 1 : -2; /* -2: this alternative is done */
                }
                if (e->type != GRAMMAR_REF || at[depth] == -2) { alt[depth]++; at[depth] = -1; }
            }
            if (next < 0) {
                color[r] = 2;
                depth--;
                continue;
            }
            if (color[next] == 1) {
                int32_t from = depth;
                while (path[from] != next) from--;
                const grammar_rule *lr = &g->rules[g->rules[next].owner];
                int k = snprintf(err, err_size, "grammar line %d, column %d: rule '%s' is left-recursive (",
                                 (int)lr->line, (int)lr->col, lr->name);
                for (int32_t i = from; i <= depth && k > 0 && (size_t)k < err_size; i++)
                    k += snprintf(err + k, err_size - (size_t)k, "%s -> ", owner_name(g, path[i]));
                if (k > 0 && (size_t)k < err_size)
                    snprintf(err + k, err_size - (size_t)k, "%s without consuming a character); hint: put a "
                             "character before the recursive reference, or write the repetition with * or +, "
                             "and never repeat something that can match the empty string", owner_name(g, next));
                goto out;
            }
            if (color[next] == 0) {
                color[next] = 1;
                depth++;
                path[depth] = next; alt[depth] = 0; at[depth] = -1;
            }
        }
    }
    rc = 0;
out:
    free(color); free(path); free(alt); free(at);
    return rc;
}

int grammar_check(const grammar *g, char *err, size_t err_size) {
    uint8_t *nullable = calloc((size_t)g->n_rules + 1, 1);
    uint8_t *productive = calloc((size_t)g->n_rules + 1, 1);
    int rc = -1;
    if (!nullable || !productive) {
        snprintf(err, err_size, "grammar: out of memory");
        goto out;
    }
    fixed_point(g, nullable, 0);
    fixed_point(g, productive, 1);
    /* Name the rule that causes it: one that refers to itself (or to a part of itself), rather
     * than a rule that only uses it. */
    int32_t bad = -1;
    for (int32_t r = 0; r < g->n_rules && bad < 0; r++) {
        if (productive[r]) continue;
        const grammar_rule *gr = &g->rules[r];
        for (int32_t a = 0; a < gr->n_alts && bad < 0; a++)
            for (int32_t pos = g->alts[gr->first_alt + a]; g->elems[pos].type != GRAMMAR_END; pos++)
                if (g->elems[pos].type == GRAMMAR_REF && !productive[g->elems[pos].val] &&
                    g->rules[g->elems[pos].val].owner == gr->owner) { bad = r; break; }
    }
    for (int32_t r = 0; r < g->n_rules; r++) {
        if (productive[r]) continue;
        if (bad >= 0) r = bad;
        const grammar_rule *o = &g->rules[g->rules[r].owner];
        snprintf(err, err_size, "grammar line %d, column %d: rule '%s' can never finish matching: each alternative "
                 "needs itself or another rule that cannot finish; hint: give it an alternative without the "
                 "recursion (such as \"\")", (int)o->line, (int)o->col, o->name);
        goto out;
    }
    rc = find_left_recursion(g, nullable, err, err_size);
out:
    free(nullable);
    free(productive);
    return rc;
}
