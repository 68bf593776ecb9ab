/* caliper telemetry — NVIDIA GPUs through NVML, loaded with dlopen at run
 * time (no build-time dependency; CALIPER_NVML_LIB overrides the library
 * path for tests). Per GPU: SM and memory clocks, power, the total-energy
 * counter, temperature, utilisation, power limit, clocks-event reasons.
 * NVML's types are declared here from its documented ABI. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "tel_internal.h"

#define MAX_GPUS 16
typedef int nvmlReturn_t;                      /* NVML_SUCCESS = 0 */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_NO_PERMISSION = 4, NVML_ERROR_DRIVER_NOT_LOADED = 9 };
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum { NVML_TEMPERATURE_GPU = 0 };

typedef struct nvml_api {
    void *lib;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char  *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);               /* mW */
    nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);        /* mJ */
    nvmlReturn_t (*temp)(nvmlDevice_t, int, unsigned int *);           /* °C */
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*limit)(nvmlDevice_t, unsigned int *);               /* mW */
    nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long *);
} nvml_api;

typedef struct nvml_state {
    nvml_api     api;
    unsigned int n;
    nvmlDevice_t dev[MAX_GPUS];
} nvml_state;

static void *sym(void *lib, const char *a, const char *b)
{
    void *p = dlsym(lib, a);
    if (!p && b) p = dlsym(lib, b);
    return p;
}

static const char *nv_err(const nvml_api *a, nvmlReturn_t r)
{
    const char *s = a->error_string ? a->error_string(r) : NULL;
    return s ? s : "NVML error";
}

static void nvml_close(void *st)
{
    nvml_state *s = st;
    if (s->api.shutdown) s->api.shutdown();
    if (s->api.lib) dlclose(s->api.lib);
    free(s);
}

static int nvml_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    (void)ctx;
    const char *path = getenv("CALIPER_NVML_LIB");
    if (!path || !*path) path = "libnvidia-ml.so.1";
    nvml_state *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    nvml_api *a = &s->api;
    a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        free(s);
        snprintf(why, wn, "no such library: %s (no NVIDIA driver installed)", path);
        return CAL_EABSENT;
    }
    *(void **)&a->init = sym(a->lib, "nvmlInit_v2", "nvmlInit");
    *(void **)&a->shutdown = sym(a->lib, "nvmlShutdown", NULL);
    *(void **)&a->error_string = sym(a->lib, "nvmlErrorString", NULL);
    *(void **)&a->count = sym(a->lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    *(void **)&a->handle = sym(a->lib, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    *(void **)&a->name = sym(a->lib, "nvmlDeviceGetName", NULL);
    *(void **)&a->clock = sym(a->lib, "nvmlDeviceGetClockInfo", NULL);
    *(void **)&a->power = sym(a->lib, "nvmlDeviceGetPowerUsage", NULL);
    *(void **)&a->energy = sym(a->lib, "nvmlDeviceGetTotalEnergyConsumption", NULL);
    *(void **)&a->temp = sym(a->lib, "nvmlDeviceGetTemperature", NULL);
    *(void **)&a->util = sym(a->lib, "nvmlDeviceGetUtilizationRates", NULL);
    *(void **)&a->limit = sym(a->lib, "nvmlDeviceGetEnforcedPowerLimit", NULL);
    *(void **)&a->reasons = sym(a->lib, "nvmlDeviceGetCurrentClocksEventReasons",
                                "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!a->init || !a->count || !a->handle) {
        dlclose(a->lib);
        free(s);
        snprintf(why, wn, "%s lacks nvmlInit/nvmlDeviceGetCount/nvmlDeviceGetHandleByIndex", path);
        return CAL_EABSENT;
    }
    nvmlReturn_t r = a->init();
    if (r != NVML_SUCCESS) {
        snprintf(why, wn, "nvmlInit failed: %s%s", nv_err(a, r),
                 r == NVML_ERROR_NO_PERMISSION ? " (permission denied: the user needs access to /dev/nvidia*)" :
                 r == NVML_ERROR_DRIVER_NOT_LOADED ? " (no device: the driver is not loaded)" : "");
        a->shutdown = NULL;
        dlclose(a->lib);
        free(s);
        return r == NVML_ERROR_NO_PERMISSION ? CAL_EPERM : CAL_ENOTFOUND;
    }
    unsigned int n = 0;
    r = a->count(&n);
    if (r != NVML_SUCCESS || n == 0) {
        snprintf(why, wn, "no device: NVML reports %u GPUs%s%s", n,
                 r != NVML_SUCCESS ? ": " : "", r != NVML_SUCCESS ? nv_err(a, r) : "");
        nvml_close(s);
        return CAL_ENOTFOUND;
    }
    if (n > MAX_GPUS) n = MAX_GPUS;
    for (unsigned int i = 0; i < n; i++)
        if (a->handle(i, &s->dev[s->n]) == NVML_SUCCESS) s->n++;
    if (s->n == 0) {
        snprintf(why, wn, "no device: no NVML handle could be opened");
        nvml_close(s);
        return CAL_ENOTFOUND;
    }
    char name[96] = "";
    if (a->name) a->name(s->dev[0], name, sizeof name);
    snprintf(why, wn, "%u GPU%s (%s)%s", s->n, s->n > 1 ? "s" : "", name[0] ? name : "unnamed",
             a->reasons ? "" : "; no clocks-event reasons in this driver");
    *state = s;
    return CAL_OK;
}

static void nvml_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    (void)ctx;
    nvml_state *s = st;
    nvml_api *a = &s->api;
    for (unsigned int i = 0; i < s->n; i++) {
        nvmlDevice_t d = s->dev[i];
        unsigned int u;
        unsigned long long ull;
        nvmlUtilization_t ut;
        if (a->clock && a->clock(d, NVML_CLOCK_SM, &u) == NVML_SUCCESS)
            tel_emit(e, "MHz", u, "gpu%u_sm_mhz", i);
        if (a->clock && a->clock(d, NVML_CLOCK_MEM, &u) == NVML_SUCCESS)
            tel_emit(e, "MHz", u, "gpu%u_mem_mhz", i);
        if (a->power && a->power(d, &u) == NVML_SUCCESS)     /* Ampere+: a 1 s average */
            tel_emit(e, "W", u / 1000.0, "gpu%u_w", i);
        if (a->energy && a->energy(d, &ull) == NVML_SUCCESS) /* mJ since driver load */
            tel_emit(e, "J", (double)ull / 1000.0, "gpu%u_energy_j", i);
        if (a->temp && a->temp(d, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS)
            tel_emit(e, "C", u, "gpu%u_temp_c", i);
        if (a->util && a->util(d, &ut) == NVML_SUCCESS) {
            tel_emit(e, "%", ut.gpu, "gpu%u_util_pct", i);
            tel_emit(e, "%", ut.memory, "gpu%u_mem_util_pct", i);
        }
        if (a->limit && a->limit(d, &u) == NVML_SUCCESS)
            tel_emit(e, "W", u / 1000.0, "gpu%u_power_limit_w", i);
        if (a->reasons && a->reasons(d, &ull) == NVML_SUCCESS)
            tel_emit(e, "mask", (double)ull, "gpu%u_clocks_event_reasons", i);
    }
}

const tel_backend_ops tel_nvml_ops = {
    "nvml", "NVIDIA GPU clocks, power, energy, temperature, throttle reasons (NVML)",
    nvml_probe, nvml_read, nvml_close,
};
