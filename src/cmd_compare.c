/* caliper compare — results side by side, one column per engine, with a ratio
 * only where the protocols match and the differing fields named where they
 * do not (SPEC 1.1, 1.2, 1.5 item 5). Exit 0 when at least one ratio between
 * matching protocols was printed, 1 when nothing was comparable (or a result
 * could not be read), 2 on a usage error. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caliper/error.h"
#include "caliper/fpgroup.h"
#include "caliper/noise.h"
#include "caliper/report.h"
#include "caliper/protocol.h"
#include "cli.h"

#define CMD "compare"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper compare [OPTIONS] A B [C ...]\n"
        "\n"
        "Results side by side, the first (A) as the baseline. A ratio is printed only\n"
        "between numbers measured under the same protocol (shot kind and range, rest,\n"
        "warm-up, concurrency, column, prompt length and content, output policy,\n"
        "streaming, API, probe, host); otherwise the differing fields are named.\n"
        "\n"
        "A, B, ...           a run id, a label or \"latest\" in the store, or a JSON file\n"
        "                    (`caliper report --format json`, `caliper export RUN --json`,\n"
        "                    or a vLLM bench result)\n"
        "  --db FILE         the store (default caliper.db)\n"
        "  --import TOOL FILE  add a foreign tool's result file; TOOL: vllm\n"
        "                    (vllm bench serve --save-result JSON), llama-bench\n"
        "                    (-o json or jsonl), aiperf (profile_export_aiperf.json),\n"
        "                    genai-perf (profile_export_genai_perf.json), guidellm\n"
        "                    (benchmarks JSON)\n"
        "  --force           print the ratio even where protocols differ, with the\n"
        "                    differences beside it\n"
        "  --stale AGE       flag results older than AGE (default 30d; 0 = never)\n"
        "  --now URL         ask the engine answering at URL (GET /v1/models) which\n"
        "                    model it serves now, and flag results measured on another\n"
        "                    version (a baseline of another engine version is stale)\n"
        "  --format FMT      text (default), md, or json (every row with its metric\n"
        "                    key, each result's value, ratio, CI and note)\n"
        "  --no-ci           skip the bootstrap confidence intervals\n"
        "  --all             every comparable field of the schema (default: aggregate,\n"
        "                    per-request, prefill, decode, TTFT p50/p99, ITL p50, E2E p99,\n"
        "                    goodput under the same --slo)\n"
        "  -h, --help        this text\n"
        "\n"
        "With three or more results, a ranking follows: the results grouped by the\n"
        "protocol of their quoted cells, ranked within a group only (per-request,\n"
        "aggregate and decode tok/s, TTFT p50, E2E p99).\n"
        "\n"
        "Exit: 0 at least one ratio between matching protocols, 1 nothing comparable\n"
        "or a result could not be read, 2 usage error.\n");
}

/* A row's value at its field's decimals (the schema's, as every table). */
static void fmt_num(double v, cal_metric m, char *buf, size_t n)
{
    if (!isfinite(v)) snprintf(buf, n, "—");
    else snprintf(buf, n, "%.*f", cal_metric_get(m)->decimals, v);
}

/* "1.05× (CI 1.02–1.07)", "not comparable: shot kind cold vs warm",
 * "0.94× forced — differs: rest 0 s vs 15 s" */
static void fmt_entry(const cal_cmp_entry *e, char *buf, size_t n)
{
    if (isfinite(e->ratio)) {
        char ci[64] = "";
        if (isfinite(e->ci_lo))
            snprintf(ci, sizeof ci, " (CI %.2f–%.2f%s)%s", e->ci_lo, e->ci_hi,
                     e->ci_scope == CAL_CI_REQUESTS || e->ci_scope == CAL_CI_SHOTS
                         ? ", within-run noise only" : "",
                     e->differs ? " differs" : "");
        if (e->comparable) snprintf(buf, n, "%.2f×%s", e->ratio, ci);
        else {
            char d[320];
            cal_fp_diff_text(e->diff, e->n_diff, d, sizeof d);
            snprintf(buf, n, "%.2f×%s FORCED, differs: %s", e->ratio, ci, d);
        }
    } else snprintf(buf, n, "%s", e->note[0] ? e->note : "—");
}

/* Display width of a UTF-8 string (code points; the table holds no wide glyphs). */
static int width(const char *s)
{
    int w = 0;
    for (; *s; s++) if (((unsigned char)*s & 0xC0) != 0x80) w++;
    return w;
}

static void pad(FILE *f, const char *s, int w, int right)
{
    int k = w - width(s);
    if (right) for (int i = 0; i < k; i++) fputc(' ', f);
    fputs(s, f);
    if (!right) for (int i = 0; i < k; i++) fputc(' ', f);
}

static void print_text(const cal_comparison *c, const cal_result *const *res, size_t n, int md)
{
    int w0 = 4;
    int wv[CAL_CMP_MAX];
    for (size_t j = 0; j < n; j++) wv[j] = width(res[j]->label) > 8 ? width(res[j]->label) : 8;
    for (size_t r = 0; r < c->n_rows; r++) {
        if (width(c->rows[r].label) > w0) w0 = width(c->rows[r].label);
        for (size_t j = 0; j < n; j++) {
            char v[32];
            fmt_num(c->rows[r].e[j].value, c->rows[r].metric, v, sizeof v);
            if (width(v) > wv[j]) wv[j] = width(v);
        }
    }
    const char *ratio_head = n == 2 ? "ratio" : "ratios to the baseline";
    if (md) {
        printf("| cell |");
        for (size_t j = 0; j < n; j++) printf(" %s |", res[j]->label);
        printf(" %s |\n|---|", ratio_head);
        for (size_t j = 0; j < n; j++) printf("---:|");
        printf("---|\n");
    } else {
        pad(stdout, "cell", w0, 0);
        for (size_t j = 0; j < n; j++) { fputs("  ", stdout); pad(stdout, res[j]->label, wv[j], 1); }
        printf("  %s\n", ratio_head);
    }
    for (size_t r = 0; r < c->n_rows; r++) {
        const cal_cmp_row *row = &c->rows[r];
        if (md) printf("| %s |", row->label);
        else pad(stdout, row->label, w0, 0);
        for (size_t j = 0; j < n; j++) {
            char v[32];
            fmt_num(row->e[j].value, row->metric, v, sizeof v);
            if (md) printf(" %s |", v);
            else { fputs("  ", stdout); pad(stdout, v, wv[j], 1); }
        }
        char all[2048] = "";
        size_t used = 0;
        for (size_t j = 1; j < n && used < sizeof all; j++) {
            char one[700];
            const cal_cmp_entry *e = &row->e[j];
            if (!row->e[0].present) {   /* a row the baseline lacks */
                if (!e->present) continue;
                fmt_entry(&row->e[0], one, sizeof one);
            } else fmt_entry(e, one, sizeof one);
            if (n == 2) used += (size_t)snprintf(all + used, sizeof all - used, "%s", one);
            else used += (size_t)snprintf(all + used, sizeof all - used, "%s%s: %s",
                                          used ? " · " : "", res[j]->label, one);
        }
        if (md) printf(" %s |\n", all);
        else printf("  %s\n", all);
    }
}

/* The ranking within protocol groups (fpgroup.h): three or more results
 * are the many-engines case, where a rank must not cross a protocol. */
static const cal_metric RANK_METRICS[] = {CAL_M_REQ_TOKS, CAL_M_AGG_TOKS, CAL_M_DECODE_TOKS,
                                          CAL_M_TTFT_P50, CAL_M_E2E_P99};
#define N_RANK (sizeof RANK_METRICS / sizeof RANK_METRICS[0])

static void print_groups(const cal_fpgroups *g, const cal_result *const *res, size_t n)
{
    printf("\nranking within protocol groups (%zu result%s, %zu group%s; a rank never crosses a group):\n",
           n, n == 1 ? "" : "s", g->n_groups, g->n_groups == 1 ? "" : "s");
    size_t order[CAL_CMP_MAX * 64];
    for (size_t gi = 0; gi < g->n_groups; gi++) {
        const cal_fpgroup *gr = &g->g[gi];
        printf("group %zu · %s · %zu engine%s%s%s\n", gi + 1, gr->name, gr->n, gr->n == 1 ? "" : "s",
               gr->differs[0] ? " — differs from group 1: " : "", gr->differs);
        for (size_t k = 0; k < N_RANK; k++) {
            const cal_field *f = cal_metric_get(RANK_METRICS[k]);
            if (gr->n > sizeof order / sizeof order[0]) break;
            size_t have = cal_fpgroup_rank(res, gr, RANK_METRICS[k], order);
            if (!have) continue;
            printf("  %s%s%s:", f->label, strstr(f->label, f->unit) ? "" : " ",
                   strstr(f->label, f->unit) ? "" : f->unit);
            for (size_t i = 0; i < have; i++) {
                const cal_fpmember *mm = &gr->m[order[i]];
                printf("%s %zu. %s%s %.*f", i ? " ·" : "", i + 1, mm->name,
                       g->flags[mm->result][0] ? " (!)" : "", f->decimals,
                       res[mm->result]->cells[mm->cell].v[RANK_METRICS[k]]);
            }
            putchar('\n');
        }
    }
}

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *groups_json(const cal_fpgroups *g, const cal_result *const *res)
{
    json_t *a = json_array();
    size_t order[CAL_CMP_MAX * 64];
    for (size_t gi = 0; gi < g->n_groups; gi++) {
        const cal_fpgroup *gr = &g->g[gi];
        char proto[700];
        cal_fp_describe(&gr->fp, proto, sizeof proto);
        json_t *o = json_object(), *ranks = json_object();
        json_object_set_new(o, "group", json_integer((json_int_t)gi + 1));
        json_object_set_new(o, "cell", json_string(gr->name));
        json_object_set_new(o, "protocol", json_string(proto));
        json_object_set_new(o, "differs", json_string(gr->differs));
        for (size_t k = 0; k < N_RANK && gr->n <= sizeof order / sizeof order[0]; k++) {
            size_t have = cal_fpgroup_rank(res, gr, RANK_METRICS[k], order);
            json_t *r = json_array();
            for (size_t i = 0; i < gr->n; i++) {
                const cal_fpmember *mm = &gr->m[order[i]];
                json_t *e = json_object();
                json_object_set_new(e, "rank", i < have ? json_integer((json_int_t)i + 1) : json_null());
                json_object_set_new(e, "label", json_string(mm->name));
                json_object_set_new(e, "id", json_string(res[mm->result]->id));
                json_object_set_new(e, "value", num_or_null(res[mm->result]->cells[mm->cell].v[RANK_METRICS[k]]));
                json_object_set_new(e, "flags", json_string(g->flags[mm->result]));
                json_array_append_new(r, e);
            }
            json_object_set_new(ranks, cal_metric_get(RANK_METRICS[k])->name, r);
        }
        json_object_set_new(o, "rankings", ranks);
        json_array_append_new(a, o);
    }
    return a;
}

/* The comparison as JSON: one object per row with the schema key of its
 * metric and, per result, value, ratio, CI and the note. */
static int print_json(const cal_comparison *c, const cal_result *const *res, size_t n,
                      const cal_fpgroups *g)
{
    json_t *root = json_object(), *rs = json_array(), *rows = json_array();
    json_object_set_new(root, "format", json_string("caliper-compare"));
    for (size_t j = 0; j < n; j++) {
        json_t *o = json_object();
        json_object_set_new(o, "id", json_string(res[j]->id));
        json_object_set_new(o, "label", json_string(res[j]->label));
        json_object_set_new(o, "flags", json_string(c->flags[j]));
        json_array_append_new(rs, o);
    }
    json_object_set_new(root, "results", rs);
    for (size_t r = 0; r < c->n_rows; r++) {
        const cal_cmp_row *row = &c->rows[r];
        json_t *o = json_object(), *es = json_array();
        json_object_set_new(o, "metric", json_string(cal_metric_get(row->metric)->name));
        json_object_set_new(o, "label", json_string(row->label));
        json_object_set_new(o, "concurrency", json_integer(row->fp.concurrency));
        json_object_set_new(o, "prompt_tokens", json_integer(row->fp.prompt_tokens));
        json_object_set_new(o, "shot_kind", json_string(cal_shot_kind_key(row->fp.shot_kind)));
        json_object_set_new(o, "shot_first", json_integer(row->fp.shot_first));
        json_object_set_new(o, "shot_last", json_integer(row->fp.shot_last));
        for (size_t j = 0; j < n; j++) {
            const cal_cmp_entry *e = &row->e[j];
            json_t *eo = json_object();
            json_object_set_new(eo, "present", json_boolean(e->present));
            json_object_set_new(eo, "value", num_or_null(e->value));
            json_object_set_new(eo, "comparable", json_boolean(e->comparable));
            json_object_set_new(eo, "ratio", num_or_null(e->ratio));
            json_object_set_new(eo, "ci_lo", num_or_null(e->ci_lo));
            json_object_set_new(eo, "ci_hi", num_or_null(e->ci_hi));
            json_object_set_new(eo, "ci_scope", json_string(e->ci_scope == CAL_CI_RUNS ? "runs"
                                                            : e->ci_scope == CAL_CI_SHOTS ? "shots"
                                                            : e->ci_scope == CAL_CI_REQUESTS ? "requests"
                                                            : "none"));
            json_object_set_new(eo, "differs", json_boolean(e->differs));
            json_object_set_new(eo, "note", json_string(e->note));
            json_array_append_new(es, eo);
        }
        json_object_set_new(o, "entries", es);
        json_array_append_new(rows, o);
    }
    json_object_set_new(root, "rows", rows);
    json_object_set_new(root, "n_ratios", json_integer((json_int_t)c->n_ratios));
    json_object_set_new(root, "n_refused", json_integer((json_int_t)c->n_refused));
    if (g) json_object_set_new(root, "groups", groups_json(g, res));
    int rc = json_dumpf(root, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(root);
    return rc;
}

/* --now URL: the engine answering there now names its model; a result
 * whose recorded engine version (the model id, unless the run was only
 * labelled) differs was measured on something else and is flagged (the
 * one rule, shared with report: cal_fpmarks_now). */
static int flag_versions_now(cal_comparison *c, cal_result *const *res, size_t n,
                             const char *url)
{
    cal_fpmarks m;
    memset(&m, 0, sizeof m);
    char err[512];
    if (cal_fpmarks_now(&m, (const cal_result *const *)res, n, url, err, sizeof err))
        return cli_fail(CMD, "--now: %s", err);
    for (size_t j = 0; j < n; j++) {
        if (!m.extra[j][0]) continue;
        char *f = c->flags[j];
        size_t used = strlen(f);
        snprintf(f + used, sizeof c->flags[j] - used, "%s%s", used ? "; " : "", m.extra[j]);
    }
    return CLI_OK;
}

int cmd_compare(int argc, char **argv)
{
    static const struct option OPTS[] = {
        {"db", required_argument, 0, 'd'},
        {"force", no_argument, 0, 'f'}, {"stale", required_argument, 0, 's'},
        {"now", required_argument, 0, 'N'},
        {"format", required_argument, 0, 'F'}, {"no-ci", no_argument, 0, 'n'}, {"all", no_argument, 0, 'a'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *db = "caliper.db", *now_url = NULL;
    const char *imports[CAL_CMP_MAX], *import_tools[CAL_CMP_MAX];
    size_t n_imports = 0;
    cal_compare_opts o = {0};
    o.stale_s = 30 * 86400.0;
    int md = 0, js = 0, no_ci = 0, all = 0, ch;
    if (cli_lift_imports(CMD, &argc, argv, import_tools, imports, CAL_CMP_MAX, &n_imports)) return CLI_USAGE;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", OPTS, NULL)) != -1) {
        switch (ch) {
        case 'd':
            if (!*optarg) return cli_usage_error(CMD, "--db: \"\" is empty: give the store's file");
            db = optarg;
            break;
        case 'f': o.force = 1; break;
        case 's': {
            double s;
            if (cli_parse_unit(CMD, "--stale", optarg, CAL_U_TIME, "d", &s)) return CLI_USAGE;
            if (s < 0) return cli_usage_error(CMD, "--stale: \"%s\" is negative", optarg);
            o.stale_s = s;
            break;
        }
        case 'F':
            md = !strcmp(optarg, "md");
            js = !strcmp(optarg, "json");
            if (!md && !js && strcmp(optarg, "text"))
                return cli_usage_error(CMD, "--format: \"%s\" is not text, md or json", optarg);
            break;
        case 'N': now_url = optarg; break;
        case 'n': no_ci = 1; break;
        case 'a': all = 1; break;
        case 'h': usage(stdout); return CLI_OK;
        default:
            return cli_usage_error(CMD, "\"%s\" is not an option of compare", argv[optind - 1]);
        }
    }
    size_t n_pos = (size_t)(argc - optind), n = n_pos + n_imports;
    if (n < 2)
        return cli_usage_error(CMD, "needs at least two results to compare (got %zu)", n);
    if (n > CAL_CMP_MAX)
        return cli_usage_error(CMD, "at most %d results at once (got %zu)", CAL_CMP_MAX, n);
    if (no_ci) o.boot_iters = -1;
    if (!all)   /* the numbers people quote; --all for every percentile */
        o.metrics = 1ull << CAL_M_AGG_TOKS | 1ull << CAL_M_REQ_TOKS | 1ull << CAL_M_PREFILL_TOKS |
                    1ull << CAL_M_DECODE_TOKS | 1ull << CAL_M_TTFT_P50 | 1ull << CAL_M_TTFT_P99 |
                    1ull << CAL_M_ITL_P50 | 1ull << CAL_M_E2E_P99 |
                    1ull << CAL_M_GOODPUT;   /* where a run has an --slo */

    cal_result *res[CAL_CMP_MAX] = {0};
    int rc = CLI_OK;
    char err[512];
    for (size_t i = 0; i < n; i++) {
        int e = i < n_pos ? cal_result_load(argv[optind + (int)i], db, &res[i], err, sizeof err)
                          : cal_result_import(import_tools[i - n_pos], imports[i - n_pos], &res[i], err, sizeof err);
        if (e) { rc = cli_fail(CMD, "%s", err); goto out; }
    }
    /* the same label twice would make the columns ambiguous: add the id */
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (!strcmp(res[i]->label, res[j]->label)) {
                char l[CAL_RES_STR];
                snprintf(l, sizeof l, "%.100s#%.40s", res[j]->label, res[j]->id);
                if (!strcmp(l, res[i]->label)) snprintf(l, sizeof l, "%.100s#%zu", res[j]->label, j + 1);
                snprintf(res[j]->label, sizeof res[j]->label, "%s", l);
            }

    /* the run-to-run noise of each side's stored repeats (noise.h) */
    size_t with_runs = no_ci ? 0 : cal_noise_compare_opts(db, (const cal_result *const *)res, n, &o);
    cal_comparison *c = NULL;
    int e = cal_compare((const cal_result *const *)res, n, &o, &c);
    if (e) { rc = cli_fail(CMD, "%s", cal_strerror(e)); goto out; }
    if (now_url && (rc = flag_versions_now(c, res, n, now_url)) != CLI_OK) {
        cal_comparison_free(&c);
        goto out;
    }

    /* three or more results: grouped by protocol, ranked within a group */
    cal_fpgroups groups = {0}, *gp = NULL;
    if (n >= 3 && cal_fpgroups_make((const cal_result *const *)res, n, NULL, &groups) == CAL_OK) {
        for (size_t j = 0; j < n; j++) {
            snprintf(groups.flags[j], sizeof groups.flags[j], "%s", c->flags[j]);
            groups.stale[j] = c->stale[j];
        }
        gp = &groups;
    }
    if (js) {
        if (print_json(c, (const cal_result *const *)res, n, gp) != 0) rc = cli_fail(CMD, "writing JSON failed");
        else if (!c->n_ratios) rc = CLI_FAIL;
        cal_comparison_free(&c);
        cal_fpgroups_free(&groups);
        goto out;
    }
    printf("baseline: %s", res[0]->label);
    for (size_t j = 0; j < n; j++) {
        char when[32] = "date unknown";
        if (res[j]->created_unix > 0) {
            time_t t = (time_t)res[j]->created_unix;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(when, sizeof when, "%Y-%m-%d", &tm);
        }
        printf("%s%s: %s · %s · %s", j ? "\n  " : "\n  ", res[j]->label,
               res[j]->probe[0] ? res[j]->probe : "probe unknown", res[j]->host[0] ? res[j]->host : "host unknown", when);
    }
    printf("\n\n");
    print_text(c, (const cal_result *const *)res, n, md);
    printf("\n");
    for (size_t j = 0; j < n; j++)
        if (c->flags[j][0]) printf("! %s: %s\n", res[j]->label, c->flags[j]);
    printf("%zu ratio%s between matching protocols; %zu pair%s %s for protocol differences%s\n",
           c->n_ratios, c->n_ratios == 1 ? "" : "s", c->n_refused, c->n_refused == 1 ? "" : "s",
           o.force ? "forced despite" : "refused",
           o.force || !c->n_refused ? "" : " (--force prints them with the differences)");
    if (!no_ci && !with_runs)
        printf("CIs cover within-run noise only: no stored repeats of these protocols, so no "
               "difference is claimed; run each again (>= 2 runs of one protocol) and caliper "
               "measures run-to-run noise (docs/compare.md)\n");
    else if (!no_ci && with_runs < n)
        printf("run-to-run noise: %zu of %zu results have no stored repeats and borrow the "
               "baseline's or the other side's (the same protocol on this machine)\n",
               n - with_runs, n);
    if (gp && md) {
        cal_buf b = CAL_BUF_INIT(16u << 20);
        putchar('\n');
        if (cal_fpgroups_md((const cal_result *const *)res, n, gp, &b) == CAL_OK && b.len)
            fwrite(b.data, 1, b.len, stdout);
        cal_buf_free(&b);
    } else if (gp) {
        print_groups(gp, (const cal_result *const *)res, n);
    }
    cal_fpgroups_free(&groups);
    if (!c->n_ratios) {
        fprintf(stderr, "caliper compare: nothing comparable: every pair differs in protocol (fields named above)\n");
        rc = CLI_FAIL;
    }
    cal_comparison_free(&c);
out:
    for (size_t i = 0; i < n; i++) cal_result_free(&res[i]);
    return rc;
}
