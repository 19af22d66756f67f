"""`climstack bench suite`: MPICH's own test suite (test/mpi) natively and through the bind
plan, judged against expected-failure lists."""
