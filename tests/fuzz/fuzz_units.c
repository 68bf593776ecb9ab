/* Fuzz target: the unit table behind every command-line number. Any string
 * must parse to a finite value or fail cleanly, and whatever parses must
 * format and parse back within the printed precision. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256) return 0;
    char s[257];
    memcpy(s, data, size);
    s[size] = '\0';
    static const char *bare[] = {NULL, "ms", "GB", "W"};
    for (int u = CAL_U_TIME; u <= CAL_U_RATIO; u++) {
        for (size_t b = 0; b < sizeof bare / sizeof *bare; b++) {
            double v;
            if (cal_unit_parse((cal_unit)u, s, bare[b], &v) != 0) continue;
            if (!isfinite(v)) abort();
            char out[64], back_s[64];
            cal_unit_format((cal_unit)u, v, 6, out, sizeof out);
            double back;
            strcpy(back_s, out);
            if (cal_unit_parse((cal_unit)u, back_s, NULL, &back) == 0 &&
                fabs(back - v) > 1e-3 * fabs(v) + 1e-12)
                abort();
        }
    }
    return 0;
}
