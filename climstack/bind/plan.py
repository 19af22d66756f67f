"""The bind plan: which host directories to bind where, the links directory that leads
LD_LIBRARY_PATH (one link per library and per SONAME alias the application asks for), the
site's extras (site.yaml), and the plan directory on disk (plan.json + lib/).

Modes: bind (host MPI), hybrid (the image's MPI; only the site's runtime extras), fabric
(the image's MPI with the host's libfabric and its closure).
"""

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from climstack import inputs, pins
from climstack.bind import discover, loader, remedy, stages
from climstack.common import stamp
from climstack.bind.stages import LINKS_DIR, MODES
from climstack.errors import ClimstackError
from climstack.inputs import sites


#: the plan.json format this climstack writes and reads
FORMAT = 1


def _described(text: str, **schema) -> dict:
    return {"schema": {"description": text, **schema}}


@dataclass(frozen=True)
class Plan:
    site: str
    mode: str = field(metadata=_described("bind, hybrid or fabric", enum=list(MODES)))
    runtime: str = field(
        metadata=_described("a module of climstack/launch/runtimes", pattern="^[a-z][a-z0-9_-]*$")
    )
    format: int = field(
        default=FORMAT,
        metadata={"required": True, **_described(f"the plan format ({FORMAT})", const=FORMAT)},
    )
    mpi: dict = field(default_factory=dict)  # source, version, libraries
    binds: list[list[str]] = field(
        default_factory=list,
        metadata=_described(
            "[host path, container path] pairs",
            items={"minItems": 2, "maxItems": 2, "type": "array", "items": {"type": "string"}},
        ),
    )
    links: dict[str, str] = field(default_factory=dict)  # name in LINKS_DIR -> container path
    library_path: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    # what ranks need only when each runs in its own container (not `ch-run --join`ed)
    separate_env: dict[str, str] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)  # present; reached via the host's /dev
    absent: list[str] = field(default_factory=list)  # site extras missing on this host
    closure: list[dict] = field(default_factory=list)  # name, host path, rule, needed by
    plugins: list[dict] = field(default_factory=list)  # network plugins and their closure
    warnings: list[str] = field(default_factory=list)  # plugins that cannot load here
    providers: list[str] = field(default_factory=list)  # expected (site.yaml `providers:`)
    families: dict[str, dict] = field(default_factory=dict)  # netcdf, hdf5: run.families
    flavour: str | None = None  # PrgEnv flavour of the host builds (gnu, cray, aocc)
    rpath_remedy: str = field(  # how an executable's DT_RPATH is overridden (bind.remedy)
        default="", metadata={"schema": {"enum": ["", *remedy.REMEDIES]}}
    )
    directory: str = ""  # host directory holding plan.json and lib/ (the links)

    @property
    def abi(self) -> str:
        """The MPI ABI whose host library the plan binds (bind mode): mpich or standard."""
        return self.mpi.get("abi", "mpich")

    @property
    def wrapped(self) -> bool:
        """Is the standard ABI bound through mpi_abi_wrapper over the host's own MPI?"""
        return self.mpi.get("route") == "wrapper"

    def mount_points(self) -> list[str]:
        return sorted({dst for _, dst in self.binds})

    def runtime_env(self, joined: bool = False) -> dict[str, str]:
        """The variables the container's processes get (LD_LIBRARY_PATH: the links); ranks
        `joined` in one container per node do without separate_env."""
        env = dict(self.env) if joined else {**self.separate_env, **self.env}
        if self.library_path:
            env["LD_LIBRARY_PATH"] = ":".join(self.library_path)
        return env

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def load(cls, path: Path) -> "Plan":
        file = path / "plan.json" if path.is_dir() else path
        fix = "write it again with `climstack bind <site> --out DIR`, then pass DIR"
        data = inputs.load_json(file, SCHEMA, fix)
        return cls(**data)


SCHEMA = inputs.schema_of(
    Plan, "plan.json, written by `climstack bind`, read by `verify` and `slurm`"
)


def make_plan(
    site: sites.Site,
    mode: str = "bind",
    view: loader.View | None = None,
    prefix: str | None = None,
    fabric_prefix: str | None = None,
    environ: dict | None = None,
    runtime: str | None = None,
    with_families: dict[str, str | None] | None = None,
    flavour: str | None = None,
    rpath_remedy: str | None = None,
    abi: str = "mpich",
    wrapper: str | None = None,
) -> Plan:
    """The plan for `mode` at `site`; `with_families` ({name: prefix or None}) adds host
    library families to site.yaml's `families:`, built with the PrgEnv `flavour`;
    `rpath_remedy`: how executables with a DT_RPATH are run (bind.remedy); `abi`: the
    image's MPI ABI, whose host library is bound (discover.ABIS); `wrapper`: the prefix of
    the mpi_abi_wrapper that gives the host MPI the standard ABI (bind.abi_wrapper)."""
    if mode not in MODES:
        raise ClimstackError(f"unknown mode {mode}", fix=f"one of {', '.join(MODES)}")
    if abi not in discover.ABIS:
        raise ClimstackError(f"unknown MPI ABI {abi!r}", fix=f"one of {', '.join(discover.ABIS)}")
    remedy.check_name(rpath_remedy)
    if wrapper and (mode, abi) != ("bind", "standard"):
        raise ClimstackError(
            f"--wrapper is for the standard ABI in bind mode, not --mode {mode} --abi {abi}",
            fix="add --abi standard (bind mode), or drop --wrapper",
        )
    if rpath_remedy and mode != "bind":
        raise ClimstackError(
            f"--rpath-remedy {rpath_remedy} is for bind mode: in {mode} mode the image's "
            "own MPI runs, which its RPATH finds anyway",
            fix="drop --rpath-remedy, or use --mode bind",
        )
    request = stages.Request.of(
        site,
        mode,
        view,
        environ,
        flavour,
        prefix=prefix,
        fabric_prefix=fabric_prefix,
        with_families=with_families,
        abi=abi,
        wrapper=wrapper,
    )
    return assemble(request, runtime or site.bind["runtime"], rpath_remedy or "")


def assemble(request: stages.Request, runtime: str, rpath_remedy: str = "") -> Plan:
    """Run the stages in order; the plan they make."""
    roots = stages.roots(request)
    search = stages.search_path(request, roots)
    files = stages.closures(request, roots, search)
    plugins = stages.close_plugins(request, files, search)
    every = {**files, **plugins.needed}
    bound = stages.bound_directories(request, every, plugins)
    links, closure = stages.library_links(
        request, stages.with_abi_spellings(every), bound, roots.rules
    )
    links |= stages.plugin_dir_links(request, files, links)
    links |= stages.plugin_links(request, every, bound, plugins, links)
    extras = stages.site_extras(request)
    return Plan(
        site=request.site.reference,
        mode=request.mode,
        runtime=runtime,
        mpi=dict(roots.mpi),
        binds=stages.binds(request, bound) + [list(b) for b in (*roots.data, *extras.binds)],
        links=links,
        library_path=[LINKS_DIR] if links else [],
        env={**extras.env, **roots.env},
        separate_env=dict(extras.separate_env),
        devices=list(extras.devices),
        absent=list(extras.absent),
        closure=closure,
        plugins=list(plugins.found),
        warnings=[*roots.warnings, *plugins.warnings],
        providers=list(plugins.providers),
        families=dict(roots.families),
        flavour=request.flavour,
        rpath_remedy=rpath_remedy,
    )


def make(site: sites.Site, mode: str = "bind", *, out: Path | None = None, check=None, **options):
    """The one way to a plan on disk: make it (make_plan's `options`) and write it into
    `out` (default: default_directory); `check(plan)` sees the plan as it will be written
    (its directory's binds included) before anything is written."""
    made = make_plan(site, mode, **options)
    directory = Path(out or default_directory(made)).resolve()
    if check:
        check(placed(made, directory))
    return write(made, directory)


def placed(plan: Plan, directory: Path) -> Plan:
    """The plan as written into `directory`: its directory, and lib/ bound at LINKS_DIR
    (the runpath remedy's copies at REMEDY_DIR)."""
    directory = directory.resolve()
    ours = {LINKS_DIR: directory / "lib", remedy.REMEDY_DIR: directory / "remedy"}
    wanted = [LINKS_DIR] if plan.links else []
    wanted += [remedy.REMEDY_DIR] if plan.rpath_remedy == "runpath" else []
    return replace(
        plan,
        directory=str(directory),
        binds=[b for b in plan.binds if b[1] not in ours]
        + [[str(ours[target]), target] for target in wanted],
    )


def write(plan: Plan, directory: Path) -> Plan:
    """Write lib/ (the links) and plan.json into `directory`; the plan as written
    (placed)."""
    plan = placed(plan, directory)
    directory = Path(plan.directory)

    directory.mkdir(parents=True, exist_ok=True)
    if plan.rpath_remedy == "runpath":  # the patched copies, made at launch
        (directory / "remedy").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".plan.", dir=directory))
    try:  # everything is made beside its place first, then swapped in
        (work / "lib").mkdir()
        for name, target in plan.links.items():
            (work / "lib" / name).symlink_to(target)
        (work / "plan.json").write_text(plan.to_json() + "\n")
        if (directory / "lib").exists():
            os.replace(directory / "lib", work / "old-lib")
        os.replace(work / "lib", directory / "lib")
        os.replace(work / "plan.json", directory / "plan.json")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return plan


def default_directory(plan: Plan) -> Path:
    return (
        pins.cache_dir() / "bind" / f"{Path(plan.site).name}-{plan.mode}-"
        f"{stamp.digest(plan.to_json(), length=10)}"
    )
