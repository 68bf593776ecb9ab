/* Unit tests: every telemetry parser on captured sysfs/procfs trees
 * (tests/data/sysfs), RAPL wraparound, cpuinfo only where it moves, the NVML
 * backend against libnvmlmock.so, window statistics and energy, the sampler
 * thread under concurrent readers, and "absent, never zero" on this host. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "platform_skip.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/telemetry.h"
#include "lib/telemetry/tel_internal.h"

/* Test paths are short; a truncated one fails its assertion anyway. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define NEAR(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

static char g_data[PATH_MAX];   /* tests/data/sysfs */
static char g_mock[PATH_MAX];   /* $BUILD/tests/helpers/libnvmlmock.so */
static const char *NO_NVML = "/nonexistent/libnvidia-ml.so.1";

static void tree(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_data, name); }

/* A scratch copy of a tree that a test may rewrite. */
static void copy_tree(const char *name, char *out, size_t n)
{
    char src[PATH_MAX], cmd[3 * PATH_MAX];
    tree(src, sizeof src, name);
    snprintf(out, n, "/tmp/caliper-tel-%d-%s", (int)getpid(), name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", out, src, out);
    assert_int_equal(system(cmd), 0);
}

static void rm_tree(const char *p)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    assert_int_equal(system(cmd), 0);
}

static void write_file(const char *root, const char *rel, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");     /* same inode: the backend's open fd sees it */
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const cal_tel_backend_info *info(cal_tel *t, const char *name)
{
    const cal_tel_backend_info *bi;
    size_t n = cal_tel_backends(t, &bi);
    for (size_t i = 0; i < n; i++) if (strcmp(bi[i].name, name) == 0) return &bi[i];
    fail_msg("no backend %s", name);
    return NULL;
}

/* The latest value of a metric, or NAN. */
static double latest(cal_tel *t, const char *metric)
{
    static cal_tel_sample s[4096];
    size_t n = cal_tel_latest(t, s, 4096);
    for (size_t i = 0; i < n; i++) if (strcmp(s[i].metric, metric) == 0) return s[i].value;
    return NAN;
}

static int has_prefix_metric(cal_tel *t, const char *prefix)
{
    static cal_tel_sample s[4096];
    size_t n = cal_tel_latest(t, s, 4096);
    for (size_t i = 0; i < n; i++) if (strncmp(s[i].metric, prefix, strlen(prefix)) == 0) return 1;
    return 0;
}

static void test_intel_desktop_tree(void **st)
{
    (void)st;
    SKIP_UNLESS_PLATFORM("linux", "captured Linux trees (cpufreq, /proc/cpuinfo, /proc/PID)");
    setenv("CALIPER_NVML_LIB", NO_NVML, 1);
    char root[PATH_MAX];
    tree(root, sizeof root, "intel_desktop");
    cal_tel_config cfg = { .root = root, .pid = 4242 };
    cal_tel *t = NULL;
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    assert_true(info(t, "cpufreq")->available);
    assert_non_null(strstr(info(t, "cpufreq")->reason, "4 cores"));
    assert_false(info(t, "cpuinfo")->available);
    assert_non_null(strstr(info(t, "cpuinfo")->reason, "cpufreq is present"));
    assert_true(info(t, "rapl")->available);
    assert_non_null(strstr(info(t, "rapl")->reason, "5 zones"));
    assert_true(info(t, "hwmon")->available);
    assert_true(info(t, "thermal")->available);
    assert_true(info(t, "throttle")->available);
    assert_false(info(t, "nvml")->available);
    assert_int_equal(info(t, "nvml")->err, CAL_EABSENT);
    assert_false(info(t, "amdgpu")->available);
    assert_non_null(strstr(info(t, "amdgpu")->reason, "no such file"));
    assert_false(info(t, "apple")->available);
    assert_string_equal(info(t, "apple")->reason, "not macOS");
    assert_true(info(t, "process")->available);
    char src[256];
    assert_string_equal(cal_tel_sources(t, src, sizeof src), "cpufreq,rapl,hwmon,thermal,throttle,process");

    assert_true(cal_tel_tick(t) > 0);
    /* cpufreq: kHz → MHz, per core, mean and min */
    NEAR(latest(t, "cpu0_mhz"), 3600, 1e-9);
    NEAR(latest(t, "cpu2_mhz"), 800, 1e-9);
    NEAR(latest(t, "cpu_mhz_mean"), 3000, 1e-9);
    NEAR(latest(t, "cpu_mhz_min"), 800, 1e-9);
    /* RAPL: the first read only primes power; cumulative energy starts at 0 */
    assert_true(isnan(latest(t, "package_w")));
    NEAR(latest(t, "package_energy_j"), 0, 1e-12);
    /* hwmon: m°C, µW, RPM; duplicate chip names are told apart */
    NEAR(latest(t, "acpitz_temp1_c"), 27.8, 1e-9);
    NEAR(latest(t, "coretemp_temp1_c"), 61.0, 1e-9);
    NEAR(latest(t, "coretemp_temp3_c"), 59.5, 1e-9);
    NEAR(latest(t, "nct6775_fan1_rpm"), 1215, 1e-9);
    NEAR(latest(t, "nct6775_fan2_rpm"), 0, 1e-9);   /* a real stopped fan, read as 0 */
    NEAR(latest(t, "nvme_temp1_c"), 38.85, 1e-9);
    NEAR(latest(t, "nvme4_temp1_c"), 41.85, 1e-9);
    NEAR(latest(t, "bat0_power1_w"), 12.345, 1e-9);
    /* thermal zones */
    NEAR(latest(t, "tz0_x86_pkg_temp_c"), 61.0, 1e-9);
    NEAR(latest(t, "tz1_acpitz_c"), 27.8, 1e-9);
    /* throttle counters: core summed, package once; events only from the 2nd read */
    NEAR(latest(t, "cpu_core_throttle_count"), 0 + 3 + 6 + 9, 1e-9);
    NEAR(latest(t, "cpu_package_throttle_count"), 17, 1e-9);
    assert_true(isnan(latest(t, "cpu_throttle_events")));
    /* process: VmRSS kB, utime+stime ticks, threads; comm with spaces and ')' */
    NEAR(latest(t, "rss_bytes"), 1649380.0 * 1024, 1e-3);
    NEAR(latest(t, "cpu_time_s"), (1234 + 567) / (double)sysconf(_SC_CLK_TCK), 1e-9);
    NEAR(latest(t, "threads"), 17, 1e-9);
    /* the OS throttle state: counters, no events yet → -1 (no window events) */
    assert_true(cal_tel_tick(t) > 0);
    char words[128];
    assert_int_equal(cal_tel_window_os_throttle(t, 0, INT64_MAX, words, sizeof words), 0);
    assert_non_null(strstr(words, "Linux: 0 throttle events"));
    char m[64];
    assert_int_equal(cal_tel_pick_clock(t, m, sizeof m), CAL_OK);
    assert_string_equal(m, "cpu_mhz_mean");
    assert_int_equal(cal_tel_pick_power(t, m, sizeof m), CAL_OK);
    assert_string_equal(m, "package_w");
    cal_tel_close(&t);
    assert_null(t);
}

static void test_rapl_wraparound(void **st)
{
    (void)st;
    SKIP_UNLESS_PLATFORM("linux", "captured Linux trees (cpufreq, /proc/cpuinfo, /proc/PID)");
    assert_int_equal(cal_tel_wrap_delta(100, 250, 1000), 150);
    assert_int_equal(cal_tel_wrap_delta(900, 50, 1000), 150);
    assert_int_equal(cal_tel_wrap_delta(900, 50, 0), 0);      /* no range: a reset, not negative */
    assert_int_equal(cal_tel_wrap_delta(262143000000ULL, 1000000ULL, 262143328850ULL), 1328850ULL);

    char root[PATH_MAX];
    copy_tree("intel_desktop", root, sizeof root);
    cal_tel_config cfg = { .root = root, .only = "rapl,throttle" };
    cal_tel *t = NULL;
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    assert_false(info(t, "cpufreq")->available);
    assert_string_equal(info(t, "cpufreq")->reason, "not selected");
    int64_t t0 = cal_now_ns();
    assert_true(cal_tel_tick(t) > 0);
    /* package wraps past max_energy_range_uj; DRAM wraps at its own range; psys +3 J */
    write_file(root, "sys/class/powercap/intel-rapl:0/energy_uj", "1000000\n");
    write_file(root, "sys/class/powercap/intel-rapl:0:2/energy_uj", "2000000\n");
    write_file(root, "sys/class/powercap/intel-rapl:1/energy_uj", "903000000\n");
    write_file(root, "sys/class/powercap/intel-rapl:0:0/energy_uj", "100500000\n");
    write_file(root, "sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count", "5\n");
    cal_sleep_ns(20000000, NULL);
    assert_true(cal_tel_tick(t) > 0);
    int64_t t1 = cal_now_ns();
    NEAR(latest(t, "package_energy_j"), 1.328850, 1e-9);
    NEAR(latest(t, "dram_energy_j"), (65532610987.0 - 65532000000.0 + 2000000.0) / 1e6, 1e-9);
    NEAR(latest(t, "core_energy_j"), 0.5, 1e-9);
    NEAR(latest(t, "psys_energy_j"), 3.0, 1e-9);
    double w = latest(t, "package_w");
    assert_true(w > 1.32885 / 1.0 && w < 1.32885 / 0.019);   /* J over ~20 ms */
    NEAR(latest(t, "uncore_w"), 0, 1e-12);
    /* window energy prefers the whole-platform counter */
    double j;
    char src[128];
    assert_int_equal(cal_tel_window_energy(t, t0, t1, &j, src, sizeof src), CAL_OK);
    NEAR(j, 3.0, 1e-6);
    assert_string_equal(src, "psys_energy_j");
    cal_energy_per_token e;
    assert_int_equal(cal_tel_energy_per_token_window(t, t0, t1, 30, 6, &e), CAL_OK);
    NEAR(e.j_per_output_token, 0.5, 1e-6);
    NEAR(e.j_per_prompt_token, 0.1, 1e-6);
    /* throttle events: core count 3 → 5 */
    NEAR(latest(t, "cpu_throttle_events"), 2, 1e-9);
    char words[128];
    assert_int_equal(cal_tel_window_os_throttle(t, t0, t1, words, sizeof words), 1);
    cal_tel_close(&t);

    /* permission denied names the file and how to grant it (not testable as root) */
    if (geteuid() != 0) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/sys/class/powercap/intel-rapl:0/energy_uj", root);
        chmod(p, 0);
        cfg.only = "rapl";
        assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
        assert_non_null(strstr(info(t, "rapl")->reason, "root-only"));
        cal_tel_close(&t);
    }
    rm_tree(root);
}

static void test_why_texts(void **st)
{
    (void)st;
    char why[256];
    assert_int_equal(tel_why_errno(EACCES, "/sys/x/energy_uj", "run as root", why, sizeof why), CAL_EPERM);
    assert_string_equal(why, "permission denied: /sys/x/energy_uj; run as root");
    assert_int_equal(tel_why_errno(-ENOENT, "/sys/y", NULL, why, sizeof why), CAL_EABSENT);
    assert_string_equal(why, "no such file: /sys/y");
    assert_int_equal(tel_why_errno(ENODEV, "/dev/z", NULL, why, sizeof why), CAL_ENOTFOUND);
    assert_string_equal(why, "no device: /dev/z");
}

static void test_vm_tree_all_absent(void **st)
{
    (void)st;
    SKIP_UNLESS_PLATFORM("linux", "captured Linux trees (cpufreq, /proc/cpuinfo, /proc/PID)");
    setenv("CALIPER_NVML_LIB", NO_NVML, 1);
    char root[PATH_MAX];
    tree(root, sizeof root, "vm_empty");
    cal_tel_config cfg = { .root = root };
    cal_tel *t = NULL;
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    const cal_tel_backend_info *bi;
    size_t n = cal_tel_backends(t, &bi);
    assert_int_equal(n, 10);
    for (size_t i = 0; i < n; i++) {
        assert_false(bi[i].available);
        assert_true(bi[i].reason[0] != 0);
        assert_int_not_equal(bi[i].err, CAL_OK);
    }
    /* the static cpuinfo is named for what it is */
    assert_non_null(strstr(info(t, "cpuinfo")->reason, "static"));
    assert_non_null(strstr(info(t, "cpuinfo")->reason, "2596.140"));
    assert_non_null(strstr(info(t, "thermal")->reason, "no thermal zones"));
    assert_non_null(strstr(info(t, "process")->reason, "no target process"));
    /* nothing to read: no sample, no invented zero */
    assert_int_equal(cal_tel_tick(t), 0);
    char m[64];
    assert_int_equal(cal_tel_pick_clock(t, m, sizeof m), CAL_ENOTFOUND);
    double j;
    assert_int_equal(cal_tel_window_energy(t, 0, INT64_MAX, &j, NULL, 0), CAL_ENOTFOUND);
    assert_true(isnan(j));
    assert_int_equal(cal_tel_window_os_throttle(t, 0, INT64_MAX, NULL, 0), -1);
    cal_tel_stat s;
    assert_int_equal(cal_tel_window(t, "cpu_mhz_mean", 0, INT64_MAX, &s), CAL_ENOTFOUND);
    assert_true(isnan(s.mean));
    /* a target appears later (the engine caliper launched) */
    assert_int_equal(cal_tel_set_pid(t, 99999), CAL_ENOTFOUND);
    assert_int_equal(cal_tel_set_pid(t, 77), CAL_OK);
    assert_true(info(t, "process")->available);
    assert_int_equal(cal_tel_tick(t), 3);
    NEAR(latest(t, "rss_bytes"), 520 * 1024.0, 1e-6);
    NEAR(latest(t, "threads"), 1, 1e-9);
    char src[64];
    assert_string_equal(cal_tel_sources(t, src, sizeof src), "process");
    cal_tel_close(&t);
    /* an unknown backend name is an error, not silence */
    cfg.only = "cpufreq,gpu";
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_EINVAL);
    assert_null(t);
}

/* Rewrites cpuinfo with a moving clock while the probe reads it; each
 * version is renamed into place so that no read sees a half-written file. */
static atomic_int g_stop_writer, g_writes;
static void *cpuinfo_writer(void *arg)
{
    const char *root = arg;
    int k = 0;
    while (!atomic_load(&g_stop_writer)) {
        char b[256];
        snprintf(b, sizeof b, "processor\t: 0\ncpu MHz\t\t: %d.000\n\nprocessor\t: 1\ncpu MHz\t\t: %d.500\n\n",
                 2000 + (k % 7) * 100, 2100 + (k % 5) * 100);
        write_file(root, "proc/cpuinfo.new", b);
        char a[PATH_MAX], c[PATH_MAX];
        snprintf(a, sizeof a, "%s/proc/cpuinfo.new", root);
        snprintf(c, sizeof c, "%s/proc/cpuinfo", root);
        if (rename(a, c) != 0) fail_msg("rename %s", a);
        atomic_fetch_add(&g_writes, 1);
        k++;
        sched_yield();
    }
    return NULL;
}

static void test_cpuinfo_moving(void **st)
{
    (void)st;
    SKIP_UNLESS_PLATFORM("linux", "captured Linux trees (cpufreq, /proc/cpuinfo, /proc/PID)");
    char root[PATH_MAX];
    copy_tree("vm_empty", root, sizeof root);
    static char rootbuf[PATH_MAX];
    snprintf(rootbuf, sizeof rootbuf, "%s", root);
    atomic_store(&g_stop_writer, 0);
    pthread_t th;
    atomic_store(&g_writes, 0);
    assert_int_equal(pthread_create(&th, NULL, cpuinfo_writer, rootbuf), 0);
    while (atomic_load(&g_writes) < 2) cal_sleep_ns(1000000, NULL);
    cal_tel_config cfg = { .root = root, .only = "cpuinfo" };
    cal_tel *t = NULL;
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    atomic_store(&g_stop_writer, 1);
    pthread_join(th, NULL);
    assert_true(info(t, "cpuinfo")->available);
    assert_non_null(strstr(info(t, "cpuinfo")->reason, "moves"));
    write_file(root, "proc/cpuinfo", "processor\t: 0\ncpu MHz\t\t: 1800.000\n\nprocessor\t: 1\ncpu MHz\t\t: 2200.000\n\n");
    assert_true(cal_tel_tick(t) > 0);
    NEAR(latest(t, "cpu0_mhz"), 1800, 1e-9);
    NEAR(latest(t, "cpu1_mhz"), 2200, 1e-9);
    NEAR(latest(t, "cpu_mhz_mean"), 2000, 1e-9);
    cal_tel_close(&t);
    rm_tree(root);
}

static void test_amdgpu_tree(void **st)
{
    (void)st;
    SKIP_UNLESS_PLATFORM("linux", "captured Linux trees (cpufreq, /proc/cpuinfo, /proc/PID)");
    setenv("CALIPER_NVML_LIB", NO_NVML, 1);
    char root[PATH_MAX];
    tree(root, sizeof root, "amdgpu_box");
    cal_tel_config cfg = { .root = root };
    cal_tel *t = NULL;
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    assert_true(info(t, "amdgpu")->available);
    assert_non_null(strstr(info(t, "amdgpu")->reason, "2 AMD GPUs"));
    assert_false(info(t, "cpuinfo")->available);      /* 3700.000 static */
    assert_non_null(strstr(info(t, "cpuinfo")->reason, "3700.000"));
    assert_true(info(t, "rapl")->available);
    assert_true(info(t, "hwmon")->available);
    assert_false(info(t, "cpufreq")->available);
    assert_true(cal_tel_tick(t) > 0);
    /* card0: hwmon freq1/freq2 (Hz) win over pp_dpm; µW; m°C */
    NEAR(latest(t, "amdgpu0_sclk_mhz"), 2480, 1e-9);
    NEAR(latest(t, "amdgpu0_mclk_mhz"), 1249, 1e-9);
    NEAR(latest(t, "amdgpu0_w"), 287, 1e-9);
    NEAR(latest(t, "amdgpu0_temp_c"), 61, 1e-9);
    NEAR(latest(t, "amdgpu0_junction_c"), 78, 1e-9);
    NEAR(latest(t, "amdgpu0_mem_temp_c"), 70, 1e-9);
    NEAR(latest(t, "amdgpu0_busy_pct"), 97, 1e-9);
    /* card1: older, only the starred pp_dpm level and power1_input */
    NEAR(latest(t, "amdgpu1_sclk_mhz"), 600, 1e-9);
    NEAR(latest(t, "amdgpu1_mclk_mhz"), 2000, 1e-9);
    NEAR(latest(t, "amdgpu1_w"), 45.5, 1e-9);
    NEAR(latest(t, "amdgpu1_temp_c"), 48, 1e-9);
    assert_true(isnan(latest(t, "amdgpu2_sclk_mhz")));   /* the Intel iGPU is not AMD */
    /* generic hwmon leaves amdgpu to its backend */
    NEAR(latest(t, "k10temp_temp1_c"), 72.125, 1e-9);
    NEAR(latest(t, "k10temp_temp3_c"), 70.5, 1e-9);
    assert_false(has_prefix_metric(t, "amdgpu_"));
    char m[64];
    assert_int_equal(cal_tel_pick_clock(t, m, sizeof m), CAL_OK);
    assert_string_equal(m, "amdgpu0_sclk_mhz");
    assert_int_equal(cal_tel_pick_power(t, m, sizeof m), CAL_OK);
    assert_string_equal(m, "amdgpu0_w");
    cal_tel_close(&t);
}

static void test_nvml_mock(void **st)
{
    (void)st;
    if (access(g_mock, R_OK) != 0) fail_msg("NVML stand-in not built: %s", g_mock);
    setenv("CALIPER_NVML_LIB", g_mock, 1);
    unsetenv("NVMLMOCK_INIT");
    setenv("NVMLMOCK_GPUS", "2", 1);
    cal_tel_config cfg = { .only = "nvml" };
    cal_tel *t = NULL;
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    assert_true(info(t, "nvml")->available);
    assert_non_null(strstr(info(t, "nvml")->reason, "2 GPUs (NVIDIA H200 (mock))"));
    int64_t ts[3];
    for (int i = 0; i < 3; i++) {
        ts[i] = cal_now_ns();
        assert_true(cal_tel_tick(t) > 0);
        cal_sleep_ns(2000000, NULL);
    }
    /* the last tick: step 2 of the script */
    NEAR(latest(t, "gpu0_sm_mhz"), 1410, 1e-9);
    NEAR(latest(t, "gpu1_sm_mhz"), 1420, 1e-9);
    NEAR(latest(t, "gpu0_mem_mhz"), 3201, 1e-9);
    NEAR(latest(t, "gpu0_w"), 698.5, 1e-9);
    NEAR(latest(t, "gpu1_w"), 697.5, 1e-9);
    NEAR(latest(t, "gpu0_energy_j"), 5350.0, 1e-9);
    NEAR(latest(t, "gpu0_temp_c"), 70, 1e-9);
    NEAR(latest(t, "gpu0_util_pct"), 100, 1e-9);
    NEAR(latest(t, "gpu0_mem_util_pct"), 63, 1e-9);
    NEAR(latest(t, "gpu0_power_limit_w"), 700, 1e-9);
    NEAR(latest(t, "gpu0_clocks_event_reasons"), 0x44, 1e-9);
    char words[200];
    assert_string_equal(cal_tel_nvml_reasons(0x44, words, sizeof words),
                        "SW power cap, HW thermal slowdown");
    /* window over the whole run: mean and min of the clock */
    cal_tel_stat s;
    int64_t end = cal_now_ns();
    assert_int_equal(cal_tel_window(t, "gpu0_sm_mhz", ts[0], end, &s), CAL_OK);
    assert_int_equal(s.n, 3);
    NEAR(s.mean, (1980 + 1755 + 1410) / 3.0, 1e-9);
    NEAR(s.min, 1410, 1e-9);
    NEAR(s.first, 1980, 1e-9);
    assert_string_equal(s.unit, "MHz");
    /* a shot between two readings gets the nearest one */
    assert_int_equal(cal_tel_window(t, "gpu0_sm_mhz", end + 1000, end + 2000, &s), CAL_OK);
    assert_int_equal(s.nearest, 1);
    NEAR(s.mean, 1410, 1e-9);
    /* energy between the first and third read: the counter, both GPUs */
    double j;
    char src[128];
    cal_tel_sample buf[64];
    uint64_t cur = 0, lost = 0;
    size_t k = cal_tel_read(t, &cur, buf, 64, &lost);
    assert_int_equal(lost, 0);
    assert_int_equal(cur, cal_tel_seq(t));
    int64_t r0 = 0, r2 = 0;
    for (size_t i = 0; i < k; i++)
        if (strcmp(buf[i].metric, "gpu0_energy_j") == 0) { if (!r0) r0 = buf[i].t_ns; r2 = buf[i].t_ns; }
    assert_int_equal(cal_tel_window_energy(t, r0, r2, &j, src, sizeof src), CAL_OK);
    assert_string_equal(src, "gpu0_energy_j+gpu1_energy_j");
    NEAR(j, 2 * 350.0, 1e-3);
    /* OS throttle state over the last two reads: SW power cap + HW thermal */
    assert_int_equal(cal_tel_window_os_throttle(t, ts[1], end, words, sizeof words), 1);
    assert_string_equal(words, "NVML: SW power cap, HW thermal slowdown");
    /* the first read alone: no reason bits → nominal */
    assert_int_equal(cal_tel_window_os_throttle(t, ts[0], ts[1] - 1, words, sizeof words), 0);
    /* and the frequency verdict from the measured clocks */
    cal_tel_stat c0, c1;
    assert_int_equal(cal_tel_window(t, "gpu0_sm_mhz", ts[0], ts[1] - 1, &c0), CAL_OK);
    assert_int_equal(cal_tel_window(t, "gpu0_sm_mhz", ts[2], end, &c1), CAL_OK);
    cal_freq_verdict v;
    assert_int_equal(cal_tel_freq_verdict(1000, 1000 * 1410 / 1980.0 * 1.01, c0.mean, c1.mean, 0, &v),
                     CAL_FREQ_EXPLAINED);
    cal_tel_close(&t);

    /* no device, and permission denied */
    setenv("NVMLMOCK_GPUS", "0", 1);
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    assert_false(info(t, "nvml")->available);
    assert_int_equal(info(t, "nvml")->err, CAL_ENOTFOUND);
    assert_non_null(strstr(info(t, "nvml")->reason, "no device"));
    cal_tel_close(&t);
    unsetenv("NVMLMOCK_GPUS");
    setenv("NVMLMOCK_INIT", "perm", 1);
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    assert_int_equal(info(t, "nvml")->err, CAL_EPERM);
    assert_non_null(strstr(info(t, "nvml")->reason, "/dev/nvidia"));
    cal_tel_close(&t);
    unsetenv("NVMLMOCK_INIT");
    setenv("CALIPER_NVML_LIB", NO_NVML, 1);
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    assert_non_null(strstr(info(t, "nvml")->reason, "no such library"));
    cal_tel_close(&t);
}

static void test_nvml_reason_words(void **st)
{
    (void)st;
    char b[256];
    assert_string_equal(cal_tel_nvml_reasons(0, b, sizeof b), "none");
    assert_string_equal(cal_tel_nvml_reasons(0x8, b, sizeof b), "HW slowdown");
    assert_string_equal(cal_tel_nvml_reasons(0x80 | 0x20, b, sizeof b),
                        "SW thermal slowdown, HW power brake");
    assert_string_equal(cal_tel_nvml_reasons(0x1 | 0x1000, b, sizeof b), "GPU idle, other 0x1000");
}

/* Readers hammer the queries while the thread fills a small ring. */
typedef struct reader_arg { cal_tel *t; atomic_int stop; size_t reads; uint64_t lost; } reader_arg;
static void *reader(void *p)
{
    reader_arg *a = p;
    cal_tel_sample buf[8];
    uint64_t cur = 0;
    int64_t last_t = 0;
    while (!atomic_load(&a->stop)) {
        size_t k = cal_tel_read(a->t, &cur, buf, 8, &a->lost);
        for (size_t i = 0; i < k; i++) {
            if (buf[i].t_ns < last_t) fail_msg("samples out of order");
            last_t = buf[i].t_ns;
        }
        a->reads += k;
        cal_tel_stat s;
        cal_tel_window(a->t, "rss_bytes", 0, INT64_MAX, &s);
        cal_tel_sample l[8];
        cal_tel_latest(a->t, l, 8);
        cal_tel_backend_info bi[16];
        /* Linux adds its CPU clock backends (cpufreq, cpuinfo, throttle) */
        size_t want = strcmp(cal_plat_name(), "linux") ? 7 : 10;
        if (cal_tel_backends_copy(a->t, bi, 16) != want) fail_msg("backend count");
        cal_sleep_ns(3000000, NULL);
    }
    return NULL;
}

static void test_sampler_thread(void **st)
{
    (void)st;
    SKIP_ON_PLATFORM("posix", "its samples are a process's readings");
    setenv("CALIPER_NVML_LIB", NO_NVML, 1);
    cal_tel_config cfg = { .interval_ns = 1000000, .ring_cap = 16, .pid = (int)getpid() };
    cal_tel *t = NULL;
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    assert_int_equal(cal_tel_interval_ns(t), CAL_TEL_INTERVAL_MIN_NS);   /* raised to 10 ms */
    reader_arg a = { .t = t };
    atomic_init(&a.stop, 0);
    pthread_t th;
    int64_t t0 = cal_now_ns();
    assert_int_equal(cal_tel_start(t), CAL_OK);
    assert_int_equal(cal_tel_start(t), CAL_EINVAL);
    assert_int_equal(cal_tel_tick(t), CAL_EINVAL);
    assert_int_equal(pthread_create(&th, NULL, reader, &a), 0);
    for (int i = 0; i < 5; i++) {   /* retarget while the thread and a reader run */
        cal_sleep_ns(50000000, NULL);
        assert_int_equal(cal_tel_set_pid(t, i % 2 ? (int)getpid() : (int)getppid()), CAL_OK);
    }
    atomic_store(&a.stop, 1);
    pthread_join(th, NULL);
    assert_int_equal(cal_tel_stop(t), CAL_OK);
    int64_t t1 = cal_now_ns();
    assert_int_equal(cal_tel_stop(t), CAL_OK);
    cal_tel_self self;
    cal_tel_self_stats(t, &self);
    /* 250 ms at 10 ms: ~25 ticks (at least 10 on a busy machine) */
    assert_true(self.ticks >= 10 && self.ticks <= (uint64_t)((t1 - t0) / 10000000 + 2));
    assert_true(self.samples >= 3 * self.ticks - 6);   /* rss, cpu time, threads */
    assert_true(self.overwritten > 0);                 /* 16-sample ring */
    assert_int_equal(self.dropped, 0);
    assert_true(self.jitter_p50_ns >= 0 && self.jitter_p99_ns >= self.jitter_p50_ns);
    assert_true(self.thread_cpu_ns > 0);
    assert_true(a.reads > 0);
    /* only the last 16 samples are left; a cursor from 0 learns how many were lost */
    cal_tel_sample buf[32];
    uint64_t cur = 0, lost = 0;
    size_t k = cal_tel_read(t, &cur, buf, 32, &lost);
    assert_int_equal(k, 16);
    assert_int_equal(lost, self.samples - 16);
    cal_tel_stat s;
    assert_int_equal(cal_tel_window(t, "threads", t0, t1, &s), CAL_OK);
    assert_true(s.min >= 1);
    /* restart works */
    assert_int_equal(cal_tel_start(t), CAL_OK);
    cal_tel_close(&t);
}

/* This host, whatever it is: an available backend produces readings, an
 * absent one says why and produces none. */
static void test_this_host(void **st)
{
    (void)st;
    unsetenv("CALIPER_NVML_LIB");
    cal_tel_config cfg = { .pid = (int)getpid() };
    cal_tel *t = NULL;
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    /* a process's readings: /proc on Linux, proc_pidinfo on macOS, none on
     * a generic POSIX system (which says why) */
    int posix = !strcmp(cal_plat_name(), "posix");
    assert_true(info(t, "process")->available == !posix);
    if (posix) assert_non_null(strstr(info(t, "process")->reason, "no way to read"));
    int ticked = cal_tel_tick(t);
    assert_true(posix ? ticked >= 0 : ticked > 0);
    cal_tel_sample s[4096];
    size_t n = cal_tel_latest(t, s, 4096);
    const cal_tel_backend_info *bi;
    size_t nb = cal_tel_backends(t, &bi);
    for (size_t i = 0; i < nb; i++) {
        size_t k = 0;
        for (size_t j = 0; j < n; j++) if (strcmp(s[j].backend, bi[i].name) == 0) k++;
        if (!bi[i].available) {
            assert_int_equal(k, 0);
            assert_true(strlen(bi[i].reason) > 0);
        }
    }
    /* with no clock source, the verdict says it cannot judge */
    char m[64];
    if (cal_tel_pick_clock(t, m, sizeof m) != CAL_OK) {
        cal_freq_verdict v;
        assert_int_equal(cal_tel_freq_verdict(980, 850, NAN, NAN, 0, &v), CAL_FREQ_CANNOT_JUDGE);
    }
    cal_tel_close(&t);
}

int main(int argc, char **argv)
{
    (void)argc;
    /* Unit binaries live in $BUILD/tests/, helpers in $BUILD/tests/helpers/. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", argv[0]);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
    snprintf(g_mock, sizeof g_mock, "%s/helpers/libnvmlmock.so", dir);
    if (access(g_mock, R_OK) == 0 && g_mock[0] != '/') {
        char abs[PATH_MAX];
        if (realpath(g_mock, abs)) snprintf(g_mock, sizeof g_mock, "%s", abs);
    }
    snprintf(g_data, sizeof g_data, "tests/data/sysfs");
    if (access(g_data, R_OK) != 0) snprintf(g_data, sizeof g_data, "%s/../../../tests/data/sysfs", dir);
    char abs[PATH_MAX];
    if (realpath(g_data, abs)) snprintf(g_data, sizeof g_data, "%s", abs);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intel_desktop_tree),
        cmocka_unit_test(test_rapl_wraparound),
        cmocka_unit_test(test_why_texts),
        cmocka_unit_test(test_vm_tree_all_absent),
        cmocka_unit_test(test_cpuinfo_moving),
        cmocka_unit_test(test_amdgpu_tree),
        cmocka_unit_test(test_nvml_mock),
        cmocka_unit_test(test_nvml_reason_words),
        cmocka_unit_test(test_sampler_thread),
        cmocka_unit_test(test_this_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
