/* caliper reference engine — the candidate-pair heap of the SPM and BPE
 * encoders (engine/bigram.h). */
#include "engine/bigram.h"
#include "caliper/error.h"
#include <stdlib.h>

/* Does a come out before b? */
static int before(const cal_heap *h, const cal_pair *a, const cal_pair *b)
{
    if (h->by_score) {
        if (a->score != b->score)
            return a->score > b->score;
    } else if (a->rank != b->rank) {
        return a->rank < b->rank;
    }
    return a->left < b->left;
}

int cal_heap_init(cal_heap *h, size_t cap, int by_score)
{
    h->cap = cap < 16 ? 16 : cap;
    h->n = 0;
    h->by_score = by_score;
    h->err = CAL_OK;
    h->a = malloc(h->cap * sizeof *h->a);
    return h->a ? CAL_OK : CAL_ENOMEM;
}

void cal_heap_push(cal_heap *h, cal_pair p)
{
    if (h->n == h->cap) {
        cal_pair *q = realloc(h->a, 2 * h->cap * sizeof *q);
        if (!q) {
            h->err = CAL_ENOMEM;
            return;
        }
        h->a = q;
        h->cap *= 2;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(h, &p, &h->a[up]))
            break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i] = p;
}

int cal_heap_pop(cal_heap *h, cal_pair *out)
{
    if (h->n == 0)
        return 0;
    *out = h->a[0];
    cal_pair last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(h, &h->a[c + 1], &h->a[c]))
            c++;
        if (!before(h, &h->a[c], &last))
            break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n)
        h->a[i] = last;
    return 1;
}

void cal_heap_clear(cal_heap *h) { h->n = 0; }

void cal_heap_free(cal_heap *h)
{
    free(h->a);
    h->a = NULL;
    h->n = h->cap = 0;
}

int cal_sym_join(cal_sym *sy, const cal_pair *b)
{
    cal_sym *l = &sy[b->left], *r = &sy[b->right];
    if (l->n == 0 || r->n == 0 || l->n + r->n != b->size)
        return 0;
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0)
        sy[r->next].prev = b->left;
    return 1;
}
