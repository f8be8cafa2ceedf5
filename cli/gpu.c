/* The GPU flags every model-running subcommand shares (-ngl, -dev/--device, --main-gpu) and the
 * hookup of the CUDA backend with a progress line for big uploads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/forward_cuda.h"

int cli_gpu_flag(int argc, char **argv, int *i, engine_params *ep) {
    const char *a = argv[*i], *v;
    int is_ngl = !strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers") || !strcmp(a, "--gpu-layers");
    int is_dev = !strcmp(a, "-dev") || !strcmp(a, "--device") || !strcmp(a, "--main-gpu") || !strcmp(a, "-mg");
    if (!is_ngl && !is_dev) return 0;
    if (!(v = cli_value(argc, argv, i))) return -1;
    if (is_ngl) {
        if (!strcmp(v, "all")) ep->split.n_gpu_layers = 1 << 20;
        else if (cli_parse_int(a, v, 0, 1 << 20, &ep->split.n_gpu_layers)) return -1;
        return 1;
    }
    if (!strncmp(v, "CUDA", 4)) v += 4;  /* llama.cpp's device names: CUDA0, CUDA1... */
    if (cli_parse_int(a, v, 0, 1 << 16, &ep->split.main_gpu)) return -1;
    return 1;
}

static void progress(void *ctx, uint64_t done, uint64_t total) {
    (void)ctx;
    fprintf(stderr, "\rloading weights: %3.0f%% (%.2f of %.2f GiB)%s", 100.0 * (double)done / (double)total,
            (double)done / (1 << 30), (double)total / (1 << 30), done == total ? "\n" : "");
}

void cli_gpu_setup(engine_params *ep, int log) {
    ep->gpu = &forward_cuda_gpu;
    ep->progress = log ? progress : NULL;
}
