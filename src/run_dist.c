/* caliper run --shard / --start-at / --mpi: the command line's side of a run
 * measured by several clients (run_dist.h; the split and the merge are
 * lib/protocol/shard.c, the MPI calls mpi/run_mpi.c). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/platform.h"
#include "caliper/shard.h"
#include "cli.h"
#include "mpi_ops.h"
#include "run_dist.h"
#include "run_view.h"

#define CMD "run"
/* --mpi: rank 0 starts everyone this long after the offsets are known, so
 * each rank has reached its engine and built its first prompts */
#define MPI_START_MARGIN_NS 3000000000LL
#define OFFSET_PINGS 32

int dist_parse_shard(const char *arg, dist_opts *o)
{
    /* strtol, not sscanf's %d: a number past int's range is refused as it
     * was written, not wrapped into another shard */
    char *end = NULL;
    errno = 0;
    long i = strtol(arg, &end, 10), n = 0;
    int bad = errno || end == arg || *end != '/' || !isdigit((unsigned char)end[1]);
    if (!bad) {
        const char *q = end + 1;
        n = strtol(q, &end, 10);
        bad = errno || end == q || *end;
    }
    if (bad || n < 1 || n > INT_MAX || i < 1 || i > n)
        return cli_usage_error(CMD, "--shard: \"%s\" is not I/N with 1 <= I <= N", arg);
    o->shard_i = (int)i;
    o->shard_n = (int)n;
    return 0;
}

int dist_parse_start(const char *arg, dist_opts *o)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    char *end = NULL;
    double s = strtod(arg, &end);
    if (end != arg && !*end && s > 0 && s < 4e9) {
        o->start_at_wall_ns = (int64_t)(s * 1e9);
    } else {
        end = strptime(arg, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!end || (strcmp(end, "Z") && strcmp(end, "+00:00")))
            return cli_usage_error(CMD, "--start-at: \"%s\" is neither Unix seconds nor a UTC time "
                                        "like 2026-12-01T13:00:00Z", arg);
        o->start_at_wall_ns = (int64_t)timegm(&tm) * 1000000000LL;
    }
    o->start_at_given = 1;
    return 0;
}

/* The weak default: no MPI in this binary (mpi_ops.h). */
__attribute__((weak)) const cli_mpi_ops *cli_mpi = NULL;

int dist_exec_mpi(int argc, char **argv)
{
    char self[PATH_MAX], path[PATH_MAX + 16], why[200];
    const char *exe = cal_plat_self_exe(why, sizeof why);
    if (!exe) return cli_usage_error(CMD, "--mpi: cannot find this program's path: %s", why);
    /* where it lies (Linux names it /proc/self/exe): caliper-mpi is beside it */
    if (!realpath(exe, self)) snprintf(self, sizeof self, "%s", exe);
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(path, sizeof path, "%s/caliper-mpi", self);
    if (access(path, X_OK) != 0)
        return cli_usage_error(CMD, "--mpi: this caliper was built without MPI and %s is absent "
                                    "(install mpicc, e.g. Debian's libopenmpi-dev, and rebuild)", path);
    char **av = calloc((size_t)argc + 2, sizeof *av);
    if (!av) return cli_fail(CMD, "out of memory");
    av[0] = path;
    for (int i = 0; i < argc; i++) av[i + 1] = argv[i];
    fflush(NULL);
    execv(path, av);
    free(av);
    return cli_usage_error(CMD, "--mpi: cannot run %s", path);
}

int dist_begin(const dist_opts *o, cal_run_plan *plan, dist *d, const char **db)
{
    memset(d, 0, sizeof *d);
    d->info.offset_uncertainty_ns = -1;
    int64_t start_mono = 0;
    if (o->start_at_given) start_mono = cal_now_ns() + (o->start_at_wall_ns - cal_wall_ns());
    if (!o->mpi && !o->shard_n) {
        plan->start_mono_ns = start_mono;
        return 0;
    }
    d->active = 1;
    int i = o->shard_i - 1, n = o->shard_n;
    if (o->mpi) {
        d->mpi = 1;
        if (cli_mpi->init(NULL, NULL, &d->rank, &d->size))
            return cli_fail(CMD, "--mpi: MPI_Init failed");
        int64_t off = 0, unc = 0;
        if (cli_mpi->clock_offset(OFFSET_PINGS, &off, &unc)) {
            cli_mpi->abort(CLI_FAIL);
            return cli_fail(CMD, "--mpi: measuring the clock offset to rank 0 failed");
        }
        d->info.offset_ns = off;
        d->info.offset_uncertainty_ns = unc;
        /* rank 0 plans: the seed every share derives from, and the start */
        int64_t hdr[2] = {(int64_t)plan->seed,
                          start_mono ? start_mono : cal_now_ns() + MPI_START_MARGIN_NS};
        if (cli_mpi->bcast(hdr, sizeof hdr, 0)) {
            cli_mpi->abort(CLI_FAIL);
            return cli_fail(CMD, "--mpi: broadcasting the plan failed");
        }
        plan->seed = (uint64_t)hdr[0];
        start_mono = hdr[1] + off;          /* rank 0's instant on this clock */
        i = d->rank;
        n = d->size;
        const char *tmp = getenv("TMPDIR");
        snprintf(d->tmp_db, sizeof d->tmp_db, "%s/caliper-rank%d-%ld.db", tmp && *tmp ? tmp : "/tmp",
                 d->rank, (long)getpid());
        unlink(d->tmp_db);
        *db = d->tmp_db;
    }
    d->info.index = i;
    d->info.count = n;
    /* the merge holds shards that claim one start to it (shard.h) */
    d->info.common_start = o->start_at_given || o->mpi;
    cal_run_plan full = *plan;
    char why[256];
    if (cal_shard_plan(&full, i, n, plan, why, sizeof why)) {
        if (d->mpi) cli_mpi->abort(CLI_USAGE);
        return cli_usage_error(CMD, "--%s", why);   /* the split names a field its flag spells */
    }
    plan->start_mono_ns = start_mono;
    return 0;
}

static int write_file(const char *path, const char *s, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    size_t w = fwrite(s, 1, n, f);
    int rc = fclose(f);
    return w == n && rc == 0 ? 0 : -1;
}

static void remove_store(const char *path)
{
    char p[300];
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path);
    unlink(p);
}

/* Rank 0: merge the gathered documents into final_db and show the result. */
static int merge_at_root(char **docs, size_t *lens, int size, const char *final_db,
                         const char *json, const char *label)
{
    cal_shard_doc **ds = calloc((size_t)size, sizeof *ds);
    if (!ds) return cli_fail(CMD, "out of memory");
    int code = CLI_OK;
    char why[512], name[32];
    for (int r = 0; r < size && code == CLI_OK; r++) {
        snprintf(name, sizeof name, "rank %d", r);
        if (!lens[r]) code = cli_fail(CMD, "--mpi: rank %d stored no run: nothing to merge", r);
        else if (cal_shard_read(docs[r], lens[r], name, &ds[r], why, sizeof why))
            code = cli_fail(CMD, "--mpi: %s", why);
    }
    cal_store *st = NULL;
    int64_t id = 0;
    if (code == CLI_OK && cal_store_open(final_db, &st) != CAL_OK)
        code = cli_fail(CMD, "--db: cannot open \"%s\"", final_db);
    if (code == CLI_OK && cal_shard_merge(st, ds, (size_t)size, label, &id, why, sizeof why))
        code = cli_fail(CMD, "--mpi: %s", why);
    cal_run_data *d = NULL;
    if (code == CLI_OK && cal_store_load_run(st, id, 0, &d) == CAL_OK) {
        fprintf(stderr, "\ncaliper run: %d ranks merged into run %lld\n", size, (long long)id);
        run_view_print(stdout, d, final_db);
        fflush(stdout);
        if (json) {
            FILE *jf = fopen(json, "w");
            if (!jf || run_view_json(jf, d) != 0) code = cli_fail(CMD, "--json: cannot write \"%s\"", json);
            if (jf) fclose(jf);
        }
        for (size_t k = 0; k < d->n_cells; k++)
            if (d->cells[k].sum.failed > 0 && code == CLI_OK) code = CLI_FAIL;
    }
    cal_run_data_free(&d);
    cal_store_close(&st);
    for (int r = 0; r < size; r++) cal_shard_free(&ds[r]);
    free(ds);
    return code;
}

int dist_end(dist *d, cal_store *st, int64_t run_id, const char *final_db, const char *json,
             const char *label, int exit_code)
{
    if (!d->active) return exit_code;
    d->ended = 1;
    char *doc = NULL;
    size_t len = 0;
    int rc = run_id > 0 ? cal_shard_write(st, run_id, &d->info, &doc, &len) : CAL_ENOTFOUND;
    if (rc && run_id > 0)
        fprintf(stderr, "caliper run: shard document: %s: %s\n", cal_strerror(rc), cal_store_errmsg(st));
    if (!d->mpi) {
        if (rc) exit_code = CLI_FAIL;
        else if (write_file(json, doc, len))
            exit_code = cli_fail(CMD, "--json: cannot write \"%s\"", json);
        else
            fprintf(stderr, "caliper run: shard %d/%d written to %s (merge with caliper merge)\n",
                    d->info.index + 1, d->info.count, json);
        free(doc);
        return exit_code;
    }
    char **docs = NULL;
    size_t *lens = NULL;
    if (cli_mpi->gather(rc ? "" : doc, rc ? 0 : len, &docs, &lens)) {
        free(doc);
        cli_mpi->abort(CLI_FAIL);
        return cli_fail(CMD, "--mpi: sending the results to rank 0 failed");
    }
    free(doc);
    if (d->rank == 0) {
        int code = merge_at_root(docs, lens, d->size, final_db, json, label);
        if (code != CLI_OK || exit_code == CLI_OK) exit_code = code;
        for (int r = 0; r < d->size; r++) free(docs[r]);
        free(docs);
        free(lens);
    }
    cli_mpi->finalize();
    return exit_code;
}

void dist_cleanup(dist *d)
{
    if (d->tmp_db[0]) remove_store(d->tmp_db);
    /* a rank that failed before sending would leave rank 0 waiting */
    if (d->mpi && !d->ended) cli_mpi->abort(CLI_FAIL);
}
