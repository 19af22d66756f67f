"""Debian sid root filesystems made with mmdebstrap: the hosts that carry what only sid
packages (MPICH 5, Open MPI 6 with the MPI-5 ABI)."""

from pathlib import Path

from climstack.common import process

SUITE = "sid"
#: the archive's sid Release file can be past its Valid-Until date
APT_OPTIONS = ('Acquire::Check-Valid-Until "false"',)


def make(target: Path, variant: str, packages, what: str) -> None:
    """A Debian SUITE root filesystem in `target` (an empty directory)."""
    process.run(
        ["mmdebstrap", f"--variant={variant}"]
        + [f"--aptopt={option}" for option in APT_OPTIONS]
        + [f"--include={','.join(packages)}", SUITE, target],
        f"mmdebstrap of {what}",
        timeout=1800,
    )
