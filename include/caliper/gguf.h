/* caliper — a model's shape, as far as its KV cache size goes, read from the
 * files people already have: a GGUF file's header (llama.cpp's format) or a
 * Hugging Face config.json. Both are outside input: every length is checked
 * against what is left, nothing is trusted, reads are bounded, and a failure
 * says where and why. Nothing here allocates more than a small fixed amount
 * (config.json: the parsed JSON, capped at 8 MiB of text).
 *
 * GGUF (v2 and v3, little-endian): magic "GGUF", uint32 version, uint64
 * tensor count, uint64 metadata count, then typed key/value pairs (uint64
 * length-prefixed strings, arrays of any type). Only the header is read;
 * tensor data is never touched. */
#ifndef CALIPER_GGUF_H
#define CALIPER_GGUF_H
#include <stddef.h>
#include <stdint.h>

typedef struct cal_model_shape {
    char   source[16];     /* "gguf" or "config.json" */
    char   arch[64];       /* "llama", "qwen2", "LlamaForCausalLM"; "" unknown */
    char   name[128];      /* general.name / _name_or_path; "" unknown */
    long   layers;         /* transformer blocks */
    long   heads;          /* attention (query) heads; 0 unknown */
    long   kv_heads;       /* key/value heads (the largest, if per layer) */
    long   k_dim;          /* key head dimension */
    long   v_dim;          /* value head dimension */
    long   embedding;      /* hidden size; 0 unknown */
    double dtype_bits;     /* weights' dtype in bits (torch_dtype); 0 unknown */
    int    kv_heads_varies;/* 1: head_count_kv was a per-layer array */
    uint64_t n_tensors;    /* GGUF tensor count; 0 for config.json */
    uint64_t n_kv;         /* GGUF metadata pairs read */
} cal_model_shape;

/* Parse a GGUF header from buf[len]. On success fills *out (CAL_OK).
 * CAL_EPROTO: not GGUF, an unsupported version, a length or count running
 * past the end, an unknown type, nesting deeper than 4;
 * CAL_ENOTFOUND: a key the shape needs is missing ("llama.block_count").
 * why[why_len] (may be NULL) gets one line naming the offset, the field and
 * the value. *out is untouched on failure. */
int cal_gguf_read_mem(const void *buf, size_t len, cal_model_shape *out,
                      char *why, size_t why_len);
/* The same from a file, reading only the header (the file may be GBs).
 * CAL_ENOTFOUND / CAL_EIO when it cannot be opened or read. */
int cal_gguf_read_file(const char *path, cal_model_shape *out, char *why,
                       size_t why_len);

/* Parse a Hugging Face config.json from buf[len]: num_hidden_layers,
 * num_attention_heads, num_key_value_heads (default: = heads), head_dim
 * (default: hidden_size ÷ heads), torch_dtype (or dtype); a nested
 * "text_config" is used when the top level has no num_hidden_layers.
 * CAL_EPROTO: not JSON or not an object; CAL_ENOTFOUND: a needed field is
 * missing; CAL_ERANGE: a field is not a positive integer or the sizes do not
 * divide. */
int cal_hfconfig_read_mem(const char *buf, size_t len, cal_model_shape *out,
                          char *why, size_t why_len);
int cal_hfconfig_read_file(const char *path, cal_model_shape *out, char *why,
                           size_t why_len);

/* ---- the whole header: what a loader needs -----------------------------
 * cal_gguf_read_model_* read the same header plus the scalar keys a llama
 * style loader needs, a summary of the tokenizer and the tensor directory.
 * Tensor data is still never read: offsets are checked against the file
 * size, and the caller maps the bytes itself. */

enum { CAL_GGUF_F32 = 0, CAL_GGUF_F16 = 1, CAL_GGUF_Q4_0 = 2, CAL_GGUF_Q4_1 = 3,
       CAL_GGUF_Q5_0 = 6, CAL_GGUF_Q5_1 = 7, CAL_GGUF_Q8_0 = 8, CAL_GGUF_Q4_K = 12,
       CAL_GGUF_Q5_K = 13, CAL_GGUF_Q6_K = 14, CAL_GGUF_BF16 = 30 }; /* ggml types */

typedef struct cal_gguf_tensor {
    char     name[64];     /* "blk.0.attn_q.weight" */
    uint32_t n_dims;       /* 1..4 */
    uint64_t ne[4];        /* ne[0] innermost (the row length); unused are 1 */
    uint32_t type;         /* ggml type: CAL_GGUF_F32, CAL_GGUF_F16, others */
    uint64_t offset;       /* bytes from the start of the file */
    uint64_t bytes;        /* 0 when the type's size is unknown here */
} cal_gguf_tensor;

#define CAL_GGUF_TEMPLATE_MAX (256u << 10)   /* a chat template's bytes, at most */

typedef struct cal_gguf_model {
    cal_model_shape shape;
    long   ffn;            /* <arch>.feed_forward_length; 0 absent */
    long   n_expert;       /* <arch>.expert_count; 0 absent */
    long   n_expert_used;  /* <arch>.expert_used_count; 0 absent */
    long   ffn_exp;        /* <arch>.expert_feed_forward_length (qwen3moe: one
                              expert's FFN width); 0 absent */
    long   ctx_len;        /* <arch>.context_length; 0 absent */
    double rope_theta;     /* <arch>.rope.freq_base; 0 absent */
    double norm_eps;       /* <arch>.attention.layer_norm_rms_epsilon; 0 absent */
    long   rope_dims;      /* <arch>.rope.dimension_count; 0 absent */
    char   tok_model[32];  /* tokenizer.ggml.model; "" absent */
    char  *chat_template;  /* tokenizer.chat_template (malloc'd, freed by
                              cal_gguf_model_free), NUL-terminated after its
                              chat_template_len bytes, which may hold NULs;
                              NULL absent, "" when over CAL_GGUF_TEMPLATE_MAX */
    uint64_t chat_template_len; /* its length in the file, bytes */
    long   n_vocab;        /* length of tokenizer.ggml.tokens; 0 absent */
    int    byte_tokens;    /* 1: ids 0..255 are the bytes "<0x00>".."<0xFF>"
                              (id 32 may be SentencePiece's space "\u2581") */
    long   eos, bos;       /* tokenizer.ggml.eos/bos_token_id; -1 absent */
    double embed_scale;    /* caliper.embedding_scale: token_embd is output.weight
                              times this (caliper's export of a tied model);
                              0 absent */
    uint64_t alignment;    /* general.alignment, default 32 */
    uint64_t data_offset;  /* where tensor data starts */
    uint64_t n_tensors;
    cal_gguf_tensor *tensors; /* [n_tensors], malloc'd: cal_gguf_model_free */
} cal_gguf_model;

/* CAL_OK and *out filled (free with cal_gguf_model_free), or the errors of
 * cal_gguf_read_mem plus CAL_EPROTO for a tensor directory that does not fit
 * (a name too long, more than 4 dims, data past the end) and CAL_ENOMEM.
 * *out is zeroed on failure. */
int  cal_gguf_read_model_mem(const void *buf, size_t len, cal_gguf_model *out,
                             char *why, size_t why_len);
int  cal_gguf_read_model_file(const char *path, cal_gguf_model *out, char *why,
                              size_t why_len);
void cal_gguf_model_free(cal_gguf_model *m);
/* The tensor called name, or NULL. */
const cal_gguf_tensor *cal_gguf_find(const cal_gguf_model *m, const char *name);
/* "F32", "F16", "Q8_0", ... for a ggml type id; "unknown" beyond the table. */
const char *cal_gguf_type_name(uint32_t type);
/* A ggml type's values per block, and its bytes per block in *bytes (NULL:
 * not wanted); 0 (and *bytes 0) for a type whose layout is not known here. */
unsigned cal_gguf_type_block(uint32_t type, unsigned *bytes);

#endif
