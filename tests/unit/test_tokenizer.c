/* Unit tests of the engine's tokenizer: lossless round trip on random bytes
 * and on UTF-8 text, streaming decode that never emits invalid UTF-8 (checked
 * by an independent validator), determinism of the pieces, and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "engine/engine.h"

static uint64_t rs = 777;
static uint64_t rnd(void) /* xorshift64 */
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return rs;
}

/* Independent strict UTF-8 check (RFC 3629: no overlongs, no surrogates,
 * nothing above U+10FFFF). */
static int valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        int len; unsigned cp;
        if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
        else return 0;
        if (i + (size_t)len > n) return 0;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
            (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += (size_t)len;
    }
    return 1;
}

static cal_tokenizer *open_tok(int vocab)
{
    cal_tokenizer *t = NULL;
    assert_int_equal(cal_tok_open(vocab, &t), CAL_OK);
    assert_non_null(t);
    return t;
}

static void test_roundtrip_random_bytes(void **state)
{
    (void)state;
    cal_tokenizer *t = open_tok(32000);
    char buf[600], back[600 * 8];
    int32_t ids[600];
    for (int rep = 0; rep < 300; rep++) {
        int n = (int)(rnd() % 600);
        for (int i = 0; i < n; i++)
            /* mix arbitrary bytes with ASCII so pieces match too */
            buf[i] = rep % 2 ? (char)rnd() : "abcdefghijklmnopqrstuvwxyz  .,"[rnd() % 30];
        int m = cal_tok_encode(t, buf, (size_t)n, ids, 600);
        assert_true(m >= 0 && m <= n);
        size_t len = 0;
        for (int i = 0; i < m; i++) {
            int pl = 0;
            const char *p = cal_tok_piece(t, ids[i], &pl);
            assert_non_null(p);
            assert_true(pl >= 1);
            memcpy(back + len, p, (size_t)pl);
            len += (size_t)pl;
        }
        assert_int_equal(len, n);
        assert_memory_equal(back, buf, (size_t)n);
    }
    cal_tok_close(&t);
    assert_null(t);
}

static int decode_all(cal_tokenizer *t, const int32_t *ids, int m, char *out, int cap)
{
    cal_tok_state st = {{0}, 0, 0};
    int len = 0;
    for (int i = 0; i < m; i++) {
        assert_true(cap - len >= CAL_TOK_DECODE_MAX);
        int k = cal_tok_decode(t, &st, ids[i], out + len, cap - len);
        assert_true(k >= 0 && k <= CAL_TOK_DECODE_MAX);
        len += k;
    }
    int k = cal_tok_flush(&st, out + len, cap - len);
    assert_true(k >= 0);
    return len + k;
}

static void test_roundtrip_utf8_text(void **state)
{
    (void)state;
    const char *texts[] = {
        "The quick brown fox jumps over the lazy dog. It is 2026.",
        "Grüße aus Köln — naïve café, 10 €.",
        "吞吐量没有口径就没有意义。测一下预填充。",
        "emoji 🙂🚀 and math ∑ √2 ≈ 1.414",
        "",
    };
    cal_tokenizer *t = open_tok(4096);
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        const char *s = texts[k];
        size_t n = strlen(s);
        int32_t ids[256];
        char out[256 * CAL_TOK_DECODE_MAX];
        int m = cal_tok_encode(t, s, n, ids, 256);
        assert_true(m >= 0);
        int len = decode_all(t, ids, m, out, (int)sizeof out);
        assert_int_equal(len, n);
        assert_memory_equal(out, s, n);
    }
    /* English text compresses: pieces match, not only bytes */
    const char *en = "the cat sat on the mat and then the rest of the story went on";
    int32_t ids[128];
    int m = cal_tok_encode(t, en, strlen(en), ids, 128);
    assert_true(m > 0 && m < (int)strlen(en) * 3 / 4);
    cal_tok_close(&t);
}

static void test_stream_decode_never_invalid(void **state)
{
    (void)state;
    cal_tokenizer *t = open_tok(4096);
    static char out[4000 * CAL_TOK_DECODE_MAX];
    int32_t ids[4000];
    for (int rep = 0; rep < 50; rep++) {
        int m = 1 + (int)(rnd() % 4000);
        for (int i = 0; i < m; i++)
            /* mostly byte ids: continuation bytes, lone leads, overlongs */
            ids[i] = (int32_t)(rnd() % 4 ? rnd() % 256 : rnd() % 4096);
        cal_tok_state st = {{0}, 0, 0};
        int len = 0;
        for (int i = 0; i < m; i++) {
            int k = cal_tok_decode(t, &st, ids[i], out + len, CAL_TOK_DECODE_MAX);
            assert_true(k >= 0);
            len += k;
            /* everything emitted so far is complete, valid UTF-8 */
            assert_true(valid_utf8((unsigned char *)out, (size_t)len));
        }
        len += cal_tok_flush(&st, out + len, CAL_TOK_DECODE_MAX);
        assert_true(valid_utf8((unsigned char *)out, (size_t)len));
    }
    /* specific cases: split 3-byte char across ids, then an interrupted one */
    cal_tok_state st = {{0}, 0, 0};
    char o[CAL_TOK_DECODE_MAX];
    assert_int_equal(cal_tok_decode(t, &st, 0xe2, o, sizeof o), 0);
    assert_int_equal(cal_tok_decode(t, &st, 0x82, o, sizeof o), 0);
    assert_int_equal(cal_tok_decode(t, &st, 0xac, o, sizeof o), 3);
    assert_memory_equal(o, "\xe2\x82\xac", 3);
    assert_int_equal(cal_tok_decode(t, &st, 0xe2, o, sizeof o), 0);
    assert_int_equal(cal_tok_decode(t, &st, 'A', o, sizeof o), 4);
    assert_memory_equal(o, "\xef\xbf\xbd" "A", 4);
    assert_int_equal(cal_tok_decode(t, &st, 0xed, o, sizeof o), 0);
    assert_int_equal(cal_tok_decode(t, &st, 0xa0, o, sizeof o), 6); /* surrogate */
    assert_int_equal(cal_tok_decode(t, &st, 0xf0, o, sizeof o), 0);
    assert_int_equal(cal_tok_flush(&st, o, sizeof o), 3);
    assert_int_equal(cal_tok_flush(&st, o, sizeof o), 0);
    cal_tok_close(&t);
}

static void test_pieces_deterministic(void **state)
{
    (void)state;
    cal_tokenizer *a = open_tok(4096), *b = open_tok(4096), *c = open_tok(32000);
    int eos = cal_tok_eos(a);
    assert_true(eos >= 256 && eos < 4096);
    int el = -1;
    assert_non_null(cal_tok_piece(a, eos, &el));
    assert_int_equal(el, 0); /* EOS decodes to nothing */
    for (int id = 0; id < 4096; id++) {
        int la, lb, lc;
        const char *pa = cal_tok_piece(a, id, &la), *pb = cal_tok_piece(b, id, &lb);
        const char *pc = cal_tok_piece(c, id, &lc);
        assert_int_equal(la, lb);
        assert_int_equal(la, lc); /* same piece in a larger vocabulary */
        assert_memory_equal(pa, pb, (size_t)la);
        assert_memory_equal(pa, pc, (size_t)la);
        if (id > 256) {
            assert_true(la >= 2 && la <= 8);
            for (int k = 0; k < la; k++)
                assert_true(pa[k] >= 0x20 && pa[k] <= 0x7e);
        }
    }
    assert_int_equal(cal_tok_vocab(c), 32000);
    cal_tok_close(&a); cal_tok_close(&b); cal_tok_close(&c);
}

static void test_errors(void **state)
{
    (void)state;
    cal_tokenizer *t = NULL;
    assert_int_equal(cal_tok_open(100, &t), CAL_EINVAL);
    assert_null(t);
    t = open_tok(300);
    int32_t ids[4];
    assert_int_equal(cal_tok_encode(t, "\x01\x02\x03\x04\x05", 5, ids, 4), CAL_ETOOBIG);
    assert_int_equal(cal_tok_encode(t, "", 0, ids, 4), 0);
    cal_tok_state st = {{0}, 0, 0};
    char o[8];
    assert_int_equal(cal_tok_decode(t, &st, 300, o, 8), CAL_EINVAL);
    assert_int_equal(cal_tok_decode(t, &st, -1, o, 8), CAL_EINVAL);
    assert_null(cal_tok_piece(t, 300, NULL));
    /* too small an output buffer fails and leaves the state as it was */
    assert_int_equal(cal_tok_decode(t, &st, 0xe2, o, 8), 0);
    assert_int_equal(cal_tok_decode(t, &st, 'x', o, 2), CAL_ETOOBIG);
    assert_int_equal(st.npend, 1);
    assert_int_equal(cal_tok_decode(t, &st, 'x', o, 8), 4);
    cal_tok_close(&t);
    cal_tok_close(&t);
}

/* The byte vocabulary of a GGUF file caliper wrote prints ids from 259 on
 * as "[N]": 9 bytes from id 1000000 and 10 from 10000000, which a fixed
 * 8-byte slot per id overflowed (a heap write past the slot, and the next
 * id's text read back). Every width reads back whole, the last id
 * included. */
static void test_bytes_vocab_wide_ids(void **state)
{
    (void)state;
    static const struct { int vocab; int32_t ids[3]; } cases[] = {
        {1000001, {999999, 1000000, 1000000}},
        {1000002, {999999, 1000000, 1000001}},
        {10000001, {9999999, 10000000, 1000000}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cal_tokenizer *t = NULL;
        assert_int_equal(cal_tok_open_bytes(cases[c].vocab, 256, &t), CAL_OK);
        for (int k = 0; k < 3; k++) {
            int32_t id = cases[c].ids[k];
            char want[16];
            int wn = snprintf(want, sizeof want, "[%d]", (int)id);
            int len = -1;
            const char *p = cal_tok_piece(t, id, &len);
            assert_non_null(p);
            assert_int_equal(len, wn);
            assert_memory_equal(p, want, (size_t)wn);
            cal_tok_state st = {{0}, 0, 0};
            char out[CAL_TOK_DECODE_MAX];
            assert_int_equal(cal_tok_decode(t, &st, id, out, sizeof out), wn);
            assert_memory_equal(out, want, (size_t)wn);
        }
        /* text still goes one id per byte */
        int32_t ids[4];
        assert_int_equal(cal_tok_encode(t, "[10]", 4, ids, 4), 4);
        assert_int_equal(ids[0], '[');
        cal_tok_close(&t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_random_bytes),
        cmocka_unit_test(test_roundtrip_utf8_text),
        cmocka_unit_test(test_stream_decode_never_invalid),
        cmocka_unit_test(test_pieces_deterministic),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bytes_vocab_wide_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
