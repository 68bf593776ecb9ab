/* caliper reference engine — the BPE pre-tokenizers (engine/pretok.c).
 * Internal to the engine. */
#ifndef CALIPER_ENGINE_PRETOK_H
#define CALIPER_ENGINE_PRETOK_H
#include <stddef.h>

/* BPE pre-tokenizers (tokenizer.ggml.pre), as llama.cpp groups the names */
enum { CAL_PRE_NONE = 0, CAL_PRE_GPT2, CAL_PRE_LLAMA3, CAL_PRE_QWEN2 };

/* The split pattern of pre compiled into *re (a pcre2_code; free with
 * cal_pretok_free). CAL_EINVAL naming name (the file's tokenizer.ggml.pre)
 * when pre has no pattern; CAL_EINTERNAL with why when PCRE2 refuses it. */
int  cal_pretok_compile(int pre, const char *name, void **re, char *why, size_t why_len);
void cal_pretok_free(void *re);

#endif
