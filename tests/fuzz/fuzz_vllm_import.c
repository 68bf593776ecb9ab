/* Fuzz target: reading result files — a vLLM bench JSON, caliper's own
 * result JSON, anything else. Any bytes must parse into a result or fail
 * with a message; a result that parses must compare against itself with
 * every ratio comparable and render as HTML without an error (the checks
 * every import target shares, import_check.h). */
#include <stdint.h>
#include "caliper/report.h"
#include "import_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    char err[256];
    cal_result *r = NULL;
    int e = cal_result_from_json((const char *)data, size, "fuzz.json", &r, err, sizeof err);
    fuzz_check_import(e, r, err);
    return 0;
}
