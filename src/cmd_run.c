/* caliper run — flags into a plan and targets for the library's run model
 * (caliper/run.h, lib/protocol/run.c), progress and the stored run onto the
 * terminal. The run itself — shots, cells, telemetry, the store, every
 * request accounted for — is cal_run_series (SPEC 1.1–1.3). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/auth.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/keep.h"
#include "caliper/noise.h"
#include "caliper/platform.h"
#include "caliper/probe.h"
#include "caliper/report.h"
#include "caliper/protocol.h"
#include "caliper/report.h"
#include "caliper/run.h"
#include "caliper/saturation.h"
#include "caliper/store.h"
#include "caliper/telemetry.h"
#include "caliper/url.h"
#include "caliper/utf8.h"
#include "caliper/workload.h"
#include "caliper/workload_traffic.h"
#include "cli.h"
#include "mpi_ops.h"
#include "run_dist.h"
#include "run_view.h"
#include "serve_target.h"

#define CMD "run"
#define MAX_LIST CAL_RUN_MAX_LIST
#define DEFAULT_SHOTS  CAL_RUN_DEFAULT_SHOTS    /* with no shot flag: the library's */
#define DEFAULT_WARMUP CAL_RUN_DEFAULT_WARMUP   /* calibrated default protocol */
#define MAX_RATE 1e5   /* requests/s: --rate above it is a usage error, not an overflow */

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
        "  --prompt-tokens LIST prompt lengths, exact via the server's /tokenize (default 256),\n"
        "                       or one distribution: uniform:A-B, normal:MEAN,SD, dataset\n"
        "  --max-tokens N       output length, fixed with ignore_eos (default 64); or a\n"
        "                       distribution as for --prompt-tokens\n"
        "  --dataset FILE       prompts from a file, sampled with --seed (docs/workload.md)\n"
        "  --dataset-format F   text, jsonl, sharegpt, openai-chat, proxy-log (default: by\n"
        "                       extension: .jsonl jsonl, .json sharegpt, else text)\n"
        "  --scenario chat      simulated chat users: a shared system+tools block, growing\n"
        "                       history, one cell per turn (--max-tokens: each answer)\n"
        "  --users N  --turns N (default 4 and 6)   --system-tokens N (default 6765)\n"
        "  --user-tokens SPEC   each new user message (default 64; dataset: --dataset's)\n"
        "  --think-time SPEC    ms between a user's turns (default uniform:200-800)\n"
        "  --stagger T          user u starts u x T in (default 250ms)\n"
        "  --replay LOG         send the turns of a caliper proxy --log to the target\n"
        "  --replay-speed X     recorded gaps between turns / X (default 1)\n"
        "  --free-output        let the model stop early (no ignore_eos, no length check)\n"
        "  --allow-prefix-cache identical prompts (default: a unique nonce line per request)\n"
        "load:\n"
        "  --concurrency LIST   closed-loop cells, e.g. 1,4,8,32 (default 1)\n"
        "  --requests N         requests per cell (default max(8, 2 x concurrency))\n"
        "  --duration T         run each cell for T instead (e.g. 30s): requests keep coming\n"
        "                       until T; the ones in flight then are stored cancelled\n"
        "  --rate R             open loop: Poisson arrivals at R req/s (latency from the\n"
        "                       scheduled time); --concurrency then caps in-flight requests\n"
        "  --loops N            client event loops, one thread each (default: the CPUs caliper\n"
        "                       may use, less those a local engine is pinned to)\n"
        "  --no-connect-ahead   open each connection when its first request goes out; by\n"
        "                       default (--connect-ahead) one keep-alive connection per slot\n"
        "                       is opened before a cell's clock starts (docs/run.md)\n"
        "  --rate ramp:A-B/T    arrivals whose rate rises from A to B req/s over T, then holds\n"
        "  --rate burst:N/every T   N requests at once every T (docs/load.md)\n"
        "  --slo ttft=500ms,tpot=50ms   goodput: requests/s meeting every bound (keys ttft,\n"
        "                       itl (the request's ITL p99), tpot, e2e), beside throughput\n"
        "  --sweep saturation   raise the --rate (default 1) step by step until goodput\n"
        "                       stops rising, and report the knee (needs --slo)\n"
        "  --sweep-max-rate R   the sweep's last rate (default 16 x --rate)\n"
        "  --sweep-steps N      at most N rates, geometric from --rate (default 8)\n"
        "shots (cold, warm and rested; docs/run.md):\n"
        "  --shots N            N consecutive shots of the whole workload (default 5 after\n"
        "                       1 warm-up shot when no shot flag is given; 1 with --duration,\n"
        "                       --ab, --scenario, --replay, --sweep, --shard or --mpi;\n"
        "                       --shots 1 gives no shot verdict)\n"
        "  --rest T             rest between shots (default 0)\n"
        "  --warmup K           K shots first, recorded but left out of summaries (default 1\n"
        "                       with the default shots, else 0)\n"
        "  --cold               a fresh engine process for every shot (built-in or --launch)\n"
        "  --noise-floor R      the smallest shot-to-shot drop worth calling (default 3%%)\n"
        "  --equivalence R      the largest drop a \"no wall\" verdict rules out (default 10%%):\n"
        "                       said only when the 90%% CI lies inside it, else \"cannot judge\"\n"
        "  --pool-noise         judge with the warm-shot spread of earlier runs of this\n"
        "                       protocol pooled in: more power where the machine's noise\n"
        "                       holds steady, more false alarms where it does not\n"
        "output:\n"
        "  --db FILE            the store (default caliper.db)\n"
        "  --json FILE          also write the whole run as JSON\n"
        "  --connect-timeout T  (default 10s)   --idle-timeout T  no bytes for T ends a request (60s)\n"
        "  --request-timeout T  a request not done T after it was sent ends as timeout\n"
        "                       (default: connect + idle timeout + 1s per --max-tokens)\n"
        "  --no-telemetry       do not sample clocks and power   --interval T  sampling period (250ms)\n"
        "  --seed N             prompt nonces and Poisson arrivals (default: from the clock)\n"
        "  --keep-chunks all|none|N   raw chunk timestamps to keep in the run (default 8Mi;\n"
        "                       ITL percentiles come from histograms once any is dropped)\n"
        "several clients (docs/distributed.md):\n"
        "  --shard I/N          run share I of N of the load; --json FILE then writes the\n"
        "                       shard for `caliper merge`\n"
        "  --start-at TIME      start the first shot at TIME (Unix seconds or 2026-12-01T13:00:00Z)\n"
        "  --mpi                under mpirun: every rank runs its share, rank 0 stores one run\n"
        "\n"
        "Exit status: 0 all requests ok, 1 a request failed or the target failed,\n"
        "2 usage error, 130 interrupted (what was measured is stored).\n");
}

/* ---- options ------------------------------------------------------------ */
/* The plan is filled in place, from the library's defaults
 * (cal_run_plan_default); the rest is what only the command line has. */
typedef struct opts {
    cal_run_plan plan;               /* the flags that are plan fields */
    cal_chat_config chat;            /* --scenario chat: its users and turns */
    const char *url[2];
    int n_url;
    const char *launch[2];
    int n_launch;
    cal_api api;
    const char *api_name, *model, *api_key_env, *body, *preset, *serve_args;
    long port;
    double launch_timeout_s;
    int conc_given, prompt_given, user_tokens_given;
    int shots_given, warmup_given;   /* --shots, --warmup: else the default protocol's */
    int pool_noise;                  /* --pool-noise: judge with earlier runs' shot spread */
    int ab;
    const char *db, *json;
    double connect_s, idle_s;
    double request_s;                /* 0: derived, cal_probe_request_timeout_ns */
    int seed_given;
    dist_opts dist;                  /* --shard, --start-at, --mpi */
    long loops;                      /* 0: CAL_PROBE_LOOPS_AUTO */
    int no_connect_ahead;            /* --no-connect-ahead */
    const char *dataset, *dataset_format, *scenario, *replay;  /* files and names as given */
} opts;

enum {
    O_URL = 256, O_LAUNCH, O_PORT, O_LTIMEOUT, O_PRESET, O_SERVEARGS, O_API, O_MODEL,
    O_KEYENV, O_BODY, O_LABEL, O_AB, O_CONTENT, O_PTOK, O_MAXTOK, O_FREE, O_PREFIX, O_CONC,
    O_REQS, O_DUR, O_RATE, O_SHOTS, O_REST, O_WARMUP, O_COLD, O_POOL, O_DB, O_JSON, O_CTIMEOUT,
    O_ITIMEOUT, O_RTIMEOUT, O_NOTEL, O_INTERVAL, O_SEED, O_FLOOR, O_EQUIV, O_HELP,
    O_DATASET, O_DSFMT, O_SCENARIO, O_USERS, O_TURNS, O_SYSTOK, O_USERTOK, O_THINK, O_STAGGER,
    O_REPLAY, O_RSPEED,
    O_KEEP, O_SHARD, O_STARTAT, O_MPI, O_LOOPS, O_SLO, O_SWEEP, O_SWEEPMAX, O_SWEEPSTEPS, O_AHEAD, O_NOAHEAD
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
    {"pool-noise", no_argument, 0, O_POOL},
    {"db", required_argument, 0, O_DB}, {"json", required_argument, 0, O_JSON},
    {"connect-timeout", required_argument, 0, O_CTIMEOUT},
    {"idle-timeout", required_argument, 0, O_ITIMEOUT},
    {"request-timeout", required_argument, 0, O_RTIMEOUT},
    {"no-telemetry", no_argument, 0, O_NOTEL}, {"interval", required_argument, 0, O_INTERVAL},
    {"seed", required_argument, 0, O_SEED}, {"noise-floor", required_argument, 0, O_FLOOR},
    {"equivalence", required_argument, 0, O_EQUIV},
    {"loops", required_argument, 0, O_LOOPS},
    {"connect-ahead", no_argument, 0, O_AHEAD},
    {"no-connect-ahead", no_argument, 0, O_NOAHEAD},
    {"slo", required_argument, 0, O_SLO}, {"sweep", required_argument, 0, O_SWEEP},
    {"sweep-max-rate", required_argument, 0, O_SWEEPMAX},
    {"sweep-steps", required_argument, 0, O_SWEEPSTEPS},
    {"help", no_argument, 0, O_HELP},
    {"keep-chunks", required_argument, 0, O_KEEP}, {"shard", required_argument, 0, O_SHARD},
    {"start-at", required_argument, 0, O_STARTAT}, {"mpi", no_argument, 0, O_MPI},
    {"dataset", required_argument, 0, O_DATASET}, {"dataset-format", required_argument, 0, O_DSFMT},
    {"scenario", required_argument, 0, O_SCENARIO}, {"users", required_argument, 0, O_USERS},
    {"turns", required_argument, 0, O_TURNS}, {"system-tokens", required_argument, 0, O_SYSTOK},
    {"user-tokens", required_argument, 0, O_USERTOK}, {"think-time", required_argument, 0, O_THINK},
    {"stagger", required_argument, 0, O_STAGGER}, {"replay", required_argument, 0, O_REPLAY},
    {"replay-speed", required_argument, 0, O_RSPEED},
    {0, 0, 0, 0}};

/* The one map from a plan field (cal_plan_error.field, cal_run_event.field)
 * to the flag that sets it. */
static const char *const FIELD_FLAG[][2] = {
    {"prompt_tokens", "--prompt-tokens"}, {"prompt_len", "--prompt-tokens"},
    {"concurrency", "--concurrency"},     {"max_tokens", "--max-tokens"},
    {"output_len", "--max-tokens"},       {"rate", "--rate"},
    {"pattern", "--rate"},                {"duration_s", "--duration"},
    {"requests", "--requests"},           {"shots", "--shots"},
    {"warmup", "--warmup"},               {"rest_s", "--rest"},
    {"cold", "--cold"},                   {"interval_s", "--interval"},
    {"noise_floor", "--noise-floor"},     {"equivalence", "--equivalence"},
    {"slo", "--slo"},                     {"sweep", "--sweep"},
    {"sweep_max_rate", "--sweep-max-rate"}, {"sweep_steps", "--sweep-steps"},
    {"dataset", "--dataset"},             {"chat", "--scenario"},
    {"chat.user_tokens", "--user-tokens"}, {"replay_log", "--replay"},
    {"keep_chunks", "--keep-chunks"},     {"seed", "--seed"},
};

/* The flag of a plan field; NULL for a field no flag sets. */
static const char *field_flag(const char *field)
{
    for (size_t i = 0; field && i < sizeof FIELD_FLAG / sizeof FIELD_FLAG[0]; i++)
        if (!strcmp(field, FIELD_FLAG[i][0])) return FIELD_FLAG[i][1];
    return NULL;
}

/* A --prompt-tokens / --max-tokens value that is one distribution rather
 * than a list: has a ':' or is "dataset". */
static int is_dist(const char *s) { return strchr(s, ':') || !strcmp(s, "dataset"); }

static int parse_dist(const char *flag, const char *arg, int max, cal_lendist *d)
{
    char why[200];
    if (cal_lendist_parse(arg, max, d, why, sizeof why)) return cli_usage_error(CMD, "%s: %s", flag, why);
    return 0;
}

/* A list flag into an int list of the plan. */
static int parse_int_list(const char *flag, const char *arg, long hi, int *out, size_t *n)
{
    long v[MAX_LIST];
    if (cli_parse_long_list(CMD, flag, arg, 1, hi, v, MAX_LIST, n)) return CLI_USAGE;
    for (size_t i = 0; i < *n; i++) out[i] = (int)v[i];
    return 0;
}

static int parse_int(const char *flag, const char *arg, long lo, long hi, int *out)
{
    long v;
    if (cli_parse_long(CMD, flag, arg, lo, hi, &v)) return CLI_USAGE;
    *out = (int)v;
    return 0;
}

#define NOT_MINE (-2)   /* a parse_* function leaves this flag to the next */

/* Where to send requests and what to call the run. */
static int parse_target(opts *o, int c)
{
    switch (c) {
    case O_URL:
        if (o->n_url == 2) return cli_usage_error(CMD, "--url: at most two (with --ab)");
        if (strncmp(optarg, "http://", 7) && strncmp(optarg, "https://", 8))
            return cli_usage_error(CMD, "--url: \"%s\" is not an http:// or https:// URL", optarg);
        o->url[o->n_url++] = optarg;
        return 0;
    case O_LAUNCH:
        if (o->n_launch == 2) return cli_usage_error(CMD, "--launch: at most two (with --ab)");
        if (!*optarg) return cli_usage_error(CMD, "--launch: \"\" is not a command");
        o->launch[o->n_launch++] = optarg;
        return 0;
    case O_PORT: return cli_parse_long(CMD, "--port", optarg, 1, 65535, &o->port) ? CLI_USAGE : 0;
    case O_LTIMEOUT:
        return cli_parse_time_in(CMD, "--launch-timeout", optarg, "s", 0, 0, &o->launch_timeout_s) ? CLI_USAGE : 0;
    case O_PRESET: o->preset = optarg; return 0;
    case O_SERVEARGS: o->serve_args = optarg; return 0;
    case O_API:
        if (!strcmp(optarg, "completions")) o->api = CAL_API_COMPLETIONS;
        else if (!strcmp(optarg, "chat")) o->api = CAL_API_CHAT;
        else return cli_usage_error(CMD, "--api: \"%s\" is not completions or chat", optarg);
        o->api_name = optarg;
        return 0;
    case O_MODEL:
        /* it goes out in every request's JSON body, which holds UTF-8 only */
        if (cal_utf8_check(optarg, strlen(optarg)) < strlen(optarg))
            return cli_usage_error(CMD, "--model: byte %zu is not valid UTF-8 (the name goes "
                                   "out in each request's JSON body)",
                                   cal_utf8_check(optarg, strlen(optarg)) + 1);
        o->model = optarg;
        return 0;
    case O_KEYENV:
        if (!getenv(optarg)) return cli_usage_error(CMD, "--api-key-env: \"%s\" is not set in the environment", optarg);
        if (strlen(getenv(optarg)) > CAL_API_KEY_MAX)
            return cli_usage_error(CMD, "--api-key-env: \"%s\" holds a %zu-byte key; at most %d bytes are sent",
                                   optarg, strlen(getenv(optarg)), CAL_API_KEY_MAX);
        o->api_key_env = optarg;
        return 0;
    case O_BODY: {
        json_t *j = json_loads(optarg, 0, NULL);
        int okj = json_is_object(j);
        json_decref(j);
        if (!okj) return cli_usage_error(CMD, "--body: \"%s\" is not a JSON object", optarg);
        o->body = optarg;
        return 0;
    }
    case O_LABEL:
        if (!*optarg) return cli_usage_error(CMD, "--label: \"\" is empty");
        if (cal_utf8_check(optarg, strlen(optarg)) < strlen(optarg))
            return cli_usage_error(CMD, "--label: byte %zu is not valid UTF-8 (a label must "
                                   "survive export as JSON)", cal_utf8_check(optarg, strlen(optarg)) + 1);
        o->plan.label = optarg;
        return 0;
    case O_AB: o->ab = 1; return 0;
    }
    return NOT_MINE;
}

/* The prompts and answers: lengths, content, datasets, chat, replay. */
static int parse_workload(opts *o, int c)
{
    cal_run_plan *p = &o->plan;
    switch (c) {
    case O_CONTENT:
        if (cal_content_parse(optarg, &p->content))
            return cli_usage_error(CMD, "--content: \"%s\" is not code, prose or random", optarg);
        return 0;
    case O_PTOK:
        o->prompt_given = 1;
        if (is_dist(optarg)) return parse_dist("--prompt-tokens", optarg, 1 << 20, &p->prompt_len) ? CLI_USAGE : 0;
        return parse_int_list("--prompt-tokens", optarg, 1 << 20, p->prompt_tokens, &p->n_prompt);
    case O_MAXTOK:
        if (is_dist(optarg)) return parse_dist("--max-tokens", optarg, 1 << 20, &p->output_len) ? CLI_USAGE : 0;
        p->output_len = (cal_lendist){.kind = CAL_LEN_FIXED};
        return parse_int("--max-tokens", optarg, 1, 1 << 20, &p->max_tokens);
    case O_FREE: p->free_output = 1; return 0;
    case O_PREFIX: p->allow_prefix = 1; return 0;
    case O_DATASET:
        if (!*optarg) return cli_usage_error(CMD, "--dataset: \"\" is empty: give a file");
        o->dataset = optarg;
        return 0;
    case O_DSFMT: {
        cal_ds_format f;
        if (cal_ds_format_parse(optarg, &f))
            return cli_usage_error(CMD, "--dataset-format: \"%s\" is not text, jsonl, sharegpt, "
                                        "openai-chat or proxy-log", optarg);
        o->dataset_format = optarg;
        return 0;
    }
    case O_SCENARIO:
        if (strcmp(optarg, "chat")) return cli_usage_error(CMD, "--scenario: \"%s\" is not chat", optarg);
        o->scenario = optarg;
        return 0;
    case O_USERS: return parse_int("--users", optarg, 1, 4096, &o->chat.users);
    case O_TURNS: return parse_int("--turns", optarg, 1, 1024, &o->chat.turns);
    case O_SYSTOK: return parse_int("--system-tokens", optarg, 0, 1 << 20, &o->chat.system_tokens);
    case O_USERTOK:
        o->user_tokens_given = 1;
        return parse_dist("--user-tokens", optarg, 1 << 20, &o->chat.user_tokens) ? CLI_USAGE : 0;
    case O_THINK:
        if (!strcmp(optarg, "0")) o->chat.think_ms = (cal_lendist){.kind = CAL_LEN_FIXED, .n = 0};
        else if (parse_dist("--think-time", optarg, 3600000, &o->chat.think_ms)) return CLI_USAGE;
        if (o->chat.think_ms.kind == CAL_LEN_DATASET)
            return cli_usage_error(CMD, "--think-time: \"dataset\" has no think times; give ms");
        return 0;
    case O_STAGGER:
        return cli_parse_time_in(CMD, "--stagger", optarg, "s", 0, 3600, &o->chat.stagger_s) ? CLI_USAGE : 0;
    case O_REPLAY:
        if (!*optarg) return cli_usage_error(CMD, "--replay: \"\" is empty: give a proxy log");
        o->replay = optarg;
        return 0;
    case O_RSPEED:
        if (cli_parse_unit(CMD, "--replay-speed", optarg, CAL_U_RATIO, NULL, &p->replay_speed)) return CLI_USAGE;
        if (!(p->replay_speed >= 1e-6) || p->replay_speed > 1e6)
            return cli_usage_error(CMD, "--replay-speed: \"%s\" is not a factor from 1e-6 to 1e6", optarg);
        return 0;
    }
    return NOT_MINE;
}

/* How the requests arrive: closed or open loop, how many, for how long. */
static int parse_load(opts *o, int c)
{
    cal_run_plan *p = &o->plan;
    switch (c) {
    case O_CONC:
        o->conc_given = p->cap_given = 1;
        return parse_int_list("--concurrency", optarg, 100000, p->concurrency, &p->n_conc);
    case O_REQS: return cli_parse_long(CMD, "--requests", optarg, 1, 1000000, &p->requests) ? CLI_USAGE : 0;
    case O_DUR: return cli_parse_time_in(CMD, "--duration", optarg, "s", 0, 0, &p->duration_s) ? CLI_USAGE : 0;
    case O_RATE: {
        char why[200];
        if (cal_arrivals_parse(optarg, &p->pattern, why, sizeof why)) return cli_usage_error(CMD, "--%s", why);
        p->rate = cal_arrivals_mean_rate(&p->pattern);
        if (p->rate > MAX_RATE) return cli_usage_error(CMD, "--rate: \"%s\" is over %g requests/s", optarg, MAX_RATE);
        return 0;
    }
    case O_SLO: {
        char why[200];
        return cal_slo_parse(optarg, &p->slo, why, sizeof why) ? cli_usage_error(CMD, "--%s", why) : 0;
    }
    case O_SWEEP:
        if (strcmp(optarg, "saturation"))
            return cli_usage_error(CMD, "--sweep: \"%s\" is not a sweep (saturation)", optarg);
        p->sweep = 1;
        return 0;
    case O_SWEEPMAX:
        if (cli_parse_unit(CMD, "--sweep-max-rate", optarg, CAL_U_COUNT, NULL, &p->sweep_max_rate)) return CLI_USAGE;
        if (!(p->sweep_max_rate > 0) || p->sweep_max_rate > MAX_RATE)
            return cli_usage_error(CMD, "--sweep-max-rate: \"%s\" is not a request rate from 0 to %g/s", optarg, MAX_RATE);
        return 0;
    case O_SWEEPSTEPS: return parse_int("--sweep-steps", optarg, 2, CAL_SAT_MAX_STEPS, &p->sweep_steps);
    case O_LOOPS: return cli_parse_long(CMD, "--loops", optarg, 1, CAL_PROBE_MAX_LOOPS, &o->loops) ? CLI_USAGE : 0;
    case O_AHEAD: o->no_connect_ahead = 0; return 0;
    case O_NOAHEAD: o->no_connect_ahead = 1; return 0;
    case O_SHARD: return dist_parse_shard(optarg, &o->dist) ? CLI_USAGE : 0;
    case O_STARTAT: return dist_parse_start(optarg, &o->dist) ? CLI_USAGE : 0;
    case O_MPI: o->dist.mpi = 1; return 0;
    }
    return NOT_MINE;
}

/* Shots, the verdict's bounds, the output, timeouts and telemetry. */
static int parse_shots_output(opts *o, int c)
{
    cal_run_plan *p = &o->plan;
    long v;
    switch (c) {
    case O_SHOTS: o->shots_given = 1; return parse_int("--shots", optarg, 1, 1000, &p->shots);
    case O_REST:
        return cli_parse_unit_in(CMD, "--rest", optarg, CAL_U_TIME, "s", 0, CLI_TIME_MAX_S, 0, &p->rest_s) ? CLI_USAGE : 0;
    case O_WARMUP: o->warmup_given = 1; return parse_int("--warmup", optarg, 0, 1000, &p->warmup);
    case O_COLD: p->cold = 1; return 0;
    case O_POOL: o->pool_noise = 1; return 0;
    /* 0 is the plan's "the default"; on the command line it is no bound */
    case O_FLOOR:
        if (cli_parse_unit(CMD, "--noise-floor", optarg, CAL_U_RATIO, NULL, &p->noise_floor)) return CLI_USAGE;
        if (!(p->noise_floor > 0 && p->noise_floor < 1))
            return cli_usage_error(CMD, "--noise-floor: \"%s\" is not between 0 and 100 %%", optarg);
        return 0;
    case O_EQUIV:
        if (cli_parse_unit(CMD, "--equivalence", optarg, CAL_U_RATIO, NULL, &p->equivalence)) return CLI_USAGE;
        if (!(p->equivalence > 0 && p->equivalence < 1))
            return cli_usage_error(CMD, "--equivalence: \"%s\" is not between 0 and 100 %%", optarg);
        return 0;
    case O_DB:
        if (!*optarg) return cli_usage_error(CMD, "--db: \"\" is empty: give the store's file");
        o->db = optarg;
        return 0;
    case O_JSON: o->json = optarg; return 0;
    case O_CTIMEOUT: return cli_parse_time_in(CMD, "--connect-timeout", optarg, "s", 0, 0, &o->connect_s) ? CLI_USAGE : 0;
    case O_ITIMEOUT: return cli_parse_time_in(CMD, "--idle-timeout", optarg, "s", 0, 0, &o->idle_s) ? CLI_USAGE : 0;
    case O_RTIMEOUT: return cli_parse_time_in(CMD, "--request-timeout", optarg, "s", 0, 0, &o->request_s) ? CLI_USAGE : 0;
    case O_NOTEL: p->telemetry = 0; return 0;
    case O_INTERVAL: return cli_parse_time_in(CMD, "--interval", optarg, "ms", 0.01, 3600, &p->interval_s) ? CLI_USAGE : 0;
    case O_SEED:
        if (cli_parse_long(CMD, "--seed", optarg, 0, LONG_MAX, &v)) return CLI_USAGE;
        p->seed = (uint64_t)v;
        o->seed_given = 1;
        return 0;
    case O_KEEP: {
        long long k;
        char why[160];
        if (cal_keep_parse(optarg, &k, why, sizeof why)) return cli_usage_error(CMD, "--keep-chunks: %s", why);
        p->keep_chunks = k < 0 ? CAL_KEEP_ALL : k == 0 ? CAL_RUN_KEEP_NONE : k;
        return 0;
    }
    }
    return NOT_MINE;
}

/* The rules between flags that are not plan fields: targets, --ab, the
 * distributed flags, a dataset's format. The plan's own rules are the
 * library's (cal_plan_check, in check_plan below). */
static int check_flags(const opts *o)
{
    if (o->dist.shard_n && o->dist.mpi)
        return cli_usage_error(CMD, "--shard and --mpi: under MPI every rank takes its share itself");
    if (o->dist.shard_n && !o->json)
        return cli_usage_error(CMD, "--shard: needs --json FILE (the shard document `caliper merge` reads)");
    if ((o->dist.shard_n || o->dist.mpi) && o->ab)
        return cli_usage_error(CMD, "--ab: not with --shard or --mpi (one target per fleet)");
    if (o->n_url && o->n_launch && o->n_url != o->n_launch)
        return cli_usage_error(CMD, "--url and --launch together: give one --url per --launch "
                                    "(it names where that engine listens)");
    if (o->ab && o->n_launch == 2 && o->n_url != 2)
        return cli_usage_error(CMD, "--ab with two --launch: give two --url, one for each "
                                    "engine's address");
    if (o->ab && o->n_url != 2 && o->n_launch != 2)
        return cli_usage_error(CMD, "--ab: needs two --url or two --launch targets");
    if (!o->ab && (o->n_url == 2 || o->n_launch == 2))
        return cli_usage_error(CMD, "two targets given: add --ab to alternate them");
    if (o->plan.cold && o->n_url && !o->n_launch)
        return cli_usage_error(CMD, "--cold: needs an engine caliper starts (--launch or the "
                                    "built-in one), not --url");
    if (o->n_launch && !o->n_url && !o->port)
        return cli_usage_error(CMD, "--launch: give --port N (or --url) so caliper knows where "
                                    "the engine will answer");
    if (o->dataset_format && !o->dataset)
        return cli_usage_error(CMD, "--dataset-format: give --dataset FILE too");
    return 0;
}

/* The default protocol gives a calibrated verdict (docs/run.md): a warm-up
 * shot, then 5 measured shots (the plan's default); a --duration or --ab run
 * keeps the one shot of its stated length, a --scenario or --replay run the
 * one pass of its turns, a --sweep its one pass of rates, and a --shard or
 * --mpi run the one pass its shards merge into. Flags change only what they
 * name: --rest, --warmup or --cold alone keep the default shot count (a rest
 * between shots needs shots), --shots alone means no warm-up unless --warmup
 * says; a cold shot is its own fresh process, never preceded by a warm-up. */
static void shot_defaults(opts *o)
{
    cal_run_plan *p = &o->plan;
    int one_pass = p->duration_s > 0 || o->ab || o->scenario || o->replay || p->sweep ||
                   o->dist.shard_n || o->dist.mpi;
    if (!o->shots_given && one_pass) p->shots = 1;
    if (!o->warmup_given && (o->shots_given || one_pass || p->cold)) p->warmup = 0;
}

static int parse_opts(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    cal_run_plan_default(&o->plan);
    o->api_name = "completions";
    o->preset = "small";
    o->db = "caliper.db";
    o->connect_s = 10;
    o->idle_s = 60;
    o->launch_timeout_s = 120;
    o->chat = (cal_chat_config){.users = 4, .turns = 6, .system_tokens = CAL_CHAT_SYSTEM_TOKENS,
                                .user_tokens = {.kind = CAL_LEN_FIXED, .n = 64},
                                .think_ms = {.kind = CAL_LEN_UNIFORM, .lo = 200, .hi = 800},
                                .stagger_s = 0.25};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", LONGOPTS, NULL)) != -1) {
        if (c == O_HELP) { usage(stdout); return -1; }
        int rc = parse_target(o, c);
        if (rc == NOT_MINE) rc = parse_workload(o, c);
        if (rc == NOT_MINE) rc = parse_load(o, c);
        if (rc == NOT_MINE) rc = parse_shots_output(o, c);
        if (rc != NOT_MINE) {
            if (rc) return CLI_USAGE;
            continue;
        }
        if (optopt && optopt < 256 && optopt != '?')
            return cli_usage_error(CMD, "-%c: unknown option", optopt);
        if (optopt >= 256) return cli_usage_error(CMD, "%s: needs a value", argv[optind - 1]);
        return cli_usage_error(CMD, "%s: unknown option", argv[optind - 1]);
    }
    if (optind < argc) return cli_usage_error(CMD, "\"%s\": unexpected argument", argv[optind]);
    if (check_flags(o)) return CLI_USAGE;
    shot_defaults(o);
    return 0;
}

/* The library's check of the plan, its field mapped to the flag. */
static int check_plan(const cal_run_plan *p)
{
    cal_plan_error e;
    if (cal_plan_check(p, &e) == CAL_OK) return 0;
    const char *flag = field_flag(e.field);
    if (!flag) return cli_usage_error(CMD, "%s %s: %s", e.field, e.value, e.why);
    return cli_usage_error(CMD, "%s %s: %s", flag, e.value, e.why);
}

/* ---- the run: flags into a plan and targets, events onto the terminal --- */
static volatile int g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

typedef struct view {
    int tty;
    const char *db;
} view;

static void on_event(void *ud, const cal_run_event *ev)
{
    view *v = ud;
    switch (ev->kind) {
    case CAL_RUN_EV_STARTING:
        fprintf(stderr, "caliper run: %s %s...\n",
                !strcmp(ev->target_kind, "url") ? "checking" : "starting", ev->text);
        break;
    case CAL_RUN_EV_BEGUN:
        fprintf(stderr, "caliper run: run %lld · %d shot%s%s · %d cell%s per shot\n",
                (long long)ev->run_id, ev->total_shots, ev->total_shots > 1 ? "s" : "",
                ev->plan_warmup ? " (with warm-up)" : "", ev->cells_per_shot,
                ev->cells_per_shot > 1 ? "s" : "");
        break;
    case CAL_RUN_EV_REST:
        fprintf(stderr, "caliper run: resting %.1f s before shot %d\n", ev->seconds, ev->shot);
        break;
    case CAL_RUN_EV_PREPARING:
        if (v->tty && ev->total)
            fprintf(stderr, "\r%-48.48s preparing prompts %zu/%zu ", ev->label, ev->done, ev->total);
        else if (v->tty) fprintf(stderr, "\r%-48.48s preparing prompts...", ev->label);
        break;
    case CAL_RUN_EV_PROGRESS: {
        if (!v->tty) break;
        int w = 30, k = ev->total ? (int)(w * ev->done / ev->total) : w;
        fprintf(stderr, "\r%-48.48s [", ev->label);
        for (int i = 0; i < w; i++) fputc(i < k ? '#' : '.', stderr);
        if (ev->total) fprintf(stderr, "] %zu/%zu ", ev->done, ev->total);
        else fprintf(stderr, "] %zu ", ev->done);
        fflush(stderr);
        break;
    }
    case CAL_RUN_EV_CELL: {
        const cal_summary *m = &ev->cell->sum;
        if (v->tty) fprintf(stderr, "\r%-100s\r", "");
        char agg[32], per[32];
        snprintf(agg, sizeof agg, isfinite(m->output_throughput) ? "%.1f" : "—", m->output_throughput);
        snprintf(per, sizeof per, isfinite(m->per_request_output_throughput_median) ? "%.1f" : "—",
                 m->per_request_output_throughput_median);
        char good[64] = "";
        if (isfinite(m->goodput))
            snprintf(good, sizeof good, ", goodput %.3g of %.3g req/s", m->goodput,
                     isfinite(m->request_throughput) ? m->request_throughput : 0.0);
        fprintf(stderr, "%s: %lld ok, %lld failed, %.1f s, %s tok/s aggregate, %s tok/s per request%s\n",
                ev->label, (long long)m->completed, (long long)m->failed,
                isfinite(m->duration) ? m->duration : 0.0, agg, per, good);
        break;
    }
    case CAL_RUN_EV_NOTE: {
        /* a note on a plan field names the flag that set it */
        const char *flag = field_flag(ev->field);
        const char *text = ev->text;
        fprintf(stderr, "caliper run: %s%s%s%s%s\n", ev->side && ev->side[0] ? ev->side : "",
                ev->side && ev->side[0] ? ": " : "", flag ? flag : "", flag ? " " : "", text);
        break;
    }
    }
}

/* What the plan does not hold but the protocol record does: the request
 * shape and the timeouts. */
static char *protocol_extra(const opts *o)
{
    json_t *p = json_object();
    json_object_set_new(p, "api", json_string(o->api_name));
    json_object_set_new(p, "body", o->body ? json_loads(o->body, 0, NULL) : json_null());
    json_object_set_new(p, "connect_timeout_s", json_real(o->connect_s));
    json_object_set_new(p, "idle_timeout_s", json_real(o->idle_s));
    if (o->loops) json_object_set_new(p, "loops", json_integer(o->loops));
    json_object_set_new(p, "connect_ahead", json_boolean(!o->no_connect_ahead));
    cal_probe_config rt = { .connect_timeout_ns = (int64_t)(o->connect_s * 1e9),
                            .idle_timeout_ns = (int64_t)(o->idle_s * 1e9),
                            .request_timeout_ns = (int64_t)(o->request_s * 1e9) };
    json_object_set_new(p, "request_timeout_s",
                        json_real((double)cal_probe_request_timeout_ns(&rt, o->plan.max_tokens) / 1e9));
    char *s = json_dumps(p, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(p);
    return s;
}

/* The series key: the target as given and every protocol field that changes
 * what a shot measures (the shot flags aside), numbers as main's C locale. */
static void series_key(const opts *o, char *key, size_t n)
{
    cal_run_plan p = o->plan;
    cal_run_plan_fill(&p);
    /* a URL's credentials are never stored: the key holds it redacted */
    char url[CAL_NOISE_SERIES_MAX / 2] = "";
    if (o->n_url && cal_url_redact(o->url[0], url, sizeof url) != CAL_OK) url[0] = 0;
    const char *tgt = o->n_launch ? o->launch[0] : o->n_url ? url : "built-in";
    snprintf(key, n, "%s|%s|%s|%s|%s|%s|c%d|rate %g|p%d|m%d|%s|n%ld|d%g|free %d|prefix %d|rest %g",
             tgt, o->n_url && o->n_launch ? url : "", o->n_launch || o->n_url ? "" : o->preset,
             o->serve_args ? o->serve_args : "", o->model ? o->model : "", o->api_name,
             p.concurrency[0], p.rate, p.prompt_tokens[0], p.max_tokens, cal_content_name(p.content),
             p.requests, p.duration_s, p.free_output, p.allow_prefix, p.rest_s);
}

static int make_target(const opts *o, int i, const char *api_key, cal_run_target **out)
{
    cli_serve_argv serve;
    cal_served_config sc;
    memset(&sc, 0, sizeof sc);
    cal_target_config *t = &sc.target;
    t->launch_timeout_ns = (int64_t)(o->launch_timeout_s * 1e9);
    t->subreaper = 1;                /* stop waits for the engine's last process */
    t->death_signal = SIGTERM;       /* the engine does not outlive caliper */
    sc.probe.raise_nofile = 1;       /* descriptors for every connection */
    if (o->n_launch) {
        t->kind = CAL_TARGET_LAUNCH;
        t->command = o->launch[o->ab ? i : 0];
        t->url = o->n_url ? o->url[0] : NULL;
        t->port = (int)o->port;
        if (o->ab) t->url = o->n_url == 2 ? o->url[i] : NULL;
    } else if (o->n_url) {
        t->kind = CAL_TARGET_URL;
        t->url = o->url[o->ab ? i : 0];
    } else {
        t->kind = CAL_TARGET_BUILTIN;
        char why[300];
        const char *self = cal_plat_self_exe(why, sizeof why);
        if (!self) {
            cli_fail(CMD, "the built-in engine: cannot find this program to start it: %s", why);
            return CAL_ENOTFOUND;
        }
        cli_serve_argv_make(&serve, self, o->preset, o->serve_args);   /* the config copies it */
        t->argv = serve.argv;
        t->ready_line = cli_serve_ready_line;
        t->preset = o->preset;
    }
    sc.probe.api = o->api;
    sc.probe.api_key = api_key;
    sc.probe.extra_body = o->body;
    sc.probe.ignore_eos = !o->plan.free_output;
    sc.probe.connect_timeout_ns = (int64_t)(o->connect_s * 1e9);
    sc.probe.idle_timeout_ns = (int64_t)(o->idle_s * 1e9);
    sc.probe.request_timeout_ns = (int64_t)(o->request_s * 1e9);
    sc.probe.keep_chunks = 1;
    sc.probe.loops = o->loops ? (int)o->loops : CAL_PROBE_LOOPS_AUTO;
    sc.probe.no_connect_ahead = o->no_connect_ahead;
    sc.probe.model = o->model;
    sc.version = o->plan.label;
    /* bounded like a request: the model lookup by 5 s at most, each
     * tokenizer call by the connect timeout plus one idle period */
    sc.models_timeout_ns = (int64_t)(fmin(5.0, o->connect_s + o->idle_s) * 1e9);
    /* each call, a trickling answer included: one deadline, not one a prompt
     * (the first that times out ends the counting) */
    sc.tokenize_timeout_ns = (int64_t)(fmin(30.0, o->connect_s + o->idle_s) * 1e9);
    return cal_run_target_served(&sc, out);
}

/* The dataset, the chat scenario and the replay log into the plan: *ds and
 * *replay are the caller's to free. 0, or a usage error's exit code. */
static int load_traffic(opts *o, cal_dataset **ds, char **replay)
{
    cal_run_plan *p = &o->plan;
    if (o->dataset) {
        cal_ds_format f = CAL_DS_TEXT;
        size_t dl = strlen(o->dataset);
        if (o->dataset_format) cal_ds_format_parse(o->dataset_format, &f);
        else if (dl > 6 && !strcmp(o->dataset + dl - 6, ".jsonl")) f = CAL_DS_JSONL;
        else if (dl > 5 && !strcmp(o->dataset + dl - 5, ".json")) f = CAL_DS_SHAREGPT;
        char why[400];
        if (cal_dataset_load(o->dataset, f, ds, why, sizeof why))
            return cli_usage_error(CMD, "--dataset: %s (as %s)", why, cal_ds_format_name(f));
        p->dataset = *ds;
        if (!o->scenario && !o->replay && !o->prompt_given)
            p->prompt_len.kind = CAL_LEN_DATASET;   /* the entries' own prompts */
        fprintf(stderr, "caliper run: dataset %s (%s): %zu prompts%s, sha256 %.12s…\n", (*ds)->name,
                cal_ds_format_name(f), (*ds)->n, (*ds)->skipped ? " (some skipped: empty or failed)" : "",
                (*ds)->sha256);
    }
    if (o->scenario) {
        cal_chat_config *chat = &o->chat;
        if (*ds && !o->user_tokens_given)
            chat->user_tokens.kind = CAL_LEN_DATASET;   /* --dataset gives the messages */
        chat->answer_tokens = p->output_len.kind != CAL_LEN_FIXED
                                  ? p->output_len : (cal_lendist){.kind = CAL_LEN_FIXED, .n = p->max_tokens};
        chat->dataset = *ds;
        p->chat = chat;
        /* plan.dataset stays: the protocol names the messages' dataset; the
         * answers' lengths are the chat config's */
        p->output_len.kind = CAL_LEN_FIXED;
    }
    if (o->replay) {
        FILE *rf = fopen(o->replay, "rb");
        int rerr = rf ? 0 : errno;
        size_t cap = 1 << 16, n = 0;
        char *buf = rf ? malloc(cap) : NULL;
        while (buf) {
            if (n == cap) {
                char *x = cap < (256u << 20) ? realloc(buf, cap * 2) : NULL;
                if (!x) { free(buf); buf = NULL; break; }
                buf = x;
                cap *= 2;
            }
            size_t k = fread(buf + n, 1, cap - n, rf);
            if (!k) break;
            n += k;
        }
        if (rf) fclose(rf);
        if (!buf)
            return cli_usage_error(CMD, "--replay: cannot read \"%s\": %s", o->replay,
                                   rf ? "over 256 MiB or out of memory" : strerror(rerr));
        *replay = buf;
        p->replay_log = buf;
        p->replay_len = n;
        const char *base = strrchr(o->replay, '/');
        p->replay_name = base ? base + 1 : o->replay;
    }
    return 0;
}

int cmd_run(int argc, char **argv)
{
    opts o;
    int prc = parse_opts(argc, argv, &o);
    if (prc == -1) return CLI_OK;
    if (prc) return prc;
    if (o.dist.mpi && !cli_mpi) return dist_exec_mpi(argc, argv);
    cal_run_plan *plan = &o.plan;
    if (!o.seed_given) plan->seed = (uint64_t)(cal_wall_ns() & 0x7fffffff);

    /* traffic: a dataset, length distributions, the chat scenario, a replay */
    cal_dataset *ds = NULL;
    char *replay = NULL, *extra = NULL;
    cal_store *st = NULL;
    cal_run_args args;
    memset(&args, 0, sizeof args);
    dist dd;
    memset(&dd, 0, sizeof dd);
    int exit_code = load_traffic(&o, &ds, &replay), rc;
    if (!exit_code) exit_code = check_plan(plan);
    if (exit_code) {
        cal_dataset_free(&ds);
        free(replay);
        return exit_code;
    }
    cal_run_plan_fill(plan);   /* what the run follows: the shards split it */
    for (size_t i = 0; i < plan->n_conc && plan->requests && plan->rate == 0; i++)
        if (plan->requests < plan->concurrency[i])
            fprintf(stderr, "caliper run: warning: --requests %ld is below --concurrency %d: that "
                            "cell never has %d requests in flight\n", plan->requests,
                    plan->concurrency[i], plan->concurrency[i]);
    const char *warn = cli_build_warning();
    if (warn) fprintf(stderr, "caliper run: warning: %s\n", warn);
    plan->telemetry_off_why = "off (--no-telemetry): clock and power not sampled";
    plan->build = cli_build_string();
    extra = protocol_extra(&o);
    plan->protocol_extra_json = extra;

    /* --shard / --mpi: this client's share, its store, the common start */
    const char *db = o.db;
    exit_code = dist_begin(&o.dist, plan, &dd, &db);
    if (exit_code) goto cleanup;
    const char *api_key = o.api_key_env ? getenv(o.api_key_env) : NULL;
    for (int i = 0; i < (o.ab ? 2 : 1); i++)
        if ((rc = make_target(&o, i, api_key, &args.targets[i]))) {
            exit_code = rc == CAL_ENOTFOUND ? CLI_FAIL : cli_fail(CMD, "target: out of memory");
            goto cleanup;
        }
    rc = cal_store_open(db, &st);
    if (rc) {
        exit_code = cli_fail(CMD, "--db: cannot open \"%s\": %s", db, cal_strerror(rc));
        goto cleanup;
    }
    /* one shot series: its key and the shot noise of its earlier runs go
     * with the protocol (include/caliper/noise.h) */
    if (plan->n_prompt == 1 && plan->n_conc == 1 && !o.ab && !plan->cold && !plan->chat &&
        !plan->replay_log && !plan->dataset && plan->prompt_len.kind == CAL_LEN_FIXED &&
        plan->output_len.kind == CAL_LEN_FIXED) {
        char key[CAL_NOISE_SERIES_MAX];
        series_key(&o, key, sizeof key);
        if (cal_noise_protocol_add(st, key, o.pool_noise, &extra) == CAL_OK)
            plan->protocol_extra_json = extra;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    view v = {.tty = cli_stderr_is_tty(), .db = o.db};
    args.plan = plan;
    args.store = st;
    args.observer.fn = on_event;
    args.observer.ud = &v;
    args.stop = &g_stop;
    cal_run_outcome out;
    rc = cal_run_series(&args, &out);
    if (rc != CAL_OK) {
        if (rc == CAL_ECANCEL || g_stop) exit_code = 130;
        else if (rc == CAL_ESTORE)
            exit_code = cli_fail(CMD, "%s in %s", out.message, o.db);
        else exit_code = cli_fail(CMD, "%s", out.message[0] ? out.message : cal_strerror(rc));
        cal_run_outcome_clear(&out);
        goto cleanup;
    }
    if (out.data) {
        /* this run's shot series as noise evidence for the next ones */
        int nrc = cal_noise_record(st, out.data);
        if (nrc != CAL_OK && nrc != CAL_ENOTFOUND)
            fprintf(stderr, "caliper run: warning: noise estimate not stored: %s\n",
                    cal_store_errmsg(st));
        fputc('\n', stderr);
        if (!dd.mpi) run_view_show(stdout, out.data, o.db);   /* --mpi: rank 0 shows the merged run */
        fflush(stdout);
        if (o.json && !dd.active) {
            FILE *jf = fopen(o.json, "w");
            if (!jf || run_view_json(jf, out.data) != 0) {
                fprintf(stderr, "caliper run: --json: cannot write \"%s\"\n", o.json);
                exit_code = CLI_FAIL;
            }
            if (jf) fclose(jf);
        }
        if (out.failed_requests && exit_code == CLI_OK) exit_code = CLI_FAIL;
    } else {
        exit_code = CLI_FAIL;
    }
    if (out.status == CAL_RUN_INTERRUPTED) {
        fprintf(stderr, "caliper run: interrupted: run %lld is stored and marked interrupted\n",
                (long long)out.run_id);
        exit_code = 130;
    } else if (out.status == CAL_RUN_FAILED) {
        fprintf(stderr, "caliper run: %s\n", out.message[0] ? out.message : "the run failed");
        exit_code = CLI_FAIL;
    }
    exit_code = dist_end(&dd, st, out.run_id, o.db, o.json, plan->label, exit_code);
    cal_run_outcome_clear(&out);

cleanup:
    for (int i = 0; i < 2; i++) cal_run_target_free(&args.targets[i]);
    cal_store_close(&st);
    dist_cleanup(&dd);
    free(extra);
    cal_dataset_free(&ds);
    free(replay);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    return exit_code;
}
