/* caliper command line — how a stored run is shown: the terminal tables
 * (`caliper run` at its end and `caliper show`), the verdicts, and the JSON
 * and CSV exports. Everything is rendered from the analysis of a loaded
 * cal_run_data (analysis.h), so a run printed live, `show` later, the
 * exports and the report cannot disagree. (src/cmd_store.c) */
#ifndef CALIPER_RUN_VIEW_H
#define CALIPER_RUN_VIEW_H
#include <stdio.h>
#include "caliper/store.h"

/* The verdicts the run analysis computes (analysis.h: shot series, clock,
 * power, A/B, failures, output length, …) as the JSON array of objects the
 * store keeps (cal_verdicts_json), malloc'd; NULL on ENOMEM. */
char *run_view_verdicts_json(const cal_run_data *d);
/* Terminal tables to out; db_path for the closing "stored:" line (NULL:
 * omitted). */
void  run_view_print(FILE *out, const cal_run_data *d, const char *db_path);
/* What `caliper run` prints at its end and `caliper show` again: the tables
 * and verdicts, then the drawn lengths, the turns and goodput. */
void  run_view_show(FILE *out, const cal_run_data *d, const char *db_path);
/* The whole run as JSON (summary names as vLLM's bench JSON). 0 or -1. */
int   run_view_json(FILE *out, const cal_run_data *d);
/* One CSV row per cell: protocol columns, then every summary field. */
int   run_view_csv(FILE *out, const cal_run_data *d);

#endif
