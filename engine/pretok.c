/* caliper reference engine — the BPE pre-tokenizers (tokenizer.ggml.pre):
 * llama.cpp's split patterns for the gpt-2, Llama 3 and Qwen2 families,
 * compiled with PCRE2 (UTF, Unicode properties, JIT where it is available).
 * The vocabulary reader compiles its file's (engine/vocab.c); the BPE
 * encoder matches with it (engine/tok_bpe.c). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/pretok.h"
#include "caliper/error.h"
#include <pcre2.h>
#include <stddef.h>

#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
           "\\x{202F}\\x{205F}\\x{3000}"
#define CONTRACT "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* tokenizer.ggml.pre -> pattern; the gpt-2 one ends in "|\s+" as llama.cpp's
 * splitter does (a lone space before a non-space is a word of its own) */
static const char *pattern(int pre)
{
    switch (pre) {
    case CAL_PRE_GPT2:
        return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
               "|[" WS "]+(?![^" WS "])|[" WS "]+";
    case CAL_PRE_LLAMA3:
        return CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+"
               "[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+";
    case CAL_PRE_QWEN2:
        return CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+"
               "[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+";
    default:
        return NULL;
    }
}

int cal_pretok_compile(int pre, const char *name, void **re_out, char *why, size_t why_len)
{
    *re_out = NULL;
    const char *pat = pattern(pre);
    if (!pat)
        return cal_why(why, why_len, CAL_EINVAL, "no pre-tokenizer pattern for \"%s\"",
                       name);
    int err;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &eoff,
                                   NULL);
    if (!re) {
        char msg[120];
        pcre2_get_error_message(err, (PCRE2_UCHAR *)msg, sizeof msg);
        return cal_why(why, why_len, CAL_EINTERNAL, "pre-tokenizer pattern, offset %zu: %s",
                       (size_t)eoff, msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  /* faster when available; optional */
    *re_out = re;
    return CAL_OK;
}

void cal_pretok_free(void *re)
{
    if (re)
        pcre2_code_free(re);
}
