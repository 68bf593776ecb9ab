/* caliper — finds a result by what the user typed: a JSON file on disk
 * (caliper's result JSON, a `caliper export` file, a vLLM bench file, told
 * apart here), or a run in the store ("7", "latest", a label); and the
 * importers by tool name. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "caliper/store.h"
#include "report_internal.h"

#define MAX_FILE_BYTES (256u << 20)

int cal_report_read_file(const char *path, char **text, size_t *len, char *err, size_t errn)
{
    FILE *f = fopen(path, "rb");
    if (!f) { cal_report_errf(err, errn, "%s: cannot open", path); return CAL_ENOTFOUND; }
    cal_buf b = CAL_BUF_INIT(MAX_FILE_BYTES);
    char chunk[65536];
    size_t n;
    int e = CAL_OK;
    while (!e && (n = fread(chunk, 1, sizeof chunk, f)) > 0) e = cal_buf_append(&b, chunk, n);
    if (!e && ferror(f)) e = CAL_EIO;
    fclose(f);
    if (e) {
        cal_report_errf(err, errn, "%s: %s", path, e == CAL_ETOOBIG ? "larger than 256 MiB" : cal_strerror(e));
        cal_buf_free(&b);
        return e;
    }
    *text = b.data ? b.data : calloc(1, 1);
    *len = b.len;
    return *text ? CAL_OK : CAL_ENOMEM;
}

int cal_result_from_json(const char *text, size_t len, const char *name,
                         cal_result **out, char *err, size_t errn)
{
    json_t *root;
    int e = cal_report_parse(text, len, &root, err, errn);
    if (e) return e;
    if (cal_report_own_is(root)) {
        e = cal_report_own_from_json(root, name, out, err, errn);
        json_decref(root);
        return e;
    }
    int vllm = json_object_get(root, "backend") && json_object_get(root, "duration") &&
               (json_object_get(root, "median_ttft_ms") || json_object_get(root, "output_throughput"));
    json_decref(root);
    if (vllm) return cal_import_vllm(text, len, name, out, err, errn);
    return cal_result_from_export(text, len, name, out, err, errn);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int cal_result_load(const char *ref, const char *db_path, cal_result **out,
                    char *err, size_t errn)
{
    struct stat st;
    if (stat(ref, &st) == 0 && S_ISREG(st.st_mode)) {
        char *text;
        size_t len;
        int e = cal_report_read_file(ref, &text, &len, err, errn);
        if (e) return e;
        e = cal_result_from_json(text, len, base_name(ref), out, err, errn);
        free(text);
        if (e && err && errn) {   /* say which file */
            char tmp[512];
            snprintf(tmp, sizeof tmp, "%s: %s", ref, err);
            snprintf(err, errn, "%s", tmp);
        }
        return e;
    }
    if (!*ref) {
        cal_report_errf(err, errn, "RUN: \"\" is empty: give an id, a label, latest or a file");
        return CAL_EINVAL;
    }
    if (!db_path || stat(db_path, &st) != 0) {
        cal_report_errf(err, errn, "\"%s\" is not a file, and there is no store to look it up in "
                        "(no such store: %s)", ref, db_path ? db_path : "(none)");
        return CAL_ENOTFOUND;
    }
    /* read-only: looking a run up never creates or migrates a store */
    cal_store *s = NULL;
    char why[400];
    int e = cal_store_open_ex(db_path, CAL_STORE_READONLY, &s, why, sizeof why);
    if (e) { cal_report_errf(err, errn, "%s", why); return e; }
    e = cal_result_from_store(s, ref, out, err, errn);
    cal_store_close(&s);
    return e;
}

const char CAL_IMPORT_TOOLS[] = "vllm, llama-bench, aiperf, genai-perf, guidellm";

int cal_result_import(const char *tool, const char *path, cal_result **out, char *err, size_t errn)
{
    int k = !strcmp(tool, "vllm") ? 0 : !strcmp(tool, "llama-bench") ? 1
          : !strcmp(tool, "aiperf") || !strcmp(tool, "genai-perf") ? 2
          : !strcmp(tool, "guidellm") ? 3 : -1;
    if (k < 0) {
        cal_report_errf(err, errn, "\"%s\" is not a tool caliper imports (%s)", tool,
                        CAL_IMPORT_TOOLS);
        return CAL_EINVAL;
    }
    char *text;
    size_t len;
    int e = cal_report_read_file(path, &text, &len, err, errn);
    if (e) return e;
    const char *nm = base_name(path);
    e = k == 0 ? cal_import_vllm(text, len, nm, out, err, errn)
      : k == 1 ? cal_import_llamabench(text, len, nm, out, err, errn)
      : k == 2 ? cal_import_aiperf(text, len, nm, tool, out, err, errn)
      : cal_import_guidellm(text, len, nm, out, err, errn);
    free(text);
    if (e && err && errn) {   /* say which file */
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s: %s", path, err);
        snprintf(err, errn, "%s", tmp);
    }
    return e;
}
