/* caliper — the field notes' formulas (SPEC 1.4) as pure functions.
 * Every function takes SI base units (s, B, B/s, W, Hz, tok/s, plain ratios),
 * writes its results through out-pointers, and returns CAL_OK or:
 *   CAL_EINVAL  an input is not a finite number, or a required one is missing
 *   CAL_ERANGE  an input is outside the range where the formula means
 *               anything (negative time, share > 1, acceptance >= 1, a zero
 *               divisor, points that do not determine a line)
 * On failure *bad names the offending input, spelled as the `caliper calc`
 * flag without its dashes ("share", "t-verify"), and the outputs are left
 * untouched. No function returns or stores a NaN or an infinity; an input
 * that leaves nothing to compute (0 tokens, 0 W, 0 bytes saved) is an error
 * naming it, not a result of 0.
 * bad may be NULL. docs/methodology.md derives each formula. */
#ifndef CALIPER_FORMULAS_H
#define CALIPER_FORMULAS_H
#include <stddef.h>

/* tokens ÷ seconds (prefill throughput, client decode speed). tokens > 0,
 * seconds > 0. From a TTFT this is only a lower bound on prefill speed. */
int cal_f_rate(double tokens, double seconds, double *tok_per_s, const char **bad);

/* SPEC 1.4 warm from cold: warm ≈ cold × f_warm ÷ f_cold. All > 0. */
int cal_f_warm_from_cold(double cold_tps, double f_cold_hz, double f_warm_hz,
                         double *warm_tps, const char **bad);

/* Power split at a wall: residual = wall − gpu − memory (>= 0, else the
 * named input is inconsistent: "wall"). wall, gpu > 0, memory >= 0. */
int cal_f_power_residual(double wall_w, double gpu_w, double memory_w,
                         double *residual_w, const char **bad);
/* The same identity solved for the GPU: gpu = wall − memory − residual. */
int cal_f_power_gpu(double wall_w, double memory_w, double residual_w,
                    double *gpu_w, const char **bad);

/* Whole-turn speedup (TTFT + decode × s) ÷ (TTFT + decode), TTFT and decode
 * measured after the change (TTFT >= 0, decode > 0), s > 0 the engine-side decode
 * speedup. ttft_share = TTFT ÷ (TTFT + decode). */
int cal_f_whole_turn(double ttft_s, double decode_s, double s,
                     double *speedup, double *ttft_share, const char **bad);

/* Bandwidth-saving bound: time saved per step <= bytes ÷ bandwidth × share.
 * bytes > 0, bandwidth > 0, share in (0, 1]. */
int cal_f_bw_saving(double bytes, double bandwidth_Bps, double share,
                    double *saved_s, const char **bad);
/* Predicted tok/s after saving saved_s per step: tokens_per_step ÷
 * (step_s − saved_s). step_s must exceed saved_s ("step-time"). */
int cal_f_bw_predicted(double tokens_per_step, double step_s, double saved_s,
                       double *tok_per_s, const char **bad);

/* Capacity vs bandwidth: do n models (bytes each, > 0) plus reserve fit in memory?
 * need = Σ bytes + reserve, headroom = memory − need, *fits = headroom >= 0. */
int cal_f_capacity(const double *model_bytes, size_t n, double reserve_bytes,
                   double memory_bytes, double *need, double *headroom, int *fits,
                   const char **bad);

/* Amdahl: e2e = 1 ÷ ((1 − p) + p ÷ s). s > 0 ("kernel-speedup"),
 * p in [0, 1] ("share"). */
int cal_f_amdahl(double s, double p, double *e2e, const char **bad);
/* Its inverse: the share p that turns kernel speedup s into the observed
 * end-to-end speedup e2e: p = (1 − 1/e2e) ÷ (1 − 1/s). s != 1; the result
 * must lie in [0, 1] (else "e2e": more gain than the kernel could give). */
int cal_f_amdahl_share(double s, double e2e, double *p, const char **bad);

/* Coverage = Σ kernel time ÷ end-to-end time (kernel <= total, total > 0). */
int cal_f_coverage(double kernel_s, double total_s, double *coverage, const char **bad);
/* Ceiling when every known kernel takes zero time: 1 ÷ (1 − coverage),
 * coverage in [0, 1). */
int cal_f_coverage_ceiling(double coverage, double *ceiling, const char **bad);
/* Inverse: coverage = 1 − 1 ÷ ceiling, ceiling >= 1. */
int cal_f_coverage_from_ceiling(double ceiling, double *coverage, const char **bad);
/* Per-launch overhead = (total − Σ kernel) ÷ launches; launches >= 1. */
int cal_f_launch_overhead(double total_s, double kernel_s, double launches,
                          double *per_launch_s, const char **bad);

/* The KV cache layout of a model, as far as its size per token goes. */
typedef struct cal_kv_shape {
    double layers;        /* layers that keep a KV cache ("layers") */
    double kv_heads;      /* key/value heads per layer ("kv-heads") */
    double k_dim;         /* key head dimension ("head-dim") */
    double v_dim;         /* value head dimension; 0 = same as k_dim */
    double bits;          /* bits per stored element, e.g. 16, 8, 4 ("kv-bits") */
    double group;         /* elements per quantisation group; 0 = no scales */
    double scale_bytes;   /* bytes of scale (+ bias) per group ("scale-bytes") */
} cal_kv_shape;
/* SPEC 1.4: bytes per token = layers × kv_heads × (k_dim + v_dim) ×
 * (bits ÷ 8 + scale_bytes ÷ group), i.e. 2 × layers × kv_heads × head_dim ×
 * bytes per element when k_dim = v_dim. */
int cal_f_kv_bytes_per_token(const cal_kv_shape *s, double *bytes, const char **bad);
/* Sequences of `context` tokens that fit in budget − weights:
 * floor((budget − weights) ÷ (kv_per_token × context)); per_seq = kv × context. */
int cal_f_kv_sequences(double kv_bytes_per_token, double context, double budget_bytes,
                       double weights_bytes, double *sequences, double *per_seq_bytes,
                       const char **bad);

/* Usable context from two points: peak(n) = base + slope·n through
 * (n1, peak1), (n2, peak2); n_max = (budget − base) ÷ slope. n1 != n2,
 * slope > 0 ("peak2"), budget > base ("budget"). */
int cal_f_usable_context(double n1, double peak1, double n2, double peak2,
                         double budget, double *base, double *slope, double *n_max,
                         const char **bad);

/* Long-context decode from three points (n[i] context, t[i] step seconds):
 * least squares t(n) = a + b·n; tok/s at `at` = 1 ÷ t(at); the check is the
 * third point against the line through the first two: dev = t3 ÷ line(n3) − 1.
 * n distinct ("n2"/"n3"), t > 0, t(at) > 0 ("at"). */
int cal_f_decode_context(const double n[3], const double t[3], double at,
                         double *a, double *b, double *tps_at, double *dev3,
                         const char **bad);

/* Leak watch time = resolution ÷ slope (bytes, bytes/s; both > 0). */
int cal_f_leak_watch(double resolution_bytes, double slope_Bps, double *watch_s,
                     const char **bad);

/* Cache-limit overcommit = Σ limits ÷ physical memory (n >= 1, each > 0). */
int cal_f_overcommit(const double *limits, size_t n, double memory_bytes,
                     double *ratio, const char **bad);

/* Batching gain(B) = [bw_B ÷ bw_1] × [bytes/token at 1 ÷ bytes/token at B]. */
int cal_f_batching_gain(double bw_b, double bw_1, double bpt_1, double bpt_b,
                        double *gain, double *feed, double *bytes_factor,
                        const char **bad);

/* Speculative decoding, per-token acceptance alpha in [0, 1) ("alpha"),
 * k >= 1 drafted tokens ("k"): E = (1 − α^(k+1)) ÷ (1 − α). */
int cal_f_spec_tokens(double alpha, double k, double *tokens_per_round, const char **bad);
/* speedup = E × t_decode ÷ (t_verify + k × t_draft), where t_verify is the
 * time of one target pass over k + 1 tokens. Times > 0 (t_draft >= 0). */
int cal_f_spec_speedup(double alpha, double k, double t_decode_s, double t_verify_s,
                       double t_draft_s, double *speedup, const char **bad);
/* Break-even α solving speedup = 1, by bisection on [0, 1). *exists = 0 when
 * even α → 1 loses (then *alpha = 1); α = 0 when drafting always wins. */
int cal_f_spec_break_even(double k, double t_decode_s, double t_verify_s,
                          double t_draft_s, double *alpha, int *exists, const char **bad);

/* Decode roofline: tok/s <= bandwidth ÷ bytes read per token. */
int cal_f_roofline(double bytes_per_token, double bandwidth_Bps, double *tok_per_s,
                   const char **bad);

/* Energy: J per token = W ÷ tok/s (both > 0); kWh per million tokens. */
int cal_f_energy(double power_w, double tok_per_s, double *j_per_token,
                 double *kwh_per_mtok, const char **bad);
/* Cost per million tokens from a price per kWh (energy) or per hour of the
 * machine (rental): pass the unused price as 0; both may be given (summed). */
int cal_f_cost_per_mtok(double kwh_per_mtok, double tok_per_s, double price_per_kwh,
                        double price_per_hour, double *cost, const char **bad);

#endif
