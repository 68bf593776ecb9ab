/* bench/engine — the reference engine against its own rooflines, measured in
 * one run on this machine, for each weight format: decode at batch 1 vs
 * bytes per token ÷ read bandwidth, prefill vs FLOPs ÷ OpenBLAS SGEMM rate at
 * the same shape, aggregate decode at batch 1, 2, 4, 8, 16 as ratios to batch
 * 1, and the batching gain at 8 as `caliper calc batching-gain` predicts it.
 * Usage: bench/engine [preset] [prefill_tokens] [rounds] [formats]
 * (formats: comma-separated, default f32,f16,bf16,q8_0); best of the rounds. */
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/formulas.h"
#include "engine/engine.h"
#include "engine/gguf.h"
#include "engine/kernels.h"
#include <cblas.h>
#include <glob.h>
#include <jansson.h>
#include <locale.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Each roofline is timed over about as long as the engine figures it is set
 * against (a few hundred ms), so a quiet moment favours neither side. */
enum { PASSES = 4, NB = 5, MAXB = 16, STEPS = 16, CTX0 = 32 };
static const int batches[NB] = {1, 2, 4, 8, 16};

typedef struct read_job {
    const char *src;
    size_t n;
    int passes;
    uint64_t sum;
} read_job;

static void *read_part(void *arg)
{
    read_job *j = arg;
    for (int p = 0; p < j->passes; p++)
        j->sum += cal_k_read_bytes(j->src, j->n);
    return NULL;
}

/* Read bandwidth with one thread per engine thread, each streaming its part
 * of a buffer far larger than the last-level cache with the same vector
 * loads as the decode kernels: decode reads weights and writes almost
 * nothing, so a read test is its roofline (a copy test would count writes
 * the engine never makes). */
static double read_bandwidth(int threads)
{
    size_t n = (size_t)1 << 30;
    char *a = aligned_alloc((size_t)2 << 20, n); /* 2 MiB pages, as the weights */
    if (!a)
        return 0;
#ifdef MADV_HUGEPAGE
    madvise(a, n, MADV_HUGEPAGE);
#endif
    memset(a, 1, n);
    double best = 0;
    uint64_t sink = 0;
    for (int rep = 0; rep < 2; rep++) {
        pthread_t th[64];
        read_job jobs[64];
        size_t part = n / (size_t)threads & ~(size_t)63;
        int64_t t0 = cal_now_ns();
        for (int i = 0; i < threads; i++) {
            jobs[i] = (read_job){a + i * part, part, PASSES, 0};
            if (i > 0)
                pthread_create(&th[i], NULL, read_part, &jobs[i]);
        }
        read_part(&jobs[0]);
        for (int i = 1; i < threads; i++)
            pthread_join(th[i], NULL);
        double s = (double)(cal_now_ns() - t0) / 1e9;
        double bw = (double)part * threads * PASSES / s;
        best = bw > best ? bw : best;
        for (int i = 0; i < threads; i++)
            sink += jobs[i].sum;
    }
    free(a);
    return sink == 42 ? best + 1e-9 : best; /* the sum is used: reads stay */
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

static double maxd(double a, double b) { return a > b ? a : b; }

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

typedef struct fmt_run {
    int dt;
    cal_engine *e;
    double bpt;          /* weight bytes per decode token */
    double pf_tps;       /* prefill tokens/s */
    double agg[NB];      /* aggregate decode tokens/s at batches[] */
} fmt_run;

static int step1(cal_engine *e, int slot, int pos, const int32_t *tok, int n, float *lg)
{
    cal_step_entry s = {slot, pos, n, tok, lg};
    return cal_engine_step(e, &s, 1);
}

/* One round of one format: prefill n_prefill tokens in a spare slot, then
 * STEPS decode steps at each batch size from context depth pos. */
static int measure(fmt_run *f, const int32_t *tok, int n_prefill, int pos, float *lg)
{
    cal_engine *e = f->e;
    int vocab = cal_engine_config(e)->vocab;
    int64_t t0 = cal_now_ns();
    if (step1(e, MAXB, 0, tok, n_prefill, lg) != CAL_OK)
        return -1;
    f->pf_tps = maxd(f->pf_tps, n_prefill / ((double)(cal_now_ns() - t0) / 1e9));
    for (int bi = 0; bi < NB; bi++) {
        int b = batches[bi];
        cal_step_entry en[MAXB];
        int32_t dtok[MAXB];
        for (int s = 0; s < b; s++)
            dtok[s] = tok[s];
        t0 = cal_now_ns();
        for (int i = 0; i < STEPS; i++) {
            /* every sequence at its own depth: attention over different
             * lengths in one step, as a server's batch is */
            for (int s = 0; s < b; s++)
                en[s] = (cal_step_entry){s, pos + s + i, 1, &dtok[s], lg + (size_t)s * vocab};
            if (cal_engine_step(e, en, b) != CAL_OK)
                return -1;
        }
        /* the next batch size rewinds to the same depths: pos ≤ cached */
        f->agg[bi] = maxd(f->agg[bi], b * STEPS / ((double)(cal_now_ns() - t0) / 1e9));
    }
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

int main(int argc, char **argv)
{
    setlocale(LC_NUMERIC, "C");
    const char *preset = argc > 1 ? argv[1] : "base";
    int n_prefill = argc > 2 ? atoi(argv[2]) : 512;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    char fmts[64];
    snprintf(fmts, sizeof fmts, "%s", argc > 4 ? argv[4] : "f32,f16,bf16,q8_0");
    cal_model_config c;
    if (cal_model_preset(preset, &c) != CAL_OK) {
        fprintf(stderr, "bench/engine: unknown preset \"%s\"\n", preset);
        return 2;
    }
    if (rounds < 1 || rounds > 20 || n_prefill < 1 || n_prefill > c.max_ctx ||
        CTX0 + MAXB + STEPS > c.max_ctx) {
        fprintf(stderr, "bench/engine: prefill %d / rounds %d do not fit max_ctx %d\n",
                n_prefill, rounds, c.max_ctx);
        return 2;
    }
    fmt_run runs[CAL_DTYPE_COUNT];
    int nf = 0;
    for (char *save = NULL, *t = strtok_r(fmts, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int dt = cal_dtype_parse(t);
        if (dt < 0 || nf == CAL_DTYPE_COUNT) {
            fprintf(stderr, "bench/engine: formats: \"%s\" is not f32, f16, bf16 or q8_0\n", t);
            return 2;
        }
        runs[nf++] = (fmt_run){.dt = dt};
    }
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
    for (int i = 0; i < nf; i++) {
        cal_model_config ci = c;
        ci.dtype = runs[i].dt;
        int64_t t0 = cal_now_ns();
        /* MAXB decode slots plus one for the prefill */
        int rc = cal_engine_open(&ci, MAXB + 1, n_prefill > fill_max ? n_prefill : fill_max,
                                 &runs[i].e);
        if (rc != CAL_OK) {
            fprintf(stderr, "bench/engine: open %s: %s\n", cal_dtype_name(ci.dtype),
                    cal_strerror(rc));
            return 1;
        }
        runs[i].bpt = (double)cal_model_decode_bytes_per_token(&ci);
        fprintf(stderr, "bench/engine: %s open in %.2f s\n", cal_dtype_name(ci.dtype),
                (double)(cal_now_ns() - t0) / 1e9);
        for (int s = 0; s < MAXB; s++)
            if (step1(runs[i].e, s, 0, tok + s, CTX0 + s + STEPS, NULL) != CAL_OK) {
                fprintf(stderr, "bench/engine: fill: %s\n", cal_engine_last_error(runs[i].e));
                return 1;
            }
    }
    printf("preset %s: %.1f M params, %d engine threads, kernels %s, OpenBLAS %s, "
           "load average %.2f\n", c.name, cal_model_n_params(&c) / 1e6, threads,
           cal_k_isa(), cal_engine_blas_core(), load0);
    if (advice && getenv("OPENBLAS_CORETYPE"))
        printf("note: OPENBLAS_CORETYPE=%s in the environment holds OpenBLAS to %s kernels; this "
               "CPU runs %s's (unset it to let OpenBLAS choose): prefill and the SGEMM roofline "
               "below are %s's\n", getenv("OPENBLAS_CORETYPE"), cal_engine_blas_core(), advice,
               cal_engine_blas_core());

    /* Rounds: each one measures the rooflines and then every format, so all
     * see the same machine; on a shared machine neighbours only ever slow a
     * measurement down, so each figure is the best over the rounds. */
    int f2 = 2 * c.ffn_dim;
    double bw = 0, gemm = 0, pf_flops = 0;
    for (int p = 0; p < n_prefill; p++)
        pf_flops += cal_model_flops_per_token(&c, p) - 2.0 * c.vocab * c.dim;
    pf_flops += 2.0 * c.vocab * c.dim; /* logits for the last token only */
    for (int r = 0; r < rounds; r++) {
        bw = maxd(bw, read_bandwidth(threads));
        /* SGEMM with OpenBLAS's own threading on every core; the engines are
         * idle and run OpenBLAS single-threaded inside their own pools */
        openblas_set_num_threads(threads);
        gemm = maxd(gemm, sgemm_rate(n_prefill, f2, c.dim, pf_flops));
        openblas_set_num_threads(1);
        for (int i = 0; i < nf; i++)
            if (measure(&runs[i], tok, n_prefill, CTX0, lg) != 0) {
                fprintf(stderr, "bench/engine: step failed: %s\n",
                        cal_engine_last_error(runs[i].e));
                return 1;
            }
    }
    double load1 = loadavg();
    double pf_roof = gemm / (pf_flops / n_prefill);
    printf("read bandwidth %.1f GB/s (%d threads); SGEMM %.1f GFLOP/s at M=%d N=%d K=%d; "
           "best of %d rounds; load average %.2f at the end\n",
           bw / 1e9, threads, gemm / 1e9, n_prefill, f2, c.dim, rounds, load1);
    printf("\n%-5s %8s %9s %9s %5s | %9s %5s | %8s %8s %8s %8s %8s | %5s %5s %5s %5s\n",
           "dtype", "MB/tok", "B1 tok/s", "roof", "%", "pf tok/s", "%", "B1", "B2", "B4",
           "B8", "B16", "x2", "x4", "x8", "x16");
    for (int i = 0; i < nf; i++) {
        const fmt_run *f = &runs[i];
        double roof = bw / f->bpt;
        printf("%-5s %8.1f %9.1f %9.1f %5.0f | %9.1f %5.0f | %8.1f %8.1f %8.1f %8.1f %8.1f |"
               " %5.2f %5.2f %5.2f %5.2f\n", cal_dtype_name(f->dt), f->bpt / 1e6, f->agg[0],
               roof, 100.0 * f->agg[0] / roof, f->pf_tps, 100.0 * f->pf_tps / pf_roof,
               f->agg[0], f->agg[1], f->agg[2], f->agg[3], f->agg[4], f->agg[1] / f->agg[0],
               f->agg[2] / f->agg[0], f->agg[3] / f->agg[0], f->agg[4] / f->agg[0]);
    }
    printf("(roof: read bandwidth ÷ bytes per token; pf %%: of the SGEMM roofline %.1f tok/s;"
           " Bn: aggregate decode tok/s at batch n; xn: Bn ÷ B1)\n", pf_roof);

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
        double bw1 = f->agg[0] * b1, bw8 = f->agg[3] * b8;
        double pred, fp, bp, meas, fm, bm;
        const char *bad = NULL;
        if (cal_f_batching_gain(bw, bw1, b1, b8, &pred, &fp, &bp, &bad) != CAL_OK ||
            cal_f_batching_gain(bw8, bw1, b1, b8, &meas, &fm, &bm, &bad) != CAL_OK) {
            printf("  %-5s: not computable (%s)\n", cal_dtype_name(f->dt), bad ? bad : "?");
            continue;
        }
        printf("  %-5s: bytes/token %.1f MB at 1, %.1f MB at 8; bandwidth used %.1f GB/s at 1,"
               " %.1f GB/s at 8\n", cal_dtype_name(f->dt), b1 / 1e6, b8 / 1e6, bw1 / 1e9,
               bw8 / 1e9);
        printf("         predicted if 8 fed the read roofline: %.2f = %.2f x %.2f;"
               " measured %.2f = %.2f (bandwidth) x %.2f (bytes)\n", pred, fp, bp,
               f->agg[3] / f->agg[0], fm, bm);
        printf("         caliper calc batching-gain --bw-single %.3gGB/s --bw-batch %.3gGB/s"
               " --bytes-single %.4gMB --bytes-batch %.4gMB\n", bw1 / 1e9, bw8 / 1e9,
               b1 / 1e6, b8 / 1e6);
    }

    /* llama.cpp on the same shape needs its build (make compat) and a GGUF of
     * this model; say which is missing rather than print nothing */
    glob_t g;
    char pat[512];
    const char *home = getenv("HOME");
    /* make compat's tree: PREFIX/bin when installed, PREFIX/build/bin as built */
    snprintf(pat, sizeof pat, "%s/.cache/caliper/*/bin/llama-bench", home ? home : "");
    int have = glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    if (!have) {
        globfree(&g);
        snprintf(pat, sizeof pat, "%s/.cache/caliper/*/build/bin/llama-bench",
                 home ? home : "");
        have = glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    }
    /* the same weights as GGUF files: the folder given, or written now into
     * a temporary one (a few seconds) and removed at the end */
    const char *gguf = getenv("CALIPER_BENCH_GGUF_DIR");
    char tmpdir[64] = "";
    if (have && !gguf) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/caliper-bench-gguf-XXXXXX");
        if (mkdtemp(tmpdir)) {
            gguf = tmpdir;
            int64_t t0 = cal_now_ns();
            for (int i = 0; i < nf && gguf; i++) {
                char path[256], why[256];
                snprintf(path, sizeof path, "%s/%s-%s.gguf", tmpdir, c.name,
                         cal_dtype_name(runs[i].dt));
                if (cal_gguf_export(runs[i].e, path, runs[i].dt, why, sizeof why) != CAL_OK) {
                    printf("\nllama-bench: cannot write the GGUF files: %s\n", why);
                    gguf = NULL;
                }
            }
            if (gguf)
                fprintf(stderr, "bench/engine: GGUF files written to %s in %.1f s\n", tmpdir,
                        (double)(cal_now_ns() - t0) / 1e9);
        } else {
            tmpdir[0] = 0;
            printf("\nllama-bench: no temporary folder for the GGUF files; set "
                   "CALIPER_BENCH_GGUF_DIR to a folder of %s-<dtype>.gguf files\n", c.name);
        }
    }
    if (!have) {
        printf("\nllama-bench: not built (%s absent; make compat builds it)\n", pat);
    } else if (gguf) {
        printf("\nside by side with llama.cpp on the same weights (%s -p %d -n %d -t %d -r %d;"
               " load average %.2f):\n", g.gl_pathv[0], n_prefill, STEPS * 4, threads, rounds,
               loadavg());
        printf("%-5s | %9s %9s %6s | %9s %9s %6s\n", "dtype", "pf tok/s", "llama.cpp", "ratio",
               "B1 tok/s", "llama.cpp", "ratio");
        for (int i = 0; i < nf; i++) {
            char path[256];
            double pp, tg;
            snprintf(path, sizeof path, "%s/%s-%s.gguf", gguf, c.name, cal_dtype_name(runs[i].dt));
            if (!llama_bench(g.gl_pathv[0], path, n_prefill, STEPS * 4, threads, rounds, &pp,
                             &tg)) {
                printf("%-5s | llama-bench failed on %s\n", cal_dtype_name(runs[i].dt), path);
                continue;
            }
            printf("%-5s | %9.1f %9.1f %6.2f | %9.1f %9.1f %6.2f\n", cal_dtype_name(runs[i].dt),
                   runs[i].pf_tps, pp, runs[i].pf_tps / pp, runs[i].agg[0], tg,
                   runs[i].agg[0] / tg);
        }
        printf("(ratio: caliper ÷ llama.cpp; each figure the best of its runs, run one after"
               " the other: on a busy machine read them with the load average)\n");
    }
    if (tmpdir[0]) {
        for (int i = 0; i < nf; i++) {
            char path[256];
            snprintf(path, sizeof path, "%s/%s-%s.gguf", tmpdir, c.name,
                     cal_dtype_name(runs[i].dt));
            unlink(path);
        }
        rmdir(tmpdir);
    }
    globfree(&g);
    free(lg);
    free(tok);
    for (int i = 0; i < nf; i++)
        cal_engine_close(&runs[i].e);
    return 0;
}
