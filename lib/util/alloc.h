/* caliper — allocation-failure injection for tests (internal to libcaliper
 * and its tests: not installed), the way SQLite tests its out-of-memory
 * paths (SQLITE_CONFIG_MALLOC with a fault counter): arm the counter so
 * that the n-th allocation from now fails, run a short workload, and walk
 * n = 1, 2, 3 … until a run completes with no failure injected.
 * Each step must end in a clear error (CAL_ENOMEM, a request status with a
 * message), never a crash or a leak (run it under ASan/LSan).
 *
 * What is counted, and how (the least invasive honest design):
 *  - SQLite, jansson and libcurl take allocator hooks of their own
 *    (sqlite3_config(SQLITE_CONFIG_MALLOC), json_set_alloc_funcs,
 *    curl_global_init_mem): cal_alloc_hook_libraries installs counting
 *    wrappers around a real allocator there.
 *  - caliper's own malloc/calloc/realloc/strdup/strndup calls are not
 *    rewritten: production code calls libc as before, at no cost. A test
 *    binary links with -Wl,--wrap=malloc,--wrap=calloc,... (see the
 *    Makefile's test_malloc_fail rule) and defines __wrap_malloc & co. to
 *    ask cal_alloc_tick() first; the linker then routes every call from
 *    libcaliper's objects through them. Allocations inside libc itself
 *    (fopen, getaddrinfo) and other libraries (OpenSSL) are not counted.
 *
 * The counter is process-wide and atomic (the telemetry sampler allocates on
 * its own thread). Nothing here allocates. */
#ifndef CALIPER_ALLOC_H
#define CALIPER_ALLOC_H
#include <stddef.h>

/* Where an allocation comes from. */
enum {
    CAL_ALLOC_OWN     = 1u << 0,   /* caliper's own code (through --wrap) */
    CAL_ALLOC_SQLITE  = 1u << 1,
    CAL_ALLOC_JANSSON = 1u << 2,
    CAL_ALLOC_CURL    = 1u << 3,
    CAL_ALLOC_ALL     = 0xfu
};

/* Arm: the n-th counted allocation from now fails (n >= 1), once; every
 * other one succeeds. 0 disarms (count, never fail). Resets the counts.
 * Only allocations from the sources in cal_alloc_fail_sources are counted
 * (and so can fail); the others pass, tallied in cal_alloc_passed. */
void cal_alloc_fail_at(long n);
/* The sources the counter indexes (default CAL_ALLOC_ALL). */
void cal_alloc_fail_sources(unsigned mask);
/* Allocations counted since the last cal_alloc_fail_at. */
long cal_alloc_count(void);
/* Allocations from sources outside the mask since then (never failed). */
long cal_alloc_passed(void);
/* Failures injected since the last cal_alloc_fail_at (0 or 1). */
long cal_alloc_failures(void);
/* Count one allocation about to be made from source (a CAL_ALLOC_* bit);
 * 1 when it is the one to fail (the caller then returns NULL as the
 * allocator would). For wrappers. */
int  cal_alloc_tick(unsigned source);

/* The allocator the library hooks count in front of. In a binary linked
 * with --wrap=malloc these are the __real_* functions, so a library's
 * allocation is counted once, not again by the wrapper. */
typedef struct cal_alloc_fns {
    void *(*malloc_fn)(size_t);
    void *(*calloc_fn)(size_t, size_t);
    void *(*realloc_fn)(void *, size_t);
    void  (*free_fn)(void *);
    char *(*strdup_fn)(const char *);
} cal_alloc_fns;

/* Route SQLite's, jansson's and libcurl's allocations through the counter
 * in front of real (copied). Call once, first thing in main: before any of
 * those libraries allocates (SQLite refuses a new allocator after
 * sqlite3_initialize, libcurl after curl_global_init). The libcurl hook
 * holds one curl_global_init reference for the life of the process.
 * Returns 0, or -1 naming the library that refused in why[why_len]. */
int  cal_alloc_hook_libraries(const cal_alloc_fns *real, char *why, size_t why_len);

#endif
