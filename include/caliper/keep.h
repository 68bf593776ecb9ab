/* caliper chunk budget — `--keep-chunks all|none|N`: how many raw chunk
 * timestamps a run keeps, and the per-cell histograms (hist.h) that hold
 * every latency whatever is dropped. Each request is folded once as it
 * ends: its TTFT, TPOT and E2E (ok requests, the summary's definitions) and
 * every inter-chunk gap (ITL) go into the cell's histograms; then its
 * chunk_ns is kept whole if the run's budget still holds it, else freed
 * (n_chunks stays). So memory holds at most the budget plus the chunks of
 * the requests in flight, and a cell's ITL percentiles come from raw
 * timestamps when every request kept its chunks, from the histogram
 * otherwise (cal_keep_summary says which).
 *
 * Threads: cal_keep_fold takes the keeper's lock once per request (never
 * per chunk), so targets may call it from several loops at once. */
#ifndef CALIPER_KEEP_H
#define CALIPER_KEEP_H
#include <pthread.h>
#include <stdint.h>
#include "caliper/hist.h"
#include "caliper/probe.h"
#include "caliper/store.h"

#define CAL_KEEP_ALL (-1LL)
/* The default budget: 8 Mi timestamps a run (64 MiB in memory at most,
 * 32 MiB in the store): every run of ordinary size keeps all of them
 * (1000 requests × 1024 tokens is 1 Mi). */
#define CAL_KEEP_DEFAULT (8LL << 20)

/* Parse "all", "none" or a count (suffixes k, M: 1000s) into *limit
 * (CAL_KEEP_ALL, 0, N). CAL_EINVAL naming the value in why. */
int cal_keep_parse(const char *s, long long *limit, char *why, size_t why_len);
/* "all", "none" or the count, into buf. */
const char *cal_keep_name(long long limit, char *buf, size_t n);

/* One cell's distributions (cal_cell_hists) are in hist.h.
 * Fold one result's latencies into ch (no budget, no lock). */
void cal_cell_hists_add(cal_cell_hists *ch, const cal_req_result *r);

typedef struct cal_keep {
    long long limit;                   /* CAL_KEEP_ALL, 0 (none) or N */
    long long used;                    /* timestamps kept so far in the run */
    cal_cell_hists *cell;              /* the cell being filled, or NULL */
    int64_t  calls;                    /* on_end calls since cal_keep_begin */
    pthread_mutex_t mu;
} cal_keep;
void cal_keep_init(cal_keep *k, long long limit);
void cal_keep_destroy(cal_keep *k);
/* Start filling cell (its histograms are cleared). */
void cal_keep_begin(cal_keep *k, cal_cell_hists *cell);
/* Fold one ended request into the current cell and apply the budget. A
 * cal_load on_end hook: ud is the cal_keep. */
void cal_keep_fold(void *k, cal_req_result *r);

/* Where a cell's percentiles come from: every ITL from raw timestamps
 * ("raw") or from the histogram ("histogram", when some ok request's chunks
 * were not kept). With "histogram", the ITL fields of *s (mean, sd,
 * median, p99) are set from ch. Returns the source's name. */
const char *cal_keep_summary(const cal_cell_hists *ch, const cal_req_result *r, size_t n,
                             cal_summary *s);
/* The same rule for a cell with no results at hand (a merge whose shards
 * dropped chunks): ITL fields from ch. */
void cal_keep_itl_from_hist(const cal_cell_hists *ch, cal_summary *s);

#endif
