"""A package of our repository built by Spack against each stand-in host MPI of this
machine, as a centre builds it against its Cray MPICH: the MPI a non-buildable external,
the sources through the offline routes, the compilers and build tools bin/setup detected
for the local site, RUNPATH as the images link. mpi_abi_wrapper (abi/wrapper_builds) and
MPICH's test suite (suite/suite_builds) are built this way.

One Spack environment per package in the user cache (`unify: false`: each root gets its
own MPI), concretized and installed once; a stamp of its inputs (the manifest, the recipe,
the externals and compilers, the pinned Spack) makes later calls read the prefixes it
recorded, running nothing.
"""

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from climstack import pins
from climstack.common import atomic, cache, progress, stamp, wheels
from climstack.errors import ClimstackError, ToolFailure
from climstack.inputs.sites import SITES_DIR
from climstack.spack import DEFAULT, Spack


@dataclass(frozen=True)
class HostMpi:
    """A host MPI of this machine a package is built against."""

    title: str
    spec: str  # the Spack external's package and version, the root's constraint
    library: str  # the MPI library (its DT_NEEDED in what is built)
    wheel: tuple[str, str] | None = None  # PyPI's (name, version); None: Debian's, at /usr

    def prefix(self) -> Path:
        return wheels.installed(*self.wheel) if self.wheel else DEBIAN_PREFIX


#: name -> the host MPI (PyPI wheels in the user cache, Debian's MPICH of site/local)
HOSTS = {
    "mpich-3.4.3": HostMpi(
        "MPICH 3.4.3 (Cray MPICH 8.1's base)", "mpich@3.4.3", "libmpi.so.12", ("mpich", "3.4.3")
    ),
    "mpich-4.1": HostMpi(
        "MPICH 4.1.3 (Cray MPICH 9's base is 4.1.2)",
        "mpich@4.1.3",
        "libmpi.so.12",
        ("mpich", "4.1.3"),
    ),
    "debian-mpich": HostMpi("Debian's MPICH 4.0.2", "mpich@4.0.2", "libmpich.so.12"),
    "openmpi-5": HostMpi(
        "Open MPI 5.0.11", "openmpi@5.0.11", "libmpi.so.40", ("openmpi", "5.0.11")
    ),
    # the MPI-5 standard ABI's compiler (mpicc_abi): what is built links libmpi_abi.so.1
    "mpich-5": HostMpi(
        "MPICH 5.0.2 (the MPI-5 standard ABI)",
        "mpich@5.0.2",
        "libmpi_abi.so.1",
        ("mpich", "5.0.2"),
    ),
}
DEBIAN_PREFIX = Path("/usr")
#: Debian's MPICH compiler wrapper: /usr/bin/mpicc, which recipes run, is an alternative
#: that libopenmpi-dev would take over
DEBIAN_MPICC = Path("/usr/bin/mpicc.mpich")


@dataclass(frozen=True)
class HostBuilds:
    """`root` (a spec without its MPI) built against each of `hosts` in `directory`."""

    root: str
    recipe: Path
    directory: Path  # the Spack environment, with its install tree (installs/)
    complete: Callable[[Path], bool]  # does an install prefix hold what the build makes?
    hosts: tuple[str, ...]
    fill_sources: Callable[[Path], None] = lambda env: None  # after concretizing
    packages: dict = field(default_factory=dict)  # more package settings of the manifest
    repos: dict = field(default_factory=dict)  # more package repositories (name -> path)

    def prefixes(self, names=None, spack: Spack = DEFAULT) -> dict[str, Path]:
        """name -> the install prefix built against that host MPI. All of `hosts` are
        built together, once per set of inputs."""
        names = list(names or self.hosts)
        unknown = [name for name in names if name not in self.hosts]
        if unknown:
            raise ClimstackError(
                f"no host MPI {', '.join(unknown)} to build {self.root} against",
                fix=f"name one of {', '.join(self.hosts)}",
            )
        manifest = self.manifest()
        # the manifest names this checkout's repo/ and site/offline: keyed by their contents,
        # not by where the checkout is (CI's fresh clone reuses the builds)
        text = yaml.safe_dump(manifest, sort_keys=True)
        key = stamp.digest(
            text.replace(str(pins.PROJECT_ROOT), "<project>"),
            SITES_DIR / "offline",
            self.recipe,
            *map(Path, self.repos.values()),
            _local_externals() / "packages.yaml",
            pins.SPACK.commit,
            pins.SPACK_PACKAGES.commit,
        )
        entry = cache.Entry(self.directory / "prefixes.json", key)

        def fill(work: Path):
            found = self._build(manifest, spack)
            atomic.write_text(work, json.dumps({k: str(v) for k, v in found.items()}, indent=1))

        built = entry.build(fill, force=entry.current() and not self._all_there(entry.path))
        found = _read(built)
        return {name: found[name] for name in names}

    def _all_there(self, recorded: Path) -> bool:
        """Is every host's install still there (nobody removed the install tree)?"""
        found = _read(recorded)
        return set(found) == set(self.hosts) and all(map(self.complete, found.values()))

    def manifest(self) -> dict:
        """The environment: one root per host MPI, each MPI a non-buildable external."""
        hosts = [HOSTS[name] for name in self.hosts]
        externals: dict[str, list] = {}
        for host in hosts:
            package = host.spec.split("@")[0]
            if host.wheel:
                external = {"spec": host.spec, "prefix": str(host.prefix())}
            else:
                external = _debian_mpich()
            externals.setdefault(package, []).append(external)
        site_packages = yaml.safe_load((SITES_DIR / "local" / "packages.yaml").read_text())
        packages = {
            name: {"externals": found, "buildable": False} for name, found in externals.items()
        }
        # the build tools: Debian's python (site/local's external), cmake and gmake of the
        # local externals scope; never built here
        packages["python"] = {**site_packages["packages"]["python"], "buildable": False}
        packages |= {name: {"buildable": False} for name in ("cmake", "gmake")}
        packages |= {language: {"require": ["gcc"]} for language in ("c", "cxx")}
        packages |= self.packages
        return {
            "spack": {
                "include": [str(_local_externals()), str(SITES_DIR / "offline")],
                "repos": {"climstack": str(pins.PROJECT_ROOT / "repo"), **self.repos},
                "specs": [f"{self.root} ^{host.spec.replace('@', '@=')}" for host in hosts],
                "packages": packages,
                "concretizer": {"unify": False, "reuse": False, "static_analysis": True},
                "config": {
                    "install_tree": {"root": str(self.directory / "installs")},
                    # RUNPATH, as the images link: a launcher's LD_LIBRARY_PATH wins over it
                    "shared_linking": {"type": "runpath", "bind": False},
                },
                "view": False,
            }
        }

    def _build(self, manifest: dict, spack: Spack) -> dict[str, Path]:
        """Concretize and install the environment; name -> prefix."""
        env = self.directory
        atomic.write_text(env / "spack.yaml", yaml.safe_dump(manifest, sort_keys=False))
        what = f"building {self.root} against {len(self.hosts)} host MPIs with Spack (once)"
        fix = (
            f"read the error above (a build's log is named in it); the environment is {env}, "
            f"`bin/spack -e {env} install` repeats the build"
        )
        with progress.step(what):
            try:
                spack.run("concretize", "--fresh", "--force", env=env, timeout=1200)
                self.fill_sources(env)
                # the installs of earlier inputs go: a changed setting (RUNPATH) keeps hashes
                shutil.rmtree(env / "installs", ignore_errors=True)
                spack.stream("install", "-j", str(os.cpu_count() or 1), env=env, timeout=3600)
            except ToolFailure as err:
                raise ToolFailure(err.message, fix=fix) from err
        lock = json.loads((env / "spack.lock").read_text())
        listed = spack.run("find", "--format", "{hash} {prefix}", env=env).stdout.split("\n")
        pairs = (line.split(" ", 1) for line in listed if " " in line)
        installed = {digest: prefix for digest, prefix in pairs if len(digest) == 32}
        roots = [root["hash"] for root in lock["roots"]]
        found = {_host_of(lock, root, self.hosts): Path(installed[root]) for root in roots}
        if set(found) != set(self.hosts) or not all(map(self.complete, found.values())):
            raise ToolFailure(
                f"Spack's installs in {env} lack what {self.root} installs for some of "
                f"{', '.join(self.hosts)}: {found}",
                fix=f"rm -rf {env} and call again; if it recurs, fix {self.recipe}",
            )
        return found


def _host_of(lock: dict, root: str, hosts) -> str:
    """The host MPI (of `hosts`) a root of the lock was built against: the external its
    `mpi` is, or that its MPI builds on (mpif over MPICH's standard ABI)."""
    specs, seen, todo = lock["concrete_specs"], set(), [root]
    while todo:
        node = specs[todo.pop()]
        for name in hosts:
            if HOSTS[name].spec == f"{node['name']}@{node['version']}":
                return name
        fresh = [dep["hash"] for dep in node.get("dependencies", []) if dep["hash"] not in seen]
        seen.update(fresh)
        todo += fresh
    raise ToolFailure(f"no host MPI of {', '.join(hosts)} under {specs[root]['name']}")


def _read(path: Path) -> dict[str, Path]:
    return {name: Path(prefix) for name, prefix in json.loads(path.read_text()).items()}


def _local_externals() -> Path:
    scope = pins.local_externals()
    if not (scope / "packages.yaml").is_file():
        raise ClimstackError(
            f"no compilers and build tools detected for the local site ({scope})",
            fix="run bin/setup (it detects them once)",
        )
    return scope


def _debian_mpich() -> dict:
    """site/local's external of Debian's MPICH, checked: mpicc is MPICH's."""
    packages = yaml.safe_load((SITES_DIR / "local" / "packages.yaml").read_text())["packages"]
    (external,) = packages["mpich"]["externals"]
    mpicc = DEBIAN_PREFIX / "bin" / "mpicc"
    if not DEBIAN_MPICC.is_file():
        raise ClimstackError(
            f"no Debian MPICH ({DEBIAN_MPICC})", fix="apt-get install libmpich-dev (bin/setup)"
        )
    if mpicc.resolve() != DEBIAN_MPICC.resolve():
        raise ClimstackError(
            f"{mpicc} is {mpicc.resolve()}, not Debian's MPICH: what is built against "
            "Debian's MPICH would link another MPI",
            fix=f"update-alternatives --set mpi {DEBIAN_MPICC}",
        )
    return external
