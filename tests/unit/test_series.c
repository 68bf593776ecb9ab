/* Unit tests: the per-request series (series.h). Each formula of
 * docs/metrics.md on a request with hand-picked timestamps (values worked
 * out by hand, not by the code under test); the cases where a series is
 * undefined; the ITL iterator; the per-request table's keys against the
 * series keys; and the cell summary, the histograms and goodput reading the
 * same extractor. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/analysis.h"
#include "caliper/error.h"
#include "caliper/goodput.h"
#include "caliper/keep.h"
#include "caliper/protocol.h"
#include "caliper/series.h"

#define MS 1000000LL
#define NEAR(got, want) assert_true(fabs((double)(got) - (double)(want)) <= 1e-9 * fmax(1, fabs((double)(want))))

/* Scheduled at 1000 ms, sent 2 ms late; first chunk 50 ms after the
 * schedule, then gaps of 10, 20, 30 ms; done 5 ms after the last chunk.
 * 4 chunks, 7 output tokens (usage), 100 prompt tokens. */
static int64_t CH[4] = {1050 * MS, 1060 * MS, 1080 * MS, 1110 * MS};
static cal_req_result req(void)
{
    cal_req_result r;
    cal_req_result_init(&r);
    r.status = CAL_REQ_OK;
    r.sched_ns = 1000 * MS;
    r.send_ns = 1002 * MS;
    r.first_token_ns = CH[0];
    r.last_token_ns = CH[3];
    r.end_ns = 1115 * MS;
    r.prompt_tokens = 100;
    r.output_tokens = 7;
    r.tok_source = CAL_TOKSRC_USAGE;
    r.n_chunks = 4;
    r.chunk_ns = CH;
    r.server_decode_ms = 40;
    r.server_decode_tokens = 9;
    return r;
}

static void test_formulas(void **state)
{
    (void)state;
    cal_req_result r = req();
    assert_int_equal(cal_req_base_ns(&r), 1000 * MS);
    NEAR(cal_req_value(&r, CAL_S_TTFT_MS), 50);                 /* 1050 − 1000 */
    NEAR(cal_req_value(&r, CAL_S_E2E_MS), 115);                 /* 1115 − 1000 */
    NEAR(cal_req_value(&r, CAL_S_TPOT_MS), 65.0 / 6);           /* (115 − 50) ÷ (7 − 1) */
    NEAR(cal_req_value(&r, CAL_S_REQ_TOKS), 7 / 0.113);         /* 7 ÷ (1115 − 1002) ms */
    NEAR(cal_req_value(&r, CAL_S_PREFILL_TOKS), 100 / 0.050);   /* 2000 tok/s */
    NEAR(cal_req_value(&r, CAL_S_DECODE_TOKS), 6 / 0.060);      /* (7 − 1) ÷ (1110 − 1050) ms */
    NEAR(cal_req_decode_ms(&r), 60);
    NEAR(cal_req_value(&r, CAL_S_SERVER_DECODE_TOKS), 8 / 0.040); /* (9 − 1) ÷ 40 ms */
    /* many values per request, or one per shot: not a request's value */
    assert_true(isnan(cal_req_value(&r, CAL_S_ITL_MS)));
    assert_true(isnan(cal_req_value(&r, CAL_S_AGG_TOKS)));
    assert_true(isnan(cal_req_value(NULL, CAL_S_TTFT_MS)));
    /* the proxy's entry point is the same formula */
    NEAR(cal_decode_tok_s(CH[0], CH[3], 7), cal_req_value(&r, CAL_S_DECODE_TOKS));
    /* SPEC 1.3: 378 tokens, the 377 after the first over 10.003 s */
    NEAR(cal_decode_tok_s(5 * MS, 5 * MS + 10003 * MS, 378), 377 / 10.003);
    assert_true(isnan(cal_decode_tok_s(5 * MS, 5 * MS, 378)));   /* one read: no span */
    assert_true(isnan(cal_decode_tok_s(5 * MS, 9 * MS, 1)));     /* one token: nothing after it */
    assert_true(isnan(cal_decode_tok_s(0, 9 * MS, 5)));          /* no first text */
}

/* Without a schedule the latencies count from the send; a failed request
 * has values (export keeps them) but no samples (summaries skip it). */
static void test_base_and_status(void **state)
{
    (void)state;
    cal_req_result r = req();
    r.sched_ns = 0;
    NEAR(cal_req_value(&r, CAL_S_TTFT_MS), 48);
    NEAR(cal_req_value(&r, CAL_S_E2E_MS), 113);
    r = req();
    r.status = CAL_REQ_STREAM_ERROR;
    NEAR(cal_req_value(&r, CAL_S_TTFT_MS), 50);
    assert_true(isnan(cal_req_sample(&r, CAL_S_TTFT_MS)));
    r.status = CAL_REQ_OK;
    NEAR(cal_req_sample(&r, CAL_S_TTFT_MS), 50);
}

static void test_undefined(void **state)
{
    (void)state;
    cal_req_result r = req();
    r.output_tokens = 1;            /* nothing after the first token */
    assert_true(isnan(cal_req_value(&r, CAL_S_TPOT_MS)));
    assert_true(isnan(cal_req_value(&r, CAL_S_DECODE_TOKS)));
    NEAR(cal_req_value(&r, CAL_S_REQ_TOKS), 1 / 0.113);
    r = req();
    r.first_token_ns = r.last_token_ns = 0;   /* no text came */
    assert_true(isnan(cal_req_value(&r, CAL_S_TTFT_MS)));
    assert_true(isnan(cal_req_value(&r, CAL_S_PREFILL_TOKS)));
    assert_true(isnan(cal_req_value(&r, CAL_S_TPOT_MS)));
    assert_true(isnan(cal_req_decode_ms(&r)));
    NEAR(cal_req_value(&r, CAL_S_E2E_MS), 115);
    r = req();
    r.prompt_tokens = -1;
    assert_true(isnan(cal_req_value(&r, CAL_S_PREFILL_TOKS)));
    r = req();
    r.server_decode_ms = -1;        /* a server that sends no timings */
    assert_true(isnan(cal_req_value(&r, CAL_S_SERVER_DECODE_TOKS)));
    r = req();
    r.server_decode_tokens = 1;
    assert_true(isnan(cal_req_value(&r, CAL_S_SERVER_DECODE_TOKS)));
    r = req();
    r.last_token_ns = r.first_token_ns;       /* one chunk */
    assert_true(isnan(cal_req_value(&r, CAL_S_DECODE_TOKS)));
}

static void test_itl_iterator(void **state)
{
    (void)state;
    cal_req_result r = req();
    cal_itl_iter it;
    double g, want[] = {10, 20, 30};
    assert_int_equal(cal_itl_begin(&it, &r), 3);
    for (int k = 0; k < 3; k++) {
        assert_true(cal_itl_next(&it, &g));
        NEAR(g, want[k]);
    }
    assert_false(cal_itl_next(&it, &g));
    r.status = CAL_REQ_TIMEOUT;             /* no samples of a failed request ... */
    assert_int_equal(cal_itl_begin(&it, &r), 0);
    assert_false(cal_itl_next(&it, &g));
    assert_int_equal(cal_itl_begin_any(&it, &r), 3);   /* ... but its gaps are there */
    assert_true(cal_itl_next(&it, &g));
    NEAR(g, 10);
    r = req();
    r.chunk_ns = NULL;                      /* times dropped (--keep-chunks) */
    assert_int_equal(cal_itl_begin(&it, &r), 0);
    assert_false(cal_itl_next(&it, &g));
}

/* Every per-request field that is a series is named by the series' key,
 * each key once, and every per-request series of the schema is there. */
static void test_request_table(void **state)
{
    (void)state;
    int seen[CAL_S__N] = {0};
    for (size_t i = 0; i < cal_req_n_fields; i++) {
        const cal_req_field *f = &cal_req_fields[i];
        for (size_t j = 0; j < i; j++) assert_string_not_equal(f->key, cal_req_fields[j].key);
        assert_non_null(f->doc);
        if (f->series < 0) continue;
        assert_true(f->series < CAL_S__N);
        assert_string_equal(f->key, cal_series_key((cal_series)f->series));
        seen[f->series]++;
    }
    for (int s = 0; s < CAL_S__N; s++) assert_int_equal(seen[s], s == CAL_S_AGG_TOKS ? 0 : 1);
    /* and every per-request field of the summary names a series */
    for (size_t k = 0; k < cal_summary_n_fields; k++)
        if (cal_summary_fields[k].column == CAL_COL_PER_REQUEST)
            assert_true(cal_summary_fields[k].series > CAL_S_AGG_TOKS);
}

/* The summary's per-request fields are the statistics of the extractor's
 * samples: two ok requests and a failed one whose values must not count. */
static void test_summary_reads_extractor(void **state)
{
    (void)state;
    static int64_t ch2[3] = {2030 * MS, 2040 * MS, 2050 * MS};
    cal_req_result r[3] = {req(), req(), req()};
    r[1].sched_ns = 2000 * MS;
    r[1].send_ns = 2001 * MS;
    r[1].first_token_ns = ch2[0];
    r[1].last_token_ns = ch2[2];
    r[1].end_ns = 2060 * MS;
    r[1].n_chunks = 3;
    r[1].chunk_ns = ch2;
    r[1].output_tokens = 3;
    r[2].status = CAL_REQ_HTTP_ERROR;
    r[2].first_token_ns = r[2].sched_ns + 1 * MS;   /* a TTFT of 1 ms must not count */
    cal_summary s;
    assert_int_equal(cal_summary_compute(r, 3, 0, 0, &s), CAL_OK);
    NEAR(s.median_ttft_ms, (50 + 30) / 2.0);
    NEAR(s.mean_e2el_ms, (115 + 60) / 2.0);
    NEAR(s.median_tpot_ms, (65.0 / 6 + 30.0 / 2) / 2);
    NEAR(s.decode_tps_median, (100 + 2 / 0.020) / 2);
    NEAR(s.server_decode_tps_median, 200);
    /* ITL over every gap: 10, 20, 30, 10, 10 */
    NEAR(s.mean_itl_ms, 16);
    NEAR(s.median_itl_ms, 10);
    assert_int_equal(s.completed, 2);

    /* the histograms fold the same values (ns) */
    cal_cell_hists ch;
    cal_cell_hists_init(&ch);
    for (int i = 0; i < 3; i++) cal_cell_hists_add(&ch, &r[i]);
    assert_int_equal(ch.h[CAL_HIST_TTFT].n, 2);
    assert_int_equal(ch.h[CAL_HIST_TTFT].min_ns, 30 * MS);
    assert_int_equal(ch.h[CAL_HIST_E2E].max_ns, 115 * MS);
    assert_int_equal(ch.h[CAL_HIST_ITL].n, 5);
    assert_int_equal(ch.h[CAL_HIST_ITL].max_ns, 30 * MS);
    assert_int_equal(ch.h[CAL_HIST_TPOT].max_ns, 15 * MS);

    /* goodput's bounds read the same series */
    cal_slo slo;
    cal_slo_init(&slo);
    slo.ttft_ms = 40;               /* r[0]'s 50 ms is over, r[1]'s 30 is not */
    assert_int_equal(cal_slo_met(&slo, &r[0]), 0);
    assert_int_equal(cal_slo_met(&slo, &r[1]), 1);
    cal_slo_init(&slo);
    slo.tpot_ms = 12;               /* 10.83 ms and 15 ms */
    assert_int_equal(cal_slo_met(&slo, &r[0]), 1);
    assert_int_equal(cal_slo_met(&slo, &r[1]), 0);
    cal_slo_init(&slo);
    slo.itl_p99_ms = 25;            /* r[0]'s gaps reach 30 ms */
    assert_int_equal(cal_slo_met(&slo, &r[0]), 0);
    assert_int_equal(cal_slo_met(&slo, &r[1]), 1);
    r[0].chunk_ns = NULL;           /* its gaps unknown: so is the answer */
    assert_int_equal(cal_slo_met(&slo, &r[0]), -1);
}

/* Pooling follows each field's pool column: two shots with requests of
 * different speeds, telemetry and goodput set per shot; every field of the
 * table is checked against its rule, computed here from the shots. */
static void test_pool_by_table(void **state)
{
    (void)state;
    static cal_req_result rq[5];
    static int64_t ch[5][3];
    cal_cell cells[2];
    memset(cells, 0, sizeof cells);
    for (int i = 0; i < 5; i++) {
        cal_req_result *q = &rq[i];
        cal_req_result_init(q);
        q->status = i == 4 ? CAL_REQ_TIMEOUT : CAL_REQ_OK;
        q->sched_ns = q->send_ns = (1000 + 100 * i) * MS;
        for (int k = 0; k < 3; k++) ch[i][k] = q->send_ns + (20 + 5 * i + k * (3 + i)) * MS;
        q->first_token_ns = ch[i][0];
        q->last_token_ns = ch[i][2];
        q->end_ns = ch[i][2] + 1 * MS;
        q->n_chunks = 3;
        q->chunk_ns = ch[i];
        q->prompt_tokens = 10 + i;
        q->output_tokens = 3;
        q->server_decode_ms = 5 + i;
        q->server_decode_tokens = 3;
    }
    double dur[2] = {2.0, 6.0};
    cells[0].req_first = 0; cells[0].n_requests = 2;
    cells[1].req_first = 2; cells[1].n_requests = 3;
    for (int c = 0; c < 2; c++) {
        cells[c].start_ns = rq[cells[c].req_first].send_ns;
        cells[c].end_ns = cells[c].start_ns + (int64_t)(dur[c] * 1e9);
        assert_int_equal(cal_summary_compute(rq + cells[c].req_first, (size_t)cells[c].n_requests,
                                             dur[c], 0, &cells[c].sum), CAL_OK);
        cells[c].sum.clock_mhz_mean = 1000 + 500 * c;
        cells[c].sum.clock_mhz_min = 900 + 500 * c;
        cells[c].sum.power_w_mean = c ? NAN : 50;      /* one shot without a power reading */
        cells[c].sum.power_w_min = c ? NAN : 40;
        cells[c].sum.goodput = 0.5 + c;
    }
    cal_run_data d;
    memset(&d, 0, sizeof d);
    d.cells = cells;
    d.n_cells = 2;
    d.reqs = rq;
    d.n_reqs = 5;
    size_t idx[2] = {0, 1};
    cal_summary all, p;
    assert_int_equal(cal_summary_compute(rq, 5, dur[0] + dur[1], 0, &all), CAL_OK);
    assert_int_equal(cal_analysis_pool(&d, idx, 2, &p), CAL_OK);
    int per_rule[CAL_POOL__N] = {0};
    for (size_t k = 0; k < cal_summary_n_fields; k++) {
        const cal_field *f = &cal_summary_fields[k];
        double a = cal_summary_get(&cells[0].sum, f), b = cal_summary_get(&cells[1].sum, f);
        double got = cal_summary_get(&p, f), want = NAN;
        switch (f->pool) {
        case CAL_POOL_SUM: want = a + b; break;
        case CAL_POOL_RATE: want = (a * dur[0] + b * dur[1]) / (dur[0] + dur[1]); break;
        case CAL_POOL_REQUESTS: want = cal_summary_get(&all, f); break;
        case CAL_POOL_TIME_MEAN: want = isnan(b) ? a : (a * dur[0] + b * dur[1]) / (dur[0] + dur[1]); break;
        case CAL_POOL_MIN: want = isnan(b) ? a : fmin(a, b); break;
        default: fail();
        }
        per_rule[f->pool]++;
        if (isnan(want)) { assert_true(isnan(got)); continue; }
        assert_false(isnan(got));
        NEAR(got, want);
    }
    for (int r = 0; r < CAL_POOL__N; r++) assert_true(per_rule[r] > 0);
    NEAR(p.goodput, (0.5 * 2 + 1.5 * 6) / 8);   /* the rate rule, by hand */
    NEAR(p.clock_mhz_mean, (1000 * 2 + 1500 * 6) / 8.0);
    assert_int_equal(p.completed, 4);

    /* requests not loaded: the sums and rates still pool from the shots,
     * the per-request statistics are unknown */
    d.n_reqs = 0;
    d.reqs = NULL;
    assert_int_equal(cal_analysis_pool(&d, idx, 2, &p), CAL_OK);
    assert_int_equal(p.completed, 4);
    assert_int_equal(p.n_timeout, 1);
    NEAR(p.duration, 8);
    NEAR(p.output_throughput, 12 / 8.0);
    assert_true(isnan(p.median_ttft_ms));
    assert_true(isnan(p.decode_tps_median));
    NEAR(p.goodput, (0.5 * 2 + 1.5 * 6) / 8);
    cells[1].sum.goodput = NAN;                  /* one shot's unknown: so is the pool's */
    assert_int_equal(cal_analysis_pool(&d, idx, 2, &p), CAL_OK);
    assert_true(isnan(p.goodput));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formulas),
        cmocka_unit_test(test_base_and_status),
        cmocka_unit_test(test_undefined),
        cmocka_unit_test(test_itl_iterator),
        cmocka_unit_test(test_request_table),
        cmocka_unit_test(test_summary_reads_extractor),
        cmocka_unit_test(test_pool_by_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
