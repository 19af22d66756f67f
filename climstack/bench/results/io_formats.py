"""Parsers of the I/O benchmarks' outputs: NetCDF-Bench (benchtool), EPCC's benchio, and
benchio with ADIOS2 (Farr and Henty's, the comparison of I/O layers). Each takes the
numbered lines of one run and yields measurements (climstack.bench.results.parsing)."""

import re
from collections.abc import Iterator

from climstack.bench.results.parsing import (
    Garbled,
    Lines,
    Measurement,
    Printed,
    Warn,
    _lines,
    _match,
    _numbers,
)


# --- NetCDF-Bench: "benchmark:write  I/O Performance  min avg max MiB/s"; "Datasize N bytes"
NETCDF_ROW = re.compile(r"^benchmark:(\w+)\s+(.+?)\s{2,}(\S+)\s+(\S+)\s+(\S+)\s+(secs|MiB/s)")
NETCDF_SIZE = re.compile(r"^Datasize\s+(\d+) bytes")
NETCDF_METRICS = {"I/O Performance": "rate", "I/O time": "time"}  # rate with open/close,
# as the ARCHER2 guide reports it


def netcdf_bench(lines: Lines, warn: Warn, operation: str = "unknown") -> Iterator[Measurement]:
    run = {"size": None}

    def read(number, text):
        if text.startswith("Datasize"):
            run["size"] = int(_match(NETCDF_SIZE, text, "a NetCDF-Bench data size")[0])
        elif text.startswith("benchmark:"):
            io, what, _, average, _, unit = _match(NETCDF_ROW, text, "a NetCDF-Bench result")
            if what in NETCDF_METRICS:
                unit = "s" if unit == "secs" else unit
                yield Measurement(
                    number, io, run["size"], NETCDF_METRICS[what], Printed(average), unit
                )

    return _lines(lines, warn, read)


# --- benchio: " MPI-IO" between "------" lines; per layer its repetitions' " time = ..."
# lines, then " avgtime = 0.1 , avgrate = 300. MiB/s", the rate EPCC's study reports
BENCHIO_AVERAGE = re.compile(r"avgtime\s*=\s*(\S+)\s*,\s*avgrate\s*=\s*(\S+)\s*MiB/s")


def benchio(lines: Lines, warn: Warn, operation: str = "unknown") -> Iterator[Measurement]:
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
        elif stripped.startswith("avgtime"):
            seconds, mib_s = _match(BENCHIO_AVERAGE, stripped, "a benchio average")
            for metric, value, unit in (("rate", mib_s, "MiB/s"), ("time", seconds, "s")):
                yield Measurement(
                    number,
                    run["layer"] or operation,
                    run["size"],
                    metric,
                    Printed(value),
                    unit,
                    run["ranks"],
                )

    return _lines(lines, warn, read)


# --- benchio with ADIOS2 (davidhenty/benchio): after "Using the following IO methods", per
# layer " MPI-IO" between "------" lines, "Writing to striped/mpiio.dat", for ADIOS2 the
# engine our build prints ("ADIOS2 engine = BP4"), then one " time = 0.1 , rate = 1.2
# GiB/s" line per write: the rate, as MiB/s, is the measurement
BENCHIO_WRITE = re.compile(r"^time\s*=\s*(\S+)\s*,\s*rate\s*=\s*(\S+)\s*GiB/s\s*$")
BENCHIO_ENGINE = re.compile(r"^ADIOS2 engine\s*=\s*(\w+)$")
#: benchio's layer names, as the report names them
BENCHIO_LAYERS = {"MPI-IO": "MPI-IO", "HDF5": "HDF5", "NetCDF": "NetCDF", "Adios2": "ADIOS2"}


def benchio_adios2(lines: Lines, warn: Warn, operation: str = "unknown") -> Iterator[Measurement]:
    run = {"layer": None, "engine": None, "ranks": None, "size": None, "previous": ""}

    def read(number, text):
        stripped, previous = text.strip(), run["previous"]
        run["previous"] = stripped
        if stripped.startswith("Running on") and stripped.endswith("process(es)"):
            run["ranks"] = int(_numbers(stripped.split("on", 1)[1], 1)[0])  # not "1 node"
        elif stripped.startswith("Total amount of data"):
            run["size"] = int(_numbers(stripped.split("=", 1)[1], 1)[0] * 2**30)
        elif previous == "------" and stripped and stripped != "------":
            run["layer"], run["engine"] = BENCHIO_LAYERS.get(stripped, stripped), None
        elif stripped.startswith("ADIOS2 engine"):
            run["engine"] = _match(BENCHIO_ENGINE, stripped, "an ADIOS2 engine line")[0].upper()
        elif stripped.startswith("time ="):
            seconds, gib_s = _match(BENCHIO_WRITE, stripped, "a benchio write")
            layer = run["layer"] or operation
            if layer == "ADIOS2":
                if not run["engine"]:
                    raise Garbled("an ADIOS2 write without the `ADIOS2 engine =` line before it")
                layer = f"ADIOS2 {run['engine']}"
            rate, at = Printed(gib_s), (number, layer, run["size"])  # as MiB/s, its step too
            yield Measurement(*at, "rate", rate * 1024, "MiB/s", run["ranks"], rate.step * 1024)
            yield Measurement(*at, "time", Printed(seconds), "s", run["ranks"])

    return _lines(lines, warn, read)
