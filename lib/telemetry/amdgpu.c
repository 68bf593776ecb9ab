/* caliper telemetry — AMD GPUs through amdgpu sysfs: clocks from hwmon
 * freq1_input/freq2_input (Hz) or the starred level of pp_dpm_sclk/mclk,
 * power from power1_average or power1_input (µW), temperatures (m°C),
 * gpu_busy_percent. sysfs is world-readable; no render node is opened. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/error.h"
#include "tel_internal.h"
#include "lib/util/c_locale.h"

#define MAX_CARDS 8

typedef struct card {
    int sclk_fd, mclk_fd;         /* hwmon freq*_input, Hz; -1 if absent */
    int dpm_sclk_fd, dpm_mclk_fd; /* pp_dpm_*: "1: 1800Mhz *" */
    int power_fd, edge_fd, junction_fd, mem_fd, busy_fd;
} card;
typedef struct amd_state { int n; card c[MAX_CARDS]; } amd_state;

static void amd_close(void *st)
{
    amd_state *s = st;
    for (int i = 0; i < s->n; i++) {
        int *fds = &s->c[i].sclk_fd;
        for (size_t k = 0; k < sizeof(card) / sizeof(int); k++) if (fds[k] >= 0) close(fds[k]);
    }
    free(s);
}

static int open_opt(const char *dir, const char *rel)
{
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    int fd = tel_open(p);
    return fd < 0 ? -1 : fd;
}

/* The current DPM level's MHz from pp_dpm_sclk ("0: 500Mhz\n1: 1800Mhz *\n"). */
static int dpm_current(int fd, double *mhz)
{
    char b[1024];
    if (tel_pread_str(fd, b, sizeof b) <= 0) return -1;
    for (char *line = b; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (strchr(line, '*')) {
            char *c = strchr(line, ':');
            if (c) { *mhz = cal_strtod(c + 1, NULL); return *mhz > 0 ? 0 : -1; }
        }
        line = nl ? nl + 1 : NULL;
    }
    return -1;
}

static int amd_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    char dir[700], dev[800], hw[1100], p[1200], b[64];
    tel_path(ctx, dir, sizeof dir, "/sys/class/drm");
    DIR *d = opendir(dir);
    if (!d) return tel_why_errno(errno, dir, NULL, why, wn);
    amd_state *s = calloc(1, sizeof *s);
    if (!s) { closedir(d); return CAL_ENOMEM; }
    int cards[64], nc = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nc < 64) {
        int k; char tail;
        if (sscanf(de->d_name, "card%d%c", &k, &tail) == 1) cards[nc++] = k;
    }
    closedir(d);
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0 && cards[j - 1] > cards[j]; j--) { int t = cards[j]; cards[j] = cards[j - 1]; cards[j - 1] = t; }
    for (int i = 0; i < nc && s->n < MAX_CARDS; i++) {
        snprintf(dev, sizeof dev, "%s/card%d/device", dir, cards[i]);
        snprintf(p, sizeof p, "%s/vendor", dev);
        if (tel_read_file(p, b, sizeof b) <= 0 || strtol(b, NULL, 16) != 0x1002) continue;
        card *c = &s->c[s->n];
        memset(c, -1, sizeof *c);
        hw[0] = 0;
        snprintf(p, sizeof p, "%s/hwmon", dev);
        DIR *hd = opendir(p);
        while (hd && (de = readdir(hd))) {
            if (strncmp(de->d_name, "hwmon", 5) != 0) continue;
            snprintf(hw, sizeof hw, "%s/hwmon/%s", dev, de->d_name);
            break;
        }
        if (hd) closedir(hd);
        if (hw[0]) {
            c->sclk_fd = open_opt(hw, "freq1_input");
            c->mclk_fd = open_opt(hw, "freq2_input");
            c->power_fd = open_opt(hw, "power1_average");
            if (c->power_fd < 0) c->power_fd = open_opt(hw, "power1_input");
            c->edge_fd = open_opt(hw, "temp1_input");
            c->junction_fd = open_opt(hw, "temp2_input");
            c->mem_fd = open_opt(hw, "temp3_input");
        }
        c->dpm_sclk_fd = open_opt(dev, "pp_dpm_sclk");
        c->dpm_mclk_fd = open_opt(dev, "pp_dpm_mclk");
        c->busy_fd = open_opt(dev, "gpu_busy_percent");
        s->n++;
    }
    if (s->n == 0) {
        free(s);
        snprintf(why, wn, "no device: no AMD (vendor 0x1002) card under %s", dir);
        return CAL_ENOTFOUND;
    }
    snprintf(why, wn, "%d AMD GPU%s", s->n, s->n > 1 ? "s" : "");
    *state = s;
    return CAL_OK;
}

static void amd_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    (void)ctx;
    amd_state *s = st;
    for (int i = 0; i < s->n; i++) {
        card *c = &s->c[i];
        uint64_t u;
        int64_t v;
        double mhz;
        if (c->sclk_fd >= 0 && tel_pread_u64(c->sclk_fd, &u) == 0)
            tel_emit(e, "MHz", (double)u / 1e6, "amdgpu%d_sclk_mhz", i);
        else if (c->dpm_sclk_fd >= 0 && dpm_current(c->dpm_sclk_fd, &mhz) == 0)
            tel_emit(e, "MHz", mhz, "amdgpu%d_sclk_mhz", i);
        if (c->mclk_fd >= 0 && tel_pread_u64(c->mclk_fd, &u) == 0)
            tel_emit(e, "MHz", (double)u / 1e6, "amdgpu%d_mclk_mhz", i);
        else if (c->dpm_mclk_fd >= 0 && dpm_current(c->dpm_mclk_fd, &mhz) == 0)
            tel_emit(e, "MHz", mhz, "amdgpu%d_mclk_mhz", i);
        if (c->power_fd >= 0 && tel_pread_u64(c->power_fd, &u) == 0)
            tel_emit(e, "W", (double)u / 1e6, "amdgpu%d_w", i);
        if (c->edge_fd >= 0 && tel_pread_i64(c->edge_fd, &v) == 0)
            tel_emit(e, "C", (double)v / 1e3, "amdgpu%d_temp_c", i);
        if (c->junction_fd >= 0 && tel_pread_i64(c->junction_fd, &v) == 0)
            tel_emit(e, "C", (double)v / 1e3, "amdgpu%d_junction_c", i);
        if (c->mem_fd >= 0 && tel_pread_i64(c->mem_fd, &v) == 0)
            tel_emit(e, "C", (double)v / 1e3, "amdgpu%d_mem_temp_c", i);
        if (c->busy_fd >= 0 && tel_pread_u64(c->busy_fd, &u) == 0)
            tel_emit(e, "%", (double)u, "amdgpu%d_busy_pct", i);
    }
}

const tel_backend_ops tel_amdgpu_ops = {
    "amdgpu", "AMD GPU clock, power, temperature, busy (amdgpu sysfs/hwmon)",
    amd_probe, amd_read, amd_close,
};
