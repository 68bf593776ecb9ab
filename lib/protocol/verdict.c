/* caliper — verdicts as data (analysis.h): the kinds' names, a verdict's
 * defaults and its one-line rendering, and the list the analysis gathers
 * them in (analysis_internal.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "caliper/analysis.h"
#include "caliper/error.h"
#include "lib/protocol/analysis_internal.h"

/* ---- names -------------------------------------------------------------- */

static const char *const VK_NAMES[CAL_VK__N] = {
    [CAL_VK_NOTE] = "note", [CAL_VK_SHOTS] = "shots", [CAL_VK_FREQUENCY] = "frequency",
    [CAL_VK_POWER_WALL] = "power-wall", [CAL_VK_AB] = "ab", [CAL_VK_FAILURES] = "failures",
    [CAL_VK_OUTPUT_LENGTH] = "output-length", [CAL_VK_PROMPT_APPROX] = "prompt-approx",
    [CAL_VK_CLIENT] = "client", [CAL_VK_COLUMN] = "column", [CAL_VK_PREFILL_FIT] = "prefill-fit",
    [CAL_VK_TELEMETRY] = "telemetry", [CAL_VK_PROMPT_CHECK] = "prompt-check",
    [CAL_VK_PREFIX_CACHE] = "prefix-cache",
};

const char *cal_verdict_kind_name(cal_verdict_kind k)
{
    return (unsigned)k < CAL_VK__N ? VK_NAMES[k] : VK_NAMES[CAL_VK_NOTE];
}

int cal_verdict_kind_parse(const char *s, cal_verdict_kind *out)
{
    for (int k = 0; s && k < CAL_VK__N; k++)
        if (!strcmp(s, VK_NAMES[k])) { *out = (cal_verdict_kind)k; return CAL_OK; }
    return CAL_EINVAL;
}

void cal_verdict_init(cal_verdict *v, cal_verdict_kind k)
{
    memset(v, 0, sizeof *v);
    v->kind = k;
    v->group = -1;
    v->judged = 1;
    v->effect = v->lo = v->hi = NAN;
    for (int i = 0; i < CAL_VERDICT_VALUES; i++) v->values[i] = NAN;
}

char *cal_verdict_line(const cal_verdict *v, char *buf, size_t n)
{
    if (!n) return buf;
    if (v->cell[0]) {
        if (v->kind == CAL_VK_FREQUENCY || v->kind == CAL_VK_POWER_WALL)
            snprintf(buf, n, "%s: %s: %s", v->cell, v->kind == CAL_VK_FREQUENCY ? "clock" : "power",
                     v->text);
        else snprintf(buf, n, "%s: %s", v->cell, v->text);
    } else snprintf(buf, n, "%s", v->text);
    return buf;
}

cal_verdict *cal_an_vadd(vlist *l, cal_verdict_kind k)
{
    if (l->n >= MAX_VERDICTS) return NULL;
    cal_verdict *v = &l->v[l->n++];
    cal_verdict_init(v, k);
    return v;
}

void cal_an_for_group(cal_verdict *v, const cal_group *g, size_t gi)
{
    v->group = (int)gi;
    snprintf(v->cell, sizeof v->cell, "%s", g->name);
}
