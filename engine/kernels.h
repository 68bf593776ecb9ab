/* caliper reference engine — the element-wise and attention kernels, and the
 * deterministic random numbers the synthetic weights come from. Internal to
 * engine/ (and its unit tests, which check each kernel against a naive
 * reference); not part of the installed contract. */
#ifndef CALIPER_ENGINE_KERNELS_H
#define CALIPER_ENGINE_KERNELS_H
#include <stdint.h>

/* splitmix64: advances *state and returns the next 64 random bits. */
uint64_t cal_k_splitmix64(uint64_t *state);
/* Counter-based normal-ish value (Irwin–Hall of four 16-bit uniforms, scaled
 * to unit variance) for element i of stream `key`: a pure function, so any
 * tensor element can be generated independently. */
float cal_k_normal_at(uint64_t key, uint64_t i);

/* out[i] = x[i] / sqrt(mean(x²) + eps) * w[i], i < n. out may equal x. */
void cal_k_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* In-place softmax over x[n] (max-subtracted). */
void cal_k_softmax(float *x, int n);

/* Rotary embedding on one vector of n_heads × head_dim, rotating the pairs
 * (2i, 2i+1) of each head by pos × theta^(−2i/head_dim). cos_t / sin_t are
 * the rows for this position: [head_dim/2]. */
void cal_k_rope(float *v, int n_heads, int head_dim, const float *cos_t,
                const float *sin_t);

/* out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^−g). */
void cal_k_swiglu(float *out, const float *gate, const float *up, int n);

/* Dot product and y += a·x over n floats, vectorised. */
float cal_k_dot(const float *a, const float *b, int n);
void  cal_k_axpy(float *y, float a, const float *x, int n);

/* Grouped-query attention of one query token over a KV cache.
 * q: [n_heads][head_dim]; k, v: [n_kv][kv_stride][head_dim] (one slot of one
 * layer; kv_stride = positions per sequence); attends to positions
 * 0 .. n_pos−1; query head h reads kv head h / (n_heads / n_kv).
 * scores: scratch [n_pos]; out: [n_heads][head_dim]. */
void cal_k_attention(const float *q, const float *k, const float *v,
                     int n_heads, int n_kv, int head_dim, int kv_stride,
                     int n_pos, float *scores, float *out);

/* The same for query heads h0 .. h1−1 only (a thread's share). */
void cal_k_attention_heads(const float *q, const float *k, const float *v,
                           int n_heads, int n_kv, int head_dim, int kv_stride,
                           int n_pos, int h0, int h1, float *scores, float *out);

/* Mixture-of-experts routing of one token: probs = softmax(logits[n]),
 * the top_k largest (ties to the lower index) into idx[top_k] in descending
 * order, their weights renormalised to sum 1 into w[top_k].
 * probs: scratch [n]. */
void cal_k_route_topk(const float *logits, int n, int top_k, float *probs,
                      int *idx, float *w);

#endif
