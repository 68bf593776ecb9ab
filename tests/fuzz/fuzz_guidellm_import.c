/* Fuzz target: the guidellm benchmarks report importer. Any bytes must give a
 * result or fail with a message and no result; a result must compare
 * against itself with every ratio comparable, and render as HTML. Also built
 * as a corpus replay for `make test`. */
#include <stdint.h>
#include "import_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    char err[256];
    err[0] = 0;
    cal_result *r = NULL;
    int e = cal_import_guidellm((const char *)data, size, "fuzz.json", &r, err, sizeof err);
    fuzz_check_import(e, r, err);
    return 0;
}
