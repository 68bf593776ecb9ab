/* caliper report — stored runs (or result files) as one self-contained HTML
 * page with SVG charts, or as Markdown, CSV or JSON, all from the same
 * metric table. Exit 0 written, 1 a run could not be read or the file not
 * written, 2 usage error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/csv.h"
#include "caliper/error.h"
#include "caliper/fpgroup.h"
#include "caliper/ops.h"
#include "caliper/report.h"
#include "cli.h"

#define CMD "report"
#define MAX_RESULTS 16
#define MAX_OUT_BYTES (512u << 20)

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper report [OPTIONS] RUN|FILE ...\n"
        "\n"
        "One page per set of runs: verdicts first; with several results, every engine\n"
        "side by side, grouped by protocol and ranked within a group only; then per run\n"
        "the shots with clock\n"
        "and power on one time axis, the concurrency curve with both columns, TTFT\n"
        "and ITL distributions, prefill time against prompt length with its fitted\n"
        "line; every chart captioned with the protocol it was measured under.\n"
        "\n"
        "RUN|FILE            a run id, label or \"latest\" in the store, or a result\n"
        "                    JSON file (caliper's, or a vLLM bench result)\n"
        "  --db FILE         the store (default caliper.db)\n"
        "  --import TOOL FILE  add a foreign tool's result file; TOOL: vllm\n"
        "                    (vllm bench serve --save-result JSON), llama-bench\n"
        "                    (-o json or jsonl), aiperf (profile_export_aiperf.json),\n"
        "                    genai-perf (profile_export_genai_perf.json), guidellm\n"
        "                    (benchmarks JSON)\n"
        "  --stale AGE       with several results: mark those measured longer ago than\n"
        "                    AGE (default 30d; 0 = never), as compare does\n"
        "  --now URL         mark results recorded under another engine version than\n"
        "                    the one answering at URL now (GET /v1/models), as compare does\n"
        "  --ops FILE        add the per-op section from `caliper ops --json` output\n"
        "                    (HTML only; runs may then be left out)\n"
        "  -o, --output FILE write here (default: stdout)\n"
        "  --format FMT      html, md, csv or json (default: from -o's extension, else html)\n"
        "  -h, --help        this text\n"
        "\n"
        "The HTML page needs no network and no JavaScript: inline CSS and SVG only.\n");
}

static int fmt_of(const char *s, cal_report_format *f)
{
    if (!strcmp(s, "html")) *f = CAL_REPORT_HTML;
    else if (!strcmp(s, "md") || !strcmp(s, "markdown")) *f = CAL_REPORT_MD;
    else if (!strcmp(s, "csv")) *f = CAL_REPORT_CSV;
    else if (!strcmp(s, "json")) *f = CAL_REPORT_JSON;
    else return -1;
    return 0;
}

/* `--import TOOL FILE` takes two values, which getopt cannot: lift the
 * triples out of argv first (keeping their order), then parse the rest,
 * options and runs in any order. Returns 0, or 2 after a usage error. */
int cmd_report(int argc, char **argv)
{
    static const struct option OPTS[] = {
        {"db", required_argument, 0, 'd'},
        {"output", required_argument, 0, 'o'}, {"format", required_argument, 0, 'F'},
        {"ops", required_argument, 0, 'P'}, {"stale", required_argument, 0, 's'},
        {"now", required_argument, 0, 'N'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *db = "caliper.db", *outp = NULL, *ops = NULL, *now_url = NULL;
    cal_fpmarks marks;
    cal_fpmarks_default(&marks);
    const char *imports[MAX_RESULTS], *import_tools[MAX_RESULTS];
    size_t n_imports = 0;
    int have_fmt = 0, ch;
    cal_report_format fmt = CAL_REPORT_HTML;
    if (cli_lift_imports(CMD, &argc, argv, import_tools, imports, MAX_RESULTS, &n_imports)) return CLI_USAGE;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "ho:", OPTS, NULL)) != -1) {
        switch (ch) {
        case 'd':
            if (!*optarg) return cli_usage_error(CMD, "--db: \"\" is empty: give the store's file");
            db = optarg;
            break;
        case 'o': outp = optarg; break;
        case 'P': ops = optarg; break;
        case 's': {
            double v;
            if (cli_parse_unit(CMD, "--stale", optarg, CAL_U_TIME, "d", &v)) return CLI_USAGE;
            if (v < 0) return cli_usage_error(CMD, "--stale: \"%s\" is negative", optarg);
            marks.stale_s = v;
            break;
        }
        case 'N': now_url = optarg; break;
        case 'F':
            if (fmt_of(optarg, &fmt))
                return cli_usage_error(CMD, "--format: \"%s\" is not html, md, csv or json", optarg);
            have_fmt = 1;
            break;
        case 'h': usage(stdout); return CLI_OK;
        default:
            return cli_usage_error(CMD, "\"%s\" is not an option of report", argv[optind - 1]);
        }
    }
    if (!have_fmt && outp) {
        const char *dot = strrchr(outp, '.');
        if (dot && fmt_of(dot + 1, &fmt)) fmt = CAL_REPORT_HTML;
    }
    size_t n_pos = (size_t)(argc - optind), n = n_pos + n_imports;
    if (ops && fmt != CAL_REPORT_HTML)
        return cli_usage_error(CMD, "--ops: only the HTML report has the per-op section");
    if (n == 0 && !ops) return cli_usage_error(CMD, "which run? give a run id, a label, \"latest\" or a result file");
    if (n > MAX_RESULTS) return cli_usage_error(CMD, "at most %d runs in one report (got %zu)", MAX_RESULTS, n);

    cal_result *res[MAX_RESULTS] = {0};
    cal_buf out = CAL_BUF_INIT(MAX_OUT_BYTES);
    int rc = CLI_OK;
    char err[512];
    for (size_t i = 0; i < n; i++) {
        int e = i < n_pos ? cal_result_load(argv[optind + (int)i], db, &res[i], err, sizeof err)
                          : cal_result_import(import_tools[i - n_pos], imports[i - n_pos], &res[i], err, sizeof err);
        if (e) { rc = cli_fail(CMD, "%s", err); goto done; }
    }
    cal_buf sec = CAL_BUF_INIT(16u << 20);
    if (ops) {
        char *text = NULL;
        size_t len = 0;
        int e = cal_csv_read_file(ops, 64u << 20, &text, &len, err, sizeof err);
        if (!e) e = cal_ops_html_section(text, len, &sec, err, sizeof err);
        free(text);
        if (e) { cal_buf_free(&sec); rc = cli_fail(CMD, "--ops: %s: %s", ops, err); goto done; }
    }
    if (now_url) {
        int ne = cal_fpmarks_now(&marks, (const cal_result *const *)res, n, now_url, err, sizeof err);
        if (ne) { cal_buf_free(&sec); rc = cli_fail(CMD, "--now: %s", err); goto done; }
    }
    int e = cal_report_write_marked((const cal_result *const *)res, n, ops ? CAL_REPORT_HTML : fmt,
                                    ops ? (sec.data ? sec.data : "") : NULL, &marks, &out);
    cal_buf_free(&sec);
    if (e) { rc = cli_fail(CMD, "writing the report: %s", cal_strerror(e)); goto done; }
    if (outp && strcmp(outp, "-")) {
        FILE *f = fopen(outp, "wb");
        if (!f) { rc = cli_fail(CMD, "-o: cannot write \"%s\"", outp); goto done; }
        size_t w = out.len ? fwrite(out.data, 1, out.len, f) : 0;
        if (fclose(f) != 0 || w != out.len) { rc = cli_fail(CMD, "-o: writing \"%s\" failed", outp); goto done; }
        fprintf(stderr, "wrote %s (%zu bytes, %zu run%s)\n", outp, out.len, n, n == 1 ? "" : "s");
    } else if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len) {
        rc = cli_fail(CMD, "writing to stdout failed");
    }
done:
    cal_buf_free(&out);
    for (size_t i = 0; i < n; i++) cal_result_free(&res[i]);
    return rc;
}
