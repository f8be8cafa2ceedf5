/* The structured-output flags of mgi run and mgi batch, llama.cpp's: --grammar GBNF,
 * --grammar-file FILE, -j/--json-schema JSON, -jf/--json-schema-file FILE (one of them), compiled
 * before the model loads so a bad grammar costs no load. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/jsonschema.h"

int cli_grammar_flag(int argc, char **argv, int *i, cli_grammar *g) {
    const char *a = argv[*i], *v;
    int kind;
    if (cli_is_flag(a, "--grammar", NULL)) kind = CLI_GRAMMAR_GBNF;
    else if (cli_is_flag(a, "--grammar-file", NULL)) kind = CLI_GRAMMAR_GBNF_FILE;
    else if (cli_is_flag(a, "-j", "--json-schema")) kind = CLI_GRAMMAR_SCHEMA;
    else if (cli_is_flag(a, "-jf", "--json-schema-file")) kind = CLI_GRAMMAR_SCHEMA_FILE;
    else return 0;
    if (!(v = cli_value(argc, argv, i))) return -1;
    /* llama.cpp lets the last one win silently; two constraints given is more likely a mistake */
    if (g->flag && g->kind != kind) {
        cli_error("%s and %s both given: they are one constraint (a grammar or a schema); use one", g->flag, a);
        return -1;
    }
    g->flag = a;
    g->value = v;
    g->kind = kind;
    return 1;
}

/* Grammar and schema files: text, read whole; no grammar worth matching is near this size. */
static const cli_input grammar_input = {
    .what = "the grammar file", .stream = 1, .max_bytes = (size_t)16 << 20, .max_line = 0,
    .hint = "a grammar or schema file holds at most 16 MiB",
};

grammar *cli_grammar_compile(const cli_grammar *g, int *status) {
    *status = 0;
    if (!g->flag) return NULL;
    char err[512];
    const char *text = g->value;
    char *file = NULL;
    size_t len = strlen(text);
    bool from_file = g->kind == CLI_GRAMMAR_GBNF_FILE || g->kind == CLI_GRAMMAR_SCHEMA_FILE;
    if (from_file) {
        cli_input in = grammar_input;
        in.what = g->kind == CLI_GRAMMAR_GBNF_FILE ? "the grammar file (--grammar-file)"
                                                   : "the JSON schema file (-jf)";
        if (!(file = cli_read_file(g->value, &in, &len))) {
            *status = cli_exit_status(EXIT_BADINPUT);
            return NULL;
        }
        text = file;
    }
    grammar *gr = g->kind == CLI_GRAMMAR_GBNF || g->kind == CLI_GRAMMAR_GBNF_FILE
                      ? grammar_parse(text, len, err, sizeof err)
                      : jsonschema_compile(text, len, err, sizeof err);
    free(file);
    if (!gr) {
        if (from_file) cli_error("%s %s: %s", g->flag, g->value, err);
        else cli_error("%s: %s", g->flag, err);
        *status = EXIT_BADINPUT;
    }
    return gr;
}
