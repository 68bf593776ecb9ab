/* The SQLite result store: open + migrations, runs, cells with their
 * requests, telemetry rows, and the reads `show`, `export`, `compare`,
 * `fit` and `report` build on. docs/schema.md documents the tables. */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/store.h"
#include "caliper/keep.h"
#include "lib/util/c_locale.h"
#include "caliper/url.h"
#include "caliper/utf8.h"

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
static int fail(cal_store *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(cal_store *st, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(st->why, sizeof st->why, fmt, ap);   /* C-locale numbers in messages */
    va_end(ap);
    return code;
}

/* ---- migrations: append only; never edit one that has shipped --------- */
static const char *const MIGRATIONS[] = {
    /* 1: the first schema */
    "CREATE TABLE runs ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " label TEXT, started_wall_ns INTEGER NOT NULL, ended_wall_ns INTEGER,"
    " t0_mono_ns INTEGER, status TEXT NOT NULL, build TEXT, host TEXT,"
    " target TEXT, protocol TEXT, telemetry TEXT, verdicts TEXT);"
    "CREATE INDEX runs_label ON runs(label);"
    "CREATE TABLE cells ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " seq INTEGER NOT NULL, kind TEXT NOT NULL, target TEXT,"
    " concurrency INTEGER, rate REAL, prompt_tokens INTEGER, prompt_exact INTEGER,"
    " content TEXT, unique_prompts INTEGER, max_tokens INTEGER, output_fixed INTEGER,"
    " shot_index INTEGER, shot_kind TEXT, rest_before_ns INTEGER, process_age_ns INTEGER,"
    " start_ns INTEGER, end_ns INTEGER, start_wall_ns INTEGER, n_requests INTEGER,"
    " cpu_ns INTEGER, chunks INTEGER, send_lag_p99_ms REAL,"
    " duration REAL, completed INTEGER, failed INTEGER, n_http_error INTEGER,"
    " n_timeout INTEGER, n_connect_error INTEGER, n_stream_error INTEGER,"
    " n_cancelled INTEGER, total_input_tokens INTEGER, total_output_tokens INTEGER,"
    " output_len_mismatch INTEGER, request_throughput REAL, output_throughput REAL,"
    " per_request_output_throughput_median REAL,"
    " mean_ttft_ms REAL, median_ttft_ms REAL, p95_ttft_ms REAL, p99_ttft_ms REAL,"
    " mean_tpot_ms REAL, median_tpot_ms REAL, p99_tpot_ms REAL,"
    " mean_itl_ms REAL, median_itl_ms REAL, p99_itl_ms REAL,"
    " mean_e2el_ms REAL, median_e2el_ms REAL, p99_e2el_ms REAL,"
    " prefill_tps_median REAL, decode_tps_median REAL, server_decode_tps_median REAL,"
    " clock_mhz_mean REAL, power_w_mean REAL);"
    "CREATE INDEX cells_run ON cells(run_id, seq);"
    "CREATE TABLE requests ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " cell_id INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,"
    " idx INTEGER NOT NULL, status TEXT NOT NULL, http_status INTEGER, error TEXT,"
    " sched_ns INTEGER, send_ns INTEGER, first_token_ns INTEGER, last_token_ns INTEGER,"
    " end_ns INTEGER, prompt_tokens INTEGER, output_tokens INTEGER, token_source TEXT,"
    " n_chunks INTEGER, chunks BLOB, server_prefill_ms REAL, server_decode_ms REAL,"
    " server_decode_tokens INTEGER);"
    "CREATE INDEX requests_cell ON requests(cell_id, idx);"
    "CREATE TABLE telemetry ("
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " t_ns INTEGER NOT NULL, backend TEXT NOT NULL, metric TEXT NOT NULL,"
    " unit TEXT, value REAL);"
    "CREATE INDEX telemetry_run ON telemetry(run_id, t_ns);",
    /* 2: the rest of vLLM's bench summary (older cells keep NULL) */
    "ALTER TABLE cells ADD COLUMN total_token_throughput REAL;"
    "ALTER TABLE cells ADD COLUMN std_ttft_ms REAL;"
    "ALTER TABLE cells ADD COLUMN std_tpot_ms REAL;"
    "ALTER TABLE cells ADD COLUMN std_itl_ms REAL;"
    "ALTER TABLE cells ADD COLUMN std_e2el_ms REAL;",
    /* 3: the lowest clock and power over each cell, beside their means */
    ("ALTER TABLE cells ADD COLUMN clock_mhz_min REAL;"
     "ALTER TABLE cells ADD COLUMN power_w_min REAL;"),   /* (): one element, for clang */
    /* 4: each run's shot series as run-to-run noise evidence: its level
     * (mean over warm shots of the log median per-request speed), the
     * warm shots' sd and count, under the series key (target + protocol) */
    ("CREATE TABLE IF NOT EXISTS noise ("
     " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
     " series TEXT NOT NULL, level REAL NOT NULL, shot_sd REAL, shots INTEGER NOT NULL);"
     "CREATE INDEX IF NOT EXISTS noise_series ON noise(series, run_id);"),
    /* 5: each cell's latency histograms (hist.h) and where its ITL
     * percentiles came from (--keep-chunks) */
    ("CREATE TABLE IF NOT EXISTS cell_hists ("
     " cell_id INTEGER PRIMARY KEY REFERENCES cells(id) ON DELETE CASCADE,"
     " itl_source TEXT NOT NULL, folded INTEGER, chunks_dropped INTEGER,"
     " ttft BLOB, itl BLOB, tpot BLOB, e2el BLOB);"),
    /* 6: goodput under the run's --slo (NULL without one) */
    "ALTER TABLE cells ADD COLUMN goodput REAL;",
    /* 7: each run's first measured shot against its warm shots (noise.h) */
    "ALTER TABLE noise ADD COLUMN first_dev REAL;",
    /* 8: whether the run's own verdict called a wall (noise.h: such a run's
     * first shot is left out of the first-shot spread) */
    "ALTER TABLE noise ADD COLUMN wall INTEGER;",
};
#define N_MIGRATIONS (sizeof MIGRATIONS / sizeof MIGRATIONS[0])

/* ---- names ------------------------------------------------------------ */
static const char *const RUN_STATUS[] = {"running", "ok", "interrupted", "failed"};
static const char *const CELL_KIND[] = {"shots", "concurrency", "prompt-sweep", "rate"};
/* request statuses and shot kinds: their one name tables live with their
 * enums (cal_req_status_name, cal_shot_kind_key) */
static const char *req_key(int i) { return cal_req_status_name((cal_req_status)i); }
static const char *shot_key(int i) { return cal_shot_kind_key((cal_shot_kind)i); }

const char *cal_run_status_name(cal_run_status s)
{
    return (unsigned)s < 4 ? RUN_STATUS[s] : "unknown";
}
const char *cal_cell_kind_name(cal_cell_kind k)
{
    return (unsigned)k < 4 ? CELL_KIND[k] : "unknown";
}
static int lookup(const char *const *names, int n, const char *s, int dflt)
{
    if (s)
        for (int i = 0; i < n; i++)
            if (!strcmp(names[i], s)) return i;
    return dflt;
}
static int lookup_fn(const char *(*name)(int), int n, const char *s, int dflt)
{
    if (s)
        for (int i = 0; i < n; i++)
            if (!strcmp(name(i), s)) return i;
    return dflt;
}

/* ---- helpers ---------------------------------------------------------- */
/* Keep SQLite's message for cal_store_errmsg: finalizing a good statement
 * or a ROLLBACK resets it. Call where a failure is first seen. */
static void note(cal_store *st)
{
    if (!st->why[0]) snprintf(st->why, sizeof st->why, "%s", sqlite3_errmsg(st->db));
}
static int exec_sql(cal_store *st, const char *sql)
{
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    /* the first failure of an open attempt decides whether it is retried */
    if (rc != SQLITE_OK && st->open_rc == SQLITE_OK) st->open_rc = rc;
    if (rc != SQLITE_OK) note(st);
    return rc == SQLITE_OK ? CAL_OK : CAL_ESTORE;
}

/* Undo a failed write, keeping why it failed. */
static void rollback(cal_store *st)
{
    note(st);
    exec_sql(st, "ROLLBACK");
}

static char *dupstr(const char *s)
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
static void bind_text(sqlite3_stmt *s, int i, const char *v)
{
    int rc = v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
    assert(rc == SQLITE_OK || rc == SQLITE_TOOBIG);
    (void)rc;
}
static void bind_real(sqlite3_stmt *s, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(s, i, v);
    else sqlite3_bind_null(s, i);
}
static void bind_i64(sqlite3_stmt *s, int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
/* -1 means unknown: stored as NULL */
static void bind_opt(sqlite3_stmt *s, int i, int64_t v)
{
    if (v < 0) sqlite3_bind_null(s, i);
    else sqlite3_bind_int64(s, i, v);
}

static double col_real(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}
static int64_t col_opt(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, i);
}
static char *col_dup(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? dupstr((const char *)t) : NULL;
}
static void col_copy(sqlite3_stmt *s, int i, char *dst, size_t n)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, n, "%s", t ? (const char *)t : "");
}

/* ---- open / migrate --------------------------------------------------- */
static int read_version(cal_store *st, int *v)
{
    sqlite3_stmt *s = NULL;
    *v = 0;
    if (sqlite3_prepare_v2(st->db, "SELECT max(version) FROM schema_version", -1, &s,
                           NULL) != SQLITE_OK)
        return CAL_ESTORE;
    /* a failed step is an error, not version 0: that would re-apply
     * migration 1 to a store that has it */
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
        *v = sqlite3_column_int(s, 0);
    if (step != SQLITE_ROW && st->open_rc == SQLITE_OK) st->open_rc = sqlite3_errcode(st->db);
    sqlite3_finalize(s);
    return step == SQLITE_ROW ? CAL_OK : CAL_ESTORE;
}

static int migrate(cal_store *st)
{
    if (exec_sql(st, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"))
        return CAL_ESTORE;
    for (;;) {
        /* Each step checks the version inside its own write transaction, so
         * two processes opening a new file at once apply each step once. */
        if (exec_sql(st, "BEGIN IMMEDIATE")) return CAL_ESTORE;
        int v;
        if (read_version(st, &v)) goto fail;
        if (v > (int)N_MIGRATIONS) {           /* a newer caliper wrote it */
            fail(st, CAL_ESTORE, "written by a newer caliper (schema %d; this build knows up to %d)",
                 v, (int)N_MIGRATIONS);
            goto fail;
        }
        if (v == (int)N_MIGRATIONS) {
            st->version = v;
            return exec_sql(st, "COMMIT");
        }
        if (exec_sql(st, MIGRATIONS[v])) goto fail;
        char sql[80];
        snprintf(sql, sizeof sql, "INSERT INTO schema_version VALUES (%d)", v + 1);
        if (exec_sql(st, sql) || exec_sql(st, "COMMIT")) goto fail;
    }
fail:
    if (st->open_rc == SQLITE_OK) st->open_rc = sqlite3_errcode(st->db);   /* before ROLLBACK */
    rollback(st);
    return CAL_ESTORE;
}

/* The steps of open: WAL, foreign keys, sync level, migrations. */
static int open_steps(cal_store *st)
{
    st->open_rc = SQLITE_OK;
    st->why[0] = '\0';
    if (exec_sql(st, "PRAGMA journal_mode=WAL") || exec_sql(st, "PRAGMA foreign_keys=ON") ||
        exec_sql(st, "PRAGMA synchronous=NORMAL"))
        return CAL_ESTORE;
    return migrate(st);
}

static void store_free(cal_store *st)
{
    if (!st) return;
    sqlite3_close(st->db);
    free(st->tel);
    free(st->tel_run);
    free(st->has_col);
    free(st);
}

static int open_writable(cal_store *st, const char *path, char *why, size_t why_len)
{
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_NOMEM) return cal_why(why, why_len, CAL_ENOMEM, "%s: out of memory", path);
    if (rc != SQLITE_OK)
        return cal_why(why, why_len, CAL_ESTORE, "%s: %s", path,
                       st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
    sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
    /* journal_mode answers with a row; WAL lets readers and one writer
     * proceed together, the busy timeout queues the second writer. Two
     * processes creating one new file can still meet SQLITE_BUSY where
     * SQLite does not wait (switching a fresh file to WAL): those steps
     * are retried, within the same busy timeout. */
    int64_t until = cal_now_ns() + (int64_t)BUSY_TIMEOUT_MS * 1000000;
    while (open_steps(st)) {
        int busy = (st->open_rc & 0xff) == SQLITE_BUSY || (st->open_rc & 0xff) == SQLITE_LOCKED;
        if (!busy || cal_now_ns() >= until) {
            if ((st->open_rc & 0xff) == SQLITE_NOMEM)
                return cal_why(why, why_len, CAL_ENOMEM, "%s: out of memory", path);
            if (st->why[0]) return cal_why(why, why_len, CAL_ESTORE, "%s: %s", path, st->why);
            return cal_why(why, why_len, CAL_ESTORE, "%s: %s", path, sqlite3_errstr(st->open_rc));
        }
        cal_sleep_ns(10000000LL, NULL);
    }
    return CAL_OK;
}

/* Read-only at an older schema: which summary fields cells has as columns. */
static int read_columns(cal_store *st)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT name FROM pragma_table_info('cells')", -1, &s,
                           NULL) != SQLITE_OK)
        return CAL_ESTORE;
    st->has_col = calloc(cal_summary_n_fields, 1);
    int step = SQLITE_NOMEM;
    if (st->has_col)
        while ((step = sqlite3_step(s)) == SQLITE_ROW) {
            const cal_field *f = cal_summary_field((const char *)sqlite3_column_text(s, 0));
            if (f) st->has_col[f - cal_summary_fields] = 1;
        }
    sqlite3_finalize(s);
    return step == SQLITE_DONE ? CAL_OK : step == SQLITE_NOMEM ? CAL_ENOMEM : CAL_ESTORE;
}

/* The first read of a read-only handle: is this a caliper store, at which
 * schema? Returns SQLite's code of the failing step (SQLITE_OK, or with
 * *v = 0 when there is no schema_version table). */
static int probe_version(cal_store *st, int *v)
{
    sqlite3_stmt *s = NULL;
    *v = 0;
    int rc = sqlite3_prepare_v2(st->db, "SELECT count(*) FROM sqlite_master WHERE type='table'"
                                " AND name='schema_version'", -1, &s, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(s);
        int have = rc == SQLITE_ROW && sqlite3_column_int(s, 0) > 0;
        rc = rc == SQLITE_ROW ? SQLITE_OK : sqlite3_extended_errcode(st->db);
        sqlite3_finalize(s);
        if (rc == SQLITE_OK && have && read_version(st, v)) rc = sqlite3_extended_errcode(st->db);
    } else {
        rc = sqlite3_extended_errcode(st->db);
    }
    return rc;
}

/* "file:" + path with the characters a URI gives meaning to escaped. */
static int immutable_uri(const char *path, char *uri, size_t n)
{
    size_t o = (size_t)snprintf(uri, n, "file:");
    for (const char *p = path; *p && o + 4 < n; p++) {
        if (*p == '?' || *p == '#' || *p == '%') o += (size_t)snprintf(uri + o, n - o, "%%%02X", (unsigned char)*p);
        else uri[o++] = *p;
    }
    uri[o < n ? o : n - 1] = '\0';
    int w = snprintf(uri + o, n - o, "?immutable=1");
    return w < 0 || (size_t)w >= n - o ? CAL_ETOOBIG : CAL_OK;
}

static int open_readonly(cal_store *st, const char *path, char *why, size_t why_len)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return cal_why(why, why_len, CAL_ENOTFOUND, "no such store: %s", path);
        return cal_why(why, why_len, CAL_ESTORE, "%s: %s", path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) return cal_why(why, why_len, CAL_ESTORE, "%s is not a file", path);
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
        rc = probe_version(st, &st->version);
    }
    /* A WAL file in a directory we cannot write: SQLite cannot create the
     * -shm index beside it. With no -wal pending, nobody can be writing
     * (a writer would need that directory too), so the file as it is on
     * disk is the whole store: read it as immutable. */
    char wal[4096];
    if (rc == SQLITE_READONLY_DIRECTORY && (size_t)snprintf(wal, sizeof wal, "%s-wal", path) < sizeof wal &&
        stat(wal, &sb) != 0 && errno == ENOENT) {
        char uri[4200];
        if (immutable_uri(path, uri, sizeof uri))
            return cal_why(why, why_len, CAL_ESTORE, "%s: the path is too long", path);
        sqlite3_close(st->db);
        st->db = NULL;
        rc = sqlite3_open_v2(uri, &st->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
        if (rc == SQLITE_OK) rc = probe_version(st, &st->version);
    }
    if ((rc & 0xff) == SQLITE_NOMEM) return cal_why(why, why_len, CAL_ENOMEM, "%s: out of memory", path);
    if (rc == SQLITE_READONLY_DIRECTORY)
        return cal_why(why, why_len, CAL_ESTORE, "%s: cannot read it here: its directory is not "
                       "writable and a -wal file is pending (open it once with a writing command "
                       "where the directory is writable)", path);
    if (rc != SQLITE_OK)
        return cal_why(why, why_len, CAL_ESTORE, "%s: not a caliper store (%s)", path,
                       st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
    if (st->version == 0)
        return cal_why(why, why_len, CAL_ESTORE, "%s: not a caliper store (no schema version "
                       "recorded)", path);
    if (st->version > (int)N_MIGRATIONS)
        return cal_why(why, why_len, CAL_ESTORE, "%s: written by a newer caliper (schema %d; "
                       "this build reads up to %d)", path, st->version, (int)N_MIGRATIONS);
    /* An older schema is read as it is, without the columns later
     * migrations add (a writing command migrates it). Every migration so
     * far only adds columns to cells: one that changes another table must
     * teach the reads here about it. */
    if (st->version < (int)N_MIGRATIONS && (rc = read_columns(st)) != CAL_OK)
        return cal_why(why, why_len, rc, "%s: cannot read its cells table (%s)", path,
                       rc == CAL_ENOMEM ? "out of memory" : sqlite3_errmsg(st->db));
    return CAL_OK;
}

int cal_store_open_ex(const char *path, unsigned flags, cal_store **out, char *why, size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    if (!out) return cal_why(why, why_len, CAL_EINVAL, "no handle to open into");
    *out = NULL;
    if (!path || !*path) return cal_why(why, why_len, CAL_EINVAL, "the store's path is empty");
    if (flags & ~CAL_STORE_READONLY) return cal_why(why, why_len, CAL_EINVAL, "unknown open flags %#x", flags);
    cal_store *st = calloc(1, sizeof *st);
    if (!st) return cal_why(why, why_len, CAL_ENOMEM, "%s: out of memory", path);
    st->readonly = (flags & CAL_STORE_READONLY) != 0;
    int rc;
    if (st->readonly) {
        rc = open_readonly(st, path, why, why_len);
    } else {
        st->tel = calloc(TEL_BATCH, sizeof *st->tel);
        st->tel_run = calloc(TEL_BATCH, sizeof *st->tel_run);
        rc = st->tel && st->tel_run ? open_writable(st, path, why, why_len)
                                    : cal_why(why, why_len, CAL_ENOMEM, "%s: out of memory", path);
    }
    if (rc != CAL_OK) {
        store_free(st);
        return rc;
    }
    st->why[0] = '\0';
    *out = st;
    return CAL_OK;
}

int cal_store_open(const char *path, cal_store **out)
{
    return cal_store_open_ex(path, 0, out, NULL, 0);
}

void cal_store_close(cal_store **pst)
{
    if (!pst || !*pst) return;
    cal_store *st = *pst;
    cal_store_flush(st);
    store_free(st);
    *pst = NULL;
}

int cal_store_schema_version(cal_store *st) { return st ? st->version : 0; }

const char *cal_store_errmsg(cal_store *st)
{
    if (!st) return "no store";
    if (st->why[0]) return st->why;
    return st->db ? sqlite3_errmsg(st->db) : "no store";
}

/* ---- runs ------------------------------------------------------------- */
void cal_run_clear(cal_run *r)
{
    if (!r) return;
    free(r->label); free(r->build); free(r->host_json); free(r->target_json);
    free(r->protocol_json); free(r->telemetry_json); free(r->verdicts_json);
    memset(r, 0, sizeof *r);
}

/* Replace each string in j that is a URL carrying credentials by the URL
 * without them; *changed = 1 when any was. A string that curl cannot parse
 * but looks like one (scheme and '@') becomes CAL_URL_UNPARSABLE. */
static int redact_json(json_t *j, int *changed)
{
    if (json_is_string(j)) {
        const char *v = json_string_value(j);
        int cred = cal_url_has_credentials(v);
        if (cred == 0 || (cred < 0 && !(strstr(v, "://") && strchr(v, '@')))) return CAL_OK;
        char clean[2048];
        cal_url_redact(v, clean, sizeof clean);   /* a placeholder on failure */
        *changed = 1;
        return json_string_set(j, clean) ? CAL_ENOMEM : CAL_OK;
    }
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            int rc = redact_json(v, changed);
            if (rc) return rc;
        }
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++) {
            int rc = redact_json(json_array_get(j, i), changed);
            if (rc) return rc;
        }
    }
    return CAL_OK;
}

/* target_json as it may be stored: *out is NULL (keep the given text) or a
 * malloc'd redacted copy. */
static int redacted_target(cal_store *st, const char *target_json, char **out)
{
    *out = NULL;
    if (!target_json) return CAL_OK;
    json_error_t e;
    json_t *j = json_loads(target_json, JSON_DECODE_ANY, &e);
    /* jansson reports some allocation failures in its lexer as syntax
     * errors: a text that parses on a second try was short of memory */
    if (!j) j = json_loads(target_json, JSON_DECODE_ANY, &e);
    if (!j) {
        /* jansson explains every syntax error; a failure it leaves
         * unexplained is an allocation inside the parser */
        if (json_error_code(&e) == json_error_out_of_memory || !e.text[0])
            return fail(st, CAL_ENOMEM, "target JSON: out of memory");
        return fail(st, CAL_EINVAL, "target JSON: %s (line %d)", e.text, e.line);
    }
    int changed = 0, rc = redact_json(j, &changed);
    if (rc == CAL_OK && changed) {
        *out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
        if (!*out) rc = CAL_ENOMEM;
    }
    json_decref(j);
    return rc ? fail(st, rc, "target JSON: out of memory") : CAL_OK;
}

int cal_store_begin_run(cal_store *st, cal_run *run)
{
    if (!st || !run) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return fail(st, CAL_EPERM, "the store was opened read-only");
    if (run->label) {
        size_t n = strlen(run->label), bad = cal_utf8_check(run->label, n);
        if (!n) return fail(st, CAL_EINVAL, "label: \"\" is empty");
        if (bad < n)
            return fail(st, CAL_EINVAL, "label: byte %zu (0x%02x) is not valid UTF-8", bad + 1,
                        (unsigned char)run->label[bad]);
    }
    char *target = NULL;
    int rc = redacted_target(st, run->target_json, &target);
    if (rc) return rc;
    sqlite3_stmt *s = NULL;
    const char *sql = "INSERT INTO runs (label, started_wall_ns, ended_wall_ns, t0_mono_ns,"
                      " status, build, host, target, protocol, telemetry, verdicts)"
                      " VALUES (?,?,NULL,?,?,?,?,?,?,?,?)";
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        free(target);
        return CAL_ESTORE;
    }
    if (!run->started_wall_ns) run->started_wall_ns = cal_wall_ns();
    if (!run->t0_mono_ns) run->t0_mono_ns = cal_now_ns();
    run->ended_wall_ns = -1;
    run->status = CAL_RUN_RUNNING;
    bind_text(s, 1, run->label);
    bind_i64(s, 2, run->started_wall_ns);
    bind_i64(s, 3, run->t0_mono_ns);
    bind_text(s, 4, RUN_STATUS[CAL_RUN_RUNNING]);
    bind_text(s, 5, run->build);
    bind_text(s, 6, run->host_json);
    bind_text(s, 7, target ? target : run->target_json);
    bind_text(s, 8, run->protocol_json);
    bind_text(s, 9, run->telemetry_json);
    bind_text(s, 10, run->verdicts_json);
    rc = sqlite3_step(s) == SQLITE_DONE ? CAL_OK : CAL_ESTORE;
    sqlite3_finalize(s);
    free(target);
    if (rc == CAL_OK) run->id = sqlite3_last_insert_rowid(st->db);
    return rc;
}

/* Final status, end time and verdicts of a run. */
static int update_run(cal_store *st, int64_t run_id, cal_run_status status,
                      const char *verdicts_json)
{
    sqlite3_stmt *s = NULL;
    const char *sql = "UPDATE runs SET status=?, ended_wall_ns=?, verdicts=? WHERE id=?";
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) return CAL_ESTORE;
    bind_text(s, 1, cal_run_status_name(status));
    bind_i64(s, 2, cal_wall_ns());
    bind_text(s, 3, verdicts_json);
    bind_i64(s, 4, run_id);
    int rc = sqlite3_step(s) == SQLITE_DONE ? CAL_OK : CAL_ESTORE;
    sqlite3_finalize(s);
    if (rc == CAL_OK && sqlite3_changes(st->db) == 0) rc = CAL_ENOTFOUND;
    return rc;
}

int cal_store_finish_run(cal_store *st, int64_t run_id, cal_run_status status,
                         const char *verdicts_json)
{
    if (!st || (unsigned)status > CAL_RUN_FAILED) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return fail(st, CAL_EPERM, "the store was opened read-only");
    int rc = cal_store_flush(st);
    int rc2 = update_run(st, run_id, status, verdicts_json);
    return rc2 ? rc2 : rc;
}

/* ---- chunk blobs ------------------------------------------------------ */
int cal_store_chunks_encode(int64_t send_ns, const int64_t *chunk_ns, int n,
                            uint8_t **out, size_t *out_bytes)
{
    *out = NULL;
    *out_bytes = 0;
    if (n <= 0) return CAL_OK;
    if (!chunk_ns) return CAL_EINVAL;
    uint8_t *b = malloc((size_t)n * 4);
    if (!b) return CAL_ENOMEM;
    int64_t prev = send_ns;
    for (int i = 0; i < n; i++) {
        int64_t d = (chunk_ns[i] - prev) / 1000;
        if (d < 0) d = 0;
        if (d > UINT32_MAX) d = UINT32_MAX;
        uint32_t u = (uint32_t)d;
        b[4 * i] = u & 0xff;
        b[4 * i + 1] = (u >> 8) & 0xff;
        b[4 * i + 2] = (u >> 16) & 0xff;
        b[4 * i + 3] = (u >> 24) & 0xff;
        /* accumulate from the rounded value so decode error does not grow */
        prev += (int64_t)u * 1000;
    }
    *out = b;
    *out_bytes = (size_t)n * 4;
    return CAL_OK;
}

int cal_store_chunks_decode(int64_t send_ns, const uint8_t *blob, size_t bytes,
                            int64_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (bytes % 4) return CAL_EPROTO;
    if (bytes == 0) return CAL_OK;
    if (!blob) return CAL_EINVAL;
    size_t k = bytes / 4;
    int64_t *t = malloc(k * sizeof *t);
    if (!t) return CAL_ENOMEM;
    if (k > INT32_MAX || send_ns < 0 || send_ns >= TS_MAX) {
        free(t);
        return CAL_EPROTO;
    }
    int64_t prev = send_ns;
    for (size_t i = 0; i < k; i++) {
        uint32_t u = (uint32_t)blob[4 * i] | (uint32_t)blob[4 * i + 1] << 8 |
                     (uint32_t)blob[4 * i + 2] << 16 | (uint32_t)blob[4 * i + 3] << 24;
        if (prev >= TS_MAX - (int64_t)u * 1000) {   /* past 2^62 ns: not a real stream */
            free(t);
            return CAL_EPROTO;
        }
        prev += (int64_t)u * 1000;
        t[i] = prev;
    }
    *out = t;
    *n = (int)k;
    return CAL_OK;
}

/* ---- cells ------------------------------------------------------------ */
#define CELL_FIXED_COLS \
    "run_id, seq, kind, target, concurrency, rate, prompt_tokens, prompt_exact," \
    " content, unique_prompts, max_tokens, output_fixed, shot_index, shot_kind," \
    " rest_before_ns, process_age_ns, start_ns, end_ns, start_wall_ns, n_requests," \
    " cpu_ns, chunks, send_lag_p99_ms"
#define CELL_N_FIXED 23

static int cell_sql(const cal_store *st, char *sql, size_t n, int select)
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
    if (off >= n) return CAL_ETOOBIG;
    if (select) {
        off += (size_t)snprintf(sql + off, n - off, " FROM cells WHERE run_id=? ORDER BY seq, id");
    } else {
        off += (size_t)snprintf(sql + off, n - off, ") VALUES (?");
        for (size_t i = 1; i < CELL_N_FIXED + cal_summary_n_fields && off < n; i++)
            off += (size_t)snprintf(sql + off, n - off, ",?");
        if (off < n) off += (size_t)snprintf(sql + off, n - off, ")");
    }
    return off < n ? CAL_OK : CAL_ETOOBIG;
}

static int insert_requests(cal_store *st, int64_t cell_id, const cal_req_result *r, size_t n)
{
    sqlite3_stmt *s = NULL;
    const char *sql =
        "INSERT INTO requests (cell_id, idx, status, http_status, error, sched_ns, send_ns,"
        " first_token_ns, last_token_ns, end_ns, prompt_tokens, output_tokens, token_source,"
        " n_chunks, chunks, server_prefill_ms, server_decode_ms, server_decode_tokens)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        note(st);
        return CAL_ESTORE;
    }
    int rc = CAL_OK;
    for (size_t i = 0; i < n && rc == CAL_OK; i++) {
        const cal_req_result *q = &r[i];
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        bind_i64(s, 1, cell_id);
        bind_i64(s, 2, (int64_t)i);
        bind_text(s, 3, cal_req_status_name(q->status));
        if (q->http_status) bind_i64(s, 4, q->http_status);
        bind_text(s, 5, q->error);
        bind_opt(s, 6, q->sched_ns);
        if (q->send_ns) bind_i64(s, 7, q->send_ns);
        if (q->first_token_ns) bind_i64(s, 8, q->first_token_ns);
        if (q->last_token_ns) bind_i64(s, 9, q->last_token_ns);
        if (q->end_ns) bind_i64(s, 10, q->end_ns);
        bind_opt(s, 11, q->prompt_tokens);
        bind_opt(s, 12, q->output_tokens);
        bind_text(s, 13, q->tok_source == CAL_TOKSRC_USAGE ? "usage" : "chunks");
        bind_i64(s, 14, q->n_chunks);
        uint8_t *blob = NULL;
        size_t nb = 0;
        if (q->chunk_ns && q->n_chunks > 0) {
            rc = cal_store_chunks_encode(q->send_ns, q->chunk_ns, q->n_chunks, &blob, &nb);
            if (rc) break;
            sqlite3_bind_blob(s, 15, blob, (int)nb, free);
        }
        if (q->server_prefill_ms >= 0) bind_real(s, 16, q->server_prefill_ms);
        if (q->server_decode_ms >= 0) bind_real(s, 17, q->server_decode_ms);
        bind_opt(s, 18, q->server_decode_tokens);
        if (sqlite3_step(s) != SQLITE_DONE) rc = CAL_ESTORE;
    }
    if (rc) note(st);
    sqlite3_finalize(s);
    return rc;
}

int cal_store_add_cell(cal_store *st, int64_t run_id, cal_cell *c,
                       const cal_req_result *results, size_t n)
{
    if (!st || !c || (n && !results)) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return fail(st, CAL_EPERM, "the store was opened read-only");
    char sql[4096];
    if (cell_sql(st, sql, sizeof sql, 0)) return CAL_EINTERNAL;
    if (exec_sql(st, "BEGIN IMMEDIATE")) return CAL_ESTORE;
    sqlite3_stmt *s = NULL;
    int rc = CAL_ESTORE;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) goto out;
    int k = 1;
    bind_i64(s, k++, run_id);
    bind_i64(s, k++, c->seq);
    bind_text(s, k++, cal_cell_kind_name(c->kind));
    bind_text(s, k++, c->target[0] ? c->target : NULL);
    bind_i64(s, k++, c->concurrency);
    bind_real(s, k++, c->rate);
    bind_i64(s, k++, c->prompt_tokens);
    bind_i64(s, k++, c->prompt_exact);
    bind_text(s, k++, c->content);
    bind_i64(s, k++, c->unique_prompts);
    bind_i64(s, k++, c->max_tokens);
    bind_i64(s, k++, c->output_fixed);
    bind_i64(s, k++, c->shot_index);
    bind_text(s, k++, cal_shot_kind_key(c->shot_kind));
    bind_i64(s, k++, c->rest_before_ns);
    bind_opt(s, k++, c->process_age_ns);
    bind_i64(s, k++, c->start_ns);
    bind_i64(s, k++, c->end_ns);
    bind_i64(s, k++, c->start_wall_ns);
    bind_i64(s, k++, c->n_requests);
    bind_i64(s, k++, c->cpu_ns);
    bind_i64(s, k++, c->chunks);
    bind_real(s, k++, c->send_lag_p99_ms);
    for (size_t i = 0; i < cal_summary_n_fields; i++) {
        const cal_field *f = &cal_summary_fields[i];
        double v = cal_summary_get(&c->sum, f);
        if (f->type == CAL_FIELD_INT) bind_i64(s, k++, (int64_t)v);
        else bind_real(s, k++, v);
    }
    assert(k - 1 == CELL_N_FIXED + (int)cal_summary_n_fields &&
           k - 1 == sqlite3_bind_parameter_count(s));
    if (sqlite3_step(s) != SQLITE_DONE) goto out;
    int64_t cell_id = sqlite3_last_insert_rowid(st->db);
    rc = insert_requests(st, cell_id, results, n);
    if (rc == CAL_OK) rc = exec_sql(st, "COMMIT");
    if (rc == CAL_OK) {
        c->id = cell_id;
        c->run_id = run_id;
    }
out:
    if (rc != CAL_OK) note(st);
    sqlite3_finalize(s);
    if (rc != CAL_OK) rollback(st);
    return rc;
}

/* ---- telemetry -------------------------------------------------------- */
int cal_store_add_telemetry(cal_store *st, int64_t run_id, int64_t t_ns,
                            const char *backend, const char *metric,
                            const char *unit, double value)
{
    if (!st || !backend || !metric) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return fail(st, CAL_EPERM, "the store was opened read-only");
    if (st->n_tel == TEL_BATCH) {
        int rc = cal_store_flush(st);
        if (rc) return rc;
    }
    assert(st->n_tel < TEL_BATCH);
    cal_store_tel_row *t = &st->tel[st->n_tel];
    t->t_ns = t_ns;
    snprintf(t->backend, sizeof t->backend, "%s", backend);
    snprintf(t->metric, sizeof t->metric, "%s", metric);
    snprintf(t->unit, sizeof t->unit, "%s", unit ? unit : "");
    t->value = value;
    st->tel_run[st->n_tel++] = run_id;
    return CAL_OK;
}

int cal_store_flush(cal_store *st)
{
    if (!st) return CAL_EINVAL;
    if (st->n_tel == 0) return CAL_OK;
    st->why[0] = '\0';
    assert(!st->readonly && st->n_tel <= TEL_BATCH);
    if (exec_sql(st, "BEGIN IMMEDIATE")) return CAL_ESTORE;
    sqlite3_stmt *s = NULL;
    int rc = CAL_ESTORE;
    if (sqlite3_prepare_v2(st->db,
                           "INSERT INTO telemetry (run_id, t_ns, backend, metric, unit, value)"
                           " VALUES (?,?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK)
        goto out;
    rc = CAL_OK;
    for (size_t i = 0; i < st->n_tel && rc == CAL_OK; i++) {
        sqlite3_reset(s);
        bind_i64(s, 1, st->tel_run[i]);
        bind_i64(s, 2, st->tel[i].t_ns);
        bind_text(s, 3, st->tel[i].backend);
        bind_text(s, 4, st->tel[i].metric);
        bind_text(s, 5, st->tel[i].unit);
        bind_real(s, 6, st->tel[i].value);
        if (sqlite3_step(s) != SQLITE_DONE) rc = CAL_ESTORE;
    }
    if (rc == CAL_OK) rc = exec_sql(st, "COMMIT");
out:
    if (rc != CAL_OK) note(st);
    sqlite3_finalize(s);
    if (rc != CAL_OK) rollback(st);
    else st->n_tel = 0;
    return rc;
}

/* ---- reads ------------------------------------------------------------ */
#define RUN_COLS "r.id, r.label, r.started_wall_ns, r.ended_wall_ns, r.t0_mono_ns, r.status," \
                 " r.build, r.host, r.target, r.protocol, r.telemetry, r.verdicts," \
                 " (SELECT count(*) FROM cells c WHERE c.run_id = r.id)"

/* A stored timestamp readers may subtract: within [0, TS_MAX), or -1 where
 * the column may be unknown (opt). */
static int ts_ok(int64_t v, int opt) { return (v >= 0 && v < TS_MAX) || (opt && v == -1); }

/* A non-NULL text column copied; CAL_ENOMEM when the copy failed. */
static int col_dup_into(sqlite3_stmt *s, int i, char **dst)
{
    *dst = col_dup(s, i);
    return *dst || sqlite3_column_type(s, i) == SQLITE_NULL ? CAL_OK : CAL_ENOMEM;
}

static int read_run_row(cal_store *st, sqlite3_stmt *s, cal_run *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(s, 0);
    int rc = col_dup_into(s, 1, &r->label);
    r->started_wall_ns = sqlite3_column_int64(s, 2);
    r->ended_wall_ns = col_opt(s, 3);
    r->t0_mono_ns = sqlite3_column_int64(s, 4);
    r->status = (cal_run_status)lookup(RUN_STATUS, 4, (const char *)sqlite3_column_text(s, 5), 0);
    char **text[] = {&r->build, &r->host_json, &r->target_json, &r->protocol_json,
                     &r->telemetry_json, &r->verdicts_json};
    for (int i = 0; i < 6; i++) {
        int e = col_dup_into(s, 6 + i, text[i]);
        if (!rc) rc = e;
    }
    r->n_cells = sqlite3_column_int(s, 12);
    if (rc) return fail(st, rc, "run %lld: out of memory", (long long)r->id);
    if (!ts_ok(r->started_wall_ns, 0) || !ts_ok(r->ended_wall_ns, 1) || !ts_ok(r->t0_mono_ns, 0))
        return fail(st, CAL_ESTORE, "run %lld: a start or end time outside [0, 2^62) ns: the "
                    "store is damaged", (long long)r->id);
    return CAL_OK;
}

int cal_store_list_runs(cal_store *st, size_t limit, cal_run **runs, size_t *n)
{
    if (!st || !runs || !n) return CAL_EINVAL;
    st->why[0] = '\0';
    *runs = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT " RUN_COLS " FROM runs r ORDER BY r.id DESC LIMIT %lld",
             limit ? (long long)limit : -1LL);
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) return CAL_ESTORE;
    size_t cap = 0;
    int rc = CAL_OK, step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            cal_run *g = realloc(*runs, nc * sizeof *g);
            if (!g) { rc = fail(st, CAL_ENOMEM, "listing runs: out of memory"); break; }
            *runs = g;
            cap = nc;
        }
        rc = read_run_row(st, s, &(*runs)[(*n)++]);
        if (rc) break;
    }
    if (rc == CAL_OK && step != SQLITE_DONE) rc = CAL_ESTORE;
    sqlite3_finalize(s);
    if (rc) {
        cal_store_runs_free(*runs, *n);
        *runs = NULL;
        *n = 0;
    }
    return rc;
}

void cal_store_runs_free(cal_run *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) cal_run_clear(&runs[i]);
    free(runs);
}

int cal_store_put_noise(cal_store *st, int64_t run_id, const cal_store_noise_row *r)
{
    if (!st || !r || !r->series[0] || !isfinite(r->level) || r->shots < 1) return CAL_EINVAL;
    st->why[0] = '\0';
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, "INSERT INTO noise(run_id, series, level, shot_sd, shots, "
                           "first_dev, wall) VALUES (?,?,?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK) {
        note(st);
        return CAL_ESTORE;
    }
    bind_i64(s, 1, run_id);
    bind_text(s, 2, r->series);
    bind_real(s, 3, r->level);
    bind_real(s, 4, r->shot_sd);
    sqlite3_bind_int(s, 5, r->shots);
    bind_real(s, 6, r->first_dev);
    if (r->wall >= 0) sqlite3_bind_int(s, 7, r->wall ? 1 : 0);
    else sqlite3_bind_null(s, 7);
    int step = sqlite3_step(s);
    if (step != SQLITE_DONE) note(st);
    sqlite3_finalize(s);
    return step == SQLITE_DONE ? CAL_OK : CAL_ESTORE;
}

int cal_store_noise(cal_store *st, const char *series, int64_t before_run_id,
                    cal_store_noise_row *rows, size_t cap, size_t *n)
{
    if (!st || !series || !n || (cap && !rows)) return CAL_EINVAL;
    *n = 0;
    st->why[0] = '\0';
    sqlite3_stmt *s = NULL;
    /* a store written before schema 4 has no noise table: no evidence */
    /* a store read as it is (read-only, before schema 7 or 8) has no
     * first_dev or wall */
    if (sqlite3_prepare_v2(st->db, st->version >= 8
                           ? "SELECT run_id, level, shot_sd, shots, first_dev, wall FROM noise "
                             "WHERE series=? AND run_id<? ORDER BY run_id DESC LIMIT ?"
                           : st->version >= 7
                           ? "SELECT run_id, level, shot_sd, shots, first_dev, NULL FROM noise "
                             "WHERE series=? AND run_id<? ORDER BY run_id DESC LIMIT ?"
                           : "SELECT run_id, level, shot_sd, shots, NULL, NULL FROM noise "
                             "WHERE series=? AND run_id<? ORDER BY run_id DESC LIMIT ?",
                           -1, &s, NULL) != SQLITE_OK)
        return st->version >= 4 ? (note(st), CAL_ESTORE) : CAL_OK;
    bind_text(s, 1, series);
    bind_i64(s, 2, before_run_id > 0 ? before_run_id : INT64_MAX);
    bind_i64(s, 3, (int64_t)cap);
    int step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW && *n < cap) {
        cal_store_noise_row *r = &rows[(*n)++];
        memset(r, 0, sizeof *r);
        r->run_id = sqlite3_column_int64(s, 0);
        snprintf(r->series, sizeof r->series, "%s", series);
        r->level = col_real(s, 1);
        r->shot_sd = col_real(s, 2);
        r->shots = sqlite3_column_int(s, 3);
        r->first_dev = col_real(s, 4);
        r->wall = sqlite3_column_type(s, 5) == SQLITE_NULL ? -1 : sqlite3_column_int(s, 5) != 0;
    }
    if (step != SQLITE_DONE && step != SQLITE_ROW) note(st);
    sqlite3_finalize(s);
    return step == SQLITE_DONE || step == SQLITE_ROW ? CAL_OK : CAL_ESTORE;
}

int cal_store_find_run(cal_store *st, const char *ref, int64_t *run_id)
{
    if (!st || !ref || !run_id) return CAL_EINVAL;
    st->why[0] = '\0';
    if (!*ref) return fail(st, CAL_EINVAL, "the run reference is empty: give an id, a label or latest");
    sqlite3_stmt *s = NULL;
    const char *sql;
    char *end = NULL;
    long long id = strtoll(ref, &end, 10);
    int by_id = end && *end == '\0' && id > 0;
    if (by_id) sql = "SELECT id FROM runs WHERE id=?";
    else if (!strcmp(ref, "latest") || !strcmp(ref, "last"))
        sql = "SELECT id FROM runs ORDER BY id DESC LIMIT 1";
    else sql = "SELECT id FROM runs WHERE label=? ORDER BY id DESC LIMIT 1";
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) return CAL_ESTORE;
    if (by_id) sqlite3_bind_int64(s, 1, id);
    else if (sqlite3_bind_parameter_count(s) == 1) bind_text(s, 1, ref);
    int step = sqlite3_step(s);
    int rc = step == SQLITE_ROW ? CAL_OK : step == SQLITE_DONE ? CAL_ENOTFOUND : CAL_ESTORE;
    if (rc == CAL_OK) *run_id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc;
}

static int read_cell_row(cal_store *st, sqlite3_stmt *s, cal_cell *c)
{
    memset(c, 0, sizeof *c);
    int k = 0;
    c->id = sqlite3_column_int64(s, k++);
    c->run_id = sqlite3_column_int64(s, k++);
    c->seq = sqlite3_column_int(s, k++);
    c->kind = (cal_cell_kind)lookup(CELL_KIND, 4, (const char *)sqlite3_column_text(s, k++), 0);
    col_copy(s, k++, c->target, sizeof c->target);
    c->concurrency = sqlite3_column_int(s, k++);
    c->rate = col_real(s, k++);
    if (isnan(c->rate)) c->rate = 0;
    c->prompt_tokens = sqlite3_column_int(s, k++);
    c->prompt_exact = sqlite3_column_int(s, k++);
    col_copy(s, k++, c->content, sizeof c->content);
    c->unique_prompts = sqlite3_column_int(s, k++);
    c->max_tokens = sqlite3_column_int(s, k++);
    c->output_fixed = sqlite3_column_int(s, k++);
    c->shot_index = sqlite3_column_int(s, k++);
    c->shot_kind = (cal_shot_kind)lookup_fn(shot_key, CAL_SHOT_CONSECUTIVE + 1, (const char *)sqlite3_column_text(s, k++), 0);
    c->rest_before_ns = sqlite3_column_int64(s, k++);
    c->process_age_ns = col_opt(s, k++);
    c->start_ns = sqlite3_column_int64(s, k++);
    c->end_ns = sqlite3_column_int64(s, k++);
    c->start_wall_ns = sqlite3_column_int64(s, k++);
    c->n_requests = sqlite3_column_int64(s, k++);
    c->cpu_ns = sqlite3_column_int64(s, k++);
    c->chunks = sqlite3_column_int64(s, k++);
    c->send_lag_p99_ms = col_real(s, k++);
    assert(k == CELL_N_FIXED + 1);
    cal_summary_init(&c->sum);
    for (size_t i = 0; i < cal_summary_n_fields; i++, k++) {
        const cal_field *f = &cal_summary_fields[i];
        char *p = (char *)&c->sum + f->offset;
        if (f->type == CAL_FIELD_INT) {
            int64_t v = sqlite3_column_int64(s, k);
            memcpy(p, &v, sizeof v);
        } else {
            double v = col_real(s, k);
            memcpy(p, &v, sizeof v);
        }
    }
    assert(k == sqlite3_column_count(s));
    /* what readers index or subtract with */
    const char *bad = c->n_requests < 0 ? "n_requests"
                      : !ts_ok(c->start_ns, 0) || !ts_ok(c->end_ns, 0) ? "start_ns/end_ns"
                      : !ts_ok(c->start_wall_ns, 0) ? "start_wall_ns"
                      : !ts_ok(c->rest_before_ns, 0) ? "rest_before_ns"
                      : !ts_ok(c->process_age_ns, 1) ? "process_age_ns"
                      : c->cpu_ns < 0 || c->chunks < 0 ? "cpu_ns/chunks" : NULL;
    if (bad)
        return fail(st, CAL_ESTORE, "run %lld, cell %lld: %s out of range: the store is damaged",
                    (long long)c->run_id, (long long)c->id, bad);
    return CAL_OK;
}

static void free_req(cal_req_result *q)
{
    free(q->error);
    free(q->chunk_ns);
    free(q->chunk_send_ns);
    free(q->text);
    memset(q, 0, sizeof *q);
}

int cal_run_data_read_protocol(cal_run_data *d)
{
    cal_protocol_clear(&d->proto);
    int rc = cal_protocol_from_json(d->run.protocol_json, d->run.target_json, &d->proto);
    /* a damaged text: read what the other one holds */
    if (rc == CAL_EINVAL) rc = cal_protocol_from_json(d->run.protocol_json, NULL, &d->proto);
    if (rc == CAL_EINVAL) rc = cal_protocol_from_json(NULL, d->run.target_json, &d->proto);
    return rc == CAL_ENOMEM ? CAL_ENOMEM : CAL_OK;
}

void cal_run_data_free(cal_run_data **pd)
{
    if (!pd || !*pd) return;
    cal_run_data *d = *pd;
    cal_run_clear(&d->run);
    cal_protocol_clear(&d->proto);
    free(d->cells);
    for (size_t i = 0; i < d->n_reqs; i++) free_req(&d->reqs[i]);
    free(d->reqs);
    free(d->tel);
    for (size_t i = 0; d->itl_hist && i < d->n_cells; i++) free(d->itl_hist[i]);
    free(d->itl_hist);
    free(d);
    *pd = NULL;
}

/* Grow *arr (element size sz) to hold at least need elements. */
static int grow(void **arr, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap) return CAL_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *g = realloc(*arr, nc * sz);
    if (!g) return CAL_ENOMEM;
    *arr = g;
    *cap = nc;
    return CAL_OK;
}

/* One row of requests into q, checked against what readers index with:
 * q->chunk_ns, when set, holds exactly q->n_chunks timestamps. */
static int read_request_row(cal_store *st, sqlite3_stmt *s, const cal_cell *cell, size_t idx,
                            int flags, cal_req_result *q)
{
    q->status = (cal_req_status)lookup_fn(req_key, CAL_REQ_N_STATUS,
                                          (const char *)sqlite3_column_text(s, 0),
                                          CAL_REQ_STREAM_ERROR);
    q->http_status = sqlite3_column_int(s, 1);
    if (col_dup_into(s, 2, &q->error))
        return fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)cell->run_id);
    q->sched_ns = col_opt(s, 3);
    q->send_ns = sqlite3_column_int64(s, 4);
    q->first_token_ns = sqlite3_column_int64(s, 5);
    q->last_token_ns = sqlite3_column_int64(s, 6);
    q->end_ns = sqlite3_column_int64(s, 7);
    int64_t ptok = col_opt(s, 8), otok = col_opt(s, 9), dtok = col_opt(s, 15);
    q->prompt_tokens = (int)ptok;
    q->output_tokens = (int)otok;
    const char *src = (const char *)sqlite3_column_text(s, 10);
    q->tok_source = src && !strcmp(src, "chunks") ? CAL_TOKSRC_CHUNKS : CAL_TOKSRC_USAGE;
    int64_t nch = sqlite3_column_int64(s, 11);
    double sp = col_real(s, 13), sd = col_real(s, 14);
    q->server_prefill_ms = isnan(sp) ? -1 : sp;
    q->server_decode_ms = isnan(sd) ? -1 : sd;
    q->server_decode_tokens = (int)dtok;
    const char *bad = NULL;
    if (!ts_ok(q->sched_ns, 1) || !ts_ok(q->send_ns, 0) || !ts_ok(q->first_token_ns, 0) ||
        !ts_ok(q->last_token_ns, 0) || !ts_ok(q->end_ns, 0))
        bad = "a timestamp outside [0, 2^62) ns";
    else if (ptok < -1 || ptok > INT32_MAX || otok < -1 || otok > INT32_MAX || dtok < -1 ||
             dtok > INT32_MAX)
        bad = "a token count out of range";
    else if (nch < 0 || nch > INT32_MAX / 4)
        bad = "n_chunks out of range";
    if (bad)
        return fail(st, CAL_ESTORE, "run %lld, cell %lld, request %zu: %s: the store is damaged",
                    (long long)cell->run_id, (long long)cell->id, idx, bad);
    q->n_chunks = (int)nch;
    /* the blob must be exactly the chunks the column counts: readers walk
     * chunk_ns[0 .. n_chunks) */
    int nb = sqlite3_column_bytes(s, 12);
    if (nb != 0 && nb != 4 * q->n_chunks)
        return fail(st, CAL_ESTORE, "run %lld, cell %lld, request %zu: n_chunks %d but the chunks "
                    "blob holds %d bytes (4 per chunk): the store is damaged",
                    (long long)cell->run_id, (long long)cell->id, idx, q->n_chunks, nb);
    if ((flags & CAL_LOAD_CHUNKS) && nb > 0) {
        const void *blob = sqlite3_column_blob(s, 12);
        int nn = 0;
        if (!blob) return fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)cell->run_id);
        int rc = cal_store_chunks_decode(q->send_ns, blob, (size_t)nb, &q->chunk_ns, &nn);
        if (rc == CAL_ENOMEM) return fail(st, rc, "run %lld: out of memory", (long long)cell->run_id);
        if (rc)
            return fail(st, CAL_ESTORE, "run %lld, cell %lld, request %zu: chunk times run past "
                        "2^62 ns: the store is damaged", (long long)cell->run_id,
                        (long long)cell->id, idx);
        assert(nn == q->n_chunks);
    }
    return CAL_OK;
}

static int load_requests(cal_store *st, cal_run_data *d, int flags)
{
    sqlite3_stmt *s = NULL;
    const char *sql =
        "SELECT status, http_status, error, sched_ns, send_ns, first_token_ns, last_token_ns,"
        " end_ns, prompt_tokens, output_tokens, token_source, n_chunks, chunks,"
        " server_prefill_ms, server_decode_ms, server_decode_tokens"
        " FROM requests WHERE cell_id=? ORDER BY idx";
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) return CAL_ESTORE;
    size_t cap = 0;
    int rc = CAL_OK;
    for (size_t c = 0; c < d->n_cells && rc == CAL_OK; c++) {
        cal_cell *cell = &d->cells[c];
        cell->req_first = d->n_reqs;
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, cell->id);
        int step;
        while ((step = sqlite3_step(s)) == SQLITE_ROW) {
            if (grow((void **)&d->reqs, &cap, d->n_reqs + 1, sizeof *d->reqs)) {
                rc = fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)d->run.id);
                break;
            }
            cal_req_result *q = &d->reqs[d->n_reqs];
            memset(q, 0, sizeof *q);
            d->n_reqs++;   /* counted before it is filled, so a failure frees it */
            rc = read_request_row(st, s, cell, d->n_reqs - 1 - cell->req_first, flags, q);
            if (rc) break;
        }
        if (rc == CAL_OK && step != SQLITE_DONE) { note(st); rc = CAL_ESTORE; }
        /* readers take this cell's requests as reqs[req_first .. + n_requests) */
        if (rc == CAL_OK && (int64_t)(d->n_reqs - cell->req_first) != cell->n_requests)
            rc = fail(st, CAL_ESTORE, "run %lld, cell %lld: n_requests %lld but %zu requests are "
                      "stored: the store is damaged", (long long)d->run.id, (long long)cell->id,
                      (long long)cell->n_requests, d->n_reqs - cell->req_first);
    }
    sqlite3_finalize(s);
    return rc;
}

static int load_telemetry(cal_store *st, cal_run_data *d)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db,
                           "SELECT t_ns, backend, metric, unit, value FROM telemetry"
                           " WHERE run_id=? ORDER BY t_ns, rowid", -1, &s, NULL) != SQLITE_OK)
        return CAL_ESTORE;
    sqlite3_bind_int64(s, 1, d->run.id);
    size_t cap = 0;
    int rc = CAL_OK, step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (grow((void **)&d->tel, &cap, d->n_tel + 1, sizeof *d->tel)) {
            rc = fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)d->run.id);
            break;
        }
        cal_store_tel_row *t = &d->tel[d->n_tel++];
        t->t_ns = sqlite3_column_int64(s, 0);
        col_copy(s, 1, t->backend, sizeof t->backend);
        col_copy(s, 2, t->metric, sizeof t->metric);
        col_copy(s, 3, t->unit, sizeof t->unit);
        t->value = col_real(s, 4);
        if (!ts_ok(t->t_ns, 0)) {
            rc = fail(st, CAL_ESTORE, "run %lld: a telemetry time outside [0, 2^62) ns: the store "
                      "is damaged", (long long)d->run.id);
            break;
        }
    }
    if (rc == CAL_OK && step != SQLITE_DONE) { note(st); rc = CAL_ESTORE; }
    sqlite3_finalize(s);
    return rc;
}

/* The ITL histograms of the run's cells whose percentiles came from them
 * (itl_source "histogram"), so a pooled view can merge them: the raw chunk
 * times of those requests were not kept. A store before schema 5 has none. */
static int load_itl_hists(cal_store *st, int64_t run_id, cal_run_data *d)
{
    if (st->version < 5 || !d->n_cells) return CAL_OK;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT h.cell_id, h.itl FROM cell_hists h JOIN cells c ON "
                           "c.id = h.cell_id WHERE c.run_id = ? AND h.itl_source = 'histogram'",
                           -1, &s, NULL) != SQLITE_OK)
        return CAL_ESTORE;
    bind_i64(s, 1, run_id);
    int rc = CAL_OK, step;
    while (rc == CAL_OK && (step = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0);
        size_t k = 0;
        while (k < d->n_cells && d->cells[k].id != id) k++;
        if (k == d->n_cells) continue;
        if (!d->itl_hist && !(d->itl_hist = calloc(d->n_cells, sizeof *d->itl_hist))) {
            rc = fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id);
            break;
        }
        cal_hist *h = malloc(sizeof *h);
        char why[160];
        if (!h) { rc = fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id); break; }
        if (cal_hist_decode(sqlite3_column_blob(s, 1), (size_t)sqlite3_column_bytes(s, 1), h, why,
                            sizeof why) != CAL_OK) {
            free(h);
            rc = fail(st, CAL_ESTORE, "cell %lld, cell_hists.itl: %s", (long long)id, why);
            break;
        }
        free(d->itl_hist[k]);
        d->itl_hist[k] = h;
    }
    sqlite3_finalize(s);
    return rc;
}

int cal_store_load_run(cal_store *st, int64_t run_id, int flags, cal_run_data **out)
{
    if (!st || !out) return CAL_EINVAL;
    *out = NULL;
    int rc = st->readonly ? CAL_OK : cal_store_flush(st);
    if (rc) return rc;
    st->why[0] = '\0';
    cal_run_data *d = calloc(1, sizeof *d);
    if (!d) return fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id);
    sqlite3_stmt *s = NULL;
    rc = CAL_ESTORE;
    /* one read transaction: a consistent snapshot while others write */
    if (exec_sql(st, "BEGIN")) { free(d); return CAL_ESTORE; }
    if (sqlite3_prepare_v2(st->db, "SELECT " RUN_COLS " FROM runs r WHERE r.id=?", -1, &s,
                           NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(s, 1, run_id);
    int step = sqlite3_step(s);
    if (step != SQLITE_ROW) {
        rc = step == SQLITE_DONE ? CAL_ENOTFOUND : CAL_ESTORE;
        goto out;
    }
    rc = read_run_row(st, s, &d->run);
    sqlite3_finalize(s);
    s = NULL;
    if (rc) goto out;

    char sql[4096];
    if (cell_sql(st, sql, sizeof sql, 1)) { rc = CAL_EINTERNAL; goto out; }
    rc = CAL_ESTORE;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) goto out;
    sqlite3_bind_int64(s, 1, run_id);
    size_t cap = 0;
    rc = CAL_OK;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (grow((void **)&d->cells, &cap, d->n_cells + 1, sizeof *d->cells)) {
            rc = fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id);
            break;
        }
        rc = read_cell_row(st, s, &d->cells[d->n_cells++]);
        if (rc) break;
    }
    if (rc == CAL_OK && step != SQLITE_DONE) { note(st); rc = CAL_ESTORE; }
    sqlite3_finalize(s);
    s = NULL;
    if (rc == CAL_OK && !(flags & CAL_LOAD_NO_REQS)) rc = load_requests(st, d, flags);
    if (rc == CAL_OK && !(flags & CAL_LOAD_NO_REQS)) rc = load_itl_hists(st, run_id, d);
    if (rc == CAL_OK) rc = load_telemetry(st, d);
    if (rc == CAL_OK && cal_run_data_read_protocol(d))
        rc = fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id);
out:
    if (rc != CAL_OK) note(st);   /* before COMMIT resets SQLite's message */
    sqlite3_finalize(s);
    exec_sql(st, "COMMIT");
    if (rc != CAL_OK) {
        cal_run_data_free(&d);
        return rc;
    }
    *out = d;
    return CAL_OK;
}

/* ---- per-cell histograms ---------------------------------------------- */

int cal_store_add_cell_hists(cal_store *st, int64_t cell_id, const cal_cell_hists *ch,
                             const char *itl_source)
{
    if (!st || !ch || !itl_source) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return fail(st, CAL_EPERM, "the store was opened read-only");
    uint8_t *blob[CAL_HIST_N_METRIC] = {0};
    size_t bytes[CAL_HIST_N_METRIC] = {0};
    int rc = CAL_OK;
    for (int m = 0; m < CAL_HIST_N_METRIC && rc == CAL_OK; m++)
        rc = cal_hist_encode(&ch->h[m], &blob[m], &bytes[m]);
    sqlite3_stmt *s = NULL;
    if (rc == CAL_OK) {
        rc = CAL_ESTORE;
        if (sqlite3_prepare_v2(st->db,
                               "INSERT OR REPLACE INTO cell_hists (cell_id, itl_source, folded, "
                               "chunks_dropped, ttft, itl, tpot, e2el) VALUES (?,?,?,?,?,?,?,?)",
                               -1, &s, NULL) == SQLITE_OK) {
            bind_i64(s, 1, cell_id);
            bind_text(s, 2, itl_source);
            bind_i64(s, 3, ch->folded);
            bind_i64(s, 4, ch->chunks_dropped);
            for (int m = 0; m < CAL_HIST_N_METRIC; m++)
                sqlite3_bind_blob(s, 5 + m, blob[m], (int)bytes[m], SQLITE_TRANSIENT);
            if (sqlite3_step(s) == SQLITE_DONE) rc = CAL_OK;
        }
        if (rc != CAL_OK) note(st);
    }
    sqlite3_finalize(s);
    for (int m = 0; m < CAL_HIST_N_METRIC; m++) free(blob[m]);
    return rc;
}

int cal_store_load_cell_hists(cal_store *st, int64_t cell_id, cal_cell_hists *ch,
                              char *itl_source, size_t n)
{
    if (!st || !ch) return CAL_EINVAL;
    st->why[0] = '\0';
    cal_cell_hists_init(ch);
    if (itl_source && n) itl_source[0] = '\0';
    sqlite3_stmt *s = NULL;
    /* a store written before the table existed has no histograms */
    if (sqlite3_prepare_v2(st->db,
                           "SELECT itl_source, folded, chunks_dropped, ttft, itl, tpot, e2el "
                           "FROM cell_hists WHERE cell_id = ?", -1, &s, NULL) != SQLITE_OK) {
        sqlite3_finalize(s);
        return CAL_ENOTFOUND;
    }
    bind_i64(s, 1, cell_id);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(s);
        if (rc == SQLITE_DONE) return CAL_ENOTFOUND;
        note(st);
        return CAL_ESTORE;
    }
    if (itl_source) col_copy(s, 0, itl_source, n);
    ch->folded = sqlite3_column_int64(s, 1);
    ch->chunks_dropped = sqlite3_column_int64(s, 2);
    rc = CAL_OK;
    for (int m = 0; m < CAL_HIST_N_METRIC && rc == CAL_OK; m++) {
        char why[160];
        const uint8_t *b = sqlite3_column_blob(s, 3 + m);
        size_t nb = (size_t)sqlite3_column_bytes(s, 3 + m);
        if (cal_hist_decode(b, nb, &ch->h[m], why, sizeof why) != CAL_OK)
            rc = fail(st, CAL_ESTORE, "cell %lld, cell_hists.%s: %s", (long long)cell_id,
                      cal_hist_metric_name((cal_hist_metric)m), why);
    }
    sqlite3_finalize(s);
    if (rc != CAL_OK) cal_cell_hists_init(ch);
    return rc;
}
