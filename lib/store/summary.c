/* The one typed field list of a cell's summary: it names the JSON keys, the
 * CSV headers and the cells table's columns, so every output agrees.
 * Names follow vLLM's bench JSON where the meaning is the same. */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "caliper/store.h"

#define I(n, u, d) { #n, CAL_FIELD_INT, offsetof(cal_summary, n), u, 0, d }
#define R(n, u, k, d) { #n, CAL_FIELD_REAL, offsetof(cal_summary, n), u, k, d }

const cal_field cal_summary_fields[] = {
    R(duration, "s", 3, "first send to last end of the cell"),
    I(completed, "", "requests that ended ok"),
    I(failed, "", "requests that did not end ok (all other statuses)"),
    I(n_http_error, "", "non-2xx answers"),
    I(n_timeout, "", "connect or idle timeouts"),
    I(n_connect_error, "", "could not connect"),
    I(n_stream_error, "", "truncated or malformed streams"),
    I(n_cancelled, "", "stopped by the user or the deadline"),
    I(total_input_tokens, "", "prompt tokens over ok requests"),
    I(total_output_tokens, "", "output tokens over ok requests"),
    I(output_len_mismatch, "", "ok requests whose output length differs from max_tokens under a fixed policy"),
    R(request_throughput, "req/s", 3, "completed ÷ duration"),
    R(output_throughput, "tok/s", 1, "aggregate: all output tokens ÷ the cell's wall clock"),
    R(per_request_output_throughput_median, "tok/s", 1, "per-request: median of each request's output tokens ÷ its own E2E"),
    R(mean_ttft_ms, "ms", 1, "time to first token, mean"),
    R(median_ttft_ms, "ms", 1, "time to first token, p50"),
    R(p95_ttft_ms, "ms", 1, "time to first token, p95"),
    R(p99_ttft_ms, "ms", 1, "time to first token, p99"),
    R(mean_tpot_ms, "ms", 2, "(E2E − TTFT) ÷ (output − 1), mean"),
    R(median_tpot_ms, "ms", 2, "(E2E − TTFT) ÷ (output − 1), p50"),
    R(p99_tpot_ms, "ms", 2, "(E2E − TTFT) ÷ (output − 1), p99"),
    R(mean_itl_ms, "ms", 2, "gap between consecutive content chunks, mean"),
    R(median_itl_ms, "ms", 2, "gap between consecutive content chunks, p50"),
    R(p99_itl_ms, "ms", 2, "gap between consecutive content chunks, p99"),
    R(mean_e2el_ms, "ms", 1, "end-to-end latency from the scheduled send, mean"),
    R(median_e2el_ms, "ms", 1, "end-to-end latency from the scheduled send, p50"),
    R(p99_e2el_ms, "ms", 1, "end-to-end latency from the scheduled send, p99"),
    R(prefill_tps_median, "tok/s", 1, "prompt tokens ÷ TTFT, median: a lower bound on prefill speed"),
    R(decode_tps_median, "tok/s", 1, "(output − 1) ÷ (last − first token), median"),
    R(server_decode_tps_median, "tok/s", 1, "decode speed from the server's own timings, median"),
    R(clock_mhz_mean, "MHz", 0, "mean clock over the cell (telemetry)"),
    R(power_w_mean, "W", 1, "mean power over the cell (telemetry)"),
    /* schema 2 */
    R(total_token_throughput, "tok/s", 1, "(input + output tokens of ok requests) ÷ duration"),
    R(std_ttft_ms, "ms", 1, "time to first token, sample standard deviation"),
    R(std_tpot_ms, "ms", 2, "(E2E − TTFT) ÷ (output − 1), sample standard deviation"),
    R(std_itl_ms, "ms", 2, "gap between consecutive content chunks, sample standard deviation"),
    R(std_e2el_ms, "ms", 1, "end-to-end latency, sample standard deviation"),
    /* schema 3 */
    R(clock_mhz_min, "MHz", 0, "lowest clock reading over the cell (telemetry)"),
    R(power_w_min, "W", 1, "lowest power reading over the cell (telemetry)"),
};
const size_t cal_summary_n_fields = sizeof cal_summary_fields / sizeof cal_summary_fields[0];

const cal_field *cal_summary_field(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < cal_summary_n_fields; i++)
        if (!strcmp(cal_summary_fields[i].name, name)) return &cal_summary_fields[i];
    return NULL;
}

double cal_summary_get(const cal_summary *s, const cal_field *f)
{
    const char *p = (const char *)s + f->offset;
    if (f->type == CAL_FIELD_INT) {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return (double)v;
    }
    double d;
    memcpy(&d, p, sizeof d);
    return d;
}

void cal_summary_init(cal_summary *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < cal_summary_n_fields; i++)
        if (cal_summary_fields[i].type == CAL_FIELD_REAL) {
            double nan = NAN;
            memcpy((char *)s + cal_summary_fields[i].offset, &nan, sizeof nan);
        }
}
