"""Parsers of each benchmark's native output: OSU micro-benchmarks (C, and the Python
OMB-Py of OSU 7.x), Intel's IMB, mpiBench, NetCDF-Bench (benchtool), benchio and a model's
FMS clock table (MOM6). Each takes the numbered lines of one run and yields measurements;
a line it cannot read is a Problem, never a silent drop or a crash.

A format is recognised by its banner (`# OSU MPI Latency Test v7.4`, `START mpiBench`) or,
in an excerpt pasted without it, by its data lines (an OSU `# Size  Latency (us)` column
header, mpiBench's `Bytes: ... Iters:` rows, ...); free text around the table is ignored."""

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from climstack.bench.results.io_formats import (
    BENCHIO_AVERAGE,
    BENCHIO_WRITE,
    benchio,
    benchio_adios2,
    netcdf_bench,
)
from climstack.bench.results.parsing import (
    Lines,
    Measurement,
    Parser,
    Printed,
    Warn,
    _is_number,
    _lines,
    _match,
    _numbers,
)


# --- OSU (C): "# OSU MPI Allgather Latency Test v7.4", then "# Size  Avg Latency(us)" rows;
# OMB-Py: "# OMB Python MPI Latency Test" or "# OMB-Py MPI Bandwidth Test", then
# "# Size (B)  Latency (us)" rows. Both name operations as the programs do (osu_<name>).
OSU_TITLE = re.compile(r"^# (?:OSU|OMB Python|OMB-Py) MPI(?:-\w+)?[ _](.+?) Test(?: v[\d.]+)?\s*$")
OSU_NAMES = {
    "latency": "latency",
    "bandwidth": "bw",
    "bi-directional bandwidth": "bibw",
    "multi latency": "multi_lat",
    "multiple bandwidth / message rate": "mbw_mr",
    "broadcast": "bcast",
    "all-to-all personalized exchange": "alltoall",
    "all-to-allv personalized exchange": "alltoallv",
    "all-to-all": "alltoall",
}
#: the column line; "Overall(us)": the non-blocking collectives' latency, with overlap
OSU_COLUMNS = re.compile(
    r"^# (?:Size(?: \(B\))?\s+)?(?:Avg )?(Latency|Overall\(us\)|Bandwidth|MB/s)"
)


def osu_operation(title: str) -> str:
    """The program's name for a test title: 'Allgather Latency' -> allgather,
    'Non-blocking Allreduce Latency' -> iallreduce, 'Bandwidth Persistent' -> bw_persistent."""
    name = title.lower()
    if name in OSU_NAMES:
        return OSU_NAMES[name]
    name = name.removesuffix(" latency")
    persistent = name.endswith(" persistent")
    name = name.removesuffix(" persistent").removesuffix(" latency")
    blocking = name.startswith("non-blocking ")
    name = name.removeprefix("non-blocking ")
    name = OSU_NAMES.get(name, name).replace(" ", "_").replace("-", "")
    return ("i" if blocking else "") + name + ("_persistent" if persistent else "")


def osu(lines: Lines, warn: Warn, operation: str = "unknown") -> Iterator[Measurement]:
    table = {"operation": operation, "metric": None, "unit": None, "sized": True}

    def read(number, text):
        title = OSU_TITLE.match(text)
        columns = OSU_COLUMNS.match(text)
        if title:
            table["operation"] = osu_operation(title.group(1))
        elif columns:
            bandwidth = columns.group(1) in ("Bandwidth", "MB/s")
            table["metric"] = "bandwidth" if bandwidth else "latency"
            table["unit"] = "MB/s" if bandwidth else "us"
            table["sized"] = text.startswith("# Size")
        elif text.strip() and not text.startswith("#") and table["metric"]:
            if table["sized"]:
                size, value = _numbers(text, 2)
            else:  # osu_barrier: one column, no size
                size, value = None, _numbers(text, 1)[0]
            yield Measurement(
                number,
                table["operation"],
                None if size is None else int(size),
                table["metric"],
                value,
                table["unit"],
            )

    return _lines(lines, warn, read)


# --- mpiBench: "Bcast\tBytes:\t16\tIters:\t1000\tAvg:\t0.9\tMin: ... Ranks: 2", usec
MPIBENCH_ROW = re.compile(
    r"^\s*(\w+)\s+Bytes:\s+(\d+)\s+Iters:\s+\d+\s+Avg:\s+(\S+)\s+Min:.*Ranks:\s+(\d+)"
)


def mpibench(lines: Lines, warn: Warn, operation: str = "unknown") -> Iterator[Measurement]:
    def read(number, text):
        if "Bytes:" in text:
            operation, size, value, ranks = _match(MPIBENCH_ROW, text, "an mpiBench result")
            yield Measurement(
                number, operation, int(size), "latency", Printed(value), "us", int(ranks)
            )

    return _lines(lines, warn, read)


# --- IMB: "# Benchmarking PingPong", "# #processes = 2", "#bytes #repetitions t[usec] ...";
# the bandwidth of 0 bytes (always 0.00) is none
IMB_COLUMNS = re.compile(r"^\s*#bytes\s+#repetitions")


def imb(lines: Lines, warn: Warn, operation: str = "unknown") -> Iterator[Measurement]:
    table = {"operation": operation, "ranks": None, "columns": None}

    def read(number, text):
        if text.startswith("# Benchmarking "):
            table["operation"], table["columns"] = text.split()[2], None
        elif text.startswith("# #processes = "):
            table["ranks"] = int(_numbers(text.split("=")[1], 1)[0])
        elif IMB_COLUMNS.match(text):
            table["columns"] = text.split()
        elif table["columns"] and text.strip() and not text.startswith("#"):
            row = dict(zip(table["columns"], _numbers(text, len(table["columns"]))))
            operation, size = table["operation"], int(row["#bytes"])
            time = row.get("t[usec]", row.get("t_avg[usec]"))
            if time is not None:
                yield Measurement(number, operation, size, "latency", time, "us", table["ranks"])
            if "Mbytes/sec" in row and size > 0:
                yield Measurement(number, operation, size, "bandwidth", row["Mbytes/sec"], "MB/s")

    return _lines(lines, warn, read)


# --- a model's FMS clock table (MOM6, SIS2, ...): "Tabulating mpp_clock statistics across
# 128 PEs...", the column line "hits tmin tmax tavg tstd tfrac grain pemin pemax", then one
# row per clock, "Total runtime   1   138.600364 ...": its tavg (seconds) is the measurement;
# a clock at 0 s (never entered, or under the table's microsecond) measured nothing
FMS_TABULATING = re.compile(r"Tabulating mpp_clock statistics across\s+(\d+)\s+PEs")
FMS_COLUMNS = re.compile(r"^\s+(?:(?:hits|calls)\s+)?tmin\s+tmax\s+tavg\s+tstd")


def fms_clocks(lines: Lines, warn: Warn, operation: str = "unknown") -> Iterator[Measurement]:
    table = {"columns": None, "ranks": None}

    def read(number, text):
        tabulating = FMS_TABULATING.search(text)
        if tabulating:
            table["ranks"] = int(tabulating.group(1))
        elif FMS_COLUMNS.match(text):
            table["columns"] = text.split()
        elif table["columns"] and text.strip():
            fields, width = text.split(), len(table["columns"])
            values = fields[-width:]
            if len(fields) <= width or not all(map(_is_number, values)):
                table["columns"] = None  # the table ends (e.g. " MPP_STACK high water mark")
                return
            row = dict(zip(table["columns"], map(Printed, values)))
            name = " ".join(fields[:-width])
            if row["tavg"] == 0:
                return
            yield Measurement(number, name, None, "time", row["tavg"], "s", table["ranks"])

    return _lines(lines, warn, read)


# --- the precise profile's start-up (climstack.bench.precise.startup): "# climstack
# start-up", then "launch 0.412 s" (a launch of /bin/true through the mode) and
# "MPI_Init 39 ms" (osu_init's average over the ranks)
STARTUP_ROW = re.compile(r"^(launch|MPI_Init)\s+(\S+)\s+(s|ms)\s*$")


def startup(lines: Lines, warn: Warn, operation: str = "unknown") -> Iterator[Measurement]:
    def read(number, text):
        if text.strip() and not text.startswith("#"):
            name, value, unit = _match(STARTUP_ROW, text, "a start-up time")
            yield Measurement(number, name, None, "time", Printed(value), unit)

    return _lines(lines, warn, read)


@dataclass(frozen=True)
class Format:
    name: str
    what: str  # for people: which program writes it
    banner: re.Pattern  # a line only its whole output has
    data: re.Pattern  # a line of its results, found in an excerpt without the banner too
    parse: Parser


#: the formats known, in the order the report lists benchmarks
FORMATS = {
    f.name: f
    for f in (
        Format(
            "osu",
            "OSU micro-benchmarks (C)",
            re.compile(r"^# OSU MPI"),
            re.compile(
                r"^# (?:Size(?! \(B\))\s+(?:Avg )?|Avg )(?:Latency|Overall\(us\)|Bandwidth|MB/s)"
            ),
            osu,
        ),
        Format(
            "omb-py",
            "OSU micro-benchmarks for Python (OMB-Py)",
            re.compile(r"^# (?:OMB Python|OMB-Py) MPI"),
            re.compile(r"^# Size \(B\)\s+(?:Latency|Bandwidth)"),
            osu,
        ),
        Format(
            "imb",
            "Intel MPI Benchmarks (IMB-MPI1)",
            re.compile(r"^#\s+Intel\(R\) MPI Benchmarks"),
            IMB_COLUMNS,
            imb,
        ),
        Format(
            "mpibench",
            "LLNL mpiBench",
            re.compile(r"^START mpiBench"),
            MPIBENCH_ROW,
            mpibench,
        ),
        Format(
            "netcdf-bench",
            "NetCDF-Bench (benchtool)",
            re.compile(r"^Benchtool \(datatype"),
            re.compile(r"^benchmark:\w+\s"),
            netcdf_bench,
        ),
        Format(
            "benchio-adios2",
            "EPCC benchio with ADIOS2 (Farr and Henty)",
            re.compile(r"^\s*Using the following IO methods"),
            re.compile(r"^\s*" + BENCHIO_WRITE.pattern.lstrip("^")),
            benchio_adios2,
        ),
        Format(
            "benchio",
            "EPCC benchio",
            re.compile(r"^\s*Simple Parallel IO benchmark"),
            re.compile(r"^\s*" + BENCHIO_AVERAGE.pattern),
            benchio,
        ),
        Format(
            "fms-clocks",
            "a model's FMS clock table (MOM6)",
            FMS_TABULATING,
            FMS_COLUMNS,
            fms_clocks,
        ),
        Format(
            "startup",
            "the precise profile's start-up: a launch, and osu_init's MPI_Init",
            re.compile(r"^# climstack start-up"),
            STARTUP_ROW,
            startup,
        ),
    )
}


def detect(lines: Lines) -> str | None:
    """The format whose banner the lines hold; else the one with the most data lines."""
    for name, form in FORMATS.items():
        if any(form.banner.search(text) for _, text in lines):
            return name
    found = Counter(
        name for _, text in lines for name, form in FORMATS.items() if form.data.match(text)
    )
    return found.most_common(1)[0][0] if found else None


def known() -> str:
    """The formats known, for messages."""
    return "; ".join(f"{name} ({form.what})" for name, form in FORMATS.items())


#: models whose output is read in a format above: their records are named by the model
MODELS = {"mom6": "fms-clocks"}


def format_of(benchmark: str) -> str:
    """The format a benchmark's (or a model's) output is read in."""
    return MODELS.get(benchmark, benchmark)


def rank(benchmark: str) -> int:
    """A benchmark's place in the report: its format's in FORMATS, unknown ones last."""
    order = list(FORMATS)
    return order.index(format_of(benchmark)) if format_of(benchmark) in order else len(order)
