/* caliper — the merge's private parts shared by its files: shard.c
 * (write, read, merge) and shard_check.c (what makes shards one run). */
#ifndef CALIPER_SHARD_INTERNAL_H
#define CALIPER_SHARD_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/shard.h"

/* the client self-check thresholds of the run analysis (analysis.c) */
#define BUSY_MAX 0.5
#define LAG_MAX_MS 5.0

/* Each CAL_EMISMATCH (or CAL_EPROTO, CAL_ERANGE) with why naming the field
 * and both values; CAL_OK when the shards ds[0..n) (sorted by index) agree. */
int cal_shard_same_measurement(cal_shard_doc **ds, size_t n, char *why, size_t why_len);
int cal_shard_same_run(cal_shard_doc **ds, size_t n, char *why, size_t why_len);
/* delta: each shard's shift onto shard 1's clock; measured: every shard
 * carries a measured offset. */
int cal_shard_plausible_clocks(cal_shard_doc **ds, size_t n, const int64_t *delta, int measured,
                               char *why, size_t why_len);

#endif
