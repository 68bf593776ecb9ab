/* Fuzz target: every dataset parser (text, JSONL, ShareGPT, OpenAI chat
 * logs, proxy logs), the proxy-log replay and the length specs on any
 * bytes. A parse either fails with a reason or gives entries whose
 * prompts are valid NUL-terminated UTF-8 of a non-zero length; a replay
 * gives turns whose shared prefix never exceeds the prompt. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/utf8.h"
#include "caliper/workload_traffic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    const char *buf = (const char *)data;
    for (int f = 0; f < CAL_DS_N; f++) {
        cal_dataset *d = NULL;
        char why[256];
        int rc = cal_dataset_parse(buf, size, (cal_ds_format)f, "fuzz", &d, why, sizeof why);
        if (rc == CAL_OK) {
            if (!d || d->n == 0) abort();
            for (size_t i = 0; i < d->n; i++) {
                const char *t = d->e[i].text;
                if (t && cal_utf8_check(t, strlen(t)) != strlen(t)) abort();
                if (!t && d->e[i].prompt_tokens < 1) abort();
                if (cal_dataset_pick(d, i, i) >= d->n) abort();
            }
        } else if (d || !why[0]) {
            abort();
        }
        cal_dataset_free(&d);
    }
    cal_traffic *tr = NULL;
    char why[256];
    if (cal_replay_build(buf, size, "fuzz", 2.0, CAL_CONTENT_PROSE, NULL, NULL, &tr, why,
                         sizeof why) == CAL_OK) {
        for (int k = 0; k < tr->n_turns; k++)
            for (int s = 0; s < tr->n_sessions; s++) {
                const cal_turn *t = cal_traffic_turn(tr, k, s);
                if (t->present && (!t->prompt || t->shared_tokens > t->prompt_tokens || t->think_s < 0))
                    abort();
            }
    }
    cal_traffic_free(&tr);
    if (size < 64) {
        char s[64];
        memcpy(s, buf, size);
        s[size] = '\0';
        cal_lendist d;
        uint64_t st = 1;
        if (cal_lendist_parse(s, 1 << 20, &d, why, sizeof why) == CAL_OK && d.kind != CAL_LEN_DATASET)
            for (int i = 0; i < 8; i++) {
                int v = cal_lendist_draw(&d, &st);
                if (v < 1 || v > (1 << 20)) abort();
            }
    }
    return 0;
}
