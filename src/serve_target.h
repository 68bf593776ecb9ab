/* caliper's own `caliper serve` as the built-in target of `caliper run`:
 * the command that starts it, and the line it prints once it listens. The
 * library's target (caliper/protocol.h) takes both from here and knows
 * neither spelling. */
#ifndef CALIPER_SERVE_TARGET_H
#define CALIPER_SERVE_TARGET_H
#include <stddef.h>

#define CLI_SERVE_ARGV_MAX 40

typedef struct cli_serve_argv {
    const char *argv[CLI_SERVE_ARGV_MAX];  /* NULL-terminated; points into words */
    char        words[512];                /* the extra arguments, split in place */
} cli_serve_argv;

/* `self serve --preset P --port 0` and the words of extra (space- or
 * tab-separated, NULL: none; as many as fit) into a. preset NULL: "small". */
void cli_serve_argv_make(cli_serve_argv *a, const char *self, const char *preset,
                         const char *extra);

/* A cal_target_config ready_line for the line cmd_serve.c prints when it
 * is ready: "caliper serve: listening on http://HOST:PORT (model NAME, ...)".
 * 1 with the URL in url[url_n] and the words after it in detail[detail_n];
 * 0 for any other line or a URL that does not fit. */
int cli_serve_ready_line(const char *line, char *url, size_t url_n, char *detail, size_t detail_n);

#endif
