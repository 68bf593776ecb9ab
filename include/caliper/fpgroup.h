/* caliper fpgroup — many results on one page (the notes' table of 13
 * engines): every quoted cell of every result (the warm shots pooled, per
 * configuration) in the group of its protocol fingerprint (fingerprint.h,
 * the column aside), groups largest first, each group's fields that differ
 * from the first group named, and a rank that holds within a group only:
 * an engine measured under another protocol is in another group, never on
 * its axis. An arm of a run --ab run is an engine of its own ("label · B").
 * Results compare's --stale or --now would flag are marked the same way.
 *
 * Ownership: cal_fpgroups owns its arrays (cal_fpgroups_free). */
#ifndef CALIPER_FPGROUP_H
#define CALIPER_FPGROUP_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/report.h"

typedef struct cal_fpmember {
    size_t result;           /* index into the results */
    size_t cell;             /* index into that result's cells */
    char   name[CAL_RES_STR + 24]; /* the result's label, " · B" for an --ab arm */
} cal_fpmember;

typedef struct cal_fpgroup {
    cal_fingerprint fp;      /* the group's protocol (column aggregate) */
    char   name[128];        /* "c1 · 256 tok · warm 2–6" */
    char   differs[600];     /* the fields that differ from group 1 ("" for it):
                                "concurrency 1 vs 4; probe caliper 0.1.0 vs vllm bench serve" */
    cal_fpmember *m;         /* [n], in result order */
    size_t n;
} cal_fpgroup;

/* The marks compare puts on results: --stale AGE (older is stale) and the
 * engine version beside a same-named engine; --now's marks added by the
 * caller (extra). */
typedef struct cal_fpmarks {
    double  stale_s;         /* 0: never stale */
    int64_t now_unix;        /* 0: time(NULL) */
    char    extra[CAL_CMP_MAX][256];   /* per result, more marks ("" none) */
} cal_fpmarks;
/* The defaults compare uses: stale after 30 days, no extra marks. */
void cal_fpmarks_default(cal_fpmarks *m);
/* --now URL: ask the engine answering at url which model it serves
 * (GET /v1/models) and mark in extra[j] every result res[j] recorded under
 * another engine version ("re-measure this baseline"; a version that is
 * only the run's label is not judged). CAL_ECONNECT / CAL_EHTTP /
 * CAL_EPROTO with a message when the engine does not say. */
int  cal_fpmarks_now(cal_fpmarks *m, const cal_result *const *res, size_t n, const char *url,
                     char *err, size_t errn);

typedef struct cal_fpgroups {
    cal_fpgroup *g;          /* [n_groups], the group with most engines first */
    size_t n_groups;
    size_t n_results;
    int    stale[CAL_CMP_MAX];           /* older than the marks' stale_s */
    char   flags[CAL_CMP_MAX][512];      /* per result: every mark in words ("" none) */
} cal_fpgroups;

/* Group res[0..n) (n in 1..CAL_CMP_MAX). marks NULL: the defaults.
 * CAL_EINVAL, CAL_ENOMEM. */
int  cal_fpgroups_make(const cal_result *const *res, size_t n, const cal_fpmarks *marks,
                       cal_fpgroups *out);
void cal_fpgroups_free(cal_fpgroups *g);

/* The members of group g ranked by metric m, best first by the schema's
 * better direction (members without a value last, in result order) into
 * order[g->n] (indices into g->m). Returns how many have a value. A metric
 * with no better direction keeps result order. */
size_t cal_fpgroup_rank(const cal_result *const *res, const cal_fpgroup *g, cal_metric m,
                        size_t *order);

/* The section "Engines side by side" of the HTML page: the groups and, per
 * metric, one figure with every engine (throughput: the aggregate and the
 * per-request column together), each group on its own axis, ranked within
 * it, stale and other-version results marked. Nothing for one result. */
int  cal_fpgroups_html(const cal_result *const *res, size_t n, const cal_fpgroups *g, cal_buf *out);
/* The same ranking as Markdown (tables per group and metric). */
int  cal_fpgroups_md(const cal_result *const *res, size_t n, const cal_fpgroups *g, cal_buf *out);

/* cal_report_write (report.h) with the marks the side-by-side views put
 * on results (HTML and Markdown; CSV and JSON carry none); extra_html as
 * cal_report_write_html_ex's extra (HTML only, may be NULL); marks NULL:
 * compare's defaults. The same errors. */
int  cal_report_write_marked(const cal_result *const *res, size_t n, cal_report_format fmt,
                             const char *extra_html, const cal_fpmarks *marks, cal_buf *out);

#endif
