/* engine/rendezvous on the loopback: 2 to 4 forked processes exchange the 128-byte id and all
 * end with rank 0's bytes; every bad input (environment, address, world, rank, hash, a foreign or
 * dying peer, a silent one, an unreachable rank 0) ends every process with one line naming it,
 * within the timeout. A job that outlives its bound is killed and fails the test. No GPU needed. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "engine/rendezvous.h"
#include "test.h"

#define MAXR 6
#define TIMEOUT_MS 1500  /* each job's rendezvous deadline */
#define BOUND_MS 6000    /* a job still running after this hangs: killed, and the test fails */

enum {
    SERVE,        /* rank 0 */
    JOIN,         /* ranks 1.. */
    RAW_HELLO,    /* a hand-written HELLO (version, rank, world as given), then waits for the end */
    RAW_DIE,      /* a valid HELLO, then exits at once: a peer dying mid-exchange */
    RAW_GARBAGE,  /* 32 bytes of HTTP */
    RAW_SILENT,   /* connects and says nothing */
    FAKE_GARBAGE, /* in rank 0's place: reads a HELLO and answers HTTP */
    FAKE_DIE,     /* in rank 0's place: reads a HELLO and exits */
};

typedef struct {
    int role, rank, world, version;
    uint64_t hash;
    int delay_ms;  /* before it starts: the offender of a test comes after the others are in */
} spec;

typedef struct {
    int rc;
    uint8_t blob[RENDEZVOUS_BLOB_BYTES];
    char err[512];
} result;

static uint8_t the_blob[RENDEZVOUS_BLOB_BYTES];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A header as rendezvous.h documents the wire, written by hand. */
static void header(uint8_t *b, uint32_t version, uint32_t kind, uint32_t rank, uint32_t world, uint64_t hash) {
    memcpy(b, "mgi-rdzv", 8);
    put32(b + 8, version);
    put32(b + 12, kind);
    put32(b + 16, rank);
    put32(b + 20, world);
    put32(b + 24, (uint32_t)hash);
    put32(b + 28, (uint32_t)(hash >> 32));
}

static int raw_connect(int port) {
    for (int i = 0; i < 100; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (!connect(fd, (struct sockaddr *)&a, sizeof a)) return fd;
        close(fd);
        usleep(20000);
    }
    return -1;
}

/* Reads until the other side closes (or the bound), so a raw peer stays for the whole exchange. */
static void drain(int fd) {
    char b[256];
    struct pollfd p = {fd, POLLIN, 0};
    while (poll(&p, 1, BOUND_MS) == 1 && read(fd, b, sizeof b) > 0) {}
}

static void child(const spec *s, int listen_fd, int port, result *r) {
    rendezvous_config c = {.rank = s->rank, .world = s->world, .port = port, .timeout_ms = TIMEOUT_MS};
    snprintf(c.host, sizeof c.host, "127.0.0.1");
    uint8_t b[RENDEZVOUS_BLOB_BYTES + 32];
    int fd;
    if (s->role != SERVE && s->role != FAKE_GARBAGE && s->role != FAKE_DIE) close(listen_fd);  /* rank 0's alone */
    if (s->delay_ms) usleep((useconds_t)s->delay_ms * 1000);
    switch (s->role) {
    case SERVE: r->rc = rendezvous_serve(listen_fd, &c, s->hash, the_blob, r->err, sizeof r->err); break;
    case JOIN: r->rc = rendezvous_join(&c, s->hash, r->blob, r->err, sizeof r->err); break;
    case RAW_HELLO:
    case RAW_DIE:
    case RAW_GARBAGE:
    case RAW_SILENT:
        usleep(200000);  /* after the real ranks, so that they are connected when rank 0 gives up */
        if ((fd = raw_connect(port)) < 0) { r->rc = -2; snprintf(r->err, sizeof r->err, "raw connect failed"); break; }
        if (s->role == RAW_GARBAGE) memcpy(b, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", 32);
        else header(b, s->version ? (uint32_t)s->version : RENDEZVOUS_VERSION, RENDEZVOUS_HELLO, (uint32_t)s->rank,
                    (uint32_t)s->world, s->hash);
        if (s->role != RAW_SILENT && write(fd, b, 32) != 32) r->rc = -2;
        if (s->role != RAW_DIE) drain(fd);
        close(fd);
        break;
    case FAKE_GARBAGE:
    case FAKE_DIE:
        fd = accept(listen_fd, NULL, NULL);
        if (fd >= 0 && read(fd, b, 32) > 0 && s->role == FAKE_GARBAGE) {
            memset(b, 'x', sizeof b);
            memcpy(b, "HTTP/1.1 400 Bad Request\r\n", 26);
            if (write(fd, b, sizeof b) < 0) r->rc = -2;
            drain(fd);
        }
        if (fd >= 0) close(fd);
        break;
    }
}

/* Runs one process per spec on a fresh loopback port (rank 0's listener made first, so the port
 * is known); fills res[] and returns the seconds the slowest took. A process past BOUND_MS is
 * killed and reported as hung (rc -9). */
static double run_job(int n, const spec *s, result *res) {
    char err[256];
    int port = 0, lfd = rendezvous_listen("127.0.0.1", 0, &port, err, sizeof err);
    pid_t pid[MAXR];
    int pipes[MAXR];
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        int p[2];
        memset(&res[i], 0, sizeof res[i]);
        if (lfd < 0 || pipe(p)) { res[i].rc = -3; snprintf(res[i].err, sizeof res[i].err, "setup: %s", err); pid[i] = -1; pipes[i] = -1; continue; }
        fflush(stdout);
        pid[i] = fork();
        if (pid[i] == 0) {
            close(p[0]);
            result r = {0};
            child(&s[i], lfd, port, &r);
            if (write(p[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
            _exit(0);
        }
        close(p[1]);
        pipes[i] = p[0];
    }
    if (lfd >= 0) close(lfd);
    for (int i = 0; i < n; i++) {
        if (pipes[i] < 0) continue;
        size_t got = 0;
        while (got < sizeof res[i]) {
            int left = BOUND_MS - (int)((now_s() - t0) * 1000);
            struct pollfd p = {pipes[i], POLLIN, 0};
            if (left <= 0 || poll(&p, 1, left) != 1) break;
            ssize_t r = read(pipes[i], (char *)&res[i] + got, sizeof res[i] - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (got < sizeof res[i]) {
            kill(pid[i], SIGKILL);  /* hung or dead: never left behind */
            memset(&res[i], 0, sizeof res[i]);
            res[i].rc = -9;
            snprintf(res[i].err, sizeof res[i].err, "no result within %d ms (killed)", BOUND_MS);
        }
        close(pipes[i]);
    }
    for (int i = 0; i < n; i++)
        if (pid[i] > 0) waitpid(pid[i], NULL, 0);
    return now_s() - t0;
}

static void test_exchange(void) {
    for (int n = 2; n <= 4; n++) {
        spec s[MAXR];
        result r[MAXR];
        for (int i = 0; i < n; i++) s[i] = (spec){i ? JOIN : SERVE, i, n, 0, 0x1234abcd5678ull, 0};
        double t = run_job(n, s, r);
        int ok = r[0].rc == 0, same = 1;
        for (int i = 1; i < n; i++) {
            ok &= r[i].rc == 0;
            same &= !memcmp(r[i].blob, the_blob, sizeof the_blob);
        }
        char name[64];
        snprintf(name, sizeof name, "rendezvous_%d_ranks", n);
        CHECK(ok && same && t < 2.0, name, "rc %d/%d/%d, same %d, %.2f s: %s | %s", r[0].rc, r[1].rc, r[n - 1].rc, same,
              t, r[0].err, r[n - 1].err);
    }
    /* The order of arrival does not matter: the ranks started in reverse, rank 0 last. */
    spec s[3] = {{JOIN, 2, 3, 0, 7, 0}, {JOIN, 1, 3, 0, 7, 0}, {SERVE, 0, 3, 0, 7, 0}};
    result r[3];
    run_job(3, s, r);
    CHECK(r[0].rc == 0 && r[1].rc == 0 && r[2].rc == 0 && !memcmp(r[0].blob, the_blob, sizeof the_blob),
          "rendezvous_rank0_last", "%d %d %d: %s", r[0].rc, r[1].rc, r[2].rc, r[0].err);
}

/* One job that must fail: rank 0 and every other process named in `who` end with an error
 * containing `want` (rank 0's) within the timeout and a margin. */
static void expect_fail(const char *name, int n, const spec *s, const char *want0, const char *want_peers) {
    result r[MAXR];
    double t = run_job(n, s, r);
    int ok = t < TIMEOUT_MS / 1000.0 + 1.5;
    char why[1400] = "";
    for (int i = 0; i < n; i++) {
        const char *want = s[i].role == SERVE ? want0 : s[i].role == JOIN ? want_peers : NULL;
        if (r[i].rc == -9) ok = 0;
        if (!want) continue;
        if (r[i].rc != -1 || !strstr(r[i].err, want) || strchr(r[i].err, '\n')) ok = 0;
        size_t at = strlen(why);
        snprintf(why + at, sizeof why - at, " [%d rc %d: %s]", i, r[i].rc, r[i].err);
    }
    CHECK(ok, name, "%.2f s%s", t, why);
}

static void test_refusals(void) {
    const uint64_t H = 42;
    expect_fail("rendezvous_world_mismatch", 3,
                (spec[]){{SERVE, 0, 3, 0, H, 0}, {JOIN, 1, 3, 0, H, 0}, {JOIN, 2, 4, 0, H, 200}},
                "MGI_WORLD: rank 2 (at 127.0.0.1:", "says 4, rank 0 says 3; give every rank the same MGI_WORLD");
    expect_fail("rendezvous_hash_mismatch", 2, (spec[]){{SERVE, 0, 2, 0, H, 0}, {JOIN, 1, 2, 0, H + 1, 0}},
                "rendezvous: rank 1 (at 127.0.0.1:", "has model/plan hash 000000000000002b, rank 0 000000000000002a");
    expect_fail("rendezvous_rank_twice", 3, (spec[]){{SERVE, 0, 3, 0, H, 0}, {JOIN, 1, 3, 0, H, 0}, {JOIN, 1, 3, 0, H, 200}},
                "MGI_RANK: rank 1 connected twice (from 127.0.0.1:", "rank 0 refused rank 1: MGI_RANK: rank 1 connected twice");
    expect_fail("rendezvous_peer_rank_out_of_range", 2, (spec[]){{SERVE, 0, 2, 0, H, 0}, {RAW_HELLO, 5, 2, 0, H, 0}},
                "MGI_RANK: the peer at 127.0.0.1:", NULL);
    expect_fail("rendezvous_peer_claims_rank0", 2, (spec[]){{SERVE, 0, 2, 0, H, 0}, {RAW_HELLO, 0, 2, 0, H, 0}},
                "says rank 0, outside 1..1 for MGI_WORLD=2", NULL);
    expect_fail("rendezvous_peer_version", 3, (spec[]){{SERVE, 0, 3, 0, H, 0}, {JOIN, 1, 3, 0, H, 0}, {RAW_HELLO, 2, 3, 9, H, 0}},
                "speaks protocol version 9, rank 0 version 1", "rank 0 refused rank 1: rendezvous: the peer at");
    expect_fail("rendezvous_peer_garbage", 3, (spec[]){{SERVE, 0, 3, 0, H, 0}, {JOIN, 1, 3, 0, H, 0}, {RAW_GARBAGE, 2, 3, 0, H, 0}},
                "sent something that is not mgi's rendezvous (\"GET / HT...\")", "rank 0 refused rank 1: MGI_ADDR 127.0.0.1:");
    /* A rank that says HELLO and dies: rank 0 and the ranks waiting for the id end at once. */
    expect_fail("rendezvous_peer_dies", 3, (spec[]){{SERVE, 0, 3, 0, H, 0}, {JOIN, 1, 3, 0, H, 0}, {RAW_DIE, 2, 3, 0, H, 0}},
                "rendezvous: rank 2 (at 127.0.0.1:", "rank 0 refused rank 1: rendezvous: rank 2 (at");
    /* A peer that connects and never speaks, and a rank that never comes: the deadline, named. */
    expect_fail("rendezvous_silent_peer", 3, (spec[]){{SERVE, 0, 3, 0, H, 0}, {JOIN, 1, 3, 0, H, 0}, {RAW_SILENT, 2, 3, 0, H, 0}},
                "MGI_NCCL_TIMEOUT: after 1.5 s, rank 2 of MGI_WORLD=3 had not arrived", "rank 0 refused rank 1: MGI_NCCL_TIMEOUT");
    expect_fail("rendezvous_missing_ranks", 2, (spec[]){{SERVE, 0, 4, 0, H, 0}, {JOIN, 2, 4, 0, H, 0}},
                "ranks 1,3 of MGI_WORLD=4 had not arrived", "rank 0 refused rank 2: MGI_NCCL_TIMEOUT");
    /* Rank 0 replaced by something else, or dying after reading the HELLO. */
    expect_fail("rendezvous_rank0_garbage", 2, (spec[]){{FAKE_GARBAGE, 0, 2, 0, H, 0}, {JOIN, 1, 2, 0, H, 0}}, NULL,
                "the answer is not mgi's rendezvous (\"HTTP/1.1...\")");
    expect_fail("rendezvous_rank0_dies", 2, (spec[]){{FAKE_DIE, 0, 2, 0, H, 0}, {JOIN, 1, 2, 0, H, 0}}, NULL,
                "rank 0 closed the connection while rank 1 waited for the id");
}

/* Nobody listening on a port: the rank retries until its deadline, then says so. */
static void test_unreachable(void) {
    char err[512];
    int port = 0, fd = rendezvous_listen("127.0.0.1", 0, &port, err, sizeof err);
    if (fd >= 0) close(fd);  /* a port that was free a moment ago and has no listener now */
    rendezvous_config c = {.rank = 1, .world = 2, .port = port, .timeout_ms = 800};
    snprintf(c.host, sizeof c.host, "127.0.0.1");
    uint8_t blob[RENDEZVOUS_BLOB_BYTES];
    double t0 = now_s();
    int rc = rendezvous_join(&c, 1, blob, err, sizeof err);
    double t = now_s() - t0;
    char want[128];
    snprintf(want, sizeof want, "MGI_ADDR 127.0.0.1:%d: rank 1 could not reach rank 0 within MGI_NCCL_TIMEOUT's 0.8 s",
             port);
    CHECK(fd >= 0 && rc == -1 && strstr(err, want) && strstr(err, "Connection refused") && t >= 0.75 && t < 2.0,
          "rendezvous_unreachable", "rc %d after %.2f s: %s", rc, t, err);
    snprintf(c.host, sizeof c.host, "no-such-host.invalid");
    rc = rendezvous_join(&c, 1, blob, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "MGI_ADDR no-such-host.invalid:") && strstr(err, "cannot resolve the host"),
          "rendezvous_unresolvable", "rc %d: %s", rc, err);
    /* Two listeners on one port: the second rank 0 is told. */
    fd = rendezvous_listen("127.0.0.1", 0, &port, err, sizeof err);
    int fd2 = rendezvous_listen("127.0.0.1", port, NULL, err, sizeof err);
    CHECK(fd >= 0 && fd2 == -1 && strstr(err, "rank 0 cannot listen there (Address already in use)"),
          "rendezvous_port_taken", "%d %d: %s", fd, fd2, err);
    if (fd >= 0) close(fd);
    if (fd2 >= 0) close(fd2);
    /* A world of one needs no network; ranks outside the world are refused before any. */
    c = (rendezvous_config){.rank = 0, .world = 1, .port = 1, .timeout_ms = 100};
    CHECK(rendezvous_exchange(&c, 1, blob, err, sizeof err) == 0, "rendezvous_world_one", "%s", err);
    c.rank = 2;
    c.world = 2;
    CHECK(rendezvous_exchange(&c, 1, blob, err, sizeof err) == -1 &&
          !strcmp(err, "MGI_RANK=2: out of range for MGI_WORLD=2 (ranks 0..1)"), "rendezvous_exchange_rank_range", "%s",
          err);
    c.rank = 0;
    CHECK(rendezvous_join(&c, 1, blob, err, sizeof err) == -1 && strstr(err, "MGI_RANK=0: out of range"),
          "rendezvous_join_rank0", "%s", err);
}

static void test_addr(void) {
    char host[256], err[512];
    int port = 0;
    CHECK(!rendezvous_parse_addr("127.0.0.1:29500", host, sizeof host, &port, err, sizeof err) &&
          !strcmp(host, "127.0.0.1") && port == 29500, "rendezvous_addr_ipv4", "%s %d %s", host, port, err);
    CHECK(!rendezvous_parse_addr("node-1.cluster:1", host, sizeof host, &port, err, sizeof err) &&
          !strcmp(host, "node-1.cluster") && port == 1, "rendezvous_addr_name", "%s %d", host, port);
    CHECK(!rendezvous_parse_addr("[::1]:65535", host, sizeof host, &port, err, sizeof err) && !strcmp(host, "::1") &&
          port == 65535, "rendezvous_addr_ipv6", "%s %d %s", host, port, err);
    const struct {
        const char *addr, *want;
    } bad[] = {
        {"127.0.0.1", "MGI_ADDR='127.0.0.1': want HOST:PORT"},
        {":29500", "MGI_ADDR=':29500': want HOST:PORT"},
        {"", "MGI_ADDR='': want HOST:PORT"},
        {"host:", "port '' is not a number in 1..65535"},
        {"host:0", "port '0' is not a number in 1..65535"},
        {"host:65536", "port '65536' is not a number"},
        {"host:-1", "port '-1' is not a number"},
        {"host:29500x", "port '29500x' is not a number"},
        {"host: 80", "port ' 80' is not a number"},
        {"::1:29500", "an IPv6 address needs brackets"},
        {"[::1", "an IPv6 address is written [ADDR]:PORT"},
        {"[::1]29500", "an IPv6 address is written [ADDR]:PORT"},
        {"[]:5", "want HOST:PORT"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "rendezvous_addr_bad_%zu", i);
        int rc = rendezvous_parse_addr(bad[i].addr, host, sizeof host, &port, err, sizeof err);
        CHECK(rc == -1 && strstr(err, bad[i].want), name, "'%s': rc %d: %s", bad[i].addr, rc, err);
    }
    char longhost[400];
    memset(longhost, 'a', 300);
    strcpy(longhost + 300, ":80");
    CHECK(rendezvous_parse_addr(longhost, host, sizeof host, &port, err, sizeof err) == -1 &&
          strstr(err, "the host is 300 characters, at most 255"), "rendezvous_addr_long", "%s", err);
}

static void clear_env(void) {
    const char *v[] = {"MGI_RANK", "MGI_WORLD", "MGI_ADDR", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                       "MGI_NCCL_TIMEOUT"};
    for (int i = 0; i < 6; i++) unsetenv(v[i]);
}

/* env: "NAME=VALUE NAME=VALUE" set on a clean environment. */
static int from_env(const char *env, rendezvous_config *c, char *err, size_t err_size) {
    clear_env();
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) {
        char *eq = strchr(t, '=');
        *eq = 0;
        setenv(t, eq + 1, 1);
    }
    err[0] = 0;
    return rendezvous_from_env(c, err, err_size);
}

static void test_env(void) {
    rendezvous_config c;
    char err[512];
    int rc = from_env("", &c, err, sizeof err);
    CHECK(rc == 0, "rendezvous_env_none", "rc %d: %s", rc, err);
    rc = from_env("MGI_RANK=1 MGI_WORLD=2 MGI_ADDR=10.0.0.1:29500", &c, err, sizeof err);
    CHECK(rc == 1 && c.rank == 1 && c.world == 2 && !strcmp(c.host, "10.0.0.1") && c.port == 29500 &&
          c.timeout_ms == RENDEZVOUS_TIMEOUT_S * 1000, "rendezvous_env_mgi", "rc %d: %s", rc, err);
    rc = from_env("OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4 MGI_ADDR=h:5 MGI_NCCL_TIMEOUT=7", &c, err, sizeof err);
    CHECK(rc == 1 && c.rank == 3 && c.world == 4 && c.timeout_ms == 7000, "rendezvous_env_mpirun", "rc %d: %s", rc,
          err);
    rc = from_env("OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4 MGI_RANK=0 MGI_WORLD=2 MGI_ADDR=h:5", &c, err,
                  sizeof err);
    CHECK(rc == 1 && c.rank == 0 && c.world == 2, "rendezvous_env_mgi_over_mpirun", "rc %d: %s", rc, err);
    rc = from_env("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1", &c, err, sizeof err);
    CHECK(rc == 0, "rendezvous_env_mpirun_one", "rc %d: %s", rc, err);
    const struct {
        const char *env, *want;
    } bad[] = {
        {"MGI_RANK=2 MGI_WORLD=2 MGI_ADDR=h:5", "MGI_RANK=2: out of range for MGI_WORLD=2 (ranks 0..1)"},
        {"MGI_RANK=-1 MGI_WORLD=2 MGI_ADDR=h:5", "MGI_RANK=-1: out of range (0..1023)"},
        {"MGI_RANK=x MGI_WORLD=2 MGI_ADDR=h:5", "MGI_RANK='x': not an integer"},
        {"MGI_RANK=0 MGI_WORLD=0 MGI_ADDR=h:5", "MGI_WORLD=0: out of range (1..1024)"},
        {"MGI_RANK=0 MGI_WORLD=2k MGI_ADDR=h:5", "MGI_WORLD='2k': not an integer"},
        {"MGI_RANK=0 MGI_WORLD=5000 MGI_ADDR=h:5", "MGI_WORLD=5000: out of range (1..1024)"},
        {"MGI_RANK=1 MGI_ADDR=h:5", "MGI_RANK is set but MGI_WORLD is not; set both"},
        {"MGI_WORLD=2 MGI_ADDR=h:5", "MGI_WORLD is set but MGI_RANK is not; set both"},
        {"MGI_RANK=1 MGI_WORLD=2", "MGI_WORLD=2: a job of 2 processes needs MGI_ADDR, rank 0's HOST:PORT"},
        {"MGI_ADDR=h:5", "MGI_ADDR='h:5' is set, but neither MGI_RANK and MGI_WORLD nor mpirun's"},
        {"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_SIZE=2: a job of 2 processes needs MGI_ADDR"},
        {"OMPI_COMM_WORLD_RANK=4 OMPI_COMM_WORLD_SIZE=2 MGI_ADDR=h:5",
         "OMPI_COMM_WORLD_RANK=4: out of range for OMPI_COMM_WORLD_SIZE=2 (ranks 0..1)"},
        {"MGI_RANK=0 MGI_WORLD=2 MGI_ADDR=h", "MGI_ADDR='h': want HOST:PORT"},
        {"MGI_RANK=0 MGI_WORLD=2 MGI_ADDR=h:99999", "MGI_ADDR='h:99999': port '99999' is not a number in 1..65535"},
        {"MGI_RANK=0 MGI_WORLD=2 MGI_ADDR=h:5 MGI_NCCL_TIMEOUT=0", "MGI_NCCL_TIMEOUT=0: out of range (1..3600)"},
        {"MGI_RANK=0 MGI_WORLD=2 MGI_ADDR=h:5 MGI_NCCL_TIMEOUT=fast", "MGI_NCCL_TIMEOUT='fast': not an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "rendezvous_env_bad_%zu", i);
        rc = from_env(bad[i].env, &c, err, sizeof err);
        CHECK(rc == -1 && strstr(err, bad[i].want), name, "%s: rc %d: %s", bad[i].env, rc, err);
    }
    clear_env();
    c = (rendezvous_config){.rank = 0, .world = 3};
    CHECK(rendezvous_check_world(&c, 3, err, sizeof err) == 0, "rendezvous_world_plan_ok", "%s", err);
    CHECK(rendezvous_check_world(&c, 2, err, sizeof err) == -1 &&
          strstr(err, "MGI_WORLD=3: the plan uses 2 devices, and one process per GPU needs MGI_WORLD=2"),
          "rendezvous_world_plan_mismatch", "%s", err);
    CHECK(rendezvous_hash(0, "abc", 3) == 0xe71fa2190541574bull && rendezvous_hash(0, "abc", 3) != rendezvous_hash(0, "abd", 3),
          "rendezvous_hash_fnv1a", "%016llx", (unsigned long long)rendezvous_hash(0, "abc", 3));
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    for (int i = 0; i < RENDEZVOUS_BLOB_BYTES; i++) the_blob[i] = (uint8_t)rand();
    test_addr();
    test_env();
    test_exchange();
    test_refusals();
    test_unreachable();
    return test_done();
}
