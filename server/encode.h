/* caliper serve — the request work kept off the HTTP event loop: parsing a
 * /tokenize, completion or chat body (up to --max-body bytes) and encoding
 * its text. The HTTP thread parks the connection and hands the task to this
 * pool; a worker does the work and resumes the connection, whose handler
 * answers from the result. Meanwhile the event loop answers /health and
 * every other request: with the encode on the loop, one 4 MB /tokenize held
 * them all for as long as it ran. Internal to server/.
 *
 * Ownership: the caller allocates a task, fills its inputs and keeps it
 * until the connection ends (cal_enc_task_free frees what the worker made);
 * the pool never frees a task and touches it no more once it has woken it. */
#ifndef CALIPER_SERVER_ENCODE_H
#define CALIPER_SERVER_ENCODE_H
#include <stddef.h>
#include <stdint.h>
#include "engine/engine.h"
#include "server/metrics.h"
#include "server/request.h"

typedef enum cal_enc_kind {
    CAL_ENC_TOKENIZE = 0,   /* POST /tokenize: the whole JSON answer */
    CAL_ENC_COMPLETIONS,    /* POST /v1/completions: the request and its ids */
    CAL_ENC_CHAT            /* POST /v1/chat/completions: the same, rendered */
} cal_enc_kind;

typedef struct cal_enc_task cal_enc_task;
struct cal_enc_task {
    /* in: set before cal_enc_submit, read-only to the worker */
    cal_enc_kind kind;
    const char  *body;        /* the request body, borrowed: it lives as long
                                 as the parked connection */
    size_t       body_len;
    const cal_tokenizer *tok;
    cal_srv_limits lim;       /* the model's vocab, context and template */
    int          max_ids;     /* /tokenize: ids one answer may hold */
    void (*park)(cal_enc_task *t);  /* called at submit, the pool locked: the
                                       HTTP side suspends its connection */
    void (*wake)(cal_enc_task *t);  /* called once done, the pool locked: it
                                       resumes the connection */
    void        *conn;        /* for park and wake */
    /* out: read once cal_enc_done says so */
    int          rc;          /* CAL_OK, or the error in err (CAL_ECANCEL:
                                 the server stopped before it ran) */
    cal_srv_error err;
    int          status;      /* /tokenize: the answer's HTTP status */
    char        *answer;      /* /tokenize: its JSON (malloc'd) */
    size_t       answer_len;
    cal_srv_request req;      /* completions, chat: the parsed request */
    int32_t     *ids;         /* its prompt's ids (malloc'd; NULL when the
                                 request gave ids itself, in req) */
    int          n_ids;
    /* the pool's */
    int          done;
    cal_enc_task *next;
};

typedef struct cal_enc_pool cal_enc_pool;

/* workers threads; m (outliving the pool) counts the tasks in flight in
 * its encoding gauge. CAL_ENOMEM. */
int  cal_enc_open(int workers, cal_srv_metrics *m, cal_enc_pool **out);
/* Queue t: calls t->park under the pool's lock, so the worker's wake can
 * never come first. CAL_ECANCEL (t untouched, not parked) once stopping. */
int  cal_enc_submit(cal_enc_pool *p, cal_enc_task *t);
/* 1 once t's outputs are set. */
int  cal_enc_done(cal_enc_pool *p, const cal_enc_task *t);
/* Stop: a task running finishes, each one queued ends with CAL_ECANCEL;
 * all are woken, the workers joined. Idempotent. */
void cal_enc_stop(cal_enc_pool *p);
void cal_enc_close(cal_enc_pool **p);
/* Free what the worker made (answer, request, ids); the task itself stays. */
void cal_enc_task_clear(cal_enc_task *t);

/* The work itself, on the caller's thread (tests call it directly): fill
 * t's outputs from its inputs. */
void cal_enc_run(cal_enc_task *t);

#endif
