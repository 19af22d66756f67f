"""Bind model: find the host's MPICH-ABI MPI, its library closure, and a plan to inject it.

Discovery: an explicit prefix, a module environment (CRAY_MPICH_DIR, LD_LIBRARY_PATH), or
the MPI external of a site scope (site/<site>/packages.yaml). The closure follows DT_NEEDED
under the host loader's rules (climstack.loader). The plan binds only the directories that
hold closure files (system directories at a side path, so the image's own /usr stays), puts
one generated directory of links first in LD_LIBRARY_PATH (one link per library and per
SONAME alias the application asks for), and adds the site's extras (site/<site>/bind.yaml).

Modes: bind (host MPI), hybrid (the image's MPI; only the site's runtime extras), fabric
(the image's MPI with the host's libfabric and its closure).
"""

import argparse
import hashlib
import json
import os
import shlex
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from climstack import elf, loader, pins
from climstack.errors import ClimstackError

MODES = ("bind", "hybrid", "fabric")
RUNTIMES = ("apptainer", "charliecloud")
#: inside the container: the generated links, and where host system directories go
LINKS_DIR = "/opt/climstack/bind/lib"
HOST_SIDE = "/opt/climstack/host"
#: the MPICH ABI's libraries, and what else the same library is called on the host
ABI_NAMES = {
    "libmpi.so.12": ("libmpi.so.12", "libmpich.so.12"),
    "libmpifort.so.12": ("libmpifort.so.12", "libmpichfort.so.12"),
    "libmpicxx.so.12": ("libmpicxx.so.12", "libmpichcxx.so.12"),
}
#: other MPI ABIs, recognised to refuse them with the reason
FOREIGN_MPI = {"libmpi.so.40": "Open MPI (libmpi.so.40)", "libmpi_abi.so.1": "the MPI-5 ABI"}
LIB_SUBDIRS = ("lib-abi-mpich", "lib", "lib64", "lib/x86_64-linux-gnu")
#: host directories never bound at their own path: they would hide the image's
SYSTEM_TOPS = {"usr", "lib", "lib64", "lib32", "bin", "sbin", "etc"}


def site_dir(site: str) -> Path:
    path = Path(site) if "/" in site else pins.PROJECT_ROOT / "site" / site
    if not path.is_dir():
        raise ClimstackError(f"site scope {path} does not exist",
                             fix="name a folder of site/ (archer2, gaea, local) or give a path")
    return path


def site_config(site: str) -> dict:
    """site/<site>/bind.yaml (not a Spack section: Spack ignores the file)."""
    path = site_dir(site) / "bind.yaml"
    if not path.is_file():
        raise ClimstackError(f"{path} is missing", fix="copy site/local/bind.yaml and adapt it")
    config = yaml.safe_load(path.read_text()) or {}
    if config.get("runtime", "apptainer") not in RUNTIMES:
        raise ClimstackError(f"{path}: runtime must be one of {', '.join(RUNTIMES)}")
    return config


def site_external_prefix(site: str, packages: tuple[str, ...]) -> str | None:
    """Prefix of the first external of `packages` in the site's packages.yaml."""
    path = site_dir(site) / "packages.yaml"
    if not path.is_file():
        return None
    entries = (yaml.safe_load(path.read_text()) or {}).get("packages", {})
    for name in packages:
        for external in (entries.get(name) or {}).get("externals", []):
            if external.get("prefix"):
                return external["prefix"]
    return None


#: the Cray PE externals whose libraries an MPI needs (what `module load` would add)
RUNTIME_EXTERNALS = ("cray-pmi", "libfabric", "xpmem")


def site_library_dirs(site: str) -> list[str]:
    """lib/ and lib64/ of the site's cray-pmi, libfabric and xpmem externals, so that the
    versions live in packages.yaml only."""
    prefixes = [site_external_prefix(site, (name,)) for name in RUNTIME_EXTERNALS]
    return [f"{prefix}/{lib}" for prefix in prefixes if prefix for lib in ("lib", "lib64")]


# --- discovery --------------------------------------------------------------------------

@dataclass
class HostMpi:
    """The host MPI's libraries (inside the host view) and where the claim came from."""
    libraries: dict[str, str]  # ABI name -> path of the host file that provides it
    source: str
    version: str = ""


def find_in_prefix(prefix: str, view: loader.View, source: str) -> HostMpi:
    tried = []
    for sub in LIB_SUBDIRS:
        libdir = f"{prefix.rstrip('/')}/{sub}"
        tried.append(libdir)
        if not view.is_dir(libdir):
            continue
        found = {}
        for abi, candidates in ABI_NAMES.items():
            for name in candidates:
                if view.resolve(f"{libdir}/{name}"):
                    found[abi] = f"{libdir}/{name}"
                    break
        if "libmpi.so.12" in found:
            mpi = HostMpi(found, source)
            host_file = view.resolve(found["libmpi.so.12"])[1]
            if not os.access(host_file, os.R_OK):
                raise ClimstackError(f"{host_file} is not readable",
                                     fix="run as a user who can read the MPI library")
            version = elf.mpich_version(host_file)
            mpi.version = str(version) if version else "unknown MPICH-ABI library"
            return mpi
        for name, what in FOREIGN_MPI.items():
            if view.resolve(f"{libdir}/{name}"):
                raise ClimstackError(
                    f"{libdir}/{name}: the host MPI at {prefix} ({source}) is {what}, not the "
                    "MPICH ABI (libmpi.so.12): an application built against MPICH cannot run "
                    "on it",
                    fix="point at an MPICH-ABI MPI: Cray MPICH, MPICH, Intel MPI, MVAPICH")
    raise ClimstackError(f"no libmpi.so.12 or libmpich.so.12 under {prefix} ({source}); "
                         f"looked in {', '.join(tried)}",
                         fix="give the MPI's installation prefix (the one holding lib/)")


def discover(view: loader.View, prefix: str | None = None, site: str | None = None,
             environ: dict | None = None) -> HostMpi:
    """The host MPI: an explicit prefix, else the module environment, else the site scope."""
    if prefix:
        return find_in_prefix(prefix, view, "--prefix")
    environ = os.environ if environ is None else environ
    for variable in ("CRAY_MPICH_DIR", "CRAY_MPICH_PREFIX", "MPICH_DIR", "I_MPI_ROOT"):
        if environ.get(variable):
            return find_in_prefix(environ[variable], view, f"${variable}")
    for directory in filter(None, environ.get("LD_LIBRARY_PATH", "").split(":")):
        if any(view.resolve(f"{directory}/{n}") for n in ABI_NAMES["libmpi.so.12"]):
            return find_in_prefix(str(PurePosixPath(directory).parent), view, "LD_LIBRARY_PATH")
    if site:
        external = site_external_prefix(site, ("cray-mpich", "mpich", "intel-oneapi-mpi"))
        if external:
            return find_in_prefix(external, view, f"site/{site}/packages.yaml")
    raise ClimstackError("no host MPI found: no --prefix, no CRAY_MPICH_DIR or MPI in "
                         "LD_LIBRARY_PATH, no MPI external in the site scope",
                         fix="`module load cray-mpich`, or pass --prefix /path/to/mpi")


def find_fabric(view: loader.View, site: str | None, prefix: str | None) -> str:
    """Path of the host's libfabric.so.1 (fabric mode)."""
    prefix = prefix or (site and site_external_prefix(site, ("libfabric",)))
    if not prefix:
        raise ClimstackError("fabric mode needs the host's libfabric",
                             fix="add a libfabric external to the site scope or pass "
                             "--fabric-prefix")
    for sub in ("lib64", "lib", ""):
        candidate = f"{prefix.rstrip('/')}/{sub}/libfabric.so.1".replace("//", "/")
        if view.resolve(candidate):
            return candidate
    raise ClimstackError(f"no libfabric.so.1 under {prefix}",
                         fix="give the libfabric prefix holding lib64/ or lib/")


# --- the plan ---------------------------------------------------------------------------

@dataclass
class Plan:
    site: str
    mode: str
    runtime: str
    mpi: dict = field(default_factory=dict)  # source, version, libraries
    binds: list[list[str]] = field(default_factory=list)  # [host path, container path]
    links: dict[str, str] = field(default_factory=dict)  # name in LINKS_DIR -> container path
    library_path: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)  # present; reached via the host's /dev
    absent: list[str] = field(default_factory=list)  # site extras missing on this host
    closure: list[dict] = field(default_factory=list)  # name, host path, rule, needed by
    directory: str = ""  # host directory holding plan.json and lib/ (the links)

    def mount_points(self) -> list[str]:
        return sorted({dst for _, dst in self.binds})

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def load(cls, path: Path) -> "Plan":
        file = path / "plan.json" if path.is_dir() else path
        if not file.is_file():
            raise ClimstackError(f"{file}: no bind plan there", fix="run `climstack bind` first")
        return cls(**json.loads(file.read_text()))


def container_path(host_dir: PurePosixPath) -> str:
    """Where a host directory is bound: its own path, or under HOST_SIDE for system dirs."""
    if host_dir.parts[1:2] and host_dir.parts[1] in SYSTEM_TOPS:
        return f"{HOST_SIDE}{host_dir}"
    return str(host_dir)


def _outermost(dirs: set[PurePosixPath]) -> list[PurePosixPath]:
    return sorted(d for d in dirs if not any(p in dirs for p in d.parents))


def make_plan(site: str, mode: str = "bind", view: loader.View | None = None,
              prefix: str | None = None, fabric_prefix: str | None = None,
              environ: dict | None = None, runtime: str | None = None) -> Plan:
    if mode not in MODES:
        raise ClimstackError(f"unknown mode {mode}", fix=f"one of {', '.join(MODES)}")
    view = view or loader.View()
    config = site_config(site)
    environ = os.environ if environ is None else environ
    plan = Plan(site=site, mode=mode, runtime=runtime or config.get("runtime", "apptainer"))
    search = [*filter(None, environ.get("LD_LIBRARY_PATH", "").split(":")),
              *config.get("library_path", []), *site_library_dirs(site)]

    roots: dict[str, str] = {}  # name the application asks for -> host path (in view)
    if mode == "bind":
        mpi = discover(view, prefix, site, environ)
        plan.mpi = {"source": mpi.source, "version": mpi.version, "libraries": mpi.libraries}
        roots.update(mpi.libraries)
    elif mode == "fabric":
        roots["libfabric.so.1"] = find_fabric(view, site, fabric_prefix)
    for name in config.get(f"{mode}_libraries", []):  # site extras resolved like DT_NEEDED
        roots.setdefault(name, name)

    # in the container the links directory comes first, so the roots' own directories are
    # searched first here (Intel's libmpifort.so.12 finds libmpi.so.12 only that way)
    search = [*dict.fromkeys(str(PurePosixPath(p).parent) for p in roots.values() if "/" in p),
              *search]
    files: dict[str, loader.Library] = {}  # link name -> library
    missing: dict[str, list[str]] = {}
    for name, path in roots.items():
        if "/" not in path:
            hit = next((f"{d}/{path}" for d in search if view.resolve(f"{d}/{path}")), None)
            if not hit:
                missing.setdefault(path, []).append(f"site/{site}/bind.yaml")
                continue
            path = hit
        result = loader.closure(path, view, search)
        for needed, who in result.missing.items():
            missing.setdefault(needed, []).extend(who)
        files[name] = result.root
        for library in result.libraries.values():
            files.setdefault(library.name, library)
    if missing:
        loader.Closure(root=loader.Library(f"the {mode} plan", PurePosixPath(site), None, None),
                       missing=missing).check()

    dirs = {PurePosixPath(lib.real).parent for lib in files.values()}
    for directory in _outermost(dirs):
        plan.binds.append([str(view.resolve(str(directory))[1]), container_path(directory)])

    def inside(real: PurePosixPath) -> str:
        top = next(d for d in _outermost(dirs) if d == real.parent or d in real.parents)
        return container_path(top) + str(real)[len(str(top)):]

    for abi, names in ABI_NAMES.items():  # every spelling of a provided ABI library, so
        if abi in files:                    # Debian-built programs (libmpich.so.12) run too
            for name in names:
                files.setdefault(name, files[abi])
    for name, library in sorted(files.items()):
        plan.links[name] = inside(library.real)
        plan.closure.append({"name": name, "host": str(library.real), "rule": library.how,
                             "needed_by": sorted(set(library.needed_by))})
    # plugin dirs the libraries dlopen relative to themselves ($ORIGIN/ucx, libfabric/):
    # all beside a non-system library, only those the site lists beside a system one
    plugin_dirs = {PurePosixPath(p) for p in config.get("plugin_dirs", [])}
    for directory in _outermost(dirs):
        host = view.resolve(str(directory))[1]
        for sub in sorted(p for p in host.iterdir() if p.is_dir() and not p.is_symlink()):
            wanted = directory / sub.name in plugin_dirs or container_path(directory) == str(
                directory)
            if wanted and sub.name not in plan.links and any(sub.glob("*.so*")):
                plan.links[sub.name] = f"{container_path(directory)}/{sub.name}"
    if plan.links:
        plan.library_path = [LINKS_DIR]

    for extra in config.get("binds", []):
        if mode not in extra.get("modes", MODES):
            continue
        source, target = extra["path"], extra.get("target", extra["path"])
        found = view.resolve(source)
        if not found:
            plan.absent.append(f"{source} ({extra.get('why', 'site extra')})")
            continue
        plan.binds.append([str(found[1]), target])
    for device in config.get("devices", []):  # both runtimes share the host's /dev
        (plan.devices if view.resolve(device) else plan.absent).append(device)
    plan.env.update({k: str(v) for k, v in (config.get("env") or {}).items()})
    plan.env.update({k: str(v) for k, v in (config.get(f"{mode}_env") or {}).items()})
    return plan


def write(plan: Plan, directory: Path) -> Plan:
    """Create the plan directory: lib/ with the links, and plan.json. Binds it at LINKS_DIR."""
    directory = directory.resolve()
    links = directory / "lib"
    if links.exists():
        shutil.rmtree(links)
    links.mkdir(parents=True)
    for name, target in plan.links.items():
        (links / name).symlink_to(target)
    plan.directory = str(directory)
    if plan.links:
        plan.binds = [b for b in plan.binds if b[1] != LINKS_DIR] + [[str(links), LINKS_DIR]]
    (directory / "plan.json").write_text(plan.to_json() + "\n")
    return plan


def default_directory(plan: Plan) -> Path:
    digest = hashlib.sha256(plan.to_json().encode()).hexdigest()[:10]
    return pins.cache_dir() / "bind" / f"{Path(plan.site).name}-{plan.mode}-{digest}"


def prepare_image(plan: Plan, image: Path) -> list[str]:
    """Create the bind mount points in a Charliecloud image directory (ch-run cannot)."""
    made = []
    for target in plan.mount_points():
        point = image / target.lstrip("/")
        source = next(src for src, dst in plan.binds if dst == target)
        if not os.path.lexists(point):
            if Path(source).is_dir():
                point.mkdir(parents=True, exist_ok=True)
            else:
                point.parent.mkdir(parents=True, exist_ok=True)
                point.touch()
            made.append(target)
    return made


def check_mount_points(plan: Plan, image: Path) -> None:
    """ch-run cannot create mount points in a read-only image directory: say which."""
    if plan.runtime != "charliecloud" or not image.is_dir():
        return
    absent = [t for t in plan.mount_points() if not os.path.lexists(image / t.lstrip("/"))]
    if absent:
        raise ClimstackError(f"{image} lacks the mount points {', '.join(absent)}",
                             fix=f"climstack bind {plan.site} --prepare-image {image} "
                             "(creates empty directories, as ch-fromhost would)")


# --- renderers --------------------------------------------------------------------------

def _check_bind_paths(plan: Plan, separators: str) -> None:
    for pair in plan.binds:
        for path in pair:
            if any(s in path for s in separators):
                raise ClimstackError(f"bind path {path!r} contains one of {separators!r}, "
                                     "which the runtime's bind syntax cannot express",
                                     fix="move or link it to a path without them")


def runtime_env(plan: Plan) -> dict[str, str]:
    env = dict(plan.env)
    if plan.library_path:
        env["LD_LIBRARY_PATH"] = ":".join(plan.library_path)
    return env


def render_env(plan: Plan) -> str:
    """Shell exports for Apptainer (and its SINGULARITY* spellings)."""
    _check_bind_paths(plan, ",:")
    binds = ",".join(f"{src}:{dst}" for src, dst in plan.binds)
    lines = [f"# climstack bind plan: site {plan.site}, mode {plan.mode}"]
    for prefix in ("APPTAINER", "SINGULARITY"):
        lines.append(f"export {prefix}_BIND={shlex.quote(binds)}")
        for key, value in runtime_env(plan).items():
            lines.append(f"export {prefix}ENV_{key}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


def apptainer_args(plan: Plan, image: str, command: list[str]) -> list[str]:
    _check_bind_paths(plan, ",:")
    args = ["apptainer", "exec"]
    for src, dst in plan.binds:
        args += ["-B", f"{src}:{dst}"]
    for key, value in runtime_env(plan).items():
        args += ["--env", f"{key}={value}"]
    return [*args, image, *command]


def charliecloud_args(plan: Plan, image: str, command: list[str], join: bool = False) -> list[str]:
    _check_bind_paths(plan, ":")
    args = ["ch-run"] + (["--join"] if join else [])
    for src, dst in plan.binds:
        args.append(f"--bind={src}:{dst}")
    for key, value in runtime_env(plan).items():
        args.append(f"--set-env={key}={value}")
    return [*args, image, "--", *command]


def runtime_args(plan: Plan, image: str, command: list[str]) -> list[str]:
    if plan.runtime == "charliecloud":
        return charliecloud_args(plan, image, command)
    return apptainer_args(plan, image, command)


def register(commands) -> None:
    def run(args):
        view = loader.View(args.root)
        plan = make_plan(args.site, args.mode, view, args.prefix, args.fabric_prefix,
                         runtime=args.runtime)
        plan = write(plan, args.out or default_directory(plan))
        for absent in plan.absent:
            print(f"climstack bind: warning: site extra absent on this host: {absent}",
                  file=sys.stderr)
        if args.prepare_image:
            made = prepare_image(plan, args.prepare_image)
            print(f"# created {len(made)} mount points in {args.prepare_image}", file=sys.stderr)
        if args.format == "json":
            print(plan.to_json())
        elif args.format == "env":
            print(render_env(plan), end="")
        else:
            if not args.image:
                raise ClimstackError(f"--format {args.format} needs --image",
                                     fix="pass --image IMAGE (a .sif or an image directory)")
            argv = runtime_args(plan, str(args.image), args.program or ["true"])
            if args.format == "args":
                print(shlex.join(argv))
            else:
                check_mount_points(plan, args.image)
                os.environ["USER"] = os.environ.get("USER") or "root"  # ch-run needs it
                os.execvp(argv[0], argv)

    sub = commands.add_parser("bind", help="discover the host MPI and its closure; write and "
                              "render a bind plan for Apptainer or Charliecloud")
    sub.add_argument("site", help="site scope (archer2, gaea, local) or its path")
    sub.add_argument("--mode", choices=MODES, default="bind")
    sub.add_argument("--prefix", help="host MPI prefix (default: module env, then site scope)")
    sub.add_argument("--fabric-prefix", help="host libfabric prefix (fabric mode)")
    sub.add_argument("--runtime", choices=RUNTIMES, help="default: the site's bind.yaml")
    sub.add_argument("--root", type=Path, default=Path("/"),
                     help="host root to discover under (a copy of a host tree)")
    sub.add_argument("--out", type=Path, help="plan directory (default: user cache/bind/...); "
                     "on a Cray, somewhere compute nodes see, e.g. under /work")
    sub.add_argument("--format", choices=("env", "json", "args", "exec"), default="env")
    sub.add_argument("--image", type=Path, help="image (.sif or directory) for args/exec")
    sub.add_argument("--prepare-image", type=Path, metavar="IMAGE_DIR",
                     help="create the mount points in a Charliecloud image directory")
    sub.add_argument("--command", dest="program", nargs=argparse.REMAINDER, default=[],
                     help="(last) the command to run in the image, with its arguments")
    sub.set_defaults(run=run)
