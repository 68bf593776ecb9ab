/* caliper reference engine — byte-level BPE encoding (tokenizer.ggml.model
 * "gpt2"), as llama.cpp does it: the text is split into words by the
 * pre-tokenizer's pattern (PCRE2, Unicode properties), each word's bytes
 * are mapped through GPT-2's byte-to-unicode table, its characters merged
 * pair by pair in the order of the merge list (lowest rank first, ties: the
 * leftmost), and each resulting piece looked up as a token.
 *
 * Text is read as llama.cpp reads it: a byte that starts no valid sequence
 * becomes U+FFFD (so invalid UTF-8 tokenizes as the replacement character
 * does). "\s" is llama.cpp's whitespace set (Unicode White_Space, which has
 * U+0085 where PCRE2's \s does not). Text between two matches becomes one
 * word per character, as llama.cpp's splitters leave it. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/vocab.h"
#include "engine/bigram.h"
#include "caliper/error.h"
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's lenient UTF-8 reader: overlong forms and surrogates pass,
 * a byte that starts nothing complete is U+FFFD and one byte long. */
static uint32_t next_cpt(const unsigned char *s, size_t n, size_t *i)
{
    unsigned char b = s[*i];
    size_t k = *i;
    if (!(b & 0x80)) { *i += 1; return b; }
    if (!(b & 0x40)) goto bad;
    if (!(b & 0x20)) {
        if (k + 1 >= n || (s[k + 1] & 0xc0) != 0x80) goto bad;
        *i += 2;
        return (uint32_t)(b & 0x1f) << 6 | (s[k + 1] & 0x3f);
    }
    if (!(b & 0x10)) {
        if (k + 2 >= n || (s[k + 1] & 0xc0) != 0x80 || (s[k + 2] & 0xc0) != 0x80) goto bad;
        *i += 3;
        return (uint32_t)(b & 0x0f) << 12 | (uint32_t)(s[k + 1] & 0x3f) << 6 | (s[k + 2] & 0x3f);
    }
    if (!(b & 0x08)) {
        if (k + 3 >= n || (s[k + 1] & 0xc0) != 0x80 || (s[k + 2] & 0xc0) != 0x80 ||
            (s[k + 3] & 0xc0) != 0x80) goto bad;
        *i += 4;
        return (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[k + 1] & 0x3f) << 12 |
               (uint32_t)(s[k + 2] & 0x3f) << 6 | (s[k + 3] & 0x3f);
    }
bad:
    *i += 1;
    return 0xfffd;
}

static int put_utf8(uint32_t c, char *o)
{
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xc0 | c >> 6); o[1] = (char)(0x80 | (c & 0x3f)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | c >> 12); o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | c >> 18); o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3f)); o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* GPT-2's byte-to-unicode code point for byte b */
static uint32_t byte_cpt(unsigned b)
{
    static uint16_t tab[256];
    static int ready;
    if (!ready) {
        unsigned k = 0;
        for (unsigned c = 0; c < 256; c++) {
            int keep = (c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) ||
                       (c >= 0xae && c <= 0xff);
            tab[c] = (uint16_t)(keep ? c : 256 + k++);
        }
        ready = 1;
    }
    return tab[b & 0xff];
}

typedef struct work {
    const cal_vocab *v;
    cal_sym  *sy;
    size_t    sy_cap;
    cal_heap  h;
    char     *enc;        /* the word, byte-encoded */
    size_t    enc_cap;
    int32_t  *ids;
    int       cap, *count;
} work;

static int emit(work *w, int32_t id)
{
    if (*w->count >= w->cap)
        return CAL_ETOOBIG;
    w->ids[(*w->count)++] = id;
    return CAL_OK;
}

static void add_pair(work *w, int l, int r)
{
    if (l < 0 || r < 0)
        return;
    int32_t rank = cal_vocab_rank(w->v, w->sy[l].text, w->sy[l].n, w->sy[r].text, w->sy[r].n);
    if (rank < 0)
        return;
    cal_heap_push(&w->h, (cal_pair){.rank = rank, .left = l, .right = r,
                                    .size = (uint32_t)(w->sy[l].n + w->sy[r].n)});
}

/* One word: its original UTF-8 bytes w8[n8]. */
static int do_word(work *w, const char *w8, size_t n8)
{
    const cal_vocab *v = w->v;
    /* each byte becomes a 1- or 2-byte character */
    if (2 * n8 > w->enc_cap) {
        size_t c = 2 * n8 + 64;
        char *q = realloc(w->enc, c);
        if (!q) return CAL_ENOMEM;
        w->enc = q;
        w->enc_cap = c;
    }
    size_t m = 0;
    for (size_t i = 0; i < n8; i++)
        m += (size_t)put_utf8(byte_cpt((unsigned char)w8[i]), w->enc + m);
    if (m > w->sy_cap) {
        cal_sym *q = realloc(w->sy, (m + 16) * sizeof *q);
        if (!q) return CAL_ENOMEM;
        w->sy = q;
        w->sy_cap = m + 16;
    }
    const char *e = w->enc;
    int32_t whole;
    if (v->ignore_merges && (whole = cal_vocab_find(v, e, m)) >= 0)
        return emit(w, whole);
    int ns = 0;
    for (size_t off = 0; off < m;) {
        size_t l = ((unsigned char)e[off] & 0xe0) == 0xc0 ? 2 : 1;
        w->sy[ns] = (cal_sym){.text = e + off, .n = l, .prev = ns - 1,
                              .next = off + l == m ? -1 : ns + 1};
        off += l;
        ns++;
    }
    cal_heap_clear(&w->h);
    for (int i = 1; i < ns; i++)
        add_pair(w, i - 1, i);
    cal_pair b;
    while (w->h.err == CAL_OK && cal_heap_pop(&w->h, &b)) {
        if (!cal_sym_join(w->sy, &b))
            continue;
        add_pair(w, w->sy[b.left].prev, b.left);
        add_pair(w, b.left, w->sy[b.left].next);
    }
    if (w->h.err != CAL_OK)
        return w->h.err;
    for (int i = 0; i != -1; i = w->sy[i].next) {
        if (w->sy[i].n == 0)
            continue;
        int32_t id = cal_vocab_find(v, w->sy[i].text, w->sy[i].n);
        int rc = CAL_OK;
        if (id >= 0) {
            rc = emit(w, id);
        } else {
            /* llama.cpp then looks each byte of the encoded piece up as a
             * one-byte token and drops those that are not */
            for (size_t j = 0; j < w->sy[i].n && rc == CAL_OK; j++) {
                int32_t t = cal_vocab_find(v, w->sy[i].text + j, 1);
                if (t >= 0) rc = emit(w, t);
            }
        }
        if (rc != CAL_OK)
            return rc;
    }
    return CAL_OK;
}

/* Buffers for one fragment's subject, allocated once for the longest. */
typedef struct subject {
    char   *sub, *orig;
    size_t *cpt_at;   /* code point i -> byte in sub */
    size_t *org_at;   /* code point i -> byte in orig */
    pcre2_match_data *md;
} subject;

/* One fragment of text, t[n]. */
static int encode_text(work *w, subject *j, const char *text, size_t n)
{
    const cal_vocab *v = w->v;
    /* the subject: code points as llama.cpp reads them, re-encoded; a
     * surrogate (which PCRE2 refuses) stands in as U+FFFD, which has the
     * same class here (neither letter, number nor space) */
    size_t nc = 0, ls = 0, lo = 0;
    for (size_t i = 0; i < n; nc++) {
        uint32_t c = next_cpt((const unsigned char *)text, n, &i);
        if (c > 0x10ffff)
            return CAL_EINVAL;   /* llama.cpp cannot either */
        j->cpt_at[nc] = ls;
        j->org_at[nc] = lo;
        ls += (size_t)put_utf8(c >= 0xd800 && c <= 0xdfff ? 0xfffd : c, j->sub + ls);
        lo += (size_t)put_utf8(c, j->orig + lo);
    }
    j->cpt_at[nc] = ls;
    j->org_at[nc] = lo;
    const char *orig = j->orig;
    const size_t *cpt_at = j->cpt_at, *org_at = j->org_at;
    /* byte offset in sub -> code point index, by walking both together */
    size_t ci = 0, pos = 0;
    int rc = CAL_OK;
    while (rc == CAL_OK && pos < ls) {
        int r = pcre2_match(v->re, (PCRE2_SPTR)j->sub, ls, pos, PCRE2_NO_UTF_CHECK, j->md,
                            NULL);
        size_t ms = ls, me = ls;
        if (r >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(j->md);
            ms = ov[0];
            me = ov[1];
        } else if (r != PCRE2_ERROR_NOMATCH) {
            return CAL_EINTERNAL;
        }
        /* the characters before the match: a word each */
        while (rc == CAL_OK && cpt_at[ci] < ms) {
            rc = do_word(w, orig + org_at[ci], org_at[ci + 1] - org_at[ci]);
            ci++;
        }
        if (rc != CAL_OK || ms == ls)
            break;
        if (me == ms) {   /* an empty match: take one character */
            rc = do_word(w, orig + org_at[ci], org_at[ci + 1] - org_at[ci]);
            ci++;
            pos = cpt_at[ci];
            continue;
        }
        size_t cj = ci;
        while (cpt_at[cj] < me)
            cj++;
        rc = do_word(w, orig + org_at[ci], org_at[cj] - org_at[ci]);
        ci = cj;
        pos = me;
    }
    return rc;
}

int cal_bpe_encode(const cal_vocab *v, const char *text, const cal_frag *f, size_t nf,
                   int32_t *ids, int cap, int *count)
{
    if (!v->re)
        return CAL_EINVAL;
    size_t longest = 0;
    for (size_t i = 0; i < nf; i++)
        if (f[i].id < 0 && f[i].len > longest)
            longest = f[i].len;
    size_t cap8 = 3 * longest + 4;
    subject j = {malloc(cap8), malloc(cap8), malloc((longest + 1) * sizeof(size_t)),
                 malloc((longest + 1) * sizeof(size_t)),
                 pcre2_match_data_create_from_pattern(v->re, NULL)};
    work w = {.v = v, .ids = ids, .cap = cap, .count = count};
    int rc = CAL_OK;
    if (!j.sub || !j.orig || !j.cpt_at || !j.org_at || !j.md ||
        cal_heap_init(&w.h, 64, 0) != CAL_OK)
        rc = CAL_ENOMEM;
    for (size_t i = 0; i < nf && rc == CAL_OK; i++)
        rc = f[i].id >= 0 ? emit(&w, f[i].id)
             : f[i].len ? encode_text(&w, &j, text + f[i].off, f[i].len) : CAL_OK;
    if (j.md)
        pcre2_match_data_free(j.md);
    cal_heap_free(&w.h);
    free(w.sy);
    free(w.enc);
    free(j.sub);
    free(j.orig);
    free(j.cpt_at);
    free(j.org_at);
    return rc;
}
