/* The host every run records: CPU model and cores, memory, OS, GPU if one
 * is visible. uname and sysconf here; the rest from the platform file
 * (lib/platform: /proc on Linux, sysctl on macOS); absent fields are JSON
 * null. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "caliper/protocol.h"
#include "lib/platform/platform.h"
#include "lib/util/c_locale.h"

char *cal_host_json(char *short_out, size_t n)
{
    char cpu[256], gpu[256], os[256] = "", host[256] = "";
    cal_plat_cpu_model(cpu, sizeof cpu);
    cal_plat_gpu_name(gpu, sizeof gpu);
    struct utsname u;
    if (uname(&u) == 0) snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    gethostname(host, sizeof host - 1);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t mem = -1;
    if (cal_plat_mem_total(&mem) != 0) mem = -1;
    json_t *j = json_object();
    json_object_set_new(j, "cpu", cpu[0] ? json_string(cpu) : json_null());
    json_object_set_new(j, "cores", cores > 0 ? json_integer(cores) : json_null());
    json_object_set_new(j, "memory_bytes", mem > 0 ? json_integer((json_int_t)mem) : json_null());
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
