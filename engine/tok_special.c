/* caliper reference engine — splitting text at a vocabulary's special
 * tokens (engine/vocab.h: cal_special_split), with llama.cpp's meaning
 * (tokenizer_st_partition: the longest token first, each taking its
 * leftmost non-overlapping occurrences in the text the ones before it left)
 * and without its cost: there every token rescans every fragment and every
 * split moves the fragment list, so 4 MB of "x<s>y</s>" took minutes. Here
 * one pass over the unclaimed text per distinct token length finds that
 * length's tokens with a rolling hash, and an occurrence is checked against
 * the text already claimed in O(1) (see take_group). */
#include "engine/vocab.h"
#include "caliper/error.h"
#include <stdlib.h>
#include <string.h>

#define ROLL_BASE 0x100000001b3ull   /* odd: the hash is a polynomial mod 2^64 */
#define MIX       0x9e3779b97f4a7c15ull
#define INTERIOR  UINT32_MAX         /* mark: a claimed byte after the first */

typedef struct sslot {
    uint64_t h;      /* the text's rolling hash */
    int32_t  any;    /* the first special (index into v->special) with this
                        text; -1: an empty slot */
    int32_t  user;   /* the first user-defined one (matched without
                        parse_special); -1 none */
} sslot;

struct cal_slen {
    uint32_t len;    /* bytes of every token in the group */
    int32_t  first;  /* its first index into v->special */
    int32_t  count;  /* tokens in the group */
    int      has_user;
    uint64_t pow;    /* ROLL_BASE^(len-1), to roll a byte out */
    unsigned bits;   /* table of 2^bits slots */
    sslot   *tab;
    uint8_t  lead[2][256];    /* [parse_special] 1: a token that may match
                                 starts with this byte */
};

static uint64_t hash_of(const char *s, size_t n)
{
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++)
        h = h * ROLL_BASE + (unsigned char)s[i];
    return h;
}

static size_t bucket(const struct cal_slen *g, uint64_t h)
{
    return (size_t)((h * MIX) >> (64 - g->bits));
}

static const char *text_of(const cal_vocab *v, int32_t k)
{
    return v->pool + v->off[v->special[k]];
}

void cal_special_free(cal_vocab *v)
{
    for (int i = 0; v->slen && i < v->n_slen; i++)
        free(v->slen[i].tab);
    free(v->slen);
    v->slen = NULL;
    v->n_slen = 0;
}

int cal_special_index(cal_vocab *v)
{
    int groups = 0;
    for (int k = 0; k < v->n_special; k++)
        groups += k == 0 || v->len[v->special[k]] != v->len[v->special[k - 1]];
    v->slen = calloc(groups ? (size_t)groups : 1, sizeof *v->slen);
    if (!v->slen)
        return CAL_ENOMEM;
    for (int k = 0; k < v->n_special;) {
        struct cal_slen *g = &v->slen[v->n_slen++];
        g->len = v->len[v->special[k]];
        g->first = k;
        while (k < v->n_special && v->len[v->special[k]] == g->len)
            k++;
        g->count = k - g->first;
        g->pow = 1;
        for (uint32_t i = 1; i < g->len; i++)
            g->pow *= ROLL_BASE;
        g->bits = 1;
        while (((size_t)1 << g->bits) < 2 * (size_t)g->count)
            g->bits++;
        g->tab = malloc(((size_t)1 << g->bits) * sizeof *g->tab);
        if (!g->tab)
            return CAL_ENOMEM;
        for (size_t i = 0; i < (size_t)1 << g->bits; i++)
            g->tab[i] = (sslot){0, -1, -1};
        /* in priority order: the first token with a text takes its
         * occurrences, a later one with the same text never gets any */
        for (int32_t j = g->first; j < k; j++) {
            const char *s = text_of(v, j);
            uint64_t h = hash_of(s, g->len);
            int user = v->type[v->special[j]] == CAL_TT_USER_DEFINED;
            g->has_user |= user;
            g->lead[1][(unsigned char)s[0]] = 1;
            g->lead[0][(unsigned char)s[0]] |= (uint8_t)user;
            size_t b = bucket(g, h), mask = ((size_t)1 << g->bits) - 1;
            for (;; b = (b + 1) & mask) {
                sslot *e = &g->tab[b];
                if (e->any < 0) {
                    *e = (sslot){h, j, user ? j : -1};
                    break;
                }
                if (e->h == h && !memcmp(text_of(v, e->any), s, g->len)) {
                    if (user && e->user < 0)
                        e->user = j;
                    break;
                }
            }
        }
    }
    return CAL_OK;
}

/* The special (index into v->special) whose text is s[g->len] and that may
 * match, or -1. */
static int32_t lookup(const cal_vocab *v, const struct cal_slen *g, uint64_t h, const char *s,
                      int parse_special)
{
    size_t mask = ((size_t)1 << g->bits) - 1;
    for (size_t b = bucket(g, h);; b = (b + 1) & mask) {
        const sslot *e = &g->tab[b];
        if (e->any < 0)
            return -1;
        if (e->h == h && !memcmp(text_of(v, e->any), s, g->len))
            return parse_special ? e->any : e->user;
    }
}

typedef struct cand {
    int32_t k;       /* index into v->special */
    size_t  pos;
} cand;

static int by_token(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->k != y->k)
        return x->k < y->k ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* One group's turn: every occurrence of its tokens in the unclaimed text,
 * then each token in priority order takes its leftmost non-overlapping
 * ones that are still unclaimed. An occurrence [p, p+L) overlaps the text
 * claimed before it only if p or p+L-1 is claimed: every claim so far is at
 * least L bytes long (longer groups went first, this group's are L), so one
 * cannot sit strictly inside the window. */
static int take_group(const cal_vocab *v, const struct cal_slen *g, const char *text, size_t n,
                      int parse_special, uint32_t *mark, cand **cv, size_t *ccap)
{
    size_t L = g->len, nc = 0;
    for (size_t i = 0; i < n;) {
        if (mark[i]) {   /* the first byte of a claim: skip the claim */
            i += mark[i] == INTERIOR ? 1 : v->len[v->special[mark[i] - 1]];
            continue;
        }
        size_t a = i;
        while (i < n && !mark[i])
            i++;
        if (i - a < L)
            continue;
        uint64_t h = hash_of(text + a, L);
        const uint8_t *lead = g->lead[parse_special != 0];
        for (size_t p = a;; p++) {
            int32_t k = lead[(unsigned char)text[p]] ? lookup(v, g, h, text + p, parse_special)
                                                      : -1;
            if (k >= 0) {
                if (nc == *ccap) {
                    size_t c = *ccap ? 2 * *ccap : 256;
                    cand *q = realloc(*cv, c * sizeof *q);
                    if (!q)
                        return CAL_ENOMEM;
                    *cv = q;
                    *ccap = c;
                }
                (*cv)[nc++] = (cand){k, p};
            }
            if (p + L >= i)
                break;
            h = (h - (unsigned char)text[p] * g->pow) * ROLL_BASE + (unsigned char)text[p + L];
        }
    }
    cand *c = *cv;
    if (g->count > 1 && nc > 1)
        qsort(c, nc, sizeof *c, by_token);   /* by token, each in text order */
    size_t last_end = 0;
    for (size_t j = 0; j < nc; j++) {
        if (j == 0 || c[j].k != c[j - 1].k)
            last_end = 0;
        size_t p = c[j].pos;
        if (p < last_end || mark[p] || mark[p + L - 1])
            continue;
        mark[p] = (uint32_t)c[j].k + 1;
        for (size_t q = p + 1; q < p + L; q++)
            mark[q] = INTERIOR;
        last_end = p + L;
    }
    return CAL_OK;
}

int cal_special_split(const cal_vocab *v, const char *text, size_t n, int parse_special,
                      cal_frag **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (n == 0)
        return CAL_OK;
    uint32_t *mark = NULL;
    cand *cv = NULL;
    size_t ccap = 0;
    int rc = CAL_OK, claimed = 0;
    for (int gi = 0; gi < v->n_slen && rc == CAL_OK; gi++) {
        const struct cal_slen *g = &v->slen[gi];
        if (g->len > n || (!parse_special && !g->has_user))
            continue;
        if (!mark && !(mark = calloc(n, sizeof *mark))) {
            rc = CAL_ENOMEM;
            break;
        }
        rc = take_group(v, g, text, n, parse_special, mark, &cv, &ccap);
        claimed = 1;
    }
    free(cv);
    /* the fragments: runs of unclaimed text and the claims, in text order */
    size_t nf = 0, cap = 1;
    for (size_t i = 0; claimed && rc == CAL_OK && i < n; i++)
        if (mark[i] && mark[i] != INTERIOR)
            cap += 2;
    cal_frag *f = rc == CAL_OK ? malloc(cap * sizeof *f) : NULL;
    if (rc == CAL_OK && !f)
        rc = CAL_ENOMEM;
    for (size_t i = 0; rc == CAL_OK && i < n;) {
        if (claimed && mark[i]) {
            int32_t id = v->special[mark[i] - 1];
            f[nf++] = (cal_frag){id, i, v->len[id]};
            i += v->len[id];
            continue;
        }
        size_t a = i;
        while (i < n && !(claimed && mark[i]))
            i++;
        f[nf++] = (cal_frag){-1, a, i - a};
    }
    free(mark);
    if (rc != CAL_OK) {
        free(f);
        return rc;
    }
    *out = f;
    *nout = nf;
    return CAL_OK;
}
