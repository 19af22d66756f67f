"""SingularityCE (Sylabs), what ARCHER2 and Pawsey's Setonix run: the `singularity`
command, SINGULARITY_BIND and SINGULARITYENV_*; otherwise as Apptainer, its fork."""

import functools

from climstack.launch.runtimes import apptainer

NAME = "singularity"
SEPARATORS = apptainer.SEPARATORS
PROGRAM, PREFIXES = "singularity", ("SINGULARITY",)

exports = functools.partial(apptainer.exports, prefixes=PREFIXES)
exec_args = functools.partial(apptainer.exec_args, name=PROGRAM)
job_lines = functools.partial(apptainer.job_lines, name=PROGRAM, prefixes=PREFIXES)
check_image = apptainer.check_image
