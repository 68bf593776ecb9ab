/* caliper reference engine — SentencePiece BPE encoding (tokenizer.ggml.model
 * "llama"), as llama.cpp does it: the text split into UTF-8 characters, then
 * repeatedly the adjacent pair whose joined text is a token with the highest
 * score is merged (ties: the leftmost); what is left unmerged and is not a
 * token falls back to its bytes' <0xXX> tokens. */
#include "engine/vocab.h"
#include "engine/bigram.h"
#include "caliper/error.h"
#include <stdlib.h>
#include <string.h>

/* Bytes in the UTF-8 character that starts with b, by its high nibble
 * (llama.cpp's table: a stray continuation byte counts as one). */
static size_t char_len(unsigned char b)
{
    static const unsigned char t[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return t[b >> 4];
}

static void try_pair(const cal_vocab *v, cal_sym *sy, cal_heap *h, int l, int r)
{
    if (l < 0 || r < 0)
        return;
    int32_t id = cal_vocab_find(v, sy[l].text, sy[l].n + sy[r].n);
    if (id < 0)
        return;
    cal_heap_push(h, (cal_pair){.score = v->score[id], .left = l, .right = r,
                                .size = (uint32_t)(sy[l].n + sy[r].n)});
}

static int push(int32_t *ids, int cap, int *count, int32_t id)
{
    if (*count >= cap)
        return CAL_ETOOBIG;
    ids[(*count)++] = id;
    return CAL_OK;
}

/* One fragment, escaped already, in esc[n]; sy has room for its symbols. */
static int encode_one(const cal_vocab *v, const char *esc, size_t n, cal_sym *sy, cal_heap *h,
                      int32_t *ids, int cap, int *count)
{
    int ns = 0;
    for (size_t off = 0; off < n;) {
        size_t l = char_len((unsigned char)esc[off]);
        if (l > n - off)
            l = n - off;
        sy[ns] = (cal_sym){.text = esc + off, .n = l, .prev = ns - 1,
                           .next = off + l == n ? -1 : ns + 1};
        off += l;
        ns++;
    }
    cal_heap_clear(h);
    for (int i = 1; i < ns; i++)
        try_pair(v, sy, h, i - 1, i);
    cal_pair b;
    while (h->err == CAL_OK && cal_heap_pop(h, &b)) {
        if (!cal_sym_join(sy, &b))
            continue;
        try_pair(v, sy, h, sy[b.left].prev, b.left);
        try_pair(v, sy, h, b.left, sy[b.left].next);
    }
    int rc = h->err;
    for (int i = 0; i != -1 && rc == CAL_OK; i = sy[i].next) {
        int32_t id = cal_vocab_find(v, sy[i].text, sy[i].n);
        if (id >= 0) {
            rc = push(ids, cap, count, id);
            continue;
        }
        /* a merged symbol is always a token: this is one character */
        for (size_t j = 0; j < sy[i].n && rc == CAL_OK; j++) {
            int32_t bid = v->byte_id[(unsigned char)sy[i].text[j]];
            rc = bid < 0 ? CAL_EINVAL : push(ids, cap, count, bid);
        }
    }
    return rc;
}

int cal_spm_encode(const cal_vocab *v, const char *text, const cal_frag *f, size_t nf,
                   int32_t *ids, int cap, int *count)
{
    size_t longest = 0;
    for (size_t i = 0; i < nf; i++)
        if (f[i].id < 0 && f[i].len > longest)
            longest = f[i].len;
    /* escaped, the prefix and every byte a "▁" at most; the symbols are
     * counted per fragment (an invalid lead byte can split a "▁" in three) */
    char *esc = malloc(3 * longest + 3);
    cal_sym *sy = NULL;
    size_t sy_cap = 0;
    cal_heap h;
    int rc = !esc || cal_heap_init(&h, longest + 1, 1) != CAL_OK ? CAL_ENOMEM : CAL_OK;
    if (rc != CAL_OK) {
        free(esc);
        return rc;
    }
    int prev_special = 1;  /* a space before text at the start or after a
                              special token */
    for (size_t i = 0; i < nf && rc == CAL_OK; i++) {
        if (f[i].id >= 0) {
            rc = push(ids, cap, count, f[i].id);
            prev_special = 1;
            continue;
        }
        const char *s = text + f[i].off;
        size_t k = 0;
        if (v->add_space_prefix && prev_special) {
            memcpy(esc, "\xe2\x96\x81", 3);
            k = 3;
        }
        for (size_t j = 0; j < f[i].len; j++) {
            if (s[j] == ' ') {
                memcpy(esc + k, "\xe2\x96\x81", 3);
                k += 3;
            } else {
                esc[k++] = s[j];
            }
        }
        size_t ns = 0;
        for (size_t off = 0; off < k; ns++)
            off += char_len((unsigned char)esc[off]);
        if (ns > sy_cap) {
            cal_sym *q = realloc(sy, ns * sizeof *q);
            if (!q) {
                rc = CAL_ENOMEM;
                break;
            }
            sy = q;
            sy_cap = ns;
        }
        if (k)
            rc = encode_one(v, esc, k, sy, &h, ids, cap, count);
        prev_special = 0;
    }
    cal_heap_free(&h);
    free(sy);
    free(esc);
    return rc;
}
