/* caliper — the result model compare and report read: the one metric table,
 * cells with their samples, and building a result up piece by piece.
 * Every array here is owned by its result and freed by cal_result_free. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "caliper/stats.h"

/* The one schema: table labels, JSON/CSV keys (vLLM's names where the
 * meaning is the same), units, columns and the statistic behind each. */
static const cal_metric_info METRICS[CAL_M__N] = {
    [CAL_M_AGG_TOKS]     = {"output_throughput", "aggregate tok/s", "tok/s", CAL_COL_AGGREGATE, 1, CAL_S_AGG_TOKS, 50},
    [CAL_M_REQ_TOKS]     = {"median_request_tok_s", "per-request tok/s (median)", "tok/s", CAL_COL_PER_REQUEST, 1, CAL_S_REQ_TOKS, 50},
    [CAL_M_PREFILL_TOKS] = {"prefill_tok_s", "prefill tok/s", "tok/s", CAL_COL_PER_REQUEST, 1, CAL_S_PREFILL_TOKS, 50},
    [CAL_M_DECODE_TOKS]  = {"decode_tok_s", "decode tok/s", "tok/s", CAL_COL_PER_REQUEST, 1, CAL_S_DECODE_TOKS, 50},
    [CAL_M_TTFT_P50]     = {"median_ttft_ms", "TTFT p50", "ms", CAL_COL_PER_REQUEST, 0, CAL_S_TTFT_MS, 50},
    [CAL_M_TTFT_P95]     = {"p95_ttft_ms", "TTFT p95", "ms", CAL_COL_PER_REQUEST, 0, CAL_S_TTFT_MS, 95},
    [CAL_M_TTFT_P99]     = {"p99_ttft_ms", "TTFT p99", "ms", CAL_COL_PER_REQUEST, 0, CAL_S_TTFT_MS, 99},
    [CAL_M_ITL_P50]      = {"median_itl_ms", "ITL p50", "ms", CAL_COL_PER_REQUEST, 0, CAL_S_ITL_MS, 50},
    [CAL_M_ITL_P99]      = {"p99_itl_ms", "ITL p99", "ms", CAL_COL_PER_REQUEST, 0, CAL_S_ITL_MS, 99},
    [CAL_M_TPOT_P50]     = {"median_tpot_ms", "TPOT p50", "ms", CAL_COL_PER_REQUEST, 0, CAL_S_TPOT_MS, 50},
    [CAL_M_E2E_P50]      = {"median_e2el_ms", "E2E p50", "ms", CAL_COL_PER_REQUEST, 0, CAL_S_E2E_MS, 50},
    [CAL_M_E2E_P99]      = {"p99_e2el_ms", "E2E p99", "ms", CAL_COL_PER_REQUEST, 0, CAL_S_E2E_MS, 99},
    [CAL_M_CLOCK_MHZ]    = {"clock_mhz", "clock MHz", "MHz", CAL_COL_AGGREGATE, -1, -1, 50},
    [CAL_M_POWER_W]      = {"power_w", "power W", "W", CAL_COL_AGGREGATE, -1, -1, 50},
};

static const char *const SERIES_KEYS[CAL_S__N] = {
    "output_throughput", "request_tok_s", "prefill_tok_s", "decode_tok_s",
    "ttft_ms", "itl_ms", "tpot_ms", "e2el_ms",
};

const cal_metric_info *cal_metric_get(cal_metric m)
{
    return &METRICS[(unsigned)m < CAL_M__N ? m : 0];
}

int cal_metric_find(const char *key)
{
    for (int i = 0; key && i < CAL_M__N; i++)
        if (!strcmp(METRICS[i].key, key)) return i;
    return -1;
}

const char *cal_series_key(cal_series s)
{
    return (unsigned)s < CAL_S__N ? SERIES_KEYS[s] : "?";
}

int cal_series_find(const char *key)
{
    for (int i = 0; key && i < CAL_S__N; i++)
        if (!strcmp(SERIES_KEYS[i], key)) return i;
    return -1;
}

const char *cal_sweep_name(cal_sweep s)
{
    switch (s) {
    case CAL_SWEEP_SHOTS:       return "shots";
    case CAL_SWEEP_CONCURRENCY: return "concurrency";
    case CAL_SWEEP_PROMPT:      return "prompt";
    default:                    return "other";
    }
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

void cal_result_free(cal_result **rp)
{
    if (!rp || !*rp) return;
    cal_result *r = *rp;
    for (size_t i = 0; i < r->n_cells; i++) cell_free(&r->cells[i]);
    free(r->cells);
    free(r->shots);
    free(r->tel);
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
    c->completed = c->failed = -1;
    c->duration_s = NAN;
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

int cal_result_add_verdict(cal_result *r, const char *text)
{
    if (r->n_verdicts >= CAL_RES_MAX_VERDICTS) return CAL_EFULL;
    snprintf(r->verdicts[r->n_verdicts++], sizeof r->verdicts[0], "%s", text);
    return CAL_OK;
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
    for (int m = 0; m < CAL_M__N; m++) {
        const cal_metric_info *mi = &METRICS[m];
        if (!isnan(c->v[m]) || mi->series < 0) continue;
        size_t n = c->ns[mi->series];
        if (!n) continue;
        double *tmp = malloc(n * sizeof *tmp);
        if (!tmp) return;
        memcpy(tmp, c->s[mi->series], n * sizeof *tmp);
        c->v[m] = cal_stats_percentile(tmp, n, mi->pct);
        free(tmp);
    }
}
