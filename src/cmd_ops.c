/* caliper ops — per-op reconciliation of one engine profile, or of two
 * engines on the same workload: per category time, calls, bytes and FLOPs
 * per token, coverage and ceiling, Amdahl what-ifs, the sorted gap list; and
 * the single-op trap (an op bench against the in-graph profile). Exit 0
 * printed, 1 a profile could not be read or reconciled, 2 usage error. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/csv.h"
#include "caliper/error.h"
#include "caliper/ops.h"
#include "caliper/report.h"
#include "caliper/units.h"
#include "cli.h"

#define CMD "ops"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper ops [OPTIONS] A [B]\n"
        "\n"
        "Per-op reconciliation: where the time per token goes in one engine (A), or\n"
        "where the gap between two engines on the same workload lies (A against B).\n"
        "Per op category: time per token and share of end to end, calls per token\n"
        "(the re-dispatch difference), bytes per token and achieved GB/s, FLOPs and\n"
        "GFLOP/s; each engine's kernel coverage and its 1/(1-coverage) ceiling; the\n"
        "gap per category sorted by size, and the part no kernel owns.\n"
        "\n"
        "A, B                per-op profiles: caliper's engine profile (caliper serve\n"
        "                    --profile), Chrome trace-event JSON (PyTorch profiler,\n"
        "                    Perfetto), or CSV (op,calls,time_ms[,bytes][,flops])\n"
        "  --map FILE        \"PATTERN CATEGORY\" lines tried before the shipped rules\n"
        "  --no-default-map  only the rules of --map\n"
        "  --tokens N[,N]    tokens each profile covers (one value: both)\n"
        "  --e2e TIME[,TIME] end-to-end time of each (bare = ms); overrides the file's\n"
        "  --run REF[,REF]   take tokens (prompt + output) and end to end (wall time)\n"
        "                    from a stored run of the same workload (id, label, latest)\n"
        "  --db FILE         the store for --run (default caliper.db)\n"
        "  --e2e-span GLOB   trace: spans whose duration is end to end (ProfilerStep#*)\n"
        "  --trace-cat CAT   trace: the event category that holds kernels (default\n"
        "                    kernel if present, else cpu_op)\n"
        "  --bandwidth BW    the machine's memory bandwidth, e.g. 200GB/s\n"
        "  --measure-bandwidth  measure it here: a STREAM-style copy of 256 MiB\n"
        "  --what-if CAT=Sx  Amdahl: end-to-end speedup if CAT ran S times faster\n"
        "                    (repeatable, e.g. --what-if attention=2x)\n"
        "  --isolated FILE   an op bench (caliper serve --op-bench) to set against A's\n"
        "                    in-graph figures: the single-op trap (also when B is one)\n"
        "  --json            the whole reconciliation as JSON (caliper.ops/1)\n"
        "  -o, --output FILE write there instead of stdout\n"
        "  -h, --help        this text\n"
        "\n"
        "Details: docs/ops.md. Exit: 0 printed, 1 a profile unreadable or\n"
        "inconsistent, 2 usage error.\n");
}

enum { O_MAP = 256, O_NODEF, O_TOKENS, O_E2E, O_SPAN, O_CAT, O_BW, O_MBW, O_WHATIF, O_ISO, O_JSON, O_RUN, O_DB };

/* "N" or "N,M" into v[2] (one value: both). */
static int parse_pair(const char *flag, const char *arg, cal_unit u, const char *bare, double v[2])
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", arg);
    char *comma = strchr(buf, ',');
    if (comma) *comma = 0;
    if (cli_parse_unit_in(CMD, flag, buf, u, bare, 0, 1e300, 1, &v[0])) return CLI_USAGE;
    v[1] = v[0];
    if (comma && cli_parse_unit_in(CMD, flag, comma + 1, u, bare, 0, 1e300, 1, &v[1])) return CLI_USAGE;
    return 0;
}

static int parse_whatif(const char *arg, cal_ops_opts *o)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= CAL_OPS_CAT_MAX)
        return cli_usage_error(CMD, "--what-if: \"%s\" is not CATEGORY=SPEEDUP (attention=2x)", arg);
    if (o->n_whatif >= CAL_OPS_MAX_WHATIF)
        return cli_usage_error(CMD, "--what-if: at most %d", CAL_OPS_MAX_WHATIF);
    double s;
    if (cal_unit_parse(CAL_U_RATIO, eq + 1, NULL, &s) || !(s > 0))
        return cli_usage_error(CMD, "--what-if: \"%s\" is not a positive speedup (2x, 67.87x)", eq + 1);
    cal_ops_whatif *w = &o->whatif[o->n_whatif++];
    memset(w, 0, sizeof *w);
    memcpy(w->cat, arg, (size_t)(eq - arg));
    w->speedup = s;
    return 0;
}

/* A stored run's tokens (prompt + output, every cell) and wall time (the
 * cells' durations): what a profile taken over that run covers. */
static int from_run(const char *ref, const char *db, double *tokens, double *e2e_s)
{
    cal_result *r = NULL;
    char err[512];
    if (cal_result_load(ref, db, &r, err, sizeof err)) return cli_fail(CMD, "--run: %s", err);
    double t = 0, d = 0;
    for (size_t i = 0; i < r->n_cells; i++) {
        const double *v = r->cells[i].v;
        if (isfinite(v[CAL_M_INPUT_TOKENS])) t += v[CAL_M_INPUT_TOKENS];
        if (isfinite(v[CAL_M_OUTPUT_TOKENS])) t += v[CAL_M_OUTPUT_TOKENS];
        if (isfinite(v[CAL_M_DURATION])) d += v[CAL_M_DURATION];
    }
    cal_result_free(&r);
    if (!(t > 0) || !(d > 0))
        return cli_fail(CMD, "--run: \"%s\" has no token counts or no duration", ref);
    *tokens = t;
    *e2e_s = d;
    return CLI_OK;
}

/* ---- the terminal table ---------------------------------------------------- */

static const char *f_num(double v, const char *fmt, char *buf, size_t n)
{
    if (!isfinite(v)) snprintf(buf, n, "—");
    else snprintf(buf, n, fmt, v);
    return buf;
}

static const char *f_bytes(double v, char *buf, size_t n)
{
    if (!isfinite(v)) { snprintf(buf, n, "—"); return buf; }
    return cal_unit_format(CAL_U_BYTES, v, 3, buf, n);
}

/* right-aligned in w columns, counting characters, not bytes ("—") */
static void cell(FILE *f, const char *s, int w)
{
    int vis = 0;
    for (const char *p = s; *p; p++)
        if (((unsigned char)*p & 0xC0) != 0x80) vis++;
    fprintf(f, "%*s%s", w > vis ? w - vis : 0, "", s);
}

static void print_table(FILE *f, const cal_ops_recon *r)
{
    size_t ns = r->n_sides;
    char b1[64];
    const char *nm[2] = {"A", "B"};
    for (size_t s = 0; s < ns; s++) {
        const cal_ops_profile *p = r->side[s].p;
        fprintf(f, "%s = %s (%s): %.0f tokens, %.4g ms end to end, %.4g ms/token\n", nm[s], p->label,
                p->source, p->tokens, p->e2e_ns * 1e-6, r->side[s].e2e_ms_per_token);
    }
    fprintf(f, "\ntime and calls per token\n%-22s", "category");
    for (size_t s = 0; s < ns; s++) fprintf(f, "  %9s ms/tok  share", nm[s]);
    if (ns == 2) fprintf(f, "   A-B ms/tok");
    for (size_t s = 0; s < ns; s++) fprintf(f, "  %s calls/tok", nm[s]);
    fprintf(f, "\n");
    for (size_t c = 0; c < r->n_cats; c++) {
        fprintf(f, "%-22s", r->cats[c]);
        for (size_t s = 0; s < ns; s++) {
            const cal_ops_cat *k = &r->side[s].cat[c];
            fprintf(f, "  ");
            cell(f, f_num(k->present ? k->ms_per_token : NAN, "%.4f", b1, sizeof b1), 16);
            fprintf(f, " ");
            cell(f, f_num(k->present ? k->share * 100 : NAN, "%.1f%%", b1, sizeof b1), 6);
        }
        if (ns == 2) { fprintf(f, "  "); cell(f, f_num(r->gap_ms[c], "%+.4f", b1, sizeof b1), 11); }
        for (size_t s = 0; s < ns; s++) {
            fprintf(f, "  ");
            cell(f, f_num(r->side[s].cat[c].present ? r->side[s].cat[c].calls_per_token : NAN, "%.2f",
                          b1, sizeof b1), 11);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "%-22s", "(outside every kernel)");
    for (size_t s = 0; s < ns; s++) {
        fprintf(f, "  ");
        cell(f, f_num(r->side[s].outside_ms_per_token, "%.4f", b1, sizeof b1), 16);
        fprintf(f, " ");
        cell(f, f_num((1 - r->side[s].coverage) * 100, "%.1f%%", b1, sizeof b1), 6);
    }
    if (ns == 2) { fprintf(f, "  "); cell(f, f_num(r->gap_outside_ms, "%+.4f", b1, sizeof b1), 11); }
    fprintf(f, "\n%-22s", "end to end");
    for (size_t s = 0; s < ns; s++) {
        fprintf(f, "  ");
        cell(f, f_num(r->side[s].e2e_ms_per_token, "%.4f", b1, sizeof b1), 16);
        fprintf(f, " ");
        cell(f, "100%", 6);
    }
    if (ns == 2) { fprintf(f, "  "); cell(f, f_num(r->gap_total_ms, "%+.4f", b1, sizeof b1), 11); }
    for (size_t s = 0; s < ns; s++) {
        fprintf(f, "  ");
        cell(f, f_num(r->side[s].calls_per_token, "%.2f", b1, sizeof b1), 11);
    }
    fprintf(f, "\n\nbytes and FLOPs per token%s", r->bandwidth_Bps > 0 ? "" : " (no --bandwidth: no share of it)");
    if (r->bandwidth_Bps > 0)
        fprintf(f, " against %s (%s)", cal_unit_format(CAL_U_BANDWIDTH, r->bandwidth_Bps, 3, b1, sizeof b1),
                r->bandwidth_source);
    fprintf(f, "\n%-22s", "category");
    for (size_t s = 0; s < ns; s++) fprintf(f, "  %s bytes/tok   %s GB/s  of bw  %s FLOP/tok  %s GFLOP/s", nm[s],
                                            nm[s], nm[s], nm[s]);
    fprintf(f, "\n");
    for (size_t c = 0; c < r->n_cats; c++) {
        fprintf(f, "%-22s", r->cats[c]);
        for (size_t s = 0; s < ns; s++) {
            const cal_ops_cat *k = &r->side[s].cat[c];
            fprintf(f, "  ");
            cell(f, f_bytes(k->bytes_per_token, b1, sizeof b1), 11);
            fprintf(f, "  ");
            cell(f, f_num(k->Bps * 1e-9, "%.2f", b1, sizeof b1), 8);
            fprintf(f, "  ");
            cell(f, f_num(k->bw_fraction * 100, "%.0f%%", b1, sizeof b1), 5);
            fprintf(f, "  ");
            cell(f, f_num(k->flops_per_token, "%.3g", b1, sizeof b1), 10);
            fprintf(f, "  ");
            cell(f, f_num(k->flops_per_s * 1e-9, "%.2f", b1, sizeof b1), 10);
        }
        fprintf(f, "\n");
    }
    for (size_t s = 0; s < ns; s++) {
        const cal_ops_side *sd = &r->side[s];
        if (!sd->n_unmatched) continue;
        fprintf(f, "\nunmatched ops of %s (%zu; counted under \"%s\"; add rules with --map):\n", nm[s],
                sd->n_unmatched, CAL_OPS_UNMATCHED);
        size_t listed = sd->n_unmatched < 64 ? sd->n_unmatched : 64;
        for (size_t i = 0; i < listed; i++) {
            const cal_ops_op *op = &sd->p->ops[sd->unmatched[i]];
            fprintf(f, "  %-48s %10.0f calls %12.4f ms\n", op->name, op->calls, op->time_ns * 1e-6);
        }
        if (listed < sd->n_unmatched) fprintf(f, "  ... and %zu more (all in --json)\n", sd->n_unmatched - listed);
    }
    fprintf(f, "\nverdicts\n");
    for (size_t s = 0; s < ns; s++) {
        const cal_ops_side *sd = &r->side[s];
        fprintf(f, "- %s: coverage %.3f: the ops account for %.4g of %.4g ms/token; ", nm[s], sd->coverage,
                sd->kernel_ms_per_token, sd->e2e_ms_per_token);
        if (isfinite(sd->ceiling))
            fprintf(f, "every known kernel at zero would give at most %.3gx\n", sd->ceiling);
        else
            fprintf(f, "no time lies outside the ops: no ceiling\n");
    }
    if (ns == 2) {
        fprintf(f, "- where the gap is (A - B, ms/token, largest first):");
        for (size_t i = 0; i < r->n_cats; i++) {
            size_t c = r->gap_order[i];
            fprintf(f, "%s %s %+.4f", i ? "," : "", r->cats[c], r->gap_ms[c]);
        }
        fprintf(f, "\n- of the %+.4f ms/token end-to-end gap, %+.4f lies inside kernels and %+.4f outside "
                   "every kernel (dispatch, launch, scheduling)\n",
                r->gap_total_ms, r->gap_kernel_ms, r->gap_outside_ms);
        fprintf(f, "- %s\n", r->biggest);
    }
    for (size_t w = 0; w < r->n_whatif; w++) {
        const cal_ops_whatif *x = &r->whatif[w];
        for (size_t s = 0; s < ns; s++)
            fprintf(f, "- what if %s ran %.4gx faster in %s: it holds %.2f%% of end to end, so %.4gx end to end "
                       "(%+.1f%%)\n", x->cat, x->speedup, nm[s], x->share[s] * 100, x->e2e[s],
                    (x->e2e[s] - 1) * 100);
    }
}

static void print_trap(FILE *f, const cal_ops_trap *t, const char *graph, const char *bench)
{
    fprintf(f, "\nthe single-op trap: each op alone (%s, %.3g tokens per call, warm caches) against the "
               "same op in the running graph (%s, %.3g tokens per step)\n", bench, t->iso_tokens_per_call, graph,
            t->graph_tokens_per_step);
    if (isfinite(t->graph_tokens_per_step) && isfinite(t->iso_tokens_per_call) &&
        fabs(t->graph_tokens_per_step / t->iso_tokens_per_call - 1) > 0.25)
        fprintf(f, "note: the shapes differ (%.3g vs %.3g tokens per call): run the bench with "
                   "--op-bench-tokens near the run's tokens per step\n",
                t->iso_tokens_per_call, t->graph_tokens_per_step);
    fprintf(f, "%-14s %16s %16s %12s\n", "op", "in-graph us/call", "alone us/call", "undercount");
    for (size_t i = 0; i < t->n_rows; i++)
        fprintf(f, "%-14s %16.2f %16.2f %11.1f%%\n", t->rows[i].op, t->rows[i].graph_call_ns * 1e-3,
                t->rows[i].iso_call_ns * 1e-3, t->rows[i].undercount * 100);
    if (t->moe_row >= 0) {
        const cal_ops_trap_row *m = &t->rows[t->moe_row];
        fprintf(f, "- the op alone %s the MoE block by %.1f%% (%.2f us alone, %.2f us in the graph per layer)\n",
                m->undercount >= 0 ? "undercounts" : "overcounts", fabs(m->undercount) * 100,
                m->iso_call_ns * 1e-3, m->graph_call_ns * 1e-3);
    }
}

int cmd_ops(int argc, char **argv)
{
    static const struct option OPTS[] = {
        {"map", required_argument, 0, O_MAP}, {"no-default-map", no_argument, 0, O_NODEF},
        {"tokens", required_argument, 0, O_TOKENS}, {"e2e", required_argument, 0, O_E2E},
        {"e2e-span", required_argument, 0, O_SPAN}, {"trace-cat", required_argument, 0, O_CAT},
        {"bandwidth", required_argument, 0, O_BW}, {"measure-bandwidth", no_argument, 0, O_MBW},
        {"what-if", required_argument, 0, O_WHATIF}, {"isolated", required_argument, 0, O_ISO},
        {"json", no_argument, 0, O_JSON}, {"run", required_argument, 0, O_RUN},
        {"db", required_argument, 0, O_DB}, {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *map_path = NULL, *iso_path = NULL, *outp = NULL, *runs = NULL, *db = "caliper.db";
    int no_def = 0, json = 0, measure = 0, ch;
    double tokens[2] = {NAN, NAN}, e2e[2] = {NAN, NAN};
    cal_ops_read_opts ro = {0};
    cal_ops_opts oo = {0};
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":ho:", OPTS, NULL)) != -1) {
        int rc = 0;
        switch (ch) {
        case O_MAP: map_path = optarg; break;
        case O_NODEF: no_def = 1; break;
        case O_TOKENS: rc = parse_pair("--tokens", optarg, CAL_U_COUNT, NULL, tokens); break;
        case O_E2E: rc = parse_pair("--e2e", optarg, CAL_U_TIME, "ms", e2e); break;
        case O_SPAN:
            if (!*optarg) return cli_usage_error(CMD, "--e2e-span: \"\" is empty");
            ro.e2e_span = optarg;
            break;
        case O_CAT:
            if (!*optarg) return cli_usage_error(CMD, "--trace-cat: \"\" is empty");
            ro.trace_cat = optarg;
            break;
        case O_BW: rc = cli_parse_unit_in(CMD, "--bandwidth", optarg, CAL_U_BANDWIDTH, NULL, 0, 1e16, 1,
                                          &oo.bandwidth_Bps); break;
        case O_MBW: measure = 1; break;
        case O_WHATIF: rc = parse_whatif(optarg, &oo); break;
        case O_ISO: iso_path = optarg; break;
        case O_RUN:
            if (!*optarg) return cli_usage_error(CMD, "--run: \"\" is empty: give a run id, label or latest");
            runs = optarg;
            break;
        case O_DB: db = optarg; break;
        case O_JSON: json = 1; break;
        case 'o': outp = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': return cli_usage_error(CMD, "%s: a value is required", argv[optind - 1]);
        default: return cli_usage_error(CMD, "%s: not a flag of ops", argv[optind - 1]);
        }
        if (rc) return rc;
    }
    int npos = argc - optind;
    if (npos < 1) return cli_usage_error(CMD, "which profile? give A (and B to compare)");
    if (npos > 2) return cli_usage_error(CMD, "\"%s\": at most two profiles, A and B", argv[optind + 2]);
    if (measure && oo.bandwidth_Bps > 0)
        return cli_usage_error(CMD, "--bandwidth and --measure-bandwidth: give one");
    if (no_def && !map_path) return cli_usage_error(CMD, "--no-default-map needs --map FILE");

    int status = CLI_OK;
    char err[600];
    cal_ops_profile *p[2] = {NULL, NULL}, *iso = NULL;
    cal_ops_map *map = NULL;
    cal_ops_recon *rec = NULL;
    cal_ops_trap trap;
    int have_trap = 0;
    cal_buf out = CAL_BUF_INIT(64u << 20);
    FILE *f = stdout;
    if (runs) {   /* "R" for both, "R1,R2" one each; flags below still win */
        char buf[256];
        snprintf(buf, sizeof buf, "%s", runs);
        char *comma = strchr(buf, ',');
        if (comma) *comma = 0;
        const char *ref[2] = {buf, comma ? comma + 1 : buf};
        for (int i = 0; i < npos && i < 2; i++) {
            double t = 0, d = 0;
            if ((status = from_run(ref[i], db, &t, &d))) goto done;
            if (isnan(tokens[i])) tokens[i] = t;
            if (isnan(e2e[i])) e2e[i] = d;
        }
    }
    for (int i = 0; i < npos; i++) {
        int e = cal_ops_load(argv[optind + i], &ro, &p[i], err, sizeof err);
        if (e) { status = cli_fail(CMD, "%s", err); goto done; }
        if (!isnan(tokens[i])) p[i]->tokens = tokens[i];
        if (!isnan(e2e[i])) p[i]->e2e_ns = e2e[i] * 1e9;
    }
    /* B an op bench: the single-op trap against A */
    if (p[1] && p[1]->format == CAL_OPS_OPBENCH) {
        if (iso_path) { status = cli_usage_error(CMD, "B is an op bench and --isolated gives another"); goto done; }
        iso = p[1];
        p[1] = NULL;
    } else if (iso_path) {
        int e = cal_ops_load(iso_path, &ro, &iso, err, sizeof err);
        if (e) { status = cli_fail(CMD, "--isolated: %s", err); goto done; }
    }
    if (iso) {
        int e = cal_ops_trap_compare(p[0], iso, &trap, err, sizeof err);
        if (e) { status = e == CAL_EINVAL ? cli_usage_error(CMD, "%s", err) : cli_fail(CMD, "%s", err); goto done; }
        have_trap = 1;
    }
    if (map_path) {
        char *text = NULL;
        size_t len = 0;
        char why[400];
        int e = cal_csv_read_file(map_path, 1u << 20, &text, &len, why, sizeof why);
        if (!e) e = cal_ops_map_parse(text, len, !no_def, &map, why, sizeof why);
        free(text);
        if (e) { status = cli_fail(CMD, "--map: %s", why); goto done; }
    } else if (cal_ops_map_default(&map)) {
        status = cli_fail(CMD, "out of memory");
        goto done;
    }
    char bw_src[64] = "";
    if (measure) {
        double bps;
        fprintf(stderr, "caliper ops: measuring copy bandwidth (256 MiB, best of 5)...\n");
        if (cal_ops_measure_copy_bw((size_t)256 << 20, 5, &bps)) {
            status = cli_fail(CMD, "--measure-bandwidth: the copy failed (out of memory?)");
            goto done;
        }
        oo.bandwidth_Bps = bps;
        snprintf(bw_src, sizeof bw_src, "measured here: one-thread copy, 256 MiB");
        oo.bandwidth_source = bw_src;
    }
    /* an op bench alone against A only reports the trap, unless A has a run */
    rec = calloc(1, sizeof *rec);
    if (!rec) { status = cli_fail(CMD, "out of memory"); goto done; }
    int e = cal_ops_reconcile(p[0], p[1], map, &oo, rec, err, sizeof err);
    if (e) {
        /* the library names the missing quantity; the flag that gives it */
        const char *flag = NULL;
        for (int i = 0; i < 2 && p[i] && !flag; i++)
            if (p[i]->format != CAL_OPS_OPBENCH)
                flag = !(p[i]->tokens > 0) ? "--tokens" : !(p[i]->e2e_ns > 0) ? "--e2e (--e2e-span for a trace)" : NULL;
        status = e == CAL_ENOTFOUND ? cli_usage_error(CMD, "%s", err)
                                    : cli_fail(CMD, "%s%s%s", err, flag ? "; give " : "", flag ? flag : "");
        goto done;
    }
    if (outp && strcmp(outp, "-")) {
        f = fopen(outp, "w");
        if (!f) { f = stdout; status = cli_fail(CMD, "-o: cannot write \"%s\"", outp); goto done; }
    }
    if (json) {
        if (cal_ops_to_json(rec, have_trap ? &trap : NULL, &out)) { status = cli_fail(CMD, "writing JSON failed"); goto done; }
        fwrite(out.data, 1, out.len, f);
    } else {
        print_table(f, rec);
        if (have_trap) print_trap(f, &trap, p[0]->label, iso->label);
    }
    if (f != stdout && fclose(f) != 0) status = cli_fail(CMD, "-o: writing \"%s\" failed", outp);
    f = stdout;
done:
    if (f != stdout) fclose(f);
    cal_buf_free(&out);
    free(rec);
    cal_ops_map_free(&map);
    cal_ops_profile_free(&p[0]);
    cal_ops_profile_free(&p[1]);
    cal_ops_profile_free(&iso);
    return status;
}
