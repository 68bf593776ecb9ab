/* caliper shards — one run measured by N client processes (MPI ranks, a
 * Kubernetes Indexed Job, a Slurm array) and merged into one stored run.
 *
 *   each client:  cal_shard_plan(full, i, n) → cal_run_series into its own
 *                 store → cal_shard_write (a "caliper-shard" JSON document)
 *   one place:    cal_shard_read of every document → cal_shard_merge into a
 *                 store: one run, its cells the union of the shards' cells
 *
 * The same merge serves `caliper merge F1 F2 …` and rank 0 under
 * `caliper run --mpi` (docs/distributed.md).
 *
 * Ownership: cal_shard_read returns a document freed by cal_shard_free;
 * cal_shard_write returns malloc'd text. Nothing prints. */
#ifndef CALIPER_SHARD_H
#define CALIPER_SHARD_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/keep.h"
#include "caliper/run.h"
#include "caliper/store.h"

/* Shard i (0-based) of n: every closed-loop concurrency and the request
 * count are split as evenly as integers allow (the first c mod n shards get
 * one more), an open-loop rate is divided by n (n independent Poisson
 * streams of rate r/n add up to one of rate r), and the seed is offset per
 * shard so prompts (their nonces) and arrivals differ. --duration, shots
 * and lengths are the same on every shard. CAL_EINVAL with why when a
 * concurrency or --requests is below n (some shard would get nothing). */
int cal_shard_plan(const cal_run_plan *full, int i, int n, cal_run_plan *out,
                   char *why, size_t why_len);

/* What a shard knows about itself beyond its run. */
typedef struct cal_shard_info {
    int     index, count;          /* shard index of count */
    int64_t offset_ns;             /* this client's CLOCK_MONOTONIC minus the
                                      reference's (MPI rank 0), measured */
    int64_t offset_uncertainty_ns; /* half the best round trip; -1: no offset
                                      measured (the clocks are aligned through
                                      each shard's wall clock at its start) */
    int64_t clock_resolution_ns;   /* the resolution of the clock that took the
                                      offset and every timestamp (clock_getres;
                                      cal_shard_write fills it); 0 unknown (an
                                      older document) */
    int     common_start;          /* 1: every shard started at one instant
                                      (--start-at, --mpi); 0 not; -1 unknown
                                      (an older document) */
} cal_shard_info;

/* The stored run run_id of st as a shard document (JSON, format
 * "caliper-shard" version 1): the run record, each cell with its requests
 * (every timestamp in ns as taken, chunk timestamps as stored), its
 * histograms and ITL source, and info. *out malloc'd (NUL-terminated),
 * *out_len its length. CAL_ENOTFOUND, CAL_ESTORE, CAL_ENOMEM. */
int cal_shard_write(cal_store *st, int64_t run_id, const cal_shard_info *info,
                    char **out, size_t *out_len);

/* One cell's histograms as the document carries them: each metric's
 * encoded blob (cal_hist_encode, checked by cal_hist_decode on reading),
 * a few hundred bytes where a decoded cal_cell_hists is ~78 KB; the merge
 * decodes them one cell at a time. */
typedef struct cal_shard_hists {
    uint8_t *blob[CAL_HIST_N_METRIC];   /* [metric] malloc'd */
    size_t   bytes[CAL_HIST_N_METRIC];
    int64_t  folded, chunks_dropped;
} cal_shard_hists;

/* A shard document's cells are checked against this before any is decoded,
 * and each cell's requests against the second (`run --requests` takes up
 * to 1,000,000) before they are. */
#define CAL_SHARD_MAX_CELLS (1 << 20)
#define CAL_SHARD_MAX_CELL_REQUESTS (1L << 20)

typedef struct cal_shard_doc {
    cal_shard_info  info;
    cal_run_data   *data;          /* run, cells, requests (chunks decoded) */
    cal_shard_hists *hists;        /* [data->n_cells] */
    char          (*itl_source)[16]; /* [data->n_cells] "raw" / "histogram" */
    char            host[128];     /* the shard's host name ("" unknown) */
} cal_shard_doc;

/* What a shard document says it is, without decoding its cells: its
 * shard index and count, and how many cells it holds (counted, up to
 * CAL_SHARD_MAX_CELLS + 1). A merge compares the counts of all its
 * documents before decoding any, so a document of another plan is refused
 * at the cost of reading it, not of decoding it. CAL_EPROTO with why. */
int  cal_shard_peek(const char *text, size_t len, const char *name, cal_shard_info *info,
                    size_t *n_cells, char *why, size_t why_len);

/* Parse a shard document (outside input: every field is checked against
 * what the merge indexes with it). The cells are counted against
 * CAL_SHARD_MAX_CELLS first, then decoded one at a time: no JSON tree of
 * the whole document is built. Peak memory is the text, what it decodes
 * to (requests, chunk times, encoded histograms) and one cell's tree:
 * `caliper merge` stays within 4 × its documents' total + 64 MiB
 * (tests/e2e/test_input_memory.sh).
 * CAL_EPROTO with why naming the field, CAL_ETOOBIG past the cell cap,
 * CAL_ENOMEM. name labels messages (a file name). */
int  cal_shard_read(const char *text, size_t len, const char *name, cal_shard_doc **out,
                    char *why, size_t why_len);
void cal_shard_free(cal_shard_doc **d);

/* Merge n shard documents (any order; sorted by index here) into one run in
 * st. The shards must be shards 0..n−1 of n of the same plan (same cells in
 * the same order), measured by the same build (run.build) from the same
 * base seed (each shard's seed less its offset, cal_shard_plan), against
 * the same target under the same protocol: CAL_EMISMATCH with why naming
 * the field and both values otherwise. A cell holding more requests than
 * its shard's protocol plans (cal_shard_planned_requests) is CAL_EPROTO.
 * CAL_ERANGE for clocks that cannot be one run's: shard 1's measured
 * offset (the reference's) not 0; a measured offset whose uncertainty is
 * below the resolution of the clock that measured it; a measured offset
 * more than CAL_SHARD_WALL_SKEW_NS from what the hosts' wall clocks say;
 * shards that started together (common_start) whose first cells lie more
 * than CAL_SHARD_START_SKEW_NS apart on the merged clock; or timestamps
 * that would leave the store's range. Each shard's
 * timestamps are moved onto shard 0's monotonic clock (by the measured
 * offset when every shard has one, else through each shard's wall clock at
 * its start). Each merged cell holds every shard's requests; its summary
 * is computed from that union as a single client's would be (both
 * throughput columns over the fleet's wall clock, first send to last end),
 * its histograms are the sum of the shards', and its ITL percentiles come
 * from the union's raw timestamps when every shard kept them all, else from
 * the merged histogram. The protocol records the fleet: per shard its host,
 * clock offset and uncertainty, CPU, send lag and self-check. The verdicts
 * are the library's (cal_run_verdicts) plus one sentence per shard whose
 * client saturated or whose offset uncertainty exceeds the ITL resolution
 * (the merged median ITL × CAL_HIST_REL_ERROR). *run_id: the stored run. */
int cal_shard_merge(cal_store *st, cal_shard_doc *const *docs, size_t n, const char *label,
                    int64_t *run_id, char *why, size_t why_len);

/* The most requests cell c of a shard measured under p may hold: --requests
 * (the shard's share), max(8, 2 × concurrency) for a closed loop without
 * it, 4 s of a Poisson rate (at least 8), a chat or replay turn's sessions,
 * and CAL_RUN_MAX_CELL_REQUESTS where the plan bounds it no tighter (a
 * --duration cell, another arrival pattern, a field unknown). */
struct cal_protocol;
long cal_shard_planned_requests(const struct cal_protocol *p, const cal_cell *c);

/* Bounds of one run's clocks (cal_shard_merge): the shards' first cells
 * start within this of each other when they started together, and a
 * measured offset lies within CAL_SHARD_WALL_SKEW_NS of the wall clocks'. */
#define CAL_SHARD_START_SKEW_NS (60LL * 1000000000)
#define CAL_SHARD_WALL_SKEW_NS  (3600LL * 1000000000)

/* The client self-check of one shard (the rule of the run analysis: busy
 * more than half its wall clock, or a send-lag p99 above 5 ms). */
int cal_shard_saturated(const cal_shard_doc *d, double *busy, double *lag_p99_ms);

#endif
