/* caliper run --mpi — the few MPI operations `caliper run` needs, as a table
 * of function pointers. The plain build has none (cli_mpi is NULL, a weak
 * definition in cmd_run.c) and links no MPI: libcaliper.a and build/caliper
 * stay MPI-free. When mpicc is present, the Makefile also builds
 * build/caliper-mpi: the same program plus mpi/run_mpi.c (compiled and
 * linked with mpicc), whose strong cli_mpi fills the table. `caliper run
 * --mpi` in the plain binary execs caliper-mpi beside it (Open MPI's
 * environment passes through exec), so `mpirun -np N caliper run --mpi …`
 * works with either on the PATH. */
#ifndef CALIPER_MPI_OPS_H
#define CALIPER_MPI_OPS_H
#include <stddef.h>
#include <stdint.h>

typedef struct cli_mpi_ops {
    const char *library;                        /* "Open MPI v4.1.4", for the record */
    int  (*init)(int *argc, char ***argv, int *rank, int *size);   /* 0 ok */
    void (*finalize)(void);
    void (*abort)(int code);                    /* ends every rank */
    /* root's n bytes at buf to every rank (collective) */
    int  (*bcast)(void *buf, size_t n, int root);
    int  (*barrier)(void);
    /* Collective: each rank's CLOCK_MONOTONIC minus rank 0's, measured by k
     * ping-pongs with rank 0, the one with the shortest round trip kept;
     * uncertainty: half that round trip (rank 0: 0 and 0). */
    int  (*clock_offset)(int k, int64_t *offset_ns, int64_t *uncertainty_ns);
    /* Collective: every rank sends len bytes (len 0: it has nothing); at
     * rank 0 docs[i] / lens[i] (malloc'd, docs NUL-terminated) hold rank
     * i's, for i < size; elsewhere docs is NULL. */
    int  (*gather)(const char *doc, size_t len, char ***docs, size_t **lens);
} cli_mpi_ops;

extern const cli_mpi_ops *cli_mpi;

#endif
