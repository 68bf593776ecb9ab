/* The deadlines of caliper serve and caliper proxy (see conn_guard.h). Each
 * connection still receiving its request sits on one of three lists (head,
 * kept-alive wait, body), and each reply whose client has not yet taken the
 * bytes last handed to it on a fourth (send), in the order it joined; a
 * list's deadline is the same for all its entries, so only list heads can
 * be due.
 * A thread wakes a few times per shortest deadline and shuts the socket down
 * (shutdown(2), from outside libmicrohttpd): the daemon's own thread then
 * reads end-of-file and closes the connection the ordinary way. A record
 * leaves the lists under the guard's lock before libmicrohttpd closes the
 * descriptor (NOTIFY_CLOSED comes first), so a shutdown never reaches a
 * reused descriptor. */
#include "lib/util/conn_guard.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include "caliper/clock.h"
#include "caliper/error.h"

enum { W_HEAD, W_KEEP, W_BODY, W_SEND, W_N, W_NONE = W_N };
/* why a connection was closed: cal_guard_stats order */
enum { CL_HEAD, CL_BODY, CL_SEND, CL_EVICT, CL_N };

typedef struct gconn {
    struct gconn *prev, *next;   /* on list w[list], or the free list (next only) */
    int           fd;
    int           list;          /* W_HEAD.., or W_NONE: waiting for the server, or shut */
    int           shut;          /* shut down by the guard; closing */
    int64_t       since_ns;      /* joined its list */
} gconn;

struct cal_guard {
    cal_guard_config cfg;
    unsigned         reserve;
    int64_t          due_ns[W_N];   /* each list's deadline */
    int64_t          tick_ns;
    pthread_mutex_t  mu;
    pthread_t        th;
    volatile int     stop;
    gconn           *pool;          /* [pool_n], handed out in order, then reused */
    size_t           pool_n, pool_used;
    gconn           *free_list;
    struct { gconn *head, *tail; } w[W_N];
    unsigned         open;          /* tracked connections */
    unsigned         closing;       /* ... of them shut down, not yet closed */
    atomic_ullong    n_closed[CL_N];
};

static void unlink_conn(cal_guard *g, gconn *c)
{
    if (c->list == W_NONE) return;
    if (c->prev) c->prev->next = c->next; else g->w[c->list].head = c->next;
    if (c->next) c->next->prev = c->prev; else g->w[c->list].tail = c->prev;
    c->prev = c->next = NULL;
    c->list = W_NONE;
}

static void join_list(cal_guard *g, gconn *c, int k, int64_t now)
{
    unlink_conn(g, c);
    if (c->shut) return;
    c->since_ns = now;
    c->list = k;
    c->prev = g->w[k].tail;
    c->next = NULL;
    if (g->w[k].tail) g->w[k].tail->next = c; else g->w[k].head = c;
    g->w[k].tail = c;
}

static void shut_conn(cal_guard *g, gconn *c, int why)
{
    if (c->list == W_SEND) {
        /* its client is not reading: the close resets the connection, and
         * the kernel drops what it still holds for it instead of keeping
         * it (and trying to send it) after the descriptor is gone */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    unlink_conn(g, c);
    c->shut = 1;
    g->closing++;
    shutdown(c->fd, SHUT_RDWR);
    atomic_fetch_add_explicit(&g->n_closed[why], 1, memory_order_relaxed);
}

/* Keep `reserve` slots free: a new connection the daemon refuses at its
 * limit waits in the listen backlog behind the very sockets that fill it.
 * The connection that has gone longest without progress goes first: the
 * longest wait for a request, or the reply whose client has taken nothing
 * for the longest time (the newcomer itself, with no wait yet, when no
 * other connection waits for its client). A reply waiting for the server
 * is never chosen. Under honest load that costs one request, as refusing
 * the newest would, and under a flood of slow, silent or non-reading
 * clients it keeps the server reachable. */
static void evict_locked(cal_guard *g)
{
    unsigned keep = g->cfg.max_conn - g->reserve;
    while (g->open - g->closing > keep) {
        gconn *old = NULL;
        for (int k = 0; k < W_N; k++) {
            gconn *h = g->w[k].head;
            if (h && (!old || h->since_ns < old->since_ns)) old = h;
        }
        if (!old) return;
        shut_conn(g, old, CL_EVICT);
    }
}

static void *reaper(void *arg)
{
    cal_guard *g = arg;
    while (!g->stop) {
        pthread_mutex_lock(&g->mu);
        int64_t now = cal_now_ns();
        for (int k = 0; k < W_N; k++)
            while (g->w[k].head && now - g->w[k].head->since_ns >= g->due_ns[k])
                shut_conn(g, g->w[k].head, k == W_BODY ? CL_BODY : k == W_SEND ? CL_SEND : CL_HEAD);
        pthread_mutex_unlock(&g->mu);
        cal_sleep_ns(g->tick_ns, &g->stop);
    }
    return NULL;
}

int cal_guard_open(const cal_guard_config *c, cal_guard **out)
{
    *out = NULL;
    if (!c || c->head_ns <= 0 || c->body_ns <= 0 || c->keepalive_ns <= 0 || c->send_ns <= 0 ||
        c->send_buffer_bytes < 0 || !c->max_conn)
        return CAL_EINVAL;
    cal_guard *g = calloc(1, sizeof *g);
    if (!g) return CAL_ENOMEM;
    g->cfg = *c;
    /* 1/64 of the slots, 1 to 64 of them; none when there is only one */
    unsigned r = c->max_conn / 64;
    g->reserve = c->max_conn < 2 ? 0 : r < 1 ? 1 : r > 64 ? 64 : r;
    g->due_ns[W_HEAD] = c->head_ns;
    g->due_ns[W_KEEP] = c->keepalive_ns;
    g->due_ns[W_BODY] = c->body_ns;
    g->due_ns[W_SEND] = c->send_ns;
    /* a deadline is met within 1/8 of the shortest one, 10 to 200 ms late */
    int64_t m = c->head_ns;
    for (int k = 0; k < W_N; k++)
        if (g->due_ns[k] < m) m = g->due_ns[k];
    g->tick_ns = m / 8 < 10000000 ? 10000000 : m / 8 > 200000000 ? 200000000 : m / 8;
    /* libmicrohttpd never holds more than max_conn + reserve; lazily touched */
    g->pool_n = (size_t)c->max_conn + 64;
    g->pool = calloc(g->pool_n, sizeof *g->pool);
    if (!g->pool) { free(g); return CAL_ENOMEM; }
    pthread_mutex_init(&g->mu, NULL);
    if (pthread_create(&g->th, NULL, reaper, g) != 0) {
        pthread_mutex_destroy(&g->mu);
        free(g->pool);
        free(g);
        return CAL_EIO;
    }
    *out = g;
    return CAL_OK;
}

void cal_guard_close(cal_guard **pg)
{
    cal_guard *g = pg ? *pg : NULL;
    if (!g) return;
    g->stop = 1;
    pthread_join(g->th, NULL);
    pthread_mutex_destroy(&g->mu);
    free(g->pool);
    free(g);
    *pg = NULL;
}

unsigned cal_guard_reserve(const cal_guard *g) { return g ? g->reserve : 0; }

/* libmicrohttpd counts a connection until its own thread has cleaned it
 * up, some time after the guard shut it down. With the daemon's limit at
 * max_conn, the connection whose arrival made the guard close the longest
 * wait was itself closed unanswered whenever that cleanup lagged (a GET
 * /v1/models behind 256 trickling sockets, on a loaded machine). Headroom
 * for those in closing, as many as the reserve: live ones stay at most
 * max_conn - reserve + 1, as eviction keeps them. */
unsigned cal_guard_daemon_limit(const cal_guard *g)
{
    return g ? g->cfg.max_conn + g->reserve : 0;
}

void cal_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code)
{
    cal_guard *g = cls;
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        gconn *r = g->free_list;
        if (r) g->free_list = r->next;
        else if (g->pool_used < g->pool_n) r = &g->pool[g->pool_used++];
        if (r && ci) {
            *r = (gconn){.fd = ci->connect_fd, .list = W_NONE};
            /* what a client that stops reading leaves queued in the kernel:
             * autotuned, a loopback socket takes megabytes */
            if (g->cfg.send_buffer_bytes > 0)
                setsockopt(r->fd, SOL_SOCKET, SO_SNDBUF, &g->cfg.send_buffer_bytes,
                           sizeof g->cfg.send_buffer_bytes);
            g->open++;
            join_list(g, r, W_HEAD, cal_now_ns());
            *socket_context = r;
            evict_locked(g);   /* the newcomer itself, when no other waits */
        } else if (r) {                  /* no descriptor: not ours to close */
            r->next = g->free_list;
            g->free_list = r;
        }
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        gconn *r = *socket_context;
        unlink_conn(g, r);
        if (r->shut) g->closing--;
        g->open--;
        r->next = g->free_list;
        g->free_list = r;
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&g->mu);
}

static gconn *record_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void move_to(cal_guard *g, struct MHD_Connection *c, int k)
{
    if (!g || !c) return;
    pthread_mutex_lock(&g->mu);
    gconn *r = record_of(c);
    if (r) {
        if (k == W_NONE) unlink_conn(g, r);
        else join_list(g, r, k, cal_now_ns());
    }
    pthread_mutex_unlock(&g->mu);
}

void cal_guard_headers_in(cal_guard *g, struct MHD_Connection *c) { move_to(g, c, W_BODY); }
void cal_guard_request_in(cal_guard *g, struct MHD_Connection *c) { move_to(g, c, W_NONE); }
void cal_guard_reply_done(cal_guard *g, struct MHD_Connection *c) { move_to(g, c, W_KEEP); }
void cal_guard_reply_sending(cal_guard *g, struct MHD_Connection *c) { move_to(g, c, W_SEND); }
void cal_guard_reply_waiting(cal_guard *g, struct MHD_Connection *c) { move_to(g, c, W_NONE); }

void cal_guard_get_stats(cal_guard *g, cal_guard_stats *out)
{
    out->head_deadline = atomic_load(&g->n_closed[CL_HEAD]);
    out->body_deadline = atomic_load(&g->n_closed[CL_BODY]);
    out->send_deadline = atomic_load(&g->n_closed[CL_SEND]);
    out->evicted = atomic_load(&g->n_closed[CL_EVICT]);
}
