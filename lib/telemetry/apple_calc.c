/* caliper telemetry — the arithmetic of the Apple Silicon backend, apart
 * from the calls that fetch its inputs (apple.c, macOS only), so that it is
 * built and tested everywhere on captured readings: IOReport energy deltas
 * to watts per cluster, GPU P-state residency to an active share and a
 * residency-weighted clock over the DVFS table, that table from the pmgr
 * property's bytes, `pmset -g therm` text, and AppleSMC's value types. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "apple_calc.h"
#include "lib/util/c_locale.h"

double tel_apple_unit_to_j(const char *u)
{
    if (!u) return 0;
    if (strncmp(u, "mJ", 2) == 0) return 1e-3;
    if (strncmp(u, "uJ", 2) == 0) return 1e-6;
    if (strncmp(u, "nJ", 2) == 0) return 1e-9;
    return 0;
}

void tel_apple_energy_add(tel_apple_energy *acc, const char *group, const char *name,
                          const char *unit, int64_t value)
{
    if (!group || !name || strcmp(group, "Energy Model") != 0) return;
    double j = (double)value * tel_apple_unit_to_j(unit);
    if (strstr(name, "CPU Energy")) { acc->cpu_j += j; acc->have_cpu = 1; }
    else if (strcmp(name, "GPU Energy") == 0) { acc->gpu_j += j; acc->have_gpu = 1; }
    else if (strncmp(name, "DRAM", 4) == 0) { acc->dram_j += j; acc->have_dram = 1; }
    else if (strncmp(name, "ANE", 3) == 0) { acc->ane_j += j; acc->have_ane = 1; }
}

int tel_apple_dvfs_table(const unsigned char *p, size_t len, double *hz, int cap)
{
    int n = 0;
    for (size_t i = 0; i + 8 <= len && n < cap; i += 8) {
        uint32_t v = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 |
                     (uint32_t)p[i + 3] << 24;      /* little-endian u32 Hz, then a u32 voltage */
        if (v) hz[n++] = v;                          /* entry 0 is the 0 Hz OFF state */
    }
    return n;
}

static int idle_state(const char *s)
{
    return !strcmp(s, "OFF") || !strcmp(s, "IDLE") || !strcmp(s, "DOWN");
}

int tel_apple_gpu_residency(const char *const *names, const int64_t *res, int n,
                            const double *hz, int nhz, double *active_pct, double *mhz)
{
    double r_all = 0, r_active = 0, f_sum = 0;
    int k = 0, have = 0;
    for (int x = 0; x < n; x++) {
        double r = (double)res[x];
        r_all += r;
        if (idle_state(names[x])) continue;
        /* the active states are the DVFS table's entries, in order */
        if (k < nhz) { f_sum += hz[k] / 1e6 * r; r_active += r; have = 1; }
        k++;
    }
    if (!have || r_all <= 0) return -1;
    *active_pct = 100.0 * r_active / r_all;
    *mhz = r_active > 0 ? f_sum / r_active : NAN;
    return 0;
}

/* "CPU_Speed_Limit \t= 100" — the value after '=' on the line naming key. */
static int pmset_value(const char *text, const char *key, double *out)
{
    const char *p = text;
    size_t kl = strlen(key);
    while ((p = strstr(p, key))) {
        if ((p == text || p[-1] == '\n' || p[-1] == ' ' || p[-1] == '\t') &&
            (p[kl] == ' ' || p[kl] == '\t' || p[kl] == '=')) {
            const char *eq = p + kl;
            while (*eq == ' ' || *eq == '\t') eq++;
            if (*eq == '=') {
                char *end;
                double v = cal_strtod(eq + 1, &end);
                if (end != eq + 1 && isfinite(v)) { *out = v; return 0; }
            }
        }
        p += kl;
    }
    return -1;
}

int tel_apple_parse_pmset_therm(const char *text, tel_apple_therm *t)
{
    memset(t, 0, sizeof *t);
    t->cpu_speed_limit = t->scheduler_limit = t->available_cpus = NAN;
    if (!text) return -1;
    int found = 0;
    found += pmset_value(text, "CPU_Speed_Limit", &t->cpu_speed_limit) == 0;
    found += pmset_value(text, "CPU_Scheduler_Limit", &t->scheduler_limit) == 0;
    found += pmset_value(text, "CPU_Available_CPUs", &t->available_cpus) == 0;
    /* "No thermal warning level has been recorded" / "Thermal warning level set to N." */
    const char *w = strstr(text, "hermal warning level set to ");
    t->warning_level = w ? atoi(w + strlen("hermal warning level set to ")) : 0;
    if (w) found++;
    else if (strstr(text, "No thermal warning level")) found++;
    return found ? 0 : -1;
}

uint32_t tel_apple_smc_key(const char *four)
{
    if (!four || strlen(four) != 4) return 0;
    return (uint32_t)(unsigned char)four[0] << 24 | (uint32_t)(unsigned char)four[1] << 16 |
           (uint32_t)(unsigned char)four[2] << 8 | (uint32_t)(unsigned char)four[3];
}

int tel_apple_smc_decode(const char *type, const unsigned char *b, size_t n, double *out)
{
    if (!type || !b) return -1;
    if (!strcmp(type, "flt ") && n >= 4) {        /* IEEE 754 single, little-endian on Apple Silicon */
        uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        float f;
        memcpy(&f, &u, 4);
        if (!isfinite(f)) return -1;
        *out = f;
        return 0;
    }
    if (!strcmp(type, "sp78") && n >= 2) {        /* signed 8.8 fixed point, big-endian */
        int16_t v = (int16_t)((uint16_t)b[0] << 8 | b[1]);
        *out = v / 256.0;
        return 0;
    }
    if (!strcmp(type, "ui8 ") && n >= 1) { *out = b[0]; return 0; }
    if (!strcmp(type, "ui16") && n >= 2) { *out = (uint16_t)((uint16_t)b[0] << 8 | b[1]); return 0; }
    if (!strcmp(type, "ui32") && n >= 4) {
        *out = (double)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
        return 0;
    }
    return -1;
}
