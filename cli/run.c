/* Placeholder until the run subcommand lands (being written now); replaced, not kept. */
#include "cli/cli.h"

int cli_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("run: not built yet");
    return EXIT_USAGE;
}
