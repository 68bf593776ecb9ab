/* Fuzz target: caliper gate's --fail specs and its paired statistics. Any
 * string either parses to bounds a gate can use (a metric with a better
 * direction, a bound in (0, 1), no metric twice), whose written-back specs
 * parse to the same bounds, or fails with a message; any bytes read as
 * doubles give a signed-rank result whose CI holds its estimate. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/gate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 512) return 0;
    char s[513];
    memcpy(s, data, size);
    s[size] = '\0';
    cal_gate_bound b[CAL_GATE_MAX_BOUNDS], c[CAL_GATE_MAX_BOUNDS];
    size_t n = 0, m = 0;
    char err[600] = "";
    if (cal_gate_parse_bounds(s, b, CAL_GATE_MAX_BOUNDS, &n, err, sizeof err) == 0) {
        for (size_t i = 0; i < n; i++) {
            if (cal_metric_get(b[i].metric)->better == CAL_BETTER_NONE) abort();
            if (!(b[i].bound > 0 && b[i].bound < 1)) abort();
            for (size_t j = 0; j < i; j++) if (b[j].metric == b[i].metric) abort();
            char spec[64];
            cal_gate_bound_spec(&b[i], spec, sizeof spec);
            if (cal_gate_parse_bounds(spec, c, 1, &m, err, sizeof err) || m != 1 ||
                c[0].metric != b[i].metric || fabs(c[0].bound - b[i].bound) > 1e-6 * b[i].bound)
                abort();
        }
    } else if (!err[0]) {
        abort();   /* a refusal always says why */
    }
    /* the bytes as doubles: the paired test never crashes, its CI holds its estimate */
    size_t nd = size / sizeof(double);
    if (nd > 64) nd = 64;
    double d[64];
    memcpy(d, data, nd * sizeof(double));
    static double scratch[5000];
    cal_gate_stat st;
    if (cal_gate_signed_rank(d, nd, 0.05, scratch, sizeof scratch / sizeof *scratch, &st) == 0 &&
        isfinite(st.est) && isfinite(st.lo) && isfinite(st.hi) && !(st.lo <= st.est && st.est <= st.hi))
        abort();
    if (!(st.p_up >= 0 && st.p_up <= 1 && st.p_down >= 0 && st.p_down <= 1)) abort();
    return 0;
}
