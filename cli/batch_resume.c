/* mgi batch --resume: the ids of the result lines an earlier run wrote to the -o file (custom_id
 * for OpenAI lines), so those requests are skipped; a partial last line (a killed write) is cut. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

bool cli_idset_has(const cli_idset *s, const char *id) {
    return s->n && bsearch(&id, s->v, s->n, sizeof *s->v, str_cmp) != NULL;
}

void cli_idset_free(cli_idset *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
}

/* Reads the -o file's result lines (fd, a regular file opened for reading and appending, locked)
 * into ids, first cutting a trailing partial line (a killed write). Bounded by the file's size
 * at open: nobody else appends while the lock is held. 0; -1 after a message. */
int cli_batch_resume_load(int fd, const char *path, cli_idset *ids, bool log) {
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        cli_error("%s: the --resume output is not a regular file", path);
        return -1;
    }
    size_t len = (size_t)st.st_size, got = 0;
    char *text = malloc(len + 1);
    if (!text) {
        cli_error("%s: out of memory reading the --resume output (%zu bytes)", path, len);
        return -1;
    }
    while (got < len) {
        ssize_t r = pread(fd, text + got, len - got, (off_t)got);
        if (r < 0 && errno == EINTR && !cli_signal()) continue;
        if (r <= 0) {
            cli_error("%s: cannot read the --resume output: %s", path, r < 0 ? strerror(errno) : "it shrank");
            free(text);
            return -1;
        }
        got += (size_t)r;
    }
    text[len] = 0;
    size_t keep = len;
    while (keep && text[keep - 1] != '\n') keep--;
    if (keep < len) {
        if (ftruncate(fd, (off_t)keep)) {
            cli_error("%s: cannot cut the partial last line: %s", path, strerror(errno));
            free(text);
            return -1;
        }
        if (log) fprintf(stderr, "batch: %s: cut a partial last line (%zu bytes) left by an interrupted run\n", path,
                         len - keep);
    }
    for (size_t at = 0; at < keep;) {
        char *nl = memchr(text + at, '\n', keep - at);
        size_t n = (size_t)(nl - (text + at));
        cJSON *o = cJSON_ParseWithLength(text + at, n);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "custom_id");  /* OpenAI's lines */
        if (!id) id = cJSON_GetObjectItemCaseSensitive(o, "id");
        char *s = id ? cJSON_PrintUnformatted(id) : NULL;
        if (s) {
            if (ids->n == ids->cap) {
                size_t cap = ids->cap ? 2 * ids->cap : 64;
                char **v = realloc(ids->v, cap * sizeof *v);
                if (!v) { free(s); cJSON_Delete(o); free(text); cli_error("out of memory"); return -1; }
                ids->v = v;
                ids->cap = cap;
            }
            ids->v[ids->n++] = s;
        }
        cJSON_Delete(o);
        at += n + 1;
    }
    free(text);
    if (ids->n) qsort(ids->v, ids->n, sizeof *ids->v, str_cmp);
    return 0;
}

