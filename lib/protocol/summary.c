/* The summary of a cell: both throughput columns (SPEC 1.2), TTFT, TPOT,
 * ITL and E2E percentiles, counted per status so nothing is lost. Each
 * per-request field is its statistic (schema table) over its series, the
 * samples taken through the one extractor (series.h). */
#include <math.h>
#include <stdlib.h>
#include "caliper/error.h"
#include "caliper/protocol.h"
#include "caliper/series.h"
#include "caliper/stats.h"

/* The statistic f->stat of x[n] (sorted in place by the percentiles);
 * NAN when n == 0. */
static double stat_of(const cal_field *f, double *x, size_t n, int *sorted)
{
    switch (f->stat) {
    case CAL_STAT_MEAN: return cal_stats_mean(x, n);
    case CAL_STAT_SD: return cal_stats_sd(x, n);
    default:
        break;
    }
    double p = cal_stat_pct(f->stat);
    if (isnan(p)) return NAN;
    if (!*sorted) { cal_stats_sort(x, n); *sorted = 1; }
    return cal_stats_percentile_sorted(x, n, p);
}

int cal_summary_compute(const cal_req_result *r, size_t n, double duration_s,
                        int fixed_output, cal_summary *s)
{
    cal_summary_init(s);
    size_t n_itl = 0;
    cal_itl_iter it;
    for (size_t i = 0; i < n; i++) n_itl += cal_itl_begin(&it, &r[i]);
    size_t cap = n > n_itl ? n : n_itl;
    double *x = malloc((cap ? cap : 1) * sizeof *x);
    if (!x) return CAL_ENOMEM;

    int64_t t_first = 0, t_last = 0;
    for (size_t i = 0; i < n; i++) {
        const cal_req_result *q = &r[i];
        switch (q->status) {
        case CAL_REQ_OK: s->completed++; break;
        case CAL_REQ_HTTP_ERROR: s->n_http_error++; break;
        case CAL_REQ_TIMEOUT: s->n_timeout++; break;
        case CAL_REQ_CONNECT_ERROR: s->n_connect_error++; break;
        case CAL_REQ_STREAM_ERROR: s->n_stream_error++; break;
        default: s->n_cancelled++; break;
        }
        if (q->send_ns > 0 && (!t_first || q->send_ns < t_first)) t_first = q->send_ns;
        if (q->end_ns > t_last) t_last = q->end_ns;
        if (q->status != CAL_REQ_OK) continue;
        if (q->prompt_tokens > 0) s->total_input_tokens += q->prompt_tokens;
        if (q->output_tokens > 0) s->total_output_tokens += q->output_tokens;
        if (fixed_output > 0 && q->output_tokens != fixed_output) s->output_len_mismatch++;
    }
    s->failed = (int64_t)n - s->completed;
    if (duration_s <= 0 && t_last > t_first && t_first > 0)
        duration_s = (double)(t_last - t_first) / 1e9;
    if (duration_s > 0) {
        s->duration = duration_s;
        s->request_throughput = s->completed / duration_s;
        s->output_throughput = s->total_output_tokens / duration_s;
        s->total_token_throughput = (s->total_input_tokens + s->total_output_tokens) / duration_s;
    }
    /* the per-request fields, series by series: every field of the table
     * whose series is per request takes its statistic over that series'
     * samples of the ok requests */
    for (int se = 0; se < CAL_S__N; se++) {
        if (se == CAL_S_AGG_TOKS) continue;   /* a per-shot series: the rate above */
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (se == CAL_S_ITL_MS) {
                double g;
                cal_itl_begin(&it, &r[i]);
                while (m < cap && cal_itl_next(&it, &g)) x[m++] = g;
                continue;
            }
            double v = cal_req_sample(&r[i], (cal_series)se);
            if (isfinite(v) && m < cap) x[m++] = v;
        }
        /* the mean and sd before a percentile sorts x (the same values) */
        int sorted = 0;
        for (int pass = 0; pass < 2; pass++)
            for (size_t k = 0; k < cal_summary_n_fields; k++) {
                const cal_field *f = &cal_summary_fields[k];
                if (f->series != se || f->column != CAL_COL_PER_REQUEST) continue;
                int is_pct = !isnan(cal_stat_pct(f->stat));
                if (is_pct != pass) continue;
                cal_summary_set(s, f, m ? stat_of(f, x, m, &sorted) : NAN);
            }
    }
    free(x);
    return CAL_OK;
}
