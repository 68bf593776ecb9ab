/* caliper reference engine — a decoder-only transformer computed for real on
 * the CPU (RMSNorm, RoPE, grouped-query attention over a KV cache, SwiGLU MLP,
 * and a Qwen3-MoE style mixture of experts; dense layers in the llama, qwen2
 * or qwen3 architecture), weights in F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q4_K, Q5_K or Q6_K
 * generated deterministically from a seed. Decode-sized products (≤ 16 rows)
 * run the engine's own kernels, one weight pass for the whole batch; larger
 * ones go through OpenBLAS (other formats dequantized a tile at a time).
 *
 * Ownership: cal_engine_open allocates everything once (weights, KV cache for
 * max_seqs slots × max_ctx positions, activations for the largest step);
 * cal_engine_close frees it and NULLs the caller's pointer. Nothing allocates
 * per token. An engine is used by one thread at a time (the scheduler's).
 *
 * Threads: each engine runs a pool of as many threads as OpenBLAS was set to
 * use when the first engine opened (openblas_set_num_threads before open, or
 * OPENBLAS_NUM_THREADS; default all cores) and splits every matrix product
 * and the attention across them, with OpenBLAS single-threaded inside each
 * part while any engine is open; the last close restores the setting. Open
 * and close engines from one thread. */
#ifndef CALIPER_ENGINE_H
#define CALIPER_ENGINE_H
#include <stddef.h>
#include <stdint.h>

typedef struct cal_model_config {
    char     name[32];      /* preset name or "custom" */
    int      dim;           /* model width */
    int      n_layers;
    int      n_heads;       /* query heads; head_dim = dim / n_heads */
    int      n_kv_heads;    /* key/value heads (GQA: n_heads % n_kv_heads == 0) */
    int      ffn_dim;       /* SwiGLU hidden width (per expert for MoE) */
    int      n_experts;     /* 0 = dense MLP */
    int      top_k;         /* experts active per token (MoE only) */
    int      vocab;         /* vocabulary size: sets embedding and logits cost */
    int      max_ctx;       /* positions per sequence (KV cache depth) */
    int      tied_embeddings; /* output projection shares the embedding matrix */
    float    rope_theta;
    float    norm_eps;
    uint64_t seed;          /* weights are a pure function of (shape, seed) */
    int      dtype;         /* CAL_DTYPE_*: the matrices' format (norms stay F32) */
    char     weights[256];  /* a GGUF file to read the weights from instead
                               (engine/gguf.h); "" = synthetic from seed */
    float    embed_scale;   /* the embedding row enters the stream times this;
                               0: the engine's own for synthetic weights, 1 for
                               a GGUF file's (set for caliper's export of a
                               tied model, whose token_embd is scaled) */
    int      arch;          /* CAL_ARCH_*: 0 llama */
    /* Llama 3's RoPE frequency scaling: frequency i of a head turns at
     * θ^(−2i/head_dim) ÷ factor[i]. rope_freqs 1: the model carries the
     * head_dim/2 factors (GGUF's rope_freqs.weight, llama only); a GGUF
     * file's are read from it, synthetic weights take Llama 3's rule
     * (cal_rope_llama3_factors) with the parameters below. */
    int      rope_freqs;
    float    rope_factor;     /* the low frequencies' divisor (Llama 3.2: 32) */
    float    rope_low_freq, rope_high_freq;  /* (1, 4) */
    int      rope_orig_ctx;   /* the context they were trained on (8192) */
    /* With weights (a GGUF file): 1 holds each matrix in the file's own
     * format where the engine computes in it and the rows fit its kernels
     * (cal_gguf_hold, engine/gguf.h), every other matrix in dtype; 0
     * converts every matrix to dtype. */
    int      as_stored;
} cal_model_config;

/* Llama 3's rule (Hugging Face's "llama3" rope_type, as llama.cpp's
 * converter writes rope_freqs.weight): for frequency i of a head of hd,
 * wavelength λ = 2π θ^(2i/hd); factor 1 where λ < orig_ctx ÷ high_freq,
 * `factor` where λ > orig_ctx ÷ low_freq, and between them
 * 1 ÷ ((1 − s) ÷ factor + s), s = (orig_ctx ÷ λ − low_freq) ÷ (high_freq −
 * low_freq). Writes out[hd/2]. */
void cal_rope_llama3_factors(const cal_model_config *c, int hd, float *out);

/* Architectures. llama: RoPE on adjacent pairs, dense or with experts
 * (Mixtral's layout). qwen2: biases on Q, K and V. qwen3: RMSNorm over each
 * head of Q and of K (one [head_dim] weight each, shared by the heads)
 * before RoPE. qwen3moe: qwen3's attention with experts only (no dense FFN:
 * ffn_dim is one expert's width, GGUF's expert_feed_forward_length). The
 * qwen ones use llama.cpp's NeoX RoPE, which rotates element i of a head
 * with element i + head_dim/2. */
enum { CAL_ARCH_LLAMA = 0, CAL_ARCH_QWEN2, CAL_ARCH_QWEN3, CAL_ARCH_QWEN3MOE, CAL_ARCH_COUNT };
/* 1: the architecture has qwen3's per-head Q/K RMSNorm */
#define CAL_ARCH_QK_NORM(a) ((a) == CAL_ARCH_QWEN3 || (a) == CAL_ARCH_QWEN3MOE)
/* "llama", "qwen2", "qwen3", "qwen3moe" (GGUF's general.architecture); NULL
 * for an unknown value. */
const char *cal_arch_name(int arch);
/* The CAL_ARCH_* named s (case-insensitive), or −1. */
int  cal_arch_parse(const char *s);

/* Weight formats of the matrices (embedding, projections, experts, router,
 * output). F16 and BF16 hold each weight in 2 bytes; Q8_0 is llama.cpp's
 * block layout, 32 int8 and one F16 scale (34 bytes per 32 weights), and
 * needs dim and ffn_dim divisible by 32 (so do F16 and BF16, for the vector
 * kernels). Products sum in F32 over the dequantized weights. */
enum { CAL_DTYPE_F32 = 0, CAL_DTYPE_F16, CAL_DTYPE_BF16, CAL_DTYPE_Q8_0, CAL_DTYPE_Q4_0,
       CAL_DTYPE_Q4_K, CAL_DTYPE_Q6_K, CAL_DTYPE_Q4_1, CAL_DTYPE_Q5_0, CAL_DTYPE_Q5_1,
       CAL_DTYPE_Q5_K, CAL_DTYPE_COUNT };
/* Q4_0 (32 weights in 18 bytes), Q4_1 (in 20), Q5_0 (22), Q5_1 (24), Q4_K
 * (256 in 144), Q5_K (256 in 176) and Q6_K (256 in 210) are llama.cpp's
 * layouts too (engine/kernels.h), as GGUF files store them; the 32-weight
 * ones need dim and ffn_dim divisible by 32, the K-quants by 256. Their
 * products round X as llama.cpp's do (kernels.h: Q8_0 blocks for the
 * 32-weight formats, Q8_K for the K-quants), except Q4_0's decode-sized
 * cal_k_matmul, which takes X in F32.
 * "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_1", "q5_0",
 * "q5_1", "q5_k"; NULL for an unknown value. */
const char *cal_dtype_name(int dtype);
/* The CAL_DTYPE_* named s (case-insensitive), or −1. */
int  cal_dtype_parse(const char *s);
/* Bytes per weight: 4, 2, 2, 34/32, 18/32, 144/256, 210/256, 20/32, 22/32,
 * 24/32, 176/256. 0 for an unknown value. */
double cal_dtype_bytes_per_weight(int dtype);
/* The row length every matrix of a format must be a multiple of: whole
 * blocks, and 32 for F16 and BF16 (their vector kernels' step). */
int cal_dtype_row_unit(int dtype);

/* Fill *out with a preset: "tiny" (< 5 M params), "small" (25–50 M), "base"
 * (dim 768, 12 layers, 12 heads, 4 KV heads, FFN 2048, vocab 32000, tied),
 * "moe" (dim 512, 8 layers, 8 experts of FFN 1024, top-2, vocab 151936);
 * all F32 (set dtype after).
 * CAL_ENOTFOUND for an unknown name. */
int  cal_model_preset(const char *name, cal_model_config *out);
/* CAL_EINVAL with a field name in *why (static string) when a shape is
 * impossible (heads not dividing dim, top_k > n_experts, ...). */
int  cal_model_validate(const cal_model_config *c, const char **why);
int64_t cal_model_n_params(const cal_model_config *c);
/* Bytes of weights read for one decode token (all dense weights, top_k
 * experts' weights, the output projection) in the config's dtype. The
 * bandwidth roofline's input. */
int64_t cal_model_decode_bytes_per_token(const cal_model_config *c);
/* Multiply-add FLOPs (2 per MAC) for one token at context position pos. */
double  cal_model_flops_per_token(const cal_model_config *c, int pos);
/* KV cache bytes per token: 2 × layers × kv_heads × head_dim × 4 (F32). */
int64_t cal_model_kv_bytes_per_token(const cal_model_config *c);

typedef struct cal_engine cal_engine;

/* Allocate and generate the model; max_seqs KV slots of max_ctx positions;
 * max_step_tokens bounds the tokens of one cal_engine_step call (prefill
 * chunk plus decodes). CAL_EINVAL for a bad config, CAL_ENOMEM. */
int  cal_engine_open(const cal_model_config *c, int max_seqs, int max_step_tokens,
                     cal_engine **out);
void cal_engine_close(cal_engine **e);
const cal_model_config *cal_engine_config(const cal_engine *e);
/* Bytes the open engine holds: its weights (every matrix in its own format,
 * norms in F32, each tensor padded to 64 bytes), and its KV cache as
 * reserved (max_seqs × max_ctx positions, each slot's keys and values
 * rounded up to whole pages, 2 MiB ones from 1 MiB up; pages are touched only as positions fill, a
 * sequence's in its own slot only). */
size_t cal_engine_weight_bytes(const cal_engine *e);
size_t cal_engine_kv_bytes(const cal_engine *e);
/* Matrix weights (not bytes) the engine holds in format dtype; 0 for an
 * unknown value. */
int64_t cal_engine_params_held(const cal_engine *e, int dtype);
/* Weight bytes read for one decode token, each matrix in the format the
 * engine holds it in (cal_model_decode_bytes_per_token for an engine whose
 * matrices are all in config.dtype). */
int64_t cal_engine_decode_bytes_per_token(const cal_engine *e);

/* One entry of a step: n_tokens new tokens of the sequence in KV slot `slot`,
 * at positions pos .. pos+n_tokens−1 (a prefill chunk when n_tokens > 1, a
 * decode when 1). If logits is non-NULL it receives vocab floats for the
 * entry's last token. */
typedef struct cal_step_entry {
    int            slot;
    int            pos;
    int            n_tokens;
    const int32_t *tokens;   /* [n_tokens] */
    float         *logits;   /* [vocab] or NULL */
} cal_step_entry;

/* Run one forward step over all entries together: one pass over the weights
 * serves every sequence in the step (continuous batching's unit of work).
 * CAL_EINVAL for a slot/pos/token out of range or too many tokens. */
int  cal_engine_step(cal_engine *e, const cal_step_entry *entries, int n_entries);
/* Step rules beyond the ranges: a slot appears at most once per step, and pos
 * is at most the number of positions the slot already holds (pos 0 starts the
 * slot over; pos < held rewinds it). A failed step changes nothing. */

/* The last failed step's reason, naming the field and the value
 * ("slot: 9 is outside 0..7"); "" after a successful step. Owned by e. */
const char *cal_engine_last_error(const cal_engine *e);
/* The limits the engine was opened with. */
int  cal_engine_max_seqs(const cal_engine *e);
int  cal_engine_max_step_tokens(const cal_engine *e);

/* Per-op profile: time, calls, FLOPs and bytes moved per op kind since open
 * or the last reset. JSON format documented in docs/profile.md. The string is
 * malloc'd; the caller frees it. */
char *cal_engine_profile_json(const cal_engine *e);
void  cal_engine_profile_reset(cal_engine *e);

/* OpenBLAS picks its kernels once, when it is loaded, from the CPU model; a
 * CPU newer than the library can be taken for a generic one (this machine's
 * AVX-512 Xeon runs as "Prescott", SSE3, at a quarter of the speed).
 * cal_engine_blas_core: the kernel set in use. cal_engine_blas_coretype_advice:
 * the OPENBLAS_CORETYPE value that would give this CPU its proper kernels
 * ("SkylakeX", "Haswell"), or NULL when the choice is already right. A
 * command can set it in the environment and re-execute itself before any
 * engine exists; the library never does. */
const char *cal_engine_blas_core(void);
const char *cal_engine_blas_coretype_advice(void);

/* The engine's own kernels, chosen at run time from cpuid (the build targets
 * the baseline x86-64 unless built with NATIVE=1): writes to buf (at most n
 * bytes, NUL-terminated, cut short if n is too small) one line such as
 * "decode avx512+vnni, element-wise avx512, bf16 prefill avx512bf16" or
 * "decode portable, element-wise avx2, bf16 prefill portable"; returns buf. */
char *cal_engine_kernels(char *buf, size_t n);

/* ---- tokenizer: lossless for any byte string ------------------------------
 * Ids 0..255 are the bytes. Ids 256..vocab−1 are deterministic printable
 * ASCII pieces; encode is greedy longest-match over bytes and pieces, so
 * decode(encode(s)) == s for every s, and decoded output is valid UTF-8
 * whenever the ids came from sampling (see cal_tok_decode). */
typedef struct cal_tokenizer cal_tokenizer;
int  cal_tok_open(int vocab, cal_tokenizer **out);
/* The byte vocabulary of a GGUF file caliper wrote (engine/gguf.h): encode
 * gives one id per byte, ids 256.. decode as "[N]" (none of 256..258, and
 * eos, print). CAL_EINVAL for eos outside 256..vocab−1. */
int  cal_tok_open_bytes(int vocab, int eos, cal_tokenizer **out);
void cal_tok_close(cal_tokenizer **t);
/* A model's own vocabulary, from the tokenizer.* keys of a GGUF file:
 * SentencePiece ("llama": score-ordered merges, "▁" for spaces, <0xXX>
 * byte fallback) or byte-level BPE ("gpt2", with the pre-tokenizers
 * "gpt-2", "llama-bpe"/"llama3" and "qwen2"), encoding as llama.cpp does.
 * CAL_ENOTFOUND / CAL_EIO for the file, CAL_EPROTO for a malformed one,
 * CAL_EINVAL for a vocabulary caliper cannot encode; why names the key. */
int  cal_tok_open_gguf(const char *path, cal_tokenizer **out, char *why, size_t why_len);
/* The same from a GGUF file's bytes in buf[len]. */
int  cal_tok_open_gguf_mem(const void *buf, size_t len, cal_tokenizer **out, char *why,
                           size_t why_len);
/* Encode n bytes of text into ids[cap]; returns the count, or CAL_ETOOBIG
 * when more than cap ids would be needed. A GGUF vocabulary encodes as
 * cal_tok_encode_ex with CAL_TOK_PARSE_SPECIAL (no BOS). CAL_EINVAL for
 * text a BPE vocabulary cannot take (a code point above U+10FFFF). */
int  cal_tok_encode(const cal_tokenizer *t, const char *text, size_t n,
                    int32_t *ids, int cap);
/* flags for cal_tok_encode_ex */
#define CAL_TOK_ADD_SPECIAL   1  /* BOS / EOS as the vocabulary's add_bos/add_eos say */
#define CAL_TOK_PARSE_SPECIAL 2  /* control tokens written in the text are matched
                                    (user-defined tokens always are) */
int  cal_tok_encode_ex(const cal_tokenizer *t, const char *text, size_t n, int flags,
                       int32_t *ids, int cap);
/* The beginning-of-sequence id, or -1 when the vocabulary has none. */
int  cal_tok_bos(const cal_tokenizer *t);
/* "bytes" for caliper's own vocabularies, else the GGUF tokenizer.ggml.model
 * ("llama", "gpt2"). */
const char *cal_tok_kind(const cal_tokenizer *t);
/* What a GGUF vocabulary's file had wrong that the reader replaced, and
 * what it used instead, as llama.cpp would (a special id outside the
 * vocabulary keeps the family's default, a flag of the wrong type its
 * default): one line, "" when nothing was. Owned by t. */
const char *cal_tok_note(const cal_tokenizer *t);
/* Streaming decode: append the bytes of `id` to out[cap] and return the
 * count written. Sampled ids can split a UTF-8 sequence; the decoder keeps
 * up to 3 pending bytes in *state (zero-initialise) and emits only complete,
 * valid UTF-8, replacing invalid sequences with U+FFFD. */
typedef struct cal_tok_state {
    unsigned char pend[4];
    int npend;
    int special;   /* 1: control tokens decode to their text (llama-server's
                      /detokenize); 0: to nothing (generated text) */
} cal_tok_state;
int  cal_tok_decode(const cal_tokenizer *t, cal_tok_state *st, int32_t id,
                    char *out, int cap);
/* Flush pending bytes at the end of a stream (as U+FFFD if incomplete). */
int  cal_tok_flush(cal_tok_state *st, char *out, int cap);
int  cal_tok_eos(const cal_tokenizer *t);   /* the end-of-sequence id */
/* Bytes any single cal_tok_decode or cal_tok_flush call can write at most:
 * a piece of up to 512 bytes, each of which may become a U+FFFD. */
#define CAL_TOK_DECODE_MAX 1552
/* The raw bytes of one id (not UTF-8 checked; NULL for an id out of range).
 * Concatenating the pieces of encode(s) gives s back byte for byte, even when
 * s is not UTF-8 (for a GGUF vocabulary: the decoded text, "▁" as a space,
 * byte tokens as their byte, control tokens as written; SentencePiece's
 * space prefix stays in). *len receives the length. Owned by t. */
const char *cal_tok_piece(const cal_tokenizer *t, int32_t id, int *len);
int  cal_tok_vocab(const cal_tokenizer *t);

/* ---- sampler ----------------------------------------------------------- */
typedef struct cal_sampler_params {
    float    temperature;   /* 0 = greedy */
    float    top_p;         /* 1 = off */
    uint64_t seed;
} cal_sampler_params;
/* Pick a token from logits[vocab]; *rng is the per-sequence state
 * (initialise from params.seed). scratch holds vocab floats + vocab ints. */
int32_t cal_sample(const float *logits, int vocab, const cal_sampler_params *p,
                   uint64_t *rng, void *scratch);
size_t  cal_sample_scratch_bytes(int vocab);
/* cal_sample with the engine's own scratch, timed as the "sampling" op of
 * the profile. Same result as cal_sample; CAL_EINVAL for NULL arguments. */
int32_t cal_engine_sample(cal_engine *e, const float *logits,
                          const cal_sampler_params *p, uint64_t *rng);

#endif
