/* caliper — an exact prompt length is a claim the server can check: after
 * each cell built with the server's /tokenize, every request's own
 * usage.prompt_tokens is compared with the length it was built for, less
 * what the server adds to every prompt (a BOS; a chat template), measured
 * once per target. A cell the server contradicts is stored approximate, at
 * the server's count, so fits and compare use what the server computed
 * (run_ctx.h). */
#include "run_ctx.h"

/* The text a BOS count is asked on: any text; the tokens added do not
 * depend on it. */
#define SPECIALS_TEXT "caliper"

/* 1 when the side's target speaks the chat API (its description says). */
static int side_chat(side *s)
{
    if (s->api >= 0) return s->api;
    s->api = 0;
    char *d = s->t->ops->describe ? s->t->ops->describe(s->t->self) : NULL;
    json_t *j = d ? json_loads(d, 0, NULL) : NULL;
    const char *api = json_string_value(json_object_get(j, "api"));
    if (api && !strcmp(api, "chat")) s->api = 1;
    json_decref(j);
    free(d);
    return s->api;
}

/* What the server adds to every prompt, measured once per side and said:
 * completions, the special tokens its /tokenize adds with add_special (a
 * BOS); chat, the server's own count of a request whose message is empty
 * (its template alone). Where neither answers, the least of the first
 * checked cell's differences, said to be that. */
static void measure_offset(ctx *c, side *s, const cal_req_result *res, const int *built, size_t n)
{
    if (s->offset_tried) return;
    s->offset_tried = 1;
    int chat = side_chat(s), k = -1;
    char how[240] = "";
    if (!chat && s->t->ops->count_specials) {
        if (s->t->ops->count_specials(s->t->self, SPECIALS_TEXT, &k) == CAL_OK && k >= 0)
            snprintf(how, sizeof how, "special tokens such as a BOS, by its /tokenize with "
                     "add_special");
        else k = -1;
    } else if (chat) {
        cal_request rq = {.prompt = "", .max_tokens = 1};
        cal_req_result rr;
        cal_req_result_init(&rr);
        cal_load load = {.concurrency = 1, .seed = c->p.seed};
        cal_probe_stats ps;
        memset(&ps, 0, sizeof ps);
        ps.first_fail = -1;
        /* a template adds less than a whole prompt holds: an empty message
         * counted past this cell's smallest prompt is no template's count */
        int least_seen = -1;
        for (size_t i = 0; i < n; i++)
            if (res[i].status == CAL_REQ_OK && res[i].prompt_tokens >= 0 &&
                (least_seen < 0 || res[i].prompt_tokens < least_seen))
                least_seen = res[i].prompt_tokens;
        if (s->t->ops->send(s->t->self, &rq, 1, &load, &rr, c->stop, NULL, NULL, &ps) == CAL_OK &&
            rr.status == CAL_REQ_OK && rr.prompt_tokens >= 0 &&
            (least_seen < 0 || rr.prompt_tokens <= least_seen)) {
            k = rr.prompt_tokens;
            snprintf(how, sizeof how, "its chat template: the server's own count of a request "
                     "whose message is empty");
        }
        cal_req_result_free(&rr);
    }
    if (k < 0) {
        /* no separate measure: the smallest difference of this cell, if it
         * can be one (a template only adds) */
        int least = -1;
        for (size_t i = 0; i < n; i++)
            if (res[i].status == CAL_REQ_OK && res[i].prompt_tokens >= 0 && built[i] >= 0) {
                int dlt = res[i].prompt_tokens - built[i];
                if (least < 0 || dlt < least) least = dlt;
            }
        if (chat && least > 0) {
            k = least;
            snprintf(how, sizeof how, "its chat template, taken from the first checked cell (an "
                     "empty message was not answered with a count): a constant error of /tokenize "
                     "cannot be told from it");
        } else {
            k = 0;
            snprintf(how, sizeof how, "none measured: %s, so none is taken off",
                     chat ? "an empty message was not answered with a count"
                     : s->t->ops->count_specials ? "its /tokenize did not say what it adds"
                                                 : "the target cannot say what it adds");
        }
    }
    s->offset = k;
    if (k == 0 && how[0] != 'n')
        note(c, s->name, "prompt lengths: the server adds no tokens of its own to a prompt (%s "
             "found none); each request's usage.prompt_tokens is compared with the length "
             "/tokenize built", chat ? "an empty message counted 0" : "its /tokenize with add_special");
    else
        note(c, s->name, "prompt lengths: the server adds %d token%s to every prompt (%s); measured "
             "once, and taken off each request's usage.prompt_tokens before it is compared with "
             "the length /tokenize built", k, k == 1 ? "" : "s", how);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void run_prompt_check(ctx *c, side *s, cal_cell *cell, const cal_req_result *res,
                      const int *built, size_t n)
{
    size_t rep = 0;
    for (size_t i = 0; i < n; i++)
        rep += res[i].status == CAL_REQ_OK && res[i].prompt_tokens >= 0 && built[i] >= 0;
    if (!rep) {
        /* nothing to confirm it with: exact by /tokenize alone, and said so */
        cell->prompt_basis = CAL_PROMPT_UNCONFIRMED;
        cell->prompt_exact = 1;
        return;
    }
    measure_offset(c, s, res, built, n);
    int off = s->offset > 0 ? s->offset : 0;
    cell->prompt_offset = s->offset;
    int *got = malloc(rep * sizeof *got);
    size_t agree = 0, k = 0;
    double asked = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(res[i].status == CAL_REQ_OK && res[i].prompt_tokens >= 0 && built[i] >= 0)) continue;
        int g = res[i].prompt_tokens - off;
        agree += g == built[i];
        asked += built[i];
        if (got) got[k++] = g;
    }
    if (agree == rep) {
        cell->prompt_basis = CAL_PROMPT_CONFIRMED;
        cell->prompt_exact = 1;
        free(got);
        return;
    }
    /* the server's count is the length: its median over the requests that
     * reported one (a turn's cell: their mean, as the cell's asked was) */
    int turn = run_turns_mode(&c->p);
    double server = 0;
    if (got && k) {
        if (turn) {
            for (size_t i = 0; i < k; i++) server += got[i];
            server /= (double)k;
        } else {
            qsort(got, k, sizeof *got, cmp_int);
            server = k % 2 ? got[k / 2] : (got[k / 2 - 1] + got[k / 2]) / 2.0;
        }
    }
    int was = cell->prompt_tokens;
    cell->prompt_basis = CAL_PROMPT_SERVER;
    cell->prompt_exact = 0;
    cell->prompt_asked = was > 0 ? was : (int)lround(asked / (double)rep);
    cell->prompt_tokens = server > 0 ? (int)lround(server) : 0;
    note(c, s->name, "%s: the server counted %d where /tokenize said %d: %zu of %zu requests; the "
         "cell is stored approximate, at the server's count", c->label, cell->prompt_tokens,
         cell->prompt_asked, rep - agree, rep);
    free(got);
}
