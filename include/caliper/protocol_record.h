/* caliper — the measurement protocol of a stored run as one typed record:
 * the target's identity and every flag that decides what a number means.
 * One serializer pair writes and reads it (the runs table's "protocol" and
 * "target" columns, export files, shard documents); readers use fields.
 *
 * Plain data: fixed strings, no pointers but the two opaque JSON blobs
 * (scenario_json, extra_json), which cal_protocol_clear frees. A copy made
 * with = shares those blobs: copy with cal_protocol_copy. Unknown values are
 * explicit: -1 for ints, NAN for doubles, "" for strings, 0 counts. */
#ifndef CALIPER_PROTOCOL_RECORD_H
#define CALIPER_PROTOCOL_RECORD_H
#include <stddef.h>
#include <stdint.h>

#define CAL_PROTO_STR   128  /* a short string field, NUL included */
#define CAL_PROTO_TEXT  512  /* a URL, a command line, a rule sentence */
#define CAL_PROTO_LIST  32   /* a list of cells (CAL_RUN_MAX_LIST) */

/* The target as the run describes it (target_json). */
typedef struct cal_protocol_target {
    char   kind[CAL_PROTO_STR];     /* "builtin", "url", "launch", "inproc" */
    char   name[CAL_PROTO_STR];     /* preset or engine name */
    char   url[CAL_PROTO_TEXT];     /* never with credentials (cal_url_redact) */
    char   command[CAL_PROTO_TEXT]; /* a launched server's command line */
    char   model[CAL_PROTO_STR];    /* the model the server reported or was given */
    char   version[CAL_PROTO_STR];  /* the server's build as it reported it */
    char   api[CAL_PROTO_STR];      /* "completions", "chat", "inproc", "recorder" */
    char   side[CAL_PROTO_STR];     /* an A/B side's name; "" single target */
    char   detail[CAL_PROTO_TEXT];  /* how its timestamps are taken, in words */
    double load_s;                  /* s from launch to ready; NAN unknown */
} cal_protocol_target;

/* The prior the series' earlier runs gave the shot verdict ("noise_prior"). */
typedef struct cal_protocol_noise {
    int    present;                 /* 1: the run stored a prior */
    char   series[CAL_PROTO_TEXT];  /* the series key; "" none */
    int    runs;                    /* earlier runs pooled; -1 unknown */
    double shot_sd, shot_df;        /* warm shots' log-spread; NAN, 0 none */
    double first_sd, first_df;      /* first shots' spread; NAN, 0 none */
    int    first_left_out;          /* runs left out of first_sd (a wall) */
} cal_protocol_noise;

typedef struct cal_protocol_dataset {
    int     present;
    char    name[CAL_PROTO_STR];
    char    format[CAL_PROTO_STR];  /* "text", "jsonl", ... */
    char    sha256[72];             /* hex digest */
    char    id[CAL_PROTO_TEXT];     /* name@sha256 prefix: the content */
    int64_t entries, skipped;       /* -1 unknown */
} cal_protocol_dataset;

typedef struct cal_protocol_sweep {
    int    present;
    char   kind[CAL_PROTO_STR];     /* "saturation" */
    double start_rate, max_rate;    /* req/s */
    int    steps;
    double gain;                    /* relative goodput rise that continues */
    char   rule[CAL_PROTO_TEXT];
} cal_protocol_sweep;

typedef struct cal_protocol {
    cal_protocol_target target;     /* the first (A) target */
    /* ---- shots ---- */
    int    shots;                   /* measured shots; -1 unknown */
    int    warmup;                  /* warm-up shots; -1 unknown */
    double rest_s;                  /* rest before each later shot; NAN unknown */
    int    cold;                    /* a fresh engine per shot: 1/0, -1 unknown */
    double noise_floor;             /* narrowest verdict band; 0 not stored */
    double equivalence;             /* the "no wall" bound; 0 not stored */
    /* ---- load ---- */
    int    concurrency[CAL_PROTO_LIST]; /* [n_conc] closed-loop cells */
    size_t n_conc;
    double rate;                    /* open-loop req/s; 0 closed loop, NAN unknown */
    char   arrivals[CAL_PROTO_STR]; /* arrival pattern (rate > 0); "" */
    cal_protocol_sweep sweep;
    long   requests;                /* per cell; 0 not set, -1 unknown */
    double duration_s;              /* per cell; 0 not set, NAN unknown */
    char   slo[CAL_PROTO_STR];      /* goodput bounds; "" none (stored as
                                       null in a run's record: shots >= 0) */
    /* ---- workload ---- */
    int    prompt_tokens[CAL_PROTO_LIST]; /* [n_prompt] */
    size_t n_prompt;
    char   content[CAL_PROTO_STR];  /* "prose", "code", "random"; "" unknown */
    int    unique_prompts;          /* 1/0; -1 unknown */
    int    max_tokens;              /* -1 unknown */
    char   output_policy[CAL_PROTO_STR]; /* "fixed", "at most"; "" unknown */
    int    streaming;               /* 1/0; -1 unknown */
    int    has_seed;
    uint64_t seed;                  /* prompt nonces and arrivals */
    int    ab;                      /* two targets, interleaved: 1/0, -1 */
    char   keep_chunks[CAL_PROTO_STR];   /* chunk-timestamp budget; "" */
    cal_protocol_dataset dataset;
    char   prompt_len[CAL_PROTO_STR];    /* a length distribution; "" fixed */
    char   output_len[CAL_PROTO_STR];
    char  *scenario_json;           /* the chat or replay scenario object
                                       (owned JSON text), or NULL */
    int    recorder;                /* 1: stored by a recorder */
    char   api[CAL_PROTO_STR];      /* the API the protocol names ("api");
                                       "" where only the target does */
    char  *body_json;               /* --body merged into each request (owned
                                       JSON text, "null" when none given), or
                                       NULL when the run stored no body key */
    cal_protocol_noise noise;
    /* ---- the stored sentences that say how the numbers were made ---- */
    char   order[CAL_PROTO_TEXT];
    char   goodput_rule[CAL_PROTO_TEXT];
    char   percentile_source[CAL_PROTO_TEXT];
    char   duration_rule[CAL_PROTO_TEXT];
    char   sampling[CAL_PROTO_TEXT];
    /* every other key (timeouts, connect_ahead, a merge's fleet, keys a
     * later version adds): one JSON object as text, owned, or NULL. Only the
     * serializer reads it; it is written back unchanged. */
    char  *extra_json;
    char  *target_extra_json;       /* the same for the target object */
    /* ---- what the reader could not read (cal_protocol_from_json) ---- */
    int    n_damaged;               /* stored fields of the wrong type or out of
                                       range, or a text that is not a JSON
                                       object: each left unknown; 0 intact */
    char   damaged_field[64];       /* the first by its stored name:
                                       "protocol.shots", "protocol" (not JSON) */
    char   damaged[CAL_PROTO_TEXT]; /* it with its value and what was expected:
                                       "protocol.shots: \"five\" is not an
                                       integer in [0, 1000000000]" */
} cal_protocol;

/* Every field unknown (see the struct), no blobs. */
void cal_protocol_init(cal_protocol *p);
/* Free the blobs and init again. NULL is a no-op. */
void cal_protocol_clear(cal_protocol *p);
/* A deep copy into *dst (initialised first; its old blobs are not freed).
 * CAL_ENOMEM (dst left cleared). */
int  cal_protocol_copy(cal_protocol *dst, const cal_protocol *src);

/* The record as stored: the protocol object and the target object, each
 * compact JSON text (malloc'd, the caller frees). Either out may be NULL to
 * skip it. Keys are today's names (docs/store.md); unknown fields are left
 * out, extra keys written after the known ones. CAL_ENOMEM. */
int  cal_protocol_to_json(const cal_protocol *p, char **protocol_json, char **target_json);

/* Read a stored protocol and target (either may be NULL: its fields stay
 * unknown) into *p (initialised first). Every earlier stored form reads: a
 * key absent (or null where the writer never wrote null) is unknown. What
 * no writer wrote is damage, never read as a value and never silently
 * dropped: a value of the wrong type or outside its field's range (shots
 * "five", max_tokens -4, concurrency [2147483648]), an integer beyond 64
 * bits or a number beyond a double (the rest of the text still reads), a
 * text that is not a JSON object. Each damaged field stays unknown and is
 * counted in p->n_damaged, the first named in p->damaged. A target holding
 * an A/B array ("ab") reads its first side. CAL_EINVAL when a text is given
 * but is not a JSON object (p then holds what the other text gave, and
 * says the damage); CAL_ENOMEM. */
int  cal_protocol_from_json(const char *protocol_json, const char *target_json, cal_protocol *p);

/* The keys of extra_json (a JSON object: an API, a body, timeouts, a noise
 * prior) over p's protocol, as they would be stored: written, merged, read
 * back into *p (its target kept). NULL: nothing. CAL_EINVAL for a text that
 * is not an object (p unchanged), CAL_ENOMEM. */
int  cal_protocol_merge_json(cal_protocol *p, const char *extra_json);

/* The record a plan (run.h) makes, as cal_run_series stores it: the plan's
 * knobs resolved (defaults filled in), the stored rule sentences, the chat
 * or replay scenario object (JSON text, or NULL), and the plan's
 * protocol_extra_json merged over it (its keys win, as stored). The target
 * is left unknown: the target's own describe() gives it. n_sides 2: A/B.
 * CAL_EINVAL, CAL_ENOMEM (out untouched). */
struct cal_run_plan;
int  cal_protocol_from_plan(const struct cal_run_plan *p, int n_sides, const char *scenario_json,
                            cal_protocol *out);

/* One differing field of two records, by its stored name
 * ("target.url", "protocol.max_tokens") with both values as JSON text. */
typedef struct cal_protocol_diff {
    char field[64];
    char a[CAL_PROTO_STR], b[CAL_PROTO_STR];
} cal_protocol_diff;

/* Skip what each client holds on its own when comparing shards of one run:
 * the seed (derived per shard), the noise prior (the shard's own store),
 * the target's load time. */
#define CAL_PROTOCOL_SAME_RUN 1

/* The first field (target fields first, then the protocol's, then the extra
 * keys) where a and b differ; 1 with *d filled, 0 when they agree. A
 * damaged record agrees with none, itself included: its field is named.
 * flags: CAL_PROTOCOL_SAME_RUN or 0. */
int  cal_protocol_first_diff(const cal_protocol *a, const cal_protocol *b, int flags,
                             cal_protocol_diff *d);

#endif
