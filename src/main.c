/* caliper — entry point: pick the subcommand, hand over. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/platform.h"
#include "cli.h"
#include "engine/engine.h"

static const cli_cmd COMMANDS[] = {
    {"run",     cmd_run,     "benchmark a target: shots, sweeps, telemetry, into the store"},
    {"runs",    cmd_runs,    "list stored runs"},
    {"show",    cmd_show,    "print a stored run again"},
    {"export",  cmd_export,  "export a stored run as JSON or CSV"},
    {"serve",   cmd_serve,   "the built-in reference engine behind an OpenAI-compatible API"},
    {"sample",  cmd_sample,  "hardware telemetry on its own, or around a command"},
    {"calc",    cmd_calc,    "the field notes' formulas from flags"},
    {"fit",     cmd_fit,     "fits over stored runs or CSV (prefill, memory, leak...)"},
    {"compare", cmd_compare, "results side by side; ratios only where protocols match"},
    {"report",  cmd_report,  "HTML, Markdown, CSV or JSON report of stored runs"},
    {"gate",    cmd_gate,    "regression gate for CI: regression, improvement, no change or cannot judge"},
    {"watch",   cmd_watch,   "operating point from a server's /metrics; memory slope of processes"},
    {"proxy",   cmd_proxy,   "between a chat client and an engine: per-turn prefix, TTFT, decode"},
    {"ops",     cmd_ops,     "per-op reconciliation of one or two engine profiles"},
    {"merge",   cmd_merge,   "shards of a run measured by several clients into one stored run"},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: caliper COMMAND [ARGS]\n\n"
               "caliper measures LLM inference and records the protocol of every number.\n\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-8s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "\n'caliper COMMAND --help' for each command's flags; "
               "'caliper --version' for the build.\n");
}

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    setlocale(LC_NUMERIC, "C");    /* numbers print with '.', always */
    cal_plat_set_argv0(argv[0]);   /* where the OS cannot name this binary */
    const char *self;
    if (argc < 2) { usage(stderr); return CLI_USAGE; }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "version")) {
        printf("%s\n", cli_build_string());
        return CLI_OK;
    }
    /* OpenBLAS picks its kernels when it loads; on a CPU newer than the
     * library it falls back to generic ones (SSE3 on this AVX-512 host, 4x
     * slower prefill). `serve`, the one command that computes with the
     * engine, starts again, once, with the kernel set the engine advises (if
     * that fails it carries on) and names the setting on its listening line,
     * which a run records as the target's detail. No other command changes
     * its environment: a --launch'ed engine gets exactly the caller's. */
    const char *blas = !strcmp(name, "serve") ? cal_engine_blas_coretype_advice() : NULL;
    if (blas && !getenv("OPENBLAS_CORETYPE") && setenv("OPENBLAS_CORETYPE", blas, 1) == 0)
        if ((self = cal_plat_self_exe(NULL, 0))) execv(self, argv);
    /* the library's process-wide setup, once, before any thread exists */
    if (cal_global_init() != CAL_OK) {
        fprintf(stderr, "caliper: libcurl's global initialisation failed\n");
        return CLI_FAIL;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, COMMANDS[i].name))
            return COMMANDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "caliper: '%s' is not a command\nTry 'caliper --help'.\n", name);
    return CLI_USAGE;
}
