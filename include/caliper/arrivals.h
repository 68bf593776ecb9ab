/* caliper arrivals — the open-loop arrival schedules of `--rate`: a fixed
 * mean rate (Poisson), a ramp from one rate to another (`ramp:1-20/60s`)
 * and bursts (`burst:8/every 5s`). A schedule is a seeded generator of
 * arrival offsets from the cell's start, so the same seed gives the same
 * arrivals; the run stamps each request's sched_ns from it and the store
 * keeps what was realised (requests.sched_ns). docs/load.md.
 *
 * Plain data, no allocation: copy the structs freely. */
#ifndef CALIPER_ARRIVALS_H
#define CALIPER_ARRIVALS_H
#include <stddef.h>
#include <stdint.h>

typedef enum cal_arrival_kind {
    CAL_ARR_POISSON = 0,   /* exponential gaps at `rate` req/s */
    CAL_ARR_RAMP,          /* Poisson whose rate rises (or falls) linearly
                              from `from` to `to` over `over_s`, then holds;
                              a ramp down to 0 ends there, and requests
                              beyond its arrivals come at its end */
    CAL_ARR_BURST          /* `burst` requests at once, every `every_s` */
} cal_arrival_kind;

typedef struct cal_arrivals {
    cal_arrival_kind kind;
    double rate;           /* POISSON: req/s (> 0) */
    double from, to;       /* RAMP: req/s at the start and at over_s (>= 0, not both 0) */
    double over_s;         /* RAMP: the ramp's length, s (> 0) */
    long   burst;          /* BURST: requests released together (>= 1) */
    double every_s;        /* BURST: the period, s (> 0) */
} cal_arrivals;

/* The largest rate any pattern may name, req/s (an overflow guard). */
#define CAL_ARRIVALS_MAX_RATE 1e5
/* The smallest mean rate, req/s: one request a day (CAL_WAIT_MAX_S). */
#define CAL_ARRIVALS_MIN_RATE (1 / 86400.0)

/* Parse a --rate value: "R" (Poisson at R req/s, count units: "2k"),
 * "ramp:A-B/T" (T a time: "60s", "2m"; a bare number is seconds) or
 * "burst:N/every T" (also "burst:N/T"). CAL_OK, or CAL_EINVAL with a
 * message naming the part and its value in err[errn] (err may be NULL). */
int cal_arrivals_parse(const char *s, cal_arrivals *out, char *err, size_t errn);

/* The canonical text of a pattern, as parse reads it back: "4", "ramp:1-20/60s",
 * "burst:8/every 5s". Returns buf. */
char *cal_arrivals_format(const cal_arrivals *a, char *buf, size_t n);

/* The pattern's nominal mean rate, req/s: POISSON rate, RAMP (from + to) / 2
 * (its mean over the ramp), BURST burst / every_s. Stored as the cell's rate. */
double cal_arrivals_mean_rate(const cal_arrivals *a);

/* Arrivals expected in the first t_s seconds (the integrated rate); for
 * BURST the requests of the bursts due by then. */
double cal_arrivals_expected(const cal_arrivals *a, double t_s);

/* Requests a cell of this pattern has when --requests is not given: POISSON
 * max(8, 4 × rate) (4 s of arrivals), RAMP the expected arrivals of the
 * ramp (at least 8), BURST four bursts. */
size_t cal_arrivals_default_n(const cal_arrivals *a);

/* A generator: the k-th arrival's offset from the schedule's start. POISSON
 * and RAMP draw unit exponentials from a splitmix64 stream seeded with
 * `seed` and map their running sum through the inverse of the integrated
 * rate (time rescaling: arrival k is where ∫rate = E1 + … + Ek); BURST is
 * deterministic (arrival k at floor(k / burst) × every_s). Offsets never
 * decrease. */
typedef struct cal_arrival_gen {
    cal_arrivals a;
    uint64_t rng;          /* splitmix64 state */
    double   area;         /* E1 + … + Ek so far */
    uint64_t k;            /* arrivals drawn */
} cal_arrival_gen;
void    cal_arrival_gen_init(cal_arrival_gen *g, const cal_arrivals *a, uint64_t seed);
int64_t cal_arrival_next_ns(cal_arrival_gen *g);

#endif
