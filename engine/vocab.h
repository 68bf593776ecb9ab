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
                               longest first; [n_special] */
    int       n_special;
    int32_t   byte_id[256]; /* the id standing for a raw byte; -1 none */
    char     *dpool;        /* decoded pieces (control tokens as their text) */
    uint32_t *doff, *dlen;  /* [n] */
    /* the tokenizer.* key/value pairs as the file had them, for an export */
    uint8_t  *kv;
    size_t    kv_len;
    uint64_t  n_kv;
    void     *re;           /* BPE: the compiled pre-tokenizer (pcre2_code,
                               engine/pretok.c) */
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

/* Encoders. Each appends the ids of text[n] (one fragment, no special
 * tokens in it) to ids at *count, never past cap (CAL_ETOOBIG); CAL_ENOMEM;
 * CAL_EINVAL for text the BPE pre-tokenizer cannot take (a code point above
 * U+10FFFF). SPM expects the text escaped already ("▁" for spaces). */
int cal_spm_encode(const cal_vocab *v, const char *text, size_t n, int32_t *ids, int cap,
                   int *count);
int cal_bpe_encode(const cal_vocab *v, const char *text, size_t n, int32_t *ids, int cap,
                   int *count);

#endif
