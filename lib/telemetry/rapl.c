/* caliper telemetry — powercap RAPL: package/core/uncore/DRAM/psys energy
 * counters (energy_uj) turned into watts over our own read interval, with
 * the counter's wraparound at max_energy_range_uj handled. Root-only on
 * current kernels (0400 since Linux 5.10, CVE-2020-8694 "PLATYPUS"). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/error.h"
#include "tel_internal.h"

#define MAX_ZONES 64
enum { K_PACKAGE, K_CORE, K_UNCORE, K_DRAM, K_PSYS, K_N };
static const char *const kind_name[K_N] = { "package", "core", "uncore", "dram", "psys" };

typedef struct zone {
    int      fd, kind;
    uint64_t range_uj;    /* max_energy_range_uj; 0 = unknown */
    uint64_t last_uj;
    int64_t  last_ns;
    double   total_j;     /* since the first read, wrap-corrected */
} zone;
typedef struct rapl_state { int n, primed; zone z[MAX_ZONES]; } rapl_state;

static int kind_of(const char *name)
{
    if (strncmp(name, "package", 7) == 0) return K_PACKAGE;
    for (int k = 1; k < K_N; k++) if (strcmp(name, kind_name[k]) == 0) return k;
    return -1;
}

static void rapl_close(void *st)
{
    rapl_state *s = st;
    for (int i = 0; i < s->n; i++) if (s->z[i].fd >= 0) close(s->z[i].fd);
    free(s);
}

static const char grant[] =
    "energy_uj is root-only since Linux 5.10 (CVE-2020-8694): run as root, or "
    "sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj";

static int rapl_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    char dir[700], p[1200], b[128];
    tel_path(ctx, dir, sizeof dir, "/sys/class/powercap");
    DIR *d = opendir(dir);
    if (!d) return tel_why_errno(errno, dir, NULL, why, wn);
    rapl_state *s = calloc(1, sizeof *s);
    if (!s) { closedir(d); return CAL_ENOMEM; }
    int rc = CAL_OK, seen = 0;
    struct dirent *de;
    while ((de = readdir(d)) && s->n < MAX_ZONES) {
        if (strncmp(de->d_name, "intel-rapl:", 11) != 0) continue;
        seen++;
        snprintf(p, sizeof p, "%s/%s/name", dir, de->d_name);
        if (tel_read_file(p, b, sizeof b) <= 0) continue;
        tel_chomp(b);
        int k = kind_of(b);
        if (k < 0) continue;
        zone *z = &s->z[s->n];
        snprintf(p, sizeof p, "%s/%s/max_energy_range_uj", dir, de->d_name);
        z->range_uj = tel_read_file(p, b, sizeof b) > 0 ? strtoull(b, NULL, 10) : 0;
        snprintf(p, sizeof p, "%s/%s/energy_uj", dir, de->d_name);
        z->fd = tel_open(p);
        if (z->fd < 0) {
            rc = tel_why_errno(z->fd, p, grant, why, wn);
            continue;
        }
        z->kind = k;
        s->n++;
    }
    closedir(d);
    if (s->n == 0) {
        free(s);
        if (rc != CAL_OK) return rc;
        if (!seen) snprintf(why, wn, "no RAPL zones in %s (not exposed here: a VM, or no powercap driver)", dir);
        else snprintf(why, wn, "no readable energy_uj under %s/intel-rapl:*", dir);
        return CAL_EABSENT;
    }
    int cnt[K_N] = {0};
    for (int i = 0; i < s->n; i++) cnt[s->z[i].kind]++;
    size_t w = (size_t)snprintf(why, wn, "%d zones:", s->n);
    for (int k = 0; k < K_N && w < wn; k++)
        if (cnt[k]) w += (size_t)snprintf(why + w, wn - w, " %s", kind_name[k]);
    *state = s;
    return CAL_OK;
}

static void rapl_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    (void)ctx;
    rapl_state *s = st;
    double joules[K_N] = {0}, watts[K_N] = {0};
    int have_w[K_N] = {0}, have_j[K_N] = {0};
    for (int i = 0; i < s->n; i++) {
        zone *z = &s->z[i];
        uint64_t uj;
        if (tel_pread_u64(z->fd, &uj) != 0) continue;
        int64_t now = e->t_ns;
        if (z->last_ns) {
            double dj = (double)cal_tel_wrap_delta(z->last_uj, uj, z->range_uj) / 1e6;
            double dt = (double)(now - z->last_ns) / 1e9;
            z->total_j += dj;
            if (dt > 0) { watts[z->kind] += dj / dt; have_w[z->kind] = 1; }
        }
        z->last_uj = uj;
        z->last_ns = now;
        joules[z->kind] += z->total_j;
        have_j[z->kind] = 1;
    }
    for (int k = 0; k < K_N; k++) {
        if (have_w[k]) tel_emit(e, "W", watts[k], "%s_w", kind_name[k]);
        if (have_j[k]) tel_emit(e, "J", joules[k], "%s_energy_j", kind_name[k]);
    }
}

const tel_backend_ops tel_rapl_ops = {
    "rapl", "CPU package/core/DRAM power from powercap RAPL energy counters",
    rapl_probe, rapl_read, rapl_close,
};
