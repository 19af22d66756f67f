"""Network plugins the host MPI loads with dlopen, and their DT_NEEDED closure.

libfabric's providers (lib<name>-fi.so), UCX's transport modules (libuct_<name>.so.0),
libibverbs' drivers (lib<name>-rdmav<N>.so) and Cray MPICH's GPU transport layers
(libmpi_gtl_<name>.so) are not in any DT_NEEDED: a container that lacks their own
dependencies (libibverbs, librdmacm, libefa, libmlx5, libpsm2, libcxi) loads them silently
not at all, and the MPI falls back to a slower transport. Here every plugin the plan makes
visible is closed over by the loader rules, like the MPI itself.

Where plugins are looked for: in and below every bound non-system directory, the files
named like a plugin; in the site's `plugin_dirs:` and in the module environment's
FI_PROVIDER_PATH and UCX_MODULE_DIR, every shared object.
"""

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from climstack.bind import loader
from climstack.errors import ClimstackError

#: family -> pattern of a plugin's file name; group `name` is the provider's name
FAMILIES = {
    "ofi": re.compile(r"^lib(?P<name>.+)-fi\.so$"),
    "ucx": re.compile(r"^libuct_(?P<name>.+?)\.so(\.\d+)*$"),
    "verbs": re.compile(r"^lib(?P<name>.+)-rdmav\d+\.so$"),
    "gtl": re.compile(r"^libmpi_gtl_(?P<name>.+?)\.so(\.\d+)*$"),
}
#: variables of the module environment naming plugin directories
PLUGIN_PATH_VARIABLES = ("FI_PROVIDER_PATH", "UCX_MODULE_DIR")
MAX_DEPTH = 3  # below a bound directory: lib/mpich/libfabric is 2


def identify(file_name: str) -> tuple[str, str] | None:
    """(family, provider name) of a plugin's file name, or None."""
    for family, pattern in FAMILIES.items():
        match = pattern.match(file_name)
        if match:
            return family, match["name"]
    return None


@dataclass
class Plugin:
    path: str  # inside the view
    family: str  # ofi, ucx, verbs, gtl, or "plugin" for an unrecognised one
    provider: str
    needs: list[str] = field(default_factory=list)  # resolved DT_NEEDED closure (names)
    missing: list[str] = field(default_factory=list)  # names the loader cannot find
    expected: bool = False

    @property
    def key(self) -> str:
        return f"{self.family}:{self.provider}"

    def to_dict(self) -> dict:
        return {**asdict(self), "key": self.key}


def matches(expected: str, key: str) -> bool:
    """A site names a provider `verbs` (any family) or `ofi:verbs` (the key)."""
    return expected in (key, key.partition(":")[2])


def _shared_objects(host_dir, view_dir: PurePosixPath, only_plugins: bool):
    for entry in sorted(host_dir.iterdir()):
        if ".so" in entry.name and (entry.is_file() or entry.is_symlink()):
            if not only_plugins or identify(entry.name):
                yield view_dir / entry.name


def candidates(
    bound: list[PurePosixPath], config_dirs: list[str], environ: dict, view: loader.View
) -> list[PurePosixPath]:
    """Plugin files visible in the container (paths inside the view), in a stable order."""
    found: dict[PurePosixPath, None] = {}
    for top in bound:
        host_top = view.resolve(str(top))[1]
        for here, dirs, _ in os.walk(host_top):
            depth = len(PurePosixPath(here).relative_to(host_top).parts)
            dirs[:] = sorted(dirs) if depth < MAX_DEPTH else []
            view_dir = top / PurePosixPath(here).relative_to(host_top)
            found.update(dict.fromkeys(_shared_objects(Path(here), view_dir, True)))
    listed = list(config_dirs)
    for variable in PLUGIN_PATH_VARIABLES:
        listed += filter(None, environ.get(variable, "").split(":"))
    for directory in listed:
        hit = view.resolve(directory)
        if hit and hit[1].is_dir():
            found.update(dict.fromkeys(_shared_objects(hit[1], hit[0], False)))
    return list(found)


def close(
    files: list[PurePosixPath], view: loader.View, search: list[str], expected: list[str]
) -> tuple[list[Plugin], dict[str, loader.Library]]:
    """Each plugin's DT_NEEDED closure: (plugins with what they need or miss, the libraries
    they need by name). A missing dependency of an expected provider is an error; of any
    other plugin a warning (hardware the site does not have leaves its plugin unloadable).
    """
    plugins, libraries, seen = [], {}, set()
    for path in files:
        real = view.resolve(str(path))
        if not real or real[0] in seen:  # a symlink to a plugin already closed
            continue
        seen.add(real[0])
        family, provider = identify(path.name) or ("plugin", path.name.split(".so")[0])
        plugin = Plugin(str(path), family, provider)
        plugin.expected = any(matches(name, plugin.key) for name in expected)
        result = loader.closure(str(path), view, search)
        plugin.needs = sorted(result.libraries)
        plugin.missing = sorted(result.missing)
        for name, library in result.libraries.items():
            libraries.setdefault(name, library)
        plugins.append(plugin)
    broken = [p for p in plugins if p.expected and p.missing]
    if broken:
        raise ClimstackError(
            "expected network providers cannot load: "
            + "; ".join(f"{p.key} ({p.path}) needs {', '.join(p.missing)}" for p in broken),
            fix="load the module that provides them, or add their directory to "
            "`bind: library_path:` in the site's site.yaml; if the site lacks that hardware, "
            "drop the provider from `providers:`",
        )
    return plugins, libraries


def warnings(plugins: list[Plugin]) -> list[str]:
    return [
        f"plugin {p.key} ({p.path}) cannot load: the loader cannot find " f"{', '.join(p.missing)}"
        for p in plugins
        if p.missing
    ]
