/* Signals: SIGINT and SIGTERM set a flag so a subcommand flushes what it finished and exits
 * 130/143; installed without SA_RESTART so that a blocking open() or read() (a FIFO nobody
 * writes, a pipe whose writer stays open) returns EINTR instead of waiting on. SIGBUS from the
 * model's memory map (the file was truncated under us) ends mgi with one line and exit 3. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gguf/gguf.h"

static volatile sig_atomic_t caught_signal;

static void on_signal(int sig) { caught_signal = sig; }

void cli_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = 0;  /* no SA_RESTART: blocked system calls return EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cli_signal(void) { return caught_signal; }

static void put(const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* Only async-signal-safe calls: gguf_mapped_path reads a fixed table, write(2), _exit. A fault
 * outside every mapping is a bug, not a changed file: the default action then (a core dump) on
 * the faulting instruction's second try. Output already written stays whole: batch writes each
 * line with one write(2) and run flushes stdout after each token, and neither reads the mapping. */
static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    const char *path = gguf_mapped_path(si->si_addr);
    if (!path) {
        signal(sig, SIG_DFL);
        return;
    }
    put("mgi: ");
    put(path);
    put(": the model file changed while mgi was reading it (truncated or rewritten under its memory map); "
        "stopping. Leave a model file alone while mgi runs, or use --no-mmap\n");
    _exit(EXIT_RUNTIME);
}

void cli_catch_sigbus(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}
