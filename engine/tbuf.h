/* Per-thread scratch buffers of the engine's kernels, allocated on a
 * thread's first use and freed when it exits. They were static thread-local
 * arrays, and static TLS is zeroed for every thread the process starts,
 * engine or not: 673 KB of resident memory for each of caliper proxy's
 * connection and upstream threads (1.3 MB a client). */
#ifndef CALIPER_ENGINE_TBUF_H
#define CALIPER_ENGINE_TBUF_H
#include <stddef.h>

enum { CAL_TBUF_KQ, CAL_TBUF_Q8X, CAL_TBUF_XQ, CAL_TBUF_Q32, CAL_TBUF_N };

/* This thread's buffer `id` (CAL_TBUF_*) of `bytes` (every call with one id
 * passes the same size), 64-byte aligned, contents left from its last use;
 * NULL without memory (the caller takes a path that needs none). */
void *cal_tbuf(int id, size_t bytes);

#endif
