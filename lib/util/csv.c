/* CSV in and out (RFC 4180): the bounded reader, the quoting writer and the
 * named numeric columns built on the reader. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/csv.h"
#include "caliper/error.h"
#include "lib/util/c_locale.h"

#define COLUMNS_FILE_CAP (16u << 20)

static int is_blank(char c) { return c == ' ' || c == '\t'; }
static int is_eol(char c) { return c == '\n' || c == '\r'; }

/* OWASP's CSV injection: a spreadsheet runs a cell that starts with one of
 * these as a formula (=HYPERLINK(...), +cmd|calc, @SUM(1+1)). */
static int formula_start(const char *s)
{
    return *s == '=' || *s == '+' || *s == '-' || *s == '@' || *s == '\t' || *s == '\r';
}

void cal_csv_reader_init(cal_csv_reader *r, const char *text, size_t len,
                         const cal_csv_opts *opts)
{
    memset(r, 0, offsetof(cal_csv_reader, field));
    r->p = text;
    r->end = text ? text + len : text;
    if (text && len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) r->p += 3;
    if (opts) r->o = *opts;
    if (!r->o.delim) r->o.delim = ',';
    if (!r->o.max_field || r->o.max_field > CAL_CSV_FIELD_MAX) r->o.max_field = CAL_CSV_FIELD_MAX;
    r->next_line = 1;
}

/* Past the end of the line at p (CRLF, LF or a lone CR); counts it. */
static const char *skip_line(cal_csv_reader *r, const char *p)
{
    while (p < r->end && !is_eol(*p)) p++;
    if (p < r->end) {
        if (*p == '\r' && p + 1 < r->end && p[1] == '\n') p++;
        p++;
        r->next_line++;
    }
    return p;
}

/* An error leaves the reader at the end: later calls see no more records. */
#define FAIL(code, ...) do { r->p = r->end; return cal_why(why, why_len, code, __VA_ARGS__); } while (0)

int cal_csv_next(cal_csv_reader *r, size_t *nf, char *why, size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    *nf = 0;
    const char delim = r->o.delim;
    const int blanks_sep = delim == ' ', trim = r->o.trim || blanks_sep;
    for (;;) {
        if (!r->p || r->p >= r->end) return CAL_OK;
        r->line = r->next_line;
        const char *p = r->p;
        if (r->o.skip_blank || r->o.comments) {
            const char *q = p;
            if (trim) while (q < r->end && is_blank(*q)) q++;
            if ((r->o.skip_blank && (q == r->end || is_eol(*q))) ||
                (r->o.comments && q < r->end && *q == '#')) {
                r->p = skip_line(r, q);
                continue;
            }
        }
        size_t n = 0, used = 0;
        if (blanks_sep) while (p < r->end && is_blank(*p)) p++;
        for (;;) {
            if (n == CAL_CSV_FIELDS_MAX)
                FAIL(CAL_ETOOBIG, "line %zu has more than %d fields", r->line, CAL_CSV_FIELDS_MAX);
            size_t start = used;
#define PUT(ch) do {                                                                      \
                if (used - start >= r->o.max_field)                                           \
                    FAIL(CAL_ETOOBIG, "line %zu: field %zu is longer than %zu bytes", r->line, \
                         n + 1, r->o.max_field);                                              \
                if (used + 1 >= CAL_CSV_RECORD_MAX)                                           \
                    FAIL(CAL_ETOOBIG, "line %zu: a record longer than %d bytes", r->line,     \
                         CAL_CSV_RECORD_MAX - 1);                                             \
                r->buf[used++] = (ch);                                                        \
            } while (0)
            if (trim) while (p < r->end && is_blank(*p)) p++;
            if (p < r->end && *p == '"') {
                size_t qline = r->next_line;
                p++;
                for (;;) {
                    if (p >= r->end)
                        FAIL(CAL_EPROTO, "line %zu: the quoted field opened there is not closed",
                             qline);
                    char c = *p;
                    if (c == '"') {
                        if (p + 1 < r->end && p[1] == '"') { PUT('"'); p += 2; continue; }
                        p++;
                        break;
                    }
                    if (c == '\0') FAIL(CAL_EPROTO, "line %zu holds a NUL byte", r->next_line);
                    if (c == '\n' || (c == '\r' && !(p + 1 < r->end && p[1] == '\n')))
                        r->next_line++;
                    PUT(c);
                    p++;
                }
                /* the writer's neutralised text cell ('=...) reads as written */
                /* ('' before a formula start is a text that began with ' itself) */
                size_t j = start + 1;
                while (j < used && r->buf[j] == '\'') j++;
                if (used - start >= 2 && r->buf[start] == '\'' && j < used &&
                    formula_start(r->buf + j)) {
                    memmove(r->buf + start, r->buf + start + 1, used - start - 1);
                    used--;
                }
                if (trim && !blanks_sep) while (p < r->end && is_blank(*p)) p++;
                if (p < r->end && *p != delim && !is_eol(*p) && !(blanks_sep && is_blank(*p)))
                    FAIL(CAL_EPROTO, "line %zu: text after the closing quote of field %zu",
                         r->next_line, n + 1);
            } else {
                while (p < r->end && *p != delim && !is_eol(*p) && !(blanks_sep && is_blank(*p))) {
                    if (*p == '"')
                        FAIL(CAL_EPROTO, "line %zu: a quote inside unquoted field %zu (quote "
                             "the whole field and double the quote)", r->line, n + 1);
                    if (*p == '\0') FAIL(CAL_EPROTO, "line %zu holds a NUL byte", r->line);
                    PUT(*p);
                    p++;
                }
                if (trim) while (used > start && is_blank(r->buf[used - 1])) used--;
            }
#undef PUT
            if (used + 1 > CAL_CSV_RECORD_MAX)
                FAIL(CAL_ETOOBIG, "line %zu: a record longer than %d bytes", r->line,
                     CAL_CSV_RECORD_MAX - 1);
            r->buf[used++] = '\0';
            r->field[n++] = r->buf + start;
            if (blanks_sep) {
                while (p < r->end && is_blank(*p)) p++;
                if (p < r->end && !is_eol(*p)) continue;
            } else if (p < r->end && *p == delim) {
                p++;
                continue;
            }
            if (p < r->end) {   /* the end of the record's line */
                if (*p == '\r' && p + 1 < r->end && p[1] == '\n') p++;
                p++;
                r->next_line++;
            }
            break;
        }
        r->p = p;
        r->record++;
        if (r->o.same_count) {
            if (r->first_count == 0) r->first_count = n;
            else if (n != r->first_count)
                FAIL(CAL_EPROTO, "line %zu has %zu field%s where the first record has %zu",
                     r->line, n, n == 1 ? "" : "s", r->first_count);
        }
        *nf = n;
        return CAL_OK;
    }
}
#undef FAIL

int cal_csv_read_file(const char *path, size_t max_bytes, char **text, size_t *len,
                      char *why, size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    if (!path || !text || !len) return CAL_EINVAL;
    *text = NULL;
    *len = 0;
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return cal_why(why, why_len, errno == ENOENT ? CAL_ENOTFOUND : CAL_EIO, "%s: %s",
                       path, strerror(errno));
    size_t alloc = 65536, n = 0;
    char *buf = malloc(alloc + 1);
    int rc = buf ? CAL_OK : CAL_ENOMEM;
    while (rc == CAL_OK) {
        if (n == alloc) {
            if (alloc >= max_bytes + 1) {
                rc = cal_why(why, why_len, CAL_ETOOBIG, "%s is over %zu bytes", path, max_bytes);
                break;
            }
            size_t na = alloc * 2 > max_bytes + 1 ? max_bytes + 1 : alloc * 2;
            char *nb = realloc(buf, na + 1);
            if (!nb) { rc = CAL_ENOMEM; break; }
            buf = nb;
            alloc = na;
        }
        size_t got = fread(buf + n, 1, alloc - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) rc = cal_why(why, why_len, CAL_EIO, "%s: read failed", path);
            break;
        }
    }
    if (rc == CAL_OK && n > max_bytes)
        rc = cal_why(why, why_len, CAL_ETOOBIG, "%s is over %zu bytes", path, max_bytes);
    if (!is_stdin) fclose(f);
    if (rc) { free(buf); return rc; }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return CAL_OK;
}

/* ---- writer ------------------------------------------------------------- */

void cal_csv_writer_buf(cal_csv_writer *w, cal_buf *b)
{
    memset(w, 0, sizeof *w);
    w->b = b;
    w->delim = ',';
}

void cal_csv_writer_file(cal_csv_writer *w, FILE *f)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->delim = ',';
}

static int w_raw(cal_csv_writer *w, const char *s, size_t n)
{
    if (w->err) return w->err;
    if (n == 0) return CAL_OK;
    int rc;
    if (w->b) rc = cal_buf_append(w->b, s, n);
    else if (w->f) rc = fwrite(s, 1, n, w->f) == n ? CAL_OK : CAL_EIO;
    else rc = CAL_EINVAL;
    return w->err = rc;
}

static int needs_quote(const char *s, char delim)
{
    size_t n = strlen(s);
    if (n && (is_blank(s[0]) || is_blank(s[n - 1]))) return 1;
    /* a reader skips a BOM at the start of a file: keep it a field's */
    if (!strncmp(s, "\xEF\xBB\xBF", 3)) return 1;
    for (; *s; s++)
        if (*s == delim || *s == '"' || *s == '\r' || *s == '\n') return 1;
    return 0;
}

/* A plain decimal number, sign and exponent allowed ("-2.5", "1e-05"): a
 * spreadsheet reads it as that number, not a formula, so a text cell that
 * is one is written as it is (a negative value stays a number). */
static int plain_number(const char *s)
{
    if (*s == '+' || *s == '-') s++;
    int digits = 0;
    while (*s >= '0' && *s <= '9') s++, digits++;
    if (*s == '.') for (s++; *s >= '0' && *s <= '9'; s++) digits++;
    if (!digits) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    return *s == '\0';
}

/* A text cell a spreadsheet would run as a formula: written as OWASP
 * recommends, a ' before it and the whole field quoted; a text that already
 * starts with ' before such a character gets one more, so the reader, which
 * drops one, gives back what was written. */
static int neutralise(const char *s)
{
    if (*s == '\'') {   /* ' then a formula start: one ' more, so the reader's drop gives it back */
        while (*s == '\'') s++;
        return formula_start(s);
    }
    return formula_start(s) && !plain_number(s);
}

static int put_field(cal_csv_writer *w, const char *s, int text)
{
    char d = w->delim ? w->delim : ',';
    if (w->nfield++ && w_raw(w, &d, 1)) return w->err;
    if (!s) return w->err;
    int quote_mark = text && neutralise(s);
    if (!quote_mark && !needs_quote(s, d)) return w_raw(w, s, strlen(s));
    w_raw(w, quote_mark ? "\"'" : "\"", quote_mark ? 2 : 1);
    for (const char *q; (q = strchr(s, '"')); s = q + 1)
        if (w_raw(w, s, (size_t)(q - s) + 1) || w_raw(w, "\"", 1)) return w->err;
    w_raw(w, s, strlen(s));
    return w_raw(w, "\"", 1);
}

int cal_csv_put(cal_csv_writer *w, const char *s) { return put_field(w, s, 1); }

int cal_csv_put_num(cal_csv_writer *w, double v, int sig)
{
    if (!isfinite(v)) return put_field(w, "", 0);
    char t[64];
    cal_snprintf(t, sizeof t, "%.*g", sig > 0 && sig <= 17 ? sig : 6, v);
    return put_field(w, t, 0);
}

int cal_csv_put_int(cal_csv_writer *w, long long v)
{
    char t[32];
    snprintf(t, sizeof t, "%lld", v);
    return put_field(w, t, 0);
}

int cal_csv_end_row(cal_csv_writer *w)
{
    w->nfield = 0;
    return w->crlf ? w_raw(w, "\r\n", 2) : w_raw(w, "\n", 1);
}

int cal_csv_quote(const char *s, char *out, size_t out_len)
{
    if (!s || !out || out_len == 0) return CAL_EINVAL;
    size_t k = 0;
    int mark = neutralise(s), q = mark || needs_quote(s, ',');
#define OUT(ch) do { if (k + 1 >= out_len) { out[0] = '\0'; return CAL_ETOOBIG; } \
                     out[k++] = (ch); } while (0)
    if (q) OUT('"');
    if (mark) OUT('\'');
    for (; *s; s++) {
        if (*s == '"') OUT('"');
        OUT(*s);
    }
    if (q) OUT('"');
#undef OUT
    out[k] = '\0';
    return CAL_OK;
}

/* ---- named numeric columns ---------------------------------------------- */

static int is_number(const char *s)
{
    char *end;
    if (!*s) return 0;
    cal_strtod(s, &end);
    return end != s;
}

/* The delimiter of a columns file: the first of ',', ';', tab on the first
 * line that is neither blank nor a comment; else runs of blanks. */
static char sniff_delim(const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) p += 3;
    while (p < end) {
        const char *e = p;
        while (e < end && !is_eol(*e)) e++;
        const char *q = p;
        while (q < e && is_blank(*q)) q++;
        if (q < e && *q != '#') {
            for (; q < e; q++)
                if (*q == ',' || *q == ';' || *q == '\t') return *q;
            return ' ';
        }
        p = e < end ? e + 1 : e;
    }
    return ',';
}

int cal_csv_columns(const char *text, size_t len, cal_csv_col *cols, size_t ncols,
                    size_t cap, size_t *nrows, char *why, size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    if (!text || !cols || !nrows || ncols == 0 || ncols > CAL_CSV_FIELDS_MAX) return CAL_EINVAL;
    *nrows = 0;
    cal_csv_opts o = {.delim = sniff_delim(text, len), .trim = 1, .comments = 1,
                      .skip_blank = 1};
    cal_csv_reader *r = malloc(sizeof *r);
    if (!r) return CAL_ENOMEM;
    cal_csv_reader_init(r, text, len, &o);
    size_t idx[CAL_CSV_FIELDS_MAX];
    size_t rows = 0, nf, width = 0, header_line = 0;
    char hdr[512] = "";
    int rc;
    while ((rc = cal_csv_next(r, &nf, why, why_len)) == CAL_OK && nf > 0) {
        if (width == 0) {
            width = nf;
            int numeric = 1;
            for (size_t i = 0; i < nf; i++) if (!is_number(r->field[i])) numeric = 0;
            if (!numeric) header_line = r->line;
            if (!numeric) {   /* header: find each column by name */
                size_t hl = 0;
                for (size_t i = 0; i < nf && hl + 2 < sizeof hdr; i++) {
                    int w = snprintf(hdr + hl, sizeof hdr - hl, "%s%s", i ? "," : "", r->field[i]);
                    if (w < 0) break;
                    hl += (size_t)w;
                }
            }
            for (size_t c = 0; c < ncols; c++) {
                size_t i = nf;
                if (!numeric)
                    for (i = 0; i < nf; i++) if (!strcmp(r->field[i], cols[c].name)) break;
                if (i == nf) {   /* "1", "2"... name a column by position */
                    char *end;
                    long k = strtol(cols[c].name, &end, 10);
                    if (!*end && k >= 1 && (size_t)k <= nf) i = (size_t)k - 1;
                }
                if (i == nf) {
                    rc = numeric
                        ? cal_why(why, why_len, CAL_ENOTFOUND, "no header line, so column \"%s\" "
                                  "cannot be found (name columns 1, 2, ... up to %zu, or add a "
                                  "header)", cols[c].name, nf)
                        : cal_why(why, why_len, CAL_ENOTFOUND, "no column \"%s\" in the header "
                                  "(%s)", cols[c].name, hdr);
                    goto out;
                }
                idx[c] = i;
            }
            if (!numeric) continue;
        }
        if (nf != width) {
            rc = cal_why(why, why_len, CAL_EPROTO, "line %zu (data row %zu) has %zu field%s where "
                         "the %s has %zu field%s%s", r->line, rows + 1, nf, nf == 1 ? "" : "s",
                         header_line ? "header" : "first row", width, width == 1 ? "" : "s",
                         o.delim == ',' && nf > width
                             ? " (a decimal comma? write 0.5, not 0,5, or quote the field)" : "");
            goto out;
        }
        if (rows == cap) {
            rc = cal_why(why, why_len, CAL_ETOOBIG, "more than %zu data rows", cap);
            goto out;
        }
        for (size_t c = 0; c < ncols; c++) {
            const char *cell = r->field[idx[c]];
            double v;
            if (cal_unit_parse(cols[c].unit, cell, cols[c].bare_unit, &v) != CAL_OK) {
                rc = cal_why(why, why_len, CAL_EPROTO, "line %zu (data row %zu), column \"%s\": "
                             "\"%.64s\" is not a %s%s%s", r->line, rows + 1, cols[c].name, cell,
                             cal_unit_name(cols[c].unit), cols[c].bare_unit ? " in " : "",
                             cols[c].bare_unit ? cols[c].bare_unit : "");
                goto out;
            }
            cols[c].out[rows] = v;
        }
        rows++;
    }
out:
    free(r);
    if (rc == CAL_OK) *nrows = rows;
    return rc;
}

int cal_csv_columns_file(const char *path, cal_csv_col *cols, size_t ncols, size_t cap,
                         size_t *nrows, char *why, size_t why_len)
{
    char *text;
    size_t len;
    int rc = cal_csv_read_file(path, COLUMNS_FILE_CAP, &text, &len, why, why_len);
    if (rc) return rc;
    rc = cal_csv_columns(text, len, cols, ncols, cap, nrows, why, why_len);
    free(text);
    return rc;
}
