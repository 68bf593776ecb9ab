/* caliper — CSV in and out (RFC 4180), one module for every CSV caliper
 * reads or writes: a bounded, allocation-free reader over text in memory, a
 * writer that quotes a field only when it must, and on top of the reader the
 * named numeric columns `caliper fit` and `caliper calc` read.
 * Ownership: the reader points into its own record buffer (valid until the
 * next call); cal_csv_read_file hands the caller a malloc'd text to free. */
#ifndef CALIPER_CSV_H
#define CALIPER_CSV_H
#include <stddef.h>
#include <stdio.h>
#include "caliper/buf.h"
#include "caliper/units.h"

/* ---- reader -------------------------------------------------------------
 * RFC 4180: fields split by the delimiter, records by CRLF or LF (a lone CR
 * ends a record too), a field in double quotes may hold the delimiter, line
 * breaks and "" for one quote. A UTF-8 byte order mark before the first
 * record is skipped. A quote inside an unquoted field, text after a closing
 * quote, an unclosed quote and a NUL byte are errors (CAL_EPROTO), each
 * naming the line. Bounded: a field over max_field bytes, a record over
 * CAL_CSV_RECORD_MAX bytes or CAL_CSV_FIELDS_MAX fields is CAL_ETOOBIG.
 * A quoted field that starts with ' before =, +, -, @, tab or CR reads
 * without the ': the writer's neutralised text cell reads back as it was. */
#define CAL_CSV_RECORD_MAX 16384  /* decoded bytes of one record, NULs included */
#define CAL_CSV_FIELD_MAX  4096   /* default and largest max_field */
#define CAL_CSV_FIELDS_MAX 256    /* fields of one record */

typedef struct cal_csv_opts {
    char   delim;       /* ',' (also when 0), ';', '\t', or ' ': runs of
                           spaces and tabs separate, and blanks at either end
                           of a line are ignored */
    int    trim;        /* 1: spaces and tabs around an unquoted field are
                           dropped (RFC 4180 keeps them) */
    int    comments;    /* 1: a record whose first byte (after blanks, with
                           trim) is '#' is skipped */
    int    skip_blank;  /* 1: empty lines are skipped (RFC 4180 reads one as a
                           record of one empty field) */
    int    same_count;  /* 1: every record must have as many fields as the
                           first one: CAL_EPROTO names the line otherwise */
    size_t max_field;   /* bytes of one field; 0 or more than CAL_CSV_FIELD_MAX
                           means CAL_CSV_FIELD_MAX */
} cal_csv_opts;

typedef struct cal_csv_reader {
    const char  *p, *end;          /* what is left of the text */
    cal_csv_opts o;
    size_t       line;             /* physical line where the current record
                                      starts, from 1 */
    size_t       next_line;        /* where the next one starts */
    size_t       record;           /* records returned so far (skipped ones
                                      not counted) */
    size_t       first_count;      /* fields of the first record; 0 before it */
    const char  *field[CAL_CSV_FIELDS_MAX]; /* [nf] the current record's fields */
    char         buf[CAL_CSV_RECORD_MAX];   /* their bytes, NUL-terminated */
} cal_csv_reader;

/* Start reading text[len] (not copied: it must outlive the reader).
 * opts NULL: strict RFC 4180 with ',' and no checks beyond the format. */
void cal_csv_reader_init(cal_csv_reader *r, const char *text, size_t len,
                         const cal_csv_opts *opts);

/* Read the next record: CAL_OK with *nf > 0 and r->field[0 .. *nf) set, or
 * CAL_OK with *nf == 0 at the end of the text. On an error (see above) why
 * says which line and what; the reader stays at the end. r->line is the
 * record's first line, for the caller's own messages. */
int cal_csv_next(cal_csv_reader *r, size_t *nf, char *why, size_t why_len);

/* Read a whole file (or stdin for "-") into a malloc'd, NUL-terminated text
 * of at most max_bytes: *text (caller frees) and *len. CAL_ENOTFOUND: no such
 * file; CAL_EIO: a read error; CAL_ETOOBIG: over max_bytes; why names the
 * path. */
int cal_csv_read_file(const char *path, size_t max_bytes, char **text, size_t *len,
                      char *why, size_t why_len);

/* ---- writer -------------------------------------------------------------
 * Into a cal_buf or a FILE. A field is quoted when it holds the delimiter,
 * a quote, CR or LF, or starts or ends with a space or tab, or starts with
 * a BOM (which a reader would skip at the start of a file); quotes inside
 * are doubled. A text cell (cal_csv_put) that starts with =, +, -, @, tab
 * or CR and is not a plain decimal number is one a spreadsheet would run as
 * a formula (CSV injection): it is written as OWASP recommends, quoted with
 * a ' before it ("'=HYPERLINK(...)"). Numbers are never touched: the
 * numeric cells (cal_csv_put_num, cal_csv_put_int) and a text cell that is
 * a plain number ("-2.5", "1e-05") are written as they are, so a negative
 * value stays a number in the sheet. Records end with "\n" (crlf: "\r\n").
 * The first error sticks: every later call returns it, and nothing more is
 * written. */
typedef struct cal_csv_writer {
    cal_buf *b;          /* exactly one of b and f */
    FILE    *f;
    char     delim;      /* ',' when 0 */
    int      crlf;       /* 1: end records with CRLF */
    size_t   nfield;     /* fields written in the current record */
    int      err;        /* first error (CAL_ETOOBIG, CAL_ENOMEM, CAL_EIO) */
} cal_csv_writer;

void cal_csv_writer_buf(cal_csv_writer *w, cal_buf *b);
void cal_csv_writer_file(cal_csv_writer *w, FILE *f);
/* One text field (neutralised as above); NULL writes an empty field. */
int cal_csv_put(cal_csv_writer *w, const char *s);
/* One number with %.*g (sig significant digits; 6 when 0); a NaN or an
 * infinity writes an empty field: absent is never printed as a number. */
int cal_csv_put_num(cal_csv_writer *w, double v, int sig);
int cal_csv_put_int(cal_csv_writer *w, long long v);
/* End the record. */
int cal_csv_end_row(cal_csv_writer *w);
/* Quote one field into out[out_len] (what cal_csv_put writes, with ','):
 * CAL_ETOOBIG when it does not fit. */
int cal_csv_quote(const char *s, char *out, size_t out_len);

/* ---- named numeric columns ----------------------------------------------
 * Records with the same field count throughout (CAL_EPROTO names the first
 * line that differs: a decimal comma is the usual cause). The delimiter is
 * the first of ',', ';', tab found on the first record's line, else runs of
 * blanks. Blanks around fields are dropped; empty lines and lines starting
 * with '#' are skipped. When the first record has a field that is not a
 * number it is the header and columns are found by name; otherwise (and for
 * names the header lacks) "1", "2", ... name columns by position.
 * Each cell parses through the unit table as `unit`, with `bare_unit` the
 * meaning of a bare number (NULL: a bare number is taken as-is). */
typedef struct cal_csv_col {
    const char *name;        /* header name, or "1", "2"... by position */
    cal_unit    unit;
    const char *bare_unit;   /* "ms", "GB", ...; NULL: the base unit */
    double     *out;         /* [cap] values, row order */
} cal_csv_col;

/* Read columns from text[len]. *nrows gets the data rows read.
 * CAL_ENOTFOUND: a column name not in the header (why names it and lists
 * the header); CAL_EPROTO: a cell that is not a number of its unit (why
 * gives line and column), a record whose field count differs from the
 * first, malformed CSV; CAL_ETOOBIG: more than cap rows, a field over 4096
 * bytes. */
int cal_csv_columns(const char *text, size_t len, cal_csv_col *cols, size_t ncols,
                    size_t cap, size_t *nrows, char *why, size_t why_len);
/* The same from a file (at most 16 MiB; "-" reads stdin). */
int cal_csv_columns_file(const char *path, cal_csv_col *cols, size_t ncols,
                         size_t cap, size_t *nrows, char *why, size_t why_len);

#endif
