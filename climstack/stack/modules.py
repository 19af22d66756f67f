"""`climstack modules`: the Lmod tree of an installed environment, written by Spack's own
`spack module lmod refresh` with the site's module scope (site/<site>/modules/, kept out of
the environment's includes: it changes no concretization). The tree is written whole or
not at all: a refresh that fails removes what it wrote."""

import os
import shutil
import tempfile
from pathlib import Path

from climstack import pins, spack
from climstack.errors import ClimstackError
from climstack.stack import environments

#: the scope directory of a site's module configuration
SCOPE = "modules"


def scope_of(site: str) -> Path:
    """site/<site>/modules/, which must hold a modules.yaml."""
    scope = pins.PROJECT_ROOT / "site" / site / SCOPE
    if not (scope / "modules.yaml").is_file():
        raise ClimstackError(
            f"site {site} has no module configuration: {scope / 'modules.yaml'} is missing",
            fix=f"write it (site/local/{SCOPE}/modules.yaml is an example: Lmod, a "
            "Core/MPI hierarchy, the tree's root)",
        )
    return scope


def _root_scope(root: Path, work: Path) -> Path:
    """A scope that sets the tree's root to `root`, above the site's."""
    scope = work / "root-scope"
    scope.mkdir()
    (scope / "modules.yaml").write_text(f"modules:\n  default:\n    roots:\n      lmod: {root}\n")
    return scope


def writable(root: Path) -> None:
    """`root` can be created or written, else an error naming it."""
    existing = next(p for p in (root, *root.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        what = "is not a directory" if not existing.is_dir() else "cannot be written"
        raise ClimstackError(
            f"module root {root}: {existing} {what}",
            fix="give a --root you can write, or create it with the right owner first",
        )


def site_root(env_name: str) -> Path:
    """The root of the tree the environment's site scope names."""
    env_dir = environments.resolve(env_name)
    scope = scope_of(environments.site_of(env_dir))
    return _lmod_root(spack.DEFAULT.scoped(scope), env_dir)


def refresh(env_name: str, root: Path | None = None) -> Path:
    """Write the environment's Lmod tree (its site's scope; `root` in place of the site's
    root) and return the directory a user gives `module use` (its Core)."""
    env_dir = environments.resolve(env_name)
    site = environments.site_of(env_dir)
    scope = scope_of(site)
    with tempfile.TemporaryDirectory(prefix="climstack-modules-") as tmp:
        scopes = [scope, *([_root_scope(root, Path(tmp))] if root else [])]
        gateway = spack.DEFAULT.scoped(*scopes)
        root = root or _lmod_root(gateway, env_dir)
        writable(root)
        # Spack writes absolute paths into the tree (MODULEPATH): it is made at its root, the
        # old one moved aside meanwhile and put back if the refresh fails
        aside = root.with_name(f".{root.name}.before-refresh")
        shutil.rmtree(aside, ignore_errors=True)  # a crash's leftover
        if root.exists():
            os.replace(root, aside)
        try:
            gateway.run("module", "lmod", "refresh", "--delete-tree", "-y", env=env_dir,
                        fix=f"check {scope / 'modules.yaml'} and that {env_name} is installed "
                        f"(`climstack install {env_name}`)")  # fmt: skip
            cores = sorted(root.glob("*/Core"))
            if not cores:
                raise ClimstackError(
                    f"`spack module lmod refresh` wrote no Core directory under {root}",
                    fix=f"install {env_name} first (`climstack install {env_name}`)",
                )
        except BaseException:  # nothing half-written: the old tree as it was, or none
            shutil.rmtree(root, ignore_errors=True)
            if aside.exists():
                os.replace(aside, root)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    return cores[0]


def _lmod_root(gateway, env_dir: Path) -> Path:
    """The tree's root as Spack resolves the merged configuration."""
    return Path(gateway.python("module_root.py", env=env_dir))
