/* caliper telemetry — hwmon chips (temp*_input m°C, power*_average or
 * power*_input µW, fan*_input RPM) and thermal zones (thermal_zone<N>/temp,
 * m°C). hwmonN numbering is not stable, so metrics carry the chip's name.
 * amdgpu's hwmon is left to the amdgpu backend. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/error.h"
#include "tel_internal.h"

#define MAX_SENSORS 256

typedef struct sensor {
    int         fd;
    double      scale;           /* raw × scale = value in unit */
    const char *unit;
    char        metric[CAL_TEL_METRIC_MAX];
} sensor;
typedef struct sensors { int n; sensor s[MAX_SENSORS]; } sensors;

static void sensors_close(void *st)
{
    sensors *s = st;
    for (int i = 0; i < s->n; i++) if (s->s[i].fd >= 0) close(s->s[i].fd);
    free(s);
}

static void sensors_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    (void)ctx;
    sensors *s = st;
    for (int i = 0; i < s->n; i++) {
        int64_t v;
        if (tel_pread_i64(s->s[i].fd, &v) != 0) continue;
        tel_emit(e, s->s[i].unit, (double)v * s->s[i].scale, "%s", s->s[i].metric);
    }
}

static int add_sensor(sensors *s, const char *path, double scale, const char *unit,
                      const char *chip, const char *kind, int idx, const char *suffix)
{
    if (s->n >= MAX_SENSORS) return -1;
    int fd = tel_open(path);
    if (fd < 0) return fd;
    sensor *x = &s->s[s->n];
    int w = snprintf(x->metric, sizeof x->metric, "%s_%s%d_%s", chip, kind, idx, suffix);
    if (w < 0 || (size_t)w >= sizeof x->metric) { close(fd); return -1; }
    x->fd = fd;
    x->scale = scale;
    x->unit = unit;
    s->n++;
    return 0;
}

/* Sorted numeric suffixes of directory entries named prefix<N>. */
static int list_numbered(const char *dir, const char *prefix, int *out, int cap)
{
    DIR *d = opendir(dir);
    if (!d) return -errno;
    size_t pl = strlen(prefix);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        if (strncmp(de->d_name, prefix, pl) != 0) continue;
        char *end;
        long v = strtol(de->d_name + pl, &end, 10);
        if (end == de->d_name + pl || *end || v < 0) continue;
        out[n++] = (int)v;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) { int t = out[j]; out[j] = out[j - 1]; out[j - 1] = t; }
    return n;
}

static int hwmon_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    char dir[700], p[1200], name[64], tok[32];
    tel_path(ctx, dir, sizeof dir, "/sys/class/hwmon");
    int idx[128];
    int nh = list_numbered(dir, "hwmon", idx, 128);
    if (nh < 0) return tel_why_errno(nh, dir, NULL, why, wn);
    if (nh == 0) { snprintf(why, wn, "no hwmon chips in %s", dir); return CAL_EABSENT; }
    sensors *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    char seen[128][32];
    int nseen = 0, chips = 0, skipped_amd = 0, perm = 0;
    for (int h = 0; h < nh; h++) {
        snprintf(p, sizeof p, "%s/hwmon%d/name", dir, idx[h]);
        if (tel_read_file(p, name, sizeof name) <= 0) continue;
        tel_chomp(name);
        if (strcmp(name, "amdgpu") == 0) { skipped_amd++; continue; }
        tel_token(name, tok, sizeof tok);
        if (!tok[0]) snprintf(tok, sizeof tok, "hwmon%d", idx[h]);
        char chip[48];
        int dup = 0;
        for (int i = 0; i < nseen; i++) if (strcmp(seen[i], tok) == 0) dup = 1;
        if (dup) snprintf(chip, sizeof chip, "%s%d", tok, idx[h]);
        else snprintf(chip, sizeof chip, "%s", tok);
        if (nseen < 128) snprintf(seen[nseen++], sizeof seen[0], "%s", tok);
        int before = s->n;
        for (int i = 1; i <= 32; i++) {
            snprintf(p, sizeof p, "%s/hwmon%d/temp%d_input", dir, idx[h], i);
            if (add_sensor(s, p, 1e-3, "C", chip, "temp", i, "c") == -EACCES) perm = 1;
            snprintf(p, sizeof p, "%s/hwmon%d/power%d_average", dir, idx[h], i);
            int r = add_sensor(s, p, 1e-6, "W", chip, "power", i, "w");
            if (r != 0) {
                snprintf(p, sizeof p, "%s/hwmon%d/power%d_input", dir, idx[h], i);
                r = add_sensor(s, p, 1e-6, "W", chip, "power", i, "w");
            }
            if (r == -EACCES) perm = 1;
            snprintf(p, sizeof p, "%s/hwmon%d/fan%d_input", dir, idx[h], i);
            if (add_sensor(s, p, 1.0, "RPM", chip, "fan", i, "rpm") == -EACCES) perm = 1;
        }
        if (s->n > before) chips++;
    }
    if (s->n == 0) {
        free(s);
        if (perm) { snprintf(why, wn, "permission denied: %s/hwmon*/ inputs; run as root", dir); return CAL_EPERM; }
        snprintf(why, wn, "no temperature, power or fan inputs in %s/hwmon*%s", dir,
                 skipped_amd ? " (amdgpu is read by the amdgpu backend)" : "");
        return CAL_EABSENT;
    }
    snprintf(why, wn, "%d chips, %d sensors", chips, s->n);
    *state = s;
    return CAL_OK;
}

const tel_backend_ops tel_hwmon_ops = {
    "hwmon", "hwmon temperatures, power and fans (/sys/class/hwmon)",
    hwmon_probe, sensors_read, sensors_close,
};

static int thermal_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    char dir[700], p[1200], type[64], tok[32];
    tel_path(ctx, dir, sizeof dir, "/sys/class/thermal");
    int idx[128];
    int nz = list_numbered(dir, "thermal_zone", idx, 128);
    if (nz < 0) return tel_why_errno(nz, dir, NULL, why, wn);
    if (nz == 0) { snprintf(why, wn, "no thermal zones in %s", dir); return CAL_EABSENT; }
    sensors *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    int err = 0;
    for (int z = 0; z < nz && s->n < MAX_SENSORS; z++) {
        snprintf(p, sizeof p, "%s/thermal_zone%d/type", dir, idx[z]);
        if (tel_read_file(p, type, sizeof type) <= 0) snprintf(type, sizeof type, "zone");
        tel_chomp(type);
        tel_token(type, tok, sizeof tok);
        snprintf(p, sizeof p, "%s/thermal_zone%d/temp", dir, idx[z]);
        int fd = tel_open(p);
        if (fd < 0) { err = fd; continue; }
        sensor *x = &s->s[s->n++];
        x->fd = fd;
        x->scale = 1e-3;
        x->unit = "C";
        snprintf(x->metric, sizeof x->metric, "tz%d_%s_c", idx[z], tok[0] ? tok : "zone");
    }
    if (s->n == 0) {
        free(s);
        return tel_why_errno(err, p, "run as root", why, wn);
    }
    snprintf(why, wn, "%d zones", s->n);
    *state = s;
    return CAL_OK;
}

const tel_backend_ops tel_thermal_ops = {
    "thermal", "thermal zone temperatures (/sys/class/thermal)",
    thermal_probe, sensors_read, sensors_close,
};
