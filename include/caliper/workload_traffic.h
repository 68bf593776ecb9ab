/* caliper workload — traffic that looks like real use: datasets of prompts
 * the user has (cal_dataset_*), length distributions (cal_lendist_*), and
 * sessions of turns with shared prefixes: the simulated chat scenario and
 * the replay of a captured proxy log (cal_traffic_*).
 *
 * Ownership: a cal_dataset and a cal_traffic own every string in them and
 * are freed with their _free call, which NULLs the caller's pointer. The
 * token counter (workload.h) is the caller's. Library code: nothing prints. */
#ifndef CALIPER_WORKLOAD_TRAFFIC_H
#define CALIPER_WORKLOAD_TRAFFIC_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/workload.h"

/* ---- length distributions ------------------------------------------------ */
typedef enum cal_lendist_kind {
    CAL_LEN_FIXED = 0,   /* "N" */
    CAL_LEN_UNIFORM,     /* "uniform:A-B", A <= B, both ends included */
    CAL_LEN_NORMAL,      /* "normal:MEAN,SD", rounded, clipped to [1, MEAN + 4 SD] */
    CAL_LEN_DATASET      /* "dataset": each entry's own length */
} cal_lendist_kind;

typedef struct cal_lendist {
    cal_lendist_kind kind;
    int    n;            /* FIXED */
    int    lo, hi;       /* UNIFORM; NORMAL: the clip */
    double mean, sd;     /* NORMAL */
} cal_lendist;

/* Parse one spec. Lengths must lie in [1, max]. CAL_EINVAL with why naming
 * the value: "uniform:9-3": the low end is above the high end. */
int  cal_lendist_parse(const char *s, int max, cal_lendist *out, char *why, size_t why_len);
/* The spec as text ("256", "uniform:100-200", "normal:300,50", "dataset"). */
char *cal_lendist_text(const cal_lendist *d, char *buf, size_t n);
/* One draw from the seeded stream *state (splitmix64); DATASET and FIXED
 * give n (the caller substitutes the entry's length for DATASET). */
int  cal_lendist_draw(const cal_lendist *d, uint64_t *state);
/* Expected value (the mean before clipping for NORMAL); NAN for DATASET. */
double cal_lendist_mean(const cal_lendist *d);

/* ---- datasets ------------------------------------------------------------ */
typedef enum cal_ds_format {
    CAL_DS_TEXT = 0,     /* one prompt per non-empty line */
    CAL_DS_JSONL,        /* a JSON string, or an object with "prompt" or "text",
                            optional "output_tokens" / "max_tokens", per line */
    CAL_DS_SHAREGPT,     /* a JSON array of {"conversations": [{"from","value"}]}:
                            the first human message, the reply's length */
    CAL_DS_OPENAI_CHAT,  /* JSONL of chat request bodies: the messages' contents
                            joined, "max_tokens" / "max_completion_tokens" */
    CAL_DS_PROXY_LOG,    /* caliper proxy --log lines: sizes only (no texts) */
    CAL_DS_N
} cal_ds_format;
const char *cal_ds_format_name(cal_ds_format f);   /* "text", "jsonl", ... */
int  cal_ds_format_parse(const char *s, cal_ds_format *out);   /* CAL_EINVAL */

typedef struct cal_ds_entry {
    char *text;            /* the prompt (UTF-8); NULL for a size-only entry */
    int   prompt_tokens;   /* a size-only entry's recorded prompt tokens; -1 */
    int   output_tokens;   /* the recorded or asked output length; -1 unknown */
    int   output_chars;    /* ShareGPT: the reply's code points (its length
                              is counted by the tokenizer later); -1 */
} cal_ds_entry;

#define CAL_DS_MAX_BYTES   (256u << 20)   /* a dataset file's cap */
#define CAL_DS_MAX_ENTRIES (1u << 20)

typedef struct cal_dataset {
    char   name[128];       /* the file's base name */
    cal_ds_format format;
    char   sha256[65];      /* of the file's bytes, hex */
    size_t n;
    cal_ds_entry *e;        /* [n] */
    size_t skipped;         /* lines or items without a usable prompt */
} cal_dataset;

/* Parse buf[len] as format. CAL_EPROTO with why naming the line or item
 * and what is wrong (malformed JSON, a prompt that is not a string, not
 * valid UTF-8), or when no entry is usable; CAL_ETOOBIG over the caps;
 * CAL_ENOMEM. name: stored as is (truncated). */
int  cal_dataset_parse(const char *buf, size_t len, cal_ds_format f, const char *name,
                       cal_dataset **out, char *why, size_t why_len);
/* Read path (at most CAL_DS_MAX_BYTES) and parse it. CAL_EIO when it cannot
 * be read (why says so). */
int  cal_dataset_load(const char *path, cal_ds_format f, cal_dataset **out, char *why,
                      size_t why_len);
void cal_dataset_free(cal_dataset **d);
/* The entry of request number index: a seeded draw with replacement (the
 * same seed and index give the same entry on every run). */
size_t cal_dataset_pick(const cal_dataset *d, uint64_t seed, uint64_t index);
/* A short id for protocols and fingerprints: "NAME@first 12 hex of sha256". */
char *cal_dataset_id(const cal_dataset *d, char *buf, size_t n);

/* ---- text of a token length ------------------------------------------------ */
/* Grows a prompt piece by piece from a content class at a length in tokens:
 * the characters per token are learnt from the counter once (4 without
 * one), then each piece is cut at that ratio and corrected once against
 * the counter over the whole prompt so far. */
typedef struct cal_textgen cal_textgen;
int  cal_textgen_open(cal_content content, cal_count_tokens_fn count, void *ud,
                      cal_textgen **out);
void cal_textgen_close(cal_textgen **g);
/* Append about `tokens` tokens of text taken at `offset` (bytes into the
 * content class, wrapping; cut on UTF-8 boundaries) to *prompt (malloc'd,
 * realloc'd; NULL to start one; *len its length). base_total: the counted
 * tokens of *prompt before (0 for an empty one, -1 unknown): with it and a
 * counter the piece is corrected once so the whole has base_total + tokens
 * tokens where the ratio missed. *total gets the counted tokens of the
 * whole (-1 without a counter). Errors: CAL_ENOMEM, the counter's. */
int  cal_textgen_append(cal_textgen *g, char **prompt, size_t *len, int base_total, int tokens,
                        uint64_t offset, int *total);
/* Count a whole text (-1 in *n without a counter). */
int  cal_textgen_count(cal_textgen *g, const char *text, int *n);
/* Characters per token learnt (4 without a counter), and counter calls. */
double cal_textgen_chars_per_token(const cal_textgen *g);
int  cal_textgen_calls(const cal_textgen *g);
/* 1 while it counts with the server's tokenizer; 0 when it estimates at
 * its characters per token (no tokenizer, or one that answered 404). */
int  cal_textgen_counting(const cal_textgen *g);

/* ---- sessions of turns: chat scenario and replay ---------------------------- */
typedef struct cal_turn {
    char  *prompt;          /* the whole prompt of the turn (owned) */
    int    prompt_tokens;   /* counted (-1 without a tokenizer: estimated
                               at chars ÷ 4 and est = 1) */
    int    shared_tokens;   /* the prompt's first tokens that an earlier turn
                               already sent (the previous turn of the session;
                               for a first turn, the system block another
                               session sent first); 0 none */
    int    est;             /* 1: the counts are estimates */
    int    max_tokens;      /* the answer's length */
    double think_s;         /* wait after the session's previous turn ended;
                               a first turn: its start offset */
    int    present;         /* 0: this session has no such turn (replay) */
} cal_turn;

typedef struct cal_traffic {
    char   kind[16];        /* "chat" or "replay" */
    int    n_sessions;      /* users */
    int    n_turns;         /* the longest session */
    cal_turn *t;            /* [n_turns][n_sessions]: t[turn * n_sessions + s] */
    int    system_tokens;   /* chat: the counted system + tools block */
    char   source[160];     /* replay: the log's id; chat: "" */
    char  *protocol_json;   /* the scenario as a JSON object (owned) */
} cal_traffic;

static inline cal_turn *cal_traffic_turn(const cal_traffic *tr, int turn, int session)
{
    return &tr->t[(size_t)turn * (size_t)tr->n_sessions + (size_t)session];
}

/* The chat scenario: users × turns; every user shares one system + tools
 * block (its first line a nonce of seed, so another run cannot reuse it),
 * then per turn a user message and, from turn 2 on, the previous answer
 * (text of answer_tokens, synthetic: caliper does not keep the engine's
 * text, so the history is a stand-in of the same size). */
typedef struct cal_chat_config {
    int  users, turns;          /* >= 1 each */
    int  system_tokens;         /* default CAL_CHAT_SYSTEM_TOKENS */
    cal_lendist user_tokens;    /* each user message (DATASET: from the dataset) */
    cal_lendist answer_tokens;  /* each answer (max_tokens of the turn) */
    cal_lendist think_ms;       /* think time between a user's turns */
    double stagger_s;           /* user u starts u × stagger_s in */
    cal_content content;
    uint64_t seed;
    const cal_dataset *dataset; /* NULL, or the user messages' source */
    cal_count_tokens_fn count;  /* NULL: estimated counts */
    void *count_ud;
    volatile int *stop;         /* NULL, or set non-zero to stop building
                                 * (CAL_ECANCEL) between two turns */
} cal_chat_config;
#define CAL_CHAT_SYSTEM_TOKENS 6765   /* the notes' system + tools block */

int  cal_chat_build(const cal_chat_config *cfg, cal_traffic **out, char *why, size_t why_len);

/* A captured proxy log (caliper proxy --log) as sessions: a turn starts a
 * new session when its system/tools sizes differ from the previous turn's
 * or its history is shorter than the previous prompt (the conversation
 * restarted). Each turn's prompt has the recorded system + tools block and
 * history + new message sizes, the history growing out of the previous
 * turn's prompt (so the recorded prefix sharing is kept); max_tokens is the
 * recorded output length (64 where none); think time is the recorded gap
 * from the previous turn's end to this one's request, ÷ speed. A failed
 * turn (status not 2xx) is skipped. CAL_EPROTO (why names the line),
 * CAL_EINVAL (speed <= 0), CAL_ENOMEM. */
int  cal_replay_build(const char *log, size_t len, const char *name, double speed,
                      cal_content content, cal_count_tokens_fn count, void *count_ud,
                      cal_traffic **out, char *why, size_t why_len);
void cal_traffic_free(cal_traffic **tr);

#endif
