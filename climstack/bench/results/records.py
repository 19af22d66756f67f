"""The tidy record every benchmark output is parsed into, and its JSON and CSV files."""

import csv
import io
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from climstack.common import atomic


@dataclass(frozen=True)
class Record:
    benchmark: str  # a format of climstack.bench.results.formats (osu, imb, ...) or a model (mom6)
    operation: str  # latency, allgather, Bcast, write, MPI-IO, PingPong, Total runtime, ...
    bytes: int | None  # message or data size; None where the benchmark has one size
    ranks: int
    nodes: int
    mode: str  # a mode of climstack.bench.run.catalogue (or one a published output names)
    runtime: str  # none, charliecloud, apptainer
    site: str
    metric: str  # latency, bandwidth, rate, time
    value: float
    unit: str  # us, MB/s, MiB/s, s
    repeat: int
    # provenance: the batch of runs it belongs to (only runs of one batch are paired), when
    # it started, and its place in its repeat's mode order (0: not known)
    host: str = "unknown"
    job: str = "unknown"
    start: str = ""
    order: int = 0
    resolution: float = 0.0  # the step of the value's last printed digit (0: not known)
    hung: int = 0  # attempts of its run stopped as hung before the one timed (`hung=`)

    @property
    def batch(self) -> tuple[str, str, str]:
        return (self.site, self.host, self.job)


def batch_text(batch: tuple[str, str, str]) -> str:
    site, host, job = batch
    return f"{site} · {host} · job {job}"


@dataclass(frozen=True)
class Failure:
    """A run that did not produce output: shown in the report as failed, with the reason."""

    benchmark: str
    mode: str
    reason: str
    site: str = "unknown"
    host: str = "unknown"
    job: str = "unknown"
    repeat: int = 0


@dataclass(frozen=True)
class BitCheck:
    """A model run's outputs compared bit for bit with native's of the same repeat."""

    benchmark: str
    mode: str
    repeat: int
    verdict: str  # IDENTICAL, DIFFERS or FAILED (the comparison itself failed)
    detail: str  # what differs, or why it failed
    site: str = "unknown"
    host: str = "unknown"
    job: str = "unknown"


@dataclass(frozen=True)
class Problem:
    """A file, or a line of it, left out of the tables, with why and the fix."""

    path: str
    line: int
    message: str
    fix: str = ""

    def __str__(self) -> str:
        fix = f" (fix: {self.fix})" if self.fix else ""
        return f"{self.path}:{self.line}: {self.message}{fix}"


COLUMNS = [field.name for field in fields(Record)]
IDENTICAL, DIFFERS, FAILED = "bit-identical", "differs", "failed"  # BitCheck verdicts


def write(records: list[Record], failures: list[Failure], out: Path, checks=()) -> tuple:
    """records.json (records, failures and the model runs' bit-for-bit checks) and
    records.csv under `out`."""
    data = {
        "records": [asdict(r) for r in records],
        "failures": [asdict(f) for f in failures],
        "bitwise": [asdict(c) for c in checks],
    }
    json_path = atomic.write_text(out / "records.json", json.dumps(data, indent=1) + "\n")
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(asdict(r) for r in records)
    return json_path, atomic.write_text(out / "records.csv", text.getvalue())


def read(path: Path) -> tuple[list[Record], list[Failure], list[BitCheck]]:
    data = json.loads(path.read_text())
    return (
        [Record(**r) for r in data["records"]],
        [Failure(**f) for f in data["failures"]],
        [BitCheck(**c) for c in data.get("bitwise", [])],
    )
