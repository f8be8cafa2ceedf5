/* Argument helpers shared by the subcommands: strict number parsing (the whole string, in
 * range) and the shared sampling flags, each failure one line on stderr naming the flag. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_error(const char *fmt, ...) {
    va_list ap;
    fputs("mgi: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_is_flag(const char *a, const char *short_name, const char *long_name) {
    return !strcmp(a, short_name) || (long_name && !strcmp(a, long_name));
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int cli_threads_check(const char *flag, int n) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (n >= 1 && n <= cores) return n;
    /* More threads than cores only take turns on them, and the pool's threads spin while they wait. */
    fprintf(stderr, "mgi: warning: %s %d: %s; using the %ld cores\n", flag, n,
            n < 1 ? "no threads" : "more threads than cores", cores);
    return (int)cores;
}

int cli_engine_flag(int argc, char **argv, int *i, engine_params *ep) {
    const char *a = argv[*i], *v;
    int *target = NULL, lo = 1, hi = 1 << 24;
    if (cli_is_flag(a, "-c", "--ctx-size")) { target = &ep->n_ctx; lo = 0; }
    else if (cli_is_flag(a, "-b", "--batch-size")) target = &ep->n_batch;
    else if (cli_is_flag(a, "-t", "--threads")) { target = &ep->n_threads; lo = 0; hi = 256; }
    else if (cli_is_flag(a, "-tb", "--threads-batch")) { target = &ep->n_threads_batch; lo = -1; hi = 256; }
    else if (cli_is_flag(a, "--no-mmap", NULL)) { ep->use_mmap = 0; return 1; }
    else if (cli_is_flag(a, "--mlock", NULL)) { ep->use_mlock = 1; return 1; }
    else if (cli_is_flag(a, "--cpu-exact", NULL)) { ep->cpu_exact = 1; return 1; }
    else if (cli_is_flag(a, "-nopo", "--no-op-offload")) { ep->no_op_offload = 1; return 1; }
    else if (cli_is_flag(a, "-fa", "--flash-attn")) { cli_flash_attn_flag(argc, argv, i); return 1; }
    else return cli_gpu_flag(argc, argv, i, ep);
    if (!(v = cli_value(argc, argv, i))) return -1;
    if (cli_parse_int(a, v, lo, hi, target)) return -1;
    if (target == &ep->n_threads_batch && *target < 1) *target = 0; /* -1 or 0: as -t (llama.cpp's -1) */
    if (target == &ep->n_threads || (target == &ep->n_threads_batch && *target > 0))
        *target = cli_threads_check(a, *target);
    return 1;
}

int cli_parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) {
        cli_error("%s: '%s' is not an integer", flag, s);
        return -1;
    }
    if (v < lo || v > hi) {
        cli_error("%s: %lld is out of range [%lld, %lld]", flag, v, (long long)lo, (long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_int(const char *flag, const char *s, int lo, int hi, int *out) {
    int64_t v;
    if (cli_parse_i64(flag, s, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

int cli_parse_f32(const char *flag, const char *s, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) {
        cli_error("%s: '%s' is not a number", flag, s);
        return -1;
    }
    if (v < lo || v > hi) {
        cli_error("%s: %g is out of range [%g, %g]", flag, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_error("%s: missing value (see --help)", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* llama.cpp's escape processing (common's string_process_escapes), in place: \n \r \t \' \" \\
 * and \xNN (two characters that strtol reads as hex); any other backslash stays as it is. */
size_t cli_process_escapes(char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 >= len) {
            s[o++] = s[i];
            continue;
        }
        char c = s[++i];
        const char *from = "nrt'\"\\", *to = "\n\r\t'\"\\", *k = c ? strchr(from, c) : NULL;
        if (k) {
            s[o++] = to[k - from];
            continue;
        }
        if (c == 'x' && i + 2 < len) {
            char hex[3] = {s[i + 1], s[i + 2], 0}, *end;
            long v = strtol(hex, &end, 16);
            if (end == hex + 2) {
                s[o++] = (char)v;
                i += 2;
                continue;
            }
        }
        s[o++] = '\\';
        s[o++] = c;
    }
    return o;
}

const char *cli_token_text(const tokenizer *t, int32_t id, size_t *len) {
    return tokenizer_is_control(t, id) ? tokenizer_text(t, id, len) : tokenizer_piece(t, id, len);
}

void cli_print_piece(FILE *f, const tokenizer *t, int32_t id) {
    size_t len;
    const char *p = cli_token_text(t, id, &len);
    fprintf(f, "%6d -> '", id);
    fwrite(p, 1, len, f);
    fputs("'\n", f);
}

void cli_flash_attn_flag(int argc, char **argv, int *i) {
    static const char *const words[] = {"on", "enabled", "1", "true", "off", "disabled", "0", "false", "auto", "-1"};
    const char *flag = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : "";
    int k = 0;
    while (k < 10 && strcmp(v, words[k])) k++;
    if (k < 10) ++*i; /* its value; a bare -fa (llama.cpp before the value was required) is on */
    if (k >= 4 && k < 8)
        fprintf(stderr, "mgi: %s %s: mgi's attention is always the fused (flash) kind; the flag changes nothing\n",
                flag, v);
}

/* -l's entries (one subcommand per process: a list for its lifetime) */
enum { CLI_MAX_BIAS = 1024 };
static sampler_bias cli_bias[CLI_MAX_BIAS];

/* llama.cpp's -l value: TOKEN_ID followed by +BIAS or -BIAS (BIAS a number, or inf). */
static int parse_bias(const char *flag, const char *v, sampler_params *sp) {
    char *end;
    errno = 0;
    long id = strtol(v, &end, 10);
    const char sign = *end;
    float b = 0;
    if (end != v && !errno && id >= 0 && id <= INT32_MAX && (sign == '+' || sign == '-') && end[1] &&
        !isspace((unsigned char)end[1]) && end[1] != '+' && end[1] != '-') {
        char *e2;
        b = strtof(end + 1, &e2);
        if (*e2 || isnan(b)) end = NULL;
    } else {
        end = NULL;
    }
    if (!end) {
        cli_error("%s %s: want TOKEN_ID+BIAS or TOKEN_ID-BIAS, e.g. 15043+1 or 2-inf", flag, v);
        return -1;
    }
    if (sp->n_bias == CLI_MAX_BIAS) {
        cli_error("%s: at most %d logit biases", flag, CLI_MAX_BIAS);
        return -1;
    }
    cli_bias[sp->n_bias] = (sampler_bias){(int32_t)id, sign == '-' ? -b : b};
    sp->bias = cli_bias;
    sp->n_bias++;
    return 0;
}

int cli_check_bias(const sampler_params *sp, int32_t n_vocab) {
    for (int32_t i = 0; i < sp->n_bias; i++)
        if (sp->bias[i].id >= n_vocab) {
            cli_error("-l %d...: token %d is outside the model's vocabulary of %d (ids 0..%d)", sp->bias[i].id,
                      sp->bias[i].id, n_vocab, n_vocab - 1);
            return -1;
        }
    return 0;
}

int cli_sampling_flag(int argc, char **argv, int *i, sampler_params *sp) {
    const char *a = argv[*i], *v;
    if (cli_is_flag(a, "-l", "--logit-bias")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        return parse_bias(a, v, sp) ? -1 : 1;
    }
    if (strcmp(a, "--temp") && strcmp(a, "--top-k") && strcmp(a, "--top-p") && strcmp(a, "--min-p") &&
        strcmp(a, "--repeat-penalty") && strcmp(a, "--repeat-last-n") && strcmp(a, "--presence-penalty") &&
        strcmp(a, "--frequency-penalty"))
        return 0;
    if (!(v = cli_value(argc, argv, i))) return -1;
    int bad;
    if (!strcmp(a, "--temp")) bad = cli_parse_f32(a, v, -1e30f, 1e30f, &sp->temp);
    else if (!strcmp(a, "--top-k")) bad = cli_parse_int(a, v, -1, 1 << 30, &sp->top_k);
    else if (!strcmp(a, "--top-p")) bad = cli_parse_f32(a, v, -1e30f, 1e30f, &sp->top_p);
    else if (!strcmp(a, "--min-p")) bad = cli_parse_f32(a, v, -1e30f, 1e30f, &sp->min_p);
    else if (!strcmp(a, "--repeat-penalty")) bad = cli_parse_f32(a, v, -1e30f, 1e30f, &sp->repeat_penalty);
    else if (!strcmp(a, "--presence-penalty")) bad = cli_parse_f32(a, v, -1e30f, 1e30f, &sp->presence_penalty);
    else if (!strcmp(a, "--frequency-penalty")) bad = cli_parse_f32(a, v, -1e30f, 1e30f, &sp->freq_penalty);
    else bad = cli_parse_int(a, v, -1, 1 << 24, &sp->repeat_last_n);
    return bad ? -1 : 1;
}

int cli_sampling_check(const sampler_params *sp) {
    if (sp->temp < 0) { cli_error("--temp %g: must be >= 0 (0 = greedy)", sp->temp); return -1; }
    if (sp->top_p < 0 || sp->top_p > 1) {
        cli_error("--top-p %g: must be in [0, 1] (1 = off)", sp->top_p);
        return -1;
    }
    if (sp->min_p < 0 || sp->min_p > 1) {
        cli_error("--min-p %g: must be in [0, 1] (0 = off)", sp->min_p);
        return -1;
    }
    if (!(sp->repeat_penalty > 0)) {
        cli_error("--repeat-penalty %g: must be > 0 (1 = off)", sp->repeat_penalty);
        return -1;
    }
    return 0;
}
