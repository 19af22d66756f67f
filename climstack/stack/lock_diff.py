"""What a change of configuration does to an environment's DAG: concretize it before and
after in a copy of the project (the checkout is never touched) and compare the lockfiles."""

import json
import shutil
import tempfile
from pathlib import Path

from climstack.pins import PROJECT_ROOT
from climstack.stack import environments

#: the folders of a project that concretization reads
PROJECT_PARTS = ("environments", "containers", "site", "repo")


def nodes(lock: dict) -> dict[str, dict]:
    return lock["concrete_specs"]


def describe(before: dict, after: dict) -> list[str]:
    """Which specs change (name, old -> new version) and which of them rebuild."""
    old, new = nodes(before), nodes(after)
    changed = [n for h, n in new.items() if h not in old]
    versions = {}
    for node in old.values():
        versions.setdefault(node["name"], set()).add(node["version"])
    lines = [f"{len(changed)} of {len(new)} specs change"]
    for node in sorted(changed, key=lambda n: n["name"]):
        was = ", ".join(sorted(versions.get(node["name"], {"(new)"})))
        kind = "external" if node.get("external") else "rebuild"
        lines.append(f"  {node['name']:<24} {was} -> {node['version']}  [{kind}]")
    rebuilt = sum(1 for n in changed if not n.get("external"))
    lines.append(f"  {rebuilt} rebuild")
    return lines


def _copy_project(project: Path, work: Path) -> None:
    for part in PROJECT_PARTS:
        source = project / part if (project / part).is_dir() else PROJECT_ROOT / part
        shutil.copytree(
            source,
            work / part,
            symlinks=True,
            ignore=shutil.ignore_patterns(".spack-env", "spack.lock"),
        )


def _lock(env_dir: Path) -> dict:
    environments.concretize(env_dir)
    return json.loads((env_dir / "spack.lock").read_text())


def compare(project: Path, edits: dict[Path, tuple], env_names: list[str]) -> dict[str, list]:
    """Concretize `project`'s environments `env_names` (environments/x, containers/x) as they
    are and with `edits` ({file: (old, new text)}) applied; returns the description of each.
    An environment's own spack.lock serves as `before` when it is there."""
    found = {}
    with tempfile.TemporaryDirectory(prefix="climstack-drift-") as tmp:
        work = Path(tmp)
        _copy_project(project, work)
        before = {}
        for name in env_names:
            lock = project / name / "spack.lock"
            before[name] = json.loads(lock.read_text()) if lock.is_file() else _lock(work / name)
        for path, (_, new) in edits.items():
            if path.is_relative_to(project):
                (work / path.relative_to(project)).write_text(new)
        for name in env_names:
            found[name] = describe(before[name], _lock(work / name))
    return found
