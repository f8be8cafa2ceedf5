/* Placeholder until the tokenize subcommand lands (being written now); replaced, not kept. */
#include "cli/cli.h"

int cli_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("tokenize: not built yet");
    return EXIT_USAGE;
}
