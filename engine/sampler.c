/* caliper reference engine — token sampling: greedy (temperature 0),
 * temperature, and top-p (nucleus) with a per-sequence splitmix64 stream, so a
 * seed reproduces a completion. No allocation: the caller lends scratch. */
#include "engine/engine.h"
#include "engine/kernels.h"
#include "caliper/error.h"
#include <math.h>
#include <string.h>

size_t cal_sample_scratch_bytes(int vocab)
{
    return vocab > 0 ? (size_t)vocab * (sizeof(float) + sizeof(int32_t)) : 0;
}

static int32_t argmax(const float *x, int n)
{
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

/* total order: higher probability first, ties to the lower id */
static int before(const float *p, int32_t a, int32_t b)
{
    return p[a] > p[b] || (p[a] == p[b] && a < b);
}

/* Reorders ids[n] so that ids[0..k) is the nucleus: the fewest most probable
 * ids whose mass reaches top_p (quickselect on mass, expected O(n), so a
 * flat distribution over a 150k vocabulary costs a few passes, not a sort).
 * Returns k; *mass receives the nucleus mass. */
static int nucleus(int32_t *ids, int n, const float *p, float top_p, float *mass)
{
    int lo = 0, hi = n;
    float taken = 0;
    while (lo < hi) {
        int32_t pivot = ids[lo + (hi - lo) / 2];
        /* ids before the pivot to the front of [lo, hi) */
        int m = lo;
        float ml = 0;
        for (int i = lo; i < hi; i++)
            if (before(p, ids[i], pivot)) {
                int32_t t = ids[i]; ids[i] = ids[m]; ids[m] = t;
                ml += p[ids[m]];
                m++;
            }
        if (taken + ml >= top_p) {
            hi = m;         /* the nucleus ends inside the front part */
            continue;
        }
        /* the front part and the pivot are all in: place the pivot at m */
        for (int i = m; i < hi; i++)
            if (ids[i] == pivot) {
                ids[i] = ids[m];
                ids[m] = pivot;
                break;
            }
        taken += ml + p[pivot];
        lo = m + 1;
        if (taken >= top_p)
            break;
    }
    *mass = taken;
    return lo > 0 ? lo : 1;
}

int32_t cal_sample(const float *logits, int vocab, const cal_sampler_params *p,
                   uint64_t *rng, void *scratch)
{
    if (!logits || vocab < 1 || !p || !rng || !scratch)
        return CAL_EINVAL;
    if (!(p->temperature > 0.0f) || !isfinite(p->temperature))
        return argmax(logits, vocab);
    float *prob = scratch;
    int32_t *ids = (int32_t *)(prob + vocab);
    float inv_t = 1.0f / p->temperature;
    for (int i = 0; i < vocab; i++)
        prob[i] = logits[i] * inv_t;
    cal_k_softmax(prob, vocab);
    float u = (float)(cal_k_splitmix64(rng) >> 40) * (1.0f / 16777216.0f);
    float top_p = p->top_p;
    if (!(top_p < 1.0f) || !isfinite(top_p)) {
        float c = 0;
        for (int i = 0; i < vocab; i++) {
            c += prob[i];
            if (u < c)
                return i;
        }
        return argmax(prob, vocab); /* rounding left u above the sum */
    }
    if (!(top_p > 0.0f))
        return argmax(prob, vocab);
    /* Only ids with prob >= (1 − top_p)/(vocab − 1) can be in the nucleus:
     * if all the rest were below it they could not make up 1 − top_p. */
    float cutoff = vocab > 1 ? (1.0f - top_p) / (float)(vocab - 1) : 0.0f;
    int n = 0;
    for (int i = 0; i < vocab; i++)
        if (prob[i] >= cutoff)
            ids[n++] = i;
    if (n == 0)
        return argmax(prob, vocab);
    float mass = 0;
    int k = nucleus(ids, n, prob, top_p, &mass);
    if (k == 1 || !(mass > 0.0f))
        return ids[0];
    float r = u * mass, c = 0;
    for (int i = 0; i < k; i++) {
        c += prob[ids[i]];
        if (r < c)
            return ids[i];
    }
    return ids[k - 1]; /* rounding left r at the very top */
}
