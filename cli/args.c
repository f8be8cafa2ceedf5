/* Argument helpers shared by the subcommands: strict number parsing (the whole string, in
 * range) and whole-file reads, each failure one line on stderr naming the flag or file. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

void cli_error(const char *fmt, ...) {
    va_list ap;
    fputs("mgi: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        cli_error("%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        cli_error("%s: is a directory, expected a text file", path);
        fclose(f);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    if (f != stdin) fclose(f);
    if (!buf || bad) {
        cli_error("%s: %s", path, buf ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}
