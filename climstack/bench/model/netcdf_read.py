"""A NetCDF output read for a comparison (climstack.bench.model.bitwise): whole or not at all,
as a tree of its groups with their attributes, dimensions and variables, the data left in
the file to read variable by variable.

A file that does not read is a ToolFailure naming it: netCDF4's errors (corrupt, not
NetCDF), an empty file, and a classic-format file smaller than its header says (libnetcdf
would read the missing bytes as zeros, a run cut short as answers)."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy

from climstack.bench.model import cases
from climstack.errors import ClimstackError, ToolFailure

if TYPE_CHECKING:
    import netCDF4


def _netcdf4():
    """netCDF4, imported when a file is read: it is of the `bench` extra, which the core
    commands run without."""
    try:
        import netCDF4 as module
    except ImportError as err:
        raise ClimstackError(
            f"comparing NetCDF outputs needs netCDF4, which is not installed: {err}",
            fix="install the benchmark extra: `pip install '.[bench]'` (bin/setup does)",
        ) from err
    return module


class _Unreadable(Exception):
    """A NetCDF file that does not read: the caller names it in a ToolFailure."""


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Errors of netCDF4 (OSError, RuntimeError) and of our header check while reading
    `path` as a ToolFailure naming it."""
    try:
        yield
    except (OSError, RuntimeError, _Unreadable) as err:
        raise ToolFailure(
            f"{path} does not read as NetCDF: {err}",
            fix=f"the run that wrote it did not finish, or its file system failed: read the "
            f"run's {cases.STDOUT} (or its job's output), then run it again",
        ) from None


#: the classic formats' magic numbers -> bytes of a count, of an offset (NetCDF's "File
#: Format Specification": CDF-1 classic, CDF-2 64-bit offset, CDF-5 64-bit data)
_CLASSIC = {b"CDF\x01": (4, 4), b"CDF\x02": (4, 8), b"CDF\x05": (8, 8)}
#: nc_type -> bytes of a value
_TYPE_SIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 4, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 8}
_DIMENSION, _VARIABLE, _ATTRIBUTE = 0x0A, 0x0B, 0x0C


class _HeaderCut(_Unreadable):
    """The header of a classic NetCDF file runs past the bytes read."""


class _Header:
    """A reader of a classic NetCDF file's header (big-endian, 4-byte aligned)."""

    def __init__(self, data: bytes, count: int, offset: int):
        self.data, self.at, self.count, self.offset = data, 4, count, offset

    def number(self, size: int) -> int:
        self.at += size
        if self.at > len(self.data):
            raise _HeaderCut(f"truncated within its header ({len(self.data)} bytes read)")
        return int.from_bytes(self.data[self.at - size : self.at], "big")

    def skip(self, size: int) -> None:
        self.at += -(-size // 4) * 4
        if self.at > len(self.data):
            raise _HeaderCut(f"truncated within its header ({len(self.data)} bytes read)")

    def items(self, tag: int) -> int:
        found, count = self.number(4), self.number(self.count)
        if found not in (0, tag) or (found == 0 and count):
            raise _Unreadable(f"a corrupt header (tag {found:#x} before byte {self.at})")
        return count

    def name(self) -> None:
        self.skip(self.number(self.count))

    def attributes(self) -> None:
        for _ in range(self.items(_ATTRIBUTE)):
            self.name()
            kind = self.number(4)
            self.skip(self.number(self.count) * _TYPE_SIZE.get(kind, 1))


def _classic_size(data: bytes) -> int | None:
    """The bytes a classic NetCDF file's header (data: its first bytes) says the file holds
    (None: another format, or a streamed file whose header does not tell)."""
    if data[:4] not in _CLASSIC:
        return None
    header = _Header(data, *_CLASSIC[data[:4]])
    records = header.number(header.count)
    lengths = []
    for _ in range(header.items(_DIMENSION)):
        header.name()
        lengths.append(header.number(header.count))
    header.attributes()
    variables = []  # (begin, bytes of the variable or of one record of it, record variable)
    for _ in range(header.items(_VARIABLE)):
        header.name()
        dims = [header.number(header.count) for _ in range(header.number(header.count))]
        header.attributes()
        kind = header.number(4)
        header.number(header.count)  # vsize: computed below (it saturates for large ones)
        begin = header.number(header.offset)
        if any(d >= len(lengths) for d in dims) or kind not in _TYPE_SIZE:
            raise _Unreadable(f"a corrupt header (variable {len(variables) + 1})")
        record = bool(dims) and lengths[dims[0]] == 0
        size = int(numpy.prod([lengths[d] for d in dims[record:]])) * _TYPE_SIZE[kind]
        variables.append((begin, size, record))
    if records == (1 << 8 * header.count) - 1:  # streaming: numrecs not written
        return None
    return _data_end(header.at, variables, records)


def _data_end(header_end: int, variables: list, records: int) -> int:
    """Where the last variable's data end (libnetcdf's layout: a record holds each record
    variable padded to 4 bytes, unless there is only one)."""
    sizes = [size for _, size, record in variables if record]
    record_size = sum(sizes) if len(sizes) == 1 else sum(-(-s // 4) * 4 for s in sizes)
    ends = [header_end]
    for begin, size, record in variables:
        if not record:
            ends.append(begin + size)
        elif records:
            ends.append(begin + (records - 1) * record_size + size)
    return max(ends)


def _check_size(path: Path) -> None:
    """A classic NetCDF file cut short reads as zeros (libnetcdf fills in what is missing):
    refuse one smaller than its header says, or empty."""
    size = path.stat().st_size
    if not size:
        raise _Unreadable("an empty file (0 bytes)")
    with path.open("rb") as stream:
        head = stream.read(1 << 20)
    try:
        needed = _classic_size(head)
    except _HeaderCut:
        if size <= len(head):
            raise
        needed = _classic_size(path.read_bytes())  # a header of more than 1 MiB
    if needed is not None and size < needed:
        raise _Unreadable(f"truncated: {size} bytes, its header describes {needed}")


@dataclass
class Variable:
    handle: "netCDF4.Variable"
    dtype: str
    dimensions: tuple[str, ...]
    shape: tuple[int, ...]
    attributes: dict


@dataclass
class Group:
    """What one group of a NetCDF file holds (groups nested), its data left in the file."""

    path: str  # "" for the root group, else "name/name"
    attributes: dict
    dimensions: dict[str, tuple[int, bool]]  # name -> (size, unlimited)
    variables: dict[str, Variable]
    groups: dict[str, "Group"]

    def count(self) -> int:
        return len(self.variables) + sum(g.count() for g in self.groups.values())


def _attributes(thing) -> dict:
    return {name: thing.getncattr(name) for name in thing.ncattrs()}


def _group(group, path: str = "") -> Group:
    variables = {}
    for name, variable in group.variables.items():
        variable.set_auto_maskandscale(False)  # bits, not meanings
        variable.set_auto_chartostring(False)
        variables[name] = Variable(
            variable, str(variable.dtype), variable.dimensions, variable.shape,
            _attributes(variable),
        )  # fmt: skip
    return Group(
        path,
        _attributes(group),
        {name: (len(d), d.isunlimited()) for name, d in group.dimensions.items()},
        variables,
        {name: _group(g, f"{path}{name}/") for name, g in group.groups.items()},
    )


@contextmanager
def open_tree(path: Path) -> Iterator[Group]:
    """The tree of the NetCDF file at path, checked whole first (else a ToolFailure naming
    it), its data read from the file until the `with` ends."""
    with reading(path):
        _check_size(path)
        data = _netcdf4().Dataset(path)
    try:
        with reading(path):
            tree = _group(data)
        yield tree
    finally:
        data.close()
