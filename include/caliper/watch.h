/* caliper — what `caliper watch` concludes from what it scraped: the
 * operating point (SPEC 1.2: the distribution of requests running over
 * time, not the configured ceiling) and the memory slope of a process with
 * the minimum watch time at the reading resolution (SPEC 1.4 leak watch).
 * Pure computations over the caller's readings; nothing prints.
 * Ownership: cal_op_init allocates the histogram, cal_op_free releases it. */
#ifndef CALIPER_WATCH_H
#define CALIPER_WATCH_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/stats.h"

#define CAL_OP_MAX_RUNNING 65536  /* the largest running count the histogram holds;
                                     a reading above it is refused, never clamped */

/* A time-weighted histogram of "requests running", held as a step function:
 * each reading holds until the next one (sample and hold). */
typedef struct cal_oppoint {
    double *w_s;            /* [CAL_OP_MAX_RUNNING + 1] seconds spent at each count */
    double  total_s;        /* seconds covered */
    double  waiting_s;      /* ∫ waiting dt, request·seconds */
    double  waiting_pos_s;  /* seconds with at least one request waiting */
    double  waiting_cov_s;  /* seconds where waiting was known */
    double  waiting_max;
    double  running_max;
    double  running_s;      /* ∫ running dt over the readings as read, request·seconds */
    size_t  n;              /* readings added */
    size_t  fractional;     /* of those, not whole numbers (an averaged gauge) */
    double  first_fraction; /* the first such reading, as read; NAN none */
    int64_t last_ns;        /* time of the previous reading */
    double  last_running, last_waiting;   /* as read; waiting NAN when unknown */
} cal_oppoint;

/* CAL_OK or CAL_ENOMEM. */
int  cal_op_init(cal_oppoint *op);
void cal_op_free(cal_oppoint *op);
/* One reading at t_ns (monotonic; must not go back: CAL_EINVAL). running
 * is kept as read: a whole number is credited to its own count, a fraction
 * (a recording rule's average, 3.7) is split between its two neighbouring
 * counts in proportion (0.3 of its time at 3, 0.7 at 4), so the histogram's
 * mean is the readings' mean. A running that is NaN, infinite or negative
 * is CAL_EINVAL, and one above CAL_OP_MAX_RUNNING is CAL_ERANGE: either
 * changes nothing (not a count the histogram can hold: never read it as 0,
 * "idle", nor as the largest count). waiting NAN: not exposed; negative or
 * infinite waiting is taken as unknown. The previous reading's values are
 * credited with the time since it. */
int  cal_op_add(cal_oppoint *op, int64_t t_ns, double running, double waiting);
/* Credit the last reading up to t_ns (the end of the watch). */
void cal_op_close(cal_oppoint *op, int64_t t_ns);

typedef struct cal_op_summary {
    double total_s;         /* time covered */
    double busy_s;          /* time with >= 1 running */
    double mean;            /* time-weighted mean running, of the readings as read */
    int    p50, p90, p99;   /* time-weighted percentiles: the smallest count c
                               with share of time at <= c >= p (the inverse of
                               the time-weighted CDF) */
    double share[5];        /* share of time at 0, 1, 2-4, 5-8, 9+ */
    int    band_lo, band_hi;/* narrowest range of counts >= 1 holding >= 90 %
                               of the busy time; 0, 0 when never busy */
    double band_share;      /* its share of the busy time */
    double band_share_all;  /* its share of all time */
    double running_max;     /* the largest reading, as read */
    size_t fractional;      /* readings that were not whole numbers */
    double first_fraction;  /* the first of them, as read; NAN none */
    int    has_waiting;
    double waiting_mean;    /* time-weighted, where known */
    double waiting_max;
    double waiting_share;   /* share of (known) time with >= 1 waiting */
} cal_op_summary;

/* The bucket labels of cal_op_summary.share. */
extern const char *const cal_op_share_names[5];

/* CAL_OK, or CAL_ENOTFOUND when no time has been covered (fewer than two
 * readings, or no close). */
int  cal_op_summarize(const cal_oppoint *op, cal_op_summary *out);
/* SPEC 1.2's sentence: "--max-num-seqs 64 is a ceiling, not the operating
 * point; here 1-4 requests ran 93 % of the busy time: benchmark at
 * concurrency 1-4". ceiling <= 0 or NAN: unknown. Returns buf. */
char *cal_op_verdict(const cal_op_summary *s, double ceiling, char *buf, size_t n);

/* ---- memory slope ------------------------------------------------------ */

typedef struct cal_leak {
    cal_linfit fit;         /* rss bytes on seconds (fit.b in B/s) */
    double slope_bps;       /* B/s */
    double half_bps;        /* ± of the slope's CI, B/s (NAN when n < 3) */
    double resolution_b;    /* the reading resolution used, bytes */
    double watched_s;       /* last − first reading time */
    double min_watch_s;     /* SPEC 1.4: resolution ÷ slope, with the largest
                               slope the CI allows (|b| + half): a leak at that
                               rate moves the reading by one resolution step */
    int    flat;            /* 1: the CI contains zero */
    int    enough;          /* 1: watched_s >= min_watch_s */
} cal_leak;

/* Fit rss_b[n] over t_s[n] (seconds, distinct). resolution_b <= 0: the
 * larger of 1 kB (the kB of /proc VmRSS) and the residual sd around the
 * line. level: CI level (0 = 0.95). CAL_EINVAL: n < 3 or non-finite;
 * CAL_ERANGE: two readings at the same time. */
int   cal_leak_judge(const double *t_s, const double *rss_b, size_t n, double resolution_b,
                     double level, cal_leak *out);
/* "slope +1.20 MB/min (CI ±0.30): not flat; watch at least 0.8 min to call it
 * flat at a 1.00 MB resolution (watched 5.0 min)". Returns buf. */
char *cal_leak_text(const cal_leak *l, char *buf, size_t n);

#endif
