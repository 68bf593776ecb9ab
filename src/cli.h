/* caliper command line — shared helpers for the subcommands (src/cmd_*.c).
 * Exit codes everywhere: 0 ok, 1 the run or a check failed, 2 usage error.
 * Usage errors name the flag and the value:
 *   caliper run: --concurrency: "0" is not a positive integer
 * and end with a one-line hint to --help. Numbers go to stdout, progress and
 * diagnostics to stderr. */
#ifndef CALIPER_CLI_H
#define CALIPER_CLI_H
#include <stddef.h>
#include <stdio.h>
#include "caliper/units.h"

#define CLI_OK    0
#define CLI_FAIL  1
#define CLI_USAGE 2

/* One entry per subcommand; main() dispatches through this table. */
typedef struct cli_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);   /* argv[0] is the subcommand name */
    const char *summary;                /* one line for `caliper --help` */
} cli_cmd;

int cmd_run(int argc, char **argv);
int cmd_runs(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_calc(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_gate(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_proxy(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_ops(int argc, char **argv);

/* Print "caliper CMD: MESSAGE" and the --help hint to stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Print "caliper CMD: MESSAGE" to stderr; returns 1. */
int cli_fail(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Flag parsers: on success store into *out and return 0; on failure print a
 * usage error naming cmd, flag and value, and return 2. */
int cli_parse_unit(const char *cmd, const char *flag, const char *arg,
                   cal_unit u, const char *bare_unit, double *out);
/* A quantity flag that must lie in [min, max] (min_open: (min, max]), checked
 * in double before any conversion to an integer type. */
int cli_parse_unit_in(const char *cmd, const char *flag, const char *arg, cal_unit u,
                      const char *bare_unit, double min, double max, int min_open,
                      double *out);
/* Longest time any flag accepts: a year, so that its nanoseconds (and a
 * deadline of now plus it) fit in int64_t with room to spare. */
#define CLI_TIME_MAX_S (366.0 * 86400)
/* A time flag that must lie in [min_s, max_s] seconds (max_s <= 0: up to
 * CLI_TIME_MAX_S; min_s is exclusive when it is 0: "a positive time"). */
int cli_parse_time_in(const char *cmd, const char *flag, const char *arg,
                      const char *bare_unit, double min_s, double max_s, double *out);
/* An integer flag in [min, max] (unit suffixes allowed: 2k); a value out of
 * range, however large, is a usage error, never a conversion. */
int cli_parse_long(const char *cmd, const char *flag, const char *arg,
                   long min, long max, long *out);
/* Comma list of integers ("1,4,8,32", with k/M suffixes) into out[cap];
 * *n gets the count. Each must lie in [min, max]. */
int cli_parse_long_list(const char *cmd, const char *flag, const char *arg,
                        long min, long max, long *out, size_t cap, size_t *n);

/* Remove every "--import TOOL FILE" (or --import=TOOL FILE) from argv,
 * collecting TOOL into tools[cap] and FILE into files[cap] (TOOL one of
 * CAL_IMPORT_TOOLS); argv keeps the rest in order. 0 or 2. */
int cli_lift_imports(const char *cmd, int *argc, char **argv, const char **tools,
                     const char **files,
                     size_t cap, size_t *n);

/* SIGINT and SIGTERM set *flag (cleared first) instead of killing the
 * process, without SA_RESTART, so blocking calls return and the command can
 * store or print what it has. */
void cli_catch_stop(volatile int *flag);

/* Colour and progress only on a TTY and without NO_COLOR. */
int cli_stderr_is_tty(void);
int cli_use_color(FILE *f);

/* "caliper 0.1.0 (commit abc, -O2, asan)" — what every stored run records. */
const char *cli_build_string(void);
/* Non-NULL when this is a sanitizer or unoptimised build: a warning line. */
const char *cli_build_warning(void);

#endif
