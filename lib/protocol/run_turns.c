/* caliper — a shot of turns (the chat scenario, a replayed log): each turn
 * index a cell, a session's turn sent when its previous turn ended plus its
 * think time, the server's prefix-cache reports summed (run_ctx.h). */
#include "run_ctx.h"

/* ---- a shot of turns: the chat scenario, a replay ------------------------ */
/* Build the turns of one shot for a side: the same seed for both sides of
 * an A/B shot (the same texts), another for every shot (a prefix cache
 * cannot carry one shot's system block into the next). */
int run_build_turns(ctx *c, side *s, int shot)
{
    const cal_run_plan *p = &c->p;
    cal_traffic_free(&s->tr);
    char why[300] = "";
    cal_count_tokens_fn cnt = s->t->ops->count_tokens ? run_count_with_target : NULL;
    int rc;
    if (p->chat) {
        cal_chat_config cc = *p->chat;
        cc.seed = p->seed + (uint64_t)shot * 1000003;
        cc.count = cnt;
        cc.count_ud = s->t;
        cc.stop = c->stop;
        cc.content = p->content;
        rc = cal_chat_build(&cc, &s->tr, why, sizeof why);
    } else {
        rc = cal_replay_build(p->replay_log, p->replay_len, p->replay_name,
                              p->replay_speed > 0 ? p->replay_speed : 1, p->content, cnt, s->t,
                              &s->tr, why, sizeof why);
    }
    if (rc) run_fail(c, "%s%s%s: %s", s->name, s->name[0] ? " " : "", p->chat ? "chat" : "replay",
                 why[0] ? why : cal_strerror(rc));
    /* a think time is a wait the schedule keeps: a replay slowed past a day
     * between turns would drop it (cal_span_ns bounds, it does not keep) */
    for (int k = 0; !rc && !p->chat && k < s->tr->n_turns; k++)
        for (int u = 0; !rc && u < s->tr->n_sessions; u++) {
            const cal_turn *t = cal_traffic_turn(s->tr, k, u);
            if (t->present && !(t->think_s <= CAL_WAIT_MAX_S)) {
                run_fail(c, "replay_speed: %g makes turn %d of session %d wait %.3g s, over the "
                        "%g s (a day) one wait may last", p->replay_speed > 0 ? p->replay_speed : 1,
                     k + 1, u + 1, t->think_s, CAL_WAIT_MAX_S);
                rc = CAL_EINVAL;
            }
        }
    return rc;
}

/* One cell per turn index: the sessions that have that turn, each sent
 * when its previous turn ended plus its think time (a first turn at its
 * start offset), in flight together. A turn index waits for every
 * session's previous turn (the cell is the unit stored), so a session's
 * think time is a floor, not exact, when another session's turn is slower. */
int run_turns(ctx *c, side *s, int shot, cal_shot_kind kind, int64_t rest_ns)
{
    const cal_run_plan *p = &c->p;
    cal_traffic *tr = s->tr;
    int ns = tr->n_sessions, rc = CAL_OK;
    int64_t *last_end = calloc((size_t)ns, sizeof *last_end);
    int *order = calloc((size_t)ns, sizeof *order);
    int64_t *due = calloc((size_t)ns, sizeof *due);
    cal_request *reqs = calloc((size_t)ns, sizeof *reqs);
    cal_req_result *res = calloc((size_t)ns, sizeof *res);
    if (!last_end || !order || !due || !reqs || !res) { rc = CAL_ENOMEM; goto out; }
    int64_t t0 = cal_now_ns();
    for (int k = 0; k < tr->n_turns && !run_stopped(c) && !c->target_failed; k++) {
        size_t n = 0;
        int64_t now = cal_now_ns();
        for (int u = 0; u < ns; u++) {
            const cal_turn *t = cal_traffic_turn(tr, k, u);
            if (!t->present) continue;
            int64_t base = k == 0 || !last_end[u] ? t0 : last_end[u];
            due[u] = base + cal_span_ns(t->think_s);
            if (due[u] < now) due[u] = now;
            /* sessions in the order they are due: the probe sends in index order */
            size_t j = n++;
            while (j > 0 && due[order[j - 1]] > due[u]) { order[j] = order[j - 1]; j--; }
            order[j] = u;
        }
        if (n == 0) continue;
        double ptok = 0;
        int same = 1;
        for (size_t i = 0; i < n; i++) {
            const cal_turn *t = cal_traffic_turn(tr, k, order[i]);
            reqs[i].prompt = t->prompt;
            reqs[i].max_tokens = t->max_tokens;
            reqs[i].sched_ns = due[order[i]];
            ptok += t->prompt_tokens;
            same = same && t->max_tokens == reqs[0].max_tokens;
        }
        snprintf(c->label, sizeof c->label, "%s%sshot %d · %s turn %d · %zu session%s", s->name,
                 s->name[0] ? " · " : "", shot, tr->kind, k + 1, n, n == 1 ? "" : "s");
        cal_run_event ev = {.kind = CAL_RUN_EV_PREPARING, .side = s->name, .label = c->label,
                            .run_id = c->run.id, .shot = shot};
        run_emit(c, &ev);
        cal_load load = {.concurrency = (int)n, .seed = p->seed + (uint64_t)c->seq * 7919};
        cal_cell cell;
        memset(&cell, 0, sizeof cell);
        cal_probe_stats ps;
        memset(&ps, 0, sizeof ps);
        ps.first_fail = -1;
        cell.start_ns = cal_now_ns();
        cell.start_wall_ns = cal_wall_ns();
        prog g = {.c = c, .side = s->name, .shot = shot, .base = 0, .total = n};
        rc = s->t->ops->send(s->t->self, reqs, n, &load, res, c->stop, run_on_progress, &g, &ps);
        cell.end_ns = cal_now_ns();
        if (rc && rc != CAL_ECANCEL) {
            run_fail(c, "%s: %s", s->t->ops->kind, cal_strerror(rc));
            for (size_t i = 0; i < n; i++) cal_req_result_free(&res[i]);
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            last_end[order[i]] = res[i].end_ns > 0 ? res[i].end_ns : cell.end_ns;
            if (k < CACHE_TURNS && res[i].status == CAL_REQ_OK && kind != CAL_SHOT_WARMUP) {
                s->sent[k]++;
                if (res[i].cached_tokens >= 0) {
                    s->reported[k]++;
                    s->cached[k] += res[i].cached_tokens;
                    s->prompt[k] += res[i].prompt_tokens > 0 ? res[i].prompt_tokens
                                    : cal_traffic_turn(tr, k, order[i])->prompt_tokens;
                }
            }
        }
        cell.seq = c->seq++;
        cell.kind = CAL_CELL_PROMPT_SWEEP;   /* the turns are a prompt-length line */
        snprintf(cell.target, sizeof cell.target, "%s", s->name);
        cell.concurrency = (int)n;
        cell.prompt_tokens = (int)lround(ptok / (double)n);
        cell.prompt_exact = !cal_traffic_turn(tr, k, order[0])->est;
        cell.prompt_offset = -1;
        cell.prompt_basis = cell.prompt_exact ? CAL_PROMPT_CONFIRMED : CAL_PROMPT_NO_TOKENIZE;
        if (cell.prompt_exact) {
            /* each session's turn was counted by /tokenize: the server checks it */
            int *built = malloc(n * sizeof *built);
            for (size_t i = 0; built && i < n; i++)
                built[i] = cal_traffic_turn(tr, k, order[i])->prompt_tokens;
            if (built) run_prompt_check(c, s, &cell, res, built, n);
            else cell.prompt_basis = CAL_PROMPT_UNCONFIRMED;   /* nothing to check it with */
            free(built);
        }
        snprintf(cell.content, sizeof cell.content, "%s", tr->kind);
        cell.unique_prompts = 1;
        cell.max_tokens = same ? reqs[0].max_tokens : 0;
        cell.output_fixed = !p->free_output && same;
        run_cell_shot(&cell, s, shot, kind, k == 0 ? rest_ns : 0, n, &ps);
        rc = run_store_cell(c, s, &cell, res, n, &ps, shot);
        for (size_t i = 0; i < n; i++) cal_req_result_free(&res[i]);
        if (rc) goto out;
        if (ps.n_status[CAL_REQ_CANCELLED] && run_stopped(c)) break;
    }
out:
    free(last_end);
    free(order);
    free(due);
    free(reqs);
    free(res);
    return rc;
}

/* What the server said of its prefix cache over the turns (usage's
 * cached_tokens or llama.cpp's cache_n): one sentence per side, stored
 * with the verdicts and told to the observer. */
void run_cache_notes(ctx *c, json_t *va)
{
    for (int i = 0; i < c->n_sides; i++) {
        side *s = &c->sides[i];
        long sent = 0, rep = 0;
        for (int k = 0; k < CACHE_TURNS; k++) { sent += s->sent[k]; rep += s->reported[k]; }
        if (!sent) continue;
        char buf[1100];
        int o = cal_snprintf(buf, sizeof buf, "%s%sprefix cache: ", s->name, s->name[0] ? ": " : "");
        if (!rep) {
            cal_snprintf(buf + o, sizeof buf - (size_t)o,
                         "%s reported no cached tokens (no usage.prompt_tokens_details.cached_tokens "
                         "or timings.cache_n) in %ld turns: its cache hits are unknown", run_what(s), sent);
        } else {
            o += cal_snprintf(buf + o, sizeof buf - (size_t)o,
                              "%s reported cached tokens in %ld of %ld turns; share of the prompt "
                              "taken from its cache per turn:", run_what(s), rep, sent);
            for (int k = 0; k < CACHE_TURNS && o < (int)sizeof buf - 40; k++)
                if (s->reported[k] && s->prompt[k] > 0)
                    o += cal_snprintf(buf + o, sizeof buf - (size_t)o, " %d: %.0f %%", k + 1,
                                      100 * s->cached[k] / s->prompt[k]);
        }
        note(c, s->name, "%s", buf + (s->name[0] ? strlen(s->name) + 2 : 0));
        json_array_append_new(va, json_string(buf));
    }
}
