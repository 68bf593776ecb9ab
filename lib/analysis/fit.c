/* Fits over measured points: CSV columns in, least squares lines with a
 * duplicate-x check, and the before/after comparison of two prefill lines. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/fit.h"
#include "lib/util/c_locale.h"

#define LINE_CAP  4096
#define FIELD_CAP 64
#define FILE_CAP  (16u << 20)


/* Split line (modified in place) into fields; returns the count (<= cap).
 * With a ',', ';' or tab anywhere those separate (empty fields kept);
 * otherwise runs of spaces do. Fields are trimmed of spaces and '\r'. */
static size_t split(char *line, char **f, size_t cap)
{
    size_t n = 0;
    char *p = line;
    if (strpbrk(line, ",;\t")) {
        for (;;) {
            while (*p == ' ') p++;
            char *start = p;
            while (*p && *p != ',' && *p != ';' && *p != '\t') p++;
            char *end = p;
            while (end > start && (end[-1] == ' ' || end[-1] == '\r')) end--;
            int more = *p != '\0';
            *end = '\0';
            if (n == cap) break;
            f[n++] = start;
            if (!more) break;
            p++;
        }
        return n;
    }
    while (n < cap) {
        while (*p == ' ' || *p == '\r') p++;
        if (!*p) break;
        f[n++] = p;
        while (*p && *p != ' ' && *p != '\r') p++;
        if (!*p) break;
        *p++ = '\0';
    }
    return n;
}

static int is_number(const char *s)
{
    char *end;
    if (!*s) return 0;
    cal_strtod(s, &end);
    return end != s;
}

int cal_csv_columns(const char *text, size_t len, cal_csv_col *cols, size_t ncols,
                    size_t cap, size_t *nrows, char *why, size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    if (!text || !cols || !nrows || ncols == 0 || ncols > FIELD_CAP) return CAL_EINVAL;
    size_t idx[FIELD_CAP];
    int header_done = 0;
    size_t rows = 0, lineno = 0, pos = 0;
    char line[LINE_CAP], hdr_copy[LINE_CAP] = "";
    char *f[FIELD_CAP];
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
        lineno++;
        if (ll >= LINE_CAP)
            return cal_why(why, why_len, CAL_ETOOBIG, "line %zu is longer than %d bytes",
                        lineno, LINE_CAP - 1);
        memcpy(line, text + pos, ll);
        line[ll] = '\0';
        pos += ll + (nl ? 1 : 0);
        if (memchr(line, '\0', ll))
            return cal_why(why, why_len, CAL_EPROTO, "line %zu holds a NUL byte", lineno);
        char *s = line;
        while (isspace((unsigned char)*s)) s++;
        if (!*s || *s == '#') continue;
        size_t nf = split(s, f, FIELD_CAP);
        if (!header_done) {
            header_done = 1;
            int numeric = 1;
            for (size_t i = 0; i < nf; i++) if (!is_number(f[i])) numeric = 0;
            if (!numeric) {
                /* header: find each column by name */
                size_t hl = 0;
                for (size_t i = 0; i < nf && hl + 2 < sizeof hdr_copy; i++)
                    hl += (size_t)snprintf(hdr_copy + hl, sizeof hdr_copy - hl, "%s%s",
                                           i ? "," : "", f[i]);
                for (size_t c = 0; c < ncols; c++) {
                    size_t i;
                    for (i = 0; i < nf; i++) if (!strcmp(f[i], cols[c].name)) break;
                    if (i == nf) {   /* "1", "2"... name a column by position */
                        char *end;
                        long k = strtol(cols[c].name, &end, 10);
                        if (!*end && k >= 1 && (size_t)k <= nf) i = (size_t)k - 1;
                    }
                    if (i == nf)
                        return cal_why(why, why_len, CAL_ENOTFOUND, "no column \"%s\" in the "
                                    "header (%s)", cols[c].name, hdr_copy);
                    idx[c] = i;
                }
                continue;
            }
            for (size_t c = 0; c < ncols; c++) {
                char *end;
                long k = strtol(cols[c].name, &end, 10);
                if (*end || k < 1 || k > FIELD_CAP)
                    return cal_why(why, why_len, CAL_ENOTFOUND, "no header line, so column "
                                "\"%s\" cannot be found (name columns 1, 2, ... or add a "
                                "header)", cols[c].name);
                idx[c] = (size_t)k - 1;
            }
        }
        if (rows == cap)
            return cal_why(why, why_len, CAL_ETOOBIG, "more than %zu data rows", cap);
        for (size_t c = 0; c < ncols; c++) {
            if (idx[c] >= nf)
                return cal_why(why, why_len, CAL_EPROTO, "line %zu has %zu fields, column "
                            "\"%s\" is field %zu", lineno, nf, cols[c].name, idx[c] + 1);
            double v;
            if (cal_unit_parse(cols[c].unit, f[idx[c]], cols[c].bare_unit, &v) != CAL_OK)
                return cal_why(why, why_len, CAL_EPROTO, "line %zu, column \"%s\": \"%s\" is "
                            "not a %s%s%s", lineno, cols[c].name, f[idx[c]],
                            cal_unit_name(cols[c].unit), cols[c].bare_unit ? " in " : "",
                            cols[c].bare_unit ? cols[c].bare_unit : "");
            cols[c].out[rows] = v;
        }
        rows++;
    }
    *nrows = rows;
    return CAL_OK;
}

int cal_csv_columns_file(const char *path, cal_csv_col *cols, size_t ncols, size_t cap,
                         size_t *nrows, char *why, size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    if (!path) return CAL_EINVAL;
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return cal_why(why, why_len, errno == ENOENT ? CAL_ENOTFOUND : CAL_EIO, "%s: %s",
                    path, strerror(errno));
    size_t alloc = 65536, n = 0;
    char *buf = malloc(alloc);
    int rc = buf ? CAL_OK : CAL_ENOMEM;
    while (rc == CAL_OK) {
        if (n == alloc) {
            if (alloc >= FILE_CAP) {
                rc = cal_why(why, why_len, CAL_ETOOBIG, "%s is over %u bytes", path, FILE_CAP);
                break;
            }
            char *nb = realloc(buf, alloc * 2);
            if (!nb) { rc = CAL_ENOMEM; break; }
            buf = nb;
            alloc *= 2;
        }
        size_t got = fread(buf + n, 1, alloc - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) rc = cal_why(why, why_len, CAL_EIO, "%s: read failed", path);
            break;
        }
    }
    if (!is_stdin) fclose(f);
    if (rc == CAL_OK) rc = cal_csv_columns(buf, n, cols, ncols, cap, nrows, why, why_len);
    free(buf);
    return rc;
}

int cal_fit_line(const double *x, const double *y, size_t n, size_t min_n, double level,
                 cal_linfit *out, size_t *dup_i, size_t *dup_j)
{
    if (!x || !y || !out || n < min_n || n < 2) return CAL_EINVAL;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (x[i] == x[j]) {
                if (dup_i) *dup_i = i;
                if (dup_j) *dup_j = j;
                return CAL_ERANGE;
            }
    return cal_stats_linfit(x, y, n, level, out);
}

int cal_fit_delta_of(const cal_linfit *b4, const cal_linfit *af, char which,
                     cal_fit_delta *out)
{
    if (!b4 || !af || !out || !b4->has_ci || !af->has_ci || (which != 'a' && which != 'b'))
        return CAL_EINVAL;
    double v1 = which == 'a' ? b4->a : b4->b, v2 = which == 'a' ? af->a : af->b;
    double s1 = which == 'a' ? b4->se_a : b4->se_b, s2 = which == 'a' ? af->se_a : af->se_b;
    cal_fit_delta d = {0};
    d.d = v2 - v1;
    double q1 = s1 * s1, q2 = s2 * s2;
    d.se = sqrt(q1 + q2);
    double den = (q1 > 0 ? q1 * q1 / b4->df : 0) + (q2 > 0 ? q2 * q2 / af->df : 0);
    d.df = den > 0 ? (q1 + q2) * (q1 + q2) / den : b4->df + af->df;
    double level = af->level;
    double tc = cal_stats_t_quantile(0.5 + level / 2, d.df);
    d.lo = d.d - tc * d.se;
    d.hi = d.d + tc * d.se;
    d.excludes_zero = d.se > 0 ? (d.lo > 0 || d.hi < 0) : d.d != 0;
    *out = d;
    return CAL_OK;
}

cal_prefill_verdict cal_fit_prefill_verdict(const cal_fit_delta *da, const cal_fit_delta *db)
{
    int a = da && da->excludes_zero, b = db && db->excludes_zero;
    return a && b ? CAL_PREFILL_BOTH : a ? CAL_PREFILL_OVERHEAD
         : b ? CAL_PREFILL_PER_TOKEN : CAL_PREFILL_NO_CHANGE;
}
