/* Unit tests: the result store — migrations, WAL, two writers at once, a
 * run round trip (cells, requests, chunk blobs, telemetry), lookups. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/store.h"

static char *tmp_db(void)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/caliper-test-store-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);   /* a new, empty file each time */
    return path;
}
static void rm_db(const char *p)
{
    char b[128];
    unlink(p);
    snprintf(b, sizeof b, "%s-wal", p); unlink(b);
    snprintf(b, sizeof b, "%s-shm", p); unlink(b);
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
    cal_run_data_free(&d1);
    cal_store_close(&st);
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);

    /* a file written by a newer caliper is refused, not damaged */
    sqlite3_exec(db, "INSERT INTO schema_version VALUES (999)", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_int_equal(cal_store_open(p, &st), CAL_ESTORE);
    assert_null(st);
    rm_db(p);

    /* not a database at all */
    FILE *f = fopen(p, "w");
    fputs("this is not sqlite, just text long enough to be read as a header........", f);
    fclose(f);
    assert_int_equal(cal_store_open(p, &st), CAL_ESTORE);
    rm_db(p);
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
    rm_db(p);
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
    rm_db(p);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_migrates_and_reopens),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_chunk_blob),
        cmocka_unit_test(test_two_writers),
        cmocka_unit_test(test_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
