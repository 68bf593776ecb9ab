/* Unit tests: the result store — migrations, WAL, two writers at once, a
 * run round trip (cells, requests, chunk blobs, telemetry), lookups;
 * read-only opens (missing file, read-only directory, older schema); a
 * damaged file (lying columns, flipped bytes, truncation) gives an error,
 * never a read past a buffer; labels must be UTF-8; target URLs are stored
 * without credentials. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "tmp_db.h"
#include "caliper/error.h"
#include "caliper/protocol.h"
#include "caliper/store.h"
#include "caliper/utf8.h"

static char *tmp_db(void)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/caliper-test-store-XXXXXX");
    return tmp_db_name(path);   /* a new, empty file each time */
}

static void test_open_migrates_and_reopens(void **state)
{
    (void)state;
    char *p = tmp_db();
    cal_store *st = NULL;
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    assert_int_equal(cal_store_schema_version(st), CAL_STORE_SCHEMA_VERSION);
    cal_store_close(&st);
    assert_null(st);
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    assert_int_equal(cal_store_schema_version(st), CAL_STORE_SCHEMA_VERSION);
    cal_store_close(&st);

    /* WAL is on, and the schema is recorded once per step */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    sqlite3_prepare_v2(db, "SELECT count(*), max(version) FROM schema_version", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), CAL_STORE_SCHEMA_VERSION);
    assert_int_equal(sqlite3_column_int(s, 1), CAL_STORE_SCHEMA_VERSION);
    sqlite3_finalize(s);
    /* every summary field is a column of cells */
    for (size_t i = 0; i < cal_summary_n_fields; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM pragma_table_info('cells') WHERE name='%s'",
                 cal_summary_fields[i].name);
        sqlite3_prepare_v2(db, sql, -1, &s, NULL);
        assert_int_equal(sqlite3_step(s), SQLITE_ROW);
        if (sqlite3_column_int(s, 0) != 1) fail_msg("cells lacks column %s", cal_summary_fields[i].name);
        sqlite3_finalize(s);
    }
    /* an upgrade: a file at schema 1 (without the columns of schemas 2 and
     * 3) gains them on open, and its old rows survive with NULL there */
    assert_int_equal(sqlite3_exec(db,
                     "INSERT INTO runs (started_wall_ns, status) VALUES (1, 'ok');"
                     "INSERT INTO cells (run_id, seq, kind, completed) VALUES (1, 0, 'shots', 5);"
                     "ALTER TABLE cells DROP COLUMN total_token_throughput;"
                     "ALTER TABLE cells DROP COLUMN std_ttft_ms;"
                     "ALTER TABLE cells DROP COLUMN std_tpot_ms;"
                     "ALTER TABLE cells DROP COLUMN std_itl_ms;"
                     "ALTER TABLE cells DROP COLUMN std_e2el_ms;"
                     "ALTER TABLE cells DROP COLUMN clock_mhz_min;"
                     "ALTER TABLE cells DROP COLUMN power_w_min;"
                     "DROP TABLE noise;"
                     "DROP TABLE cell_hists;"
                     "ALTER TABLE cells DROP COLUMN goodput;"
                     "ALTER TABLE cells DROP COLUMN prompt_basis;"
                     "ALTER TABLE cells DROP COLUMN prompt_asked;"
                     "ALTER TABLE cells DROP COLUMN prompt_offset;"
                     "ALTER TABLE requests DROP COLUMN cached_tokens;"
                     "DELETE FROM schema_version WHERE version >= 2;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    assert_int_equal(cal_store_schema_version(st), CAL_STORE_SCHEMA_VERSION);
    cal_run_data *d1;
    assert_int_equal(cal_store_load_run(st, 1, 0, &d1), CAL_OK);
    assert_int_equal(d1->n_cells, 1);
    assert_int_equal(d1->cells[0].sum.completed, 5);
    assert_true(isnan(d1->cells[0].sum.total_token_throughput));
    assert_true(isnan(d1->cells[0].sum.clock_mhz_min));
    assert_true(isnan(d1->cells[0].sum.goodput));
    /* schema 9's: how the length was made is not recorded for it */
    assert_int_equal(d1->cells[0].prompt_basis, CAL_PROMPT_UNRECORDED);
    assert_int_equal(d1->cells[0].prompt_offset, -1);
    assert_int_equal(d1->cells[0].prompt_asked, 0);
    cal_run_data_free(&d1);
    cal_store_close(&st);
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);

    /* a file written by a newer caliper is refused, not damaged */
    sqlite3_exec(db, "INSERT INTO schema_version VALUES (999)", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_int_equal(cal_store_open(p, &st), CAL_ESTORE);
    assert_null(st);
    tmp_db_remove(p);

    /* not a database at all */
    FILE *f = fopen(p, "w");
    fputs("this is not sqlite, just text long enough to be read as a header........", f);
    fclose(f);
    assert_int_equal(cal_store_open(p, &st), CAL_ESTORE);
    tmp_db_remove(p);
}

static void fill_results(cal_req_result *r, int n, int64_t t0)
{
    memset(r, 0, sizeof *r * (size_t)n);
    for (int i = 0; i < n; i++) {
        r[i].status = i == n - 1 ? CAL_REQ_TIMEOUT : CAL_REQ_OK;
        r[i].http_status = 200;
        r[i].sched_ns = t0 + i * 1000000;
        r[i].send_ns = r[i].sched_ns + 1000;
        r[i].prompt_tokens = 128;
        r[i].output_tokens = i == n - 1 ? -1 : 4;
        r[i].server_prefill_ms = r[i].server_decode_ms = -1;
        r[i].server_decode_tokens = -1;
        if (r[i].status == CAL_REQ_OK) {
            r[i].n_chunks = 4;
            r[i].chunk_ns = malloc(4 * sizeof(int64_t));
            for (int k = 0; k < 4; k++) r[i].chunk_ns[k] = r[i].send_ns + 5000000 + k * 1234567;
            r[i].first_token_ns = r[i].chunk_ns[0];
            r[i].last_token_ns = r[i].end_ns = r[i].chunk_ns[3];
        } else {
            r[i].error = strdup("no bytes for 60000 ms (idle timeout)");
            r[i].end_ns = r[i].send_ns + 60000000000LL;
        }
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    char *p = tmp_db();
    cal_store *st;
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    cal_run run = {0};
    run.label = "base-v1";
    run.build = "caliper test";
    run.host_json = "{\"cpu\":\"x\"}";
    run.target_json = "{\"kind\":\"url\"}";
    assert_int_equal(cal_store_begin_run(st, &run), CAL_OK);
    assert_true(run.id > 0);

    cal_req_result r[3];
    fill_results(r, 3, 1000000000LL);
    cal_cell c;
    memset(&c, 0, sizeof c);
    c.kind = CAL_CELL_CONCURRENCY;
    c.concurrency = 4;
    c.prompt_tokens = 128;
    c.prompt_exact = 1;
    snprintf(c.content, sizeof c.content, "code");
    c.max_tokens = 4;
    c.output_fixed = 1;
    c.shot_index = 2;
    c.shot_kind = CAL_SHOT_RESTED;
    c.rest_before_ns = 15000000000LL;
    c.process_age_ns = -1;
    c.n_requests = 3;
    cal_summary_init(&c.sum);
    c.sum.completed = 2;
    c.sum.failed = 1;
    c.sum.n_timeout = 1;
    c.sum.output_throughput = 123.5;
    assert_int_equal(cal_store_add_cell(st, run.id, &c, r, 3), CAL_OK);
    assert_true(c.id > 0);
    for (int i = 0; i < 300; i++)   /* more than one batch */
        assert_int_equal(cal_store_add_telemetry(st, run.id, 1000 + i, "cpufreq", "cpu_mhz_mean",
                                                 "MHz", 2000.0 + i), CAL_OK);
    assert_int_equal(cal_store_finish_run(st, run.id, CAL_RUN_INTERRUPTED, "[\"a verdict\"]"), CAL_OK);
    assert_int_equal(cal_store_finish_run(st, 424242, CAL_RUN_OK, NULL), CAL_ENOTFOUND);

    cal_run_data *d = NULL;
    assert_int_equal(cal_store_load_run(st, run.id, CAL_LOAD_CHUNKS, &d), CAL_OK);
    assert_int_equal(d->run.status, CAL_RUN_INTERRUPTED);
    assert_string_equal(d->run.label, "base-v1");
    assert_string_equal(d->run.verdicts_json, "[\"a verdict\"]");
    assert_true(d->run.ended_wall_ns >= d->run.started_wall_ns);
    assert_int_equal(d->n_cells, 1);
    const cal_cell *lc = &d->cells[0];
    assert_int_equal(lc->concurrency, 4);
    assert_int_equal(lc->shot_kind, CAL_SHOT_RESTED);
    assert_int_equal(lc->rest_before_ns, 15000000000LL);
    assert_int_equal(lc->process_age_ns, -1);
    assert_string_equal(lc->content, "code");
    assert_true(fabs(lc->sum.output_throughput - 123.5) < 1e-9);
    assert_true(isnan(lc->sum.clock_mhz_mean));     /* absent stays absent */
    assert_int_equal(lc->sum.n_timeout, 1);
    assert_int_equal(d->n_reqs, 3);
    assert_int_equal(d->reqs[2].status, CAL_REQ_TIMEOUT);
    assert_string_equal(d->reqs[2].error, "no bytes for 60000 ms (idle timeout)");
    assert_int_equal(d->reqs[2].output_tokens, -1);
    assert_int_equal(d->reqs[0].n_chunks, 4);
    for (int k = 0; k < 4; k++)
        assert_true(llabs(d->reqs[0].chunk_ns[k] - r[0].chunk_ns[k]) < 1000);   /* µs */
    assert_int_equal(d->reqs[0].first_token_ns, r[0].first_token_ns);
    assert_int_equal(d->n_tel, 300);
    assert_true(fabs(d->tel[299].value - 2299.0) < 1e-9);
    assert_string_equal(d->tel[0].unit, "MHz");
    cal_run_data_free(&d);
    assert_null(d);

    /* lookups */
    int64_t id;
    assert_int_equal(cal_store_find_run(st, "base-v1", &id), CAL_OK);
    assert_int_equal(id, run.id);
    assert_int_equal(cal_store_find_run(st, "latest", &id), CAL_OK);
    assert_int_equal(id, run.id);
    char ref[32];
    snprintf(ref, sizeof ref, "%lld", (long long)run.id);
    assert_int_equal(cal_store_find_run(st, ref, &id), CAL_OK);
    assert_int_equal(cal_store_find_run(st, "nope", &id), CAL_ENOTFOUND);
    assert_int_equal(cal_store_find_run(st, "9999", &id), CAL_ENOTFOUND);
    assert_int_equal(cal_store_load_run(st, 9999, 0, &d), CAL_ENOTFOUND);
    cal_run *runs;
    size_t n;
    assert_int_equal(cal_store_list_runs(st, 0, &runs, &n), CAL_OK);
    assert_int_equal(n, 1);
    assert_int_equal(runs[0].n_cells, 1);
    cal_store_runs_free(runs, n);
    for (int i = 0; i < 3; i++) cal_req_result_free(&r[i]);
    cal_store_close(&st);
    tmp_db_remove(p);
}

static void test_chunk_blob(void **state)
{
    (void)state;
    int64_t t[4] = {1000000, 1000999, 5000000000LL + 1000000, 1000};   /* last goes back */
    uint8_t *b;
    size_t nb;
    assert_int_equal(cal_store_chunks_encode(0, t, 4, &b, &nb), CAL_OK);
    assert_int_equal(nb, 16);
    int64_t *o;
    int n;
    assert_int_equal(cal_store_chunks_decode(0, b, nb, &o, &n), CAL_OK);
    assert_int_equal(n, 4);
    assert_int_equal(o[0], 1000000);
    assert_true(llabs(o[1] - t[1]) < 1000);
    assert_true(llabs(o[2] - t[2]) < 1000);
    assert_true(o[3] == o[2]);   /* a backwards step clamps to 0, never wraps */
    free(o);
    assert_int_equal(cal_store_chunks_decode(0, b, 7, &o, &n), CAL_EPROTO);
    free(b);
}

/* Two processes write to one file at once: every cell of both lands. */
static void test_two_writers(void **state)
{
    (void)state;
    char *p = tmp_db();
    cal_store *st;
    /* both create and migrate the new file at once, then write */
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            cal_store *s2;
            if (cal_store_open(p, &s2)) _exit(3);
            cal_run run = {0};
            if (cal_store_begin_run(s2, &run)) _exit(4);
            for (int i = 0; i < 25; i++) {
                cal_req_result r[3];
                fill_results(r, 3, 1000);
                cal_cell c;
                memset(&c, 0, sizeof c);
                cal_summary_init(&c.sum);
                c.seq = i;
                c.n_requests = 3;
                if (cal_store_add_cell(s2, run.id, &c, r, 3)) _exit(5);
                for (int j = 0; j < 3; j++) cal_req_result_free(&r[j]);
                cal_store_add_telemetry(s2, run.id, i, "process", "rss_bytes", "B", i);
            }
            if (cal_store_finish_run(s2, run.id, CAL_RUN_OK, NULL)) _exit(6);
            cal_store_close(&s2);
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int ws;
        assert_int_equal(waitpid(kids[k], &ws, 0), kids[k]);
        assert_true(WIFEXITED(ws));
        assert_int_equal(WEXITSTATUS(ws), 0);
    }
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    cal_run *runs;
    size_t n;
    assert_int_equal(cal_store_list_runs(st, 0, &runs, &n), CAL_OK);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(runs[i].n_cells, 25);
        assert_int_equal(runs[i].status, CAL_RUN_OK);
        cal_run_data *d;
        assert_int_equal(cal_store_load_run(st, runs[i].id, 0, &d), CAL_OK);
        assert_int_equal(d->n_reqs, 75);
        assert_int_equal(d->n_tel, 25);
        cal_run_data_free(&d);
    }
    cal_store_runs_free(runs, n);
    cal_store_close(&st);
    tmp_db_remove(p);
}

static void test_fields(void **state)
{
    (void)state;
    assert_non_null(cal_summary_field("output_throughput"));
    assert_non_null(cal_summary_field("per_request_output_throughput_median"));
    assert_non_null(cal_summary_field("p99_ttft_ms"));
    assert_null(cal_summary_field("nope"));
    cal_summary s;
    cal_summary_init(&s);
    assert_true(isnan(cal_summary_get(&s, cal_summary_field("median_itl_ms"))));
    assert_true(cal_summary_get(&s, cal_summary_field("completed")) == 0);
    s.completed = 7;
    assert_true(cal_summary_get(&s, cal_summary_field("completed")) == 7);
    /* names are unique */
    for (size_t i = 0; i < cal_summary_n_fields; i++)
        for (size_t j = i + 1; j < cal_summary_n_fields; j++)
            assert_true(strcmp(cal_summary_fields[i].name, cal_summary_fields[j].name) != 0);
}

/* ---- read-only, damaged files, labels, credentials ------------------------ */

/* A store with one run ("ref"), one cell of 3 requests (two with 4 chunk
 * times) and 5 telemetry rows, closed (its WAL folded back into the file). */
static int64_t make_store(const char *p)
{
    cal_store *st;
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    cal_run run = {0};
    run.label = "ref";
    run.target_json = "{\"kind\":\"url\",\"url\":\"http://127.0.0.1:9/\"}";
    assert_int_equal(cal_store_begin_run(st, &run), CAL_OK);
    cal_req_result r[3];
    fill_results(r, 3, 1000000000LL);
    cal_cell c;
    memset(&c, 0, sizeof c);
    cal_summary_init(&c.sum);
    c.n_requests = 3;
    c.process_age_ns = -1;
    c.start_ns = 1000000000LL;
    c.end_ns = 2000000000LL;
    assert_int_equal(cal_store_add_cell(st, run.id, &c, r, 3), CAL_OK);
    for (int i = 0; i < 3; i++) cal_req_result_free(&r[i]);
    for (int i = 0; i < 5; i++)
        assert_int_equal(cal_store_add_telemetry(st, run.id, 1000000000LL + i, "proc", "rss", "B", i), CAL_OK);
    assert_int_equal(cal_store_finish_run(st, run.id, CAL_RUN_OK, NULL), CAL_OK);
    cal_store_close(&st);
    return run.id;
}

/* Schema 9: how each cell's prompt length was made and checked, and each
 * request's cache hit, round-trip; a store of schema 8 still reads, read
 * only, with them unrecorded. */
static void test_prompt_basis_and_cache(void **state)
{
    (void)state;
    char *p = tmp_db();
    cal_store *st;
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    cal_run run = {0};
    assert_int_equal(cal_store_begin_run(st, &run), CAL_OK);
    cal_req_result r[3];
    fill_results(r, 3, 1000000000LL);
    r[0].cached_tokens = 0;
    r[1].cached_tokens = 7;
    r[2].cached_tokens = -1;
    cal_cell c;
    memset(&c, 0, sizeof c);
    cal_summary_init(&c.sum);
    c.n_requests = 3;
    c.process_age_ns = -1;
    c.start_ns = 1000000000LL;
    c.end_ns = 2000000000LL;
    c.prompt_tokens = 32;
    c.prompt_basis = CAL_PROMPT_SERVER;
    c.prompt_asked = 64;
    c.prompt_offset = 0;
    assert_int_equal(cal_store_add_cell(st, run.id, &c, r, 3), CAL_OK);
    for (int i = 0; i < 3; i++) cal_req_result_free(&r[i]);
    assert_int_equal(cal_store_finish_run(st, run.id, CAL_RUN_OK, NULL), CAL_OK);
    cal_run_data *d;
    assert_int_equal(cal_store_load_run(st, run.id, 0, &d), CAL_OK);
    assert_int_equal(d->cells[0].prompt_basis, CAL_PROMPT_SERVER);
    assert_int_equal(d->cells[0].prompt_asked, 64);
    assert_int_equal(d->cells[0].prompt_offset, 0);
    assert_int_equal(d->cells[0].prompt_tokens, 32);
    assert_int_equal(d->reqs[0].cached_tokens, 0);
    assert_int_equal(d->reqs[1].cached_tokens, 7);
    assert_int_equal(d->reqs[2].cached_tokens, -1);
    cal_run_data_free(&d);
    cal_store_close(&st);
    /* back to schema 8, then read only: nothing recorded, nothing invented */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "ALTER TABLE cells DROP COLUMN prompt_basis;"
                                      "ALTER TABLE cells DROP COLUMN prompt_asked;"
                                      "ALTER TABLE cells DROP COLUMN prompt_offset;"
                                      "ALTER TABLE requests DROP COLUMN cached_tokens;"
                                      "DELETE FROM schema_version WHERE version >= 9;",
                                  NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    char why[300];
    assert_int_equal(cal_store_open_ex(p, CAL_STORE_READONLY, &st, why, sizeof why), CAL_OK);
    assert_int_equal(cal_store_schema_version(st), 8);
    assert_int_equal(cal_store_load_run(st, run.id, 0, &d), CAL_OK);
    assert_int_equal(d->cells[0].prompt_basis, CAL_PROMPT_UNRECORDED);
    assert_int_equal(d->cells[0].prompt_offset, -1);
    assert_int_equal(d->reqs[1].cached_tokens, -1);
    cal_run_data_free(&d);
    cal_store_close(&st);
    unlink(p);
}

static unsigned char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}
static void spit(const char *p, const unsigned char *b, size_t n)
{
    tmp_db_remove(p);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void test_readonly_open(void **state)
{
    (void)state;
    char *p = tmp_db();
    char why[512];
    cal_store *st = (cal_store *)1;
    /* a missing file: said so, and nothing is created */
    assert_int_equal(cal_store_open_ex(p, CAL_STORE_READONLY, &st, why, sizeof why), CAL_ENOTFOUND);
    assert_null(st);
    assert_non_null(strstr(why, "no such store"));
    assert_non_null(strstr(why, p));
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(cal_store_open_ex("", CAL_STORE_READONLY, &st, why, sizeof why), CAL_EINVAL);
    assert_int_equal(cal_store_open_ex(p, 0x80, &st, why, sizeof why), CAL_EINVAL);

    int64_t id = make_store(p);
    struct stat before, after;
    assert_int_equal(stat(p, &before), 0);
    size_t n0;
    unsigned char *bytes0 = slurp(p, &n0);
    assert_int_equal(cal_store_open_ex(p, CAL_STORE_READONLY, &st, why, sizeof why), CAL_OK);
    assert_int_equal(cal_store_schema_version(st), CAL_STORE_SCHEMA_VERSION);
    cal_run *runs;
    size_t n;
    assert_int_equal(cal_store_list_runs(st, 0, &runs, &n), CAL_OK);
    assert_int_equal(n, 1);
    cal_store_runs_free(runs, n);
    cal_run_data *d;
    assert_int_equal(cal_store_load_run(st, id, CAL_LOAD_CHUNKS, &d), CAL_OK);
    assert_int_equal(d->n_reqs, 3);
    cal_run_data_free(&d);
    /* every write is refused, saying why */
    cal_run run = {0};
    assert_int_equal(cal_store_begin_run(st, &run), CAL_EPERM);
    assert_non_null(strstr(cal_store_errmsg(st), "read-only"));
    cal_cell c;
    memset(&c, 0, sizeof c);
    assert_int_equal(cal_store_add_cell(st, id, &c, NULL, 0), CAL_EPERM);
    assert_int_equal(cal_store_add_telemetry(st, id, 1, "a", "b", "c", 1), CAL_EPERM);
    assert_int_equal(cal_store_finish_run(st, id, CAL_RUN_OK, NULL), CAL_EPERM);
    cal_store_close(&st);
    /* the file itself is untouched */
    assert_int_equal(stat(p, &after), 0);
    assert_int_equal(after.st_size, before.st_size);
    size_t n1;
    unsigned char *bytes1 = slurp(p, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(bytes0, bytes1, n0);
    free(bytes0);
    free(bytes1);

    /* an older schema (1) is read as it is, not migrated */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                     "ALTER TABLE cells DROP COLUMN total_token_throughput;"
                     "ALTER TABLE cells DROP COLUMN std_ttft_ms;"
                     "ALTER TABLE cells DROP COLUMN std_tpot_ms;"
                     "ALTER TABLE cells DROP COLUMN std_itl_ms;"
                     "ALTER TABLE cells DROP COLUMN std_e2el_ms;"
                     "ALTER TABLE cells DROP COLUMN clock_mhz_min;"
                     "ALTER TABLE cells DROP COLUMN power_w_min;"
                     "DROP TABLE noise;"
                     "DROP TABLE cell_hists;"
                     "ALTER TABLE cells DROP COLUMN goodput;"
                     "ALTER TABLE cells DROP COLUMN prompt_basis;"
                     "ALTER TABLE cells DROP COLUMN prompt_asked;"
                     "ALTER TABLE cells DROP COLUMN prompt_offset;"
                     "ALTER TABLE requests DROP COLUMN cached_tokens;"
                     "DELETE FROM schema_version WHERE version >= 2;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(cal_store_open_ex(p, CAL_STORE_READONLY, &st, why, sizeof why), CAL_OK);
    assert_int_equal(cal_store_schema_version(st), 1);
    assert_int_equal(cal_store_load_run(st, id, CAL_LOAD_CHUNKS, &d), CAL_OK);
    assert_int_equal(d->n_cells, 1);
    assert_true(isnan(d->cells[0].sum.std_ttft_ms));
    assert_true(isnan(d->cells[0].sum.power_w_min));
    assert_int_equal(d->cells[0].sum.completed, 0);
    cal_run_data_free(&d);
    cal_store_close(&st);
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "SELECT max(version) FROM schema_version", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), 1);   /* still 1: nothing migrated */
    sqlite3_finalize(s);
    /* newer than this build: refused with the versions named */
    sqlite3_exec(db, "INSERT INTO schema_version VALUES (999)", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_int_equal(cal_store_open_ex(p, CAL_STORE_READONLY, &st, why, sizeof why), CAL_ESTORE);
    assert_non_null(strstr(why, "newer caliper"));
    tmp_db_remove(p);

    /* not a database; an SQLite file that is not a caliper store */
    FILE *f = fopen(p, "w");
    fputs("this is not sqlite, just text long enough to be read as a header........", f);
    fclose(f);
    assert_int_equal(cal_store_open_ex(p, CAL_STORE_READONLY, &st, why, sizeof why), CAL_ESTORE);
    assert_non_null(strstr(why, "not a caliper store"));
    tmp_db_remove(p);
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_int_equal(cal_store_open_ex(p, CAL_STORE_READONLY, &st, why, sizeof why), CAL_ESTORE);
    assert_non_null(strstr(why, "not a caliper store"));
    tmp_db_remove(p);
}

/* A store in a directory this process cannot write is listed. As root,
 * permission bits do not stop writes, so the reader drops to an unprivileged
 * user in a child first: the test holds under CI's root as well. */
static void test_readonly_directory(void **state)
{
    (void)state;
    char dir[] = "/tmp/caliper-test-rodir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[128];
    snprintf(p, sizeof p, "%s/s.db", dir);
    int64_t id = make_store(p);
    assert_int_equal(chmod(p, 0444), 0);
    assert_int_equal(chmod(dir, 0555), 0);
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        if (geteuid() == 0 && (setgid(65534) || setuid(65534))) _exit(10);
        if (access(dir, W_OK) == 0) _exit(11);   /* not a read-only directory after all */
        cal_store *st;
        char why[512];
        if (cal_store_open_ex(p, CAL_STORE_READONLY, &st, why, sizeof why)) {
            fprintf(stderr, "read-only open: %s\n", why);
            _exit(12);
        }
        cal_run_data *d;
        int rc = cal_store_load_run(st, id, CAL_LOAD_CHUNKS, &d);
        if (rc) { fprintf(stderr, "load: %s\n", cal_store_errmsg(st)); _exit(13); }
        int ok = d->n_reqs == 3 && d->n_cells == 1 && d->n_tel == 5;
        cal_run_data_free(&d);
        cal_store_close(&st);
        /* nothing was created in the directory */
        char wal[160];
        snprintf(wal, sizeof wal, "%s-shm", p);
        _exit(ok ? (access(wal, F_OK) == 0 ? 15 : 0) : 14);
    }
    int ws;
    assert_int_equal(waitpid(kid, &ws, 0), kid);
    chmod(dir, 0755);
    tmp_db_remove(p);
    rmdir(dir);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
}

/* Apply sql to the pristine store bytes, then load: expect CAL_ESTORE with
 * cal_store_errmsg naming `what` and "damaged", from both open modes. */
static void expect_damaged_in(const char *p, const unsigned char *b, size_t nb, int64_t id,
                              const char *sql, const char *what, int first_flags)
{
    spit(p, b, nb);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    sqlite3_close(db);
    for (int mode = 0; mode < 2; mode++) {
        cal_store *st;
        char why[512];
        assert_int_equal(cal_store_open_ex(p, mode ? CAL_STORE_READONLY : 0, &st, why, sizeof why), CAL_OK);
        for (int flags = first_flags; flags <= CAL_LOAD_CHUNKS; flags += CAL_LOAD_CHUNKS) {
            cal_run_data *d = (cal_run_data *)1;
            int rc = cal_store_load_run(st, id, flags, &d);
            if (rc != CAL_ESTORE) fail_msg("%s: load gave %d, not CAL_ESTORE", sql, rc);
            assert_null(d);
            const char *m = cal_store_errmsg(st);
            if (!strstr(m, what) || !strstr(m, "damaged")) fail_msg("%s: \"%s\" does not name %s", sql, m, what);
        }
        cal_store_close(&st);
    }
}

#define expect_damaged(p, b, nb, id, sql, what) expect_damaged_in(p, b, nb, id, sql, what, 0)

static void test_lying_columns(void **state)
{
    (void)state;
    char *p = tmp_db();
    int64_t id = make_store(p);
    size_t nb;
    unsigned char *b = slurp(p, &nb);
    /* n_chunks larger than the blob: readers would walk past chunk_ns */
    expect_damaged(p, b, nb, id, "UPDATE requests SET n_chunks = n_chunks + 100 WHERE idx = 0", "n_chunks");
    expect_damaged(p, b, nb, id, "UPDATE requests SET n_chunks = -3 WHERE idx = 0", "n_chunks");
    expect_damaged(p, b, nb, id, "UPDATE requests SET n_chunks = 2147483647 WHERE idx = 0", "n_chunks");
    expect_damaged(p, b, nb, id, "UPDATE requests SET n_chunks = 9e18 WHERE idx = 0", "n_chunks");
    /* blobs of the wrong size */
    expect_damaged(p, b, nb, id, "UPDATE requests SET chunks = x'010203' WHERE idx = 0", "n_chunks");
    expect_damaged(p, b, nb, id, "UPDATE requests SET chunks = zeroblob(8) WHERE idx = 0", "n_chunks");
    expect_damaged(p, b, nb, id, "UPDATE requests SET chunks = zeroblob(400) WHERE idx = 1", "n_chunks");
    expect_damaged(p, b, nb, id, "UPDATE requests SET chunks = 'text!!!!' WHERE idx = 1", "n_chunks");
    /* a blob where the column counts none */
    expect_damaged(p, b, nb, id, "UPDATE requests SET chunks = zeroblob(4) WHERE idx = 2", "n_chunks");
    /* a cell that claims more (or fewer) requests than it has */
    expect_damaged(p, b, nb, id, "UPDATE cells SET n_requests = 50", "n_requests");
    expect_damaged(p, b, nb, id, "UPDATE cells SET n_requests = 2", "n_requests");
    expect_damaged(p, b, nb, id, "UPDATE cells SET n_requests = -1", "n_requests");
    /* times readers subtract */
    expect_damaged(p, b, nb, id, "UPDATE requests SET send_ns = 9223372036854775807 WHERE idx = 1", "timestamp");
    expect_damaged(p, b, nb, id, "UPDATE requests SET first_token_ns = -5 WHERE idx = 0", "timestamp");
    /* chunk times are checked as they are decoded */
    expect_damaged_in(p, b, nb, id, "UPDATE requests SET send_ns = 4611686018427387903 WHERE idx = 0",
                      "chunk times", CAL_LOAD_CHUNKS);
    expect_damaged(p, b, nb, id, "UPDATE requests SET output_tokens = -7 WHERE idx = 0", "token count");
    expect_damaged(p, b, nb, id, "UPDATE cells SET end_ns = -9", "end_ns");
    expect_damaged(p, b, nb, id, "UPDATE telemetry SET t_ns = -1 WHERE rowid = 2", "telemetry");
    expect_damaged(p, b, nb, id, "UPDATE runs SET started_wall_ns = -100", "start or end time");
    /* the untouched copy still loads (the checks pass what was written) */
    spit(p, b, nb);
    cal_store *st;
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    cal_run_data *d;
    assert_int_equal(cal_store_load_run(st, id, CAL_LOAD_CHUNKS, &d), CAL_OK);
    assert_int_equal(d->n_reqs, 3);
    cal_run_data_free(&d);
    cal_store_close(&st);
    free(b);
    tmp_db_remove(p);
}

/* What a reader does with a loaded run: index every request of every cell
 * and every chunk time, and summarise (the path ASan caught reading past
 * chunk_ns). Under ASan a read past any buffer aborts here. */
static void use_run(const cal_run_data *d)
{
    volatile int64_t sink = 0;
    for (size_t c = 0; c < d->n_cells; c++) {
        const cal_cell *cell = &d->cells[c];
        assert_true(cell->n_requests >= 0);
        assert_true(cell->req_first + (size_t)cell->n_requests <= d->n_reqs);
        const cal_req_result *r = &d->reqs[cell->req_first];
        for (int64_t i = 0; i < cell->n_requests; i++)
            if (r[i].chunk_ns)
                for (int k = 0; k < r[i].n_chunks; k++) sink += r[i].chunk_ns[k];
        cal_summary sum;
        cal_summary_compute(r, (size_t)cell->n_requests, 0, 0, &sum);
    }
    (void)sink;
}

static void test_flipped_and_truncated(void **state)
{
    (void)state;
    char *p = tmp_db();
    int64_t id = make_store(p);
    size_t nb;
    unsigned char *b = slurp(p, &nb);
    unsigned char *m = malloc(nb);
    assert_non_null(m);
    int loaded = 0, refused = 0;
    /* one byte flipped at a time across the whole file, and truncations */
    for (size_t off = 0; off < nb + 8 * 4096; off += off < nb ? 37 : 4096) {
        size_t len = nb;
        memcpy(m, b, nb);
        if (off < nb) m[off] ^= 0xff;
        else len = (off - nb) / 4096 * (nb / 8);   /* 0, 1/8, 2/8 ... of the file */
        spit(p, m, len);
        for (int mode = 0; mode < 2; mode++) {
            cal_store *st;
            char why[512];
            if (cal_store_open_ex(p, mode ? CAL_STORE_READONLY : 0, &st, why, sizeof why)) {
                assert_true(why[0] != '\0');
                refused++;
                continue;
            }
            cal_run *runs;
            size_t n;
            if (cal_store_list_runs(st, 0, &runs, &n) == CAL_OK) cal_store_runs_free(runs, n);
            cal_run_data *d;
            int rc = cal_store_load_run(st, id, CAL_LOAD_CHUNKS, &d);
            if (rc == CAL_OK) {
                use_run(d);
                cal_run_data_free(&d);
                loaded++;
            } else {
                assert_null(d);
                assert_true(cal_store_errmsg(st)[0] != '\0');
                refused++;
            }
            cal_store_close(&st);
        }
    }
    assert_true(loaded > 0 && refused > 0);   /* both outcomes were reached */
    free(m);
    free(b);
    tmp_db_remove(p);
}

static void test_label_utf8(void **state)
{
    (void)state;
    /* the checker: valid text passes whole; the first bad byte is named */
    assert_int_equal(cal_utf8_check("abc", 3), 3);
    assert_int_equal(cal_utf8_check("gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80", 15), 15);
    assert_int_equal(cal_utf8_check("ab\xff", 3), 2);
    assert_int_equal(cal_utf8_check("\xc0\xaf", 2), 0);           /* overlong '/' */
    assert_int_equal(cal_utf8_check("\xe0\x80\xaf", 3), 0);       /* overlong */
    assert_int_equal(cal_utf8_check("\xed\xa0\x80", 3), 0);       /* a surrogate */
    assert_int_equal(cal_utf8_check("\xf4\x90\x80\x80", 4), 0);   /* above U+10FFFF */
    assert_int_equal(cal_utf8_check("x\xe2\x82", 3), 1);          /* truncated */
    assert_int_equal(cal_utf8_check("\xc3\x28", 2), 0);           /* bad continuation */
    assert_int_equal(cal_utf8_check(NULL, 0), 0);

    char *p = tmp_db();
    cal_store *st;
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    cal_run run = {0};
    run.label = "v1-\xff\xfe";
    assert_int_equal(cal_store_begin_run(st, &run), CAL_EINVAL);
    assert_non_null(strstr(cal_store_errmsg(st), "label"));
    assert_non_null(strstr(cal_store_errmsg(st), "UTF-8"));
    run.label = "";
    assert_int_equal(cal_store_begin_run(st, &run), CAL_EINVAL);
    run.label = "m\xc3\xbcnchen";
    assert_int_equal(cal_store_begin_run(st, &run), CAL_OK);
    cal_run *runs;
    size_t n;
    assert_int_equal(cal_store_list_runs(st, 0, &runs, &n), CAL_OK);
    assert_int_equal(n, 1);   /* nothing stored for the refused ones */
    assert_string_equal(runs[0].label, "m\xc3\xbcnchen");
    cal_store_runs_free(runs, n);
    cal_store_close(&st);
    tmp_db_remove(p);
}

static void test_target_credentials(void **state)
{
    (void)state;
    char *p = tmp_db();
    cal_store *st;
    assert_int_equal(cal_store_open(p, &st), CAL_OK);
    cal_run run = {0};
    run.target_json = "{\"kind\":\"url\",\"name\":\"http://alice:s3cret@127.0.0.1:8000/v1\","
                      "\"url\":\"https://tok3n@example.com/\",\"model\":\"m\","
                      "\"ab\":[{\"url\":\"http://bob:hunter2@10.0.0.1:1/\"},"
                      "{\"url\":\"http://carol:pw9@[::1\"}]}";
    assert_int_equal(cal_store_begin_run(st, &run), CAL_OK);
    cal_run_data *d;
    assert_int_equal(cal_store_load_run(st, run.id, 0, &d), CAL_OK);
    const char *t = d->run.target_json;
    assert_null(strstr(t, "s3cret"));
    assert_null(strstr(t, "alice"));
    assert_null(strstr(t, "tok3n"));
    assert_null(strstr(t, "hunter2"));
    assert_null(strstr(t, "pw9"));
    assert_non_null(strstr(t, "http://127.0.0.1:8000/v1"));
    assert_non_null(strstr(t, "https://example.com/"));
    assert_non_null(strstr(t, "\"model\":\"m\""));
    cal_run_data_free(&d);
    /* a target without credentials is stored byte for byte */
    cal_run r2 = {0};
    r2.target_json = "{\"kind\": \"url\", \"url\": \"http://127.0.0.1:8000\"}";
    assert_int_equal(cal_store_begin_run(st, &r2), CAL_OK);
    assert_int_equal(cal_store_load_run(st, r2.id, 0, &d), CAL_OK);
    assert_string_equal(d->run.target_json, r2.target_json);
    cal_run_data_free(&d);
    /* not JSON: refused rather than stored unread */
    cal_run r3 = {0};
    r3.target_json = "http://u:p@h/";
    assert_int_equal(cal_store_begin_run(st, &r3), CAL_EINVAL);
    cal_store_close(&st);
    tmp_db_remove(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_migrates_and_reopens),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_chunk_blob),
        cmocka_unit_test(test_two_writers),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_readonly_open),
        cmocka_unit_test(test_prompt_basis_and_cache),
        cmocka_unit_test(test_readonly_directory),
        cmocka_unit_test(test_lying_columns),
        cmocka_unit_test(test_flipped_and_truncated),
        cmocka_unit_test(test_label_utf8),
        cmocka_unit_test(test_target_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
