/* Shared inside lib/workload between the chat scenario and the replay. */
#ifndef CAL_TRAFFIC_INTERNAL_H
#define CAL_TRAFFIC_INTERNAL_H
#include <jansson.h>
#include "caliper/workload_traffic.h"

/* A traffic of sessions × turns, every turn absent; NULL on ENOMEM. */
cal_traffic *cal_traffic_new_(const char *kind, int sessions, int turns);
/* Append text[n] to *p (*len bytes) and count the whole into *total. */
int  cal_traffic_append_text_(cal_textgen *g, char **p, size_t *len, const char *text, size_t n,
                              int *total);
/* tr->protocol_json from o with o's "turn_plan" set to turns (both
 * taken); CAL_ENOMEM. */
int  cal_traffic_set_protocol_(cal_traffic *tr, json_t *o, json_t *turns);
/* Eight letters from seed and a newline: a shared block's first line. */
void cal_traffic_nonce_(uint64_t seed, char out[10]);
/* Chat seams: sep, each piece starts with a newline (and ends on no
 * whitespace); delta, a piece is counted alone and added to the count
 * before it, plus seam tokens. */
void cal_textgen_seams_(cal_textgen *g, int sep, int delta, int seam);
#endif
