/* caliper — the result store's private parts, shared by its files: the
 * handle, the names of its enums in the tables, the bind and column helpers
 * (store.c opens and migrates, store_write.c writes, store_read.c reads,
 * store_sql.c holds the helpers they share). */
#ifndef CALIPER_STORE_SQL_H
#define CALIPER_STORE_SQL_H
#include <assert.h>
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/store.h"

#define TEL_BATCH 256
#define BUSY_TIMEOUT_MS 10000
/* Every stored timestamp (monotonic or wall ns) lies below 2^62 (146 years
 * of uptime, or the year 2116): a row beyond it is damaged, and readers
 * subtract these freely. */
#define TS_MAX (INT64_C(1) << 62)

struct cal_store {
    sqlite3 *db;
    int version;
    int open_rc;              /* SQLite's code for the last failed open step */
    int readonly;             /* opened with CAL_STORE_READONLY */
    unsigned char *has_col;   /* read-only at an older schema: [cal_summary_n_fields],
                                 1 where cells has that column; NULL: all there */
    cal_store_tel_row *tel;      /* queued telemetry rows [TEL_BATCH] */
    int64_t *tel_run;         /* their run ids */
    size_t n_tel;
    char why[320];            /* the store's own reason for the last failure, or "" */
};

/* Record why a call failed (cal_store_errmsg returns it) and return code. */
int cal_st_fail(cal_store *st, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Keep SQLite's message for cal_store_errmsg: finalizing a good statement
 * or a ROLLBACK resets it. Call where a failure is first seen. */
void cal_st_note(cal_store *st);
/* Run sql; CAL_ESTORE (its message kept) when it fails. */
int  cal_st_exec(cal_store *st, const char *sql);
/* Undo a failed write, keeping why it failed. */
void cal_st_rollback(cal_store *st);
/* The cells table's INSERT (select 0) or SELECT ... WHERE run_id=? (select
 * 1) with every summary column; a column an older schema lacks reads NULL
 * on a read-only handle. CAL_ETOOBIG when sql[n] is too small. */
int  cal_st_cell_sql(const cal_store *st, char *sql, size_t n, int select);
#define CELL_N_FIXED 23   /* the columns before the summary's */
#define CELL_PROMPT_COLS "prompt_basis, prompt_asked, prompt_offset"
#define CELL_N_PROMPT 3   /* the columns after the summary's (schema 9) */

/* ---- names ------------------------------------------------------------ */
static const char *const RUN_STATUS[] = {"running", "ok", "interrupted", "failed"};
static const char *const CELL_KIND[] = {"shots", "concurrency", "prompt-sweep", "rate"};
/* request statuses and shot kinds: their one name tables live with their
 * enums (cal_req_status_name, cal_shot_kind_key) */
static inline const char *req_key(int i) { return cal_req_status_name((cal_req_status)i); }
static inline const char *shot_key(int i) { return cal_shot_kind_key((cal_shot_kind)i); }

static inline int lookup(const char *const *names, int n, const char *s, int dflt)
{
    if (s)
        for (int i = 0; i < n; i++)
            if (!strcmp(names[i], s)) return i;
    return dflt;
}
static inline int lookup_fn(const char *(*name)(int), int n, const char *s, int dflt)
{
    if (s)
        for (int i = 0; i < n; i++)
            if (!strcmp(name(i), s)) return i;
    return dflt;
}

/* ---- helpers ---------------------------------------------------------- */
static inline char *dupstr(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* SQLITE_STATIC: every bound string outlives its statement's step (they
 * are the caller's, or locals finalized first), and a bind that copies
 * (SQLITE_TRANSIENT) can fail out of memory while the row is still
 * written, with NULL in that column. */
static inline void bind_text(sqlite3_stmt *s, int i, const char *v)
{
    int rc = v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
    assert(rc == SQLITE_OK || rc == SQLITE_TOOBIG);
    (void)rc;
}
static inline void bind_real(sqlite3_stmt *s, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(s, i, v);
    else sqlite3_bind_null(s, i);
}
static inline void bind_i64(sqlite3_stmt *s, int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
/* -1 means unknown: stored as NULL */
static inline void bind_opt(sqlite3_stmt *s, int i, int64_t v)
{
    if (v < 0) sqlite3_bind_null(s, i);
    else sqlite3_bind_int64(s, i, v);
}

static inline double col_real(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}
static inline int64_t col_opt(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, i);
}
static inline char *col_dup(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? dupstr((const char *)t) : NULL;
}
static inline void col_copy(sqlite3_stmt *s, int i, char *dst, size_t n)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, n, "%s", t ? (const char *)t : "");
}

#endif
