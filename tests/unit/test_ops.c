/* Unit tests: caliper ops. The seed's worked numbers (all seven known
 * kernels at zero: 1.69x, so coverage 0.408; a 67.87x attention kernel at
 * 5.29 % of the time: 5.5 % end to end) from profile files written here in
 * each format; the gap between two engines; the trace reader's kernel
 * selection, nesting and end-to-end span; the CSV reader; the mapping; the
 * single-op trap; the JSON document and the report section drawn from it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/ops.h"

#define NEAR(got, want, tol) assert_true(fabs((got) - (want)) <= (tol))

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_ops.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *write_file(const char *name, const char *text)
{
    static char path[8][128];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 128, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    return p;
}

static cal_ops_profile *load(const char *path)
{
    cal_ops_profile *p = NULL;
    char err[512] = "";
    int rc = cal_ops_load(path, NULL, &p, err, sizeof err);
    if (rc) fprintf(stderr, "load %s: %s\n", path, err);
    assert_int_equal(rc, CAL_OK);
    return p;
}

/* An engine profile: 100 tokens in 100 ms of steps; seven kernels hold 40.8 %
 * of it, attention 5.29 %: the notes' numbers. */
static const char SEED_ENGINE[] =
    "{\"format\":\"caliper.engine.profile/1\",\"model\":{\"name\":\"seed\"},"
    "\"blas\":{\"core\":\"Haswell\",\"engine_threads\":2},"
    "\"steps\":100,\"tokens\":100,\"step_time_ns\":100000000,\"unattributed_ns\":59200000,"
    "\"ops\":["
    "{\"op\":\"attention\",\"calls\":800,\"time_ns\":5290000,\"flops\":1e9,\"bytes\":2e9},"
    "{\"op\":\"dense_proj\",\"calls\":3200,\"time_ns\":20000000,\"flops\":8e10,\"bytes\":4e9},"
    "{\"op\":\"norm\",\"calls\":1700,\"time_ns\":3000000,\"flops\":1e6,\"bytes\":1e6},"
    "{\"op\":\"rope\",\"calls\":800,\"time_ns\":2000000,\"flops\":1e6,\"bytes\":1e6},"
    "{\"op\":\"activation\",\"calls\":800,\"time_ns\":4000000,\"flops\":1e6,\"bytes\":1e6},"
    "{\"op\":\"embedding\",\"calls\":100,\"time_ns\":1510000,\"flops\":0,\"bytes\":1e5},"
    "{\"op\":\"logits\",\"calls\":100,\"time_ns\":5000000,\"flops\":1e9,\"bytes\":1e9},"
    "{\"op\":\"moe_router\",\"calls\":0,\"time_ns\":0,\"flops\":0,\"bytes\":0},"
    "{\"op\":\"sampling\",\"calls\":0,\"time_ns\":0,\"flops\":0,\"bytes\":0}]}\n";

/* The same seven kernels as CSV, with other names, in other units. */
static const char SEED_CSV[] =
    "# tokens: 100\n"
    "# e2e: 100ms\n"
    "op,calls,time_us,bytes,flops\n"
    "flash_fwd_kernel,800,5290,2GB,1G\n"
    "ampere_sgemm_128x64_tn,3200,20000,4GB,80G\n"
    "rms_norm_kernel,1700,3000,1MB,\n"
    "rotary_embedding_kernel,800,2000,,\n"
    "act_and_mul_kernel,800,4000,,\n"
    "aten::embedding,100,1510,,\n"
    "sm90_xmma_gemm_logits,100,5000,,\n";

static void check_seed(const cal_ops_profile *p)
{
    cal_ops_map *m = NULL;
    assert_int_equal(cal_ops_map_default(&m), CAL_OK);
    cal_ops_opts o = {0};
    o.n_whatif = 1;
    snprintf(o.whatif[0].cat, sizeof o.whatif[0].cat, "attention");
    o.whatif[0].speedup = 67.87;
    cal_ops_recon r;
    char err[256];
    assert_int_equal(cal_ops_reconcile(p, NULL, m, &o, &r, err, sizeof err), CAL_OK);
    assert_int_equal(r.n_sides, 1);
    /* every known kernel at zero: 1.69x, which is coverage 0.408 */
    NEAR(r.side[0].coverage, 0.408, 1e-9);
    NEAR(r.side[0].ceiling, 1.69, 0.005);
    assert_int_equal(r.side[0].n_unmatched, 0);
    NEAR(r.side[0].e2e_ms_per_token, 1.0, 1e-12);
    NEAR(r.side[0].outside_ms_per_token, 0.592, 1e-9);
    /* 67.87x on a kernel holding 5.29 %: 5.5 % end to end */
    int att = cal_ops_recon_cat(&r, "attention");
    assert_true(att >= 0);
    NEAR(r.side[0].cat[att].share, 0.0529, 1e-12);
    assert_int_equal(r.n_whatif, 1);
    NEAR((r.whatif[0].e2e[0] - 1) * 100, 5.5, 0.05);
    /* the categories add up to the kernel time, and with the outside to e2e */
    double sum = 0;
    for (size_t c = 0; c < r.n_cats; c++) sum += r.side[0].cat[c].ms_per_token;
    NEAR(sum, r.side[0].kernel_ms_per_token, 1e-12);
    NEAR(sum + r.side[0].outside_ms_per_token, r.side[0].e2e_ms_per_token, 1e-12);
    NEAR(sum / r.side[0].e2e_ms_per_token, r.side[0].coverage, 1e-12);
    /* dense projections: the product plus the logits product */
    int dp = cal_ops_recon_cat(&r, "dense_proj");
    assert_true(dp >= 0);
    NEAR(r.side[0].cat[dp].ms_per_token, 0.25, 1e-12);
    NEAR(r.side[0].cat[dp].calls_per_token, 33, 1e-12);
    cal_ops_map_free(&m);
    assert_null(m);
}

static void test_seed_engine(void **state)
{
    (void)state;
    cal_ops_profile *p = load(write_file("seed.json", SEED_ENGINE));
    assert_int_equal(p->format, CAL_OPS_ENGINE);
    assert_string_equal(p->label, "seed.json");
    NEAR(p->tokens, 100, 0);
    NEAR(p->e2e_ns, 1e8, 0);
    NEAR(p->threads, 2, 0);
    assert_non_null(strstr(p->source, "2 threads"));
    assert_int_equal(p->n_ops, 7);   /* the kinds that never ran are not ops */
    check_seed(p);
    cal_ops_profile_free(&p);
    assert_null(p);
}

static void test_seed_csv(void **state)
{
    (void)state;
    cal_ops_profile *p = load(write_file("seed.csv", SEED_CSV));
    assert_int_equal(p->format, CAL_OPS_CSV);
    assert_int_equal(p->n_ops, 7);
    NEAR(p->ops[0].time_ns, 5.29e6, 1e-3);
    NEAR(p->ops[0].bytes, 2e9, 0);
    assert_true(isnan(p->ops[3].bytes));   /* an empty cell is unknown, not 0 */
    check_seed(p);
    cal_ops_profile_free(&p);
}

/* Two engines, 1000 tokens each. A spends 0.61 ms/token more in dense
 * projections, 0.05 more in transposes, 0.02 less in MoE, and 0.10 more
 * outside every kernel: 0.74 in all. */
static void test_gap(void **state)
{
    (void)state;
    cal_ops_profile *a = load(write_file("a.csv",
        "# tokens: 1000\n# e2e: 3740ms\n"
        "op,calls,time_ms\n"
        "MUL_MAT,224000,1610\nMUL_MAT_ID,32000,480\nCPY,96000,150\nFLASH_ATTN_EXT,32000,300\n"
        "RMS_NORM,65000,100\nmystery_op,10,1\n"));
    cal_ops_profile *b = load(write_file("b.csv",
        "# tokens: 1000\n# e2e: 3000ms\n"
        "op,calls,time_ms\n"
        "aten::linear,160000,1000\nfused_moe_kernel,32000,500\naten::copy_,32000,100\n"
        "flash_attn_fwd,32000,300\nrms_norm_kernel,65000,100\n"));
    cal_ops_map *m = NULL;
    assert_int_equal(cal_ops_map_default(&m), CAL_OK);
    cal_ops_recon r;
    char err[256];
    assert_int_equal(cal_ops_reconcile(a, b, m, NULL, &r, err, sizeof err), CAL_OK);
    assert_int_equal(r.n_sides, 2);
    NEAR(r.gap_total_ms, 0.74, 1e-9);
    int dp = cal_ops_recon_cat(&r, "dense_proj");
    assert_int_equal((int)r.gap_order[0], dp);
    NEAR(r.gap_ms[dp], 0.61, 1e-9);
    NEAR(r.gap_ms[cal_ops_recon_cat(&r, "moe")], -0.02, 1e-9);
    NEAR(r.gap_ms[cal_ops_recon_cat(&r, "transpose_copy")], 0.05, 1e-9);
    /* the unmatched op is its own row, listed by name, never dropped */
    int un = cal_ops_recon_cat(&r, CAL_OPS_UNMATCHED);
    assert_true(un >= 0);
    assert_int_equal(r.side[0].n_unmatched, 1);
    assert_string_equal(a->ops[r.side[0].unmatched[0]].name, "mystery_op");
    NEAR(r.gap_ms[un], 0.001, 1e-9);
    /* inside kernels 0.64, outside 0.10: they add up to the gap */
    NEAR(r.gap_kernel_ms, 0.641, 1e-9);
    NEAR(r.gap_outside_ms, 0.099, 1e-9);
    NEAR(r.gap_kernel_ms + r.gap_outside_ms, r.gap_total_ms, 1e-9);
    /* the re-dispatch difference: 64 more products per token */
    NEAR(r.side[0].cat[dp].calls_per_token - r.side[1].cat[dp].calls_per_token, 64, 1e-9);
    assert_non_null(strstr(r.biggest, "the biggest gap is dense_proj: 0.61 ms/token of 0.74"));
    assert_non_null(strstr(r.biggest, "a.csv"));
    /* B spending more outside kernels than any category differs: named so */
    cal_ops_profile *c = load(write_file("c.csv", "# tokens: 1000\n# e2e: 9000ms\n"
                                                  "op,calls,time_ms\nMUL_MAT,224000,1610\n"));
    assert_int_equal(cal_ops_reconcile(a, c, m, NULL, &r, err, sizeof err), CAL_OK);
    assert_non_null(strstr(r.biggest, "outside every kernel"));
    cal_ops_profile_free(&c);
    cal_ops_map_free(&m);
    cal_ops_profile_free(&a);
    cal_ops_profile_free(&b);
}

/* A PyTorch-profiler-like trace: CPU ops nest (aten::linear holds
 * aten::addmm), GPU kernels do not; two profiler steps span the run. */
static const char TRACE[] =
    "{\"schemaVersion\":1,\"traceEvents\":["
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1000},"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"pid\":1,\"tid\":1,\"ts\":1000,\"dur\":1000},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":100},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::addmm\",\"pid\":1,\"tid\":1,\"ts\":20,\"dur\":80},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"pid\":1,\"tid\":1,\"ts\":1010,\"dur\":100},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::softmax\",\"pid\":1,\"tid\":2,\"ts\":20,\"dur\":30},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"sm90_xmma_gemm_f16\",\"pid\":0,\"tid\":7,\"ts\":50,\"dur\":200.5,"
    "\"args\":{\"flops\":4e9}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"flash_fwd_kernel\",\"pid\":0,\"tid\":7,\"ts\":300,\"dur\":100},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"sm90_xmma_gemm_f16\",\"pid\":0,\"tid\":7,\"ts\":1050,\"dur\":199.5,"
    "\"args\":{\"flops\":4e9}},"
    "{\"ph\":\"i\",\"name\":\"marker\",\"pid\":0,\"tid\":7,\"ts\":5},"
    "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{\"name\":\"gpu\"}}"
    "]}";

static const cal_ops_op *op_named(const cal_ops_profile *p, const char *n)
{
    for (size_t i = 0; i < p->n_ops; i++)
        if (!strcmp(p->ops[i].name, n)) return &p->ops[i];
    return NULL;
}

static void test_trace(void **state)
{
    (void)state;
    cal_ops_profile *p = NULL;
    char err[256];
    /* GPU kernels present: they are the ops; the steps give end to end */
    assert_int_equal(cal_ops_parse(TRACE, strlen(TRACE), "t.json", NULL, &p, err, sizeof err), CAL_OK);
    assert_int_equal(p->format, CAL_OPS_TRACE);
    assert_int_equal(p->n_ops, 2);
    const cal_ops_op *g = op_named(p, "sm90_xmma_gemm_f16");
    assert_non_null(g);
    NEAR(g->calls, 2, 0);
    NEAR(g->time_ns, 400000, 1e-6);
    NEAR(g->flops, 8e9, 0);
    assert_true(isnan(g->bytes));
    NEAR(p->e2e_ns, 2e6, 0);
    assert_true(isnan(p->tokens));
    cal_ops_profile_free(&p);
    /* CPU ops: the nested addmm is inside linear and not counted again;
     * another thread's op is its own */
    cal_ops_read_opts o = {.trace_cat = "cpu_op"};
    assert_int_equal(cal_ops_parse_trace(TRACE, strlen(TRACE), "t", &o, &p, err, sizeof err), CAL_OK);
    assert_int_equal(p->n_ops, 2);
    assert_null(op_named(p, "aten::addmm"));
    NEAR(op_named(p, "aten::linear")->calls, 2, 0);
    NEAR(op_named(p, "aten::linear")->time_ns, 200000, 1e-6);
    NEAR(op_named(p, "aten::softmax")->time_ns, 30000, 1e-6);
    cal_ops_profile_free(&p);
    /* another end-to-end span */
    o = (cal_ops_read_opts){.e2e_span = "ProfilerStep#2"};
    assert_int_equal(cal_ops_parse_trace(TRACE, strlen(TRACE), "t", &o, &p, err, sizeof err), CAL_OK);
    NEAR(p->e2e_ns, 1e6, 0);
    cal_ops_profile_free(&p);
    /* a bare array of events is a trace too; without a span, no end to end */
    const char *arr = "[{\"ph\":\"X\",\"name\":\"k\",\"ts\":1,\"dur\":2,\"pid\":1,\"tid\":1}]";
    assert_int_equal(cal_ops_parse(arr, strlen(arr), NULL, NULL, &p, err, sizeof err), CAL_OK);
    assert_string_equal(p->label, "profile");
    assert_true(isnan(p->e2e_ns));
    NEAR(p->ops[0].time_ns, 2000, 0);
    cal_ops_profile_free(&p);
    /* begin/end halves pair per thread, latest begin first; nesting as for
     * complete events; a stray end and a begin never closed are left out */
    const char *be =
        "{\"traceEvents\":["
        "{\"ph\":\"B\",\"name\":\"ProfilerStep#0\",\"pid\":1,\"tid\":1,\"ts\":0},"
        "{\"ph\":\"B\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"pid\":1,\"tid\":1,\"ts\":5},"
        "{\"ph\":\"B\",\"cat\":\"cpu_op\",\"name\":\"aten::addmm\",\"pid\":1,\"tid\":1,\"ts\":10},"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":50},"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":105},"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":7},"
        "{\"ph\":\"B\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":2,\"ts\":9},"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":400}]}";
    assert_int_equal(cal_ops_parse(be, strlen(be), "be", NULL, &p, err, sizeof err), CAL_OK);
    assert_int_equal(p->n_ops, 1);
    assert_string_equal(p->ops[0].name, "aten::linear");
    NEAR(p->ops[0].time_ns, 100000, 1e-6);
    NEAR(p->e2e_ns, 400000, 1e-6);
    cal_ops_profile_free(&p);
    /* malformed: named */
    const char *bad = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"k\",\"ts\":\"x\",\"dur\":2}]}";
    assert_int_equal(cal_ops_parse(bad, strlen(bad), NULL, NULL, &p, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "traceEvents[0]"));
    assert_null(p);
    bad = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"k\",\"ts\":1,\"dur\":-2}]}";
    assert_int_equal(cal_ops_parse(bad, strlen(bad), NULL, NULL, &p, err, sizeof err), CAL_EINVAL);
    bad = "{\"traceEvents\":7}";
    assert_int_equal(cal_ops_parse(bad, strlen(bad), NULL, NULL, &p, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "traceEvents"));
    bad = "{\"traceEvents\":[";
    assert_int_equal(cal_ops_parse(bad, strlen(bad), NULL, NULL, &p, err, sizeof err), CAL_EPROTO);
    /* no events at all: nothing to sort (the fuzzer found qsort handed a
     * NULL base; make ubsan stops on it) */
    const char *none = "{\"traceEvents\":[]}";
    int rc = cal_ops_parse_trace(none, strlen(none), NULL, NULL, &p, err, sizeof err);
    if (rc == CAL_OK) {
        assert_int_equal(p->n_ops, 0);
        cal_ops_profile_free(&p);
    } else {
        assert_null(p);
        assert_true(err[0] != 0);
    }
}

static void test_csv(void **state)
{
    (void)state;
    cal_ops_profile *p = NULL;
    char err[256];
    /* a unit per cell; repeated names add up; a BOM and blank lines pass */
    const char *t = "\xef\xbb\xbf" "op,calls,time,flops\n\nk1,2,1.5ms,4k\nk2,1,250us,\nk1,3,0.5ms,1k\n";
    assert_int_equal(cal_ops_parse(t, strlen(t), "x", NULL, &p, err, sizeof err), CAL_OK);
    assert_int_equal(p->format, CAL_OPS_CSV);
    assert_int_equal(p->n_ops, 2);
    NEAR(p->ops[0].calls, 5, 0);
    NEAR(p->ops[0].time_ns, 2e6, 1e-6);
    NEAR(p->ops[0].flops, 5000, 0);
    NEAR(p->ops[1].time_ns, 250e3, 1e-6);
    assert_true(isnan(p->ops[1].flops));
    cal_ops_profile_free(&p);
    /* errors name the line and the field */
    t = "op,calls\nk,1\n";
    assert_int_equal(cal_ops_parse_csv(t, strlen(t), "x", &p, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "time"));
    t = "op,calls,time_ms\nk,1,fast\n";
    assert_int_equal(cal_ops_parse_csv(t, strlen(t), "x", &p, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "line 2"));
    assert_non_null(strstr(err, "fast"));
    t = "op,calls,time_ms\nk,-1,1\n";
    assert_int_equal(cal_ops_parse_csv(t, strlen(t), "x", &p, err, sizeof err), CAL_EPROTO);
    t = "# tokens: zero\nop,calls,time_ms\n";
    assert_int_equal(cal_ops_parse_csv(t, strlen(t), "x", &p, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "tokens"));
    t = "op,calls,time_ms,bytes\nk,1,1\n";
    assert_int_equal(cal_ops_parse_csv(t, strlen(t), "x", &p, err, sizeof err), CAL_EPROTO);
    t = "";
    assert_int_equal(cal_ops_parse_csv(t, 0, "x", &p, err, sizeof err), CAL_EPROTO);
    assert_null(p);
}

static void test_map(void **state)
{
    (void)state;
    cal_ops_map *m = NULL;
    assert_int_equal(cal_ops_map_default(&m), CAL_OK);
    static const char *const CASES[][2] = {
        {"dense_proj", "dense_proj"}, {"logits", "dense_proj"}, {"moe_experts", "moe"},
        {"moe_router", "moe"}, {"activation", "elementwise"}, {"MUL_MAT", "dense_proj"},
        {"MUL_MAT_ID", "moe"}, {"FLASH_ATTN_EXT", "attention"}, {"RMS_NORM", "norm"},
        {"ROPE", "rope"}, {"CPY", "transpose_copy"}, {"GET_ROWS", "embedding"},
        {"aten::linear", "dense_proj"}, {"aten::copy_", "transpose_copy"},
        {"fused_moe_kernel", "moe"}, {"flash_fwd_splitkv_kernel", "attention"},
        {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>", "dense_proj"},
        {"aten::_scaled_dot_product_flash_attention", "attention"},
        {"triton_red_fused_rms_norm_0", "norm"}, {"Memcpy DtoD (Device -> Device)", "transpose_copy"},
        {"aten::silu", "elementwise"}, {"aten::multinomial", "sampling"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const char *c = cal_ops_map_category(m, CASES[i][0]);
        if (!c || strcmp(c, CASES[i][1]))
            fail_msg("%s: %s, want %s", CASES[i][0], c ? c : "(none)", CASES[i][1]);
    }
    assert_null(cal_ops_map_category(m, "mystery_op"));
    cal_ops_map_free(&m);
    /* a user's rules come first; defaults can be left out */
    char err[256];
    const char *t = "# mine\n\nMUL_MAT  matmul   # comment\n*mystery*\tother\n";
    assert_int_equal(cal_ops_map_parse(t, strlen(t), 1, &m, err, sizeof err), CAL_OK);
    assert_string_equal(cal_ops_map_category(m, "MUL_MAT"), "matmul");
    assert_string_equal(cal_ops_map_category(m, "mystery_op"), "other");
    assert_string_equal(cal_ops_map_category(m, "RMS_NORM"), "norm");
    cal_ops_map_free(&m);
    assert_int_equal(cal_ops_map_parse(t, strlen(t), 0, &m, err, sizeof err), CAL_OK);
    assert_null(cal_ops_map_category(m, "RMS_NORM"));
    cal_ops_map_free(&m);
    t = "MUL_MAT\n";
    assert_int_equal(cal_ops_map_parse(t, strlen(t), 1, &m, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "line 1"));
    t = "\nMUL_MAT Dense Proj\n";
    assert_int_equal(cal_ops_map_parse(t, strlen(t), 1, &m, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "line 2"));
    t = "MUL_MAT BIG\n";
    assert_int_equal(cal_ops_map_parse(t, strlen(t), 1, &m, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "BIG"));
    assert_null(m);
}

static void test_errors(void **state)
{
    (void)state;
    cal_ops_map *m = NULL;
    assert_int_equal(cal_ops_map_default(&m), CAL_OK);
    cal_ops_recon r;
    memset(&r, 0x5a, sizeof r);
    unsigned char before = ((unsigned char *)&r)[10];
    char err[256];
    const char *t = "op,calls,time_ms\nMUL_MAT,1,1\n";
    cal_ops_profile *p = NULL;
    assert_int_equal(cal_ops_parse_csv(t, strlen(t), "n.csv", &p, err, sizeof err), CAL_OK);
    /* no tokens, then no end to end: each named, the result untouched */
    assert_int_equal(cal_ops_reconcile(p, NULL, m, NULL, &r, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "n.csv: tokens unknown"));
    p->tokens = 10;
    assert_int_equal(cal_ops_reconcile(p, NULL, m, NULL, &r, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "end-to-end"));
    /* kernels longer than end to end */
    p->e2e_ns = 0.5e6;
    assert_int_equal(cal_ops_reconcile(p, NULL, m, NULL, &r, err, sizeof err), CAL_ERANGE);
    assert_non_null(strstr(err, "more than the end to end"));
    assert_int_equal(((unsigned char *)&r)[10], before);
    /* every known kernel is the whole time: coverage 1, no ceiling */
    p->e2e_ns = 1e6;
    assert_int_equal(cal_ops_reconcile(p, NULL, m, NULL, &r, err, sizeof err), CAL_OK);
    NEAR(r.side[0].coverage, 1, 0);
    assert_true(isnan(r.side[0].ceiling));
    /* a what-if on a category nobody has */
    cal_ops_opts o = {0};
    o.n_whatif = 1;
    snprintf(o.whatif[0].cat, sizeof o.whatif[0].cat, "attention");
    o.whatif[0].speedup = 2;
    assert_int_equal(cal_ops_reconcile(p, NULL, m, &o, &r, err, sizeof err), CAL_ENOTFOUND);
    assert_non_null(strstr(err, "attention"));
    /* an op bench is not a run */
    p->format = CAL_OPS_OPBENCH;
    assert_int_equal(cal_ops_reconcile(p, NULL, m, NULL, &r, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "op bench"));
    cal_ops_profile_free(&p);
    /* an engine profile of another format is refused */
    t = "{\"format\":\"caliper.engine.profile/2\",\"ops\":[]}";
    assert_int_equal(cal_ops_parse(t, strlen(t), NULL, NULL, &p, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "profile/2"));
    t = "{\"format\":\"caliper.engine.profile/1\",\"steps\":1,\"tokens\":1,\"step_time_ns\":5,"
        "\"ops\":[{\"op\":\"norm\",\"calls\":1,\"time_ns\":-3}]}";
    assert_int_equal(cal_ops_parse(t, strlen(t), NULL, NULL, &p, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "ops[0].time_ns"));
    assert_null(p);
    cal_ops_map_free(&m);
}

/* The in-graph profile of a MoE model against its op bench: per call, and
 * the MoE block as router + experts. */
static void test_trap(void **state)
{
    (void)state;
    cal_ops_profile *g = load(write_file("graph.json",
        "{\"format\":\"caliper.engine.profile/1\",\"steps\":10,\"tokens\":10,\"step_time_ns\":50000,"
        "\"ops\":[{\"op\":\"moe_router\",\"calls\":80,\"time_ns\":8000,\"flops\":1,\"bytes\":1},"
        "{\"op\":\"moe_experts\",\"calls\":80,\"time_ns\":32000,\"flops\":1,\"bytes\":1},"
        "{\"op\":\"norm\",\"calls\":170,\"time_ns\":1700}]}"));
    cal_ops_profile *b = load(write_file("bench.json",
        "{\"format\":\"caliper.engine.opbench/1\",\"tokens_per_call\":1,\"pos\":8,\"reps\":10,"
        "\"ops\":[{\"op\":\"moe_router\",\"calls\":10,\"time_ns\":500,\"call_ns\":40},"
        "{\"op\":\"moe_experts\",\"calls\":10,\"time_ns\":1500,\"call_ns\":140},"
        "{\"op\":\"norm\",\"calls\":10,\"time_ns\":100,\"call_ns\":10},"
        "{\"op\":\"logits\",\"calls\":10,\"time_ns\":100,\"call_ns\":10}]}"));
    assert_int_equal(b->format, CAL_OPS_OPBENCH);
    NEAR(b->step_tokens, 1, 0);
    cal_ops_trap t;
    char err[256];
    assert_int_equal(cal_ops_trap_compare(g, b, &t, err, sizeof err), CAL_OK);
    assert_int_equal(t.n_rows, 4);   /* router, experts, norm, the block; no logits in the graph */
    NEAR(t.graph_tokens_per_step, 1, 0);
    assert_string_equal(t.rows[1].op, "moe_experts");
    NEAR(t.rows[1].graph_call_ns, 400, 1e-9);
    NEAR(t.rows[1].iso_call_ns, 150, 1e-9);   /* the mean, as the graph's is */
    NEAR(t.rows[1].undercount, 0.625, 1e-12);
    assert_int_equal(t.moe_row, 3);
    assert_string_equal(t.rows[3].op, "MoE block");
    NEAR(t.rows[3].graph_call_ns, 500, 1e-9);
    NEAR(t.rows[3].iso_call_ns, 200, 1e-9);
    NEAR(t.rows[3].undercount, 0.6, 1e-12);
    /* the wrong way round */
    assert_int_equal(cal_ops_trap_compare(b, g, &t, err, sizeof err), CAL_EINVAL);
    cal_ops_profile_free(&g);
    cal_ops_profile_free(&b);
}

static void test_json_html(void **state)
{
    (void)state;
    cal_ops_profile *a = load(write_file("seed2.json", SEED_ENGINE));
    cal_ops_profile *b = load(write_file("seed2.csv", SEED_CSV));
    b->e2e_ns = 1.2e8;
    cal_ops_map *m = NULL;
    assert_int_equal(cal_ops_map_default(&m), CAL_OK);
    cal_ops_opts o = {.bandwidth_Bps = 100e9};
    cal_ops_recon r;
    char err[256];
    assert_int_equal(cal_ops_reconcile(a, b, m, &o, &r, err, sizeof err), CAL_OK);
    int dp = cal_ops_recon_cat(&r, "dense_proj");
    /* 50 MB per token in 0.25 ms: 200 GB/s, twice the given bandwidth */
    NEAR(r.side[0].cat[dp].Bps, (4e9 + 1e9) / 0.025, 1);
    NEAR(r.side[0].cat[dp].bw_fraction, 2.0, 1e-9);
    cal_buf j = CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_ops_to_json(&r, NULL, &j), CAL_OK);
    assert_non_null(strstr(j.data, "\"format\": \"caliper.ops/1\""));
    assert_non_null(strstr(j.data, "\"coverage\": 0.408"));
    assert_non_null(strstr(j.data, "\"biggest\""));
    cal_buf h = CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_ops_html_section(j.data, j.len, &h, err, sizeof err), CAL_OK);
    assert_non_null(strstr(h.data, "<section class=\"ops\""));
    assert_non_null(strstr(h.data, "coverage 0.408"));
    assert_non_null(strstr(h.data, "at most 1.69&times;"));
    /* one bar per side per category plus the outside row */
    size_t bars = 0;
    for (const char *s = h.data; (s = strstr(s, "class=\"bar\"")); s++) bars++;
    assert_int_equal(bars, 2 * (r.n_cats + 1));
    assert_non_null(strstr(h.data, "The biggest gap is outside every kernel"));
    /* labels are escaped */
    snprintf(a->label, sizeof a->label, "<b>&");
    cal_buf_reset(&j);
    cal_buf_reset(&h);
    assert_int_equal(cal_ops_reconcile(a, NULL, m, NULL, &r, err, sizeof err), CAL_OK);
    assert_int_equal(cal_ops_to_json(&r, NULL, &j), CAL_OK);
    assert_int_equal(cal_ops_html_section(j.data, j.len, &h, err, sizeof err), CAL_OK);
    assert_null(strstr(h.data, "<b>&"));
    assert_non_null(strstr(h.data, "&lt;b&gt;&amp;"));
    /* not an ops document */
    const char *t = "{\"format\":\"caliper-result\"}";
    assert_int_equal(cal_ops_html_section(t, strlen(t), &h, err, sizeof err), CAL_EPROTO);
    cal_buf_free(&j);
    cal_buf_free(&h);
    cal_ops_map_free(&m);
    cal_ops_profile_free(&a);
    cal_ops_profile_free(&b);
}

static void test_copy_bw(void **state)
{
    (void)state;
    double bw = 0;
    assert_int_equal(cal_ops_measure_copy_bw((size_t)8 << 20, 3, &bw), CAL_OK);
    /* any machine copies faster than 10 MB/s and slower than 100 TB/s */
    assert_true(bw > 1e7 && bw < 1e14);
    assert_int_equal(cal_ops_measure_copy_bw(1000, 3, &bw), CAL_EINVAL);
    assert_int_equal(cal_ops_measure_copy_bw((size_t)8 << 20, 0, &bw), CAL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_engine), cmocka_unit_test(test_seed_csv),
        cmocka_unit_test(test_gap),         cmocka_unit_test(test_trace),
        cmocka_unit_test(test_csv),         cmocka_unit_test(test_map),
        cmocka_unit_test(test_errors),      cmocka_unit_test(test_trap),
        cmocka_unit_test(test_json_html),   cmocka_unit_test(test_copy_bw),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
