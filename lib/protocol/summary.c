/* The summary of a cell: both throughput columns (SPEC 1.2), TTFT, TPOT,
 * ITL and E2E percentiles, counted per status so nothing is lost. */
#include <math.h>
#include <stdlib.h>
#include "caliper/error.h"
#include "caliper/protocol.h"
#include "caliper/stats.h"

/* mean, sd, median, p95, p99 of x[n] (sorted in place); NAN when n == 0 */
static void pct(double *x, size_t n, double *mean, double *sd, double *med, double *p95,
                double *p99)
{
    if (mean) *mean = cal_stats_mean(x, n);
    if (sd) *sd = cal_stats_sd(x, n);
    cal_stats_sort(x, n);
    if (med) *med = cal_stats_percentile_sorted(x, n, 50);
    if (p95) *p95 = cal_stats_percentile_sorted(x, n, 95);
    if (p99) *p99 = cal_stats_percentile_sorted(x, n, 99);
}

int cal_summary_compute(const cal_req_result *r, size_t n, double duration_s,
                        int fixed_output, cal_summary *s)
{
    cal_summary_init(s);
    size_t n_itl = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].status == CAL_REQ_OK && r[i].chunk_ns && r[i].n_chunks > 1)
            n_itl += (size_t)r[i].n_chunks - 1;
    size_t cap = n ? n : 1;
    double *ttft = malloc(cap * sizeof *ttft), *tpot = malloc(cap * sizeof *tpot);
    double *e2e = malloc(cap * sizeof *e2e), *prt = malloc(cap * sizeof *prt);
    double *pre = malloc(cap * sizeof *pre), *dec = malloc(cap * sizeof *dec);
    double *srv = malloc(cap * sizeof *srv);
    double *itl = malloc((n_itl ? n_itl : 1) * sizeof *itl);
    int rc = CAL_ENOMEM;
    if (!ttft || !tpot || !e2e || !prt || !pre || !dec || !srv || !itl) goto out;

    size_t nt = 0, np = 0, ne = 0, nr = 0, npre = 0, nd = 0, ns = 0, ni = 0;
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
        int64_t base = q->sched_ns > 0 ? q->sched_ns : q->send_ns;
        int out_tok = q->output_tokens;
        if (q->prompt_tokens > 0) s->total_input_tokens += q->prompt_tokens;
        if (out_tok > 0) s->total_output_tokens += out_tok;
        if (fixed_output > 0 && out_tok != fixed_output) s->output_len_mismatch++;
        double e = (double)(q->end_ns - base) / 1e6;
        if (q->end_ns > 0 && base > 0) e2e[ne++] = e;
        if (q->first_token_ns > 0 && base > 0) {
            double t = (double)(q->first_token_ns - base) / 1e6;
            ttft[nt++] = t;
            if (q->prompt_tokens > 0 && t > 0) pre[npre++] = q->prompt_tokens / (t / 1e3);
            if (out_tok >= 2 && q->end_ns > q->first_token_ns)
                tpot[np++] = (double)(q->end_ns - q->first_token_ns) / 1e6 / (out_tok - 1);
            if (out_tok >= 2 && q->last_token_ns > q->first_token_ns)
                dec[nd++] = (out_tok - 1) / ((double)(q->last_token_ns - q->first_token_ns) / 1e9);
        }
        if (out_tok > 0 && q->end_ns > q->send_ns && q->send_ns > 0)
            prt[nr++] = out_tok / ((double)(q->end_ns - q->send_ns) / 1e9);
        /* the server's convention: llama.cpp's predicted_n counts the first
         * token, which prefill produced, and predicted_ms does not; its own
         * predicted_per_second is (n − 1) ÷ predicted_ms, as the client's
         * decode speed is (out − 1) ÷ (last − first) */
        if (q->server_decode_ms > 0 && q->server_decode_tokens >= 2)
            srv[ns++] = (q->server_decode_tokens - 1) / (q->server_decode_ms / 1e3);
        if (q->chunk_ns)
            for (int k = 1; k < q->n_chunks; k++)
                itl[ni++] = (double)(q->chunk_ns[k] - q->chunk_ns[k - 1]) / 1e6;
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
    pct(ttft, nt, &s->mean_ttft_ms, &s->std_ttft_ms, &s->median_ttft_ms, &s->p95_ttft_ms,
        &s->p99_ttft_ms);
    pct(tpot, np, &s->mean_tpot_ms, &s->std_tpot_ms, &s->median_tpot_ms, NULL, &s->p99_tpot_ms);
    pct(itl, ni, &s->mean_itl_ms, &s->std_itl_ms, &s->median_itl_ms, NULL, &s->p99_itl_ms);
    pct(e2e, ne, &s->mean_e2el_ms, &s->std_e2el_ms, &s->median_e2el_ms, NULL, &s->p99_e2el_ms);
    s->per_request_output_throughput_median = cal_stats_median(prt, nr);
    s->prefill_tps_median = cal_stats_median(pre, npre);
    s->decode_tps_median = cal_stats_median(dec, nd);
    s->server_decode_tps_median = cal_stats_median(srv, ns);
    rc = CAL_OK;
out:
    free(ttft); free(tpot); free(e2e); free(prt); free(pre); free(dec); free(srv); free(itl);
    return rc;
}
