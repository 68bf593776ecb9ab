/* caliper gate — what the user typed, as the gate's input (gate.h): one
 * `run --ab` run (stored, or its export file) as shot pairs; two runs as
 * levels with the run-to-run noise of their stored series; protocols
 * checked field by field, the differing fields named in the refusal. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "caliper/analysis.h"
#include "caliper/error.h"
#include "caliper/gate.h"
#include "caliper/store.h"
#include "caliper/trend.h"
#include "gate_internal.h"
#include "report_internal.h"
#include "lib/util/c_locale.h"
#include "lib/util/json.h"

#define NOISE_RUNS 20   /* the newest runs of a series whose levels give the noise */

static int is_file(const char *ref)
{
    struct stat st;
    return stat(ref, &st) == 0 && S_ISREG(st.st_mode);
}

static cal_gate_input *input_new(void)
{
    cal_gate_input *in = calloc(1, sizeof *in);
    return in;
}

static cal_gate_cell *add_cell(cal_gate_input *in, size_t *cap)
{
    if (in->n_cells == *cap) {
        size_t want = *cap ? *cap * 2 : 8;
        cal_gate_cell *c = realloc(in->cells, want * sizeof *c);
        if (!c) return NULL;
        in->cells = c;
        *cap = want;
    }
    cal_gate_cell *c = &in->cells[in->n_cells++];
    memset(c, 0, sizeof *c);
    for (int m = 0; m < CAL_M__N; m++) {
        c->level_a[m] = c->level_b[m] = c->noise_sd[m] = NAN;
        c->noise_df[m] = 0;
    }
    return c;
}

/* ---- one --ab run: shot pairs --------------------------------------------- */

/* The run behind ref: an export file (its cells) or a stored run. */
static int load_data(const char *ref, const char *db, cal_run_data **d, char *err, size_t errn)
{
    if (is_file(ref)) {
        char *text;
        size_t len;
        int e = cal_report_read_file(ref, &text, &len, err, errn);
        if (e) return e;
        e = cal_run_data_from_export(text, len, ref, d, err, errn);
        free(text);
        if (e == CAL_EPROTO)
            cal_report_errf(err, errn, "%s: not the export of a run (\"format\": \"caliper-run\"): a paired "
                            "gate reads the shots of an A/B run, which only the store and its export "
                            "hold", ref);
        return e;
    }
    if (!*ref) { cal_report_errf(err, errn, "RUN: \"\" is empty"); return CAL_EINVAL; }
    cal_store *st = NULL;
    char why[400];
    struct stat sb;
    if (!db || stat(db, &sb) != 0) {
        cal_report_errf(err, errn, "\"%s\" is not a file, and there is no store to look it up in "
                        "(no such store: %s)", ref, db ? db : "(none)");
        return CAL_ENOTFOUND;
    }
    int e = cal_store_open_ex(db, CAL_STORE_READONLY, &st, why, sizeof why);
    if (e) { cal_report_errf(err, errn, "%s", why); return e; }
    int64_t id;
    e = cal_store_find_run(st, ref, &id);
    if (e) cal_report_errf(err, errn, "no run \"%s\" in %s (an id, a label, or \"latest\")", ref, db);
    else if ((e = cal_store_load_run(st, id, 0, d)))
        cal_report_errf(err, errn, "run %s: %s (%s)", ref, cal_strerror(e), cal_store_errmsg(st));
    cal_store_close(&st);
    return e;
}

static int has_side(const cal_run_data *d, const char *t)
{
    for (size_t i = 0; i < d->n_cells; i++)
        if (!strcmp(d->cells[i].target, t)) return 1;
    return 0;
}

static int same_cfg_but_target(const cal_cell *a, const cal_cell *b)
{
    return a->concurrency == b->concurrency && a->rate == b->rate &&
           a->prompt_tokens == b->prompt_tokens && !strcmp(a->content, b->content) &&
           a->max_tokens == b->max_tokens && a->output_fixed == b->output_fixed && a->kind == b->kind;
}

static int paired_from_data(const cal_run_data *d, const char *ref, cal_gate_input *in,
                            char *err, size_t errn)
{
    cal_analysis *an = NULL;
    int e = cal_analysis_run(d, &an);
    if (e) { cal_report_errf(err, errn, "%s: %s", ref, cal_strerror(e)); return e; }
    size_t cap = 0;
    for (size_t gi = 0; gi < an->n_groups && !e; gi++) {
        const cal_group *ga = &an->groups[gi];
        const cal_cell *ca = &d->cells[ga->cells[0]];
        if (strcmp(ca->target, "A") && strcmp(ca->target, "B")) continue;
        const cal_group *gb = NULL;
        for (size_t k = 0; k < an->n_groups && !gb; k++) {
            const cal_cell *cb = &d->cells[an->groups[k].cells[0]];
            if (k != gi && strcmp(cb->target, ca->target) && (!strcmp(cb->target, "A") ||
                !strcmp(cb->target, "B")) && same_cfg_but_target(ca, cb))
                gb = &an->groups[k];
        }
        if (!gb) {
            cal_report_errf(err, errn, "%s: side %s has no twin of its cell %s on side %s: the sides "
                            "did not run the same protocol", ref, ca->target, ga->name,
                            strcmp(ca->target, "A") ? "A" : "B");
            e = CAL_EINVAL;
            break;
        }
        if (strcmp(ca->target, "A")) continue;   /* each pair once, from A */
        if (!ga->n_quoted || !gb->n_quoted) continue;
        cal_fingerprint fa, fb;
        if ((e = cal_fingerprint_of(d, ga->quoted, ga->n_quoted, ga->quoted_kind, &fa)) ||
            (e = cal_fingerprint_of(d, gb->quoted, gb->n_quoted, gb->quoted_kind, &fb)))
            break;
        cal_fp_difference diff[CAL_FPF__N];
        size_t nd = cal_fp_diff(&fa, &fb, diff, CAL_FPF__N);
        if (nd) {
            char t[400];
            cal_fp_diff_text(diff, nd, t, sizeof t);
            cal_report_errf(err, errn, "%s: protocols differ between A and B: %s", ref, t);
            e = CAL_EINVAL;
            break;
        }
        cal_gate_cell *c = add_cell(in, &cap);
        if (!c) { e = CAL_ENOMEM; break; }
        c->fp = fa;
        cal_gate_cell_name(&fa, c->name, sizeof c->name);
        c->a = calloc(ga->n_quoted ? ga->n_quoted : 1, sizeof *c->a);
        c->b = calloc(ga->n_quoted ? ga->n_quoted : 1, sizeof *c->b);
        if (!c->a || !c->b) { e = CAL_ENOMEM; break; }
        for (size_t i = 0; i < ga->n_quoted && c->n_pairs < CAL_GATE_MAX_SHOTS; i++) {
            const cal_cell *sa = &d->cells[ga->quoted[i]];
            for (size_t j = 0; j < gb->n_quoted; j++) {
                const cal_cell *sb = &d->cells[gb->quoted[j]];
                if (sb->shot_index != sa->shot_index) continue;
                size_t p = c->n_pairs++;
                c->shot[p] = sa->shot_index;
                for (int m = 0; m < CAL_M__N; m++) {
                    const cal_field *f = cal_metric_get((cal_metric)m);
                    c->a[p][m] = cal_summary_get(&sa->sum, f);
                    c->b[p][m] = cal_summary_get(&sb->sum, f);
                }
                break;
            }
        }
    }
    cal_analysis_free(&an);
    if (!e && !in->n_cells) {
        cal_report_errf(err, errn, "%s: no measured shot on both sides (an A/B run that stopped "
                        "before its first measured shot?)", ref);
        e = CAL_EINVAL;
    }
    return e;
}

static void meta_from_data(const cal_run_data *d, cal_gate_input *in)
{
    cal_fp_host_of(d->run.host_json, in->host, sizeof in->host);
    cal_fp_probe_of(d->run.build, in->probe, sizeof in->probe);
    char run[48];
    if (d->run.label && d->run.label[0]) snprintf(run, sizeof run, "%.40s", d->run.label);
    else snprintf(run, sizeof run, "run %lld", (long long)d->run.id);
    /* the record names the first side's engine (protocol_record.h) */
    const cal_protocol_target *t = &d->proto.target;
    const char *a = t->command[0] ? t->command : t->url[0] ? t->url : t->name;
    if (a[0]) snprintf(in->base_label, sizeof in->base_label, "%s · A: %.100s", run, a);
    else snprintf(in->base_label, sizeof in->base_label, "%s · A", run);
    snprintf(in->cand_label, sizeof in->cand_label, "%s · B", run);
    snprintf(in->base_id, sizeof in->base_id, "%lld:A", (long long)d->run.id);
    snprintf(in->cand_id, sizeof in->cand_id, "%lld:B", (long long)d->run.id);
    in->base_unix = in->cand_unix = d->run.started_wall_ns > 0 ? d->run.started_wall_ns / 1000000000 : 0;
}

/* ---- two runs: levels and the noise of their series ------------------------ */

/* The run id and series key of a stored result, for its history. */
static int series_of(cal_store *st, const char *id, char *key, size_t n)
{
    key[0] = 0;
    int64_t rid;
    if (cal_store_find_run(st, id, &rid)) return 0;
    cal_run_data *d = NULL;
    if (cal_store_load_run(st, rid, CAL_LOAD_NO_REQS, &d)) return 0;
    snprintf(key, n, "%s", d->proto.noise.series);   /* the record's (protocol_record.h) */
    int ok = key[0] != '\0';
    cal_run_data_free(&d);
    return ok;
}

/* The noise of every metric of cell c from the series keys[0..nk) (the
 * baseline's and the candidate's, pooled by their df when they differ). */
static void history_noise(cal_store *st, char keys[2][CAL_NOISE_SERIES_MAX], size_t nk,
                          cal_gate_cell *c, char *note, size_t nn)
{
    double ss[CAL_M__N] = {0}, df[CAL_M__N] = {0};
    size_t runs[2] = {0, 0};
    for (size_t k = 0; k < nk; k++) {
        if (k == 1 && !strcmp(keys[0], keys[1])) break;
        cal_trend t;
        char why[256];
        if (cal_trend_load(st, keys[k], NOISE_RUNS, &t, why, sizeof why)) continue;
        runs[k] = t.n;
        for (int m = 0; m < CAL_M__N; m++) {
            double sd, d;
            if (cal_trend_noise(&t, (cal_metric)m, &sd, &d)) {
                ss[m] += d * sd * sd;
                df[m] += d;
            }
        }
        cal_trend_free(&t);
    }
    for (int m = 0; m < CAL_M__N; m++)
        if (df[m] > 0) {
            c->noise_sd[m] = sqrt(ss[m] / df[m]);
            c->noise_df[m] = df[m];
        }
    if (nk == 2 && strcmp(keys[0], keys[1]))
        snprintf(note, nn, "run-to-run noise from the stored runs of both series (%zu of the "
                 "baseline's, %zu of the candidate's): consecutive runs' levels", runs[0], runs[1]);
    else
        snprintf(note, nn, "run-to-run noise from %zu stored runs of the series: consecutive runs' "
                 "levels%s", runs[0], runs[0] < 3 ? " (3 or more are needed)" : "");
}

static int runs_from_results(const char *const *refs, const char *db, cal_gate_input *in,
                             char *err, size_t errn)
{
    cal_result *r[2] = {NULL, NULL};
    int file[2];
    int e = CAL_OK;
    for (int s = 0; s < 2 && !e; s++) {
        file[s] = is_file(refs[s]);
        e = cal_result_load(refs[s], db, &r[s], err, errn);
        if (e) break;
        for (size_t i = 0; i < r[s]->n_cells; i++)
            if (r[s]->cells[i].target[0]) {
                cal_report_errf(err, errn, "%s is an A/B run: gate it alone (its A and B are "
                                "the baseline and the candidate, paired)", refs[s]);
                e = CAL_EINVAL;
                break;
            }
    }
    if (e) goto out;
    size_t qa[256], qb[256];
    size_t na = cal_gate_quoted_cells(r[0], qa, 256), nb = cal_gate_quoted_cells(r[1], qb, 256);
    if (!na || !nb) {
        cal_report_errf(err, errn, "%s has no measured cell", !na ? refs[0] : refs[1]);
        e = CAL_EINVAL;
        goto out;
    }
    /* every quoted cell needs a twin with the same protocol, both ways */
    char used[256] = {0};
    size_t cap = 0;
    for (size_t i = 0; i < na && !e; i++) {
        const cal_rcell *ca = &r[0]->cells[qa[i]];
        int found = -1;
        size_t best = (size_t)-1;
        int near = -1;
        for (size_t j = 0; j < nb; j++) {
            size_t nd = cal_fp_diff(&ca->fp, &r[1]->cells[qb[j]].fp, NULL, 0);
            if (!nd && !used[j]) { found = (int)j; break; }
            if (nd < best) { best = nd; near = (int)j; }
        }
        if (found < 0) {
            cal_fp_difference diff[CAL_FPF__N];
            char t[500], nm[128];
            size_t nd = cal_fp_diff(&ca->fp, &r[1]->cells[qb[near]].fp, diff, CAL_FPF__N);
            cal_fp_diff_text(diff, nd, t, sizeof t);
            cal_gate_cell_name(&ca->fp, nm, sizeof nm);
            cal_report_errf(err, errn, "protocols differ: %s's cell %s has no twin in %s; the "
                            "nearest differs in %s", r[0]->label, nm, r[1]->label, t);
            e = CAL_EINVAL;
            break;
        }
        used[found] = 1;
        cal_gate_cell *c = add_cell(in, &cap);
        if (!c) { e = CAL_ENOMEM; break; }
        c->fp = ca->fp;
        cal_gate_cell_name(&ca->fp, c->name, sizeof c->name);
        for (int m = 0; m < CAL_M__N; m++) {
            c->level_a[m] = ca->v[m];
            c->level_b[m] = r[1]->cells[qb[found]].v[m];
        }
    }
    for (size_t j = 0; j < nb && !e; j++)
        if (!used[j]) {
            char nm[128];
            cal_gate_cell_name(&r[1]->cells[qb[j]].fp, nm, sizeof nm);
            cal_report_errf(err, errn, "protocols differ: %s's cell %s has no twin in %s",
                            r[1]->label, nm, r[0]->label);
            e = CAL_EINVAL;
        }
    if (e) goto out;
    in->design = CAL_GATE_RUNS;
    snprintf(in->base_label, sizeof in->base_label, "%s", r[0]->label);
    snprintf(in->cand_label, sizeof in->cand_label, "%s", r[1]->label);
    snprintf(in->base_id, sizeof in->base_id, "%s", r[0]->id);
    snprintf(in->cand_id, sizeof in->cand_id, "%s", r[1]->id);
    snprintf(in->host, sizeof in->host, "%s", r[0]->host);
    snprintf(in->probe, sizeof in->probe, "%s", r[0]->probe);
    in->base_unix = r[0]->created_unix;
    in->cand_unix = r[1]->created_unix;
    /* the run-to-run noise: only the store holds repeats */
    if (file[0] || file[1]) {
        snprintf(in->noise, sizeof in->noise, "separate runs read from %s: a file holds one run and "
                 "no repeats of it, so the run-to-run noise is unknown; gate an A/B run, or two "
                 "stored runs whose series have 3 or more runs", file[0] && file[1] ? "files" : "a file");
        goto out;
    }
    cal_store *st = NULL;
    char why[400];
    if (cal_store_open_ex(db, CAL_STORE_READONLY, &st, why, sizeof why)) {
        snprintf(in->noise, sizeof in->noise, "the store could not be read for the runs' history: %.300s", why);
        goto out;
    }
    char keys[2][CAL_NOISE_SERIES_MAX];
    int ka = series_of(st, r[0]->id, keys[0], sizeof keys[0]);
    int kb = series_of(st, r[1]->id, keys[1], sizeof keys[1]);
    if (!ka && !kb) {
        snprintf(in->noise, sizeof in->noise, "neither run belongs to a stored shot series (one "
                 "concurrency and prompt length, not cold every shot): the run-to-run noise is unknown; gate a "
                 "paired A/B run");
    } else {
        if (!ka) memcpy(keys[0], keys[1], sizeof keys[0]);
        if (!kb) memcpy(keys[1], keys[0], sizeof keys[1]);
        for (size_t i = 0; i < in->n_cells; i++)
            history_noise(st, keys, 2, &in->cells[i], in->noise, sizeof in->noise);
    }
    cal_store_close(&st);
out:
    cal_result_free(&r[0]);
    cal_result_free(&r[1]);
    return e;
}

int cal_gate_load(const char *const *refs, size_t n, const char *db, cal_gate_input **out,
                  char *err, size_t errn)
{
    if (!refs || !out) return CAL_EINVAL;
    if (n < 1 || n > 2) {
        cal_report_errf(err, errn, "give one A/B run, or a baseline and a candidate (got %zu)", n);
        return CAL_EINVAL;
    }
    cal_gate_input *in = input_new();
    if (!in) return CAL_ENOMEM;
    int e;
    if (n == 1) {
        cal_run_data *d = NULL;
        e = load_data(refs[0], db, &d, err, errn);
        if (!e && !d->n_cells) {
            cal_report_errf(err, errn, "%s has no measured cell: an empty run (it stopped before its "
                            "first shot?)", refs[0]);
            e = CAL_EINVAL;
        } else if (!e && !(has_side(d, "A") && has_side(d, "B"))) {
            cal_report_errf(err, errn, "%s is not an A/B run (no targets A and B): give it with "
                            "a second run to compare, or gate an A/B run", refs[0]);
            e = CAL_EINVAL;
        }
        if (!e) {
            in->design = CAL_GATE_PAIRED;
            meta_from_data(d, in);
            e = paired_from_data(d, refs[0], in, err, errn);
        }
        cal_run_data_free(&d);
    } else {
        e = runs_from_results(refs, db, in, err, errn);
    }
    if (e) { cal_gate_input_free(&in); return e; }
    *out = in;
    return CAL_OK;
}
