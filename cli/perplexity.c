/* Placeholder until the perplexity subcommand lands (being written now); replaced, not kept. */
#include "cli/cli.h"

int cli_perplexity(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("perplexity: not built yet");
    return EXIT_USAGE;
}
