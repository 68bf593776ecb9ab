/* Allocation-failure walk (lib/util/alloc.h): a short probe run (two
 * requests to tests/helpers/faultserver) and a store write are repeated with
 * the 1st, 2nd, 3rd … allocation failing, until one completes with no
 * failure injected. Each must end in a clear error — CAL_ENOMEM, a store
 * error whose message says so, or a request with a failed status — never a
 * crash, a hang or a half-written cell; under `make asan` LSan checks after
 * each walk that nothing leaked. caliper's own allocations reach the counter
 * through the linker's --wrap (this binary only: see the Makefile); SQLite,
 * jansson and libcurl through their own allocator hooks.
 * The probe run and the store write are walked at every allocation; the
 * creation of a new store (all migrations) at every 7th. CAL_WALK_STEP=k
 * walks every k-th allocation of each (CAL_WALK_STEP=1: all of all). */
#include <libgen.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>
#include "lib/util/alloc.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/probe.h"
#include "caliper/store.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() __lsan_do_recoverable_leak_check()
#else
#define LEAK_CHECK() 0
#endif

/* ---- the project's own allocations, through the counter (--wrap) ------- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n) { return cal_alloc_tick(CAL_ALLOC_OWN) ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { return cal_alloc_tick(CAL_ALLOC_OWN) ? NULL : __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { return cal_alloc_tick(CAL_ALLOC_OWN) ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return cal_alloc_tick(CAL_ALLOC_OWN) ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return cal_alloc_tick(CAL_ALLOC_OWN) ? NULL : __real_strndup(s, n); }

static char g_bindir[4096];
static pid_t g_server = -1;
static int g_port;
static long g_step = 1;
#define MAX_STEPS 200000   /* a walk that never completes is a bug */

/* ---- the fault server: started with allocation counting disarmed ------- */
static int setup(void **state)
{
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/helpers/faultserver", g_bindir);
    int pfd[2];
    if (pipe(pfd)) return -1;
    signal(SIGPIPE, SIG_IGN);
    g_server = fork();
    if (g_server == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        execl(path, path, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char buf[256];
    size_t len = 0;
    g_port = 0;
    int64_t end = cal_now_ns() + 30000000000LL;   /* a start bound, not a measurement */
    while (!g_port && cal_now_ns() < end && len < sizeof buf - 1) {
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(pfd[0], &rs);
        struct timeval tv = {0, 100000};
        if (select(pfd[0] + 1, &rs, NULL, NULL, &tv) <= 0) continue;
        ssize_t r = read(pfd[0], buf + len, sizeof buf - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        buf[len] = '\0';
        char *at = strstr(buf, "port ");
        if (at && strchr(at, '\n')) g_port = atoi(at + 5);
    }
    close(pfd[0]);
    return g_port > 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (g_server > 0) { kill(g_server, SIGTERM); waitpid(g_server, NULL, 0); }
    return 0;
}

/* ---- one probe run with the n-th allocation failing ---------------------- */
typedef struct walk_stats {
    long steps;          /* runs with a failure injected */
    long total;          /* allocations of the run that completed clean */
    long passed;         /* its allocations from sources not failed */
    long enomem;         /* ended in CAL_ENOMEM (or CAL_ESTORE: out of memory) */
    long req_failed;     /* ended with rc OK and a request not ok */
    long absorbed;       /* a failure the code recovered from: all ok */
} walk_stats;

/* What each request of a clean run brings back: a run that "recovered"
 * from a failed allocation must bring back the same, or it lost data
 * without saying so. */
static struct { int n_chunks, output_tokens; size_t text_len; } g_ref[2];
static int g_have_ref;

/* The distinct messages failed requests ended with, for the summary. */
static struct { char msg[96]; int status; long n; } g_msgs[24];
static void tally(cal_req_status st, const char *error)
{
    char m[96];
    snprintf(m, sizeof m, "%s", error ? error : "(no message)");
    for (char *d = m; *d; d++) if (*d >= '0' && *d <= '9') *d = '#';   /* one line per kind */
    size_t i;
    for (i = 0; i < sizeof g_msgs / sizeof g_msgs[0] && g_msgs[i].n; i++)
        if ((int)st == g_msgs[i].status && !strcmp(g_msgs[i].msg, m)) break;
    if (i == sizeof g_msgs / sizeof g_msgs[0]) return;
    if (!g_msgs[i].n) { snprintf(g_msgs[i].msg, sizeof g_msgs[i].msg, "%s", m); g_msgs[i].status = (int)st; }
    g_msgs[i].n++;
}

/* 1 when the run completed with no failure injected. */
static int probe_once(long fail_at, walk_stats *ws)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/normal", g_port);
    cal_probe_config cfg = {.base_url = url, .api = CAL_API_COMPLETIONS, .model = "m",
                            .ignore_eos = 1, .connect_timeout_ns = 5000000000LL,
                            .idle_timeout_ns = 5000000000LL, .keep_chunks = 1, .keep_text = 1};
    cal_request reqs[2] = {{"hello", 4, 0}, {"world", 4, 0}};
    cal_req_result res[2];
    memset(res, 0, sizeof res);
    cal_load load = {.concurrency = 2};
    cal_probe_stats pst;

    cal_alloc_fail_at(fail_at);
    cal_probe *p = NULL;
    int rc = cal_probe_open(&cfg, &p);
    int ran = 0;
    if (rc == CAL_OK) {
        rc = cal_probe_run(p, reqs, 2, &load, res, NULL, NULL, NULL, &pst);
        ran = 1;
    }
    cal_probe_close(&p);
    long injected = cal_alloc_failures(), count = cal_alloc_count(), passed = cal_alloc_passed();
    cal_alloc_fail_at(0);

    int ok = 0;
    for (int i = 0; i < 2 && ran; i++) ok += res[i].status == CAL_REQ_OK;
    if (!injected) {
        if (rc != CAL_OK || ok != 2)
            fail_msg("probe: the run with no failure injected gave rc %d, %d of 2 ok", rc, ok);
        ws->total = count;
        ws->passed = passed;
        for (int i = 0; i < 2 && !g_have_ref; i++) {
            g_ref[i].n_chunks = res[i].n_chunks;
            g_ref[i].output_tokens = res[i].output_tokens;
            g_ref[i].text_len = res[i].text ? strlen(res[i].text) : 0;
        }
        g_have_ref = 1;
    } else {
        ws->steps++;
        for (int i = 0; i < 2 && rc == CAL_OK && ok == 2 && g_have_ref; i++)
            if (res[i].n_chunks != g_ref[i].n_chunks || !res[i].chunk_ns ||
                res[i].output_tokens != g_ref[i].output_tokens || !res[i].text ||
                strlen(res[i].text) != g_ref[i].text_len)
                fail_msg("probe: allocation %ld failed, yet request %d is ok with %d chunks, %d "
                         "tokens, %zu bytes of text (a clean run: %d, %d, %zu)", fail_at, i,
                         res[i].n_chunks, res[i].output_tokens, res[i].text ? strlen(res[i].text) : 0,
                         g_ref[i].n_chunks, g_ref[i].output_tokens, g_ref[i].text_len);
        if (rc == CAL_ENOMEM) ws->enomem++;
        else if (rc == CAL_OK && ok < 2) ws->req_failed++;
        else if (rc == CAL_OK) ws->absorbed++;
        else fail_msg("probe: allocation %ld failing gave rc %d (%s), not CAL_ENOMEM", fail_at, rc,
                      cal_strerror(rc));
        /* a failed request says so, with a status from the list */
        for (int i = 0; i < 2 && ran; i++) {
            if ((unsigned)res[i].status >= CAL_REQ_N_STATUS)
                fail_msg("probe: allocation %ld: request %d has no status", fail_at, i);
            if (res[i].status != CAL_REQ_OK) tally(res[i].status, res[i].error);
        }
    }
    for (int i = 0; i < 2 && ran; i++) cal_req_result_free(&res[i]);
    return !injected;
}

static void walk(const char *what, int (*once)(long, walk_stats *), walk_stats *ws, long dflt_step)
{
    const char *e = getenv("CAL_WALK_STEP");
    g_step = e && atol(e) > 0 ? atol(e) : dflt_step;
    memset(ws, 0, sizeof *ws);
    long n;
    for (n = 1; n < MAX_STEPS; n += g_step)
        if (once(n, ws)) break;
    if (n >= MAX_STEPS) fail_msg("%s: still failing after %d allocations", what, MAX_STEPS);
    fprintf(stderr, "%s: %ld allocations in a clean run (and %ld not failed); %ld failed in "
            "turn (every %ld%s): %ld ended in out of memory, %ld with a failed request, %ld "
            "recovered\n", what, ws->total, ws->passed, ws->steps, g_step,
            g_step == 1 ? "" : ": CAL_WALK_STEP=1 for all", ws->enomem, ws->req_failed,
            ws->absorbed);
    assert_true(ws->steps > 0);
    assert_int_equal(LEAK_CHECK(), 0);
}

/* libcurl's own allocations are counted but not failed by default: with
 * libcurl 7.88.1, a failed 416-byte allocation inside
 * curl_multi_socket_action is followed by SIGFPE inside libcurl (its bug,
 * not caliper's; CAL_WALK_CURL=1 walks them too, to check a newer one). */
static void test_probe_walk(void **state)
{
    (void)state;
    const char *e = getenv("CAL_WALK_CURL");
    cal_alloc_fail_sources(e && *e == '1' ? CAL_ALLOC_ALL : CAL_ALLOC_ALL & ~CAL_ALLOC_CURL);
    walk_stats ws;
    memset(&ws, 0, sizeof ws);
    assert_true(probe_once(0, &ws));   /* the reference */
    walk("probe run", probe_once, &ws, 1);
    cal_alloc_fail_sources(CAL_ALLOC_ALL);
    for (size_t i = 0; i < sizeof g_msgs / sizeof g_msgs[0] && g_msgs[i].n; i++)
        fprintf(stderr, "  %5ld × %s: %s\n", g_msgs[i].n, cal_req_status_name(g_msgs[i].status),
                g_msgs[i].msg);
    assert_true(ws.total > 20);   /* the counter saw the run: library and own allocations */
}

/* ---- one store write with the n-th allocation failing -------------------- */
static char g_db[96];
static unsigned char *g_tmpl;   /* a migrated, empty store's bytes */
static size_t g_tmpl_len;

static void rm_db(void)
{
    char b[128];
    unlink(g_db);
    snprintf(b, sizeof b, "%s-wal", g_db); unlink(b);
    snprintf(b, sizeof b, "%s-shm", g_db); unlink(b);
}

static void fill(cal_req_result *r, int n)
{
    memset(r, 0, sizeof *r * (size_t)n);
    for (int i = 0; i < n; i++) {
        r[i].status = i ? CAL_REQ_OK : CAL_REQ_HTTP_ERROR;
        r[i].http_status = i ? 200 : 500;
        r[i].send_ns = 1000000 + i;
        r[i].sched_ns = -1;
        r[i].prompt_tokens = r[i].output_tokens = r[i].server_decode_tokens = -1;
        r[i].server_prefill_ms = r[i].server_decode_ms = -1;
        r[i].n_chunks = i ? 3 : 0;
        r[i].chunk_ns = i ? __real_malloc(3 * sizeof(int64_t)) : NULL;
        for (int k = 0; k < r[i].n_chunks; k++) r[i].chunk_ns[k] = 2000000 + k * 1000;
        r[i].error = i ? NULL : __real_strdup("server said no");
    }
}

/* An error from the store under a failed allocation: CAL_ENOMEM, or
 * CAL_ESTORE with SQLite's or the store's own "out of memory". */
static int oom_error(cal_store *st, int rc, const char *step, long fail_at)
{
    if (rc == CAL_ENOMEM) return 1;
    if (rc == CAL_ESTORE && st && strstr(cal_store_errmsg(st), "out of memory")) return 1;
    fail_msg("store: allocation %ld failing: %s gave %d (%s: %s)", fail_at, step, rc, cal_strerror(rc),
             st ? cal_store_errmsg(st) : "-");
    return 0;
}

/* open: no handle to ask, so the why-buffer must say out of memory */
static int injected_why(int rc, const char *why, long fail_at)
{
    if (rc == CAL_ENOMEM || (rc == CAL_ESTORE && strstr(why, "out of memory"))) return 1;
    fail_msg("store: allocation %ld failing: open gave %d (%s)", fail_at, rc, why);
    return 0;
}

static void put_template(void)
{
    rm_db();
    FILE *f = fopen(g_db, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(g_tmpl, 1, g_tmpl_len, f), g_tmpl_len);
    fclose(f);
}

/* Creating a store: open of a new file, which applies every migration. */
static int create_once(long fail_at, walk_stats *ws)
{
    rm_db();
    cal_alloc_fail_at(fail_at);
    cal_store *st = NULL;
    char why[400];
    int rc = cal_store_open_ex(g_db, 0, &st, why, sizeof why);
    cal_store_close(&st);
    long injected = cal_alloc_failures(), count = cal_alloc_count(), passed = cal_alloc_passed();
    cal_alloc_fail_at(0);
    if (!injected) {
        if (rc) fail_msg("store: creating it with no failure injected: %s", why);
        ws->total = count;
        ws->passed = passed;
        return 1;
    }
    ws->steps++;
    if (rc) {
        injected_why(rc, why, fail_at);
        ws->enomem++;
    } else {
        ws->absorbed++;
    }
    /* a failed creation leaves a file a later open completes */
    rc = cal_store_open_ex(g_db, 0, &st, why, sizeof why);
    if (rc) fail_msg("store: after allocation %ld failed in creation, reopening: %s", fail_at, why);
    if (cal_store_schema_version(st) != CAL_STORE_SCHEMA_VERSION)
        fail_msg("store: after allocation %ld failed in creation: schema %d", fail_at,
                 cal_store_schema_version(st));
    cal_store_close(&st);
    return 0;
}

/* Writing a run into an existing store: open, begin, a cell of three
 * requests, telemetry, finish, and reading it back. */
static int store_once(long fail_at, walk_stats *ws)
{
    put_template();
    cal_req_result r[3];
    fill(r, 3);
    cal_cell c;
    memset(&c, 0, sizeof c);
    cal_summary_init(&c.sum);
    c.n_requests = 3;
    c.process_age_ns = -1;
    cal_run run = {0};
    run.label = "walk";
    run.target_json = "{\"kind\":\"url\",\"url\":\"http://u:pw@127.0.0.1:9/\"}";

    cal_alloc_fail_at(fail_at);
    cal_store *st = NULL;
    const char *step = "open";
    char why[400];
    int rc = cal_store_open_ex(g_db, 0, &st, why, sizeof why);
    if (rc && injected_why(rc, why, fail_at)) rc = CAL_ENOMEM;
    if (!rc) { step = "begin_run"; rc = cal_store_begin_run(st, &run); }
    int cell_rc = -999;
    if (!rc) { step = "add_cell"; rc = cell_rc = cal_store_add_cell(st, run.id, &c, r, 3); }
    for (int i = 0; i < 3 && !rc; i++) {
        step = "add_telemetry";
        rc = cal_store_add_telemetry(st, run.id, 1000 + i, "proc", "rss", "B", i);
    }
    if (!rc) { step = "finish_run"; rc = cal_store_finish_run(st, run.id, CAL_RUN_OK, "[]"); }
    cal_run_data *d = NULL;
    if (!rc) { step = "load_run"; rc = cal_store_load_run(st, run.id, CAL_LOAD_CHUNKS, &d); }
    int load_ok = d && d->n_reqs == 3 && d->reqs[1].n_chunks == 3 && d->reqs[1].chunk_ns;
    cal_run_data_free(&d);
    long injected = cal_alloc_failures(), count = cal_alloc_count(), passed = cal_alloc_passed();
    if (rc && injected) oom_error(st, rc, step, fail_at);
    cal_alloc_fail_at(0);   /* the checks below allocate freely */
    cal_store_close(&st);
    for (int i = 0; i < 3; i++) cal_req_result_free(&r[i]);
    if (!injected) {
        if (rc || !load_ok) fail_msg("store: the write with no failure injected gave %d at %s", rc, step);
        ws->total = count;
        ws->passed = passed;
    } else {
        ws->steps++;
        if (rc) ws->enomem++;
        else ws->absorbed++;
    }

    /* whatever happened, the file is whole and a cell is all or nothing */
    sqlite3 *db;
    if (access(g_db, F_OK) == 0 && sqlite3_open(g_db, &db) == SQLITE_OK) {
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM cells), (SELECT count(*) FROM requests),"
                               " (SELECT count(*) FROM runs WHERE target LIKE '%pw%')", -1, &s,
                               NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
            int cells = sqlite3_column_int(s, 0), nreq = sqlite3_column_int(s, 1);
            if (nreq != 3 * cells || cells > 1)
                fail_msg("store: allocation %ld: %d cells with %d requests", fail_at, cells, nreq);
            if (cell_rc == CAL_OK && cells != 1) fail_msg("store: allocation %ld: the added cell is gone", fail_at);
            if (sqlite3_column_int(s, 2)) fail_msg("store: allocation %ld: a password was stored", fail_at);
        }
        sqlite3_finalize(s);
        sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL);
        if (s && sqlite3_step(s) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(s, 0), "ok"))
            fail_msg("store: allocation %ld: integrity_check: %s", fail_at, sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
        sqlite3_close(db);
    }
    return !injected;
}

static void set_db_path(void)
{
    /* tmpfs when there is one: each step creates or rewrites the file */
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_db, sizeof g_db, "%s/caliper-test-oom-%d.db", dir, (int)getpid());
}

static void test_store_create_walk(void **state)
{
    (void)state;
    set_db_path();
    walk_stats ws;
    /* every 7th by default: creating a store parses the whole schema
     * (~5,800 allocations), so a full walk costs ~17 M allocations */
    walk("store creation", create_once, &ws, 7);
    assert_true(ws.total > 20);
    rm_db();
}

static void test_store_write_walk(void **state)
{
    (void)state;
    set_db_path();
    rm_db();
    cal_store *st;
    assert_int_equal(cal_store_open(g_db, &st), CAL_OK);
    cal_store_close(&st);
    FILE *f = fopen(g_db, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    g_tmpl_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g_tmpl = __real_malloc(g_tmpl_len);
    assert_non_null(g_tmpl);
    assert_int_equal(fread(g_tmpl, 1, g_tmpl_len, f), g_tmpl_len);
    fclose(f);
    walk_stats ws;
    walk("store write", store_once, &ws, 1);
    free(g_tmpl);
    assert_true(ws.total > 20);
    rm_db();
}

int main(int argc, char **argv)
{
    (void)argc;
    /* before anything touches SQLite, jansson or libcurl */
    cal_alloc_fns real = {__real_malloc, __real_calloc, __real_realloc, free, __real_strdup};
    char why[128];
    if (cal_alloc_hook_libraries(&real, why, sizeof why)) {
        fprintf(stderr, "test_malloc_fail: cannot hook the libraries' allocators: %s\n", why);
        return 1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", argv[0]);
    snprintf(g_bindir, sizeof g_bindir, "%s", dirname(tmp));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_probe_walk, setup, teardown),
        cmocka_unit_test(test_store_create_walk),
        cmocka_unit_test(test_store_write_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
