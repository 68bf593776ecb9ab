/* Hugging Face config.json reader (jansson): the handful of fields that fix
 * the KV cache size per token. Multimodal configs keep the language model's
 * fields under "text_config"; that object is used when the top level lacks
 * num_hidden_layers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "caliper/error.h"
#include "caliper/gguf.h"

#define CONFIG_CAP (8u << 20)   /* a config.json is kilobytes; refuse more than 8 MiB */


/* A positive integer field: 1 found, 0 absent or null, -1 present but bad. */
static int get_pos_int(json_t *o, const char *key, long *v)
{
    json_t *j = json_object_get(o, key);
    if (!j || json_is_null(j)) return 0;
    if (json_is_integer(j)) {
        json_int_t x = json_integer_value(j);
        if (x <= 0 || x > (1LL << 40)) return -1;
        *v = (long)x;
        return 1;
    }
    if (json_is_real(j)) {   /* "32.0" from some exporters */
        double x = json_real_value(j);
        if (!(x > 0) || x > (double)(1LL << 40) || x != (double)(long)x) return -1;
        *v = (long)x;
        return 1;
    }
    return -1;
}

static double dtype_bits(const char *s)
{
    static const struct { const char *name; double bits; } T[] = {
        {"float32", 32}, {"float", 32}, {"fp32", 32}, {"float16", 16}, {"half", 16},
        {"fp16", 16}, {"bfloat16", 16}, {"bf16", 16}, {"float8_e4m3fn", 8},
        {"float8_e5m2", 8}, {"fp8", 8}, {"int8", 8}, {"float64", 64}};
    if (!s) return 0;
    if (!strncmp(s, "torch.", 6)) s += 6;
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (!strcmp(s, T[i].name)) return T[i].bits;
    return 0;
}

int cal_hfconfig_read_mem(const char *buf, size_t len, cal_model_shape *out, char *why,
                          size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    if (!out || (!buf && len)) return CAL_EINVAL;
    if (len > CONFIG_CAP)
        return cal_why(why, why_len, CAL_ETOOBIG, "config.json is %zu bytes, over the %u cap",
                    len, CONFIG_CAP);
    json_error_t jerr;
    json_t *root = json_loadb(buf ? buf : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return cal_why(why, why_len, CAL_EPROTO, "config.json line %d column %d: %s",
                    jerr.line, jerr.column, jerr.text);
    int rc = CAL_OK;
    if (!json_is_object(root)) {
        rc = cal_why(why, why_len, CAL_EPROTO, "config.json is not a JSON object");
        goto out;
    }
    json_t *o = root;
    const char *where = "";
    json_t *tc = json_object_get(root, "text_config");
    if (!json_object_get(root, "num_hidden_layers") && json_is_object(tc)) {
        o = tc;
        where = "text_config.";
    }
    long layers = 0, heads = 0, kvh = 0, hd = 0, hidden = 0;
    static const char *const names[] = {"num_hidden_layers", "num_attention_heads",
                                        "num_key_value_heads", "head_dim", "hidden_size"};
    long *dst[] = {&layers, &heads, &kvh, &hd, &hidden};
    int have[5];
    for (int i = 0; i < 5; i++) {
        have[i] = get_pos_int(o, names[i], dst[i]);
        if (have[i] < 0) {
            rc = cal_why(why, why_len, CAL_ERANGE, "config.json: %s%s is not a positive "
                      "integer", where, names[i]);
            goto out;
        }
    }
    if (!have[0]) {
        rc = cal_why(why, why_len, CAL_ENOTFOUND, "config.json: %snum_hidden_layers is "
                  "missing", where);
        goto out;
    }
    if (!have[2] && !have[1]) {
        rc = cal_why(why, why_len, CAL_ENOTFOUND, "config.json: %snum_key_value_heads and "
                  "num_attention_heads are missing", where);
        goto out;
    }
    if (!have[2]) kvh = heads;
    if (!have[3]) {
        if (!have[1] || !have[4]) {
            rc = cal_why(why, why_len, CAL_ENOTFOUND, "config.json: %shead_dim is missing "
                      "and cannot be derived (needs hidden_size and num_attention_heads)",
                      where);
            goto out;
        }
        if (hidden % heads) {
            rc = cal_why(why, why_len, CAL_ERANGE, "config.json: %shidden_size %ld is not a "
                      "multiple of num_attention_heads %ld", where, hidden, heads);
            goto out;
        }
        hd = hidden / heads;
    }
    json_t *dt = json_object_get(o, "torch_dtype");
    if (!json_is_string(dt)) dt = json_object_get(root, "torch_dtype");
    if (!json_is_string(dt)) dt = json_object_get(o, "dtype");
    if (!json_is_string(dt)) dt = json_object_get(root, "dtype");
    cal_model_shape s;
    memset(&s, 0, sizeof s);
    snprintf(s.source, sizeof s.source, "config.json");
    json_t *arch = json_object_get(root, "architectures");
    if (json_is_array(arch) && json_is_string(json_array_get(arch, 0)))
        snprintf(s.arch, sizeof s.arch, "%s", json_string_value(json_array_get(arch, 0)));
    else if (json_is_string(json_object_get(root, "model_type")))
        snprintf(s.arch, sizeof s.arch, "%s",
                 json_string_value(json_object_get(root, "model_type")));
    if (json_is_string(json_object_get(root, "_name_or_path")))
        snprintf(s.name, sizeof s.name, "%s",
                 json_string_value(json_object_get(root, "_name_or_path")));
    s.layers = layers;
    s.heads = heads;
    s.kv_heads = kvh;
    s.k_dim = s.v_dim = hd;
    s.embedding = hidden;
    s.dtype_bits = json_is_string(dt) ? dtype_bits(json_string_value(dt)) : 0;
    *out = s;
out:
    json_decref(root);
    return rc;
}

int cal_hfconfig_read_file(const char *path, cal_model_shape *out, char *why,
                           size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    if (!path || !out) return CAL_EINVAL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return cal_why(why, why_len, errno == ENOENT ? CAL_ENOTFOUND : CAL_EIO, "%s: %s",
                    path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return cal_why(why, why_len, CAL_EIO, "%s: not a regular file", path);
    }
    if ((unsigned long long)st.st_size > CONFIG_CAP) {
        fclose(f);
        return cal_why(why, why_len, CAL_ETOOBIG, "%s is %lld bytes, over the %u cap", path,
                    (long long)st.st_size, CONFIG_CAP);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n ? n : 1);
    if (!buf) { fclose(f); return CAL_ENOMEM; }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    int rc = got == n ? cal_hfconfig_read_mem(buf, n, out, why, why_len)
                      : cal_why(why, why_len, CAL_EIO, "%s: short read", path);
    free(buf);
    return rc;
}
