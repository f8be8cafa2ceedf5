/* mgi info: what a GGUF file holds (architecture, hyperparameters, tokenizer, bytes by type) and
 * where it would run (the plan over the CUDA devices for the GPU flags, nothing loaded), its
 * tensor table, or the values of one tensor dequantised to f32 for scripts. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/devices.h"
#include "engine/plan.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "quant/quant.h"

static const char info_usage[] =
    "usage: mgi info MODEL [flags]\n"
    "  -m,   --model FILE         the GGUF file (or give it as the first argument)\n"
    "        --tensors            list every tensor: name, type, shape, bytes\n"
    "        --tensor NAME        one tensor; with --values, print its values\n"
    "        --values N|all       first N values of --tensor, dequantised, one per line (%.9g)\n"
    "        --no-mmap            read the file instead of mapping it\n"
    "The plan, after the summary: which device would hold which layers or heads and the memory\n"
    "each needs against what it has free (nothing is loaded), for the flags of mgi run:\n"
    "  -c,   --ctx-size N         KV cells of all sequences; 0 = training context x -np (default 0)\n"
    "  -np,  --parallel N         sequences held at once (default 1)\n"
    "  -b,   --batch-size N       tokens per forward pass (default 2048)\n"
    CLI_GPU_USAGE
    "  -h,   --help               this text\n"
    "Exit 2 when the plan does not fit a device (the table on stdout, the reason on stderr).\n";

static void size_text(uint64_t bytes, char *buf, size_t size) {
    if (bytes >= (1ull << 30)) snprintf(buf, size, "%.2f GiB", bytes / 1073741824.0);
    else if (bytes >= (1ull << 20)) snprintf(buf, size, "%.2f MiB", bytes / 1048576.0);
    else if (bytes >= 1024) snprintf(buf, size, "%.2f KiB", bytes / 1024.0);
    else snprintf(buf, size, "%" PRIu64 " B", bytes);
}

static void print_shape(const gguf_tensor *t) {
    printf("[");
    for (uint32_t d = 0; d < t->n_dims; d++) printf("%s%" PRId64, d ? ", " : "", t->ne[d]);
    printf("]");
}

/* A scalar value as text, for hyperparameter lines. */
static void print_value(const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        printf("%" PRIu64, v->v.u64); break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        printf("%" PRId64, v->v.i64); break;
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64: printf("%g", v->v.f64); break;
    case GGUF_TYPE_BOOL: printf("%s", v->v.b ? "true" : "false"); break;
    case GGUF_TYPE_STRING: printf("%s", v->v.str.ptr); break;
    case GGUF_TYPE_ARRAY: printf("array of %" PRIu64 " %s", v->v.arr.n, gguf_type_name(v->v.arr.elem)); break;
    default: printf("?"); break;
    }
}

static void print_summary(const gguf_ctx *g) {
    const char *arch = NULL, *name = NULL;
    gguf_get_str(g, "general.architecture", &arch);
    gguf_get_str(g, "general.name", &name);
    printf("file:           %s (GGUF v%u, ", gguf_path(g), gguf_version(g));
    { char b[32]; size_text(gguf_file_size(g), b, sizeof b); fputs(b, stdout); }
    printf(")\n");
    printf("architecture:   %s\n", arch ? arch : "(none: no general.architecture)");
    if (name) printf("name:           %s\n", name);
    uint32_t ft;
    if (gguf_get_u32(g, "general.file_type", &ft) == GGUF_OK) printf("file type:      %u\n", ft);

    /* Hyperparameters live under "<arch>." keys. */
    static const struct { const char *suffix, *label; } hp[] = {
        {"context_length", "context length"}, {"embedding_length", "n_embd"},
        {"block_count", "n_layer"}, {"feed_forward_length", "n_ff"},
        {"attention.head_count", "n_head"}, {"attention.head_count_kv", "n_head_kv"},
        {"attention.key_length", "key length"}, {"rope.dimension_count", "n_rot"}, {"rope.freq_base", "rope freq base"},
        {"attention.layer_norm_rms_epsilon", "rms norm eps"}, {"vocab_size", "vocab size"},
    };
    if (arch) {
        for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++) {
            char key[256];
            snprintf(key, sizeof key, "%s.%s", arch, hp[i].suffix);
            const gguf_value *v = gguf_get(g, key);
            if (!v) continue;
            printf("%-15s %s", hp[i].label, "");
            print_value(v);
            printf("\n");
        }
    }
    const char *tok_model = NULL, *tok_pre = NULL;
    const gguf_value *tokens = NULL;
    gguf_get_str(g, "tokenizer.ggml.model", &tok_model);
    gguf_get_str(g, "tokenizer.ggml.pre", &tok_pre);
    gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens);
    if (tok_model || tokens) {
        printf("tokenizer:      %s", tok_model ? tok_model : "(no tokenizer.ggml.model)");
        if (tok_pre) printf(" (pre %s)", tok_pre);
        if (tokens) printf(", %" PRIu64 " tokens", tokens->v.arr.n);
        printf("\n");
    } else {
        printf("tokenizer:      none\n");
    }

    int64_t nt = gguf_n_tensors(g);
    uint64_t by_type_bytes[QUANT_TYPE_COUNT] = {0}, total = 0, params = 0;
    int64_t by_type_count[QUANT_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        by_type_bytes[t->type] += t->size;
        by_type_count[t->type]++;
        total += t->size;
        params += (uint64_t)t->n_elems;
    }
    printf("metadata keys:  %" PRId64 "\n", gguf_n_kv(g));
    printf("tensors:        %" PRId64 ", %.2f M parameters, ", nt, params / 1e6);
    char b[32];
    size_text(total, b, sizeof b);
    fputs(b, stdout);
    printf("\n");
    for (uint32_t ty = 0; ty < QUANT_TYPE_COUNT; ty++) {
        if (!by_type_count[ty]) continue;
        printf("  %-8s %5" PRId64 " tensors  ", quant_type_name(ty), by_type_count[ty]);
        char b[32];
        size_text(by_type_bytes[ty], b, sizeof b);
        fputs(b, stdout);
        printf("%s\n", quant_is_supported(ty) ? "" : "  (not supported by mgi)");
    }
}

/* The plan section as text: where the model would run with these flags, nothing loaded. 0 with
 * *text set (free it), or an exit status with the message printed (bad flags 1, a model that
 * cannot run 2, a device query failure 3) and nothing for stdout; a plan that does not fit is 2
 * with the table in *text and the reason printed. explicit_flags: the user gave -c, -b, -np or a
 * GPU flag, so a file that is not a runnable model is an error rather than a note. */
static int plan_text(const gguf_ctx *g, const engine_params *ep, int explicit_flags, char **text) {
    enum { CAP = 8192 };
    char err[1024];
    llama_model m;
    *text = malloc(CAP);
    if (!*text) { cli_error("info: out of memory"); return EXIT_RUNTIME; }
    (*text)[0] = 0;
    if (llama_model_load(&m, g, err, sizeof err)) {
        if (explicit_flags) { cli_error("%s", err); return EXIT_BADINPUT; }
        snprintf(*text, CAP, "plan:           none (not a model mgi runs: %s)\n", err);
        return 0;
    }
    const llama_hparams *hp = &m.hp;
    int rc = 0;
    /* The recipe first, then the plan on the lines after it. */
    model_describe(&m, *text, CAP / 2);
    size_t at = strlen(*text);
    char *plan = *text + at;
    size_t plan_cap = CAP - at;
    int64_t limit = (int64_t)hp->n_ctx_train * ep->n_seq_max;
    int64_t n_ctx = ep->n_ctx ? ep->n_ctx : limit;
    if (n_ctx < ep->n_seq_max || n_ctx > limit || n_ctx > (1 << 30)) {
        cli_error("-c %lld: %d sequence%s of the model's %d positions (%s.context_length) need -c %d..%lld",
                  (long long)n_ctx, ep->n_seq_max, ep->n_seq_max == 1 ? "" : "s", hp->n_ctx_train, hp->arch, ep->n_seq_max,
                  (long long)limit);
        llama_model_free(&m);
        return EXIT_USAGE;
    }
    int32_t n_cells = (int32_t)engine_plan_cells(n_ctx, ep->n_seq_max);
    int32_t n_batch = ep->n_batch < n_ctx ? ep->n_batch : (int32_t)n_ctx;
    char why[512] = "";
    int n_dev = ep->split.n_gpu_layers != 0 ? engine_device_count(why, sizeof why) : 0;
    if (n_dev == 0) {
        /* No device to plan for, but a --layer-split no plan could take is refused all the same. */
        if (engine_split_check_layers(&ep->split, hp->n_layer, err, sizeof err)) {
            cli_error("%s", err);
            llama_model_free(&m);
            return EXIT_USAGE;
        }
        char w[32], kv[32];
        size_text(gguf_file_size(g), w, sizeof w);
        size_text(llama_kv_bytes(hp, n_cells, sizeof(float)), kv, sizeof kv);
        if (ep->split.n_gpu_layers != 0 && strlen(why) > 200) why[200] = 0;
        snprintf(plan, plan_cap, "plan: CPU (%s%s)\n  cpu    all %d layers, weights %s, KV %s (f32, %d cells), batch %d\n",
                 ep->split.n_gpu_layers == 0 ? "-ngl 0" : "no CUDA device: ",
                 ep->split.n_gpu_layers == 0 ? "" : why, hp->n_layer, w, kv, n_cells, n_batch);
        llama_model_free(&m);
        return 0;
    }
    /* engine_load refuses such a model on the GPU (it would run the wrong layer there). */
    const char *feature = model_gpu_missing_feature(&m);
    if (feature) {
        snprintf(plan, plan_cap, "plan: none on the GPU: the CUDA backend does not run architecture %s's %s; "
                 "with -ngl 0 it runs on the CPU\n", hp->arch, feature);
        llama_model_free(&m);
        return 0;
    }
    engine_device_info *devs = calloc((size_t)n_dev, sizeof *devs);
    engine_plan *p = malloc(sizeof *p);
    if (!devs || !p) {
        cli_error("info: out of memory");
        rc = EXIT_RUNTIME;
        goto out;
    }
    for (int i = 0; i < n_dev; i++)
        if (engine_device_query(i, &devs[i], err, sizeof err)) {
            cli_error("%s", err);
            rc = EXIT_RUNTIME;
            goto out;
        }
    engine_split req = ep->split;
    req.cpu_fast = !ep->cpu_exact;
    int pr = engine_plan_make(p, &m, &req, devs, n_dev, n_cells, n_batch, err, sizeof err);
    if (pr == -1) {
        cli_error("%s", err);
        rc = EXIT_USAGE;
        goto out;
    }
    engine_plan_describe(p, n_cells, n_batch, plan, plan_cap);
    if (pr == -2) {
        cli_error("%s", err);
        rc = EXIT_BADINPUT;
    }
out:
    free(p);
    free(devs);
    llama_model_free(&m);
    return rc;
}

static void print_tensors(const gguf_ctx *g) {
    int64_t nt = gguf_n_tensors(g);
    for (int64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        printf("%-40s %-8s ", t->name, quant_type_name(t->type));
        print_shape(t);
        printf(" %" PRIu64 "\n", t->size);
    }
}

/* Prints the first n values of t (n < 0: all), one row dequantised at a time. */
static int print_values(const gguf_tensor *t, int64_t n) {
    char err[512];
    const quant_traits *tr = quant_traits_of(t->type);
    if (!tr || !tr->dequant) {
        cli_error("tensor '%s': type %s cannot be dequantised (supported: %s)", t->name,
                  quant_type_name(t->type), quant_supported_list());
        return EXIT_BADINPUT;
    }
    if (n < 0 || n > t->n_elems) n = t->n_elems;
    int64_t row = t->ne[0];
    size_t row_bytes = quant_row_bytes(t->type, row);
    float *buf = malloc((size_t)row * sizeof(float));
    if (!buf) {
        cli_error("tensor '%s': out of memory for a row of %" PRId64 " values", t->name, row);
        return EXIT_RUNTIME;
    }
    for (int64_t done = 0, r = 0; done < n; r++) {
        const uint8_t *src = (const uint8_t *)t->data + (size_t)r * row_bytes;
        if (quant_dequant_row(t->type, src, buf, row, err, sizeof err)) {
            cli_error("tensor '%s': %s", t->name, err);
            free(buf);
            return EXIT_BADINPUT;
        }
        for (int64_t j = 0; j < row && done < n; j++, done++) printf("%.9g\n", buf[j]);
    }
    free(buf);
    return 0;
}

int cli_info(int argc, char **argv) {
    const char *path = NULL, *tensor = NULL, *values = NULL;
    int list = 0, explicit_flags = 0;
    engine_params ep = engine_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int e;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(info_usage, stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(path = cli_value(argc, argv, &i))) return EXIT_USAGE; }
        else if (!strcmp(a, "--tensors")) list = 1;
        else if (!strcmp(a, "--tensor")) { if (!(tensor = cli_value(argc, argv, &i))) return EXIT_USAGE; }
        else if (!strcmp(a, "--values")) { if (!(values = cli_value(argc, argv, &i))) return EXIT_USAGE; }
        else if (cli_is_flag(a, "-np", "--parallel")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_int(a, v, 1, 1 << 16, &ep.n_seq_max)) return EXIT_USAGE;
            explicit_flags = 1;
        } else if ((e = cli_engine_flag(argc, argv, &i, &ep))) {
            if (e < 0) return EXIT_USAGE;
            if (strcmp(a, "--no-mmap") && !cli_is_flag(a, "-t", "--threads")) explicit_flags = 1;
        }
        else if (a[0] == '-' && a[1]) { cli_error("info: unknown flag '%s' (see mgi info --help)", a); return EXIT_USAGE; }
        else if (!path) path = a;
        else { cli_error("info: unexpected argument '%s' (one model at a time)", a); return EXIT_USAGE; }
    }
    if (!path) { cli_error("info: no model given (usage: mgi info MODEL)"); return EXIT_USAGE; }
    int64_t n_values = 0;
    if (values) {
        if (!tensor) { cli_error("info: --values needs --tensor NAME"); return EXIT_USAGE; }
        if (!strcmp(values, "all")) n_values = -1;
        else if (cli_parse_i64("--values", values, 0, INT64_MAX, &n_values)) return EXIT_USAGE;
    }

    char err[1024];
    gguf_ctx *g = gguf_open(path, ep.use_mmap, err, sizeof err);
    if (!g) { cli_error("%s", err); return EXIT_BADINPUT; }
    int rc = 0;
    if (tensor) {
        const gguf_tensor *t = gguf_get_tensor(g, tensor);
        if (!t) {
            cli_error("%s: no tensor named '%s' (mgi info --tensors lists them)", path, tensor);
            rc = EXIT_BADINPUT;
        } else if (values) {
            rc = print_values(t, n_values);
        } else {
            printf("%s %s ", t->name, quant_type_name(t->type));
            print_shape(t);
            printf(" %" PRIu64 " bytes at data offset %" PRIu64 "\n", t->size, t->offset);
        }
    } else {
        /* The plan first, so that bad flags leave stdout empty; a plan that does not fit still
         * prints the summary and its table. */
        char *plan = NULL;
        rc = plan_text(g, &ep, explicit_flags, &plan);
        if (!rc || rc == EXIT_BADINPUT) {
            if (plan && (!rc || *plan)) {
                print_summary(g);
                fputs(plan, stdout);
            }
            if (list && !rc) print_tensors(g);
        }
        free(plan);
    }
    gguf_close(g);
    if (fflush(stdout) != 0 && !rc) { cli_error("info: writing to stdout failed"); rc = EXIT_RUNTIME; }
    return rc;
}
