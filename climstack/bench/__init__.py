"""The benchmark wing, one room per job, each importing only the rooms before it:
`results` (read a run's output into records), `model` (a model's case and the bit-for-bit
check of two runs), `run` (the modes and the run matrix, run here or as a centre's job
script), `report` (statistics, headline, the report and its plots) and `abi` (the MPI-5
standard ABI image on each host MPI)."""
