/* The one small seeded generator of the library and its tests: splitmix64
 * (Steele, Lea, Flood 2014). A stream is a uint64_t state; each call
 * advances it and returns 64 well-mixed bits. Header-only, so a hot loop
 * (the probe's Poisson arrivals) inlines it. The engine keeps its own copy
 * (cal_k_splitmix64, engine/kernels.c): it builds without lib/. */
#ifndef CALIPER_LIB_UTIL_RNG_H
#define CALIPER_LIB_UTIL_RNG_H
#include <stdint.h>

static inline uint64_t cal_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

#endif
