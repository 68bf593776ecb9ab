/* Deadlines for the libmicrohttpd daemons (caliper serve, caliper proxy).
 * libmicrohttpd's own timeout counts silence, so a client that sends one
 * header line every few seconds holds its slot for ever, and a thousand
 * silent sockets fill every slot. The guard closes a connection whose
 * request head, or body, has not fully arrived by a fixed deadline however
 * busy the client keeps it. A reply has a send deadline instead: a client
 * that takes none of the bytes handed to it for send_ns is closed (reset),
 * while a reply waiting for the server's next bytes (a stream between two
 * tokens, a long prefill) has no deadline. When free slots run short the
 * connection that has gone longest without progress is closed: the longest
 * wait for a request, or the reply whose client has taken nothing for the
 * longest time.
 *
 * Ownership: cal_guard_open() allocates the guard and starts its thread;
 * cal_guard_close(&g) stops it, frees it and NULLs the pointer. Close the
 * daemon first: libmicrohttpd reports every connection closed to the guard. */
#ifndef CALIPER_UTIL_CONN_GUARD_H
#define CALIPER_UTIL_CONN_GUARD_H
#include <stdint.h>
#include <microhttpd.h>

typedef struct cal_guard_config {
    int64_t  head_ns;       /* request line + headers, from accept; > 0 */
    int64_t  body_ns;       /* the whole body, from the end of the headers; > 0 */
    int64_t  keepalive_ns;  /* a kept-alive connection's next request head, from the
                               end of the previous reply; > 0 */
    int64_t  send_ns;       /* a reply whose client takes none of its bytes this
                               long is closed; > 0 */
    int      send_buffer_bytes; /* the kernel's send buffer of each connection
                               (SO_SNDBUF; the kernel doubles it); 0: its own
                               autotuning, up to megabytes a connection */
    unsigned max_conn;      /* connections at once, those being closed aside;
                               >= 1. Give the daemon cal_guard_daemon_limit()
                               as its MHD_OPTION_CONNECTION_LIMIT */
} cal_guard_config;

/* Why the guard closed connections, counts since open. */
typedef struct cal_guard_stats {
    uint64_t head_deadline;  /* head not in by head_ns (or keepalive_ns) */
    uint64_t body_deadline;  /* body not in by body_ns */
    uint64_t send_deadline;  /* the client took nothing of its reply for send_ns */
    uint64_t evicted;        /* closed to keep slots free for new connections */
} cal_guard_stats;

typedef struct cal_guard cal_guard;

/* CAL_OK; CAL_EINVAL when a deadline is <= 0, send_buffer_bytes < 0 or
 * max_conn is 0; CAL_ENOMEM;
 * CAL_EIO when the thread cannot start. */
int  cal_guard_open(const cal_guard_config *c, cal_guard **out);
/* Stops the thread and frees the guard; NULL-safe. */
void cal_guard_close(cal_guard **g);
/* The slots kept free: when more connections than max_conn minus this are
 * open, the one that has gone longest without progress is closed. */
unsigned cal_guard_reserve(const cal_guard *g);
/* The MHD_OPTION_CONNECTION_LIMIT to give the daemon: max_conn plus room
 * for connections the guard has shut down and libmicrohttpd has not yet
 * cleaned up. */
unsigned cal_guard_daemon_limit(const cal_guard *g);
/* Pass as MHD_OPTION_NOTIFY_CONNECTION with the guard as its closure. */
void cal_guard_notify(void *guard, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code);
/* From the access handler's first call for a request: the head is in, the
 * body deadline starts. */
void cal_guard_headers_in(cal_guard *g, struct MHD_Connection *c);
/* The whole request is in (or the handler answers it early): no deadline
 * while the reply waits for the server. Calling it again is harmless. */
void cal_guard_request_in(cal_guard *g, struct MHD_Connection *c);
/* From a reply's content reader each time it hands the daemon bytes (the
 * daemon asks for more only once the client has taken what it had), or
 * just before queueing a reply held in memory: the client must take bytes
 * within send_ns of this call, or the connection is reset. */
void cal_guard_reply_sending(cal_guard *g, struct MHD_Connection *c);
/* From a content reader that has no bytes yet (it suspends or waits for
 * the server): no deadline until the next cal_guard_reply_sending. */
void cal_guard_reply_waiting(cal_guard *g, struct MHD_Connection *c);
/* From MHD_OPTION_NOTIFY_COMPLETED: the reply ended; a kept-alive
 * connection now waits for its next request head (keepalive_ns). */
void cal_guard_reply_done(cal_guard *g, struct MHD_Connection *c);
void cal_guard_get_stats(cal_guard *g, cal_guard_stats *out);

#endif
