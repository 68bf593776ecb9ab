/* Allocation-failure injection: one process-wide counter, and counting
 * allocator hooks for the libraries that take one (SQLite, jansson,
 * libcurl). lib/util/alloc.h explains the design. */
#include <curl/curl.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "lib/util/alloc.h"

static atomic_long g_fail_at;     /* 0: never fail */
static atomic_long g_count;
static atomic_long g_passed;
static atomic_long g_failures;
static atomic_uint g_sources = CAL_ALLOC_ALL;
static cal_alloc_fns g_real;

void cal_alloc_fail_at(long n)
{
    atomic_store(&g_fail_at, n > 0 ? n : 0);
    atomic_store(&g_count, 0);
    atomic_store(&g_passed, 0);
    atomic_store(&g_failures, 0);
}

void cal_alloc_fail_sources(unsigned mask) { atomic_store(&g_sources, mask & CAL_ALLOC_ALL); }
long cal_alloc_count(void) { return atomic_load(&g_count); }
long cal_alloc_passed(void) { return atomic_load(&g_passed); }
long cal_alloc_failures(void) { return atomic_load(&g_failures); }

int cal_alloc_tick(unsigned source)
{
    if (!(source & atomic_load(&g_sources))) {
        atomic_fetch_add(&g_passed, 1);
        return 0;
    }
    long n = atomic_fetch_add(&g_count, 1) + 1;
    if (n != atomic_load(&g_fail_at)) return 0;
    atomic_fetch_add(&g_failures, 1);
    return 1;
}

/* ---- libcurl and jansson: plain malloc-shaped hooks -------------------- */
static void *c_malloc(size_t n) { return cal_alloc_tick(CAL_ALLOC_CURL) ? NULL : g_real.malloc_fn(n); }
static void *c_calloc(size_t k, size_t n) { return cal_alloc_tick(CAL_ALLOC_CURL) ? NULL : g_real.calloc_fn(k, n); }
static void *c_realloc(void *p, size_t n) { return cal_alloc_tick(CAL_ALLOC_CURL) ? NULL : g_real.realloc_fn(p, n); }
static char *c_strdup(const char *s) { return cal_alloc_tick(CAL_ALLOC_CURL) ? NULL : g_real.strdup_fn(s); }
static void *j_malloc(size_t n) { return cal_alloc_tick(CAL_ALLOC_JANSSON) ? NULL : g_real.malloc_fn(n); }
static void c_free(void *p) { g_real.free_fn(p); }

/* ---- SQLite: it asks each allocation's size back, so keep it in front --- */
#define HDR 16   /* keeps SQLite's 8-byte alignment (16 for long double) */
static void *s_malloc(int n)
{
    if (n <= 0 || cal_alloc_tick(CAL_ALLOC_SQLITE)) return NULL;
    unsigned char *p = g_real.malloc_fn((size_t)n + HDR);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    return p + HDR;
}
static void s_free(void *p)
{
    if (p) g_real.free_fn((unsigned char *)p - HDR);
}
static int s_size(void *p)
{
    int n = 0;
    if (p) memcpy(&n, (unsigned char *)p - HDR, sizeof n);
    return n;
}
static void *s_realloc(void *p, int n)
{
    if (!p) return s_malloc(n);
    if (n <= 0 || cal_alloc_tick(CAL_ALLOC_SQLITE)) return NULL;
    unsigned char *q = g_real.realloc_fn((unsigned char *)p - HDR, (size_t)n + HDR);
    if (!q) return NULL;
    memcpy(q, &n, sizeof n);
    return q + HDR;
}
static int s_roundup(int n) { return (n + 7) & ~7; }
static int s_init(void *ud) { (void)ud; return SQLITE_OK; }
static void s_shutdown(void *ud) { (void)ud; }

int cal_alloc_hook_libraries(const cal_alloc_fns *real, char *why, size_t why_len)
{
    if (!real || !real->malloc_fn || !real->calloc_fn || !real->realloc_fn || !real->free_fn ||
        !real->strdup_fn) {
        if (why && why_len) snprintf(why, why_len, "an allocator function is missing");
        return -1;
    }
    g_real = *real;
    static const sqlite3_mem_methods methods = {s_malloc, s_free, s_realloc, s_size,
                                                s_roundup, s_init, s_shutdown, NULL};
    if (sqlite3_config(SQLITE_CONFIG_MALLOC, &methods) != SQLITE_OK) {
        if (why && why_len) snprintf(why, why_len, "SQLite is initialised already");
        return -1;
    }
    json_set_alloc_funcs(j_malloc, c_free);
    if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, c_malloc, c_free, c_realloc, c_strdup,
                             c_calloc) != CURLE_OK) {
        if (why && why_len) snprintf(why, why_len, "libcurl refused the allocator");
        return -1;
    }
    return 0;
}
