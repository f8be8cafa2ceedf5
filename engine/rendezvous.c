/* The rendezvous of engine/rendezvous.h: the environment read strictly, then a small TCP
 * exchange (rank 0 serves, the others join) in which every read and write has the job's deadline,
 * so a dead, silent or foreign peer ends every rank with one line naming it, never a hang. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engine/rendezvous.h"

#define HDR 32
#define RENDEZVOUS_GRACE_MS 1000
static const uint8_t magic[8] = {'m', 'g', 'i', '-', 'r', 'd', 'z', 'v'};

static const char *kind_names[] = {"?", "HELLO", "WELCOME", "REFUSE", "ARRIVED", "GO"};

static const char *kind_name(uint32_t k) { return k >= 1 && k <= RENDEZVOUS_GO ? kind_names[k] : kind_names[0]; }

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- the environment ------------------------------------------------------------------------ */

/* An integer variable in [lo, hi]: 1 with *out, 0 when unset, -1 with err naming it. */
static int env_long(const char *name, long lo, long hi, long *out, char *err, size_t err_size) {
    const char *s = getenv(name);
    if (!s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end) {
        snprintf(err, err_size, "%s='%.40s': not an integer", name, s);
        return -1;
    }
    if (v < lo || v > hi) {
        snprintf(err, err_size, "%s=%ld: out of range (%ld..%ld)", name, v, lo, hi);
        return -1;
    }
    *out = v;
    return 1;
}

int rendezvous_parse_addr(const char *addr, char *host, size_t host_size, int *port, char *err, size_t err_size) {
    const char *colon = strrchr(addr, ':'), *h = addr, *h_end = colon;
    if (addr[0] == '[') {  /* [v6]:port */
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':') {
            snprintf(err, err_size, "MGI_ADDR='%.80s': an IPv6 address is written [ADDR]:PORT, e.g. [::1]:29500", addr);
            return -1;
        }
        h = addr + 1;
        h_end = close;
        colon = close + 1;
    } else if (colon && memchr(addr, ':', (size_t)(colon - addr))) {
        snprintf(err, err_size, "MGI_ADDR='%.80s': an IPv6 address needs brackets: [ADDR]:PORT", addr);
        return -1;
    }
    if (!colon || h_end == h) {
        snprintf(err, err_size, "MGI_ADDR='%.80s': want HOST:PORT (rank 0's address), e.g. 10.0.0.1:29500", addr);
        return -1;
    }
    if ((size_t)(h_end - h) >= host_size) {
        snprintf(err, err_size, "MGI_ADDR: the host is %zu characters, at most %zu", (size_t)(h_end - h), host_size - 1);
        return -1;
    }
    char *end;
    errno = 0;
    long p = colon[1] >= '0' && colon[1] <= '9' ? strtol(colon + 1, &end, 10) : -1;
    if (p < 0 || errno || *end || p < 1 || p > 65535) {
        snprintf(err, err_size, "MGI_ADDR='%.80s': port '%.20s' is not a number in 1..65535", addr, colon + 1);
        return -1;
    }
    memcpy(host, h, (size_t)(h_end - h));
    host[h_end - h] = 0;
    *port = (int)p;
    return 0;
}

int rendezvous_from_env(rendezvous_config *c, char *err, size_t err_size) {
    memset(c, 0, sizeof *c);
    const char *addr = getenv("MGI_ADDR");
    const char *rank_var = "MGI_RANK", *world_var = "MGI_WORLD";
    int mgi = getenv(rank_var) || getenv(world_var);
    int ompi = getenv("OMPI_COMM_WORLD_RANK") || getenv("OMPI_COMM_WORLD_SIZE");
    if (!mgi && ompi) {
        rank_var = "OMPI_COMM_WORLD_RANK";
        world_var = "OMPI_COMM_WORLD_SIZE";
    }
    long rank = 0, world = 0, timeout = RENDEZVOUS_TIMEOUT_S;
    int hr = mgi || ompi ? env_long(rank_var, 0, RENDEZVOUS_MAX_WORLD - 1, &rank, err, err_size) : 0;
    int hw = mgi || ompi ? env_long(world_var, 1, RENDEZVOUS_MAX_WORLD, &world, err, err_size) : 0;
    if (hr < 0 || hw < 0) return -1;
    if (!mgi && !ompi) {
        if (addr) {
            snprintf(err, err_size, "MGI_ADDR='%.80s' is set, but neither MGI_RANK and MGI_WORLD nor mpirun's "
                     "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE are; set MGI_RANK and MGI_WORLD on every process",
                     addr);
            return -1;
        }
        return 0;
    }
    if (!hr || !hw) {
        snprintf(err, err_size, "%s is set but %s is not; set both (and MGI_ADDR)", hr ? rank_var : world_var,
                 hr ? world_var : rank_var);
        return -1;
    }
    if (!addr) {
        if (!mgi && world == 1) return 0;  /* mpirun -np 1: one process, nothing to meet */
        snprintf(err, err_size, "%s=%ld: a job of %ld process%s needs MGI_ADDR, rank 0's HOST:PORT (e.g. "
                 "MGI_ADDR=10.0.0.1:29500)", world_var, world, world, world == 1 ? "" : "es");
        return -1;
    }
    if (rank >= world) {
        snprintf(err, err_size, "%s=%ld: out of range for %s=%ld (ranks 0..%ld)", rank_var, rank, world_var, world,
                 world - 1);
        return -1;
    }
    if (rendezvous_parse_addr(addr, c->host, sizeof c->host, &c->port, err, err_size)) return -1;
    if (env_long("MGI_NCCL_TIMEOUT", 1, 3600, &timeout, err, err_size) < 0) return -1;
    c->rank = (int)rank;
    c->world = (int)world;
    c->timeout_ms = (int)timeout * 1000;
    return 1;
}

int rendezvous_check_world(const rendezvous_config *c, int plan_devices, char *err, size_t err_size) {
    if (c->world == plan_devices) return 0;
    snprintf(err, err_size, "MGI_WORLD=%d: the plan uses %d device%s, and one process per GPU needs MGI_WORLD=%d; "
             "start that many processes or give each -dev/--layer-split for %d devices", c->world, plan_devices,
             plan_devices == 1 ? "" : "s", plan_devices, c->world);
    return -1;
}

uint64_t rendezvous_hash(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    if (!h) h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* --- messages -------------------------------------------------------------------------------- */

typedef struct {
    uint32_t version, kind, rank, world;
    uint64_t hash;
} header;

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void encode(uint8_t *b, uint32_t kind, uint32_t rank, uint32_t world, uint64_t hash) {
    memcpy(b, magic, 8);
    put32(b + 8, RENDEZVOUS_VERSION);
    put32(b + 12, kind);
    put32(b + 16, rank);
    put32(b + 20, world);
    put32(b + 24, (uint32_t)hash);
    put32(b + 28, (uint32_t)(hash >> 32));
}

/* 0, or -1 when the bytes are not a rendezvous header at all (another program on the port). */
static int decode(const uint8_t *b, header *h) {
    if (memcmp(b, magic, 8)) return -1;
    h->version = get32(b + 8);
    h->kind = get32(b + 12);
    h->rank = get32(b + 16);
    h->world = get32(b + 20);
    h->hash = (uint64_t)get32(b + 24) | (uint64_t)get32(b + 28) << 32;
    return 0;
}

/* The first bytes of something that is not ours, for the message: printable ones as they are. */
static void show_bytes(const uint8_t *b, size_t n, char *out, size_t size) {
    size_t at = 0;
    for (size_t i = 0; i < n && i < 8 && at + 5 < size; i++)
        at += (size_t)snprintf(out + at, size - at, b[i] >= 0x20 && b[i] < 0x7f ? "%c" : "\\x%02x", b[i]);
    out[at < size ? at : size - 1] = 0;
}

/* Writes n bytes by the deadline: 0, or -1 (errno set; ETIMEDOUT past the deadline). */
static int send_all(int fd, const uint8_t *b, size_t n, int64_t deadline) {
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            b += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        int64_t left = deadline - now_ms();
        if (left <= 0) { errno = ETIMEDOUT; return -1; }
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR) return -1;
    }
    return 0;
}

/* Reads n bytes by the deadline: 0; 1 at the end of the stream; -1 (errno set; ETIMEDOUT). */
static int recv_all(int fd, uint8_t *b, size_t n, int64_t deadline) {
    while (n) {
        ssize_t r = recv(fd, b, n, MSG_DONTWAIT);
        if (r > 0) {
            b += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0) return 1;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        int64_t left = deadline - now_ms();
        if (left <= 0) { errno = ETIMEDOUT; return -1; }
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR) return -1;
    }
    return 0;
}

/* --- rank 0 ---------------------------------------------------------------------------------- */

int rendezvous_listen(const char *host, int port, int *bound_port, char *err, size_t err_size) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g) {
        snprintf(err, err_size, "MGI_ADDR %.80s:%d: cannot resolve the host (%s)", host, port, gai_strerror(g));
        return -1;
    }
    int fd = -1, why = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) { why = errno; continue; }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 128)) {
            why = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        snprintf(err, err_size, "MGI_ADDR %.80s:%d: rank 0 cannot listen there (%s); MGI_ADDR must be an address of "
                 "rank 0's own host and a free port", host, port, strerror(why));
        return -1;
    }
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (bound_port && !getsockname(fd, (struct sockaddr *)&sa, &len))
        *bound_port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                     : ((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

typedef struct {
    int fd;
    int rank;            /* -1 until a HELLO is accepted */
    int garbage;         /* sent bytes that are not ours: not answered */
    int arrived;
    size_t got;
    uint8_t buf[HDR];
    char peer[64];       /* its address:port, for messages */
} conn;

static void peer_text(const struct sockaddr_storage *sa, char *out, size_t size) {
    char a[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s->sin_addr, a, sizeof a);
        port = ntohs(s->sin_port);
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof a);
        port = ntohs(s->sin6_port);
    }
    snprintf(out, size, "%s:%d", a, port);
}

/* The ranks in [1, world) without flag set in seen[], as "2,3" (at most a line's worth). */
static void missing_ranks(const int *seen, int world, char *out, size_t size) {
    size_t at = 0;
    int n = 0;
    out[0] = 0;
    for (int r = 1; r < world && at + 16 < size; r++)
        if (!seen[r]) at += (size_t)snprintf(out + at, size - at, "%s%d", n++ ? "," : "", r);
}

/* A HELLO checked against rank 0's own view: 0, or -1 with err. */
static int check_hello(const header *h, const conn *c, const int *by_rank, const conn *cs,
                       const rendezvous_config *cfg, uint64_t hash, char *err, size_t err_size) {
    if (h->version != RENDEZVOUS_VERSION) {
        snprintf(err, err_size, "rendezvous: the peer at %s speaks protocol version %u, rank 0 version %d; run the "
                 "same mgi build on every rank", c->peer, h->version, RENDEZVOUS_VERSION);
        return -1;
    }
    if (h->kind != RENDEZVOUS_HELLO) {
        snprintf(err, err_size, "rendezvous: the peer at %s sent %s before HELLO", c->peer, kind_name(h->kind));
        return -1;
    }
    if (h->world != (uint32_t)cfg->world) {
        snprintf(err, err_size, "MGI_WORLD: rank %u (at %s) says %u, rank 0 says %d; give every rank the same "
                 "MGI_WORLD", h->rank, c->peer, h->world, cfg->world);
        return -1;
    }
    if (h->rank < 1 || h->rank >= (uint32_t)cfg->world) {
        snprintf(err, err_size, "MGI_RANK: the peer at %s says rank %u, outside 1..%d for MGI_WORLD=%d (rank 0 is "
                 "this process)", c->peer, h->rank, cfg->world - 1, cfg->world);
        return -1;
    }
    if (by_rank[h->rank] >= 0) {
        snprintf(err, err_size, "MGI_RANK: rank %u connected twice (from %s and %s); give each process its own "
                 "MGI_RANK", h->rank, cs[by_rank[h->rank]].peer, c->peer);
        return -1;
    }
    if (h->hash != hash) {
        snprintf(err, err_size, "rendezvous: rank %u (at %s) has model/plan hash %016llx, rank 0 %016llx; run every "
                 "rank with the same model file and split flags", h->rank, c->peer, (unsigned long long)h->hash,
                 (unsigned long long)hash);
        return -1;
    }
    return 0;
}

int rendezvous_serve(int listen_fd, const rendezvous_config *cfg, uint64_t hash,
                     const uint8_t blob[RENDEZVOUS_BLOB_BYTES], char *err, size_t err_size) {
    if (cfg->world < 1 || cfg->world > RENDEZVOUS_MAX_WORLD || cfg->rank != 0) {
        snprintf(err, err_size, "rendezvous: rank %d of a world of %d cannot serve (rank 0 of 1..%d does)", cfg->rank,
                 cfg->world, RENDEZVOUS_MAX_WORLD);
        return -1;
    }
    int world = cfg->world, need = world - 1;
    if (!need) return 0;
    /* Room for every rank and a few strays (a port probe, a rank's retry) at once. */
    int cap = need + 16, n = 0, n_hello = 0, n_arrived = 0, rc = -1;
    conn *cs = calloc((size_t)cap, sizeof *cs);
    int *by_rank = malloc((size_t)world * sizeof *by_rank), *seen = calloc((size_t)world, sizeof *seen);
    struct pollfd *pf = calloc((size_t)cap + 1, sizeof *pf);
    if (!cs || !by_rank || !seen || !pf) {
        snprintf(err, err_size, "rendezvous: out of memory for %d ranks", world);
        goto out;
    }
    for (int r = 0; r < world; r++) by_rank[r] = -1;
    int64_t start = now_ms(), deadline = start + cfg->timeout_ms;
    while (n_arrived < need) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            char miss[256];
            for (int r = 0; r < world; r++) seen[r] = n_hello < need ? by_rank[r] >= 0 : by_rank[r] >= 0 && cs[by_rank[r]].arrived;
            missing_ranks(seen, world, miss, sizeof miss);
            snprintf(err, err_size, "MGI_NCCL_TIMEOUT: after %.1f s, rank%s %s of MGI_WORLD=%d had not %s at MGI_ADDR "
                     "%s:%d; start every rank, check MGI_ADDR, or raise MGI_NCCL_TIMEOUT", cfg->timeout_ms / 1000.0,
                     strchr(miss, ',') ? "s" : "", miss, world, n_hello < need ? "arrived" : "confirmed the id",
                     cfg->host, cfg->port);
            goto out;
        }
        int np = 0, listening = n < cap && n_hello < need;
        if (listening) pf[np++] = (struct pollfd){listen_fd, POLLIN, 0};
        for (int i = 0; i < n; i++) pf[np++] = (struct pollfd){cs[i].fd, POLLIN, 0};
        int pr = poll(pf, (nfds_t)np, (int)left);
        if (pr < 0 && errno != EINTR) {
            snprintf(err, err_size, "rendezvous: poll: %s", strerror(errno));
            goto out;
        }
        if (pr <= 0) continue;
        if (listening && pf[0].revents) {
            struct sockaddr_storage sa;
            socklen_t len = sizeof sa;
            int fd = accept4(listen_fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0) {
                cs[n] = (conn){.fd = fd, .rank = -1};
                peer_text(&sa, cs[n].peer, sizeof cs[n].peer);
                n++;
            }
        }
        for (int i = 0, k = listening; i < n; i++, k++) {
            conn *c = &cs[i];
            if (k >= np || !pf[k].revents) continue;
            ssize_t r = recv(c->fd, c->buf + c->got, HDR - c->got, MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
            if (r <= 0) {
                if (c->rank < 0) {  /* a stray (or a rank that gave up) before saying who it is: forget it */
                    close(c->fd);
                    c->fd = -1;
                    continue;
                }
                snprintf(err, err_size, "rendezvous: rank %d (at %s) closed its connection %s (%s); its own error says "
                         "why", c->rank, c->peer, c->arrived ? "after it had the id" : "before confirming the id",
                         r == 0 ? "end of stream" : strerror(errno));
                goto out;
            }
            c->got += (size_t)r;
            if (c->got < HDR) continue;
            c->got = 0;
            header h;
            if (decode(c->buf, &h)) {
                char shown[64];
                show_bytes(c->buf, HDR, shown, sizeof shown);
                snprintf(err, err_size, "MGI_ADDR %s:%d: the peer at %s sent something that is not mgi's rendezvous "
                         "(\"%s...\"); is another program using the port?", cfg->host, cfg->port, c->peer, shown);
                c->garbage = 1;
                goto out;
            }
            if (c->rank < 0) {
                if (check_hello(&h, c, by_rank, cs, cfg, hash, err, err_size)) goto out;
                c->rank = (int)h.rank;
                by_rank[c->rank] = i;
                if (++n_hello == need) {
                    /* Everyone is here: the blob to each. */
                    uint8_t msg[HDR + RENDEZVOUS_BLOB_BYTES];
                    memcpy(msg + HDR, blob, RENDEZVOUS_BLOB_BYTES);
                    for (int j = 0; j < n; j++) {
                        if (cs[j].rank < 0) continue;
                        encode(msg, RENDEZVOUS_WELCOME, (uint32_t)cs[j].rank, (uint32_t)world, hash);
                        if (send_all(cs[j].fd, msg, sizeof msg, deadline)) {
                            snprintf(err, err_size, "rendezvous: sending the id to rank %d (at %s): %s", cs[j].rank,
                                     cs[j].peer, strerror(errno));
                            goto out;
                        }
                    }
                }
            } else if (h.version != RENDEZVOUS_VERSION || h.kind != RENDEZVOUS_ARRIVED || c->arrived ||
                       h.rank != (uint32_t)c->rank || h.world != (uint32_t)world || h.hash != hash) {
                snprintf(err, err_size, "rendezvous: rank %d (at %s) sent %s (rank %u, world %u) where ARRIVED from "
                         "rank %d of %d was due", c->rank, c->peer, kind_name(h.kind), h.rank, h.world, c->rank,
                         world);
                goto out;
            } else {
                c->arrived = 1;
                n_arrived++;
            }
        }
        /* Close the gaps that forgotten strays left. */
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (cs[i].fd < 0) continue;
            if (cs[i].rank >= 0) by_rank[cs[i].rank] = m;
            cs[m++] = cs[i];
        }
        n = m;
    }
    /* Every rank has the id: GO, so that each knows the others have it too. */
    for (int j = 0; j < n; j++) {
        uint8_t msg[HDR];
        if (cs[j].rank < 0) continue;
        encode(msg, RENDEZVOUS_GO, (uint32_t)cs[j].rank, (uint32_t)world, hash);
        if (send_all(cs[j].fd, msg, sizeof msg, deadline)) {
            snprintf(err, err_size, "rendezvous: sending GO to rank %d (at %s): %s", cs[j].rank, cs[j].peer,
                     strerror(errno));
            goto out;
        }
    }
    rc = 0;
out:
    if (rc && cs) {
        /* Ranks still in the listen queue are told as well, rather than reset by the close. */
        struct pollfd lp = {listen_fd, POLLIN, 0};
        while (n < cap && poll(&lp, 1, 0) == 1) {
            int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) break;
            cs[n++] = (conn){.fd = fd, .rank = -1};
        }
        /* Tell every connected peer (but one that sent garbage) why rank 0 gives up, at once, so
         * that none waits for its deadline; a rank whose HELLO is still unread is told too. */
        uint8_t msg[HDR + RENDEZVOUS_REASON_BYTES] = {0};
        snprintf((char *)msg + HDR, RENDEZVOUS_REASON_BYTES, "%s", err);
        for (int j = 0; j < n; j++)
            if (cs[j].fd >= 0 && !cs[j].garbage) {
                encode(msg, RENDEZVOUS_REFUSE, cs[j].rank < 0 ? 0 : (uint32_t)cs[j].rank, (uint32_t)world, hash);
                (void)send_all(cs[j].fd, msg, sizeof msg, now_ms() + 200);
            }
    }
    if (cs && rc) {
        /* Input that arrives after close() (a HELLO still on its way) makes the kernel reset the
         * connection, and a reset can drop the REFUSE before the peer reads it: end our side,
         * then read until each peer closes, half a second at most. */
        int64_t until = now_ms() + 500;
        int open_n = 0;
        for (int j = 0; j < n; j++)
            if (cs[j].fd >= 0) {
                shutdown(cs[j].fd, SHUT_WR);
                open_n++;
            }
        while (open_n && now_ms() < until) {
            int np = 0;
            for (int j = 0; j < n; j++)
                if (cs[j].fd >= 0) pf[np++] = (struct pollfd){cs[j].fd, POLLIN, 0};
            if (poll(pf, (nfds_t)np, (int)(until - now_ms())) <= 0) break;
            for (int j = 0, k = 0; j < n; j++) {
                if (cs[j].fd < 0) continue;
                uint8_t sink[256];
                ssize_t r = pf[k++].revents ? recv(cs[j].fd, sink, sizeof sink, MSG_DONTWAIT) : 1;
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                    close(cs[j].fd);
                    cs[j].fd = -1;
                    open_n--;
                }
            }
        }
    }
    if (cs)
        for (int j = 0; j < n; j++)
            if (cs[j].fd >= 0) close(cs[j].fd);
    free(cs);
    free(by_rank);
    free(seen);
    free(pf);
    return rc;
}

/* --- the other ranks ------------------------------------------------------------------------- */

/* A connected socket to host:port, retrying while nobody listens, until the deadline; -1 with err. */
static int connect_until(const rendezvous_config *c, int64_t deadline, char *err, size_t err_size) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", c->port);
    int g = getaddrinfo(c->host, ps, &hints, &ai);
    if (g) {
        snprintf(err, err_size, "MGI_ADDR %.80s:%d: cannot resolve the host (%s)", c->host, c->port, gai_strerror(g));
        return -1;
    }
    int why = ETIMEDOUT, tries = 0;
    while (now_ms() < deadline) {
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) { why = errno; continue; }
            tries++;
            int r = connect(fd, a->ai_addr, a->ai_addrlen);
            if (r && errno == EINPROGRESS) {
                /* A host that drops the SYN answers nothing: give each try a second at most. */
                int64_t left = deadline - now_ms();
                struct pollfd p = {fd, POLLOUT, 0};
                int soerr = ETIMEDOUT;
                socklen_t len = sizeof soerr;
                if (left > 0 && poll(&p, 1, left < 1000 ? (int)left : 1000) == 1)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
                r = soerr ? -1 : 0;
                errno = soerr;
            }
            if (!r) {
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                freeaddrinfo(ai);
                return fd;
            }
            why = errno;
            close(fd);
        }
        int64_t left = deadline - now_ms();
        struct timespec ts = {0, (left < 50 ? (left > 0 ? left : 0) : 50) * 1000000L};
        nanosleep(&ts, NULL);
    }
    freeaddrinfo(ai);
    snprintf(err, err_size, "MGI_ADDR %.80s:%d: rank %d could not reach rank 0 within MGI_NCCL_TIMEOUT's %.1f s (%d "
             "tries, last: %s); start rank 0 there, check MGI_ADDR, or raise MGI_NCCL_TIMEOUT", c->host, c->port,
             c->rank, c->timeout_ms / 1000.0, tries, strerror(why));
    return -1;
}

/* Reads one message of rank 0 for this rank: 0 with *h (and the payload when it has one), or -1
 * with err; a REFUSE is -1 with rank 0's reason. */
static int read_reply(int fd, const rendezvous_config *c, uint64_t hash, uint32_t want, header *h,
                      uint8_t payload[RENDEZVOUS_BLOB_BYTES], int64_t deadline, char *err, size_t err_size) {
    uint8_t b[HDR];
    const char *waiting = want == RENDEZVOUS_WELCOME ? "for the id" : "for GO (every rank has the id)";
    int r = recv_all(fd, b, HDR, deadline);
    if (!r && decode(b, h)) {
        char shown[64];
        show_bytes(b, HDR, shown, sizeof shown);
        snprintf(err, err_size, "MGI_ADDR %s:%d: the answer is not mgi's rendezvous (\"%s...\"); is MGI_ADDR rank 0's "
                 "port?", c->host, c->port, shown);
        return -1;
    }
    char reason[RENDEZVOUS_REASON_BYTES];
    if (!r && h->kind == RENDEZVOUS_WELCOME) r = recv_all(fd, payload, RENDEZVOUS_BLOB_BYTES, deadline);
    if (!r && h->kind == RENDEZVOUS_REFUSE) r = recv_all(fd, (uint8_t *)reason, sizeof reason, deadline);
    if (r) {
        if (r > 0 || errno != ETIMEDOUT)
            snprintf(err, err_size, "MGI_ADDR %s:%d: rank 0 closed the connection while rank %d waited %s (%s); rank "
                     "0's own error says why", c->host, c->port, c->rank, waiting, r > 0 ? "end of stream" : strerror(errno));
        else
            snprintf(err, err_size, "MGI_NCCL_TIMEOUT: rank %d waited %.1f s %s from rank 0 at MGI_ADDR %s:%d; start "
                     "every rank, or raise MGI_NCCL_TIMEOUT", c->rank, (c->timeout_ms + RENDEZVOUS_GRACE_MS) / 1000.0,
                     waiting, c->host, c->port);
        return -1;
    }
    if (h->version != RENDEZVOUS_VERSION) {
        snprintf(err, err_size, "MGI_ADDR %s:%d: rank 0 speaks protocol version %u, rank %d version %d; run the same "
                 "mgi build on every rank", c->host, c->port, h->version, c->rank, RENDEZVOUS_VERSION);
        return -1;
    }
    if (h->kind == RENDEZVOUS_REFUSE) {
        reason[sizeof reason - 1] = 0;
        for (char *q = reason; *q; q++)
            if (*q == '\n' || *q == '\r') *q = ' ';  /* one line, whatever the peer sent */
        snprintf(err, err_size, "rank 0 refused rank %d: %s", c->rank, reason);
        return -1;
    }
    if (h->kind != want || h->rank != (uint32_t)c->rank || h->world != (uint32_t)c->world || h->hash != hash) {
        snprintf(err, err_size, "MGI_ADDR %s:%d: rank 0 sent %s for rank %u of %u where %s for rank %d of %d was due",
                 c->host, c->port, kind_name(h->kind), h->rank, h->world, kind_name(want), c->rank, c->world);
        return -1;
    }
    return 0;
}

int rendezvous_join(const rendezvous_config *c, uint64_t hash, uint8_t blob[RENDEZVOUS_BLOB_BYTES], char *err,
                    size_t err_size) {
    if (c->world < 2 || c->world > RENDEZVOUS_MAX_WORLD || c->rank < 1 || c->rank >= c->world) {
        snprintf(err, err_size, "MGI_RANK=%d: out of range for MGI_WORLD=%d (ranks 1..%d join rank 0)", c->rank,
                 c->world, c->world - 1);
        return -1;
    }
    int64_t deadline = now_ms() + c->timeout_ms;
    int fd = connect_until(c, deadline, err, err_size);
    if (fd < 0) return -1;
    /* Rank 0 ends the job at its own deadline and says why (the missing ranks); wait a little
     * longer than it for that answer, so that the reason reaches every rank. */
    deadline += RENDEZVOUS_GRACE_MS;
    uint8_t msg[HDR], payload[RENDEZVOUS_BLOB_BYTES];
    header h;
    int rc = -1;
    encode(msg, RENDEZVOUS_HELLO, (uint32_t)c->rank, (uint32_t)c->world, hash);
    if (send_all(fd, msg, HDR, deadline)) {
        snprintf(err, err_size, "MGI_ADDR %s:%d: rank %d could not say HELLO: %s", c->host, c->port, c->rank,
                 strerror(errno));
        goto out;
    }
    if (read_reply(fd, c, hash, RENDEZVOUS_WELCOME, &h, payload, deadline, err, err_size)) goto out;
    encode(msg, RENDEZVOUS_ARRIVED, (uint32_t)c->rank, (uint32_t)c->world, hash);
    if (send_all(fd, msg, HDR, deadline)) {
        snprintf(err, err_size, "MGI_ADDR %s:%d: rank %d could not confirm the id: %s", c->host, c->port, c->rank,
                 strerror(errno));
        goto out;
    }
    uint8_t ignore[RENDEZVOUS_BLOB_BYTES];
    if (read_reply(fd, c, hash, RENDEZVOUS_GO, &h, ignore, deadline, err, err_size)) goto out;
    memcpy(blob, payload, RENDEZVOUS_BLOB_BYTES);
    rc = 0;
out:
    close(fd);
    return rc;
}

int rendezvous_exchange(const rendezvous_config *c, uint64_t hash, uint8_t blob[RENDEZVOUS_BLOB_BYTES], char *err,
                        size_t err_size) {
    if (c->world < 1 || c->world > RENDEZVOUS_MAX_WORLD || c->rank < 0 || c->rank >= c->world) {
        snprintf(err, err_size, "MGI_RANK=%d: out of range for MGI_WORLD=%d (ranks 0..%d)", c->rank, c->world,
                 c->world - 1);
        return -1;
    }
    if (c->world == 1) return 0;
    if (c->rank) return rendezvous_join(c, hash, blob, err, err_size);
    int fd = rendezvous_listen(c->host, c->port, NULL, err, err_size);
    if (fd < 0) return -1;
    int rc = rendezvous_serve(fd, c, hash, blob, err, err_size);
    close(fd);
    return rc;
}
