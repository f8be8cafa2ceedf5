/* Chat prompts from a conversation and the model's chat template (see chat.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/chat.h"
#include "engine/jinja.h"

/* llama.cpp's stand-in for a model without a template (common/chat.cpp). */
static const char chatml[] =
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}\n";

/* Number items of j in document order (pre-order), up to cap; returns how many there are. */
static size_t json_numbers(cJSON *j, cJSON **out, size_t n, size_t cap) {
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            if (n < cap) out[n] = j;
            n++;
        }
        n = json_numbers(j->child, out, n, cap);
    }
    return n;
}

cJSON *chat_json_parse(const char *text, size_t len, const char **end) {
    const char *stop = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &stop, 0);
    if (end) *end = stop;
    if (!root) return NULL;
    /* one value and nothing after it but whitespace */
    for (const char *p = stop; p && p < text + len; p++)
        if (!*p || !strchr(" \t\r\n", *p)) {
            if (end) *end = p;  /* where the stray text starts */
            cJSON_Delete(root);
            return NULL;
        }
    len = stop ? (size_t)(stop - text) : len;
    size_t count = json_numbers(root, NULL, 0, 0);
    cJSON **nums = count ? malloc(count * sizeof *nums) : NULL;
    if (!nums) return root;  /* no numbers, or no memory: ints stay ints */
    json_numbers(root, nums, 0, count);
    /* the text's number tokens come in the same order as the tree's number items */
    size_t k = 0;
    bool ok = true;
    for (size_t i = 0; i < len && ok;) {
        char ch = text[i];
        if (ch == '"') {
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\') i++;
            i++;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            bool is_float = false;
            for (; i < len && text[i] && strchr("+-0123456789.eE", text[i]); i++)
                is_float |= strchr(".eE", text[i]) != NULL;
            if (k >= count) ok = false;
            else if (is_float && !(nums[k]->valuestring = strdup("float"))) ok = false;
            k++;
        } else {
            i++;
        }
    }
    free(nums);
    return root;
}

struct chat_template {
    jinja_template *t;
    char *name, *bos, *eos;
    bool is_default;
};

static char *dup_or_empty(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

chat_template *chat_template_from_text(const char *text, size_t len, const char *name, const char *bos,
                                       const char *eos, char *err, size_t err_size) {
    chat_template *ct = calloc(1, sizeof *ct);
    if (!ct) {
        snprintf(err, err_size, "%s: out of memory for the chat template", name);
        return NULL;
    }
    ct->name = dup_or_empty(name, strlen(name));
    ct->bos = dup_or_empty(bos ? bos : "", bos ? strlen(bos) : 0);
    ct->eos = dup_or_empty(eos ? eos : "", eos ? strlen(eos) : 0);
    if (!ct->name || !ct->bos || !ct->eos) {
        snprintf(err, err_size, "%s: out of memory for the chat template", name);
        chat_template_free(ct);
        return NULL;
    }
    char msg[1024];
    ct->t = jinja_parse(text, len, msg, sizeof msg);
    if (!ct->t) {
        snprintf(err, err_size, "%s:%s (the chat template does not parse)", name, msg);
        chat_template_free(ct);
        return NULL;
    }
    return ct;
}

/* A special token's text from the tokenizer, or from tokenizer.ggml.tokens[KEY]; "" when the
 * vocabulary has none or the id is outside it. */
static char *token_text(const gguf_ctx *g, const tokenizer *t, const char *id_key, bool bos) {
    size_t n = 0;
    const char *s = "";
    if (t) {
        int32_t id = bos ? tokenizer_bos(t) : tokenizer_eos(t);
        if (id >= 0) s = tokenizer_text(t, id, &n);
    } else {
        uint32_t id;
        const gguf_value *toks;
        if (gguf_get_u32(g, id_key, &id) == GGUF_OK &&
            gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks) == GGUF_OK && id < toks->v.arr.n)
            s = toks->v.arr.items[id].v.str.ptr, n = (size_t)toks->v.arr.items[id].v.str.len;
    }
    return dup_or_empty(s, n);
}

int chat_special_tokens(const gguf_ctx *g, const tokenizer *t, char **bos, char **eos) {
    *bos = token_text(g, t, "tokenizer.ggml.bos_token_id", true);
    *eos = token_text(g, t, "tokenizer.ggml.eos_token_id", false);
    if (*bos && *eos) return 0;
    free(*bos);
    free(*eos);
    *bos = *eos = NULL;
    return -1;
}

chat_template *chat_template_from_gguf(const gguf_ctx *g, const char *path, const tokenizer *t, char *err,
                                       size_t err_size) {
    const gguf_value *v = gguf_get(g, "tokenizer.chat_template");
    if (v && v->type != GGUF_TYPE_STRING) {
        snprintf(err, err_size, "%s: key tokenizer.chat_template is a %s, not a string (a broken file?)", path,
                 gguf_type_name(v->type));
        return NULL;
    }
    char name[1100];
    snprintf(name, sizeof name, "%s: tokenizer.chat_template", path);
    char *bos, *eos;
    chat_template *ct = NULL;
    if (chat_special_tokens(g, t, &bos, &eos)) snprintf(err, err_size, "%s: out of memory", path);
    else if (v) ct = chat_template_from_text(v->v.str.ptr, (size_t)v->v.str.len, name, bos, eos, err, err_size);
    else ct = chat_template_from_text(chatml, sizeof chatml - 1, "ChatML (the default)", bos, eos, err, err_size);
    if (ct) ct->is_default = !v;
    free(bos);
    free(eos);
    return ct;
}

chat_template *chat_template_chatml(const char *bos, const char *eos, char *err, size_t err_size) {
    chat_template *ct =
        chat_template_from_text(chatml, sizeof chatml - 1, "ChatML (the default)", bos, eos, err, err_size);
    if (ct) ct->is_default = true;
    return ct;
}

void chat_template_free(chat_template *ct) {
    if (!ct) return;
    jinja_free(ct->t);
    free(ct->name);
    free(ct->bos);
    free(ct->eos);
    free(ct);
}

bool chat_template_is_default(const chat_template *ct) { return ct->is_default; }
const char *chat_template_bos(const chat_template *ct) { return ct->bos; }
const char *chat_template_eos(const chat_template *ct) { return ct->eos; }

char *chat_render_vars(const chat_template *ct, const cJSON *vars, size_t *len, char *err, size_t err_size) {
    if (!cJSON_IsObject(vars)) {
        snprintf(err, err_size, "%s: the template's variables must be a JSON object", ct->name);
        return NULL;
    }
    /* bos_token / eos_token default to the model's: a shallow copy with them added */
    cJSON *all = cJSON_CreateObject();
    bool ok = all != NULL;
    for (const cJSON *e = vars->child; e && ok; e = e->next) {
        cJSON *ref = cJSON_CreateObjectReference(e->child);
        if (cJSON_IsArray(e)) cJSON_Delete(ref), ref = cJSON_CreateArrayReference(e->child);
        else if (!cJSON_IsObject(e)) cJSON_Delete(ref), ref = cJSON_Duplicate(e, 0);
        ok = ref && cJSON_AddItemToObject(all, e->string ? e->string : "", ref);
    }
    if (ok && !cJSON_GetObjectItemCaseSensitive(vars, "bos_token"))
        ok = cJSON_AddStringToObject(all, "bos_token", ct->bos) != NULL;
    if (ok && !cJSON_GetObjectItemCaseSensitive(vars, "eos_token"))
        ok = cJSON_AddStringToObject(all, "eos_token", ct->eos) != NULL;
    if (!ok) {
        cJSON_Delete(all);
        snprintf(err, err_size, "%s: out of memory for the template's variables", ct->name);
        return NULL;
    }
    char msg[1024];
    char *out = jinja_render(ct->t, all, NULL, len, msg, sizeof msg);
    cJSON_Delete(all);
    if (!out) snprintf(err, err_size, "%s:%s", ct->name, msg);
    return out;
}

char *chat_render(const chat_template *ct, const cJSON *messages, bool add_generation_prompt, const cJSON *kwargs,
                  size_t *len, char *err, size_t err_size) {
    if (!cJSON_IsArray(messages)) {
        snprintf(err, err_size, "%s: messages must be a JSON array", ct->name);
        return NULL;
    }
    if (kwargs && !cJSON_IsObject(kwargs)) {
        snprintf(err, err_size, "%s: the extra template variables must be a JSON object", ct->name);
        return NULL;
    }
    cJSON *vars = kwargs ? cJSON_Duplicate(kwargs, 1) : cJSON_CreateObject();
    bool ok = vars != NULL;
    cJSON *m = ok ? cJSON_CreateArrayReference(messages->child) : NULL;
    if (ok) {
        cJSON_DeleteItemFromObjectCaseSensitive(vars, "messages");
        cJSON_DeleteItemFromObjectCaseSensitive(vars, "add_generation_prompt");
        ok = m && cJSON_AddItemToObject(vars, "messages", m) &&
             cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt);
        if (!ok && m && !cJSON_GetObjectItemCaseSensitive(vars, "messages")) cJSON_Delete(m);
    }
    if (!ok) {
        cJSON_Delete(vars);
        snprintf(err, err_size, "%s: out of memory for the template's variables", ct->name);
        return NULL;
    }
    char *out = chat_render_vars(ct, vars, len, err, err_size);
    cJSON_Delete(vars);
    return out;
}
