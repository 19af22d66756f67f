"""The tidy record every benchmark output is parsed into, and its JSON and CSV files."""

import csv
import io
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from climstack.common import atomic


@dataclass(frozen=True)
class Record:
    benchmark: str  # a format of climstack.bench.formats: osu, omb-py, imb, mpibench, ...
    operation: str  # latency, allgather, Bcast, write, MPI-IO, PingPong, Total runtime, ...
    bytes: int | None  # message or data size; None where the benchmark has one size
    ranks: int
    nodes: int
    mode: str  # native, bind, bind-noxpmem, bind-host-netcdf, hybrid, fabric
    runtime: str  # none, charliecloud, apptainer
    site: str
    metric: str  # latency, bandwidth, rate, time
    value: float
    unit: str  # us, MB/s, MiB/s, s
    repeat: int


@dataclass(frozen=True)
class Failure:
    """A run that did not produce output: shown in the report as failed, with the reason."""

    benchmark: str
    mode: str
    reason: str


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
#: a benchmark output directory's bit-for-bit comparisons of each model run with native's
#: (runner.compare_models): {benchmark: {mode: {repeat: IDENTICAL or what differs}}}
BITWISE = "bitwise.json"
IDENTICAL = "bit-identical"
#: the run modes, in the order tables and plots show them (climstack.bench.modes)
MODES = ("native", "bind", "bind-noxpmem", "bind-host-netcdf", "hybrid", "fabric")
#: mode -> (what runs, the name the field's publications give it)
MODE_NAMES = {
    "native": ("the host's build on the host MPI", "native"),
    "bind": ("the image's build, the host MPI bound in", "container (bind model)"),
    "bind-noxpmem": ("bind, the executable without libxpmem.so.0", "container without xpmem"),
    "bind-host-netcdf": (
        "bind, plus the host's NetCDF and HDF5 bound over the image's",
        "container + host NetCDF",
    ),
    "hybrid": ("the image's build on the image's own MPI", "hybrid model"),
    "fabric": ("the image's MPI over the host's libfabric", "CSCS Container Engine's default"),
}


def ordered_modes(records: list) -> list[str]:
    """The modes of the records (or failures) present, in MODES order, then any other."""
    seen = {r.mode for r in records}
    return [m for m in MODES if m in seen] + sorted(seen - set(MODES))


def write(records: list[Record], failures: list[Failure], out: Path) -> tuple[Path, Path]:
    """records.json (records and failures) and records.csv under `out`."""
    data = {"records": [asdict(r) for r in records], "failures": [asdict(f) for f in failures]}
    json_path = atomic.write_text(out / "records.json", json.dumps(data, indent=1) + "\n")
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(asdict(r) for r in records)
    return json_path, atomic.write_text(out / "records.csv", text.getvalue())


def read(path: Path) -> tuple[list[Record], list[Failure]]:
    data = json.loads(path.read_text())
    return [Record(**r) for r in data["records"]], [Failure(**f) for f in data["failures"]]
