/* caliper run --mpi: the MPI side of a run measured by several ranks
 * (src/mpi_ops.h). Built with mpicc into build/caliper-mpi only; this
 * strong cli_mpi replaces the plain build's NULL one. Every call here is
 * point-to-point with rank 0 or a collective on MPI_COMM_WORLD. */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/clock.h"
#include "src/mpi_ops.h"

enum { TAG_PING = 7101, TAG_PONG, TAG_OFFSET, TAG_LEN, TAG_DOC };
#define PIECE (1 << 30)     /* MPI counts are int: send a document in pieces */

static char g_library[MPI_MAX_LIBRARY_VERSION_STRING];

static int m_init(int *argc, char ***argv, int *rank, int *size)
{
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return -1;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    int n = 0;
    MPI_Get_library_version(g_library, &n);
    return 0;
}

static void m_finalize(void) { MPI_Finalize(); }
static void m_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static int m_bcast(void *buf, size_t n, int root)
{
    return n > INT_MAX || MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int m_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS; }

/* Rank 0 pings each rank in turn: t0 out, the rank's clock back, t1 in.
 * The rank's offset is its reading minus the midpoint of the round trip;
 * the shortest round trip of k bounds the error by half of it (NTP's rule). */
static int m_clock_offset(int k, int64_t *offset_ns, int64_t *unc_ns)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *offset_ns = 0;
    *unc_ns = 0;
    if (rank == 0) {
        for (int r = 1; r < size; r++) {
            int64_t best[2] = {0, INT64_MAX};
            for (int i = 0; i < k; i++) {
                int64_t t0 = cal_now_ns(), tr;
                if (MPI_Send(&t0, 1, MPI_INT64_T, r, TAG_PING, MPI_COMM_WORLD) ||
                    MPI_Recv(&tr, 1, MPI_INT64_T, r, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE))
                    return -1;
                int64_t t1 = cal_now_ns();
                if ((t1 - t0) / 2 < best[1]) {
                    best[1] = (t1 - t0) / 2;
                    best[0] = tr - (t0 + (t1 - t0) / 2);
                }
            }
            if (MPI_Send(best, 2, MPI_INT64_T, r, TAG_OFFSET, MPI_COMM_WORLD)) return -1;
        }
    } else {
        for (int i = 0; i < k; i++) {
            int64_t t0;
            if (MPI_Recv(&t0, 1, MPI_INT64_T, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE))
                return -1;
            int64_t tr = cal_now_ns();
            if (MPI_Send(&tr, 1, MPI_INT64_T, 0, TAG_PONG, MPI_COMM_WORLD)) return -1;
        }
        int64_t res[2];
        if (MPI_Recv(res, 2, MPI_INT64_T, 0, TAG_OFFSET, MPI_COMM_WORLD, MPI_STATUS_IGNORE))
            return -1;
        *offset_ns = res[0];
        *unc_ns = res[1];
    }
    return m_barrier();
}

static int send_doc(const char *doc, size_t len)
{
    uint64_t n = len;
    if (MPI_Send(&n, 1, MPI_UINT64_T, 0, TAG_LEN, MPI_COMM_WORLD)) return -1;
    for (size_t at = 0; at < len; at += PIECE) {
        int c = (int)(len - at < PIECE ? len - at : PIECE);
        if (MPI_Send(doc + at, c, MPI_BYTE, 0, TAG_DOC, MPI_COMM_WORLD)) return -1;
    }
    return 0;
}

static int recv_doc(int r, char **doc, size_t *len)
{
    uint64_t n;
    if (MPI_Recv(&n, 1, MPI_UINT64_T, r, TAG_LEN, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) return -1;
    if (n > SIZE_MAX - 1 || !(*doc = malloc((size_t)n + 1))) return -1;
    for (size_t at = 0; at < n; at += PIECE) {
        int c = (int)(n - at < PIECE ? n - at : PIECE);
        if (MPI_Recv(*doc + at, c, MPI_BYTE, r, TAG_DOC, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) return -1;
    }
    (*doc)[n] = '\0';
    *len = (size_t)n;
    return 0;
}

static int m_gather(const char *doc, size_t len, char ***docs, size_t **lens)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *docs = NULL;
    *lens = NULL;
    if (rank != 0) return send_doc(doc, len);
    char **d = calloc((size_t)size, sizeof *d);
    size_t *l = calloc((size_t)size, sizeof *l);
    if (!d || !l || !(d[0] = malloc(len + 1))) { free(d); free(l); return -1; }
    memcpy(d[0], doc, len);
    d[0][len] = '\0';
    l[0] = len;
    for (int r = 1; r < size; r++)
        if (recv_doc(r, &d[r], &l[r])) {
            for (int i = 0; i < size; i++) free(d[i]);
            free(d);
            free(l);
            return -1;
        }
    *docs = d;
    *lens = l;
    return 0;
}

static const cli_mpi_ops OPS = {
    .library = g_library, .init = m_init, .finalize = m_finalize, .abort = m_abort,
    .bcast = m_bcast, .barrier = m_barrier, .clock_offset = m_clock_offset, .gather = m_gather,
};
const cli_mpi_ops *cli_mpi = &OPS;
