/* Fuzz target: the reader of a server's POST /tokenize answer
 * (cal_tokenize_answer, workload.h), which every exact prompt length and
 * the proxy's token counts rest on. Any bytes must either read or fail with
 * one of the documented codes; a count read is in [0, 2^31) and, with ids,
 * equals their number, each id in [0, 2^31); a failure hands out nothing;
 * asking for ids never changes the count; and the answer caliper serve
 * writes for the ids read back is read to the same ids. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *t = (const char *)data;
    int count = -2, c2 = -2, n = -2;
    int32_t *ids = (int32_t *)1;
    int rc = cal_tokenize_answer(t, size, &count, NULL, NULL);
    if (rc != CAL_OK && rc != CAL_EPROTO && rc != CAL_ENOMEM) abort();
    if (rc == CAL_OK ? count < 0 : count != -1) abort();
    int ri = cal_tokenize_answer(t, size, &c2, &ids, &n);
    if (ri != CAL_OK && ri != CAL_EPROTO && ri != CAL_EABSENT && ri != CAL_ENOMEM) abort();
    if (ri == CAL_OK) {
        if (rc != CAL_OK || c2 != count || n != count || !ids) abort();
        for (int i = 0; i < n; i++) if (ids[i] < 0) abort();
        /* written back as caliper serve writes it, it reads the same */
        size_t cap = 64 + (size_t)n * 12;
        char *w = malloc(cap);
        if (w) {
            size_t k = (size_t)snprintf(w, cap, "{\"tokens\":[");
            for (int i = 0; i < n; i++) k += (size_t)snprintf(w + k, cap - k, "%s%d", i ? "," : "", ids[i]);
            k += (size_t)snprintf(w + k, cap - k, "],\"count\":%d}", n);
            int32_t *back = NULL;
            int cb = -1, nb = -1;
            int rb = cal_tokenize_answer(w, k, &cb, &back, &nb);
            if (rb == CAL_OK && (cb != n || nb != n || (n && memcmp(back, ids, (size_t)n * sizeof *ids))))
                abort();
            if (rb != CAL_OK && rb != CAL_ENOMEM) abort();
            free(back);
            free(w);
        }
        free(ids);
    } else {
        if (ids != NULL || n != 0 || c2 != -1) abort();
        if (ri == CAL_EABSENT && rc != CAL_OK) abort();   /* a count alone reads as a count */
    }
    return 0;
}
