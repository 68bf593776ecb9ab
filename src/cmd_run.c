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
    int rate_given;
    cal_arrivals pattern;            /* --rate: Poisson, ramp or bursts */
    cal_slo slo;                     /* --slo; zeroed: none */
    int sweep;                       /* --sweep saturation */
    double sweep_max;
    long sweep_steps;
    long shots, warmup;
    int shots_given, warmup_given;   /* --shots, --warmup: else the default protocol's */
    int pool_noise;           /* --pool-noise: judge with earlier runs' shot spread */
    double rest_s, noise_floor, equivalence;
    int cold, ab, no_tel;
    const char *db, *json;
    double connect_s, idle_s, interval_s;
    double request_s;                /* 0: derived, cal_probe_request_timeout_ns */
    long seed;
    int seed_given;
    long long keep_chunks;           /* plan.keep_chunks */
    dist_opts dist;                  /* --shard, --start-at, --mpi */
    long loops;                      /* 0: CAL_PROBE_LOOPS_AUTO */
    int no_connect_ahead;            /* --no-connect-ahead */
    /* traffic (docs/workload.md) */
    cal_lendist prompt_len, output_len;
    const char *dataset, *dataset_format, *scenario, *replay;
    long users, turns, system_tokens;
    cal_lendist user_tokens, think_ms;
    double stagger_s, replay_speed;
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

/* A --prompt-tokens / --max-tokens value that is one distribution rather
 * than a list: has a ':' or is "dataset". */
static int is_dist(const char *s) { return strchr(s, ':') || !strcmp(s, "dataset"); }

static int parse_dist(const char *flag, const char *arg, int max, cal_lendist *d)
{
    char why[200];
    if (cal_lendist_parse(arg, max, d, why, sizeof why)) return cli_usage_error(CMD, "%s: %s", flag, why);
    return 0;
}

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
    o->users = 4;
    o->turns = 6;
    o->system_tokens = CAL_CHAT_SYSTEM_TOKENS;
    o->user_tokens = (cal_lendist){.kind = CAL_LEN_FIXED, .n = 64};
    o->think_ms = (cal_lendist){.kind = CAL_LEN_UNIFORM, .lo = 200, .hi = 800};
    o->stagger_s = 0.25;
    o->replay_speed = 1;
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
            if (cli_parse_time_in(CMD, "--launch-timeout", optarg, "s", 0, 0, &o->launch_timeout_s)) return CLI_USAGE;
            break;
        case O_PRESET: o->preset = optarg; break;
        case O_SERVEARGS: o->serve_args = optarg; break;
        case O_API:
            if (!strcmp(optarg, "completions")) o->api = CAL_API_COMPLETIONS;
            else if (!strcmp(optarg, "chat")) o->api = CAL_API_CHAT;
            else return cli_usage_error(CMD, "--api: \"%s\" is not completions or chat", optarg);
            o->api_name = optarg;
            break;
        case O_MODEL:
            /* it goes out in every request's JSON body, which holds UTF-8 only */
            if (cal_utf8_check(optarg, strlen(optarg)) < strlen(optarg))
                return cli_usage_error(CMD, "--model: byte %zu is not valid UTF-8 (the name goes "
                                       "out in each request's JSON body)",
                                       cal_utf8_check(optarg, strlen(optarg)) + 1);
            o->model = optarg;
            break;
        case O_KEYENV:
            if (!getenv(optarg)) return cli_usage_error(CMD, "--api-key-env: \"%s\" is not set in the environment", optarg);
            if (strlen(getenv(optarg)) > CAL_API_KEY_MAX)
                return cli_usage_error(CMD, "--api-key-env: \"%s\" holds a %zu-byte key; at most %d bytes are sent",
                                       optarg, strlen(getenv(optarg)), CAL_API_KEY_MAX);
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
            if (is_dist(optarg)) {
                if (parse_dist("--prompt-tokens", optarg, 1 << 20, &o->prompt_len)) return CLI_USAGE;
                break;
            }
            if (cli_parse_long_list(CMD, "--prompt-tokens", optarg, 1, 1 << 20, o->prompt, MAX_LIST, &o->n_prompt)) return CLI_USAGE;
            break;
        case O_MAXTOK:
            if (is_dist(optarg)) {
                if (parse_dist("--max-tokens", optarg, 1 << 20, &o->output_len)) return CLI_USAGE;
                break;
            }
            o->output_len = (cal_lendist){.kind = CAL_LEN_FIXED};
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
            if (cli_parse_time_in(CMD, "--duration", optarg, "s", 0, 0, &o->duration_s)) return CLI_USAGE;
            break;
        case O_RATE: {
            char why[200];
            if (cal_arrivals_parse(optarg, &o->pattern, why, sizeof why))
                return cli_usage_error(CMD, "--%s", why);
            o->rate = cal_arrivals_mean_rate(&o->pattern);
            if (o->rate > MAX_RATE) return cli_usage_error(CMD, "--rate: \"%s\" is over %g requests/s", optarg, MAX_RATE);
            o->rate_given = 1;
            break;
        }
        case O_SLO: {
            char why[200];
            if (cal_slo_parse(optarg, &o->slo, why, sizeof why)) return cli_usage_error(CMD, "--%s", why);
            break;
        }
        case O_SWEEP:
            if (strcmp(optarg, "saturation"))
                return cli_usage_error(CMD, "--sweep: \"%s\" is not a sweep (saturation)", optarg);
            o->sweep = 1;
            break;
        case O_SWEEPMAX:
            if (cli_parse_unit(CMD, "--sweep-max-rate", optarg, CAL_U_COUNT, NULL, &o->sweep_max)) return CLI_USAGE;
            if (!(o->sweep_max > 0) || o->sweep_max > MAX_RATE)
                return cli_usage_error(CMD, "--sweep-max-rate: \"%s\" is not a request rate from 0 to %g/s", optarg, MAX_RATE);
            break;
        case O_SWEEPSTEPS:
            if (cli_parse_long(CMD, "--sweep-steps", optarg, 2, CAL_SAT_MAX_STEPS, &o->sweep_steps)) return CLI_USAGE;
            break;
        case O_SHOTS:
            if (cli_parse_long(CMD, "--shots", optarg, 1, 1000, &o->shots)) return CLI_USAGE;
            o->shots_given = 1;
            break;
        case O_REST:
            if (cli_parse_unit_in(CMD, "--rest", optarg, CAL_U_TIME, "s", 0, CLI_TIME_MAX_S, 0, &o->rest_s)) return CLI_USAGE;
            break;
        case O_WARMUP:
            if (cli_parse_long(CMD, "--warmup", optarg, 0, 1000, &o->warmup)) return CLI_USAGE;
            o->warmup_given = 1;
            break;
        case O_COLD: o->cold = 1; break;
        case O_POOL: o->pool_noise = 1; break;
        case O_DB:
            if (!*optarg) return cli_usage_error(CMD, "--db: \"\" is empty: give the store's file");
            o->db = optarg;
            break;
        case O_JSON: o->json = optarg; break;
        case O_CTIMEOUT:
            if (cli_parse_time_in(CMD, "--connect-timeout", optarg, "s", 0, 0, &d)) return CLI_USAGE;
            o->connect_s = d;
            break;
        case O_ITIMEOUT:
            if (cli_parse_time_in(CMD, "--idle-timeout", optarg, "s", 0, 0, &d)) return CLI_USAGE;
            o->idle_s = d;
            break;
        case O_RTIMEOUT:
            if (cli_parse_time_in(CMD, "--request-timeout", optarg, "s", 0, 0, &d)) return CLI_USAGE;
            o->request_s = d;
            break;
        case O_NOTEL: o->no_tel = 1; break;
        case O_AHEAD: o->no_connect_ahead = 0; break;
        case O_NOAHEAD: o->no_connect_ahead = 1; break;
        case O_LOOPS:
            if (cli_parse_long(CMD, "--loops", optarg, 1, CAL_PROBE_MAX_LOOPS, &o->loops)) return CLI_USAGE;
            break;
        case O_INTERVAL:
            if (cli_parse_time_in(CMD, "--interval", optarg, "ms", 0.01, 3600, &o->interval_s)) return CLI_USAGE;
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
        case O_EQUIV:
            if (cli_parse_unit(CMD, "--equivalence", optarg, CAL_U_RATIO, NULL, &o->equivalence)) return CLI_USAGE;
            if (!(o->equivalence > 0 && o->equivalence < 1))
                return cli_usage_error(CMD, "--equivalence: \"%s\" is not between 0 and 100 %%", optarg);
            break;
        case O_KEEP: {
            long long k;
            char why[160];
            if (cal_keep_parse(optarg, &k, why, sizeof why)) return cli_usage_error(CMD, "%s", why);
            o->keep_chunks = k < 0 ? CAL_KEEP_ALL : k == 0 ? CAL_RUN_KEEP_NONE : k;
            break;
        }
        case O_SHARD:
            if (dist_parse_shard(optarg, &o->dist)) return CLI_USAGE;
            break;
        case O_STARTAT:
            if (dist_parse_start(optarg, &o->dist)) return CLI_USAGE;
            break;
        case O_MPI: o->dist.mpi = 1; break;
        case O_DATASET:
            if (!*optarg) return cli_usage_error(CMD, "--dataset: \"\" is empty: give a file");
            o->dataset = optarg;
            break;
        case O_DSFMT: {
            cal_ds_format f;
            if (cal_ds_format_parse(optarg, &f))
                return cli_usage_error(CMD, "--dataset-format: \"%s\" is not text, jsonl, sharegpt, "
                                            "openai-chat or proxy-log", optarg);
            o->dataset_format = optarg;
            break;
        }
        case O_SCENARIO:
            if (strcmp(optarg, "chat")) return cli_usage_error(CMD, "--scenario: \"%s\" is not chat", optarg);
            o->scenario = optarg;
            break;
        case O_USERS:
            if (cli_parse_long(CMD, "--users", optarg, 1, 4096, &o->users)) return CLI_USAGE;
            break;
        case O_TURNS:
            if (cli_parse_long(CMD, "--turns", optarg, 1, 1024, &o->turns)) return CLI_USAGE;
            break;
        case O_SYSTOK:
            if (cli_parse_long(CMD, "--system-tokens", optarg, 0, 1 << 20, &o->system_tokens)) return CLI_USAGE;
            break;
        case O_USERTOK:
            if (parse_dist("--user-tokens", optarg, 1 << 20, &o->user_tokens)) return CLI_USAGE;
            break;
        case O_THINK:
            if (!strcmp(optarg, "0")) o->think_ms = (cal_lendist){.kind = CAL_LEN_FIXED, .n = 0};
            else if (parse_dist("--think-time", optarg, 3600000, &o->think_ms)) return CLI_USAGE;
            if (o->think_ms.kind == CAL_LEN_DATASET)
                return cli_usage_error(CMD, "--think-time: \"dataset\" has no think times; give ms");
            break;
        case O_STAGGER:
            if (cli_parse_time_in(CMD, "--stagger", optarg, "s", 0, 3600, &o->stagger_s)) return CLI_USAGE;
            break;
        case O_REPLAY:
            if (!*optarg) return cli_usage_error(CMD, "--replay: \"\" is empty: give a proxy log");
            o->replay = optarg;
            break;
        case O_RSPEED:
            if (cli_parse_unit(CMD, "--replay-speed", optarg, CAL_U_RATIO, NULL, &o->replay_speed)) return CLI_USAGE;
            if (!(o->replay_speed >= 1e-6) || o->replay_speed > 1e6)
                return cli_usage_error(CMD, "--replay-speed: \"%s\" is not a factor from 1e-6 to 1e6", optarg);
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
    if (o->dist.shard_n && o->dist.mpi)
        return cli_usage_error(CMD, "--shard and --mpi: under MPI every rank takes its share itself");
    if (o->dist.shard_n && !o->json)
        return cli_usage_error(CMD, "--shard: needs --json FILE (the shard document `caliper merge` reads)");
    if ((o->dist.shard_n || o->dist.mpi) && o->ab)
        return cli_usage_error(CMD, "--ab: not with --shard or --mpi (one target per fleet)");
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
    if (o->scenario && o->replay)
        return cli_usage_error(CMD, "--scenario chat and --replay together: choose one");
    if ((o->scenario || o->replay) && (o->rate > 0 || o->duration_s > 0 || o->conc_given ||
                                       o->requests || o->n_prompt > 1 || o->prompt_len.kind != CAL_LEN_FIXED))
        return cli_usage_error(CMD, "--%s: the turns set the load and the prompts: --rate, "
                                    "--duration, --concurrency, --requests and --prompt-tokens do not apply",
                               o->replay ? "replay" : "scenario");
    if (o->replay && o->output_len.kind != CAL_LEN_FIXED)
        return cli_usage_error(CMD, "--replay: the recorded output lengths are sent; --max-tokens does not apply");
    int wants_ds = o->prompt_len.kind == CAL_LEN_DATASET || o->output_len.kind == CAL_LEN_DATASET ||
                   o->user_tokens.kind == CAL_LEN_DATASET;
    if (wants_ds && !o->dataset)
        return cli_usage_error(CMD, "\"dataset\" lengths need --dataset FILE");
    if (o->dataset_format && !o->dataset)
        return cli_usage_error(CMD, "--dataset-format: give --dataset FILE too");
    if (o->dataset && o->replay)
        return cli_usage_error(CMD, "--dataset and --replay together: the replay has its own turns");
    if ((o->sweep_max > 0 || o->sweep_steps) && !o->sweep)
        return cli_usage_error(CMD, "--sweep-max-rate and --sweep-steps belong to --sweep saturation");
    if (o->sweep) {
        if (o->scenario || o->replay)
            return cli_usage_error(CMD, "--sweep saturation: a sweep of rate cells, not of --%s turns",
                                   o->replay ? "replay" : "scenario");
        if (!cal_slo_given(&o->slo))
            return cli_usage_error(CMD, "--sweep saturation: give --slo (the sweep follows goodput, "
                                        "the requests/s that meet it)");
        if (o->pattern.kind != CAL_ARR_POISSON)
            return cli_usage_error(CMD, "--sweep saturation: --rate is the start rate, a number, not a "
                                        "ramp or bursts");
        if (!o->rate_given) {
            o->rate = 1;
            o->pattern.rate = 1;
        }
        if (!o->sweep_steps) o->sweep_steps = 8;
        if (!(o->sweep_max > 0)) o->sweep_max = fmin(16 * o->rate, MAX_RATE);
        char why[300];
        cal_sat sat;
        if (cal_sat_init(&sat, o->rate, o->sweep_max, (int)o->sweep_steps, why, sizeof why)) {
            /* name the flags, not the plan's fields */
            const char *flag = !strncmp(why, "sweep_steps", 11) ? "--sweep-steps"
                               : !strncmp(why, "sweep_max_rate", 14) ? "--sweep-max-rate" : "--rate";
            const char *rest = strchr(why, ':');
            return cli_usage_error(CMD, "%s%s", flag, rest ? rest : why);
        }
    }
    /* the default protocol gives a calibrated verdict (docs/run.md): a
     * warm-up shot, then 5 measured shots; a --duration or --ab run keeps
     * the one shot of its stated length, and a --scenario or --replay run
     * the one pass of its turns, a --sweep its one pass of rates, and a
     * --shard or --mpi run the one pass its shards merge into */
    /* flags change only what they name: --rest, --warmup or --cold alone
     * keep the default shot count (a rest between shots needs shots), and
     * --shots alone means no warm-up unless --warmup says; a cold shot is
     * its own fresh process, never preceded by a warm-up */
    int one_pass = o->duration_s > 0 || o->ab || o->scenario || o->replay || o->sweep ||
                   o->dist.shard_n || o->dist.mpi;
    if (!o->shots_given) o->shots = one_pass ? 1 : DEFAULT_SHOTS;
    if (!o->warmup_given) o->warmup = o->shots_given || one_pass || o->cold ? 0 : DEFAULT_WARMUP;
    return 0;
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
        static const char *const FLAG[][2] = {{"prompt_tokens", "--prompt-tokens"}};
        const char *flag = NULL;
        for (size_t i = 0; ev->field && i < sizeof FLAG / sizeof FLAG[0]; i++)
            if (!strcmp(ev->field, FLAG[i][0])) flag = FLAG[i][1];
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
                        json_real((double)cal_probe_request_timeout_ns(&rt, (int)o->max_tokens) / 1e9));
    char *s = json_dumps(p, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(p);
    return s;
}

/* The series key: the target as given and every protocol field that changes
 * what a shot measures (the shot flags aside), numbers as main's C locale. */
static void series_key(const opts *o, char *key, size_t n)
{
    /* a URL's credentials are never stored: the key holds it redacted */
    char url[CAL_NOISE_SERIES_MAX / 2] = "";
    if (o->n_url && cal_url_redact(o->url[0], url, sizeof url) != CAL_OK) url[0] = 0;
    const char *tgt = o->n_launch ? o->launch[0] : o->n_url ? url : "built-in";
    snprintf(key, n, "%s|%s|%s|%s|%s|%s|c%ld|rate %g|p%ld|m%ld|%s|n%ld|d%g|free %d|prefix %d|rest %g",
             tgt, o->n_url && o->n_launch ? url : "", o->n_launch || o->n_url ? "" : o->preset,
             o->serve_args ? o->serve_args : "", o->model ? o->model : "", o->api_name,
             o->conc[0], o->rate, o->prompt[0], o->max_tokens, cal_content_name(o->content),
             o->requests, o->duration_s, o->free_output, o->allow_prefix, o->rest_s);
}

/* Goodput against offered load, the knee marked (the report's Markdown). */
static void print_goodput(const cal_run_data *d)
{
    cal_result *r = NULL;
    char err[300];
    cal_buf b = {0};
    b.max = 1 << 20;
    if (cal_result_from_run_data(d, &r, err, sizeof err) == CAL_OK && cal_report_goodput_md(r, &b) == CAL_OK &&
        b.len)
        printf("\n%s", b.data);
    cal_buf_free(&b);
    cal_result_free(&r);
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
    sc.probe.ignore_eos = !o->free_output;
    sc.probe.connect_timeout_ns = (int64_t)(o->connect_s * 1e9);
    sc.probe.idle_timeout_ns = (int64_t)(o->idle_s * 1e9);
    sc.probe.request_timeout_ns = (int64_t)(o->request_s * 1e9);
    sc.probe.keep_chunks = 1;
    sc.probe.loops = o->loops ? (int)o->loops : CAL_PROBE_LOOPS_AUTO;
    sc.probe.no_connect_ahead = o->no_connect_ahead;
    sc.probe.model = o->model;
    sc.version = o->label;
    /* bounded like a request: the model lookup by 5 s at most, each
     * tokenizer call by the connect timeout plus one idle period */
    sc.models_timeout_ns = (int64_t)(fmin(5.0, o->connect_s + o->idle_s) * 1e9);
    sc.tokenize_timeout_ns = (int64_t)((o->connect_s + o->idle_s) * 1e9);
    return cal_run_target_served(&sc, out);
}

int cmd_run(int argc, char **argv)
{
    opts o;
    int prc = parse_opts(argc, argv, &o);
    if (prc == -1) return CLI_OK;
    if (prc) return prc;
    if (o.dist.mpi && !cli_mpi) return dist_exec_mpi(argc, argv);
    if (!o.seed_given) o.seed = (long)(cal_wall_ns() & 0x7fffffff);
    for (size_t i = 0; i < o.n_conc && o.requests && o.rate == 0; i++)
        if (o.requests < o.conc[i])
            fprintf(stderr, "caliper run: warning: --requests %ld is below --concurrency %ld: that "
                            "cell never has %ld requests in flight\n", o.requests, o.conc[i], o.conc[i]);
    const char *warn = cli_build_warning();
    if (warn) fprintf(stderr, "caliper run: warning: %s\n", warn);

    cal_run_plan plan;
    cal_run_plan_default(&plan);
    plan.n_prompt = o.n_prompt;
    for (size_t i = 0; i < o.n_prompt; i++) plan.prompt_tokens[i] = (int)o.prompt[i];
    plan.n_conc = o.n_conc;
    for (size_t i = 0; i < o.n_conc; i++) plan.concurrency[i] = (int)o.conc[i];
    plan.rate = o.rate;
    plan.pattern = o.pattern;
    plan.slo = o.slo;
    plan.sweep = o.sweep;
    plan.sweep_max_rate = o.sweep_max;
    plan.sweep_steps = (int)o.sweep_steps;
    plan.cap_given = o.conc_given;
    plan.requests = o.requests;
    plan.duration_s = o.duration_s;
    plan.shots = (int)o.shots;
    plan.warmup = (int)o.warmup;
    plan.rest_s = o.rest_s;
    plan.cold = o.cold;
    plan.noise_floor = o.noise_floor;
    plan.equivalence = o.equivalence;
    plan.content = o.content;
    plan.max_tokens = (int)o.max_tokens;
    plan.free_output = o.free_output;
    plan.allow_prefix = o.allow_prefix;
    plan.seed = (uint64_t)o.seed;
    plan.telemetry = !o.no_tel;
    plan.interval_s = o.interval_s;
    plan.telemetry_off_why = "off (--no-telemetry): clock and power not sampled";
    plan.label = o.label;
    plan.build = cli_build_string();
    char *extra = protocol_extra(&o);
    plan.protocol_extra_json = extra;
    plan.keep_chunks = o.keep_chunks;

    /* traffic: a dataset, length distributions, the chat scenario, a replay */
    cal_dataset *ds = NULL;
    char *replay = NULL;
    cal_chat_config chat;
    memset(&chat, 0, sizeof chat);
    plan.prompt_len = o.prompt_len;
    plan.output_len = o.output_len;
    if (o.dataset) {
        cal_ds_format f = CAL_DS_TEXT;
        size_t dl = strlen(o.dataset);
        if (o.dataset_format) cal_ds_format_parse(o.dataset_format, &f);
        else if (dl > 6 && !strcmp(o.dataset + dl - 6, ".jsonl")) f = CAL_DS_JSONL;
        else if (dl > 5 && !strcmp(o.dataset + dl - 5, ".json")) f = CAL_DS_SHAREGPT;
        char why[400];
        int drc = cal_dataset_load(o.dataset, f, &ds, why, sizeof why);
        if (drc) {
            free(extra);
            return cli_usage_error(CMD, "--dataset: %s (as %s)", why, cal_ds_format_name(f));
        }
        plan.dataset = ds;
        if (!o.scenario && o.prompt_len.kind == CAL_LEN_FIXED && o.n_prompt == 1 && o.prompt[0] == 256)
            plan.prompt_len.kind = CAL_LEN_DATASET;   /* the entries' own prompts */
        fprintf(stderr, "caliper run: dataset %s (%s): %zu prompts%s, sha256 %.12s…\n", ds->name,
                cal_ds_format_name(f), ds->n, ds->skipped ? " (some skipped: empty or failed)" : "",
                ds->sha256);
    }
    if (o.scenario) {
        chat.users = (int)o.users;
        chat.turns = (int)o.turns;
        chat.system_tokens = (int)o.system_tokens;
        chat.user_tokens = o.user_tokens;
        if (ds && o.user_tokens.kind == CAL_LEN_FIXED && o.user_tokens.n == 64)
            chat.user_tokens.kind = CAL_LEN_DATASET;   /* --dataset gives the messages */
        chat.answer_tokens = o.output_len.kind != CAL_LEN_FIXED
                                 ? o.output_len : (cal_lendist){.kind = CAL_LEN_FIXED, .n = (int)o.max_tokens};
        chat.think_ms = o.think_ms;
        chat.stagger_s = o.stagger_s;
        chat.dataset = ds;
        plan.chat = &chat;
        /* plan.dataset stays: the protocol names the messages' dataset */
        plan.prompt_len.kind = plan.output_len.kind = CAL_LEN_FIXED;
        plan.n_conc = 1;
    }
    if (o.replay) {
        FILE *rf = fopen(o.replay, "rb");
        int rerr = rf ? 0 : errno;
        size_t cap = 1 << 16, n = 0;
        replay = rf ? malloc(cap) : NULL;
        while (replay) {
            if (n == cap) {
                char *x = cap < (256u << 20) ? realloc(replay, cap * 2) : NULL;
                if (!x) { free(replay); replay = NULL; break; }
                replay = x;
                cap *= 2;
            }
            size_t k = fread(replay + n, 1, cap - n, rf);
            if (!k) break;
            n += k;
        }
        if (rf) fclose(rf);
        if (!replay) {
            cal_dataset_free(&ds);
            free(extra);
            return cli_usage_error(CMD, "--replay: cannot read \"%s\": %s", o.replay,
                                   rf ? "over 256 MiB or out of memory" : strerror(rerr));
        }
        plan.replay_log = replay;
        plan.replay_len = n;
        const char *base = strrchr(o.replay, '/');
        plan.replay_name = base ? base + 1 : o.replay;
        plan.replay_speed = o.replay_speed;
        plan.n_conc = 1;
    }

    /* --shard / --mpi: this client's share, its store, the common start */
    dist dd;
    const char *db = o.db;
    int exit_code = dist_begin(&o.dist, &plan, &dd, &db), rc;
    cal_run_args args;
    memset(&args, 0, sizeof args);
    cal_store *st = NULL;
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
    if (o.n_prompt == 1 && o.n_conc == 1 && !o.ab && !o.cold && !o.scenario && !o.replay &&
        !o.dataset && o.prompt_len.kind == CAL_LEN_FIXED && o.output_len.kind == CAL_LEN_FIXED) {
        char key[CAL_NOISE_SERIES_MAX];
        series_key(&o, key, sizeof key);
        if (cal_noise_protocol_add(st, key, o.pool_noise, &extra) == CAL_OK)
            plan.protocol_extra_json = extra;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    view v = {.tty = cli_stderr_is_tty(), .db = o.db};
    args.plan = &plan;
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
        if (!dd.mpi) {   /* --mpi: rank 0 shows the merged run */
            run_view_print(stdout, out.data, o.db);
            if (o.shots == 1 && !o.cold)   /* asked for explicitly, or a --duration run */
                printf("verdict: cannot judge: 1 shot; run --shots 5 (no shot flag: the default "
                       "protocol, --warmup 1 --shots 5)\n");
            cal_report_lengths_text(stdout, out.data);
            cal_report_turns_text(stdout, out.data);
            if (cal_slo_given(&o.slo)) print_goodput(out.data);
        }
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
    exit_code = dist_end(&dd, st, out.run_id, o.db, o.json, o.label, exit_code);
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
