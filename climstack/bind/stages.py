"""The stages that make a bind plan, each a function of one frozen `Request` and of what
the stages before it returned, returning its own frozen part; `plan.make_plan` runs them
in order and assembles the plan. Nothing here mutates what it is given.

roots -> search path -> closures (+ plugins) -> bound directories -> links -> site extras
(+ the data an Open MPI host reads beside its libraries)
"""

import os
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Mapping

from climstack.bind import abi_wrapper, discover, families, loader, network_plugins
from climstack.inputs import sites

MODES = ("bind", "hybrid", "fabric")
#: inside the container: the generated links, and where host system directories go
LINKS_DIR = "/opt/climstack/bind/lib"
HOST_SIDE = "/opt/climstack/host"
#: host directories never bound at their own path: they would hide the image's
SYSTEM_TOPS = {"usr", "lib", "lib64", "lib32", "bin", "sbin", "etc"}
#: what Open MPI reads at run time under its prefix beside its libraries: the help texts
#: (its own, PMIx's, PRRTE's) and the site's MCA parameter files
OPEN_MPI_DATA = ("share/openmpi", "share/pmix", "share/prte", "etc")
OPEN_MPI_LIBRARY = "libmpi.so.40"


@dataclass(frozen=True)
class Request:
    """Everything a plan is made from: the site scope, the mode, the host as a view, the
    environment, the PrgEnv flavour, and the prefixes and families asked for."""

    site: sites.Site
    mode: str
    view: loader.View
    environ: Mapping[str, str]
    flavour: str | None = None
    prefix: str | None = None
    fabric_prefix: str | None = None
    with_families: tuple[tuple[str, str | None], ...] = ()
    abi: str = "mpich"  # the image's MPI ABI (discover.ABIS): which host library is bound
    wrapper: str | None = None  # mpi_abi_wrapper's prefix (--wrapper; bind.abi_wrapper)

    @classmethod
    def of(cls, site: sites.Site, mode: str, view=None, environ=None, flavour=None, **rest):
        """A request with the defaults filled: this host, this environment, the flavour
        site.yaml or $PE_ENV names."""
        environ = MappingProxyType(dict(os.environ if environ is None else environ))
        flavour = families.requested(flavour, site.bind, environ)
        families_asked = tuple((rest.pop("with_families", None) or {}).items())
        view = view or loader.View()
        return cls(site, mode, view, environ, flavour, with_families=families_asked, **rest)

    @property
    def config(self) -> dict:
        return self.site.bind


@dataclass(frozen=True)
class Roots:
    """What the plan starts from: link name -> host path (or a bare name the search path
    resolves), why each non-MPI root is there, and what was found on the way."""

    paths: Mapping[str, str]
    rules: Mapping[str, str]
    mpi: Mapping = field(default_factory=dict)
    families: Mapping[str, dict] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # what the MPI's libraries need
    data: tuple[tuple[str, str], ...] = ()  # (host, container) dirs the MPI reads at run time


def roots(request: Request) -> Roots:
    """The host MPI (bind), libfabric (fabric), the families and site.yaml's libraries."""
    paths: dict[str, str] = {}
    rules: dict[str, str] = {}
    mpi, found, warnings, mpi_prefix, env, data = {}, {}, [], "", {}, ()
    if request.mode == "bind":
        host = discover.discover(
            request.view,
            request.prefix,
            request.site,
            request.environ,
            request.flavour,
            request.abi,
            request.wrapper,
        )
        mpi = {
            "abi": host.abi,
            "source": host.source,
            "version": host.version,
            "libraries": host.libraries,
        }
        if host.wrapper:  # libmpi_abi dlopens libmpiwrapper from its link
            mpi |= {"route": "wrapper", "wrapper": host.wrapper}
            env[abi_wrapper.VARIABLE] = f"{LINKS_DIR}/{abi_wrapper.BACK}"
        paths.update(host.libraries)
        mpi_prefix = host.prefix
        data = mpi_data(request.view, host)
    elif request.mode == "fabric":
        paths["libfabric.so.1"] = discover.find_fabric(
            request.view, request.site, request.fabric_prefix
        )
    chosen = {**dict.fromkeys(request.config["families"]), **dict(request.with_families)}
    for name, family_prefix in chosen.items():
        host = families.find(
            name, request.view, request.site, request.environ, request.flavour, family_prefix
        )
        found[name] = host.to_dict()
        for link, path in host.libraries.items():
            paths.setdefault(link, path)
            rules.setdefault(link, f"{name} family")
        if warning := families.mismatch_warning(host, mpi_prefix):
            warnings.append(warning)
    for name in request.config[f"{request.mode}_libraries"]:  # resolved like DT_NEEDED
        paths.setdefault(name, name)
    return Roots(paths, rules, mpi, found, tuple(warnings), env, data)


def mpi_data(view: loader.View, host: discover.HostMpi) -> tuple[tuple[str, str], ...]:
    """An Open MPI host's OPEN_MPI_DATA (direct or under mpi_abi_wrapper), bound at their own
    paths as its libraries are, so OPAL_PREFIX finds them in the container too: without
    them an error prints "Sorry! You were supposed to get help" instead of its message, and
    the site's etc/openmpi-mca-params.conf is not read. Not for a prefix in a system
    directory (Debian's /usr), whose data would hide the image's own."""
    prefix = PurePosixPath(host.prefix)
    if OPEN_MPI_LIBRARY not in host.libraries or container_path(prefix) != str(prefix):
        return ()
    found = {str(prefix / d): view.resolve(prefix / d) for d in OPEN_MPI_DATA}
    return tuple((str(hit[1]), path) for path, hit in found.items() if hit)


def search_path(request: Request, roots: Roots) -> tuple[str, ...]:
    """Where bare names and the closures' needs are looked for: the roots' own directories
    first (in the container the links directory comes first: Intel's libmpifort.so.12
    finds libmpi.so.12 only that way), then LD_LIBRARY_PATH, site.yaml's, the scope's."""
    return (
        *dict.fromkeys(str(PurePosixPath(p).parent) for p in roots.paths.values() if "/" in p),
        *filter(None, request.environ.get("LD_LIBRARY_PATH", "").split(":")),
        *request.config["library_path"],
        *request.site.runtime_library_dirs(),
    )


def closures(request: Request, roots: Roots, search) -> dict[str, loader.Library]:
    """link name -> library, over the roots and their closures; a missing one refused."""
    view = request.view
    files: dict[str, loader.Library] = {}
    missing: dict[str, list[str]] = {}
    for name, path in roots.paths.items():
        if "/" not in path:
            hit = next((f"{d}/{path}" for d in search if view.resolve(f"{d}/{path}")), None)
            if not hit:
                missing.setdefault(path, []).append(f"{request.site.path}/site.yaml")
                continue
            path = hit
        # its own directory first: a family's libraries need their siblings
        result = loader.closure(path, view, [str(PurePosixPath(path).parent), *search])
        for needed, who in result.missing.items():
            # a name the plan links itself is no gap: a host family built on MPICH asks for
            # libmpi.so.12, which Debian's MPICH provides as libmpich.so.12
            if needed not in roots.paths:
                missing.setdefault(needed, []).extend(who)
        files.setdefault(name, result.root)  # one the closure found keeps who needs it
        for library in result.libraries.values():  # a site extra another library needs
            known = files.get(library.name)  # is listed with who needs it; a root given
            if known is None or (  # by path (MPI, a family) stays the one linked
                library.needed_by
                and not known.needed_by
                and "/" not in roots.paths.get(library.name, "")
            ):
                files[library.name] = library
    if missing:
        where = PurePosixPath(request.site.name)
        loader.Closure(
            root=loader.Library(f"the {request.mode} plan", where, None, None), missing=missing
        ).check()
    return files


def outermost(dirs) -> list[PurePosixPath]:
    dirs = set(dirs)
    return sorted(d for d in dirs if not any(p in dirs for p in d.parents))


def library_dirs(files: Mapping[str, loader.Library]) -> list[PurePosixPath]:
    return outermost(PurePosixPath(lib.real).parent for lib in files.values())


def container_path(host_dir: PurePosixPath) -> str:
    """Where a host directory is bound: its own path, or under HOST_SIDE for system dirs."""
    if host_dir.parts[1:2] and host_dir.parts[1] in SYSTEM_TOPS:
        return f"{HOST_SIDE}{host_dir}"
    return str(host_dir)


@dataclass(frozen=True)
class Plugins:
    """The network plugins beside the plan's libraries (bind.network_plugins), and the libraries
    they need that the plan must add."""

    found: tuple[dict, ...]
    providers: tuple[str, ...]
    warnings: tuple[str, ...]
    needed: Mapping[str, loader.Library]


def close_plugins(request: Request, files, search) -> Plugins:
    """Close over the plugins visible beside the libraries: their dependencies, not a
    sibling plugin (libuct_ib for ib_mlx5), are "needed by plugin X"."""
    view, config, lib_dirs = request.view, request.config, library_dirs(files)
    own = [d for d in lib_dirs if container_path(d) == str(d)]  # not system directories
    listed = [d for d in config["plugin_dirs"] if PurePosixPath(d).parent in lib_dirs]
    found, needed = network_plugins.close(
        network_plugins.candidates(own, listed, request.environ, view),
        view,
        search,
        config["providers"],
    )
    plugin_files = {PurePosixPath(view.resolve(p.path)[0]) for p in found}
    extra = {
        name: library
        for name, library in needed.items()
        if name not in files and library.real not in plugin_files
    }
    return Plugins(
        tuple(p.to_dict() for p in found),
        tuple(config["providers"]),
        tuple(network_plugins.warnings(found)),
        extra,
    )


def bound_directories(request: Request, files, plugins_: Plugins) -> list[PurePosixPath]:
    """The outermost directories of the libraries and plugins: what is bound."""
    dirs = {PurePosixPath(lib.real).parent for lib in files.values()}
    dirs |= {PurePosixPath(request.view.resolve(p["path"])[0]).parent for p in plugins_.found}
    return outermost(dirs)


def binds(request: Request, bound: list[PurePosixPath]) -> list[list[str]]:
    """[host path, container path] of each bound directory."""
    return [[str(request.view.resolve(str(d))[1]), container_path(d)] for d in bound]


def inside(bound: list[PurePosixPath], real: PurePosixPath) -> str:
    """The container path of host file `real`, under the bound directory holding it."""
    top = next(d for d in bound if d == real.parent or d in real.parents)
    return container_path(top) + str(real)[len(str(top)) :]


def with_abi_spellings(files: Mapping[str, loader.Library]) -> dict[str, loader.Library]:
    """Each provided ABI library under every spelling (Debian-built programs run too)."""
    spelled = dict(files)
    for abi, names in discover.ABI_NAMES.items():
        if abi in files:
            for name in names:
                spelled.setdefault(name, files[abi])
    return spelled


def library_links(request: Request, files, bound, rules) -> tuple[dict, list[dict]]:
    """(a link per library, why each is in the plan)."""
    links, closure = {}, []
    extras = request.config[f"{request.mode}_libraries"]
    for name, library in sorted(files.items()):
        links[name] = inside(bound, library.real)
        rule = rules.get(name) or library.how or ("site.yaml" if name in extras else "MPI")
        closure.append(
            {
                "name": name,
                "host": str(library.real),
                "rule": rule,
                "needed_by": sorted(set(library.needed_by)),
            }
        )
    return links, closure


def plugin_dir_links(request: Request, files, taken) -> dict[str, str]:
    """Plugin dirs the libraries dlopen relative to themselves ($ORIGIN/ucx, libfabric/):
    all beside a non-system library, only those the site lists beside a system one. Where
    both have one of a name, the one beside the MPI's own libraries wins: a system UCX's
    modules loaded into the UCX an MPI carries (Open MPI's wheel) crash in their
    constructors."""
    plugin_dirs = {PurePosixPath(p) for p in request.config["plugin_dirs"]}
    links: dict[str, str] = {}
    beside = {PurePosixPath(lib.real).parent for lib in files.values()}
    for directory in sorted(beside, key=lambda d: (container_path(d) != str(d), str(d))):
        host = request.view.resolve(str(directory))[1]
        for sub in sorted(p for p in host.iterdir() if p.is_dir() and not p.is_symlink()):
            own = container_path(directory) == str(directory)
            wanted = directory / sub.name in plugin_dirs or own
            fresh = sub.name not in taken and sub.name not in links
            if wanted and fresh and any(sub.glob("*.so*")):
                links[sub.name] = f"{container_path(directory)}/{sub.name}"
    return links


def plugin_links(request: Request, files, bound, plugins_: Plugins, taken) -> dict[str, str]:
    """...and at any depth: $ORIGIN (and dladdr) of a library loaded through a link is the
    links directory, so what libfabric.so.1 loads from $ORIGIN/libfabric/ (MPICH) or from
    beside itself (Intel MPI) must be found there too."""
    beside = {library.real.parent for library in files.values()}
    links: dict[str, str] = {}
    for entry in plugins_.found:
        real = request.view.resolve(entry["path"])[0]
        if real.parent in beside:
            if real.name not in taken and real.name not in links:
                links[real.name] = inside(bound, real)
        elif real.parent.parent in beside and real.parent.name not in {*taken, *links}:
            links[real.parent.name] = inside(bound, real).rsplit("/", 1)[0]
    return links


@dataclass(frozen=True)
class Extras:
    """site.yaml's binds, devices, variables; what of them this host lacks."""

    binds: tuple[tuple[str, str], ...]
    devices: tuple[str, ...]
    absent: tuple[str, ...]
    env: Mapping[str, str]
    separate_env: Mapping[str, str]


def site_extras(request: Request) -> Extras:
    config, view, mode = request.config, request.view, request.mode
    binds_, devices, absent = [], [], []
    for extra in config["binds"]:
        if mode not in extra.get("modes", MODES):
            continue
        source, target = extra["path"], extra.get("target", extra["path"])
        found = view.resolve(source)
        if found:
            binds_.append((str(found[1]), target))
        else:
            absent.append(f"{source} ({extra.get('why', 'site extra')})")
    for device in config["devices"]:  # both runtimes share the host's /dev
        (devices if view.resolve(device) else absent).append(device)
    env = {k: str(v) for k, v in {**config["env"], **config[f"{mode}_env"]}.items()}
    separate = {k: str(v) for k, v in config["separate_env"].items()}
    return Extras(tuple(binds_), tuple(devices), tuple(absent), env, separate)
