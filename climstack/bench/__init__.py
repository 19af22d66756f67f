"""The bench room: run the benchmarks in each mode, parse their native output into tidy
records, and report the comparison (tables, plots) as the field publishes it."""
