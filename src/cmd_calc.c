/* caliper calc — the field notes' formulas (SPEC 1.4) from flags.
 * One table of calculators: each names its flags (with unit kinds), a
 * compute function that calls lib/analysis, and an explain function that
 * writes the formula with the numbers put in and one sentence on what the
 * result means. Parsing, range errors, text and JSON share one path. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "caliper/error.h"
#include "caliper/fit.h"
#include "caliper/formulas.h"
#include "caliper/gguf.h"
#include "caliper/stats.h"
#include "cli.h"

#define MAX_FLAGS   16
#define MAX_RESULTS 24
#define LIST_CAP    16
#define TEXT_CAP    4096
#define SCORES_CAP  100000   /* values per score file */

typedef enum { F_NUM, F_LIST, F_PATH, F_BOOL } flag_kind;

typedef struct flag_spec {
    const char *name;      /* without the dashes: "ttft" */
    flag_kind   kind;
    cal_unit    unit;      /* F_NUM, F_LIST */
    const char *bare;      /* what a bare number means ("s", "MHz"), or NULL */
    int         required;
    double      def;       /* used when not given; NAN: absent */
    const char *range;     /* what a valid value is, for errors and --help */
    const char *help;
} flag_spec;

typedef struct result {
    const char *key;       /* JSON key */
    cal_unit    unit;
    double      v;
    int         null;      /* no value exists (JSON null) */
} result;

struct calc_def;
typedef struct calc_ctx {
    const struct calc_def *def;
    const char *cmd;                      /* "calc NAME", for messages */
    double      v[MAX_FLAGS];
    int         given[MAX_FLAGS];
    const char *raw[MAX_FLAGS];
    double      list[MAX_FLAGS][LIST_CAP];
    size_t      nlist[MAX_FLAGS];
    result      res[MAX_RESULTS];
    size_t      nres;
    const char *bad;                      /* flag named by a failed compute */
    char        why[512];                 /* a specific reason, or "" */
    char        formula[TEXT_CAP];
    char        meaning[TEXT_CAP];
    json_t     *extra;                    /* calculator-specific JSON, or NULL */
} calc_ctx;

typedef struct calc_def {
    const char *name;
    const char *desc;                     /* one line for --list */
    const char *example;
    flag_spec   flags[MAX_FLAGS];
    int  (*compute)(calc_ctx *c);         /* CAL_OK, or an error with c->bad */
    void (*explain)(calc_ctx *c);         /* fills formula and meaning */
} calc_def;

/* ---- helpers ------------------------------------------------------------ */

static int idx(const calc_ctx *c, const char *name)
{
    for (int i = 0; i < MAX_FLAGS && c->def->flags[i].name; i++)
        if (!strcmp(c->def->flags[i].name, name)) return i;
    fprintf(stderr, "caliper: internal: calculator %s has no flag %s\n", c->def->name, name);
    abort();
}
static double in(const calc_ctx *c, const char *name) { return c->v[idx(c, name)]; }
static int given(const calc_ctx *c, const char *name) { return c->given[idx(c, name)]; }
static const char *path(const calc_ctx *c, const char *name) { return c->raw[idx(c, name)]; }

static void put(calc_ctx *c, const char *key, cal_unit u, double v)
{
    if (c->nres < MAX_RESULTS) c->res[c->nres++] = (result){key, u, v, 0};
}
static void put_null(calc_ctx *c, const char *key)
{
    if (c->nres < MAX_RESULTS) c->res[c->nres++] = (result){key, CAL_U_RATIO, 0, 1};
}
static double out(const calc_ctx *c, const char *key)
{
    for (size_t i = 0; i < c->nres; i++)
        if (!strcmp(c->res[i].key, key)) return c->res[i].null ? NAN : c->res[i].v;
    return NAN;
}

static void appendf(char *dst, const char *fmt, va_list ap)
{
    size_t n = strlen(dst);
    if (n + 1 < TEXT_CAP) vsnprintf(dst + n, TEXT_CAP - n, fmt, ap);
}
static void say(calc_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(calc_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    appendf(c->formula, fmt, ap);
    va_end(ap);
}
static void mean_(calc_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mean_(calc_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    appendf(c->meaning, fmt, ap);
    va_end(ap);
}
static int why(calc_ctx *c, const char *flag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int why(calc_ctx *c, const char *flag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->bad = flag;
    return CAL_ERANGE;
}

/* Numbers for the text: `sig` significant digits, fixed point (scientific
 * only far out), trailing zeros trimmed when trim. Rotating buffers. */
static const char *num_(double v, int sig, int trim)
{
    static char pool[48][64];
    static unsigned k;
    char *b = pool[k++ % 48];
    if (!isfinite(v)) return "—";
    double a = fabs(v);
    if (a != 0 && (a >= 1e12 || a < 1e-6)) {
        snprintf(b, 64, "%.*e", sig - 1, v);
        return b;
    }
    int dec = a == 0 ? 0 : sig - ((int)floor(log10(a)) + 1);
    if (dec < 0) dec = 0;
    if (dec > 12) dec = 12;
    snprintf(b, 64, "%.*f", dec, v);
    if (trim && strchr(b, '.')) {
        char *e = b + strlen(b) - 1;
        while (*e == '0') *e-- = '\0';
        if (*e == '.') *e = '\0';
    }
    return b;
}
static const char *N(double v) { return num_(v, 6, 1); }    /* an input */
static const char *R(double v) { return num_(v, 4, 0); }    /* a result */
static const char *R3(double v) { return num_(v, 3, 1); }   /* in a sentence */
static const char *Q(cal_unit u, double v)                  /* a quantity */
{
    static char pool[48][64];
    static unsigned k;
    return cal_unit_format(u, v, 4, pool[k++ % 48], 64);
}
static const char *Q3(cal_unit u, double v)
{
    static char pool[48][64];
    static unsigned k;
    return cal_unit_format(u, v, 3, pool[k++ % 48], 64);
}
static const char *PCT(double frac)                         /* "38 %", "5.5 %" */
{
    static char pool[16][32];
    static unsigned k;
    char *b = pool[k++ % 16];
    double p = frac * 100;
    snprintf(b, 32, fabs(p) >= 10 || p == 0 ? "%.0f %%" : fabs(p) >= 1 ? "%.1f %%" : "%.2f %%", p);
    return b;
}

/* ---- calculators -------------------------------------------------------- */

#define END {0}
#define NUMF(n, u, b, req, d, range, help) {n, F_NUM, u, b, req, d, range, help}
#define POSR "must be > 0"
#define NNEG "must be >= 0"

/* prefill-throughput, client-decode */
static int c_rate(calc_ctx *c)
{
    double r;
    int rc = cal_f_rate(in(c, "tokens"), in(c, "seconds"), &r, &c->bad);
    if (rc) return rc;
    put(c, "tok_per_s", CAL_U_TOKRATE, r);
    if (c->def->name[0] == 'c' && given(c, "ttft")) {
        double turn;
        rc = cal_f_rate(in(c, "tokens"), in(c, "seconds") + in(c, "ttft"), &turn, &c->bad);
        if (rc) { c->bad = "ttft"; return rc; }
        put(c, "whole_turn_tok_per_s", CAL_U_TOKRATE, turn);
    }
    return CAL_OK;
}
static void e_prefill(calc_ctx *c)
{
    say(c, "prefill throughput = tokens ÷ seconds\n"
           "                   = %s ÷ %s s = %s tok/s\n",
        N(in(c, "tokens")), N(in(c, "seconds")), R(out(c, "tok_per_s")));
    if (given(c, "from-ttft"))
        mean_(c, "%s tok/s is only a lower bound on prefill throughput: a TTFT also holds "
                 "queueing, tokenisation, the network and the first decode step.",
              R(out(c, "tok_per_s")));
    else
        mean_(c, "%s prompt tokens went through prefill at %s tok/s; if the seconds are a "
                 "TTFT, that is only a lower bound (--from-ttft).",
              N(in(c, "tokens")), R(out(c, "tok_per_s")));
}
static void e_client(calc_ctx *c)
{
    say(c, "client decode speed = decode tokens ÷ decode seconds\n"
           "                    = %s ÷ %s s = %s tok/s\n",
        N(in(c, "tokens")), N(in(c, "seconds")), R(out(c, "tok_per_s")));
    if (given(c, "ttft")) {
        say(c, "whole turn          = %s ÷ (%s s + %s s) = %s tok/s\n",
            N(in(c, "tokens")), N(in(c, "ttft")), N(in(c, "seconds")),
            R(out(c, "whole_turn_tok_per_s")));
        mean_(c, "The client shows %s tok/s, counting decode time only; over the whole turn, "
                 "%s waiting for the first token included, the user got %s tok/s.",
              R(out(c, "tok_per_s")), Q(CAL_U_TIME, in(c, "ttft")),
              R(out(c, "whole_turn_tok_per_s")));
    } else {
        mean_(c, "This is what a chat client shows (decode only, %s tok/s); it leaves out the "
                 "wait for the first token (add --ttft to see the whole turn).",
              R(out(c, "tok_per_s")));
    }
}

static int c_warm(calc_ctx *c)
{
    double w;
    int rc = cal_f_warm_from_cold(in(c, "cold"), in(c, "f-cold"), in(c, "f-warm"), &w, &c->bad);
    if (rc) return rc;
    put(c, "warm_tok_per_s", CAL_U_TOKRATE, w);
    put(c, "clock_ratio", CAL_U_RATIO, in(c, "f-warm") / in(c, "f-cold"));
    if (given(c, "measured")) {
        if (!(in(c, "measured") > 0)) return why(c, "measured", "must be > 0");
        put(c, "deviation", CAL_U_RATIO, in(c, "measured") / w - 1);
    }
    return CAL_OK;
}
static void e_warm(calc_ctx *c)
{
    double fc = in(c, "f-cold") / 1e6, fw = in(c, "f-warm") / 1e6;
    say(c, "warm ≈ cold × f_warm ÷ f_cold\n"
           "     = %s × %s MHz ÷ %s MHz = %s tok/s\n",
        N(in(c, "cold")), N(fw), N(fc), R(out(c, "warm_tok_per_s")));
    if (!given(c, "measured")) {
        mean_(c, "If the clock alone slowed the warm shots they run near %s tok/s; a measured "
                 "warm figure within ~1–2 %% of it says frequency only, one far off says the "
                 "cycles per token changed (a different problem).",
              R(out(c, "warm_tok_per_s")));
        return;
    }
    double d = out(c, "deviation");
    say(c, "measured %s tok/s is %+.1f %% from the prediction\n", N(in(c, "measured")), d * 100);
    if (fabs(d) <= 0.02)
        mean_(c, "Measured warm speed is within %s of cold × clock ratio: the slowdown is the "
                 "clock alone (a power or thermal wall), not extra work.", PCT(fabs(d)));
    else
        mean_(c, "Measured warm speed is %s %s the clock-ratio prediction: the clock does not "
                 "explain it, the cycles per token changed — look at the work, not the wall.",
              PCT(fabs(d)), d < 0 ? "below" : "above");
}

static int c_power(calc_ctx *c)
{
    int rc;
    double wall = in(c, "wall"), mem = in(c, "memory");
    if (given(c, "gpu")) {
        double res;
        if ((rc = cal_f_power_residual(wall, in(c, "gpu"), mem, &res, &c->bad))) {
            if (rc == CAL_ERANGE && c->bad && !strcmp(c->bad, "wall"))
                return why(c, "wall", "is below --gpu + --memory (%s W): not a wall",
                           N(in(c, "gpu") + mem));
            return rc;
        }
        put(c, "gpu_plus_memory_w", CAL_U_POWER, in(c, "gpu") + mem);
        put(c, "residual_w", CAL_U_POWER, res);
        if (given(c, "gpu2") != given(c, "memory2"))
            return why(c, given(c, "gpu2") ? "memory2" : "gpu2",
                       "is needed with --%s: the second configuration needs both",
                       given(c, "gpu2") ? "gpu2" : "memory2");
        if (given(c, "gpu2")) {
            double res2;
            rc = cal_f_power_residual(wall, in(c, "gpu2"), in(c, "memory2"), &res2, &c->bad);
            if (rc == CAL_ERANGE && c->bad && !strcmp(c->bad, "wall"))
                return why(c, "wall", "is below --gpu2 + --memory2 (%s W): not a wall",
                           N(in(c, "gpu2") + in(c, "memory2")));
            if (rc) {
                if (!strcmp(c->bad, "gpu")) c->bad = "gpu2";
                else if (!strcmp(c->bad, "memory")) c->bad = "memory2";
                return rc;
            }
            put(c, "gpu_plus_memory2_w", CAL_U_POWER, in(c, "gpu2") + in(c, "memory2"));
            put(c, "residual2_w", CAL_U_POWER, res2);
            put(c, "delta_memory_w", CAL_U_POWER, in(c, "memory2") - mem);
            put(c, "delta_gpu_w", CAL_U_POWER, in(c, "gpu2") - in(c, "gpu"));
        }
        return CAL_OK;
    }
    if (!given(c, "residual"))
        return why(c, "gpu", "or --residual is required: give the GPU's power to find the "
                   "residual, or the residual to find the GPU's share");
    double gpu;
    if ((rc = cal_f_power_gpu(wall, mem, in(c, "residual"), &gpu, &c->bad))) {
        if (rc == CAL_ERANGE && c->bad && !strcmp(c->bad, "wall"))
            return why(c, "wall", "is below --memory + --residual (%s W)",
                       N(mem + in(c, "residual")));
        return rc;
    }
    put(c, "gpu_w", CAL_U_POWER, gpu);
    return CAL_OK;
}
static void e_power(calc_ctx *c)
{
    double wall = in(c, "wall");
    if (!given(c, "gpu")) {
        say(c, "P_gpu ≈ P_wall − P_memory_path − residual\n"
               "      = %s − %s − %s = %s W\n", N(wall), N(in(c, "memory")),
            N(in(c, "residual")), R(out(c, "gpu_w")));
        mean_(c, "Under a %s W wall the GPU can have at most %s W: every watt the memory path "
                 "takes is a watt the GPU does not get.", N(wall), R3(out(c, "gpu_w")));
        return;
    }
    say(c, "residual = P_wall − (P_gpu + P_memory_path)\n"
           "         = %s − (%s + %s) = %s − %s = %s W\n", N(wall), N(in(c, "gpu")),
        N(in(c, "memory")), N(wall), R3(out(c, "gpu_plus_memory_w")), R3(out(c, "residual_w")));
    if (!given(c, "gpu2")) {
        mean_(c, "GPU and memory path draw %s W of the %s W wall; the other %s W is the rest of "
                 "the machine. Measure a second configuration (--gpu2, --memory2) to see "
                 "whether the parts trade watts.", R3(out(c, "gpu_plus_memory_w")), N(wall),
              R3(out(c, "residual_w")));
        return;
    }
    say(c, "second:    %s − (%s + %s) = %s − %s = %s W\n", N(wall), N(in(c, "gpu2")),
        N(in(c, "memory2")), N(wall), R3(out(c, "gpu_plus_memory2_w")),
        R3(out(c, "residual2_w")));
    double dm = out(c, "delta_memory_w"), dg = out(c, "delta_gpu_w");
    double d_sum = fabs(out(c, "gpu_plus_memory2_w") - out(c, "gpu_plus_memory_w"));
    if (d_sum <= 0.05 * wall && dm * dg < 0)
        mean_(c, "Both configurations sum to about the same (%s vs %s W) under the %s W wall: "
                 "the %+.1f W on the memory path came out of the GPU (%+.1f W) — a power wall, "
                 "not a slower chip.", R3(out(c, "gpu_plus_memory_w")),
              R3(out(c, "gpu_plus_memory2_w")), N(wall), dm, dg);
    else
        mean_(c, "The sums differ by %s W (%s vs %s W): the parts do not simply trade watts "
                 "under one wall here.", R3(d_sum), R3(out(c, "gpu_plus_memory_w")),
              R3(out(c, "gpu_plus_memory2_w")));
}

static int c_whole_turn(calc_ctx *c)
{
    double s, share;
    int rc = cal_f_whole_turn(in(c, "ttft"), in(c, "decode"), in(c, "speedup"), &s, &share,
                              &c->bad);
    if (rc) return rc;
    put(c, "whole_turn_speedup", CAL_U_RATIO, s);
    put(c, "ttft_share", CAL_U_RATIO, share);
    return CAL_OK;
}
static void e_whole_turn(calc_ctx *c)
{
    say(c, "whole-turn speedup = (TTFT + decode × s) ÷ (TTFT + decode)\n"
           "                   = (%s + %s × %s) ÷ (%s + %s) = %s\n",
        N(in(c, "ttft")), N(in(c, "decode")), N(in(c, "speedup")), N(in(c, "ttft")),
        N(in(c, "decode")), R(out(c, "whole_turn_speedup")));
    mean_(c, "An engine-side %s× becomes %s× of the user's whole turn: %s of the turn is "
             "waiting for the first token.", N(in(c, "speedup")),
          num_(out(c, "whole_turn_speedup"), 3, 0), PCT(out(c, "ttft_share")));
}

static int c_bw(calc_ctx *c)
{
    double saved;
    int rc = cal_f_bw_saving(in(c, "bytes"), in(c, "bandwidth"), in(c, "share"), &saved, &c->bad);
    if (rc) return rc;
    put(c, "saved_s_per_step", CAL_U_TIME, saved);
    if (given(c, "tokens-per-step") != given(c, "step-time"))
        return why(c, given(c, "step-time") ? "tokens-per-step" : "step-time",
                   "is needed too: the predicted speed takes tokens per step and step time");
    if (given(c, "tokens-per-step")) {
        double tps;
        if ((rc = cal_f_bw_predicted(in(c, "tokens-per-step"), in(c, "step-time"), saved, &tps,
                                     &c->bad)))
            return rc == CAL_ERANGE && !strcmp(c->bad, "step-time")
                 ? why(c, "step-time", "is not longer than the saving bound (%s): the bound "
                       "would remove the whole step", Q(CAL_U_TIME, saved)) : rc;
        double base = in(c, "tokens-per-step") / in(c, "step-time");
        put(c, "baseline_tok_per_s", CAL_U_TOKRATE, base);
        put(c, "predicted_tok_per_s", CAL_U_TOKRATE, tps);
        if (given(c, "measured")) {
            if (!(in(c, "measured") > 0)) return why(c, "measured", "must be > 0");
            /* a saving too small to move tok/s in double precision predicts
             * no gain: no fraction of it can be given */
            double gain = tps - base, f = (in(c, "measured") - base) / gain;
            if (!(gain > 0) || !isfinite(f))
                return why(c, "bytes", "saves %s per step, too little to predict a gain over "
                           "%s tok/s to compare --measured with", Q(CAL_U_TIME, saved),
                           R(base));
            put(c, "realized_fraction", CAL_U_RATIO, f);
        }
    } else if (given(c, "measured")) {
        return why(c, "measured", "needs --tokens-per-step and --step-time to compare with");
    }
    return CAL_OK;
}
static void e_bw(calc_ctx *c)
{
    say(c, "time saved per step ≤ bytes ÷ bandwidth × share\n"
           "                    = %s ÷ %s × %s = %s\n", Q(CAL_U_BYTES, in(c, "bytes")),
        Q(CAL_U_BANDWIDTH, in(c, "bandwidth")), N(in(c, "share")),
        Q(CAL_U_TIME, out(c, "saved_s_per_step")));
    if (!given(c, "tokens-per-step")) {
        mean_(c, "Saving %s per step can save at most %s of step time; for tok/s add "
                 "--tokens-per-step and --step-time.", Q3(CAL_U_BYTES, in(c, "bytes")),
              Q(CAL_U_TIME, out(c, "saved_s_per_step")));
        return;
    }
    say(c, "predicted = tokens per step ÷ (step − saved)\n"
           "          = %s ÷ (%s − %s) = %s tok/s (from %s tok/s)\n",
        N(in(c, "tokens-per-step")), Q(CAL_U_TIME, in(c, "step-time")),
        Q(CAL_U_TIME, out(c, "saved_s_per_step")), R(out(c, "predicted_tok_per_s")),
        R(out(c, "baseline_tok_per_s")));
    if (given(c, "measured")) {
        double f = out(c, "realized_fraction");
        say(c, "measured %s tok/s = %s of the predicted gain\n", N(in(c, "measured")), PCT(f));
        if (f > 1.02)
            mean_(c, "The measured %s tok/s is above the bound's %s tok/s: saving these bytes "
                     "cannot explain it — something else changed too (check capacity: did "
                     "something stop swapping?).", N(in(c, "measured")),
                  R(out(c, "predicted_tok_per_s")));
        else if (f < 0.8)
            mean_(c, "The bound allowed %s tok/s, the change gave %s: the stage did not fill the "
                     "step (its share is below %s), or the saving was not on the critical "
                     "path.", R(out(c, "predicted_tok_per_s")), N(in(c, "measured")),
                  N(in(c, "share")));
        else
            mean_(c, "The measured %s tok/s reaches %s of the bound's gain: the saving was "
                     "bandwidth on the critical path.", N(in(c, "measured")), PCT(f));
    } else {
        mean_(c, "At best the change gives %s tok/s; a claim above that did not come from "
                 "these bytes (check capacity: did something stop swapping?).",
              R(out(c, "predicted_tok_per_s")));
    }
}

static int c_capacity(calc_ctx *c)
{
    double need, head;
    int fits, i = idx(c, "models");
    int rc = cal_f_capacity(c->list[i], c->nlist[i], in(c, "reserve"), in(c, "memory"), &need,
                            &head, &fits, &c->bad);
    if (rc) return rc;
    put(c, "need_bytes", CAL_U_BYTES, need);
    put(c, "headroom_bytes", CAL_U_BYTES, head);
    put(c, "fits", CAL_U_RATIO, fits);
    return CAL_OK;
}
static void e_capacity(calc_ctx *c)
{
    int i = idx(c, "models");
    say(c, "need = Σ model bytes + reserve = ");
    for (size_t k = 0; k < c->nlist[i]; k++)
        say(c, "%s%s", k ? " + " : "", Q(CAL_U_BYTES, c->list[i][k]));
    say(c, " + %s = %s\n", Q(CAL_U_BYTES, in(c, "reserve")), Q(CAL_U_BYTES, out(c, "need_bytes")));
    say(c, "memory − need = %s − %s = %s\n", Q(CAL_U_BYTES, in(c, "memory")),
        Q(CAL_U_BYTES, out(c, "need_bytes")), Q(CAL_U_BYTES, out(c, "headroom_bytes")));
    if (out(c, "fits") > 0)
        mean_(c, "They already fit with %s to spare: a saving that came from not swapping "
                 "(capacity) is worth zero on this machine; only bytes read per step "
                 "(bandwidth) can make it faster.", Q3(CAL_U_BYTES, out(c, "headroom_bytes")));
    else
        mean_(c, "They do not fit (short by %s): here a smaller footprint avoids swapping "
                 "(capacity), which can outweigh any bandwidth effect — and is worth nothing on "
                 "a machine where they fit.", Q3(CAL_U_BYTES, -out(c, "headroom_bytes")));
}

static int c_amdahl(calc_ctx *c)
{
    double e;
    int rc = cal_f_amdahl(in(c, "kernel-speedup"), in(c, "share"), &e, &c->bad);
    if (rc) return rc;
    put(c, "e2e_speedup", CAL_U_RATIO, e);
    put(c, "limit_speedup", CAL_U_RATIO, in(c, "share") < 1 ? 1 / (1 - in(c, "share")) : 0);
    if (!(in(c, "share") < 1)) c->res[c->nres - 1].null = 1;
    return CAL_OK;
}
static void e_amdahl(calc_ctx *c)
{
    double p = in(c, "share"), s = in(c, "kernel-speedup"), e = out(c, "e2e_speedup");
    say(c, "e2e = 1 ÷ ((1 − p) + p ÷ s)\n"
           "    = 1 ÷ ((1 − %s) + %s ÷ %s) = %s\n", N(p), N(p), N(s), R(e));
    if (p < 1)
        mean_(c, "A %s× kernel that is %s of end-to-end time makes the whole %s× (%+.1f %%); "
                 "even at zero time it could give only %s×.", N(s), PCT(p), R(e), (e - 1) * 100,
              R(1 / (1 - p)));
    else
        mean_(c, "The kernel is all of the time, so the whole speeds up as much as it does.");
}

static int c_amdahl_share(calc_ctx *c)
{
    double e;
    if (given(c, "e2e") == given(c, "e2e-gain"))
        return why(c, given(c, "e2e") ? "e2e-gain" : "e2e",
                   "%s: give the end-to-end change once, as --e2e 1.055 or --e2e-gain 5.5%%",
                   given(c, "e2e") ? "cannot be given with --e2e" : "or --e2e-gain is required");
    e = given(c, "e2e") ? in(c, "e2e") : 1 + in(c, "e2e-gain");
    if (!(e > 0))
        return why(c, given(c, "e2e") ? "e2e" : "e2e-gain", "is not a possible end-to-end "
                   "change: the speedup must be > 0 (a gain above -100 %%)");
    double p;
    int rc = cal_f_amdahl_share(in(c, "kernel-speedup"), e, &p, &c->bad);
    if (rc == CAL_ERANGE && c->bad && !strcmp(c->bad, "e2e")) {
        const char *f = given(c, "e2e") ? "e2e" : "e2e-gain";
        return why(c, f, "is more than a %s× kernel can give at any share (or the opposite "
                   "sign): no share in [0, 1] explains it", N(in(c, "kernel-speedup")));
    }
    if (rc) return rc;
    put(c, "e2e_speedup", CAL_U_RATIO, e);
    put(c, "share", CAL_U_RATIO, p);
    return CAL_OK;
}
static void e_amdahl_share(calc_ctx *c)
{
    double s = in(c, "kernel-speedup"), e = out(c, "e2e_speedup"), p = out(c, "share");
    say(c, "p = (1 − 1 ÷ e2e) ÷ (1 − 1 ÷ s)\n"
           "  = (1 − 1 ÷ %s) ÷ (1 − 1 ÷ %s) = %s\n", N(e), N(s), R(p));
    mean_(c, "A %s× kernel speedup that moved the whole by %+.1f %% means the kernel was %s of "
             "end-to-end time: the other %s is where the time is.", N(s), (e - 1) * 100, PCT(p),
          PCT(1 - p));
}

static int c_coverage(calc_ctx *c)
{
    double cov, ceil_;
    int rc;
    if (given(c, "coverage")) {
        if (given(c, "kernel-time") || given(c, "total-time"))
            return why(c, "kernel-time", "cannot be given with --coverage: give one or the "
                       "other");
        cov = in(c, "coverage");
    } else {
        if (!given(c, "kernel-time") || !given(c, "total-time"))
            return why(c, given(c, "kernel-time") ? "total-time" : "coverage",
                       "is required (or --kernel-time with --total-time)");
        if ((rc = cal_f_coverage(in(c, "kernel-time"), in(c, "total-time"), &cov, &c->bad)))
            return rc;
    }
    if ((rc = cal_f_coverage_ceiling(cov, &ceil_, &c->bad))) return rc;
    put(c, "coverage", CAL_U_RATIO, cov);
    put(c, "ceiling", CAL_U_RATIO, ceil_);
    put(c, "outside_kernels", CAL_U_RATIO, 1 - cov);
    return CAL_OK;
}
static void e_coverage(calc_ctx *c)
{
    if (!given(c, "coverage"))
        say(c, "coverage = Σ kernel time ÷ end-to-end = %s ÷ %s = %s\n",
            Q(CAL_U_TIME, in(c, "kernel-time")), Q(CAL_U_TIME, in(c, "total-time")),
            R(out(c, "coverage")));
    say(c, "ceiling = 1 ÷ (1 − coverage) = 1 ÷ (1 − %s) = %s\n", R(out(c, "coverage")),
        R(out(c, "ceiling")));
    mean_(c, "Even if every known kernel took zero time the whole would run at most %s× "
             "faster: %s of the time belongs to no kernel (dispatch, launches, sync).",
          R(out(c, "ceiling")), PCT(out(c, "outside_kernels")));
}

static int c_coverage_inv(calc_ctx *c)
{
    double cov;
    int rc = cal_f_coverage_from_ceiling(in(c, "ceiling"), &cov, &c->bad);
    if (rc) return rc;
    put(c, "coverage", CAL_U_RATIO, cov);
    put(c, "outside_kernels", CAL_U_RATIO, 1 - cov);
    return CAL_OK;
}
static void e_coverage_inv(calc_ctx *c)
{
    say(c, "coverage = 1 − 1 ÷ ceiling = 1 − 1 ÷ %s = %s\n", N(in(c, "ceiling")),
        R(out(c, "coverage")));
    mean_(c, "A %s× ceiling means the known kernels cover %s of the time: %s belongs to no "
             "kernel — count launches and dispatch before tuning kernels.", N(in(c, "ceiling")),
          PCT(out(c, "coverage")), PCT(out(c, "outside_kernels")));
}

static int c_launch(calc_ctx *c)
{
    double per;
    int rc = cal_f_launch_overhead(in(c, "total-time"), in(c, "kernel-time"), in(c, "launches"),
                                   &per, &c->bad);
    if (rc) return rc;
    put(c, "per_launch_s", CAL_U_TIME, per);
    put(c, "outside_kernels", CAL_U_RATIO, 1 - in(c, "kernel-time") / in(c, "total-time"));
    return CAL_OK;
}
static void e_launch(calc_ctx *c)
{
    say(c, "per-launch overhead = (end-to-end − Σ kernel time) ÷ launches\n"
           "                    = (%s − %s) ÷ %s = %s\n", Q(CAL_U_TIME, in(c, "total-time")),
        Q(CAL_U_TIME, in(c, "kernel-time")), N(in(c, "launches")),
        Q(CAL_U_TIME, out(c, "per_launch_s")));
    mean_(c, "%s of the time is outside kernels, %s per launch: fewer launches (fusion, "
             "graphs) pay back that much each.", PCT(out(c, "outside_kernels")),
          Q(CAL_U_TIME, out(c, "per_launch_s")));
}

static int c_kv(calc_ctx *c)
{
    cal_kv_shape s = {0};
    cal_model_shape m;
    char w[256];
    int nsrc = given(c, "config") + given(c, "gguf") + (given(c, "layers") ? 1 : 0);
    if (nsrc == 0)
        return why(c, "layers", "is required (with --kv-heads and --head-dim), or give "
                   "--config config.json or --gguf model.gguf");
    if (given(c, "config") && given(c, "gguf"))
        return why(c, "gguf", "cannot be given with --config: give one model description");
    double bits = 16;
    if (given(c, "config") || given(c, "gguf")) {
        const char *f = given(c, "config") ? "config" : "gguf";
        int rc = given(c, "config") ? cal_hfconfig_read_file(path(c, f), &m, w, sizeof w)
                                    : cal_gguf_read_file(path(c, f), &m, w, sizeof w);
        if (rc) return why(c, f, "%s (%s)", w[0] ? w : "cannot be read", cal_strerror(rc));
        s.layers = (double)m.layers;
        s.kv_heads = (double)m.kv_heads;
        s.k_dim = (double)m.k_dim;
        s.v_dim = (double)m.v_dim;
        if (m.dtype_bits > 0) bits = m.dtype_bits;
        c->extra = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:b}", "source", m.source,
                             "arch", m.arch, "name", m.name, "layers", (json_int_t)m.layers,
                             "heads", (json_int_t)m.heads, "kv_heads", (json_int_t)m.kv_heads,
                             "k_dim", (json_int_t)m.k_dim, "v_dim", (json_int_t)m.v_dim,
                             "kv_heads_per_layer", m.kv_heads_varies);
    }
    /* shape flags override what a file said */
    if (given(c, "layers")) s.layers = in(c, "layers");
    if (given(c, "kv-heads")) s.kv_heads = in(c, "kv-heads");
    if (given(c, "head-dim")) s.k_dim = in(c, "head-dim");
    if (given(c, "v-head-dim")) s.v_dim = in(c, "v-head-dim");
    static const char *const shape[] = {"layers", "kv-heads", "head-dim", "v-head-dim", "tokens"};
    for (size_t k = 0; k < sizeof shape / sizeof *shape; k++)
        if (given(c, shape[k]) && !(in(c, shape[k]) > 0)) { c->bad = shape[k]; return CAL_ERANGE; }
    if (!s.kv_heads) return why(c, "kv-heads", "is required with --layers");
    if (!s.k_dim) return why(c, "head-dim", "is required with --layers");
    s.bits = given(c, "kv-bits") ? in(c, "kv-bits") : bits;
    s.group = in(c, "group-size");
    s.scale_bytes = in(c, "scale-bytes");
    double b;
    int rc = cal_f_kv_bytes_per_token(&s, &b, &c->bad);
    if (rc) return rc;
    put(c, "layers", CAL_U_COUNT, s.layers);
    put(c, "kv_heads", CAL_U_COUNT, s.kv_heads);
    put(c, "k_dim", CAL_U_COUNT, s.k_dim);
    put(c, "v_dim", CAL_U_COUNT, s.v_dim > 0 ? s.v_dim : s.k_dim);
    put(c, "bits", CAL_U_RATIO, s.bits);
    put(c, "bytes_per_element", CAL_U_RATIO, s.bits / 8 + (s.group > 0 ? s.scale_bytes / s.group : 0));
    put(c, "bytes_per_token", CAL_U_BYTES, b);
    if (given(c, "tokens")) put(c, "bytes_total", CAL_U_BYTES, b * in(c, "tokens"));
    if (given(c, "measured")) {
        if (!(in(c, "measured") > 0)) return why(c, "measured", "must be > 0");
        put(c, "measured_ratio", CAL_U_RATIO, in(c, "measured") / b);
    }
    return CAL_OK;
}
static void e_kv(calc_ctx *c)
{
    double kd = out(c, "k_dim"), vd = out(c, "v_dim");
    if (c->extra) {
        json_t *j = c->extra;
        const char *arch = json_string_value(json_object_get(j, "arch"));
        const char *mname = json_string_value(json_object_get(j, "name"));
        say(c, "from %s: %s%s%s, %s layers, %s KV heads, head dim %s%s\n",
            json_string_value(json_object_get(j, "source")), *arch ? arch : "(no architecture)",
            *mname ? " · " : "", mname, N(out(c, "layers")),
            N(out(c, "kv_heads")), N(kd), json_is_true(json_object_get(j, "kv_heads_per_layer"))
                ? " (KV heads vary per layer: the largest is used)" : "");
    }
    if (kd == vd)
        say(c, "KV bytes per token = 2 × layers × kv_heads × head_dim × bytes per element\n"
               "                   = 2 × %s × %s × %s × %s = %s\n", N(out(c, "layers")),
            N(out(c, "kv_heads")), N(kd), N(out(c, "bytes_per_element")),
            Q(CAL_U_BYTES, out(c, "bytes_per_token")));
    else
        say(c, "KV bytes per token = layers × kv_heads × (k_dim + v_dim) × bytes per element\n"
               "                   = %s × %s × (%s + %s) × %s = %s\n", N(out(c, "layers")),
            N(out(c, "kv_heads")), N(kd), N(vd), N(out(c, "bytes_per_element")),
            Q(CAL_U_BYTES, out(c, "bytes_per_token")));
    say(c, "bytes per element = %s bits ÷ 8%s\n", N(out(c, "bits")),
        in(c, "group-size") > 0 ? " + scale bytes ÷ group" : "");
    if (given(c, "tokens"))
        say(c, "for %s tokens: %s\n", N(in(c, "tokens")), Q(CAL_U_BYTES, out(c, "bytes_total")));
    if (given(c, "measured")) {
        say(c, "measured %s per token = %s× the formula\n", Q(CAL_U_BYTES, in(c, "measured")),
            num_(out(c, "measured_ratio"), 3, 0));
        mean_(c, "Peak memory grew %s× what the KV cache alone explains: activations, "
                 "temporary buffers or an unquantised copy grow with context too — plan "
                 "context from the measured slope, not the formula.",
              num_(out(c, "measured_ratio"), 2, 0));
    } else {
        mean_(c, "Each token of context keeps %s of KV cache; this is a floor — measure peak "
                 "memory at two context lengths (calc usable-context) before trusting it.",
              Q3(CAL_U_BYTES, out(c, "bytes_per_token")));
    }
}

static int c_kvseq(calc_ctx *c)
{
    double n, per;
    int rc = cal_f_kv_sequences(in(c, "kv-per-token"), in(c, "context"), in(c, "budget"),
                                in(c, "weights"), &n, &per, &c->bad);
    if (rc == CAL_ERANGE && c->bad && !strcmp(c->bad, "weights"))
        return why(c, "weights", "is not below --budget: nothing is left for the KV cache");
    if (rc) return rc;
    put(c, "sequences", CAL_U_COUNT, n);
    put(c, "bytes_per_sequence", CAL_U_BYTES, per);
    return CAL_OK;
}
static void e_kvseq(calc_ctx *c)
{
    say(c, "sequences = floor((budget − weights) ÷ (KV per token × context))\n"
           "          = floor((%s − %s) ÷ (%s × %s)) = %s\n", Q(CAL_U_BYTES, in(c, "budget")),
        Q(CAL_U_BYTES, in(c, "weights")), Q(CAL_U_BYTES, in(c, "kv-per-token")),
        N(in(c, "context")), N(out(c, "sequences")));
    if (out(c, "sequences") < 1)
        mean_(c, "Not one sequence of %s tokens fits: each needs %s of KV cache.",
              N(in(c, "context")), Q3(CAL_U_BYTES, out(c, "bytes_per_sequence")));
    else
        mean_(c, "At most %s sequences of %s tokens run at once before the KV cache is full "
                 "(%s each); activations and fragmentation lower this in practice.",
              N(out(c, "sequences")), N(in(c, "context")),
              Q3(CAL_U_BYTES, out(c, "bytes_per_sequence")));
}

static int c_usable(calc_ctx *c)
{
    double a, b, n;
    int rc = cal_f_usable_context(in(c, "n1"), in(c, "peak1"), in(c, "n2"), in(c, "peak2"),
                                  in(c, "budget"), &a, &b, &n, &c->bad);
    if (rc == CAL_ERANGE && c->bad) {
        if (!strcmp(c->bad, "n2")) return why(c, "n2", "equals --n1: two points at one context "
                                              "length do not make a line");
        if (!strcmp(c->bad, "peak2")) return why(c, "peak2", "does not grow with context: "
                                                 "peak memory must rise from n1 to n2");
        if (!strcmp(c->bad, "budget")) return why(c, "budget", "is below the fitted base (%s): "
                                                  "nothing fits",
                                                  Q(CAL_U_BYTES, in(c, "peak1") -
                                                    (in(c, "peak2") - in(c, "peak1")) /
                                                    (in(c, "n2") - in(c, "n1")) * in(c, "n1")));
    }
    if (rc) return rc;
    put(c, "base_bytes", CAL_U_BYTES, a);
    put(c, "slope_bytes_per_token", CAL_U_BYTES, b);
    put(c, "n_max", CAL_U_COUNT, floor(n));
    return CAL_OK;
}
static void e_usable(calc_ctx *c)
{
    say(c, "peak(n) = base + slope·n through (%s, %s) and (%s, %s)\n"
           "slope = %s per token, base = %s\n"
           "n_max = (budget − base) ÷ slope = (%s − %s) ÷ %s = %s tokens\n",
        N(in(c, "n1")), Q(CAL_U_BYTES, in(c, "peak1")), N(in(c, "n2")),
        Q(CAL_U_BYTES, in(c, "peak2")), Q(CAL_U_BYTES, out(c, "slope_bytes_per_token")),
        Q(CAL_U_BYTES, out(c, "base_bytes")), Q(CAL_U_BYTES, in(c, "budget")),
        Q(CAL_U_BYTES, out(c, "base_bytes")), Q(CAL_U_BYTES, out(c, "slope_bytes_per_token")),
        N(out(c, "n_max")));
    double hi = in(c, "n1") > in(c, "n2") ? in(c, "n1") : in(c, "n2");
    mean_(c, "In a %s budget about %s tokens of context fit%s.", Q3(CAL_U_BYTES, in(c, "budget")),
          N(out(c, "n_max")), out(c, "n_max") > 2 * hi
              ? ", but that extrapolates past twice the longest context measured: measure "
                "nearer the limit before relying on it" : "");
}

static int c_decode_ctx(calc_ctx *c)
{
    double n[3] = {in(c, "n1"), in(c, "n2"), in(c, "n3")};
    double t[3] = {in(c, "t1"), in(c, "t2"), in(c, "t3")};
    double a, b, tps, dev;
    int rc = cal_f_decode_context(n, t, in(c, "at"), &a, &b, &tps, &dev, &c->bad);
    if (rc == CAL_ERANGE && c->bad && (!strcmp(c->bad, "n2") || !strcmp(c->bad, "n3")))
        return why(c, c->bad, "repeats another context length: three distinct lengths are "
                   "needed");
    if (rc == CAL_ERANGE && c->bad && !strcmp(c->bad, "at"))
        return why(c, "at", "gives a step time <= 0 on the fitted line: outside its range");
    if (rc) return rc;
    put(c, "a_s", CAL_U_TIME, a);
    put(c, "b_s_per_token", CAL_U_TIME, b);
    put(c, "step_s_at", CAL_U_TIME, 1 / tps);
    put(c, "tok_per_s_at", CAL_U_TOKRATE, tps);
    put(c, "third_point_deviation", CAL_U_RATIO, dev);
    return CAL_OK;
}
static void e_decode_ctx(calc_ctx *c)
{
    say(c, "t(n) = a + b·n (least squares over the three points)\n"
           "     = %s + %s × n\n"
           "tok/s at %s = 1 ÷ t(%s) = 1 ÷ %s = %s tok/s\n"
           "check: point 3 is %+.1f %% off the line through points 1 and 2\n",
        Q(CAL_U_TIME, out(c, "a_s")), Q(CAL_U_TIME, out(c, "b_s_per_token")), N(in(c, "at")),
        N(in(c, "at")), Q(CAL_U_TIME, out(c, "step_s_at")), R(out(c, "tok_per_s_at")),
        out(c, "third_point_deviation") * 100);
    if (fabs(out(c, "third_point_deviation")) <= 0.05)
        mean_(c, "Step time grows linearly with context (third point within 5 %%): decode at "
                 "%s tokens of context runs about %s tok/s.", N(in(c, "at")),
              R3(out(c, "tok_per_s_at")));
    else
        mean_(c, "The third point is %s off the line: step time is not linear in context here "
                 "(a cache or kernel regime changed), so %s tok/s at %s tokens is not to be "
                 "trusted — measure at that context.",
              PCT(fabs(out(c, "third_point_deviation"))), R3(out(c, "tok_per_s_at")),
              N(in(c, "at")));
}

static int c_leak(calc_ctx *c)
{
    double slope;
    const char *sf = "slope";
    if (given(c, "slope")) {
        if (given(c, "growth") || given(c, "over"))
            return why(c, "growth", "cannot be given with --slope: give one or the other");
        slope = in(c, "slope");
    } else {
        if (!given(c, "growth") || !given(c, "over"))
            return why(c, given(c, "growth") ? "over" : "slope",
                       "is required (or --growth with --over)");
        if (!(in(c, "over") > 0)) return why(c, "over", "must be > 0");
        slope = in(c, "growth") / in(c, "over");
        sf = "growth";
    }
    double w;
    int rc = cal_f_leak_watch(in(c, "resolution"), slope, &w, &c->bad);
    if (rc) { if (c->bad && !strcmp(c->bad, "slope")) c->bad = sf; return rc; }
    put(c, "slope_bytes_per_s", CAL_U_BANDWIDTH, slope);
    put(c, "watch_s", CAL_U_TIME, w);
    if (given(c, "watched")) {
        if (!(in(c, "watched") > 0)) return why(c, "watched", "must be > 0");
        put(c, "smallest_visible_slope_bytes_per_s", CAL_U_BANDWIDTH,
            in(c, "resolution") / in(c, "watched"));
    }
    return CAL_OK;
}
static void e_leak(calc_ctx *c)
{
    if (!given(c, "slope"))
        say(c, "slope = %s ÷ %s = %s\n", Q(CAL_U_BYTES, in(c, "growth")),
            Q(CAL_U_TIME, in(c, "over")), Q(CAL_U_BANDWIDTH, out(c, "slope_bytes_per_s")));
    say(c, "minimum watch time = reading resolution ÷ slope\n"
           "                   = %s ÷ %s = %s\n", Q(CAL_U_BYTES, in(c, "resolution")),
        Q(CAL_U_BANDWIDTH, out(c, "slope_bytes_per_s")), Q(CAL_U_TIME, out(c, "watch_s")));
    mean_(c, "A leak this fast moves a reading of %s resolution only after %s: samples closer "
             "together than that showing \"zero slope\" prove nothing.",
          Q3(CAL_U_BYTES, in(c, "resolution")), Q3(CAL_U_TIME, out(c, "watch_s")));
    if (given(c, "watched"))
        mean_(c, " Watching %s can only see slopes of at least %s (%s per day).",
              Q3(CAL_U_TIME, in(c, "watched")),
              Q3(CAL_U_BANDWIDTH, out(c, "smallest_visible_slope_bytes_per_s")),
              Q3(CAL_U_BYTES, out(c, "smallest_visible_slope_bytes_per_s") * 86400));
}

static int c_overcommit(calc_ctx *c)
{
    double r;
    int i = idx(c, "limits");
    int rc = cal_f_overcommit(c->list[i], c->nlist[i], in(c, "memory"), &r, &c->bad);
    if (rc) return rc;
    put(c, "overcommit", CAL_U_RATIO, r);
    return CAL_OK;
}
static void e_overcommit(calc_ctx *c)
{
    int i = idx(c, "limits");
    say(c, "overcommit = Σ cache limits ÷ physical memory = (");
    for (size_t k = 0; k < c->nlist[i]; k++)
        say(c, "%s%s", k ? " + " : "", Q(CAL_U_BYTES, c->list[i][k]));
    say(c, ") ÷ %s = %s\n", Q(CAL_U_BYTES, in(c, "memory")), R(out(c, "overcommit")));
    if (out(c, "overcommit") > 1)
        mean_(c, "The processes may together cache %s× the machine's memory: each limit is "
                 "reasonable alone, together they promise memory that is not there — lower "
                 "them so the sum stays below 1.", num_(out(c, "overcommit"), 2, 0));
    else
        mean_(c, "The limits together stay within physical memory (%s of it).",
              PCT(out(c, "overcommit")));
}

static int c_batch(calc_ctx *c)
{
    double g, f, b;
    int rc = cal_f_batching_gain(in(c, "bw-batch"), in(c, "bw-single"), in(c, "bytes-single"),
                                 in(c, "bytes-batch"), &g, &f, &b, &c->bad);
    if (rc) return rc;
    put(c, "gain", CAL_U_RATIO, g);
    put(c, "bandwidth_factor", CAL_U_RATIO, f);
    put(c, "bytes_factor", CAL_U_RATIO, b);
    return CAL_OK;
}
static void e_batch(calc_ctx *c)
{
    double f = out(c, "bandwidth_factor"), b = out(c, "bytes_factor");
    say(c, "gain(B) = [bandwidth used at B ÷ at 1] × [bytes per token at 1 ÷ at B]\n"
           "        = [%s ÷ %s] × [%s ÷ %s] = %s × %s = %s\n",
        Q(CAL_U_BANDWIDTH, in(c, "bw-batch")), Q(CAL_U_BANDWIDTH, in(c, "bw-single")),
        Q(CAL_U_BYTES, in(c, "bytes-single")), Q(CAL_U_BYTES, in(c, "bytes-batch")), R(f), R(b),
        R(out(c, "gain")));
    if (f < 1)
        /* a batch that moves fewer bytes per second than batch 1 did is
         * waiting on arithmetic, not memory (the engine's Q8_0 at 8, say) */
        mean_(c, "Batching gives %s×: the bytes saved per token (%s×) less the bandwidth the "
                 "batch no longer uses (%s×): at this batch the step waits on compute, not "
                 "memory, and a faster kernel, not more batching, is what would raise it. ",
              R3(out(c, "gain")), R3(b), R3(f));
    else
        mean_(c, "Batching gives %s×: %s. ", R3(out(c, "gain")),
              fabs(log(f)) >= fabs(log(b))
                  ? "feeding bandwidth that sat idle at batch 1 dominates, the bytes saved per "
                    "token are secondary"
                  : "the bytes saved per token dominate, not extra bandwidth");
    mean_(c, "An engine whose batch-1 decode already saturates bandwidth gains only the second "
             "factor.");
}

static int c_spec(calc_ctx *c)
{
    double E, s, be;
    int ex, rc;
    if ((rc = cal_f_spec_tokens(in(c, "alpha"), in(c, "k"), &E, &c->bad))) return rc;
    if ((rc = cal_f_spec_speedup(in(c, "alpha"), in(c, "k"), in(c, "t-decode"),
                                 in(c, "t-verify"), in(c, "t-draft"), &s, &c->bad)))
        return rc;
    if ((rc = cal_f_spec_break_even(in(c, "k"), in(c, "t-decode"), in(c, "t-verify"),
                                    in(c, "t-draft"), &be, &ex, &c->bad)))
        return rc;
    put(c, "tokens_per_round", CAL_U_RATIO, E);
    put(c, "speedup", CAL_U_RATIO, s);
    put(c, "baseline_tok_per_s", CAL_U_TOKRATE, 1 / in(c, "t-decode"));
    put(c, "predicted_tok_per_s", CAL_U_TOKRATE, s / in(c, "t-decode"));
    put(c, "round_cost_in_steps", CAL_U_RATIO,
        (in(c, "t-verify") + in(c, "k") * in(c, "t-draft")) / in(c, "t-decode"));
    if (ex) put(c, "break_even_alpha", CAL_U_RATIO, be);
    else put_null(c, "break_even_alpha");
    return CAL_OK;
}
static void e_spec(calc_ctx *c)
{
    double a = in(c, "alpha"), k = in(c, "k"), s = out(c, "speedup");
    say(c, "E = (1 − α^(k+1)) ÷ (1 − α) = (1 − %s^%s) ÷ (1 − %s) = %s tokens per round\n",
        N(a), N(k + 1), N(a), R(out(c, "tokens_per_round")));
    say(c, "speedup = E × t_decode ÷ (t_verify(k+1) + k × t_draft)\n"
           "        = %s × %s ÷ (%s + %s × %s) = %s  (%s → %s tok/s)\n",
        R(out(c, "tokens_per_round")), Q(CAL_U_TIME, in(c, "t-decode")),
        Q(CAL_U_TIME, in(c, "t-verify")), N(k), Q(CAL_U_TIME, in(c, "t-draft")), R(s),
        R(out(c, "baseline_tok_per_s")), R(out(c, "predicted_tok_per_s")));
    double be = out(c, "break_even_alpha");
    if (isnan(be)) say(c, "break-even α: none — even α → 1 (E = k + 1 = %s) loses\n", N(k + 1));
    else say(c, "break-even α (speedup = 1): %s\n", R(be));
    if (isnan(be))
        mean_(c, "A round costs %s decode steps but can yield at most %s tokens: with this "
                 "draft and verify cost speculative decoding loses at any acceptance — make "
                 "verification cheaper or draft fewer tokens.",
              R3(out(c, "round_cost_in_steps")), N(k + 1));
    else if (s >= 1)
        mean_(c, "At acceptance %s speculative decoding wins %s× (break-even at α = %s).",
              N(a), R3(s), R3(be));
    else
        mean_(c, "At acceptance %s speculative decoding loses (%s×), even with identical "
                 "output: it pays only above α = %s with these costs.", N(a), R3(s), R3(be));
}

/* Read one or two columns of numbers from a file named by flag f. */
static int read_scores(calc_ctx *c, const char *f, const char *col, double *x, size_t *n)
{
    char w[320];
    cal_csv_col cc = {col, CAL_U_RATIO, NULL, x};
    int rc = cal_csv_columns_file(path(c, f), &cc, 1, SCORES_CAP, n, w, sizeof w);
    if (rc) return why(c, f, "%s", w[0] ? w : cal_strerror(rc));
    return CAL_OK;
}

static int c_quality(calc_ctx *c)
{
    int rc = CAL_EINVAL;
    double level = in(c, "level");
    if (!(level > 0 && level < 1)) return why(c, "level", "must lie strictly between 0 and 1");
    double *a = malloc(SCORES_CAP * sizeof *a), *b = malloc(SCORES_CAP * sizeof *b);
    double *d = malloc(SCORES_CAP * sizeof *d);
    size_t na = 0, nb = 0;
    if (!a || !b || !d) { rc = CAL_ENOMEM; goto out; }
    if (given(c, "pairs")) {
        if (given(c, "a") || given(c, "b")) {
            rc = why(c, "a", "cannot be given with --pairs: give one file of pairs or two files");
            goto out;
        }
        if ((rc = read_scores(c, "pairs", "1", a, &na)) || (rc = read_scores(c, "pairs", "2", b, &nb)))
            goto out;
    } else {
        if (!given(c, "a") || !given(c, "b")) {
            rc = why(c, given(c, "a") ? "b" : "a", "is required (or --pairs FILE with two "
                     "columns)");
            goto out;
        }
        if ((rc = read_scores(c, "a", "1", a, &na)) || (rc = read_scores(c, "b", "1", b, &nb)))
            goto out;
        if (na != nb) {
            rc = why(c, "b", "has %zu scores, --a has %zu: a paired check needs one score per "
                     "question in each", nb, na);
            goto out;
        }
    }
    if (na < 2) { rc = why(c, given(c, "pairs") ? "pairs" : "a", "needs at least 2 pairs"); goto out; }
    cal_ttest t;
    rc = cal_stats_t_paired(a, b, na, level, d, &t);
    if (rc == CAL_ERANGE) {
        rc = why(c, given(c, "pairs") ? "pairs" : "b", "every pair differs by the same %s: no "
                 "spread, so no t statistic", N(b[0] - a[0]));
        goto out;
    }
    if (rc) { c->bad = given(c, "pairs") ? "pairs" : "a"; goto out; }
    put(c, "n", CAL_U_COUNT, (double)t.n);
    put(c, "mean_a", CAL_U_RATIO, cal_stats_mean(a, na));
    put(c, "mean_b", CAL_U_RATIO, cal_stats_mean(b, nb));
    put(c, "mean_diff", CAL_U_RATIO, t.mean);
    put(c, "sd_diff", CAL_U_RATIO, t.sd);
    put(c, "t", CAL_U_RATIO, t.t);
    put(c, "df", CAL_U_RATIO, t.df);
    put(c, "p", CAL_U_RATIO, t.p);
    put(c, "ci_lo", CAL_U_RATIO, t.lo);
    put(c, "ci_hi", CAL_U_RATIO, t.hi);
    put(c, "ci_half", CAL_U_RATIO, t.half);
    if (given(c, "identical")) {
        size_t ni = 0;
        if ((rc = read_scores(c, "identical", "1", d, &ni))) goto out;
        /* two columns: the judge's two scores of the same answer */
        double *d2 = a;
        size_t n2 = 0;
        char w[320];
        cal_csv_col cc = {"2", CAL_U_RATIO, NULL, d2};
        if (cal_csv_columns_file(path(c, "identical"), &cc, 1, SCORES_CAP, &n2, w, sizeof w) ==
                CAL_OK && n2 == ni)
            for (size_t i = 0; i < ni; i++) d[i] = d2[i] - d[i];
        if (ni < 2) { rc = why(c, "identical", "needs at least 2 identical pairs"); goto out; }
        cal_ttest z;
        rc = cal_stats_t_one(d, ni, level, &z);
        if (rc == CAL_ERANGE) {
            put(c, "identical_n", CAL_U_COUNT, (double)ni);
            put(c, "identical_mean", CAL_U_RATIO, d[0]);
            put_null(c, "identical_ci_half");
            rc = CAL_OK;
        } else if (rc) {
            c->bad = "identical";
            goto out;
        } else {
            put(c, "identical_n", CAL_U_COUNT, (double)ni);
            put(c, "identical_mean", CAL_U_RATIO, z.mean);
            put(c, "identical_ci_half", CAL_U_RATIO, z.half);
        }
    }
    rc = CAL_OK;
out:
    free(a); free(b); free(d);
    return rc;
}
static void e_quality(calc_ctx *c)
{
    double lvl = in(c, "level") * 100;
    say(c, "n = %s pairs · mean %s → %s\n", N(out(c, "n")), R(out(c, "mean_a")),
        R(out(c, "mean_b")));
    say(c, "mean difference d̄ = %s, sd = %s\n", R(out(c, "mean_diff")), R(out(c, "sd_diff")));
    say(c, "t = d̄ ÷ (sd ÷ √n) = %s ÷ (%s ÷ √%s) = %s (df %s, p = %s)\n", R(out(c, "mean_diff")),
        R(out(c, "sd_diff")), N(out(c, "n")), num_(out(c, "t"), 3, 0), N(out(c, "df")),
        num_(out(c, "p"), 3, 0));
    say(c, "%s %% CI: %s ± %s = [%s, %s]\n", N(lvl), R(out(c, "mean_diff")), R(out(c, "ci_half")),
        R(out(c, "ci_lo")), R(out(c, "ci_hi")));
    int zero_in = out(c, "ci_lo") <= 0 && out(c, "ci_hi") >= 0;
    if (zero_in)
        mean_(c, "No detectable change: the %s %% CI of the paired difference (±%s) contains "
                 "0.", N(lvl), R3(out(c, "ci_half")));
    else
        mean_(c, "A real change of %s (CI %s to %s): the CI of the paired difference excludes "
                 "0.", R3(out(c, "mean_diff")), R3(out(c, "ci_lo")), R3(out(c, "ci_hi")));
    if (given(c, "identical")) {
        double im = out(c, "identical_mean"), ih = out(c, "identical_ci_half");
        if (isnan(ih))
            say(c, "judge noise: %s identical pairs, every difference %s\n",
                N(out(c, "identical_n")), R(im));
        else
            say(c, "judge noise: %s identical pairs, mean %s ± %s\n", N(out(c, "identical_n")),
                R(im), R(ih));
        if (fabs(im) >= fabs(out(c, "mean_diff")) && im != 0)
            mean_(c, " The judge scores byte-identical answers %s apart on average — as large "
                     "as the effect itself: the judge's noise, not the change, may be what you "
                     "see.", R3(im));
        else
            mean_(c, " Identical answers score %s apart (should be 0): %s.", R3(im),
                  (isnan(ih) ? im == 0 : fabs(im) <= ih) ? "the judge shows no bias"
                                                         : "the judge is biased");
    }
}

static int c_welch(calc_ctx *c)
{
    double level = in(c, "level");
    if (!(level > 0 && level < 1)) return why(c, "level", "must lie strictly between 0 and 1");
    double *a = malloc(SCORES_CAP * sizeof *a), *b = malloc(SCORES_CAP * sizeof *b);
    size_t na = 0, nb = 0;
    int rc = !a || !b ? CAL_ENOMEM : CAL_OK;
    if (!rc) rc = read_scores(c, "a", "1", a, &na);
    if (!rc) rc = read_scores(c, "b", "1", b, &nb);
    if (!rc && na < 2) rc = why(c, "a", "needs at least 2 values");
    if (!rc && nb < 2) rc = why(c, "b", "needs at least 2 values");
    cal_ttest t;
    if (!rc) {
        rc = cal_stats_t_welch(a, na, b, nb, level, &t);
        if (rc == CAL_ERANGE)
            rc = why(c, "b", "and --a both have zero spread and different means: no t statistic");
        else if (rc) c->bad = "a";
    }
    if (!rc) {
        put(c, "n_a", CAL_U_COUNT, (double)na);
        put(c, "n_b", CAL_U_COUNT, (double)nb);
        put(c, "mean_a", CAL_U_RATIO, cal_stats_mean(a, na));
        put(c, "mean_b", CAL_U_RATIO, cal_stats_mean(b, nb));
        put(c, "diff", CAL_U_RATIO, t.mean);
        put(c, "t", CAL_U_RATIO, t.t);
        put(c, "df", CAL_U_RATIO, t.df);
        put(c, "p", CAL_U_RATIO, t.p);
        put(c, "ci_lo", CAL_U_RATIO, t.lo);
        put(c, "ci_hi", CAL_U_RATIO, t.hi);
    }
    free(a); free(b);
    return rc;
}
static void e_welch(calc_ctx *c)
{
    say(c, "Welch: diff = mean(b) − mean(a) = %s − %s = %s\n", R(out(c, "mean_b")),
        R(out(c, "mean_a")), R(out(c, "diff")));
    say(c, "t = diff ÷ √(s_a²/n_a + s_b²/n_b) = %s (df %s, p = %s), %s %% CI [%s, %s]\n",
        num_(out(c, "t"), 3, 0), num_(out(c, "df"), 4, 1), num_(out(c, "p"), 3, 0),
        N(in(c, "level") * 100), R(out(c, "ci_lo")), R(out(c, "ci_hi")));
    if (out(c, "ci_lo") <= 0 && out(c, "ci_hi") >= 0)
        mean_(c, "No detectable difference between the two independent samples (the CI "
                 "contains 0). If the same items were scored twice, use calc quality (paired): "
                 "it is far more sensitive.");
    else
        mean_(c, "The samples differ by %s (CI %s to %s).", R3(out(c, "diff")),
              R3(out(c, "ci_lo")), R3(out(c, "ci_hi")));
}

static int c_median(calc_ctx *c)
{
    double level = in(c, "level");
    if (!(level > 0 && level < 1)) return why(c, "level", "must lie strictly between 0 and 1");
    double reps = in(c, "reps");
    if (reps < 100 || reps > 100000 || reps != floor(reps))
        return why(c, "reps", "must be a whole number in 100..100000");
    double seed = in(c, "seed");   /* checked before it becomes a uint64_t */
    if (!(seed >= 0 && seed <= 9007199254740992.0) || seed != floor(seed))
        return why(c, "seed", "must be a whole number in 0..2^53");
    double *x = malloc(SCORES_CAP * sizeof *x);
    size_t n = 0;
    int rc = x ? read_scores(c, "file", "1", x, &n) : CAL_ENOMEM;
    if (!rc && n == 0) rc = why(c, "file", "holds no values");
    double *scratch = NULL;
    if (!rc) {
        size_t len = n + (size_t)reps;
        scratch = malloc(len * sizeof *scratch);
        double m, lo, hi;
        rc = !scratch ? CAL_ENOMEM : cal_stats_median_ci(x, n, level, (size_t)reps,
                                                         (uint64_t)seed, scratch, len,
                                                         &m, &lo, &hi);
        if (!rc) {
            put(c, "n", CAL_U_COUNT, (double)n);
            put(c, "median", CAL_U_RATIO, m);
            put(c, "ci_lo", CAL_U_RATIO, lo);
            put(c, "ci_hi", CAL_U_RATIO, hi);
            put(c, "p10", CAL_U_RATIO, cal_stats_percentile(x, n, 10));
            put(c, "p90", CAL_U_RATIO, cal_stats_percentile(x, n, 90));
        } else if (rc != CAL_ENOMEM) {
            c->bad = "file";
        }
    }
    free(x); free(scratch);
    return rc;
}
static void e_median(calc_ctx *c)
{
    say(c, "median of %s values = %s (percentiles: %s)\n", N(out(c, "n")), R(out(c, "median")),
        CAL_STATS_PERCENTILE_METHOD);
    say(c, "%s %% bootstrap CI (%s resamples, seed %s): [%s, %s]; p10 %s, p90 %s\n",
        N(in(c, "level") * 100), N(in(c, "reps")), N(in(c, "seed")), R(out(c, "ci_lo")),
        R(out(c, "ci_hi")), R(out(c, "p10")), R(out(c, "p90")));
    mean_(c, "Quote the median with its CI; two medians whose CIs overlap are not shown to "
             "differ.");
}

static int c_roofline(calc_ctx *c)
{
    double bpt;
    if (given(c, "bytes-per-token")) {
        if (given(c, "weights"))
            return why(c, "weights", "cannot be given with --bytes-per-token");
        bpt = in(c, "bytes-per-token");
    } else {
        if (!given(c, "weights"))
            return why(c, "bytes-per-token", "or --weights is required");
        if (given(c, "kv-per-token") != given(c, "context"))
            return why(c, given(c, "context") ? "kv-per-token" : "context",
                       "is needed too: the KV read per token is KV per token × context");
        bpt = in(c, "weights") + (given(c, "context") ? in(c, "kv-per-token") * in(c, "context") : 0);
    }
    double tps;
    int rc = cal_f_roofline(bpt, in(c, "bandwidth"), &tps, &c->bad);
    if (rc) {
        if (c->bad && !strcmp(c->bad, "bytes-per-token") && !given(c, "bytes-per-token"))
            c->bad = "weights";
        return rc;
    }
    put(c, "bytes_per_token", CAL_U_BYTES, bpt);
    put(c, "ceiling_tok_per_s", CAL_U_TOKRATE, tps);
    if (given(c, "measured")) {
        if (!(in(c, "measured") > 0)) return why(c, "measured", "must be > 0");
        put(c, "fraction_of_ceiling", CAL_U_RATIO, in(c, "measured") / tps);
    }
    return CAL_OK;
}
static void e_roofline(calc_ctx *c)
{
    if (!given(c, "bytes-per-token"))
        say(c, "bytes read per token = weights + KV per token × context = %s + %s × %s = %s\n",
            Q(CAL_U_BYTES, in(c, "weights")),
            Q(CAL_U_BYTES, given(c, "context") ? in(c, "kv-per-token") : 0),
            N(given(c, "context") ? in(c, "context") : 0), Q(CAL_U_BYTES, out(c, "bytes_per_token")));
    say(c, "decode ceiling = bandwidth ÷ bytes read per token\n"
           "               = %s ÷ %s = %s tok/s\n", Q(CAL_U_BANDWIDTH, in(c, "bandwidth")),
        Q(CAL_U_BYTES, out(c, "bytes_per_token")), R(out(c, "ceiling_tok_per_s")));
    if (given(c, "measured")) {
        double f = out(c, "fraction_of_ceiling");
        say(c, "measured %s tok/s = %s of the ceiling\n", N(in(c, "measured")), PCT(f));
        mean_(c, f > 1.02 ? "The measured speed is above the ceiling: fewer bytes are read per "
                            "token than assumed (sparsity, caching, a smaller model) — recheck "
                            "the inputs."
                 : f >= 0.7 ? "Decode runs near the bandwidth ceiling: only reading fewer bytes "
                              "per token (quantisation, batching) makes it faster."
                            : "Decode is well below the bandwidth ceiling: the time goes "
                              "elsewhere (compute, launches, sync), not to memory traffic.");
    } else {
        mean_(c, "Single-stream decode cannot beat %s tok/s at this bandwidth: each token reads "
                 "%s.", R3(out(c, "ceiling_tok_per_s")), Q3(CAL_U_BYTES, out(c, "bytes_per_token")));
    }
}

static int c_energy(calc_ctx *c)
{
    double j, kwh, cost;
    int rc = cal_f_energy(in(c, "power"), in(c, "rate"), &j, &kwh, &c->bad);
    if (rc) return rc;
    put(c, "j_per_token", CAL_U_ENERGY, j);
    put(c, "j_per_mtok", CAL_U_ENERGY, j * 1e6);
    put(c, "kwh_per_mtok", CAL_U_RATIO, kwh);
    put(c, "hours_per_mtok", CAL_U_RATIO, 1e6 / in(c, "rate") / 3600);
    if (given(c, "price-kwh") || given(c, "price-hour")) {
        if (!(in(c, "price-kwh") + in(c, "price-hour") > 0))
            return why(c, given(c, "price-kwh") ? "price-kwh" : "price-hour",
                       "leaves every price at 0: there is no cost to compute");
        rc = cal_f_cost_per_mtok(kwh, in(c, "rate"), in(c, "price-kwh"), in(c, "price-hour"),
                                 &cost, &c->bad);
        if (rc) return rc;
        put(c, "cost_per_mtok", CAL_U_RATIO, cost);
    }
    return CAL_OK;
}
static void e_energy(calc_ctx *c)
{
    say(c, "energy per token = power ÷ rate = %s ÷ %s tok/s = %s per token\n"
           "per million tokens = %s = %s kWh (%s h of running)\n",
        Q(CAL_U_POWER, in(c, "power")), N(in(c, "rate")), Q(CAL_U_ENERGY, out(c, "j_per_token")),
        Q(CAL_U_ENERGY, out(c, "j_per_mtok")), R(out(c, "kwh_per_mtok")),
        R(out(c, "hours_per_mtok")));
    if (!isnan(out(c, "cost_per_mtok"))) {
        say(c, "cost per million tokens = kWh × price per kWh + hours × price per hour\n"
               "                       = %s × %s + %s × %s = %s\n", R(out(c, "kwh_per_mtok")),
            N(in(c, "price-kwh")), R(out(c, "hours_per_mtok")), N(in(c, "price-hour")),
            R(out(c, "cost_per_mtok")));
        mean_(c, "A million tokens at %s tok/s costs %s (same currency as the prices), with "
                 "%s of energy; the power is the whole machine's only if measured at the wall.",
              N(in(c, "rate")), R3(out(c, "cost_per_mtok")), Q3(CAL_U_ENERGY, out(c, "j_per_mtok")));
    } else {
        mean_(c, "A million tokens take %s kWh at this power; add --price-kwh or --price-hour "
                 "for a cost.", R3(out(c, "kwh_per_mtok")));
    }
}

#define NAN_ NAN
static const calc_def CALCS[] = {
    {"prefill-throughput", "prompt tokens ÷ prefill seconds (from a TTFT: a lower bound)",
     "caliper calc prefill-throughput --tokens 4096 --seconds 4.180s",
     {NUMF("tokens", CAL_U_COUNT, NULL, 1, NAN_, POSR, "prompt tokens (4096, 4k)"),
      NUMF("seconds", CAL_U_TIME, "s", 1, NAN_, POSR, "prefill time (4.18s, 250ms)"),
      {"from-ttft", F_BOOL, 0, NULL, 0, NAN_, NULL, "the seconds are a TTFT"}, END},
     c_rate, e_prefill},
    {"warm-from-cold", "warm ≈ cold × f_warm ÷ f_cold: is the slowdown the clock alone?",
     "caliper calc warm-from-cold --cold 980 --f-cold 1296MHz --f-warm 1116MHz --measured 850",
     {NUMF("cold", CAL_U_TOKRATE, NULL, 1, NAN_, POSR, "cold-shot speed, tok/s"),
      NUMF("f-cold", CAL_U_FREQ, "MHz", 1, NAN_, POSR, "clock during the cold shot (1296MHz)"),
      NUMF("f-warm", CAL_U_FREQ, "MHz", 1, NAN_, POSR, "clock during the warm shots"),
      NUMF("measured", CAL_U_TOKRATE, NULL, 0, NAN_, POSR, "measured warm speed, to check"),
      END},
     c_warm, e_warm},
    {"power-split", "P_gpu ≈ P_wall − P_memory − residual: who gets the watts under a wall",
     "caliper calc power-split --wall 60W --gpu 37.5W --memory 18.8W --gpu2 32W --memory2 24.4W",
     {NUMF("wall", CAL_U_POWER, "W", 1, NAN_, POSR, "the machine's power wall (60W)"),
      NUMF("memory", CAL_U_POWER, "W", 1, NAN_, NNEG, "memory-path power"),
      NUMF("gpu", CAL_U_POWER, "W", 0, NAN_, POSR, "GPU power (gives the residual)"),
      NUMF("residual", CAL_U_POWER, "W", 0, NAN_, NNEG, "everything else (gives the GPU's share)"),
      NUMF("gpu2", CAL_U_POWER, "W", 0, NAN_, POSR, "GPU power, second configuration"),
      NUMF("memory2", CAL_U_POWER, "W", 0, NAN_, NNEG, "memory-path power, second configuration"),
      END},
     c_power, e_power},
    {"whole-turn", "(TTFT + decode × s) ÷ (TTFT + decode): an engine speedup seen by the user",
     "caliper calc whole-turn --ttft 6.084s --decode 10.003s --speedup 1.11",
     {NUMF("ttft", CAL_U_TIME, "s", 1, NAN_, NNEG, "time to first token, after the change"),
      NUMF("decode", CAL_U_TIME, "s", 1, NAN_, POSR, "decode time, after the change"),
      NUMF("speedup", CAL_U_RATIO, NULL, 1, NAN_, POSR, "engine-side decode speedup s (1.11)"),
      END},
     c_whole_turn, e_whole_turn},
    {"client-decode", "decode tokens ÷ decode seconds, as a chat client computes it",
     "caliper calc client-decode --tokens 377 --seconds 10.003s --ttft 6.084s",
     {NUMF("tokens", CAL_U_COUNT, NULL, 1, NAN_, POSR, "decode (output) tokens"),
      NUMF("seconds", CAL_U_TIME, "s", 1, NAN_, POSR, "decode time"),
      NUMF("ttft", CAL_U_TIME, "s", 0, NAN_, NNEG, "time to first token, for the whole turn"),
      END},
     c_rate, e_client},
    {"bandwidth-saving", "time saved per step <= bytes ÷ bandwidth × stage share; predicted tok/s",
     "caliper calc bandwidth-saving --bytes 2.7GB --bandwidth 1133GB/s --tokens-per-step 3.264 "
     "--step-time 17.6ms --measured 193.3",
     {NUMF("bytes", CAL_U_BYTES, NULL, 1, NAN_, POSR, "bytes no longer read per step (2.7GB)"),
      NUMF("bandwidth", CAL_U_BANDWIDTH, NULL, 1, NAN_, POSR, "memory bandwidth (1133GB/s)"),
      NUMF("share", CAL_U_RATIO, NULL, 0, 1, "a share in (0, 1]",
           "share of the step the stage occupies (default 1)"),
      NUMF("tokens-per-step", CAL_U_RATIO, NULL, 0, NAN_, POSR, "tokens produced per step"),
      NUMF("step-time", CAL_U_TIME, "ms", 0, NAN_, POSR, "step time before the change (17.6ms)"),
      NUMF("measured", CAL_U_TOKRATE, NULL, 0, NAN_, POSR, "measured tok/s after the change"),
      END},
     c_bw, e_bw},
    {"capacity", "do the models already fit? then a capacity saving is worth zero here",
     "caliper calc capacity --models 62.6GB,3.2GB --memory 64GB --reserve 4GB",
     {{"models", F_LIST, CAL_U_BYTES, NULL, 1, NAN_, "each > 0", "comma list of model sizes"},
      NUMF("memory", CAL_U_BYTES, NULL, 1, NAN_, POSR, "physical memory"),
      NUMF("reserve", CAL_U_BYTES, NULL, 0, 0, NNEG, "memory kept for OS and KV (default 0)"),
      END},
     c_capacity, e_capacity},
    {"amdahl", "end-to-end speedup from a kernel speedup and its share of the time",
     "caliper calc amdahl --kernel-speedup 67.87 --share 5.29%",
     {NUMF("kernel-speedup", CAL_U_RATIO, NULL, 1, NAN_, POSR, "kernel speedup s (67.87x)"),
      NUMF("share", CAL_U_RATIO, NULL, 1, NAN_, "a share in [0, 1]",
           "kernel's share p of end-to-end time (5.29%)"),
      END},
     c_amdahl, e_amdahl},
    {"amdahl-share", "the kernel's share from its speedup and the observed end-to-end gain",
     "caliper calc amdahl-share --kernel-speedup 67.87 --e2e-gain 5.5%",
     {NUMF("kernel-speedup", CAL_U_RATIO, NULL, 1, NAN_, "> 0 and not 1", "kernel speedup s"),
      NUMF("e2e-gain", CAL_U_RATIO, NULL, 0, NAN_, "> -100 %", "end-to-end gain (5.5%)"),
      NUMF("e2e", CAL_U_RATIO, NULL, 0, NAN_, POSR, "end-to-end speedup (1.055)"),
      END},
     c_amdahl_share, e_amdahl_share},
    {"coverage-ceiling", "1 ÷ (1 − coverage): the most that making every known kernel free gives",
     "caliper calc coverage-ceiling --kernel-time 40.8ms --total-time 100ms",
     {NUMF("coverage", CAL_U_RATIO, NULL, 0, NAN_, "a share in [0, 1)",
           "Σ kernel time ÷ end-to-end time"),
      NUMF("kernel-time", CAL_U_TIME, "ms", 0, NAN_, NNEG, "Σ kernel time"),
      NUMF("total-time", CAL_U_TIME, "ms", 0, NAN_, POSR, "end-to-end time"),
      END},
     c_coverage, e_coverage},
    {"coverage-from-ceiling", "coverage = 1 − 1 ÷ ceiling: how much time belongs to no kernel",
     "caliper calc coverage-from-ceiling --ceiling 1.69",
     {NUMF("ceiling", CAL_U_RATIO, NULL, 1, NAN_, ">= 1", "speedup with all kernels at zero"),
      END},
     c_coverage_inv, e_coverage_inv},
    {"launch-overhead", "(end-to-end − Σ kernel time) ÷ launches",
     "caliper calc launch-overhead --total-time 100ms --kernel-time 40.8ms --launches 2000",
     {NUMF("total-time", CAL_U_TIME, "ms", 1, NAN_, POSR, "end-to-end time"),
      NUMF("kernel-time", CAL_U_TIME, "ms", 1, NAN_, "between 0 and --total-time", "Σ kernel time"),
      NUMF("launches", CAL_U_COUNT, NULL, 1, NAN_, ">= 1", "number of kernel launches"),
      END},
     c_launch, e_launch},
    {"kv-bytes", "KV cache bytes per token from shape flags, a config.json or a GGUF header",
     "caliper calc kv-bytes --layers 11 --kv-heads 8 --head-dim 128 --kv-bits 4 --group-size 64 "
     "--tokens 1Mi --measured 39.4KB",
     {NUMF("layers", CAL_U_COUNT, NULL, 0, NAN_, POSR, "layers with a KV cache"),
      NUMF("kv-heads", CAL_U_COUNT, NULL, 0, NAN_, POSR, "key/value heads per layer"),
      NUMF("head-dim", CAL_U_COUNT, NULL, 0, NAN_, POSR, "head dimension"),
      NUMF("v-head-dim", CAL_U_COUNT, NULL, 0, NAN_, POSR, "value head dimension if different"),
      {"config", F_PATH, 0, NULL, 0, NAN_, NULL, "a Hugging Face config.json"},
      {"gguf", F_PATH, 0, NULL, 0, NAN_, NULL, "a GGUF model file (only its header is read)"},
      NUMF("kv-bits", CAL_U_RATIO, NULL, 0, NAN_, "in (0, 64]",
           "bits per cached element (default: the config's dtype, else 16)"),
      NUMF("group-size", CAL_U_COUNT, NULL, 0, 0, NNEG,
           "elements per quantisation group (default 0: no scales)"),
      NUMF("scale-bytes", CAL_U_BYTES, "B", 0, 4, NNEG,
           "scale (+ bias) bytes per group (default 4: fp16 scale and bias)"),
      NUMF("tokens", CAL_U_COUNT, NULL, 0, NAN_, POSR, "tokens of context for a total (1Mi)"),
      NUMF("measured", CAL_U_BYTES, NULL, 0, NAN_, POSR, "measured peak growth per token"),
      END},
     c_kv, e_kv},
    {"kv-sequences", "how many sequences of a context length fit in a memory budget",
     "caliper calc kv-sequences --kv-per-token 128KB --context 32k --budget 80GB --weights 16GB",
     {NUMF("kv-per-token", CAL_U_BYTES, NULL, 1, NAN_, POSR, "KV bytes per token (calc kv-bytes)"),
      NUMF("context", CAL_U_COUNT, NULL, 1, NAN_, POSR, "tokens per sequence"),
      NUMF("budget", CAL_U_BYTES, NULL, 1, NAN_, POSR, "memory budget"),
      NUMF("weights", CAL_U_BYTES, NULL, 0, 0, "below --budget", "weights and other fixed memory"),
      END},
     c_kvseq, e_kvseq},
    {"usable-context", "peak = base + slope·n from two measured lengths; n_max in a budget",
     "caliper calc usable-context --n1 32k --peak1 64.0GB --n2 128k --peak2 67.8GB --budget 72GB",
     {NUMF("n1", CAL_U_COUNT, NULL, 1, NAN_, NNEG, "first context length"),
      NUMF("peak1", CAL_U_BYTES, NULL, 1, NAN_, NNEG, "peak memory at n1"),
      NUMF("n2", CAL_U_COUNT, NULL, 1, NAN_, "not equal to --n1", "second context length"),
      NUMF("peak2", CAL_U_BYTES, NULL, 1, NAN_, "above --peak1 when n2 > n1", "peak memory at n2"),
      NUMF("budget", CAL_U_BYTES, NULL, 1, NAN_, POSR, "memory budget"),
      END},
     c_usable, e_usable},
    {"decode-context", "step time t(n) = a + b·n from three context lengths; tok/s at a target",
     "caliper calc decode-context --n1 4k --t1 20ms --n2 32k --t2 26ms --n3 128k --t3 46ms --at 256k",
     {NUMF("n1", CAL_U_COUNT, NULL, 1, NAN_, NNEG, "context length 1"),
      NUMF("t1", CAL_U_TIME, "ms", 1, NAN_, POSR, "decode step time at n1"),
      NUMF("n2", CAL_U_COUNT, NULL, 1, NAN_, "distinct", "context length 2"),
      NUMF("t2", CAL_U_TIME, "ms", 1, NAN_, POSR, "step time at n2"),
      NUMF("n3", CAL_U_COUNT, NULL, 1, NAN_, "distinct", "context length 3 (checks linearity)"),
      NUMF("t3", CAL_U_TIME, "ms", 1, NAN_, POSR, "step time at n3"),
      NUMF("at", CAL_U_COUNT, NULL, 1, NAN_, NNEG, "target context length"),
      END},
     c_decode_ctx, e_decode_ctx},
    {"leak-watch", "minimum watch time = reading resolution ÷ slope",
     "caliper calc leak-watch --resolution 1GB --growth 20GB --over 3.5d --watched 10min",
     {NUMF("resolution", CAL_U_BYTES, NULL, 1, NAN_, POSR, "smallest change a reading shows"),
      NUMF("slope", CAL_U_BANDWIDTH, NULL, 0, NAN_, POSR, "leak slope (66KB/s)"),
      NUMF("growth", CAL_U_BYTES, NULL, 0, NAN_, POSR, "growth seen (20GB) ..."),
      NUMF("over", CAL_U_TIME, NULL, 0, NAN_, POSR, "... over this time (3.5d)"),
      NUMF("watched", CAL_U_TIME, NULL, 0, NAN_, POSR, "how long you watched"),
      END},
     c_leak, e_leak},
    {"overcommit", "Σ configured cache limits ÷ physical memory",
     "caliper calc overcommit --limits 61GB,61GB --memory 64GB",
     {{"limits", F_LIST, CAL_U_BYTES, NULL, 1, NAN_, "each > 0", "comma list of cache limits"},
      NUMF("memory", CAL_U_BYTES, NULL, 1, NAN_, POSR, "physical memory"),
      END},
     c_overcommit, e_overcommit},
    {"batching-gain", "[bandwidth at B ÷ at 1] × [bytes/token at 1 ÷ at B]",
     "caliper calc batching-gain --bw-single 180GB/s --bw-batch 360GB/s --bytes-single 4GB "
     "--bytes-batch 3.6GB",
     {NUMF("bw-batch", CAL_U_BANDWIDTH, NULL, 1, NAN_, POSR, "bandwidth used at batch B"),
      NUMF("bw-single", CAL_U_BANDWIDTH, NULL, 1, NAN_, POSR, "bandwidth used at batch 1"),
      NUMF("bytes-single", CAL_U_BYTES, NULL, 1, NAN_, POSR, "bytes read per token at batch 1"),
      NUMF("bytes-batch", CAL_U_BYTES, NULL, 1, NAN_, POSR, "bytes read per token at batch B"),
      END},
     c_batch, e_batch},
    {"spec-decode", "speculative decoding: tokens per round, speedup, break-even acceptance",
     "caliper calc spec-decode --alpha 0.6 --k 4 --t-decode 10.87ms --t-verify 14ms --t-draft 2ms",
     {NUMF("alpha", CAL_U_RATIO, NULL, 1, NAN_, "an acceptance rate in [0, 1) (at 1 the formula "
           "is 0/0)", "per-token acceptance α"),
      NUMF("k", CAL_U_COUNT, NULL, 1, NAN_, "a whole number in 1..64", "drafted tokens per round"),
      NUMF("t-decode", CAL_U_TIME, "ms", 1, NAN_, POSR, "one normal decode step"),
      NUMF("t-verify", CAL_U_TIME, "ms", 1, NAN_, POSR, "one target pass over k + 1 tokens"),
      NUMF("t-draft", CAL_U_TIME, "ms", 1, NAN_, NNEG, "one draft step"),
      END},
     c_spec, e_spec},
    {"quality", "paired quality check: mean difference, t, CI, judge noise from identical pairs",
     "caliper calc quality --a before.txt --b after.txt --identical same.txt",
     {{"a", F_PATH, 0, NULL, 0, NAN_, NULL, "scores before, one per line (or a CSV column 1)"},
      {"b", F_PATH, 0, NULL, 0, NAN_, NULL, "scores after, same questions, same order"},
      {"pairs", F_PATH, 0, NULL, 0, NAN_, NULL, "one file with two columns: before, after"},
      {"identical", F_PATH, 0, NULL, 0, NAN_, NULL,
       "judge scores of byte-identical answer pairs: differences, or two columns"},
      NUMF("level", CAL_U_RATIO, NULL, 0, 0.95, "in (0, 1)", "CI level (default 0.95)"),
      END},
     c_quality, e_quality},
    {"two-sample", "Welch's t for two independent samples (unequal variances)",
     "caliper calc two-sample --a old.txt --b new.txt",
     {{"a", F_PATH, 0, NULL, 1, NAN_, NULL, "first sample, one value per line"},
      {"b", F_PATH, 0, NULL, 1, NAN_, NULL, "second sample"},
      NUMF("level", CAL_U_RATIO, NULL, 0, 0.95, "in (0, 1)", "CI level (default 0.95)"),
      END},
     c_welch, e_welch},
    {"median", "median with a seeded bootstrap CI of values in a file",
     "caliper calc median --file tps.txt",
     {{"file", F_PATH, 0, NULL, 1, NAN_, NULL, "values, one per line (or CSV column 1)"},
      NUMF("level", CAL_U_RATIO, NULL, 0, 0.95, "in (0, 1)", "CI level (default 0.95)"),
      NUMF("reps", CAL_U_COUNT, NULL, 0, 2000, "100..100000", "bootstrap resamples (2000)"),
      NUMF("seed", CAL_U_COUNT, NULL, 0, 1, "a whole number in 0..2^53",
           "random seed (1): same seed, same CI"),
      END},
     c_median, e_median},
    {"roofline", "decode ceiling: bandwidth ÷ bytes read per token",
     "caliper calc roofline --weights 4.1GB --kv-per-token 128KB --context 4k --bandwidth 400GB/s",
     {NUMF("bytes-per-token", CAL_U_BYTES, NULL, 0, NAN_, POSR, "bytes read per token"),
      NUMF("weights", CAL_U_BYTES, NULL, 0, NAN_, POSR, "weight bytes read per token (active)"),
      NUMF("kv-per-token", CAL_U_BYTES, NULL, 0, NAN_, NNEG, "KV bytes per token of context"),
      NUMF("context", CAL_U_COUNT, NULL, 0, NAN_, NNEG, "context length"),
      NUMF("bandwidth", CAL_U_BANDWIDTH, NULL, 1, NAN_, POSR, "memory bandwidth"),
      NUMF("measured", CAL_U_TOKRATE, NULL, 0, NAN_, POSR, "measured decode tok/s"),
      END},
     c_roofline, e_roofline},
    {"energy", "joules per token, kWh and cost per million tokens",
     "caliper calc energy --power 60W --rate 74.1 --price-kwh 0.30",
     {NUMF("power", CAL_U_POWER, "W", 1, NAN_, POSR, "power while decoding (at the wall)"),
      NUMF("rate", CAL_U_TOKRATE, NULL, 1, NAN_, POSR, "tokens per second"),
      NUMF("price-kwh", CAL_U_RATIO, NULL, 0, 0, NNEG, "price per kWh"),
      NUMF("price-hour", CAL_U_RATIO, NULL, 0, 0, NNEG, "price per hour of the machine"),
      END},
     c_energy, e_energy},
};
#define N_CALCS (sizeof CALCS / sizeof CALCS[0])

/* ---- the shared path: parse, compute, print ------------------------------ */

static int n_flags(const calc_def *d)
{
    int n = 0;
    while (n < MAX_FLAGS && d->flags[n].name) n++;
    return n;
}

static void list_calcs(FILE *f)
{
    fprintf(f, "calculators (caliper calc NAME --help for each):\n");
    for (size_t i = 0; i < N_CALCS; i++)
        fprintf(f, "  %-22s %s\n", CALCS[i].name, CALCS[i].desc);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: caliper calc NAME [FLAGS] [--json]\n"
               "       caliper calc --list\n\n"
               "The field notes' formulas: each prints its inputs, the formula with the numbers\n"
               "put in, the result and what it means. Quantities take units (6.084s, 2.7GB,\n"
               "1133GB/s, 60W, 1296MHz, 5.5%%, 1M); --json prints the same for machines.\n"
               "Exit: 0 ok, 2 a missing or nonsensical input (the flag is named).\n\n");
    list_calcs(f);
}

static void calc_help(const calc_def *d, FILE *f)
{
    fprintf(f, "usage: caliper calc %s [FLAGS] [--json]\n\n%s\n\nflags:\n", d->name, d->desc);
    for (int i = 0; i < n_flags(d); i++) {
        const flag_spec *s = &d->flags[i];
        char kind[64], dflt[64] = "";
        if (s->kind == F_PATH) snprintf(kind, sizeof kind, "FILE");
        else if (s->kind == F_BOOL) kind[0] = '\0';
        else snprintf(kind, sizeof kind, "%s%s%s%s", s->kind == F_LIST ? "LIST of " : "",
                      cal_unit_name(s->unit), s->bare ? ", bare = " : "", s->bare ? s->bare : "");
        if (s->kind == F_NUM && !isnan(s->def)) snprintf(dflt, sizeof dflt, "; default %s", N(s->def));
        fprintf(f, "  --%-16s %s%s%s%s%s\n", s->name, s->help, kind[0] ? " [" : "", kind,
                kind[0] ? "]" : "", s->required ? " (required)" : dflt);
    }
    fprintf(f, "  --json             print inputs, results, formula and meaning as JSON\n"
               "\nexample:\n  %s\n", d->example);
}

static int parse_list(calc_ctx *c, int i, const char *arg)
{
    const flag_spec *s = &c->def->flags[i];
    char tmp[1024], flag[64];
    snprintf(flag, sizeof flag, "--%s", s->name);
    if (strlen(arg) >= sizeof tmp)
        return cli_usage_error(c->cmd, "%s: \"%.40s...\" is too long", flag, arg);
    strcpy(tmp, arg);
    c->nlist[i] = 0;
    char *save = NULL;
    for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (c->nlist[i] == LIST_CAP)
            return cli_usage_error(c->cmd, "%s: more than %d values", flag, LIST_CAP);
        int rc = cli_parse_unit(c->cmd, flag, t, s->unit, s->bare, &c->list[i][c->nlist[i]]);
        if (rc) return rc;
        c->nlist[i]++;
    }
    if (c->nlist[i] == 0) return cli_usage_error(c->cmd, "%s: \"%s\" has no values", flag, arg);
    return 0;
}

static void print_text(const calc_ctx *c)
{
    printf("%s · ", c->def->name);
    int first = 1;
    for (int i = 0; i < n_flags(c->def); i++) {
        const flag_spec *s = &c->def->flags[i];
        if (c->given[i]) {
            printf("%s--%s%s%s", first ? "" : " ", s->name, s->kind == F_BOOL ? "" : " ",
                   s->kind == F_BOOL ? "" : c->raw[i]);
            first = 0;
        }
    }
    for (int i = 0; i < n_flags(c->def); i++) {
        const flag_spec *s = &c->def->flags[i];
        if (!c->given[i] && s->kind == F_NUM && !isnan(s->def)) {
            printf("%s--%s %s (default)", first ? "" : " ", s->name, N(s->def));
            first = 0;
        }
    }
    printf("\n%s%s\n", c->formula, c->meaning);
}

static int print_json(const calc_ctx *c)
{
    json_t *root = json_object(), *ins = json_object(), *res = json_object();
    json_object_set_new(root, "calculator", json_string(c->def->name));
    for (int i = 0; i < n_flags(c->def); i++) {
        const flag_spec *s = &c->def->flags[i];
        if (s->kind == F_PATH) {
            if (c->given[i]) json_object_set_new(ins, s->name, json_string(c->raw[i]));
        } else if (s->kind == F_BOOL) {
            if (c->given[i]) json_object_set_new(ins, s->name, json_true());
        } else if (s->kind == F_LIST) {
            if (!c->given[i]) continue;
            json_t *a = json_array();
            for (size_t k = 0; k < c->nlist[i]; k++) json_array_append_new(a, json_real(c->list[i][k]));
            json_object_set_new(ins, s->name, a);
        } else if (c->given[i] || !isnan(s->def)) {
            json_object_set_new(ins, s->name, json_real(c->v[i]));
        }
    }
    for (size_t i = 0; i < c->nres; i++)
        json_object_set_new(res, c->res[i].key, c->res[i].null ? json_null()
                                                               : json_real(c->res[i].v));
    json_object_set_new(root, "inputs", ins);
    json_object_set_new(root, "results", res);
    if (c->extra) json_object_set(root, "model", c->extra);
    json_object_set_new(root, "formula", json_string(c->formula));
    json_object_set_new(root, "meaning", json_string(c->meaning));
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!s) return cli_fail("calc", "cannot format JSON");
    puts(s);
    free(s);
    return CLI_OK;
}

static int run_calc(const calc_def *d, int argc, char **argv)
{
    static calc_ctx ctx;
    calc_ctx *c = &ctx;
    memset(c, 0, sizeof *c);
    c->def = d;
    char cmd[64];
    snprintf(cmd, sizeof cmd, "calc %s", d->name);
    c->cmd = cmd;
    int nf = n_flags(d), json = 0;
    struct option opts[MAX_FLAGS + 3];
    for (int i = 0; i < nf; i++) {
        opts[i] = (struct option){d->flags[i].name,
                                  d->flags[i].kind == F_BOOL ? no_argument : required_argument,
                                  NULL, 1000 + i};
        c->v[i] = d->flags[i].kind == F_NUM ? d->flags[i].def : NAN;
    }
    opts[nf] = (struct option){"json", no_argument, NULL, 'j'};
    opts[nf + 1] = (struct option){"help", no_argument, NULL, 'h'};
    opts[nf + 2] = (struct option){0, 0, 0, 0};
    optind = 0;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        if (o == 'h') { calc_help(d, stdout); return CLI_OK; }
        if (o == 'j') { json = 1; continue; }
        if (o == '?' || o == ':') {
            const char *bad = argv[optind - 1];
            if (optopt >= 1000)
                return cli_usage_error(cmd, "%s needs a value", bad);
            return cli_usage_error(cmd, "unknown flag %s", bad);
        }
        int i = o - 1000;
        const flag_spec *s = &d->flags[i];
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", s->name);
        c->given[i] = 1;
        c->raw[i] = s->kind == F_BOOL ? "" : optarg;
        int rc = 0;
        if (s->kind == F_NUM) rc = cli_parse_unit(cmd, flag, optarg, s->unit, s->bare, &c->v[i]);
        else if (s->kind == F_LIST) rc = parse_list(c, i, optarg);
        else if (s->kind == F_PATH && !*optarg)
            rc = cli_usage_error(cmd, "%s: an empty file name", flag);
        if (rc) return rc;
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    for (int i = 0; i < nf; i++)
        if (d->flags[i].required && !c->given[i]) {
            const flag_spec *s = &d->flags[i];
            return cli_usage_error(cmd, "--%s is required: %s%s%s%s", s->name, s->help,
                                   s->kind == F_PATH ? "" : " (",
                                   s->kind == F_PATH ? "" : cal_unit_name(s->unit),
                                   s->kind == F_PATH ? "" : ")");
        }
    int rc = d->compute(c);
    if (rc) {
        json_decref(c->extra);
        c->extra = NULL;
    }
    if (rc == CAL_ENOMEM) return cli_fail(cmd, "out of memory");
    if (rc) {
        int i = -1;
        for (int k = 0; k < nf && c->bad; k++) if (!strcmp(d->flags[k].name, c->bad)) i = k;
        if (i < 0) return cli_usage_error(cmd, "%s", c->why[0] ? c->why : cal_strerror(rc));
        const flag_spec *s = &d->flags[i];
        char val[96];
        if (!c->given[i]) snprintf(val, sizeof val, "(not given)");
        else snprintf(val, sizeof val, "\"%s\"", c->raw[i]);
        if (c->why[0] && c->given[i] && s->kind != F_BOOL)
            return cli_usage_error(cmd, "--%s %s %s", s->name, val, c->why);
        if (c->why[0]) return cli_usage_error(cmd, "--%s %s", s->name, c->why);
        return cli_usage_error(cmd, "--%s: %s is out of range: %s", s->name, val,
                               s->range ? s->range : "not a meaningful value here");
    }
    /* The net under every calculator: no verdict is written around a
     * result that is not a number. */
    for (size_t k = 0; k < c->nres; k++)
        if (!c->res[k].null && !isfinite(c->res[k].v)) {
            json_decref(c->extra);
            c->extra = NULL;
            return cli_usage_error(cmd, "the inputs give %s = %g, not a finite number: an input "
                                   "is too large or too small for this formula", c->res[k].key,
                                   c->res[k].v);
        }
    d->explain(c);
    rc = json ? print_json(c) : (print_text(c), CLI_OK);
    json_decref(c->extra);
    c->extra = NULL;
    return rc;
}

int cmd_calc(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return CLI_USAGE; }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) { usage(stdout); return CLI_OK; }
    if (!strcmp(name, "--list")) { list_calcs(stdout); return CLI_OK; }
    for (size_t i = 0; i < N_CALCS; i++)
        if (!strcmp(name, CALCS[i].name)) return run_calc(&CALCS[i], argc - 1, argv + 1);
    return cli_usage_error("calc", "\"%s\" is not a calculator (caliper calc --list)", name);
}
