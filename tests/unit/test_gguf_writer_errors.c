/* The GGUF writer's refusals: misuse of the setters and of add_tensor is reported by
 * gguf_writer_write with a message and nothing on disk; a file that cannot be renamed into place
 * leaves no temporary file; a failing fill callback likewise. Under ASan, no leak on any path. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test.h"

static char dir[] = "/tmp/mgi-test-writer-XXXXXX";

static int n_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

/* Writes w to dir/name and expects a refusal whose message contains want; frees w. */
static void expect_write_fails(const char *label, gguf_writer *w, const char *name, const char *want) {
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int before = n_files();
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    CHECK(rc == -1 && strstr(err, want) && n_files() == before, label,
          "rc %d, %d files (before %d), message '%s' (want '%s')", rc, n_files(), before, err, want);
}

static int fail_fill(void *dst, size_t size, void *user) {
    (void)dst, (void)size, (void)user;
    return 7;
}

static void test_setters(void) {
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_u32(w, "", 1);
    expect_write_fails("writer: empty key", w, "a.gguf", "a metadata key is empty");

    w = gguf_writer_new();
    gguf_writer_set_u32(w, NULL, 1);
    expect_write_fails("writer: NULL key", w, "a.gguf", "a metadata key is NULL");

    w = gguf_writer_new();
    gguf_writer_set_str(w, "s", NULL);
    expect_write_fails("writer: NULL string", w, "a.gguf", "key 's': NULL string");

    w = gguf_writer_new();
    gguf_writer_set_arr(w, "a", GGUF_TYPE_STRING, "x", 1);
    expect_write_fails("writer: numeric array of strings", w, "a.gguf", "is not a numeric array element type");

    w = gguf_writer_new();
    gguf_writer_set_arr_str(w, "a", NULL, 2);
    expect_write_fails("writer: NULL string array", w, "a.gguf", "key 'a': out of memory or NULL strings");

    w = gguf_writer_new();
    gguf_writer_set_value(w, "v", NULL);
    expect_write_fails("writer: NULL value", w, "a.gguf", "key 'v': NULL value");

    /* A nested value with a NULL string inside: the deep copy fails part-way and frees what it
     * copied. */
    w = gguf_writer_new();
    gguf_value items[2] = {{.type = GGUF_TYPE_STRING, .v.str = {"a", 1}},
                           {.type = GGUF_TYPE_STRING, .v.str = {NULL, 3}}};
    gguf_value arr = {.type = GGUF_TYPE_ARRAY, .v.arr = {GGUF_TYPE_STRING, 2, NULL, items}};
    gguf_writer_set_value(w, "v", &arr);
    expect_write_fails("writer: nested value with a NULL string", w, "a.gguf", "key 'v': out of memory or malformed value");

    w = gguf_writer_new();
    gguf_writer_set_version(w, 4);
    expect_write_fails("writer: version 4", w, "a.gguf", "GGUF version 4 cannot be written");

    w = gguf_writer_new();
    gguf_writer_set_alignment(w, 48);
    expect_write_fails("writer: alignment 48", w, "a.gguf", "alignment 48 is not a nonzero power of two");

    w = gguf_writer_new();
    gguf_writer_set_str(w, "general.alignment", "32");
    expect_write_fails("writer: general.alignment as a string", w, "a.gguf", "general.alignment must be a UINT32");

    w = gguf_writer_new();
    gguf_writer_set_u32(w, "k", 1);
    gguf_writer_set_u32(w, "k", 2);
    expect_write_fails("writer: a key set twice", w, "a.gguf", "metadata key 'k' set twice");

    /* Setting the alignment twice replaces the key rather than duplicating it. */
    w = gguf_writer_new();
    gguf_writer_set_alignment(w, 64);
    gguf_writer_set_alignment(w, 128);
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s/align.gguf", dir);
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    gguf_ctx *g = rc ? NULL : gguf_open(path, 1, err, sizeof err);
    CHECK(g && gguf_alignment(g) == 128 && gguf_n_kv(g) == 1, "writer: alignment set twice is one key",
          "%s", g ? "wrong alignment or key count" : err);
    gguf_close(g);
    unlink(path);
}

static void test_tensors(void) {
    static const float data[64];
    char err[512];
    gguf_writer *w = gguf_writer_new();
    int64_t ne[5] = {4, 1, 1, 1, 1};
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 0, ne, data, NULL, NULL, err, sizeof err) == -1 &&
          strstr(err, "n_dims 0 must be 1..4"), "writer: tensor with 0 dims", "%s", err);
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 5, ne, data, NULL, NULL, err, sizeof err) == -1 &&
          strstr(err, "n_dims 5"), "writer: tensor with 5 dims", "%s", err);
    int64_t zero[2] = {4, 0}, neg[2] = {4, -1}, huge[4] = {1ll << 40, 1ll << 40, 1, 1};
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 2, zero, data, NULL, NULL, err, sizeof err) == -1 &&
          strstr(err, "dimension 1 = 0"), "writer: zero dimension", "%s", err);
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 2, neg, data, NULL, NULL, err, sizeof err) == -1 &&
          strstr(err, "dimension 1 = -1"), "writer: negative dimension", "%s", err);
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 2, huge, data, NULL, NULL, err, sizeof err) == -1 &&
          strstr(err, "overflows"), "writer: element count overflow", "%s", err);
    int64_t big[2] = {1ll << 31, 1ll << 31};
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 2, big, NULL, fail_fill, NULL, err, sizeof err) == -1 &&
          strstr(err, "byte size overflows"), "writer: byte size overflow", "%s", err);
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 1, ne, data, fail_fill, NULL, err, sizeof err) == -1 &&
          strstr(err, "exactly one of data and fill"), "writer: both data and fill", "%s", err);
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 1, ne, NULL, NULL, NULL, err, sizeof err) == -1 &&
          strstr(err, "exactly one of data and fill"), "writer: neither data nor fill", "%s", err);
    gguf_writer_free(w);

    w = gguf_writer_new();
    CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 1, ne, NULL, fail_fill, NULL, err, sizeof err) == 0,
          "writer: a fill tensor is accepted", "%s", err);
    expect_write_fails("writer: a failing fill callback leaves nothing", w, "fill.gguf", "fill callback failed (7)");
}

/* The target is a non-empty directory: the temporary file is written, the rename fails, and
 * the temporary file is removed. */
static void test_rename(void) {
    char sub[256], inner[300];
    snprintf(sub, sizeof sub, "%s/taken", dir);
    snprintf(inner, sizeof inner, "%s/x", sub);
    mkdir(sub, 0755);
    FILE *f = fopen(inner, "w");
    if (f) fclose(f);
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_u32(w, "k", 1);
    expect_write_fails("writer: a failed rename leaves no temporary file", w, "taken", "cannot rename");
    unlink(inner);
    rmdir(sub);
}

int main(void) {
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp", "cannot create %s", dir);
        return test_done();
    }
    test_setters();
    test_tensors();
    test_rename();
    CHECK(n_files() == 0, "writer: the directory is empty at the end", "%d files left", n_files());
    rmdir(dir);
    return test_done();
}
