/* caliper fit — least squares lines over measured points, from CSV files or
 * from stored runs: prefill t(n) = a + b·n (and the before/after verdict),
 * peak memory vs context, decode step time vs context, memory over time
 * (leak slope). One table of fits shares parsing, loading and printing. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "caliper/error.h"
#include "caliper/fit.h"
#include "caliper/stats.h"
#include "caliper/store.h"
#include "cli.h"

#define MAX_POINTS 4096
#define MAX_SETS   2

typedef struct dataset {
    char   name[256];       /* file name, or "run 7" */
    double x[MAX_POINTS], y[MAX_POINTS];
    size_t n;
    cal_linfit fit;
} dataset;

typedef struct fit_opts {
    const char *db, *field, *x, *y, *x_unit, *y_unit;
    double level, budget, at, resolution;
    int has_budget, has_at, has_resolution, json;
} fit_opts;

struct fit_def;
typedef int (*fit_report)(const struct fit_def *d, const char *cmd, fit_opts *o,
                          dataset *sets, size_t nsets);

typedef struct fit_def {
    const char *name, *desc, *example;
    const char *x_col; cal_unit x_unit; const char *x_bare; const char *x_what;
    const char *y_col; cal_unit y_unit; const char *y_bare; const char *y_what;
    size_t min_points, max_sets;
    fit_report report;
    int (*from_run)(const char *cmd, const fit_opts *o, const char *ref, dataset *s);
} fit_def;

static const char *fmtq(cal_unit u, double v, int sig)
{
    static char pool[32][64];
    static unsigned k;
    return cal_unit_format(u, v, sig, pool[k++ % 32], 64);
}
static const char *fmtn(double v, int sig)
{
    static char pool[32][64];
    static unsigned k;
    char *b = pool[k++ % 32];
    if (!isfinite(v)) return "—";
    snprintf(b, 64, "%.*g", sig, v);
    return b;
}

static json_t *fit_json(const dataset *s)
{
    const cal_linfit *f = &s->fit;
    json_t *pts = json_array();
    for (size_t i = 0; i < s->n; i++)
        json_array_append_new(pts, json_pack("[f,f]", s->x[i], s->y[i]));
    json_t *j = json_pack("{s:s,s:I,s:f,s:f,s:f,s:f}", "source", s->name, "n", (json_int_t)f->n,
                          "a", f->a, "b", f->b, "r2", f->r2, "level", f->level);
    if (f->has_ci) {
        json_object_set_new(j, "a_ci", json_pack("[f,f]", f->a_lo, f->a_hi));
        json_object_set_new(j, "b_ci", json_pack("[f,f]", f->b_lo, f->b_hi));
        json_object_set_new(j, "se_a", json_real(f->se_a));
        json_object_set_new(j, "se_b", json_real(f->se_b));
    } else {
        json_object_set_new(j, "a_ci", json_null());
        json_object_set_new(j, "b_ci", json_null());
    }
    json_object_set_new(j, "points", pts);
    return j;
}

static int emit_json(json_t *root)
{
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!s) return cli_fail("fit", "cannot format JSON");
    puts(s);
    free(s);
    return CLI_OK;
}

/* "a = 12.3 ms (95 % CI 10.1 ms – 14.5 ms)" */
static void print_coef(const char *label, cal_unit u, double v, double lo, double hi,
                       const cal_linfit *f, const char *per)
{
    printf("  %s = %s%s", label, fmtq(u, v, 4), per);
    if (f->has_ci)
        printf("  (%g %% CI %s – %s)", f->level * 100, fmtq(u, lo, 4), fmtq(u, hi, 4));
    printf("\n");
}

static void print_fit_head(const fit_def *d, const dataset *s)
{
    const cal_linfit *f = &s->fit;
    printf("%s: %zu points (%s vs %s)%s\n", s->name, f->n, d->y_what, d->x_what,
           f->has_ci ? "" : " — two points: no confidence intervals");
}

/* ---- prefill ------------------------------------------------------------- */

static void print_delta(const char *what, cal_unit u, double scale, const char *unit_word,
                        const cal_fit_delta *dd, double level)
{
    const char *dir = dd->d >= 0 ? "grew" : "shrank";
    printf("  %s %s by %s%s (%g %% CI %s – %s)%s\n", what, dir, fmtq(u, fabs(dd->d) * scale, 3),
           unit_word, level * 100, fmtq(u, dd->lo * scale, 3), fmtq(u, dd->hi * scale, 3),
           dd->excludes_zero ? "" : ": not distinguishable from zero");
}

static int r_prefill(const fit_def *d, const char *cmd, fit_opts *o, dataset *sets, size_t ns)
{
    json_t *root = o->json ? json_object() : NULL, *fits = o->json ? json_array() : NULL;
    for (size_t i = 0; i < ns; i++) {
        const cal_linfit *f = &sets[i].fit;
        double nmax = 0, tmax = 0;
        for (size_t k = 0; k < sets[i].n; k++)
            if (sets[i].x[k] > nmax) { nmax = sets[i].x[k]; tmax = sets[i].y[k]; }
        if (o->json) {
            json_t *j = fit_json(&sets[i]);
            if (f->b > 0) json_object_set_new(j, "marginal_tok_per_s", json_real(1 / f->b));
            if (tmax > 0)
                json_object_set_new(j, "ttft_derived_tok_per_s_at_max_n", json_real(nmax / tmax));
            json_array_append_new(fits, j);
            continue;
        }
        print_fit_head(d, &sets[i]);
        printf("  t(n) = a + b·n    R² = %.4f\n", f->r2);
        print_coef("a (fixed overhead)", CAL_U_TIME, f->a, f->a_lo, f->a_hi, f, "");
        print_coef("b (per-token cost)", CAL_U_TIME, f->b, f->b_lo, f->b_hi, f, " per token");
        if (f->b > 0 && tmax > 0)
            printf("  marginal prefill rate 1 ÷ b = %s tok/s; n ÷ t at n = %s is %s tok/s\n",
                   fmtn(1 / f->b, 4), fmtn(nmax, 6), fmtn(nmax / tmax, 4));
    }
    if (ns == 2) {
        cal_fit_delta da, db;
        if (cal_fit_delta_of(&sets[0].fit, &sets[1].fit, 'a', &da) ||
            cal_fit_delta_of(&sets[0].fit, &sets[1].fit, 'b', &db)) {
            json_decref(root); json_decref(fits);
            return cli_usage_error(cmd, "comparing two fits needs at least 3 points in each");
        }
        cal_prefill_verdict v = cal_fit_prefill_verdict(&da, &db);
        static const char *const VERDICT[] = {
            "no detectable change: neither the fixed overhead nor the per-token cost moved "
            "beyond its CI",
            "the fixed overhead changed, the per-token cost did not: look at what runs once per "
            "request (scheduling, tokenisation, a new pass, a sync)",
            "the per-token cost changed, the fixed overhead did not: every token got dearer "
            "(kernels, attention, a precision or layout change)",
            "both the fixed overhead and the per-token cost changed"};
        if (o->json) {
            json_object_set_new(root, "delta_a", json_pack("{s:f,s:[f,f],s:b}", "d", da.d, "ci",
                                                           da.lo, da.hi, "excludes_zero",
                                                           da.excludes_zero));
            json_object_set_new(root, "delta_b", json_pack("{s:f,s:[f,f],s:b}", "d", db.d, "ci",
                                                           db.lo, db.hi, "excludes_zero",
                                                           db.excludes_zero));
            json_object_set_new(root, "verdict", json_string(VERDICT[v]));
        } else {
            printf("%s → %s\n", sets[0].name, sets[1].name);
            print_delta("fixed overhead", CAL_U_TIME, 1, "", &da, sets[1].fit.level);
            print_delta("per-token cost", CAL_U_TIME, 1, " per token", &db, sets[1].fit.level);
            printf("verdict: %s.\n", VERDICT[v]);
        }
    }
    const char *note = "n ÷ TTFT is only a lower bound on prefill throughput: a TTFT also "
                       "holds queueing, tokenisation, the network and the first decode step; "
                       "the slope b is the per-token cost without them.";
    if (o->json) {
        json_object_set_new(root, "fit", json_string("prefill"));
        json_object_set_new(root, "fits", fits);
        json_object_set_new(root, "note", json_string(note));
        return emit_json(root);
    }
    printf("note: %s\n", note);
    return CLI_OK;
}

/* ---- memory -------------------------------------------------------------- */

/* Largest n whose upper confidence band stays within budget (bisection). */
static double n_within(const cal_linfit *f, double budget, double hi)
{
    double h;
    if (cal_stats_linfit_at(f, 0, &h) + h > budget) return 0;
    double lo = 0;
    for (int i = 0; i < 200 && hi - lo > 0.5; i++) {
        double mid = 0.5 * (lo + hi);
        if (cal_stats_linfit_at(f, mid, &h) + h <= budget) lo = mid; else hi = mid;
    }
    return floor(lo);
}

static int r_memory(const fit_def *d, const char *cmd, fit_opts *o, dataset *sets, size_t ns)
{
    const cal_linfit *f = &sets[0].fit;
    if (!(f->b > 0))
        return cli_usage_error(cmd, "%s: peak memory does not grow with context (slope %s per "
                               "token): no usable-context limit follows", sets[0].name,
                               fmtq(CAL_U_BYTES, f->b, 3));
    double nmax = NAN, ncons = NAN;
    if (o->has_budget) {
        if (o->budget <= f->a)
            return cli_usage_error(cmd, "--budget: %s is below the fitted base %s: nothing fits",
                                   fmtq(CAL_U_BYTES, o->budget, 4), fmtq(CAL_U_BYTES, f->a, 4));
        nmax = floor((o->budget - f->a) / f->b);
        if (!isfinite(nmax))
            return cli_usage_error(cmd, "--budget: %s ÷ a slope of %s per token is not a finite "
                                   "number of tokens", fmtq(CAL_U_BYTES, o->budget, 4),
                                   fmtq(CAL_U_BYTES, f->b, 4));
        ncons = f->has_ci ? n_within(f, o->budget, nmax) : nmax;
    }
    double xmax = 0;
    for (size_t k = 0; k < sets[0].n; k++) if (sets[0].x[k] > xmax) xmax = sets[0].x[k];
    if (o->json) {
        json_t *root = json_pack("{s:s,s:o}", "fit", "memory", "line", fit_json(&sets[0]));
        if (o->has_budget) {
            json_object_set_new(root, "budget", json_real(o->budget));
            json_object_set_new(root, "n_max", json_real(nmax));
            json_object_set_new(root, "n_max_conservative", json_real(ncons));
        }
        return emit_json(root);
    }
    print_fit_head(d, &sets[0]);
    printf("  peak(n) = base + slope·n    R² = %.4f\n", f->r2);
    print_coef("base ", CAL_U_BYTES, f->a, f->a_lo, f->a_hi, f, "");
    print_coef("slope", CAL_U_BYTES, f->b, f->b_lo, f->b_hi, f, " per token");
    if (!o->has_budget) {
        printf("Each token of context adds %s of peak memory; add --budget to get the usable "
               "context.\n", fmtq(CAL_U_BYTES, f->b, 3));
        return CLI_OK;
    }
    printf("  n_max = (budget − base) ÷ slope = (%s − %s) ÷ %s = %s tokens\n",
           fmtq(CAL_U_BYTES, o->budget, 4), fmtq(CAL_U_BYTES, f->a, 4), fmtq(CAL_U_BYTES, f->b, 4),
           fmtn(nmax, 8));
    if (f->has_ci)
        printf("  within the upper %g %% band: %s tokens\n", f->level * 100, fmtn(ncons, 8));
    printf("In %s about %s tokens of context fit%s.\n", fmtq(CAL_U_BYTES, o->budget, 3),
           fmtn(nmax, 8), nmax > 2 * xmax ? ", an extrapolation past twice the longest context "
           "measured: measure nearer the limit before relying on it" : "");
    return CLI_OK;
}

/* ---- decode-context ------------------------------------------------------ */

static int r_decode(const fit_def *d, const char *cmd, fit_opts *o, dataset *sets, size_t ns)
{
    const cal_linfit *f = &sets[0].fit;
    double worst = 0;
    for (size_t k = 0; k < sets[0].n; k++) {
        double fit = f->a + f->b * sets[0].x[k];
        double r = fit > 0 ? fabs(sets[0].y[k] / fit - 1) : INFINITY;
        if (r > worst) worst = r;
    }
    double t = NAN, h = 0, tps = NAN, tlo = NAN, thi = NAN;
    if (o->has_at) {
        t = cal_stats_linfit_at(f, o->at, &h);
        if (!isfinite(t) || !isfinite(h))
            return cli_usage_error(cmd, "--at: %s is too far out: the fitted step time there is "
                                   "not a finite number", fmtn(o->at, 8));
        if (!(t > 0))
            return cli_usage_error(cmd, "--at: %s gives a step time <= 0 on the fitted line",
                                   fmtn(o->at, 8));
        tps = 1 / t;
        thi = t - h > 0 ? 1 / (t - h) : INFINITY;
        tlo = 1 / (t + h);
    }
    if (o->json) {
        json_t *root = json_pack("{s:s,s:o,s:f}", "fit", "decode-context", "line",
                                 fit_json(&sets[0]), "worst_relative_residual", worst);
        if (o->has_at) {
            json_object_set_new(root, "at", json_real(o->at));
            json_object_set_new(root, "step_s", json_real(t));
            json_object_set_new(root, "tok_per_s", json_real(tps));
            if (f->has_ci && isfinite(thi))
                json_object_set_new(root, "tok_per_s_ci", json_pack("[f,f]", tlo, thi));
        }
        return emit_json(root);
    }
    print_fit_head(d, &sets[0]);
    printf("  t(n) = a + b·n    R² = %.4f, worst point %.1f %% off the line\n", f->r2, worst * 100);
    print_coef("a", CAL_U_TIME, f->a, f->a_lo, f->a_hi, f, " per step");
    print_coef("b", CAL_U_TIME, f->b, f->b_lo, f->b_hi, f, " per step per token of context");
    if (o->has_at) {
        printf("  at n = %s: t = %s → %s tok/s", fmtn(o->at, 8), fmtq(CAL_U_TIME, t, 4),
               fmtn(tps, 4));
        if (f->has_ci && isfinite(thi))
            printf(" (%g %% CI %s – %s)", f->level * 100, fmtn(tlo, 4), fmtn(thi, 4));
        printf("\n");
    }
    if (worst > 0.05)
        printf("Step time is not linear in context here (a point is %.1f %% off the line): a "
               "cache or kernel regime changes; do not extrapolate — measure at the target.\n",
               worst * 100);
    else
        printf("Step time grows linearly with context (every point within 5 %% of the line)%s.\n",
               o->has_at ? ": the prediction holds as far as the line does" : "");
    return CLI_OK;
}

/* ---- leak ---------------------------------------------------------------- */

static int r_leak(const fit_def *d, const char *cmd, fit_opts *o, dataset *sets, size_t ns)
{
    const cal_linfit *f = &sets[0].fit;
    double span = 0, x0 = sets[0].x[0], x1 = sets[0].x[0];
    for (size_t k = 0; k < sets[0].n; k++) {
        if (sets[0].x[k] < x0) x0 = sets[0].x[k];
        if (sets[0].x[k] > x1) x1 = sets[0].x[k];
    }
    span = x1 - x0;
    int detected = f->b_lo > 0 || f->b_hi < 0;
    /* The slope to reason about: the fitted one when detected, else the
     * largest slope these samples cannot rule out — the CI's far end, and
     * never less than one reading step over the span (identical readings
     * from a coarse gauge have zero spread but prove nothing). */
    double s = detected ? fabs(f->b) : fmax(fabs(f->b_lo), fabs(f->b_hi));
    if (!detected && o->has_resolution && span > 0) s = fmax(s, o->resolution / span);
    double watch = NAN;
    if (o->has_resolution && s > 0) watch = o->resolution / s;
    if (o->json) {
        json_t *root = json_pack("{s:s,s:o,s:f,s:b}", "fit", "leak", "line", fit_json(&sets[0]),
                                 "span_s", span, "slope_detected", detected);
        json_object_set_new(root, "slope_bytes_per_s", json_real(f->b));
        if (o->has_resolution) {
            json_object_set_new(root, "resolution", json_real(o->resolution));
            json_object_set_new(root, "watch_s", isfinite(watch) ? json_real(watch) : json_null());
        }
        return emit_json(root);
    }
    print_fit_head(d, &sets[0]);
    printf("  bytes(t) = a + slope·t over %s    R² = %.4f\n", fmtq(CAL_U_TIME, span, 3), f->r2);
    print_coef("slope", CAL_U_BANDWIDTH, f->b, f->b_lo, f->b_hi, f, "");
    printf("  = %s per hour, %s per day\n", fmtq(CAL_U_BYTES, f->b * 3600, 3),
           fmtq(CAL_U_BYTES, f->b * 86400, 3));
    if (detected) {
        printf("Memory %s at %s per hour: the CI excludes zero.", f->b > 0 ? "grows" : "shrinks",
               fmtq(CAL_U_BYTES, fabs(f->b) * 3600, 3));
        if (o->has_resolution && isfinite(watch))
            printf(" At a reading resolution of %s it moves one step every %s%s",
                   fmtq(CAL_U_BYTES, o->resolution, 3), fmtq(CAL_U_TIME, watch, 3),
                   span < watch ? "; these samples span less than that." : ".");
    } else if (s > 0) {
        printf("No slope detectable over %s: these samples rule out only leaks faster than %s "
               "per hour; a slower one needs a longer watch (caliper calc leak-watch "
               "--resolution R --slope S gives how long).", fmtq(CAL_U_TIME, span, 3),
               fmtq(CAL_U_BYTES, s * 3600, 3));
    } else {
        printf("Every reading is the same: with no --resolution this proves nothing about a "
               "leak slower than one reading step per %s.", fmtq(CAL_U_TIME, span, 3));
    }
    printf("\n");
    return CLI_OK;
}

static int run_prefill(const char *cmd, const fit_opts *o, const char *ref, dataset *s);
static int run_leak(const char *cmd, const fit_opts *o, const char *ref, dataset *s);

static const fit_def FITS[] = {
    {"prefill", "t(n) = a + b·n over prompt lengths: fixed overhead vs per-token cost; two "
     "inputs give the before/after verdict",
     "caliper fit prefill before.csv after.csv   |   caliper fit prefill 7 9 --db caliper.db",
     "n", CAL_U_COUNT, NULL, "prompt tokens", "seconds", CAL_U_TIME, "s", "prefill time",
     3, 2, r_prefill, run_prefill},
    {"memory", "peak memory vs context: slope per token, usable context in --budget",
     "caliper fit memory --csv peak.csv --budget 64GB",
     "n", CAL_U_COUNT, NULL, "context tokens", "bytes", CAL_U_BYTES, "B", "peak memory",
     2, 1, r_memory, NULL},
    {"decode-context", "decode step time vs context: tok/s at --at, linearity check",
     "caliper fit decode-context --csv steps.csv --y step_ms --y-unit ms --at 256k",
     "n", CAL_U_COUNT, NULL, "context tokens", "seconds", CAL_U_TIME, "s", "step time",
     3, 1, r_decode, NULL},
    {"leak", "memory samples over time: slope with CI, how long to watch at --resolution",
     "caliper fit leak --csv rss.csv --resolution 100MB   |   caliper fit leak 7 --resolution 1MB",
     "t", CAL_U_TIME, "s", "time", "bytes", CAL_U_BYTES, "B", "memory",
     3, 1, r_leak, run_leak},
};
#define N_FITS (sizeof FITS / sizeof FITS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: caliper fit NAME [INPUT...] [--csv FILE]... [FLAGS] [--json]\n\n"
               "Least squares lines with confidence intervals over measured points.\n"
               "INPUT is a CSV file (header naming the columns) or a stored run (id, label,\n"
               "'latest'); --csv FILE names a CSV explicitly. CSV: RFC 4180 with ',' (or ';',\n"
               "tab, or spaces), every row as many fields as the header (write 0.5, not 0,5),\n"
               "'#' comments; a UTF-8 BOM is fine.\n\nfits:\n");
    for (size_t i = 0; i < N_FITS; i++)
        fprintf(f, "  %-15s %s\n", FITS[i].name, FITS[i].desc);
    fprintf(f, "\nflags:\n"
               "  --csv FILE        a CSV input (repeat for before/after)\n"
               "  --x COL, --y COL  column names (defaults per fit, shown below)\n"
               "  --x-unit U, --y-unit U  what a bare number in those columns means (ms, GB...)\n"
               "  --level P         confidence level (default 0.95)\n"
               "  --budget BYTES    memory: the budget for usable context\n"
               "  --at N            decode-context: the target context length\n"
               "  --resolution B    leak: the smallest change a memory reading shows\n"
               "  --db FILE         the store for stored runs (default caliper.db)\n"
               "  --field NAME      from a stored run — prefill: a time field of the cells\n"
               "                    (default median_ttft_ms); leak: a telemetry metric\n"
               "                    (default rss_bytes, the engine process's memory)\n"
               "  --json            machine-readable output\n\ncolumns:\n");
    for (size_t i = 0; i < N_FITS; i++)
        fprintf(f, "  %-15s x = %s (%s), y = %s (%s%s%s)\n", FITS[i].name, FITS[i].x_col,
                FITS[i].x_what, FITS[i].y_col, FITS[i].y_what,
                FITS[i].y_bare ? ", bare number in " : "", FITS[i].y_bare ? FITS[i].y_bare : "");
    fprintf(f, "\nexamples:\n");
    for (size_t i = 0; i < N_FITS; i++) fprintf(f, "  %s\n", FITS[i].example);
}

/* Every quantity these fits take is a non-negative amount: token counts,
 * seconds, bytes (leak's time axis may start anywhere). A negative or
 * non-finite one is a broken file, and fitting it would print a negative
 * per-token cost: refused, naming the row, the column and the value. */
static int check_points(const fit_def *d, const char *cmd, const fit_opts *o, const dataset *s,
                        int csv)
{
    const char *xc = o->x ? o->x : d->x_col, *yc = o->y ? o->y : d->y_col;
    int x_any = !strcmp(d->name, "leak");
    for (size_t i = 0; i < s->n; i++) {
        const char *bad = NULL;
        double v = 0;
        if (!isfinite(s->x[i]) || (!x_any && s->x[i] < 0)) { bad = xc; v = s->x[i]; }
        else if (!isfinite(s->y[i]) || s->y[i] < 0) { bad = yc; v = s->y[i]; }
        if (bad)
            return cli_usage_error(cmd, "%s: %s %zu: %s = %g is not a finite value >= 0 (%s)",
                                   s->name, csv ? "data row" : "point", i + 1, bad, v,
                                   bad == xc ? d->x_what : d->y_what);
    }
    return 0;
}

static int load_csv(const fit_def *d, const char *cmd, const fit_opts *o, const char *path,
                    dataset *s)
{
    char why[320];
    cal_csv_col cols[2] = {
        {o->x ? o->x : d->x_col, d->x_unit, o->x_unit ? o->x_unit : d->x_bare, s->x},
        {o->y ? o->y : d->y_col, d->y_unit, o->y_unit ? o->y_unit : d->y_bare, s->y}};
    int rc = cal_csv_columns_file(path, cols, 2, MAX_POINTS, &s->n, why, sizeof why);
    if (rc) return cli_usage_error(cmd, "%s: %s", path, why[0] ? why : cal_strerror(rc));
    snprintf(s->name, sizeof s->name, "%s", path);
    return 0;
}

/* Open the store and load one run (cells and telemetry, no requests). */
static int open_run(const char *cmd, const fit_opts *o, const char *ref, cal_run_data **rd)
{
    struct stat st;
    if (stat(o->db, &st) != 0)
        return cli_usage_error(cmd, "\"%s\" is neither a CSV file nor a run: no store at %s "
                               "(--db)", ref, o->db);
    cal_store *db = NULL;
    char why[400];   /* read-only: fitting a run never writes the store */
    int rc = cal_store_open_ex(o->db, CAL_STORE_READONLY, &db, why, sizeof why);
    if (rc) return cli_fail(cmd, "--db: %s", why);
    int64_t id;
    rc = cal_store_find_run(db, ref, &id);
    if (rc) {
        cal_store_close(&db);
        return cli_usage_error(cmd, "\"%s\" is neither a CSV file nor a run in %s", ref, o->db);
    }
    rc = cal_store_load_run(db, id, CAL_LOAD_NO_REQS, rd);
    cal_store_close(&db);
    if (rc) return cli_fail(cmd, "run %s: cannot load (%s)", ref, cal_strerror(rc));
    return 0;
}

/* Prompt-sweep cells of a stored run → (prompt tokens, median over shots of
 * the field, in seconds). Warm-up cells and cells without the field are
 * left out. */
static int run_prefill(const char *cmd, const fit_opts *o, const char *ref, dataset *s)
{
    const char *fname = o->field ? o->field : "median_ttft_ms";
    const cal_field *fld = cal_summary_field(fname);
    if (!fld) return cli_usage_error(cmd, "--field: \"%s\" is not a cell field", fname);
    double scale = !strcmp(fld->unit, "ms") ? 1e-3 : !strcmp(fld->unit, "s") ? 1 : 0;
    if (scale == 0)
        return cli_usage_error(cmd, "--field: \"%s\" is in %s, not a time", fname,
                               fld->unit[0] ? fld->unit : "no unit");
    cal_run_data *rd = NULL;
    int rc = open_run(cmd, o, ref, &rd);
    if (rc) return rc;
    /* group by prompt length; the median over shots is the point */
    double vals[256];
    s->n = 0;
    int sweep = 0;
    for (size_t i = 0; i < rd->n_cells; i++) sweep |= rd->cells[i].kind == CAL_CELL_PROMPT_SWEEP;
    for (size_t i = 0; i < rd->n_cells && s->n < MAX_POINTS; i++) {
        const cal_cell *c = &rd->cells[i];
        if ((sweep && c->kind != CAL_CELL_PROMPT_SWEEP) || c->prompt_tokens <= 0) continue;
        int seen = 0;
        for (size_t k = 0; k < s->n; k++) if (s->x[k] == c->prompt_tokens) seen = 1;
        if (seen) continue;
        size_t nv = 0;
        for (size_t j = i; j < rd->n_cells && nv < 256; j++) {
            const cal_cell *e = &rd->cells[j];
            if (e->prompt_tokens != c->prompt_tokens || (sweep && e->kind != CAL_CELL_PROMPT_SWEEP) ||
                e->shot_kind == CAL_SHOT_WARMUP)
                continue;
            double v = cal_summary_get(&e->sum, fld);
            if (isfinite(v)) vals[nv++] = v * scale;
        }
        if (nv == 0) continue;
        s->x[s->n] = c->prompt_tokens;
        s->y[s->n++] = cal_stats_median(vals, nv);
    }
    snprintf(s->name, sizeof s->name, "run %lld (%s%s)", (long long)rd->run.id,
             rd->run.label ? rd->run.label : "no label", sweep ? ", prompt sweep" : "");
    cal_run_data_free(&rd);
    if (s->n == 0)
        return cli_usage_error(cmd, "run %s has no cells with a prompt length and %s", ref, fname);
    return 0;
}

/* A memory metric of a stored run's telemetry (default the engine process's
 * rss_bytes) → (seconds since its first sample, bytes). Long runs are thinned
 * evenly to MAX_POINTS samples. */
static int run_leak(const char *cmd, const fit_opts *o, const char *ref, dataset *s)
{
    const char *metric = o->field ? o->field : "rss_bytes";
    cal_run_data *rd = NULL;
    int rc = open_run(cmd, o, ref, &rd);
    if (rc) return rc;
    size_t total = 0;
    for (size_t i = 0; i < rd->n_tel; i++)
        if (!strcmp(rd->tel[i].metric, metric) && isfinite(rd->tel[i].value)) total++;
    size_t step = total > MAX_POINTS ? (total + MAX_POINTS - 1) / MAX_POINTS : 1, k = 0;
    int64_t t0 = 0;
    s->n = 0;
    for (size_t i = 0; i < rd->n_tel && s->n < MAX_POINTS; i++) {
        const cal_store_tel_row *r = &rd->tel[i];
        if (strcmp(r->metric, metric) || !isfinite(r->value)) continue;
        if (k++ % step) continue;
        if (s->n == 0) t0 = r->t_ns;
        /* two backends at one instant: keep the first */
        if (s->n && (double)(r->t_ns - t0) / 1e9 == s->x[s->n - 1]) continue;
        s->x[s->n] = (double)(r->t_ns - t0) / 1e9;
        s->y[s->n++] = r->value;
    }
    snprintf(s->name, sizeof s->name, "run %lld (%s), telemetry %s", (long long)rd->run.id,
             rd->run.label ? rd->run.label : "no label", metric);
    cal_run_data_free(&rd);
    if (s->n == 0)
        return cli_usage_error(cmd, "run %s has no telemetry samples of \"%s\" (--field; was it "
                               "run with --no-telemetry?)", ref, metric);
    return 0;
}

int cmd_fit(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return CLI_USAGE; }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) { usage(stdout); return CLI_OK; }
    const fit_def *d = NULL;
    for (size_t i = 0; i < N_FITS; i++) if (!strcmp(name, FITS[i].name)) d = &FITS[i];
    if (!d) return cli_usage_error("fit", "\"%s\" is not a fit (prefill, memory, "
                                   "decode-context, leak)", name);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "fit %s", d->name);
    fit_opts o = {.db = "caliper.db", .level = 0.95};
    const char *inputs[MAX_SETS + 1];
    int is_csv[MAX_SETS + 1];
    size_t nin = 0;
    static const struct option opts[] = {
        {"csv", required_argument, 0, 'c'}, {"x", required_argument, 0, 'x'},
        {"y", required_argument, 0, 'y'}, {"x-unit", required_argument, 0, 'X'},
        {"y-unit", required_argument, 0, 'Y'}, {"level", required_argument, 0, 'l'},
        {"budget", required_argument, 0, 'b'}, {"at", required_argument, 0, 'a'},
        {"resolution", required_argument, 0, 'r'}, {"db", required_argument, 0, 'd'},
        {"field", required_argument, 0, 'f'}, {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 0;
    opterr = 0;
    int c;
    argc--; argv++;
    /* "-": inputs come back in the order given, positional or --csv */
    while ((c = getopt_long(argc, argv, "-h", opts, NULL)) != -1) {
        int rc = 0;
        struct stat st;
        switch (c) {
        case 'h': usage(stdout); return CLI_OK;
        case 1:
            if (nin == d->max_sets)
                return cli_usage_error(cmd, "\"%s\": at most %zu inputs", optarg, d->max_sets);
            inputs[nin] = optarg;
            is_csv[nin++] = stat(optarg, &st) == 0 && S_ISREG(st.st_mode);
            break;
        case 'c':
            if (nin == d->max_sets)
                return cli_usage_error(cmd, "--csv: at most %zu inputs", d->max_sets);
            inputs[nin] = optarg; is_csv[nin++] = 1;
            break;
        case 'x': o.x = optarg; break;
        case 'y': o.y = optarg; break;
        case 'X': o.x_unit = optarg; break;
        case 'Y': o.y_unit = optarg; break;
        case 'l':
            rc = cli_parse_unit(cmd, "--level", optarg, CAL_U_RATIO, NULL, &o.level);
            if (!rc && !(o.level > 0 && o.level < 1))
                return cli_usage_error(cmd, "--level: \"%s\" is not in (0, 1)", optarg);
            break;
        case 'b':
            rc = cli_parse_unit(cmd, "--budget", optarg, CAL_U_BYTES, NULL, &o.budget);
            if (!rc && !(o.budget > 0))
                return cli_usage_error(cmd, "--budget: \"%s\" must be > 0", optarg);
            o.has_budget = 1;
            break;
        case 'a':
            rc = cli_parse_unit(cmd, "--at", optarg, CAL_U_COUNT, NULL, &o.at);
            if (!rc && o.at < 0) return cli_usage_error(cmd, "--at: \"%s\" must be >= 0", optarg);
            o.has_at = 1;
            break;
        case 'r':
            rc = cli_parse_unit(cmd, "--resolution", optarg, CAL_U_BYTES, NULL, &o.resolution);
            if (!rc && !(o.resolution > 0))
                return cli_usage_error(cmd, "--resolution: \"%s\" must be > 0", optarg);
            o.has_resolution = 1;
            break;
        case 'd':
            if (!*optarg) return cli_usage_error(cmd, "--db: \"\" is empty: give the store's file");
            o.db = optarg;
            break;
        case 'f': o.field = optarg; break;
        case 'j': o.json = 1; break;
        default:
            return cli_usage_error(cmd, "unknown flag or missing value: %s", argv[optind - 1]);
        }
        if (rc) return rc;
    }
    /* bare-unit names must be units of the column's kind */
    double probe;
    if (o.x_unit && cal_unit_parse(d->x_unit, "1", o.x_unit, &probe))
        return cli_usage_error(cmd, "--x-unit: \"%s\" is not a %s unit", o.x_unit,
                               cal_unit_name(d->x_unit));
    if (o.y_unit && cal_unit_parse(d->y_unit, "1", o.y_unit, &probe))
        return cli_usage_error(cmd, "--y-unit: \"%s\" is not a %s unit", o.y_unit,
                               cal_unit_name(d->y_unit));
    if (nin == 0) return cli_usage_error(cmd, "an input is required: a CSV file or a stored run");
    dataset *sets = calloc(nin, sizeof *sets);
    if (!sets) return cli_fail(cmd, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < nin && !rc; i++) {
        if (is_csv[i]) rc = load_csv(d, cmd, &o, inputs[i], &sets[i]);
        else if (d->from_run) rc = d->from_run(cmd, &o, inputs[i], &sets[i]);
        else rc = cli_usage_error(cmd, "\"%s\" is not a file: fit %s reads CSV (stored runs "
                                  "feed fit prefill and fit leak)", inputs[i], d->name);
        if (rc) break;
        if ((rc = check_points(d, cmd, &o, &sets[i], is_csv[i]))) break;
        size_t di = 0, dj = 0;
        int e = cal_fit_line(sets[i].x, sets[i].y, sets[i].n, d->min_points, o.level,
                             &sets[i].fit, &di, &dj);
        if (e == CAL_EINVAL && sets[i].n < d->min_points)
            rc = cli_usage_error(cmd, "%s: %zu points; fit %s needs at least %zu", sets[i].name,
                                 sets[i].n, d->name, d->min_points);
        else if (e == CAL_ERANGE)
            rc = cli_usage_error(cmd, "%s: two points have the same x = %s (data rows %zu and "
                                 "%zu): give one value per x (e.g. the median of its shots)",
                                 sets[i].name, fmtn(sets[i].x[di], 10), di + 1, dj + 1);
        else if (e == CAL_ETOOBIG)
            rc = cli_usage_error(cmd, "%s: the values are too large to fit a line in double "
                                 "precision (a sum, coefficient or R² would not be finite): "
                                 "scale them into a smaller unit", sets[i].name);
        else if (e)
            rc = cli_usage_error(cmd, "%s: the points do not determine a line (%s)",
                                 sets[i].name, cal_strerror(e));
    }
    if (!rc) rc = d->report(d, cmd, &o, sets, nin);
    free(sets);
    return rc;
}
