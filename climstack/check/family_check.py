"""verify's checks of the library families a plan binds besides MPI (run.families): each
family library the application loads must be the host's, of the SONAME major it asks for;
the host must export every nc_*/nf_*/H5*/adios2_* symbol imported; HDF5's run-time
version check (H5check_version) must pass, read from both libraries' .rodata; and the
host's ADIOS2 must be the image's major."""

from pathlib import Path, PurePosixPath

from climstack.bind import elf, families, loader
from climstack.bind.plan import Plan
from climstack.bind.stages import LINKS_DIR

HDF5_OVERRIDE = "HDF5_DISABLE_VERSION_CHECK"
#: what code compiled against HDF5's headers calls first (H5open's macro)
VERSION_CHECK = "H5check_version"


def _host_files(plan: Plan) -> set[Path]:
    """The real files of every bound family's host libraries."""
    return {
        Path(path).resolve()
        for host in plan.families.values()
        for path in host["libraries"].values()
    }


def _from_host(library: loader.Library, host_files: set[Path]) -> bool:
    """Loaded from the plan's links, or from a host library's own file where the plan
    binds it: a host library's DT_RPATH outranks LD_LIBRARY_PATH, so its dependencies
    load from the host's paths, the links passed by."""
    return (
        library.path.parent == PurePosixPath(LINKS_DIR)
        or Path(library.host).resolve() in host_files
    )


def _loaded_as(closure: loader.Closure, family: str) -> list[tuple[str, loader.Library]]:
    """(name asked for, library) of each of the family's libraries in a closure."""
    return [
        (name, lib)
        for name, lib in closure.libraries.items()
        if (families.classify(name) or ("",))[0] == family
    ]


def check_family(
    name: str, host: dict, planned: loader.Closure, host_files: set[Path]
) -> tuple[dict, list[str]]:
    """The SONAME and symbol checks of one bound family under the plan."""
    family = families.get(name)
    provided: dict[str, set[str]] = {}  # plain name -> SONAME majors the host provides
    for link in host["libraries"]:
        _, plain, major = families.classify(link)
        provided.setdefault(plain, set()).add(major)
    problems, mine = [], _loaded_as(planned, name)
    for asked, lib in mine:
        _, plain, major = families.classify(asked)
        who = ", ".join(sorted(set(lib.needed_by))) or str(planned.root.path)
        if not _from_host(lib, host_files):
            majors = ", ".join(sorted(provided.get(plain, ()))) or "none"
            problems.append(
                f"SONAME mismatch: {asked} (needed by {who}) is the image's {lib.path}, not the "
                f"host's {name}, which provides {plain} of SONAME major {majors}: build the "
                f"image against the host's {name} release, or do not bind {name}"
            )
        elif (real := families.classify(lib.info.soname or lib.name)) and real[2] != major:
            problems.append(
                f"SONAME major mismatch: {asked} (needed by {who}) is linked to the host's "
                f"{lib.info.soname}, major {real[2]}: another ABI, whatever the link says"
            )
    files = {lib.real for _, lib in mine}
    loaded = [planned.root, *planned.libraries.values()]
    others = [lib for lib in loaded if lib.real not in files]
    wanted = {s for lib in others for s in lib.info.imports if family.symbols.match(s)}
    wanted -= {s for lib in others for s in lib.info.exports}
    exported = {s for _, lib in mine for s in lib.info.exports if family.symbols.match(s)}
    missing = sorted(wanted - {s for _, lib in mine for s in lib.info.exports})
    if missing:
        problems.append(
            f"the host's {name} lacks {len(missing)} symbols the application imports: "
            f"{', '.join(missing)}"
        )
    report = {
        "imported": len(wanted),
        "exported": len(exported),
        "missing": missing,
        "from_host": sorted(asked for asked, lib in mine if _from_host(lib, host_files)),
    }
    return report, problems


def check_hdf5(own: loader.Closure, planned: loader.Closure, plan: Plan) -> tuple[dict, list]:
    """The image's HDF5 (what its libraries were built against) against the HDF5 that
    loads under the plan, as H5check_version compares them at run time."""
    image = next((lib for _, lib in _loaded_as(own, "hdf5") if _plain(lib) == "libhdf5"), None)
    loaded = next(
        (lib for _, lib in _loaded_as(planned, "hdf5") if _plain(lib) == "libhdf5"), None
    )
    if not image or not loaded or image.host.resolve() == loaded.host.resolve():
        return {}, []
    theirs, ours = elf.hdf5_version(image.host), elf.hdf5_version(loaded.host)
    report = {"image": theirs, "host": ours}
    if not theirs or not ours or theirs == ours:
        return report, []
    # only code compiled against the image's HDF5 headers checks the version: when every
    # caller is bound from the host (its NetCDF with its HDF5), nothing of the image does
    host_files = _host_files(plan)
    callers = [
        lib.path
        for lib in [planned.root, *planned.libraries.values()]
        if not _from_host(lib, host_files) and VERSION_CHECK in lib.info.imports
    ]
    if not callers:
        report["callers"] = "none from the image: the host's own libraries call HDF5"
        return report, []
    if theirs.split(".")[:2] != ours.split(".")[:2]:
        return report, [
            f"HDF5 version mismatch: the image's libraries were built against HDF5 {theirs} "
            f"({image.path}), the plan loads HDF5 {ours} ({loaded.host}): H5check_version "
            f'aborts ("Headers are {theirs}, library is {ours}"). {HDF5_OVERRIDE}=1 only '
            "turns the abort into a warning and is unsafe here: HDF5 changes its ABI between "
            "minor releases (structures such as H5O_info_t, callback signatures), so data "
            f"can be corrupted silently. Rebuild the image against HDF5 {ours}, or do not "
            "bind the host's HDF5"
        ]
    if plan.env.get(HDF5_OVERRIDE, "0") not in ("", "0"):
        report["override"] = f"{HDF5_OVERRIDE}={plan.env[HDF5_OVERRIDE]}"
        return report, []
    return report, [
        f"HDF5 release mismatch: the image's libraries were built against HDF5 {theirs}, the "
        f"plan loads HDF5 {ours} ({loaded.host}): upstream HDF5 aborts on a release "
        "difference too (Debian's builds relax that to major.minor). HDF5 keeps its ABI "
        f"within a minor series, so the override is acceptable: set {HDF5_OVERRIDE}: '1' in "
        "the site's site.yaml `bind: bind_env:`, or rebuild the image against the host's release"
    ]


def check_adios2(own: loader.Closure, plan: Plan) -> tuple[dict, list[str]]:
    """The image's ADIOS2 (its SOVERSION major.minor, what the application was built
    against) against the host's the plan binds: another major is another API and BP file
    generation, refused whatever the links say."""
    host = plan.families.get("adios2")
    image = sorted({families.classify(name)[2] for name, _ in _loaded_as(own, "adios2")})
    if not host or not image:
        return {}, []
    provided = sorted({families.classify(link)[2] for link in host["libraries"]})
    report = {"image": image, "host": provided}
    majors = {v.split(".")[0] for v in image}, {v.split(".")[0] for v in provided}
    if majors[0] == majors[1]:
        return report, []
    return report, [
        f"ADIOS2 major mismatch: the image's libraries are ADIOS2 {', '.join(image)}, the "
        f"host's ({', '.join(host['prefixes'])}) ADIOS2 {', '.join(provided)}: another major "
        "is another API and BP file generation. Build the image against the host's ADIOS2 "
        f"{'/'.join(sorted(majors[1]))}.x, or do not bind adios2"
    ]


def _plain(lib: loader.Library) -> str:
    return (families.classify(lib.name) or ("", ""))[1]


def check(plan: Plan, own: loader.Closure, planned: loader.Closure) -> tuple[dict, list[str]]:
    """Every bound family's report, HDF5's versions, and the problems found."""
    reports, problems, host_files = {}, [], _host_files(plan)
    for name, host in plan.families.items():
        reports[name], found = check_family(name, host, planned, host_files)
        problems += found
    hdf5, found = check_hdf5(own, planned, plan)
    if hdf5:
        reports.setdefault("hdf5", {})["versions"] = hdf5
    adios2, refused = check_adios2(own, plan)
    if adios2:
        reports.setdefault("adios2", {})["versions"] = adios2
    return reports, problems + found + refused
