"""Bit-for-bit comparison of two runs of a model's case (bench.cases): the text statistics
(`ocean.stats`, what MOM6's own regression tests compare) byte for byte, and every variable
of every NetCDF output by its data, not the file's bytes (another libnetcdf may write other
headers, a container's build other attributes of history). A variable that differs is named
with its largest absolute and relative difference."""

from dataclasses import dataclass, field
from pathlib import Path

import netCDF4
import numpy

from climstack.errors import ClimstackError


@dataclass
class Difference:
    path: str  # relative to the run directory
    variable: str | None  # None: the file as a whole (text, missing, shape)
    what: str
    max_abs: float | None = None
    max_rel: float | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.variable}" if self.variable else self.path
        if self.max_abs is None:
            return f"{where}: {self.what}"
        return f"{where}: {self.what} (max abs {self.max_abs:.6g}, max rel {self.max_rel:.6g})"


@dataclass
class Comparison:
    a: Path
    b: Path
    compared: list[str] = field(default_factory=list)  # "path" or "path:variable"
    differences: list[Difference] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        if self.identical:
            return (
                f"bit-identical: {self.a} and {self.b} "
                f"({len(self.compared)} outputs and variables compared)"
            )
        lines = [f"NOT bit-identical: {self.a} vs {self.b}, {len(self.differences)} differ:"]
        return "\n".join(lines + [f"  {d}" for d in self.differences])


def _stats_files(run_dir: Path) -> set[str]:
    return {p.name for p in run_dir.glob("*.stats")}


def _netcdf_files(run_dir: Path) -> set[str]:
    return {str(p.relative_to(run_dir)) for p in run_dir.rglob("*.nc")}


def _values(variable) -> numpy.ndarray:
    """The variable's data as stored (no scaling or masking: bits, not meanings)."""
    variable.set_auto_maskandscale(False)
    return numpy.asarray(variable[...])


def compare_arrays(x: numpy.ndarray, y: numpy.ndarray) -> tuple[float, float] | None:
    """None where x and y hold the same values bit for bit (NaN equal to NaN at the same
    place); else the largest absolute and relative difference."""
    if x.dtype.kind not in "fciu":
        return None if numpy.array_equal(x, y) else (float("nan"), float("nan"))
    if x.tobytes() == y.tobytes():
        return None
    xf, yf = x.astype(numpy.float64), y.astype(numpy.float64)
    both_nan = numpy.isnan(xf) & numpy.isnan(yf)
    diff = numpy.where(both_nan, 0.0, numpy.abs(xf - yf))
    scale = numpy.maximum(numpy.abs(xf), numpy.abs(yf))
    with numpy.errstate(divide="ignore", invalid="ignore"):
        rel = numpy.where(diff == 0, 0.0, diff / scale)
    # the same value in another bit pattern (e.g. -0.0 vs 0.0) is a difference too
    return float(numpy.nanmax(diff)), float(numpy.nanmax(rel))


def compare_netcdf(a: Path, b: Path, name: str, comparison: Comparison) -> None:
    with netCDF4.Dataset(a) as da, netCDF4.Dataset(b) as db:
        names_a, names_b = set(da.variables), set(db.variables)
        for only, where in ((names_a - names_b, comparison.a), (names_b - names_a, comparison.b)):
            for variable in sorted(only):
                comparison.differences.append(
                    Difference(name, variable, f"only in {where}")
                )  # fmt: skip
        for variable in sorted(names_a & names_b):
            comparison.compared.append(f"{name}:{variable}")
            x, y = _values(da.variables[variable]), _values(db.variables[variable])
            if x.shape != y.shape or x.dtype != y.dtype:
                what = f"shape/type {x.shape} {x.dtype} vs {y.shape} {y.dtype}"
                comparison.differences.append(Difference(name, variable, what))
                continue
            found = compare_arrays(x, y)
            if found:
                comparison.differences.append(
                    Difference(name, variable, "data differ", found[0], found[1])
                )


def compare(a: Path, b: Path) -> Comparison:
    """Compare the outputs of run directories a and b (each a bench.cases run)."""
    a, b = Path(a), Path(b)
    for run_dir in (a, b):
        if not run_dir.is_dir() or not _stats_files(run_dir):
            raise ClimstackError(
                f"{run_dir} is no run directory of a case (no *.stats file there)",
                fix="give two run directories of `climstack run-case`",
            )
    comparison = Comparison(a, b)
    for kind, names_a, names_b in (
        ("stats", _stats_files(a), _stats_files(b)),
        ("netcdf", _netcdf_files(a), _netcdf_files(b)),
    ):
        for name in sorted(names_a ^ names_b):
            where = a if name in names_a else b
            comparison.differences.append(Difference(name, None, f"only in {where}"))
        for name in sorted(names_a & names_b):
            if kind == "stats":
                comparison.compared.append(name)
                if (a / name).read_bytes() != (b / name).read_bytes():
                    comparison.differences.append(Difference(name, None, _first_line(a, b, name)))
            else:
                compare_netcdf(a / name, b / name, name, comparison)
    return comparison


def _first_line(a: Path, b: Path, name: str) -> str:
    """The first line where two text files differ, for the message."""
    lines_a = (a / name).read_text(errors="replace").splitlines()
    lines_b = (b / name).read_text(errors="replace").splitlines()
    for number, (x, y) in enumerate(zip(lines_a, lines_b), start=1):
        if x != y:
            return f"text differs from line {number}: {x.strip()!r} vs {y.strip()!r}"
    return f"text differs in length ({len(lines_a)} vs {len(lines_b)} lines)"


def check(a: Path, b: Path) -> Comparison:
    """compare(), raising a ClimstackError naming every difference unless bit-identical."""
    comparison = compare(a, b)
    if not comparison.identical:
        raise ClimstackError(
            comparison.summary(),
            fix="the two runs do not give the same answers: see the variables named",
        )
    return comparison
