/* The handle round trip every Fortran binding over the MPI-5 standard C ABI makes (mpif):
   a Fortran handle is MPI_<kind>_toint(h), turned back into a C handle by
   MPI_<kind>_fromint. Compiled once against the ABI's mpi.h (mpicc_abi), run on each host's
   libmpi_abi.so.1; prints one line per kind of user-created handle:
     roundtrip Comm: ok
     roundtrip Comm: MPI_Comm_fromint(MPI_Comm_toint(h)) != h (toint 0x84000002)
   Intel MPI 2021.18.1 fails all six user-created handles (the two predefined ones pass);
   2021.19.0, MPICH 5.0.2 and Open MPI 6 pass all eight. */
#include <mpi.h>
#include <stdio.h>

#define ROUNDTRIP(kind, h)                                                                  \
  do {                                                                                      \
    int f = MPI_##kind##_toint(h);                                                          \
    if (MPI_##kind##_fromint(f) == (h))                                                     \
      printf("roundtrip %s: ok\n", #kind);                                                  \
    else                                                                                    \
      printf("roundtrip %s: MPI_%s_fromint(MPI_%s_toint(h)) != h (toint 0x%08x)\n", #kind, \
             #kind, #kind, (unsigned)f);                                                    \
  } while (0)

static void add(void *in, void *inout, int *len, MPI_Datatype *type) {}

int main(int argc, char **argv) {
  MPI_Comm comm;
  MPI_Group group;
  MPI_Datatype type;
  MPI_Op op;
  MPI_Info info;
  MPI_Request request;
  int rank, value = 0, received = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_group(comm, &group);
  MPI_Type_contiguous(2, MPI_INT, &type);
  MPI_Type_commit(&type);
  MPI_Op_create(add, 1, &op);
  MPI_Info_create(&info);
  MPI_Irecv(&received, 1, MPI_INT, 0, 0, MPI_COMM_SELF, &request);
  if (rank == 0) {
    ROUNDTRIP(Comm, comm);
    ROUNDTRIP(Group, group);
    ROUNDTRIP(Type, type);
    ROUNDTRIP(Op, op);
    ROUNDTRIP(Info, info);
    ROUNDTRIP(Request, request);
    ROUNDTRIP(Comm, MPI_COMM_WORLD); /* predefined handles: constants of the ABI */
    ROUNDTRIP(Type, MPI_DOUBLE);
    fflush(stdout);
  }
  MPI_Send(&value, 1, MPI_INT, 0, 0, MPI_COMM_SELF);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  MPI_Info_free(&info);
  MPI_Op_free(&op);
  MPI_Type_free(&type);
  MPI_Group_free(&group);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
