/* bench/tokenize — what special tokens cost an encode, as ratios measured
 * in one run: text made of "x" S1 "y" S2 repeated (S1, S2 two of the
 * vocabulary's control tokens, e.g. <s> and </s>: 4.1 MB of them once held
 * serve's HTTP thread for two minutes) against plain prose of the same size
 * (data/prose.txt repeated) and against the same bytes with special tokens
 * not parsed. Two sizes, 1.44 MB and 4.14 MB.
 *
 *   bench/tokenize [VOCAB.gguf ...]
 *
 * Default vocabularies: llama.cpp's full test vocabularies where make compat
 * unpacked them (~/.cache/caliper/llama.cpp-VERSION/src/models: llama-spm,
 * llama-bpe, qwen2), else the cuts in tests/data/vocab. Then, against a
 * `caliper serve` opened in this process with the first vocabulary, the
 * same texts through POST /tokenize, while another thread asks GET /health
 * every 20 ms: the slowest /health answer during the special-token encodes
 * is printed beside the ratio.
 *
 * Every ratio is paired: its sides alternate within a round, and the
 * figure is the median of the rounds' ratios (least and greatest beside). */
#include <curl/curl.h>
#include <glob.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "engine/engine.h"
#include "server/server.h"

#define ROUNDS 5
static const size_t SIZES[] = {1440000, 4140000};

static char *prose;
static size_t prose_len;

static void load_prose(void)
{
    FILE *f = fopen("data/prose.txt", "rb");
    if (!f) {
        perror("data/prose.txt (run from the source tree)");
        exit(1);
    }
    prose = malloc(1 << 16);
    prose_len = fread(prose, 1, 1 << 16, f);
    fclose(f);
}

/* n bytes of unit repeated (the last copy cut) */
static char *repeat(const char *unit, size_t ul, size_t n)
{
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i += ul)
        memcpy(s + i, unit, i + ul <= n ? ul : n - i);
    s[n] = 0;
    return s;
}

/* Is id a special token whose text is matched whole: one id with special
 * parsing, more without? */
static int is_special(const cal_tokenizer *t, int32_t id, const char **p, int *len)
{
    int32_t one[4];
    *p = id >= 0 ? cal_tok_piece(t, id, len) : NULL;
    return *p && *len >= 2 && *len <= 512 &&
           cal_tok_encode_ex(t, *p, (size_t)*len, CAL_TOK_PARSE_SPECIAL, one, 4) == 1 &&
           one[0] == id && cal_tok_encode_ex(t, *p, (size_t)*len, 0, one, 4) != 1;
}

/* "x" S1 "y" S2 from two special tokens of t (BOS and EOS where they
 * qualify, else the first found), or NULL when it has fewer than two */
static char *special_unit(const cal_tokenizer *t, size_t *ul)
{
    int32_t got[2] = {-1, -1};
    int k = 0;
    for (int32_t i = -2; k < 2 && i < cal_tok_vocab(t); i++) {
        int32_t id = i == -2 ? cal_tok_bos(t) : i == -1 ? cal_tok_eos(t) : i;
        const char *p;
        int len;
        if (id != got[0] && is_special(t, id, &p, &len))
            got[k++] = id;
    }
    if (k < 2)
        return NULL;
    char *u = malloc(2 * 513);
    size_t n = 0;
    for (k = 0; k < 2; k++) {
        int len;
        const char *p = cal_tok_piece(t, got[k], &len);
        u[n++] = k ? 'y' : 'x';
        memcpy(u + n, p, (size_t)len);
        n += (size_t)len;
    }
    *ul = n;
    return u;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* one encode: seconds, and the ids in *count */
static double encode_s(const cal_tokenizer *t, const char *s, size_t n, int flags, int32_t *ids,
                       int cap, int *count)
{
    int64_t t0 = cal_now_ns();
    *count = cal_tok_encode_ex(t, s, n, flags, ids, cap);
    return (double)(cal_now_ns() - t0) / 1e9;
}

static void bench_vocab(const char *path)
{
    char why[300] = "";
    cal_tokenizer *t = NULL;
    if (cal_tok_open_gguf(path, &t, why, sizeof why) != CAL_OK) {
        printf("%s: %s\n", path, why);
        return;
    }
    size_t ul;
    char *unit = special_unit(t, &ul);
    if (!unit) {
        printf("%s: fewer than two control tokens, skipped\n", path);
        cal_tok_close(&t);
        return;
    }
    printf("\n%s (%s, %d tokens), unit \"%.*s\"\n", path, cal_tok_kind(t), cal_tok_vocab(t),
           (int)ul, unit);
    for (size_t z = 0; z < sizeof SIZES / sizeof SIZES[0]; z++) {
        size_t n = SIZES[z];
        char *sp = repeat(unit, ul, n), *pl = repeat(prose, prose_len, n);
        int cap = (int)(3 * n + 8);
        int32_t *ids = malloc((size_t)cap * sizeof *ids);
        double r_prose[ROUNDS], r_same[ROUNDS], ts[ROUNDS], tp[ROUNDS], tu[ROUNDS];
        int ns = 0, np = 0, nu = 0;
        for (int r = 0; r < ROUNDS; r++) {
            ts[r] = encode_s(t, sp, n, CAL_TOK_PARSE_SPECIAL, ids, cap, &ns);
            tp[r] = encode_s(t, pl, n, CAL_TOK_PARSE_SPECIAL, ids, cap, &np);
            tu[r] = encode_s(t, sp, n, 0, ids, cap, &nu);
            r_prose[r] = ts[r] / tp[r];
            r_same[r] = ts[r] / tu[r];
        }
        double lo_p = r_prose[0], hi_p = r_prose[0];
        for (int r = 1; r < ROUNDS; r++) {
            lo_p = r_prose[r] < lo_p ? r_prose[r] : lo_p;
            hi_p = r_prose[r] > hi_p ? r_prose[r] : hi_p;
        }
        printf("  %.2f MB: special %.0f ms (%d ids), prose %.0f ms (%d ids), the special "
               "text unparsed %.0f ms (%d ids)\n", (double)n / 1e6, median(ts, ROUNDS) * 1e3,
               ns, median(tp, ROUNDS) * 1e3, np, median(tu, ROUNDS) * 1e3, nu);
        printf("           special / prose %.2fx (%.2f-%.2f), special / unparsed %.2fx\n",
               median(r_prose, ROUNDS), lo_p, hi_p, median(r_same, ROUNDS));
        free(ids);
        free(sp);
        free(pl);
    }
    free(unit);
    cal_tok_close(&t);
}

/* ---- through serve's HTTP front ----------------------------------------- */

static size_t sink(void *p, size_t s, size_t n, void *u)
{
    (void)p;
    size_t *got = u;
    *got += s * n;
    return s * n;
}

static long post(const char *url, const char *body, size_t n, double *secs)
{
    CURL *h = curl_easy_init();
    size_t got = 0;
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &got);
    int64_t t0 = cal_now_ns();
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    *secs = (double)(cal_now_ns() - t0) / 1e9;
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return code;
}

typedef struct prober {
    char        url[128];
    atomic_int  on, stop;  /* on: 1 a special-token body is out, 2 prose */
    double      worst_s[3];   /* slowest /health while on was 1, 2 */
    int         n[3];
} prober;

static void *probe_health(void *arg)
{
    prober *p = arg;
    CURL *h = curl_easy_init();
    size_t got = 0;
    curl_easy_setopt(h, CURLOPT_URL, p->url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &got);
    while (!atomic_load(&p->stop)) {
        int on = atomic_load(&p->on);
        int64_t t0 = cal_now_ns();
        curl_easy_perform(h);
        double s = (double)(cal_now_ns() - t0) / 1e9;
        if (on && atomic_load(&p->on) == on) {
            p->worst_s[on] = s > p->worst_s[on] ? s : p->worst_s[on];
            p->n[on]++;
        }
        cal_sleep_ns(20 * 1000000, NULL);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static char *tokenize_body(const char *text, size_t n, size_t *len)
{
    json_t *o = json_object();
    json_object_set_new(o, "content", json_stringn(text, n));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    *len = strlen(s);
    return s;
}

static void bench_http(const char *path)
{
    cal_tokenizer *t = NULL;
    char why[300] = "";
    if (cal_tok_open_gguf(path, &t, why, sizeof why) != CAL_OK)
        return;
    size_t ul;
    char *unit = special_unit(t, &ul);
    int nv = cal_tok_vocab(t);
    cal_tok_close(&t);
    if (!unit)
        return;
    cal_server_config c = {0};
    cal_model_preset("tiny", &c.model);
    if (c.model.vocab < nv)
        c.model.vocab = nv;
    c.vocab_gguf = path;
    c.port = 0;
    c.max_queue = -1;
    cal_server *s = NULL;
    if (cal_server_open(&c, &s, why, sizeof why) != CAL_OK) {
        printf("serve: %s\n", why);
        free(unit);
        return;
    }
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/tokenize", cal_server_port(s));
    prober pr = {0};
    snprintf(pr.url, sizeof pr.url, "http://127.0.0.1:%d/health", cal_server_port(s));
    pthread_t th;
    pthread_create(&th, NULL, probe_health, &pr);
    printf("\nPOST /tokenize on caliper serve --vocab %s, GET /health every 20 ms beside it\n",
           path);
    for (size_t z = 0; z < sizeof SIZES / sizeof SIZES[0]; z++) {
        size_t n = SIZES[z], lb_s, lb_p;
        char *sp = repeat(unit, ul, n), *pl = repeat(prose, prose_len, n);
        char *bs = tokenize_body(sp, n, &lb_s), *bp = tokenize_body(pl, n, &lb_p);
        double ts[ROUNDS], tp[ROUNDS], r[ROUNDS];
        long cs = 0, cp = 0;
        memset(pr.worst_s, 0, sizeof pr.worst_s);
        memset(pr.n, 0, sizeof pr.n);
        for (int k = 0; k < ROUNDS; k++) {
            atomic_store(&pr.on, 1);
            cs = post(url, bs, lb_s, &ts[k]);
            atomic_store(&pr.on, 2);
            cp = post(url, bp, lb_p, &tp[k]);
            atomic_store(&pr.on, 0);
            r[k] = ts[k] / tp[k];
        }
        printf("  %.2f MB: special %.0f ms (HTTP %ld), prose %.0f ms (HTTP %ld): %.2fx\n"
               "           slowest /health: %.1f ms of %d during the special ones, %.1f ms of "
               "%d during prose\n", (double)n / 1e6, median(ts, ROUNDS) * 1e3, cs,
               median(tp, ROUNDS) * 1e3, cp, median(r, ROUNDS), pr.worst_s[1] * 1e3, pr.n[1],
               pr.worst_s[2] * 1e3, pr.n[2]);
        free(sp);
        free(pl);
        free(bs);
        free(bp);
    }
    atomic_store(&pr.stop, 1);
    pthread_join(th, NULL);
    cal_server_close(&s);
    free(unit);
}

int main(int argc, char **argv)
{
    load_prose();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    glob_t g = {0};
    const char *home = getenv("HOME");
    char pat[512];
    snprintf(pat, sizeof pat, "%s/.cache/caliper/llama.cpp-*/src/models/"
             "ggml-vocab-{llama-spm,llama-bpe,qwen2}.gguf", home ? home : "");
    int n = argc - 1;
    char **paths = argv + 1;
    static char *cuts[] = {"tests/data/vocab/llama-spm.gguf", "tests/data/vocab/llama-bpe.gguf",
                           "tests/data/vocab/qwen2.gguf"};
    if (n == 0) {
        if (glob(pat, GLOB_BRACE, NULL, &g) == 0 && g.gl_pathc > 0) {
            n = (int)g.gl_pathc;
            paths = g.gl_pathv;
        } else {
            n = 3;
            paths = cuts;
        }
    }
    printf("special-token text against plain text of the same size, encoder alone "
           "(median of %d paired rounds)\n", ROUNDS);
    for (int i = 0; i < n; i++)
        bench_vocab(paths[i]);
    bench_http(paths[0]);
    globfree(&g);
    free(prose);
    curl_global_cleanup();
    return 0;
}
