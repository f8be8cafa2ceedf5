/* Opening the files a user names, as a careless or hostile user names them: a FIFO nobody writes,
 * a pipe that never ends, /dev/zero, /dev/full, a device node where a cache should be, a file a
 * second run is writing. One policy per purpose decides: whether a stream (FIFO, pipe, socket,
 * character device) is taken, how many bytes a read may bring, whether the output is locked.
 * Every blocking open() and read() here ends on SIGINT/SIGTERM: cli_catch_signals installs the
 * handlers without SA_RESTART, so the call returns EINTR and the caller exits 130/143. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

const char *cli_file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO or pipe";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    default: return "not a regular file";
    }
}

static int is_stream(mode_t m) { return S_ISFIFO(m) || S_ISCHR(m) || S_ISSOCK(m); }

int cli_exit_status(int rc) { return cli_signal() ? 128 + cli_signal() : rc; }

/* The one line for a wait that a signal ended. */
static void say_interrupted(const char *path, const char *what, const char *doing) {
    cli_error("%s: interrupted by %s while %s %s", path, strsignal(cli_signal()), doing, what);
}

int cli_input_open(const char *path, const cli_input *in) {
    if (cli_signal()) return -1;
    int fd;
    if (!strcmp(path, "-")) {
        fd = STDIN_FILENO;
    } else {
        /* O_NONBLOCK first: a FIFO without a writer would block the open itself. It is reopened
         * (blocking, until a writer comes) only where a stream is taken. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            cli_error("%s: cannot open %s: %s", path, in->what, strerror(errno));
            return -1;
        }
    }
    struct stat st;
    if (fstat(fd, &st)) {
        cli_error("%s: cannot stat %s: %s", path, in->what, strerror(errno));
        if (fd != STDIN_FILENO) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) && !(in->stream && is_stream(st.st_mode))) {
        cli_error("%s: %s is %s; %s", path, in->what, cli_file_kind(st.st_mode),
                  in->stream ? "give a text file or a pipe" : "give a regular file");
        if (fd != STDIN_FILENO) close(fd);
        return -1;
    }
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > in->max_bytes) {
        cli_error("%s: %s holds %lld bytes, more than %zu: %s", path, in->what, (long long)st.st_size,
                  in->max_bytes, in->hint);
        if (fd != STDIN_FILENO) close(fd);
        return -1;
    }
    if (fd != STDIN_FILENO) {
        if (S_ISFIFO(st.st_mode)) {
            close(fd);
            while ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 && errno == EINTR && !cli_signal()) {}
            if (fd < 0) {
                if (errno == EINTR) say_interrupted(path, in->what, "waiting for a writer of");
                else cli_error("%s: cannot open %s: %s", path, in->what, strerror(errno));
                return -1;
            }
        } else {
            int fl = fcntl(fd, F_GETFL);
            if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        }
    }
    return fd;
}

char *cli_input_read(int fd, const char *path, const cli_input *in, size_t *len) {
    size_t cap = 1 << 16, n = 0, line = 0;
    int64_t line_no = 1;
    char *buf = malloc(cap), *bad = NULL;
    int err = 0;
    while (buf) {
        if (n + 1 >= cap) {
            size_t nc = cap * 2 > in->max_bytes + 2 ? in->max_bytes + 2 : cap * 2;
            char *nb = nc > cap ? realloc(buf, nc) : NULL;
            if (!nb) { bad = "out of memory"; break; }
            buf = nb;
            cap = nc;
        }
        if (cli_signal()) { err = EINTR; break; }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR && !cli_signal()) continue;
        if (got < 0) { err = errno; break; }
        if (got == 0) break;
        if (in->max_line) {
            for (ssize_t i = 0; i < got; i++) {
                if (buf[n + (size_t)i] == '\n') { line = 0; line_no++; }
                else if (++line > in->max_line) break;
            }
            if (line > in->max_line) {
                cli_error("%s: line %lld of %s is longer than %zu bytes: %s", path, (long long)line_no, in->what,
                          in->max_line, in->hint);
                bad = "";
                break;
            }
        }
        n += (size_t)got;
        if (n > in->max_bytes) {
            cli_error("%s: %s holds more than %zu bytes: %s", path, in->what, in->max_bytes, in->hint);
            bad = "";
            break;
        }
    }
    if (fd != STDIN_FILENO) close(fd);
    if (!buf) bad = "out of memory";
    if (err == EINTR) say_interrupted(path, in->what, "reading");
    else if (err) cli_error("%s: cannot read %s: %s", path, in->what, strerror(err));
    else if (bad && *bad) cli_error("%s: %s reading %s", path, bad, in->what);
    if (err || bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

char *cli_read_file(const char *path, const cli_input *in, size_t *len) {
    int fd = cli_input_open(path, in);
    return fd < 0 ? NULL : cli_input_read(fd, path, in, len);
}

int cli_output_check(const char *path, const char *what) {
    struct stat st;
    if (stat(path, &st)) {
        if (errno == ENOENT) return 0;
        cli_error("%s: cannot stat %s: %s", path, what, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        cli_error("%s: %s is %s, not a regular file that mgi may replace: left alone", path, what,
                  cli_file_kind(st.st_mode));
        return -1;
    }
    if (access(path, W_OK)) {
        cli_error("%s: %s is not writable (%s): read, never replaced", path, what, strerror(errno));
        return 1;
    }
    return 0;
}

int cli_output_open(const char *path, const char *what, unsigned flags, int *status) {
    *status = EXIT_BADINPUT;
    if (cli_signal()) { *status = cli_exit_status(EXIT_BADINPUT); return -1; }
    const int acc = flags & CLI_OUT_READ ? O_RDWR : O_WRONLY;
    /* O_NONBLOCK first: a FIFO without a reader fails with ENXIO instead of blocking here. */
    int fd = open(path, acc | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0 && errno == ENXIO) {
        if (!(flags & CLI_OUT_STREAM)) {
            cli_error("%s: %s is a FIFO; %s", path, what, flags & CLI_OUT_READ ? "it is read back: give a regular file"
                                                                             : "give a regular file");
            return -1;
        }
        while ((fd = open(path, acc | O_APPEND | O_CLOEXEC)) < 0 && errno == EINTR && !cli_signal()) {}
        if (fd < 0 && errno == EINTR) {
            say_interrupted(path, what, "waiting for a reader of");
            *status = cli_exit_status(EXIT_BADINPUT);
            return -1;
        }
    }
    if (fd < 0) {
        cli_error("%s: cannot open %s: %s", path, what, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        cli_error("%s: cannot stat %s: %s", path, what, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) && (!(flags & CLI_OUT_STREAM) || !is_stream(st.st_mode))) {
        cli_error("%s: %s is %s; %s", path, what, cli_file_kind(st.st_mode),
                  flags & CLI_OUT_READ ? "it is read back, so it must be a regular file" : "give a regular file");
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    /* An advisory lock for the whole run: a second mgi appending to the same file would redo
     * every request and interleave its lines. Released by the kernel when the process ends,
     * however it ends. */
    if ((flags & CLI_OUT_LOCK) && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB)) {
        if (errno == EWOULDBLOCK)
            cli_error("%s: another process is writing %s (it holds its lock): wait for it to end, or give "
                      "another file", path, what);
        else
            cli_error("%s: cannot lock %s: %s", path, what, strerror(errno));
        *status = EXIT_RUNTIME;
        close(fd);
        return -1;
    }
    return fd;
}

const cli_input cli_text_input = {
    .what = "the text (-f or stdin)", .stream = 1, .max_bytes = (size_t)256 << 20, .max_line = 0,
    .hint = "mgi reads at most 256 MiB of text; split it",
};
