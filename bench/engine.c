/* bench/engine — the reference engine against its own rooflines, measured in
 * one run on this machine: decode at batch 1 vs weight bytes ÷ copy
 * bandwidth, prefill vs FLOPs ÷ OpenBLAS SGEMM rate at the same shape, and
 * aggregate decode throughput at batch 1, 2, 4, 8 as ratios to batch 1.
 * Usage: bench/engine [preset] [prefill_tokens] [rounds]; best of the rounds. */
#include "caliper/clock.h"
#include "caliper/error.h"
#include "engine/engine.h"
#include <cblas.h>
#include <locale.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Each roofline is timed over about as long as the engine figure it is set
 * against (a few hundred ms), so a quiet moment favours neither side. */
enum { PASSES = 4 };

typedef struct copy_job {
    char *dst;
    const char *src;
    size_t n;
    int passes;
} copy_job;

static void *copy_part(void *arg)
{
    copy_job *j = arg;
    for (int p = 0; p < j->passes; p++)
        memcpy(j->dst, j->src, j->n);
    return NULL;
}

/* STREAM-style copy bandwidth with one thread per BLAS thread: bytes read
 * plus bytes written per second, best of several passes over buffers far
 * larger than the last-level cache. */
static double copy_bandwidth(int threads)
{
    size_t n = (size_t)1 << 30; /* 1 GiB each way */
    /* on 2 MiB pages where offered, as the engine's weights are */
    char *a = aligned_alloc((size_t)2 << 20, n), *b = aligned_alloc((size_t)2 << 20, n);
#ifdef MADV_HUGEPAGE
    if (a && b) {
        madvise(a, n, MADV_HUGEPAGE);
        madvise(b, n, MADV_HUGEPAGE);
    }
#endif
    if (!a || !b) {
        free(a); free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0;
    for (int rep = 0; rep < 2; rep++) { /* the first pass touches the pages */
        int passes = rep == 0 ? 1 : PASSES;
        pthread_t th[16];
        copy_job jobs[16];
        size_t part = n / (size_t)threads;
        int64_t t0 = cal_now_ns();
        for (int i = 0; i < threads; i++) {
            jobs[i] = (copy_job){b + i * part, a + i * part, part, passes};
            if (i > 0)
                pthread_create(&th[i], NULL, copy_part, &jobs[i]);
        }
        copy_part(&jobs[0]);
        for (int i = 1; i < threads; i++)
            pthread_join(th[i], NULL);
        double s = (double)(cal_now_ns() - t0) / 1e9;
        best = 2.0 * (double)n * passes / s;
    }
    free(a);
    free(b);
    return best;
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

static int step1(cal_engine *e, int slot, int pos, const int32_t *tok, int n, float *lg)
{
    cal_step_entry s = {slot, pos, n, tok, lg};
    return cal_engine_step(e, &s, 1);
}

static double maxd(double a, double b) { return a > b ? a : b; }

int main(int argc, char **argv)
{
    setlocale(LC_NUMERIC, "C");
    const char *preset = argc > 1 ? argv[1] : "base";
    int n_prefill = argc > 2 ? atoi(argv[2]) : 512;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    enum { MAXB = 8, STEPS = 16, CTX0 = 32 };
    cal_model_config c;
    if (cal_model_preset(preset, &c) != CAL_OK) {
        fprintf(stderr, "bench/engine: unknown preset \"%s\"\n", preset);
        return 2;
    }
    if (rounds < 1 || rounds > 20 || n_prefill < CTX0 || n_prefill > c.max_ctx ||
        CTX0 + STEPS > c.max_ctx) {
        fprintf(stderr, "bench/engine: prefill %d / rounds %d do not fit max_ctx %d\n",
                n_prefill, rounds, c.max_ctx);
        return 2;
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
    if (threads > 16)
        threads = 16;

    cal_engine *e = NULL;
    int64_t t0 = cal_now_ns();
    int rc = cal_engine_open(&c, MAXB, n_prefill, &e);
    if (rc != CAL_OK) {
        fprintf(stderr, "bench/engine: open: %s\n", cal_strerror(rc));
        return 1;
    }
    double open_s = (double)(cal_now_ns() - t0) / 1e9;
    float *lg = malloc(sizeof(float) * (size_t)c.vocab * MAXB);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n_prefill);
    for (int i = 0; i < n_prefill; i++)
        tok[i] = (int32_t)((i * 2654435761u) % (unsigned)c.vocab);
    printf("preset %s: %.1f M params, %.1f MB weights read per decode token, "
           "OpenBLAS %s kernels, %d threads, open %.2f s\n", c.name,
           cal_model_n_params(&c) / 1e6, cal_model_decode_bytes_per_token(&c) / 1e6,
           cal_engine_blas_core(), threads, open_s);

    /* Rounds: each one measures the rooflines and then the engine, so both
     * see the same machine; on a shared machine neighbours only ever slow a
     * measurement down, so each figure is the best over the rounds. */
    int f2 = 2 * c.ffn_dim;
    double bw = 0, gemm = 0, pf_tps = 0, agg[MAXB + 1] = {0};
    double pf_flops = 0;
    for (int p = 0; p < n_prefill; p++)
        pf_flops += cal_model_flops_per_token(&c, p) - 2.0 * c.vocab * c.dim;
    pf_flops += 2.0 * c.vocab * c.dim; /* logits for the last token only */
    for (int s = 0; s < MAXB; s++)
        step1(e, s, 0, tok + s, CTX0, NULL);
    int pos = CTX0;
    for (int r = 0; r < rounds; r++) {
        bw = maxd(bw, copy_bandwidth(threads));
        /* SGEMM with OpenBLAS's own threading on every core; the engine is
         * idle and runs OpenBLAS single-threaded inside its own pool */
        openblas_set_num_threads(threads);
        gemm = maxd(gemm, sgemm_rate(n_prefill, f2, c.dim, pf_flops));
        openblas_set_num_threads(1);

        /* prefill: one chunk of n_prefill tokens in a spare slot */
        t0 = cal_now_ns();
        step1(e, MAXB - 1, 0, tok, n_prefill, lg);
        pf_tps = maxd(pf_tps, n_prefill / ((double)(cal_now_ns() - t0) / 1e9));
        step1(e, MAXB - 1, 0, tok + MAXB - 1, pos, NULL); /* restore its context */

        /* decode at batch 1, 2, 4, 8: STEPS steps each; aggregate = all
         * tokens ÷ wall time of the steps */
        for (int b = 1; b <= MAXB; b *= 2) {
            cal_step_entry en[MAXB];
            int32_t dtok[MAXB];
            for (int s = 0; s < b; s++)
                dtok[s] = tok[s];
            int base = pos;
            t0 = cal_now_ns();
            for (int i = 0; i < STEPS; i++) {
                for (int s = 0; s < b; s++)
                    en[s] = (cal_step_entry){s, base + i, 1, &dtok[s],
                                             lg + (size_t)s * c.vocab};
                if (cal_engine_step(e, en, b) != CAL_OK) {
                    fprintf(stderr, "bench/engine: step failed: %s\n",
                            cal_engine_last_error(e));
                    return 1;
                }
            }
            /* the next batch size rewinds to the same depth: pos ≤ cached */
            agg[b] = maxd(agg[b], b * STEPS / ((double)(cal_now_ns() - t0) / 1e9));
        }
    }
    double bpt = (double)cal_model_decode_bytes_per_token(&c);
    double pf_roof = gemm / (pf_flops / n_prefill);
    double roof = bw / bpt;
    printf("copy bandwidth %.1f GB/s (STREAM-style read+write, %d threads); SGEMM "
           "%.1f GFLOP/s at M=%d N=%d K=%d (best of %d rounds)\n",
           bw / 1e9, threads, gemm / 1e9, n_prefill, f2, c.dim, rounds);
    printf("prefill %d tokens: %.1f tok/s (%.1f GFLOP/s); SGEMM roofline %.1f tok/s; "
           "%.0f %% of roofline (target >= 70 %%)\n", n_prefill, pf_tps,
           pf_tps * pf_flops / n_prefill / 1e9, pf_roof, 100.0 * pf_tps / pf_roof);
    printf("decode batch 1: %.1f tok/s (%.1f GB/s of weights); bandwidth roofline "
           "%.1f tok/s; %.0f %% of roofline (target >= 80 %%)\n", agg[1],
           agg[1] * bpt / 1e9, roof, 100.0 * agg[1] / roof);
    printf("aggregate decode: batch 1 %.1f, 2 %.1f, 4 %.1f, 8 %.1f tok/s; ratios "
           "1.00 %.2f %.2f %.2f (target at 8 >= 4)\n", agg[1], agg[2], agg[4], agg[8],
           agg[2] / agg[1], agg[4] / agg[1], agg[8] / agg[1]);
    free(lg);
    free(tok);
    cal_engine_close(&e);
    return 0;
}
