/* The paged KV cache's bookkeeping, independent of where the K/V values live: a pool of pages of
 * ENGINE_KV_PAGE cells with reference counts, and per sequence a page table and a length.
 * Several sequences may reference one page (a shared prefix); a page is written only while it
 * has one reference (the engine copies a shared page before writing into it). */
#ifndef MGI_ENGINE_KVCACHE_H
#define MGI_ENGINE_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/batch.h"

typedef struct {
    int32_t *pages;   /* [cap] page ids; the first n_pages are in use */
    int32_t n_pages;  /* == ceil(len / ENGINE_KV_PAGE) between operations */
    int32_t len;      /* positions held */
} kvcache_seq;

typedef struct {
    int32_t n_pages;     /* pool size */
    int32_t *ref;        /* [n_pages] sequences referencing each page; 0: free */
    int32_t *free_list;  /* [n_pages] stack of free page ids */
    int32_t n_free;
    int32_t n_seq;       /* sequences 0..n_seq-1 */
    int32_t max_len;     /* positions one sequence may hold */
    kvcache_seq *seqs;   /* [n_seq], each with room for ceil(max_len / ENGINE_KV_PAGE) pages */
} kvcache;

/* A pool of n_pages for n_seq sequences of up to max_len positions; 0, or -1 with a message. */
int kvcache_init(kvcache *kv, int32_t n_pages, int32_t n_seq, int32_t max_len, char *err, size_t err_size);
void kvcache_free(kvcache *kv);

/* Shortens seq to len positions (len <= its length), returning pages it no longer needs. */
void kvcache_truncate(kvcache *kv, int32_t seq, int32_t len);
/* dst (emptied first) references src's pages covering [0, len), len <= src's length. */
void kvcache_share(kvcache *kv, int32_t src, int32_t dst, int32_t len);

/* Pages needed to grow seq from its length to new_len: new pages past its table, plus one when
 * its partly filled last page is shared (copy-on-write). */
int32_t kvcache_pages_needed(const kvcache *kv, int32_t seq, int32_t new_len);
/* Makes seq's partly filled last page its own when shared: *dst gets a fresh page and *src the
 * shared one, whose first *n cells the caller copies; returns 1 then, 0 when nothing is needed.
 * The caller has checked kvcache_pages_needed against n_free. */
int kvcache_unshare_last(kvcache *kv, int32_t seq, int32_t *dst, int32_t *src, int32_t *n);
/* Undoes kvcache_unshare_last (the copy failed): seq references the shared page src again and
 * the fresh page is returned. */
void kvcache_reshare_last(kvcache *kv, int32_t seq, int32_t src);
/* Appends fresh pages so seq's table covers new_len positions (length unchanged). */
void kvcache_reserve(kvcache *kv, int32_t seq, int32_t new_len);

/* KV cell of position pos of seq (pos < n_pages * ENGINE_KV_PAGE). */
static inline int32_t kvcache_cell(const kvcache *kv, int32_t seq, int32_t pos) {
    return kv->seqs[seq].pages[pos / ENGINE_KV_PAGE] * ENGINE_KV_PAGE + pos % ENGINE_KV_PAGE;
}

#endif
