"""Container runtimes as plug-ins, one module each (as e4s-cl's cf/containers): a module
defines a subclass of base.Runtime with its `name`; `get(name)` gives it, `NAMES` lists
them all, `LOCAL` those this machine runs. Adding a runtime is adding a module here.

Modules are found in this package and in the directories of CLIMSTACK_RUNTIME_PATH
(os.pathsep-separated: a site's own runtime, or a test's), at every look-up.
"""

import sys

from climstack.errors import ClimstackError
from climstack.launch import plugins
from climstack.launch.runtimes.base import Runtime

PATH_VARIABLE = "CLIMSTACK_RUNTIME_PATH"


def registered() -> dict[str, type[Runtime]]:
    """name -> runtime class, over this package and CLIMSTACK_RUNTIME_PATH."""
    return plugins.find(sys.modules[__name__], Runtime, PATH_VARIABLE)


def get(name: str) -> Runtime:
    classes = registered()
    if name not in classes:
        raise ClimstackError(
            f"unknown container runtime {name!r} (--runtime, or the site's site.yaml "
            "`runtime:`)",
            fix=f"one of {', '.join(classes)}, or a module for it in {__path__[0]}",
        )
    return classes[name]()


def __getattr__(attribute: str):
    """NAMES: every runtime's name; LOCAL: those this machine runs, in their order."""
    if attribute == "NAMES":
        return tuple(registered())
    if attribute == "LOCAL":
        local = sorted((cls for cls in registered().values() if cls.local), key=lambda c: c.local)
        return tuple(cls.name for cls in local)
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
