/* The cost of the MPI calls a halo exchange makes, in ns per call: one rank, loops of
 * cheap calls (no ping-pong's noise). Built twice, for an MPI's own ABI and for the MPI-5
 * standard ABI (through mpi_abi_wrapper), by climstack/bench/abi/call_cost.py.
 * Usage: call_cost [ITERATIONS]; prints "kernel calls-per-iteration ns-per-iteration",
 * then "library: " and the first line of the MPI library's version (which MPI ran it). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank, flag, size;
    double sent = 1.0, received = 0.0, sum = 1.0;
    MPI_Request requests[2];
    MPI_Status statuses[2];

    for (int pass = 0; pass < 2; pass++) { /* the first pass warms up, the second is timed */
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++)
            MPI_Comm_rank(comm, &rank);
        double t1 = MPI_Wtime();
        for (long i = 0; i < n; i++)
            MPI_Type_size(MPI_DOUBLE, &size);
        double t2 = MPI_Wtime();
        for (long i = 0; i < n; i++) { /* a halo message to itself: handles and statuses */
            MPI_Irecv(&received, 1, MPI_DOUBLE, 0, 7, comm, &requests[0]);
            MPI_Isend(&sent, 1, MPI_DOUBLE, 0, 7, comm, &requests[1]);
            MPI_Waitall(2, requests, statuses);
        }
        double t3 = MPI_Wtime();
        for (long i = 0; i < n; i++) /* a probe that finds nothing */
            MPI_Iprobe(MPI_ANY_SOURCE, 99, comm, &flag, MPI_STATUS_IGNORE);
        double t4 = MPI_Wtime();
        for (long i = 0; i < n; i++)
            MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
        double t5 = MPI_Wtime();
        if (pass == 1 && rank == 0) {
            double ns = 1e9 / (double)n;
            printf("comm_rank 1 %.2f\n", (t1 - t0) * ns);
            printf("type_size 1 %.2f\n", (t2 - t1) * ns);
            printf("irecv_isend_waitall 3 %.2f\n", (t3 - t2) * ns);
            printf("iprobe 1 %.2f\n", (t4 - t3) * ns);
            printf("allreduce 1 %.2f\n", (t5 - t4) * ns);
        }
    }
    if (received != sent || size != sizeof(double))
        printf("wrong: received %g, size %d\n", received, size);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length;
    MPI_Get_library_version(version, &length);
    version[strcspn(version, "\n")] = '\0';
    printf("library: %s\n", version);
    MPI_Finalize();
    return 0;
}
