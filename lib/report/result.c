/* caliper — the result model compare and report read: cells with the one
 * schema's fields (schema.h) and their samples, shots, verdicts as data, and
 * building a result up piece by piece.
 * Every array here is owned by its result and freed by cal_result_free. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "caliper/stats.h"

static const char *const SWEEP_NAMES[] = {
    [CAL_SWEEP_SHOTS] = "shots", [CAL_SWEEP_CONCURRENCY] = "concurrency",
    [CAL_SWEEP_PROMPT] = "prompt", [CAL_SWEEP_OTHER] = "other",
};

const char *cal_sweep_name(cal_sweep s)
{
    return SWEEP_NAMES[(unsigned)s <= CAL_SWEEP_OTHER ? s : CAL_SWEEP_OTHER];
}

int cal_sweep_parse(const char *s, cal_sweep *out)
{
    for (int i = 0; s && i <= CAL_SWEEP_OTHER; i++)
        if (!strcmp(s, SWEEP_NAMES[i])) { *out = (cal_sweep)i; return CAL_OK; }
    return CAL_EINVAL;
}

cal_result *cal_result_new(void)
{
    cal_result *r = calloc(1, sizeof(cal_result));
    if (r) cal_fp_init(&r->shots_fp);
    return r;
}

static void cell_free(cal_rcell *c)
{
    for (int s = 0; s < CAL_S__N; s++) { free(c->s[s]); c->s[s] = NULL; c->ns[s] = 0; }
}

/* Here, not in turns.c: a result owns its turns and frees them with itself. */
void cal_turns_free(cal_turns *t)
{
    if (!t) return;
    free(t->rows);
    memset(t, 0, sizeof *t);
}

void cal_result_free(cal_result **rp)
{
    if (!rp || !*rp) return;
    cal_result *r = *rp;
    for (size_t i = 0; i < r->n_cells; i++) cell_free(&r->cells[i]);
    free(r->cells);
    free(r->shots);
    free(r->tel);
    if (r->turns) cal_turns_free(r->turns);
    free(r->turns);
    free(r);
    *rp = NULL;
}

/* Growth by doubling; the caps keep a hostile file from asking for the heap. */
#define MAX_CELLS  4096
#define MAX_SHOTS  65536
#define MAX_TEL    (1u << 20)
#define MAX_SAMPLES (1u << 24)

static int grow(void **arr, size_t n, size_t elem, size_t cap)
{
    if (n >= cap) return CAL_ETOOBIG;
    if (n & (n - 1)) return CAL_OK;           /* not a power of two: room left */
    size_t want = n ? n * 2 : 4;
    void *p = realloc(*arr, want * elem);
    if (!p) return CAL_ENOMEM;
    *arr = p;
    return CAL_OK;
}

cal_rcell *cal_result_add_cell(cal_result *r, cal_sweep sweep)
{
    if (grow((void **)&r->cells, r->n_cells, sizeof(cal_rcell), MAX_CELLS)) return NULL;
    cal_rcell *c = &r->cells[r->n_cells++];
    memset(c, 0, sizeof *c);
    c->sweep = sweep;
    cal_fp_init(&c->fp);
    for (int m = 0; m < CAL_M__N; m++) c->v[m] = NAN;
    return c;
}

int cal_result_add_shot(cal_result *r, const cal_shot *s)
{
    int e = grow((void **)&r->shots, r->n_shots, sizeof(cal_shot), MAX_SHOTS);
    if (e) return e;
    r->shots[r->n_shots++] = *s;
    return CAL_OK;
}

int cal_result_add_tel(cal_result *r, const cal_tel_point *p)
{
    int e = grow((void **)&r->tel, r->n_tel, sizeof(cal_tel_point), MAX_TEL);
    if (e) return e;
    r->tel[r->n_tel++] = *p;
    return CAL_OK;
}

void cal_shot_init(cal_shot *s)
{
    memset(s, 0, sizeof *s);
    s->kind = CAL_SHOT_UNKNOWN;
    s->t_s = s->dur_s = NAN;
    for (int m = 0; m < CAL_M__N; m++) s->v[m] = NAN;
}

int cal_result_add_verdict(cal_result *r, const cal_verdict *v)
{
    if (r->n_verdicts >= CAL_RES_MAX_VERDICTS) return CAL_EFULL;
    r->verdicts[r->n_verdicts++] = *v;
    return CAL_OK;
}

int cal_result_add_note(cal_result *r, const char *text)
{
    cal_verdict v;
    cal_verdict_init(&v, CAL_VK_NOTE);
    snprintf(v.text, sizeof v.text, "%s", text);
    return cal_result_add_verdict(r, &v);
}

int cal_cell_set_samples(cal_rcell *c, cal_series s, const double *x, size_t n)
{
    if ((unsigned)s >= CAL_S__N) return CAL_EINVAL;
    if (n > MAX_SAMPLES) return CAL_ETOOBIG;
    double *p = NULL;
    if (n) {
        p = malloc(n * sizeof *p);
        if (!p) return CAL_ENOMEM;
        memcpy(p, x, n * sizeof *p);
    }
    free(c->s[s]);
    c->s[s] = p;
    c->ns[s] = n;
    return CAL_OK;
}

void cal_cell_fill_from_samples(cal_rcell *c)
{
    /* only statistics over the requests: a rate is not a statistic of its
     * per-shot samples */
    for (int m = 0; m < CAL_M__N; m++) {
        const cal_field *f = cal_metric_get((cal_metric)m);
        if (!isnan(c->v[m]) || f->series < 0 || f->pool != CAL_POOL_REQUESTS) continue;
        size_t n = c->ns[f->series];
        if (!n) continue;
        const double *x = c->s[f->series];
        if (f->stat == CAL_STAT_MEAN) { c->v[m] = cal_stats_mean(x, n); continue; }
        if (f->stat == CAL_STAT_SD) { c->v[m] = cal_stats_sd(x, n); continue; }
        double pct = cal_stat_pct(f->stat);
        if (isnan(pct)) continue;
        double *tmp = malloc(n * sizeof *tmp);
        if (!tmp) return;
        memcpy(tmp, x, n * sizeof *tmp);
        c->v[m] = cal_stats_percentile(tmp, n, pct);
        free(tmp);
    }
}
