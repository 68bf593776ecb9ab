/* The result store's shared helpers, below its open, write and read files:
 * the handle's error text, SQLite statements run and rolled back, the names
 * of its enums, and the cells table's column list. */
#include <stdarg.h>
#include "lib/util/c_locale.h"
#include "store_sql.h"

/* Record why a call failed (cal_store_errmsg returns it) and return code. */
int cal_st_fail(cal_store *st, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(st->why, sizeof st->why, fmt, ap);   /* C-locale numbers in messages */
    va_end(ap);
    return code;
}

/* ---- names ------------------------------------------------------------ */
const char *cal_run_status_name(cal_run_status s)
{
    return (unsigned)s < 4 ? RUN_STATUS[s] : "unknown";
}
const char *cal_cell_kind_name(cal_cell_kind k)
{
    return (unsigned)k < 4 ? CELL_KIND[k] : "unknown";
}

/* ---- helpers ---------------------------------------------------------- */
/* Keep SQLite's message for cal_store_errmsg: finalizing a good statement
 * or a ROLLBACK resets it. Call where a failure is first seen. */
void cal_st_note(cal_store *st)
{
    if (!st->why[0]) snprintf(st->why, sizeof st->why, "%s", sqlite3_errmsg(st->db));
}
int cal_st_exec(cal_store *st, const char *sql)
{
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    /* the first failure of an open attempt decides whether it is retried */
    if (rc != SQLITE_OK && st->open_rc == SQLITE_OK) st->open_rc = rc;
    if (rc != SQLITE_OK) cal_st_note(st);
    return rc == SQLITE_OK ? CAL_OK : CAL_ESTORE;
}

/* Undo a failed write, keeping why it failed. */
void cal_st_rollback(cal_store *st)
{
    cal_st_note(st);
    cal_st_exec(st, "ROLLBACK");
}

const char *cal_store_errmsg(cal_store *st)
{
    if (!st) return "no store";
    if (st->why[0]) return st->why;
    return st->db ? sqlite3_errmsg(st->db) : "no store";
}

/* ---- cells ------------------------------------------------------------ */
#define CELL_FIXED_COLS \
    "run_id, seq, kind, target, concurrency, rate, prompt_tokens, prompt_exact," \
    " content, unique_prompts, max_tokens, output_fixed, shot_index, shot_kind," \
    " rest_before_ns, process_age_ns, start_ns, end_ns, start_wall_ns, n_requests," \
    " cpu_ns, chunks, send_lag_p99_ms"

int cal_st_cell_sql(const cal_store *st, char *sql, size_t n, int select)
{
    size_t off = 0;
    int w;
    if (select) w = snprintf(sql, n, "SELECT id, " CELL_FIXED_COLS);
    else w = snprintf(sql, n, "INSERT INTO cells (" CELL_FIXED_COLS);
    off += (size_t)w;
    /* read-only at an older schema: a column not there yet reads as NULL */
    for (size_t i = 0; i < cal_summary_n_fields && off < n; i++)
        off += (size_t)snprintf(sql + off, n - off, ", %s",
                                select && st->has_col && !st->has_col[i] ? "NULL"
                                                                         : cal_summary_fields[i].name);
    /* then schema 9's: how the prompt length was made and checked */
    if (off < n)
        off += (size_t)snprintf(sql + off, n - off, "%s", select && st->version < 9
                                ? ", NULL, NULL, NULL" : ", " CELL_PROMPT_COLS);
    if (off >= n) return CAL_ETOOBIG;
    if (select) {
        off += (size_t)snprintf(sql + off, n - off, " FROM cells WHERE run_id=? ORDER BY seq, id");
    } else {
        off += (size_t)snprintf(sql + off, n - off, ") VALUES (?");
        for (size_t i = 1; i < CELL_N_FIXED + cal_summary_n_fields + CELL_N_PROMPT && off < n; i++)
            off += (size_t)snprintf(sql + off, n - off, ",?");
        if (off < n) off += (size_t)snprintf(sql + off, n - off, ")");
    }
    return off < n ? CAL_OK : CAL_ETOOBIG;
}

