/* caliper merge — shard documents (`caliper run --shard I/N --json F` on each
 * client) into one stored run, with the same merge as `caliper run --mpi`
 * (caliper/shard.h, docs/distributed.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/csv.h"
#include "caliper/error.h"
#include "caliper/shard.h"
#include "caliper/store.h"
#include "cli.h"
#include "run_view.h"

#define CMD "merge"
#define MAX_DOC_BYTES ((size_t)4 << 30)   /* a shard document larger than this is refused */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper merge SHARD.json... [--db FILE] [--label NAME] [--json FILE]\n"
        "\n"
        "Store one run from the shard documents of `caliper run --shard I/N --json F`\n"
        "(every shard 1..N once, any order): each cell holds every shard's requests and\n"
        "is summarised from their union; timestamps are aligned through each shard's\n"
        "wall clock at its start. docs/distributed.md shows Kubernetes and Slurm.\n"
        "\n"
        "  --db FILE     the store to add the merged run to (default caliper.db)\n"
        "  --label NAME  a name for the merged run (default: shard 1's label)\n"
        "  --json FILE   also write the merged run as JSON (as caliper export)\n"
        "\n"
        "Exit status: 0 merged, 1 a shard could not be read or merged, 2 usage error.\n");
}

int cmd_merge(int argc, char **argv)
{
    static const struct option LONGOPTS[] = {
        {"db", required_argument, 0, 'd'}, {"label", required_argument, 0, 'l'},
        {"json", required_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = "caliper.db", *label = NULL, *json = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", LONGOPTS, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (!*optarg) return cli_usage_error(CMD, "--db: \"\" is empty: give the store's file");
            db = optarg;
            break;
        case 'l': label = optarg; break;
        case 'j': json = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default:
            if (optopt >= 256 || (optopt && optopt != '?'))
                return cli_usage_error(CMD, "%s: needs a value", argv[optind - 1]);
            return cli_usage_error(CMD, "%s: unknown option", argv[optind - 1]);
        }
    }
    int n = argc - optind;
    if (n < 1) return cli_usage_error(CMD, "no shard documents given");
    cal_shard_doc **ds = calloc((size_t)n, sizeof *ds);
    if (!ds) return cli_fail(CMD, "out of memory");
    int code = CLI_OK;
    char why[512];
    /* every document's cell count first, none decoded: a shard of another
     * plan (50,000 cells beside 3) is refused at the cost of reading it */
    size_t cells0 = 0;
    const char *first = NULL;
    for (int i = 0; i < n && code == CLI_OK; i++) {
        const char *path = argv[optind + i];
        size_t len = 0, cells = 0;
        char *text = NULL;
        cal_shard_info info;
        if (!strcmp(path, "-")) continue;   /* stdin reads once: checked when decoded */
        if (cal_csv_read_file(path, MAX_DOC_BYTES, &text, &len, why, sizeof why) ||
            cal_shard_peek(text, len, path, &info, &cells, why, sizeof why))
            code = cli_fail(CMD, "%s", why);
        else if (!first)
            first = path, cells0 = cells;
        else if (cells != cells0)
            code = cli_fail(CMD, "%s has %zu cell%s, %s has %zu: not the same plan (refused "
                            "before decoding either)", path, cells, cells == 1 ? "" : "s", first,
                            cells0);
        free(text);
    }
    for (int i = 0; i < n && code == CLI_OK; i++) {
        const char *path = argv[optind + i];
        size_t len = 0;
        char *text = NULL;
        /* the one whole-file reader (csv.h), "-" for stdin */
        if (cal_csv_read_file(path, MAX_DOC_BYTES, &text, &len, why, sizeof why))
            code = cli_fail(CMD, "%s", why);
        else if (cal_shard_read(text, len, path, &ds[i], why, sizeof why))
            code = cli_fail(CMD, "%s", why);
        free(text);
    }
    cal_store *st = NULL;
    int64_t id = 0;
    int rc;
    if (code == CLI_OK && (rc = cal_store_open(db, &st)) != CAL_OK)
        code = cli_fail(CMD, "--db: cannot open \"%s\": %s", db, cal_strerror(rc));
    if (code == CLI_OK && cal_shard_merge(st, ds, (size_t)n, label, &id, why, sizeof why))
        code = cli_fail(CMD, "%s", why);
    cal_run_data *d = NULL;
    if (code == CLI_OK) {
        if (cal_store_load_run(st, id, 0, &d) != CAL_OK) {
            code = cli_fail(CMD, "cannot load merged run %lld back: %s", (long long)id,
                            cal_store_errmsg(st));
        } else {
            fprintf(stderr, "caliper merge: %d shards stored as run %lld in %s\n", n, (long long)id, db);
            run_view_print(stdout, d, db);
            if (json) {
                FILE *jf = fopen(json, "w");
                if (!jf || run_view_json(jf, d) != 0)
                    code = cli_fail(CMD, "--json: cannot write \"%s\"", json);
                if (jf) fclose(jf);
            }
        }
    }
    cal_run_data_free(&d);
    cal_store_close(&st);
    for (int i = 0; i < n; i++) cal_shard_free(&ds[i]);
    free(ds);
    return code;
}
