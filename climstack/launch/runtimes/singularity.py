"""SingularityCE (Sylabs), what ARCHER2 and Pawsey's Setonix run: the `singularity`
command, SINGULARITY_BIND and SINGULARITYENV_*; otherwise as Apptainer, its fork."""

from climstack.launch.runtimes.apptainer import Apptainer


class Singularity(Apptainer):
    name = "singularity"
    local = 0  # not on this machine
    command = "singularity"
    prefixes = ("SINGULARITY",)
