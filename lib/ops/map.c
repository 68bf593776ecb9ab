/* caliper ops — op names to common categories: glob rules, first match
 * wins, a user's file before the shipped defaults (caliper's engine, the
 * PyTorch profiler's aten ops and CUDA kernel names, llama.cpp/ggml ops). */
#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/ops.h"

#define PAT_MAX 128

typedef struct rule {
    char pat[PAT_MAX];             /* lower-cased: matching ignores case */
    char cat[CAL_OPS_CAT_MAX];
} rule;

struct cal_ops_map {
    rule   r[CAL_OPS_MAX_RULES];
    size_t n;
};

/* Order matters: MoE before any GEMM (grouped expert GEMMs are MoE), the
 * attention kernels before softmax and GEMM names, element-wise last. */
static const char *const DEFAULTS[][2] = {
    /* caliper's engine: its ten op kinds (docs/profile.md) */
    {"embedding", "embedding"}, {"norm", "norm"}, {"rope", "rope"},
    {"attention", "attention"}, {"dense_proj", "dense_proj"},
    {"activation", "elementwise"}, {"moe_router", "moe"}, {"moe_experts", "moe"},
    {"logits", "dense_proj"}, {"sampling", "sampling"},
    /* llama.cpp / ggml op names (GGML_OP_*, as its op profilers print them) */
    {"MUL_MAT_ID", "moe"}, {"ARGSORT", "moe"}, {"TOP_K", "moe"},
    {"FLASH_ATTN_EXT*", "attention"}, {"SOFT_MAX*", "attention"},
    {"MUL_MAT", "dense_proj"}, {"OUT_PROD", "dense_proj"},
    {"RMS_NORM*", "norm"}, {"NORM", "norm"}, {"L2_NORM", "norm"},
    {"ROPE*", "rope"},
    {"GET_ROWS*", "embedding"},
    {"CPY", "transpose_copy"}, {"DUP", "transpose_copy"}, {"CONT", "transpose_copy"},
    {"TRANSPOSE", "transpose_copy"}, {"PERMUTE", "transpose_copy"},
    {"RESHAPE", "transpose_copy"}, {"VIEW", "transpose_copy"},
    {"SET_ROWS", "transpose_copy"}, {"CONCAT", "transpose_copy"},
    {"GLU", "elementwise"}, {"UNARY", "elementwise"}, {"ADD*", "elementwise"},
    {"MUL", "elementwise"}, {"SCALE", "elementwise"}, {"SILU", "elementwise"},
    {"GELU", "elementwise"}, {"SUB", "elementwise"}, {"DIV", "elementwise"},
    /* PyTorch: MoE first */
    {"*moe*", "moe"}, {"*expert*", "moe"}, {"*grouped_gemm*", "moe"},
    {"*topk*", "moe"}, {"*router*", "moe"},
    /* attention kernels and ops */
    {"*flash*", "attention"}, {"*fmha*", "attention"}, {"*attention*", "attention"},
    {"*attn*", "attention"}, {"*scaled_dot_product*", "attention"}, {"*sdpa*", "attention"},
    {"*softmax*", "attention"}, {"aten::baddbmm", "attention"}, {"aten::bmm", "attention"},
    {"*rotary*", "rope"}, {"*rope*", "rope"},
    {"*rms_norm*", "norm"}, {"*rmsnorm*", "norm"}, {"*layer_norm*", "norm"},
    {"*layernorm*", "norm"}, {"*group_norm*", "norm"},
    {"aten::multinomial", "sampling"}, {"aten::argmax", "sampling"}, {"*sampl*", "sampling"},
    {"aten::embedding*", "embedding"}, {"*embedding*", "embedding"},
    {"aten::index_select", "embedding"},
    {"Memcpy*", "transpose_copy"}, {"Memset*", "transpose_copy"},
    {"aten::copy_", "transpose_copy"}, {"aten::contiguous", "transpose_copy"},
    {"aten::clone", "transpose_copy"}, {"aten::transpose", "transpose_copy"},
    {"aten::permute", "transpose_copy"}, {"aten::t", "transpose_copy"},
    {"aten::cat", "transpose_copy"}, {"aten::to", "transpose_copy"},
    {"aten::_to_copy", "transpose_copy"}, {"*copy_kernel*", "transpose_copy"},
    {"*transpose*", "transpose_copy"}, {"*direct_copy*", "transpose_copy"},
    {"aten::linear", "dense_proj"}, {"aten::addmm", "dense_proj"}, {"aten::mm", "dense_proj"},
    {"aten::matmul", "dense_proj"}, {"*gemm*", "dense_proj"}, {"*gemv*", "dense_proj"},
    {"*cutlass*", "dense_proj"}, {"*cublas*", "dense_proj"}, {"*xmma*", "dense_proj"},
    {"*_mma_*", "dense_proj"},
    {"aten::silu*", "elementwise"}, {"aten::gelu*", "elementwise"}, {"aten::mul*", "elementwise"},
    {"aten::add*", "elementwise"}, {"*act_and_mul*", "elementwise"}, {"*silu*", "elementwise"},
    {"*gelu*", "elementwise"}, {"*elementwise_kernel*", "elementwise"},
};

static int valid_cat(const char *c)
{
    size_t n = strlen(c);
    if (n < 1 || n >= CAL_OPS_CAT_MAX) return 0;
    for (; *c; c++)
        if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_' || *c == '/' ||
              *c == '-'))
            return 0;
    return 1;
}

/* ASCII lower case into dst[n]: patterns and names are compared this way,
 * which plain POSIX fnmatch can do (FNM_CASEFOLD is an extension) */
static void lower(char *dst, const char *src, size_t n)
{
    size_t i = 0;
    for (; src[i] && i + 1 < n; i++) dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = 0;
}

static void add_defaults(cal_ops_map *m)
{
    for (size_t i = 0; i < sizeof DEFAULTS / sizeof DEFAULTS[0] && m->n < CAL_OPS_MAX_RULES; i++) {
        lower(m->r[m->n].pat, DEFAULTS[i][0], PAT_MAX);
        snprintf(m->r[m->n].cat, CAL_OPS_CAT_MAX, "%s", DEFAULTS[i][1]);
        m->n++;
    }
}

int cal_ops_map_default(cal_ops_map **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return CAL_ENOMEM;
    add_defaults(*out);
    return CAL_OK;
}

int cal_ops_map_parse(const char *text, size_t len, int with_defaults, cal_ops_map **out,
                      char *err, size_t errn)
{
    *out = NULL;
    cal_ops_map *m = calloc(1, sizeof *m);
    if (!m) return cal_why(err, errn, CAL_ENOMEM, "out of memory");
    size_t line = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        char buf[512];
        size_t l = (size_t)(le - p);
        if (l >= sizeof buf) {
            free(m);
            return cal_why(err, errn, CAL_EPROTO, "line %zu: longer than %zu bytes", line, sizeof buf - 1);
        }
        memcpy(buf, p, l);
        buf[l] = 0;
        p = nl ? nl + 1 : end;
        if (memchr(buf, 0, l)) {
            free(m);
            return cal_why(err, errn, CAL_EPROTO, "line %zu: a NUL byte", line);
        }
        char *save = NULL, *pat = strtok_r(buf, " \t\r", &save);
        if (!pat || pat[0] == '#') continue;
        char *cat = strtok_r(NULL, " \t\r", &save), *extra = strtok_r(NULL, " \t\r", &save);
        if (!cat || (extra && extra[0] != '#')) {
            free(m);
            return cal_why(err, errn, CAL_EPROTO, "line %zu: \"%.60s\": want PATTERN CATEGORY", line, pat);
        }
        if (strlen(pat) >= PAT_MAX) {
            free(m);
            return cal_why(err, errn, CAL_EPROTO, "line %zu: pattern longer than %d bytes", line, PAT_MAX - 1);
        }
        if (!valid_cat(cat)) {
            free(m);
            return cal_why(err, errn, CAL_EPROTO, "line %zu: category \"%.40s\" is not 1..31 of [a-z0-9_/-]",
                           line, cat);
        }
        if (m->n >= CAL_OPS_MAX_RULES) {
            free(m);
            return cal_why(err, errn, CAL_ETOOBIG, "line %zu: more than %d rules", line, CAL_OPS_MAX_RULES);
        }
        lower(m->r[m->n].pat, pat, PAT_MAX);
        snprintf(m->r[m->n].cat, CAL_OPS_CAT_MAX, "%s", cat);
        m->n++;
    }
    if (with_defaults) add_defaults(m);
    *out = m;
    return CAL_OK;
}

const char *cal_ops_map_category(const cal_ops_map *m, const char *op)
{
    if (!m || !op) return NULL;
    char name[CAL_OPS_NAME_MAX];
    lower(name, op, sizeof name);
    for (size_t i = 0; i < m->n; i++)
        if (fnmatch(m->r[i].pat, name, 0) == 0) return m->r[i].cat;
    return NULL;
}

void cal_ops_map_free(cal_ops_map **m)
{
    if (!m) return;
    free(*m);
    *m = NULL;
}
