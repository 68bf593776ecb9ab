/* The SQLite result store: open + migrations and close. Writes are in
 * store_write.c, reads in store_read.c, the helpers they share (error text,
 * statements, names, the cells table's columns) in store_sql.c;
 * docs/schema.md documents the tables. */
#include <errno.h>
#include <sys/stat.h>
#include "caliper/clock.h"
#include "store_sql.h"

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
    /* 9: how each cell's prompt length was made and checked (schema.h
     * cal_prompt_basis), the length /tokenize said where the server's count
     * replaced it, and what the server adds to every prompt; each request's
     * prefix-cache hit as the server reported it */
    ("ALTER TABLE cells ADD COLUMN prompt_basis TEXT;"
     "ALTER TABLE cells ADD COLUMN prompt_asked INTEGER;"
     "ALTER TABLE cells ADD COLUMN prompt_offset INTEGER;"
     "ALTER TABLE requests ADD COLUMN cached_tokens INTEGER;"),
};
#define N_MIGRATIONS (sizeof MIGRATIONS / sizeof MIGRATIONS[0])

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
    if (cal_st_exec(st, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"))
        return CAL_ESTORE;
    for (;;) {
        /* Each step checks the version inside its own write transaction, so
         * two processes opening a new file at once apply each step once. */
        if (cal_st_exec(st, "BEGIN IMMEDIATE")) return CAL_ESTORE;
        int v;
        if (read_version(st, &v)) goto fail;
        if (v > (int)N_MIGRATIONS) {           /* a newer caliper wrote it */
            cal_st_fail(st, CAL_ESTORE, "written by a newer caliper (schema %d; this build knows up to %d)",
                 v, (int)N_MIGRATIONS);
            goto fail;
        }
        if (v == (int)N_MIGRATIONS) {
            st->version = v;
            return cal_st_exec(st, "COMMIT");
        }
        if (cal_st_exec(st, MIGRATIONS[v])) goto fail;
        char sql[80];
        snprintf(sql, sizeof sql, "INSERT INTO schema_version VALUES (%d)", v + 1);
        if (cal_st_exec(st, sql) || cal_st_exec(st, "COMMIT")) goto fail;
    }
fail:
    if (st->open_rc == SQLITE_OK) st->open_rc = sqlite3_errcode(st->db);   /* before ROLLBACK */
    cal_st_rollback(st);
    return CAL_ESTORE;
}

/* The steps of open: WAL, foreign keys, sync level, migrations. */
static int open_steps(cal_store *st)
{
    st->open_rc = SQLITE_OK;
    st->why[0] = '\0';
    if (cal_st_exec(st, "PRAGMA journal_mode=WAL") || cal_st_exec(st, "PRAGMA foreign_keys=ON") ||
        cal_st_exec(st, "PRAGMA synchronous=NORMAL"))
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
     * far adds columns: those of cells' summary are found here, the others
     * (schema 9's prompt columns and requests.cached_tokens) are read by
     * version in store_sql.c and store_read.c. */
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
