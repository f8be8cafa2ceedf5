/* Tiny test harness for the unit tests: each CHECK prints "PASS name" or "FAIL name: why"
 * (tests/run.sh counts them); test_done() gives the exit status. */
#ifndef MGI_TEST_H
#define MGI_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int test_failures_;

static inline int test_check_(int ok, const char *name, const char *fmt, ...) {
    if (ok) {
        printf("PASS %s\n", name);
    } else {
        va_list ap;
        printf("FAIL %s: ", name);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        test_failures_++;
    }
    fflush(stdout);
    return ok;
}

/* CHECK(cond, name, fmt, ...): fmt explains a failure (values seen vs expected). */
#define CHECK(cond, name, ...) test_check_((cond) ? 1 : 0, (name), __VA_ARGS__)
#define SKIP(name, why) (printf("SKIP %s: %s\n", (name), (why)), fflush(stdout))

/* Path of a file under ../shared (or $SHARED). */
static inline const char *test_shared(const char *rel) {
    static char buf[8][1024];
    static int k;
    const char *root = getenv("SHARED");
    char *b = buf[k++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", root && *root ? root : "../shared", rel);
    return b;
}

static inline int test_done(void) { return test_failures_ ? 1 : 0; }

#endif
