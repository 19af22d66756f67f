"""Every input file the project reads, mutated: wrong types, unknown keys, missing required
keys, bad syntax, an empty file, a directory in the file's place. Each mutation must give
one paragraph naming the file and the key, with a fix, exit code 2, no traceback, and
leave nothing half-written. Files run through the command that reads them, for real."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

from climstack.bind import plan as plans
from climstack.errors import ClimstackError
from climstack.inputs import sites

CLIMSTACK = str(PROJECT_ROOT / "bin" / "climstack")


def replace(old: str, new: str):
    def mutate(text: str) -> str:
        assert old in text, f"mutation target {old!r} is gone from the file"
        return text.replace(old, new, 1)

    return mutate


def json_edit(edit):
    def mutate(text: str) -> str:
        data = json.loads(text)
        edit(data)
        return json.dumps(data)

    return mutate


EMPTY = ("empty file", lambda text: "", "")
DIRECTORY = ("directory", None, "is a directory")


#: file in the project copy -> (command reading it, [(mutation, transform, expected text)])
def line_of(relative: str, text: str) -> int:
    """The line number of the first line holding `text` (where Spack's error points)."""
    lines = (PROJECT_ROOT / relative).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


CASES = {
    "site/local/site.yaml": (
        "bind",
        [
            ("wrong type", replace("binds: []", "binds: 5"), "binds: 5 is a int, expected array"),
            ("unknown key", lambda t: t + "\nbindz: []\n", "'bindz' was unexpected"),
            ("missing key", replace("runtime: charliecloud", "#"), "'runtime' is a required"),
            ("old format", replace("format: 2 ", "#"), "key format: missing"),
            ("unknown format", replace("format: 2 ", "format: 3 "), "reads `format: 2`"),
            ("bad syntax", lambda t: t + "\nenv: {a: [\n", "is not valid YAML at line"),
            (*EMPTY[:2], "is empty"),
            DIRECTORY,
        ],
    ),
    "site/local/packages.yaml": (
        "check",
        [
            ("wrong type", replace("buildable: false", "buildable: maybe"), "'maybe' is not of"),
            ("unknown key", replace("buildable:", "buildabel:"), "buildabel"),
            ("missing key", replace("- spec: zlib@1.2.13\n      prefix", "- prefix"), "'spec' is"),
            ("bad syntax", lambda t: t + "\n  mpi: [\n", "is not valid YAML at line"),
            (*EMPTY[:2], "it is empty"),
            DIRECTORY,
        ],
    ),
    "environments/local/spack.yaml": (
        "check",
        [
            (
                "wrong type",
                replace("view: false", "view: [1, 2]"),
                f"spack.yaml:{line_of('environments/local/spack.yaml', 'view:')}: [1, 2] is not",
            ),
            ("unknown key", replace("  view:", "  specz: []\n  view:"), "specz"),
            ("missing key", replace("spack:", "spock:"), "key spack: missing"),
            ("bad syntax", lambda t: t + "\n  specs: [\n", "is not valid YAML at line"),
            (*EMPTY[:2], "empty file"),
            ("directory", None, "spack.yaml"),
        ],
    ),
    "environments/stack.yaml": (
        "check",
        [
            (
                "wrong type",
                replace("unify: true", "unify: 5"),
                f"stack.yaml:{line_of('environments/stack.yaml', 'unify:')}: 5 is not valid",
            ),
            ("unknown key", replace("reuse: false", "reuze: false"), "reuze"),
            ("missing key", replace("- probes:", "- probez:"), "'probes', which is not defined"),
            ("bad syntax", lambda t: t + "\nrepos: {a: [\n", "is not valid YAML at line"),
            (*EMPTY[:2], "it is empty"),
            DIRECTORY,
        ],
    ),
    "plan/plan.json": (
        "slurm",
        [
            ("wrong type", json_edit(lambda d: d.update(binds=5)), "binds: 5 is a int"),
            ("unknown key", json_edit(lambda d: d.update(bindz=[])), "'bindz' was unexpected"),
            ("missing key", json_edit(lambda d: d.pop("mode")), "'mode' is a required"),
            ("old format", json_edit(lambda d: d.pop("format")), "'format' is a required"),
            ("unknown format", json_edit(lambda d: d.update(format=2)), "1 was expected"),
            ("bad syntax", lambda t: t[:-3], "is not valid JSON at line"),
            (*EMPTY[:2], "is not valid JSON at line 1"),
            DIRECTORY,
        ],
    ),
}


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the project's inputs (environments, site scopes, a plan); repo/ linked."""
    copy = tmp_path / "project"
    (copy / "environments" / "local").mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "environments" / "stack.yaml", copy / "environments")
    shutil.copy(
        PROJECT_ROOT / "environments" / "local" / "spack.yaml", copy / "environments" / "local"
    )
    shutil.copytree(PROJECT_ROOT / "site", copy / "site")
    (copy / "repo").symlink_to(PROJECT_ROOT / "repo")
    plans.write(plans.make_plan(sites.get("local"), environ={}), copy / "plan")
    return copy


def command(name: str, copy: Path) -> list[str]:
    if name == "bind":
        return [CLIMSTACK, "bind", str(copy / "site" / "local"), "--out", str(copy / "new-plan")]
    if name == "check":
        return [CLIMSTACK, "check", str(copy / "environments" / "local")]
    return [
        CLIMSTACK,
        "slurm",
        "local",
        "--plan",
        str(copy / "plan"),
        "--image",
        "app.sif",
        "--no-verify",
        "--output",
        str(copy / "job.sh"),
        "--command",
        "true",
    ]


def snapshot(root: Path) -> dict[str, tuple]:
    """Every file and its content, but Spack's own lock directory (.spack-env) and repo/."""
    return {
        str(p.relative_to(root)): (p.is_dir(), p.is_symlink() or p.is_dir() or p.read_bytes())
        for p in sorted(root.rglob("*"))
        if not {"repo", ".spack-env"} & set(p.parts[len(root.parts) :])
    }


@pytest.mark.parametrize(
    "file, mutation", [(file, m[0]) for file, (_, ms) in CASES.items() for m in ms]
)
def test_bad_input_gives_one_paragraph_exit_2_and_writes_nothing(project, file, mutation):
    verb, mutations = CASES[file]
    _, transform, expected = next(m for m in mutations if m[0] == mutation)
    path = project / file
    if transform is None:
        path.unlink()
        path.mkdir()
    else:
        path.write_text(transform(path.read_text()))
    before = snapshot(project)
    env = {**os.environ, "LD_LIBRARY_PATH": ""}
    proc = subprocess.run(
        command(verb, project), capture_output=True, text=True, env=env, timeout=300
    )
    message = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, message)
    assert "Traceback" not in message and "\n\n" not in message, message
    assert message.startswith(f"climstack {verb}: error: ") and "\n  fix: " in message, message
    assert expected in message, message
    named = {str(path), str(path.parent / "spack.yaml"), str(project / "environments/local")}
    assert any(name in message for name in named), message  # the file (or its user) is named
    assert snapshot(project) == before  # nothing written, nothing half-written
    assert not (project / "new-plan").exists() and not (project / "job.sh").exists()


def test_the_unmutated_copy_passes_every_command(project):
    """The control: the same commands on the same copy, unmutated, succeed."""
    for verb in ("bind", "check", "slurm"):
        proc = subprocess.run(
            command(verb, project),
            capture_output=True,
            text=True,
            env={**os.environ, "LD_LIBRARY_PATH": ""},
            timeout=300,
        )
        assert proc.returncode == 0, (verb, proc.stderr)


def test_site_yaml_defaults_are_filled_from_the_schema(tmp_path):
    from climstack.inputs import sites

    site = tmp_path / "site" / "minimal"
    shutil.copytree(PROJECT_ROOT / "site" / "local", site)
    (site / "site.yaml").write_text("format: 2\nbind: {runtime: apptainer}\n")
    scope = sites.get(str(site))
    assert scope.bind["binds"] == [] and scope.bind["env"] == {}
    assert scope.slurm["mpi"] == "pmi2" and scope.lustre is None


def test_an_old_bind_yaml_is_refused_with_the_way_to_port_it(tmp_path):
    """A site directory of the first format (bind.yaml, no site.yaml): refused naming the
    file and the fix, before the schema sees it."""
    site = tmp_path / "site" / "old"
    shutil.copytree(PROJECT_ROOT / "site" / "local", site)
    (site / "site.yaml").unlink()
    (site / "bind.yaml").write_text("format: 1\nruntime: apptainer\nslurm: {mpi: pmi2}\n")
    with pytest.raises(ClimstackError) as refused:
        sites.get(str(site)).bind
    assert f"{site}/bind.yaml" in refused.value.message
    assert f"{site}/site.yaml" in refused.value.message
    for step in ("git mv", "`format: 2`", "`bind:`", "`slurm:`", "Porting a bind.yaml"):
        assert step in str(refused.value.fix)
    assert "Porting a bind.yaml" in (PROJECT_ROOT / "docs" / "sites.md").read_text()


@pytest.mark.parametrize("first_line", ["format: 1", "format: 3", "format: '2'", "runtime: x"])
def test_a_site_yaml_of_another_format_is_refused_before_its_keys(tmp_path, first_line):
    """The format is checked first: a bind.yaml renamed to site.yaml (`format: 1`, its keys
    at the top) gets the porting fix, not an error about each key that moved."""
    site = tmp_path / "site" / "renamed"
    shutil.copytree(PROJECT_ROOT / "site" / "local", site)
    (site / "site.yaml").write_text(f"{first_line}\nruntime: apptainer\nbinds: []\n")
    with pytest.raises(ClimstackError) as refused:
        sites.get(str(site)).bind
    assert refused.value.message.startswith(f"{site}/site.yaml: key format: ")
    assert "this climstack reads `format: 2`" in refused.value.message
    assert "move the other keys under `bind:`" in str(refused.value.fix)
