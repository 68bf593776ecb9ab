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

/* A shard document's cells are checked against this before any is decoded. */
#define CAL_SHARD_MAX_CELLS (1 << 20)

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
 * the same order): CAL_EMISMATCH with why otherwise; CAL_ERANGE when a
 * shard's clock is so far from shard 0's that its timestamps would leave
 * the store's range (not one run). Each shard's
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

/* The client self-check of one shard (the rule of the run analysis: busy
 * more than half its wall clock, or a send-lag p99 above 5 ms). */
int cal_shard_saturated(const cal_shard_doc *d, double *busy, double *lag_p99_ms);

#endif
