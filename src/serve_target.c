/* caliper run's built-in target: how `caliper serve` is started and how it
 * says it is ready (serve_target.h). */
#include <stdio.h>
#include <string.h>
#include "serve_target.h"

void cli_serve_argv_make(cli_serve_argv *a, const char *self, const char *preset,
                         const char *extra)
{
    int k = 0;
    a->argv[k++] = self;
    a->argv[k++] = "serve";
    a->argv[k++] = "--preset";
    a->argv[k++] = preset ? preset : "small";
    a->argv[k++] = "--port";
    a->argv[k++] = "0";
    snprintf(a->words, sizeof a->words, "%s", extra ? extra : "");
    for (char *save = NULL, *w = strtok_r(a->words, " \t", &save); w && k < CLI_SERVE_ARGV_MAX - 2;
         w = strtok_r(NULL, " \t", &save))
        a->argv[k++] = w;
    a->argv[k] = NULL;
}

int cli_serve_ready_line(const char *line, char *url, size_t url_n, char *detail, size_t detail_n)
{
    const char *p = strstr(line, "listening on http://");
    if (!p) return 0;
    p += strlen("listening on ");
    size_t len = strcspn(p, " \t\r\n");
    if (len == 0 || len >= url_n) return 0;
    memcpy(url, p, len);
    url[len] = '\0';
    const char *rest = p + len;
    while (*rest == ' ' || *rest == '\t') rest++;
    snprintf(detail, detail_n, "%.*s", (int)strcspn(rest, "\r\n"), rest);
    return 1;
}
