/* caliper reference engine — element-wise kernels (RMSNorm, RoPE, softmax,
 * SwiGLU), the attention inner loops over the KV cache, MoE top-k routing,
 * and the counter-based random numbers behind the synthetic weights.
 * Matrix products are not here: they go through OpenBLAS in step.c. */
#include "engine/kernels.h"
#include "engine/simd.h"
#include <math.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* The vector paths are chosen at run time, once, from cpuid: AVX-512F (with
 * FMA), else AVX2 with FMA (dot and axpy), else plain C. */
enum { LV_C, LV_AVX2, LV_AVX512 };
#if HAVE_X86
static int ask_level(void)
{
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"))
        return LV_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return LV_AVX2;
    return LV_C;
}

static int level(void)
{
    static _Atomic int cached = -1;
    return cal_k_cpu_once(&cached, ask_level);
}
#define T512 CAL_SIMD("avx512f,fma")
#define T2   CAL_SIMD("avx2,fma")
#else
static int level(void) { return LV_C; }
#endif

const char *cal_k_elementwise_isa(void)
{
    static const char *const name[] = {"portable", "avx2", "avx512"};
    return name[level()];
}

#if HAVE_X86
/* e^x for 16 lanes: x = n·ln2 + r with |r| ≤ ln2/2, e^r by a degree-6
 * polynomial (relative error ~2e-7), then scaled by 2^n. Inputs below −87
 * flush towards 0, as expf would underflow. */
static inline __attribute__((always_inline, target("avx512f"))) __m512 exp16(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
#endif

uint64_t cal_k_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float cal_k_normal_at(uint64_t key, uint64_t i)
{
    uint64_t s = key + i * 0x9e3779b97f4a7c15ull;
    uint64_t z = cal_k_splitmix64(&s);
    /* Irwin–Hall(4): sum of four uniforms has mean 2, variance 1/3. */
    float u = (float)(z & 0xffff) + (float)((z >> 16) & 0xffff) +
              (float)((z >> 32) & 0xffff) + (float)(z >> 48);
    u = (u + 2.0f) * (1.0f / 65536.0f);
    return (u - 2.0f) * 1.7320508f;
}

#if HAVE_X86
static T512 float dot_avx512(const float *a, const float *b, int n)
{
    int i = 0;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static T2 float dot_avx2(const float *a, const float *b, int n)
{
    int i = 0;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    s0 = _mm256_add_ps(s0, s1);
    float t[8];
    _mm256_storeu_ps(t, s0);
    float s = t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static T512 void axpy_avx512(float *y, float a, const float *x, int n)
{
    int i = 0;
    __m512 va = _mm512_set1_ps(a);
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i),
                                                _mm512_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static T2 void axpy_avx2(float *y, float a, const float *x, int n)
{
    int i = 0;
    __m256 va = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i),
                                                _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}
#endif

float cal_k_dot(const float *a, const float *b, int n)
{
#if HAVE_X86
    switch (level()) {
    case LV_AVX512: return dot_avx512(a, b, n);
    case LV_AVX2:   return dot_avx2(a, b, n);
    }
#endif
    float s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void cal_k_axpy(float *y, float a, const float *x, int n)
{
#if HAVE_X86
    switch (level()) {
    case LV_AVX512: axpy_avx512(y, a, x, n); return;
    case LV_AVX2:   axpy_avx2(y, a, x, n); return;
    }
#endif
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

void cal_k_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    float ss = cal_k_dot(x, x, n);
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * r * w[i];
}

#if HAVE_X86
static T512 void softmax_avx512(float *x, int n)
{
    /* three vector passes; the ragged end of each row through lane masks, so
     * short rows (attention over a few positions) cost no scalar exp */
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1u);
    if (tail)
        vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(vmax, tail, x + i));
    __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    __m512 vs = _mm512_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 v = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        _mm512_storeu_ps(x + i, v);
        vs = _mm512_add_ps(vs, v);
    }
    if (tail) {
        __m512 v = exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(vm, tail, x + i), vm));
        v = _mm512_maskz_mov_ps(tail, v);
        _mm512_mask_storeu_ps(x + i, tail, v);
        vs = _mm512_add_ps(vs, v);
    }
    __m512 r = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vs));
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), r));
    if (tail)
        _mm512_mask_storeu_ps(x + i, tail,
                              _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), r));
}
#endif

void cal_k_softmax(float *x, int n)
{
    if (n <= 0)
        return;
#if HAVE_X86
    if (level() == LV_AVX512) {
        softmax_avx512(x, n);
        return;
    }
#endif
    float m = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > m)
            m = x[i];
    float s = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        s += x[i];
    }
    float r = 1.0f / s;
    for (int i = 0; i < n; i++)
        x[i] *= r;
}

void cal_k_rope(float *v, int n_heads, int head_dim, const float *cos_t,
                const float *sin_t)
{
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *p = v + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float a = p[2 * i], b = p[2 * i + 1];
            p[2 * i]     = a * cos_t[i] - b * sin_t[i];
            p[2 * i + 1] = a * sin_t[i] + b * cos_t[i];
        }
    }
}

void cal_k_rope_neox(float *v, int n_heads, int head_dim, const float *cos_t,
                     const float *sin_t)
{
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *p = v + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float a = p[i], b = p[i + half];
            p[i]        = a * cos_t[i] - b * sin_t[i];
            p[i + half] = a * sin_t[i] + b * cos_t[i];
        }
    }
}

/* the lanes past a multiple of 16 (all of them on the plain path) */
static void swiglu_tail(float *out, const float *gate, const float *up, int i, int n)
{
    for (; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

#if HAVE_X86
static T512 void swiglu_avx512(float *out, const float *gate, const float *up, int n)
{
    int i = 0;
    __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= n; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i);
        __m512 den = _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g)));
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(g, den),
                                                _mm512_loadu_ps(up + i)));
    }
    swiglu_tail(out, gate, up, i, n);
}
#endif

void cal_k_swiglu(float *out, const float *gate, const float *up, int n)
{
#if HAVE_X86
    if (level() == LV_AVX512) {
        swiglu_avx512(out, gate, up, n);
        return;
    }
#endif
    swiglu_tail(out, gate, up, 0, n);
}

#if HAVE_X86
enum { ATT_V = 4 };   /* head_dim ≤ 64 on this path: four vectors a head */
#ifndef ATT_PF_ROWS
#define ATT_PF_ROWS 16
#endif

/* nq (≤ CAL_K_ATT_HEADS) query heads that share one KV head, head_dim a
 * multiple of 16 up to 64. Each key and value row is loaded once for all
 * of them; scores go four positions at a time through one reduction
 * (instead of a full horizontal sum per position), and the outputs stay in
 * registers over the positions (instead of a load and store per position). */
static T512 void att_group(const float *q, int nq, const float *kh, const float *vh, int hd,
                      int n_pos, float scale, float *scores, float *out)
{
    int nv = hd / 16;
    __m512 qv[CAL_K_ATT_HEADS][ATT_V];
    for (int h = 0; h < nq; h++)
        for (int i = 0; i < nv; i++)
            qv[h][i] = _mm512_loadu_ps(q + (size_t)h * hd + 16 * i);
    int j = 0;
    for (; j + 4 <= n_pos; j += 4) {
        const float *kr = kh + (size_t)j * hd;
        /* keys ATT_PF_ROWS rows on, and the values of these positions for
         * the second pass: in a decode step a sequence's keys and values
         * come from memory (the step's stream of weights evicted them) */
        for (size_t o = 0; o < 4 * (size_t)hd * sizeof(float); o += 64) {
            _mm_prefetch((const char *)(kr + (size_t)ATT_PF_ROWS * hd) + o, _MM_HINT_T0);
            _mm_prefetch((const char *)(vh + (size_t)j * hd) + o, _MM_HINT_T0);
        }
        for (int h = 0; h < nq; h++) {
            __m512 a[4];
            for (int t = 0; t < 4; t++) {
                a[t] = _mm512_mul_ps(qv[h][0], _mm512_loadu_ps(kr + (size_t)t * hd));
                for (int i = 1; i < nv; i++)
                    a[t] = _mm512_fmadd_ps(qv[h][i], _mm512_loadu_ps(kr + (size_t)t * hd + 16 * i),
                                           a[t]);
            }
            _mm_storeu_ps(scores + (size_t)h * n_pos + j,
                          _mm_mul_ps(cal_hsum4(a[0], a[1], a[2], a[3]), _mm_set1_ps(scale)));
        }
    }
    for (; j < n_pos; j++)
        for (int h = 0; h < nq; h++)
            scores[(size_t)h * n_pos + j] = dot_avx512(q + (size_t)h * hd, kh + (size_t)j * hd, hd) * scale;
    for (int h = 0; h < nq; h++)
        if (n_pos > 0)
            softmax_avx512(scores + (size_t)h * n_pos, n_pos);
    __m512 o[CAL_K_ATT_HEADS][ATT_V];
    for (int h = 0; h < nq; h++)
        for (int i = 0; i < nv; i++)
            o[h][i] = _mm512_setzero_ps();
    for (j = 0; j < n_pos; j++) {
        __m512 vr[ATT_V];
        for (int i = 0; i < nv; i++)
            vr[i] = _mm512_loadu_ps(vh + (size_t)j * hd + 16 * i);
        for (int h = 0; h < nq; h++) {
            __m512 p = _mm512_set1_ps(scores[(size_t)h * n_pos + j]);
            for (int i = 0; i < nv; i++)
                o[h][i] = _mm512_fmadd_ps(p, vr[i], o[h][i]);
        }
    }
    for (int h = 0; h < nq; h++)
        for (int i = 0; i < nv; i++)
            _mm512_storeu_ps(out + (size_t)h * hd + 16 * i, o[h][i]);
}
#endif

void cal_k_attention_heads(const float *q, const float *k, const float *v,
                           int n_heads, int n_kv, int head_dim, int kv_stride,
                           int n_pos, int h0, int h1, float *scores, float *out)
{
    int group = n_heads / n_kv;
    float scale = 1.0f / sqrtf((float)head_dim);
#if HAVE_X86
    if (level() == LV_AVX512 && head_dim % 16 == 0 && head_dim <= 16 * ATT_V) {
        /* the heads of [h0, h1) in runs that share a KV head */
        for (int h = h0; h < h1;) {
            int g = h / group, end = (g + 1) * group < h1 ? (g + 1) * group : h1;
            int nq = end - h < CAL_K_ATT_HEADS ? end - h : CAL_K_ATT_HEADS;
            att_group(q + (size_t)h * head_dim, nq, k + (size_t)g * kv_stride * head_dim,
                      v + (size_t)g * kv_stride * head_dim, head_dim, n_pos, scale, scores,
                      out + (size_t)h * head_dim);
            h += nq;
        }
        return;
    }
#endif
    for (int h = h0; h < h1; h++) {
        const float *qh = q + (size_t)h * head_dim;
        const float *kh = k + (size_t)(h / group) * kv_stride * head_dim;
        const float *vh = v + (size_t)(h / group) * kv_stride * head_dim;
        float *oh = out + (size_t)h * head_dim;
        for (int j = 0; j < n_pos; j++)
            scores[j] = cal_k_dot(qh, kh + (size_t)j * head_dim, head_dim) * scale;
        cal_k_softmax(scores, n_pos);
        memset(oh, 0, sizeof(float) * (size_t)head_dim);
        for (int j = 0; j < n_pos; j++)
            cal_k_axpy(oh, scores[j], vh + (size_t)j * head_dim, head_dim);
    }
}

void cal_k_attention(const float *q, const float *k, const float *v,
                     int n_heads, int n_kv, int head_dim, int kv_stride,
                     int n_pos, float *scores, float *out)
{
    cal_k_attention_heads(q, k, v, n_heads, n_kv, head_dim, kv_stride, n_pos, 0,
                          n_heads, scores, out);
}

void cal_k_route_topk(const float *logits, int n, int top_k, float *probs,
                      int *idx, float *w)
{
    memcpy(probs, logits, sizeof(float) * (size_t)n);
    cal_k_softmax(probs, n);
    float sum = 0;
    for (int j = 0; j < top_k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            int taken = 0;
            for (int t = 0; t < j; t++)
                taken |= idx[t] == i;
            if (!taken && (best < 0 || probs[i] > probs[best]))
                best = i;
        }
        idx[j] = best;
        w[j] = probs[best];
        sum += probs[best];
    }
    for (int j = 0; j < top_k; j++)
        w[j] /= sum;
}
