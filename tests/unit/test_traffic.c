/* Traffic workloads: length specs and draws, every dataset format and its
 * errors, the chat scenario's shared prefixes and the replay's sessions,
 * with a fake tokenizer (one token per 4 bytes, rounded up). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tmp_db.h"
#include "caliper/error.h"
#include "caliper/probe.h"
#include "caliper/report.h"
#include "caliper/run.h"
#include "caliper/store.h"
#include <unistd.h>
#include "caliper/workload_traffic.h"

static int fake_count(void *ud, const char *text, int *n)
{
    (*(int *)ud)++;
    *n = (int)((strlen(text) + 3) / 4);
    return CAL_OK;
}

static void test_lendist(void **st)
{
    (void)st;
    cal_lendist d;
    char why[200];
    assert_int_equal(cal_lendist_parse("256", 1 << 20, &d, why, sizeof why), CAL_OK);
    assert_int_equal(d.kind, CAL_LEN_FIXED);
    assert_int_equal(d.n, 256);
    assert_int_equal(cal_lendist_parse("uniform:10-20", 1 << 20, &d, why, sizeof why), CAL_OK);
    uint64_t s = 3, s2 = 3;
    int seen_lo = 0, seen_hi = 0;
    for (int i = 0; i < 2000; i++) {
        int v = cal_lendist_draw(&d, &s);
        assert_true(v >= 10 && v <= 20);
        assert_int_equal(v, cal_lendist_draw(&d, &s2));   /* same seed, same draws */
        seen_lo |= v == 10;
        seen_hi |= v == 20;
    }
    assert_true(seen_lo && seen_hi);   /* both ends included */
    assert_int_equal(cal_lendist_parse("normal:100,30", 1 << 20, &d, why, sizeof why), CAL_OK);
    double sum = 0;
    for (int i = 0; i < 4000; i++) {
        int v = cal_lendist_draw(&d, &s);
        assert_true(v >= 1 && v <= 220);
        sum += v;
    }
    assert_true(fabs(sum / 4000 - 100) < 3);   /* 4 se of a mean of 4000 draws of sd 30 */
    assert_int_equal(cal_lendist_parse("uniform:9-3", 100, &d, why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "uniform:9-3"));
    assert_int_equal(cal_lendist_parse("normal:5", 100, &d, why, sizeof why), CAL_EINVAL);
    assert_int_equal(cal_lendist_parse("0", 100, &d, why, sizeof why), CAL_EINVAL);
    assert_int_equal(cal_lendist_parse("dataset", 100, &d, why, sizeof why), CAL_OK);
    assert_int_equal(d.kind, CAL_LEN_DATASET);
}

static void test_datasets(void **st)
{
    (void)st;
    cal_dataset *d = NULL;
    char why[256];
    const char *txt = "one\n\n  \ntwo\r\nthree";
    assert_int_equal(cal_dataset_parse(txt, strlen(txt), CAL_DS_TEXT, "t.txt", &d, why, sizeof why), CAL_OK);
    assert_int_equal(d->n, 3);
    assert_string_equal(d->e[1].text, "two");
    assert_int_equal(strlen(d->sha256), 64);
    /* sha256("one\n\n  \ntwo\r\nthree") changes with one byte */
    char h[65];
    memcpy(h, d->sha256, 65);
    cal_dataset_free(&d);
    assert_null(d);
    assert_int_equal(cal_dataset_parse("one\n\n  \ntwo\r\nthreE", 18, CAL_DS_TEXT, "t", &d, why, sizeof why), CAL_OK);
    assert_string_not_equal(h, d->sha256);
    cal_dataset_free(&d);

    const char *jl = "{\"prompt\":\"a b\",\"max_tokens\":7}\n\"bare\"\n{\"text\":\"c\"}\n";
    assert_int_equal(cal_dataset_parse(jl, strlen(jl), CAL_DS_JSONL, "j", &d, why, sizeof why), CAL_OK);
    assert_int_equal(d->n, 3);
    assert_int_equal(d->e[0].output_tokens, 7);
    assert_string_equal(d->e[1].text, "bare");
    cal_dataset_free(&d);
    const char *bad = "{\"prompt\":\"a\"}\n{\"prompt\":3}\n";
    assert_int_equal(cal_dataset_parse(bad, strlen(bad), CAL_DS_JSONL, "j", &d, why, sizeof why), CAL_EPROTO);
    assert_null(d);
    assert_non_null(strstr(why, "line 2"));

    /* an output length that is not a whole number of tokens refuses the
     * file, naming the line and field, instead of becoming --max-tokens */
    static const struct { cal_ds_format f; const char *text, *msg; } bad_out[] = {
        {CAL_DS_JSONL, "{\"prompt\":\"a\",\"output_tokens\":8}\n{\"prompt\":\"b\",\"output_tokens\":-5}\n",
         "line 2: \"output_tokens\" is -5: not a whole number of tokens in [1, 16777216]"},
        {CAL_DS_JSONL, "{\"prompt\":\"a\",\"output_tokens\":2.7}\n",
         "line 1: \"output_tokens\" is 2.7: not a whole number"},
        {CAL_DS_JSONL, "{\"prompt\":\"a\",\"max_tokens\":1e308}\n",
         "line 1: \"max_tokens\" is 1e308: not a whole number"},
        {CAL_DS_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"Q\"}],\"max_tokens\":\"9\"}\n",
         "line 1: \"max_tokens\" is \"9\": not a whole number"},
        {CAL_DS_PROXY_LOG, "{\"status\":200,\"prefix_tokens\":120,\"output_tokens\":-1}\n",
         "line 1: \"output_tokens\" is -1: not a whole number of tokens in [0, 16777216]"},
    };
    for (size_t i = 0; i < sizeof bad_out / sizeof bad_out[0]; i++) {
        assert_int_equal(cal_dataset_parse(bad_out[i].text, strlen(bad_out[i].text), bad_out[i].f, "b",
                                           &d, why, sizeof why), CAL_EPROTO);
        assert_null(d);
        assert_non_null(strstr(why, bad_out[i].msg));
    }
    /* null is unknown (the run's --max-tokens), as is a proxy log's 0 */
    const char *nul = "{\"prompt\":\"a\",\"output_tokens\":null}\n";
    assert_int_equal(cal_dataset_parse(nul, strlen(nul), CAL_DS_JSONL, "n", &d, why, sizeof why), CAL_OK);
    assert_int_equal(d->e[0].output_tokens, -1);
    cal_dataset_free(&d);
    const char *zero = "{\"status\":200,\"prefix_tokens\":12,\"output_tokens\":0}\n";
    assert_int_equal(cal_dataset_parse(zero, strlen(zero), CAL_DS_PROXY_LOG, "z", &d, why, sizeof why), CAL_OK);
    assert_int_equal(d->e[0].output_tokens, -1);
    cal_dataset_free(&d);

    const char *sg = "[{\"conversations\":[{\"from\":\"system\",\"value\":\"s\"},{\"from\":\"human\",\"value\":\"hi\"},"
                     "{\"from\":\"gpt\",\"value\":\"hello!\"}]},{\"conversations\":[{\"from\":\"gpt\",\"value\":\"x\"}]}]";
    assert_int_equal(cal_dataset_parse(sg, strlen(sg), CAL_DS_SHAREGPT, "s", &d, why, sizeof why), CAL_OK);
    assert_int_equal(d->n, 1);
    assert_int_equal(d->skipped, 1);
    assert_string_equal(d->e[0].text, "hi");
    assert_int_equal(d->e[0].output_chars, 6);
    cal_dataset_free(&d);

    const char *oc = "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":"
                     "[{\"type\":\"text\",\"text\":\"Q\"}]}],\"max_completion_tokens\":9}\n";
    assert_int_equal(cal_dataset_parse(oc, strlen(oc), CAL_DS_OPENAI_CHAT, "o", &d, why, sizeof why), CAL_OK);
    assert_string_equal(d->e[0].text, "S\nQ");
    assert_int_equal(d->e[0].output_tokens, 9);
    cal_dataset_free(&d);

    const char *pl = "{\"status\":200,\"prefix_tokens\":120,\"output_tokens\":8}\n"
                     "{\"status\":500,\"prefix_tokens\":100}\n";
    assert_int_equal(cal_dataset_parse(pl, strlen(pl), CAL_DS_PROXY_LOG, "p", &d, why, sizeof why), CAL_OK);
    assert_int_equal(d->n, 1);
    assert_null(d->e[0].text);
    assert_int_equal(d->e[0].prompt_tokens, 120);
    assert_int_equal(d->skipped, 1);
    /* the draw is seeded: the same (seed, index), the same entry */
    assert_int_equal(cal_dataset_pick(d, 5, 9), cal_dataset_pick(d, 5, 9));
    cal_dataset_free(&d);
    assert_int_equal(cal_dataset_parse("\n\n", 2, CAL_DS_TEXT, "e", &d, why, sizeof why), CAL_EPROTO);
}

static void test_chat(void **st)
{
    (void)st;
    int calls = 0;
    cal_chat_config cc = {.users = 3, .turns = 4, .system_tokens = 200,
                          .user_tokens = {.kind = CAL_LEN_FIXED, .n = 30},
                          .answer_tokens = {.kind = CAL_LEN_FIXED, .n = 10},
                          .think_ms = {.kind = CAL_LEN_FIXED, .n = 500}, .stagger_s = 0.1,
                          .content = CAL_CONTENT_PROSE, .seed = 1, .count = fake_count, .count_ud = &calls};
    cal_traffic *tr = NULL;
    char why[200];
    assert_int_equal(cal_chat_build(&cc, &tr, why, sizeof why), CAL_OK);
    assert_true(abs(tr->system_tokens - 200) <= 1);
    for (int u = 0; u < 3; u++)
        for (int k = 0; k < 4; k++) {
            const cal_turn *t = cal_traffic_turn(tr, k, u);
            int n;
            fake_count(&calls, t->prompt, &n);
            assert_int_equal(t->prompt_tokens, n);                /* counted, not wished */
            assert_int_equal(t->max_tokens, 10);
            if (k == 0) {
                assert_int_equal(t->shared_tokens, u ? tr->system_tokens : 0);
                assert_true(fabs(t->think_s - 0.1 * u) < 1e-9);
            } else {
                const cal_turn *p = cal_traffic_turn(tr, k - 1, u);
                assert_int_equal(t->shared_tokens, p->prompt_tokens);
                /* the previous prompt is a prefix of this one */
                assert_memory_equal(t->prompt, p->prompt, strlen(p->prompt));
                assert_true(abs(t->prompt_tokens - p->prompt_tokens - 40) <= 1);
                assert_true(fabs(t->think_s - 0.5) < 1e-9);
            }
        }
    /* users differ in their messages, share the system block */
    assert_string_not_equal(cal_traffic_turn(tr, 0, 0)->prompt, cal_traffic_turn(tr, 0, 1)->prompt);
    assert_non_null(tr->protocol_json);
    cal_traffic_free(&tr);
    assert_null(tr);
    cc.users = 0;
    assert_int_equal(cal_chat_build(&cc, &tr, why, sizeof why), CAL_EINVAL);
}

/* A tokenizer that asks the build to stop on its tenth call, as a SIGINT
 * handler would set the run's stop flag while a long prefix is counted. */
typedef struct stopper { int calls; volatile int stop; } stopper;
static int stopping_count(void *ud, const char *text, int *n)
{
    stopper *s = ud;
    if (++s->calls == 10) s->stop = 1;
    *n = (int)((strlen(text) + 3) / 4);
    return CAL_OK;
}

static void test_chat_stops_and_bounds(void **st)
{
    (void)st;
    stopper sp = {0};
    cal_chat_config cc = {.users = 64, .turns = 16, .system_tokens = 500,
                          .user_tokens = {.kind = CAL_LEN_FIXED, .n = 30},
                          .answer_tokens = {.kind = CAL_LEN_FIXED, .n = 10},
                          .think_ms = {.kind = CAL_LEN_FIXED, .n = 0},
                          .content = CAL_CONTENT_PROSE, .seed = 1, .count = stopping_count,
                          .count_ud = &sp, .stop = &sp.stop};
    cal_traffic *tr = NULL;
    char why[300] = "";
    /* stopped: answered before the next turn, not after 64 × 16 of them */
    assert_int_equal(cal_chat_build(&cc, &tr, why, sizeof why), CAL_ECANCEL);
    assert_null(tr);
    assert_true(sp.calls <= 12);
    assert_non_null(strstr(why, "stopped"));
    /* a scenario too large to hold is refused before a prompt is built (the
     * one call learns the content's characters per token), with the sizes
     * that make it so */
    stopper sp2 = {0};
    cc.count_ud = &sp2;
    cc.stop = &sp2.stop;
    cc.users = 256, cc.turns = 64, cc.system_tokens = 100000;
    assert_int_equal(cal_chat_build(&cc, &tr, why, sizeof why), CAL_ETOOBIG);
    assert_null(tr);
    assert_int_equal(sp2.calls, 1);
    assert_non_null(strstr(why, "256 users"));
    assert_non_null(strstr(why, "64 turns"));
    assert_non_null(strstr(why, "100000-token system block"));
}

/* A tokenizer that keeps a newline seam: words (runs of non-space bytes)
 * and newlines are a token each, so a text's count is the sum of its lines'
 * counts. It adds up the bytes it was asked to count. */
typedef struct wordtok { long bytes; int calls; } wordtok;
static int word_count(void *ud, const char *text, int *n)
{
    wordtok *w = ud;
    w->calls++;
    w->bytes += (long)strlen(text);
    int k = 0;
    for (const char *s = text; *s; s++) {
        if (*s == '\n') k++;
        else if (*s != ' ' && (s == text || s[-1] == ' ' || s[-1] == '\n')) k++;
    }
    *n = k;
    return CAL_OK;
}

/* Each turn counts only its new text (the previous count plus the new
 * text's): 16 users × 12 turns over a 2,000-token system block count a
 * small share of what counting every whole prompt did (old: every turn's
 * whole history, well over users × turns × the block), and every count is
 * what the whole prompt counts. A tokenizer that is not additive over the
 * seam (fake_count: a quarter of the bytes, rounded up) is caught by the
 * sampled whole counts, and the scenario is built again counting whole. */
static void test_chat_counts_the_new_text(void **st)
{
    (void)st;
    wordtok wt = {0};
    cal_chat_config cc = {.users = 16, .turns = 12, .system_tokens = 2000,
                          .user_tokens = {.kind = CAL_LEN_FIXED, .n = 40},
                          .answer_tokens = {.kind = CAL_LEN_FIXED, .n = 30},
                          .think_ms = {.kind = CAL_LEN_FIXED, .n = 0},
                          .content = CAL_CONTENT_PROSE, .seed = 4, .count = word_count,
                          .count_ud = &wt};
    cal_traffic *tr = NULL;
    char why[300] = "";
    assert_int_equal(cal_chat_build(&cc, &tr, why, sizeof why), CAL_OK);
    long sys_bytes = (long)strlen(cal_traffic_turn(tr, 0, 0)->prompt);
    assert_true(wt.bytes < 16L * 12 * sys_bytes / 4);
    for (int u = 0; u < 16; u++)
        for (int k = 0; k < 12; k++) {
            const cal_turn *t = cal_traffic_turn(tr, k, u);
            wordtok q = {0};
            int n;
            word_count(&q, t->prompt, &n);
            assert_int_equal(t->prompt_tokens, n);
            if (k) assert_true(t->prompt_tokens > cal_traffic_turn(tr, k - 1, u)->prompt_tokens);
        }
    assert_non_null(strstr(tr->protocol_json, "the previous count plus the new text"));
    cal_traffic_free(&tr);

    int calls = 0;
    cc.count = fake_count;
    cc.count_ud = &calls;
    assert_int_equal(cal_chat_build(&cc, &tr, why, sizeof why), CAL_OK);
    for (int u = 0; u < 16; u++)
        for (int k = 0; k < 12; k++) {
            const cal_turn *t = cal_traffic_turn(tr, k, u);
            int n, c2 = 0;
            fake_count(&c2, t->prompt, &n);
            assert_int_equal(t->prompt_tokens, n);
        }
    assert_non_null(strstr(tr->protocol_json, "every prompt whole"));
    cal_traffic_free(&tr);
}

static void test_replay(void **st)
{
    (void)st;
    /* two conversations interleaved: different system sizes */
    const char *log =
        "{\"wall_ns\":1000000000,\"status\":200,\"prefix\":{\"system\":{\"tokens\":100},\"history\":{\"tokens\":0},\"new\":{\"tokens\":20}},\"turn_s\":1.0,\"output_tokens\":5}\n"
        "{\"wall_ns\":1500000000,\"status\":200,\"prefix\":{\"system\":{\"tokens\":60},\"history\":{\"tokens\":0},\"new\":{\"tokens\":10}},\"turn_s\":0.5,\"output_tokens\":4}\n"
        "{\"wall_ns\":4000000000,\"status\":200,\"prefix\":{\"system\":{\"tokens\":100},\"history\":{\"tokens\":25},\"new\":{\"tokens\":20}},\"turn_s\":1.0,\"output_tokens\":5}\n"
        "{\"wall_ns\":5000000000,\"status\":502,\"prefix\":{\"system\":{\"tokens\":100}}}\n";
    int calls = 0;
    cal_traffic *tr = NULL;
    char why[200];
    assert_int_equal(cal_replay_build(log, strlen(log), "s.jsonl", 2.0, CAL_CONTENT_PROSE, fake_count,
                                      &calls, &tr, why, sizeof why), CAL_OK);
    assert_int_equal(tr->n_sessions, 2);
    assert_int_equal(tr->n_turns, 2);
    const cal_turn *a0 = cal_traffic_turn(tr, 0, 0), *a1 = cal_traffic_turn(tr, 1, 0),
                   *b0 = cal_traffic_turn(tr, 0, 1), *b1 = cal_traffic_turn(tr, 1, 1);
    assert_true(a0->present && a1->present && b0->present && !b1->present);
    assert_true(abs(a0->prompt_tokens - 120) <= 2);
    assert_true(abs(a1->prompt_tokens - 145) <= 2);
    assert_int_equal(a1->shared_tokens, a0->prompt_tokens);
    assert_int_equal(a1->max_tokens, 5);
    /* gaps ÷ speed 2: b starts 0.5 s after a; a's next turn 2 s after its end */
    assert_true(fabs(b0->think_s - 0.25) < 1e-9);
    assert_true(fabs(a1->think_s - 1.0) < 1e-9);
    cal_traffic_free(&tr);
    assert_int_equal(cal_replay_build("{nope", 5, "x", 1, CAL_CONTENT_PROSE, NULL, NULL, &tr, why,
                                      sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "line 1"));
    assert_int_equal(cal_replay_build(log, strlen(log), "x", 0, CAL_CONTENT_PROSE, NULL, NULL, &tr,
                                      why, sizeof why), CAL_EINVAL);
    /* a line 1e18 ns after the first would wait 31 years: refused by line,
     * as is a turn that took longer than the 7 days a log may span; the
     * bound itself is fine */
    static const struct { const char *third, *msg; int rc; } far[] = {
        {"{\"wall_ns\":1000000000000001500,\"status\":200,\"prefix\":{\"new\":{\"tokens\":5}}}\n",
         "line 3: \"wall_ns\" is 1e+09 s from the first turn's: past the 7 days", CAL_ERANGE},
        {"{\"wall_ns\":2000000000,\"status\":200,\"prefix\":{\"new\":{\"tokens\":5}},\"turn_s\":1e308}\n",
         "line 3: \"turn_s\" is 1e+308 s: past the 7 days", CAL_ERANGE},
        {"{\"wall_ns\":604801000000000,\"status\":200,\"prefix\":{\"new\":{\"tokens\":5}}}\n",
         NULL, CAL_OK},
    };
    for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s%s", (int)(strchr(strchr(log, '\n') + 1, '\n') + 1 - log), log,
                 far[i].third);
        why[0] = '\0';
        assert_int_equal(cal_replay_build(buf, strlen(buf), "x", 1, CAL_CONTENT_PROSE, fake_count, &calls,
                                          &tr, why, sizeof why), far[i].rc);
        if (far[i].msg) { assert_null(tr); assert_non_null(strstr(why, far[i].msg)); }
        cal_traffic_free(&tr);
    }
}

/* The server's prefix-cache report reaches the chunk: vLLM/SGLang usage
 * details, llama.cpp's timings, and absent means -1 (not 0). */
static void test_cached_tokens(void **st)
{
    (void)st;
    cal_chunk c;
    const char *v = "{\"choices\":[],\"usage\":{\"prompt_tokens\":500,\"completion_tokens\":8,"
                    "\"prompt_tokens_details\":{\"cached_tokens\":448}}}";
    assert_int_equal(cal_chunk_parse(v, strlen(v), &c, NULL), CAL_OK);
    assert_int_equal(c.cached_tokens, 448);
    const char *l = "{\"choices\":[],\"timings\":{\"prompt_ms\":3.5,\"predicted_ms\":9,"
                    "\"predicted_n\":8,\"cache_n\":120}}";
    assert_int_equal(cal_chunk_parse(l, strlen(l), &c, NULL), CAL_OK);
    assert_int_equal(c.cached_tokens, 120);
    const char *n = "{\"choices\":[],\"usage\":{\"prompt_tokens\":500,\"completion_tokens\":8}}";
    assert_int_equal(cal_chunk_parse(n, strlen(n), &c, NULL), CAL_OK);
    assert_int_equal(c.cached_tokens, -1);
    cal_req_result r;
    cal_req_result_init(&r);
    assert_int_equal(r.cached_tokens, -1);
}

/* An in-process engine: every token at once, a tokenizer of 4 bytes each. */
static int gen(void *ud, const cal_inproc_request *rq, cal_inproc_stream *s)
{
    (void)ud;
    cal_inproc_prefilled(s, (int)((strlen(rq->prompt) + 3) / 4));
    for (int i = 0; i < rq->max_tokens; i++)
        if (cal_inproc_token(s, 1) != CAL_OK) break;
    return CAL_OK;
}
static int gen_count(void *ud, const char *text, int *n) { return fake_count(ud, text, n); }

/* The chat scenario through the run model: one cell per turn, each user's
 * turn sent no sooner than its think time after its previous turn ended
 * (a floor: nothing here bounds it from above), and the protocol's plan
 * matching the prompts the engine was given. */
static void test_chat_series(void **st)
{
    (void)st;
    char db[64];
    snprintf(db, sizeof db, "/tmp/caliper-test-traffic-XXXXXX");
    tmp_db_name(db);
    cal_store *store = NULL;
    assert_int_equal(cal_store_open(db, &store), CAL_OK);
    int calls = 0;
    cal_inproc_engine e = {.name = "fake", .ud = &calls, .generate = gen, .count_tokens = gen_count};
    cal_run_target *t = NULL;
    assert_int_equal(cal_run_target_inproc(&e, &t), CAL_OK);
    cal_chat_config cc = {.users = 1, .turns = 3, .system_tokens = 100,
                          .user_tokens = {.kind = CAL_LEN_FIXED, .n = 20},
                          .answer_tokens = {.kind = CAL_LEN_FIXED, .n = 4},
                          .think_ms = {.kind = CAL_LEN_FIXED, .n = 30}};
    cal_run_plan plan;
    cal_run_plan_default(&plan);
    plan.shots = 1;            /* one shot, no warm-up: not the calibrated default */
    plan.warmup = 0;
    plan.telemetry = 0;
    plan.seed = 9;
    plan.chat = &cc;
    cal_run_args a = {.plan = &plan, .targets = {t}, .store = store};
    cal_run_outcome out;
    assert_int_equal(cal_run_series(&a, &out), CAL_OK);
    assert_int_equal(out.status, CAL_RUN_OK);
    const cal_run_data *d = out.data;
    assert_non_null(d);
    assert_int_equal(d->n_cells, 3);
    for (size_t k = 0; k < 3; k++) {
        const cal_cell *c = &d->cells[k];
        assert_int_equal(c->n_requests, 1);
        assert_string_equal(c->content, "chat");
        const cal_req_result *r = &d->reqs[c->req_first];
        assert_int_equal(r->status, CAL_REQ_OK);
        assert_int_equal(r->output_tokens, 4);
        if (k > 0) {
            const cal_req_result *p = &d->reqs[d->cells[k - 1].req_first];
            assert_true(r->send_ns - p->end_ns >= 30000000);   /* the think time */
            assert_true(c->prompt_tokens > d->cells[k - 1].prompt_tokens);
        }
    }
    cal_turns tt;
    assert_int_equal(cal_turns_from_run(d, &tt), CAL_OK);
    assert_int_equal(tt.n_rows, 3);
    assert_true(fabs(tt.rows[1].shared_tokens - tt.rows[0].prompt_tokens) < 1e-9);
    assert_true(tt.rows[2].shared_share > tt.rows[1].shared_share);
    assert_int_equal(tt.rows[2].n[0], 1);
    cal_turns_free(&tt);
    cal_run_outcome_clear(&out);
    cal_run_target_free(&t);
    cal_store_close(&store);
    tmp_db_remove(db);
}

/* The whole-turn A ÷ B CI takes shots as its units: two shots whose turns
 * agree closely within each shot (1.30× in one, 1.10× in the other) are two
 * values, not six, so the CI must include 1; with the turns as the units it
 * would be a narrow band around 1.19× that excludes it. */
static void test_turns_ci_over_shots(void **state)
{
    (void)state;
    static const double ratio[2][3] = {{1.30, 1.31, 1.29}, {1.10, 1.11, 1.09}};
    cal_cell cells[12];
    cal_req_result reqs[12];
    memset(cells, 0, sizeof cells);
    memset(reqs, 0, sizeof reqs);
    size_t n = 0;
    for (int s = 0; s < 2; s++)
        for (int side = 0; side < 2; side++)   /* A's three turns, then B's */
            for (int k = 0; k < 3; k++) {
                cal_cell *c = &cells[n];
                cal_req_result *r = &reqs[n];
                c->shot_index = s + 1;
                c->shot_kind = CAL_SHOT_WARM;
                snprintf(c->target, sizeof c->target, "%s", side ? "B" : "A");
                c->req_first = n;
                c->n_requests = 1;
                double turn_s = side ? 1.0 : ratio[s][k];   /* A ÷ B = ratio */
                r->status = CAL_REQ_OK;
                r->send_ns = 1000000000;
                r->first_token_ns = r->send_ns + 100000000;
                r->last_token_ns = r->send_ns + (int64_t)(turn_s * 1e9) - 1000;
                r->end_ns = r->send_ns + (int64_t)(turn_s * 1e9);
                n++;
            }
    cal_run_data d;
    memset(&d, 0, sizeof d);
    char proto[] = "{\"scenario\":{\"scenario\":\"chat\",\"turn_plan\":["
                   "{\"prompt_tokens\":[100],\"shared_tokens\":[0]},"
                   "{\"prompt_tokens\":[200],\"shared_tokens\":[100]},"
                   "{\"prompt_tokens\":[300],\"shared_tokens\":[200]}]}}";
    d.run.protocol_json = proto;
    assert_int_equal(cal_run_data_read_protocol(&d), CAL_OK);
    d.cells = cells;
    d.n_cells = n;
    d.reqs = reqs;
    d.n_reqs = n;
    cal_turns t;
    assert_int_equal(cal_turns_from_run(&d, &t), CAL_OK);
    assert_true(t.ab);
    assert_int_equal(t.pairs, 6);
    assert_int_equal(t.shots, 2);
    assert_true(fabs(t.speedup - sqrt(1.30 * 1.10)) < 0.01);
    assert_true(t.lo < 1 && 1 < t.hi);
    cal_turns_free(&t);
    cal_protocol_clear(&d.proto);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_lendist),
        cmocka_unit_test(test_datasets),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_chat_stops_and_bounds),
        cmocka_unit_test(test_chat_counts_the_new_text),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_cached_tokens),
        cmocka_unit_test(test_chat_series),
        cmocka_unit_test(test_turns_ci_over_shots),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
