"""A model's case (run directory, main-loop time, output digests) and the bit-for-bit check
of two runs, reading NetCDF."""
