/* caliper calc — what a change can gain: bandwidth saved, capacity that
 * already fits, Amdahl both ways, the coverage ceiling both ways, launch
 * overhead. A table of calculators (calc.h); cmd_calc.c runs them. */
#include <math.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/formulas.h"
#include "calc.h"

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

static const calc_def DEFS[] = {
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
};
const calc_family calc_gain = { DEFS, sizeof DEFS / sizeof DEFS[0] };
