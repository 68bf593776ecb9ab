/* Log-linear latency histograms: bucketing, merge, percentiles and the
 * compact serialised form stored per cell (include/caliper/hist.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/hist.h"

#define TOP_BUCKET (CAL_HIST_BUCKETS - 1)
#define HEADER_BYTES (4 + 8 + 8 + 8 + 8 + 8 + 4)
#define PAIR_BYTES (2 + 8)

const char *cal_hist_metric_name(cal_hist_metric m)
{
    static const char *const N[CAL_HIST_N_METRIC] = {"ttft", "itl", "tpot", "e2el"};
    return (unsigned)m < CAL_HIST_N_METRIC ? N[m] : "?";
}

void cal_hist_init(cal_hist *h) { memset(h, 0, sizeof *h); }

int cal_hist_bucket(int64_t v)
{
    if (v < CAL_HIST_LINEAR) return v < 0 ? 0 : (int)v;
    int e = 63 - __builtin_clzll((unsigned long long)v);   /* 7 .. 62 */
    if (e >= CAL_HIST_TOP_BIT) return TOP_BUCKET;
    int shift = e - 6;                                       /* sub in [64, 127] */
    int sub = (int)(v >> shift);
    return CAL_HIST_LINEAR + (e - 7) * CAL_HIST_SUB + (sub - CAL_HIST_SUB);
}

int64_t cal_hist_bucket_lo(int b)
{
    if (b < CAL_HIST_LINEAR) return b < 0 ? 0 : b;
    int k = b - CAL_HIST_LINEAR, e = 7 + k / CAL_HIST_SUB;
    return (int64_t)(CAL_HIST_SUB + k % CAL_HIST_SUB) << (e - 6);
}

int64_t cal_hist_bucket_width(int b)
{
    if (b < CAL_HIST_LINEAR) return 1;
    return (int64_t)1 << (7 + (b - CAL_HIST_LINEAR) / CAL_HIST_SUB - 6);
}

void cal_hist_add(cal_hist *h, int64_t v)
{
    if (v < 0) v = 0;
    if (h->n == 0 || v < h->min_ns) h->min_ns = v;
    if (h->n == 0 || v > h->max_ns) h->max_ns = v;
    h->n++;
    h->sum_ns += (double)v;
    h->sumsq_ns2 += (double)v * (double)v;
    h->counts[cal_hist_bucket(v)]++;
}

void cal_hist_merge(cal_hist *dst, const cal_hist *src)
{
    if (src->n == 0) return;
    if (dst->n == 0 || src->min_ns < dst->min_ns) dst->min_ns = src->min_ns;
    if (dst->n == 0 || src->max_ns > dst->max_ns) dst->max_ns = src->max_ns;
    dst->n += src->n;
    dst->sum_ns += src->sum_ns;
    dst->sumsq_ns2 += src->sumsq_ns2;
    for (int b = 0; b < CAL_HIST_BUCKETS; b++) dst->counts[b] += src->counts[b];
}

/* The k-th smallest value (0-based) as its bucket's midpoint, within
 * [min, max]; the walk resumes from *b / *below for ascending k. */
void cal_cell_hists_init(cal_cell_hists *ch)
{
    memset(ch, 0, sizeof *ch);
    for (int m = 0; m < CAL_HIST_N_METRIC; m++) cal_hist_init(&ch->h[m]);
}

void cal_cell_hists_merge(cal_cell_hists *dst, const cal_cell_hists *src)
{
    for (int m = 0; m < CAL_HIST_N_METRIC; m++) cal_hist_merge(&dst->h[m], &src->h[m]);
    dst->folded += src->folded;
    dst->chunks_dropped += src->chunks_dropped;
}

static double order_stat(const cal_hist *h, uint64_t k, int *b, uint64_t *below)
{
    if (k == 0) return (double)h->min_ns;
    if (k == h->n - 1) return (double)h->max_ns;
    while (*b < CAL_HIST_BUCKETS && *below + h->counts[*b] <= k) *below += h->counts[(*b)++];
    if (*b >= CAL_HIST_BUCKETS) return (double)h->max_ns;
    double mid = (double)cal_hist_bucket_lo(*b) + (double)(cal_hist_bucket_width(*b) - 1) / 2;
    if (*b == TOP_BUCKET) mid = (double)h->max_ns;
    if (mid < (double)h->min_ns) mid = (double)h->min_ns;
    if (mid > (double)h->max_ns) mid = (double)h->max_ns;
    return mid;
}

double cal_hist_percentile_ms(const cal_hist *h, double p)
{
    if (!h || h->n == 0 || !(p >= 0 && p <= 100)) return NAN;
    double rank = p / 100 * (double)(h->n - 1);
    uint64_t lo = (uint64_t)floor(rank);
    double frac = rank - (double)lo;
    int b = 0;
    uint64_t below = 0;
    double a = order_stat(h, lo, &b, &below);
    double v = a;
    if (frac > 0 && lo + 1 < h->n) v = a + frac * (order_stat(h, lo + 1, &b, &below) - a);
    return v / 1e6;
}

double cal_hist_mean_ms(const cal_hist *h)
{
    return h && h->n ? h->sum_ns / (double)h->n / 1e6 : NAN;
}

double cal_hist_sd_ms(const cal_hist *h)
{
    if (!h || h->n < 2) return NAN;
    double n = (double)h->n, mean = h->sum_ns / n;
    double var = (h->sumsq_ns2 - n * mean * mean) / (n - 1);
    return sqrt(var > 0 ? var : 0) / 1e6;
}

/* ---- serialised form ---------------------------------------------------- */

static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static double bitsd(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

int cal_hist_encode(const cal_hist *h, uint8_t **out, size_t *out_bytes)
{
    uint32_t nz = 0;
    for (int b = 0; b < CAL_HIST_BUCKETS; b++) nz += h->counts[b] != 0;
    size_t n = HEADER_BYTES + (size_t)nz * PAIR_BYTES;
    uint8_t *p = malloc(n);
    if (!p) return CAL_ENOMEM;
    memcpy(p, "CH1", 4);
    put64(p + 4, h->n);
    put64(p + 12, (uint64_t)h->min_ns);
    put64(p + 20, (uint64_t)h->max_ns);
    put64(p + 28, dbits(h->sum_ns));
    put64(p + 36, dbits(h->sumsq_ns2));
    for (int i = 0; i < 4; i++) p[44 + i] = (uint8_t)(nz >> (8 * i));
    uint8_t *q = p + HEADER_BYTES;
    for (int b = 0; b < CAL_HIST_BUCKETS; b++) {
        if (!h->counts[b]) continue;
        q[0] = (uint8_t)b;
        q[1] = (uint8_t)(b >> 8);
        put64(q + 2, h->counts[b]);
        q += PAIR_BYTES;
    }
    *out = p;
    *out_bytes = n;
    return CAL_OK;
}

int cal_hist_decode(const uint8_t *blob, size_t bytes, cal_hist *h, char *why, size_t why_len)
{
    cal_hist_init(h);
    if (!blob || bytes < HEADER_BYTES || memcmp(blob, "CH1", 4) != 0)
        return cal_why(why, why_len, CAL_EPROTO, "histogram: not a CH1 blob (%zu bytes)", bytes);
    cal_hist t;
    cal_hist_init(&t);
    t.n = get64(blob + 4);
    t.min_ns = (int64_t)get64(blob + 12);
    t.max_ns = (int64_t)get64(blob + 20);
    t.sum_ns = bitsd(get64(blob + 28));
    t.sumsq_ns2 = bitsd(get64(blob + 36));
    uint32_t nz = 0;
    for (int i = 0; i < 4; i++) nz |= (uint32_t)blob[44 + i] << (8 * i);
    if (nz > CAL_HIST_BUCKETS || bytes != HEADER_BYTES + (size_t)nz * PAIR_BYTES)
        return cal_why(why, why_len, CAL_EPROTO, "histogram: %u buckets in %zu bytes", nz, bytes);
    if (t.min_ns < 0 || t.max_ns < t.min_ns || !isfinite(t.sum_ns) || !isfinite(t.sumsq_ns2) ||
        t.sum_ns < 0 || t.sumsq_ns2 < 0)
        return cal_why(why, why_len, CAL_EPROTO, "histogram: min %lld, max %lld, sums out of range",
                       (long long)t.min_ns, (long long)t.max_ns);
    const uint8_t *q = blob + HEADER_BYTES;
    int prev = -1;
    uint64_t total = 0;
    for (uint32_t i = 0; i < nz; i++, q += PAIR_BYTES) {
        int b = q[0] | q[1] << 8;
        uint64_t c = get64(q + 2);
        if (b <= prev || b >= CAL_HIST_BUCKETS || c == 0 || c > t.n - total)
            return cal_why(why, why_len, CAL_EPROTO, "histogram: bucket %d (count %llu) out of order "
                                                      "or range", b, (unsigned long long)c);
        t.counts[b] = c;
        total += c;
        prev = b;
    }
    if (total != t.n)
        return cal_why(why, why_len, CAL_EPROTO, "histogram: buckets hold %llu values, n says %llu",
                       (unsigned long long)total, (unsigned long long)t.n);
    if (t.n && (cal_hist_bucket(t.min_ns) > prev || cal_hist_bucket(t.max_ns) < prev))
        return cal_why(why, why_len, CAL_EPROTO, "histogram: min/max outside the filled buckets");
    *h = t;
    return CAL_OK;
}
