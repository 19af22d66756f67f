"""A climate model's case (cases/<name>/, e.g. MOM6's ocean_only benchmark) run the way the
benchmarks run: a run directory prepared from the case's files with its overrides, the
model launched by a mode's `wrap(program) -> argv` (bench.modes.Mode: native, or a
container mode), its FMS clock table read (bench.formats.fms_clocks) for the main-loop
time, and a digest of every output recorded in `case-run.json`."""

import hashlib
import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from climstack import pins
from climstack.bench.results import formats
from climstack.common import atomic, process
from climstack.errors import ClimstackError, ToolFailure

CASES = pins.PROJECT_ROOT / "cases"
#: what a case directory holds beside its input files
NOT_INPUT = {"README.md"}
#: the record of a run, in its run directory
RECORD = "case-run.json"
#: the model's standard output, in its run directory
STDOUT = "stdout.txt"
#: MOM6's clock of the time stepping (config_src/drivers/solo_driver/MOM_driver.F90)
MAIN_LOOP = "Main loop"
OVERRIDE = re.compile(r"^\s*#override\s+(\w+)\s*=")


@dataclass(frozen=True)
class Case:
    """A case of a model: like a runner.Benchmark for the modes (`package`, and `argv[0]` the
    program relative to the package prefix), so Mode.locate(case) finds its program."""

    name: str
    directory: Path
    package: str = "mom6"
    argv: tuple[str, ...] = ("bin/MOM6",)
    #: directories the model expects in its run directory (input.nml's restart dirs)
    subdirectories: tuple[str, ...] = ("INPUT", "RESTART")
    override_file: str = "MOM_override"

    @property
    def inputs(self) -> list[Path]:
        return sorted(
            p for p in self.directory.iterdir() if p.is_file() and p.name not in NOT_INPUT
        )


def get(name: str) -> Case:
    """The case cases/<name>/ (or a directory given by path)."""
    directory = Path(name) if "/" in name else CASES / name
    if not (directory / "input.nml").is_file():
        known = sorted(p.name for p in CASES.iterdir() if (p / "input.nml").is_file())
        raise ClimstackError(
            f"no case {name!r}: {directory} holds no input.nml",
            fix=f"one of {', '.join(known)} (cases/), or a case directory's path",
        )
    return Case(directory.name, directory)


def parse_settings(settings: list[str]) -> dict[str, str]:
    """['DAYMAX=0.125', ...] -> {'DAYMAX': '0.125'}, checked."""
    found = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Z][A-Z0-9_]*", key) or not value:
            raise ClimstackError(
                f"--set {setting!r} is not KEY=VALUE",
                fix="a MOM6 parameter in capitals and its value, e.g. --set DAYMAX=0.125",
            )
        found[key] = value
    return found


def overridden(text: str, settings: dict[str, str]) -> str:
    """The override file's text with `#override KEY = VALUE` for each setting, replacing the
    line that sets KEY already (MOM6 refuses a parameter overridden twice)."""
    lines, done = [], set()
    for line in text.splitlines():
        key = OVERRIDE.match(line)
        if key and key.group(1) in settings:
            line = f"#override {key.group(1)} = {settings[key.group(1)]}"
            done.add(key.group(1))
        lines.append(line)
    lines += [f"#override {k} = {v}" for k, v in settings.items() if k not in done]
    return "\n".join(lines) + "\n"


def prepare(case: Case, run_dir: Path, settings: dict[str, str] | None = None) -> Path:
    """A new run directory: the case's inputs, its override file with `settings` applied,
    and the subdirectories the model writes to."""
    run_dir = Path(run_dir)
    if run_dir.exists() and any(run_dir.iterdir()):
        raise ClimstackError(
            f"run directory {run_dir} is not empty", fix="name a new or an empty directory"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    for path in case.inputs:
        shutil.copyfile(path, run_dir / path.name)
    override = run_dir / case.override_file
    text = override.read_text() if override.is_file() else ""
    atomic.write_text(override, overridden(text, settings or {}))
    for name in case.subdirectories:
        (run_dir / name).mkdir(exist_ok=True)
    return run_dir


@dataclass
class CaseRun:
    case: str
    run_dir: str
    argv: list[str]
    settings: dict[str, str]
    wall_s: float
    main_loop_s: float
    clocks: dict[str, float] = field(default_factory=dict)  # clock -> tavg (s)
    ranks: int | None = None
    digests: dict[str, str] = field(default_factory=dict)  # output -> sha256 of its bytes


def clock_table(text: str, source: str) -> tuple[dict[str, float], int | None]:
    """The FMS clock table of a model's output: clock name -> tavg (s), and the ranks."""
    problems = []
    lines = list(enumerate(text.splitlines(), start=1))
    found = list(formats.fms_clocks(lines, lambda n, why: problems.append(f"{n}: {why}")))
    if not found:
        raise ToolFailure(
            f"{source} holds no FMS clock table (`Tabulating mpp_clock statistics`)",
            fix="the model stopped before its end: read its output there",
        )
    return {m.operation: m.value for m in found}, found[0].ranks


def outputs(run_dir: Path) -> list[Path]:
    """What the model wrote: ocean.stats (and its other text statistics) and every NetCDF."""
    found = {p for p in run_dir.rglob("*.nc")} | set(run_dir.glob("*.stats"))
    return sorted(found)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run(
    case: Case,
    run_dir: Path,
    program: str,
    wrap: Callable[[list[str]], list[str]],
    settings: dict[str, str] | None = None,
    env: dict | None = None,
    timeout: float = 3600,
) -> CaseRun:
    """Prepare run_dir, run `program` (its path as the mode sees it) launched by `wrap`
    (a Mode's: native `[*launcher, *program]`, or a container's), record the run."""
    settings = settings or {}
    run_dir = prepare(case, run_dir, settings).resolve()
    argv = wrap([program])
    start = time.monotonic()
    proc = process.run(
        argv, f"running {case.name} in {run_dir}", cwd=run_dir, env=env, timeout=timeout,
        check=False,
    )  # fmt: skip
    wall = time.monotonic() - start
    (run_dir / STDOUT).write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-process.TAIL :]
        raise ToolFailure(
            f"{case.name} failed (exit {proc.returncode}) in {run_dir}:\n{tail}",
            fix=f"read {run_dir / STDOUT}",
        )
    clocks, ranks = clock_table(proc.stdout, str(run_dir / STDOUT))
    if MAIN_LOOP not in clocks:
        raise ToolFailure(
            f"{run_dir / STDOUT}: the clock table has no {MAIN_LOOP!r} clock",
            fix=f"its clocks: {', '.join(clocks)}",
        )
    result = CaseRun(
        case=case.name,
        run_dir=str(run_dir),
        argv=[str(a) for a in argv],
        settings=settings,
        wall_s=round(wall, 3),
        main_loop_s=clocks[MAIN_LOOP],
        clocks=clocks,
        ranks=ranks,
        digests={str(p.relative_to(run_dir)): sha256(p) for p in outputs(run_dir)},
    )
    atomic.write_text(run_dir / RECORD, json.dumps(asdict(result), indent=2) + "\n")
    return result
