"""A benchmark run that hangs is stopped at its timeout and run again, HANG_ATTEMPTS times
in all; the header says how many attempts were stopped. A hang at every attempt is the
run's failure. Real processes, 2 s timeouts."""

import subprocess

from climstack.bench.results import headers
from climstack.bench.run import runner
from climstack.bench.run.modes import Mode

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
