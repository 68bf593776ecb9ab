/* caliper — the run analysis's private parts shared by its files:
 * analysis.c (groups, pooling, the shot, A/B, run-wide verdicts),
 * analysis_prompt.c (what each prompt length rests on) and verdict.c (a
 * verdict's names and defaults, the list they are gathered in). */
#ifndef CALIPER_ANALYSIS_INTERNAL_H
#define CALIPER_ANALYSIS_INTERNAL_H
#include <stddef.h>
#include "caliper/analysis.h"

#define MAX_VERDICTS 256   /* the verdicts one analysis gathers */

/* The verdicts being gathered (at most MAX_VERDICTS). */
typedef struct vlist { cal_verdict *v; size_t n; } vlist;
/* A new verdict of kind k at the end of l, initialised; NULL when full. */
cal_verdict *cal_an_vadd(vlist *l, cal_verdict_kind k);
/* v concerns group gi (its name as the cell). */
void cal_an_for_group(cal_verdict *v, const cal_group *g, size_t gi);
/* Every sentence about the run's prompt lengths (analysis_prompt.c). */
void cal_an_prompt_verdicts(const cal_run_data *d, const cal_analysis *a, vlist *l);

#endif
