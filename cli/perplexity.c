/* mgi perplexity: llama-perplexity's method and output. The text is tokenised whole (BOS first),
 * cut into chunks of -c tokens, each chunk evaluated from position 0 with its first token
 * replaced by BOS, and the second half of each chunk scored; stdout gets the running estimates
 * "[1]x,[2]y,..." and "Final estimate: PPL = p +/- u". */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "engine/engine.h"

static const char ppl_usage[] =
    "usage: mgi perplexity -m MODEL -f TEXT [flags]\n"
    "  -m,   --model PATH         GGUF model file (required)\n"
    "  -f,   --file PATH          text to score (required; needs at least 2 x ctx-size tokens)\n"
    "  -c,   --ctx-size N         tokens per chunk; 0 = the model's context, at most 512 (default 0)\n"
    "  -b,   --batch-size N       tokens per forward batch (default 2048)\n"
    "  -t,   --threads N          CPU threads (default min(CPUs, 8))\n"
    "  -tb,  --threads-batch N    CPU threads for passes of several tokens (prompts); -1 = -t (default)\n"
    CLI_GPU_USAGE
    "        --no-mmap            read the model into memory instead of mapping it (default mmap)\n"
    "        --mlock              keep the model's file locked in RAM, as llama.cpp (a refusal by\n"
    "                             the limits is a warning; default off)\n"
    "        --log-disable        no progress lines on stderr (default off)\n"
    "        --no-escape          score the text as it is; by default \\n \\r \\t \\' \\\" \\\\ and \\xNN\n"
    "                             become those characters first, as llama-perplexity does (-e)\n"
    "  -fa,  --flash-attn [on|off|auto]  accepted for llama.cpp compatibility: mgi's attention is\n"
    "                             always the fused kind (off changes nothing, and says so)\n"
    "  -h,   --help               this text\n";

/* log p(tok) from one row of logits, as llama.cpp computes it: max-shifted, sum in double. */
static double log_prob(const float *logits, int32_t n_vocab, int32_t tok) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += expf(logits[i] - mx);
    return (double)(logits[tok] - mx) - log(sum);
}

int cli_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    bool log_on = true, escape = true;
    engine_params ep = engine_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int g;
#define VALUE() do { if (!(v = cli_value(argc, argv, &i))) return EXIT_USAGE; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(ppl_usage, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VALUE(); model = v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { VALUE(); file = v;
        } else if ((g = cli_engine_flag(argc, argv, &i, &ep))) {
            if (g < 0) return EXIT_USAGE;
        } else if (!strcmp(a, "--log-disable")) { log_on = false;
        } else if (cli_is_flag(a, "-e", "--escape")) { escape = true;
        } else if (!strcmp(a, "--no-escape")) { escape = false;
        } else {
            cli_error("unknown flag '%s' (see mgi perplexity --help)", a);
            return EXIT_USAGE;
        }
#undef VALUE
    }
    if (!model) { cli_error("-m/--model is required (see mgi perplexity --help)"); return EXIT_USAGE; }
    if (!file) { cli_error("-f/--file is required: the text to score"); return EXIT_USAGE; }
    if (ep.n_ctx != 0 && ep.n_ctx < 4) {
        cli_error("-c %d: a chunk needs at least 4 tokens to score its second half", ep.n_ctx);
        return EXIT_USAGE;
    }

    size_t len;
    char *text = cli_read_file(file, &cli_text_input, &len);
    if (!text) return EXIT_BADINPUT;
    if (escape) text[len = cli_process_escapes(text, len)] = 0; /* llama.cpp escapes its -f text too */
    char err[512];
    double t0 = (cli_now_ms() / 1e3);
    engine *e = NULL;
    int rc = 0;
    /* Default context: the model's, capped at llama-perplexity's 512 (a mapped probe of the file
     * tells the model's). */
    cli_gpu_setup(&ep, log_on);
    if (ep.n_ctx == 0) {
        engine_params probe = ep;
        probe.gpu = NULL;  /* the probe only reads the model's context */
        probe.use_mmap = 1;
        probe.n_batch = 1;
        probe.n_ctx = 1;
        rc = engine_load(&e, model, &probe, err, sizeof err);
        if (!rc) {
            int32_t train = engine_hparams(e)->n_ctx_train;
            ep.n_ctx = train < 512 ? train : 512;
            engine_free(e);
            e = NULL;
        }
    }
    if (ep.n_ctx) rc = engine_load(&e, model, &ep, err, sizeof err);
    if (rc) {
        cli_error("%s", err);
        free(text);
        return rc == ENGINE_EPARAM ? EXIT_USAGE : rc == ENGINE_EBADINPUT ? EXIT_BADINPUT : EXIT_RUNTIME;
    }
    if (log_on && engine_load_warning(e)) fprintf(stderr, "mgi: warning: %s\n", engine_load_warning(e));
    const tokenizer *tok = engine_tokenizer(e);
    int32_t n_ctx = engine_n_ctx(e), n_vocab = engine_n_vocab(e);
    bool add_bos = tokenizer_add_bos(tok) && tokenizer_bos(tok) >= 0;

    int32_t *ids = NULL, *chunk = NULL;
    float *logits = NULL;
    rc = EXIT_BADINPUT;
    int64_t cap = (int64_t)len + 8, n_tok = -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        free(ids);
        if (!(ids = malloc((size_t)cap * sizeof *ids))) break;
        n_tok = tokenizer_encode(tok, text, len, add_bos, false, ids, cap, err, sizeof err);
        if (n_tok <= cap) break;
        cap = n_tok;
    }
    chunk = malloc((size_t)n_ctx * sizeof *chunk);
    logits = malloc((size_t)n_ctx * (size_t)n_vocab * sizeof *logits);
    if (!ids || !chunk || !logits) { cli_error("out of memory"); rc = EXIT_RUNTIME; goto out; }
    if (n_tok < 0 || n_tok > cap) { cli_error("%s: %s", file, err); goto out; }
    if (n_tok < 2 * (int64_t)n_ctx) {
        cli_error("%s: %lld tokens; scoring with a context of %d needs at least %lld: use a longer text "
                  "or a smaller -c", file, (long long)n_tok, n_ctx, 2 * (long long)n_ctx);
        goto out;
    }
    int64_t n_chunk = n_tok / n_ctx;
    int32_t first = n_ctx / 2;
    if (log_on)
        fprintf(stderr, "perplexity: %lld tokens, %lld chunks of %d, scoring the tokens at %d..%d of each\n",
                (long long)n_tok, (long long)n_chunk, n_ctx, first + 1, n_ctx - 1);

    double nll = 0, nll2 = 0;
    int64_t count = 0;
    rc = EXIT_RUNTIME;
    for (int64_t c = 0; c < n_chunk; c++) {
        const int32_t *src = ids + c * n_ctx;
        memcpy(chunk, src, (size_t)n_ctx * sizeof *chunk);
        if (add_bos) chunk[0] = tokenizer_bos(tok);
        if (engine_eval(e, chunk, n_ctx, 0, logits, 1, err, sizeof err)) { cli_error("%s", err); goto out; }
        /* Row j predicts token j + 1; the first half only gives the later tokens context. */
        for (int32_t j = first; j < n_ctx - 1; j++) {
            double lp = log_prob(logits + (size_t)j * n_vocab, n_vocab, src[j + 1]);
            nll -= lp;
            nll2 += lp * lp;
            count++;
        }
        printf("[%lld]%.4f,", (long long)(c + 1), exp(nll / (double)count));
        fflush(stdout);
    }
    double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
    double ppl = exp(mean);
    /* llama.cpp's uncertainty: the standard error of the mean log-probability, scaled by PPL. */
    double unc = count > 1 && var > 0 ? sqrt(var / (double)(count - 1)) : 0;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, ppl * unc);
    fflush(stdout);
    if (log_on)
        fprintf(stderr, "perplexity: %lld tokens scored in %.2f s\n", (long long)count, (cli_now_ms() / 1e3) - t0);
    rc = 0;
out:
    free(logits);
    free(chunk);
    free(ids);
    free(text);
    engine_free(e);
    return rc;
}
