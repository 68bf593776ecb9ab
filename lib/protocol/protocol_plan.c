/* caliper — the protocol record of a plan (protocol_record.h): how a
 * cal_run_plan and its targets are recorded, the one mapping every writer
 * of a run uses (the run, the shards). Fields only: the stored keys are
 * the serializer's (lib/store/protocol_record.c). */
#include <stdio.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/judge.h"
#include "caliper/keep.h"
#include "caliper/protocol_record.h"
#include "caliper/run.h"
#include "caliper/saturation.h"

/* ---- from a plan -------------------------------------------------------- */

int cal_protocol_from_plan(const cal_run_plan *p, int n_sides, const char *scenario_json,
                           cal_protocol *out)
{
    if (!p || !out) return CAL_EINVAL;
    cal_protocol r;
    cal_protocol_init(&r);
    r.shots = p->shots;
    r.warmup = p->warmup;
    r.rest_s = p->rest_s;
    r.cold = !!p->cold;
    r.noise_floor = p->noise_floor > 0 ? p->noise_floor : CAL_SHOT_NOISE_FLOOR;
    r.equivalence = p->equivalence > 0 ? p->equivalence : CAL_JUDGE_EQUIV;
    for (size_t i = 0; i < p->n_conc && i < CAL_PROTO_LIST; i++) r.concurrency[r.n_conc++] = p->concurrency[i];
    r.rate = p->rate > 0 ? p->rate : 0;
    if (p->rate > 0) cal_arrivals_format(&p->pattern, r.arrivals, sizeof r.arrivals);
    cal_slo_format(&p->slo, r.slo, sizeof r.slo);
    if (r.slo[0])
        snprintf(r.goodput_rule, sizeof r.goodput_rule, "%s",
                 "goodput = requests that ended ok and met every bound (TTFT and E2E from the scheduled "
                 "send, TPOT, the request's own ITL p99) / the cell's duration");
    if (p->sweep) {
        cal_protocol_sweep *w = &r.sweep;
        w->present = 1;
        snprintf(w->kind, sizeof w->kind, "saturation");
        w->start_rate = p->rate;
        w->max_rate = p->sweep_max_rate;
        w->steps = p->sweep_steps;
        w->gain = CAL_SAT_GAIN;
        snprintf(w->rule, sizeof w->rule, "%s",
                 "rates rise geometrically from start to max; stop when goodput rose by less than gain "
                 "over each of the last two steps; knee: the first step within gain of the best goodput");
    }
    r.requests = p->requests > 0 ? p->requests : 0;
    r.duration_s = p->duration_s > 0 ? p->duration_s : 0;
    for (size_t i = 0; i < p->n_prompt && i < CAL_PROTO_LIST; i++) r.prompt_tokens[r.n_prompt++] = p->prompt_tokens[i];
    snprintf(r.content, sizeof r.content, "%s", cal_content_name(p->content));
    r.unique_prompts = !p->allow_prefix;
    r.max_tokens = p->max_tokens;
    snprintf(r.output_policy, sizeof r.output_policy, "%s", p->free_output ? "at most" : "fixed");
    r.streaming = 1;
    r.has_seed = 1;
    r.seed = p->seed;
    r.ab = n_sides == 2;
    snprintf(r.order, sizeof r.order, "%s", "each shot runs every prompt length x concurrency cell in turn");
    long long keep = p->keep_chunks == 0 ? CAL_KEEP_DEFAULT
                   : p->keep_chunks == CAL_RUN_KEEP_NONE ? 0
                   : p->keep_chunks < 0 ? CAL_KEEP_ALL : p->keep_chunks;
    cal_keep_name(keep, r.keep_chunks, sizeof r.keep_chunks);
    snprintf(r.percentile_source, sizeof r.percentile_source, "%s",
             "TTFT, TPOT and E2E from every request's record; ITL from raw chunk timestamps where "
             "each request kept them, else from the cell's log-linear histogram (relative error "
             "<= 0.78 %): cell_hists.itl_source says which");
    if (p->duration_s > 0)
        snprintf(r.duration_rule, sizeof r.duration_rule, "%s",
                 "a cell issues requests until its duration is up (in rounds sized from the rate so "
                 "far); requests in flight at the end are stored as cancelled");
    if (p->dataset) {
        cal_protocol_dataset *d = &r.dataset;
        d->present = 1;
        snprintf(d->name, sizeof d->name, "%s", p->dataset->name);
        snprintf(d->format, sizeof d->format, "%s", cal_ds_format_name(p->dataset->format));
        snprintf(d->sha256, sizeof d->sha256, "%s", p->dataset->sha256);
        cal_dataset_id(p->dataset, d->id, sizeof d->id);
        d->entries = (int64_t)p->dataset->n;
        d->skipped = (int64_t)p->dataset->skipped;
        snprintf(r.sampling, sizeof r.sampling, "%s", "seeded draw with replacement per request index");
    }
    if (p->prompt_len.kind != CAL_LEN_FIXED) cal_lendist_text(&p->prompt_len, r.prompt_len, sizeof r.prompt_len);
    if (p->output_len.kind != CAL_LEN_FIXED) cal_lendist_text(&p->output_len, r.output_len, sizeof r.output_len);
    if (scenario_json && (p->chat || p->replay_log)) {
        if (!(r.scenario_json = strdup(scenario_json))) return CAL_ENOMEM;
        snprintf(r.order, sizeof r.order, "%s",
                 "each shot runs the turns in order, one cell per turn index; a session's turn is "
                 "sent when its previous turn ended plus its think time");
    }
    /* the caller's keys (API, body, timeouts, the noise prior) go over the
     * plan's, as stored: written, merged, read back */
    int rc = cal_protocol_merge_json(&r, p->protocol_extra_json);
    if (rc == CAL_EINVAL)
        rc = CAL_OK;    /* not an object: nothing to merge, as before */
    if (rc) { cal_protocol_clear(&r); return rc; }
    *out = r;
    return CAL_OK;
}
