"""Host launchers as plug-ins, one module each (as e4s-cl's cf/launchers): a module defines
a subclass of base.Launcher with its `name`; `get(name, **settings)` gives one, `NAMES`
lists them; `given(argv)` is a launcher command line a user wrote. Modules are found here
and in the directories of CLIMSTACK_LAUNCHER_PATH."""

import sys

from climstack.errors import ClimstackError
from climstack.launch import plugins
from climstack.launch.launchers.base import Given, Launcher

PATH_VARIABLE = "CLIMSTACK_LAUNCHER_PATH"


def registered() -> dict[str, type[Launcher]]:
    return plugins.find(sys.modules[__name__], Launcher, PATH_VARIABLE)


def get(name: str, **settings) -> Launcher:
    classes = registered()
    if name not in classes:
        raise ClimstackError(f"unknown launcher {name!r}", fix=f"one of {', '.join(classes)}")
    return classes[name](**settings)


def given(argv) -> Launcher:
    """A launcher command line as written (e.g. --launcher 'mpiexec -n 2'), used as is."""
    return Given(argv)


def __getattr__(attribute: str):
    if attribute == "NAMES":
        return tuple(registered())
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
