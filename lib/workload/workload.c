/* Prompts of an exact token length: the project's texts (embedded from
 * data/ at build time), a unique nonce line per request, and a search for
 * the text prefix that the server's tokenizer counts as N tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/util/c_locale.h"
#include "caliper/error.h"
#include "caliper/workload.h"
#include "lib/util/rng.h"

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
#define NONCE_SAMPLES 8        /* nonce lines counted to find the shortest exact length */
#define BLOCK_DEFAULT 1024     /* indices prepared at once without a hint */
#define BLOCK_PER_PROMPT 256   /* ... once every prompt is counted (progress between) */
#define IDS_CHUNK 4096         /* nonce lines tokenized in one call */
#define SAMPLE_FIRST 32        /* built prompts counted whole in the first block */
#define SAMPLE_BLOCK 8         /* ... and in every later one */
#define DELTA_SAMPLE 8         /* nonce lines counted alone to tie the batch to a prompt's start */
#define MAX_CUTS 64            /* distinct nonce-line lengths (8 letters: at most 9) */

/* The cut of the text for prompts whose nonce line has nonce_tokens
 * tokens: the whole prompt then counts count (prompt_tokens when found). */
typedef struct cut { int nonce_tokens; size_t prefix; int count; } cut;

struct cal_workload {
    cal_workload_config cfg;
    char  *base;        /* the source text repeated to cover the longest prompt */
    size_t base_len;
    size_t prefix;      /* characters of base that make prompt_tokens with nonce 0 */
    int    open_count;  /* the count of prompt 0 with that prefix */
    int    exact;       /* a tokenizer answered and the length is reachable */
    int    shortest;    /* shortest exact length: the nonce line alone (0: unknown) */
    int    missed;      /* prompts whose count is not prompt_tokens */
    int    calls;
    /* the construction (docs/workload.md) */
    int    per_prompt;  /* count every prompt: the sample disagreed, or asked */
    int    ids_bad;     /* nonce lines are counted alone (no ids, or they did not split) */
    int    delta_known, delta;   /* a line's count alone − its share of the batch */
    int    sampled;     /* prompts counted whole to prove the construction */
    int    blocks;      /* blocks prepared */
    char   note[300];
    cut    cuts[MAX_CUTS];
    int    n_cuts;
    uint64_t blk_first; /* the prepared block: indices [blk_first, + blk_n) */
    size_t blk_n, blk_cap;
    size_t *blk_prefix; /* [blk_cap] */
    int    *blk_count;  /* [blk_cap] the prompt's count */
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
                int wl = 2 + (int)(cal_splitmix64(&s) % 8);
                for (int i = 0; i < wl; i++)
                    random_text[k++] = (char)('a' + cal_splitmix64(&s) % 26);
                uint64_t r = cal_splitmix64(&s) % 16;
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
    uint64_t h = cal_splitmix64(&s);
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
#define GUESS_SPAN 48   /* characters either side of a guessed cut */
static int search(cal_workload *w, uint64_t index, int want, size_t guess, size_t *prefix,
                  int *found)
{
    size_t lo = 0, hi = w->base_len;
    int n, rc;
    /* a guess (0: none) brackets the bisection when both ends hold: a few
     * calls instead of a bisection of the whole text */
    if (guess > 0 && guess < w->base_len) {
        size_t a = guess > GUESS_SPAN ? guess - GUESS_SPAN : 0;
        size_t b = guess + GUESS_SPAN < hi ? guess + GUESS_SPAN : hi;
        if ((rc = count_prefix(w, index, b, &n))) return rc;
        if (n >= want) {
            hi = b;
            if ((rc = count_prefix(w, index, a, &n))) return rc;
            if (n < want) lo = a + 1;
        } else lo = b + 1;
    }
    if (hi == w->base_len) {
        if ((rc = count_prefix(w, index, hi, &n))) return rc;
        if (n < want) return CAL_ERANGE;    /* the base text is too short */
    }
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
    w->per_prompt = cfg->per_prompt;
    w->open_count = -1;
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
        int n0 = 1, l0 = 0;
        rc = cfg->unique ? count_prefix(w, 0, 0, &n0) : CAL_OK;
        l0 = n0;
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
                rc = search(w, 0, cfg->prompt_tokens, 0, &w->prefix, &found);
                if (rc == CAL_OK) w->exact = 1;
                if (rc == CAL_OK && found) w->open_count = cfg->prompt_tokens;
                else if (rc == CAL_OK) {
                    w->missed++;   /* only the nearest length */
                    rc = count_prefix(w, 0, w->prefix, &w->open_count);
                }
                /* the first cut: nonce 0's line alone has l0 tokens */
                if (rc == CAL_OK && cfg->unique)
                    w->cuts[w->n_cuts++] = (cut){l0, w->prefix, w->open_count};
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
    free((*pw)->blk_prefix);
    free((*pw)->blk_count);
    free(*pw);
    *pw = NULL;
}

int cal_workload_exact(const cal_workload *w) { return w ? w->exact && !w->missed : 0; }
int cal_workload_shortest_exact(const cal_workload *w) { return w ? w->shortest : 0; }
int cal_workload_count_calls(const cal_workload *w) { return w ? w->calls : 0; }
int cal_workload_sampled(const cal_workload *w) { return w ? w->sampled : 0; }
const char *cal_workload_note(const cal_workload *w) { return w && w->note[0] ? w->note : NULL; }

/* ---- the construction --------------------------------------------------- */

/* Count texts[0..n) (concurrently when the counter can). */
static int count_texts(cal_workload *w, const char *const *texts, size_t n, int *counts)
{
    w->calls += (int)n;
    if (w->cfg.count_many) return w->cfg.count_many(w->cfg.count_ud, texts, n, counts);
    for (size_t i = 0; i < n; i++) {
        int rc = w->cfg.count(w->cfg.count_ud, texts[i], &counts[i]);
        if (rc) return rc;
    }
    return CAL_OK;
}

/* The nonce lines of [first, first + n) counted alone, each its own call. */
static int lines_alone(cal_workload *w, uint64_t first, size_t n, const size_t *pick, int *L)
{
    char (*line)[16] = malloc((n ? n : 1) * sizeof *line);
    const char **tx = malloc((n ? n : 1) * sizeof *tx);
    int rc = line && tx ? CAL_OK : CAL_ENOMEM;
    for (size_t i = 0; rc == CAL_OK && i < n; i++) {
        nonce_line(w, first + (pick ? pick[i] : i), line[i], sizeof line[i]);
        tx[i] = line[i];
    }
    if (rc == CAL_OK) rc = count_texts(w, tx, n, L);
    free(line);
    free(tx);
    return rc;
}

/* The nonce lines of [first, first + n) in one text, "\n" first, so every
 * line follows a newline: its ids split at the newline's id (the text's
 * last) give each line's tokens. CAL_EABSENT (*why set) when they do not
 * split into n + 1 segments: the newline merges, or the counter has no ids. */
static int lines_batched(cal_workload *w, uint64_t first, size_t n, int *L, const char **why)
{
    char *tx = malloc(n * 9 + 2);
    if (!tx) return CAL_ENOMEM;
    tx[0] = '\n';
    size_t len = 1;
    for (size_t i = 0; i < n; i++) len += (size_t)nonce_line(w, first + i, tx + len, 16);
    tx[len] = '\0';
    int32_t *ids = NULL;
    int m = 0;
    w->calls++;
    int rc = w->cfg.token_ids(w->cfg.count_ud, tx, &ids, &m);
    free(tx);
    if (rc == CAL_EABSENT) *why = "the tokenizer answers counts but no token ids";
    if (rc) return rc;
    int32_t nl = m > 0 ? ids[m - 1] : -1;
    size_t seg = 0, k = 0;
    int ok = m > 0;
    for (int i = 0; ok && i < m; i++) {
        seg++;
        if (ids[i] != nl) continue;
        if (k > n) ok = 0;
        else if (k > 0) L[k - 1] = (int)seg;   /* segment 0 is the leading newline */
        k++;
        seg = 0;
    }
    free(ids);
    if (!ok || k != n + 1 || seg != 0) {
        *why = "the nonce lines' token ids do not split at the newline";
        return CAL_EABSENT;
    }
    return CAL_OK;
}

/* L[k]: the tokens of nonce line first + k at a prompt's start. */
static int nonce_tokens(cal_workload *w, uint64_t first, size_t n, int *L)
{
    int rc;
    const char *why = NULL;
    for (size_t at = 0; w->cfg.token_ids && !w->ids_bad && at < n; at += IDS_CHUNK) {
        size_t k = n - at < IDS_CHUNK ? n - at : IDS_CHUNK;
        rc = lines_batched(w, first + at, k, L + at, &why);
        if (rc == CAL_EABSENT) { w->ids_bad = 1; break; }
        if (rc) return rc;
    }
    if (w->cfg.token_ids && !w->ids_bad && !w->delta_known) {
        /* a line in the batch follows a newline; in a prompt it starts the
         * text: tie the two by counting a few lines alone, which must all
         * differ by one constant */
        size_t pick[DELTA_SAMPLE] = {0};
        int alone[DELTA_SAMPLE] = {0};
        size_t s = n < DELTA_SAMPLE ? n : DELTA_SAMPLE;
        for (size_t i = 0; i < s; i++) pick[i] = i * n / s;
        if ((rc = lines_alone(w, first, s, pick, alone))) return rc;
        w->delta = alone[0] - L[pick[0]];
        for (size_t i = 1; i < s; i++)
            if (alone[i] - L[pick[i]] != w->delta) {
                w->ids_bad = 1;
                why = "a nonce line counts differently alone than after a newline";
            }
        w->delta_known = !w->ids_bad;
    }
    if (w->cfg.token_ids && !w->ids_bad) {
        for (size_t i = 0; i < n; i++) L[i] += w->delta;
        return CAL_OK;
    }
    if (why && !w->note[0])
        cal_snprintf(w->note, sizeof w->note, "%s: each nonce line is counted with a call of "
                     "its own", why);
    return lines_alone(w, first, n, NULL, L);
}

/* The cut for prompts whose nonce line has lt tokens (rep: an index with
 * such a line, to search with). */
static int cut_for(cal_workload *w, uint64_t rep, int lt, const cut **out)
{
    for (int i = 0; i < w->n_cuts; i++)
        if (w->cuts[i].nonce_tokens == lt) { *out = &w->cuts[i]; return CAL_OK; }
    if (w->n_cuts == MAX_CUTS) return CAL_ERANGE;
    cut c = {lt, 0, 0};
    int found = 0, rc;
    if (lt >= w->cfg.prompt_tokens) {
        /* the line alone is the prompt (or already longer): nearest */
        if ((rc = count_prefix(w, rep, 0, &c.count))) return rc;
    } else {
        /* near the first cut: each token of line more is about cpt characters less */
        const cut *c0 = &w->cuts[0];
        double cpt = (double)c0->prefix / (double)(w->cfg.prompt_tokens - c0->nonce_tokens + 1);
        double g = (double)c0->prefix - (double)(lt - c0->nonce_tokens) * cpt;
        size_t guess = w->n_cuts > 0 && g > 1 ? (size_t)g : 0;
        if ((rc = search(w, rep, w->cfg.prompt_tokens, guess, &c.prefix, &found))) return rc;
        c.count = w->cfg.prompt_tokens;
        if (!found && (rc = count_prefix(w, rep, c.prefix, &c.count))) return rc;
    }
    w->cuts[w->n_cuts] = c;
    *out = &w->cuts[w->n_cuts++];
    return CAL_OK;
}

/* Count the built prompts of block offsets pick[0..n) whole; got[i] each. */
static int count_prompts(cal_workload *w, const size_t *pick, size_t n, int *got)
{
    char **p = calloc(n ? n : 1, sizeof *p);
    int rc = p ? CAL_OK : CAL_ENOMEM;
    for (size_t i = 0; rc == CAL_OK && i < n; i++)
        if (!(p[i] = build(w, w->blk_first + pick[i], w->blk_prefix[pick[i]]))) rc = CAL_ENOMEM;
    if (rc == CAL_OK) rc = count_texts(w, (const char *const *)p, n, got);
    for (size_t i = 0; p && i < n; i++) free(p[i]);
    free(p);
    return rc;
}

/* Every prompt of the block counted (concurrently), and searched for where
 * the count is off (one after another: the old cost, for the few). */
static int prepare_counted(cal_workload *w)
{
    size_t n = w->blk_n;
    size_t *all = calloc(n ? n : 1, sizeof *all);
    if (!all) return CAL_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        all[k] = k;
        w->blk_prefix[k] = w->prefix;
    }
    int rc = count_prompts(w, all, n, w->blk_count);
    free(all);
    for (size_t k = 0; rc == CAL_OK && k < n; k++) {
        if (w->blk_count[k] == w->cfg.prompt_tokens) continue;
        int found = 0;
        uint64_t index = w->blk_first + k;
        if ((rc = search(w, index, w->cfg.prompt_tokens, w->prefix, &w->blk_prefix[k], &found)))
            break;
        if (!found) rc = count_prefix(w, index, w->blk_prefix[k], &w->blk_count[k]);
        else w->blk_count[k] = w->cfg.prompt_tokens;
    }
    return rc;
}

/* Build [first, first + n) by construction and count a sample whole; a
 * sample off its expected count turns the workload to counting every
 * prompt (w->per_prompt, w->note). */
static int prepare_built(cal_workload *w)
{
    size_t n = w->blk_n;
    int *L = malloc((n ? n : 1) * sizeof *L);
    size_t *pick = calloc(SAMPLE_FIRST + MAX_CUTS, sizeof *pick);
    int *got = malloc((SAMPLE_FIRST + MAX_CUTS) * sizeof *got);
    int rc = L && pick && got ? CAL_OK : CAL_ENOMEM;
    if (rc == CAL_OK) rc = nonce_tokens(w, w->blk_first, n, L);
    int seen[MAX_CUTS] = {0};
    size_t ns = 0, s = w->blocks == 0 ? SAMPLE_FIRST : SAMPLE_BLOCK;
    if (s > n) s = n;
    for (size_t k = 0; rc == CAL_OK && k < n; k++) {
        const cut *c;
        if ((rc = cut_for(w, w->blk_first + k, L[k], &c))) break;
        w->blk_prefix[k] = c->prefix;
        w->blk_count[k] = c->count;
        /* the sample holds every nonce length the block has */
        int ci = (int)(c - w->cuts);
        if (!seen[ci]++ && ns < s + MAX_CUTS) pick[ns++] = k;
    }
    /* and prompts spread over the block */
    for (size_t i = 0; rc == CAL_OK && i < s; i++) pick[ns++] = i * n / s + (n / s) / 2;
    if (rc == CAL_OK) rc = count_prompts(w, pick, ns, got);
    size_t off = 0;
    for (size_t i = 0; rc == CAL_OK && i < ns; i++)
        if (got[i] != w->blk_count[pick[i]]) off++;
    if (rc == CAL_OK) w->sampled += (int)ns;
    if (rc == CAL_OK && off) {
        w->per_prompt = 1;
        cal_snprintf(w->note, sizeof w->note,
                     "%zu of %zu sampled prompts counted otherwise than built (the tokenizer merges "
                     "the nonce line into the text after it): every prompt is counted, one call "
                     "each", off, ns);
    }
    free(L);
    free(pick);
    free(got);
    return rc;
}

static int prepare_block(cal_workload *w, uint64_t first, size_t n)
{
    if (n == 0) n = 1;
    if (n > w->blk_cap) {
        size_t *pp = realloc(w->blk_prefix, n * sizeof *pp);
        if (pp) w->blk_prefix = pp;
        int *pc = realloc(w->blk_count, n * sizeof *pc);
        if (pc) w->blk_count = pc;
        if (!pp || !pc) return CAL_ENOMEM;
        w->blk_cap = n;
    }
    w->blk_first = first;
    w->blk_n = n;
    int rc = w->per_prompt ? CAL_OK : prepare_built(w);
    if (rc == CAL_OK && w->per_prompt) rc = prepare_counted(w);
    if (rc) w->blk_n = 0;
    else w->blocks++;
    return rc;
}

int cal_workload_prepare(cal_workload *w, uint64_t first, size_t n)
{
    if (!w) return CAL_EINVAL;
    if (!w->exact || !w->cfg.unique || n == 0) return CAL_OK;
    if (first >= w->blk_first && first + n <= w->blk_first + w->blk_n) return CAL_OK;
    return prepare_block(w, first, n);
}

int cal_workload_prompt(cal_workload *w, uint64_t index, char **out, int *n_tokens)
{
    *out = NULL;
    if (n_tokens) *n_tokens = -1;
    size_t prefix = w->prefix;
    int n = w->open_count;
    if (w->exact && w->cfg.unique) {
        if (index < w->blk_first || index >= w->blk_first + w->blk_n) {
            int rc = prepare_block(w, index, w->per_prompt ? BLOCK_PER_PROMPT : BLOCK_DEFAULT);
            if (rc) return rc;
        }
        prefix = w->blk_prefix[index - w->blk_first];
        n = w->blk_count[index - w->blk_first];
        if (n != w->cfg.prompt_tokens) w->missed++;
    }
    if (w->exact && n_tokens) *n_tokens = n;
    *out = build(w, index, prefix);
    return *out ? CAL_OK : CAL_ENOMEM;
}
