/* Chat requests and stop strings for mgi batch: a request's "messages" rendered with the model's
 * chat template into its prompt text, and llama-server's "stop" (the text ends before the first
 * stop string, and generation ends once one has appeared). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "engine/chat.h"
#include "engine/unicode.h"

int cli_chat_request_render(request *r, const struct chat_template *ct, const tokenizer *tok) {
    char err[1024];
    size_t len;
    char *text = chat_render(ct, r->messages, true, r->chat_kwargs, &len, err, sizeof err);
    if (!text) {
        size_t n = strlen(err) + 64;
        if (!(r->error = malloc(n))) return -1;
        snprintf(r->error, n, "chat template: %s", err);
        return 0;
    }
    /* batch adds the BOS token itself where the vocabulary asks for one: a template that writes
     * the BOS text too would give two */
    const char *bos = chat_template_bos(ct);
    size_t bl = bos ? strlen(bos) : 0;
    if (bl && tokenizer_add_bos(tok) && tokenizer_bos(tok) >= 0 && len >= bl && !memcmp(text, bos, bl)) {
        memmove(text, text + bl, len - bl + 1);
        len -= bl;
    }
    free(r->prompt);
    r->prompt = text;
    r->prompt_len = len;
    return 0;
}

/* The longest text a stop check needs: the longest stop string and the piece that completed it. */
enum { STOP_TAIL = 2 * REQUEST_STOP_MAX_LEN + 512 };

int cli_stop_check(const tokenizer *tok, char *const *stop, int n_stop, cli_chat_text *tail, int32_t id) {
    size_t n;
    const char *p = tokenizer_piece(tok, id, &n);
    if (n > STOP_TAIL) p += n - STOP_TAIL, n = STOP_TAIL;
    if (!tail->s && !(tail->s = malloc((tail->cap = 2 * STOP_TAIL + 1)))) return -1;
    if (tail->len + n > 2 * STOP_TAIL) {  /* keep the last STOP_TAIL bytes */
        size_t keep = tail->len < STOP_TAIL ? tail->len : STOP_TAIL;
        memmove(tail->s, tail->s + tail->len - keep, keep);
        tail->len = keep;
    }
    memcpy(tail->s + tail->len, p, n);
    tail->len += n;
    for (int k = 0; k < n_stop; k++) {
        size_t sl = strlen(stop[k]);
        /* only where this piece could have completed it */
        size_t from = tail->len > n + sl ? tail->len - n - sl : 0;
        if (tail->len - from >= sl && memmem(tail->s + from, tail->len - from, stop[k], sl)) return 1;
    }
    return 0;
}

size_t cli_stop_cut(const char *text, size_t n, char *const *stop, int n_stop) {
    size_t cut = n;
    for (int k = 0; k < n_stop; k++) {
        const char *at = memmem(text, n, stop[k], strlen(stop[k]));
        if (at && (size_t)(at - text) < cut) cut = (size_t)(at - text);
    }
    return cut;
}

/* One token for the logprobs list: its text (bytes that are not whole UTF-8 written \\xNN, as
 * OpenAI does), logprob and bytes. */
static cJSON *logprob_entry(const tokenizer *tok, int32_t id, double lp) {
    size_t n;
    const char *p = tokenizer_piece(tok, id, &n);
    char *text = malloc(4 * n + 1);
    cJSON *e = cJSON_CreateObject(), *bytes = NULL;
    size_t t = 0;
    for (size_t i = 0; text && i < n;) {
        uint32_t cp;
        size_t k = unicode_decode(p + i, n - i, &cp);
        if (cp == UNICODE_INVALID) t += (size_t)sprintf(text + t, "\\x%02x", (unsigned char)p[i]);
        else memcpy(text + t, p + i, k), t += k;
        i += k;
    }
    if (text) text[t] = 0;
    bool ok = e && text && cJSON_AddNumberToObject(e, "id", id) && cJSON_AddStringToObject(e, "token", text) &&
              cJSON_AddNumberToObject(e, "logprob", lp) && (bytes = cJSON_AddArrayToObject(e, "bytes"));
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *b = cJSON_CreateNumber((unsigned char)p[i]);
        ok = b != NULL;
        if (ok) cJSON_AddItemToArray(bytes, b);
    }
    free(text);
    if (!ok) cJSON_Delete(e), e = NULL;
    return e;
}

cJSON *cli_logprobs_json(const tokenizer *tok, const sched_job *j) {
    cJSON *a = cJSON_CreateArray();
    for (int32_t k = 0; a && k < j->n_out; k++) {
        cJSON *e = logprob_entry(tok, j->out[k], j->lp[k]), *top = e ? cJSON_AddArrayToObject(e, "top_logprobs") : NULL;
        for (int32_t t = 0; top && t < j->n_logprobs; t++) {
            const sampler_logprob *x = &j->lp_top[(size_t)k * j->n_logprobs + t];
            cJSON *te = logprob_entry(tok, x->id, x->logprob);
            if (!te) top = NULL;
            else cJSON_AddItemToArray(top, te);
        }
        if (!top) {
            cJSON_Delete(e);
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

/* --- OpenAI Batch API output lines ------------------------------------------------------------ */

char *cli_openai_result(const request *r, int64_t line_no, const char *model, cli_choice_out *ch, int32_t n_ch,
                        const char *error, int status, int32_t n_prompt, int32_t n_out) {
    char rid[64], *out = NULL;
    snprintf(rid, sizeof rid, "%lld", (long long)line_no);
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    cJSON *o = cJSON_CreateObject(), *resp, *body, *id = cJSON_Parse(r->id);
    char buf[96];
    bool ok = o && id;
    snprintf(buf, sizeof buf, "batch_req_%s", rid);
    ok = ok && cJSON_AddStringToObject(o, "id", buf);
    if (ok) cJSON_AddItemToObject(o, "custom_id", id), id = NULL;
    ok = ok && (resp = cJSON_AddObjectToObject(o, "response")) && cJSON_AddNumberToObject(resp, "status_code", status);
    snprintf(buf, sizeof buf, "req_%s", rid);
    ok = ok && cJSON_AddStringToObject(resp, "request_id", buf) && (body = cJSON_AddObjectToObject(resp, "body"));
    if (ok && error) {  /* OpenAI's HTTP errors: the status and an error body; "error" stays null */
        cJSON *e = cJSON_AddObjectToObject(body, "error");
        ok = e && cJSON_AddStringToObject(e, "message", error) &&
             cJSON_AddStringToObject(e, "type", status == 400 ? "invalid_request_error" : "server_error") &&
             cJSON_AddNullToObject(e, "param") && cJSON_AddNullToObject(e, "code");
    } else if (ok) {
        bool chat = r->openai == REQUEST_OPENAI_CHAT;
        snprintf(buf, sizeof buf, "%s-%s", chat ? "chatcmpl" : "cmpl", rid);
        cJSON *choices, *u;
        ok = cJSON_AddStringToObject(body, "id", buf) &&
             cJSON_AddStringToObject(body, "object", chat ? "chat.completion" : "text_completion") &&
             cJSON_AddNumberToObject(body, "created", (double)time(NULL)) && cJSON_AddStringToObject(body, "model", base) &&
             (choices = cJSON_AddArrayToObject(body, "choices"));
        for (int32_t k = 0; ok && k < n_ch; k++) {
            cJSON *c = cJSON_CreateObject();
            if (!(ok = c != NULL)) break;
            cJSON_AddItemToArray(choices, c);
            ok = cJSON_AddNumberToObject(c, "index", k);
            if (ok && chat) {
                cJSON *m = cJSON_AddObjectToObject(c, "message");
                ok = m && cJSON_AddStringToObject(m, "role", "assistant") &&
                     cJSON_AddStringToObject(m, "content", ch[k].text);
            } else if (ok) {
                ok = cJSON_AddStringToObject(c, "text", ch[k].text);
            }
            cJSON *lpo = NULL;
            if (ok && ch[k].logprobs && (lpo = cJSON_AddObjectToObject(c, "logprobs"))) {
                cJSON_AddItemToObject(lpo, "content", ch[k].logprobs);  /* OpenAI's chat form, for both urls */
                ch[k].logprobs = NULL;
            }
            ok = ok && (lpo || cJSON_AddNullToObject(c, "logprobs")) &&
                 cJSON_AddStringToObject(c, "finish_reason", ch[k].reason);
        }
        /* usage: the prompt once, the completion tokens of every choice (as OpenAI counts n) */
        ok = ok && (u = cJSON_AddObjectToObject(body, "usage")) && cJSON_AddNumberToObject(u, "prompt_tokens", n_prompt) &&
             cJSON_AddNumberToObject(u, "completion_tokens", n_out) &&
             cJSON_AddNumberToObject(u, "total_tokens", (double)n_prompt + n_out);
    }
    ok = ok && cJSON_AddNullToObject(o, "error");
    char *js = ok ? cJSON_PrintUnformatted(o) : NULL;
    if (js && (out = malloc(strlen(js) + 2))) sprintf(out, "%s\n", js);
    free(js);
    cJSON_Delete(id);
    cJSON_Delete(o);
    return out;
}
