/* mgi's entry point: picks the subcommand and hands it argv. `mgi -m M ...` with no subcommand
 * is `mgi run`, as llama.cpp's main program takes the same flags. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#ifndef MGI_VERSION
#define MGI_VERSION "unknown"
#endif

static const char usage[] =
    "usage: mgi [run] -m MODEL [-p PROMPT | -f FILE] [flags]   generate text (stdin when no prompt)\n"
    "       mgi batch -m MODEL -f PROMPTS [-np N] [-o OUT [--resume]]  one JSON line per prompt\n"
    "       mgi info MODEL [--tensors] [--tensor NAME --values N|all]\n"
    "       mgi tokenize -m MODEL -p TEXT [--ids] [--no-bos]\n"
    "       mgi template [-m MODEL | --chat-template-file FILE] -f CASE.json   render a chat template\n"
    "       mgi perplexity -m MODEL -f TEXT [-c N]\n"
    "       mgi bench -m MODEL[,MODEL...] [-p N] [-n N] [-o md|csv|json|jsonl] [flags]   speed, as llama-bench\n"
    "       mgi devices                                      list CUDA devices (also --list-devices)\n"
    "       mgi --version | --help\n"
    "\n"
    "Each subcommand takes --help for its flags.\n"
    "Exit status: 0 ok, 1 usage error, 2 bad input (file, model), 3 runtime failure.\n";

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} command;

static const command commands[] = {
    {"run", cli_run},
    {"batch", cli_batch},
    {"info", cli_info},
    {"tokenize", cli_tokenize},
    {"perplexity", cli_perplexity},
    {"devices", cli_devices},
    {"bench", cli_bench},
    {"template", cli_template},
};

const char *cli_version(void) { return MGI_VERSION; }

/* A failed write to stdout (a full disk, a closed file) would otherwise pass silently at exit:
 * flush here and make it a runtime failure with one line. Only when the command succeeded, so
 * a command that already reported an error keeps its status and its single line. */
static int finish(int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0;
    if ((bad || ferror(stdout)) && rc == 0) {
        cli_error("cannot write standard output: %s",
                  errno ? strerror(errno) : "an earlier write failed (disk full?)");
        return EXIT_RUNTIME;
    }
    return rc;
}

static int dispatch(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("mgi %s\n", MGI_VERSION);
        return 0;
    }
    /* --list-devices works with any subcommand, as in llama.cpp. */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--list-devices")) return cli_devices(1, argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    if (argv[1][0] == '-') return cli_run(argc, argv);  /* flags straight away: run */
    cli_error("unknown command '%s' (commands: run, batch, info, tokenize, perplexity, bench, devices, template; see mgi --help)",
              argv[1]);
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    /* A reader that goes away (mgi ... | head) ends mgi quietly by SIGPIPE, whatever the
     * parent left the disposition at. */
    signal(SIGPIPE, SIG_DFL);
    cli_catch_sigbus();  /* a model file truncated under its map: one line, exit 3 */
    return finish(dispatch(argc, argv));
}
