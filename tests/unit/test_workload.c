/* Unit tests: prompts of exact token length against a fake tokenizer whose
 * counts jump at merges (as BPE does), unique nonces, the approximate mode
 * when no tokenizer answers, and the project's texts. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/workload.h"

/* A fake tokenizer: each run of letters is one token per 4 letters (so a
 * longer word can be one count higher than a cut of it), each digit, space
 * run, punctuation mark and newline one token. */
static int fake_count(void *ud, const char *t, int *n)
{
    int *calls = ud;
    if (calls) (*calls)++;
    int k = 0;
    while (*t) {
        if (isalpha((unsigned char)*t)) {
            int len = 0;
            while (isalpha((unsigned char)*t)) { t++; len++; }
            k += (len + 3) / 4;
        } else if (*t == ' ') {
            while (*t == ' ') t++;
            k++;
        } else {
            t++;
            k++;
        }
    }
    *n = k;
    return CAL_OK;
}
static int absent_count(void *ud, const char *t, int *n) { (void)ud; (void)t; (void)n; return CAL_EABSENT; }
static int broken_count(void *ud, const char *t, int *n) { (void)ud; (void)t; (void)n; return CAL_ECONNECT; }

static void test_exact_lengths(void **state)
{
    (void)state;
    const int lengths[] = {16, 128, 512, 2048};
    for (int c = 0; c < 3; c++)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            int calls = 0;
            cal_workload_config cfg = {.content = (cal_content)c, .prompt_tokens = lengths[li],
                                       .unique = 1, .seed = 42, .count = fake_count,
                                       .count_ud = &calls};
            cal_workload *w;
            assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
            assert_true(cal_workload_exact(w));
            char *prev = NULL;
            for (uint64_t i = 0; i < 6; i++) {
                char *p;
                int n;
                assert_int_equal(cal_workload_prompt(w, i, &p, &n), CAL_OK);
                int check;
                fake_count(NULL, p, &check);
                if (n == lengths[li]) assert_int_equal(check, lengths[li]);
                else assert_int_equal(check, n);   /* nearest, and says so */
                assert_true(abs(check - lengths[li]) <= 1);
                assert_true(p[8] == '\n');
                if (prev) assert_string_not_equal(prev, p);   /* unique */
                free(prev);
                prev = p;
            }
            free(prev);
            assert_int_equal(cal_workload_count_calls(w), calls);
            assert_true(calls > 6);
            cal_workload_close(&w);
            assert_null(w);
        }
}

static void test_exact_most_of_the_time(void **state)
{
    (void)state;
    cal_workload_config cfg = {.content = CAL_CONTENT_PROSE, .prompt_tokens = 300, .unique = 1,
                               .seed = 7, .count = fake_count};
    cal_workload *w;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
    int exact = 0;
    for (uint64_t i = 0; i < 50; i++) {
        char *p;
        int n;
        assert_int_equal(cal_workload_prompt(w, i, &p, &n), CAL_OK);
        int check;
        fake_count(NULL, p, &check);
        if (check == 300) exact++;
        free(p);
    }
    assert_true(exact >= 45);
    cal_workload_close(&w);
}

static void test_shared_prefix_and_approx(void **state)
{
    (void)state;
    cal_workload_config cfg = {.content = CAL_CONTENT_CODE, .prompt_tokens = 100, .unique = 0,
                               .count = fake_count};
    cal_workload *w;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
    char *a, *b;
    int n;
    assert_int_equal(cal_workload_prompt(w, 0, &a, &n), CAL_OK);
    assert_int_equal(cal_workload_prompt(w, 1, &b, &n), CAL_OK);
    assert_string_equal(a, b);            /* --allow-prefix-cache: identical */
    assert_true(a[8] != '\n');
    free(a); free(b);
    cal_workload_close(&w);

    /* no tokenizer: 4 characters per token, marked approximate */
    cfg.unique = 1;
    cfg.count = absent_count;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
    assert_false(cal_workload_exact(w));
    assert_int_equal(cal_workload_prompt(w, 3, &a, &n), CAL_OK);
    assert_int_equal(n, -1);
    assert_int_equal((int)strlen(a), 400);
    free(a);
    cal_workload_close(&w);
    cfg.count = NULL;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
    assert_false(cal_workload_exact(w));
    cal_workload_close(&w);

    /* a tokenizer that fails otherwise is an error, not a silent guess */
    cfg.count = broken_count;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_ECONNECT);
    assert_null(w);
    cfg.prompt_tokens = 0;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_EINVAL);
}

/* Counts twice the fake tokens: no odd length can be reached exactly. */
static int even_count(void *ud, const char *t, int *n)
{
    int rc = fake_count(ud, t, n);
    *n *= 2;
    return rc;
}

/* Below the length of the nonce line no prefix reaches the length: the
 * prompts are the nonce line alone and the workload says approximate, with
 * the shortest exact length (it used to say exact). */
static void test_below_the_nonce(void **state)
{
    (void)state;
    /* the fake tokenizer counts a nonce line ("abcdefgh\n") as 2 + 1 = 3 */
    for (int want = 1; want <= 3; want++) {
        cal_workload_config cfg = {.content = CAL_CONTENT_PROSE, .prompt_tokens = want,
                                   .unique = 1, .seed = 9, .count = fake_count};
        cal_workload *w;
        assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
        assert_int_equal(cal_workload_shortest_exact(w), 3);
        for (uint64_t i = 0; i < 4; i++) {
            char *p;
            int n, check;
            assert_int_equal(cal_workload_prompt(w, i, &p, &n), CAL_OK);
            fake_count(NULL, p, &check);
            if (want < 3) {
                assert_int_equal(n, -1);             /* not claimed */
                assert_int_equal(strlen(p), 9);      /* the nonce line alone */
                assert_int_equal(check, 3);
            } else {
                assert_int_equal(n, 3);
                assert_int_equal(check, 3);
            }
            free(p);
        }
        if (want < 3) assert_false(cal_workload_exact(w));
        else assert_true(cal_workload_exact(w));
        cal_workload_close(&w);
    }
    /* without nonces a single token is reachable */
    cal_workload_config cfg = {.content = CAL_CONTENT_PROSE, .prompt_tokens = 1, .unique = 0,
                               .count = fake_count};
    cal_workload *w;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
    assert_int_equal(cal_workload_shortest_exact(w), 1);
    char *p;
    int n, check;
    assert_int_equal(cal_workload_prompt(w, 0, &p, &n), CAL_OK);
    fake_count(NULL, p, &check);
    assert_int_equal(check, 1);
    assert_true(cal_workload_exact(w));
    free(p);
    cal_workload_close(&w);
    /* no tokenizer: nothing known */
    cfg.count = NULL;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
    assert_int_equal(cal_workload_shortest_exact(w), 0);
    cal_workload_close(&w);
}

/* A length the tokenizer cannot hit exactly: the nearest is used, and the
 * workload no longer claims exact. */
static void test_unreachable_length(void **state)
{
    (void)state;
    cal_workload_config cfg = {.content = CAL_CONTENT_PROSE, .prompt_tokens = 101, .unique = 1,
                               .seed = 3, .count = even_count};
    cal_workload *w;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
    char *p;
    int n;
    assert_int_equal(cal_workload_prompt(w, 0, &p, &n), CAL_OK);
    assert_true(n == 100 || n == 102);               /* the count it has, said */
    free(p);
    assert_false(cal_workload_exact(w));
    cal_workload_close(&w);
}

/* ---- prompts built by construction -------------------------------------- */
/* A tokenizer whose nonce lines differ in length (a rare letter costs a
 * token of its own, as an unmerged byte pair does in BPE): counting every
 * prompt then costs a call or more each. merge: a newline after a vowel
 * and before a letter joins both neighbours (the seam merges). Ids: a
 * newline is id 10. Every call, counted or with ids, is one in *calls. */
typedef struct vtok { int calls, merge, many_calls; } vtok;

static int vt_tokens(const vtok *v, const char *t, int32_t *ids)
{
    int k = 0;
    for (const char *s = t; *s;) {
        if (isalpha((unsigned char)*s)) {
            int len = 0, rare = 0;
            while (isalpha((unsigned char)*s)) { rare += strchr("qxzjk", *s) != NULL; s++; len++; }
            for (int i = 0; i < (len + 3) / 4 + rare; i++) { if (ids) ids[k] = 2000; k++; }
        } else if (*s == ' ') {
            while (*s == ' ') s++;
            if (ids) ids[k] = 32;
            k++;
        } else if (*s == '\n' && v->merge && s > t && strchr("aeiou", s[-1]) &&
                   isalpha((unsigned char)s[1])) {
            s++;                                   /* joined: no token of its own */
        } else {
            if (ids) ids[k] = (unsigned char)*s;
            k++;
            s++;
        }
    }
    return k;
}
static int vt_count(void *ud, const char *t, int *n)
{
    vtok *v = ud;
    v->calls++;
    *n = vt_tokens(v, t, NULL);
    return CAL_OK;
}
static int vt_many(void *ud, const char *const *t, size_t n, int *counts)
{
    vtok *v = ud;
    v->many_calls += (int)n;
    for (size_t i = 0; i < n; i++) vt_count(ud, t[i], &counts[i]);
    return CAL_OK;
}
static int vt_ids(void *ud, const char *t, int32_t **ids, int *n)
{
    vtok *v = ud;
    v->calls++;
    *ids = malloc((strlen(t) + 1) * sizeof **ids);
    if (!*ids) return CAL_ENOMEM;
    *n = vt_tokens(v, t, *ids);
    return CAL_OK;
}

/* 3,000 unique exact prompts cost a few hundred calls at most (the old
 * workload counted every prompt once a nonce tokenised differently: over
 * 3,000), and every one of them counts what it claims. */
static void test_built_prompts_cost_o1(void **state)
{
    (void)state;
    const int N = 3000, lengths[] = {32, 256, 1000};
    for (size_t li = 0; li < 3; li++) {
        vtok v = {0};
        cal_workload_config cfg = {.content = CAL_CONTENT_PROSE, .prompt_tokens = lengths[li],
                                   .unique = 1, .seed = 11, .count = vt_count, .count_ud = &v,
                                   .count_many = vt_many, .token_ids = vt_ids};
        cal_workload *w;
        assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
        assert_int_equal(cal_workload_prepare(w, 0, (size_t)N), CAL_OK);
        int lens[16] = {0};
        for (int i = 0; i < N; i++) {
            char *p;
            int n;
            assert_int_equal(cal_workload_prompt(w, (uint64_t)i, &p, &n), CAL_OK);
            assert_int_equal(n, lengths[li]);
            vtok quiet = {0};
            char *nl = strchr(p, '\n');
            char save = nl[1];
            nl[1] = '\0';
            int lt = vt_tokens(&quiet, p, NULL);
            nl[1] = save;
            if (lt < 16) lens[lt]++;
            assert_int_equal(vt_tokens(&quiet, p, NULL), lengths[li]);   /* exact, all of them */
            free(p);
        }
        int distinct = 0;
        for (int k = 0; k < 16; k++) distinct += lens[k] > 0;
        assert_true(distinct >= 3);                 /* the nonce lines do differ */
        assert_true(cal_workload_exact(w));
        assert_null(cal_workload_note(w));
        assert_true(cal_workload_sampled(w) >= 32);
        assert_int_equal(cal_workload_count_calls(w), v.calls);
        assert_true(v.calls < 400);
        cal_workload_close(&w);
    }
}

/* Where the seam merges, the sample catches it: every prompt is then
 * counted (through count_many), the note says so, and all stay exact. */
static void test_seam_merge_falls_back(void **state)
{
    (void)state;
    const int N = 600, want = 200;
    vtok v = {.merge = 1};
    cal_workload_config cfg = {.content = CAL_CONTENT_PROSE, .prompt_tokens = want, .unique = 1,
                               .seed = 5, .count = vt_count, .count_ud = &v,
                               .count_many = vt_many, .token_ids = vt_ids};
    cal_workload *w;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
    for (int i = 0; i < N; i++) {
        char *p;
        int n;
        assert_int_equal(cal_workload_prompt(w, (uint64_t)i, &p, &n), CAL_OK);
        vtok quiet = {.merge = 1};
        assert_int_equal(vt_tokens(&quiet, p, NULL), n);
        assert_int_equal(n, want);
        free(p);
    }
    const char *note = cal_workload_note(w);
    assert_non_null(note);
    assert_non_null(strstr(note, "every prompt is counted"));
    assert_true(cal_workload_exact(w));
    assert_true(v.many_calls >= N);                  /* one call per prompt, as it must */
    cal_workload_close(&w);

    /* the same workload told to count every prompt does so from the start */
    vtok v2 = {0};
    cfg.count_ud = &v2;
    cfg.per_prompt = 1;
    assert_int_equal(cal_workload_open(&cfg, &w), CAL_OK);
    assert_int_equal(cal_workload_prepare(w, 0, 100), CAL_OK);
    assert_true(v2.many_calls >= 100);
    assert_null(cal_workload_note(w));
    cal_workload_close(&w);
}

/* The one reader of a /tokenize answer: the shapes servers send read to
 * their count and ids; what no server sends is refused, not truncated (an
 * id of 2^31 once read as a negative id, a count of 2^40 as its low bits). */
static void test_tokenize_answer(void **state)
{
    (void)state;
    static const struct { const char *body; int rc, count, n; } CASES[] = {
        {"{\"tokens\":[1,2,3],\"count\":3,\"max_model_len\":512}", CAL_OK, 3, 3},
        {"{\"tokens\":[{\"id\":15043,\"piece\":\"Hello\"},{\"id\":7}]}", CAL_OK, 2, 2},
        {"{\"count\":5}", CAL_EABSENT, 5, 0},          /* a count alone: no ids */
        {"{\"count\":3,\"tokens\":[1,2]}", CAL_EPROTO, -1, 0},
        {"{\"tokens\":[2147483648]}", CAL_EPROTO, -1, 0},
        {"{\"tokens\":[-1]}", CAL_EPROTO, -1, 0},
        {"{\"count\":1099511627776}", CAL_EPROTO, -1, 0},
        {"{\"count\":-2}", CAL_EPROTO, -1, 0},
        {"{\"count\":\"5\"}", CAL_EPROTO, -1, 0},
        {"{\"tokens\":{\"id\":1}}", CAL_EPROTO, -1, 0},
        {"[1,2]", CAL_EPROTO, -1, 0},
        {"{\"tokens\":[1,", CAL_EPROTO, -1, 0},
        {"{}", CAL_EPROTO, -1, 0},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        int count = 0, n = -1;
        int32_t *ids = NULL;
        int rc = cal_tokenize_answer(CASES[i].body, strlen(CASES[i].body), &count, &ids, &n);
        assert_int_equal(rc, CASES[i].rc);
        assert_int_equal(n, CASES[i].n);
        if (rc == CAL_OK) assert_int_equal(count, CASES[i].count);
        else assert_null(ids);
        free(ids);
        /* the count alone reads wherever a count is there */
        rc = cal_tokenize_answer(CASES[i].body, strlen(CASES[i].body), &count, NULL, NULL);
        assert_int_equal(rc, CASES[i].rc == CAL_EABSENT ? CAL_OK : CASES[i].rc);
        assert_int_equal(count, CASES[i].count);
    }
}

static void test_texts(void **state)
{
    (void)state;
    size_t n;
    const char *p = cal_content_text(CAL_CONTENT_PROSE, &n);
    assert_true(n > 4000);
    assert_non_null(strstr(p, "lighthouse"));
    p = cal_content_text(CAL_CONTENT_CODE, &n);
    assert_true(n > 4000);
    assert_non_null(strstr(p, "pthread_mutex_lock"));
    const char *r1 = cal_content_text(CAL_CONTENT_RANDOM, &n);
    assert_true(n > 20000);
    assert_ptr_equal(r1, cal_content_text(CAL_CONTENT_RANDOM, NULL));
    cal_content c;
    assert_int_equal(cal_content_parse("code", &c), CAL_OK);
    assert_int_equal(c, CAL_CONTENT_CODE);
    assert_int_equal(cal_content_parse("poetry", &c), CAL_EINVAL);
    assert_string_equal(cal_content_name(CAL_CONTENT_RANDOM), "random");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_lengths),
        cmocka_unit_test(test_exact_most_of_the_time),
        cmocka_unit_test(test_shared_prefix_and_approx),
        cmocka_unit_test(test_texts),
        cmocka_unit_test(test_tokenize_answer),
        cmocka_unit_test(test_below_the_nonce),
        cmocka_unit_test(test_unreachable_length),
        cmocka_unit_test(test_built_prompts_cost_o1),
        cmocka_unit_test(test_seam_merge_falls_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
