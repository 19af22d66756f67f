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


def _match(pattern: re.Pattern, text: str, what: str) -> list[str]:
    """The groups of `pattern` in `text`, whose numeric groups must read as numbers."""
    found = pattern.search(text)
    if not found or not all(
        _is_number(g) for g in found.groups() if g and g[0] in "+-.0123456789"
    ):
        raise Garbled(f"not {what}: {text.strip()!r}")
    return list(found.groups())


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _lines(lines: Lines, warn: Warn, read) -> Iterator[Measurement]:
    """read(number, text) per line; a Garbled line is warned about and left out."""
    for number, text in lines:
        try:
            yield from read(number, text)
        except Garbled as err:
            warn(number, str(err))


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
    table = {"operation": "unknown", "metric": None, "unit": None}

    def read(number, text):
        title = OSU_TITLE.match(text)
        if title:
            table["operation"] = OSU_OPERATIONS.get(title.group(1), title.group(1).lower())
        elif text.startswith("# Size"):
            bandwidth = "MB/s" in text
            table["metric"] = "bandwidth" if bandwidth else "latency"
            table["unit"] = "MB/s" if bandwidth else "us"
        elif text.strip() and not text.startswith("#") and table["metric"]:
            size, value = _numbers(text, 2)
            yield Measurement(
                number, table["operation"], int(size), table["metric"], value, table["unit"]
            )

    return _lines(lines, warn, read)


# --- mpiBench: "Bcast\tBytes:\t16\tIters:\t1000\tAvg:\t0.9\tMin: ... Ranks: 2", usec
MPIBENCH_ROW = re.compile(
    r"^(\w+)\s+Bytes:\s+(\d+)\s+Iters:\s+\d+\s+Avg:\s+(\S+)\s+Min:.*Ranks:\s+(\d+)"
)


def mpibench(lines: Lines, warn: Warn) -> Iterator[Measurement]:
    def read(number, text):
        if "Bytes:" in text:
            operation, size, value, ranks = _match(MPIBENCH_ROW, text, "an mpiBench result")
            yield Measurement(
                number, operation, int(size), "latency", float(value), "us", int(ranks)
            )

    return _lines(lines, warn, read)


# --- NetCDF-Bench: "benchmark:write  I/O Performance  min avg max MiB/s"; "Datasize N bytes"
NETCDF_ROW = re.compile(r"^benchmark:(\w+)\s+(.+?)\s{2,}(\S+)\s+(\S+)\s+(\S+)\s+(secs|MiB/s)")
NETCDF_SIZE = re.compile(r"^Datasize\s+(\d+) bytes")
NETCDF_METRICS = {"I/O Performance": "rate", "I/O time": "time"}  # rate with open/close,
# as the ARCHER2 guide reports it


def netcdf_bench(lines: Lines, warn: Warn) -> Iterator[Measurement]:
    run = {"size": None}

    def read(number, text):
        if text.startswith("Datasize"):
            run["size"] = int(_match(NETCDF_SIZE, text, "a NetCDF-Bench data size")[0])
        elif text.startswith("benchmark:"):
            io, what, _, average, _, unit = _match(NETCDF_ROW, text, "a NetCDF-Bench result")
            if what in NETCDF_METRICS:
                unit = "s" if unit == "secs" else unit
                yield Measurement(
                    number, io, run["size"], NETCDF_METRICS[what], float(average), unit
                )

    return _lines(lines, warn, read)


# --- benchio: " MPI-IO" between "------" lines; per layer its repetitions' " time = ..."
# lines, then " avgtime = 0.1 , avgrate = 300. MiB/s", the rate EPCC's study reports
BENCHIO_AVERAGE = re.compile(r"avgtime\s*=\s*(\S+)\s*,\s*avgrate\s*=\s*(\S+)\s*MiB/s")


def benchio(lines: Lines, warn: Warn) -> Iterator[Measurement]:
    run = {"layer": None, "ranks": None, "size": None, "previous": ""}

    def read(number, text):
        stripped, previous = text.strip(), run["previous"]
        run["previous"] = stripped
        if stripped.startswith("Running on"):
            run["ranks"] = int(_numbers(stripped.split("on", 1)[1], 1)[0])
        elif stripped.startswith("Total amount of data"):
            run["size"] = int(_numbers(stripped.split("=", 1)[1], 1)[0] * 2**20)
        elif previous == "------" and stripped and stripped != "------":
            run["layer"] = stripped
        elif stripped.startswith("avgtime") and run["layer"]:
            seconds, mib_s = _match(BENCHIO_AVERAGE, stripped, "a benchio average")
            for metric, value, unit in (("rate", mib_s, "MiB/s"), ("time", seconds, "s")):
                yield Measurement(
                    number, run["layer"], run["size"], metric, float(value), unit, run["ranks"]
                )

    return _lines(lines, warn, read)


# --- IMB: "# Benchmarking PingPong", "# #processes = 2", "#bytes #repetitions t[usec] ..."
def imb(lines: Lines, warn: Warn) -> Iterator[Measurement]:
    table = {"operation": None, "ranks": None, "columns": None}

    def read(number, text):
        if text.startswith("# Benchmarking "):
            table["operation"], table["columns"] = text.split()[2], None
        elif text.startswith("# #processes = "):
            table["ranks"] = int(_numbers(text.split("=")[1], 1)[0])
        elif table["operation"] and text.strip().startswith("#bytes"):
            table["columns"] = text.split()
        elif table["columns"] and text.strip() and not text.startswith("#"):
            row = dict(zip(table["columns"], _numbers(text, len(table["columns"]))))
            operation, size = table["operation"], int(row["#bytes"])
            time = row.get("t[usec]", row.get("t_avg[usec]"))
            if time is not None:
                yield Measurement(number, operation, size, "latency", time, "us", table["ranks"])
            if "Mbytes/sec" in row:
                yield Measurement(number, operation, size, "bandwidth", row["Mbytes/sec"], "MB/s")

    return _lines(lines, warn, read)


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
