"""Which ANL MPICH release each Cray MPICH is based on, and the ABI rule we derive from it.

A container's MPICH may be swapped for the host's Cray MPICH only if it exports nothing the
Cray library lacks. MPICH adds MPI functions in minor releases (4.0: MPI-4.0, 4.1: MPI-4.1,
5.0: MPI-5.0) and keeps the function set within a minor series, so the rule is: the
container's MPICH major.minor must not be newer than the Cray MPICH base's major.minor.
Symbol-level proof for a concrete pair of libraries is `climstack verify`'s job.
"""

from climstack.common.versions import release
from climstack.errors import ClimstackError

#: (first, last) cray-mpich versions -> ANL MPICH base, with the public source of each claim
CRAY_MPICH_BASES = (
    (
        "7.7.0",
        "7.7.99",
        "3.2",
        "HPE runtime string 'CRAY MPICH version 7.7.15 (ANL base 3.2)' (CSCS ReFrame checks)",
    ),
    (
        "8.0.0",
        "8.0.99",
        "3.3",
        "HPE runtime string 'CRAY MPICH version 8.0.16 (ANL base 3.3)' (CSCS ReFrame checks)",
    ),
    (
        "8.1.0",
        "8.1.99",
        "3.4a2",
        "HPE CPE release notes 21.08-24.03 (PE-Cray/cpe-changelog, 8.1.8-8.1.29) and "
        "'Cray MPICH 8.1.30 is based upon ANL MPICH 3.4a2'; runtime strings of 8.1.4 and "
        "8.1.32 say '(ANL base 3.4a2)'",
    ),
    (
        "9.0.0",
        "9.0.99",
        "4.1.2",
        "HPE runtime string 'CRAY MPICH version 9.0.1.498 (ANL base 4.1.2)'; LUMI: 'the 9.0.1 "
        "version from ANL MPICH 4.1.2' (Lumi-supercomputer/LUMI-training-materials@d64bc58c:"
        "docs/2day-20260422/102-CPE.md l.529) and '9.0.x is derived from MPICH 4.1' (same, "
        "docs/User-Updates/Update-202601/index.md); OLCF's CPE 25.09 base images carry MPICH "
        "4.1.3 (olcf/olcf-user-docs@2745903:software/containers_on_frontier.rst). 9.0.0 is "
        "disputed (that course text says 4.0.2): 4.1 is the series of the release in use",
    ),
    (
        "9.1.0",
        "9.1.99",
        "4.2.2",
        "'HPE Cray MPICH 9.1.0 (compatible with open-source MPICH 4.2.2)' (quokka-astro/quokka "
        "pull request 1783, 2026-04); Pawsey's container bases for CPE 26.03 moved to MPICH "
        "4.2.2 (PawseySC/pawsey-containers pull requests 87 and 104, issue 102). No HPE text "
        "gives 9.1's base: confirm with the runtime string (`climstack verify` reads it)",
    ),
)


def base_of(cray_mpich: str) -> tuple[str, str]:
    """(MPICH base, source) of a cray-mpich version."""
    wanted = release(cray_mpich)
    for first, last, base, source in CRAY_MPICH_BASES:
        if release(first) <= wanted <= release(last):
            return base, source
    raise ClimstackError(
        f"no known ANL MPICH base for cray-mpich {cray_mpich}",
        fix="add it to CRAY_MPICH_BASES in climstack/cray/mpich_base.py with its HPE source",
    )


def series(mpich: str) -> str:
    """The release series: '3.4a2' -> '3.4', '5.0.2' -> '5.0'."""
    return ".".join(map(str, release(mpich)[:2]))


def newer_series(mpich: str, base: str) -> bool:
    """Is MPICH `mpich` of a newer series (major.minor) than MPICH `base`?"""
    return release(mpich)[:2] > release(base)[:2]


def check_container_mpich(container_mpich: str, cray_mpich: str, where: str) -> None:
    """Refuse a container MPICH newer (major.minor) than the Cray MPICH base."""
    base, _ = base_of(cray_mpich)
    if newer_series(container_mpich, base):
        raise ClimstackError(
            f"{where}: MPICH {container_mpich} is newer than ANL MPICH {base}, the base of the "
            f"site's cray-mpich {cray_mpich}; applications built against it may call MPI "
            f"functions the host library lacks",
            fix=f"pin the container's MPICH to the {series(base)} series, e.g. "
            f"`packages: mpich: require: ['@{series(base)}:{series(base)}.99']` in its spack.yaml",
        )
