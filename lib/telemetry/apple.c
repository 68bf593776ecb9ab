/* caliper telemetry — Apple Silicon: CPU/GPU/DRAM power from IOReport's
 * "Energy Model" group and GPU frequency from "GPU Stats" residency, with
 * IOReport and CoreFoundation loaded at run time (no root, no link-time
 * dependency), whole-machine power from the SMC's PSTR key where it can be
 * read without root, the thermal pressure level, and `pmset -g therm`'s
 * CPU speed limit. The calls are macOS only; the arithmetic is
 * apple_calc.c's, tested everywhere on captured readings. On every other
 * OS the backend reports itself absent. */
#include <stdio.h>
#include "caliper/error.h"
#include "tel_internal.h"
#include "apple_calc.h"

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
#include <mach/mach.h>
#include <math.h>
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
    /* AppleSMC user client (whole-machine power, PSTR), when it opens */
    unsigned int smc;
    int (*smc_call)(unsigned int, uint32_t, const void *, size_t, void *, size_t *);
    int (*smc_close)(unsigned int);
    uint32_t pstr_size, pstr_type;
    int64_t pmset_ns;           /* last `pmset -g therm` read */
    tel_apple_therm therm;
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
                s->n_gpu_hz = tel_apple_dvfs_table(s->data_ptr(d), (size_t)s->data_len(d),
                                                   s->gpu_hz, 64);
                s->release(d);
            }
        }
        obj_release(e);
    }
    if (key) s->release(key);
    obj_release(it);
}

/* The AppleSMC user client, the layout its kernel extension takes (80
 * bytes; as iStats, macmon and mactop use it): selector 2, command 9 reads
 * a key's size and type, command 5 its bytes. */
typedef struct smc_msg {
    uint32_t key;
    uint8_t  vers[6];
    uint8_t  plimit[16];
    uint32_t data_size, data_type;
    uint8_t  data_attr;
    uint8_t  result, status, data8;
    uint32_t data32;
    uint8_t  bytes[32];
} smc_msg;

static int smc_read(apple_state *s, uint32_t key, uint32_t *size, uint32_t *type, uint8_t *bytes)
{
    smc_msg in, out;
    size_t on = sizeof out;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in.key = key;
    in.data8 = 9;                                   /* read key info */
    if (s->smc_call(s->smc, 2, &in, sizeof in, &out, &on) != 0 || out.result) return -1;
    *size = out.data_size;
    *type = out.data_type;
    if (!bytes) return 0;
    in.data_size = out.data_size;
    in.data8 = 5;                                   /* read bytes */
    on = sizeof out;
    memset(&out, 0, sizeof out);
    if (s->smc_call(s->smc, 2, &in, sizeof in, &out, &on) != 0 || out.result) return -1;
    memcpy(bytes, out.bytes, *size < 32 ? *size : 32);
    return 0;
}

/* Opens the SMC and keeps it only if the PSTR key (system power) answers. */
static void smc_open(apple_state *s)
{
    void *(*matching)(const char *);
    unsigned int (*service)(unsigned int, void *);
    int (*open_svc)(unsigned int, unsigned int, uint32_t, unsigned int *);
    int (*obj_release)(unsigned int);
    *(void **)&matching = dlsym(s->iokit, "IOServiceMatching");
    *(void **)&service = dlsym(s->iokit, "IOServiceGetMatchingService");
    *(void **)&open_svc = dlsym(s->iokit, "IOServiceOpen");
    *(void **)&obj_release = dlsym(s->iokit, "IOObjectRelease");
    *(void **)&s->smc_call = dlsym(s->iokit, "IOConnectCallStructMethod");
    *(void **)&s->smc_close = dlsym(s->iokit, "IOServiceClose");
    if (!matching || !service || !open_svc || !obj_release || !s->smc_call || !s->smc_close) return;
    unsigned int svc = service(0, matching("AppleSMC"));
    if (!svc) return;
    if (open_svc(svc, mach_task_self(), 0, &s->smc) != 0) s->smc = 0;
    obj_release(svc);
    if (s->smc && smc_read(s, tel_apple_smc_key("PSTR"), &s->pstr_size, &s->pstr_type, NULL) != 0) {
        s->smc_close(s->smc);
        s->smc = 0;
    }
}

/* `pmset -g therm`, at most once a second: a process start is not free. */
static void read_pmset(apple_state *s, int64_t now)
{
    if (s->pmset_ns && now - s->pmset_ns < 1000000000LL) return;
    s->pmset_ns = now;
    FILE *p = popen("/usr/bin/pmset -g therm 2>/dev/null", "r");
    if (!p) return;
    char text[2048];
    size_t n = fread(text, 1, sizeof text - 1, p);
    text[n] = '\0';
    pclose(p);
    tel_apple_parse_pmset_therm(text, &s->therm);
}

static void apple_close(void *st)
{
    apple_state *s = st;
    if (!s) return;
    if (s->prev) s->release(s->prev);
    if (s->subbed) s->release(s->subbed);
    if (s->k_channels) s->release(s->k_channels);
    if (s->have_notify) notify_cancel(s->notify_token);
    if (s->smc) s->smc_close(s->smc);
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
    smc_open(s);
    s->have_notify = notify_register_check("com.apple.system.thermalpressurelevel",
                                           &s->notify_token) == NOTIFY_STATUS_OK;
    snprintf(why, wn, "IOReport energy%s%s%s, pmset thermal state", s->n_gpu_hz ? " and GPU residency" : "",
             s->smc ? ", SMC system power" : "", s->have_notify ? ", thermal pressure" : "");
    *state = s;
    return CAL_OK;
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
    tel_apple_energy en;
    memset(&en, 0, sizeof en);
    double active_pct = NAN, mhz = NAN;
    CFIndex n = chans ? s->arr_count(chans) : 0;
    for (CFIndex i = 0; i < n; i++) {
        CFDictionaryRef ch = s->arr_get(chans, i);
        char grp[64], nm[64], un[16];
        cfstr(s, s->group(ch), grp, sizeof grp);
        cfstr(s, s->name(ch), nm, sizeof nm);
        if (strcmp(grp, "Energy Model") == 0) {
            cfstr(s, s->unit(ch), un, sizeof un);
            tel_apple_energy_add(&en, grp, nm, un, s->ival(ch, 0));
        } else if (strcmp(grp, "GPU Stats") == 0 && strcmp(nm, "GPUPH") == 0) {
            char names[64][32];
            const char *np[64];
            int64_t res[64];
            int32_t ns = s->st_count(ch);
            if (ns > 64) ns = 64;
            for (int32_t x = 0; x < ns; x++) {
                cfstr(s, s->st_name(ch, x), names[x], sizeof names[x]);
                np[x] = names[x];
                res[x] = s->st_res(ch, x);
            }
            tel_apple_gpu_residency(np, res, ns, s->gpu_hz, s->n_gpu_hz, &active_pct, &mhz);
        }
    }
    s->release(d);
    if (dt <= 0) return;
    if (en.have_cpu) tel_emit(e, "W", en.cpu_j / dt, "cpu_w");
    if (en.have_gpu) tel_emit(e, "W", en.gpu_j / dt, "gpu_w");
    if (en.have_dram) tel_emit(e, "W", en.dram_j / dt, "dram_w");
    if (en.have_ane) tel_emit(e, "W", en.ane_j / dt, "ane_w");
    if (!isnan(active_pct)) tel_emit(e, "%", active_pct, "gpu_active_pct");
    if (!isnan(mhz)) tel_emit(e, "MHz", mhz, "gpu_mhz");
    uint32_t size, type;
    uint8_t b[32];
    double w;
    if (s->smc && smc_read(s, tel_apple_smc_key("PSTR"), &size, &type, b) == 0) {
        char tname[5] = {(char)(type >> 24), (char)(type >> 16), (char)(type >> 8), (char)type, 0};
        if (tel_apple_smc_decode(tname, b, size, &w) == 0 && w >= 0) tel_emit(e, "W", w, "system_w");
    }
    read_pmset(s, now);
    if (!isnan(s->therm.cpu_speed_limit)) tel_emit(e, "%", s->therm.cpu_speed_limit, "cpu_speed_limit_pct");
}
#endif

const tel_backend_ops tel_apple_ops = {
    "apple", "Apple Silicon CPU/GPU/DRAM power and GPU clock (IOReport), thermal pressure",
    apple_probe, apple_read, apple_close,
};
