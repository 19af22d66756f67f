"""Parsers of each benchmark's native output: OSU micro-benchmarks, mpiBench, NetCDF-Bench
(benchtool), benchio and Intel's IMB. Each takes the numbered lines of one run and yields
measurements; a line it cannot read is a Problem, never a silent drop or a crash."""

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass
class Measurement:
    line: int
    operation: str
    bytes: int | None
    metric: str
    value: float
    unit: str
    ranks: int | None = None


class Garbled(Exception):
    """A line where a result should be, that does not read as one."""


Lines = list[tuple[int, str]]
Warn = Callable[[int, str], None]


def _numbers(text: str, count: int) -> list[float]:
    fields = text.split()
    try:
        values = [float(field) for field in fields[:count]]
    except ValueError:
        raise Garbled(f"expected {count} numbers, read {text.strip()!r}") from None
    if len(values) < count:
        raise Garbled(f"expected {count} numbers, read {text.strip()!r}")
    return values


# --- OSU: "# OSU MPI Allgather Latency Test v7.4" then "# Size  Avg Latency(us)" rows
OSU_TITLE = re.compile(r"^# OSU MPI(?:-\w+)? (.+?) Test v[\d.]+")
OSU_OPERATIONS = {
    "Latency": "latency",
    "Bandwidth": "bw",
    "Bi-Directional Bandwidth": "bibw",
    "Allgather Latency": "allgather",
    "Broadcast Latency": "bcast",
    "Allreduce Latency": "allreduce",
    "All-to-All Personalized Exchange Latency": "alltoall",
}


def osu(lines: Lines, warn: Warn) -> Iterator[Measurement]:
    operation, metric, unit = None, None, None
    for number, text in lines:
        title = OSU_TITLE.match(text)
        if title:
            operation = OSU_OPERATIONS.get(title.group(1), title.group(1).lower())
        elif text.startswith("# Size"):
            metric, unit = ("bandwidth", "MB/s") if "MB/s" in text else ("latency", "us")
        elif text.strip() and not text.startswith("#") and metric:
            try:
                size, value = _numbers(text, 2)
            except Garbled as err:
                warn(number, str(err))
                continue
            yield Measurement(number, operation or "unknown", int(size), metric, value, unit)


# --- mpiBench: "Bcast\tBytes:\t16\tIters:\t1000\tAvg:\t0.9\tMin: ... Ranks: 2", usec
MPIBENCH_ROW = re.compile(
    r"^(\w+)\s+Bytes:\s+(\d+)\s+Iters:\s+\d+\s+Avg:\s+(\S+)\s+Min:.*Ranks:\s+(\d+)"
)


def mpibench(lines: Lines, warn: Warn) -> Iterator[Measurement]:
    for number, text in lines:
        if "Bytes:" not in text:
            continue
        row = MPIBENCH_ROW.match(text)
        try:
            if not row:
                raise ValueError
            value = float(row.group(3))
        except ValueError:
            warn(number, f"not an mpiBench result line: {text.strip()!r}")
            continue
        operation, size, ranks = row.group(1), int(row.group(2)), int(row.group(4))
        yield Measurement(number, operation, size, "latency", value, "us", ranks)


# --- NetCDF-Bench: "benchmark:write  I/O Performance  min avg max MiB/s"; "Datasize N bytes"
NETCDF_ROW = re.compile(r"^benchmark:(\w+)\s+(.+?)\s{2,}(\S+)\s+(\S+)\s+(\S+)\s+(secs|MiB/s)")


def netcdf_bench(lines: Lines, warn: Warn) -> Iterator[Measurement]:
    size = None
    for number, text in lines:
        if text.startswith("Datasize"):
            size = int(_numbers(text.split(None, 1)[1], 1)[0])
        elif text.startswith("benchmark:"):
            row = NETCDF_ROW.match(text)
            try:
                if not row:
                    raise ValueError
                average = float(row.group(4))
            except ValueError:
                warn(number, f"not a NetCDF-Bench result line: {text.strip()!r}")
                continue
            what, unit = row.group(2), row.group(6)
            if what == "I/O Performance":  # with open/close, as the ARCHER2 guide reports
                yield Measurement(number, row.group(1), size, "rate", average, unit)
            elif what == "I/O time":
                yield Measurement(number, row.group(1), size, "time", average, "s")


# --- benchio: " MPI-IO" between "------" lines; per layer its repetitions' " time = ..."
# lines, then " avgtime = 0.1 , avgrate = 300. MiB/s", the rate EPCC's study reports
BENCHIO_AVERAGE = re.compile(r"avgtime\s*=\s*(\S+)\s*,\s*avgrate\s*=\s*(\S+)\s*MiB/s")


def benchio(lines: Lines, warn: Warn) -> Iterator[Measurement]:
    layer, ranks, size = None, None, None
    previous = ""
    for number, text in lines:
        stripped = text.strip()
        if stripped.startswith("Running on"):
            ranks = int(_numbers(stripped.split("on", 1)[1], 1)[0])
        elif stripped.startswith("Total amount of data"):
            size = int(_numbers(stripped.split("=", 1)[1], 1)[0] * 2**20)
        elif previous == "------" and stripped and stripped != "------":
            layer = stripped
        elif stripped.startswith("avgtime") and layer:
            average = BENCHIO_AVERAGE.search(stripped)
            try:
                if not average:
                    raise ValueError
                seconds, mib_s = float(average.group(1)), float(average.group(2))
            except ValueError:
                warn(number, f"not a benchio average line: {stripped!r}")
                continue
            yield Measurement(number, layer, size, "rate", mib_s, "MiB/s", ranks)
            yield Measurement(number, layer, size, "time", seconds, "s", ranks)
        previous = stripped


# --- IMB: "# Benchmarking PingPong", "# #processes = 2", "#bytes #repetitions t[usec] ..."
def imb(lines: Lines, warn: Warn) -> Iterator[Measurement]:
    operation, ranks, columns = None, None, None
    for number, text in lines:
        if text.startswith("# Benchmarking "):
            operation, columns = text.split()[2], None
        elif text.startswith("# #processes = "):
            ranks = int(text.split("=")[1])
        elif operation and text.strip().startswith("#bytes"):
            columns = text.split()
        elif columns and text.strip() and not text.startswith("#"):
            try:
                values = _numbers(text, len(columns))
            except Garbled as err:
                warn(number, str(err))
                continue
            row = dict(zip(columns, values))
            time = row.get("t[usec]", row.get("t_avg[usec]"))
            size = int(row["#bytes"])
            if time is not None:
                yield Measurement(number, operation, size, "latency", time, "us", ranks)
            if "Mbytes/sec" in row:
                yield Measurement(number, operation, size, "bandwidth", row["Mbytes/sec"], "MB/s")


#: format name -> (a line only its output has, parser); detection tries them in order
FORMATS = {
    "osu": (re.compile(r"^# OSU MPI"), osu),
    "mpibench": (re.compile(r"^START mpiBench"), mpibench),
    "netcdf-bench": (re.compile(r"^Benchtool \(datatype"), netcdf_bench),
    "benchio": (re.compile(r"^\s*Simple Parallel IO benchmark"), benchio),
    "imb": (re.compile(r"^#\s+Intel\(R\) MPI Benchmarks"), imb),
}


def detect(lines: Lines) -> str | None:
    for name, (signature, _) in FORMATS.items():
        if any(signature.match(text) for _, text in lines):
            return name
    return None
