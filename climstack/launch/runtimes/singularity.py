"""SingularityCE (Sylabs), what ARCHER2 and Pawsey's Setonix run: the `singularity`
command, SINGULARITY_BIND and SINGULARITYENV_*; otherwise as Apptainer, its fork, but with
no `--sharens` (its CHANGELOG has none to 4.x): each rank its own container, which a setuid
install mounts from the kernel, its loop devices shared (singularity.conf `shared loop
devices`), not one FUSE mount per rank."""

from climstack.launch.runtimes.apptainer import Apptainer


class Singularity(Apptainer):
    name = "singularity"
    local = 0  # not on this machine
    command = "singularity"
    prefixes = ("SINGULARITY",)
    sharing = None
