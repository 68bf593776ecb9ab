/* caliper — hardware telemetry: a sampler thread over backends (CPU clock,
 * RAPL power, hwmon, thermal zones, throttle counters, NVIDIA NVML, amdgpu,
 * Apple IOReport, the target process) into a preallocated ring, window
 * statistics for shots and requests, and the verdicts of SPEC 1.4 built on
 * them (warm from cold, power wall, watt for watt, energy per token).
 *
 * Ownership: cal_tel_open() allocates everything (ring, backend state, file
 * descriptors); cal_tel_close(&t) frees it and NULLs the caller's pointer.
 * Samples copied out are the caller's; their backend and unit strings are
 * static and live for the whole program.
 * Threads: the sampler thread is the only reader of the backends while it
 * runs; every query below may be called from any thread at any time.
 * Times are CLOCK_MONOTONIC ns (caliper/clock.h). Library code never prints.
 * An absent backend says it is absent and why; it never invents a zero. */
#ifndef CALIPER_TELEMETRY_H
#define CALIPER_TELEMETRY_H
#include <stddef.h>
#include <stdint.h>

#define CAL_TEL_METRIC_MAX   48          /* metric name, NUL included */
#define CAL_TEL_REASON_MAX   256         /* a backend's "why absent" text */
#define CAL_TEL_INTERVAL_DEFAULT_NS  250000000LL   /* 250 ms */
#define CAL_TEL_INTERVAL_MIN_NS       10000000LL   /*  10 ms */

/* One reading. Metric names (a fixed vocabulary, see docs/telemetry.md):
 *   cpu0_mhz … cpuN_mhz, cpu_mhz_mean, cpu_mhz_min     (cpufreq / cpuinfo)
 *   package_w, core_w, uncore_w, dram_w, psys_w, package_energy_j,
 *   dram_energy_j, psys_energy_j                       (rapl; J cumulative)
 *   <chip>_temp1_c, <chip>_power1_w, <chip>_fan1_rpm   (hwmon)
 *   tz0_<type>_c                                       (thermal)
 *   cpu_core_throttle_count, cpu_package_throttle_count, cpu_throttle_events
 *   gpu0_sm_mhz, gpu0_mem_mhz, gpu0_w, gpu0_energy_j, gpu0_temp_c,
 *   gpu0_util_pct, gpu0_mem_util_pct, gpu0_power_limit_w,
 *   gpu0_clocks_event_reasons (bit mask; cal_tel_nvml_reasons() words)
 *   amdgpu0_sclk_mhz, amdgpu0_mclk_mhz, amdgpu0_w, amdgpu0_temp_c, amdgpu0_busy_pct
 *   gpu_mhz, gpu_active_pct, cpu_w, gpu_w, dram_w, ane_w, thermal_pressure (apple;
 *   machine_w / machine_energy_j are reserved for a whole-machine source) 
 *   rss_bytes, cpu_time_s, threads                      (process) */
typedef struct cal_tel_sample {
    int64_t     t_ns;                      /* CLOCK_MONOTONIC of the read */
    const char *backend;                   /* "cpufreq", "rapl", "nvml", ... */
    char        metric[CAL_TEL_METRIC_MAX];
    const char *unit;                      /* "MHz","W","J","C","RPM","B","s","%","1","mask","count" */
    double      value;
} cal_tel_sample;

/* A backend as probed at cal_tel_open(). */
typedef struct cal_tel_backend_info {
    const char *name;                      /* static: "cpufreq" */
    const char *what;                      /* static one-liner: what it reads */
    int         available;                 /* 1 available, 0 absent */
    int         err;                       /* CAL_OK, or why absent: CAL_EABSENT
                                              (no such file / not this OS),
                                              CAL_EPERM (permission denied),
                                              CAL_ENOTFOUND (no device) */
    char        reason[CAL_TEL_REASON_MAX]; /* available: what was found ("2 cores");
                                               absent: why, and how to grant it */
} cal_tel_backend_info;

typedef struct cal_tel_config {
    const char *root;        /* prefix for /sys and /proc (tests); NULL = "" (the real ones) */
    int64_t     interval_ns; /* 0 = 250 ms; values below 10 ms are raised to 10 ms */
    size_t      ring_cap;    /* samples kept (oldest overwritten); 0 = 65536 */
    int         pid;         /* process backend target; 0 = none (backend absent) */
    const char *only;        /* comma list of backend names to probe; NULL = all */
} cal_tel_config;

typedef struct cal_tel cal_tel;

/* Probe every backend and allocate the ring. cfg may be NULL (defaults).
 * Never fails because a backend is absent. Returns CAL_OK, CAL_ENOMEM, or
 * CAL_EINVAL (cfg->only names an unknown backend). */
int  cal_tel_open(cal_tel **out, const cal_tel_config *cfg);
/* Stops the thread if running, frees everything, sets *t = NULL. NULL-safe. */
void cal_tel_close(cal_tel **t);

/* Backends in a fixed order; *out points into t (valid until close). Not
 * to be read while another thread calls cal_tel_set_pid(): use the copy. */
size_t cal_tel_backends(const cal_tel *t, const cal_tel_backend_info **out);
/* The same list copied under the lock, safe from any thread. Returns the
 * number of backends (copies at most cap). */
size_t cal_tel_backends_copy(cal_tel *t, cal_tel_backend_info *out, size_t cap);
/* Names of the available backends, comma-separated ("cpufreq,process"),
 * for stored runs. Writes at most n bytes; returns buf. */
char  *cal_tel_sources(const cal_tel *t, char *buf, size_t n);
/* Interval actually used, ns. */
int64_t cal_tel_interval_ns(const cal_tel *t);

/* Change the process backend's target (0 = none), also while running: the
 * engine caliper launched is often known only after open. CAL_OK, or
 * CAL_ENOTFOUND when /proc/PID is absent (the old target is kept). */
int  cal_tel_set_pid(cal_tel *t, int pid);

/* Start the sampler thread: one tick immediately, then every interval on an
 * absolute schedule. CAL_OK, CAL_EINVAL if already running, CAL_EIO if the
 * thread cannot be created. */
int  cal_tel_start(cal_tel *t);
/* Stop and join the thread (returns within milliseconds). Idempotent. */
int  cal_tel_stop(cal_tel *t);
/* One tick on the calling thread; only while the thread is not running
 * (CAL_EINVAL otherwise). Returns the number of samples taken (>= 0). */
int  cal_tel_tick(cal_tel *t);

/* Samples ever produced (monotonic sequence number of the next sample). */
uint64_t cal_tel_seq(cal_tel *t);
/* Copy up to cap samples with sequence >= *from into out, oldest first;
 * *from advances past them. Samples already overwritten are skipped (their
 * count is added to *lost if lost is non-NULL). Returns the number copied.
 * Call repeatedly with the same cursor to drain the ring as it fills. */
size_t cal_tel_read(cal_tel *t, uint64_t *from, cal_tel_sample *out, size_t cap,
                    uint64_t *lost);
/* Calls fn for each sample in the ring with t0 <= t_ns <= t1, oldest first,
 * under the ring lock (fn must not call back into t). fn returns non-zero
 * to stop early. Returns the number of samples visited. */
size_t cal_tel_foreach(cal_tel *t, int64_t t0_ns, int64_t t1_ns,
                       int (*fn)(const cal_tel_sample *s, void *ud), void *ud);
/* The latest value of every metric from the most recent tick of each
 * backend (for Prometheus and live displays). Returns the count (<= cap). */
size_t cal_tel_latest(cal_tel *t, cal_tel_sample *out, size_t cap);

/* Statistics of one metric over [t0, t1]. */
typedef struct cal_tel_stat {
    size_t      n;          /* samples inside the window */
    int         nearest;    /* 1: none inside; the nearest sample within one
                               interval of the window was used (n = 1) */
    double      mean, min, max;
    double      first, last;
    const char *unit;
} cal_tel_stat;
/* CAL_OK, or CAL_ENOTFOUND when the metric has no sample in or near the
 * window (out->n = 0, values NAN). */
int  cal_tel_window(cal_tel *t, const char *metric, int64_t t0_ns, int64_t t1_ns,
                    cal_tel_stat *out);
/* The metric that best stands for "the clock" / "the power" of this run:
 * clock: gpu0_sm_mhz, amdgpu0_sclk_mhz, gpu_mhz (apple), cpu_mhz_mean;
 * power: gpu0_w, amdgpu0_w, gpu_w, package_w, machine_w, psys_w.
 * Copies the name into name[n]; CAL_ENOTFOUND when none has been sampled. */
int  cal_tel_pick_clock(cal_tel *t, char *name, size_t n);
int  cal_tel_pick_power(cal_tel *t, char *name, size_t n);
/* Energy spent in [t0, t1], joules: machine_energy_j or psys_energy_j when
 * present, else the sum of package_energy_j and every GPU energy counter;
 * counters are interpolated at the window edges, and a GPU without a counter
 * has its power integrated (trapezoid). source[n] names what was summed
 * ("package_energy_j+gpu0_energy_j"). CAL_ENOTFOUND when no energy or power
 * source covers the window: no zero is invented. */
int  cal_tel_window_energy(cal_tel *t, int64_t t0_ns, int64_t t1_ns, double *joules,
                           char *source, size_t n);
/* OS-reported throttle state over the window: 1 throttled (NVML reasons
 * other than idle/app-clocks, or Linux throttle events), 0 nominal, -1 no
 * source. words[n] gets the reasons ("SW power cap, HW thermal slowdown"). */
int  cal_tel_window_os_throttle(cal_tel *t, int64_t t0_ns, int64_t t1_ns,
                                char *words, size_t n);

/* The sampler's own cost, for bench/telemetry and stored runs. */
typedef struct cal_tel_self {
    uint64_t ticks;          /* ticks taken */
    uint64_t samples;        /* samples produced */
    uint64_t overwritten;    /* samples lost to the ring's cap */
    uint64_t dropped;        /* samples dropped: more than a tick's scratch holds */
    int64_t  thread_cpu_ns;  /* CPU time of the sampler thread */
    int64_t  jitter_p50_ns;  /* wake-up lateness: actual - scheduled */
    int64_t  jitter_p99_ns;
    int64_t  jitter_max_ns;
} cal_tel_self;
void cal_tel_self_stats(cal_tel *t, cal_tel_self *out);

/* --- helpers with their own tests -------------------------------------- */

/* Delta of a counter that wraps at range (RAPL max_energy_range_uj):
 * cur >= prev ? cur - prev : range - prev + cur. range 0 = never wraps
 * (then cur < prev returns 0: a reset, not a negative). */
uint64_t cal_tel_wrap_delta(uint64_t prev, uint64_t cur, uint64_t range);
/* NVML clocks-event (throttle) reason mask in words, comma-separated:
 * "GPU idle", "application clocks", "SW power cap", "HW slowdown",
 * "sync boost", "SW thermal slowdown", "HW thermal slowdown",
 * "HW power brake", "display clock"; "none" for 0. Returns buf. */
char *cal_tel_nvml_reasons(uint64_t mask, char *buf, size_t n);

/* --- verdicts (lib/telemetry/verdict.c): pure functions ----------------- */

typedef enum cal_freq_kind {
    CAL_FREQ_CANNOT_JUDGE = 0, /* no clock source, or an input is missing/non-positive */
    CAL_FREQ_NO_DROP,          /* matches the prediction, and neither throughput
                                  nor clock fell (by more than 0.5 %) */
    CAL_FREQ_EXPLAINED,        /* |measured − predicted| <= tolerance × predicted
                                  and throughput or clock fell */
    CAL_FREQ_NOT_EXPLAINED     /* frequency explains only part (or more) of the drop */
} cal_freq_kind;

typedef struct cal_freq_verdict {
    cal_freq_kind kind;
    double cold, warm;        /* throughputs (any unit, same for both) */
    double f_cold, f_warm;    /* clocks (any unit, same for both) */
    double predicted;         /* SPEC 1.4: cold × f_warm ÷ f_cold */
    double error;             /* (warm − predicted) ÷ predicted */
    double explained;         /* share of the drop frequency explains:
                                 (cold − predicted) ÷ (cold − warm); NAN when warm >= cold */
    double tolerance;         /* relative, e.g. 0.03 */
} cal_freq_verdict;
/* Judge whether the clock explains the cold→warm slowdown. f_cold/f_warm
 * NAN or <= 0 (no clock source) → CAL_FREQ_CANNOT_JUDGE. tolerance <= 0
 * means 0.03. Always fills *out; returns out->kind. */
cal_freq_kind cal_tel_freq_verdict(double cold, double warm, double f_cold, double f_warm,
                                   double tolerance, cal_freq_verdict *out);
/* "frequency explains the slowdown (predicted 844, measured 850)",
 * "frequency explains only 12 % of the drop: the cycle count changed
 *  (predicted 975, measured 850)", "cannot judge: no clock source", ...
 * Returns buf. */
char *cal_tel_freq_verdict_text(const cal_freq_verdict *v, char *buf, size_t n);

/* The clock's share of a shot-series change, with the shot verdict's
 * discipline (caliper/judge.h): tput[i] and clock[i] per shot (shot 1
 * first, then the warm shots; NAN or <= 0 where absent). Silent
 * (judged 0, why[] says why) without a clock on shot 1 and 2 warm shots,
 * or when the clock's own change is within its noise or under clock_floor
 * (<= 0 → 0.01). tput_tau_within: the throughput's shot-to-shot sd floor
 * from its requests (log scale; 0 unknown). level <= 0 → 0.95. */
typedef struct cal_clock_share {
    int    judged;
    int    k;                          /* warm shots with both values */
    double clock_change, clock_lo, clock_hi;  /* warm ÷ shot 1 − 1, its CI */
    double tput_change;                /* the same for throughput */
    double share, share_lo, share_hi;  /* Δlog clock ÷ Δlog throughput (1 = all
                                          of it) and its Fieller CI; ±INFINITY
                                          when the throughput change is noise */
    double level, floor;
    char   why[160];
} cal_clock_share;
int cal_tel_clock_share(const double *tput, const double *clock, size_t n,
                        double tput_tau_within, double clock_floor, double level,
                        cal_clock_share *out);
/* "the clock fell 9.0 % (95 % CI 6.1–11.8 %) and explains 85 % of the
 * throughput change (95 % CI 60–110 %): the change is the clock (...)". */
char *cal_tel_clock_share_text(const cal_clock_share *s, char *buf, size_t n);

typedef enum cal_wall_kind {
    CAL_WALL_CANNOT_JUDGE = 0, /* fewer than 2 shots, or no power or clock */
    CAL_WALL_NONE,             /* power not flat, or the clock did not fall */
    CAL_WALL_CEILING           /* power flat while the clock fell: a power wall */
} cal_wall_kind;
typedef struct cal_power_wall {
    cal_wall_kind kind;
    size_t n;                  /* shots used */
    double power_mean_w;       /* mean power over the warm shots */
    double power_spread;       /* (max − min) ÷ mean */
    double clock_first, clock_last;
    double clock_drop;         /* (first − last) ÷ first, relative */
} cal_power_wall;
/* Per-shot mean power (W) and clock across consecutive warm shots. NAN
 * entries are skipped. Flat: spread <= spread_tol (0 → 0.05); fell:
 * drop >= drop_min (0 → 0.03). Returns out->kind. */
cal_wall_kind cal_tel_power_wall(const double *power_w, const double *clock, size_t n,
                                 double spread_tol, double drop_min, cal_power_wall *out);
/* "power ceiling near 60 W: power flat (spread 2 %) while the clock fell 14 %"
 * or why not. Returns buf. */
char *cal_tel_power_wall_text(const cal_power_wall *w, char *buf, size_t n);

/* Watt for watt (SPEC 1.1/1.4 power split): per-rail power in two states
 * (e.g. cold vs warm shot), against a whole-machine wall when known. */
typedef struct cal_rail {
    const char *name;          /* "GPU", "memory path", ... (caller's) */
    double before_w, after_w;  /* NAN = not measured */
} cal_rail;
typedef struct cal_watt_table {
    size_t n;                  /* rails used */
    double sum_before_w, sum_after_w;
    double wall_w;             /* NAN when unknown */
    double residual_before_w, residual_after_w;  /* wall − sum; NAN without a wall */
    double moved_w;            /* watts that left the rails that fell (>= 0) */
    double gained_w;           /* watts that went to the rails that rose (>= 0) */
} cal_watt_table;
/* CAL_OK, or CAL_EINVAL when fewer than 2 rails have both readings. */
int   cal_tel_watt_for_watt(const cal_rail *rails, size_t n, double wall_w,
                            cal_watt_table *out);
/* A small text table, one line per rail, then the sums and the note
 * ("+5.6 W on memory path <-> -5.5 W on GPU"). Returns buf. */
char *cal_tel_watt_for_watt_text(const cal_rail *rails, size_t n,
                                 const cal_watt_table *t, char *buf, size_t bn);

typedef enum cal_throttle_kind {
    CAL_THR_CANNOT_JUDGE = 0,  /* no OS state or no measured clock */
    CAL_THR_AGREE_NOMINAL,     /* OS nominal, clock held */
    CAL_THR_AGREE_THROTTLED,   /* OS throttled, clock fell */
    CAL_THR_OS_NOMINAL_CLOCK_FELL,   /* the seed's case: trust the clock */
    CAL_THR_OS_THROTTLED_CLOCK_HELD
} cal_throttle_kind;
typedef struct cal_throttle_note {
    cal_throttle_kind kind;
    double clock_drop;         /* (f_ref − f_now) ÷ f_ref */
} cal_throttle_note;
/* os_state: 1 throttled, 0 nominal, -1 unknown (as cal_tel_window_os_throttle).
 * f_ref: the reference clock (cold shot or table max); f_now: measured.
 * The clock "fell" when the drop >= drop_min (0 → 0.03). Returns kind. */
cal_throttle_kind cal_tel_throttle_note(int os_state, double f_ref, double f_now,
                                        double drop_min, cal_throttle_note *out);
/* "OS reports nominal but the clock fell 14 %: trust the clock". Returns buf. */
char *cal_tel_throttle_note_text(const cal_throttle_note *t, const char *os_words,
                                 char *buf, size_t n);

/* Energy per token (SPEC 1.4 column): joules ÷ tokens for a window. */
typedef struct cal_energy_per_token {
    double joules;             /* energy of the window; NAN when no source */
    double j_per_output_token; /* NAN when no source or 0 output tokens */
    double j_per_prompt_token; /* NAN when no source or 0 prompt tokens */
} cal_energy_per_token;
/* Pure form: from joules already measured (NAN = no source). */
void cal_tel_energy_per_token(double joules, long prompt_tokens, long output_tokens,
                              cal_energy_per_token *out);
/* From the sampler: cal_tel_window_energy over [t0, t1], then the pure form.
 * CAL_OK, or CAL_ENOTFOUND (no energy source; *out filled with NAN). */
int  cal_tel_energy_per_token_window(cal_tel *t, int64_t t0_ns, int64_t t1_ns,
                                     long prompt_tokens, long output_tokens,
                                     cal_energy_per_token *out);

#endif
