"""The bind plan: which host directories to bind where, the links directory that leads
LD_LIBRARY_PATH (one link per library and per SONAME alias the application asks for), the
site's extras (bind.yaml), and the plan directory on disk (plan.json + lib/).

Modes: bind (host MPI), hybrid (the image's MPI; only the site's runtime extras), fabric
(the image's MPI with the host's libfabric and its closure).
"""

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from climstack import inputs, pins
from climstack.bind import discover, families, loader, plugins, remedy
from climstack.common import stamp
from climstack.errors import ClimstackError
from climstack.inputs import sites

MODES = ("bind", "hybrid", "fabric")
#: inside the container: the generated links, and where host system directories go
LINKS_DIR = "/opt/climstack/bind/lib"
HOST_SIDE = "/opt/climstack/host"
#: host directories never bound at their own path: they would hide the image's
SYSTEM_TOPS = {"usr", "lib", "lib64", "lib32", "bin", "sbin", "etc"}


#: the plan.json format this climstack writes and reads
FORMAT = 1


def _described(text: str, **schema) -> dict:
    return {"schema": {"description": text, **schema}}


@dataclass
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
    providers: list[str] = field(default_factory=list)  # expected (bind.yaml `providers:`)
    families: dict[str, dict] = field(default_factory=dict)  # netcdf, hdf5: run.families
    flavour: str | None = None  # PrgEnv flavour of the host builds (gnu, cray, aocc)
    rpath_remedy: str = field(  # how an executable's DT_RPATH is overridden (bind.remedy)
        default="", metadata={"schema": {"enum": ["", *remedy.REMEDIES]}}
    )
    directory: str = ""  # host directory holding plan.json and lib/ (the links)

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


def container_path(host_dir: PurePosixPath) -> str:
    """Where a host directory is bound: its own path, or under HOST_SIDE for system dirs."""
    if host_dir.parts[1:2] and host_dir.parts[1] in SYSTEM_TOPS:
        return f"{HOST_SIDE}{host_dir}"
    return str(host_dir)


def _outermost(dirs: set[PurePosixPath]) -> list[PurePosixPath]:
    return sorted(d for d in dirs if not any(p in dirs for p in d.parents))


def make_plan(
    site: "str | sites.Site",
    mode: str = "bind",
    view: loader.View | None = None,
    prefix: str | None = None,
    fabric_prefix: str | None = None,
    environ: dict | None = None,
    runtime: str | None = None,
    with_families: dict[str, str | None] | None = None,
    flavour: str | None = None,
    rpath_remedy: str | None = None,
) -> Plan:
    """The plan for `mode`; `with_families` ({name: prefix or None}) adds host library
    families to bind.yaml's `families:`, built with the PrgEnv `flavour`; `rpath_remedy`:
    how executables with a DT_RPATH are run (bind.remedy)."""
    if mode not in MODES:
        raise ClimstackError(f"unknown mode {mode}", fix=f"one of {', '.join(MODES)}")
    remedy.check_name(rpath_remedy)
    if rpath_remedy and mode != "bind":
        raise ClimstackError(
            f"--rpath-remedy {rpath_remedy} is for bind mode: in {mode} mode the image's "
            "own MPI runs, which its RPATH finds anyway",
            fix="drop --rpath-remedy, or use --mode bind",
        )
    scope = sites.get(site)
    view = view or loader.View()
    config = scope.bind
    environ = os.environ if environ is None else environ
    plan = Plan(
        site=site if isinstance(site, str) else str(scope.path),
        mode=mode,
        runtime=runtime or config["runtime"],
        rpath_remedy=rpath_remedy or "",
    )
    plan.flavour = families.requested(flavour, config, environ)
    roots, rules = _roots(plan, scope, view, prefix, fabric_prefix, environ, with_families)
    search = _search_path(roots, scope, environ)
    files = _closures(plan, scope, view, roots, search)
    lib_dirs = _outermost({PurePosixPath(lib.real).parent for lib in files.values()})
    _close_plugins(plan, files, lib_dirs, config, environ, view, search)
    bound = _bind_directories(plan, files, view)
    _link_libraries(plan, files, bound, rules, config)
    _link_plugin_dirs(plan, lib_dirs, config, view)
    _link_plugins_beside(plan, files, bound, view)
    if plan.links:
        plan.library_path = [LINKS_DIR]
    _add_site_extras(plan, config, view)
    return plan


def _roots(plan, scope, view, prefix, fabric_prefix, environ, with_families):
    """(name the application asks for -> host path in `view`, or a bare name the search
    path resolves; root -> why it is bound, when not for MPI) of the plan's mode."""
    config = scope.bind
    roots: dict[str, str] = {}
    rules: dict[str, str] = {}
    mpi_prefix = ""
    if plan.mode == "bind":
        mpi = discover.discover(view, prefix, scope, environ, plan.flavour)
        plan.mpi = {"source": mpi.source, "version": mpi.version, "libraries": mpi.libraries}
        roots.update(mpi.libraries)
        mpi_prefix = mpi.prefix
    elif plan.mode == "fabric":
        roots["libfabric.so.1"] = discover.find_fabric(view, scope, fabric_prefix)
    chosen = {**dict.fromkeys(config["families"]), **(with_families or {})}
    for name, family_prefix in chosen.items():
        host = families.find(name, view, scope, environ, plan.flavour, family_prefix)
        plan.families[name] = host.to_dict()
        for link, path in host.libraries.items():
            roots.setdefault(link, path)
            rules.setdefault(link, f"{name} family")
        if warning := families.mismatch_warning(host, mpi_prefix):
            plan.warnings.append(warning)
    for name in config[f"{plan.mode}_libraries"]:  # site extras resolved like DT_NEEDED
        roots.setdefault(name, name)
    return roots, rules


def _search_path(roots: dict[str, str], scope, environ) -> list[str]:
    """Where bare names and the closures' needs are looked for: the roots' own directories
    first (in the container the links directory comes first: Intel's libmpifort.so.12
    finds libmpi.so.12 only that way), then LD_LIBRARY_PATH, bind.yaml's, the scope's."""
    return [
        *dict.fromkeys(str(PurePosixPath(p).parent) for p in roots.values() if "/" in p),
        *filter(None, environ.get("LD_LIBRARY_PATH", "").split(":")),
        *scope.bind["library_path"],
        *scope.runtime_library_dirs(),
    ]


def _closures(plan, scope, view, roots, search) -> dict[str, loader.Library]:
    """link name -> library, over the roots and their closures; a missing one refused."""
    files: dict[str, loader.Library] = {}
    missing: dict[str, list[str]] = {}
    for name, path in roots.items():
        if "/" not in path:
            hit = next((f"{d}/{path}" for d in search if view.resolve(f"{d}/{path}")), None)
            if not hit:
                missing.setdefault(path, []).append(f"{scope.path}/bind.yaml")
                continue
            path = hit
        # its own directory first: a family's libraries need their siblings
        result = loader.closure(path, view, [str(PurePosixPath(path).parent), *search])
        for needed, who in result.missing.items():
            missing.setdefault(needed, []).extend(who)
        files.setdefault(name, result.root)  # one the closure found keeps who needs it
        for library in result.libraries.values():  # a site extra another library needs
            known = files.get(library.name)  # is listed with who needs it; a root given
            if known is None or (  # by path (MPI, a family) stays the one linked
                library.needed_by
                and not known.needed_by
                and "/" not in roots.get(library.name, "")
            ):
                files[library.name] = library
    if missing:
        loader.Closure(
            root=loader.Library(f"the {plan.mode} plan", PurePosixPath(scope.name), None, None),
            missing=missing,
        ).check()
    return files


def _bind_directories(plan, files, view) -> list[PurePosixPath]:
    """Bind the outermost directories of the libraries and plugins; those directories."""
    dirs = {PurePosixPath(lib.real).parent for lib in files.values()}
    dirs |= {PurePosixPath(view.resolve(p["path"])[0]).parent for p in plan.plugins}
    bound = _outermost(dirs)
    for directory in bound:
        plan.binds.append([str(view.resolve(str(directory))[1]), container_path(directory)])
    return bound


def _inside(bound: list[PurePosixPath], real: PurePosixPath) -> str:
    """The container path of host file `real`, under the bound directory holding it."""
    top = next(d for d in bound if d == real.parent or d in real.parents)
    return container_path(top) + str(real)[len(str(top)) :]


def _link_libraries(plan, files, bound, rules, config) -> None:
    """A link per library, and per spelling of a provided ABI library (Debian-built
    programs run too), with why each is in the plan."""
    for abi, names in discover.ABI_NAMES.items():
        if abi in files:
            for name in names:
                files.setdefault(name, files[abi])
    for name, library in sorted(files.items()):
        plan.links[name] = _inside(bound, library.real)
        plan.closure.append(
            {
                "name": name,
                "host": str(library.real),
                "rule": rules.get(name)
                or library.how
                or ("bind.yaml" if name in config[f"{plan.mode}_libraries"] else "MPI"),
                "needed_by": sorted(set(library.needed_by)),
            }
        )


def _link_plugin_dirs(plan, lib_dirs, config, view) -> None:
    """Plugin dirs the libraries dlopen relative to themselves ($ORIGIN/ucx, libfabric/):
    all beside a non-system library, only those the site lists beside a system one."""
    plugin_dirs = {PurePosixPath(p) for p in config["plugin_dirs"]}
    for directory in lib_dirs:
        host = view.resolve(str(directory))[1]
        for sub in sorted(p for p in host.iterdir() if p.is_dir() and not p.is_symlink()):
            wanted = directory / sub.name in plugin_dirs or container_path(directory) == str(
                directory
            )
            if wanted and sub.name not in plan.links and any(sub.glob("*.so*")):
                plan.links[sub.name] = f"{container_path(directory)}/{sub.name}"


def _link_plugins_beside(plan, files, bound, view) -> None:
    """...and at any depth: $ORIGIN (and dladdr) of a library loaded through a link is the
    links directory, so what libfabric.so.1 loads from $ORIGIN/libfabric/ (MPICH) or from
    beside itself (Intel MPI) must be found there too."""
    beside = {library.real.parent for library in files.values()}
    for entry in plan.plugins:
        real = view.resolve(entry["path"])[0]
        if real.parent in beside:
            plan.links.setdefault(real.name, _inside(bound, real))
        elif real.parent.parent in beside and real.parent.name not in plan.links:
            plan.links[real.parent.name] = _inside(bound, real).rsplit("/", 1)[0]


def _add_site_extras(plan, config, view) -> None:
    """bind.yaml's binds and devices (those absent on this host listed), and its env."""
    for extra in config["binds"]:
        if plan.mode not in extra.get("modes", MODES):
            continue
        source, target = extra["path"], extra.get("target", extra["path"])
        found = view.resolve(source)
        if not found:
            plan.absent.append(f"{source} ({extra.get('why', 'site extra')})")
            continue
        plan.binds.append([str(found[1]), target])
    for device in config["devices"]:  # both runtimes share the host's /dev
        (plan.devices if view.resolve(device) else plan.absent).append(device)
    plan.env.update({k: str(v) for k, v in config["env"].items()})
    plan.separate_env.update({k: str(v) for k, v in config["separate_env"].items()})
    plan.env.update({k: str(v) for k, v in config[f"{plan.mode}_env"].items()})


def _close_plugins(plan, files, lib_dirs, config, environ, view, search) -> None:
    """Close over the network plugins visible beside the plan's libraries (run.plugins):
    their dependencies join `files` as "needed by plugin X"."""
    own = [d for d in lib_dirs if container_path(d) == str(d)]  # not system directories
    listed = [d for d in config["plugin_dirs"] if PurePosixPath(d).parent in lib_dirs]
    found, needed = plugins.close(
        plugins.candidates(own, listed, environ, view), view, search, config["providers"]
    )
    plan.plugins = [p.to_dict() for p in found]
    plan.providers = list(config["providers"])
    plan.warnings += plugins.warnings(found)
    plugin_files = {PurePosixPath(view.resolve(p.path)[0]) for p in found}
    for name, library in needed.items():  # not a sibling plugin (libuct_ib for ib_mlx5)
        if name not in files and library.real not in plugin_files:
            files[name] = library


def write(plan: Plan, directory: Path) -> Plan:
    """Write lib/ (the links) and plan.json into `directory`; binds lib/ at LINKS_DIR."""
    directory = directory.resolve()
    plan.directory = str(directory)
    ours = {LINKS_DIR: directory / "lib", remedy.REMEDY_DIR: directory / "remedy"}
    wanted = [LINKS_DIR] if plan.links else []
    wanted += [remedy.REMEDY_DIR] if plan.rpath_remedy == "runpath" else []
    plan.binds = [b for b in plan.binds if b[1] not in ours] + [
        [str(ours[target]), target] for target in wanted
    ]

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
