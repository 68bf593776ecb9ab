/* caliper reference engine — the model's shapes: the presets, the names of
 * architectures and weight formats, a configuration's validation, and the
 * arithmetic of parameters, bytes per token, KV bytes and FLOPs. Needs no
 * open engine; everything above it (weights, the step, GGUF files) builds
 * on it. */
#include "engine/engine.h"
#include "engine/kernels.h"
#include "caliper/error.h"
#include <math.h>
#include <string.h>

/* ---- shapes ------------------------------------------------------------ */

static const cal_model_config presets[] = {
    /* name    dim layers heads kv  ffn   experts topk vocab   ctx  tied theta    eps   seed dtype weights embed_scale arch rope… as_stored */
    {"tiny",   128, 4,  4,  2,  384,  0, 0, 4096,   512,  1, 10000.0f,   1e-5f, 42, CAL_DTYPE_F32, "", 0, CAL_ARCH_LLAMA, 0, 0, 0, 0, 0, 0},
    {"small",  512, 8,  8,  4,  1408, 0, 0, 32000,  1024, 1, 10000.0f,   1e-5f, 42, CAL_DTYPE_F32, "", 0, CAL_ARCH_LLAMA, 0, 0, 0, 0, 0, 0},
    {"base",   768, 12, 12, 4,  2048, 0, 0, 32000,  2048, 1, 10000.0f,   1e-5f, 42, CAL_DTYPE_F32, "", 0, CAL_ARCH_LLAMA, 0, 0, 0, 0, 0, 0},
    {"moe",    512, 8,  8,  4,  1024, 8, 2, 151936, 2048, 1, 1000000.0f, 1e-6f, 42, CAL_DTYPE_F32, "", 0, CAL_ARCH_LLAMA, 0, 0, 0, 0, 0, 0},
};

int cal_model_preset(const char *name, cal_model_config *out)
{
    if (!name || !out)
        return CAL_EINVAL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i];
            return CAL_OK;
        }
    return CAL_ENOTFOUND;
}

static const char *const dtype_names[CAL_DTYPE_COUNT] = {
    "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_1", "q5_0", "q5_1", "q5_k"};

static const char *const arch_names[CAL_ARCH_COUNT] = {"llama", "qwen2", "qwen3", "qwen3moe"};

const char *cal_arch_name(int arch)
{
    return arch >= 0 && arch < CAL_ARCH_COUNT ? arch_names[arch] : NULL;
}

int cal_arch_parse(const char *s)
{
    for (int i = 0; s && i < CAL_ARCH_COUNT; i++)
        if (strcasecmp(s, arch_names[i]) == 0)
            return i;
    return -1;
}

const char *cal_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < CAL_DTYPE_COUNT ? dtype_names[dtype] : NULL;
}

int cal_dtype_parse(const char *s)
{
    for (int i = 0; s && i < CAL_DTYPE_COUNT; i++)
        if (strcasecmp(s, dtype_names[i]) == 0)
            return i;
    return -1;
}

double cal_dtype_bytes_per_weight(int dtype)
{
    return dtype >= 0 && dtype < CAL_DTYPE_COUNT
               ? (double)cal_k_row_bytes(dtype, CAL_QK_K) / CAL_QK_K
               : 0.0;
}

/* Weights of one layer held in matrices (the dtype's format); the two norms
 * (2·dim floats) are F32 in every format. */
static int64_t layer_matrix_params(const cal_model_config *c, int active_only)
{
    int64_t d = c->dim, hd = c->dim / c->n_heads;
    int64_t qd = d, kvd = hd * c->n_kv_heads, f = c->ffn_dim;
    int64_t p = d * (qd + 2 * kvd) + qd * d;
    if (c->n_experts > 0) {
        int64_t ne = active_only ? c->top_k : c->n_experts;
        p += (int64_t)c->n_experts * d + ne * 3 * d * f;
    } else {
        p += 3 * d * f;
    }
    return p;
}

/* F32 vectors of a layer beyond its two norms: qwen2's QKV biases, qwen3's
 * Q and K head norms */
static int64_t layer_extra_params(const cal_model_config *c)
{
    int64_t hd = c->dim / c->n_heads;
    if (c->arch == CAL_ARCH_QWEN2)
        return c->dim + 2 * hd * c->n_kv_heads;
    if (CAL_ARCH_QK_NORM(c->arch))
        return 2 * hd;
    return 0;
}

static int64_t layer_params(const cal_model_config *c, int active_only)
{
    return 2 * (int64_t)c->dim + layer_extra_params(c) + layer_matrix_params(c, active_only);
}

int cal_dtype_row_unit(int dtype)
{
    int b = cal_k_block_elems(dtype);
    return b > CAL_Q8_0_BLOCK ? b : CAL_Q8_0_BLOCK;
}

int cal_model_validate(const cal_model_config *c, const char **why)
{
    const char *w = NULL;
    if (!c)
        w = "config";
    else if (c->dim < 2 || c->dim > 65536)
        w = "dim";
    else if (c->n_layers < 1 || c->n_layers > 1024)
        w = "n_layers";
    else if (c->n_heads < 1 || c->dim % c->n_heads != 0 || (c->dim / c->n_heads) % 2 != 0)
        w = "n_heads";
    else if (c->n_kv_heads < 1 || c->n_heads % c->n_kv_heads != 0)
        w = "n_kv_heads";
    else if (c->ffn_dim < 1 || c->ffn_dim > 1 << 20)
        w = "ffn_dim";
    else if (c->n_experts < 0 || c->n_experts > 1024)
        w = "n_experts";
    else if (c->n_experts > 0 ? (c->top_k < 1 || c->top_k > c->n_experts) : c->top_k != 0)
        w = "top_k";
    else if (c->vocab < 257 || c->vocab > 1 << 24)
        w = "vocab";
    else if (c->max_ctx < 1 || c->max_ctx > 1 << 20)
        w = "max_ctx";
    else if (c->tied_embeddings != 0 && c->tied_embeddings != 1)
        w = "tied_embeddings";
    else if (!(c->rope_theta > 1.0f) || !isfinite(c->rope_theta))
        w = "rope_theta";
    else if (!(c->norm_eps > 0.0f) || !(c->norm_eps < 1.0f))
        w = "norm_eps";
    else if (!memchr(c->weights, '\0', sizeof c->weights))
        w = "weights";
    else if (!(c->embed_scale >= 0.0f) || !isfinite(c->embed_scale))
        w = "embed_scale";
    else if (cal_model_n_params(c) > (int64_t)4 << 30)
        w = "n_params";
    else if (c->dtype < 0 || c->dtype >= CAL_DTYPE_COUNT)
        w = "dtype";
    else if (c->rope_freqs && (c->arch != CAL_ARCH_LLAMA || (c->rope_factor != 0 &&
             !(c->rope_factor >= 1 && c->rope_factor <= 1e4 && c->rope_low_freq > 0 &&
               c->rope_high_freq > c->rope_low_freq && c->rope_orig_ctx > 0))))
        w = "rope_freqs";
    else if (c->arch < 0 || c->arch >= CAL_ARCH_COUNT ||
             ((c->arch == CAL_ARCH_QWEN2 || c->arch == CAL_ARCH_QWEN3) && c->n_experts > 0) ||
             (c->arch == CAL_ARCH_QWEN3MOE && c->n_experts == 0))
        w = "arch";     /* qwen2 and qwen3 are dense, qwen3moe has experts */
    else if (c->dtype != CAL_DTYPE_F32 && c->dim % cal_dtype_row_unit(c->dtype) != 0)
        w = "dim";      /* rows are whole blocks (32 weights; 256 for K-quants) */
    else if (c->dtype != CAL_DTYPE_F32 && c->ffn_dim % cal_dtype_row_unit(c->dtype) != 0)
        w = "ffn_dim";
    if (why)
        *why = w;
    return w ? CAL_EINVAL : CAL_OK;
}

int64_t cal_model_n_params(const cal_model_config *c)
{
    int64_t emb = (int64_t)c->vocab * c->dim;
    return emb * (c->tied_embeddings ? 1 : 2) + c->dim +
           (c->rope_freqs ? c->dim / c->n_heads / 2 : 0) +
           (int64_t)c->n_layers * layer_params(c, 0);
}

void cal_rope_llama3_factors(const cal_model_config *c, int hd, float *out)
{
    double lo = c->rope_low_freq, hi = c->rope_high_freq, f = c->rope_factor;
    double orig = c->rope_orig_ctx;
    for (int i = 0; i < hd / 2; i++) {
        double wl = 2.0 * M_PI * pow((double)c->rope_theta, 2.0 * i / hd);
        if (!(f > 0) || wl < orig / hi)
            out[i] = 1.0f;
        else if (wl > orig / lo)
            out[i] = (float)f;
        else {
            double s = (orig / wl - lo) / (hi - lo);
            out[i] = (float)(1.0 / ((1.0 - s) / f + s));
        }
    }
}

int64_t cal_model_decode_bytes_per_token(const cal_model_config *c)
{
    int64_t d = c->dim;
    /* matrices in the dtype: per layer, the output projection, one embedding row */
    int64_t mats = (int64_t)c->n_layers * layer_matrix_params(c, 1) +
                   (int64_t)c->vocab * d + d;
    int64_t norms = (int64_t)c->n_layers * (2 * d + layer_extra_params(c)) + d; /* F32 */
    double bpw = cal_dtype_bytes_per_weight(c->dtype);
    return (int64_t)((double)mats * bpw) + norms * (int64_t)sizeof(float);
}

int64_t cal_model_kv_bytes_per_token(const cal_model_config *c)
{
    int64_t hd = c->dim / c->n_heads;
    return 2 * (int64_t)c->n_layers * c->n_kv_heads * hd * (int64_t)sizeof(float);
}

double cal_model_flops_per_token(const cal_model_config *c, int pos)
{
    double d = c->dim, hd = (double)c->dim / c->n_heads;
    double qd = d, kvd = hd * c->n_kv_heads, f = c->ffn_dim;
    double mac = d * (qd + 2 * kvd) + qd * d;      /* QKV and output projections */
    mac += 2.0 * qd * (pos + 1);                   /* scores and weighted sum */
    if (c->n_experts > 0)
        mac += (double)c->n_experts * d + c->top_k * 3 * d * f;
    else
        mac += 3 * d * f;
    return 2.0 * (c->n_layers * mac + (double)c->vocab * d);
}
