/* caliper calc — what the calculators share: a calculator is a row of a
 * family's table (calc_*.c: its flags with unit kinds, a compute function
 * that calls lib/analysis, an explain function that writes the formula with
 * the numbers put in and what the result means); cmd_calc.c parses, checks
 * ranges and prints text or JSON for all of them. Part of the caliper
 * program, not of the library. */
#ifndef CALIPER_CALC_H
#define CALIPER_CALC_H
#include <math.h>
#include <stddef.h>
#include <jansson.h>
#include "caliper/units.h"

#define MAX_FLAGS   16
#define MAX_RESULTS 24
#define LIST_CAP    16
#define TEXT_CAP    4096
#define SCORES_CAP  100000   /* values per score file */

typedef enum { F_NUM, F_LIST, F_PATH, F_BOOL } flag_kind;

typedef struct flag_spec {
    const char *name;      /* without the dashes: "ttft" */
    flag_kind   kind;
    cal_unit    unit;      /* F_NUM, F_LIST */
    const char *bare;      /* what a bare number means ("s", "MHz"), or NULL */
    int         required;
    double      def;       /* used when not given; NAN: absent */
    const char *range;     /* what a valid value is, for errors and --help */
    const char *help;
} flag_spec;

typedef struct result {
    const char *key;       /* JSON key */
    cal_unit    unit;
    double      v;
    int         null;      /* no value exists (JSON null) */
} result;

struct calc_def;
typedef struct calc_ctx {
    const struct calc_def *def;
    const char *cmd;                      /* "calc NAME", for messages */
    double      v[MAX_FLAGS];
    int         given[MAX_FLAGS];
    const char *raw[MAX_FLAGS];
    double      list[MAX_FLAGS][LIST_CAP];
    size_t      nlist[MAX_FLAGS];
    result      res[MAX_RESULTS];
    size_t      nres;
    const char *bad;                      /* flag named by a failed compute */
    char        why[512];                 /* a specific reason, or "" */
    char        formula[TEXT_CAP];
    char        meaning[TEXT_CAP];
    json_t     *extra;                    /* calculator-specific JSON, or NULL */
} calc_ctx;

typedef struct calc_def {
    const char *name;
    const char *desc;                     /* one line for --list */
    const char *example;
    flag_spec   flags[MAX_FLAGS];
    int  (*compute)(calc_ctx *c);         /* CAL_OK, or an error with c->bad */
    void (*explain)(calc_ctx *c);         /* fills formula and meaning */
} calc_def;


/* A family of calculators: its rows, in the order --list shows them. */
typedef struct calc_family {
    const calc_def *defs;
    size_t          n;
} calc_family;
extern const calc_family calc_speed;
extern const calc_family calc_gain;
extern const calc_family calc_memory;
extern const calc_family calc_stats;
extern const calc_family calc_ceiling;

/* Writing a table row: a number flag; the end of the flags. */
#define END {0}
#define NUMF(n, u, b, req, d, range, help) {n, F_NUM, u, b, req, d, range, help}
#define POSR "must be > 0"
#define NNEG "must be >= 0"
#define NAN_ NAN

/* ---- the calculators' shorthand (cmd_calc.c) ---- */
/* A flag's value (NAN when absent), whether it was given, a path flag's
 * text; a calculator naming a flag it does not have aborts. */
int idx(const calc_ctx *c, const char *name);
double in(const calc_ctx *c, const char *name);
int given(const calc_ctx *c, const char *name);
const char *path(const calc_ctx *c, const char *name);
/* Results: put one, put a null (no value exists), read one back (NAN). */
void put(calc_ctx *c, const char *key, cal_unit u, double v);
void put_null(calc_ctx *c, const char *key);
double out(const calc_ctx *c, const char *key);
/* Append to the formula, to the meaning; why names the flag at fault and
 * returns CAL_ERANGE. */
void say(calc_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mean_(calc_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int why(calc_ctx *c, const char *flag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Numbers for the text, from rotating buffers: sig significant digits,
 * trailing zeros trimmed when trim; an input (N), a result (R), a number in
 * a sentence (R3), a quantity with its unit (Q, Q3), a share as "38 %". */
const char *num_(double v, int sig, int trim);
const char *N(double v);
const char *R(double v);
const char *R3(double v);
const char *Q(cal_unit u, double v);
const char *Q3(cal_unit u, double v);
const char *PCT(double frac);

#endif
