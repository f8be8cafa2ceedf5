/* Placeholder until mgi info lands. */
#include "cli/cli.h"

int cli_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("info: not built yet");
    return EXIT_USAGE;
}
