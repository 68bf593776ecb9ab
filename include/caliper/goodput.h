/* caliper goodput — requests per second that met every latency SLO
 * (`--slo ttft=500ms,tpot=50ms`), beside the throughput of all requests.
 * The SLO is part of a run's protocol: goodput under one SLO is never
 * divided by goodput under another. docs/load.md.
 *
 * Each bound is checked per request, with the summary's definitions
 * (SPEC 1.2; lib/protocol/summary.c): TTFT and E2E from the scheduled send,
 * TPOT = (E2E − TTFT) ÷ (output − 1) (measured from the first token), and
 * ITL as the p99 of that request's own chunk gaps. A request meets the SLO
 * when it ended ok and every bound given holds; TPOT and ITL bounds hold
 * trivially for a request with fewer than two tokens (chunks), which has
 * no decode to be slow. Plain data; nothing here allocates but the ITL
 * check (a scratch copy of one request's gaps). */
#ifndef CALIPER_GOODPUT_H
#define CALIPER_GOODPUT_H
#include <stddef.h>
#include "caliper/probe.h"

typedef struct cal_slo {
    double ttft_ms;        /* bound on TTFT, ms; 0 (or NAN): none */
    double itl_p99_ms;     /* bound on the request's own ITL p99, ms; 0: none */
    double tpot_ms;        /* bound on TPOT, ms; 0: none */
    double e2e_ms;         /* bound on E2E latency, ms; 0: none */
} cal_slo;                 /* zeroed: no SLO */

/* No bound at all (every field 0). */
void cal_slo_init(cal_slo *s);
/* 1 when at least one bound is given. */
int  cal_slo_given(const cal_slo *s);

/* Parse "ttft=500ms,tpot=50ms,itl=80ms,e2e=2s" (any of the four keys, each
 * once, in any order; times through the unit table, a bare number is ms).
 * CAL_OK, or CAL_EINVAL with a message naming the key and value in
 * err[errn] (err may be NULL); *out is left as it was on error. */
int  cal_slo_parse(const char *s, cal_slo *out, char *err, size_t errn);

/* The canonical text, keys in the order ttft, itl, tpot, e2e, each value in
 * ms: "ttft=500ms,tpot=50ms"; "" when no bound is given. Returns buf. */
char *cal_slo_format(const cal_slo *s, char *buf, size_t n);

/* Whether one request met every bound: 1 yes, 0 no (or it did not end ok),
 * -1 unknown (an ITL bound on a request whose chunk times were not kept,
 * or no memory for the check). */
int  cal_slo_met(const cal_slo *s, const cal_req_result *r);

/* Requests of r[0..n) that met the SLO into *met; CAL_OK, or CAL_EABSENT
 * when no bound is given or some request's answer is unknown (*met then
 * counts the known ones). */
int  cal_slo_count(const cal_slo *s, const cal_req_result *r, size_t n, size_t *met);

/* Goodput: the requests that met the SLO ÷ duration_s (the cell's wall
 * clock, the same one throughput divides by), req/s. NAN when no bound is
 * given, some answer is unknown, or duration_s is not positive. */
double cal_goodput(const cal_slo *s, const cal_req_result *r, size_t n, double duration_s);

#endif
