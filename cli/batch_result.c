/* mgi batch's result lines: a finished request (one choice or "n" of them) as one JSON line, in
 * mgi's native shape or OpenAI's (cli/chat_batch.c), and the "stop" hook its jobs call. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_batch_stop(const sched_job *j, void *ctx) {
    cli_batch_choice *c = ctx;
    const request *r = &c->it->req;
    return cli_stop_check(c->it->tok, r->stop, r->n_stop, &c->stop_tail, j->out[j->n_out - 1]) != 0;
}

char *cli_utf8_clean(const char *s, size_t n) {
    char *out = malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = ((unsigned char)s[i + k] >> 6) == 2;
        if (ok && len == 2) ok = c >= 0xc2;
        if (ok && len == 3) {
            unsigned c1 = (unsigned char)s[i + 1];
            ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
        }
        if (ok && len == 4) {
            unsigned c1 = (unsigned char)s[i + 1];
            ok = c <= 0xf4 && !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
        }
        if (ok && c == 0) ok = false;  /* a NUL would end the C string */
        if (ok) {
            memcpy(o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    *o = 0;
    return out;
}

/* A job's text as mgi run prints it (the pieces through the streaming detokeniser), ending
 * before the first stop string (llama-server's "stop"), as valid UTF-8; NULL when out of memory. */
static char *job_text(const sched_job *j, const request *r, const tokenizer *tok) {
    if (!j->n_out) return strdup(""); /* a bad line's: no model may have been loaded */
    size_t cap = 64, n = 0;
    char *buf = malloc(cap);
    tokenizer_stream st = {0};
    for (int32_t i = 0; buf && i <= j->n_out; i++) {
        size_t need = tokenizer_max_piece(tok) + 16;
        if (n + need > cap) {
            char *nb = realloc(buf, 2 * cap + need);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap = 2 * cap + need;
        }
        n += i < j->n_out ? tokenizer_stream_put(tok, &st, j->out[i], buf + n, cap - n)
                          : tokenizer_stream_flush(&st, buf + n, cap - n);
    }
    if (!buf) return NULL;
    size_t cut = r->n_stop ? cli_stop_cut(buf, n, r->stop, r->n_stop) : n;
    char *text = cli_utf8_clean(buf, cut);
    free(buf);
    return text;
}

static const char *job_error(const cli_batch_item *it, const sched_job *j) {
    return it->req.error ? it->req.error : j->state == SCHED_ERROR ? j->err : NULL;
}

static const char *job_reason(const cli_batch_item *it, const sched_job *j) {
    return job_error(it, j) ? "error" : j->state == SCHED_STOP ? "stop" : "length";
}

static double round3(double x) { return round(x * 1000.0) / 1000.0; }

/* One choice's "text", "tokens", "logprobs" (when asked), "finish_reason" and "error" (when
 * failed) into o; 0, or -1 when out of memory. */
static int add_choice(cJSON *o, const cli_batch_item *it, const sched_job *j, const tokenizer *tok) {
    const char *error = job_error(it, j);
    char *text = job_text(j, &it->req, tok);
    bool ok = text && cJSON_AddStringToObject(o, "text", text);
    free(text);
    cJSON *ids = ok ? cJSON_AddArrayToObject(o, "tokens") : NULL;
    for (int32_t i = 0; ids && i < j->n_out; i++) {
        cJSON *v = cJSON_CreateNumber(j->out[i]);
        if (!v) ids = NULL;
        else cJSON_AddItemToArray(ids, v);
    }
    if (!ids) return -1;
    if (!error && it->req.n_logprobs >= 0) {
        cJSON *lp = cli_logprobs_json(tok, j);
        if (!lp) return -1;
        cJSON_AddItemToObject(o, "logprobs", lp);
    }
    if (!cJSON_AddStringToObject(o, "finish_reason", job_reason(it, j))) return -1;
    return error && !cJSON_AddStringToObject(o, "error", error) ? -1 : 0;
}

/* OpenAI's line: the choices' texts and log-probabilities; status 400 for a bad line, 500 when a
 * choice failed while running. */
static char *openai_line(const cli_batch_item *it, const tokenizer *tok) {
    int32_t n = it->req.error ? 1 : it->req.n_choices, n_out = 0;
    cli_choice_out *co = calloc((size_t)n, sizeof *co);
    const char *error = it->req.error;
    char *line = NULL;
    bool ok = co != NULL;
    for (int32_t c = 0; ok && c < n; c++) {
        const sched_job *j = &it->ch[c].job;
        if (!error && j->state == SCHED_ERROR) error = j->err;
        co[c].reason = job_reason(it, j);
        co[c].n_out = j->n_out;
        n_out += j->n_out;
        ok = (co[c].text = job_text(j, &it->req, tok)) != NULL;
        if (ok && !job_error(it, j) && it->req.n_logprobs >= 0) ok = (co[c].logprobs = cli_logprobs_json(tok, j)) != NULL;
    }
    if (ok)
        line = cli_openai_result(&it->req, it->line_no, it->model, co, n, error, it->req.error ? 400 : error ? 500 : 200,
                                 it->n_prompt, n_out);
    for (int32_t c = 0; co && c < n; c++) {
        free(co[c].text);
        cJSON_Delete(co[c].logprobs);
    }
    free(co);
    return line;
}

char *cli_batch_result_line(const cli_batch_item *it, const tokenizer *tok) {
    if (it->req.openai) return openai_line(it, tok);
    const sched_job *j0 = &it->ch[0].job;
    const bool several = !it->req.error && it->req.n_choices > 1;
    cJSON *o = cJSON_CreateObject();
    char *prompt = NULL, *out = NULL;
    bool ok = o && cJSON_AddRawToObject(o, "id", it->req.id);
    if (ok && it->req.prompt)
        ok = (prompt = cli_utf8_clean(it->req.prompt, it->req.prompt_len)) && cJSON_AddStringToObject(o, "prompt", prompt);
    free(prompt);
    /* the timings of the group: the prompt once, generation until the last choice ends */
    double t_end = j0->t_end;
    int32_t n_gen = 0;
    if (!several) {
        ok = ok && !add_choice(o, it, j0, tok);
        n_gen = j0->n_out;
    } else {
        cJSON *chs = ok ? cJSON_AddArrayToObject(o, "choices") : NULL;
        ok = chs != NULL;
        for (int32_t c = 0; ok && c < it->req.n_choices; c++) {
            const sched_job *j = &it->ch[c].job;
            cJSON *co = cJSON_CreateObject();
            if (!co) { ok = false; break; }
            cJSON_AddItemToArray(chs, co);
            ok = cJSON_AddNumberToObject(co, "index", c) && !add_choice(co, it, j, tok) &&
                 cJSON_AddNumberToObject(co, "n_generated", j->n_out) &&
                 (job_error(it, j) || cJSON_AddNumberToObject(co, "seed", (double)it->ch[c].seed));
            n_gen += j->n_out;
            if (j->t_end > t_end) t_end = j->t_end;
        }
    }
    double prompt_ms = j0->t_prompt - j0->t_start, gen_ms = t_end - j0->t_prompt;
    cJSON *t = NULL;
    ok = ok && cJSON_AddNumberToObject(o, "n_prompt", it->n_prompt) &&
         cJSON_AddNumberToObject(o, "n_generated", n_gen) && cJSON_AddNumberToObject(o, "n_reused", j0->n_reused) &&
         (several || job_error(it, j0) || cJSON_AddNumberToObject(o, "seed", (double)it->ch[0].seed)) &&
         (t = cJSON_AddObjectToObject(o, "timings")) &&
         cJSON_AddNumberToObject(t, "prompt_ms", round3(prompt_ms)) &&
         cJSON_AddNumberToObject(t, "gen_ms", round3(gen_ms)) &&
         cJSON_AddNumberToObject(t, "tokens_per_second", round3(gen_ms > 0 ? 1e3 * n_gen / gen_ms : 0));
    char *js = ok ? cJSON_PrintUnformatted(o) : NULL;
    if (js && (out = malloc(strlen(js) + 2))) sprintf(out, "%s\n", js);
    free(js);
    cJSON_Delete(o);
    return out;
}
