/* Sampling: llama.cpp's default chain (repeat, frequency and presence penalties, top-k, top-p,
 * min-p, temperature, draw) on a list of candidates, and a xoshiro256** generator seeded through splitmix64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler.h"

struct sampler {
    sampler_params p;
    int32_t n_vocab;
    sampler_cand *cand;   /* [n_vocab] */
    int32_t *hist;        /* ring of the last repeat_last_n tokens */
    size_t n_hist, hist_next;
    sampler_rng rng;
    int32_t skip[SAMPLER_MAX_SKIP];
    int n_skip;
    sampler_bias *bias;   /* [p.n_bias], the caller's list copied */
    /* structured output (sampler_set_grammar): NULL gst when none */
    grammar_state *gst;
    const grammar_vocab *gv;
    uint8_t *mask;        /* [n_vocab] 1 = allowed, for gst's current position when mask_ok */
    int mask_ok, done;
    int32_t eog[SAMPLER_MAX_SKIP];
    int n_eog;
    char err[160];
};

sampler_params sampler_default_params(void) {
    sampler_params p = {
        .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .freq_penalty = 0.0f, .presence_penalty = 0.0f, .repeat_last_n = 64, .seed = 0,
    };
    return p;
}

/* --- PRNG --------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sampler_rng_seed(sampler_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sampler_rng_next(sampler_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double sampler_rng_uniform(sampler_rng *r) { return (double)(sampler_rng_next(r) >> 11) * 0x1.0p-53; }

/* --- the chain's steps -------------------------------------------------------------------------- */

static int penalties_off(sampler_penalties pen) {
    return pen.repeat == 1.0f && pen.freq == 0.0f && pen.presence == 0.0f;
}

void sampler_penalize(sampler_cand *c, size_t n, const int32_t *last, size_t n_last, sampler_penalties pen) {
    if (penalties_off(pen) || n_last == 0) return;
    /* Each distinct token of the history is penalised once, with its count there (llama.cpp):
     * per distinct id of the history (n_last is small, 64 by default) its candidate, found at
     * c[id] in a fresh list (sampler_sample's) or else by a scan; not the whole vocabulary
     * against the whole history (2 M compares a token at 32000 x 64). */
    for (size_t j = 0; j < n_last; j++) {
        const int32_t id = last[j];
        int dup = 0;
        for (size_t h = 0; h < j && !dup; h++) dup = last[h] == id;
        if (dup || id < 0) continue;
        int count = 1;
        for (size_t h = j + 1; h < n_last; h++) count += last[h] == id;
        size_t i = (size_t)id;
        if (i >= n || c[i].id != id)
            for (i = 0; i < n && c[i].id != id; i++) {}
        if (i == n) continue;
        if (c[i].logit <= 0) c[i].logit *= pen.repeat;
        else c[i].logit /= pen.repeat;
        c[i].logit -= (float)count * pen.freq + pen.presence;
    }
}

static int cand_cmp(const void *a, const void *b) {
    const sampler_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Sift-down in the heap c[0..n) whose root is its worst candidate (cand_cmp's last). */
static void worst_heap_down(sampler_cand *c, size_t n, size_t i) {
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && cand_cmp(&c[l], &c[w]) > 0) w = l;
        if (r < n && cand_cmp(&c[r], &c[w]) > 0) w = r;
        if (w == i) return;
        sampler_cand t = c[i];
        c[i] = c[w];
        c[w] = t;
        i = w;
    }
}

size_t sampler_top_k(sampler_cand *c, size_t n, int32_t k) {
    if (k <= 0) return n;
    if ((size_t)k >= n) {
        qsort(c, n, sizeof *c, cand_cmp);
        return n;
    }
    /* The k best by a heap of the k best so far (worst at the root), then those k sorted:
     * O(n log k), not a sort of the whole vocabulary (~3 ms a token at 32000). cand_cmp is a
     * strict order (ties by id), so the k and their order are what a full sort gives. */
    size_t kk = (size_t)k;
    for (size_t i = kk / 2; i-- > 0;) worst_heap_down(c, kk, i);
    for (size_t i = kk; i < n; i++) {
        if (cand_cmp(&c[i], &c[0]) >= 0) continue;
        sampler_cand t = c[0];
        c[0] = c[i];
        c[i] = t;
        worst_heap_down(c, kk, 0);
    }
    qsort(c, kk, sizeof *c, cand_cmp);
    return kk;
}

size_t sampler_top_p(sampler_cand *c, size_t n, float p) {
    if (p >= 1.0f || n <= 1) return n;
    qsort(c, n, sizeof *c, cand_cmp);
    float mx = c[0].logit;
    double sum = 0, cum = 0;
    for (size_t i = 0; i < n; i++) sum += exp((double)c[i].logit - mx);
    /* Keep the smallest prefix whose probability reaches p (at least one token). */
    for (size_t i = 0; i < n; i++) {
        cum += exp((double)c[i].logit - mx) / sum;
        if (cum >= p) return i + 1;
    }
    return n;
}

size_t sampler_min_p(sampler_cand *c, size_t n, float p) {
    if (p <= 0.0f || n <= 1) return n;
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit > mx) mx = c[i].logit;
    /* p_i >= p * p_max  <=>  logit_i >= max + log(p); order kept. */
    float floor_logit = mx + logf(p);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit >= floor_logit) c[k++] = c[i];
    return k ? k : n;
}

size_t sampler_temperature(sampler_cand *c, size_t n, float temp) {
    if (n == 0) return 0;
    if (temp <= 0) {  /* only the most likely survives */
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (cand_cmp(&c[i], &c[best]) < 0) best = i;
        c[0] = c[best];
        return 1;
    }
    for (size_t i = 0; i < n; i++) c[i].logit /= temp;
    return n;
}

size_t sampler_pick(const sampler_cand *c, size_t n, double u) {
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit > mx) mx = c[i].logit;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += exp((double)c[i].logit - mx);
    double target = u * sum, cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += exp((double)c[i].logit - mx);
        if (target < cum) return i;
    }
    return n - 1;  /* u * sum rounded up to the total */
}

/* --- the sampler -------------------------------------------------------------------------------- */

sampler *sampler_new(const sampler_params *p, int32_t n_vocab, char *err, size_t err_size) {
    if (n_vocab < 1 || !(p->repeat_penalty > 0) || !(p->top_p >= 0 && p->top_p <= 1) ||
        !(p->min_p >= 0 && p->min_p <= 1) || p->repeat_last_n < 0 || isnan(p->temp) || !isfinite(p->freq_penalty) ||
        !isfinite(p->presence_penalty)) {
        snprintf(err, err_size, "bad sampling parameters (repeat penalty must be > 0, frequency and presence "
                 "penalties finite, top-p and min-p in [0, 1], repeat-last-n >= 0)");
        return NULL;
    }
    if (p->n_bias < 0 || (p->n_bias > 0 && !p->bias)) {
        snprintf(err, err_size, "bad logit bias list (%d entries)", p->n_bias);
        return NULL;
    }
    for (int32_t i = 0; i < p->n_bias; i++) {
        if (p->bias[i].id < 0 || p->bias[i].id >= n_vocab) {
            snprintf(err, err_size, "logit bias of token %d: outside the vocabulary of %d", p->bias[i].id, n_vocab);
            return NULL;
        }
        if (isnan(p->bias[i].bias)) {
            snprintf(err, err_size, "logit bias of token %d: the bias is not a number", p->bias[i].id);
            return NULL;
        }
    }
    sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
        s->hist = malloc(((size_t)p->repeat_last_n + 1) * sizeof *s->hist);
        s->bias = malloc(((size_t)p->n_bias + 1) * sizeof *s->bias);
    }
    if (!s || !s->cand || !s->hist || !s->bias) {
        snprintf(err, err_size, "out of memory for the sampler");
        sampler_free(s);
        return NULL;
    }
    s->p = *p;
    if (p->n_bias) memcpy(s->bias, p->bias, (size_t)p->n_bias * sizeof *s->bias);
    s->p.bias = s->bias;
    s->n_vocab = n_vocab;
    sampler_rng_seed(&s->rng, p->seed);
    return s;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->hist);
    free(s->bias);
    grammar_state_free(s->gst);
    free(s->mask);
    free(s);
}

int sampler_skip(sampler *s, const int32_t *ids, int n) {
    if (n < 0 || n > SAMPLER_MAX_SKIP) return -1;
    for (int i = 0; i < n; i++) s->skip[i] = ids[i];
    s->n_skip = n;
    return 0;
}

void sampler_accept(sampler *s, int32_t id) {
    size_t cap = (size_t)s->p.repeat_last_n;
    if (cap == 0) return;
    s->hist[s->hist_next] = id;
    s->hist_next = (s->hist_next + 1) % cap;
    if (s->n_hist < cap) s->n_hist++;
}

static sampler_penalties penalties_of(const sampler_params *p) {
    return (sampler_penalties){p->repeat_penalty, p->freq_penalty, p->presence_penalty};
}

int sampler_is_greedy(const sampler *s) {
    return !s->gst && s->p.temp <= 0 && s->p.n_bias == 0 && (penalties_off(penalties_of(&s->p)) || s->p.repeat_last_n == 0);
}

/* The chain over the logits, or with mask over only the tokens it allows (the list then holds
 * those alone: a grammar leaves few, and every later step is cheaper). -1 when no candidate has
 * a finite logit (all masked or skipped). */
static int32_t chain_pick(sampler *s, const float *logits, const uint8_t *mask) {
    sampler_cand *c = s->cand;
    size_t n = (size_t)s->n_vocab;
    for (size_t i = 0; i < n; i++) c[i] = (sampler_cand){(int32_t)i, logits[i]};
    for (int32_t k = 0; k < s->p.n_bias; k++) c[s->bias[k].id].logit += s->bias[k].bias; /* llama.cpp: first */
    for (int k = 0; k < s->n_skip; k++)
        if (s->skip[k] >= 0 && (size_t)s->skip[k] < n) c[s->skip[k]].logit = -INFINITY;
    if (mask) {
        size_t kept = 0;
        int any = 0;
        for (size_t i = 0; i < n; i++)
            if (mask[i]) {
                any |= c[i].logit > -INFINITY;
                c[kept++] = c[i];
            }
        if (!any) return -1;
        n = kept;
    }
    sampler_penalize(c, n, s->hist, s->n_hist, penalties_of(&s->p));
    if (s->p.temp <= 0) return c[sampler_temperature(c, n, 0) - 1].id;
    n = sampler_top_k(c, n, s->p.top_k);
    n = sampler_top_p(c, n, s->p.top_p);
    n = sampler_min_p(c, n, s->p.min_p);
    n = sampler_temperature(c, n, s->p.temp);
    return c[sampler_pick(c, n, sampler_rng_uniform(&s->rng))].id;
}

int sampler_logprobs(const float *logits, int32_t n_vocab, int32_t id, int n_top, double *chosen, sampler_logprob *top) {
    /* log-softmax = l - (max + log sum exp(l - max)): no overflow, and in double so the small
     * probabilities of a large vocabulary keep their digits */
    double mx = -INFINITY, sum = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    if (chosen) *chosen = id >= 0 && id < n_vocab ? (double)logits[id] - lse : -INFINITY;
    if (n_top > SAMPLER_MAX_TOP_LOGPROBS) n_top = SAMPLER_MAX_TOP_LOGPROBS;
    if (n_top > n_vocab) n_top = n_vocab;
    int n = 0;
    /* insertion into a short sorted list: n_top <= 20, one pass over the vocabulary */
    for (int32_t i = 0; i < n_vocab && n_top > 0; i++) {
        double lp = (double)logits[i] - lse;
        if (n == n_top && !(lp > top[n - 1].logprob)) continue;
        int k = n < n_top ? n++ : n - 1;
        while (k > 0 && lp > top[k - 1].logprob) {
            top[k] = top[k - 1];
            k--;
        }
        top[k] = (sampler_logprob){i, lp};
    }
    return n;
}

int sampler_set_grammar(sampler *s, grammar_state *st, const grammar_vocab *v, const int32_t *eog, int n_eog) {
    if (!st || !v || grammar_vocab_size(v) != s->n_vocab || n_eog < 0 || n_eog > SAMPLER_MAX_SKIP ||
        !(s->mask = malloc((size_t)s->n_vocab))) {
        grammar_state_free(st);
        return -1;
    }
    grammar_state_free(s->gst);
    s->gst = st;
    s->gv = v;
    s->n_eog = n_eog;
    for (int k = 0; k < n_eog; k++) s->eog[k] = eog[k];
    s->mask_ok = s->done = 0;
    return 0;
}

int sampler_grammar_done(const sampler *s) { return s->done; }
const char *sampler_error(const sampler *s) { return s->err; }

static int32_t grammar_fail(sampler *s, const char *what) {
    const char *why = grammar_state_error(s->gst);
    snprintf(s->err, sizeof s->err, "grammar: %s%s%s", what, *why ? ": " : "", why);
    return -1;
}

/* The mask of the state's position; the number allowed, or -1 (grammar_state_error). */
static int64_t fill_mask(sampler *s) {
    int64_t n = grammar_fill_mask(s->gst, s->gv, s->mask);
    s->mask_ok = n >= 0;
    return n;
}

int32_t sampler_sample(sampler *s, const float *logits) {
    if (!s->gst) return chain_pick(s, logits, NULL);
    if (s->done) return grammar_fail(s, "the text is complete; nothing may follow");
    int32_t id = -1;
    /* The pick of the whole chain first: kept when the grammar allows it. The mask is there
     * already when the last step needed it (the completion check below). */
    if (!s->mask_ok) {
        id = chain_pick(s, logits, NULL);
        if (id >= 0 && !grammar_allows_token(s->gst, s->gv, id)) id = -1;
        if (id < 0 && fill_mask(s) < 0) return grammar_fail(s, "the grammar is too ambiguous to follow");
    }
    if (id < 0 && (id = chain_pick(s, logits, s->mask)) < 0)
        return grammar_fail(s, "no token the grammar allows may be picked (only end-of-generation tokens are "
                               "left and --ignore-eos or a -inf logit bias forbids them)");
    s->mask_ok = 0;
    if (grammar_accept_token(s->gst, s->gv, id)) return grammar_fail(s, "the pick was refused");
    int is_eog = 0;
    for (int k = 0; k < s->n_eog; k++) is_eog |= s->eog[k] == id;
    /* Complete: whether anything but an end token may follow. The mask this takes is the next
     * step's, so a grammar that ends rarely (JSON) pays this walk once or twice a text. */
    if (!is_eog && grammar_is_complete(s->gst)) {
        int64_t other = fill_mask(s);
        if (other < 0) return grammar_fail(s, "the grammar is too ambiguous to follow");
        for (int k = 0; k < s->n_eog; k++)
            if (s->eog[k] >= 0 && s->eog[k] < s->n_vocab) other -= s->mask[s->eog[k]];
        s->done = other == 0;
    }
    return id;
}
