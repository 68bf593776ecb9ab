/* libFuzzer target: the GGUF header reader on arbitrary bytes. Invariants:
 * it never crashes or reads out of bounds, a failure always says why and
 * leaves the shape untouched, and a success gives a positive shape; the
 * model reader's tensors all lie inside the input.
 * Also built as a corpus replay for `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cal_model_shape s;
    memset(&s, 0x5a, sizeof s);
    char why[256];
    int rc = cal_gguf_read_mem(data, size, &s, why, sizeof why);
    if (rc != CAL_OK) {
        if (!why[0] || ((unsigned char *)&s)[0] != 0x5a) __builtin_trap();
        return 0;
    }
    if (s.layers <= 0 || s.kv_heads <= 0 || s.k_dim <= 0 || s.v_dim <= 0 || !s.arch[0])
        __builtin_trap();
    if (memchr(s.arch, '\0', sizeof s.arch) == NULL || memchr(s.name, '\0', sizeof s.name) == NULL)
        __builtin_trap();
    cal_gguf_model m;
    rc = cal_gguf_read_model_mem(data, size, &m, why, sizeof why);
    if (rc != CAL_OK) {
        if (!why[0] || m.tensors) __builtin_trap();
        return 0;
    }
    for (uint64_t i = 0; i < m.n_tensors; i++) {
        const cal_gguf_tensor *t = &m.tensors[i];
        if (t->offset < m.data_offset || t->offset > size || t->bytes > size - t->offset ||
            t->n_dims < 1 || t->n_dims > 4 || !memchr(t->name, '\0', sizeof t->name))
            __builtin_trap();
    }
    if (m.n_vocab < 0 || m.alignment == 0) __builtin_trap();
    cal_gguf_model_free(&m);
    return 0;
}
