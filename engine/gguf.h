/* caliper reference engine — GGUF in and out: write an engine's weights as a
 * GGUF file llama.cpp loads (its architecture: llama, qwen2 or qwen3; MoE
 * presets as llama with experts, Mixtral's layout), and describe a GGUF file as a model config the
 * engine opens (cal_engine_open reads the weights when config.weights names
 * a file).
 *
 * The function both engines compute: RMSNorm, RoPE on adjacent pairs
 * (llama.cpp's "normal" RoPE, the llama architecture's), attention scaled by
 * 1/sqrt(head_dim), SwiGLU, softmax routing over all experts with the top-k
 * weights renormalised (llama.cpp's build_moe_ffn with norm_w, softmax
 * gating). The engine's embedding scale is folded into token_embd and the
 * unscaled matrix written as output.weight, so llama.cpp, which does not
 * scale embeddings, computes the same logits.
 *
 * The vocabulary is byte-level SentencePiece: ids 0..255 the byte tokens
 * <0x00>..<0xFF> (id 32 is "\u2581", SentencePiece's space, so llama.cpp's
 * whitespace escaping maps a space to it), then </s>, <s>, <unk> and tokens
 * "[N]" that no text can reach (no two-character token exists to start a
 * merge). Any text becomes one token per byte in both engines. */
#ifndef CALIPER_ENGINE_GGUF_H
#define CALIPER_ENGINE_GGUF_H
#include <stddef.h>
#include "engine/engine.h"
#include "engine/internal.h"
#include <stdint.h>

/* The vocabulary's fixed ids. */
#define CAL_GGUF_EOS 256
#define CAL_GGUF_BOS 257
#define CAL_GGUF_UNK 258

/* dtype for cal_gguf_export: llama.cpp's Q4_K_M mixture (Q6_K for
 * output.weight and for attn_v and ffn_down of llama.cpp's use_more_bits
 * layers, Q4_K for the other matrices). Not an engine format. */
#define CAL_GGUF_MIX_Q4_K_M 1015

/* dtype for cal_gguf_export: each tensor in the format the engine holds it
 * in (a file's Q4_K_M mixture held as stored is written back as it was
 * read). Not an engine format. */
#define CAL_GGUF_AS_HELD 1016

/* The tensor formats the loader reads (engine/gguf_formats.c), by ggml
 * type: every type the engine holds as stored, F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K (the file's bytes kept as they
 * are), widened to F32 (llama.cpp's dequantization) where another format is
 * asked for. */
/* The CAL_DTYPE_* that holds a ggml type's tensors as stored, or -1 where
 * the engine has no such format (IQ*, Q2_K, Q3_K, TQ*, MXFP4 ...): "does the
 * engine hold this type?" is cal_gguf_dtype_of(type) >= 0. */
int    cal_gguf_dtype_of(uint32_t type);
/* The ggml type of a CAL_DTYPE_* (what export writes for it), or -1 for an
 * unknown value: cal_gguf_dtype_of backwards. */
int64_t cal_gguf_type_of(int dtype);
/* 1 where the loader reads tensors of the type (the types held as stored). */
int    cal_gguf_reads(uint32_t type);
/* Bytes of a row of n values (whole blocks, sizes from cal_gguf_type_block);
 * 0 for a type not read. */
size_t cal_gguf_row_bytes(uint32_t type, int n);
/* A file row of n values (whole blocks of a type read) to F32. */
void   cal_gguf_row_f32(uint32_t type, const uint8_t *src, float *dst, int n);

/* Write e's weights to path, the 2-D weights in dtype (a CAL_DTYPE_*: F32,
 * F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K in ggml's block layouts, or
 * CAL_GGUF_MIX_Q4_K_M; norms stay F32, as llama.cpp's converters keep
 * them). Rows already in dtype are written as they are. The
 * file is written beside path and renamed over it once complete, so a
 * failure leaves path as it was. CAL_EINVAL for a bad dtype, a row
 * length that is not whole blocks of it, or a path that exists and is not a
 * regular file (a symbolic link, FIFO, device or directory: refused, why
 * naming the path and what it is); CAL_EIO with why naming the path and
 * errno text; CAL_ENOMEM. */
int cal_gguf_export(const cal_engine *e, const char *path, int dtype, char *why,
                    size_t why_len);
/* The same with the vocabulary of the GGUF file vocab_path (its tokenizer.*
 * keys copied as they are; llama.cpp's SentencePiece or BPE), for a model
 * whose vocab equals the file's token count. vocab_path NULL: the byte
 * vocabulary. CAL_EINVAL with why for a vocabulary caliper cannot encode or
 * whose size differs. */
int cal_gguf_export_vocab(const cal_engine *e, const char *path, int dtype,
                          const char *vocab_path, char *why, size_t why_len);

/* An engine's tensors as the writer and the loader below reach them: the
 * engine (weights.c) fills one for cal_gguf_export and for its own open, so
 * this format code calls nothing of the engine. The weights' pointers are
 * the engine's own mutable memory: the loader writes through them. */
typedef struct cal_gguf_source {
    const cal_model_config *config;
    const cal_engine *engine;
    void (*weights)(const cal_engine *e, cal_model_weights *m);
    void (*layer_weights)(const cal_engine *e, int layer, cal_layer_weights *w);
    const void *(*rows)(const cal_engine *e, const cal_tensor_view *t, int expert,
                        int64_t r, int64_t count, void *buf);
} cal_gguf_source;
/* cal_gguf_export's writer (v NULL: the byte vocabulary) and the loader
 * cal_engine_open uses (same contracts as cal_gguf_export_vocab and
 * cal_gguf_load_weights). */
struct cal_vocab;
int cal_gguf_write(const cal_gguf_source *s, const char *path, int dtype,
                   const struct cal_vocab *v, char *why, size_t why_len);
int cal_gguf_read_weights(const cal_gguf_source *s, char *why, size_t why_len);
/* The writer with each matrix in plan[its CAL_T_* index] (engine/internal.h;
 * CAL_T_COUNT(n_layers) entries), the byte vocabulary: any mixture of the
 * engine's formats, as llama.cpp's quantizer writes them. CAL_EINVAL naming
 * the tensor whose rows a planned format does not take. */
int cal_gguf_write_plan(const cal_gguf_source *s, const char *path, const int *plan,
                        char *why, size_t why_len);
/* The same for an open engine. */
int cal_gguf_export_plan(const cal_engine *e, const char *path, const int *plan, char *why,
                         size_t why_len);

/* Read path's header into *out (weights = path, seed 0, name "gguf"), after
 * checking that caliper can serve it: architecture llama, qwen2, qwen3 or
 * qwen3moe (out->arch; qwen2's QKV biases and qwen3's Q/K norms required;
 * llama's rope_freqs.weight read when present), head sizes equal,
 * a byte-level vocabulary or one cal_tok_open_gguf reads (SentencePiece,
 * BPE), every tensor present with the expected shape and
 * of a type the loader reads (cal_gguf_reads), no tensor caliper would
 * ignore (a llama's biases). CAL_EPROTO / CAL_ENOTSUP style errors return
 * CAL_EINVAL with why naming what is missing or unsupported ("tensor
 * blk.0.attn_q.weight: type IQ4_NL is not supported (F32, F16, ... are)");
 * CAL_ENOTFOUND / CAL_EIO for the file. */
int cal_gguf_model_config(const char *path, cal_model_config *out, char *why,
                          size_t why_len);

/* The format the engine holds a file's tensor of ggml type `type` with rows
 * of n_in values in: with c->as_stored, the file's own where the engine
 * has that format (cal_gguf_dtype_of) and the rows fit its kernels
 * (cal_dtype_row_unit); else, and for every tensor without as_stored,
 * c->dtype. */
int cal_gguf_hold(uint32_t type, int64_t n_in, const cal_model_config *c);
/* The format of each matrix of c's file (c->weights) as the engine holds
 * it: dts[CAL_T_COUNT(n_layers)], indexed as engine/internal.h's CAL_T_*
 * (a tied model's one matrix under both CAL_T_EMB and CAL_T_OUT).
 * CAL_EINVAL / CAL_EIO with why. */
int cal_gguf_held_dtypes(const cal_model_config *c, int *dts, char *why, size_t why_len);

/* Fill an open engine's weights from c->weights (cal_engine_open does, in
 * weights.c), each tensor in the format the engine holds it in: rows
 * already in it are read straight into place, others widened to F32 as
 * llama.cpp dequantizes them and converted. CAL_EIO / CAL_EINVAL with
 * why. */
int cal_gguf_load_weights(cal_engine *e, char *why, size_t why_len);


#endif
