/* bench/engine — the reference engine against its own rooflines, measured in
 * one run on this machine, for each weight format: decode at batch 1 vs
 * bytes per token ÷ read bandwidth, prefill vs FLOPs ÷ OpenBLAS SGEMM rate at
 * the same shape, aggregate decode at batch 1, 2, 4, 8, 16 as ratios to batch
 * 1, the batching gain at 8 as `caliper calc batching-gain` predicts it, and
 * llama.cpp's llama-bench on the same weights where make compat built it.
 * Usage: bench/engine [preset] [prefill_tokens] [rounds] [formats]
 * (formats: comma-separated, default f32,f16,bf16,q8_0,q4_0,q4_k,q6_k;
 * also q4_k_m: llama.cpp's Q4_K_M mixture, written as a GGUF file and
 * held as stored, Q4_K and Q6_K, by both engines), or
 *        bench/engine FILE.gguf[,FILE.gguf…] [prefill_tokens] [rounds]
 * (GGUF files of one shape, as llama.cpp's tools write them: each held as
 * stored, as `caliper serve --model` holds it, and llama-bench on the very
 * file).
 *
 * Every ratio is paired: its two sides alternate step by step, in every
 * round, and the figure printed is the median of the rounds' ratios. On a
 * shared host the memory bandwidth and the clock drift by tens of per cent
 * within a second; a ratio of two bests taken at different moments moved by
 * 1.5x from run to run, a paired one cannot drift that way. */
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/formulas.h"
#include "engine/engine.h"
#include "engine/gguf.h"
#include "engine/internal.h"
#include "engine/kernels.h"
#include "engine/pool.h"
#include <cblas.h>
#include <glob.h>
#include <jansson.h>
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A round runs, per format, STEPS read passes alternating with STEPS
 * batch-1 steps, then STEPS turns of one step at each batch size, then a
 * prefill (measure). */
enum { NB = 5, MAXB = 16, STEPS = 16, CTX0 = 32, MAXR = 20 };
static const int batches[NB] = {1, 2, 4, 8, 16};

typedef struct read_job {
    const char *p;
    size_t n;
    uint64_t sum[256];
} read_job;

static void read_part(void *arg, int tid, int nt)
{
    read_job *j = arg;
    size_t part = j->n / (size_t)nt & ~(size_t)63;
    j->sum[tid] += cal_k_read_bytes(j->p + (size_t)tid * part, part);
}

static void *big_alloc(size_t n)
{
    char *a = cal_engine_huge_alloc(n);
    if (a)
        memset(a, 1, n);
    return a;
}

/* Read bandwidth (bytes/s) over n bytes, passes times, on the engine's own
 * threads (each its share, with the same vector loads as the decode
 * kernels): decode reads weights and writes almost nothing, so a read test is
 * its roofline (a copy test would count writes the engine never makes). Over
 * a buffer of the format's bytes per token, read again and again as decode
 * reads its weights step after step, the caches hold what they would hold of
 * the weights: the roof of that format's decode, not of a DRAM stream.
 * Returns the seconds, the bytes read in *bytes. */
static double read_seconds(cal_engine *e, const char *buf, size_t n, int passes, double *bytes)
{
    read_job j = {buf, n, {0}};
    int nt = cal_pool_threads(cal_engine_pool(e));
    int64_t t0 = cal_now_ns();
    for (int p = 0; p < passes; p++)
        cal_pool_run(cal_engine_pool(e), read_part, &j);
    double s = (double)(cal_now_ns() - t0) / 1e9;
    uint64_t sink = 0;
    for (int i = 0; i < nt; i++)
        sink += j.sum[i];
    *bytes = (double)(n / (size_t)nt & ~(size_t)63) * nt * passes;
    return sink == 42 ? s + 1e-12 : s; /* the sum is used: reads stay */
}

/* SGEMM FLOP rate at the prefill's dominant shape: M = tokens, the FFN
 * up-projection (K = dim, N = 2·ffn) as the engine calls it. */
static double sgemm_rate(int m, int n, int k, double flops)
{
    float *a = malloc(sizeof(float) * (size_t)m * k);
    float *b = malloc(sizeof(float) * (size_t)n * k);
    float *c = malloc(sizeof(float) * (size_t)m * n);
    if (!a || !b || !c) {
        free(a); free(b); free(c);
        return 0;
    }
    for (size_t i = 0; i < (size_t)m * k; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)n * k; i++)
        b[i] = (float)(i % 5) * 0.1f;
    int reps = (int)(flops / (2.0 * m * n * k)) + 1;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k,
                0.0f, c, n); /* warm-up */
    int64_t t0 = cal_now_ns();
    for (int rep = 0; rep < reps; rep++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k,
                    0.0f, c, n);
    double best = 2.0 * m * n * k * reps / ((double)(cal_now_ns() - t0) / 1e9);
    free(a); free(b); free(c);
    return best;
}

static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median, least and greatest of v[0..n−1] (n ≤ MAXR) */
typedef struct spread { double med, lo, hi; } spread;
static spread spread_of(const double *v, int n)
{
    double t[MAXR];
    memcpy(t, v, sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, cmpd);
    return (spread){n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2, t[0], t[n - 1]};
}

typedef struct fmt_run {
    int dt;
    int mix;               /* q4_k_m: the GGUF is the Q4_K_M mixture */
    const char *name;      /* the format as given, or the file's name */
    const char *path;      /* a GGUF file given, held as stored; NULL: a preset */
    cal_engine *e;
    double bpt;            /* weight bytes per decode token */
    char *rbuf;            /* bpt bytes, read for the roofline */
    char gguf[256];        /* the same weights for llama-bench, or "" */
    /* per round */
    double roof_bw[MAXR];  /* read bandwidth over the format's bytes per token */
    double cold[MAXR];     /* batch-1 tok/s, its steps alternating with the read */
    double pct[MAXR];      /* cold ÷ (roof_bw ÷ bpt) */
    double pf[MAXR];       /* prefill tokens/s */
    double pf_pct[MAXR];   /* of the SGEMM roofline measured in the round */
    double agg[MAXR][NB];  /* aggregate decode tok/s at batches[] */
    double x[MAXR][NB];    /* Bn ÷ B1, their steps alternating */
    double lpp[MAXR], ltg[MAXR]; /* llama-bench, run right after; 0 if it failed */
} fmt_run;

static int step1(cal_engine *e, int slot, int pos, const int32_t *tok, int n, float *lg)
{
    cal_step_entry s = {slot, pos, n, tok, lg};
    return cal_engine_step(e, &s, 1);
}

/* Seconds for one decode step at batch b, step i of a window from context
 * depth pos: every sequence at its own depth (attention over different
 * lengths in one step, as a server's batch is); each window rewinds to the
 * same depths. −1 when the step fails. */
static double decode_step(cal_engine *e, int b, int i, const int32_t *tok, int pos, float *lg)
{
    int vocab = cal_engine_config(e)->vocab;
    cal_step_entry en[MAXB];
    for (int s = 0; s < b; s++)
        en[s] = (cal_step_entry){s, pos + s + i, 1, &tok[s], lg + (size_t)s * vocab};
    int64_t t0 = cal_now_ns();
    if (cal_engine_step(e, en, b) != CAL_OK)
        return -1;
    return (double)(cal_now_ns() - t0) / 1e9;
}

/* One round of one format. The two sides of each ratio alternate step by
 * step, so both see the same machine within milliseconds:
 *  - the roofline: a pass of the read test over the format's bytes per
 *    token, then a decode step at batch 1, STEPS times; each evicts the
 *    other's bytes from the caches, so both read from memory alike;
 *  - the batches: a step at 1, 2, 4, 8, 16 in turn, STEPS times; each step
 *    finds the weights where the step before left them, as in a server's
 *    run of steps.
 * Then the prefill. */
static int measure(fmt_run *f, int r, const int32_t *tok, int n_prefill, double pf_roof,
                   float *lg)
{
    cal_engine *e = f->e;
    double t_read = 0, t_cold = 0, t[NB] = {0}, bytes = 0, b;
    for (int i = 0; i < STEPS; i++) {
        t_read += read_seconds(e, f->rbuf, (size_t)f->bpt, 1, &b);
        bytes += b;
        double s = decode_step(e, 1, i, tok, CTX0, lg);
        if (s < 0)
            return -1;
        t_cold += s;
    }
    f->roof_bw[r] = bytes / t_read;
    f->cold[r] = STEPS / t_cold;
    f->pct[r] = f->cold[r] * f->bpt / f->roof_bw[r];
    for (int i = 0; i < STEPS; i++)
        for (int bi = 0; bi < NB; bi++) {
            double s = decode_step(e, batches[bi], i, tok, CTX0, lg);
            if (s < 0)
                return -1;
            t[bi] += s;
        }
    for (int bi = 0; bi < NB; bi++) {
        f->agg[r][bi] = batches[bi] * STEPS / t[bi];
        f->x[r][bi] = batches[bi] * t[0] / t[bi];
    }
    int64_t t0 = cal_now_ns();
    if (step1(e, MAXB, 0, tok, n_prefill, lg) != CAL_OK)
        return -1;
    f->pf[r] = n_prefill / ((double)(cal_now_ns() - t0) / 1e9);
    f->pf_pct[r] = f->pf[r] / pf_roof;
    return 0;
}

/* llama-bench on one GGUF file: its JSON output's prompt and generation
 * rates (tok/s, the best of its repetitions). 0 when it fails. */
static int llama_bench(const char *bin, const char *model, int n_prompt, int n_gen,
                       int threads, int reps, double *pp, double *tg)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' -m '%s' -p %d -n %d -t %d -r %d -o json 2>/dev/null", bin,
             model, n_prompt, n_gen, threads, reps);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 0;
    enum { CAP = 1 << 20 };
    char *buf = malloc(CAP);
    size_t n = 0, got;
    while (buf && n < CAP - 1 && (got = fread(buf + n, 1, CAP - 1 - n, f)) > 0)
        n += got;
    int rc = pclose(f);
    if (!buf || rc != 0) {
        free(buf);
        return 0;
    }
    buf[n] = 0;
    json_error_t err;
    json_t *root = json_loads(buf, 0, &err);
    free(buf);
    *pp = *tg = 0;
    size_t i;
    json_t *run;
    json_array_foreach(root, i, run) {
        /* the best of its repetitions, as caliper's figures are best of rounds */
        double ts = 0;
        size_t k;
        json_t *v;
        json_array_foreach(json_object_get(run, "samples_ts"), k, v)
            ts = json_number_value(v) > ts ? json_number_value(v) : ts;
        if (ts == 0)
            ts = json_number_value(json_object_get(run, "avg_ts"));
        if (json_integer_value(json_object_get(run, "n_prompt")) > 0)
            *pp = ts;
        else if (json_integer_value(json_object_get(run, "n_gen")) > 0)
            *tg = ts;
    }
    json_decref(root);
    return *pp > 0 && *tg > 0;
}

/* make compat's llama-bench (PREFIX/bin when installed, PREFIX/build/bin as
 * built) into bin, or 0 with the pattern looked for in bin */
static int find_llama_bench(char *bin, size_t cap)
{
    const char *home = getenv("HOME");
    const char *where[] = {"bin", "build/bin"};
    for (int i = 0; i < 2; i++) {
        glob_t g;
        snprintf(bin, cap, "%s/.cache/caliper/*/%s/llama-bench", home ? home : "", where[i]);
        if (glob(bin, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
            snprintf(bin, cap, "%s", g.gl_pathv[0]);
            globfree(&g);
            return 1;
        }
        globfree(&g);
    }
    return 0;
}

/* "median (least–greatest)" of a per-round ratio, into buf */
static const char *fmt_spread(char *buf, size_t cap, spread s)
{
    snprintf(buf, cap, "%.2f (%.2f–%.2f)", s.med, s.lo, s.hi);
    return buf;
}

/* the widest name of the runs (the tables' first column) */
static int namew = 5;

int main(int argc, char **argv)
{
    setlocale(LC_NUMERIC, "C");
    const char *preset = argc > 1 ? argv[1] : "base";
    int n_prefill = argc > 2 ? atoi(argv[2]) : 512;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    /* GGUF files in place of a preset: their own shape and formats */
    int from_files = strstr(preset, ".gguf") != NULL;
    static char files[4096];
    char fmts[64];
    snprintf(fmts, sizeof fmts, "%s", argc > 4 ? argv[4] : "f32,f16,bf16,q8_0,q4_0,q4_k,q6_k");
    cal_model_config c;
    char why[512];
    if (from_files) {
        snprintf(files, sizeof files, "%s", preset);
        static char first[1024];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(files, ","), files);
        if (cal_gguf_model_config(first, &c, why, sizeof why) != CAL_OK) {
            fprintf(stderr, "bench/engine: %s\n", why);
            return 2;
        }
        const char *base = strrchr(first, '/');
        preset = base ? base + 1 : first;
        c.max_ctx = 1 << 20;   /* the positions this bench asks for, set per engine */
    } else if (cal_model_preset(preset, &c) != CAL_OK) {
        fprintf(stderr, "bench/engine: unknown preset \"%s\"\n", preset);
        return 2;
    }
    if (rounds < 1 || rounds > MAXR || n_prefill < 1 || n_prefill > c.max_ctx ||
        CTX0 + MAXB + STEPS > c.max_ctx) {
        fprintf(stderr, "bench/engine: prefill %d / rounds %d (1–%d) do not fit max_ctx %d\n",
                n_prefill, rounds, MAXR, c.max_ctx);
        return 2;
    }
    enum { MAXF = 16 };
    static fmt_run runs[MAXF];
    int nf = 0;
    if (from_files) {
        for (char *save = NULL, *t = strtok_r(files, ",", &save); t && nf < MAXF;
             t = strtok_r(NULL, ",", &save)) {
            const char *base = strrchr(t, '/');
            runs[nf++] = (fmt_run){.dt = -1, .path = t, .name = base ? base + 1 : t};
        }
    } else {
        for (char *save = NULL, *t = strtok_r(fmts, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int mix = !strcmp(t, "q4_k_m");
            int dt = mix ? CAL_DTYPE_Q4_K : cal_dtype_parse(t);
            if (dt < 0 || nf == MAXF) {
                fprintf(stderr, "bench/engine: formats: \"%s\" is not an engine format or "
                        "q4_k_m\n", t);
                return 2;
            }
            runs[nf++] = (fmt_run){.dt = dt, .mix = mix, .name = mix ? "q4_k_m" : cal_dtype_name(dt)};
        }
    }
    for (int i = 0; i < nf; i++)
        if ((int)strlen(runs[i].name) > namew)
            namew = (int)strlen(runs[i].name) > 40 ? 40 : (int)strlen(runs[i].name);
    /* OpenBLAS chose its kernels at load time; if it took this CPU for a
     * generic one, run again with the right kernels (measure the engine, not
     * a mis-detected library). */
    const char *advice = cal_engine_blas_coretype_advice();
    if (advice && !getenv("OPENBLAS_CORETYPE")) {
        fprintf(stderr, "bench/engine: OpenBLAS chose %s kernels; re-running with "
                "OPENBLAS_CORETYPE=%s\n", cal_engine_blas_core(), advice);
        setenv("OPENBLAS_CORETYPE", advice, 1);
        execv("/proc/self/exe", argv);
    }
    int threads = openblas_get_num_threads();
    if (threads > 64)
        threads = 64;
    double load0 = loadavg();

    float *lg = malloc(sizeof(float) * (size_t)c.vocab * MAXB);
    /* decode slot s holds CTX0 + s + STEPS tokens taken from tok + s */
    int fill_max = CTX0 + MAXB + STEPS, n_tok = n_prefill + fill_max + MAXB;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n_tok);
    if (!lg || !tok)
        return 1;
    for (int i = 0; i < n_tok; i++)
        tok[i] = (int32_t)((i * 2654435761u) % (unsigned)c.vocab);
    /* llama.cpp on the same shape needs its build (make compat) and a GGUF of
     * this model: the files given, the folder given, or written now into a
     * temporary one (a few seconds) and removed at the end; say which is
     * missing rather than print nothing. A q4_k_m run is always a file:
     * caliper holds the mixture as stored, as llama.cpp does. */
    char lbin[1024], tmpdir[64] = "", lwhy[1400] = "";
    int have = find_llama_bench(lbin, sizeof lbin);
    const char *gguf = from_files ? NULL : getenv("CALIPER_BENCH_GGUF_DIR");
    int want_tmp = !from_files && !gguf && have;
    for (int i = 0; i < nf && !from_files && !gguf; i++)
        want_tmp |= runs[i].mix;
    if (!have)
        snprintf(lwhy, sizeof lwhy, "not built (%s absent; make compat builds it)", lbin);
    if (want_tmp) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/caliper-bench-gguf-XXXXXX");
        if (mkdtemp(tmpdir)) {
            gguf = tmpdir;
        } else {
            tmpdir[0] = 0;
            snprintf(lwhy, sizeof lwhy, "no temporary folder for the GGUF files; set "
                     "CALIPER_BENCH_GGUF_DIR to a folder of %s-<dtype>.gguf files", c.name);
            have = 0;
        }
    }
    for (int i = 0; i < nf; i++) {
        cal_model_config ci = c;
        if (runs[i].path) {
            if (cal_gguf_model_config(runs[i].path, &ci, why, sizeof why) != CAL_OK) {
                fprintf(stderr, "bench/engine: %s\n", why);
                return 2;
            }
            if (ci.dim != c.dim || ci.ffn_dim != c.ffn_dim || ci.n_layers != c.n_layers ||
                ci.vocab != c.vocab || ci.n_experts != c.n_experts) {
                fprintf(stderr, "bench/engine: %s: not the shape of the first file\n",
                        runs[i].path);
                return 2;
            }
            snprintf(runs[i].gguf, sizeof runs[i].gguf, "%s", runs[i].path);
        } else {
            ci.dtype = runs[i].dt;
        }
        /* the positions this bench uses, not the file's context_length */
        ci.max_ctx = (n_prefill > fill_max ? n_prefill : fill_max) + MAXB;
        int64_t t0 = cal_now_ns();
        /* MAXB decode slots plus one for the prefill */
        int rc = cal_engine_open(&ci, MAXB + 1, n_prefill > fill_max ? n_prefill : fill_max,
                                 &runs[i].e);
        if (rc == CAL_EINVAL && argc <= 4 && !from_files) {
            /* a default format the preset's shapes do not fit (k-quants
             * need rows in multiples of 256): say so, bench the rest */
            fprintf(stderr, "bench/engine: %s skipped: preset %s does not fit it (%s)\n",
                    cal_dtype_name(ci.dtype), preset, cal_strerror(rc));
            memmove(runs + i, runs + i + 1, sizeof runs[0] * (size_t)(nf - i - 1));
            nf--, i--;
            continue;
        }
        if (rc != CAL_OK) {
            fprintf(stderr, "bench/engine: open %s: %s\n", runs[i].name, cal_strerror(rc));
            return 1;
        }
        if (!from_files && gguf) {
            /* the same weights as a GGUF file; q4_k_m: held from it */
            snprintf(runs[i].gguf, sizeof runs[i].gguf, "%s/%s-%s.gguf", gguf, c.name,
                     runs[i].name);
            if (tmpdir[0] && cal_gguf_export(runs[i].e, runs[i].gguf,
                                             runs[i].mix ? CAL_GGUF_MIX_Q4_K_M : runs[i].dt,
                                             why, sizeof why) != CAL_OK) {
                fprintf(stderr, "bench/engine: cannot write %s: %s\n", runs[i].gguf, why);
                return 1;
            }
            if (runs[i].mix) {
                cal_engine_close(&runs[i].e);
                cal_model_config cm;
                if (cal_gguf_model_config(runs[i].gguf, &cm, why, sizeof why) != CAL_OK) {
                    fprintf(stderr, "bench/engine: %s\n", why);
                    return 1;
                }
                cm.max_ctx = ci.max_ctx;
                if (cal_engine_open(&cm, MAXB + 1, n_prefill > fill_max ? n_prefill : fill_max,
                                    &runs[i].e) != CAL_OK) {
                    fprintf(stderr, "bench/engine: open %s as stored failed\n", runs[i].gguf);
                    return 1;
                }
            }
        }
        runs[i].bpt = (double)cal_engine_decode_bytes_per_token(runs[i].e);
        runs[i].rbuf = big_alloc((size_t)runs[i].bpt);
        if (!runs[i].rbuf) {
            fprintf(stderr, "bench/engine: no memory for the %s roofline\n", runs[i].name);
            return 1;
        }
        fprintf(stderr, "bench/engine: %s open in %.2f s\n", runs[i].name,
                (double)(cal_now_ns() - t0) / 1e9);
        for (int s = 0; s < MAXB; s++)
            if (step1(runs[i].e, s, 0, tok + s, CTX0 + s + STEPS, NULL) != CAL_OK) {
                fprintf(stderr, "bench/engine: fill: %s\n", cal_engine_last_error(runs[i].e));
                return 1;
            }
    }

    printf("%s %s: %.1f M params, %d engine threads, kernels %s, OpenBLAS %s, "
           "load average %.2f\n", from_files ? "file" : "preset", from_files ? preset : c.name,
           cal_model_n_params(&c) / 1e6, threads,
           cal_k_isa(), cal_engine_blas_core(), load0);
    if (advice && getenv("OPENBLAS_CORETYPE"))
        printf("note: OPENBLAS_CORETYPE=%s in the environment holds OpenBLAS to %s kernels; this "
               "CPU runs %s's (unset it to let OpenBLAS choose): prefill and the SGEMM roofline "
               "below are %s's\n", getenv("OPENBLAS_CORETYPE"), cal_engine_blas_core(), advice,
               cal_engine_blas_core());

    /* Rounds: each measures the SGEMM roofline, then every format in turn:
     * its read roofline, its batches, its prefill, and llama-bench on the
     * same weights. Each ratio pairs figures of one round. */
    int f2 = 2 * c.ffn_dim;
    double pf_flops = 0, gemm[MAXR], dram[MAXR];
    for (int p = 0; p < n_prefill; p++)
        pf_flops += cal_model_flops_per_token(&c, p) - 2.0 * c.vocab * c.dim;
    pf_flops += 2.0 * c.vocab * c.dim; /* logits for the last token only */
    size_t dram_n = (size_t)1 << 30;
    char *dram_buf = big_alloc(dram_n);
    if (!dram_buf)
        return 1;
    for (int r = 0; r < rounds; r++) {
        /* SGEMM with OpenBLAS's own threading on every core; the engines are
         * idle and run OpenBLAS single-threaded inside their own pools.
         * OpenBLAS's threads spin a while after it: the 1 GiB read taken
         * right after read 28 GB/s against 56 after a pause. */
        openblas_set_num_threads(threads);
        gemm[r] = sgemm_rate(n_prefill, f2, c.dim, pf_flops);
        openblas_set_num_threads(1);
        usleep(500000);
        double dn, ds = read_seconds(runs[0].e, dram_buf, dram_n, 2, &dn);
        dram[r] = dn / ds;
        for (int i = 0; i < nf; i++) {
            if (measure(&runs[i], r, tok, n_prefill, gemm[r] / (pf_flops / n_prefill), lg) != 0) {
                fprintf(stderr, "bench/engine: step failed: %s\n",
                        cal_engine_last_error(runs[i].e));
                return 1;
            }
            if (have && runs[i].gguf[0] &&
                !llama_bench(lbin, runs[i].gguf, n_prefill, STEPS * 4, threads, 1,
                             &runs[i].lpp[r], &runs[i].ltg[r]))
                runs[i].lpp[r] = runs[i].ltg[r] = 0;
        }
    }
    free(dram_buf);
    double load1 = loadavg();
    spread sg = spread_of(gemm, rounds), sd = spread_of(dram, rounds);
    printf("SGEMM %.1f GFLOP/s at M=%d N=%d K=%d (%.1f–%.1f); read bandwidth streaming 1 GiB "
           "%.1f GB/s (%.1f–%.1f), %d threads; medians of %d rounds; load average %.2f at the "
           "end\n", sg.med / 1e9, n_prefill, f2, c.dim, sg.lo / 1e9, sg.hi / 1e9, sd.med / 1e9,
           sd.lo / 1e9, sd.hi / 1e9, threads, rounds, load1);
    printf("\n%-*s %8s | %8s %8s %11s | %9s %5s | %8s %8s %8s %8s %8s | %5s %5s %5s %5s\n",
           namew, "dtype", "MB/tok", "roof", "B1 cold", "% (range)", "pf tok/s", "%", "B1", "B2",
           "B4", "B8", "B16", "x2", "x4", "x8", "x16");
    spread xs[CAL_DTYPE_COUNT][NB], pcts[CAL_DTYPE_COUNT], roofs[CAL_DTYPE_COUNT];
    double aggm[CAL_DTYPE_COUNT][NB];
    for (int i = 0; i < nf; i++) {
        fmt_run *f = &runs[i];
        double v[MAXR];
        for (int bi = 0; bi < NB; bi++) {
            for (int r = 0; r < rounds; r++)
                v[r] = f->agg[r][bi];
            aggm[i][bi] = spread_of(v, rounds).med;
            for (int r = 0; r < rounds; r++)
                v[r] = f->x[r][bi];
            xs[i][bi] = spread_of(v, rounds);
        }
        pcts[i] = spread_of(f->pct, rounds);
        roofs[i] = spread_of(f->roof_bw, rounds);
        char pr[48];
        snprintf(pr, sizeof pr, "%.0f (%.0f–%.0f)", 100 * pcts[i].med, 100 * pcts[i].lo,
                 100 * pcts[i].hi);
        printf("%-*.*s %8.1f | %8.1f %8.1f %11s | %9.1f %5.0f | %8.1f %8.1f %8.1f %8.1f %8.1f |"
               " %5.2f %5.2f %5.2f %5.2f\n", namew, namew, f->name, f->bpt / 1e6,
               roofs[i].med / f->bpt, spread_of(f->cold, rounds).med, pr,
               spread_of(f->pf, rounds).med,
               100 * spread_of(f->pf_pct, rounds).med, aggm[i][0], aggm[i][1], aggm[i][2],
               aggm[i][3], aggm[i][4], xs[i][1].med, xs[i][2].med, xs[i][3].med, xs[i][4].med);
    }
    printf("(roof: tok/s of a read of the format's bytes per token; B1 cold: batch-1 "
           "steps alternating with its passes, so each reads from memory what the other "
           "evicted; %%: B1 cold of the roof, the median of the rounds' ratios; pf %%: of the SGEMM roofline, %.1f tok/s at "
           "the median (F32 multiply-adds: Q4_K's prefill, 8-bit integer products, can pass it); Bn: aggregate decode tok/s at batch n, one step at each batch in turn; "
           "xn: Bn ÷ B1 of the same turns; medians over the rounds)\n",
           spread_of(gemm, rounds).med / (pf_flops / n_prefill));
    printf("spread over the rounds (least–greatest):\n");
    for (int i = 0; i < nf; i++) {
        char a[4][48];
        printf("  %-*.*s x2 %s, x4 %s, x8 %s, x16 %s\n", namew, namew, runs[i].name,
               fmt_spread(a[0], sizeof a[0], xs[i][1]),
               fmt_spread(a[1], sizeof a[1], xs[i][2]),
               fmt_spread(a[2], sizeof a[2], xs[i][3]),
               fmt_spread(a[3], sizeof a[3], xs[i][4]));
    }

    /* The batching lesson: gain(8) = [bandwidth used at 8 ÷ at 1] × [bytes
     * per token at 1 ÷ at 8]. Bytes per token at B: the weights shared by
     * the batch plus each sequence's own KV reads. Fed with the bandwidth
     * the engine used at 1 and the read roofline for 8 (all the idle
     * bandwidth fed), the formula predicts a bandwidth-bound engine's gain;
     * fed with the bandwidth used at 8, it splits the measured gain into its
     * two factors. */
    printf("\nbatching gain at 8 (caliper calc batching-gain):\n");
    double kv_tok = (double)cal_model_kv_bytes_per_token(&c) * (CTX0 + STEPS);
    for (int i = 0; i < nf; i++) {
        const fmt_run *f = &runs[i];
        double b1 = f->bpt + kv_tok, b8 = f->bpt / 8 + kv_tok;
        /* the paired ratio's median, not a ratio of two medians */
        double bw1 = aggm[i][0] * b1, bw8 = xs[i][3].med * aggm[i][0] * b8;
        double pred, fp, bp, meas, fm, bm;
        const char *bad = NULL;
        if (cal_f_batching_gain(roofs[i].med, bw1, b1, b8, &pred, &fp, &bp, &bad) != CAL_OK ||
            cal_f_batching_gain(bw8, bw1, b1, b8, &meas, &fm, &bm, &bad) != CAL_OK) {
            printf("  %-*.*s: not computable (%s)\n", namew, namew, f->name, bad ? bad : "?");
            continue;
        }
        printf("  %-*.*s: bytes/token %.1f MB at 1, %.1f MB at 8; bandwidth used %.1f GB/s at 1,"
               " %.1f GB/s at 8\n", namew, namew, f->name, b1 / 1e6, b8 / 1e6, bw1 / 1e9,
               bw8 / 1e9);
        printf("         predicted if 8 fed the read roofline: %.2f = %.2f x %.2f;"
               " measured %.2f = %.2f (bandwidth) x %.2f (bytes)\n", pred, fp, bp, meas, fm, bm);
        printf("         caliper calc batching-gain --bw-single %.3gGB/s --bw-batch %.3gGB/s"
               " --bytes-single %.4gMB --bytes-batch %.4gMB\n", bw1 / 1e9, bw8 / 1e9,
               b1 / 1e6, b8 / 1e6);
    }

    if (!have) {
        printf("\nllama-bench: %s\n", lwhy);
    } else {
        printf("\nside by side with llama.cpp on the same weights, each round right after "
               "caliper's (%s -p %d -n %d -t %d -r 1; load average %.2f):\n", lbin, n_prefill,
               STEPS * 4, threads, loadavg());
        printf("%-*s | %9s %9s %17s | %9s %9s %17s\n", namew, "dtype", "pf tok/s", "llama.cpp",
               "ratio (range)", "B1 tok/s", "llama.cpp", "ratio (range)");
        for (int i = 0; i < nf; i++) {
            const fmt_run *f = &runs[i];
            double rp[MAXR], rt[MAXR], lp[MAXR], lt[MAXR];
            int n = 0;
            for (int r = 0; r < rounds; r++)
                if (f->lpp[r] > 0 && f->ltg[r] > 0) {
                    lp[n] = f->lpp[r];
                    lt[n] = f->ltg[r];
                    rp[n] = f->pf[r] / f->lpp[r];
                    rt[n++] = f->agg[r][0] / f->ltg[r];
                }
            if (n == 0) {
                printf("%-*.*s | llama-bench failed on %s\n", namew, namew, f->name, f->gguf);
                continue;
            }
            char a[48], b[48];
            printf("%-*.*s | %9.1f %9.1f %17s | %9.1f %9.1f %17s\n", namew, namew, f->name,
                   spread_of(f->pf, rounds).med, spread_of(lp, n).med,
                   fmt_spread(a, sizeof a, spread_of(rp, n)), aggm[i][0],
                   spread_of(lt, n).med, fmt_spread(b, sizeof b, spread_of(rt, n)));
        }
        printf("(ratio: caliper ÷ llama.cpp, the median of the rounds' ratios, each of figures "
               "taken one right after the other)\n");
        for (int i = 0; i < nf; i++)
            if (runs[i].mix || runs[i].path)
                printf("(%s: both engines hold the file's tensors as stored: %.1f MB of weights "
                       "per token)\n", runs[i].name, runs[i].bpt / 1e6);
    }
    if (tmpdir[0]) {
        for (int i = 0; i < nf; i++)
            if (runs[i].gguf[0])
                unlink(runs[i].gguf);
        rmdir(tmpdir);
    }
    free(lg);
    free(tok);
    for (int i = 0; i < nf; i++) {
        cal_engine_close(&runs[i].e);
        free(runs[i].rbuf);
    }
    return 0;
}
