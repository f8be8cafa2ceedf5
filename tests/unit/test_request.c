/* Batch input lines (engine/request.c): plain text, JSON objects with every field, defaults,
 * unknown fields as warnings, and each kind of bad line turned into an error naming the line and
 * field. */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/request.h"
#include "test.h"

static request_params defaults(void) {
    request_params d = {.n_predict = 16, .sp = sampler_default_params(), .seed = 3, .ignore_eos = false};
    return d;
}

static request parse(const char *line, int64_t no) {
    request_params d = defaults();
    request r;
    if (request_parse(&r, line, strlen(line), no, &d)) memset(&r, 0, sizeof r);
    return r;
}

static void expect_error(const char *line, const char *needle, const char *name) {
    request r = parse(line, 4);
    CHECK(r.error && strstr(r.error, needle) && strstr(r.error, "line 4") && !r.prompt && r.id, name, "error '%s'",
          r.error ? r.error : "(none)");
    request_free(&r);
}

int main(void) {
    request r = parse("Once upon a time\r", 7);
    CHECK(!r.error && r.prompt && !strcmp(r.prompt, "Once upon a time") && !strcmp(r.id, "7") &&
              r.p.n_predict == 16 && r.p.seed == 3,
          "request plain line: prompt, line-number id, defaults, CR dropped", "prompt '%s' id %s",
          r.prompt ? r.prompt : "", r.id ? r.id : "");
    request_free(&r);
    r = parse("  \t ", 2);
    CHECK(r.blank && !r.error, "request blank line marked blank", "blank %d", r.blank);
    request_free(&r);
    r = parse(" {\"id\": \"q-1\", \"prompt\": \"Hi \\\"there\\\"\\n\", \"n_predict\": 5, \"temperature\": 0.5, "
              "\"seed\": 42, \"top_k\": 7, \"top_p\": 0.8, \"min_p\": 0.2, \"repeat_penalty\": 1.3, "
              "\"presence_penalty\": 0.25, \"frequency_penalty\": -0.5, \"repeat_last_n\": -1, \"ignore_eos\": true}", 1);
    CHECK(!r.error && !r.warning && !strcmp(r.id, "\"q-1\"") && !strcmp(r.prompt, "Hi \"there\"\n") &&
              r.p.n_predict == 5 && r.p.sp.temp == 0.5f && r.p.seed == 42 && r.p.sp.top_k == 7 &&
              r.p.sp.top_p == 0.8f && r.p.sp.min_p == 0.2f && r.p.sp.repeat_penalty == 1.3f &&
              r.p.sp.presence_penalty == 0.25f && r.p.sp.freq_penalty == -0.5f && r.p.sp.repeat_last_n == -1 &&
              r.p.ignore_eos,
          "request JSON with every field", "error '%s'", r.error ? r.error : "");
    request_free(&r);
    r = parse("{\"prompt\": \"x\", \"logit_bias\": [[15043, 1.5], [2, false]]}", 5);
    int lb = !r.error && r.p.sp.n_bias == 2 && r.p.sp.bias == r.bias && r.bias[0].id == 15043 && r.bias[0].bias == 1.5f &&
             r.bias[1].id == 2 && isinf(r.bias[1].bias) && r.bias[1].bias < 0;
    request_free(&r);
    r = parse("{\"prompt\": \"x\", \"logit_bias\": {\"7\": -2, \"9\": false}}", 6);
    lb &= !r.error && r.p.sp.n_bias == 2 && r.bias[0].id == 7 && r.bias[0].bias == -2.0f && r.bias[1].id == 9 &&
          isinf(r.bias[1].bias);
    CHECK(lb, "request logit_bias as [[id, bias or false]] and as {\"id\": bias}", "error '%s'", r.error ? r.error : "");
    request_free(&r);
    r = parse("{\"prompt\": \"x\", \"id\": 12, \"colour\": 1, \"size\": 2}", 3);
    CHECK(!r.error && !strcmp(r.id, "12") && r.warning && strstr(r.warning, "\"colour\"") &&
              strstr(r.warning, "\"size\"") && strstr(r.warning, "line 3"),
          "request unknown fields: one warning naming them", "warning '%s'", r.warning ? r.warning : "");
    request_free(&r);
    r = parse("{\"prompt\": \"x\"}", 9);
    CHECK(!r.error && !strcmp(r.id, "9") && r.p.n_predict == 16, "request JSON without id: the line number",
          "id %s", r.id ? r.id : "");
    request_free(&r);
    expect_error("{not json", "not valid JSON", "request refuses a line that is not JSON");
    expect_error("{\"prompt\": \"x\"} trailing", "after the JSON", "request refuses text after the object");
    expect_error("{\"id\": 1}", "\"prompt\" is missing", "request refuses a missing prompt");
    expect_error("{\"prompt\": 42}", "must be a string", "request refuses a prompt that is not a string");
    expect_error("{\"prompt\": \"x\", \"n_predict\": -5}", "\"n_predict\"", "request refuses a negative n_predict");
    expect_error("{\"prompt\": \"x\", \"n_predict\": 0}", "generates nothing", "request refuses n_predict 0");
    expect_error("{\"prompt\": \"x\", \"n_predict\": 2.5}", "integer", "request refuses a fractional n_predict");
    expect_error("{\"prompt\": \"x\", \"temperature\": -1}", "\"temperature\"",
                 "request refuses a negative temperature");
    expect_error("{\"prompt\": \"x\", \"top_p\": 1.5}", "\"top_p\"", "request refuses top_p past 1");
    expect_error("{\"prompt\": \"x\", \"seed\": \"7\"}", "must be a number", "request refuses a string seed");
    expect_error("{\"prompt\": \"x\", \"ignore_eos\": 1}", "true or false", "request refuses a numeric ignore_eos");
    expect_error("{\"prompt\": \"x\", \"repeat_penalty\": 0}", "\"repeat_penalty\"", "request refuses penalty 0");
    expect_error("{\"prompt\": \"x\", \"presence_penalty\": \"high\"}", "\"presence_penalty\"",
                 "request refuses a presence penalty that is not a number");
    expect_error("{\"prompt\": \"x\", \"logit_bias\": [[1, 2, 3]]}", "\"logit_bias\"", "request refuses a logit bias triple");
    expect_error("{\"prompt\": \"x\", \"logit_bias\": {\"hello\": 1}}", "\"logit_bias\"",
                 "request refuses a logit bias keyed by text");
    expect_error("{\"prompt\": \"x\", \"logit_bias\": [[-1, 1]]}", "\"logit_bias\"", "request refuses a negative token id");
    expect_error("{\"prompt\": \"x\", \"logit_bias\": 5}", "\"logit_bias\"", "request refuses a logit bias number");
    expect_error("{\"prompt\": \"x\", \"id\": [1]}", "\"id\" must be", "request refuses an array id");
    /* Found by fuzz_jsonl: an id past double's range became the id text "null". */
    expect_error("{\"prompt\": \"x\", \"id\": 10000e06640}", "\"id\" must be", "request refuses an infinite id");
    r = parse("{\"id\": \"k\", \"prompt\": \"x\", \"top_k\": \"a\"}", 5);
    CHECK(r.error && !strcmp(r.id, "\"k\""), "request keeps the id of a bad line", "id %s", r.id ? r.id : "");
    request_free(&r);
    /* A raw NUL is not JSON: cJSON would stop there and take the fields cut short. */
    static const char nul_line[] = "{\"id\":\"nul\0x\",\"prompt\":\"Hi\0there\"}";
    request_params d = defaults();
    if (request_parse(&r, nul_line, sizeof nul_line - 1, 4, &d)) memset(&r, 0, sizeof r);
    CHECK(r.error && strstr(r.error, "NUL") && strstr(r.error, "line 4") && !r.prompt && !strcmp(r.id, "4"),
          "request refuses a raw NUL in a JSON line", "error '%s' id %s", r.error ? r.error : "(none)",
          r.id ? r.id : "");
    request_free(&r);
    r = parse("[1, 2]", 6);
    CHECK(!r.error && r.prompt && !strcmp(r.prompt, "[1, 2]"), "request a line not starting with { is plain text",
          "error '%s'", r.error ? r.error : "");
    request_free(&r);
    /* chat fields: messages (rendered later, so no prompt yet), kwargs, stop, max_tokens */
    r = parse("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"chat_template_kwargs\": "
              "{\"enable_thinking\": false}, \"stop\": [\"\\n\\n\", \"END\"], \"max_tokens\": 9}", 2);
    CHECK(!r.error && !r.warning && !r.prompt && cJSON_GetArraySize(r.messages) == 1 && cJSON_IsObject(r.chat_kwargs) &&
              r.n_stop == 2 && !strcmp(r.stop[0], "\n\n") && !strcmp(r.stop[1], "END") && r.p.n_predict == 9,
          "request messages, chat_template_kwargs, stop list, max_tokens", "error '%s'", r.error ? r.error : "");
    request_free(&r);
    r = parse("{\"prompt\": \"x\", \"stop\": \"###\"}", 2);
    CHECK(!r.error && r.n_stop == 1 && !strcmp(r.stop[0], "###"), "request stop as one string", "error '%s'",
          r.error ? r.error : "");
    request_free(&r);
    expect_error("{\"messages\": [{\"content\": \"hi\"}]}", "message without \"role\"", "request a message without role");
    expect_error("{\"messages\": [{\"role\": \"user\"}]}", "message without \"content\"", "request a message without content");
    expect_error("{\"messages\": [{\"role\": \"user\", \"content\": 3}]}", "not a string or list",
                 "request a message whose content is a number");
    expect_error("{\"messages\": []}", "non-empty list", "request empty messages");
    expect_error("{\"messages\": [\"hi\"]}", "not an object", "request a message that is a string");
    expect_error("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"prompt\": \"y\"}", "both given",
                 "request prompt and messages both");
    expect_error("{\"prompt\": \"x\", \"chat_template_kwargs\": [1]}", "must be an object", "request kwargs not an object");
    expect_error("{\"prompt\": \"x\", \"stop\": [\"\"]}", "empty string", "request an empty stop string");
    expect_error("{\"prompt\": \"x\", \"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]}",
                 "too many", "request 17 stop strings");
    expect_error("{\"prompt\": \"x\", \"stop\": 5}", "string or a list", "request stop a number");
    expect_error("{\"prompt\": \"x\", \"max_tokens\": 0}", "generates nothing", "request max_tokens 0");
    /* OpenAI Batch API lines: custom_id as the id, the body's fields, the envelope checked */
    r = parse("{\"custom_id\": \"a-1\", \"method\": \"POST\", \"url\": \"/v1/chat/completions\", \"body\": "
              "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_completion_tokens\": 7, "
              "\"temperature\": 0.5, \"top_p\": 0.9, \"seed\": 4, \"n\": 1, \"logprobs\": false, \"stop\": \"x\"}}", 3);
    CHECK(!r.error && !r.warning && r.openai == REQUEST_OPENAI_CHAT && !strcmp(r.id, "\"a-1\"") && r.messages &&
              r.p.n_predict == 7 && r.p.sp.temp == 0.5f && r.p.sp.top_p == 0.9f && r.p.seed == 4 && r.n_stop == 1,
          "request OpenAI chat line", "error '%s' warning '%s'", r.error ? r.error : "", r.warning ? r.warning : "");
    request_free(&r);
    r = parse("{\"custom_id\": \"c\", \"method\": \"POST\", \"url\": \"/v1/completions\", \"body\": "
              "{\"prompt\": \"Once\", \"max_tokens\": 3}}", 3);
    CHECK(!r.error && r.openai == REQUEST_OPENAI_COMPLETION && !strcmp(r.prompt, "Once") && r.p.n_predict == 3,
          "request OpenAI completion line", "error '%s'", r.error ? r.error : "");
    request_free(&r);
    r = parse("{\"custom_id\": \"e\", \"method\": \"POST\", \"url\": \"/v1/embeddings\", \"body\": {}}", 4);
    CHECK(r.error && strstr(r.error, "\"url\"") && r.openai && !strcmp(r.id, "\"e\""),
          "request OpenAI unknown url is an error keeping the custom_id", "error '%s'", r.error ? r.error : "");
    request_free(&r);
    expect_error("{\"custom_id\": \"b\", \"url\": \"/v1/chat/completions\", \"body\": [1]}", "\"body\" must be an object",
                 "request OpenAI body not an object");
    expect_error("{\"custom_id\": 5, \"url\": \"/v1/chat/completions\", \"body\": {}}", "custom_id", "request OpenAI custom_id a number");
    expect_error("{\"custom_id\": \"g\", \"method\": \"GET\", \"url\": \"/v1/chat/completions\", \"body\": {}}", "POST",
                 "request OpenAI method GET");
    expect_error("{\"custom_id\": \"p\", \"url\": \"/v1/chat/completions\", \"body\": {\"prompt\": \"x\"}}", "takes \"messages\"",
                 "request OpenAI chat with a prompt");
    expect_error("{\"custom_id\": \"m\", \"url\": \"/v1/chat/completions\", \"body\": {}}", "needs \"messages\"",
                 "request OpenAI chat without messages");
    r = parse("{\"custom_id\": \"n\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"x\", \"n\": 2}}", 3);
    CHECK(!r.error && r.n_choices == 2, "request OpenAI n 2", "error '%s' n %d", r.error ? r.error : "", r.n_choices);
    request_free(&r);
    r = parse("{\"prompt\": \"x\", \"n_cmpl\": 128}", 3);
    CHECK(!r.error && r.n_choices == 128, "request n_cmpl 128 (llama-server's name)", "n %d", r.n_choices);
    request_free(&r);
    r = parse("{\"prompt\": \"x\"}", 3);
    CHECK(r.n_choices == 1, "request n defaults to 1", "n %d", r.n_choices);
    request_free(&r);
    expect_error("{\"prompt\": \"x\", \"n\": 0}", "\"n\" is out of range", "request n 0");
    expect_error("{\"prompt\": \"x\", \"n\": -1}", "\"n\" is out of range", "request n -1");
    expect_error("{\"prompt\": \"x\", \"n\": 100000}", "\"n\" is out of range", "request n 100000");
    expect_error("{\"prompt\": \"x\", \"n\": 2.5}", "\"n\" must be an integer", "request n 2.5");
    expect_error("{\"custom_id\": \"n\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"x\", \"n\": \"2\"}}",
                 "\"n\" must be a number", "request OpenAI n a string");
    r = parse("{\"custom_id\": \"l\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": \"user\", "
              "\"content\": \"x\"}], \"top_logprobs\": 2, \"logprobs\": true}}", 3);
    int lp_ok = !r.error && r.n_logprobs == 2;
    request_free(&r);
    r = parse("{\"prompt\": \"x\", \"top_logprobs\": 2}", 3);  /* without logprobs: true, OpenAI gives none */
    lp_ok &= !r.error && r.n_logprobs == -1;
    request_free(&r);
    r = parse("{\"prompt\": \"x\", \"n_probs\": 5}", 3);
    lp_ok &= !r.error && r.n_logprobs == 5;
    request_free(&r);
    r = parse("{\"prompt\": \"x\", \"logprobs\": true}", 3);
    lp_ok &= !r.error && r.n_logprobs == 0;
    request_free(&r);
    r = parse("{\"prompt\": \"x\"}", 3);
    lp_ok &= !r.error && r.n_logprobs == -1;
    CHECK(lp_ok, "request logprobs + top_logprobs, n_probs, logprobs alone, none", "n_logprobs %d", r.n_logprobs);
    request_free(&r);
    expect_error("{\"prompt\": \"x\", \"top_logprobs\": 21}", "out of range", "request top_logprobs 21");
    return test_done();
}
