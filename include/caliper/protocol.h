/* caliper protocol — what a number was measured under: the summary of a
 * cell's requests (both throughput columns, the latency percentiles), the
 * shot-series verdict of SPEC 1.1 (did shots 2..N drop below shot 1?), the
 * target's lifecycle (an engine caliper launches, waits for and stops), and
 * the host description every run records.
 *
 * Ownership: cal_target_start allocates the target; cal_target_stop(&t)
 * stops the process if caliper started it, frees it and NULLs the pointer.
 * Library code never prints: failures return cal_err with a message in the
 * caller's buffer where noted. */
#ifndef CALIPER_PROTOCOL_H
#define CALIPER_PROTOCOL_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "caliper/probe.h"
#include "caliper/store.h"

/* ---- summary ----------------------------------------------------------- */

/* Summarise n request results into *out (SPEC 1.2 and the metric names of
 * the serving world):
 *   aggregate throughput   = Σ output tokens of ok requests ÷ duration_s
 *   per-request throughput = median over ok requests of output ÷ (end − send)
 *   TTFT  = first_token − sched (sched falls back to send when 0)
 *   E2E   = end − sched
 *   TPOT  = (E2E − TTFT) ÷ (output − 1), requests with output >= 2
 *   ITL   = every gap between consecutive chunk timestamps (needs chunk_ns)
 *   prefill lower bound = prompt tokens ÷ TTFT; decode = (out−1) ÷ (last−first)
 * duration_s: the cell's wall clock (a pooled summary passes the sum of its
 * cells' durations); <= 0 derives it from the requests (first send to last
 * end). fixed_output > 0 counts ok requests whose output differs from it in
 * output_len_mismatch. Statistics with no sample stay NAN. Telemetry fields
 * are left NAN (the caller fills them). CAL_ENOMEM or CAL_OK. */
int cal_summary_compute(const cal_req_result *r, size_t n, double duration_s,
                        int fixed_output, cal_summary *out);

/* ---- shot series (SPEC 1.1) -------------------------------------------- */

#define CAL_SHOT_NOISE_FLOOR 0.03   /* default: the band is never narrower than ±3 % */

typedef struct cal_shot_verdict {
    int    n;              /* shots judged (warm-ups excluded) */
    int    first_shot;     /* index of the first judged shot */
    int    later_first, later_last;  /* index range of the later shots */
    double first;          /* shot 1's value */
    double later_median;   /* median of the later shots */
    double drop;           /* (first − later_median) ÷ first; + = slower later */
    double band;           /* noise band, relative: max(2 × 1.4826 × the
                              median absolute deviation of the later shots
                              ÷ their median — about 2 σ, robust to one
                              disturbed shot — and the floor) */
    int    beyond_noise;   /* |drop| > band */
    int    judged;         /* 0: fewer than 2 shots with a value */
    char   text[512];      /* the verdict in words, always set */
} cal_shot_verdict;

/* Judge one series: values[i] is a throughput (higher is better) of shot
 * shot_index[i], in shot order, warm-ups already removed. NAN values are
 * skipped. what names the quantity ("per-request tok/s") for the text.
 * floor: the narrowest band, relative (the smallest drop worth calling on
 * this machine, `caliper run --noise-floor`); <= 0 means CAL_SHOT_NOISE_FLOOR.
 * Texts: "shots 2–6 run 14.0 % below shot 1 (band ±2.1 %): quote warm
 * figures, not shot 1"; "shots 2–6 within noise of shot 1 (−0.8 %, band
 * ±3.0 %): no wall seen"; "shots 2–6 run 9.0 % above shot 1 (…): shot 1 was
 * slow (warm-up): quote warm figures". Always fills *out; returns judged. */
int cal_shot_series_verdict(const double *values, const int *shot_index, size_t n,
                            const char *what, double floor, cal_shot_verdict *out);

/* ---- target lifecycle -------------------------------------------------- */

typedef enum cal_target_kind {
    CAL_TARGET_BUILTIN = 0,   /* an engine started from argv that names its own
                                 URL (caliper's: `caliper serve --port 0`) */
    CAL_TARGET_URL,           /* an engine someone else runs */
    CAL_TARGET_LAUNCH         /* `/bin/sh -c CMD`, in its own process group */
} cal_target_kind;
const char *cal_target_kind_name(cal_target_kind k);  /* "builtin", "url", "launch" */

typedef struct cal_target_config {
    cal_target_kind kind;
    const char *url;          /* url: the base URL; launch: the URL to wait on
                                 (NULL: http://127.0.0.1:PORT from port) */
    const char *command;      /* launch: the shell command */
    const char *const *argv;  /* builtin: the command that starts the engine,
                                 NULL-terminated, argv[0] a path (no shell) */
    /* builtin: reads the engine's output a line at a time until the engine
     * says where it listens: 1 with its base URL in url[url_n] and what it
     * said after the URL in detail[detail_n], 0 for any other line. The
     * caller knows its engine's words; the library does not. */
    int (*ready_line)(const char *line, char *url, size_t url_n,
                      char *detail, size_t detail_n);
    const char *preset;       /* builtin: the engine's name in the record ("small") */
    int         port;         /* launch: port when url is NULL */
    int64_t     launch_timeout_ns;  /* 0 = 120 s */
    int64_t     grace_ns;     /* SIGTERM → SIGKILL; 0 = 5 s */
    volatile int *stop;       /* non-zero aborts waiting (Ctrl-C); may be NULL */
    /* Process-wide effects, off unless asked (the caliper CLI asks): */
    int         subreaper;    /* builtin, launch: make this process the child
                                 subreaper (Linux PR_SET_CHILD_SUBREAPER, for the
                                 whole process and never undone), so stop also
                                 waits for the engine's orphaned children; 0:
                                 stop waits for what is still our child */
    int         death_signal; /* builtin, launch: the signal the engine gets when
                                 the thread that started it ends (Linux
                                 PR_SET_PDEATHSIG; SIGTERM: the engine does not
                                 outlive a killed caller); 0: none. Start the
                                 target from a thread that outlives it. */
} cal_target_config;

typedef struct cal_target cal_target;

/* Start (builtin, launch) or just check (url) the target, and wait until it
 * answers GET /health or /v1/models with 2xx. The engine's stdout and
 * stderr go to a log file (kept until stop). On failure err[errn] says why
 * (with the log's last lines for a launched engine), and *out is NULL:
 * CAL_ETIMEDOUT (not ready in time), CAL_EIO (spawn failed or the process
 * exited: err names its exit status), CAL_ECONNECT (url not answering),
 * CAL_ECANCEL (stop was set). */
int cal_target_start(const cal_target_config *cfg, cal_target **out,
                     char *err, size_t errn);
const char *cal_target_url(const cal_target *t);     /* base URL, no /v1 */
int64_t cal_target_load_ns(const cal_target *t);     /* spawn → ready; -1 url */
int64_t cal_target_spawn_ns(const cal_target *t);    /* monotonic; -1 url */
pid_t   cal_target_pid(const cal_target *t);         /* 0 for url */
/* 1 while a launched process lives (always 1 for url targets). */
int     cal_target_alive(cal_target *t);
/* builtin: what the engine said after its URL on the line ready_line took
 * ("(model caliper-small, 38211072 params)"); NULL otherwise. */
const char *cal_target_detail(const cal_target *t);
/* The engine's log (stdout + stderr); NULL for url targets. */
const char *cal_target_log_path(const cal_target *t);
/* SIGTERM the process group, SIGKILL after the grace period, reap, remove
 * the log; NULL-safe; NULLs *t. Returns the child's exit status as a
 * wait() status, or -1 (url target, or not ours). */
int     cal_target_stop(cal_target **t);

/* GET base/v1/models: the first model id into id[n] (and the raw JSON
 * into *raw when raw is non-NULL, malloc'd). CAL_OK, CAL_ECONNECT,
 * CAL_EHTTP, CAL_EPROTO; CAL_ETOOBIG for an api_key over CAL_API_KEY_MAX
 * bytes (auth.h). timeout_ns 0 = 5 s. */
int cal_target_models(const char *base_url, const char *api_key, int64_t timeout_ns,
                      char *id, size_t n, char **raw);
/* The same, ended within 100 ms (CAL_ECANCEL) once *stop is non-zero
 * (NULL: never), as a run's Ctrl-C must. */
int cal_target_models_stop(const char *base_url, const char *api_key, int64_t timeout_ns,
                           volatile int *stop, char *id, size_t n, char **raw);

/* ---- host -------------------------------------------------------------- */

/* {"cpu":"…","cores":N,"memory_bytes":N,"os":"Linux 6.1.0 x86_64",
 *  "hostname":"…","gpu":null|"…"} — malloc'd JSON, NULL on ENOMEM.
 * short_out[n] gets "AMD EPYC 7B13 (2 cores), 7.8 GiB, Linux 6.1.0". */
char *cal_host_json(char *short_out, size_t n);

#endif
