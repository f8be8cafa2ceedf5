/* The malformed-GGUF corpus (tests/malformed/cases.h) against the reader: every file must be
 * refused, through mmap, read() and a buffer, with a message naming the file and the problem. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tests/malformed/cases.h"
#include "tests/unit/test.h"

static char tmpdir[] = "/tmp/mgi-test-malformed-XXXXXX";

/* Writes b to a file and checks all three ways of opening it. */
static void check_case(const char *name, const mbuf *b, const char *expect) {
    char path[600], label[200], err[1024];
    snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (b->n && fwrite(b->p, 1, b->n, f) != b->n) || fclose(f) != 0) {
        CHECK(0, name, "cannot write %s", path);
        return;
    }
    for (int mode = 0; mode < 3; mode++) {
        err[0] = '\0';
        gguf_ctx *g;
        const char *who = path;
        if (mode < 2) {
            g = gguf_open(path, mode, err, sizeof err);
        } else {
            /* An exact-size heap copy, so that ASan sees any read past the end. */
            void *copy = malloc(b->n ? b->n : 1);
            if (b->n) memcpy(copy, b->p, b->n);
            who = name;
            g = gguf_open_buffer(copy, b->n, name, err, sizeof err);
            gguf_close(g);
            free(copy);
        }
        snprintf(label, sizeof label, "malformed %s (%s)", name,
                 mode == 0 ? "read" : mode == 1 ? "mmap" : "buffer");
        if (mode < 2) gguf_close(g);
        CHECK(g == NULL && strncmp(err, who, strlen(who)) == 0 && strstr(err, expect), label,
              "%s; expected a message starting with '%s' and containing '%s', got '%s'",
              g ? "opened" : "refused", who, expect, err);
    }
    unlink(path);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp", "cannot create %s", tmpdir);
        return test_done();
    }
    for (size_t i = 0; i < N_MALFORMED_CASES; i++) {
        mbuf b = {0};
        malformed_cases[i].build(&b);
        check_case(malformed_cases[i].name, &b, malformed_cases[i].expect);
        free(b.p);
    }
    mbuf base = {0};
    mcut cuts[MAX_CUTS];
    size_t n = mb_base(&base, cuts);
    char err[1024];
    gguf_ctx *g = gguf_open_buffer(base.p, base.n, "base", err, sizeof err);
    CHECK(g != NULL && gguf_n_tensors(g) == 2 && gguf_n_kv(g) == 4, "malformed: the untruncated base file is valid",
          "%s", g ? "wrong counts" : err);
    gguf_close(g);
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "truncated-at-%zu", cuts[i].at);
        mbuf cut = {base.p, cuts[i].at, cuts[i].at};
        check_case(name, &cut, cuts[i].expect);
    }
    free(base.p);
    size_t total = N_MALFORMED_CASES + n;
    CHECK(total >= 40, "malformed: at least 40 cases", "only %zu", total);
    rmdir(tmpdir);
    return test_done();
}
