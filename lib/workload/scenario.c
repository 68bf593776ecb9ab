/* The chat scenario: N simulated users of one chat client. Every user sends
 * the same system + tools block (the notes' 6,765 tokens by default), then
 * per turn the history so far and a new message; turn k's prompt is turn
 * k−1's prompt, its answer and the new message, so the share of each
 * prompt that was already sent grows turn by turn, as it does in a real
 * client (seed 004: 8,112+ tokens a turn). Prompts are built before the
 * run and counted with the server's tokenizer: the shared prefix of a turn
 * is the counted length of the session's previous prompt. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/util/c_locale.h"
#include "caliper/error.h"
#include "caliper/workload_traffic.h"
#include "lib/workload/traffic_internal.h"

#define MAX_SESSIONS 4096
#define MAX_TURNS    1024
#define MAX_BYTES    (512u << 20)   /* every prompt of the scenario together */
#define REBUILD      CAL_EMISMATCH  /* a sampled count disagreed: build again, counting whole */

void cal_traffic_free(cal_traffic **tr)
{
    if (!tr || !*tr) return;
    cal_traffic *t = *tr;
    if (t->t)
        for (size_t i = 0; i < (size_t)t->n_sessions * (size_t)t->n_turns; i++) free(t->t[i].prompt);
    free(t->t);
    free(t->protocol_json);
    free(t);
    *tr = NULL;
}

/* A fresh traffic of sessions × turns, every turn absent. */
cal_traffic *cal_traffic_new_(const char *kind, int sessions, int turns)
{
    cal_traffic *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    cal_snprintf(t->kind, sizeof t->kind, "%s", kind);
    t->n_sessions = sessions;
    t->n_turns = turns;
    t->t = calloc((size_t)sessions * (size_t)turns, sizeof *t->t);
    if (!t->t) { free(t); return NULL; }
    return t;
}

/* Append text[n] to *p and count the whole. */
int cal_traffic_append_text_(cal_textgen *g, char **p, size_t *len, const char *text, size_t n,
                             int *total)
{
    size_t keep = *p ? *len : 0;
    char *q = realloc(*p, keep + n + 1);
    if (!q) return CAL_ENOMEM;
    memcpy(q + keep, text, n);
    q[keep + n] = '\0';
    *p = q;
    *len = keep + n;
    return cal_textgen_count(g, q, total);
}

int cal_traffic_set_protocol_(cal_traffic *tr, json_t *o, json_t *turns)
{
    json_object_set_new(o, "turn_plan", turns);
    tr->protocol_json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return tr->protocol_json ? CAL_OK : CAL_ENOMEM;
}

/* The nonce line a scenario's shared block starts with: eight letters from
 * the seed, so another run's (or another shot's) block is another text. */
void cal_traffic_nonce_(uint64_t seed, char out[10])
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    for (int i = 0; i < 8; i++, z /= 26) out[i] = (char)('a' + z % 26);
    out[8] = '\n';
    out[9] = '\0';
}

/* est: without a tokenizer the counts are estimated from characters */
static int est_tokens(const cal_textgen *g, size_t bytes)
{
    return (int)ceil((double)bytes / cal_textgen_chars_per_token(g));
}

int cal_chat_build(const cal_chat_config *cfg, cal_traffic **out, char *why, size_t why_len)
{
    char scratch[8];
    if (!why) { why = scratch; why_len = sizeof scratch; }
    *out = NULL;
    if (!cfg || cfg->users < 1 || cfg->users > MAX_SESSIONS || cfg->turns < 1 ||
        cfg->turns > MAX_TURNS || cfg->system_tokens < 0 || !(cfg->stagger_s >= 0)) {
        cal_snprintf(why, why_len, "users 1..%d, turns 1..%d, a system block >= 0 tokens and a "
                               "stagger >= 0 are needed", MAX_SESSIONS, MAX_TURNS);
        return CAL_EINVAL;
    }
    if (cfg->user_tokens.kind == CAL_LEN_DATASET && (!cfg->dataset || !cfg->dataset->n)) {
        cal_snprintf(why, why_len, "user messages from a dataset need a dataset");
        return CAL_EINVAL;
    }
    cal_textgen *g = NULL;
    int rc = cal_textgen_open(cfg->content, cfg->count, cfg->count_ud, &g);
    if (rc) {
        cal_snprintf(why, why_len, "counting the tokens of the content: %s", cal_strerror(rc));
        return rc;
    }
    /* what the prompts will hold, before a byte is built or a token counted:
     * every turn of every user carries the whole history so far, so the
     * total grows as users × turns² (a DATASET message counts as 1 token) */
    double um = cal_lendist_mean(&cfg->user_tokens), am = cal_lendist_mean(&cfg->answer_tokens);
    if (!isfinite(um)) um = 1;
    double hold = (double)cfg->users *
                  ((double)cfg->turns * (cfg->system_tokens + um) +
                   (double)cfg->turns * (cfg->turns - 1) / 2 * (um + am)),
           hold_bytes = hold * cal_textgen_chars_per_token(g);
    if (hold_bytes > MAX_BYTES) {
        cal_snprintf(why, why_len, "%d users × %d turns with a %d-token system block come to about "
                     "%.3g prompt tokens (%.0f MiB of text), over the %u MiB a scenario may hold: "
                     "fewer users, turns or system tokens", cfg->users, cfg->turns,
                     cfg->system_tokens, hold, hold_bytes / (1 << 20), MAX_BYTES >> 20);
        cal_textgen_close(&g);
        return CAL_ETOOBIG;
    }
    cal_traffic *tr = cal_traffic_new_("chat", cfg->users, cfg->turns);
    char *sys = NULL;
    size_t sys_len = 0, bytes = 0;
    int sys_tokens = 0;
    uint64_t rng = cfg->seed ^ 0x6368617473636e31ULL;
    if (!tr) { rc = CAL_ENOMEM; goto out; }
    char nl[10];
    cal_traffic_nonce_(cfg->seed, nl);
    if ((rc = cal_traffic_append_text_(g, &sys, &sys_len, nl, 9, &sys_tokens))) goto out;
    /* the block's size counts its nonce line */
    int body = cfg->system_tokens - (sys_tokens > 0 ? sys_tokens : 0);
    if (body > 0 && (rc = cal_textgen_append(g, &sys, &sys_len, sys_tokens, body, 0, &sys_tokens)))
        goto out;
    int est = sys_tokens < 0;
    if (est) sys_tokens = est_tokens(g, sys_len);
    tr->system_tokens = sys_tokens;

    /* Each message after the system block starts on a new line, and is
     * counted alone: a turn's count is the previous count plus the new
     * text's (plus what the seam adds, learnt on the first turn), not a
     * count of the whole history again. User 0's every turn and the last
     * turn of two more users are counted whole; one that disagrees means
     * the tokenizer merges across the seam, and the scenario is built
     * again counting every prompt whole. */
    int delta = !est, seam = 0, seam_known = 0, checks = 0;
    const char *counts_how = "tokenizer";
again:
    cal_textgen_seams_(g, 1, delta, seam);
    rng = cfg->seed ^ 0x6368617473636e31ULL;
    bytes = 0;
    for (int u = 0; u < cfg->users; u++) {
        char *p = NULL;
        size_t len = 0;
        int total = sys_tokens, prev_total = 0, prev_answer = 0;
        if (!(p = strndup(sys, sys_len))) { rc = CAL_ENOMEM; goto out; }
        len = sys_len;
        /* each user's text comes from its own place in the content */
        uint64_t off = 977 + (uint64_t)u * 1543;
        for (int k = 0; k < cfg->turns; k++) {
            cal_turn *t = cal_traffic_turn(tr, k, u);
            int n;
            /* counting a long prefix is a call to the server: a user who
             * stops the run is answered before the next one */
            if (cfg->stop && *cfg->stop) { rc = CAL_ECANCEL; break; }
            if (k > 0) {   /* the previous answer (a stand-in of its length) */
                if ((rc = cal_textgen_append(g, &p, &len, est ? -1 : total, prev_answer, off, &n))) break;
                off += (uint64_t)(prev_answer * 4 + 13);
                total = est || n < 0 ? est_tokens(g, len) : n;
            }
            if (cfg->user_tokens.kind == CAL_LEN_DATASET) {
                const cal_ds_entry *e =
                    &cfg->dataset->e[cal_dataset_pick(cfg->dataset, cfg->seed, (uint64_t)u * MAX_TURNS + (uint64_t)k)];
                if (e->text) {
                    rc = cal_traffic_append_text_(g, &p, &len, "\n", 1, &n);
                    if (!rc) rc = cal_traffic_append_text_(g, &p, &len, e->text, strlen(e->text), &n);
                } else {
                    rc = cal_textgen_append(g, &p, &len, est ? -1 : total,
                                            e->prompt_tokens > 0 ? e->prompt_tokens : 1, off, &n);
                }
            } else {
                int want = cal_lendist_draw(&cfg->user_tokens, &rng);
                rc = cal_textgen_append(g, &p, &len, est ? -1 : total, want, off, &n);
                off += (uint64_t)(want * 4 + 7);
            }
            if (rc) break;
            total = est || n < 0 ? est_tokens(g, len) : n;
            if (delta && (u == 0 || (k == cfg->turns - 1 &&
                                     (u == cfg->users / 2 || u == cfg->users - 1)))) {
                int whole;
                if ((rc = cal_textgen_count(g, p, &whole))) break;
                checks++;
                if (whole != total && u == 0 && k == 0 && !seam_known) {
                    seam = whole - total;         /* the first seam: learn it */
                    cal_textgen_seams_(g, 1, delta, seam);
                    total = whole;
                } else if (whole != total) {
                    delta = 0;                    /* the seam merges: count whole */
                    rc = REBUILD;
                    break;
                }
                seam_known = 1;
            }
            bytes += len;
            if (bytes > MAX_BYTES) { rc = CAL_ETOOBIG; break; }
            if (!(t->prompt = strndup(p, len))) { rc = CAL_ENOMEM; break; }
            t->present = 1;
            t->prompt_tokens = total;
            t->est = est;
            t->shared_tokens = k > 0 ? prev_total
                               : (u > 0 && cfg->stagger_s > 0) ? sys_tokens : 0;
            t->max_tokens = cal_lendist_draw(&cfg->answer_tokens, &rng);
            if (t->max_tokens < 1) t->max_tokens = 1;
            t->think_s = k == 0 ? u * cfg->stagger_s
                                : cal_lendist_draw(&cfg->think_ms, &rng) / 1000.0;
            prev_total = total;
            prev_answer = t->max_tokens;
        }
        free(p);
        if (rc == REBUILD) {
            for (size_t i = 0; i < (size_t)cfg->users * (size_t)cfg->turns; i++) {
                free(tr->t[i].prompt);
                memset(&tr->t[i], 0, sizeof tr->t[i]);
            }
            counts_how = "tokenizer, every prompt whole (a message counted alone and added "
                         "disagreed with the whole prompt's count: the tokenizer merges across "
                         "the seam)";
            rc = CAL_OK;
            goto again;
        }
        if (rc) {
            if (rc == CAL_ETOOBIG)
                cal_snprintf(why, why_len, "the scenario's prompts pass %u MiB together", MAX_BYTES >> 20);
            else if (rc == CAL_ECANCEL)
                cal_snprintf(why, why_len, "stopped while building user %d's turns", u + 1);
            else cal_snprintf(why, why_len, "building user %d's turns: %s", u + 1, cal_strerror(rc));
            goto out;
        }
    }

    /* the scenario as the protocol records it, each turn's counts included */
    json_t *o = json_object(), *turns = json_array();
    char b1[64], b2[64], b3[64];
    json_object_set_new(o, "scenario", json_string("chat"));
    json_object_set_new(o, "users", json_integer(cfg->users));
    json_object_set_new(o, "turns", json_integer(cfg->turns));
    json_object_set_new(o, "system_tokens", json_integer(sys_tokens));
    json_object_set_new(o, "system_tokens_asked", json_integer(cfg->system_tokens));
    json_object_set_new(o, "user_tokens", json_string(cal_lendist_text(&cfg->user_tokens, b1, sizeof b1)));
    json_object_set_new(o, "answer_tokens", json_string(cal_lendist_text(&cfg->answer_tokens, b2, sizeof b2)));
    json_object_set_new(o, "think_ms", json_string(cal_lendist_text(&cfg->think_ms, b3, sizeof b3)));
    json_object_set_new(o, "stagger_s", json_real(cfg->stagger_s));
    json_object_set_new(o, "content", json_string(cal_content_name(cfg->content)));
    if (delta)
        counts_how = "tokenizer: each turn the previous count plus the new text's, checked "
                     "against whole counts of a sample of prompts";
    json_object_set_new(o, "counts", json_string(est ? "estimated (no tokenizer)" : counts_how));
    json_object_set_new(o, "counts_checked", json_integer(checks));
    json_object_set_new(o, "history", json_string("synthetic answers of each turn's max_tokens"));
    for (int k = 0; k < cfg->turns; k++) {
        json_t *pt = json_array(), *sh = json_array();
        for (int u = 0; u < cfg->users; u++) {
            json_array_append_new(pt, json_integer(cal_traffic_turn(tr, k, u)->prompt_tokens));
            json_array_append_new(sh, json_integer(cal_traffic_turn(tr, k, u)->shared_tokens));
        }
        json_array_append_new(turns, json_pack("{s:i,s:o,s:o}", "turn", k + 1, "prompt_tokens", pt,
                                               "shared_tokens", sh));
    }
    if ((rc = cal_traffic_set_protocol_(tr, o, turns))) goto out;
    *out = tr;
    tr = NULL;
out:
    free(sys);
    cal_traffic_free(&tr);
    cal_textgen_close(&g);
    return rc;
}
