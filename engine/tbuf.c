/* Per-thread kernel scratch (see tbuf.h): one thread-local pointer array
 * for the fast path, and a pthread key whose destructor frees the buffers
 * when the thread exits. */
#include "engine/tbuf.h"
#include <pthread.h>
#include <stdlib.h>

typedef struct slots { void *p[CAL_TBUF_N]; } slots;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t  g_key;
static int            g_key_ok;
static _Thread_local slots *t_mine;

static void slots_free(void *v)
{
    slots *s = v;
    for (int i = 0; i < CAL_TBUF_N; i++) free(s->p[i]);
    free(s);
}

static void key_init(void) { g_key_ok = pthread_key_create(&g_key, slots_free) == 0; }

void *cal_tbuf(int id, size_t bytes)
{
    if (id < 0 || id >= CAL_TBUF_N || !bytes) return NULL;
    if (t_mine && t_mine->p[id]) return t_mine->p[id];
    if (!t_mine) {
        pthread_once(&g_once, key_init);
        if (!g_key_ok) return NULL;
        slots *s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(g_key, s) != 0) { free(s); return NULL; }
        t_mine = s;
    }
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    t_mine->p[id] = p;
    return p;
}
