/* mgi template: renders a chat template with the variables of a JSON case file, as Hugging
 * Face transformers' apply_chat_template would, and prints the text exactly (no newline
 * added). The template is the model's (tokenizer.chat_template; ChatML when it has none) or
 * one from a file; -m also gives bos_token / eos_token from the model's vocabulary, so a
 * vocabulary-only GGUF works. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/chat.h"
#include "gguf/gguf.h"

static const char usage[] =
    "usage: mgi template [-m MODEL | --chat-template-file FILE] -f CASE.json\n"
    "  -m, --model FILE            GGUF model or vocabulary-only file: its tokenizer.chat_template (ChatML\n"
    "                              when it has none) and its BOS/EOS text as bos_token/eos_token\n"
    "      --chat-template-file F  the template from a file instead (with -m, the model still gives\n"
    "                              bos_token/eos_token; without, they are \"\" unless CASE.json sets them)\n"
    "      --chat-template TEXT    the template text itself, or chatml (llama.cpp's built-in names other\n"
    "                              than chatml are not known here: give the Jinja text or a file)\n"
    "  -f, --file CASE.json        the template's variables: a JSON object (messages,\n"
    "                              add_generation_prompt, bos_token, eos_token, tools, documents, any\n"
    "                              kwargs such as enable_thinking); - reads standard input (required)\n"
    "  -h, --help                  this text\n"
    "strftime_now uses SOURCE_DATE_EPOCH (UTC) when set, else the local time.\n";

/* The case file and a template file: small texts, pipes taken. */
static const cli_input case_input = {
    .what = "the case file (-f)", .stream = 1, .max_bytes = (size_t)64 << 20, .max_line = 0,
    .hint = "a case file of at most 64 MiB",
};
static const cli_input template_input = {
    .what = "the template file (--chat-template-file)", .stream = 1, .max_bytes = (size_t)16 << 20, .max_line = 0,
    .hint = "a template of at most 16 MiB",
};

/* Line and column of byte offset at in text, for JSON errors. */
static void line_col(const char *text, size_t at, int *line, int *col) {
    *line = 1, *col = 1;
    for (size_t i = 0; i < at && text[i]; i++) {
        if (text[i] == '\n') (*line)++, *col = 1;
        else (*col)++;
    }
}

int cli_template(int argc, char **argv) {
    const char *model = NULL, *tfile = NULL, *ttext = NULL, *cfile = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (cli_is_flag(a, "-m", "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "--chat-template-file")) {
            if (!(tfile = cli_value(argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "--chat-template")) {
            if (!(ttext = cli_value(argc, argv, &i))) return EXIT_USAGE;
        } else if (cli_is_flag(a, "-f", "--file")) {
            if (!(cfile = cli_value(argc, argv, &i))) return EXIT_USAGE;
        } else {
            cli_error("template: unknown flag '%s' (see mgi template --help)", a);
            return EXIT_USAGE;
        }
    }
    if (!model && !tfile && !ttext) {
        cli_error("template: give the template with -m MODEL or --chat-template-file FILE (see mgi template --help)");
        return EXIT_USAGE;
    }
    if (tfile && ttext) {
        cli_error("template: give at most one of --chat-template-file and --chat-template");
        return EXIT_USAGE;
    }
    /* llama.cpp also takes built-in template names here; mgi knows ChatML, the rest would render
     * as literal text, so a bare name is refused */
    bool chatml = ttext && !strcmp(ttext, "chatml");
    if (ttext && !chatml && !strstr(ttext, "{{") && !strstr(ttext, "{%") && !strstr(ttext, "{#") &&
        strspn(ttext, "abcdefghijklmnopqrstuvwxyz0123456789-_.") == strlen(ttext)) {
        cli_error("template: --chat-template '%s' looks like a built-in template name; mgi knows only chatml: "
                  "give the template's Jinja text or --chat-template-file FILE", ttext);
        return EXIT_USAGE;
    }
    if (!cfile) {
        cli_error("template: -f CASE.json is required (the template's variables; see mgi template --help)");
        return EXIT_USAGE;
    }

    int rc = EXIT_BADINPUT;
    char err[2048];
    char *case_text = NULL, *tsrc = NULL, *out = NULL;
    cJSON *vars = NULL;
    gguf_ctx *g = NULL;
    chat_template *ct = NULL;
    size_t case_len = 0, tlen = 0, out_len = 0;

    if (!(case_text = cli_read_file(cfile, &case_input, &case_len))) goto done;
    const char *end = NULL;
    vars = chat_json_parse(case_text, case_len, &end);
    if (!vars || !cJSON_IsObject(vars)) {
        int line, col;
        line_col(case_text, end && !vars ? (size_t)(end - case_text) : 0, &line, &col);
        if (!vars)
            cli_error("template: %s:%d:%d: not valid JSON (the case file holds one JSON object)", cfile, line, col);
        else
            cli_error("template: %s: the case file must hold a JSON object of the template's variables, "
                      "not a %s", cfile, cJSON_IsArray(vars) ? "list" : "scalar");
        goto done;
    }
    /* only the metadata is read: bos/eos come from the vocabulary keys, no tokenizer is built */
    if (model && !(g = gguf_open(model, 1, err, sizeof err))) {
        cli_error("template: %s", err);
        goto done;
    }
    if (tfile || (ttext && !chatml)) {
        if (tfile && !(tsrc = cli_read_file(tfile, &template_input, &tlen))) goto done;
        char *b = NULL, *e = NULL;
        if (g && chat_special_tokens(g, NULL, &b, &e)) {
            cli_error("template: out of memory");
            rc = EXIT_RUNTIME;
            goto done;
        }
        ct = chat_template_from_text(tfile ? tsrc : ttext, tfile ? tlen : strlen(ttext),
                                     tfile ? tfile : "--chat-template", b, e, err, sizeof err);
        free(b);
        free(e);
    } else if (chatml) {
        char *b = NULL, *e = NULL;
        if (g && chat_special_tokens(g, NULL, &b, &e)) {
            cli_error("template: out of memory");
            rc = EXIT_RUNTIME;
            goto done;
        }
        ct = chat_template_chatml(b, e, err, sizeof err);
        free(b);
        free(e);
    } else {
        ct = chat_template_from_gguf(g, model, NULL, err, sizeof err);
        if (ct && chat_template_is_default(ct))
            fprintf(stderr, "mgi: note: %s has no tokenizer.chat_template: ChatML, as llama.cpp\n", model);
    }
    if (!ct) {
        cli_error("template: %s", err);
        goto done;
    }
    if (!(out = chat_render_vars(ct, vars, &out_len, err, sizeof err))) {
        cli_error("template: %s", err);
        goto done;
    }
    if (fwrite(out, 1, out_len, stdout) != out_len || fflush(stdout) != 0) {
        cli_error("template: cannot write standard output");
        rc = EXIT_RUNTIME;
        goto done;
    }
    rc = 0;
done:
    free(out);
    chat_template_free(ct);
    gguf_close(g);
    cJSON_Delete(vars);
    free(tsrc);
    free(case_text);
    return rc;
}
