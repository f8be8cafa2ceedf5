/* mgi tokenize: text -> token ids with the model's tokenizer, as llama-tokenize does it (escape
 * sequences in the text, BOS and EOS as the model asks) and prints them ("[1, 15043, 3186]" for
 * --ids, "id -> 'piece'" lines for --pieces). Needs only the vocabulary, so vocabulary-only GGUF
 * files work. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/tokenizer.h"
#include "gguf/gguf.h"

static const char usage[] =
    "usage: mgi tokenize -m MODEL (-p TEXT | -f FILE | --stdin) [flags]\n"
    "  -m, --model FILE       GGUF model or vocabulary-only file (required)\n"
    "  -p, --prompt TEXT      text to tokenize\n"
    "  -f, --file FILE        read the text from FILE\n"
    "      --stdin            read the text from standard input\n"
    "      --ids              print the ids as a list: [1, 15043, 3186] (default)\n"
    "      --pieces           print one line per token: id -> 'piece' (llama-tokenize without --ids)\n"
    "      --no-bos           do not add BOS even when the model asks for it (default: the model's\n"
    "                         tokenizer.ggml.add_bos_token)\n"
    "      --no-parse-special treat control-token text such as <s> as plain text (default: parse it)\n"
    "      --no-escape        take \\n, \\t, \\xNN... literally (default: turn them into the characters)\n"
    "      --show-count       also print the number of tokens\n"
    "      --log-disable      accepted for llama-tokenize compatibility (mgi logs nothing here)\n"
    "  -h, --help             this text\n";

int cli_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool from_stdin = false, pieces = false, no_bos = false, parse_special = true, show_count = false;
    bool escape = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(prompt = cli_value(argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = cli_value(argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "--stdin")) {
            from_stdin = true;
        } else if (!strcmp(a, "--ids")) {
            pieces = false;
        } else if (!strcmp(a, "--pieces")) {
            pieces = true;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = true;
        } else if (!strcmp(a, "--no-parse-special")) {
            parse_special = false;
        } else if (!strcmp(a, "--no-escape")) {
            escape = false;
        } else if (!strcmp(a, "--show-count")) {
            show_count = true;
        } else if (!strcmp(a, "--log-disable")) {
            /* nothing is logged */
        } else {
            cli_error("tokenize: unknown flag '%s' (see mgi tokenize --help)", a);
            return EXIT_USAGE;
        }
    }
    if (!model) {
        cli_error("tokenize: -m MODEL is required (see mgi tokenize --help)");
        return EXIT_USAGE;
    }
    if ((prompt != NULL) + (file != NULL) + from_stdin != 1) {
        cli_error("tokenize: give the text with exactly one of -p TEXT, -f FILE or --stdin");
        return EXIT_USAGE;
    }

    size_t len = 0;
    char *buf = NULL;
    if (prompt) {
        len = strlen(prompt);
        buf = strdup(prompt);
        if (!buf) {
            cli_error("tokenize: out of memory for the text");
            return EXIT_RUNTIME;
        }
    } else {
        buf = cli_read_file(file ? file : "-", &cli_text_input, &len);
        if (!buf) return EXIT_BADINPUT;
    }
    if (escape) len = cli_process_escapes(buf, len);

    char err[1024];
    int rc = 0;
    int32_t *ids = NULL;
    tokenizer *t = NULL;
    gguf_ctx *g = gguf_open(model, 1, err, sizeof err);
    if (g) t = tokenizer_load(g, err, sizeof err);
    if (!g || !t) {
        cli_error("%s", err);
        rc = EXIT_BADINPUT;
        goto done;
    }
    /* llama-tokenize asks for the special tokens when the model adds BOS and --no-bos is absent:
     * then EOS too if the model adds it */
    bool add_bos = tokenizer_add_bos(t) && !no_bos;
    bool add_eos = add_bos && tokenizer_add_eos(t) && tokenizer_eos(t) >= 0;
    int64_t n = tokenizer_encode(t, buf, len, add_bos, parse_special, NULL, 0, err, sizeof err);
    if (n >= 0) {
        ids = malloc((size_t)(n + 1) * sizeof *ids);
        if (!ids) snprintf(err, sizeof err, "out of memory for %lld token ids", (long long)n);
        n = ids ? tokenizer_encode(t, buf, len, add_bos, parse_special, ids, n, err, sizeof err) : -1;
    }
    if (n >= 0 && add_eos) ids[n++] = tokenizer_eos(t);
    if (n < 0) {
        cli_error("tokenize: %s", err);
        rc = EXIT_RUNTIME;
        goto done;
    }
    if (pieces) {
        for (int64_t i = 0; i < n; i++) cli_print_piece(stdout, t, ids[i]);
    } else {
        putchar('[');
        for (int64_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        puts("]");
    }
    if (show_count) printf("Total number of tokens: %lld\n", (long long)n);
    if (fflush(stdout) != 0) {
        cli_error("tokenize: cannot write the output");
        rc = EXIT_RUNTIME;
    }
done:
    free(ids);
    tokenizer_free(t);
    gguf_close(g);
    free(buf);
    return rc;
}
