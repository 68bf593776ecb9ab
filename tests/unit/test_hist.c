/* Unit tests: histogram percentiles against raw type-7 percentiles of the
 * same data (within CAL_HIST_REL_ERROR), exact mean/sd/count, merge equal to
 * the union, the serialised form's round trip and its checks; the chunk
 * budget (--keep-chunks); the shard split; and a shard write → read → merge
 * whose cells equal the summary of the union of the shards' requests. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/analysis.h"
#include "caliper/hist.h"
#include "caliper/keep.h"
#include "caliper/protocol.h"
#include "caliper/shard.h"
#include "caliper/stats.h"
#include "caliper/store.h"

static uint64_t rng = 88172645463325252ULL;
static double urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
/* log-normal around median m ns, spread s: latency-like, three decades */
static int64_t lognorm(double m, double s)
{
    double u1 = urand() + 1e-12, u2 = urand();
    double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
    return (int64_t)(m * exp(s * z));
}

static void check_against_raw(const int64_t *v, size_t n)
{
    cal_hist h;
    cal_hist_init(&h);
    double *ms = malloc(n * sizeof *ms);
    for (size_t i = 0; i < n; i++) {
        cal_hist_add(&h, v[i]);
        ms[i] = (double)v[i] / 1e6;
    }
    assert_int_equal(h.n, n);
    /* mean and sd come from exact sums */
    double mean = cal_stats_mean(ms, n), sd = cal_stats_sd(ms, n);
    assert_true(fabs(cal_hist_mean_ms(&h) - mean) <= 1e-9 * fabs(mean) + 1e-12);
    if (n > 1) assert_true(fabs(cal_hist_sd_ms(&h) - sd) <= 1e-6 * sd + 1e-9);
    cal_stats_sort(ms, n);
    static const double P[] = {0, 1, 5, 25, 50, 75, 90, 95, 99, 99.9, 100};
    for (size_t k = 0; k < sizeof P / sizeof P[0]; k++) {
        double raw = cal_stats_percentile_sorted(ms, n, P[k]);
        double got = cal_hist_percentile_ms(&h, P[k]);
        if (fabs(got - raw) > CAL_HIST_REL_ERROR * raw + 1e-12)
            fail_msg("p%g: histogram %.9f ms, raw %.9f ms (n %zu): beyond %.2f %%", P[k], got, raw,
                     n, CAL_HIST_REL_ERROR * 100);
    }
    free(ms);
}

static void test_percentiles_match_raw(void **state)
{
    (void)state;
    enum { N = 20000 };
    int64_t *v = malloc(N * sizeof *v);
    /* ITL-like (median 8 ms), TTFT-like with a heavy tail, tiny values in
     * the exact range, and a few samples (interpolation between far ranks) */
    for (int i = 0; i < N; i++) v[i] = lognorm(8e6, 0.6);
    check_against_raw(v, N);
    for (int i = 0; i < N; i++) v[i] = lognorm(150e6, 1.5);
    check_against_raw(v, N);
    for (int i = 0; i < N; i++) v[i] = (int64_t)(urand() * 400);
    check_against_raw(v, N);
    for (size_t n = 1; n <= 7; n++) {
        for (size_t i = 0; i < n; i++) v[i] = lognorm(3e6, 2.0);
        check_against_raw(v, n);
    }
    /* the percentile is a bucket midpoint: the bound is not vacuous */
    cal_hist h;
    cal_hist_init(&h);
    for (int i = 0; i < 10; i++) cal_hist_add(&h, 1000000 + 7000 * i);
    double raw = (1000000 + 7000 * 4.5) / 1e6;   /* p50 of the ten */
    assert_true(cal_hist_percentile_ms(&h, 50) != raw);
    assert_true(fabs(cal_hist_percentile_ms(&h, 50) - raw) <= CAL_HIST_REL_ERROR * raw);
    assert_true(isnan(cal_hist_percentile_ms(&(cal_hist){0}, 50)));
    free(v);
}

static void test_buckets(void **state)
{
    (void)state;
    /* every bucket: its lower bound maps to it, its width bounds the error */
    for (int b = 0; b < CAL_HIST_BUCKETS - 1; b++) {
        int64_t lo = cal_hist_bucket_lo(b), w = cal_hist_bucket_width(b);
        assert_int_equal(cal_hist_bucket(lo), b);
        assert_int_equal(cal_hist_bucket(lo + w - 1), b);
        assert_int_equal(cal_hist_bucket(lo + w), b + 1);
        assert_true((double)(w - 1) / 2 <= CAL_HIST_REL_ERROR * (double)lo + 0.5);
    }
    assert_int_equal(cal_hist_bucket(INT64_MAX), CAL_HIST_BUCKETS - 1);
    assert_int_equal(cal_hist_bucket(-5), 0);
    assert_true(sizeof(cal_hist) < 20 * 1024);
}

static void test_merge_and_codec(void **state)
{
    (void)state;
    static cal_hist a, b, u, back;
    cal_hist_init(&a);
    cal_hist_init(&b);
    cal_hist_init(&u);
    for (int i = 0; i < 5000; i++) {
        int64_t x = lognorm(5e6, 1.0);
        cal_hist_add(i % 3 ? &a : &b, x);
        cal_hist_add(&u, x);
    }
    cal_hist_merge(&a, &b);
    assert_memory_equal(a.counts, u.counts, sizeof u.counts);
    assert_int_equal(a.n, u.n);
    assert_int_equal(a.min_ns, u.min_ns);
    assert_int_equal(a.max_ns, u.max_ns);
    uint8_t *blob;
    size_t n;
    assert_int_equal(cal_hist_encode(&u, &blob, &n), CAL_OK);
    assert_true(n < 8 * 1024);                  /* "a few KB" serialised */
    char why[160];
    assert_int_equal(cal_hist_decode(blob, n, &back, why, sizeof why), CAL_OK);
    assert_memory_equal(&back, &u, sizeof u);
    /* damaged: a count that no longer adds up, a short blob, bad magic */
    blob[n - 1] ^= 0x40;
    assert_int_equal(cal_hist_decode(blob, n, &back, why, sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "histogram"));
    assert_int_equal(back.n, 0);
    assert_int_equal(cal_hist_decode(blob, 10, &back, why, sizeof why), CAL_EPROTO);
    blob[0] = 'X';
    assert_int_equal(cal_hist_decode(blob, n, &back, why, sizeof why), CAL_EPROTO);
    free(blob);
}

/* ---- the chunk budget ---------------------------------------------------- */

static void fake_result(cal_req_result *r, int64_t t0, int n_chunks, int64_t gap)
{
    cal_req_result_init(r);
    r->status = CAL_REQ_OK;
    r->sched_ns = r->send_ns = t0;
    r->chunk_ns = malloc((size_t)n_chunks * sizeof *r->chunk_ns);
    for (int k = 0; k < n_chunks; k++) r->chunk_ns[k] = t0 + 20000000 + k * gap + (k % 3) * 1000;
    r->n_chunks = n_chunks;
    r->first_token_ns = r->chunk_ns[0];
    r->last_token_ns = r->chunk_ns[n_chunks - 1];
    r->end_ns = r->last_token_ns + 100000;
    r->output_tokens = n_chunks;
    r->prompt_tokens = 32;
}

static void test_keep_budget(void **state)
{
    (void)state;
    long long lim;
    char why[160];
    assert_int_equal(cal_keep_parse("all", &lim, why, sizeof why), CAL_OK);
    assert_true(lim == CAL_KEEP_ALL);
    assert_int_equal(cal_keep_parse("none", &lim, why, sizeof why), CAL_OK);
    assert_true(lim == 0);
    assert_int_equal(cal_keep_parse("2k", &lim, why, sizeof why), CAL_OK);
    assert_true(lim == 2000);
    assert_int_equal(cal_keep_parse("-3", &lim, why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "\"-3\""));
    assert_int_equal(cal_keep_parse("lots", &lim, why, sizeof why), CAL_EINVAL);

    /* a budget of 25: the first two 10-chunk requests are kept whole, the
     * third would cross it and is dropped whole, the histograms see all */
    enum { N = 4 };
    cal_req_result r[N];
    cal_keep k;
    cal_keep_init(&k, 25);
    cal_cell_hists *ch = malloc(sizeof *ch);
    cal_keep_begin(&k, ch);
    for (int i = 0; i < N; i++) {
        fake_result(&r[i], 1000000000LL + i * 50000000LL, 10, 4000000 + i * 10000);
        cal_keep_fold(&k, &r[i]);
    }
    assert_non_null(r[0].chunk_ns);
    assert_non_null(r[1].chunk_ns);
    assert_null(r[2].chunk_ns);
    assert_null(r[3].chunk_ns);
    assert_int_equal(r[3].n_chunks, 10);
    assert_int_equal(ch->chunks_dropped, 2);
    assert_int_equal(ch->h[CAL_HIST_ITL].n, N * 9);
    assert_int_equal(ch->h[CAL_HIST_TTFT].n, N);
    assert_int_equal(ch->h[CAL_HIST_E2E].n, N);
    assert_int_equal(ch->h[CAL_HIST_TPOT].n, N);
    /* ITL from the histogram now, and close to what raw chunks gave */
    cal_summary s;
    cal_summary_compute(r, N, 0, 0, &s);
    double raw_from_two = s.median_itl_ms;   /* only the two kept requests */
    assert_string_equal(cal_keep_summary(ch, r, N, &s), "histogram");
    assert_true(fabs(s.median_itl_ms - 4.0) < 0.1);
    assert_true(isfinite(raw_from_two));
    /* with all kept the source is raw and the summary is untouched */
    cal_keep_begin(&k, ch);
    cal_req_result q;
    fake_result(&q, 5000000000LL, 5, 3000000);
    k.limit = CAL_KEEP_ALL;
    cal_keep_fold(&k, &q);
    cal_summary_compute(&q, 1, 0, 0, &s);
    double before = s.p99_itl_ms;
    assert_string_equal(cal_keep_summary(ch, &q, 1, &s), "raw");
    assert_true(s.p99_itl_ms == before);
    cal_req_result_free(&q);
    for (int i = 0; i < N; i++) cal_req_result_free(&r[i]);
    cal_keep_destroy(&k);
    free(ch);
}

/* ---- shards ---------------------------------------------------------------- */

static void test_shard_plan(void **state)
{
    (void)state;
    cal_run_plan p, s;
    cal_run_plan_default(&p);
    p.shots = 1;            /* one shot, no warm-up: not the calibrated default */
    p.warmup = 0;
    p.concurrency[0] = 7;
    p.concurrency[1] = 3;
    p.n_conc = 2;
    p.requests = 10;
    p.seed = 42;
    char why[200];
    int c0 = 0, c1 = 0;
    long rq = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cal_shard_plan(&p, i, 3, &s, why, sizeof why), CAL_OK);
        c0 += s.concurrency[0];
        c1 += s.concurrency[1];
        rq += s.requests;
        assert_true(s.seed != (i ? p.seed : 0));
    }
    assert_int_equal(c0, 7);
    assert_int_equal(c1, 3);
    assert_int_equal(rq, 10);
    assert_int_equal(cal_shard_plan(&p, 0, 4, &s, why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "concurrency: 3"));
    p.rate = 9;
    p.n_conc = 1;
    assert_int_equal(cal_shard_plan(&p, 1, 3, &s, why, sizeof why), CAL_OK);
    assert_true(fabs(s.rate - 3) < 1e-12);
}

/* A shard's run straight into its own store: one cell of n requests. */
static char *shard_doc(const char *path, int index, int count, int n, int keep_all, int64_t t0)
{
    cal_store *st;
    unlink(path);
    assert_int_equal(cal_store_open(path, &st), CAL_OK);
    cal_run run;
    memset(&run, 0, sizeof run);
    run.started_wall_ns = 1700000000000000000LL + index * 1000;
    assert_int_equal(cal_store_begin_run(st, &run), CAL_OK);
    cal_req_result *r = calloc((size_t)n, sizeof *r);
    cal_cell_hists *ch = malloc(sizeof *ch);
    cal_keep k;
    cal_keep_init(&k, keep_all ? CAL_KEEP_ALL : 0);
    cal_keep_begin(&k, ch);
    for (int i = 0; i < n; i++) {
        fake_result(&r[i], t0 + i * 7000000LL, 6 + (i + index) % 5, 2000000 + 350000 * ((i * 7 + index) % 11));
        cal_keep_fold(&k, &r[i]);
    }
    cal_cell c;
    memset(&c, 0, sizeof c);
    c.concurrency = 2;
    c.prompt_tokens = 32;
    c.max_tokens = 10;
    c.shot_index = 1;
    c.shot_kind = CAL_SHOT_WARM;
    c.process_age_ns = -1;
    c.start_ns = t0;
    c.end_ns = r[n - 1].end_ns;
    c.start_wall_ns = run.started_wall_ns;
    c.n_requests = n;
    /* shard 3's client was busy its whole cell: the fleet names it */
    c.cpu_ns = index == 2 ? c.end_ns - c.start_ns : 1000000;
    snprintf(c.content, sizeof c.content, "prose");
    cal_summary_compute(r, (size_t)n, 0, 0, &c.sum);
    const char *src = cal_keep_summary(ch, r, (size_t)n, &c.sum);
    assert_int_equal(cal_store_add_cell(st, run.id, &c, r, (size_t)n), CAL_OK);
    assert_int_equal(cal_store_add_cell_hists(st, c.id, ch, src), CAL_OK);
    assert_int_equal(cal_store_finish_run(st, run.id, CAL_RUN_OK, NULL), CAL_OK);
    /* shard 2's clock offset is known only to 5 ms, beyond any ITL here */
    cal_shard_info info = {.index = index, .count = count,
                           .offset_uncertainty_ns = index == 1 ? 5000000 : -1};
    char *doc;
    size_t len;
    assert_int_equal(cal_shard_write(st, run.id, &info, &doc, &len), CAL_OK);
    assert_int_equal(strlen(doc), len);
    for (int i = 0; i < n; i++) cal_req_result_free(&r[i]);
    free(r);
    free(ch);
    cal_keep_destroy(&k);
    cal_store_close(&st);
    unlink(path);
    return doc;
}

static void merge_case(int keep_all)
{
    char dir[] = "/tmp/caliper-test-hist-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[3][128], m[128];
    cal_shard_doc *ds[3];
    int n[3] = {9, 8, 8};
    char why[300];
    for (int i = 0; i < 3; i++) {
        snprintf(p[i], sizeof p[i], "%s/s%d.db", dir, i);
        /* each shard's clock starts elsewhere: the merge aligns them */
        char *doc = shard_doc(p[i], i, 3, n[i], keep_all, 5000000000LL + i * 123456789LL);
        assert_int_equal(cal_shard_read(doc, strlen(doc), p[i], &ds[i], why, sizeof why), CAL_OK);
        free(doc);
    }
    snprintf(m, sizeof m, "%s/m.db", dir);
    cal_store *st;
    assert_int_equal(cal_store_open(m, &st), CAL_OK);
    int64_t id = 0;
    cal_shard_doc *shuffled[3] = {ds[2], ds[0], ds[1]};
    assert_int_equal(cal_shard_merge(st, shuffled, 3, "merged", &id, why, sizeof why), CAL_OK);
    cal_run_data *d;
    assert_int_equal(cal_store_load_run(st, id, CAL_LOAD_CHUNKS, &d), CAL_OK);
    assert_int_equal(d->n_cells, 1);
    assert_int_equal(d->cells[0].n_requests, 25);
    assert_int_equal(d->cells[0].concurrency, 6);
    assert_int_equal(d->cells[0].sum.completed, 25);
    /* the union of the shards' raw records, summarised directly */
    cal_req_result uni[25];
    size_t k = 0;
    for (int i = 0; i < 3; i++)
        for (size_t q = 0; q < ds[i]->data->n_reqs; q++) uni[k++] = ds[i]->data->reqs[q];
    cal_summary s;
    cal_summary_compute(uni, 25, 0, 0, &s);
    const cal_summary *g = &d->cells[0].sum;
    assert_true(g->median_ttft_ms == s.median_ttft_ms);
    assert_true(g->p99_ttft_ms == s.p99_ttft_ms);
    assert_true(g->median_e2el_ms == s.median_e2el_ms);
    assert_true(g->p99_tpot_ms == s.p99_tpot_ms);
    assert_int_equal(g->total_output_tokens, s.total_output_tokens);
    char src[16];
    cal_cell_hists *ch = malloc(sizeof *ch);
    assert_int_equal(cal_store_load_cell_hists(st, d->cells[0].id, ch, src, sizeof src), CAL_OK);
    assert_int_equal(ch->h[CAL_HIST_TTFT].n, 25);
    if (keep_all) {
        assert_string_equal(src, "raw");
        assert_true(g->median_itl_ms == s.median_itl_ms);
        assert_true(g->p99_itl_ms == s.p99_itl_ms);
    } else {
        assert_string_equal(src, "histogram");
        assert_true(isnan(s.median_itl_ms));         /* no raw chunks anywhere */
        assert_true(g->median_itl_ms == cal_hist_percentile_ms(&ch->h[CAL_HIST_ITL], 50));
        assert_true(isfinite(g->median_itl_ms));
    }
    assert_non_null(strstr(d->run.protocol_json, "\"fleet\""));
    /* the verdicts name the saturated shard and the uncertain one, only them */
    assert_non_null(d->run.verdicts_json);
    assert_non_null(strstr(d->run.verdicts_json, "shard 3/3 ("));
    assert_non_null(strstr(d->run.verdicts_json, "client self-check"));
    assert_non_null(strstr(d->run.verdicts_json, "rank 1 ("));
    assert_non_null(strstr(d->run.verdicts_json, "beyond the ITL resolution"));
    assert_null(strstr(d->run.verdicts_json, "shard 1/3 ("));
    free(ch);
    cal_run_data_free(&d);
    /* a shard twice, or one missing, is refused */
    cal_shard_doc *bad[3] = {ds[0], ds[0], ds[1]};
    assert_int_equal(cal_shard_merge(st, bad, 3, NULL, &id, why, sizeof why), CAL_EMISMATCH);
    assert_non_null(strstr(why, "shard"));
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_EMISMATCH);
    cal_store_close(&st);
    for (int i = 0; i < 3; i++) cal_shard_free(&ds[i]);
    unlink(m);
    rmdir(dir);
}

/* What makes two shards one run beyond their target and protocol: one
 * build, one base seed, no cell fuller than its plan, clocks that can be
 * one run's. Each refusal names the field and both values. */
static void test_merge_refuses_another_run(void **state)
{
    (void)state;
    char dir[] = "/tmp/caliper-test-merge-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[2][128], m[128], why[400];
    cal_shard_doc *ds[2];
    for (int i = 0; i < 2; i++) {
        snprintf(p[i], sizeof p[i], "%s/s%d.db", dir, i);
        char *doc = shard_doc(p[i], i, 2, 8, 1, 5000000000LL + i * 123456789LL);
        assert_int_equal(cal_shard_read(doc, strlen(doc), p[i], &ds[i], why, sizeof why), CAL_OK);
        free(doc);
    }
    snprintf(m, sizeof m, "%s/m.db", dir);
    cal_store *st;
    assert_int_equal(cal_store_open(m, &st), CAL_OK);
    int64_t id = 0;
    /* another build */
    ds[0]->data->run.build = strdup("caliper 0.1.0 (commit aaa)");
    ds[1]->data->run.build = strdup("caliper 0.1.0 (commit bbb)");
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_EMISMATCH);
    assert_non_null(strstr(why, "run.build is \"caliper 0.1.0 (commit aaa)\" in shard 1, "
                                "\"caliper 0.1.0 (commit bbb)\" in shard 2"));
    free(ds[1]->data->run.build);
    ds[1]->data->run.build = strdup(ds[0]->data->run.build);
    /* another base seed: each shard's own seed is the base + index × 1000003 */
    ds[0]->data->proto.has_seed = ds[1]->data->proto.has_seed = 1;
    ds[0]->data->proto.seed = 7;
    ds[1]->data->proto.seed = 8 + 1000003;
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_EMISMATCH);
    assert_non_null(strstr(why, "base seed (protocol.seed less the shard's offset) is 7 in shard 1, "
                                "8 in shard 2"));
    ds[1]->data->proto.seed = 7 + 1000003;   /* the same base: each shard's seed may differ */
    /* a cell fuller than its plan: 2 requests planned, 8 carried */
    ds[0]->data->proto.requests = ds[1]->data->proto.requests = 2;
    ds[0]->data->proto.duration_s = ds[1]->data->proto.duration_s = 0;
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "shard 1, cell 1 holds 8 requests where its protocol plans at most 2"));
    ds[0]->data->proto.requests = ds[1]->data->proto.requests = 8;
    /* clocks: the reference's offset is 0; an offset finer than its clock,
     * hours from the wall clocks, or putting the shards' common start 1000 s
     * apart (1e12 ns, 100 ns uncertain: stored "ok" at 0.016 tok/s before) */
    ds[0]->info.offset_ns = 0;
    ds[0]->info.offset_uncertainty_ns = 0;
    ds[1]->info.offset_ns = 1000000000000LL;
    ds[1]->info.offset_uncertainty_ns = 100;
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_ERANGE);
    assert_non_null(strstr(why, "shard 2's shard.offset_ns 1000000000000 (uncertainty 100 ns) puts "
                                "its first cell 999.9 s before shard 1's on the merged clock, "
                                "beyond the 60 s one start allows"));
    ds[1]->info.offset_ns = 20000000000000LL;      /* 5.6 h */
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_ERANGE);
    assert_non_null(strstr(why, "shard 2's shard.offset_ns is 20000000000000 ns where the hosts' wall "
                                "clocks put it at"));
    ds[1]->info.offset_ns = 0;
    ds[1]->info.offset_uncertainty_ns = 0;
    ds[1]->info.clock_resolution_ns = 1;
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_ERANGE);
    assert_non_null(strstr(why, "uncertain by 0 ns, below the 1 ns resolution of the clock that "
                                "measured it"));
    ds[0]->info.offset_ns = 5;
    ds[1]->info.offset_uncertainty_ns = 100;
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_ERANGE);
    assert_non_null(strstr(why, "shard 1 is the reference clock: its shard.offset_ns is 5"));
    ds[0]->info.offset_ns = 0;
    /* one run at last: the same host, offset 0 ± 100 ns */
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_OK);
    /* shards that say they started together (--start-at) but whose wall
     * clocks put them 1000 s apart */
    ds[0]->info.offset_uncertainty_ns = ds[1]->info.offset_uncertainty_ns = -1;
    ds[0]->info.common_start = ds[1]->info.common_start = 1;
    ds[1]->data->run.started_wall_ns -= 1000000000000LL;
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_ERANGE);
    assert_non_null(strstr(why, "started together at one instant, but their wall clocks put shard 2's "
                                "first cell"));
    ds[1]->info.common_start = 0;            /* no common start claimed: nothing to hold them to */
    assert_int_equal(cal_shard_merge(st, ds, 2, NULL, &id, why, sizeof why), CAL_OK);
    cal_store_close(&st);
    for (int i = 0; i < 2; i++) cal_shard_free(&ds[i]);
    unlink(m);
    unlink(p[0]);
    unlink(p[1]);
    rmdir(dir);
}

/* The shard's plan bounds each cell: --requests, else max(8, 2 × concurrency)
 * closed, 4 s of a Poisson rate, a turn's sessions, else the cell cap. */
static void test_planned_requests(void **state)
{
    (void)state;
    cal_protocol pr;
    cal_protocol_init(&pr);
    cal_cell c;
    memset(&c, 0, sizeof c);
    c.concurrency = 3;
    assert_int_equal(cal_shard_planned_requests(&pr, &c), CAL_RUN_MAX_CELL_REQUESTS);  /* unknown */
    pr.duration_s = 0;
    pr.requests = 0;
    assert_int_equal(cal_shard_planned_requests(&pr, &c), 8);
    c.concurrency = 40;
    assert_int_equal(cal_shard_planned_requests(&pr, &c), 80);
    pr.requests = 2;
    assert_int_equal(cal_shard_planned_requests(&pr, &c), 2);
    pr.requests = 0;
    c.rate = 10;
    assert_int_equal(cal_shard_planned_requests(&pr, &c), 40);
    pr.duration_s = 30;
    assert_int_equal(cal_shard_planned_requests(&pr, &c), CAL_RUN_MAX_CELL_REQUESTS);
    pr.scenario_json = strdup("{\"scenario\":\"chat\",\"users\":4}");
    assert_int_equal(cal_shard_planned_requests(&pr, &c), 4);
    cal_protocol_clear(&pr);
}

static void test_merge_equals_union(void **state)
{
    (void)state;
    merge_case(1);
    merge_case(0);
}

/* Pooled shots whose chunk times were not kept: the pooled ITL is read off
 * the cells' stored histograms merged with the chunk gaps of a cell that
 * kept them, exactly what recomputing from those histograms gives. */
static void test_pool_itl_from_hists(void **state)
{
    (void)state;
    cal_cell cells[3];
    memset(cells, 0, sizeof cells);
    cal_req_result reqs[3];
    int64_t chunks[4] = {1000000, 3000000, 4000000, 9000000};   /* gaps 2, 1, 5 ms */
    for (int i = 0; i < 3; i++) {
        cal_req_result_init(&reqs[i]);
        reqs[i].status = CAL_REQ_OK;
        reqs[i].send_ns = 1;
        reqs[i].first_token_ns = 1000000;
        reqs[i].last_token_ns = reqs[i].end_ns = 9000000;
        reqs[i].output_tokens = 4;
        reqs[i].n_chunks = 4;
        cells[i].n_requests = 1;
        cells[i].req_first = (size_t)i;
        cells[i].shot_index = i + 1;
    }
    reqs[2].chunk_ns = chunks;              /* only the third cell kept its chunk times */
    cal_hist *h[3] = {malloc(sizeof(cal_hist)), malloc(sizeof(cal_hist)), NULL};
    cal_hist want;
    cal_hist_init(&want);
    for (int c = 0; c < 2; c++) {
        cal_hist_init(h[c]);
        for (int k = 0; k < 50; k++) cal_hist_add(h[c], (int64_t)(c + 1) * 1000000 + k * 20000);
        cal_hist_merge(&want, h[c]);
    }
    cal_hist_add(&want, 2000000);
    cal_hist_add(&want, 1000000);
    cal_hist_add(&want, 5000000);
    cal_run_data d = {.cells = cells, .n_cells = 3, .reqs = reqs, .n_reqs = 3, .itl_hist = h};
    size_t idx[3] = {0, 1, 2};
    cal_summary s;
    assert_int_equal(cal_analysis_pool(&d, idx, 3, &s), CAL_OK);
    assert_true(s.median_itl_ms == cal_hist_percentile_ms(&want, 50));
    assert_true(s.p99_itl_ms == cal_hist_percentile_ms(&want, 99));
    assert_true(fabs(s.mean_itl_ms - cal_hist_mean_ms(&want)) < 1e-9);
    /* without the histograms the pool has only the one cell's three gaps */
    d.itl_hist = NULL;
    assert_int_equal(cal_analysis_pool(&d, idx, 3, &s), CAL_OK);
    assert_true(fabs(s.median_itl_ms - 2.0) < 1e-9);
    free(h[0]);
    free(h[1]);
}

static void test_shard_read_rejects(void **state)
{
    (void)state;
    cal_shard_doc *d = NULL;
    char why[300];
    static const char *const BAD[] = {
        "", "[]", "{\"format\":\"caliper-run\"}",
        "{\"format\":\"caliper-shard\",\"format_version\":1}",
        ("{\"format\":\"caliper-shard\",\"format_version\":1,\"shard\":{\"index\":3,\"count\":2},"
         "\"run\":{},\"cells\":[]}"),
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        assert_int_equal(cal_shard_read(BAD[i], strlen(BAD[i]), "x.json", &d, why, sizeof why), CAL_EPROTO);
        assert_null(d);
        assert_non_null(strstr(why, "x.json"));
    }
    /* a hostile document's clock fields: an offset of 1e300 is no integer
     * (it was read as "not measured"), 2^63 none in range, a resolution of
     * 0 or a common start that is not a boolean no fact */
    static const struct { const char *shard, *field; } CLK[] = {
        {"\"offset_ns\":1e300,\"offset_uncertainty_ns\":100", "offset_ns"},
        {"\"offset_ns\":9223372036854775807,\"offset_uncertainty_ns\":100", "offset_ns"},
        {"\"offset_ns\":0,\"offset_uncertainty_ns\":-1", "offset_uncertainty_ns"},
        {"\"offset_ns\":0,\"offset_uncertainty_ns\":1e300", "offset_uncertainty_ns"},
        {"\"clock_resolution_ns\":0", "clock_resolution_ns"},
        {"\"common_start\":\"yes\"", "common_start"},
    };
    for (size_t i = 0; i < sizeof CLK / sizeof CLK[0]; i++) {
        char doc[600];
        snprintf(doc, sizeof doc, "{\"format\":\"caliper-shard\",\"format_version\":1,\"shard\":"
                 "{\"index\":0,\"count\":1,%s},\"run\":{\"started_wall_ns\":1,\"t0_mono_ns\":1},"
                 "\"cells\":[]}", CLK[i].shard);
        assert_int_equal(cal_shard_read(doc, strlen(doc), "x.json", &d, why, sizeof why), CAL_EPROTO);
        assert_null(d);
        if (!strstr(why, CLK[i].field)) fail_msg("%s: %s", CLK[i].shard, why);
    }
    /* a cell whose requests claim 2^63 chunks, or a cached count past its
     * prompt */
    static const char *const REQ[] = {
        "[\"ok\",200,null,1,1,2,3,4,0,5,4,\"usage\",0,null,null,-1,null,3]",   /* sound: read */
        "[\"ok\",200,null,1,1,2,3,4,0,5,4,\"usage\",9223372036854775807,null,null,-1,null]",
        "[\"ok\",200,null,1,1,2,3,4,0,5,4,\"usage\",0,null,null,-1,null,6]",
        "[\"ok\",200,null,1,1,2,3,4,0,5,4,\"usage\",0,null,null,-1,null,-2]",
    };
    /* valid (empty) histograms, so the requests are what is read and refused */
    cal_hist *eh = malloc(sizeof *eh);
    cal_hist_init(eh);
    uint8_t *blob = NULL;
    size_t nb = 0;
    assert_int_equal(cal_hist_encode(eh, &blob, &nb), CAL_OK);
    char hx[512] = "";
    for (size_t i = 0; i < nb && 2 * i + 2 < sizeof hx; i++) snprintf(hx + 2 * i, 3, "%02x", blob[i]);
    free(blob);
    free(eh);
    char hs[2400];
    snprintf(hs, sizeof hs, "{\"ttft\":\"%s\",\"itl\":\"%s\",\"tpot\":\"%s\",\"e2el\":\"%s\"}", hx, hx, hx, hx);
    for (size_t i = 0; i < sizeof REQ / sizeof REQ[0]; i++) {
        char doc[4000];
        snprintf(doc, sizeof doc, "{\"format\":\"caliper-shard\",\"format_version\":1,\"shard\":"
                 "{\"index\":0,\"count\":1},\"run\":{\"started_wall_ns\":1,\"t0_mono_ns\":1},"
                 "\"cells\":[{\"seq\":0,\"kind\":\"shots\",\"target\":\"\",\"concurrency\":1,"
                 "\"rate\":0,\"prompt_tokens\":5,\"prompt_exact\":1,\"content\":\"prose\","
                 "\"unique_prompts\":1,\"max_tokens\":4,\"output_fixed\":1,\"shot_index\":1,"
                 "\"shot_kind\":\"warm\",\"rest_before_ns\":0,\"process_age_ns\":-1,\"start_ns\":1,"
                 "\"end_ns\":5,\"start_wall_ns\":1,\"cpu_ns\":0,\"chunks\":0,\"folded\":0,"
                 "\"itl_source\":\"raw\",\"hists\":%s,\"chunks_dropped\":0,\"requests\":[%s]}]}",
                 hs, REQ[i]);
        int rc = cal_shard_read(doc, strlen(doc), "x.json", &d, why, sizeof why);
        if (i == 0) {
            if (rc) fail_msg("a sound request refused: %s", why);
            assert_int_equal(d->data->reqs[0].cached_tokens, 3);
            cal_shard_free(&d);
            continue;
        }
        assert_int_equal(rc, CAL_EPROTO);
        assert_null(d);
        if (!strstr(why, "request 0")) fail_msg("%s: %s", REQ[i], why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentiles_match_raw), cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_merge_and_codec),       cmocka_unit_test(test_keep_budget),
        cmocka_unit_test(test_shard_plan),            cmocka_unit_test(test_merge_equals_union),
        cmocka_unit_test(test_shard_read_rejects),    cmocka_unit_test(test_pool_itl_from_hists),
        cmocka_unit_test(test_merge_refuses_another_run), cmocka_unit_test(test_planned_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
