/* caliper reference engine — what the SentencePiece and BPE encoders share:
 * the symbol list of a word being merged and a binary heap of candidate
 * pairs (best first: highest score for SPM, lowest rank for BPE; ties go to
 * the leftmost pair, as in llama.cpp). Internal to engine/tok_*.c. */
#ifndef CALIPER_ENGINE_BIGRAM_H
#define CALIPER_ENGINE_BIGRAM_H
#include <stddef.h>
#include <stdint.h>

typedef struct cal_sym {
    const char *text;   /* start of the symbol's bytes */
    size_t      n;      /* its length; 0 once merged into its left neighbour */
    int         prev, next;  /* neighbours; -1 none */
} cal_sym;

typedef struct cal_pair {
    float    score;     /* SPM: the joined token's score */
    int32_t  rank;      /* BPE: the merge's rank */
    int      left, right;
    uint32_t size;      /* bytes of the joined text when queued */
} cal_pair;

typedef struct cal_heap {
    cal_pair *a;
    size_t    n, cap;
    int       by_score;  /* 1: highest score first; 0: lowest rank first */
    int       err;       /* CAL_ENOMEM once a push could not grow the heap */
} cal_heap;

int  cal_heap_init(cal_heap *h, size_t cap, int by_score);
void cal_heap_push(cal_heap *h, cal_pair p);
int  cal_heap_pop(cal_heap *h, cal_pair *out);   /* 1 popped, 0 empty */
void cal_heap_clear(cal_heap *h);
void cal_heap_free(cal_heap *h);

/* Join pair b of the symbol list sy (the right symbol into the left) unless
 * either side has changed since the pair was queued (a stale pair: 0);
 * 1 when joined. The caller then queues the left symbol's new neighbours. */
int cal_sym_join(cal_sym *sy, const cal_pair *b);

#endif
