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

static int last_layer_item(const char *flag, const char *s, void *ctx, int n) {
    engine_split *sp = ctx;
    if (cli_parse_int(flag, s, 0, 1 << 20, &sp->layer_split[n])) return -1;
    if (n && sp->layer_split[n] <= sp->layer_split[n - 1]) {
        cli_error("%s: value %d (%d) is not above the one before it (%d): each device's last layer is above the "
                  "previous device's, so that every device holds at least one layer", flag, n + 1, sp->layer_split[n],
                  sp->layer_split[n - 1]);
        return -1;
    }
    sp->n_layer_split = n + 1;
    return 0;
}

int cli_parse_layer_split(const char *flag, const char *v, engine_split *sp) {
    sp->n_layer_split = 0;
    return each(flag, v, ",/", last_layer_item, sp);
}

enum { NGL, DEV, MG, SM, TS, LS };

/* A flag and its value as the user would write it, for the messages of cross_check. */
static void flag_text(int which, const engine_split *sp, char *buf, size_t size) {
    char list[ENGINE_MAX_DEVICES * 16] = "";
    size_t at = 0;
    switch (which) {
    case NGL: snprintf(buf, size, "-ngl %d", sp->n_gpu_layers); return;
    case MG: snprintf(buf, size, "-mg %d", sp->main_gpu); return;
    case SM: snprintf(buf, size, "-sm %s", engine_split_name(sp->split_mode)); return;
    case LS: engine_split_layers_text(sp, list, sizeof list); snprintf(buf, size, "--layer-split %s", list); return;
    case DEV:
        for (int k = 0; k < sp->n_devices && at < sizeof list; k++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%d", k ? "," : "", sp->devices[k]);
        snprintf(buf, size, "-dev %s", sp->n_devices ? list : "none");
        return;
    case TS:
        for (int k = 0; k < sp->n_tensor_split && at < sizeof list; k++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%g", k ? "," : "", sp->tensor_split[k]);
        snprintf(buf, size, "-ts %s", list);
        return;
    }
}

/* One line for flags x and y that contradict each other: the one given last (`last`) first, so
 * that the message starts with the flag just read. */
static int conflict(int last, int x, int y, const engine_split *sp, const char *why) {
    char a[160], b[160];
    flag_text(last == y ? y : x, sp, a, sizeof a);
    flag_text(last == y ? x : y, sp, b, sizeof b);
    cli_error("%s with %s: %s", a, b, why);
    return -1;
}

/* The GPU flags against each other, as far as that goes without the model and the devices: run
 * after each one, so that the order on the command line does not matter. A machine without GPUs
 * refuses here what no plan could take. */
static int cross_check(int which, const engine_split *sp) {
    char why[200];
    if (sp->n_tensor_split) {
        int any = 0;
        for (int k = 0; k < sp->n_tensor_split; k++) any |= sp->tensor_split[k] > 0;
        if (!any) {
            char a[160];
            flag_text(TS, sp, a, sizeof a);
            cli_error("%s: every share is 0; give at least one device a share above 0", a);
            return -1;
        }
    }
    if (sp->n_devices) {
        if (sp->n_tensor_split > sp->n_devices) {
            snprintf(why, sizeof why, "%d shares for %d device%s; give one share per device", sp->n_tensor_split,
                     sp->n_devices, sp->n_devices == 1 ? "" : "s");
            return conflict(which, TS, DEV, sp, why);
        }
        if (sp->main_gpu >= sp->n_devices) {
            snprintf(why, sizeof why, "-mg is an index into the -dev list, 0..%d here", sp->n_devices - 1);
            return conflict(which, MG, DEV, sp, why);
        }
        if (sp->n_layer_split > sp->n_devices) {
            snprintf(why, sizeof why, "%d last layers for %d device%s; give one last layer per device",
                     sp->n_layer_split, sp->n_devices, sp->n_devices == 1 ? "" : "s");
            return conflict(which, LS, DEV, sp, why);
        }
    }
    if (sp->n_layer_split && sp->split_mode != ENGINE_SPLIT_LAYER)
        return conflict(which, LS, SM, sp, "--layer-split is for -sm layer only; drop one of the two flags");
    if (sp->n_layer_split && sp->n_gpu_layers == 0)
        return conflict(which, LS, which == DEV ? DEV : NGL, sp,
                        "no layer is on a device, so there is nothing to split; drop one of the two flags");
    return 0;
}

int cli_gpu_flag(int argc, char **argv, int *i, engine_params *ep) {
    const char *a = argv[*i], *v;
    engine_split *sp = &ep->split;
    int which;
    if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers") || !strcmp(a, "--gpu-layers")) which = NGL;
    else if (cli_is_flag(a, "-dev", "--device")) which = DEV;
    else if (cli_is_flag(a, "-mg", "--main-gpu")) which = MG;
    else if (cli_is_flag(a, "-sm", "--split-mode")) which = SM;
    else if (cli_is_flag(a, "-ts", "--tensor-split")) which = TS;
    else if (cli_is_flag(a, "--layer-split", NULL)) which = LS;
    else return 0;
    if (!(v = cli_value(argc, argv, i))) return -1;
    int bad = 0;
    switch (which) {
    case NGL:
        if (!strcmp(v, "all")) sp->n_gpu_layers = -1;
        else bad = cli_parse_int(a, v, -1, 1 << 20, &sp->n_gpu_layers);
        break;
    case DEV: bad = cli_parse_devices(a, v, sp); break;
    case MG: bad = cli_parse_int(a, v, 0, ENGINE_MAX_DEVICES - 1, &sp->main_gpu); break;
    case SM:
        if ((sp->split_mode = engine_split_parse(v)) < 0) {
            cli_error("%s: '%s' is not a split mode (none, layer or row)", a, v);
            bad = 1;
        }
        break;
    case TS: bad = cli_parse_tensor_split(a, v, sp); break;
    case LS: bad = cli_parse_layer_split(a, v, sp); break;
    }
    return bad || cross_check(which, sp) ? -1 : 1;
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
