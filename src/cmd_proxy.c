/* caliper proxy — sits between a chat client and an engine and records, per
 * turn, what the client put in front of the new message (system prompt,
 * tool definitions, history) and what the turn cost: TTFT, decode time, the
 * client-visible decode speed (SPEC 1.3, checklist item 7). */
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <jansson.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/proxy.h"
#include "caliper/stats.h"
#include "cli.h"

#define CMD "proxy"
#define MAX_TURNS_KEPT 100000   /* rows of the closing table */

static volatile int g_stop;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper proxy --upstream URL [--listen 127.0.0.1:PORT] [--log FILE.jsonl]\n"
        "                     [--tokenize] [--max-body BYTES] [--max-connections N]\n"
        "                     [--idle-timeout T] [--header-timeout T] [--body-timeout T]\n"
        "                     [--send-timeout T]\n"
        "\n"
        "Point the chat client at http://LISTEN/v1 instead of the engine. Every request\n"
        "goes to URL unchanged and the reply comes back chunk by chunk. For each\n"
        "/v1/chat/completions and /v1/completions turn, one JSON line (--log) and one\n"
        "line on stderr: the prefix the client sent (system prompt, tool definitions,\n"
        "history, the new message: characters and tokens), TTFT, decode time, output\n"
        "tokens, the decode speed the client shows (output tokens / decode seconds) and\n"
        "the share of the turn spent waiting for the first token. Ctrl-C prints a table.\n"
        "\n"
        "  --upstream URL    the engine, e.g. http://127.0.0.1:8000 (required)\n"
        "  --listen A        IPv4:PORT to listen on (default 127.0.0.1:8001; port 0 picks one)\n"
        "  --log FILE        append one JSON line per turn (\"-\" = stdout)\n"
        "  --tokenize        count tokens with the upstream's POST /tokenize (after the\n"
        "                    turn ends); without it, or when absent: chars/4, marked \"?\"\n"
        "  --max-body B      request body cap (default 32MiB)\n"
        "  --max-connections N\n"
        "                    client connections at once (default %d); more are closed\n"
        "                    as they arrive\n"
        "  --idle-timeout T  close a client connection silent for T (default %ds; whole\n"
        "                    seconds, at least 1s); waiting for the upstream is not idle\n"
        "  --header-timeout T  the request line and headers must arrive within T of\n"
        "                    connecting, however slowly they trickle (default 10s);\n"
        "                    when fewer than 1/64 of the connections (1 to 64) are free,\n"
        "                    the one that has gone longest without progress is closed:\n"
        "                    the longest wait for a request, or for a client to read\n"
        "  --body-timeout T  the request body within T of the headers (default 60s)\n"
        "  --send-timeout T  a reply whose client takes none of its bytes for T is reset\n"
        "                    (default 30s); waiting for the upstream never counts\n"
        "  -h, --help        this text\n"
        "\n"
        "Prints \"caliper proxy: listening on http://HOST:PORT -> URL\" on stderr when ready.\n"
        "Only paths reach the upstream: a request target that is not one (\"@host/...\",\n"
        "\"//host/...\", \"http://host/...\") is answered 400.\n"
        "Exit: 0 after Ctrl-C, 1 when it cannot listen, 2 on a usage error.\n",
        CAL_PROXY_MAX_CONN, CAL_PROXY_IDLE_S);
}

typedef struct rec {
    pthread_mutex_t mu;
    FILE           *log;
    int             log_failed;
    cal_proxy_turn *turns;    /* [n], kept for the closing table */
    size_t          n, cap;
} rec;

static void fmt_tok(char *b, size_t n, const cal_prefix_part *p)
{
    snprintf(b, n, "%ld%s", p->tokens, p->estimated ? "?" : "");
}

static void on_turn(void *ud, const cal_proxy_turn *t)
{
    rec *r = ud;
    char s[4][32];
    for (int k = 0; k < CAL_PART_N; k++) fmt_tok(s[k], sizeof s[k], &t->prefix.part[k]);
    char line[768];
    int o = snprintf(line, sizeof line, "turn %ld: prefix %ld%s tok (system %s, tools %s, history %s, new %s)",
                     t->index, t->prefix_tokens, t->prefix_estimated ? "?" : "", s[0], s[1], s[2], s[3]);
    if (isfinite(t->ttft_s))
        o += snprintf(line + o, sizeof line - (size_t)o, ", TTFT %.2f s = %.0f %% of the turn",
                      t->ttft_s, 100 * t->ttft_share);
    if (isfinite(t->decode_tok_s))
        o += snprintf(line + o, sizeof line - (size_t)o, ", decode %.1f tok/s (%ld tok in %.2f s)",
                      t->decode_tok_s, t->output_tokens, t->decode_s);
    else if (t->output_tokens >= 0)
        o += snprintf(line + o, sizeof line - (size_t)o, ", %ld output tok", t->output_tokens);
    o += snprintf(line + o, sizeof line - (size_t)o, ", turn %.2f s", t->turn_s);
    if (t->error[0]) snprintf(line + o, sizeof line - (size_t)o, " [%s]", t->error);
    fprintf(stderr, "%s\n", line);
    pthread_mutex_lock(&r->mu);
    if (r->log) {
        json_t *j = cal_proxy_turn_json(t);
        char *js = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        json_decref(j);
        if (!js || fprintf(r->log, "%s\n", js) < 0 || fflush(r->log) != 0) {
            if (!r->log_failed) fprintf(stderr, "caliper proxy: --log: write failed: %s\n", strerror(errno));
            r->log_failed = 1;
        }
        free(js);
    }
    if (r->n == r->cap && r->cap < MAX_TURNS_KEPT) {
        size_t nc = r->cap ? r->cap * 2 : 64;
        cal_proxy_turn *x = realloc(r->turns, nc * sizeof *x);
        if (x) { r->turns = x; r->cap = nc; }
    }
    if (r->n < r->cap) r->turns[r->n++] = *t;
    pthread_mutex_unlock(&r->mu);
}

static void cell(double v, const char *fmt, char *b, size_t n)
{
    if (isfinite(v)) snprintf(b, n, fmt, v);
    else snprintf(b, n, "-");
}

static void print_table(FILE *f, rec *r)
{
    if (!r->n) { fprintf(f, "caliper proxy: no turns recorded\n"); return; }
    fprintf(f, "%5s  %-22s %8s %8s %8s %8s %8s %8s %6s %9s %8s %8s\n", "turn", "path", "prefix",
            "system", "tools", "history", "new", "TTFT s", "share", "dec tok/s", "out tok", "turn s");
    double *tt = malloc(r->n * sizeof *tt), *ds = malloc(r->n * sizeof *ds), *sh = malloc(r->n * sizeof *sh);
    size_t ntt = 0, nds = 0, nsh = 0;
    for (size_t i = 0; i < r->n; i++) {
        const cal_proxy_turn *t = &r->turns[i];
        char p[5][24], a[24], b[24], c[24], d[24];
        snprintf(p[0], sizeof p[0], "%ld%s", t->prefix_tokens, t->prefix_estimated ? "?" : "");
        for (int k = 0; k < CAL_PART_N; k++) fmt_tok(p[k + 1], sizeof p[k + 1], &t->prefix.part[k]);
        cell(t->ttft_s, "%.3f", a, sizeof a);
        cell(100 * t->ttft_share, "%.0f %%", b, sizeof b);
        cell(t->decode_tok_s, "%.1f", c, sizeof c);
        cell(t->turn_s, "%.3f", d, sizeof d);
        fprintf(f, "%5ld  %-22.22s %8s %8s %8s %8s %8s %8s %6s %9s %8ld %8s\n", t->index, t->path,
                p[0], p[1], p[2], p[3], p[4], a, b, c, t->output_tokens, d);
        if (tt && isfinite(t->ttft_s)) tt[ntt++] = t->ttft_s;
        if (ds && isfinite(t->decode_tok_s)) ds[nds++] = t->decode_tok_s;
        if (sh && isfinite(t->ttft_share)) sh[nsh++] = t->ttft_share;
    }
    if (tt && ds && sh)
        fprintf(f, "median over %zu turns: TTFT %.3f s, %.0f %% of the turn waiting for the first token, "
                "decode %.1f tok/s (tokens marked ? are chars/4 estimates)\n", r->n,
                ntt ? cal_stats_median(tt, ntt) : NAN, nsh ? 100 * cal_stats_median(sh, nsh) : NAN,
                nds ? cal_stats_median(ds, nds) : NAN);
    free(tt);
    free(ds);
    free(sh);
}

int cmd_proxy(int argc, char **argv)
{
    setlocale(LC_NUMERIC, "C");
    static const struct option opts[] = {
        {"listen", required_argument, 0, 'l'}, {"upstream", required_argument, 0, 'u'},
        {"log", required_argument, 0, 'o'},    {"tokenize", no_argument, 0, 't'},
        {"max-body", required_argument, 0, 'b'}, {"help", no_argument, 0, 'h'},
        {"max-connections", required_argument, 0, 'c'}, {"idle-timeout", required_argument, 0, 'i'},
        {"header-timeout", required_argument, 0, 'H'}, {"body-timeout", required_argument, 0, 'B'},
        {"send-timeout", required_argument, 0, 'S'},
        {0, 0, 0, 0}};
    const char *listen = "127.0.0.1:8001", *upstream = NULL, *logf = NULL;
    int tokenize = 0, c, rc;
    double max_body = 32.0 * 1024 * 1024, idle_s = CAL_PROXY_IDLE_S;
    double head_s = CAL_PROXY_HEADER_NS / 1e9, body_s = CAL_PROXY_BODY_NS / 1e9;
    double send_s = CAL_PROXY_SEND_NS / 1e9;
    long max_conn = CAL_PROXY_MAX_CONN;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'l': listen = optarg; break;
        case 'u': upstream = optarg; break;
        case 'o': logf = optarg; break;
        case 't': tokenize = 1; break;
        case 'b':
            if ((rc = cli_parse_unit(CMD, "--max-body", optarg, CAL_U_BYTES, "B", &max_body))) return rc;
            if (max_body < 1024 || max_body > 4.0 * 1024 * 1024 * 1024)
                return cli_usage_error(CMD, "--max-body: \"%s\" is outside 1KiB..4GiB", optarg);
            break;
        case 'c':
            if ((rc = cli_parse_long(CMD, "--max-connections", optarg, 1, 65536, &max_conn))) return rc;
            break;
        case 'i':
            if ((rc = cli_parse_time_in(CMD, "--idle-timeout", optarg, "s", 1, 86400, &idle_s))) return rc;
            if (idle_s != floor(idle_s))
                return cli_usage_error(CMD, "--idle-timeout: \"%s\" is not a whole number of seconds", optarg);
            break;
        case 'H':
            if ((rc = cli_parse_time_in(CMD, "--header-timeout", optarg, "s", 0.001, 3600, &head_s))) return rc;
            break;
        case 'B':
            if ((rc = cli_parse_time_in(CMD, "--body-timeout", optarg, "s", 0.001, 86400, &body_s))) return rc;
            break;
        case 'S':
            if ((rc = cli_parse_time_in(CMD, "--send-timeout", optarg, "s", 0.001, 86400, &send_s))) return rc;
            break;
        case 'h': usage(stdout); return CLI_OK;
        default:
            if (optopt && optopt != '?' && optopt != 'h')
                return cli_usage_error(CMD, "-%c: unknown option or missing value", optopt);
            return cli_usage_error(CMD, "%s: unknown option or missing value", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "\"%s\": unexpected argument", argv[optind]);
    if (!upstream) return cli_usage_error(CMD, "--upstream: missing (e.g. http://127.0.0.1:8000)");
    if (strncmp(upstream, "http://", 7) && strncmp(upstream, "https://", 8))
        return cli_usage_error(CMD, "--upstream: \"%s\" is not an http:// or https:// URL", upstream);
    char host[64];
    const char *colon = strrchr(listen, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof host || !colon[1] || *end ||
        port < 0 || port > 65535)
        return cli_usage_error(CMD, "--listen: \"%s\" is not IPv4:PORT (e.g. 127.0.0.1:8001)", listen);
    snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);

    rec r = {.log = NULL};
    pthread_mutex_init(&r.mu, NULL);
    if (logf) {
        r.log = strcmp(logf, "-") ? fopen(logf, "a") : stdout;
        if (!r.log) return cli_fail(CMD, "--log: \"%s\": %s", logf, strerror(errno));
    }
    signal(SIGPIPE, SIG_IGN);
    cli_catch_stop(&g_stop);
    /* each client connection holds two descriptors (client, upstream) */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    cal_proxy_config cfg = {.host = host, .port = (int)port, .upstream = upstream, .tokenize = tokenize,
                            .max_body = (size_t)max_body, .max_connections = (unsigned)max_conn,
                            .idle_timeout_s = (unsigned)idle_s,
                            .header_timeout_ns = (int64_t)(head_s * 1e9),
                            .body_timeout_ns = (int64_t)(body_s * 1e9),
                            .send_timeout_ns = (int64_t)(send_s * 1e9), .on_turn = on_turn, .ud = &r};
    cal_proxy *px = NULL;
    char why[256];
    if ((rc = cal_proxy_open(&cfg, &px, why, sizeof why)) != CAL_OK) {
        if (r.log && r.log != stdout) fclose(r.log);
        if (rc == CAL_EINVAL)   /* the library's reason, under the flag it came from */
            return cli_usage_error(CMD, "%s: %s", !strncmp(why, "upstream", 8) ? "--upstream" : "--listen", why);
        return cli_fail(CMD, "%s", why);
    }
    fprintf(stderr, "caliper proxy: listening on http://%s:%d -> %s\n", host, cal_proxy_port(px), upstream);
    while (!g_stop) cal_sleep_ns(200000000LL, &g_stop);
    cal_proxy_close(&px);
    print_table(stdout, &r);
    int exit_code = CLI_OK;
    if (r.log && r.log != stdout && fclose(r.log) != 0)
        exit_code = cli_fail(CMD, "--log: \"%s\": %s", logf, strerror(errno));
    free(r.turns);
    pthread_mutex_destroy(&r.mu);
    return exit_code;
}
