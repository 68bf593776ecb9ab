/* Unit tests: the cell summary (both columns, TTFT/TPOT/ITL/E2E, counts
 * per status), the shot-series verdict on the seed's numbers, and the
 * target lifecycle's failure paths (nothing answering, an engine that
 * exits, an engine that never answers and must be killed). */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/protocol.h"

#define MS 1000000LL
#define S  1000000000LL

static void ok_req(cal_req_result *r, int64_t sched, int64_t ttft, int64_t e2e, int out, int prompt)
{
    memset(r, 0, sizeof *r);
    r->status = CAL_REQ_OK;
    r->sched_ns = sched;
    r->send_ns = sched;
    r->first_token_ns = sched + ttft;
    r->last_token_ns = r->end_ns = sched + e2e;
    r->output_tokens = out;
    r->prompt_tokens = prompt;
    r->server_prefill_ms = r->server_decode_ms = -1;
    r->server_decode_tokens = -1;
}

static void test_summary_columns(void **state)
{
    (void)state;
    cal_req_result r[4];
    /* two ok requests back to back, 1 s wall: 10 + 10 tokens */
    ok_req(&r[0], 1 * S, 100 * MS, 500 * MS, 10, 100);
    ok_req(&r[1], 1 * S + 500 * MS, 100 * MS, 500 * MS, 10, 100);
    memset(&r[2], 0, sizeof r[2]);
    r[2].status = CAL_REQ_TIMEOUT;
    memset(&r[3], 0, sizeof r[3]);
    r[3].status = CAL_REQ_CANCELLED;
    /* chunk times for the first: 10 chunks 44.44 ms apart */
    int64_t ch[10];
    for (int i = 0; i < 10; i++) ch[i] = r[0].first_token_ns + i * 400 * MS / 9;
    r[0].chunk_ns = ch;
    r[0].n_chunks = 10;
    cal_summary s;
    assert_int_equal(cal_summary_compute(r, 4, 0, 10, &s), CAL_OK);
    assert_int_equal(s.completed, 2);
    assert_int_equal(s.failed, 2);
    assert_int_equal(s.n_timeout, 1);
    assert_int_equal(s.n_cancelled, 1);
    assert_int_equal(s.total_output_tokens, 20);
    assert_int_equal(s.total_input_tokens, 200);
    assert_int_equal(s.output_len_mismatch, 0);
    assert_true(fabs(s.duration - 1.0) < 1e-9);                 /* first send → last end */
    assert_true(fabs(s.output_throughput - 20.0) < 1e-9);        /* aggregate */
    assert_true(fabs(s.per_request_output_throughput_median - 20.0) < 1e-9); /* 10 / 0.5 s */
    assert_true(fabs(s.median_ttft_ms - 100.0) < 1e-9);
    assert_true(fabs(s.median_tpot_ms - 400.0 / 9) < 1e-9);      /* (E2E−TTFT)/(out−1) */
    assert_true(fabs(s.median_itl_ms - 400.0 / 9) < 0.01);
    assert_true(fabs(s.median_e2el_ms - 500.0) < 1e-9);
    assert_true(fabs(s.prefill_tps_median - 1000.0) < 1e-9);     /* 100 tok / 0.1 s */
    assert_true(isnan(s.server_decode_tps_median));
    assert_true(isnan(s.clock_mhz_mean));

    /* a fixed length the server did not honour is counted */
    r[1].output_tokens = 7;
    assert_int_equal(cal_summary_compute(r, 2, 2.0, 10, &s), CAL_OK);
    assert_int_equal(s.output_len_mismatch, 1);
    assert_true(fabs(s.output_throughput - 17.0 / 2.0) < 1e-9);  /* duration given */
    /* SPEC 1.2: at concurrency 1 gaps dilute the aggregate, not per-request */
    ok_req(&r[0], 1 * S, 10 * MS, 100 * MS, 10, 8);
    ok_req(&r[1], 11 * S, 10 * MS, 100 * MS, 10, 8);
    assert_int_equal(cal_summary_compute(r, 2, 0, 0, &s), CAL_OK);
    assert_true(s.output_throughput < 2.1);
    assert_true(fabs(s.per_request_output_throughput_median - 100.0) < 1e-9);
    /* nothing at all: statistics stay NAN, counts 0 */
    assert_int_equal(cal_summary_compute(r, 0, 0, 0, &s), CAL_OK);
    assert_int_equal(s.completed, 0);
    assert_true(isnan(s.median_ttft_ms));
    assert_true(isnan(s.output_throughput));
}

/* SPEC 1.3: 377 decode tokens in 10.003 s = 37.69 tok/s; TTFT 6.084 s. */
static void test_summary_client_decode_example(void **state)
{
    (void)state;
    cal_req_result r;
    ok_req(&r, 5 * S, 6084 * MS, 16087 * MS, 378, 8112);
    cal_summary s;
    assert_int_equal(cal_summary_compute(&r, 1, 0, 0, &s), CAL_OK);
    assert_true(fabs(s.decode_tps_median - 377.0 / 10.003) < 1e-6);
    assert_true(fabs(s.decode_tps_median - 37.69) < 0.01);
    assert_true(fabs(s.median_ttft_ms - 6084.0) < 1e-9);
    /* llama-server's timings for it: predicted_n counts the first token,
     * predicted_ms does not cover it: (378 − 1) ÷ 10.003 s, as it reports */
    r.server_decode_ms = 10003;
    r.server_decode_tokens = 378;
    assert_int_equal(cal_summary_compute(&r, 1, 0, 0, &s), CAL_OK);
    assert_true(fabs(s.server_decode_tps_median - 37.69) < 0.01);
}

/* SPEC 1.1's series 980 → 939 → 880 → 881 tok/s, one number per shot.
 * Its warm shots disagree among themselves by 6 %, so three of them cannot
 * call a 9 % step (t with 2 df), nor rule out a wall of 10 %: cannot judge;
 * five warm shots that agree call it. */
static void test_shot_verdict_seed(void **state)
{
    (void)state;
    double v[] = {980, 939, 880, 881};
    int idx[] = {1, 2, 3, 4, 5, 6};
    cal_shot_verdict sv;
    assert_int_equal(cal_shot_series_verdict(v, idx, 4, "prefill tok/s", 0, &sv), 0);
    assert_false(sv.beyond_noise);
    assert_true(fabs(sv.drop - (1 - exp((log(939.0) + log(880.0) + log(881.0)) / 3) / 980.0)) < 1e-9);
    assert_non_null(strstr(sv.text, "cannot judge: shots 2–4 -8.2 % from shot 1"));
    assert_non_null(strstr(sv.text, "too wide to rule out a wall larger than 10 %"));

    double wall[] = {980, 881, 880, 879, 882, 881};
    assert_int_equal(cal_shot_series_verdict(wall, idx, 6, "prefill tok/s", 0, &sv), 1);
    assert_true(sv.beyond_noise);
    assert_true(fabs(sv.drop - 0.1010) < 0.001);
    assert_non_null(strstr(sv.text, "shots 2–6 run 10.1 % below shot 1, 95 % CI "));
    assert_non_null(strstr(sv.text, "quote warm figures"));

    /* one process per shot: 978–982 every time — no wall */
    double cold[] = {980, 978, 982, 979};
    assert_int_equal(cal_shot_series_verdict(cold, idx, 4, "prefill tok/s", 0, &sv), 1);
    assert_false(sv.beyond_noise);
    assert_non_null(strstr(sv.text, "within 10 % of shot 1: no wall larger than 10 %"));
    assert_true(sv.band >= CAL_SHOT_NOISE_FLOOR);

    /* noisy repeats widen the band: a 5 % drop inside ±10 % noise is no
     * wall, and no evidence of none either */
    double noisy[] = {1000, 850, 1050, 950};
    assert_int_equal(cal_shot_series_verdict(noisy, idx, 4, "tok/s", 0, &sv), 0);
    assert_true(sv.band > 0.09);
    assert_false(sv.beyond_noise);
    assert_non_null(strstr(sv.text, "cannot judge"));

    /* later shots faster: shot 1 was the slow one, but nothing says cold */
    double rising[] = {800, 990, 1000, 995, 998};
    cal_shot_series_verdict(rising, idx, 5, "tok/s", 0, &sv);
    assert_true(sv.beyond_noise);
    assert_true(sv.drop < 0);
    assert_non_null(strstr(sv.text, "above shot 1"));
    assert_null(strstr(sv.text, "warm-up"));

    /* warm-ups removed by the caller: indices carry through */
    int idx2[] = {3, 4, 5};
    double w[] = {1000, 900, 905};
    cal_shot_series_verdict(w, idx2, 3, "tok/s", 0, &sv);
    assert_non_null(strstr(sv.text, "shots 4–5"));
    assert_non_null(strstr(sv.text, "shot 3"));

    /* a wider floor: a 10 % drop is not called on a machine that swings 15 % */
    cal_shot_series_verdict(wall, idx, 6, "tok/s", 0.15, &sv);
    assert_false(sv.beyond_noise);
    assert_non_null(strstr(sv.text, "under the 15 % floor"));

    /* too little to judge: two shots; NAN values skipped */
    double one[] = {1000, NAN};
    assert_int_equal(cal_shot_series_verdict(one, idx, 2, "tok/s", 0, &sv), 0);
    assert_false(sv.judged);
    assert_non_null(strstr(sv.text, "fewer than 2"));
    double two[] = {1000, 880};
    assert_int_equal(cal_shot_series_verdict(two, idx, 2, "tok/s", 0, &sv), 0);
    assert_false(sv.beyond_noise);
    assert_non_null(strstr(sv.text, "cannot judge: 1 warm shot; measure 5 shots"));
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

/* Running or sleeping, not gone or a zombie awaiting its reaper. */
static int alive(int pid)
{
    char path[64], st[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(st, 1, sizeof st - 1, f);
    fclose(f);
    st[n] = '\0';
    char *p = strrchr(st, ')');
    return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static void test_target_failures(void **state)
{
    (void)state;
    char err[1200], url[64];
    cal_target *t = NULL;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", free_port());
    cal_target_config c = {.kind = CAL_TARGET_URL, .url = url};
    assert_int_equal(cal_target_start(&c, &t, err, sizeof err), CAL_ECONNECT);
    assert_null(t);
    assert_non_null(strstr(err, "does not answer"));

    /* an engine that exits at once: its status and its words come back */
    cal_target_config l = {.kind = CAL_TARGET_LAUNCH, .command = "echo model file missing >&2; exit 3",
                           .port = free_port(), .launch_timeout_ns = 5 * S};
    assert_int_equal(cal_target_start(&l, &t, err, sizeof err), CAL_EIO);
    assert_non_null(strstr(err, "status 3"));
    assert_non_null(strstr(err, "model file missing"));

    /* an engine that never answers: timed out, and its whole group killed */
    char cmd[128], flag[64];
    snprintf(flag, sizeof flag, "/tmp/caliper-test-target-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "sleep 30 & echo $! > %s; wait", flag);
    cal_target_config h = {.kind = CAL_TARGET_LAUNCH, .command = cmd, .port = free_port(),
                           .launch_timeout_ns = 400 * MS, .grace_ns = 200 * MS};
    assert_int_equal(cal_target_start(&h, &t, err, sizeof err), CAL_ETIMEDOUT);
    assert_non_null(strstr(err, "did not answer"));
    FILE *f = fopen(flag, "r");
    assert_non_null(f);
    int pid = 0;
    assert_int_equal(fscanf(f, "%d", &pid), 1);
    fclose(f);
    unlink(flag);
    usleep(100000);
    assert_false(alive(pid));   /* the grandchild went with the group */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_columns),
        cmocka_unit_test(test_summary_client_decode_example),
        cmocka_unit_test(test_shot_verdict_seed),
        cmocka_unit_test(test_target_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
