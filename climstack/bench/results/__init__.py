"""Reading a run's output: the header line each run prints, the benchmarks' formats parsed
into measurements, and the records they are collected into."""
