/* make compat: caliper's side of the next-token agreement check. Opens a
 * GGUF file through the same path as `caliper serve --model` (config check,
 * mmap load, byte tokenizer), prefills each prompt in chunks of the server's
 * default size, and prints one JSON line per prompt: the prompt's token ids
 * and the top-K next-token ids with their probabilities (softmax over the
 * whole vocabulary, as llama-server's n_probs reports them).
 *
 *   next_token MODEL.gguf PROMPTS.txt [K [DTYPE]]  one prompt per line; "\n"
 *                                              in a line stands for a newline;
 *                                              DTYPE: the engine's format of
 *                                              every matrix (default: each
 *                                              held as the file stores it) */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "engine/engine.h"
#include "engine/gguf.h"

#define CHUNK 256

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: next_token MODEL.gguf PROMPTS.txt [K [DTYPE]]\n");
        return 2;
    }
    int K = argc > 3 ? atoi(argv[3]) : 5;
    cal_model_config c;
    char why[512];
    if (cal_gguf_model_config(argv[1], &c, why, sizeof why) != CAL_OK) {
        fprintf(stderr, "next_token: %s\n", why);
        return 1;
    }
    /* DTYPE converts every matrix, as serve's --dtype; without it each is
     * held as the file stores it */
    if (argc > 4 && (c.as_stored = 0, c.dtype = cal_dtype_parse(argv[4])) < 0) {
        fprintf(stderr, "next_token: DTYPE \"%s\" is not an engine format\n", argv[4]);
        return 2;
    }
    cal_engine *e = NULL;
    cal_tokenizer *tok = NULL;
    if (cal_engine_open(&c, 1, CHUNK, &e) != CAL_OK ||
        cal_tok_open_bytes(c.vocab, CAL_GGUF_EOS, &tok) != CAL_OK) {
        fprintf(stderr, "next_token: cannot open %s\n", argv[1]);
        return 1;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    float *logits = malloc(sizeof(float) * (size_t)c.vocab);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)c.max_ctx);
    char line[8192], text[8192];
    int status = 0;
    while (fgets(line, sizeof line, f)) {
        size_t n = 0;
        for (char *p = line; *p && *p != '\n'; p++) {
            if (p[0] == '\\' && p[1] == 'n') { text[n++] = '\n'; p++; }
            else text[n++] = *p;
        }
        if (n == 0)
            continue;
        int nt = cal_tok_encode(tok, text, n, ids, c.max_ctx);
        if (nt < 1) {
            fprintf(stderr, "next_token: prompt too long\n");
            status = 1;
            break;
        }
        for (int pos = 0; pos < nt; pos += CHUNK) {
            int m = nt - pos < CHUNK ? nt - pos : CHUNK;
            cal_step_entry en = {0, pos, m, ids + pos, pos + m == nt ? logits : NULL};
            if (cal_engine_step(e, &en, 1) != CAL_OK) {
                fprintf(stderr, "next_token: %s\n", cal_engine_last_error(e));
                return 1;
            }
        }
        /* softmax in double over the whole vocabulary */
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < c.vocab; i++)
            if (logits[i] > mx) mx = logits[i];
        for (int i = 0; i < c.vocab; i++)
            sum += exp((double)logits[i] - mx);
        json_t *o = json_object(), *ja = json_array(), *top = json_array();
        for (int i = 0; i < nt; i++)
            json_array_append_new(ja, json_integer(ids[i]));
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int i = 0; i < c.vocab; i++) {
                if (logits[i] == -INFINITY) continue;
                if (best < 0 || logits[i] > logits[best]) best = i;
            }
            json_t *t = json_object();
            json_object_set_new(t, "id", json_integer(best));
            json_object_set_new(t, "p", json_real(exp((double)logits[best] - mx) / sum));
            json_array_append_new(top, t);
            logits[best] = -INFINITY;
        }
        json_object_set_new(o, "prompt", json_stringn(text, n));
        json_object_set_new(o, "ids", ja);
        json_object_set_new(o, "top", top);
        char *s = json_dumps(o, JSON_COMPACT);
        puts(s);
        free(s);
        json_decref(o);
    }
    fclose(f);
    free(logits);
    free(ids);
    cal_tok_close(&tok);
    cal_engine_close(&e);
    return status;
}
