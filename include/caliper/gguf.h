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

#endif
