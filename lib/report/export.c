/* caliper — reads `caliper export RUN --json` (the store's shape) into a
 * result. Until the store's export format is fixed this recognises nothing
 * and says so, naming what it looked for. */
#include <stdio.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "report_internal.h"

int cal_result_from_export(const char *text, size_t len, const char *name,
                           cal_result **out, char *err, size_t errn)
{
    json_t *root;
    int e = cal_report_parse(text, len, &root, err, errn);
    if (e) return e;
    json_decref(root);
    (void)out;
    cal_report_errf(err, errn, "%s: not a caliper result (\"format\": \"caliper-result\"), "
                    "a caliper export, or a vLLM bench file", name ? name : "JSON");
    return CAL_EPROTO;
}
