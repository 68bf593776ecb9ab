/* Unit tests of the sampler: greedy is argmax, a seed reproduces a
 * sequence, temperature sampling follows softmax(logits / T) in frequency,
 * top-p never leaves the nucleus, and bad arguments fail. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "engine/engine.h"

static void test_greedy(void **state)
{
    (void)state;
    float lg[1000];
    for (int i = 0; i < 1000; i++)
        lg[i] = sinf((float)i * 0.37f);
    lg[613] = 5.0f;
    void *scratch = malloc(cal_sample_scratch_bytes(1000));
    cal_sampler_params p = {.temperature = 0.0f, .top_p = 1.0f, .seed = 9};
    uint64_t rng = p.seed;
    for (int i = 0; i < 10; i++)
        assert_int_equal(cal_sample(lg, 1000, &p, &rng, scratch), 613);
    assert_int_equal(rng, 9); /* greedy draws no random numbers */
    lg[2] = 5.0f;             /* a tie goes to the lower id */
    assert_int_equal(cal_sample(lg, 1000, &p, &rng, scratch), 2);
    free(scratch);
}

static void test_seed_reproduces(void **state)
{
    (void)state;
    float lg[500];
    for (int i = 0; i < 500; i++)
        lg[i] = cosf((float)i * 1.3f) * 2.0f;
    void *scratch = malloc(cal_sample_scratch_bytes(500));
    cal_sampler_params p = {.temperature = 1.0f, .top_p = 0.95f, .seed = 1234};
    int32_t a[64], b[64];
    uint64_t r1 = p.seed, r2 = p.seed, r3 = 99;
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        a[i] = cal_sample(lg, 500, &p, &r1, scratch);
        b[i] = cal_sample(lg, 500, &p, &r2, scratch);
        differ |= cal_sample(lg, 500, &p, &r3, scratch) != a[i];
    }
    assert_memory_equal(a, b, sizeof a);
    assert_true(differ); /* another seed gives another sequence */
    free(scratch);
}

static void test_temperature_frequencies(void **state)
{
    (void)state;
    enum { V = 6, N = 60000 };
    float lg[V] = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, -3.0f};
    float T = 0.7f;
    double p[V], s = 0;
    for (int i = 0; i < V; i++)
        s += (p[i] = exp(lg[i] / T));
    void *scratch = malloc(cal_sample_scratch_bytes(V));
    cal_sampler_params sp = {.temperature = T, .top_p = 1.0f, .seed = 5};
    uint64_t rng = sp.seed;
    int count[V] = {0};
    for (int i = 0; i < N; i++) {
        int32_t id = cal_sample(lg, V, &sp, &rng, scratch);
        assert_true(id >= 0 && id < V);
        count[id]++;
    }
    for (int i = 0; i < V; i++) {
        double expect = N * p[i] / s, sd = sqrt(expect * (1 - p[i] / s));
        assert_true(fabs(count[i] - expect) < 5 * sd + 1);
    }
    free(scratch);
}

static void test_top_p_nucleus(void **state)
{
    (void)state;
    enum { V = 4 };
    /* probabilities 0.5, 0.3, 0.15, 0.05 at T = 1 */
    float lg[V] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    void *scratch = malloc(cal_sample_scratch_bytes(V));
    cal_sampler_params sp = {.temperature = 1.0f, .top_p = 0.7f, .seed = 11};
    uint64_t rng = sp.seed;
    int count[V] = {0};
    for (int i = 0; i < 20000; i++)
        count[cal_sample(lg, V, &sp, &rng, scratch)]++;
    assert_int_equal(count[0], 0); /* 0.15 is outside the 0.7 nucleus */
    assert_int_equal(count[2], 0);
    /* inside, renormalised: 0.5/0.8 and 0.3/0.8 */
    assert_true(fabs(count[1] / 20000.0 - 0.625) < 0.02);
    assert_true(fabs(count[3] / 20000.0 - 0.375) < 0.02);
    sp.top_p = 1e-6f; /* a tiny nucleus is the top token */
    for (int i = 0; i < 100; i++)
        assert_int_equal(cal_sample(lg, V, &sp, &rng, scratch), 1);
    free(scratch);
}

static void test_top_p_large_vocab(void **state)
{
    (void)state;
    enum { V = 151936 };
    float *lg = malloc(sizeof(float) * V);
    uint64_t s = 3;
    for (int i = 0; i < V; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        lg[i] = (float)(s >> 40) / 16777216.0f * 6.0f;
    }
    void *scratch = malloc(cal_sample_scratch_bytes(V));
    cal_sampler_params sp = {.temperature = 0.8f, .top_p = 0.9f, .seed = 2};
    uint64_t rng = sp.seed;
    float min_seen = 1e9f;
    for (int i = 0; i < 200; i++) {
        int32_t id = cal_sample(lg, V, &sp, &rng, scratch);
        assert_true(id >= 0 && id < V);
        min_seen = lg[id] < min_seen ? lg[id] : min_seen;
    }
    /* a nucleus of 0.9 at T 0.8 on uniform logits over [0, 6) cuts off the
     * bottom: no draw from the lowest logits */
    assert_true(min_seen > 1.0f);
    free(scratch);
    free(lg);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    float lg[4] = {0, 1, 2, 3};
    char scratch[64];
    cal_sampler_params sp = {.temperature = 1.0f, .top_p = 1.0f, .seed = 1};
    uint64_t rng = 1;
    assert_int_equal(cal_sample(NULL, 4, &sp, &rng, scratch), CAL_EINVAL);
    assert_int_equal(cal_sample(lg, 0, &sp, &rng, scratch), CAL_EINVAL);
    assert_int_equal(cal_sample(lg, 4, NULL, &rng, scratch), CAL_EINVAL);
    assert_int_equal(cal_sample(lg, 4, &sp, NULL, scratch), CAL_EINVAL);
    assert_int_equal(cal_sample(lg, 4, &sp, &rng, NULL), CAL_EINVAL);
    assert_int_equal(cal_engine_sample(NULL, lg, &sp, &rng), CAL_EINVAL);
    assert_true(cal_sample_scratch_bytes(4) <= sizeof scratch);
    sp.temperature = NAN; /* not a temperature: greedy */
    assert_int_equal(cal_sample(lg, 4, &sp, &rng, scratch), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_seed_reproduces),
        cmocka_unit_test(test_temperature_frequencies),
        cmocka_unit_test(test_top_p_nucleus),
        cmocka_unit_test(test_top_p_large_vocab),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
