/* The target's lifecycle: start the built-in engine or a launch command in
 * its own process group, wait until it answers, record the load time, and
 * stop it (SIGTERM, then SIGKILL after a grace period). A --url target is
 * only checked. The engine gets the caller's environment untouched; what
 * changes the whole process (the child subreaper) happens only when the
 * config asks for it. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "caliper/auth.h"
#include "caliper/buf.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/protocol.h"
#include "caliper/url.h"
#include "lib/platform/platform.h"
#include "lib/util/curl_wait.h"

extern char **environ;

#define URL_MAX 512

struct cal_target {
    cal_target_kind kind;
    char    url[URL_MAX];
    pid_t   pid;           /* 0: not ours */
    int     reaped;
    int     wstatus;
    int64_t spawn_ns, load_ns, grace_ns;
    char    log[256];
    char    detail[256];   /* builtin: the rest of the listening line */
};

const char *cal_target_kind_name(cal_target_kind k)
{
    static const char *const n[] = {"builtin", "url", "launch"};
    return (unsigned)k < 3 ? n[k] : "unknown";
}

static size_t sink(char *p, size_t sz, size_t nm, void *ud)
{
    cal_buf *b = ud;
    if (b && cal_buf_append(b, p, sz * nm)) return 0;
    return sz * nm;
}

/* GET base+path; *status gets the HTTP status (0 when none). body may be
 * NULL. timeout_ns bounds the whole call; *stop (NULL: none) ends it within
 * CAL_CURL_WAIT_MS. Returns CAL_OK when an answer came back. */
static int http_get(const char *base, const char *path, const char *api_key,
                    int64_t timeout_ns, volatile int *stop, int *status, cal_buf *body)
{
    char url[URL_MAX + 64];
    snprintf(url, sizeof url, "%s%s", base, path);
    CURL *c = curl_easy_init();
    if (!c) return CAL_ENOMEM;
    struct curl_slist *h = NULL;
    if (api_key) {
        char a[CAL_AUTH_HEADER_MAX];
        int rc = cal_auth_header(api_key, a, sizeof a);
        if (rc == CAL_OK && !(h = curl_slist_append(h, a))) rc = CAL_ENOMEM;
        if (rc) {
            curl_easy_cleanup(c);
            *status = 0;
            return rc;
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_ns / 1000000));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ns / 1000000));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    CURLcode cc = cal_curl_perform(NULL, c, stop, NULL);
    long st = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    *status = (int)st;
    if (cc == CURLE_OK) return CAL_OK;
    if (cc == CURLE_OPERATION_TIMEDOUT) return CAL_ETIMEDOUT;
    if (cc == CURLE_ABORTED_BY_CALLBACK) return CAL_ECANCEL;
    if (cc == CURLE_OUT_OF_MEMORY) return CAL_ENOMEM;
    return CAL_ECONNECT;
}

int cal_target_models(const char *base_url, const char *api_key, int64_t timeout_ns,
                      char *id, size_t n, char **raw)
{
    return cal_target_models_stop(base_url, api_key, timeout_ns, NULL, id, n, raw);
}

int cal_target_models_stop(const char *base_url, const char *api_key, int64_t timeout_ns,
                           volatile int *stop, char *id, size_t n, char **raw)
{
    if (id && n) id[0] = '\0';
    if (raw) *raw = NULL;
    if (cal_global_init()) return CAL_EINTERNAL;
    cal_buf b = CAL_BUF_INIT(1 << 20);
    int status = 0;
    int rc = http_get(base_url, "/v1/models", api_key, timeout_ns ? timeout_ns : 5000000000LL,
                      stop, &status, &b);
    if (rc == CAL_OK && (status < 200 || status > 299)) rc = CAL_EHTTP;
    if (rc == CAL_OK) {
        json_t *j = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
        json_t *d = j ? json_object_get(j, "data") : NULL;
        json_t *m0 = json_is_array(d) ? json_array_get(d, 0) : NULL;
        const char *s = m0 ? json_string_value(json_object_get(m0, "id")) : NULL;
        if (!s) rc = CAL_EPROTO;
        else if (id && n) snprintf(id, n, "%s", s);
        json_decref(j);
        if (rc == CAL_OK && raw && b.data) {
            *raw = b.data;
            b.data = NULL;
        }
    }
    cal_buf_free(&b);
    return rc;
}

/* The last ~600 bytes of the log, one line, for error messages. */
static void log_tail(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = path[0] ? fopen(path, "r") : NULL;
    if (!f) return;
    char buf[600];
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, sz > (long)sizeof buf - 1 ? sz - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    for (size_t i = 0; i < k; i++)
        if (buf[i] == '\n') buf[i] = ' ';
    snprintf(out, n, "%s", buf);
}

static int reap(cal_target *t, int block)
{
    if (!t->pid || t->reaped) return 1;
    int st;
    pid_t r = waitpid(t->pid, &st, block ? 0 : WNOHANG);
    if (r == t->pid) {
        t->reaped = 1;
        t->wstatus = st;
        return 1;
    }
    if (r < 0 && errno == ECHILD) {
        t->reaped = 1;
        t->wstatus = -1;
        return 1;
    }
    return 0;
}

int cal_target_alive(cal_target *t)
{
    if (!t) return 0;
    if (!t->pid) return 1;
    return !reap(t, 0);
}

/* The engine in its own process group (SIGTERM to the group reaches all
 * of it, and the terminal's Ctrl-C, sent to caliper's group, does not),
 * stdin from /dev/null, stdout and stderr to the log, an empty signal mask
 * and default dispositions. Returns 0 or an errno. */
static int spawn_posix(pid_t *pid, char *const argv[], int in_fd, int out_fd)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int e = posix_spawn_file_actions_init(&fa);
    if (e) return e;
    if ((e = posix_spawnattr_init(&at))) { posix_spawn_file_actions_destroy(&fa); return e; }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    if (in_fd >= 0) e = posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    if (!e) e = posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    if (!e) e = posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    if (!e) e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                              POSIX_SPAWN_SETSIGDEF);
    if (!e) e = posix_spawnattr_setpgroup(&at, 0);
    if (!e) e = posix_spawnattr_setsigmask(&at, &none);
    if (!e) e = posix_spawnattr_setsigdefault(&at, &all);
    if (!e) e = posix_spawn(pid, argv[0], &fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return e;
}

static int spawn(cal_target *t, const cal_target_config *cfg, char *err, size_t errn)
{
    snprintf(t->log, sizeof t->log, "/tmp/caliper-engine-XXXXXX");
    int fd = mkstemp(t->log);
    if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errn, "cannot create the engine log in /tmp: %s", strerror(errno));
        t->log[0] = '\0';
        return CAL_EIO;
    }
    char *sh[] = { "/bin/sh", "-c", (char *)cfg->command, NULL };
    /* posix_spawn takes char *const[]; it writes none of them */
    char *const *argv = cfg->kind == CAL_TARGET_BUILTIN ? (char *const *)cfg->argv : sh;
    if (!argv || !argv[0] || (cfg->kind != CAL_TARGET_BUILTIN && !cfg->command)) {
        close(fd);
        snprintf(err, errn, "%s: no %s to start", cal_target_kind_name(cfg->kind),
                 cfg->kind == CAL_TARGET_BUILTIN ? "argv" : "command");
        return CAL_EINVAL;
    }
    /* Orphans of the engine's group (its children, once /bin/sh or a wrapper
     * exits) become ours, so cal_target_stop can wait for every one of them:
     * an engine is stopped when its last process is gone and its port free.
     * Process-wide and never undone: only when the caller asks. Where the
     * OS has no subreaper (lib/platform), stop waits for the group leader
     * and the port. */
    if (cfg->subreaper) (void)cal_plat_set_subreaper();
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    t->spawn_ns = cal_now_ns();
    pid_t pid;
    if (cfg->death_signal > 0 && cal_plat_has_death_signal()) {
        /* the engine must not outlive the thread that started it (caliper
         * killed with -9): a platform extra */
        pid = cal_plat_spawn_tied(argv, nul, fd, cfg->death_signal);
        if (pid < 0) {
            close(fd);
            if (nul >= 0) close(nul);
            snprintf(err, errn, "fork: %s", strerror((int)-pid));
            return CAL_EIO;
        }
    } else {
        int e = spawn_posix(&pid, argv, nul, fd);
        if (e != 0) {
            close(fd);
            if (nul >= 0) close(nul);
            snprintf(err, errn, "posix_spawn %s: %s", argv[0], strerror(e));
            return CAL_EIO;
        }
    }
    close(fd);
    if (nul >= 0) close(nul);
    t->pid = pid;
    return CAL_OK;
}

/* builtin: the caller's ready_line over the log's lines, until one names
 * the engine's URL. */
static int find_listen_url(cal_target *t, const cal_target_config *cfg)
{
    if (!cfg->ready_line) return 0;
    FILE *f = fopen(t->log, "r");
    if (!f) return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char url[sizeof t->url];
        if (!cfg->ready_line(line, url, sizeof url, t->detail, sizeof t->detail) || !url[0]) continue;
        size_t len = strlen(url);
        while (len > 0 && url[len - 1] == '/') url[--len] = '\0';
        memcpy(t->url, url, len + 1);
        found = 1;
    }
    fclose(f);
    return found;
}

static int answers(const char *url, volatile int *stop)
{
    int st = 0;
    if (http_get(url, "/health", NULL, 2000000000LL, stop, &st, NULL) == CAL_OK && st >= 200 &&
        st < 300)
        return 1;
    if (http_get(url, "/v1/models", NULL, 2000000000LL, stop, &st, NULL) == CAL_OK && st >= 200 &&
        st < 300)
        return 1;
    return 0;
}

int cal_target_start(const cal_target_config *cfg, cal_target **out, char *err, size_t errn)
{
    *out = NULL;
    if (err && errn) err[0] = '\0';
    if (cal_global_init()) return CAL_EINTERNAL;
    cal_target *t = calloc(1, sizeof *t);
    if (!t) return CAL_ENOMEM;
    t->kind = cfg->kind;
    t->grace_ns = cfg->grace_ns > 0 ? cfg->grace_ns : 5000000000LL;
    t->load_ns = t->spawn_ns = -1;
    int64_t timeout = cfg->launch_timeout_ns > 0 ? cfg->launch_timeout_ns : 120000000000LL;
    if (cfg->kind == CAL_TARGET_URL) {
        snprintf(t->url, sizeof t->url, "%s", cfg->url ? cfg->url : "");
    } else if (cfg->kind == CAL_TARGET_LAUNCH) {
        if (cfg->url) snprintf(t->url, sizeof t->url, "%s", cfg->url);
        else snprintf(t->url, sizeof t->url, "http://127.0.0.1:%d", cfg->port);
    }
    size_t ul = strlen(t->url);
    while (ul > 0 && t->url[ul - 1] == '/') t->url[--ul] = '\0';
    if (ul > 3 && !strcmp(t->url + ul - 3, "/v1")) t->url[ul -= 3] = '\0';

    if (cfg->kind == CAL_TARGET_URL) {
        if (!answers(t->url, cfg->stop)) {
            char shown[URL_MAX];   /* never print a password given in the URL */
            cal_url_redact(t->url, shown, sizeof shown);
            snprintf(err, errn, "%s does not answer GET /health or /v1/models", shown);
            free(t);
            return CAL_ECONNECT;
        }
        *out = t;
        return CAL_OK;
    }
    int rc = spawn(t, cfg, err, errn);
    if (rc) {
        if (t->log[0]) unlink(t->log);
        free(t);
        return rc;
    }
    int64_t deadline = t->spawn_ns + timeout;
    rc = CAL_ETIMEDOUT;
    while (cal_now_ns() < deadline) {
        if (cfg->stop && *cfg->stop) { rc = CAL_ECANCEL; break; }
        if (reap(t, 0)) { rc = CAL_EIO; break; }
        if (cfg->kind == CAL_TARGET_BUILTIN && !t->url[0]) find_listen_url(t, cfg);
        if (t->url[0] && answers(t->url, cfg->stop)) { rc = CAL_OK; break; }
        cal_sleep_ns(50000000LL, cfg->stop);
    }
    if (rc == CAL_OK) {
        t->load_ns = cal_now_ns() - t->spawn_ns;
        *out = t;
        return CAL_OK;
    }
    char tail[600];
    log_tail(t->log, tail, sizeof tail);
    if (rc == CAL_EIO) {
        int st = t->wstatus;
        if (WIFEXITED(st))
            snprintf(err, errn, "the engine exited with status %d before answering: %s",
                     WEXITSTATUS(st), tail);
        else
            snprintf(err, errn, "the engine died (signal %d) before answering: %s",
                     WIFSIGNALED(st) ? WTERMSIG(st) : 0, tail);
    } else if (rc == CAL_ETIMEDOUT) {
        snprintf(err, errn, "the engine did not answer %s within %.0f s: %s",
                 t->url[0] ? t->url : "(no listening line yet)", timeout / 1e9, tail);
    } else {
        snprintf(err, errn, "interrupted while waiting for the engine");
    }
    cal_target_stop(&t);
    return rc;
}

const char *cal_target_url(const cal_target *t) { return t ? t->url : ""; }
int64_t cal_target_load_ns(const cal_target *t) { return t ? t->load_ns : -1; }
int64_t cal_target_spawn_ns(const cal_target *t) { return t ? t->spawn_ns : -1; }
pid_t cal_target_pid(const cal_target *t) { return t ? t->pid : 0; }
const char *cal_target_detail(const cal_target *t)
{
    return t && t->detail[0] ? t->detail : NULL;
}

const char *cal_target_log_path(const cal_target *t)
{
    return t && t->log[0] ? t->log : NULL;
}

/* Wait for the rest of the engine's process group (already signalled):
 * until none of it is left as our child, SIGKILL at the deadline. */
static void reap_group(pid_t pgid, int64_t deadline)
{
    for (;;) {
        pid_t r = waitpid(-pgid, NULL, WNOHANG);
        if (r < 0 && errno != EINTR) break;         /* ECHILD: none of ours left */
        if (r > 0) continue;
        if (cal_now_ns() >= deadline) {
            kill(-pgid, SIGKILL);
            while (waitpid(-pgid, NULL, 0) > 0 || errno == EINTR) {}
            break;
        }
        cal_sleep_ns(5000000LL, NULL);
    }
    /* without a subreaper (lib/platform), a process the launch command
     * started (sh -c's child) is init's to reap, not ours, yet still in the
     * group and maybe still answering on its port: the engine is stopped
     * only when the group is empty */
    int killed = 0;
    while (kill(-pgid, 0) == 0) {
        if (cal_now_ns() >= deadline) {
            if (killed) break;                       /* past SIGKILL: not ours to wait on */
            kill(-pgid, SIGKILL);
            killed = 1;
            deadline = cal_now_ns() + 1000000000LL;   /* a killed process goes at once */
        }
        cal_sleep_ns(5000000LL, NULL);
    }
}

int cal_target_stop(cal_target **pt)
{
    if (!pt || !*pt) return -1;
    cal_target *t = *pt;
    int ret = -1;
    if (t->pid) {
        if (!reap(t, 0)) {
            kill(-t->pid, SIGTERM);
            kill(t->pid, SIGTERM);
            int64_t deadline = cal_now_ns() + t->grace_ns;
            while (!reap(t, 0) && cal_now_ns() < deadline) cal_sleep_ns(10000000LL, NULL);
            if (!t->reaped) {
                kill(-t->pid, SIGKILL);
                kill(t->pid, SIGKILL);
                reap(t, 1);
            }
            reap_group(t->pid, deadline);
        }
        ret = t->wstatus;
    }
    if (t->log[0]) unlink(t->log);
    free(t);
    *pt = NULL;
    return ret;
}
