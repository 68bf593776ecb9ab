/* Unit tests: the engine's op micro-benchmark (engine/opbench.c) read back
 * by caliper ops. Every op of a dense and of a MoE model is timed, with the
 * calls and FLOPs the engine profile would count for the same shapes; the
 * engine's own profile is left alone; bad options are refused; and a real
 * step's profile sets against the bench op by op. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/ops.h"
#include "engine/engine.h"
#include "engine/opbench.h"

static cal_model_config small_model(int experts)
{
    cal_model_config c;
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    c.n_layers = 2;
    c.vocab = 512;
    c.max_ctx = 64;
    if (experts) {
        c.n_experts = 4;
        c.top_k = 2;
        c.ffn_dim = 64;
    }
    return c;
}

static const cal_ops_op *op_named(const cal_ops_profile *p, const char *n)
{
    for (size_t i = 0; i < p->n_ops; i++)
        if (!strcmp(p->ops[i].name, n)) return &p->ops[i];
    return NULL;
}

static cal_ops_profile *bench(cal_engine *e, int tokens, int pos, int reps)
{
    cal_opbench_opts o = {tokens, pos, reps};
    char *json = NULL;
    assert_int_equal(cal_engine_opbench(e, &o, &json), CAL_OK);
    assert_non_null(json);
    cal_ops_profile *p = NULL;
    char err[256];
    assert_int_equal(cal_ops_parse(json, strlen(json), "ob", NULL, &p, err, sizeof err), CAL_OK);
    free(json);
    assert_int_equal(p->format, CAL_OPS_OPBENCH);
    return p;
}

static void test_dense(void **state)
{
    (void)state;
    cal_model_config c = small_model(0);
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, 1, 4, &e), CAL_OK);
    cal_ops_profile *p = bench(e, 3, 10, 5);
    assert_int_equal(p->n_ops, 8);   /* every kind but the two MoE ones */
    assert_null(op_named(p, "moe_experts"));
    const cal_ops_op *dp = op_named(p, "dense_proj");
    assert_non_null(dp);
    /* one bench call runs a layer's four products: four profile calls */
    assert_true(dp->calls == 20);
    double d = c.dim, f = c.ffn_dim, hd = d / c.n_heads, kvd = hd * c.n_kv_heads;
    double want = 5 * 2.0 * 3 * ((d + 2 * kvd) * d + d * d + 2 * f * d + d * f);
    assert_true(fabs(dp->flops - want) <= 1e-9 * want);
    assert_true(dp->time_ns > 0 && dp->call_ns > 0);
    /* attention over positions 11, 12, 13 */
    const cal_ops_op *at = op_named(p, "attention");
    assert_true(fabs(at->flops - 5 * 4.0 * d * (11 + 12 + 13)) < 1e-6);
    assert_true(p->step_tokens == 3);
    cal_ops_profile_free(&p);
    /* the engine's own profile saw nothing */
    char *prof = cal_engine_profile_json(e);
    assert_non_null(strstr(prof, "\"steps\": 0"));
    free(prof);
    /* options out of range */
    cal_opbench_opts bad[] = {{0, 0, 1}, {5, 0, 1}, {1, -1, 1}, {1, 64, 1}, {1, 0, 0}};
    char *json = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(cal_engine_opbench(e, &bad[i], &json), CAL_EINVAL);
        assert_null(json);
    }
    cal_engine_close(&e);
}

/* A MoE model: router and experts, no dense MLP; a real step's profile
 * sets against the bench per op, with a MoE block row. */
static void test_moe_trap(void **state)
{
    (void)state;
    cal_model_config c = small_model(1);
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, 1, 8, &e), CAL_OK);
    cal_ops_profile *b = bench(e, 1, 4, 5);
    assert_non_null(op_named(b, "moe_router"));
    const cal_ops_op *ex = op_named(b, "moe_experts");
    assert_non_null(ex);
    assert_null(op_named(b, "activation"));
    /* one token, top-2: two experts of one row each */
    double d = c.dim, f = c.ffn_dim;
    assert_true(fabs(ex->flops - 5 * 2.0 * 2 * 3.0 * d * f) < 1e-6);
    assert_true(op_named(b, "dense_proj")->calls == 10);   /* QKV and output per layer */
    int32_t tok[4] = {1, 2, 3, 4};
    float logits[512];
    cal_step_entry en = {0, 0, 4, tok, logits};
    assert_int_equal(cal_engine_step(e, &en, 1), CAL_OK);
    for (int i = 0; i < 3; i++) {
        cal_step_entry dec = {0, 4 + i, 1, tok, logits};
        assert_int_equal(cal_engine_step(e, &dec, 1), CAL_OK);
    }
    char *json = cal_engine_profile_json(e);
    cal_ops_profile *g = NULL;
    char err[256];
    assert_int_equal(cal_ops_parse(json, strlen(json), "graph", NULL, &g, err, sizeof err), CAL_OK);
    free(json);
    assert_true(g->tokens == 7 && g->steps == 4);
    cal_ops_trap t;
    assert_int_equal(cal_ops_trap_compare(g, b, &t, err, sizeof err), CAL_OK);
    assert_true(t.moe_row >= 0);
    assert_true(t.graph_tokens_per_step == 7.0 / 4);
    const cal_ops_trap_row *m = &t.rows[t.moe_row];
    assert_true(m->graph_call_ns > 0 && m->iso_call_ns > 0);
    assert_true(fabs(m->undercount - (1 - m->iso_call_ns / m->graph_call_ns)) < 1e-12);
    cal_ops_profile_free(&g);
    cal_ops_profile_free(&b);
    cal_engine_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_moe_trap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
