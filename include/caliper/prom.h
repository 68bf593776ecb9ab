/* caliper — a bounded parser for the Prometheus text exposition format
 * (version 0.0.4: what vLLM, SGLang, llama.cpp and TGI serve on /metrics),
 * and the search for the "requests running" gauge behind `caliper watch`.
 * No allocation escapes a call: samples handed to callbacks live only for
 * the callback. Every field has a cap; going past it is an error with the
 * line number, never a crash. Library code: nothing prints. */
#ifndef CALIPER_PROM_H
#define CALIPER_PROM_H
#include <stddef.h>
#include <stdint.h>

#define CAL_PROM_NAME_MAX    256      /* metric or label name, NUL included */
#define CAL_PROM_VALUE_MAX   1024     /* one label value after unescaping, NUL included */
#define CAL_PROM_LABELS_MAX  32       /* label pairs on one sample */
#define CAL_PROM_LINE_MAX    65536    /* bytes in one line */
#define CAL_PROM_FAMILIES_MAX 4096    /* TYPE lines remembered per exposition */

typedef enum cal_prom_type {
    CAL_PROM_UNTYPED = 0,
    CAL_PROM_COUNTER,
    CAL_PROM_GAUGE,
    CAL_PROM_HISTOGRAM,
    CAL_PROM_SUMMARY
} cal_prom_type;

typedef struct cal_prom_label {
    char name[CAL_PROM_NAME_MAX];
    char value[CAL_PROM_VALUE_MAX];   /* unescaped: \\ \" \n decoded */
} cal_prom_label;

/* One sample line. Lives only for the callback it is passed to. */
typedef struct cal_prom_sample {
    char           name[CAL_PROM_NAME_MAX];  /* as written: "x_bucket", "x_sum" too */
    cal_prom_type  type;        /* from the TYPE line of its family (a histogram's
                                   _bucket/_sum/_count, a summary's _sum/_count
                                   belong to the family); UNTYPED when none */
    size_t         n_labels;
    cal_prom_label labels[CAL_PROM_LABELS_MAX];
    double         value;       /* NaN, +Inf and -Inf allowed */
    int            has_timestamp;
    int64_t        timestamp_ms; /* milliseconds since the epoch, when has_timestamp */
    size_t         line;        /* 1-based */
} cal_prom_sample;

/* Return non-zero to stop the parse; that value is returned by the parser. */
typedef int (*cal_prom_fn)(void *ud, const cal_prom_sample *s);

/* Parse text[len] (need not be NUL-terminated), calling fn (may be NULL:
 * validate only) for each sample in order. Blank lines and comments other
 * than HELP/TYPE are skipped; a TYPE names one of counter, gauge, histogram,
 * summary, untyped. A trailing CR on a line is tolerated.
 * Returns CAL_OK; CAL_EPROTO for a malformed line (*bad_line gets its
 * 1-based number, why says what and where); CAL_ETOOBIG when a line, name,
 * label value, label count or the family table passes its cap (same
 * reporting); CAL_ENOMEM; or fn's non-zero value. bad_line and why may be
 * NULL; *bad_line is 0 when no line is to blame. */
int cal_prom_parse(const char *text, size_t len, cal_prom_fn fn, void *ud,
                   size_t *bad_line, char *why, size_t why_len);

/* Value of label `name` on s, or NULL when the sample has no such label. */
const char *cal_prom_label_value(const cal_prom_sample *s, const char *name);

/* ---- the operating-point gauges ---------------------------------------- */

/* What one scrape says about load, each summed over every label set of its
 * metric (one series per model, per engine replica...). A count of requests
 * is in [0, CAL_PROM_COUNT_MAX]; a usage gauge a fraction in
 * [0, 1] or a percentage in [0, 100] as its engine writes it
 * (cal_prom_range_text). A label set holding anything else (NaN, ±Inf,
 * negative, 1e308) makes its metric's value NAN for this
 * scrape (the caller rejects the reading; it is never read as 0 or as a
 * clamped maximum), and is counted in *_invalid. A metric the exposition
 * lacks is absent: has_* = 0. */
#define CAL_PROM_COUNT_MAX 1e9
typedef struct cal_prom_load {
    int    has_running, has_waiting, has_ceiling;
    double running, waiting, ceiling;
    size_t running_series;                 /* label sets summed into running */
    size_t running_invalid;                /* of those, not plausible (above) */
    double running_bad_value;              /* the first such value, */
    size_t running_bad_line;               /* and its line; 0 when none */
    size_t waiting_invalid;                /* the same for waiting */
    double waiting_bad_value;
    size_t waiting_bad_line;
    char   running_name[CAL_PROM_NAME_MAX];
    char   waiting_name[CAL_PROM_NAME_MAX];
    char   ceiling_name[CAL_PROM_NAME_MAX];
} cal_prom_load;

/* The engines' names for the gauges, in the order they are tried. Each row
 * is {running, waiting, ceiling}; a NULL waiting/ceiling means that engine
 * exposes none. The list ends with a row of NULLs. */
extern const char *const cal_prom_known[][3];

/* What a plausible value of gauge `name` is, in words ("a count in [0, 1e9]"), for messages. */
const char *cal_prom_range_text(const char *name);

/* Find the running-requests gauge in a scrape. running_override (NULL:
 * auto) names the metric to use instead of the known list; the waiting and
 * ceiling gauges come from the same engine's row (with an override: the
 * first row whose waiting/ceiling metric is present).
 * CAL_OK; CAL_ENOTFOUND when no running gauge is present (out->has_running
 * = 0, why lists what was looked for); CAL_EPROTO when one of the gauges
 * looked for lists the same label set twice (why names the metric and both
 * lines: the scrape is refused rather than summed or picked from);
 * CAL_ETOOBIG past 512 label sets of one gauge; parse errors as
 * cal_prom_parse. */
int cal_prom_find_load(const char *text, size_t len, const char *running_override,
                       cal_prom_load *out, size_t *bad_line, char *why, size_t why_len);

#endif
