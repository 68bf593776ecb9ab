/* Fuzz target: shard documents (caliper merge reads them from other
 * machines) and the histogram blobs inside them. The first byte picks the
 * parser. A document that reads is merged (as shard 1 of 1) into an
 * in-memory store and loaded back, so whatever the reader accepts is safe
 * for the merge to index. Also built as a corpus replay for `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "caliper/error.h"
#include "caliper/hist.h"
#include "caliper/shard.h"
#include "caliper/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1 << 20)) return 0;
    char why[512];
    if (data[0] & 1) {
        static cal_hist h;
        int rc = cal_hist_decode(data + 1, size - 1, &h, why, sizeof why);
        if (rc != CAL_OK && rc != CAL_EPROTO) __builtin_trap();
        if (rc == CAL_OK) {
            uint8_t *b;
            size_t n;
            if (cal_hist_encode(&h, &b, &n) == CAL_OK) {
                if (n != size - 1) __builtin_trap();     /* canonical: encodes back */
                free(b);
            }
            (void)cal_hist_percentile_ms(&h, 99);
        }
        return 0;
    }
    cal_shard_doc *d = NULL;
    int rc = cal_shard_read((const char *)data + 1, size - 1, "fuzz", &d, why, sizeof why);
    if (rc != CAL_OK && rc != CAL_EPROTO && rc != CAL_ENOMEM) __builtin_trap();
    if (rc != CAL_OK) return 0;
    cal_store *st = NULL;
    if (d->info.count == 1 && cal_store_open(":memory:", &st) == CAL_OK) {
        int64_t id = 0;
        cal_shard_doc *one[1] = {d};
        if (cal_shard_merge(st, one, 1, NULL, &id, why, sizeof why) == CAL_OK) {
            cal_run_data *back = NULL;
            if (cal_store_load_run(st, id, CAL_LOAD_CHUNKS, &back) != CAL_OK) __builtin_trap();
            cal_run_data_free(&back);
        }
        cal_store_close(&st);
    }
    cal_shard_free(&d);
    return 0;
}
