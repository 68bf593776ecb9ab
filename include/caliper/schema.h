/* caliper schema — the per-request quantities behind the summary numbers
 * (the series a statistic is taken over). */
#ifndef CALIPER_SCHEMA_H
#define CALIPER_SCHEMA_H

/* Sample series a summary statistic is taken over: per request (or per shot
 * for the aggregate), in the units the names carry. */
typedef enum cal_series {
    CAL_S_AGG_TOKS = 0,  /* per-shot aggregate output tok/s */
    CAL_S_REQ_TOKS,      /* per-request output tok/s (tokens ÷ own duration from send) */
    CAL_S_PREFILL_TOKS,  /* per-request prefill tok/s: prompt ÷ TTFT */
    CAL_S_DECODE_TOKS,   /* per-request decode tok/s: (out − 1) ÷ (last − first token) */
    CAL_S_TTFT_MS,       /* time to first token from the scheduled send, ms */
    CAL_S_ITL_MS,        /* inter-chunk gaps, ms */
    CAL_S_TPOT_MS,       /* (E2E − TTFT) ÷ (tokens − 1), ms */
    CAL_S_E2E_MS,        /* whole request from the scheduled send, ms */
    CAL_S__N
} cal_series;

#endif
