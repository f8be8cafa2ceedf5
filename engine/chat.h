/* Chat prompts: a conversation (messages as cJSON) rendered with the model's chat template
 * (GGUF key tokenizer.chat_template) or a given template text, by the Jinja engine
 * (engine/jinja.h), with transformers' apply_chat_template variables: messages,
 * add_generation_prompt, bos_token, eos_token, and any extra kwargs (tools, documents,
 * enable_thinking...). A model without a template gets ChatML, as llama.cpp does. */
#ifndef MGI_CHAT_H
#define MGI_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "engine/tokenizer.h"
#include "gguf/gguf.h"

typedef struct chat_template chat_template;

/* The vocabulary's BOS and EOS token text ("<s>", "<|im_end|>"; "" where it has none), from
 * the tokenizer when t is given, else straight from the file's tokenizer.ggml.* keys (so a file
 * whose tokenizer mgi cannot build still gives them). malloc'd; 0, or -1 when out of memory. */
int chat_special_tokens(const gguf_ctx *g, const tokenizer *t, char **bos, char **eos);

/* The model's template, parsed; ChatML when the file has no tokenizer.chat_template. bos_token
 * and eos_token are chat_special_tokens' (t may be NULL).
 * NULL with a message naming the file, the key and line:column on a template that does not
 * parse, or a key of the wrong type. */
chat_template *chat_template_from_gguf(const gguf_ctx *g, const char *path, const tokenizer *t, char *err,
                                       size_t err_size);
/* A template text (not NUL-terminated); name (a file path, say) goes into error messages.
 * bos / eos may be NULL ("" then). */
chat_template *chat_template_from_text(const char *text, size_t len, const char *name, const char *bos,
                                       const char *eos, char *err, size_t err_size);
/* ChatML, llama.cpp's stand-in for a model without a template (bos / eos may be NULL). */
chat_template *chat_template_chatml(const char *bos, const char *eos, char *err, size_t err_size);
void chat_template_free(chat_template *ct);

bool chat_template_is_default(const chat_template *ct);   /* ChatML stood in for a missing one */
const char *chat_template_bos(const chat_template *ct);
const char *chat_template_eos(const chat_template *ct);

/* Renders the template with the variables of vars (a JSON object: messages,
 * add_generation_prompt, tools, kwargs...); bos_token and eos_token are the template's unless
 * vars gives them. Returns the prompt text (malloc'd, NUL-terminated, *len bytes), or NULL with
 * "NAME:LINE:COL: what" in err (the template raised, or a limit was reached). */
char *chat_render_vars(const chat_template *ct, const cJSON *vars, size_t *len, char *err, size_t err_size);

/* The usual call: messages (a JSON array of {"role", "content", ...}), add_generation_prompt,
 * and extra variables (kwargs: a JSON object or NULL, such as {"enable_thinking": false}). */
char *chat_render(const chat_template *ct, const cJSON *messages, bool add_generation_prompt, const cJSON *kwargs,
                  size_t *len, char *err, size_t err_size);

/* cJSON_Parse of text holding one JSON value (and only whitespace after it), with numbers written
 * as floats (2.0, 1e3) marked so the template sees floats, as Python's json does (tojson writes
 * 2.0 back, not 2). NULL on bad JSON, with *end (when not NULL) where parsing stopped (at the
 * stray text when the value is followed by more). Free with cJSON_Delete. */
cJSON *chat_json_parse(const char *text, size_t len, const char **end);

#endif
