/* Fuzz target: the --rate patterns and the --slo bounds. Any string must
 * parse or fail with a message; whatever parses must print as text that
 * parses back to the same value, and its schedule must never go back in
 * time or past a year. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/arrivals.h"
#include "caliper/goodput.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 200) return 0;
    char s[201];
    memcpy(s, data, size);
    s[size] = '\0';
    char err[200], buf[160];
    cal_arrivals a;
    if (cal_arrivals_parse(s, &a, err, sizeof err) == 0) {
        double mean = cal_arrivals_mean_rate(&a);
        if (!(mean > 0) || !isfinite(mean) || mean > CAL_ARRIVALS_MAX_RATE) abort();
        cal_arrivals b;
        if (cal_arrivals_parse(cal_arrivals_format(&a, buf, sizeof buf), &b, err, sizeof err) != 0)
            abort();
        if (b.kind != a.kind || fabs(cal_arrivals_mean_rate(&b) - mean) > 1e-5 * mean) abort();
        cal_arrival_gen g;
        cal_arrival_gen_init(&g, &a, (uint64_t)size);
        int64_t prev = 0;
        for (int k = 0; k < 64; k++) {
            int64_t t = cal_arrival_next_ns(&g);
            if (t < prev || t > (int64_t)(367 * 86400.0 * 1e9)) abort();
            prev = t;
        }
    } else if (!err[0]) {
        abort();   /* a refusal always says why */
    }
    cal_slo slo;
    err[0] = '\0';
    if (cal_slo_parse(s, &slo, err, sizeof err) == 0) {
        if (!cal_slo_given(&slo)) abort();
        cal_slo back;
        if (cal_slo_parse(cal_slo_format(&slo, buf, sizeof buf), &back, err, sizeof err) != 0) abort();
        if (fabs(back.ttft_ms - slo.ttft_ms) > 1e-6 * slo.ttft_ms ||
            fabs(back.e2e_ms - slo.e2e_ms) > 1e-6 * slo.e2e_ms)
            abort();
    } else if (!err[0]) {
        abort();
    }
    return 0;
}
