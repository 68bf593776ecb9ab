/* caliper reference engine — reading a vocabulary from GGUF tokenizer.* keys
 * and the lookups the encoders need (text -> id, merge -> rank). The rules
 * follow llama.cpp's loader (src/llama-vocab.cpp), so the same file means
 * the same ids in both: later duplicates win, an empty text becomes
 * "[EMPTY_<id>]", default special ids per model, llama3's pre-tokenizer
 * skips merges for whole words in the vocabulary. */
#include "engine/vocab.h"
#include "caliper/error.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { G_U8, G_I8, G_U16, G_I16, G_U32, G_I32, G_F32, G_BOOL, G_STR, G_ARR, G_U64,
       G_I64, G_F64, G_NTYPES };
static const int g_size[G_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const g_name[G_NTYPES] = {"uint8", "int8", "uint16", "int16", "uint32",
                                             "int32", "float32", "bool", "string", "array",
                                             "uint64", "int64", "float64"};

#define MAX_TOKENS (1 << 24)
#define MAX_KV     (1 << 20)

typedef struct rd {
    const uint8_t *p;
    size_t len, pos;
} rd;

static int need(rd *r, uint64_t n) { return n <= r->len - r->pos; }

static uint64_t u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}
static uint32_t u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t fnv(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* Where one value lies: the array's element type and count, or the scalar. */
typedef struct val {
    uint32_t type;     /* G_* */
    uint32_t etype;    /* arrays: element type */
    uint64_t count;    /* arrays: elements */
    size_t   at;       /* offset of the payload (after the array header) */
} val;

/* Skip one value of type t at r->pos; depth bounds nested arrays. */
static int skip_val(rd *r, uint32_t t, int depth, val *v)
{
    if (t >= G_NTYPES)
        return CAL_EPROTO;
    if (v) { v->type = t; v->at = r->pos; v->count = 0; v->etype = 0; }
    if (t == G_STR) {
        if (!need(r, 8)) return CAL_EPROTO;
        uint64_t n = u64le(r->p + r->pos);
        r->pos += 8;
        if (!need(r, n)) return CAL_EPROTO;
        r->pos += n;
        return CAL_OK;
    }
    if (t == G_ARR) {
        if (depth > 3 || !need(r, 12)) return CAL_EPROTO;
        uint32_t et = u32le(r->p + r->pos);
        uint64_t n = u64le(r->p + r->pos + 4);
        r->pos += 12;
        if (et >= G_NTYPES) return CAL_EPROTO;
        if (v) { v->etype = et; v->count = n; v->at = r->pos; }
        if (g_size[et]) {
            if (n > (r->len - r->pos) / (uint64_t)g_size[et]) return CAL_EPROTO;
            r->pos += (size_t)n * (size_t)g_size[et];
            return CAL_OK;
        }
        /* each element takes at least 8 bytes: a count past that is a lie */
        if (n > (r->len - r->pos) / 8) return CAL_EPROTO;
        for (uint64_t i = 0; i < n; i++) {
            int rc = skip_val(r, et, depth + 1, NULL);
            if (rc != CAL_OK) return rc;
        }
        return CAL_OK;
    }
    if (!need(r, (uint64_t)g_size[t])) return CAL_EPROTO;
    r->pos += (size_t)g_size[t];
    return CAL_OK;
}

/* An integer scalar as int64; 0 and *ok = 0 when the type is not one. */
static int64_t int_of(const uint8_t *p, const val *v, int *ok)
{
    const uint8_t *q = p + v->at;
    *ok = 1;
    switch (v->type) {
    case G_U8: case G_BOOL: return q[0];
    case G_I8: return (int8_t)q[0];
    case G_U16: return q[0] | q[1] << 8;
    case G_I16: return (int16_t)(q[0] | q[1] << 8);
    case G_U32: return u32le(q);
    case G_I32: return (int32_t)u32le(q);
    case G_U64: return (int64_t)u64le(q);
    case G_I64: return (int64_t)u64le(q);
    default: *ok = 0; return 0;
    }
}

void cal_vocab_free(cal_vocab **pv)
{
    if (!pv || !*pv)
        return;
    cal_vocab *v = *pv;
    free(v->pool); free(v->off); free(v->len); free(v->score); free(v->type);
    free(v->tab); free(v->mpool); free(v->moff); free(v->mlen); free(v->mtab);
    free(v->special); free(v->dpool); free(v->doff); free(v->dlen); free(v->kv);
    cal_pretok_free(v->re);
    cal_special_free(v);
    free(v);
    *pv = NULL;
}

int32_t cal_vocab_find(const cal_vocab *v, const char *s, size_t n)
{
    for (uint32_t i = fnv(s, n) & v->tmask;; i = (i + 1) & v->tmask) {
        uint32_t e = v->tab[i];
        if (!e)
            return -1;
        e--;
        if (v->len[e] == n && memcmp(v->pool + v->off[e], s, n) == 0)
            return (int32_t)e;
    }
}

int32_t cal_vocab_rank(const cal_vocab *v, const char *a, size_t an, const char *b,
                       size_t bn)
{
    if (!v->mtab || an + bn + 1 > 2 * CAL_VOCAB_TOKEN_MAX + 1)
        return -1;
    char key[2 * CAL_VOCAB_TOKEN_MAX + 1];
    memcpy(key, a, an);
    key[an] = ' ';
    memcpy(key + an + 1, b, bn);
    size_t n = an + bn + 1;
    for (uint32_t i = fnv(key, n) & v->mmask;; i = (i + 1) & v->mmask) {
        uint32_t e = v->mtab[i];
        if (!e)
            return -1;
        e--;
        /* llama.cpp splits a merge at its first space after the first byte */
        if (v->mlen[e] == n && memcmp(v->mpool + v->moff[e], key, n) == 0)
            return (int32_t)e;
    }
}

static uint32_t table_size(uint64_t n)
{
    uint32_t s = 16;
    while (s < 2 * n)
        s <<= 1;
    return s;
}

/* GPT-2's byte-to-unicode table: printable bytes map to themselves, the
 * others to U+0100 onwards in byte order. Writes the UTF-8 of byte b. */
static int gpt2_byte(int b, char *o)
{
    int cp;
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) {
        cp = b;
    } else {
        int k = 0;
        for (int c = 0; c < b; c++)
            if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) ||
                  (c >= 0xae && c <= 0xff)))
                k++;
        cp = 256 + k;
    }
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    o[0] = (char)(0xc0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* The reverse: the byte a GPT-2 code point stands for, or -1. */
static int gpt2_unbyte(uint32_t cp)
{
    static int16_t rev[324];
    static int ready;
    if (!ready) {
        for (int i = 0; i < 324; i++) rev[i] = -1;
        for (int b = 0; b < 256; b++) {
            char o[2];
            int n = gpt2_byte(b, o);
            uint32_t c = n == 1 ? (unsigned char)o[0]
                                : ((uint32_t)(o[0] & 0x1f) << 6 | (uint32_t)(o[1] & 0x3f));
            rev[c] = (int16_t)b;
        }
        ready = 1;
    }
    return cp < 324 ? rev[cp] : -1;
}

/* The text a token stands for when decoded (llama.cpp's token_to_piece with
 * special tokens rendered): control, unknown and user-defined tokens as
 * written; SPM "▁" as a space and "<0xXX>" as the byte; BPE through the
 * GPT-2 byte table (a code point outside it is kept as its UTF-8). */
static size_t decode_piece(const cal_vocab *v, int32_t id, char *o)
{
    const char *s = v->pool + v->off[id];
    size_t n = v->len[id], k = 0;
    int t = v->type[id];
    if (t == CAL_TT_CONTROL || t == CAL_TT_UNKNOWN || t == CAL_TT_USER_DEFINED) {
        memcpy(o, s, n);
        return n;
    }
    if (t == CAL_TT_BYTE) {
        unsigned x;
        if (n == 6 && sscanf(s, "<0x%2x>", &x) == 1) {
            o[0] = (char)x;
            return 1;
        }
        memcpy(o, s, n);
        return n;
    }
    if (t != CAL_TT_NORMAL)
        return 0;   /* unused / undefined: llama.cpp prints nothing */
    if (v->kind == CAL_VOCAB_SPM) {
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
                o[k++] = ' ';
                i += 3;
            } else {
                o[k++] = s[i++];
            }
        }
        return k;
    }
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp = c;
        size_t l = 1;
        if (c >= 0xc0 && c < 0xe0 && i + 1 < n) {
            cp = (uint32_t)(c & 0x1f) << 6 | (uint32_t)(s[i + 1] & 0x3f);
            l = 2;
        }
        int b = c < 0x80 || l == 2 ? gpt2_unbyte(cp) : -1;
        if (b >= 0) {
            o[k++] = (char)b;
            i += l;
        } else {
            /* not a byte of the table: llama.cpp writes it bracketed; keep
             * the text, which is what a reader of the output would want */
            size_t m = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
            if (i + m > n) m = n - i;
            memcpy(o + k, s + i, m);
            k += m;
            i += m;
        }
    }
    return k;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int build(cal_vocab *v, const uint8_t *p, const val *tok, const val *sc,
                 const val *tt, const val *mg, char *why, size_t why_len)
{
    int32_t n = (int32_t)tok->count;
    v->n = n;
    /* texts */
    size_t total = 0;
    rd r = {p, SIZE_MAX, tok->at};
    for (int32_t i = 0; i < n; i++) {
        uint64_t l = u64le(p + r.pos);
        if (l > CAL_VOCAB_TOKEN_MAX)
            return cal_why(why, why_len, CAL_EINVAL, "tokenizer.ggml.tokens[%d]: %llu bytes "
                           "long (at most %d supported)", i, (unsigned long long)l,
                           CAL_VOCAB_TOKEN_MAX);
        total += l ? l : 24;
        r.pos += 8 + l;
    }
    v->pool = malloc(total + 1);
    v->off = malloc((size_t)n * sizeof *v->off);
    v->len = malloc((size_t)n * sizeof *v->len);
    v->score = calloc((size_t)n, sizeof *v->score);
    v->type = malloc((size_t)n);
    v->tmask = table_size((uint64_t)n) - 1;
    v->tab = calloc((size_t)v->tmask + 1, sizeof *v->tab);
    if (!v->pool || !v->off || !v->len || !v->score || !v->type || !v->tab)
        return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
    size_t at = 0, pos = tok->at;
    for (int32_t i = 0; i < n; i++) {
        uint64_t l = u64le(p + pos);
        v->off[i] = (uint32_t)at;
        if (l) {
            memcpy(v->pool + at, p + pos + 8, (size_t)l);
            v->len[i] = (uint32_t)l;
        } else {
            v->len[i] = (uint32_t)snprintf(v->pool + at, 25, "[EMPTY_%d]", i);
        }
        at += v->len[i];
        pos += 8 + l;
        if (v->len[i] > v->max_len)
            v->max_len = v->len[i];
        v->type[i] = CAL_TT_NORMAL;
        if (sc) {
            const uint8_t *q = p + sc->at + 4 * (size_t)i;
            if (sc->etype == G_F32) {
                uint32_t b = u32le(q);
                memcpy(&v->score[i], &b, 4);
            } else {
                v->score[i] = (float)(int32_t)u32le(q);
            }
        }
        if (tt) {
            int32_t t = (int32_t)u32le(p + tt->at + 4 * (size_t)i);
            v->type[i] = (uint8_t)(t >= CAL_TT_NORMAL && t <= CAL_TT_BYTE ? t : CAL_TT_UNDEFINED);
        }
        /* later duplicates take the text, as in llama.cpp's map */
        const char *s = v->pool + v->off[i];
        uint32_t h = fnv(s, v->len[i]) & v->tmask;
        for (;; h = (h + 1) & v->tmask) {
            uint32_t e = v->tab[h];
            if (!e) { v->tab[h] = (uint32_t)i + 1; break; }
            if (v->len[e - 1] == v->len[i] && !memcmp(v->pool + v->off[e - 1], s, v->len[i])) {
                v->tab[h] = (uint32_t)i + 1;
                break;
            }
        }
    }
    /* llama.cpp's loader makes these control tokens whatever the file says
     * (end-of-generation and fill-in-the-middle markers found by their text),
     * so text containing them splits there when special tokens are parsed */
    static const char *const forced_control[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
        "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
        "<turn|>", "<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
        "[e~[", "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>",
        "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>",
        "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>",
        "<|code_middle|>", "<|middle|>", "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
        "[PAD]", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
        "<|file_sep|>"};
    for (size_t k = 0; k < sizeof forced_control / sizeof forced_control[0]; k++) {
        int32_t id = cal_vocab_find(v, forced_control[k], strlen(forced_control[k]));
        if (id >= 0 && v->type[id] != CAL_TT_USER_DEFINED && v->type[id] != CAL_TT_UNKNOWN)
            v->type[id] = CAL_TT_CONTROL;
    }
    /* ... and these user-defined (always matched, always printed) */
    static const char *const forced_user[] = {"<|channel|>", "<|message|>", "<|start|>",
                                              "<|constrain|>"};
    for (size_t k = 0; k < sizeof forced_user / sizeof forced_user[0]; k++) {
        int32_t id = cal_vocab_find(v, forced_user[k], strlen(forced_user[k]));
        if (id >= 0)
            v->type[id] = CAL_TT_USER_DEFINED;
    }
    /* merges */
    if (mg) {
        v->n_merges = (uint32_t)mg->count;
        size_t mt = 0;
        pos = mg->at;
        for (uint32_t i = 0; i < v->n_merges; i++) {
            uint64_t l = u64le(p + pos);
            mt += (size_t)l;
            pos += 8 + l;
        }
        v->mpool = malloc(mt + 1);
        v->moff = malloc(((size_t)v->n_merges + 1) * sizeof *v->moff);
        v->mlen = malloc(((size_t)v->n_merges + 1) * sizeof *v->mlen);
        v->mmask = table_size(v->n_merges) - 1;
        v->mtab = calloc((size_t)v->mmask + 1, sizeof *v->mtab);
        if (!v->mpool || !v->moff || !v->mlen || !v->mtab)
            return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
        at = 0;
        pos = mg->at;
        for (uint32_t i = 0; i < v->n_merges; i++) {
            uint64_t l = u64le(p + pos);
            memcpy(v->mpool + at, p + pos + 8, (size_t)l);
            v->moff[i] = (uint32_t)at;
            v->mlen[i] = (uint32_t)l;
            pos += 8 + l;
            /* a merge without a space after its first byte joins nothing
             * llama.cpp can look up ("" + ""): never matched here either */
            const char *s = v->mpool + at;
            at += (size_t)l;
            if (l < 3 || !memchr(s + 1, ' ', (size_t)l - 1))
                continue;
            /* the first of equal merges keeps its rank (map emplace) */
            uint32_t h = fnv(s, (size_t)l) & v->mmask;
            for (;; h = (h + 1) & v->mmask) {
                uint32_t e = v->mtab[h];
                if (!e) { v->mtab[h] = i + 1; break; }
                if (v->mlen[e - 1] == l && !memcmp(v->mpool + v->moff[e - 1], s, (size_t)l))
                    break;
            }
        }
    }
    /* special tokens, longest first (ties by id, for a fixed order) */
    v->special = malloc(((size_t)n + 1) * sizeof *v->special);
    if (!v->special)
        return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++)
        if (v->type[i] == CAL_TT_CONTROL || v->type[i] == CAL_TT_USER_DEFINED ||
            v->type[i] == CAL_TT_UNKNOWN)
            v->special[v->n_special++] = i;
    /* longest first, ties by id: a file may make every one of its 2^24
     * tokens special, so not an insertion sort (the key: the length
     * inverted, then the id) */
    uint64_t *key = malloc(((size_t)v->n_special + 1) * sizeof *key);
    if (!key)
        return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
    for (int i = 0; i < v->n_special; i++)
        key[i] = (uint64_t)(UINT32_MAX - v->len[v->special[i]]) << 32 |
                 (uint32_t)v->special[i];
    qsort(key, (size_t)v->n_special, sizeof *key, cmp_u64);
    for (int i = 0; i < v->n_special; i++)
        v->special[i] = (int32_t)(uint32_t)key[i];
    free(key);
    if (cal_special_index(v) != CAL_OK)
        return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
    /* byte fallback ids */
    for (int b = 0; b < 256; b++) {
        char t[8];
        int tl;
        if (v->kind == CAL_VOCAB_SPM) {
            tl = snprintf(t, sizeof t, "<0x%02X>", b);
            v->byte_id[b] = cal_vocab_find(v, t, (size_t)tl);
            if (v->byte_id[b] < 0) {
                t[0] = (char)b;
                v->byte_id[b] = cal_vocab_find(v, t, 1);
            }
        } else {
            tl = gpt2_byte(b, t);
            v->byte_id[b] = cal_vocab_find(v, t, (size_t)tl);
        }
    }
    /* decoded pieces */
    v->dpool = malloc(total + 1);
    v->doff = malloc((size_t)n * sizeof *v->doff);
    v->dlen = malloc((size_t)n * sizeof *v->dlen);
    if (!v->dpool || !v->doff || !v->dlen)
        return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
    at = 0;
    for (int32_t i = 0; i < n; i++) {
        /* a decoded piece is never longer than its text */
        size_t k = decode_piece(v, i, v->dpool + at);
        v->doff[i] = (uint32_t)at;
        v->dlen[i] = (uint32_t)k;
        at += k;
    }
    return CAL_OK;
}

static int str_eq(const uint8_t *p, const val *v, const char *s)
{
    uint64_t l = u64le(p + v->at);
    return l == strlen(s) && !memcmp(p + v->at + 8, s, (size_t)l);
}

static void str_copy(const uint8_t *p, const val *v, char *o, size_t cap)
{
    uint64_t l = u64le(p + v->at);
    size_t m = l < cap - 1 ? (size_t)l : cap - 1;
    memcpy(o, p + v->at + 8, m);
    o[m] = 0;
    for (size_t i = 0; i < m; i++)   /* a name for messages: printable only */
        if ((unsigned char)o[i] < 0x20 || o[i] == 0x7f)
            o[i] = '?';
}

/* "an array of 5 float32", "a string": what a value is, for a message */
static const char *describe(const val *v, char *o, size_t n)
{
    if (v->type == G_ARR)
        snprintf(o, n, "an array of %llu %s", (unsigned long long)v->count, g_name[v->etype]);
    else
        snprintf(o, n, "a %s", g_name[v->type]);
    return o;
}

/* Append one line to the vocabulary's note ("; " between lines). */
static void note(cal_vocab *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(cal_vocab *v, const char *fmt, ...)
{
    size_t at = strlen(v->note);
    if (at && at + 2 < sizeof v->note) {
        memcpy(v->note + at, "; ", 3);
        at += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->note + at, sizeof v->note - at, fmt, ap);
    va_end(ap);
}

int cal_vocab_read_mem(const void *buf, size_t len, cal_vocab **out, char *why,
                       size_t why_len)
{
    if (!out || (!buf && len))
        return CAL_EINVAL;
    *out = NULL;
    const uint8_t *p = buf;
    rd r = {p, len, 0};
    if (!need(&r, 24) || memcmp(p, "GGUF", 4))
        return cal_why(why, why_len, CAL_EPROTO, "not a GGUF file (no \"GGUF\" magic)");
    uint32_t version = u32le(p + 4);
    if (version != 2 && version != 3)
        return cal_why(why, why_len, CAL_EPROTO, "GGUF version %u is not supported (2 and 3 "
                       "are)", version);
    uint64_t n_kv = u64le(p + 16);
    if (n_kv > MAX_KV)
        return cal_why(why, why_len, CAL_EPROTO, "metadata count %llu is too large",
                       (unsigned long long)n_kv);
    r.pos = 24;
    val model = {0}, pre = {0}, tok = {0}, sc = {0}, tt = {0}, mg = {0};
    char what[64];
    val bos = {0}, eos = {0}, unk = {0}, pad = {0}, abos = {0}, aeos = {0}, asp = {0};
    int have_model = 0, have_pre = 0, have_tok = 0, have_sc = 0, have_tt = 0, have_mg = 0;
    int have_bos = 0, have_eos = 0, have_unk = 0, have_pad = 0, have_abos = 0, have_aeos = 0,
        have_asp = 0;
    cal_vocab *v = calloc(1, sizeof *v);
    if (!v)
        return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
    size_t kv_cap = 0;
    int rc = CAL_OK;
    for (uint64_t k = 0; k < n_kv && rc == CAL_OK; k++) {
        size_t start = r.pos;
        if (!need(&r, 8)) { rc = CAL_EPROTO; break; }
        uint64_t kl = u64le(p + r.pos);
        if (!need(&r, 8 + kl + 4) || kl > 65535) {
            rc = cal_why(why, why_len, CAL_EPROTO, "offset %zu: metadata key %llu runs past "
                         "the end", r.pos, (unsigned long long)k);
            break;
        }
        const char *key = (const char *)p + r.pos + 8;
        r.pos += 8 + kl;
        uint32_t t = u32le(p + r.pos);
        r.pos += 4;
        val vv;
        if (skip_val(&r, t, 0, &vv) != CAL_OK) {
            rc = cal_why(why, why_len, CAL_EPROTO, "offset %zu: metadata key %.*s: value of "
                         "type %u runs past the end or is malformed", start,
                         (int)(kl < 80 ? kl : 80), key, t);
            break;
        }
#define KEY(s) (kl == sizeof(s) - 1 && !memcmp(key, s, sizeof(s) - 1))
        if (kl > 10 && !memcmp(key, "tokenizer.", 10)) {
            /* keep the pair's bytes for an export */
            size_t n = r.pos - start;
            if (v->kv_len + n > kv_cap) {
                size_t c = kv_cap ? kv_cap : 4096;
                while (c < v->kv_len + n) c *= 2;
                uint8_t *q = realloc(v->kv, c);
                if (!q) { rc = cal_why(why, why_len, CAL_ENOMEM, "out of memory"); break; }
                v->kv = q;
                kv_cap = c;
            }
            memcpy(v->kv + v->kv_len, p + start, n);
            v->kv_len += n;
            v->n_kv++;
        }
        struct { const char *name; val *v; int *have; } keys[] = {
            {"tokenizer.ggml.model", &model, &have_model}, {"tokenizer.ggml.pre", &pre, &have_pre},
            {"tokenizer.ggml.tokens", &tok, &have_tok}, {"tokenizer.ggml.scores", &sc, &have_sc},
            {"tokenizer.ggml.token_type", &tt, &have_tt},
            {"tokenizer.ggml.merges", &mg, &have_mg},
            {"tokenizer.ggml.bos_token_id", &bos, &have_bos},
            {"tokenizer.ggml.eos_token_id", &eos, &have_eos},
            {"tokenizer.ggml.unknown_token_id", &unk, &have_unk},
            {"tokenizer.ggml.padding_token_id", &pad, &have_pad},
            {"tokenizer.ggml.add_bos_token", &abos, &have_abos},
            {"tokenizer.ggml.add_eos_token", &aeos, &have_aeos},
            {"tokenizer.ggml.add_space_prefix", &asp, &have_asp}};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            if (kl != strlen(keys[i].name) || memcmp(key, keys[i].name, kl))
                continue;
            /* which of the two would it be? llama.cpp refuses the file too */
            if (*keys[i].have)
                rc = cal_why(why, why_len, CAL_EPROTO, "offset %zu: %s appears a second time",
                             start, keys[i].name);
            *keys[i].v = vv;
            *keys[i].have = 1;
            break;
        }
#undef KEY
    }
    if (rc == CAL_OK && !have_model)
        rc = cal_why(why, why_len, CAL_EINVAL, "tokenizer.ggml.model is missing");
    if (rc == CAL_OK && (model.type != G_STR || (have_pre && pre.type != G_STR)))
        rc = cal_why(why, why_len, CAL_EPROTO, "tokenizer.ggml.%s has type %s, not string",
                     model.type != G_STR ? "model" : "pre",
                     g_name[model.type != G_STR ? model.type : pre.type]);
    if (rc == CAL_OK) {
        str_copy(p, &model, v->model, sizeof v->model);
        if (have_pre)
            str_copy(p, &pre, v->pre_name, sizeof v->pre_name);
        if (str_eq(p, &model, "llama")) {
            v->kind = CAL_VOCAB_SPM;
            v->bos = 1; v->eos = 2; v->unk = 0; v->pad = -1;
            v->add_bos = 1; v->add_space_prefix = 1;
        } else if (str_eq(p, &model, "gpt2")) {
            v->kind = CAL_VOCAB_BPE;
            v->bos = 11; v->eos = 11; v->unk = -1; v->pad = -1;
            const char *pn = v->pre_name;
            if (!strcmp(pn, "gpt-2") || !strcmp(pn, "phi-2") || !strcmp(pn, "mpt") ||
                !strcmp(pn, "olmo"))
                v->pre = CAL_PRE_GPT2;
            else if (!strcmp(pn, "llama3") || !strcmp(pn, "llama-v3") ||
                     !strcmp(pn, "llama-bpe") || !strcmp(pn, "falcon3") ||
                     !strcmp(pn, "pixtral")) {
                v->pre = CAL_PRE_LLAMA3;
                v->ignore_merges = 1;
                v->add_bos = 1;
            } else if (!strcmp(pn, "qwen2") || !strcmp(pn, "deepseek-r1-qwen") ||
                       !strcmp(pn, "stablelm2"))
                v->pre = CAL_PRE_QWEN2;
            else
                rc = cal_why(why, why_len, CAL_EINVAL, "tokenizer.ggml.pre \"%s\" is not "
                             "supported (gpt-2, llama-bpe/llama3 and qwen2 are)",
                             pn[0] ? pn : "(absent)");
            if (rc == CAL_OK && !have_mg)
                rc = cal_why(why, why_len, CAL_EINVAL, "tokenizer.ggml.merges is missing");
        } else {
            rc = cal_why(why, why_len, CAL_EINVAL, "tokenizer.ggml.model \"%s\" is not "
                         "supported (\"llama\", SentencePiece, and \"gpt2\", byte-level BPE, "
                         "are)", v->model);
        }
    }
    if (rc == CAL_OK && !have_tok)
        rc = cal_why(why, why_len, CAL_EINVAL, "tokenizer.ggml.tokens is missing");
    if (rc == CAL_OK && (tok.type != G_ARR || tok.etype != G_STR || tok.count == 0 ||
                         tok.count > MAX_TOKENS))
        rc = cal_why(why, why_len, CAL_EPROTO, "tokenizer.ggml.tokens is %s, not a non-empty "
                     "array of strings (at most 2^24)", describe(&tok, what, sizeof what));
    if (rc == CAL_OK && have_sc && (sc.type != G_ARR || (sc.etype != G_F32 &&
                                    sc.etype != G_I32) || sc.count < tok.count))
        rc = cal_why(why, why_len, CAL_EPROTO, "tokenizer.ggml.scores is %s: each of the %llu "
                     "tokens needs a float32", describe(&sc, what, sizeof what),
                     (unsigned long long)tok.count);
    if (rc == CAL_OK && have_tt && (tt.type != G_ARR || tt.etype != G_I32 ||
                                    tt.count < tok.count))
        rc = cal_why(why, why_len, CAL_EPROTO, "tokenizer.ggml.token_type is %s: each of the "
                     "%llu tokens needs an int32", describe(&tt, what, sizeof what),
                     (unsigned long long)tok.count);
    if (rc == CAL_OK && have_mg && (mg.type != G_ARR || mg.etype != G_STR ||
                                    mg.count > MAX_TOKENS * 2u))
        rc = cal_why(why, why_len, CAL_EPROTO, "tokenizer.ggml.merges is %s, not an array of "
                     "strings (at most 2^25)", describe(&mg, what, sizeof what));
    if (rc == CAL_OK)
        rc = build(v, p, &tok, have_sc ? &sc : NULL, have_tt ? &tt : NULL,
                   have_mg ? &mg : NULL, why, why_len);
    if (rc == CAL_OK) {
        struct { val *vv; int have; int32_t *id; const char *name; } ids[] = {
            {&bos, have_bos, &v->bos, "bos_token_id"}, {&eos, have_eos, &v->eos, "eos_token_id"},
            {&unk, have_unk, &v->unk, "unknown_token_id"},
            {&pad, have_pad, &v->pad, "padding_token_id"}};
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
            /* a default out of range is no id; a bad value keeps the default,
             * as llama.cpp does ("bad special token ... using default id"),
             * and the note says so */
            if (*ids[i].id >= v->n)
                *ids[i].id = -1;
            if (!ids[i].have)
                continue;
            int ok = 0;
            int64_t x = int_of(p, ids[i].vv, &ok);
            if (ok && x >= 0 && x < v->n) {
                *ids[i].id = (int32_t)x;
                continue;
            }
            char got[128], use[64];
            if (ok)
                snprintf(got, sizeof got, "is %lld, outside 0..%d", (long long)x, v->n - 1);
            else
                snprintf(got, sizeof got, "is %s, not an integer",
                         describe(ids[i].vv, what, sizeof what));
            if (*ids[i].id >= 0)
                snprintf(use, sizeof use, "the %s default %d is used", v->model, *ids[i].id);
            else
                snprintf(use, sizeof use, "none is used");
            note(v, "tokenizer.ggml.%s %s: %s", ids[i].name, got, use);
        }
        struct { val *vv; int have; int *flag; const char *name; } flags[] = {
            {&abos, have_abos, &v->add_bos, "add_bos_token"},
            {&aeos, have_aeos, &v->add_eos, "add_eos_token"},
            {&asp, have_asp && v->kind == CAL_VOCAB_SPM, &v->add_space_prefix,
             "add_space_prefix"}};
        for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
            int ok = 0;
            int64_t x = flags[i].have ? int_of(p, flags[i].vv, &ok) : 0;
            if (ok)
                *flags[i].flag = x != 0;
            else if (flags[i].have)
                note(v, "tokenizer.ggml.%s is %s, not a bool: the %s default (%s) is used",
                     flags[i].name, describe(flags[i].vv, what, sizeof what), v->model,
                     *flags[i].flag ? "true" : "false");
        }
        if ((v->add_bos && v->bos < 0) || (v->add_eos && v->eos < 0))
            rc = cal_why(why, why_len, CAL_EINVAL, "tokenizer.ggml.add_%s_token is set but "
                         "the vocabulary has no such token", v->add_bos && v->bos < 0 ? "bos"
                                                                                     : "eos");
    }
    if (rc == CAL_OK && v->kind == CAL_VOCAB_BPE)
        rc = cal_pretok_compile(v->pre, v->pre_name, &v->re, why, why_len);
    if (rc != CAL_OK) {
        if (rc == CAL_EPROTO && why && why_len && !why[0])
            cal_why(why, why_len, rc, "malformed GGUF metadata");
        cal_vocab_free(&v);
        return rc;
    }
    *out = v;
    return CAL_OK;
}

int cal_vocab_read_file(const char *path, cal_vocab **out, char *why, size_t why_len)
{
    if (!path || !out)
        return CAL_EINVAL;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return cal_why(why, why_len, e == ENOENT ? CAL_ENOTFOUND : CAL_EIO, "%s: %s", path,
                       strerror(e));
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 24) {
        close(fd);
        return cal_why(why, why_len, CAL_EPROTO, "%s: not a GGUF file", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return cal_why(why, why_len, CAL_EIO, "%s: mmap: %s", path, strerror(errno));
    char w[200] = "";
    int rc = cal_vocab_read_mem(map, size, out, w, sizeof w);
    munmap(map, size);
    if (rc != CAL_OK)
        return cal_why(why, why_len, rc, "%s: %s", path, w);
    return CAL_OK;
}
