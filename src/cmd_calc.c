/* caliper calc — the field notes' formulas (SPEC 1.4) from flags.
 * The calculators live in families (calc_*.c), each a table: a calculator
 * names its flags (with unit kinds), a compute function that calls
 * lib/analysis, and an explain function that writes the formula with the
 * numbers put in and one sentence on what the result means. Here: the
 * shorthand they write with, and the one path of parsing, range errors,
 * text and JSON they share. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "caliper/error.h"
#include "cli.h"
#include "calc.h"

/* ---- helpers ------------------------------------------------------------ */

int idx(const calc_ctx *c, const char *name)
{
    for (int i = 0; i < MAX_FLAGS && c->def->flags[i].name; i++)
        if (!strcmp(c->def->flags[i].name, name)) return i;
    fprintf(stderr, "caliper: internal: calculator %s has no flag %s\n", c->def->name, name);
    abort();
}
double in(const calc_ctx *c, const char *name) { return c->v[idx(c, name)]; }
int given(const calc_ctx *c, const char *name) { return c->given[idx(c, name)]; }
const char *path(const calc_ctx *c, const char *name) { return c->raw[idx(c, name)]; }

void put(calc_ctx *c, const char *key, cal_unit u, double v)
{
    if (c->nres < MAX_RESULTS) c->res[c->nres++] = (result){key, u, v, 0};
}
void put_null(calc_ctx *c, const char *key)
{
    if (c->nres < MAX_RESULTS) c->res[c->nres++] = (result){key, CAL_U_RATIO, 0, 1};
}
double out(const calc_ctx *c, const char *key)
{
    for (size_t i = 0; i < c->nres; i++)
        if (!strcmp(c->res[i].key, key)) return c->res[i].null ? NAN : c->res[i].v;
    return NAN;
}

static void appendf(char *dst, const char *fmt, va_list ap)
{
    size_t n = strlen(dst);
    if (n + 1 < TEXT_CAP) vsnprintf(dst + n, TEXT_CAP - n, fmt, ap);
}
void say(calc_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    appendf(c->formula, fmt, ap);
    va_end(ap);
}
void mean_(calc_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    appendf(c->meaning, fmt, ap);
    va_end(ap);
}
int why(calc_ctx *c, const char *flag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->bad = flag;
    return CAL_ERANGE;
}

/* Numbers for the text: `sig` significant digits, fixed point (scientific
 * only far out), trailing zeros trimmed when trim. Rotating buffers. */
const char *num_(double v, int sig, int trim)
{
    static char pool[48][64];
    static unsigned k;
    char *b = pool[k++ % 48];
    if (!isfinite(v)) return "—";
    double a = fabs(v);
    if (a != 0 && (a >= 1e12 || a < 1e-6)) {
        snprintf(b, 64, "%.*e", sig - 1, v);
        return b;
    }
    int dec = a == 0 ? 0 : sig - ((int)floor(log10(a)) + 1);
    if (dec < 0) dec = 0;
    if (dec > 12) dec = 12;
    snprintf(b, 64, "%.*f", dec, v);
    if (trim && strchr(b, '.')) {
        char *e = b + strlen(b) - 1;
        while (*e == '0') *e-- = '\0';
        if (*e == '.') *e = '\0';
    }
    return b;
}
const char *N(double v) { return num_(v, 6, 1); }    /* an input */
const char *R(double v) { return num_(v, 4, 0); }    /* a result */
const char *R3(double v) { return num_(v, 3, 1); }   /* in a sentence */
const char *Q(cal_unit u, double v)                  /* a quantity */
{
    static char pool[48][64];
    static unsigned k;
    return cal_unit_format(u, v, 4, pool[k++ % 48], 64);
}
const char *Q3(cal_unit u, double v)
{
    static char pool[48][64];
    static unsigned k;
    return cal_unit_format(u, v, 3, pool[k++ % 48], 64);
}
const char *PCT(double frac)                         /* "38 %", "5.5 %" */
{
    static char pool[16][32];
    static unsigned k;
    char *b = pool[k++ % 16];
    double p = frac * 100;
    snprintf(b, 32, fabs(p) >= 10 || p == 0 ? "%.0f %%" : fabs(p) >= 1 ? "%.1f %%" : "%.2f %%", p);
    return b;
}


/* The families, in the order --list shows them. */
static const calc_family *const FAMILIES[] = {
    &calc_speed, &calc_gain, &calc_memory, &calc_stats, &calc_ceiling,
};
#define N_FAMILIES (sizeof FAMILIES / sizeof FAMILIES[0])

/* ---- the shared path: parse, compute, print ------------------------------ */

static int n_flags(const calc_def *d)
{
    int n = 0;
    while (n < MAX_FLAGS && d->flags[n].name) n++;
    return n;
}

static void list_calcs(FILE *f)
{
    fprintf(f, "calculators (caliper calc NAME --help for each):\n");
    for (size_t k = 0; k < N_FAMILIES; k++)
        for (size_t i = 0; i < FAMILIES[k]->n; i++)
            fprintf(f, "  %-22s %s\n", FAMILIES[k]->defs[i].name, FAMILIES[k]->defs[i].desc);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: caliper calc NAME [FLAGS] [--json]\n"
               "       caliper calc --list\n\n"
               "The field notes' formulas: each prints its inputs, the formula with the numbers\n"
               "put in, the result and what it means. Quantities take units (6.084s, 2.7GB,\n"
               "1133GB/s, 60W, 1296MHz, 5.5%%, 1M); --json prints the same for machines.\n"
               "Exit: 0 ok, 2 a missing or nonsensical input (the flag is named).\n\n");
    list_calcs(f);
}

static void calc_help(const calc_def *d, FILE *f)
{
    fprintf(f, "usage: caliper calc %s [FLAGS] [--json]\n\n%s\n\nflags:\n", d->name, d->desc);
    for (int i = 0; i < n_flags(d); i++) {
        const flag_spec *s = &d->flags[i];
        char kind[64], dflt[64] = "";
        if (s->kind == F_PATH) snprintf(kind, sizeof kind, "FILE");
        else if (s->kind == F_BOOL) kind[0] = '\0';
        else snprintf(kind, sizeof kind, "%s%s%s%s", s->kind == F_LIST ? "LIST of " : "",
                      cal_unit_name(s->unit), s->bare ? ", bare = " : "", s->bare ? s->bare : "");
        if (s->kind == F_NUM && !isnan(s->def)) snprintf(dflt, sizeof dflt, "; default %s", N(s->def));
        fprintf(f, "  --%-16s %s%s%s%s%s\n", s->name, s->help, kind[0] ? " [" : "", kind,
                kind[0] ? "]" : "", s->required ? " (required)" : dflt);
    }
    fprintf(f, "  --json             print inputs, results, formula and meaning as JSON\n"
               "\nexample:\n  %s\n", d->example);
}

static int parse_list(calc_ctx *c, int i, const char *arg)
{
    const flag_spec *s = &c->def->flags[i];
    char tmp[1024], flag[64];
    snprintf(flag, sizeof flag, "--%s", s->name);
    if (strlen(arg) >= sizeof tmp)
        return cli_usage_error(c->cmd, "%s: \"%.40s...\" is too long", flag, arg);
    strcpy(tmp, arg);
    c->nlist[i] = 0;
    char *save = NULL;
    for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (c->nlist[i] == LIST_CAP)
            return cli_usage_error(c->cmd, "%s: more than %d values", flag, LIST_CAP);
        int rc = cli_parse_unit(c->cmd, flag, t, s->unit, s->bare, &c->list[i][c->nlist[i]]);
        if (rc) return rc;
        c->nlist[i]++;
    }
    if (c->nlist[i] == 0) return cli_usage_error(c->cmd, "%s: \"%s\" has no values", flag, arg);
    return 0;
}

static void print_text(const calc_ctx *c)
{
    printf("%s · ", c->def->name);
    int first = 1;
    for (int i = 0; i < n_flags(c->def); i++) {
        const flag_spec *s = &c->def->flags[i];
        if (c->given[i]) {
            printf("%s--%s%s%s", first ? "" : " ", s->name, s->kind == F_BOOL ? "" : " ",
                   s->kind == F_BOOL ? "" : c->raw[i]);
            first = 0;
        }
    }
    for (int i = 0; i < n_flags(c->def); i++) {
        const flag_spec *s = &c->def->flags[i];
        if (!c->given[i] && s->kind == F_NUM && !isnan(s->def)) {
            printf("%s--%s %s (default)", first ? "" : " ", s->name, N(s->def));
            first = 0;
        }
    }
    printf("\n%s%s\n", c->formula, c->meaning);
}

static int print_json(const calc_ctx *c)
{
    json_t *root = json_object(), *ins = json_object(), *res = json_object();
    json_object_set_new(root, "calculator", json_string(c->def->name));
    for (int i = 0; i < n_flags(c->def); i++) {
        const flag_spec *s = &c->def->flags[i];
        if (s->kind == F_PATH) {
            if (c->given[i]) json_object_set_new(ins, s->name, json_string(c->raw[i]));
        } else if (s->kind == F_BOOL) {
            if (c->given[i]) json_object_set_new(ins, s->name, json_true());
        } else if (s->kind == F_LIST) {
            if (!c->given[i]) continue;
            json_t *a = json_array();
            for (size_t k = 0; k < c->nlist[i]; k++) json_array_append_new(a, json_real(c->list[i][k]));
            json_object_set_new(ins, s->name, a);
        } else if (c->given[i] || !isnan(s->def)) {
            json_object_set_new(ins, s->name, json_real(c->v[i]));
        }
    }
    for (size_t i = 0; i < c->nres; i++)
        json_object_set_new(res, c->res[i].key, c->res[i].null ? json_null()
                                                               : json_real(c->res[i].v));
    json_object_set_new(root, "inputs", ins);
    json_object_set_new(root, "results", res);
    if (c->extra) json_object_set(root, "model", c->extra);
    json_object_set_new(root, "formula", json_string(c->formula));
    json_object_set_new(root, "meaning", json_string(c->meaning));
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!s) return cli_fail("calc", "cannot format JSON");
    puts(s);
    free(s);
    return CLI_OK;
}

static int run_calc(const calc_def *d, int argc, char **argv)
{
    static calc_ctx ctx;
    calc_ctx *c = &ctx;
    memset(c, 0, sizeof *c);
    c->def = d;
    char cmd[64];
    snprintf(cmd, sizeof cmd, "calc %s", d->name);
    c->cmd = cmd;
    int nf = n_flags(d), json = 0;
    struct option opts[MAX_FLAGS + 3];
    for (int i = 0; i < nf; i++) {
        opts[i] = (struct option){d->flags[i].name,
                                  d->flags[i].kind == F_BOOL ? no_argument : required_argument,
                                  NULL, 1000 + i};
        c->v[i] = d->flags[i].kind == F_NUM ? d->flags[i].def : NAN;
    }
    opts[nf] = (struct option){"json", no_argument, NULL, 'j'};
    opts[nf + 1] = (struct option){"help", no_argument, NULL, 'h'};
    opts[nf + 2] = (struct option){0, 0, 0, 0};
    optind = 0;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        if (o == 'h') { calc_help(d, stdout); return CLI_OK; }
        if (o == 'j') { json = 1; continue; }
        if (o == '?' || o == ':') {
            const char *bad = argv[optind - 1];
            if (optopt >= 1000)
                return cli_usage_error(cmd, "%s needs a value", bad);
            return cli_usage_error(cmd, "unknown flag %s", bad);
        }
        int i = o - 1000;
        const flag_spec *s = &d->flags[i];
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", s->name);
        c->given[i] = 1;
        c->raw[i] = s->kind == F_BOOL ? "" : optarg;
        int rc = 0;
        if (s->kind == F_NUM) rc = cli_parse_unit(cmd, flag, optarg, s->unit, s->bare, &c->v[i]);
        else if (s->kind == F_LIST) rc = parse_list(c, i, optarg);
        else if (s->kind == F_PATH && !*optarg)
            rc = cli_usage_error(cmd, "%s: an empty file name", flag);
        if (rc) return rc;
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    for (int i = 0; i < nf; i++)
        if (d->flags[i].required && !c->given[i]) {
            const flag_spec *s = &d->flags[i];
            return cli_usage_error(cmd, "--%s is required: %s%s%s%s", s->name, s->help,
                                   s->kind == F_PATH ? "" : " (",
                                   s->kind == F_PATH ? "" : cal_unit_name(s->unit),
                                   s->kind == F_PATH ? "" : ")");
        }
    int rc = d->compute(c);
    if (rc) {
        json_decref(c->extra);
        c->extra = NULL;
    }
    if (rc == CAL_ENOMEM) return cli_fail(cmd, "out of memory");
    if (rc) {
        int i = -1;
        for (int k = 0; k < nf && c->bad; k++) if (!strcmp(d->flags[k].name, c->bad)) i = k;
        if (i < 0) return cli_usage_error(cmd, "%s", c->why[0] ? c->why : cal_strerror(rc));
        const flag_spec *s = &d->flags[i];
        char val[96];
        if (!c->given[i]) snprintf(val, sizeof val, "(not given)");
        else snprintf(val, sizeof val, "\"%s\"", c->raw[i]);
        if (c->why[0] && c->given[i] && s->kind != F_BOOL)
            return cli_usage_error(cmd, "--%s %s %s", s->name, val, c->why);
        if (c->why[0]) return cli_usage_error(cmd, "--%s %s", s->name, c->why);
        return cli_usage_error(cmd, "--%s: %s is out of range: %s", s->name, val,
                               s->range ? s->range : "not a meaningful value here");
    }
    /* The net under every calculator: no verdict is written around a
     * result that is not a number. */
    for (size_t k = 0; k < c->nres; k++)
        if (!c->res[k].null && !isfinite(c->res[k].v)) {
            json_decref(c->extra);
            c->extra = NULL;
            return cli_usage_error(cmd, "the inputs give %s = %g, not a finite number: an input "
                                   "is too large or too small for this formula", c->res[k].key,
                                   c->res[k].v);
        }
    d->explain(c);
    rc = json ? print_json(c) : (print_text(c), CLI_OK);
    json_decref(c->extra);
    c->extra = NULL;
    return rc;
}

int cmd_calc(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return CLI_USAGE; }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) { usage(stdout); return CLI_OK; }
    if (!strcmp(name, "--list")) { list_calcs(stdout); return CLI_OK; }
    for (size_t k = 0; k < N_FAMILIES; k++)
        for (size_t i = 0; i < FAMILIES[k]->n; i++)
            if (!strcmp(name, FAMILIES[k]->defs[i].name))
                return run_calc(&FAMILIES[k]->defs[i], argc - 1, argv + 1);
    return cli_usage_error("calc", "\"%s\" is not a calculator (caliper calc --list)", name);
}
