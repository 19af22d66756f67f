"""A concretization is reused exactly while its inputs are unchanged, and solved afresh when
a recipe, a scope or an environment variable its definitions read changes."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT_ROOT

from climstack import pins
from climstack.image import image
from climstack.stack import environments, lock_cache

#: a small environment on ARCHER2's site scope, with a copy of our repository
MANIFEST = {
    "spack": {
        "include": [str(PROJECT_ROOT / "site" / "archer2")],
        "definitions": [
            {"probe": ["xpmem-stub"], "when": 'env.get("CLIMSTACK_TEST_SLICE") != "none"'},
            {"probe": [], "when": 'env.get("CLIMSTACK_TEST_SLICE") == "none"'},
        ],
        "specs": [{"matrix": [["$probe"], ["$site_arch"]]}, "mpi-probe"],
        "view": False,
        # our environments' solver options (static_analysis: 16 s a solve here, not 24 s)
        "concretizer": yaml.safe_load(environments.STACK.read_text())["concretizer"],
    }
}


def make_env(directory: Path) -> Path:
    """MANIFEST's environment in directory/env, on a copy of our repository in directory."""
    repo = directory / "repo"
    shutil.copytree(PROJECT_ROOT / "repo", repo, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = {"spack": {**MANIFEST["spack"], "repos": {"climstack": str(repo)}}}
    (directory / "env").mkdir()
    (directory / "env" / "spack.yaml").write_text(yaml.safe_dump(manifest))
    return directory / "env"


@pytest.fixture
def env(tmp_path):
    return make_env(tmp_path)


def key(env) -> str:
    return lock_cache.key(lock_cache.report(env))


def dag_hashes(env) -> set[str]:
    return set(json.loads((env / "spack.lock").read_text())["concrete_specs"])


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory):
    """`climstack concretize --no-reuse -j 2 A B` once for the module, A with MANIFEST's
    inputs and B with xpmem-stub alone: (A, B, the completed process). Both are solved
    afresh, and A's lockfile is the one Spack wrote."""
    a = make_env(tmp_path_factory.mktemp("side-by-side"))
    b = a.parent / "other"
    shutil.copytree(a, b)
    data = yaml.safe_load((b / "spack.yaml").read_text())
    data["spack"]["specs"] = [{"matrix": [["xpmem-stub"], ["$site_arch"]]}]
    (b / "spack.yaml").write_text(yaml.safe_dump(data))
    proc = subprocess.run(
        [str(PROJECT_ROOT / "bin" / "climstack"), "concretize", "--no-reuse", "-j", "2"]
        + [str(a), str(b)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return a, b, proc


def test_the_same_inputs_reuse_the_lockfile_spack_wrote(side_by_side, env):
    """`env` has A's inputs elsewhere (another directory, its own copy of the repository):
    the same key, and the lockfile Spack wrote for A is copied in rather than solved."""
    solved = side_by_side[0] / "spack.lock"
    assert key(env) == key(solved.parent)
    assert lock_cache.concretize(env) is True
    assert (env / "spack.lock").read_bytes() == solved.read_bytes()


def test_a_changed_recipe_is_solved_again_with_its_new_hash(env):
    lock_cache.concretize(env)
    before, hashes = key(env), dag_hashes(env)
    recipe = env.parent / "repo" / "packages" / "xpmem-stub" / "package.py"
    # a change in the install logic changes the package hash, hence the DAG hash
    recipe.write_text(
        recipe.read_text().replace(
            "    def install(self, spec, prefix):\n",
            "    def install(self, spec, prefix):\n        mkdirp(prefix.share)\n",
        )
    )
    assert key(env) != before
    lock_cache.concretize(env)
    assert dag_hashes(env) != hashes  # what Spack's own cache got wrong (spack#51553)


def test_a_changed_scope_or_definition_changes_the_key(env, monkeypatch):
    before = key(env)
    monkeypatch.setenv("CLIMSTACK_TEST_SLICE", "none")  # the `when:` of a definition
    assert key(env) != before
    monkeypatch.delenv("CLIMSTACK_TEST_SLICE")
    assert key(env) == before
    data = yaml.safe_load((env / "spack.yaml").read_text())
    data["spack"]["packages"] = {"mpi-probe": {"version": ["1.0"]}}
    (env / "spack.yaml").write_text(yaml.safe_dump(data))
    assert key(env) != before


def test_climstack_concretize_solves_environments_side_by_side(side_by_side):
    """`climstack concretize -j 2 A B` runs both solves at once (the second starts before
    the first is done) and each gets its own lockfile. (Two environments with the same
    inputs would take turns: the second reuses the first one's solve.)"""
    a, b, proc = side_by_side
    steps = [line for line in proc.stderr.splitlines() if line.startswith("==> concretizing")]
    began = [line.endswith("--fresh ...") for line in steps]
    assert began == [True, True, False, False], proc.stderr  # both began, then both ended
    assert proc.stdout.count("concretized --fresh in") == 2
    assert root_names(a) == ["mpi-probe", "xpmem-stub"]
    assert root_names(b) == ["xpmem-stub"]


def root_names(env) -> list[str]:
    lock = json.loads((env / "spack.lock").read_text())
    return sorted(lock["concrete_specs"][root["hash"]]["name"] for root in lock["roots"])


def test_climstack_concretize_refuses_a_negative_job_count(env):
    proc = subprocess.run(
        [str(PROJECT_ROOT / "bin" / "climstack"), "concretize", "-j", "-1", str(env)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--jobs -1" in proc.stderr and "fix:" in proc.stderr
    assert not (env / "spack.lock").exists()


def test_a_host_independent_solve_is_keyed_without_the_host(env):
    """ARCHER2's scope requires target=zen2 os=sles15 with host_compatible: false: another
    host makes the same key; without those requirements the host counts."""
    reported = lock_cache.report(env)
    assert lock_cache.host_independent(reported["config"])
    elsewhere = {**reported, "host": ["linux", "rocky9", "sapphirerapids"]}
    assert lock_cache.key(elsewhere) == lock_cache.key(reported)
    packages = {**reported["config"]["packages"], "all": {}}
    hosted = {**reported, "config": {**reported["config"], "packages": packages}}
    assert not lock_cache.host_independent(hosted["config"])
    assert lock_cache.key({**hosted, "host": elsewhere["host"]}) != lock_cache.key(hosted)


def test_a_committed_lockfile_is_copied_in_and_a_changed_input_solved_again(
    side_by_side, tmp_path, monkeypatch
):
    """A newcomer's empty cache: the committed lockfile of the same key is used without a
    solve; an input changed since (a definition's `when:`) makes another key: solved."""
    solved, _, _ = side_by_side
    monkeypatch.setattr(lock_cache, "COMMITTED", tmp_path / "committed")
    monkeypatch.setattr(lock_cache, "store", lambda: tmp_path / "empty-cache")
    saved = lock_cache.save(solved)
    assert saved == tmp_path / "committed" / f"{key(solved)}.lock"
    env = make_env(tmp_path / "newcomer")
    assert lock_cache.concretize(env) is True  # reused: no solve
    assert dag_hashes(env) == dag_hashes(solved)
    recipe = env.parent / "repo" / "packages" / "xpmem-stub" / "package.py"
    recipe.write_text(recipe.read_text() + "\n# changed since the lockfile was committed\n")
    assert lock_cache.concretize(env) is False  # another key: solved


def test_the_committed_lockfiles_are_the_cray_sites_current_ones():
    """environments/locks holds one lockfile per host-independent environment, each under
    the key of the environment's inputs today (`climstack concretize --save-locks`)."""
    committed = {path.stem for path in lock_cache.COMMITTED.glob("*.lock")}
    expected = {}
    for name, env_dir in environments.find_environments().items():
        reported = lock_cache.report(env_dir)
        if lock_cache.host_independent(reported["config"]):
            expected[name] = lock_cache.key(reported)
    assert set(expected) == {
        "archer2",
        "gaea-c5",
        "gaea-c6",
        "setonix",
        "frontier",
        "lumi",
        "perlmutter",
    }  # Cray
    stale = {name: k for name, k in expected.items() if k not in committed}
    assert not stale, f"run `bin/climstack concretize --save-locks` and commit: {stale}"
    assert committed == set(expected.values())


def test_an_images_solve_is_keyed_by_the_repository_in_the_image(tmp_path):
    """An image's environment is solved in ch-run (climstack.image.image._concretize) and
    reused under this key of what Spack in the image reports: the repository the image holds
    is read in the image, so a recipe changed there is another key; the builtin one, which
    ch-run binds at its own path, by its pinned commit."""
    work = tmp_path / "image"
    shutil.copytree(PROJECT_ROOT / "repo", work / "opt/climstack/repo")
    builtin = str(pins.builtin_repo_root())
    reported = {"builtin": builtin, "climstack": "/opt/climstack/repo"}
    repos = image.repos_on_host(work, reported)
    assert repos == {"builtin": builtin, "climstack": str(work / "opt/climstack/repo")}
    inputs = {"config": {}, "deprecated": False, "specs": ["mpi-probe"], "host": ["linux"]}
    before = lock_cache.key({**inputs, "repos": repos})
    assert lock_cache.key({**inputs, "repos": image.repos_on_host(work, reported)}) == before
    recipe = work / "opt/climstack/repo/packages/mpi-probe/package.py"
    recipe.write_text(recipe.read_text() + "# changed\n")
    assert lock_cache.key({**inputs, "repos": image.repos_on_host(work, reported)}) != before
