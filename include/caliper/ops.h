/* caliper — per-op reconciliation between two engines (`caliper ops`).
 * Reads per-op profiles in three shapes (caliper's engine profile, Chrome
 * trace-event JSON as the PyTorch profiler and Perfetto write it, a plain
 * CSV) into one cal_ops_profile, maps each op name to a common category
 * through glob patterns, and computes per category and per token: time and
 * share of end to end, calls (the re-dispatch difference), bytes and
 * achieved GB/s, FLOPs and GFLOP/s; then coverage and its 1 ÷ (1 − coverage)
 * ceiling, Amdahl what-ifs, and where the gap between two engines lies
 * (inside kernels or outside them). Also the op micro-benchmark's file
 * (`caliper serve --op-bench`) set against an in-graph profile: the
 * single-op trap.
 *
 * Units: times in ns inside the structs (the names say so), per-token
 * figures in ms, bandwidth in B/s. Absent numbers are NAN, never 0.
 * Ownership: every cal_ops_* object is opened by one call and freed by its
 * _free(&p), which NULLs the caller's pointer. Writers append to a
 * caller-owned cal_buf. Nothing here prints or exits. */
#ifndef CALIPER_OPS_H
#define CALIPER_OPS_H
#include <stddef.h>
#include "caliper/buf.h"

#define CAL_OPS_NAME_MAX  128          /* bytes of an op name, NUL included */
#define CAL_OPS_CAT_MAX   32           /* bytes of a category name */
#define CAL_OPS_MAX_OPS   4096         /* distinct op names in one profile */
#define CAL_OPS_MAX_CATS  32           /* categories in one reconciliation */
#define CAL_OPS_MAX_RULES 512          /* patterns in one mapping */
#define CAL_OPS_MAX_EVENTS (4u << 20)  /* trace events read from one file */
#define CAL_OPS_FILE_MAX  ((size_t)256 << 20)  /* bytes of a profile file */

/* ---- profiles ------------------------------------------------------------ */

typedef enum cal_ops_format {
    CAL_OPS_ENGINE = 0,   /* caliper.engine.profile/1 (docs/profile.md) */
    CAL_OPS_OPBENCH,      /* caliper.engine.opbench/1: each op alone */
    CAL_OPS_TRACE,        /* Chrome trace-event JSON */
    CAL_OPS_CSV           /* op,calls,time[,bytes][,flops] */
} cal_ops_format;
const char *cal_ops_format_name(cal_ops_format f);  /* "engine", "opbench", "trace", "csv" */

typedef struct cal_ops_op {
    char   name[CAL_OPS_NAME_MAX];
    double calls;        /* timed regions (kernel launches, dispatches) */
    double time_ns;      /* summed over calls */
    double bytes;        /* bytes moved, summed; NAN unknown */
    double flops;        /* FLOPs done, summed; NAN unknown */
    double call_ns;      /* opbench only: median ns of one call; NAN otherwise */
} cal_ops_op;

typedef struct cal_ops_profile {
    char   label[128];          /* what the tables call it (file base name) */
    char   source[256];         /* "caliper engine moe, 2 threads, OpenBLAS Haswell" */
    cal_ops_format format;
    double tokens;              /* tokens the profile covers; NAN unknown */
    double e2e_ns;              /* end-to-end time those tokens took; NAN unknown */
    double steps;               /* engine steps (engine profile); NAN unknown */
    double step_tokens;         /* opbench: tokens per call it ran; NAN otherwise */
    double threads;             /* compute threads; NAN unknown */
    cal_ops_op *ops;            /* [n_ops], distinct names, file order */
    size_t n_ops;
} cal_ops_profile;

typedef struct cal_ops_read_opts {
    /* trace: the event category ("cat") counted as kernels. NULL: "kernel"
     * when the trace has such events (GPU kernels), else "cpu_op", else
     * every complete event. Events nested inside another counted event of
     * the same thread are not counted again. */
    const char *trace_cat;
    /* trace: glob of the span names whose summed duration is end to end.
     * NULL: "ProfilerStep#*" (the PyTorch profiler's step spans). */
    const char *e2e_span;
} cal_ops_read_opts;

/* Parse text[len] as any of the four shapes: a JSON object whose "format"
 * is caliper.engine.profile/1 or caliper.engine.opbench/1, a JSON object
 * with "traceEvents" or a JSON array (a trace), else CSV. label names the
 * profile (may be NULL: "profile"). o may be NULL. On failure returns
 * CAL_EPROTO (malformed input), CAL_EINVAL (a field out of range),
 * CAL_ETOOBIG (over a cap), CAL_ENOMEM, with err naming the field or line. */
int cal_ops_parse(const char *text, size_t len, const char *label,
                  const cal_ops_read_opts *o, cal_ops_profile **out,
                  char *err, size_t errn);
/* One shape only (the fuzz targets call these). Same failures. */
int cal_ops_parse_engine(const char *text, size_t len, const char *label,
                         cal_ops_profile **out, char *err, size_t errn);
int cal_ops_parse_trace(const char *text, size_t len, const char *label,
                        const cal_ops_read_opts *o, cal_ops_profile **out,
                        char *err, size_t errn);
/* CSV: a header naming the columns op, calls, and one time column: time_ns,
 * time_us, time_ms, time_s, or time (values with a unit, bare = ms);
 * optional bytes and flops (empty cell = unknown). Comment lines
 * "# tokens: N" and "# e2e: TIME" (bare = ms) give the tokens and the end
 * to end; other '#' lines are skipped. Rows with the same op add up. */
int cal_ops_parse_csv(const char *text, size_t len, const char *label,
                      cal_ops_profile **out, char *err, size_t errn);
/* Read path (at most CAL_OPS_FILE_MAX bytes) and parse it; the label is
 * the file's base name. CAL_ENOTFOUND / CAL_EIO name the path. */
int cal_ops_load(const char *path, const cal_ops_read_opts *o, cal_ops_profile **out,
                 char *err, size_t errn);
void cal_ops_profile_free(cal_ops_profile **p);

/* ---- mapping op names to categories ----------------------------------------
 * A rule is a glob (fnmatch, case-insensitive) and a category. The first
 * rule that matches an op's name wins; rules from a file come before the
 * shipped defaults (caliper's engine, PyTorch aten and CUDA kernel names,
 * llama.cpp/ggml op names), which can be left out. */
typedef struct cal_ops_map cal_ops_map;

/* The shipped defaults alone. CAL_ENOMEM. */
int  cal_ops_map_default(cal_ops_map **out);
/* Rules from text: one "PATTERN CATEGORY" per line, blank-separated; blank
 * lines and lines starting with '#' skipped. A category is 1..31 bytes of
 * [a-z0-9_/-]. with_defaults: append the shipped rules after them.
 * CAL_EPROTO with err naming the line; CAL_ETOOBIG past CAL_OPS_MAX_RULES. */
int  cal_ops_map_parse(const char *text, size_t len, int with_defaults,
                       cal_ops_map **out, char *err, size_t errn);
/* The category of op, or NULL when no rule matches (an unmatched op). */
const char *cal_ops_map_category(const cal_ops_map *m, const char *op);
void cal_ops_map_free(cal_ops_map **m);

/* ---- the reconciliation -------------------------------------------------- */

typedef struct cal_ops_cat {
    double time_ns, calls;           /* summed over the category's ops */
    double bytes, flops;             /* NAN when none of its ops knows */
    double ms_per_token;             /* time ÷ tokens, ms */
    double share;                    /* time ÷ end to end */
    double calls_per_token;
    double bytes_per_token;          /* NAN unknown */
    double Bps;                      /* bytes ÷ time: achieved bandwidth; NAN unknown */
    double bw_fraction;              /* Bps ÷ the machine's bandwidth; NAN without one */
    double flops_per_token;          /* NAN unknown */
    double flops_per_s;              /* NAN unknown */
    int    present;                  /* some op of this profile maps here */
} cal_ops_cat;

typedef struct cal_ops_side {
    const cal_ops_profile *p;
    double e2e_ms_per_token;
    double kernel_ms_per_token;      /* Σ category time ÷ tokens */
    double outside_ms_per_token;     /* e2e − kernels: belongs to no kernel */
    double coverage;                 /* cal_f_coverage */
    double ceiling;                  /* cal_f_coverage_ceiling; NAN at coverage 1 */
    double calls_per_token;          /* all ops */
    cal_ops_cat cat[CAL_OPS_MAX_CATS];
    size_t unmatched[64];            /* indices into p->ops of unmatched ops */
    size_t n_unmatched;              /* may exceed 64: all counted, 64 listed */
} cal_ops_side;

typedef struct cal_ops_whatif {
    char   cat[CAL_OPS_CAT_MAX];
    double speedup;                  /* the kernel speedup asked for (> 0) */
    double share[2];                 /* the category's share per side */
    double e2e[2];                   /* Amdahl end-to-end speedup per side */
} cal_ops_whatif;

#define CAL_OPS_UNMATCHED "unmatched"  /* the category of unmatched ops */
#define CAL_OPS_MAX_WHATIF 8

typedef struct cal_ops_opts {
    double bandwidth_Bps;            /* the machine's bandwidth; 0 = none */
    const char *bandwidth_source;    /* "given", "measured (copy, 64 MiB)"; may be NULL */
    cal_ops_whatif whatif[CAL_OPS_MAX_WHATIF];  /* cat and speedup set */
    size_t n_whatif;
} cal_ops_opts;

typedef struct cal_ops_recon {
    size_t n_sides;                          /* 1 or 2 */
    cal_ops_side side[2];
    char   cats[CAL_OPS_MAX_CATS][CAL_OPS_CAT_MAX];  /* rows, canonical order */
    size_t n_cats;
    /* two sides only: A − B per token (positive: A spends more) */
    double gap_ms[CAL_OPS_MAX_CATS];         /* per category */
    size_t gap_order[CAL_OPS_MAX_CATS];      /* categories by |gap|, largest first */
    double gap_total_ms;                     /* e2e A − e2e B */
    double gap_kernel_ms;                    /* Σ gap_ms */
    double gap_outside_ms;                   /* outside A − outside B */
    double bandwidth_Bps;                    /* 0 = none */
    char   bandwidth_source[64];
    cal_ops_whatif whatif[CAL_OPS_MAX_WHATIF];
    size_t n_whatif;
    char   biggest[256];                     /* "the biggest gap is ..."; "" one side */
} cal_ops_recon;

/* Reconcile a (and b, may be NULL) under map. Both need tokens and an end
 * to end (CAL_EINVAL, err names the profile and the field: "a.json: tokens
 * unknown (give --tokens)"); an opbench file is not a run (CAL_EINVAL).
 * A kernel time larger than the end to end is CAL_ERANGE (err says so).
 * A what-if naming a category no side has is CAL_ENOTFOUND. The result
 * keeps pointers to a and b: they must outlive it. */
int cal_ops_reconcile(const cal_ops_profile *a, const cal_ops_profile *b,
                      const cal_ops_map *map, const cal_ops_opts *o,
                      cal_ops_recon *out, char *err, size_t errn);
/* The row index of category name in r, or -1. */
int cal_ops_recon_cat(const cal_ops_recon *r, const char *name);

/* ---- the single-op trap -------------------------------------------------- */

typedef struct cal_ops_trap_row {
    char   op[CAL_OPS_NAME_MAX];     /* the op (or category for "MoE block") */
    double graph_call_ns;            /* in-graph time ÷ calls */
    double iso_call_ns;              /* the isolated mean per call */
    double undercount;               /* 1 − iso ÷ graph (0.6 = 60 % under) */
} cal_ops_trap_row;

typedef struct cal_ops_trap {
    cal_ops_trap_row rows[32];
    size_t n_rows;
    double graph_tokens_per_step;    /* the in-graph run's tokens ÷ steps */
    double iso_tokens_per_call;      /* the shape the bench ran */
    int    moe_row;                  /* index of the MoE block row; -1 none */
} cal_ops_trap;

/* Set an op bench (bench) against an in-graph engine profile (graph), op by
 * op for every op both ran, plus the whole MoE block (router + experts)
 * where the model has one. CAL_EINVAL when bench is not an opbench file or
 * graph not an engine profile. */
int cal_ops_trap_compare(const cal_ops_profile *graph, const cal_ops_profile *bench,
                         cal_ops_trap *out, char *err, size_t errn);

/* ---- outputs ------------------------------------------------------------- */

/* The whole reconciliation (and the trap when non-NULL) as one JSON
 * document, "format": "caliper.ops/1" (docs/ops.md). CAL_ENOMEM, CAL_ETOOBIG. */
int cal_ops_to_json(const cal_ops_recon *r, const cal_ops_trap *trap, cal_buf *out);
/* The HTML report's section from such a document: a bar chart of ms per
 * token by category for each side, each side's coverage line, the biggest
 * gap. CAL_EPROTO (err) when the text is not a caliper.ops/1 document. */
int cal_ops_html_section(const char *json, size_t len, cal_buf *out,
                         char *err, size_t errn);

/* ---- bandwidth ----------------------------------------------------------- */

/* A STREAM-style copy: bytes (>= 1 MiB) copied between two buffers reps
 * times; the best rep counts 2 × bytes moved (read + write) ÷ its time.
 * One thread. CAL_EINVAL, CAL_ENOMEM. */
int cal_ops_measure_copy_bw(size_t bytes, int reps, double *Bps);

#endif
