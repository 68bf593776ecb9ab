/* caliper watch — the operating point from a server's /metrics (SPEC 1.2:
 * the distribution of requests running over time, not the configured
 * ceiling) and, with --pid, the memory slope of processes with the minimum
 * watch time at the reading resolution (SPEC 1.4 leak watch). */
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <curl/curl.h>
#include <jansson.h>
#include "caliper/buf.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/platform.h"
#include "caliper/prom.h"
#include "caliper/telemetry.h"
#include "caliper/watch.h"
#include "cli.h"

#define CMD "watch"
#define MAX_PIDS 16
#define MAX_READINGS (1u << 20)        /* per series: 12 days at 1 s */
#define SCRAPE_BODY_MAX (16u << 20)    /* one /metrics reply */

static volatile int g_stop;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper watch URL [--interval 1s] [--duration 60s] [--metric NAME]\n"
        "                     [--ceiling N] [--pid P ...] [--resolution BYTES] [--json FILE]\n"
        "\n"
        "Scrapes URL/metrics (Prometheus text) every interval and reports the operating\n"
        "point: how many requests were running, weighted by time (p50/p90/p99, the share\n"
        "of time at 0, 1, 2-4, 5-8, 9+), the requests waiting, and the narrowest range\n"
        "of concurrency that held 90 %% of the busy time: the cell to benchmark.\n"
        "The running gauge is found by name: vllm:num_requests_running,\n"
        "sglang:num_running_reqs, llamacpp:requests_processing, tgi_batch_current_size,\n"
        "caliper:num_requests_running (summed over label sets).\n"
        "\n"
        "  URL               the server (\"/metrics\" is appended unless the URL ends with it)\n"
        "  --interval T      time between scrapes, 10ms..1h (default 1s; a bare number is s)\n"
        "  --duration T      stop after T (default: until Ctrl-C, which prints the summary)\n"
        "  --metric NAME     the running-requests gauge to use instead of the known names\n"
        "  --ceiling N       the configured ceiling (e.g. vLLM --max-num-seqs), for the verdict\n"
        "  --pid P           also sample the RSS of process P (repeatable, up to 16) and fit\n"
        "                    its memory slope with a 95 %% CI\n"
        "  --resolution B    the memory reading resolution (e.g. 1MB); default: the larger\n"
        "                    of 1 kB and the readings' scatter around the line\n"
        "  --json FILE       also write the summary and the timeline as JSON (\"-\" = stdout)\n"
        "  -h, --help        this text\n"
        "\n"
        "Exit: 0 (also after Ctrl-C), 1 when the server cannot be scraped or has no\n"
        "running gauge, 2 on a usage error.\n");
}

/* ---- scraping ----------------------------------------------------------- */

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    return cal_buf_append(ud, p, sz * nm) == CAL_OK ? sz * nm : 0;
}

/* GET url into body; CAL_OK or an error with why[]. */
static int scrape(CURL *h, const char *url, cal_buf *body, char *why, size_t n)
{
    cal_buf_reset(body);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        snprintf(why, n, "%s%s", curl_easy_strerror(cc),
                 cc == CURLE_WRITE_ERROR ? " (reply over 16 MiB)" : "");
        return cc == CURLE_COULDNT_CONNECT ? CAL_ECONNECT : CAL_EIO;
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) { snprintf(why, n, "HTTP status %ld", status); return CAL_EHTTP; }
    return CAL_OK;
}

/* ---- readings ----------------------------------------------------------- */

typedef struct series {
    double *t_s, *a, *b;     /* [n]: time since start; two values per reading */
    size_t  n, cap;
} series;

static int series_add(series *s, double t, double a, double b)
{
    if (s->n == s->cap) {
        if (s->cap >= MAX_READINGS) return CAL_ETOOBIG;
        size_t nc = s->cap ? s->cap * 2 : 256;
        double *x = realloc(s->t_s, nc * sizeof *x);
        if (!x) return CAL_ENOMEM;
        s->t_s = x;
        double *y = realloc(s->a, nc * sizeof *y);
        if (!y) return CAL_ENOMEM;
        s->a = y;
        double *z = realloc(s->b, nc * sizeof *z);
        if (!z) return CAL_ENOMEM;
        s->b = z;
        s->cap = nc;
    }
    s->t_s[s->n] = t;
    s->a[s->n] = a;
    s->b[s->n] = b;
    s->n++;
    return CAL_OK;
}

static void series_free(series *s) { free(s->t_s); free(s->a); free(s->b); memset(s, 0, sizeof *s); }

typedef struct proc {
    long     pid;
    cal_tel *tel;
    series   rss;           /* a = rss bytes */
    int      gone;          /* the process ended while watched */
} proc;

static int read_rss(proc *p, double *rss)
{
    if (cal_tel_tick(p->tel) < 0) return CAL_EIO;
    cal_tel_sample s[8];
    size_t n = cal_tel_latest(p->tel, s, 8);
    for (size_t k = 0; k < n; k++)
        if (!strcmp(s[k].metric, "rss_bytes")) { *rss = s[k].value; return CAL_OK; }
    return CAL_ENOTFOUND;
}

/* ---- output ------------------------------------------------------------- */

static void print_summary(FILE *f, const char *url, const cal_prom_load *ld, const cal_op_summary *s,
                          const cal_oppoint *op, size_t scrapes, size_t failed, size_t rejected,
                          size_t wait_rejected, double interval_s, const char *verdict)
{
    char iv[32], tot[32];
    cal_unit_format(CAL_U_TIME, interval_s, 3, iv, sizeof iv);
    cal_unit_format(CAL_U_TIME, s->total_s, 3, tot, sizeof tot);
    fprintf(f, "caliper watch: %s\n", url);
    fprintf(f, "  gauge      %s (%zu label set%s summed), %zu scrapes every %s over %s",
            ld->running_name, ld->running_series, ld->running_series == 1 ? "" : "s",
            scrapes, iv, tot);
    if (failed) fprintf(f, ", %zu failed (their time held the previous reading)", failed);
    if (rejected)
        fprintf(f, ", %zu rejected: the gauge was NaN, negative, out of its range or above the %d the "
                "histogram holds (their time held the previous reading)", rejected,
                CAL_OP_MAX_RUNNING);
    fprintf(f, "\n");
    fprintf(f, "  running    mean %.2f  p50 %d  p90 %d  p99 %d  max %g   (time-weighted)\n",
            s->mean, s->p50, s->p90, s->p99, s->running_max);
    /* a gauge that is not a whole count (a recording rule's average): its
     * readings are kept as read, never rounded into a count it did not say */
    if (s->fractional)
        fprintf(f, "  readings   %zu of %zu were not whole numbers (first %g): kept as read; the "
                "histogram splits each between its two neighbouring counts\n",
                s->fractional, op->n, s->first_fraction);
    fprintf(f, "  share      ");
    for (int b = 0; b < 5; b++)
        fprintf(f, "%s: %.0f %%%s", cal_op_share_names[b], 100 * s->share[b], b < 4 ? "   " : "\n");
    /* the histogram itself, one row per count seen (at most 24 rows) */
    int rows = 0;
    for (int c = 0; c <= CAL_OP_MAX_RUNNING && rows < 24; c++) {
        double w = op->w_s[c];
        if (w <= 0) continue;
        int bar = (int)lround(40 * w / s->total_s);
        fprintf(f, "  %5d%s  %5.1f %%  %.*s\n", c, c == CAL_OP_MAX_RUNNING ? "+" : " ",
                100 * w / s->total_s, bar, "########################################");
        rows++;
    }
    if (s->has_waiting) {
        fprintf(f, "  waiting    %s: mean %.2f  max %g  >= 1 waiting %.0f %% of the time",
                ld->waiting_name, s->waiting_mean, s->waiting_max, 100 * s->waiting_share);
        if (wait_rejected)
            fprintf(f, " (%zu reading%s rejected: NaN, negative or out of its range; unknown there)",
                    wait_rejected, wait_rejected == 1 ? "" : "s");
        fprintf(f, "\n");
    } else if (wait_rejected) {
        /* exposed, but no reading was a count: never "not exposed" */
        fprintf(f, "  waiting    %s: every reading rejected (%zu: NaN, negative or out of its "
                "range): unknown\n", ld->waiting_name[0] ? ld->waiting_name : "the waiting gauge",
                wait_rejected);
    } else {
        fprintf(f, "  waiting    not exposed by this server\n");
    }
    fprintf(f, "  verdict    %s\n", verdict);
}

static json_t *summary_json(const char *url, const cal_prom_load *ld, const cal_op_summary *s,
                            const cal_oppoint *op, size_t scrapes, size_t failed, size_t rejected,
                            size_t wait_rejected, double interval_s, double ceiling, const char *verdict, const series *tl, proc *pr,
                            size_t npr, const cal_leak *lk, const int *lk_ok)
{
    json_t *o = json_object();
    json_object_set_new(o, "url", json_string(url));
    json_object_set_new(o, "gauge", json_string(ld->running_name));
    json_object_set_new(o, "label_sets", json_integer((json_int_t)ld->running_series));
    json_object_set_new(o, "interval_s", json_real(interval_s));
    json_object_set_new(o, "watched_s", json_real(s->total_s));
    json_object_set_new(o, "scrapes", json_integer((json_int_t)scrapes));
    json_object_set_new(o, "failed_scrapes", json_integer((json_int_t)failed));
    json_object_set_new(o, "rejected_readings", json_integer((json_int_t)rejected));
    json_t *r = json_object();
    json_object_set_new(r, "mean", json_real(s->mean));
    json_object_set_new(r, "p50", json_integer(s->p50));
    json_object_set_new(r, "p90", json_integer(s->p90));
    json_object_set_new(r, "p99", json_integer(s->p99));
    json_object_set_new(r, "max", s->running_max == floor(s->running_max)
                                       ? json_integer((json_int_t)s->running_max)
                                       : json_real(s->running_max));
    json_object_set_new(r, "fractional_readings", json_integer((json_int_t)s->fractional));
    json_object_set_new(r, "busy_s", json_real(s->busy_s));
    json_object_set_new(r, "percentile_method", json_string("time-weighted inverse CDF"));
    json_t *sh = json_object();
    for (int b = 0; b < 5; b++) json_object_set_new(sh, cal_op_share_names[b], json_real(s->share[b]));
    json_object_set_new(r, "share", sh);
    json_t *hist = json_array();
    for (int c = 0; c <= CAL_OP_MAX_RUNNING; c++)
        if (op->w_s[c] > 0) {
            json_t *h = json_object();
            json_object_set_new(h, "running", json_integer(c));
            json_object_set_new(h, "seconds", json_real(op->w_s[c]));
            json_array_append_new(hist, h);
        }
    json_object_set_new(r, "histogram", hist);
    json_object_set_new(r, "band_lo", json_integer(s->band_lo));
    json_object_set_new(r, "band_hi", json_integer(s->band_hi));
    json_object_set_new(r, "band_share_of_busy", json_real(s->band_share));
    json_object_set_new(o, "running", r);
    if (s->has_waiting) {
        json_t *w = json_object();
        json_object_set_new(w, "gauge", json_string(ld->waiting_name));
        json_object_set_new(w, "mean", json_real(s->waiting_mean));
        json_object_set_new(w, "max", json_real(s->waiting_max));
        json_object_set_new(w, "share_waiting", json_real(s->waiting_share));
        json_object_set_new(w, "rejected_readings", json_integer((json_int_t)wait_rejected));
        json_object_set_new(o, "waiting", w);
    } else if (wait_rejected) {
        json_t *w = json_object();
        json_object_set_new(w, "gauge", json_string(ld->waiting_name));
        json_object_set_new(w, "rejected_readings", json_integer((json_int_t)wait_rejected));
        json_object_set_new(o, "waiting", w);
    }
    json_object_set_new(o, "ceiling", ceiling > 0 ? json_real(ceiling) : json_null());
    json_object_set_new(o, "verdict", json_string(verdict));
    json_t *t = json_array();
    for (size_t k = 0; k < tl->n; k++)
        json_array_append_new(t, json_pack("[f,f,f]", tl->t_s[k], tl->a[k],
                                           isnan(tl->b[k]) ? -1.0 : tl->b[k]));
    json_object_set_new(o, "timeline", t);   /* [t_s, running, waiting (-1: absent)] */
    json_t *pa = json_array();
    for (size_t i = 0; i < npr; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "pid", json_integer(pr[i].pid));
        json_object_set_new(p, "readings", json_integer((json_int_t)pr[i].rss.n));
        if (lk_ok[i]) {
            char txt[256];
            json_object_set_new(p, "slope_bytes_per_s", json_real(lk[i].slope_bps));
            json_object_set_new(p, "ci_half_bytes_per_s",
                                isfinite(lk[i].half_bps) ? json_real(lk[i].half_bps) : json_null());
            json_object_set_new(p, "resolution_bytes", json_real(lk[i].resolution_b));
            json_object_set_new(p, "min_watch_s",
                                isfinite(lk[i].min_watch_s) ? json_real(lk[i].min_watch_s) : json_null());
            json_object_set_new(p, "watched_s", json_real(lk[i].watched_s));
            json_object_set_new(p, "flat", json_boolean(lk[i].flat));
            json_object_set_new(p, "verdict", json_string(cal_leak_text(&lk[i], txt, sizeof txt)));
        }
        json_t *rs = json_array();
        for (size_t k = 0; k < pr[i].rss.n; k++)
            json_array_append_new(rs, json_pack("[f,f]", pr[i].rss.t_s[k], pr[i].rss.a[k]));
        json_object_set_new(p, "rss", rs);
        json_array_append_new(pa, p);
    }
    json_object_set_new(o, "processes", pa);
    return o;
}

/* ---- the command -------------------------------------------------------- */

int cmd_watch(int argc, char **argv)
{
    setlocale(LC_NUMERIC, "C");
    static const struct option opts[] = {
        {"interval", required_argument, 0, 'i'}, {"duration", required_argument, 0, 'd'},
        {"metric", required_argument, 0, 'm'},   {"pid", required_argument, 0, 'p'},
        {"json", required_argument, 0, 'j'},     {"ceiling", required_argument, 0, 'c'},
        {"resolution", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    double interval_s = 1, duration_s = 0, resolution_b = 0, ceiling = NAN;
    const char *metric = NULL, *jsonf = NULL;
    long pids[MAX_PIDS];
    size_t npids = 0;
    int c, rc;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'i':
            if ((rc = cli_parse_time_in(CMD, "--interval", optarg, "s", 0.010, 3600, &interval_s)))
                return rc;
            break;
        case 'd':
            if ((rc = cli_parse_time_in(CMD, "--duration", optarg, "s", 0, 0, &duration_s))) return rc;
            break;
        case 'm':
            if (!*optarg || strlen(optarg) >= CAL_PROM_NAME_MAX)
                return cli_usage_error(CMD, "--metric: \"%s\" is not a metric name", optarg);
            metric = optarg;
            break;
        case 'p': {
            long pid;
            if ((rc = cli_parse_long(CMD, "--pid", optarg, 1, 4194304, &pid))) return rc;
            if (npids == MAX_PIDS)
                return cli_usage_error(CMD, "--pid: \"%s\" is one more than the %d allowed", optarg, MAX_PIDS);
            if (!cal_plat_pid_exists(NULL, pid))
                return cli_usage_error(CMD, "--pid: \"%s\" is not a running process", optarg);
            pids[npids++] = pid;
            break;
        }
        case 'j': jsonf = optarg; break;
        case 'c': {
            long v;
            if ((rc = cli_parse_long(CMD, "--ceiling", optarg, 1, 1000000, &v))) return rc;
            ceiling = (double)v;
            break;
        }
        case 'r':
            if ((rc = cli_parse_unit(CMD, "--resolution", optarg, CAL_U_BYTES, "B", &resolution_b))) return rc;
            if (resolution_b <= 0)
                return cli_usage_error(CMD, "--resolution: \"%s\" is not a positive size", optarg);
            break;
        case 'h': usage(stdout); return CLI_OK;
        default:
            if (optopt && optopt != '?' && optopt != 'h')
                return cli_usage_error(CMD, "-%c: unknown option or missing value", optopt);
            return cli_usage_error(CMD, "%s: unknown option or missing value", argv[optind - 1]);
        }
    }
    if (optind >= argc) return cli_usage_error(CMD, "URL: missing (e.g. http://127.0.0.1:8000)");
    if (optind + 1 < argc) return cli_usage_error(CMD, "\"%s\": only one URL", argv[optind + 1]);
    const char *base = argv[optind];
    if (strncmp(base, "http://", 7) && strncmp(base, "https://", 8))
        return cli_usage_error(CMD, "URL: \"%s\" is not an http:// or https:// URL", base);
    char url[2048];
    size_t bl = strlen(base);
    if (bl >= sizeof url - 16) return cli_usage_error(CMD, "URL: \"%.40s...\" is too long", base);
    if (bl >= 8 && !strcmp(base + bl - 8, "/metrics")) snprintf(url, sizeof url, "%s", base);
    else snprintf(url, sizeof url, "%.*s/metrics", (int)(base[bl - 1] == '/' ? bl - 1 : bl), base);

    FILE *jf = NULL;
    if (jsonf && strcmp(jsonf, "-") && !(jf = fopen(jsonf, "w")))
        return cli_fail(CMD, "--json: \"%s\": %s", jsonf, strerror(errno));

    proc pr[MAX_PIDS];
    memset(pr, 0, sizeof pr);
    for (size_t i = 0; i < npids; i++) {
        pr[i].pid = pids[i];
        cal_tel_config cfg = {.pid = (int)pids[i], .only = "process", .ring_cap = 64};
        if ((rc = cal_tel_open(&pr[i].tel, &cfg)) != CAL_OK) {
            for (size_t k = 0; k < i; k++) cal_tel_close(&pr[k].tel);
            if (jf) fclose(jf);
            return cli_fail(CMD, "--pid %ld: %s", pids[i], cal_strerror(rc));
        }
    }

    cal_global_init();
    CURL *h = curl_easy_init();
    cal_buf body = CAL_BUF_INIT(SCRAPE_BODY_MAX);
    cal_oppoint op;
    series tl = {0};
    int exit_code = CLI_OK;
    if (!h || cal_op_init(&op) != CAL_OK) { exit_code = cli_fail(CMD, "out of memory"); goto out; }
    long tmo = (long)(interval_s * 1000) < 2000 ? 2000 : (long)(interval_s * 1000);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, tmo);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, tmo);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "caliper-watch");

    cli_catch_stop(&g_stop);

    cal_prom_load ld = {0}, first = {0};
    size_t scrapes = 0, failed = 0, rejected = 0, wait_rejected = 0;
    char wait_name[CAL_PROM_NAME_MAX] = "";
    char why[512];
    int64_t start = cal_now_ns(), step = (int64_t)llround(interval_s * 1e9);
    int64_t end = duration_s > 0 ? start + (int64_t)llround(duration_s * 1e9) : INT64_MAX;
    fprintf(stderr, "caliper watch: scraping %s every %.3g s%s\n", url, interval_s,
            duration_s > 0 ? "" : " until Ctrl-C");
    for (int64_t k = 0; !g_stop; k++) {
        int64_t due = start + k * step;
        if (due > end) break;
        int64_t now = cal_now_ns();
        if (due > now && cal_sleep_ns(due - now, &g_stop) != CAL_OK) break;
        if (k && cal_now_ns() > end) break;
        rc = scrape(h, url, &body, why, sizeof why);
        int64_t t = cal_now_ns();                  /* the reading is as of its receipt */
        size_t bad = 0;
        if (rc == CAL_OK)
            rc = cal_prom_find_load(body.data ? body.data : "", body.len, metric, &ld, &bad, why, sizeof why);
        if (rc != CAL_OK) {
            if (!scrapes) {
                exit_code = cli_fail(CMD, "%s: %s", url, why);
                goto out;
            }
            failed++;
            fprintf(stderr, "caliper watch: scrape failed: %s\n", why);
            continue;
        }
        double waiting = ld.has_waiting ? ld.waiting : NAN;
        /* a NaN, negative or absurd count is no reading at all, not "0 running":
         * the time until the next good one holds the previous reading, as
         * for a failed scrape */
        int arc = cal_op_add(&op, t, ld.running, waiting);
        if (arc == CAL_ERANGE) {
            /* a count, but more than the histogram holds: refused, never
             * clamped into its last bin */
            rejected++;
            fprintf(stderr, "caliper watch: reading rejected: %s is %g (%zu label set%s summed), "
                    "above the %d requests the operating point's histogram holds (%zu rejected "
                    "so far)\n", ld.running_name, ld.running, ld.running_series,
                    ld.running_series == 1 ? "" : "s", CAL_OP_MAX_RUNNING, rejected);
            continue;
        }
        if (arc != CAL_OK) {
            rejected++;
            fprintf(stderr, "caliper watch: reading rejected: %s is %g on line %zu, not %s (%zu "
                    "of %zu label set%s; %zu rejected so far)\n", ld.running_name,
                    ld.running_bad_value, ld.running_bad_line, cal_prom_range_text(ld.running_name),
                    ld.running_invalid, ld.running_series, ld.running_series == 1 ? "" : "s", rejected);
            continue;
        }
        /* a waiting gauge that is there but not a count is unknown for this
         * reading, and said so: counted, never "not exposed" */
        if (ld.has_waiting && ld.waiting_invalid) {
            wait_rejected++;
            snprintf(wait_name, sizeof wait_name, "%s", ld.waiting_name);
            fprintf(stderr, "caliper watch: reading rejected: %s is %g on line %zu, not %s (its "
                    "time counts as unknown; %zu rejected so far)\n", ld.waiting_name,
                    ld.waiting_bad_value, ld.waiting_bad_line, cal_prom_range_text(ld.waiting_name),
                    wait_rejected);
        }
        if (!scrapes) first = ld;
        scrapes++;
        series_add(&tl, (double)(t - start) / 1e9, ld.running, waiting);
        for (size_t i = 0; i < npids; i++) {
            double rss;
            if (pr[i].gone) continue;
            if (read_rss(&pr[i], &rss) == CAL_OK) series_add(&pr[i].rss, (double)(t - start) / 1e9, rss, 0);
            else {
                pr[i].gone = 1;
                fprintf(stderr, "caliper watch: pid %ld: no longer readable; its fit ends here\n", pr[i].pid);
            }
        }
    }
    int64_t stop_t = cal_now_ns();
    if (duration_s > 0 && stop_t > end) stop_t = end;
    cal_op_close(&op, stop_t);
    if (!ld.has_running || ld.running_invalid || ld.running > CAL_OP_MAX_RUNNING) ld = first;
    if (!ld.waiting_name[0] && wait_name[0]) snprintf(ld.waiting_name, sizeof ld.waiting_name, "%s", wait_name);

    cal_op_summary s;
    if (cal_op_summarize(&op, &s) != CAL_OK) {
        if (rejected)
            exit_code = cli_fail(CMD, "%s: fewer than two valid readings (%zu rejected: the running gauge "
                                 "was NaN, negative, out of its range or above the %d the histogram "
                                 "holds)", url, rejected, CAL_OP_MAX_RUNNING);
        else
            exit_code = cli_fail(CMD, "%s: fewer than two readings; watch longer", url);
        goto out;
    }
    if (isnan(ceiling) && ld.has_ceiling) ceiling = ld.ceiling;
    char verdict[512];
    cal_op_verdict(&s, ceiling, verdict, sizeof verdict);
    print_summary(stdout, url, &ld, &s, &op, scrapes, failed, rejected, wait_rejected, interval_s,
                  verdict);
    cal_leak lk[MAX_PIDS];
    int lk_ok[MAX_PIDS] = {0};
    for (size_t i = 0; i < npids; i++) {
        series *r = &pr[i].rss;
        char a[32], b[32], txt[256];
        if (r->n < 3) {
            printf("  pid %-6ld %zu readings: too few for a slope (need 3)\n", pr[i].pid, r->n);
            continue;
        }
        rc = cal_leak_judge(r->t_s, r->a, r->n, resolution_b, 0.95, &lk[i]);
        cal_unit_format(CAL_U_BYTES, r->a[0], 3, a, sizeof a);
        cal_unit_format(CAL_U_BYTES, r->a[r->n - 1], 3, b, sizeof b);
        if (rc != CAL_OK) {
            printf("  pid %-6ld rss %s -> %s; no slope: %s\n", pr[i].pid, a, b, cal_strerror(rc));
            continue;
        }
        lk_ok[i] = 1;
        printf("  pid %-6ld rss %s -> %s over %zu readings; %s\n", pr[i].pid, a, b, r->n,
               cal_leak_text(&lk[i], txt, sizeof txt));
    }
    if (jsonf) {
        json_t *o = summary_json(url, &ld, &s, &op, scrapes, failed, rejected, wait_rejected,
                                 interval_s, ceiling, verdict,
                                 &tl, pr, npids, lk, lk_ok);
        FILE *f = jf ? jf : stdout;
        if (json_dumpf(o, f, JSON_INDENT(1) | JSON_REAL_PRECISION(9)) != 0 || fputc('\n', f) == EOF)
            exit_code = cli_fail(CMD, "--json: \"%s\": write failed", jsonf);
        json_decref(o);
    }
out:
    if (jf && fclose(jf) != 0 && exit_code == CLI_OK)
        exit_code = cli_fail(CMD, "--json: \"%s\": %s", jsonf, strerror(errno));
    for (size_t i = 0; i < npids; i++) { cal_tel_close(&pr[i].tel); series_free(&pr[i].rss); }
    series_free(&tl);
    cal_op_free(&op);
    cal_buf_free(&body);
    if (h) curl_easy_cleanup(h);
    curl_global_cleanup();
    return exit_code;
}
