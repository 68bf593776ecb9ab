/* llama.cpp's special-token split as it is written, the quadratic
 * reference that the linear cal_special_split must equal: the unit test
 * and the encoder fuzz targets (tests/fuzz/tok_check.h) check against it.
 * Header-only. */
#ifndef CALIPER_TESTS_HELPERS_SPECIAL_SPLIT_REF_H
#define CALIPER_TESTS_HELPERS_SPECIAL_SPLIT_REF_H
#include <stdint.h>
#include <string.h>
#include "engine/engine.h"
#include "engine/vocab.h"

/* llama.cpp's tokenizer_st_partition: every special token in turn, longest
 * first, cuts each text fragment at its leftmost occurrences. f and g hold
 * 2n + 1 fragments. */
static size_t ref_split(const cal_vocab *v, const char *t, size_t n, int ps, cal_frag *f,
                           cal_frag *g)
{
    size_t nf = n ? 1 : 0;
    f[0] = (cal_frag){-1, 0, n};
    for (int k = 0; k < v->n_special; k++) {
        int32_t id = v->special[k];
        if (!ps && (v->type[id] == CAL_TT_CONTROL || v->type[id] == CAL_TT_UNKNOWN))
            continue;
        const char *tx = v->pool + v->off[id];
        size_t tl = v->len[id], ng = 0;
        for (size_t i = 0; i < nf; i++) {
            if (f[i].id >= 0) { g[ng++] = f[i]; continue; }
            size_t off = f[i].off, len = f[i].len;
            for (;;) {
                const char *m = tl <= len ? memmem(t + off, len, tx, tl) : NULL;
                if (!m) { g[ng++] = (cal_frag){-1, off, len}; break; }
                size_t at = (size_t)(m - t);
                if (at > off) g[ng++] = (cal_frag){-1, off, at - off};
                g[ng++] = (cal_frag){id, at, tl};
                len = off + len - (at + tl);
                off = at + tl;
                if (!len) break;
            }
        }
        memcpy(f, g, ng * sizeof *f);
        nf = ng;
    }
    return nf;
}

#endif
