/* caliper telemetry — Linux CPU backends: per-core clock from cpufreq
 * (scaling_cur_freq, kHz), /proc/cpuinfo "cpu MHz" only where it moves, and
 * the thermal-throttle event counters (Intel therm_throt). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "caliper/error.h"
#include "tel_internal.h"
#include "lib/util/c_locale.h"

#define MAX_CPUS 1024

/* CPU numbers under ROOT/sys/devices/system/cpu that have `rel` (e.g.
 * "cpufreq/scaling_cur_freq"), sorted. Returns count, or -errno of the dir. */
static int list_cpus(const tel_ctx *ctx, const char *rel, int *cpus, int cap)
{
    char dir[700];
    tel_path(ctx, dir, sizeof dir, "/sys/devices/system/cpu");
    DIR *d = opendir(dir);
    if (!d) return -errno;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        int c;
        char tail;
        if (sscanf(de->d_name, "cpu%d%c", &c, &tail) != 1 || c < 0) continue;
        char p[1200];
        int w = snprintf(p, sizeof p, "%s/%s/%s", dir, de->d_name, rel);
        if (w > 0 && (size_t)w < sizeof p && access(p, F_OK) == 0) cpus[n++] = c;
    }
    closedir(d);
    for (int i = 1; i < n; i++)    /* insertion sort: n is small */
        for (int j = i; j > 0 && cpus[j - 1] > cpus[j]; j--) {
            int x = cpus[j]; cpus[j] = cpus[j - 1]; cpus[j - 1] = x;
        }
    return n;
}

/* ---- cpufreq ---- */
typedef struct cpufreq_state { int n; int cpu[MAX_CPUS]; int fd[MAX_CPUS]; } cpufreq_state;

static void cpufreq_close(void *st)
{
    cpufreq_state *s = st;
    for (int i = 0; i < s->n; i++) if (s->fd[i] >= 0) close(s->fd[i]);
    free(s);
}

static int cpufreq_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    cpufreq_state *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    char p[800];
    int n = list_cpus(ctx, "cpufreq/scaling_cur_freq", s->cpu, MAX_CPUS);
    if (n < 0) {
        free(s);
        return tel_why_errno(n, tel_path(ctx, p, sizeof p, "/sys/devices/system/cpu"), NULL, why, wn);
    }
    if (n == 0) {
        free(s);
        snprintf(why, wn, "no such file: %s (no cpufreq driver: a VM, or cpufreq disabled)",
                 tel_path(ctx, p, sizeof p, "/sys/devices/system/cpu/cpu*/cpufreq/scaling_cur_freq"));
        return CAL_EABSENT;
    }
    for (int i = 0; i < n; i++) {
        tel_path(ctx, p, sizeof p, "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", s->cpu[i]);
        s->fd[i] = tel_open(p);
        if (s->fd[i] < 0) {
            int e = s->fd[i];
            s->n = i;
            cpufreq_close(s);
            return tel_why_errno(e, p, "run as root or make the file readable", why, wn);
        }
        s->n = i + 1;
    }
    snprintf(why, wn, "%d cores, scaling_cur_freq", n);
    *state = s;
    return CAL_OK;
}

static void cpufreq_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    (void)ctx;
    cpufreq_state *s = st;
    double sum = 0, mn = INFINITY;
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        uint64_t khz;
        if (tel_pread_u64(s->fd[i], &khz) != 0 || khz == 0) continue; /* idle/nohz: no reading */
        double mhz = (double)khz / 1000.0;
        tel_emit(e, "MHz", mhz, "cpu%d_mhz", s->cpu[i]);
        sum += mhz;
        if (mhz < mn) mn = mhz;
        k++;
    }
    if (k) {
        tel_emit(e, "MHz", sum / k, "cpu_mhz_mean");
        tel_emit(e, "MHz", mn, "cpu_mhz_min");
    }
}

const tel_backend_ops tel_cpufreq_ops = {
    "cpufreq", "per-core CPU clock (cpufreq scaling_cur_freq)",
    cpufreq_probe, cpufreq_read, cpufreq_close,
};

/* ---- /proc/cpuinfo ---- */
typedef struct cpuinfo_state { char path[700]; double last[MAX_CPUS]; int n; } cpuinfo_state;

/* "cpu MHz : 2596.140" per processor, in order. Returns count. */
static int parse_cpuinfo(const char *path, double *mhz, int cap)
{
    FILE *f = fopen(path, "re");
    if (!f) return -errno;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        if (strncmp(line, "cpu MHz", 7) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        char *end;
        double v = cal_strtod(c + 1, &end);
        if (end != c + 1 && v > 0) mhz[n++] = v;
    }
    fclose(f);
    return n;
}

static int cpuinfo_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    char p[800];
    if (access(tel_path(ctx, p, sizeof p, "/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq"), F_OK) == 0) {
        snprintf(why, wn, "cpufreq is present and preferred");
        return CAL_EABSENT;
    }
    cpuinfo_state *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    tel_path(ctx, s->path, sizeof s->path, "/proc/cpuinfo");
    double a[MAX_CPUS], b[MAX_CPUS];   /* 16 KiB, probe only */
    int n = parse_cpuinfo(s->path, a, MAX_CPUS);
    if (n <= 0) {
        int rc = n < 0 ? tel_why_errno(n, s->path, NULL, why, wn) : CAL_EABSENT;
        if (n == 0) snprintf(why, wn, "no \"cpu MHz\" lines in %s", s->path);
        free(s);
        return rc;
    }
    /* A value that never moves is the nominal rate (no APERF/MPERF, a VM),
     * not a measurement: read a few times and keep it only if it changes. */
    int moved = 0;
    for (int r = 0; r < 5 && !moved; r++) {
        struct timespec ts = { 0, 8000000 };
        nanosleep(&ts, NULL);
        int m = parse_cpuinfo(s->path, b, MAX_CPUS);
        for (int i = 0; i < m && i < n; i++) if (b[i] != a[i]) moved = 1;
    }
    if (!moved) {
        cal_snprintf(why, wn, "static: \"cpu MHz\" reads %.3f on every read of %s; "
                 "a nominal value, not a measurement", a[0], s->path);
        free(s);
        return CAL_EABSENT;
    }
    s->n = n;
    snprintf(why, wn, "%d cpus, \"cpu MHz\" moves between reads", n);
    *state = s;
    return CAL_OK;
}

static void cpuinfo_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    (void)ctx;
    cpuinfo_state *s = st;
    double v[MAX_CPUS];
    int n = parse_cpuinfo(s->path, v, MAX_CPUS);
    if (n <= 0) return;
    double sum = 0, mn = INFINITY;
    for (int i = 0; i < n; i++) {
        tel_emit(e, "MHz", v[i], "cpu%d_mhz", i);
        sum += v[i];
        if (v[i] < mn) mn = v[i];
    }
    tel_emit(e, "MHz", sum / n, "cpu_mhz_mean");
    tel_emit(e, "MHz", mn, "cpu_mhz_min");
}

static void cpuinfo_close(void *st) { free(st); }

const tel_backend_ops tel_cpuinfo_ops = {
    "cpuinfo", "CPU clock from /proc/cpuinfo, only where it moves",
    cpuinfo_probe, cpuinfo_read, cpuinfo_close,
};

/* ---- thermal_throttle counters ---- */
typedef struct thr_state {
    int n; int core_fd[MAX_CPUS]; int pkg_fd[MAX_CPUS];
    int primed; double last_total;
} thr_state;

static void thr_close(void *st)
{
    thr_state *s = st;
    for (int i = 0; i < s->n; i++) {
        if (s->core_fd[i] >= 0) close(s->core_fd[i]);
        if (s->pkg_fd[i] >= 0) close(s->pkg_fd[i]);
    }
    free(s);
}

static int thr_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    int *cpus = calloc(MAX_CPUS, sizeof *cpus);
    thr_state *s = calloc(1, sizeof *s);
    char p[800];
    if (!cpus || !s) { free(cpus); free(s); return CAL_ENOMEM; }
    int n = list_cpus(ctx, "thermal_throttle/core_throttle_count", cpus, MAX_CPUS);
    if (n <= 0) {
        free(cpus); free(s);
        if (n < 0)
            return tel_why_errno(n, tel_path(ctx, p, sizeof p, "/sys/devices/system/cpu"), NULL, why, wn);
        snprintf(why, wn, "no such file: %s (Intel therm_throt only)",
                 tel_path(ctx, p, sizeof p, "/sys/devices/system/cpu/cpu*/thermal_throttle"));
        return CAL_EABSENT;
    }
    for (int i = 0; i < n; i++) {
        tel_path(ctx, p, sizeof p, "/sys/devices/system/cpu/cpu%d/thermal_throttle/core_throttle_count", cpus[i]);
        s->core_fd[i] = tel_open(p);
        tel_path(ctx, p, sizeof p, "/sys/devices/system/cpu/cpu%d/thermal_throttle/package_throttle_count", cpus[i]);
        s->pkg_fd[i] = tel_open(p);
        s->n = i + 1;
        if (s->core_fd[i] < 0) {
            int e = s->core_fd[i];
            thr_close(s); free(cpus);
            return tel_why_errno(e, p, NULL, why, wn);
        }
    }
    snprintf(why, wn, "%d cpus, core/package throttle counts", n);
    free(cpus);
    *state = s;
    return CAL_OK;
}

static void thr_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    (void)ctx;
    thr_state *s = st;
    double core = 0, pkg = 0;
    int got = 0;
    for (int i = 0; i < s->n; i++) {
        uint64_t v;
        if (tel_pread_u64(s->core_fd[i], &v) == 0) { core += (double)v; got = 1; }
        /* The package counter repeats on every CPU of a package: keep the max. */
        if (s->pkg_fd[i] >= 0 && tel_pread_u64(s->pkg_fd[i], &v) == 0 && (double)v > pkg) pkg = (double)v;
    }
    if (!got) return;
    tel_emit(e, "count", core, "cpu_core_throttle_count");
    tel_emit(e, "count", pkg, "cpu_package_throttle_count");
    double total = core + pkg;
    if (s->primed) tel_emit(e, "count", total - s->last_total, "cpu_throttle_events");
    s->last_total = total;
    s->primed = 1;
}

const tel_backend_ops tel_throttle_ops = {
    "throttle", "Linux thermal-throttle event counters (cpu*/thermal_throttle)",
    thr_probe, thr_read, thr_close,
};
