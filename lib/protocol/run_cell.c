/* caliper — one cell of a run: its prompts drawn or built, sent through the
 * target by the probe, summarised, given its telemetry windows and stored
 * with every request (run_ctx.h). */
#include "run_ctx.h"

/* ---- one cell ----------------------------------------------------------- */

void run_on_progress(void *ud, size_t done, size_t total)
{
    prog *g = ud;
    (void)total;
    cal_run_event ev = {.kind = CAL_RUN_EV_PROGRESS, .side = g->side, .label = g->c->label,
                        .run_id = g->c->run.id, .shot = g->shot, .done = g->base + done,
                        .total = g->total};
    run_emit(g->c, &ev);
}

/* A request ended (a target's on_end, on its thread): fold it into the
 * cell's histograms under the chunk budget, and free its prompt, which went
 * out with it, so a long cell holds records rather than prompts. */
typedef struct ended { cal_keep *keep; cal_req_result *res; char **prompts; } ended;
static void on_end(void *ud, size_t index, cal_req_result *r)
{
    ended *e = ud;
    cal_keep_fold(e->keep, r);
    free(e->prompts[index]);
    e->prompts[index] = NULL;
}

/* Grow the cell's arrays to hold cap requests (built: each prompt's count
 * by /tokenize, -1 unknown). */
static int grow(cal_request **reqs, cal_req_result **res, char ***prompts, int **built,
                size_t *cap, size_t want)
{
    if (want <= *cap) return CAL_OK;
    int *b = realloc(*built, want * sizeof *b);
    if (!b) return CAL_ENOMEM;
    *built = b;
    for (size_t i = *cap; i < want; i++) b[i] = -1;
    cal_request *r = realloc(*reqs, want * sizeof *r);
    if (!r) return CAL_ENOMEM;
    *reqs = r;
    cal_req_result *x = realloc(*res, want * sizeof *x);
    if (!x) return CAL_ENOMEM;
    *res = x;
    char **pr = realloc(*prompts, want * sizeof *pr);
    if (!pr) return CAL_ENOMEM;
    *prompts = pr;
    memset(*reqs + *cap, 0, (want - *cap) * sizeof **reqs);
    memset(*res + *cap, 0, (want - *cap) * sizeof **res);
    memset(*prompts + *cap, 0, (want - *cap) * sizeof **prompts);
    *cap = want;
    return CAL_OK;
}

/* The fields every cell of a shot fills alike: which shot, its kind, the
 * rest before it, the engine's age, its requests and the probe's check. */
void run_cell_shot(cal_cell *cell, const side *s, int shot, cal_shot_kind kind, int64_t rest_ns,
                      size_t n, const cal_probe_stats *ps)
{
    cell->shot_index = shot;
    cell->shot_kind = kind;
    cell->rest_before_ns = rest_ns;
    cell->process_age_ns = s->started_ns > 0 ? cell->start_ns - s->started_ns : -1;
    cell->n_requests = (int64_t)n;
    cell->cpu_ns = ps->cpu_ns;
    cell->chunks = ps->chunks;
    cell->send_lag_p99_ms = ps->send_lag_p99_ms;
}

/* Summarise a cell's requests, give it its telemetry windows, store it
 * with them, tell the observer, and notice a target that died. */
int run_store_cell(ctx *c, side *s, cal_cell *cell, cal_req_result *res, size_t kept,
                      const cal_probe_stats *ps, int shot)
{
    /* the cell's histograms: filled as its requests ended (run_cell, under
     * the chunk budget), or here from the results (the turns of a chat or
     * a replay, cells of a few requests) */
    cal_cell_hists *hists = c->keep.cell, *own = NULL;
    if (!hists) {
        if (!(hists = own = malloc(sizeof *own))) return CAL_ENOMEM;
        cal_cell_hists_init(own);
        for (size_t i = 0; i < kept; i++) cal_cell_hists_add(own, &res[i]);
    }
    /* a cache cannot serve more of a prompt than the prompt: such a count
     * is as implausible as a negative one, and kept as unknown */
    int64_t bad_cache = 0;
    for (size_t i = 0; i < kept; i++)
        if (res[i].cached_tokens >= 0 && res[i].prompt_tokens >= 0 &&
            res[i].cached_tokens > res[i].prompt_tokens) {
            res[i].cached_tokens = -1;
            bad_cache++;
        }
    if (bad_cache)
        note(c, s->name, "%s: %lld requests reported more cached tokens than their prompt's: "
                         "stored as unknown", c->label, (long long)bad_cache);
    cal_summary_compute(res, kept, 0, cell->output_fixed ? cell->max_tokens : 0, &cell->sum);
    if (ps->implausible)   /* the server said something absurd: kept as unknown, said here */
        note(c, s->name, "%s: %lld server usage or timings values lay outside a plausible range "
                         "and were stored as unknown", c->label, (long long)ps->implausible);
    const char *itl_source = cal_keep_summary(hists, res, kept, &cell->sum);
    cell->sum.goodput = cal_goodput(&c->p.slo, res, kept, cell->sum.duration);
    c->last_goodput = cell->sum.goodput;
    run_tel_window(c, c->clock_metric, cell->start_ns, cell->end_ns, &cell->sum.clock_mhz_mean,
               &cell->sum.clock_mhz_min);
    run_tel_window(c, c->power_metric, cell->start_ns, cell->end_ns, &cell->sum.power_w_mean,
               &cell->sum.power_w_min);
    int src = cal_store_add_cell(c->st, c->run.id, cell, res, kept);
    if (src) {
        free(own);
        run_fail(c, "storing the cell: %s", cal_store_errmsg(c->st));
        return src;
    }
    src = cal_store_add_cell_hists(c->st, cell->id, hists, itl_source);
    int64_t dropped = hists->chunks_dropped;
    free(own);
    if (src) {
        run_fail(c, "storing the cell's histograms: %s", cal_store_errmsg(c->st));
        return src;
    }
    if (strcmp(itl_source, "raw")) c->itl_hist_cells++;
    c->chunks_dropped += dropped;
    if (dropped)
        note(c, s->name, "%s: ITL percentiles from histograms (within %.2f %%): the chunk "
                         "timestamps of %lld requests were not kept (the keep_chunks budget)",
             c->label, CAL_HIST_REL_ERROR * 100, (long long)dropped);
    run_drain_telemetry(c);
    cal_run_event done = {.kind = CAL_RUN_EV_CELL, .side = s->name, .label = c->label,
                          .run_id = c->run.id, .shot = shot, .cell = cell};
    run_emit(c, &done);
    /* a target that died is reported, not waited on */
    int alive = s->t->ops->alive ? s->t->ops->alive(s->t->self) : 1;
    if (!run_stopped(c) && kept > 0 &&
        (!alive || (cell->sum.completed == 0 &&
                    cell->sum.n_connect_error + cell->sum.n_stream_error + cell->sum.n_timeout +
                    cell->sum.n_http_error > 0))) {
        c->target_failed = 1;
        char tail[400] = "";
        if (s->t->ops->why_failed) s->t->ops->why_failed(s->t->self, tail, sizeof tail);
        /* say what it sent: a target that answers malformed streams has not
         * stopped answering */
        char said[400];
        cal_probe_failure_summary(ps, said, sizeof said);
        run_fail(c, "%s%sthe target %s during shot %d (%s)%s%s%s%s", s->name, s->name[0] ? " " : "",
             !alive ? "exited"
             : ps->n_status[CAL_REQ_CONNECT_ERROR] + ps->n_status[CAL_REQ_TIMEOUT] > 0
                 ? "stopped answering" : "answered with errors",
             shot, run_what(s), said[0] ? ": " : "", said, tail[0] ? "; its log ends: " : "", tail);
    }
    return CAL_OK;
}

/* Request number index of a per-request cell: a dataset entry or a prompt
 * of a drawn length (after the nonce line unless prefixes may repeat), and
 * its output length. The draws come from the seed and the index alone. */
static int draw_prompt(ctx *c, side *s, uint64_t index, char **out, int *max_tokens)
{
    const cal_run_plan *p = &c->p;
    uint64_t rng = p->seed ^ (index * 0x9e3779b97f4a7c15ULL) ^ 0x6c656e73ULL;
    char nl[10] = "";
    if (!p->allow_prefix) cal_traffic_nonce_(p->seed ^ (index * 0xd1b54a32d192ed03ULL), nl);
    size_t len = strlen(nl);
    char *pr = strdup(nl);
    if (!pr) return CAL_ENOMEM;
    int n, rc = CAL_OK;
    const cal_ds_entry *e = p->dataset ? &p->dataset->e[cal_dataset_pick(p->dataset, p->seed, index)] : NULL;
    if (e && e->text) {
        char *q = realloc(pr, len + strlen(e->text) + 1);
        if (!q) { free(pr); return CAL_ENOMEM; }
        pr = q;
        memcpy(pr + len, e->text, strlen(e->text) + 1);
    } else {
        int want = e && e->prompt_tokens > 0 && p->prompt_len.kind != CAL_LEN_UNIFORM &&
                           p->prompt_len.kind != CAL_LEN_NORMAL
                       ? e->prompt_tokens
                   : p->prompt_len.kind == CAL_LEN_FIXED ? p->prompt_tokens[0]
                                                          : cal_lendist_draw(&p->prompt_len, &rng);
        if (want < 1) want = 1;
        int base = 0;
        if (len) rc = cal_textgen_count(s->tg, pr, &base);
        /* the drawn length is the whole prompt's, nonce line included */
        if (base > 0) want = want - base > 1 ? want - base : 1;
        if (!rc) rc = cal_textgen_append(s->tg, &pr, &len, base, want, (index * 7919) % 4096, &n);
    }
    if (rc) { free(pr); return rc; }
    if (p->output_len.kind == CAL_LEN_DATASET && e) {
        *max_tokens = e->output_tokens > 0 ? e->output_tokens
                      : e->output_chars > 0
                          ? (int)ceil(e->output_chars / cal_textgen_chars_per_token(s->tg))
                          : p->max_tokens;
    } else if (p->output_len.kind == CAL_LEN_UNIFORM || p->output_len.kind == CAL_LEN_NORMAL) {
        *max_tokens = cal_lendist_draw(&p->output_len, &rng);
    } else {
        *max_tokens = p->max_tokens;
    }
    if (*max_tokens < 1) *max_tokens = 1;
    *out = pr;
    return CAL_OK;
}

/* rate: the cell's offered rate, req/s (0: closed loop); a saturation
 * sweep's step, else the plan's. */
int run_cell(ctx *c, side *s, size_t pi, int conc, double rate, int shot,
                    cal_shot_kind kind, int64_t rest_ns, cal_cell_kind ckind)
{
    const cal_run_plan *p = &c->p;
    int closed = !(rate > 0);
    /* the arrival pattern: Poisson arrivals are drawn by the target (the
     * probe's seeded draw); a ramp or bursts are stamped here, each
     * request's sched_ns from the pattern's seeded generator */
    cal_arrivals pat = p->pattern;
    if (pat.kind == CAL_ARR_POISSON) pat.rate = rate;
    int stamped = !closed && pat.kind != CAL_ARR_POISSON;
    cal_arrival_gen gen;
    cal_arrival_gen_init(&gen, &pat, p->seed + (uint64_t)c->seq * 7919);
    size_t n = (size_t)(p->requests ? p->requests : (conc * 2 > 8 ? conc * 2 : 8));
    if (!closed && !p->requests) n = cal_arrivals_default_n(&pat);
    if (p->duration_s > 0) {
        /* the first round; later rounds are sized from the rate it shows */
        double est = !closed ? cal_arrivals_expected(&pat, p->duration_s) * 1.5 + 16 : (double)conc * 64;
        n = (size_t)fmin((double)CAL_RUN_MAX_CELL_REQUESTS, est);
    }
    cal_request *reqs = NULL;
    cal_req_result *res = NULL;
    char **prompts = NULL;
    int *built = NULL;
    size_t cap = 0, total = 0;
    cal_cell_hists *hists = malloc(sizeof *hists);
    if (!hists) return CAL_ENOMEM;
    cal_keep_begin(&c->keep, hists);
    int rc = grow(&reqs, &res, &prompts, &built, &cap, n);
    if (rc) goto out;
    char load_s[48];
    if (stamped) cal_arrivals_format(&pat, load_s, sizeof load_s);
    else if (!closed) cal_snprintf(load_s, sizeof load_s, "rate %g", rate);
    else snprintf(load_s, sizeof load_s, "c%d", conc);
    char len_s[48];
    if (p->dataset) snprintf(len_s, sizeof len_s, "dataset");
    else if (run_per_request(p)) cal_lendist_text(&p->prompt_len, len_s, sizeof len_s);
    else snprintf(len_s, sizeof len_s, "%d", p->prompt_tokens[pi]);
    snprintf(c->label, sizeof c->label, "%s%sshot %d · %s · %s tok", s->name,
             s->name[0] ? " · " : "", shot, load_s, len_s);
    cal_run_event ev = {.kind = CAL_RUN_EV_PREPARING, .side = s->name, .label = c->label,
                        .run_id = c->run.id, .shot = shot};
    run_emit(c, &ev);

    cal_load load = {.concurrency = closed ? conc : (p->cap_given ? conc : 0),
                     .rate = closed ? 0 : cal_arrivals_mean_rate(&pat),
                     .seed = p->seed + (uint64_t)c->seq * 7919};
    ended en = {.keep = &c->keep};
    cal_cell cell;
    memset(&cell, 0, sizeof cell);
    cal_probe_stats ps;
    memset(&ps, 0, sizeof ps);
    ps.first_fail = -1;
    int64_t deadline = 0, prep_ns = 0;
    size_t prepared = 0;
    int round = 0, loops_noted = 0;
    for (;;) {
        /* prompts for this round (a later round stops preparing when the
         * time is up, and sends what it has) */
        int64_t prep0 = cal_now_ns();
        /* the round's prompts at once: a few tokenizer calls, not one each */
        if (!run_per_request(p) && !deadline &&
            (rc = cal_workload_prepare(s->wl[pi], c->nonce, n))) {
            if (rc == CAL_ECANCEL && run_stopped(c)) goto out;   /* Ctrl-C: interrupted */
            const char *why = s->t->ops->tokenizer_why ? s->t->ops->tokenizer_why(s->t->self)
                                                       : NULL;
            run_fail(c, "%s%scounting the tokens of the prompts through the target %s failed: %s%s",
                 s->name, s->name[0] ? " " : "", run_what(s), why ? why : cal_strerror(rc),
                 rc == CAL_ECONNECT ? " (the target stopped answering)" : "");
            goto out;
        }
        for (size_t i = total; i < total + n; i++) {
            int ntok;
            if (run_stopped(c)) { rc = CAL_ECANCEL; goto out; }
            /* progress on what takes over a second (prompts counted one by one) */
            if ((i - total) % 64 == 0 && cal_now_ns() - prep0 > 1000000000) {
                cal_run_event pe = {.kind = CAL_RUN_EV_PREPARING, .side = s->name, .label = c->label,
                                    .run_id = c->run.id, .shot = shot, .done = i - total, .total = n};
                run_emit(c, &pe);
            }
            if (deadline && (i - total) % 64 == 0 && cal_now_ns() >= deadline) {
                n = i - total;
                break;
            }
            reqs[i].max_tokens = p->max_tokens;
            ntok = -1;
            if (run_per_request(p)) rc = draw_prompt(c, s, c->nonce++, &prompts[i], &reqs[i].max_tokens);
            else rc = cal_workload_prompt(s->wl[pi], c->nonce++, &prompts[i], &ntok);
            built[i] = ntok;
            if (rc) {
                run_fail(c, "%s%scounting the tokens of prompt %zu through the target %s failed: %s%s",
                     s->name, s->name[0] ? " " : "", i, run_what(s), cal_strerror(rc),
                     rc == CAL_ECONNECT ? " (the target stopped answering)" : "");
                goto out;
            }
            reqs[i].prompt = prompts[i];
        }
        if (round == 0) {
            cell.start_ns = cal_now_ns();
            cell.start_wall_ns = cal_wall_ns();
            if (p->duration_s > 0) deadline = cell.start_ns + cal_span_ns(p->duration_s);
        }
        prep_ns += cal_now_ns() - prep0;
        if (!run_per_request(p) && cal_workload_note(s->wl[pi]) && !s->wl_noted[pi]) {
            s->wl_noted[pi] = 1;
            run_note_on(c, s->name, "prompt_tokens", "%d: %s", p->prompt_tokens[pi],
                    cal_workload_note(s->wl[pi]));
        }
        prepared += n;
        if (n == 0) break;
        load.deadline_ns = deadline;
        if (stamped) {
            /* the pattern's clock runs from the cell's first send; a later
             * round resumes it where it was (the drain between rounds is
             * not part of the pattern) */
            int64_t base = 0;
            for (size_t i = total; i < total + n; i++) {
                int64_t off = cal_arrival_next_ns(&gen);
                if (i == total) base = cal_now_ns() - (round ? off : 0);
                reqs[i].sched_ns = base + off;
            }
        }
        load.seed = p->seed + (uint64_t)c->seq * 7919 + (uint64_t)round * 104729;
        cal_probe_stats rs;
        memset(&rs, 0, sizeof rs);
        prog g = {.c = c, .side = s->name, .shot = shot, .base = total,
                  .total = p->duration_s > 0 ? 0 : n};
        en.res = res;                  /* stable while the round is sent */
        en.prompts = prompts;
        load.on_end = on_end;
        load.on_end_ud = &en;
        int64_t calls0 = c->keep.calls;
        rc = s->t->ops->send(s->t->self, reqs + total, n, &load, res + total, c->stop,
                             run_on_progress, &g, &rs);
        /* a target that does not call on_end is folded here, after the fact */
        if (c->keep.calls == calls0)
            for (size_t i = total; i < total + n; i++) cal_keep_fold(&c->keep, &res[i]);
        total += n;
        ps.cpu_ns += rs.cpu_ns;
        ps.chunks += rs.chunks;
        ps.implausible += rs.implausible;
        if (rs.send_lag_p99_ms > ps.send_lag_p99_ms) ps.send_lag_p99_ms = rs.send_lag_p99_ms;
        if (rs.n_loops > 0 && rs.saturated_loop >= 0 && !loops_noted) {   /* the client self-check, once a cell */
            char ls[900];
            cal_probe_loops_summary(&rs, ls, sizeof ls);
            loops_noted = 1;
            note(c, s->name, "client self-check, concurrency %d: %s", conc, ls);
        }
        /* the opening wave late by more than the self-check's 5 ms: say so
         * (its requests' sched_ns and send_ns are stored; unknown stays quiet) */
        if (round == 0 && rs.first_wave > 0 && isfinite(rs.first_lag_p99_ms) && rs.first_lag_p99_ms > 5)
            note(c, s->name, "client self-check, concurrency %d: first wave of %d requests sent "
                 "late by p50 %.2f ms, p99 %.2f ms (%d connections opened ahead in %.0f ms)",
                 conc, rs.first_wave, rs.first_lag_p50_ms, rs.first_lag_p99_ms, rs.connected_ahead,
                 (double)rs.prepare_ns / 1e6);
        for (int k = 0; k < CAL_REQ_N_STATUS; k++) ps.n_status[k] += rs.n_status[k];
        if (ps.first_fail < 0 && rs.first_fail >= 0) {
            ps.first_fail = (int)(total - n) + rs.first_fail;
            memcpy(ps.first_fail_msg, rs.first_fail_msg, sizeof ps.first_fail_msg);
        }
        round++;
        if (rc && rc != CAL_ECANCEL) {
            run_fail(c, "%s: %s", s->t->ops->kind, cal_strerror(rc));
            cell.end_ns = cal_now_ns();
            goto out;
        }
        int64_t now = cal_now_ns();
        if (!deadline || rc == CAL_ECANCEL || run_stopped(c) || now >= deadline) break;
        /* --duration: every request ended before the time was up. Another
         * round, sized from the rate so far with a margin, so the cell
         * runs for its whole duration (at most one drain per round). */
        size_t ended_ok = 0;
        for (size_t i = 0; i < total; i++) ended_ok += res[i].status == CAL_REQ_OK;
        if (ended_ok == 0) break;   /* nothing succeeds: do not spin */
        if (total >= (size_t)CAL_RUN_MAX_CELL_REQUESTS) {
            note(c, s->name, "%s: run_stopped at %zu requests (the cap of one cell) %.1f s before "
                             "its duration", c->label, total, (double)(deadline - now) / 1e9);
            break;
        }
        /* the rate so far with a margin, but at most doubling the cell, so
         * preparing the prompts of a round never eats the time it is for */
        double per_s = (double)total / ((double)(now - cell.start_ns) / 1e9);
        double want = per_s * (double)(deadline - now) / 1e9 * 1.25 + 2.0 * (conc > 0 ? conc : 1);
        if (want > (double)total) want = (double)total;
        /* and small enough that building its prompts takes at most 2 % of
         * the time left (the gap between rounds stays small) */
        double prep_per = prepared ? (double)prep_ns / (double)prepared : 0;
        if (prep_per > 0 && want > 0.02 * (double)(deadline - now) / prep_per)
            want = 0.02 * (double)(deadline - now) / prep_per;
        if (want < (conc > 0 ? conc : 8)) want = conc > 0 ? conc : 8;
        if (want > (double)(CAL_RUN_MAX_CELL_REQUESTS - total))
            want = (double)(CAL_RUN_MAX_CELL_REQUESTS - total);
        n = (size_t)want;
        rc = grow(&reqs, &res, &prompts, &built, &cap, total + n);
        if (rc) goto out;
    }
    cell.end_ns = cal_now_ns();
    /* a duration cell: requests never sent were never part of it */
    size_t kept = total;
    if (p->duration_s > 0 && !run_stopped(c)) {
        kept = 0;
        for (size_t i = 0; i < total; i++) {
            if (res[i].status == CAL_REQ_CANCELLED && res[i].send_ns == 0) {
                cal_req_result_free(&res[i]);
                continue;
            }
            if (kept != i) {
                res[kept] = res[i];
                memset(&res[i], 0, sizeof res[i]);
                built[kept] = built[i];
            }
            kept++;
        }
    }
    cell.seq = c->seq++;
    cell.kind = ckind;
    snprintf(cell.target, sizeof cell.target, "%s", s->name);
    cell.concurrency = load.concurrency;
    cell.rate = closed ? 0 : cal_arrivals_mean_rate(&pat);
    cell.prompt_offset = -1;
    if (run_per_request(p)) {
        /* mixed lengths: the requests carry their own; the cell says "mixed" (0) */
        int fixed = p->prompt_len.kind == CAL_LEN_FIXED && !p->dataset;
        cell.prompt_tokens = fixed ? p->prompt_tokens[0] : 0;
        cell.prompt_exact = 0;
        /* why it is not one exact length, truly: one length a request, or
         * one length cut at the content's characters per token */
        cell.prompt_basis = !fixed ? CAL_PROMPT_MIXED
                            : s->wl_failed[0] ? CAL_PROMPT_TOKENIZER_FAILED
                            : cal_textgen_counting(s->tg) ? CAL_PROMPT_ESTIMATED
                                                          : CAL_PROMPT_NO_TOKENIZE;
        snprintf(cell.content, sizeof cell.content, "%s", p->dataset ? "dataset" : cal_content_name(p->content));
        int same = 1;
        for (size_t i = 1; i < kept && same; i++) same = reqs[i].max_tokens == reqs[0].max_tokens;
        cell.max_tokens = same && kept ? reqs[0].max_tokens : 0;
        cell.output_fixed = !p->free_output && same;
    } else {
        cell.prompt_tokens = p->prompt_tokens[pi];
        cell.prompt_exact = cal_workload_exact(s->wl[pi]);
        /* why the length is what it is; an exact one the server checks */
        int shortest = cal_workload_shortest_exact(s->wl[pi]);
        cell.prompt_basis = cell.prompt_exact ? CAL_PROMPT_CONFIRMED
                            : s->wl_failed[pi] ? CAL_PROMPT_TOKENIZER_FAILED
                            : shortest == 0 ? CAL_PROMPT_NO_TOKENIZE
                            : p->prompt_tokens[pi] < shortest ? CAL_PROMPT_BELOW_SHORTEST
                                                              : CAL_PROMPT_NEAREST;
        if (cell.prompt_exact) run_prompt_check(c, s, &cell, res, built, kept);
        snprintf(cell.content, sizeof cell.content, "%s", cal_content_name(p->content));
        cell.max_tokens = p->max_tokens;
        cell.output_fixed = !p->free_output;
    }
    cell.unique_prompts = !p->allow_prefix;
    run_cell_shot(&cell, s, shot, kind, rest_ns, kept, &ps);
    rc = run_store_cell(c, s, &cell, res, kept, &ps, shot);
    if (rc) goto out;
    rc = CAL_OK;
out:
    cal_keep_begin(&c->keep, NULL);
    free(hists);
    if (res) for (size_t i = 0; i < cap; i++) cal_req_result_free(&res[i]);
    if (prompts) for (size_t i = 0; i < cap; i++) free(prompts[i]);
    free(prompts);
    free(built);
    free(reqs);
    free(res);
    return rc;
}
