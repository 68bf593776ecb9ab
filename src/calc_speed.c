/* caliper calc — throughput, clocks and power: prefill and client-side
 * decode rates, warm from cold by the clock, the power split under a wall,
 * the whole turn seen by the user. A table of calculators (calc.h);
 * cmd_calc.c runs them. */
#include <math.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/formulas.h"
#include "calc.h"

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

static const calc_def DEFS[] = {
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
};
const calc_family calc_speed = { DEFS, sizeof DEFS / sizeof DEFS[0] };
