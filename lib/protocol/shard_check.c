/* caliper — what makes N shard documents one run (shard.h,
 * cal_shard_merge): one target and protocol, one build, one base seed, no
 * cell fuller than its plan, clocks that can be one run's. Each refusal
 * names the field and both values. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/protocol.h"
#include "caliper/protocol_record.h"
#include "caliper/shard.h"
#include "lib/protocol/shard_internal.h"
#include "lib/util/c_locale.h"

long cal_shard_planned_requests(const cal_protocol *p, const cal_cell *c)
{
    const long most = CAL_RUN_MAX_CELL_REQUESTS;
    if (!p || !c) return most;
    if (p->scenario_json) {                    /* a turn: one request per session */
        json_t *sc = json_loads(p->scenario_json, 0, NULL);
        json_t *u = json_object_get(sc, "users");
        if (!json_is_integer(u)) u = json_object_get(sc, "sessions");
        long n = json_is_integer(u) && json_integer_value(u) > 0 &&
                         json_integer_value(u) <= most ? (long)json_integer_value(u) : most;
        json_decref(sc);
        return n;
    }
    if (!(p->duration_s == 0)) return most;    /* a duration, or unknown */
    if (p->requests > 0) return p->requests;
    if (p->requests < 0) return most;          /* unknown */
    if (c->rate > 0) {                         /* cal_arrivals_default_n of Poisson */
        if (p->arrivals[0] && strncmp(p->arrivals, "poisson", 7)) return most;
        double n = ceil(4 * c->rate);
        return n < 8 ? 8 : n > (double)most ? most : (long)n;
    }
    long n = 2L * c->concurrency;
    return n < 8 ? 8 : n > most ? most : n;
}

/* What else makes N documents one run, each refusal naming the field and
 * both values: one build, one base seed, no cell fuller than its plan. */
int cal_shard_same_run(cal_shard_doc **ds, size_t n, char *why, size_t why_len)
{
    const char *b0 = ds[0]->data->run.build;
    for (size_t i = 1; i < n; i++) {
        const char *b = ds[i]->data->run.build;
        if (!b0 != !b || (b0 && strcmp(b0, b)))
            return cal_why(why, why_len, CAL_EMISMATCH, "merge: shard %zu was measured by another "
                           "build: run.build is \"%s\" in shard 1, \"%s\" in shard %zu: not one run",
                           i + 1, b0 ? b0 : "(none)", b ? b : "(none)", i + 1);
    }
    /* each shard's seed is the base seed plus its own offset
     * (cal_shard_plan): the base is what the user gave, once for all */
    for (size_t i = 1; i < n; i++) {
        const cal_protocol *p0 = &ds[0]->data->proto, *pi = &ds[i]->data->proto;
        uint64_t s0 = p0->seed - (uint64_t)ds[0]->info.index * 1000003u;
        uint64_t si = pi->seed - (uint64_t)ds[i]->info.index * 1000003u;
        if (p0->has_seed != pi->has_seed || (p0->has_seed && s0 != si)) {
            char a[32] = "(none)", b[32] = "(none)";
            if (p0->has_seed) snprintf(a, sizeof a, "%llu", (unsigned long long)s0);
            if (pi->has_seed) snprintf(b, sizeof b, "%llu", (unsigned long long)si);
            return cal_why(why, why_len, CAL_EMISMATCH, "merge: shard %zu was measured from another "
                           "seed: the base seed (protocol.seed less the shard's offset) is %s in "
                           "shard 1, %s in shard %zu: not one run", i + 1, a, b, i + 1);
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < ds[i]->data->n_cells; k++) {
            const cal_cell *c = &ds[i]->data->cells[k];
            long plan = cal_shard_planned_requests(&ds[i]->data->proto, c);
            if (c->n_requests > plan)
                return cal_why(why, why_len, CAL_EPROTO, "merge: shard %zu, cell %zu holds %lld "
                               "requests where its protocol plans at most %ld (protocol.requests %ld, "
                               "concurrency %d): not what that plan measured", i + 1, k + 1,
                               (long long)c->n_requests, plan, ds[i]->data->proto.requests,
                               c->concurrency);
        }
    return CAL_OK;
}

/* The first cell's start of shard d on the merged clock (shifted by delta);
 * 0 when it has none. */
static int64_t first_start(const cal_shard_doc *d, int64_t delta)
{
    for (size_t k = 0; k < d->data->n_cells; k++)
        if (d->data->cells[k].start_ns > 0) return d->data->cells[k].start_ns + delta;
    return 0;
}

/* Clocks that cannot be one run's (shard.h, cal_shard_merge). delta: each
 * shard's shift onto shard 1's clock; measured: every shard has an offset. */
int cal_shard_plausible_clocks(cal_shard_doc **ds, size_t n, const int64_t *delta, int measured,
                               char *why, size_t why_len)
{
    for (size_t i = 0; measured && i < n; i++) {
        const cal_shard_info *f = &ds[i]->info;
        /* shard 1 is the reference: its offset to itself is 0 */
        if (i == 0 && (f->offset_ns != 0 || f->offset_uncertainty_ns != 0))
            return cal_why(why, why_len, CAL_ERANGE, "merge: shard 1 is the reference clock: its "
                           "shard.offset_ns is %lld (uncertainty %lld ns) where it can only be 0: "
                           "a damaged document", (long long)f->offset_ns,
                           (long long)f->offset_uncertainty_ns);
        int64_t res = f->clock_resolution_ns > 0 ? f->clock_resolution_ns : 1;
        if (i > 0 && f->offset_uncertainty_ns < res)
            return cal_why(why, why_len, CAL_ERANGE, "merge: shard %zu's shard.offset_ns %lld is "
                           "uncertain by %lld ns, below the %lld ns resolution of the clock that "
                           "measured it: not a measurement", i + 1, (long long)f->offset_ns,
                           (long long)f->offset_uncertainty_ns, (long long)res);
        /* the hosts' wall clocks say what the offset is to within their
         * synchronisation; an hour from that is not a measured offset */
        const cal_run *r0 = &ds[0]->data->run, *ri = &ds[i]->data->run;
        double wall = ((double)ri->t0_mono_ns - (double)ri->started_wall_ns) -
                      ((double)r0->t0_mono_ns - (double)r0->started_wall_ns);
        double off = (double)f->offset_ns - (double)ds[0]->info.offset_ns;
        if (i > 0 && fabs(off - wall) > (double)CAL_SHARD_WALL_SKEW_NS)
            return cal_why(why, why_len, CAL_ERANGE, "merge: shard %zu's shard.offset_ns is %.0f ns "
                           "where the hosts' wall clocks put it at %.0f ns: %.1f s apart, beyond the "
                           "%lld s their synchronisation allows: not one run's clocks", i + 1, off,
                           wall, fabs(off - wall) / 1e9, CAL_SHARD_WALL_SKEW_NS / 1000000000);
    }
    /* shards that started together start together on the merged clock: a
     * wrong offset (or unsynchronised wall clocks) puts them apart */
    int together = 1;   /* measured offsets come from --mpi, whose ranks start together */
    for (size_t i = 0; i < n; i++) together &= ds[i]->info.common_start == 1 || measured;
    int64_t t0 = first_start(ds[0], delta[0]);
    for (size_t i = 1; together && t0 && i < n; i++) {
        int64_t ti = first_start(ds[i], delta[i]);
        double gap = (double)ti - (double)t0;
        if (ti && fabs(gap) > (double)CAL_SHARD_START_SKEW_NS) {
            if (measured)
                return cal_why(why, why_len, CAL_ERANGE, "merge: the shards started together, but "
                               "shard %zu's shard.offset_ns %lld (uncertainty %lld ns) puts its "
                               "first cell %.1f s %s shard 1's on the merged clock, beyond the "
                               "%lld s one start allows: the offset cannot be right", i + 1,
                               (long long)ds[i]->info.offset_ns,
                               (long long)ds[i]->info.offset_uncertainty_ns, fabs(gap) / 1e9,
                               gap < 0 ? "before" : "after", CAL_SHARD_START_SKEW_NS / 1000000000);
            return cal_why(why, why_len, CAL_ERANGE, "merge: the shards started together "
                           "at one instant, but their wall clocks put shard %zu's first cell %.1f s "
                           "%s shard 1's, beyond the %lld s one start allows: synchronise the "
                           "hosts' clocks (NTP) or measure their offsets (MPI)", i + 1,
                           fabs(gap) / 1e9, gap < 0 ? "before" : "after",
                           CAL_SHARD_START_SKEW_NS / 1000000000);
        }
    }
    return CAL_OK;
}

/* Shards measured against another server, model or API, or under another
 * protocol, are not one run: each shard's target and protocol must equal
 * shard 1's, but for what is each shard's own (its seed, derived from the
 * shared one, and the noise its own store held; a target's load time). */
int cal_shard_same_measurement(cal_shard_doc **ds, size_t n, char *why, size_t why_len)
{
    cal_protocol_diff d;
    for (size_t i = 1; i < n; i++) {
        if (!cal_protocol_first_diff(&ds[0]->data->proto, &ds[i]->data->proto, CAL_PROTOCOL_SAME_RUN, &d))
            continue;
        int target = !strncmp(d.field, "target.", 7);
        return cal_why(why, why_len, CAL_EMISMATCH, "merge: shard %zu was measured %s: %s is %s in "
                       "shard 1, %s in shard %zu: not one run", i + 1,
                       target ? "against another target" : "under another protocol", d.field, d.a,
                       d.b, i + 1);
    }
    return CAL_OK;
}

int cal_shard_saturated(const cal_shard_doc *d, double *busy, double *lag)
{
    int64_t cpu = 0, wall = 0;
    double l = 0;
    for (size_t i = 0; i < d->data->n_cells; i++) {
        const cal_cell *c = &d->data->cells[i];
        cpu += c->cpu_ns;
        wall += c->end_ns > c->start_ns ? c->end_ns - c->start_ns : 0;
        if (c->send_lag_p99_ms > l) l = c->send_lag_p99_ms;
    }
    *busy = wall > 0 ? (double)cpu / (double)wall : NAN;
    *lag = l;
    return (wall > 0 && *busy > BUSY_MAX) || l > LAG_MAX_MS;
}
