"""No `ok` without the real loader: where the image's own ld.so was not asked (its runtime
not on PATH, --no-oracle, no image's runtime), verify says `ok by the model alone: WHY` and
exits 4, and `slurm`'s pre-flight and the benchmarks refuse such a plan unless the user
accepts the model (`--model-only`). Before this, each case below printed `verdict: ok`
and exited 0."""

import os
import subprocess
from pathlib import Path

import pytest

from climstack import pins
from climstack.bind import plan as planner
from climstack.check import verdict, verify
from climstack.errors import UNCONFIRMED
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack_dev import programs as helpers

CLIMSTACK = str(pins.PROJECT_ROOT / "bin" / "climstack")


@pytest.fixture(scope="module")
def plan(image, tmp_path_factory):
    made = planner.make_plan(sites.get("local"), environ={})
    made = planner.write(made, tmp_path_factory.mktemp("plan"))
    runtimes.get("charliecloud").prepare_image(made, image)
    return made


@pytest.fixture(scope="module")
def without_ch_run(tmp_path_factory):
    """An environment whose PATH has every program of /usr/bin but Charliecloud's (as a
    login node before `module load` of the runtime)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for program in Path("/usr/bin").iterdir():
        if not program.name.startswith("ch-"):
            (bin_dir / program.name).symlink_to(program)
    return {**os.environ, "PATH": f"{pins.PROJECT_ROOT / '.venv' / 'bin'}:{bin_dir}"}


def climstack(*args, env=None):
    return subprocess.run(
        [CLIMSTACK, *map(str, args)], capture_output=True, text=True, env=env or os.environ
    )


def test_a_report_is_ok_only_when_the_loader_agrees():
    """The verdict's one rule, on every state of the oracle: the model's pass is `ok` only
    with the real ld.so's agreement; refusals and gaps win over both."""
    for oracle, expected in (
        ("agrees", "ok"),
        ("not asked: no ch-run on this host", "ok by the model alone: no ch-run on this host"),
        ("not asked: --no-oracle", "ok by the model alone: --no-oracle"),
        ("", "ok by the model alone: the image's own ld.so was not asked"),
    ):
        report = verdict.Report("/bin/app", oracle=oracle)
        assert report.verdict.startswith(expected), (oracle, report.verdict)
        assert report.passed and report.ok == (oracle == "agrees")
        assert bool(report.refusal()) == (oracle != "agrees")
        assert not report.refusal(model_only=True)
    refused = verdict.Report("/bin/app", oracle="agrees", problems=["no libmpi.so.12"])
    assert refused.verdict == "refused" and "no libmpi.so.12" in refused.refusal(True)
    unchecked = verdict.Report("/bin/app", oracle="agrees", unchecked=["no --plan"])
    assert unchecked.verdict == "not checked" and not unchecked.ok
    # through mpi_abi_wrapper the wrapper's map needs the loader's word too: a wrapper checked
    # but never asked about once counted as agreement
    for wrapper_oracle, ok in (("agrees", True), (None, False), ("failed: exit 1", False)):
        wrapper = {"library": "/host/libmpiwrapper.so", "imports": 688}
        if wrapper_oracle:
            wrapper["oracle"] = wrapper_oracle
        through = verdict.Report("/bin/app", oracle="agrees", wrapper=wrapper)
        assert through.ok == ok and bool(through.refusal()) != ok, through.verdict
        if not ok:
            expected = f"libmpiwrapper's link map: {wrapper_oracle or 'not asked'}"
            assert expected in through.verdict


def test_verify_without_the_runtime_says_model_alone_and_exits_4(image, plan, without_ch_run):
    argv = ("verify", helpers.BASE_PROBE, "--image", image, "--plan", plan.directory)
    asked = climstack(*argv)
    assert asked.returncode == 0 and "\nverdict: ok\n" in asked.stdout + "\n", asked.stdout
    for proc, why in (
        (climstack(*argv, env=without_ch_run), "no ch-run on this host"),
        (climstack(*argv, "--no-oracle"), "--no-oracle"),
    ):
        assert proc.returncode == UNCONFIRMED, proc.stdout + proc.stderr
        assert f"verdict: ok by the model alone: {why}" in proc.stdout, proc.stdout
        assert "\nverdict: ok\n" not in proc.stdout + "\n"


def test_verify_on_the_host_without_an_image_is_not_a_plain_ok(image, plan):
    report = verify.check(helpers.BASE_PROBE, plan, image)  # the runtime not given
    assert report.passed and not report.ok, report.problems
    assert report.verdict.startswith("ok by the model alone: the image's runtime was not given")


def test_slurm_preflight_refuses_an_unconfirmed_plan_unless_asked(
    image, plan, without_ch_run, tmp_path
):
    argv = ("slurm", "local", "--plan", plan.directory, "--image", image, "--ntasks", "2")
    refused = climstack(*argv, "--command", helpers.BASE_PROBE, env=without_ch_run)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "ok by the model alone: no ch-run on this host" in refused.stderr
    assert "--model-only" in refused.stderr and not refused.stdout
    accepted = climstack(
        *argv, "--model-only", "--command", helpers.BASE_PROBE, env=without_ch_run
    )
    assert accepted.returncode == 0 and "srun" in accepted.stdout, accepted.stderr
    confirmed = climstack(*argv, "--command", helpers.BASE_PROBE)  # ch-run on PATH
    assert confirmed.returncode == 0 and "srun" in confirmed.stdout, confirmed.stderr


def test_slurm_preflight_refuses_an_image_that_does_not_exist(plan, tmp_path):
    proc = climstack(
        "slurm", "local", "--plan", plan.directory, "--image", tmp_path / "app.sif",
        "--command", helpers.BASE_PROBE,
    )  # fmt: skip
    assert proc.returncode == 2 and f"--image {tmp_path / 'app.sif'} does not exist" in proc.stderr
    assert "--no-verify" in proc.stderr


def test_rules_that_stood_in_for_the_images_are_named_and_never_a_plain_ok(
    image, plan, tmp_path, monkeypatch
):
    """The model follows the image's own ld.so and its ld.so.cache read by this host's
    ldconfig. Where that ldconfig is missing (ld.so.conf's directories scanned instead) or
    cannot read the image's cache (taken as absent), the verdict said "the image's own
    ld.so and ld.so.cache" and ok; now it names the rule that stood in, and is no plain ok
    even where the image's ld.so agrees."""
    from climstack.bind import glibc_rules

    program = helpers.BASE_PROBE
    asked = verify.check(program, plan, image, runtime_image=image)
    assert asked.ok and asked.rules.endswith("and ld.so.cache") and not asked.rules_stand_in
    which = glibc_rules.shutil.which
    with monkeypatch.context() as patched:  # a host without ldconfig (a minimal login node)
        patched.setattr(
            glibc_rules.shutil, "which", lambda n, **k: None if n == "ldconfig" else which(n, **k)
        )
        glibc_rules._asked.cache_clear()
        scanned = verify.check(program, plan, image, runtime_image=image)
    glibc_rules._asked.cache_clear()
    assert "no ldconfig on this host" in scanned.rules and "ld.so.conf scanned" in scanned.rules
    assert scanned.passed and not scanned.ok and scanned.oracle == "agrees"
    assert scanned.verdict.startswith("ok by the model alone: the model's search rules stood in")
    copy = helpers.probe_image_copy(tmp_path)
    cache = copy / "etc" / "ld.so.cache"
    cache.unlink()  # a hard link into the cached image: replaced, not written through
    cache.write_bytes(b"not a cache of any glibc\n")
    runtimes.get("charliecloud").prepare_image(plan, copy)
    unread = verify.check(program, plan, copy, runtime_image=copy)
    assert "cannot read the image's ld.so.cache" in unread.rules and not unread.ok
    assert "taken as absent" in unread.verdict
