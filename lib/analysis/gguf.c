/* GGUF header reader: walks the typed metadata pairs with every length and
 * count checked against the bytes that remain, keeps the few keys that fix
 * the KV cache size, and skips everything else (tokenizer arrays included)
 * without allocating. Memory and file sources share one cursor. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "caliper/error.h"
#include "caliper/gguf.h"
#include "lib/util/c_locale.h"

enum {
    T_U8 = 0, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STRING,
    T_ARRAY, T_U64, T_I64, T_F64, T_COUNT
};
static const char *const TYPE_NAME[T_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
    "string", "array", "uint64", "int64", "float64"};
static const unsigned TYPE_SIZE[T_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

#define MAX_DEPTH   4
#define MAX_KEY     256    /* longer keys cannot be ones we want: skipped */
#define MAX_SLOTS   32

/* The shape keys, each "<arch>.<suffix>"; collected for every prefix seen,
 * chosen once general.architecture is known (it need not come first). */
enum { K_BLOCKS, K_EMBED, K_HEADS, K_HEADS_KV, K_KEY_LEN, K_VAL_LEN, K_N };
static const char *const SUFFIX[K_N] = {
    "block_count", "embedding_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length"};

typedef struct slot {
    char   prefix[64];
    int    which;
    long   value;      /* max over the array when it was one; -1 not seen */
    int    was_array;
    uint64_t at;       /* where the pair starts */
} slot;

/* What the model reader keeps besides the shape: integer keys that may be 0,
 * float keys, each "<arch>.<suffix>" and chosen once the architecture is
 * known, like the shape keys. */
enum { X_FFN, X_EXPERT, X_EXPERT_USED, X_CTX, X_ROPE_DIMS, X_ROPE_BASE, X_EPS, X_FFN_EXP, X_N };
static const char *const XSUFFIX[X_N] = {
    "feed_forward_length", "expert_count", "expert_used_count", "context_length",
    "rope.dimension_count", "rope.freq_base", "attention.layer_norm_rms_epsilon",
    "expert_feed_forward_length"};
#define MAX_XSLOTS 32

/* A numeric scalar exactly as the file wrote it. */
typedef struct num {
    enum { NUM_NONE, NUM_INT, NUM_BIG, NUM_FLOAT } kind;  /* BIG: a uint64 past int64 */
    int f32;            /* FLOAT: written as float32 */
    long long i;
    unsigned long long u;
    double d;
} num;

typedef struct xslot {
    char   prefix[64];
    int    which;
    num    v;
    int    bad_type;   /* the value's type when it was not a number, else -1 */
    uint64_t at;       /* where the pair starts */
} xslot;

typedef struct rd {
    const uint8_t *mem;     /* memory source, or NULL */
    FILE   *f;              /* file source, or NULL */
    uint64_t pos, size;
    char   *why;
    size_t  why_len;
    slot    slots[MAX_SLOTS];
    int     n_slots;
    char    arch[64], name[128];
    uint64_t arch_at;       /* where general.architecture was; 0 not yet */
    uint64_t eos_at, bos_at, align_at;   /* the same for the model reader's keys */
    cal_gguf_model *m;      /* the model reader's extra fields, or NULL */
    xslot   xslots[MAX_XSLOTS];
    int     n_xslots;
} rd;

static int fail(rd *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(rd *r, int code, const char *fmt, ...)
{
    if (r->why && r->why_len) {
        va_list ap;
        va_start(ap, fmt);
        cal_vsnprintf(r->why, r->why_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int rd_bytes(rd *r, void *dst, uint64_t n, const char *what)
{
    if (n > r->size - r->pos)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s needs %" PRIu64
                    " bytes, %" PRIu64 " left", r->pos, what, n, r->size - r->pos);
    if (r->mem) memcpy(dst, r->mem + r->pos, (size_t)n);
    else if (fread(dst, 1, (size_t)n, r->f) != (size_t)n)
        return fail(r, CAL_EIO, "offset %" PRIu64 ": read failed", r->pos);
    r->pos += n;
    return CAL_OK;
}

static int rd_skip(rd *r, uint64_t n, const char *what)
{
    if (n > r->size - r->pos)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s of %" PRIu64
                    " bytes runs past the end (%" PRIu64 " left)", r->pos, what, n,
                    r->size - r->pos);
    if (r->f && fseeko(r->f, (off_t)(r->pos + n), SEEK_SET) != 0)
        return fail(r, CAL_EIO, "offset %" PRIu64 ": seek failed", r->pos);
    r->pos += n;
    return CAL_OK;
}

static uint64_t le(const uint8_t *b, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static int rd_u32(rd *r, uint32_t *v, const char *what)
{
    uint8_t b[4];
    int rc = rd_bytes(r, b, 4, what);
    if (!rc) *v = (uint32_t)le(b, 4);
    return rc;
}

static int rd_u64(rd *r, uint64_t *v, const char *what)
{
    uint8_t b[8];
    int rc = rd_bytes(r, b, 8, what);
    if (!rc) *v = le(b, 8);
    return rc;
}

/* A string: copied into dst (NUL-terminated, truncated) when dst is given,
 * else skipped. *full = 1 when it fit. */
static int rd_string(rd *r, char *dst, size_t cap, int *full, const char *what)
{
    uint64_t n;
    int rc = rd_u64(r, &n, what);
    if (rc) return rc;
    if (n > r->size - r->pos)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s length %" PRIu64
                    " runs past the end (%" PRIu64 " left)", r->pos - 8, what, n,
                    r->size - r->pos);
    if (!dst || n >= cap) {
        if (full) *full = 0;
        if (dst && cap) dst[0] = '\0';
        return rd_skip(r, n, what);
    }
    rc = rd_bytes(r, dst, n, what);
    if (rc) return rc;
    dst[n] = '\0';
    if (full) *full = memchr(dst, '\0', (size_t)n) == NULL;
    return CAL_OK;
}

/* A scalar integer of any integer type into *v; non-integers give *ok = 0. */
static int rd_int(rd *r, uint32_t type, long long *v, int *ok)
{
    uint8_t b[8];
    unsigned sz = TYPE_SIZE[type];
    int rc = rd_bytes(r, b, sz, TYPE_NAME[type]);
    if (rc) return rc;
    uint64_t u = le(b, sz);
    *ok = 1;
    switch (type) {
    case T_U8: case T_U16: case T_U32: *v = (long long)u; break;
    case T_U64: if (u > (uint64_t)INT64_MAX) *ok = 0; else *v = (long long)u; break;
    case T_I8:  *v = (int8_t)u; break;
    case T_I16: *v = (int16_t)u; break;
    case T_I32: *v = (int32_t)u; break;
    case T_I64: *v = (int64_t)u; break;
    default: *ok = 0;
    }
    return CAL_OK;
}

static int is_int_type(uint32_t t)
{
    return t == T_U8 || t == T_I8 || t == T_U16 || t == T_I16 || t == T_U32 ||
           t == T_I32 || t == T_U64 || t == T_I64;
}

/* Skip (or, for integer arrays we want, fold into *max) one value. */
static int rd_value(rd *r, uint32_t type, int depth, long long *max, int *got)
{
    if (type >= T_COUNT)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": unknown value type %" PRIu32,
                    r->pos - 4, type);
    if (type == T_STRING) return rd_string(r, NULL, 0, NULL, "string");
    if (type != T_ARRAY) {
        if (max && is_int_type(type)) {
            long long v; int ok;
            int rc = rd_int(r, type, &v, &ok);
            if (rc) return rc;
            if (ok && (!*got || v > *max)) { *max = v; *got = 1; }
            return CAL_OK;
        }
        return rd_skip(r, TYPE_SIZE[type], TYPE_NAME[type]);
    }
    if (depth >= MAX_DEPTH)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": arrays nested deeper than %d",
                    r->pos, MAX_DEPTH);
    uint32_t et;
    uint64_t n;
    int rc = rd_u32(r, &et, "array type");
    if (!rc) rc = rd_u64(r, &n, "array length");
    if (rc) return rc;
    if (et >= T_COUNT)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": unknown array element type %"
                    PRIu32, r->pos - 12, et);
    if (et != T_STRING && et != T_ARRAY && !(max && is_int_type(et))) {
        uint64_t sz = TYPE_SIZE[et];
        if (n > (r->size - r->pos) / sz)
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": array of %" PRIu64 " %s "
                        "runs past the end (%" PRIu64 " bytes left)", r->pos - 12, n,
                        TYPE_NAME[et], r->size - r->pos);
        return rd_skip(r, n * sz, "array");
    }
    /* every element takes at least one byte (strings 8): bound n first */
    uint64_t min_el = et == T_STRING ? 8 : et == T_ARRAY ? 12 : TYPE_SIZE[et];
    if (n > (r->size - r->pos) / min_el)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": array length %" PRIu64
                    " runs past the end (%" PRIu64 " bytes left)", r->pos - 12, n,
                    r->size - r->pos);
    for (uint64_t i = 0; i < n; i++) {
        rc = rd_value(r, et, depth + 1, et == T_ARRAY ? NULL : max, got);
        if (rc) return rc;
    }
    return CAL_OK;
}

static slot *slot_for(rd *r, const char *prefix, size_t plen, int which)
{
    for (int i = 0; i < r->n_slots; i++)
        if (r->slots[i].which == which && strlen(r->slots[i].prefix) == plen &&
            !memcmp(r->slots[i].prefix, prefix, plen))
            return &r->slots[i];
    if (r->n_slots == MAX_SLOTS || plen >= sizeof r->slots[0].prefix) return NULL;
    slot *s = &r->slots[r->n_slots++];
    memcpy(s->prefix, prefix, plen);
    s->prefix[plen] = '\0';
    s->which = which;
    s->value = -1;
    s->was_array = 0;
    return s;
}

/* Which shape key is this ("<prefix>.<suffix>")? -1 if none. */
static int match_key(const char *key, size_t *plen)
{
    size_t kl = strlen(key);
    for (int k = 0; k < K_N; k++) {
        size_t sl = strlen(SUFFIX[k]);
        if (kl > sl + 1 && key[kl - sl - 1] == '.' && !strcmp(key + kl - sl, SUFFIX[k])) {
            *plen = kl - sl - 1;
            return k;
        }
    }
    return -1;
}

/* ---- the model reader's keys ------------------------------------------- */

/* A scalar number of any numeric type as a double; *ok = 0 otherwise. */
static int rd_number(rd *r, uint32_t type, double *v, int *ok)
{
    *ok = 0;
    if (is_int_type(type)) {
        long long i;
        int rc = rd_int(r, type, &i, ok);
        if (!rc) *v = (double)i;
        return rc;
    }
    if (type == T_F32 || type == T_F64) {
        uint8_t b[8];
        int rc = rd_bytes(r, b, TYPE_SIZE[type], TYPE_NAME[type]);
        if (rc) return rc;
        uint64_t u = le(b, TYPE_SIZE[type]);
        if (type == T_F32) {
            uint32_t u32 = (uint32_t)u;
            float f;
            memcpy(&f, &u32, 4);
            *v = f;
        } else {
            memcpy(v, &u, 8);
        }
        *ok = 1;
        return CAL_OK;
    }
    return rd_value(r, type, 0, NULL, NULL);
}

/* A numeric scalar of any type, exactly; kind NUM_NONE (the value
 * skipped) for anything else. */
static int rd_num(rd *r, uint32_t type, num *out)
{
    memset(out, 0, sizeof *out);
    if (is_int_type(type)) {
        uint8_t b[8];
        unsigned sz = TYPE_SIZE[type];
        int rc = rd_bytes(r, b, sz, TYPE_NAME[type]);
        if (rc) return rc;
        uint64_t u = le(b, sz);
        out->kind = NUM_INT;
        switch (type) {
        case T_U8: case T_U16: case T_U32: out->i = (long long)u; break;
        case T_U64:
            if (u > (uint64_t)INT64_MAX) { out->kind = NUM_BIG; out->u = u; }
            else out->i = (long long)u;
            break;
        case T_I8:  out->i = (int8_t)u; break;
        case T_I16: out->i = (int16_t)u; break;
        case T_I32: out->i = (int32_t)u; break;
        default:    out->i = (int64_t)u; break;
        }
        return CAL_OK;
    }
    if (type == T_F32 || type == T_F64) {
        int ok = 0;
        int rc = rd_number(r, type, &out->d, &ok);
        if (!rc) out->kind = NUM_FLOAT;
        out->f32 = type == T_F32;
        return rc;
    }
    return rd_value(r, type, 0, NULL, NULL);
}

/* The value as the file wrote it, for a message. */
static const char *num_str(const num *v, char *buf, size_t n)
{
    if (v->kind == NUM_INT) snprintf(buf, n, "%lld", v->i);
    else if (v->kind == NUM_BIG) snprintf(buf, n, "%llu", v->u);
    else   /* the shortest digits that read back as the file's value */
        for (int prec = v->f32 ? 6 : 15; prec <= 17; prec++) {
            cal_snprintf(buf, n, "%.*g", prec, v->d);
            double back = cal_strtod(buf, NULL);
            if (v->f32 ? (float)back == (float)v->d : back == v->d) break;
        }
    return buf;
}

/* tokenizer.ggml.tokens: count them, and see whether ids 0..255 are the 256
 * byte tokens (id 32 may instead be SentencePiece's space, U+2581). */
static int rd_tokens(rd *r, uint64_t at)
{
    uint32_t et;
    uint64_t n;
    int rc = rd_u32(r, &et, "array type");
    if (!rc) rc = rd_u64(r, &n, "array length");
    if (rc) return rc;
    if (et != T_STRING)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": tokenizer.ggml.tokens is an array "
                    "of %s, not of strings", at, et < T_COUNT ? TYPE_NAME[et] : "?");
    if (n > (r->size - r->pos) / 8 || n > (1u << 24))
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": tokenizer.ggml.tokens length %"
                    PRIu64 " runs past the end or exceeds 2^24", at, n);
    int bytes = n >= 256;
    for (uint64_t i = 0; i < n; i++) {
        char tok[16];
        int full = 0;
        rc = rd_string(r, i < 256 ? tok : NULL, sizeof tok, &full, "token");
        if (rc) return rc;
        if (i < 256 && bytes) {
            char want[8];
            snprintf(want, sizeof want, "<0x%02" PRIX64 ">", i);
            if (!full || (strcmp(tok, want) && !(i == 32 && !strcmp(tok, "\xe2\x96\x81"))))
                bytes = 0;
        }
    }
    r->m->n_vocab = (long)n;
    r->m->byte_tokens = bytes;
    return CAL_OK;
}

/* The keys only the model reader wants; *taken = 1 when key was one. */
static int rd_model_pair(rd *r, const char *key, uint32_t type, uint64_t at, int *taken)
{
    cal_gguf_model *m = r->m;
    *taken = 1;
    if (!strcmp(key, "tokenizer.ggml.model") && type == T_STRING) {
        int fit = 0;
        int rc = rd_string(r, m->tok_model, sizeof m->tok_model, &fit, key);
        if (!rc && !fit)
            snprintf(m->tok_model, sizeof m->tok_model, "(too long)");
        return rc;
    }
    if (!strcmp(key, "tokenizer.ggml.tokens") && type == T_ARRAY)
        return rd_tokens(r, at);
    if (!strcmp(key, "tokenizer.chat_template") && type == T_STRING && !m->chat_template) {
        uint64_t n;
        int rc = rd_u64(r, &n, key);
        if (rc) return rc;
        if (n > r->size - r->pos)
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s length %" PRIu64
                        " runs past the end (%" PRIu64 " left)", at, key, n, r->size - r->pos);
        int fit = n <= CAL_GGUF_TEMPLATE_MAX;
        m->chat_template_len = n;
        if (!(m->chat_template = malloc(fit ? (size_t)n + 1 : 1)))
            return fail(r, CAL_ENOMEM, "out of memory");
        m->chat_template[fit ? n : 0] = '\0';
        return fit ? rd_bytes(r, m->chat_template, (size_t)n, key) : rd_skip(r, n, key);
    }
    if (!strcmp(key, "caliper.embedding_scale")) {
        double v = 0;
        int ok = 0;
        int rc = rd_number(r, type, &v, &ok);
        if (rc) return rc;
        if (!ok || !(v > 0) || v > 1e6)
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": caliper.embedding_scale is not a "
                        "positive number", at);
        m->embed_scale = v;
        return CAL_OK;
    }
    int is_eos = !strcmp(key, "tokenizer.ggml.eos_token_id");
    int is_bos = !strcmp(key, "tokenizer.ggml.bos_token_id");
    int is_align = !strcmp(key, "general.alignment");
    if (is_eos || is_bos || is_align) {
        uint64_t *seen = is_eos ? &r->eos_at : is_bos ? &r->bos_at : &r->align_at;
        if (*seen)
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s appears a second time (first at "
                        "offset %" PRIu64 ")", at, key, *seen);
        *seen = at;
        if (!is_int_type(type))
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s has type %s, expected an "
                        "integer", at, key, TYPE_NAME[type]);
        num n;
        int rc = rd_num(r, type, &n);
        if (rc) return rc;
        char vs[48];
        if (n.kind != NUM_INT || n.i < 0 || n.i > (1LL << 32))
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s is %s, outside 0..2^32", at,
                        key, num_str(&n, vs, sizeof vs));
        long long v = n.i;
        if (is_align) {
            if (v == 0 || (v & (v - 1)) || v > 65536)
                return fail(r, CAL_EPROTO, "offset %" PRIu64 ": general.alignment %lld is "
                            "not a power of two up to 65536", at, v);
            m->alignment = (uint64_t)v;
        } else {
            *(is_eos ? &m->eos : &m->bos) = (long)v;
        }
        return CAL_OK;
    }
    size_t kl = strlen(key);
    for (int x = 0; x < X_N; x++) {
        size_t sl = strlen(XSUFFIX[x]);
        if (kl <= sl + 1 || key[kl - sl - 1] != '.' || strcmp(key + kl - sl, XSUFFIX[x]))
            continue;
        size_t plen = kl - sl - 1;
        if (plen >= sizeof r->xslots[0].prefix || r->n_xslots == MAX_XSLOTS)
            break;
        for (int i = 0; i < r->n_xslots; i++)
            if (r->xslots[i].which == x && strlen(r->xslots[i].prefix) == plen &&
                !memcmp(r->xslots[i].prefix, key, plen))
                return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s appears a second time "
                            "(first at offset %" PRIu64 ")", at, key, r->xslots[i].at);
        num v;
        int rc = rd_num(r, type, &v);
        if (rc) return rc;
        /* another architecture's key may hold anything: a wrong type or
         * range is an error only once this prefix turns out to be the
         * model's (xcheck) */
        xslot *s = &r->xslots[r->n_xslots++];
        memcpy(s->prefix, key, plen);
        s->prefix[plen] = '\0';
        s->which = x;
        s->v = v;
        s->bad_type = v.kind != NUM_NONE ? -1 : (int)type;
        s->at = at;
        return CAL_OK;
    }
    *taken = 0;
    return CAL_OK;
}

/* The model's value of a loader key (checked by xcheck); 0 absent. */
static double xpick(const rd *r, int which)
{
    for (int i = 0; i < r->n_xslots; i++)
        if (r->xslots[i].which == which && !strcmp(r->xslots[i].prefix, r->arch))
            return r->xslots[i].v.kind == NUM_INT ? (double)r->xslots[i].v.i : r->xslots[i].v.d;
    return 0;
}

/* The model's own loader keys, each against what it can mean: a count or
 * length is an integer in 0..2^40 (a float with a fraction, such as 384.5,
 * is no count), RoPE's base is in (0, 1e12] and RMSNorm's epsilon in
 * (0, 1) (0 would read as "absent", so it is refused, not replaced). The
 * first that is not, as an error naming the key, the value and the range;
 * CAL_OK when all are. */
static int xcheck(rd *r)
{
    for (int i = 0; i < r->n_xslots; i++) {
        xslot *s = &r->xslots[i];
        if (strcmp(s->prefix, r->arch))
            continue;
        if (s->bad_type >= 0)
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s.%s has type %s, expected a "
                        "number", s->at, s->prefix, XSUFFIX[s->which], TYPE_NAME[s->bad_type]);
        const num *v = &s->v;
        char vs[48];
        const char *range = NULL;
        double d = v->kind == NUM_INT ? (double)v->i : v->d;
        if (s->which == X_EPS) {
            if (v->kind == NUM_BIG || !(d > 0) || !(d < 1))
                range = "outside (0, 1)";
        } else if (s->which == X_ROPE_BASE) {
            if (v->kind == NUM_BIG || !(d > 0) || !(d <= 1e12))
                range = "outside (0, 1e12]";
        } else if (v->kind == NUM_FLOAT && d == floor(d) && d >= 0 && d <= 0x1p40) {
            s->v = (num){.kind = NUM_INT, .i = (long long)d};   /* a count written 384.0 */
        } else if (v->kind != NUM_INT || v->i < 0 || v->i > (1LL << 40)) {
            range = v->kind == NUM_FLOAT && isfinite(d) && d != floor(d)
                    ? "not an integer in 0..2^40" : "outside 0..2^40";
        }
        if (range)
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s.%s is %s, %s", s->at,
                        s->prefix, XSUFFIX[s->which], num_str(v, vs, sizeof vs), range);
    }
    return CAL_OK;
}

static int rd_pair(rd *r, uint64_t idx)
{
    char key[MAX_KEY];
    int full = 0;
    uint64_t at = r->pos;
    int rc = rd_string(r, key, sizeof key, &full, "key");
    if (rc) return rc;
    uint32_t type;
    rc = rd_u32(r, &type, "value type");
    if (rc) return rc;
    if (type >= T_COUNT)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": pair %" PRIu64 " (%s) has unknown "
                    "value type %" PRIu32, at, idx, full ? key : "?", type);
    if (!full) return rd_value(r, type, 0, NULL, NULL);
    if (type != T_STRING && !strcmp(key, "general.architecture"))
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": general.architecture has type %s, "
                    "expected string", at, TYPE_NAME[type]);
    if (!strcmp(key, "general.architecture")) {
        if (r->arch_at)
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": general.architecture appears a "
                        "second time (first at offset %" PRIu64 ")", at, r->arch_at);
        r->arch_at = at;
    }
    if (type == T_STRING && (!strcmp(key, "general.architecture") ||
                             !strcmp(key, "general.name"))) {
        char *dst = key[8] == 'a' ? r->arch : r->name;
        size_t cap = key[8] == 'a' ? sizeof r->arch : sizeof r->name;
        int fit = 0;
        rc = rd_string(r, dst, cap, &fit, key);
        if (rc) return rc;
        if (!fit && dst == r->arch)
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": general.architecture is "
                        "longer than %zu bytes or holds a NUL", at, cap - 1);
        return CAL_OK;
    }
    if (r->m) {
        int taken = 0;
        rc = rd_model_pair(r, key, type, at, &taken);
        if (rc || taken) return rc;
    }
    size_t plen = 0;
    int which = match_key(key, &plen);
    if (which < 0) return rd_value(r, type, 0, NULL, NULL);
    long long v = 0;
    int got = 0;
    if (type == T_ARRAY) {
        rc = rd_value(r, type, 0, &v, &got);
    } else if (is_int_type(type)) {
        int ok;
        rc = rd_int(r, type, &v, &ok);
        got = ok;
    } else {
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s has type %s, expected an integer",
                    at, key, TYPE_NAME[type]);
    }
    if (rc) return rc;
    if (!got && type == T_ARRAY)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s is an array without an integer in "
                    "it, expected an integer", at, key);
    if (!got)   /* a uint64 past int64 */
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s is over 2^63, outside 1..2^40",
                    at, key);
    if (v <= 0 || v > (1LL << 40))
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s is %lld%s, outside 1..2^40", at,
                    key, v, type == T_ARRAY ? " (its array's largest)" : "");
    slot *s = slot_for(r, key, plen, which);
    if (s && s->value >= 0)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s appears a second time (first at "
                    "offset %" PRIu64 ")", at, key, s->at);
    if (s) { s->value = (long)v; s->was_array = type == T_ARRAY; s->at = at; }
    return CAL_OK;
}

static long pick(rd *r, int which, int *was_array)
{
    size_t al = strlen(r->arch);
    for (int i = 0; i < r->n_slots; i++)
        if (r->slots[i].which == which && strlen(r->slots[i].prefix) == al &&
            !strcmp(r->slots[i].prefix, r->arch)) {
            if (was_array) *was_array = r->slots[i].was_array;
            return r->slots[i].value;
        }
    return -1;
}

static int parse(rd *r, cal_model_shape *out)
{
    uint8_t magic[4];
    int rc = rd_bytes(r, magic, 4, "magic");
    if (rc) return rc;
    if (memcmp(magic, "GGUF", 4))
        return fail(r, CAL_EPROTO, "not a GGUF file: magic is %02x %02x %02x %02x, "
                    "not \"GGUF\"", magic[0], magic[1], magic[2], magic[3]);
    uint32_t version;
    uint64_t n_tensors, n_kv;
    rc = rd_u32(r, &version, "version");
    if (rc) return rc;
    if (version >= 0x10000)
        return fail(r, CAL_EPROTO, "GGUF version field %08" PRIx32 " looks big-endian: "
                    "only little-endian GGUF is read", version);
    if (version != 2 && version != 3)
        return fail(r, CAL_EPROTO, "GGUF version %" PRIu32 " is not supported "
                    "(2 and 3 are)", version);
    rc = rd_u64(r, &n_tensors, "tensor count");
    if (!rc) rc = rd_u64(r, &n_kv, "metadata count");
    if (rc) return rc;
    /* each pair takes at least 8 (key length) + 4 (type) + 1 bytes */
    if (n_kv > (r->size - r->pos) / 13)
        return fail(r, CAL_EPROTO, "metadata count %" PRIu64 " cannot fit in the "
                    "%" PRIu64 " bytes that follow", n_kv, r->size - r->pos);
    for (uint64_t i = 0; i < n_kv; i++) {
        rc = rd_pair(r, i);
        if (rc) return rc;
    }
    if (!r->arch[0])
        return fail(r, CAL_ENOTFOUND, "general.architecture is missing");
    int arr = 0;
    long blocks = pick(r, K_BLOCKS, NULL), embed = pick(r, K_EMBED, NULL);
    long heads = pick(r, K_HEADS, NULL), kvh = pick(r, K_HEADS_KV, &arr);
    long kl = pick(r, K_KEY_LEN, NULL), vl = pick(r, K_VAL_LEN, NULL);
    if (blocks <= 0)
        return fail(r, CAL_ENOTFOUND, "%s.block_count is missing", r->arch);
    if (kvh <= 0) kvh = heads;
    if (kvh <= 0)
        return fail(r, CAL_ENOTFOUND, "%s.attention.head_count_kv and "
                    "%s.attention.head_count are missing", r->arch, r->arch);
    if (kl <= 0) {
        if (heads <= 0 || embed <= 0)
            return fail(r, CAL_ENOTFOUND, "%s.attention.key_length is missing and cannot "
                        "be derived (needs embedding_length and head_count)", r->arch);
        if (embed % heads)
            return fail(r, CAL_EPROTO, "%s.embedding_length %ld is not a multiple of "
                        "head_count %ld", r->arch, embed, heads);
        kl = embed / heads;
    }
    if (vl <= 0) vl = kl;
    cal_model_shape s;
    memset(&s, 0, sizeof s);
    snprintf(s.source, sizeof s.source, "gguf");
    memcpy(s.arch, r->arch, sizeof s.arch);
    memcpy(s.name, r->name, sizeof s.name);
    s.layers = blocks;
    s.heads = heads > 0 ? heads : 0;
    s.kv_heads = kvh;
    s.k_dim = kl;
    s.v_dim = vl;
    s.embedding = embed > 0 ? embed : 0;
    s.kv_heads_varies = arr;
    s.n_tensors = n_tensors;
    s.n_kv = n_kv;
    *out = s;
    return CAL_OK;
}

/* A fresh reader whose errors go to why; over buf when mem is set. */
static void rd_init(rd *r, char *why, size_t why_len)
{
    memset(r, 0, sizeof *r);
    r->why = why;
    r->why_len = why_len;
    if (why && why_len) why[0] = '\0';
}

static void rd_init_mem(rd *r, const void *buf, size_t len, char *why, size_t why_len)
{
    static const uint8_t empty[1];
    rd_init(r, why, why_len);
    r->mem = buf ? buf : empty;
    r->size = buf ? len : 0;
}

int cal_gguf_read_mem(const void *buf, size_t len, cal_model_shape *out, char *why,
                      size_t why_len)
{
    rd r;
    rd_init_mem(&r, buf, len, why, why_len);
    if (!out) return CAL_EINVAL;
    return parse(&r, out);
}

/* A reader over a regular file (r->f open, r->size set), or the error. */
static int rd_open(rd *r, const char *path)
{
    r->f = fopen(path, "rb");
    if (!r->f)
        return fail(r, errno == ENOENT ? CAL_ENOTFOUND : CAL_EIO, "%s: %s", path,
                    strerror(errno));
    struct stat st;
    if (fstat(fileno(r->f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(r->f);
        r->f = NULL;
        return fail(r, CAL_EIO, "%s: not a regular file", path);
    }
    r->size = (uint64_t)st.st_size;
    return CAL_OK;
}

int cal_gguf_read_file(const char *path, cal_model_shape *out, char *why, size_t why_len)
{
    rd r;
    rd_init(&r, why, why_len);
    if (!path || !out) return CAL_EINVAL;
    int rc = rd_open(&r, path);
    if (rc) return rc;
    rc = parse(&r, out);
    fclose(r.f);
    return rc;
}

/* ---- the model reader: header, loader keys, tensor directory ------------ */

/* ggml types: name, bytes per block, elements per block (0: not known here) */
static const struct { const char *name; unsigned bytes, block; } GGML_TYPE[] = {
    [0] = {"F32", 4, 1},      [1] = {"F16", 2, 1},       [2] = {"Q4_0", 18, 32},
    [3] = {"Q4_1", 20, 32},   [6] = {"Q5_0", 22, 32},    [7] = {"Q5_1", 24, 32},
    [8] = {"Q8_0", 34, 32},   [9] = {"Q8_1", 36, 32},    [10] = {"Q2_K", 84, 256},
    [11] = {"Q3_K", 110, 256}, [12] = {"Q4_K", 144, 256}, [13] = {"Q5_K", 176, 256},
    [14] = {"Q6_K", 210, 256}, [15] = {"Q8_K", 292, 256}, [16] = {"IQ2_XXS", 66, 256},
    [17] = {"IQ2_XS", 74, 256}, [18] = {"IQ3_XXS", 98, 256}, [19] = {"IQ1_S", 50, 256},
    [20] = {"IQ4_NL", 18, 32}, [21] = {"IQ3_S", 110, 256}, [22] = {"IQ2_S", 82, 256},
    [23] = {"IQ4_XS", 136, 256}, [24] = {"I8", 1, 1},   [25] = {"I16", 2, 1},
    [26] = {"I32", 4, 1},     [27] = {"I64", 8, 1},      [28] = {"F64", 8, 1},
    [29] = {"IQ1_M", 56, 256}, [30] = {"BF16", 2, 1},    [34] = {"TQ1_0", 54, 256},
    [35] = {"TQ2_0", 66, 256}, [39] = {"MXFP4", 17, 32},
};
#define N_GGML_TYPE (sizeof GGML_TYPE / sizeof GGML_TYPE[0])

const char *cal_gguf_type_name(uint32_t type)
{
    return type < N_GGML_TYPE && GGML_TYPE[type].name ? GGML_TYPE[type].name : "unknown";
}

unsigned cal_gguf_type_block(uint32_t type, unsigned *bytes)
{
    int known = type < N_GGML_TYPE && GGML_TYPE[type].block;
    if (bytes)
        *bytes = known ? GGML_TYPE[type].bytes : 0;
    return known ? GGML_TYPE[type].block : 0;
}

static int rd_tensor(rd *r, uint64_t i, uint64_t count, cal_gguf_tensor *t)
{
    uint64_t at = r->pos;
    int full = 0;
    int rc = rd_string(r, t->name, sizeof t->name, &full, "tensor name");
    if (rc) return rc;
    if (!full)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": tensor %" PRIu64 "'s name is longer "
                    "than %zu bytes or holds a NUL", at, i, sizeof t->name - 1);
    /* which entry and its name, quoted: an empty name (a tensor count past
     * the directory reads zeros) must still show */
    char lab[sizeof t->name + 64];   /* two 20-digit counts, " of ", the quotes */
    snprintf(lab, sizeof lab, "%" PRIu64 " of %" PRIu64 " (\"%s\")", i + 1, count, t->name);
    rc = rd_u32(r, &t->n_dims, "tensor dims");
    if (rc) return rc;
    if (t->n_dims < 1 || t->n_dims > 4)
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": tensor %s has %" PRIu32 " dims "
                    "(1..4 allowed)", at, lab, t->n_dims);
    uint64_t n = 1;
    for (unsigned d = 0; d < 4; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims) {
            rc = rd_u64(r, &t->ne[d], "tensor extent");
            if (rc) return rc;
            if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || n > (1ull << 40) / t->ne[d])
                return fail(r, CAL_EPROTO, "offset %" PRIu64 ": tensor %s extent %" PRIu64
                            " is zero or too large", at, lab, t->ne[d]);
            n *= t->ne[d];
        }
    }
    rc = rd_u32(r, &t->type, "tensor type");
    if (!rc) rc = rd_u64(r, &t->offset, "tensor offset");
    if (rc) return rc;
    t->bytes = 0;
    unsigned bb, blk = cal_gguf_type_block(t->type, &bb);
    if (blk) {
        if (t->ne[0] % blk)
            return fail(r, CAL_EPROTO, "offset %" PRIu64 ": tensor %s row of %" PRIu64
                        " is not a multiple of %s's block of %u", at, lab, t->ne[0],
                        cal_gguf_type_name(t->type), blk);
        t->bytes = n / blk * bb;
    }
    return CAL_OK;
}

/* A tensor name listed twice: which loader's tensor would it be? llama.cpp
 * refuses the file ("duplicate tensor name"); so does this reader. Hashing
 * the names keeps it linear in the directory (up to 2^20 entries). */
static int unique_names(rd *r, const cal_gguf_model *m)
{
    size_t size = 16;
    while (size < 2 * m->n_tensors)
        size <<= 1;
    uint32_t *tab = calloc(size, sizeof *tab);   /* index + 1; 0 empty */
    if (!tab)
        return fail(r, CAL_ENOMEM, "%" PRIu64 " tensor names: out of memory", m->n_tensors);
    int rc = CAL_OK;
    for (uint64_t i = 0; i < m->n_tensors && rc == CAL_OK; i++) {
        const char *nm = m->tensors[i].name;
        uint32_t h = 2166136261u;
        for (const char *p = nm; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
        for (size_t b = h & (size - 1);; b = (b + 1) & (size - 1)) {
            if (!tab[b]) {
                tab[b] = (uint32_t)i + 1;
                break;
            }
            if (!strcmp(m->tensors[tab[b] - 1].name, nm)) {
                rc = fail(r, CAL_EPROTO, "tensor %" PRIu64 " of %" PRIu64 " (\"%s\") has the "
                          "name of tensor %" PRIu32 ": a name may be listed once", i + 1,
                          m->n_tensors, nm, tab[b]);
                break;
            }
        }
    }
    free(tab);
    return rc;
}

static int parse_model(rd *r, cal_gguf_model *m)
{
    cal_model_shape s;
    int rc = parse(r, &s);
    if (rc) return rc;
    m->shape = s;
    rc = xcheck(r);
    if (rc) return rc;
    m->ffn = (long)xpick(r, X_FFN);
    m->n_expert = (long)xpick(r, X_EXPERT);
    m->n_expert_used = (long)xpick(r, X_EXPERT_USED);
    m->ffn_exp = (long)xpick(r, X_FFN_EXP);
    m->ctx_len = (long)xpick(r, X_CTX);
    m->rope_dims = (long)xpick(r, X_ROPE_DIMS);
    m->rope_theta = xpick(r, X_ROPE_BASE);
    m->norm_eps = xpick(r, X_EPS);
    /* each tensor info takes at least 8 + 1 + 4 + 8 + 4 + 8 bytes */
    if (s.n_tensors > (r->size - r->pos) / 33 || s.n_tensors > (1u << 20))
        return fail(r, CAL_EPROTO, "tensor count %" PRIu64 " cannot fit in the %" PRIu64
                    " bytes that follow", s.n_tensors, r->size - r->pos);
    m->n_tensors = s.n_tensors;
    m->tensors = calloc(s.n_tensors ? (size_t)s.n_tensors : 1, sizeof *m->tensors);
    if (!m->tensors)
        return fail(r, CAL_ENOMEM, "%" PRIu64 " tensor infos: out of memory", s.n_tensors);
    for (uint64_t i = 0; i < s.n_tensors; i++) {
        rc = rd_tensor(r, i, s.n_tensors, &m->tensors[i]);
        if (rc) return rc;
    }
    rc = unique_names(r, m);
    if (rc) return rc;
    uint64_t a = m->alignment;
    m->data_offset = (r->pos + a - 1) / a * a;
    for (uint64_t i = 0; i < s.n_tensors; i++) {
        cal_gguf_tensor *t = &m->tensors[i];
        if (t->offset % a || t->offset > r->size || r->size - t->offset < m->data_offset ||
            t->bytes > r->size - m->data_offset - t->offset)
            return fail(r, CAL_EPROTO, "tensor %" PRIu64 " of %" PRIu64 " (\"%s\"): data at %"
                        PRIu64 " + %" PRIu64 " bytes is misaligned or runs past the end of the %"
                        PRIu64 "-byte file", i + 1, s.n_tensors, t->name, t->offset, t->bytes,
                        r->size);
        t->offset += m->data_offset;
    }
    return CAL_OK;
}

static int read_model(rd *r, cal_gguf_model *out)
{
    cal_gguf_model m;
    memset(&m, 0, sizeof m);
    m.alignment = 32;
    m.eos = m.bos = -1;
    r->m = &m;
    int rc = parse_model(r, &m);
    r->m = NULL;
    if (rc) {
        free(m.tensors);
        return rc;
    }
    *out = m;
    return CAL_OK;
}

int cal_gguf_read_model_mem(const void *buf, size_t len, cal_gguf_model *out, char *why,
                            size_t why_len)
{
    rd r;
    rd_init_mem(&r, buf, len, why, why_len);
    if (!out) return CAL_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = read_model(&r, out);
    if (rc) cal_gguf_model_free(out);   /* nothing is kept of a file refused */
    return rc;
}

int cal_gguf_read_model_file(const char *path, cal_gguf_model *out, char *why,
                             size_t why_len)
{
    rd r;
    rd_init(&r, why, why_len);
    if (!path || !out) return CAL_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = rd_open(&r, path);
    if (rc) return rc;
    rc = read_model(&r, out);
    fclose(r.f);
    if (rc) cal_gguf_model_free(out);
    return rc;
}

void cal_gguf_model_free(cal_gguf_model *m)
{
    if (!m) return;
    free(m->tensors);
    m->tensors = NULL;
    m->n_tensors = 0;
    free(m->chat_template);
    m->chat_template = NULL;
}

const cal_gguf_tensor *cal_gguf_find(const cal_gguf_model *m, const char *name)
{
    if (!m || !name) return NULL;
    for (uint64_t i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name))
            return &m->tensors[i];
    return NULL;
}
