"""The MPI-5 standard ABI lane: this machine's host MPIs (abi_hosts), the image run on each
beside its native build (abi), and its report (abi_report); mpi_abi_wrapper built by Spack
against the host MPIs that lack the standard ABI (wrapper_builds)."""
