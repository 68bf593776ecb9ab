/* caliper — what each prompt length of a run rests on, in words (the run
 * analysis, analysis.h): per group the cells whose length the server
 * contradicted, run-wide what confirmed the exact ones and each reason a
 * length is approximate, every sentence from the basis its cell stored. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "caliper/analysis.h"
#include "caliper/protocol.h"
#include "lib/protocol/analysis_internal.h"
#include "lib/util/c_locale.h"

/* The basis a cell's length stands on; a cell stored before schema 9 has
 * none recorded: exact by /tokenize alone, or approximate for a reason the
 * protocol may still show (a dataset, drawn lengths). */
static cal_prompt_basis basis_of(const cal_run_data *d, const cal_cell *c)
{
    if (c->prompt_basis != CAL_PROMPT_UNRECORDED) return c->prompt_basis;
    if (c->prompt_exact) return CAL_PROMPT_UNCONFIRMED;
    if (d->proto.dataset.present || d->proto.prompt_len[0] || c->prompt_tokens == 0)
        return CAL_PROMPT_MIXED;
    return CAL_PROMPT_UNRECORDED;
}

/* A request the server counted: ok, with usage.prompt_tokens. */
static int counted(const cal_req_result *q) { return q->status == CAL_REQ_OK && q->prompt_tokens >= 0; }

/* Every sentence about prompt lengths, each from the condition it names:
 * per group the cells the server contradicted; run-wide what confirmed the
 * exact ones (and what the server adds to every prompt), what could not,
 * and one line per reason a length is approximate. */
void cal_an_prompt_verdicts(const cal_run_data *d, const cal_analysis *a, vlist *l)
{
    cal_verdict *v;
    int chat = !strcmp(d->proto.target.api, "chat");
    /* the server's count where it disagreed: per group */
    for (size_t gi = 0; gi < a->n_groups; gi++) {
        const cal_group *g = &a->groups[gi];
        long rep = 0, off_n = 0, asked = 0, turn = 0;
        int offset = -1;
        const cal_cell *c0 = NULL;
        for (size_t i = 0; i < g->n_cells; i++) {
            const cal_cell *c = &d->cells[g->cells[i]];
            if (c->prompt_basis != CAL_PROMPT_SERVER || c->shot_kind == CAL_SHOT_WARMUP) continue;
            if (!c0) c0 = c;
            if (c->prompt_offset >= 0) offset = c->prompt_offset;
            turn |= !strcmp(c->content, "chat") || !strcmp(c->content, "replay");
            for (int64_t q = 0; q < c->n_requests && c->req_first + (size_t)q < d->n_reqs; q++) {
                const cal_req_result *r = &d->reqs[c->req_first + (size_t)q];
                if (!counted(r)) continue;
                rep++;
                off_n += r->prompt_tokens - (c->prompt_offset > 0 ? c->prompt_offset : 0) != c->prompt_asked;
            }
            asked = c->prompt_asked;
        }
        if (!c0 || !(v = cal_an_vadd(l, CAL_VK_PROMPT_CHECK))) continue;
        cal_an_for_group(v, g, gi);
        v->direction = -1;
        v->values[0] = c0->prompt_tokens;
        v->values[1] = (double)asked;
        v->values[2] = (double)off_n;
        v->values[3] = (double)rep;
        v->n = (int)rep;
        char add[96] = "";
        if (offset > 0)
            cal_snprintf(add, sizeof add, " (its %d less the %d it adds to every prompt)",
                         c0->prompt_tokens + offset, offset);
        if (turn || !rep)
            cal_snprintf(v->text, sizeof v->text, "prompt length: the server counted a mean of %d%s "
                         "where /tokenize said %ld (%ld requests): stored approximate, at the server's "
                         "count, which fits and compare use", c0->prompt_tokens, add, asked, rep);
        else
            cal_snprintf(v->text, sizeof v->text, "prompt length: the server counted %d%s where "
                         "/tokenize said %ld: %ld of %ld requests; stored approximate, at the "
                         "server's count, which fits and compare use", c0->prompt_tokens, add,
                         asked, off_n, rep);
    }
    /* run-wide: confirmed, unconfirmed, and each reason for an approximate one */
    long conf_req = 0, conf_cells = 0, unconf_cells = 0, unconf_req = 0;
    int offset = -1;
    int seen[CAL_PROMPT__N] = {0};
    long mixed_req = 0, mixed_counted = 0;
    int lengths[CAL_PROMPT__N][4];
    int n_len[CAL_PROMPT__N] = {0};
    for (size_t i = 0; i < d->n_cells; i++) {
        const cal_cell *c = &d->cells[i];
        cal_prompt_basis b = basis_of(d, c);
        seen[b]++;
        if ((b == CAL_PROMPT_CONFIRMED || b == CAL_PROMPT_SERVER) && c->prompt_offset >= 0)
            offset = c->prompt_offset;
        int dup = 0;
        for (int k = 0; k < n_len[b]; k++) dup |= lengths[b][k] == c->prompt_tokens;
        if (!dup && n_len[b] < 4) lengths[b][n_len[b]++] = c->prompt_tokens;
        for (int64_t q = 0; q < c->n_requests && c->req_first + (size_t)q < d->n_reqs; q++) {
            const cal_req_result *r = &d->reqs[c->req_first + (size_t)q];
            if (b == CAL_PROMPT_CONFIRMED) conf_req += counted(r);
            if (b == CAL_PROMPT_UNCONFIRMED) unconf_req += r->status == CAL_REQ_OK;
            if (b == CAL_PROMPT_MIXED) { mixed_req += r->status == CAL_REQ_OK; mixed_counted += counted(r); }
        }
        conf_cells += b == CAL_PROMPT_CONFIRMED;
        unconf_cells += b == CAL_PROMPT_UNCONFIRMED && c->prompt_basis == CAL_PROMPT_UNCONFIRMED;
    }
    char lens[CAL_PROMPT__N][64];
    for (int b = 0; b < CAL_PROMPT__N; b++) {
        size_t o = 0;
        lens[b][0] = 0;
        for (int k = 0; k < n_len[b] && o < sizeof lens[b]; k++)
            o += (size_t)snprintf(lens[b] + o, sizeof lens[b] - o, "%s%d", k ? ", " : "", lengths[b][k]);
    }
    if (conf_cells && (v = cal_an_vadd(l, CAL_VK_PROMPT_CHECK))) {
        v->direction = 0;
        v->n = (int)conf_req;
        v->values[0] = offset;
        char add[160] = "";
        if (offset > 0)
            cal_snprintf(add, sizeof add, "; it adds %d token%s to every prompt (%s), measured once and "
                         "taken off its count", offset, offset == 1 ? "" : "s",
                         chat ? "its chat template" : "special tokens such as a BOS");
        cal_snprintf(v->text, sizeof v->text, "prompt lengths (%s tok): exact by /tokenize, confirmed "
                     "by the server's own count (usage.prompt_tokens) in %ld of %ld requests%s",
                     lens[CAL_PROMPT_CONFIRMED], conf_req, conf_req, add);
    }
    if (unconf_cells && (v = cal_an_vadd(l, CAL_VK_PROMPT_CHECK))) {
        v->judged = 0;
        v->n = (int)unconf_req;
        cal_snprintf(v->text, sizeof v->text, "prompt lengths (%s tok): exact by /tokenize, not "
                     "confirmed by the server: it reported no usable usage.prompt_tokens (none, or "
                     "not a plausible count) in %ld requests", lens[CAL_PROMPT_UNCONFIRMED], unconf_req);
    }
    static const struct { cal_prompt_basis b; const char *why; } R[] = {
        {CAL_PROMPT_NO_TOKENIZE, "the target has no /tokenize (4 characters per token)"},
        {CAL_PROMPT_TOKENIZER_FAILED, "the target's /tokenize failed (4 characters per token)"},
        {CAL_PROMPT_BELOW_SHORTEST, "shorter than the unique nonce line each prompt starts with: "
                                    "those prompts are the nonce line alone"},
        {CAL_PROMPT_NEAREST, "no cut of the text counted that length by /tokenize: the nearest "
                             "length was used"},
        {CAL_PROMPT_ESTIMATED, "each prompt cut at the content's characters per token and "
                               "corrected once against /tokenize (each request's own count is the "
                               "server's, where it reports one)"},
        {CAL_PROMPT_UNRECORDED, "stored before caliper recorded why (no /tokenize, its failure, or "
                                "a length below the shortest exact one)"},
    };
    for (size_t k = 0; k < sizeof R / sizeof R[0]; k++) {
        if (!seen[R[k].b] || !(v = cal_an_vadd(l, CAL_VK_PROMPT_APPROX))) continue;
        v->judged = 0;
        v->n = seen[R[k].b];
        cal_snprintf(v->text, sizeof v->text, "prompt lengths are approximate (%s tok): %s",
                     lens[R[k].b], R[k].why);
    }
    if (seen[CAL_PROMPT_MIXED] && (v = cal_an_vadd(l, CAL_VK_PROMPT_APPROX))) {
        v->n = (int)mixed_req;
        const char *from = d->proto.dataset.present ? "the dataset's texts" : "drawn lengths";
        if (mixed_counted)
            cal_snprintf(v->text, sizeof v->text, "prompt lengths vary by request (%s): each "
                         "request's length is the server's own count, reported for %ld of %ld",
                         from, mixed_counted, mixed_req);
        else
            cal_snprintf(v->text, sizeof v->text, "prompt lengths vary by request (%s): the server "
                         "reported no usable usage.prompt_tokens, so they are not known", from);
    }
}

