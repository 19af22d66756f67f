"""No route around the verdict (climstack.check.gate): `bench local`'s modes, `bench SITE
--emit`, the container smokes and `slurm` stop before a program runs or a script is written
when verify refuses it, in each way a verdict falls short: the model refuses the plan (the
image keeps its own MPI by RUNPATH), the image's own ld.so disagrees with the model, ld.so
was not asked (no ch-run here), or, as through mpi_abi_wrapper, not about the wrapper's link
map; only an unasked loader is accepted with --model-only, and then said. `verify --run`
and `modules --image` are tests/test_verify_map.py's and tests/test_modules.py's.

On the ARCHER2 image `make local` built and the local site's bind plan."""

import os
from dataclasses import replace
from pathlib import Path

import pytest

from climstack import pins
from climstack.bench.run import jobs, modes, runner
from climstack.bind import plan as planner
from climstack.check import container_smoke, gate, oracle, verify
from climstack.cli import slurm
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.inputs import sites
from climstack.jobs.slurm import Component

BENCHMARK = next(b for b in runner.LOCAL if b.name == "osu_latency")
PROGRAM = f"{image.VIEW}/{BENCHMARK.argv[0]}"
#: the ways a verdict falls short, and what the refusal says
CASES = {
    "refused by the model": "the loader picks the image's own /opt/mpich-3.4.3/lib/libmpi.so.12",
    "ld.so disagrees": "disagrees with climstack's model",
    "ld.so not asked": "no ch-run on this host",
    "wrapper map not asked": "libmpiwrapper's link map: not asked",
}


@pytest.fixture(scope="module")
def image_dir(archer2_image) -> Path:
    return archer2_image


@pytest.fixture
def falls_short(request, monkeypatch, tmp_path):
    """The case's way: a plan binding no library path (the program's RUNPATH then finds
    the image's MPICH), an ld.so answer that differs from the model's, or a PATH without
    Charliecloud (a login node before `module load`)."""
    case = request.param
    if case == "refused by the model":
        make = planner.make
        monkeypatch.setattr(
            planner, "make", lambda *a, **k: replace(make(*a, **k), library_path=[])
        )
    elif case == "wrapper map not asked":  # as through mpi_abi_wrapper, its map not listed
        check = verify.check

        def through_the_wrapper(*args, **kwargs):
            report = check(*args, **kwargs)
            report.wrapper = {
                "library": "/host/lib/libmpiwrapper.so",  # wrapper_check's
                "built_against": "libmpi.so.12",
                "imports": 688,
                "lacking": 0,
            }
            return report

        monkeypatch.setattr(verify, "check", through_the_wrapper)
    elif case == "ld.so disagrees":
        said = "the image's own ld.so disagrees with climstack's model of it: libmpi.so.12"
        monkeypatch.setattr(oracle, "ask", lambda *a, **k: ("disagrees", [said]))
    else:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        for program in Path("/usr/bin").iterdir():
            if not program.name.startswith("ch-"):
                (bin_dir / program.name).symlink_to(program)
        monkeypatch.setenv("PATH", f"{pins.PROJECT_ROOT / '.venv' / 'bin'}:{bin_dir}")
    return case


def bench_mode(image_dir, model_only=False):
    return modes.container("bind", image_dir, ["mpiexec", "-n", "2"], 2, env=dict(os.environ),
                           model_only=model_only)  # fmt: skip


def emitted(image_dir, out, model_only=False) -> str:
    """osu-latency's script of `bench local --emit --modes native,bind`."""
    jobs.emit(sites.get("local"), out, str(image_dir), repeats=1, ranks=2,
              only=("native", "bind"), model_only=model_only)  # fmt: skip
    return (out / "osu-latency.sh").read_text()


def slurm_preflight(image_dir, tmp_path, model_only=False):
    made = planner.make(sites.get("local"), "bind", out=tmp_path / "plan")
    components = [Component(1, 2, [PROGRAM])]
    slurm.preflight(made, image_dir, components, model_only)


ALL_CASES = pytest.mark.parametrize("falls_short", list(CASES), indirect=True)


@ALL_CASES
def test_bench_local_runs_no_program_verify_did_not_confirm(image_dir, falls_short):
    with pytest.raises(LookupError, match="verify refuses") as refused:
        bench_mode(image_dir).locate(BENCHMARK)
    assert CASES[falls_short] in str(refused.value)


@ALL_CASES
def test_emit_writes_no_mode_verify_did_not_confirm(image_dir, falls_short, tmp_path, capfd):
    text = emitted(image_dir, tmp_path / "jobs")
    assert "# not emitted: bind: verify refuses" in text
    assert "\nrun_bind()" not in text and "\nrun_native()" in text
    said = capfd.readouterr().err
    assert "osu-latency: bind not emitted: verify refuses" in said and CASES[falls_short] in said


@ALL_CASES
def test_the_smoke_launches_nothing_verify_did_not_confirm(image_dir, falls_short, capfd):
    with pytest.raises(gate.Refused, match="is not proven to run on the host MPI") as refused:
        container_smoke.probe("charliecloud", image_dir, container_smoke.PROBE, 2)
    assert CASES[falls_short] in refused.value.why
    assert "mpi-probe on 2 ranks" not in capfd.readouterr().err  # never launched


@ALL_CASES
def test_slurm_writes_no_script_verify_did_not_confirm(image_dir, falls_short, tmp_path):
    with pytest.raises(gate.Refused) as refused:
        slurm_preflight(image_dir, tmp_path)
    assert CASES[falls_short] in refused.value.why


@pytest.mark.parametrize("falls_short", ["ld.so not asked"], indirect=True)
def test_model_only_accepts_an_unasked_loader_and_says_so(image_dir, falls_short, tmp_path, capfd):
    assert bench_mode(image_dir, model_only=True).locate(BENCHMARK).endswith(BENCHMARK.argv[0])
    assert "\nrun_bind()" in emitted(image_dir, tmp_path / "jobs", model_only=True)
    slurm_preflight(image_dir, tmp_path, model_only=True)
    said = capfd.readouterr().err
    for route in ("bench bind", "slurm"):
        assert f"{route}: --model-only: {PROGRAM}" in said or f"{route}: --model-only: " in said
    assert said.count("accepted on the model's ok alone (no ch-run on this host)") >= 3


@pytest.mark.parametrize("falls_short", ["refused by the model"], indirect=True)
def test_model_only_never_accepts_a_refusal(image_dir, falls_short, tmp_path):
    with pytest.raises(LookupError, match="verify refuses"):
        bench_mode(image_dir, model_only=True).locate(BENCHMARK)
    assert "\nrun_bind()" not in emitted(image_dir, tmp_path / "jobs", model_only=True)
    with pytest.raises(gate.Refused):
        slurm_preflight(image_dir, tmp_path, model_only=True)


def test_an_image_that_is_not_there_is_named(tmp_path):
    made = planner.make(sites.get("local"), "bind", out=tmp_path / "plan")
    with pytest.raises(ClimstackError, match=f"image {tmp_path / 'app.sif'} does not exist"):
        gate.require(made, tmp_path / "app.sif", [PROGRAM], False, "slurm", fix="-")
