"""`climstack bench scale` (climstack.bench.scale): real launches of osu_init natively and in
the ARCHER2 image under Apptainer 1.5.3, one SIF mount per rank and `--sharens`, observed
from outside (processes, squashfuse mounts, PSS, strace's metadata calls sorted by where they
land); the growth fitted, and the load at 10,000 ranks from it."""

import json
import subprocess
import sys

import pytest
from conftest import PROJECT_ROOT

from climstack.bench.scale import growth, observe
from climstack.bench.scale.scale_modes import Launch, as_user
from climstack.launch import provided_apptainer
from climstack.launch.runtimes import apptainer

RANK_PROGRAM = "/opt/view/bin/osu_init"


@pytest.fixture(scope="module")
def runs(archer2_image, tmp_path_factory):
    out = tmp_path_factory.mktemp("scale") / "report"
    proc = subprocess.run(
        [PROJECT_ROOT / "bin" / "climstack", "bench", "scale", "--ranks", "1,2",
         "--repeats", "2", "--model-ranks", "2", "--modes", "native,apptainer,apptainer-sharens",
         "--image", archer2_image, "--out", out],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    return out, proc.stdout, rows


def _of(rows, mode, ranks):
    return [r for r in rows if r["mode"] == mode and r.get("ranks") == ranks and "model" not in r]


def test_apptainer_mounts_the_sif_once_per_rank_and_once_with_sharens(runs):
    """One squashfuse per `apptainer exec`; with --sharens, the second rank joins the
    first's mount (the launcher under one user namespace, as an ordinary user's is)."""
    _, _, rows = runs
    assert all(r["image_mounts"] == 1 for r in _of(rows, "apptainer", 1))
    assert max(r["image_mounts"] for r in _of(rows, "apptainer", 2)) == 2
    assert min(r["image_mounts"] for r in _of(rows, "apptainer-sharens", 2)) == 1
    assert all(r["image_mounts"] == 0 for r in _of(rows, "native", 2))
    assert all(r["pss_mib"] > 1 and r["processes"] >= 3 for r in _of(rows, "native", 2))


def test_the_ranks_calls_are_sorted_by_where_they_land(runs):
    """Natively the ranks look their libraries up in the install tree (the shared file
    system at a centre); in the image they look up in it and on the bind plan's paths, and
    only the runtime's opens of the SIF are charged to the shared file system."""
    _, _, rows = runs
    for row in _of(rows, "native", 2):
        assert row["calls"]["install tree"] > 0 and row["calls"]["image"] == 0
        assert row["calls_shared"] == row["calls"]["install tree"]
    for row in _of(rows, "apptainer", 2):
        calls = row["calls"]
        assert calls["image"] > 0 and calls["bind paths"] > 0 and calls["install tree"] == 0
        assert 0 < row["calls_shared"] == calls["image file"] < calls["image"]
    (loader,) = [r for r in rows if r.get("loader") == "MOM6"]  # natively
    assert loader["calls_shared"] == loader["calls"]["install tree"] > 100


def test_mom6_starts_in_each_mode(runs):
    """MOM6's case for one forcing step, natively and in the image under both Apptainer
    routes (its work directory bound in): the seconds from the launch to its main loop."""
    _, printed, rows = runs
    started = [r for r in rows if r.get("model") == "MOM6"]
    assert sorted(r["mode"] for r in started) == sorted(["native", "apptainer",
                                                         "apptainer-sharens"] * 2)  # fmt: skip
    assert all(0 < r["to_main_loop_s"] < r["model_wall_s"] for r in started)
    assert "| MOM6 to its main loop (s) per rank | " in printed


def test_the_report_fits_the_growth_and_projects_10000_ranks(runs):
    out, printed, _ = runs
    assert "| SIF mounts per rank | " in printed
    assert (out / "scale.png").stat().st_size > 10_000
    at_scale = printed.split("### At 1,000 and 10,000 ranks")[1]
    assert "| native | " in at_scale and "| apptainer-sharens | " in at_scale
    assert "| native, MOM6's loader alone | " in at_scale
    assert "400,000 calls/s" in at_scale


def test_strace_lines_are_charged_to_the_rank_after_it_execs_the_program():
    launch = Launch("apptainer", 1, [], {}, RANK_PROGRAM, True, "/c/image.sif", "")
    starter = 'openat(AT_FDCWD, "/c/image.sif", O_RDONLY) = 3\nstat("/etc/passwd", {}) = 0\n'
    rank = (
        f'execve("{RANK_PROGRAM}", ["osu_init"], 0x7ffd /* 9 vars */) = 0\n'
        'openat(AT_FDCWD, "/opt/climstack/bind/lib/libmpi.so.12", O_RDONLY|O_CLOEXEC) = 3\n'
        'openat(AT_FDCWD, "/opt/view/lib/glibc-hwcaps/x86-64-v3/libmpi.so.12", O_RDONLY) = '
        "-1 ENOENT (No such file or directory)\n"
        'newfstatat(AT_FDCWD, "/proc/self/maps", {st_mode=S_IFREG|0444}, 0) = 0\n'
        'readlink("/opt/climstack/host/usr/lib/x86_64-linux-gnu/libfabric.so.1", "x", 4095) = 1\n'
    )
    assert observe.sort_calls(starter, launch) == {"image file": 1, "runtime": 1}
    assert observe.sort_calls(rank, launch) == {"bind paths": 2, "image": 1, "kernel": 1}


def test_the_fit_recovers_a_line_and_its_projection():
    line = growth.fit([(2, 10 + 2 * 5), (4, 10 + 4 * 5), (8, 10 + 8 * 5), (8, 10 + 8 * 5)])
    assert line.per_rank == pytest.approx(5) and line.per_launch == pytest.approx(10)
    calls, seconds = growth.load_at(line, 12_800)  # 100 nodes of 128 ranks
    assert calls == pytest.approx(100 * 10 + 12_800 * 5)
    assert seconds == pytest.approx(calls / growth.MDS_RATE)
    assert growth.fit([(2, 1.0), (2, 2.0), (2, 3.0)]) is None  # one rank count: no slope


def test_apptainer_runs_as_an_ordinary_user():
    """The release's own binary per rank (not bin/apptainer's Python wrapper), under one
    namespace around the launcher when run as root."""
    wrapper = apptainer.on_this_machine()
    argv = as_user(
        ["mpiexec", "-n", "2", wrapper, "exec", "-B", "a:b", "x.sif", "p"], ["--sharens"]
    )
    at = argv.index("exec")
    assert argv[at - 1] == str(provided_apptainer.built()) and wrapper not in argv
    assert argv[at + 1] == "--sharens" and argv[-2:] == ["x.sif", "p"]
    assert as_user(["mpiexec", "ch-run", "img"], ["--sharens"]) == ["mpiexec", "ch-run", "img"]
    assert argv[:3] == [sys.executable, "-m", "climstack.common.userns"]


def test_bad_rank_counts_and_modes_are_refused_naming_the_option(tmp_path):
    (tmp_path / "runs.jsonl").write_text('{"not": "a run"}\n')
    for option, value in (("--ranks", "4"), ("--ranks", "2,x"), ("--modes", "docker"),
                          ("--report", tmp_path / "runs.jsonl")):  # fmt: skip
        proc = subprocess.run(
            [PROJECT_ROOT / "bin" / "climstack", "bench", "scale", option, value,
             "--out", tmp_path / "never"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2 and option in proc.stderr, proc.stderr
        assert not (tmp_path / "never").exists()
