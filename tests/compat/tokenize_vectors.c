/* make compat: caliper's tokenizers against llama.cpp's test vectors. Reads
 * a vocabulary GGUF (llama.cpp's models/ggml-vocab-*.gguf), its .inp (texts
 * separated by a line "__ggml_vocab_test__") and .out (the expected ids, one
 * line per text), encodes each text as llama.cpp's test-tokenizer-0 does
 * (no BOS/EOS, special tokens not parsed) and prints every mismatch, then
 * "N/M exact". Each text's ids must also decode back to it (SentencePiece:
 * with the one space its prefix added). Exit 0 only when all M agree.
 *
 *   tokenize_vectors VOCAB.gguf        reads VOCAB.gguf.inp and VOCAB.gguf.out */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "engine/engine.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *q = realloc(b, 2 * cap + 1);
            if (!q) { free(b); b = NULL; break; }
            b = q;
            cap *= 2;
        }
    }
    fclose(f);
    if (b) b[n] = 0;
    *len = n;
    return b;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: tokenize_vectors VOCAB.gguf\n");
        return 2;
    }
    char why[512] = "", path[4096];
    cal_tokenizer *t;
    int rc = cal_tok_open_gguf(argv[1], &t, why, sizeof why);
    if (rc != CAL_OK) {
        fprintf(stderr, "tokenize_vectors: %s\n", why);
        return 1;
    }
    size_t ni, no;
    snprintf(path, sizeof path, "%s.inp", argv[1]);
    char *inp = slurp(path, &ni);
    snprintf(path, sizeof path, "%s.out", argv[1]);
    char *out = slurp(path, &no);
    if (!inp || !out) {
        fprintf(stderr, "tokenize_vectors: cannot read %s.inp / .out\n", argv[1]);
        return 1;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t pos = 0, opos = 0;
    int total = 0, good = 0;
    int cap = 1 << 20;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    while (pos < ni) {
        char *nx = strstr(inp + pos, sep);
        size_t end = nx ? (size_t)(nx - inp) : ni;
        /* the expected line */
        char *ol = out + opos;
        char *oe = strchr(ol, '\n');
        if (!oe) oe = out + no;
        opos = (size_t)(oe - out) + (oe < out + no);
        int want[65536], nw = 0;
        for (char *p = ol; p < oe && nw < 65536;) {
            while (p < oe && (*p == ' ' || *p == '\r')) p++;
            if (p >= oe) break;
            want[nw++] = (int)strtol(p, &p, 10);
        }
        int n = cal_tok_encode_ex(t, inp + pos, end - pos, 0, ids, cap);
        int same = n == nw;
        for (int i = 0; same && i < n; i++)
            same = ids[i] == want[i];
        /* the pieces put together give the text back */
        static char dec[1 << 22];
        size_t dl = 0;
        int spm = !strcmp(cal_tok_kind(t), "llama");
        for (int i = 0; i < n && dl < sizeof dec - 2048; i++) {
            int pl;
            const char *pc = cal_tok_piece(t, ids[i], &pl);
            memcpy(dec + dl, pc, (size_t)pl);
            dl += (size_t)pl;
        }
        size_t skip = spm && dl > 0 && dec[0] == ' ' ? 1 : 0;
        int back = n >= 0 && dl - skip == end - pos && !memcmp(dec + skip, inp + pos, end - pos);
        if (same && !back)
            printf("DECODE case %d: \"%.*s\" decodes to \"%.*s\"\n", total + 1,
                   (int)(end - pos > 200 ? 200 : end - pos), inp + pos,
                   (int)(dl > 200 ? 200 : dl), dec);
        same = same && back;
        total++;
        good += same;
        if (!same) {
            printf("MISMATCH case %d: \"%.*s\"\n  want:", total, (int)(end - pos > 200 ? 200 : end - pos),
                   inp + pos);
            for (int i = 0; i < nw; i++) printf(" %d", want[i]);
            printf("\n  got: ");
            if (n < 0) printf(" error %s", cal_strerror(n));
            for (int i = 0; i < n; i++) printf(" %d", ids[i]);
            printf("\n");
        }
        if (!nx) break;
        pos = end + sizeof sep - 1;
    }
    printf("%s: %d/%d exact\n", argv[1], good, total);
    free(ids);
    free(inp);
    free(out);
    cal_tok_close(&t);
    return good == total && total > 0 ? 0 : 1;
}
