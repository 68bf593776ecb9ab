/* caliper sample — hardware telemetry on its own: clock, power, temperature
 * and process memory every interval, as CSV or JSON, around a command (its
 * lifetime, its exit code) or for a duration, optionally served to
 * Prometheus. `--list` says which backends this machine has and why not. */
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <jansson.h>
#include <microhttpd.h>
#include "caliper/buf.h"
#include "caliper/clock.h"
#include "caliper/csv.h"
#include "caliper/error.h"
#include "caliper/platform.h"
#include "caliper/telemetry.h"
#include "cli.h"

#define CMD "sample"

static volatile int g_stop;
static volatile pid_t g_child;

static void on_signal(int sig)
{
    if (g_child > 0) kill(g_child, sig);   /* the command decides how to end */
    else g_stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper sample [--interval 250ms] [--csv FILE | --json FILE] [--pid P]\n"
        "                      [--prometheus 127.0.0.1:PORT] [--duration 10s] [-- CMD ARGS...]\n"
        "       caliper sample --list\n"
        "\n"
        "Samples CPU and GPU clock, power, energy, temperature, throttle state and\n"
        "process memory. With a command, samples for the command's lifetime (its\n"
        "process is the --pid) and exits with the command's exit code.\n"
        "\n"
        "  --interval T      time between samples, 10ms..1h (default 250ms; a bare number is ms)\n"
        "  --csv FILE        write rows t_s,backend,metric,unit,value,note (\"-\" = stdout, the default)\n"
        "  --json FILE       write one JSON document: backends and samples\n"
        "  --pid P           also sample RSS, CPU time and threads of process P\n"
        "  --prometheus A    serve the latest values at http://A/metrics (A = 127.0.0.1:PORT)\n"
        "  --duration T      stop after T (with a command: send it SIGTERM after T)\n"
        "  --list            print each backend, available or absent, and why; then exit\n"
        "  --root DIR        read /sys and /proc under DIR (captured trees, for tests)\n"
        "  -h, --help        this text\n"
        "\n"
        "Exit: the command's exit code; otherwise 0, 1 if sampling failed, 2 on a usage error.\n");
}

static int print_list(cal_tel *t)
{
    const cal_tel_backend_info *bi;
    size_t n = cal_tel_backends(t, &bi);
    printf("%-9s %-9s %s\n", "backend", "status", "detail");
    for (size_t i = 0; i < n; i++)
        printf("%-9s %-9s %s\n", bi[i].name, bi[i].available ? "available" : "absent", bi[i].reason);
    return CLI_OK;
}

/* ---- output: CSV rows or a streamed JSON document ---- */
typedef struct out {
    FILE   *f;
    int     json, first;
    int64_t t0_ns;
    size_t  rows;
} out;

static void note_for(const cal_tel_sample *s, char *note, size_t n)
{
    note[0] = 0;
    if (strcmp(s->unit, "mask") == 0) cal_tel_nvml_reasons((uint64_t)s->value, note, n);
}

static int out_begin(out *o, cal_tel *t)
{
    if (!o->json) {
        static const char *const H[] = {"t_s", "backend", "metric", "unit", "value", "note"};
        cal_csv_writer w;
        cal_csv_writer_file(&w, o->f);
        for (size_t i = 0; i < sizeof H / sizeof H[0]; i++) cal_csv_put(&w, H[i]);
        return cal_csv_end_row(&w) ? -1 : 0;
    }
    json_t *be = json_array();
    const cal_tel_backend_info *bi;
    size_t n = cal_tel_backends(t, &bi);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(be, json_pack("{s:s, s:b, s:s}", "name", bi[i].name,
                                            "available", bi[i].available, "reason", bi[i].reason));
    char *bs = json_dumps(be, JSON_COMPACT);
    json_decref(be);
    if (!bs) return -1;
    fprintf(o->f, "{\"interval_s\":%.6g,\"backends\":%s,\"samples\":[\n",
            (double)cal_tel_interval_ns(t) / 1e9, bs);
    free(bs);
    o->first = 1;
    return 0;
}

static void out_sample(out *o, const cal_tel_sample *s)
{
    char note[200];
    note_for(s, note, sizeof note);
    double ts = (double)(s->t_ns - o->t0_ns) / 1e9;
    if (!o->json) {
        /* the note (NVML's throttle reasons) holds commas: RFC 4180 quotes it */
        cal_csv_writer w;
        char t[32];
        cal_csv_writer_file(&w, o->f);
        snprintf(t, sizeof t, "%.6f", ts);
        cal_csv_put(&w, t);
        cal_csv_put(&w, s->backend);
        cal_csv_put(&w, s->metric);
        cal_csv_put(&w, s->unit);
        cal_csv_put_num(&w, s->value, 10);
        cal_csv_put(&w, note);
        cal_csv_end_row(&w);
    } else {
        json_t *j = json_pack("{s:f, s:s, s:s, s:s, s:f}", "t_s", ts, "backend", s->backend,
                              "metric", s->metric, "unit", s->unit, "value", s->value);
        if (!j) return;
        if (note[0]) json_object_set_new(j, "note", json_string(note));
        char *txt = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
        json_decref(j);
        if (!txt) return;
        fprintf(o->f, "%s%s", o->first ? "" : ",\n", txt);
        free(txt);
        o->first = 0;
    }
    o->rows++;
}

static void out_end(out *o, uint64_t lost)
{
    if (o->json) fprintf(o->f, "\n],\"lost\":%llu}\n", (unsigned long long)lost);
    fflush(o->f);
}

static void drain(cal_tel *t, uint64_t *cur, uint64_t *lost, out *o)
{
    static cal_tel_sample buf[1024];
    size_t k;
    while ((k = cal_tel_read(t, cur, buf, 1024, lost)) > 0)
        for (size_t i = 0; i < k; i++) out_sample(o, &buf[i]);
    fflush(o->f);
}

/* ---- Prometheus: the latest value of every metric ---- */
static enum MHD_Result prom_handler(void *cls, struct MHD_Connection *c, const char *url,
                                    const char *method, const char *version,
                                    const char *upload, size_t *upload_len, void **ctx)
{
    (void)version; (void)upload; (void)upload_len; (void)ctx;
    cal_tel *t = cls;
    if (strcmp(method, "GET") != 0) return MHD_NO;
    cal_buf b = CAL_BUF_INIT(1 << 20);
    unsigned status = MHD_HTTP_OK;
    if (strcmp(url, "/metrics") != 0) {
        cal_buf_puts(&b, "not found: try /metrics\n");
        status = MHD_HTTP_NOT_FOUND;
    } else {
        cal_tel_sample *s = calloc(4096, sizeof *s);
        size_t n = s ? cal_tel_latest(t, s, 4096) : 0;
        cal_buf_puts(&b, "# HELP caliper_telemetry Latest reading of a caliper telemetry metric, in its unit label.\n"
                         "# TYPE caliper_telemetry gauge\n");
        for (size_t i = 0; i < n; i++)
            cal_buf_printf(&b, "caliper_telemetry{backend=\"%s\",metric=\"%s\",unit=\"%s\"} %.10g\n",
                           s[i].backend, s[i].metric, s[i].unit, s[i].value);
        free(s);
        cal_tel_backend_info bi[32];
        size_t nb = cal_tel_backends_copy(t, bi, 32);
        if (nb > 32) nb = 32;
        cal_buf_puts(&b, "# HELP caliper_telemetry_backend_available 1 if the backend is read, 0 if absent.\n"
                         "# TYPE caliper_telemetry_backend_available gauge\n");
        for (size_t i = 0; i < nb; i++)
            cal_buf_printf(&b, "caliper_telemetry_backend_available{backend=\"%s\"} %d\n",
                           bi[i].name, bi[i].available);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(b.len, b.data ? b.data : (char *)"",
                                                             MHD_RESPMEM_MUST_COPY);
    cal_buf_free(&b);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static int parse_addr(const char *a, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(a, ':');
    if (!colon || (size_t)(colon - a) >= sizeof host || colon == a) return -1;
    memcpy(host, a, (size_t)(colon - a));
    host[colon - a] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port < 0 || port > 65535) return -1;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

int cmd_sample(int argc, char **argv)
{
    setlocale(LC_NUMERIC, "C");
    static const struct option opts[] = {
        { "interval", required_argument, 0, 'i' }, { "csv", required_argument, 0, 'c' },
        { "json", required_argument, 0, 'j' },     { "pid", required_argument, 0, 'p' },
        { "prometheus", required_argument, 0, 'P' }, { "duration", required_argument, 0, 'd' },
        { "list", no_argument, 0, 'l' },           { "root", required_argument, 0, 'r' },
        { "help", no_argument, 0, 'h' },           { 0, 0, 0, 0 },
    };
    double interval_s = 0.25, duration_s = 0;
    const char *csv = NULL, *jsonf = NULL, *prom = NULL, *root = NULL;
    long pid = 0;
    int list = 0, c, rc;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 'i':
            if ((rc = cli_parse_time_in(CMD, "--interval", optarg, "ms", 0.010, 3600, &interval_s)))
                return rc;
            break;
        case 'd':
            if ((rc = cli_parse_time_in(CMD, "--duration", optarg, "s", 0, 0, &duration_s))) return rc;
            break;
        case 'c': csv = optarg; break;
        case 'j': jsonf = optarg; break;
        case 'p':
            if ((rc = cli_parse_long(CMD, "--pid", optarg, 1, 4194304, &pid))) return rc;
            break;
        case 'P': prom = optarg; break;
        case 'l': list = 1; break;
        case 'r': root = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default:
            if (optopt && optopt != '?')
                return cli_usage_error(CMD, "-%c: unknown option or missing value", optopt);
            return cli_usage_error(CMD, "%s: unknown option or missing value", argv[optind - 1]);
        }
    }
    char **cmdv = optind < argc ? &argv[optind] : NULL;
    if (cmdv && optind > 0 && strcmp(argv[optind - 1], "--") != 0)
        return cli_usage_error(CMD, "\"%s\": put the command after --", argv[optind]);
    if (csv && jsonf)
        return cli_usage_error(CMD, "--json: \"%s\" cannot be combined with --csv \"%s\"", jsonf, csv);
    if (cmdv && pid)
        return cli_usage_error(CMD, "--pid: \"%ld\" cannot be combined with a command", pid);
    struct sockaddr_in sa;
    if (prom && parse_addr(prom, &sa) != 0)
        return cli_usage_error(CMD, "--prometheus: \"%s\" is not IPv4:PORT (e.g. 127.0.0.1:9464)", prom);
    if (pid) {
        if (!cal_plat_pid_exists(root, pid))
            return cli_usage_error(CMD, "--pid: \"%ld\" is not a running process", pid);
    }

    cal_tel_config cfg = { .root = root, .interval_ns = (int64_t)llround(interval_s * 1e9),
                           .pid = (int)pid };
    cal_tel *t = NULL;
    if ((rc = cal_tel_open(&t, &cfg)) != CAL_OK) return cli_fail(CMD, "telemetry: %s", cal_strerror(rc));
    if (list) { rc = print_list(t); cal_tel_close(&t); return rc; }

    out o = { .f = stdout, .json = jsonf != NULL };
    const char *path = jsonf ? jsonf : csv;
    if (path && strcmp(path, "-") != 0) {
        o.f = fopen(path, "w");
        if (!o.f) {
            cal_tel_close(&t);
            return cli_fail(CMD, "%s: \"%s\": %s", jsonf ? "--json" : "--csv", path, strerror(errno));
        }
    }
    struct MHD_Daemon *d = NULL;
    if (prom) {
        d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, ntohs(sa.sin_port), NULL, NULL,
                             prom_handler, t, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                             MHD_OPTION_END);
        if (!d) {
            if (o.f != stdout) fclose(o.f);
            cal_tel_close(&t);
            return cli_fail(CMD, "--prometheus: cannot listen on \"%s\"", prom);
        }
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
        fprintf(stderr, "caliper sample: serving http://%s:%u/metrics\n", ip,
                di ? (unsigned)di->port : (unsigned)ntohs(sa.sin_port));
    }

    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal;
    sigaction(SIGINT, &act, NULL);
    sigaction(SIGTERM, &act, NULL);
    g_stop = 0;
    g_child = 0;

    o.t0_ns = cal_now_ns();
    if ((rc = cal_tel_start(t)) != CAL_OK) {
        if (d) MHD_stop_daemon(d);
        if (o.f != stdout) fclose(o.f);
        cal_tel_close(&t);
        return cli_fail(CMD, "sampler: %s", cal_strerror(rc));
    }
    int exit_code = CLI_OK;
    pid_t child = -1;
    if (cmdv) {
        fflush(NULL);
        child = fork();
        if (child < 0) {
            exit_code = cli_fail(CMD, "fork: %s", strerror(errno));
            g_stop = 1;
        } else if (child == 0) {
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            execvp(cmdv[0], cmdv);
            fprintf(stderr, "caliper %s: %s: %s\n", CMD, cmdv[0], strerror(errno));
            _exit(127);
        } else {
            g_child = child;
            cal_tel_set_pid(t, (int)child);
        }
    }
    out_begin(&o, t);   /* after the fork: the process backend now has its target */
    char src[256];
    cal_tel_sources(t, src, sizeof src);
    uint64_t cur = 0, lost = 0;
    int64_t deadline = duration_s > 0 ? o.t0_ns + (int64_t)llround(duration_s * 1e9) : 0;
    int64_t nap = cal_tel_interval_ns(t) < 100000000 ? cal_tel_interval_ns(t) : 100000000;
    int termed = 0;
    while (!g_stop) {
        cal_sleep_ns(nap, &g_stop);
        drain(t, &cur, &lost, &o);
        if (child > 0) {
            int status;
            pid_t w = waitpid(child, &status, WNOHANG);
            if (w == child) {
                g_child = 0;
                exit_code = WIFEXITED(status) ? WEXITSTATUS(status)
                          : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : CLI_FAIL;
                break;
            }
            if (deadline && cal_now_ns() >= deadline && !termed) { kill(child, SIGTERM); termed = 1; }
        } else if (deadline && cal_now_ns() >= deadline) {
            break;
        }
    }
    cal_tel_stop(t);
    cal_tel_set_pid(t, 0);
    drain(t, &cur, &lost, &o);
    out_end(&o, lost);
    cal_tel_self self;
    cal_tel_self_stats(t, &self);
    fprintf(stderr, "caliper sample: %zu rows from %s in %llu ticks%s\n", o.rows,
            src[0] ? src : "no backend",
            (unsigned long long)self.ticks, lost ? " (some lost to the ring cap)" : "");
    if (d) MHD_stop_daemon(d);
    if (o.f != stdout && fclose(o.f) != 0 && exit_code == CLI_OK)
        exit_code = cli_fail(CMD, "%s: \"%s\": %s", jsonf ? "--json" : "--csv", path, strerror(errno));
    cal_tel_close(&t);
    return exit_code;
}
