/* caliper calc — memory: KV bytes per token (from flags, a config.json or a
 * GGUF header), sequences in a budget, usable context, decode time against
 * context, leak watch time, overcommit, the batching gain. A table of
 * calculators (calc.h); cmd_calc.c runs them. */
#include <math.h>
#include <string.h>
#include <jansson.h>
#include "caliper/error.h"
#include "caliper/formulas.h"
#include "caliper/gguf.h"
#include "calc.h"

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

static const calc_def DEFS[] = {
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
};
const calc_family calc_memory = { DEFS, sizeof DEFS / sizeof DEFS[0] };
