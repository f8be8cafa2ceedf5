/* mgi run: generate text from a prompt (-p, -f, or stdin), streaming the pieces to stdout as
 * they are sampled; load and speed figures go to stderr as llama.cpp prints them. With
 * --prompt-cache the KV state after the prompt is saved, and the longest matching prefix of a
 * saved state is reused by the next run. -cnv/-st converse through the chat template instead
 * (cli/chat.c). SIGINT/SIGTERM stop generation cleanly (130/143). */
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
#include "engine/promptcache.h"
#include "engine/sampler.h"

static const char run_usage[] =
    "usage: mgi [run] -m MODEL [-p PROMPT | -f FILE] [flags]   (the prompt is read from stdin when\n"
    "       neither -p nor -f is given; one trailing newline of a file or stdin is dropped)\n"
    "  -m,   --model PATH         GGUF model file (required)\n"
    "  -p,   --prompt TEXT        prompt text\n"
    "  -f,   --file PATH          read the prompt from a file\n"
    "  -n,   --n-predict N        tokens to generate; -1 (or llama.cpp's -2) = until end of text or\n"
    "                             context full (default -1)\n"
    "  -c,   --ctx-size N         context length in tokens (of each sequence with -np); 0 = the\n"
    "                             model's (default 0)\n"
    "  -b,   --batch-size N       prompt tokens per forward batch (default 2048)\n"
    "  -s,   --seed N             sampling seed; -1 = random, printed to stderr (default -1)\n"
    "  -np,  --parallel N         N continuations of the prompt (1..128), as llama-batched: the prompt\n"
    "                             evaluated once, the N decoded together, sequence i with seed + i - 1;\n"
    "                             each printed whole after a line \"--- sequence I of N ---\" (default 1)\n"
    "        --jsonl              print each sequence as one JSON line instead: {index (from 0), text,\n"
    "                             tokens, n_tokens, finish_reason, n_prompt, seed} (default off)\n"
    CLI_SAMPLING_USAGE
    CLI_GRAMMAR_USAGE
    "  -e,   --escape             turn \\n \\r \\t \\' \\\" \\\\ and \\xNN in the prompt into those characters,\n"
    "                             as llama.cpp does (default on; also for -f and stdin)\n"
    "        --no-escape          take the prompt literally\n"
    "  -r,   --reverse-prompt TEXT  stop once the text ends in TEXT (printed; repeatable), as llama-cli\n"
    "                             does without -i\n"
    "  -sp,  --special            print control tokens' text (such as </s>) among the output\n"
    "        --verbose-prompt     list the prompt's tokens (id -> 'piece') on stderr before generating\n"
    "        --prompt-cache FILE  reuse the KV state of a matching prompt prefix from FILE and save the\n"
    "                             state after this prompt there (a bad or foreign file is ignored)\n"
    "        --prompt-cache-ro    use --prompt-cache FILE but never write it (default off)\n"
    "  -t,   --threads N          CPU threads (default min(CPUs, 8))\n"
    "  -tb,  --threads-batch N    CPU threads for passes of several tokens (prompts); -1 = -t (default)\n"
    CLI_GPU_USAGE
    "        --no-mmap            read the model into memory instead of mapping it (default mmap)\n"
    "        --mlock              keep the model's file locked in RAM, as llama.cpp (a refusal by\n"
    "                             the limits is a warning; default off)\n"
    "        --echo               print the prompt before the generated text (default off)\n"
    "        --log-disable        no load, seed and timing lines on stderr (default off)\n"
    "  -fa,  --flash-attn [on|off|auto]  accepted for llama.cpp compatibility: mgi's attention is\n"
    "                             always the fused kind (off changes nothing, and says so)\n"
    CLI_CHAT_USAGE
    "  -no-cnv, --no-conversation, --no-warmup  accepted for llama-cli compatibility: no conversation\n"
    "                             (the default) and no warm-up pass (-i is refused: use -cnv)\n"
    "  -h,   --help               this text\n";

/* -r: how many, and the longest each may be (after escapes) */
enum { RUN_MAX_REVERSE = 16, RUN_REVERSE_MAX_LEN = 256 };

typedef struct {
    const char *model, *prompt, *file, *prompt_cache;
    const char *rev_arg[RUN_MAX_REVERSE];                 /* -r as given */
    char rev[RUN_MAX_REVERSE][RUN_REVERSE_MAX_LEN];      /* its texts, escapes processed (llama.cpp's too) */
    size_t rev_len[RUN_MAX_REVERSE];
    int n_reverse;
    int n_predict, n_parallel;
    int64_t seed;
    bool ignore_eos, echo, log, prompt_cache_ro, no_escape, special, verbose_prompt, jsonl;
    engine_params ep;
    sampler_params sp;
    cli_chat_opts chat;  /* -cnv, -st, -sys, ... (cli/chat.c) */
    cli_grammar gram;  /* --grammar, -j, ... */
} run_opts;

/* Parses argv into o; 0, 1 for --help (printed), -1 on a usage error (printed). */
static int parse(int argc, char **argv, run_opts *o) {
    o->ep = engine_default_params();
    o->sp = sampler_default_params();
    o->n_predict = -1;
    o->n_parallel = 1;
    o->seed = -1;
    o->log = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int g;
#define VALUE() do { if (!(v = cli_value(argc, argv, &i))) return -1; } while (0)
        int sf = cli_sampling_flag(argc, argv, &i, &o->sp);
        if (sf) {
            if (sf < 0) return -1;
        } else if (cli_is_flag(a, "-h", "--help")) {
            fputs(run_usage, stdout);
            return 1;
        } else if (cli_is_flag(a, "-m", "--model")) { VALUE(); o->model = v;
        } else if (cli_is_flag(a, "-p", "--prompt")) { VALUE(); o->prompt = v;
        } else if (cli_is_flag(a, "-f", "--file")) { VALUE(); o->file = v;
        } else if (cli_is_flag(a, "-n", "--n-predict")) {
            VALUE();
            if (cli_parse_int(a, v, -2, 1 << 30, &o->n_predict)) return -1;
            if (o->n_predict == -2) o->n_predict = -1; /* llama.cpp's "until the context is full": -1 here */
        } else if (cli_is_flag(a, "-s", "--seed")) {
            VALUE();
            if (cli_parse_i64(a, v, -1, INT64_MAX, &o->seed)) return -1;
        } else if ((g = cli_engine_flag(argc, argv, &i, &o->ep))) {
            if (g < 0) return -1;
        } else if ((g = cli_grammar_flag(argc, argv, &i, &o->gram))) {
            if (g < 0) return -1;
        } else if (cli_is_flag(a, "-np", "--parallel")) {
            VALUE();
            if (cli_parse_int(a, v, 1, REQUEST_MAX_N, &o->n_parallel)) return -1;
        } else if (cli_is_flag(a, "--jsonl", NULL)) { o->jsonl = true;
        } else if (cli_is_flag(a, "--ignore-eos", NULL)) { o->ignore_eos = true;
        } else if (cli_is_flag(a, "--prompt-cache", NULL)) { VALUE(); o->prompt_cache = v;
        } else if (cli_is_flag(a, "--prompt-cache-ro", NULL)) { o->prompt_cache_ro = true;
        } else if (cli_is_flag(a, "--echo", NULL)) { o->echo = true;
        } else if (cli_is_flag(a, "--log-disable", NULL)) { o->log = false;
        } else if (cli_is_flag(a, "-e", "--escape")) { o->no_escape = false;
        } else if (cli_is_flag(a, "--no-escape", NULL)) { o->no_escape = true;
        } else if (cli_is_flag(a, "-sp", "--special")) { o->special = true;
        } else if (cli_is_flag(a, "-r", "--reverse-prompt")) {
            VALUE();
            if (!*v) { cli_error("%s: an empty reverse prompt would stop at once; give some text", a); return -1; }
            if (o->n_reverse == RUN_MAX_REVERSE) { cli_error("%s: at most %d reverse prompts", a, RUN_MAX_REVERSE); return -1; }
            o->rev_arg[o->n_reverse++] = v;
        } else if (cli_is_flag(a, "--verbose-prompt", NULL)) { o->verbose_prompt = true;
        } else if (cli_is_flag(a, "-no-cnv", "--no-conversation") || cli_is_flag(a, "--no-warmup", NULL)) {
            /* what mgi run does anyway: one generation from the prompt, no warm-up pass */
        } else if ((g = cli_chat_flag(argc, argv, &i, &o->chat))) {
            if (g < 0) return -1;
        } else if (cli_is_flag(a, "-i", "--interactive") || cli_is_flag(a, "-if", "--interactive-first")) {
            cli_error("%s: mgi run has no raw interactive mode: use -cnv for a conversation through the chat "
                      "template (user turns on stdin), or mgi batch for many prompts", a);
            return -1;
        } else {
            cli_error("unknown flag '%s' (see mgi run --help)", a);
            return -1;
        }
#undef VALUE
    }
    /* Validation, once every flag is known. */
    if (!o->model) { cli_error("-m/--model is required (see mgi run --help)"); return -1; }
    if (o->prompt && o->file) { cli_error("-p and -f both given: use one prompt source"); return -1; }
    if (o->n_predict == 0) {
        cli_error("-n 0 generates nothing: give a count >= 1, or -1 for until end of text");
        return -1;
    }
    if (cli_sampling_check(&o->sp)) return -1;  /* repeat_last_n -1 is resolved with the context */
    for (int k = 0; k < o->n_reverse; k++) {
        char tmp[4 * RUN_REVERSE_MAX_LEN]; /* an escape is 2 to 4 bytes for 1 */
        size_t n = strlen(o->rev_arg[k]);
        if (n <= sizeof tmp) {
            memcpy(tmp, o->rev_arg[k], n);
            if (!o->no_escape) n = cli_process_escapes(tmp, n);
        }
        if (n > RUN_REVERSE_MAX_LEN) {
            cli_error("-r: a reverse prompt of %zu bytes; at most %d", n, RUN_REVERSE_MAX_LEN);
            return -1;
        }
        memcpy(o->rev[k], tmp, n);
        o->rev_len[k] = n;
    }
    if (cli_chat_check(&o->chat)) return -1;
    if (o->chat.on && (o->prompt_cache || o->n_reverse || o->echo)) {
        cli_error("%s: not used in a conversation (-cnv/-st), whose turns end at the end-of-turn token",
                  o->prompt_cache ? "--prompt-cache" : o->n_reverse ? "-r/--reverse-prompt" : "--echo");
        return -1;
    }
    if ((o->n_parallel > 1 || o->jsonl) && (o->chat.on || o->prompt_cache || o->n_reverse)) {
        cli_error("%s with %s is not supported: -np/--jsonl continue one plain prompt (for chat or stop "
                  "strings with n choices, use mgi batch with \"messages\", \"stop\" and \"n\")",
                  o->n_parallel > 1 ? "-np" : "--jsonl",
                  o->chat.on ? "-cnv/-st" : o->prompt_cache ? "--prompt-cache" : "-r/--reverse-prompt");
        return -1;
    }
    if (o->n_parallel > 1) { /* each sequence holds -c positions */
        o->ep.n_seq_max = o->n_parallel;
        if ((int64_t)o->ep.n_ctx * o->n_parallel > INT32_MAX) {
            cli_error("-c %d x -np %d: more KV cells than mgi holds; lower -c", o->ep.n_ctx, o->n_parallel);
            return -1;
        }
        o->ep.n_ctx *= o->n_parallel;
    }
    if (o->prompt_cache_ro && !o->prompt_cache) {
        cli_error("--prompt-cache-ro needs --prompt-cache FILE");
        return -1;
    }
    return 0;
}

/* Where -f or stdin's prompt comes from: a file or a stream, read once the model is loaded and its
 * context known; before that only opened, so a missing file fails before a long load. */
static cli_input prompt_input(const run_opts *o) {
    cli_input in = {
        .what = o->file ? "the prompt file (-f)" : "the prompt on standard input", .stream = 1,
        .max_bytes = (size_t)1 << 40, .max_line = 0, .hint = "",
    };
    return in;
}

/* The prompt text: -p as given; -f or stdin (fd, opened by the caller) without one trailing
 * newline, at most the context's worth of text: no token is longer than the vocabulary's longest
 * piece, so more bytes than n_ctx of those (times 4 for \xNN escapes) cannot fit. Then, unless
 * --no-escape, llama.cpp's escapes processed (it does so for -p and -f alike). NULL after a
 * message. */
static char *read_prompt(const run_opts *o, int fd, const engine *e, size_t *len) {
    char *text, hint[200];
    if (o->prompt) {
        *len = strlen(o->prompt);
        if (!(text = strdup(o->prompt))) cli_error("out of memory");
    } else {
        cli_input in = prompt_input(o);
        size_t piece = tokenizer_max_piece(engine_tokenizer(e)), n_ctx = (size_t)engine_n_ctx(e);
        if (piece < 16) piece = 16;
        in.max_bytes = n_ctx * piece * (o->no_escape ? 1 : 4) + 1;
        snprintf(hint, sizeof hint, "no prompt that long fits a context of %zu tokens: shorten it or raise -c "
                 "(at most the model's %d)", n_ctx, engine_hparams(e)->n_ctx_train);
        in.hint = hint;
        text = cli_input_read(fd, o->file ? o->file : "stdin", &in, len);
        if (text && *len && text[*len - 1] == '\n') text[--*len] = 0;
    }
    if (text && !o->no_escape) text[*len = cli_process_escapes(text, *len)] = 0;
    return text;
}

/* Positions of the prompt taken from the cache file (0 when none), loaded into sequence 0. A
 * file that cannot be trusted is reported in one line and ignored. */
static int32_t cache_load(engine *e, const run_opts *o, const int32_t *ids, int32_t n_prompt) {
    promptcache pc;
    promptcache_model m = promptcache_model_of(e);
    char err[512];
    int rc = promptcache_read(&pc, o->prompt_cache, &m, err, sizeof err);
    if (rc) {
        if (rc < 0) cli_error("prompt cache %s: %s; ignored, the prompt is computed afresh", o->prompt_cache, err);
        else if (o->log) fprintf(stderr, "prompt cache %s: not there yet; it is written after the prompt\n",
                                 o->prompt_cache);
        return 0;
    }
    int32_t same = 0;
    while (same < pc.n_tokens && same < n_prompt && pc.tokens[same] == ids[same]) same++;
    if (same > n_prompt - 1) same = n_prompt - 1;  /* the last prompt token gives the first logits */
    if (same > 0 && promptcache_apply(e, 0, &pc, same, err, sizeof err)) {
        cli_error("prompt cache %s: %s; ignored, the prompt is computed afresh", o->prompt_cache, err);
        same = 0;
    }
    if (o->log)
        fprintf(stderr, "prompt cache %s: reused %d of %d prompt tokens\n", o->prompt_cache, same, n_prompt);
    promptcache_free(&pc);
    return same;
}

/* The end of the text so far (the prompt, then each generated token's piece) for -r: llama-cli
 * without -i stops once a reverse prompt stands in the last (its length + 2) bytes of its recent
 * output, checked after each generated token. */
enum { RUN_TAIL = 2 * RUN_REVERSE_MAX_LEN };
typedef struct {
    char buf[RUN_TAIL];
    size_t len;
} run_tail;

static void tail_add(run_tail *t, const char *p, size_t n) {
    if (n >= RUN_TAIL) {
        memcpy(t->buf, p + n - RUN_TAIL, RUN_TAIL);
        t->len = RUN_TAIL;
        return;
    }
    if (t->len + n > RUN_TAIL) {
        size_t drop = t->len + n - RUN_TAIL;
        memmove(t->buf, t->buf + drop, t->len - drop);
        t->len -= drop;
    }
    memcpy(t->buf + t->len, p, n);
    t->len += n;
}

/* Whether text r (n bytes) stands in the last n + 2 bytes of the tail. */
static bool tail_has(const run_tail *t, const char *r, size_t n) {
    size_t from = t->len > n + 2 ? t->len - (n + 2) : 0;
    for (size_t i = from; i + n <= t->len; i++)
        if (!memcmp(t->buf + i, r, n)) return true;
    return false;
}

/* Writes a token's text as soon as it is whole (with --special a control token's own text, after
 * any bytes held back for it); nonzero once stdout has failed (a full disk), so generation stops
 * instead of computing text nobody can read (main reports the error). */
static int put_token(const tokenizer *tok, tokenizer_stream *st, int32_t id, bool special) {
    char buf[512];
    size_t n;
    if (special && tokenizer_is_control(tok, id)) {
        n = tokenizer_stream_flush(st, buf, sizeof buf);
        fwrite(buf, 1, n, stdout);
        const char *t = tokenizer_text(tok, id, &n);
        fwrite(t, 1, n, stdout);
    } else {
        n = tokenizer_stream_put(tok, st, id, buf, sizeof buf);
        fwrite(buf, 1, n, stdout);
    }
    fflush(stdout);
    return ferror(stdout);
}

static void print_timing(const char *what, double ms, int n, const char *unit) {
    fprintf(stderr, "%16s = %10.2f ms / %5d %-6s (%8.2f ms per token, %8.2f tokens per second)\n", what, ms,
            n, unit, n ? ms / n : 0.0, ms > 0 ? 1e3 * n / ms : 0.0);
}

/* The sampler of o's flags for e (the seed chosen when -s is -1); NULL after a message, with *rc
 * the exit status. */
static sampler *make_sampler(run_opts *o, engine *e, uint64_t *seed_out, int *rc) {
    char err[512];
    const tokenizer *tok = engine_tokenizer(e);
    int32_t n_vocab = engine_n_vocab(e);
    uint64_t seed = (uint64_t)o->seed;
    if (o->seed < 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32)) &
               0xffffffffULL;
    }
    o->sp.seed = *seed_out = seed;
    if (o->sp.repeat_last_n < 0) o->sp.repeat_last_n = engine_n_ctx(e);
    *rc = EXIT_USAGE;
    if (cli_check_bias(&o->sp, n_vocab)) return NULL;
    *rc = EXIT_RUNTIME;
    sampler *smp = sampler_new(&o->sp, n_vocab, err, sizeof err);
    if (!smp) {
        cli_error("%s", err);
        return NULL;
    }
    if (o->ignore_eos) { /* llama.cpp: the end-of-generation tokens' logits biased to -inf */
        const int32_t *eog;
        int n_eog = tokenizer_eog_ids(tok, &eog);
        sampler_skip(smp, eog, n_eog); /* at most TOKENIZER_MAX_EOG == SAMPLER_MAX_SKIP */
        engine_greedy_no_eog(e, 1);
    }
    return smp;
}

/* -cnv / -st: the first turn from -p or -f (or stdin with -st), the rest from stdin. */
static int run_chat(run_opts *o, engine *e, int fd) {
    cli_chat_gen g = {.n_predict = o->n_predict, .log = o->log, .no_escape = o->no_escape, .special = o->special,
                      .ignore_eos = o->ignore_eos, .verbose_prompt = o->verbose_prompt};
    char *first = NULL;
    int rc;
    if (fd >= 0 || o->prompt) {
        if (!(first = read_prompt(o, fd, e, &g.first_len))) return cli_exit_status(EXIT_BADINPUT);
        g.first = first;
    }
    uint64_t seed;
    struct chat_template *ct = cli_chat_template_load(o->model, o->chat.template_file, engine_tokenizer(e), &rc);
    if (!ct || !(g.smp = make_sampler(o, e, &seed, &rc))) {
        chat_template_free(ct);
        free(first);
        return rc;
    }
    if (o->log && chat_template_is_default(ct) && !o->chat.template_file)
        fprintf(stderr, "chat: %s has no tokenizer.chat_template: ChatML, as llama.cpp\n", o->model);
    if (o->log) {
        cli_log_memory(e);
        fprintf(stderr, "seed: %llu\nchat: context %d, backend %s\n", (unsigned long long)seed, engine_n_ctx(e),
                engine_backend(e));
    }
    rc = cli_chat_converse(e, ct, &o->chat, &g);
    chat_template_free(ct);
    sampler_free(g.smp);
    free(first);
    return rc;
}

int cli_run(int argc, char **argv) {
    run_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc > 0 ? 0 : EXIT_USAGE;
    cli_catch_signals();
    /* the grammar before the model: a bad one costs no load */
    int g_status;
    grammar *gram = cli_grammar_compile(&o.gram, &g_status);
    if (g_status) return g_status;
    if (gram && o.chat.on) { /* a conversation's turns would each need their own grammar state */
        cli_error("%s with -cnv/-st is not supported: constrain a single prompt (without -cnv), or use "
                  "mgi batch with \"messages\" and \"json_schema\"", o.gram.flag);
        grammar_free(gram);
        return EXIT_USAGE;
    }

    /* --prompt-cache names a file that mgi reads and replaces whole (a temporary file renamed over
     * it): anything else there (a device node, a FIFO, a directory) is left alone, with one line. */
    int pc_check = o.prompt_cache && !o.prompt_cache_ro ? cli_output_check(o.prompt_cache, "the prompt cache") : 0;
    if (pc_check < 0) o.prompt_cache = NULL;
    if (pc_check > 0) o.prompt_cache_ro = true;
    int fd = -1;
    /* a conversation reads its turns from stdin, line by line, unless -st takes stdin as the one prompt */
    if (!o.prompt && !(o.chat.on && !o.chat.single_turn && !o.file)) {
        if (!o.file && isatty(STDIN_FILENO)) {
            cli_error("no prompt: give -p TEXT or -f FILE, or pipe text on stdin");
            grammar_free(gram);
            return EXIT_USAGE;
        }
        cli_input in = prompt_input(&o);
        if ((fd = cli_input_open(o.file ? o.file : "-", &in)) < 0) {
            grammar_free(gram);
            return cli_exit_status(EXIT_BADINPUT);
        }
    }

    char err[512];
    double t0 = cli_now_ms();
    engine *e;
    cli_gpu_setup(&o.ep, o.log);
    int lrc = engine_load(&e, o.model, &o.ep, err, sizeof err);
    if (lrc) {
        cli_error("%s", err);
        if (fd > STDIN_FILENO) close(fd);
        grammar_free(gram);
        return cli_exit_status(lrc == ENGINE_EPARAM ? EXIT_USAGE : lrc == ENGINE_EBADINPUT ? EXIT_BADINPUT : EXIT_RUNTIME);
    }
    double t_load = cli_now_ms() - t0;
    if (o.chat.on) {
        rc = run_chat(&o, e, fd);
        engine_free(e);
        return rc;
    }
    size_t text_len = 0;
    char *text = read_prompt(&o, fd, e, &text_len);
    if (!text) {
        engine_free(e);
        grammar_free(gram);
        return cli_exit_status(EXIT_BADINPUT);
    }
    const tokenizer *tok = engine_tokenizer(e);
    int32_t n_ctx = engine_n_ctx(e), n_vocab = engine_n_vocab(e);

    int32_t *ids = NULL;
    float *logits = NULL;
    sampler *smp = NULL;
    grammar_vocab *gvocab = NULL;
    rc = EXIT_BADINPUT;
    bool add_bos = tokenizer_add_bos(tok) && tokenizer_bos(tok) >= 0;
    int64_t cap = (int64_t)text_len + 8, n_prompt = -1;
    int32_t n_cached = 0;
    int cache_failed = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        free(ids);
        if (!(ids = malloc((size_t)cap * sizeof *ids))) break;
        n_prompt = tokenizer_encode(tok, text, text_len, add_bos, true, ids, cap, err, sizeof err);
        if (n_prompt <= cap) break;
        cap = n_prompt;
    }
    logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!ids || !logits) { cli_error("out of memory"); rc = EXIT_RUNTIME; goto out; }
    /* the backend's own logits buffer where it has one: no copy out of it per token */
    float *lg = engine_logits_buffer(e, 1);
    if (!lg) lg = logits;
    if (n_prompt < 0 || n_prompt > cap) { cli_error("prompt: %s", err); goto out; }
    if (n_prompt > n_ctx) {
        cli_error("the prompt is %lld tokens but the context holds %d: shorten it or raise -c (at most "
                  "the model's %d)", (long long)n_prompt, n_ctx, engine_hparams(e)->n_ctx_train);
        goto out;
    }
    if (n_prompt == 0) {
        cli_error("the prompt is empty and this vocabulary adds no BOS token: give a prompt");
        goto out;
    }

    uint64_t seed;
    if (!(smp = make_sampler(&o, e, &seed, &rc))) goto out;
    rc = EXIT_RUNTIME;
    if (gram && (!(gvocab = constrain_vocab_new(tok, n_vocab, err, sizeof err)) ||
                 constrain_attach(smp, gram, gvocab, tok, err, sizeof err))) {
        cli_error("%s", err);
        goto out;
    }
    if (o.log) {
        cli_log_memory(e);
        fprintf(stderr, "seed: %llu\n", (unsigned long long)seed);
        fprintf(stderr, "prompt: %lld tokens, context %d, backend %s\n", (long long)n_prompt, n_ctx,
                engine_backend(e));
    }
    run_tail tail = {.len = 0};
    tail_add(&tail, text, text_len);
    if (o.verbose_prompt) {
        fprintf(stderr, "prompt tokens: %lld\n", (long long)n_prompt);
        for (int64_t i = 0; i < n_prompt; i++) cli_print_piece(stderr, tok, ids[i]);
    }
    if (o.n_parallel > 1 || o.jsonl) {
        cli_parallel_gen pg = {
            .prompt = ids, .n_prompt = (int32_t)n_prompt, .text = text, .text_len = text_len, .n_seq = o.n_parallel,
            .n_predict = o.n_predict, .n_batch = o.ep.n_batch, .sp = o.sp, .grammar = gram, .gvocab = gvocab,
            .ignore_eos = o.ignore_eos, .special = o.special, .echo = o.echo, .jsonl = o.jsonl, .log = o.log,
            .t_load = t_load,
        };
        rc = cli_run_parallel(e, &pg);
        goto out;
    }
    if (o.echo) {
        fwrite(text, 1, text_len, stdout);
        fflush(stdout);
    }

    /* Greedy without penalties: the backend picks each token (on a GPU only ids come back). */
    int greedy = sampler_is_greedy(smp);
    int32_t next = 0;
    double t1 = cli_now_ms();
    n_cached = o.prompt_cache ? cache_load(e, &o, ids, (int32_t)n_prompt) : 0;
    if (greedy ? engine_eval_greedy(e, ids + n_cached, (int32_t)n_prompt - n_cached, n_cached, &next, err, sizeof err)
               : engine_eval(e, ids + n_cached, (int32_t)n_prompt - n_cached, n_cached, lg, 0, err, sizeof err)) {
        cli_error("%s", err);
        goto out;
    }
    double t_prompt = cli_now_ms() - t1;
    /* Saved unless it would only repeat what the file holds (the whole prompt matched). */
    if (o.prompt_cache && !o.prompt_cache_ro && n_cached < n_prompt - 1) {
        if (promptcache_save(o.prompt_cache, e, 0, ids, (int32_t)n_prompt, err, sizeof err)) {
            /* Generation goes on (the text is the product), but the exit status says the cache
             * the user asked for was not written. */
            cli_error("prompt cache %s: %s; nothing was written", o.prompt_cache, err);
            cache_failed = 1;
        }
        else if (o.log)
            fprintf(stderr, "prompt cache %s: saved %lld prompt tokens\n", o.prompt_cache, (long long)n_prompt);
    }
    for (int64_t i = 0; i < n_prompt; i++) sampler_accept(smp, ids[i]);

    tokenizer_stream st = {0};
    int32_t pos = (int32_t)n_prompt;
    int n_gen = 0, n_eval = 0;
    double t2 = cli_now_ms();
    for (;;) {
        if (cli_signal()) break;
        int32_t id = greedy ? next : sampler_sample(smp, lg);
        if (id < 0) { /* only with a grammar: it left no token to pick */
            cli_error("%s %s", o.gram.flag, sampler_error(smp));
            rc = EXIT_BADINPUT;
            goto out;
        }
        sampler_accept(smp, id);
        if (!o.ignore_eos && tokenizer_is_eog(tok, id)) {
            if (o.special) put_token(tok, &st, id, true); /* as llama-cli -sp shows the end token */
            break;
        }
        if (put_token(tok, &st, id, o.special)) break;
        if (o.n_reverse) {
            size_t pl;
            const char *piece = cli_token_text(tok, id, &pl); /* llama-cli's recent text shows control tokens */
            tail_add(&tail, piece, pl);
            bool hit = false;
            for (int k = 0; k < o.n_reverse && !hit; k++) hit = tail_has(&tail, o.rev[k], o.rev_len[k]);
            if (hit) {
                n_gen++;
                break;
            }
        }
        n_gen++;
        if (sampler_grammar_done(smp)) break; /* a whole sentence that only an end token can follow */
        if (o.n_predict > 0 && n_gen >= o.n_predict) break;
        if (pos >= n_ctx) {
            if (o.log) fprintf(stderr, "\ncontext full (%d tokens, -c): stopping\n", n_ctx);
            break;
        }
        /* the next step launched during this one while another surely follows (EOS may still
         * end the text: the launched step is then run on a placeholder at engine_free) */
        engine_decode_ahead(e, (o.n_predict <= 0 || n_gen + 1 < o.n_predict) && pos + 1 < n_ctx);
        if (greedy ? engine_eval_greedy(e, &id, 1, pos, &next, err, sizeof err)
                   : engine_eval(e, &id, 1, pos, lg, 0, err, sizeof err)) {
            cli_error("%s", err);
            goto out;
        }
        pos++;
        n_eval++;
    }
    double t_gen = cli_now_ms() - t2;
    char rest[64];
    size_t nr = tokenizer_stream_flush(&st, rest, sizeof rest);
    fwrite(rest, 1, nr, stdout);
    fflush(stdout);
    if (cli_signal() && o.log) fprintf(stderr, "\ninterrupted after %d tokens\n", n_gen);
    if (o.log) {
        fprintf(stderr, "\n%16s = %10.2f ms\n", "load time", t_load);
        print_timing("prompt eval time", t_prompt, (int)n_prompt - n_cached, "tokens");
        print_timing("eval time", t_gen, n_eval, "runs");
        fprintf(stderr, "%16s = %10.2f ms / %5d tokens\n", "total time", cli_now_ms() - t0, (int)n_prompt + n_eval);
    }
    rc = cli_signal() ? 128 + cli_signal() : cache_failed ? EXIT_RUNTIME : 0;
out:
    sampler_free(smp);
    grammar_vocab_free(gvocab);
    grammar_free(gram);
    free(logits);
    free(ids);
    free(text);
    engine_free(e);
    return rc;
}
