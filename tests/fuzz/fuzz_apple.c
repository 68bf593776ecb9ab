/* Fuzz target: what the Apple backend reads from outside, `pmset -g therm`
 * text, the pmgr DVFS table's bytes and AppleSMC values. Any input parses
 * or fails cleanly; a parsed limit or clock is finite. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lib/telemetry/apple_calc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    tel_apple_therm t;
    if (tel_apple_parse_pmset_therm(s, &t) == 0 &&
        (isinf(t.cpu_speed_limit) || isinf(t.scheduler_limit)))
        abort();
    free(s);
    double hz[64];
    int n = tel_apple_dvfs_table(data, size, hz, 64);
    if (n < 0 || n > 64 || (size_t)n > size / 8) abort();
    for (int i = 0; i < n; i++) if (!(hz[i] > 0)) abort();
    static const char *types[] = {"flt ", "sp78", "ui8 ", "ui16", "ui32", "xxxx"};
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        double v;
        if (tel_apple_smc_decode(types[k], data, size, &v) == 0 && !isfinite(v)) abort();
    }
    return 0;
}
