/* The Apple Silicon backend's arithmetic (lib/telemetry/apple_calc.c) on
 * readings laid out as macOS returns them: IOReport "Energy Model" channel
 * deltas with their unit labels, the GPUPH residency states, pmgr's
 * voltage-states9 bytes, `pmset -g therm` text and AppleSMC values. No Mac
 * is at hand here: the readings are written from those layouts (channel
 * and state names as the open-source readers mactop and asitop match
 * them), not captured from a machine. Built and run on every platform. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "lib/telemetry/apple_calc.h"

#define NEAR(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static void test_energy_to_watts(void **st)
{
    (void)st;
    tel_apple_energy en;
    memset(&en, 0, sizeof en);
    /* one 0.5 s IOReport delta on a two-cluster chip */
    tel_apple_energy_add(&en, "Energy Model", "EACC_CPU Energy", "mJ", 120);
    tel_apple_energy_add(&en, "Energy Model", "PACC0_CPU Energy", "mJ", 2400);
    tel_apple_energy_add(&en, "Energy Model", "GPU Energy", "nJ", 5000000000LL);
    tel_apple_energy_add(&en, "Energy Model", "DRAM Energy", "uJ", 300000);
    tel_apple_energy_add(&en, "GPU Stats", "GPU Energy", "mJ", 999999);   /* another group */
    tel_apple_energy_add(&en, "Energy Model", "GPU SRAM", "mJ", 7);        /* no such sum */
    tel_apple_energy_add(&en, "Energy Model", "ISP Energy", "furlongs", 5);
    double dt = 0.5;
    assert_true(en.have_cpu && en.have_gpu && en.have_dram);
    assert_false(en.have_ane);
    NEAR(en.cpu_j / dt, (0.120 + 2.400) / 0.5, 1e-12);
    NEAR(en.gpu_j / dt, 10.0, 1e-12);
    NEAR(en.dram_j / dt, 0.6, 1e-12);
    assert_true(tel_apple_unit_to_j("kJ") == 0);
    assert_true(tel_apple_unit_to_j(NULL) == 0);
}

static void put_u32le(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

static void test_dvfs_and_residency(void **st)
{
    (void)st;
    /* voltage-states9: (Hz, mV) pairs; the first is the 0 Hz OFF state */
    const uint32_t hz_in[] = {0, 389000000u, 486000000u, 648000000u, 1296000000u};
    unsigned char raw[8 * 5 + 3];   /* a trailing partial record is ignored */
    memset(raw, 0xee, sizeof raw);
    for (int i = 0; i < 5; i++) { put_u32le(raw + 8 * i, hz_in[i]); put_u32le(raw + 8 * i + 4, 700 + i); }
    double hz[8];
    assert_int_equal(tel_apple_dvfs_table(raw, sizeof raw, hz, 8), 4);
    NEAR(hz[0], 389e6, 0); NEAR(hz[3], 1296e6, 0);
    assert_int_equal(tel_apple_dvfs_table(raw, sizeof raw, hz, 2), 2);   /* capped */
    assert_int_equal(tel_apple_dvfs_table(raw, sizeof raw, hz, 8), 4);

    const char *names[] = {"OFF", "P1", "P2", "P3", "P4"};
    const int64_t res[] = {500, 100, 0, 300, 100};
    double pct, mhz;
    assert_int_equal(tel_apple_gpu_residency(names, res, 5, hz, 4, &pct, &mhz), 0);
    NEAR(pct, 50.0, 1e-12);
    NEAR(mhz, (389.0 * 100 + 648.0 * 300 + 1296.0 * 100) / 500.0, 1e-9);
    /* all idle: no clock to report, and it says so */
    const char *idle[] = {"OFF", "IDLE", "DOWN"};
    const int64_t ires[] = {10, 20, 30};
    assert_int_equal(tel_apple_gpu_residency(idle, ires, 3, hz, 4, &pct, &mhz), -1);
    /* more active states than table entries: the extra ones carry no clock */
    const char *many[] = {"P1", "P2", "P3", "P4", "P5"};
    const int64_t mres[] = {1, 1, 1, 1, 6};
    assert_int_equal(tel_apple_gpu_residency(many, mres, 5, hz, 4, &pct, &mhz), 0);
    NEAR(pct, 40.0, 1e-12);
}

static void test_pmset_therm(void **st)
{
    (void)st;
    const char *cool =
        "Note: No thermal warning level has been recorded\n"
        "Note: No performance warning level has been recorded\n"
        "2026-11-30 21:10:02 +0100 CPU Power notify\n"
        "\tCPU_Scheduler_Limit \t= 100\n"
        "\tCPU_Available_CPUs \t= 10\n"
        "\tCPU_Speed_Limit \t= 100\n";
    tel_apple_therm t;
    assert_int_equal(tel_apple_parse_pmset_therm(cool, &t), 0);
    NEAR(t.cpu_speed_limit, 100, 0);
    NEAR(t.scheduler_limit, 100, 0);
    NEAR(t.available_cpus, 10, 0);
    assert_int_equal(t.warning_level, 0);
    const char *hot =
        "Note: Thermal warning level set to 2.\n"
        "\tCPU_Speed_Limit \t= 61\n";
    assert_int_equal(tel_apple_parse_pmset_therm(hot, &t), 0);
    NEAR(t.cpu_speed_limit, 61, 0);
    assert_true(isnan(t.scheduler_limit));
    assert_int_equal(t.warning_level, 2);
    /* a key that is only a prefix of another is not it */
    assert_int_equal(tel_apple_parse_pmset_therm("CPU_Speed_Limited = 5\n", &t), -1);
    assert_true(isnan(t.cpu_speed_limit));
    assert_int_equal(tel_apple_parse_pmset_therm("", &t), -1);
    assert_int_equal(tel_apple_parse_pmset_therm(NULL, &t), -1);
}

static void test_smc_values(void **st)
{
    (void)st;
    assert_int_equal(tel_apple_smc_key("PSTR"), 0x50535452u);
    assert_int_equal(tel_apple_smc_key("PST"), 0);
    float f = 23.5f;
    uint32_t u;
    memcpy(&u, &f, 4);
    unsigned char b[4];
    put_u32le(b, u);
    double v;
    assert_int_equal(tel_apple_smc_decode("flt ", b, 4, &v), 0);
    NEAR(v, 23.5, 0);
    const unsigned char sp78[] = {0x1A, 0x80};        /* 26.5 °C */
    assert_int_equal(tel_apple_smc_decode("sp78", sp78, 2, &v), 0);
    NEAR(v, 26.5, 0);
    const unsigned char neg[] = {0xFF, 0x00};         /* -1.0 */
    assert_int_equal(tel_apple_smc_decode("sp78", neg, 2, &v), 0);
    NEAR(v, -1.0, 0);
    const unsigned char u32[] = {0, 0, 1, 2};
    assert_int_equal(tel_apple_smc_decode("ui32", u32, 4, &v), 0);
    NEAR(v, 258, 0);
    assert_int_equal(tel_apple_smc_decode("ui32", u32, 3, &v), -1);   /* too short */
    assert_int_equal(tel_apple_smc_decode("ch8*", u32, 4, &v), -1);   /* not a number */
    const unsigned char nan_bits[] = {0, 0, 0xc0, 0x7f};
    assert_int_equal(tel_apple_smc_decode("flt ", nan_bits, 4, &v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_energy_to_watts),
        cmocka_unit_test(test_dvfs_and_residency),
        cmocka_unit_test(test_pmset_therm),
        cmocka_unit_test(test_smc_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
