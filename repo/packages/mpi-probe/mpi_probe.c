/* mpi-probe: prove which MPI library a program really loaded.
 *
 * Rank 0 prints, one "key: value" per line:
 *   library   first line of MPI_Get_library_version()
 *   loaded    the file the dynamic loader mapped MPI_Init from (dladdr)
 *   ranks     size of MPI_COMM_WORLD
 *   abi       MPI_Abi_get_version() (compiled against the MPI-5 standard ABI's mpi.h only)
 *   pingpong  mean round-trip time between ranks 0 and 1 (8 bytes), microseconds
 *   providers the network plugins rank 0 mapped: ofi:<name> (libfabric's lib<name>-fi.so),
 *             ucx:<name> (libuct_<name>.so), verbs:<name> (lib<name>-rdmav*.so)
 * and with MPI_PROBE_MAPS=1 in the environment, one "mapped: <rank> <path>" line per shared
 * object each rank mapped (/proc/self/maps, read after the ping-pong, when the network
 * plugins are loaded), gathered to rank 0: `climstack parity` compares them.
 * Uses MPI-3.0 calls only (and MPI-5's MPI_Abi_get_version where the header declares the
 * standard ABI), so it runs on every MPICH-ABI library back to MPICH 3.1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITERATIONS 1000
#define MAPS_MAX (1 << 20)

/* The distinct shared objects this process mapped, one path per line, into `out`. */
static int mapped_objects(char *out, int room)
{
    char line[4096];
    int used = 0;
    out[0] = '\0';
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return 0;
    while (fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (!path || !strstr(path, ".so"))
            continue;
        path[strcspn(path, "\n")] = '\0';
        char entry[4100];
        int length = snprintf(entry, sizeof entry, "%s\n", path);
        if (strstr(out, entry) || used + length >= room)
            continue;
        memcpy(out + used, entry, length + 1);
        used += length;
    }
    fclose(maps);
    return used;
}

/* "ofi:verbs ucx:ib ..." for the network plugins among the mapped objects. */
static void providers(const char *objects, char *out, size_t room)
{
    static const char *families[][3] = {
        {"ofi", "lib", "-fi.so"}, {"ucx", "libuct_", ".so"}, {"verbs", "lib", "-rdmav"}};
    out[0] = '\0';
    for (const char *line = objects; *line; line = strchr(line, '\n') + 1) {
        const char *end = strchr(line, '\n');
        const char *name = line;
        for (const char *c = line; c < end; c++)
            if (*c == '/')
                name = c + 1;
        for (int f = 0; f < 3; f++) {
            const char *tail = strstr(name, families[f][2]);
            size_t prefix = strlen(families[f][1]);
            if (!tail || tail >= end || strncmp(name, families[f][1], prefix) || tail <= name + prefix)
                continue;
            if (f == 1 && tail != end - 3 && tail[3] != '.')
                continue;
            size_t length = strlen(out);
            snprintf(out + length, room - length, "%s%s:%.*s", length ? " " : "", families[f][0],
                     (int)(tail - name - prefix), name + prefix);
            break;
        }
    }
}

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
    char *objects = malloc(MAPS_MAX), plugins[4096];
    int used = mapped_objects(objects, MAPS_MAX);
    providers(objects, plugins, sizeof plugins);

    if (rank == 0) {
        printf("library: %s\n", version);
        printf("loaded: %s\n", where.dli_fname ? where.dli_fname : "unknown");
        printf("ranks: %d\n", size);
#ifdef MPI_ABI_VERSION
        int abi_major = 0, abi_minor = 0;
        MPI_Abi_get_version(&abi_major, &abi_minor);
        printf("abi: %d.%d\n", abi_major, abi_minor);
#endif
        if (size > 1)
            printf("pingpong: %.3f us (8-byte round trip, mean of %d)\n", round_trip, ITERATIONS);
        printf("providers: %s\n", plugins[0] ? plugins : "none");
        fflush(stdout);
    }
    if (getenv("MPI_PROBE_MAPS")) { /* every rank's objects, gathered and printed by rank 0 */
        int *lengths = rank == 0 ? malloc(size * sizeof(int)) : NULL;
        int *offsets = rank == 0 ? malloc(size * sizeof(int)) : NULL;
        MPI_Gather(&used, 1, MPI_INT, lengths, 1, MPI_INT, 0, MPI_COMM_WORLD);
        char *all = NULL;
        if (rank == 0) {
            long total = 0;
            for (int r = 0; r < size; r++) {
                offsets[r] = (int)total;
                total += lengths[r];
            }
            all = malloc(total + 1);
            all[total] = '\0';
        }
        MPI_Gatherv(objects, used, MPI_CHAR, all, lengths, offsets, MPI_CHAR, 0, MPI_COMM_WORLD);
        for (int r = 0; rank == 0 && r < size; r++)
            for (char *line = all + offsets[r]; line < all + offsets[r] + lengths[r];) {
                char *end = strchr(line, '\n');
                printf("mapped: %d %.*s\n", r, (int)(end - line), line);
                line = end + 1;
            }
        fflush(stdout);
        free(all), free(lengths), free(offsets);
    }
    free(objects);
    MPI_Finalize();
    return 0;
}
