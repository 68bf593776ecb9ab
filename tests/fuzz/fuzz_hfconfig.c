/* libFuzzer target: the config.json reader on arbitrary bytes. Invariants:
 * no crash or leak, a failure says why, a success gives a positive shape.
 * Also built as a corpus replay for `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cal_model_shape s;
    char why[256];
    int rc = cal_hfconfig_read_mem((const char *)data, size, &s, why, sizeof why);
    if (rc != CAL_OK) {
        if (!why[0]) __builtin_trap();
        return 0;
    }
    if (s.layers <= 0 || s.kv_heads <= 0 || s.k_dim <= 0 || s.k_dim != s.v_dim)
        __builtin_trap();
    if (memchr(s.arch, '\0', sizeof s.arch) == NULL) __builtin_trap();
    return 0;
}
