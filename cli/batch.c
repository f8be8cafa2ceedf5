/* mgi batch: many prompts (a text file with one prompt per line, or JSONL requests, each with
 * one or n choices) run in parallel sequences by the scheduler; one JSON line per request
 * (cli/batch_result.c) on stdout or -o FILE, written whole as each request finishes, so a killed
 * run can be resumed (--resume, cli/batch_resume.c) without losing or redoing anything finished. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/chat.h"
#include "engine/constrain.h"
#include "engine/engine.h"
#include "engine/request.h"
#include "engine/scheduler.h"

static const char batch_usage[] =
    "usage: mgi batch -m MODEL -f PROMPTS [flags]    (or -ns N without -f: N built-in prompts)\n"
    "  PROMPTS: one request per line, plain text (the line is the prompt) or a JSON object\n"
    "  {\"id\", \"prompt\", \"n_predict\", \"temperature\", \"seed\", \"top_k\", \"top_p\", \"min_p\",\n"
    "  \"repeat_penalty\", \"presence_penalty\", \"frequency_penalty\", \"repeat_last_n\", \"ignore_eos\",\n"
    "  \"logit_bias\": [[token id, bias or false], ...] or {\"token id\": bias}, \"max_tokens\" (= n_predict),\n"
    "  \"messages\" (rendered with the model's chat template) with \"chat_template_kwargs\", \"stop\"\n"
    "  (a string or list: the text ends before it), \"logprobs\", \"top_logprobs\", \"n_probs\", \"n\"\n"
    "  (or \"n_cmpl\": 1..128 choices of the prompt, evaluated once; choice i samples with seed + i)};\n"
    "  absent fields take the flags' values. OpenAI Batch API lines {\"custom_id\", \"method\", \"url\":\n"
    "  /v1/chat/completions or /v1/completions, \"body\"} are answered in OpenAI's output format\n"
    "  (--resume matches custom_id). Structured output: \"grammar\": GBNF, \"json_schema\": {...},\n"
    "  \"response_format\": {\"type\": \"json_object\"|\"json_schema\", ...}.\n"
    "  Output: one JSON line per request (id, prompt, text, tokens, finish_reason stop|length|error,\n"
    "  error, n_prompt (system prompt and BOS included), n_generated, n_reused, seed, timings), as\n"
    "  each finishes; with n > 1, \"choices\": [{index, text, tokens, finish_reason, error,\n"
    "  n_generated, seed}, ...] in place of text..seed, and n_generated counts every choice. A bad\n"
    "  line gets its own error line and the rest go on; the exit status is 0 once every request has\n"
    "  its line, 130/143 on SIGINT/SIGTERM (finished lines are kept whole).\n"
    "  -m,   --model PATH         GGUF model file (required)\n"
    "  -f,   --file PATH          the requests; - reads stdin\n"
    "  -o,   --output PATH        append the result lines to PATH instead of stdout (a file is locked\n"
    "                             for the run: a second mgi on it is refused)\n"
    "        --resume             with -o (a regular file): skip requests whose id PATH already holds;\n"
    "                             the ids must then be unique (without it a repeated id is an error line)\n"
    "        --ordered            write results in input order (default: as they finish)\n"
    "  -np,  --parallel N         sequences decoded together; a request's n choices take n of them\n"
    "                             (default: 1, or the largest n of the requests)\n"
    "  -ns,  --sequences N        without -f: run N requests from built-in prompts (default 0)\n"
    "  -cb,  --cont-batching      a finished sequence takes the next request at once (default on)\n"
    "  -nocb, --no-cont-batching  start new requests only when every sequence is free\n"
    "        --system-prompt TEXT prepended as is to every prompt, computed once and shared (default none)\n"
    "  -sysf, --system-prompt-file PATH  the system prompt from a file\n"
    "        --no-prefix-reuse    share only the system prompt, not other common prefixes (default share)\n"
    "        --no-warmup          skip the untimed warm-up step on a GPU (default: one, shaped as the\n"
    "                             run's first); --warmup: also on the CPU\n"
    "  -n,   --n-predict N        tokens per request; -1 (or llama.cpp's -2) = until end of text or\n"
    "                             context full (default -1)\n"
    "  -c,   --ctx-size N         KV cells of all sequences; each holds N / np; 0 = np x the model's\n"
    "                             context (default 0)\n"
    "  -b,   --batch-size N       tokens per step, decode and prefill together (default 2048)\n"
    "  -ub,  --ubatch-size N      tokens per forward pass; 0 = -b, one pass per step (default 0)\n"
    "  -s,   --seed N             sampling seed of every request; -1 = random per request (default -1)\n"
    CLI_SAMPLING_USAGE
    CLI_GRAMMAR_USAGE
    "  -t,   --threads N          CPU threads (default min(CPUs, 8))\n"
    "  -tb,  --threads-batch N    CPU threads for passes of several tokens (prompts); -1 = -t (default)\n"
    CLI_GPU_USAGE
    "        --no-mmap            read the model into memory instead of mapping it (default mmap)\n"
    "        --mlock              keep the model's file locked in RAM, as llama.cpp (a refusal by\n"
    "                             the limits is a warning; default off)\n"
    "        --log-disable        no summary or warnings on stderr (default off)\n"
    "  -fa,  --flash-attn [on|off|auto]  accepted for llama.cpp compatibility: mgi's attention is\n"
    "                             always the fused kind (off changes nothing, and says so)\n"
    "  -h,   --help               this text\n";

/* Built-in prompts for synthetic runs (-ns), as llama.cpp's parallel example has. */
static const char *const builtin_prompts[] = {
    "Once upon a time", "The little dog", "In the garden there was", "Lily and Tom went to",
    "One day a bird", "The sun was shining and", "Mom said to Ben", "There was a big red ball",
};

typedef struct {
    const char *model, *file, *output, *system, *system_file;
    bool resume, ordered, cont_batching, prefix_reuse, log, np_given;
    int warmup; /* 1 on a GPU (the default), 2 on any backend (--warmup), 0 never (--no-warmup) */
    int n_parallel, n_sequences, n_ubatch;
    request_params rp;
    engine_params ep;
    cli_grammar gram;  /* --grammar, -j, ...: every request's default */
} batch_opts;

static int parse(int argc, char **argv, batch_opts *o) {
    o->ep = engine_default_params();
    o->rp.sp = sampler_default_params();
    o->rp.n_predict = -1;
    o->rp.seed = -1;
    o->n_parallel = 1;
    /* One pass per step: a batch's prompt steps run at full width (on an H200, 8b q4_k_m, 32
     * prompts at once: 18.2k prompt t/s in passes of 512 tokens, 23.3k in one of 2048; PERF-LOG
     * run 40). llama.cpp's 512 suits its interactive tools, not a throughput command. */
    o->n_ubatch = 0;
    o->cont_batching = o->prefix_reuse = o->log = true;
    o->warmup = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int g;
#define VALUE() do { if (!(v = cli_value(argc, argv, &i))) return -1; } while (0)
        int sf = cli_sampling_flag(argc, argv, &i, &o->rp.sp);
        if (sf) {
            if (sf < 0) return -1;
        } else if (cli_is_flag(a, "-h", "--help")) {
            fputs(batch_usage, stdout);
            return 1;
        } else if (cli_is_flag(a, "-m", "--model")) { VALUE(); o->model = v;
        } else if (cli_is_flag(a, "-f", "--file")) { VALUE(); o->file = v;
        } else if (cli_is_flag(a, "-o", "--output")) { VALUE(); o->output = v;
        } else if (cli_is_flag(a, "--resume", NULL)) { o->resume = true;
        } else if (cli_is_flag(a, "--ordered", NULL)) { o->ordered = true;
        } else if (cli_is_flag(a, "-np", "--parallel")) {
            VALUE();
            if (cli_parse_int(a, v, 0, 1 << 16, &o->n_parallel)) return -1;
            o->np_given = true;
        } else if (cli_is_flag(a, "-ns", "--sequences")) {
            VALUE();
            if (cli_parse_int(a, v, 1, 1 << 24, &o->n_sequences)) return -1;
        } else if (cli_is_flag(a, "-cb", "--cont-batching")) { o->cont_batching = true;
        } else if (cli_is_flag(a, "-nocb", "--no-cont-batching")) { o->cont_batching = false;
        } else if (cli_is_flag(a, "--system-prompt", NULL)) { VALUE(); o->system = v;
        } else if (cli_is_flag(a, "-sysf", "--system-prompt-file")) { VALUE(); o->system_file = v;
        } else if (cli_is_flag(a, "--no-warmup", NULL)) { o->warmup = 0;
        } else if (cli_is_flag(a, "--warmup", NULL)) { o->warmup = 2;
        } else if (cli_is_flag(a, "--no-prefix-reuse", NULL)) { o->prefix_reuse = false;
        } else if (cli_is_flag(a, "-n", "--n-predict")) {
            VALUE();
            if (cli_parse_int(a, v, -2, 1 << 30, &o->rp.n_predict)) return -1;
            if (o->rp.n_predict == -2) o->rp.n_predict = -1; /* llama.cpp's "until the context is full" */
        } else if (cli_is_flag(a, "-ub", "--ubatch-size")) {
            VALUE();
            if (cli_parse_int(a, v, 0, 1 << 24, &o->n_ubatch)) return -1;
        } else if (cli_is_flag(a, "-s", "--seed")) {
            VALUE();
            if (cli_parse_i64(a, v, -1, 9007199254740992LL, &o->rp.seed)) return -1;
        } else if ((g = cli_engine_flag(argc, argv, &i, &o->ep))) {
            if (g < 0) return -1;
        } else if ((g = cli_grammar_flag(argc, argv, &i, &o->gram))) {
            if (g < 0) return -1;
        } else if (cli_is_flag(a, "--ignore-eos", NULL)) { o->rp.ignore_eos = true;
        } else if (cli_is_flag(a, "--log-disable", NULL)) { o->log = false;
        } else {
            cli_error("unknown flag '%s' (see mgi batch --help)", a);
            return -1;
        }
#undef VALUE
    }
    if (!o->model) { cli_error("-m/--model is required (see mgi batch --help)"); return -1; }
    if (!o->file && !o->n_sequences) {
        cli_error("no requests: give -f FILE (- for stdin) or -ns N for built-in prompts");
        return -1;
    }
    if (o->file && o->n_sequences) { cli_error("-ns is for synthetic runs without -f: use one"); return -1; }
    if (o->resume && !o->output) { cli_error("--resume needs -o FILE: the results to resume from"); return -1; }
    if (o->system && o->system_file) { cli_error("--system-prompt and -sysf both given: use one"); return -1; }
    if (o->n_parallel < 1) {
        cli_error("-np %d: at least one parallel sequence is needed (at most the -c cells, one per sequence)",
                  o->n_parallel);
        return -1;
    }
    if (o->rp.n_predict == 0) {
        cli_error("-n 0 generates nothing: give a count >= 1, or -1 for until end of text");
        return -1;
    }
    if (cli_sampling_check(&o->rp.sp)) return -1;
    o->ep.n_seq_max = o->n_parallel;
    return 0;
}

/* --- output lines ---------------------------------------------------------------------------- */

/* By id, then by line: the first of equal ids comes first. */
static int item_cmp(const void *a, const void *b) {
    const cli_batch_item *x = *(cli_batch_item *const *)a, *y = *(cli_batch_item *const *)b;
    int c = strcmp(x->req.id, y->req.id);
    return c ? c : (x->line_no > y->line_no) - (x->line_no < y->line_no);
}

/* Writes a whole line with one write() (a retry only continues a short write); 0 or -1. A
 * signal while nothing of the line is written (a pipe or FIFO whose reader stalls) gives up with
 * EINTR; once part of it is out the rest follows, so a reader never gets half a line. */
static int write_line(int fd, const char *s) {
    size_t n = strlen(s), total = n;
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR && (n < total || !cli_signal())) continue;
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* --- the run --------------------------------------------------------------------------------- */

/* An untimed step shaped like the run's first (every sequence fills with prompt tokens up to
 * the step size, then two one-token decode steps), its KV freed after: on a GPU the kernels load
 * lazily at their first launch, and a decode step's graph is captured on its second use, which
 * would otherwise land in the first timed steps (an 8b prompt step of 2048 tokens: ~30 ms more;
 * PERF-LOG run 43), as llama.cpp's tools warm up too. */
static int warmup(engine *e, int32_t n_step, bool log, char *err, size_t err_size) {
    const int32_t ns = engine_n_seq_max(e), cap = engine_n_ctx(e), tok = engine_n_vocab(e) > 1 ? 1 : 0;
    int32_t m = (n_step + ns - 1) / ns; /* prompt tokens per sequence */
    if (m > cap - 2) m = cap - 2;
    if (m < 1 || n_step < 1) return 0;
    engine_token *t = malloc((size_t)n_step * sizeof *t);
    int32_t *ids = malloc((size_t)n_step * sizeof *ids);
    if (!t || !ids) {
        free(t);
        free(ids);
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    const double t0 = cli_now_ms();
    int32_t n = 0, used = 0;
    for (int32_t s = 0; s < ns && n < n_step; s++, used++)
        for (int32_t i = 0; i < m && n < n_step; i++) t[n++] = (engine_token){tok, i, s, i == m - 1 || n == n_step - 1, 0};
    int rc = engine_decode_greedy(e, t, n, ids, err, err_size);
    for (int step = 0; step < 2 && !rc; step++) {
        int32_t k = 0;
        for (int32_t s = 0; s < used && k < n_step; s++) t[k++] = (engine_token){tok, engine_seq_len(e, s), s, 1, 0};
        rc = engine_decode_greedy(e, t, k, ids, err, err_size);
    }
    for (int32_t s = 0; s < used; s++) engine_seq_free(e, s);
    if (!rc && log) fprintf(stderr, "batch: warm-up step of %d prompt tokens, then 2 decode steps: %.0f ms\n", n,
                            cli_now_ms() - t0);
    free(t);
    free(ids);
    return rc;
}

typedef struct {
    cli_batch_item *items;
    int64_t n_items, next;  /* --ordered: the first item not yet written */
    int fd;
    bool ordered;
    const tokenizer *tok;
    int64_t n_done, n_err;
} out_state;

/* A finished item (NULL: none, only flush): its line is written now, or with --ordered once
 * every earlier item is written. 0, or -1 with errno set (ENOMEM, or the write's error). */
static int emit(out_state *os, cli_batch_item *it) {
    if (it) {
        if (!(it->line = cli_batch_result_line(it, os->tok))) {
            errno = ENOMEM;
            return -1;
        }
        it->finished = true;
        bool failed = it->req.error != NULL;
        for (int32_t c = 0; c < it->req.n_choices; c++) {  /* the line holds what is kept: long runs stay small */
            sched_job *j = &it->ch[c].job;
            failed |= j->state == SCHED_ERROR;
            free(j->out);
            free(j->lp);
            free(j->lp_top);
            free(it->ch[c].stop_tail.s);
            j->out = NULL;
            j->lp = NULL;
            j->lp_top = NULL;
            it->ch[c].stop_tail.s = NULL;
        }
        free(it->prompt_ids);
        it->prompt_ids = NULL;
        os->n_done++;
        os->n_err += failed;
        if (!os->ordered) {
            int w = write_line(os->fd, it->line);
            free(it->line);
            it->line = NULL;
            return w;
        }
    }
    for (; os->next < os->n_items; os->next++) {
        cli_batch_item *x = &os->items[os->next];
        if (x->skip) continue;
        if (!x->finished) break;
        int w = write_line(os->fd, x->line);
        free(x->line);
        x->line = NULL;
        if (w) return -1;
    }
    return 0;
}

/* "n" choices decode together, one sequence each: without -np the run gets as many sequences as
 * the largest n asks; with -np a request asking for more is refused (its own error line), as
 * llama-server refuses n_cmpl above its slots. 0, or -1 when out of memory. */
static int fit_choices(cli_batch_item *items, int64_t n, batch_opts *o) {
    int most = 1;
    for (int64_t k = 0; k < n; k++) {
        request *r = &items[k].req;
        if (r->error || r->n_choices <= 1) continue;
        if (!o->np_given) {
            if (r->n_choices > most) most = r->n_choices;
            continue;
        }
        if (r->n_choices <= o->n_parallel) continue;
        char msg[200];
        snprintf(msg, sizeof msg, "line %lld: \"n\" %d: the choices decode together, one sequence each, but -np is "
                 "%d: raise -np to %d or lower n", (long long)items[k].line_no, r->n_choices, o->n_parallel,
                 r->n_choices);
        free(r->prompt);
        r->prompt = NULL;
        if (!(r->error = strdup(msg))) {
            cli_error("out of memory");
            return -1;
        }
    }
    if (most > o->n_parallel) {
        if (o->log)
            fprintf(stderr, "batch: %d parallel sequences, for the largest \"n\" of the requests (-np sets them)\n",
                    most);
        o->n_parallel = most;
        o->ep.n_seq_max = most;
    }
    return 0;
}

static int64_t tokenize(const tokenizer *tok, const char *sys, const char *text, size_t len, int32_t **ids,
                        char *err, size_t err_size) {
    size_t ls = sys ? strlen(sys) : 0;
    char *full = malloc(ls + len + 1);
    if (!full) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    if (ls) memcpy(full, sys, ls);
    memcpy(full + ls, text, len);
    full[ls + len] = 0;
    bool add_bos = tokenizer_add_bos(tok) && tokenizer_bos(tok) >= 0;
    int64_t cap = (int64_t)(ls + len) + 8, n = -1;
    *ids = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        free(*ids);
        if (!(*ids = malloc((size_t)cap * sizeof **ids))) break;
        n = tokenizer_encode(tok, full, ls + len, add_bos, true, *ids, cap, err, err_size);
        if (n <= cap) break;
        cap = n;
    }
    free(full);
    if (!*ids) snprintf(err, err_size, "out of memory");
    if (n < 0 || !*ids) {
        free(*ids);
        *ids = NULL;
        return -1;
    }
    return n;
}

static uint64_t random_seed(int64_t k) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^
                 ((uint64_t)k * 0x9e3779b97f4a7c15ULL);
    return (x ^ (x >> 29)) & 0xffffffffULL;
}

/* The request file: a stream is fine (-f -, a pipe, a FIFO); the whole of it is held in memory,
 * so 1 GiB at most, and no request line is longer than 16 MiB (a prompt of a million-token
 * context, JSON-escaped, with room to spare): past either, the input is not a request file. */
static const cli_input batch_input = {
    .what = "the requests (-f)", .stream = 1, .max_bytes = (size_t)1 << 30, .max_line = (size_t)16 << 20,
    .hint = "mgi batch holds at most 1 GiB of requests, one per line of at most 16 MiB: split the file",
};

/* Duplicate ids: with --resume the ids key the results, so one id twice would have the second
 * request taken as done once the first is in: the input is refused (exit 2). Without it the later
 * ones get an error line each and the rest run. 0, or -1 after a message (out of memory too). */
static int check_ids(cli_batch_item *items, int64_t n, bool resume, const char *file) {
    cli_batch_item **v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) { cli_error("out of memory"); return -1; }
    for (int64_t k = 0; k < n; k++) v[k] = &items[k];
    qsort(v, (size_t)n, sizeof *v, item_cmp);
    int rc = 0;
    for (int64_t k = 1; k < n && !rc; k++) {
        const cli_batch_item *first = v[k - 1];
        while (k < n && !strcmp(v[k]->req.id, first->req.id)) {
            cli_batch_item *dup = v[k++];
            if (resume) {
                cli_error("%s: id %s on lines %lld and %lld: with --resume every id must be unique (the ids "
                          "key the results in -o); give each request its own id", file, dup->req.id,
                          (long long)first->line_no, (long long)dup->line_no);
                rc = -1;
                break;
            }
            if (dup->req.error) continue;
            free(dup->req.prompt);
            dup->req.prompt = NULL;
            char msg[160];
            snprintf(msg, sizeof msg, "line %lld: id %.60s is already the id of line %lld: ids must be unique",
                     (long long)dup->line_no, dup->req.id, (long long)first->line_no);
            if (!(dup->req.error = strdup(msg))) { cli_error("out of memory"); rc = -1; }
        }
    }
    free(v);
    return rc;
}

int cli_batch(int argc, char **argv) {
    batch_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc > 0 ? 0 : EXIT_USAGE;
    cli_catch_signals();
    /* the flags' grammar before anything is read or loaded: a bad one is one line, exit 2 */
    int g_status;
    grammar *gram = cli_grammar_compile(&o.gram, &g_status);
    if (g_status) return g_status;
    o.rp.grammar = gram;

    /* The requests: the file's lines, or -ns built-in prompts. The system prompt file is opened
     * now and read once the model is loaded: at most a sequence's context of text. */
    char *input = NULL, *sys_text = NULL;
    size_t in_len = 0;
    if (o.file && !(input = cli_read_file(o.file, &batch_input, &in_len))) {
        grammar_free(gram);
        return cli_exit_status(EXIT_BADINPUT);
    }
    cli_input sys_in = {
        .what = "the system prompt file (-sysf)", .stream = 1, .max_bytes = (size_t)1 << 40, .max_line = 0, .hint = "",
    };
    int sys_fd = -1;
    if (o.system_file && (sys_fd = cli_input_open(o.system_file, &sys_in)) < 0) {
        free(input);
        grammar_free(gram);
        return cli_exit_status(EXIT_BADINPUT);
    }
    cli_batch_item *items = NULL;
    int64_t n_items = 0;
    cli_idset done_ids = {0};
    grammar_vocab *gvocab = NULL; /* built once when some request has a grammar */
    rc = EXIT_RUNTIME;
    engine *e = NULL;
    chat_template *ct = NULL;
    sched *sc = NULL;
    int fd = STDOUT_FILENO;
    /* A UTF-8 byte order mark (editors on Windows write one) is not part of the first line. */
    size_t start = o.file && in_len >= 3 && !memcmp(input, "\xef\xbb\xbf", 3) ? 3 : 0;
    int64_t n_lines = o.file ? 0 : o.n_sequences;
    if (o.file)
        for (size_t i = start; i < in_len; i++) n_lines += input[i] == '\n';
    if (o.file && in_len > start && input[in_len - 1] != '\n') n_lines++;
    if (n_lines && !(items = calloc((size_t)n_lines, sizeof *items))) { cli_error("out of memory"); goto out; }
    for (int64_t k = 0, at = (int64_t)start; k < n_lines; k++) {
        const char *line;
        size_t len;
        if (o.file) {
            const char *nl = memchr(input + at, '\n', in_len - (size_t)at);
            line = input + at;
            len = nl ? (size_t)(nl - line) : in_len - (size_t)at;
            at += (int64_t)len + 1;
        } else {
            line = builtin_prompts[k % (int64_t)(sizeof builtin_prompts / sizeof *builtin_prompts)];
            len = strlen(line);
        }
        cli_batch_item *it = &items[n_items];
        if (request_parse(&it->req, line, len, k + 1, &o.rp)) { cli_error("out of memory"); goto out; }
        if (it->req.blank) {
            request_free(&it->req);
            continue;
        }
        if (!(it->ch = calloc((size_t)it->req.n_choices, sizeof *it->ch))) { cli_error("out of memory"); goto out; }
        for (int32_t c = 0; c < it->req.n_choices; c++) it->ch[c].it = it;
        it->line_no = k + 1;
        it->model = o.model;
        if (it->req.warning && o.log) fprintf(stderr, "batch: warning: %s\n", it->req.warning);
        n_items++;
    }
    if (check_ids(items, n_items, o.resume, o.file ? o.file : "-ns")) {
        rc = EXIT_BADINPUT;
        goto out;
    }
    if (fit_choices(items, n_items, &o)) goto out;
    /* The output before anything runs: locked for the run (a second writer is refused), read back
     * with --resume (a regular file then; without it a FIFO or a pipe is fine too). */
    if (o.output) {
        int st;
        fd = cli_output_open(o.output, o.resume ? "the --resume output (-o)" : "the output (-o)",
                             CLI_OUT_LOCK | (o.resume ? CLI_OUT_READ : CLI_OUT_STREAM), &st);
        if (fd < 0) {
            rc = st;
            goto out;
        }
    }
    if (o.resume && cli_batch_resume_load(fd, o.output, &done_ids, o.log)) { rc = cli_exit_status(EXIT_BADINPUT); goto out; }
    int64_t n_skip = 0, n_run = 0;
    for (int64_t k = 0; k < n_items; k++) {
        items[k].skip = cli_idset_has(&done_ids, items[k].req.id);
        n_skip += items[k].skip;
        n_run += !items[k].skip && !items[k].req.error;
    }
    if (n_items == 0 && o.log)
        fprintf(stderr, "batch: no requests in %s: nothing to do\n", strcmp(o.file, "-") ? o.file : "stdin");
    if (n_skip && o.log)
        fprintf(stderr, "batch: --resume: %lld of %lld requests are already in %s\n", (long long)n_skip,
                (long long)n_items, o.output);

    char err[512];
    double t0 = cli_now_ms();
    const tokenizer *tok = NULL;
    if (n_run) {
        engine_params ep = o.ep;
        int32_t n_step = ep.n_batch;
        ep.n_batch = o.n_ubatch > 0 && o.n_ubatch < n_step ? o.n_ubatch : n_step;
        cli_gpu_setup(&ep, o.log);
        int lrc = engine_load(&e, o.model, &ep, err, sizeof err);
        if (lrc) {
            cli_error("%s", err);
            rc = cli_exit_status(lrc == ENGINE_EPARAM ? EXIT_USAGE : lrc == ENGINE_EBADINPUT ? EXIT_BADINPUT
                                                                                         : EXIT_RUNTIME);
            goto out;
        }
        tok = engine_tokenizer(e);
        /* "messages": rendered with the model's chat template, loaded once when a line has them */
        for (int64_t k = 0; k < n_items; k++) {
            cli_batch_item *it = &items[k];
            if (it->skip || it->req.error || !it->req.messages) continue;
            if (!ct) {
                int st;
                if (!(ct = cli_chat_template_load(o.model, NULL, tok, &st))) { rc = st; goto out; }
            }
            if (cli_chat_request_render(&it->req, ct, tok)) { cli_error("out of memory"); goto out; }
        }
        if (cli_check_bias(&o.rp.sp, engine_n_vocab(e))) {
            rc = EXIT_USAGE;
            goto out;
        }
        if (sys_fd >= 0) {
            char hint[200];
            size_t piece = tokenizer_max_piece(tok), n_ctx = (size_t)engine_n_ctx(e);
            sys_in.max_bytes = n_ctx * (piece < 16 ? 16 : piece);
            snprintf(hint, sizeof hint, "no system prompt that long fits a sequence of %zu tokens (-c / -np)", n_ctx);
            sys_in.hint = hint;
            sys_text = cli_input_read(sys_fd, o.system_file, &sys_in, NULL);
            sys_fd = -1;
            if (!sys_text) {
                rc = cli_exit_status(EXIT_BADINPUT);
                goto out;
            }
            o.system = sys_text;
        }
        int32_t *sys_ids = NULL;
        int64_t n_sys = 0;
        if (o.system && *o.system) {
            n_sys = tokenize(tok, o.system, "", 0, &sys_ids, err, sizeof err);
            if (n_sys < 0) {
                cli_error("system prompt: %s", err);
                rc = EXIT_BADINPUT;
                goto out;
            }
            if (n_sys >= engine_n_ctx(e)) {
                cli_error("the system prompt is %lld tokens but a sequence holds %d (-c / -np): shorten it or "
                          "raise -c", (long long)n_sys, engine_n_ctx(e));
                free(sys_ids);
                rc = EXIT_USAGE;
                goto out;
            }
        }
        if ((o.warmup == 2 || (o.warmup && strcmp(engine_backend(e), "CPU"))) &&
            warmup(e, n_step, o.log, err, sizeof err)) {
            cli_error("warm-up: %s", err);
            free(sys_ids);
            rc = EXIT_RUNTIME;
            goto out;
        }
        sched_params spar = {
            .n_batch = n_step, .cont_batching = o.cont_batching, .prefix_reuse = o.prefix_reuse,
            .system = sys_ids, .n_system = (int32_t)n_sys,
        };
        sc = sched_new(e, &spar, err, sizeof err);
        free(sys_ids);
        if (!sc) { cli_error("%s", err); goto out; }
        if (o.log) {
            cli_log_memory(e);
            fprintf(stderr, "batch: %lld requests, %d parallel sequences of %d positions, backend %s%s\n",
                    (long long)n_run, engine_n_seq_max(e), engine_n_ctx(e), engine_backend(e),
                    n_sys ? ", system prompt shared" : "");
        }
        for (int64_t k = 0; k < n_items && !gvocab; k++) {
            const cli_batch_item *it = &items[k];
            if (it->skip || it->req.error || !(it->req.grammar || it->req.p.grammar)) continue;
            if (!(gvocab = constrain_vocab_new(tok, engine_n_vocab(e), err, sizeof err))) {
                cli_error("%s", err);
                goto out;
            }
        }
        for (int64_t k = 0; k < n_items; k++) {
            cli_batch_item *it = &items[k];
            if (it->skip || it->req.error) continue;
            /* a rendered conversation holds its own system message */
            int64_t n = tokenize(tok, it->req.messages ? NULL : o.system, it->req.prompt, it->req.prompt_len,
                                 &it->prompt_ids, err, sizeof err);
            if (n < 0) {
                it->req.error = strdup(err);
                if (!it->req.error) { cli_error("out of memory"); goto out; }
                continue;
            }
            it->n_prompt = n > INT32_MAX ? INT32_MAX : (int32_t)n;
            it->tok = tok;
            /* choice c samples with seed + c (llama-server's children), all from one prompt */
            uint64_t seed = it->req.p.seed >= 0 ? (uint64_t)it->req.p.seed : random_seed(k);
            for (int32_t c = 0; c < it->req.n_choices; c++) {
                cli_batch_choice *ch = &it->ch[c];
                sched_job *j = &ch->job;
                ch->seed = seed + (uint64_t)c;
                j->prompt = it->prompt_ids;
                j->n_prompt = it->n_prompt;
                j->n_predict = it->req.p.n_predict;
                j->sp = it->req.p.sp;
                j->sp.seed = ch->seed;
                j->ignore_eos = it->req.p.ignore_eos;
                j->grammar = it->req.grammar ? it->req.grammar : it->req.p.grammar;
                j->gvocab = gvocab;
                j->user = ch;
                if (it->req.n_stop) j->stop_fn = cli_batch_stop;
                j->logprobs = it->req.n_logprobs >= 0;
                j->n_logprobs = j->logprobs ? it->req.n_logprobs : 0;
                j->choice_next = c + 1 < it->req.n_choices ? &it->ch[c + 1].job : NULL;
            }
            sched_submit(sc, &it->ch[0].job);
        }
    }

    /* Lines of bad requests need no model; with --ordered each line waits for its turn. */
    out_state os = {.items = items, .n_items = n_items, .fd = fd, .ordered = o.ordered, .tok = tok};
    for (int64_t k = 0; k < n_items; k++)
        if (!items[k].skip && items[k].req.error && emit(&os, &items[k])) goto write_error;
    if (o.ordered && emit(&os, NULL)) goto write_error;
    /* from here on the requests run: the rate after the load is the engine's own (the one
     * llama.cpp's batched-bench reports), the aggregate also pays for the model load */
    const double t_run0 = cli_now_ms();
    /* Jobs refused at submission (a prompt longer than a sequence) are done before any step:
     * the queue of finished jobs is drained before the idle check, so each gets its line. */
    for (;;) {
        sched_job *j;
        while (sc && (j = sched_next_done(sc))) {
            cli_batch_item *it = ((cli_batch_choice *)j->user)->it;
            if (++it->n_finished == it->req.n_choices && emit(&os, it)) goto write_error;
        }
        if (!sc || cli_signal() || sched_idle(sc)) break;
        if (sched_step(sc, err, sizeof err)) {
            cli_error("%s", err);
            goto out;
        }
    }
    const double t_end = cli_now_ms(), t_all = t_end - t0, t_run = t_end - t_run0;
    if (o.log && sc) {
        sched_stats st = sched_get_stats(sc);
        fprintf(stderr, "batch: %lld requests done (%lld errors)%s; prompt tokens: %lld evaluated, %lld reused; "
                "%lld tokens generated in %.2f s (%.2f t/s aggregate, %lld forward passes; %.2f t/s in the "
                "%.2f s after the load)\n",
                (long long)os.n_done, (long long)os.n_err, cli_signal() ? ", interrupted" : "",
                (long long)st.n_prompt_eval, (long long)st.n_prompt_reused, (long long)st.n_gen, t_all / 1e3,
                t_all > 0 ? 1e3 * (double)st.n_gen / t_all : 0.0, (long long)st.n_steps,
                t_run > 0 ? 1e3 * (double)st.n_gen / t_run : 0.0, t_run / 1e3);
        if (st.n_decode_steps)
            fprintf(stderr, "batch: decode-only steps: %lld tokens in %lld steps, %.2f s (%.2f t/s, %.2f ms per step)\n",
                    (long long)st.n_decode_tokens, (long long)st.n_decode_steps, st.decode_ms / 1e3,
                    st.decode_ms > 0 ? 1e3 * (double)st.n_decode_tokens / st.decode_ms : 0.0,
                    st.decode_ms / (double)st.n_decode_steps);
        if (st.n_prompt_steps)
            fprintf(stderr, "batch: prompt-only steps: %lld tokens in %lld steps, %.2f s (%.2f t/s)\n",
                    (long long)st.n_prompt_step_tokens, (long long)st.n_prompt_steps, st.prompt_ms / 1e3,
                    st.prompt_ms > 0 ? 1e3 * (double)st.n_prompt_step_tokens / st.prompt_ms : 0.0);
    } else if (o.log && n_items) {
        fprintf(stderr, "batch: %lld requests done (%lld errors), no model needed\n", (long long)os.n_done,
                (long long)os.n_err);
    }
    rc = cli_signal() ? 128 + cli_signal() : 0;
    goto out;
write_error:
    if (errno == EINTR && cli_signal()) {
        rc = 128 + cli_signal();
        goto out;
    }
    if (errno == ENOMEM) cli_error("out of memory");
    else cli_error("%s: write failed: %s; the lines written so far are whole (resume with --resume)",
                   o.output ? o.output : "stdout", strerror(errno));
    rc = EXIT_RUNTIME;
out:
    if (fd >= 0 && fd != STDOUT_FILENO) close(fd);
    if (sys_fd > STDIN_FILENO) close(sys_fd);
    sched_free(sc);
    engine_free(e);
    for (int64_t k = 0; k < n_items; k++) {
        for (int32_t c = 0; items[k].ch && c < items[k].req.n_choices; c++) {
            free(items[k].ch[c].job.out);
            free(items[k].ch[c].job.lp);
            free(items[k].ch[c].job.lp_top);
            free(items[k].ch[c].stop_tail.s);
        }
        free(items[k].ch);
        request_free(&items[k].req);
        free(items[k].prompt_ids);
        free(items[k].line);
    }
    chat_template_free(ct);
    free(items);
    cli_idset_free(&done_ids);
    free(input);
    free(sys_text);
    grammar_vocab_free(gvocab);
    grammar_free(gram);
    return rc;
}
