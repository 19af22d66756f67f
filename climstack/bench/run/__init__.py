"""Running the comparison: the mode catalogue, the modes, the run matrix, run here (runner,
local, reuse) or as a centre's job script (jobs, stripes)."""
