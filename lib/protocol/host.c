/* The host every run records: CPU model and cores, memory, OS, GPU if one
 * is visible. Read from /proc and uname; absent fields are JSON null. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "caliper/protocol.h"
#include "lib/util/c_locale.h"

static void cpu_model(char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) && strncmp(line, "Model", 5)) continue;
        char *p = strchr(line, ':');
        if (!p) continue;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        p[strcspn(p, "\n")] = '\0';
        snprintf(out, n, "%s", p);
        break;
    }
    fclose(f);
}

static long long mem_total_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb > 0 ? kb * 1024 : -1;
}

/* The first NVIDIA GPU's name from the driver's /proc entry, if any. */
static void gpu_name(char *out, size_t n)
{
    out[0] = '\0';
    FILE *p = popen("ls /proc/driver/nvidia/gpus 2>/dev/null | head -1", "r");
    if (!p) return;
    char dir[128] = "";
    if (!fgets(dir, sizeof dir, p)) dir[0] = '\0';
    pclose(p);
    dir[strcspn(dir, "\n")] = '\0';
    if (!dir[0]) return;
    char path[256];
    snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Model:", 6)) continue;
        char *v = line + 6;
        while (*v == ' ' || *v == '\t') v++;
        v[strcspn(v, "\n")] = '\0';
        snprintf(out, n, "%s", v);
        break;
    }
    fclose(f);
}

char *cal_host_json(char *short_out, size_t n)
{
    char cpu[256], gpu[256], os[256] = "", host[256] = "";
    cpu_model(cpu, sizeof cpu);
    gpu_name(gpu, sizeof gpu);
    struct utsname u;
    if (uname(&u) == 0) snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    gethostname(host, sizeof host - 1);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long long mem = mem_total_bytes();
    json_t *j = json_object();
    json_object_set_new(j, "cpu", cpu[0] ? json_string(cpu) : json_null());
    json_object_set_new(j, "cores", cores > 0 ? json_integer(cores) : json_null());
    json_object_set_new(j, "memory_bytes", mem > 0 ? json_integer(mem) : json_null());
    json_object_set_new(j, "os", os[0] ? json_string(os) : json_null());
    json_object_set_new(j, "hostname", host[0] ? json_string(host) : json_null());
    json_object_set_new(j, "gpu", gpu[0] ? json_string(gpu) : json_null());
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (short_out && n) {
        char rel[sizeof u.sysname + sizeof u.release + 2];
        rel[0] = '\0';
        if (os[0]) snprintf(rel, sizeof rel, "%s %s", u.sysname, u.release);
        cal_snprintf(short_out, n, "%s (%ld cores), %.1f GiB, %s%s%s", cpu[0] ? cpu : "unknown CPU",
                 cores, mem > 0 ? mem / 1073741824.0 : 0.0, rel[0] ? rel : "unknown OS",
                 gpu[0] ? ", GPU " : "", gpu);
    }
    return s;
}
