/* caliper serve — counters and histograms (see metrics.h) and their
 * Prometheus text rendering. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "server/metrics.h"

static const double STEP_LE[CAL_SRV_STEP_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5};

int cal_srv_metrics_init(cal_srv_metrics *m, int pace)
{
    memset(m, 0, sizeof *m);
    m->pace = pace;
    if (pace) {
        m->late_bucket = calloc(CAL_SRV_LATE_BUCKETS + 1, sizeof *m->late_bucket);
        if (!m->late_bucket) return CAL_ENOMEM;
    }
    return CAL_OK;
}

void cal_srv_metrics_free(cal_srv_metrics *m)
{
    free(m->late_bucket);
    m->late_bucket = NULL;
}

void cal_srv_metrics_step(cal_srv_metrics *m, int64_t ns, int batch)
{
    double s = (double)ns / 1e9;
    int i = 0;
    while (i < CAL_SRV_STEP_BUCKETS && s > STEP_LE[i]) i++;
    atomic_fetch_add_explicit(&m->step_bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->step_sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->step_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->batch_sum, batch, memory_order_relaxed);
    if (batch > atomic_load_explicit(&m->batch_max, memory_order_relaxed))
        atomic_store_explicit(&m->batch_max, batch, memory_order_relaxed);
}

void cal_srv_metrics_late(cal_srv_metrics *m, int64_t late_ns)
{
    if (late_ns < 0) late_ns = 0;
    if (!m->late_bucket) return;
    int64_t b = late_ns / CAL_SRV_LATE_BUCKET_NS;
    if (b > CAL_SRV_LATE_BUCKETS) b = CAL_SRV_LATE_BUCKETS;
    atomic_fetch_add_explicit(&m->late_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->late_n, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->late_sum_ns, late_ns, memory_order_relaxed);
    long long cur = atomic_load_explicit(&m->late_max_ns, memory_order_relaxed);
    while (late_ns > cur &&
           !atomic_compare_exchange_weak_explicit(&m->late_max_ns, &cur, late_ns,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

double cal_srv_metrics_late_ms(const cal_srv_metrics *m, double q)
{
    if (!m->late_bucket) return 0;
    long long n = atomic_load_explicit(&m->late_n, memory_order_relaxed);
    if (n <= 0) return 0;
    if (q >= 1) return (double)atomic_load_explicit(&m->late_max_ns, memory_order_relaxed) / 1e6;
    /* nearest rank: the smallest value with at least q·n samples at or below */
    long long want = (long long)ceil(q * (double)n), seen = 0;
    if (want < 1) want = 1;
    if (want > n) want = n;
    for (int i = 0; i <= CAL_SRV_LATE_BUCKETS; i++) {
        seen += atomic_load_explicit(&m->late_bucket[i], memory_order_relaxed);
        if (seen >= want) {
            /* the bucket's upper edge: a conservative (late-side) estimate */
            double ms = (double)(i + 1) * CAL_SRV_LATE_BUCKET_NS / 1e6;
            double mx = (double)atomic_load_explicit(&m->late_max_ns, memory_order_relaxed) / 1e6;
            return ms < mx ? ms : mx;
        }
    }
    return (double)atomic_load_explicit(&m->late_max_ns, memory_order_relaxed) / 1e6;
}

#define LD(x) ((long long)atomic_load_explicit(&(x), memory_order_relaxed))

int cal_srv_metrics_render(const cal_srv_metrics *m, const char *model, cal_buf *b)
{
    int rc = 0;
    long long running = LD(m->running), waiting = LD(m->waiting);
    const char *pre[] = {"caliper", "vllm"};
    for (int i = 0; i < 2; i++) {
        rc |= cal_buf_printf(b,
            "# HELP %s:num_requests_running Number of requests in the running batch.\n"
            "# TYPE %s:num_requests_running gauge\n"
            "%s:num_requests_running{model_name=\"%s\"} %lld\n"
            "# HELP %s:num_requests_waiting Number of requests waiting in the queue.\n"
            "# TYPE %s:num_requests_waiting gauge\n"
            "%s:num_requests_waiting{model_name=\"%s\"} %lld\n"
            "# HELP %s:prompt_tokens_total Prompt tokens processed.\n"
            "# TYPE %s:prompt_tokens_total counter\n"
            "%s:prompt_tokens_total{model_name=\"%s\"} %lld\n"
            "# HELP %s:generation_tokens_total Tokens generated.\n"
            "# TYPE %s:generation_tokens_total counter\n"
            "%s:generation_tokens_total{model_name=\"%s\"} %lld\n",
            pre[i], pre[i], pre[i], model, running,
            pre[i], pre[i], pre[i], model, waiting,
            pre[i], pre[i], pre[i], model, LD(m->prompt_tokens),
            pre[i], pre[i], pre[i], model, LD(m->generation_tokens));
    }
    double kv = m->kv_total > 0 ? (double)LD(m->kv_used) / (double)m->kv_total : 0;
    rc |= cal_buf_printf(b,
        "# HELP caliper:kv_cache_usage_perc KV cache positions held, as a fraction of all.\n"
        "# TYPE caliper:kv_cache_usage_perc gauge\n"
        "caliper:kv_cache_usage_perc{model_name=\"%s\"} %.6f\n"
        "# HELP vllm:kv_cache_usage_perc KV cache usage (alias of caliper:kv_cache_usage_perc).\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        "vllm:kv_cache_usage_perc{model_name=\"%s\"} %.6f\n"
        "# HELP caliper:request_success_total Requests finished.\n"
        "# TYPE caliper:request_success_total counter\n"
        "caliper:request_success_total{model_name=\"%s\"} %lld\n"
        "# HELP caliper:request_aborted_total Requests dropped mid-way (client gone, shutdown).\n"
        "# TYPE caliper:request_aborted_total counter\n"
        "caliper:request_aborted_total{model_name=\"%s\"} %lld\n"
        "# HELP caliper:request_rejected_total Requests answered with an error status.\n"
        "# TYPE caliper:request_rejected_total counter\n"
        "caliper:request_rejected_total{model_name=\"%s\"} %lld\n"
        "# HELP caliper:tokenize_requests_total POST /tokenize requests answered.\n"
        "# TYPE caliper:tokenize_requests_total counter\n"
        "caliper:tokenize_requests_total{model_name=\"%s\"} %lld\n"
        "# HELP caliper:requests_tokenizing Requests whose body is being parsed and tokenized.\n"
        "# TYPE caliper:requests_tokenizing gauge\n"
        "caliper:requests_tokenizing{model_name=\"%s\"} %d\n"
        "# HELP caliper:engine_steps_total Engine forward steps.\n"
        "# TYPE caliper:engine_steps_total counter\n"
        "caliper:engine_steps_total{model_name=\"%s\"} %lld\n"
        "# HELP caliper:decode_batch_size_max Largest number of sequences in one decode step.\n"
        "# TYPE caliper:decode_batch_size_max gauge\n"
        "caliper:decode_batch_size_max{model_name=\"%s\"} %lld\n"
        "# HELP caliper:decode_batch_size_sum Sum over decode steps of sequences decoded.\n"
        "# TYPE caliper:decode_batch_size_sum counter\n"
        "caliper:decode_batch_size_sum{model_name=\"%s\"} %lld\n"
        "# HELP caliper:decode_step_seconds Time of one engine step that decodes.\n"
        "# TYPE caliper:decode_step_seconds histogram\n",
        model, kv, model, kv, model, LD(m->requests_ok), model, LD(m->requests_aborted),
        model, LD(m->requests_rejected), model, LD(m->tokenize_requests), model,
        atomic_load_explicit(&m->encoding, memory_order_relaxed), model, LD(m->steps), model, LD(m->batch_max),
        model, LD(m->batch_sum));
    long long cum = 0;
    for (int i = 0; i <= CAL_SRV_STEP_BUCKETS; i++) {
        cum += LD(m->step_bucket[i]);
        if (i < CAL_SRV_STEP_BUCKETS)
            rc |= cal_buf_printf(b, "caliper:decode_step_seconds_bucket{model_name=\"%s\","
                                    "le=\"%g\"} %lld\n", model, STEP_LE[i], cum);
        else
            rc |= cal_buf_printf(b, "caliper:decode_step_seconds_bucket{model_name=\"%s\","
                                    "le=\"+Inf\"} %lld\n", model, cum);
    }
    rc |= cal_buf_printf(b,
        "caliper:decode_step_seconds_sum{model_name=\"%s\"} %.9f\n"
        "caliper:decode_step_seconds_count{model_name=\"%s\"} %lld\n",
        model, (double)LD(m->step_sum_ns) / 1e9, model, LD(m->step_count));
    if (m->pace) {
        rc |= cal_buf_printf(b,
            "# HELP caliper:pace_lateness_ms How late the pacer sent chunks against their "
            "schedule (arrival + N*(k+1) ms).\n"
            "# TYPE caliper:pace_lateness_ms summary\n"
            "caliper:pace_lateness_ms{quantile=\"0.5\"} %.3f\n"
            "caliper:pace_lateness_ms{quantile=\"0.99\"} %.3f\n"
            "caliper:pace_lateness_ms{quantile=\"1\"} %.3f\n"
            "caliper:pace_lateness_ms_count %lld\n",
            cal_srv_metrics_late_ms(m, 0.5), cal_srv_metrics_late_ms(m, 0.99),
            cal_srv_metrics_late_ms(m, 1.0), LD(m->late_n));
        /* the same samples as cumulative buckets, so a client can difference
         * two scrapes and get the lateness of its own run alone */
        static const double LE_MS[] = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000};
        rc |= cal_buf_printf(b,
            "# HELP caliper:pace_lateness_window_ms The pace lateness as a histogram (ms).\n"
            "# TYPE caliper:pace_lateness_window_ms histogram\n");
        long long lcum = 0;
        int bi = 0;
        for (size_t k = 0; k < sizeof LE_MS / sizeof LE_MS[0]; k++) {
            int upto = (int)(LE_MS[k] * 1e6 / CAL_SRV_LATE_BUCKET_NS);   /* buckets below le */
            for (; bi < upto && bi <= CAL_SRV_LATE_BUCKETS; bi++)
                lcum += atomic_load_explicit(&m->late_bucket[bi], memory_order_relaxed);
            rc |= cal_buf_printf(b, "caliper:pace_lateness_window_ms_bucket{le=\"%g\"} %lld\n",
                                 LE_MS[k], lcum);
        }
        rc |= cal_buf_printf(b, "caliper:pace_lateness_window_ms_bucket{le=\"+Inf\"} %lld\n"
                                "caliper:pace_lateness_window_ms_sum %.6f\n"
                                "caliper:pace_lateness_window_ms_count %lld\n",
                             LD(m->late_n), (double)LD(m->late_sum_ns) / 1e6, LD(m->late_n));
    }
    return rc ? CAL_ETOOBIG : CAL_OK;
}
