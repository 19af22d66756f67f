"""A benchmark run that hangs is stopped at its timeout and run again, HANG_ATTEMPTS times
in all; the header says how many attempts were stopped and which was timed, the retry runs
in the run's place in the rotated order, and the report's cells (report.md, summary.json)
name it. A hang at every attempt is the run's failure. Under podman, the hung attempt's
container and its conmon are gone before the retry starts, and no other run's container;
benchmarks/podman_launch.py kills a hung run's whole process group. Real processes, 2 s
timeouts; real podman containers (a rootfs of dash and coreutils), 8 s."""

import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from climstack import pins
from climstack.bench.report import headline
from climstack.bench.report import report as bench_report
from climstack.bench.results import collect, headers
from climstack.bench.run import leftovers, runner
from climstack.bench.run.modes import Mode
from climstack.launch.runtimes import podman

#: hangs on its first start in a directory, prints a result on the next
HANGS_ONCE = 'if [ -e started ]; then echo "# result 1.0"; else touch started; sleep 60; fi'
#: prints its results, then never ends, as Debian's MPICH 4.0.2 in podman did at finalize
HANGS_ALWAYS = "echo x >> attempts; printf '# Size  Latency\\n1  1.99\\n8  '; sleep 60"


def shell_mode(script: str) -> Mode:
    return Mode(
        "shell", "none", lambda program, cwd=None: ["sh", "-c", script], lambda b: "unused"
    )


def fields() -> dict:
    return {"benchmark": "osu", "mode": "shell", "ranks": 2, "repeat": 1, "order": 1}


def sleepers_left() -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if line.strip() == "sleep 60"]


def test_a_run_that_hangs_once_runs_again_and_its_header_says_so(tmp_path):
    given = fields()
    text = runner.run_one(runner.LOCAL[0], shell_mode(HANGS_ONCE), tmp_path, 2, 2, given)
    assert text == "# result 1.0\n"
    assert given["hung"].startswith(f"1 of {runner.HANG_ATTEMPTS} attempts: ")
    assert given["attempt"] == 2  # the attempt whose output is kept
    assert "still running after 2 s" in given["hung"]
    parsed = headers.parse(headers.header(given))  # what the runner writes above the output
    assert parsed["hung"] == " ".join(given["hung"].split())
    assert not sleepers_left()


def test_a_run_that_hangs_at_every_attempt_fails_on_one_header_line(tmp_path):
    given = fields()
    text = runner.run_one(runner.LOCAL[0], shell_mode(HANGS_ALWAYS), tmp_path, 2, 2, given)
    assert (tmp_path / "attempts").read_text() == "x\n" * runner.HANG_ATTEMPTS
    assert text.count("\n") == 1  # one header line, though the reason quotes output
    parsed = headers.parse(text)
    assert parsed["failed"] == "yes"
    assert "still running after 2 s" in parsed["reason"] and "1 1.99" in parsed["reason"]
    assert parsed["hung"].startswith(f"{runner.HANG_ATTEMPTS} of {runner.HANG_ATTEMPTS} ")
    assert not sleepers_left()


def test_a_run_that_fails_is_not_run_again(tmp_path):
    script = 'echo x >> attempts; echo "broken" >&2; exit 4'
    given = fields()
    text = runner.run_one(runner.LOCAL[0], shell_mode(script), tmp_path, 2, 30, given)
    assert "exit 4" in headers.parse(text)["reason"]
    assert (tmp_path / "attempts").read_text() == "x\n"
    assert "hung" not in given


def test_osu_runs_count_as_hung_after_a_minute_the_others_after_the_batchs_timeout():
    osu = [b for b in runner.LOCAL if b.family == "osu"]
    assert len(osu) == 7 and {b.hung_after for b in osu} == {runner.OSU_HUNG_AFTER}
    assert {b.hung_after for b in runner.LOCAL if b.family != "osu"} == {None}


#: each mode's program: logs its start, bind's second run hangs once, then OSU's table
IN_ORDER = (
    "echo {mode} >> order; "
    'if [ {mode} = bind ] && [ ! -e hung ] && [ "$(grep -c bind order)" -ge 2 ]; then '
    "touch hung; sleep 60; fi; "
    "printf '# OSU MPI Latency Test v7.4\\n# Size  Avg Latency(us)\\n1  1.{mode_digit}0\\n'"
)


def logging_mode(name: str, digit: int) -> Mode:
    script = IN_ORDER.format(mode=name, mode_digit=digit)
    return Mode(name, "none", lambda program, cwd=None: ["sh", "-c", script], lambda b: "unused")


def test_a_retried_run_keeps_its_place_and_its_cells_say_so(tmp_path):
    """Two repeats of native, bind and hybrid, the order rotated; bind's run of repeat 2
    (first in its repeat) hangs once. Its retry runs at once, before the next run of the
    order; its header says 1 attempt stopped, attempt 2 timed; report.md and summary.json
    name it in bind's cell (not in hybrid's) and in the batch's line. Fails with the
    header's `hung=` not read, or with the retry not run in place."""
    benchmark = replace(runner.LOCAL[0], hung_after=2)
    modes = [logging_mode(name, digit) for digit, name in enumerate(("native", "bind", "hybrid"))]
    runner.run_all([benchmark], modes, tmp_path, repeats=2, ranks=2)
    started = (runner.work_root(tmp_path) / benchmark.name / "order").read_text().split()
    assert started == ["native", "bind", "hybrid", "bind", "bind", "hybrid", "native"]
    raw = tmp_path / "raw" / f"{benchmark.name}.bind.r2.out"
    header = headers.parse(raw.read_text().split("\n", 1)[0])
    assert header["order"] == "1" and header["attempt"] == "2"
    assert header["hung"].startswith(f"1 of {runner.HANG_ATTEMPTS} attempts: ")
    assert not sleepers_left()

    records, failures, problems = collect.read_paths([tmp_path / "raw"])
    assert {(r.mode, r.repeat) for r in records if r.hung} == {("bind", 2)}
    bench_report.write(records, failures, problems, tmp_path / "report")
    retried = [{"mode": "bind", "repeat": 2, "hung": 1, "timed": 2}]
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    cells = summary["rows"][0]["modes"]
    assert cells["bind"]["retried"] == retried and cells["hybrid"]["retried"] == []
    text = (tmp_path / "report" / "report.md").read_text()
    named = "retried after a hang: bind r2 (1 attempt stopped, attempt 2 timed)"
    (row,) = [line for line in text.splitlines() if line.startswith("| osu |")]
    bind, hybrid = row.split(" | ")[4:6]
    assert bind.endswith(named) and "retried" not in hybrid
    assert "1 run retried after a hang, each at once in its place in the order" in text
    assert headline.cell_text(headline.rows(records, failures)[0].cells["bind"]).endswith(named)


# --- under podman: the hung attempt's container and conmon gone before the retry

needs_podman = pytest.mark.skipif(
    not all(map(shutil.which, ("podman", "runc", "pgrep"))) or os.geteuid() != 0,
    reason="needs root, Debian's podman and runc (bin/setup installs them)",
)
#: the programs of the container's root file system, with the libraries they load
ROOTFS_PROGRAMS = ("dash", "sleep", "true", "echo", "cat")
#: in the container: hangs on its first start in /w, prints a result on the next
IN_CONTAINER = (
    'if [ -e /w/started ]; then echo "# result 1.0"; else echo > /w/started; sleep 60; fi'
)
#: on the host, before each attempt: for each earlier attempt's container (its --cidfile),
#: whether it or its conmon is still there; then this attempt's `podman run`
BEFORE_EACH = (
    'for f in cid.*; do [ -e "$f" ] || continue; c=$(cat "$f"); '
    "n=$(podman {globals} ps -aq --no-trunc --filter id=$c | wc -l); "
    'echo "$f container:$n conmon:$(pgrep -fc "[c]onmon.*$c")" >> state; done; '
    "exec podman {globals} run --rm {run} --label={label} --label={run_label} "
    "--cidfile=cid.$(ls | grep -c '^cid[.]') "
    '--volume="$PWD:/w" --rootfs {rootfs}:O sh -c "$0"'
)


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory) -> Path:
    """A root file system of dash and a few coreutils, with their libraries."""
    root = tmp_path_factory.mktemp("rootfs")
    for name in ("bin", "dev", "proc", "sys", "tmp", "w"):
        (root / name).mkdir()
    for name in ROOTFS_PROGRAMS:
        program = Path(shutil.which(name)).resolve()
        shutil.copy(program, root / "bin" / name)
        ldd = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
        for library in (w for w in ldd.split() if w.startswith("/")):
            (root / library[1:]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(library, root / library[1:])
    (root / "bin" / "sh").symlink_to("dash")
    return root


def labelled(value: str) -> list[str]:
    argv = ["podman", "ps", "-aq", "--filter", f"label={podman.LABEL}={value}"]
    return subprocess.run(argv, capture_output=True, text=True).stdout.split()


@needs_podman
def test_after_a_timeout_under_podman_container_and_conmon_are_gone_before_the_retry(
    tmp_path, rootfs
):
    """A real container whose first attempt hangs: killing the launch's process group
    leaves its conmon and the container running; the mode's stop (leftovers.stop_podman,
    by the plan's label) removes both, so at the retry's start neither is left, and the
    retry's result is the run's. Fails with the stop taken out of again_if_hung."""
    found = podman.settings(shutil.which("podman"), str(rootfs))
    value = f"hang-test-{os.getpid()}-{tmp_path.name}"
    script = BEFORE_EACH.format(
        globals=" ".join(found.global_args), run=" ".join(found.run_args),
        label=f"{podman.LABEL}={value}", run_label=f"{podman.RUN_LABEL}={podman.RUN}",
        rootfs=rootfs,
    )  # fmt: skip
    stop = functools.partial(leftovers.stop_podman, value, found.global_args)
    mode = Mode(
        "shell", "podman", lambda program, cwd=None: ["sh", "-c", script, IN_CONTAINER],
        lambda b: "unused", stop=stop,
    )  # fmt: skip
    given = fields()
    try:
        text = runner.run_one(runner.LOCAL[0], mode, tmp_path, 2, 8, given)
        state = (tmp_path / "state").read_text().splitlines()
    finally:  # whatever happened, none of ours left
        if left := labelled(value):
            subprocess.run(["podman", *found.global_args, "rm", "-f", "-t", "0", *left])
    assert text == "# result 1.0\n", text
    assert given["hung"].startswith(f"1 of {runner.HANG_ATTEMPTS} attempts: ")
    assert state == ["cid.0 container:0 conmon:0"]  # at the retry's start
    assert not left and not sleepers_left()


def started(found, rootfs: Path, value: str, run: str) -> str:
    """A container of the plan `value` and the run `run`, sleeping; its id."""
    argv = ["podman", *found.global_args, "run", "--detach", "--rm", *found.run_args]
    argv += [f"--label={podman.LABEL}={value}", f"--label={podman.RUN_LABEL}={run}"]
    argv += ["--rootfs", f"{rootfs}:O", "sleep", "600"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def two_runs(tmp_path, rootfs):
    """(plan label value, {run: container id}): a container of this run (this process's
    podman.RUN) and one of another run (a `bench` beside this one), of one plan; both
    removed after the test."""
    found = podman.settings(shutil.which("podman"), str(rootfs))
    value = f"runs-test-{os.getpid()}-{tmp_path.name}"
    try:
        yield value, {run: started(found, rootfs, value, run) for run in (podman.RUN, "other")}
    finally:
        if left := labelled(value):
            subprocess.run(["podman", *found.global_args, "rm", "-f", "-t", "0", *left])


@needs_podman
def test_the_stop_after_a_timeout_removes_this_runs_containers_only(two_runs):
    """Two runs' containers of one plan: the stop removes this run's only (by the plan's
    label alone, it removed the other run's too)."""
    value, ids = two_runs
    leftovers.stop_podman(value)
    assert labelled(value) == [ids["other"][:12]]  # podman ps's short id


def podman_launch():
    """benchmarks/podman_launch.py, imported."""
    path = pins.PROJECT_ROOT / "benchmarks" / "podman_launch.py"
    spec = importlib.util.spec_from_file_location("podman_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pids_of(*argv: str) -> list[int]:
    """The processes whose command line is `argv`."""
    want, found = "\0".join(argv).encode() + b"\0", []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes() == want:
                found.append(int(cmdline.parent.name))
        except OSError:
            continue  # it ended meanwhile
    return found


@needs_podman
def test_the_podman_benchmark_stops_a_hung_runs_process_group_and_its_own_containers(
    tmp_path, two_runs, monkeypatch
):
    """benchmarks/podman_launch.py's run past bench's hang limit (1 s here): the shell's
    child in its process group is killed with it (the child alone was), and this run's
    container is removed, not the other run's (every container of the label was)."""
    value, ids = two_runs
    monkeypatch.setattr(runner, "OSU_HUNG_AFTER", 1)
    try:
        state, _, _ = podman_launch().timed(["sh", "-c", "sleep 3608 & sleep 3609"], tmp_path)
        left = pids_of("sleep", "3608")
    finally:
        for pid in pids_of("sleep", "3608") + pids_of("sleep", "3609"):
            os.kill(pid, signal.SIGKILL)
    assert state == "hung" and not left, "the hung run's child outlived it"
    assert labelled(value) == [ids["other"][:12]]
