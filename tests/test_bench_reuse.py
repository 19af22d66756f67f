"""`bench local --reuse` (a warm `make local`): the newest report whose image, native
build, host MPI, harness and arguments are those of now is printed instead of measuring;
anything of them changed measures again."""

import shutil
import subprocess
from pathlib import Path

import pytest

from climstack import pins
from climstack.bench.model import cases
from climstack.bench.run import reuse
from climstack.image import image
from climstack.inputs import sites


def arguments(image_dir: Path, **changed) -> dict:
    given = dict(repeats=3, ranks=2, modes=None, runtime="charliecloud", fabric_prefix=None)
    return {"image_dir": image_dir, **given, **changed}


@pytest.fixture
def inputs(tmp_path):
    """An image directory with its inputs' stamp and a concretized environment."""
    image_dir, env_dir = tmp_path / "image", tmp_path / "env"
    (image_dir / image.INPUTS_STAMP).parent.mkdir(parents=True)
    image.inputs_stamp(image_dir).write_text("image inputs 1\n")
    env_dir.mkdir()
    (env_dir / "spack.lock").write_text('{"lock": 1}\n')
    return image_dir, env_dir


def test_the_key_follows_everything_measured(inputs):
    image_dir, env_dir = inputs
    first = reuse.key(env_dir, "container-archer2", **arguments(image_dir))
    assert reuse.key(env_dir, "container-archer2", **arguments(image_dir)) == first
    assert reuse.key(env_dir, "container-archer2", **arguments(image_dir, repeats=5)) != first
    (env_dir / "spack.lock").write_text('{"lock": 2}\n')  # the native build changed
    second = reuse.key(env_dir, "container-archer2", **arguments(image_dir))
    image.inputs_stamp(image_dir).write_text("image inputs 2\n")  # the image changed
    assert len({first, second, reuse.key(env_dir, "x", **arguments(image_dir))}) == 3


def test_the_key_follows_the_models_case_and_the_sites_site_yaml(inputs, tmp_path, monkeypatch):
    """A changed case (MOM6's MOM_override) or site.yaml (the plans every container mode
    runs on) reused the earlier report: neither was in the key. Copies of both, changed."""
    image_dir, env_dir = inputs
    shutil.copytree(sites.SITES_DIR, tmp_path / "site")
    shutil.copytree(cases.CASES, tmp_path / "cases")
    monkeypatch.setattr(sites, "SITES_DIR", tmp_path / "site")
    monkeypatch.setattr(cases, "CASES", tmp_path / "cases")
    first = reuse.key(env_dir, "container-archer2", **arguments(image_dir))
    override = tmp_path / "cases" / "mom6-benchmark" / "MOM_override"
    override.write_text(override.read_text() + "#override DT = 1800.0\n")
    second = reuse.key(env_dir, "container-archer2", **arguments(image_dir))
    bind = tmp_path / "site" / "local" / "site.yaml"
    bind.write_text(bind.read_text() + "# a changed plan\n")
    third = reuse.key(env_dir, "container-archer2", **arguments(image_dir))
    assert len({first, second, third}) == 3


def test_only_a_finished_report_of_the_same_key_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("CLIMSTACK_CACHE", str(tmp_path))
    older, newer = (pins.cache_dir() / "bench" / f"local-2026112{i}" for i in (6, 7))
    for out in (older, newer):
        (out / "raw").mkdir(parents=True)
        (out / "report.md").write_text("the report\n")
    reuse.keep(older, "k1", 0)
    (newer / reuse.KEY_FILE).write_text("k1\n")  # no exit status: it did not finish
    assert reuse.earlier("k1") == (older, 0)
    reuse.keep(newer, "k1", 1)
    assert reuse.earlier("k1") == (newer, 1) and reuse.earlier("k2") is None
    (newer / "report.md").unlink()  # its files gone: not reused, whatever its key says
    assert reuse.earlier("k1") == (older, 0)
    shutil.rmtree(older / "raw")
    assert reuse.earlier("k1") is None


def test_reuse_with_an_out_directory_is_refused(tmp_path):
    proc = subprocess.run(
        [str(pins.PROJECT_ROOT / "bin" / "climstack"), "bench", "local", "--reuse"]
        + ["--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--reuse takes an earlier report" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_new_report_leaves_the_newest_three_of_its_kind(tmp_path, monkeypatch):
    """2.3 GB a `bench local` report, 1.7 GB a `bench abi` one: CI runs one after another
    on one machine filled its disk. A new report removes the older ones of its kind beyond
    the newest three; another kind, a directory named otherwise and an --out elsewhere stay."""
    from climstack.bench.run import kept

    monkeypatch.setenv("CLIMSTACK_CACHE", str(tmp_path / "cache"))
    bench = tmp_path / "cache" / "bench"
    names = [f"local-2026113{day}-120000" for day in range(5)] + ["abi-20261101-120000", "mine"]
    for name in names:
        (bench / name / "raw").mkdir(parents=True)
    newest = bench / "local-20261134-120000"
    assert kept.prune(newest) == [bench / "local-20261130-120000", bench / "local-20261131-120000"]
    assert sorted(p.name for p in bench.iterdir()) == sorted(names[2:])
    assert kept.prune(bench / "mine") == [] and kept.prune(tmp_path / newest.name) == []
    # the run's own directory is kept even when it sorts among the old (a clock set back)
    oldest = bench / "local-20260101-000000"
    oldest.mkdir()
    assert kept.prune(oldest) == [] and oldest.is_dir()
