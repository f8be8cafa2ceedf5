/* Subcommands of mgi (one file each) and the small argument helpers they share.
 * Exit codes: 0 success, 1 usage error, 2 bad input (file, model), 3 runtime failure. */
#ifndef MGI_CLI_H
#define MGI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/grammar.h"

#include "engine/sampler.h"
#include "engine/tokenizer.h"

enum { EXIT_USAGE = 1, EXIT_BADINPUT = 2, EXIT_RUNTIME = 3 };

int cli_run(int argc, char **argv);         /* cli/run.c: generate text */
int cli_info(int argc, char **argv);        /* cli/info.c: metadata, tensors, values */
int cli_tokenize(int argc, char **argv);    /* cli/tokenize.c: token ids */
int cli_perplexity(int argc, char **argv);  /* cli/perplexity.c: llama-perplexity's method */
int cli_devices(int argc, char **argv);     /* cli/devices.c: CUDA devices */
int cli_batch(int argc, char **argv);       /* cli/batch.c: many prompts, parallel sequences */
int cli_bench(int argc, char **argv);       /* cli/bench.c: llama-bench's tests and tables */
int cli_template(int argc, char **argv);    /* cli/template.c: render a chat template */

/* The build's version, `git describe` at build time (cli/main.c). */
const char *cli_version(void);

/* Argument helpers (cli/args.c). Each prints "mgi: FLAG: why" to stderr and returns -1 on a
 * bad value, 0 on success. */
int cli_parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_int(const char *flag, const char *s, int lo, int hi, int *out);
int cli_parse_f32(const char *flag, const char *s, float lo, float hi, float *out);
/* The value after flag argv[*i]; advances *i. NULL (with a message) when missing. */
const char *cli_value(int argc, char **argv, int *i);
/* llama.cpp's escape processing of prompts (common's string_process_escapes, on by default there
 * and here; --no-escape turns it off): \n \r \t \' \" \\ and \xNN become their characters, in
 * place; returns the new length. */
size_t cli_process_escapes(char *s, size_t len);
/* A token's text as llama.cpp shows it with special tokens on: a control token's own text
 * ("</s>"), else its piece. */
const char *cli_token_text(const tokenizer *t, int32_t id, size_t *len);
/* One token as llama-tokenize lists it: "%6d -> 'piece'", with cli_token_text. */
void cli_print_piece(FILE *f, const tokenizer *t, int32_t id);
/* llama.cpp's -fa/--flash-attn at argv[*i], with its optional value (on|off|auto and their
 * synonyms; consumed, *i advanced) or bare (older llama.cpp: on). mgi's attention is always
 * fused, so nothing changes; off gets a note on stderr saying so. */
void cli_flash_attn_flag(int argc, char **argv, int *i);
/* 1 when argument a is the short or (when not NULL) the long name of a flag. */
int cli_is_flag(const char *a, const char *short_name, const char *long_name);
/* Monotonic clock in milliseconds, for the timing lines. */
double cli_now_ms(void);
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The sampling flags that run and batch share (--temp, --top-k, --top-p, --min-p,
 * --repeat-penalty, --presence-penalty, --frequency-penalty, --repeat-last-n, -l/--logit-bias
 * ID+BIAS, repeatable): 1 when argv[*i]
 * was one (value consumed into sp, *i advanced), 0 when it is another flag, -1 on a bad value
 * (printed). */
int cli_sampling_flag(int argc, char **argv, int *i, sampler_params *sp);
/* The usage lines of those flags and --ignore-eos (run and batch). */
#define CLI_SAMPLING_USAGE \
    "        --temp F             temperature; 0 = greedy (default 0.8)\n" \
    "        --top-k N            keep the k most likely tokens; 0 = off (default 40)\n" \
    "        --top-p F            keep the smallest set reaching probability p; 1 = off (default 0.95)\n" \
    "        --min-p F            drop tokens below p x the top probability; 0 = off (default 0.05)\n" \
    "        --repeat-penalty F   penalty for recent tokens; 1 = off (default 1.0)\n" \
    "        --presence-penalty F minus F for a token among the recent ones; 0 = off (default 0.0)\n" \
    "        --frequency-penalty F  minus F per time a token occurs among the recent ones; 0 = off\n" \
    "                             (default 0.0)\n" \
    "        --repeat-last-n N    tokens the penalties look back; 0 = off, -1 = context (default 64)\n" \
    "        --ignore-eos         never pick the end-of-text token(s): generate -n tokens (as llama.cpp,\n" \
    "                             whose logit bias is -inf for them; default off)\n" \
    "  -l,   --logit-bias ID+B    add B (or with ID-B subtract it; inf: never pick) to token ID's logit\n" \
    "                             first, e.g. -l 15043+1 -l 2-inf (repeatable)\n"
/* -l's token ids against the loaded model's vocabulary; 0, or -1 with the message printed. */
int cli_check_bias(const sampler_params *sp, int32_t n_vocab);
/* Checks the sampling values once all flags are read; 0, or -1 with the message printed. */
int cli_sampling_check(const sampler_params *sp);

/* Structured output (cli/grammar_flags.c): llama.cpp's --grammar GBNF, --grammar-file FILE,
 * -j/--json-schema JSON, -jf/--json-schema-file FILE; at most one kind per run. */
enum { CLI_GRAMMAR_GBNF = 1, CLI_GRAMMAR_GBNF_FILE, CLI_GRAMMAR_SCHEMA, CLI_GRAMMAR_SCHEMA_FILE };
typedef struct {
    const char *flag;  /* as given, for messages; NULL: no constraint */
    const char *value; /* the text or the file's path */
    int kind;          /* CLI_GRAMMAR_* */
} cli_grammar;
/* 1 when argv[*i] was one of those flags (value consumed, *i advanced), 0 when another flag, -1
 * on a missing value or a second kind of constraint (printed). */
int cli_grammar_flag(int argc, char **argv, int *i, cli_grammar *g);
/* The compiled grammar; NULL with *status 0 when no flag was given, NULL with one line naming
 * the flag printed and *status the exit code (2: bad grammar, schema or file). */
grammar *cli_grammar_compile(const cli_grammar *g, int *status);
#define CLI_GRAMMAR_USAGE \
    "        --grammar GBNF       constrain the text to a GBNF grammar (llama.cpp's syntax; start rule\n" \
    "                             root; default none)\n" \
    "        --grammar-file FILE  the grammar from a file\n" \
    "  -j,   --json-schema JSON   constrain the text to JSON valid under a JSON Schema, e.g. '{}' for any\n" \
    "                             JSON (default none; one of --grammar, --grammar-file, -j, -jf)\n" \
    "  -jf,  --json-schema-file FILE  the schema from a file\n"

/* Signals (cli/signals.c). SIGINT and SIGTERM set a flag instead of killing the process, so a
 * subcommand can flush what it has and exit 128 + the signal (130, 143); without SA_RESTART, so a
 * blocking open() or read() returns EINTR. cli_signal() is the signal caught, or 0.
 * cli_catch_sigbus: a SIGBUS from a model's memory map (the file truncated under it) ends mgi with
 * one line naming the file and exit 3. */
void cli_catch_signals(void);
int cli_signal(void);
void cli_catch_sigbus(void);
/* rc, or 128 + the signal once SIGINT/SIGTERM was caught (a failure that a signal caused). */
int cli_exit_status(int rc);

/* Files the user names (cli/io.c). An input's purpose decides what is taken: */
typedef struct {
    const char *what;  /* "the prompt file (-f)": named in every message */
    int stream;        /* FIFOs, pipes, sockets and character devices are read as they come */
    size_t max_bytes;  /* a longer input is an error (a regular file's size is checked at open) */
    size_t max_line;   /* 0, or a line longer than this is an error */
    const char *hint;  /* said after a limit's message: what to do */
} cli_input;
/* Opens path ("-": stdin) for in; a FIFO waits for its writer (a signal ends the wait). The fd,
 * or -1 with one line printed (cli_exit_status tells an interruption from bad input). */
int cli_input_open(const char *path, const cli_input *in);
/* Reads fd to its end within in's limits into a NUL-terminated buffer and closes it (not stdin);
 * NULL with one line printed. */
char *cli_input_read(int fd, const char *path, const cli_input *in, size_t *len);
char *cli_read_file(const char *path, const cli_input *in, size_t *len);
/* The text to score or tokenize (perplexity, tokenize -f): streams taken, 256 MiB at most. */
extern const cli_input cli_text_input;
/* "a FIFO or pipe", "a character device", ... for a stat mode. */
const char *cli_file_kind(unsigned mode);
/* An output mgi replaces whole (a temporary file renamed over it): 0 when path is absent or a
 * writable regular file; 1 (one line printed) for a regular file this user may not write, to be
 * read only; -1 (one line printed) for anything else (a device node, a FIFO, a directory), which
 * mgi must never replace. */
int cli_output_check(const char *path, const char *what);
/* Opens an output to append to. CLI_OUT_STREAM: a FIFO (waiting for its reader), pipe or
 * character device is taken; CLI_OUT_READ: also read back (O_RDWR), so a regular file only;
 * CLI_OUT_LOCK: an exclusive advisory lock (flock) on a regular file for the process's life,
 * refused while another process holds it. The fd, or -1 with one line printed and *status the
 * exit code (2 bad file, 3 locked, 130/143 interrupted). */
enum { CLI_OUT_STREAM = 1, CLI_OUT_READ = 2, CLI_OUT_LOCK = 4 };
int cli_output_open(const char *path, const char *what, unsigned flags, int *status);

/* A thread count from flag: n when 1..cores, else the core count after one warning line (-t 0,
 * or more threads than cores, which would only take turns). */
int cli_threads_check(const char *flag, int n);

/* Engine flags every generating subcommand shares: -c/--ctx-size, -b/--batch-size,
 * -t/--threads, -tb/--threads-batch, --no-mmap, --mlock, --cpu-exact (the exact f32 CPU path),
 * -fa/--flash-attn (cli_flash_attn_flag) and the GPU flags below. 1
 * when argv[*i] was one (its value consumed), 0 when not, -1 on a bad value (message printed). */
int cli_engine_flag(int argc, char **argv, int *i, engine_params *ep);

/* GPU flags (cli/gpu.c), llama.cpp's: -ngl N|all (-1 = all), -dev/--device LIST (CUDA ordinals
 * or CUDA0,CUDA1...; none = -ngl 0), -mg/--main-gpu N (an index into the -dev list),
 * -sm/--split-mode none|layer|row, -ts/--tensor-split A,B or A/B (shares >= 0), --layer-split
 * A,B,... (the last layer of each device). 1 when argv[*i] was one (its value consumed), 0 when
 * not, -1 on a bad value or on flags that contradict each other (message printed, naming them). */
int cli_gpu_flag(int argc, char **argv, int *i, engine_params *ep);
/* The -dev and -ts value parsers (bench sweeps -ts itself and uses them per item): 0, or -1 with
 * one line naming flag printed. */
int cli_parse_devices(const char *flag, const char *v, engine_split *sp);
int cli_parse_tensor_split(const char *flag, const char *v, engine_split *sp);
/* --layer-split A,B,... (or A/B/...): integers >= 0, each above the one before; the checks that
 * need the model (the last value is its last layer) are the planner's. */
int cli_parse_layer_split(const char *flag, const char *v, engine_split *sp);
/* The usage lines of the GPU flags, for every model-running subcommand's --help. */
#define CLI_GPU_USAGE \
    "  -ngl, --n-gpu-layers N     layers on the GPUs: 0 = the CPU runs all; N < layers = the last N\n" \
    "                             (the rest on the CPU); all or -1 = every layer (default: all when\n" \
    "                             a GPU is present)\n" \
    "  -dev, --device LIST        CUDA devices to use: 0,1 or CUDA0,CUDA1; none = the CPU (default:\n" \
    "                             every visible device; mgi devices lists them)\n" \
    "  -sm,  --split-mode MODE    none: all on the main GPU; layer: layer ranges per device; row:\n" \
    "                             every layer split by KV heads and FFN columns (default layer)\n" \
    "  -ts,  --tensor-split A,B   shares of the devices, e.g. 3,1 or 3/1; 0 leaves one out\n" \
    "                             (default: proportional to free memory)\n" \
    "        --layer-split A,B,.. -sm layer by hand: the last layer of each device, inclusive, in the\n" \
    "                             model's layer indices (0,3,7: device 0 layer 0, device 1 layers 1-3,\n" \
    "                             device 2 layers 4-7); ends at the last layer; overrides -ts\n" \
    "  -mg,  --main-gpu N         index into the -dev list of the GPU for -sm none and for the\n" \
    "                             output head of -sm row (default 0)\n" \
    "  -nopo, --no-op-offload     with -ngl below the layer count, the CPU's layers compute prompts\n" \
    "                             themselves (default: their products of 32+ tokens run on the GPU,\n" \
    "                             each weight copied over, as llama.cpp's op offload)\n"
/* Passes the CUDA backend (used when a device exists and -ngl is not 0) and, with log, a progress
 * line on stderr for uploads over 1 GiB. */
void cli_gpu_setup(engine_params *ep, int log);
/* The per-device memory report of a loaded engine on stderr ("memory: CUDA0 ..."), nothing on the CPU. */
void cli_log_memory(const engine *e);

/* mgi run's conversation (cli/chat.c): -cnv/--conversation, -st/--single-turn,
 * -sys/--system-prompt, --chat-template-file, --chat-template-kwargs JSON, --jinja (always on),
 * --reasoning-format none|deepseek, as llama.cpp's. */
enum { CLI_REASONING_NONE = 0, CLI_REASONING_DEEPSEEK = 1 };
typedef struct {
    bool on, single_turn;
    const char *system, *template_file, *kwargs;
    int reasoning;  /* CLI_REASONING_* */
} cli_chat_opts;
#define CLI_CHAT_USAGE \
    "  -cnv, --conversation       chat: user turns from -p/-f, then standard input one line each, rendered\n" \
    "                             with the model's chat template (ChatML when it has none); each reply\n" \
    "                             ends at the model's end-of-turn token or -n; end of input ends it\n" \
    "  -st,  --single-turn        chat for one turn (the prompt from -p, -f or stdin), then exit\n" \
    "  -sys, --system-prompt TEXT the conversation's system message (default none)\n" \
    "        --chat-template-file F  the chat template from file F instead of the model's\n" \
    "        --chat-template-kwargs JSON  extra template variables, e.g. '{\"enable_thinking\": false}'\n" \
    "        --jinja              accepted for llama.cpp compatibility: templates are always Jinja\n" \
    "        --reasoning-format F none: a reply's <think>...</think> stays in it; deepseek: it goes to\n" \
    "                             stderr, the rest to stdout (default none)\n"
/* 1 when argv[*i] was one of those (value consumed into c), 0 when not, -1 on a bad value. */
int cli_chat_flag(int argc, char **argv, int *i, cli_chat_opts *c);
/* After all flags: the chat flags need -cnv/-st; kwargs must be a JSON object. 0, or -1 printed. */
int cli_chat_check(const cli_chat_opts *c);
/* How replies are generated. */
typedef struct {
    const char *first;   /* the first user turn (-p, -f, or stdin with -st), or NULL */
    size_t first_len;
    sampler *smp;
    int n_predict;       /* per reply; <= 0: until the end-of-turn token or the context is full */
    bool log, no_escape, special, ignore_eos, verbose_prompt;
} cli_chat_gen;
/* The model's chat template (or the file's), with its BOS/EOS text from tok; NULL with one line
 * printed and *status set. */
struct chat_template;
struct chat_template *cli_chat_template_load(const char *model, const char *template_file, const tokenizer *tok,
                                             int *status);
/* Runs the conversation on sequence 0 of e with template ct (the caller's); the exit status (0
 * at end of input, 128 + signal). */
int cli_chat_converse(engine *e, struct chat_template *ct, const cli_chat_opts *c, const cli_chat_gen *g);

/* Growing text and the <think> splitter of --reasoning-format deepseek: bytes of a reply go in as
 * they come; what is decided lands in content or reasoning (a tag split across tokens is held
 * back until it is whole). */
typedef struct { char *s; size_t len, cap; } cli_chat_text;
enum { CLI_THINK_START, CLI_THINK_IN, CLI_THINK_AFTER, CLI_THINK_CONTENT };
typedef struct {
    int state;
    cli_chat_text pend;
} cli_think;
/* format CLI_REASONING_*; prompt: the rendered prompt (ending in "<think>" starts inside it). */
void cli_think_start(cli_think *t, int format, const char *prompt, size_t prompt_len);
int cli_think_put(cli_think *t, const char *s, size_t n, cli_chat_text *content, cli_chat_text *reasoning);
int cli_think_end(cli_think *t, cli_chat_text *content, cli_chat_text *reasoning);

/* mgi batch's chat requests and stops (cli/chat_batch.c). r->messages rendered with ct (and
 * r->chat_kwargs) into r->prompt, or r->error set on a template error; -1 when out of memory. */
int cli_chat_request_render(request *r, const struct chat_template *ct, const tokenizer *tok);
/* Adds token id's piece to tail (the recent text) and says whether a stop string now stands in
 * it: 1 yes, 0 no, -1 out of memory. Free tail->s when done. */
int cli_stop_check(const tokenizer *tok, char *const *stop, int n_stop, cli_chat_text *tail, int32_t id);
/* One choice of a result: its text, finish_reason, generated tokens and log-probabilities
 * (owned: the result takes it and sets NULL; NULL: none asked). */
typedef struct {
    char *text;
    const char *reason;
    int32_t n_out;
    struct cJSON *logprobs;
} cli_choice_out;
/* The result line (JSON + '\n') of an OpenAI Batch API request r (r->openai) as OpenAI writes it:
 * {"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}, the
 * body a chat.completion or text_completion with ch[0..n_ch) as its choices (usage: n_prompt
 * and n_out, the tokens of every choice), or {"error": {...}} with status 400 (a bad line) or 500
 * (a failure while running). NULL when out of memory. */
char *cli_openai_result(const request *r, int64_t line_no, const char *model, cli_choice_out *ch, int32_t n_ch,
                        const char *error, int status, int32_t n_prompt, int32_t n_out);
/* A job's log-probabilities as a JSON list, one {"id", "token", "logprob", "bytes",
 * "top_logprobs": [...]} per generated token; NULL when out of memory. */
struct cJSON *cli_logprobs_json(const tokenizer *tok, const sched_job *j);
/* Where text[0..n) ends before its first stop string (n when none occurs). */
size_t cli_stop_cut(const char *text, size_t n, char *const *stop, int n_stop);

/* Copies valid UTF-8 and replaces each malformed byte (and NUL) with U+FFFD, so JSON holds valid
 * text (cli/batch_result.c); NULL when out of memory. */
char *cli_utf8_clean(const char *s, size_t n);

/* mgi run -np N / --jsonl (cli/run_parallel.c): N continuations of one prompt. */
typedef struct {
    const int32_t *prompt;    /* [n_prompt] token ids */
    int32_t n_prompt;
    const char *text;         /* the prompt's text, printed before each sequence with echo */
    size_t text_len;
    int n_seq, n_predict;     /* n_predict <= 0: until end of text or the context is full */
    int32_t n_batch;          /* tokens per step (-b) */
    sampler_params sp;        /* sequence i samples with sp.seed + i */
    const grammar *grammar;   /* NULL: none; else over gvocab */
    const grammar_vocab *gvocab;
    bool ignore_eos, special, echo, jsonl, log;
    double t_load;            /* ms, for the timing lines */
} cli_parallel_gen;
/* Decodes the n_seq sequences together and prints each in turn: "--- sequence I of N ---", then
 * its text and a newline; with jsonl one line {"index" (from 0), "text", "tokens", "n_tokens",
 * "finish_reason", "error", "n_prompt", "seed"} each. The exit status. */
int cli_run_parallel(engine *e, const cli_parallel_gen *g);

/* mgi batch's requests as it tracks them: cli/batch.c reads and runs them, cli/batch_result.c
 * writes their lines. */
typedef struct cli_batch_item cli_batch_item;
typedef struct {
    cli_batch_item *it;
    sched_job job;            /* its user is this choice */
    uint64_t seed;            /* the request's seed + the choice's index */
    cli_chat_text stop_tail;  /* "stop": the recent text */
} cli_batch_choice;
struct cli_batch_item {
    request req;
    cli_batch_choice *ch;     /* [req.n_choices]; a bad line has one, never run */
    int32_t n_finished;       /* choices finished */
    int32_t *prompt_ids;
    int32_t n_prompt;
    int64_t line_no;          /* its line in the input (from 1) */
    bool skip;                /* --resume: already in the output */
    bool finished;
    char *line;               /* the finished output line (with --ordered, until its turn) */
    const tokenizer *tok;     /* for "stop" */
    const char *model;        /* for OpenAI result lines */
};
/* --resume (cli/batch_resume.c): a sorted set of ids (as JSON text). */
typedef struct {
    char **v;
    size_t n, cap;
} cli_idset;
bool cli_idset_has(const cli_idset *s, const char *id);
void cli_idset_free(cli_idset *s);
/* Reads the -o file's result lines (fd, a regular file opened for reading and appending, locked)
 * into ids, first cutting a trailing partial line (a killed write). 0; -1 after a message. */
int cli_batch_resume_load(int fd, const char *path, cli_idset *ids, bool log);
/* sched_job.stop_fn of a choice (ctx: its cli_batch_choice): a stop string has appeared in its
 * text (an allocation failure stops too). */
int cli_batch_stop(const sched_job *j, void *ctx);
/* The result line (JSON + '\n') of a finished item: one choice as {"id", "prompt", "text",
 * "tokens", "logprobs", "finish_reason", "error", "n_prompt", "n_generated", "n_reused", "seed",
 * "timings"}; n > 1 as {"id", "prompt", "choices": [{"index", "text", "tokens", "logprobs",
 * "finish_reason", "error", "n_generated", "seed"}, ...], "n_prompt", "n_generated" (all
 * choices), "n_reused", "timings"}; an OpenAI line in OpenAI's format. NULL when out of memory. */
char *cli_batch_result_line(const cli_batch_item *it, const tokenizer *tok);
#endif
