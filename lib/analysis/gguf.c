/* GGUF header reader: walks the typed metadata pairs with every length and
 * count checked against the bytes that remain, keeps the few keys that fix
 * the KV cache size, and skips everything else (tokenizer arrays included)
 * without allocating. Memory and file sources share one cursor. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
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
    long   value;      /* max over the array when it was one */
    int    was_array;
} slot;

typedef struct rd {
    const uint8_t *mem;     /* memory source, or NULL */
    FILE   *f;              /* file source, or NULL */
    uint64_t pos, size;
    char   *why;
    size_t  why_len;
    slot    slots[MAX_SLOTS];
    int     n_slots;
    char    arch[64], name[128];
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
        rc = rd_value(r, type, 0, NULL, NULL);
    }
    if (rc) return rc;
    if (!got || v <= 0 || v > (1LL << 40))
        return fail(r, CAL_EPROTO, "offset %" PRIu64 ": %s is %s%lld, not a positive "
                    "integer", at, key, got ? "" : "not an integer: ", got ? v : 0LL);
    slot *s = slot_for(r, key, plen, which);
    if (s) { s->value = (long)v; s->was_array = type == T_ARRAY; }
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

int cal_gguf_read_mem(const void *buf, size_t len, cal_model_shape *out, char *why,
                      size_t why_len)
{
    static const uint8_t empty[1];
    rd r;
    memset(&r, 0, sizeof r);
    r.mem = buf ? buf : empty;
    r.size = buf ? len : 0;
    r.why = why;
    r.why_len = why_len;
    if (why && why_len) why[0] = '\0';
    if (!out) return CAL_EINVAL;
    return parse(&r, out);
}

int cal_gguf_read_file(const char *path, cal_model_shape *out, char *why, size_t why_len)
{
    rd r;
    memset(&r, 0, sizeof r);
    r.why = why;
    r.why_len = why_len;
    if (why && why_len) why[0] = '\0';
    if (!path || !out) return CAL_EINVAL;
    r.f = fopen(path, "rb");
    if (!r.f)
        return fail(&r, errno == ENOENT ? CAL_ENOTFOUND : CAL_EIO, "%s: %s", path,
                    strerror(errno));
    struct stat st;
    if (fstat(fileno(r.f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(r.f);
        return fail(&r, CAL_EIO, "%s: not a regular file", path);
    }
    r.size = (uint64_t)st.st_size;
    int rc = parse(&r, out);
    fclose(r.f);
    return rc;
}
