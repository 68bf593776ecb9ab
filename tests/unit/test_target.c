/* What starting a target does to the process is what its config asks:
 * the child subreaper only with .subreaper, the engine's death signal only
 * with .death_signal (and then the engine ends with the thread that started
 * it); an exec that fails is reported, by posix_spawn or from the child with
 * async-signal-safe calls only. Engines here are `python3 -m http.server` over a directory
 * holding a "health" file, so GET /health answers 200. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <libgen.h>
#include <sys/wait.h>
#include <cmocka.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/protocol.h"
#include "lib/platform/platform.h"

#define S 1000000000LL
static char g_dir[] = "/tmp/caliper-target-XXXXXX";

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len)) {
        close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int setup(void **st)
{
    (void)st;
    if (!mkdtemp(g_dir)) return -1;
    char p[128];
    snprintf(p, sizeof p, "%s/health", g_dir);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    fputs("ok\n", f);
    fclose(f);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    char p[128];
    snprintf(p, sizeof p, "%s/health", g_dir);
    unlink(p);
    rmdir(g_dir);
    return 0;
}

typedef struct start_arg {
    cal_target_config cfg;
    char cmd[256];
    cal_target *t;
    int rc;
    char err[1200];
} start_arg;

static void engine_config(start_arg *a)
{
    memset(a, 0, sizeof *a);
    snprintf(a->cmd, sizeof a->cmd, "exec python3 -m http.server --bind 127.0.0.1 --directory %s %d",
             g_dir, free_port());
    a->cfg.kind = CAL_TARGET_LAUNCH;
    a->cfg.command = a->cmd;
    a->cfg.port = atoi(strrchr(a->cmd, ' ') + 1);
    a->cfg.launch_timeout_ns = 60 * S;
    a->cfg.grace_ns = 5 * S;
}

static void *start_in_thread(void *ud)
{
    start_arg *a = ud;
    a->rc = cal_target_start(&a->cfg, &a->t, a->err, sizeof a->err);
    return NULL;
}

static int subreaper(void)
{
    int v = cal_plat_is_subreaper();
    assert_true(v == 0 || v == 1);
    return v;
}

/* Linux's extras (lib/platform/linux.c); elsewhere the test says why not. */
static int platform_lacks(int have, const char *what)
{
    if (have) return 0;
    print_message("skip: %s: not on platform %s\n", what, cal_plat_name());
    return 1;
}

/* The order matters: the subreaper, once set, stays for the process. */
static void test_subreaper_only_when_asked(void **st)
{
    (void)st;
    if (platform_lacks(cal_plat_is_subreaper() >= 0, "the child subreaper")) { skip(); return; }
    assert_int_equal(subreaper(), 0);
    start_arg a;
    engine_config(&a);
    assert_int_equal(cal_target_start(&a.cfg, &a.t, a.err, sizeof a.err), CAL_OK);
    assert_int_equal(subreaper(), 0);
    cal_target_stop(&a.t);
    assert_int_equal(subreaper(), 0);
    engine_config(&a);
    a.cfg.subreaper = 1;
    assert_int_equal(cal_target_start(&a.cfg, &a.t, a.err, sizeof a.err), CAL_OK);
    assert_int_equal(subreaper(), 1);
    cal_target_stop(&a.t);
}

/* Wait (bounded by the work, not the clock: up to 60 s) for the engine to go. */
static int gone_within(cal_target *t, int64_t ns)
{
    int64_t end = cal_now_ns() + ns;
    while (cal_now_ns() < end) {
        if (!cal_target_alive(t)) return 1;
        usleep(20000);
    }
    return 0;
}

static void test_death_signal_follows_the_option(void **st)
{
    (void)st;
    if (platform_lacks(cal_plat_has_death_signal(), "the parent-death signal")) { skip(); return; }
    /* with a death signal: the engine ends with the thread that started it */
    start_arg a;
    engine_config(&a);
    a.cfg.death_signal = SIGTERM;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, start_in_thread, &a), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    if (a.rc) fail_msg("start: %s", a.err);
    assert_true(gone_within(a.t, 60 * S));
    int ws = cal_target_stop(&a.t);
    assert_true(WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) != 0));

    /* without: it outlives that thread, until stopped */
    engine_config(&a);
    assert_int_equal(pthread_create(&th, NULL, start_in_thread, &a), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    if (a.rc) fail_msg("start: %s", a.err);
    assert_false(gone_within(a.t, S / 2));
    assert_int_not_equal(kill(cal_target_pid(a.t), 0), -1);
    cal_target_stop(&a.t);
}

/* A failed exec is reported: by posix_spawn itself where the C library
 * checks the exec (glibc, macOS), else from the child (no stdio, no
 * strerror there: "exec PATH: errno N", exit status 127). */
static void test_exec_failure_from_the_child(void **st)
{
    (void)st;
    const char *argv[] = {"/nonexistent/caliper", "serve", NULL};
    cal_target_config c = {.kind = CAL_TARGET_BUILTIN, .argv = argv,
                           .launch_timeout_ns = 60 * S};
    cal_target *t = NULL;
    char err[1200];
    assert_int_equal(cal_target_start(&c, &t, err, sizeof err), CAL_EIO);
    assert_null(t);
    int spawn_said = strstr(err, "posix_spawn /nonexistent/caliper: ") && strstr(err, strerror(ENOENT));
    int child_said = strstr(err, "status 127") && strstr(err, "exec /nonexistent/caliper: errno 2");
    if (!spawn_said && !child_said) fail_msg("err: %s", err);
}

/* The built-in target knows no engine's words: its caller's ready_line
 * reads the log (here the fault server's "port N", not caliper serve's
 * line), gives the URL the target then waits on, and what to keep as the
 * detail. */
static char g_bindir[4096];
static int calls_ready;
static int port_line(const char *line, char *url, size_t url_n, char *detail, size_t detail_n)
{
    calls_ready++;
    int port;
    if (sscanf(line, "port %d", &port) != 1) return 0;
    snprintf(url, url_n, "http://127.0.0.1:%d/", port);   /* the slash is trimmed */
    snprintf(detail, detail_n, "(fault server)");
    return 1;
}

static void test_builtin_ready_line_from_the_caller(void **st)
{
    (void)st;
    char exe[4200];
    snprintf(exe, sizeof exe, "%s/helpers/faultserver", g_bindir);
    const char *argv[] = {exe, NULL};
    cal_target_config c = {.kind = CAL_TARGET_BUILTIN, .argv = argv, .ready_line = port_line,
                           .launch_timeout_ns = 120 * S};
    cal_target *t = NULL;
    char err[1200];
    calls_ready = 0;
    int rc = cal_target_start(&c, &t, err, sizeof err);
    if (rc != CAL_OK) fail_msg("start: %s", err);
    assert_true(calls_ready >= 1);
    int port = 0;
    assert_int_equal(sscanf(cal_target_url(t), "http://127.0.0.1:%d", &port), 1);
    assert_true(port > 0);
    char want[64];
    snprintf(want, sizeof want, "http://127.0.0.1:%d", port);
    assert_string_equal(cal_target_url(t), want);
    assert_string_equal(cal_target_detail(t), "(fault server)");
    assert_true(cal_target_pid(t) > 0);
    cal_target_stop(&t);
    assert_null(t);
}

/* Without a ready_line a built-in target has no way to learn its URL: it
 * says so when the wait ends (the engine here exits at once). */
static void test_builtin_without_ready_line(void **st)
{
    (void)st;
    const char *argv[] = {"/bin/sh", "-c", "echo listening on http://127.0.0.1:9/; exit 3", NULL};
    cal_target_config c = {.kind = CAL_TARGET_BUILTIN, .argv = argv, .launch_timeout_ns = 120 * S};
    cal_target *t = NULL;
    char err[1200];
    assert_int_equal(cal_target_start(&c, &t, err, sizeof err), CAL_EIO);
    assert_null(t);
    assert_non_null(strstr(err, "exited with status 3"));
    const char *none[] = {NULL};
    c.argv = none;
    assert_int_equal(cal_target_start(&c, &t, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "no argv to start"));
}

int main(int argc, char **argv)
{
    (void)argc;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", argv[0]);
    snprintf(g_bindir, sizeof g_bindir, "%s", dirname(tmp));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subreaper_only_when_asked),
        cmocka_unit_test(test_death_signal_follows_the_option),
        cmocka_unit_test(test_exec_failure_from_the_child),
        cmocka_unit_test(test_builtin_ready_line_from_the_caller),
        cmocka_unit_test(test_builtin_without_ready_line),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
