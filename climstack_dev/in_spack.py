"""Run by `spack [-e ENV] python in_spack.py ACTION [ARGS]` (the tests' questions to Spack's
Python, through climstack.spack.Spack.python; never imported): each prints one JSON line.

  compilers         the compilers Spack finds, asked as `spack concretize` asks (detecting
                    them, and writing them into the highest scope, if none are configured)
  clingo            the file the clingo module Spack imports comes from
  pins NAME...      per package: its fetcher, and the version Spack picks (preferred, else
                    newest) with what pins it
  runs-on A B       does code for CPU target A run on target B (archspec: B is A or a
                    descendant of it)
"""

import json
import sys

import spack.compilers.config
import spack.repo


def compilers() -> int:
    return len(spack.compilers.config.all_compilers())


def clingo() -> str:
    return __import__("clingo").__file__


def pins(*names: str) -> dict:
    out = {}
    for name in names:
        cls = spack.repo.PATH.get_pkg_class(name)
        # as the concretizer picks: a preferred version, else the newest that is not a
        # branch like develop or main (builtin's netcdf-c has `main`)
        released = max(v for v in cls.versions if not v.isdevelop())
        pick = next((v for v, a in cls.versions.items() if a.get("preferred")), released)
        out[name] = {
            "version": str(pick),
            "git": getattr(cls, "git", None),
            "url": getattr(cls, "url", None),
            "has_code": cls.has_code,
            "pin": {k: str(v) for k, v in cls.versions[pick].items()},
        }
    return out


def runs_on(image_target: str, host_target: str) -> bool:
    import spack.vendor.archspec.cpu as archspec

    return archspec.TARGETS[image_target] <= archspec.TARGETS[host_target]


ACTIONS = {"compilers": compilers, "clingo": clingo, "pins": pins, "runs-on": runs_on}

if __name__ == "__main__":
    action, *args = sys.argv[1:]
    print(json.dumps(ACTIONS[action](*args)))
