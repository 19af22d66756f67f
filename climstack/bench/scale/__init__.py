"""`climstack bench scale`: start-up, processes, memory and file-system metadata calls of a
launch as ranks grow, per launch mode, and the growth per rank."""
