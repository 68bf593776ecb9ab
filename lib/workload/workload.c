/* Prompts of an exact token length: the project's texts (embedded from
 * data/ at build time), a unique nonce line per request, and a search for
 * the text prefix that the server's tokenizer counts as N tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/workload.h"

/* The texts live in data/ as plain files; the assembler embeds them so the
 * binary needs no data directory at run time. (Built from the repo root.) */
#ifdef __APPLE__                 /* Mach-O: a leading underscore, __TEXT,__const */
#define CAL_ASM_SYM(x) "_" #x
#define CAL_ASM_RODATA "__TEXT,__const"
#else
#define CAL_ASM_SYM(x) #x
#define CAL_ASM_RODATA ".rodata"
#endif
__asm__(".pushsection " CAL_ASM_RODATA "\n"
        ".globl " CAL_ASM_SYM(cal_data_prose) "\n"
        CAL_ASM_SYM(cal_data_prose) ":\n"
        ".incbin \"data/prose.txt\"\n"
        ".byte 0\n"
        ".globl " CAL_ASM_SYM(cal_data_code) "\n"
        CAL_ASM_SYM(cal_data_code) ":\n"
        ".incbin \"data/code.txt\"\n"
        ".byte 0\n"
        ".popsection\n");
extern const char cal_data_prose[];
extern const char cal_data_code[];

#define MAX_PROMPT_TOKENS (1 << 20)
#define CHARS_PER_TOKEN 4      /* the approximation when no tokenizer answers */
#define NUDGE_STEPS 24         /* characters tried either side of the search */
#define VERIFY_FIRST 32        /* prompts counted one by one before trusting the nonce shape */
#define NONCE_SAMPLES 8        /* nonce lines counted to find the shortest exact length */

struct cal_workload {
    cal_workload_config cfg;
    char  *base;        /* the source text repeated to cover the longest prompt */
    size_t base_len;
    size_t prefix;      /* characters of base that make prompt_tokens with a nonce */
    int    exact;       /* a tokenizer answered and the length is reachable */
    int    shortest;    /* shortest exact length: the nonce line alone (0: unknown) */
    int    missed;      /* prompts whose count is not prompt_tokens */
    int    calls;
    int    verified;    /* prompts counted so far */
    int    nudged;      /* some nonce needed a different prefix: count every prompt */
};

static const char *const NAMES[] = {"prose", "code", "random"};

const char *cal_content_name(cal_content c) { return (unsigned)c < 3 ? NAMES[c] : "unknown"; }

int cal_content_parse(const char *s, cal_content *out)
{
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, NAMES[i])) {
            *out = (cal_content)i;
            return CAL_OK;
        }
    return CAL_EINVAL;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Random lower-case words of 2–9 letters with occasional punctuation: text
 * no tokenizer has a merge for, so every token is paid for. */
static char random_text[24576];

const char *cal_content_text(cal_content c, size_t *len)
{
    const char *t;
    if (c == CAL_CONTENT_CODE) t = cal_data_code;
    else if (c == CAL_CONTENT_RANDOM) {
        if (!random_text[0]) {
            uint64_t s = 20261130;
            size_t k = 0;
            while (k + 12 < sizeof random_text) {
                int wl = 2 + (int)(splitmix(&s) % 8);
                for (int i = 0; i < wl; i++)
                    random_text[k++] = (char)('a' + splitmix(&s) % 26);
                uint64_t r = splitmix(&s) % 16;
                if (r == 0) random_text[k++] = '.';
                else if (r == 1) random_text[k++] = ',';
                random_text[k++] = r == 2 ? '\n' : ' ';
            }
            random_text[k] = '\0';
        }
        t = random_text;
    } else t = cal_data_prose;
    if (len) *len = strlen(t);
    return t;
}

/* The nonce line of request index: eight lower-case letters (26^8 values)
 * and a newline — short, so even a 16-token prompt is mostly text, and of
 * one shape, so every request's nonce costs about the same tokens. */
static int nonce_line(const cal_workload *w, uint64_t index, char *out, size_t n)
{
    if (!w->cfg.unique || n < 10) {
        out[0] = '\0';
        return 0;
    }
    uint64_t s = w->cfg.seed ^ (index * 0x9e3779b97f4a7c15ULL);
    uint64_t h = splitmix(&s);
    for (int i = 0; i < 8; i++, h /= 26) out[i] = (char)('a' + h % 26);
    out[8] = '\n';
    out[9] = '\0';
    return 9;
}

static char *build(const cal_workload *w, uint64_t index, size_t prefix)
{
    char nl[64];
    int k = nonce_line(w, index, nl, sizeof nl);
    if (prefix > w->base_len) prefix = w->base_len;
    char *p = malloc((size_t)k + prefix + 1);
    if (!p) return NULL;
    memcpy(p, nl, (size_t)k);
    memcpy(p + k, w->base, prefix);
    p[(size_t)k + prefix] = '\0';
    return p;
}

static int count_prefix(cal_workload *w, uint64_t index, size_t prefix, int *n)
{
    char *p = build(w, index, prefix);
    if (!p) return CAL_ENOMEM;
    w->calls++;
    int rc = w->cfg.count(w->cfg.count_ud, p, n);
    free(p);
    return rc;
}

/* The prefix with exactly want tokens, near a first guess: bisect to the
 * shortest prefix with >= want tokens, then look a few characters either
 * side (a merge at the cut can skip a count). *found = 0 when none has it
 * exactly; *prefix is then the nearest below. */
static int search(cal_workload *w, uint64_t index, int want, size_t *prefix, int *found)
{
    size_t lo = 0, hi = w->base_len;
    int n;
    int rc = count_prefix(w, index, hi, &n);
    if (rc) return rc;
    if (n < want) return CAL_ERANGE;    /* the base text is too short */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((rc = count_prefix(w, index, mid, &n))) return rc;
        if (n >= want) hi = mid;
        else lo = mid + 1;
    }
    if ((rc = count_prefix(w, index, lo, &n))) return rc;
    *found = n == want;
    *prefix = lo;
    for (size_t d = 1; !*found && d <= NUDGE_STEPS; d++) {
        if (lo >= d) {
            if ((rc = count_prefix(w, index, lo - d, &n))) return rc;
            if (n == want) { *prefix = lo - d; *found = 1; break; }
        }
        if (lo + d <= w->base_len) {
            if ((rc = count_prefix(w, index, lo + d, &n))) return rc;
            if (n == want) { *prefix = lo + d; *found = 1; break; }
        }
    }
    if (!*found && lo > 0) *prefix = lo - 1;
    return CAL_OK;
}

int cal_workload_open(const cal_workload_config *cfg, cal_workload **out)
{
    *out = NULL;
    if (!cfg || cfg->prompt_tokens < 1 || cfg->prompt_tokens > MAX_PROMPT_TOKENS ||
        (unsigned)cfg->content > CAL_CONTENT_RANDOM)
        return CAL_EINVAL;
    cal_workload *w = calloc(1, sizeof *w);
    if (!w) return CAL_ENOMEM;
    w->cfg = *cfg;
    size_t tl;
    const char *t = cal_content_text(cfg->content, &tl);
    /* cover the longest plausible prompt: a token is rarely over 8 chars */
    size_t need = (size_t)cfg->prompt_tokens * 8 + 64;
    if (need < tl) need = tl;
    w->base = malloc(need + 1);
    if (!w->base) { free(w); return CAL_ENOMEM; }
    while (w->base_len < need) {
        size_t k = tl < need - w->base_len ? tl : need - w->base_len;
        memcpy(w->base + w->base_len, t, k);
        w->base_len += k;
    }
    w->base[w->base_len] = '\0';

    int rc = CAL_EABSENT;
    if (cfg->count) {
        /* Every prompt starts with its nonce line: no prefix of the text
         * makes a prompt shorter than that line alone. Below it the length
         * cannot be reached; the prompts are the line alone, and say so. */
        int n0 = 1;
        rc = cfg->unique ? count_prefix(w, 0, 0, &n0) : CAL_OK;
        /* Near that length, nonces that tokenise longer decide it: take the
         * longest of a few (farther above, one count is enough). */
        for (uint64_t i = 1; rc == CAL_OK && cfg->unique && i < NONCE_SAMPLES &&
                             cfg->prompt_tokens < 4 * n0; i++) {
            int ni;
            rc = count_prefix(w, i, 0, &ni);
            if (rc == CAL_OK && ni > n0) n0 = ni;
        }
        if (rc == CAL_OK) {
            w->shortest = n0 > 1 ? n0 : 1;
            if (cfg->prompt_tokens < w->shortest) {
                w->prefix = 0;
                w->exact = 0;
            } else {
                int found = 0;
                rc = search(w, 0, cfg->prompt_tokens, &w->prefix, &found);
                if (rc == CAL_OK) w->exact = 1;
                if (rc == CAL_OK && !found) w->missed++;   /* only the nearest length */
            }
        }
    }
    if (rc == CAL_EABSENT) {
        char nl[64];
        int k = nonce_line(w, 0, nl, sizeof nl);
        long chars = (long)cfg->prompt_tokens * CHARS_PER_TOKEN - k;
        w->prefix = chars > 0 ? (size_t)chars : 0;
        w->exact = 0;
        rc = CAL_OK;
    }
    if (rc != CAL_OK) {
        cal_workload_close(&w);
        return rc;
    }
    *out = w;
    return CAL_OK;
}

void cal_workload_close(cal_workload **pw)
{
    if (!pw || !*pw) return;
    free((*pw)->base);
    free(*pw);
    *pw = NULL;
}

int cal_workload_exact(const cal_workload *w) { return w ? w->exact && !w->missed : 0; }
int cal_workload_shortest_exact(const cal_workload *w) { return w ? w->shortest : 0; }
int cal_workload_count_calls(const cal_workload *w) { return w ? w->calls : 0; }

int cal_workload_prompt(cal_workload *w, uint64_t index, char **out, int *n_tokens)
{
    *out = NULL;
    if (n_tokens) *n_tokens = -1;
    size_t prefix = w->prefix;
    /* Count each prompt until VERIFY_FIRST in a row needed no nudge: the
     * nonce has one shape (8 letters and a newline), so after that the
     * base prefix is trusted and no further round trips are spent. */
    if (w->exact && (w->nudged || w->verified < VERIFY_FIRST)) {
        int n;
        int rc = count_prefix(w, index, prefix, &n);
        if (rc) return rc;
        w->verified++;
        if (n != w->cfg.prompt_tokens) {
            /* this nonce tokenised differently: search near the base prefix */
            w->nudged = 1;
            int found = 0;
            if ((rc = search(w, index, w->cfg.prompt_tokens, &prefix, &found))) return rc;
            if (!found) {
                if ((rc = count_prefix(w, index, prefix, &n))) return rc;
                if (n != w->cfg.prompt_tokens) w->missed++;
                if (n_tokens) *n_tokens = n;
                *out = build(w, index, prefix);
                return *out ? CAL_OK : CAL_ENOMEM;
            }
        }
    }
    if (w->exact && n_tokens) *n_tokens = w->cfg.prompt_tokens;
    *out = build(w, index, prefix);
    return *out ? CAL_OK : CAL_ENOMEM;
}
