/* The reader's resource limits: metadata that would take more than 1 GiB of memory is refused
 * before that memory is asked for (checked in a child under an address-space limit, which a
 * 1 GiB request could not get past), and arrays nested 9 deep are refused without recursing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"

/* A file of one key: an array of n empty strings (8 zero bytes each in the file, but a
 * gguf_value each in memory). calloc leaves the zero pages unmapped until read, and the reader
 * checks the count before it reads any element. */
static uint8_t *string_array_file(uint64_t n, size_t *size) {
    static const char key[] = "big";
    size_t head = 4 + 4 + 8 + 8 + 8 + (sizeof key - 1) + 4 + 4 + 8;
    *size = head + (size_t)n * 8;
    uint8_t *b = calloc(*size, 1), *p = b;
    if (!b) return NULL;
    uint32_t version = 3, type_arr = 9, type_str = 8;
    uint64_t n_tensors = 0, n_kv = 1, klen = sizeof key - 1;
    memcpy(p, "GGUF", 4), p += 4;
    memcpy(p, &version, 4), p += 4;
    memcpy(p, &n_tensors, 8), p += 8;
    memcpy(p, &n_kv, 8), p += 8;
    memcpy(p, &klen, 8), p += 8;
    memcpy(p, key, klen), p += klen;
    memcpy(p, &type_arr, 4), p += 4;
    memcpy(p, &type_str, 4), p += 4;
    memcpy(p, &n, 8);
    return b;
}

/* Parses the heap buffer buf in a child (which frees its copy, so that LeakSanitizer in the
 * child stays quiet); with limit_as the child's address space grows by at most that much. Writes the child's message into msg; returns 1 when refused, 0 when opened, -1 when the
 * child died. */
static int parse_in_child(uint8_t *buf, size_t size, size_t limit_as, char *msg, size_t msg_size) {
    int fds[2];
    if (pipe(fds)) return -1;
    fflush(NULL);   /* the child exits through exit() (so a coverage build records it): nothing to flush twice */
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        if (limit_as) {
            struct rlimit rl;
            FILE *f = fopen("/proc/self/statm", "r");
            unsigned long pages = 0;
            if (f && fscanf(f, "%lu", &pages) == 1) {
                rl.rlim_cur = rl.rlim_max = pages * (unsigned long)sysconf(_SC_PAGESIZE) + limit_as;
                setrlimit(RLIMIT_AS, &rl);
            }
            if (f) fclose(f);
        }
        char err[512] = "";
        gguf_ctx *g = gguf_open_buffer(buf, size, "big", err, sizeof err);
        int refused = g == NULL;
        gguf_close(g);
        free(buf);
        if (write(fds[1], err, strlen(err)) < 0) exit(3);
        exit(refused ? 1 : 0);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], msg, msg_size - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) > 1) return -1;
    return WEXITSTATUS(st);
}

static void test_meta_cap(void) {
    /* ASan reserves terabytes of shadow: an address-space limit would stop it, not the reader. */
    int asan = getenv("MGI_ASAN") != NULL;
    /* 27M strings: about 216 MB of file, over 1 GiB of gguf_value items. */
    uint64_t n = 27u << 20;
    size_t size;
    uint8_t *buf = string_array_file(n, &size);
    if (!buf) {
        SKIP("metadata cap", "cannot reserve the 216 MB test buffer");
        return;
    }
    char msg[512];
    int rc = parse_in_child(buf, size, asan ? 0 : 256u << 20, msg, sizeof msg);
    CHECK(rc == 1 && strstr(msg, "metadata needs more than 1024 MiB of memory"),
          asan ? "gguf: metadata over 1 GiB refused" : "gguf: metadata over 1 GiB refused within 256 MiB of address space",
          "child result %d, message '%s'", rc, msg);
    free(buf);
}

static void test_depth(void) {
    /* One key holding arrays nested 9 deep (the limit is 8), then 8 deep (accepted). */
    for (int depth = 8; depth <= 9; depth++) {
        uint8_t buf[512], *p = buf;
        uint32_t version = 3, t_arr = 9, t_u32 = 4;
        uint64_t zero = 0, one = 1, klen = 4;
        memcpy(p, "GGUF", 4), p += 4;
        memcpy(p, &version, 4), p += 4;
        memcpy(p, &zero, 8), p += 8;
        memcpy(p, &one, 8), p += 8;
        memcpy(p, &klen, 8), p += 8;
        memcpy(p, "deep", 4), p += 4;
        memcpy(p, &t_arr, 4), p += 4;
        for (int i = 1; i < depth; i++) {
            memcpy(p, &t_arr, 4), p += 4;
            memcpy(p, &one, 8), p += 8;
        }
        memcpy(p, &t_u32, 4), p += 4;
        memcpy(p, &zero, 8), p += 8;
        char err[512] = "";
        gguf_ctx *g = gguf_open_buffer(buf, (size_t)(p - buf), "deep", err, sizeof err);
        if (depth == 9)
            CHECK(!g && strstr(err, "arrays nested deeper than 8"), "gguf: arrays nested 9 deep refused",
                  "%s", g ? "opened" : err);
        else
            CHECK(g != NULL, "gguf: arrays nested 8 deep accepted", "%s", err);
        gguf_close(g);
    }
}

int main(void) {
    test_depth();
    test_meta_cap();
    return test_done();
}
