"""The MPI-5 standard ABI lane: this machine's host MPIs (abi_hosts), the image run on each
beside its native build (abi), and its report (abi_report)."""
