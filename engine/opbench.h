/* caliper reference engine — the op micro-benchmark: each op of the model
 * run alone, on the engine's own weights, kernels and threads, with the
 * shapes of one step of `tokens` tokens at context position `pos`, repeated
 * on the same data so its caches stay warm. What a kernel author's
 * micro-benchmark measures; `caliper ops` sets it against the in-graph
 * profile of a real run (docs/ops.md: the single-op trap). */
#ifndef CALIPER_ENGINE_OPBENCH_H
#define CALIPER_ENGINE_OPBENCH_H
#include "engine/engine.h"

typedef struct cal_opbench_opts {
    int tokens;   /* tokens per call (a step's rows): 1 = decode; >= 1 */
    int pos;      /* context position of the first token (KV cache depth) */
    int reps;     /* timed calls per op after 3 untimed ones; >= 1 */
} cal_opbench_opts;

/* Run every op of e's model alone and return the results as one JSON
 * document, "format": "caliper.engine.opbench/1" (docs/ops.md): per op the
 * timed calls, their summed time_ns, the median call_ns, and FLOPs and bytes
 * counted as in the engine profile. e must have been opened with
 * max_step_tokens >= tokens; pos + tokens <= max_ctx. The engine's profile
 * counters are left untouched. *json is malloc'd (the caller frees it).
 * CAL_EINVAL (a bad option, named in the engine's last error), CAL_ENOMEM. */
int cal_engine_opbench(cal_engine *e, const cal_opbench_opts *o, char **json);

#endif
