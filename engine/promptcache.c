/* Prompt cache files: a checked header, a zlib-compressed payload streamed layer by layer, a
 * temporary file renamed into place; and a loader that verifies everything before use. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/promptcache.h"

static const char magic[8] = {'M', 'G', 'I', 'P', 'C', 'A', 'C', 'H'};
enum { VERSION = 1 };

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

promptcache_model promptcache_model_of(const engine *e) {
    promptcache_model m = {
        .model_hash = engine_model_hash(e), .n_layer = engine_hparams(e)->n_layer, .kv_dim = engine_kv_dim(e),
        .n_vocab = engine_n_vocab(e), .max_tokens = engine_n_ctx(e),
    };
    return m;
}

/* Payload bytes of n tokens, or 0 when the shapes make no sense or overflow. */
static uint64_t payload_bytes(const promptcache_model *m, uint64_t n) {
    if (m->n_layer < 1 || m->kv_dim < 1 || n > (uint64_t)m->max_tokens) return 0;
    return n * 4 + (uint64_t)m->n_layer * 2 * n * (uint64_t)m->kv_dim * 4;
}

void promptcache_free(promptcache *pc) {
    free(pc->tokens);
    free(pc->kv);
    memset(pc, 0, sizeof *pc);
}

int promptcache_parse(promptcache *pc, const uint8_t *data, size_t size, const promptcache_model *m, char *err,
                      size_t err_size) {
    memset(pc, 0, sizeof *pc);
    if (size < PROMPTCACHE_HEADER) {
        snprintf(err, err_size, "truncated: %zu bytes, shorter than the %d-byte header", size, PROMPTCACHE_HEADER);
        return -1;
    }
    if (memcmp(data, magic, sizeof magic)) {
        snprintf(err, err_size, "not an mgi prompt cache (bad magic)");
        return -1;
    }
    if (get32(data + 60) != (uint32_t)crc32(0, data, 60)) {
        snprintf(err, err_size, "header checksum mismatch (corrupt)");
        return -1;
    }
    uint32_t version = get32(data + 8), hsize = get32(data + 12), n_layer = get32(data + 24);
    uint32_t kv_dim = get32(data + 28), n_tok = get32(data + 32), type = get32(data + 36);
    uint64_t payload = get64(data + 40), packed = get64(data + 48);
    if (version != VERSION || hsize != PROMPTCACHE_HEADER || type != 0) {
        snprintf(err, err_size, "version %u, header %u bytes, value type %u: this mgi writes version %d, %d, f32",
                 version, hsize, type, VERSION, PROMPTCACHE_HEADER);
        return -1;
    }
    if (get64(data + 16) != m->model_hash || n_layer != (uint32_t)m->n_layer || kv_dim != (uint32_t)m->kv_dim) {
        snprintf(err, err_size, "written for another model (hash %016llx, %u layers x %u; this model %016llx, "
                 "%d x %d)", (unsigned long long)get64(data + 16), n_layer, kv_dim,
                 (unsigned long long)m->model_hash, m->n_layer, m->kv_dim);
        return -1;
    }
    if (n_tok < 1 || n_tok > (uint32_t)m->max_tokens) {
        snprintf(err, err_size, "%u tokens: outside 1..%d, the context of a sequence", n_tok, m->max_tokens);
        return -1;
    }
    uint64_t want = payload_bytes(m, n_tok);
    if (!want || payload != want || want > SIZE_MAX) {
        snprintf(err, err_size, "payload of %llu bytes, but %u tokens need %llu", (unsigned long long)payload,
                 n_tok, (unsigned long long)want);
        return -1;
    }
    if (packed != size - PROMPTCACHE_HEADER) {
        snprintf(err, err_size, "%s: the header says %llu compressed bytes, the file holds %zu",
                 packed > size - PROMPTCACHE_HEADER ? "truncated" : "trailing bytes", (unsigned long long)packed,
                 size - PROMPTCACHE_HEADER);
        return -1;
    }
    uint8_t *buf = malloc((size_t)payload);
    if (!buf) {
        snprintf(err, err_size, "out of memory for %llu bytes", (unsigned long long)payload);
        return -1;
    }
    z_stream z;
    memset(&z, 0, sizeof z);
    int zrc = inflateInit(&z);
    if (zrc == Z_OK) {
        z.next_in = (Bytef *)(data + PROMPTCACHE_HEADER);
        z.next_out = buf;
        /* Fed in chunks so sizes past uInt never truncate. */
        size_t in_left = (size_t)packed, out_left = (size_t)payload;
        for (;;) {
            if (!z.avail_in && in_left) {
                z.avail_in = in_left > (1u << 30) ? 1u << 30 : (uInt)in_left;
                in_left -= z.avail_in;
            }
            if (!z.avail_out && out_left) {
                z.avail_out = out_left > (1u << 30) ? 1u << 30 : (uInt)out_left;
                out_left -= z.avail_out;
            }
            zrc = inflate(&z, Z_NO_FLUSH);
            if (zrc != Z_OK) break;
        }
        /* Exactly the payload, and the stream ends exactly at the end of the file. */
        if (zrc == Z_STREAM_END && (z.avail_in || in_left || z.avail_out || out_left)) zrc = Z_DATA_ERROR;
        inflateEnd(&z);
    }
    if (zrc != Z_STREAM_END) {
        snprintf(err, err_size, "compressed payload is corrupt or truncated (zlib: %s)", z.msg ? z.msg : zError(zrc));
        free(buf);
        return -1;
    }
    uLong crc = crc32(0, NULL, 0);
    for (size_t at = 0; at < (size_t)payload;) {
        size_t c = (size_t)payload - at > (1u << 30) ? 1u << 30 : (size_t)payload - at;
        crc = crc32(crc, buf + at, (uInt)c);
        at += c;
    }
    if ((uint32_t)crc != get32(data + 56)) {
        snprintf(err, err_size, "payload checksum mismatch (corrupt)");
        free(buf);
        return -1;
    }
    pc->n_tokens = (int32_t)n_tok;
    pc->tokens = malloc((size_t)n_tok * sizeof *pc->tokens);
    pc->kv = malloc((size_t)payload - (size_t)n_tok * 4);
    if (!pc->tokens || !pc->kv) {
        free(buf);
        promptcache_free(pc);
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < n_tok; i++) {
        uint32_t t = get32(buf + 4 * (size_t)i);
        if (t >= (uint32_t)m->n_vocab) {
            snprintf(err, err_size, "token %u at position %u is outside the vocabulary of %d", t, i, m->n_vocab);
            free(buf);
            promptcache_free(pc);
            return -1;
        }
        pc->tokens[i] = (int32_t)t;
    }
    memcpy(pc->kv, buf + (size_t)n_tok * 4, (size_t)payload - (size_t)n_tok * 4);
    free(buf);
    return 0;
}

int promptcache_read(promptcache *pc, const char *path, const promptcache_model *m, char *err, size_t err_size) {
    memset(pc, 0, sizeof *pc);
    /* O_NONBLOCK: a FIFO here must not block the open; it is refused below as not regular. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) return 1;
        snprintf(err, err_size, "%s", strerror(errno));
        return -1;
    }
    struct stat st;
    uint64_t most = payload_bytes(m, (uint64_t)m->max_tokens);
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, err_size, "not a regular file");
        close(fd);
        return -1;
    }
    /* A deflate stream is at most a little larger than its input. */
    if ((uint64_t)st.st_size > PROMPTCACHE_HEADER + most + most / 1000 + 1024) {
        snprintf(err, err_size, "%lld bytes: larger than any cache of this model can be", (long long)st.st_size);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, got = 0;
    uint8_t *data = malloc(size ? size : 1);
    while (data && got < size) {
        ssize_t r = read(fd, data + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!data) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    int rc = promptcache_parse(pc, data, got, m, err, err_size);
    free(data);
    return rc;
}

/* --- writing --------------------------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n, off_t at, char *err, size_t err_size) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = pwrite(fd, b, n, at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(err, err_size, "write failed: %s", w < 0 ? strerror(errno) : "no progress");
            return -1;
        }
        b += w;
        n -= (size_t)w;
        at += w;
    }
    return 0;
}

typedef struct {
    z_stream z;
    int fd;
    off_t at;
    uLong crc;
    uint8_t out[1 << 16];
} deflater;

/* Compresses n bytes (flush: Z_FINISH at the end) and writes what comes out. */
static int deflate_put(deflater *d, const void *p, size_t n, int flush, char *err, size_t err_size) {
    const uint8_t *b = p;
    d->crc = n ? crc32(d->crc, b, (uInt)n) : d->crc;
    d->z.next_in = (Bytef *)b;
    d->z.avail_in = (uInt)n;
    int zrc;
    do {
        d->z.next_out = d->out;
        d->z.avail_out = sizeof d->out;
        zrc = deflate(&d->z, flush);
        if (zrc == Z_STREAM_ERROR) {
            snprintf(err, err_size, "zlib failed");
            return -1;
        }
        size_t have = sizeof d->out - d->z.avail_out;
        if (have && write_all(d->fd, d->out, have, d->at, err, err_size)) return -1;
        d->at += (off_t)have;
    } while (d->z.avail_out == 0 || (flush == Z_FINISH && zrc != Z_STREAM_END));
    return 0;
}

int promptcache_write_fd(int fd, const promptcache_model *m, const int32_t *tokens, int32_t n, promptcache_kv_fn fn,
                         void *user, char *err, size_t err_size) {
    uint64_t payload = n >= 1 ? payload_bytes(m, (uint64_t)n) : 0;
    size_t row = (size_t)n * (size_t)(m->kv_dim > 0 ? m->kv_dim : 0);
    if (!payload || row > 0xffffffffu / sizeof(float)) {  /* one zlib call per K or V block */
        snprintf(err, err_size, "cannot cache %d tokens (context %d)", n, m->max_tokens);
        return -1;
    }
    deflater *d = calloc(1, sizeof *d);
    float *k = malloc(row * sizeof *k), *v = malloc(row * sizeof *v);
    uint8_t *ids = malloc((size_t)n * 4);
    int rc = -1;
    if (!d || !k || !v || !ids || deflateInit(&d->z, 6) != Z_OK) {
        snprintf(err, err_size, "out of memory");
        free(d);
        d = NULL;
        goto out;
    }
    d->fd = fd;
    d->at = PROMPTCACHE_HEADER;
    d->crc = crc32(0, NULL, 0);
    for (int32_t i = 0; i < n; i++) put32(ids + 4 * (size_t)i, (uint32_t)tokens[i]);
    if (deflate_put(d, ids, (size_t)n * 4, Z_NO_FLUSH, err, err_size)) goto out;
    for (int32_t l = 0; l < m->n_layer; l++) {
        if (fn(user, l, k, v, err, err_size) ||
            deflate_put(d, k, row * sizeof *k, Z_NO_FLUSH, err, err_size) ||
            deflate_put(d, v, row * sizeof *v, Z_NO_FLUSH, err, err_size))
            goto out;
    }
    if (deflate_put(d, NULL, 0, Z_FINISH, err, err_size)) goto out;
    uint8_t h[PROMPTCACHE_HEADER] = {0};
    memcpy(h, magic, sizeof magic);
    put32(h + 8, VERSION);
    put32(h + 12, PROMPTCACHE_HEADER);
    put64(h + 16, m->model_hash);
    put32(h + 24, (uint32_t)m->n_layer);
    put32(h + 28, (uint32_t)m->kv_dim);
    put32(h + 32, (uint32_t)n);
    put32(h + 36, 0);
    put64(h + 40, payload);
    put64(h + 48, (uint64_t)(d->at - PROMPTCACHE_HEADER));
    put32(h + 56, (uint32_t)d->crc);
    put32(h + 60, (uint32_t)crc32(0, h, 60));
    if (write_all(fd, h, sizeof h, 0, err, err_size)) goto out;
    if (ftruncate(fd, d->at)) {
        snprintf(err, err_size, "truncate failed: %s", strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (d) deflateEnd(&d->z);
    free(d);
    free(k);
    free(v);
    free(ids);
    return rc;
}

typedef struct {
    engine *e;
    int32_t seq, n;
} seq_src;

static int seq_kv(void *user, int32_t layer, float *k, float *v, char *err, size_t err_size) {
    seq_src *s = user;
    return engine_seq_kv_get(s->e, s->seq, layer, 0, s->n, k, v, err, err_size);
}

int promptcache_save(const char *path, engine *e, int32_t seq, const int32_t *tokens, int32_t n, char *err,
                     size_t err_size) {
    /* Only a regular file is replaced: the temporary file renamed over a device node, a FIFO or
     * a socket would destroy it (over /dev/full, the system's). A symbolic link is followed, so
     * the file it names is replaced and the link stays. */
    struct stat st;
    char *real = NULL;
    if (!lstat(path, &st) && S_ISLNK(st.st_mode)) {
        if (!(real = realpath(path, NULL)) || stat(real, &st)) {
            snprintf(err, err_size, "a symbolic link to nothing (%s): not replaced",
                     real ? strerror(errno) : "cannot resolve it");
            free(real);
            return -1;
        }
        path = real;
    }
    if (!lstat(path, &st) && !S_ISREG(st.st_mode)) {
        snprintf(err, err_size, "not a regular file: not replaced");
        free(real);
        return -1;
    }
    size_t len = strlen(path);
    char *tmp = malloc(len + 16);
    if (!tmp) {
        snprintf(err, err_size, "out of memory");
        free(real);
        return -1;
    }
    snprintf(tmp, len + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, err_size, "cannot create a temporary file next to it: %s", strerror(errno));
        free(tmp);
        free(real);
        return -1;
    }
    /* mkstemp makes the file 0600; a cache gets the mode a plain create would give it (should
     * this fail, 0600 is harmless). */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    promptcache_model m = promptcache_model_of(e);
    seq_src src = {e, seq, n};
    int rc = promptcache_write_fd(fd, &m, tokens, n, seq_kv, &src, err, err_size);
    if (!rc && fsync(fd)) {
        snprintf(err, err_size, "write failed: %s", strerror(errno));
        rc = -1;
    }
    if (close(fd) && !rc) {
        snprintf(err, err_size, "write failed: %s", strerror(errno));
        rc = -1;
    }
    if (!rc && rename(tmp, path)) {
        snprintf(err, err_size, "cannot rename the temporary file into place: %s", strerror(errno));
        rc = -1;
    }
    if (rc) unlink(tmp);
    free(tmp);
    free(real);
    return rc;
}

int promptcache_apply(engine *e, int32_t seq, const promptcache *pc, int32_t n, char *err, size_t err_size) {
    promptcache_model m = promptcache_model_of(e);
    if (n < 1 || n > pc->n_tokens) {
        snprintf(err, err_size, "cannot use %d of the cache's %d positions", n, pc->n_tokens);
        return -1;
    }
    if (engine_seq_alloc(e, seq, n, err, err_size)) return -1;
    size_t row = (size_t)pc->n_tokens * (size_t)m.kv_dim;
    for (int32_t l = 0; l < m.n_layer; l++) {
        const float *k = pc->kv + 2 * (size_t)l * row, *v = k + row;
        if (engine_seq_kv_set(e, seq, l, 0, n, k, v, err, err_size)) {
            engine_seq_free(e, seq);
            return -1;
        }
    }
    return 0;
}
