/* The run model: a shot series over one or two targets (SPEC 1.1–1.3).
 * Shots run warm-ups first, rest before each later shot, restart the
 * engine under --cold, and every cell of a shot in turn (run_cell.c; a
 * shot of turns: run_turns.c); each cell builds its prompts, sends them
 * through the target, is summarised, given its telemetry windows and
 * stored with every request. The run ends with its
 * status (ok, interrupted, failed) and verdicts, and is loaded back. */
#include "run_ctx.h"

void cal_run_target_free(cal_run_target **t)
{
    if (!t || !*t) return;
    if ((*t)->ops) {
        if ((*t)->ops->stop) (*t)->ops->stop((*t)->self);
        if ((*t)->ops->destroy) (*t)->ops->destroy((*t)->self);
    }
    free(*t);
    *t = NULL;
}

void cal_run_outcome_clear(cal_run_outcome *o)
{
    if (!o) return;
    cal_analysis_free(&o->analysis);
    cal_run_data_free(&o->data);
    memset(o, 0, sizeof *o);
}

static int count_many_with_target(void *ud, const char *const *texts, size_t n, int *counts)
{
    cal_run_target *t = ud;
    return t->ops->count_many(t->self, texts, n, counts);
}

static int ids_with_target(void *ud, const char *text, int32_t **ids, int *n)
{
    cal_run_target *t = ud;
    return t->ops->token_ids(t->self, text, ids, n);
}

static int start_side(ctx *c, side *s)
{
    char err[1000] = "";
    int rc = s->t->ops->start(s->t->self, c->stop, err, sizeof err);
    if (rc) {
        run_fail(c, "%s%starget: %s", s->name, s->name[0] ? " " : "", err[0] ? err : cal_strerror(rc));
        return rc;
    }
    s->started_ns = s->t->ops->started_ns ? s->t->ops->started_ns(s->t->self) : -1;
    s->fresh = 1;
    int pid = s->t->ops->pid ? s->t->ops->pid(s->t->self) : 0;
    if (c->tel && pid > 0) cal_tel_set_pid(c->tel, pid);
    return CAL_OK;
}

/* The prompts fall back to approximate lengths: say why, in the
 * tokenizer's own words where it has them ("timed out after 30 s with no
 * answer", not "connection failed"), once per side. A stopped run says
 * nothing here: it says it was interrupted. */
static void tokenizer_failed(ctx *c, side *s, int rc)
{
    if (rc == CAL_ECANCEL && run_stopped(c)) return;
    if (s->tk_noted) return;
    s->tk_noted = 1;
    const char *why = s->t->ops->tokenizer_why ? s->t->ops->tokenizer_why(s->t->self) : NULL;
    note(c, s->name, "the tokenizer of %s failed (%s): prompt lengths will be approximate",
         run_what(s), why ? why : cal_strerror(rc));
}

static int open_workloads(ctx *c, side *s)
{
    const cal_run_plan *p = &c->p;
    if (run_per_request(p) || run_turns_mode(p)) {
        int rc = cal_textgen_open(p->content, s->t->ops->count_tokens ? run_count_with_target : NULL,
                                  s->t, &s->tg);
        if (rc && rc != CAL_ENOMEM) {
            tokenizer_failed(c, s, rc);
            s->wl_failed[0] = 1;
            rc = cal_textgen_open(p->content, NULL, NULL, &s->tg);
        }
        if (rc) run_fail(c, "content: %s", cal_strerror(rc));
        return rc;
    }
    for (size_t i = 0; i < p->n_prompt; i++) {
        cal_workload_config wc = {.content = p->content, .prompt_tokens = p->prompt_tokens[i],
                                  .unique = !p->allow_prefix, .seed = p->seed,
                                  .count = s->t->ops->count_tokens ? run_count_with_target : NULL,
                                  .count_many = s->t->ops->count_many ? count_many_with_target : NULL,
                                  .token_ids = s->t->ops->token_ids ? ids_with_target : NULL,
                                  .count_ud = s->t};
        int rc = cal_workload_open(&wc, &s->wl[i]);
        if (rc && rc != CAL_ENOMEM && rc != CAL_EINVAL) {
            tokenizer_failed(c, s, rc);
            wc.count = NULL;
            wc.count_many = NULL;
            wc.token_ids = NULL;
            s->wl_failed[i] = 1;   /* the cells say so, not "no /tokenize" */
            rc = cal_workload_open(&wc, &s->wl[i]);
        }
        if (rc) {
            run_fail(c, "prompt_tokens: %d: %s", p->prompt_tokens[i], cal_strerror(rc));
            return rc;
        }
        int shortest = cal_workload_shortest_exact(s->wl[i]);
        if (p->prompt_tokens[i] < shortest)
            run_note_on(c, s->name, "prompt_tokens",
                    "%d is shorter than the unique nonce line each prompt starts with (%d "
                    "tokens here): those prompts are the nonce line alone, marked approximate; "
                    "the shortest exact length is %d (identical prompts, without the nonce, can be "
                    "shorter)",
                    p->prompt_tokens[i], shortest, shortest);
    }
    return CAL_OK;
}

/* ---- run-level JSON records -------------------------------------------- */
static char *target_json(ctx *c)
{
    json_t *arr = json_array();
    for (int i = 0; i < c->n_sides; i++) {
        side *s = &c->sides[i];
        char *d = s->t->ops->describe ? s->t->ops->describe(s->t->self) : NULL;
        json_t *t = d ? json_loads(d, 0, NULL) : NULL;
        free(d);
        if (!json_is_object(t)) {
            json_decref(t);
            t = json_object();
            json_object_set_new(t, "kind", json_string(s->t->ops->kind));
        }
        if (s->name[0]) json_object_set_new(t, "side", json_string(s->name));
        json_array_append_new(arr, t);
    }
    json_t *out;
    if (c->n_sides == 1) {
        out = json_incref(json_array_get(arr, 0));
    } else {
        out = json_deep_copy(json_array_get(arr, 0));
        json_object_set_new(out, "ab", json_incref(arr));
    }
    json_decref(arr);
    char *s = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return s;
}

/* The stored protocol: the plan as a record (protocol_record.h), written by
 * its one serializer. */
static char *protocol_json(ctx *c)
{
    const char *sc = run_turns_mode(&c->p) && c->sides[0].tr ? c->sides[0].tr->protocol_json : NULL;
    cal_protocol r;
    char *s = NULL;
    if (cal_protocol_from_plan(&c->p, c->n_sides, sc, &r) == CAL_OK) {
        cal_protocol_to_json(&r, &s, NULL);
        cal_protocol_clear(&r);
    }
    return s;
}

static char *telemetry_json(ctx *c)
{
    json_t *t = json_object(), *src = json_array();
    char summary[700] = "";
    if (!c->p.telemetry) {
        snprintf(summary, sizeof summary, "%s",
                 c->p.telemetry_off_why ? c->p.telemetry_off_why : "off: clock and power not sampled");
    } else if (!c->tel) {
        snprintf(summary, sizeof summary, "absent: the sampler could not start");
    } else {
        const cal_tel_backend_info *b;
        size_t nb = cal_tel_backends(c->tel, &b);
        char avail[256] = "";
        size_t off = 0;
        for (size_t i = 0; i < nb; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "backend", json_string(b[i].name));
            json_object_set_new(o, "present", json_boolean(b[i].available));
            json_object_set_new(o, "why", json_string(b[i].reason));
            json_array_append_new(src, o);
            if (b[i].available && off < sizeof avail)
                off += (size_t)snprintf(avail + off, sizeof avail - off, "%s%s", off ? ", " : "", b[i].name);
        }
        const char *power_why = NULL;
        for (size_t i = 0; i < nb && !power_why; i++)
            if (!strcmp(b[i].name, "rapl") && !b[i].available) power_why = b[i].reason;
        snprintf(summary, sizeof summary, "%s · clock: %s · power: %s%s%s", avail[0] ? avail : "no backend",
                 c->clock_metric[0] ? c->clock_metric : "absent",
                 c->power_metric[0] ? c->power_metric : "absent",
                 !c->power_metric[0] && power_why ? " — " : "",
                 !c->power_metric[0] && power_why ? power_why : "");
        json_object_set_new(t, "interval_s", json_real(cal_tel_interval_ns(c->tel) / 1e9));
    }
    json_object_set_new(t, "sources", src);
    json_object_set_new(t, "clock_metric", c->clock_metric[0] ? json_string(c->clock_metric) : json_null());
    json_object_set_new(t, "power_metric", c->power_metric[0] ? json_string(c->power_metric) : json_null());
    json_object_set_new(t, "summary", json_string(summary));
    char *s = json_dumps(t, JSON_COMPACT);
    json_decref(t);
    return s;
}

/* ---- the library's verdicts of a stored run ------------------------------ */
/* The run analysis's (analysis.h): shot series with the clock and power
 * checks of a drop, A/B pairs, failures, output length, the client. */
char *cal_run_verdicts(const cal_run_data *d) { return cal_analysis_verdicts_json(d); }

/* ---- the series --------------------------------------------------------- */
/* The plan's rules (plan.c), then the ones between the plan and the targets. */
static int check_plan(ctx *c)
{
    cal_plan_error pe;
    if (cal_plan_check(&c->p, &pe)) {
        char buf[600];
        run_fail(c, "%s", cal_plan_error_text(&pe, buf, sizeof buf));
        return CAL_EINVAL;
    }
    cal_run_plan_fill(&c->p);
    for (int i = 0; i < c->n_sides; i++) {
        const cal_run_target *t = c->sides[i].t;
        if (!t->ops || !t->ops->start || !t->ops->send) {
            run_fail(c, "target %d: its ops lack start or send", i);
            return CAL_EINVAL;
        }
        if (c->p.cold && !t->restartable) {
            run_fail(c, "cold: the target %s cannot be restarted fresh (a URL someone else runs)",
                 t->ops->what ? t->ops->what(t->self) : t->ops->kind);
            return CAL_EINVAL;
        }
    }
    return CAL_OK;
}

int cal_run_series(const cal_run_args *args, cal_run_outcome *out)
{
    if (!out) return CAL_EINVAL;
    memset(out, 0, sizeof *out);
    if (!args || !args->plan || !args->store || !args->targets[0]) {
        snprintf(out->message, sizeof out->message, "cal_run_series: plan, store and a target are needed");
        return CAL_EINVAL;
    }
    static volatile int never;
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = args;
    c.p = *args->plan;
    c.out = out;
    c.st = args->store;
    c.stop = args->stop ? args->stop : &never;
    c.n_sides = args->targets[1] ? 2 : 1;
    for (int i = 0; i < c.n_sides; i++) {
        c.sides[i].t = args->targets[i];
        c.sides[i].started_ns = -1;
        c.sides[i].offset = -1;
        c.sides[i].api = -1;
        if (c.n_sides == 2) snprintf(c.sides[i].name, sizeof c.sides[i].name, "%c", 'A' + i);
    }
    int rc = check_plan(&c);
    if (rc) return rc;
    const cal_run_plan *p = &c.p;
    cal_keep_init(&c.keep, run_keep_limit(p));

    if (p->telemetry) {
        cal_tel_config tc = {.interval_ns = cal_span_ns(p->interval_s > 0 ? p->interval_s : 0.25)};
        if (cal_tel_open(&c.tel, &tc) == CAL_OK) {
            cal_tel_tick(c.tel);
            if (cal_tel_pick_clock(c.tel, c.clock_metric, sizeof c.clock_metric)) c.clock_metric[0] = '\0';
            if (cal_tel_pick_power(c.tel, c.power_metric, sizeof c.power_metric)) c.power_metric[0] = '\0';
            cal_tel_start(c.tel);
        }
    }

    int result = CAL_OK;
    for (int i = 0; i < c.n_sides; i++)
        if (c.sides[i].t->ops->prepare) c.sides[i].t->ops->prepare(c.sides[i].t->self, p);
    for (int i = 0; i < c.n_sides; i++) {
        side *s = &c.sides[i];
        cal_run_event ev = {.kind = CAL_RUN_EV_STARTING, .side = s->name, .text = run_what(s),
                            .target_kind = s->t->ops->kind};
        run_emit(&c, &ev);
        rc = start_side(&c, s);
        if (rc) {
            result = run_stopped(&c) ? CAL_ECANCEL : rc == CAL_ECANCEL ? CAL_ECANCEL : CAL_EIO;
            goto cleanup;
        }
        rc = open_workloads(&c, s);
        if (rc) {
            result = rc;
            goto cleanup;
        }
    }

    if (run_turns_mode(p) && run_build_turns(&c, &c.sides[0], 1)) {
        result = CAL_EINVAL;
        goto cleanup;
    }
    char host_short[256];
    c.run.label = (char *)p->label;
    c.run.build = (char *)p->build;
    c.run.host_json = cal_host_json(host_short, sizeof host_short);
    c.run.target_json = target_json(&c);
    c.run.protocol_json = protocol_json(&c);
    c.run.telemetry_json = telemetry_json(&c);
    rc = cal_store_begin_run(c.st, &c.run);
    if (rc) {
        run_fail(&c, "cannot store the run: %s", cal_store_errmsg(c.st));
        c.run.id = 0;
        result = CAL_ESTORE;
        goto cleanup;
    }
    out->run_id = c.run.id;
    size_t ncl = p->rate > 0 ? (p->sweep ? (size_t)p->sweep_steps : 1) : p->n_conc;
    long total_shots = (long)p->shots + p->warmup;
    cal_run_event bev = {.kind = CAL_RUN_EV_BEGUN, .run_id = c.run.id, .total_shots = (int)total_shots,
                         .cells_per_shot = run_turns_mode(p) && c.sides[0].tr ? c.sides[0].tr->n_turns
                                                                         : (int)(p->n_prompt * ncl), .side = "",
                         .plan_warmup = p->warmup};
    run_emit(&c, &bev);

    /* a common start with the other clients of a sharded run */
    if (p->start_mono_ns > 0) {
        int64_t wait = p->start_mono_ns - cal_now_ns();
        if (wait < 0)
            note(&c, "", "the common start passed %.3f s before this client was ready: it "
                         "starts late", (double)-wait / 1e9);
        else
            cal_sleep_ns(wait, c.stop);
    }
    cal_cell_kind ckind = p->rate > 0 ? CAL_CELL_RATE
                          : p->n_conc > 1 ? CAL_CELL_CONCURRENCY
                          : p->n_prompt > 1 ? CAL_CELL_PROMPT_SWEEP : CAL_CELL_SHOTS;
    int64_t last_end = 0;
    for (long shot = 1; shot <= total_shots && !run_stopped(&c) && !c.target_failed; shot++) {
        for (int si = 0; si < c.n_sides && !run_stopped(&c) && !c.target_failed; si++) {
            /* A/B: alternate the order shot by shot so drift hits both */
            side *s = &c.sides[(c.n_sides == 2 && shot % 2 == 0) ? 1 - si : si];
            if (shot > 1 && p->cold) {
                s->t->ops->stop(s->t->self);
                if (start_side(&c, s)) {
                    c.target_failed = !run_stopped(&c);
                    break;
                }
            }
            int64_t rest_ns = 0;
            if (shot > 1 && si == 0 && p->rest_s > 0) {
                cal_run_event rev = {.kind = CAL_RUN_EV_REST, .side = s->name, .run_id = c.run.id,
                                     .shot = (int)shot, .seconds = p->rest_s};
                run_emit(&c, &rev);
                cal_sleep_ns(cal_span_ns(p->rest_s), c.stop);
                rest_ns = cal_now_ns() - last_end;
            } else if (shot > 1 && p->rest_s > 0) {
                rest_ns = cal_span_ns(p->rest_s);
            }
            if (run_stopped(&c)) break;
            cal_shot_kind kind;
            if (shot <= p->warmup) kind = CAL_SHOT_WARMUP;
            else if (s->fresh && s->t->fresh_on_start) kind = CAL_SHOT_COLD;
            else if (s->fresh) kind = CAL_SHOT_UNKNOWN;
            else if (rest_ns > 0) kind = CAL_SHOT_RESTED;
            else kind = CAL_SHOT_WARM;
            s->fresh = 0;
            if (run_turns_mode(p)) {
                /* shot 1 of side A was built before the run began (its
                 * scenario is in the protocol); every other is built now */
                if (!(shot == 1 && s == &c.sides[0] && s->tr) && run_build_turns(&c, s, (int)shot)) {
                    c.target_failed = 1;
                    break;
                }
                if (run_turns(&c, s, (int)shot, kind, rest_ns)) c.target_failed = 1;
                cal_traffic_free(&s->tr);
                last_end = cal_now_ns();
                continue;
            }
            for (size_t pi = 0; pi < p->n_prompt && !run_stopped(&c) && !c.target_failed; pi++) {
                /* a saturation sweep's steps are the rate cells, until
                 * goodput stops rising (saturation.h) */
                cal_sat sat;
                if (p->sweep) cal_sat_init(&sat, p->rate, p->sweep_max_rate, p->sweep_steps, NULL, 0);
                for (size_t ci = 0; ci < ncl && !run_stopped(&c) && !c.target_failed; ci++) {
                    int conc = p->rate > 0 ? (p->cap_given ? p->concurrency[0] : 0) : p->concurrency[ci];
                    double rate = p->rate;
                    if (p->sweep && !cal_sat_next(&sat, &rate)) break;
                    rc = run_cell(&c, s, pi, conc, rate, (int)shot, kind,
                                  ci == 0 && pi == 0 ? rest_ns : 0, ckind);
                    if (rc == CAL_ECANCEL) break;     /* stopped while preparing */
                    if (rc) {
                        c.target_failed = 1;
                        break;
                    }
                    if (p->sweep) cal_sat_record(&sat, c.last_goodput);
                }
                if (p->sweep && !run_stopped(&c) && !c.target_failed)
                    note(&c, s->name, "saturation sweep, %d tok: %s after %d step%s (%g to %g req/s)",
                         p->prompt_tokens[pi],
                         sat.saturated ? "goodput stopped rising" : "goodput did not level off by the last step",
                         sat.done, sat.done == 1 ? "" : "s", sat.rate[0], sat.rate[sat.done > 0 ? sat.done - 1 : 0]);
            }
            last_end = cal_now_ns();
        }
    }

    /* finish: load back what was stored, judge it, mark the run finished */
    if (c.tel) cal_tel_stop(c.tel);
    run_drain_telemetry(&c);
    out->status = run_stopped(&c) ? CAL_RUN_INTERRUPTED : c.target_failed ? CAL_RUN_FAILED : CAL_RUN_OK;
    if (out->status != CAL_RUN_FAILED) out->message[0] = '\0';
    cal_store_flush(c.st);
    cal_run_data *d = NULL;
    rc = cal_store_load_run(c.st, c.run.id, CAL_LOAD_CHUNKS, &d);
    char *verdicts = NULL;
    if (rc == CAL_OK) {
        char *vj = args->verdicts ? args->verdicts(args->verdicts_ud, d) : cal_run_verdicts(d);
        json_t *va = vj ? json_loads(vj, 0, NULL) : NULL;
        free(vj);
        if (!json_is_array(va)) { json_decref(va); va = json_array(); }
        if (run_turns_mode(p)) run_cache_notes(&c, va);
        if (c.itl_hist_cells) {     /* where the ITL figures came from, kept with the run */
            char kb[32], buf[400];
            cal_snprintf(buf, sizeof buf, "ITL percentiles in %d of the run's cells come from "
                         "histograms (within %.2f %%): keep_chunks %s kept no chunk timestamps for %lld "
                         "requests; TTFT, TPOT and E2E are from every request's record",
                         c.itl_hist_cells, CAL_HIST_REL_ERROR * 100,
                         cal_keep_name(run_keep_limit(p), kb, sizeof kb), (long long)c.chunks_dropped);
            json_array_append_new(va, json_string(buf));
        }
        if (c.target_failed && out->message[0]) {   /* why it failed: a note */
            cal_verdict nv;
            cal_verdict_init(&nv, CAL_VK_NOTE);
            snprintf(nv.text, sizeof nv.text, "%.*s", (int)sizeof nv.text - 1, out->message);
            char *nj = cal_verdicts_json(&nv, 1);
            json_t *na = nj ? json_loads(nj, 0, NULL) : NULL;
            free(nj);
            if (json_is_array(na)) json_array_extend(va, na);
            json_decref(na);
        }
        verdicts = json_dumps(va, JSON_COMPACT);
        json_decref(va);
    }
    if (cal_store_finish_run(c.st, c.run.id, out->status, verdicts)) {
        note(&c, "", "cannot mark run %lld finished: %s", (long long)c.run.id, cal_store_errmsg(c.st));
    }
    if (d) {
        d->run.status = out->status;
        free(d->run.verdicts_json);
        d->run.verdicts_json = verdicts;
        verdicts = NULL;
        /* a --duration deadline cuts the requests in flight at the end of
         * each cell: stored as cancelled, but not a failure */
        for (size_t i = 0; i < d->n_cells; i++)
            out->failed_requests += d->cells[i].sum.failed -
                                    (p->duration_s > 0 ? d->cells[i].sum.n_cancelled : 0);
        out->data = d;
        /* groups, pooled summaries and verdicts as data (stored ones included) */
        if (cal_analysis_run(d, &out->analysis) != CAL_OK) out->analysis = NULL;
    } else {
        note(&c, "", "cannot load run %lld back: %s", (long long)c.run.id, cal_store_errmsg(c.st));
    }
    free(verdicts);

cleanup:
    for (int i = 0; i < c.n_sides; i++) {
        side *s = &c.sides[i];
        for (size_t k = 0; k < MAX_LIST; k++) cal_workload_close(&s->wl[k]);
        cal_textgen_close(&s->tg);
        cal_traffic_free(&s->tr);
        if (s->t && s->t->ops && s->t->ops->stop) s->t->ops->stop(s->t->self);
    }
    cal_tel_close(&c.tel);
    cal_keep_destroy(&c.keep);
    free(c.run.host_json);
    free(c.run.target_json);
    free(c.run.protocol_json);
    free(c.run.telemetry_json);
    return result;
}
