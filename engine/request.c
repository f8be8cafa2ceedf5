/* Batch input lines to requests: plain text or a JSON object (libcjson), with per-field type and
 * range checks and messages naming the line and field. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jsonschema.h"
#include "engine/request.h"

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static char *dup_mem(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

void request_free(request *r) {
    free(r->id);
    free(r->prompt);
    free(r->error);
    free(r->warning);
    free(r->bias);
    cJSON_Delete(r->messages);
    cJSON_Delete(r->chat_kwargs);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    grammar_free(r->grammar);
    memset(r, 0, sizeof *r);
}

/* A JSON number that is an integer in [lo, hi]; 0, or -1 with the reason in *why. */
static int json_int(const cJSON *v, double lo, double hi, int64_t *out, const char **why) {
    if (!cJSON_IsNumber(v)) { *why = "must be a number"; return -1; }
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) { *why = "must be an integer"; return -1; }
    if (d < lo || d > hi) { *why = "is out of range"; return -1; }
    *out = (int64_t)d;
    return 0;
}

static int json_num(const cJSON *v, double lo, double hi, float *out, const char **why) {
    if (!cJSON_IsNumber(v)) { *why = "must be a number"; return -1; }
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi) { *why = "is out of range"; return -1; }
    *out = (float)d;
    return 0;
}

/* "messages", "chat_template_kwargs", "stop": 0 known and good, 1 not one of them, -1 bad. */
static int apply_chat_field(request *r, const cJSON *f, const char **why, const char **range) {
    const char *k = f->string;
    if (!strcmp(k, "messages")) {
        *range = "a list of {\"role\": string, \"content\": string or list}";
        if (!cJSON_IsArray(f) || !cJSON_GetArraySize(f)) { *why = "must be a non-empty list"; return -1; }
        for (const cJSON *m = f->child; m; m = m->next) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"),
                        *content = cJSON_GetObjectItemCaseSensitive(m, "content");
            if (!cJSON_IsObject(m)) { *why = "holds an item that is not an object"; return -1; }
            if (!cJSON_IsString(role)) { *why = role ? "has a \"role\" that is not a string" : "has a message without \"role\""; return -1; }
            /* an assistant turn that only called tools may have null content, as OpenAI allows */
            if (!cJSON_IsString(content) && !cJSON_IsArray(content) &&
                !(cJSON_IsNull(content) && cJSON_GetObjectItemCaseSensitive(m, "tool_calls"))) {
                *why = content ? "has a \"content\" that is not a string or list" : "has a message without \"content\"";
                return -1;
            }
        }
        cJSON_Delete(r->messages);
        if (!(r->messages = cJSON_Duplicate(f, 1))) { *why = "is too large (out of memory)"; return -1; }
    } else if (!strcmp(k, "logprobs") || !strcmp(k, "top_logprobs") || !strcmp(k, "n_probs")) {
        /* logprobs: a bool (chat), or the count of alternatives (OpenAI's completions) */
        int64_t n = 0;
        *range = "true/false, or 0..20 alternatives";
        if (!strcmp(k, "logprobs") && cJSON_IsBool(f)) {
            if (cJSON_IsFalse(f)) r->n_logprobs = -1;
            else if (r->n_logprobs < 0) r->n_logprobs = 0;
            return 0;
        }
        if (json_int(f, 0, 20, &n, why)) return -1;
        if (!strcmp(k, "top_logprobs")) r->n_logprobs = (int)n;  /* with "logprobs": true, checked after */
        else r->n_logprobs = n || !strcmp(k, "logprobs") ? (int)n : -1;
        if (!strcmp(k, "top_logprobs")) r->want_top = true;
    } else if (!strcmp(k, "chat_template_kwargs")) {
        *range = "an object such as {\"enable_thinking\": false}";
        if (!cJSON_IsObject(f)) { *why = "must be an object"; return -1; }
        cJSON_Delete(r->chat_kwargs);
        if (!(r->chat_kwargs = cJSON_Duplicate(f, 1))) { *why = "is too large (out of memory)"; return -1; }
    } else if (!strcmp(k, "stop")) {
        *range = "a string or a list of at most 16 strings of 1..256 bytes";
        const cJSON *one = cJSON_IsString(f) ? f : NULL;
        if (!one && !cJSON_IsArray(f)) { *why = "must be a string or a list of strings"; return -1; }
        if (!one && cJSON_GetArraySize(f) > REQUEST_MAX_STOP) { *why = "has too many strings"; return -1; }
        for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
        r->n_stop = 0;
        for (const cJSON *s = one ? one : f->child; s; s = one ? NULL : s->next) {
            if (!cJSON_IsString(s)) { *why = "holds an item that is not a string"; return -1; }
            size_t n = strlen(s->valuestring);
            if (!n || n > REQUEST_STOP_MAX_LEN) { *why = n ? "holds a string that is too long" : "holds an empty string"; return -1; }
            if (!(r->stop[r->n_stop] = dup_mem(s->valuestring, n))) { *why = "is too large (out of memory)"; return -1; }
            r->n_stop++;
        }
    } else {
        return 1;
    }
    return 0;
}

/* Applies one field of the object; 0 known and good, 1 unknown, -1 bad (*why, *range set). */
static int apply_field(request *r, const cJSON *f, const char **why, const char **range) {
    const char *k = f->string;
    request_params *p = &r->p;
    int64_t i;
    float x;
    if (!strcmp(k, "id") || !strcmp(k, "prompt")) return 0;  /* handled by the caller */
    int c = apply_chat_field(r, f, why, range);
    if (c != 1) return c;
    if (!strcmp(k, "grammar") || !strcmp(k, "json_schema") || !strcmp(k, "response_format"))
        return 0; /* request_grammar, once every field is known */
    if (!strcmp(k, "n_predict") || !strcmp(k, "max_tokens")) {
        *range = "-1 (until end of text) or 1..2^30";
        if (json_int(f, -1, 1 << 30, &i, why)) return -1;
        if (i == 0) { *why = "generates nothing"; return -1; }
        p->n_predict = (int32_t)i;
    } else if (!strcmp(k, "n") || !strcmp(k, "n_cmpl")) {
        *range = "1..128 choices";
        if (json_int(f, 1, REQUEST_MAX_N, &i, why)) return -1;
        r->n_choices = (int)i;
    } else if (!strcmp(k, "temperature") || !strcmp(k, "temp")) {
        *range = ">= 0 (0 = greedy)";
        if (json_num(f, 0, 1e30, &x, why)) return -1;
        p->sp.temp = x;
    } else if (!strcmp(k, "seed")) {
        *range = "-1 (random) or 0..2^53";
        if (json_int(f, -1, 9007199254740992.0, &i, why)) return -1;
        p->seed = i;
    } else if (!strcmp(k, "top_k")) {
        *range = "0 (off) or more";
        if (json_int(f, -1, 1 << 30, &i, why)) return -1;
        p->sp.top_k = (int32_t)i;
    } else if (!strcmp(k, "top_p")) {
        *range = "[0, 1]";
        if (json_num(f, 0, 1, &x, why)) return -1;
        p->sp.top_p = x;
    } else if (!strcmp(k, "min_p")) {
        *range = "[0, 1]";
        if (json_num(f, 0, 1, &x, why)) return -1;
        p->sp.min_p = x;
    } else if (!strcmp(k, "repeat_penalty")) {
        *range = "> 0 (1 = off)";
        if (json_num(f, 0, 1e30, &x, why)) return -1;
        if (!(x > 0)) { *why = "is out of range"; return -1; }
        p->sp.repeat_penalty = x;
    } else if (!strcmp(k, "presence_penalty") || !strcmp(k, "frequency_penalty")) {
        *range = "a finite number (0 = off)";
        if (json_num(f, -1e30, 1e30, &x, why)) return -1;
        if (k[0] == 'p') p->sp.presence_penalty = x;
        else p->sp.freq_penalty = x;
    } else if (!strcmp(k, "repeat_last_n")) {
        *range = "-1 (the context) or 0..2^24";
        if (json_int(f, -1, 1 << 24, &i, why)) return -1;
        p->sp.repeat_last_n = (int32_t)i;
    } else if (!strcmp(k, "logit_bias")) {
        /* llama-server's forms: [[id, bias], ...] or {"id": bias, ...}, bias a number or false
         * (never picked); ids are checked against the vocabulary when the request starts */
        *range = "[[token id, bias or false], ...] or {\"token id\": bias or false}";
        int n = cJSON_GetArraySize(f);
        if ((!cJSON_IsArray(f) && !cJSON_IsObject(f)) || n > 1 << 16) { *why = "has the wrong form"; return -1; }
        sampler_bias *b = malloc(((size_t)n + 1) * sizeof *b);
        if (!b) { *why = "is too large (out of memory)"; return -1; }
        int i = 0;
        for (const cJSON *e = f->child; e; e = e->next, i++) {
            const cJSON *v = e; /* the bias */
            int64_t t = -1;
            float x = 0;
            const char *w = NULL;
            if (cJSON_IsArray(f)) {
                v = cJSON_GetArrayItem(e, 1);
                if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || json_int(cJSON_GetArrayItem(e, 0), 0, INT32_MAX, &t, &w))
                    w = "has the wrong form";
            } else {
                char *end;
                errno = 0;
                long long tt = strtoll(e->string, &end, 10);
                if (*e->string && !*end && !errno && tt >= 0 && tt <= INT32_MAX) t = tt;
                else w = "has a key that is not a token id";
            }
            if (!w && cJSON_IsFalse(v)) x = -INFINITY;
            else if (!w && json_num(v, -1e30, 1e30, &x, &w)) w = "has a bias that is not a number or false";
            if (w) {
                free(b);
                *why = w;
                return -1;
            }
            b[i] = (sampler_bias){(int32_t)t, x};
        }
        free(r->bias);
        r->bias = b;
        p->sp.bias = b;
        p->sp.n_bias = n;
    } else if (!strcmp(k, "ignore_eos")) {
        *range = "true or false";
        if (!cJSON_IsBool(f)) { *why = "must be true or false"; return -1; }
        p->ignore_eos = cJSON_IsTrue(f);
    } else {
        return 1;
    }
    return 0;
}

/* An OpenAI Batch API line: the envelope checked, the body becomes the object whose fields are
 * read (a borrowed pointer into obj), r->id the custom_id. 0, or -1 with *why set. */
static int openai_envelope(request *r, const cJSON *obj, const cJSON **body, const char **why) {
    const cJSON *cid = cJSON_GetObjectItemCaseSensitive(obj, "custom_id"),
                *method = cJSON_GetObjectItemCaseSensitive(obj, "method"),
                *url = cJSON_GetObjectItemCaseSensitive(obj, "url");
    r->openai = REQUEST_OPENAI_CHAT;
    if (cJSON_IsString(cid)) {
        char *t = cJSON_PrintUnformatted(cid);
        if (!t) { *why = "out of memory"; return -1; }
        free(r->id);
        r->id = t;
    }
    *body = cJSON_GetObjectItemCaseSensitive(obj, "body");
    if (!cJSON_IsString(cid)) *why = "\"custom_id\" must be a string";
    else if (method && (!cJSON_IsString(method) || strcmp(method->valuestring, "POST")))
        *why = "\"method\" must be \"POST\"";
    else if (!cJSON_IsString(url) || (strcmp(url->valuestring, "/v1/chat/completions") &&
                                      strcmp(url->valuestring, "/v1/completions")))
        *why = "\"url\" is not served here: /v1/chat/completions or /v1/completions";
    else if (!cJSON_IsObject(*body))
        *why = "\"body\" must be an object";
    else {
        if (!strcmp(url->valuestring, "/v1/completions")) r->openai = REQUEST_OPENAI_COMPLETION;
        return 0;
    }
    return -1;
}

/* The body fields OpenAI has and mgi batch has not, or names differently: 0 taken (or
 * ignored: model), 1 not one of them, -1 refused (*why). */
static int openai_field(request *r, const cJSON *f, const char **why) {
    const char *k = f->string;
    if (!strcmp(k, "model") || !strcmp(k, "user")) return 0;  /* one model serves the whole file */
    if ((r->openai == REQUEST_OPENAI_CHAT && !strcmp(k, "prompt")) ||
        (r->openai == REQUEST_OPENAI_COMPLETION && !strcmp(k, "messages"))) {
        *why = r->openai == REQUEST_OPENAI_CHAT ? "/v1/chat/completions takes \"messages\", not \"prompt\""
                                                : "/v1/completions takes \"prompt\", not \"messages\"";
        return -1;
    }
    return 1;
}

/* --- structured output ---------------------------------------------------------------------- */

/* llama-server's fields: "grammar" (GBNF text) or "json_schema" (a schema object), not both;
 * "response_format" as its OpenAI-style endpoint reads it: "json_object" takes its optional
 * "schema" and without one any JSON object (llama-server's default schema {} becomes an object
 * in llama.cpp's converter), "json_schema" takes "json_schema"."schema", "text" adds nothing.
 * Compiled here, so a bad grammar is this line's error before any model is loaded. 0, or -1
 * when out of memory. */
static int request_grammar(request *r, const cJSON *obj, int64_t line_no) {
    const cJSON *gf = cJSON_GetObjectItemCaseSensitive(obj, "grammar");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(obj, "json_schema");
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(obj, "response_format");
    const char *field = NULL, *why = NULL;
    const cJSON *schema = NULL;
    char *schema_text = NULL;
    if (!gf && !js && !rf) return 0;
    if ((gf != NULL) + (js != NULL) + (rf != NULL) > 1) {
        r->error = dup_printf("line %lld: give one of \"grammar\", \"json_schema\" and \"response_format\", "
                              "not several", (long long)line_no);
        return r->error ? 0 : -1;
    }
    if (gf) {
        field = "grammar";
        if (!cJSON_IsString(gf)) why = "must be a string of GBNF rules (root ::= ...)";
    } else if (js) {
        field = "json_schema";
        if (!cJSON_IsObject(js)) why = "must be a JSON Schema object";
        schema = js;
    } else {
        field = "response_format";
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
        if (!cJSON_IsObject(rf) || !t) {
            why = "must be an object with a \"type\": \"json_object\", \"json_schema\" or \"text\"";
        } else if (!strcmp(t, "text")) {
            return 0;
        } else if (!strcmp(t, "json_object")) {
            schema = cJSON_GetObjectItemCaseSensitive(rf, "schema");
            if (schema && !cJSON_IsObject(schema)) why = "has a \"schema\" that is not an object";
        } else if (!strcmp(t, "json_schema")) {
            const cJSON *w = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
            schema = cJSON_GetObjectItemCaseSensitive(w, "schema");
            if (!cJSON_IsObject(w)) why = "needs \"json_schema\": {\"schema\": {...}}";
            else if (schema && !cJSON_IsObject(schema)) why = "has a \"json_schema\".\"schema\" that is not an object";
        } else {
            why = "has a \"type\" other than \"json_object\", \"json_schema\" and \"text\"";
        }
        if (!why && !schema) { /* llama-server: {} then llama.cpp's converter, which reads {} as any object */
            if (!(schema_text = dup_printf("{\"type\": \"object\", \"additionalProperties\": true}"))) return -1;
        }
    }
    if (why) {
        r->error = dup_printf("line %lld: \"%s\" %s", (long long)line_no, field, why);
        return r->error ? 0 : -1;
    }
    char err[512];
    if (gf) {
        r->grammar = grammar_parse(gf->valuestring, strlen(gf->valuestring), err, sizeof err);
    } else {
        if (!schema_text && !(schema_text = cJSON_PrintUnformatted(schema))) return -1;
        r->grammar = jsonschema_compile(schema_text, strlen(schema_text), err, sizeof err);
    }
    free(schema_text);
    if (!r->grammar) {
        r->error = dup_printf("line %lld: \"%s\": %s", (long long)line_no, field, err);
        return r->error ? 0 : -1;
    }
    return 0;
}

static int parse_json(request *r, const char *line, size_t len, int64_t line_no) {
    const char *end = NULL;
    if (!(r->id = dup_printf("%lld", (long long)line_no))) return -1;
    /* JSON text has no raw NUL (inside a string it is written \u0000); the parser would stop at
     * one and take the fields cut short. */
    const char *nul = memchr(line, 0, len);
    if (nul) {
        r->error = dup_printf("line %lld: a raw NUL byte (at byte %zu) is not JSON; write it as \\u0000",
                              (long long)line_no, (size_t)(nul - line) + 1);
        return r->error ? 0 : -1;
    }
    cJSON *obj = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!obj || !cJSON_IsObject(obj)) {
        size_t at = obj ? 0 : end && end >= line && end <= line + len ? (size_t)(end - line) : 0;
        r->error = obj ? dup_printf("line %lld: a JSON line must be an object", (long long)line_no)
                       : dup_printf("line %lld: not valid JSON (at byte %zu)", (long long)line_no, at + 1);
        cJSON_Delete(obj);
        return r->error ? 0 : -1;
    }
    for (const char *q = end; q && q < line + len; q++)
        if (*q != ' ' && *q != '\t') {
            cJSON_Delete(obj);
            r->error = dup_printf("line %lld: text after the JSON object (at byte %zu)", (long long)line_no,
                                  (size_t)(q - line) + 1);
            return r->error ? 0 : -1;
        }
    int rc = 0;
    const cJSON *fields = obj;  /* an OpenAI line's body */
    if (cJSON_GetObjectItemCaseSensitive(obj, "custom_id") || cJSON_GetObjectItemCaseSensitive(obj, "body")) {
        const char *why = NULL;
        if (openai_envelope(r, obj, &fields, &why)) {
            if (!(r->error = dup_printf("line %lld: %s", (long long)line_no, why))) rc = -1;
            goto out;
        }
        goto fields;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "id");
    /* A number past double's range parses as infinity, which prints as null: not an id. */
    if (id && (cJSON_IsString(id) || (cJSON_IsNumber(id) && isfinite(id->valuedouble)))) {
        char *text = cJSON_PrintUnformatted(id);
        if (!text) { rc = -1; goto out; }
        free(r->id);
        r->id = text;
    } else {
        id = NULL;
    }
    if (cJSON_GetObjectItemCaseSensitive(obj, "id") && !id) {
        r->error = dup_printf("line %lld: \"id\" must be a string or a number", (long long)line_no);
        goto out;
    }
fields:;
    /* Unknown names are collected into one warning; the first bad field is the error. */
    size_t wlen = 0;
    for (const cJSON *f = fields->child; f; f = f->next) {
        const char *why = "", *range = "";
        int a = r->openai ? openai_field(r, f, &why) : 1;
        if (a < 0) {
            if (!(r->error = dup_printf("line %lld: %s", (long long)line_no, why))) rc = -1;
            goto out;
        }
        if (a == 0) continue;
        if (r->openai && !strcmp(f->string, "max_completion_tokens")) {
            cJSON alias = *f;
            alias.string = "max_tokens";
            a = apply_field(r, &alias, &why, &range);
        } else {
            a = apply_field(r, f, &why, &range);
        }
        if (a < 0) {
            char *v = cJSON_PrintUnformatted(f);
            r->error = dup_printf("line %lld: \"%s\" %s%s%s (%s: %.40s)", (long long)line_no, f->string, why,
                                  *range ? ", expected " : "", range, "got", v ? v : "?");
            free(v);
            if (!r->error) rc = -1;
            goto out;
        }
        if (a == 1) {
            char *w = dup_printf("%s%s\"%.60s\"", r->warning ? r->warning : "", r->warning ? ", " : "", f->string);
            if (!w) { rc = -1; goto out; }
            free(r->warning);
            r->warning = w;
            wlen++;
        }
    }
    if (r->warning) {
        char *w = dup_printf("line %lld: unknown field%s %s ignored", (long long)line_no, wlen > 1 ? "s" : "",
                             r->warning);
        free(r->warning);
        if (!(r->warning = w)) { rc = -1; goto out; }
    }
    if (request_grammar(r, fields, line_no)) { rc = -1; goto out; }
    if (r->error) goto out;
    /* OpenAI's top_logprobs needs logprobs: true */
    const cJSON *lpf = cJSON_GetObjectItemCaseSensitive(fields, "logprobs");
    if (r->want_top && !cJSON_IsTrue(lpf) && !cJSON_IsNumber(lpf)) r->n_logprobs = -1;
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(fields, "prompt");
    if (r->openai == REQUEST_OPENAI_CHAT && !r->messages) {
        r->error = dup_printf("line %lld: /v1/chat/completions needs \"messages\" in the body", (long long)line_no);
        goto out;
    }
    if (r->messages && prompt) {
        r->error = dup_printf("line %lld: \"prompt\" and \"messages\" both given: use one", (long long)line_no);
        goto out;
    }
    if (r->messages) goto out;  /* the caller renders them with the model's template */
    if (!cJSON_IsString(prompt)) {
        r->error = dup_printf("line %lld: \"prompt\" %s", (long long)line_no,
                              prompt ? "must be a string" : "is missing");
        goto out;
    }
    r->prompt_len = strlen(prompt->valuestring);
    if (!(r->prompt = dup_mem(prompt->valuestring, r->prompt_len))) rc = -1;
out:
    cJSON_Delete(obj);
    if (!rc && r->error) {
        free(r->prompt);
        r->prompt = NULL;
    }
    return rc || (r->error == NULL && r->prompt == NULL && r->messages == NULL) ? -1 : 0;
}

int request_parse(request *r, const char *line, size_t len, int64_t line_no, const request_params *defaults) {
    memset(r, 0, sizeof *r);
    r->p = *defaults;
    r->n_logprobs = -1;
    r->n_choices = 1;
    if (len && line[len - 1] == '\r') len--;
    size_t lead = 0;
    while (lead < len && (line[lead] == ' ' || line[lead] == '\t')) lead++;
    if (lead < len && line[lead] == '{') {
        if (parse_json(r, line + lead, len - lead, line_no)) {
            request_free(r);
            return -1;
        }
        return 0;
    }
    if (lead == len) r->blank = true;
    r->id = dup_printf("%lld", (long long)line_no);
    r->prompt = dup_mem(line, len);
    r->prompt_len = len;
    if (!r->id || !r->prompt) {
        request_free(r);
        return -1;
    }
    return 0;
}
