/* The SPEC 1.4 formulas: pure arithmetic with every input range-checked, so a
 * caller gets an error naming the input instead of a NaN or an infinity.
 * Derivations and worked examples: docs/methodology.md. */
#include <math.h>
#include "caliper/error.h"
#include "caliper/formulas.h"

#define FAIL(name, code) do { if (bad) *bad = (name); return (code); } while (0)
#define FINITE(x, name)  do { if (!isfinite(x)) FAIL(name, CAL_EINVAL); } while (0)
#define POS(x, name)     do { FINITE(x, name); if (!((x) > 0)) FAIL(name, CAL_ERANGE); } while (0)
#define NONNEG(x, name)  do { FINITE(x, name); if ((x) < 0) FAIL(name, CAL_ERANGE); } while (0)
#define RESULT(x, name)  do { if (!isfinite(x)) FAIL(name, CAL_ERANGE); } while (0)

int cal_f_rate(double tokens, double seconds, double *tps, const char **bad)
{
    POS(tokens, "tokens");      /* 0 tokens is no rate: a typo, not a result */
    POS(seconds, "seconds");
    double r = tokens / seconds;
    RESULT(r, "seconds");
    if (!(r > 0)) FAIL("seconds", CAL_ERANGE);            /* underflowed to 0 */
    *tps = r;
    return CAL_OK;
}

int cal_f_warm_from_cold(double cold, double f_cold, double f_warm, double *warm,
                         const char **bad)
{
    POS(cold, "cold");
    POS(f_cold, "f-cold");
    POS(f_warm, "f-warm");
    double r = cold * (f_warm / f_cold);
    RESULT(r, "cold");
    *warm = r;
    return CAL_OK;
}

int cal_f_power_residual(double wall, double gpu, double mem, double *res, const char **bad)
{
    POS(wall, "wall");
    POS(gpu, "gpu");            /* a GPU at 0 W was not measured */
    NONNEG(mem, "memory");
    double r = wall - gpu - mem;
    if (r < 0) FAIL("wall", CAL_ERANGE);   /* the parts exceed the wall */
    *res = r;
    return CAL_OK;
}

int cal_f_power_gpu(double wall, double mem, double residual, double *gpu, const char **bad)
{
    POS(wall, "wall");
    NONNEG(mem, "memory");
    NONNEG(residual, "residual");
    double r = wall - mem - residual;
    if (r < 0) FAIL("wall", CAL_ERANGE);
    *gpu = r;
    return CAL_OK;
}

int cal_f_whole_turn(double ttft, double decode, double s, double *speedup,
                     double *ttft_share, const char **bad)
{
    NONNEG(ttft, "ttft");
    POS(decode, "decode");      /* no decode: the speedup applies to nothing */
    POS(s, "speedup");
    double r = (ttft + decode * s) / (ttft + decode);
    RESULT(r, "speedup");
    *speedup = r;
    if (ttft_share) *ttft_share = ttft / (ttft + decode);
    return CAL_OK;
}

int cal_f_bw_saving(double bytes, double bw, double share, double *saved, const char **bad)
{
    POS(bytes, "bytes");        /* saving nothing predicts no gain to compare with */
    POS(bw, "bandwidth");
    POS(share, "share");
    if (share > 1) FAIL("share", CAL_ERANGE);
    double r = bytes / bw * share;
    RESULT(r, "bandwidth");
    *saved = r;
    return CAL_OK;
}

int cal_f_bw_predicted(double tok_per_step, double step, double saved, double *tps,
                       const char **bad)
{
    POS(tok_per_step, "tokens-per-step");
    POS(step, "step-time");
    NONNEG(saved, "bytes");
    if (!(step - saved > 0)) FAIL("step-time", CAL_ERANGE);  /* saving >= the whole step */
    double r = tok_per_step / (step - saved);
    RESULT(r, "step-time");
    *tps = r;
    return CAL_OK;
}

int cal_f_capacity(const double *models, size_t n, double reserve, double memory,
                   double *need, double *headroom, int *fits, const char **bad)
{
    if (!models || n == 0) FAIL("models", CAL_EINVAL);
    double sum = 0;
    for (size_t i = 0; i < n; i++) { POS(models[i], "models"); sum += models[i]; }
    NONNEG(reserve, "reserve");
    POS(memory, "memory");
    sum += reserve;
    RESULT(sum, "models");
    *need = sum;
    *headroom = memory - sum;
    *fits = memory >= sum;
    return CAL_OK;
}

int cal_f_amdahl(double s, double p, double *e2e, const char **bad)
{
    POS(s, "kernel-speedup");
    FINITE(p, "share");
    if (p < 0 || p > 1) FAIL("share", CAL_ERANGE);
    double d = (1 - p) + p / s;
    if (!(d > 0)) FAIL("kernel-speedup", CAL_ERANGE);
    double r = 1 / d;
    RESULT(r, "kernel-speedup");
    *e2e = r;
    return CAL_OK;
}

int cal_f_amdahl_share(double s, double e2e, double *p, const char **bad)
{
    POS(s, "kernel-speedup");
    POS(e2e, "e2e");
    if (s == 1) FAIL("kernel-speedup", CAL_ERANGE);  /* a 1× kernel explains no change */
    double r = (1 - 1 / e2e) / (1 - 1 / s);
    /* A tiny negative or >1 from rounding is still the boundary. */
    if (r < -1e-12 || r > 1 + 1e-12 || !isfinite(r)) FAIL("e2e", CAL_ERANGE);
    *p = r < 0 ? 0 : r > 1 ? 1 : r;
    return CAL_OK;
}

int cal_f_coverage(double kernel, double total, double *coverage, const char **bad)
{
    NONNEG(kernel, "kernel-time");
    POS(total, "total-time");
    if (kernel > total) FAIL("kernel-time", CAL_ERANGE);
    double r = kernel / total;
    RESULT(r, "total-time");
    *coverage = r;
    return CAL_OK;
}

int cal_f_coverage_ceiling(double coverage, double *ceiling, const char **bad)
{
    FINITE(coverage, "coverage");
    if (coverage < 0 || coverage >= 1) FAIL("coverage", CAL_ERANGE);
    *ceiling = 1 / (1 - coverage);
    return CAL_OK;
}

int cal_f_coverage_from_ceiling(double ceiling, double *coverage, const char **bad)
{
    FINITE(ceiling, "ceiling");
    if (ceiling < 1) FAIL("ceiling", CAL_ERANGE);
    *coverage = 1 - 1 / ceiling;
    return CAL_OK;
}

int cal_f_launch_overhead(double total, double kernel, double launches, double *per,
                          const char **bad)
{
    POS(total, "total-time");
    NONNEG(kernel, "kernel-time");
    if (kernel > total) FAIL("kernel-time", CAL_ERANGE);
    FINITE(launches, "launches");
    if (launches < 1) FAIL("launches", CAL_ERANGE);
    double r = (total - kernel) / launches;
    RESULT(r, "launches");
    *per = r;
    return CAL_OK;
}

int cal_f_kv_bytes_per_token(const cal_kv_shape *s, double *bytes, const char **bad)
{
    if (!s) FAIL("layers", CAL_EINVAL);
    POS(s->layers, "layers");
    POS(s->kv_heads, "kv-heads");
    POS(s->k_dim, "head-dim");
    NONNEG(s->v_dim, "v-head-dim");
    POS(s->bits, "kv-bits");
    if (s->bits > 64) FAIL("kv-bits", CAL_ERANGE);
    NONNEG(s->group, "group-size");
    NONNEG(s->scale_bytes, "scale-bytes");
    double v = s->v_dim > 0 ? s->v_dim : s->k_dim;
    double per_elem = s->bits / 8 + (s->group > 0 ? s->scale_bytes / s->group : 0);
    double r = s->layers * s->kv_heads * (s->k_dim + v) * per_elem;
    RESULT(r, "layers");
    if (!(r > 0)) FAIL("kv-bits", CAL_ERANGE);            /* underflowed to 0 */
    *bytes = r;
    return CAL_OK;
}

int cal_f_kv_sequences(double kv, double context, double budget, double weights,
                       double *seqs, double *per_seq, const char **bad)
{
    POS(kv, "kv-per-token");
    POS(context, "context");
    POS(budget, "budget");
    NONNEG(weights, "weights");
    if (weights >= budget) FAIL("weights", CAL_ERANGE);   /* nothing left for KV */
    double one = kv * context;
    RESULT(one, "context");
    if (!(one > 0)) FAIL("kv-per-token", CAL_ERANGE);   /* underflowed to 0 */
    double n = floor((budget - weights) / one);
    RESULT(n, "kv-per-token");
    *per_seq = one;
    *seqs = n;
    return CAL_OK;
}

int cal_f_usable_context(double n1, double p1, double n2, double p2, double budget,
                         double *base, double *slope, double *n_max, const char **bad)
{
    NONNEG(n1, "n1");
    NONNEG(p1, "peak1");
    NONNEG(n2, "n2");
    NONNEG(p2, "peak2");
    POS(budget, "budget");
    if (n1 == n2) FAIL("n2", CAL_ERANGE);                 /* one point: no line */
    double b = (p2 - p1) / (n2 - n1);
    if (!(b > 0) || !isfinite(b)) FAIL("peak2", CAL_ERANGE); /* memory must grow with n */
    double a = p1 - b * n1;
    if (budget <= a) FAIL("budget", CAL_ERANGE);           /* not even the base fits */
    double m = (budget - a) / b;
    RESULT(m, "budget");
    *base = a; *slope = b; *n_max = m;
    return CAL_OK;
}

int cal_f_decode_context(const double n[3], const double t[3], double at, double *a,
                         double *b, double *tps_at, double *dev3, const char **bad)
{
    static const char *nn[3] = {"n1", "n2", "n3"}, *tn[3] = {"t1", "t2", "t3"};
    for (int i = 0; i < 3; i++) { NONNEG(n[i], nn[i]); POS(t[i], tn[i]); }
    NONNEG(at, "at");
    if (n[1] == n[0]) FAIL("n2", CAL_ERANGE);
    if (n[2] == n[0] || n[2] == n[1]) FAIL("n3", CAL_ERANGE);
    double xbar = (n[0] + n[1] + n[2]) / 3, ybar = (t[0] + t[1] + t[2]) / 3;
    double sxx = 0, sxy = 0;
    for (int i = 0; i < 3; i++) {
        sxx += (n[i] - xbar) * (n[i] - xbar);
        sxy += (n[i] - xbar) * (t[i] - ybar);
    }
    double bb = sxy / sxx, aa = ybar - bb * xbar;
    double t_at = aa + bb * at;
    if (!(t_at > 0) || !isfinite(t_at)) FAIL("at", CAL_ERANGE);
    /* The check: point 3 against the line through points 1 and 2. */
    double b12 = (t[1] - t[0]) / (n[1] - n[0]);
    double line3 = t[0] + b12 * (n[2] - n[0]);
    if (!(line3 > 0)) FAIL("t3", CAL_ERANGE);
    double tps = 1 / t_at, dev = t[2] / line3 - 1;
    if (!isfinite(aa) || !isfinite(bb) || !isfinite(tps)) FAIL("at", CAL_ERANGE);
    RESULT(dev, "t3");
    *a = aa; *b = bb;
    *tps_at = tps;
    *dev3 = dev;
    return CAL_OK;
}

int cal_f_leak_watch(double resolution, double slope, double *watch, const char **bad)
{
    POS(resolution, "resolution");
    POS(slope, "slope");
    double r = resolution / slope;
    RESULT(r, "slope");
    *watch = r;
    return CAL_OK;
}

int cal_f_overcommit(const double *limits, size_t n, double memory, double *ratio,
                     const char **bad)
{
    if (!limits || n == 0) FAIL("limits", CAL_EINVAL);
    double sum = 0;
    for (size_t i = 0; i < n; i++) { POS(limits[i], "limits"); sum += limits[i]; }
    POS(memory, "memory");
    RESULT(sum, "limits");
    double r = sum / memory;
    RESULT(r, "memory");
    *ratio = r;
    return CAL_OK;
}

int cal_f_batching_gain(double bw_b, double bw_1, double bpt_1, double bpt_b,
                        double *gain, double *feed, double *bytes_factor, const char **bad)
{
    POS(bw_b, "bw-batch");
    POS(bw_1, "bw-single");
    POS(bpt_1, "bytes-single");
    POS(bpt_b, "bytes-batch");
    double f = bw_b / bw_1, by = bpt_1 / bpt_b;
    RESULT(f, "bw-single");
    RESULT(by, "bytes-batch");
    if (!(f > 0)) FAIL("bw-batch", CAL_ERANGE);         /* underflowed to 0 */
    if (!(by > 0)) FAIL("bytes-single", CAL_ERANGE);
    double g = f * by;
    if (!isfinite(g) || !(g > 0)) FAIL("bw-batch", CAL_ERANGE);
    *feed = f; *bytes_factor = by; *gain = g;
    return CAL_OK;
}

static int spec_check_alpha_k(double alpha, double k, const char **bad)
{
    FINITE(alpha, "alpha");
    if (alpha < 0 || alpha >= 1) FAIL("alpha", CAL_ERANGE);  /* 0/0 at α = 1 */
    FINITE(k, "k");
    if (k < 1 || k > 64 || k != floor(k)) FAIL("k", CAL_ERANGE);
    return CAL_OK;
}

static double spec_E(double alpha, double k) { return (1 - pow(alpha, k + 1)) / (1 - alpha); }

int cal_f_spec_tokens(double alpha, double k, double *E, const char **bad)
{
    int rc = spec_check_alpha_k(alpha, k, bad);
    if (rc) return rc;
    *E = spec_E(alpha, k);
    return CAL_OK;
}

static int spec_check_times(double td, double tv, double tdr, const char **bad)
{
    POS(td, "t-decode");
    POS(tv, "t-verify");
    NONNEG(tdr, "t-draft");
    return CAL_OK;
}

int cal_f_spec_speedup(double alpha, double k, double td, double tv, double tdr,
                       double *speedup, const char **bad)
{
    int rc = spec_check_alpha_k(alpha, k, bad);
    if (!rc) rc = spec_check_times(td, tv, tdr, bad);
    if (rc) return rc;
    double r = spec_E(alpha, k) * td / (tv + k * tdr);
    RESULT(r, "t-verify");
    *speedup = r;
    return CAL_OK;
}

int cal_f_spec_break_even(double k, double td, double tv, double tdr, double *alpha,
                          int *exists, const char **bad)
{
    int rc = spec_check_alpha_k(0, k, bad);
    if (!rc) rc = spec_check_times(td, tv, tdr, bad);
    if (rc) return rc;
    double cost = (tv + k * tdr) / td;   /* speedup = E(α) ÷ cost; E rises in α */
    if (spec_E(0, k) >= cost) { *alpha = 0; *exists = 1; return CAL_OK; }
    if (k + 1 < cost) { *alpha = 1; *exists = 0; return CAL_OK; }  /* E(α→1) = k + 1 */
    double lo = 0, hi = 1;
    for (int i = 0; i < 200 && hi - lo > 1e-14; i++) {
        double mid = 0.5 * (lo + hi);
        if (spec_E(mid, k) < cost) lo = mid; else hi = mid;
    }
    *alpha = 0.5 * (lo + hi);
    *exists = 1;
    return CAL_OK;
}

int cal_f_roofline(double bytes, double bw, double *tps, const char **bad)
{
    POS(bytes, "bytes-per-token");
    POS(bw, "bandwidth");
    double r = bw / bytes;
    RESULT(r, "bytes-per-token");
    *tps = r;
    return CAL_OK;
}

int cal_f_energy(double power, double tps, double *jpt, double *kwh, const char **bad)
{
    POS(power, "power");        /* 0 W: not measured */
    POS(tps, "rate");
    double j = power / tps;
    RESULT(j, "rate");
    *jpt = j;
    *kwh = j * 1e6 / 3.6e6;
    return CAL_OK;
}

int cal_f_cost_per_mtok(double kwh_per_mtok, double tps, double price_kwh,
                        double price_hour, double *cost, const char **bad)
{
    NONNEG(kwh_per_mtok, "power");
    POS(tps, "rate");
    NONNEG(price_kwh, "price-kwh");
    NONNEG(price_hour, "price-hour");
    double hours_per_mtok = 1e6 / tps / 3600;
    double c = kwh_per_mtok * price_kwh + hours_per_mtok * price_hour;
    RESULT(c, "rate");
    *cost = c;
    return CAL_OK;
}
