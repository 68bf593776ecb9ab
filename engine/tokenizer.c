/* caliper reference engine — the tokenizer: ids 0..255 are bytes, id 256 is
 * end-of-sequence, ids 257.. are deterministic word-like printable ASCII
 * pieces. Greedy longest-match encode is lossless for any byte string; the
 * streaming decoder emits only valid UTF-8 (U+FFFD for broken sequences).
 * A GGUF file's own vocabulary (engine/vocab.h) is the other kind: special
 * tokens are split out here, the fragments between them go to the
 * SentencePiece or BPE encoder. */
#include "engine/engine.h"
#include "engine/kernels.h"
#include "engine/vocab.h"
#include "caliper/error.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EOS_ID 256
#define MAX_PIECE 8   /* the synthetic vocabulary's longest piece */

struct cal_tokenizer {
    int      vocab;
    char    *pool;    /* piece bytes, stride per id */
    size_t   stride;  /* bytes of pool per id: MAX_PIECE, or the byte
                         vocabulary's longest "[N]" */
    uint8_t *len;     /* [vocab] */
    int32_t *table;   /* open addressing: id or −1; pieces of length ≥ 2 */
    uint32_t mask;
    int      eos;
    int      bytes_only; /* encode one id per byte (a GGUF byte vocabulary) */
    cal_vocab *v;        /* a GGUF file's vocabulary; NULL for the two above */
};

static uint32_t hash(const char *s, int n)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int lookup(const cal_tokenizer *t, const char *s, int n)
{
    for (uint32_t i = hash(s, n) & t->mask;; i = (i + 1) & t->mask) {
        int32_t id = t->table[i];
        if (id < 0)
            return -1;
        if (t->len[id] == n && memcmp(t->pool + (size_t)id * t->stride, s, (size_t)n) == 0)
            return id;
    }
}

static void insert(cal_tokenizer *t, int32_t id)
{
    uint32_t i = hash(t->pool + (size_t)id * t->stride, t->len[id]) & t->mask;
    while (t->table[i] >= 0)
        i = (i + 1) & t->mask;
    t->table[i] = id;
}

/* Letters in rough English frequency, so pieces look like word fragments and
 * ordinary text encodes to fewer ids than bytes. */
static const char letters[] =
    "eeeeeeeeeeeetttttttttaaaaaaaaooooooooiiiiiiinnnnnnnsssssshhhhhhrrrrrr"
    "ddddllllcccuuummmwwffggyyppbbvkjxqz";

static int make_piece(uint64_t *rng, char *p)
{
    uint64_t r = cal_k_splitmix64(rng);
    int kind = (int)(r % 100), n = 0;
    int wl = 1 + (int)((r >> 8) % 4) + (int)((r >> 16) % 4 == 0 ? (r >> 20) % 4 : 0);
    uint64_t s = cal_k_splitmix64(rng);
    if (kind < 80) {
        if (kind < 55 || kind >= 72)
            p[n++] = ' ';
        for (int i = 0; i < wl && n < MAX_PIECE; i++, s >>= 7)
            p[n++] = letters[(s & 127) % (sizeof letters - 1)];
        if (kind >= 72)
            p[1] = (char)(p[1] - 'a' + 'A');
    } else if (kind < 88) {
        for (int i = 0; i < 2 + (int)(s % 3); i++)
            p[n++] = (char)('0' + (s >> (8 + 4 * i)) % 10);
    } else {
        for (int i = 0; i < 2 + (int)(s % 3); i++)
            p[n++] = (char)(0x21 + (s >> (8 + 8 * i)) % 94);
    }
    return n;
}

int cal_tok_open(int vocab, cal_tokenizer **out)
{
    if (!out)
        return CAL_EINVAL;
    *out = NULL;
    if (vocab < 257 || vocab > 1 << 24)
        return CAL_EINVAL;
    cal_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return CAL_ENOMEM;
    uint32_t size = 1;
    while (size < 2u * (uint32_t)vocab)
        size <<= 1;
    t->vocab = vocab;
    t->mask = size - 1;
    t->stride = MAX_PIECE;
    t->pool = calloc((size_t)vocab, MAX_PIECE);
    t->len = calloc((size_t)vocab, 1);
    t->table = malloc(sizeof(int32_t) * size);
    if (!t->pool || !t->len || !t->table) {
        cal_tok_close(&t);
        return CAL_ENOMEM;
    }
    memset(t->table, 0xff, sizeof(int32_t) * size);
    for (int i = 0; i < 256; i++) {
        t->pool[(size_t)i * t->stride] = (char)i;
        t->len[i] = 1;
    }
    t->len[EOS_ID] = 0;
    t->eos = EOS_ID;
    /* A fixed stream, independent of the vocabulary size: piece i is the
     * same in every vocabulary that has an id i. */
    uint64_t rng = 0xca11be7ull;
    for (int id = EOS_ID + 1; id < vocab; id++) {
        char *p = t->pool + (size_t)id * t->stride;
        int n;
        do {
            memset(p, 0, MAX_PIECE);
            n = make_piece(&rng, p);
        } while (n < 2 || lookup(t, p, n) >= 0);
        t->len[id] = (uint8_t)n;
        insert(t, id);
    }
    *out = t;
    return CAL_OK;
}

void cal_tok_close(cal_tokenizer **pt)
{
    if (!pt || !*pt)
        return;
    cal_vocab_free(&(*pt)->v);
    free((*pt)->pool);
    free((*pt)->len);
    free((*pt)->table);
    free(*pt);
    *pt = NULL;
}

int cal_tok_open_bytes(int vocab, int eos, cal_tokenizer **out)
{
    if (!out)
        return CAL_EINVAL;
    *out = NULL;
    if (vocab < 257 || vocab > 1 << 24 || eos < 256 || eos >= vocab)
        return CAL_EINVAL;
    cal_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return CAL_ENOMEM;
    t->vocab = vocab;
    t->eos = eos;
    t->bytes_only = 1;
    /* each id's slot holds its whole "[N]": 9 bytes from id 1000000, 10
     * from 10000000 (a fixed 8 overflowed there) */
    char tmp[16];
    int widest = snprintf(tmp, sizeof tmp, "[%d]", vocab - 1);
    t->stride = widest > MAX_PIECE ? (size_t)widest : MAX_PIECE;
    t->pool = calloc((size_t)vocab, t->stride);
    t->len = calloc((size_t)vocab, 1);
    if (!t->pool || !t->len) {
        cal_tok_close(&t);
        return CAL_ENOMEM;
    }
    for (int i = 0; i < 256; i++) {
        t->pool[(size_t)i * t->stride] = (char)i;
        t->len[i] = 1;
    }
    /* 256..258 are </s>, <s>, <unk> (no text); the rest print as "[N]",
     * the text engine/gguf.c gives them in the file */
    for (int id = 259; id < vocab; id++) {
        int n = snprintf(tmp, sizeof tmp, "[%d]", id);
        if (n < 0 || (size_t)n > t->stride) {   /* cannot happen: id < vocab */
            cal_tok_close(&t);
            return CAL_EINTERNAL;
        }
        memcpy(t->pool + (size_t)id * t->stride, tmp, (size_t)n);
        t->len[id] = (uint8_t)n;
    }
    *out = t;
    return CAL_OK;
}

static int wrap_vocab(cal_vocab *v, cal_tokenizer **out)
{
    cal_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        cal_vocab_free(&v);
        return CAL_ENOMEM;
    }
    t->v = v;
    t->vocab = v->n;
    t->eos = v->eos;
    *out = t;
    return CAL_OK;
}

int cal_tok_open_gguf(const char *path, cal_tokenizer **out, char *why, size_t why_len)
{
    if (!out || !path)
        return CAL_EINVAL;
    *out = NULL;
    cal_vocab *v;
    int rc = cal_vocab_read_file(path, &v, why, why_len);
    return rc == CAL_OK ? wrap_vocab(v, out) : rc;
}

int cal_tok_open_gguf_mem(const void *buf, size_t len, cal_tokenizer **out, char *why,
                          size_t why_len)
{
    if (!out)
        return CAL_EINVAL;
    *out = NULL;
    cal_vocab *v;
    int rc = cal_vocab_read_mem(buf, len, &v, why, why_len);
    return rc == CAL_OK ? wrap_vocab(v, out) : rc;
}

int cal_tok_eos(const cal_tokenizer *t) { return t ? t->eos : CAL_EINVAL; }
int cal_tok_vocab(const cal_tokenizer *t) { return t ? t->vocab : 0; }
int cal_tok_bos(const cal_tokenizer *t) { return t && t->v ? t->v->bos : -1; }
const char *cal_tok_kind(const cal_tokenizer *t)
{
    return !t ? "" : t->v ? t->v->model : "bytes";
}
const char *cal_tok_note(const cal_tokenizer *t) { return t && t->v ? t->v->note : ""; }

/* The bytes id decodes to. */
static const char *piece_of(const cal_tokenizer *t, int32_t id, int *len)
{
    if (t->v) {
        *len = (int)t->v->dlen[id];
        return t->v->dpool + t->v->doff[id];
    }
    *len = t->len[id];
    return t->pool + (size_t)id * t->stride;
}

const char *cal_tok_piece(const cal_tokenizer *t, int32_t id, int *len)
{
    if (!t || id < 0 || id >= t->vocab) {
        if (len)
            *len = 0;
        return NULL;
    }
    int l;
    const char *p = piece_of(t, id, &l);
    if (len)
        *len = l;
    return p;
}

/* ---- a GGUF vocabulary: special tokens, then SPM or BPE ---------------- */

static int push(int32_t *ids, int cap, int *count, int32_t id)
{
    if (*count >= cap)
        return CAL_ETOOBIG;
    ids[(*count)++] = id;
    return CAL_OK;
}

static int encode_vocab(const cal_vocab *v, const char *text, size_t n, int flags,
                        int32_t *ids, int cap)
{
    cal_frag *f = NULL;
    size_t nf = 0;
    int count = 0;
    int rc = cal_special_split(v, text, n, flags & CAL_TOK_PARSE_SPECIAL, &f, &nf);
    int add = flags & CAL_TOK_ADD_SPECIAL;
    /* no token stands for more than max_len bytes: text that needs more ids
     * than cap fails now, before the encoder sizes its buffers to it (a 4
     * MB prompt against a 4096-position context) */
    size_t least = 0;
    for (size_t i = 0; rc == CAL_OK && i < nf; i++)
        least += f[i].id >= 0 ? 1 : (f[i].len + v->max_len - 1) / v->max_len;
    if (rc == CAL_OK && least > (size_t)cap)
        rc = CAL_ETOOBIG;
    if (rc == CAL_OK && add && v->add_bos)
        rc = push(ids, cap, &count, v->bos);
    if (rc == CAL_OK && nf)
        rc = v->kind == CAL_VOCAB_BPE ? cal_bpe_encode(v, text, f, nf, ids, cap, &count)
                                      : cal_spm_encode(v, text, f, nf, ids, cap, &count);
    if (rc == CAL_OK && add && v->add_eos)
        rc = push(ids, cap, &count, v->eos);
    free(f);
    return rc == CAL_OK ? count : rc;
}

int cal_tok_encode_ex(const cal_tokenizer *t, const char *text, size_t n, int flags,
                      int32_t *ids, int cap)
{
    if (!t || (!text && n > 0) || (!ids && cap > 0) || cap < 0)
        return CAL_EINVAL;
    if (t->v)
        return encode_vocab(t->v, text, n, flags, ids, cap);
    return cal_tok_encode(t, text, n, ids, cap);
}

int cal_tok_encode(const cal_tokenizer *t, const char *text, size_t n,
                   int32_t *ids, int cap)
{
    if (!t || (!text && n > 0) || (!ids && cap > 0) || cap < 0)
        return CAL_EINVAL;
    if (t->v)
        return encode_vocab(t->v, text, n, CAL_TOK_PARSE_SPECIAL, ids, cap);
    int count = 0;
    size_t i = 0;
    while (i < n) {
        int id = -1, take = 1;
        int most = n - i < MAX_PIECE ? (int)(n - i) : MAX_PIECE;
        for (int l = most; l >= 2 && id < 0 && !t->bytes_only; l--)
            if ((id = lookup(t, text + i, l)) >= 0)
                take = l;
        if (id < 0)
            id = (unsigned char)text[i];
        if (count >= cap)
            return CAL_ETOOBIG;
        ids[count++] = id;
        i += (size_t)take;
    }
    return count;
}

/* ---- streaming UTF-8 ---------------------------------------------------- */

static int seq_len(unsigned char b)
{
    if (b < 0x80) return 1;
    if (b >= 0xc2 && b <= 0xdf) return 2;
    if (b >= 0xe0 && b <= 0xef) return 3;
    if (b >= 0xf0 && b <= 0xf4) return 4;
    return 0;
}

/* May byte b follow the pending bytes at index k (1..3)? */
static int cont_ok(unsigned char lead, int k, unsigned char b)
{
    if (k == 1) {
        if (lead == 0xe0) return b >= 0xa0 && b <= 0xbf;
        if (lead == 0xed) return b >= 0x80 && b <= 0x9f;
        if (lead == 0xf0) return b >= 0x90 && b <= 0xbf;
        if (lead == 0xf4) return b >= 0x80 && b <= 0x8f;
    }
    return b >= 0x80 && b <= 0xbf;
}

static int put_fffd(char *o, int n)
{
    o[n] = (char)0xef; o[n + 1] = (char)0xbf; o[n + 2] = (char)0xbd;
    return n + 3;
}

/* Feed one byte; returns the new output length in o. */
static int feed(cal_tok_state *st, unsigned char b, char *o, int n)
{
    for (;;) {
        if (st->npend == 0) {
            int need = seq_len(b);
            if (need == 1) {
                o[n++] = (char)b;
            } else if (need == 0) {
                n = put_fffd(o, n);
            } else {
                st->pend[0] = b;
                st->npend = 1;
            }
            return n;
        }
        int need = seq_len(st->pend[0]);
        if (cont_ok(st->pend[0], st->npend, b)) {
            st->pend[st->npend++] = b;
            if (st->npend == need) {
                memcpy(o + n, st->pend, (size_t)need);
                n += need;
                st->npend = 0;
            }
            return n;
        }
        /* the pending sequence is broken: one U+FFFD, then b starts afresh */
        n = put_fffd(o, n);
        st->npend = 0;
    }
}

int cal_tok_decode(const cal_tokenizer *t, cal_tok_state *st, int32_t id,
                   char *out, int cap)
{
    if (!t || !st || id < 0 || id >= t->vocab || st->npend < 0 || st->npend > 3 ||
        (!out && cap > 0))
        return CAL_EINVAL;
    char tmp[CAL_TOK_DECODE_MAX];
    cal_tok_state s = *st;
    int n = 0, len;
    const unsigned char *p = (const unsigned char *)piece_of(t, id, &len);
    if (t->v && !st->special && (t->v->type[id] == CAL_TT_CONTROL ||
                                 t->v->type[id] == CAL_TT_UNKNOWN))
        len = 0;
    for (int i = 0; i < len; i++)
        n = feed(&s, p[i], tmp, n);
    if (n > cap)
        return CAL_ETOOBIG;
    memcpy(out, tmp, (size_t)n);
    *st = s;
    return n;
}

int cal_tok_flush(cal_tok_state *st, char *out, int cap)
{
    if (!st || (!out && cap > 0))
        return CAL_EINVAL;
    if (st->npend == 0)
        return 0;
    if (cap < 3)
        return CAL_ETOOBIG;
    st->npend = 0;
    return put_fffd(out, 0);
}
