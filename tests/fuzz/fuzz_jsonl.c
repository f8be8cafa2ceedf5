/* libFuzzer target: the batch input parser (request_parse) on arbitrary bytes, as one line and
 * split at newlines. Every line gives an id that is valid JSON and either a prompt or an error. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/request.h"

static void parse_line(const char *line, size_t len, int64_t no, const request_params *d) {
    request r;
    if (request_parse(&r, line, len, no, d)) return;  /* out of memory only */
    if (!r.id || (!r.error == !r.prompt)) abort();
    cJSON *id = cJSON_Parse(r.id);
    if (!id || !(cJSON_IsNumber(id) || cJSON_IsString(id))) abort();
    cJSON_Delete(id);
    if (r.prompt && strlen(r.prompt) > r.prompt_len) abort();
    if (!r.error && (r.p.n_predict == 0 || r.p.n_predict < -1 || r.p.sp.temp < 0 || r.p.sp.top_p > 1 ||
                     r.p.sp.min_p < 0 || !(r.p.sp.repeat_penalty > 0) || r.p.seed < -1))
        abort();
    request_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    request_params d = {.n_predict = -1, .sp = sampler_default_params(), .seed = -1};
    const char *text = (const char *)data;
    parse_line(text, size, 1, &d);
    int64_t no = 1;
    for (size_t at = 0; at < size; no++) {
        const char *nl = memchr(text + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (text + at)) : size - at;
        parse_line(text + at, len, no, &d);
        at += len + 1;
    }
    return 0;
}
