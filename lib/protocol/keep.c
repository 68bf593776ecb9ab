/* --keep-chunks: fold each ended request into its cell's histograms and
 * keep its chunk timestamps while the run's budget lasts (keep.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/keep.h"
#include "caliper/series.h"

int cal_keep_parse(const char *s, long long *limit, char *why, size_t why_len)
{
    if (!s) return cal_why(why, why_len, CAL_EINVAL, "keep_chunks: missing value");
    if (!strcmp(s, "all")) { *limit = CAL_KEEP_ALL; return CAL_OK; }
    if (!strcmp(s, "none")) { *limit = 0; return CAL_OK; }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    long long mul = 1;
    if (end && *end == 'k' && end[1] == '\0') { mul = 1000; end++; }
    else if (end && *end == 'M' && end[1] == '\0') { mul = 1000000; end++; }
    if (errno || end == s || *end || v < 0 || v > (1LL << 50) / mul || s[0] == '-' || s[0] == '+')
        return cal_why(why, why_len, CAL_EINVAL,
                       "\"%s\" is not all, none or a count of timestamps", s);
    *limit = v * mul;
    return CAL_OK;
}

const char *cal_keep_name(long long limit, char *buf, size_t n)
{
    if (limit < 0) snprintf(buf, n, "all");
    else if (limit == 0) snprintf(buf, n, "none");
    else snprintf(buf, n, "%lld", limit);
    return buf;
}

/* a series value in ms as the histogram's ns */
static void add_ms(cal_hist *h, double ms)
{
    if (isfinite(ms)) cal_hist_add(h, llround(ms * 1e6));
}

void cal_cell_hists_add(cal_cell_hists *ch, const cal_req_result *q)
{
    ch->folded++;
    /* the summary's series, through the one extractor (series.h): ok
     * requests only */
    add_ms(&ch->h[CAL_HIST_E2E], cal_req_sample(q, CAL_S_E2E_MS));
    add_ms(&ch->h[CAL_HIST_TTFT], cal_req_sample(q, CAL_S_TTFT_MS));
    add_ms(&ch->h[CAL_HIST_TPOT], cal_req_sample(q, CAL_S_TPOT_MS));
    cal_itl_iter it;
    double g;
    cal_itl_begin(&it, q);
    while (cal_itl_next(&it, &g)) add_ms(&ch->h[CAL_HIST_ITL], g);
}

void cal_keep_init(cal_keep *k, long long limit)
{
    memset(k, 0, sizeof *k);
    k->limit = limit;
    pthread_mutex_init(&k->mu, NULL);
}

void cal_keep_destroy(cal_keep *k) { pthread_mutex_destroy(&k->mu); }

void cal_keep_begin(cal_keep *k, cal_cell_hists *cell)
{
    pthread_mutex_lock(&k->mu);
    k->cell = cell;
    k->calls = 0;
    if (cell) cal_cell_hists_init(cell);
    pthread_mutex_unlock(&k->mu);
}

void cal_keep_fold(void *ud, cal_req_result *r)
{
    cal_keep *k = ud;
    pthread_mutex_lock(&k->mu);
    k->calls++;
    if (k->cell) cal_cell_hists_add(k->cell, r);
    /* a request keeps all its timestamps or none, so a kept one is whole */
    int keep = k->limit < 0 || (r->chunk_ns && r->n_chunks <= k->limit - k->used);
    if (r->chunk_ns && keep) k->used += r->n_chunks;
    if (!keep && r->chunk_ns) {
        free(r->chunk_ns);
        r->chunk_ns = NULL;
        if (k->cell && r->status == CAL_REQ_OK && r->n_chunks > 1) k->cell->chunks_dropped++;
    }
    pthread_mutex_unlock(&k->mu);
}

void cal_keep_itl_from_hist(const cal_cell_hists *ch, cal_summary *s)
{
    const cal_hist *h = &ch->h[CAL_HIST_ITL];
    s->mean_itl_ms = cal_hist_mean_ms(h);
    s->std_itl_ms = cal_hist_sd_ms(h);
    s->median_itl_ms = cal_hist_percentile_ms(h, 50);
    s->p99_itl_ms = cal_hist_percentile_ms(h, 99);
}

const char *cal_keep_summary(const cal_cell_hists *ch, const cal_req_result *r, size_t n,
                             cal_summary *s)
{
    int complete = 1;
    for (size_t i = 0; i < n && complete; i++)
        if (r[i].status == CAL_REQ_OK && r[i].n_chunks > 1 && !r[i].chunk_ns) complete = 0;
    if (complete) return "raw";
    cal_keep_itl_from_hist(ch, s);
    return "histogram";
}
