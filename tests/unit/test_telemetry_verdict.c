/* Unit tests: the SPEC 1.4 verdicts on the seed's worked examples and on
 * counter-examples where frequency does not explain the drop; the power
 * wall, watt for watt, OS-vs-clock throttle notes and energy per token. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/telemetry.h"

#define NEAR(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

static void test_freq_seed_examples(void **st)
{
    (void)st;
    cal_freq_verdict v;
    char b[256];
    /* 980 × 1116/1296 = 843.9; measured 850 (841–866) */
    assert_int_equal(cal_tel_freq_verdict(980, 850, 1296, 1116, 0, &v), CAL_FREQ_EXPLAINED);
    NEAR(v.predicted, 843.9, 0.05);
    NEAR(v.tolerance, 0.03, 1e-12);
    cal_tel_freq_verdict_text(&v, b, sizeof b);
    assert_string_equal(b, "frequency explains the slowdown (predicted 844, measured 850)");
    assert_int_equal(cal_tel_freq_verdict(980, 841, 1296, 1116, 0, &v), CAL_FREQ_EXPLAINED);
    assert_int_equal(cal_tel_freq_verdict(980, 866, 1296, 1116, 0, &v), CAL_FREQ_EXPLAINED);
    /* 1048 × 1162/1296 = 939.6; measured 946 */
    assert_int_equal(cal_tel_freq_verdict(1048, 946, 1296, 1162, 0, &v), CAL_FREQ_EXPLAINED);
    NEAR(v.predicted, 939.6, 0.05);
    NEAR(v.explained, (1048 - 939.63) / (1048 - 946.0), 1e-3);
    cal_tel_freq_verdict_text(&v, b, sizeof b);
    assert_non_null(strstr(b, "predicted 940, measured 946"));
    /* 1040 × 1232/1296 = 988.6; measured 993–1012 */
    assert_int_equal(cal_tel_freq_verdict(1040, 993, 1296, 1232, 0, &v), CAL_FREQ_EXPLAINED);
    NEAR(v.predicted, 988.6, 0.05);
    assert_int_equal(cal_tel_freq_verdict(1040, 1012, 1296, 1232, 0, &v), CAL_FREQ_EXPLAINED);
    /* prefill throughput from the notes: 4096/4.180 s vs 4096/4.850 s */
    assert_int_equal(cal_tel_freq_verdict(4096 / 4.180, 4096 / 4.850, 1296, 1116, 0, &v),
                     CAL_FREQ_EXPLAINED);
}

static void test_freq_counter_examples(void **st)
{
    (void)st;
    cal_freq_verdict v;
    char b[256];
    /* the clock barely moved, throughput fell 13 %: cycles changed */
    assert_int_equal(cal_tel_freq_verdict(980, 850, 1296, 1290, 0, &v), CAL_FREQ_NOT_EXPLAINED);
    NEAR(v.predicted, 975.46, 0.01);
    NEAR(v.explained, (980 - 975.46) / 130.0, 1e-3);
    cal_tel_freq_verdict_text(&v, b, sizeof b);
    assert_non_null(strstr(b, "frequency explains only 3 % of the drop: the cycle count changed"));
    /* the clock explains half of a deeper drop */
    assert_int_equal(cal_tel_freq_verdict(980, 700, 1296, 1116, 0, &v), CAL_FREQ_NOT_EXPLAINED);
    cal_tel_freq_verdict_text(&v, b, sizeof b);
    assert_non_null(strstr(b, "only 49 %"));
    /* the clock fell more than throughput */
    assert_int_equal(cal_tel_freq_verdict(980, 950, 1296, 1000, 0, &v), CAL_FREQ_NOT_EXPLAINED);
    assert_true(v.explained > 1);
    cal_tel_freq_verdict_text(&v, b, sizeof b);
    assert_non_null(strstr(b, "more than throughput"));
    /* a tighter tolerance turns 850 vs 843.9 (0.7 %) into "not explained" */
    assert_int_equal(cal_tel_freq_verdict(980, 850, 1296, 1116, 0.005, &v), CAL_FREQ_NOT_EXPLAINED);
    /* no drop and no clock change */
    assert_int_equal(cal_tel_freq_verdict(980, 979, 1296, 1296, 0, &v), CAL_FREQ_NO_DROP);
    cal_tel_freq_verdict_text(&v, b, sizeof b);
    assert_non_null(strstr(b, "no slowdown"));
}

static void test_freq_cannot_judge(void **st)
{
    (void)st;
    cal_freq_verdict v;
    char b[256];
    /* no clock source: the verdict does not pretend */
    assert_int_equal(cal_tel_freq_verdict(980, 850, NAN, NAN, 0, &v), CAL_FREQ_CANNOT_JUDGE);
    assert_true(isnan(v.predicted));
    cal_tel_freq_verdict_text(&v, b, sizeof b);
    assert_string_equal(b, "cannot judge: no clock source measured the cold and warm shots");
    assert_int_equal(cal_tel_freq_verdict(980, 850, 0, 1116, 0, &v), CAL_FREQ_CANNOT_JUDGE);
    assert_int_equal(cal_tel_freq_verdict(NAN, 850, 1296, 1116, 0, &v), CAL_FREQ_CANNOT_JUDGE);
    cal_tel_freq_verdict_text(&v, b, sizeof b);
    assert_non_null(strstr(b, "no cold and warm throughput"));
}

static void test_power_wall(void **st)
{
    (void)st;
    cal_power_wall w;
    char b[256];
    /* the seed: the whole machine sat at ~60 W while the GPU clock fell */
    double p[] = { 59.6, 60.1, 60.3, 59.9, 60.0 };
    double f[] = { 1296, 1162, 1116, 1110, 1100 };
    assert_int_equal(cal_tel_power_wall(p, f, 5, 0, 0, &w), CAL_WALL_CEILING);
    NEAR(w.power_mean_w, 59.98, 1e-9);
    NEAR(w.clock_drop, (1296 - 1100) / 1296.0, 1e-12);
    cal_tel_power_wall_text(&w, b, sizeof b);
    assert_non_null(strstr(b, "power ceiling near 60 W"));
    /* GPU power fell with the clock: no flat ceiling */
    double p2[] = { 41, 32, 22 };
    double f2[] = { 1296, 1130, 1000 };
    assert_int_equal(cal_tel_power_wall(p2, f2, 3, 0, 0, &w), CAL_WALL_NONE);
    cal_tel_power_wall_text(&w, b, sizeof b);
    assert_non_null(strstr(b, "no power wall"));
    /* flat power, clock held */
    double f3[] = { 1296, 1295, 1296, 1294, 1296 };
    assert_int_equal(cal_tel_power_wall(p, f3, 5, 0, 0, &w), CAL_WALL_NONE);
    cal_tel_power_wall_text(&w, b, sizeof b);
    assert_non_null(strstr(b, "clock held"));
    /* no clock source: NAN everywhere */
    double fn[] = { NAN, NAN, NAN };
    assert_int_equal(cal_tel_power_wall(p, fn, 3, 0, 0, &w), CAL_WALL_CANNOT_JUDGE);
    cal_tel_power_wall_text(&w, b, sizeof b);
    assert_non_null(strstr(b, "cannot judge"));
    assert_int_equal(cal_tel_power_wall(p, f, 1, 0, 0, &w), CAL_WALL_CANNOT_JUDGE);
}

static void test_watt_for_watt(void **st)
{
    (void)st;
    /* SPEC 1.4: 37.5 + 18.8 = 56.3 W vs 32 + 24.4 = 56.4 W under a ~60 W wall */
    cal_rail r[] = { { "GPU", 37.5, 32.0 }, { "memory path", 18.8, 24.4 }, { "ANE", NAN, NAN } };
    cal_watt_table t;
    char b[1024];
    assert_int_equal(cal_tel_watt_for_watt(r, 3, 60, &t), CAL_OK);
    assert_int_equal(t.n, 2);
    NEAR(t.sum_before_w, 56.3, 1e-9);
    NEAR(t.sum_after_w, 56.4, 1e-9);
    NEAR(t.residual_after_w, 3.6, 1e-9);
    NEAR(t.moved_w, 5.5, 1e-9);
    NEAR(t.gained_w, 5.6, 1e-9);
    cal_tel_watt_for_watt_text(r, 3, &t, b, sizeof b);
    assert_non_null(strstr(b, "+5.6 W on memory path <-> -5.5 W on GPU"));
    assert_non_null(strstr(b, "wall 60.0 W"));
    /* one rail alone is no split */
    assert_int_equal(cal_tel_watt_for_watt(r, 1, 60, &t), CAL_EINVAL);
    assert_int_equal(cal_tel_watt_for_watt(r, 3, NAN, &t), CAL_OK);
    assert_true(isnan(t.residual_before_w));
}

static void test_throttle_note(void **st)
{
    (void)st;
    cal_throttle_note n;
    char b[256];
    /* the seed: thermal state "nominal" while the clock fell 1296 → 1116 */
    assert_int_equal(cal_tel_throttle_note(0, 1296, 1116, 0, &n), CAL_THR_OS_NOMINAL_CLOCK_FELL);
    cal_tel_throttle_note_text(&n, NULL, b, sizeof b);
    assert_string_equal(b, "OS reports nominal but the clock fell 14 %: trust the clock");
    assert_int_equal(cal_tel_throttle_note(0, 1296, 1290, 0, &n), CAL_THR_AGREE_NOMINAL);
    assert_int_equal(cal_tel_throttle_note(1, 1296, 1000, 0, &n), CAL_THR_AGREE_THROTTLED);
    cal_tel_throttle_note_text(&n, "NVML: SW power cap", b, sizeof b);
    assert_non_null(strstr(b, "(NVML: SW power cap)"));
    assert_int_equal(cal_tel_throttle_note(1, 1296, 1296, 0, &n), CAL_THR_OS_THROTTLED_CLOCK_HELD);
    assert_int_equal(cal_tel_throttle_note(-1, 1296, 1116, 0, &n), CAL_THR_CANNOT_JUDGE);
    assert_int_equal(cal_tel_throttle_note(0, NAN, 1116, 0, &n), CAL_THR_CANNOT_JUDGE);
}

static void test_energy_per_token(void **st)
{
    (void)st;
    cal_energy_per_token e;
    cal_tel_energy_per_token(512, 4096, 256, &e);
    NEAR(e.j_per_output_token, 2.0, 1e-12);
    NEAR(e.j_per_prompt_token, 0.125, 1e-12);
    cal_tel_energy_per_token(512, 0, 256, &e);
    assert_true(isnan(e.j_per_prompt_token));
    /* no energy source: nothing is invented */
    cal_tel_energy_per_token(NAN, 4096, 256, &e);
    assert_true(isnan(e.joules) && isnan(e.j_per_output_token) && isnan(e.j_per_prompt_token));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freq_seed_examples),
        cmocka_unit_test(test_freq_counter_examples),
        cmocka_unit_test(test_freq_cannot_judge),
        cmocka_unit_test(test_power_wall),
        cmocka_unit_test(test_watt_for_watt),
        cmocka_unit_test(test_throttle_note),
        cmocka_unit_test(test_energy_per_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
