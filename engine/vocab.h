/* caliper reference engine — a model's own vocabulary, read from the
 * tokenizer.* keys of a GGUF file (llama.cpp's layout): the token texts,
 * scores and types, BPE merges, the special ids and flags. The SentencePiece
 * ("llama") and byte-level BPE ("gpt2") encoders (engine/tok_spm.c,
 * engine/tok_bpe.c) work on it. Internal to the engine: the public face is
 * cal_tok_open_gguf in engine/engine.h.
 *
 * The file is outside input: every length and count is checked against what
 * is left of the buffer, and a failure names the key and the value. */
#ifndef CALIPER_ENGINE_VOCAB_H
#define CALIPER_ENGINE_VOCAB_H
#include <stddef.h>
#include <stdint.h>
#include "engine/pretok.h"

enum { CAL_VOCAB_SPM = 1, CAL_VOCAB_BPE = 2 };
/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type) */
enum { CAL_TT_UNDEFINED = 0, CAL_TT_NORMAL = 1, CAL_TT_UNKNOWN = 2, CAL_TT_CONTROL = 3,
       CAL_TT_USER_DEFINED = 4, CAL_TT_UNUSED = 5, CAL_TT_BYTE = 6 };

/* Longest token text accepted, in bytes; a decoded piece is never longer. */
#define CAL_VOCAB_TOKEN_MAX 512

typedef struct cal_vocab {
    int      kind;          /* CAL_VOCAB_SPM or CAL_VOCAB_BPE */
    int      pre;           /* CAL_PRE_* (BPE only) */
    char     model[32];     /* tokenizer.ggml.model */
    char     pre_name[64];  /* tokenizer.ggml.pre; "" absent */
    int32_t  n;             /* tokens */
    char    *pool;          /* token texts, back to back */
    uint32_t *off, *len;    /* [n]: text of id i is pool + off[i], len[i] bytes */
    uint32_t  max_len;      /* the longest text: no token stands for more
                               bytes of the input */
    float    *score;        /* [n] */
    uint8_t  *type;         /* [n] CAL_TT_* */
    uint32_t *tab;          /* text -> id + 1, open addressing; 0 empty */
    uint32_t  tmask;
    /* BPE merges "left right", rank = index */
    uint32_t  n_merges;
    char     *mpool;
    uint32_t *moff, *mlen;  /* [n_merges] */
    uint32_t *mtab;         /* merge text -> rank + 1 */
    uint32_t  mmask;
    int32_t   bos, eos, unk, pad;   /* -1 none */
    int       add_bos, add_eos, add_space_prefix;
    int       ignore_merges;        /* llama3: a pre-token in the vocabulary is one id */
    int32_t  *special;      /* ids matched as whole strings before splitting,
                               longest first, ties by id; [n_special] */
    int       n_special;
    struct cal_slen *slen;  /* the specials grouped by length, longest first,
                               each with a table of its texts
                               (engine/tok_special.c); [n_slen] */
    int       n_slen;
    int32_t   byte_id[256]; /* the id standing for a raw byte; -1 none */
    char     *dpool;        /* decoded pieces (control tokens as their text) */
    uint32_t *doff, *dlen;  /* [n] */
    /* the tokenizer.* key/value pairs as the file had them, for an export */
    uint8_t  *kv;
    size_t    kv_len;
    uint64_t  n_kv;
    void     *re;           /* BPE: the compiled pre-tokenizer (pcre2_code,
                               engine/pretok.c) */
    char      note[512];    /* what the file had wrong that was replaced (a
                               special id out of range, a flag of the wrong
                               type) and what is used instead; "" none */
} cal_vocab;

/* Read the vocabulary from a GGUF file in buf[len] (the header is enough).
 * CAL_OK and *out (free with cal_vocab_free); CAL_EPROTO for a malformed
 * file; CAL_EINVAL for a vocabulary this engine cannot encode (a model or
 * pre-tokenizer it does not know, a missing key); CAL_ENOMEM. why gets one
 * line. *out is NULL on failure. */
int  cal_vocab_read_mem(const void *buf, size_t len, cal_vocab **out, char *why,
                        size_t why_len);
/* The same from a file (mapped read-only). CAL_EIO when it cannot be read. */
int  cal_vocab_read_file(const char *path, cal_vocab **out, char *why, size_t why_len);
void cal_vocab_free(cal_vocab **v);

/* The id whose text is s[n], or -1. */
int32_t cal_vocab_find(const cal_vocab *v, const char *s, size_t n);
/* The rank of merging a[an] with b[bn], or -1 when no merge joins them. */
int32_t cal_vocab_rank(const cal_vocab *v, const char *a, size_t an, const char *b,
                       size_t bn);

/* A piece of the text to encode: a special token matched whole, or the
 * text between two of them. */
typedef struct cal_frag {
    int32_t id;        /* the special token; -1 for text */
    size_t  off, len;  /* text: its bytes in the input */
} cal_frag;

/* Group v->special by length and index each group's texts (vocab.c calls
 * it once the specials are sorted). CAL_ENOMEM. Freed by cal_vocab_free. */
int  cal_special_index(cal_vocab *v);
void cal_special_free(cal_vocab *v);
/* Split text[n] at the special tokens, as llama.cpp's
 * tokenizer_st_partition does: the longest token first (ties by id), each
 * taking its leftmost non-overlapping occurrences in the text the ones
 * before it left; control and unknown tokens only when parse_special. In
 * time linear in n for a given vocabulary (one pass per distinct length of
 * special token). *out (malloc'd, the caller frees) gets *nout fragments in
 * text order; n == 0 gives none. CAL_ENOMEM. */
int  cal_special_split(const cal_vocab *v, const char *text, size_t n, int parse_special,
                       cal_frag **out, size_t *nout);

/* Encoders. Each appends the ids of the fragments f[nf] of text (special
 * tokens as their id, the text between them encoded) to ids at *count,
 * never past cap (CAL_ETOOBIG, as soon as the ids no longer fit);
 * CAL_ENOMEM; CAL_EINVAL for text the vocabulary cannot encode (a BPE code
 * point above U+10FFFF, an SPM byte without a byte token). Buffers are
 * allocated once for the longest fragment, so the cost is linear in the
 * text (n log n in the longest run of merges) however many fragments the
 * special tokens cut it into. SPM escapes spaces ("▁") and adds the prefix
 * space itself. */
int cal_spm_encode(const cal_vocab *v, const char *text, const cal_frag *f, size_t nf,
                   int32_t *ids, int cap, int *count);
int cal_bpe_encode(const cal_vocab *v, const char *text, const cal_frag *f, size_t nf,
                   int32_t *ids, int cap, int *count);

#endif
