/* bench/gate — the regression gate's error rates, measured (docs/ci.md):
 *   A/A     `caliper run --ab` of the built-in engine against itself (two
 *           launched `caliper serve --threads 1`), then `caliper gate` on it:
 *           how often it exits 1 (a false alarm: goal <= 5 % family-wise),
 *           3 (cannot judge) or 0;
 *   A/B     the same, B slowed by a CPU quota (cgroup v2 cpu.max or v1
 *           cpu.cfs_quota_us, as root) at twice the smallest bound: how
 *           often the gate exits 1 (detection: goal >= 90 %). The quota is a
 *           share of what B's engine used in its first two shots (a 20 % cut
 *           is 20 % of the CPU it got on this busy machine, not of a core it
 *           never had); the slowdown it made is measured and printed beside
 *           the rate, as every A/B run's own estimate of it. Each engine runs
 *           in a cgroup of its own, so the quota is the only difference.
 * Every rate with its Wilson 95 % CI, and the noise the runs showed (the
 * paired ratios' sd and MAD, the share of burst pairs) as the parameters
 * of the simulation, which reproduces both rates from seeded noise:
 *   gate [--caliper PATH] [--aa N] [--ab N] [--shots N] [--requests N]
 *        [--max-tokens N] [--prompt-tokens N] [--preset NAME] [--box cpu|gpu]
 *        [--fail SPEC] [--drop FRACTION] [--db PATH] [--quota-period-ms 10]
 *        [--pin CPU] (both engines on that CPU: neither gets a better seat)
 *   gate --from-db PATH [--fail SPEC | --box cpu|gpu] [--shift D]: the runs an
 *        earlier bench/gate stored there, judged again (no new run); --shift
 *        also judges each A/A run with B made D slower after the fact (the
 *        run's own noise, an exactly known effect)
 *   gate --simulate [--runs 2000] [--pairs 30] [--tau 0.03] [--burst-p 0.05]
 *        [--burst-mean 0.2] [--sigma 0.06] [--sigma-lat 0.2] [--proc-sd 0] [--drop D]
 *        [--box cpu|gpu] [--fail SPEC]
 * The protocol defaults are docs/ci.md's default protocol. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "caliper/error.h"
#include "caliper/gate.h"
#include "caliper/stats.h"
#include "caliper/store.h"
#include "bench/proc_clock.h"
#include "tests/helpers/gate_sim.h"

/* docs/ci.md's default protocol for the gate */
static const char *g_caliper = "build/caliper", *g_db = "/tmp/caliper-gate-bench.db";
static const char *g_preset = "tiny";
static long g_shots = 31, g_requests = 8, g_max_tokens = 64, g_prompt = 256;
static int g_port = 19450;
static int g_pin = -1;       /* --pin CPU: both engines on that CPU; -1 none */

/* ---- the CPU quota on B's engine ---------------------------------------- */
/* Each engine in a cgroup of its own, so A and B meet the rest of the
 * machine alike (a group competes as one entity); only B's gets a quota. */
static char g_cg[256], g_cg_a[256];
static int g_cg_v2;
static long g_period_us = 10000;

static int put_file(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* a cgroup B's engine joins from its own launch command */
static int quota_setup(void)
{
    if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
        g_cg_v2 = 1;
        put_file("/sys/fs/cgroup", "cgroup.subtree_control", "+cpu");
        snprintf(g_cg, sizeof g_cg, "/sys/fs/cgroup/caliper-gate-%d-b", (int)getpid());
        snprintf(g_cg_a, sizeof g_cg_a, "/sys/fs/cgroup/caliper-gate-%d-a", (int)getpid());
    } else {
        snprintf(g_cg, sizeof g_cg, "/sys/fs/cgroup/cpu/caliper-gate-%d-b", (int)getpid());
        snprintf(g_cg_a, sizeof g_cg_a, "/sys/fs/cgroup/cpu/caliper-gate-%d-a", (int)getpid());
    }
    if (mkdir(g_cg, 0755) && errno != EEXIST) { g_cg[0] = g_cg_a[0] = 0; return -1; }
    if (mkdir(g_cg_a, 0755) && errno != EEXIST) { rmdir(g_cg); g_cg[0] = g_cg_a[0] = 0; return -1; }
    /* a group competes as one task of its weight, whatever its members'
     * nice: give both the weight of this bench's own nice level (the
     * kernel's table: ×1.25 a step), so `nice -n -20 bench/gate` lifts the
     * engines as it lifts the client */
    errno = 0;
    int nv = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && nv < 0) {
        double w = 1024 * pow(1.25, -nv);
        char t[32];
        if (g_cg_v2) snprintf(t, sizeof t, "%d\n", (int)fmin(10000, w * 100 / 1024));
        else snprintf(t, sizeof t, "%d\n", (int)fmin(262144, w));
        const char *knob = g_cg_v2 ? "cpu.weight" : "cpu.shares";
        put_file(g_cg, knob, t);
        put_file(g_cg_a, knob, t);
    }
    return 0;
}

/* share of one core: 1 lifts the quota */
static int quota_set(double share)
{
    if (!g_cg[0]) return -1;
    char t[64];
    long period = g_period_us, q = (long)(share * (double)period);
    if (q < 1000) q = 1000;
    if (g_cg_v2) {
        if (share < 1) snprintf(t, sizeof t, "%ld %ld\n", q, period);
        else snprintf(t, sizeof t, "max %ld\n", period);
        return put_file(g_cg, "cpu.max", t);
    }
    if (put_file(g_cg, "cpu.cfs_quota_us", "-1\n")) return -1;
    snprintf(t, sizeof t, "%ld\n", period);
    if (put_file(g_cg, "cpu.cfs_period_us", t)) return -1;
    if (share >= 1) return 0;
    snprintf(t, sizeof t, "%ld\n", q);
    return put_file(g_cg, "cpu.cfs_quota_us", t);
}

static void quota_teardown(void)
{
    if (!g_cg[0]) return;
    quota_set(1);
    rmdir(g_cg);   /* empty once the engines are gone */
    rmdir(g_cg_a);
}

static double loadavg(void)
{
    double l = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf", &l) != 1) l = NAN; fclose(f); }
    return l;
}

static pid_t read_pid(const char *path)
{
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f) { if (fscanf(f, "%d", &pid) != 1) pid = 0; fclose(f); }
    return (pid_t)pid;
}

/* ---- one run --ab and its gate -------------------------------------------- */

/* caliper run --ab of two built-in engines; B slowed to `keep` of the CPU
 * share it used in its warm-up shot (keep 1: not slowed). 0 ok. */
static int run_ab(const char *label, double keep, double *share_out)
{
    char pidfile[128], cmd_a[1024], cmd_b[1024], url_a[64], url_b[64];
    char s_shots[24], s_req[24], s_max[24], s_prompt[24];
    int pa = g_port, pb = g_port + 1;
    snprintf(pidfile, sizeof pidfile, "/tmp/caliper-gate-bench-%d.pid", (int)getpid());
    unlink(pidfile);
    /* --pin: both engines on one CPU, so neither gets a better seat */
    char pin[32] = "";
    if (g_pin >= 0) snprintf(pin, sizeof pin, "taskset -c %d ", g_pin);
    if (g_cg_a[0])
        snprintf(cmd_a, sizeof cmd_a, "echo $$ > %s/cgroup.procs && exec %s%s serve --preset %s --threads 1 "
                 "--port %d", g_cg_a, pin, g_caliper, g_preset, pa);
    else
        snprintf(cmd_a, sizeof cmd_a, "exec %s%s serve --preset %s --threads 1 --port %d", pin, g_caliper,
                 g_preset, pa);
    /* B joins the quota's cgroup (where there is one) and says its pid */
    if (g_cg[0])
        snprintf(cmd_b, sizeof cmd_b, "echo $$ > %s/cgroup.procs && echo $$ > %s && exec %s%s serve "
                 "--preset %s --threads 1 --port %d", g_cg, pidfile, pin, g_caliper, g_preset, pb);
    else
        snprintf(cmd_b, sizeof cmd_b, "echo $$ > %s && exec %s%s serve --preset %s --threads 1 --port %d",
                 pidfile, pin, g_caliper, g_preset, pb);
    snprintf(url_a, sizeof url_a, "http://127.0.0.1:%d", pa);
    snprintf(url_b, sizeof url_b, "http://127.0.0.1:%d", pb);
    snprintf(s_shots, sizeof s_shots, "%ld", g_shots);
    snprintf(s_req, sizeof s_req, "%ld", g_requests);
    snprintf(s_max, sizeof s_max, "%ld", g_max_tokens);
    snprintf(s_prompt, sizeof s_prompt, "%ld", g_prompt);
    if (g_cg[0]) quota_set(1);
    int fd[2];
    if (pipe(fd)) return -1;
    fflush(stdout);
    pid_t p = fork();
    if (p < 0) return -1;
    if (p == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        execl(g_caliper, g_caliper, "run", "--ab", "--launch", cmd_a, "--url", url_a, "--launch", cmd_b,
              "--url", url_b, "--warmup", "1", "--shots", s_shots, "--requests", s_req, "--max-tokens",
              s_max, "--prompt-tokens", s_prompt, "--concurrency", "1", "--db", g_db, "--no-telemetry",
              "--label", label, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *e = fdopen(fd[0], "r");
    char line[512];
    static char last[512];
    pid_t bpid = 0;
    double c0 = NAN, w0 = NAN;
    int slowed = 0;
    *share_out = NAN;
    /* shot 1 (the warm-up) runs A then B, shot 2 B then A: from the end of
     * A's warm-up to the end of B's shot 2, B ran alone for two shots, and
     * its CPU share there is what the quota cuts. Shot 2, the first
     * measured one, is never quoted (the analysis leaves it out), so the
     * quota binds from B's first quoted shot on. */
    while (e && fgets(line, sizeof line, e)) {
        if (!strncmp(line, "caliper run: ", 13)) snprintf(last, sizeof last, "%s", line);
        if (!bpid) bpid = read_pid(pidfile);
        if (!strncmp(line, "A · shot 1 ·", strlen("A · shot 1 ·")) && bpid) {
            c0 = proc_cpu_s(bpid);
            w0 = now_s();
        }
        if (!slowed && !strncmp(line, "B · shot 2 ·", strlen("B · shot 2 ·")) && bpid && isfinite(c0)) {
            double share = (proc_cpu_s(bpid) - c0) / (now_s() - w0);
            if (!(share > 0.02 && share <= 1.5)) share = 1;
            *share_out = share;
            if (keep < 1 && g_cg[0]) quota_set(keep * share);
            slowed = 1;
        }
    }
    if (e) fclose(e);
    int st = 0;
    waitpid(p, &st, 0);
    if (g_cg[0]) quota_set(1);
    unlink(pidfile);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "gate bench: run %s failed (status %d): %s", label,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1, last);
        return -1;
    }
    return 0;
}

/* caliper gate LABEL --format json: its exit code, and per case the
 * effect into eff[] (NAN absent) */
static int gate_of(const char *label, const char *fail, const char *box, double *eff, size_t cap,
                   size_t *n, int *improved)
{
    int fd[2];
    *n = 0;
    *improved = 0;
    if (pipe(fd)) return -1;
    pid_t p = fork();
    if (p < 0) return -1;
    if (p == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (!freopen("/dev/null", "w", stderr)) _exit(127);
        if (fail)
            execl(g_caliper, g_caliper, "gate", label, "--db", g_db, "--format", "json", "--fail", fail,
                  (char *)NULL);
        else
            execl(g_caliper, g_caliper, "gate", label, "--db", g_db, "--format", "json", "--box", box,
                  (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    cal_buf b = CAL_BUF_INIT(16u << 20);
    char chunk[4096];
    ssize_t r;
    while ((r = read(fd[0], chunk, sizeof chunk)) > 0) cal_buf_append(&b, chunk, (size_t)r);
    close(fd[0]);
    int st = 0;
    waitpid(p, &st, 0);
    json_t *root = b.data ? json_loadb(b.data, b.len, 0, NULL) : NULL;
    cal_buf_free(&b);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        if (*n >= cap) break;
        json_t *v = json_object_get(c, "effect");
        eff[(*n)++] = json_is_number(v) ? json_number_value(v) : NAN;
        const char *a = json_string_value(json_object_get(c, "answer"));
        if (a && !strcmp(a, "improvement")) *improved = 1;
    }
    json_decref(root);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* the paired log ratios of every quoted shot of a stored --ab run, per
 * bounded metric, appended to d[k][...] (the noise the runs show) */
static void ratios_of(const char *label, const cal_gate_bound *b, size_t nb, double **d, size_t *nd,
                      size_t cap)
{
    const char *refs[1] = {label};
    cal_gate_input *in = NULL;
    char err[512];
    if (cal_gate_load(refs, 1, g_db, &in, err, sizeof err)) return;
    for (size_t c = 0; c < in->n_cells; c++)
        for (size_t i = 0; i < in->cells[c].n_pairs; i++)
            for (size_t k = 0; k < nb; k++) {
                double a = in->cells[c].a[i][b[k].metric], x = in->cells[c].b[i][b[k].metric];
                if (a > 0 && x > 0 && isfinite(a) && isfinite(x) && nd[k] < cap) d[k][nd[k]++] = log(x / a);
            }
    cal_gate_input_free(&in);
}

/* A stored A/A run with B made slower by exactly d after the fact (its
 * speeds times 1 − d, its latencies divided by it): the run's own noise,
 * a known effect. The gate's verdict on it through the library, as
 * caliper gate judges (cal_gate_load, cal_gate_eval). -1 when unreadable. */
static int shifted_verdict(const char *label, double d, const cal_gate_bound *b, size_t nb)
{
    const char *refs[1] = {label};
    cal_gate_input *in = NULL;
    char err[512];
    if (cal_gate_load(refs, 1, g_db, &in, err, sizeof err)) return -1;
    for (size_t c = 0; c < in->n_cells; c++)
        for (size_t i = 0; i < in->cells[c].n_pairs; i++)
            for (int m = 0; m < CAL_M__N; m++) {
                cal_better bt = cal_metric_get((cal_metric)m)->better;
                if (bt == CAL_BETTER_HIGHER) in->cells[c].b[i][m] *= 1 - d;
                else if (bt == CAL_BETTER_LOWER) in->cells[c].b[i][m] /= 1 - d;
            }
    cal_gate_outcome *o = NULL;
    int v = -1;
    if (cal_gate_eval(in, b, nb, CAL_GATE_ALPHA, &o) == CAL_OK) v = (int)o->verdict;
    cal_gate_outcome_free(&o);
    cal_gate_input_free(&in);
    return v;
}

static void print_rate(const char *what, size_t k, size_t n, const char *extra)
{
    double lo = NAN, hi = NAN;
    if (n) cal_stats_wilson(k, n, 0.95, &lo, &hi);
    printf("%-44s %4zu / %-4zu = %5.1f %%  (95 %% CI %4.1f–%5.1f %%)%s\n", what, k, n,
           n ? 100.0 * (double)k / (double)n : NAN, 100 * lo, 100 * hi, extra ? extra : "");
    fflush(stdout);
}

static double median_copy(const double *x, size_t n)
{
    if (!n) return NAN;
    double *t = malloc(n * sizeof *t);
    if (!t) return NAN;
    memcpy(t, x, n * sizeof *t);
    double m = cal_stats_median(t, n);
    free(t);
    return m;
}

/* ---- --simulate --------------------------------------------------------------- */

static int simulate(int argc, char **argv, const cal_gate_bound *b, size_t nb, const char *bounds_words)
{
    /* the defaults: what the pinned A/A runs of docs/ci.md's table showed
     * (their paired ratios' MAD and tails, no process effect left) */
    gsim_model m = {.tau = 0.03, .burst_p = 0.05, .burst_mean = 0.2, .sigma = 0.06, .sigma_lat = 0.2,
                    .proc_sd = 0, .pairs = 30};
    long runs = 2000;
    double alpha = CAL_GATE_ALPHA, drop = NAN;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--runs")) runs = atol(v);
        else if (!strcmp(k, "--pairs")) m.pairs = atoi(v);
        else if (!strcmp(k, "--tau")) m.tau = atof(v);
        else if (!strcmp(k, "--burst-p")) m.burst_p = atof(v);
        else if (!strcmp(k, "--burst-mean")) m.burst_mean = atof(v);
        else if (!strcmp(k, "--sigma")) m.sigma = atof(v);
        else if (!strcmp(k, "--proc-sd")) m.proc_sd = atof(v);
        else if (!strcmp(k, "--sigma-lat")) m.sigma_lat = atof(v);
        else if (!strcmp(k, "--alpha")) alpha = atof(v);
        else if (!strcmp(k, "--drop")) drop = atof(v);
        else if (!strcmp(k, "--box") || !strcmp(k, "--fail")) continue;   /* read by main */
        else { fprintf(stderr, "gate --simulate: unknown flag %s\n", k); return 2; }
    }
    if (runs < 10 || m.pairs < 1 || m.pairs > CAL_GATE_MAX_SHOTS || !(m.tau >= 0) || !(m.sigma >= 0) ||
        !(m.burst_p >= 0 && m.burst_p <= 1) || !(m.burst_mean >= 0) || !(m.proc_sd >= 0) || !(m.sigma_lat >= 0) || !(alpha > 0 && alpha < 0.5)) {
        fprintf(stderr, "gate --simulate: --runs >= 10, --pairs 1..%d, sds >= 0, --burst-p 0..1, "
                        "--alpha in (0, 0.5)\n", CAL_GATE_MAX_SHOTS);
        return 2;
    }
    double least = 1;
    for (size_t k = 0; k < nb; k++) if (b[k].bound < least) least = b[k].bound;
    if (!isfinite(drop)) drop = 2 * least;
    printf("bench/gate --simulate · %ld runs each · %d shot pairs · log sd of a shot %.3f, bursts %.0f %% "
           "of shots (mean %.3f), each speed %.3f, each latency %.3f, a process's own level %.3f · bounds "
           "%s · alpha %g family-wise\n", runs, m.pairs, m.tau, 100 * m.burst_p, m.burst_mean, m.sigma,
           m.sigma_lat > 0 ? m.sigma_lat : m.sigma, m.proc_sd, bounds_words, alpha);
    const double drops[] = {0, least, drop};
    const char *names[] = {"A/A (no change)", "at the bound",
                           fabs(drop - 2 * least) < 1e-9 ? "at 2x the bound" : "at the --drop"};
    for (int d = 0; d < 3; d++) {
        gsim x = {.seed = 1234567 + (uint64_t)d, .m = m};
        size_t fail = 0, cannot = 0, pass = 0;
        for (long r = 0; r < runs; r++) {
            cal_gate_verdict v;
            if (gsim_run(&x, drops[d], b, nb, alpha, &v, NULL)) return 1;
            fail += v == CAL_GATE_FAIL;
            cannot += v == CAL_GATE_UNDECIDED;
            pass += v == CAL_GATE_PASS;
        }
        char head[96];
        snprintf(head, sizeof head, "%s, B %.0f %% slower: exit 1", names[d], 100 * drops[d]);
        print_rate(head, fail, (size_t)runs, d == 0 ? "   goal ≤ 5 %" : d == 2 ? "   goal ≥ 90 %" : "");
        snprintf(head, sizeof head, "%*s exit 3", (int)strlen(names[d]) + 1, "");
        print_rate(head, cannot, (size_t)runs, NULL);
        snprintf(head, sizeof head, "%*s exit 0", (int)strlen(names[d]) + 1, "");
        print_rate(head, pass, (size_t)runs, d == 2 ? "   (a pass at 2x the bound is wrong)" : NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *fail = NULL, *box = "cpu";
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--fail")) fail = argv[i + 1];
        if (!strcmp(argv[i], "--box")) box = argv[i + 1];
    }
    cal_gate_bound b[CAL_GATE_MAX_BOUNDS];
    size_t nb = 0;
    char err[512];
    cal_gate_box bx;
    if (cal_gate_box_parse(box, &bx)) { fprintf(stderr, "gate: --box %s: cpu or gpu\n", box); return 2; }
    if (fail) {
        if (cal_gate_parse_bounds(fail, b, CAL_GATE_MAX_BOUNDS, &nb, err, sizeof err)) {
            fprintf(stderr, "gate: --fail: %s\n", err);
            return 2;
        }
    } else {
        nb = cal_gate_default_bounds(bx, b, CAL_GATE_MAX_BOUNDS);
    }
    char words[400] = "";
    size_t used = 0;
    for (size_t k = 0; k < nb && used < sizeof words; k++) {
        char s[64];
        used += (size_t)snprintf(words + used, sizeof words - used, "%s%s", k ? "," : "",
                                 cal_gate_bound_spec(&b[k], s, sizeof s));
    }
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--simulate")) {
            for (int k = i; k + 1 < argc; k++) argv[k] = argv[k + 1];
            return simulate(argc - 1, argv, b, nb, words);
        }
    long n_aa = 80, n_ab = 40;
    double drop = NAN;
    const char *from = NULL;   /* --from-db: judge the runs a store already holds */
    double shift = NAN;        /* --shift D: the A/A runs again, B made D slower */
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--caliper")) g_caliper = v;
        else if (!strcmp(k, "--aa")) n_aa = atol(v);
        else if (!strcmp(k, "--ab")) n_ab = atol(v);
        else if (!strcmp(k, "--shots")) g_shots = atol(v);
        else if (!strcmp(k, "--requests")) g_requests = atol(v);
        else if (!strcmp(k, "--max-tokens")) g_max_tokens = atol(v);
        else if (!strcmp(k, "--prompt-tokens")) g_prompt = atol(v);
        else if (!strcmp(k, "--preset")) g_preset = v;
        else if (!strcmp(k, "--drop")) drop = atof(v);
        else if (!strcmp(k, "--db")) g_db = v;
        else if (!strcmp(k, "--port")) g_port = atoi(v);
        else if (!strcmp(k, "--pin")) g_pin = atoi(v);
        else if (!strcmp(k, "--from-db")) from = g_db = v;
        else if (!strcmp(k, "--shift")) shift = atof(v);
        else if (!strcmp(k, "--quota-period-ms")) g_period_us = (long)(atof(v) * 1000);
        else if (!strcmp(k, "--fail") || !strcmp(k, "--box")) continue;
        else { fprintf(stderr, "gate: unknown flag %s\n", k); return 2; }
    }
    if (n_aa < 0 || n_ab < 0 || g_shots < 3 || g_requests < 1 || g_period_us < 1000 ||
        g_period_us > 1000000 || g_port < 1024 || g_port > 65000) {
        fprintf(stderr, "gate: --aa, --ab >= 0, --shots >= 3, --requests >= 1, --quota-period-ms "
                        "1..1000, --port 1024..65000\n");
        return 2;
    }
    double least = 1;
    for (size_t k = 0; k < nb; k++) if (b[k].bound < least) least = b[k].bound;
    if (!isfinite(drop)) drop = 2 * least;
    /* --from-db: the A/A and A/B runs an earlier bench/gate stored, judged
     * again (another --fail or --box on the same runs); none is measured */
    char (*labels)[48] = NULL;
    int *slows = NULL;
    size_t n_from = 0;
    if (from) {
        cal_store *st = NULL;
        cal_run *rs = NULL;
        size_t nr = 0;
        if (cal_store_open_ex(from, CAL_STORE_READONLY, &st, err, sizeof err) ||
            cal_store_list_runs(st, 0, &rs, &nr)) {
            fprintf(stderr, "gate: --from-db %s: %s\n", from, err);
            cal_store_close(&st);
            return 1;
        }
        labels = calloc(nr ? nr : 1, sizeof *labels);
        slows = calloc(nr ? nr : 1, sizeof *slows);
        if (!labels || !slows) return 1;
        for (size_t i = nr; i-- > 0;) {   /* oldest first */
            const char *l = rs[i].label;
            if (!l || (strncmp(l, "aa-", 3) && strncmp(l, "ab-", 3))) continue;
            snprintf(labels[n_from], sizeof labels[n_from], "%s", l);
            slows[n_from++] = l[1] == 'b';
        }
        cal_store_runs_free(rs, nr);
        cal_store_close(&st);
        n_aa = n_ab = 0;
        for (size_t i = 0; i < n_from; i++) { if (slows[i]) n_ab++; else n_aa++; }
    } else {
        unlink(g_db);
    }
    int can_slow = from || (geteuid() == 0 && quota_setup() == 0 && quota_set(1) == 0);
    if (n_ab && !can_slow) {
        fprintf(stderr, "gate: the A/B runs need a writable cgroup cpu controller (root); --ab 0 "
                        "measures the A/A runs alone\n");
        return 1;
    }
    double load0 = loadavg();
    if (from)
        printf("bench/gate --from-db %s · %ld A/A and %ld A/B runs stored by an earlier bench/gate, "
               "judged again · caliper gate, bounds %s, alpha %g family-wise\n", from, n_aa, n_ab, words,
               CAL_GATE_ALPHA);
    else
    printf("bench/gate · caliper run --ab --launch 'caliper serve --preset %s --threads 1' (twice) "
           "--warmup 1 --shots %ld --requests %ld --concurrency 1 --prompt-tokens %ld --max-tokens %ld "
           "%s· caliper gate, bounds %s, alpha %g family-wise · load average %.1f on %ld CPUs\n",
           g_preset, g_shots, g_requests, g_prompt, g_max_tokens, g_pin >= 0 ? "· both engines pinned to one CPU (taskset) " : "",
           words, CAL_GATE_ALPHA, load0,
           sysconf(_SC_NPROCESSORS_ONLN));
    size_t cap = (size_t)(n_aa + n_ab + 1) * (size_t)(g_shots + 1);
    double *dr[CAL_GATE_MAX_BOUNDS];
    size_t ndr[CAL_GATE_MAX_BOUNDS] = {0};
    for (size_t k = 0; k < nb; k++) if (!(dr[k] = malloc(cap * sizeof **dr))) return 1;
    double *eff_ab[CAL_GATE_MAX_BOUNDS];
    size_t n_eff = 0;
    for (size_t k = 0; k < nb; k++) if (!(eff_ab[k] = malloc((size_t)(n_ab + 1) * sizeof **eff_ab))) return 1;
    /* one run to warm the machine's caches; not counted */
    double share = NAN;
    if (!from) run_ab("warm-up", 1, &share);
    size_t aa[4] = {0}, ab[4] = {0}, naa = 0, nab = 0;   /* by exit 0, 1, 3, other */
    size_t aa_improved = 0, sh[4] = {0}, nsh = 0;   /* --shift: by verdict pass, fail, cannot */
    double share_sum = 0;
    size_t share_n = 0;
    /* A/A and A/B runs interleaved, so both see the same spells of load */
    size_t n_iter = from ? n_from : (size_t)(n_aa > n_ab ? n_aa : n_ab);
    for (size_t i = 0; i < n_iter; i++)
        for (int slow = 0; slow < 2; slow++) {
            char label[48];
            if (from) {
                if (slow != slows[i]) continue;
                snprintf(label, sizeof label, "%s", labels[i]);
            } else {
                if ((long)i >= (slow ? n_ab : n_aa)) continue;
                snprintf(label, sizeof label, "%s-%zu", slow ? "ab" : "aa", i);
                if (run_ab(label, slow ? 1 - drop : 1, &share)) continue;
            }
            if (slow && isfinite(share)) { share_sum += share; share_n++; }
            double eff[CAL_GATE_MAX_BOUNDS];
            size_t ne = 0;
            int improved = 0;
            int rc = gate_of(label, fail, box, eff, CAL_GATE_MAX_BOUNDS, &ne, &improved);
            int bin = rc == 0 ? 0 : rc == 1 ? 1 : rc == 3 ? 2 : 3;
            if (slow) { ab[bin]++; nab++; } else { aa[bin]++; naa++; aa_improved += improved != 0; }
            if (!slow && shift > 0 && shift < 1) {
                int v = shifted_verdict(label, shift, b, nb);
                sh[v < 0 ? 3 : v]++;
                nsh++;
            }
            if (slow && ne == nb) { for (size_t k = 0; k < nb; k++) eff_ab[k][n_eff] = eff[k]; n_eff++; }
            if (!slow) ratios_of(label, b, nb, dr, ndr, cap);
            fprintf(stderr, "gate bench: %s exit %d (load %.1f)\n", label, rc, loadavg());
        }
    quota_teardown();
    printf("\nA/A: the built-in engine against itself\n");
    print_rate("  false alarms (exit 1)", aa[1], naa, "   goal ≤ 5 %");
    print_rate("  cannot judge (exit 3)", aa[2], naa, NULL);
    print_rate("  pass (exit 0)", aa[0], naa, NULL);
    if (aa[3]) print_rate("  other exit (a failed gate)", aa[3], naa, NULL);
    print_rate("  an improvement claimed (any metric)", aa_improved, naa, "   goal ≤ 5 %");
    if (n_ab) {
        char extra[300] = "";
        size_t used2 = 0;
        used2 += (size_t)snprintf(extra, sizeof extra, "   goal ≥ 90 %%; measured slowdown (median of "
                                  "the runs' estimates):");
        for (size_t k = 0; k < nb && used2 < sizeof extra; k++)
            used2 += (size_t)snprintf(extra + used2, sizeof extra - used2, " %s %+.1f %%",
                                      cal_metric_get(b[k].metric)->name, 100 * median_copy(eff_ab[k], n_eff));
        if (from) printf("\nA/B: as stored (B's CPU cut by the quota of the run that made them)\n");
        else
        printf("\nA/B: B's CPU cut to %.0f %% of its share in shots 1-2 (mean share %.2f of a core); the "
               "slowdown it made is the runs' own estimate, beside the rate (2x the smallest bound is "
               "%.0f %%)\n", 100 * (1 - drop), share_n ? share_sum / (double)share_n : NAN, 200 * least);
        print_rate("  detection (exit 1)", ab[1], nab, extra);
        print_rate("  cannot judge (exit 3)", ab[2], nab, NULL);
        print_rate("  wrong pass (exit 0)", ab[0], nab, NULL);
        if (ab[3]) print_rate("  other exit (a failed gate)", ab[3], nab, NULL);
    }
    if (nsh) {
        printf("\nA/A runs with B made %.0f %% slower after the fact (their own noise, a known "
               "effect: speeds x %.2f, latencies / %.2f)\n", 100 * shift, 1 - shift, 1 - shift);
        print_rate("  detection (exit 1)", sh[CAL_GATE_FAIL], nsh, "   goal ≥ 90 %");
        print_rate("  cannot judge (exit 3)", sh[CAL_GATE_UNDECIDED], nsh, NULL);
        print_rate("  wrong pass (exit 0)", sh[CAL_GATE_PASS], nsh, NULL);
    }
    /* the noise these runs showed: the simulation's parameters */
    printf("\nnoise of the A/A runs' paired log ratios (per quoted shot pair):\n");
    for (size_t k = 0; k < nb; k++) {
        size_t n = ndr[k];
        if (n < 3) continue;
        double sd = cal_stats_sd(dr[k], n), med = median_copy(dr[k], n);
        double *t = malloc(n * sizeof *t);
        if (!t) continue;
        for (size_t i = 0; i < n; i++) t[i] = fabs(dr[k][i] - med);
        double mad = 1.4826 * cal_stats_median(t, n);
        size_t out = 0;
        for (size_t i = 0; i < n; i++) out += fabs(dr[k][i] - med) > 3 * mad;
        free(t);
        printf("  %-40s sd %.3f  1.4826 MAD %.3f  beyond 3 MAD %.1f %% of %zu pairs\n",
               cal_metric_get(b[k].metric)->name, sd, mad, 100.0 * (double)out / (double)n, n);
    }
    printf("load average: %.1f at the start, %.1f at the end\n", load0, loadavg());
    for (size_t k = 0; k < nb; k++) { free(dr[k]); free(eff_ab[k]); }
    free(labels);
    free(slows);
    return 0;
}
