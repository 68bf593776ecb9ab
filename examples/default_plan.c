/* The calibrated default protocol from a program: a served target (an
 * OpenAI-compatible URL) measured with cal_run_plan_default() and nothing
 * else, stored like `caliper run --url URL` stores its run. The stored
 * protocol is the same as the CLI's with no shot flags: that is what
 * "default" means, and tests/e2e/test_examples.sh checks it.
 *
 * Build against an installed caliper (make install PREFIX=...):
 *   cc -std=c11 -O2 examples/default_plan.c -o default_plan \
 *      $(pkg-config --cflags --libs caliper)
 * Run:
 *   caliper serve --preset tiny --port 8080 &
 *   ./default_plan http://127.0.0.1:8080 runs.db
 *   caliper show --db runs.db latest */
#include <stdio.h>
#include <string.h>
#include <caliper/error.h>
#include <caliper/run.h>
#include <caliper/store.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s URL DB\n", argv[0]);
        return 2;
    }
    cal_served_config sc;
    memset(&sc, 0, sizeof sc);
    sc.target.kind = CAL_TARGET_URL;
    sc.target.url = argv[1];
    sc.probe.ignore_eos = 1;    /* the default output policy: fixed length */
    sc.probe.keep_chunks = 1;
    cal_run_target *t = NULL;
    int rc = cal_run_target_served(&sc, &t);
    if (rc) {
        fprintf(stderr, "target: %s\n", cal_strerror(rc));
        return 1;
    }
    cal_store *st = NULL;
    if ((rc = cal_store_open(argv[2], &st))) {
        fprintf(stderr, "store %s: %s\n", argv[2], cal_strerror(rc));
        cal_run_target_free(&t);
        return 1;
    }
    cal_run_plan plan;
    cal_run_plan_default(&plan);
    plan.telemetry = 0;         /* not part of the protocol: the run is quicker */
    plan.build = "examples/default_plan";
    cal_run_args args = {.plan = &plan, .store = st};
    args.targets[0] = t;
    cal_run_outcome out;
    rc = cal_run_series(&args, &out);
    if (rc == CAL_OK)
        printf("default plan: run %lld, %zu cells, status %s\n", (long long)out.run_id,
               out.data ? out.data->n_cells : 0, cal_run_status_name(out.status));
    else
        fprintf(stderr, "run: %s\n", out.message);
    int ok = rc == CAL_OK && out.status == CAL_RUN_OK;
    cal_run_outcome_clear(&out);
    cal_store_close(&st);
    cal_run_target_free(&t);
    return ok ? 0 : 1;
}
