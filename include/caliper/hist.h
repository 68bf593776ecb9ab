/* caliper histograms — mergeable log-linear latency histograms (HDR-style)
 * that keep a cell's TTFT, ITL, TPOT and E2E distributions in fixed memory
 * however long the run, so raw chunk timestamps can be dropped
 * (--keep-chunks) and shards or MPI ranks merged by adding counts.
 *
 * Buckets: values are ns; below 128 ns one bucket per ns (exact); above,
 * every power of two is split into 64 equal buckets, so a bucket is at most
 * 1/64 of its lower bound wide and its midpoint is within 1/128 (0.78 %) of
 * every value in it: CAL_HIST_REL_ERROR. Values from 2^43 ns (2.4 h) up
 * share the top bucket (max_ns stays exact). Count, min, max, sum and sum of
 * squares are kept exactly, so the mean and standard deviation equal the raw
 * ones; percentiles are within CAL_HIST_REL_ERROR of the raw type-7
 * percentile (stats.h) over the same values.
 *
 * Memory: a cal_hist is a fixed ~19.5 KB struct (no heap); its serialised
 * form holds only non-empty buckets (10 bytes each: a few KB for a latency
 * distribution spanning three decades). Not thread-safe: one writer. */
#ifndef CALIPER_HIST_H
#define CALIPER_HIST_H
#include <stddef.h>
#include <stdint.h>

#define CAL_HIST_LINEAR   128                 /* exact buckets, 0..127 ns */
#define CAL_HIST_SUB      64                  /* buckets per power of two above */
#define CAL_HIST_TOP_BIT  43                  /* 2^43 ns ≈ 2.4 h: the top bucket */
#define CAL_HIST_BUCKETS  (CAL_HIST_LINEAR + (CAL_HIST_TOP_BIT - 7) * CAL_HIST_SUB)
#define CAL_HIST_REL_ERROR (1.0 / 128)        /* bound on |hist − raw| ÷ raw */

typedef struct cal_hist {
    uint64_t n;                               /* values recorded */
    int64_t  min_ns, max_ns;                  /* exact; 0 when n == 0 */
    double   sum_ns, sumsq_ns2;               /* exact sums (for mean and sd) */
    uint64_t counts[CAL_HIST_BUCKETS];        /* [bucket] */
} cal_hist;

/* The latency distributions kept per cell, in this order. */
typedef enum cal_hist_metric {
    CAL_HIST_TTFT = 0, CAL_HIST_ITL, CAL_HIST_TPOT, CAL_HIST_E2E, CAL_HIST_N_METRIC
} cal_hist_metric;
const char *cal_hist_metric_name(cal_hist_metric m);   /* "ttft", "itl", "tpot", "e2el" */

void cal_hist_init(cal_hist *h);                       /* empty */
/* Record one value (ns; negative values are recorded as 0). */
void cal_hist_add(cal_hist *h, int64_t v_ns);
/* dst += src (counts, sums, min, max). */
void cal_hist_merge(cal_hist *dst, const cal_hist *src);
/* The bucket of a value, and a bucket's lowest value and width (ns). */
int     cal_hist_bucket(int64_t v_ns);
int64_t cal_hist_bucket_lo(int b);
int64_t cal_hist_bucket_width(int b);

/* Percentile p in [0,100] in ms, type 7 (linear interpolation between the
 * closest ranks, as cal_stats_percentile) over bucket midpoints clamped to
 * [min, max]; NAN when empty. */
double cal_hist_percentile_ms(const cal_hist *h, double p);
double cal_hist_mean_ms(const cal_hist *h);            /* NAN when empty */
double cal_hist_sd_ms(const cal_hist *h);              /* sample sd; NAN when n < 2 */

/* Serialise: a "CH1" header, n, min, max, both sums, then (u16 bucket, u64
 * count) for each non-empty bucket, little-endian. *out malloc'd.
 * CAL_ENOMEM. */
int cal_hist_encode(const cal_hist *h, uint8_t **out, size_t *out_bytes);
/* Parse what encode wrote (outside input: every field is checked; buckets
 * ascending, counts adding up to n, min <= max): CAL_EPROTO naming what is
 * wrong in why[why_len] (may be NULL), h left empty. */
int cal_hist_decode(const uint8_t *blob, size_t bytes, cal_hist *h, char *why, size_t why_len);

/* One cell's distributions, one histogram per metric: what a run keeps of
 * every latency (keep.h fills it) and what the store writes beside the
 * cell. Plain data. */
typedef struct cal_cell_hists {
    cal_hist h[CAL_HIST_N_METRIC];     /* [metric] */
    int64_t  folded;                   /* requests folded */
    int64_t  chunks_dropped;           /* ok requests with chunks whose
                                          timestamps were not kept */
} cal_cell_hists;
void cal_cell_hists_init(cal_cell_hists *ch);                 /* all empty */
/* dst += src, metric by metric. */
void cal_cell_hists_merge(cal_cell_hists *dst, const cal_cell_hists *src);

#endif
