/* The forward pass against llama.cpp's reference runs in ../shared/golden/llama, for any backend
 * (tests/unit/test_llama_golden.c: the CPU; tests/gpu/test_forward.c: CUDA): prompt tokens,
 * greedy continuations decoded one token at a time, and teacher-forced logits of every position
 * (max |dlogit|, mean KL(golden || ours), top-1 agreement), with the same budgets for every
 * backend. */
#ifndef MGI_TESTS_GOLDEN_H
#define MGI_TESTS_GOLDEN_H

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "tests/unit/test.h"

#define MAX_TOKENS 100000

typedef struct {
    char model[256], prompt[4096], logits_file[256];
    int32_t *prompt_tokens, *greedy;
    int n_prompt, n_greedy, n_vocab, logits_rows;
} golden_case;

/* --- a small reader for our own fixture files: flat objects of strings, ints, int arrays ------- */

static const char *json_value(const char *js, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(js, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (isspace((unsigned char)*p)) p++;
    if (*p != ':') return NULL;
    p++;
    while (isspace((unsigned char)*p)) p++;
    return p;
}

static int json_int(const char *js, const char *key, int *out) {
    const char *p = json_value(js, key);
    char *end;
    if (!p) return -1;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > MAX_TOKENS) return -1;
    *out = (int)v;
    return 0;
}

/* A string without escapes other than \" and \\ (enough for our prompts and file names). */
static int json_str(const char *js, const char *key, char *out, size_t cap) {
    const char *p = json_value(js, key);
    if (!p || *p != '"') return -1;
    size_t n = 0;
    for (p++; *p && *p != '"'; p++) {
        if (*p == '\\') {
            p++;
            if (*p != '"' && *p != '\\') return -1;
        }
        if (n + 1 >= cap) return -1;
        out[n++] = *p;
    }
    if (*p != '"') return -1;
    out[n] = 0;
    return 0;
}

static int json_ints(const char *js, const char *key, int32_t **out, int *n_out) {
    const char *p = json_value(js, key);
    if (!p || *p != '[') return -1;
    int32_t *v = malloc(MAX_TOKENS * sizeof *v);
    int n = 0;
    if (!v) return -1;
    for (p++;;) {
        while (isspace((unsigned char)*p) || *p == ',') p++;
        if (*p == ']') break;
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x > INT32_MAX || n >= MAX_TOKENS) { free(v); return -1; }
        v[n++] = (int32_t)x;
        p = end;
    }
    *out = v;
    *n_out = n;
    return 0;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) b[n] = 0;
    if (len) *len = (size_t)n;
    return b;
}

static int load_case(const char *path, golden_case *c) {
    memset(c, 0, sizeof *c);
    char *js = slurp(path, NULL);
    if (!js) return -1;
    int bad = json_str(js, "model", c->model, sizeof c->model) ||
              json_str(js, "prompt", c->prompt, sizeof c->prompt) ||
              json_str(js, "logits_file", c->logits_file, sizeof c->logits_file) ||
              json_int(js, "n_vocab", &c->n_vocab) || json_int(js, "logits_rows", &c->logits_rows) ||
              json_ints(js, "prompt_tokens", &c->prompt_tokens, &c->n_prompt) ||
              json_ints(js, "greedy_tokens", &c->greedy, &c->n_greedy) ||
              strchr(c->model, '/') || strchr(c->logits_file, '/') || c->n_prompt < 1 || c->n_greedy < 1;
    free(js);
    return bad ? -1 : 0;
}

static inline int32_t argmax(const float *v, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* KL(P || Q) of the softmaxes of two logit rows, in double. */
static double kl_div(const float *p_logits, const float *q_logits, int32_t n) {
    double mp = p_logits[0], mq = q_logits[0], sp = 0, sq = 0, kl = 0;
    for (int32_t i = 1; i < n; i++) {
        if (p_logits[i] > mp) mp = p_logits[i];
        if (q_logits[i] > mq) mq = q_logits[i];
    }
    for (int32_t i = 0; i < n; i++) {
        sp += exp(p_logits[i] - mp);
        sq += exp(q_logits[i] - mq);
    }
    double lsp = log(sp), lsq = log(sq);
    for (int32_t i = 0; i < n; i++) {
        double lp = p_logits[i] - mp - lsp, lq = q_logits[i] - mq - lsq;
        kl += exp(lp) * (lp - lq);
    }
    return kl;
}

static void golden_run_case(const char *dir, const char *json_name, const engine_params *params, const char *label,
                            const char *backend) {
    char path[1024], name[300];
    snprintf(path, sizeof path, "%s/%s", dir, json_name);
    snprintf(name, sizeof name, "%s %.*s", label, (int)(strlen(json_name) - 5), json_name);
    golden_case c;
    if (load_case(path, &c)) {
        CHECK(0, name, "cannot parse %s", path);
        return;
    }
    int mixq = !strncmp(json_name, "mixq-", 5);
    char test[400], err[512];
    engine_params ep = *params;
    engine *e = NULL;
    char rel[300];
    snprintf(rel, sizeof rel, "models/%.256s", c.model);
    const char *model = test_shared(rel);
    snprintf(test, sizeof test, "%s load", name);
    if (!CHECK(engine_load(&e, model, &ep, err, sizeof err) == ENGINE_OK, test, "%s", err)) goto done;
    snprintf(test, sizeof test, "%s backend %s", name, backend);
    CHECK(!strcmp(engine_backend(e), backend), test, "ran on %s", engine_backend(e));
    int32_t n_vocab = engine_n_vocab(e);
    snprintf(test, sizeof test, "%s n_vocab", name);
    if (!CHECK(n_vocab == c.n_vocab, test, "model has %d, golden %d", n_vocab, c.n_vocab)) goto done;

    /* Prompt tokens from our tokenizer. */
    int32_t ids[4096];
    const tokenizer *tok = engine_tokenizer(e);
    int64_t n = tokenizer_encode(tok, c.prompt, strlen(c.prompt), true, true, ids, 4096, err, sizeof err);
    int same = n == c.n_prompt;
    for (int i = 0; same && i < c.n_prompt; i++) same = ids[i] == c.prompt_tokens[i];
    snprintf(test, sizeof test, "%s prompt tokens", name);
    CHECK(same, test, "%lld tokens (%s), golden %d", (long long)n, n < 0 ? err : "ids differ", c.n_prompt);

    /* Greedy decoding, one token per step after the prompt batch. */
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    int n_check = mixq ? (c.n_greedy < 32 ? c.n_greedy : 32) : c.n_greedy, agree = 0, ok = 1;
    ok = !engine_eval(e, c.prompt_tokens, c.n_prompt, 0, logits, 0, err, sizeof err);
    for (int i = 0; ok && i < n_check; i++) {
        int32_t t = argmax(logits, n_vocab);
        if (t != c.greedy[i]) break;
        agree++;
        if (i + 1 < n_check) ok = !engine_eval(e, &t, 1, c.n_prompt + i, logits, 0, err, sizeof err);
    }
    snprintf(test, sizeof test, "%s greedy %d tokens", name, n_check);
    CHECK(ok && agree == n_check, test, "%s; first %d of %d identical", ok ? "differs" : err, agree, n_check);
    free(logits);

    /* Teacher-forced: prompt + greedy tokens (but the last) in one call, every row compared. */
    int n_seq = c.n_prompt + c.n_greedy - 1;
    snprintf(test, sizeof test, "%s logits rows", name);
    if (!CHECK(n_seq == c.logits_rows, test, "golden has %d rows, expected %d", c.logits_rows, n_seq)) goto done;
    snprintf(path, sizeof path, "%s/%s", dir, c.logits_file);
    size_t glen = 0;
    float *gold = (float *)slurp(path, &glen);
    snprintf(test, sizeof test, "%s logits file", name);
    if (!CHECK(gold && glen == (size_t)n_seq * n_vocab * sizeof(float), test, "%s: missing or %zu bytes", path, glen)) {
        free(gold);
        goto done;
    }
    int32_t *seq = malloc((size_t)n_seq * sizeof *seq);
    float *ours = malloc((size_t)n_seq * n_vocab * sizeof *ours);
    memcpy(seq, c.prompt_tokens, (size_t)c.n_prompt * sizeof *seq);
    memcpy(seq + c.n_prompt, c.greedy, (size_t)(c.n_greedy - 1) * sizeof *seq);
    snprintf(test, sizeof test, "%s teacher-forced eval", name);
    if (CHECK(!engine_eval(e, seq, n_seq, 0, ours, 1, err, sizeof err), test, "%s", err)) {
        double max_d = 0, kld = 0;
        int top1 = 0;
        for (int r = 0; r < n_seq; r++) {
            const float *g = gold + (size_t)r * n_vocab, *o = ours + (size_t)r * n_vocab;
            for (int32_t i = 0; i < n_vocab; i++) {
                double d = fabs((double)g[i] - o[i]);
                if (!(d <= max_d)) max_d = d;  /* NaN counts as worst */
            }
            kld += kl_div(g, o, n_vocab);
            top1 += argmax(g, n_vocab) == argmax(o, n_vocab);
        }
        kld /= n_seq;
        double top1_pct = 100.0 * top1 / n_seq;
        if (mixq) {
            snprintf(test, sizeof test, "%s teacher-forced (max |dlogit| %.3g, mean KLD %.3g <= 5e-4, top-1 %.1f%% >= 95%%)",
                     name, max_d, kld, top1_pct);
            CHECK(kld <= 5e-4 && top1_pct >= 95.0, test, "out of budget");
        } else {
            snprintf(test, sizeof test, "%s teacher-forced (max |dlogit| %.3g <= 1e-2, mean KLD %.3g <= 1e-5, top-1 %.1f%%)",
                     name, max_d, kld, top1_pct);
            CHECK(max_d <= 1e-2 && kld <= 1e-5, test, "out of budget");
        }
    }
    free(seq);
    free(ours);
    free(gold);
done:
    engine_free(e);
    free(c.prompt_tokens);
    free(c.greedy);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Teacher-forced logits of tokens[0..n) (every row) on a fresh engine; NULL with err. */
static inline float *golden_eval_all(const char *model, engine_params ep, const int32_t *tokens, int n, char *err,
                                     size_t es) {
    engine *e = NULL;
    if (engine_load(&e, model, &ep, err, es)) return NULL;
    float *out = malloc((size_t)n * (size_t)engine_n_vocab(e) * sizeof *out);
    if (out && engine_eval(e, tokens, n, 0, out, 1, err, es)) {
        free(out);
        out = NULL;
    }
    engine_free(e);
    return out;
}

/* Every case of ../shared/golden/llama (in name order) with these engine parameters; `backend`
 * is the engine_backend() name the cases must run on. */
static inline void golden_run_all(const engine_params *ep, const char *label, const char *backend) {
    const char *dir = test_shared("golden/llama");
    DIR *d = opendir(dir);
    if (!d) {
        SKIP(label, "no ../shared/golden/llama (set SHARED)");
        return;
    }
    char *names[64];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 64) {
        size_t len = strlen(de->d_name);
        if (len > 5 && !strcmp(de->d_name + len - 5, ".json")) names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    CHECK(n > 0, label, "no .json files in %s", dir);
    for (int i = 0; i < n; i++) {
        golden_run_case(dir, names[i], ep, label, backend);
        free(names[i]);
    }
}

#endif
