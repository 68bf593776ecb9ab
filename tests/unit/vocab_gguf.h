/* Test helper: a GGUF file's bytes, written key by key in memory, for the
 * vocabulary tests and fuzz targets that need a vocabulary of their own
 * (special tokens that nest or overlap, ids out of range, wrong types).
 * Header-only; every writer aborts on ENOMEM (tests only). */
#ifndef CALIPER_TESTS_VOCAB_GGUF_H
#define CALIPER_TESTS_VOCAB_GGUF_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { VG_U32 = 4, VG_I32 = 5, VG_F32 = 6, VG_BOOL = 7, VG_STR = 8, VG_ARR = 9, VG_U64 = 10,
       VG_I64 = 11, VG_F64 = 12 };

typedef struct vg_buf {
    unsigned char *p;
    size_t n, cap;
} vg_buf;

static inline void vg_put(vg_buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        unsigned char *q = realloc(b->p, c);
        if (!q) abort();
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static inline void vg_u32(vg_buf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    vg_put(b, x, 4);
}

static inline void vg_u64(vg_buf *b, uint64_t v)
{
    vg_u32(b, (uint32_t)v);
    vg_u32(b, (uint32_t)(v >> 32));
}

static inline void vg_strn(vg_buf *b, const char *s, size_t n)
{
    vg_u64(b, n);
    vg_put(b, s, n);
}

/* "GGUF", version 3, no tensors, n_kv pairs to follow */
static inline void vg_begin(vg_buf *b, uint64_t n_kv)
{
    vg_put(b, "GGUF", 4);
    vg_u32(b, 3);
    vg_u64(b, 0);
    vg_u64(b, n_kv);
}

static inline void vg_key(vg_buf *b, const char *key, uint32_t type)
{
    vg_strn(b, key, strlen(key));
    vg_u32(b, type);
}

static inline void vg_kv_str(vg_buf *b, const char *key, const char *v)
{
    vg_key(b, key, VG_STR);
    vg_strn(b, v, strlen(v));
}

static inline void vg_kv_u32(vg_buf *b, const char *key, uint32_t v)
{
    vg_key(b, key, VG_U32);
    vg_u32(b, v);
}

/* an array of n strings, s[i] of len[i] bytes (len NULL: strlen) */
static inline void vg_kv_strs(vg_buf *b, const char *key, const char *const *s,
                              const size_t *len, size_t n)
{
    vg_key(b, key, VG_ARR);
    vg_u32(b, VG_STR);
    vg_u64(b, n);
    for (size_t i = 0; i < n; i++)
        vg_strn(b, s[i], len ? len[i] : strlen(s[i]));
}

static inline void vg_kv_i32s(vg_buf *b, const char *key, const int32_t *v, size_t n)
{
    vg_key(b, key, VG_ARR);
    vg_u32(b, VG_I32);
    vg_u64(b, n);
    for (size_t i = 0; i < n; i++)
        vg_u32(b, (uint32_t)v[i]);
}

static inline void vg_kv_f32s(vg_buf *b, const char *key, const float *v, size_t n)
{
    vg_key(b, key, VG_ARR);
    vg_u32(b, VG_F32);
    vg_u64(b, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        vg_u32(b, u);
    }
}

#endif
