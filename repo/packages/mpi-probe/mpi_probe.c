/* mpi-probe: prove which MPI library a program really loaded.
 *
 * Rank 0 prints, one "key: value" per line:
 *   library   first line of MPI_Get_library_version()
 *   loaded    the file the dynamic loader mapped MPI_Init from (dladdr)
 *   ranks     size of MPI_COMM_WORLD
 *   pingpong  mean round-trip time between ranks 0 and 1 (8 bytes), microseconds
 * Uses MPI-3.0 calls only, so it runs on every MPICH-ABI library back to MPICH 3.1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define ITERATIONS 1000

static double pingpong_us(int rank)
{
    char buffer[8] = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < ITERATIONS; i++) {
        if (rank == 0) {
            MPI_Send(buffer, sizeof buffer, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buffer, sizeof buffer, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buffer, sizeof buffer, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buffer, sizeof buffer, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - start) * 1e6 / ITERATIONS;
}

int main(int argc, char **argv)
{
    int rank, size, length;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    Dl_info where = {0};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_library_version(version, &length);
    version[strcspn(version, "\n")] = '\0';
    dladdr((void *)MPI_Init, &where);
    double round_trip = size > 1 ? pingpong_us(rank) : 0.0;

    if (rank == 0) {
        printf("library: %s\n", version);
        printf("loaded: %s\n", where.dli_fname ? where.dli_fname : "unknown");
        printf("ranks: %d\n", size);
        if (size > 1)
            printf("pingpong: %.3f us (8-byte round trip, mean of %d)\n", round_trip, ITERATIONS);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
