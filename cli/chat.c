/* mgi run's conversation (-cnv, -st): user turns from -p/-f and then standard input, one line a
 * turn, rendered with the model's chat template (or --chat-template-file; ChatML when the file
 * has none, as llama.cpp), each reply streamed to stdout. Every turn renders the whole
 * conversation and evaluates only the tokens past the longest prefix the KV cache already holds,
 * so a turn costs its own tokens, not the history's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/chat.h"

/* -st, -sys, the template flags and --reasoning-format at argv[*i] into c. */
int cli_chat_flag(int argc, char **argv, int *i, cli_chat_opts *c) {
    const char *a = argv[*i], *v;
    if (cli_is_flag(a, "-cnv", "--conversation")) {
        c->on = true;
    } else if (cli_is_flag(a, "-st", "--single-turn")) {
        c->on = c->single_turn = true;
    } else if (cli_is_flag(a, "-sys", "--system-prompt")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        c->system = v;
    } else if (cli_is_flag(a, "--chat-template-file", NULL)) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        c->template_file = v;
    } else if (cli_is_flag(a, "--chat-template-kwargs", NULL)) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        c->kwargs = v;
    } else if (cli_is_flag(a, "--jinja", NULL)) {
        /* templates are always rendered by the Jinja engine */
    } else if (cli_is_flag(a, "--reasoning-format", NULL)) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        if (!strcmp(v, "none")) c->reasoning = CLI_REASONING_NONE;
        else if (!strcmp(v, "deepseek") || !strcmp(v, "auto")) c->reasoning = CLI_REASONING_DEEPSEEK;
        else {
            cli_error("%s: '%s' is not a reasoning format: none or deepseek (auto = deepseek)", a, v);
            return -1;
        }
    } else {
        return 0;
    }
    return 1;
}

int cli_chat_check(const cli_chat_opts *c) {
    if (!c->on && (c->system || c->template_file || c->kwargs || c->reasoning)) {
        cli_error("%s is used by a conversation only: add -cnv (or -st for one turn)",
                  c->system ? "-sys/--system-prompt" : c->template_file ? "--chat-template-file"
                  : c->kwargs ? "--chat-template-kwargs" : "--reasoning-format");
        return -1;
    }
    if (c->kwargs) {
        cJSON *k = chat_json_parse(c->kwargs, strlen(c->kwargs), NULL);
        bool ok = k && cJSON_IsObject(k);
        cJSON_Delete(k);
        if (!ok) {
            cli_error("--chat-template-kwargs: '%s' is not a JSON object (e.g. '{\"enable_thinking\": false}')",
                      c->kwargs);
            return -1;
        }
    }
    return 0;
}

/* --- reasoning split ------------------------------------------------------------------------ */

static const char think_open[] = "<think>", think_close[] = "</think>";

/* Bytes of s[0..n) that may still grow into the whole of tag: the longest suffix of s that is a
 * prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag) {
    size_t tl = strlen(tag);
    for (size_t k = tl - 1 < n ? tl - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

static int buf_add(cli_chat_text *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) return -1;
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
    return 0;
}

void cli_think_start(cli_think *t, int format, const char *prompt, size_t prompt_len) {
    free(t->pend.s);
    memset(t, 0, sizeof *t);
    t->state = format == CLI_REASONING_DEEPSEEK ? CLI_THINK_START : CLI_THINK_CONTENT;
    /* a template that opens the reasoning itself (DeepSeek-R1, Qwen3 with thinking) ends the
     * generation prompt in "<think>" and the model writes only the closing tag */
    if (t->state == CLI_THINK_START) {
        while (prompt_len && strchr(" \t\r\n", prompt[prompt_len - 1])) prompt_len--;
        size_t tl = strlen(think_open);
        if (prompt_len >= tl && !memcmp(prompt + prompt_len - tl, think_open, tl)) t->state = CLI_THINK_IN;
    }
}

/* Moves what is decided of the pending bytes to content or reasoning; at_end decides the rest. */
static int think_drain(cli_think *t, cli_chat_text *content, cli_chat_text *reasoning, bool at_end) {
    cli_chat_text *p = &t->pend;
    size_t used = 0;
    for (;;) {
        const char *s = p->s + used;
        size_t n = p->len - used;
        if (t->state == CLI_THINK_START || t->state == CLI_THINK_AFTER) {
            size_t ws = 0;
            while (ws < n && strchr(" \t\r\n", s[ws])) ws++;
            if (t->state == CLI_THINK_AFTER) {  /* the content after the reasoning, leading space trimmed */
                used += ws;
                if (ws == n && !at_end) break;
                t->state = CLI_THINK_CONTENT;
                continue;
            }
            size_t tl = strlen(think_open), m = n - ws < tl ? n - ws : tl;
            if (!memcmp(s + ws, think_open, m) && m < tl && !at_end) break;  /* may still be the tag */
            if (m == tl && !memcmp(s + ws, think_open, tl)) {
                used += ws + tl;
                t->state = CLI_THINK_IN;
            } else {
                t->state = CLI_THINK_CONTENT;
            }
        } else if (t->state == CLI_THINK_IN) {
            const char *end = n ? memmem(s, n, think_close, strlen(think_close)) : NULL;
            if (end) {
                if (buf_add(reasoning, s, (size_t)(end - s))) return -1;
                used += (size_t)(end - s) + strlen(think_close);
                t->state = CLI_THINK_AFTER;
                continue;
            }
            size_t keep = at_end ? 0 : partial_tag(s, n, think_close);
            if (buf_add(reasoning, s, n - keep)) return -1;
            used += n - keep;
            break;
        } else {
            if (buf_add(content, s, n)) return -1;
            used += n;
            break;
        }
    }
    memmove(p->s, p->s + used, p->len - used);
    p->len -= used;
    return 0;
}

int cli_think_put(cli_think *t, const char *s, size_t n, cli_chat_text *content, cli_chat_text *reasoning) {
    if (buf_add(&t->pend, s, n)) return -1;
    return think_drain(t, content, reasoning, false);
}

int cli_think_end(cli_think *t, cli_chat_text *content, cli_chat_text *reasoning) {
    int rc = t->pend.s ? think_drain(t, content, reasoning, true) : 0;
    free(t->pend.s);
    t->pend = (cli_chat_text){0};
    return rc;
}

/* --- the conversation ----------------------------------------------------------------------- */

static const cli_input template_file_input = {
    .what = "the chat template (--chat-template-file)", .stream = 1, .max_bytes = (size_t)16 << 20,
    .max_line = 0, .hint = "a chat template of at most 16 MiB",
};

chat_template *cli_chat_template_load(const char *model, const char *template_file, const tokenizer *tok,
                                       int *status) {
    char err[1024];
    chat_template *ct = NULL;
    gguf_ctx *g = gguf_open(model, 1, err, sizeof err);
    *status = EXIT_BADINPUT;
    if (!g) {
        cli_error("%s", err);
        return NULL;
    }
    if (template_file) {
        size_t len;
        char *text = cli_read_file(template_file, &template_file_input, &len), *b = NULL, *e = NULL;
        if (text && chat_special_tokens(g, tok, &b, &e) == 0)
            ct = chat_template_from_text(text, len, template_file, b, e, err, sizeof err);
        else if (text)
            snprintf(err, sizeof err, "out of memory"), *status = EXIT_RUNTIME;
        free(b);
        free(e);
        if (!text) {
            gguf_close(g);
            return NULL;
        }
        free(text);
    } else {
        ct = chat_template_from_gguf(g, model, tok, err, sizeof err);
    }
    gguf_close(g);
    if (!ct) cli_error("chat template: %s", err);
    return ct;
}

/* One conversation's state: the messages so far and the tokens the KV cache of sequence 0
 * holds (each one evaluated). */
typedef struct {
    engine *e;
    const tokenizer *tok;
    const cli_chat_opts *c;
    const cli_chat_gen *g;
    chat_template *ct;
    cJSON *messages, *kwargs;
    int32_t *held, n_held, n_ctx, *ids;
    float *lg;
    int turn;
    long long n_eval, n_reused, n_gen;
} chat_state;

static int add_message(cJSON *messages, const char *role, const char *content, size_t len) {
    char *s = malloc(len + 1);
    if (!s) return -1;
    memcpy(s, content, len);
    s[len] = 0;
    cJSON *m = cJSON_CreateObject();
    bool ok = m && cJSON_AddStringToObject(m, "role", role) && cJSON_AddStringToObject(m, "content", s);
    free(s);
    if (!ok) {
        cJSON_Delete(m);
        return -1;
    }
    cJSON_AddItemToArray(messages, m);
    return 0;
}

/* Writes what the reply gained: content to stdout, reasoning to stderr. Nonzero once stdout
 * failed. */
static int show(cli_chat_text *content, size_t *shown_c, cli_chat_text *reasoning, size_t *shown_r) {
    if (reasoning->len > *shown_r) {
        fwrite(reasoning->s + *shown_r, 1, reasoning->len - *shown_r, stderr);
        *shown_r = reasoning->len;
    }
    if (content->len > *shown_c) {
        fwrite(content->s + *shown_c, 1, content->len - *shown_c, stdout);
        *shown_c = content->len;
        fflush(stdout);
    }
    return ferror(stdout);
}

/* One turn: the user's text added, the conversation rendered, the new tokens evaluated, the reply
 * generated and shown. 0, or an exit status (its message printed). */
static int chat_turn(chat_state *s, const char *user, size_t user_len) {
    char err[1024];
    const tokenizer *tok = s->tok;
    s->turn++;
    if (add_message(s->messages, "user", user, user_len)) { cli_error("out of memory"); return EXIT_RUNTIME; }
    size_t len;
    char *text = chat_render(s->ct, s->messages, true, s->kwargs, &len, err, sizeof err);
    if (!text) {
        cli_error("chat template: %s", err);
        return EXIT_BADINPUT;
    }
    /* a template that writes the BOS text itself gets no second one */
    const char *bos = chat_template_bos(s->ct);
    bool add_bos = tokenizer_add_bos(tok) && tokenizer_bos(tok) >= 0 &&
                   !(bos && *bos && !strncmp(text, bos, strlen(bos)));
    int64_t n = tokenizer_encode(tok, text, len, add_bos, true, s->ids, s->n_ctx + 1, err, sizeof err);
    if (n < 0) {
        free(text);
        cli_error("chat prompt: %s", err);
        return EXIT_BADINPUT;
    }
    if (n > s->n_ctx - 1) {
        free(text);
        cli_error("the conversation is %lld tokens at turn %d but the context holds %d: raise -c or start a "
                  "shorter one", (long long)n, s->turn, s->n_ctx);
        return EXIT_BADINPUT;
    }
    if (s->g->verbose_prompt) {
        fprintf(stderr, "chat prompt, turn %d:\n%.*s\n", s->turn, (int)len, text);
        for (int64_t i = 0; i < n; i++) cli_print_piece(stderr, tok, s->ids[i]);
    }
    int32_t same = 0;
    while (same < s->n_held && same < n && s->held[same] == s->ids[same]) same++;
    if (same > n - 1) same = (int32_t)n - 1;  /* the last prompt token gives the first logits */
    int greedy = sampler_is_greedy(s->g->smp);
    int32_t next = 0, np = (int32_t)n - same;
    if (greedy ? engine_eval_greedy(s->e, s->ids + same, np, same, &next, err, sizeof err)
               : engine_eval(s->e, s->ids + same, np, same, s->lg, 0, err, sizeof err)) {
        free(text);
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    for (int32_t i = same; i < n; i++) sampler_accept(s->g->smp, s->ids[i]);
    memcpy(s->held, s->ids, (size_t)n * sizeof *s->held);
    s->n_held = (int32_t)n;
    s->n_eval += np;
    s->n_reused += same;

    cli_think think = {0};
    cli_chat_text content = {0}, reasoning = {0};
    size_t shown_c = 0, shown_r = 0;
    cli_think_start(&think, s->c->reasoning, text, len);
    free(text);
    tokenizer_stream st = {0};
    int n_gen = 0, rc = 0;
    char buf[512];
    int32_t pos = (int32_t)n;
    for (;;) {
        if (cli_signal()) break;
        int32_t id = greedy ? next : sampler_sample(s->g->smp, s->lg);
        sampler_accept(s->g->smp, id);
        if (!s->g->ignore_eos && tokenizer_is_eog(tok, id)) break;
        size_t k;
        if (s->g->special && tokenizer_is_control(tok, id)) {
            k = tokenizer_stream_flush(&st, buf, sizeof buf);
            if (cli_think_put(&think, buf, k, &content, &reasoning)) { rc = EXIT_RUNTIME; break; }
            const char *t = tokenizer_text(tok, id, &k);
            if (cli_think_put(&think, t, k, &content, &reasoning)) { rc = EXIT_RUNTIME; break; }
        } else {
            k = tokenizer_stream_put(tok, &st, id, buf, sizeof buf);
            if (cli_think_put(&think, buf, k, &content, &reasoning)) { rc = EXIT_RUNTIME; break; }
        }
        if (show(&content, &shown_c, &reasoning, &shown_r)) break;
        n_gen++;
        if (s->g->n_predict > 0 && n_gen >= s->g->n_predict) break;
        if (pos >= s->n_ctx - 1) {
            if (s->g->log) fprintf(stderr, "\ncontext full (%d tokens, -c): the reply stops here\n", s->n_ctx);
            break;
        }
        if (greedy ? engine_eval_greedy(s->e, &id, 1, pos, &next, err, sizeof err)
                   : engine_eval(s->e, &id, 1, pos, s->lg, 0, err, sizeof err)) {
            cli_error("%s", err);
            rc = EXIT_RUNTIME;
            break;
        }
        s->held[s->n_held++] = id;
        pos++;
    }
    size_t k = tokenizer_stream_flush(&st, buf, sizeof buf);
    if (!rc && (cli_think_put(&think, buf, k, &content, &reasoning) || cli_think_end(&think, &content, &reasoning)))
        rc = EXIT_RUNTIME;
    cli_think_end(&think, &content, &reasoning);
    show(&content, &shown_c, &reasoning, &shown_r);
    if (reasoning.len) fputc('\n', stderr);
    fputc('\n', stdout);
    fflush(stdout);
    s->n_gen += n_gen;
    if (s->g->log)
        fprintf(stderr, "chat turn %d: %lld prompt tokens, %d reused from the cache, %d evaluated, %d generated\n",
                s->turn, (long long)n, same, np, n_gen);
    /* the reply joins the history as its content (templates drop past reasoning anyway) */
    if (!rc && add_message(s->messages, "assistant", content.s ? content.s : "", content.len)) rc = EXIT_RUNTIME;
    if (rc == EXIT_RUNTIME && !cli_signal()) cli_error("out of memory");
    free(content.s);
    free(reasoning.s);
    if (!rc && ferror(stdout)) {
        cli_error("cannot write standard output");
        rc = EXIT_RUNTIME;
    }
    return rc;
}

/* One line of stdin without its newline (and a '\r' before it), escapes processed unless
 * no_escape; NULL at end of input or on a signal. */
static char *read_turn(FILE *in, bool no_escape, size_t *len) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, in);  /* -1 at the end, or EINTR on a signal */
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    if (!no_escape) line[n = (ssize_t)cli_process_escapes(line, (size_t)n)] = 0;
    *len = (size_t)n;
    return line;
}

int cli_chat_converse(engine *e, struct chat_template *ct, const cli_chat_opts *c, const cli_chat_gen *g) {
    chat_state s = {.e = e, .tok = engine_tokenizer(e), .c = c, .g = g, .n_ctx = engine_n_ctx(e), .ct = ct};
    int rc = EXIT_RUNTIME;
    s.messages = cJSON_CreateArray();
    s.kwargs = c->kwargs ? chat_json_parse(c->kwargs, strlen(c->kwargs), NULL) : NULL;
    s.held = malloc((size_t)s.n_ctx * sizeof *s.held);
    s.ids = malloc(((size_t)s.n_ctx + 1) * sizeof *s.ids);
    float *own = NULL;
    if (!(s.lg = engine_logits_buffer(e, 1))) s.lg = own = malloc((size_t)engine_n_vocab(e) * sizeof *s.lg);
    if (!s.messages || !s.held || !s.ids || !s.lg || (c->kwargs && !s.kwargs) ||
        (c->system && add_message(s.messages, "system", c->system, strlen(c->system)))) {
        cli_error("out of memory");
        goto out;
    }
    bool tty = isatty(STDIN_FILENO);
    rc = 0;
    if (g->first) rc = chat_turn(&s, g->first, g->first_len);
    while (!rc && !c->single_turn && !cli_signal()) {
        if (tty) {
            fputs("\n> ", stdout);
            fflush(stdout);
        }
        size_t len;
        char *line = read_turn(stdin, g->no_escape, &len);
        if (!line) break;  /* end of input ends the conversation */
        rc = chat_turn(&s, line, len);
        free(line);
    }
    if (g->log)
        fprintf(stderr, "chat: %d turns, %lld tokens evaluated, %lld reused from the cache, %lld generated\n",
                s.turn, s.n_eval, s.n_reused, s.n_gen);
    if (!rc && cli_signal()) rc = 128 + cli_signal();
out:
    free(own);
    free(s.held);
    free(s.ids);
    cJSON_Delete(s.messages);
    cJSON_Delete(s.kwargs);
    return rc;
}
