/* Unit tests of the chat-prompt API (engine/chat.h): conversations with kwargs and tools through
 * real templates (expected texts from transformers' apply_chat_template, via jinja2), the
 * model's template and BOS/EOS from GGUF vocabularies, ChatML for files without a template,
 * and errors naming the template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/chat.h"
#include "tests/unit/test.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = len >= 0 ? malloc((size_t)len + 1) : NULL;
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    if (b) b[*n] = 0;
    fclose(f);
    return b;
}

static chat_template *load(const char *stem, char *err, size_t err_size) {
    char rel[256];
    snprintf(rel, sizeof rel, "golden/chat/templates/%s.jinja", stem);
    size_t n;
    char *src = slurp(test_shared(rel), &n);
    if (!src) {
        snprintf(err, err_size, "cannot read %s", test_shared(rel));
        return NULL;
    }
    chat_template *ct = chat_template_from_text(src, n, stem, "<s>", "</s>", err, err_size);
    free(src);
    return ct;
}

/* Renders messages (JSON text) with kwargs (JSON text or NULL) and compares with want. */
static void expect_render(const char *name, const chat_template *ct, const char *messages, bool add_gen,
                          const char *kwargs, const char *want) {
    cJSON *m = cJSON_Parse(messages), *kw = kwargs ? cJSON_Parse(kwargs) : NULL;
    char err[1024];
    size_t len = 0;
    char *out = ct ? chat_render(ct, m, add_gen, kw, &len, err, sizeof err) : NULL;
    CHECK(out && len == strlen(want) && !memcmp(out, want, len), name, "got '%s', want '%s'",
          out ? out : ct ? err : "no template", want);
    free(out);
    cJSON_Delete(m);
    cJSON_Delete(kw);
}

static const char conv[] = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": "
                           "\"<think>\\nhmm\\n</think>\\n\\nHello\"},"
                           " {\"role\": \"user\", \"content\": \"Bye\"}]";

static void test_templates(void) {
    char err[1024];
    chat_template *qwen3 = load("Qwen-Qwen3-0.6B", err, sizeof err);
    CHECK(qwen3 != NULL, "chat Qwen3 template parses", "%s", err);
    expect_render(
        "chat kwargs reach the template (enable_thinking false)", qwen3, conv, true, "{\"enable_thinking\": false}",
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    expect_render(
        "chat add_generation_prompt false, reasoning of past turns dropped", qwen3, conv, false, NULL,
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
    expect_render("chat kwargs cannot replace the conversation", qwen3, "[{\"role\": \"user\", \"content\": \"Hi\"}]",
                  false, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"add_generation_prompt\": true}",
                  "<|im_start|>user\nHi<|im_end|>\n");
    chat_template_free(qwen3);

    chat_template *qwen25 = load("Qwen-Qwen2.5-7B-Instruct", err, sizeof err);
    expect_render(
        "chat tools as a kwarg (Qwen2.5's tool section, tojson of the schema)", qwen25,
        "[{\"role\": \"user\", \"content\": \"Hi\"}]", true,
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
        "\"Weather now\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
        "\"string\"}}, \"required\": [\"city\"]}}}]}",
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\nYou are provided with function "
        "signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
        "\"get_weather\", \"description\": \"Weather now\", \"parameters\": {\"type\": \"object\", \"properties\": "
        "{\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, "
        "return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
        "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    chat_template_free(qwen25);

    const char *bos_src = "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}";
    chat_template *bos = chat_template_from_text(bos_src, strlen(bos_src), "t", "<B>", "<E>", err, sizeof err);
    expect_render("chat bos_token and eos_token are the template's", bos, "[{\"content\": \"x\"}]", false, NULL,
                  "<B>x<E>");
    expect_render("chat kwargs may set bos_token", bos, "[{\"content\": \"x\"}]", false, "{\"bos_token\": \"[\"}",
                  "[x<E>");
    chat_template_free(bos);
}

static void test_gguf(void) {
    char err[1024];
    const char *spm = test_shared("vocab/ggml-vocab-llama-spm.gguf");
    gguf_ctx *g = gguf_open(spm, 1, err, sizeof err);
    chat_template *ct = g ? chat_template_from_gguf(g, spm, NULL, err, sizeof err) : NULL;
    CHECK(ct && chat_template_is_default(ct), "chat a file without tokenizer.chat_template gets ChatML", "%s",
          ct ? "not the default" : err);
    CHECK(ct && !strcmp(chat_template_bos(ct), "<s>") && !strcmp(chat_template_eos(ct), "</s>"),
          "chat BOS/EOS text from the vocabulary keys", "got '%s' '%s'", ct ? chat_template_bos(ct) : "",
          ct ? chat_template_eos(ct) : "");
    expect_render("chat ChatML render", ct,
                  "[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"U\"}]", true, NULL,
                  "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    tokenizer *t = g ? tokenizer_load(g, err, sizeof err) : NULL;
    char *b = NULL, *e = NULL;
    CHECK(t && !chat_special_tokens(g, t, &b, &e) && !strcmp(b, "<s>") && !strcmp(e, "</s>"),
          "chat BOS/EOS text from the tokenizer", "got '%s' '%s'", b ? b : "", e ? e : "");
    free(b);
    free(e);
    tokenizer_free(t);
    chat_template_free(ct);
    gguf_close(g);

    const char *qwen2 = test_shared("vocab/ggml-vocab-qwen2.gguf");
    g = gguf_open(qwen2, 1, err, sizeof err);
    ct = g ? chat_template_from_gguf(g, qwen2, NULL, err, sizeof err) : NULL;
    CHECK(ct && !chat_template_is_default(ct), "chat the vocabulary's own template (qwen2)", "%s",
          ct ? "default" : err);
    expect_render("chat qwen2's template render", ct, "[{\"role\": \"user\", \"content\": \"U\"}]", true, NULL,
                  "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
                  "<|im_start|>assistant\n");
    chat_template_free(ct);
    gguf_close(g);
}

static void test_errors(void) {
    char err[1024] = "";
    const char *unclosed = "ok\n{% for m in messages %}";
    chat_template *ct = chat_template_from_text(unclosed, strlen(unclosed), "my.jinja", NULL, NULL, err, sizeof err);
    CHECK(!ct && strstr(err, "my.jinja:2:24: syntax error") && strstr(err, "endfor"),
          "chat a syntax error names the template, line and column", "got '%s'", err);
    const char *raising = "{{ messages[0].role | upper }}{{ raise_exception('no') if messages | length > 1 }}";
    ct = chat_template_from_text(raising, strlen(raising), "r.jinja", NULL, NULL, err, sizeof err);
    CHECK(ct != NULL, "chat a template that raises parses", "%s", err);
    if (!ct) return;
    cJSON *m = cJSON_Parse("[{\"role\": \"a\"}, {\"role\": \"b\"}]"), *kw = cJSON_Parse("[1]");
    size_t len;
    char *out = chat_render(ct, m, true, NULL, &len, err, sizeof err);
    CHECK(!out && strstr(err, "r.jinja:1:") && strstr(err, "raised an exception: no"),
          "chat a raise names the template", "got '%s'", out ? out : err);
    free(out);
    cJSON *obj = cJSON_CreateObject();
    out = chat_render(ct, obj, true, NULL, &len, err, sizeof err);
    cJSON_Delete(obj);
    CHECK(!out && strstr(err, "messages must be a JSON array"), "chat messages must be an array", "got '%s'",
          out ? out : err);
    free(out);
    out = chat_render(ct, m, true, kw, &len, err, sizeof err);
    CHECK(!out && strstr(err, "must be a JSON object"), "chat kwargs must be an object", "got '%s'", out ? out : err);
    free(out);
    cJSON_Delete(m);
    cJSON_Delete(kw);
    chat_template_free(ct);
}

/* Numbers written as floats stay floats through chat_json_parse (what Python's json gives
 * transformers); expected text from jinja2. */
static void test_json_floats(void) {
    static const char text[] =
        "{\"a\": 2.0, \"b\": [1, 1e3, -0.0, 5], \"c\": {\"d\": 3.50, \"s\": \"1.0 \\\" 2.0\"}, \"e\": 7}";
    const char *src = "{{ a }} {{ b }} {{ c | tojson }} {{ e }} {{ a is float }}{{ e is integer }}";
    char err[512];
    chat_template *ct = chat_template_from_text(src, strlen(src), "floats", NULL, NULL, err, sizeof err);
    cJSON *v = chat_json_parse(text, sizeof text - 1, NULL);
    size_t len;
    char *out = ct && v ? chat_render_vars(ct, v, &len, err, sizeof err) : NULL;
    const char *want = "2.0 [1, 1000.0, -0.0, 5] {\"d\": 3.5, \"s\": \"1.0 \\\" 2.0\"} 7 TrueTrue";
    CHECK(out && !strcmp(out, want), "chat JSON floats stay floats (2.0, 1e3) as in Python", "got '%s', want '%s'",
          out ? out : err, want);
    free(out);
    cJSON_Delete(v);
    const char *end = NULL;
    v = chat_json_parse("{\"a\": 1} x", 10, &end);
    CHECK(!v && end, "chat JSON with text after the value is refused", "parsed");
    cJSON_Delete(v);
    chat_template_free(ct);
}

int main(void) {
    test_json_floats();
    test_templates();
    test_gguf();
    test_errors();
    return test_done();
}
