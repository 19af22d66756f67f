"""The host's Cray Programming Environment as a login node shows it, read from the files
(under `root`, `/` on a Cray): installed versions (/opt/cray/pe/<component>/<version>), the
CPE releases and their defaults (/opt/cray/pe/cpe/<YY.MM>/modulerc.lua), and the module
tree (Tcl `.version` files and modulefiles, Lmod `default` links and .lua modulefiles)."""

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from climstack import inputs
from climstack.common.versions import sort_key
from climstack.errors import ClimstackError
from climstack.inputs import sites


@dataclass(frozen=True)
class Component:
    module: str  #: module name (cray-mpich)
    install: str  #: where its versions are installed (/opt/cray/pe/mpich/<version>/...)
    prefix_variable: str  #: what its modulefile sets to the prefix Spack needs


#: Spack package -> the Cray PE component that provides it
COMPONENTS = {
    "cray-mpich": Component("cray-mpich", "/opt/cray/pe/mpich", "CRAY_MPICH_DIR"),
    "cray-pmi": Component("cray-pmi", "/opt/cray/pe/pmi", "CRAY_PMI_PREFIX"),
    "cray-libsci": Component("cray-libsci", "/opt/cray/pe/libsci", "CRAY_LIBSCI_PREFIX_DIR"),
    "hdf5": Component("cray-hdf5-parallel", "/opt/cray/pe/hdf5-parallel", "HDF5_DIR"),
    "netcdf-c": Component(
        "cray-netcdf-hdf5parallel", "/opt/cray/pe/netcdf-hdf5parallel", "NETCDF_DIR"
    ),
    "netcdf-fortran": Component(
        "cray-netcdf-hdf5parallel", "/opt/cray/pe/netcdf-hdf5parallel", "NETCDF_DIR"
    ),
    "libfabric": Component("libfabric", "/opt/cray/libfabric", "LIBFABRIC_DIR"),
    "cce": Component("cce", "/opt/cray/pe/cce", "CRAY_CCE_DIR"),
    "gcc": Component("gcc", "/opt/cray/pe/gcc", "GCC_PATH"),
    "xpmem": Component("xpmem", "/opt/cray/xpmem", "XPMEM_DIR"),
}
#: where HPE and sites keep modulefiles (Lmod's hierarchy below lmod/ is searched deeply)
MODULE_ROOTS = (
    "/opt/cray/pe/modulefiles",
    "/opt/cray/modulefiles",
    "/opt/cray/pe/craype-targets/default/modulefiles",
    "/opt/cray/pe/lmod/modulefiles",
)
CPE_DIR = "/opt/cray/pe/cpe"
MODULERC_DEFAULT = re.compile(
    r"""module_version\(\s*["']([^"'/]+)/([^"']+)["']\s*,\s*["']default["']\s*\)"""
    r"""|module-version\s+([^\s/]+)/(\S+)\s+default"""
)


class CrayPe:
    def __init__(self, root: Path):
        self.root = Path(root)
        pe = self.root / "opt/cray/pe"
        try:
            if not any(pe.iterdir()):
                raise OSError("empty directory")
        except OSError as err:
            raise ClimstackError(
                f"no readable Cray PE under {self.root}: {pe}: {err.strerror or err}",
                fix="give --root the directory that holds opt/cray/pe (/ on a Cray login node)",
            ) from None

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    def exists(self, absolute: str) -> bool:
        return self.path(absolute).exists()

    def installed(self, component: Component) -> list[str]:
        """Versions installed under the component's directory, oldest first."""
        base = self.path(component.install)
        names = (
            [p.name for p in base.iterdir() if p.is_dir() and p.name[:1].isdigit()]
            if (base.is_dir())
            else []
        )
        return sorted(names, key=sort_key)

    # -- the module system ------------------------------------------------------------
    def _module_dirs(self, module: str) -> list[Path]:
        found = []
        for root in map(self.path, MODULE_ROOTS):
            if root.is_dir():
                found += [root / module] if (root / module).is_dir() else []
                if root.name == "modulefiles" and "lmod" in root.parts:
                    found += [d for d in root.rglob(module) if d.is_dir()]
        return found

    def has_module_system(self) -> bool:
        return any(self.path(root).is_dir() for root in MODULE_ROOTS)

    def modulefile(self, module: str) -> Path | None:
        """The modulefile of `name/version` (or the directory of `name`)."""
        name, _, version = module.partition("/")
        for directory in self._module_dirs(name):
            if not version:
                return directory
            for candidate in (directory / version, directory / f"{version}.lua"):
                if candidate.is_file():
                    return candidate
        return None

    def module_default(self, module: str) -> tuple[str, str] | None:
        """(version, where it is set) of what `module load <module>` loads: the module's
        `.version` file or `default` link, else the default CPE release's modulerc."""
        found = self._module_tree_default(module)
        if found or module == "cpe":
            return found
        release = self.default_cpe()
        return self.cpe_defaults(release[0]).get(module) if release else None

    def _module_tree_default(self, module: str) -> tuple[str, str] | None:
        """The default the module tree itself sets: a `.version` file or a `default` link
        to a version that exists (a dangling or looping link sets none)."""
        for directory in self._module_dirs(module):
            version_file, link = directory / ".version", directory / "default"
            text = _read_text(version_file)
            match = text and re.search(r"ModulesVersion\s+\"?([^\s\"]+)", text)
            if match:
                return match.group(1), str(version_file)
            if link.is_symlink() and link.exists():
                return Path(os.readlink(link)).name.removesuffix(".lua"), str(link)
        return None

    def unknown_default(self, module: str) -> str:
        """Why no default of `module` could be decided, with what would decide it."""
        if not self.has_module_system():
            where = f"no module tree under {self.root}"
        else:
            where = f"no .version file or default link for {module} under {self.root}"
        if not self.cpe_releases():
            where += f", no CPE release under {self.path(CPE_DIR)}"
        return f"default unknown: {where}"

    def cpe_releases(self) -> list[str]:
        base = self.path(CPE_DIR)
        names = (
            [p.name for p in base.iterdir() if re.fullmatch(r"\d\d\.\d\d", p.name)]
            if (base.is_dir())
            else []
        )
        return sorted(names, key=sort_key)

    def default_cpe(self) -> tuple[str, str] | None:
        """The CPE release `module load cpe` gives, else /opt/cray/pe/cpe/default."""
        found = self._module_tree_default("cpe")
        link = self.path(f"{CPE_DIR}/default")
        if found or not (link.is_symlink() and link.exists()):
            return found
        return Path(os.readlink(link)).name, str(link)

    def cpe_defaults(self, release: str) -> dict[str, tuple[str, str]]:
        """module -> (version, file) that CPE `release` makes the default."""
        defaults = {}
        for name in ("modulerc.lua", ".modulerc"):
            rc = self.path(f"{CPE_DIR}/{release}/{name}")
            for match in MODULERC_DEFAULT.finditer(_read_text(rc) or ""):
                module, version = match.group(1, 2) if match.group(1) else match.group(3, 4)
                defaults[module] = (version, str(rc))
        return defaults

    def module_prefix(self, module: str, variable: str) -> str:
        """The value a modulefile sets `variable` to (Tcl `setenv`, Lmod `setenv()`)."""
        path = self.modulefile(module)
        if path is None or path.is_dir():
            raise ClimstackError(
                f"no modulefile for {module} under {self.root}",
                fix="load the module on the host and give prefix: instead",
            )
        values = (_lua if path.suffix == ".lua" else _tcl)(path)
        if variable not in values:
            raise ClimstackError(
                f"{path}: sets no {variable}, so the prefix of {module} is " "unknown",
                fix="give the external a prefix: in the site scope",
            )
        return values[variable]


def _read_text(path: Path) -> str | None:
    """The text of a regular file, None if it is missing, not a file or unreadable."""
    try:
        return path.read_text(errors="replace") if path.is_file() else None
    except OSError:
        return None


def _tcl(path: Path) -> dict[str, str]:
    """`set` and `setenv` of a Tcl modulefile, with $var substitution."""
    text = path.read_text(errors="replace")
    if not text.startswith("#%Module"):
        raise ClimstackError(
            f"{path}: not a Tcl modulefile (no #%Module header)",
            fix="repair or remove the modulefile on the host",
        )
    names, env = {}, {}
    for number, line in enumerate(text.splitlines(), 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as err:
            raise ClimstackError(
                f"{path}:{number}: does not parse ({err})", fix="repair the modulefile on the host"
            ) from None
        if len(words) == 3 and words[0] in ("set", "setenv"):
            value = re.sub(r"\$\{?(\w+)\}?", lambda m: names.get(m.group(1), m.group(0)), words[2])
            if "$" in value:
                raise ClimstackError(
                    f"{path}:{number}: {value} names an unset variable",
                    fix="repair the modulefile on the host",
                )
            (names if words[0] == "set" else env)[words[1]] = value
    return env


def _lua(path: Path) -> dict[str, str]:
    """`local x = ...` and `setenv("X", ...)` of an Lmod modulefile; values joined with `..`."""
    names, env = {}, {}
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        local = re.match(r"\s*local\s+(\w+)\s*=\s*(.+)", line)
        setenv = re.match(r"\s*setenv\s*\(\s*[\"'](\w+)[\"']\s*,\s*(.+)\)\s*$", line)
        for table, match in ((names, local), (env, setenv)):
            if match:
                table[match.group(1)] = _lua_value(match.group(2), names, f"{path}:{number}")
    return env


def _lua_value(expression: str, names: dict, where: str) -> str:
    parts = []
    for part in expression.split(".."):
        part = part.strip()
        if re.fullmatch(r"\"[^\"]*\"|'[^']*'", part):
            parts.append(part[1:-1])
        elif part in names:
            parts.append(names[part])
        else:
            raise ClimstackError(
                f"{where}: cannot evaluate {part!r}",
                fix="give the external a prefix: in the site scope",
            )
    return "".join(parts)


# -- which versions ship together (site/cray-ex/cpe-releases.yaml) ------------------------
def release_table() -> dict[str, dict[str, str]]:
    """CPE release -> {module: version}, from LUMI's published tables."""
    path = sites.SITES_DIR / "cray-ex" / "cpe-releases.yaml"
    data = inputs.parse_yaml(path, "restore it from git") or {}
    return {str(r): {m: str(v) for m, v in c.items()} for r, c in data["releases"].items()}


def releases_of(externals: dict[str, str]) -> dict[str, list[str]]:
    """{module/version: the CPE releases that ship it} for the modules the table knows."""
    table = release_table()
    known = {m for components in table.values() for m in components}
    return {
        f"{module}/{version}": [r for r, c in table.items() if c.get(module) == version]
        for module, version in externals.items()
        if module in known
    }


def common_release(externals: dict[str, str]) -> list[str]:
    """The CPE releases that ship every one of `externals` ({module: version}); [] if the
    scope mixes releases (or pins a version no release has)."""
    found = releases_of(externals)
    common = set.intersection(*map(set, found.values())) if found else set()
    return sorted(common, key=sort_key)
