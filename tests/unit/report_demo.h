/* Test fixture for the report and compare tests: a result built in memory
 * the way a run with shots, a concurrency sweep and a prompt-length sweep
 * stores it — shot 1 cold, shots 2–6 warm and slower while the clock and
 * power fall (SPEC 1.1), per-request samples per concurrency cell, and
 * prefill times on a line t = 40 ms + 0.9 ms/token. Deterministic. */
#ifndef CALIPER_TEST_REPORT_DEMO_H
#define CALIPER_TEST_REPORT_DEMO_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "caliper/report.h"

static uint64_t demo_rng = 88172645463325252ULL;
static double demo_u(void)   /* uniform [0,1) */
{
    demo_rng ^= demo_rng << 13; demo_rng ^= demo_rng >> 7; demo_rng ^= demo_rng << 17;
    return (double)(demo_rng >> 11) / 9007199254740992.0;
}

static void demo_fp(cal_fingerprint *fp, cal_shot_kind k, int first, int last, int conc, long prompt)
{
    cal_fp_init(fp);
    fp->shot_kind = k;
    fp->shot_first = first;
    fp->shot_last = last;
    fp->rest_s = 0;
    fp->warmup = 0;
    fp->concurrency = conc;
    fp->request_rate = 0;
    fp->prompt_tokens = prompt;
    cal_fp_set(fp->content, "prose");
    cal_fp_set(fp->output_policy, "fixed 64");
    fp->streaming = 1;
    cal_fp_set(fp->api, "completions");
    cal_fp_set(fp->probe, "caliper 0.1.0");
    cal_fp_set(fp->host, "AMD EPYC 7B13 (2 cores), 24 GiB");
}

/* speed scales every throughput (a faster engine: 1.1); with_clock adds clock
 * and power telemetry. */
static cal_result *demo_result(const char *label, double speed, int with_clock)
{
    cal_result *r = cal_result_new();
    if (!r) return NULL;
    demo_rng = 88172645463325252ULL;
    snprintf(r->id, sizeof r->id, "%s", label);
    snprintf(r->label, sizeof r->label, "%s", label);
    snprintf(r->target_name, sizeof r->target_name, "small");
    snprintf(r->target_version, sizeof r->target_version, "0.1.0");
    snprintf(r->target_url, sizeof r->target_url, "built-in engine");
    snprintf(r->host, sizeof r->host, "AMD EPYC 7B13 (2 cores), 24 GiB");
    snprintf(r->probe, sizeof r->probe, "caliper 0.1.0");
    snprintf(r->build, sizeof r->build, "caliper 0.1.0 (commit test, -O2)");
    snprintf(r->telemetry, sizeof r->telemetry, with_clock ? "cpufreq, rapl" : "process");
    r->created_unix = 1764400000;   /* 2025-11-29 */

    /* shots: cold 1 then warm 2–6, 4 s each with 0.5 s gaps; the warm ones slower */
    static const double SHOT[6] = {980, 939, 880, 881, 868, 872};
    double warm[5];
    for (int i = 0; i < 6; i++) {
        cal_shot s;
        cal_shot_init(&s);
        s.index = i + 1;
        s.kind = i == 0 ? CAL_SHOT_COLD : CAL_SHOT_WARM;
        s.t_s = 1.0 + i * 4.5;
        s.dur_s = 4.0;
        s.v[CAL_M_PREFILL_TOKS] = SHOT[i] * speed;   /* prefill shots, as in SPEC 1.1 */
        s.v[CAL_M_TTFT_P50] = 4096 / s.v[CAL_M_PREFILL_TOKS] * 1e3;
        s.v[CAL_M_CLOCK_MHZ] = with_clock ? (i == 0 ? 1296 : 1296 * SHOT[i] / 980) : NAN;
        s.v[CAL_M_POWER_W] = with_clock ? (i == 0 ? 41 : 27 + 3 * demo_u()) : NAN;
        cal_result_add_shot(r, &s);
        if (i) warm[i - 1] = s.v[CAL_M_PREFILL_TOKS];
    }
    if (with_clock)
        for (int k = 0; k <= 280; k++) {
            double t = k * 0.1;
            int shot = (int)((t - 1.0) / 4.5);
            double in_shot = t >= 1.0 && t - 1.0 - shot * 4.5 < 4.0 && shot < 6;
            double f = !in_shot ? 1300 : shot == 0 ? 1296 : 1296 * SHOT[shot] / 980;
            cal_tel_point p = {t, f + 8 * (demo_u() - 0.5), in_shot ? (shot == 0 ? 41 : 28) + 2 * demo_u() : 9 + demo_u()};
            cal_result_add_tel(r, &p);
        }
    demo_rng = 1442695040888963407ULL;   /* the same draws below, telemetry or not */
    cal_rcell *c = cal_result_add_cell(r, CAL_SWEEP_SHOTS);
    demo_fp(&c->fp, CAL_SHOT_COLD, 1, 1, 1, 4096);
    r->shots_fp = c->fp;
    c->v[CAL_M_PREFILL_TOKS] = SHOT[0] * speed;
    c->v[CAL_M_DECODE_TOKS] = 61.5 * speed;
    c->v[CAL_M_COMPLETED] = 1; c->v[CAL_M_FAILED] = 0;
    c = cal_result_add_cell(r, CAL_SWEEP_SHOTS);
    demo_fp(&c->fp, CAL_SHOT_WARM, 2, 6, 1, 4096);
    cal_cell_set_samples(c, CAL_S_PREFILL_TOKS, warm, 5);
    c->v[CAL_M_DECODE_TOKS] = 61.0 * speed;
    c->v[CAL_M_COMPLETED] = 5; c->v[CAL_M_FAILED] = 0;
    cal_cell_fill_from_samples(c);

    /* concurrency sweep: 1, 2, 4, 8 with per-request samples */
    static const int CONC[4] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        int cc = CONC[k], n = 24;
        c = cal_result_add_cell(r, CAL_SWEEP_CONCURRENCY);
        demo_fp(&c->fp, CAL_SHOT_WARM, 2, 4, cc, 512);
        double req[24], ttft[24], e2e[24], itl[24 * 16];
        size_t ni = 0;
        for (int i = 0; i < n; i++) {
            double per = 58.0 * speed / (1 + 0.18 * (cc - 1)) * (0.95 + 0.1 * demo_u());
            req[i] = per;
            ttft[i] = (520 + 60 * (cc - 1)) * (0.9 + 0.3 * demo_u()) / speed;
            e2e[i] = ttft[i] + 63 / per * 1e3;
            for (int j = 0; j < 16; j++) itl[ni++] = 1e3 / per * (0.8 + 0.4 * demo_u() + (j == 7 ? 1.5 : 0));
        }
        cal_cell_set_samples(c, CAL_S_REQ_TOKS, req, (size_t)n);
        cal_cell_set_samples(c, CAL_S_TTFT_MS, ttft, (size_t)n);
        cal_cell_set_samples(c, CAL_S_E2E_MS, e2e, (size_t)n);
        cal_cell_set_samples(c, CAL_S_ITL_MS, itl, ni);
        cal_cell_fill_from_samples(c);
        c->v[CAL_M_AGG_TOKS] = c->v[CAL_M_REQ_TOKS] * cc * (cc == 1 ? 0.9 : 0.97);
        c->v[CAL_M_COMPLETED] = n; c->v[CAL_M_FAILED] = 0;
        c->v[CAL_M_DURATION] = 12.0;
    }
    /* prompt-length sweep: t = 40 ms + 0.9 ms/token, a little noise */
    static const long PROMPT[4] = {128, 512, 1024, 2048};
    for (int k = 0; k < 4; k++) {
        c = cal_result_add_cell(r, CAL_SWEEP_PROMPT);
        demo_fp(&c->fp, CAL_SHOT_WARM, 2, 4, 1, PROMPT[k]);
        double t = (40 + 0.9 * PROMPT[k]) / speed * (0.98 + 0.04 * demo_u());
        c->v[CAL_M_TTFT_P50] = t;
        c->v[CAL_M_PREFILL_TOKS] = PROMPT[k] / t * 1e3;
        c->v[CAL_M_COMPLETED] = 8; c->v[CAL_M_FAILED] = 0;
    }
    return r;
}

#endif
