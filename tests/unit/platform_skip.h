/* A unit test of something a platform has by nature (Linux's /proc and
 * cpufreq trees, its subreaper) skips on the others, naming what and where:
 * `make test PLATFORM=posix` runs everything else. Include after cmocka.h. */
#ifndef CAL_TEST_PLATFORM_SKIP_H
#define CAL_TEST_PLATFORM_SKIP_H
#include <string.h>
#include "lib/platform/platform.h"

#define SKIP_UNLESS_PLATFORM(plat, what)                                          \
    do {                                                                          \
        if (strcmp(cal_plat_name(), (plat)) != 0) {                               \
            print_message("skip: %s: %s only, this is %s\n", (what), (plat),      \
                          cal_plat_name());                                       \
            skip();                                                               \
        }                                                                         \
    } while (0)
/* The other way round: skip on `plat`, which lacks what the test needs. */
#define SKIP_ON_PLATFORM(plat, what)                                              \
    do {                                                                          \
        if (strcmp(cal_plat_name(), (plat)) == 0) {                               \
            print_message("skip: %s: not on %s\n", (what), (plat));               \
            skip();                                                               \
        }                                                                         \
    } while (0)
#endif
