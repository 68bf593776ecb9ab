/* caliper serve — the built-in reference engine behind an OpenAI-compatible
 * HTTP API: parse flags, open the server (server/server.h), print the one
 * "listening on" line, wait for SIGINT/SIGTERM, write the profile, stop. */
#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/units.h"
#include "cli.h"
#include "engine/engine.h"
#include "engine/gguf.h"
#include "engine/opbench.h"
#include "caliper/gguf.h"
#include "server/server.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: caliper serve [--preset tiny|small|base|moe] [--dtype f32|f16|bf16|q8_0]\n"
        "                     [shape flags] [--port N]\n"
        "\n"
        "The reference engine (a real CPU transformer, synthetic weights) behind an\n"
        "OpenAI-compatible API: /v1/completions, /v1/chat/completions, /v1/models,\n"
        "/health, /metrics, /tokenize, /detokenize, /profile. Prints one line,\n"
        "  caliper serve: listening on http://HOST:PORT (model NAME, N params)\n"
        "then serves until SIGINT or SIGTERM.\n"
        "\n"
        "model:\n"
        "  --preset NAME        tiny (< 5 M params, default), small, base, moe\n"
        "  --layers N --dim N --heads N --kv-heads N --ffn N --experts N --top-k N\n"
        "  --vocab N --context N --seed N\n"
        "                       override one field of the preset's shape\n"
        "  --vocab FILE.gguf    take FILE's vocabulary (SentencePiece or BPE, as llama.cpp\n"
        "                       encodes it; the vocab size becomes its token count) for\n"
        "                       serving and --export-gguf\n"
        "  --dtype F            weight format: f32 (default), f16, bf16, q8_0, q4_0, q4_k,\n"
        "                       q6_k (llama.cpp's block layouts; q4_k and q6_k need --dim and\n"
        "                       --ffn multiples of 256); same weights as f32, rounded to the\n"
        "                       format. q4_k_m (--export-gguf only): llama.cpp's mixture,\n"
        "                       Q6_K for output and some attn_v/ffn_down, Q4_K elsewhere.\n"
        "                       With --model: convert every matrix to F (default: each\n"
        "                       held as the file stores it)\n"
        "  --arch A             llama (default), qwen2 (QKV biases), qwen3 (Q/K head norms),\n"
        "                       dense; qwen3moe (qwen3 with experts: --preset moe)\n"
        "  --chat-template T    how chat messages become the prompt: caliper (its own),\n"
        "                       chatml, llama3 or mistral; default: the --model file's\n"
        "                       tokenizer.chat_template if it is one of those (else\n"
        "                       refused), caliper's own when it has none\n"
        "  --rope-scaling llama3  Llama 3's RoPE frequency factors (Llama 3.2's: factor\n"
        "                       32, low 1, high 4, original context 8192; llama only)\n"
        "  --model-name NAME    the served model id (default caliper-PRESET)\n"
        "  --model FILE.gguf    serve a GGUF file's weights (llama, qwen2, qwen3, qwen3moe),\n"
        "                       each matrix held as the file stores it, mixed as llama.cpp's\n"
        "                       mixtures are (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K), or\n"
        "                       widened exactly to F32 where the engine has no kernel for\n"
        "                       the format (Q4_1, Q5_0, Q5_1, Q5_K); one line names each\n"
        "                       and the memory held; the byte vocabulary --export-gguf\n"
        "                       writes, or a SentencePiece or BPE one; only\n"
        "                       --context and --dtype of the shape flags apply; a longer\n"
        "                       context_length than 4096 is held to 4096 positions unless\n"
        "                       --context says otherwise (the KV cache grows with it)\n"
        "  --export-gguf FILE   write the model as a GGUF file llama.cpp loads, each tensor\n"
        "                       as the engine holds it (--dtype; --model's file as stored),\n"
        "                       and exit\n"
        "server:\n"
        "  --host ADDR          bind address (default 127.0.0.1: loopback only)\n"
        "  --port N             TCP port; 0 picks a free one (default 8080)\n"
        "  --max-batch N        running sequences per step, vLLM's --max-num-seqs (default 16)\n"
        "  --max-queue N        waiting requests beyond the batch; more get 503 (default 256)\n"
        "  --prefill-chunk N    prompt tokens prefilled per engine step (default 256)\n"
        "  --threads N          compute threads (OpenBLAS); default: all cores\n"
        "  --max-body BYTES     request body limit, e.g. 4MiB (default); larger gets 413\n"
        "  --http-threads N     HTTP event-loop threads (default 1; 2 with --pace-ms)\n"
        "  --max-connections N  concurrent connections (default 1024; 8192 with --pace-ms);\n"
        "                       1/64 of them (1 to 64) are kept free by closing the\n"
        "                       connection that has gone longest without progress: the\n"
        "                       longest wait for a request, or for a client to read\n"
        "  --header-timeout T   the request line and headers must arrive within T of\n"
        "                       connecting, however slowly they trickle (default 10s)\n"
        "  --body-timeout T     the request body within T of the headers (default 60s);\n"
        "                       a reply, a stream included, is never cut by either\n"
        "  --send-timeout T     a reply whose client takes none of its bytes for T is\n"
        "                       reset (default 30s); waiting for the engine never counts\n"
        "  --kv-overcommit      reserve a KV cache (max-batch x context) beyond the host's\n"
        "                       physical memory; without it serve refuses, naming the sizes\n"
        "  --profile FILE       write the engine's per-op profile JSON at shutdown\n"
        "  --op-bench FILE      no server: run each op of the model alone (same kernels,\n"
        "                       threads and shapes, warm caches), write the timings to\n"
        "                       FILE for `caliper ops PROFILE FILE` (docs/ops.md), exit\n"
        "  --op-bench-tokens N  tokens per call, a step's rows (default 1: decode)\n"
        "  --op-bench-pos N     KV cache depth the attention reads (default 128)\n"
        "  --op-bench-reps N    timed calls per op (default 50)\n"
        "  --pace-ms N          pacing mode: no model compute; each request streams\n"
        "                       max_tokens chunks, chunk k due at arrival + N*(k+1) ms,\n"
        "                       each carrying the server's send time \"send_ns\"\n"
        "\n"
        "Exit status: 0 after a clean stop, 1 when the server cannot start, 2 usage.\n"
        "Details: docs/serve.md\n");
}

enum {
    O_PRESET = 256, O_LAYERS, O_DIM, O_HEADS, O_KVHEADS, O_FFN, O_EXPERTS, O_TOPK,
    O_VOCAB, O_CONTEXT, O_SEED, O_HOST, O_PORT, O_MAXBATCH, O_MAXQUEUE, O_THREADS,
    O_PROFILE, O_PACE, O_MODELNAME, O_CHUNK, O_MAXBODY, O_HTTPTHREADS, O_MAXCONN, O_MODEL, O_EXPORT,
    O_OPBENCH, O_OBTOKENS, O_OBPOS, O_OBREPS, O_HELP, O_DTYPE, O_HEADTIMEOUT, O_BODYTIMEOUT, O_SENDTIMEOUT,
    O_ARCH, O_ROPESCALING, O_CHATTEMPLATE, O_KVOVERCOMMIT
};

static const struct option OPTS[] = {
    {"preset", required_argument, 0, O_PRESET},
    {"layers", required_argument, 0, O_LAYERS},
    {"dim", required_argument, 0, O_DIM},
    {"heads", required_argument, 0, O_HEADS},
    {"kv-heads", required_argument, 0, O_KVHEADS},
    {"ffn", required_argument, 0, O_FFN},
    {"experts", required_argument, 0, O_EXPERTS},
    {"top-k", required_argument, 0, O_TOPK},
    {"vocab", required_argument, 0, O_VOCAB},
    {"context", required_argument, 0, O_CONTEXT},
    {"seed", required_argument, 0, O_SEED},
    {"host", required_argument, 0, O_HOST},
    {"port", required_argument, 0, O_PORT},
    {"max-batch", required_argument, 0, O_MAXBATCH},
    {"max-queue", required_argument, 0, O_MAXQUEUE},
    {"threads", required_argument, 0, O_THREADS},
    {"profile", required_argument, 0, O_PROFILE},
    {"pace-ms", required_argument, 0, O_PACE},
    {"model-name", required_argument, 0, O_MODELNAME},
    {"prefill-chunk", required_argument, 0, O_CHUNK},
    {"max-body", required_argument, 0, O_MAXBODY},
    {"http-threads", required_argument, 0, O_HTTPTHREADS},
    {"max-connections", required_argument, 0, O_MAXCONN},
    {"header-timeout", required_argument, 0, O_HEADTIMEOUT},
    {"body-timeout", required_argument, 0, O_BODYTIMEOUT},
    {"send-timeout", required_argument, 0, O_SENDTIMEOUT},
    {"model", required_argument, 0, O_MODEL},
    {"export-gguf", required_argument, 0, O_EXPORT},
    {"dtype", required_argument, 0, O_DTYPE},
    {"arch", required_argument, 0, O_ARCH},
    {"rope-scaling", required_argument, 0, O_ROPESCALING},
    {"chat-template", required_argument, 0, O_CHATTEMPLATE},
    {"kv-overcommit", no_argument, 0, O_KVOVERCOMMIT},
    {"op-bench", required_argument, 0, O_OPBENCH},
    {"op-bench-tokens", required_argument, 0, O_OBTOKENS},
    {"op-bench-pos", required_argument, 0, O_OBPOS},
    {"op-bench-reps", required_argument, 0, O_OBREPS},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

/* The positions a GGUF model serves when its context_length is longer and
 * --context is not given: the KV cache, the RoPE tables and the attention
 * scores grow with it (a 7 MB file with context_length 1048576 held 1.5 GB
 * idle), and llama.cpp's server also starts at 4096. */
#define GGUF_CTX_DEFAULT 4096
/* Past this, the KV cache's size is worth a line at startup. */
#define KV_NOTE_BYTES ((double)(1u << 30))

/* Shape overrides: which field, and the flag that set it (-1 = not given). */
typedef struct shape_flags {
    long layers, dim, heads, kv_heads, ffn, experts, top_k, vocab, context, seed;
} shape_flags;

/* SIGINT/SIGTERM: the handler only records the signal and wakes the main
 * thread through a pipe (OpenBLAS starts threads before main, unmasked, so
 * sigwait alone could lose the signal to one of them). */
static int g_sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t g_sig;

static void on_signal(int sig)
{
    int saved = errno;
    g_sig = sig;
    char c = 1;
    if (write(g_sig_pipe[1], &c, 1) < 0) { /* the pipe is full: already woken */ }
    errno = saved;
}

static int write_profile(const char *path, const char *json);

/* One line on how --model's weights are held: the file's matrices by
 * type (shares of their weights) and what the engine does with each (holds
 * it as stored, widens it exactly to F32, or rounds it to --dtype: the
 * decision of cal_gguf_hold, tensor by tensor), then the memory: the bytes
 * the engine holds beside the file's, and the KV cache it reserves. */
static void held_line(const char *path, const cal_gguf_model *gm, const cal_model_config *mc,
                      const cal_engine *eng, long max_batch)
{
    enum { NT = 64 };
    /* weights by file type and by the format they are held in */
    double by[NT][CAL_DTYPE_COUNT], all = 0;
    memset(by, 0, sizeof by);
    int nokernel[NT] = {0};
    for (uint64_t i = 0; i < gm->n_tensors; i++) {
        const cal_gguf_tensor *t = &gm->tensors[i];
        if (t->n_dims < 2 || t->type >= NT)
            continue;
        double n = (double)t->ne[0] * (double)t->ne[1] * (double)t->ne[2] * (double)t->ne[3];
        int h = cal_gguf_hold(t->type, (int64_t)t->ne[0], mc);
        by[t->type][h] += n;
        nokernel[t->type] = cal_gguf_dtype_of(t->type) < 0;
        all += n;
    }
    if (all <= 0)
        return;
    /* "Q4_K 63 %, Q6_K 37 %": the file's types whose weights went one way */
    char kept[256] = "", widened[256] = "", rounded[256] = "";
    size_t lk = 0, lw = 0, lr = 0;
    for (int k = 0; k < NT; k++)
        for (int h = 0; h < CAL_DTYPE_COUNT; h++) {
            if (by[k][h] <= 0)
                continue;
            const char *name = cal_gguf_type_name((uint32_t)k);
            int same = cal_gguf_dtype_of((uint32_t)k) == h;
            char *buf = same ? kept : h == CAL_DTYPE_F32 ? widened : rounded;
            size_t *len = same ? &lk : h == CAL_DTYPE_F32 ? &lw : &lr;
            int w = snprintf(buf + *len, sizeof kept - *len, "%s%s %.0f %%%s", *len ? ", " : "",
                             name, 100.0 * by[k][h] / all,
                             !same && h == CAL_DTYPE_F32 && mc->as_stored
                                 ? nokernel[k] ? " (no kernel for it)" : " (rows its kernels do not take)"
                                 : "");
            *len = w > 0 && (size_t)w < sizeof kept - *len ? *len + (size_t)w : sizeof kept - 1;
        }
    char how[900];
    const char *fmt = cal_dtype_name(mc->dtype);
    if (mc->as_stored)
        snprintf(how, sizeof how, "weights held as stored: %s%s%s", lk ? kept : "none",
                 lw ? "; widened exactly to f32: " : "", widened);
    else
        snprintf(how, sizeof how, "weights held as %s (--dtype): %s%s%s%s%s%s%s", fmt,
                 lk ? kept : "", lk ? " as stored" : "", lk && (lw || lr) ? "; " : "",
                 widened, lw ? " widened exactly" : "", lw && lr ? "; " : "",
                 lr ? rounded : "");
    if (!mc->as_stored && lr)
        snprintf(how + strlen(how), sizeof how - strlen(how), " rounded to %s", fmt);
    char b1[32], b2[32], b3[32];
    struct stat st;
    double file = stat(path, &st) == 0 ? (double)st.st_size : 0;
    double held = (double)cal_engine_weight_bytes(eng), kv = (double)cal_engine_kv_bytes(eng);
    fprintf(stderr, "caliper serve: --model: %s; %s held for a %s file, KV cache %s "
            "reserved (%ld sequence%s of %d positions, touched as they fill)\n", how,
            cal_unit_format(CAL_U_BYTES, held, 3, b1, sizeof b1),
            cal_unit_format(CAL_U_BYTES, file, 3, b2, sizeof b2),
            cal_unit_format(CAL_U_BYTES, kv, 3, b3, sizeof b3), max_batch,
            max_batch == 1 ? "" : "s", mc->max_ctx);
}

/* The KV cache the engine would reserve (each slot's keys and values on
 * whole pages, as engine/weights.c maps them) beside the weights,
 * against the host's physical memory: beyond it, refused unless
 * --kv-overcommit asks for it. The cache is only touched as positions
 * fill, so the reservation itself costs nothing; but a server whose
 * sequences may fill more than the host holds is one that will swap or be
 * killed under load, and a file's context_length alone (a 14 MB file
 * reserved 34.4 GB on a 23.5 GiB host) should not decide that silently. */
static int check_reservation(const cal_model_config *m, const char *gguf_in, long max_batch,
                             int overcommit)
{
    long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || pg <= 0)
        return 0;   /* the host does not say: nothing to check against */
    double mem = (double)pages * (double)pg, huge = 2.0 * 1024 * 1024;
    double per_pos = (double)cal_model_kv_bytes_per_token(m) / 2;  /* keys, or values */
    double need = per_pos * m->max_ctx, unit = need >= huge / 2 ? huge : 4096;
    double part = ceil(need / unit) * unit;
    double kv = 2 * part * (double)max_batch;
    struct stat st;
    double weights = gguf_in && m->as_stored && stat(gguf_in, &st) == 0
                     ? (double)st.st_size
                     : (double)cal_model_n_params(m) * cal_dtype_bytes_per_weight(m->dtype);
    if (overcommit || kv + weights <= mem)
        return 0;
    double room = mem - weights;
    long ctx_fit = room > 0 ? (long)(room / (2 * per_pos * (double)max_batch)) : 0;
    long seq_fit = room > 0 ? (long)(room / (2 * part)) : 0;
    char b1[32], b2[32], b3[32];
    return cli_usage_error("serve", "the KV cache would reserve %s (%ld sequences of %d "
                           "positions) beside %s of weights, more than this host's %s of "
                           "memory: serve fewer positions (--context: %ld fit %ld sequences) "
                           "or sequences (--max-batch: %ld fit %d positions), or reserve it "
                           "anyway with --kv-overcommit (its pages are touched only as "
                           "positions fill)",
                           cal_unit_format(CAL_U_BYTES, kv, 3, b1, sizeof b1), max_batch,
                           m->max_ctx, cal_unit_format(CAL_U_BYTES, weights, 3, b2, sizeof b2),
                           cal_unit_format(CAL_U_BYTES, mem, 3, b3, sizeof b3), ctx_fit,
                           max_batch, seq_fit, m->max_ctx);
}

/* held_line for the file at path, read again */
static void print_held(const char *path, const cal_model_config *mc, const cal_engine *eng,
                       long max_batch)
{
    cal_gguf_model gm;
    char why[256];
    if (cal_gguf_read_model_file(path, &gm, why, sizeof why) != CAL_OK)
        return;
    held_line(path, &gm, mc, eng, max_batch);
    cal_gguf_model_free(&gm);
}

/* --op-bench: open the engine alone (no server), time each op by itself,
 * write the file, print one line. */
static int run_op_bench(const cal_model_config *m, const char *path, long tokens, long pos,
                        long reps)
{
    const char *C = "serve";
    if (pos + tokens > m->max_ctx)
        return cli_usage_error(C, "--op-bench-pos: %ld + %ld tokens is past the context (%d)", pos,
                               tokens, m->max_ctx);
    cal_engine *e = NULL;
    int rc = cal_engine_open(m, 1, (int)tokens, &e);
    if (rc != CAL_OK) return cli_fail(C, "--op-bench: cannot open the engine: %s", cal_strerror(rc));
    cal_opbench_opts o = {(int)tokens, (int)pos, (int)reps};
    char *json = NULL;
    rc = cal_engine_opbench(e, &o, &json);
    cal_engine_close(&e);
    if (rc != CAL_OK) return cli_fail(C, "--op-bench: %s", cal_strerror(rc));
    int status = CLI_OK;
    if (write_profile(path, json) != CAL_OK)
        status = cli_fail(C, "--op-bench: cannot write \"%s\"", path);
    else
        printf("caliper serve: op bench of %s (%ld token%s per call, position %ld, %ld reps, OpenBLAS %s) "
               "written to %s\n", m->name, tokens, tokens == 1 ? "" : "s", pos, reps,
               cal_engine_blas_core(), path);
    free(json);
    return status;
}

static int write_profile(const char *path, const char *json)
{
    FILE *f = fopen(path, "w");
    if (!f) return CAL_EIO;
    int ok = fputs(json, f) >= 0 && fputc('\n', f) != EOF;
    if (fclose(f) != 0) ok = 0;
    return ok ? CAL_OK : CAL_EIO;
}

int cmd_serve(int argc, char **argv)
{
    const char *preset = "tiny", *host = "127.0.0.1", *profile = NULL, *model_name = NULL;
    const char *op_bench = NULL;
    long ob_tokens = 1, ob_pos = 128, ob_reps = 50;
    long port = 8080, max_batch = 16, max_queue = 256, threads = 0, pace_ms = 0,
         chunk = 256, http_threads = 0, max_conn = 0;
    double max_body = 4.0 * 1024 * 1024, head_s = 0, body_s = 0, send_s = 0;
    shape_flags sf = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    const char *C = "serve";
    const char *gguf_in = NULL, *gguf_out = NULL, *vocab_file = NULL;
    int preset_given = 0;
    int rc, opt, dtype = CAL_DTYPE_F32, dtype_given = 0, mix = 0, arch = -1, rope_llama3 = 0,
        tpl_given = 0, kv_overcommit = 0;
    cal_chat_template tpl = {0};
    const char *tpl_from = "caliper's own";
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", OPTS, NULL)) != -1) {
        rc = 0;
        switch (opt) {
        case O_PRESET:   preset = optarg; preset_given = 1; break;
        case O_MODEL:    gguf_in = optarg; break;
        case O_EXPORT:   gguf_out = optarg; break;
        case O_DTYPE:
            /* q4_k_m is a file's mixture: the engine holds Q4_K */
            mix = strcasecmp(optarg, "q4_k_m") == 0;
            dtype = mix ? CAL_DTYPE_Q4_K : cal_dtype_parse(optarg);
            dtype_given = 1;
            if (dtype < 0) {
                char list[160] = "";
                for (int k = 0, len = 0; k < CAL_DTYPE_COUNT && len < (int)sizeof list; k++)
                    len += snprintf(list + len, sizeof list - (size_t)len, "%s, ",
                                    cal_dtype_name(k));
                return cli_usage_error(C, "--dtype: \"%s\" is not one of %sq4_k_m", optarg,
                                       list);
            }
            break;
        case O_KVOVERCOMMIT: kv_overcommit = 1; break;
        case O_CHATTEMPLATE:
            if (cal_tpl_parse(optarg, &tpl) < 0)
                return cli_usage_error(C, "--chat-template: \"%s\" is not caliper, chatml, "
                                       "llama3 or mistral", optarg);
            tpl_given = 1;
            break;
        case O_ROPESCALING:
            if (strcmp(optarg, "llama3") != 0)
                return cli_usage_error(C, "--rope-scaling: \"%s\" is not llama3", optarg);
            rope_llama3 = 1;
            break;
        case O_ARCH:
            arch = cal_arch_parse(optarg);
            if (arch < 0)
                return cli_usage_error(C, "--arch: \"%s\" is not llama, qwen2, qwen3 or "
                                       "qwen3moe", optarg);
            break;
        case O_LAYERS:   rc = cli_parse_long(C, "--layers", optarg, 1, 1024, &sf.layers); break;
        case O_DIM:      rc = cli_parse_long(C, "--dim", optarg, 1, 1 << 16, &sf.dim); break;
        case O_HEADS:    rc = cli_parse_long(C, "--heads", optarg, 1, 1024, &sf.heads); break;
        case O_KVHEADS:  rc = cli_parse_long(C, "--kv-heads", optarg, 1, 1024, &sf.kv_heads); break;
        case O_FFN:      rc = cli_parse_long(C, "--ffn", optarg, 1, 1 << 18, &sf.ffn); break;
        case O_EXPERTS:  rc = cli_parse_long(C, "--experts", optarg, 0, 1024, &sf.experts); break;
        case O_TOPK:     rc = cli_parse_long(C, "--top-k", optarg, 1, 1024, &sf.top_k); break;
        case O_VOCAB:
            /* a number is the synthetic vocabulary's size; anything else a
             * GGUF file whose vocabulary the model takes */
            if (optarg[0] >= '0' && optarg[0] <= '9')
                rc = cli_parse_long(C, "--vocab", optarg, 257, 1 << 22, &sf.vocab);
            else
                vocab_file = optarg;
            break;
        case O_CONTEXT:  rc = cli_parse_long(C, "--context", optarg, 2, 1 << 20, &sf.context); break;
        case O_SEED:     rc = cli_parse_long(C, "--seed", optarg, 0, LONG_MAX, &sf.seed); break;
        case O_HOST:
            /* an empty address would bind loopback yet print "http://:PORT" */
            if (!*optarg) return cli_usage_error(C, "--host: \"\" is empty (an address, e.g. 127.0.0.1 or 0.0.0.0)");
            host = optarg;
            break;
        case O_PORT:     rc = cli_parse_long(C, "--port", optarg, 0, 65535, &port); break;
        case O_MAXBATCH: rc = cli_parse_long(C, "--max-batch", optarg, 1, 4096, &max_batch); break;
        case O_MAXQUEUE: rc = cli_parse_long(C, "--max-queue", optarg, 0, 1 << 20, &max_queue); break;
        case O_THREADS:  rc = cli_parse_long(C, "--threads", optarg, 1, 1024, &threads); break;
        case O_PROFILE:  profile = optarg; break;
        case O_PACE:     rc = cli_parse_long(C, "--pace-ms", optarg, 1, 3600000, &pace_ms); break;
        case O_MODELNAME: model_name = optarg; break;
        case O_CHUNK:    rc = cli_parse_long(C, "--prefill-chunk", optarg, 1, 1 << 16, &chunk); break;
        case O_MAXBODY:
            rc = cli_parse_unit(C, "--max-body", optarg, CAL_U_BYTES, "B", &max_body);
            if (!rc && (max_body < 1024 || max_body > 1024.0 * 1024 * 1024))
                rc = cli_usage_error(C, "--max-body: \"%s\" is outside 1KiB..1GiB", optarg);
            break;
        case O_HTTPTHREADS:
            rc = cli_parse_long(C, "--http-threads", optarg, 1, 64, &http_threads);
            break;
        case O_MAXCONN:
            rc = cli_parse_long(C, "--max-connections", optarg, 1, 1 << 20, &max_conn);
            break;
        case O_HEADTIMEOUT:
            rc = cli_parse_time_in(C, "--header-timeout", optarg, "s", 0.001, 3600, &head_s);
            break;
        case O_BODYTIMEOUT:
            rc = cli_parse_time_in(C, "--body-timeout", optarg, "s", 0.001, 86400, &body_s);
            break;
        case O_SENDTIMEOUT:
            rc = cli_parse_time_in(C, "--send-timeout", optarg, "s", 0.001, 86400, &send_s);
            break;
        case O_OPBENCH:  op_bench = optarg; break;
        case O_OBTOKENS: rc = cli_parse_long(C, "--op-bench-tokens", optarg, 1, 4096, &ob_tokens); break;
        case O_OBPOS:    rc = cli_parse_long(C, "--op-bench-pos", optarg, 0, 1 << 20, &ob_pos); break;
        case O_OBREPS:   rc = cli_parse_long(C, "--op-bench-reps", optarg, 1, 100000, &ob_reps); break;
        case 'h':
        case O_HELP:     usage(stdout); return CLI_OK;
        case ':':
            return cli_usage_error(C, "%s: a value is required", argv[optind - 1]);
        default:
            return cli_usage_error(C, "%s: not a flag of serve", argv[optind - 1]);
        }
        if (rc) return rc;
    }
    if (optind < argc)
        return cli_usage_error(C, "\"%s\": serve takes no arguments", argv[optind]);

    if (gguf_in && vocab_file)
        return cli_usage_error(C, "--vocab: \"%s\": --model's file brings its own vocabulary",
                               vocab_file);
    if (gguf_in && (preset_given || sf.layers >= 0 || sf.dim >= 0 || sf.heads >= 0 ||
                    sf.kv_heads >= 0 || sf.ffn >= 0 || sf.experts >= 0 || sf.top_k >= 0 ||
                    sf.vocab >= 0 || sf.seed >= 0 || arch >= 0 || rope_llama3))
        return cli_usage_error(C, "--model: the file fixes the shape (only --context applies)");
    cal_server_config sc = {0};
    if (gguf_in) {
        char gwhy[512];
        rc = cal_gguf_model_config(gguf_in, &sc.model, gwhy, sizeof gwhy);
        if (rc != CAL_OK)
            return cli_fail(C, "--model: %s", gwhy);
        if (sf.context >= 0) sc.model.max_ctx = (int)sf.context;
        /* the file's chat template, unless --chat-template chose one: a
         * family caliper renders, or a refusal naming the flag */
        cal_gguf_model gm;
        if (cal_gguf_read_model_file(gguf_in, &gm, gwhy, sizeof gwhy) == CAL_OK) {
            int trc = CAL_OK;
            if (!tpl_given && gm.chat_template) {
                trc = gm.chat_template_len > CAL_GGUF_TEMPLATE_MAX
                      ? cal_why(gwhy, sizeof gwhy, CAL_EINVAL, "it is %llu bytes, over the %u "
                                "caliper reads", (unsigned long long)gm.chat_template_len,
                                CAL_GGUF_TEMPLATE_MAX)
                      : cal_tpl_check_text(gm.chat_template, (size_t)gm.chat_template_len, gwhy,
                                           sizeof gwhy);
                if (trc == CAL_OK)
                    trc = cal_tpl_recognize(gm.chat_template, &tpl, gwhy, sizeof gwhy);
                tpl_from = "the file's tokenizer.chat_template";
            }
            cal_gguf_model_free(&gm);
            if (trc != CAL_OK)
                return cli_fail(C, "--model: tokenizer.chat_template: %s; serve it with "
                                "--chat-template chatml|llama3|mistral|caliper", gwhy);
        }
        const char *base = strrchr(gguf_in, '/');
        preset = base ? base + 1 : gguf_in;
    } else if (cal_model_preset(preset, &sc.model) != CAL_OK)
        return cli_usage_error(C, "--preset: \"%s\" is not tiny, small, base or moe", preset);
    int custom = 0;
#define OVERRIDE(field, v) do { if ((v) >= 0) { sc.model.field = (int)(v); custom = 1; } } while (0)
    OVERRIDE(n_layers, sf.layers);
    OVERRIDE(dim, sf.dim);
    OVERRIDE(n_heads, sf.heads);
    OVERRIDE(n_kv_heads, sf.kv_heads);
    OVERRIDE(ffn_dim, sf.ffn);
    OVERRIDE(n_experts, sf.experts);
    OVERRIDE(top_k, sf.top_k);
    OVERRIDE(vocab, sf.vocab);
    OVERRIDE(max_ctx, sf.context);
#undef OVERRIDE
    if (vocab_file) {
        /* the model's vocabulary is the file's: as many embedding rows as tokens */
        cal_tokenizer *vt = NULL;
        char vwhy[300];
        rc = cal_tok_open_gguf(vocab_file, &vt, vwhy, sizeof vwhy);
        if (rc == CAL_ENOTFOUND || rc == CAL_EIO)
            return cli_fail(C, "--vocab: %s", vwhy);
        if (rc != CAL_OK)
            return cli_usage_error(C, "--vocab: %s", vwhy);
        sc.model.vocab = cal_tok_vocab(vt);
        cal_tok_close(&vt);
        sc.vocab_gguf = vocab_file;
    }
    if (sf.experts == 0) sc.model.top_k = 0;
    if (sf.seed >= 0) sc.model.seed = (uint64_t)sf.seed;
    /* a file's matrices are held as stored unless --dtype converts them */
    sc.model.dtype = dtype;
    sc.model.as_stored = gguf_in && !dtype_given;
    if (arch >= 0) sc.model.arch = arch;
    if (rope_llama3)   /* Llama 3.2's rope_scaling */
        sc.model.rope_freqs = 1, sc.model.rope_factor = 32.0f, sc.model.rope_low_freq = 1.0f,
        sc.model.rope_high_freq = 4.0f, sc.model.rope_orig_ctx = 8192;
    if (mix && !gguf_out)
        return cli_usage_error(C, "--dtype: q4_k_m is a file format (--export-gguf); "
                               "serve its file as stored (no --dtype), or with --dtype q4_k "
                               "or f32");
    if (custom) snprintf(sc.model.name, sizeof sc.model.name, "custom");
    const char *why = NULL;
    if (cal_model_validate(&sc.model, &why) != CAL_OK) {
        int unit = cal_dtype_row_unit(dtype);
        if (why && (!strcmp(why, "dim") || !strcmp(why, "ffn_dim")))
            return cli_usage_error(C, "the model shape is impossible: %s %d is not a multiple "
                                   "of %d (whole %s blocks)", why, !strcmp(why, "dim")
                                   ? sc.model.dim : sc.model.ffn_dim, unit,
                                   cal_dtype_name(dtype));
        if (why && !strcmp(why, "rope_freqs"))
            return cli_usage_error(C, "--rope-scaling: llama3 needs --arch llama");
        if (why && !strcmp(why, "arch"))
            return cli_usage_error(C, "--arch: %s %s (the model has %d experts)",
                                   cal_arch_name(sc.model.arch),
                                   sc.model.arch == CAL_ARCH_QWEN3MOE ? "needs experts (--preset moe)"
                                   : "is dense here: use qwen3moe or llama for experts",
                                   sc.model.n_experts);
        return cli_usage_error(C, "the model shape is impossible: %s", why ? why : "?");
    }

    if (gguf_out) {
        cal_engine *eng = NULL;
        rc = cal_engine_open(&sc.model, 1, 1, &eng);
        if (rc != CAL_OK)
            return cli_fail(C, "--export-gguf: cannot open the engine: %s", cal_strerror(rc));
        char gwhy[512];
        if (gguf_in)
            print_held(gguf_in, &sc.model, eng, 1);
        /* each tensor as the engine holds it: a file held as stored goes
         * back as it was read */
        rc = cal_gguf_export_vocab(eng, gguf_out, mix ? CAL_GGUF_MIX_Q4_K_M : CAL_GGUF_AS_HELD,
                                   vocab_file, gwhy, sizeof gwhy);
        long long np = (long long)cal_model_n_params(&sc.model);
        cal_engine_close(&eng);
        if (rc == CAL_EINVAL)   /* the path or the format: what the flags asked for */
            return cli_usage_error(C, "--export-gguf: %s", gwhy);
        if (rc != CAL_OK)
            return cli_fail(C, "--export-gguf: %s", gwhy);
        fprintf(stderr, "caliper serve: wrote %s (%s, %lld params, %s, %s)\n", gguf_out,
                sc.model.name, np, mix ? "q4_k_m" : sc.model.as_stored ? "as stored"
                : cal_dtype_name(dtype), cal_arch_name(sc.model.arch));
        return CLI_OK;
    }
    if (gguf_in) {
        /* the KV cache the server will hold: max_batch sequences of max_ctx */
        double per_pos = (double)cal_model_kv_bytes_per_token(&sc.model) * (double)max_batch;
        char b1[32], b2[32];
        if (sf.context < 0 && sc.model.max_ctx > GGUF_CTX_DEFAULT) {
            double full = per_pos * sc.model.max_ctx, held = per_pos * GGUF_CTX_DEFAULT;
            fprintf(stderr, "caliper serve: --model: context_length %d would take %.0f bytes "
                    "(%s) of KV cache for %ld sequences; serving %d positions, %.0f bytes (%s) "
                    "(--context N to choose)\n", sc.model.max_ctx, full,
                    cal_unit_format(CAL_U_BYTES, full, 3, b1, sizeof b1), max_batch,
                    GGUF_CTX_DEFAULT, held, cal_unit_format(CAL_U_BYTES, held, 3, b2, sizeof b2));
            sc.model.max_ctx = GGUF_CTX_DEFAULT;
        } else if (per_pos * sc.model.max_ctx > KV_NOTE_BYTES) {
            double full = per_pos * sc.model.max_ctx;
            fprintf(stderr, "caliper serve: --model: context %d takes %.0f bytes (%s) of KV "
                    "cache for %ld sequences\n", sc.model.max_ctx, full,
                    cal_unit_format(CAL_U_BYTES, full, 3, b1, sizeof b1), max_batch);
        }
    }
    if (pace_ms == 0 && !op_bench) {
        rc = check_reservation(&sc.model, gguf_in, max_batch, kv_overcommit);
        if (rc) return rc;
    }
    char name[128];
    if (!model_name) {
        /* a format other than f32 is part of the model's identity */
        snprintf(name, sizeof name, "%s%s%s%s", gguf_in ? "" : "caliper-",
                 gguf_in ? preset : custom ? "custom" : preset,
                 dtype != CAL_DTYPE_F32 ? "-" : "", dtype != CAL_DTYPE_F32 ? cal_dtype_name(dtype) : "");
        model_name = name;
    }
    sc.model_name = model_name;
    sc.chat_template = tpl;
    sc.preset = preset;
    sc.host = host;
    sc.port = (int)port;
    sc.max_batch = (int)max_batch;
    sc.max_queue = (int)max_queue;
    sc.prefill_chunk = (int)chunk;
    sc.pace_ns = (int64_t)pace_ms * 1000000;
    sc.max_body_bytes = (size_t)max_body;
    sc.http_threads = (int)http_threads;
    sc.max_connections = (int)max_conn;
    sc.header_timeout_ns = (int64_t)(head_s * 1e9);
    sc.body_timeout_ns = (int64_t)(body_s * 1e9);
    sc.send_timeout_ns = (int64_t)(send_s * 1e9);
    if (threads > 0) openblas_set_num_threads((int)threads);
    if (op_bench) return run_op_bench(&sc.model, op_bench, ob_tokens, ob_pos, ob_reps);

    /* thousands of paced streams need as many descriptors as the system allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (pipe(g_sig_pipe) != 0) return cli_fail(C, "pipe: %s", strerror(errno));
    fcntl(g_sig_pipe[0], F_SETFD, FD_CLOEXEC);
    fcntl(g_sig_pipe[1], F_SETFD, FD_CLOEXEC);
    fcntl(g_sig_pipe[1], F_SETFL, O_NONBLOCK);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;          /* no SA_RESTART: the read below must see EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* the server's threads inherit a mask without SIGINT/SIGTERM, so the
     * signal lands on this thread, which Linux also tries first */
    sigset_t sigs, old;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, &old);

    cal_server *srv = NULL;
    char reason[256];
    rc = cal_server_open(&sc, &srv, reason, sizeof reason);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != CAL_OK) {
        if (rc == CAL_EINVAL && strncmp(reason, "--", 2) == 0)
            return cli_usage_error(C, "%s", reason);
        return cli_fail(C, "%s", reason[0] ? reason : cal_strerror(rc));
    }
    if (gguf_in && cal_server_engine(srv))
        print_held(gguf_in, &sc.model, cal_server_engine(srv), max_batch);
    const char *warn = cli_build_warning();
    if (warn) fprintf(stderr, "caliper serve: warning: %s\n", warn);
    int v6 = strchr(host, ':') != NULL;
    fprintf(stderr, "caliper serve: chat template %s (%s)\n", cal_tpl_name(sc.chat_template.kind),
            tpl_given ? "--chat-template" : tpl_from);
    const char *vnote = cal_server_vocab_note(srv);
    if (vnote[0])
        fprintf(stderr, "caliper serve: warning: vocabulary: %s\n", vnote);
    /* the kernel set, and OPENBLAS_CORETYPE when it chose it (main sets it
     * for serve): a run records this line's tail as the target's detail */
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    const char *better = cal_engine_blas_coretype_advice();
    if (coretype && better)
        fprintf(stderr, "caliper serve: warning: OPENBLAS_CORETYPE=%s in the environment holds "
                "OpenBLAS to %s kernels on a CPU that runs %s's; prefill is slower than this "
                "engine can be (unset it to let OpenBLAS choose)\n", coretype,
                cal_engine_blas_core(), better);
    char kernels[160];
    fprintf(stderr, "caliper serve: kernels: %s\n", cal_engine_kernels(kernels, sizeof kernels));
    printf("caliper serve: listening on http://%s%s%s:%d (model %s, %lld params, OpenBLAS %s%s%s)\n",
           v6 ? "[" : "", host, v6 ? "]" : "", cal_server_port(srv), model_name,
           (long long)cal_server_n_params(srv), cal_engine_blas_core(),
           coretype ? " with OPENBLAS_CORETYPE=" : "", coretype ? coretype : "");
    fflush(stdout);
    if (pace_ms > 0)
        fprintf(stderr, "caliper serve: pacing mode, one chunk every %ld ms, no model compute\n",
                pace_ms);

    char c;
    while (read(g_sig_pipe[0], &c, 1) < 0 && errno == EINTR) {}
    int sig = g_sig;
    fprintf(stderr, "caliper serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    int status = CLI_OK;
    if (profile) {
        char *json = cal_server_profile_json(srv);
        if (!json) {
            status = cli_fail(C, "--profile: no profile (%s)", pace_ms > 0
                              ? "pacing mode runs no engine" : "the engine gave none");
        } else {
            if (write_profile(profile, json) != CAL_OK)
                status = cli_fail(C, "--profile: cannot write \"%s\"", profile);
            free(json);
        }
    }
    cal_server_close(&srv);
    close(g_sig_pipe[0]);
    close(g_sig_pipe[1]);
    return status;
}
