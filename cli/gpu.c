/* The GPU flags every model-running subcommand shares (-ngl, -dev, -mg, -sm, -ts, with
 * llama.cpp's meanings and spellings) and the hookup of the CUDA backend with a progress line
 * for big uploads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/forward_cuda.h"

/* Splits v at any of the separators into at most ENGINE_MAX_DEVICES items, calling item() on each
 * (an empty item is an error). 0, or -1 with the message printed. */
static int each(const char *flag, const char *v, const char *seps, int (*item)(const char *, const char *, void *, int),
                void *ctx) {
    char buf[512];
    if (strlen(v) >= sizeof buf || !*v) {
        cli_error("%s: '%.40s' is %s", flag, v, *v ? "too long" : "empty");
        return -1;
    }
    strcpy(buf, v);
    int n = 0;
    for (char *s = buf;; n++) {
        size_t len = strcspn(s, seps);
        char end = s[len];
        s[len] = 0;
        if (!*s) { cli_error("%s: '%s' has an empty item", flag, v); return -1; }
        if (n >= ENGINE_MAX_DEVICES) {
            cli_error("%s: '%s' has more than %d items", flag, v, ENGINE_MAX_DEVICES);
            return -1;
        }
        if (item(flag, s, ctx, n)) return -1;
        if (!end) break;
        s += len + 1;
    }
    return 0;
}

static int device_item(const char *flag, const char *s, void *ctx, int n) {
    engine_split *sp = ctx;
    const char *num = !strncmp(s, "CUDA", 4) ? s + 4 : s;  /* llama.cpp's names: CUDA0, CUDA1... */
    char *end;
    long d = strtol(num, &end, 10);
    if (end == num || *end || *num == '-' || *num == '+' || d > 1 << 16) {
        cli_error("%s: '%s' is not a device (CUDA ordinals 0,1 or names CUDA0,CUDA1, or none)", flag, s);
        return -1;
    }
    sp->devices[n] = (int)d;
    sp->n_devices = n + 1;
    return 0;
}

int cli_parse_devices(const char *flag, const char *v, engine_split *sp) {
    if (!strcmp(v, "none")) {  /* llama.cpp's -dev none: no GPU */
        sp->n_devices = 0;
        sp->n_gpu_layers = 0;
        return 0;
    }
    sp->n_devices = 0;
    return each(flag, v, ",", device_item, sp);
}

static int share_item(const char *flag, const char *s, void *ctx, int n) {
    engine_split *sp = ctx;
    if (cli_parse_f32(flag, s, -1e30f, 1e30f, &sp->tensor_split[n])) return -1;
    if (sp->tensor_split[n] < 0) {
        cli_error("%s: share %s is negative (shares are >= 0; 0 leaves a device out)", flag, s);
        return -1;
    }
    sp->n_tensor_split = n + 1;
    return 0;
}

int cli_parse_tensor_split(const char *flag, const char *v, engine_split *sp) {
    sp->n_tensor_split = 0;
    return each(flag, v, ",/", share_item, sp);
}

int cli_gpu_flag(int argc, char **argv, int *i, engine_params *ep) {
    const char *a = argv[*i], *v;
    engine_split *sp = &ep->split;
    enum { NGL, DEV, MG, SM, TS } which;
    if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers") || !strcmp(a, "--gpu-layers")) which = NGL;
    else if (cli_is_flag(a, "-dev", "--device")) which = DEV;
    else if (cli_is_flag(a, "-mg", "--main-gpu")) which = MG;
    else if (cli_is_flag(a, "-sm", "--split-mode")) which = SM;
    else if (cli_is_flag(a, "-ts", "--tensor-split")) which = TS;
    else return 0;
    if (!(v = cli_value(argc, argv, i))) return -1;
    switch (which) {
    case NGL:
        if (!strcmp(v, "all")) sp->n_gpu_layers = -1;
        else if (cli_parse_int(a, v, -1, 1 << 20, &sp->n_gpu_layers)) return -1;
        return 1;
    case DEV: return cli_parse_devices(a, v, sp) ? -1 : 1;
    case MG: return cli_parse_int(a, v, 0, ENGINE_MAX_DEVICES - 1, &sp->main_gpu) ? -1 : 1;
    case SM:
        if ((sp->split_mode = engine_split_parse(v)) < 0) {
            cli_error("%s: '%s' is not a split mode (none, layer or row)", a, v);
            return -1;
        }
        return 1;
    case TS: return cli_parse_tensor_split(a, v, sp) ? -1 : 1;
    }
    return 0;
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

void cli_log_memory(const engine *e) {
    if (engine_load_warning(e)) fprintf(stderr, "mgi: warning: %s\n", engine_load_warning(e));
    char buf[4096];
    engine_describe(e, buf, sizeof buf);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) fprintf(stderr, "memory: %s\n", line);
}
