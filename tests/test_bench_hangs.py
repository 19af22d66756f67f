"""A benchmark run that hangs is stopped at its timeout and run once more; the header keeps
the first attempt's end. A second hang is the run's failure. Real processes, 2 s timeouts."""

import subprocess

from climstack.bench.results import headers
from climstack.bench.run import runner
from climstack.bench.run.modes import Mode

#: hangs on its first start in a directory, prints a result on the next
HANGS_ONCE = 'if [ -e started ]; then echo "# result 1.0"; else touch started; sleep 60; fi'


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
    assert "still running after 2 s" in given["hung_once"]
    parsed = headers.parse(headers.header(given))  # what the runner writes above the output
    assert parsed["hung_once"] == given["hung_once"]
    assert not sleepers_left()


def test_a_run_that_hangs_twice_fails_with_both_ends_named(tmp_path):
    given = fields()
    text = runner.run_one(runner.LOCAL[0], shell_mode("sleep 60"), tmp_path, 2, 2, given)
    parsed = headers.parse(text)
    assert parsed["failed"] == "yes"
    assert "still running after 2 s" in parsed["reason"]
    assert "still running after 2 s" in parsed["hung_once"]
    assert not sleepers_left()


def test_a_run_that_fails_is_not_run_again(tmp_path):
    script = 'echo x >> attempts; echo "broken" >&2; exit 4'
    given = fields()
    text = runner.run_one(runner.LOCAL[0], shell_mode(script), tmp_path, 2, 30, given)
    assert "exit 4" in headers.parse(text)["reason"]
    assert (tmp_path / "attempts").read_text() == "x\n"
    assert "hung_once" not in given
