/* Continuous batching over the engine's sequences: slot assignment with prefix sharing, step
 * composition (decode tokens first, then prefill chunks, up to n_batch), per-slot sampling. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/constrain.h"
#include "engine/scheduler.h"

typedef struct {
    sched_job *job;   /* NULL: free */
    sampler *smp;
    int32_t *hist;    /* [n_ctx] tokens whose K/V the sequence holds (engine_seq_len of them) */
    int32_t n_fed;    /* prompt tokens evaluated or reused so far */
    int32_t pending;  /* generated token to evaluate next; -1: none */
    int32_t lead;     /* a group's job waiting for its leader's prompt: the leader's slot; else -1 */
} slot;

/* A FIFO of jobs linked through sched_job.next. */
typedef struct {
    sched_job *head, *tail;
} fifo;

struct sched {
    engine *e;
    sched_params p;
    int32_t n_slots, n_ctx, n_vocab;
    slot *slots;
    fifo queue, done;
    engine_token *batch;  /* [n_batch] */
    /* A step's picks: one per logits row, then one per group job whose leader's prompt ended in
     * this step (it draws from its leader's row): [n_batch + n_slots] each. */
    int32_t *row_slot;    /* slot of each pick */
    int32_t *row_src;     /* logits row each pick draws from */
    int32_t *ids;         /* the picks (the backend's when all are greedy) */
    float *logits;        /* [n_batch][n_vocab] */
    int32_t rr;           /* slot that goes first in the next step (fairness when -b < slots) */
    sched_stats st;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void fifo_push(fifo *f, sched_job *j) {
    j->next = NULL;
    if (f->tail) f->tail->next = j;
    else f->head = j;
    f->tail = j;
}

static sched_job *fifo_pop(fifo *f) {
    sched_job *j = f->head;
    if (j && !(f->head = j->next)) f->tail = NULL;
    return j;
}

sched *sched_new(engine *e, const sched_params *p, char *err, size_t err_size) {
    int32_t n_ctx = engine_n_ctx(e);
    if (p->n_batch < 1) {
        snprintf(err, err_size, "-b %d: a step needs at least one token", p->n_batch);
        return NULL;
    }
    if (p->n_system < 0 || p->n_system >= n_ctx) {
        snprintf(err, err_size, "the system prompt is %d tokens but a sequence holds %d (-c / -np): shorten it "
                 "or raise -c", p->n_system, n_ctx);
        return NULL;
    }
    sched *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->e = e;
    s->p = *p;
    s->p.system = NULL;
    s->n_slots = engine_n_seq_max(e);
    s->n_ctx = n_ctx;
    s->n_vocab = engine_n_vocab(e);
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->batch = malloc((size_t)p->n_batch * sizeof *s->batch);
    size_t picks = (size_t)p->n_batch + (size_t)s->n_slots;
    s->row_slot = malloc(picks * sizeof *s->row_slot);
    s->row_src = malloc(picks * sizeof *s->row_src);
    s->logits = malloc((size_t)p->n_batch * (size_t)s->n_vocab * sizeof *s->logits);
    s->ids = malloc(picks * sizeof *s->ids);
    if (!s->slots || !s->batch || !s->row_slot || !s->row_src || !s->logits || !s->ids) goto oom;
    for (int32_t i = 0; i < s->n_slots; i++) {
        s->slots[i].lead = -1;
        if (!(s->slots[i].hist = malloc((size_t)n_ctx * sizeof(int32_t)))) goto oom;
    }
    /* The system prompt: computed once in slot 0, shared by reference into every other slot. */
    for (int32_t i = 0; i < s->n_slots; i++) engine_seq_free(e, i);
    for (int32_t done = 0; done < p->n_system;) {
        int32_t k = p->n_system - done < p->n_batch ? p->n_system - done : p->n_batch;
        for (int32_t i = 0; i < k; i++) s->batch[i] = (engine_token){p->system[done + i], done + i, 0, 0, 0};
        if (engine_decode(e, s->batch, k, NULL, err, err_size)) {
            sched_free(s);
            return NULL;
        }
        done += k;
    }
    if (p->n_system) memcpy(s->slots[0].hist, p->system, (size_t)p->n_system * sizeof(int32_t));
    for (int32_t i = 1; i < s->n_slots && p->n_system; i++) {
        if (engine_seq_cp(e, 0, i, 0, p->n_system, err, err_size)) {
            sched_free(s);
            return NULL;
        }
        memcpy(s->slots[i].hist, p->system, (size_t)p->n_system * sizeof(int32_t));
    }
    s->st.n_prompt_eval = p->n_system;
    s->st.n_steps = (p->n_system + p->n_batch - 1) / p->n_batch;
    return s;
oom:
    snprintf(err, err_size, "out of memory for the scheduler (%d slots, batch %d)", engine_n_seq_max(e), p->n_batch);
    sched_free(s);
    return NULL;
}

void sched_free(sched *s) {
    if (!s) return;
    for (int32_t i = 0; s->slots && i < s->n_slots; i++) {
        free(s->slots[i].hist);
        sampler_free(s->slots[i].smp);
    }
    free(s->slots);
    free(s->batch);
    free(s->row_slot);
    free(s->row_src);
    free(s->logits);
    free(s->ids);
    free(s);
}

sched_stats sched_get_stats(const sched *s) { return s->st; }

/* Ends a job: state, timing, the slot freed (its cache stays, for the next prompt to share).
 * Group jobs still waiting for this slot's prompt cannot get it: they end as ERROR too. */
static void finish(sched *s, slot *sl, sched_state state) {
    sched_job *j = sl->job;
    j->state = state;
    j->t_end = now_ms();
    if (!j->t_prompt) j->t_prompt = j->t_end;
    sampler_free(sl->smp);
    sl->smp = NULL;
    sl->job = NULL;
    sl->pending = -1;
    sl->lead = -1;
    fifo_push(&s->done, j);
    for (int32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].job && s->slots[i].lead == (int32_t)(sl - s->slots)) {
            snprintf(s->slots[i].job->err, sizeof s->slots[i].job->err, "the shared prompt failed: %.200s",
                     state == SCHED_ERROR ? j->err : "its job ended before it was evaluated");
            finish(s, &s->slots[i], SCHED_ERROR);
        }
}

static void fail_job(sched_job *j, const char *msg) {
    j->state = SCHED_ERROR;
    snprintf(j->err, sizeof j->err, "%s", msg);
    j->t_start = j->t_prompt = j->t_end = now_ms();
}

static int32_t group_size(const sched_job *j) {
    int32_t n = 0;
    for (; j; j = j->choice_next) n++;
    return n;
}

void sched_submit(sched *s, sched_job *j) {
    for (sched_job *c = j; c; c = c->choice_next) {
        c->state = SCHED_QUEUED;
        c->out = NULL;
        c->lp = NULL;
        c->lp_top = NULL;
        c->n_out = c->n_reused = 0;
        c->err[0] = 0;
        c->t_start = c->t_prompt = c->t_end = 0;
    }
    char msg[200] = "";
    int32_t n_group = group_size(j);
    if (j->n_prompt < 1)
        snprintf(msg, sizeof msg, "the prompt is empty and this vocabulary adds no BOS token");
    else if (j->n_prompt > s->n_ctx)
        snprintf(msg, sizeof msg, "the prompt is %d tokens but a sequence holds %d (-c / -np): shorten it or "
                 "raise -c", j->n_prompt, s->n_ctx);
    else if (n_group > s->n_slots)
        snprintf(msg, sizeof msg, "%d choices of one prompt decode together, in as many sequences, but there are %d "
                 "(-np): raise -np to %d", n_group, s->n_slots, n_group);
    if (!*msg) {
        fifo_push(&s->queue, j);
        return;
    }
    for (sched_job *c = j; c; c = c->choice_next) {
        fail_job(c, msg);
        fifo_push(&s->done, c);
    }
}

bool sched_idle(const sched *s) {
    if (s->queue.head) return false;
    for (int32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].job) return false;
    return true;
}

sched_job *sched_next_done(sched *s) { return fifo_pop(&s->done); }

static int32_t common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* Takes job j into slot sl: its output room and sampler (with --ignore-eos, its grammar, the
 * prompt as history). 0, or -1 when it failed (finished as ERROR; with err set, that error). */
static int setup(sched *s, slot *sl, sched_job *j, const char *fail) {
    char err[256];
    sl->job = j;
    sl->pending = -1;
    j->state = SCHED_RUNNING;
    j->t_start = now_ms();
    int rc = 0;
    if (fail) {
        snprintf(err, sizeof err, "%s", fail);
        rc = -1;
    }
    sampler_params sp = j->sp;
    if (sp.repeat_last_n < 0) sp.repeat_last_n = s->n_ctx;
    /* Room for every token it can generate: each but the last is evaluated after the prompt. */
    int32_t most = s->n_ctx - j->n_prompt + 1;
    if (j->n_predict > 0 && j->n_predict < most) most = j->n_predict;
    if (!rc && !(j->out = malloc((size_t)most * sizeof *j->out))) {
        snprintf(err, sizeof err, "out of memory");
        rc = -1;
    }
    if (!rc && !(sl->smp = sampler_new(&sp, s->n_vocab, err, sizeof err))) rc = -1;
    if (rc) {
        snprintf(j->err, sizeof j->err, "%s", err);
        finish(s, sl, SCHED_ERROR);
        return -1;
    }
    _Static_assert(TOKENIZER_MAX_EOG <= SAMPLER_MAX_SKIP, "every end-of-generation id fits the sampler's skip list");
    if (j->ignore_eos) { /* llama.cpp's --ignore-eos: end-of-generation tokens are never picked */
        const int32_t *eog;
        int n_eog = tokenizer_eog_ids(engine_tokenizer(s->e), &eog);
        sampler_skip(sl->smp, eog, n_eog); /* n_eog <= TOKENIZER_MAX_EOG == SAMPLER_MAX_SKIP */
    }
    if (j->grammar && constrain_attach(sl->smp, j->grammar, j->gvocab, engine_tokenizer(s->e), j->err, sizeof j->err)) {
        finish(s, sl, SCHED_ERROR);
        return -1;
    }
    for (int32_t i = 0; i < j->n_prompt; i++) sampler_accept(sl->smp, j->prompt[i]);
    return 0;
}

/* Puts job j into free slot k, sharing the longest cached prefix of its prompt. */
static void start(sched *s, int32_t k, sched_job *j) {
    slot *sl = &s->slots[k];
    char err[256];
    int32_t best = k, best_len = -1;
    for (int32_t i = 0; i < s->n_slots; i++) {
        int32_t held = engine_seq_len(s->e, i);
        int32_t l = common_prefix(j->prompt, j->n_prompt, s->slots[i].hist, held);
        if (!s->p.prefix_reuse && l > s->p.n_system) l = s->p.n_system;
        if (l > best_len || (l == best_len && i == k)) {
            best = i;
            best_len = l;
        }
    }
    /* The last prompt token is always computed: its logits give the first sample. */
    int32_t reuse = best_len < j->n_prompt - 1 ? best_len : j->n_prompt - 1;
    int rc = best == k ? engine_seq_rm(s->e, k, reuse, -1, err, sizeof err)
                       : engine_seq_cp(s->e, best, k, 0, reuse, err, sizeof err);
    if (!rc && best != k) memcpy(sl->hist, s->slots[best].hist, (size_t)reuse * sizeof(int32_t));
    sl->n_fed = reuse;
    j->n_reused = reuse;
    if (setup(s, sl, j, rc ? err : NULL)) return;
    s->st.n_prompt_reused += reuse;
}

/* Puts group job j into free slot k to wait for the prompt that slot lead evaluates. */
static void start_follower(sched *s, int32_t k, sched_job *j, int32_t lead) {
    slot *sl = &s->slots[k];
    sl->n_fed = j->n_prompt; /* nothing of its own to evaluate */
    sl->lead = lead;
    setup(s, sl, j, NULL);
}

/* Starts the group led by j (the caller has checked that enough slots are free). */
static void start_group(sched *s, sched_job *j) {
    int32_t k = 0;
    while (s->slots[k].job) k++;
    start(s, k, j);
    for (sched_job *c = j->choice_next; c; c = c->choice_next) {
        if (s->slots[k].job != j) { /* the leader failed at its start */
            fail_job(c, j->err);
            fifo_push(&s->done, c);
            continue;
        }
        int32_t f = 0;
        while (s->slots[f].job) f++;
        start_follower(s, f, c, k);
    }
}

/* Draws of a step's rows: each row's slot has its own sampler (candidates, generator), so the
 * rows are independent and the draws are the same on any number of threads. */
typedef struct {
    sched *s;
    int32_t lo, hi;
} draw_job;

static void *draw_main(void *arg) {
    draw_job *j = arg;
    sched *s = j->s;
    for (int32_t r = j->lo; r < j->hi; r++)
        s->ids[r] = sampler_sample(s->slots[s->row_slot[r]].smp, s->logits + (size_t)s->row_src[r] * s->n_vocab);
    return NULL;
}

/* s->ids[r] for picks [0, rows) from s->logits. One draw takes ~45 us at a 32000-token vocabulary
 * (engine/sampler.c), so a step of 32 sampled rows spreads them over up to 8 threads (their
 * start costs ~10 us each) rather than spend ~1.4 ms beside a ~4 ms GPU step; a thread that
 * cannot start has its rows drawn by the caller. */
static void draw_rows(sched *s, int32_t rows) {
    enum { MAX_DRAW_THREADS = 8, ROWS_PER_THREAD = 4 };
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = rows / ROWS_PER_THREAD;
    if (nt > MAX_DRAW_THREADS) nt = MAX_DRAW_THREADS;
    if (cpus > 0 && nt > cpus) nt = (int)cpus;
    if (nt < 1) nt = 1;
    draw_job jobs[MAX_DRAW_THREADS];
    pthread_t th[MAX_DRAW_THREADS];
    int started[MAX_DRAW_THREADS] = {0};
    for (int t = 0; t < nt; t++) {
        jobs[t] = (draw_job){s, (int32_t)((int64_t)rows * t / nt), (int32_t)((int64_t)rows * (t + 1) / nt)};
        if (t > 0) started[t] = pthread_create(&th[t], NULL, draw_main, &jobs[t]) == 0;
    }
    draw_main(&jobs[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else draw_main(&jobs[t]);
    }
}

/* Slot sl's next token id (the backend's greedy pick or draw_rows' draw): taken, and whether the
 * job goes on. */
static void take(sched *s, slot *sl, int32_t id) {
    sched_job *j = sl->job;
    if (id < 0) { /* the grammar left no token to pick */
        snprintf(j->err, sizeof j->err, "%s", sampler_error(sl->smp));
        finish(s, sl, SCHED_ERROR);
        return;
    }
    sampler_accept(sl->smp, id);
    if (!j->ignore_eos && tokenizer_is_eog(engine_tokenizer(s->e), id)) {
        finish(s, sl, SCHED_STOP);
        return;
    }
    j->out[j->n_out++] = id;
    s->st.n_gen++;
    if (sampler_grammar_done(sl->smp)) { /* a whole sentence that nothing but an end token can follow */
        finish(s, sl, SCHED_STOP);
        return;
    }
    /* As mgi run: n_predict reached, or the context full (the token is kept, not evaluated). */
    if ((j->n_predict > 0 && j->n_out >= j->n_predict) || engine_seq_len(s->e, (int32_t)(sl - s->slots)) >= s->n_ctx) {
        finish(s, sl, SCHED_LENGTH);
        return;
    }
    if (j->stop_fn && j->stop_fn(j, j->user)) {
        finish(s, sl, SCHED_STOP);
        return;
    }
    sl->pending = id;
}

/* The log-probabilities of the token about to be taken (index j->n_out; an end-of-text token
 * that is not kept leaves an entry past n_out). 0, or -1 when out of memory. */
static int record_logprobs(sched_job *j, const float *logits, int32_t n_vocab, int32_t id) {
    int32_t k = j->n_out, nt = j->n_logprobs;
    double *lp = realloc(j->lp, ((size_t)k + 1) * sizeof *lp);
    if (!lp) return -1;
    j->lp = lp;
    if (nt > 0) {
        sampler_logprob *t = realloc(j->lp_top, ((size_t)k + 1) * (size_t)nt * sizeof *t);
        if (!t) return -1;
        j->lp_top = t;
    }
    sampler_logprob none[1];
    sampler_logprobs(logits, n_vocab, id, nt, &lp[k], nt > 0 ? j->lp_top + (size_t)k * nt : none);
    return 0;
}

int sched_step(sched *s, char *err, size_t err_size) {
    int32_t n_free = 0;
    for (int32_t i = 0; i < s->n_slots; i++) n_free += s->slots[i].job == NULL;
    /* in order: a group waits at the head of the queue until it has its slots */
    if (s->p.cont_batching || n_free == s->n_slots)
        while (s->queue.head && group_size(s->queue.head) <= n_free) {
            n_free -= group_size(s->queue.head);
            start_group(s, fifo_pop(&s->queue));
        }

    /* Decode tokens first (one per generating slot), then prefill chunks, from slot rr on. */
    int32_t n = 0, rows = 0, n_dec = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t r = 0; r < s->n_slots && n < s->p.n_batch; r++) {
            int32_t k = (s->rr + r) % s->n_slots;
            slot *sl = &s->slots[k];
            if (!sl->job) continue;
            int32_t pos = engine_seq_len(s->e, k);
            if (pass == 0 && sl->pending >= 0) {
                s->row_slot[rows++] = k;
                s->batch[n++] = (engine_token){sl->pending, pos, k, 1, sl->job->ignore_eos};
                n_dec++;
            } else if (pass == 1 && sl->pending < 0 && sl->n_fed < sl->job->n_prompt) {
                int32_t left = sl->job->n_prompt - sl->n_fed, room = s->p.n_batch - n;
                int32_t c = left < room ? left : room;
                for (int32_t i = 0; i < c; i++) {
                    bool last = sl->n_fed + i == sl->job->n_prompt - 1;
                    if (last) s->row_slot[rows++] = k;
                    s->batch[n++] = (engine_token){sl->job->prompt[sl->n_fed + i], pos + i, k, last,
                                                   sl->job->ignore_eos};
                }
                sl->n_fed += c;
                s->st.n_prompt_eval += c;
            }
        }
    s->rr = (s->rr + 1) % s->n_slots;
    if (n == 0) return 0;
    /* The group jobs whose leader's prompt ends in this step pick from the leader's row. */
    int32_t picks = rows;
    for (int32_t r = 0; r < rows; r++) {
        s->row_src[r] = r;
        if (s->slots[s->row_slot[r]].pending >= 0) continue;
        for (int32_t f = 0; f < s->n_slots; f++)
            if (s->slots[f].job && s->slots[f].lead == s->row_slot[r]) {
                s->row_slot[picks] = f;
                s->row_src[picks++] = r;
            }
    }
    /* When every pick is greedy the backend picks (on a GPU only ids come back). */
    bool greedy = true;
    for (int32_t r = 0; r < picks; r++)
        greedy &= sampler_is_greedy(s->slots[s->row_slot[r]].smp) != 0 && !s->slots[s->row_slot[r]].job->logprobs;
    double t0 = now_ms();
    int rc = greedy ? engine_decode_greedy(s->e, s->batch, n, s->ids, err, err_size)
                    : engine_decode(s->e, s->batch, n, s->logits, err, err_size);
    s->st.n_steps++;
    if (!rc && rows == n) { /* every token wants its row: a decode step (or, rarely, one whose
                               prompt chunks are single last tokens) */
        s->st.n_decode_steps++;
        s->st.n_decode_tokens += n;
        s->st.decode_ms += now_ms() - t0;
    } else if (!rc && n_dec == 0) { /* prompt tokens only */
        s->st.n_prompt_steps++;
        s->st.n_prompt_step_tokens += n;
        s->st.prompt_ms += now_ms() - t0;
    }
    if (rc) {
        for (int32_t k = 0; k < s->n_slots; k++)
            if (s->slots[k].job) {
                snprintf(s->slots[k].job->err, sizeof s->slots[k].job->err, "%s", err);
                engine_seq_free(s->e, k);
                finish(s, &s->slots[k], SCHED_ERROR);
            }
        return -1;
    }
    for (int32_t i = 0; i < n; i++) s->slots[s->batch[i].seq].hist[s->batch[i].pos] = s->batch[i].token;
    /* The prompt is in the leaders' caches: each waiting group job takes it by reference. */
    for (int32_t r = rows; r < picks; r++) {
        slot *f = &s->slots[s->row_slot[r]];
        int32_t lead = s->row_slot[s->row_src[r]], np = f->job->n_prompt;
        if (engine_seq_cp(s->e, lead, s->row_slot[r], 0, np, err, err_size)) {
            snprintf(f->job->err, sizeof f->job->err, "%s", err);
            finish(s, f, SCHED_ERROR);
            continue;
        }
        memcpy(f->hist, s->slots[lead].hist, (size_t)np * sizeof(int32_t));
        f->lead = -1;
        f->job->n_reused = np;
        s->st.n_prompt_reused += np;
        if (greedy) s->ids[r] = s->ids[s->row_src[r]];
    }
    if (!greedy) draw_rows(s, picks);
    for (int32_t r = 0; r < picks; r++) {
        slot *sl = &s->slots[s->row_slot[r]];
        if (!sl->job) continue; /* a group job whose share of the prompt failed */
        if (sl->pending < 0) sl->job->t_prompt = now_ms();
        sl->pending = -1;
        if (sl->job->logprobs &&
            record_logprobs(sl->job, s->logits + (size_t)s->row_src[r] * s->n_vocab, s->n_vocab, s->ids[r])) {
            snprintf(sl->job->err, sizeof sl->job->err, "out of memory for the log-probabilities");
            engine_seq_free(s->e, (int32_t)(sl - s->slots));
            finish(s, sl, SCHED_ERROR);
            continue;
        }
        take(s, sl, s->ids[r]);
    }
    return 0;
}
