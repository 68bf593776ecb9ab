/* caliper run — benchmark a target under a stated protocol: start or reach
 * the engine, build exact-length unique prompts, send shots of concurrency
 * or rate cells through the probe, sample telemetry, store every request,
 * and print both throughput columns with the verdicts (SPEC 1.1–1.3). */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/probe.h"
#include "caliper/protocol.h"
#include "caliper/stats.h"
#include "caliper/store.h"
#include "caliper/telemetry.h"
#include "caliper/url.h"
#include "caliper/utf8.h"
#include "caliper/workload.h"
#include "cli.h"
#include "run_view.h"

#define CMD "run"
#define MAX_LIST 32
#define MAX_DURATION_REQS 4096

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper run [target] [workload] [load] [shots] [output]\n"
        "\n"
        "Benchmark an OpenAI-compatible engine; every number is stored with its protocol.\n"
        "\n"
        "target (default: the built-in engine, `caliper serve --preset small`):\n"
        "  --url URL            an engine someone else runs (vLLM, SGLang, llama-server, ...)\n"
        "  --launch \"CMD\"       start the engine with /bin/sh -c CMD, wait for it, stop it after\n"
        "  --port N             the port a --launch engine listens on (when --url is not given)\n"
        "  --launch-timeout T   how long to wait for it to answer (default 120s)\n"
        "  --preset NAME        built-in engine preset: tiny, small (default), base, moe\n"
        "  --serve-args \"ARGS\"  extra flags for the built-in engine\n"
        "  --api completions|chat   the endpoint (default completions)\n"
        "  --model NAME         the model field (default: the first id of /v1/models)\n"
        "  --api-key-env NAME   read the API key from this environment variable (never stored)\n"
        "  --body JSON          extra fields merged into every request body\n"
        "  --label NAME         a name for this run (compare and show accept it)\n"
        "  --ab                 alternate two targets (two --url or two --launch) shot by shot\n"
        "workload:\n"
        "  --content code|prose|random   prompt text (default prose)\n"
        "  --prompt-tokens LIST prompt lengths, exact via the server's /tokenize (default 256)\n"
        "  --max-tokens N       output length, fixed with ignore_eos (default 64)\n"
        "  --free-output        let the model stop early (no ignore_eos, no length check)\n"
        "  --allow-prefix-cache identical prompts (default: a unique nonce line per request)\n"
        "load:\n"
        "  --concurrency LIST   closed-loop cells, e.g. 1,4,8,32 (default 1)\n"
        "  --requests N         requests per cell (default max(8, 2 x concurrency))\n"
        "  --duration T         run each cell for T instead (e.g. 30s)\n"
        "  --rate R             open loop: Poisson arrivals at R req/s (latency from the\n"
        "                       scheduled time); --concurrency then caps in-flight requests\n"
        "shots (cold, warm and rested; docs/run.md):\n"
        "  --shots N            N consecutive shots of the whole workload (default 1)\n"
        "  --rest T             rest between shots (default 0)\n"
        "  --warmup K           K shots first, recorded but left out of summaries\n"
        "  --cold               a fresh engine process for every shot (built-in or --launch)\n"
        "  --noise-floor R      the smallest shot-to-shot drop worth calling (default 3%%)\n"
        "output:\n"
        "  --db FILE            the store (default caliper.db)\n"
        "  --json FILE          also write the whole run as JSON\n"
        "  --connect-timeout T  (default 10s)   --idle-timeout T  no bytes for T ends a request (60s)\n"
        "  --no-telemetry       do not sample clocks and power   --interval T  sampling period (250ms)\n"
        "  --seed N             prompt nonces and Poisson arrivals (default: from the clock)\n"
        "\n"
        "Exit status: 0 all requests ok, 1 a request failed or the target failed,\n"
        "2 usage error, 130 interrupted (what was measured is stored).\n");
}

/* ---- options ------------------------------------------------------------ */
typedef struct opts {
    const char *url[2];
    int n_url;
    const char *launch[2];
    int n_launch;
    cal_api api;
    const char *api_name, *model, *api_key_env, *body, *preset, *serve_args, *label;
    long port;
    double launch_timeout_s;
    cal_content content;
    long prompt[MAX_LIST];
    size_t n_prompt;
    long max_tokens;
    int free_output, allow_prefix;
    long conc[MAX_LIST];
    size_t n_conc;
    int conc_given;
    long requests;
    double duration_s, rate;
    long shots, warmup;
    double rest_s, noise_floor;
    int cold, ab, no_tel;
    const char *db, *json;
    double connect_s, idle_s, interval_s;
    long seed;
    int seed_given;
} opts;

enum {
    O_URL = 256, O_LAUNCH, O_PORT, O_LTIMEOUT, O_PRESET, O_SERVEARGS, O_API, O_MODEL,
    O_KEYENV, O_BODY, O_LABEL, O_AB, O_CONTENT, O_PTOK, O_MAXTOK, O_FREE, O_PREFIX, O_CONC,
    O_REQS, O_DUR, O_RATE, O_SHOTS, O_REST, O_WARMUP, O_COLD, O_DB, O_JSON, O_CTIMEOUT,
    O_ITIMEOUT, O_NOTEL, O_INTERVAL, O_SEED, O_FLOOR, O_HELP
};
static const struct option LONGOPTS[] = {
    {"url", required_argument, 0, O_URL}, {"launch", required_argument, 0, O_LAUNCH},
    {"port", required_argument, 0, O_PORT}, {"launch-timeout", required_argument, 0, O_LTIMEOUT},
    {"preset", required_argument, 0, O_PRESET}, {"serve-args", required_argument, 0, O_SERVEARGS},
    {"api", required_argument, 0, O_API}, {"model", required_argument, 0, O_MODEL},
    {"api-key-env", required_argument, 0, O_KEYENV}, {"body", required_argument, 0, O_BODY},
    {"label", required_argument, 0, O_LABEL}, {"ab", no_argument, 0, O_AB},
    {"content", required_argument, 0, O_CONTENT}, {"prompt-tokens", required_argument, 0, O_PTOK},
    {"max-tokens", required_argument, 0, O_MAXTOK}, {"free-output", no_argument, 0, O_FREE},
    {"allow-prefix-cache", no_argument, 0, O_PREFIX},
    {"concurrency", required_argument, 0, O_CONC}, {"requests", required_argument, 0, O_REQS},
    {"duration", required_argument, 0, O_DUR}, {"rate", required_argument, 0, O_RATE},
    {"shots", required_argument, 0, O_SHOTS}, {"rest", required_argument, 0, O_REST},
    {"warmup", required_argument, 0, O_WARMUP}, {"cold", no_argument, 0, O_COLD},
    {"db", required_argument, 0, O_DB}, {"json", required_argument, 0, O_JSON},
    {"connect-timeout", required_argument, 0, O_CTIMEOUT},
    {"idle-timeout", required_argument, 0, O_ITIMEOUT},
    {"no-telemetry", no_argument, 0, O_NOTEL}, {"interval", required_argument, 0, O_INTERVAL},
    {"seed", required_argument, 0, O_SEED}, {"noise-floor", required_argument, 0, O_FLOOR},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0}};

static int parse_opts(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->api_name = "completions";
    o->preset = "small";
    o->content = CAL_CONTENT_PROSE;
    o->prompt[0] = 256;
    o->n_prompt = 1;
    o->max_tokens = 64;
    o->conc[0] = 1;
    o->n_conc = 1;
    o->shots = 1;
    o->db = "caliper.db";
    o->connect_s = 10;
    o->idle_s = 60;
    o->interval_s = 0.25;
    o->launch_timeout_s = 120;
    optind = 1;
    opterr = 0;
    int c;
    long v;
    double d;
    while ((c = getopt_long(argc, argv, "", LONGOPTS, NULL)) != -1) {
        switch (c) {
        case O_URL:
            if (o->n_url == 2) return cli_usage_error(CMD, "--url: at most two (with --ab)");
            if (strncmp(optarg, "http://", 7) && strncmp(optarg, "https://", 8))
                return cli_usage_error(CMD, "--url: \"%s\" is not an http:// or https:// URL", optarg);
            o->url[o->n_url++] = optarg;
            break;
        case O_LAUNCH:
            if (o->n_launch == 2) return cli_usage_error(CMD, "--launch: at most two (with --ab)");
            if (!*optarg) return cli_usage_error(CMD, "--launch: \"\" is not a command");
            o->launch[o->n_launch++] = optarg;
            break;
        case O_PORT:
            if (cli_parse_long(CMD, "--port", optarg, 1, 65535, &o->port)) return CLI_USAGE;
            break;
        case O_LTIMEOUT:
            if (cli_parse_unit(CMD, "--launch-timeout", optarg, CAL_U_TIME, "s", &o->launch_timeout_s)) return CLI_USAGE;
            if (o->launch_timeout_s <= 0) return cli_usage_error(CMD, "--launch-timeout: \"%s\" is not positive", optarg);
            break;
        case O_PRESET: o->preset = optarg; break;
        case O_SERVEARGS: o->serve_args = optarg; break;
        case O_API:
            if (!strcmp(optarg, "completions")) o->api = CAL_API_COMPLETIONS;
            else if (!strcmp(optarg, "chat")) o->api = CAL_API_CHAT;
            else return cli_usage_error(CMD, "--api: \"%s\" is not completions or chat", optarg);
            o->api_name = optarg;
            break;
        case O_MODEL: o->model = optarg; break;
        case O_KEYENV:
            if (!getenv(optarg)) return cli_usage_error(CMD, "--api-key-env: \"%s\" is not set in the environment", optarg);
            o->api_key_env = optarg;
            break;
        case O_BODY: {
            json_t *j = json_loads(optarg, 0, NULL);
            int okj = json_is_object(j);
            json_decref(j);
            if (!okj) return cli_usage_error(CMD, "--body: \"%s\" is not a JSON object", optarg);
            o->body = optarg;
            break;
        }
        case O_LABEL:
            if (!*optarg) return cli_usage_error(CMD, "--label: \"\" is empty");
            if (cal_utf8_check(optarg, strlen(optarg)) < strlen(optarg))
                return cli_usage_error(CMD, "--label: byte %zu is not valid UTF-8 (a label must "
                                       "survive export as JSON)", cal_utf8_check(optarg, strlen(optarg)) + 1);
            o->label = optarg;
            break;
        case O_AB: o->ab = 1; break;
        case O_CONTENT:
            if (cal_content_parse(optarg, &o->content))
                return cli_usage_error(CMD, "--content: \"%s\" is not code, prose or random", optarg);
            break;
        case O_PTOK:
            if (cli_parse_long_list(CMD, "--prompt-tokens", optarg, 1, 1 << 20, o->prompt, MAX_LIST, &o->n_prompt)) return CLI_USAGE;
            break;
        case O_MAXTOK:
            if (cli_parse_long(CMD, "--max-tokens", optarg, 1, 1 << 20, &o->max_tokens)) return CLI_USAGE;
            break;
        case O_FREE: o->free_output = 1; break;
        case O_PREFIX: o->allow_prefix = 1; break;
        case O_CONC:
            if (cli_parse_long_list(CMD, "--concurrency", optarg, 1, 100000, o->conc, MAX_LIST, &o->n_conc)) return CLI_USAGE;
            o->conc_given = 1;
            break;
        case O_REQS:
            if (cli_parse_long(CMD, "--requests", optarg, 1, 1000000, &o->requests)) return CLI_USAGE;
            break;
        case O_DUR:
            if (cli_parse_unit(CMD, "--duration", optarg, CAL_U_TIME, "s", &o->duration_s)) return CLI_USAGE;
            if (o->duration_s <= 0) return cli_usage_error(CMD, "--duration: \"%s\" is not positive", optarg);
            break;
        case O_RATE:
            if (cli_parse_unit(CMD, "--rate", optarg, CAL_U_COUNT, NULL, &o->rate)) return CLI_USAGE;
            if (!(o->rate > 0)) return cli_usage_error(CMD, "--rate: \"%s\" is not a positive request rate", optarg);
            break;
        case O_SHOTS:
            if (cli_parse_long(CMD, "--shots", optarg, 1, 1000, &o->shots)) return CLI_USAGE;
            break;
        case O_REST:
            if (cli_parse_unit(CMD, "--rest", optarg, CAL_U_TIME, "s", &o->rest_s)) return CLI_USAGE;
            if (o->rest_s < 0) return cli_usage_error(CMD, "--rest: \"%s\" is negative", optarg);
            break;
        case O_WARMUP:
            if (cli_parse_long(CMD, "--warmup", optarg, 0, 1000, &o->warmup)) return CLI_USAGE;
            break;
        case O_COLD: o->cold = 1; break;
        case O_DB:
            if (!*optarg) return cli_usage_error(CMD, "--db: \"\" is empty: give the store's file");
            o->db = optarg;
            break;
        case O_JSON: o->json = optarg; break;
        case O_CTIMEOUT:
            if (cli_parse_unit(CMD, "--connect-timeout", optarg, CAL_U_TIME, "s", &d)) return CLI_USAGE;
            if (d <= 0) return cli_usage_error(CMD, "--connect-timeout: \"%s\" is not positive", optarg);
            o->connect_s = d;
            break;
        case O_ITIMEOUT:
            if (cli_parse_unit(CMD, "--idle-timeout", optarg, CAL_U_TIME, "s", &d)) return CLI_USAGE;
            if (d <= 0) return cli_usage_error(CMD, "--idle-timeout: \"%s\" is not positive", optarg);
            o->idle_s = d;
            break;
        case O_NOTEL: o->no_tel = 1; break;
        case O_INTERVAL:
            if (cli_parse_unit(CMD, "--interval", optarg, CAL_U_TIME, "ms", &o->interval_s)) return CLI_USAGE;
            if (o->interval_s < 0.01) return cli_usage_error(CMD, "--interval: \"%s\" is below 10ms", optarg);
            break;
        case O_SEED:
            if (cli_parse_long(CMD, "--seed", optarg, 0, LONG_MAX, &v)) return CLI_USAGE;
            o->seed = v;
            o->seed_given = 1;
            break;
        case O_FLOOR:
            if (cli_parse_unit(CMD, "--noise-floor", optarg, CAL_U_RATIO, NULL, &o->noise_floor)) return CLI_USAGE;
            if (!(o->noise_floor > 0 && o->noise_floor < 1))
                return cli_usage_error(CMD, "--noise-floor: \"%s\" is not between 0 and 100 %%", optarg);
            break;
        case O_HELP: usage(stdout); return -1;
        default:
            if (optopt && optopt < 256 && optopt != '?')
                return cli_usage_error(CMD, "-%c: unknown option", optopt);
            if (optopt >= 256) return cli_usage_error(CMD, "%s: needs a value", argv[optind - 1]);
            return cli_usage_error(CMD, "%s: unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "\"%s\": unexpected argument", argv[optind]);
    if (o->n_url && o->n_launch && o->n_url != o->n_launch) {
        return cli_usage_error(CMD, "--url and --launch together: give one --url per --launch "
                                    "(it names where that engine listens)");
    }
    if (o->ab && o->n_launch == 2 && o->n_url != 2)
        return cli_usage_error(CMD, "--ab with two --launch: give two --url, one for each "
                                    "engine's address");
    if (o->ab && o->n_url != 2 && o->n_launch != 2)
        return cli_usage_error(CMD, "--ab: needs two --url or two --launch targets");
    if (!o->ab && (o->n_url == 2 || o->n_launch == 2))
        return cli_usage_error(CMD, "two targets given: add --ab to alternate them");
    if (o->cold && o->n_url && !o->n_launch)
        return cli_usage_error(CMD, "--cold: needs an engine caliper starts (--launch or the "
                                    "built-in one), not --url");
    if (o->n_launch && !o->n_url && !o->port)
        return cli_usage_error(CMD, "--launch: give --port N (or --url) so caliper knows where "
                                    "the engine will answer");
    if (o->duration_s > 0 && o->requests)
        return cli_usage_error(CMD, "--requests and --duration together: choose one");
    return 0;
}

/* ---- run state ---------------------------------------------------------- */
static volatile int g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

typedef struct side {
    char name[8];                    /* "" or "A" / "B" */
    cal_target_config tcfg;
    cal_target *target;
    cal_probe *probe;
    cal_probe_config pcfg;
    char model[256];
    cal_workload *wl[MAX_LIST];      /* per prompt length */
    int64_t process_start_ns;        /* -1 unknown */
    int fresh;                       /* the next shot is the process's first */
    char url[512];
    char url_shown[512];             /* url without credentials: what is printed and stored */
    cal_http_tokenizer *tk;
} side;

typedef struct ctx {
    opts *o;
    cal_store *st;
    cal_run run;
    cal_tel *tel;
    uint64_t tel_cursor;
    char clock_metric[64], power_metric[64];
    side sides[2];
    int n_sides;
    const char *api_key;
    uint64_t nonce;
    int seq;
    int tty;
    char progress_label[128];
    int target_failed;
    char fail_msg[1400];
} ctx;

static void progress(void *ud, size_t done, size_t total)
{
    ctx *c = ud;
    if (!c->tty) return;
    int w = 30, k = total ? (int)(w * done / total) : w;
    fprintf(stderr, "\r%-48.48s [", c->progress_label);
    for (int i = 0; i < w; i++) fputc(i < k ? '#' : '.', stderr);
    fprintf(stderr, "] %zu/%zu ", done, total);
    fflush(stderr);
}

/* Move the sampler's new samples into the store. */
static void drain_telemetry(ctx *c)
{
    if (!c->tel) return;
    cal_tel_sample buf[512];
    size_t n;
    while ((n = cal_tel_read(c->tel, &c->tel_cursor, buf, 512, NULL)) > 0)
        for (size_t i = 0; i < n; i++)
            cal_store_add_telemetry(c->st, c->run.id, buf[i].t_ns, buf[i].backend, buf[i].metric,
                                    buf[i].unit, buf[i].value);
}

/* Mean and minimum of a telemetry metric over [t0, t1]; NAN when absent. */
static void tel_window(ctx *c, const char *metric, int64_t t0, int64_t t1,
                       double *mean, double *min)
{
    *mean = *min = NAN;
    if (!c->tel || !metric[0]) return;
    cal_tel_stat s;
    if (cal_tel_window(c->tel, metric, t0, t1, &s) != CAL_OK || s.n == 0) return;
    *mean = s.mean;
    *min = s.min;
}

static int start_side(ctx *c, side *s)
{
    char err[1000];
    int rc = cal_target_start(&s->tcfg, &s->target, err, sizeof err);
    if (rc) {
        snprintf(c->fail_msg, sizeof c->fail_msg, "%s%starget: %s", s->name, s->name[0] ? " " : "", err);
        return rc;
    }
    snprintf(s->url, sizeof s->url, "%s", cal_target_url(s->target));
    cal_url_redact(s->url, s->url_shown, sizeof s->url_shown);
    if (s->tk) cal_http_tokenizer_retarget(s->tk, s->url);   /* a cold restart moves ports */
    s->process_start_ns = cal_target_spawn_ns(s->target);
    s->fresh = 1;
    if (c->tel && cal_target_pid(s->target) > 0) cal_tel_set_pid(c->tel, (int)cal_target_pid(s->target));
    cal_probe_close(&s->probe);
    s->pcfg.base_url = s->url;
    rc = cal_probe_open(&s->pcfg, &s->probe);
    if (rc) snprintf(c->fail_msg, sizeof c->fail_msg, "probe: %s", cal_strerror(rc));
    return rc;
}

/* One cell: build its prompts, send them, summarise, store. */
static int run_cell(ctx *c, side *s, size_t pi, long conc, int shot, cal_shot_kind kind,
                    int64_t rest_ns, cal_cell_kind ckind)
{
    opts *o = c->o;
    size_t n = (size_t)(o->requests ? o->requests : (conc * 2 > 8 ? conc * 2 : 8));
    if (o->rate > 0 && !o->requests) n = (size_t)fmax(8, ceil(o->rate * 4));
    if (o->duration_s > 0) {
        double est = o->rate > 0 ? o->rate * o->duration_s * 1.5 + 16 : (double)conc * 64;
        n = (size_t)fmin(MAX_DURATION_REQS, est);
    }
    cal_request *reqs = calloc(n, sizeof *reqs);
    cal_req_result *res = calloc(n, sizeof *res);
    char **prompts = calloc(n, sizeof *prompts);
    int rc = CAL_ENOMEM;
    if (!reqs || !res || !prompts) goto out;
    snprintf(c->progress_label, sizeof c->progress_label, "%s%sshot %d · %s%ld · %ld tok",
             s->name, s->name[0] ? " · " : "", shot, o->rate > 0 ? "rate " : "c",
             o->rate > 0 ? (long)o->rate : conc, o->prompt[pi]);
    if (c->tty) fprintf(stderr, "\r%-48.48s preparing prompts...", c->progress_label);
    for (size_t i = 0; i < n; i++) {
        int ntok;
        if (g_stop) { rc = CAL_ECANCEL; goto out; }
        rc = cal_workload_prompt(s->wl[pi], c->nonce++, &prompts[i], &ntok);
        if (rc) {
            snprintf(c->fail_msg, sizeof c->fail_msg,
                     "%s%sthe target %s stopped answering: counting the tokens of prompt %zu "
                     "failed (%s)", s->name, s->name[0] ? " " : "", s->url_shown, i, cal_strerror(rc));
            goto out;
        }
        reqs[i].prompt = prompts[i];
        reqs[i].max_tokens = (int)o->max_tokens;
    }
    cal_load load = {.concurrency = (int)(o->rate > 0 ? (o->conc_given ? conc : 0) : conc),
                     .rate = o->rate, .seed = (uint64_t)o->seed + (uint64_t)c->seq * 7919};
    cal_cell cell;
    memset(&cell, 0, sizeof cell);
    cell.start_ns = cal_now_ns();
    cell.start_wall_ns = cal_wall_ns();
    if (o->duration_s > 0) load.deadline_ns = cell.start_ns + (int64_t)(o->duration_s * 1e9);
    cal_probe_stats ps;
    memset(&ps, 0, sizeof ps);
    rc = cal_probe_run(s->probe, reqs, n, &load, res, &g_stop, progress, c, &ps);
    cell.end_ns = cal_now_ns();
    if (c->tty) fprintf(stderr, "\r%-100s\r", "");
    if (rc && rc != CAL_ECANCEL) {
        snprintf(c->fail_msg, sizeof c->fail_msg, "probe: %s", cal_strerror(rc));
        goto out;
    }
    /* a duration cell: requests never sent were never part of it */
    size_t kept = n;
    if (o->duration_s > 0 && !g_stop) {
        kept = 0;
        for (size_t i = 0; i < n; i++) {
            if (res[i].status == CAL_REQ_CANCELLED && res[i].send_ns == 0) {
                cal_req_result_free(&res[i]);
                continue;
            }
            if (kept != i) { res[kept] = res[i]; memset(&res[i], 0, sizeof res[i]); }
            kept++;
        }
    }
    cell.seq = c->seq++;
    cell.kind = ckind;
    snprintf(cell.target, sizeof cell.target, "%s", s->name);
    cell.concurrency = load.concurrency;
    cell.rate = o->rate;
    cell.prompt_tokens = (int)o->prompt[pi];
    cell.prompt_exact = cal_workload_exact(s->wl[pi]);
    snprintf(cell.content, sizeof cell.content, "%s", cal_content_name(o->content));
    cell.unique_prompts = !o->allow_prefix;
    cell.max_tokens = (int)o->max_tokens;
    cell.output_fixed = !o->free_output;
    cell.shot_index = shot;
    cell.shot_kind = kind;
    cell.rest_before_ns = rest_ns;
    cell.process_age_ns = s->process_start_ns > 0 ? cell.start_ns - s->process_start_ns : -1;
    cell.n_requests = (int64_t)kept;
    cell.cpu_ns = ps.cpu_ns;
    cell.chunks = ps.chunks;
    cell.send_lag_p99_ms = ps.send_lag_p99_ms;
    cal_summary_compute(res, kept, 0, cell.output_fixed ? cell.max_tokens : 0, &cell.sum);
    tel_window(c, c->clock_metric, cell.start_ns, cell.end_ns, &cell.sum.clock_mhz_mean,
               &cell.sum.clock_mhz_min);
    tel_window(c, c->power_metric, cell.start_ns, cell.end_ns, &cell.sum.power_w_mean,
               &cell.sum.power_w_min);
    int src = cal_store_add_cell(c->st, c->run.id, &cell, res, kept);
    if (src) {
        snprintf(c->fail_msg, sizeof c->fail_msg, "storing the cell: %s", cal_store_errmsg(c->st));
        rc = src;
        goto out;
    }
    drain_telemetry(c);
    char agg[32], per[32];
    snprintf(agg, sizeof agg, isfinite(cell.sum.output_throughput) ? "%.1f" : "—",
             cell.sum.output_throughput);
    snprintf(per, sizeof per, isfinite(cell.sum.per_request_output_throughput_median) ? "%.1f" : "—",
             cell.sum.per_request_output_throughput_median);
    fprintf(stderr, "%s: %lld ok, %lld failed, %.1f s, %s tok/s aggregate, %s tok/s per request\n",
            c->progress_label, (long long)cell.sum.completed, (long long)cell.sum.failed,
            isfinite(cell.sum.duration) ? cell.sum.duration : 0.0, agg, per);
    /* a target that died is reported, not waited on */
    if (!g_stop && kept > 0 && (!cal_target_alive(s->target) ||
                                (cell.sum.completed == 0 && cell.sum.n_connect_error +
                                 cell.sum.n_stream_error + cell.sum.n_timeout > 0))) {
        c->target_failed = 1;
        const char *lp = cal_target_log_path(s->target);
        char tail[400] = "";
        if (lp) {
            FILE *lf = fopen(lp, "r");
            if (lf) {
                fseek(lf, 0, SEEK_END);
                long sz = ftell(lf);
                fseek(lf, sz > 300 ? sz - 300 : 0, SEEK_SET);
                size_t k = fread(tail, 1, sizeof tail - 1, lf);
                tail[k] = '\0';
                for (size_t i = 0; i < k; i++) if (tail[i] == '\n') tail[i] = ' ';
                fclose(lf);
            }
        }
        snprintf(c->fail_msg, sizeof c->fail_msg, "%s%sthe target %s during shot %d (%s)%s%s",
                 s->name, s->name[0] ? " " : "",
                 cal_target_alive(s->target) ? "stopped answering" : "exited", shot,
                 s->url_shown, tail[0] ? ": " : "", tail);
    }
    rc = CAL_OK;
out:
    if (res) for (size_t i = 0; i < n; i++) cal_req_result_free(&res[i]);
    if (prompts) for (size_t i = 0; i < n; i++) free(prompts[i]);
    free(prompts);
    free(reqs);
    free(res);
    return rc;
}

/* ---- run-level JSON records -------------------------------------------- */
static char *target_json(ctx *c)
{
    json_t *arr = json_array();
    for (int i = 0; i < c->n_sides; i++) {
        side *s = &c->sides[i];
        json_t *t = json_object();
        json_object_set_new(t, "kind", json_string(cal_target_kind_name(s->tcfg.kind)));
        if (s->tcfg.kind == CAL_TARGET_BUILTIN) json_object_set_new(t, "name", json_string(c->o->preset));
        else if (s->tcfg.kind == CAL_TARGET_LAUNCH) json_object_set_new(t, "name", json_string(s->tcfg.command));
        else json_object_set_new(t, "name", json_string(s->url_shown));
        json_object_set_new(t, "model", s->model[0] ? json_string(s->model) : json_null());
        json_object_set_new(t, "version", c->o->label ? json_string(c->o->label)
                                          : s->model[0] ? json_string(s->model) : json_null());
        json_object_set_new(t, "url", json_string(s->url_shown));
        json_object_set_new(t, "command", s->tcfg.command ? json_string(s->tcfg.command) : json_null());
        int64_t ln = cal_target_load_ns(s->target);
        json_object_set_new(t, "load_s", ln >= 0 ? json_real(ln / 1e9) : json_null());
        json_object_set_new(t, "api", json_string(c->o->api_name));
        const char *det = cal_target_detail(s->target);
        if (det) json_object_set_new(t, "detail", json_string(det));
        if (s->name[0]) json_object_set_new(t, "side", json_string(s->name));
        json_array_append_new(arr, t);
    }
    json_t *out;
    if (c->n_sides == 1) {
        out = json_incref(json_array_get(arr, 0));
    } else {
        out = json_deep_copy(json_array_get(arr, 0));
        json_object_set_new(out, "ab", json_incref(arr));
    }
    json_decref(arr);
    char *s = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return s;
}

static char *protocol_json(ctx *c)
{
    opts *o = c->o;
    json_t *p = json_object();
    json_t *pl = json_array(), *cl = json_array();
    for (size_t i = 0; i < o->n_prompt; i++) json_array_append_new(pl, json_integer(o->prompt[i]));
    for (size_t i = 0; i < o->n_conc; i++) json_array_append_new(cl, json_integer(o->conc[i]));
    json_object_set_new(p, "shots", json_integer(o->shots));
    json_object_set_new(p, "warmup", json_integer(o->warmup));
    json_object_set_new(p, "rest_s", json_real(o->rest_s));
    json_object_set_new(p, "cold", json_boolean(o->cold));
    json_object_set_new(p, "noise_floor", json_real(o->noise_floor > 0 ? o->noise_floor : CAL_SHOT_NOISE_FLOOR));
    json_object_set_new(p, "concurrency", cl);
    json_object_set_new(p, "rate", o->rate > 0 ? json_real(o->rate) : json_null());
    json_object_set_new(p, "requests", o->requests ? json_integer(o->requests) : json_null());
    json_object_set_new(p, "duration_s", o->duration_s > 0 ? json_real(o->duration_s) : json_null());
    json_object_set_new(p, "prompt_tokens", pl);
    json_object_set_new(p, "content", json_string(cal_content_name(o->content)));
    json_object_set_new(p, "unique_prompts", json_boolean(!o->allow_prefix));
    json_object_set_new(p, "max_tokens", json_integer(o->max_tokens));
    json_object_set_new(p, "output_policy", json_string(o->free_output ? "at most" : "fixed"));
    json_object_set_new(p, "streaming", json_true());
    json_object_set_new(p, "api", json_string(o->api_name));
    json_object_set_new(p, "body", o->body ? json_loads(o->body, 0, NULL) : json_null());
    json_object_set_new(p, "connect_timeout_s", json_real(o->connect_s));
    json_object_set_new(p, "idle_timeout_s", json_real(o->idle_s));
    json_object_set_new(p, "seed", json_integer(o->seed));
    json_object_set_new(p, "ab", json_boolean(o->ab));
    json_object_set_new(p, "order", json_string("each shot runs every prompt length x concurrency cell in turn"));
    char *s = json_dumps(p, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(p);
    return s;
}

static char *telemetry_json(ctx *c)
{
    json_t *t = json_object(), *src = json_array();
    char summary[700] = "";
    if (c->o->no_tel) {
        snprintf(summary, sizeof summary, "off (--no-telemetry): clock and power not sampled");
    } else if (!c->tel) {
        snprintf(summary, sizeof summary, "absent: the sampler could not start");
    } else {
        const cal_tel_backend_info *b;
        size_t nb = cal_tel_backends(c->tel, &b);
        char avail[256] = "";
        size_t off = 0;
        for (size_t i = 0; i < nb; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "backend", json_string(b[i].name));
            json_object_set_new(o, "present", json_boolean(b[i].available));
            json_object_set_new(o, "why", json_string(b[i].reason));
            json_array_append_new(src, o);
            if (b[i].available && off < sizeof avail)
                off += (size_t)snprintf(avail + off, sizeof avail - off, "%s%s", off ? ", " : "", b[i].name);
        }
        const char *power_why = NULL;
        for (size_t i = 0; i < nb && !power_why; i++)
            if (!strcmp(b[i].name, "rapl") && !b[i].available) power_why = b[i].reason;
        snprintf(summary, sizeof summary, "%s · clock: %s · power: %s%s%s", avail[0] ? avail : "no backend",
                 c->clock_metric[0] ? c->clock_metric : "absent",
                 c->power_metric[0] ? c->power_metric : "absent",
                 !c->power_metric[0] && power_why ? " — " : "",
                 !c->power_metric[0] && power_why ? power_why : "");
        json_object_set_new(t, "interval_s", json_real(cal_tel_interval_ns(c->tel) / 1e9));
    }
    json_object_set_new(t, "sources", src);
    json_object_set_new(t, "clock_metric", c->clock_metric[0] ? json_string(c->clock_metric) : json_null());
    json_object_set_new(t, "power_metric", c->power_metric[0] ? json_string(c->power_metric) : json_null());
    json_object_set_new(t, "summary", json_string(summary));
    char *s = json_dumps(t, JSON_COMPACT);
    json_decref(t);
    return s;
}

/* ---- --ab: paired ratio of B to A over shots ----------------------------- */
static void ab_verdicts(const cal_run_data *d, json_t *verdicts)
{
    /* pair cells of the same config and shot index: ratio B/A of the column
     * the series is read on; t interval on the log ratios */
    for (size_t i = 0; i < d->n_cells; i++) {
        const cal_cell *a = &d->cells[i];
        if (strcmp(a->target, "A") || a->shot_kind == CAL_SHOT_WARMUP) continue;
        int first = 1;
        for (size_t k = 0; k < i; k++) {
            const cal_cell *p = &d->cells[k];
            if (!strcmp(p->target, "A") && p->concurrency == a->concurrency &&
                p->prompt_tokens == a->prompt_tokens && p->rate == a->rate &&
                p->shot_kind != CAL_SHOT_WARMUP)
                first = 0;
        }
        if (!first) continue;
        double lr[1024];
        size_t n = 0;
        int per_req = a->rate == 0 && a->concurrency <= 4;
        for (size_t x = 0; x < d->n_cells && n < 1024; x++) {
            const cal_cell *ca = &d->cells[x];
            if (strcmp(ca->target, "A") || ca->shot_kind == CAL_SHOT_WARMUP ||
                ca->concurrency != a->concurrency || ca->prompt_tokens != a->prompt_tokens ||
                ca->rate != a->rate)
                continue;
            for (size_t y = 0; y < d->n_cells; y++) {
                const cal_cell *cb = &d->cells[y];
                if (strcmp(cb->target, "B") || cb->shot_index != ca->shot_index ||
                    cb->concurrency != ca->concurrency || cb->prompt_tokens != ca->prompt_tokens ||
                    cb->rate != ca->rate)
                    continue;
                double va = per_req ? ca->sum.per_request_output_throughput_median : ca->sum.output_throughput;
                double vb = per_req ? cb->sum.per_request_output_throughput_median : cb->sum.output_throughput;
                if (va > 0 && vb > 0) lr[n++] = log(vb / va);
            }
        }
        char line[400], load[32];
        if (a->rate > 0) snprintf(load, sizeof load, "rate %.3g/s", a->rate);
        else snprintf(load, sizeof load, "c%d", a->concurrency);
        if (n < 2) {
            snprintf(line, sizeof line, "A/B %s · %d tok: fewer than 2 paired shots: no ratio", load, a->prompt_tokens);
        } else {
            double m = cal_stats_mean(lr, n), sd = cal_stats_sd(lr, n);
            /* two-sided 95 % t quantiles for n−1 degrees of freedom */
            static const double T95[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                         2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                                         2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
            double tq = n - 1 < sizeof T95 / sizeof T95[0] ? T95[n - 1] : 1.96;
            double h = tq * sd / sqrt((double)n);
            snprintf(line, sizeof line,
                     "A/B %s · %d tok: B ÷ A = %.3f× (95 %% CI %.3f–%.3f, %zu paired shots, %s "
                     "column)%s",
                     load, a->prompt_tokens, exp(m), exp(m - h), exp(m + h), n,
                     per_req ? "per-request" : "aggregate",
                     (exp(m - h) > 1 || exp(m + h) < 1) ? "" : ": no detectable difference");
        }
        json_array_append_new(verdicts, json_string(line));
    }
}

/* ---- main --------------------------------------------------------------- */
int cmd_run(int argc, char **argv)
{
    opts o;
    int prc = parse_opts(argc, argv, &o);
    if (prc == -1) return CLI_OK;
    if (prc) return prc;
    if (!o.seed_given) o.seed = (long)(cal_wall_ns() & 0x7fffffff);
    for (size_t i = 0; i < o.n_conc && o.requests && o.rate == 0; i++)
        if (o.requests < o.conc[i])
            fprintf(stderr, "caliper run: warning: --requests %ld is below --concurrency %ld: that "
                            "cell never has %ld requests in flight\n", o.requests, o.conc[i], o.conc[i]);

    ctx c;
    memset(&c, 0, sizeof c);
    c.o = &o;
    c.tty = cli_stderr_is_tty();
    c.api_key = o.api_key_env ? getenv(o.api_key_env) : NULL;
    const char *warn = cli_build_warning();
    if (warn) fprintf(stderr, "caliper run: warning: %s\n", warn);

    int rc = cal_store_open(o.db, &c.st);
    if (rc) return cli_fail(CMD, "--db: cannot open \"%s\": %s", o.db, cal_strerror(rc));

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (!o.no_tel) {
        cal_tel_config tc = {.interval_ns = (int64_t)(o.interval_s * 1e9)};
        if (cal_tel_open(&c.tel, &tc) == CAL_OK) {
            cal_tel_tick(c.tel);
            if (cal_tel_pick_clock(c.tel, c.clock_metric, sizeof c.clock_metric)) c.clock_metric[0] = '\0';
            if (cal_tel_pick_power(c.tel, c.power_metric, sizeof c.power_metric)) c.power_metric[0] = '\0';
            cal_tel_start(c.tel);
        }
    }

    /* targets */
    c.n_sides = o.ab ? 2 : 1;
    for (int i = 0; i < c.n_sides; i++) {
        side *s = &c.sides[i];
        if (o.ab) snprintf(s->name, sizeof s->name, "%c", 'A' + i);
        s->tcfg.stop = &g_stop;
        s->tcfg.launch_timeout_ns = (int64_t)(o.launch_timeout_s * 1e9);
        if (o.n_launch) {
            s->tcfg.kind = CAL_TARGET_LAUNCH;
            s->tcfg.command = o.launch[o.ab ? i : 0];
            s->tcfg.url = o.n_url ? o.url[0] : NULL;
            s->tcfg.port = (int)o.port;
            if (o.ab && o.n_url != 2) s->tcfg.url = NULL;
            if (o.ab && o.n_url == 2) s->tcfg.url = o.url[i];
        } else if (o.n_url) {
            s->tcfg.kind = CAL_TARGET_URL;
            s->tcfg.url = o.url[o.ab ? i : 0];
        } else {
            s->tcfg.kind = CAL_TARGET_BUILTIN;
            s->tcfg.self_exe = "/proc/self/exe";
            s->tcfg.preset = o.preset;
            s->tcfg.serve_args = o.serve_args;
        }
        s->pcfg.api = o.api;
        s->pcfg.api_key = c.api_key;
        s->pcfg.extra_body = o.body;
        s->pcfg.ignore_eos = !o.free_output;
        s->pcfg.connect_timeout_ns = (int64_t)(o.connect_s * 1e9);
        s->pcfg.idle_timeout_ns = (int64_t)(o.idle_s * 1e9);
        s->pcfg.keep_chunks = 1;
        s->process_start_ns = -1;
    }
    int exit_code = CLI_OK;
    for (int i = 0; i < c.n_sides; i++) {
        char shown[512];
        cal_url_redact(c.sides[i].tcfg.url ? c.sides[i].tcfg.url : "", shown, sizeof shown);
        fprintf(stderr, "caliper run: %s %s...\n",
                c.sides[i].tcfg.kind == CAL_TARGET_URL ? "checking" : "starting",
                c.sides[i].tcfg.kind == CAL_TARGET_BUILTIN ? "the built-in engine"
                : c.sides[i].tcfg.kind == CAL_TARGET_LAUNCH ? c.sides[i].tcfg.command
                                                            : shown);
        if (start_side(&c, &c.sides[i])) {
            exit_code = g_stop ? 130 : cli_fail(CMD, "%s", c.fail_msg);
            goto cleanup;
        }
        side *s = &c.sides[i];
        if (o.model) snprintf(s->model, sizeof s->model, "%s", o.model);
        else if (cal_target_models(s->url, c.api_key,
                                   (int64_t)(fmin(5.0, o.connect_s + o.idle_s) * 1e9), s->model,
                                   sizeof s->model, NULL) != CAL_OK)
            s->model[0] = '\0';
        s->pcfg.model = s->model[0] ? s->model : NULL;
        cal_probe_close(&s->probe);
        if (cal_probe_open(&s->pcfg, &s->probe)) {
            exit_code = cli_fail(CMD, "probe: cannot open for %s", s->url_shown);
            goto cleanup;
        }
        /* prompts: exact lengths through the server's tokenizer */
        cal_http_tokenizer *tk = NULL;
        /* bounded like a request: connect timeout plus one idle period */
        cal_http_tokenizer_open(s->url, s->model[0] ? s->model : NULL, c.api_key,
                                (int64_t)((o.connect_s + o.idle_s) * 1e9), &tk);
        for (size_t p = 0; p < o.n_prompt; p++) {
            cal_workload_config wc = {.content = o.content, .prompt_tokens = (int)o.prompt[p],
                                      .unique = !o.allow_prefix, .seed = (uint64_t)o.seed,
                                      .count = tk ? cal_http_tokenizer_count : NULL, .count_ud = tk};
            rc = cal_workload_open(&wc, &s->wl[p]);
            if (rc && rc != CAL_ENOMEM && rc != CAL_EINVAL) {
                fprintf(stderr, "caliper run: the tokenizer of %s failed (%s): prompt lengths "
                                "will be approximate\n", s->url_shown, cal_strerror(rc));
                wc.count = NULL;
                rc = cal_workload_open(&wc, &s->wl[p]);
            }
            if (rc) {
                cal_http_tokenizer_close(&tk);
                exit_code = cli_fail(CMD, "--prompt-tokens: %ld: %s", o.prompt[p], cal_strerror(rc));
                goto cleanup;
            }
        }
        s->tk = tk;   /* the workload keeps counting each prompt with it */
    }

    char host_short[256];
    c.run.label = (char *)o.label;
    c.run.build = (char *)cli_build_string();
    c.run.host_json = cal_host_json(host_short, sizeof host_short);
    c.run.target_json = target_json(&c);
    c.run.protocol_json = protocol_json(&c);
    c.run.telemetry_json = telemetry_json(&c);
    rc = cal_store_begin_run(c.st, &c.run);
    if (rc) {
        exit_code = cli_fail(CMD, "cannot store the run in %s: %s", o.db, cal_store_errmsg(c.st));
        goto cleanup;
    }
    fprintf(stderr, "caliper run: run %lld · %ld shot%s%s · %zu cell%s per shot\n", (long long)c.run.id,
            o.shots + o.warmup, o.shots + o.warmup > 1 ? "s" : "", o.warmup ? " (with warm-up)" : "",
            o.n_prompt * (o.rate > 0 ? 1 : o.n_conc), o.n_prompt * o.n_conc > 1 ? "s" : "");

    cal_cell_kind ckind = o.rate > 0 ? CAL_CELL_RATE
                          : o.n_conc > 1 ? CAL_CELL_CONCURRENCY
                          : o.n_prompt > 1 ? CAL_CELL_PROMPT_SWEEP : CAL_CELL_SHOTS;
    long total_shots = o.shots + o.warmup;
    int64_t last_end = 0;
    for (long shot = 1; shot <= total_shots && !g_stop && !c.target_failed; shot++) {
        for (int si = 0; si < c.n_sides && !g_stop && !c.target_failed; si++) {
            /* --ab: alternate the order shot by shot so drift hits both */
            side *s = &c.sides[(o.ab && shot % 2 == 0) ? 1 - si : si];
            if (shot > 1 && o.cold) {
                cal_target_stop(&s->target);
                if (start_side(&c, s)) {
                    c.target_failed = !g_stop;
                    break;
                }
            }
            int64_t rest_ns = 0;
            if (shot > 1 && si == 0 && o.rest_s > 0) {
                fprintf(stderr, "caliper run: resting %.1f s before shot %ld\n", o.rest_s, shot);
                cal_sleep_ns((int64_t)(o.rest_s * 1e9), &g_stop);
                rest_ns = cal_now_ns() - last_end;
            } else if (shot > 1 && o.rest_s > 0) {
                rest_ns = (int64_t)(o.rest_s * 1e9);
            }
            if (g_stop) break;
            cal_shot_kind kind;
            if (shot <= o.warmup) kind = CAL_SHOT_WARMUP;
            else if (s->fresh && s->tcfg.kind != CAL_TARGET_URL) kind = CAL_SHOT_COLD;
            else if (s->fresh) kind = CAL_SHOT_UNKNOWN;
            else if (rest_ns > 0) kind = CAL_SHOT_RESTED;
            else kind = CAL_SHOT_WARM;
            s->fresh = 0;
            size_t ncl = o.rate > 0 ? 1 : o.n_conc;
            for (size_t pi = 0; pi < o.n_prompt && !g_stop && !c.target_failed; pi++)
                for (size_t ci = 0; ci < ncl && !g_stop && !c.target_failed; ci++) {
                    long conc = o.rate > 0 ? (o.conc_given ? o.conc[0] : 0) : o.conc[ci];
                    rc = run_cell(&c, s, pi, conc, (int)shot, kind,
                                  ci == 0 && pi == 0 ? rest_ns : 0, ckind);
                    if (rc == CAL_ECANCEL) break;     /* Ctrl-C while preparing */
                    if (rc) {
                        c.target_failed = 1;
                        break;
                    }
                }
            last_end = cal_now_ns();
        }
    }

    /* finish: load back what was stored and print it the way `show` will */
    if (c.tel) cal_tel_stop(c.tel);
    drain_telemetry(&c);
    cal_run_status status = g_stop ? CAL_RUN_INTERRUPTED : c.target_failed ? CAL_RUN_FAILED : CAL_RUN_OK;
    cal_store_flush(c.st);
    cal_run_data *d = NULL;
    rc = cal_store_load_run(c.st, c.run.id, CAL_LOAD_CHUNKS, &d);
    char *verdicts = NULL;
    if (rc == CAL_OK) {
        char *vj = run_view_verdicts_json(d);
        json_t *va = vj ? json_loads(vj, 0, NULL) : json_array();
        free(vj);
        if (!va) va = json_array();
        if (o.ab) ab_verdicts(d, va);
        if (c.target_failed && c.fail_msg[0]) json_array_append_new(va, json_string(c.fail_msg));
        verdicts = json_dumps(va, JSON_COMPACT);
        json_decref(va);
    }
    if (cal_store_finish_run(c.st, c.run.id, status, verdicts))
        fprintf(stderr, "caliper run: cannot mark run %lld finished: %s\n", (long long)c.run.id,
                cal_store_errmsg(c.st));
    if (d) {
        d->run.status = status;
        free(d->run.verdicts_json);
        d->run.verdicts_json = verdicts;
        verdicts = NULL;
        fputc('\n', stderr);
        run_view_print(stdout, d, o.db);
        fflush(stdout);
        if (o.json) {
            FILE *jf = fopen(o.json, "w");
            if (!jf || run_view_json(jf, d) != 0) {
                fprintf(stderr, "caliper run: --json: cannot write \"%s\"\n", o.json);
                exit_code = CLI_FAIL;
            }
            if (jf) fclose(jf);
        }
        /* --duration cuts the requests still in flight at the end of each
         * cell: they are stored as cancelled, but are not a failure */
        int64_t failed = 0;
        for (size_t i = 0; i < d->n_cells; i++)
            failed += d->cells[i].sum.failed - (o.duration_s > 0 ? d->cells[i].sum.n_cancelled : 0);
        if (failed && exit_code == CLI_OK) exit_code = CLI_FAIL;
        cal_run_data_free(&d);
    } else {
        fprintf(stderr, "caliper run: cannot load run %lld back: %s\n", (long long)c.run.id,
                cal_store_errmsg(c.st));
        exit_code = CLI_FAIL;
    }
    free(verdicts);
    if (status == CAL_RUN_INTERRUPTED) {
        fprintf(stderr, "caliper run: interrupted: run %lld is stored and marked interrupted\n",
                (long long)c.run.id);
        exit_code = 130;
    } else if (status == CAL_RUN_FAILED) {
        fprintf(stderr, "caliper run: %s\n", c.fail_msg[0] ? c.fail_msg : "the run failed");
        exit_code = CLI_FAIL;
    }

cleanup:
    for (int i = 0; i < c.n_sides; i++) {
        side *s = &c.sides[i];
        for (size_t p = 0; p < o.n_prompt; p++) cal_workload_close(&s->wl[p]);
        cal_http_tokenizer_close(&s->tk);
        cal_probe_close(&s->probe);
        cal_target_stop(&s->target);
    }
    cal_tel_close(&c.tel);
    free(c.run.host_json);
    free(c.run.target_json);
    free(c.run.protocol_json);
    free(c.run.telemetry_json);
    cal_store_close(&c.st);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    return exit_code;
}
