/* caliper telemetry — Apple Silicon: CPU/GPU/DRAM power from IOReport's
 * "Energy Model" group and GPU frequency from "GPU Stats" residency, with
 * IOReport and CoreFoundation loaded at run time (no root, no link-time
 * dependency), plus the thermal pressure level. Built on macOS only; on
 * every other OS the backend reports itself absent. */
#include <stdio.h>
#include "caliper/error.h"
#include "tel_internal.h"

#ifndef __APPLE__
static int apple_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    (void)ctx; (void)state;
    snprintf(why, wn, "not macOS");
    return CAL_EABSENT;
}
static void apple_read(void *st, const tel_ctx *ctx, tel_out *e) { (void)st; (void)ctx; (void)e; }
static void apple_close(void *st) { (void)st; }
#else
/* macOS: every CoreFoundation, IOKit and IOReport call goes through dlsym,
 * so nothing is linked at build time; the CF headers give only the types.
 * IOReport is private API without a header: prototypes as nvtop and mactop
 * use them. First read primes; later reads diff against the previous one. */
#include <CoreFoundation/CoreFoundation.h>
#include <dlfcn.h>
#include <notify.h>
#include <stdlib.h>
#include <string.h>

typedef struct IOReportSubscription *IOReportSubscriptionRef;
typedef unsigned int io_object_t;

typedef struct apple_state {
    void *cf, *ior, *iokit;
    /* CoreFoundation */
    CFStringRef (*str)(CFAllocatorRef, const char *, CFStringEncoding);
    CFIndex (*arr_count)(CFArrayRef);
    const void *(*arr_get)(CFArrayRef, CFIndex);
    const void *(*dict_get)(CFDictionaryRef, const void *);
    CFMutableDictionaryRef (*dict_mcopy)(CFAllocatorRef, CFIndex, CFDictionaryRef);
    Boolean (*str_get)(CFStringRef, char *, CFIndex, CFStringEncoding);
    CFIndex (*data_len)(CFDataRef);
    const UInt8 *(*data_ptr)(CFDataRef);
    void (*release)(CFTypeRef);
    /* IOReport */
    CFDictionaryRef (*channels)(CFStringRef, CFStringRef, uint64_t, uint64_t, uint64_t);
    void (*merge)(CFDictionaryRef, CFDictionaryRef, CFTypeRef);
    IOReportSubscriptionRef (*subscribe)(void *, CFMutableDictionaryRef, CFMutableDictionaryRef *, uint64_t, CFTypeRef);
    CFDictionaryRef (*samples)(IOReportSubscriptionRef, CFMutableDictionaryRef, CFTypeRef);
    CFDictionaryRef (*delta)(CFDictionaryRef, CFDictionaryRef, CFTypeRef);
    CFStringRef (*group)(CFDictionaryRef);
    CFStringRef (*subgroup)(CFDictionaryRef);
    CFStringRef (*name)(CFDictionaryRef);
    CFStringRef (*unit)(CFDictionaryRef);
    int64_t (*ival)(CFDictionaryRef, int32_t);
    int32_t (*st_count)(CFDictionaryRef);
    CFStringRef (*st_name)(CFDictionaryRef, int32_t);
    int64_t (*st_res)(CFDictionaryRef, int32_t);
    /* state */
    IOReportSubscriptionRef sub;
    CFMutableDictionaryRef subbed;
    CFDictionaryRef prev;
    int64_t prev_ns;
    CFStringRef k_channels;
    double gpu_hz[64];
    int n_gpu_hz;
    int notify_token, have_notify;
} apple_state;

#define LOAD(lib, field, sym_name) (*(void **)&s->field = dlsym(s->lib, sym_name))

static void cfstr(apple_state *s, CFStringRef str, char *out, size_t n)
{
    out[0] = 0;
    if (str) s->str_get(str, out, (CFIndex)n, kCFStringEncodingUTF8);
}

/* GPU DVFS table: pmgr's voltage-states9, 8-byte records, first u32 = Hz. */
static void load_gpu_table(apple_state *s)
{
    void *(*matching)(const char *);
    int (*services)(unsigned int, void *, io_object_t *);
    io_object_t (*next)(io_object_t);
    int (*entry_name)(io_object_t, char *);
    CFTypeRef (*prop)(io_object_t, CFStringRef, CFAllocatorRef, uint32_t);
    int (*obj_release)(io_object_t);
    *(void **)&matching = dlsym(s->iokit, "IOServiceMatching");
    *(void **)&services = dlsym(s->iokit, "IOServiceGetMatchingServices");
    *(void **)&next = dlsym(s->iokit, "IOIteratorNext");
    *(void **)&entry_name = dlsym(s->iokit, "IORegistryEntryGetName");
    *(void **)&prop = dlsym(s->iokit, "IORegistryEntryCreateCFProperty");
    *(void **)&obj_release = dlsym(s->iokit, "IOObjectRelease");
    if (!matching || !services || !next || !entry_name || !prop || !obj_release) return;
    io_object_t it = 0, e;
    if (services(0, matching("AppleARMIODevice"), &it) != 0) return;
    CFStringRef key = s->str(NULL, "voltage-states9", kCFStringEncodingUTF8);
    while ((e = next(it)) != 0) {
        char nm[128] = "";
        entry_name(e, nm);
        if (strcmp(nm, "pmgr") == 0 && key) {
            CFDataRef d = (CFDataRef)prop(e, key, NULL, 0);
            if (d) {
                CFIndex len = s->data_len(d);
                const UInt8 *p = s->data_ptr(d);
                for (CFIndex i = 0; i + 8 <= len && s->n_gpu_hz < 64; i += 8) {
                    uint32_t hz;
                    memcpy(&hz, p + i, 4);
                    if (hz) s->gpu_hz[s->n_gpu_hz++] = hz;   /* entry 0 is the 0 Hz OFF state */
                }
                s->release(d);
            }
        }
        obj_release(e);
    }
    if (key) s->release(key);
    obj_release(it);
}

static void apple_close(void *st)
{
    apple_state *s = st;
    if (!s) return;
    if (s->prev) s->release(s->prev);
    if (s->subbed) s->release(s->subbed);
    if (s->k_channels) s->release(s->k_channels);
    if (s->have_notify) notify_cancel(s->notify_token);
    if (s->ior) dlclose(s->ior);
    if (s->iokit) dlclose(s->iokit);
    if (s->cf) dlclose(s->cf);
    free(s);
}

static int apple_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    (void)ctx;
    apple_state *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    s->cf = dlopen("/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation", RTLD_NOW);
    s->iokit = dlopen("/System/Library/Frameworks/IOKit.framework/IOKit", RTLD_NOW);
    s->ior = dlopen("/usr/lib/libIOReport.dylib", RTLD_NOW);
    if (!s->cf || !s->ior || !s->iokit) {
        snprintf(why, wn, "no such library: %s", !s->cf ? "CoreFoundation" : !s->iokit ? "IOKit" :
                 "/usr/lib/libIOReport.dylib (not Apple Silicon?)");
        apple_close(s);
        return CAL_EABSENT;
    }
    LOAD(cf, str, "CFStringCreateWithCString"); LOAD(cf, arr_count, "CFArrayGetCount");
    LOAD(cf, arr_get, "CFArrayGetValueAtIndex"); LOAD(cf, dict_get, "CFDictionaryGetValue");
    LOAD(cf, dict_mcopy, "CFDictionaryCreateMutableCopy"); LOAD(cf, str_get, "CFStringGetCString");
    LOAD(cf, data_len, "CFDataGetLength"); LOAD(cf, data_ptr, "CFDataGetBytePtr");
    LOAD(cf, release, "CFRelease");
    LOAD(ior, channels, "IOReportCopyChannelsInGroup"); LOAD(ior, merge, "IOReportMergeChannels");
    LOAD(ior, subscribe, "IOReportCreateSubscription"); LOAD(ior, samples, "IOReportCreateSamples");
    LOAD(ior, delta, "IOReportCreateSamplesDelta"); LOAD(ior, group, "IOReportChannelGetGroup");
    LOAD(ior, subgroup, "IOReportChannelGetSubGroup"); LOAD(ior, name, "IOReportChannelGetChannelName");
    LOAD(ior, unit, "IOReportChannelGetUnitLabel"); LOAD(ior, ival, "IOReportSimpleGetIntegerValue");
    LOAD(ior, st_count, "IOReportStateGetCount"); LOAD(ior, st_name, "IOReportStateGetNameForIndex");
    LOAD(ior, st_res, "IOReportStateGetResidency");
    if (!s->str || !s->arr_count || !s->arr_get || !s->dict_get || !s->dict_mcopy || !s->str_get ||
        !s->data_len || !s->data_ptr || !s->release || !s->channels || !s->merge || !s->subscribe ||
        !s->samples || !s->delta || !s->group || !s->subgroup || !s->name || !s->unit || !s->ival ||
        !s->st_count || !s->st_name || !s->st_res) {
        snprintf(why, wn, "IOReport lacks an expected entry point on this macOS");
        apple_close(s);
        return CAL_EABSENT;
    }
    CFStringRef g_energy = s->str(NULL, "Energy Model", kCFStringEncodingUTF8);
    CFStringRef g_gpu = s->str(NULL, "GPU Stats", kCFStringEncodingUTF8);
    CFStringRef sg_perf = s->str(NULL, "GPU Performance States", kCFStringEncodingUTF8);
    s->k_channels = s->str(NULL, "IOReportChannels", kCFStringEncodingUTF8);
    CFDictionaryRef ce = s->channels(g_energy, NULL, 0, 0, 0);
    CFDictionaryRef cg = s->channels(g_gpu, sg_perf, 0, 0, 0);
    if (ce && cg) s->merge(ce, cg, NULL);
    CFMutableDictionaryRef desired = ce ? s->dict_mcopy(NULL, 0, ce) : NULL;
    if (desired) s->sub = s->subscribe(NULL, desired, &s->subbed, 0, NULL);
    if (desired) s->release(desired);
    if (ce) s->release(ce);
    if (cg) s->release(cg);
    s->release(g_energy); s->release(g_gpu); s->release(sg_perf);
    if (!s->sub || !s->subbed) {
        snprintf(why, wn, "no device: IOReport has no Energy Model / GPU Stats channels here");
        apple_close(s);
        return CAL_ENOTFOUND;
    }
    load_gpu_table(s);
    s->have_notify = notify_register_check("com.apple.system.thermalpressurelevel",
                                           &s->notify_token) == NOTIFY_STATUS_OK;
    snprintf(why, wn, "IOReport energy%s%s", s->n_gpu_hz ? " and GPU residency" : "",
             s->have_notify ? ", thermal pressure" : "");
    *state = s;
    return CAL_OK;
}

static double unit_to_j(const char *u)
{
    if (strncmp(u, "mJ", 2) == 0) return 1e-3;
    if (strncmp(u, "uJ", 2) == 0) return 1e-6;
    if (strncmp(u, "nJ", 2) == 0) return 1e-9;
    return 0;
}

static void apple_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    (void)ctx;
    apple_state *s = st;
    if (s->have_notify) {
        uint64_t lvl = 0;
        if (notify_get_state(s->notify_token, &lvl) == NOTIFY_STATUS_OK)
            tel_emit(e, "1", (double)lvl, "thermal_pressure");
    }
    CFDictionaryRef cur = s->samples(s->sub, s->subbed, NULL);
    if (!cur) return;
    int64_t now = e->t_ns;
    if (!s->prev) { s->prev = cur; s->prev_ns = now; return; }
    CFDictionaryRef d = s->delta(s->prev, cur, NULL);
    double dt = (double)(now - s->prev_ns) / 1e9;
    s->release(s->prev);
    s->prev = cur;
    s->prev_ns = now;
    if (!d) return;
    CFArrayRef chans = s->dict_get(d, s->k_channels);
    double cpu_j = 0, gpu_j = 0, dram_j = 0, ane_j = 0;
    int have_cpu = 0, have_gpu = 0, have_dram = 0, have_ane = 0;
    double f_sum = 0, r_active = 0, r_all = 0;
    int have_states = 0;
    CFIndex n = chans ? s->arr_count(chans) : 0;
    for (CFIndex i = 0; i < n; i++) {
        CFDictionaryRef ch = s->arr_get(chans, i);
        char grp[64], nm[64], un[16];
        cfstr(s, s->group(ch), grp, sizeof grp);
        cfstr(s, s->name(ch), nm, sizeof nm);
        if (strcmp(grp, "Energy Model") == 0) {
            cfstr(s, s->unit(ch), un, sizeof un);
            double j = (double)s->ival(ch, 0) * unit_to_j(un);
            if (strstr(nm, "CPU Energy")) { cpu_j += j; have_cpu = 1; }
            else if (strcmp(nm, "GPU Energy") == 0) { gpu_j += j; have_gpu = 1; }
            else if (strncmp(nm, "DRAM", 4) == 0) { dram_j += j; have_dram = 1; }
            else if (strncmp(nm, "ANE", 3) == 0) { ane_j += j; have_ane = 1; }
        } else if (strcmp(grp, "GPU Stats") == 0 && strcmp(nm, "GPUPH") == 0) {
            /* residency-weighted MHz over active states (nvtop, mactop) */
            int32_t ns = s->st_count(ch), k = 0;
            for (int32_t x = 0; x < ns; x++) {
                char sn[32];
                cfstr(s, s->st_name(ch, x), sn, sizeof sn);
                double r = (double)s->st_res(ch, x);
                r_all += r;
                if (!strcmp(sn, "OFF") || !strcmp(sn, "IDLE") || !strcmp(sn, "DOWN")) continue;
                if (k < s->n_gpu_hz) { f_sum += s->gpu_hz[k] / 1e6 * r; r_active += r; have_states = 1; }
                k++;
            }
        }
    }
    s->release(d);
    if (dt <= 0) return;
    if (have_cpu) tel_emit(e, "W", cpu_j / dt, "cpu_w");
    if (have_gpu) tel_emit(e, "W", gpu_j / dt, "gpu_w");
    if (have_dram) tel_emit(e, "W", dram_j / dt, "dram_w");
    if (have_ane) tel_emit(e, "W", ane_j / dt, "ane_w");
    if (have_states && r_all > 0) {
        tel_emit(e, "%", 100.0 * r_active / r_all, "gpu_active_pct");
        if (r_active > 0) tel_emit(e, "MHz", f_sum / r_active, "gpu_mhz");
    }
}
#endif

const tel_backend_ops tel_apple_ops = {
    "apple", "Apple Silicon CPU/GPU/DRAM power and GPU clock (IOReport), thermal pressure",
    apple_probe, apple_read, apple_close,
};
