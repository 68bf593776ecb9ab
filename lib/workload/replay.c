/* Replay of a captured session: the turns `caliper proxy --log` recorded
 * (sizes of each turn's system prompt, tools, history and new message, its
 * output length, when it was sent and how long it took) as sessions of
 * turns to send to another engine. The log keeps sizes, not texts (a
 * user's conversation is not copied into a measurement file), so each
 * turn's prompt is text of the recorded sizes in which the history grows
 * out of the session's previous prompt: the prefix a cache could reuse is
 * the one the client really resent. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/util/c_locale.h"
#include "caliper/error.h"
#include "caliper/workload_traffic.h"
#include "lib/workload/traffic_internal.h"

#define MAX_LOG_TURNS 65536
#define MAX_BYTES     (512u << 20)
#define MAX_PROMPT    (1 << 20)       /* tokens in one recorded turn */
#define MAX_SLOTS     (1u << 22)      /* sessions × turns */
/* A log spans at most 7 days: every turn's wall_ns within 7 days of the
 * first successful turn's, and a turn's turn_s at most 7 days. A replay
 * waits out the recorded gaps (÷ --speed), so a line 1e18 ns after the
 * last one would otherwise wait 31 years; a week of captured traffic is
 * past any session one replays. */
#define MAX_SPAN_S    (7 * 86400)

typedef struct rec {
    long    sys, hist;       /* system + tools tokens; history + new tokens */
    long    out;             /* output tokens; -1 unknown */
    int64_t wall_ns;         /* when the client sent it */
    double  turn_s;          /* how long the turn took (NAN unknown) */
    int     session, turn;   /* assigned */
} rec;

static long part(const json_t *prefix, const char *name)
{
    json_int_t v = json_integer_value(json_object_get(json_object_get(prefix, name), "tokens"));
    return v > 0 && v < (1 << 24) ? (long)v : 0;
}

static int parse_log(const char *log, size_t len, rec **out, size_t *n, char *why, size_t wl)
{
    size_t cap = 0, lineno = 0, at = 0;
    rec *r = NULL;
    *n = 0;
    while (at < len) {
        const char *nl = memchr(log + at, '\n', len - at);
        size_t ln = nl ? (size_t)(nl - (log + at)) : len - at;
        lineno++;
        const char *line = log + at;
        at += ln + 1;
        size_t k = 0;
        while (k < ln && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r')) k++;
        if (k == ln) continue;
        json_error_t je;
        json_t *j = json_loadb(line, ln, 0, &je);
        json_t *pre = json_object_get(j, "prefix");
        if (!j || !json_is_object(pre) || !json_is_integer(json_object_get(j, "wall_ns"))) {
            cal_snprintf(why, wl, "line %zu: not a turn of a caliper proxy log (%s)", lineno,
                     j ? "no \"prefix\" object or \"wall_ns\"" : je.text);
            json_decref(j);
            free(r);
            return CAL_EPROTO;
        }
        json_int_t st = json_integer_value(json_object_get(j, "status"));
        if (st < 200 || st > 299) {   /* a failed turn is not part of the conversation */
            json_decref(j);
            continue;
        }
        if (*n >= MAX_LOG_TURNS) {
            cal_snprintf(why, wl, "over %d turns", MAX_LOG_TURNS);
            json_decref(j);
            free(r);
            return CAL_ETOOBIG;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 32;
            rec *x = realloc(r, cap * sizeof *x);
            if (!x) { json_decref(j); free(r); return CAL_ENOMEM; }
            r = x;
        }
        rec *e = &r[(*n)++];
        e->sys = part(pre, "system") + part(pre, "tools");
        e->hist = part(pre, "history") + part(pre, "new");
        if (e->sys + e->hist < 1) e->hist = 1;
        if (e->sys + e->hist > MAX_PROMPT) {
            cal_snprintf(why, wl, "line %zu: a prompt of %ld tokens, over the %d a replayed turn may have",
                     lineno, e->sys + e->hist, MAX_PROMPT);
            json_decref(j);
            free(r);
            return CAL_ETOOBIG;
        }
        json_t *o = json_object_get(j, "output_tokens");
        e->out = json_is_integer(o) && json_integer_value(o) > 0 && json_integer_value(o) < (1 << 20)
                     ? (long)json_integer_value(o) : -1;
        e->wall_ns = (int64_t)json_integer_value(json_object_get(j, "wall_ns"));
        json_t *ts = json_object_get(j, "turn_s");
        e->turn_s = json_is_number(ts) && json_number_value(ts) >= 0 ? json_number_value(ts) : NAN;
        json_decref(j);
        /* in double: two int64 timestamps far apart must not overflow */
        double off_s = ((double)e->wall_ns - (double)r[0].wall_ns) / 1e9;
        if (fabs(off_s) > MAX_SPAN_S || e->turn_s > MAX_SPAN_S) {
            if (fabs(off_s) > MAX_SPAN_S)
                cal_snprintf(why, wl, "line %zu: \"wall_ns\" is %.6g s from the first turn's: past "
                             "the %d days a replayed log may span", lineno, off_s, MAX_SPAN_S / 86400);
            else
                cal_snprintf(why, wl, "line %zu: \"turn_s\" is %.6g s: past the %d days a replayed "
                             "log may span", lineno, e->turn_s, MAX_SPAN_S / 86400);
            free(r);
            return CAL_ERANGE;
        }
    }
    *out = r;
    return CAL_OK;
}

/* Which session a turn continues: the one whose last turn had the same
 * system + tools size and a prompt no longer than this turn's (its history
 * grew out of it), the longest such; else a new one. */
static void assign_sessions(rec *r, size_t n, int *n_sessions, int *n_turns)
{
    long last_total[4096];
    int last_idx[4096], turns[4096];
    int ns = 0, nt = 0;
    for (size_t i = 0; i < n; i++) {
        int best = -1;
        for (int s = 0; s < ns; s++) {
            const rec *l = &r[last_idx[s]];
            if (l->sys != r[i].sys || last_total[s] > r[i].sys + r[i].hist) continue;
            if (best < 0 || last_total[s] > last_total[best]) best = s;
        }
        if (best < 0 && ns < 4096) {
            best = ns++;
            turns[best] = 0;
        } else if (best < 0) {
            best = ns - 1;   /* past the table: the last one carries on */
        }
        r[i].session = best;
        r[i].turn = turns[best]++;
        last_idx[best] = (int)i;
        last_total[best] = r[i].sys + r[i].hist;
        if (turns[best] > nt) nt = turns[best];
    }
    *n_sessions = ns;
    *n_turns = nt;
}

int cal_replay_build(const char *log, size_t len, const char *name, double speed,
                     cal_content content, cal_count_tokens_fn count, void *count_ud,
                     cal_traffic **out, char *why, size_t why_len)
{
    char scratch[8];
    if (!why) { why = scratch; why_len = sizeof scratch; }
    why[0] = '\0';
    *out = NULL;
    if (!(speed > 0) || !isfinite(speed)) {
        cal_snprintf(why, why_len, "speed %g is not a positive factor", speed);
        return CAL_EINVAL;
    }
    rec *r = NULL;
    size_t n = 0;
    int rc = parse_log(log ? log : "", log ? len : 0, &r, &n, why, why_len);
    if (rc) return rc;
    if (n == 0) {
        cal_snprintf(why, why_len, "no successful turn in the log");
        free(r);
        return CAL_EPROTO;
    }
    int ns, nt;
    assign_sessions(r, n, &ns, &nt);
    if ((size_t)ns * (size_t)nt > MAX_SLOTS) {
        cal_snprintf(why, why_len, "%d sessions x %d turns: over the %u a replay may hold", ns, nt, MAX_SLOTS);
        free(r);
        return CAL_ETOOBIG;
    }
    cal_textgen *g = NULL;
    cal_traffic *tr = NULL;
    if ((rc = cal_textgen_open(content, count, count_ud, &g))) {
        cal_snprintf(why, why_len, "counting the tokens of the content: %s", cal_strerror(rc));
        free(r);
        return rc;
    }
    if (!(tr = cal_traffic_new_("replay", ns, nt))) { rc = CAL_ENOMEM; goto out; }
    cal_snprintf(tr->source, sizeof tr->source, "%s", name ? name : "");
    size_t bytes = 0;
    int64_t t0 = r[0].wall_ns;
    for (int s = 0; s < ns && rc == CAL_OK; s++) {
        char *p = NULL;
        size_t plen = 0;
        int total = 0, est = 0;
        size_t prev = 0;
        uint64_t off = 0;
        for (size_t i = 0; i < n; i++) {
            if (r[i].session != s) continue;
            cal_turn *t = cal_traffic_turn(tr, r[i].turn, s);
            int shared = 0, nn;
            if (r[i].turn == 0) {
                /* the session's system + tools block, led by its nonce */
                char nl[10];
                cal_traffic_nonce_((uint64_t)s * 7919 + 17, nl);
                if ((rc = cal_traffic_append_text_(g, &p, &plen, nl, 9, &nn))) break;
                /* the recorded block's size counts the nonce line */
                long body = r[i].sys - (nn > 0 ? nn : 0);
                if (body > 0 && (rc = cal_textgen_append(g, &p, &plen, nn, (int)body, 0, &nn))) break;
                total = nn;
                est = nn < 0;
                off = 1201 + (uint64_t)s * 2003;
                long more = r[i].hist;
                if ((rc = cal_textgen_append(g, &p, &plen, est ? -1 : total, (int)more, off, &nn))) break;
                off += (uint64_t)more * 4;
            } else {
                /* the history grew out of the previous prompt */
                shared = total;
                long want = r[i].sys + r[i].hist, more = want - (est ? 0 : total);
                if (est) more = want - (long)ceil((double)plen / cal_textgen_chars_per_token(g));
                if (more < 1) more = 1;
                if ((rc = cal_textgen_append(g, &p, &plen, est ? -1 : total, (int)more, off, &nn))) break;
                off += (uint64_t)more * 4;
            }
            total = est || nn < 0 ? (int)ceil((double)plen / cal_textgen_chars_per_token(g)) : nn;
            bytes += plen;
            if (bytes > MAX_BYTES) { rc = CAL_ETOOBIG; break; }
            if (!(t->prompt = strndup(p, plen))) { rc = CAL_ENOMEM; break; }
            t->present = 1;
            t->prompt_tokens = total;
            t->shared_tokens = shared;
            t->est = est;
            t->max_tokens = r[i].out > 0 ? (int)r[i].out : 64;
            if (r[i].turn == 0) {
                t->think_s = (double)(r[i].wall_ns - t0) / 1e9 / speed;
            } else {
                /* the gap from the previous turn's end to this request */
                double end = (double)r[prev].wall_ns / 1e9 + (isfinite(r[prev].turn_s) ? r[prev].turn_s : 0);
                double gap = (double)r[i].wall_ns / 1e9 - end;
                t->think_s = gap > 0 ? gap / speed : 0;
            }
            if (t->think_s < 0) t->think_s = 0;
            prev = i;
        }
        free(p);
    }
    if (rc) {
        if (rc == CAL_ETOOBIG) cal_snprintf(why, why_len, "the replay's prompts pass %u MiB together", MAX_BYTES >> 20);
        else if (!why[0]) cal_snprintf(why, why_len, "building the turns: %s", cal_strerror(rc));
        goto out;
    }
    json_t *o = json_object(), *turns = json_array();
    json_object_set_new(o, "scenario", json_string("replay"));
    json_object_set_new(o, "log", json_string(tr->source));
    json_object_set_new(o, "speed", json_real(speed));
    json_object_set_new(o, "sessions", json_integer(ns));
    json_object_set_new(o, "turns", json_integer(nt));
    json_object_set_new(o, "recorded_turns", json_integer((json_int_t)n));
    json_object_set_new(o, "content", json_string(cal_content_name(content)));
    json_object_set_new(o, "texts", json_string("text of the recorded sizes (the log keeps no texts)"));
    for (int k = 0; k < nt; k++) {
        json_t *pt = json_array(), *sh = json_array(), *rec_pt = json_array();
        for (int s = 0; s < ns; s++) {
            const cal_turn *t = cal_traffic_turn(tr, k, s);
            json_array_append_new(pt, t->present ? json_integer(t->prompt_tokens) : json_null());
            json_array_append_new(sh, t->present ? json_integer(t->shared_tokens) : json_null());
        }
        for (size_t i = 0; i < n; i++)
            if (r[i].turn == k) json_array_append_new(rec_pt, json_integer(r[i].sys + r[i].hist));
        json_array_append_new(turns, json_pack("{s:i,s:o,s:o,s:o}", "turn", k + 1, "prompt_tokens", pt,
                                               "shared_tokens", sh, "recorded_prompt_tokens", rec_pt));
    }
    if ((rc = cal_traffic_set_protocol_(tr, o, turns))) goto out;
    *out = tr;
    tr = NULL;
out:
    cal_traffic_free(&tr);
    cal_textgen_close(&g);
    free(r);
    return rc;
}
