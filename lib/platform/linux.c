/* The Linux platform file (platform.h): /proc for process and host facts,
 * prctl for the child subreaper and the parent-death signal. A root given
 * to the /proc readers is a captured tree (tests/data/sysfs/...). */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "caliper/error.h"
#include "lib/platform/platform.h"
#include "lib/util/c_locale.h"

const char *cal_plat_name(void) { return "linux"; }

void cal_plat_set_argv0(const char *argv0) { (void)argv0; }

const char *cal_plat_self_exe(char *why, size_t whyn)
{
    if (access("/proc/self/exe", X_OK) == 0) return "/proc/self/exe";
    if (why && whyn) snprintf(why, whyn, "/proc/self/exe: %s", strerror(errno));
    return NULL;
}

/* The value after "key:" on the first line that starts with one of keys. */
static int file_field(const char *path, const char *const keys[], char *out, size_t n)
{
    FILE *f = fopen(path, "re");
    if (!f) return CAL_EABSENT;
    char line[512];
    int rc = CAL_EABSENT;
    while (rc != CAL_OK && fgets(line, sizeof line, f)) {
        for (int k = 0; keys[k]; k++) {
            size_t kl = strlen(keys[k]);
            if (strncmp(line, keys[k], kl) != 0) continue;
            char *p = strchr(line + kl, ':');
            if (!p) continue;
            p++;
            while (*p == ' ' || *p == '\t') p++;
            p[strcspn(p, "\n")] = '\0';
            snprintf(out, n, "%s", p);
            rc = CAL_OK;
            break;
        }
    }
    fclose(f);
    return rc;
}

int cal_plat_cpu_model(char *out, size_t n)
{
    static const char *const keys[] = {"model name", "Model", NULL};
    out[0] = '\0';
    return file_field("/proc/cpuinfo", keys, out, n);
}

int cal_plat_mem_total(int64_t *bytes)
{
    static const char *const keys[] = {"MemTotal", NULL};
    char v[64];
    if (file_field("/proc/meminfo", keys, v, sizeof v) != CAL_OK) return CAL_EABSENT;
    long long kb = strtoll(v, NULL, 10);
    if (kb <= 0) return CAL_EABSENT;
    *bytes = (int64_t)kb * 1024;
    return CAL_OK;
}

int cal_plat_gpu_name(char *out, size_t n)
{
    static const char *const keys[] = {"Model", NULL};
    out[0] = '\0';
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d) return CAL_EABSENT;
    struct dirent *de;
    char first[256] = "";
    while ((de = readdir(d)))   /* the lowest bus id: the one nvidia-smi lists first */
        if (de->d_name[0] != '.' && (!first[0] || strcmp(de->d_name, first) < 0))
            snprintf(first, sizeof first, "%s", de->d_name);
    closedir(d);
    if (!first[0]) return CAL_EABSENT;
    char path[400];
    snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", first);
    return file_field(path, keys, out, n);
}

static void proc_path(char *buf, size_t n, const char *root, long pid, const char *leaf)
{
    snprintf(buf, n, "%s/proc/%ld/%s", root ? root : "", pid, leaf);
}

int cal_plat_pid_exists(const char *root, long pid)
{
    char p[700];
    proc_path(p, sizeof p, root, pid, "stat");
    return pid > 0 && access(p, R_OK) == 0;
}

struct cal_plat_proc { int stat_fd, status_fd; long tick_hz; };

const char *cal_plat_proc_source(void) { return "/proc/PID"; }

int cal_plat_proc_open(cal_plat_proc **out, const char *root, int pid, char *why, size_t whyn)
{
    char p[700];
    proc_path(p, sizeof p, root, pid, "stat");
    int sfd = open(p, O_RDONLY | O_CLOEXEC);
    if (sfd < 0) {
        int e = errno;
        if (why && whyn) snprintf(why, whyn, "%s: %s", p, strerror(e));
        return e == EACCES || e == EPERM ? CAL_EPERM : CAL_ENOTFOUND;
    }
    cal_plat_proc *h = calloc(1, sizeof *h);
    if (!h) { close(sfd); return CAL_ENOMEM; }
    h->stat_fd = sfd;
    proc_path(p, sizeof p, root, pid, "status");
    h->status_fd = open(p, O_RDONLY | O_CLOEXEC);
    h->tick_hz = sysconf(_SC_CLK_TCK);
    if (h->tick_hz <= 0) h->tick_hz = 100;
    *out = h;
    return CAL_OK;
}

static long pread_str(int fd, char *buf, size_t n)
{
    ssize_t r = pread(fd, buf, n - 1, 0);
    if (r < 0) return -errno;
    buf[r] = '\0';
    return (long)r;
}

/* /proc/PID/stat: "pid (comm) state ppid ..." — comm may hold spaces and
 * parentheses, so fields are counted after the last ')'. Field 14 utime,
 * 15 stime (clock ticks), 20 num_threads, 24 rss (pages). */
static int parse_stat(const char *b, double *cpu_s, double *threads, double *rss_pages, long hz)
{
    const char *r = strrchr(b, ')');
    if (!r) return -1;
    unsigned long long f[64] = {0};
    int k = 3;                      /* the next field after ')' is field 3 (state) */
    const char *p = r + 1;
    while (*p && k < 30) {
        while (*p == ' ') p++;
        if (!*p) break;
        if (k == 3) {   /* state: one letter; a zombie's zero RSS is no reading */
            if (*p == 'Z' || *p == 'X') return -1;
            p++; k++; continue;
        }
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) return -1;
        f[k++] = v < 0 ? 0 : (unsigned long long)v;
        p = end;
    }
    if (k <= 24) return -1;
    *cpu_s = (double)(f[14] + f[15]) / (double)hz;
    *threads = (double)f[20];
    *rss_pages = (double)f[24];
    return 0;
}

int cal_plat_proc_read(cal_plat_proc *h, cal_plat_usage *u)
{
    char b[4096];
    double rss_pages;
    if (!h || pread_str(h->stat_fd, b, sizeof b) <= 0) return CAL_ENOTFOUND;   /* exited */
    if (parse_stat(b, &u->cpu_s, &u->threads, &rss_pages, h->tick_hz) != 0) return CAL_ENOTFOUND;
    u->rss_bytes = -1;
    if (h->status_fd >= 0 && pread_str(h->status_fd, b, sizeof b) > 0) {
        const char *v = strstr(b, "\nVmRSS:");
        if (v) u->rss_bytes = cal_strtod(v + 8, NULL) * 1024.0;          /* kB */
    }
    if (u->rss_bytes < 0) u->rss_bytes = rss_pages * (double)sysconf(_SC_PAGESIZE);
    return CAL_OK;
}

void cal_plat_proc_close(cal_plat_proc *h)
{
    if (!h) return;
    close(h->stat_fd);
    if (h->status_fd >= 0) close(h->status_fd);
    free(h);
}

int cal_plat_set_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? CAL_OK : CAL_EPERM;
}

int cal_plat_is_subreaper(void)
{
    int v = 0;
    return prctl(PR_GET_CHILD_SUBREAPER, &v) == 0 ? v != 0 : CAL_EABSENT;
}

int cal_plat_has_death_signal(void) { return 1; }

/* "exec PATH: errno N\n" with async-signal-safe calls only (the child). */
static void child_report_exec_error(const char *prefix, size_t n, int err)
{
    char num[16];
    size_t k = sizeof num;
    num[--k] = '\n';
    do { num[--k] = (char)('0' + err % 10); err /= 10; } while (err && k);
    ssize_t w = write(2, prefix, n);
    w = write(2, num + k, sizeof num - k);
    (void)w;
}

/* posix_spawn cannot set the parent-death signal, which must be set in the
 * child between fork and exec: this is the one fork/exec of the tree.
 * Everything the child needs is made before fork: between fork and exec
 * the child calls only async-signal-safe functions, since another thread
 * may have held malloc's or stdio's lock at the moment of fork. */
pid_t cal_plat_spawn_tied(char *const argv[], int in_fd, int out_fd, int death_signal)
{
    char exec_err[300];
    int eln = snprintf(exec_err, sizeof exec_err, "exec %s: errno ", argv[0]);
    size_t exec_err_len = eln < 0 ? 0 : (size_t)eln >= sizeof exec_err ? sizeof exec_err - 1 : (size_t)eln;
    sigset_t no_signals;
    sigemptyset(&no_signals);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
        setpgid(0, 0);    /* its own group: SIGTERM reaches the whole engine */
        /* the engine must not outlive the thread that started it (caliper
         * killed with -9); the check closes the race with a parent already
         * gone */
        if (death_signal > 0) {
            prctl(PR_SET_PDEATHSIG, death_signal);
            if (getppid() != parent) _exit(127);
        }
        if (in_fd >= 0) dup2(in_fd, 0);
        dup2(out_fd, 1);
        dup2(out_fd, 2);
        sigprocmask(SIG_SETMASK, &no_signals, NULL);  /* not the caller's thread mask */
        for (int sig = 1; sig < NSIG; sig++)          /* nor its ignored signals */
            if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, NULL);
        execv(argv[0], argv);
        child_report_exec_error(exec_err, exec_err_len, errno);
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}
