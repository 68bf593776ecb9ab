/* Text of a token length grown piece by piece: the chat scenario's system
 * block, messages and answers, a replayed turn's parts, and prompts of a
 * drawn length. One counter call learns the content's characters per token;
 * each piece is cut at that ratio and corrected once against the count of
 * the whole prompt (prompt lengths are then exact or within a token or two,
 * and always counted: the count, not the wish, is what is recorded). */
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/workload_traffic.h"
#include "lib/workload/traffic_internal.h"

#define LEARN_BYTES 4096

struct cal_textgen {
    const char *text;        /* the content class */
    size_t len;
    cal_count_tokens_fn count;
    void *ud;
    double cpt;              /* characters (bytes) per token */
    int calls;
    int sep;                 /* each appended piece starts with a newline and
                                ends on no whitespace: a seam a tokenizer keeps */
    int delta;               /* count the piece alone: total = base + piece + seam */
    int seam;                /* tokens the seam adds to base + piece (learnt) */
};

void cal_textgen_seams_(cal_textgen *g, int sep, int delta, int seam)
{
    g->sep = sep;
    g->delta = delta;
    g->seam = seam;
}

int cal_textgen_open(cal_content content, cal_count_tokens_fn count, void *ud, cal_textgen **out)
{
    *out = NULL;
    if ((unsigned)content > CAL_CONTENT_RANDOM) return CAL_EINVAL;
    cal_textgen *g = calloc(1, sizeof *g);
    if (!g) return CAL_ENOMEM;
    g->text = cal_content_text(content, &g->len);
    g->count = count;
    g->ud = ud;
    g->cpt = 4;
    if (count) {
        size_t k = g->len < LEARN_BYTES ? g->len : LEARN_BYTES;
        while (k > 0 && ((unsigned char)g->text[k] & 0xC0) == 0x80) k--;
        char *t = strndup(g->text, k);
        if (!t) { free(g); return CAL_ENOMEM; }
        int n = 0;
        g->calls++;
        int rc = count(ud, t, &n);
        free(t);
        if (rc == CAL_EABSENT) g->count = NULL;
        else if (rc) { free(g); return rc; }
        else if (n > 0) g->cpt = (double)k / n;
    }
    *out = g;
    return CAL_OK;
}

void cal_textgen_close(cal_textgen **g)
{
    if (!g) return;
    free(*g);
    *g = NULL;
}

double cal_textgen_chars_per_token(const cal_textgen *g) { return g->cpt; }
int cal_textgen_calls(const cal_textgen *g) { return g->calls; }
int cal_textgen_counting(const cal_textgen *g) { return g && g->count != NULL; }

int cal_textgen_count(cal_textgen *g, const char *text, int *n)
{
    *n = -1;
    if (!g->count) return CAL_OK;
    g->calls++;
    int rc = g->count(g->ud, text, n);
    if (rc == CAL_EABSENT) {   /* no tokenizer after all: estimates from here on */
        g->count = NULL;
        *n = -1;
        return CAL_OK;
    }
    return rc;
}

/* (*p)[keep..] gets `bytes` bytes of the content from offset (wrapping),
 * less a partial character at the end. */
static int put(const cal_textgen *g, char **p, size_t *len, size_t keep, size_t bytes,
               uint64_t offset)
{
    char *q = realloc(*p, keep + bytes + 8);
    if (!q) return CAL_ENOMEM;
    *p = q;
    size_t at = (size_t)(offset % g->len), w = keep;
    while (at < g->len && ((unsigned char)g->text[at] & 0xC0) == 0x80) at++;   /* start clean */
    if (g->sep && bytes > 0) {
        q[w++] = '\n';
        bytes--;
    }
    for (size_t i = 0; i < bytes; i++) {
        if (at >= g->len) at = 0;
        q[w++] = g->text[at++];
    }
    /* never end inside a character: drop a partial last one */
    size_t k = w, j = w;
    while (j > keep && ((unsigned char)q[j - 1] & 0xC0) == 0x80) j--;
    if (j > keep) {
        unsigned char lead = (unsigned char)q[j - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (w - (j - 1) != need) k = j - 1;
    }
    /* a piece that ends on whitespace would join the next piece's newline */
    while (g->sep && k > keep + 1 && (q[k - 1] == ' ' || q[k - 1] == '\n' || q[k - 1] == '\t'))
        k--;
    q[k] = '\0';
    *len = k;
    return CAL_OK;
}

/* The count of the whole prompt: counted whole, or (delta) the count of
 * the text before it plus the piece from keep counted alone. */
static int measure(cal_textgen *g, const char *prompt, size_t keep, int base_total, int *n)
{
    if (!g->delta || base_total < 0) return cal_textgen_count(g, prompt, n);
    int rc = cal_textgen_count(g, prompt + keep, n);
    if (rc == CAL_OK && *n >= 0) *n += base_total + g->seam;
    return rc;
}

int cal_textgen_append(cal_textgen *g, char **prompt, size_t *len, int base_total, int tokens,
                       uint64_t offset, int *total)
{
    *total = -1;
    size_t keep = *prompt ? *len : 0;
    if (tokens < 0) tokens = 0;
    size_t bytes = (size_t)(tokens * g->cpt + 0.5);
    int rc = put(g, prompt, len, keep, bytes, offset);
    if (rc || !g->count) return rc;
    int n;
    if ((rc = measure(g, *prompt, keep, base_total, &n))) return rc;
    if (n < 0 || base_total < 0 || n == base_total + tokens) {
        *total = n;
        return CAL_OK;
    }
    /* one correction at the learnt ratio; keep whichever lands nearer */
    long want = base_total + tokens;
    double fix = (double)bytes + (double)(want - n) * g->cpt;
    size_t bytes2 = fix > 0 ? (size_t)(fix + 0.5) : 0;
    if (bytes2 == bytes) {
        *total = n;
        return CAL_OK;
    }
    if ((rc = put(g, prompt, len, keep, bytes2, offset))) return rc;
    int n2;
    if ((rc = measure(g, *prompt, keep, base_total, &n2))) return rc;
    if (n2 >= 0 && labs(want - n2) <= labs(want - n)) {
        *total = n2;
        return CAL_OK;
    }
    if ((rc = put(g, prompt, len, keep, bytes, offset))) return rc;
    *total = n;
    return CAL_OK;
}
