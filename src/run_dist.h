/* caliper run, distributed — --shard I/N with --start-at (each client runs
 * its share and writes a shard document for `caliper merge`) and --mpi
 * (ranks measure their clock offsets to rank 0, start together, and rank 0
 * merges every rank's share into one stored run). shard.h holds the split
 * and the merge; this file is the command line's side of them. */
#ifndef CALIPER_RUN_DIST_H
#define CALIPER_RUN_DIST_H
#include <stdint.h>
#include "caliper/run.h"
#include "caliper/shard.h"
#include "caliper/store.h"

typedef struct dist_opts {
    int    shard_i, shard_n;     /* --shard I/N (I 1-based as given; 0: none) */
    int    start_at_given;
    int64_t start_at_wall_ns;    /* --start-at, CLOCK_REALTIME ns */
    int    mpi;                  /* --mpi */
} dist_opts;

typedef struct dist {
    int    active;               /* --shard or --mpi */
    int    mpi, rank, size;
    cal_shard_info info;
    int    ended;                /* dist_end ran */
    char   tmp_db[256];          /* --mpi: this rank's own store, removed at the end */
} dist;

/* --shard "I/N" (1 <= I <= N) and --start-at "2026-12-01T13:00:00Z" or Unix
 * seconds ("1764594000.5"): 0, or print a usage error and return 2. */
int dist_parse_shard(const char *arg, dist_opts *o);
int dist_parse_start(const char *arg, dist_opts *o);

/* Before anything is started: --mpi in a build without MPI execs
 * caliper-mpi beside this binary (returns only when it cannot: 2 with the
 * reason). argv is the subcommand's. */
int dist_exec_mpi(int argc, char **argv);

/* Set up: MPI init, seed and start instant from rank 0, clock offsets,
 * this client's share of *plan (replaced), the common start; *db becomes
 * this rank's own temporary store under --mpi. 0, or an exit code (the
 * reason printed). */
int dist_begin(const dist_opts *o, cal_run_plan *plan, dist *d, const char **db);

/* After the run (run_id in st, 0 when it never reached the store):
 * --shard writes the shard document to json; --mpi sends it to rank 0,
 * which merges every rank's into final_db, prints the merged run and writes
 * json (the merged run's export). Returns the exit code to use. */
int dist_end(dist *d, cal_store *st, int64_t run_id, const char *final_db, const char *json,
             const char *label, int exit_code);
/* After the store is closed: remove this rank's temporary store. */
void dist_cleanup(dist *d);

#endif
