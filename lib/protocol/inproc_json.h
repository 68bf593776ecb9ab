/* The target record of an engine measured inside its own process, shared by
 * the in-process target (run_inproc.c) and the recorder (recorder.c), so the
 * two describe such a target with the same fields. Internal: not installed. */
#ifndef CALIPER_INPROC_JSON_H
#define CALIPER_INPROC_JSON_H

/* {"kind":"inproc","name":…,"model":…,"version":…,"url":null,
 *  "command":null,"load_s":null,"api":…,"detail":…} as compact JSON,
 * malloc'd; model may be NULL (null). NULL on ENOMEM. */
char *cal_inproc_target_json(const char *name, const char *model, const char *api,
                             const char *detail);

#endif
