/* mgi run -np N: N continuations of one prompt, as llama.cpp's batched example makes them. The
 * prompt is evaluated once; the N sequences share its KV pages and decode together, one token
 * each per forward pass (a scheduler group, engine/scheduler.h); sequence i samples with seed + i.
 * Each is printed whole, in order, after a header line, or as one JSON line with --jsonl. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Sequence j's text: its tokens through the streaming detokeniser (with special, a control
 * token's own text, as mgi run prints it); NULL when out of memory. */
static char *seq_text(const tokenizer *tok, const sched_job *j, bool special, size_t *len) {
    size_t cap = 256, n = 0;
    char *buf = malloc(cap);
    tokenizer_stream st = {0};
    for (int32_t i = 0; buf && i <= j->n_out; i++) {
        size_t need = 2 * tokenizer_max_piece(tok) + 64;
        if (n + need > cap) {
            char *nb = realloc(buf, 2 * cap + need);
            if (!nb) { free(buf); return NULL; }
            buf = nb;
            cap = 2 * cap + need;
        }
        if (i == j->n_out) {
            n += tokenizer_stream_flush(&st, buf + n, cap - n);
        } else if (special && tokenizer_is_control(tok, j->out[i])) {
            size_t tl;
            const char *t = tokenizer_text(tok, j->out[i], &tl);
            n += tokenizer_stream_flush(&st, buf + n, cap - n);
            if (tl > cap - n - 1) tl = cap - n - 1;
            memcpy(buf + n, t, tl);
            n += tl;
        } else {
            n += tokenizer_stream_put(tok, &st, j->out[i], buf + n, cap - n);
        }
    }
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static const char *reason(const sched_job *j) {
    return j->state == SCHED_ERROR ? "error" : j->state == SCHED_STOP ? "stop" : "length";
}

/* Prints sequence i of n (its job j): a header and the text (the prompt first with --echo), or
 * one JSON line. 0, or -1 when out of memory or stdout failed. */
static int print_seq(const cli_parallel_gen *g, const tokenizer *tok, int i, const sched_job *j) {
    size_t len;
    char *text = seq_text(tok, j, g->special, &len);
    if (!text) return -1;
    int rc = 0;
    if (!g->jsonl) {
        printf("--- sequence %d of %d ---\n", i + 1, g->n_seq);
        if (g->echo) fwrite(g->text, 1, g->text_len, stdout);
        fwrite(text, 1, len, stdout);
        putchar('\n');
    } else {
        char *clean = cli_utf8_clean(text, len);
        cJSON *o = cJSON_CreateObject(), *ids = NULL;
        bool ok = o && clean && cJSON_AddNumberToObject(o, "index", i) && cJSON_AddStringToObject(o, "text", clean) &&
                  (ids = cJSON_AddArrayToObject(o, "tokens"));
        for (int32_t k = 0; ok && k < j->n_out; k++) {
            cJSON *v = cJSON_CreateNumber(j->out[k]);
            if (!(ok = v != NULL)) break;
            cJSON_AddItemToArray(ids, v);
        }
        ok = ok && cJSON_AddNumberToObject(o, "n_tokens", j->n_out) &&
             cJSON_AddStringToObject(o, "finish_reason", reason(j)) &&
             (j->state != SCHED_ERROR || cJSON_AddStringToObject(o, "error", j->err)) &&
             cJSON_AddNumberToObject(o, "n_prompt", g->n_prompt) &&
             cJSON_AddNumberToObject(o, "seed", (double)(g->sp.seed + (uint64_t)i));
        char *js = ok ? cJSON_PrintUnformatted(o) : NULL;
        if (js) printf("%s\n", js);
        else rc = -1;
        free(js);
        free(clean);
        cJSON_Delete(o);
    }
    free(text);
    fflush(stdout);
    return rc || ferror(stdout) ? -1 : 0;
}

int cli_run_parallel(engine *e, const cli_parallel_gen *g) {
    char err[512];
    const tokenizer *tok = engine_tokenizer(e);
    sched_params sp = {.n_batch = g->n_batch, .cont_batching = true, .prefix_reuse = true};
    sched *s = sched_new(e, &sp, err, sizeof err);
    sched_job *jobs = calloc((size_t)g->n_seq, sizeof *jobs);
    bool *done = calloc((size_t)g->n_seq, sizeof *done);
    int rc = EXIT_RUNTIME;
    if (!s || !jobs || !done) {
        cli_error("%s", s ? "out of memory" : err);
        goto out;
    }
    for (int i = 0; i < g->n_seq; i++) {
        sched_job *j = &jobs[i];
        j->prompt = g->prompt;
        j->n_prompt = g->n_prompt;
        j->n_predict = g->n_predict;
        j->sp = g->sp;
        j->sp.seed = g->sp.seed + (uint64_t)i;
        j->ignore_eos = g->ignore_eos;
        j->grammar = g->grammar;
        j->gvocab = g->gvocab;
        j->choice_next = i + 1 < g->n_seq ? &jobs[i + 1] : NULL;
    }
    const double t1 = cli_now_ms();
    sched_submit(s, &jobs[0]);
    int next = 0, n_err = 0;
    bool out_failed = false;
    while (!cli_signal()) {
        sched_job *j;
        while ((j = sched_next_done(s))) done[j - jobs] = true;
        /* each in turn, as soon as it and those before it are finished */
        for (; next < g->n_seq && done[next]; next++) {
            if (jobs[next].state == SCHED_ERROR) {
                n_err++;
                cli_error("sequence %d of %d: %s", next + 1, g->n_seq, jobs[next].err);
            }
            if (!out_failed && print_seq(g, tok, next, &jobs[next])) out_failed = true;
        }
        if (sched_idle(s) || out_failed) break;
        if (sched_step(s, err, sizeof err)) {
            cli_error("%s", err);
            goto out;
        }
    }
    if (out_failed) {
        cli_error("stdout: write failed (or out of memory)");
        goto out;
    }
    if (cli_signal() && g->log) fprintf(stderr, "\ninterrupted: %d of %d sequences printed\n", next, g->n_seq);
    if (g->log) {
        sched_stats st = sched_get_stats(s);
        double t_prompt = jobs[0].t_prompt - jobs[0].t_start, t_all = cli_now_ms() - t1;
        fprintf(stderr, "\nparallel: %d sequences from one prompt of %d tokens: %lld prompt tokens evaluated, %lld "
                "shared; %lld tokens generated in %lld decode steps\n", g->n_seq, g->n_prompt,
                (long long)st.n_prompt_eval, (long long)st.n_prompt_reused, (long long)st.n_gen,
                (long long)st.n_decode_steps);
        fprintf(stderr, "%16s = %10.2f ms\n", "load time", g->t_load);
        fprintf(stderr, "%16s = %10.2f ms / %5lld tokens (%8.2f tokens per second)\n", "prompt eval time", t_prompt,
                (long long)st.n_prompt_eval, t_prompt > 0 ? 1e3 * (double)st.n_prompt_eval / t_prompt : 0.0);
        fprintf(stderr, "%16s = %10.2f ms / %5lld tokens (%8.2f tokens per second, %lld steps)\n", "eval time",
                st.decode_ms, (long long)st.n_decode_tokens,
                st.decode_ms > 0 ? 1e3 * (double)st.n_decode_tokens / st.decode_ms : 0.0, (long long)st.n_decode_steps);
        fprintf(stderr, "%16s = %10.2f ms\n", "total time", g->t_load + t_all);
    }
    rc = cli_signal() ? 128 + cli_signal() : n_err ? EXIT_RUNTIME : 0;
out:
    for (int i = 0; jobs && i < g->n_seq; i++) {
        free(jobs[i].out);
        free(jobs[i].lp);
        free(jobs[i].lp_top);
    }
    free(jobs);
    free(done);
    sched_free(s);
    return rc;
}
