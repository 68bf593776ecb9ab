/* What the encoder fuzz targets (fuzz_tok_*.c) share: llama.cpp's special
 * token split as it is written (the quadratic reference the linear
 * cal_special_split must equal), and the round-trip check. Header-only. */
#ifndef CALIPER_TESTS_FUZZ_TOK_CHECK_H
#define CALIPER_TESTS_FUZZ_TOK_CHECK_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "engine/engine.h"
#include "engine/vocab.h"
#include "tests/helpers/special_split_ref.h"

/* cal_special_split(v, t[n]) must cut exactly as the reference does. */
static void tc_same_split(const cal_vocab *v, const char *t, size_t n, int ps)
{
    cal_frag *want = malloc((2 * n + 1) * sizeof *want);
    cal_frag *tmp = malloc((2 * n + 1) * sizeof *tmp);
    cal_frag *got = NULL;
    size_t ng = 0;
    if (!want || !tmp || cal_special_split(v, t, n, ps, &got, &ng) != CAL_OK) {
        free(want);
        free(tmp);
        return;   /* out of memory: nothing to compare */
    }
    size_t nw = ref_split(v, t, n, ps, want, tmp);
    if (ng != nw) __builtin_trap();
    for (size_t i = 0; i < nw; i++)
        if (got[i].id != want[i].id || got[i].off != want[i].off || got[i].len != want[i].len)
            __builtin_trap();
    free(got);
    free(want);
    free(tmp);
}

/* Encode t[n] with flags: every id inside the vocabulary with a piece, and
 * (when roundtrip) the pieces, less the BOS and EOS that ADD_SPECIAL adds,
 * are t again. Returns the count (or the error, which must be one the API
 * names). */
static int tc_encode(const cal_tokenizer *tk, const char *t, size_t n, int flags, int roundtrip)
{
    int cap = (int)(3 * n + 8);
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return CAL_ENOMEM;
    int k = cal_tok_encode_ex(tk, t, n, flags, ids, cap);
    if (k < 0 && k != CAL_EINVAL && k != CAL_ENOMEM) __builtin_trap();
    /* what ADD_SPECIAL adds: the ids of the empty text */
    int32_t empty[4];
    int ne = flags & CAL_TOK_ADD_SPECIAL
             ? cal_tok_encode_ex(tk, "", 0, CAL_TOK_ADD_SPECIAL, empty, 4) : 0;
    if (ne < 0 || ne > 2) __builtin_trap();
    int skip_first = ne >= 1 && empty[0] == cal_tok_bos(tk);
    int skip_last = ne - skip_first;
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        int len;
        const char *p = cal_tok_piece(tk, ids[i], &len);
        if (ids[i] < 0 || ids[i] >= cal_tok_vocab(tk) || !p || len < 0) __builtin_trap();
        if ((i == 0 && skip_first) || (i == k - 1 && skip_last))
            continue;
        if (roundtrip && (at + (size_t)len > n || memcmp(t + at, p, (size_t)len)))
            __builtin_trap();
        at += (size_t)len;
    }
    if (roundtrip && k >= 0 && at != n) __builtin_trap();
    free(ids);
    return k;
}

#endif
