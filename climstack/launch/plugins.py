"""Plug-in discovery, as e4s-cl finds its backends: every module of a package (and of the
directories an environment variable lists) is imported as a submodule of the package, and
the named subclasses of a base type it defines are the plug-ins."""

import importlib
import importlib.util
import inspect
import os
import pkgutil
import sys
from pathlib import Path


def search_path(package, variable: str) -> list[str]:
    """The package's directories, then those of `variable` (os.pathsep-separated)."""
    return [*package.__path__, *filter(None, os.environ.get(variable, "").split(os.pathsep))]


def _module(package, directory: str, name: str):
    """Module `name` of `directory`, imported as PACKAGE.NAME (its file's latest copy)."""
    full = f"{package.__name__}.{name}"
    if directory in package.__path__:
        return importlib.import_module(full)
    path = Path(directory) / name
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    loaded = sys.modules.get(full)
    if loaded is None or getattr(loaded, "__file__", None) != str(path):
        spec = importlib.util.spec_from_file_location(full, path)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[full] = loaded
        spec.loader.exec_module(loaded)
    return loaded


def find(package, base: type, variable: str) -> dict[str, type]:
    """name -> subclass of `base` defined by a module on the search path (not `base`'s own
    module nor a _private one), first found first: a module named as one found before
    (one of the package's own) is not read."""
    found, seen = {}, set()
    for directory in search_path(package, variable):
        for info in pkgutil.iter_modules([directory]):
            if info.name.startswith("_") or f"{package.__name__}.{info.name}" == base.__module__:
                continue
            if info.name in seen:
                continue
            seen.add(info.name)
            module = _module(package, directory, info.name)
            for cls in vars(module).values():
                if (
                    inspect.isclass(cls)
                    and issubclass(cls, base)
                    and cls.__module__ == module.__name__
                    and cls.name
                ):
                    found.setdefault(cls.name, cls)
    return found
