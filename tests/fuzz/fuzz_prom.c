/* Fuzz target: the Prometheus text parser behind `caliper watch`. Any bytes
 * must parse or fail with a line number inside the input; every sample
 * handed out must respect the caps; the load search fails where the plain
 * parse fails, and where it passes either succeeds, finds nothing, or
 * refuses a series given twice (or too many label sets), saying so; a
 * prefix of a valid exposition ending on a line boundary stays valid. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/prom.h"

static int check(void *ud, const cal_prom_sample *s)
{
    size_t *lines = ud;
    if (strlen(s->name) >= CAL_PROM_NAME_MAX || s->n_labels > CAL_PROM_LABELS_MAX) abort();
    for (size_t k = 0; k < s->n_labels; k++)
        if (strlen(s->labels[k].name) >= CAL_PROM_NAME_MAX ||
            strnlen(s->labels[k].value, CAL_PROM_VALUE_MAX) >= CAL_PROM_VALUE_MAX)
            abort();
    if (s->line == 0 || s->line > *lines) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *t = (const char *)data;
    size_t lines = 1;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
    size_t bad = 0;
    char why[256];
    int rc = cal_prom_parse(t, size, check, &lines, &bad, why, sizeof why);
    if (rc != CAL_OK && (bad == 0 || bad > lines || !why[0])) abort();
    if (rc == CAL_OK && bad != 0) abort();
    cal_prom_load ld;
    why[0] = '\0';
    int rl = cal_prom_find_load(t, size, NULL, &ld, &bad, why, sizeof why);
    if (rc != CAL_OK && (rl == CAL_OK || rl == CAL_ENOTFOUND)) abort();
    if (rc == CAL_OK && rl != CAL_OK && rl != CAL_ENOTFOUND &&
        !(rl == CAL_EPROTO && strstr(why, "repeats the label set")) &&
        !(rl == CAL_ETOOBIG && strstr(why, "label sets")))
        abort();
    if (rl == CAL_OK && !ld.has_running) abort();
    if (rc == CAL_OK) {
        const char *nl = size ? memchr(t, '\n', size) : NULL;
        if (nl && cal_prom_parse(t, (size_t)(nl - t) + 1, NULL, NULL, NULL, NULL, 0) != CAL_OK) abort();
    }
    return 0;
}
