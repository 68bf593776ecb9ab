/* caliper — the run's context helpers, below its series, cells and turns
 * (run_ctx.h): events and notes to the observer, the failure message,
 * the stop flag, the telemetry drained and windowed, the workload modes and
 * counting tokens through a target. */
#include "run_ctx.h"

/* The plan's keep_chunks as a cal_keep limit. */
long long run_keep_limit(const cal_run_plan *p)
{
    if (p->keep_chunks == 0) return CAL_KEEP_DEFAULT;
    if (p->keep_chunks == CAL_RUN_KEEP_NONE) return 0;
    return p->keep_chunks < 0 ? CAL_KEEP_ALL : p->keep_chunks;
}

void run_emit(ctx *c, cal_run_event *ev)
{
    if (c->a->observer.fn) c->a->observer.fn(c->a->observer.ud, ev);
}

/* A note; field: the plan field it is about (NULL: none). */
void run_note_on(ctx *c, const char *sidename, const char *field, const char *fmt, ...)
{
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cal_run_event ev = {.kind = CAL_RUN_EV_NOTE, .side = sidename, .text = buf, .field = field,
                        .run_id = c->run.id};
    run_emit(c, &ev);
}

void run_fail(ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(c->out->message, sizeof c->out->message, fmt, ap);
    va_end(ap);
}

const char *run_what(const side *s)
{
    return s->t->ops->what ? s->t->ops->what(s->t->self) : s->t->ops->kind;
}

int run_stopped(const ctx *c) { return c->stop && *c->stop; }

/* ---- telemetry ---------------------------------------------------------- */
void run_drain_telemetry(ctx *c)
{
    if (!c->tel || !c->run.id) return;
    cal_tel_sample buf[512];
    size_t n;
    while ((n = cal_tel_read(c->tel, &c->tel_cursor, buf, 512, NULL)) > 0)
        for (size_t i = 0; i < n; i++)
            cal_store_add_telemetry(c->st, c->run.id, buf[i].t_ns, buf[i].backend,
                                    buf[i].metric, buf[i].unit, buf[i].value);
}

/* Mean and minimum of a telemetry metric over [t0, t1]; NAN when absent. */
void run_tel_window(ctx *c, const char *metric, int64_t t0, int64_t t1, double *mean,
                       double *min)
{
    *mean = *min = NAN;
    if (!c->tel || !metric[0]) return;
    cal_tel_stat s;
    if (cal_tel_window(c->tel, metric, t0, t1, &s) != CAL_OK || s.n == 0) return;
    *mean = s.mean;
    *min = s.min;
}

/* ---- workload modes (workload_traffic.h) --------------------------------- */
/* Each request draws its prompt or output (a dataset or a distribution). */
int run_per_request(const cal_run_plan *p)
{
    return p->dataset || p->prompt_len.kind != CAL_LEN_FIXED || p->output_len.kind != CAL_LEN_FIXED;
}

/* A shot is a session's turns (chat scenario, replay). */
int run_turns_mode(const cal_run_plan *p) { return p->chat || p->replay_log; }

/* ---- targets ------------------------------------------------------------ */
int run_count_with_target(void *ud, const char *text, int *n)
{
    cal_run_target *t = ud;
    return t->ops->count_tokens(t->self, text, n);
}
