/* caliper calc — ceilings and costs: the decode roofline, energy and cost
 * per token. A table of calculators (calc.h); cmd_calc.c runs them. */
#include <math.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/formulas.h"
#include "calc.h"

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

static const calc_def DEFS[] = {
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
const calc_family calc_ceiling = { DEFS, sizeof DEFS / sizeof DEFS[0] };
