/* caliper — the protocol fingerprint (口径) of a summary number (SPEC 1.1, 1.2,
 * 1.5 item 5): which shots, how rested, which concurrency cell and column,
 * what prompt, what output policy, which API and tool, on which host.
 * Two numbers may be divided only when their fingerprints are equal;
 * cal_fp_diff names every field that is not.
 *
 * Unknown values are explicit (CAL_SHOT_UNKNOWN, NAN, -1, "" strings) and a
 * known value never equals an unknown one: "unknown" is a protocol too. The
 * struct is plain data (fixed strings, no pointers): copy it freely. */
#ifndef CALIPER_FINGERPRINT_H
#define CALIPER_FINGERPRINT_H
#include <stddef.h>
#include "caliper/schema.h"   /* cal_shot_kind, cal_column */

#define CAL_FP_STR 96

typedef struct cal_fingerprint {
    cal_shot_kind shot_kind;
    int    shot_first, shot_last;  /* 1-based inclusive range; 0,0 = unknown */
    double rest_s;                 /* rest before each shot, s; NAN unknown */
    int    warmup;                 /* warm-up shots excluded; -1 unknown */
    int    concurrency;            /* closed-loop cell; 0 = unknown/unbounded */
    double request_rate;           /* open-loop req/s; 0 = closed loop,
                                      INFINITY = all at once, NAN unknown */
    cal_column column;
    long   prompt_tokens;          /* per request; 0 = unknown or mixed */
    char   content[CAL_FP_STR];    /* "prose", "code", "random", "dataset:…"; "" unknown */
    char   output_policy[CAL_FP_STR]; /* "fixed 64", "up to 64", "eos"; "" unknown */
    int    streaming;              /* 1 yes, 0 no, -1 unknown */
    char   api[CAL_FP_STR];        /* "completions", "chat"; "" unknown */
    char   probe[CAL_FP_STR];      /* "caliper 0.1.0", "vllm bench serve" */
    char   host[CAL_FP_STR];       /* CPU/GPU summary that identifies the host */
    char   slo[CAL_FP_STR];        /* goodput's --slo ("ttft=500ms,tpot=50ms"); ""
                                      none. Compare clears it for every metric
                                      but goodput, the one number it changes */
    char   damaged[CAL_FP_STR];    /* the stored protocol's first damaged field
                                      ("protocol.shots"); "" intact. A damaged
                                      protocol equals no other, itself included:
                                      what it held is not known */
} cal_fingerprint;

/* Every field unknown (shot kind unknown, NAN rest and rate, -1 warm-up and
 * streaming, empty strings), column aggregate. */
void cal_fp_init(cal_fingerprint *fp);

/* Copy s into one of the fixed string fields, truncating at CAL_FP_STR - 1. */
void cal_fp_set(char dst[CAL_FP_STR], const char *s);

/* The fields, in the order they are compared and printed. */
typedef enum cal_fp_field {
    CAL_FPF_SHOT_KIND = 0, CAL_FPF_SHOT_RANGE, CAL_FPF_REST, CAL_FPF_WARMUP,
    CAL_FPF_CONCURRENCY, CAL_FPF_RATE, CAL_FPF_COLUMN, CAL_FPF_PROMPT,
    CAL_FPF_CONTENT, CAL_FPF_OUTPUT, CAL_FPF_STREAMING, CAL_FPF_API,
    CAL_FPF_PROBE, CAL_FPF_HOST, CAL_FPF_SLO, CAL_FPF_PROTOCOL,
    CAL_FPF__N
} cal_fp_field;

/* Human name of a field: "shot kind", "shot range", "rest", "warm-up",
 * "concurrency", "request rate", "column", "prompt length", "content",
 * "output policy", "streaming", "API", "probe", "host", "SLO", "stored
 * protocol". Never NULL. */
const char *cal_fp_field_name(cal_fp_field f);

/* One field's value as text ("cold", "15 s", "c8", "unknown"...) into
 * buf[n]; returns buf. */
char *cal_fp_field_value(const cal_fingerprint *fp, cal_fp_field f,
                         char *buf, size_t n);

typedef struct cal_fp_difference {
    cal_fp_field field;
    char a[CAL_FP_STR];   /* value in the first fingerprint, as text */
    char b[CAL_FP_STR];   /* value in the second */
} cal_fp_difference;

/* Compare two fingerprints field by field. Writes up to cap differences to
 * out (out may be NULL when cap is 0) and returns how many fields differ in
 * total (0 = comparable). Doubles compare equal within 1e-9 relative; NAN
 * equals NAN (both unknown). */
size_t cal_fp_diff(const cal_fingerprint *a, const cal_fingerprint *b,
                   cal_fp_difference *out, size_t cap);

/* The differences as one line: "shot kind cold vs warm; rest 0 s vs 15 s".
 * Writes at most n bytes including the NUL; returns buf. */
char *cal_fp_diff_text(const cal_fp_difference *d, size_t nd,
                       char *buf, size_t n);

/* A short protocol line for captions and row labels:
 * "warm shots 2–6 · rest 0 s · warm-up 1 · c1 · 512 tok prose · fixed 64 ·
 *  stream · completions · caliper 0.1.0 · host". Returns buf. */
char *cal_fp_describe(const cal_fingerprint *fp, char *buf, size_t n);

/* ---- a stored run's fingerprints ----------------------------------------
 * Every field from the run's cells and its protocol record (store.h's
 * cal_run_data.proto), none from stored JSON keys: compare, the report and
 * the noise prior's matching read the same fingerprint of a stored run. */
struct cal_run_data;

/* The fingerprint of the cells group[0..n) of run d (indices into
 * d->cells: an analysis group's quoted shots, or one shot's cell), whose
 * shot kind is `kind`: the shot range (first and last cell's), the rest (NAN
 * when the cells' rests differ), the warm-up shots (0 where the stored
 * protocol has none, -1 with no stored protocol), the cell (concurrency,
 * rate, prompt length), content ("dataset:ID" where the prompts came from a
 * dataset; "(repeated prompt)" where prompts were not unique), output policy
 * ("fixed N", "up to N"), streaming, API (the target's; "completions" when
 * not stored), probe (cal_fp_probe_of the build), host (cal_fp_host_of),
 * SLO and the stored protocol's damage (d->proto.damaged_field). Column
 * aggregate. CAL_EINVAL for no cells or an index past n_cells. */
int cal_fingerprint_of(const struct cal_run_data *d, const size_t *group, size_t n,
                       cal_shot_kind kind, cal_fingerprint *fp);

/* The host a run's host record names: "CPU (N cores), GPU, M GiB, OS";
 * "" when host_json is NULL or not JSON. Returns buf. */
char *cal_fp_host_of(const char *host_json, char *buf, size_t n);
/* The probe of a build string: "caliper 0.1.0 (commit …)" -> "caliper
 * 0.1.0"; "caliper" when it has no version. Returns buf. */
char *cal_fp_probe_of(const char *build, char *buf, size_t n);

#endif
