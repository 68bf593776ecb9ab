/* Fuzz target: the per-op CSV reader and the mapping-file parser. Any bytes
 * must read as a profile or fail with a message naming the line; a read
 * profile holds finite sums under distinct names; any bytes as a mapping
 * file parse or fail, and a parsed map answers for any name. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16)) return 0;
    const char *text = (const char *)data;
    cal_ops_profile *p = NULL;
    char err[256] = "";
    if (cal_ops_parse_csv(text, size, "f.csv", &p, err, sizeof err) == CAL_OK) {
        if (p->n_ops > CAL_OPS_MAX_OPS) abort();
        if (!isnan(p->tokens) && !(p->tokens > 0)) abort();
        if (!isnan(p->e2e_ns) && !(p->e2e_ns > 0)) abort();
        for (size_t i = 0; i < p->n_ops; i++) {
            const cal_ops_op *o = &p->ops[i];
            if (!o->name[0] || !(o->calls >= 0) || !(o->time_ns >= 0)) abort();
            for (size_t j = 0; j < i; j++)
                if (!strcmp(p->ops[j].name, o->name)) abort();
        }
    } else if (p || !err[0]) {
        abort();
    }
    cal_ops_profile_free(&p);
    cal_ops_map *m = NULL;
    err[0] = 0;
    if (cal_ops_map_parse(text, size, 1, &m, err, sizeof err) == CAL_OK) {
        const char *c = cal_ops_map_category(m, "MUL_MAT");
        if (!c || !c[0]) abort();   /* a default or a user rule always answers */
        char name[64];
        size_t n = size < sizeof name - 1 ? size : sizeof name - 1;
        memcpy(name, text, n);
        name[n] = 0;
        (void)cal_ops_map_category(m, name);
    } else if (m || !err[0]) {
        abort();
    }
    cal_ops_map_free(&m);
    return 0;
}
