/* How the processes of one job (one per GPU, or per host; launched by hand with MGI_RANK /
 * MGI_WORLD / MGI_ADDR or by mpirun) find each other before NCCL: rank 0 listens on MGI_ADDR
 * and hands every other rank a 128-byte blob (the ncclUniqueId) over TCP, after checking that
 * all ranks run the same protocol, world size and model/plan (a hash), then tells them all that
 * everyone has it. Plain C, no CUDA; bounded in time by MGI_NCCL_TIMEOUT, never a hang.
 *
 * The wire, every integer little-endian; each message a 32-byte header:
 *   bytes 0-7   magic "mgi-rdzv"
 *   bytes 8-11  protocol version (RENDEZVOUS_VERSION)
 *   bytes 12-15 kind: 1 HELLO (rank -> rank 0), 2 WELCOME (rank 0 -> rank, with the blob),
 *               3 REFUSE (rank 0 -> rank, with a NUL-terminated reason), 4 ARRIVED (rank ->
 *               rank 0: it has the blob), 5 GO (rank 0 -> rank: every rank has it)
 *   bytes 16-19 rank (the sender's; rank 0's messages carry the addressee's)
 *   bytes 20-23 world size
 *   bytes 24-31 hash of the model and plan
 * WELCOME is followed by the RENDEZVOUS_BLOB_BYTES of the blob, REFUSE by RENDEZVOUS_REASON_BYTES
 * of reason (NUL-terminated, NUL-padded). */
#ifndef MGI_ENGINE_RENDEZVOUS_H
#define MGI_ENGINE_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#define RENDEZVOUS_BLOB_BYTES 128   /* NCCL_UNIQUE_ID_BYTES */
#define RENDEZVOUS_MAX_WORLD 1024   /* ranks of one job: a poll set rank 0 can hold */
#define RENDEZVOUS_REASON_BYTES 512
#define RENDEZVOUS_VERSION 1
#define RENDEZVOUS_TIMEOUT_S 120    /* MGI_NCCL_TIMEOUT's default, as forward_cuda.c's */

enum { RENDEZVOUS_HELLO = 1, RENDEZVOUS_WELCOME, RENDEZVOUS_REFUSE, RENDEZVOUS_ARRIVED, RENDEZVOUS_GO };

typedef struct {
    int rank, world;   /* 0 <= rank < world <= RENDEZVOUS_MAX_WORLD */
    char host[256];    /* MGI_ADDR's host: rank 0's address (a name, IPv4, or IPv6 without brackets) */
    int port;          /* MGI_ADDR's port; 0 only for rendezvous_listen (any free port) */
    int timeout_ms;    /* the whole exchange's deadline: MGI_NCCL_TIMEOUT seconds */
} rendezvous_config;

/* The job's shape from the environment: MGI_RANK and MGI_WORLD, or Open MPI's
 * OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (MGI_* win when both are set), with MGI_ADDR
 * (host:port or [v6]:port) and MGI_NCCL_TIMEOUT (seconds, 1-3600, default 120). Returns 1 with c
 * filled, 0 when none of it is set (one process: nothing to do), -1 with err naming the variable
 * and its value: a missing partner variable, a value that is not a number, a rank outside
 * 0..world-1, a world outside 1..RENDEZVOUS_MAX_WORLD, a malformed MGI_ADDR, or mpirun's world
 * of more than one process without MGI_ADDR. */
int rendezvous_from_env(rendezvous_config *c, char *err, size_t err_size);

/* Splits "host:port" or "[v6]:port" (port 1..65535) into host and port; 0, or -1 with err
 * naming MGI_ADDR, the text and what is wrong. */
int rendezvous_parse_addr(const char *addr, char *host, size_t host_size, int *port, char *err, size_t err_size);

/* One process per GPU: the world must be the plan's device count. 0, or -1 with err. */
int rendezvous_check_world(const rendezvous_config *c, int plan_devices, char *err, size_t err_size);

/* FNV-1a, 64 bits, over n bytes, continuing from h (start with 0): the model/plan hash. */
uint64_t rendezvous_hash(uint64_t h, const void *data, size_t n);

/* Rank 0's listening socket on host:port (port 0: any free one, written to *bound_port). The fd,
 * or -1 with err. Separate from rendezvous_serve so that a test can learn the port first. */
int rendezvous_listen(const char *host, int port, int *bound_port, char *err, size_t err_size);

/* Rank 0: waits for HELLO from ranks 1..world-1 on listen_fd (not closed), checks each (magic,
 * version, world, rank in range and not seen before, hash), sends every one the blob, waits for
 * every ARRIVED and answers GO. 0 when every rank has the blob; -1 with err (the rank, the numbers,
 * a hint) on any refusal, a peer that closes or sends garbage, or the deadline; the ranks already
 * connected are then sent REFUSE with the reason, so that none of them waits for the deadline. */
int rendezvous_serve(int listen_fd, const rendezvous_config *c, uint64_t hash,
                     const uint8_t blob[RENDEZVOUS_BLOB_BYTES], char *err, size_t err_size);

/* Rank 1..world-1: connects to c->host:c->port (retrying until the deadline while nobody
 * listens), says HELLO, receives the blob, says ARRIVED and waits for GO. 0 with blob filled, or
 * -1 with err (refused by rank 0 with its reason, unreachable, closed, garbage, deadline). Once
 * connected it waits a second past its deadline for rank 0, which ends the job at its own
 * deadline and sends the reason (the ranks missing) to every rank. */
int rendezvous_join(const rendezvous_config *c, uint64_t hash, uint8_t blob[RENDEZVOUS_BLOB_BYTES], char *err,
                    size_t err_size);

/* Either side for c->rank: rank 0 listens on c->port and serves blob (given), the others join
 * (blob received). A world of one needs no network. 0, or -1 with err. */
int rendezvous_exchange(const rendezvous_config *c, uint64_t hash, uint8_t blob[RENDEZVOUS_BLOB_BYTES], char *err,
                        size_t err_size);

#endif
