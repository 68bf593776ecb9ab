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

int cal_spm_encode(const cal_vocab *v, const char *text, size_t n, int32_t *ids, int cap,
                   int *count)
{
    if (n == 0)
        return CAL_OK;
    cal_sym *sy = malloc(n * sizeof *sy);
    cal_heap h;
    if (!sy || cal_heap_init(&h, n, 1) != CAL_OK) {
        free(sy);
        return CAL_ENOMEM;
    }
    int ns = 0;
    for (size_t off = 0; off < n;) {
        size_t l = char_len((unsigned char)text[off]);
        if (l > n - off)
            l = n - off;
        sy[ns] = (cal_sym){.text = text + off, .n = l, .prev = ns - 1,
                           .next = off + l == n ? -1 : ns + 1};
        off += l;
        ns++;
    }
    int rc = CAL_OK;
    for (int i = 1; i < ns && rc == CAL_OK; i++)
        try_pair(v, sy, &h, i - 1, i);
    cal_pair b;
    while (h.err == CAL_OK && cal_heap_pop(&h, &b)) {
        if (!cal_sym_join(sy, &b))
            continue;
        try_pair(v, sy, &h, sy[b.left].prev, b.left);
        try_pair(v, sy, &h, b.left, sy[b.left].next);
    }
    rc = h.err;
    for (int i = 0; i != -1 && rc == CAL_OK; i = sy[i].next) {
        int32_t id = cal_vocab_find(v, sy[i].text, sy[i].n);
        if (id >= 0) {
            if (*count >= cap) { rc = CAL_ETOOBIG; break; }
            ids[(*count)++] = id;
            continue;
        }
        /* a merged symbol is always a token: this is one character */
        for (size_t j = 0; j < sy[i].n; j++) {
            int32_t bid = v->byte_id[(unsigned char)sy[i].text[j]];
            if (bid < 0) { rc = CAL_EINVAL; break; }
            if (*count >= cap) { rc = CAL_ETOOBIG; break; }
            ids[(*count)++] = bid;
        }
    }
    cal_heap_free(&h);
    free(sy);
    return rc;
}
