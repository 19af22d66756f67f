"""Container runtimes, one module each (as in e4s-cl): how a bind plan becomes the
runtime's command line, its environment exports and the lines of a job script.

Each module has NAME, SEPARATORS (characters its bind syntax cannot carry in a path),
exec_args(plan, image, command), job_lines(plan, image, command) and check_image(plan, image).
"""

import importlib

from climstack.errors import ClimstackError

NAMES = ("apptainer", "singularity", "charliecloud")


def get(name: str):
    if name not in NAMES:
        raise ClimstackError(
            f"unknown container runtime {name!r}", fix=f"one of {', '.join(NAMES)}"
        )
    return importlib.import_module(f"{__name__}.{name}")


def check_bind_paths(plan, separators: str) -> None:
    """Refuse paths the runtime's bind syntax cannot express."""
    for pair in plan.binds:
        for path in pair:
            if any(s in path for s in separators):
                raise ClimstackError(
                    f"bind path {path!r} contains one of {separators!r}, "
                    "which the runtime's bind syntax cannot express",
                    fix="move or link it to a path without them",
                )
