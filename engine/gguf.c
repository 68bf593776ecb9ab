/* caliper reference engine — GGUF export of an engine's weights, the check
 * that a GGUF file is one caliper can serve, and the weight load (mmap, F16
 * widened to the engine's F32). It reaches the engine's tensors only through
 * the cal_gguf_source the engine hands it (weights.c), so it sits below the
 * engine and calls nothing of it. The format is llama.cpp's: see engine/gguf.h
 * for the function both engines compute and the vocabulary. */
#include "engine/gguf.h"
#include "engine/kernels.h"
#include "engine/internal.h"
#include "engine/vocab.h"
#include "caliper/error.h"
#include "caliper/gguf.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALIGN 32

/* ---- the tensor list both directions share -------------------------------- */

typedef struct tdesc {
    char     name[64];
    int      n_dims;
    uint64_t ne[3];      /* ne[0] the row length */
    int      is_norm;    /* 1-D: stays F32 */
    int      kind;       /* a matrix's index in a plan of formats (CAL_T_*) */
    int      dtype;      /* the engine's format of these rows (norms: F32) */
    cal_tensor_view v;   /* a matrix: where the engine holds its rows */
    float   *vec;        /* a norm or bias: the engine's F32 vector */
    float    scale;      /* token_embd only: the engine's embedding scale */
} tdesc;

#define MAX_TENSORS(c) (4 + (c)->n_layers * 15)

static uint64_t t_elems(const tdesc *t) { return t->ne[0] * t->ne[1] * t->ne[2]; }

/* ggml's tensor type of an engine format (cal_gguf_dtype_of: back) */
static uint32_t ggml_type_of(int dtype)
{
    int64_t t = cal_gguf_type_of(dtype);
    return t >= 0 ? (uint32_t)t : CAL_GGUF_F32;
}

/* llama.cpp's general.file_type (LLAMA_FTYPE_ALL_F32, MOSTLY_F16, MOSTLY_Q8_0,
 * MOSTLY_BF16, MOSTLY_Q4_0, MOSTLY_Q4_K_S, MOSTLY_Q6_K, MOSTLY_Q4_1,
 * MOSTLY_Q5_0, MOSTLY_Q5_1, MOSTLY_Q5_K_S, MOSTLY_Q4_K_M): Q4_K alone is
 * what llama.cpp calls Q4_K_S's main type, Q5_K alone Q5_K_S's */
static uint32_t file_type_of(int dtype)
{
    switch (dtype) {
    case CAL_DTYPE_F16:  return 1;
    case CAL_DTYPE_BF16: return 32;
    case CAL_DTYPE_Q8_0: return 7;
    case CAL_DTYPE_Q4_0: return 2;
    case CAL_DTYPE_Q4_K: return 14;
    case CAL_DTYPE_Q6_K: return 18;
    case CAL_DTYPE_Q4_1: return 3;
    case CAL_DTYPE_Q5_0: return 8;
    case CAL_DTYPE_Q5_1: return 9;
    case CAL_DTYPE_Q5_K: return 16;
    case CAL_GGUF_MIX_Q4_K_M: return 15;
    default:             return 0;
    }
}

/* general.file_type of a file whose tensors are in fdt[nt]: that of the
 * format holding the most weights, or Q4_K_M's for Q4_K with Q6_K beside
 * it */
static int mixed_file_type(const tdesc *t, const int *fdt, int nt)
{
    double by[CAL_DTYPE_COUNT] = {0};
    for (int i = 0; i < nt; i++)
        if (!t[i].is_norm)
            by[fdt[i]] += (double)t_elems(&t[i]);
    int top = 0;
    for (int k = 1; k < CAL_DTYPE_COUNT; k++)
        if (by[k] > by[top])
            top = k;
    if (top == CAL_DTYPE_Q4_K && by[CAL_DTYPE_Q6_K] > 0)
        return CAL_GGUF_MIX_Q4_K_M;
    return top;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and
 * every third one between */
static int more_bits(int layer, int n_layers)
{
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 ||
           (layer - n_layers / 8) % 3 == 2;
}

/* The format a tensor is written in. CAL_GGUF_AS_HELD: the engine's own.
 * A plain format: every matrix in it.
 * CAL_GGUF_MIX_Q4_K_M, llama.cpp's Q4_K_M rule reduced to the tensors
 * caliper has: Q6_K for output.weight and for attn_v and ffn_down (their
 * experts too) of the layers more_bits picks, Q4_K for the rest. */
static int tensor_dtype(const tdesc *t, int dtype, int n_layers)
{
    if (t->is_norm)
        return CAL_DTYPE_F32;
    if (dtype == CAL_GGUF_AS_HELD)
        return t->dtype;
    if (dtype != CAL_GGUF_MIX_Q4_K_M)
        return dtype;
    if (!strcmp(t->name, "output.weight"))
        return CAL_DTYPE_Q6_K;
    int layer = -1;
    char kind[32] = "";
    if (sscanf(t->name, "blk.%d.%31[a-z_]", &layer, kind) == 2 &&
        (!strcmp(kind, "attn_v") || !strncmp(kind, "ffn_down", 8)) &&
        more_bits(layer, n_layers))
        return CAL_DTYPE_Q6_K;
    return CAL_DTYPE_Q4_K;
}

/* The tensors of c, in the order they are written, pointing into e's weights
 * (or no data when e is NULL: names, shapes and kinds only). Returns the
 * count. */
static int tensor_list(const cal_model_config *c, const cal_gguf_source *e, tdesc *t)
{
    int n = 0, d = c->dim, hd = c->dim / c->n_heads, qd = c->dim;
    int kvd = hd * c->n_kv_heads, f = c->ffn_dim, E = c->n_experts;
    cal_model_weights mw;
    memset(&mw, 0, sizeof mw);
    if (e)
        e->weights(e->engine, &mw);
    /* a matrix: its view in the engine; a vector: its floats */
#define ADD(nm, nd, a, b, cc, knd, view, vp) do { \
        tdesc *x = &t[n++]; memset(x, 0, sizeof *x); \
        snprintf(x->name, sizeof x->name, "%s", nm); x->n_dims = nd; \
        x->ne[0] = a; x->ne[1] = b; x->ne[2] = cc; x->is_norm = (knd) < 0; \
        x->kind = knd; x->v = view; x->vec = (float *)(vp); \
        x->dtype = x->is_norm ? CAL_DTYPE_F32 : x->v.dtype; \
        x->scale = 1.0f; } while (0)
    static const cal_tensor_view none;
#define VEC(nm, a, p) ADD(nm, 1, a, 1, 1, -1, none, p)
    ADD("token_embd.weight", 2, d, c->vocab, 1, CAL_T_EMB, mw.embedding, NULL);
    t[n - 1].scale = e ? mw.embed_scale : 1.0f;
    VEC("output_norm.weight", d, mw.final_norm);
    ADD("output.weight", 2, d, c->vocab, 1, CAL_T_OUT, mw.output, NULL);
    if (c->rope_freqs)   /* llama.cpp's layer 0 holds it, the others share it */
        VEC("rope_freqs.weight", hd / 2, mw.rope_freqs);
    for (int l = 0; l < c->n_layers; l++) {
        cal_layer_weights w;
        memset(&w, 0, sizeof w);
        if (e)
            e->layer_weights(e->engine, l, &w);
        char nm[64];
#define NM(s) (snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, s), nm)
#define K(k) (int)CAL_T_AT(l, k)
        VEC(NM("attn_norm"), d, w.attn_norm);
        ADD(NM("attn_q"), 2, d, qd, 1, K(CAL_T_Q), w.q, NULL);
        ADD(NM("attn_k"), 2, d, kvd, 1, K(CAL_T_K), w.k, NULL);
        ADD(NM("attn_v"), 2, d, kvd, 1, K(CAL_T_V), w.v, NULL);
        ADD(NM("attn_output"), 2, qd, d, 1, K(CAL_T_O), w.o, NULL);
        if (c->arch == CAL_ARCH_QWEN2) {
            /* the biases are one engine vector: Q's, then K's, then V's */
#define NMB(s) (snprintf(nm, sizeof nm, "blk.%d.%s.bias", l, s), nm)
#define AT(k) (w.bqkv ? w.bqkv + (k) : NULL)
            VEC(NMB("attn_q"), qd, AT(0));
            VEC(NMB("attn_k"), kvd, AT(qd));
            VEC(NMB("attn_v"), kvd, AT(qd + kvd));
#undef AT
#undef NMB
        } else if (CAL_ARCH_QK_NORM(c->arch)) {
            VEC(NM("attn_q_norm"), hd, w.q_norm);
            VEC(NM("attn_k_norm"), hd, w.k_norm);
        }
        VEC(NM("ffn_norm"), d, w.ffn_norm);
        if (E > 0) {
            ADD(NM("ffn_gate_inp"), 2, d, E, 1, K(CAL_T_ROUTER), w.router, NULL);
            ADD(NM("ffn_gate_exps"), 3, d, f, E, K(CAL_T_GATE), w.gate, NULL);
            ADD(NM("ffn_up_exps"), 3, d, f, E, K(CAL_T_UP), w.up, NULL);
            ADD(NM("ffn_down_exps"), 3, f, d, E, K(CAL_T_DOWN), w.down, NULL);
        } else {
            ADD(NM("ffn_gate"), 2, d, f, 1, K(CAL_T_GATE), w.gate, NULL);
            ADD(NM("ffn_up"), 2, d, f, 1, K(CAL_T_UP), w.up, NULL);
            ADD(NM("ffn_down"), 2, f, d, 1, K(CAL_T_DOWN), w.down, NULL);
        }
#undef K
#undef NM
    }
#undef VEC
#undef ADD
    return n;
}

/* Rows r .. r+count−1 of expert x of matrix t where the engine holds them,
 * in t->dtype's block layout (the loader writes them there before the
 * engine interleaves its matrices for the VNNI kernels); a vector's
 * floats. */
static char *t_row(const tdesc *t, uint64_t x, uint64_t r)
{
    if (t->is_norm)
        return (char *)(t->vec + r * t->ne[0]);
    return (char *)t->v.m + (size_t)x * t->v.mat_bytes +
           (size_t)(t->v.r0 + (int64_t)r) * cal_k_row_bytes(t->dtype, (int)t->ne[0]);
}

/* The same row as the engine holds it now, in the block layout of
 * t->dtype, read through the engine's rows function (a matrix it holds
 * interleaved is unpacked into buf) */
static const char *t_read(const cal_gguf_source *e, const tdesc *t, uint64_t x, uint64_t r,
                          char *buf)
{
    if (t->is_norm)
        return t_row(t, x, r);
    return e->rows(e->engine, &t->v, (int)x, (int64_t)r, 1, buf);
}

/* ---- export ----------------------------------------------------------- */

typedef struct wbuf {
    FILE *f;
    int   err;
    uint64_t pos;
} wbuf;

static void w_bytes(wbuf *w, const void *p, size_t n)
{
    if (!w->err && fwrite(p, 1, n, w->f) != n)
        w->err = errno ? errno : EIO;
    w->pos += n;
}
static void w_u32(wbuf *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    w_bytes(w, b, 4);
}
static void w_u64(wbuf *w, uint64_t v)
{
    w_u32(w, (uint32_t)v);
    w_u32(w, (uint32_t)(v >> 32));
}
static void w_f32(wbuf *w, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    w_u32(w, u);
}
static void w_str(wbuf *w, const char *s)
{
    w_u64(w, strlen(s));
    w_bytes(w, s, strlen(s));
}
enum { G_U32 = 4, G_I32 = 5, G_F32 = 6, G_BOOL = 7, G_STRING = 8, G_ARRAY = 9 };
static void kv_u32(wbuf *w, const char *k, uint32_t v) { w_str(w, k); w_u32(w, G_U32); w_u32(w, v); }
static void kv_f32(wbuf *w, const char *k, float v) { w_str(w, k); w_u32(w, G_F32); w_f32(w, v); }
static void kv_str(wbuf *w, const char *k, const char *v) { w_str(w, k); w_u32(w, G_STRING); w_str(w, v); }
static void kv_bool(wbuf *w, const char *k, int v)
{
    uint8_t b = (uint8_t)(v != 0);
    w_str(w, k); w_u32(w, G_BOOL); w_bytes(w, &b, 1);
}

static void token_text(int id, char *out, size_t cap)
{
    if (id == 32)
        snprintf(out, cap, "\xe2\x96\x81");
    else if (id < 256)
        snprintf(out, cap, "<0x%02X>", id);
    else if (id == CAL_GGUF_EOS)
        snprintf(out, cap, "</s>");
    else if (id == CAL_GGUF_BOS)
        snprintf(out, cap, "<s>");
    else if (id == CAL_GGUF_UNK)
        snprintf(out, cap, "<unk>");
    else
        snprintf(out, cap, "[%d]", id);
}

/* llama.cpp's token types: 1 normal, 2 unknown, 3 control, 6 byte */
static int32_t token_type(int id)
{
    if (id == 32) return 1;
    if (id < 256) return 6;
    if (id == CAL_GGUF_EOS || id == CAL_GGUF_BOS) return 3;
    if (id == CAL_GGUF_UNK) return 2;
    return 1;
}

/* caliper's byte vocabulary (engine/gguf.h), 9 keys */
static void write_byte_vocab(wbuf *w, const cal_model_config *c)
{
    kv_str(w, "tokenizer.ggml.model", "llama");
    /* tokens, scores, types */
    w_str(w, "tokenizer.ggml.tokens");
    w_u32(w, G_ARRAY); w_u32(w, G_STRING); w_u64(w, (uint64_t)c->vocab);
    for (int i = 0; i < c->vocab; i++) {
        char tx[32];
        token_text(i, tx, sizeof tx);
        w_str(w, tx);
    }
    w_str(w, "tokenizer.ggml.scores");
    w_u32(w, G_ARRAY); w_u32(w, G_F32); w_u64(w, (uint64_t)c->vocab);
    for (int i = 0; i < c->vocab; i++)
        w_f32(w, 0.0f);
    w_str(w, "tokenizer.ggml.token_type");
    w_u32(w, G_ARRAY); w_u32(w, G_I32); w_u64(w, (uint64_t)c->vocab);
    for (int i = 0; i < c->vocab; i++)
        w_u32(w, (uint32_t)token_type(i));
    kv_u32(w, "tokenizer.ggml.eos_token_id", CAL_GGUF_EOS);
    kv_u32(w, "tokenizer.ggml.bos_token_id", CAL_GGUF_BOS);
    kv_u32(w, "tokenizer.ggml.unknown_token_id", CAL_GGUF_UNK);
    kv_bool(w, "tokenizer.ggml.add_bos_token", 0);
    kv_bool(w, "tokenizer.ggml.add_space_prefix", 0);
}

/* cal_gguf_write, each matrix in plan[its CAL_T_* kind] where plan is
 * not NULL */
static int write_gguf(const cal_gguf_source *e, const char *path, int dtype, const int *plan,
                      const cal_vocab *v, char *why, size_t why_len)
{
    if (!e || !path)
        return cal_why(why, why_len, CAL_EINVAL, "export: no engine or path");
    if ((dtype < 0 || dtype >= CAL_DTYPE_COUNT) && dtype != CAL_GGUF_MIX_Q4_K_M &&
        dtype != CAL_GGUF_AS_HELD)
        return cal_why(why, why_len, CAL_EINVAL, "dtype: %d is not an engine format", dtype);
    const cal_model_config *c = e->config;
    /* the formats the engine holds fit its rows already */
    int blk = dtype == CAL_GGUF_AS_HELD ? 1
              : cal_k_block_elems(dtype == CAL_GGUF_MIX_Q4_K_M ? CAL_DTYPE_Q4_K : dtype);
    if (blk > 1 && (c->dim % blk || c->ffn_dim % blk))
        return cal_why(why, why_len, CAL_EINVAL, "dtype: %s needs rows of a multiple of "
                       "%d values (dim %d, ffn %d)", dtype == CAL_GGUF_MIX_Q4_K_M ? "q4_k_m"
                       : cal_dtype_name(dtype), blk, c->dim, c->ffn_dim);
    if (!v && c->vocab < CAL_GGUF_UNK + 1)
        return cal_why(why, why_len, CAL_EINVAL, "vocab: %d is too small for the byte "
                    "vocabulary (needs %d)", c->vocab, CAL_GGUF_UNK + 1);
    if (v && v->n != c->vocab)
        return cal_why(why, why_len, CAL_EINVAL, "vocab: the model has %d rows, the "
                       "vocabulary %d tokens", c->vocab, (int)v->n);
    tdesc *t = calloc((size_t)MAX_TENSORS(c), sizeof *t);
    if (!t)
        return cal_why(why, why_len, CAL_ENOMEM, "export: out of memory");
    int nt = tensor_list(c, e, t);
    /* each tensor's format in the file */
    int *fdt = malloc((size_t)nt * sizeof *fdt);
    if (!fdt) {
        free(t);
        return cal_why(why, why_len, CAL_ENOMEM, "export: out of memory");
    }
    for (int i = 0; i < nt; i++) {
        fdt[i] = t[i].is_norm || !plan ? tensor_dtype(&t[i], dtype, c->n_layers) : plan[t[i].kind];
        /* the file's own rule: whole blocks of the format (F32, F16 and
         * BF16 take any row, a tiny model's 2 values included) */
        if (fdt[i] < 0 || fdt[i] >= CAL_DTYPE_COUNT ||
            t[i].ne[0] % (uint64_t)cal_k_block_elems(fdt[i]) != 0) {
            int rc = fdt[i] < 0 || fdt[i] >= CAL_DTYPE_COUNT
                     ? cal_why(why, why_len, CAL_EINVAL, "tensor %s: no format %d", t[i].name, fdt[i])
                     : cal_why(why, why_len, CAL_EINVAL, "tensor %s: %s takes rows of a multiple "
                               "of %d values, not %" PRIu64, t[i].name, cal_dtype_name(fdt[i]),
                               cal_k_block_elems(fdt[i]), t[i].ne[0]);
            free(fdt);
            free(t);
            return rc;
        }
    }
    char tmp[4096 + 16];
    int rc = CAL_OK;
    FILE *f = cal_open_replacement(path, tmp, sizeof tmp, why, why_len, &rc);
    if (!f) {
        free(fdt);
        free(t);
        return rc;
    }
    wbuf w = {f, 0, 0};
    /* a tied model's token_embd is its one matrix times the embedding scale,
     * output.weight the matrix itself: the key lets caliper hold it once
     * again (llama.cpp ignores it and reads both) */
    cal_model_weights mw;
    e->weights(e->engine, &mw);
    int scaled = c->tied_embeddings && mw.embed_scale != 1.0f;
    /* 14 general and shape keys (15 for qwen3moe), then the vocabulary:
     * caliper's byte vocabulary (9 keys) or the tokenizer.* pairs of the
     * given one as its file had them */
    int n_kv = 14 + (v ? (int)v->n_kv : 9) + (c->n_experts > 0 ? 2 : 0) +
               (c->arch == CAL_ARCH_QWEN3MOE) + scaled;
    w_bytes(&w, "GGUF", 4);
    w_u32(&w, 3);
    w_u64(&w, (uint64_t)nt);
    w_u64(&w, (uint64_t)n_kv);
    char name[96], key[96];
    snprintf(name, sizeof name, "caliper-%s", c->name);
    const char *an = cal_arch_name(c->arch);
    kv_str(&w, "general.architecture", an);
    kv_str(&w, "general.name", name);
    kv_u32(&w, "general.alignment", ALIGN);
    kv_u32(&w, "general.file_type", file_type_of(dtype != CAL_GGUF_AS_HELD ? dtype
                                                  : mixed_file_type(t, fdt, nt)));
    kv_u32(&w, (snprintf(key, sizeof key, "%s.context_length", an), key), (uint32_t)c->max_ctx);
    kv_u32(&w, (snprintf(key, sizeof key, "%s.embedding_length", an), key), (uint32_t)c->dim);
    kv_u32(&w, (snprintf(key, sizeof key, "%s.block_count", an), key), (uint32_t)c->n_layers);
    kv_u32(&w, (snprintf(key, sizeof key, "%s.feed_forward_length", an), key), (uint32_t)c->ffn_dim);
    kv_u32(&w, (snprintf(key, sizeof key, "%s.attention.head_count", an), key), (uint32_t)c->n_heads);
    kv_u32(&w, (snprintf(key, sizeof key, "%s.attention.head_count_kv", an), key), (uint32_t)c->n_kv_heads);
    kv_u32(&w, (snprintf(key, sizeof key, "%s.rope.dimension_count", an), key), (uint32_t)(c->dim / c->n_heads));
    kv_f32(&w, (snprintf(key, sizeof key, "%s.rope.freq_base", an), key), c->rope_theta);
    kv_f32(&w, (snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", an), key), c->norm_eps);
    kv_u32(&w, (snprintf(key, sizeof key, "%s.vocab_size", an), key), (uint32_t)c->vocab);
    if (c->n_experts > 0) {
        kv_u32(&w, (snprintf(key, sizeof key, "%s.expert_count", an), key), (uint32_t)c->n_experts);
        kv_u32(&w, (snprintf(key, sizeof key, "%s.expert_used_count", an), key), (uint32_t)c->top_k);
    }
    if (c->arch == CAL_ARCH_QWEN3MOE)   /* llama.cpp's qwen3moe reads the experts' width here */
        kv_u32(&w, (snprintf(key, sizeof key, "%s.expert_feed_forward_length", an), key),
               (uint32_t)c->ffn_dim);
    if (v)
        w_bytes(&w, v->kv, v->kv_len);
    else
        write_byte_vocab(&w, c);
    if (scaled)
        kv_f32(&w, "caliper.embedding_scale", mw.embed_scale);

    /* tensor directory */
    uint64_t off = 0;
    for (int i = 0; i < nt; i++) {
        w_str(&w, t[i].name);
        w_u32(&w, (uint32_t)t[i].n_dims);
        for (int d = 0; d < t[i].n_dims; d++)
            w_u64(&w, t[i].ne[d]);
        w_u32(&w, ggml_type_of(fdt[i]));
        w_u64(&w, off);
        off += t_elems(&t[i]) / t[i].ne[0] * cal_k_row_bytes(fdt[i], (int)t[i].ne[0]);
        off = (off + ALIGN - 1) / ALIGN * ALIGN;
    }
    static const uint8_t zeros[ALIGN];
    w_bytes(&w, zeros, (size_t)((ALIGN - w.pos % ALIGN) % ALIGN));

    /* data, one row at a time */
    size_t row_cap = 0;
    for (int i = 0; i < nt; i++)
        if (t[i].ne[0] > row_cap)
            row_cap = (size_t)t[i].ne[0];
    uint8_t *row = malloc(row_cap * 4);
    char *raw = malloc(row_cap * 4);
    float *fr = malloc(row_cap * sizeof *fr);
    if (!row || !raw || !fr) {
        free(row);
        free(raw);
        free(fr);
        fclose(f);
        unlink(tmp);
        free(fdt);
        free(t);
        return cal_why(why, why_len, CAL_ENOMEM, "export: out of memory");
    }
    uint64_t start = w.pos;
    for (int i = 0; i < nt && !w.err; i++) {
        int ft = fdt[i], n = (int)t[i].ne[0];
        for (uint64_t x = 0; x < t[i].ne[2]; x++)
            for (uint64_t r = 0; r < t[i].ne[1]; r++) {
                const char *src = t[i].is_norm ? t_row(&t[i], x, r)
                                               : t_read(e, &t[i], x, r, raw);
                if (ft == t[i].dtype && t[i].scale == 1.0f) {
                    /* the engine's own rows: written as they are */
                    w_bytes(&w, src, cal_k_row_bytes(ft, n));
                    continue;
                }
                cal_k_dequantize_row(t[i].dtype, src, fr, n);
                for (int k = 0; k < n; k++)
                    fr[k] *= t[i].scale;
                if (ft == CAL_DTYPE_F16) {
                    for (int k = 0; k < n; k++) {
                        uint16_t h = cal_k_f32_to_f16(fr[k]);
                        row[2 * k] = (uint8_t)h;
                        row[2 * k + 1] = (uint8_t)(h >> 8);
                    }
                } else {
                    /* F32, BF16 and Q8_0 blocks in this (little-endian)
                     * machine's layout, which is ggml's */
                    cal_k_quantize_row(ft, fr, row, n);
                }
                w_bytes(&w, row, cal_k_row_bytes(ft, n));
            }
        w_bytes(&w, zeros, (size_t)((ALIGN - (w.pos - start) % ALIGN) % ALIGN));
    }
    free(row);
    free(raw);
    free(fr);
    free(fdt);
    free(t);
    if (!w.err && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        w.err = errno ? errno : EIO;
    if (fclose(f) != 0 && !w.err)
        w.err = errno ? errno : EIO;
    if (!w.err && rename(tmp, path) != 0)
        w.err = errno ? errno : EIO;
    if (w.err) {
        unlink(tmp);
        return cal_why(why, why_len, CAL_EIO, "%s: %s", path, strerror(w.err));
    }
    return CAL_OK;
}


int cal_gguf_write(const cal_gguf_source *e, const char *path, int dtype, const cal_vocab *v,
                   char *why, size_t why_len)
{
    return write_gguf(e, path, dtype, NULL, v, why, why_len);
}

int cal_gguf_write_plan(const cal_gguf_source *e, const char *path, const int *plan,
                        char *why, size_t why_len)
{
    if (!plan)
        return cal_why(why, why_len, CAL_EINVAL, "export: no plan");
    return write_gguf(e, path, CAL_GGUF_AS_HELD, plan, NULL, why, why_len);
}

/* ---- import: is this a GGUF caliper can serve? --------------------------- */

static int check_tensors(const cal_gguf_model *m, const cal_model_config *c, char *why,
                         size_t why_len)
{
    tdesc *t = calloc((size_t)MAX_TENSORS(c), sizeof *t);
    if (!t)
        return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
    int nt = tensor_list(c, NULL, t), rc = CAL_OK;
    for (int i = 0; i < nt && rc == CAL_OK; i++) {
        const cal_gguf_tensor *g = cal_gguf_find(m, t[i].name);
        if (!g && !strcmp(t[i].name, "output.weight"))
            continue; /* tied: llama.cpp reuses token_embd */
        if (!g) {
            rc = cal_why(why, why_len, CAL_EINVAL, "tensor %s is missing", t[i].name);
            break;
        }
        if (!cal_gguf_reads(g->type))
            rc = cal_why(why, why_len, CAL_EINVAL, "tensor %s: type %s is not supported "
                      "(F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K "
                      "are)", g->name, cal_gguf_type_name(g->type));
        else if (g->ne[0] % (uint64_t)cal_gguf_type_block(g->type, NULL))
            rc = cal_why(why, why_len, CAL_EINVAL, "tensor %s: %s rows of %" PRIu64
                         " values (a multiple of %d is needed)", g->name,
                         cal_gguf_type_name(g->type), g->ne[0],
                         cal_gguf_type_block(g->type, NULL));
        else if (g->ne[0] != t[i].ne[0] || g->ne[1] != t[i].ne[1] || g->ne[2] != t[i].ne[2] ||
                 g->ne[3] != 1)
            rc = cal_why(why, why_len, CAL_EINVAL, "tensor %s: shape [%" PRIu64 ", %" PRIu64
                      ", %" PRIu64 "] where the header's sizes give [%" PRIu64 ", %" PRIu64
                      ", %" PRIu64 "]", g->name, g->ne[0], g->ne[1], g->ne[2], t[i].ne[0],
                      t[i].ne[1], t[i].ne[2]);
    }
    /* a tensor caliper would not use changes the function: refuse it */
    for (uint64_t j = 0; j < m->n_tensors && rc == CAL_OK; j++) {
        int known = 0;
        for (int i = 0; i < nt && !known; i++)
            known = !strcmp(m->tensors[j].name, t[i].name);
        if (!known)
            rc = cal_why(why, why_len, CAL_EINVAL, "tensor %s is not supported (caliper "
                      "serves llama (with Llama 3's rope_freqs), qwen2 with QKV biases, and "
                      "qwen3 and qwen3moe with Q and K norms)", m->tensors[j].name);
    }
    free(t);
    return rc;
}

/* Does caliper.embedding_scale still describe the file: is every
 * token_embd row output.weight's times the scale, within the rounding of the
 * file's formats (a hundredth of the row's largest value, Q8_0's step being
 * 1/127 of its block's; a sixth for the 4-bit formats, whose step is up to
 * 1/8 of the block's largest value with Q4_0's rounding to half of it, a
 * 12th for the 5-bit ones' 1/16, and a 25th for Q6_K's 1/32)? 1 yes; 0 no, or the file cannot be mapped. The
 * tensors' types and shapes are checked already. */
static int scaled_tied(const char *path, const cal_gguf_model *m, int n, int vocab, float s)
{
    const cal_gguf_tensor *te = cal_gguf_find(m, "token_embd.weight");
    const cal_gguf_tensor *to = cal_gguf_find(m, "output.weight");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < te->offset + te->bytes ||
        (uint64_t)st.st_size < to->offset + to->bytes) {
        close(fd);
        return 0;
    }
    size_t size = (size_t)st.st_size;
    const uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    float *a = malloc(2 * (size_t)n * sizeof *a);
    if (map == MAP_FAILED || !a) {
        if (map != MAP_FAILED)
            munmap((void *)map, size);
        free(a);
        return 0;
    }
    int same = 1;
    size_t rbe = cal_gguf_row_bytes(te->type, n), rbo = cal_gguf_row_bytes(to->type, n);
    float *b = a + n;
    uint32_t ty = te->type;
    int coarse = ty == CAL_GGUF_Q4_0 || ty == CAL_GGUF_Q4_1 || ty == CAL_GGUF_Q4_K ? 6
                 : ty == CAL_GGUF_Q5_0 || ty == CAL_GGUF_Q5_1 || ty == CAL_GGUF_Q5_K ? 12
                 : ty == CAL_GGUF_Q6_K ? 25 : 100;
    for (int r = 0; r < vocab && same; r++) {
        cal_gguf_row_f32(te->type, map + te->offset + (size_t)r * rbe, a, n);
        cal_gguf_row_f32(to->type, map + to->offset + (size_t)r * rbo, b, n);
        float amax = 0;
        for (int k = 0; k < n; k++)
            amax = fmaxf(amax, fabsf(b[k] * s));
        for (int k = 0; k < n && same; k++)
            same = fabsf(a[k] - b[k] * s) <= amax / (float)coarse;
    }
    free(a);
    munmap((void *)map, size);
    return same;
}

/* Can the engine encode path's own vocabulary (SentencePiece or BPE)?
 * CAL_OK yes; else the reader's error (CAL_EPROTO: the vocabulary is
 * malformed; CAL_EINVAL: a kind the engine does not encode), w saying why. */
static int own_vocab(const char *path, char *w, size_t wn)
{
    cal_vocab *v;
    char vw[200] = "";
    int rc = cal_vocab_read_file(path, &v, vw, sizeof vw);
    if (rc != CAL_OK) {
        /* the reader's message names the path first; keep the reason */
        const char *r = strncmp(vw, path, strlen(path)) ? vw : vw + strlen(path);
        snprintf(w, wn, "%s", r[0] == ':' ? r + 2 : r);
        return rc;
    }
    cal_vocab_free(&v);
    return CAL_OK;
}

/* One header value the engine narrows to int, against the engine's range
 * (cal_model_validate's): 1; or 0 with why naming the key, the value and
 * the range. The library reader has checked it is an integer up to 2^40. */
static int in_range(const char *path, const char *arch, const char *key, long v, long lo,
                    long hi, char *why, size_t why_len)
{
    if (v >= lo && v <= hi)
        return 1;
    cal_why(why, why_len, CAL_EINVAL, "%s: %s.%s is %ld, outside %ld..%ld (what the engine "
            "runs)", path, arch, key, v, lo, hi);
    return 0;
}

/* Every shape value the engine uses, before any of them is narrowed or
 * multiplied: a block_count of 2^32+4 was served as 4 layers, and
 * key_length × head_count overflowed. 1 in range; 0 with why. */
static int shape_in_range(const char *path, const cal_gguf_model *m, char *why, size_t why_len)
{
    const cal_model_shape *s = &m->shape;
    const char *a = s->arch;
    if (s->heads <= 0 || s->embedding <= 0) {
        cal_why(why, why_len, CAL_EINVAL, "%s: %s.%s is missing", path, a,
                s->heads <= 0 ? "attention.head_count" : "embedding_length");
        return 0;
    }
    if (!in_range(path, a, "block_count", s->layers, 1, 1024, why, why_len) ||
        !in_range(path, a, "embedding_length", s->embedding, 2, 65536, why, why_len) ||
        !in_range(path, a, "attention.head_count", s->heads, 1, s->embedding, why, why_len) ||
        !in_range(path, a, "attention.head_count_kv", s->kv_heads, 1, s->heads, why,
                  why_len) ||
        !in_range(path, a, "attention.key_length", s->k_dim, 1, s->embedding, why, why_len) ||
        !in_range(path, a, "attention.value_length", s->v_dim, 1, s->embedding, why,
                  why_len) ||
        !in_range(path, a, "expert_count", m->n_expert, 0, 1024, why, why_len))
        return 0;
    if (m->ffn <= 0 && m->ffn_exp <= 0) {
        cal_why(why, why_len, CAL_EINVAL, "%s: %s.feed_forward_length is missing", path, a);
        return 0;
    }
    if (m->ffn > 0 && !in_range(path, a, "feed_forward_length", m->ffn, 1, 1 << 20, why, why_len))
        return 0;
    if (m->ffn_exp > 0 &&
        !in_range(path, a, "expert_feed_forward_length", m->ffn_exp, 1, 1 << 20, why, why_len))
        return 0;
    if (m->n_expert > 0 &&
        !in_range(path, a, "expert_used_count", m->n_expert_used, 1, m->n_expert, why, why_len))
        return 0;
    if (m->rope_theta != 0 && !(m->rope_theta > 1)) {
        cal_why(why, why_len, CAL_EINVAL, "%s: %s.rope.freq_base is %g, outside (1, 1e12] "
                "(what the engine runs)", path, a, m->rope_theta);
        return 0;
    }
    if (m->norm_eps != 0 && !((float)m->norm_eps > 0)) {
        cal_why(why, why_len, CAL_EINVAL, "%s: %s.attention.layer_norm_rms_epsilon is %g, "
                "below the smallest float (about 1e-38)", path, a, m->norm_eps);
        return 0;
    }
    return 1;
}

int cal_gguf_model_config(const char *path, cal_model_config *out, char *why,
                          size_t why_len)
{
    cal_gguf_model m;
    char w[200];
    int rc = cal_gguf_read_model_file(path, &m, w, sizeof w);
    int no_file = rc == CAL_EIO || (rc == CAL_ENOTFOUND && access(path, R_OK) != 0);
    if (no_file)
        return cal_why(why, why_len, rc, "%s", w);  /* names the path already */
    if (rc != CAL_OK)
        return cal_why(why, why_len, CAL_EINVAL, "%s: %s", path, w);
    cal_model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "gguf");
    const cal_model_shape *s = &m.shape;
    int vrc = CAL_OK;
    rc = CAL_EINVAL;
    if (cal_arch_parse(s->arch) < 0 || strcmp(s->arch, cal_arch_name(cal_arch_parse(s->arch))))
        cal_why(why, why_len, rc, "%s: architecture \"%s\" is not supported (caliper serves "
             "\"llama\", with or without experts, dense \"qwen2\" and \"qwen3\", and \"qwen3moe\")", path,
             s->arch);
    else if ((strcmp(m.tok_model, "llama") || !m.byte_tokens) &&
             (vrc = own_vocab(path, w, sizeof w)) != CAL_OK)
        cal_why(why, why_len, rc, vrc == CAL_EPROTO ? "%s: the vocabulary (\"%s\") is "
                "malformed: %s" : "%s: vocabulary \"%s\" is not supported: %s", path,
                m.tok_model[0] ? m.tok_model : "(none)", w);
    else if (m.byte_tokens && !strcmp(m.tok_model, "llama") && m.eos != CAL_GGUF_EOS)
        cal_why(why, why_len, rc, "%s: tokenizer.ggml.eos_token_id is %ld: caliper's byte "
             "vocabulary has </s> at %d", path, m.eos, CAL_GGUF_EOS);
    else if (!shape_in_range(path, &m, why, why_len))
        ;   /* why says which key */
    else if (s->k_dim * s->heads != s->embedding || s->v_dim != s->k_dim)
        cal_why(why, why_len, rc, "%s: head sizes (key %ld, value %ld, %ld heads) do not "
             "divide embedding_length %ld evenly: not supported", path, s->k_dim, s->v_dim,
             s->heads, s->embedding);
    else if (m.rope_dims && m.rope_dims != s->k_dim)
        cal_why(why, why_len, rc, "%s: llama.rope.dimension_count %ld: partial RoPE is not "
             "supported (head size %ld)", path, m.rope_dims, s->k_dim);
    else if (m.ffn <= 0)
        cal_why(why, why_len, rc, "%s: %s.feed_forward_length is missing", path, s->arch);
    else
        rc = CAL_OK;
    if (rc == CAL_OK) {
        c.arch = cal_arch_parse(s->arch);
        c.dim = (int)s->embedding;
        c.n_layers = (int)s->layers;
        c.n_heads = (int)s->heads;
        c.n_kv_heads = (int)s->kv_heads;
        /* qwen3moe: an expert's width has its own key (llama.cpp: else
         * feed_forward_length ÷ experts used) */
        c.ffn_dim = c.arch != CAL_ARCH_QWEN3MOE ? (int)m.ffn
                    : m.ffn_exp > 0 ? (int)m.ffn_exp
                    : m.n_expert_used > 0 ? (int)(m.ffn / m.n_expert_used) : 0;
        c.n_experts = (int)m.n_expert;
        c.top_k = m.n_expert > 0 ? (int)m.n_expert_used : 0;
        c.vocab = (int)m.n_vocab;
        c.max_ctx = m.ctx_len > 0 ? (int)(m.ctx_len < 1 << 20 ? m.ctx_len : 1 << 20) : 2048;
        c.tied_embeddings = cal_gguf_find(&m, "output.weight") ? 0 : 1;
        c.rope_freqs = cal_gguf_find(&m, "rope_freqs.weight") != NULL;
        c.rope_theta = m.rope_theta > 0 ? (float)m.rope_theta : 10000.0f;
        c.norm_eps = m.norm_eps > 0 ? (float)m.norm_eps : 1e-5f;
        const char *bad = NULL;
        if (s->kv_heads_varies || cal_model_validate(&c, &bad) != CAL_OK)
            rc = cal_why(why, why_len, CAL_EINVAL, "%s: the model's %s is not one caliper's "
                      "engine can run", path, bad ? bad : "per-layer head_count_kv");
    }
    if (rc == CAL_OK) {
        rc = check_tensors(&m, &c, w, sizeof w);
        if (rc != CAL_OK)
            cal_why(why, why_len, rc, "%s: %s", path, w);
    }
    /* caliper's export of a tied model: its one matrix as output.weight,
     * token_embd that matrix scaled; held once, as the model that wrote it
     * held it, while the key still describes the file: the two in one
     * format, one within its rounding of the other (else the two are
     * served apart, each as stored, as llama.cpp serves them) */
    if (rc == CAL_OK && !c.tied_embeddings && m.embed_scale > 0 &&
        cal_gguf_find(&m, "token_embd.weight")->type ==
            cal_gguf_find(&m, "output.weight")->type &&
        scaled_tied(path, &m, c.dim, c.vocab, (float)m.embed_scale)) {
        c.tied_embeddings = 1;
        c.embed_scale = (float)m.embed_scale;
    }
    if (rc == CAL_OK && strlen(path) >= sizeof c.weights)
        rc = cal_why(why, why_len, CAL_EINVAL, "%s: path longer than %zu bytes", path,
                  sizeof c.weights - 1);
    if (rc == CAL_OK) {
        snprintf(c.weights, sizeof c.weights, "%s", path);
        c.as_stored = 1;
        *out = c;
    }
    cal_gguf_model_free(&m);
    return rc;
}

/* ---- load ------------------------------------------------------------ */

int cal_gguf_hold(uint32_t type, int64_t n_in, const cal_model_config *c)
{
    int dt = cal_gguf_dtype_of(type);
    if (!c->as_stored || dt < 0 || n_in % cal_dtype_row_unit(dt) != 0)
        return c->dtype;
    return dt;
}

/* The file's tensor that holds the rows of t, or NULL where the engine
 * reads none (the tied model's second name: a file without output.weight
 * keeps the matrix in token_embd; caliper's scaled export keeps it in
 * output.weight, token_embd its rows scaled) */
static const cal_gguf_tensor *source_tensor(const cal_gguf_model *m, const cal_model_config *c,
                                            const tdesc *t)
{
    const char *skip = !c->tied_embeddings ? NULL
                       : c->embed_scale > 0 ? "token_embd.weight" : "output.weight";
    if (skip && !strcmp(t->name, skip))
        return NULL;
    return cal_gguf_find(m, t->name);
}

int cal_gguf_held_dtypes(const cal_model_config *c, int *dts, char *why, size_t why_len)
{
    cal_gguf_model m;
    char w[200];
    int rc = cal_gguf_read_model_file(c->weights, &m, w, sizeof w);
    if (rc != CAL_OK)
        return cal_why(why, why_len, rc, "%s: %s", c->weights, w);
    tdesc *t = calloc((size_t)MAX_TENSORS(c), sizeof *t);
    if (!t) {
        cal_gguf_model_free(&m);
        return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
    }
    int nt = tensor_list(c, NULL, t);
    for (size_t i = 0; i < CAL_T_COUNT(c->n_layers); i++)
        dts[i] = c->dtype;
    for (int i = 0; i < nt && rc == CAL_OK; i++) {
        if (t[i].is_norm)
            continue;
        const cal_gguf_tensor *g = source_tensor(&m, c, &t[i]);
        if (!g)
            continue;
        if (g->ne[0] != t[i].ne[0] || g->ne[1] != t[i].ne[1] || g->ne[2] != t[i].ne[2]) {
            rc = cal_why(why, why_len, CAL_EINVAL, "%s: tensor %s changed since the header "
                         "was checked", c->weights, t[i].name);
            break;
        }
        dts[t[i].kind] = cal_gguf_hold(g->type, (int64_t)g->ne[0], c);
    }
    /* a tied model's one matrix */
    if (c->tied_embeddings)
        dts[CAL_T_EMB] = dts[CAL_T_OUT] = c->embed_scale > 0 ? dts[CAL_T_OUT] : dts[CAL_T_EMB];
    free(t);
    cal_gguf_model_free(&m);
    return rc;
}

/* n bytes at off of fd into p, however many reads it takes; 0, or −1 with
 * errno set (EIO where the file ends first) */
static int read_at(int fd, void *p, size_t n, uint64_t off)
{
    char *b = p;
    while (n > 0) {
        ssize_t r = pread(fd, b, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = EIO;
            return -1;
        }
        b += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Reading rows: straight into the engine's memory where it holds them as
 * stored (no second copy of the file in memory: read, not mapped), else a
 * run of them at a time through buf, each widened to F32 by llama.cpp's
 * dequantization and stored in the engine's format. */
enum { LOAD_BUF = 1 << 20 };
/* the buffer: at least one row of the widest format (F32) */
static size_t load_buf_bytes(int max_in)
{
    return (size_t)max_in * 4 > LOAD_BUF ? (size_t)max_in * 4 : LOAD_BUF;
}

static int load_tensor(int fd, const cal_gguf_tensor *g, const tdesc *t, char *buf, float *fr)
{
    int n = (int)t->ne[0], fdt = t->is_norm ? (g->type == CAL_GGUF_F32 ? CAL_DTYPE_F32 : -1)
                                           : cal_gguf_dtype_of(g->type);
    size_t frb = cal_gguf_row_bytes(g->type, n);
    uint64_t rows = t->ne[1], per = load_buf_bytes(n) / frb;
    for (uint64_t x = 0; x < t->ne[2]; x++) {
        uint64_t off = g->offset + x * rows * frb;
        if (fdt == t->dtype) {
            /* a tensor's rows lie one after the other in the engine too */
            if (read_at(fd, t_row(t, x, 0), rows * frb, off) != 0)
                return -1;
            continue;
        }
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint64_t k = rows - r0 < per ? rows - r0 : per;
            if (read_at(fd, buf, k * frb, off + r0 * frb) != 0)
                return -1;
            for (uint64_t r = 0; r < k; r++) {
                cal_gguf_row_f32(g->type, (const uint8_t *)buf + r * frb, fr, n);
                if (t->is_norm)
                    memcpy(t_row(t, x, r0 + r), fr, sizeof(float) * (size_t)n);
                else
                    cal_k_quantize_row(t->dtype, fr, t_row(t, x, r0 + r), n);
            }
        }
    }
    return 0;
}

int cal_gguf_read_weights(const cal_gguf_source *e, char *why, size_t why_len)
{
    const cal_model_config *c = e->config;
    const char *path = c->weights;
    cal_gguf_model m;
    char w[200];
    int rc = cal_gguf_read_model_file(path, &m, w, sizeof w);
    if (rc != CAL_OK)
        return cal_why(why, why_len, rc, "%s: %s", path, w);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = cal_why(why, why_len, CAL_EIO, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        cal_gguf_model_free(&m);
        return rc;
    }
    uint64_t size = (uint64_t)st.st_size;
    tdesc *t = calloc((size_t)MAX_TENSORS(c), sizeof *t);
    int max_in = c->dim > c->ffn_dim ? c->dim : c->ffn_dim;
    char *buf = malloc(load_buf_bytes(max_in));
    float *fr = malloc((size_t)max_in * sizeof *fr);
    if (!t || !buf || !fr) {
        free(t);
        free(buf);
        free(fr);
        close(fd);
        cal_gguf_model_free(&m);
        return cal_why(why, why_len, CAL_ENOMEM, "out of memory");
    }
    int nt = tensor_list(c, e, t);
    for (int i = 0; i < nt && rc == CAL_OK; i++) {
        const char *nm = t[i].name;
        if (!cal_gguf_find(&m, nm) && !strcmp(nm, "output.weight") && c->tied_embeddings)
            continue;
        const cal_gguf_tensor *g = source_tensor(&m, c, &t[i]);
        if (!g && cal_gguf_find(&m, nm))
            continue;   /* the tied model's second name */
        size_t frb = g ? cal_gguf_row_bytes(g->type, (int)t[i].ne[0]) : 0;
        if (!g || !cal_gguf_reads(g->type) || frb == 0 ||
            g->ne[0] != t[i].ne[0] || g->ne[1] != t[i].ne[1] || g->ne[2] != t[i].ne[2] ||
            g->offset > size || t[i].ne[1] * t[i].ne[2] > (size - g->offset) / frb) {
            rc = cal_why(why, why_len, CAL_EINVAL, "%s: tensor %s changed since the header "
                      "was checked", path, nm);
            break;
        }
        if (load_tensor(fd, g, &t[i], buf, fr) != 0)
            rc = cal_why(why, why_len, CAL_EIO, "%s: tensor %s: %s", path, nm, strerror(errno));
    }
    free(t);
    free(buf);
    free(fr);
    close(fd);
    cal_gguf_model_free(&m);
    return rc;
}
