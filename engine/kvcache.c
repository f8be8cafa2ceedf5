/* Paged KV bookkeeping: page allocation from a free stack, reference counts, page tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kvcache.h"

static int32_t pages_for(int32_t len) { return (int32_t)(((int64_t)len + ENGINE_KV_PAGE - 1) / ENGINE_KV_PAGE); }

int kvcache_init(kvcache *kv, int32_t n_pages, int32_t n_seq, int32_t max_len, char *err, size_t err_size) {
    memset(kv, 0, sizeof *kv);
    if (n_pages < 1 || n_seq < 1 || max_len < 1) {
        snprintf(err, err_size, "KV cache: bad size (%d pages, %d sequences, %d positions each)", n_pages, n_seq,
                 max_len);
        return -1;
    }
    int32_t per_seq = pages_for(max_len);
    kv->ref = calloc((size_t)n_pages, sizeof *kv->ref);
    kv->free_list = malloc((size_t)n_pages * sizeof *kv->free_list);
    kv->seqs = calloc((size_t)n_seq, sizeof *kv->seqs);
    int ok = kv->ref && kv->free_list && kv->seqs;
    for (int32_t s = 0; ok && s < n_seq; s++)
        ok = (kv->seqs[s].pages = malloc((size_t)per_seq * sizeof(int32_t))) != NULL;
    if (!ok) {
        kv->n_seq = n_seq;
        kvcache_free(kv);
        snprintf(err, err_size, "KV cache: out of memory for the page tables of %d sequences", n_seq);
        return -1;
    }
    /* Stack order hands out page 0 first, so one sequence's cells are laid out in order. */
    for (int32_t i = 0; i < n_pages; i++) kv->free_list[i] = n_pages - 1 - i;
    kv->n_free = n_pages;
    kv->n_pages = n_pages;
    kv->n_seq = n_seq;
    kv->max_len = max_len;
    return 0;
}

void kvcache_free(kvcache *kv) {
    if (kv->seqs)
        for (int32_t s = 0; s < kv->n_seq; s++) free(kv->seqs[s].pages);
    free(kv->seqs);
    free(kv->ref);
    free(kv->free_list);
    memset(kv, 0, sizeof *kv);
}

static void page_unref(kvcache *kv, int32_t page) {
    if (--kv->ref[page] == 0) kv->free_list[kv->n_free++] = page;
}

static int32_t page_alloc(kvcache *kv) {
    int32_t page = kv->free_list[--kv->n_free];
    kv->ref[page] = 1;
    return page;
}

void kvcache_truncate(kvcache *kv, int32_t seq, int32_t len) {
    kvcache_seq *s = &kv->seqs[seq];
    int32_t keep = pages_for(len);
    while (s->n_pages > keep) page_unref(kv, s->pages[--s->n_pages]);
    if (len < s->len) s->len = len;
}

void kvcache_share(kvcache *kv, int32_t src, int32_t dst, int32_t len) {
    if (src == dst) {
        kvcache_truncate(kv, dst, len);
        return;
    }
    kvcache_truncate(kv, dst, 0);
    kvcache_seq *s = &kv->seqs[src], *d = &kv->seqs[dst];
    int32_t n = pages_for(len);
    for (int32_t i = 0; i < n; i++) {
        d->pages[i] = s->pages[i];
        kv->ref[s->pages[i]]++;
    }
    d->n_pages = n;
    d->len = len;
}

int32_t kvcache_pages_needed(const kvcache *kv, int32_t seq, int32_t new_len) {
    const kvcache_seq *s = &kv->seqs[seq];
    int32_t need = pages_for(new_len) - s->n_pages;
    if (need < 0) need = 0;
    if (new_len > s->len && s->len % ENGINE_KV_PAGE && kv->ref[s->pages[s->n_pages - 1]] > 1) need++;
    return need;
}

int kvcache_unshare_last(kvcache *kv, int32_t seq, int32_t *dst, int32_t *src, int32_t *n) {
    kvcache_seq *s = &kv->seqs[seq];
    if (s->len % ENGINE_KV_PAGE == 0 || kv->ref[s->pages[s->n_pages - 1]] < 2) return 0;
    int32_t old = s->pages[s->n_pages - 1], fresh = page_alloc(kv);
    page_unref(kv, old);
    s->pages[s->n_pages - 1] = fresh;
    *dst = fresh;
    *src = old;
    *n = s->len % ENGINE_KV_PAGE;
    return 1;
}

void kvcache_reshare_last(kvcache *kv, int32_t seq, int32_t src) {
    kvcache_seq *s = &kv->seqs[seq];
    kv->ref[src]++;
    page_unref(kv, s->pages[s->n_pages - 1]);
    s->pages[s->n_pages - 1] = src;
}

void kvcache_reserve(kvcache *kv, int32_t seq, int32_t new_len) {
    kvcache_seq *s = &kv->seqs[seq];
    int32_t n = pages_for(new_len);
    while (s->n_pages < n) s->pages[s->n_pages++] = page_alloc(kv);
}
