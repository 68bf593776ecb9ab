/* Fuzz target: the CSV reader and writer. Any bytes must read as records or
 * fail cleanly under each set of options; every field must lie inside the
 * reader's buffer and within its caps; and in strict RFC 4180 mode a record
 * written back by the writer must read back field for field. The named
 * numeric columns run over the same bytes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/csv.h"
#include "caliper/error.h"

static cal_csv_reader R, R2;

static void check_record(const cal_csv_reader *r, size_t nf, const cal_csv_opts *o)
{
    if (nf > CAL_CSV_FIELDS_MAX) abort();
    size_t cap = o->max_field && o->max_field < CAL_CSV_FIELD_MAX ? o->max_field
                                                                  : CAL_CSV_FIELD_MAX;
    for (size_t i = 0; i < nf; i++) {
        const char *f = r->field[i];
        if (f < r->buf || f >= r->buf + sizeof r->buf) abort();
        size_t n = strnlen(f, (size_t)(r->buf + sizeof r->buf - f));
        if (f + n >= r->buf + sizeof r->buf || n > cap) abort();
    }
}

/* Write the record, read it back, compare. */
static void round_trip(const cal_csv_reader *r, size_t nf)
{
    cal_buf b = CAL_BUF_INIT(1u << 20);
    cal_csv_writer w;
    cal_csv_writer_buf(&w, &b);
    for (size_t i = 0; i < nf; i++) cal_csv_put(&w, r->field[i]);
    if (cal_csv_end_row(&w) != CAL_OK) abort();
    cal_csv_reader_init(&R2, b.data, b.len, NULL);
    size_t nf2;
    if (cal_csv_next(&R2, &nf2, NULL, 0) != CAL_OK || nf2 != nf) abort();
    for (size_t i = 0; i < nf; i++)
        if (strcmp(R2.field[i], r->field[i])) abort();
    if (cal_csv_next(&R2, &nf2, NULL, 0) != CAL_OK || nf2 != 0) abort();
    cal_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16)) return 0;
    const char *text = (const char *)data;
    const cal_csv_opts opts[] = {
        {0},
        {.delim = ';', .trim = 1, .comments = 1, .skip_blank = 1, .same_count = 1},
        {.delim = ' ', .comments = 1, .skip_blank = 1},
        {.delim = '\t', .max_field = 7},
    };
    for (size_t k = 0; k < sizeof opts / sizeof *opts; k++) {
        cal_csv_reader_init(&R, text, size, &opts[k]);
        size_t nf, records = 0;
        char why[256];
        for (;;) {
            int rc = cal_csv_next(&R, &nf, why, sizeof why);
            if (rc) {
                if (!why[0] || (rc != CAL_EPROTO && rc != CAL_ETOOBIG)) abort();
                break;
            }
            if (nf == 0) break;
            if (++records > size + 1) abort();   /* each record eats input */
            check_record(&R, nf, &opts[k]);
            if (k == 0) round_trip(&R, nf);
        }
    }
    double x[64], y[64];
    cal_csv_col cols[2] = {{"1", CAL_U_COUNT, NULL, x}, {"t", CAL_U_TIME, "ms", y}};
    size_t n = 0;
    char why[256];
    if (cal_csv_columns(text, size, cols, 2, 64, &n, why, sizeof why) == CAL_OK) {
        if (n > 64) abort();
        for (size_t i = 0; i < n; i++)
            if (!isfinite(x[i]) || !isfinite(y[i])) abort();
    }
    return 0;
}
