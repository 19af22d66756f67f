"""Site scopes (site/<name>/): which exist, their site file site.yaml (checked against
schemas/site.json, its format first, defaults filled), and their Spack configuration as
Spack merges it: included scopes (site/cray-ex) and the user's scopes count, as in
`spack config get`."""

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

from climstack import inputs, spack
from climstack.errors import ClimstackError
from climstack.pins import PROJECT_ROOT

SITES_DIR = PROJECT_ROOT / "site"
#: the Cray PE externals whose libraries an MPI needs (what `module load` would add)
RUNTIME_EXTERNALS = ("cray-pmi", "libfabric", "xpmem")
#: the site file (`format: 2`: sections bind, slurm, lustre), and its first format's name
SITE_FILE, OLD_SITE_FILE = "site.yaml", "bind.yaml"
PORTING = "docs/sites.md, section Porting a bind.yaml"


def shared_scopes() -> set[str]:
    """Folders of site/ that other scopes include (cray-ex, gaea): not sites of their own."""
    shared = set()
    for include in SITES_DIR.glob("*/include.yaml"):
        entries = (inputs.parse_yaml(include, "list the scopes it includes") or {}).get("include")
        for entry in entries or []:
            path = entry if isinstance(entry, str) else str((entry or {}).get("path", ""))
            if (include.parent / path).resolve().parent == SITES_DIR.resolve():
                shared.add(Path(path).name)
    return shared


def known_sites() -> list[str]:
    shared = shared_scopes()
    return sorted(p.name for p in SITES_DIR.iterdir() if p.is_dir() and p.name not in shared)


@dataclass(frozen=True)
class Site:
    name: str
    path: Path

    @property
    def reference(self) -> str:
        """How plans name it: the folder name for site/<name>, else the scope's path."""
        return self.name if self.path == (SITES_DIR / self.name).resolve() else str(self.path)

    @property
    def slurm(self) -> dict:
        """site.yaml's `slurm:` (srun's MPI plug-in, options, partition)."""
        return self.site_file["slurm"]

    @property
    def lustre(self) -> dict | None:
        """site.yaml's `lustre:` (path, stripe counts and sizes), if the site has Lustre."""
        return self.site_file.get("lustre")

    @property
    def bind(self) -> dict:
        """site.yaml's `bind:` (runtime, libraries, binds, variables of the bind plans)."""
        return self.site_file["bind"]

    @functools.cached_property
    def site_file(self) -> dict:
        """site.yaml (not a Spack section: Spack ignores the file), defaults filled; a
        bind.yaml (the first format) without it is refused with the way to port it."""
        path, old = self.path / SITE_FILE, self.path / OLD_SITE_FILE
        port = (
            "add `format: 2` as the first key, move the other keys under `bind:` and keep "
            f"`slurm:` and `lustre:` at the top level ({PORTING})"
        )
        if old.is_file() and not path.is_file():
            raise ClimstackError(
                f"{old}: this climstack reads the site file {path}, not bind.yaml",
                fix=f"`git mv {old} {path}`, then {port}",
            )
        return inputs.load_yaml(
            path,
            "site",
            fix=f"compare with {SITES_DIR / 'local' / SITE_FILE} "
            "(schema: climstack/inputs/schemas/site.json)",
            format_fix=f"for a file of the first format (bind.yaml): {port}",
        )

    @functools.cached_property
    def packages(self) -> dict:
        """The `packages:` section of this scope merged by Spack with what it includes and
        with the user's scopes (`spack -C <site> config get packages`)."""
        return (yaml.safe_load(self._merged["get"]) or {}).get("packages") or {}

    @functools.cached_property
    def _blame(self) -> list[tuple[str, str]]:
        """(file:line, text) of each line of the merged section (`spack config blame`)."""
        lines = self._merged["blame"].splitlines()
        return [
            (where, text.strip()) for where, _, text in (line.partition(" ") for line in lines)
        ]

    @functools.cached_property
    def _merged(self) -> dict[str, str]:
        """`spack config get packages` and `spack config blame packages`, both printed by one
        Spack process (each Spack process starts in ~0.5 s)."""
        try:
            return spack.DEFAULT.scoped(self.path).python("print_packages.py")
        except spack.ScriptFailed as err:
            raise ClimstackError(
                f"Spack cannot read the site scope {self.path}: "
                + " ".join(err.output.split())[-600:],
                fix="correct the file and key named above (`bin/climstack check` shows it)",
            ) from err

    def origin(self, prefix: str, key: str = "prefix") -> str:
        """file:line of the scope that sets this external prefix (or another key's value)."""
        for where, text in self._blame:
            if text in (f"{key}: {prefix}", f"- {key}: {prefix}"):
                return where
        return f"site {self.name}"

    def externals(self, package: str) -> list[dict]:
        return (self.packages.get(package) or {}).get("externals") or []

    def external_prefix(self, *packages: str) -> str | None:
        """Prefix of the first external of the first of `packages` that has one."""
        for name in packages:
            for external in self.externals(name):
                if external.get("prefix"):
                    return external["prefix"]
        return None

    def external_version(self, package: str) -> str | None:
        """The version the spec of the package's first external names (Spack's parser)."""
        for external in self.externals(package):
            try:
                return spec_versions(external["spec"])[external["spec"]]
            except spack.ScriptFailed as err:
                raise ClimstackError(
                    f"site {self.name} ({self.path}): Spack cannot parse the {package} "
                    f"external's spec {external['spec']!r}: {' '.join(err.output.split())[-600:]}",
                    fix="correct that spec in the site scope",
                ) from err
        return None

    def runtime_library_dirs(self) -> list[str]:
        """lib/ and lib64/ of the cray-pmi, libfabric and xpmem externals: the versions
        live in packages.yaml only."""
        prefixes = [self.external_prefix(name) for name in RUNTIME_EXTERNALS]
        return [f"{prefix}/{lib}" for prefix in prefixes if prefix for lib in ("lib", "lib64")]


@functools.cache
def spec_versions(*specs: str) -> dict[str, str | None]:
    """{spec: the version it names, None for none or a range}, read by Spack's spec parser
    in one Spack process (a spec without `@` names none: no process)."""
    asked = [spec for spec in specs if "@" in spec]
    found = spack.DEFAULT.python("spec_versions.py", *asked) if asked else {}
    return {spec: found.get(spec) for spec in specs}


@functools.cache
def _site(path: Path) -> Site:
    return Site(path.name, path)


def get(site: str) -> Site:
    """A site by name (a folder of site/) or by the path of a scope directory: resolved
    once, where the user names it (the CLI); every layer below takes the Site."""
    path = Path(site) if "/" in site else SITES_DIR / site
    if not path.is_dir():
        raise ClimstackError(
            f"site scope {path} does not exist",
            fix=f"name a folder of site/ ({', '.join(known_sites())}) or give "
            "the path of a scope directory",
        )
    return _site(path.resolve())
