"""Bit-for-bit comparison of two runs of a model's case (bench.cases): the text statistics
(`ocean.stats`, what MOM6's own regression tests compare) byte for byte, and every NetCDF
output by its contents, not the file's bytes (another libnetcdf may lay a file out
otherwise): in every group, recursively, the attributes, the dimensions (names, sizes,
unlimited or not) and each variable's type, dimensions, attributes and data bit for bit.
A variable that differs is named with its largest absolute and relative difference, and
bit patterns that differ at equal values (NaN payloads, -0.0 vs 0.0) are named as such.

An output missing from one run, or one that does not read (empty, truncated, corrupt), is
no verdict: it raises a ToolFailure naming the file (NetCDF files are read, and checked
whole, by climstack.bench.model.netcdf_read). So does a comparison that compared nothing (a
NetCDF file without variables, an empty *.stats, is not counted)."""

from dataclasses import dataclass, field
from pathlib import Path

import numpy

from climstack.bench.model import cases, netcdf_read
from climstack.errors import ClimstackError, ToolFailure

#: global attributes two runs with the same answers may differ in, and only those: `history`
#: (CF/NUG: who made the file, when, with what; a tool that touches a file appends to it).
#: MOM6's own outputs name no run directory or time of writing (checked on the case's run:
#: global `NumFilesInSet`, `filename` = "./prog.nc", `title`, `grid_type`, `grid_tile`;
#: variables' `checksum`, `units`, `cell_methods`, ...), so they are compared as the rest.
IGNORED_ATTRIBUTES = frozenset({"history"})


@dataclass
class Difference:
    path: str  # relative to the run directory
    variable: str | None  # None: the file (or a group) as a whole; "group/name" in a group
    what: str
    max_abs: float | None = None
    max_rel: float | None = None
    note: str = ""  # where and how else the bits differ (after the largest differences)

    def __str__(self) -> str:
        where = f"{self.path}:{self.variable}" if self.variable else self.path
        text = f"{where}: {self.what}"
        if self.max_abs is not None:
            text += f" (max abs {self.max_abs:.6g}, max rel {self.max_rel:.6g})"
        return f"{text} {self.note}" if self.note else text


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


# --- arrays, bit for bit


@dataclass(frozen=True)
class ArrayDifference:
    """Where two arrays of one shape and type hold other bits, by kind of difference."""

    size: int  # elements in each array
    values: int = 0  # places whose values differ (numbers, or a number vs a NaN)
    nan_vs_number: int = 0  # of those, a NaN in one array only
    nan_patterns: int = 0  # NaN in both, other bits (payload, sign)
    zero_signs: int = 0  # -0.0 vs 0.0: equal values, other bits
    other: int = 0  # places of a non-numeric type whose bytes differ
    max_abs: float | None = None  # over the numbers that differ
    max_rel: float | None = None

    def difference(self, path: str, variable: str | None) -> Difference:
        """The Difference to report: the numbers that differ first, then the rest."""
        numbers = self.values - self.nan_vs_number
        parts = [
            (self.nan_vs_number, "NaN in one run only"),
            (self.nan_patterns, "NaN bit patterns differ"),
            (self.zero_signs, "signed zeros differ (-0.0 vs 0.0)"),
            (self.other, "data differ"),
        ]
        found = [f"{text} at {self._places(n)}" for n, text in parts if n]
        if numbers:
            note = "; ".join([f"at {self._places(numbers)}", *found])
            return Difference(path, variable, "data differ", self.max_abs, self.max_rel, note)
        return Difference(path, variable, found[0], note="; ".join(found[1:]))

    def _places(self, count: int) -> str:
        return f"{count} of {self.size} place" + ("s" if self.size != 1 else "")


def _native(x: numpy.ndarray) -> numpy.ndarray:
    x = numpy.ascontiguousarray(x)
    return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))


def _differing(x: numpy.ndarray, y: numpy.ndarray) -> numpy.ndarray:
    """A flat boolean array: True where the elements' bits differ."""
    if x.dtype.kind == "O":  # variable-length strings: Python objects, compared as values
        return numpy.array([p != q for p, q in zip(x.flat, y.flat)], dtype=bool)
    x, y = _native(x), _native(y)
    width = x.dtype.itemsize
    if width in (1, 2, 4, 8):  # each element as an unsigned integer of its width
        return x.reshape(-1).view(f"u{width}") != y.reshape(-1).view(f"u{width}")
    bytes_x = x.reshape(-1).view(numpy.uint8).reshape(x.size, width)
    return (bytes_x != y.reshape(-1).view(numpy.uint8).reshape(y.size, width)).any(axis=1)


def compare_arrays(x: numpy.ndarray, y: numpy.ndarray) -> ArrayDifference | None:
    """None where x and y (one shape, one type) hold the same bits everywhere; else where
    and how they differ: NaN equals NaN only with the same bit pattern, and -0.0 is not 0.0."""
    differ = _differing(x, y)
    if not differ.any():
        return None
    if x.dtype.kind not in "fiu":
        return ArrayDifference(x.size, other=int(differ.sum()))
    xs, ys = x.reshape(-1)[differ], y.reshape(-1)[differ]  # only the places that differ
    is_nan = numpy.isnan if x.dtype.kind == "f" else numpy.zeros_like  # (no integer NaN)
    nan_x, nan_y = is_nan(xs).astype(bool), is_nan(ys).astype(bool)
    both_nan, one_nan = nan_x & nan_y, nan_x ^ nan_y
    equal = xs == ys  # other bits at equal values: -0.0 vs 0.0
    numbers = ~(both_nan | one_nan | equal)
    max_abs, max_rel = _largest(xs[numbers], ys[numbers])
    return ArrayDifference(
        x.size,
        values=int(numbers.sum() + one_nan.sum()),
        nan_vs_number=int(one_nan.sum()),
        nan_patterns=int(both_nan.sum()),
        zero_signs=int(equal.sum()),
        max_abs=max_abs,
        max_rel=max_rel,
    )


def _largest(xs: numpy.ndarray, ys: numpy.ndarray) -> tuple[float | None, float | None]:
    """The largest absolute and relative difference of numbers that differ (no NaN)."""
    if not xs.size:
        return None, None
    xf, yf = xs.astype(numpy.float64), ys.astype(numpy.float64)
    diff = numpy.abs(xf - yf)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        rel = diff / numpy.maximum(numpy.abs(xf), numpy.abs(yf))  # inf vs a number: NaN
    max_rel = float(numpy.nanmax(rel)) if not numpy.isnan(rel).all() else float("nan")
    return float(diff.max()), max_rel


def _same_value(x, y) -> bool:
    """Two attribute values the same, bit for bit (numbers as arrays of their type)."""
    if isinstance(x, str) or isinstance(y, str):
        return x == y
    x, y = numpy.asarray(x), numpy.asarray(y)
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    return compare_arrays(x, y) is None


# --- NetCDF files


class _Files:
    """The comparison of one NetCDF output of both runs, adding to `comparison`."""

    def __init__(self, name: str, a: Path, b: Path, comparison: Comparison):
        self.name, self.a, self.b, self.comparison = name, a, b, comparison

    def differ(self, variable: str | None, what: str) -> None:
        self.comparison.differences.append(Difference(self.name, variable, what))

    def group(self, ga: netcdf_read.Group, gb: netcdf_read.Group) -> None:
        where = f"group /{ga.path.rstrip('/')}: " if ga.path else ""
        ignored = IGNORED_ATTRIBUTES if not ga.path else frozenset()
        kind = "attribute" if ga.path else "global attribute"
        self.attributes(None, f"{where}{kind}", ga.attributes, gb.attributes, ignored)
        self.dimensions(where, ga.dimensions, gb.dimensions)
        for name, (va, vb) in self.pairs(ga.variables, gb.variables, None, where + "variable"):
            self.variable(f"{ga.path}{name}", va, vb)
        for _, (sa, sb) in self.pairs(ga.groups, gb.groups, None, where + "group"):
            self.group(sa, sb)

    def pairs(self, in_a: dict, in_b: dict, variable, kind: str):
        """The items in both (name, (a's, b's)); those in one only are differences."""
        for name in sorted(in_a.keys() ^ in_b.keys()):
            where = self.comparison.a if name in in_a else self.comparison.b
            self.differ(variable, f"{kind} {name!r} only in {where}")
        return [(name, (in_a[name], in_b[name])) for name in sorted(in_a.keys() & in_b.keys())]

    def attributes(self, variable, kind: str, in_a: dict, in_b: dict, ignored=frozenset()):
        in_a = {k: v for k, v in in_a.items() if k not in ignored}
        in_b = {k: v for k, v in in_b.items() if k not in ignored}
        for name, (x, y) in self.pairs(in_a, in_b, variable, kind):
            if not _same_value(x, y):
                self.differ(variable, f"{kind} {name!r} differs: {x!r} vs {y!r}")

    def dimensions(self, where: str, in_a: dict, in_b: dict) -> None:
        for name, (x, y) in self.pairs(in_a, in_b, None, where + "dimension"):
            if x != y:
                self.differ(None, f"{where}dimension {name!r}: {_dim(*x)} vs {_dim(*y)}")

    def variable(self, name: str, va: netcdf_read.Variable, vb: netcdf_read.Variable) -> None:
        self.comparison.compared.append(f"{self.name}:{name}")
        self.attributes(name, "attribute", va.attributes, vb.attributes)
        layout_a, layout_b = (va.dtype, va.dimensions, va.shape), (
            vb.dtype,
            vb.dimensions,
            vb.shape,
        )
        if layout_a != layout_b:
            self.differ(
                name, f"type/dimensions/shape {_layout(*layout_a)} vs {_layout(*layout_b)}"
            )
            return
        with netcdf_read.reading(self.a):
            x = numpy.asarray(va.handle[...])
        with netcdf_read.reading(self.b):
            y = numpy.asarray(vb.handle[...])
        found = compare_arrays(x, y)
        if found:
            self.comparison.differences.append(found.difference(self.name, name))


def _dim(size: int, unlimited: bool) -> str:
    return f"{size} (unlimited)" if unlimited else str(size)


def _layout(dtype: str, dimensions: tuple, shape: tuple) -> str:
    return f"{dtype} ({', '.join(dimensions)}) {shape}"


def compare_netcdf(a: Path, b: Path, name: str, comparison: Comparison) -> None:
    """Two NetCDF files, all of them; their variables added to comparison.compared (a file
    without variables in either run is compared but not counted)."""
    with netcdf_read.open_tree(a) as ta, netcdf_read.open_tree(b) as tb:
        before = len(comparison.compared)
        _Files(name, a, b, comparison).group(ta, tb)
        if not ta.count() and not tb.count():
            del comparison.compared[before:]


# --- run directories


def _stats_files(run_dir: Path) -> set[str]:
    return {p.name for p in run_dir.glob("*.stats")}


def _netcdf_files(run_dir: Path) -> set[str]:
    return {str(p.relative_to(run_dir)) for p in run_dir.rglob("*.nc")}


def require_run_directory(run_dir: Path) -> Path:
    """run_dir, if it is a run directory of a case (it holds a *.stats file); else bad
    input, before anything runs."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir() or not _stats_files(run_dir):
        what = "does not exist" if not run_dir.exists() else "is no run directory of a case"
        raise ClimstackError(
            f"{run_dir} {what} (no *.stats file there)",
            fix="give a run directory of `climstack run-case` (one that finished: it holds "
            "the model's ocean.stats)",
        )
    return run_dir


def _missing(a: Path, b: Path, names_a: set[str], names_b: set[str]) -> None:
    """Outputs one run wrote and the other did not: that run did not finish."""
    missing = [
        f"{(b if name in names_a else a) / name} (written in {a if name in names_a else b})"
        for name in sorted(names_a ^ names_b)
    ]
    if missing:
        raise ToolFailure(
            "outputs missing: " + ", ".join(missing),
            fix=f"the run that lacks them did not finish: read its {cases.STDOUT}, then run "
            "it again",
        )


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise ToolFailure(f"{path} does not read: {err}", fix="check its permissions") from None


def compare(a: Path, b: Path) -> Comparison:
    """Compare the outputs of run directories a and b (each a bench.cases run)."""
    a, b = require_run_directory(a), require_run_directory(b)
    stats = _stats_files(a), _stats_files(b)
    netcdf = _netcdf_files(a), _netcdf_files(b)
    _missing(a, b, stats[0] | netcdf[0], stats[1] | netcdf[1])
    comparison = Comparison(a, b)
    for name in sorted(stats[0]):
        text_a, text_b = _read(a / name), _read(b / name)
        if text_a or text_b:  # an empty one in both runs is not counted
            comparison.compared.append(name)
        if text_a != text_b:
            comparison.differences.append(Difference(name, None, _first_line(a, b, name)))
    for name in sorted(netcdf[0]):
        compare_netcdf(a / name, b / name, name, comparison)
    if not comparison.compared:
        raise ToolFailure(
            f"{a} and {b}: nothing was compared (empty *.stats, no NetCDF variable)",
            fix=f"the runs wrote no answers: read their {cases.STDOUT}",
        )
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
