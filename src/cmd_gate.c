/* caliper gate — the regression gate a CI job acts on (docs/ci.md): flags,
 * the answers printed, the files a CI system reads, and the exit code.
 * The meaning (tests, bounds, refusals) is the library's (caliper/gate.h).
 * Exit: 0 pass, 1 regression, 3 cannot judge (--cannot-judge pass|fail
 * turns it into 0 or 1), 2 usage error or input the gate cannot take. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/gate.h"
#include "cli.h"

#define CMD "gate"
#define CLI_UNDECIDED 3
#define MAX_OUT (64u << 20)

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper gate [OPTIONS] RUN\n"
        "       caliper gate [OPTIONS] BASELINE CANDIDATE\n"
        "\n"
        "Decide per metric between a baseline and a candidate: regression (worse by\n"
        "more than the bound, called at a known family-wise false-alarm rate), an\n"
        "improvement, no change larger than the bound (two one-sided tests), or cannot\n"
        "judge (and what would make it judgeable).\n"
        "\n"
        "RUN                 one `caliper run --ab` run (A the baseline, B the candidate),\n"
        "                    stored or its `caliper export RUN --json` file: the paired\n"
        "                    design, the one to use on a noisy CI machine\n"
        "BASELINE CANDIDATE  two runs (ids, labels, result files) of one protocol: each\n"
        "                    run is one draw of the run-to-run noise, read from the stored\n"
        "                    repeats of their series (3 or more runs); a file has none\n"
        "  --db FILE         the store (default caliper.db)\n"
        "  --fail SPEC       bounds, e.g. 'decode_tps<-3%%,ttft_p99>+10%%': a schema key,\n"
        "                    its alias (ttft_p99) or a unique prefix (decode_tps); '<-X%%'\n"
        "                    where higher is better, '>+X%%' where lower is (replaces the\n"
        "                    defaults)\n"
        "  --box cpu|gpu     the defaults without --fail (default cpu):\n"
        "                    cpu  per-request tok/s <-10%%, TTFT p50 >+20%%\n"
        "                    gpu  per-request tok/s <-3%%, decode tok/s <-3%%, TTFT p50 >+5%%\n"
        "  --alpha A         family-wise false-alarm rate (default 0.05; 0 < A < 0.5)\n"
        "  --cannot-judge pass|fail\n"
        "                    exit 0 or 1 instead of 3 when a metric cannot be judged\n"
        "  --format FMT      what stdout gets: text (default), md, junit or json\n"
        "  --md FILE, --junit FILE, --json FILE\n"
        "                    also write that format to FILE (- for stdout)\n"
        "  -h, --help        this text\n"
        "\n"
        "Exit: 0 pass, 1 regression, 3 cannot judge, 2 usage error or input the gate\n"
        "cannot take (protocols that differ are named field by field).\n");
}

static const char *answer(cal_gate_kind k)
{
    switch (k) {
    case CAL_GATE_REGRESSION: return "REGRESSION";
    case CAL_GATE_IMPROVEMENT: return "improvement";
    case CAL_GATE_NO_CHANGE: return "no change";
    default: return "cannot judge";
    }
}

static int width(const char *s)
{
    int w = 0;
    for (; *s; s++) if (((unsigned char)*s & 0xC0) != 0x80) w++;
    return w;
}

static void pad(const char *s, int w, int right)
{
    int k = w - width(s);
    if (right) for (int i = 0; i < k; i++) putchar(' ');
    fputs(s, stdout);
    if (!right) for (int i = 0; i < k; i++) putchar(' ');
}

/* a value at its field's decimals; one beyond 1e12 (a damaged file) short */
static void value(double v, int decimals, char *buf, size_t n)
{
    if (!isfinite(v)) snprintf(buf, n, "—");
    else if (fabs(v) >= 1e12) snprintf(buf, n, "%.4g", v);
    else snprintf(buf, n, "%.*f", decimals, v);
}

static void print_text(const cal_gate_input *in, const cal_gate_outcome *o)
{
    size_t pairs = 0;
    for (size_t i = 0; i < in->n_cells; i++) if (in->cells[i].n_pairs > pairs) pairs = in->cells[i].n_pairs;
    if (in->design == CAL_GATE_PAIRED)
        printf("caliper gate · paired (run --ab, %zu shot pairs) · %g %% family-wise (Holm)\n", pairs,
               100 * o->alpha);
    else
        printf("caliper gate · separate runs · %g %% family-wise (Holm)\n", 100 * o->alpha);
    printf("baseline:  %s\ncandidate: %s\n", in->base_label, in->cand_label);
    if (in->n_cells) {
        char proto[700];
        cal_fp_describe(&in->cells[0].fp, proto, sizeof proto);
        printf("protocol:  %s\n", proto);
    }
    if (in->noise[0]) printf("noise:     %s\n", in->noise);
    putchar('\n');
    int w0 = 13;
    for (size_t i = 0; i < o->n_cases; i++)
        if (width(o->cases[i].label) > w0) w0 = width(o->cases[i].label);
    int pct = (int)lround(100 * (1 - 2 * o->alpha));
    char head[48];
    snprintf(head, sizeof head, "change (%d %% CI)", pct);
    pad("metric · cell", w0, 0);
    printf("  %7s  %10s  %10s  ", "bound", "baseline", "candidate");
    pad(head, 30, 0);
    printf("  answer\n");
    for (size_t i = 0; i < o->n_cases; i++) {
        const cal_gate_case *c = &o->cases[i];
        const cal_field *f = cal_metric_get(c->bound.metric);
        char bw[24], va[32] = "—", vb[32] = "—", ch[96] = "—";
        snprintf(bw, sizeof bw, "%s%g %%", c->lower_better ? "+" : "−", 100 * c->bound.bound);
        value(c->base, f->decimals, va, sizeof va);
        value(c->cand, f->decimals, vb, sizeof vb);
        if (isfinite(c->effect) && isfinite(c->lo) && isfinite(c->hi))
            snprintf(ch, sizeof ch, "%+.1f %% (%+.1f to %+.1f %%)", 100 * c->effect, 100 * c->lo, 100 * c->hi);
        else if (isfinite(c->effect))
            snprintf(ch, sizeof ch, "%+.1f %% (unbounded)", 100 * c->effect);
        pad(c->label, w0, 0);
        printf("  ");
        pad(bw, 7, 1);
        printf("  %10s  %10s  ", va, vb);
        pad(ch, 30, 0);
        printf("  %s\n", answer(c->kind));
    }
    printf("\n");
    for (size_t i = 0; i < o->n_cases; i++) printf("%s: %s\n", o->cases[i].label, o->cases[i].text);
    printf("\nverdict: %s\n", o->summary);
}

/* Write one format into buf with fn, then to path ("-": stdout). */
static int emit(const char *path, int which, const cal_gate_input *in, const cal_gate_outcome *o,
                int cannot_fails)
{
    cal_buf b = CAL_BUF_INIT(MAX_OUT);
    int e = which == 0 ? cal_gate_write_md(in, o, &b)
          : which == 1 ? cal_gate_write_junit(in, o, cannot_fails, &b)
          : cal_gate_write_json(in, o, &b);
    int rc = CLI_OK;
    if (e) rc = cli_fail(CMD, "writing the output: %s", cal_strerror(e));
    else if (!strcmp(path, "-")) {
        if (b.len && fwrite(b.data, 1, b.len, stdout) != b.len) rc = cli_fail(CMD, "writing to stdout failed");
    } else {
        FILE *f = fopen(path, "wb");
        if (!f) rc = cli_fail(CMD, "cannot write \"%s\"", path);
        else {
            size_t w = b.len ? fwrite(b.data, 1, b.len, f) : 0;
            if (fclose(f) != 0 || w != b.len) rc = cli_fail(CMD, "writing \"%s\" failed", path);
        }
    }
    cal_buf_free(&b);
    return rc;
}

int cmd_gate(int argc, char **argv)
{
    static const struct option OPTS[] = {
        {"db", required_argument, 0, 'd'}, {"fail", required_argument, 0, 'f'},
        {"box", required_argument, 0, 'b'}, {"alpha", required_argument, 0, 'a'},
        {"cannot-judge", required_argument, 0, 'c'}, {"format", required_argument, 0, 'F'},
        {"md", required_argument, 0, 'm'}, {"junit", required_argument, 0, 'j'},
        {"json", required_argument, 0, 'J'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *db = "caliper.db", *fail = NULL, *md = NULL, *junit = NULL, *json = NULL;
    cal_gate_box box = CAL_GATE_BOX_CPU;
    double alpha = CAL_GATE_ALPHA;
    int cannot = CLI_UNDECIDED, fmt = -1, ch;   /* fmt: -1 text, 0 md, 1 junit, 2 json */
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", OPTS, NULL)) != -1) {
        switch (ch) {
        case 'd':
            if (!*optarg) return cli_usage_error(CMD, "--db: \"\" is empty: give the store's file");
            db = optarg;
            break;
        case 'f': fail = optarg; break;
        case 'b':
            if (cal_gate_box_parse(optarg, &box))
                return cli_usage_error(CMD, "--box: \"%s\" is not cpu or gpu", optarg);
            break;
        case 'a': {
            char *end;
            double a = strtod(optarg, &end);
            if (end == optarg || *end || !(a > 0 && a < 0.5))
                return cli_usage_error(CMD, "--alpha: \"%s\" is not a number between 0 and 0.5", optarg);
            alpha = a;
            break;
        }
        case 'c':
            if (!strcmp(optarg, "pass")) cannot = CLI_OK;
            else if (!strcmp(optarg, "fail")) cannot = CLI_FAIL;
            else return cli_usage_error(CMD, "--cannot-judge: \"%s\" is not pass or fail", optarg);
            break;
        case 'F':
            if (!strcmp(optarg, "text")) fmt = -1;
            else if (!strcmp(optarg, "md") || !strcmp(optarg, "markdown")) fmt = 0;
            else if (!strcmp(optarg, "junit")) fmt = 1;
            else if (!strcmp(optarg, "json")) fmt = 2;
            else return cli_usage_error(CMD, "--format: \"%s\" is not text, md, junit or json", optarg);
            break;
        case 'm': md = optarg; break;
        case 'j': junit = optarg; break;
        case 'J': json = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default:
            return cli_usage_error(CMD, "\"%s\" is not an option of gate", argv[optind - 1]);
        }
    }
    size_t n = (size_t)(argc - optind);
    if (n < 1 || n > 2)
        return cli_usage_error(CMD, "give one run --ab run, or a baseline and a candidate (got %zu)", n);
    for (size_t i = 0; i < n; i++)
        if (!*argv[optind + (int)i]) return cli_usage_error(CMD, "RUN: \"\" is empty: give an id, a label or a file");

    cal_gate_bound bounds[CAL_GATE_MAX_BOUNDS];
    size_t nb = 0;
    char err[1024];
    if (fail) {
        if (cal_gate_parse_bounds(fail, bounds, CAL_GATE_MAX_BOUNDS, &nb, err, sizeof err))
            return cli_usage_error(CMD, "--fail: %s", err);
    } else {
        nb = cal_gate_default_bounds(box, bounds, CAL_GATE_MAX_BOUNDS);
    }

    cal_gate_input *in = NULL;
    int e = cal_gate_load((const char *const *)(argv + optind), n, db, &in, err, sizeof err);
    if (e) {
        fprintf(stderr, "caliper %s: %s\n", CMD, err);
        return CLI_USAGE;
    }
    cal_gate_outcome *o = NULL;
    e = cal_gate_eval(in, bounds, nb, alpha, &o);
    if (e) {
        cal_gate_input_free(&in);
        return cli_fail(CMD, "%s", cal_strerror(e));
    }
    int cannot_fails = cannot == CLI_FAIL;
    int rc = CLI_OK;
    if (fmt < 0) print_text(in, o);
    else rc = emit("-", fmt, in, o, cannot_fails);
    if (!rc && md) rc = emit(md, 0, in, o, cannot_fails);
    if (!rc && junit) rc = emit(junit, 1, in, o, cannot_fails);
    if (!rc && json) rc = emit(json, 2, in, o, cannot_fails);
    if (!rc) {
        rc = o->verdict == CAL_GATE_FAIL ? CLI_FAIL
           : o->verdict == CAL_GATE_UNDECIDED ? cannot : CLI_OK;
        if (fmt >= 0) fprintf(stderr, "caliper gate: %s\n", o->summary);
    } else {
        rc = CLI_USAGE;   /* an output that could not be written: not a verdict */
    }
    cal_gate_outcome_free(&o);
    cal_gate_input_free(&in);
    return rc;
}
