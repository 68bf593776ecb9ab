/* A stand-in for libnvidia-ml.so.1 with scripted values, for the NVML
 * backend's tests only (loaded through CALIPER_NVML_LIB; never linked into
 * caliper). Each read of device 0's SM clock advances the script one step.
 * NVMLMOCK_GPUS sets the device count (default 2; 0 = no device);
 * NVMLMOCK_INIT=perm makes nvmlInit fail with NO_PERMISSION. */
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;

static struct nvmlDevice_st { int index; } devs[4] = { {0}, {1}, {2}, {3} };
static int step = -1;

/* The script for device 0 (device k adds k×10 to clocks). */
static const unsigned int sm_mhz[]   = { 1980, 1755, 1410, 1410 };
static const unsigned int power_mw[] = { 699000, 700000, 698500, 450000 };
static const unsigned long long reasons[] = { 0x0ULL, 0x4ULL, 0x4ULL | 0x40ULL, 0x1ULL };
#define NSTEP 4
#define CUR (step < 0 ? 0 : step % NSTEP)

nvmlReturn_t nvmlInit_v2(void)
{
    const char *m = getenv("NVMLMOCK_INIT");
    if (m && strcmp(m, "perm") == 0) return 4;    /* NVML_ERROR_NO_PERMISSION */
    step = -1;
    return 0;
}
nvmlReturn_t nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(nvmlReturn_t r) { return r == 4 ? "Insufficient Permissions" : r ? "Unknown Error" : "Success"; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    const char *g = getenv("NVMLMOCK_GPUS");
    *n = g ? (unsigned int)atoi(g) : 2;
    if (*n > 4) *n = 4;
    return 0;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (i >= 4) return 2;
    *d = &devs[i];
    return 0;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int n)
{
    (void)d;
    strncpy(name, "NVIDIA H200 (mock)", n);
    if (n) name[n - 1] = 0;
    return 0;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
    if (type == 1 && d->index == 0) step++;
    if (type == 1) { *mhz = sm_mhz[CUR] + 10u * (unsigned)d->index; return 0; }
    if (type == 2) { *mhz = 3201; return 0; }
    if (type == 0) { *mhz = sm_mhz[CUR]; return 0; }
    return 3;                                      /* NOT_SUPPORTED */
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    *mw = power_mw[CUR] - 1000u * (unsigned)d->index;
    return 0;
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj)
{
    *mj = 5000000ULL + 175000ULL * (unsigned long long)CUR + (unsigned long long)d->index;
    return 0;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *c)
{
    (void)d;
    if (sensor != 0) return 2;
    *c = 60 + (unsigned)CUR * 5;
    return 0;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    (void)d;
    u->gpu = 100;
    u->memory = 63;
    return 0;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
    (void)d;
    *mw = 700000;
    return 0;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r)
{
    (void)d;
    *r = reasons[CUR];
    return 0;
}
