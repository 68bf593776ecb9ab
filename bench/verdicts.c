/* bench/verdicts — calibrates the shot verdict and compare on this machine:
 *   false alarms  series against a steady, warmed engine (the built-in one,
 *                 or --url): how often a directional verdict is given;
 *   detection     series where a real slowdown starts after shot 1: a CPU
 *                 quota on the engine's process (cgroup v2 cpu.max or v1
 *                 cpu.cfs_quota_us, as root), at each --drops size;
 *   smallest drop the smallest of those sizes detected in >= 95 % of series;
 *   A/A compares  consecutive steady series compared as two runs: how often
 *                 compare claims a difference (per-request and aggregate tok/s),
 *                 each claim printed with what it rested on.
 * Every rate is printed with its Wilson 95 % CI. Each series is a real
 * `caliper run --url` whose stored requests are judged by cal_judge_shots,
 * the code behind `caliper run`'s verdict line.
 *   usage: verdicts [--caliper PATH] [--url URL] [--series N (40)] [--shots N]
 *                   [--requests N] [--max-tokens N] [--prompt-tokens N]
 *                   [--drops 10,25,50] [--preset NAME] [--db PATH]
 *                   [--quota-period-ms 10] [--serve-args ARGS] [--engine-pid PID]
 *                   [--rejudge DB]
 *                   [--history-walls K] [--history-steady M] [--history-drop 70]
 * --history-*: the store first holds K series slowed by --history-drop after
 * shot 1 and M steady ones, interleaved, as caliper run stored them (their
 * verdicts included); every measured series is then judged against that
 * same history (its own noise row is removed once judged), and the wrong
 * "no wall larger than X" claims and the "cannot judge" share are printed
 * beside the detection rate.
 * --serve-args: more flags for the built-in engine (--serve-args "--pace-ms 2":
 * a paced engine, steady whatever the machine's load). --engine-pid PID: the
 * process of a --url engine (llama-server), put under the same CPU quota to
 * measure detection on it. --rejudge DB: no measuring; every series a
 * calibration stored in DB (steady-*, drop<P>-*) judged by this build's
 * library, so two builds' judges can be compared on the same requests.
 * Beside each measured false-alarm rate the simulated one is printed for
 * the noise measured on those series (their warm and first shots' sd, the
 * requests' spread, and the bursts: shots more than 3 robust sd slow).
 * --simulate: the three answers' error rates on seeded series and the
 * histories a store accumulates (tests/helpers/verdict_sim.h), with the
 * noise measured here as the model (--tau, --first-sd, --sigma: log sds of
 * a warm shot, the first shot and a request; defaults from this machine's
 * stored steady runs, docs/run.md), per history: an empty store, one of
 * steady runs, one of 70 % walls, one that mixes them; and beside each the
 * same store read as before schema 8, walls counted as noise:
 *   verdicts --simulate [--series 400] [--shots 5] [--requests 8]
 *            [--tau 0.03] [--first-sd 0.045] [--sigma 0.05] [--equivalence 0.10] */
#include <errno.h>
#include <sqlite3.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "src/serve_target.h"
#include "caliper/error.h"
#include "caliper/judge.h"
#include "caliper/noise.h"
#include "caliper/protocol.h"
#include "caliper/report.h"
#include "caliper/stats.h"
#include "caliper/store.h"
#include "bench/proc_clock.h"
#include "tests/helpers/verdict_sim.h"

static const char *g_caliper = "build/caliper", *g_db = "/tmp/caliper-verdicts.db";
static int g_fixed_history;   /* measured series leave the stored history as it was */
static char g_url[256];
/* shots 0: no shot flag, i.e. caliper run's default protocol (--warmup 1
 * --shots 5, docs/run.md) */
static long g_shots = 0, g_warmup = -1, g_requests = 8, g_max_tokens = 128, g_prompt = 64;

/* ---- the CPU quota ------------------------------------------------------ */
static char g_cg[256];      /* the cgroup directory holding the engine */
static int g_cg_v2;

static int put_file(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static int quota_setup(pid_t pid)
{
    char procs[32];
    snprintf(procs, sizeof procs, "%d\n", (int)pid);
    if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
        g_cg_v2 = 1;
        put_file("/sys/fs/cgroup", "cgroup.subtree_control", "+cpu");
        snprintf(g_cg, sizeof g_cg, "/sys/fs/cgroup/caliper-verdicts-%d", (int)getpid());
    } else {
        snprintf(g_cg, sizeof g_cg, "/sys/fs/cgroup/cpu/caliper-verdicts-%d", (int)getpid());
    }
    if (mkdir(g_cg, 0755) && errno != EEXIST) { g_cg[0] = 0; return -1; }
    if (put_file(g_cg, "cgroup.procs", procs)) { rmdir(g_cg); g_cg[0] = 0; return -1; }
    return 0;
}

/* share of one core the engine may use: 1 − drop; drop 0 lifts the quota.
 * The period is 10 ms (--quota-period-ms), not the kernel's default 100 ms:
 * a request on a quiet machine lasts tens of ms, and with a 100 ms period
 * most requests run whole inside the budget while the next waits out the
 * throttle between them, so the per-request speed (what the verdict judges)
 * barely moves although the aggregate halves. Measured here on a quiet
 * machine (tiny, 128 tokens a request, 4 series each): a 25 % cut measured
 * a 24.9 % drop at 20 ms but split the requests in two (2 of 4 detected);
 * 26.2 % at 10 ms; 35 % at 5 ms and 46 % at 2 ms, where throttling costs
 * more than the quota takes. The measured drop is printed beside each cut. */
static long g_period_us = 10000;
static int quota_set(double drop)
{
    if (!g_cg[0]) return -1;
    char t[64];
    long period = g_period_us, q = (long)((1 - drop) * period);
    if (q < 1000) q = 1000;   /* the kernel's smallest quota */
    if (g_cg_v2) {
        if (drop > 0) snprintf(t, sizeof t, "%ld %ld\n", q, period);
        else snprintf(t, sizeof t, "max %ld\n", period);
        return put_file(g_cg, "cpu.max", t);
    }
    /* v1: the quota must fit the period at every step, so lift it first */
    if (put_file(g_cg, "cpu.cfs_quota_us", "-1\n")) return -1;
    snprintf(t, sizeof t, "%ld\n", period);
    if (put_file(g_cg, "cpu.cfs_period_us", t)) return -1;
    if (drop <= 0) return 0;
    snprintf(t, sizeof t, "%ld\n", q);
    return put_file(g_cg, "cpu.cfs_quota_us", t);
}

static void quota_teardown(void)
{
    if (!g_cg[0]) return;
    quota_set(0);
    /* move the engine back to the parent so the directory can go */
    char up[300];
    snprintf(up, sizeof up, "%.*s", (int)(strrchr(g_cg, '/') - g_cg), g_cg);
    char p[512];
    snprintf(p, sizeof p, "%s/cgroup.procs", g_cg);
    FILE *f = fopen(p, "r");
    int pid;
    while (f && fscanf(f, "%d", &pid) == 1) {
        char s[32];
        snprintf(s, sizeof s, "%d\n", pid);
        put_file(up, "cgroup.procs", s);
    }
    if (f) fclose(f);
    rmdir(g_cg);
}

static pid_t g_engine;

/* ---- one series: a caliper run, slowed after shot 1 by `drop` ------------
 * The quota is a share of what the engine used during shot 1 (its CPU time
 * over shot 1's wall time), so a 25 % cut is a 25 % cut of the CPU it was
 * getting on this busy machine, not of a core it never had. */
static double g_share_sum;
static size_t g_share_n;
static int64_t run_series(const char *label, double drop)
{
    int fd[2];
    if (pipe(fd)) return -1;
    char s_shots[24], s_warm[24], s_req[24], s_max[24], s_prompt[24];
    snprintf(s_shots, sizeof s_shots, "%ld", g_shots);
    snprintf(s_warm, sizeof s_warm, "%ld", g_warmup < 0 ? 0 : g_warmup);
    snprintf(s_req, sizeof s_req, "%ld", g_requests);
    snprintf(s_max, sizeof s_max, "%ld", g_max_tokens);
    snprintf(s_prompt, sizeof s_prompt, "%ld", g_prompt);
    fflush(stdout);
    pid_t p = fork();
    if (p < 0) return -1;
    if (p == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        if (g_shots > 0)
            execl(g_caliper, g_caliper, "run", "--url", g_url, "--shots", s_shots, "--warmup",
                  s_warm, "--requests", s_req, "--max-tokens", s_max, "--prompt-tokens", s_prompt,
                  "--concurrency", "1", "--db", g_db, "--no-telemetry", "--label", label,
                  (char *)NULL);
        else   /* the default protocol: no shot flag at all */
            execl(g_caliper, g_caliper, "run", "--url", g_url, "--requests", s_req,
                  "--max-tokens", s_max, "--prompt-tokens", s_prompt, "--concurrency", "1",
                  "--db", g_db, "--no-telemetry", "--label", label, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *e = fdopen(fd[0], "r");
    char line[512];
    int slowed = 0;
    double c0 = NAN, w0 = NAN;
    static char last[512];
    /* the first measured shot is shot warm-ups + 1: its CPU share is what
     * the quota cuts once it ends */
    long warm = g_shots > 0 ? (g_warmup < 0 ? 0 : g_warmup) : 1;
    char first_done[32], warm_done[32];
    snprintf(first_done, sizeof first_done, "shot %ld · ", warm + 1);
    snprintf(warm_done, sizeof warm_done, "shot %ld · ", warm);
    while (e && fgets(line, sizeof line, e)) {
        if (!strncmp(line, "caliper run: ", 13)) snprintf(last, sizeof last, "%s", line);
        if (!strncmp(line, "caliper run: run ", strlen("caliper run: run ")) ||
            (warm > 0 && !strncmp(line, warm_done, strlen(warm_done)))) {
            c0 = proc_cpu_s(g_engine);
            w0 = now_s();
        }
        if (!slowed && drop > 0 && !strncmp(line, first_done, strlen(first_done))) {
            double share = (proc_cpu_s(g_engine) - c0) / (now_s() - w0);
            if (!(share > 0.05 && share <= 1)) share = 1;
            g_share_sum += share;
            g_share_n++;
            quota_set(1 - (1 - drop) * share);
            slowed = 1;
        }
    }
    if (e) fclose(e);
    int st = 0;
    waitpid(p, &st, 0);
    if (slowed) quota_set(0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "verdicts: series %s failed (status %d): %s", label,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1, last);
        return -1;
    }
    cal_store *db = NULL;
    int64_t id = -1;
    if (cal_store_open(g_db, &db) == CAL_OK && cal_store_find_run(db, label, &id) != CAL_OK) id = -1;
    cal_store_close(&db);
    return id;
}

/* the verdict of `caliper run` on that stored run (per-request speeds) into
 * *v, and into *vp the verdict with the earlier runs' warm-shot spread pooled
 * in, as `caliper run --pool-noise` gives it */
static int judge_run(int64_t id, cal_judge_verdict *v, cal_judge_verdict *vp)
{
    cal_store *db = NULL;
    cal_run_data *d = NULL;
    if (cal_store_open(g_db, &db) != CAL_OK || cal_store_load_run(db, id, 0, &d) != CAL_OK) {
        cal_store_close(&db);
        return -1;
    }
    static double vals[1 << 16];
    cal_judge_shot s[CAL_JUDGE_MAX_SHOTS];
    size_t n = 0, used = 0;
    for (size_t c = 0; c < d->n_cells && n < CAL_JUDGE_MAX_SHOTS; c++) {
        const cal_cell *cell = &d->cells[c];
        if (cell->shot_kind == CAL_SHOT_WARMUP) continue;
        size_t m = 0;
        for (int64_t j = 0; j < cell->n_requests; j++) {
            const cal_req_result *q = &d->reqs[cell->req_first + (size_t)j];
            if (q->status == CAL_REQ_OK && q->output_tokens > 0 && q->end_ns > q->send_ns &&
                used + m < sizeof vals / sizeof vals[0])
                vals[used + m++] = q->output_tokens / ((double)(q->end_ns - q->send_ns) / 1e9);
        }
        s[n++] = (cal_judge_shot){cell->shot_index, vals + used, m};
        used += m;
    }
    /* as caliper run judged it, the first measured shot's kind as stored */
    cal_judge_opts o = {.what = "per-request tok/s", .first = CAL_JUDGE_FIRST_UNKNOWN};
    /* the first shots' spread the run stored (noise_prior), as caliper run uses it */
    cal_noise_first_of(d->run.protocol_json, &o.first_sd, &o.first_df);
    o.first_left_out = cal_noise_first_left_out(d->run.protocol_json);
    for (size_t c = 0; c < d->n_cells; c++)
        if (d->cells[c].shot_kind != CAL_SHOT_WARMUP) {
            if (d->cells[c].shot_kind == CAL_SHOT_WARM) o.first = CAL_JUDGE_FIRST_WARM;
            break;
        }
    cal_judge_shots(s, n, &o, v);
    /* the prior --pool-noise would have stored: the series' rows before it */
    cal_store_noise_row row;
    cal_noise_est est;
    if (cal_noise_row_of_run(d, &row) == CAL_OK && cal_noise_estimate(db, row.series, id, &est) == CAL_OK) {
        o.prior_sd = est.shot_sd;
        o.prior_df = est.shot_df;
    }
    cal_judge_shots(s, n, &o, vp);
    cal_run_data_free(&d);
    cal_store_close(&db);
    if (g_fixed_history) {   /* the next series sees the designed history, not this one */
        sqlite3 *h = NULL;
        char sql[96];
        snprintf(sql, sizeof sql, "DELETE FROM noise WHERE run_id = %lld", (long long)id);
        if (sqlite3_open(g_db, &h) == SQLITE_OK) sqlite3_exec(h, sql, NULL, NULL, NULL);
        sqlite3_close(h);
    }
    return 0;
}

static void print_rate(const char *what, size_t k, size_t n, const char *extra);

/* The noise of the stored steady runs ids[0..n), measured as the verdict
 * sees it (each shot's median log per-request speed): the warm shots' sd,
 * the first measured shot's distance from their mean (root mean square),
 * the requests' spread within a shot (1.4826 × MAD), and the bursts: the
 * share of shots more than 3 robust sd slower than their run's median and
 * how far (mean excess). Returns the runs measured. */
static size_t measure_noise(const int64_t *ids, size_t n, vsim_model *m)
{
    double ss_w = 0, df_w = 0, ss_f = 0, ss_r = 0, df_r = 0, burst = 0, excess = 0;
    size_t runs = 0, shots = 0;
    for (size_t i = 0; i < n; i++) {
        cal_store *db = NULL;
        cal_run_data *d = NULL;
        if (ids[i] < 0 || cal_store_open_ex(g_db, CAL_STORE_READONLY, &db, NULL, 0) ||
            cal_store_load_run(db, ids[i], 0, &d)) {
            cal_store_close(&db);
            continue;
        }
        double z[CAL_JUDGE_MAX_SHOTS], v[4096];
        size_t k = 0;
        for (size_t c = 0; c < d->n_cells && k < CAL_JUDGE_MAX_SHOTS; c++) {
            const cal_cell *cell = &d->cells[c];
            if (cell->shot_kind == CAL_SHOT_WARMUP) continue;
            size_t m2 = 0;
            for (int64_t j = 0; j < cell->n_requests && m2 < 4096; j++) {
                const cal_req_result *q = &d->reqs[cell->req_first + (size_t)j];
                if (q->status == CAL_REQ_OK && q->output_tokens > 0 && q->end_ns > q->send_ns)
                    v[m2++] = log(q->output_tokens / ((double)(q->end_ns - q->send_ns) / 1e9));
            }
            if (m2 < 3) continue;
            z[k] = cal_stats_median(v, m2);
            for (size_t j = 0; j < m2; j++) v[j] = fabs(v[j] - z[k]);
            double sd = 1.4826 * cal_stats_median(v, m2);
            ss_r += sd * sd * (double)(m2 - 1);
            df_r += (double)(m2 - 1);
            m->requests = (int)m2;
            k++;
        }
        cal_run_data_free(&d);
        cal_store_close(&db);
        if (k < 3) continue;
        double mean = 0;
        for (size_t j = 1; j < k; j++) mean += z[j];
        mean /= (double)(k - 1);
        for (size_t j = 1; j < k; j++) ss_w += (z[j] - mean) * (z[j] - mean);
        df_w += (double)(k - 2);
        ss_f += (mean - z[0]) * (mean - z[0]);
        m->shots = (int)k;
        double zz[CAL_JUDGE_MAX_SHOTS], dev[CAL_JUDGE_MAX_SHOTS];
        memcpy(zz, z, k * sizeof *z);
        double med = cal_stats_median(zz, k);
        for (size_t j = 0; j < k; j++) dev[j] = fabs(z[j] - med);
        double rsd = 1.4826 * cal_stats_median(dev, k);
        for (size_t j = 0; j < k; j++, shots++)
            if (rsd > 0 && z[j] < med - 3 * rsd) { burst++; excess += med - z[j]; }
        runs++;
    }
    if (!runs) return 0;
    m->tau = df_w > 0 ? sqrt(ss_w / df_w) : 0;
    /* the first shot's own sd: its distance less the warm mean's share */
    double f2 = ss_f / (double)runs - m->tau * m->tau / (m->shots > 1 ? m->shots - 1 : 1);
    m->first_sd = f2 > 0 ? sqrt(f2) : 0;
    m->sigma = df_r > 0 ? sqrt(ss_r / df_r) : 0;
    m->burst_p = shots ? burst / (double)shots : 0;
    /* |t3| has mean 2·√3/π ≈ 1.10: the scale whose bursts average the excess */
    m->burst_scale = burst > 0 ? excess / burst / 1.10 : 0;
    return runs;
}

/* The rate bench/verdicts --simulate gives for the noise measured on these
 * runs, printed beside the measured one. */
static void simulated_beside(const int64_t *ids, size_t n)
{
    vsim_model m = {0};
    size_t runs = measure_noise(ids, n, &m);
    if (runs < 3 || m.shots < 3 || m.requests < 3) return;
    if (m.shots > VSIM_MAX_SHOTS) m.shots = VSIM_MAX_SHOTS;
    if (m.requests > VSIM_MAX_REQ) m.requests = VSIM_MAX_REQ;
    static vsim x;
    vsim_init(&x, 77, m);
    vsim_tally t;
    vsim_tally_runs(&x, 0, 2000, &t);
    char what[64], extra[240];
    snprintf(what, sizeof what, "  simulated (2000 seeded series)");
    snprintf(extra, sizeof extra, " with the noise measured on these %zu runs: warm shot sd %.3f, "
             "first shot %.3f, request %.3f, bursts %.1f %% of shots x %.3f", runs, m.tau,
             m.first_sd, m.sigma, 100 * m.burst_p, m.burst_scale);
    print_rate(what, (size_t)t.wall, (size_t)t.n, extra);
}

static void print_rate(const char *what, size_t k, size_t n, const char *extra)
{
    double lo = NAN, hi = NAN;
    if (n) cal_stats_wilson(k, n, 0.95, &lo, &hi);
    printf("%-34s %3zu / %-3zu = %5.1f %%  (95 %% CI %4.1f–%5.1f %%)%s\n", what, k, n,
           n ? 100.0 * k / n : NAN, 100 * lo, 100 * hi, extra ? extra : "");
    fflush(stdout);
}

static double loadavg(void)
{
    double l = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf", &l) != 1) l = NAN; fclose(f); }
    return l;
}

/* One history's row: rates at drop 0, 10 % and 25 % over n runs each. */
static void sim_history(const char *name, const vsim_model *m, int h, int legacy, long n)
{
    static vsim x;
    vsim_init(&x, 4242 + (uint64_t)h, *m);
    for (int r = 0; h > 0 && r < VSIM_MAX_ROWS; r++) {
        cal_judge_verdict v;
        vsim_run(&x, h == 1 ? 0 : h == 2 ? 0.70 : (r % 2 ? 0 : 0.70), &v);
    }
    int left = 0;
    if (legacy)   /* as a store before schema 8 reads: no wall flags */
        for (size_t i = 0; i < x.nrows; i++) { left += x.rows[i].wall == 1; x.rows[i].wall = -1; }
    cal_judge_opts o;
    vsim_opts(&x, &o);
    vsim_tally t0, t10, t25;
    vsim_tally_runs(&x, 0, (int)n, &t0);
    vsim_tally_runs(&x, 0.10, (int)n, &t10);
    vsim_tally_runs(&x, 0.25, (int)n, &t25);
    printf("%-26s %-14s %7.1f %%  %7.1f %%  %7.1f %%  %10.1f %%  %9.1f %%   %5.1f %% (%.0f df, %d left out)\n",
           name, legacy ? "walls counted" : "walls left out", 100.0 * t0.wall / t0.n,
           100.0 * t25.wall / t25.n, 100.0 * t10.wall / t10.n,
           100.0 * t25.wrong_no_wall / t25.n, 100.0 * t0.cannot / t0.n,
           isfinite(o.first_sd) ? 100 * o.first_sd : 0, o.first_df, legacy ? 0 : o.first_left_out);
    (void)left;
}

static int simulate(int argc, char **argv)
{
    vsim_model m = {.tau = 0.03, .first_sd = 0.045, .sigma = 0.05, .shots = 5, .requests = 8};
    long n = 400;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--series")) n = atol(v);
        else if (!strcmp(k, "--shots")) m.shots = atoi(v);
        else if (!strcmp(k, "--requests")) m.requests = atoi(v);
        else if (!strcmp(k, "--tau")) m.tau = atof(v);
        else if (!strcmp(k, "--first-sd")) m.first_sd = atof(v);
        else if (!strcmp(k, "--sigma")) m.sigma = atof(v);
        else if (!strcmp(k, "--burst-p")) m.burst_p = atof(v);
        else if (!strcmp(k, "--burst-scale")) m.burst_scale = atof(v);
        else { fprintf(stderr, "verdicts --simulate: unknown flag %s\n", k); return 2; }
    }
    if (n < 10 || m.shots < 3 || m.shots > VSIM_MAX_SHOTS || m.requests < 3 ||
        m.requests > VSIM_MAX_REQ || !(m.tau >= 0) || !(m.first_sd >= 0) || !(m.sigma >= 0)) {
        fprintf(stderr, "verdicts --simulate: --series >= 10, --shots 3..%d, --requests 3..%d, "
                        "sds >= 0\n", VSIM_MAX_SHOTS, VSIM_MAX_REQ);
        return 2;
    }
    char bursts[96] = "";
    if (m.burst_p > 0)
        snprintf(bursts, sizeof bursts, " · bursts: %.0f %% of shots slowed by |t3| x %.3f",
                 100 * m.burst_p, m.burst_scale);
    printf("bench/verdicts --simulate · %ld runs a cell · %d measured shots of %d requests · log sd: "
           "warm shot %.3f, first shot %.3f, request %.3f%s · history: the newest %d runs, each "
           "judged as it was stored\n", n, m.shots, m.requests, m.tau, m.first_sd, m.sigma, bursts,
           VSIM_MAX_ROWS);
    printf("%-26s %-14s %9s  %9s  %9s  %12s  %11s   %s\n", "history", "prior", "false al.",
           "25 % wall", "10 % wall", "wrong no-wall", "cannot judge", "first-shot sd");
    printf("%-26s %-14s %9s  %9s  %9s  %12s  %11s\n", "", "", "(target ≤5)", "(≥95)", "", "(25 %, ≤5)",
           "(steady)");
    const char *names[] = {"empty store", "10 steady runs", "10 walls of 70 %", "5 walls of 70 % + 5 steady"};
    for (int h = 0; h < 4; h++) {
        sim_history(names[h], &m, h, 0, n);
        if (h >= 2) sim_history(names[h], &m, h, 1, n);
    }
    return 0;
}

/* Every series a calibration stored in g_db, judged again by this build's
 * library: steady-* as false alarms, drop<P>-* as detections of a P % cut.
 * The data are the requests the runs stored; nothing is measured. */
static int rejudge_store(void)
{
    cal_store *db = NULL;
    cal_run *runs = NULL;
    size_t nr = 0;
    if (cal_store_open_ex(g_db, CAL_STORE_READONLY, &db, NULL, 0) != CAL_OK ||
        cal_store_list_runs(db, 0, &runs, &nr) != CAL_OK) {
        fprintf(stderr, "verdicts --rejudge: cannot read %s\n", g_db);
        cal_store_close(&db);
        return 1;
    }
    size_t fa = 0, fa_pool = 0, n = 0, cannot = 0, faster = 0, nid = 0;
    int64_t *sid = calloc(nr ? nr : 1, sizeof *sid);
    struct drop_tally { int pct; size_t hit, n; } dr[8];
    size_t ndr = 0;
    for (size_t i = nr; i-- > 0;) {   /* oldest first */
        const char *l = runs[i].label ? runs[i].label : "";
        int pct = -1;
        if (!strncmp(l, "steady-", 7)) pct = 0;
        else if (sscanf(l, "drop%d-", &pct) != 1) continue;
        cal_judge_verdict v, v0;
        if (judge_run(runs[i].id, &v, &v0)) continue;
        if (pct == 0) {
            n++;
            fa_pool += v0.directional != 0;
            if (sid) sid[nid++] = runs[i].id;
            if (v.directional) {
                fa++;
                faster += v.kind == CAL_JUDGE_FASTER;
                printf("  false alarm: %s: %s\n", l, v.text);
            }
            cannot += v.kind == CAL_JUDGE_CANNOT;
            continue;
        }
        size_t k = 0;
        while (k < ndr && dr[k].pct != pct) k++;
        if (k == ndr && ndr < 8) dr[ndr++] = (struct drop_tally){pct, 0, 0};
        if (k < ndr) {
            dr[k].n++;
            dr[k].hit += v.kind == CAL_JUDGE_SLOWER || (v.kind == CAL_JUDGE_TREND && v.slope < 0);
        }
    }
    char extra[160];
    snprintf(extra, sizeof extra, "; %zu of them 'the first shot was slower'; %zu cannot judge; "
             "with --pool-noise %zu", faster, cannot, fa_pool);
    printf("bench/verdicts --rejudge %s (this build's judge on the stored requests)\n", g_db);
    print_rate("false alarms (steady engine)", fa, n, extra);
    if (sid) simulated_beside(sid, nid);
    free(sid);
    for (size_t k = 0; k < ndr; k++) {
        char what[64];
        snprintf(what, sizeof what, "detected, %d %% CPU quota cut", dr[k].pct);
        print_rate(what, dr[k].hit, dr[k].n, NULL);
    }
    for (size_t i = 0; i < nr; i++) cal_run_clear(&runs[i]);
    free(runs);
    cal_store_close(&db);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--simulate")) {
            for (int k = i; k + 1 < argc; k++) argv[k] = argv[k + 1];
            return simulate(argc - 1, argv);
        }
    long series = 40, hist_walls = 0, hist_steady = 0;
    double hist_drop = 0.70;
    const char *drops_arg = "10,25,50", *preset = "tiny", *serve_args = NULL, *rejudge = NULL;
    long engine_pid = 0;   /* --url: the engine's process, to slow it as the built-in one is */
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--caliper")) g_caliper = v;
        else if (!strcmp(k, "--url")) snprintf(g_url, sizeof g_url, "%s", v);
        else if (!strcmp(k, "--series")) series = atol(v);
        else if (!strcmp(k, "--shots")) g_shots = atol(v);
        else if (!strcmp(k, "--warmup")) g_warmup = atol(v);
        else if (!strcmp(k, "--requests")) g_requests = atol(v);
        else if (!strcmp(k, "--max-tokens")) g_max_tokens = atol(v);
        else if (!strcmp(k, "--prompt-tokens")) g_prompt = atol(v);
        else if (!strcmp(k, "--drops")) drops_arg = v;
        else if (!strcmp(k, "--quota-period-ms")) g_period_us = (long)(atof(v) * 1000);
        else if (!strcmp(k, "--preset")) preset = v;
        else if (!strcmp(k, "--serve-args")) serve_args = v;
        else if (!strcmp(k, "--rejudge")) rejudge = v;
        else if (!strcmp(k, "--engine-pid")) engine_pid = atol(v);
        else if (!strcmp(k, "--db")) g_db = v;
        else if (!strcmp(k, "--history-walls")) hist_walls = atol(v);
        else if (!strcmp(k, "--history-steady")) hist_steady = atol(v);
        else if (!strcmp(k, "--history-drop")) hist_drop = atof(v) / 100;
        else { fprintf(stderr, "verdicts: unknown flag %s\n", k); return 2; }
    }
    if (g_period_us < 1000 || g_period_us > 1000000) {
        fprintf(stderr, "verdicts: --quota-period-ms %s: 1..1000\n", "out of range");
        return 2;
    }
    if (series < 2 || (g_shots && g_shots < 2)) {
        fprintf(stderr, "verdicts: --series >= 2 and --shots >= 2 (or 0: the default protocol)\n");
        return 2;
    }
    if (rejudge) {
        g_db = rejudge;
        return rejudge_store();
    }
    unlink(g_db);
    cal_target *t = NULL;
    char err[512];
    cli_serve_argv av;   /* outlives the target */
    if (!g_url[0]) {
        char extra[512];
        snprintf(extra, sizeof extra, "--threads 1%s%s", serve_args ? " " : "", serve_args ? serve_args : "");
        cli_serve_argv_make(&av, g_caliper, preset, extra);
        cal_target_config cfg = {.kind = CAL_TARGET_BUILTIN, .argv = av.argv,
                                 .ready_line = cli_serve_ready_line, .preset = preset};
        if (cal_target_start(&cfg, &t, err, sizeof err) != CAL_OK) {
            fprintf(stderr, "verdicts: cannot start the built-in engine: %s\n", err);
            return 1;
        }
        snprintf(g_url, sizeof g_url, "%s", cal_target_url(t));
    }
    g_engine = t ? cal_target_pid(t) : (pid_t)engine_pid;
    int can_slow = g_engine > 0 && geteuid() == 0 && quota_setup(g_engine) == 0 && quota_set(0) == 0;
    char shots_s[64];
    if (g_shots > 0) snprintf(shots_s, sizeof shots_s, "--warmup %ld --shots %ld", g_warmup < 0 ? 0 : g_warmup, g_shots);
    else snprintf(shots_s, sizeof shots_s, "default shots (--warmup 1 --shots 5)");
    printf("bench/verdicts · %s%s%s%s · protocol: %s --requests %ld --concurrency 1 "
           "--prompt-tokens %ld --max-tokens %ld · load average %.1f on %ld CPUs\n",
           t ? "built-in engine (--threads 1" : g_url, t && serve_args ? " " : "",
           t ? (serve_args ? serve_args : "") : "", t ? ")" : "", shots_s, g_requests, g_prompt,
           g_max_tokens, loadavg(), sysconf(_SC_NPROCESSORS_ONLN));
    if (t) printf("  (engine: caliper serve --preset %s --threads 1%s%s)\n", preset,
                  serve_args ? " " : "", serve_args ? serve_args : "");
    /* warm the engine: one series whose verdict is not counted */
    run_series("warm-up", 0);
    if (hist_walls > 0 || hist_steady > 0) {
        if (hist_walls > 0 && !can_slow) {
            fprintf(stderr, "verdicts: --history-walls needs a writable cgroup cpu controller (root)\n");
            return 1;
        }
        /* the warm-up's row is not part of the designed history */
        sqlite3 *h = NULL;
        if (sqlite3_open(g_db, &h) == SQLITE_OK) sqlite3_exec(h, "DELETE FROM noise", NULL, NULL, NULL);
        sqlite3_close(h);
        long walls_called = 0;
        for (long i = 0; i < hist_walls || i < hist_steady; i++)
            for (int w = 1; w >= 0; w--) {
                if (i >= (w ? hist_walls : hist_steady)) continue;
                char label[48];
                snprintf(label, sizeof label, "history-%s-%ld", w ? "wall" : "steady", i);
                int64_t id = run_series(label, w ? hist_drop : 0);
                cal_judge_verdict v, v0;
                if (w && id >= 0 && !judge_run(id, &v, &v0)) walls_called += v.directional;
            }
        printf("history: %ld series slowed %.0f %% after shot 1 (%ld called a wall as stored) and "
               "%ld steady ones, interleaved; every measured series is judged against it\n",
               hist_walls, 100 * hist_drop, walls_called, hist_steady);
        g_fixed_history = 1;
    }

    /* false alarms, and the A/A pairs from consecutive steady series */
    size_t fa = 0, fa0 = 0, nfa = 0, cannot = 0, under = 0;
    double prior_dfs[1024];
    size_t n_prior = 0;
    int64_t *ids = calloc((size_t)series, sizeof *ids);
    for (long i = 0; i < series; i++) {
        char label[32];
        snprintf(label, sizeof label, "steady-%ld", i);
        ids[i] = run_series(label, 0);
        cal_judge_verdict v, v0;
        if (ids[i] < 0 || judge_run(ids[i], &v, &v0)) { fprintf(stderr, "verdicts: %s failed\n", label); continue; }
        nfa++;
        if (n_prior < 1024) prior_dfs[n_prior++] = v0.prior_df;
        fa0 += v0.directional != 0;
        if (v.directional) { fa++; printf("  false alarm: %s\n", v.text); }
        if (v.kind == CAL_JUDGE_CANNOT) cannot++;
        if (v.kind == CAL_JUDGE_SMALL) under++;
    }
    char extra[200];
    snprintf(extra, sizeof extra, "; %zu cannot judge, %zu under the floor; prior df median %.0f; "
             "with --pool-noise %zu", cannot, under,
             n_prior ? cal_stats_median(prior_dfs, n_prior) : NAN, fa0);
    print_rate("false alarms (steady engine)", fa, nfa, extra);
    simulated_beside(ids, (size_t)series);
    /* the noise caliper measured and stored for this series */
    if (nfa && ids[series - 1] > 0) {
        cal_store *db = NULL;
        cal_run_data *d = NULL;
        cal_store_noise_row row;
        cal_noise_est est;
        if (cal_store_open(g_db, &db) == CAL_OK &&
            cal_store_load_run(db, ids[series - 1], 0, &d) == CAL_OK &&
            cal_noise_row_of_run(d, &row) == CAL_OK &&
            cal_noise_estimate(db, row.series, 0, &est) == CAL_OK)
            printf("stored noise of the steady series: shot-to-shot sd %.1f %% (%.0f df, newest %d "
                   "runs), run-to-run sd %.1f %% (%.0f df)\n", 100 * expm1(est.shot_sd),
                   est.shot_df, CAL_NOISE_PRIOR_RUNS, 100 * expm1(est.run_sd), est.run_df);
        cal_run_data_free(&d);
        cal_store_close(&db);
    }

    size_t aa = 0, aa_agg = 0, naa = 0;
    for (long i = 0; i + 1 < series; i += 1) {
        if (ids[i] < 0 || ids[i + 1] < 0) continue;
        cal_result *a = NULL, *b = NULL;
        char ra[32], rb[32];
        snprintf(ra, sizeof ra, "%lld", (long long)ids[i]);
        snprintf(rb, sizeof rb, "%lld", (long long)ids[i + 1]);
        if (cal_result_load(ra, g_db, &a, err, sizeof err) || cal_result_load(rb, g_db, &b, err, sizeof err)) {
            cal_result_free(&a); cal_result_free(&b);
            continue;
        }
        const cal_result *rs[] = {a, b};
        cal_compare_opts o = {.metrics = (1ull << CAL_M_REQ_TOKS) | (1ull << CAL_M_AGG_TOKS), .seed = 1};
        cal_noise_compare_opts(g_db, rs, 2, &o);   /* as caliper compare does */
        cal_comparison *c = NULL;
        if (cal_compare(rs, 2, &o, &c) == CAL_OK) {
            int d_req = 0, d_agg = 0;
            for (size_t r = 0; r < c->n_rows; r++) {
                const cal_cmp_row *w = &c->rows[r];
                if (w->fp.shot_first < 2) continue;   /* the warm cell */
                if (w->metric == CAL_M_REQ_TOKS) d_req |= w->e[1].differs;
                if (w->metric == CAL_M_AGG_TOKS) d_agg |= w->e[1].differs;
                /* what a claim rested on: the ratio, its CI, the run noise */
                if (w->e[1].differs)
                    printf("  A/A claim: %s vs %s, %s %.3f× (95 %% CI %.3f–%.3f); run-to-run sd "
                           "%.1f %% (%.0f df), the pair's rank threshold %.1f %%\n",
                           ra, rb, cal_metric_get(w->metric)->label, w->e[1].ratio,
                           w->e[1].ci_lo, w->e[1].ci_hi, 100 * o.run_noise[0].sd,
                           o.run_noise[0].df,
                           100 * expm1(o.run_noise[1].mq95[w->metric] > 0
                                           ? o.run_noise[1].mq95[w->metric] : o.run_noise[1].q95));
            }
            naa++;
            aa += d_req;
            aa_agg += d_agg;
            cal_comparison_free(&c);
        }
        cal_result_free(&a);
        cal_result_free(&b);
    }
    /* every pair of steady series as well: more pairs, but not independent
     * ones, so no CI is printed for it */
    size_t all = 0, nall = 0;
    for (long i = 0; i < series; i++)
        for (long j = i + 1; j < series; j++) {
            if (ids[i] < 0 || ids[j] < 0) continue;
            cal_result *a = NULL, *b = NULL;
            char ra[32], rb[32];
            snprintf(ra, sizeof ra, "%lld", (long long)ids[i]);
            snprintf(rb, sizeof rb, "%lld", (long long)ids[j]);
            if (!cal_result_load(ra, g_db, &a, err, sizeof err) &&
                !cal_result_load(rb, g_db, &b, err, sizeof err)) {
                const cal_result *rs[] = {a, b};
                cal_compare_opts o = {.metrics = 1ull << CAL_M_REQ_TOKS, .seed = 1, .boot_iters = 200};
                cal_noise_compare_opts(g_db, rs, 2, &o);
                cal_comparison *c = NULL;
                if (cal_compare(rs, 2, &o, &c) == CAL_OK) {
                    int d = 0;
                    for (size_t r = 0; r < c->n_rows; r++)
                        if (c->rows[r].fp.shot_first >= 2) d |= c->rows[r].e[1].differs;
                    nall++;
                    all += d;
                    cal_comparison_free(&c);
                }
            }
            cal_result_free(&a);
            cal_result_free(&b);
        }
    print_rate("A/A compares claiming a difference", aa, naa, " (per-request tok/s, warm)");
    if (nall)
        printf("%-34s %3zu / %-3zu = %5.1f %%  (all pairs of steady series; not independent)\n",
               "A/A compares claiming a difference", all, nall, 100.0 * all / nall);
    print_rate("A/A compares claiming a difference", aa_agg, naa, " (aggregate tok/s, warm)");
    free(ids);

    if (!strcmp(drops_arg, "0")) {
        printf("detection: not measured (--drops 0)\n");
    } else if (!can_slow) {
        printf("detection: skipped: %s\n", g_engine > 0 ? "no writable cgroup cpu controller (root needed)"
                                                        : "a --url engine without --engine-pid is not "
                                                          "caliper's to slow down");
    } else {
        double smallest = NAN;
        char buf[64];
        snprintf(buf, sizeof buf, "%s", drops_arg);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            double drop = atof(tok) / 100;
            if (!(drop > 0 && drop < 1)) continue;
            size_t hit = 0, hit0 = 0, nd = 0, wrong = 0, cannot_d = 0;
            double eff[1024];
            size_t ne = 0;
            for (long i = 0; i < series; i++) {
                char label[48];
                snprintf(label, sizeof label, "drop%.0f-%ld", drop * 100, i);
                int64_t id = run_series(label, drop);
                cal_judge_verdict v, v0;
                if (id < 0 || judge_run(id, &v, &v0)) continue;
                nd++;
                if (v.kind == CAL_JUDGE_SLOWER || (v.kind == CAL_JUDGE_TREND && v.slope < 0)) hit++;
                if (v0.kind == CAL_JUDGE_SLOWER || (v0.kind == CAL_JUDGE_TREND && v0.slope < 0)) hit0++;
                if (isfinite(v.effect) && ne < 1024) eff[ne++] = -v.effect;
                /* "no wall larger than X" said of a run slowed by more than X */
                if ((v.kind == CAL_JUDGE_STEADY || v.kind == CAL_JUDGE_SMALL) && drop > v.equiv) wrong++;
                if (v.kind == CAL_JUDGE_CANNOT) cannot_d++;
            }
            char what[64], ex[160];
            snprintf(what, sizeof what, "detected, %.0f %% CPU quota cut", drop * 100);
            snprintf(ex, sizeof ex, "; measured drop median %.1f %%; engine had %.2f of a core; "
                     "with --pool-noise %zu",
                     ne ? 100 * cal_stats_median(eff, ne) : NAN,
                     g_share_n ? g_share_sum / (double)g_share_n : NAN, hit0);
            g_share_sum = 0;
            g_share_n = 0;
            print_rate(what, hit, nd, ex);
            snprintf(what, sizeof what, "  wrong \"no wall > %.0f %%\" claims", 100 * CAL_JUDGE_EQUIV);
            snprintf(ex, sizeof ex, "; cannot judge %zu", cannot_d);
            if (drop > CAL_JUDGE_EQUIV) print_rate(what, wrong, nd, ex);
            if (nd && (double)hit / nd >= 0.95 && !(smallest <= drop)) smallest = drop;
        }
        if (isfinite(smallest))
            printf("smallest drop detected in >= 95 %% of series: %.0f %%\n", 100 * smallest);
        else
            printf("smallest drop detected in >= 95 %% of series: none of %s %%\n", drops_arg);
    }
    printf("load average at the end: %.1f\n", loadavg());
    quota_teardown();
    cal_target_stop(&t);
    return 0;
}
