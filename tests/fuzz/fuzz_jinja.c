/* libFuzzer target: the Jinja engine (engine/jinja.h) on arbitrary template text and
 * variables. The input is the template, then optionally a NUL byte and a JSON object of
 * variables (read by chat_json_parse, which keeps floats floats). Every input either renders or fails with a one-line "LINE:COL: ..." message;
 * small bounds keep each run short and its memory bounded (no hang, no crash, no leak). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/chat.h"
#include "engine/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *nul = memchr(text, 0, size);
    size_t tlen = nul ? (size_t)(nul - text) : size;
    cJSON *vars = NULL;
    if (nul) {
        size_t jlen = size - tlen - 1;
        vars = chat_json_parse(nul + 1, jlen, NULL);
    }
    if (!vars)
        vars = cJSON_Parse("{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", "
                           "\"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}], "
                           "\"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", "
                           "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}");
    char err[512];
    jinja_template *t = jinja_parse(text, tlen, err, sizeof err);
    if (!t) {
        if (!strchr(err, ':') || strchr(err, '\n')) abort();
        cJSON_Delete(vars);
        return 0;
    }
    jinja_limits lim = jinja_limits_default();
    lim.max_steps = 20000;
    lim.max_depth = 200;
    lim.max_output = 1 << 16;
    lim.max_memory = 16 << 20;
    lim.now = 0;
    size_t len = 0;
    char *out = jinja_render(t, cJSON_IsObject(vars) ? vars : NULL, &lim, &len, err, sizeof err);
    if (out && len > lim.max_output) abort();
    if (!out && strchr(err, '\n')) abort();
    free(out);
    jinja_free(t);
    cJSON_Delete(vars);
    return 0;
}
