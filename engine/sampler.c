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

/* max-heap of ids ordered by p (ties: the lower id first) */
static int before(const float *p, int32_t a, int32_t b)
{
    return p[a] > p[b] || (p[a] == p[b] && a < b);
}

static void sift(int32_t *h, int n, int i, const float *p)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(p, h[l], h[m]))
            m = l;
        if (r < n && before(p, h[r], h[m]))
            m = r;
        if (m == i)
            return;
        int32_t t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
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
    for (int i = n / 2 - 1; i >= 0; i--)
        sift(ids, n, i, prob);
    /* pop the largest until the nucleus holds top_p; popped ids collect at
     * the end of the array, largest last */
    float mass = 0;
    int heap = n;
    while (heap > 0) {
        int32_t top = ids[0];
        ids[0] = ids[--heap];
        ids[heap] = top;
        sift(ids, heap, 0, prob);
        mass += prob[top];
        if (mass >= top_p)
            break;
    }
    float r = u * mass, c = 0;
    for (int i = n - 1; i >= heap; i--) {
        c += prob[ids[i]];
        if (r < c)
            return ids[i];
    }
    return ids[heap];
}
